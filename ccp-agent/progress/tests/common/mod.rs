// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Helpers shared by the integration tests: a private region directory per test.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `<tmp>/mltcp-progress-<name>-<pid>`, emptied first.
    pub fn new(name: &str) -> Self {
        let d = std::env::temp_dir().join(format!("mltcp-progress-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("create test dir");
        TempDir(d)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writer options for `dir` with `max_flows` slots.
pub fn opts(dir: &Path, max_flows: u32) -> mltcp_progress::WriterOptions {
    mltcp_progress::WriterOptions {
        dir: Some(dir.to_path_buf()),
        max_flows,
    }
}

/// The staticlib cargo built next to this test binary (`target/<profile>/deps/`, or its parent).
pub fn staticlib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for d in [deps, deps.parent().unwrap()] {
        let p = d.join("libmltcp_progress.a");
        if p.exists() {
            return p;
        }
    }
    panic!("libmltcp_progress.a not found near {}", exe.display());
}

/// Scans `dir` with a fresh [`mltcp_progress::Scanner`], expects exactly the region file `file`
/// and returns the scanner with that region's snapshot.
pub fn scan_one(dir: &Path, file: &str) -> (mltcp_progress::Scanner, mltcp_progress::Snapshot) {
    let mut s = mltcp_progress::Scanner::new(dir);
    let rep = s.scan().unwrap();
    assert!(rep.refused.is_empty(), "{:?}", rep.refused);
    assert_eq!(rep.added, vec![dir.join(file)]);
    let (mut snaps, errors) = s.poll();
    assert!(errors.is_empty(), "{errors:?}");
    (s, snaps.remove(0).1)
}

/// The job part of a ring worker's region, as the C side should have written it: job id, rank,
/// world size, paradigm Ring, role Worker, ring predecessor and successor, bytes per iteration.
pub fn assert_ring_worker(
    b: &mltcp_progress::layout::Body,
    (job, rank, world): (&str, u32, u32),
    (pred, succ, bytes_per_iteration): (u32, u32, u64),
) {
    use mltcp_progress::{Paradigm, Role};
    assert_eq!(
        (b.job.job_id.as_str(), b.job.rank, b.job.world_size),
        (job, rank, world)
    );
    assert_eq!(Paradigm::from_raw(b.job.paradigm), Some(Paradigm::Ring));
    assert_eq!(Role::from_raw(b.job.role), Some(Role::Worker));
    assert_eq!(
        (b.job.ring_pred, b.job.ring_succ, b.job.bytes_per_iteration),
        (pred, succ, bytes_per_iteration)
    );
}
