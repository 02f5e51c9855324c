// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! A histogram of decision times (log-spaced buckets), for the policies' timing reports.

use serde::Serialize;

/// Histogram of decision times, log-spaced buckets from 0.1 µs (20 per decade, up to 100 s).
#[derive(Clone, Debug, Default, Serialize)]
pub struct TimeHist {
    /// Counts per bucket.
    pub buckets: Vec<u64>,
    /// Number of samples.
    pub count: u64,
    /// Sum of samples, µs.
    pub sum_us: f64,
}

impl TimeHist {
    const PER_DECADE: f64 = 20.0;
    const BUCKETS: usize = 180;

    /// Adds one sample, µs.
    pub fn add(&mut self, us: f64) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; Self::BUCKETS];
        }
        let b = (((us.max(0.1) / 0.1).log10()) * Self::PER_DECADE) as usize;
        let last = self.buckets.len() - 1;
        self.buckets[b.min(last)] += 1;
        self.count += 1;
        self.sum_us += us;
    }

    /// Upper edge of bucket `b`, µs.
    pub fn edge_us(b: usize) -> f64 {
        0.1 * 10f64.powf((b + 1) as f64 / Self::PER_DECADE)
    }

    /// The q-quantile (0..=1), µs (bucket upper edge).
    pub fn quantile_us(&self, q: f64) -> f64 {
        let target = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (b, c) in self.buckets.iter().enumerate() {
            acc += c;
            if acc >= target {
                return Self::edge_us(b);
            }
        }
        0.0
    }

    /// The CDF as (µs, fraction) points at the non-empty buckets.
    pub fn cdf(&self) -> Vec<(f64, f64)> {
        let mut acc = 0;
        let mut v = Vec::new();
        for (b, c) in self.buckets.iter().enumerate() {
            if *c > 0 {
                acc += c;
                v.push((Self::edge_us(b), acc as f64 / self.count.max(1) as f64));
            }
        }
        v
    }
}
