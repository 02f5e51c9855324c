// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `trainemu compare`: are two results directories of the same scenario the same measurement?
//!
//! The virtual-clock testbed (`ci/vm-run --clock virtual`) should give the same iteration times
//! for the same scenario, congestion control and seed, however busy the host was. This module
//! pairs every (seed, run, job) mean iteration time of two analyses ([`crate::report::analyse`])
//! and reports the largest relative difference, so a test can hold the instrument's
//! repeatability to a tolerance (issue "virtual-time testbed": 0.5 %).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::report::Report;

/// One measured quantity: (seed, run, job) → mean iteration time in ms. Solo runs appear as
/// run `solo` (their mean solo iteration time, the ideal C + M).
pub type Key = (u64, String, String);

/// The per-(seed, run, job) mean iteration times (ms) of an analysis.
pub fn job_means(r: &Report) -> BTreeMap<Key, f64> {
    let mut out = BTreeMap::new();
    for s in &r.per_seed {
        let seed = s.seed.unwrap_or(0);
        for (job, solo) in &s.solo {
            out.insert((seed, "solo".to_string(), job.clone()), solo.ideal_ms);
        }
        for row in &s.rows {
            out.insert((seed, row.cc.clone(), row.job.clone()), row.mean_ms);
        }
    }
    out
}

/// One paired quantity.
#[derive(Debug, Clone, PartialEq)]
pub struct Diff {
    /// What was compared.
    pub key: Key,
    /// Mean iteration time in the first directory, ms.
    pub a_ms: f64,
    /// Mean iteration time in the second directory, ms.
    pub b_ms: f64,
    /// |a − b| / min(a, b), as a fraction (symmetric in a and b).
    pub rel: f64,
}

/// The comparison of two analyses.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Every quantity present in both, in key order.
    pub diffs: Vec<Diff>,
    /// Quantities present in only one of the two (a run that failed, a seed not run).
    pub unpaired: Vec<Key>,
}

impl Comparison {
    /// The largest relative difference, or None when nothing was paired.
    pub fn max_rel(&self) -> Option<f64> {
        self.diffs.iter().map(|d| d.rel).reduce(f64::max)
    }

    /// Whether every quantity is paired and within `tolerance` (a fraction, e.g. 0.005).
    pub fn within(&self, tolerance: f64) -> bool {
        self.unpaired.is_empty()
            && !self.diffs.is_empty()
            && self
                .diffs
                .iter()
                .all(|d| d.rel.is_finite() && d.rel <= tolerance)
    }

    /// A readable table: one line per quantity, then the verdict.
    pub fn text(&self, tolerance: f64) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "seed run job: A ms, B ms, |A-B|/min");
        for d in &self.diffs {
            let (seed, run, job) = &d.key;
            let _ = writeln!(
                o,
                "s{seed} {run} {job}: {:.3}, {:.3}, {:.4} %{}",
                d.a_ms,
                d.b_ms,
                100.0 * d.rel,
                if d.rel > tolerance { "  OVER" } else { "" }
            );
        }
        for (seed, run, job) in &self.unpaired {
            let _ = writeln!(o, "s{seed} {run} {job}: in only one directory");
        }
        let _ = writeln!(
            o,
            "largest difference {} (tolerance {:.3} %): {}",
            self.max_rel()
                .map(|m| format!("{:.4} %", 100.0 * m))
                .unwrap_or_else(|| "-".into()),
            100.0 * tolerance,
            if self.within(tolerance) {
                "same"
            } else {
                "DIFFERENT"
            }
        );
        o
    }
}

/// Pairs the quantities of `a` and `b` by key.
pub fn compare_means(a: &BTreeMap<Key, f64>, b: &BTreeMap<Key, f64>) -> Comparison {
    let mut diffs = Vec::new();
    let mut unpaired = Vec::new();
    for (k, &av) in a {
        match b.get(k) {
            Some(&bv) => {
                let lo = av.min(bv);
                let rel = if av == bv {
                    0.0
                } else if lo > 0.0 {
                    (av - bv).abs() / lo
                } else {
                    f64::INFINITY
                };
                diffs.push(Diff {
                    key: k.clone(),
                    a_ms: av,
                    b_ms: bv,
                    rel,
                });
            }
            None => unpaired.push(k.clone()),
        }
    }
    unpaired.extend(b.keys().filter(|k| !a.contains_key(*k)).cloned());
    Comparison { diffs, unpaired }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u64, run: &str, job: &str) -> Key {
        (seed, run.to_string(), job.to_string())
    }

    #[test]
    fn identical_directories_are_the_same() {
        let a: BTreeMap<Key, f64> = [(key(1, "cubic", "A"), 650.0), (key(1, "solo", "A"), 600.0)]
            .into_iter()
            .collect();
        let c = compare_means(&a, &a.clone());
        assert_eq!(c.max_rel(), Some(0.0));
        assert!(c.within(0.005));
        assert!(c.text(0.005).ends_with("same\n"));
    }

    #[test]
    fn a_difference_above_the_tolerance_is_reported() {
        let a: BTreeMap<Key, f64> = [(key(1, "cubic", "A"), 650.0), (key(1, "mltcp", "A"), 640.0)]
            .into_iter()
            .collect();
        let b: BTreeMap<Key, f64> = [(key(1, "cubic", "A"), 650.0), (key(1, "mltcp", "A"), 645.0)]
            .into_iter()
            .collect();
        let c = compare_means(&a, &b);
        let m = c.max_rel().unwrap();
        assert!((m - 5.0 / 640.0).abs() < 1e-12, "{m}");
        assert!(!c.within(0.005));
        assert!(c.within(0.01));
        assert!(c.text(0.005).contains("OVER"));
        // Symmetric.
        assert_eq!(compare_means(&b, &a).max_rel(), c.max_rel());
    }

    #[test]
    fn unpaired_quantities_fail_the_comparison() {
        let a: BTreeMap<Key, f64> = [(key(1, "cubic", "A"), 650.0), (key(2, "cubic", "A"), 660.0)]
            .into_iter()
            .collect();
        let b: BTreeMap<Key, f64> = [(key(1, "cubic", "A"), 650.0), (key(1, "reno", "A"), 640.0)]
            .into_iter()
            .collect();
        let c = compare_means(&a, &b);
        assert_eq!(c.unpaired, vec![key(2, "cubic", "A"), key(1, "reno", "A")]);
        assert!(!c.within(1.0));
    }

    #[test]
    fn nothing_paired_is_not_the_same() {
        let e = BTreeMap::new();
        let c = compare_means(&e, &e);
        assert_eq!(c.max_rel(), None);
        assert!(!c.within(0.005));
    }

    #[test]
    fn a_zero_or_nan_mean_is_never_within() {
        let a: BTreeMap<Key, f64> = [(key(1, "cubic", "A"), 0.0)].into_iter().collect();
        let b: BTreeMap<Key, f64> = [(key(1, "cubic", "A"), 5.0)].into_iter().collect();
        assert!(!compare_means(&a, &b).within(0.5));
        let n: BTreeMap<Key, f64> = [(key(1, "cubic", "A"), f64::NAN)].into_iter().collect();
        assert!(!compare_means(&n, &b).within(0.5));
    }
}
