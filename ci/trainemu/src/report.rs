// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Analysis of a scenario results directory: per congestion control and job, mean and p99
//! iteration time, speedup against cubic, the ideal C + M (from the job's solo run), the ratio of
//! the measured mean to it, and the iteration at which the jobs became interleaved.
//!
//! Definitions (all from the workers' records):
//! - a job's iteration k runs from the earliest compute start of its workers to the latest end of
//!   their communication; its communication phase from the earliest compute end to that end;
//! - measured window of a run with several jobs: from the moment the last job started to the
//!   moment the first job finished (so every counted iteration had all competitors running), and
//!   not the first `warmup_iterations` of a job;
//! - C = mean compute phase and M = mean communication phase of the job's solo run (same window
//!   rules); ideal = C + M (the mean solo iteration time);
//! - a job iteration is interleaved when its communication phase overlaps the union of the other
//!   jobs' communication phases by less than 10% of its length; the job became interleaved at the
//!   first iteration k such that k..k+4 all are; the run at the largest such k over its jobs;
//! - "after convergence": the job's iterations from that k on (absent when it never interleaved).
//!
//! Over seeds ([`Report`], [`CcStats`]; every cc ran under the same seeds, each seed with its own
//! solo runs): per cc the mean over seeds of the run's mean/ideal and of its mean iteration time
//! with 95 % t intervals, the paired relative difference of the mean iteration time against cubic
//! and against reno (seed by seed), the distribution of the interleaving iteration, mean/ideal
//! after convergence, the job spread (max job mean / min job mean − 1: starvation) and the
//! slowdown spread (the same over the jobs' mean / ideal, which jobs of different ideal times do
//! not inflate). Runs whose CPUs were busier than [`CPU_BUSY_LIMIT`] are flagged as
//! CPU-saturated (untrusted).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::emu::IterRecord;
use crate::netreport::{self, bg_rows, queue_metrics, BgRow, NetRow};
use crate::portuse::{port_use, PortUse};
use crate::results::{discover_runs, read_meta, read_run, Meta, RunData, RunMeta, CPU_BUSY_LIMIT};
use crate::sharing::{age_label, pool_by_age, weighted_sharing, AgeShare, AGE_BUCKETS};
use crate::stats::{self, ci95, interleave_dist, InterleaveDist, Interval, Paired};

/// Overlap below which an iteration counts as interleaved (fraction of its communication phase).
pub const INTERLEAVE_OVERLAP: f64 = 0.10;
/// Consecutive interleaved iterations needed.
pub const INTERLEAVE_RUN: usize = 5;

/// One job iteration, times in µs since the run's start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobIter {
    /// Iteration index.
    pub iter: u32,
    /// Earliest compute start of the workers.
    pub start: u64,
    /// Earliest compute end (start of communication).
    pub comm_start: u64,
    /// Latest communication end.
    pub end: u64,
    /// Mean compute phase of the workers, µs.
    pub compute_us: f64,
}

/// Groups worker records into job iterations, by job name, in iteration order.
pub fn job_iterations(recs: &[IterRecord]) -> BTreeMap<String, Vec<JobIter>> {
    let mut by: BTreeMap<String, BTreeMap<u32, Vec<&IterRecord>>> = BTreeMap::new();
    for r in recs.iter().filter(|r| r.role == "worker") {
        by.entry(r.job.clone())
            .or_default()
            .entry(r.iter)
            .or_default()
            .push(r);
    }
    by.into_iter()
        .map(|(job, its)| {
            let v = its
                .into_iter()
                .map(|(k, rs)| JobIter {
                    iter: k,
                    start: rs
                        .iter()
                        .filter_map(|r| r.compute_start_us)
                        .min()
                        .unwrap_or(0),
                    comm_start: rs.iter().map(|r| r.comm_start_us).min().unwrap_or(0),
                    end: rs.iter().map(|r| r.comm_end_us).max().unwrap_or(0),
                    compute_us: rs
                        .iter()
                        .filter_map(|r| Some(r.compute_end_us? as f64 - r.compute_start_us? as f64))
                        .sum::<f64>()
                        / rs.len() as f64,
                })
                .collect();
            (job, v)
        })
        .collect()
}

/// The measured window [last job's first start, first job's last end], µs.
pub fn window(jobs: &BTreeMap<String, Vec<JobIter>>) -> (u64, u64) {
    let lo = jobs
        .values()
        .filter_map(|v| v.first().map(|i| i.start))
        .max()
        .unwrap_or(0);
    let hi = jobs
        .values()
        .filter_map(|v| v.last().map(|i| i.end))
        .min()
        .unwrap_or(u64::MAX);
    (lo, hi)
}

fn overlap(a: (u64, u64), b: (u64, u64)) -> u64 {
    a.1.min(b.1).saturating_sub(a.0.max(b.0))
}

/// Per iteration of `job`: fraction of its communication phase overlapped by other jobs'.
pub fn overlap_fractions(jobs: &BTreeMap<String, Vec<JobIter>>, job: &str) -> Vec<f64> {
    // Union of the other jobs' phases, sorted and merged.
    let mut others: Vec<(u64, u64)> = jobs
        .iter()
        .filter(|(n, _)| n.as_str() != job)
        .flat_map(|(_, v)| v.iter().map(|i| (i.comm_start, i.end)))
        .collect();
    others.sort();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for o in others {
        match merged.last_mut() {
            Some(m) if o.0 <= m.1 => m.1 = m.1.max(o.1),
            _ => merged.push(o),
        }
    }
    jobs[job]
        .iter()
        .map(|i| {
            let len = i.end.saturating_sub(i.comm_start).max(1);
            let ov: u64 = merged
                .iter()
                .map(|&m| overlap((i.comm_start, i.end), m))
                .sum();
            ov as f64 / len as f64
        })
        .collect()
}

/// First iteration index k of a job (its iterations `its`, their [`overlap_fractions`] `fr`)
/// from which INTERLEAVE_RUN consecutive iterations inside the window are interleaved.
pub fn interleaved_at(its: &[JobIter], fr: &[f64], win: (u64, u64)) -> Option<u32> {
    let ok: Vec<bool> = its
        .iter()
        .zip(fr)
        .map(|(i, f)| i.end <= win.1 && *f < INTERLEAVE_OVERLAP)
        .collect();
    (0..its.len())
        .find(|&k| k + INTERLEAVE_RUN <= its.len() && ok[k..k + INTERLEAVE_RUN].iter().all(|&b| b))
        .map(|k| its[k].iter)
}

/// How the communication phases of a job (its iterations `its`, their [`overlap_fractions`]
/// `fr`) counted in `win` (after `warmup` iterations) split
/// into uncontended ones (no overlap at all with another job's communication phase) and
/// overlapped ones: (durations of the uncontended phases in ms, number overlapped, number
/// counted). It separates the two parts of an after-convergence cost: what a congestion control
/// costs a burst that meets an empty link (uncontended duration against the solo run's M) and
/// how often the jobs' bursts still meet.
pub fn burst_split(
    its: &[JobIter],
    fr: &[f64],
    win: (u64, u64),
    warmup: u32,
) -> (Vec<f64>, usize, usize) {
    let mut alone = Vec::new();
    let (mut overlapped, mut n) = (0, 0);
    for (i, f) in its.iter().zip(fr) {
        if i.iter < warmup || i.start < win.0 || i.end > win.1 {
            continue;
        }
        n += 1;
        if *f > 0.0 {
            overlapped += 1;
        } else {
            alone.push((i.end - i.comm_start) as f64 / 1000.0);
        }
    }
    (alone, overlapped, n)
}

use crate::stats::{mean, percentile};

/// Solo measurements of a job.
#[derive(Debug, Clone, Serialize)]
pub struct Solo {
    /// Mean compute phase C, ms.
    pub c_ms: f64,
    /// Mean communication phase M, ms.
    pub m_ms: f64,
    /// Mean solo iteration time (≈ C + M), ms: the ideal.
    pub ideal_ms: f64,
    /// Iterations averaged.
    pub n: usize,
}

