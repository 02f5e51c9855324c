// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The policies compared by the simulator, each a module behind [`Policy`].
//!
//! A policy sees the whole [`Sim`] (read only) and, at each decision, gives every active flow
//! (in the order of [`Sim::active`]) a weight and a rate cap ([`Control`]); the engine turns them
//! into rates by weighted max-min sharing with caps, after the data dependencies of each job.
//! It also says when it next wants to decide (a slot boundary, a re-evaluation of MLTCP's F,
//! or never until something changes), may choose among candidate placements, and may hold jobs'
//! next iterations back (time shifts).

use serde_json::Value;

use mlcc_sched::{JobKey, JobWork};

use crate::sim::{Align, Sim};

pub mod cassini;
pub mod ccml;
pub mod fair;
pub mod mcs;
pub mod mlcc;
pub mod mltcp;
pub mod priority;

/// How strictly a flow waits for the data it forwards (see [`crate::sim`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DepMode {
    /// Chunks are forwarded as they stream in.
    #[default]
    Pipelined,
    /// A chunk (ring) or the broadcast (PS) starts only after the data it depends on has been
    /// completely received (MCS's "start-after" coflow dependency).
    StartAfter,
}

/// A policy's decision for the active flows.
#[derive(Clone, Debug, Default)]
pub struct Control {
    /// Weight of each active flow in max-min sharing (1 = TCP-fair).
    pub weight: Vec<f64>,
    /// Rate cap of each active flow, bytes/s (`f64::INFINITY`: none).
    pub cap: Vec<f64>,
    /// After the capped allocation, share what is left max-min among the flows that may send
    /// (work conservation).
    pub backfill: bool,
}

impl Control {
    /// Every active flow at weight 1, uncapped.
    pub fn fair(&mut self, n: usize) {
        self.weight.clear();
        self.weight.resize(n, 1.0);
        self.cap.clear();
        self.cap.resize(n, f64::INFINITY);
        self.backfill = false;
    }
}

/// A flow-control policy.
pub trait Policy {
    /// Its name in tables and files.
    fn name(&self) -> String;

    /// Dependency mode of its flows.
    fn deps(&self) -> DepMode {
        DepMode::Pipelined
    }

    /// Number of candidate placements it wants to choose from (1: take the first).
    fn placement_candidates(&self) -> usize {
        1
    }

    /// Chooses among `candidates` (server lists) for job `job`; index into `candidates`.
    fn choose_placement(&mut self, _sim: &Sim, _job: usize, _candidates: &[Vec<u32>]) -> usize {
        0
    }

    /// Job `job` has just been placed (its flows, alone times and links are set); returns
    /// one-time alignments of jobs' next iteration starts.
    fn on_job_start(&mut self, _sim: &Sim, _job: usize) -> Vec<(usize, Align)> {
        Vec::new()
    }

    /// Job `job` has finished.
    fn on_job_end(&mut self, _sim: &Sim, _job: usize) {}

    /// Decides weights and caps for `sim.active`; returns the time (s) of its next decision
    /// even if nothing changes (`f64::INFINITY`: none).
    fn decide(&mut self, sim: &Sim, ctl: &mut Control) -> f64;

    /// True when the policy decides each flow from its own job alone ([`Policy::flow_control`]),
    /// so the engine asks it only about the jobs an event touched (and about every job when a
    /// job starts or ends); [`Policy::decide`] is then never called.
    fn is_local(&self) -> bool {
        false
    }

    /// A per-job policy's weight and cap (bytes/s) for flow `f` of job `j`; `None` for a
    /// policy that decides for the whole cluster at once.
    fn flow_control(&self, _sim: &Sim, _j: usize, _f: usize) -> Option<(f64, f64)> {
        None
    }

    /// A per-job policy's next decision about job `j` even if nothing changes, seconds
    /// (`f64::INFINITY`: none).
    fn job_next_decision(&self, _sim: &Sim, _j: usize) -> f64 {
        f64::INFINITY
    }

    /// A per-job policy's coalescing window, as a fraction of a job's decision interval (0:
    /// none). When the engine decides some jobs at an event, it also decides then every job
    /// sharing a network link with one of them whose next decision ([`Policy::job_next_decision`])
    /// is due within this fraction of the interval it was scheduled with: decided early (never
    /// later than scheduled), so one re-allocation covers several jobs.
    fn coalesce_within(&self) -> f64 {
        0.0
    }

    /// True when the policy decides for the whole cluster but re-decides only some jobs at a
    /// time ([`Policy::select_jobs`], [`Policy::decide_jobs`]): the engine then brings only those
    /// jobs up to date and re-allocates only them (and what their change reaches), instead of
    /// calling [`Policy::decide`] on every active network flow at every change.
    fn is_sparse(&self) -> bool {
        false
    }

    /// A sparse policy's choice of the jobs to re-decide now besides `touched` (the jobs an
    /// event touched since the last decision: flows started, ended or changed dependency state,
    /// or the job started or ended), appended to `out`. `at_decision`: the policy's own decision
    /// time (the one [`Policy::decide_jobs`] returned last) has come. Byte counts of the jobs not
    /// in `touched` may be stale here (rates and phases are current).
    fn select_jobs(
        &mut self,
        _sim: &Sim,
        _touched: &[usize],
        _at_decision: bool,
        _out: &mut Vec<usize>,
    ) {
    }

