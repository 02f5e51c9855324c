// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The policy layer: one entry point, [`decide`], from a snapshot of the flows a scheduler
//! controls to the decisions of the current slot (coflow groups, their dependencies, planning
//! order, the receivers' cuts, the per-slot pacing rates). The agent and the cluster simulator
//! both call it; the planning rules live here once.
//!
//! Rules (the mlcc paper, "Dynamic Flow Scheduling for DNN Training Workloads in Data
//! Centers", Sec. IV, with the group generalisation of [`crate::coflow`]):
//!
//! - **Groups** ([`unit_key`], [`group_phase`]): a job's ring all-reduce flows form one
//!   coflow unit and one group (the pipelined ring needs them all to progress together); per
//!   parameter server, a unit of two groups, its aggregation flows (pushes into it), then its
//!   broadcast flows (pulls out of it); any other flow is a unit and group of its own.
//! - **Dependencies** (Alg. 2, Sec. IV-C): a ring flow whose predecessor is not decided in
//!   the same group depends on the predecessor's accumulated bytes F_j plus one chunk (a worker
//!   may be one chunk ahead of what it received: its own); a PS's aggregation flows on F_b^max
//!   of its broadcast flows; its broadcast flows on F_a^min of its aggregation flows, taken
//!   after the aggregation group is planned (its planned F where planned now).
//! - **Order** ([`crate::planning_key`]): the unit further into its iteration first, then
//!   Varys's smallest effective bottleneck first at link capacity, ties by job and unit; or,
//!   under [`Rules::Interleave`], by job rank ([`PolicyOptions::job_rank`]).
//! - **Cuts** (the receiver's side of Alg. 2): within a group, member i is cut by
//!   (F_i − bound)+ with bound its ring predecessor's F plus a chunk, or F_a^min for a
//!   broadcast flow, and the group is re-planned jointly ([`crate::apply_group_reduction`]).
//!   One pass, against each predecessor's planned F *before* its own cut (as the paper's
//!   receiver cuts against the F its predecessor announced): the successor of a flow that was
//!   cut may end up to that cut ahead of it in this slot (`tests/policy.rs` states the bound);
//!   a cut to the fixed point over the ring is a candidate change, not made here because it
//!   changes the simulator's mlcc results.
//!   *Group cut, not per-flow cut*: the agent used to cut one flow at a time with
//!   [`crate::reduce`], which breaks MADD's equal progress of the group's members (the cut
//!   member's freed slots went to nobody in its group); the simulator's group cut keeps the
//!   members level. The per-flow cut remains what an agent can do for a notice from another
//!   host after its slot's plans are made ([`crate::reduce`]), outside this entry point.
//! - **Rates**: a member's pacing rate is [`crate::Decision::pacing_rate_bps`] at its MADD
//!   share of the current slot (a slot that completes it goes at the largest feasible rate,
//!   Alg. 1). Then, when [`PolicyOptions::share_spare`] is on, work conservation within the
//!   slot: each flow planned no bytes in the current slot gets an equal
//!   share, among such flows on the link, of what the slot's plans leave free, the least over
//!   its path; and every rate is at least [`Snapshot::min_rate_bps`] (a datapath concern: a
//!   TCP flow paced at 0 stalls; the simulator passes 0).
//! - **Strict priority** ([`Rules::Priority`]): units planned in job-rank order as under
//!   [`Rules::Interleave`]; then each decided flow's current-slot rate is raised to its
//!   strict-priority share ([`GroupOutcome::spare_bps`]): walking the groups in planning order,
//!   a group's members split equally, per link, what the flows not decided now and the groups
//!   before it left of the slot's capacity, the least over the path. Work-conserving: the
//!   first-ranked job may take a whole link, the next ones what it leaves (its compute phase).
//!   With [`PolicyOptions::strict_rates`] (and work conservation) the share is the rate, the
//!   active flows' floors reserved first ([`RateRule::Share`]); without, a flow is also raised
//!   to its own plan's pacing rate ([`RateRule::PlanOrShare`]).
//!   The simulator realises the same rule event by event through [`priority_levels`] and
//!   [`priority_weight`].
//! - **Work conservation** ([`PolicyOptions::work_conserving`], not in the mlcc paper): a plan
//!   is a claim, not a limit. Under [`Rules::Mlcc`] and [`Rules::Interleave`] each active
//!   decided flow (bytes planned now) is paced at its pacing rate plus an equal share, among
//!   the active flows on the link, of what the active flows and the undecided ones leave of
//!   the link, the least over its path; under [`Rules::Priority`] the active groups take their
//!   shares first and idle members only what is left. The agent uses it; the simulator's
//!   policies leave it off (their results are unchanged).
//! - **Traffic classes** ([`classes`], [`decide_with_classes`]): the job order of the
//!   decisions compressed onto a few strict-priority classes for the switches (Crux, SIGCOMM
//!   '24; IEEE 802.1Qaz), stable across slots, with no inversion among jobs that share a link;
//!   rates are unchanged by it.
//! - **Bytes planned**: with [`PolicyOptions::sendable_only`], a flow is planned only for the
//!   bytes its dependency lets it send ([`crate::Dependency::sendable_bytes`]), so bytes it
//!   cannot send reserve nothing (the agent's reading); off, every byte left is planned (the
//!   paper's Alg. 1, the simulator's `mlcc`).
//!
//! Pure: no I/O, no clock. The link load table passed in holds the links, their capacities
//! and estimates, and the schedules of every flow not decided now; it gets the new schedules.

use serde::{Deserialize, Serialize};

use crate::coflow::{planning_key, GroupDecision, PlanningKey};
use crate::dependency::{excess_bytes, Decision, Dependency, FlowProgress};
use crate::error::SchedError;
use crate::planner::{apply_group_reduction, group_bottleneck_us, plan_group, FlowRequest};
use crate::table::{FlowId, LinkId, LinkLoadTable};

pub mod classes;
pub mod held;
pub mod slowdown;

/// A training job, as the caller numbers it (the simulator's job index; the agent maps its
/// job names to numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct JobKey(pub u64);

/// What a flow is to its job (its paradigm and role).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum FlowRole {
    /// A ring all-reduce flow from a worker to its successor.
    RingSend {
        /// The flow into this flow's worker (from its predecessor), if the snapshot has it.
        predecessor: Option<FlowId>,
        /// The ring's chunk G/W, bytes: how far a worker may be ahead of what it received.
        chunk_bytes: u64,
    },
    /// A worker's aggregation flow (push) to parameter server `ps`.
    PsPush {
        /// The parameter server's number in its job.
        ps: u32,
    },
    /// Parameter server `ps`'s broadcast flow (pull) to a worker.
    PsPull {
        /// The parameter server's number in its job.
        ps: u32,
    },
    /// Any other flow (no dependency).
    Other,
}

