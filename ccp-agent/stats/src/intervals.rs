// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Means over seeds with their two-sided 95 % Student-t confidence intervals (feature
//! `intervals`): the intervals that trainemu's report and mlcc-sim's fidelity and gain lines
//! print. t quantiles come from statrs ([`statrs::distribution::StudentsT`]).

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Confidence level of every interval.
pub const LEVEL: f64 = 0.95;

/// Arithmetic mean (None when empty).
pub fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Sample standard deviation (n − 1 denominator; None below 2 values).
pub fn sd(v: &[f64]) -> Option<f64> {
    let m = mean(v)?;
    (v.len() >= 2)
        .then(|| (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt())
}

/// The `p` quantile (0 < p < 1) of Student's t distribution with `df` degrees of freedom.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df).expect("df > 0").inverse_cdf(p)
}

/// A mean over `n` values with its two-sided [`LEVEL`] t interval (`lo`/`hi` absent for n < 2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// Number of values.
    pub n: usize,
    /// Their mean.
    pub mean: f64,
    /// Sample standard deviation (None for n < 2).
    pub sd: Option<f64>,
    /// Lower end of the interval.
    pub lo: Option<f64>,
    /// Upper end of the interval.
    pub hi: Option<f64>,
}

impl Interval {
    /// Half width of the interval.
    pub fn half(&self) -> Option<f64> {
        Some((self.hi? - self.lo?) / 2.0)
    }
}

/// Mean of `v` with its 95 % interval mean ± t_{0.975, n−1} · sd / √n. NaN values are
/// dropped (they would poison every bound). None when no value is left.
pub fn ci95(v: &[f64]) -> Option<Interval> {
    let v: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    let m = mean(&v)?;
    let s = sd(&v);
    let half = s
        .map(|s| t_quantile(0.5 + LEVEL / 2.0, (v.len() - 1) as f64) * s / (v.len() as f64).sqrt());
    Some(Interval {
        n: v.len(),
        mean: m,
        sd: s,
        lo: half.map(|h| m - h),
        hi: half.map(|h| m + h),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        assert!(close(t_quantile(0.975, 9.0), 2.262157, 1e-5));
        assert!(close(t_quantile(0.975, 1.0), 12.706205, 1e-4));
        assert!(close(t_quantile(0.975, 4.0), 2.776445, 1e-5));
        assert!(close(t_quantile(0.975, 1000.0), 1.962339, 1e-4));
    }

    #[test]
    fn interval_of_ten_values_is_mean_plus_minus_2262_se() {
        // 1..=10: mean 5.5, sd √(82.5/9) = 3.02765, se 0.957427, half = 2.262157 · se = 2.165852.
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let i = ci95(&v).unwrap();
        assert_eq!(i.n, 10);
        assert!(close(i.mean, 5.5, 1e-12));
        assert!(close(i.sd.unwrap(), 3.0276504, 1e-6));
        assert!(close(i.half().unwrap(), 2.165852, 1e-5), "{i:?}");
        assert!(close(i.lo.unwrap(), 3.334148, 1e-5) && close(i.hi.unwrap(), 7.665852, 1e-5));
        // Two values 1 and 3: sd √2, half = 12.7062 · √2/√2 = 12.7062.
        let i = ci95(&[1.0, 3.0]).unwrap();
        assert!(close(i.half().unwrap(), 12.706205, 1e-4));
        // One value: a mean without interval; none: nothing; NaN dropped.
        let i = ci95(&[4.0]).unwrap();
        assert_eq!((i.mean, i.lo, i.hi, i.sd), (4.0, None, None, None));
        assert_eq!(ci95(&[]), None);
        assert_eq!(ci95(&[f64::NAN, 2.0, 4.0]).unwrap().n, 2);
    }
}
