// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The gRPC messages and services between agents and switch daemons (package `mlcc.v1`).
//!
//! The control protocol of "Dynamic Flow Scheduling for DNN Training Workloads in Data
//! Centers", Sec. IV-A and IV-C: every slot an agent fetches the load of the links its flows
//! cross for the next K slots (`FetchFeedback`), plans, and publishes each flow's new schedule
//! with its achieved rate (`UpdateSchedule`); an agent whose flow was capped by Alg. 2 tells the
//! receiver's agent (`Notify`), which cuts its successor flows by the excess. `Status` serves
//! `ccp-agent status`.
//!
//! `UpdateSchedule` is an admission: the switch clips each schedule to what is left on its links
//! at that moment (under its lock) and returns the admitted schedules, which the agent enforces,
//! so agents planning in the same slot cannot both take the same free bandwidth
//! (`mlcc_sched::LinkLoadTable::admit`).
//!
//! PCN ("Proactive Congestion Avoidance for Distributed Deep Learning", Sec. 3.1-3.2): before a
//! job's burst the agent sends `PcnStart` (the job's rank, its flows and their links, the PCN
//! threshold in bytes) to the switches on the path; the switch lowers the ECN marking threshold
//! of those links and acknowledges; the threshold comes back when the burst arrives (the flow's
//! next `UpdateSchedule` reports bytes in or after the start's slot), on `PcnEnd`, or when the
//! start times out. Messages are prost structs written by hand (no protoc); this is their
//! schema:
//!
//! ```proto
//! syntax = "proto3";
//! package mlcc.v1;
//!
//! service Switch {
//!   rpc FetchFeedback(FeedbackRequest) returns (FeedbackReply);
//!   rpc UpdateSchedule(ScheduleUpdate) returns (UpdateReply);
//!   rpc PcnStart(PcnStart) returns (PcnAck);
//!   rpc PcnEnd(PcnEnd) returns (PcnAck);
//! }
//! service Agent {
//!   rpc Notify(DependencyNotice) returns (NoticeReply);
//!   rpc Status(StatusRequest) returns (StatusReply);
//! }
//! message FeedbackRequest { repeated uint32 links = 1; repeated uint64 exclude_flows = 2; uint64 slot = 3; }
//! message LinkFeedback { uint32 link = 1; uint64 capacity_bps = 2; uint64 estimate_bps = 3;
//!                        repeated uint64 load_bps = 4; uint32 ecn_threshold_bytes = 5;
//!                        uint32 pcn_outstanding = 6; }
//! message FeedbackReply { uint64 start_slot = 1; repeated LinkFeedback links = 2; uint32 flows = 3;
//!                         uint64 pcn_starts = 4; uint64 pcn_expired = 5; uint64 threshold_failures = 6; }
//! message FlowSchedule { uint64 flow = 1; repeated uint32 links = 2; uint64 start_slot = 3;
//!                        repeated uint64 rates_bps = 4; uint64 achieved_bps = 5;
//!                        uint64 achieved_slot = 6; bool app_limited = 7; }
//! message ScheduleUpdate { string agent = 1; uint64 slot = 2; repeated FlowSchedule flows = 3; }
//! message UpdateReply { uint32 accepted = 1; repeated string errors = 2;
//!                       repeated FlowSchedule admitted = 3; }
//! message PcnStart { string job = 1; uint32 rank = 2; repeated uint64 flows = 3;
//!                    repeated uint32 links = 4; uint32 threshold_bytes = 5; string agent = 6; }
//! message PcnEnd { string job = 1; uint32 rank = 2; }
//! message PcnAck { uint32 ecn_links = 1; repeated string errors = 2; }
//! message DependencyNotice { string job = 1; uint32 from_rank = 2; uint32 to_rank = 3;
//!                            uint32 kind = 4; uint64 slot = 5; uint64 iteration = 6;
//!                            uint64 accumulated_bytes = 7; uint64 bound_bytes = 8; }
//! message NoticeReply { uint64 reduced_bytes = 1; }
//! message StatusRequest {}
//! message FlowStatus { string job = 1; uint32 rank = 2; string src = 3; string dst = 4;
//!                      uint64 flow = 5; uint64 scheduled_bps = 6; uint64 achieved_bps = 7;
//!                      uint64 remaining_bytes = 8; uint64 rtt_us = 9; uint64 lost = 10;
//!                      string outcome = 11; uint64 iteration = 12; }
//! message StatusReply { uint64 slot = 1; uint64 slot_us = 2; string mode = 3;
//!                       repeated FlowStatus flows = 4; uint32 native_flows = 5;
//!                       uint64 dropped_foreign = 6; uint64 dropped_bad = 7;
//!                       uint64 notices_received = 8; uint64 rpc_failures = 9;
//!                       uint64 slot_work_us = 10; uint64 bursts_granted = 11;
//!                       uint64 bursts_granted_on_ack = 12; uint64 pcn_starts = 13;
//!                       uint64 pcn_ends_on_burst = 14; }
//! ```
//!
//! Units: rates in bit/s, sizes in bytes, slots are numbers on the wall-clock grid
//! (`floor(unix_time_us / slot_us)`), flows are [`crate::flows::flow_id`]s of their 4-tuple.

