// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! MCS, our reading. The mlcc paper (Sec. VII, baseline \[17\]: Tian, Tian, Dai, Wang, "Scheduling
//! coflows of multi-stage jobs to minimize the total weighted job completion time", INFOCOM '18):
//! "MCS addresses the 'start-after' dependency, which requires one coflow to start after the
//! completion of the other ... in PS architecture, the PS needs to send broadcast flows after the
//! completion of aggregation flows from workers; in AllReduce, one worker starts sending data to
//! the subsequent worker after completely receiving data from the precedent worker. It solves a
//! centralized problem and regards the whole cluster as a logical switch without considering the
//! routing paths."
//!
//! As implemented (documented parameters):
//! - dependencies are start-after ([`DepMode::StartAfter`]): a PS broadcasts once all the
//!   aggregation into it has arrived; a ring worker forwards a chunk (G/W bytes) once it has
//!   received all of it;
//! - one coflow per job: its flows that may send now. The cluster is one big switch whose ports
//!   are the server NICs (each flow's first and last link); coflows are ordered by their
//!   bottleneck time on that switch (smallest effective bottleneck first, the Varys ordering MCS
//!   builds on; ties by job), and each in turn gets, on the ports it uses, the rates that finish
//!   all its flows together at its bottleneck (MADD), out of what earlier coflows left;
//! - the real network then carries those rates as caps (core links shared max-min among them,
//!   as MCS does not see the paths), and what is left idle is shared max-min (work conservation);
//! - it re-decides at every event (a flow or coflow starting or ending).
//!
//! Which coflows are re-decided at an event (documented approximation, [`Mcs::exact`]): the
//! decision separates into the port-connected components of the coflows (two coflows are
//! connected when they share a server port; a coflow's rates depend only on the coflows of its
//! component, ordered among themselves). By default only the components an event reaches are
//! re-decided: those holding a port of a job the event touched (a flow or coflow starting or
//! ending, a flow blocked or freed by its start-after dependency). The others keep the rates of
//! their last decision. Those rates would not move if their flows ran exactly at them (a
//! coflow's rates are remaining / bottleneck time, and both shrink at the same pace), but the
//! work-conserving backfill lets flows run faster than their rate, so a component not re-decided
//! keeps rates computed from older remaining bytes. `exact` re-decides every coflow at every
//! event (the reference; its cost grows with all active flows at every event).

use super::{ComponentSearch, Control, DepMode, Policy};
use crate::sim::{Phase, Sim};

/// MCS-like centralised coflow scheduling.
#[derive(Clone, Debug, Default)]
pub struct Mcs {
    /// Re-decide every coflow at every event (the reference) instead of only the port-connected
    /// components an event reaches (module documentation).
    pub exact: bool,
    /// Residual capacity per link while deciding (bytes/s), valid where `res_mark` holds the
    /// current decision's stamp.
    residual: Vec<f64>,
    res_mark: Vec<u32>,
    stamp: u32,
    /// The port-connected component search.
    search: ComponentSearch,
    /// Scratch: the flows decided and their caps, and [`Mcs::caps`]'s buffers.
    flows: Vec<(usize, usize)>,
    caps: Vec<f64>,
    scratch: CapsScratch,
}

/// [`Mcs::caps`]'s buffers, kept between calls: the sendable flows, the coflows (job, range of
/// `sendable`), bytes per port and the coflows' order.
#[derive(Clone, Debug, Default)]
struct CapsScratch {
    sendable: Vec<usize>,
    coflows: Vec<(usize, usize, usize)>,
    load: Vec<(usize, f64)>,
    order: Vec<(f64, usize)>,
}

impl Mcs {
    /// MCS re-deciding only the components an event reaches (`exact` false) or every coflow.
    pub fn new(exact: bool) -> Mcs {
        Mcs {
            exact,
            ..Mcs::default()
        }
    }

