// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! How much of the bottleneck link a run used while it was demanded: a work-conservation
//! measure. A scheduler may order bursts well and still lose to fair sharing by leaving the link
//! idle at the hand-overs (a flow held back while the served one stalls or has just ended);
//! this shows that loss apart from the order.
//!
//! Per pair of consecutive sample times `(t0, t1)` inside the measured window: the link is
//! *demanded* when some flow crossing it (into the bottleneck host for an "ingress" scenario,
//! out of it for "egress") belongs to a job whose communication phase covers all of `[t0, t1]`
//! (the job-level phase of [`crate::report::JobIter`]: earliest compute end to latest
//! communication end). Over the demanded periods: the mean rate the link carried (the sum of those
//! flows' acknowledged bytes), and the share of periods in which it carried less than half its
//! rate. Demand is by phase, not by bytes left, so a job's own pauses inside its phase (a ring
//! step waiting for its peer) count as demand: fair sharing is measured the same way, and the
//! comparison between congestion controls is what the number is for.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::emu::{FlowInfo, Sample};
use crate::report::JobIter;

/// The bottleneck's use while demanded, one run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PortUse {
    /// Demanded time, s (the sum of the demanded sample periods).
    pub demanded_s: f64,
    /// Mean rate carried while demanded, Mbit/s.
    pub mean_mbit: f64,
    /// Share of the demanded periods carrying less than half the link's rate, 0..=1.
    pub low_share: f64,
}