/// One flow of the snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowState {
    /// The flow (also its id in the link load table).
    pub flow: FlowId,
    /// Its job.
    pub job: JobKey,
    /// Its role in the job.
    pub role: FlowRole,
    /// The links it crosses, in order.
    pub path: Vec<LinkId>,
    /// Bytes sent in the current iteration (F_i before this slot; all of them for a flow that
    /// is done) and bytes left, bytes.
    pub progress: FlowProgress,
    /// Its bytes per iteration (for the planning order), bytes.
    pub iteration_bytes: u64,
    /// Decide it now. False: context only (a flow done, or decided earlier and kept, or a flow
    /// on another host known from a notice): its F bounds the flows that depend on it, and its
    /// bytes count in its unit's progress, but it gets no decision.
    pub decide: bool,
}

/// A scheduler's view at one decision.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The slot decided (must be the table's current slot).
    pub slot: u64,
    /// The flows, each once.
    pub flows: Vec<FlowState>,
    /// The least pacing rate given to a decided flow, bit/s (0: none).
    pub min_rate_bps: u64,
}

/// Which rule set orders the units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rules {
    /// The mlcc paper's Alg. 1 + 2 over coflow groups, ordered by [`crate::planning_key`].
    #[default]
    Mlcc,
    /// The same planning, units ordered by their job's rank ([`PolicyOptions::job_rank`],
    /// ascending: rank 0 first; the simulator ranks with [`rank_jobs`], the agent, which does
    /// not know the jobs' work left, with [`rank_least_attained`]), then by
    /// [`crate::planning_key`]: a job-level priority, so
    /// that on shared links one job's communication phase goes first and the others' slide
    /// into its gaps (the interleaved state MLTCP converges to, Rajasekaran, MIT thesis, ch. 5;
    /// least-attained-service job ordering as in Tiresias, NSDI '19).
    Interleave,
    /// Job-level strict priority, work-conserving: units in job-rank order as under
    /// [`Rules::Interleave`] (ranks from [`rank_jobs`] or [`rank_least_attained`] in
    /// [`PolicyOptions::job_rank`]), and each decided flow paced at least at its
    /// strict-priority share of the current slot (see the module documentation): a
    /// higher-ranked job's flows get the link, lower ranks fill what is left in the same slot.
    /// A low-ranked job's communication then shifts into the others' compute phases, which
    /// interleaves them by itself (the state MLTCP converges to, Rajasekaran, MIT thesis,
    /// ch. 5; shortest-remaining-time-first job order, Schrage, Oper. Res. 16(3), 1968).
    /// Not in the mlcc paper. In a network of weighted max-min sharing (the simulator), the
    /// same rule is [`priority_levels`] with [`priority_weight`]. Measured: see
    /// `docs/results/simulator.md`.
    Priority,
}

impl Rules {
    /// Every rule set, in the order their names are listed to users.
    pub const ALL: [Rules; 3] = [Rules::Mlcc, Rules::Interleave, Rules::Priority];

    /// The rule set's name, as agent.toml's `[sched] rules` and the serde form spell it.
    pub fn name(self) -> &'static str {
        match self {
            Rules::Mlcc => "mlcc",
            Rules::Interleave => "interleave",
            Rules::Priority => "priority",
        }
    }
}

/// The entry of `all` whose `name` is `s`; the error lists every name, quoted, in `all`'s order.
pub(crate) fn by_name<T: Copy>(
    all: &[T],
    name: fn(T) -> &'static str,
    s: &str,
) -> Result<T, String> {
    all.iter().copied().find(|x| name(*x) == s).ok_or_else(|| {
        let names: Vec<String> = all.iter().map(|x| format!("{:?}", name(*x))).collect();
        format!("must be one of {}", names.join(", "))
    })
}

impl std::str::FromStr for Rules {
    type Err = String;

    /// Parses a [`Rules::name`]; the error lists the known names, quoted.
    fn from_str(s: &str) -> Result<Self, String> {
        by_name(&Rules::ALL, Rules::name, s)
    }
}

/// How a scheduler that ranks jobs (under [`Rules::Interleave`] and [`Rules::Priority`]) orders
/// them from what it can see of their bursts (ccp-agent's `[sched] job_order`; the simulator's
/// `priority-fc` and `priority-edf`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobOrder {
    /// First come, first served by burst ([`rank_first_come`]).
    FirstCome,
    /// Least attained service, iterations standing in for service ([`rank_least_attained`]).
    LeastAttained,
    /// Earliest deadline first, a burst's deadline being when it would end alone
    /// ([`rank_earliest_deadline`]). The default from 2026-11-27 to 2026-11-29, chosen on
    /// `ci/scenarios/agent.toml` under strict priority: in the simulator (exact enforcement, 10
    /// seeds) 1.161 x ideal against first come's 1.366 (which locks jobs of different periods
    /// into the longest one's rhythm; fair sharing 1.273); in the VM (guest time, seeds 1-3,
    /// ccp-agent NIC-only with work conservation) no difference shown: −0.7 % [−3.9, +2.5]
    /// against first come (runs of two sessions) and −4.0 % [−9.1, +1.0] in one run with both
    /// (docs/results/agent.md, "The ccp-agent scenario on guest time"). It makes a job of long
    /// bursts (a parameter server's) pay for the short ones' gain: see
    /// [`JobOrder::SlowdownDeadline`], which replaced it as the default.
    EarliestDeadline,
    /// Earliest deadline first with each job's time alone divided by its smoothed
    /// communication slowdown ([`slowdown::CommSlowdown`]): a job whose bursts have been
    /// stretched more gets an earlier deadline, so that no job pays for the others' gain burst
    /// after burst. In the simulator's fluid model of `ci/scenarios/agent.toml` (20 seeds) it
    /// keeps the parameter-server job at 1.235 x ideal where fair sharing has it at 1.242
    /// (earliest deadline: 1.301), for a mean iteration 6.9 % below fair sharing's where
    /// earliest deadline gives 7.4 % (docs/results/agent.md, "Slowdown-scaled deadlines").
    /// The default since 2026-11-29, by measurement in the VM (guest time, 10 paired seeds per
    /// scenario, against [`JobOrder::EarliestDeadline`]): the mean iteration unchanged on every
    /// scenario measured (agent.toml +0.4 % [−0.3, +1.1], agent-tenant +0.0 % [−4.1, +4.1],
    /// agent-mixed −0.1 % [−1.3, +1.2]; (a), (b), (c) in docs/results/agent-defaults.md), while
    /// the parameter-server job's loss against cubic fell from +6.2 % to +3.7 % on agent.toml
    /// and from +12.0 % to +0.2 % [−3.6, +4.0] beside another tenant's flow.
    #[default]
    SlowdownDeadline,
}

impl JobOrder {
    /// Every order, in the order their names are listed to users.
    pub const ALL: [JobOrder; 4] = [
        JobOrder::FirstCome,
        JobOrder::LeastAttained,
        JobOrder::EarliestDeadline,
        JobOrder::SlowdownDeadline,
    ];

