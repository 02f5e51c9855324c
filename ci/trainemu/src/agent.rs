//! Runs scheduled by `ccp-agent` (a `ccs` entry with `+agent` or `+agent+switch`): the runner
//! writes the agent's configuration for the scenario's star, starts `ccp-agent run` (and for
//! `+agent+switch` a `ccp-agent switch` daemon) in the initial network namespace, points the
//! workers' progress reports at the agent's directory, and stops everything after the run with
//! SIGTERM (flows fall back to native MLTCP at once). On a stock kernel (`trainemu run --datapath
//! bpf`, mltcp-bpf loaded) the agent runs with `--ipc bpf` and its flows fall back to BPF
//! `mltcp`; [`Datapath::check`] refuses the `ccs` entries that cannot run there.
//!
//! The star as the agent sees it, as the testbed builds it (`topo.rs`): host `i` (0-based) has its
//! NIC's egress, id `2i+1`, unshaped ([`UNSHAPED_MBIT`]: the testbed shapes no host's egress), and
//! the switch port toward it, id `2i+2`, at the host's `rate_mbit` (its tbf; 1000 when
//! unshaped); a flow from host `i` to host `j` crosses `[2i+1, 2j+2]`. NIC-only runs plan the NIC
//! links (the mlcc paper, "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers",
//! Sec. VI-H) and, the one agent serving every host, each host's ingress, its switch port (the
//! last link of the routes into it); with the switch daemon, which owns the switch ports, the
//! agent plans against the ports' load (Sec. IV-A) instead.
//!
//! Until 2026-11-27 the NIC links were given the host's `rate_mbit`, which the testbed does not
//! enforce: a PS's two broadcasts were planned at half the rate they get under cubic, and the
//! NIC-only agent did not see the bottleneck port at all. `ci/scenarios/agent.toml`, seeds 1-3,
//! `mltcp+agent+rules=priority`, mean iteration against that: −11.1 % [−22.3, +0.2] (README,
//! "ccp-agent: the flow scheduler"). A port with an ECN-marking qdisc (`ecn` in the scenario) gets a
//! `[link.ecn]` table naming that qdisc, so the switch daemon's PCN control changes its threshold.

use crate::config::{AgentMode, AgentSched, CcVariant, PcnVariant, Scenario};
use crate::topo;
use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Capacity given to an unshaped link, Mbit/s.
pub const UNSHAPED_MBIT: u64 = 1000;
/// The agent's gRPC address (one agent serves every emulated host).
const AGENT_ADDR: &str = "127.0.0.1:50061";
/// The switch daemon's gRPC address.
const SWITCH_ADDR: &str = "127.0.0.1:50070";
/// How long the agent and the switch get to start serving.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// What provides the `mltcp` algorithms and the agent's datapath (`trainemu run --datapath`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Datapath {
    /// `tcp_mltcp.ko` (our kernel): `mltcp`, `mltcp_cubic`, `mltcp_dctcp`, module parameters,
    /// the agent over netlink (`ccp-agent run --ipc netlink`).
    #[default]
    Module,
    /// mltcp-bpf's struct_ops on a stock kernel (`mltcp-bpf load` before the run): `mltcp` and
    /// `mltcp_cubic`, the agent over `ccp-agent run --ipc bpf`, whose fixed-function datapath
    /// runs the agent's slot program on flows of either (docs/bpf.md).
    Bpf,
}

