// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `ccp-agent run` and `ccp-agent switch`: wiring the pieces together.
//!
//! The agent's threads: the calling thread runs portus's receive loop (all flows, and the agent
//! core [`crate::agent_core`] inside its shell [`crate::ccp::Shell`]); a timer thread
//! ([`crate::ticker`]) posts the slot ticks; a tokio runtime (2 worker threads) serves the
//! agent's gRPC service and carries its RPCs to switches and other agents ([`crate::net`]),
//! posting their answers back. Stop: clear the `stop` flag (the
//! binary does it on SIGTERM/SIGINT); within 100 ms portus leaves its loop and the datapath
//! socket is closed, so `tcp_mltcp`'s flows fall back to native MLTCP at once (the module sees
//! no listener on group 22); then the agent takes its schedules off the switches and detaches
//! from the progress regions. With `[pcn] enabled` (the default) a third thread runs the PCN
//! burst gate ([`crate::burst`]); it stops after portus, ending its starts on the switches.

use crate::agent_core::Core;
use crate::ccp::{install_driver, Driver, MlccAlg, Shell, ShellIpc};
use crate::config::{AgentConfig, Switch, Topology};
use crate::monitor::Monitor;
use crate::net::Net;
use crate::peer::AgentService;
use crate::proto::agent_server::AgentServer;
use crate::shared::Shared;
use anyhow::{anyhow, Context, Result};
use ccp_ipc::PollableIpc;
use portus::ipc::BackendBuilder;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Which IPC carries the CCP messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IpcKind {
    /// Netlink to `tcp_mltcp.ko` (group 22, only the kernel's messages accepted); root or
    /// CAP_NET_ADMIN in the initial network namespace.
    Netlink,
    /// portus's unix datagrams at /tmp/ccp/<unix_name>, for user-space datapaths (tests).
    Unix,
    /// mltcp-bpf's BPF agent datapath on a stock kernel (`mltcp-bpf load` first; root): runs
    /// the slot program only, on `mltcp` and `mltcp_cubic` flows; flows fall back to BPF
    /// MLTCP within 1 s of the agent's exit (docs/bpf.md).
    Bpf,
}

/// How to run an agent.
pub struct RunOptions {
    /// The IPC.
    pub ipc: IpcKind,
    /// An already bound gRPC listener (tests); `None`: bind the config's `listen`.
    pub listener: Option<std::net::TcpListener>,
    /// Cleared to stop.
    pub stop: Arc<AtomicBool>,
    /// Filled with the shared state once it exists (tests read the status from it).
    pub shared_out: Option<std::sync::mpsc::Sender<Arc<Shared>>>,
}

/// Runs an agent until `opts.stop` is cleared. Errors: not in the initial network namespace
/// (netlink), a socket that cannot be opened or bound, a runtime that cannot start.
pub fn run_agent(cfg: AgentConfig, opts: RunOptions) -> Result<()> {
    if opts.ipc == IpcKind::Netlink {
        match ccp_ipc::check_initial_netns() {
            Ok(()) => {}
            Err(e @ ccp_ipc::NetnsError::Unreadable { .. }) => {
                tracing::warn!(error = %e, "cannot verify that this is the initial network namespace (where tcp_mltcp's CCP socket lives)")
            }
            Err(e) => return Err(anyhow!("{e}")),
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("ccp-agent-rpc")
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let shared = Shared::new().context("eventfd")?;
    if let Some(tx) = &opts.shared_out {
        let _ = tx.send(shared.clone());
    }
    let cfg = Arc::new(cfg);
    let listener = match opts.listener {
        Some(l) => l,
        None => std::net::TcpListener::bind(cfg.listen)
            .with_context(|| format!("binding the agent's gRPC address {}", cfg.listen))?,
    };
    listener.set_nonblocking(true)?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = {
        let _g = rt.enter();
        let l = tokio::net::TcpListener::from_std(listener)?;
        let svc = AgentServer::new(AgentService::new(shared.clone()));
        rt.spawn(
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming_shutdown(crate::nodelay_incoming(l), async {
                    let _ = rx.await;
                }),
        )
    };
    let metrics = match cfg.metrics_addr {
        Some(a) => {
            let l = crate::metrics::bind(a, "--metrics-addr / metrics_addr")?;
            let registry = Arc::new(crate::metrics::agent_registry(shared.clone()));
            let (mtx, mrx) = tokio::sync::oneshot::channel::<()>();
            let task = rt.spawn(async move {
                if let Err(e) = crate::metrics::serve(l, registry, async {
                    let _ = mrx.await;
                })
                .await
                {
                    tracing::warn!(error = %format!("{e:#}"), "metrics server stopped");
                }
            });
            Some((mtx, task))
        }
        None => None,
    };
    let net = Net::new(&cfg, rt.handle().clone(), shared.clone());
    let gate_running = Arc::new(AtomicBool::new(true));
    let gate = if cfg.pcn.enabled {
        let g = crate::burst::BurstGate::new(cfg.clone(), shared.clone(), rt.handle().clone());
        let running = gate_running.clone();
        Some(
            std::thread::Builder::new()
                .name(String::from("ccp-agent-pcn"))
                .spawn(move || g.run(running))
                .context("starting the PCN burst gate thread")?,
        )
    } else {
        None
    };
    tracing::info!(
        hosts = ?cfg.hosts, listen = %cfg.listen, ipc = ?opts.ipc, slot_ms = cfg.slot_ms, horizon = cfg.horizon,
        mode = if cfg.nic_only || cfg.topology.switches.is_empty() { "nic-only" } else { "switch" },
        schedule = cfg.schedule, classes = cfg.classes, metrics = ?cfg.metrics_addr,
        program = %cfg.program_file.display(), progress_dir = %cfg.progress_dir.display(),
        "ccp-agent starting"
    );
    let result = match opts.ipc {
        IpcKind::Netlink => {
            let s = ccp_ipc::CheckedNetlink::new().map_err(|e| anyhow!("netlink: {}", e.0))?;
            *shared.drops.lock().unwrap_or_else(|p| p.into_inner()) = Some(s.counters());
            // The flows' traffic classes go to the kernel beside portus's socket.
            let classes = (cfg.classes > 0)
                .then(ccp_ipc::KernelSender::new)
                .transpose()
                .map_err(|e| anyhow!("netlink socket for SET_CLASS: {}", e.0))?
                .map(|k| Box::new(k) as Box<dyn ccp_ipc::ClassSender>);
            run_portus(s, &cfg, shared.clone(), net, opts.stop, classes)
        }
        IpcKind::Bpf => {
            let s = ccp_ipc::BpfIpc::new().map_err(|e| anyhow!("BPF datapath: {}", e.0))?;
            let classes = (cfg.classes > 0)
                .then(|| Box::new(s.class_sender()) as Box<dyn ccp_ipc::ClassSender>);
            run_portus(s, &cfg, shared.clone(), net, opts.stop, classes)
        }
        IpcKind::Unix => {
            let s = ccp_ipc::UnixIpc::bind(&cfg.unix_name)
                .map_err(|e| anyhow!("unix socket: {}", e.0))?;
            if cfg.classes > 0 {
                tracing::warn!(
                    classes = cfg.classes,
                    "[sched] classes needs --ipc netlink or bpf: no traffic class is set with --ipc unix"
                );
            }
            run_portus(s, &cfg, shared.clone(), net, opts.stop, None)
        }
    };
    gate_running.store(false, std::sync::atomic::Ordering::SeqCst);
    if let Some(g) = gate {
        let _ = g.join();
    }
    let _ = tx.send(());
    let _ = rt
        .block_on(async { tokio::time::timeout(std::time::Duration::from_secs(1), server).await });
    if let Some((mtx, task)) = metrics {
        let _ = mtx.send(());
        let _ = rt.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(1), task).await
        });
    }
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    tracing::info!("ccp-agent stopped");
    result
}

