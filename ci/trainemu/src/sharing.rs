//! How much of MLTCP's intended weighting a run realized: when two jobs' flows leave the same
//! host at once, MLTCP means the flow with the larger F(bytes_ratio) to take the larger share,
//! F_hi / (F_hi + F_lo) in the fluid model of Rajasekaran et al., "MLTCP: Congestion Control for
//! DNN Training" (HotNets '24), Sec. 3, where a Reno flow's share follows its additive increase.
//! With window-based AIMD that share is reached only after several loss cycles; a burst that
//! spans one or two (a long RTT against a short communication phase) keeps close to an even
//! split. This module measures the share each sample interval actually gave, from the
//! per-flow `bytes_acked` and `f_fx` of samples.csv.

use std::collections::BTreeMap;

use crate::emu::{FlowInfo, Sample};

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
}

/// The weighted-sharing measurement of one run. `min_bytes`: what each of the two flows must
/// have delivered in an interval to count (both really sending; e.g. 10 % of the link's bytes
/// per sample period). Pairs are flows of different jobs with the same `src_host` (they share
/// that host's uplink and, in the testbed's star, the receiving port). Samples without F (not
/// an MLTCP socket) never count. None when no interval qualified.
pub fn weighted_sharing(flows: &[FlowInfo], samples: &[Sample], min_bytes: u64) -> Option<Sharing> {
    // Per sample time, per flow: (bytes_acked, f_fx).
    let mut at: BTreeMap<u64, BTreeMap<usize, (u64, u16)>> = BTreeMap::new();
    for s in samples {
        if let Some(f) = s.f_fx {
            at.entry(s.t_us)
                .or_default()
                .insert(s.flow, (s.bytes_acked, f));
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
    let times: Vec<&BTreeMap<usize, (u64, u16)>> = at.values().collect();
    for w in times.windows(2) {
        let (t0, t1) = (w[0], w[1]);
        for &(a, b) in &pairs {
            let (Some(&(a0, fa)), Some(&(a1, _)), Some(&(b0, fb)), Some(&(b1, _))) =
                (t0.get(&a), t1.get(&a), t0.get(&b), t1.get(&b))
            else {
                continue;
            };
            let (da, db) = (a1.saturating_sub(a0), b1.saturating_sub(b0));
            if da < min_bytes || db < min_bytes || fa == fb {
                continue;
            }
            let (hi_bytes, f_hi, f_lo) = if fa > fb { (da, fa, fb) } else { (db, fb, fa) };
            f_sum += f64::from(f_hi) / (f64::from(f_hi) + f64::from(f_lo));
            r_sum += hi_bytes as f64 / (da + db) as f64;
            n += 1;
        }
    }
    (n > 0).then(|| Sharing {
        f_share: f_sum / n as f64,
        realized_share: r_sum / n as f64,
        n,
    })
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