    /// The order's name, as agent.toml's `[sched] job_order` and the serde form spell it.
    pub fn name(self) -> &'static str {
        match self {
            JobOrder::FirstCome => "first_come",
            JobOrder::LeastAttained => "least_attained",
            JobOrder::EarliestDeadline => "earliest_deadline",
            JobOrder::SlowdownDeadline => "slowdown_deadline",
        }
    }
}

impl std::str::FromStr for JobOrder {
    type Err = String;

    /// Parses a [`JobOrder::name`]; the error lists the known names, quoted.
    fn from_str(s: &str) -> Result<Self, String> {
        by_name(&JobOrder::ALL, JobOrder::name, s)
    }
}

/// How [`decide`] decides.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyOptions {
    /// The rule set.
    pub rules: Rules,
    /// Work conservation within the slot: a flow planned no bytes in the current slot gets an
    /// equal share, among such flows on the link, of what the slot's plans leave free on each
    /// link of its path, the least over its path (not in the mlcc paper, whose slots leave
    /// bandwidth a flow does not use idle until the next slot).
    pub share_spare: bool,
    /// Plan only the bytes a flow's dependency lets it send.
    pub sendable_only: bool,
    /// Work conservation of the current slot's rates (not in the mlcc paper): a
    /// flow's plan is a claim on its links, not a limit while the link has room. Under
    /// [`Rules::Mlcc`] and [`Rules::Interleave`], each *active* decided flow (bytes planned in
    /// the current slot) is paced at its planned rate plus an equal share, among the active
    /// flows on the link, of what their pacing rates and the undecided flows leave of the
    /// link's capacity, the least over its path; under
    /// [`Rules::Priority`], the active groups take their strict-priority shares first, in
    /// planning order, and the idle members only what the active ones leave (without it an
    /// idle higher-ranked job, e.g. computing, holds the link for the slot while a lower
    /// one has bytes to send). Off: the rates of the paper's slots.
    #[serde(default)]
    pub work_conserving: bool,
    /// Under [`Rules::Priority`] with [`PolicyOptions::work_conserving`]: the strict-priority
    /// share *is* the rate ([`RateRule::Share`]), and the floors of the active flows
    /// ([`Snapshot::min_rate_bps`]) are reserved before the shares, so the rates on a link add
    /// up to what it has; off, a flow is also raised to its own plan's pacing rate
    /// ([`RateRule::PlanOrShare`]), which its plan took from what the higher-ranked *plans*
    /// left (less than their shares), so a link could be booked beyond its capacity. See
    /// [`PolicyOptions::rate_rule`]. Measured in the VM's agent scenario (2026-11-27, 12 seeds,
    /// ccp-agent's `[sched] strict_rates`): fewer drops, but 4.6 % [0.3, 8.8] longer iterations
    /// than without, the jobs in 5 of 12 seeds locked into computing at the same time; so the
    /// agent leaves it off by default.
    #[serde(default)]
    pub strict_rates: bool,
    /// Under [`Rules::Interleave`] and [`Rules::Priority`], each job's rank (lower first), as
    /// (job, rank); a job not listed ranks last. Ignored under [`Rules::Mlcc`].
    pub job_rank: Vec<(JobKey, u64)>,
}

impl PolicyOptions {
    /// How [`slot_rate_bps`] forms a decided flow's rate under these options:
    /// [`RateRule::Share`] under [`Rules::Priority`] with both
    /// [`PolicyOptions::work_conserving`] and [`PolicyOptions::strict_rates`], else
    /// [`RateRule::PlanOrShare`].
    pub fn rate_rule(&self) -> RateRule {
        if self.rules == Rules::Priority && self.work_conserving && self.strict_rates {
            RateRule::Share
        } else {
            RateRule::PlanOrShare
        }
    }
}

/// How a decided flow's current-slot rate is formed from its parts ([`slot_rate_bps`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum RateRule {
    /// The plan's pacing rate at its MADD share, raised to the flow's spare (or
    /// strict-priority) share and to the floor.
    #[default]
    PlanOrShare,
    /// The flow's strict-priority share, at least the floor: the plan sets what the flow is
    /// owed over the horizon, the job's rank who sends now ([`PolicyOptions::strict_rates`]).
    Share,
}

/// A job's work left, for [`rank_jobs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobWork {
    /// The job.
    pub job: JobKey,
    /// Its time left to run, µs: iterations left times its iteration time alone.
    pub remaining_us: u64,
}

/// The job ranks of [`Rules::Interleave`]: shortest remaining time first (rank 0 is the job
/// with the least `remaining_us`, ties by job), as (job, rank). On a link shared by jobs of
/// different ranks, the higher-ranked job's communication phase is planned first and the others
/// fill its gaps, so their phases interleave (MLTCP's fixed point, Rajasekaran, MIT thesis,
/// ch. 5), and the order that minimises the average completion time of jobs that only wait for
/// each other is shortest remaining processing time first (Schrage, Oper. Res. 16(3), 1968).
/// Refuses a job listed twice, naming it.
pub fn rank_jobs(jobs: &[JobWork]) -> Result<Vec<(JobKey, u64)>, SchedError> {
    rank_ascending(jobs.iter().map(|w| (w.job, w.remaining_us)))
}

/// The job ranks of [`Rules::Interleave`] for a scheduler that does not know the jobs' work
/// left (the agent: a progress region tells the iteration, not how many are left): least
/// attained service first, `attained` listing (job, iterations it has begun), rank 0 the job
/// with the fewest, ties by job. A job that falls behind goes first until it catches up, so no
/// job is held back for good (a fixed job order starved the last job of the agent's scenario
/// test to half the others' iterations); least-attained-service ordering as in Tiresias
/// (Gu et al., NSDI '19, Sec. 4.1), iterations standing in for attained service. Refuses a job
/// listed twice, naming it.
pub fn rank_least_attained(attained: &[(JobKey, u64)]) -> Result<Vec<(JobKey, u64)>, SchedError> {
    rank_ascending(attained.iter().copied())
}

/// The job ranks of [`Rules::Interleave`] and [`Rules::Priority`] by first come, first
/// served: `phase_start` lists (job, when its current communication phase began, on one clock
/// shared by the jobs listed, e.g. ns; `u64::MAX` for a job with nothing to send now); rank 0
/// is the job whose phase began first, ties by job. Under work-conserving strict priority
/// ([`PolicyOptions::work_conserving`]) the links then serve the jobs' bursts in the order they
/// arrive, each at the full link: the job that started communicating first finishes first,
/// which is the rule MLTCP's window scaling converges to interleaving with (Rajasekaran, MIT
/// thesis, ch. 5), and a job is never held back for having completed more iterations than
/// another (least attained service by iterations, [`rank_least_attained`], tied every job to
/// the slowest one's pace in the agent's VM scenario: docs/results/agent.md, "The ccp-agent scenario on
/// guest time"). Refuses a job listed twice, naming it.
pub fn rank_first_come(phase_start: &[(JobKey, u64)]) -> Result<Vec<(JobKey, u64)>, SchedError> {
    rank_ascending(phase_start.iter().copied())
}

