// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Cassini (Rajasekaran, MIT thesis, ch. 4) on top of a sharing policy (fair or MLTCP): time
//! shifts from the unified-circle compatibility score and the Affinity-graph BFS, computed by the
//! scheduling library (`mlcc_sched::cassini`); this module only builds its inputs and applies its
//! outputs.
//!
//! - Links: Cassini's graph has physical links, full duplex, so a "link" here is a wire (both
//!   directions of a cable; a job's demand on it is its busier direction). Counting each direction
//!   as its own link would make every pair of jobs with two-way traffic through one server a loop.
//! - Profiles: a job's circle on a link is one communication phase per iteration: it starts after
//!   the compute phase, lasts the job's communication time alone, and demands the job's bytes on
//!   that link per iteration over that time; the perimeter is its iteration time alone. Times are
//!   rounded to [`GRID_MS`] so that LCMs (unified circles) stay small.
//! - Placement (thesis Sec. 4.4.2, Alg. 2): Cassini asks the placement for up to
//!   `candidates` placements (first-fit from different racks), discards those whose Affinity
//!   graph (links shared by ≥ 2 jobs, and their jobs) has a loop, and takes the loop-free
//!   candidate whose new links score best; when every candidate loops, it takes the first one and
//!   counts it (the BFS then keeps the first shift it finds for a job and reports the others as
//!   conflicts, also counted).
//! - Time shifts: when a job is placed, every link it shares is solved by
//!   [`best_shifts`] (`angles` samples of the unified circle, shifts in steps of a tenth of the
//!   shortest iteration), and [`affinity_time_shifts`] turns the per-link rotations of these links
//!   into one shift per job. The thesis re-solves at each scheduling epoch; here the epoch is a
//!   job arrival, restricted to the links of the arriving job and their jobs.
//! - Applying a shift (thesis Sec. 4.4.2, step 3): each job concerned delays the start of its next
//!   iteration once, to the first instant ≡ now + t_j (mod its iteration time). No drift
//!   correction afterwards.

use std::collections::{BTreeMap, HashMap};

use mlcc_sched::cassini::{
    affinity_has_loop, affinity_time_shifts, best_shifts, compatibility_score, AffinityEdge,
    CircleJob, JobId, Phase,
};
use mlcc_sched::LinkId;
use serde_json::{json, Value};

use super::{Control, DepMode, Policy};
use crate::sim::{Align, Sim};

