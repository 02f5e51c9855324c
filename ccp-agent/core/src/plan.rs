// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The agent core's planning step: the flows it controls, the latest dependency notices of
//! other hosts and the switches' feedback, turned into one `mlcc_sched::policy::decide` call
//! per slot (the scheduling rules themselves live there, once, for the agent and the cluster
//! simulator); then what only a distributed agent does around it: the cut of a plan to the
//! switches' admission, and the dependency notices (sent, and received after the slot's
//! decisions). With `[sched] classes` > 0 it also gives each decided flow its job's traffic
//! class ([`ClassKeys`], `mlcc_sched::policy::classes`).
//!
//! "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers", Sec. IV-A (Alg. 1),
//! IV-B (Alg. 2, dependencies) and IV-C (the control protocol); the steps are described in
//! [`crate`]'s docs. These functions read and write the core's state and
//! queue RPCs as [`Action`]s; they do no I/O.

use crate::flows::FlowKey;
use crate::io::{Action, Rpc};
use crate::proto::{self, notice_kind};
use crate::registration::Registration;
use crate::{Core, PLAN_LOG_TARGET};
use mlcc_sched::policy::classes::{self, JobClass, TrafficClasses};
use mlcc_sched::policy::{
    self, Decisions, FlowRole, FlowState, JobKey, PolicyOptions, RankedJob, Snapshot,
};
use mlcc_sched::{
    CommSlowdown, Decision, FlowId, FlowProgress, JobOrder, LinkId, LinkLoadTable, LinkView,
    PathView, RateSample, Schedule, SlotClock,
};
use mltcp_progress::{FlowKind, Paradigm, Role, NO_RANK};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The least of the switches' `admitted` schedules of a flow, slot by slot over its `planned`
/// one. A slot before a switch's admitted schedule begins (the switch had moved on to a later
/// slot when the request came: that slot is over for it) is not cut by that switch.
fn least_admitted(
    planned: &mlcc_sched::Schedule,
    admitted: &[mlcc_sched::Schedule],
) -> mlcc_sched::Schedule {
    let rates = (0..planned.rates_bps.len() as u64)
        .map(|i| {
            let slot = planned.start_slot + i;
            let own = planned.rate_bps_at(slot);
            admitted
                .iter()
                .map(|a| {
                    if slot < a.start_slot {
                        own
                    } else {
                        a.rate_bps_at(slot)
                    }
                })
                .fold(own, u64::min)
        })
        .collect();
    mlcc_sched::Schedule {
        start_slot: planned.start_slot,
        rates_bps: rates,
    }
}

/// What a flow was planned in a slot.
#[derive(Clone, Debug)]
pub(super) struct Planned {
    pub(super) slot: u64,
    pub(super) decision: Decision,
    pub(super) view: PathView,
    /// The flow's MADD share of its path's available bandwidth in the current slot, bit/s: the
    /// pacing rate of a slot that completes it (`GroupDecision::share_now_bps`).
    pub(super) available_now_bps: u64,
    /// Its spare share of the current slot, bit/s (`GroupOutcome::spare_bps`): for a flow
    /// planned no bytes now (between iterations, waiting on a dependency, or deferred by
    /// Alg. 1), its share of what every plan of the slot leaves free on its path; under work
    /// conservation an active flow's pacing rate plus its share of what the slot leaves; under
    /// strict priority its share of the slot. With switches it is asked for with the plan
    /// ([`Planned::requested`]) and cut to what they admit ([`Core::cut_to_admitted`]): a
    /// spare share the switches never saw could meet another agent's later admission of the
    /// same bandwidth.
    pub(super) spare_bps: u64,
    /// How its rate is formed from the plan, the spare share and the floor
    /// (`mlcc_sched::PolicyOptions::rate_rule`).
    pub(super) rate_rule: mlcc_sched::RateRule,
    /// The progress it was planned with (bytes left bounded by what its dependency lets it
    /// send).
    pub(super) progress: FlowProgress,
    /// What it is to its job, as the policy layer saw it (for the receiver's cut of a late
    /// notice, `mlcc_sched::receiver_cut_bytes`).
    pub(super) role: FlowRole,
    pub(super) local: Vec<LinkId>,
    pub(super) remote: Vec<u32>,
}

impl Planned {
    /// This plan with `decision` in place of its own (a cut: to a switch's admission, or by a
    /// notice). A decision that lowers the flow's pacing rate also bounds its spare rate by
    /// the new pacing rate: the spare of an active flow under work conservation (its share of
    /// what the slot leaves, [`mlcc_sched::PolicyOptions::work_conserving`]) or strict priority
    /// was reckoned against the plans before the cut, which the cut says do not fit; a cut
    /// must cut.
    fn with_decision(&self, decision: Decision) -> Planned {
        let rate =
            |d: &Decision| d.pacing_rate_bps(self.progress.remaining_bytes, self.available_now_bps);
        let new_rate = rate(&decision);
        let spare_bps = if new_rate < rate(&self.decision) {
            self.spare_bps.min(new_rate)
        } else {
            self.spare_bps
        };
        Planned {
            decision,
            spare_bps,
            ..self.clone()
        }
    }

    /// The schedule the flow asks its switches to admit (`UpdateSchedule`): its plan, with the
    /// current slot's rate raised to its spare share (bit/s) up to the rate that carries the
    /// bytes it has left in one slot (`clock`'s length), so that the switch counts the
    /// bandwidth the flow may use now against every later admission of the slot, as it counts
    /// the plans. A flow with no bytes left (between iterations, or held by a dependency) asks
    /// for no spare share: its next bytes are planned at the next slot, and a share held for
    /// them would be taken from the other agents' plans of the slot. The floor is not asked
    /// for (a datapath concern, not a claim). Only the current slot: a spare share is reckoned
    /// slot by slot (it stays in force past the slot's end until this agent sets the next
    /// slot's rates, as a plan's rate does).
    pub(super) fn requested(&self, clock: &SlotClock) -> Schedule {
        let mut s = self.decision.plan.schedule();
        let spare_bps = self
            .spare_bps
            .min(clock.rate_bps_for_bytes(self.progress.remaining_bytes));
        let now = self
            .slot
            .checked_sub(s.start_slot)
            .and_then(|i| usize::try_from(i).ok());
        if let Some(r) = now.and_then(|i| s.rates_bps.get_mut(i)) {
            *r = (*r).max(spare_bps);
        }
        s
    }
}

/// Whether a flow with registration `r` is a ring flow (to its successor).
fn is_ring(r: &Registration) -> bool {
    r.paradigm == Paradigm::Ring && matches!(r.kind, FlowKind::RingSend | FlowKind::Unspecified)
}

/// Whether a flow with registration `r` is a worker's aggregation flow (push) to its PS.
fn is_push(r: &Registration) -> bool {
    r.paradigm == Paradigm::ParameterServer && r.role == Role::Worker && r.kind == FlowKind::PsPush
}

