//! How much of MLTCP's intended weighting a run realized: when two jobs' flows leave the same
//! host at once, MLTCP means the flow with the larger F(bytes_ratio) to take the larger share,
//! F_hi / (F_hi + F_lo) in the fluid model of Rajasekaran et al., "MLTCP: Congestion Control for
//! DNN Training" (HotNets '24), Sec. 3, where a Reno flow's share follows its additive increase.
//! With window-based AIMD that share is reached only after several loss cycles; a burst that
//! spans one or two (a long RTT against a short communication phase) keeps close to an even
//! split. This module measures the share each sample interval actually gave, from the
//! per-flow `bytes_acked` and `f_fx` of samples.csv, overall and by how long the two flows had
//! been sending together (the age of the overlap): F's ratio is largest when a second flow joins
//! and the windows take time to follow it (docs/results/mltcp.md, "F's weighting on ECN ports").

use std::collections::BTreeMap;

use serde::Serialize;

use crate::emu::{FlowInfo, Sample};

/// Upper bounds of the overlap-age buckets, µs: [0, 20 ms), [20, 50), [50, 100), [100, 200) and
/// [200 ms, ∞) ([`Sharing::by_age`]).
pub const AGE_EDGES_US: [u64; 4] = [20_000, 50_000, 100_000, 200_000];

/// Number of overlap-age buckets ([`AGE_EDGES_US`] plus the open last one).
pub const AGE_BUCKETS: usize = AGE_EDGES_US.len() + 1;

/// The bucket of an overlap age, µs.
fn age_bucket(age_us: u64) -> usize {
    AGE_EDGES_US.iter().take_while(|&&e| age_us >= e).count()
}

/// A bucket's label, e.g. "20-50 ms", "200+ ms".
pub fn age_label(bucket: usize) -> String {
    let lo = if bucket == 0 {
        0
    } else {
        AGE_EDGES_US[bucket - 1] / 1000
    };
    match AGE_EDGES_US.get(bucket) {
        Some(hi) => format!("{lo}-{} ms", hi / 1000),
        None => format!("{lo}+ ms"),
    }
}

/// Per bucket: sums of f_share, realized share and cwnd share, and the interval count.
type AgeSums = [(f64, f64, f64, usize); AGE_BUCKETS];

/// The buckets' means from their sums (None where nothing was counted).
fn age_means(sums: AgeSums) -> [Option<AgeShare>; AGE_BUCKETS] {
    sums.map(|(f, r, c, k)| {
        (k > 0).then(|| AgeShare {
            f_share: f / k as f64,
            realized_share: r / k as f64,
            cwnd_share: c / k as f64,
            n: k,
        })
    })
}

/// The sharing of the intervals whose overlap age fell in one bucket.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct AgeShare {
    /// Mean F_hi / (F_hi + F_lo) at the intervals' start.
    pub f_share: f64,
    /// Mean delivered share of the higher-F flow.
    pub realized_share: f64,
    /// Mean cwnd_hi / (cwnd_hi + cwnd_lo) at the intervals' start (segments).
    pub cwnd_share: f64,
    /// Intervals counted.
    pub n: usize,
}

/// Intended and realized shares of the higher-F flow, averaged over the sample intervals in
/// which two flows of different jobs from one sending host both delivered at least the
/// threshold ([`weighted_sharing`]) and their F differed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sharing {
    /// Mean F_hi / (F_hi + F_lo) at the interval's start (0.5..1).
    pub f_share: f64,
    /// Mean delivered bytes of the higher-F flow / both flows' delivered bytes in the interval.
    pub realized_share: f64,
    /// Intervals counted.
    pub n: usize,
    /// The same per overlap age ([`AGE_EDGES_US`]): the time since the pair's current run of
    /// qualifying intervals began (an interval in which either flow delivered less than the
    /// threshold ends the run). None for a bucket without an interval.
    pub by_age: [Option<AgeShare>; AGE_BUCKETS],
}

/// One flow at one sample time: (bytes_acked, f_fx, cwnd in segments).
type FlowAt = (u64, u16, u32);