/// Jobs on full-duplex wire `w` (directed links 2w and 2w+1), in increasing order.
pub fn wire_jobs(sim: &Sim, w: u32) -> Vec<usize> {
    let mut v: Vec<usize> = Vec::new();
    for l in [2 * w, 2 * w + 1] {
        if let Some(js) = sim.link_jobs.get(l as usize) {
            v.extend(js.iter().copied());
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// Per-wire bytes per iteration from per-link bytes: the busier direction of each wire.
pub fn wire_bytes(links: &[(u32, f64)]) -> Vec<(u32, f64)> {
    let mut v: Vec<(u32, f64)> = Vec::new();
    for &(l, b) in links {
        match v.iter_mut().find(|(w, _)| *w == l / 2) {
            Some(e) => e.1 = e.1.max(b),
            None => v.push((l / 2, b)),
        }
    }
    v
}

fn bytes_on_wire(sim: &Sim, k: usize, w: u32) -> f64 {
    wire_bytes(&sim.jobs[k].link_bytes)
        .iter()
        .find(|x| x.0 == w)
        .map_or(0.0, |x| x.1)
}

/// Time grid of the circles, ms.
pub const GRID_MS: u64 = 10;

/// Counters reported by a Cassini run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct CassiniStats {
    /// Placements decided.
    pub placements: u64,
    /// Placements whose first candidate's Affinity graph had a loop.
    pub first_candidate_looped: u64,
    /// Of those, placements where another candidate was loop-free.
    pub resolved_by_other_candidate: u64,
    /// Placements where every candidate looped.
    pub no_loop_free_candidate: u64,
    /// Edges whose shift disagreed in the BFS (loops only).
    pub bfs_conflicts: u64,
    /// Links solved by best_shifts.
    pub links_solved: u64,
    /// Links skipped (unified circle too large).
    pub links_skipped: u64,
    /// Jobs given a time shift.
    pub shifts_applied: u64,
}

/// Cache key of a solved link: each job's (iteration, phase start, duration, rate), and the
/// link capacity in bit/s.
type CircleKey = (Vec<(u64, u64, u64, u64)>, u64);

/// Cassini on top of `inner`.
pub struct Cassini {
    inner: Box<dyn Policy>,
    /// Candidate placements considered.
    pub candidates: usize,
    /// Angles sampled on a unified circle.
    pub angles: usize,
    /// Counters.
    pub stats: CassiniStats,
    cache: HashMap<CircleKey, Vec<u64>>,
}

/// A job's circle on a link carrying `bytes` of it per iteration, from its alone profile.
pub fn circle(iter_s: f64, compute_s: f64, comm_s: f64, bytes: f64) -> CircleJob {
    let grid = |s: f64| (((s * 1000.0) / GRID_MS as f64).round() as u64 * GRID_MS).max(GRID_MS);
    let iteration_ms = grid(iter_s);
    let start_ms = grid(compute_s).min(iteration_ms - 1) % iteration_ms;
    let duration_ms = grid(comm_s).min(iteration_ms);
    let rate_bps = (bytes * 8.0 / comm_s.max(1e-9)) as u64;
    CircleJob {
        iteration_ms,
        phases: vec![Phase {
            start_ms,
            duration_ms,
            rate_bps,
        }],
    }
}

impl Cassini {
    /// Cassini over `inner`, choosing among `candidates` placements, sampling `angles` angles.
    pub fn new(inner: Box<dyn Policy>, candidates: usize, angles: usize) -> Self {
        Cassini {
            inner,
            candidates: candidates.max(1),
            angles: angles.max(1),
            stats: CassiniStats::default(),
            cache: HashMap::new(),
        }
    }

    fn job_circle(sim: &Sim, j: usize, bytes: f64) -> CircleJob {
        let job = &sim.jobs[j];
        circle(
            job.alone_iter_s,
            job.spec.compute_s,
            job.alone_comm_s,
            bytes,
        )
    }

    /// Affinity edges (wires shared by ≥ 2 jobs) of the current jobs plus job `j` on `wires`,
    /// shifts 0.
    pub fn graph_with(sim: &Sim, j: usize, wires: &[(u32, f64)]) -> Vec<AffinityEdge> {
        let mut edges = Vec::new();
        for w in 0..(sim.link_jobs.len() / 2) as u32 {
            let jobs = wire_jobs(sim, w);
            let extra = wires.iter().any(|(x, _)| *x == w);
            let n = jobs.iter().filter(|x| **x != j).count() + usize::from(extra);
            if n < 2 {
                continue;
            }
            for &k in jobs.iter().filter(|x| **x != j) {
                edges.push(AffinityEdge {
                    job: JobId(k as u32),
                    link: LinkId(w),
                    shift_ms: 0,
                });
            }
            if extra {
                edges.push(AffinityEdge {
                    job: JobId(j as u32),
                    link: LinkId(w),
                    shift_ms: 0,
                });
            }
        }
        edges
    }

    /// Rotation of the jobs on wire `w` (shifts in ms, in the order of `circles`), cached.
    fn solve_link(&mut self, sim: &Sim, w: usize, circles: &[CircleJob]) -> Option<Vec<u64>> {
        let cap_bps = (sim.tree.capacity[2 * w] * 8.0) as u64;
        let key = (
            circles
                .iter()
                .map(|c| {
                    (
                        c.iteration_ms,
                        c.phases[0].start_ms,
                        c.phases[0].duration_ms,
                        c.phases[0].rate_bps,
                    )
                })
                .collect(),
            cap_bps,
        );
        if let Some(s) = self.cache.get(&key) {
            return Some(s.clone());
        }
        let step = circles
            .iter()
            .map(|c| c.iteration_ms)
            .min()
            .unwrap_or(GRID_MS)
            / 10;
        let step = (step / GRID_MS).max(1) * GRID_MS;
        match best_shifts(circles, cap_bps, self.angles, step) {
            Ok(r) => {
                self.stats.links_solved += 1;
                self.cache.insert(key, r.shifts_ms.clone());
                Some(r.shifts_ms)
            }
            Err(_) => {
                self.stats.links_skipped += 1;
                None
            }
        }
    }

    /// Mean compatibility score (all shifts 0) of the shared links of `links` with job `j` on them
    /// (its communication time alone on that placement `comm_s`).
    fn placement_score(&self, sim: &Sim, j: usize, links: &[(u32, f64)], comm_s: f64) -> f64 {
        let mut sum = 0.0;
        let mut n = 0usize;
        for (w, b) in links {
            let others: Vec<usize> = wire_jobs(sim, *w).into_iter().filter(|k| *k != j).collect();
            if others.is_empty() {
                continue;
            }
            let mut circles: Vec<CircleJob> = others
                .iter()
                .map(|k| Self::job_circle(sim, *k, bytes_on_wire(sim, *k, *w)))
                .collect();
            let job = &sim.jobs[j];
            circles.push(circle(
                job.spec.compute_s + comm_s,
                job.spec.compute_s,
                comm_s,
                *b,
            ));
            let zeros = vec![0; circles.len()];
            if let Ok(s) = compatibility_score(
                &circles,
                &zeros,
                (sim.tree.capacity[2 * *w as usize] * 8.0) as u64,
                self.angles,
            ) {
                sum += s;
                n += 1;
            }
        }
        if n == 0 {
            1.0
        } else {
            sum / n as f64
        }
    }
}

impl Policy for Cassini {
    fn name(&self) -> String {
        format!("cassini+{}", self.inner.name())
    }

    fn deps(&self) -> DepMode {
        self.inner.deps()
    }

    fn placement_candidates(&self) -> usize {
        self.candidates
    }

    fn choose_placement(&mut self, sim: &Sim, j: usize, candidates: &[Vec<u32>]) -> usize {
        let mut loop_free: Vec<(usize, f64)> = Vec::new();
        for (k, servers) in candidates.iter().enumerate() {
            let flows = Sim::build_flows(&sim.tree, &sim.jobs[j].spec, servers);
            let links = wire_bytes(&Sim::bytes_per_link(&flows));
            if !affinity_has_loop(&Self::graph_with(sim, j, &links)) {
                let comm_s =
                    Sim::alone_comm_s(&sim.tree, &sim.jobs[j].spec, &flows, sim.config.deps);
                loop_free.push((k, self.placement_score(sim, j, &links, comm_s)));
            } else if k == 0 {
                self.stats.first_candidate_looped += 1;
            }
        }
        if loop_free.is_empty() {
            self.stats.no_loop_free_candidate += 1;
            return 0;
        }
        if loop_free[0].0 != 0 {
            self.stats.resolved_by_other_candidate += 1;
        }
        loop_free.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        loop_free[0].0
    }

    fn on_job_start(&mut self, sim: &Sim, j: usize) -> Vec<(usize, Align)> {
        self.stats.placements += 1;
        let mut out = self.inner.on_job_start(sim, j);
        let mut edges = Vec::new();
        let mut iters: BTreeMap<JobId, u64> = BTreeMap::new();
        let wires: Vec<u32> = wire_bytes(&sim.jobs[j].link_bytes)
            .iter()
            .map(|x| x.0)
            .collect();
        for l in wires {
            let jobs: Vec<usize> = wire_jobs(sim, l);
            if jobs.len() < 2 {
                continue;
            }
            let circles: Vec<CircleJob> = jobs
                .iter()
                .map(|k| Self::job_circle(sim, *k, bytes_on_wire(sim, *k, l)))
                .collect();
            // Already compatible without shifts: nothing to solve on this link.
            let zeros = vec![0; circles.len()];
            let cap_bps = (sim.tree.capacity[2 * l as usize] * 8.0) as u64;
            if compatibility_score(&circles, &zeros, cap_bps, self.angles)
                .is_ok_and(|s| s >= 1.0 - 1e-9)
            {
                continue;
            }
            let Some(shifts) = self.solve_link(sim, l as usize, &circles) else {
                continue;
            };
            for ((k, c), s) in jobs.iter().zip(&circles).zip(shifts) {
                iters.insert(JobId(*k as u32), c.iteration_ms);
                edges.push(AffinityEdge {
                    job: JobId(*k as u32),
                    link: LinkId(l),
                    shift_ms: s,
                });
            }
        }
        if edges.is_empty() {
            return out;
        }
        if let Ok(res) = affinity_time_shifts(&edges, &iters) {
            self.stats.bfs_conflicts += res.conflicts.len() as u64;
            for (k, t_ms) in res.shifts_ms {
                let period_s = iters.get(&k).copied().unwrap_or(GRID_MS) as f64 / 1000.0;
                out.push((
                    k.0 as usize,
                    Align {
                        at_s: sim.t + t_ms as f64 / 1000.0,
                        period_s,
                    },
                ));
                self.stats.shifts_applied += 1;
            }
        }
        out
    }

    fn on_job_end(&mut self, sim: &Sim, j: usize) {
        self.inner.on_job_end(sim, j);
    }

    fn decide(&mut self, sim: &Sim, ctl: &mut Control) -> f64 {
        self.inner.decide(sim, ctl)
    }

    fn is_local(&self) -> bool {
        self.inner.is_local()
    }

    fn flow_control(&self, sim: &Sim, j: usize, f: usize) -> Option<(f64, f64)> {
        self.inner.flow_control(sim, j, f)
    }

    fn decide_every_event(&self) -> bool {
        self.inner.decide_every_event()
    }

    fn job_next_decision(&self, sim: &Sim, j: usize) -> f64 {
        self.inner.job_next_decision(sim, j)
    }

    fn coalesce_within(&self) -> f64 {
        self.inner.coalesce_within()
    }

    fn is_sparse(&self) -> bool {
        self.inner.is_sparse()
    }

    fn select_jobs(
        &mut self,
        sim: &Sim,
        touched: &[usize],
        at_decision: bool,
        out: &mut Vec<usize>,
    ) {
        self.inner.select_jobs(sim, touched, at_decision, out)
    }

    fn decide_jobs(
        &mut self,
        sim: &Sim,
        jobs: &[usize],
        at_decision: bool,
        out: &mut Vec<(usize, usize, f64, f64)>,
    ) -> f64 {
        self.inner.decide_jobs(sim, jobs, at_decision, out)
    }

    fn backfill(&self) -> bool {
        self.inner.backfill()
    }

    fn report(&self) -> Value {
        json!({ "cassini": self.stats, "inner": self.inner.report() })
    }
}
