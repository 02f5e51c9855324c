// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `priority`: the policy layer's [`mlcc_sched::Rules::Priority`] (job-level strict priority,
//! work-conserving; not in the mlcc paper) in the simulator's network of weighted
//! max-min sharing. Nothing of the rule is here: the ranks are the layer's [`rank_jobs`]
//! (shortest remaining time first: iterations left times the job's iteration time alone), the
//! levels its [`priority_levels`] over the links each job's flows cross, a flow's weight its
//! level's [`priority_weight`] (ratio [`mlcc_sched::PRIORITY_WEIGHT_RATIO`]). The engine's
//! weighted max-min then gives a higher-ranked job's flows the link and lets lower ranks fill
//! what is left, re-solved at every flow start and end (burst start and end), not at slot
//! edges, and never capped, so no bandwidth idles while a flow could use it.
//!
//! Ranks are stable between job arrivals and departures: they are recomputed only when a job
//! starts or ends (the engine then re-decides every communicating job), so a job's rank does
//! not flip from one burst to the next.
//!
//! `priority-fc` and `priority-edf` ([`PriorityByBurst`]) are the same rule with the orders
//! ccp-agent ranks by (agent.toml `[sched] rules = "priority"` with `job_order`): first come,
//! first served by burst (the layer's [`rank_first_come`], the agent's default: the job whose
//! current communication phase began first goes first, so links serve bursts in the order they
//! arrive, each at the full link), or earliest deadline first ([`rank_earliest_deadline`], a
//! burst's deadline being its start plus the job's communication time alone). Their ranks change
//! at every burst start and end, so the jobs' levels are taken anew whenever the set of active
//! flows changes.
//!
//! Which jobs are re-levelled at a change (the levels are exactly those of re-levelling every
//! job; what differs is the engine's, below): a job's level depends
//! only on the ranked jobs it is link-connected to (two jobs are connected when their flows cross
//! a common link, [`mlcc_sched::priority_levels`]: one more than the highest level of the
//! higher-ranked jobs sharing a link), and the ranks order every burst by a key of its own (its
//! start, its deadline), so the levels of a union of whole components computed alone are the
//! levels computed over all jobs. At a change, only the components reached from the links of the
//! jobs it touched are re-levelled (a search through [`Sim::link_jobs`]; a job whose burst ended
//! is still searched from, so the component it held together is re-levelled as its parts);
//! `exact` re-levels every communicating job at every change (the reference, whose cost grows
//! with all active flows at every event: at cluster scale it did not finish in 230 s where fair
//! took 17 s, docs/results/simulator.md). The two differ in one thing besides the cost, the engine's:
//! its whole-cluster path re-allocates every job with a flow capped at the rate of the flow it
//! waits on at every decision (its refinement rounds follow such chains only two links deep),
//! the sparse path only the jobs it decides, as for the per-job policies (`priority`, fair).
//! Searching from those jobs too made the two agree to 1e-6 but cost the default run minutes,
//! not seconds; without it the JCTs agree within 1 % per job (`tests/approx.rs`, docs/results/simulator.md).
//!
//! # Traffic classes (`--classes N`, [`Levels`])
//!
//! On the wire, `ccp-agent` with `[sched] classes = N` marks each flow with its job's class
//! (DSCP), the job order compressed onto N strict-priority classes by
//! [`mlcc_sched::policy::classes`]; a switch port serves the classes by strict priority, class 0
//! first, flows of one class share it as TCP does, and a lower class sends whenever the higher
//! ones have nothing queued (IEEE 802.1Qaz strict priority; work-conserving). With `N` ≥ 1 the
//! policies here rank exactly as without classes, then hand the ranked jobs to that same
//! compressor ([`TrafficClasses::assign`], its hysteresis carried from one re-levelling to the
//! next) instead of [`priority_levels`], and weight a job's flows by its class,
//! [`priority_weight`]`(class, ratio)`. What the fluid model makes of it:
//!
//! - **Within a class**: equal weights, so the flows of one class share what the higher classes
//!   leave on a link max-min fairly, as under `fair` (`N` = 1: every job in class 0, the `fair`
//!   allocation exactly).
//! - **Across classes**: near-strict priority, as for the unlimited levels: a flow one class
//!   lower has 1/[`mlcc_sched::PRIORITY_WEIGHT_RATIO`] the weight, so where both are bottlenecked
//!   together it keeps about 1/1001 of the link (a strict port gives it none).
//! - **Work conservation**: weighted max-min fills every link, so a lower class gets all that
//!   the higher classes leave on each link; when a higher class's job computes, its flows are
//!   gone and the lower class has the link from that instant.
//! - **When classes are assigned**: at every re-levelling (a burst start or end for
//!   `priority-fc`/`priority-edf`, over the communicating jobs; a job start or end for
//!   `priority`/`cassini+priority`, over every placed job, as their ranks are), where the agent
//!   assigns once per slot (60 ms) over the jobs with a decided flow: changes the agent sees
//!   together in one slot are seen one by one here. The sparse path re-assigns only the
//!   components a change reached ([`TrafficClasses::assign_part`], which gives the classes of
//!   assigning every job) and forgets a job whose burst ended, as the agent forgets a job with
//!   no decided flow.
//! - **Against unlimited levels**: a fresh compressor gives `min(level, N − 1)`, so with `N`
//!   above the deepest level the runs are the same, except where the hysteresis keeps a job in a
//!   class deeper than its level (its neighbourhood kept its order while a higher neighbour
//!   moved up because of a change elsewhere). A strict port sees only the order of the classes
//!   on it, which is the same; the weights here give that job ratio⁻² instead of ratio⁻¹ of its
//!   higher neighbour's weight, at most 0.1 % of the link at a time, though the hand-overs it
//!   moves can reorder later bursts (8 classes against unlimited levels on the random clusters
//!   of `tests/approx.rs`: mean JCT within 0.53 %, per job within 2.4 %).
//!
//! Not modelled: the per-class queues themselves. A fluid link has no queue, so no queueing
//! delay per class, no drops or ECN marks per class, no time for a lower class's TCP to ramp up
//! when the port frees (the VM's strict-priority port handed a CUBIC flow the port back within
//! a second, docs/results/classes.md); the DSCP code points (only the class order matters);
//! traffic of other tenants: every simulated flow is a classified training flow, so the 50/50
//! weighting of the training classes against unclassified traffic never binds (a
//! work-conserving scheduler gives training the whole port when nothing else is queued); and,
//! as without classes, the agent's per-slot pacing rates (the flows are uncapped).