/// The weighted-sharing measurement of one run. `min_bytes`: what each of the two flows must
/// have delivered in an interval to count (both really sending; e.g. 10 % of the link's bytes
/// per sample period). Pairs are flows of different jobs with the same `src_host` (they share
/// that host's uplink and, in the testbed's star, the receiving port). Samples without F (not
/// an MLTCP socket) never count. None when no interval qualified.
pub fn weighted_sharing(flows: &[FlowInfo], samples: &[Sample], min_bytes: u64) -> Option<Sharing> {
    // Per sample time, per flow: (bytes_acked, f_fx, cwnd).
    let mut at: BTreeMap<u64, BTreeMap<usize, FlowAt>> = BTreeMap::new();
    for s in samples {
        if let Some(f) = s.f_fx {
            at.entry(s.t_us)
                .or_default()
                .insert(s.flow, (s.bytes_acked, f, s.cwnd));
        }
    }
    let pairs: Vec<(usize, usize)> = flows
        .iter()
        .enumerate()
        .flat_map(|(i, a)| {
            flows[i + 1..]
                .iter()
                .filter(move |b| b.src_host == a.src_host && b.job != a.job)
                .map(move |b| (a.id, b.id))
        })
        .collect();
    let (mut f_sum, mut r_sum, mut n) = (0.0, 0.0, 0usize);
    let mut age: AgeSums = [(0.0, 0.0, 0.0, 0); AGE_BUCKETS];
    // Per pair: the start of its current run of qualifying intervals, µs.
    let mut since: Vec<Option<u64>> = vec![None; pairs.len()];
    let times: Vec<(&u64, &BTreeMap<usize, FlowAt>)> = at.iter().collect();
    for w in times.windows(2) {
        let ((&t0_us, t0), (_, t1)) = (w[0], w[1]);
        for (&(a, b), start) in pairs.iter().zip(since.iter_mut()) {
            let (Some(&(a0, fa, wa)), Some(&(a1, ..)), Some(&(b0, fb, wb)), Some(&(b1, ..))) =
                (t0.get(&a), t1.get(&a), t0.get(&b), t1.get(&b))
            else {
                *start = None;
                continue;
            };
            let (da, db) = (a1.saturating_sub(a0), b1.saturating_sub(b0));
            if da < min_bytes || db < min_bytes {
                *start = None;
                continue;
            }
            let began = *start.get_or_insert(t0_us);
            if fa == fb {
                continue;
            }
            let (hi_bytes, f_hi, f_lo, w_hi, w_lo) = if fa > fb {
                (da, fa, fb, wa, wb)
            } else {
                (db, fb, fa, wb, wa)
            };
            let f = f64::from(f_hi) / (f64::from(f_hi) + f64::from(f_lo));
            let r = hi_bytes as f64 / (da + db) as f64;
            let c = f64::from(w_hi) / f64::from(w_hi.saturating_add(w_lo).max(1));
            f_sum += f;
            r_sum += r;
            n += 1;
            let k = &mut age[age_bucket(t0_us - began)];
            *k = (k.0 + f, k.1 + r, k.2 + c, k.3 + 1);
        }
    }
    (n > 0).then(|| Sharing {
        f_share: f_sum / n as f64,
        realized_share: r_sum / n as f64,
        n,
        by_age: age_means(age),
    })
}