/// The job ranks of [`Rules::Priority`] (and [`Rules::Interleave`]) by earliest deadline first:
/// `bursts` lists (job, when its current communication phase began, how long that phase takes
/// alone), both on one clock shared by the jobs listed (e.g. ns; a start of `u64::MAX` for a
/// job with nothing to send now); a burst's deadline is its start plus its time alone (when it
/// would end with the links to itself), rank 0 the earliest deadline, ties by job.
///
/// EDF (Liu and Layland, "Scheduling Algorithms for Multiprogramming in a Hard-Real-Time
/// Environment", JACM 20(1), 1973) meets every deadline on one preemptive resource whenever any
/// order does; a link served by work-conserving strict priority is such a resource. Unlike first
/// come, first served ([`rank_first_come`]), a short burst that arrives while a long one runs
/// goes first when the long one can still end in time, so jobs of different periods are not
/// locked into the longest one's rhythm. Measured in the simulator on the VM's agent scenario
/// (`mlcc-sim --scenario ci/scenarios/agent.toml --seeds 10`, 2026-11-27, mean over jobs of
/// mean iteration / ideal): `priority-edf` 1.161, `priority-fc` (first come) 1.366, `priority`
/// (shortest remaining time first by job) 1.207, fair sharing 1.273, MCS 1.155. Refuses a job
/// listed twice, naming it.
pub fn rank_earliest_deadline(
    bursts: &[(JobKey, u64, u64)],
) -> Result<Vec<(JobKey, u64)>, SchedError> {
    rank_ascending(
        bursts
            .iter()
            .map(|(job, start, alone)| (*job, start.saturating_add(*alone))),
    )
}

/// Ranks jobs by ascending value, ties by job: (job, rank), rank 0 first. Refuses a job listed
/// twice.
fn rank_ascending(
    jobs: impl Iterator<Item = (JobKey, u64)>,
) -> Result<Vec<(JobKey, u64)>, SchedError> {
    let mut v: Vec<(JobKey, u64)> = jobs.collect();
    v.sort_by_key(|(job, value)| (*value, *job));
    let mut seen: Vec<JobKey> = v.iter().map(|(job, _)| *job).collect();
    seen.sort_unstable();
    if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
        return Err(SchedError::InvalidParameter {
            name: "job listed twice in rank_jobs (job number)",
            value: w[0].0,
        });
    }
    Ok(v.iter()
        .enumerate()
        .map(|(r, (job, _))| (*job, r as u64))
        .collect())
}

/// A job for [`priority_levels`]: its rank (lower first, from [`rank_jobs`] or
/// [`rank_least_attained`]) and the links its flows cross.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankedJob {
    /// The job.
    pub job: JobKey,
    /// Its rank (0 first).
    pub rank: u64,
    /// The links its flows cross (any order; repeats allowed).
    pub links: Vec<LinkId>,
}

/// The strict-priority levels of [`Rules::Priority`] for a network of weighted sharing: in
/// rank order (ties by job), a job's level is one more than the highest level of the
/// higher-ranked jobs it shares a link with, 0 if it shares none. So of two jobs sharing a
/// link, the higher-ranked one always has the lower level, and jobs that share no link may
/// share a level (few levels: [`priority_weight`] stays far from underflow). Returns (job,
/// level) in rank order. Refuses a job listed twice, naming it. Not in the mlcc paper (issue
/// 19's job-level strict priority; levels are a longest path in the precedence order of jobs
/// over shared links).
pub fn priority_levels(jobs: &[RankedJob]) -> Result<Vec<(JobKey, u32)>, SchedError> {
    let ranked = rank_ascending(jobs.iter().map(|j| (j.job, j.rank)))?;
    let links: std::collections::HashMap<JobKey, &[LinkId]> =
        jobs.iter().map(|j| (j.job, j.links.as_slice())).collect();
    // Per link: one more than the highest level of the jobs placed on it so far.
    let mut next: std::collections::HashMap<LinkId, u32> = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(ranked.len());
    for (job, _) in ranked {
        let ls = links.get(&job).copied().unwrap_or(&[]);
        let level = ls
            .iter()
            .map(|l| next.get(l).copied().unwrap_or(0))
            .max()
            .unwrap_or(0);
        for l in ls {
            let e = next.entry(*l).or_insert(0);
            *e = (*e).max(level.saturating_add(1));
        }
        out.push((job, level));
    }
    Ok(out)
}

/// Weight ratio between consecutive levels of [`priority_weight`]: the simulator's
/// `priority` policy with 4 gave 84.5 / 112.7 / 110.1 s average JCT on the 100-job seeds
/// 1-3, with 1000 82.7 / 107.3 / 102.9 s, with 10^6 the same as 1000 (docs/results/simulator.md):
/// 1000 is near-strict priority.
pub const PRIORITY_WEIGHT_RATIO: f64 = 1000.0;

/// The least weight [`priority_weight`] gives: levels whose `ratio^-level` would fall below it
/// share it (positive, so that weighted sharing never starves a flow).
pub const PRIORITY_WEIGHT_MIN: f64 = 1e-300;

/// A flow's weight in weighted max-min sharing for strict-priority `level`
/// ([`priority_levels`]): `ratio^-level`, at least [`PRIORITY_WEIGHT_MIN`]; `ratio` ≤ 1 or
/// not finite gives 1 (fair sharing). With a large ratio, a flow of a lower level gets
/// what the higher levels leave on its links, which is [`Rules::Priority`]'s rule.
pub fn priority_weight(level: u32, ratio: f64) -> f64 {
    if !(ratio.is_finite() && ratio > 1.0) {
        return 1.0;
    }
    let exp = i32::try_from(level).unwrap_or(i32::MAX);
    ratio.powi(-exp).max(PRIORITY_WEIGHT_MIN)
}

/// A coflow unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "unit", rename_all = "snake_case")]
pub enum UnitKind {
    /// A job's ring.
    Ring,
    /// A parameter server's aggregation and broadcast.
    Ps {
        /// The parameter server's number in its job.
        ps: u32,
    },
    /// A flow alone.
    Alone {
        /// The flow.
        flow: FlowId,
    },
}

/// A group's place in its unit, in planning order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupPhase {
    /// A ring's flows, or a flow alone.
    All,
    /// A parameter server's aggregation flows.
    Aggregation,
    /// A parameter server's broadcast flows, planned after its aggregation.
    Broadcast,
}

/// The coflow unit of a flow of `job` with `role`.
pub fn unit_key(job: JobKey, flow: FlowId, role: &FlowRole) -> (JobKey, UnitKind) {
    let kind = match *role {
        FlowRole::RingSend { .. } => UnitKind::Ring,
        FlowRole::PsPush { ps } | FlowRole::PsPull { ps } => UnitKind::Ps { ps },
        FlowRole::Other => UnitKind::Alone { flow },
    };
    (job, kind)
}

/// The group of its unit a flow with `role` belongs to.
pub fn group_phase(role: &FlowRole) -> GroupPhase {
    match role {
        FlowRole::PsPush { .. } => GroupPhase::Aggregation,
        FlowRole::PsPull { .. } => GroupPhase::Broadcast,
        FlowRole::RingSend { .. } | FlowRole::Other => GroupPhase::All,
    }
}