use mlcc_sched::{
    priority_levels, priority_weight, rank_earliest_deadline, rank_first_come, rank_jobs,
    rank_least_attained, JobKey, JobOrder, LinkId, RankedJob, TrafficClasses,
};

use super::{job_work, ComponentSearch, Control, JobWeights, Policy};
use crate::error::SimError;
use crate::sim::{Phase, Sim};

/// How ranked jobs become strict-priority levels, each level's flows weighted
/// [`priority_weight`]`(level, ratio)`: the policy layer's unlimited levels, or the agent's N
/// traffic classes (module header, "Traffic classes").
#[derive(Clone, Debug)]
pub enum Levels {
    /// [`priority_levels`]: as many levels as the jobs' precedence over shared links needs.
    Unlimited,
    /// The agent's rank compression onto N strict-priority classes
    /// ([`mlcc_sched::policy::classes`], `ccp-agent`'s `[sched] classes`): a job's level is its
    /// class (0 highest), with the compressor's hysteresis carried from decision to decision.
    Classes(TrafficClasses),
}

impl Levels {
    /// `classes` traffic classes (1..=[`mlcc_sched::MAX_CLASSES`]), or unlimited levels for 0.
    ///
    /// Errors: [`SimError::Config`] naming a count above 8.
    pub fn new(classes: u8) -> Result<Self, SimError> {
        if classes == 0 {
            return Ok(Levels::Unlimited);
        }
        TrafficClasses::new(classes)
            .map(Levels::Classes)
            .map_err(|e| SimError::Config(format!("classes = {classes}: {e}")))
    }

    /// The number of classes, 0 for unlimited levels.
    pub fn classes(&self) -> u8 {
        match self {
            Levels::Unlimited => 0,
            Levels::Classes(tc) => tc.classes(),
        }
    }

    /// Each of `ranked`'s jobs' level (job, level); `part`: `ranked` is some whole
    /// link-connected components of the ranked jobs, the others keep their classes
    /// ([`TrafficClasses::assign_part`]), else it is every ranked job
    /// ([`TrafficClasses::assign`], the jobs not listed forgotten). `None` if the layer refused
    /// (a job listed twice, which distinct job numbers rule out).
    fn assign(&mut self, ranked: &[RankedJob], part: bool) -> Option<Vec<(JobKey, u32)>> {
        match self {
            Levels::Unlimited => priority_levels(ranked).ok(),
            Levels::Classes(tc) => {
                let out = if part {
                    tc.assign_part(ranked)
                } else {
                    tc.assign(ranked)
                };
                out.ok()
                    .map(|v| v.into_iter().map(|c| (c.job, u32::from(c.class))).collect())
            }
        }
    }

    /// Job `j` is no longer ranked: its class and hysteresis state are forgotten (as the agent
    /// forgets a job without a decided flow in a slot).
    fn forget(&mut self, j: usize) {
        if let Levels::Classes(tc) = self {
            tc.forget(JobKey(j as u64));
        }
    }
}