#![allow(missing_docs)]

/// `FetchFeedback` request: the links wanted (empty: all of the switch's), the flows whose own
/// stored schedules are left out of the load (the caller's), and the caller's current slot.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FeedbackRequest {
    #[prost(uint32, repeated, tag = "1")]
    pub links: Vec<u32>,
    #[prost(uint64, repeated, tag = "2")]
    pub exclude_flows: Vec<u64>,
    #[prost(uint64, tag = "3")]
    pub slot: u64,
}

/// One link's feedback: capacity, available-bandwidth estimate (bit/s), and the load of the
/// other flows in each of the K slots from `FeedbackReply::start_slot`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinkFeedback {
    #[prost(uint32, tag = "1")]
    pub link: u32,
    #[prost(uint64, tag = "2")]
    pub capacity_bps: u64,
    #[prost(uint64, tag = "3")]
    pub estimate_bps: u64,
    #[prost(uint64, repeated, tag = "4")]
    pub load_bps: Vec<u64>,
    /// The link's ECN marking threshold now, bytes (0: the link has no `[link.ecn]`).
    #[prost(uint32, tag = "5")]
    pub ecn_threshold_bytes: u32,
    /// PCN starts outstanding on the link.
    #[prost(uint32, tag = "6")]
    pub pcn_outstanding: u32,
}

/// `FetchFeedback` reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FeedbackReply {
    #[prost(uint64, tag = "1")]
    pub start_slot: u64,
    #[prost(message, repeated, tag = "2")]
    pub links: Vec<LinkFeedback>,
    #[prost(uint32, tag = "3")]
    pub flows: u32,
    /// `PcnStart`s received since the daemon started.
    #[prost(uint64, tag = "4")]
    pub pcn_starts: u64,
    /// PCN starts dropped because their burst never arrived within the timeout.
    #[prost(uint64, tag = "5")]
    pub pcn_expired: u64,
    /// `tc` commands that failed (or timed out) since the daemon started.
    #[prost(uint64, tag = "6")]
    pub threshold_failures: u64,
}

/// One flow's new schedule along `links` (those of the switch; others are ignored), and the
/// rate it achieved in `achieved_slot`. Empty `rates_bps`: the flow is gone or done.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FlowSchedule {
    #[prost(uint64, tag = "1")]
    pub flow: u64,
    #[prost(uint32, repeated, tag = "2")]
    pub links: Vec<u32>,
    #[prost(uint64, tag = "3")]
    pub start_slot: u64,
    #[prost(uint64, repeated, tag = "4")]
    pub rates_bps: Vec<u64>,
    #[prost(uint64, tag = "5")]
    pub achieved_bps: u64,
    #[prost(uint64, tag = "6")]
    pub achieved_slot: u64,
    #[prost(bool, tag = "7")]
    pub app_limited: bool,
}

/// `UpdateSchedule` request: one agent's flows, planned in `slot`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ScheduleUpdate {
    #[prost(string, tag = "1")]
    pub agent: String,
    #[prost(uint64, tag = "2")]
    pub slot: u64,
    #[prost(message, repeated, tag = "3")]
    pub flows: Vec<FlowSchedule>,
}

/// `UpdateSchedule` reply: how many schedules were taken, why the others were not, and the
/// admitted schedule of each flow taken (`flow`, `links`, `start_slot`, `rates_bps`: the request's
/// rates clipped to what was left on the switch's links; a removal is not listed).
#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateReply {
    #[prost(uint32, tag = "1")]
    pub accepted: u32,
    #[prost(string, repeated, tag = "2")]
    pub errors: Vec<String>,
    #[prost(message, repeated, tag = "3")]
    pub admitted: Vec<FlowSchedule>,
}

/// PCN-START of one process of a job (`job`, `rank`) about to send a burst on `flows` (their
/// [`crate::flows::flow_id`]s) across `links` (the switch keeps those it owns and that have an
/// ECN queue), asking for a marking threshold of `threshold_bytes` (> 0). A repeated start of
/// the same (job, rank) replaces the earlier one.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PcnStart {
    #[prost(string, tag = "1")]
    pub job: String,
    #[prost(uint32, tag = "2")]
    pub rank: u32,
    #[prost(uint64, repeated, tag = "3")]
    pub flows: Vec<u64>,
    #[prost(uint32, repeated, tag = "4")]
    pub links: Vec<u32>,
    #[prost(uint32, tag = "5")]
    pub threshold_bytes: u32,
    #[prost(string, tag = "6")]
    pub agent: String,
}

