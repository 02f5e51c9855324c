// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Our scheduler: the agent's scheduling library (`mlcc-sched`) run as the mlcc paper's Sec. IV–V
//! describe, with switch load tables ("Dynamic Flow Scheduling for DNN Training Workloads in
//! Data Centers"). Nothing of the algorithm is here: this module only feeds the library.
//!
//! - Time is slotted (default 60 ms, K = 10 slots, the paper's values, [`SlotClock`]). One
//!   [`LinkLoadTable`] holds every link of the tree: the switches' load tables put together (a
//!   path's view sums its links' rows, whichever switch owns them).
//! - At each slot boundary the table advances and every job's flows are planned as coflow
//!   groups by [`plan_group`] (Alg. 1 + Alg. 2 generalised to a group, `mlcc_sched::coflow`:
//!   the members advance by the same fraction of their bytes left per slot, Varys's MADD, and
//!   finish together; the schedules published to the table so later groups see them): a ring
//!   job's flows as one group (the pipelined ring needs all of them to progress together; a
//!   member whose predecessor is not planned now depends on its F plus one chunk); per PS, its
//!   aggregation group (F_b^max of its broadcast flows), then its broadcast group, cut by
//!   [`apply_group_reduction`] to the aggregation group's least F (F_a^min), so the broadcast
//!   pipelines behind the aggregation. Coflow units (a ring; a PS's two groups) go in the
//!   order of [`planning_key`], as in the agent: further into the iteration first, then
//!   smallest effective bottleneck first (Varys's SEBF, [`group_bottleneck_us`] at link
//!   capacity; ties by job and PS). Planned one flow at a time before, Alg. 1 gave a PS's downlink to one push
//!   for several slots: 1 PS job with 2 workers took 20.96 s against fair's 15.0
//!   (`examples/cases.rs`; now 15.0).
//! - A flow that starts inside a slot (its compute phase ended) is planned at once against the
//!   table, as the agent does when the progress interface announces a burst; the others keep their
//!   slot rates. A finished flow's schedule is taken off the table.
//! - The rate decided for the slot is the flow's cap (the CCP datapath enforces it as its pacing
//!   rate); nothing else is shared: a flow that finishes early leaves its bandwidth idle until the
//!   next slot, as a slotted scheduler does. A flow whose plan completes it in the current slot
//!   is paced at its MADD share of the available bandwidth rather than at bytes/slot:
//!   Alg. 1 fills slots "with the largest feasible rate", so its last bytes are not stretched
//!   to the slot's end (before this, one job alone took 20-33 % longer per iteration under mlcc
//!   than under any other policy, `examples/cases.rs`).
//! - No non-ML traffic is simulated, so no rate samples are recorded: each link's estimate is its
//!   capacity ([`LinkLoadTable::estimate_bps`]).
//!
//! Besides the engine's per-decision time, each group decision (plan + reduction) is timed and
//! counted per member (its time over its member count): that
//! is the paper's "scheduling computation latency" (Sec. VII-B, Fig. 15).

use std::collections::HashMap;
use std::time::Instant;

use mlcc_sched::{
    apply_group_reduction, excess_bytes, group_bottleneck_us, plan_group, planning_key, Dependency, FlowId,
    FlowProgress, FlowRequest, GroupDecision, LinkId, LinkLoadTable, PlanningKey, SlotClock,
};
use serde_json::{json, Value};

use super::{Control, Policy};
use crate::error::SimError;
use crate::sim::{Role, Sim, TimeHist};
use crate::workload::Paradigm;

/// The mlcc scheduler over switch load tables.
pub struct Mlcc {
    clock: SlotClock,
    table: LinkLoadTable,
    slot: Option<u64>,
    /// Current slot rate of each planned flow, bit/s, by flow id.
    rates: HashMap<u64, u64>,
    /// Per-flow decision times.
    pub flow_decisions: TimeHist,
    /// Refusals of the library (should stay 0).
    pub refusals: u64,
}

fn flow_id(j: usize, f: usize) -> u64 {
    ((j as u64) << 24) | f as u64
}