/// One group's decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupOutcome {
    /// Its job and unit.
    pub job: JobKey,
    /// Its unit.
    pub unit: UnitKind,
    /// Its place in the unit.
    pub phase: GroupPhase,
    /// Its unit's planning key (the order of units, see the module documentation).
    pub order: PlanningKey,
    /// The members, in snapshot order.
    pub flows: Vec<FlowId>,
    /// Per member, the dependency it was planned with.
    pub dependencies: Vec<Dependency>,
    /// Per member, the progress it was planned with (bytes left bounded by what it may send
    /// under [`PolicyOptions::sendable_only`]).
    pub progress: Vec<FlowProgress>,
    /// Per member, the receiver's cut applied to its current slot, bytes.
    pub cuts_bytes: Vec<u64>,
    /// The joint plan after the cuts (per member: schedule, current-slot rate, F_i; MADD
    /// shares of the current slot).
    pub decision: GroupDecision,
    /// Per member, its share of the spare capacity of the current slot, bit/s (0 for a member
    /// planned bytes in the current slot, or without [`PolicyOptions::share_spare`]); under
    /// [`Rules::Priority`], its strict-priority share of the slot (every member).
    pub spare_bps: Vec<u64>,
    /// Per member, the rate to pace it at in the current slot, bit/s ([`slot_rate_bps`]).
    pub rates_bps: Vec<u64>,
    /// Per member, its traffic class (0 highest; its job's, from [`classes::TrafficClasses`]),
    /// set by [`decide_with_classes`] or [`Decisions::set_classes`]; empty from [`decide`]
    /// alone (and then not serialised, so [`decide`]'s output reads as before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<u8>,
}

/// The decisions of one slot: the groups in planning order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decisions {
    /// The groups, in the order they were planned.
    pub groups: Vec<GroupOutcome>,
}

impl Decisions {
    /// The rate decided for `flow` in the current slot, bit/s, if it was decided.
    pub fn rate_bps(&self, flow: FlowId) -> Option<u64> {
        self.groups.iter().find_map(|g| {
            g.flows
                .iter()
                .position(|f| *f == flow)
                .map(|i| g.rates_bps[i])
        })
    }
}

/// The rate to pace a decided flow at in the current slot, bit/s. Under
/// [`RateRule::PlanOrShare`]: [`Decision::pacing_rate_bps`] at its MADD share `share_now_bps` (a
/// slot that completes it goes at the largest feasible rate, mlcc paper Sec. IV-B), raised to
/// its spare share `spare_bps` (work conservation, see [`PolicyOptions::share_spare`]; under
/// [`Rules::Priority`], its strict-priority share) and to the floor `min_rate_bps`
/// ([`Snapshot::min_rate_bps`]). Under [`RateRule::Share`]: `spare_bps` (its strict-priority
/// share) raised to the floor; the plan does not raise it. [`decide`] sets
/// [`GroupOutcome::rates_bps`] with it (the rule from [`PolicyOptions::rate_rule`]); a caller
/// that changes a decision later in the slot (the agent's cut to a switch's admission, or by a
/// notice from another host) takes the new rate from it too, with the same rule.
pub fn slot_rate_bps(
    rule: RateRule,
    decision: &Decision,
    remaining_bytes: u64,
    share_now_bps: u64,
    spare_bps: u64,
    min_rate_bps: u64,
) -> u64 {
    match rule {
        RateRule::PlanOrShare => decision
            .pacing_rate_bps(remaining_bytes, share_now_bps)
            .max(spare_bps)
            .max(min_rate_bps),
        RateRule::Share => spare_bps.max(min_rate_bps),
    }
}

/// The receiver's cut of Alg. 2 (mlcc paper, Sec. IV-C, lines 13-16) for a flow with `role`
/// whose accumulated bytes are F_i = `accumulated_bytes`, given `bound_bytes`, the F of what it
/// depends on (a ring flow: its predecessor's F, to which its worker's own chunk is added; a
/// parameter server's broadcast flow: F_a^min of its aggregation flows), bytes: (F_i − bound)+.
/// 0 for the other roles (a worker's aggregation flow is only raised, never cut). [`decide`]
/// cuts its groups with it; an agent cuts with it for a notice that arrives after its slot's
/// decisions.
pub fn receiver_cut_bytes(role: &FlowRole, accumulated_bytes: u64, bound_bytes: u64) -> u64 {
    match *role {
        FlowRole::RingSend { chunk_bytes, .. } => {
            excess_bytes(accumulated_bytes, bound_bytes.saturating_add(chunk_bytes))
        }
        FlowRole::PsPull { .. } => excess_bytes(accumulated_bytes, bound_bytes),
        FlowRole::PsPush { .. } | FlowRole::Other => 0,
    }
}

/// A unit to plan: its key, its job and kind, and its flows (indices into the snapshot).
struct Unit {
    order: PlanningKey,
    rank: u64,
    job: JobKey,
    kind: UnitKind,
    flows: Vec<usize>,
}

/// [`decide`], then the traffic class of every decided flow: the job order of the decisions
/// ([`classes::job_order`]) compressed by `classes` ([`classes::TrafficClasses::assign`], whose
/// state carries the hysteresis from slot to slot) into [`GroupOutcome::classes`]. Rates,
/// order and plans are [`decide`]'s, unchanged.
///
/// Errors: those of [`decide`] (the table and `classes` are then unchanged; the assignment
/// itself cannot fail on the job order it is given, each job listed once).
pub fn decide_with_classes(
    table: &mut LinkLoadTable,
    snapshot: &Snapshot,
    options: &PolicyOptions,
    classes: &mut classes::TrafficClasses,
) -> Result<Decisions, SchedError> {
    let mut d = decide(table, snapshot, options)?;
    let assigned = classes.assign(&classes::job_order(&d, snapshot))?;
    d.set_classes(&assigned);
    Ok(d)
}

/// Checks the snapshot against `table`: the slot is the table's current slot, no flow twice,
/// every decided flow's links known.
fn check(table: &LinkLoadTable, snapshot: &Snapshot) -> Result<(), SchedError> {
    if snapshot.slot != table.current_slot() {
        return Err(SchedError::SlotMismatch {
            slot: snapshot.slot,
            current_slot: table.current_slot(),
        });
    }
    let mut ids: Vec<FlowId> = snapshot.flows.iter().map(|f| f.flow).collect();
    ids.sort_unstable();
    if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
        return Err(SchedError::DuplicateFlow(w[0]));
    }
    for f in snapshot.flows.iter().filter(|f| f.decide) {
        if f.path.is_empty() {
            return Err(SchedError::EmptyPath);
        }
        for l in &f.path {
            table.capacity_bps(*l)?;
        }
    }
    Ok(())
}

