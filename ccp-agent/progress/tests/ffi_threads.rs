// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The C ABI's handle shared by threads: concurrent `add_bytes` lose nothing, and a thread
//! waiting in `before_burst` does not block the others' reports.

mod common;

use std::ffi::CString;
use std::time::{Duration, Instant};

use common::TempDir;
use mltcp_progress::ffi::{self, Handle};
use mltcp_progress::{Region, Scanner};

/// The handle pointer, shareable between the test's threads (the C ABI allows it).
#[derive(Clone, Copy)]
struct Shared(*mut Handle);
// SAFETY: progress.h allows a handle to be used from several threads; `Handle` serializes them.
unsafe impl Send for Shared {}

#[test]
fn threads_share_a_handle() {
    let dir = TempDir::new("ffi-threads");
    let job = CString::new("threads").unwrap();
    let d = CString::new(dir.path().to_str().unwrap()).unwrap();
    let mut h: *mut Handle = std::ptr::null_mut();
    // SAFETY: valid NUL-terminated strings and a valid out pointer.
    let r = unsafe { ffi::mltcp_progress_open(job.as_ptr(), 0, d.as_ptr(), 0, &mut h) };
    assert_eq!(r, 0);
    assert_eq!(ffi::mltcp_progress_begin_iteration(h, 1), 0);
    let path = dir.path().join("threads.0.region");
    let region = Region::open(&path).unwrap();
    region.attach(1).unwrap();

    // One thread waits for a grant (up to 10 s); once it waits, four others report, and only
    // when they are done is the burst granted. Had the waiter blocked the reporters, the grant
    // would come after its timeout and it would return TIMED_OUT.
    let shared = Shared(h);
    let outcome = std::thread::scope(|s| {
        let waiter = s.spawn(move || {
            let h = shared;
            ffi::mltcp_progress_before_burst(h.0, 10_000_000)
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while region.snapshot().unwrap().body.hot.burst_requests == 0 {
            assert!(Instant::now() < deadline, "no burst request");
            std::thread::sleep(Duration::from_millis(1));
        }
        let reporters: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(move || {
                    let h = shared;
                    for _ in 0..10_000 {
                        assert_eq!(ffi::mltcp_progress_add_bytes(h.0, 3), 0);
                    }
                })
            })
            .collect();
        // (Keep the agent's heartbeat fresh meanwhile, however slow the machine.)
        while !reporters.iter().all(|r| r.is_finished()) {
            region.heartbeat().unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        for r in reporters {
            r.join().unwrap();
        }
        region.grant_bursts(1).unwrap();
        waiter.join().unwrap()
    });
    assert_eq!(outcome, ffi::BURST_GRANTED);

    let mut s = Scanner::new(dir.path());
    s.scan().unwrap();
    let (snaps, _) = s.poll();
    let hot = snaps[0].1.body.hot;
    assert_eq!(
        (hot.iter_bytes, hot.total_bytes, hot.burst_requests),
        (120_000, 120_000, 1)
    );
    // SAFETY: `h` came from mltcp_progress_open, no thread uses it any more.
    assert_eq!(unsafe { ffi::mltcp_progress_close(h) }, 0);
    assert!(!path.exists());
}