fn run_portus<I: PollableIpc>(
    inner: I,
    cfg: &Arc<AgentConfig>,
    shared: Arc<Shared>,
    net: Net,
    stop: Arc<AtomicBool>,
    classes: Option<Box<dyn ccp_ipc::ClassSender>>,
) -> Result<()> {
    let core = Core::new(cfg.core_config(), crate::wall_us())?;
    let shell = Rc::new(RefCell::new(Shell::<ShellIpc<I>>::new(
        core,
        Monitor::new(&cfg.progress_dir),
        net,
        shared.clone(),
        classes,
    )));
    let driver: Rc<RefCell<dyn Driver>> = shell.clone();
    install_driver(Some(driver));
    let ticking = Arc::new(AtomicBool::new(true));
    // The core re-plans within a slot only without switches (see `crate::agent_core`).
    let no_switch = cfg.nic_only || cfg.topology.switches.is_empty();
    let poll_us = (cfg.work_conserving && cfg.schedule && no_switch)
        .then_some(crate::agent_core::io::POLL_US);
    let ticker = crate::ticker::spawn(cfg.slot_ms * 1000, poll_us, shared.clone(), ticking.clone())
        .context("starting the slot timer thread")?;
    let alg = MlccAlg::new(shell.clone(), cfg.program.clone());
    let ipc = ShellIpc::new(inner, shared.clone());
    let r = portus::RunBuilder::new(BackendBuilder { sock: ipc })
        .default_alg(alg)
        .with_stop_handle(stop)
        .run();
    ticking.store(false, std::sync::atomic::Ordering::SeqCst);
    let _ = ticker.join();
    install_driver(None);
    // The socket is closed (portus dropped it): the flows are native again.
    tracing::info!("datapath socket closed: flows fall back to native MLTCP");
    if let Ok(mut s) = shell.try_borrow_mut() {
        s.shutdown();
    }
    r.map_err(|e| anyhow!("portus: {}", e.0))
}

/// Runs the switch daemon `name` of `topo` (the only one when `name` is `None`) until
/// SIGTERM/SIGINT or `stop` clears, with its Prometheus metrics on `metrics_addr` when given.
/// Errors: unknown switch name, bind failure (of its gRPC or metrics address).
pub fn run_switch(
    topo: &Topology,
    name: Option<&str>,
    slot_ms: Option<u64>,
    horizon: Option<usize>,
    metrics_addr: Option<std::net::SocketAddr>,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    let sw: &Switch = match name {
        Some(n) => topo.switches.iter().find(|s| s.name == n).ok_or_else(|| {
            anyhow!(
                "{}: no [[switch]] named {n:?} (known: {:?})",
                topo.file.display(),
                topo.switches.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        })?,
        None => match topo.switches.as_slice() {
            [one] => one,
            [] => return Err(anyhow!("{}: no [[switch]] to serve", topo.file.display())),
            _ => {
                return Err(anyhow!(
                    "{}: several switches: choose one with --name",
                    topo.file.display()
                ))
            }
        },
    };
    let clock = mlcc_sched::SlotClock::new(
        slot_ms.unwrap_or(topo.slot_ms) * 1000,
        horizon.unwrap_or(topo.horizon),
    )
    .map_err(|e| anyhow!("{e}"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let metrics = metrics_addr
        .map(|a| crate::metrics::bind(a, "--metrics-addr"))
        .transpose()?;
    rt.block_on(crate::switch::serve(
        topo,
        sw,
        clock,
        None,
        metrics,
        async move {
            while stop.load(std::sync::atomic::Ordering::SeqCst) {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        },
    ))
}
