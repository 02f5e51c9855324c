// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! CCML, our reading. The mlcc paper (Sec. VII, baseline \[47\]: Rajasekaran, Ghobadi, Kumar,
//! Akella, "Congestion control in machine learning clusters", HotNets '22) describes it in one
//! sentence: "It runs on the host side, profiles the iteration time of different jobs in advance,
//! and aims to maximally interleave the communication phases of co-located jobs based on their
//! iteration patterns." The HotNets paper's mechanism is deliberate unfairness between co-located
//! jobs: when one job gets more bandwidth than the other, their communication phases slide apart
//! and stay interleaved.
//!
//! As implemented (documented parameters):
//! - host side only: the ranking is per server; the core of the network is not considered;
//! - on every server, the jobs that use its network link (NIC) are ranked by their *profiled*
//!   iteration time alone (a job whose traffic stays inside the server does not compete there),
//!   shortest first (it has the most to lose per unit of delay), ties by arrival;
//! - a job's level is its worst (largest) rank over the servers it uses; its flows get weight
//!   `ratio^(−level)` with `ratio` = [`DEFAULT_RATIO`] (4) in weighted max-min sharing, i.e. a
//!   near-strict priority that still never starves a flow;
//! - levels are recomputed whenever a job starts or ends; between those, sharing is event driven.

use super::JobWeights;
use crate::sim::Sim;

/// Weight ratio between consecutive priority levels.
pub const DEFAULT_RATIO: f64 = 4.0;

/// CCML-like host-side unfair sharing.
#[derive(Clone, Debug)]
pub struct Ccml {
    /// Weight ratio between consecutive levels (> 1).
    pub ratio: f64,
    level: Vec<u32>,
}

impl Ccml {
    /// A CCML policy with weight ratio `ratio`.
    pub fn new(ratio: f64) -> Self {
        Ccml {
            ratio,
            level: Vec::new(),
        }
    }

    /// Weight of job `j`'s flows: `ratio^(−level)`.
    fn weight(&self, j: usize) -> f64 {
        let level = self.level.get(j).copied().unwrap_or(0);
        self.ratio.powi(-(level as i32))
    }

    fn relevel(&mut self, sim: &Sim) {
        self.level.clear();
        self.level.resize(sim.jobs.len(), 0);
        for s in 0..sim.server_jobs.len() {
            // The jobs that use this server's network link (its NIC); traffic between two GPUs
            // of the server does not compete there.
            let mut v: Vec<usize> = sim.server_nic_jobs(s as u32);
            if v.len() < 2 {
                continue;
            }
            v.sort_by(|a, b| {
                sim.jobs[*a]
                    .alone_iter_s
                    .total_cmp(&sim.jobs[*b].alone_iter_s)
                    .then(a.cmp(b))
            });
            for (rank, j) in v.into_iter().enumerate() {
                self.level[j] = self.level[j].max(rank as u32);
            }
        }
    }
}

impl JobWeights for Ccml {
    fn label(&self) -> String {
        "ccml".into()
    }

    fn reweigh(&mut self, sim: &Sim) {
        self.relevel(sim);
    }

    fn job_weight(&self, j: usize) -> f64 {
        self.weight(j)
    }
}
