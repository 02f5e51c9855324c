// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `mlcc-sim`: runs the cluster simulator once per policy on the same workload and prints the
//! comparison table; writes `results.json` and `jct-cdf.png` to `--out`. With the environment
//! variable `MLCC_SIM_TRACE` set, it also prints to stderr, every 4096 events, the simulated
//! time, the events so far, the flows in the allocation, the sizes of the largest connected
//! components of the active flows, and the incremental allocation's counters (solves, rounds,
//! flows re-solved, full solves).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

use dnn_profiles::ModelFile;
use mlcc_sim::report::{plot_jct_cdf, summarise, table};
use mlcc_sim::sim::{Placement, Sim, SimConfig};
use mlcc_sim::topo::{Tree, TreeConfig};
use mlcc_sim::workload::{generate, read_trace, WorkloadConfig};
use mlcc_sim::{make_policy, scenario, PolicyConfig, POLICIES};

/// mimalloc instead of the system allocator: the policies' per-slot plans allocate and free many
/// small buffers (glibc's malloc and free were ~17 % of the mlcc policy's run).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Trace-driven cluster simulator: fair TCP, MLTCP, MCS, CCML, Cassini and the mlcc scheduler on
/// the tree of the mlcc paper's Sec. VII.
#[derive(Parser, Debug)]
#[command(version)]
struct Cli {
    /// Policies to run, comma separated, or `all` (every one: fair, mltcp, mcs, ccml, cassini,
    /// cassini+mltcp, mlcc, mlcc-il, cassini+mlcc-il, priority, cassini+priority, priority-fc,
    /// priority-edf, priority-sedf).
    #[arg(
        long,
        default_value = "fair,mltcp,mcs,ccml,cassini,cassini+mltcp,mlcc,priority,cassini+priority",
        value_delimiter = ','
    )]
    policies: Vec<String>,
    /// Servers.
    #[arg(long, default_value_t = 1000)]
    servers: u32,
    /// GPUs per server.
    #[arg(long, default_value_t = 8)]
    gpus_per_server: u32,
    /// Servers per rack (ToR).
    #[arg(long, default_value_t = 10)]
    servers_per_rack: u32,
    /// Racks per edge switch.
    #[arg(long, default_value_t = 10)]
    racks_per_edge: u32,
    /// Server link speed, Gbit/s.
    #[arg(long, default_value_t = 10.0)]
    server_gbps: f64,
    /// ToR uplink speed, Gbit/s.
    #[arg(long, default_value_t = 20.0)]
    tor_gbps: f64,
    /// Edge uplink speed, Gbit/s.
    #[arg(long, default_value_t = 40.0)]
    edge_gbps: f64,
    /// Speed of a server's internal fabric between two of its GPUs, Gbit/s per direction
    /// (default: about a PCIe 3.0 x16 link, 126 Gbit/s raw, ~100 usable).
    #[arg(long, default_value_t = mlcc_sim::topo::DEFAULT_INTRA_GBPS)]
    intra_gbps: f64,
    /// Placement of a job's workers and parameter servers on GPUs: `packed` (one server if one
    /// has room, else the fewest servers of one rack, one edge, the cluster; flows between GPUs
    /// of a server stay off the network) or `spread` (one GPU on each of distinct servers,
    /// first-fit: every flow crosses the network; the placement of the earlier results).
    #[arg(long, default_value = "packed")]
    placement: Placement,
    /// Jobs to generate.
    #[arg(long, default_value_t = 1000)]
    jobs: u32,
    /// Arrival window, seconds.
    #[arg(long, default_value_t = 3600.0)]
    window_s: f64,
    /// Fewest iterations per job.
    #[arg(long, default_value_t = 200)]
    iter_min: u32,
    /// Most iterations per job.
    #[arg(long, default_value_t = 1000)]
    iter_max: u32,
    /// RNG seed of the workload.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Read the jobs from this CSV trace instead (arrival_s,model,paradigm,workers,iterations).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Run a VM testbed scenario instead (`ci/scenarios/*.toml`, or a built-in one's name such
    /// as `a.toml`): its jobs on its hosts, a star with its port rates (the `scenario` module of
    /// the library), once per seed; prints each policy's mean iteration time per job beside the
    /// job's ideal and writes `scenario-results.json`. The tree and workload options are ignored.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// With `--scenario`: seeds 1..=N of the start offsets (trainemu's own seeded offsets; seed 1
    /// is the scenario's fixed offsets).
    #[arg(long, default_value_t = 10)]
    seeds: u64,
    /// With `--scenario`: a VM results summary of the same scenario (summary.json written by
    /// `trainemu report` / `ci/scenarios/run-scenario.sh`; repeatable) to compare with: each
    /// `--pair`'s mean iteration time per job, simulator against VM, over the seeds both have.
    #[arg(long)]
    vm_summary: Vec<PathBuf>,
    /// With `--vm-summary`: which policy to set against which VM run, `POLICY=CC` (repeatable;
    /// default `fair=cubic` and `mltcp=mltcp`), e.g. `priority=mltcp+agent+rules=priority`.
    /// With two or more, each later pair's gain over the first is also printed, paired by seed
    /// in the simulator and in the VM (`gain` in scenario-results.json): e.g. `--pair
    /// fair=cubic --pair priority-edf=mltcp+agent` asks whether the VM keeps the relative gain
    /// over fair sharing that the fluid model predicts for the agent's rule.
    #[arg(long, value_parser = parse_pair)]
    pair: Vec<(String, String)>,
    /// With `--scenario`: compute phases as the VM runs them (`seeded`: trainemu's seeded
    /// compute-time jitter, each iteration as long as the job's slowest worker's draw) or
    /// `mean` (every iteration the profile's mean: no noise, so identical jobs that start
    /// together stay in lock-step under a symmetric policy).
    #[arg(long, value_enum, default_value_t = ComputeArg::Seeded)]
    compute: ComputeArg,
    /// Model profiles (default: the built-in ci/scenarios/models.toml).
    #[arg(long)]
    models: Option<PathBuf>,
    /// mlcc slot length, ms (default: the paper's, mlcc_sched::PAPER_SLOT_US; ccp-agent's own
    /// default is mlcc_sched::DEFAULT_SLOT_US).
    #[arg(long, default_value_t = mlcc_sched::PAPER_SLOT_US / 1000)]
    slot_ms: u64,
    /// mlcc horizon K, slots (default: mlcc_sched::DEFAULT_HORIZON).
    #[arg(long, default_value_t = mlcc_sched::DEFAULT_HORIZON)]
    horizon: usize,
    /// MLTCP: re-evaluate F when a bytes_ratio may have moved by this much (0: only at events).
    #[arg(long, default_value_t = mlcc_sim::policy::mltcp::DEFAULT_RATIO_STEP)]
    mltcp_ratio_step: f64,
    /// MLTCP: where in a step F is sampled: `midpoint` (F's mean over the step) or `start`
    /// (the bytes_ratio now, the simulator's earlier rule).
    #[arg(long, value_enum, default_value = "midpoint")]
    mltcp_f_at: mlcc_sim::policy::mltcp::FSample,
    /// CCML: weight ratio between priority levels.
    #[arg(long, default_value_t = 4.0)]
    ccml_ratio: f64,
    /// Cassini: candidate placements.
    #[arg(long, default_value_t = 3)]
    cassini_candidates: usize,
    /// Cassini: angles sampled on a unified circle.
    #[arg(long, default_value_t = 60)]
    cassini_angles: usize,
    /// Strict-priority traffic classes of `priority`, `cassini+priority`, `priority-fc`,
    /// `priority-edf` and `priority-sedf`: 0 = unlimited levels; 1-8 = the jobs' ranks compressed onto N classes by
    /// ccp-agent's own rule (`[sched] classes`), strict priority between classes (weight ratio
    /// 1000, work-conserving), max-min fair within one.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=i64::from(mlcc_sched::MAX_CLASSES)))]
    classes: u8,
    /// Smallest time step, ms (events closer than this are handled together).
    #[arg(long, default_value_t = 1.0)]
    min_step_ms: f64,
    /// Stop simulating at this simulated time, s.
    #[arg(long, default_value_t = 1.0e6)]
    max_time_s: f64,
    /// Output directory (results.json, jct-cdf.png).
    #[arg(long, default_value = "sim-results")]
    out: PathBuf,
    /// Re-solve the whole max-min allocation at every event (slow reference for the incremental one).
    #[arg(long)]
    full_alloc: bool,
    /// Reference mode for mlcc, MCS and MLTCP: re-plan every mlcc unit at every slot, re-decide
    /// every MCS coflow at every event and re-evaluate F of every MLTCP job, instead of reusing
    /// unchanged plans, re-deciding only the components an event reaches and skipping jobs alone
    /// on their links (slow at scale; the approximations are measured against it).
    #[arg(long)]
    exact: bool,
    /// mlcc: re-plan a plan that does not complete within the horizon when it is half a horizon
    /// old, instead of rolling it forward (the earlier approximation, to measure the roll).
    #[arg(long)]
    no_extend: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut cli = Cli::parse();
    if cli.policies.iter().any(|p| p == "all") {
        cli.policies = POLICIES.iter().map(|p| p.to_string()).collect();
    }
    let models = match &cli.models {
        None => ModelFile::builtin(),
        Some(p) => {
            let t = std::fs::read_to_string(p)
                .with_context(|| format!("{}: cannot read", p.display()))?;
            ModelFile::parse(&t, &p.display().to_string())?
        }
    };
    let pcfg = PolicyConfig {
        slot_us: cli.slot_ms.saturating_mul(1000),
        horizon: cli.horizon,
        mltcp_ratio_step: cli.mltcp_ratio_step,
        mltcp_sample: cli.mltcp_f_at,
        ccml_ratio: cli.ccml_ratio,
        cassini_candidates: cli.cassini_candidates,
        cassini_angles: cli.cassini_angles,
        exact: cli.exact,
        no_extend: cli.no_extend,
        classes: cli.classes,
    };
    let scfg = SimConfig {
        placement: cli.placement,
        min_step_s: cli.min_step_ms / 1000.0,
        max_time_s: cli.max_time_s,
        record: false,
        full_alloc: cli.full_alloc,
        deps: None,
    };
    for p in &cli.policies {
        if !POLICIES.contains(&p.as_str()) {
            anyhow::bail!(
                "--policies: unknown policy '{p}' (known: {})",
                POLICIES.join(", ")
            );
        }
    }
    if let Some(path) = &cli.scenario {
        return run_scenario(&cli, path, &models, &pcfg, &scfg);
    }
    let tree = Tree::new(TreeConfig {
        servers: cli.servers,
        gpus_per_server: cli.gpus_per_server,
        servers_per_rack: cli.servers_per_rack,
        racks_per_edge: cli.racks_per_edge,
        server_gbps: cli.server_gbps,
        tor_gbps: cli.tor_gbps,
        edge_gbps: cli.edge_gbps,
        intra_gbps: cli.intra_gbps,
    })?;
    let wl = WorkloadConfig {
        jobs: cli.jobs,
        window_s: cli.window_s,
        iter_min: cli.iter_min,
        iter_max: cli.iter_max,
        seed: cli.seed,
    };
    let jobs = match &cli.trace {
        Some(p) => read_trace(p, &models)?,
        None => generate(&wl, &models)?,
    };
    std::fs::create_dir_all(&cli.out)
        .with_context(|| format!("{}: cannot create", cli.out.display()))?;
    tracing::info!(
        servers = cli.servers,
        jobs = jobs.len(),
        last_arrival_s = jobs.last().map_or(0.0, |j| j.arrival_s),
        "workload ready"
    );
    let mut results = Vec::new();
    for name in &cli.policies {
        let mut policy = make_policy(name, &pcfg, &tree.capacity)?;
        let mut sim = Sim::new(tree.clone(), scfg.clone(), jobs.clone())?;
        let bar = if cli.quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(sim.jobs.len() as u64)
        };
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>14} [{bar:30}] {pos}/{len} jobs {msg} ({elapsed})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_prefix(name.clone());
        let t0 = Instant::now();
        sim.run(policy.as_mut(), &mut |s: &Sim| {
            let done = s.jobs.iter().filter(|j| j.phase == mlcc_sim::sim::Phase::Done).count();
            bar.set_position(done as u64);
            bar.set_message(format!("t = {:.0} s, {} events, {} active flows", s.t, s.events, s.allocated_flows()));
            if std::env::var_os("MLCC_SIM_TRACE").is_some() {
                let c = s.component_sizes();
                eprintln!("t={:.1} events={} active={} comps={} largest={:?} alloc(solves, rounds, flows, full)={:?}", s.t, s.events, s.allocated_flows(), c.len(), &c[..c.len().min(5)], s.alloc_stats());
            }
        });
        bar.finish_and_clear();
        let wall = t0.elapsed().as_secs_f64();
        tracing::info!(policy = %name, wall_s = wall, events = sim.events, sim_s = sim.t, "policy done");
        results.push(summarise(&sim, name, wall, policy.report()));
    }
    print!("{}", table(&results));
    let json = serde_json::json!({
        "setting": {
            "tree": tree.config,
            "workload": if cli.trace.is_some() { serde_json::json!({ "trace": cli.trace }) } else { serde_json::to_value(&wl)? },
            "policies": pcfg,
            "sim": scfg,
        },
        "results": results,
    });
    let jp = cli.out.join("results.json");
    std::fs::write(&jp, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("{}: cannot write", jp.display()))?;
    let pp = cli.out.join("jct-cdf.png");
    match plot_jct_cdf(&results, &pp) {
        Ok(()) => println!("wrote {} and {}", jp.display(), pp.display()),
        Err(e) => {
            tracing::warn!("no plot: {e}");
            println!("wrote {}", jp.display());
        }
    }
    Ok(())
}

