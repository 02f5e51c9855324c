// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `trainemu`: DNN-training traffic emulator, scenario runner and report.
//!
//! ```text
//! trainemu run [--out DIR] [--models FILE] [--ccs LIST] [--iterations N] [--loopback]
//!              [--datapath module|bpf] [--seeds N | --seed-list S1,S2,...] SCENARIO...
//! trainemu report [--no-plots] DIR...
//! trainemu compare [--tolerance-pct P] DIR_A DIR_B
//! trainemu validate SCENARIO...
//! trainemu models
//! trainemu cpu-meter
//! ```
//!
//! `run` (as root, in the VM) builds each scenario's namespaces and links and, for every seed
//! (`--seeds N`: 1..=N, default 10; or `--seed-list`), runs every job alone (solo runs: M), then
//! all jobs together once per congestion control, and writes `DIR/<scenario>/` (meta.json,
//! scenario.toml, `runs/<run>/s<seed>/{run.json,iterations.jsonl,flows.json,samples.csv}`).
//! `report` reads such directories (also merged from several `run`s with disjoint seeds) and
//! prints per seed the table (mean/p99 iteration time, ideal C+M, ratio, interleaving iteration)
//! and over the seeds the means with 95 % confidence intervals and the paired comparisons against
//! cubic and reno ([`stats`]), writes summary.txt/summary.json and, unless `--no-plots`, the PNGs.
//! Exit status: 0 success, 1 failure, 2 usage error (invalid scenario).

mod agent;
mod compare;
mod cpumeter;
mod emu;
mod netreport;
mod plot;
mod portuse;
mod progress;
mod promtext;
mod queue;
mod report;
mod results;
mod sharing;
mod stats;
mod topo;

// The scenario format and the seeded draws live in their own crate (shared with mlcc-sim); they
// keep their paths here (`crate::config`, `crate::seeds`).
use trainemu_scenario::{config, seeds};

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::config::{ModelFile, Scenario};

#[derive(Parser)]
#[command(
    name = "trainemu",
    version,
    about = "DNN-training traffic emulator on real TCP sockets between network namespaces"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// A `--seed-list`.
#[derive(Clone, Debug)]
struct SeedList(Vec<u64>);

/// Parses a `--seed-list` value: comma-separated distinct seeds >= 1.
fn parse_seed_list(s: &str) -> Result<SeedList, String> {
    let mut out: Vec<u64> = Vec::new();
    for x in s.split(',') {
        let k: u64 = x
            .trim()
            .parse()
            .map_err(|_| format!("'{x}': not a seed (an integer >= 1)"))?;
        if k == 0 {
            return Err("seeds start at 1".into());
        }
        if out.contains(&k) {
            return Err(format!("seed {k} twice"));
        }
        out.push(k);
    }
    Ok(SeedList(out))
}

/// The seeds of `trainemu run`: `--seed-list` as given, else 1..=`--seeds`.
fn seeds_of(n: u64, list: Option<SeedList>) -> Vec<u64> {
    list.map(|l| l.0).unwrap_or_else(|| (1..=n).collect())
}

/// A `--ccs` list.
#[derive(Clone, Debug)]
struct CcList(Vec<String>);

/// Splits a `--ccs` value at the commas outside `[...]`.
fn parse_cc_list(s: &str) -> Result<CcList, String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for c in s.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    if out.iter().any(|c| c.is_empty()) {
        return Err(format!("'{s}': empty entry"));
    }
    Ok(CcList(out))
}

