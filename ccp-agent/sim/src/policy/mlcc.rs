// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Our scheduler: the agent's scheduling library (`mlcc-sched`) run as the mlcc paper's Sec. IV–V
//! describe, with switch load tables ("Dynamic Flow Scheduling for DNN Training Workloads in
//! Data Centers"). Nothing of the algorithm is here: this module only feeds the library.
//!
//! - Time is slotted (default 60 ms, K = 10 slots, the paper's values, [`SlotClock`]). One
//!   [`LinkLoadTable`] holds every link of the tree: the switches' load tables put together (a
//!   path's view sums its links' rows, whichever switch owns them).
//! - At each slot boundary the table advances and every active flow is planned in turn by
//!   [`plan_flow`] (Alg. 1 + Alg. 2, the schedule published to the table so later flows see it):
//!   per job, ring flows along the chain (worker 0's flow is the chain's head, each next one
//!   depends on its predecessor's accumulated bytes F), PS aggregation flows before broadcast
//!   flows (F_b^max, F_a^min of the same PS); then the receivers' reductions (Alg. 2 lines 13-16)
//!   by [`apply_reduction`].
//! - A flow that starts inside a slot (its compute phase ended) is planned at once against the
//!   table, as the agent does when the progress interface announces a burst; the others keep their
//!   slot rates. A finished flow's schedule is taken off the table.
//! - The rate decided for the slot is the flow's cap (the CCP datapath enforces it as its pacing
//!   rate); nothing else is shared: a flow that finishes early leaves its bandwidth idle until the
//!   next slot, as a slotted scheduler does. A flow whose plan completes it in the current slot
//!   is paced at the path's available bandwidth rather than at bytes/slot ([`Mlcc::slot_rate`]):
//!   Alg. 1 fills slots "with the largest feasible rate", so its last bytes are not stretched
//!   to the slot's end (before this, one job alone took 20-33 % longer per iteration under mlcc
//!   than under any other policy, `examples/cases.rs`).
//! - No non-ML traffic is simulated, so no rate samples are recorded: each link's estimate is its
//!   capacity ([`LinkLoadTable::estimate_bps`]).
//!
//! Besides the engine's per-decision time, each flow decision (plan + reduction) is timed: that
//! is the paper's "scheduling computation latency" (Sec. VII-B, Fig. 15).

use std::collections::HashMap;
use std::time::Instant;

