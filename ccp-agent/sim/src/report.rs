// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Results of a run: per policy, JCT (average, p50, p99, max), iteration-time slowdown against
//! the job alone, link utilisation, decision times; printed as a table, written as JSON, and
//! the JCT CDFs drawn as a PNG.
//!
//! Definitions:
//! - JCT: finish − arrival (queueing for GPUs included), seconds;
//! - slowdown of a job: its mean iteration time ((finish − launch) / iterations, Cassini's waits
//!   included) over its iteration time alone on the same placement (compute + communication with
//!   fair sharing and no other job);
//! - link utilisation: bytes carried / (capacity × makespan), averaged over the network links that
//!   carried any traffic (servers' internal links are not the network and are left out), overall
//!   and per tier;
//! - decision time: wall time of one call of the policy's decision (all active flows of the
//!   cluster), µs; mlcc also reports each flow's decision (its JSON `policy` section).

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde::Serialize;
use serde_json::Value;

use crate::sim::{Phase, Sim};
use crate::topo::Tier;

/// Average, median, 99th percentile and maximum of a sample.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Stats {
    /// Number of values.
    pub n: usize,
    /// Mean.
    pub avg: f64,
    /// Median (nearest rank).
    pub p50: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

impl Stats {
    /// Statistics of `v` (all zero when empty).
    pub fn of(v: &[f64]) -> Stats {
        if v.is_empty() {
            return Stats::default();
        }
        let mut s = v.to_vec();
        mlcc_stats::sort(&mut s);
        let rank = |q: f64| mlcc_stats::quantile_sorted(&s, q).unwrap_or(0.0);
        Stats {
            n: s.len(),
            avg: s.iter().sum::<f64>() / s.len() as f64,
            p50: rank(0.5),
            p99: rank(0.99),
            max: s[s.len() - 1],
        }
    }
}

/// Link utilisation over the run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Utilisation {
    /// Mean over links that carried traffic.
    pub used_links_mean: f64,
    /// Same, server links only.
    pub server_links_mean: f64,
    /// Same, ToR uplinks/downlinks only.
    pub tor_links_mean: f64,
    /// Same, edge uplinks/downlinks only.
    pub edge_links_mean: f64,
    /// Links that carried traffic.
    pub used_links: usize,
}

/// Decision-time summary, µs.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Decisions {
    /// Calls.
    pub count: u64,
    /// Mean, µs.
    pub mean_us: f64,
    /// Median, µs.
    pub p50_us: f64,
    /// 90th percentile, µs.
    pub p90_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// CDF points (µs, fraction).
    pub cdf: Vec<(f64, f64)>,
}

/// One policy's results.
#[derive(Clone, Debug, Serialize)]
pub struct PolicyResult {
    /// Policy name.
    pub policy: String,
    /// Wall time of the run, seconds.
    pub wall_s: f64,
    /// Events processed.
    pub events: u64,
    /// Simulated time at the end, seconds.
    pub makespan_s: f64,
    /// Jobs submitted.
    pub jobs: usize,
    /// Jobs finished.
    pub finished: usize,
    /// JCT, seconds (finished jobs).
    pub jct_s: Stats,
    /// Iteration-time slowdown against alone (finished jobs).
    pub slowdown: Stats,
    /// Waiting for GPUs, seconds (launched jobs).
    pub queue_s: Stats,
    /// Link utilisation.
    pub utilisation: Utilisation,
    /// Decision times.
    pub decisions: Decisions,
    /// Policy-specific results.
    pub policy_report: Value,
    /// Every finished job's JCT, seconds, in job order (for CDFs and comparisons).
    pub jcts: Vec<f64>,
}