/// The use of the link crossed by the flows `on_link` selects, of rate `rate_mbit` (Mbit/s),
/// within `win` (µs since the run's start, as [`crate::report::window`]). None when no sample
/// period inside `win` was demanded, or `rate_mbit` is not positive.
pub fn port_use(
    flows: &[FlowInfo],
    samples: &[Sample],
    jobs: &BTreeMap<String, Vec<JobIter>>,
    on_link: impl Fn(&FlowInfo) -> bool,
    win: (u64, u64),
    rate_mbit: f64,
) -> Option<PortUse> {
    if rate_mbit.is_nan() || rate_mbit <= 0.0 {
        return None;
    }
    let link: Vec<&FlowInfo> = flows.iter().filter(|f| on_link(f)).collect();
    // Per sample time, per flow on the link: bytes acknowledged so far.
    let mut at: BTreeMap<u64, BTreeMap<usize, u64>> = BTreeMap::new();
    for s in samples {
        if link.iter().any(|f| f.id == s.flow) {
            at.entry(s.t_us).or_default().insert(s.flow, s.bytes_acked);
        }
    }
    let demanded = |t0: u64, t1: u64| {
        link.iter().any(|f| {
            jobs.get(&f.job)
                .is_some_and(|its| its.iter().any(|i| i.comm_start <= t0 && t1 <= i.end))
        })
    };
    let (mut time_us, mut bits, mut low, mut n) = (0u64, 0f64, 0usize, 0usize);
    let times: Vec<(&u64, &BTreeMap<usize, u64>)> = at.iter().collect();
    for w in times.windows(2) {
        let ((&t0, b0), (&t1, b1)) = (w[0], w[1]);
        if t0 < win.0 || t1 > win.1 || t1 <= t0 || !demanded(t0, t1) {
            continue;
        }
        let bytes: u64 = b1
            .iter()
            .map(|(flow, b)| b.saturating_sub(b0.get(flow).copied().unwrap_or(*b)))
            .sum();
        let mbit = bytes as f64 * 8.0 / (t1 - t0) as f64;
        time_us += t1 - t0;
        bits += bytes as f64 * 8.0;
        n += 1;
        if mbit < rate_mbit / 2.0 {
            low += 1;
        }
    }
    (n > 0).then(|| PortUse {
        demanded_s: time_us as f64 / 1e6,
        mean_mbit: bits / time_us as f64,
        low_share: low as f64 / n as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(id: usize, job: &str, dst: &str) -> FlowInfo {
        FlowInfo {
            id,
            job: job.into(),
            kind: "ring".into(),
            worker: 0,
            src_host: "h1".into(),
            dst_host: dst.into(),
            cc: "cubic".into(),
            ecn: false,
        }
    }

    fn sample(t_ms: u64, flow: usize, bytes_acked: u64) -> Sample {
        Sample {
            t_us: t_ms * 1000,
            flow,
            bytes_acked,
            cwnd: 10,
            srtt_us: 500,
            retrans: 0,
            bytes_ratio_fx: None,
            f_fx: None,
        }
    }

    fn phase(comm_start_ms: u64, end_ms: u64) -> JobIter {
        JobIter {
            iter: 0,
            start: 0,
            comm_start: comm_start_ms * 1000,
            end: end_ms * 1000,
            compute_us: 0.0,
        }
    }

    #[test]
    fn counts_only_demanded_periods_of_flows_on_the_link() {
        // A into h2 communicates 10-40 ms; B (into h3, not on the link) 0-50 ms.
        let flows = [flow(0, "A", "h2"), flow(1, "B", "h3")];
        let jobs = BTreeMap::from([
            ("A".to_string(), vec![phase(10, 40)]),
            ("B".to_string(), vec![phase(0, 50)]),
        ]);
        // 10 ms periods; A delivers 125 000 bytes (100 Mbit/s) in 10-20, 25 000 (20 Mbit/s) in
        // 20-30 and 30-40; B delivers a lot throughout (never counted).
        let a = [0, 0, 125_000, 150_000, 175_000, 175_000];
        let mut samples = Vec::new();
        for (k, b) in a.iter().enumerate() {
            samples.push(sample(10 * k as u64, 0, *b));
            samples.push(sample(10 * k as u64, 1, 1_000_000 * k as u64));
        }
        let on_h2 = |f: &FlowInfo| f.dst_host == "h2";
        let u = port_use(&flows, &samples, &jobs, on_h2, (0, u64::MAX), 100.0).unwrap();
        assert!((u.demanded_s - 0.030).abs() < 1e-9, "{u:?}");
        assert!((u.mean_mbit - 140.0 / 3.0).abs() < 1e-9, "{u:?}");
        assert!((u.low_share - 2.0 / 3.0).abs() < 1e-9, "{u:?}");
        // The window cuts the first demanded period off.
        let u = port_use(&flows, &samples, &jobs, on_h2, (20_000, u64::MAX), 100.0).unwrap();
        assert!((u.demanded_s - 0.020).abs() < 1e-9 && (u.low_share - 1.0).abs() < 1e-9);
        // Nothing demanded, or no rate: nothing to say.
        let none = |_: &FlowInfo| false;
        assert_eq!(
            port_use(&flows, &samples, &jobs, none, (0, u64::MAX), 100.0),
            None
        );
        assert_eq!(
            port_use(&flows, &samples, &jobs, on_h2, (0, u64::MAX), 0.0),
            None
        );
    }

    #[test]
    fn a_flow_that_appears_mid_period_counts_from_its_first_sample() {
        let flows = [flow(0, "A", "h2"), flow(9, "A", "h2")];
        let jobs = BTreeMap::from([("A".to_string(), vec![phase(0, 30)])]);
        // Flow 0's first sample, at 10 ms, already shows 1 MB: a total, not a rate.
        let samples = [
            sample(0, 9, 0),
            sample(10, 0, 1_000_000),
            sample(20, 0, 1_125_000),
        ];
        let u = port_use(
            &flows,
            &samples,
            &jobs,
            |f| f.dst_host == "h2",
            (0, u64::MAX),
            100.0,
        )
        .unwrap();
        // 0-10 ms: no bytes counted (flow 0 starts there, flow 9 has no later sample);
        // 10-20 ms: 100 Mbit/s.
        assert!((u.demanded_s - 0.020).abs() < 1e-9, "{u:?}");
        assert!((u.mean_mbit - 50.0).abs() < 1e-9, "{u:?}");
    }
}