/// PCN-END: the burst of (`job`, `rank`) is over (or will not come); its start is dropped.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PcnEnd {
    #[prost(string, tag = "1")]
    pub job: String,
    #[prost(uint32, tag = "2")]
    pub rank: u32,
}

/// `PcnStart`/`PcnEnd` reply: how many of the switch's ECN links the start (or end) touched,
/// and the problems (a failed `tc` names the command; the bookkeeping stands regardless).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PcnAck {
    #[prost(uint32, tag = "1")]
    pub ecn_links: u32,
    #[prost(string, repeated, tag = "2")]
    pub errors: Vec<String>,
}

/// Notice kinds of [`DependencyNotice::kind`].
pub mod notice_kind {
    /// A ring flow from `from_rank` to its successor `to_rank`.
    pub const RING: u32 = 1;
    /// A worker's aggregation (push) flow to the PS `to_rank`.
    pub const PS_AGGREGATION: u32 = 2;
    /// A PS's broadcast flow to the worker `to_rank`; `bound_bytes` is F_b^max of the PS.
    pub const PS_BROADCAST: u32 = 3;
}

/// Alg. 2 across agents: the sender's flow `from_rank → to_rank` of `job` has accumulated
/// `accumulated_bytes` (F_i) in `iteration` after the decision of `slot`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DependencyNotice {
    #[prost(string, tag = "1")]
    pub job: String,
    #[prost(uint32, tag = "2")]
    pub from_rank: u32,
    #[prost(uint32, tag = "3")]
    pub to_rank: u32,
    #[prost(uint32, tag = "4")]
    pub kind: u32,
    #[prost(uint64, tag = "5")]
    pub slot: u64,
    #[prost(uint64, tag = "6")]
    pub iteration: u64,
    #[prost(uint64, tag = "7")]
    pub accumulated_bytes: u64,
    #[prost(uint64, tag = "8")]
    pub bound_bytes: u64,
}

/// `Notify` reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NoticeReply {
    #[prost(uint64, tag = "1")]
    pub reduced_bytes: u64,
}

/// `Status` request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusRequest {}

/// One controlled flow in `Status`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FlowStatus {
    #[prost(string, tag = "1")]
    pub job: String,
    #[prost(uint32, tag = "2")]
    pub rank: u32,
    #[prost(string, tag = "3")]
    pub src: String,
    #[prost(string, tag = "4")]
    pub dst: String,
    #[prost(uint64, tag = "5")]
    pub flow: u64,
    #[prost(uint64, tag = "6")]
    pub scheduled_bps: u64,
    #[prost(uint64, tag = "7")]
    pub achieved_bps: u64,
    #[prost(uint64, tag = "8")]
    pub remaining_bytes: u64,
    #[prost(uint64, tag = "9")]
    pub rtt_us: u64,
    #[prost(uint64, tag = "10")]
    pub lost: u64,
    #[prost(string, tag = "11")]
    pub outcome: String,
    #[prost(uint64, tag = "12")]
    pub iteration: u64,
}

/// `Status` reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusReply {
    #[prost(uint64, tag = "1")]
    pub slot: u64,
    #[prost(uint64, tag = "2")]
    pub slot_us: u64,
    #[prost(string, tag = "3")]
    pub mode: String,
    #[prost(message, repeated, tag = "4")]
    pub flows: Vec<FlowStatus>,
    #[prost(uint32, tag = "5")]
    pub native_flows: u32,
    #[prost(uint64, tag = "6")]
    pub dropped_foreign: u64,
    #[prost(uint64, tag = "7")]
    pub dropped_bad: u64,
    #[prost(uint64, tag = "8")]
    pub notices_received: u64,
    #[prost(uint64, tag = "9")]
    pub rpc_failures: u64,
    /// Time the agent's datapath thread spent on the last slot's work, µs (its tick and the
    /// switches' answers: monitoring, planning, rates; the waits for the switches excluded).
    #[prost(uint64, tag = "10")]
    pub slot_work_us: u64,
    /// Burst requests (`before_burst`) granted.
    #[prost(uint64, tag = "11")]
    pub bursts_granted: u64,
    /// Of those, granted on the switches' acknowledgements before one RTT passed.
    #[prost(uint64, tag = "12")]
    pub bursts_granted_on_ack: u64,
    /// `PcnStart`s sent to switches.
    #[prost(uint64, tag = "13")]
    pub pcn_starts: u64,
    /// `PcnEnd`s sent because the burst was seen leaving its process (its bytes grew).
    #[prost(uint64, tag = "14")]
    pub pcn_ends_on_burst: u64,
}

/// Generated `Switch` client and server.
#[allow(clippy::all, missing_docs, unused_qualifications)]
pub mod switch {
    include!(concat!(env!("OUT_DIR"), "/mlcc.v1.Switch.rs"));
}

/// Generated `Agent` client and server.
#[allow(clippy::all, missing_docs, unused_qualifications)]
pub mod agent {
    include!(concat!(env!("OUT_DIR"), "/mlcc.v1.Agent.rs"));
}