/// The units of `snapshot` with at least one flow to decide, in planning order.
fn units(
    table: &LinkLoadTable,
    snapshot: &Snapshot,
    options: &PolicyOptions,
) -> Result<Vec<Unit>, SchedError> {
    let mut by_unit: Vec<((JobKey, UnitKind), Vec<usize>)> = Vec::new();
    let mut index: std::collections::HashMap<(JobKey, UnitKind), usize> =
        std::collections::HashMap::new();
    for (i, f) in snapshot.flows.iter().enumerate() {
        let k = unit_key(f.job, f.flow, &f.role);
        let at = *index.entry(k).or_insert_with(|| {
            by_unit.push((k, Vec::new()));
            by_unit.len() - 1
        });
        by_unit[at].1.push(i);
    }
    let mut out = Vec::new();
    for ((job, kind), flows) in by_unit {
        let reqs: Vec<FlowRequest> = flows
            .iter()
            .map(|&i| &snapshot.flows[i])
            .filter(|f| f.decide)
            .map(|f| request(f, Dependency::Independent))
            .collect();
        if reqs.is_empty() {
            continue;
        }
        let gamma = group_bottleneck_us(table, &reqs).unwrap_or(u64::MAX);
        let (sent, size) = flows.iter().fold((0u64, 0u64), |(s, z), &i| {
            let f = &snapshot.flows[i];
            (
                s.saturating_add(f.progress.sent_bytes),
                z.saturating_add(f.iteration_bytes),
            )
        });
        let rank = match options.rules {
            Rules::Mlcc => 0,
            Rules::Interleave | Rules::Priority => options
                .job_rank
                .iter()
                .find(|(j, _)| *j == job)
                .map_or(u64::MAX, |(_, r)| *r),
        };
        out.push(Unit {
            order: planning_key(sent, size, gamma),
            rank,
            job,
            kind,
            flows,
        });
    }
    out.sort_by_key(|u| (u.rank, u.order, u.job, u.kind));
    Ok(out)
}

fn request(f: &FlowState, dependency: Dependency) -> FlowRequest {
    FlowRequest {
        flow: f.flow,
        path: f.path.clone(),
        progress: f.progress,
        dependency,
    }
}

/// The policy layer's entry point: decides the flows of `snapshot` marked `decide` in the
/// current slot against `table` (see the module documentation for the rules), and stores their
/// new schedules in `table` (a flow planned nothing leaves it). Returns the groups in planning
/// order with their dependencies, cuts, plans and rates.
///
/// Refuses, naming the value, a snapshot whose slot is not the table's current slot, a flow
/// listed twice, or a decided flow with an empty path or a link the table does not know;
/// the table is then unchanged.
pub fn decide(
    table: &mut LinkLoadTable,
    snapshot: &Snapshot,
    options: &PolicyOptions,
) -> Result<Decisions, SchedError> {
    check(table, snapshot)?;
    let units = units(table, snapshot, options)?;
    let flows = &snapshot.flows;
    let at: std::collections::HashMap<FlowId, usize> =
        flows.iter().enumerate().map(|(i, f)| (f.flow, i)).collect();
    let pos = |id: FlowId| at.get(&id).copied();
    // Per flow, whether it is a member of the group being planned (ring).
    let mut member = vec![false; flows.len()];
    let mut out = Decisions::default();
    for u in &units {
        match u.kind {
            UnitKind::Ring => {
                let members = deciding(flows, &u.flows);
                let pred = |i: usize| match flows[i].role {
                    FlowRole::RingSend {
                        predecessor,
                        chunk_bytes,
                    } => predecessor.and_then(pos).map(|p| (p, chunk_bytes)),
                    _ => None,
                };
                for &i in &members {
                    member[i] = true;
                }
                let deps: Vec<Dependency> = members
                    .iter()
                    .map(|&i| match pred(i) {
                        Some((p, chunk)) if !member[p] => Dependency::Ring {
                            predecessor_bytes: flows[p].progress.sent_bytes.saturating_add(chunk),
                        },
                        _ => Dependency::Independent,
                    })
                    .collect();
                let g = plan_members(
                    table,
                    u,
                    GroupPhase::All,
                    flows,
                    &members,
                    deps,
                    options,
                    |i, g| {
                        let Some((p, _)) = pred(members[i]) else {
                            return 0;
                        };
                        let pred_f = if member[p] {
                            members
                                .binary_search(&p)
                                .map_or(flows[p].progress.sent_bytes, |k| {
                                    g.decisions[k].accumulated_bytes
                                })
                        } else {
                            flows[p].progress.sent_bytes
                        };
                        receiver_cut_bytes(
                            &flows[members[i]].role,
                            g.decisions[i].accumulated_bytes,
                            pred_f,
                        )
                    },
                )?;
                for &i in &members {
                    member[i] = false;
                }
                out.groups.extend(g);
            }
            UnitKind::Ps { .. } => {
                let (pushes, pulls): (Vec<usize>, Vec<usize>) = u
                    .flows
                    .iter()
                    .copied()
                    .filter(|&i| group_phase(&flows[i].role) != GroupPhase::All)
                    .partition(|&i| group_phase(&flows[i].role) == GroupPhase::Aggregation);
                let pull_f: Vec<u64> = pulls
                    .iter()
                    .map(|&i| flows[i].progress.sent_bytes)
                    .collect();
                let agg = deciding(flows, &pushes);
                let dep = Dependency::ps_aggregation(&pull_f);
                let deps = vec![dep; agg.len()];
                let g = plan_members(
                    table,
                    u,
                    GroupPhase::Aggregation,
                    flows,
                    &agg,
                    deps,
                    options,
                    |_, _| 0,
                )?;
                let agg_f: Vec<u64> = pushes
                    .iter()
                    .map(|i| match (&g, agg.iter().position(|a| a == i)) {
                        (Some(g), Some(k)) => g.decision.decisions[k].accumulated_bytes,
                        _ => flows[*i].progress.sent_bytes,
                    })
                    .collect();
                out.groups.extend(g);
                let dep = Dependency::ps_broadcast(&agg_f);
                let a_min = agg_f.iter().min().copied().unwrap_or(0);
                let bcast = deciding(flows, &pulls);
                let deps = vec![dep; bcast.len()];
                let g = plan_members(
                    table,
                    u,
                    GroupPhase::Broadcast,
                    flows,
                    &bcast,
                    deps,
                    options,
                    |i, g| {
                        receiver_cut_bytes(
                            &flows[bcast[i]].role,
                            g.decisions[i].accumulated_bytes,
                            a_min,
                        )
                    },
                )?;
                out.groups.extend(g);
            }
            UnitKind::Alone { .. } => {
                let members = deciding(flows, &u.flows);
                let deps = vec![Dependency::Independent; members.len()];
                let g = plan_members(
                    table,
                    u,
                    GroupPhase::All,
                    flows,
                    &members,
                    deps,
                    options,
                    |_, _| 0,
                )?;
                out.groups.extend(g);
            }
        }
    }
    finish_rates(table, snapshot, options, &at, &mut out)?;
    Ok(out)
}