#[derive(Subcommand)]
enum Cmd {
    /// Run scenarios (root; builds network namespaces unless --loopback).
    Run {
        /// Results directory; each scenario writes `DIR/<name>/`.
        #[arg(long, default_value = "results/trainemu")]
        out: PathBuf,
        /// Model profiles (default: the built-in ci/scenarios/models.toml).
        #[arg(long)]
        models: Option<PathBuf>,
        /// Comma-separated congestion controls replacing the scenario's `ccs` (entries may carry
        /// module parameters: `cubic,mltcp[slope_fx=3072,intercept_fx=512]`).
        #[arg(long, value_parser = parse_cc_list)]
        ccs: Option<CcList>,
        /// Iterations per job, replacing the scenario's (solo runs: min(this, solo_iterations)).
        #[arg(long)]
        iterations: Option<u32>,
        /// Put every host on 127.0.0.1 in the current namespace (no root, no shaping).
        #[arg(long)]
        loopback: bool,
        /// PCN: every worker makes the progress interface's bounded `before_burst` wait, at most
        /// this many milliseconds, before each communication phase (0 = no call), replacing the
        /// scenarios' `before_burst_ms`.
        #[arg(long)]
        before_burst_ms: Option<f64>,
        /// Run every congestion control (and the solo runs) under seeds 1..=N: the seed draws the
        /// compute-time jitter and the start offsets (seed 1: the scenario's own offsets, an
        /// exact collision when they are 0). Results go to `runs/<run>/s<seed>/`.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
        /// Explicit seeds instead of 1..=N (comma-separated, each >= 1), e.g. `6,7,8,9,10` for the
        /// second half of a run split over two VMs (`report` merges the `runs/` folders).
        #[arg(long, value_parser = parse_seed_list, conflicts_with = "seeds")]
        seed_list: Option<SeedList>,
        /// Abort a run that takes longer than this, in seconds.
        #[arg(long, default_value_t = 900.0)]
        run_timeout: f64,
        /// Directory of the progress regions the workers write (the agent's progress interface,
        /// as a patched communication library does); default `$MLTCP_PROGRESS_DIR` or
        /// /dev/shm/mltcp-progress.
        #[arg(long, conflicts_with = "no_progress")]
        progress_dir: Option<PathBuf>,
        /// Do not report progress.
        #[arg(long)]
        no_progress: bool,
        /// The ccp-agent binary for `+agent` runs (default: `ccp-agent` on PATH).
        #[arg(long, default_value = "ccp-agent")]
        agent_bin: PathBuf,
        /// The datapath program ccp-agent installs in `+agent` runs (default: the VM's
        /// /host/datapath-programs/mlcc-slot.ccp if present, else datapath-programs/mlcc-slot.ccp).
        #[arg(long)]
        agent_program: Option<PathBuf>,
        /// What provides `mltcp` and the agent's datapath: `module` (tcp_mltcp.ko, the agent on
        /// `--ipc netlink`) or `bpf` (a stock kernel after `mltcp-bpf load`: `mltcp` and
        /// `mltcp_cubic` only, no module parameters, the agent on `--ipc bpf` scheduling `mltcp`
        /// flows only; other `ccs` entries are refused before anything starts).
        #[arg(long, value_enum, default_value_t = agent::Datapath::Module)]
        datapath: agent::Datapath,
        /// Scenario files (a missing a.toml/b.toml/c.toml/e2e.toml falls back to the built-in copy).
        #[arg(required = true)]
        scenarios: Vec<PathBuf>,
    },
    /// Analyse results directories: table, summary files, PNG plots.
    Report {
        /// Do not draw PNGs (e.g. in the VM).
        #[arg(long)]
        no_plots: bool,
        /// Scenario results directories (containing meta.json), or parents of them.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
    },
    /// Compare two results directories of the same scenarios (e.g. the same run repeated on the
    /// virtual clock): pairs every (seed, run, job) mean iteration time, prints the differences
    /// and exits 1 when one exceeds the tolerance or a quantity is in only one directory.
    Compare {
        /// Largest accepted relative difference, percent of the smaller value.
        #[arg(long, default_value_t = 0.5)]
        tolerance_pct: f64,
        /// First results directory (a scenario directory with meta.json, or a parent of them).
        a: PathBuf,
        /// Second results directory, likewise; scenario directories are paired by name.
        b: PathBuf,
    },
    /// Parse and validate scenario files, print the resolved jobs.
    Validate {
        /// Model profiles (default: built in).
        #[arg(long)]
        models: Option<PathBuf>,
        /// Scenario files.
        #[arg(required = true)]
        scenarios: Vec<PathBuf>,
    },
    /// Parse a Prometheus text-format exposition (a /metrics scrape) with a text-format
    /// parser and print its samples, one per line: NAME{LABELS} VALUE. Exit status 2 when a
    /// line is not in the format or there is no sample.
    Metrics {
        /// The exposition file (`-`: standard input).
        file: PathBuf,
    },
    /// Measure the busy CPU time of every CPU, to the microsecond, from now until SIGTERM or
    /// SIGINT: prints `ready` once the window has started, then
    /// `cpus N window_ns W busy_ns B idle_ns I` (one SCHED_IDLE spinner per CPU counts idle time;
    /// for CPU-per-byte benchmarks in the VM, where /proc/stat's tick samples are too coarse).
    CpuMeter,
    /// List the model profiles with their sources.
    Models {
        /// Model profiles (default: built in).
        #[arg(long)]
        models: Option<PathBuf>,
    },
    /// Build one switch port's egress shaping as a scenario's host gets it (root; its tbf, and
    /// with --classes its traffic classes installed over rtnetlink as `ccp-agent switch` does),
    /// for scripts that need the same port outside a scenario (the VM tests).
    Port {
        /// Network namespace of the port.
        #[arg(long)]
        ns: String,
        /// Device of the port.
        #[arg(long)]
        dev: String,
        /// The port's rate, Mbit/s (a host's `rate_mbit`).
        #[arg(long)]
        rate_mbit: f64,
        /// The port's queue as latency, ms (a host's `queue_ms`; default 100).
        #[arg(long)]
        queue_ms: Option<f64>,
        /// Training classes (a host's `classes = { training = N }`, 1..=8).
        #[arg(long)]
        classes: Option<u8>,
    },
}

