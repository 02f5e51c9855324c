// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Cassini's geometric abstraction, for the cluster simulator: Rajasekaran, MIT thesis, ch. 4
//! (*Cassini*), Sec. 4.3 (unified circles, compatibility score, rotation angles) and Sec. 4.4
//! (Affinity graph, unique time shifts).
//!
//! Each job's network demand over one iteration is laid on a circle whose perimeter is its
//! iteration time; jobs sharing a link are overlaid on a *unified circle* whose perimeter is the
//! LCM of their iteration times, sampled at a set A of angles. For rotations ω_j,
//! `score = 1 − mean_{α∈A} Excess(α) / C`, `Excess(α) = max(0, Σ_j bw_j(α − ω_j) − C)`: 1 is
//! fully compatible, and the score may go negative. A rotation is bounded to the job's first
//! iteration on the unified circle.
//!
//! Here rotations are kept as times: a rotation ω on a circle of perimeter p is the shift
//! `ω / 2π · p` in milliseconds, and the time shift of job j on link l is that shift modulo its
//! iteration time (Eq. 4.5). The Affinity graph then reconciles the per-link shifts of a job into
//! one: BFS over jobs from a reference job with t = 0 (the thesis picks it at random; we take the
//! lowest job id, so every run agrees), `t_k = (t_j − t_j^l + t_k^l) mod iter_k` when going from
//! job j through link l to job k. Correct for loop-free graphs; on a loop, the edges that
//! disagree are reported.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::error::SchedError;
use crate::table::LinkId;

/// Largest unified-circle perimeter accepted, in ms (one day): LCMs of unrelated iteration
/// times grow fast, and the score samples the whole circle.
pub const MAX_PERIMETER_MS: u64 = 86_400_000;

/// One communication phase of an iteration: `rate_bps` from `start_ms` for `duration_ms`
/// (wrapping past the end of the iteration).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Phase {
    /// Start, in ms from the start of the iteration.
    pub start_ms: u64,
    /// Length in ms.
    pub duration_ms: u64,
    /// Demand during the phase, bit/s.
    pub rate_bps: u64,
}

/// A job's demand on a link over one training iteration (its profile).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CircleJob {
    /// Iteration time in ms (the perimeter of the job's own circle).
    pub iteration_ms: u64,
    /// Its communication phases; demand is 0 outside them, and overlapping phases add up.
    pub phases: Vec<Phase>,
}

impl CircleJob {
    /// Demand at `t_ms` (any time; taken modulo the iteration), bit/s.
    pub fn demand_bps(&self, t_ms: u64) -> u64 {
        if self.iteration_ms == 0 {
            return 0;
        }
        let t = t_ms % self.iteration_ms;
        self.phases
            .iter()
            .filter(|p| mod_sub(t, p.start_ms, self.iteration_ms) < p.duration_ms)
            .fold(0u64, |a, p| a.saturating_add(p.rate_bps))
    }
}

/// `(a − b) mod m` without overflow, for `m > 0`.
fn mod_sub(a: u64, b: u64, m: u64) -> u64 {
    let (a, b) = (a % m, b % m);
    if a >= b {
        a - b
    } else {
        m - (b - a)
    }
}

