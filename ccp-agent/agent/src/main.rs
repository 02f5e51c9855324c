// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `ccp-agent`: command line of the per-host flow scheduler (see the library crate's docs).

use anyhow::anyhow;
use ccp_agent::config::{AgentConfig, Overrides, Topology};
use ccp_agent::run::{run_agent, run_switch, IpcKind, RunOptions};
use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// DNN-aware flow scheduler on tcp_mltcp's CCP datapath (mlcc: time slots, greedy least-path-load
/// schedules, PS and ring dependency rules, emulated switches). Logging: RUST_LOG (default info).
#[derive(Parser, Debug)]
#[command(name = "ccp-agent", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the agent: one per kernel, root (or CAP_NET_ADMIN) in the initial network namespace
    /// for --ipc netlink. SIGTERM/SIGINT close the datapath socket: flows fall back to native MLTCP.
    #[command(after_long_help = ccp_agent::config::AGENT_HELP)]
    Run {
        /// agent.toml: topology file, served hosts, listen address, program file, progress
        /// directory, unix_name, nic_only, schedule, slot_ms, horizon, min_rate_kbps, cwnd_bytes,
        /// rpc_timeout_ms, metrics_addr, [pcn] (enabled, threshold_bytes, default_rtt_us, poll_us) (every
        /// field: see below with --help).
        #[arg(long)]
        config: PathBuf,
        /// CCP transport: netlink (the kernel module), unix (/tmp/ccp/<unix_name>, user-space
        /// datapaths) or bpf (mltcp-bpf's agent datapath on a stock kernel, slot program only).
        #[arg(long, value_enum, default_value_t = IpcKind::Netlink)]
        ipc: IpcKind,
        /// Slot length in ms (default: agent.toml's, else the topology's, else 60); slots are
        /// aligned to multiples of it on the wall clock.
        #[arg(long)]
        slot_ms: Option<u64>,
        /// Horizon K: slots planned ahead, the current one included (default 10).
        #[arg(long)]
        horizon: Option<usize>,
        /// Serve these [[host]]s of the topology instead of agent.toml's `hosts` (repeatable, or
        /// comma-separated in CCP_AGENT_HOSTS): one agent.toml for every node of a cluster, each
        /// agent naming its own host, e.g. from the Kubernetes node name.
        #[arg(long = "host", env = "CCP_AGENT_HOSTS", value_delimiter = ',')]
        hosts: Vec<String>,
        /// Serve Prometheus metrics (text format, GET /metrics) on this address, e.g.
        /// 127.0.0.1:9470; overrides agent.toml's `metrics_addr` (default: not served).
        /// Metric names and units: README, "Deploying on real hosts", Metrics.
        #[arg(long, value_name = "ADDR:PORT")]
        metrics_addr: Option<SocketAddr>,
    },
    /// Run an emulated switch daemon: load tables of its links over K slots, served over gRPC
    /// (FetchFeedback, UpdateSchedule -- an admission --, PcnStart, PcnEnd) on the topology's
    /// `listen` address of that switch; sets its ECN links' thresholds with `tc` (needs
    /// CAP_NET_ADMIN in the links' namespaces).
    #[command(after_long_help = ccp_agent::config::TOPOLOGY_HELP)]
    Switch {
        /// topo.toml: slot_ms, horizon, [pcn] (combine, timeout_ms, apply_timeout_ms), [[link]]
        /// with an optional [link.ecn] (the ECN queue PCN sets with tc), [[host]], [[switch]],
        /// [[route]].
        #[arg(long)]
        config: PathBuf,
        /// Which [[switch]] of the topology to serve (needed when there are several).
        #[arg(long)]
        name: Option<String>,
        /// Slot length in ms (default: the topology's).
        #[arg(long)]
        slot_ms: Option<u64>,
        /// Horizon K (default: the topology's).
        #[arg(long)]
        horizon: Option<usize>,
        /// Serve Prometheus metrics (text format, GET /metrics) on this address, e.g.
        /// 127.0.0.1:9471 (default: not served; ccp-switch@.service takes it from a drop-in's
        /// Environment=CCP_SWITCH_METRICS_ADDR=...).
        #[arg(long, value_name = "ADDR:PORT", env = "CCP_SWITCH_METRICS_ADDR")]
        metrics_addr: Option<SocketAddr>,
    },
    /// Validate a configuration without starting anything: agent.toml (and the topology and
    /// datapath program it names) with --config, or a switch daemon's topo.toml with --topology.
    /// Exit status 0 when valid, 78 (EX_CONFIG, as for `run` and `switch`) with the file, field
    /// and value named when not. The systemd units run it before starting.
    Check {
        /// agent.toml to check.
        #[arg(
            long,
            conflicts_with = "topology",
            required_unless_present = "topology"
        )]
        config: Option<PathBuf>,
        /// As `run --host`: check with these hosts instead of the file's.
        #[arg(
            long = "host",
            env = "CCP_AGENT_HOSTS",
            value_delimiter = ',',
            requires = "config"
        )]
        hosts: Vec<String>,
        /// topo.toml to check (as `switch` loads it).
        #[arg(long)]
        topology: Option<PathBuf>,
    },
    /// Show a running agent's per-flow scheduled and achieved rates (or a switch's load table).
    Status {
        /// The agent's gRPC address (default: the `listen` of --config).
        #[arg(long)]
        agent: Option<SocketAddr>,
        /// Read the agent's address from this agent.toml.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Show this switch daemon's table instead.
        #[arg(long)]
        switch: Option<SocketAddr>,
        /// Print the reply as Rust debug output instead of a table.
        #[arg(long)]
        raw: bool,
    },
}