fn load_models(p: &Option<PathBuf>) -> Result<ModelFile> {
    match p {
        None => Ok(ModelFile::builtin()),
        Some(p) => {
            let t = std::fs::read_to_string(p)
                .with_context(|| format!("{}: cannot read", p.display()))?;
            Ok(ModelFile::parse(&t, &p.display().to_string())?)
        }
    }
}

/// The scenario directories (with meta.json) `d` names: itself, or its subdirectories, sorted.
fn scenario_dirs(d: &std::path::Path) -> Result<Vec<PathBuf>> {
    if d.join("meta.json").is_file() {
        return Ok(vec![d.to_path_buf()]);
    }
    let mut sub: Vec<PathBuf> = std::fs::read_dir(d)
        .with_context(|| format!("{}: cannot read", d.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("meta.json").is_file())
        .collect();
    sub.sort();
    if sub.is_empty() {
        anyhow::bail!("{}: no meta.json in it or its subdirectories", d.display());
    }
    Ok(sub)
}

/// `trainemu compare`: Ok(true) when every scenario's quantities agree within the tolerance.
fn compare_dirs(a: &std::path::Path, b: &std::path::Path, tolerance_pct: f64) -> Result<bool> {
    anyhow::ensure!(
        tolerance_pct.is_finite() && tolerance_pct >= 0.0,
        "--tolerance-pct must be a non-negative number, not {tolerance_pct}"
    );
    let (da, db) = (scenario_dirs(a)?, scenario_dirs(b)?);
    let name = |p: &PathBuf| p.file_name().map(|n| n.to_os_string());
    // A single scenario directory on each side pairs with the other whatever their names.
    let pairs: Vec<(PathBuf, PathBuf)> = if a.join("meta.json").is_file()
        || b.join("meta.json").is_file()
    {
        anyhow::ensure!(
            da.len() == 1 && db.len() == 1,
            "{} and {}: compare a scenario directory with a scenario directory, or two parents of them",
            a.display(),
            b.display()
        );
        vec![(da[0].clone(), db[0].clone())]
    } else {
        let mut v = Vec::new();
        for x in &da {
            match db.iter().find(|y| name(y) == name(x)) {
                Some(y) => v.push((x.clone(), y.clone())),
                None => anyhow::bail!(
                    "{}: no scenario of that name in {}",
                    x.display(),
                    b.display()
                ),
            }
        }
        if let Some(y) = db.iter().find(|y| !da.iter().any(|x| name(x) == name(y))) {
            anyhow::bail!(
                "{}: no scenario of that name in {}",
                y.display(),
                a.display()
            );
        }
        v
    };
    let tol = tolerance_pct / 100.0;
    let mut all_same = true;
    for (x, y) in pairs {
        let rx = report::analyse(&x, &results::read_meta(&x)?)
            .with_context(|| format!("{}: cannot analyse", x.display()))?;
        let ry = report::analyse(&y, &results::read_meta(&y)?)
            .with_context(|| format!("{}: cannot analyse", y.display()))?;
        let c = compare::compare_means(&compare::job_means(&rx), &compare::job_means(&ry));
        println!("== {} vs {}", x.display(), y.display());
        print!("{}", c.text(tol));
        all_same &= c.within(tol);
    }
    Ok(all_same)
}

/// Validation errors exit with 2, everything else with 1.
struct UsageError(anyhow::Error);

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::stderr().is_terminal()
        && std::env::var("TERM").map(|t| t != "dumb").unwrap_or(false);
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .init();
    let cli = Cli::parse();
    match real_main(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Err(UsageError(e))) => {
            eprintln!("trainemu: invalid input: {e:#}");
            ExitCode::from(2)
        }
        Err(Ok(e)) => {
            eprintln!("trainemu: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn real_main(cli: Cli) -> std::result::Result<(), std::result::Result<anyhow::Error, UsageError>> {
    match cli.cmd {
        Cmd::Run {
            out,
            models,
            ccs,
            iterations,
            before_burst_ms,
            loopback,
            run_timeout,
            progress_dir,
            no_progress,
            agent_bin,
            agent_program,
            datapath,
            seeds,
            seed_list,
            scenarios,
        } => {
            let seeds = seeds_of(seeds, seed_list);
            let agent_program = agent_program.unwrap_or_else(|| {
                let vm = PathBuf::from("/host/datapath-programs/mlcc-slot.ccp");
                if vm.is_file() {
                    vm
                } else {
                    PathBuf::from("datapath-programs/mlcc-slot.ccp")
                }
            });
            let agent_setup = agent::AgentSetup {
                bin: agent_bin,
                program: agent_program,
                datapath,
            };
            let progress = match (no_progress, progress_dir) {
                (true, _) => progress::ProgressDir::Off,
                (false, Some(d)) => progress::ProgressDir::Dir(d),
                (false, None) => progress::ProgressDir::Default,
            };
            let models = load_models(&models).map_err(|e| Err(UsageError(e)))?;
            // Everything is validated before anything starts.
            let mut loaded = Vec::new();
            for p in &scenarios {
                let (mut s, text) = Scenario::load(p, &models).map_err(|e| Err(UsageError(e)))?;
                if let Some(c) = &ccs {
                    s.ccs = c.0.clone();
                }
                if let Some(n) = iterations {
                    s.iterations = n;
                    s.solo_iterations = s.solo_iterations.min(n);
                    for j in &mut s.jobs {
                        j.iterations = None;
                    }
                    s.warmup_iterations = s.warmup_iterations.min(n.saturating_sub(1));
                }
                if let Some(ms) = before_burst_ms {
                    s.before_burst_ms = Some(ms);
                }
                s.validate(&p.display().to_string(), &models)
                    .map_err(|e| Err(UsageError(e)))?;
                datapath
                    .check_scenario(&s)
                    .map_err(|e| Err(UsageError(anyhow::anyhow!("{}: {e}", p.display()))))?;
                if let Some(c) = s.ccs.iter().find(|c| c.contains("+agent")) {
                    if loopback {
                        return Err(Err(UsageError(anyhow::anyhow!(
                            "{}: ccs entry '{c}': ccp-agent runs need the namespaces' addresses (not --loopback)",
                            p.display()
                        ))));
                    }
                    if no_progress {
                        return Err(Err(UsageError(anyhow::anyhow!(
                            "{}: ccs entry '{c}': ccp-agent learns of the jobs through the progress regions (not --no-progress)",
                            p.display()
                        ))));
                    }
                }
                loaded.push((s, text));
            }
            let opts = results::RunOptions {
                loopback,
                run_timeout,
                progress,
                agent: agent_setup,
                seeds,
            };
            for (s, text) in &loaded {
                results::run_scenario(s, text, &models, &out, &opts).map_err(Ok)?;
            }
            Ok(())
        }
        Cmd::CpuMeter => {
            let sigs = cpumeter::block_stop_signals().map_err(Ok)?;
            cpumeter::measure(&mut std::io::stdout(), || cpumeter::wait_stop_signal(&sigs))
                .map(|_| ())
                .map_err(Ok)
        }
        Cmd::Compare {
            tolerance_pct,
            a,
            b,
        } => match compare_dirs(&a, &b, tolerance_pct) {
            Ok(true) => Ok(()),
            Ok(false) => Err(Ok(anyhow::anyhow!(
                "{} and {} differ by more than {tolerance_pct} % (see above)",
                a.display(),
                b.display()
            ))),
            Err(e) => Err(Ok(e)),
        },
        Cmd::Report { no_plots, dirs } => {
            let mut found = Vec::new();
            for d in &dirs {
                found.extend(scenario_dirs(d).map_err(Ok)?);
            }
            let mut failed = Vec::new();
            for d in &found {
                if let Err(e) = report::report_dir(d, !no_plots) {
                    eprintln!("trainemu: report {}: {e:#}", d.display());
                    failed.push(d.display().to_string());
                }
            }
            if !failed.is_empty() {
                return Err(Ok(anyhow::anyhow!(
                    "report failed for {}",
                    failed.join(", ")
                )));
            }
            Ok(())
        }
        Cmd::Validate { models, scenarios } => {
            let models = load_models(&models).map_err(|e| Err(UsageError(e)))?;
            for p in &scenarios {
                let (s, _) = Scenario::load(p, &models).map_err(|e| Err(UsageError(e)))?;
                println!(
                    "{}: ok: scenario {} ({})",
                    p.display(),
                    s.name,
                    s.description
                );
                for j in s.plans(&models) {
                    println!(
                        "  job {:<8} {:<14} {:?} W={} compute {:.0} ms, gradient {} bytes, {} iterations, offset {} ms, jitter {:?} cv {} per {:?}",
                        j.name, j.model, j.paradigm, j.workers.len(), j.compute_ms, j.gradient_bytes, j.iterations, j.start_offset_ms,
                        j.jitter.dist, j.jitter.cv, j.jitter.per
                    );
                }
                let plans = s.plans(&models);
                println!(
                    "  seeded start offsets of jobs 2..: + uniform [0, {:.0}) ms (none under seed 1)",
                    s.start_width_ms(&plans)
                );
                for b in &s.background {
                    let stop = b
                        .stop_ms
                        .map(|m| format!("{m} ms"))
                        .unwrap_or_else(|| "the jobs' end".into());
                    println!(
                        "  background {:<8} {} -> {} cc {}, from {} ms to {stop}",
                        b.name, b.from, b.to, b.cc, b.start_ms
                    );
                }
                for p in topo::ecn_ports(&s) {
                    println!(
                        "  ECN port {} in {}: tc qdisc ... parent {} handle {} {} {}",
                        p.dev,
                        p.netns,
                        p.parent,
                        p.handle,
                        p.qdisc,
                        p.args.join(" ")
                    );
                }
                if let Some(d) = s.before_burst() {
                    println!("  workers call before_burst (at most {} µs) before each communication phase", d.as_micros());
                }
            }
            Ok(())
        }
        Cmd::Metrics { file } => {
            let text = if file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())
            } else {
                std::fs::read_to_string(&file)
            }
            .with_context(|| format!("{}: cannot read", file.display()))
            .map_err(|e| Err(UsageError(e)))?;
            let samples = promtext::samples(&text)
                .with_context(|| file.display().to_string())
                .map_err(|e| Err(UsageError(e)))?;
            for s in samples {
                println!("{s}");
            }
            Ok(())
        }
        Cmd::Port {
            ns,
            dev,
            rate_mbit,
            queue_ms,
            classes,
        } => {
            let h =
                topo::port_host(rate_mbit, queue_ms, classes).map_err(|e| Err(UsageError(e)))?;
            topo::shape(&ns, &dev, &h, true).map_err(Ok)?;
            Ok(())
        }
        Cmd::Models { models } => {
            let models = load_models(&models).map_err(|e| Err(UsageError(e)))?;
            for (k, m) in &models.models {
                println!(
                    "{k:<14} {:<16} {:>7.1} M params {:>14} B/iter  compute {:>5.0} ms{}  scale {} -> {:.2} MB",
                    m.display,
                    m.params_millions,
                    m.bytes_per_iteration,
                    m.compute_ms,
                    if m.compute_estimated { " (est.)" } else { "" },
                    m.scale,
                    m.bytes_per_iteration as f64 * m.scale / 1e6
                );
                println!("    bytes:   {}", m.source_bytes);
                println!("    compute: {}", m.source_compute);
                println!("    scale:   {}", m.scale_note);
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `trainemu run --datapath` takes `module` (the default) or `bpf`, nothing else.
    #[test]
    fn run_takes_a_datapath() {
        let datapath = |args: &[&str]| {
            let cli = Cli::try_parse_from(args).map_err(|e| e.to_string())?;
            match cli.cmd {
                Cmd::Run { datapath, .. } => Ok(datapath),
                _ => Err("not run".to_string()),
            }
        };
        assert_eq!(
            datapath(&["trainemu", "run", "--datapath", "bpf", "a.toml"]),
            Ok(agent::Datapath::Bpf)
        );
        assert_eq!(
            datapath(&["trainemu", "run", "a.toml"]),
            Ok(agent::Datapath::Module)
        );
        assert!(datapath(&["trainemu", "run", "--datapath", "ebpf", "a.toml"]).is_err());
    }
}
