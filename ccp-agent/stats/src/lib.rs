// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Order statistics shared by the MLTCP tools: the one nearest-rank quantile that the traffic
//! emulator (`trainemu`), the cluster simulator (`mlcc-sim`), the CCP test agent's round-trip
//! summary and the scheduling benches report, so that their p50/p90/p99 mean the same thing.
//!
//! Values are ordered by [`f64::total_cmp`], so NaN never panics: a positive NaN sorts above
//! every number (and so shows up in the top quantiles, where it is visible), a negative NaN below.
//!
//! `no_std` and dependency-free (sorting uses `core`'s unstable sort), so any crate may use it.
//! It is not compiled into the kernel module: the kernel has no floating point. The feature
//! `intervals` adds [`intervals`]: means over seeds with their 95 % Student-t intervals (std,
//! statrs, serde), the one implementation behind trainemu's and mlcc-sim's reported intervals.
#![cfg_attr(not(feature = "intervals"), no_std)]
#![deny(missing_docs)]

/// Sorts `v` in place into the order the quantile functions expect ([`f64::total_cmp`]:
/// -NaN < -inf < … < -0.0 < +0.0 < … < +inf < +NaN).
pub fn sort(v: &mut [f64]) {
    v.sort_unstable_by(f64::total_cmp);
}

/// The nearest-rank `q`-quantile (`q` in 0..=1; 0.99 for p99) of `sorted`, which must already be
/// in [`sort`]'s order: the value at rank `ceil(q * n)` (1-based), clamped to `1..=n`, so `q = 0`
/// gives the minimum and `q = 1` the maximum. `None` when `sorted` is empty. A NaN `q` gives the
/// minimum; nothing here panics.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    // ceil by hand (`f64::ceil` is not in `core`); `as usize` truncates toward zero and
    // saturates: a NaN or negative rank becomes 0, a huge one usize::MAX.
    let x = q * n as f64;
    let t = x as usize;
    let rank = if (t as f64) < x {
        t.saturating_add(1)
    } else {
        t
    }
    .clamp(1, n);
    sorted.get(rank - 1).copied()
}

/// The nearest-rank `q`-quantile (`q` in 0..=1) of `v`, which this sorts in place ([`sort`]),
/// as [`quantile_sorted`]. `None` when `v` is empty.
pub fn quantile(v: &mut [f64], q: f64) -> Option<f64> {
    sort(v);
    quantile_sorted(v, q)
}

#[cfg(feature = "intervals")]
pub mod intervals;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let mut v = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(quantile(&mut v, 0.5), Some(3.0));
        assert_eq!(v, [1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(quantile_sorted(&v, 0.0), Some(1.0));
        assert_eq!(quantile_sorted(&v, 0.2), Some(1.0));
        assert_eq!(quantile_sorted(&v, 0.21), Some(2.0));
        assert_eq!(quantile_sorted(&v, 1.0), Some(5.0));
        assert_eq!(quantile_sorted(&v, 7.0), Some(5.0));
        assert_eq!(quantile_sorted(&[], 0.5), None);
        let hundred: [f64; 100] = core::array::from_fn(|i| (i + 1) as f64);
        assert_eq!(quantile_sorted(&hundred, 0.99), Some(99.0));
        assert_eq!(quantile_sorted(&hundred, 0.9), Some(90.0));
    }

    #[test]
    fn nan_never_panics() {
        let mut v = [3.0, f64::NAN, 1.0, -f64::NAN, 2.0];
        assert_eq!(quantile(&mut v, 0.5), Some(2.0));
        assert!(quantile_sorted(&v, 1.0).unwrap().is_nan());
        assert!(quantile_sorted(&v, 0.0).unwrap().is_nan());
        assert_eq!(quantile_sorted(&[1.0, 2.0, 3.0], f64::NAN), Some(1.0));
        let mut all_nan = [f64::NAN; 4];
        assert!(quantile(&mut all_nan, 0.99).unwrap().is_nan());
    }
}
