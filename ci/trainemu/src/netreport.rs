// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Network-side metrics of a scenario's runs, the PCN paper's (Sec. 5): the bottleneck port's
//! queue at each burst start and its maximum, the queueing delay, the burst completion time, and
//! the throughput the background flows lose against their background-only baseline (PCN's
//! overhead).
//!
//! Definitions:
//! - a burst is a job iteration's communication phase ([`JobIter`]: from the earliest
//!   communication start of its workers, after any PCN `before_burst` wait, to the latest end),
//!   iterations before `warmup_iterations` left out; burst completion time = its length;
//! - queue at a burst start = the last queue sample at or before that start (bursts before the
//!   first sample are left out);
//! - max queue, queueing delay: over the samples from the first burst start to the last burst end
//!   (the whole run when it has no jobs); delay = backlog × 8 / the port's rate (the bottleneck
//!   host's `rate_mbit`), i.e. the time the last byte queued waits;
//! - a background flow's throughput = bytes acknowledged between its start and stop (from the
//!   TCP_INFO samples) / that time; loss = 1 − throughput / its throughput in the baseline run.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::emu::{BgRecord, Sample};
use crate::queue::QueueSample;
use crate::report::JobIter;
use crate::stats::percentile;

/// Bin width of the background throughput series, µs.
pub const BG_BIN_US: u64 = 100_000;

/// Bytes acknowledged per bin of `bin_us`, from a flow's (time µs, cumulative bytes_acked)
/// points in time order: each increase is counted in the bin of the later point (a point on a
/// bin boundary closes the bin before it); `nbins` bins from 0 (later points fall in the last).
pub fn bin_bytes(points: &[(u64, u64)], bin_us: u64, nbins: usize) -> Vec<f64> {
    let mut bins = vec![0.0; nbins];
    if nbins == 0 {
        return bins;
    }
    for w in points.windows(2) {
        let b = (w[1].0.saturating_sub(1) / bin_us) as usize;
        bins[b.min(nbins - 1)] += w[1].1.saturating_sub(w[0].1) as f64;
    }
    bins
}

/// Mean and 99th percentile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stat {
    /// Mean.
    pub mean: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
}

impl Stat {
    /// Of `v` (None when empty).
    pub fn of(v: &[f64]) -> Option<Stat> {
        Some(Stat {
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p99: percentile(v, 99.0)?,
        })
    }
}

/// Queue and burst metrics of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueMetrics {
    /// Queue samples in the measured span.
    pub samples: usize,
    /// Their mean rate, Hz.
    pub sample_hz: f64,
    /// Queue at burst starts, kB (1000 bytes).
    pub at_burst_kb: Option<Stat>,
    /// Largest queue, kB.
    pub max_kb: f64,
    /// Queueing delay, ms (None when the port has no rate).
    pub delay_ms: Option<Stat>,
    /// Burst completion time, ms.
    pub bct_ms: Option<Stat>,
    /// Bursts counted.
    pub bursts: usize,
    /// Mean PCN `before_burst` wait of the workers, ms (None: no call made).
    pub wait_ms: Option<f64>,
    /// CE marks of the port's ECN qdisc over the span (None: no ECN qdisc).
    pub marks: Option<u64>,
    /// Drops of the port over the span.
    pub drops: u64,
}