impl Datapath {
    /// The option's value (`--datapath NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Datapath::Module => "module",
            Datapath::Bpf => "bpf",
        }
    }

    /// The `ccp-agent run --ipc` value for this datapath.
    pub fn ipc(self) -> &'static str {
        match self {
            Datapath::Module => "netlink",
            Datapath::Bpf => "bpf",
        }
    }

    /// Whether a run of `v` can run on this datapath; the error names the entry and why not.
    pub fn check(self, v: &CcVariant) -> Result<(), String> {
        if self == Datapath::Module {
            return Ok(());
        }
        let label = &v.label;
        if v.cc.starts_with("mltcp") && !BPF_CCS.contains(&v.cc.as_str()) {
            return Err(format!(
                "'{label}': {} has no BPF version (mltcp-bpf registers {}; it needs tcp_mltcp.ko)",
                v.cc,
                BPF_CCS.join(" and ")
            ));
        }
        if !v.params.is_empty() {
            return Err(format!(
                "'{label}': module parameters are tcp_mltcp.ko's (/sys/module/tcp_mltcp/parameters); on the BPF datapath set them with `mltcp-bpf set` before the run"
            ));
        }
        Ok(())
    }

    /// Whether every run of the validated scenario `s` can run on this datapath
    /// ([`Datapath::check`]): its `ccs` entries, its `solo_cc` and its background flows'
    /// congestion controls; the error names the first that cannot, and the option.
    pub fn check_scenario(self, s: &Scenario) -> anyhow::Result<()> {
        let entries = s.ccs.iter().map(|c| (c, "ccs entry"));
        let solo = std::iter::once((&s.solo_cc, "solo_cc"));
        let bg = s.background.iter().map(|b| (&b.cc, "background flow's cc"));
        for (c, what) in entries.chain(solo).chain(bg) {
            let v = CcVariant::parse(c).map_err(anyhow::Error::msg)?;
            self.check(&v)
                .map_err(|e| anyhow::anyhow!("{what} {e} (--datapath {})", self.name()))?;
        }
        Ok(())
    }
}

/// The algorithms mltcp-bpf registers.
pub const BPF_CCS: &[&str] = &["mltcp", "mltcp_cubic"];

/// Where the agent's binary and datapath program are, and which datapath it talks to.
#[derive(Debug, Clone)]
pub struct AgentSetup {
    /// `ccp-agent` (looked up on PATH unless a path).
    pub bin: PathBuf,
    /// The datapath program the agent installs (`datapath-programs/mlcc-slot.ccp`).
    pub program: PathBuf,
    /// The datapath the agent runs on (its `--ipc`).
    pub datapath: Datapath,
}

/// NIC link id of host `i` (its egress).
pub fn nic_link(i: usize) -> u32 {
    2 * i as u32 + 1
}

/// Link id of the switch port toward host `i`.
pub fn port_link(i: usize) -> u32 {
    2 * i as u32 + 2
}

/// The slot length of the topologies trainemu writes when a run names none (`+slot_ms=N`), ms:
/// ccp-agent's default (`mlcc_sched::DEFAULT_SLOT_US`, docs/agent.md).
pub const DEFAULT_SLOT_MS: u64 = mlcc_sched::DEFAULT_SLOT_US / 1000;

/// `topo.toml` for scenario `s`'s star (`pcn`: the switch's `[pcn] combine`; `slot_ms`: the
/// slot length, ms, [`DEFAULT_SLOT_MS`] when `None`).
pub fn topology_toml(s: &Scenario, pcn: PcnVariant, slot_ms: Option<u64>) -> String {
    let mut t = String::from("# written by trainemu for scenario ");
    let _ = writeln!(
        t,
        "{}\nslot_ms = {}\nhorizon = 10\n",
        s.name,
        slot_ms.unwrap_or(DEFAULT_SLOT_MS)
    );
    if let PcnVariant::On { harmonic, .. } = pcn {
        let _ = writeln!(
            t,
            "[pcn]\ncombine = \"{}\"\n",
            if harmonic { "harmonic" } else { "min" }
        );
    }
    let ecn = topo::ecn_ports(s);
    for (i, h) in s.topology.hosts.iter().enumerate() {
        let mbit = h
            .rate_mbit
            .map(|r| r.round().max(1.0) as u64)
            .unwrap_or(UNSHAPED_MBIT);
        let _ = writeln!(
            t,
            "[[link]]\nid = {}\nname = \"{}-nic\"\ncapacity_mbps = {UNSHAPED_MBIT}\n",
            nic_link(i),
            h.name
        );
        let _ = writeln!(
            t,
            "[[link]]\nid = {}\nname = \"sw-{}\"\ncapacity_mbps = {mbit}\n",
            port_link(i),
            h.name
        );
        if let Some(e) = ecn.iter().find(|e| e.host == h.name) {
            t.push_str(&link_ecn_toml(e));
        }
        let _ = writeln!(
            t,
            "[[host]]\nname = \"{}\"\naddrs = [\"{}\"]\nnic = {}\nagent = \"{AGENT_ADDR}\"\n",
            h.name,
            topo::host_addr(i),
            nic_link(i)
        );
    }
    let ports: Vec<String> = (0..s.topology.hosts.len())
        .map(|i| port_link(i).to_string())
        .collect();
    let _ = writeln!(
        t,
        "[[switch]]\nname = \"sw\"\nlisten = \"{SWITCH_ADDR}\"\nlinks = [{}]\n",
        ports.join(", ")
    );
    for (i, a) in s.topology.hosts.iter().enumerate() {
        for (j, b) in s.topology.hosts.iter().enumerate() {
            if i != j {
                let _ = writeln!(
                    t,
                    "[[route]]\nfrom = \"{}\"\nto = \"{}\"\nlinks = [{}, {}]\n",
                    a.name,
                    b.name,
                    nic_link(i),
                    port_link(j)
                );
            }
        }
    }
    t
}