/// One row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Congestion control.
    pub cc: String,
    /// Job.
    pub job: String,
    /// Iterations counted.
    pub n: usize,
    /// Mean iteration time, ms.
    pub mean_ms: f64,
    /// p99 iteration time, ms.
    pub p99_ms: f64,
    /// cubic's mean / this mean.
    pub speedup_vs_cubic: Option<f64>,
    /// Ideal C + M, ms.
    pub ideal_ms: Option<f64>,
    /// mean / ideal.
    pub ratio: Option<f64>,
    /// Mean over the iterations after convergence, ms.
    pub conv_mean_ms: Option<f64>,
    /// conv_mean / ideal.
    pub conv_ratio: Option<f64>,
    /// Iteration at which this job became interleaved.
    pub interleaved_at: Option<u32>,
    /// Mean of the second half of the counted iterations / ideal.
    pub tail_ratio: Option<f64>,
    /// Mean duration of the counted communication phases that overlapped no other job's
    /// ([`burst_split`]) / the solo run's M: the cost of a burst on an empty link.
    pub alone_m_ratio: Option<f64>,
    /// Fraction of the counted communication phases that overlapped another job's.
    pub overlapped_share: Option<f64>,
}

/// Per congestion control, over its jobs.
#[derive(Debug, Clone, Serialize)]
pub struct CcSummary {
    /// Congestion control.
    pub cc: String,
    /// Mean over jobs of the mean iteration time, ms.
    pub mean_ms: f64,
    /// Mean over jobs of the p99, ms.
    pub p99_ms: f64,
    /// Mean over jobs of mean/ideal.
    pub ratio: Option<f64>,
    /// Mean over jobs of conv_mean/ideal (all jobs must have converged).
    pub conv_ratio: Option<f64>,
    /// Mean over jobs of (mean of the second half of the counted iterations)/ideal: the steady
    /// state whether or not the jobs interleaved.
    pub tail_ratio: Option<f64>,
    /// Run-level interleaving iteration (max over jobs; None if a job never interleaved).
    pub interleaved_at: Option<u32>,
    /// Mean over jobs of [`Row::alone_m_ratio`].
    pub alone_m_ratio: Option<f64>,
    /// Mean over jobs of [`Row::overlapped_share`].
    pub overlapped_share: Option<f64>,
    /// MLTCP runs: the higher-F flow's intended share when two jobs' flows left one host at once
    /// ([`crate::sharing`]).
    pub f_share: Option<f64>,
    /// MLTCP runs: the share it realized in those intervals.
    pub realized_share: Option<f64>,
    /// MLTCP runs: the same by the age of the overlap ([`crate::sharing::AGE_EDGES_US`]).
    pub sharing_by_age: Option<[Option<AgeShare>; AGE_BUCKETS]>,
    /// The bottleneck link's use while demanded ([`crate::portuse`]); None without a rate.
    pub port: Option<PortUse>,
    /// (max job mean − min job mean) / min job mean, as a fraction.
    pub spread: f64,
    /// The same over the jobs' slowdowns ([`Row::ratio`], mean / ideal): max / min − 1, as a
    /// fraction; None when a job has no ideal. Unlike [`CcSummary::spread`] it does not count
    /// the jobs' different ideal times (jobs of different models) as starvation.
    pub slowdown_spread: Option<f64>,
    /// Mean over jobs of cubic mean / this mean.
    pub speedup_vs_cubic: Option<f64>,
    /// Busy fraction of the CPUs during the run ([`RunMeta::cpu_busy`]).
    pub cpu_busy: Option<f64>,
    /// Whether the CPUs were busier than [`CPU_BUSY_LIMIT`] (timings untrusted).
    pub cpu_saturated: bool,
}

/// The analysis of one seed's runs of a scenario directory.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The seed (None: a directory written before seeds existed).
    pub seed: Option<u64>,
    /// Scenario name.
    pub scenario: String,
    /// Description.
    pub description: String,
    /// Kernel.
    pub kernel: String,
    /// Solo measurements per job.
    pub solo: BTreeMap<String, Solo>,
    /// Rows, per cc then job.
    pub rows: Vec<Row>,
    /// Per cc.
    pub ccs: Vec<CcSummary>,
    /// Per run of all jobs together (and the background-only baseline): the bottleneck queue and
    /// burst metrics ([`crate::netreport`]), when the queue was sampled.
    pub net: Vec<NetRow>,
    /// Per run and background flow: throughput and loss against the baseline.
    pub background: Vec<BgRow>,
    /// Runs that failed or CCs skipped.
    pub notes: Vec<String>,
}

/// Iteration times (ms) of `job` counted in `win`, after warm-up, with their indices.
fn counted(its: &[JobIter], win: (u64, u64), warmup: u32) -> Vec<(u32, f64)> {
    its.iter()
        .filter(|i| i.iter >= warmup && i.start >= win.0 && i.end <= win.1)
        .map(|i| (i.iter, (i.end - i.start) as f64 / 1000.0))
        .collect()
}

