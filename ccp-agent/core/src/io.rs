// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! What goes into the agent core and what comes out of it: plain data, no handles, no clocks.
//!
//! The control loop of "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers",
//! Sec. IV-C (feedback, schedules, dependency notices) and Sec. V (the scheduler on CCP), cut at
//! its I/O: the shell turns datapath messages, gRPC replies, notices, progress readings and
//! timer ticks into [`Input`]s, and performs every [`Action`] the core returns. An RPC the core
//! asks for ([`Rpc`]) is answered by an input ([`Input::Feedback`], [`Input::Admission`]) when
//! the core waits for it. Units: rates in bit/s unless the name says bytes/s, times in µs of
//! the wall clock (slots are `floor(unix_time_us / slot_us)`), report dates in CLOCK_MONOTONIC
//! ns (the progress regions' clock).

use crate::flows::FlowKey;
use crate::proto;
use crate::registration::Registrations;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

/// The shell's number for one CCP flow (unique while the agent runs; never reused).
pub type LocalFlow = u64;

/// How often the shell reads the progress regions between slot boundaries with `[sched]
/// work_conserving` ([`Input::Poll`]), µs: a burst that begins mid-slot is planned within
/// this, not at the next 60 ms boundary. 10 ms was not tuned against other periods: a
/// reading costs a directory scan and one snapshot per region, and 6 per slot stay small
/// beside the slot's own work (2.7 ms per 60 ms slot on guest time, README "The ccp-agent
/// scenario on guest time"); with it, the guest CPU of the work-conserving `mltcp+agent`
/// runs there was 9-10 % per seed, against 8-18 % before (trainemu's `cpu` column).
pub const POLL_US: u64 = 10_000;

/// The fields of one datapath report (MEASURE) the core uses; `None` for a field the program
/// did not carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measurement {
    /// `Report.acked`: bytes acknowledged since the previous report.
    pub acked: Option<u64>,
    /// `Report.lost`: packets lost since the previous report.
    pub lost: Option<u64>,
    /// `Report.rtt`: the latest RTT sample, µs.
    pub rtt_us: Option<u64>,
    /// `Report.now`: the datapath's clock at the reporting ACK, µs since its own origin.
    pub dp_now_us: Option<u64>,
    /// When the report arrived, CLOCK_MONOTONIC ns.
    pub arrival_ns: u64,
}

/// Which datapath command of an [`Action`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// [`Action::Install`].
    Install,
    /// [`Action::SetRate`].
    SetRate,
    /// [`Action::SetClass`].
    SetClass,
}

/// An input of the core.
#[derive(Clone, Debug)]
pub enum Input {
    /// The time, wall-clock µs since the Unix epoch. At the first tick of a slot the core runs
    /// the slot's work (a later tick of the same slot only ends a slot whose replies are late
    /// when it belongs to a later slot). The shell's timer sends one per slot boundary.
    Tick {
        /// Wall-clock µs.
        now_us: u64,
    },
    /// A reading of the progress regions (the agent's monitor): replaces the previous reading;
    /// used for flows created from now on, at the next slot's start and at the next
    /// [`Input::Poll`].
    Progress(Registrations),
    /// The shell's poll between slot boundaries (every [`POLL_US`] with `[sched]
    /// work_conserving`), right after a fresh [`Input::Progress`]: without switches, when the
    /// reading shows a flow's burst beginning (a new iteration, or bytes handed to a flow
    /// planned nothing now), the core re-plans the slot at once (see [`crate`]).
    Poll,
    /// A datapath announced a flow (CREATE). A `flow` number already known is ignored.
    FlowCreated {
        /// The shell's number for it.
        flow: LocalFlow,
        /// Its 4-tuple.
        key: FlowKey,
        /// The datapath's socket id (for the log).
        sock_id: u32,
    },
    /// A report of an installed flow (MEASURE with fields).
    Report {
        /// The flow.
        flow: LocalFlow,
        /// Its fields.
        fields: Measurement,
    },
    /// The datapath closed a flow.
    FlowClosed {
        /// The flow.
        flow: LocalFlow,
    },
    /// The shell could not perform a datapath command for `flow` (the core had counted it as
    /// done: an install is retried at the next slot, a rate or a class at the next
    /// application).
    DatapathFailed {
        /// The flow.
        flow: LocalFlow,
        /// Which command.
        command: Command,
    },
    /// The answer to [`Rpc::FetchFeedback`]: the reply, or why there is none (error, deadline).
    Feedback {
        /// The switch's name.
        switch: String,
        /// The slot of the request.
        slot: u64,
        /// When the answer came, wall-clock µs.
        at_us: u64,
        /// The reply or the reason it failed.
        reply: Result<proto::FeedbackReply, String>,
    },
    /// The answer to an [`Rpc::UpdateSchedule`] with an admission wait: the switch's reply, or
    /// `None` when the update failed or was not answered within the wait.
    Admission {
        /// The switch's name.
        switch: String,
        /// The slot of the request.
        slot: u64,
        /// The reply.
        reply: Option<proto::UpdateReply>,
    },
    /// Other agents' dependency notices (`Notify`), in arrival order: handled together, with
    /// one round of rate updates, schedule updates and status after them.
    Notices(Vec<proto::DependencyNotice>),
    /// The agent stops (its datapath socket is already closed): the core asks the switches to
    /// drop its schedules.
    Stop {
        /// Wall-clock µs.
        now_us: u64,
    },
}