use mlcc_sched::{
    apply_reduction, excess_bytes, plan_flow, Decision, Dependency, FlowId, FlowProgress, FlowRequest, LinkId,
    LinkLoadTable, SlotClock,
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

    /// The rate a flow is paced at in the current slot for decision `d`: the library's slot
    /// rate (the least rate carrying the slot's planned bytes), except for a flow whose plan
    /// completes it in this slot, which sends its last bytes at the largest feasible rate, the
    /// path's available bandwidth (Alg. 1: slots are filled "with the largest feasible rate"),
    /// and so finishes inside the slot instead of being stretched to its end. It never sends
    /// more than planned (what is left is exactly the slot's bytes), and the table still holds
    /// the slot's bytes.
    fn slot_rate(&self, req: &FlowRequest, d: &Decision) -> u64 {
        let available_now = match self.table.path_view(&req.path, Some(req.flow)) {
            Ok(v) => v.available_bps.first().copied().unwrap_or(0),
            Err(_) => 0,
        };
        d.pacing_rate_bps(req.progress.remaining_bytes, available_now)
    }

    fn plan(&mut self, req: &FlowRequest) -> Option<Decision> {
        match plan_flow(&mut self.table, req) {
            Ok(d) => {
                let r = self.slot_rate(req, &d);
                self.rates.insert(req.flow.0, r);
                Some(d)
            }
            Err(_) => {
                self.refusals += 1;
                None
            }
        }
    }

    fn reduce(&mut self, req: &FlowRequest, d: &Decision, excess: u64) {
        if excess == 0 {
            return;
        }
        match apply_reduction(&mut self.table, req, d, excess) {
            Ok(r) => {
                let rate = self.slot_rate(req, &r);
                self.rates.insert(req.flow.0, rate);
            }
            Err(_) => self.refusals += 1,
        }
    }

    /// Plans the active flows of job `j` that `todo` selects, in dependency order.
    fn plan_job(&mut self, sim: &Sim, j: usize, todo: &dyn Fn(usize) -> bool) {
        let job = &sim.jobs[j];
        let active = |f: usize| !job.flows[f].done && todo(f);
        match job.spec.paradigm {
            Paradigm::Ring => {
                // The chain starts at worker 0's flow; F of each flow feeds the next one.
                let mut prev: Option<(FlowRequest, Decision)> = None;
                for f in 0..job.flows.len() {
                    let t0 = Instant::now();
                    let dep = match &prev {
                        Some((_, d)) => Dependency::Ring { predecessor_bytes: d.accumulated_bytes },
                        None if f == 0 => Dependency::Independent,
                        None => {
                            let Role::Ring { pred } = job.flows[f].role else { continue };
                            let p = &job.flows[pred];
                            Dependency::Ring { predecessor_bytes: if p.done { p.size.round() as u64 } else { p.sent as u64 } }
                        }
                    };
                    if !active(f) {
                        prev = None;
                        continue;
                    }
                    let req = Self::request(sim, j, f, dep);
                    let Some(d) = self.plan(&req) else { continue };
                    // The receiver's side: a flow ahead of its predecessor is cut back.
                    if let Dependency::Ring { predecessor_bytes } = dep {
                        self.reduce(&req, &d, excess_bytes(d.accumulated_bytes, predecessor_bytes));
                    }
                    self.flow_decisions.add(t0.elapsed().as_secs_f64() * 1e6);
                    prev = Some((req, d));
                }
            }
            Paradigm::Ps => {
                let w = job.spec.workers as usize;
                let p = job.spec.parameter_servers() as usize;
                for ps in 0..p {
                    let pushes: Vec<usize> = (ps * w..(ps + 1) * w).collect();
                    let pulls: Vec<usize> = (p * w + ps * w..p * w + (ps + 1) * w).collect();
                    let f_of = |f: usize| if job.flows[f].done { job.flows[f].size.round() as u64 } else { job.flows[f].sent as u64 };
                    let pull_f: Vec<u64> = pulls.iter().map(|&f| f_of(f)).collect();
                    let mut agg_f: Vec<u64> = Vec::new();
                    for &f in &pushes {
                        if !active(f) {
                            agg_f.push(f_of(f));
                            continue;
                        }
                        let t0 = Instant::now();
                        let req = Self::request(sim, j, f, Dependency::ps_aggregation(&pull_f));
                        if let Some(d) = self.plan(&req) {
                            agg_f.push(d.accumulated_bytes);
                        }
                        self.flow_decisions.add(t0.elapsed().as_secs_f64() * 1e6);
                    }
                    let dep = Dependency::ps_broadcast(&agg_f);
                    let a_min = agg_f.iter().min().copied().unwrap_or(0);
                    for &f in &pulls {
                        if !active(f) {
                            continue;
                        }
                        let t0 = Instant::now();
                        let req = Self::request(sim, j, f, dep);
                        if let Some(d) = self.plan(&req) {
                            self.reduce(&req, &d, excess_bytes(d.accumulated_bytes, a_min));
                        }
                        self.flow_decisions.add(t0.elapsed().as_secs_f64() * 1e6);
                    }
                }
            }
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
            for &j in &jobs {
                self.plan_job(sim, j, &|_| true);
            }
        } else {
            for &j in &jobs {
                let new: Vec<usize> = sim.active.iter().filter(|(x, f)| *x == j && !self.rates.contains_key(&flow_id(j, *f))).map(|(_, f)| *f).collect();
                if !new.is_empty() {
                    self.plan_job(sim, j, &|f| new.contains(&f));
                }
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