/// Whether a flow with registration `r` is a parameter server's broadcast flow (pull).
fn is_pull(r: &Registration) -> bool {
    r.paradigm == Paradigm::ParameterServer
        && r.role == Role::ParameterServer
        && r.kind == FlowKind::PsPull
}

/// The keys under which the traffic classes know the jobs: one per job name, given at the
/// job's first planned slot and kept while it is planned. The snapshot's own [`JobKey`]s are
/// the positions of the slot's job names in name order (so that the policy's ties stay by name,
/// with or without classes), which move when a job comes or goes; the hysteresis of
/// [`TrafficClasses`] is kept per job, so it needs a key that names the same job in every slot.
#[derive(Debug, Default)]
pub(super) struct ClassKeys {
    by_name: BTreeMap<String, JobKey>,
    next: u64,
}

impl ClassKeys {
    /// The key of job `name`, given now if it has none.
    fn key(&mut self, name: &str) -> JobKey {
        if let Some(k) = self.by_name.get(name) {
            return *k;
        }
        let k = JobKey(self.next);
        self.next += 1;
        self.by_name.insert(name.to_string(), k);
        k
    }
}

/// Step 4's traffic classes: `decisions`' job order (`classes::job_order`) compressed by
/// `classes` under `keys`' keys (see [`ClassKeys`]; `names[k]` is the name of the snapshot's
/// `JobKey(k)`), set on the decided flows ([`Decisions::set_classes`]). This is
/// `mlcc_sched::policy::decide_with_classes` after `decide`, with the keys translated. Jobs
/// not planned this slot are forgotten by both.
fn assign_classes(
    classes: &mut TrafficClasses,
    keys: &mut ClassKeys,
    names: &[&str],
    decisions: &mut Decisions,
    snapshot: &Snapshot,
) -> Result<(), mlcc_sched::SchedError> {
    let name = |k: JobKey| {
        names
            .get(usize::try_from(k.0).unwrap_or(usize::MAX))
            .copied()
    };
    keys.by_name.retain(|n, _| names.contains(&n.as_str()));
    let mut slot_key = HashMap::new();
    let order: Vec<RankedJob> = classes::job_order(decisions, snapshot)
        .into_iter()
        .filter_map(|mut j| {
            let stable = keys.key(name(j.job)?);
            slot_key.insert(stable, j.job);
            j.job = stable;
            Some(j)
        })
        .collect();
    let assigned: Vec<JobClass> = classes
        .assign(&order)?
        .into_iter()
        .filter_map(|c| slot_key.get(&c.job).map(|&job| JobClass { job, ..c }))
        .collect();
    decisions.set_classes(&assigned);
    Ok(())
}

/// A flow this agent decides in the current slot.
struct Candidate {
    local: u64,
    key: FlowKey,
    reg: Registration,
    local_links: Vec<LinkId>,
    remote: Vec<u32>,
    state: FlowState,
    /// The time of the flow's latest report of acknowledged bytes, ns (0: none yet).
    last_acked_ns: u64,
}

/// When `c`'s part of its current burst began (`iter_start_ns`, marked by the libraries at the
/// start of a process's communication phase), ns; `u64::MAX` when it has nothing left to send now.
fn burst_start(c: &Candidate) -> u64 {
    match (c.state.progress.remaining_bytes, c.reg.iter_start_ns) {
        (0, _) | (_, 0) => u64::MAX,
        (_, t) => t,
    }
}

/// One flow's part in its job's current burst, as [`job_bursts`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct BurstPart<'a> {
    /// The job's name.
    job: &'a str,
    /// The flow's iteration (its process's region).
    iteration: u64,
    /// When the flow's iteration began, ns (0: never).
    iter_start_ns: u64,
    /// Whether the flow has bytes of that iteration left to send.
    sending: bool,
    /// Whether the flow is a parameter server's broadcast: the second phase of a PS iteration.
    broadcast: bool,
    /// The time the flow's bytes per iteration take alone on each link of its path, ns.
    alone_ns: Vec<(u32, u64)>,
}

/// Each job's current burst, (job, start ns, time alone ns), in the order of `parts`' first
/// appearance of each job; a start of `u64::MAX` for a job with nothing to send now. This is the
/// burst the cluster simulator ranks (`mlcc-sim`'s `Job::comm_start_s` and `alone_comm_s`): the
/// job's communication phase of one iteration, so that the ranking of the agent and of the
/// simulator agree (`mlcc_sched::policy::rank_earliest_deadline`, `rank_first_come`).
///
/// - The current iteration is the least iteration of a flow with bytes to send; the start is
///   the earliest `iter_start_ns` of the job's flows in that iteration, done or not. A parameter
///   server's broadcast (whose region begins the iteration when the last push has arrived) thus
///   keeps the start of the pushes it follows, instead of queueing as a new burst behind the
///   bursts that came while its aggregation ran.
/// - The time alone is the slowest link's of each phase, summed over the phases: the pushes
///   (and every flow that is not a broadcast), then the broadcasts, which wait for the pushes.
///   A ring has one phase.
fn job_bursts<'a>(parts: &[BurstPart<'a>]) -> Vec<(&'a str, u64, u64)> {
    let mut jobs: Vec<&'a str> = Vec::new();
    for p in parts {
        if !jobs.contains(&p.job) {
            jobs.push(p.job);
        }
    }
    jobs.into_iter()
        .map(|job| {
            let mine = || parts.iter().filter(move |p| p.job == job);
            let current = mine()
                .filter(|p| p.sending && p.iter_start_ns != 0)
                .map(|p| p.iteration)
                .min();
            let start = current.map_or(u64::MAX, |it| {
                mine()
                    .filter(|p| p.iteration == it && p.iter_start_ns != 0)
                    .map(|p| p.iter_start_ns)
                    .min()
                    .unwrap_or(u64::MAX)
            });
            let phase_ns = |broadcast: bool| {
                let mut per_link: Vec<(u32, u64)> = Vec::new();
                for p in mine().filter(|p| p.broadcast == broadcast) {
                    for &(l, ns) in &p.alone_ns {
                        match per_link.iter_mut().find(|e| e.0 == l) {
                            Some(e) => e.1 = e.1.saturating_add(ns),
                            None => per_link.push((l, ns)),
                        }
                    }
                }
                per_link.iter().map(|e| e.1).max().unwrap_or(0)
            };
            (job, start, phase_ns(false).saturating_add(phase_ns(true)))
        })
        .collect()
}

/// One job's bursts as this agent sees them, for [`JobOrder::SlowdownDeadline`]: the open
/// burst (its start and time alone, ns; `start_ns` `u64::MAX` when none is open), the latest
/// acknowledgement seen in it, and the job's smoothed slowdown over the bursts that ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JobBurstTrack {
    start_ns: u64,
    alone_ns: u64,
    end_ns: u64,
    slowdown: CommSlowdown,
}