/// Summarises a finished run.
pub fn summarise(sim: &Sim, policy: &str, wall_s: f64, policy_report: Value) -> PolicyResult {
    let done: Vec<_> = sim.jobs.iter().filter(|j| j.phase == Phase::Done).collect();
    let jcts: Vec<f64> = done.iter().map(|j| j.finish_s - j.spec.arrival_s).collect();
    let slow: Vec<f64> = done
        .iter()
        .filter(|j| j.alone_iter_s > 0.0)
        .map(|j| (j.finish_s - j.start_s) / f64::from(j.spec.iterations) / j.alone_iter_s)
        .collect();
    let queue: Vec<f64> = sim
        .jobs
        .iter()
        .filter(|j| j.start_s.is_finite())
        .map(|j| j.start_s - j.spec.arrival_s)
        .collect();
    let span = sim.t.max(1e-9);
    let mut per: [(f64, usize); 4] = [(0.0, 0); 4];
    for (l, b) in sim.link_bytes.iter().enumerate() {
        if *b <= 0.0 {
            continue;
        }
        let u = b / (sim.tree.capacity[l] * span);
        let k = match sim.tree.tier[l] {
            Tier::Server => 1,
            Tier::Tor => 2,
            Tier::Edge => 3,
            Tier::Intra => continue, // not the network
        };
        for i in [0, k] {
            per[i].0 += u;
            per[i].1 += 1;
        }
    }
    let mean = |x: (f64, usize)| if x.1 == 0 { 0.0 } else { x.0 / x.1 as f64 };
    let h = &sim.decisions;
    PolicyResult {
        policy: policy.to_string(),
        wall_s,
        events: sim.events,
        makespan_s: sim.t,
        jobs: sim.jobs.len(),
        finished: done.len(),
        jct_s: Stats::of(&jcts),
        slowdown: Stats::of(&slow),
        queue_s: Stats::of(&queue),
        utilisation: Utilisation {
            used_links_mean: mean(per[0]),
            server_links_mean: mean(per[1]),
            tor_links_mean: mean(per[2]),
            edge_links_mean: mean(per[3]),
            used_links: per[0].1,
        },
        decisions: Decisions {
            count: h.count,
            mean_us: h.sum_us / h.count.max(1) as f64,
            p50_us: h.quantile_us(0.5),
            p90_us: h.quantile_us(0.9),
            p99_us: h.quantile_us(0.99),
            cdf: h.cdf(),
        },
        policy_report,
        jcts,
    }
}

/// The stdout table.
pub fn table(results: &[PolicyResult]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:<16} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6} {:>6} {:>9} {:>9} {:>8} {:>9}\n",
        "policy",
        "JCT avg",
        "JCT p50",
        "JCT p99",
        "JCT max",
        "slow",
        "slow99",
        "util",
        "srv",
        "dec p50",
        "dec p99",
        "done",
        "wall s"
    ));
    for r in results {
        s.push_str(&format!(
            "{:<16} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>7.2} {:>7.2} {:>6.3} {:>6.3} {:>9.1} {:>9.1} {:>8} {:>9.1}\n",
            r.policy,
            r.jct_s.avg,
            r.jct_s.p50,
            r.jct_s.p99,
            r.jct_s.max,
            r.slowdown.avg,
            r.slowdown.p99,
            r.utilisation.used_links_mean,
            r.utilisation.server_links_mean,
            r.decisions.p50_us,
            r.decisions.p99_us,
            format!("{}/{}", r.finished, r.jobs),
            r.wall_s
        ));
    }
    s.push_str("(JCT in s; slow = mean iteration time / alone; util = mean utilisation of used links, srv = server links; dec = decision time in µs)\n");
    s
}

const FONT: &str = "sans-serif";

/// Registers a TrueType font for plot text: `$MLCC_SIM_FONT`, else DejaVu Sans or Liberation Sans
/// at their Debian paths (package fonts-dejavu-core), as trainemu's plots do.
fn register_font() -> Result<(), String> {
    let mut paths: Vec<PathBuf> = std::env::var_os("MLCC_SIM_FONT")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    paths.push("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf".into());
    paths.push("/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf".into());
    for p in &paths {
        if let Ok(bytes) = std::fs::read(p) {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok() {
                return Ok(());
            }
        }
    }
    Err("no TrueType font found: install fonts-dejavu-core or set MLCC_SIM_FONT".into())
}

/// Draws the JCT CDF of every policy into `path` (PNG, 1000×650).
pub fn plot_jct_cdf(results: &[PolicyResult], path: &Path) -> Result<(), String> {
    register_font()?;
    let max = results
        .iter()
        .flat_map(|r| r.jcts.iter().copied())
        .fold(1.0, f64::max);
    let root = BitMapBackend::new(path, (1000, 650)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption("JCT CDF per policy", (FONT, 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d((1.0f64..max * 1.05).log_scale(), 0.0f64..1.0)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("job completion time (s)")
        .y_desc("fraction of jobs")
        .label_style((FONT, 14))
        .draw()
        .map_err(|e| e.to_string())?;
    for (k, r) in results.iter().enumerate() {
        let mut v = r.jcts.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len().max(1) as f64;
        let color = Palette99::pick(k).to_rgba();
        let pts: Vec<(f64, f64)> = v
            .iter()
            .enumerate()
            .map(|(i, x)| (x.max(1.0), (i + 1) as f64 / n))
            .collect();
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(r.policy.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}
