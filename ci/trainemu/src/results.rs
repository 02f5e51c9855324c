// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Runs one scenario (per seed: solo runs, then one run per congestion control) and writes its
//! results directory; also the types and readers of that directory, used by `report`.
//!
//! Layout of `OUT/<scenario>/`:
//! - `scenario.toml`: the scenario text as run; `meta.json`: [`Meta`] (resolved jobs, the runs of
//!   the last `trainemu run`, kernel, scenario fingerprint)
//! - `runs/<run>/s<seed>/run.json`: [`RunMeta`] of that run (seed, ok/error, guest CPU busy
//!   fraction, scenario fingerprint, start offsets): `report` finds the runs from these files,
//!   so the `runs/` folders of several `trainemu run`s with disjoint seeds can be merged
//! - `runs/<run>/s<seed>/iterations.jsonl`: one [`IterRecord`] per worker (and PS) and iteration
//! - `runs/<run>/s<seed>/flows.json`: the sampled flows ([`FlowInfo`])
//! - `runs/<run>/s<seed>/samples.csv`: `t_us,flow,bytes_acked,cwnd,srtt_us,retrans,bytes_ratio_fx,f_fx`
//! - `runs/<run>/s<seed>/queue.csv`: `t_us,backlog_bytes,backlog_pkts,drops,marks`
//!   ([`QueueSample`]s of the bottleneck's switch port, `v-<bottleneck>` in `te-sw`; not on
//!   loopback)
//! - `runs/<run>/s<seed>/background.json`: the background flows ([`BgRecord`]), when the scenario
//!   has any
//!
//! Runs are named `solo-<job>` (that job alone under `solo_cc`), `background-only` (the
//! background flows alone: their baseline throughput; run once per `trainemu run`, under its
//! first seed, as it has no random choice) and after their congestion control. Every seed runs
//! its own solo runs: the solo run of seed s uses the same compute draws as the runs of seed s,
//! so each seed's ideal C + M is measured under the compute times of its own runs.
//!
//! Directories written before seeds existed (`runs/<run>/iterations.jsonl`, the runs listed
//! only in meta.json) still read, as one run per congestion control without a seed.
//!
//! An existing `OUT/<scenario>/` is kept when its meta.json has the same scenario fingerprint
//! (the runs of other seeds stay; a run being redone replaces its own directory) and cleared
//! otherwise.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, BufWriter, IsTerminal, Write};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::agent::{AgentRun, AgentSetup};
use crate::config::{AgentMode, CcVariant, JobPlan, ModelFile, Scenario};
use crate::emu::{self, BgPlan, BgRecord, FlowInfo, IterRecord, Net, RunSpec, Sample};
use crate::progress::ProgressDir;
use crate::queue::{QueueProbe, QueueSample};
use crate::topo;

/// Name of the run of the background flows alone.
pub const BASELINE_RUN: &str = "background-only";

/// The background flows of scenario `s` as run beside the jobs (`baseline`: alone, each stopping
/// at its stop_ms or `background_baseline_s` after its start).
fn bg_plans(s: &Scenario, baseline: bool) -> Vec<BgPlan> {
    s.background
        .iter()
        .map(|b| BgPlan {
            name: b.name.clone(),
            from: b.from.clone(),
            to: b.to.clone(),
            cc: b.cc.clone(),
            start_ms: b.start_ms,
            stop_ms: if baseline {
                Some(
                    b.stop_ms
                        .unwrap_or(b.start_ms + s.background_baseline_s * 1000.0),
                )
            } else {
                b.stop_ms
            },
        })
        .collect()
}

/// One run of a scenario, as listed in meta.json.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunMeta {
    /// Run name (`solo-<job>`, `background-only` or the congestion control).
    pub name: String,
    /// "solo", "background" (the background-only baseline) or "together".
    pub kind: String,
    /// Congestion control of every socket.
    pub cc: String,
    /// Jobs in the run.
    pub jobs: Vec<String>,
    /// Whether the run completed.
    pub ok: bool,
    /// Its error, when it failed.
    pub error: Option<String>,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// The run's seed (None: a run written before seeds existed).
    #[serde(default)]
    pub seed: Option<u64>,
    /// Busy fraction of the CPUs (of the guest, in the VM) during the run, from /proc/stat:
    /// 1 − (idle + iowait) / total jiffies (None: /proc/stat unreadable, or an old run).
    #[serde(default)]
    pub cpu_busy: Option<f64>,
    /// Fingerprint of the scenario as run ([`scenario_fingerprint`]).
    #[serde(default)]
    pub scenario_fp: Option<String>,
    /// Start offset of each job in this run, ms (fixed + seeded).
    #[serde(default)]
    pub start_offsets_ms: BTreeMap<String, f64>,
}