impl Default for JobBurstTrack {
    fn default() -> Self {
        JobBurstTrack {
            start_ns: u64::MAX,
            alone_ns: 0,
            end_ns: 0,
            slowdown: CommSlowdown::new(),
        }
    }
}

/// Follows each job's bursts from slot to slot and scales its time alone by its slowdown
/// ([`JobOrder::SlowdownDeadline`], `mlcc_sched::policy::slowdown`). `bursts` is this slot's
/// [`job_bursts`] (job, start ns or `u64::MAX`, time alone ns); `last_acked` each job's latest
/// acknowledgement time over its flows here, ns (0: none). A job's open burst ends when the job
/// has nothing left to send (its start becomes `u64::MAX`) or a burst with another start
/// begins; its measured time is its latest acknowledgement after its start (at most the next
/// burst's start) less its start, and counts in the job's slowdown. Returns `bursts` with each
/// time alone divided by the job's slowdown. Jobs not in `bursts` are forgotten.
fn track_bursts<'a>(
    tracks: &mut HashMap<String, JobBurstTrack>,
    bursts: &[(&'a str, u64, u64)],
    last_acked: impl Fn(&str) -> u64,
) -> Vec<(&'a str, u64, u64)> {
    tracks.retain(|job, _| bursts.iter().any(|b| b.0 == job.as_str()));
    bursts
        .iter()
        .map(|&(job, start, alone_ns)| {
            let t = tracks.entry(job.to_string()).or_default();
            let acked = last_acked(job);
            if t.start_ns != u64::MAX && start != t.start_ns {
                // The open burst ended; a new one's acknowledgements are not its own.
                let end = if acked > t.start_ns {
                    acked.min(start)
                } else {
                    0
                };
                let end = end.max(t.end_ns);
                if end > t.start_ns {
                    t.slowdown.on_burst(t.alone_ns, end - t.start_ns);
                }
                t.start_ns = u64::MAX;
            }
            if start != u64::MAX && t.start_ns == u64::MAX {
                *t = JobBurstTrack {
                    start_ns: start,
                    alone_ns,
                    end_ns: 0,
                    slowdown: t.slowdown,
                };
            }
            if t.start_ns != u64::MAX && acked > t.start_ns {
                t.end_ns = t.end_ns.max(acked);
            }
            (job, start, t.slowdown.scaled_alone_ns(alone_ns))
        })
        .collect()
}

/// A context flow of the snapshot (not decided here): another host's flow that `dependent`
/// depends on, at the F its agent announced (`sent_bytes`), with `dependent`'s bytes per
/// iteration (a notice does not carry the other flow's; within a ring or a PS they are the
/// same), so that its progress counts in its unit's planning order.
fn context_flow(
    flow: FlowId,
    job: JobKey,
    role: FlowRole,
    sent_bytes: u64,
    dependent: &Candidate,
) -> FlowState {
    FlowState {
        flow,
        job,
        role,
        path: Vec::new(),
        progress: FlowProgress {
            sent_bytes,
            remaining_bytes: 0,
        },
        iteration_bytes: dependent.state.iteration_bytes,
        decide: false,
    }
}

/// Flow ids for the snapshot's context flows and the planning table's stand-ins for the other
/// agents' load: counting down from `u64::MAX`, skipping every id in use (the agent's flow ids
/// are hashes of 4-tuples, `FlowKey::id`).
struct FreshIds {
    next: u64,
    used: HashSet<u64>,
}

impl FreshIds {
    fn take(&mut self) -> FlowId {
        while self.used.contains(&self.next) {
            self.next = self.next.wrapping_sub(1);
        }
        let id = self.next;
        self.used.insert(id);
        FlowId(id)
    }
}

impl Core {
    /// What a flow sees of its path this slot: its NIC links from the agent's table (its own
    /// schedule excluded), its switch links from this slot's feedback plus what the agent
    /// planned on them so far in the slot, less `own` (the flow's own rates, when they are
    /// among those).
    fn path_view(
        &self,
        id: u64,
        local: &[LinkId],
        remote: &[u32],
        own: Option<&[u64]>,
    ) -> Option<PathView> {
        let mut view = match self.table.path_view(local, Some(FlowId(id))) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(target: PLAN_LOG_TARGET, flow = id, error = %e, "no path view");
                return None;
            }
        };
        for l in remote {
            let Some(lv) = self.switch_link_view(*l, own) else {
                continue;
            };
            for (i, (vl, va)) in view
                .load_bps
                .iter_mut()
                .zip(view.available_bps.iter_mut())
                .enumerate()
            {
                *vl = vl.saturating_add(lv.load_bps.get(i).copied().unwrap_or(0));
                *va = (*va).min(lv.available_bps.get(i).copied().unwrap_or(0));
            }
        }
        Some(view)
    }

    /// Adds (`add`) or takes off the rates of a plan on this slot's switch-link tally.
    pub(super) fn tally(&mut self, remote: &[u32], rates: &[u64], add: bool) {
        let k = self.clock.horizon();
        for l in remote {
            let row = self.adds.entry(*l).or_insert_with(|| vec![0; k]);
            for (a, r) in row.iter_mut().zip(rates) {
                *a = if add {
                    a.saturating_add(*r)
                } else {
                    a.saturating_sub(*r)
                };
            }
        }
    }

    /// Step 4: decides every flow this agent plans in `slot` with `mlcc_sched::policy::decide`
    /// (coflow groups, dependencies, order, the receivers' cuts, rates, work conservation and
    /// the rate floor: see that module), then stores, tallies and queues each flow's plan.
    ///
    /// The snapshot: each installed, registered flow with bytes per iteration and a link this
    /// agent or its switches know, decided; its ring predecessor when that flow is this
    /// agent's too and in the same iteration (the layer then plans and cuts them together); and,
    /// for dependencies on other hosts' flows, context flows from the latest notices of the same
    /// iteration (a ring predecessor at the F it announced; a PS's broadcast at F_b^max; a
    /// worker's aggregation at its F). The planning table: the agent's NIC table without the
    /// flows decided now (so that the groups meet on the NIC links in this slot's order, as on
    /// the switch links), plus each switch link at its configured capacity, its estimate from
    /// this slot's feedback, and the other agents' load as one schedule (a switch link without
    /// feedback: its capacity and no load).
    pub(super) fn plan_flows(&mut self, slot: u64) {
        let candidates: Vec<Candidate> = self
            .flows
            .iter()
            .filter(|(_, f)| f.installed)
            .filter_map(|(local, _)| self.candidate(*local))
            .collect();
        if candidates.is_empty() {
            self.set_dscps(None);
            return;
        }
        let mut jobs: Vec<&str> = candidates.iter().map(|c| c.reg.job.as_str()).collect();
        jobs.sort_unstable();
        jobs.dedup();
        let job_key = |name: &str| JobKey(jobs.binary_search(&name).unwrap_or(jobs.len()) as u64);
        let mut fresh = FreshIds {
            next: u64::MAX,
            used: candidates.iter().map(|c| c.state.flow.0).collect(),
        };
        let mut snapshot = Snapshot {
            slot,
            flows: Vec::new(),
            min_rate_bps: self.cfg.min_rate_bps,
        };
        // Context flows from notices, one per (job, kind, from rank, to rank, iteration).
        let mut context: BTreeMap<(String, u32, u32, u32, u64), FlowState> = BTreeMap::new();
        let mut decided = Vec::with_capacity(candidates.len());
        for c in &candidates {
            let r = &c.reg;
            let job = job_key(&r.job);
            let mut state = c.state.clone();
            state.job = job;
            state.role = if is_ring(r) {
                let chunk_bytes = r.ring_chunk_bytes.unwrap_or(0);
                let local_pred = candidates.iter().find(|p| {
                    p.local != c.local
                        && is_ring(&p.reg)
                        && p.reg.job == r.job
                        && p.reg.peer_rank == r.rank
                        && p.reg.iteration == r.iteration
                });
                let predecessor = match local_pred {
                    Some(p) => Some(p.state.flow),
                    None => self
                        .notices
                        .values()
                        .filter(|n| {
                            n.job == r.job
                                && n.kind == notice_kind::RING
                                && n.to_rank == r.rank
                                && n.iteration == r.iteration
                        })
                        .max_by_key(|n| n.accumulated_bytes)
                        .map(|n| {
                            let k = (r.job.clone(), n.kind, n.from_rank, n.to_rank, n.iteration);
                            let role = FlowRole::RingSend {
                                predecessor: None,
                                chunk_bytes,
                            };
                            context
                                .entry(k)
                                .or_insert_with(|| {
                                    context_flow(fresh.take(), job, role, n.accumulated_bytes, c)
                                })
                                .flow
                        }),
                };
                FlowRole::RingSend {
                    predecessor,
                    chunk_bytes,
                }
            } else if is_push(r) {
                // The PS's broadcast flows of other hosts: F_b^max, as their agent announced.
                for n in self.notices.values().filter(|n| {
                    n.job == r.job
                        && n.kind == notice_kind::PS_BROADCAST
                        && n.from_rank == r.peer_rank
                        && n.to_rank == r.rank
                        && n.iteration == r.iteration
                }) {
                    let k = (r.job.clone(), n.kind, n.from_rank, n.to_rank, n.iteration);
                    let role = FlowRole::PsPull { ps: r.peer_rank };
                    context
                        .entry(k)
                        .or_insert_with(|| context_flow(fresh.take(), job, role, n.bound_bytes, c));
                }
                FlowRole::PsPush { ps: r.peer_rank }
            } else if is_pull(r) {
                // The aggregation flows of other hosts into this PS, at their announced F.
                for n in self.notices.values().filter(|n| {
                    n.job == r.job
                        && n.kind == notice_kind::PS_AGGREGATION
                        && n.to_rank == r.rank
                        && n.iteration == r.iteration
                }) {
                    let k = (r.job.clone(), n.kind, n.from_rank, n.to_rank, n.iteration);
                    let role = FlowRole::PsPush { ps: r.rank };
                    context.entry(k).or_insert_with(|| {
                        context_flow(fresh.take(), job, role, n.accumulated_bytes, c)
                    });
                }
                FlowRole::PsPull { ps: r.rank }
            } else {
                FlowRole::Other
            };
            decided.push(state);
        }
        snapshot.flows = decided;
        snapshot.flows.extend(context.into_values());
        // The planning table.
        let mut table = self.table.clone();
        for c in &candidates {
            let _ = self.table.remove_flow(c.state.flow);
            let _ = table.remove_flow(c.state.flow);
        }
        let mut switch_links: Vec<u32> = candidates.iter().flat_map(|c| c.remote.clone()).collect();
        switch_links.sort_unstable();
        switch_links.dedup();
        for l in switch_links {
            if let Err(e) = self.switch_link(&mut table, l, slot, &mut fresh) {
                tracing::warn!(target: PLAN_LOG_TARGET, link = l, error = %e, "switch link refused by the planning table: not planned");
                return;
            }
        }
        // Under `Rules::Interleave` and `Rules::Priority`, `[sched] job_order`: least attained
        // service first (a job's iteration: the least its flows here are in), first come,
        // first served by burst (when the job's current iteration's communication began, a
        // PS's broadcast included: `job_bursts`), or earliest deadline first (that start plus
        // the burst's time alone); ties by name.
        let job_rank = match (self.cfg.rules, self.cfg.job_order) {
            (mlcc_sched::Rules::Mlcc, _) => Vec::new(),
            (_, JobOrder::LeastAttained) => {
                let mut attained: Vec<(JobKey, u64)> = Vec::new();
                for c in &candidates {
                    let j = job_key(&c.reg.job);
                    match attained.iter_mut().find(|(k, _)| *k == j) {
                        Some((_, it)) => *it = (*it).min(c.reg.iteration),
                        None => attained.push((j, c.reg.iteration)),
                    }
                }
                policy::rank_least_attained(&attained).unwrap_or_default()
            }
            (_, JobOrder::FirstCome) => {
                let starts: Vec<(JobKey, u64)> = self
                    .burst_deadlines(&candidates, job_key)
                    .into_iter()
                    .map(|(j, start, _)| (j, start))
                    .collect();
                policy::rank_first_come(&starts).unwrap_or_default()
            }
            (_, JobOrder::EarliestDeadline) => {
                policy::rank_earliest_deadline(&self.burst_deadlines(&candidates, job_key))
                    .unwrap_or_default()
            }
            (_, JobOrder::SlowdownDeadline) => {
                let bursts = self.job_bursts_of(&candidates);
                let last_acked = |job: &str| {
                    candidates
                        .iter()
                        .filter(|c| c.reg.job == job)
                        .map(|c| c.last_acked_ns)
                        .max()
                        .unwrap_or(0)
                };
                let scaled = track_bursts(&mut self.bursts, &bursts, last_acked);
                for (job, _, alone_ns) in &scaled {
                    tracing::debug!(
                        target: "ccp_agent::plan",
                        job,
                        scaled_alone_ns = alone_ns,
                        slowdown_fx = self.bursts.get(*job).map_or(0, |t| t.slowdown.slowdown_fx()),
                        "slowdown-scaled deadline"
                    );
                }
                let keyed: Vec<(JobKey, u64, u64)> = scaled
                    .into_iter()
                    .map(|(job, start, alone_ns)| (job_key(job), start, alone_ns))
                    .collect();
                policy::rank_earliest_deadline(&keyed).unwrap_or_default()
            }
        };
        let options = PolicyOptions {
            rules: self.cfg.rules,
            share_spare: true,
            sendable_only: true,
            work_conserving: self.cfg.work_conserving,
            strict_rates: self.cfg.strict_rates,
            job_rank,
        };
        if tracing::enabled!(target: "ccp_agent::plan", tracing::Level::TRACE) {
            let avail: Vec<(u32, u64)> = table
                .link_ids()
                .into_iter()
                .map(|l| (l.0, table.available_bps_at(l, slot).unwrap_or(0)))
                .collect();
            tracing::trace!(target: "ccp_agent::plan", slot, ?avail, ?snapshot, ?options, "policy input");
        }
        let mut decisions = match policy::decide(&mut table, &snapshot, &options) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(target: PLAN_LOG_TARGET, flows = candidates.len(), error = %e, "the policy layer refused the slot's snapshot");
                return;
            }
        };
        if let Some((classes, keys)) = self.classes.as_mut() {
            match assign_classes(classes, keys, &jobs, &mut decisions, &snapshot) {
                Ok(()) => self.set_dscps(Some(&decisions)),
                Err(e) => {
                    tracing::warn!(target: PLAN_LOG_TARGET, error = %e, "traffic classes refused: the flows keep their classes");
                }
            }
        }
        let by_id: HashMap<FlowId, &Candidate> =
            candidates.iter().map(|c| (c.state.flow, c)).collect();
        for g in decisions.groups {
            for (k, d) in g.decision.decisions.into_iter().enumerate() {
                let Some(c) = g.flows.get(k).and_then(|f| by_id.get(f)) else {
                    continue;
                };
                let role = snapshot
                    .flows
                    .iter()
                    .find(|s| s.flow == c.state.flow)
                    .map_or(FlowRole::Other, |s| s.role);
                self.tally(&c.remote, &d.plan.rates_bps, true);
                let planned = Planned {
                    slot,
                    decision: d,
                    view: g.decision.views.get(k).cloned().unwrap_or_default(),
                    available_now_bps: g.decision.share_now_bps.get(k).copied().unwrap_or(0),
                    spare_bps: g.spare_bps.get(k).copied().unwrap_or(0),
                    rate_rule: options.rate_rule(),
                    progress: g.progress.get(k).copied().unwrap_or(c.state.progress),
                    role,
                    local: c.local_links.clone(),
                    remote: c.remote.clone(),
                };
                tracing::debug!(
                    target: "ccp_agent::plan",
                    slot,
                    flow = %c.key,
                    job = %c.reg.job,
                    rank = c.reg.rank,
                    iteration = c.reg.iteration,
                    sent_bytes = planned.progress.sent_bytes,
                    remaining_bytes = planned.progress.remaining_bytes,
                    cut_bytes = g.cuts_bytes.get(k).copied().unwrap_or(0),
                    rate_bps = planned.decision.rate_bps,
                    available_now_bps = planned.available_now_bps,
                    spare_bps = planned.spare_bps,
                    "planned"
                );
                self.publish_local(c.state.flow.0, &planned);
                self.queue_update(c.state.flow.0, &planned);
                if let Some(f) = self.flows.get_mut(&c.local) {
                    f.plan = Some(planned);
                }
            }
        }
    }

    /// Each flow's DSCP from the classes of `decisions` (`None`: no flow was decided); a flow
    /// not decided has none. Nothing with classes off.
    fn set_dscps(&mut self, decisions: Option<&Decisions>) {
        let Some((classes, _)) = &self.classes else {
            return;
        };
        for f in self.flows.values_mut() {
            f.dscp = decisions
                .and_then(|d| d.class(FlowId(f.id)))
                .and_then(|c| classes.dscp(c));
        }
    }

    /// Adds switch link `l` to the slot's planning `table`: its configured capacity, this
    /// slot's feedback estimate as a network-limited rate sample of the slot before (the
    /// table's estimate is then min(estimate, capacity)), and the other agents' load as one
    /// schedule under a fresh id.
    fn switch_link(
        &self,
        table: &mut LinkLoadTable,
        l: u32,
        slot: u64,
        fresh: &mut FreshIds,
    ) -> Result<(), mlcc_sched::SchedError> {
        let cap = self.cfg.topology.links.get(&l).copied().unwrap_or(0);
        table.add_link(LinkId(l), cap)?;
        let Some((est, load)) = self.feedback.get(&l) else {
            return Ok(());
        };
        if slot > 0 {
            table.record_rate(
                LinkId(l),
                RateSample {
                    slot: slot - 1,
                    rate_bps: *est,
                    app_limited: false,
                },
            )?;
        }
        if load.iter().any(|r| *r > 0) {
            let id = loop {
                let id = fresh.take();
                if table.flow_schedule(id).is_none() {
                    break id;
                }
            };
            table.set_schedule(
                id,
                &[LinkId(l)],
                &Schedule {
                    start_slot: slot,
                    rates_bps: load.clone(),
                },
            )?;
        }
        Ok(())
    }

    /// Each candidate job's current burst (job, start ns, time alone ns) for the job orders:
    /// [`job_bursts`] over the candidates, each flow's bytes per iteration timed on its path's
    /// links at their capacities in the topology.
    fn burst_deadlines(
        &self,
        candidates: &[Candidate],
        job_key: impl Fn(&str) -> JobKey,
    ) -> Vec<(JobKey, u64, u64)> {
        self.job_bursts_of(candidates)
            .into_iter()
            .map(|(name, start, alone_ns)| (job_key(name), start, alone_ns))
            .collect()
    }

    /// [`job_bursts`] of the candidates' flows: (job, start ns, time alone ns), each traced.
    fn job_bursts_of<'c>(&self, candidates: &'c [Candidate]) -> Vec<(&'c str, u64, u64)> {
        let parts: Vec<BurstPart<'_>> = candidates
            .iter()
            .map(|c| {
                let src = self.cfg.topology.host_of(c.key.src);
                let dst = self.cfg.topology.host_of(c.key.dst);
                let alone_ns = src
                    .map(|src| self.cfg.topology.path(src, dst))
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|l| {
                        let cap = *self.cfg.topology.links.get(&l)?;
                        (cap > 0).then(|| {
                            let ns = u128::from(c.state.iteration_bytes) * 8 * 1_000_000_000
                                / u128::from(cap);
                            (l, u64::try_from(ns).unwrap_or(u64::MAX))
                        })
                    })
                    .collect();
                BurstPart {
                    job: c.reg.job.as_str(),
                    iteration: c.reg.iteration,
                    iter_start_ns: c.reg.iter_start_ns,
                    sending: burst_start(c) != u64::MAX,
                    broadcast: is_pull(&c.reg),
                    alone_ns,
                }
            })
            .collect();
        job_bursts(&parts)
            .into_iter()
            .map(|(name, start, alone_ns)| {
                tracing::debug!(
                    target: "ccp_agent::plan",
                    job = name,
                    burst_start_ns = start,
                    alone_ns,
                    "burst deadline"
                );
                (name, start, alone_ns)
            })
            .collect()
    }

    /// A flow to decide now: its path split into NIC links and switch links, its progress.
    /// `None` for a flow not planned (no bytes per iteration, no registration, no link the
    /// agent knows of). Its job and role are filled in by [`Core::plan_flows`].
    fn candidate(&self, local: u64) -> Option<Candidate> {
        let f = self.flows.get(&local)?;
        let reg = f.reg.clone()?;
        let iteration_bytes = reg.iteration_bytes?;
        let src = self.cfg.topology.host_of(f.key.src)?;
        let path = self
            .cfg
            .topology
            .path(src, self.cfg.topology.host_of(f.key.dst));
        let local_links: Vec<LinkId> = path
            .iter()
            .filter(|l| self.local_links.contains(l))
            .map(|l| LinkId(*l))
            .collect();
        let remote: Vec<u32> = path
            .iter()
            .copied()
            .filter(|l| {
                !self.local_links.contains(l) && self.switches.iter().any(|s| s.links.contains(l))
            })
            .collect();
        if local_links.is_empty() && remote.is_empty() {
            tracing::warn!(target: PLAN_LOG_TARGET, flow = %f.key, "no link of this agent or its switches on the path: not planned");
            return None;
        }
        let state = FlowState {
            flow: FlowId(f.id),
            job: JobKey(0),
            role: FlowRole::Other,
            path: local_links
                .iter()
                .copied()
                .chain(remote.iter().map(|l| LinkId(*l)))
                .collect(),
            progress: FlowProgress {
                sent_bytes: f.acked_iter,
                remaining_bytes: iteration_bytes.saturating_sub(f.acked_iter),
            },
            iteration_bytes,
            decide: true,
        };
        Some(Candidate {
            local,
            key: f.key,
            reg,
            local_links,
            remote,
            state,
            last_acked_ns: f.last_acked_ns,
        })
    }

    /// What switch link `l` leaves this slot: this slot's feedback (for a switch link without
    /// feedback, its daemon having missed the deadline before it ever answered: its configured
    /// capacity and no load, never as if the link were not there) plus what this agent planned
    /// on it so far in the slot, less `own` (a flow's own rates, when they are among those).
    fn switch_link_view(&self, l: u32, own: Option<&[u64]>) -> Option<LinkView> {
        let k = self.clock.horizon();
        let no_feedback = vec![0u64; k];
        let (est, load) = match self.feedback.get(&l) {
            Some((est, load)) => (*est, load),
            None => (*self.cfg.topology.links.get(&l)?, &no_feedback),
        };
        let add = self.adds.get(&l);
        let mut v = LinkView {
            link: LinkId(l),
            load_bps: vec![0; k],
            available_bps: vec![0; k],
        };
        for (i, (vl, va)) in v
            .load_bps
            .iter_mut()
            .zip(v.available_bps.iter_mut())
            .enumerate()
        {
            let planned = add.and_then(|a| a.get(i)).copied().unwrap_or(0);
            let mine = own.and_then(|o| o.get(i)).copied().unwrap_or(0);
            *vl = load
                .get(i)
                .copied()
                .unwrap_or(0)
                .saturating_add(planned.saturating_sub(mine));
            *va = est.saturating_sub(*vl);
        }
        Some(v)
    }

    pub(super) fn publish_local(&mut self, id: u64, p: &Planned) {
        let r = if p.decision.plan.rates_bps.iter().all(|r| *r == 0) {
            self.table.remove_flow(FlowId(id)).map(|_| ())
        } else {
            self.table
                .set_schedule(FlowId(id), &p.local, &p.decision.plan.schedule())
        };
        if let Err(e) = r {
            if !matches!(e, mlcc_sched::SchedError::UnknownFlow(_)) {
                tracing::warn!(target: PLAN_LOG_TARGET, flow = id, error = %e, "NIC table refused the schedule");
            }
        }
    }

    pub(super) fn queue_update(&mut self, id: u64, p: &Planned) {
        if self.switches.is_empty() {
            return;
        }
        let (achieved_bps, app_limited) = self
            .flows
            .values()
            .find(|f| f.id == id)
            .map_or((0, true), |f| (f.achieved_bps, f.app_limited));
        let s = p.requested(&self.clock);
        for sw in &self.switches {
            // Only the switch links the plan was made against (a switch whose feedback is
            // missing did not take part).
            if p.remote.iter().any(|l| sw.links.contains(l)) {
                self.pending
                    .entry(sw.name.clone())
                    .or_default()
                    .push(proto::FlowSchedule {
                        flow: id,
                        links: p.remote.clone(),
                        start_slot: s.start_slot,
                        rates_bps: s.rates_bps.clone(),
                        achieved_bps,
                        achieved_slot: p.slot.saturating_sub(1),
                        app_limited,
                    });
            }
        }
    }

    /// Cuts each flow's plan of `slot` to the least of the rates the switches admitted for it
    /// (`admitted`: flow id → the admitted schedules, one per answering switch) over the
    /// schedule it asked for ([`Planned::requested`]), with `Decision::clipped_to`, and its
    /// spare share to the admitted rate of the current slot: what the switches admitted serves
    /// the plan first, the spare share gets the rest. The cut plans replace the flows'
    /// schedules on the NIC table and the slot's switch-link tally.
    pub(super) fn cut_to_admitted(
        &mut self,
        slot: u64,
        admitted: &HashMap<u64, Vec<mlcc_sched::Schedule>>,
    ) {
        let locals: Vec<u64> = self.flows.keys().copied().collect();
        for local in locals {
            let Some(f) = self.flows.get(&local) else {
                continue;
            };
            let (Some(p), Some(a)) = (&f.plan, admitted.get(&f.id)) else {
                continue;
            };
            if p.slot != slot {
                continue;
            }
            let a = least_admitted(&p.requested(&self.clock), a);
            let d = p.decision.clipped_to(&self.clock, &p.progress, &a);
            // What the switches admitted now serves the plan first, the spare share gets the
            // rest (never more than it asked for).
            let admitted_now_bps = a.rate_bps_at(slot);
            let cut = d != p.decision;
            if !cut && p.spare_bps <= admitted_now_bps {
                continue;
            }
            let (id, key) = (f.id, f.key);
            let old_rates = p.decision.plan.rates_bps.clone();
            let mut np = p.with_decision(d);
            np.spare_bps = np.spare_bps.min(admitted_now_bps);
            if cut {
                tracing::debug!(target: PLAN_LOG_TARGET, flow = %key, planned_bps = p.decision.rate_bps, admitted_bps = np.decision.rate_bps, "plan cut to the switch's admission");
                self.tally(&np.remote, &old_rates, false);
                self.tally(&np.remote, &np.decision.plan.rates_bps, true);
                self.publish_local(id, &np);
            } else {
                tracing::debug!(target: PLAN_LOG_TARGET, flow = %key, spare_bps = p.spare_bps, admitted_bps = admitted_now_bps, "spare share cut to the switch's admission");
            }
            if let Some(f) = self.flows.get_mut(&local) {
                f.plan = Some(np);
            }
        }
    }

    /// Alg. 2's sender side: each flow planned this slot tells its receiver's agent its
    /// accumulated bytes F_i (`Notify`; none when the receiver is one of this agent's hosts);
    /// a PS's broadcast notices carry F_b^max over its broadcast flows as `bound_bytes`.
    pub(super) fn send_notices(&mut self, slot: u64) {
        let mut out = Vec::new();
        let mut bcast_max: HashMap<(String, u32), u64> = HashMap::new();
        for f in self.flows.values() {
            let (Some(r), Some(p)) = (&f.reg, &f.plan) else {
                continue;
            };
            if p.slot == slot && r.role == Role::ParameterServer && r.kind == FlowKind::PsPull {
                let e = bcast_max.entry((r.job.clone(), r.rank)).or_insert(0);
                *e = (*e).max(p.decision.accumulated_bytes);
            }
        }
        for f in self.flows.values() {
            let (Some(r), Some(p)) = (&f.reg, &f.plan) else {
                continue;
            };
            if p.slot != slot || r.peer_rank == NO_RANK {
                continue;
            }
            let kind = match (r.paradigm, r.role, r.kind) {
                (Paradigm::Ring, _, FlowKind::RingSend | FlowKind::Unspecified) => {
                    notice_kind::RING
                }
                (Paradigm::ParameterServer, Role::Worker, FlowKind::PsPush) => {
                    notice_kind::PS_AGGREGATION
                }
                (Paradigm::ParameterServer, Role::ParameterServer, FlowKind::PsPull) => {
                    notice_kind::PS_BROADCAST
                }
                _ => continue,
            };
            let acc = p.decision.accumulated_bytes;
            let bound = if kind == notice_kind::PS_BROADCAST {
                bcast_max
                    .get(&(r.job.clone(), r.rank))
                    .copied()
                    .unwrap_or(acc)
            } else {
                acc
            };
            let n = proto::DependencyNotice {
                job: r.job.clone(),
                from_rank: r.rank,
                to_rank: r.peer_rank,
                kind,
                slot,
                iteration: r.iteration,
                accumulated_bytes: acc,
                bound_bytes: bound,
            };
            out.push((f.key, n));
        }
        for (key, n) in out {
            let Some(dst) = self.cfg.topology.host_of(key.dst) else {
                continue;
            };
            // A receiver served here needs no notice: its flows and this one were decided
            // together ([`Core::plan_flows`]), dependencies and cuts included.
            if self.cfg.hosts.contains(&dst.name) {
                continue;
            }
            let addr = dst.agent;
            self.out.push(Action::Rpc(Rpc::Notify {
                peer: addr,
                notice: n,
                timeout: self.rpc.slot,
            }));
        }
    }

    /// Alg. 2's receiver side for one notice of another host's agent: remembers F_i (the next
    /// slot's snapshot takes it as a context flow), and cuts the successor flows of the
    /// receiving process that are ahead of it by the excess, one flow at a time with
    /// `mlcc_sched::reduce` (the policy layer cuts a whole group, but only of the flows it
    /// decides together; this notice comes after the slot's decisions).
    pub(super) fn handle_notice(&mut self, n: proto::DependencyNotice) {
        let Some(slot) = self.slot else { return };
        self.notices
            .insert((n.job.clone(), n.kind, n.from_rank, n.to_rank), n.clone());
        let bound = match n.kind {
            notice_kind::RING => n.accumulated_bytes,
            notice_kind::PS_AGGREGATION => self
                .notices
                .values()
                .filter(|m| {
                    m.job == n.job
                        && m.kind == notice_kind::PS_AGGREGATION
                        && m.to_rank == n.to_rank
                        && m.iteration == n.iteration
                })
                .map(|m| m.accumulated_bytes)
                .min()
                .unwrap_or(n.accumulated_bytes),
            _ => return,
        };
        let targets: Vec<u64> = self
            .flows
            .iter()
            .filter(|(_, f)| {
                let (Some(r), Some(p)) = (&f.reg, &f.plan) else {
                    return false;
                };
                let kind_ok = match n.kind {
                    notice_kind::RING => {
                        r.paradigm == Paradigm::Ring
                            && matches!(r.kind, FlowKind::RingSend | FlowKind::Unspecified)
                    }
                    _ => r.role == Role::ParameterServer && r.kind == FlowKind::PsPull,
                };
                // Only a notice of this very slot bounds this slot's plan (an older F is lower).
                kind_ok
                    && r.job == n.job
                    && r.rank == n.to_rank
                    && r.iteration == n.iteration
                    && p.slot == slot
                    && n.slot == slot
            })
            .map(|(l, _)| *l)
            .collect();
        for local in targets {
            let Some(f) = self.flows.get(&local) else {
                continue;
            };
            let Some(p) = f.plan.clone() else { continue };
            // The layer's receiver's cut (a ring successor may run one chunk ahead), applied to
            // this one flow: the slot's other decisions are made and published.
            let excess =
                mlcc_sched::receiver_cut_bytes(&p.role, p.decision.accumulated_bytes, bound);
            if excess == 0 {
                continue;
            }
            let (id, key) = (f.id, f.key);
            // Re-plan the later slots against what the other flows hold now (the view of the
            // planning time predates the flows planned after this one).
            let view = self
                .path_view(id, &p.local, &p.remote, Some(&p.decision.plan.rates_bps))
                .unwrap_or_else(|| p.view.clone());
            match mlcc_sched::reduce(&self.clock, &p.decision, &p.progress, excess, &view) {
                Ok(d) => {
                    tracing::debug!(target: PLAN_LOG_TARGET, flow = %key, excess, "successor flow reduced");
                    self.tally(&p.remote, &p.decision.plan.rates_bps, false);
                    self.tally(&p.remote, &d.plan.rates_bps, true);
                    let np = Planned {
                        view,
                        ..p.with_decision(d)
                    };
                    self.publish_local(id, &np);
                    self.queue_update(id, &np);
                    if let Some(f) = self.flows.get_mut(&local) {
                        f.plan = Some(np);
                    }
                }
                Err(e) => {
                    tracing::warn!(target: PLAN_LOG_TARGET, flow = id, error = %e, "reduction refused")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{job_bursts, least_admitted, track_bursts, BurstPart};
    use mlcc_sched::Schedule;
    use std::collections::HashMap;

    fn sched(start_slot: u64, rates_bps: &[u64]) -> Schedule {
        Schedule {
            start_slot,
            rates_bps: rates_bps.to_vec(),
        }
    }

    #[test]
    fn the_least_admission_over_switches() {
        let planned = sched(10, &[8, 8, 8, 8]);
        // Two switches: one cut slots 10 and 12, the other (already in slot 11) slot 13; a
        // slot beyond an admitted schedule's end was admitted nothing.
        let a = least_admitted(&planned, &[sched(10, &[5, 8, 2, 8]), sched(11, &[8, 8, 3])]);
        assert_eq!(a, sched(10, &[5, 8, 2, 3]));
        let a = least_admitted(&planned, &[sched(10, &[8, 8])]);
        assert_eq!(a, sched(10, &[8, 8, 0, 0]));
        // No admission: the plan stands.
        assert_eq!(least_admitted(&planned, &[]), planned);
    }

    /// Link ids of the burst tests: the PS host's ingress, and the two workers' ingresses.
    const TO_PS: u32 = 2;
    const TO_W0: u32 = 1;
    const TO_W1: u32 = 3;

    fn part(
        job: &'static str,
        iteration: u64,
        iter_start_ns: u64,
        sending: bool,
        broadcast: bool,
        alone_ns: &[(u32, u64)],
    ) -> BurstPart<'static> {
        BurstPart {
            job,
            iteration,
            iter_start_ns,
            sending,
            broadcast,
            alone_ns: alone_ns.to_vec(),
        }
    }

    /// A PS job (two pushes of 100 each into the PS's port, then two broadcasts of 100
    /// each on the workers' ports) and a ring (50 on the PS's port); times in ns.
    fn ps_and_ring(push_sending: bool, broadcast: (u64, u64, bool)) -> Vec<BurstPart<'static>> {
        let (b_iter, b_start, b_sending) = broadcast;
        vec![
            part("ps", 7, 1_000, push_sending, false, &[(TO_PS, 100)]),
            part("ps", 7, 1_010, push_sending, false, &[(TO_PS, 100)]),
            part("ps", b_iter, b_start, b_sending, true, &[(TO_W0, 100)]),
            part("ps", b_iter, b_start, b_sending, true, &[(TO_W1, 100)]),
            part("ring", 3, 1_280, true, false, &[(TO_PS, 50)]),
        ]
    }

    #[test]
    fn a_ps_broadcast_keeps_the_start_of_its_iteration() {
        // Aggregation: the PS's region is still at iteration 6 (all sent). The burst starts
        // at the first push; alone, the pushes take 200 ns on the PS's port, then the
        // broadcasts 100 on the workers' ports.
        let b = job_bursts(&ps_and_ring(true, (6, 500, false)));
        assert_eq!(b, vec![("ps", 1_000, 300), ("ring", 1_280, 50)]);
        // Broadcast: the pushes of iteration 7 are done, the PS's region began iteration 7 at
        // 1_400; the burst is still the one that began at 1_000: deadline 1_300, before the
        // ring's 1_280 + 50, which came while the pushes ran (as a burst of its own from 1_400,
        // the broadcast would rank behind the ring).
        let b = job_bursts(&ps_and_ring(false, (7, 1_400, true)));
        assert_eq!(b, vec![("ps", 1_000, 300), ("ring", 1_280, 50)]);
        // All sent: nothing to rank now.
        let b = job_bursts(&ps_and_ring(false, (7, 1_400, false)));
        assert_eq!(b[0], ("ps", u64::MAX, 300));
    }

    #[test]
    fn a_burst_starts_in_the_least_iteration_with_bytes_left() {
        // One ring worker already began iteration 4 while its peer still sends iteration 3:
        // the burst is iteration 3's, from its earliest start (done flows of it included).
        let parts = vec![
            part("ring", 3, 900, true, false, &[(TO_PS, 40)]),
            part("ring", 3, 800, false, false, &[(TO_W0, 40)]),
            part("ring", 4, 1_500, true, false, &[(TO_W1, 40)]),
        ];
        assert_eq!(job_bursts(&parts), vec![("ring", 800, 40)]);
        // A flow whose region never began an iteration (start 0) is not a start.
        let parts = vec![
            part("ring", 3, 0, true, false, &[(TO_PS, 40)]),
            part("ring", 3, 900, true, false, &[(TO_W0, 40)]),
        ];
        assert_eq!(job_bursts(&parts), vec![("ring", 900, 40)]);
    }

    #[test]
    fn a_job_slowed_burst_after_burst_gets_its_deadline_brought_forward() {
        let mut tracks = HashMap::new();
        let acked = |t: u64| move |_: &str| t;
        // Burst of "ps" opens at 1_000 (alone 300) beside "ring" (alone 100, from 1_100):
        // no burst has ended yet, times alone unscaled.
        let b = vec![("ps", 1_000, 300), ("ring", 1_100, 100)];
        assert_eq!(track_bursts(&mut tracks, &b, acked(1_050)), b);
        // "ps" still sends at 1_500; "ring" is done, its last acknowledgement at 1_300: its
        // burst took 200 against 100 alone.
        let b = vec![("ps", 1_000, 300), ("ring", u64::MAX, 100)];
        let last = |job: &str| if job == "ps" { 1_500 } else { 1_300 };
        let got = track_bursts(&mut tracks, &b, last);
        assert_eq!(got, vec![("ps", 1_000, 300), ("ring", u64::MAX, 50)]);
        assert_eq!(tracks["ring"].slowdown.slowdown_fx(), 2 * 1024);
        // "ps" ended at 1_900: 900 against 300 alone, slowdown 3.
        let b = vec![("ps", u64::MAX, 300), ("ring", u64::MAX, 100)];
        let last = |job: &str| if job == "ps" { 1_900 } else { 1_300 };
        track_bursts(&mut tracks, &b, last);
        assert_eq!(tracks["ps"].slowdown.slowdown_fx(), 3 * 1024);
        // New bursts of both.
        let b = vec![("ps", 2_000, 300), ("ring", 2_010, 100)];
        let last = |job: &str| if job == "ps" { 2_050 } else { 1_300 };
        let got = track_bursts(&mut tracks, &b, last);
        assert_eq!(tracks["ps"].slowdown.slowdown_fx(), 3 * 1024);
        // Scaled: "ps" 300 / 3 = 100, "ring" 100 / 2 = 50: deadlines 2_100 and 2_060, where
        // unscaled they were 2_300 and 2_110.
        assert_eq!(got, vec![("ps", 2_000, 100), ("ring", 2_010, 50)]);
        // A job absent from the slot's bursts is forgotten.
        let b = vec![("ps", 2_000, 300)];
        track_bursts(&mut tracks, &b, |_| 2_060);
        assert!(!tracks.contains_key("ring"));
        // The open burst (from 2_000) ends unseen: the next one began at 2_600 and was acked at
        // 2_700 by the next look. The end counts as at most the next start: 600 against 300,
        // 3 + (2 - 3) / 4 = 2.75.
        let b = vec![("ps", 2_600, 300)];
        track_bursts(&mut tracks, &b, |_| 2_700);
        assert_eq!(tracks["ps"].slowdown.slowdown_fx(), 2816);
        assert_eq!(tracks["ps"].start_ns, 2_600);
    }
}