/// The queue metrics of a run: `queue` in time order, its jobs' iterations, the warm-up to skip,
/// the port's rate in Mbit/s, and the PCN waits (µs) the workers recorded.
pub fn queue_metrics(
    queue: &[QueueSample],
    jobs: &BTreeMap<String, Vec<JobIter>>,
    warmup: u32,
    rate_mbit: Option<f64>,
    waits_us: &[u64],
) -> QueueMetrics {
    let bursts: Vec<(u64, u64)> = jobs
        .values()
        .flatten()
        .filter(|i| i.iter >= warmup)
        .map(|i| (i.comm_start, i.end))
        .collect();
    let span = if bursts.is_empty() {
        (0, u64::MAX)
    } else {
        (
            bursts.iter().map(|b| b.0).min().unwrap_or(0),
            bursts.iter().map(|b| b.1).max().unwrap_or(u64::MAX),
        )
    };
    let sel: Vec<&QueueSample> = queue
        .iter()
        .filter(|q| q.t_us >= span.0 && q.t_us <= span.1)
        .collect();
    let at_start: Vec<f64> = bursts
        .iter()
        .filter_map(|b| queue.iter().take_while(|q| q.t_us <= b.0).last())
        .map(|q| q.backlog_bytes as f64 / 1000.0)
        .collect();
    let dur_s = match (sel.first(), sel.last()) {
        (Some(a), Some(b)) if b.t_us > a.t_us => (b.t_us - a.t_us) as f64 / 1e6,
        _ => 0.0,
    };
    let delays: Option<Vec<f64>> = rate_mbit.map(|r| {
        sel.iter()
            .map(|q| q.backlog_bytes as f64 * 8.0 / (r * 1e6) * 1e3)
            .collect()
    });
    let bct: Vec<f64> = bursts
        .iter()
        .map(|b| b.1.saturating_sub(b.0) as f64 / 1000.0)
        .collect();
    let diff = |f: &dyn Fn(&QueueSample) -> Option<u64>| -> Option<u64> {
        Some(f(sel.last()?)?.saturating_sub(f(sel.first()?)?))
    };
    QueueMetrics {
        samples: sel.len(),
        sample_hz: if dur_s > 0.0 {
            (sel.len() - 1) as f64 / dur_s
        } else {
            0.0
        },
        at_burst_kb: Stat::of(&at_start),
        max_kb: sel
            .iter()
            .map(|q| q.backlog_bytes as f64 / 1000.0)
            .fold(0.0, f64::max),
        delay_ms: delays.and_then(|d| Stat::of(&d)),
        bct_ms: Stat::of(&bct),
        bursts: bursts.len(),
        wait_ms: (!waits_us.is_empty())
            .then(|| waits_us.iter().sum::<u64>() as f64 / waits_us.len() as f64 / 1000.0),
        marks: diff(&|q| q.marks),
        drops: diff(&|q| Some(q.drops)).unwrap_or(0),
    }
}

/// A flow's cumulative bytes_acked at `t_us`: the last sample at or before it (the first sample
/// when none is).
fn acked_at(points: &[(u64, u64)], t_us: u64) -> Option<u64> {
    points
        .iter()
        .take_while(|p| p.0 <= t_us)
        .last()
        .or(points.first())
        .map(|p| p.1)
}

/// Mean throughput of background flow `r` over its active time, Mbit/s.
pub fn bg_mbit(samples: &[Sample], r: &BgRecord) -> Option<f64> {
    let pts: Vec<(u64, u64)> = samples
        .iter()
        .filter(|s| s.flow == r.flow)
        .map(|s| (s.t_us, s.bytes_acked))
        .collect();
    let d = r.stop_us.checked_sub(r.start_us).filter(|&d| d > 0)?;
    let bytes = acked_at(&pts, r.stop_us)?.saturating_sub(acked_at(&pts, r.start_us)?);
    Some(bytes as f64 * 8.0 / d as f64)
}

/// Throughput of background flow `r` per [`BG_BIN_US`] from its start, Mbit/s.
pub fn bg_series(samples: &[Sample], r: &BgRecord) -> Vec<f64> {
    let pts: Vec<(u64, u64)> = samples
        .iter()
        .filter(|s| s.flow == r.flow && s.t_us >= r.start_us && s.t_us <= r.stop_us)
        .map(|s| (s.t_us - r.start_us, s.bytes_acked))
        .collect();
    let n = (r.stop_us.saturating_sub(r.start_us)).div_ceil(BG_BIN_US) as usize;
    bin_bytes(&pts, BG_BIN_US, n)
        .into_iter()
        .map(|b| b * 8.0 / BG_BIN_US as f64)
        .collect()
}