impl RunMeta {
    /// Its directory under `runs/`: `<name>/s<seed>`, or `<name>` for an old run.
    pub fn rel_dir(&self) -> String {
        match self.seed {
            Some(k) => format!("{}/s{k}", self.name),
            None => self.name.clone(),
        }
    }
}

/// Busy fraction above which a run is flagged as CPU-saturated (its timings untrusted).
pub const CPU_BUSY_LIMIT: f64 = 0.9;

/// Aggregate CPU jiffies of /proc/stat's `cpu` line: (idle + iowait, total of user, nice,
/// system, idle, iowait, irq, softirq, steal; guest time is already in user/nice).
pub fn parse_proc_stat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|x| x.parse().ok())
        .collect::<Option<Vec<_>>>()?;
    if v.len() < 5 {
        return None;
    }
    Some((v[3] + v[4], v.iter().sum()))
}

fn cpu_times() -> Option<(u64, u64)> {
    parse_proc_stat(&fs::read_to_string("/proc/stat").ok()?)
}

/// Busy fraction between two [`parse_proc_stat`] readings (None if no time passed).
pub fn busy_fraction(before: (u64, u64), after: (u64, u64)) -> Option<f64> {
    let total = after.1.checked_sub(before.1)?;
    let idle = after.0.checked_sub(before.0)?;
    (total > 0).then(|| (1.0 - idle as f64 / total as f64).clamp(0.0, 1.0))
}

/// Fingerprint of a scenario as run: FNV-1a (64 bit, hex) of the JSON of the scenario (after
/// command-line overrides, its `ccs` list left out: every run names its own) and of its jobs
/// resolved against the model profiles. Runs with different fingerprints are not comparable.
pub fn scenario_fingerprint(s: &Scenario, plans: &[JobPlan]) -> String {
    let mut s = s.clone();
    s.ccs.clear();
    let text = serde_json::to_string(&(&s, plans)).unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// meta.json of a scenario results directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    /// The scenario as run.
    pub scenario: Scenario,
    /// Its jobs resolved against the model profiles.
    pub plans: Vec<JobPlan>,
    /// The runs, in execution order.
    pub runs: Vec<RunMeta>,
    /// Congestion controls of the scenario that the kernel did not offer (not run).
    pub skipped_ccs: Vec<String>,
    /// `uname -r`, followed by ", loopback" (--loopback) and ", mltcp-bpf" (--datapath bpf).
    pub kernel: String,
    /// Whether hosts were network namespaces (false: --loopback).
    pub netns: bool,
    /// The ECN-marking qdiscs of the topology: where they are and their parameters, for a PCN
    /// switch daemon's `tc qdisc change` ([`topo::EcnPort`]).
    #[serde(default)]
    pub ecn_ports: Vec<topo::EcnPort>,
    /// Fingerprint of the scenario as run ([`scenario_fingerprint`]; None in old files).
    #[serde(default)]
    pub scenario_fp: Option<String>,
    /// The seeds of the last `trainemu run` into this directory (informational: `report` finds
    /// the runs, and so the seeds, from the run.json files).
    #[serde(default)]
    pub seeds: Vec<u64>,
}

/// Progress display: indicatif bars on a terminal, else a line every 5 s (the VM's console).
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    last_line: f64,
    label: String,
    totals: Vec<u32>,
}