fn check_jobs(jobs: &[CircleJob]) -> Result<(), SchedError> {
    for (index, j) in jobs.iter().enumerate() {
        if j.iteration_ms == 0 {
            return Err(SchedError::InvalidJob {
                index,
                reason: "iteration_ms is 0",
            });
        }
        if j.phases
            .iter()
            .any(|p| p.start_ms >= j.iteration_ms || p.duration_ms > j.iteration_ms)
        {
            return Err(SchedError::InvalidJob {
                index,
                reason: "a phase starts after the iteration or is longer than it",
            });
        }
    }
    Ok(())
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Perimeter of the unified circle of `jobs`: the LCM of their iteration times, in ms. Refuses
/// an empty set, a job without a valid profile, and an LCM above [`MAX_PERIMETER_MS`].
pub fn unified_perimeter_ms(jobs: &[CircleJob]) -> Result<u64, SchedError> {
    check_jobs(jobs)?;
    if jobs.is_empty() {
        return Err(SchedError::InvalidJob {
            index: 0,
            reason: "no job",
        });
    }
    let mut p = 1u64;
    for j in jobs {
        p = (p / gcd(p, j.iteration_ms))
            .checked_mul(j.iteration_ms)
            .filter(|p| *p <= MAX_PERIMETER_MS)
            .ok_or(SchedError::Overflow {
                what: "unified circle perimeter (LCM of iteration times)",
            })?;
    }
    Ok(p)
}

/// The compatibility score of `jobs` on a link of `capacity_bps` when job j is delayed by
/// `shifts_ms[j]`, sampled at `angles` equally spaced points of the unified circle.
pub fn compatibility_score(
    jobs: &[CircleJob],
    shifts_ms: &[u64],
    capacity_bps: u64,
    angles: usize,
) -> Result<f64, SchedError> {
    let perimeter = unified_perimeter_ms(jobs)?;
    if shifts_ms.len() != jobs.len() {
        return Err(SchedError::LengthMismatch {
            what: "shifts_ms",
            expected: jobs.len(),
            got: shifts_ms.len(),
        });
    }
    if capacity_bps == 0 {
        return Err(SchedError::InvalidParameter {
            name: "capacity_bps",
            value: capacity_bps,
        });
    }
    if angles == 0 {
        return Err(SchedError::InvalidParameter {
            name: "angles",
            value: 0,
        });
    }
    Ok(score(jobs, shifts_ms, capacity_bps, angles, perimeter))
}

fn score(
    jobs: &[CircleJob],
    shifts_ms: &[u64],
    capacity_bps: u64,
    angles: usize,
    perimeter: u64,
) -> f64 {
    let mut excess = 0f64;
    for a in 0..angles as u128 {
        let t = u64::try_from(a * u128::from(perimeter) / angles as u128).unwrap_or(0);
        let demand = jobs.iter().zip(shifts_ms).fold(0u64, |d, (j, s)| {
            // bw_j(α − ω_j): the job delayed by s is at its own time t − s.
            let own = mod_sub(t, *s, j.iteration_ms);
            d.saturating_add(j.demand_bps(own))
        });
        excess += demand.saturating_sub(capacity_bps) as f64;
    }
    1.0 - excess / angles as f64 / capacity_bps as f64
}

/// The result of [`best_shifts`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rotation {
    /// Delay of each job on the unified circle, ms; the first job is the reference (0), and
    /// each shift is below its job's iteration time.
    pub shifts_ms: Vec<u64>,
    /// The compatibility score with these shifts.
    pub score: f64,
    /// True when every combination was tried; false when the search was coordinate-wise.
    pub exhaustive: bool,
}

/// Largest number of shift combinations tried exhaustively by [`best_shifts`].
pub const EXHAUSTIVE_LIMIT: u128 = 20_000;