/// Those of `indices` (into `flows`) whose flow is to be decided now.
fn deciding(flows: &[FlowState], indices: &[usize]) -> Vec<usize> {
    indices
        .iter()
        .copied()
        .filter(|&i| flows[i].decide)
        .collect()
}

/// Plans one group (`members`, indices into `flows`, with their dependencies) jointly, then
/// cuts member i by `cut(i, decision)` and re-plans; `None` for a group without members.
#[allow(clippy::too_many_arguments)]
fn plan_members(
    table: &mut LinkLoadTable,
    unit: &Unit,
    phase: GroupPhase,
    flows: &[FlowState],
    members: &[usize],
    dependencies: Vec<Dependency>,
    options: &PolicyOptions,
    cut: impl Fn(usize, &GroupDecision) -> u64,
) -> Result<Option<GroupOutcome>, SchedError> {
    if members.is_empty() {
        return Ok(None);
    }
    let reqs: Vec<FlowRequest> = members
        .iter()
        .zip(&dependencies)
        .map(|(&i, d)| {
            let mut r = request(&flows[i], *d);
            if options.sendable_only {
                if let Some(s) = d.sendable_bytes(r.progress.sent_bytes) {
                    r.progress.remaining_bytes = r.progress.remaining_bytes.min(s);
                }
            }
            r
        })
        .collect();
    let g = plan_group(table, &reqs)?;
    let cuts: Vec<u64> = (0..reqs.len()).map(|i| cut(i, &g)).collect();
    // A reduction without cuts gives the decision back unchanged.
    let g = if cuts.iter().all(|c| *c == 0) {
        g
    } else {
        apply_group_reduction(table, &reqs, &g, &cuts)?
    };
    let rates_bps = reqs
        .iter()
        .zip(&g.decisions)
        .zip(&g.share_now_bps)
        .map(|((r, d), share)| {
            slot_rate_bps(
                RateRule::PlanOrShare,
                d,
                r.progress.remaining_bytes,
                *share,
                0,
                0,
            )
        })
        .collect();
    Ok(Some(GroupOutcome {
        job: unit.job,
        unit: unit.kind,
        phase,
        order: unit.order,
        flows: reqs.iter().map(|r| r.flow).collect(),
        dependencies,
        progress: reqs.iter().map(|r| r.progress).collect(),
        cuts_bytes: cuts,
        decision: g,
        spare_bps: vec![0; reqs.len()],
        rates_bps,
        classes: Vec::new(),
    }))
}

/// Spare sharing and the rate floor over the slot's decisions (see the module documentation).
fn finish_rates(
    table: &LinkLoadTable,
    snapshot: &Snapshot,
    options: &PolicyOptions,
    at: &std::collections::HashMap<FlowId, usize>,
    out: &mut Decisions,
) -> Result<(), SchedError> {
    if options.rules == Rules::Priority {
        let reserve_bps = match options.rate_rule() {
            RateRule::Share => snapshot.min_rate_bps,
            RateRule::PlanOrShare => 0,
        };
        priority_shares(
            table,
            snapshot,
            at,
            out,
            options.work_conserving,
            reserve_bps,
        )?;
    } else if options.share_spare {
        // The idle members (planned no bytes in the current slot), and per link how many of
        // them cross it.
        let path_of = |f: FlowId| path_in(snapshot, at, f);
        let idle: Vec<(usize, usize)> = out
            .groups
            .iter()
            .enumerate()
            .flat_map(|(gi, g)| {
                g.decision
                    .decisions
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| d.plan.bytes.first().copied().unwrap_or(0) == 0)
                    .map(move |(k, _)| (gi, k))
            })
            .collect();
        let mut crossing: std::collections::BTreeMap<LinkId, u64> = Default::default();
        for &(gi, k) in &idle {
            for l in path_of(out.groups[gi].flows[k]) {
                *crossing.entry(*l).or_default() += 1;
            }
        }
        let slot = table.current_slot();
        for (gi, k) in idle {
            // An idle flow has nothing of its own in the current slot: what the table leaves
            // free there is what the slot's plans leave it.
            let mut share: Option<u64> = None;
            for l in path_of(out.groups[gi].flows[k]) {
                let n = crossing.get(l).copied().unwrap_or(1).max(1);
                let s = table.available_bps_at(*l, slot)? / n;
                share = Some(share.map_or(s, |x| x.min(s)));
            }
            out.groups[gi].spare_bps[k] = share.unwrap_or(0);
        }
    }
    if options.work_conserving && options.rules != Rules::Priority {
        work_conserving_shares(table, snapshot, at, out)?;
    }
    if options.share_spare
        || options.work_conserving
        || options.rules == Rules::Priority
        || snapshot.min_rate_bps > 0
    {
        let rule = options.rate_rule();
        for g in &mut out.groups {
            for (k, d) in g.decision.decisions.iter().enumerate() {
                g.rates_bps[k] = slot_rate_bps(
                    rule,
                    d,
                    g.progress[k].remaining_bytes,
                    g.decision.share_now_bps[k],
                    g.spare_bps[k],
                    snapshot.min_rate_bps,
                );
            }
        }
    }
    Ok(())
}

/// The path of flow `f` of `snapshot` (`at`: flow -> its index there); empty if absent.
fn path_in<'a>(
    snapshot: &'a Snapshot,
    at: &std::collections::HashMap<FlowId, usize>,
    f: FlowId,
) -> &'a [LinkId] {
    at.get(&f)
        .map_or(&[][..], |&i| snapshot.flows[i].path.as_slice())
}

/// Per link of the decided flows' paths, what the flows not decided now leave of the current
/// slot: the table's available bandwidth plus the decided flows' own current-slot rates
/// (their schedules are in the table), bit/s.
fn undecided_leave(
    table: &LinkLoadTable,
    snapshot: &Snapshot,
    at: &std::collections::HashMap<FlowId, usize>,
    out: &Decisions,
) -> Result<std::collections::HashMap<LinkId, u64>, SchedError> {
    let slot = table.current_slot();
    let mut left: std::collections::HashMap<LinkId, u64> = std::collections::HashMap::new();
    for g in &out.groups {
        for f in &g.flows {
            let own = table.flow_schedule(*f).map_or(0, |s| s.rate_bps_at(slot));
            for l in path_in(snapshot, at, *f) {
                let e = match left.entry(*l) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert(table.available_bps_at(*l, slot)?)
                    }
                };
                *e = e.saturating_add(own);
            }
        }
    }
    Ok(left)
}

/// The least over `path` of what is `left` on a link divided by the flows `on` it sharing it
/// (a link without a count: one), bit/s; 0 for an empty path.
fn least_split(
    path: &[LinkId],
    left: &std::collections::HashMap<LinkId, u64>,
    on: &std::collections::HashMap<LinkId, u64>,
) -> u64 {
    path.iter()
        .map(|l| left.get(l).copied().unwrap_or(0) / on.get(l).copied().unwrap_or(1).max(1))
        .min()
        .unwrap_or(0)
}