impl Progress {
    fn new(label: String, totals: Vec<u32>) -> Self {
        let tty = std::io::stderr().is_terminal()
            && std::env::var("TERM").map(|t| t != "dumb").unwrap_or(false);
        let bar = tty.then(|| {
            let b = indicatif::ProgressBar::new(totals.iter().map(|&x| x as u64).sum());
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} iterations {elapsed} {msg}",
                )
                .unwrap()
                .progress_chars("=> "),
            );
            b.set_prefix(label.clone());
            b
        });
        Progress {
            bar,
            last_line: -10.0,
            label,
            totals,
        }
    }
    fn update(&mut self, done: &[u32], t: f64) {
        let detail: Vec<String> = done
            .iter()
            .zip(&self.totals)
            .map(|(d, n)| format!("{d}/{n}"))
            .collect();
        if let Some(b) = &self.bar {
            b.set_position(done.iter().map(|&x| x as u64).sum());
            b.set_message(detail.join(" "));
        } else if t - self.last_line >= 5.0 {
            self.last_line = t;
            eprintln!(
                "trainemu: {} {:>5.1}s iterations {}",
                self.label,
                t,
                detail.join(" ")
            );
        }
    }
    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish();
        }
    }
}

/// tcp_mltcp module parameters changed for one run; `restore` puts the old values back.
struct ModuleParams(Vec<(String, String)>);

impl ModuleParams {
    const DIR: &'static str = "/sys/module/tcp_mltcp/parameters";

    /// Writes `params`, remembering the values they replace. On an error the ones already
    /// written are restored.
    fn set(params: &[(String, u32)]) -> Result<Self> {
        let mut saved = ModuleParams(Vec::new());
        for (name, value) in params {
            let path = Path::new(Self::DIR).join(name);
            let old = match fs::read_to_string(&path) {
                Ok(o) => o.trim().to_string(),
                Err(e) => {
                    saved.restore();
                    anyhow::bail!("cannot read {}: {e} (is tcp_mltcp loaded?)", path.display());
                }
            };
            if let Err(e) = fs::write(&path, value.to_string()) {
                saved.restore();
                anyhow::bail!("cannot set {} = {value}: {e}", path.display());
            }
            tracing::info!("tcp_mltcp parameter {name} = {value} (was {old})");
            saved.0.push((name.clone(), old));
        }
        Ok(saved)
    }

    fn restore(self) {
        for (name, old) in self.0.iter().rev() {
            let path = Path::new(Self::DIR).join(name);
            if let Err(e) = fs::write(&path, old) {
                tracing::error!("cannot restore {} = {old}: {e}", path.display());
            }
        }
    }
}

fn flush_tcp_metrics(s: &Scenario) {
    // Cached ssthresh/RTT of earlier runs' connections must not leak into the next run.
    for h in &s.topology.hosts {
        let _ = Command::new("ip")
            .args(["-n", &topo::ns_name(&h.name), "tcp_metrics", "flush", "all"])
            .output();
    }
}

/// How `trainemu run` runs scenarios (its command-line options).
pub struct RunOptions {
    /// Every host on 127.0.0.1 in the current namespace.
    pub loopback: bool,
    /// A run's time limit, seconds.
    pub run_timeout: f64,
    /// Where the workers report progress.
    pub progress: ProgressDir,
    /// The agent of `+agent` runs.
    pub agent: AgentSetup,
    /// The seeds; every congestion control runs under each (paired comparisons).
    pub seeds: Vec<u64>,
}

