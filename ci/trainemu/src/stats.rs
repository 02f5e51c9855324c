// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Statistics over seeds (pure functions, no I/O): means with 95 % Student-t confidence
//! intervals, paired comparisons of two congestion controls over the same seeds, and
//! distribution summaries of the interleaving iteration.
//!
//! Every claim of the report is one of these: a mean over seeds with its interval, or a paired
//! difference (same seed = same compute draws and start offsets under both congestion controls)
//! with its interval. The means and their t intervals are [`mlcc_stats::intervals`], shared with
//! the cluster simulator.

use serde::Serialize;

pub use mlcc_stats::intervals::{ci95, mean, Interval, LEVEL};

/// What a paired interval says about "candidate − base" (negative = candidate faster).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval is below 0: the candidate is faster; the interval excludes a loss.
    Faster,
    /// The whole interval is above 0: the candidate is slower; the interval excludes a gain.
    Slower,
    /// The interval contains 0 (or there are too few seeds for one).
    IncludesZero,
}

impl Verdict {
    /// The words of the report.
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Faster => "faster, excludes a loss",
            Verdict::Slower => "slower, excludes a gain",
            Verdict::IncludesZero => "includes 0",
        }
    }
}

/// Paired comparison of a candidate against a base over the seeds both have.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Paired {
    /// The seeds paired (present in both, in increasing order).
    pub seeds: Vec<u64>,
    /// Mean and interval of the per-seed relative difference candidate / base − 1 (fraction;
    /// negative = candidate's iterations shorter).
    pub rel_diff: Interval,
    /// Mean of the per-seed ratio base / candidate (the speedup of the candidate).
    pub mean_speedup: f64,
    /// What the interval of `rel_diff` says.
    pub verdict: Verdict,
}

/// Pairs `candidate` and `base` (per seed: a value, e.g. the mean iteration time) by seed and
/// compares them. Seeds present in only one side, or with a non-positive or NaN base, are left
/// out. None when no seed pairs.
pub fn paired(candidate: &[(u64, f64)], base: &[(u64, f64)]) -> Option<Paired> {
    let mut seeds = Vec::new();
    let mut d = Vec::new();
    let mut sp = Vec::new();
    let mut c: Vec<(u64, f64)> = candidate.to_vec();
    c.sort_by_key(|x| x.0);
    for (s, x) in c {
        let Some(&(_, b)) = base.iter().find(|(t, _)| *t == s) else {
            continue;
        };
        if !(b > 0.0 && x > 0.0) {
            continue;
        }
        seeds.push(s);
        d.push(x / b - 1.0);
        sp.push(b / x);
    }
    let rel = ci95(&d)?;
    let verdict = match (rel.lo, rel.hi) {
        (_, Some(hi)) if hi < 0.0 => Verdict::Faster,
        (Some(lo), _) if lo > 0.0 => Verdict::Slower,
        _ => Verdict::IncludesZero,
    };
    Some(Paired {
        seeds,
        rel_diff: rel,
        mean_speedup: mean(&sp).unwrap_or(f64::NAN),
        verdict,
    })
}

/// p-th percentile (0..=100) by nearest rank ([`mlcc_stats::quantile`] of a copy); NaN sorts
/// above every number (`total_cmp`) and never panics. None when empty.
pub fn percentile(v: &[f64], p: f64) -> Option<f64> {
    mlcc_stats::quantile(&mut v.to_vec(), p / 100.0)
}

/// The interleaving iterations of a congestion control over its seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InterleaveDist {
    /// Seeds counted.
    pub n: usize,
    /// Seeds whose run never interleaved.
    pub never: usize,
    /// Median iteration (nearest rank; None = "never": at least half the seeds never did).
    pub median: Option<u32>,
    /// 90th percentile (None = "never").
    pub p90: Option<u32>,
    /// Share of seeds interleaved at iteration ≤ 15 ("never" counts as not).
    pub within_15: f64,
    /// Share of seeds interleaved at iteration ≤ 30.
    pub within_30: f64,
}

