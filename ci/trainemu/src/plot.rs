// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! PNG plots of a scenario results directory (plotters, bitmap backend; no system libraries).
//!
//! - `throughput-<cc>.png`, one per run of all jobs together: each job's (and background flow's)
//!   throughput (Mbit/s, 50 ms bins, from the sampled tcpi_bytes_acked of its flows crossing the
//!   bottleneck in the scenario's direction) over the whole run, and zoomed on its last 8 seconds
//!   (the interleaving picture);
//!   (of the lowest seed only: seed 1, the collision, when present);
//! - `cdf.png`: CDF of the counted iteration times of all jobs and seeds, one line per congestion
//!   control, with the ideal C + M of each seed's solo runs marked;
//! - `seeds.png`: per congestion control, mean/ideal of every seed (dots) and their mean with its
//!   95 % confidence interval (error bar); beside it the paired relative difference of the mean
//!   iteration time against cubic with its 95 % interval.
//!
//! Text needs a TrueType font, read at run time: $TRAINEMU_FONT, else DejaVu Sans or Liberation
//! Sans from the usual Debian paths (package fonts-dejavu-core). Without one, no plot is drawn.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, bail, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::netreport::bin_bytes;
use crate::report::{job_iterations, window, Report};
use crate::results::{discover_runs, read_run, Meta, RunMeta};
use crate::stats::Interval;

