// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! State shared between the agent's portus thread (which owns the flows and the agent core)
//! and its other threads (slot timer, gRPC tasks, PCN burst gate): the status snapshot, the
//! inbox of core inputs posted from other threads (ticks, RPC answers, other agents' notices),
//! counters, the flows' latest RTTs (for the PCN burst gate), and an eventfd that wakes the
//! portus thread when an input is posted.

use crate::agent_core::Input;
use crate::proto;
use nix::sys::eventfd::{EfdFlags, EventFd};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The shared state (see the module docs).
pub struct Shared {
    /// The last slot's status, served by `Status`.
    pub status: Mutex<proto::StatusReply>,
    /// Inputs posted and not yet handed to the core by the portus thread.
    inbox: Mutex<Vec<Input>>,
    /// Notices received over gRPC.
    pub notices_received: AtomicU64,
    /// RPCs that failed or timed out, by RPC (their sum is `StatusReply::rpc_failures`).
    pub rpc_failures: RpcFailures,
    /// Datapath messages dropped because portus could not have parsed them.
    pub dropped_unparsable: AtomicU64,
    /// SET_CLASS messages ([`crate::agent_core::Action::SetClass`]) the datapath socket did
    /// not take.
    pub class_send_failures: AtomicU64,
    /// The netlink backend's drop counters (none with unix IPC).
    pub drops: Mutex<Option<Arc<ccp_ipc::DropCounters>>>,
    /// Flow id → its RTT in the last slot's reports, µs (flows with a report only).
    pub rtt_us: Mutex<HashMap<u64, u64>>,
    /// Burst requests granted by the PCN burst gate.
    pub bursts_granted: AtomicU64,
    /// Of those, granted on the switches' acknowledgements before one RTT passed.
    pub bursts_granted_on_ack: AtomicU64,
    /// `PcnStart`s sent.
    pub pcn_starts: AtomicU64,
    /// `PcnEnd`s sent because the burst was seen leaving its process.
    pub pcn_ends_on_burst: AtomicU64,
    /// Per-slot timings for the metrics endpoint (`--metrics-addr`).
    pub timings: SlotTimings,
    wake: EventFd,
}

impl Shared {
    /// New shared state with its eventfd. Errors: eventfd(2) failed.
    pub fn new() -> std::io::Result<Arc<Self>> {
        let wake =
            EventFd::from_value_and_flags(0, EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)?;
        Ok(Arc::new(Shared {
            status: Mutex::default(),
            inbox: Mutex::default(),
            notices_received: AtomicU64::new(0),
            rpc_failures: RpcFailures::default(),
            dropped_unparsable: AtomicU64::new(0),
            class_send_failures: AtomicU64::new(0),
            drops: Mutex::default(),
            rtt_us: Mutex::default(),
            bursts_granted: AtomicU64::new(0),
            bursts_granted_on_ack: AtomicU64::new(0),
            pcn_starts: AtomicU64::new(0),
            pcn_ends_on_burst: AtomicU64::new(0),
            timings: SlotTimings::default(),
            wake,
        }))
    }

    /// Queues another agent's notice for the core (counted) and wakes the portus thread.
    pub fn deliver(&self, n: proto::DependencyNotice) {
        self.notices_received.fetch_add(1, Ordering::Relaxed);
        self.post(Input::Notices(vec![n]));
    }

    /// Queues an input for the core and wakes the portus thread.
    pub fn post(&self, input: Input) {
        self.inbox
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(input);
        // A full counter (EAGAIN) only means the thread is already woken.
        let _ = self.wake.write(1);
    }