/// Analyses the runs `runs` of one seed of `dir` (a scenario results directory), with the
/// background-only baseline run(s) `baseline` (that seed's, or another's when it has none).
pub fn analyse_seed(
    dir: &Path,
    meta: &Meta,
    seed: Option<u64>,
    runs: &[&RunMeta],
    baseline_runs: &[&RunMeta],
) -> Result<Summary> {
    let warm = meta.scenario.warmup_iterations;
    let mut notes = Vec::new();
    let mut solo = BTreeMap::new();
    for r in runs.iter().filter(|r| r.kind == "solo") {
        if !r.ok {
            notes.push(format!(
                "run {} failed: {}",
                r.rel_dir(),
                r.error.clone().unwrap_or_default()
            ));
            continue;
        }
        let d = read_run(dir, &r.rel_dir())?;
        let jobs = job_iterations(&d.records);
        for (job, its) in &jobs {
            let w = (0, u64::MAX);
            let sel: Vec<&JobIter> = its
                .iter()
                .filter(|i| i.iter >= warm.min(its.len().saturating_sub(1) as u32) && i.end <= w.1)
                .collect();
            let c = mean(
                &sel.iter()
                    .map(|i| i.compute_us / 1000.0)
                    .collect::<Vec<_>>(),
            )
            .unwrap_or(0.0);
            let m = mean(
                &sel.iter()
                    .map(|i| (i.end - i.comm_start) as f64 / 1000.0)
                    .collect::<Vec<_>>(),
            )
            .unwrap_or(0.0);
            let t = mean(
                &sel.iter()
                    .map(|i| (i.end - i.start) as f64 / 1000.0)
                    .collect::<Vec<_>>(),
            )
            .unwrap_or(0.0);
            solo.insert(
                job.clone(),
                Solo {
                    c_ms: c,
                    m_ms: m,
                    ideal_ms: t,
                    n: sel.len(),
                },
            );
        }
    }
    let mut net = Vec::new();
    let mut background = Vec::new();
    let rate = meta
        .scenario
        .topology
        .hosts
        .iter()
        .find(|h| h.name == meta.scenario.topology.bottleneck)
        .and_then(|h| h.rate_mbit);
    // A flow counts as sending in a sample period when it delivered at least 10 % of the
    // bottleneck's bytes per period (without a rate: 10 % of 100 Mbit/s).
    let sharing_min_bytes =
        (rate.unwrap_or(100.0) * 1e6 / 8.0 * meta.scenario.sample_ms / 1000.0 * 0.1) as u64;
    let mut net_of = |name: &str, d: &RunData, jobs: &BTreeMap<String, Vec<JobIter>>| {
        if !d.queue.is_empty() {
            let waits: Vec<u64> = d.records.iter().filter_map(|r| r.burst_wait_us).collect();
            net.push(NetRow {
                run: name.to_string(),
                q: queue_metrics(&d.queue, jobs, warm, rate, &waits),
            });
        }
    };
    let mut baseline = BTreeMap::new();
    for r in baseline_runs {
        if !r.ok {
            notes.push(format!(
                "run {} failed: {}",
                r.rel_dir(),
                r.error.clone().unwrap_or_default()
            ));
            continue;
        }
        let d = read_run(dir, &r.rel_dir()).with_context(|| format!("run {}", r.rel_dir()))?;
        net_of(&r.name, &d, &BTreeMap::new());
        for b in bg_rows(&r.name, &d.samples, &d.background, &BTreeMap::new()) {
            baseline.insert(b.flow.clone(), b.mbit);
            background.push(b);
        }
    }
    let mut rows = Vec::new();
    let mut ccs = Vec::new();
    let mut cubic_means: BTreeMap<String, f64> = BTreeMap::new();
    let together: Vec<_> = runs.iter().filter(|r| r.kind == "together").collect();
    // cubic first, so the speedups can refer to it.
    let mut order: Vec<_> = together
        .iter()
        .filter(|r| r.cc == "cubic")
        .chain(together.iter().filter(|r| r.cc != "cubic"))
        .collect();
    order.dedup_by_key(|r| r.name.clone());
    for r in order {
        if !r.ok {
            notes.push(format!(
                "run {} failed: {}",
                r.rel_dir(),
                r.error.clone().unwrap_or_default()
            ));
            continue;
        }
        let d = read_run(dir, &r.rel_dir()).with_context(|| format!("run {}", r.rel_dir()))?;
        let jobs = job_iterations(&d.records);
        let no_ecn: Vec<String> = d
            .flows
            .iter()
            .filter(|f| crate::config::NEEDS_ECN.contains(&f.cc.as_str()) && !f.ecn)
            .map(|f| format!("{} {}", f.job, f.kind))
            .collect();
        if !no_ecn.is_empty() {
            notes.push(format!(
                "run {}: {} flows of an ECN-needing cc without ECN (they ran Reno): {}",
                r.name,
                no_ecn.len(),
                no_ecn.join(", ")
            ));
        }
        net_of(&r.cc, &d, &jobs);
        let sharing = weighted_sharing(&d.flows, &d.samples, sharing_min_bytes);
        background.extend(bg_rows(&r.cc, &d.samples, &d.background, &baseline));
        let win = if jobs.len() > 1 {
            window(&jobs)
        } else {
            (0, u64::MAX)
        };
        let t = &meta.scenario.topology;
        let port = rate.and_then(|mbit| {
            let on_link = |f: &crate::emu::FlowInfo| t.crosses_bottleneck(&f.src_host, &f.dst_host);
            port_use(&d.flows, &d.samples, &jobs, on_link, win, mbit)
        });
        let mut run_rows = Vec::new();
        for (job, its) in &jobs {
            let c = counted(its, win, warm);
            let times: Vec<f64> = c.iter().map(|x| x.1).collect();
            let Some(mn) = mean(&times) else {
                notes.push(format!(
                    "run {}: job {job} has no iteration in the measured window",
                    r.name
                ));
                continue;
            };
            // Per iteration, the share of its communication phase other jobs' overlapped.
            let fr = overlap_fractions(&jobs, job);
            let il = if jobs.len() > 1 {
                interleaved_at(its, &fr, win)
            } else {
                None
            };
            let conv = il.and_then(|k| {
                mean(
                    &c.iter()
                        .filter(|x| x.0 >= k)
                        .map(|x| x.1)
                        .collect::<Vec<_>>(),
                )
            });
            let ideal = solo.get(job).map(|s| s.ideal_ms);
            let (alone, overlapped, n_bursts) = burst_split(its, &fr, win, warm);
            let alone_m_ratio = mean(&alone)
                .and_then(|a| solo.get(job).filter(|s| s.m_ms > 0.0).map(|s| a / s.m_ms));
            let overlapped_share = (n_bursts > 0).then(|| overlapped as f64 / n_bursts as f64);
            if r.cc == "cubic" {
                cubic_means.insert(job.clone(), mn);
            }
            run_rows.push(Row {
                cc: r.cc.clone(),
                job: job.clone(),
                n: times.len(),
                mean_ms: mn,
                p99_ms: percentile(&times, 99.0).unwrap_or(mn),
                speedup_vs_cubic: cubic_means.get(job).map(|c| c / mn),
                ideal_ms: ideal,
                ratio: ideal.map(|i| mn / i),
                conv_mean_ms: conv,
                conv_ratio: conv.and_then(|c| ideal.map(|i| c / i)),
                interleaved_at: il,
                tail_ratio: mean(&times[times.len() / 2..]).and_then(|t| ideal.map(|i| t / i)),
                alone_m_ratio,
                overlapped_share,
            });
        }
        if run_rows.is_empty() {
            continue;
        }
        let n = run_rows.len() as f64;
        let avg = |f: &dyn Fn(&Row) -> Option<f64>| -> Option<f64> {
            let v: Vec<f64> = run_rows.iter().filter_map(f).collect();
            (v.len() == run_rows.len()).then(|| v.iter().sum::<f64>() / n)
        };
        let means: Vec<f64> = run_rows.iter().map(|r| r.mean_ms).collect();
        ccs.push(CcSummary {
            cc: r.cc.clone(),
            mean_ms: means.iter().sum::<f64>() / n,
            p99_ms: run_rows.iter().map(|r| r.p99_ms).sum::<f64>() / n,
            ratio: avg(&|r| r.ratio),
            conv_ratio: avg(&|r| r.conv_ratio),
            tail_ratio: avg(&|r| r.tail_ratio),
            interleaved_at: if jobs.len() > 1 && run_rows.iter().all(|r| r.interleaved_at.is_some())
            {
                run_rows.iter().filter_map(|r| r.interleaved_at).max()
            } else {
                None
            },
            alone_m_ratio: avg(&|r| r.alone_m_ratio),
            overlapped_share: avg(&|r| r.overlapped_share),
            f_share: sharing.map(|x| x.f_share),
            realized_share: sharing.map(|x| x.realized_share),
            sharing_by_age: sharing.map(|x| x.by_age),
            port,
            spread: spread(&means),
            slowdown_spread: slowdown_spread(&run_rows),
            speedup_vs_cubic: avg(&|r| r.speedup_vs_cubic),
            cpu_busy: r.cpu_busy,
            cpu_saturated: r.cpu_busy.is_some_and(|b| b > CPU_BUSY_LIMIT),
        });
        rows.extend(run_rows);
    }
    Ok(Summary {
        seed,
        scenario: meta.scenario.name.clone(),
        description: meta.scenario.description.clone(),
        kernel: meta.kernel.clone(),
        solo,
        rows,
        ccs,
        net,
        background,
        notes,
    })
}

/// (max − min) / min of positive `values` (one run's jobs), as a fraction.
fn spread(values: &[f64]) -> f64 {
    let lo = values.iter().copied().fold(f64::MAX, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    (hi - lo) / lo
}

/// [`spread`] of the jobs' slowdowns ([`Row::ratio`]) over `rows` (one run's jobs); None when
/// a job has no slowdown (no ideal).
fn slowdown_spread(rows: &[Row]) -> Option<f64> {
    let ratios: Option<Vec<f64>> = rows.iter().map(|r| r.ratio).collect();
    Some(spread(&ratios?))
}

fn f1(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into())
}
fn f2(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into())
}