impl Mlcc {
    /// A scheduler with slots of `slot_us` µs and horizon `k` over the links of `sim`'s tree.
    pub fn new(sim_links: &[f64], slot_us: u64, k: usize) -> Result<Mlcc, SimError> {
        let clock = SlotClock::new(slot_us, k).map_err(|e| SimError::Config(e.to_string()))?;
        let mut table = LinkLoadTable::new(clock, 0);
        for (l, c) in sim_links.iter().enumerate() {
            table
                .add_link(LinkId(l as u32), (c * 8.0) as u64)
                .map_err(|e| SimError::Config(format!("link {l}: {e}")))?;
        }
        Ok(Mlcc { clock, table, slot: None, rates: HashMap::new(), flow_decisions: TimeHist::default(), refusals: 0 })
    }

    fn request(sim: &Sim, j: usize, f: usize, dependency: Dependency) -> FlowRequest {
        let fl = &sim.jobs[j].flows[f];
        FlowRequest {
            flow: FlowId(flow_id(j, f)),
            path: fl.path.iter().map(|l| LinkId(*l)).collect(),
            progress: FlowProgress {
                sent_bytes: fl.sent as u64,
                remaining_bytes: (fl.size - fl.sent).max(0.0).ceil() as u64,
            },
            dependency,
        }
    }

    /// Records the current-slot rates of a group's decision: each member paced by
    /// [`mlcc_sched::Decision::pacing_rate_bps`] at its MADD share of the available bandwidth when its plan
    /// completes it in this slot (Alg. 1: slots are filled "with the largest feasible rate"), so
    /// it finishes inside the slot instead of being stretched to its end, and the members
    /// completing together never pace above a shared link. It never sends more than planned
    /// (what is left is exactly the slot's bytes), and the table still holds the slot's bytes.
    fn record(&mut self, members: &[FlowRequest], g: &GroupDecision) {
        for ((req, d), share) in members.iter().zip(&g.decisions).zip(&g.share_now_bps) {
            self.rates.insert(req.flow.0, d.pacing_rate_bps(req.progress.remaining_bytes, *share));
        }
    }

    /// Plans `members` jointly ([`plan_group`]), then cuts each by `excess(i, decision)` (the
    /// receiver's side of Alg. 2) by [`apply_group_reduction`]; records the rates and the
    /// per-flow decision time (the group's time over its members).
    fn plan_members(
        &mut self,
        members: &[FlowRequest],
        excess: &dyn Fn(usize, &GroupDecision) -> u64,
    ) -> Option<GroupDecision> {
        if members.is_empty() {
            return None;
        }
        let t0 = Instant::now();
        let g = match plan_group(&mut self.table, members) {
            Ok(g) => g,
            Err(_) => {
                self.refusals += 1;
                return None;
            }
        };
        let cuts: Vec<u64> = (0..members.len()).map(|i| excess(i, &g)).collect();
        let g = match apply_group_reduction(&mut self.table, members, &g, &cuts) {
            Ok(r) => r,
            Err(_) => {
                self.refusals += 1;
                g
            }
        };
        self.record(members, &g);
        let per_flow_us = t0.elapsed().as_secs_f64() * 1e6 / members.len() as f64;
        for _ in members {
            self.flow_decisions.add(per_flow_us);
        }
        Some(g)
    }

    /// The coflows of job `j` among its active flows that `todo` selects: the ring (all its
    /// flows, one group) or, per PS, its aggregation and broadcast flows; with their planning
    /// order (`planning_key`: progress over all the unit's flows, then SEBF over the active ones).
    fn units(&self, sim: &Sim, j: usize, todo: &dyn Fn(usize) -> bool) -> Vec<(PlanningKey, usize, usize)> {
        let job = &sim.jobs[j];
        let active = |f: usize| !job.flows[f].done && todo(f);
        let n = match job.spec.paradigm {
            Paradigm::Ring => 1,
            Paradigm::Ps => job.spec.parameter_servers() as usize,
        };
        (0..n)
            .filter_map(|u| {
                let all = self.unit_flows(sim, j, u);
                let flows: Vec<FlowRequest> = all
                    .iter()
                    .copied()
                    .filter(|f| active(*f))
                    .map(|f| Self::request(sim, j, f, Dependency::Independent))
                    .collect();
                if flows.is_empty() {
                    return None;
                }
                let gamma = group_bottleneck_us(&self.table, &flows).unwrap_or(u64::MAX);
                let (sent, size) = all.iter().fold((0u64, 0u64), |(s, z), &f| {
                    (s.saturating_add(job.flows[f].sent as u64), z.saturating_add(job.flows[f].size as u64))
                });
                Some((planning_key(sent, size, gamma), j, u))
            })
            .collect()
    }