    /// Takes the queued inputs, oldest first, and clears the wake-up.
    pub fn take_inbox(&self) -> Vec<Input> {
        // Resets the counter; EAGAIN (nothing posted since the last take) is fine.
        let _ = self.wake.read();
        std::mem::take(&mut *self.inbox.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The eventfd to poll (it stays owned by `self`).
    pub fn wake_fd(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }

    /// The status with the live counters filled in.
    pub fn status(&self) -> proto::StatusReply {
        let mut s = self
            .status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        s.notices_received = self.notices_received.load(Ordering::Relaxed);
        s.rpc_failures = self.rpc_failures.total();
        s.bursts_granted = self.bursts_granted.load(Ordering::Relaxed);
        s.bursts_granted_on_ack = self.bursts_granted_on_ack.load(Ordering::Relaxed);
        s.pcn_starts = self.pcn_starts.load(Ordering::Relaxed);
        s.pcn_ends_on_burst = self.pcn_ends_on_burst.load(Ordering::Relaxed);
        let d = self.drops();
        s.dropped_foreign = d.foreign;
        s.dropped_bad = d.malformed + d.unparsable;
        s
    }

    /// The datapath messages dropped so far, by cause.
    pub fn drops(&self) -> Drops {
        let (foreign, malformed) = match &*self.drops.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(d) => (
                d.foreign.load(Ordering::Relaxed),
                d.bad.load(Ordering::Relaxed),
            ),
            None => (0, 0),
        };
        Drops {
            foreign,
            malformed,
            unparsable: self.dropped_unparsable.load(Ordering::Relaxed),
        }
    }
}

/// Datapath messages the agent dropped, by cause (what the agent sees; the module's own
/// refusals, e.g. of an unprivileged sender's messages, are only in the kernel log).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drops {
    /// Netlink messages not sent by the kernel (sender port id != 0).
    pub foreign: u64,
    /// Messages from the kernel that were malformed or of a type a datapath never sends.
    pub malformed: u64,
    /// Messages the agent's own check found portus could not take (unix IPC, or anything the
    /// netlink check let through).
    pub unparsable: u64,
}

/// The agent's RPCs, as counted by [`RpcFailures`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcKind {
    /// `Switch.FetchFeedback`.
    FetchFeedback,
    /// `Switch.UpdateSchedule`.
    UpdateSchedule,
    /// `Switch.PcnStart`.
    PcnStart,
    /// `Agent.Notify` (to another agent).
    Notify,
}

impl RpcKind {
    /// Every RPC, in the order of [`RpcFailures::by_rpc`].
    pub const ALL: [RpcKind; 4] = [
        RpcKind::FetchFeedback,
        RpcKind::UpdateSchedule,
        RpcKind::PcnStart,
        RpcKind::Notify,
    ];

    /// The RPC's name in the gRPC schema (`ccp-agent/core/proto/mlcc.proto`).
    pub fn name(self) -> &'static str {
        match self {
            RpcKind::FetchFeedback => "FetchFeedback",
            RpcKind::UpdateSchedule => "UpdateSchedule",
            RpcKind::PcnStart => "PcnStart",
            RpcKind::Notify => "Notify",
        }
    }
}

/// Failed or timed-out RPCs, one counter per [`RpcKind`].
#[derive(Debug, Default)]
pub struct RpcFailures([AtomicU64; 4]);

impl RpcFailures {
    /// Counts one failure of `rpc`.
    pub fn add(&self, rpc: RpcKind) {
        self.0[rpc as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The failures of each RPC, in the order of [`RpcKind::ALL`].
    pub fn by_rpc(&self) -> [(RpcKind, u64); 4] {
        RpcKind::ALL.map(|r| (r, self.0[r as usize].load(Ordering::Relaxed)))
    }

    /// All failures.
    pub fn total(&self) -> u64 {
        self.by_rpc().iter().map(|(_, n)| n).sum()
    }
}

/// The per-slot timing histograms, in seconds; observed by the agent's datapath thread.
#[derive(Debug, Clone)]
pub struct SlotTimings {
    /// The datapath thread's work on each slot (`StatusReply::slot_work_us`).
    pub slot_work: Histogram,
    /// The core's handling of the input that planned each slot (step 4 of
    /// [`crate::agent_core`], with the rest of that input's handling; without performing the
    /// actions).
    pub decision: Histogram,
}

impl Default for SlotTimings {
    fn default() -> Self {
        // 10 µs .. ~0.33 s: a slot's work is typically tens to hundreds of µs, and must stay
        // well under the slot (30 ms by default).
        SlotTimings {
            slot_work: Histogram::new(exponential_buckets(10e-6, 2.0, 16)),
            decision: Histogram::new(exponential_buckets(10e-6, 2.0, 16)),
        }
    }
}