/// Rotations maximising the compatibility score, searching shifts in steps of `step_ms`
/// (job 0 fixed at 0): every combination when there are at most [`EXHAUSTIVE_LIMIT`], else
/// coordinate ascent (each job's best shift with the others fixed, until nothing improves).
/// Ties keep the smaller shifts.
pub fn best_shifts(
    jobs: &[CircleJob],
    capacity_bps: u64,
    angles: usize,
    step_ms: u64,
) -> Result<Rotation, SchedError> {
    let zero = vec![0; jobs.len()];
    let base = compatibility_score(jobs, &zero, capacity_bps, angles)?;
    if step_ms == 0 {
        return Err(SchedError::InvalidParameter {
            name: "step_ms",
            value: 0,
        });
    }
    let perimeter = unified_perimeter_ms(jobs)?;
    let choices: Vec<u64> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            if i == 0 {
                1
            } else {
                j.iteration_ms.div_ceil(step_ms)
            }
        })
        .collect();
    let combos = choices
        .iter()
        .fold(1u128, |a, c| a.saturating_mul(u128::from(*c)));
    let mut best = Rotation {
        shifts_ms: zero,
        score: base,
        exhaustive: combos <= EXHAUSTIVE_LIMIT,
    };
    if best.exhaustive {
        let mut idx = vec![0u64; jobs.len()];
        loop {
            // Odometer over jobs 1.. .
            let mut i = 1;
            while i < jobs.len()
                && idx
                    .get(i)
                    .zip(choices.get(i))
                    .is_some_and(|(x, c)| x + 1 >= *c)
            {
                idx[i] = 0;
                i += 1;
            }
            if i >= jobs.len() {
                break;
            }
            idx[i] += 1;
            let shifts: Vec<u64> = idx.iter().map(|x| x * step_ms).collect();
            let s = score(jobs, &shifts, capacity_bps, angles, perimeter);
            if s > best.score {
                best = Rotation {
                    shifts_ms: shifts,
                    score: s,
                    exhaustive: true,
                };
            }
        }
        return Ok(best);
    }
    let mut improved = true;
    while improved {
        improved = false;
        for j in 1..jobs.len() {
            let mut shifts = best.shifts_ms.clone();
            for x in 0..choices.get(j).copied().unwrap_or(1) {
                if let Some(s) = shifts.get_mut(j) {
                    *s = x * step_ms;
                }
                let s = score(jobs, &shifts, capacity_bps, angles, perimeter);
                if s > best.score {
                    best = Rotation {
                        shifts_ms: shifts.clone(),
                        score: s,
                        exhaustive: false,
                    };
                    improved = true;
                }
            }
        }
    }
    Ok(best)
}

/// A job in the Affinity graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub u32);

/// An edge of the Affinity graph: job `job` crosses link `link`, where its time shift is
/// `shift_ms` (t_j^l, from the link's rotation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AffinityEdge {
    /// The job.
    pub job: JobId,
    /// The link, shared with at least one other job.
    pub link: LinkId,
    /// t_j^l in ms.
    pub shift_ms: u64,
}

/// The unique time shifts found by [`affinity_time_shifts`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AffinityShifts {
    /// One time shift per job, ms, below its iteration time.
    pub shifts_ms: BTreeMap<JobId, u64>,
    /// Edges (job, link) whose shift disagreed with the one already found for the job (only
    /// possible when the graph has a loop).
    pub conflicts: Vec<(JobId, LinkId)>,
}

/// Cassini's Alg. 1 (BFS over the Affinity graph): one time shift per job from the per-link
/// shifts `edges`. `iteration_ms` gives every job's iteration time; refuses an edge whose job
/// has none (or 0).
pub fn affinity_time_shifts(
    edges: &[AffinityEdge],
    iteration_ms: &BTreeMap<JobId, u64>,
) -> Result<AffinityShifts, SchedError> {
    let iter_of = |j: JobId| -> Result<u64, SchedError> {
        iteration_ms
            .get(&j)
            .copied()
            .filter(|t| *t > 0)
            .ok_or(SchedError::InvalidJob {
                index: j.0 as usize,
                reason: "no iteration time for this job",
            })
    };
    let mut by_job: BTreeMap<JobId, Vec<(LinkId, u64)>> = BTreeMap::new();
    let mut by_link: BTreeMap<LinkId, Vec<(JobId, u64)>> = BTreeMap::new();
    for e in edges {
        let it = iter_of(e.job)?;
        by_job
            .entry(e.job)
            .or_default()
            .push((e.link, e.shift_ms % it));
        by_link
            .entry(e.link)
            .or_default()
            .push((e.job, e.shift_ms % it));
    }
    let mut out = AffinityShifts::default();
    let mut conflicts = BTreeSet::new();
    for &root in by_job.keys() {
        if out.shifts_ms.contains_key(&root) {
            continue;
        }
        out.shifts_ms.insert(root, 0);
        let mut queue = VecDeque::from([root]);
        while let Some(j) = queue.pop_front() {
            let tj = out.shifts_ms.get(&j).copied().unwrap_or(0);
            for &(l, tjl) in by_job.get(&j).into_iter().flatten() {
                for &(k, tkl) in by_link.get(&l).into_iter().flatten() {
                    if k == j {
                        continue;
                    }
                    let ik = iter_of(k)?;
                    // t_k = (t_j − t_j^l + t_k^l) mod iter_k, in u128 to stay non-negative.
                    let tk = ((u128::from(tj) + u128::from(ik) * 2 + u128::from(tkl)
                        - u128::from(tjl % ik))
                        % u128::from(ik)) as u64;
                    match out.shifts_ms.get(&k) {
                        None => {
                            out.shifts_ms.insert(k, tk);
                            queue.push_back(k);
                        }
                        Some(old) if *old != tk => {
                            conflicts.insert((k, l));
                        }
                        Some(_) => {}
                    }
                }
            }
        }
    }
    out.conflicts = conflicts.into_iter().collect();
    Ok(out)
}