/// One background flow in one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BgRow {
    /// Run label.
    pub run: String,
    /// Flow name.
    pub flow: String,
    /// Its congestion control.
    pub cc: String,
    /// Mean throughput, Mbit/s.
    pub mbit: f64,
    /// Its mean throughput in the background-only baseline run, Mbit/s.
    pub baseline_mbit: Option<f64>,
    /// 1 − mbit / baseline_mbit (PCN's overhead), as a fraction.
    pub loss: Option<f64>,
    /// Throughput per 100 ms from its start, Mbit/s.
    pub series_mbit: Vec<f64>,
}

/// The background rows of a run, against the baseline's mean throughput per flow name.
pub fn bg_rows(
    run: &str,
    samples: &[Sample],
    recs: &[BgRecord],
    baseline: &BTreeMap<String, f64>,
) -> Vec<BgRow> {
    recs.iter()
        .filter_map(|r| {
            let mbit = bg_mbit(samples, r)?;
            let base = baseline.get(&r.name).copied();
            Some(BgRow {
                run: run.to_string(),
                flow: r.name.clone(),
                cc: r.cc.clone(),
                mbit,
                baseline_mbit: base,
                loss: base.filter(|b| *b > 0.0).map(|b| 1.0 - mbit / b),
                series_mbit: bg_series(samples, r),
            })
        })
        .collect()
}

/// All background flows of each run together (in the order runs first appear): (run, total
/// Mbit/s, total baseline Mbit/s, loss), the baseline and loss only when every flow of the run
/// has a baseline. Per-flow losses mislead when the flows split the link unevenly (in a
/// background-only run two DCTCP flows may settle at 68 and 28 Mbit/s); the total is PCN's
/// overhead.
pub fn bg_totals(bg: &[BgRow]) -> Vec<(String, f64, Option<f64>, Option<f64>)> {
    let mut out: Vec<(String, f64, Option<f64>, Option<f64>)> = Vec::new();
    for r in bg {
        let i = match out.iter().position(|o| o.0 == r.run) {
            Some(i) => i,
            None => {
                out.push((r.run.clone(), 0.0, Some(0.0), None));
                out.len() - 1
            }
        };
        let o = &mut out[i];
        o.1 += r.mbit;
        o.2 = o.2.zip(r.baseline_mbit).map(|(a, b)| a + b);
    }
    for o in &mut out {
        o.3 = o.2.filter(|b| *b > 0.0).map(|b| 1.0 - o.1 / b);
    }
    out
}

/// Queue metrics of one run, labelled.
#[derive(Debug, Clone, Serialize)]
pub struct NetRow {
    /// Run label.
    pub run: String,
    /// Its metrics.
    pub q: QueueMetrics,
}

fn st(s: Option<Stat>, prec: usize) -> String {
    s.map(|s| format!("{:.*}/{:.*}", prec, s.mean, prec, s.p99))
        .unwrap_or_else(|| "-".into())
}