/// Pools per-seed [`Sharing::by_age`] buckets into one per bucket, weighting each seed's bucket
/// by its interval count (so it equals the measurement over all seeds' intervals at once).
pub fn pool_by_age<'a>(
    runs: impl IntoIterator<Item = &'a [Option<AgeShare>; AGE_BUCKETS]>,
) -> [Option<AgeShare>; AGE_BUCKETS] {
    let mut sum: AgeSums = [(0.0, 0.0, 0.0, 0); AGE_BUCKETS];
    for r in runs {
        for (acc, b) in sum.iter_mut().zip(r.iter()) {
            if let Some(b) = b {
                let k = b.n as f64;
                *acc = (
                    acc.0 + b.f_share * k,
                    acc.1 + b.realized_share * k,
                    acc.2 + b.cwnd_share * k,
                    acc.3 + b.n,
                );
            }
        }
    }
    age_means(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(id: usize, job: &str, src: &str) -> FlowInfo {
        FlowInfo {
            id,
            job: job.into(),
            kind: "ring".into(),
            worker: 0,
            src_host: src.into(),
            dst_host: "h2".into(),
            cc: "mltcp".into(),
            ecn: false,
        }
    }

    fn sample(t_us: u64, flow: usize, bytes_acked: u64, f_fx: Option<u16>) -> Sample {
        Sample {
            t_us,
            flow,
            bytes_acked,
            cwnd: 10,
            srtt_us: 1000,
            retrans: 0,
            bytes_ratio_fx: None,
            f_fx,
        }
    }

    #[test]
    fn measures_the_higher_f_flows_share_against_its_f_share() {
        // A (F 1.5) and B (F 0.5) from h1: intended 0.75; A delivers 60 kB, B 40 kB: 0.6.
        // Flow 2 (job B, from h2) shares no sender with A and never pairs.
        let flows = [flow(0, "A", "h1"), flow(1, "B", "h1"), flow(2, "B", "h2")];
        let samples = [
            sample(0, 0, 0, Some(1536)),
            sample(0, 1, 0, Some(512)),
            sample(0, 2, 0, Some(1024)),
            sample(10_000, 0, 60_000, Some(1536)),
            sample(10_000, 1, 40_000, Some(512)),
            sample(10_000, 2, 90_000, Some(1024)),
        ];
        let s = weighted_sharing(&flows, &samples, 10_000).unwrap();
        assert_eq!(s.n, 1);
        assert!((s.f_share - 0.75).abs() < 1e-12, "{s:?}");
        assert!((s.realized_share - 0.6).abs() < 1e-12, "{s:?}");
    }

    #[test]
    fn intervals_are_bucketed_by_the_age_of_the_overlap() {
        // Both flows send from 0 on; in the interval from 30 ms B delivers too little (the run
        // ends), from 40 ms both send again. The intervals from 0 and 10 ms are 0-20 ms into the
        // overlap, the one from 20 ms 20-50 ms; after the break, the one from 40 ms is young again.
        let flows = [flow(0, "A", "h1"), flow(1, "B", "h1")];
        let mut samples = Vec::new();
        let mut a = 0;
        let mut b = 0;
        for (t, da, db) in [
            (0, 0, 0),
            (10, 60_000, 40_000),
            (20, 70_000, 30_000),
            (30, 60_000, 40_000),
            (40, 90_000, 1_000),
            (50, 50_000, 50_000),
        ] {
            a += da;
            b += db;
            samples.push(Sample {
                cwnd: 30,
                ..sample(t * 1000, 0, a, Some(1536))
            });
            samples.push(Sample {
                cwnd: 10,
                ..sample(t * 1000, 1, b, Some(512))
            });
        }
        let s = weighted_sharing(&flows, &samples, 10_000).unwrap();
        assert_eq!(s.n, 4, "{s:?}");
        let young = s.by_age[0].unwrap();
        // The intervals from 0 ms (0.6), 10 ms (0.7) and, after the break, 40 ms (0.5).
        assert_eq!(young.n, 3);
        assert!((young.realized_share - 0.6).abs() < 1e-12, "{young:?}");
        assert!((young.cwnd_share - 0.75).abs() < 1e-12, "{young:?}");
        let older = s.by_age[1].unwrap();
        assert_eq!(older.n, 1);
        assert!((older.realized_share - 0.6).abs() < 1e-12, "{older:?}");
        assert!(s.by_age[2..].iter().all(Option::is_none));
        // Pooling two copies gives the same means and twice the counts.
        let pooled = pool_by_age([&s.by_age, &s.by_age]);
        assert_eq!(pooled[0].unwrap().n, 6);
        assert!((pooled[0].unwrap().realized_share - 0.6).abs() < 1e-12);
        assert_eq!(age_label(0), "0-20 ms");
        assert_eq!(age_label(4), "200+ ms");
    }

    #[test]
    fn idle_flows_equal_f_and_non_mltcp_samples_do_not_count() {
        let flows = [flow(0, "A", "h1"), flow(1, "B", "h1"), flow(2, "A", "h1")];
        let samples = [
            // Interval 1: B below the threshold (not sending).
            sample(0, 0, 0, Some(1536)),
            sample(0, 1, 0, Some(512)),
            sample(10_000, 0, 90_000, Some(1024)),
            sample(10_000, 1, 5_000, Some(1024)),
            // Interval 2: equal F at its start.
            sample(20_000, 0, 140_000, Some(1024)),
            sample(20_000, 1, 55_000, Some(1024)),
            // Flow 2 is job A's too (same job: no pair) and has no F (not MLTCP).
            sample(0, 2, 0, None),
            sample(10_000, 2, 50_000, None),
        ];
        assert_eq!(weighted_sharing(&flows, &samples, 10_000), None);
    }
}