const FONT: &str = "sans-serif";
const BIN_US: u64 = 50_000;
const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn ensure_font() -> Result<()> {
    static DONE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let mut cands: Vec<PathBuf> = std::env::var_os("TRAINEMU_FONT")
            .map(PathBuf::from)
            .into_iter()
            .collect();
        cands.extend(
            [
                "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
                "/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf",
                "/usr/share/fonts/TTF/DejaVuSans.ttf",
            ]
            .map(PathBuf::from),
        );
        for p in &cands {
            if let Ok(b) = std::fs::read(p) {
                let b: &'static [u8] = Box::leak(b.into_boxed_slice());
                if plotters::style::register_font(FONT, FontStyle::Normal, b).is_ok() {
                    return Ok(());
                }
            }
        }
        Err(format!(
            "no TrueType font found (tried {}): install fonts-dejavu-core or set TRAINEMU_FONT",
            cands
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

/// Per job: (bin start in s, Mbit/s) of its flows crossing the bottleneck.
fn throughput(dir: &Path, meta: &Meta, run: &str) -> Result<BTreeMap<String, Vec<(f64, f64)>>> {
    let d = read_run(dir, run)?;
    let t = &meta.scenario.topology;
    let mut per_flow: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    for s in &d.samples {
        per_flow
            .entry(s.flow)
            .or_default()
            .push((s.t_us, s.bytes_acked));
    }
    let end = d.samples.iter().map(|s| s.t_us).max().unwrap_or(0);
    let nbins = (end / BIN_US + 1) as usize;
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for f in &d.flows {
        if !t.crosses_bottleneck(&f.src_host, &f.dst_host) {
            continue;
        }
        let bins = out.entry(f.job.clone()).or_insert_with(|| vec![0.0; nbins]);
        if let Some(v) = per_flow.get(&f.id) {
            for (b, x) in bins.iter_mut().zip(bin_bytes(v, BIN_US, nbins)) {
                *b += x;
            }
        }
    }
    Ok(out
        .into_iter()
        .map(|(j, bins)| {
            // A step line: each bin's rate held from its start to its end.
            let pts = bins
                .iter()
                .enumerate()
                .flat_map(|(i, b)| {
                    let r = b * 8.0 / (BIN_US as f64 / 1e6) / 1e6;
                    [
                        ((i as u64 * BIN_US) as f64 / 1e6, r),
                        (((i as u64 + 1) * BIN_US) as f64 / 1e6, r),
                    ]
                })
                .collect();
            (j, pts)
        })
        .collect())
}

fn plot_throughput(dir: &Path, meta: &Meta, run: &str, cc: &str, out: &Path) -> Result<()> {
    let series = throughput(dir, meta, run)?;
    if series.is_empty() {
        bail!(
            "run {run}: no flow crosses the bottleneck {}",
            meta.scenario.topology.bottleneck
        );
    }
    let tmax = series
        .values()
        .flat_map(|v| v.iter().map(|p| p.0))
        .fold(0.0, f64::max);
    let ymax = series
        .values()
        .flat_map(|v| v.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.1;
    let root = BitMapBackend::new(out, (1400, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(450);
    let zoom = (tmax - 8.0).max(0.0);
    for (area, (x0, title)) in [
        (
            top,
            (
                0.0,
                format!(
                    "{}: per-job throughput on the bottleneck ({} {}), cc {cc}",
                    meta.scenario.name,
                    meta.scenario.topology.bottleneck,
                    meta.scenario.topology.bottleneck_direction
                ),
            ),
        ),
        (bottom, (zoom, format!("last 8 s of the run, cc {cc}"))),
    ] {
        let mut ch = ChartBuilder::on(&area)
            .caption(title, (FONT, 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d(x0..tmax.max(x0 + 0.1), 0.0..ymax)?;
        ch.configure_mesh()
            .x_desc("time since run start (s)")
            .y_desc("Mbit/s (50 ms bins)")
            .label_style((FONT, 14))
            .draw()?;
        for (i, (job, pts)) in series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            ch.draw_series(LineSeries::new(
                pts.iter().filter(|p| p.0 >= x0).cloned(),
                c.stroke_width(2),
            ))?
            .label(if meta.scenario.background.iter().any(|b| &b.name == job) {
                format!("background {job}")
            } else {
                format!("job {job}")
            })
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        }
        ch.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font((FONT, 14))
            .draw()?;
    }
    root.present()?;
    Ok(())
}

fn plot_cdf(dir: &Path, meta: &Meta, runs: &[RunMeta], s: &Report, out: &Path) -> Result<()> {
    let warm = meta.scenario.warmup_iterations;
    let mut series: Vec<(String, Vec<f64>)> = Vec::new();
    for r in runs.iter().filter(|r| r.kind == "together" && r.ok) {
        let d = read_run(dir, &r.rel_dir())?;
        let jobs = job_iterations(&d.records);
        let win = if jobs.len() > 1 {
            window(&jobs)
        } else {
            (0, u64::MAX)
        };
        let v: Vec<f64> = jobs
            .values()
            .flat_map(|its| {
                its.iter()
                    .filter(|i| i.iter >= warm && i.start >= win.0 && i.end <= win.1)
                    .map(|i| (i.end - i.start) as f64 / 1000.0)
            })
            .collect();
        match series.iter_mut().find(|(cc, _)| cc == &r.cc) {
            Some((_, all)) => all.extend(v),
            None => series.push((r.cc.clone(), v)),
        }
    }
    series.retain(|(_, v)| !v.is_empty());
    for (_, v) in &mut series {
        mlcc_stats::sort(v);
    }
    if series.is_empty() {
        bail!("no completed run of all jobs together");
    }
    let ideal: Vec<f64> = s
        .per_seed
        .iter()
        .flat_map(|p| p.solo.values().map(|x| x.ideal_ms))
        .collect();
    let xmax = series
        .iter()
        .flat_map(|(_, v)| v.last().cloned())
        .fold(0.0, f64::max)
        * 1.05;
    let xmin = series
        .iter()
        .flat_map(|(_, v)| v.first().cloned())
        .chain(ideal.iter().cloned())
        .fold(f64::MAX, f64::min)
        * 0.95;
    let root = BitMapBackend::new(out, (1000, 650)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut ch = ChartBuilder::on(&root)
        .caption(
            format!(
                "{}: iteration-time CDF (all jobs, measured window, {} seeds)",
                meta.scenario.name,
                s.per_seed.len()
            ),
            (FONT, 20),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(xmin..xmax, 0.0..1.0)?;
    ch.configure_mesh()
        .x_desc("iteration time (ms)")
        .y_desc("CDF")
        .label_style((FONT, 14))
        .draw()?;
    for (i, (cc, v)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let n = v.len() as f64;
        let pts: Vec<(f64, f64)> = v
            .iter()
            .enumerate()
            .flat_map(|(k, x)| [(*x, k as f64 / n), (*x, (k + 1) as f64 / n)])
            .collect();
        ch.draw_series(LineSeries::new(pts, c.stroke_width(2)))?
            .label(cc.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    for (k, x) in ideal.iter().enumerate() {
        let lbl = ch.draw_series(LineSeries::new(
            vec![(*x, 0.0), (*x, 1.0)],
            BLACK.stroke_width(1),
        ))?;
        if k == 0 {
            lbl.label("ideal C+M (solo)")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        }
    }
    ch.configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font((FONT, 14))
        .draw()?;
    root.present()?;
    Ok(())
}

/// One error bar: (x, mean, lo, hi); lo = hi = mean without an interval.
fn bar(x: f64, i: &Interval) -> (f64, f64, f64, f64) {
    (x, i.mean, i.lo.unwrap_or(i.mean), i.hi.unwrap_or(i.mean))
}

/// One panel of `seeds.png`: one column per congestion control (`labels`), a horizontal reference
/// line at `reference.0`, the y range covering `ys` and the reference with 10 % padding (at least
/// `reference.1`), and an error bar (x, mean, lo, hi) per entry of `bars`. Returns the chart, for
/// more series.
#[allow(clippy::too_many_arguments)]
fn interval_panel<'a, 'b>(
    area: &'a DrawingArea<BitMapBackend<'b>, plotters::coord::Shift>,
    caption: &str,
    y_desc: &str,
    labels: &[String],
    reference: (f64, f64),
    ys: &[f64],
    bars: &[(f64, f64, f64, f64)],
    color: RGBColor,
) -> Result<ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>> {
    let n = labels.len();
    let (lo, hi) = ys
        .iter()
        .copied()
        .chain([reference.0])
        .fold((f64::MAX, f64::MIN), |(a, b), y| (a.min(y), b.max(y)));
    let pad = ((hi - lo) * 0.1).max(reference.1);
    let xfmt = |x: &f64| {
        let k = x.round();
        if (x - k).abs() < 1e-6 && k >= 0.0 && (k as usize) < n {
            labels[k as usize].clone()
        } else {
            String::new()
        }
    };
    let mut ch = ChartBuilder::on(area)
        .caption(caption, (FONT, 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), (lo - pad)..(hi + pad))?;
    ch.configure_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&xfmt)
        .y_desc(y_desc)
        .label_style((FONT, 14))
        .disable_x_mesh()
        .draw()?;
    ch.draw_series(LineSeries::new(
        vec![(-0.5, reference.0), (n as f64 - 0.5, reference.0)],
        BLACK.stroke_width(1),
    ))?;
    ch.draw_series(
        bars.iter()
            .map(|&(x, m, l, h)| ErrorBar::new_vertical(x, l, m, h, color.stroke_width(2), 12)),
    )?;
    Ok(ch)
}

fn plot_seeds(s: &Report, out: &Path) -> Result<()> {
    let n = s.cc_stats.len();
    if n == 0 {
        bail!("no congestion control with a completed run");
    }
    let root = BitMapBackend::new(out, (1300, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(650);
    let labels: Vec<String> = s.cc_stats.iter().map(|c| c.cc.clone()).collect();
    // Left: mean/ideal per seed and over seeds.
    let mut pts: Vec<(f64, f64)> = Vec::new();
    for (i, c) in s.cc_stats.iter().enumerate() {
        for p in &s.per_seed {
            if let Some(r) = p.ccs.iter().find(|x| x.cc == c.cc).and_then(|x| x.ratio) {
                pts.push((i as f64, r));
            }
        }
    }
    let bars: Vec<(f64, f64, f64, f64)> = s
        .cc_stats
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.ratio.as_ref().map(|r| bar(i as f64, r)))
        .collect();
    let ys: Vec<f64> = pts
        .iter()
        .map(|p| p.1)
        .chain(bars.iter().flat_map(|b| [b.2, b.3]))
        .collect();
    interval_panel(
        &left,
        &format!("{}: mean / ideal (dots: seeds; bar: 95% CI)", s.scenario),
        "mean iteration / ideal C+M",
        &labels,
        (1.0, 0.01),
        &ys,
        &bars,
        COLORS[3],
    )?
    .draw_series(
        pts.iter()
            .map(|&(x, y)| Circle::new((x + 0.15, y), 3, COLORS[0].filled())),
    )?;
    // Right: paired difference against cubic.
    let diffs: Vec<(f64, f64, f64, f64)> = s
        .cc_stats
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            c.vs_cubic.as_ref().map(|p| {
                let (x, m, l, h) = bar(i as f64, &p.rel_diff);
                (x, m * 100.0, l * 100.0, h * 100.0)
            })
        })
        .collect();
    let dys: Vec<f64> = diffs.iter().flat_map(|b| [b.2, b.3]).collect();
    interval_panel(
        &right,
        "mean iteration vs cubic, paired over seeds (95% CI)",
        "% vs cubic (negative = faster)",
        &labels,
        (0.0, 1.0),
        &dys,
        &diffs,
        COLORS[2],
    )?;
    root.present()?;
    Ok(())
}

/// Draws every plot of `dir`; returns the files written.
pub fn plot_dir(dir: &Path, meta: &Meta, s: &Report) -> Result<Vec<PathBuf>> {
    ensure_font()?;
    let runs = discover_runs(dir, meta)?;
    let mut written = Vec::new();
    let first = runs.iter().map(|r| r.seed).min().flatten();
    for r in runs
        .iter()
        .filter(|r| r.kind == "together" && r.ok && r.seed == first)
    {
        let p = dir.join(format!("throughput-{}.png", r.name));
        let cc = match r.seed {
            Some(k) => format!("{}, seed {k}", r.cc),
            None => r.cc.clone(),
        };
        plot_throughput(dir, meta, &r.rel_dir(), &cc, &p)?;
        written.push(p);
    }
    let p = dir.join("cdf.png");
    plot_cdf(dir, meta, &runs, s, &p)?;
    written.push(p);
    let p = dir.join("seeds.png");
    plot_seeds(s, &p)?;
    written.push(p);
    Ok(written)
}