static STOP: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();

extern "C" fn on_signal(_: libc::c_int) {
    if let Some(s) = STOP.get() {
        s.store(false, Ordering::SeqCst);
    }
}

fn stop_on_signals() -> Arc<AtomicBool> {
    let flag = STOP.get_or_init(|| Arc::new(AtomicBool::new(true))).clone();
    // SAFETY: The handler only does an atomic store, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    flag
}

/// Exit status of a configuration that fails validation (sysexits.h EX_CONFIG), so that a service
/// manager does not restart into the same error (`RestartPreventExitStatus=78` in the units).
const EXIT_CONFIG: i32 = 78;

/// Why the program stopped: a configuration that fails validation, or anything else.
enum Failure {
    Config(anyhow::Error),
    Other(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Other(e)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Other(e.into())
    }
}

/// Marks a configuration-loading error as such.
fn checked<T, E: Into<anyhow::Error>>(
    r: std::result::Result<T, E>,
) -> std::result::Result<T, Failure> {
    r.map_err(|e| Failure::Config(e.into()))
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    match real_main(Cli::parse()) {
        Ok(()) => {}
        Err(Failure::Config(e)) => {
            eprintln!("ccp-agent: invalid configuration: {e:#}");
            std::process::exit(EXIT_CONFIG);
        }
        Err(Failure::Other(e)) => {
            eprintln!("ccp-agent: {e:#}");
            std::process::exit(1);
        }
    }
}

fn real_main(cli: Cli) -> std::result::Result<(), Failure> {
    match cli.cmd {
        Cmd::Run {
            config,
            ipc,
            slot_ms,
            horizon,
            hosts,
            metrics_addr,
        } => {
            let cfg = checked(AgentConfig::load_with(
                &config,
                &Overrides {
                    slot_ms,
                    horizon,
                    hosts,
                    metrics_addr,
                },
            ))?;
            let stop = stop_on_signals();
            Ok(run_agent(
                cfg,
                RunOptions {
                    ipc,
                    listener: None,
                    stop,
                    shared_out: None,
                },
            )?)
        }
        Cmd::Switch {
            config,
            name,
            slot_ms,
            horizon,
            metrics_addr,
        } => {
            let topo = checked(Topology::load(&config))?;
            let stop = stop_on_signals();
            Ok(run_switch(
                &topo,
                name.as_deref(),
                slot_ms,
                horizon,
                metrics_addr,
                stop,
            )?)
        }
        Cmd::Check {
            config: agent,
            hosts,
            topology,
        } => {
            match (agent, topology) {
                (Some(a), _) => {
                    let cfg = checked(AgentConfig::load_with(
                        &a,
                        &Overrides {
                            hosts,
                            ..Overrides::default()
                        },
                    ))?;
                    println!(
                        "{}: valid (hosts {:?}, slot {} ms, horizon {})",
                        a.display(),
                        cfg.hosts,
                        cfg.slot_ms,
                        cfg.horizon
                    );
                }
                (None, Some(t)) => {
                    checked(Topology::load(&t))?;
                    println!("{}: valid", t.display());
                }
                (None, None) => {
                    return Err(Failure::Other(anyhow!(
                        "give --config agent.toml or --topology topo.toml"
                    )))
                }
            }
            Ok(())
        }
        Cmd::Status {
            agent,
            config,
            switch,
            raw,
        } => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            if let Some(s) = switch {
                let r = rt.block_on(ccp_agent::status::switch_status(s))?;
                if raw {
                    println!("{r:#?}");
                } else {
                    print!("{}", ccp_agent::status::format_switch(&r));
                }
                return Ok(());
            }
            let addr = match (agent, config) {
                (Some(a), _) => a,
                (None, Some(c)) => checked(AgentConfig::load(&c, None, None))?.listen,
                (None, None) => {
                    return Err(Failure::Other(anyhow!(
                        "give --agent ADDR, --config agent.toml or --switch ADDR"
                    )))
                }
            };
            let r = rt.block_on(ccp_agent::status::agent_status(addr))?;
            if raw {
                println!("{r:#?}");
            } else {
                print!("{}", ccp_agent::status::format_agent(&r));
            }
            Ok(())
        }
    }
}
