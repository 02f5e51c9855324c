// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The engine's event queues' entries: a job's timer (end of compute or of a shift) and its next
//! flow event, both ordered earliest first for a max-heap (`BinaryHeap`).

use std::cmp::Ordering;

/// A timer of a job (end of compute or of a shift).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Timer(pub(super) f64, pub(super) usize);
impl Eq for Timer {}
impl PartialOrd for Timer {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Timer {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}

/// A job's next flow event: (time, job, version), earliest first; stale when the job's version
/// moved on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct JobEvent(pub(super) f64, pub(super) usize, pub(super) u32);
impl Eq for JobEvent {}
impl PartialOrd for JobEvent {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for JobEvent {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}