/// The text table of a summary.
pub fn table(s: &Summary, meta: &Meta) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "scenario {}: {} (kernel {})",
        s.scenario, s.description, s.kernel
    );
    for (job, so) in &s.solo {
        let p = meta.plans.iter().find(|p| &p.name == job);
        let _ = writeln!(
            o,
            "  solo {job} ({}): C {:.0} ms + M {:.0} ms -> ideal C+M {:.0} ms (C/M {:.2}; gradient {:.2} MB, {} workers; {} iterations)",
            meta.scenario.solo_cc,
            so.c_ms,
            so.m_ms,
            so.ideal_ms,
            so.c_ms / so.m_ms.max(1e-9),
            p.map(|p| p.gradient_bytes as f64 / 1e6).unwrap_or(0.0),
            p.map(|p| p.workers.len()).unwrap_or(0),
            so.n
        );
    }
    let _ = writeln!(
        o,
        "{:<12} {:<8} {:>4} {:>8} {:>8} {:>8} {:>8} {:>10} {:>8} {:>10} {:>11}",
        "cc",
        "job",
        "n",
        "mean_ms",
        "p99_ms",
        "speedup",
        "ideal_ms",
        "mean/ideal",
        "conv_ms",
        "conv/ideal",
        "interleaved"
    );
    for r in &s.rows {
        let _ = writeln!(
            o,
            "{:<12} {:<8} {:>4} {:>8.0} {:>8.0} {:>8} {:>8} {:>10} {:>8} {:>10} {:>11}",
            r.cc,
            r.job,
            r.n,
            r.mean_ms,
            r.p99_ms,
            f2(r.speedup_vs_cubic),
            f1(r.ideal_ms),
            f2(r.ratio),
            f1(r.conv_mean_ms),
            f2(r.conv_ratio),
            r.interleaved_at
                .map(|k| k.to_string())
                .unwrap_or_else(|| "never".into())
        );
    }
    let _ = writeln!(o, "per congestion control (means over jobs):");
    for c in &s.ccs {
        let _ = writeln!(
            o,
            "  {:<12} mean {:>5.0} ms  p99 {:>5.0} ms  speedup vs cubic {:>5}  mean/ideal {:>5}  2nd half {:>5}  after convergence {:>5}  interleaved at {:>5}  job spread {:>4.1}%",
            c.cc,
            c.mean_ms,
            c.p99_ms,
            f2(c.speedup_vs_cubic),
            f2(c.ratio),
            f2(c.tail_ratio),
            f2(c.conv_ratio),
            c.interleaved_at.map(|k| k.to_string()).unwrap_or_else(|| "never".into()),
            c.spread * 100.0
        );
    }
    let port = format!(
        "v-{} in {}{}",
        meta.scenario.topology.bottleneck,
        crate::topo::SWITCH_NS,
        meta.ecn_ports
            .iter()
            .find(|p| p.host == meta.scenario.topology.bottleneck)
            .map(|p| format!(", {} {}", p.qdisc, p.args.join(" ")))
            .unwrap_or_default()
    );
    o.push_str(&netreport::table(&s.net, &s.background, &port));
    for n in &s.notes {
        let _ = writeln!(o, "  note: {n}");
    }
    let _ = writeln!(
        o,
        "  (iteration = earliest compute start to latest comm end of the job's workers; counted while all jobs run, after {} warm-up iterations; interleaved = comm overlap < {:.0}% for {} consecutive iterations; conv = mean from that iteration on)",
        meta.scenario.warmup_iterations,
        INTERLEAVE_OVERLAP * 100.0,
        INTERLEAVE_RUN
    );
    o
}

/// Over seeds, one congestion control.
#[derive(Debug, Clone, Serialize)]
pub struct CcStats {
    /// Congestion control.
    pub cc: String,
    /// Seeds with a completed run of this cc.
    pub seeds: Vec<u64>,
    /// Mean iteration time (mean over jobs), ms: mean over seeds with 95 % interval.
    pub mean_ms: Option<Interval>,
    /// p99 iteration time (mean over jobs), ms, over seeds.
    pub p99_ms: Option<Interval>,
    /// mean / ideal (mean over jobs; each seed against its own solo runs), over seeds.
    pub ratio: Option<Interval>,
    /// mean / ideal after convergence, over the seeds whose run interleaved (n says how many).
    pub conv_ratio: Option<Interval>,
    /// mean / ideal of the second half of the counted iterations, over seeds.
    pub tail_ratio: Option<Interval>,
    /// Uncontended communication phase / solo M ([`Row::alone_m_ratio`]), over seeds.
    pub alone_m_ratio: Option<Interval>,
    /// Share of communication phases overlapped by another job's, over seeds.
    pub overlapped_share: Option<Interval>,
    /// MLTCP's intended share of the higher-F flow ([`CcSummary::f_share`]), over seeds.
    pub f_share: Option<Interval>,
    /// The share it realized, over seeds.
    pub realized_share: Option<Interval>,
    /// Both (and the higher-F flow's share of cwnd) by the age of the overlap, pooled over the
    /// seeds' intervals ([`pool_by_age`]).
    pub sharing_by_age: [Option<AgeShare>; AGE_BUCKETS],
    /// Mean rate the bottleneck carried while demanded ([`PortUse::mean_mbit`]), Mbit/s, over
    /// seeds.
    pub port_mbit: Option<Interval>,
    /// Share of its demanded periods below half its rate ([`PortUse::low_share`]), over seeds.
    pub port_low_share: Option<Interval>,
    /// Job spread (max job mean / min job mean − 1, a starvation indicator), over seeds.
    pub spread: Option<Interval>,
    /// Largest job spread of any seed.
    pub spread_max: Option<f64>,
    /// Slowdown spread ([`CcSummary::slowdown_spread`]) over seeds.
    pub slowdown_spread: Option<Interval>,
    /// The interleaving iteration over seeds.
    pub interleave: Option<InterleaveDist>,
    /// Paired against cubic: per seed this mean / cubic's mean − 1 (None for cubic itself, or
    /// without a common seed).
    pub vs_cubic: Option<Paired>,
    /// Paired against reno, likewise.
    pub vs_reno: Option<Paired>,
    /// Paired against dctcp, likewise: the base of `mltcp_dctcp` on ECN ports (None when the
    /// scenario ran no dctcp).
    pub vs_dctcp: Option<Paired>,
    /// Largest CPU busy fraction of its runs.
    pub cpu_busy_max: Option<f64>,
    /// Seeds whose run was CPU-saturated (busy > [`CPU_BUSY_LIMIT`]).
    pub cpu_saturated_seeds: Vec<u64>,
}

/// A run flagged as CPU-saturated.
#[derive(Debug, Clone, Serialize)]
pub struct SaturatedRun {
    /// Its directory under `runs/`.
    pub run: String,
    /// Busy fraction.
    pub cpu_busy: f64,
}

/// The whole analysis of a scenario directory (summary.json).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// Description.
    pub description: String,
    /// Kernel.
    pub kernel: String,
    /// Fingerprint of the scenario the runs share.
    pub scenario_fp: Option<String>,
    /// The seeds found (empty for a directory written before seeds existed).
    pub seeds: Vec<u64>,
    /// Confidence level of the intervals.
    pub level: f64,
    /// Busy fraction above which a run is flagged.
    pub cpu_busy_limit: f64,
    /// Per congestion control, over seeds (cubic first).
    pub cc_stats: Vec<CcStats>,
    /// Runs flagged as CPU-saturated: their timings are not trusted.
    pub cpu_saturated: Vec<SaturatedRun>,
    /// Per seed, the single-run analysis (solo, rows per job, ccs, net, background, notes).
    pub per_seed: Vec<Summary>,
    /// Notes: skipped ccs, failed runs, seeds missing for some cc.
    pub notes: Vec<String>,
}

fn seed_key(s: Option<u64>) -> u64 {
    s.unwrap_or(0)
}

