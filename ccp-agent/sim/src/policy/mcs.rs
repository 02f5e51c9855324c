// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! MCS, our reading. The mlcc paper (Sec. VII, baseline [17]: Tian, Tian, Dai, Wang, "Scheduling
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

use super::{Control, DepMode, Policy};
use crate::sim::Sim;

/// MCS-like centralised coflow scheduling.
#[derive(Clone, Debug, Default)]
pub struct Mcs;

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
        // Coflows: the sendable active flows of each job.
        let mut coflows: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, &(j, f)) in sim.active.iter().enumerate() {
            ctl.cap[i] = 0.0;
            if sim.blocked(j, f) || sim.jobs[j].flows[f].path.is_empty() {
                continue;
            }
            match coflows.last_mut() {
                Some((cj, v)) if *cj == j => v.push(i),
                _ => coflows.push((j, vec![i])),
            }
        }
        let cap = &sim.tree.capacity;
        let ports = |i: usize| {
            let (j, f) = sim.active[i];
            let p = &sim.jobs[j].flows[f].path;
            (p[0] as usize, p[p.len() - 1] as usize)
        };
        let remaining = |i: usize| {
            let (j, f) = sim.active[i];
            let fl = &sim.jobs[j].flows[f];
            (fl.size - fl.sent).max(0.0)
        };
        // Bottleneck time of a coflow on ports with capacities `c`.
        let gamma = |flows: &[usize], c: &dyn Fn(usize) -> f64| -> f64 {
            let mut load: Vec<(usize, f64)> = Vec::new();
            for &i in flows {
                let (a, b) = ports(i);
                for p in [a, b] {
                    match load.iter_mut().find(|(x, _)| *x == p) {
                        Some(e) => e.1 += remaining(i),
                        None => load.push((p, remaining(i))),
                    }
                }
            }
            load.iter().map(|(p, l)| if c(*p) > 0.0 { l / c(*p) } else { f64::INFINITY }).fold(0.0, f64::max)
        };
        let full = |p: usize| cap[p];
        let mut order: Vec<(f64, usize)> = coflows.iter().enumerate().map(|(k, (_, v))| (gamma(v, &full), k)).collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut residual: std::collections::HashMap<usize, f64> = std::collections::HashMap::new();
        for (_, k) in order {
            let flows = &coflows[k].1;
            let g = {
                let c = |p: usize| residual.get(&p).copied().unwrap_or(cap[p]);
                gamma(flows, &c)
            };
            if !(g.is_finite() && g > 0.0) {
                continue;
            }
            for &i in flows {
                let r = remaining(i) / g;
                ctl.cap[i] = r;
                let (a, b) = ports(i);
                for p in [a, b] {
                    let e = residual.entry(p).or_insert(cap[p]);
                    *e = (*e - r).max(0.0);
                }
            }
        }
        f64::INFINITY
    }
}