/// The levels ([`Levels::assign`], `part` as there) for `ranks` over the links of each ranked
/// job's flows: per job (index), its flows' weight for the ranked jobs; every other entry of
/// `weight` is left as it was (1 where `weight` grows: clear it first for 1 everywhere else).
fn level_weights(
    sim: &Sim,
    ranks: Vec<(JobKey, u64)>,
    ratio: f64,
    levels: &mut Levels,
    part: bool,
    weight: &mut Vec<f64>,
) {
    weight.resize(sim.jobs.len(), 1.0);
    let ranked: Vec<RankedJob> = ranks
        .into_iter()
        .map(|(job, rank)| RankedJob {
            job,
            rank,
            links: sim.jobs[job.0 as usize]
                .link_bytes
                .iter()
                .map(|(l, _)| LinkId(*l))
                .collect(),
        })
        .collect();
    // Job numbers are distinct, so the layer cannot refuse; fair sharing if it did.
    let Some(levels) = levels.assign(&ranked, part) else {
        return;
    };
    for (job, level) in levels {
        weight[job.0 as usize] = priority_weight(level, ratio);
    }
}

/// Job-level strict priority by the policy layer's ranks and levels.
#[derive(Clone, Debug)]
pub struct Priority {
    /// Weight ratio between consecutive levels (> 1; [`mlcc_sched::PRIORITY_WEIGHT_RATIO`]).
    pub ratio: f64,
    /// Unlimited levels or N traffic classes.
    pub levels: Levels,
    /// Per job (index), its flows' weight.
    weight: Vec<f64>,
}

impl Priority {
    /// The policy with weight ratio `ratio` between levels, on `levels`.
    pub fn new(ratio: f64, levels: Levels) -> Self {
        Priority {
            ratio,
            levels,
            weight: Vec::new(),
        }
    }

    /// Re-ranks the jobs that are placed and cross the network.
    fn relevel(&mut self, sim: &Sim) {
        let live: Vec<usize> = (0..sim.jobs.len())
            .filter(|&j| {
                let job = &sim.jobs[j];
                job.network && !matches!(job.phase, Phase::Waiting | Phase::Done)
            })
            .collect();
        let work = job_work(sim, &live);
        // Job numbers are distinct, so the layer cannot refuse; fair sharing if it did.
        let ranks = rank_jobs(&work).unwrap_or_default();
        self.weight.clear();
        level_weights(
            sim,
            ranks,
            self.ratio,
            &mut self.levels,
            false,
            &mut self.weight,
        );
    }

    /// Job `j`'s flows' weight.
    fn weight(&self, j: usize) -> f64 {
        self.weight.get(j).copied().unwrap_or(1.0)
    }
}

impl JobWeights for Priority {
    fn label(&self) -> String {
        "priority".into()
    }

    fn reweigh(&mut self, sim: &Sim) {
        self.relevel(sim);
    }

    fn job_weight(&self, j: usize) -> f64 {
        self.weight(j)
    }
}

/// `priority-fc`, `priority-edf` and `priority-sedf`: job-level strict priority with ranks by
/// burst (the module header), first come, earliest deadline, or earliest deadline with each
/// job's time alone scaled by its smoothed slowdown ([`mlcc_sched::JobOrder`]; least attained
/// service is left to the agent, whose jobs' work left is unknown).
#[derive(Clone, Debug)]
pub struct PriorityByBurst {
    /// Weight ratio between consecutive levels (> 1; [`mlcc_sched::PRIORITY_WEIGHT_RATIO`]).
    pub ratio: f64,
    /// How bursts are ranked: [`JobOrder::FirstCome`] or [`JobOrder::EarliestDeadline`] (the
    /// deadline: the burst's start plus the job's communication time alone on its placement,
    /// [`crate::sim::Job::alone_comm_s`]; under [`JobOrder::SlowdownDeadline`] that time
    /// divided by [`crate::sim::Job::comm_slowdown`]); [`JobOrder::LeastAttained`] ranks by
    /// iterations done.
    pub order: JobOrder,
    /// Re-level every communicating job at every change instead of the link-connected
    /// components a change reaches (module header; both give the same levels).
    pub exact: bool,
    /// Unlimited levels or N traffic classes.
    pub levels: Levels,
    weight: Vec<f64>,
    /// The component search.
    search: ComponentSearch,
}

impl PriorityByBurst {
    /// The policy with weight ratio `ratio` between levels and burst order `order`, re-levelling
    /// the components a change reaches (`exact` false) or every job, on `levels`.
    pub fn new(ratio: f64, order: JobOrder, exact: bool, levels: Levels) -> Self {
        PriorityByBurst {
            ratio,
            order,
            exact,
            levels,
            weight: Vec::new(),
            search: ComponentSearch::default(),
        }
    }

