// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `priority`: the policy layer's [`mlcc_sched::Rules::Priority`] (job-level strict priority,
//! work-conserving; issue 19, not in the mlcc paper) in the simulator's network of weighted
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

use mlcc_sched::{priority_levels, priority_weight, rank_jobs, LinkId, RankedJob};

use super::{job_work, JobWeights};
use crate::sim::{Phase, Sim};

/// Job-level strict priority by the policy layer's ranks and levels.
#[derive(Clone, Debug)]
pub struct Priority {
    /// Weight ratio between consecutive levels (> 1; [`mlcc_sched::PRIORITY_WEIGHT_RATIO`]).
    pub ratio: f64,
    /// Per job (index), its flows' weight.
    weight: Vec<f64>,
}

impl Priority {
    /// The policy with weight ratio `ratio` between levels.
    pub fn new(ratio: f64) -> Self {
        Priority {
            ratio,
            weight: Vec::new(),
        }
    }

    /// Re-ranks the jobs that are placed and cross the network.
    fn relevel(&mut self, sim: &Sim) {
        self.weight.clear();
        self.weight.resize(sim.jobs.len(), 1.0);
        let live: Vec<usize> = (0..sim.jobs.len())
            .filter(|&j| {
                let job = &sim.jobs[j];
                job.network && !matches!(job.phase, Phase::Waiting | Phase::Done)
            })
            .collect();
        let work = job_work(sim, &live);
        // Job numbers are distinct, so neither call can refuse; fair sharing if one did.
        let Ok(ranks) = rank_jobs(&work) else { return };
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
        let Ok(levels) = priority_levels(&ranked) else { return };
        for (job, level) in levels {
            self.weight[job.0 as usize] = priority_weight(level, self.ratio);
        }
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