/// Whether member `k` of group `g` was planned bytes in the current slot (it has something to
/// send now: under [`PolicyOptions::sendable_only`], bytes its dependency lets it send).
fn is_active(g: &GroupOutcome, k: usize) -> bool {
    g.decision
        .decisions
        .get(k)
        .and_then(|d| d.plan.bytes.first())
        .is_some_and(|b| *b > 0)
}

/// Whether member `k` of group `g` has bytes to send now (under
/// [`PolicyOptions::sendable_only`], bytes its dependency lets it send), planned in the current
/// slot or not: such a flow sends at least at the floor whatever its plan.
fn has_bytes(g: &GroupOutcome, k: usize) -> bool {
    g.progress.get(k).is_some_and(|p| p.remaining_bytes > 0)
}

/// One pass of [`priority_shares`]: which members of a group take their share in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SharePass {
    /// Every member (without work conservation: the only pass).
    All,
    /// Members planned bytes in the current slot ([`is_active`]).
    Active,
    /// Members planned nothing now that have bytes they can send ([`has_bytes`]).
    IdleWithBytes,
    /// Members planned nothing now with nothing they can send.
    IdleWithoutBytes,
}

impl SharePass {
    /// Whether member `k` of group `g` takes its share in this pass.
    fn takes(self, g: &GroupOutcome, k: usize) -> bool {
        match self {
            SharePass::All => true,
            SharePass::Active => is_active(g, k),
            SharePass::IdleWithBytes => !is_active(g, k) && has_bytes(g, k),
            SharePass::IdleWithoutBytes => !is_active(g, k) && !has_bytes(g, k),
        }
    }
}

/// [`Rules::Priority`]'s shares of the current slot, into [`GroupOutcome::spare_bps`]: per
/// link, what the flows not decided now leave ([`undecided_leave`]); then, group by group in
/// planning order, each member gets the least over its path of what is left divided by the
/// group's members on the link, and what it gets is taken off its links. With
/// `work_conserving`, three such passes ([`SharePass`]): the active members first
/// ([`is_active`]), then the idle ones with bytes they can send now ([`has_bytes`]: e.g. a
/// ring member planned nothing because its partner's link is taken, whose own link is free),
/// then the idle ones without (computing, or a PS broadcast waiting for its pushes), so an idle
/// group never holds what an active one after it could send, and a flow that cannot send holds
/// nothing from one that can. The last pass keeps what is still free for the flows about to
/// begin a burst, so they start at once. With
/// `reserve_bps` > 0 (the floor under [`RateRule::Share`], with `work_conserving`), that much
/// is first set aside on its links for every member with bytes to send ([`has_bytes`]: planned
/// in the current slot or deferred behind higher-ranked plans, it sends at the floor either
/// way), and such a member's share is its split of the rest plus its reserve: the floors the
/// lower-ranked flows will be paced at are not also given to the first-ranked one.
fn priority_shares(
    table: &LinkLoadTable,
    snapshot: &Snapshot,
    at: &std::collections::HashMap<FlowId, usize>,
    out: &mut Decisions,
    work_conserving: bool,
    reserve_bps: u64,
) -> Result<(), SchedError> {
    let path_of = |f: FlowId| path_in(snapshot, at, f);
    let mut left = undecided_leave(table, snapshot, at, out)?;
    if reserve_bps > 0 {
        for g in &out.groups {
            for (k, f) in g.flows.iter().enumerate() {
                if !has_bytes(g, k) {
                    continue;
                }
                for l in path_of(*f) {
                    if let Some(e) = left.get_mut(l) {
                        *e = e.saturating_sub(reserve_bps);
                    }
                }
            }
        }
    }
    let passes: &[SharePass] = if work_conserving {
        &[
            SharePass::Active,
            SharePass::IdleWithBytes,
            SharePass::IdleWithoutBytes,
        ]
    } else {
        &[SharePass::All]
    };
    for pass in passes {
        for g in &mut out.groups {
            let takes: Vec<bool> = (0..g.flows.len()).map(|k| pass.takes(g, k)).collect();
            let mut members_on: std::collections::HashMap<LinkId, u64> = Default::default();
            for (f, _) in g.flows.iter().zip(&takes).filter(|(_, t)| **t) {
                for l in path_of(*f) {
                    *members_on.entry(*l).or_default() += 1;
                }
            }
            let mut split = vec![0; g.flows.len()];
            for (k, f) in g.flows.iter().enumerate() {
                if !takes[k] {
                    continue;
                }
                split[k] = least_split(path_of(*f), &left, &members_on);
                // A member with bytes to send holds its reserve besides its split.
                let reserve = if has_bytes(g, k) { reserve_bps } else { 0 };
                g.spare_bps[k] = split[k].saturating_add(reserve);
            }
            for (k, f) in g.flows.iter().enumerate() {
                if !takes[k] {
                    continue;
                }
                for l in path_of(*f) {
                    if let Some(e) = left.get_mut(l) {
                        *e = e.saturating_sub(split[k]);
                    }
                }
            }
        }
    }
    Ok(())
}

/// [`PolicyOptions::work_conserving`] under [`Rules::Mlcc`] and [`Rules::Interleave`]: per
/// link, what the undecided flows ([`undecided_leave`]) and the active decided flows' pacing
/// rates ([`Decision::pacing_rate_bps`] at their MADD share) leave, split equally among the
/// active flows on the link; each active member's [`GroupOutcome::spare_bps`] becomes its
/// pacing rate plus the least of those splits over its path (so [`slot_rate_bps`], which
/// takes the larger of the two, paces it there). Idle members keep what
/// [`PolicyOptions::share_spare`] gave them.
fn work_conserving_shares(
    table: &LinkLoadTable,
    snapshot: &Snapshot,
    at: &std::collections::HashMap<FlowId, usize>,
    out: &mut Decisions,
) -> Result<(), SchedError> {
    let path_of = |f: FlowId| path_in(snapshot, at, f);
    let mut left = undecided_leave(table, snapshot, at, out)?;
    let mut active_on: std::collections::HashMap<LinkId, u64> = Default::default();
    let mut pacing: Vec<Vec<u64>> = Vec::with_capacity(out.groups.len());
    for g in &out.groups {
        let mut p = vec![0; g.flows.len()];
        for (k, f) in g.flows.iter().enumerate() {
            if !is_active(g, k) {
                continue;
            }
            p[k] = g.decision.decisions[k]
                .pacing_rate_bps(g.progress[k].remaining_bytes, g.decision.share_now_bps[k]);
            for l in path_of(*f) {
                *active_on.entry(*l).or_default() += 1;
                if let Some(e) = left.get_mut(l) {
                    *e = e.saturating_sub(p[k]);
                }
            }
        }
        pacing.push(p);
    }
    for (g, p) in out.groups.iter_mut().zip(pacing) {
        for (k, f) in g.flows.iter().enumerate() {
            if !is_active(g, k) {
                continue;
            }
            let extra = least_split(path_of(*f), &left, &active_on);
            g.spare_bps[k] = p[k].saturating_add(extra);
        }
    }
    Ok(())
}