/// Over-seed statistics of the per-seed summaries.
pub fn cc_stats(per_seed: &[Summary]) -> Vec<CcStats> {
    let mut labels: Vec<String> = Vec::new();
    for s in per_seed {
        for c in &s.ccs {
            if !labels.contains(&c.cc) {
                labels.push(c.cc.clone());
            }
        }
    }
    labels.sort_by_key(|c| (c != "cubic", c != "reno", c.clone()));
    let per_cc = |cc: &str| -> Vec<(u64, &CcSummary)> {
        per_seed
            .iter()
            .filter_map(|s| {
                s.ccs
                    .iter()
                    .find(|c| c.cc == cc)
                    .map(|c| (seed_key(s.seed), c))
            })
            .collect()
    };
    let means =
        |cc: &str| -> Vec<(u64, f64)> { per_cc(cc).iter().map(|(k, c)| (*k, c.mean_ms)).collect() };
    let (cubic, reno, dctcp) = (means("cubic"), means("reno"), means("dctcp"));
    labels
        .iter()
        .map(|cc| {
            let v = per_cc(cc);
            let col = |f: &dyn Fn(&CcSummary) -> Option<f64>| -> Option<Interval> {
                ci95(&v.iter().filter_map(|(_, c)| f(c)).collect::<Vec<_>>())
            };
            let mine = means(cc);
            CcStats {
                cc: cc.clone(),
                seeds: v.iter().map(|x| x.0).collect(),
                mean_ms: col(&|c| Some(c.mean_ms)),
                p99_ms: col(&|c| Some(c.p99_ms)),
                ratio: col(&|c| c.ratio),
                conv_ratio: col(&|c| c.conv_ratio),
                tail_ratio: col(&|c| c.tail_ratio),
                alone_m_ratio: col(&|c| c.alone_m_ratio),
                overlapped_share: col(&|c| c.overlapped_share),
                f_share: col(&|c| c.f_share),
                realized_share: col(&|c| c.realized_share),
                sharing_by_age: pool_by_age(
                    v.iter().filter_map(|(_, c)| c.sharing_by_age.as_ref()),
                ),
                port_mbit: col(&|c| c.port.map(|p| p.mean_mbit)),
                port_low_share: col(&|c| c.port.map(|p| p.low_share)),
                spread: col(&|c| Some(c.spread)),
                spread_max: v.iter().map(|(_, c)| c.spread).max_by(f64::total_cmp),
                slowdown_spread: col(&|c| c.slowdown_spread),
                interleave: interleave_dist(
                    &v.iter().map(|(_, c)| c.interleaved_at).collect::<Vec<_>>(),
                ),
                vs_cubic: (cc != "cubic")
                    .then(|| stats::paired(&mine, &cubic))
                    .flatten(),
                vs_reno: (cc != "reno")
                    .then(|| stats::paired(&mine, &reno))
                    .flatten(),
                vs_dctcp: (cc != "dctcp")
                    .then(|| stats::paired(&mine, &dctcp))
                    .flatten(),
                cpu_busy_max: v
                    .iter()
                    .filter_map(|(_, c)| c.cpu_busy)
                    .max_by(f64::total_cmp),
                cpu_saturated_seeds: v
                    .iter()
                    .filter(|(_, c)| c.cpu_saturated)
                    .map(|(k, _)| *k)
                    .collect(),
            }
        })
        .collect()
}

/// Analyses every seed of `dir` and the statistics over them.
pub fn analyse(dir: &Path, meta: &Meta) -> Result<Report> {
    let runs = discover_runs(dir, meta)?;
    let mut by_seed: BTreeMap<Option<u64>, Vec<&RunMeta>> = BTreeMap::new();
    for r in &runs {
        by_seed.entry(r.seed).or_default().push(r);
    }
    // The background-only baseline runs once per `trainemu run` (its first seed): a seed
    // without one uses the lowest seed's.
    let any_baseline: Vec<&RunMeta> = by_seed
        .values()
        .map(|v| {
            v.iter()
                .filter(|r| r.kind == "background")
                .copied()
                .collect::<Vec<_>>()
        })
        .find(|v| !v.is_empty())
        .unwrap_or_default();
    let mut notes: Vec<String> = meta
        .skipped_ccs
        .iter()
        .map(|c| format!("{c}: not offered by the kernel, not run"))
        .collect();
    let mut per_seed = Vec::new();
    for (seed, rs) in &by_seed {
        let own: Vec<&RunMeta> = rs
            .iter()
            .filter(|r| r.kind == "background")
            .copied()
            .collect();
        let baseline = if own.is_empty() { &any_baseline } else { &own };
        per_seed.push(
            analyse_seed(dir, meta, *seed, rs, baseline).with_context(|| {
                format!("seed {}", seed.map(|k| k.to_string()).unwrap_or("-".into()))
            })?,
        );
    }
    let seeds: Vec<u64> = by_seed.keys().filter_map(|k| *k).collect();
    let cc_stats = cc_stats(&per_seed);
    for c in &cc_stats {
        let missing: Vec<String> = seeds
            .iter()
            .filter(|k| !c.seeds.contains(k))
            .map(|k| k.to_string())
            .collect();
        if !missing.is_empty() {
            notes.push(format!(
                "{}: no completed run for seed(s) {}: its paired comparisons use the other seeds",
                c.cc,
                missing.join(", ")
            ));
        }
    }
    let cpu_saturated = runs
        .iter()
        .filter_map(|r| {
            r.cpu_busy
                .filter(|&b| b > CPU_BUSY_LIMIT)
                .map(|b| SaturatedRun {
                    run: r.rel_dir(),
                    cpu_busy: b,
                })
        })
        .collect();
    Ok(Report {
        scenario: meta.scenario.name.clone(),
        description: meta.scenario.description.clone(),
        kernel: meta.kernel.clone(),
        scenario_fp: runs
            .iter()
            .find_map(|r| r.scenario_fp.clone())
            .or(meta.scenario_fp.clone()),
        seeds,
        level: stats::LEVEL,
        cpu_busy_limit: CPU_BUSY_LIMIT,
        cc_stats,
        cpu_saturated,
        per_seed,
        notes,
    })
}

/// "mean [lo, hi]" with `prec` decimals (scaled by `k`), "-" when absent.
fn iv(i: &Option<Interval>, k: f64, prec: usize) -> String {
    match i {
        None => "-".into(),
        Some(i) => match (i.lo, i.hi) {
            (Some(lo), Some(hi)) => format!(
                "{:.p$} [{:.p$}, {:.p$}]",
                i.mean * k,
                lo * k,
                hi * k,
                p = prec
            ),
            _ => format!("{:.p$} (n=1)", i.mean * k, p = prec),
        },
    }
}

fn paired_text(p: &Option<Paired>) -> String {
    match p {
        None => "-".into(),
        Some(p) => format!(
            "{:+.1}% [{}, {}] over {} seeds: {}",
            p.rel_diff.mean * 100.0,
            p.rel_diff
                .lo
                .map(|x| format!("{:+.1}%", x * 100.0))
                .unwrap_or("-".into()),
            p.rel_diff
                .hi
                .map(|x| format!("{:+.1}%", x * 100.0))
                .unwrap_or("-".into()),
            p.seeds.len(),
            p.verdict.words()
        ),
    }
}

fn iter_text(k: Option<u32>) -> String {
    k.map(|k| k.to_string()).unwrap_or_else(|| "never".into())
}