/// The `[link.ecn]` table of a switch port with an ECN-marking qdisc, so the switch daemon's PCN
/// control changes that very qdisc (over rtnetlink, in the switch's
/// namespace). fq_codel's `ce_threshold` (time) becomes bytes at the port's rate, which the
/// daemon converts back at the link's capacity.
pub fn link_ecn_toml(e: &topo::EcnPort) -> String {
    let mut t = format!(
        "[link.ecn]\nnetns = \"{}\"\ndev = \"{}\"\nparent = \"{}\"\nqdisc = \"{}\"\n",
        e.netns, e.dev, e.parent, e.qdisc
    );
    match (e.threshold_bytes, e.ce_threshold_us) {
        (Some(b), _) => {
            let _ = writeln!(
                t,
                "initial_threshold_bytes = {b}\nred_limit_bytes = {}\nred_avpkt_bytes = {}\nred_span_bytes = {}",
                e.limit_bytes,
                topo::RED_AVPKT,
                topo::RED_AVPKT
            );
        }
        (None, Some(us)) => {
            let _ = writeln!(
                t,
                "initial_threshold_bytes = {}",
                (us * e.rate_kbit / 8000).max(1)
            );
        }
        (None, None) => {}
    }
    t.push('\n');
    t
}

/// `agent.toml` serving every host of `s` (`pcn`: its `[pcn]` table; `sched`: its `[sched]
/// rules`, `job_order`, `strict_rates`, `classes`, `class_rates`, `held_flows` and
/// `scavenger_target_us`, its `min_rate_kbps` and its `slot_ms`, the agent's defaults where
/// `None`).
pub fn agent_toml(
    s: &Scenario,
    mode: AgentMode,
    pcn: PcnVariant,
    sched: AgentSched,
    program: &Path,
    regions: &Path,
) -> String {
    let hosts: Vec<String> = s
        .topology
        .hosts
        .iter()
        .map(|h| format!("\"{}\"", h.name))
        .collect();
    let mut t = format!(
        "# written by trainemu for scenario {}\ntopology = \"topo.toml\"\nhosts = [{}]\nprogram = \"{}\"\nprogress_dir = \"{}\"\nnic_only = {}\n",
        s.name,
        hosts.join(", "),
        program.display(),
        regions.display(),
        mode == AgentMode::NicOnly
    );
    if mode == AgentMode::PcnOnly {
        t.push_str("schedule = false\n");
    }
    if let Some(k) = sched.min_rate_kbps {
        let _ = writeln!(t, "min_rate_kbps = {k}");
    }
    if let Some(ms) = sched.slot_ms {
        let _ = writeln!(t, "slot_ms = {ms}");
    }
    if sched.rules.is_some()
        || sched.job_order.is_some()
        || sched.strict_rates.is_some()
        || sched.classes.is_some()
        || sched.class_rates.is_some()
        || sched.held_flows.is_some()
        || sched.scavenger_target_us.is_some()
    {
        t.push_str("\n[sched]\n");
    }
    if let Some(r) = sched.rules {
        let _ = writeln!(t, "rules = \"{}\"", r.name());
    }
    if let Some(o) = sched.job_order {
        let _ = writeln!(t, "job_order = \"{}\"", o.name());
    }
    if let Some(on) = sched.strict_rates {
        let _ = writeln!(t, "strict_rates = {on}");
    }
    if let Some(n) = sched.classes {
        let _ = writeln!(t, "classes = {n}");
    }
    if let Some(r) = sched.class_rates {
        let _ = writeln!(t, "class_rates = \"{}\"", r.name());
    }
    if let Some(h) = sched.held_flows {
        let _ = writeln!(t, "held_flows = \"{}\"", h.name());
    }
    if let Some(us) = sched.scavenger_target_us {
        let _ = writeln!(t, "scavenger_target_us = {us}");
    }
    match pcn {
        PcnVariant::Default => {}
        PcnVariant::Off => t.push_str("\n[pcn]\nenabled = false\n"),
        PcnVariant::On {
            threshold_bytes, ..
        } => {
            let _ = write!(
                t,
                "\n[pcn]\nenabled = true\nthreshold_bytes = {threshold_bytes}\n"
            );
        }
    }
    t
}