    /// The flows of coflow `u` of job `j` (ring: all; PS `u`: its pushes then its pulls).
    fn unit_flows(&self, sim: &Sim, j: usize, u: usize) -> Vec<usize> {
        let job = &sim.jobs[j];
        match job.spec.paradigm {
            Paradigm::Ring => (0..job.flows.len()).collect(),
            Paradigm::Ps => {
                let w = job.spec.workers as usize;
                let p = job.spec.parameter_servers() as usize;
                (u * w..(u + 1) * w).chain(p * w + u * w..p * w + (u + 1) * w).collect()
            }
        }
    }

    /// Plans coflow `u` of job `j` (its active flows that `todo` selects), in dependency order.
    fn plan_unit(&mut self, sim: &Sim, j: usize, u: usize, todo: &dyn Fn(usize) -> bool) {
        let job = &sim.jobs[j];
        let active = |f: usize| !job.flows[f].done && todo(f);
        // F of a flow not planned now: its bytes sent (all of them once done).
        let f_of = |f: usize| if job.flows[f].done { job.flows[f].size.round() as u64 } else { job.flows[f].sent as u64 };
        match job.spec.paradigm {
            Paradigm::Ring => {
                // One group: the ring's flows advance together. A member whose predecessor is not
                // planned now depends on that predecessor's F (plus the one chunk a worker may be
                // ahead, as the engine's pipelined bound allows); within the group the
                // receiver's cut keeps each flow within a chunk of its predecessor's F.
                let chunk = job.chunk.max(0.0) as u64;
                let flows: Vec<usize> = (0..job.flows.len()).filter(|f| active(*f)).collect();
                let pred = |f: usize| match job.flows[f].role {
                    Role::Ring { pred } => Some(pred),
                    _ => None,
                };
                let members: Vec<FlowRequest> = flows
                    .iter()
                    .map(|&f| {
                        let dep = match pred(f) {
                            Some(p) if !flows.contains(&p) => {
                                Dependency::Ring { predecessor_bytes: f_of(p).saturating_add(chunk) }
                            }
                            _ => Dependency::Independent,
                        };
                        Self::request(sim, j, f, dep)
                    })
                    .collect();
                let bound = |i: usize, g: &GroupDecision| -> u64 {
                    let f = flows[i];
                    let Some(p) = pred(f) else { return 0 };
                    let pred_f = match flows.iter().position(|x| *x == p) {
                        Some(k) => g.decisions[k].accumulated_bytes,
                        None => f_of(p),
                    };
                    excess_bytes(g.decisions[i].accumulated_bytes, pred_f.saturating_add(chunk))
                };
                self.plan_members(&members, &bound);
            }
            Paradigm::Ps => {
                let w = job.spec.workers as usize;
                let all = self.unit_flows(sim, j, u);
                let (pushes, pulls) = all.split_at(w.min(all.len()));
                let pull_f: Vec<u64> = pulls.iter().map(|&f| f_of(f)).collect();
                // The aggregation group (F_b^max of this PS's broadcast flows) ...
                let agg: Vec<usize> = pushes.iter().copied().filter(|f| active(*f)).collect();
                let members: Vec<FlowRequest> =
                    agg.iter().map(|&f| Self::request(sim, j, f, Dependency::ps_aggregation(&pull_f))).collect();
                let g = self.plan_members(&members, &|_, _| 0);
                let agg_f: Vec<u64> = pushes
                    .iter()
                    .map(|f| match (&g, agg.iter().position(|x| x == f)) {
                        (Some(g), Some(i)) => g.decisions[i].accumulated_bytes,
                        _ => f_of(*f),
                    })
                    .collect();
                // ... then the broadcast group, bounded by the aggregation's least F (F_a^min),
                // so it pipelines behind the aggregation.
                let dep = Dependency::ps_broadcast(&agg_f);
                let a_min = agg_f.iter().min().copied().unwrap_or(0);
                let members: Vec<FlowRequest> =
                    pulls.iter().copied().filter(|f| active(*f)).map(|f| Self::request(sim, j, f, dep)).collect();
                self.plan_members(&members, &|i, g| excess_bytes(g.decisions[i].accumulated_bytes, a_min));
            }
        }
    }