/// `--pair POLICY=CC`.
fn parse_pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((p, c)) if !p.is_empty() && !c.is_empty() => Ok((p.to_string(), c.to_string())),
        _ => Err(format!("'{s}': expected POLICY=CC, e.g. fair=cubic")),
    }
}

/// `--compute`: how a scenario's compute phases are modelled ([`scenario::ComputeModel`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ComputeArg {
    /// trainemu's seeded compute-time jitter.
    Seeded,
    /// The profile's mean every iteration.
    Mean,
}

/// `--scenario`: every policy on the scenario's jobs, once per seed; a table of mean iteration
/// times per job (means over seeds) and `scenario-results.json` (every seed's numbers).
fn run_scenario(
    cli: &Cli,
    path: &std::path::Path,
    models: &ModelFile,
    pcfg: &PolicyConfig,
    scfg: &SimConfig,
) -> Result<()> {
    if cli.seeds == 0 {
        anyhow::bail!("--seeds 0: at least 1");
    }
    let pairs: Vec<(String, String)> = if cli.pair.is_empty() {
        // The defaults, for the policies that run.
        [("fair", "cubic"), ("mltcp", "mltcp")]
            .into_iter()
            .filter(|(p, _)| cli.policies.iter().any(|x| x == p))
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect()
    } else {
        cli.pair.clone()
    };
    for (p, c) in &pairs {
        if !cli.policies.contains(p) {
            anyhow::bail!("--pair {p}={c}: policy {p} is not among --policies");
        }
    }
    let s = scenario::load(path, models)?;
    std::fs::create_dir_all(&cli.out)
        .with_context(|| format!("{}: cannot create", cli.out.display()))?;
    let mut rows = Vec::new();
    let mut runs = Vec::new();
    for seed in 1..=cli.seeds {
        let compute = match cli.compute {
            ComputeArg::Seeded => scenario::ComputeModel::Seeded,
            ComputeArg::Mean => scenario::ComputeModel::Mean,
        };
        let run = scenario::build(&s, models, seed, compute)?;
        for name in &cli.policies {
            let mut policy = make_policy(name, pcfg, &run.tree.capacity)?;
            let jobs = scenario::simulate(&run, policy.as_mut(), scfg)
                .with_context(|| format!("{}: policy {name}, seed {seed}", path.display()))?;
            runs.push(serde_json::json!({ "policy": name, "seed": seed, "jobs": jobs }));
            rows.push((name.clone(), seed, jobs));
        }
    }
    println!(
        "scenario {} ({}): {} hosts, {} jobs, seeds 1-{}, {}, {} compute; fluid model, no RTT or packets",
        s.name,
        path.display(),
        s.topology.hosts.len(),
        s.jobs.len(),
        cli.seeds,
        match cli.classes {
            0 => "unlimited priority levels".to_string(),
            1 => "1 traffic class".to_string(),
            n => format!("{n} traffic classes"),
        },
        match cli.compute {
            ComputeArg::Seeded => "seeded jittered",
            ComputeArg::Mean => "mean",
        }
    );
    println!("  policy             job        mean_ms   ideal_ms  mean/ideal   (means over seeds)");
    for name in &cli.policies {
        let per: Vec<&Vec<scenario::JobResult>> =
            rows.iter().filter(|r| &r.0 == name).map(|r| &r.2).collect();
        for job in &s.jobs {
            let pick = |f: &dyn Fn(&scenario::JobResult) -> f64| -> f64 {
                let v: Vec<f64> = per
                    .iter()
                    .filter_map(|jobs| jobs.iter().find(|j| j.name == job.name))
                    .map(f)
                    .collect();
                v.iter().sum::<f64>() / v.len().max(1) as f64
            };
            println!(
                "  {:<18} {:<8} {:>9.1} {:>10.1} {:>11.3}",
                name,
                job.name,
                1e3 * pick(&|j| j.mean_iter_s),
                1e3 * pick(&|j| j.ideal_s),
                pick(&|j| j.mean_iter_s / j.ideal_s)
            );
        }
        let seed_means: Vec<f64> = per
            .iter()
            .map(|jobs| {
                jobs.iter().map(|j| j.mean_iter_s / j.ideal_s).sum::<f64>() / jobs.len() as f64
            })
            .collect();
        let lo = seed_means.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = seed_means.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        println!(
            "  {:<18} all jobs: mean/ideal {:.3} (seeds {:.3}-{:.3})",
            name,
            seed_means.iter().sum::<f64>() / seed_means.len() as f64,
            lo,
            hi
        );
    }
    let mut vm = Vec::new();
    for p in &cli.vm_summary {
        vm.extend(scenario::read_vm_summary(p)?);
    }
    let fid = if vm.is_empty() {
        Vec::new()
    } else {
        scenario::fidelity(&rows, &vm, &pairs)
    };
    if !cli.vm_summary.is_empty() {
        println!(
            "fidelity: simulator against VM, mean iteration time per job over the seeds both have, then per policy (all jobs: the mean of the jobs' means)"
        );
        println!("  policy             VM cc                              job        sim_ms     vm_ms   error  seeds");
        for f in &fid {
            println!(
                "  {:<18} {:<34} {:<8} {:>9.1} {:>9.1} {:>+6.1}%  {}",
                f.policy,
                f.cc,
                f.job,
                f.sim_ms,
                f.vm_ms,
                f.error_pct,
                f.seeds.len()
            );
        }
        if fid.is_empty() {
            println!("  (no (policy, cc) pair has a job and a seed in both)");
        }
    }
    // With two or more pairs: each later pair's gain over the first, paired by seed.
    let gains: Vec<scenario::Gain> = match pairs.split_first() {
        Some((base, rest)) if !vm.is_empty() => rest
            .iter()
            .filter_map(|p| scenario::gain(&rows, &vm, base, p))
            .collect(),
        _ => Vec::new(),
    };
    if !gains.is_empty() {
        println!(
            "gain over the first pair, paired by seed (mean over jobs of mean iteration, candidate / base - 1; 95 % t intervals)"
        );
        // A fraction's interval in hundredths, `unit` after the mean ("%" or "points").
        let pct = |i: &mlcc_stats::intervals::Interval, unit: &str| match (i.lo, i.hi) {
            (Some(lo), Some(hi)) => format!(
                "{:+.2} {unit} [{:+.2}, {:+.2}]",
                100.0 * i.mean,
                100.0 * lo,
                100.0 * hi
            ),
            _ => format!("{:+.2} {unit}", 100.0 * i.mean),
        };
        for g in &gains {
            println!(
                "  {} over {}: simulator {}, VM ({} over {}) {}; VM - simulator {}, {} seeds",
                g.pair.0,
                g.base.0,
                pct(&g.sim, "%"),
                g.pair.1,
                g.base.1,
                pct(&g.vm, "%"),
                pct(&g.vm_minus_sim, "points"),
                g.seeds.len()
            );
        }
    }
    let json = serde_json::json!({
        "fidelity": fid,
        "gain": gains,
        "scenario": s.name,
        "file": path.display().to_string(),
        "seeds": cli.seeds,
        "policies": pcfg,
        "sim": scfg,
        "unshaped_gbps": scenario::UNSHAPED_GBPS,
        "compute": match cli.compute {
            ComputeArg::Seeded => "seeded",
            ComputeArg::Mean => "mean",
        },
        "runs": runs,
    });
    let jp = cli.out.join("scenario-results.json");
    std::fs::write(&jp, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("{}: cannot write", jp.display()))?;
    println!("wrote {}", jp.display());
    Ok(())
}