/// A gRPC request for the shell to send. Each carries its deadline; the shell counts failures.
#[derive(Clone, Debug, PartialEq)]
pub enum Rpc {
    /// `FetchFeedback` to switch `switch`; always answered by one [`Input::Feedback`].
    FetchFeedback {
        /// The switch's name (`[[switch]] name` of the topology).
        switch: String,
        /// The request (its `slot` is the one the answer carries).
        request: proto::FeedbackRequest,
        /// The RPC's deadline.
        timeout: Duration,
    },
    /// `UpdateSchedule` to switch `switch`.
    UpdateSchedule {
        /// The switch's name.
        switch: String,
        /// The request.
        request: proto::ScheduleUpdate,
        /// The RPC's deadline.
        timeout: Duration,
        /// `Some(w)`: the core waits for the admission: answer with one [`Input::Admission`]
        /// within `w` (the RPC itself may go on until `timeout`). `None`: nobody waits.
        admission_wait: Option<Duration>,
    },
    /// `Notify` to the agent at `peer`; nobody waits.
    Notify {
        /// The peer agent's gRPC address.
        peer: SocketAddr,
        /// The notice.
        notice: proto::DependencyNotice,
        /// The RPC's deadline.
        timeout: Duration,
    },
}

/// An output of the core, in the order the shell must perform them.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Install the datapath program on `flow` with these initial registers.
    Install {
        /// The flow.
        flow: LocalFlow,
        /// `Rate`, bytes/s.
        rate_bytes: u32,
        /// `Cwnd` and its ceiling `Control.cwnd_cap`, bytes.
        cwnd_bytes: u32,
        /// `Control.slot_us`, µs.
        slot_us: u32,
    },
    /// Set `Rate`, the window's ceiling `Control.cwnd_cap` and the scavenger target
    /// `Control.scavenge_us` of an installed flow (the datapath program keeps `Cwnd` at or
    /// below the ceiling, backing off on loss as Reno does).
    SetRate {
        /// The flow.
        flow: LocalFlow,
        /// `Rate`, bytes/s (at least 1).
        rate_bytes: u32,
        /// `Control.cwnd_cap`, bytes.
        cwnd_bytes: u32,
        /// `Control.scavenge_us`: the LEDBAT target queueing delay, µs, under which the
        /// program sets the window of a held flow ([`crate::CoreConfig::held_flows`]); 0: the
        /// program's Reno under the ceiling.
        scavenge_us: u32,
    },
    /// Mark an installed flow's packets with a traffic class: the datapath's SET_CLASS
    /// (`ccp_datapath::wire::SET_CLASS`), which writes the DSCP into the socket's TOS while the
    /// agent controls the flow. Emitted only with `classes` > 0 ([`crate::CoreConfig::classes`]),
    /// when the flow's class differs from the one last set; none at a flow's end (the datapath
    /// restores the socket's own marking when the flow leaves the agent).
    SetClass {
        /// The flow.
        flow: LocalFlow,
        /// `Some(dscp)`, 0..=63: its job's class's DSCP; `None`: give the flow back its
        /// socket's own marking (it is no longer planned).
        dscp: Option<u8>,
    },
    /// Send an RPC.
    Rpc(Rpc),
    /// The slot's status (without the shell's counters), for `ccp-agent status`.
    Status(proto::StatusReply),
    /// The flows' latest RTTs, flow id → µs (flows with a report in the past slot), for the PCN
    /// burst gate.
    Rtts(HashMap<u64, u64>),
}