    /// MCS's caps (bytes/s) for `flows` (active network flows, in job order, every flow of a
    /// coflow included), into `cap` (0 for a flow that may not send now).
    fn caps(&mut self, sim: &Sim, flows: &[(usize, usize)], cap: &mut Vec<f64>) {
        cap.clear();
        cap.resize(flows.len(), 0.0);
        // Coflows: the sendable active flows of each job, as ranges of `sendable` (the flows
        // come in job order). Scratch buffers are kept between calls.
        let mut sc = std::mem::take(&mut self.scratch);
        let CapsScratch {
            sendable,
            coflows,
            load,
            order,
        } = &mut sc;
        sendable.clear();
        coflows.clear();
        for (i, &(j, f)) in flows.iter().enumerate() {
            if sim.blocked(j, f) || sim.jobs[j].flows[f].path.is_empty() {
                continue;
            }
            match coflows.last_mut() {
                Some((cj, _, end)) if *cj == j => *end += 1,
                _ => coflows.push((j, sendable.len(), sendable.len() + 1)),
            }
            sendable.push(i);
        }
        let link_cap = &sim.tree.capacity;
        let ports = |i: usize| {
            let (j, f) = flows[i];
            let p = &sim.jobs[j].flows[f].path;
            (p[0] as usize, p[p.len() - 1] as usize)
        };
        let remaining = |i: usize| {
            let (j, f) = flows[i];
            let fl = &sim.jobs[j].flows[f];
            (fl.size - fl.sent).max(0.0)
        };
        // Bottleneck time of a coflow on ports with capacities `c` (`load`: scratch for the
        // bytes per port).
        let gamma = |flows: &[usize], c: &dyn Fn(usize) -> f64, load: &mut Vec<(usize, f64)>| {
            load.clear();
            for &i in flows {
                let (a, b) = ports(i);
                for p in [a, b] {
                    match load.iter_mut().find(|(x, _)| *x == p) {
                        Some(e) => e.1 += remaining(i),
                        None => load.push((p, remaining(i))),
                    }
                }
            }
            load.iter()
                .map(|(p, l)| {
                    if c(*p) > 0.0 {
                        l / c(*p)
                    } else {
                        f64::INFINITY
                    }
                })
                .fold(0.0, f64::max)
        };
        let full = |p: usize| link_cap[p];
        order.clear();
        for (k, &(_, a, b)) in coflows.iter().enumerate() {
            order.push((gamma(&sendable[a..b], &full, load), k));
        }
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        // Residual capacity of the ports, set lazily (capacity until a coflow takes some).
        self.stamp = self.stamp.wrapping_add(1);
        if self.residual.len() < link_cap.len() {
            self.residual.resize(link_cap.len(), 0.0);
            self.res_mark.resize(link_cap.len(), 0);
        }
        let stamp = self.stamp;
        for &(_, k) in order.iter() {
            let (_, a, b) = coflows[k];
            let flows = &sendable[a..b];
            let g = {
                let (res, mark) = (&self.residual, &self.res_mark);
                let c = |p: usize| {
                    if mark[p] == stamp {
                        res[p]
                    } else {
                        link_cap[p]
                    }
                };
                gamma(flows, &c, load)
            };
            if !(g.is_finite() && g > 0.0) {
                continue;
            }
            for &i in flows {
                let r = remaining(i) / g;
                cap[i] = r;
                let (a, b) = ports(i);
                for p in [a, b] {
                    if self.res_mark[p] != stamp {
                        self.res_mark[p] = stamp;
                        self.residual[p] = link_cap[p];
                    }
                    self.residual[p] = (self.residual[p] - r).max(0.0);
                }
            }
        }
        self.scratch = sc;
    }
}

impl Policy for Mcs {
    fn name(&self) -> String {
        "mcs".into()
    }

    fn deps(&self) -> DepMode {
        DepMode::StartAfter
    }

    fn decide(&mut self, sim: &Sim, ctl: &mut Control) -> f64 {
        let n = sim.active.len();
        ctl.fair(n);
        ctl.backfill = true;
        self.caps(sim, &sim.active, &mut ctl.cap);
        f64::INFINITY
    }

    fn is_sparse(&self) -> bool {
        !self.exact
    }

    fn backfill(&self) -> bool {
        true
    }

    /// The jobs of the port-connected components of the touched jobs' ports: a search over the
    /// communicating network jobs through the server ports their flows use.
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
                for fl in &sim.jobs[j].flows {
                    if fl.src == fl.dst {
                        continue;
                    }
                    if let (Some(&a), Some(&b)) = (fl.path.first(), fl.path.last()) {
                        visit(a as usize);
                        visit(b as usize);
                    }
                }
            },
            |sim, k| {
                let job = &sim.jobs[k];
                job.network && job.phase == Phase::Communicating
            },
            out,
        );
    }

    fn decide_jobs(
        &mut self,
        sim: &Sim,
        jobs: &[usize],
        _at_decision: bool,
        out: &mut Vec<(usize, usize, f64, f64)>,
    ) -> f64 {
        let mut order: Vec<usize> = jobs.to_vec();
        order.sort_unstable();
        let mut flows = std::mem::take(&mut self.flows);
        flows.clear();
        for &j in &order {
            let job = &sim.jobs[j];
            if job.network && job.phase == Phase::Communicating {
                flows.extend(sim.network_flows(j).map(|f| (j, f)));
            }
        }
        let mut caps = std::mem::take(&mut self.caps);
        self.caps(sim, &flows, &mut caps);
        out.extend(flows.iter().zip(&caps).map(|(&(j, f), &c)| (j, f, 1.0, c)));
        self.flows = flows;
        self.caps = caps;
        f64::INFINITY
    }
}