/// Summarises per-seed interleaving iterations (None = never interleaved). None when empty.
pub fn interleave_dist(v: &[Option<u32>]) -> Option<InterleaveDist> {
    if v.is_empty() {
        return None;
    }
    let x: Vec<f64> = v
        .iter()
        .map(|k| k.map(f64::from).unwrap_or(f64::INFINITY))
        .collect();
    let q = |p| {
        percentile(&x, p)
            .filter(|y| y.is_finite())
            .map(|y| y as u32)
    };
    let within =
        |k: u32| v.iter().filter(|i| i.is_some_and(|i| i <= k)).count() as f64 / v.len() as f64;
    Some(InterleaveDist {
        n: v.len(),
        never: v.iter().filter(|i| i.is_none()).count(),
        median: q(50.0),
        p90: q(90.0),
        within_15: within(15),
        within_30: within(30),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn paired_comparison_matches_seeds_and_judges_the_interval() {
        // Candidate 10 % faster on every seed, with a little noise: interval below 0.
        let base: Vec<(u64, f64)> = (1..=10).map(|s| (s, 100.0 + s as f64)).collect();
        let cand: Vec<(u64, f64)> = base
            .iter()
            .map(|&(s, b)| (s, b * (0.9 + 0.002 * (s % 3) as f64)))
            .collect();
        let p = paired(&cand, &base).unwrap();
        assert_eq!(p.seeds, (1..=10).collect::<Vec<_>>());
        assert!(close(p.rel_diff.mean, -0.098, 1e-3), "{p:?}");
        assert_eq!(p.verdict, Verdict::Faster);
        assert!(p.mean_speedup > 1.1);
        // Reversed: slower.
        assert_eq!(paired(&base, &cand).unwrap().verdict, Verdict::Slower);
        // Differences of both signs: includes 0.
        let mixed: Vec<(u64, f64)> = base
            .iter()
            .map(|&(s, b)| (s, if s % 2 == 0 { b * 1.05 } else { b * 0.95 }))
            .collect();
        let p = paired(&mixed, &base).unwrap();
        assert_eq!(p.verdict, Verdict::IncludesZero);
        assert!(p.rel_diff.lo.unwrap() < 0.0 && p.rel_diff.hi.unwrap() > 0.0);
        // Only common seeds pair (the candidate misses seed 10, the base has no seed 11), and
        // the pairing is by seed, not by position.
        let mut c: Vec<(u64, f64)> = cand[..9].to_vec();
        c.push((11, 1.0));
        c.reverse();
        let p = paired(&c, &base).unwrap();
        assert_eq!(p.seeds, (1..=9).collect::<Vec<_>>());
        assert!(close(p.rel_diff.mean, -0.098, 1e-3));
        // A single pair: no interval, no claim.
        let p = paired(&[(1, 90.0)], &[(1, 100.0)]).unwrap();
        assert!(close(p.rel_diff.mean, -0.1, 1e-12));
        assert_eq!(p.verdict, Verdict::IncludesZero);
        assert_eq!(paired(&[(1, 90.0)], &[(2, 100.0)]), None);
    }

    #[test]
    fn percentile_never_panics_on_nan() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&[3.0], 99.0), Some(3.0));
        assert_eq!(percentile(&[], 50.0), None);
        let w = [2.0, f64::NAN, 1.0];
        assert_eq!(percentile(&w, 50.0), Some(2.0));
        assert!(percentile(&w, 100.0).unwrap().is_nan());
    }

    #[test]
    fn interleaving_distribution_counts_never_as_not_within() {
        let v = [
            Some(3),
            Some(5),
            Some(7),
            Some(12),
            Some(16),
            Some(22),
            Some(29),
            Some(40),
            None,
            None,
        ];
        let d = interleave_dist(&v).unwrap();
        assert_eq!(d.n, 10);
        assert_eq!(d.never, 2);
        assert_eq!(d.median, Some(16));
        assert_eq!(d.p90, None, "9th of 10 is never");
        assert!(close(d.within_15, 0.4, 1e-12));
        assert!(close(d.within_30, 0.7, 1e-12));
        let d = interleave_dist(&[None, None, Some(1)]).unwrap();
        assert_eq!(d.median, None);
        assert_eq!(interleave_dist(&[]), None);
    }
}