/// True when the Affinity graph of `edges` (jobs and links as nodes, one edge per (job, link)
/// pair; a pair listed twice counts once) has a loop. Cassini's BFS ([`affinity_time_shifts`])
/// is correct only on loop-free graphs, so Cassini discards placement candidates whose graph has
/// one (thesis Sec. 4.4.2, Alg. 2 lines 13-15). Union-find over the nodes: an edge between two
/// nodes already connected closes a loop.
pub fn affinity_has_loop(edges: &[AffinityEdge]) -> bool {
    let mut node: BTreeMap<(bool, u32), usize> = BTreeMap::new();
    let mut parent: Vec<usize> = Vec::new();
    let mut seen: BTreeSet<(JobId, LinkId)> = BTreeSet::new();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while let Some(&p) = parent.get(x) {
            if p == x {
                break;
            }
            let gp = parent.get(p).copied().unwrap_or(p);
            if let Some(slot) = parent.get_mut(x) {
                *slot = gp;
            }
            x = p;
        }
        x
    }
    let mut id = |key: (bool, u32), parent: &mut Vec<usize>| -> usize {
        *node.entry(key).or_insert_with(|| {
            parent.push(parent.len());
            parent.len() - 1
        })
    };
    for e in edges {
        if !seen.insert((e.job, e.link)) {
            continue;
        }
        let a = id((false, e.job.0), &mut parent);
        let b = id((true, e.link.0), &mut parent);
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        if ra == rb {
            return true;
        }
        if let Some(slot) = parent.get_mut(ra) {
            *slot = rb;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(iteration_ms: u64, start_ms: u64, duration_ms: u64, rate_bps: u64) -> CircleJob {
        CircleJob {
            iteration_ms,
            phases: vec![Phase {
                start_ms,
                duration_ms,
                rate_bps,
            }],
        }
    }

    #[test]
    fn demand_wraps_around_the_iteration() {
        let j = job(100, 90, 20, 5);
        assert_eq!(j.demand_bps(95), 5);
        assert_eq!(j.demand_bps(5), 5);
        assert_eq!(j.demand_bps(10), 0);
        assert_eq!(j.demand_bps(195), 5);
        let huge = job(u64::MAX, u64::MAX - 1, 10, 1);
        assert_eq!(huge.demand_bps(u64::MAX - 1), 1);
        assert_eq!(huge.demand_bps(3), 1);
        assert_eq!(huge.demand_bps(9), 0);
        assert_eq!(mod_sub(1, 3, 5), 3);
    }

    #[test]
    fn two_half_duty_jobs_interleave_perfectly() {
        // Each job uses the whole link half of its 100 ms iteration.
        let jobs = vec![job(100, 0, 50, 10), job(100, 0, 50, 10)];
        let together = compatibility_score(&jobs, &[0, 0], 10, 100).unwrap();
        assert!((together - 0.5).abs() < 1e-9, "{together}");
        let r = best_shifts(&jobs, 10, 100, 10).unwrap();
        assert_eq!(r.shifts_ms, vec![0, 50]);
        assert!((r.score - 1.0).abs() < 1e-9);
        assert!(r.exhaustive);
    }

    #[test]
    fn unified_circle_is_the_lcm() {
        let jobs = vec![job(40, 0, 10, 1), job(60, 0, 10, 1)];
        assert_eq!(unified_perimeter_ms(&jobs).unwrap(), 120);
        assert!(unified_perimeter_ms(&[]).is_err());
        assert_eq!(
            unified_perimeter_ms(&[job(0, 0, 0, 1)]),
            Err(SchedError::InvalidJob {
                index: 0,
                reason: "iteration_ms is 0"
            })
        );
        assert!(
            unified_perimeter_ms(&[job(86_400_000, 0, 1, 1), job(86_399_999, 0, 1, 1)]).is_err()
        );
        assert!(compatibility_score(&jobs, &[0], 1, 10).is_err());
        let e = compatibility_score(&jobs, &[0, 0], 0, 10).unwrap_err();
        assert_eq!(e.to_string(), "capacity_bps = 0 is out of range");
        assert!(best_shifts(&jobs, 1, 10, 0)
            .unwrap_err()
            .to_string()
            .contains("step_ms = 0"));
        // Coordinate ascent for many combinations still finds a compatible layout.
        let many = vec![
            job(100, 0, 25, 10),
            job(100, 0, 25, 10),
            job(100, 0, 25, 10),
            job(100, 0, 25, 10),
        ];
        let r = best_shifts(&many, 10, 100, 1).unwrap();
        assert!(!r.exhaustive);
        assert!((r.score - 1.0).abs() < 1e-9, "{r:?}");
    }

    #[test]
    fn affinity_bfs_gives_unique_shifts() {
        // j1 shares l1 with j2 and j2 shares l2 with j3 (thesis Fig. 4.7).
        let (j1, j2, j3) = (JobId(1), JobId(2), JobId(3));
        let edges = [
            AffinityEdge {
                job: j1,
                link: LinkId(1),
                shift_ms: 0,
            },
            AffinityEdge {
                job: j2,
                link: LinkId(1),
                shift_ms: 30,
            },
            AffinityEdge {
                job: j2,
                link: LinkId(2),
                shift_ms: 10,
            },
            AffinityEdge {
                job: j3,
                link: LinkId(2),
                shift_ms: 50,
            },
        ];
        let iters = BTreeMap::from([(j1, 100), (j2, 100), (j3, 80)]);
        let s = affinity_time_shifts(&edges, &iters).unwrap();
        // t2 = 0 − 0 + 30; t3 = 30 − 10 + 50 = 70.
        assert_eq!(s.shifts_ms, BTreeMap::from([(j1, 0), (j2, 30), (j3, 70)]));
        assert!(s.conflicts.is_empty());
        // A loop whose shifts disagree is reported.
        let mut looped = edges.to_vec();
        looped.push(AffinityEdge {
            job: j1,
            link: LinkId(3),
            shift_ms: 0,
        });
        looped.push(AffinityEdge {
            job: j3,
            link: LinkId(3),
            shift_ms: 5,
        });
        let s = affinity_time_shifts(&looped, &iters).unwrap();
        assert!(s.conflicts.contains(&(j3, LinkId(2))), "{s:?}");
        assert!(!affinity_has_loop(&edges));
        assert!(affinity_has_loop(&looped));
        // A pair listed twice is one edge, not a loop.
        assert!(!affinity_has_loop(&[edges[0], edges[0], edges[1]]));
        let missing = BTreeMap::from([(j1, 100)]);
        assert!(affinity_time_shifts(&edges, &missing).is_err());
    }
}