    /// A sparse policy's decision for `jobs` (the touched and selected jobs, each once, brought
    /// up to date; some may no longer communicate): pushes (job, flow, weight, cap in bytes/s)
    /// for every active network flow of those that communicate; returns the time (s) of its next
    /// decision even if nothing changes (`f64::INFINITY`: none).
    fn decide_jobs(
        &mut self,
        _sim: &Sim,
        _jobs: &[usize],
        _at_decision: bool,
        _out: &mut Vec<(usize, usize, f64, f64)>,
    ) -> f64 {
        f64::INFINITY
    }

    /// A sparse policy's [`Control::backfill`].
    fn backfill(&self) -> bool {
        false
    }

    /// Also decide at every event, not only when flows change.
    fn decide_every_event(&self) -> bool {
        false
    }

    /// Policy-specific results for the JSON report.
    fn report(&self) -> Value {
        Value::Null
    }
}

/// A per-job policy that gives all of a job's flows one weight, recomputed when a job starts or
/// ends (CCML's levels, the policy layer's strict-priority weights): its [`Policy`] is derived
/// from this (event-driven weighted max-min, uncapped, per job).
pub trait JobWeights {
    /// Its name in tables and files.
    fn label(&self) -> String;
    /// Recomputes the weights (a job started or ended).
    fn reweigh(&mut self, sim: &Sim);
    /// The weight of job `j`'s flows in weighted max-min sharing.
    fn job_weight(&self, j: usize) -> f64;
}

impl<T: JobWeights> Policy for T {
    fn name(&self) -> String {
        self.label()
    }

    fn on_job_start(&mut self, sim: &Sim, _job: usize) -> Vec<(usize, Align)> {
        self.reweigh(sim);
        Vec::new()
    }

    fn on_job_end(&mut self, sim: &Sim, _job: usize) {
        self.reweigh(sim);
    }

    fn decide(&mut self, sim: &Sim, ctl: &mut Control) -> f64 {
        ctl.fair(sim.active.len());
        for (i, &(j, _)) in sim.active.iter().enumerate() {
            ctl.weight[i] = self.job_weight(j);
        }
        f64::INFINITY
    }

    fn is_local(&self) -> bool {
        true
    }

    fn flow_control(&self, _sim: &Sim, j: usize, _f: usize) -> Option<(f64, f64)> {
        Some((self.job_weight(j), f64::INFINITY))
    }
}

/// A search for the jobs link-connected to some starting jobs, for the sparse policies that
/// re-decide whole components ([`Policy::select_jobs`]): MCS through server ports, the
/// burst-ranked priorities through every link. Marks are stamped, so a search costs what it
/// visits.
#[derive(Clone, Debug, Default)]
pub struct ComponentSearch {
    job_mark: Vec<u32>,
    link_mark: Vec<u32>,
    stamp: u32,
    queue: Vec<usize>,
}

impl ComponentSearch {
    /// Visits every job reachable from the jobs `seeds` (searched from whether or not they are
    /// members): from each visited job through the links `links(sim, job, visit)` names, to the
    /// jobs on those links ([`Sim::link_jobs`]) that are members (`member`), each pushed once
    /// to `out` (seeds are not).
    pub fn run(
        &mut self,
        sim: &Sim,
        seeds: &[usize],
        links: impl Fn(&Sim, usize, &mut dyn FnMut(usize)),
        member: impl Fn(&Sim, usize) -> bool,
        out: &mut Vec<usize>,
    ) {
        self.stamp = self.stamp.wrapping_add(1);
        let stamp = self.stamp;
        self.job_mark.resize(sim.jobs.len(), 0);
        self.link_mark.resize(sim.tree.links(), 0);
        self.queue.clear();
        for &j in seeds {
            if self.job_mark[j] != stamp {
                self.job_mark[j] = stamp;
                self.queue.push(j);
            }
        }
        while let Some(j) = self.queue.pop() {
            let (job_mark, link_mark, queue) =
                (&mut self.job_mark, &mut self.link_mark, &mut self.queue);
            links(sim, j, &mut |l| {
                if link_mark[l] == stamp {
                    return;
                }
                link_mark[l] = stamp;
                for &k in &sim.link_jobs[l] {
                    if job_mark[k] != stamp && member(sim, k) {
                        job_mark[k] = stamp;
                        queue.push(k);
                        out.push(k);
                    }
                }
            });
        }
    }
}

/// The work left of `jobs` for the policy layer's [`mlcc_sched::rank_jobs`]: iterations left
/// times the job's iteration time alone, µs.
pub fn job_work(sim: &Sim, jobs: &[usize]) -> Vec<JobWork> {
    jobs.iter()
        .map(|&j| {
            let job = &sim.jobs[j];
            let left = job.spec.iterations.saturating_sub(job.iterations_done);
            JobWork {
                job: JobKey(j as u64),
                remaining_us: (f64::from(left) * job.alone_iter_s * 1e6) as u64,
            }
        })
        .collect()
}