/// The text of a multi-seed report: solo measurements, one line per seed and cc, and the
/// statistics over seeds.
pub fn seeds_table(r: &Report, meta: &Meta) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "scenario {}: {} (kernel {}; seeds {})",
        r.scenario,
        r.description,
        r.kernel,
        r.seeds
            .iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    let mut jobs: BTreeMap<&str, Vec<&Solo>> = BTreeMap::new();
    for s in &r.per_seed {
        for (j, so) in &s.solo {
            jobs.entry(j.as_str()).or_default().push(so);
        }
    }
    for (job, v) in &jobs {
        let col = |f: &dyn Fn(&Solo) -> f64| ci95(&v.iter().map(|s| f(s)).collect::<Vec<_>>());
        let _ = writeln!(
            o,
            "  solo {job} ({}, {} seeds): C {} ms, M {} ms, ideal C+M {} ms",
            meta.scenario.solo_cc,
            v.len(),
            iv(&col(&|s| s.c_ms), 1.0, 0),
            iv(&col(&|s| s.m_ms), 1.0, 0),
            iv(&col(&|s| s.ideal_ms), 1.0, 0)
        );
    }
    let _ = writeln!(o, "per seed (means over jobs):");
    let _ = writeln!(
        o,
        "  {:>4} {:<16} {:>8} {:>8} {:>10} {:>10} {:>11} {:>7} {:>6}",
        "seed",
        "cc",
        "mean_ms",
        "p99_ms",
        "mean/ideal",
        "conv/ideal",
        "interleaved",
        "spread",
        "cpu"
    );
    for s in &r.per_seed {
        for c in &s.ccs {
            let _ = writeln!(
                o,
                "  {:>4} {:<16} {:>8.0} {:>8.0} {:>10} {:>10} {:>11} {:>6.1}% {:>5}{}",
                s.seed.map(|k| k.to_string()).unwrap_or("-".into()),
                c.cc,
                c.mean_ms,
                c.p99_ms,
                f2(c.ratio),
                f2(c.conv_ratio),
                iter_text(c.interleaved_at),
                c.spread * 100.0,
                c.cpu_busy
                    .map(|b| format!("{:.0}%", b * 100.0))
                    .unwrap_or("-".into()),
                if c.cpu_saturated {
                    " CPU-SATURATED"
                } else {
                    ""
                }
            );
        }
    }
    let _ = writeln!(
        o,
        "over seeds ({:.0}% t intervals [lo, hi]; paired = same seed under both ccs):",
        r.level * 100.0
    );
    for c in &r.cc_stats {
        let _ = writeln!(o, "  {} ({} seeds)", c.cc, c.seeds.len());
        let _ = writeln!(
            o,
            "    mean iteration {} ms, p99 {} ms",
            iv(&c.mean_ms, 1.0, 0),
            iv(&c.p99_ms, 1.0, 0)
        );
        let _ = writeln!(
            o,
            "    mean/ideal {}; 2nd half {}; after convergence {}",
            iv(&c.ratio, 1.0, 3),
            iv(&c.tail_ratio, 1.0, 3),
            iv(&c.conv_ratio, 1.0, 3)
        );
        let _ = writeln!(
            o,
            "    uncontended bursts: M/solo M {}; bursts overlapped by another job's {} %",
            iv(&c.alone_m_ratio, 1.0, 3),
            iv(&c.overlapped_share, 100.0, 0)
        );
        if c.port_mbit.is_some() {
            let _ = writeln!(
                o,
                "    bottleneck while demanded: {} Mbit/s; below half its rate in {} % of the samples",
                iv(&c.port_mbit, 1.0, 1),
                iv(&c.port_low_share, 100.0, 0)
            );
        }
        if c.f_share.is_some() {
            let _ = writeln!(
                o,
                "    F-weighted sharing (two jobs' flows from one host at once): the higher-F flow meant {}, got {}",
                iv(&c.f_share, 1.0, 2),
                iv(&c.realized_share, 1.0, 2)
            );
            let ages: Vec<String> = c
                .sharing_by_age
                .iter()
                .enumerate()
                .filter_map(|(k, a)| {
                    a.map(|a| {
                        format!(
                            "{} {:.2}/{:.2}/{:.2}",
                            age_label(k),
                            a.f_share,
                            a.realized_share,
                            a.cwnd_share
                        )
                    })
                })
                .collect();
            let _ = writeln!(
                o,
                "      by time in the overlap (meant/got/cwnd share, all seeds' intervals): {}",
                ages.join(", ")
            );
        }
        if let Some(d) = &c.interleave {
            let _ = writeln!(
                o,
                "    interleaved at: median {}, p90 {}; within 15 iterations {:.0}%, within 30 {:.0}% of seeds; never {}",
                iter_text(d.median),
                iter_text(d.p90),
                d.within_15 * 100.0,
                d.within_30 * 100.0,
                d.never
            );
        }
        let _ = writeln!(
            o,
            "    job spread {} % (max {}); slowdown spread {} %",
            iv(&c.spread, 100.0, 1),
            c.spread_max
                .map(|x| format!("{:.1}%", x * 100.0))
                .unwrap_or("-".into()),
            iv(&c.slowdown_spread, 100.0, 1)
        );
        if c.cc != "cubic" {
            let _ = writeln!(o, "    vs cubic: {}", paired_text(&c.vs_cubic));
        }
        if c.cc != "reno" {
            let _ = writeln!(o, "    vs reno:  {}", paired_text(&c.vs_reno));
        }
        if c.vs_dctcp.is_some() {
            let _ = writeln!(o, "    vs dctcp: {}", paired_text(&c.vs_dctcp));
        }
        if !c.cpu_saturated_seeds.is_empty() {
            let _ = writeln!(
                o,
                "    CPU-saturated (untrusted) seeds: {}",
                c.cpu_saturated_seeds
                    .iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    if !r.cpu_saturated.is_empty() {
        let total: usize = r.per_seed.len().max(1);
        let _ = writeln!(
            o,
            "  warning: {} runs (of {} seeds) had their CPUs more than {:.0}% busy: CPU-saturated, timings untrusted: {}",
            r.cpu_saturated.len(),
            total,
            r.cpu_busy_limit * 100.0,
            r.cpu_saturated
                .iter()
                .map(|x| format!("{} {:.0}%", x.run, x.cpu_busy * 100.0))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    // A single seed's table (report_text) already has its net rows and notes.
    let several = r.per_seed.len() > 1;
    if let Some(first) = r.per_seed.first().filter(|_| several) {
        if !first.net.is_empty() || !first.background.is_empty() {
            let _ = writeln!(
                o,
                "seed {} (the others in summary.json):",
                first.seed.map(|k| k.to_string()).unwrap_or("-".into())
            );
            let port = format!(
                "v-{} in {}",
                meta.scenario.topology.bottleneck,
                crate::topo::SWITCH_NS
            );
            o.push_str(&netreport::table(&first.net, &first.background, &port));
        }
    }
    for s in r.per_seed.iter().filter(|_| several) {
        for n in &s.notes {
            let _ = writeln!(
                o,
                "  note (seed {}): {n}",
                s.seed.map(|k| k.to_string()).unwrap_or("-".into())
            );
        }
    }
    for n in &r.notes {
        let _ = writeln!(o, "  note: {n}");
    }
    let _ = writeln!(
        o,
        "  (iteration = earliest compute start to latest comm end of the job's workers; counted while all jobs run, after {} warm-up iterations; interleaved = comm overlap < {:.0}% for {} consecutive iterations; conv = mean from that iteration on; each seed's ideal from its own solo runs)",
        meta.scenario.warmup_iterations,
        INTERLEAVE_OVERLAP * 100.0,
        INTERLEAVE_RUN
    );
    o
}

/// The text of a report: for a single seed (or an old single-run directory) the per-job table
/// first, then the over-seed table.
pub fn report_text(r: &Report, meta: &Meta) -> String {
    let mut o = String::new();
    if let [only] = r.per_seed.as_slice() {
        o.push_str(&table(only, meta));
    }
    o.push_str(&seeds_table(r, meta));
    o
}

/// Analyses `dir`, prints the table, writes summary.txt/summary.json and (when `plots`) PNGs.
pub fn report_dir(dir: &Path, plots: bool) -> Result<()> {
    let meta = read_meta(dir)?;
    let r = analyse(dir, &meta)?;
    let t = report_text(&r, &meta);
    print!("{t}");
    fs::write(dir.join("summary.txt"), &t)?;
    fs::write(dir.join("summary.json"), serde_json::to_string_pretty(&r)?)?;
    if plots {
        // The table stands without the plots (e.g. no font installed): a warning, not a failure.
        match crate::plot::plot_dir(dir, &meta, &r) {
            Ok(written) => {
                for p in written {
                    println!("  plot: {}", p.display());
                }
            }
            Err(e) => eprintln!(
                "trainemu: warning: {}: plots not drawn: {e:#}",
                dir.display()
            ),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn it(iter: u32, start: u64, comm_start: u64, end: u64) -> JobIter {
        JobIter {
            iter,
            start,
            comm_start,
            end,
            compute_us: (comm_start - start) as f64,
        }
    }

    /// A 500 µs communication phase every 1000 µs; B's phases coincide with A's for
    /// `collide` iterations, then sit in A's compute phases (touching A's, not overlapping).
    fn sliding_pair(collide: u32) -> BTreeMap<String, Vec<JobIter>> {
        let job = |shift_from: u32| -> Vec<JobIter> {
            (0..12)
                .map(|k| {
                    let b = k as u64 * 1000 + if k < shift_from { 0 } else { 500 };
                    it(k, b, b + 500, b + 1000)
                })
                .collect()
        };
        BTreeMap::from([
            ("A".to_string(), job(u32::MAX)),
            ("B".to_string(), job(collide)),
        ])
    }

    #[test]
    fn slowdown_spread_compares_slowdowns_not_iteration_times() {
        let row = |job: &str, mean_ms: f64, ideal_ms: Option<f64>| Row {
            cc: "cubic".into(),
            job: job.into(),
            n: 10,
            mean_ms,
            p99_ms: mean_ms,
            speedup_vs_cubic: None,
            ideal_ms,
            ratio: ideal_ms.map(|i| mean_ms / i),
            conv_mean_ms: None,
            conv_ratio: None,
            interleaved_at: None,
            tail_ratio: None,
            alone_m_ratio: None,
            overlapped_share: None,
        };
        // Two jobs slowed down alike though one iterates twice as long: no spread.
        let even = [row("A", 600.0, Some(500.0)), row("B", 1200.0, Some(1000.0))];
        assert!(slowdown_spread(&even).is_some_and(|x| x.abs() < 1e-12));
        // 1.5 against 1.2: 25 %.
        let uneven = [row("A", 600.0, Some(500.0)), row("B", 1500.0, Some(1000.0))];
        assert!(slowdown_spread(&uneven).is_some_and(|x| (x - 0.25).abs() < 1e-12));
        // A job without an ideal: none.
        assert_eq!(
            slowdown_spread(&[row("A", 600.0, Some(500.0)), row("B", 900.0, None)]),
            None
        );
    }

    #[test]
    fn burst_split_separates_uncontended_from_overlapped_phases() {
        let jobs = sliding_pair(3);
        let fr = overlap_fractions(&jobs, "A");
        let (alone, overlapped, n) = burst_split(&jobs["A"], &fr, (0, u64::MAX), 0);
        assert_eq!((alone.len(), overlapped, n), (9, 3, 12));
        assert!(alone.iter().all(|&ms| (ms - 0.5).abs() < 1e-9), "{alone:?}");
        // Warm-up and the window leave iterations out of both counts.
        let (alone, overlapped, n) = burst_split(&jobs["A"], &fr, (0, 10_000), 2);
        assert_eq!((alone.len(), overlapped, n), (7, 1, 8));
        // Never separated: every phase overlapped, none uncontended.
        let jobs = sliding_pair(u32::MAX);
        let fr = overlap_fractions(&jobs, "B");
        let (alone, overlapped, n) = burst_split(&jobs["B"], &fr, (0, u64::MAX), 0);
        assert_eq!((alone.len(), overlapped, n), (0, 12, 12));
    }

    #[test]
    fn interleaving_detected_after_phases_slide_apart() {
        // Job A: comm [k*1000+500, k*1000+1000). Job B: overlapping fully for 3 iterations,
        // then shifted by 500 (comm in A's compute).
        let mut jobs = BTreeMap::new();
        jobs.insert(
            "A".to_string(),
            (0..12)
                .map(|k| {
                    it(
                        k,
                        k as u64 * 1000,
                        k as u64 * 1000 + 500,
                        k as u64 * 1000 + 1000,
                    )
                })
                .collect(),
        );
        jobs.insert(
            "B".to_string(),
            (0..12)
                .map(|k| {
                    let s = if k < 3 { 0 } else { 500 };
                    let b = k as u64 * 1000 + s;
                    it(k, b, b + 500, b + 1000)
                })
                .collect::<Vec<_>>(),
        );
        let win = (0, u64::MAX);
        let fr = overlap_fractions(&jobs, "A");
        assert_eq!(interleaved_at(&jobs["A"], &fr, win), Some(3));
        assert!(fr[0] > 0.99 && fr[5] < 0.01, "{fr:?}");
    }

    // ---- Discovery of seeds from run.json files, merged from several invocations. ----

    use crate::config::{ModelFile, Scenario};
    use crate::emu::{IterRecord, RunOutput};
    use crate::results::{scenario_fingerprint, write_run};

    const SCEN: &str = r#"
name = "m"
iterations = 12
warmup_iterations = 1
ccs = ["cubic", "reno"]
[topology]
bottleneck = "h1"
hosts = [ { name = "h1" }, { name = "h2" } ]
[[jobs]]
name = "A"
model = "vgg16"
paradigm = "ring"
workers = ["h1", "h2"]
[[jobs]]
name = "B"
model = "vgg16"
paradigm = "ring"
workers = ["h1", "h2"]
"#;

    /// Records of jobs A and B, `n` iterations of `period_ms` (compute 60 ms) each, B 50 ms
    /// later: its communication in A's compute phase (interleaved from iteration 0).
    fn records(jobs: &[&str], n: u32, period_ms: f64) -> Vec<IterRecord> {
        let p = (period_ms * 1000.0) as u64;
        let mut v = Vec::new();
        for (j, job) in jobs.iter().enumerate() {
            for k in 0..n {
                let start = k as u64 * p + j as u64 * 50_000;
                v.push(IterRecord {
                    run: "t".into(),
                    job: job.to_string(),
                    role: "worker".into(),
                    worker: 0,
                    host: "h1".into(),
                    iter: k,
                    compute_start_us: Some(start),
                    compute_end_us: Some(start + 60_000),
                    comm_start_us: start + 60_000,
                    comm_end_us: start + p,
                    bytes_sent: 1,
                    bytes_recv: 1,
                    burst_wait_us: None,
                    burst_outcome: None,
                });
            }
        }
        v
    }

    fn write(dir: &Path, r: &RunMeta, recs: Vec<IterRecord>) {
        let d = dir.join("runs").join(r.rel_dir());
        write_run(
            &d,
            &RunOutput {
                records: recs,
                ..Default::default()
            },
        )
        .unwrap();
        fs::write(d.join("run.json"), serde_json::to_string(r).unwrap()).unwrap();
    }

    fn run_meta(name: &str, kind: &str, seed: u64, fp: &str, busy: f64) -> RunMeta {
        RunMeta {
            name: name.into(),
            kind: kind.into(),
            cc: if kind == "solo" {
                "cubic".into()
            } else {
                name.into()
            },
            jobs: vec![],
            ok: true,
            error: None,
            wall_s: 1.0,
            seed: Some(seed),
            cpu_busy: Some(busy),
            scenario_fp: Some(fp.into()),
            start_offsets_ms: BTreeMap::new(),
        }
    }

    /// One invocation's directory: meta.json listing its own runs, seeds `seeds`. Cubic's
    /// iterations take 100 + seed ms, reno's 10 % less; the solo runs 90 ms.
    fn invocation(dir: &Path, seeds: &[u64], fp: &str) -> Meta {
        invocation_of(dir, seeds, fp, &[("cubic", 1.0), ("reno", 0.9)])
    }

    /// An invocation whose runs are `ccs`: each (cc, factor) takes (100 + seed) x factor ms per
    /// iteration.
    fn invocation_of(dir: &Path, seeds: &[u64], fp: &str, ccs: &[(&str, f64)]) -> Meta {
        let models = ModelFile::builtin();
        let s = Scenario::parse(SCEN, "m.toml", &models).unwrap();
        let plans = s.plans(&models);
        let mut meta = Meta {
            scenario: s,
            plans,
            runs: vec![],
            skipped_ccs: vec![],
            kernel: "test".into(),
            netns: false,
            ecn_ports: vec![],
            scenario_fp: Some(fp.into()),
            seeds: seeds.to_vec(),
        };
        for &k in seeds {
            for job in ["A", "B"] {
                let r = run_meta(&format!("solo-{job}"), "solo", k, fp, 0.3);
                write(dir, &r, records(&[job], 8, 90.0));
                meta.runs.push(r);
            }
            for &(cc, f) in ccs {
                // Seed 3's reno run had its CPUs saturated.
                let busy = if cc == "reno" && k == 3 { 0.97 } else { 0.5 };
                let r = run_meta(cc, "together", k, fp, busy);
                write(dir, &r, records(&["A", "B"], 12, (100.0 + k as f64) * f));
                meta.runs.push(r);
            }
        }
        fs::write(dir.join("meta.json"), serde_json::to_string(&meta).unwrap()).unwrap();
        meta
    }

    fn tmp(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("trainemu-report-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn runs_with_dctcp_are_paired_against_it() {
        let models = ModelFile::builtin();
        let s = Scenario::parse(SCEN, "m.toml", &models).unwrap();
        let fp = scenario_fingerprint(&s, &s.plans(&models));
        let d = tmp("dctcp");
        invocation_of(&d, &[1, 2, 3], &fp, &[("dctcp", 1.0), ("mltcp_dctcp", 0.8)]);
        let meta = read_meta(&d).unwrap();
        let r = analyse(&d, &meta).unwrap();
        let of = |cc: &str| r.cc_stats.iter().find(|c| c.cc == cc).unwrap();
        let p = of("mltcp_dctcp").vs_dctcp.as_ref().unwrap();
        assert_eq!(p.seeds, vec![1, 2, 3]);
        assert!((p.rel_diff.mean + 0.2).abs() < 0.005, "{p:?}");
        assert_eq!(p.verdict, stats::Verdict::Faster);
        assert!(of("dctcp").vs_dctcp.is_none());
        let text = report_text(&r, &meta);
        assert!(text.contains("vs dctcp:"), "{text}");
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn report_merges_disjoint_seed_subsets_and_pairs_them() {
        let models = ModelFile::builtin();
        let s = Scenario::parse(SCEN, "m.toml", &models).unwrap();
        let fp = scenario_fingerprint(&s, &s.plans(&models));
        // Two invocations (seeds 1-2 and 3-5) in two directories, merged like `cp -r runs`.
        let (a, b) = (tmp("a"), tmp("b"));
        invocation(&a, &[1, 2], &fp);
        invocation(&b, &[3, 4, 5], &fp);
        let cp = std::process::Command::new("cp")
            .arg("-r")
            .arg(b.join("runs"))
            .arg(&a)
            .status()
            .unwrap();
        assert!(cp.success());
        // meta.json is invocation a's: it lists only seeds 1-2, the runs are found anyway.
        let meta = read_meta(&a).unwrap();
        let r = analyse(&a, &meta).unwrap();
        assert_eq!(r.seeds, vec![1, 2, 3, 4, 5]);
        assert_eq!(r.per_seed.len(), 5);
        let cubic = &r.cc_stats[0];
        let reno = &r.cc_stats[1];
        assert_eq!((cubic.cc.as_str(), reno.cc.as_str()), ("cubic", "reno"));
        // Each seed's ideal is its own solo runs' 90 ms: cubic's ratio (100 + k)/90.
        let ratio = cubic.ratio.unwrap();
        assert_eq!(ratio.n, 5);
        assert!((ratio.mean - 103.0 / 90.0).abs() < 0.005, "{ratio:?}");
        assert!(ratio.lo.unwrap() < ratio.mean && ratio.hi.unwrap() > ratio.mean);
        // Paired: reno is exactly 10 % faster on every seed; a zero-width interval below 0.
        let p = reno.vs_cubic.as_ref().unwrap();
        assert_eq!(p.seeds, vec![1, 2, 3, 4, 5]);
        assert!((p.rel_diff.mean + 0.1).abs() < 0.005, "{p:?}");
        assert_eq!(p.verdict, stats::Verdict::Faster);
        assert!(cubic.vs_cubic.is_none());
        // No dctcp run: nothing is paired against it.
        assert!(cubic.vs_dctcp.is_none() && reno.vs_dctcp.is_none());
        assert_eq!(
            cubic.vs_reno.as_ref().unwrap().verdict,
            stats::Verdict::Slower
        );
        // Interleaved from the first iteration on in every seed.
        let il = cubic.interleave.as_ref().unwrap();
        assert_eq!((il.n, il.never, il.median), (5, 0, Some(0)));
        assert_eq!(il.within_15, 1.0);
        // The saturated run is flagged, in the cc's stats and the report's list.
        assert_eq!(reno.cpu_saturated_seeds, vec![3]);
        assert!(cubic.cpu_saturated_seeds.is_empty());
        assert_eq!(r.cpu_saturated.len(), 1);
        assert_eq!(r.cpu_saturated[0].run, "reno/s3");
        let text = report_text(&r, &meta);
        assert!(text.contains("CPU-saturated"), "{text}");
        assert!(text.contains("faster, excludes a loss"), "{text}");
        // summary.json carries the over-seed statistics.
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["seeds"].as_array().unwrap().len(), 5);
        assert!(
            j["cc_stats"][1]["vs_cubic"]["rel_diff"]["hi"]
                .as_f64()
                .unwrap()
                < 0.0
        );

        // A run of another scenario mixed in: a clear error naming both.
        let odd = run_meta("cubic", "together", 9, "0123456789abcdef", 0.5);
        write(&a, &odd, records(&["A", "B"], 12, 100.0));
        let e = format!("{:#}", analyse(&a, &meta).unwrap_err());
        assert!(
            e.contains("different scenarios") && e.contains("0123456789abcdef"),
            "{e}"
        );
        fs::remove_dir_all(a.join("runs/cubic/s9")).unwrap();
        // A run.json moved to another seed's directory: refused.
        fs::rename(a.join("runs/cubic/s5"), a.join("runs/cubic/s7")).unwrap();
        let e = format!("{:#}", analyse(&a, &meta).unwrap_err());
        assert!(e.contains("cubic/s7"), "{e}");
        let _ = fs::remove_dir_all(&a);
        let _ = fs::remove_dir_all(&b);
    }

    #[test]
    fn report_reads_an_old_single_run_directory() {
        let d = tmp("old");
        let models = ModelFile::builtin();
        let s = Scenario::parse(SCEN, "m.toml", &models).unwrap();
        let mut meta = Meta {
            plans: s.plans(&models),
            scenario: s,
            runs: vec![],
            skipped_ccs: vec![],
            kernel: "test".into(),
            netns: false,
            ecn_ports: vec![],
            scenario_fp: None,
            seeds: vec![],
        };
        for (name, kind, jobs, period) in [
            ("solo-A", "solo", vec!["A"], 90.0),
            ("solo-B", "solo", vec!["B"], 90.0),
            ("cubic", "together", vec!["A", "B"], 100.0),
        ] {
            let mut r = run_meta(name, kind, 0, "", 0.0);
            (r.seed, r.cpu_busy, r.scenario_fp) = (None, None, None);
            write_run(
                &d.join("runs").join(name),
                &RunOutput {
                    records: records(&jobs, 10, period),
                    ..Default::default()
                },
            )
            .unwrap();
            meta.runs.push(r);
        }
        let r = analyse(&d, &meta).unwrap();
        assert!(r.seeds.is_empty());
        assert_eq!(r.per_seed.len(), 1);
        assert_eq!(r.per_seed[0].seed, None);
        let c = &r.cc_stats[0];
        assert!((c.ratio.unwrap().mean - 100.0 / 90.0).abs() < 0.005);
        assert_eq!(c.ratio.unwrap().lo, None, "one run: no interval");
        let _ = fs::remove_dir_all(&d);
    }
}