    /// Ranks `jobs` (distinct) by burst in [`PriorityByBurst::order`] and sets their weights
    /// from their levels; `part` as in [`Levels::assign`].
    fn relevel(&mut self, sim: &Sim, jobs: &[usize], part: bool) {
        // Burst starts and times alone in ns of simulated time (the layer's shared clock).
        let ns = |s: f64| {
            if s.is_finite() {
                (s * 1e9) as u64
            } else {
                u64::MAX
            }
        };
        let key = |j: usize| JobKey(j as u64);
        // Job numbers are distinct, so the layer cannot refuse; fair sharing if it did.
        let ranks = match self.order {
            JobOrder::FirstCome => {
                let starts: Vec<(JobKey, u64)> = jobs
                    .iter()
                    .map(|&j| (key(j), ns(sim.jobs[j].comm_start_s)))
                    .collect();
                rank_first_come(&starts)
            }
            JobOrder::EarliestDeadline | JobOrder::SlowdownDeadline => {
                let slowdown = self.order == JobOrder::SlowdownDeadline;
                let bursts: Vec<(JobKey, u64, u64)> = jobs
                    .iter()
                    .map(|&j| {
                        let job = &sim.jobs[j];
                        let alone_ns = ns(job.alone_comm_s);
                        let alone_ns = if slowdown {
                            job.comm_slowdown.scaled_alone_ns(alone_ns)
                        } else {
                            alone_ns
                        };
                        (key(j), ns(job.comm_start_s), alone_ns)
                    })
                    .collect();
                rank_earliest_deadline(&bursts)
            }
            JobOrder::LeastAttained => {
                let done: Vec<(JobKey, u64)> = jobs
                    .iter()
                    .map(|&j| (key(j), u64::from(sim.jobs[j].iterations_done)))
                    .collect();
                rank_least_attained(&done)
            }
        }
        .unwrap_or_default();
        level_weights(
            sim,
            ranks,
            self.ratio,
            &mut self.levels,
            part,
            &mut self.weight,
        );
    }
}

/// True when job `j` is ranked: it communicates over the network now (a network flow of it is
/// active, as in [`Sim::active`]).
fn ranked(sim: &Sim, j: usize) -> bool {
    let job = &sim.jobs[j];
    job.network && job.phase == Phase::Communicating && sim.network_flows(j).next().is_some()
}

impl Policy for PriorityByBurst {
    fn name(&self) -> String {
        match self.order {
            JobOrder::FirstCome => "priority-fc".into(),
            JobOrder::EarliestDeadline => "priority-edf".into(),
            JobOrder::SlowdownDeadline => "priority-sedf".into(),
            JobOrder::LeastAttained => "priority-las".into(),
        }
    }

    fn decide(&mut self, sim: &Sim, ctl: &mut Control) -> f64 {
        ctl.fair(sim.active.len());
        let mut jobs: Vec<usize> = sim.active.iter().map(|(j, _)| *j).collect();
        jobs.sort_unstable();
        jobs.dedup();
        self.weight.clear();
        self.relevel(sim, &jobs, false);
        for (i, &(j, _)) in sim.active.iter().enumerate() {
            ctl.weight[i] = self.weight.get(j).copied().unwrap_or(1.0);
        }
        f64::INFINITY
    }

    fn is_sparse(&self) -> bool {
        !self.exact
    }

    /// The ranked jobs link-connected to the touched jobs: a search through the links of the
    /// touched jobs (ranked or not: a job whose burst ended held its component together) and of
    /// the ranked jobs it reaches.
    fn select_jobs(
        &mut self,
        sim: &Sim,
        touched: &[usize],
        _at_decision: bool,
        out: &mut Vec<usize>,
    ) {
        self.search.run(
            sim,
            touched,
            |sim, j, visit| {
                for &(l, _) in &sim.jobs[j].link_bytes {
                    visit(l as usize);
                }
            },
            ranked,
            out,
        );
    }

    /// Levels of the ranked jobs among `jobs` (whole components, [`Self::select_jobs`]); the
    /// weight of each of their active network flows, uncapped.
    fn decide_jobs(
        &mut self,
        sim: &Sim,
        jobs: &[usize],
        _at_decision: bool,
        out: &mut Vec<(usize, usize, f64, f64)>,
    ) -> f64 {
        // `jobs` holds each job once; decided in job order (the allocation's order of updates).
        let mut live: Vec<usize> = Vec::with_capacity(jobs.len());
        for &j in jobs {
            if ranked(sim, j) {
                live.push(j);
            } else {
                // Its burst ended (or it finished): no class until its next burst.
                self.levels.forget(j);
            }
        }
        live.sort_unstable();
        self.relevel(sim, &live, true);
        for &j in &live {
            let w = self.weight.get(j).copied().unwrap_or(1.0);
            out.extend(sim.network_flows(j).map(|f| (j, f, w, f64::INFINITY)));
        }
        f64::INFINITY
    }
}
