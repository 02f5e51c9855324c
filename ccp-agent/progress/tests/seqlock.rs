// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Seqlock torture test: one thread updates a region as fast as it can (hot counters and the
//! cold job/flow part, in patterns whose every published state satisfies invariants), while
//! readers snapshot it through the reader API (pread copies). Any torn snapshot breaks an
//! invariant.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{opts, TempDir};
use mltcp_progress::{FlowKind, FlowRecord, Paradigm, Region, Role, Writer};

/// Adds per iteration `i`: three times `i` bytes.
const ADDS: u64 = 3;

/// The running total after iterations `1..i` completed (each adds `ADDS * j`).
fn total_before(i: u64) -> u64 {
    ADDS * (i - 1) * i / 2
}

fn flows_for(i: u64) -> Vec<FlowRecord> {
    (0..(i % 5) as usize)
        .map(|k| {
            let mut f = FlowRecord::new(
                "10.1.2.3:1".parse().unwrap(),
                "10.3.2.1:2".parse().unwrap(),
                FlowKind::RingSend,
                i as u32,
            );
            f.local_port = i as u16;
            f.remote_port = !(i as u16);
            f.local_addr[15] = k as u8; // unused bytes of an IPv4 record, varied per flow
            f.remote_addr = [i as u8; 16];
            f.remote_addr[..4].copy_from_slice(&[10, 3, 2, 1]);
            f
        })
        .collect()
}

/// A short busy pause between updates (about 2 µs), so the readers' copies (a `pread` of the
/// region, about as long) can fit between two updates: a real library reports bytes per chunk,
/// microseconds to milliseconds apart. Without any pause a reader could starve (its copies always
/// race); it would report that as an error, never return a torn copy.
fn pause() {
    let t = Instant::now();
    while t.elapsed() < Duration::from_micros(2) {
        std::hint::spin_loop();
    }
}

#[test]
fn concurrent_writer_and_readers_never_see_a_torn_region() {
    let dir = TempDir::new("seqlock");
    let mut w = Writer::create("torture", 0, &opts(dir.path(), 4096)).unwrap();
    w.set_job(Paradigm::Ring, Role::Worker, 2);
    let path = w.path().to_path_buf();
    let stop = Arc::new(AtomicBool::new(false));
    let updates = Arc::new(AtomicU64::new(0));

    let writer = {
        let (stop, updates) = (Arc::clone(&stop), Arc::clone(&updates));
        std::thread::spawn(move || {
            let mut i = 1u64;
            while !stop.load(Ordering::Relaxed) {
                // Cold part: bytes_per_iteration, the ring and the flows all encode `i`, published
                // together with the start of iteration `i`.
                w.batch(|w| {
                    w.set_bytes_per_iteration(i);
                    w.set_ring(i as u32, i as u32 + 1);
                    w.set_flows(&flows_for(i)).unwrap();
                    w.begin_iteration(i);
                });
                for _ in 0..ADDS {
                    w.add_bytes(i);
                    pause();
                }
                updates.fetch_add(1 + ADDS, Ordering::Relaxed);
                i += 1;
            }
            i
        })
    };

    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (stop, path) = (Arc::clone(&stop), path.clone());
            std::thread::spawn(move || {
                let region = Region::open(&path).unwrap();
                let (mut seen, mut busy) = (0u64, 0u64);
                let mut last_seq = 0;
                while !stop.load(Ordering::Relaxed) {
                    let s = match region.snapshot() {
                        Ok(s) => s,
                        // The writer was preempted in an update for longer than the snapshot's
                        // patience (the machine is shared and the tests run niced): transient.
                        Err(e) if e.is_transient() => {
                            busy += 1;
                            continue;
                        }
                        Err(e) => panic!("{e}"),
                    };
                    assert!(
                        s.seq >= last_seq && s.seq % 2 == 0,
                        "seq went from {last_seq} to {}",
                        s.seq
                    );
                    last_seq = s.seq;
                    let (job, hot) = (&s.body.job, &s.body.hot);
                    let b = job.bytes_per_iteration;
                    // Cold invariants: everything set from the same `b`.
                    if b > 0 {
                        assert_eq!(
                            (job.ring_pred, job.ring_succ),
                            (b as u32, b as u32 + 1),
                            "{s:?}"
                        );
                        assert_eq!(s.body.flows, flows_for(b), "torn flows at b = {b}");
                    }
                    // Hot invariants: iteration `it` has 0..=ADDS adds of `it` bytes.
                    let it = hot.iteration;
                    if it > 0 {
                        assert!(it == b, "iteration {it} with bytes_per_iteration {b}");
                        assert!(
                            hot.iter_bytes % it == 0 && hot.iter_bytes / it <= ADDS,
                            "{hot:?}"
                        );
                        assert_eq!(
                            hot.total_bytes,
                            total_before(it) + hot.iter_bytes,
                            "{hot:?}"
                        );
                    }
                    seen += 1;
                }
                (seen, busy)
            })
        })
        .collect();

    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(1500) {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let iterations = writer.join().unwrap();
    let reads: Vec<(u64, u64)> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    eprintln!(
        "seqlock torture: {} updates ({} iterations), (snapshots, busy) per reader {:?}",
        updates.load(Ordering::Relaxed),
        iterations,
        reads
    );
    assert!(iterations > 100, "the writer barely ran");
    assert!(
        reads.iter().all(|&(n, _)| n > 100),
        "a reader barely ran: {reads:?}"
    );
}