/// The number of bursts granted in `ccp-agent status` output (its first line reads
/// `... bursts granted N (M on ack), ...`).
pub fn bursts_granted(status: &str) -> Option<u64> {
    let line = status.lines().next()?;
    let (_, rest) = line.split_once("bursts granted ")?;
    rest.split_whitespace().next()?.parse().ok()
}

/// A running agent (and switch daemon); [`AgentRun::stop`] ends them.
pub struct AgentRun {
    dir: PathBuf,
    bin: PathBuf,
    agent: Child,
    switch: Option<Child>,
    /// The directory the workers' progress regions go to.
    pub regions: PathBuf,
    stop_watch: std::sync::Arc<std::sync::atomic::AtomicBool>,
    watcher: Option<std::thread::JoinHandle<usize>>,
}

/// The number of controlled flows in `ccp-agent status` output (its first line reads
/// `slot N (...): K controlled flows, ...`).
pub fn controlled_flows(status: &str) -> Option<usize> {
    let line = status.lines().next()?;
    let (_, rest) = line.split_once("): ")?;
    rest.split_whitespace().next()?.parse().ok()
}

fn spawn(bin: &Path, args: &[&str], log: &Path) -> Result<Child> {
    let out = fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let err = out.try_clone()?;
    Command::new(bin)
        .args(args)
        .env(
            "RUST_LOG",
            std::env::var("MLTCP_AGENT_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .with_context(|| format!("cannot start {} {}", bin.display(), args.join(" ")))
}

fn tail(log: &Path) -> String {
    let t = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = t.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

/// Sends SIGTERM to `c` and waits up to 5 s for it, then kills it.
fn terminate(c: &mut Child) {
    if let Ok(pid) = i32::try_from(c.id()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        if let Ok(Some(_)) = c.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    tracing::warn!(
        "ccp-agent process {} ignored SIGTERM for 5 s: killed",
        c.id()
    );
    let _ = c.kill();
    let _ = c.wait();
}

impl AgentRun {
    /// Writes the configuration under `dir` and starts the daemons; returns once the agent
    /// answers `ccp-agent status` (its gRPC server is up and its datapath socket open).
    pub fn start(
        s: &Scenario,
        mode: AgentMode,
        pcn: PcnVariant,
        sched: AgentSched,
        setup: &AgentSetup,
        dir: &Path,
    ) -> Result<Self> {
        if !setup.program.is_file() {
            bail!(
                "the datapath program {} does not exist (trainemu run --agent-program)",
                setup.program.display()
            );
        }
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        // Shared memory, not the results directory: the regions are mmap'ed, which the VM's 9p
        // results share does not keep coherent.
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let regions = base.join(format!("trainemu-agent-{}", std::process::id()));
        let _ = fs::remove_dir_all(&regions);
        fs::create_dir_all(&regions)?;
        let program = fs::canonicalize(&setup.program)?;
        fs::write(dir.join("topo.toml"), topology_toml(s, pcn, sched.slot_ms))?;
        let agent_cfg = dir.join("agent.toml");
        fs::write(
            &agent_cfg,
            agent_toml(s, mode, pcn, sched, &program, &regions),
        )?;
        let topo_s = dir.join("topo.toml").display().to_string();
        let switch = match mode {
            AgentMode::Switch | AgentMode::PcnOnly => Some(spawn(
                &setup.bin,
                &["switch", "--config", &topo_s, "--name", "sw"],
                &dir.join("switch.log"),
            )?),
            AgentMode::NicOnly => None,
        };
        let agent_s = agent_cfg.display().to_string();
        let agent = match spawn(
            &setup.bin,
            &["run", "--config", &agent_s, "--ipc", setup.datapath.ipc()],
            &dir.join("agent.log"),
        ) {
            Ok(a) => a,
            Err(e) => {
                if let Some(mut sw) = switch {
                    terminate(&mut sw);
                }
                return Err(e);
            }
        };
        let mut run = AgentRun {
            dir: dir.to_path_buf(),
            bin: setup.bin.clone(),
            agent,
            switch,
            regions,
            stop_watch: Default::default(),
            watcher: None,
        };
        let t0 = Instant::now();
        loop {
            if let Ok(Some(st)) = run.agent.try_wait() {
                let why = format!(
                    "ccp-agent exited ({st}) at start: {}",
                    tail(&run.dir.join("agent.log"))
                );
                run.stop();
                bail!(why);
            }
            if let Some(sw) = run.switch.as_mut() {
                if let Ok(Some(st)) = sw.try_wait() {
                    let why = format!(
                        "ccp-agent switch exited ({st}) at start: {}",
                        tail(&run.dir.join("switch.log"))
                    );
                    run.stop();
                    bail!(why);
                }
            }
            let ok = Command::new(&run.bin)
                .args(["status", "--config", &agent_s])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            if ok {
                break;
            }
            if t0.elapsed() > START_TIMEOUT {
                let why = format!(
                    "ccp-agent did not answer `status` within {START_TIMEOUT:?}: {}",
                    tail(&run.dir.join("agent.log"))
                );
                run.stop();
                bail!(why);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        tracing::info!(
            "ccp-agent ({mode:?}) serving, configuration in {}",
            dir.display()
        );
        Ok(run)
    }

    /// Whether the agent (and switch) are still running.
    pub fn alive(&mut self) -> bool {
        let a = matches!(self.agent.try_wait(), Ok(None));
        let s = self
            .switch
            .as_mut()
            .is_none_or(|c| matches!(c.try_wait(), Ok(None)));
        a && s
    }

    /// Starts sampling the agent's `status` every 2 s until [`AgentRun::stop`]; the snapshot with
    /// the most controlled flows is saved to `status.txt` (the end-of-run status would show none:
    /// the flows are closed by then), the latest to `status-last.txt` (its counters, e.g. bursts
    /// granted, are cumulative).
    pub fn watch_status(&mut self) {
        let (bin, cfg, out) = (
            self.bin.clone(),
            self.dir.join("agent.toml"),
            self.dir.join("status.txt"),
        );
        let last = self.dir.join("status-last.txt");
        let stop = self.stop_watch.clone();
        self.watcher = Some(std::thread::spawn(move || {
            let mut best = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(o) = Command::new(&bin)
                    .arg("status")
                    .arg("--config")
                    .arg(&cfg)
                    .output()
                {
                    let text = String::from_utf8_lossy(&o.stdout).to_string();
                    let n = controlled_flows(&text).unwrap_or(0);
                    if o.status.success() {
                        let _ = fs::write(last.as_path(), &text);
                    }
                    if o.status.success() && (n > best || !out.exists()) {
                        best = best.max(n);
                        let _ = fs::write(&out, &text);
                    }
                }
                for _ in 0..20 {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            best
        }));
    }

    /// SIGTERMs the agent, then the switch; removes the regions directory. Returns the most
    /// flows the agent controlled at once, as `status` sampled it (None without
    /// [`AgentRun::watch_status`]).
    pub fn stop(mut self) -> Option<usize> {
        self.stop_watch
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let best = self.watcher.take().and_then(|w| w.join().ok());
        terminate(&mut self.agent);
        if let Some(mut s) = self.switch.take() {
            terminate(&mut s);
        }
        let _ = fs::remove_dir_all(&self.regions);
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelFile;

    fn parse(t: &str) -> anyhow::Result<Scenario> {
        Scenario::parse(t, "x.toml", &ModelFile::builtin())
    }

    const S: &str = r#"
name = "t"
description = "agent config test"
iterations = 5
ccs = ["mltcp+agent+switch"]
[topology]
bottleneck = "h2"
hosts = [{ name = "h1", rate_mbit = 100 }, { name = "h2", rate_mbit = 50, ecn = { qdisc = "red", threshold_kb = 30 } }, { name = "h3" }]
[[jobs]]
name = "A"
model = "vgg16"
paradigm = "ring"
workers = ["h1", "h2"]
"#;

    #[test]
    fn topology_describes_the_star() {
        let s = parse(S).unwrap();
        let t: toml::Value = toml::from_str(&topology_toml(&s, PcnVariant::Default, None)).unwrap();
        let links = t["link"].as_array().unwrap();
        assert_eq!(links.len(), 6);
        let cap = |id: u32| {
            links
                .iter()
                .find(|l| l["id"].as_integer() == Some(id.into()))
                .unwrap()["capacity_mbps"]
                .as_integer()
                .unwrap()
        };
        // The NICs' egress is unshaped in the testbed; the switch ports carry the tbf.
        assert_eq!(
            (cap(1), cap(2), cap(3), cap(4), cap(5), cap(6)),
            (1000, 100, 1000, 50, 1000, 1000)
        );
        assert_eq!(t["host"][1]["addrs"][0].as_str(), Some("10.77.2.1"));
        assert_eq!(t["host"][1]["nic"].as_integer(), Some(3));
        assert_eq!(t["switch"][0]["links"].as_array().unwrap().len(), 3);
        let routes = t["route"].as_array().unwrap();
        assert_eq!(routes.len(), 6);
        let r = routes
            .iter()
            .find(|r| r["from"].as_str() == Some("h3") && r["to"].as_str() == Some("h2"))
            .unwrap();
        assert_eq!(
            r["links"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_integer().unwrap())
                .collect::<Vec<_>>(),
            vec![5, 4]
        );
        let a: toml::Value = toml::from_str(&agent_toml(
            &s,
            AgentMode::NicOnly,
            PcnVariant::Default,
            AgentSched::default(),
            Path::new("/p.ccp"),
            Path::new("/r"),
        ))
        .unwrap();
        assert_eq!(a["nic_only"].as_bool(), Some(true));
        assert_eq!(a["hosts"].as_array().unwrap().len(), 3);
    }

    /// On the BPF datapath only what mltcp-bpf provides runs; every refusal names the entry.
    #[test]
    fn bpf_datapath_refuses_what_it_cannot_run() {
        let v = |l: &str| CcVariant::parse(l).unwrap();
        for ok in [
            "cubic",
            "reno",
            "mltcp",
            "mltcp_cubic",
            "mltcp+agent",
            "mltcp+agent+switch",
            "mltcp+agent+rules=interleave",
            "mltcp_cubic+agent",
            "mltcp_cubic+agent+switch",
            "dctcp+pcn",
        ] {
            assert_eq!(Datapath::Bpf.check(&v(ok)), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("mltcp_dctcp", "mltcp_dctcp has no BPF version"),
            ("mltcp_dctcp+agent", "mltcp_dctcp has no BPF version"),
            ("mltcp[slope_fx=2048]", "mltcp-bpf set"),
            ("mltcp_dctcp+agent+switch", "mltcp_dctcp has no BPF version"),
        ] {
            let e = Datapath::Bpf.check(&v(bad)).unwrap_err();
            assert!(
                e.contains(&format!("'{bad}'")) && e.contains(says),
                "{bad}: {e}"
            );
        }
        for any in ["mltcp_dctcp", "mltcp[slope_fx=2048]", "mltcp_cubic+agent"] {
            assert_eq!(Datapath::Module.check(&v(any)), Ok(()), "{any}");
        }
        assert_eq!(
            (Datapath::Module.ipc(), Datapath::Bpf.ipc()),
            ("netlink", "bpf")
        );
    }

    /// A scenario is refused before anything starts when one of its runs cannot run on the
    /// BPF datapath: a `ccs` entry, the solo runs' cc, a background flow's cc.
    #[test]
    fn bpf_datapath_checks_every_run_of_a_scenario() {
        let mut s = parse(S).unwrap();
        let bpf = Datapath::Bpf;
        let set = |s: &mut Scenario, ccs: &[&str]| {
            s.ccs = ccs.iter().map(|c| c.to_string()).collect();
        };
        set(
            &mut s,
            &["cubic", "mltcp+agent", "mltcp_cubic", "mltcp_cubic+agent"],
        );
        bpf.check_scenario(&s).unwrap();
        set(&mut s, &["cubic", "mltcp_dctcp+agent"]);
        let e = bpf.check_scenario(&s).unwrap_err().to_string();
        assert!(
            e.contains("ccs entry 'mltcp_dctcp+agent'") && e.contains("--datapath bpf"),
            "{e}"
        );
        set(&mut s, &["cubic"]);
        s.solo_cc = "mltcp_dctcp".into();
        let e = bpf.check_scenario(&s).unwrap_err().to_string();
        assert!(e.contains("solo_cc 'mltcp_dctcp'"), "{e}");
        set(
            &mut s,
            &["mltcp_dctcp", "mltcp_cubic+agent", "mltcp[slope_fx=2048]"],
        );
        Datapath::Module.check_scenario(&s).unwrap();
    }

    #[test]
    fn status_header_parses() {
        let st = "slot 29922294086 (60 ms, switch, work 3670 us): 7 controlled flows, 5 native; dropped: 0\njob ...";
        assert_eq!(controlled_flows(st), Some(7));
        assert_eq!(controlled_flows("garbage"), None);
        let st = "slot 1 (60 ms, switch, work 3 us): 0 controlled flows, 4 native; dropped: 0 foreign, 0 bad; notices received 0, RPC failures 0; bursts granted 37 (30 on ack), PCN starts 37 (35 ended on the burst)";
        assert_eq!(bursts_granted(st), Some(37));
        assert_eq!(bursts_granted("garbage"), None);
    }

    /// The agent's own loader accepts what the runner writes, in both modes.
    #[test]
    fn ccp_agent_accepts_the_files() {
        let s = parse(S).unwrap();
        let dir = std::env::temp_dir().join(format!("trainemu-agent-cfg-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let prog =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datapath-programs/mlcc-slot.ccp");
        let on = PcnVariant::On {
            threshold_bytes: 6000,
            harmonic: true,
        };
        let il = Some(mlcc_sched::Rules::Interleave);
        let edf = Some(mlcc_sched::JobOrder::EarliestDeadline);
        for (mode, pcn, rules, order, floor, strict) in [
            (
                AgentMode::NicOnly,
                PcnVariant::Default,
                None,
                None,
                None,
                None,
            ),
            (
                AgentMode::NicOnly,
                PcnVariant::Default,
                il,
                None,
                None,
                None,
            ),
            (
                AgentMode::NicOnly,
                PcnVariant::Default,
                None,
                edf,
                Some(5000),
                Some(true),
            ),
            (
                AgentMode::Switch,
                PcnVariant::Default,
                None,
                None,
                None,
                None,
            ),
            (
                AgentMode::Switch,
                PcnVariant::Off,
                il,
                edf,
                Some(250),
                Some(false),
            ),
            (AgentMode::Switch, on, None, None, None, None),
            (AgentMode::PcnOnly, on, None, None, None, None),
        ] {
            // The run with a floor also names classes and their rates, the one with an order
            // of 250 kbit/s the scavenger.
            let (classes, class_rates) = match floor {
                Some(5000) => (Some(4), Some(mlcc_sched::ClassRates::Line)),
                _ => (None, None),
            };
            let (held_flows, scavenger_target_us, slot_ms) = match floor {
                Some(250) => (Some(mlcc_sched::HeldFlows::Scavenger), Some(600), Some(20)),
                _ => (None, None, None),
            };
            let sched = AgentSched {
                rules,
                job_order: order,
                min_rate_kbps: floor,
                strict_rates: strict,
                classes,
                class_rates,
                held_flows,
                scavenger_target_us,
                slot_ms,
            };
            fs::write(dir.join("topo.toml"), topology_toml(&s, pcn, slot_ms)).unwrap();
            fs::write(
                dir.join("agent.toml"),
                agent_toml(&s, mode, pcn, sched, &prog, &dir.join("regions")),
            )
            .unwrap();
            let c = ccp_agent::config::AgentConfig::load(&dir.join("agent.toml"), None, None)
                .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
            assert_eq!(c.nic_only, mode == AgentMode::NicOnly);
            assert_eq!(c.schedule, mode != AgentMode::PcnOnly);
            assert_eq!(c.rules, rules.unwrap_or(ccp_agent::config::DEFAULT_RULES));
            assert_eq!(c.job_order, order.unwrap_or_default());
            assert_eq!(
                c.strict_rates,
                strict.unwrap_or(ccp_agent::config::DEFAULT_STRICT_RATES)
            );
            assert_eq!(
                c.min_rate_bps,
                floor.unwrap_or(ccp_agent::config::DEFAULT_MIN_RATE_KBPS) * 1000
            );
            assert_eq!(c.classes, classes.unwrap_or(0));
            assert_eq!(c.class_rates, class_rates.unwrap_or_default());
            assert_eq!(
                c.held_flows,
                held_flows.unwrap_or(ccp_agent::config::DEFAULT_HELD_FLOWS)
            );
            assert_eq!(
                c.scavenger_target_us,
                scavenger_target_us.unwrap_or(ccp_agent::config::DEFAULT_SCAVENGER_TARGET_US)
            );
            assert_eq!(
                c.slot_ms,
                slot_ms.unwrap_or(ccp_agent::config::DEFAULT_SLOT_MS)
            );
            assert_eq!(c.topology.slot_ms, c.slot_ms);
            assert_eq!(c.pcn.enabled, pcn != PcnVariant::Off);
            let (t, harmonic) = match pcn {
                PcnVariant::On {
                    threshold_bytes,
                    harmonic,
                } => (threshold_bytes, harmonic),
                _ => (15_000, false),
            };
            assert_eq!(c.pcn.threshold_bytes, t);
            assert_eq!(
                format!("{:?}", c.topology.pcn.combine) == "Harmonic",
                harmonic
            );
            assert_eq!(c.topology.switches.len(), 1);
            let e = c
                .topology
                .ecn
                .get(&port_link(1))
                .expect("h2's port carries its ECN qdisc");
            assert_eq!(c.topology.ecn.len(), 1);
            assert_eq!(
                (e.dev.as_str(), e.netns.as_deref(), e.parent.as_deref()),
                ("v-h2", Some("te-sw"), Some("1:1"))
            );
            assert_eq!(e.initial_threshold_bytes, 30_000);
        }
        let _ = fs::remove_dir_all(&dir);
    }
}
