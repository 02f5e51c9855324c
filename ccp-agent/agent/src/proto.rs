// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The gRPC messages and services between agents and switch daemons (package `mlcc.v1`).
//!
//! The control protocol of "Dynamic Flow Scheduling for DNN Training Workloads in Data
//! Centers", Sec. IV-A and IV-C: every slot an agent fetches the load of the links its flows
//! cross for the next K slots (`FetchFeedback`), plans, and publishes each flow's new schedule
//! with its achieved rate (`UpdateSchedule`); an agent whose flow was capped by Alg. 2 tells the
//! receiver's agent (`Notify`), which cuts its successor flows by the excess. `Status` serves
//! `ccp-agent status`. Messages are prost structs written by hand (no protoc); this is their
//! schema:
//!
//! ```proto
//! syntax = "proto3";
//! package mlcc.v1;
//!
//! service Switch {
//!   rpc FetchFeedback(FeedbackRequest) returns (FeedbackReply);
//!   rpc UpdateSchedule(ScheduleUpdate) returns (UpdateReply);
//! }
//! service Agent {
//!   rpc Notify(DependencyNotice) returns (NoticeReply);
//!   rpc Status(StatusRequest) returns (StatusReply);
//! }
//! message FeedbackRequest { repeated uint32 links = 1; repeated uint64 exclude_flows = 2; uint64 slot = 3; }
//! message LinkFeedback { uint32 link = 1; uint64 capacity_bps = 2; uint64 estimate_bps = 3;
//!                        repeated uint64 load_bps = 4; }
//! message FeedbackReply { uint64 start_slot = 1; repeated LinkFeedback links = 2; uint32 flows = 3; }
//! message FlowSchedule { uint64 flow = 1; repeated uint32 links = 2; uint64 start_slot = 3;
//!                        repeated uint64 rates_bps = 4; uint64 achieved_bps = 5;
//!                        uint64 achieved_slot = 6; bool app_limited = 7; }
//! message ScheduleUpdate { string agent = 1; uint64 slot = 2; repeated FlowSchedule flows = 3; }
//! message UpdateReply { uint32 accepted = 1; repeated string errors = 2; }
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
//!                       uint64 slot_work_us = 10; }
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

/// `UpdateSchedule` reply: how many schedules were taken, and why the others were not.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateReply {
    #[prost(uint32, tag = "1")]
    pub accepted: u32,
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
    /// Time the last slot's work took on the agent, µs (monitoring, feedback, planning, rates).
    #[prost(uint64, tag = "10")]
    pub slot_work_us: u64,
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
