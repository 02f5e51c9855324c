// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! What the monitoring block knows of a flow: its job, rank, role and progress in the current
//! iteration, as plain data. The agent's monitor (`ccp_agent::monitor`) reads them from the
//! `mltcp-progress` regions the communication libraries write; the core takes a reading as an
//! input ([`crate::Input::Progress`]) and the tests build them by hand.
//!
//! "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers", Sec. V: the patched
//! communication library records the bytes of the current iteration in host shared memory and
//! the scheduler compares them with the model size.

use crate::flows::FlowKey;
use mltcp_progress::{FlowKind, Paradigm, Role};
use std::collections::HashMap;

/// What the progress interface says about one flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// Job id.
    pub job: String,
    /// The sending process's rank.
    pub rank: u32,
    /// The job's paradigm.
    pub paradigm: Paradigm,
    /// The sending process's role.
    pub role: Role,
    /// The flow's kind, as registered.
    pub kind: FlowKind,
    /// The receiver's rank (`mltcp_progress::NO_RANK` when not told).
    pub peer_rank: u32,
    /// Current iteration number.
    pub iteration: u64,
    /// When the current iteration began: CLOCK_MONOTONIC ns of the library's `begin_iteration`
    /// (0 = never), to tell which acknowledged bytes are the iteration's.
    pub iter_start_ns: u64,
    /// Bytes of the current iteration this flow has been handed (share of the process's).
    pub sent_bytes: u64,
    /// Bytes per iteration of this flow (share of the process's); `None` when not told.
    pub iteration_bytes: Option<u64>,
    /// Whether this end sends the flow's data (only sending flows are scheduled).
    pub sending: bool,
    /// Ring all-reduce: the bytes of one chunk (G/W), which a worker sends before it has received
    /// anything (its own chunk, step 1 of reduce-scatter); `None` when not a ring flow or the
    /// job's size or bytes are not told.
    pub ring_chunk_bytes: Option<u64>,
}

impl Registration {
    /// Bytes left in the current iteration (0 when unknown).
    pub fn remaining_bytes(&self) -> u64 {
        self.iteration_bytes
            .map_or(0, |b| b.saturating_sub(self.sent_bytes))
    }
}

/// Whether a flow of kind `kind` registered by a process of role `role` is sent by it (only
/// sending flows are scheduled, and only their bursts are announced).
pub fn is_sending(role: Role, kind: FlowKind) -> bool {
    match kind {
        FlowKind::RingSend | FlowKind::Unspecified => true,
        FlowKind::RingRecv => false,
        FlowKind::PsPush => role != Role::ParameterServer,
        FlowKind::PsPull => role == Role::ParameterServer,
    }
}

/// A reading of the progress regions: each registered flow's 4-tuple → its registration. The
/// core takes it as an input ([`crate::Input::Progress`]).
pub type Registrations = HashMap<FlowKey, Registration>;