/// Runs scenario `s` (validated) and writes `out/<name>/`.
pub fn run_scenario(
    s: &Scenario,
    text: &str,
    models: &ModelFile,
    out: &Path,
    opts: &RunOptions,
) -> Result<()> {
    let (loopback, run_timeout, progress, agent_setup) =
        (opts.loopback, opts.run_timeout, &opts.progress, &opts.agent);
    let dir = out.join(&s.name);
    let plans = s.plans(models);
    let fp = scenario_fingerprint(s, &plans);
    if dir.exists() {
        let same = read_meta(&dir)
            .ok()
            .and_then(|m| m.scenario_fp)
            .is_some_and(|f| f == fp);
        if same {
            tracing::info!(
                "{}: same scenario as before: runs of other seeds are kept",
                dir.display()
            );
        } else {
            fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
        }
    }
    fs::create_dir_all(dir.join("runs"))
        .with_context(|| format!("cannot create {}", dir.display()))?;
    fs::write(dir.join("scenario.toml"), text)?;
    let osrel = fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let mut kernel = osrel;
    if loopback {
        kernel.push_str(", loopback");
    }
    if agent_setup.datapath == crate::agent::Datapath::Bpf {
        kernel.push_str(", mltcp-bpf");
    }
    let avail = topo::available_ccs();
    let variants: Vec<CcVariant> = s
        .ccs
        .iter()
        .filter_map(|c| CcVariant::parse(c).ok())
        .collect();
    let skipped: Vec<String> = variants
        .iter()
        .filter(|v| !avail.contains(&v.cc))
        .map(|v| v.label.clone())
        .collect();
    if agent_setup.datapath == crate::agent::Datapath::Bpf {
        if let Some(v) = variants
            .iter()
            .find(|v| v.cc.starts_with("mltcp") && !avail.contains(&v.cc))
        {
            anyhow::bail!(
                "scenario {}: ccs entry '{}': {} is not registered (--datapath bpf: run `mltcp-bpf load` first)",
                s.name,
                v.label,
                v.cc
            );
        }
    }
    if !skipped.is_empty() {
        tracing::warn!(
            "scenario {}: not offered by this kernel, not run: {}",
            s.name,
            skipped.join(", ")
        );
    }
    let net = if loopback {
        Net::Loopback
    } else {
        topo::build(s).context("building the topology")?
    };
    let queue = (!loopback).then(|| QueueProbe {
        netns: format!("/run/netns/{}", topo::SWITCH_NS).into(),
        dev: format!("v-{}", s.topology.bottleneck),
    });
    let solo_cc = CcVariant::parse(&s.solo_cc).map_err(anyhow::Error::msg)?;
    let spec = |name: String,
                cc: CcVariant,
                jobs: Vec<JobPlan>,
                background: Vec<BgPlan>,
                before_burst,
                seed| RunSpec {
        name,
        cc,
        jobs,
        sample_ms: s.sample_ms,
        timeout_s: run_timeout,
        progress: progress.clone(),
        background,
        before_burst,
        queue: queue.clone(),
        seed,
    };
    let variants: Vec<CcVariant> = variants
        .into_iter()
        .filter(|v| avail.contains(&v.cc))
        .collect();
    // Seed by seed, so that an interrupted invocation leaves whole seeds behind.
    let mut runs: Vec<(RunSpec, &str)> = Vec::new();
    for (n, &seed) in opts.seeds.iter().enumerate() {
        let seeded = s.seeded_plans(models, seed);
        for p in &seeded {
            let mut solo = p.clone();
            solo.iterations = s.solo_iterations;
            solo.start_offset_ms = 0.0;
            runs.push((
                spec(
                    format!("solo-{}", p.name),
                    solo_cc.clone(),
                    vec![solo],
                    Vec::new(),
                    None,
                    seed,
                ),
                "solo",
            ));
        }
        if !s.background.is_empty() && n == 0 {
            // The flows' own congestion controls apply; the run's cc only labels it.
            runs.push((
                spec(
                    BASELINE_RUN.into(),
                    solo_cc.clone(),
                    Vec::new(),
                    bg_plans(s, true),
                    None,
                    seed,
                ),
                "background",
            ));
        }
        for v in &variants {
            runs.push((
                spec(
                    v.dir_name(),
                    v.clone(),
                    seeded.clone(),
                    bg_plans(s, false),
                    s.before_burst(),
                    seed,
                ),
                "together",
            ));
        }
    }
    let mut meta = Meta {
        scenario: s.clone(),
        plans: plans.clone(),
        runs: Vec::new(),
        skipped_ccs: skipped,
        kernel,
        netns: !loopback,
        ecn_ports: if loopback {
            Vec::new()
        } else {
            topo::ecn_ports(s)
        },
        scenario_fp: Some(fp.clone()),
        seeds: opts.seeds.clone(),
    };
    let t0 = Instant::now();
    let nruns = runs.len();
    let mut failures = 0;
    for (i, (spec, kind)) in runs.iter().enumerate() {
        if !loopback {
            flush_tcp_metrics(s);
        }
        let label = format!(
            "[{} {}/{} {} seed {}]",
            s.name,
            i + 1,
            nruns,
            spec.name,
            spec.seed
        );
        let run_dir = dir
            .join("runs")
            .join(&spec.name)
            .join(format!("s{}", spec.seed));
        if run_dir.exists() {
            fs::remove_dir_all(&run_dir)
                .with_context(|| format!("cannot clear {}", run_dir.display()))?;
        }
        tracing::info!(
            "{label} starting: cc {}, jobs {}",
            spec.cc.label,
            spec.jobs
                .iter()
                .map(|j| j.name.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        );
        let mut prog = Progress::new(
            label.clone(),
            spec.jobs.iter().map(|j| j.iterations).collect(),
        );
        let cpu0 = cpu_times();
        let res = match ModuleParams::set(&spec.cc.params) {
            Ok(saved) => {
                let r = match spec.cc.agent {
                    None => emu::run(spec, &net, &mut |d, t| prog.update(d, t)),
                    Some(mode) => run_with_agent(
                        s,
                        spec,
                        mode,
                        agent_setup,
                        &run_dir.join("agent"),
                        &net,
                        &mut prog,
                    ),
                };
                saved.restore();
                r
            }
            Err(e) => Err(e),
        };
        prog.finish();
        let cpu_busy = cpu0.zip(cpu_times()).and_then(|(a, b)| busy_fraction(a, b));
        if let Some(b) = cpu_busy.filter(|&b| b > CPU_BUSY_LIMIT) {
            tracing::warn!(
                "{label} CPUs {:.0}% busy: saturated, its timings are not trusted",
                b * 100.0
            );
        }
        let rm = |ok: bool, error: Option<String>, wall_s: f64| RunMeta {
            name: spec.name.clone(),
            kind: kind.to_string(),
            cc: spec.cc.label.clone(),
            jobs: spec.jobs.iter().map(|j| j.name.clone()).collect(),
            ok,
            error,
            wall_s,
            seed: Some(spec.seed),
            cpu_busy,
            scenario_fp: Some(fp.clone()),
            start_offsets_ms: spec
                .jobs
                .iter()
                .map(|j| (j.name.clone(), j.start_offset_ms))
                .collect(),
        };
        let run_meta = match res {
            Ok(o) => {
                write_run(&run_dir, &o)?;
                tracing::info!(
                    "{label} done in {:.1} s: {} records, {} flows, {} samples, {} queue samples",
                    o.wall_s,
                    o.records.len(),
                    o.flows.len(),
                    o.samples.len(),
                    o.queue.len()
                );
                rm(true, None, o.wall_s)
            }
            Err(e) => {
                tracing::error!("{label} failed: {e:#}");
                failures += 1;
                rm(false, Some(format!("{e:#}")), 0.0)
            }
        };
        fs::create_dir_all(&run_dir)?;
        fs::write(
            run_dir.join("run.json"),
            serde_json::to_string_pretty(&run_meta)?,
        )?;
        meta.runs.push(run_meta);
        fs::write(dir.join("meta.json"), serde_json::to_string_pretty(&meta)?)?;
    }
    if !loopback {
        topo::teardown(s);
    }
    tracing::info!(
        "scenario {} done in {:.0} s: {}",
        s.name,
        t0.elapsed().as_secs_f64(),
        dir.display()
    );
    if failures > 0 {
        anyhow::bail!(
            "scenario {}: {failures} of {nruns} runs failed (see {}/meta.json)",
            s.name,
            dir.display()
        );
    }
    Ok(())
}

/// One run under ccp-agent: the agent (and switch) started for it, the workers reporting into
/// its progress directory, the agent's status saved and the daemons stopped afterwards. A daemon
/// that dies during the run fails it.
fn run_with_agent(
    s: &Scenario,
    spec: &RunSpec,
    mode: AgentMode,
    setup: &AgentSetup,
    agent_dir: &Path,
    net: &Net,
    prog: &mut Progress,
) -> Result<emu::RunOutput> {
    let mut a = AgentRun::start(s, mode, spec.cc.pcn, spec.cc.sched, setup, agent_dir)?;
    a.watch_status();
    let spec = RunSpec {
        progress: ProgressDir::Dir(a.regions.clone()),
        ..spec.clone()
    };
    let r = emu::run(&spec, net, &mut |d, t| prog.update(d, t));
    let alive = a.alive();
    let controlled = a.stop().unwrap_or(0);
    if !alive {
        anyhow::bail!(
            "ccp-agent exited during the run (see {}/agent.log)",
            agent_dir.display()
        );
    }
    if mode == AgentMode::PcnOnly {
        // PCN alone controls no flow; it must have served the workers' bursts.
        let last = fs::read_to_string(agent_dir.join("status-last.txt")).unwrap_or_default();
        let granted = crate::agent::bursts_granted(&last).unwrap_or(0);
        tracing::info!("ccp-agent (PCN only) granted {granted} bursts (status-last.txt)");
        if r.is_ok() && granted == 0 {
            anyhow::bail!(
                "ccp-agent (PCN only) granted no burst (see {}/agent.log)",
                agent_dir.display()
            );
        }
        return r;
    }
    tracing::info!(
        "ccp-agent controlled up to {controlled} flows at once (status.txt: that snapshot)"
    );
    if r.is_ok() && controlled == 0 {
        anyhow::bail!(
            "ccp-agent controlled none of the run's flows (see {}/agent.log)",
            agent_dir.display()
        );
    }
    r
}

/// Writes one run's data files into `dir`.
pub(crate) fn write_run(dir: &Path, o: &emu::RunOutput) -> Result<()> {
    let (recs, flows, samples) = (&o.records, &o.flows, &o.samples);
    fs::create_dir_all(dir)?;
    let mut w = BufWriter::new(fs::File::create(dir.join("iterations.jsonl"))?);
    for r in recs {
        serde_json::to_writer(&mut w, r)?;
        w.write_all(b"\n")?;
    }
    w.flush()?;
    fs::write(dir.join("flows.json"), serde_json::to_string_pretty(flows)?)?;
    let mut w = BufWriter::new(fs::File::create(dir.join("samples.csv"))?);
    writeln!(
        w,
        "t_us,flow,bytes_acked,cwnd,srtt_us,retrans,bytes_ratio_fx,f_fx"
    )?;
    let opt = |x: Option<u16>| x.map(|v| v.to_string()).unwrap_or_default();
    for s in samples {
        writeln!(
            w,
            "{},{},{},{},{},{},{},{}",
            s.t_us,
            s.flow,
            s.bytes_acked,
            s.cwnd,
            s.srtt_us,
            s.retrans,
            opt(s.bytes_ratio_fx),
            opt(s.f_fx)
        )?;
    }
    w.flush()?;
    if !o.queue.is_empty() {
        let mut w = BufWriter::new(fs::File::create(dir.join("queue.csv"))?);
        writeln!(w, "t_us,backlog_bytes,backlog_pkts,drops,marks")?;
        for q in &o.queue {
            writeln!(
                w,
                "{},{},{},{},{}",
                q.t_us,
                q.backlog_bytes,
                q.backlog_pkts,
                q.drops,
                q.marks.map(|m| m.to_string()).unwrap_or_default()
            )?;
        }
        w.flush()?;
    }
    if !o.background.is_empty() {
        fs::write(
            dir.join("background.json"),
            serde_json::to_string_pretty(&o.background)?,
        )?;
    }
    Ok(())
}

/// One run's files, read back.
pub struct RunData {
    /// Iteration records.
    pub records: Vec<IterRecord>,
    /// Flows.
    pub flows: Vec<FlowInfo>,
    /// Samples.
    pub samples: Vec<Sample>,
    /// Queue samples of the bottleneck port (empty when none were taken).
    pub queue: Vec<QueueSample>,
    /// Background flows (empty when the run had none).
    pub background: Vec<BgRecord>,
}

/// Reads `dir/meta.json`.
pub fn read_meta(dir: &Path) -> Result<Meta> {
    let p = dir.join("meta.json");
    serde_json::from_str(
        &fs::read_to_string(&p).with_context(|| format!("{}: cannot read", p.display()))?,
    )
    .with_context(|| format!("{}: bad meta.json", p.display()))
}

/// Every run of the scenario directory `dir`, ordered by (seed, execution order within the
/// seed: solo, background, together; then name). Runs are found from their
/// `runs/<run>/s<seed>/run.json` files, so the `runs/` folders of several `trainemu run`s (with
/// disjoint seeds) can be merged; a directory without any (written before seeds existed) gives
/// the runs of its meta.json, without seeds. Errors when the runs do not belong together: a
/// run.json whose name or seed does not match its directory, or runs (or meta.json) with
/// different scenario fingerprints.
pub fn discover_runs(dir: &Path, meta: &Meta) -> Result<Vec<RunMeta>> {
    let runs_dir = dir.join("runs");
    let mut found = Vec::new();
    let mut names: Vec<_> = match fs::read_dir(&runs_dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    for run in names.iter().filter(|p| p.is_dir()) {
        let mut seeds: Vec<_> = fs::read_dir(run)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("run.json").is_file())
            .collect();
        seeds.sort();
        for sd in seeds {
            let p = sd.join("run.json");
            let rm: RunMeta = serde_json::from_str(
                &fs::read_to_string(&p).with_context(|| format!("{}: cannot read", p.display()))?,
            )
            .with_context(|| format!("{}: bad run.json", p.display()))?;
            let want = runs_dir.join(rm.rel_dir());
            if rm.seed.is_none() || want != sd {
                anyhow::bail!(
                    "{}: names run {} seed {:?}, but lies in {} (moved or renamed?)",
                    p.display(),
                    rm.name,
                    rm.seed,
                    sd.display()
                );
            }
            found.push(rm);
        }
    }
    if found.is_empty() {
        return Ok(meta.runs.clone());
    }
    // One scenario only: group the runs by fingerprint.
    let mut fps: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &found {
        fps.entry(r.scenario_fp.clone().unwrap_or_else(|| "none".into()))
            .or_default()
            .push(r.rel_dir());
    }
    if let Some(m) = &meta.scenario_fp {
        fps.entry(m.clone()).or_default().push("meta.json".into());
    }
    if fps.len() > 1 {
        let groups: Vec<String> = fps
            .iter()
            .map(|(fp, v)| {
                let more = if v.len() > 4 {
                    format!(" and {} more", v.len() - 4)
                } else {
                    String::new()
                };
                format!("scenario {fp}: {}{more}", v[..v.len().min(4)].join(", "))
            })
            .collect();
        anyhow::bail!(
            "{}: runs of different scenarios are mixed here (changed scenario file, models or \
             --iterations/--before-burst-ms between the merged runs?): {}",
            dir.display(),
            groups.join("; ")
        );
    }
    let order = |k: &str| match k {
        "solo" => 0,
        "background" => 1,
        _ => 2,
    };
    found.sort_by(|a, b| (a.seed, order(&a.kind), &a.name).cmp(&(b.seed, order(&b.kind), &b.name)));
    Ok(found)
}

/// Reads `dir/runs/<run>/` (`run`: a [`RunMeta::rel_dir`]).
pub fn read_run(dir: &Path, run: &str) -> Result<RunData> {
    let d = dir.join("runs").join(run);
    let mut records = Vec::new();
    let f = fs::File::open(d.join("iterations.jsonl"))
        .with_context(|| format!("{}/iterations.jsonl", d.display()))?;
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        records.push(
            serde_json::from_str(&line)
                .with_context(|| format!("{}/iterations.jsonl line {}", d.display(), i + 1))?,
        );
    }
    let flows: Vec<FlowInfo> = serde_json::from_str(&fs::read_to_string(d.join("flows.json"))?)?;
    let mut samples = Vec::new();
    let f = fs::File::open(d.join("samples.csv"))?;
    for line in BufReader::new(f).lines().skip(1) {
        let line = line?;
        let c: Vec<&str> = line.split(',').collect();
        if c.len() < 8 {
            continue;
        }
        let opt = |s: &str| s.parse::<u16>().ok();
        samples.push(Sample {
            t_us: c[0].parse()?,
            flow: c[1].parse()?,
            bytes_acked: c[2].parse()?,
            cwnd: c[3].parse()?,
            srtt_us: c[4].parse()?,
            retrans: c[5].parse()?,
            bytes_ratio_fx: opt(c[6]),
            f_fx: opt(c[7]),
        });
    }
    let mut queue = Vec::new();
    if let Ok(f) = fs::File::open(d.join("queue.csv")) {
        for (i, line) in BufReader::new(f).lines().enumerate().skip(1) {
            let line = line?;
            let c: Vec<&str> = line.split(',').collect();
            let bad =
                || anyhow::anyhow!("{}/queue.csv line {}: bad row '{line}'", d.display(), i + 1);
            if c.len() != 5 {
                return Err(bad());
            }
            let n = |k: usize| c[k].parse::<u64>().map_err(|_| bad());
            queue.push(QueueSample {
                t_us: n(0)?,
                backlog_bytes: n(1)?,
                backlog_pkts: n(2)?,
                drops: n(3)?,
                marks: c[4].parse().ok(),
            });
        }
    }
    let bg = d.join("background.json");
    let background = if bg.is_file() {
        serde_json::from_str(&fs::read_to_string(&bg)?)
            .with_context(|| format!("{}: bad background.json", d.display()))?
    } else {
        Vec::new()
    };
    Ok(RunData {
        records,
        flows,
        samples,
        queue,
        background,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_samples_and_background_records_round_trip() {
        let dir = std::env::temp_dir().join(format!("trainemu-results-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let o = emu::RunOutput {
            queue: vec![
                QueueSample {
                    t_us: 5,
                    backlog_bytes: 3000,
                    backlog_pkts: 2,
                    drops: 1,
                    marks: Some(9),
                },
                QueueSample {
                    t_us: 10,
                    backlog_bytes: 0,
                    backlog_pkts: 0,
                    drops: 1,
                    marks: None,
                },
            ],
            background: vec![BgRecord {
                name: "bg".into(),
                flow: 0,
                from: "h1".into(),
                to: "h2".into(),
                cc: "dctcp".into(),
                start_us: 1,
                stop_us: 9,
                bytes_sent: 77,
            }],
            ..Default::default()
        };
        write_run(&dir.join("runs").join("r"), &o).unwrap();
        let d = read_run(&dir, "r").unwrap();
        assert_eq!((d.queue, d.background), (o.queue, o.background));
        // A run without them writes neither file and reads back empty.
        write_run(&dir.join("runs").join("e"), &emu::RunOutput::default()).unwrap();
        assert!(
            !dir.join("runs/e/queue.csv").exists() && !dir.join("runs/e/background.json").exists()
        );
        let d = read_run(&dir, "e").unwrap();
        assert!(d.queue.is_empty() && d.background.is_empty());
        // A damaged row names the file and line.
        fs::write(
            dir.join("runs/r/queue.csv"),
            "t_us,backlog_bytes,backlog_pkts,drops,marks\n5,x,2,1,\n",
        )
        .unwrap();
        let e = format!("{:#}", read_run(&dir, "r").err().unwrap());
        assert!(e.contains("queue.csv line 2"), "{e}");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn cpu_busy_fraction_from_proc_stat() {
        let a = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4 5\nintr 1\n";
        let b = "cpu  400 0 150 1000 50 0 0 0 0 0\n";
        let (ia, ta) = parse_proc_stat(a).unwrap();
        assert_eq!((ia, ta), (850, 1000));
        let pb = parse_proc_stat(b).unwrap();
        assert_eq!(pb, (1050, 1600));
        // 600 jiffies passed, 200 of them idle: 2/3 busy.
        let f = busy_fraction((ia, ta), pb).unwrap();
        assert!((f - 2.0 / 3.0).abs() < 1e-12, "{f}");
        assert_eq!(busy_fraction(pb, pb), None);
        assert_eq!(parse_proc_stat("intr 1\n"), None);
        assert_eq!(parse_proc_stat("cpu  1 2 x 4 5\n"), None);
    }

    #[test]
    fn fingerprint_ignores_the_cc_list_but_not_the_rest() {
        let models = ModelFile::builtin();
        let text = crate::config::BUILTIN_SCENARIOS
            .iter()
            .find(|(n, _)| *n == "a.toml")
            .unwrap()
            .1;
        let s = Scenario::parse(text, "a.toml", &models).unwrap();
        let fp = scenario_fingerprint(&s, &s.plans(&models));
        let mut t = s.clone();
        t.ccs = vec!["reno".into()];
        assert_eq!(fp, scenario_fingerprint(&t, &t.plans(&models)));
        t.iterations += 1;
        assert_ne!(fp, scenario_fingerprint(&t, &t.plans(&models)));
        let mut t = s.clone();
        t.jitter.compute.cv = 0.03;
        assert_ne!(fp, scenario_fingerprint(&t, &t.plans(&models)));
    }
}