    /// Plans the coflows of `jobs` (their active flows that `todo` selects) in the order of
    /// `mlcc_sched::planning_key`, as the agent does: the unit further into its iteration
    /// first, then smallest effective bottleneck first (Varys's SEBF; ties by job and PS), so
    /// one job's coflow completes before another's takes the links it shares, and none starves.
    fn plan_jobs(&mut self, sim: &Sim, jobs: &[usize], todo: &dyn Fn(usize, usize) -> bool) {
        let mut units: Vec<(PlanningKey, usize, usize)> = jobs.iter().flat_map(|&j| self.units(sim, j, &|f| todo(j, f))).collect();
        units.sort_unstable();
        for (_, j, u) in units {
            self.plan_unit(sim, j, u, &|f| todo(j, f));
        }
    }
}

impl Policy for Mlcc {
    fn name(&self) -> String {
        "mlcc".into()
    }

    fn decide(&mut self, sim: &Sim, ctl: &mut Control) -> f64 {
        let now_us = (sim.t * 1e6).round() as u64;
        let slot = self.clock.slot_at(now_us);
        // Flows no longer active leave the table.
        let live: std::collections::HashSet<u64> = sim.active.iter().map(|&(j, f)| flow_id(j, f)).collect();
        let gone: Vec<u64> = self.rates.keys().filter(|k| !live.contains(k)).copied().collect();
        for k in gone {
            self.rates.remove(&k);
            let _ = self.table.remove_flow(FlowId(k));
        }
        let mut jobs: Vec<usize> = sim.active.iter().map(|&(j, _)| j).collect();
        jobs.dedup();
        if self.slot != Some(slot) {
            if self.table.advance_to(slot).is_err() {
                self.refusals += 1;
            }
            self.slot = Some(slot);
            self.plan_jobs(sim, &jobs, &|_, _| true);
        } else {
            let new: std::collections::HashSet<u64> =
                sim.active.iter().map(|&(j, f)| flow_id(j, f)).filter(|id| !self.rates.contains_key(id)).collect();
            if !new.is_empty() {
                self.plan_jobs(sim, &jobs, &|j, f| new.contains(&flow_id(j, f)));
            }
        }
        ctl.fair(sim.active.len());
        for (i, &(j, f)) in sim.active.iter().enumerate() {
            ctl.cap[i] = self.rates.get(&flow_id(j, f)).map_or(0.0, |r| *r as f64 / 8.0);
        }
        let next = self.clock.slot_start_us(slot + 1).map_or(f64::INFINITY, |us| us as f64 / 1e6);
        if sim.active.is_empty() {
            f64::INFINITY
        } else {
            next
        }
    }

    fn report(&self) -> Value {
        json!({
            "slot_us": self.clock.slot_us(),
            "horizon": self.clock.horizon(),
            "flow_decisions": self.flow_decisions.count,
            "flow_decision_us_p50": self.flow_decisions.quantile_us(0.5),
            "flow_decision_us_p90": self.flow_decisions.quantile_us(0.9),
            "flow_decision_us_p99": self.flow_decisions.quantile_us(0.99),
            "flow_decision_cdf": self.flow_decisions.cdf(),
            "library_refusals": self.refusals,
        })
    }
}