/// The network part of the report's table.
pub fn table(net: &[NetRow], bg: &[BgRow], port: &str) -> String {
    let mut o = String::new();
    if !net.is_empty() {
        let _ = writeln!(o, "bottleneck queue ({port}) and bursts, mean/p99:");
        let _ = writeln!(
            o,
            "  {:<22} {:>15} {:>8} {:>13} {:>13} {:>7} {:>7} {:>7} {:>7}",
            "run", "q@burst kB", "max kB", "delay ms", "BCT ms", "wait ms", "marks", "drops", "hz"
        );
        for r in net {
            let q = &r.q;
            let _ = writeln!(
                o,
                "  {:<22} {:>15} {:>8.1} {:>13} {:>13} {:>7} {:>7} {:>7} {:>7.0}",
                r.run,
                st(q.at_burst_kb, 1),
                q.max_kb,
                st(q.delay_ms, 2),
                st(q.bct_ms, 0),
                q.wait_ms
                    .map(|w| format!("{w:.2}"))
                    .unwrap_or_else(|| "-".into()),
                q.marks.map(|m| m.to_string()).unwrap_or_else(|| "-".into()),
                q.drops,
                q.sample_hz
            );
        }
    }
    if !bg.is_empty() {
        let _ = writeln!(
            o,
            "background flows (loss = 1 - Mbit/s / background-only Mbit/s):"
        );
        for r in bg {
            let _ = writeln!(
                o,
                "  {:<22} {:<10} {:<8} {:>7.1} Mbit/s  baseline {:>7}  loss {:>7}",
                r.run,
                r.flow,
                r.cc,
                r.mbit,
                r.baseline_mbit
                    .map(|b| format!("{b:.1}"))
                    .unwrap_or_else(|| "-".into()),
                r.loss
                    .map(|l| format!("{:.1}%", l * 100.0))
                    .unwrap_or_else(|| "-".into())
            );
        }
        let _ = writeln!(o, "background flows together (PCN's overhead: loss of the total against the background-only run):");
        for (run, mbit, base, loss) in bg_totals(bg) {
            let _ = writeln!(
                o,
                "  {:<22} {:<10} {:<8} {:>7.1} Mbit/s  baseline {:>7}  loss {:>7}",
                run,
                "all",
                "",
                mbit,
                base.map(|b| format!("{b:.1}"))
                    .unwrap_or_else(|| "-".into()),
                loss.map(|l| format!("{:.1}%", l * 100.0))
                    .unwrap_or_else(|| "-".into())
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(t_us: u64, backlog_bytes: u64, drops: u64, marks: u64) -> QueueSample {
        QueueSample {
            t_us,
            backlog_bytes,
            backlog_pkts: backlog_bytes / 1500,
            drops,
            marks: Some(marks),
        }
    }

    fn it(iter: u32, comm_start: u64, end: u64) -> JobIter {
        JobIter {
            iter,
            start: comm_start.saturating_sub(100),
            comm_start,
            end,
            compute_us: 100.0,
        }
    }

    fn sample(t_us: u64, flow: usize, bytes_acked: u64) -> Sample {
        Sample {
            t_us,
            flow,
            bytes_acked,
            cwnd: 10,
            srtt_us: 100,
            retrans: 0,
            bytes_ratio_fx: None,
            f_fx: None,
        }
    }

    #[test]
    fn queue_metrics_known_answers() {
        // Samples every 10 ms, backlog 0, 15000, 30000, ... bytes; marks +5 and drops +1 per sample.
        let queue: Vec<QueueSample> = (0..=10)
            .map(|k| q(k * 10_000, k * 15_000, k, 5 * k))
            .collect();
        let mut jobs = BTreeMap::new();
        // Iteration 0 is warm-up (left out). Bursts start at 20 ms (sample 20 ms: 30 kB) and at
        // 45 ms (last sample at or before: 40 ms, 60 kB); they last 20 ms and 40 ms.
        jobs.insert(
            "A".to_string(),
            vec![it(0, 0, 5_000), it(1, 20_000, 40_000)],
        );
        jobs.insert("B".to_string(), vec![it(1, 45_000, 85_000)]);
        let m = queue_metrics(&queue, &jobs, 1, Some(100.0), &[1000, 3000]);
        assert_eq!(m.bursts, 2);
        assert_eq!(
            m.at_burst_kb,
            Some(Stat {
                mean: 45.0,
                p99: 60.0
            })
        );
        assert_eq!(
            m.bct_ms,
            Some(Stat {
                mean: 30.0,
                p99: 40.0
            })
        );
        // Span 20..=85 ms: samples at 20..80 ms (7), backlog 30..120 kB.
        assert_eq!(m.samples, 7);
        assert!((m.sample_hz - 100.0).abs() < 1e-9, "{}", m.sample_hz);
        assert_eq!(m.max_kb, 120.0);
        // Delay at 100 Mbit/s: 30 kB = 2.4 ms ... 120 kB = 9.6 ms; mean of 30..120 step 15 = 75 kB = 6 ms.
        let d = m.delay_ms.unwrap();
        assert!(
            (d.mean - 6.0).abs() < 1e-9 && (d.p99 - 9.6).abs() < 1e-9,
            "{d:?}"
        );
        assert_eq!(m.wait_ms, Some(2.0));
        assert_eq!((m.marks, m.drops), (Some(30), 6));
        // No rate: no delay; no waits: no wait.
        let m = queue_metrics(&queue, &jobs, 1, None, &[]);
        assert_eq!((m.delay_ms, m.wait_ms), (None, None));
    }

    #[test]
    fn a_run_without_jobs_spans_all_samples() {
        let queue: Vec<QueueSample> = (0..5).map(|k| q(k * 5_000, 1000 * k, 0, 0)).collect();
        let m = queue_metrics(&queue, &BTreeMap::new(), 0, Some(8.0), &[]);
        assert_eq!(
            (m.samples, m.bursts, m.at_burst_kb, m.bct_ms),
            (5, 0, None, None)
        );
        assert_eq!(m.max_kb, 4.0);
        assert!((m.sample_hz - 200.0).abs() < 1e-9);
        // 4000 bytes at 8 Mbit/s = 4 ms.
        assert!((m.delay_ms.unwrap().p99 - 4.0).abs() < 1e-9);
    }

    #[test]
    fn background_throughput_and_loss_against_the_baseline() {
        // Flow 3 acks 1.25 MB per 100 ms (100 Mbit/s) from 0.1 s to 0.5 s, sampled every 50 ms;
        // flow 1 is another flow and must not count.
        let mut samples: Vec<Sample> = (0..=12)
            .map(|k| sample(k * 50_000, 3, k.saturating_sub(2) * 625_000))
            .collect();
        samples.push(sample(300_000, 1, 99_999_999));
        let r = BgRecord {
            name: "bg".into(),
            flow: 3,
            from: "h1".into(),
            to: "h2".into(),
            cc: "dctcp".into(),
            start_us: 100_000,
            stop_us: 500_000,
            bytes_sent: 0,
        };
        assert!((bg_mbit(&samples, &r).unwrap() - 100.0).abs() < 1e-9);
        assert_eq!(bg_series(&samples, &r), vec![100.0; 4]);
        let base: BTreeMap<String, f64> = [("bg".to_string(), 125.0)].into();
        let rows = bg_rows("mltcp_dctcp", &samples, std::slice::from_ref(&r), &base);
        assert_eq!(rows.len(), 1);
        assert!((rows[0].loss.unwrap() - 0.2).abs() < 1e-9, "{:?}", rows[0]);
        assert_eq!(bg_rows("x", &samples, &[r], &BTreeMap::new())[0].loss, None);
    }

    #[test]
    fn background_totals_per_run() {
        let row = |run: &str, flow: &str, mbit: f64, base: Option<f64>| BgRow {
            run: run.into(),
            flow: flow.into(),
            cc: "dctcp".into(),
            mbit,
            baseline_mbit: base,
            loss: None,
            series_mbit: vec![],
        };
        // Uneven per-flow split (bg2 gains against its baseline); the total loses 20 %.
        let rows = [
            row("dctcp", "bg1", 30.0, Some(68.0)),
            row("dctcp", "bg2", 42.0, Some(22.0)),
            row("pcn", "bg1", 40.0, None),
        ];
        let t = bg_totals(&rows);
        assert_eq!(t.len(), 2);
        assert_eq!(
            (t[0].0.as_str(), t[0].1, t[0].2),
            ("dctcp", 72.0, Some(90.0))
        );
        assert!((t[0].3.unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(
            (t[1].0.as_str(), t[1].1, t[1].2, t[1].3),
            ("pcn", 40.0, None, None)
        );
        assert!(table(&[], &rows, "p").contains("all"));
    }

    #[test]
    fn bins_count_each_increase_in_the_later_points_bin() {
        let pts = [(0, 0), (40, 10), (90, 30), (130, 35), (999, 40)];
        assert_eq!(bin_bytes(&pts, 50, 3), vec![10.0, 20.0, 10.0]);
        assert!(bin_bytes(&pts, 50, 0).is_empty());
    }
}
