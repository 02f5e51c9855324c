// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `mlcc-sched`: the scheduling algorithms of `ccp-agent`, as pure functions over plain data.
//!
//! The algorithms are those of "Dynamic Flow Scheduling for DNN Training Workloads in Data
//! Centers" (Zhao, Wu, Zhu; the "mlcc" prototype), Sec. III–V: time-slotted per-host schedulers
//! that plan each flow's rate over the next K slots from link-load feedback (Alg. 1), adjust it
//! to the flow dependencies of parameter-server and ring all-reduce jobs (Alg. 2), and publish
//! the plan to the load tables of the switches on the path. Also here, for the cluster simulator
//! and the switch daemon: Cassini's compatibility score and time shifts (Rajasekaran, MIT thesis,
//! ch. 4) and PCN's threshold bookkeeping ("Proactive Congestion Avoidance for Distributed Deep
//! Learning").
//!
//! No I/O, no clocks, no async, no randomness: the agent, the switch daemon and the simulator
//! feed the same inputs and get the same decisions. Units are in the names (`_bps` bit/s,
//! `_bytes`, `_us` microseconds, `slot` slot numbers on the wall-clock grid of [`slot`]).
//!
//! Modules:
//! - [`slot`]: the slot grid (slot = floor(t_us / slot_us)), horizon K, rate ↔ bytes;
//! - [`table`]: link load tables over K slots, flow schedules, rate samples and the
//!   available-bandwidth estimate, path views, admission of a schedule against what is left;
//! - [`greedy`]: Alg. 1, the initial least-path-load schedule;
//! - [`dependency`]: Alg. 2, PS and ring dependency rules, the receiver's excess;
//! - [`coflow`]: Alg. 1 and 2 for a group of flows of one job planned jointly (Varys's MADD
//!   shares, SEBF order of the groups);
//! - [`planner`]: the per-slot step over a table;
//! - [`policy`]: the policy layer, one entry point ([`policy::decide`]) from a snapshot of
//!   flows, jobs, progress and the slot to the slot's decisions (groups, dependencies, order,
//!   cuts, rates), called by the agent and the simulator alike, and its rank compression onto
//!   a few traffic classes ([`policy::classes`], [`decide_with_classes`]);
//! - [`cassini`]: unified-circle compatibility score, rotations and Affinity-graph time shifts;
//! - [`pcn`]: PCN threshold bookkeeping per link;
//! - [`error`]: [`SchedError`], every refusal naming the refused value.
//!
//! One agent's slot, in NIC-only mode (the agent keeps the table of its own links):
//!
//! ```
//! use mlcc_sched::*;
//!
//! let clock = SlotClock::new(60_000, 10)?; // 60 ms slots, K = 10
//! let now_us = 1_700_000_000_000_000;
//! let mut table = LinkLoadTable::new(clock, clock.slot_at(now_us));
//! table.add_link(LinkId(0), 25_000_000_000)?; // the NIC, 25 Gbit/s
//!
//! // A ring all-reduce flow with 100 MB left, whose predecessor is 10 MB ahead of it.
//! let flow = FlowRequest {
//!     flow: FlowId(1),
//!     path: vec![LinkId(0)],
//!     progress: FlowProgress { sent_bytes: 0, remaining_bytes: 100_000_000 },
//!     dependency: Dependency::Ring { predecessor_bytes: 10_000_000 },
//! };
//! let d = plan_flow(&mut table, &flow)?;
//! assert!(d.rate_bps <= 25_000_000_000); // apply through CCP for this slot
//! assert_eq!(d.plan.scheduled_bytes(), 100_000_000); // fits in the horizon
//!
//! // Next slot: expire the old one, record what the NIC achieved, plan again.
//! table.advance_to(table.current_slot() + 1)?;
//! let sample = RateSample { slot: table.current_slot() - 1, rate_bps: d.rate_bps, app_limited: true };
//! table.record_rate(LinkId(0), sample)?;
//! # Ok::<(), SchedError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod cassini;
pub mod coflow;
pub mod dependency;
pub mod error;
pub mod greedy;
pub mod pcn;
pub mod planner;
pub mod policy;
pub mod slot;
pub mod table;

pub use coflow::{
    decide_group, effective_bottleneck_us, extend_group_bytes, group_schedule, planning_key,
    reduce_group, GroupDecision, PlanningKey,
};
pub use dependency::{
    decide, excess_bytes, pacing_rate_bps, reduce, Decision, Dependency, FlowProgress, Outcome,
};
pub use error::SchedError;
pub use greedy::{initial_schedule, Plan};
pub use planner::{
    apply_group_reduction, apply_reduction, extend_group, group_bottleneck_us, group_share_now_bps,
    plan_flow, plan_group, plan_slot, FlowRequest,
};
pub use policy::classes::{
    job_order, ClassRates, JobClass, TrafficClasses, DEFAULT_CLASSES, DEFAULT_DSCP, MAX_CLASSES,
};
pub use policy::held::{is_held, HeldFlows, MAX_SCAVENGER_TARGET_US};
pub use policy::slowdown::CommSlowdown;
pub use policy::{
    decide_with_classes, priority_levels, priority_weight, rank_earliest_deadline, rank_first_come,
    rank_jobs, rank_least_attained, receiver_cut_bytes, slot_rate_bps, Decisions, FlowRole,
    FlowState, GroupOutcome, GroupPhase, JobKey, JobOrder, JobWork, PolicyOptions, RankedJob,
    RateRule, Rules, Snapshot, UnitKind, PRIORITY_WEIGHT_MIN, PRIORITY_WEIGHT_RATIO,
};
pub use slot::{SlotClock, DEFAULT_HORIZON, DEFAULT_SLOT_US, PAPER_SLOT_US, RATE_WINDOW_SLOTS};
pub use table::{
    FlowId, LinkId, LinkLoadTable, LinkRow, LinkView, PathView, RateSample, Schedule, TableSnapshot,
};
