//! `ccp-test-agent`: a portus 0.9 agent for tcp_mltcp.ko's CCP datapath (issue 4, items 5 and 6).
//!
//! Runs as root in the initial network namespace (the module's `NETLINK_USERSOCK` kernel socket
//! lives there; joining multicast group 22 needs CAP_NET_ADMIN). Subcommands:
//!
//! - `const-rate`: every `mltcp`/`mltcp_cubic` flow gets a constant `Rate` (bytes/s, optionally
//!   re-read from a file on every report) and a `Cwnd` large enough not to limit it;
//! - `reno`: Reno's window computed in the agent from per-RTT reports (the benchmark against the
//!   kernel's native reno);
//! - `forge`: drops privileges and sends a well-formed UPDATE_FIELDS to the kernel, to show that
//!   an unprivileged sender changes nothing.
//!
//! portus picks the algorithm of a CREATE by its name only among `additional_alg`s; the
//! `default_alg` gets every name it does not know. Each agent here registers one algorithm as
//! the default, so flows announced as `mltcp` and as `mltcp_cubic` both reach it.
//!
//! IPC: by default [`nl::CheckedNetlink`], portus's netlink framing plus a check that the sender
//! is the kernel (portus's own netlink backend does not check the sender's port id, so a forged
//! multicast on group 22 reaches the algorithm, or crashes portus with an INSTALL message);
//! `--ipc portus` uses `portus::ipc::netlink::Socket` unchanged.

mod algs;
mod forge;
mod nl;

use anyhow::{anyhow, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use portus::ipc::{BackendBuilder, Blocking, Ipc};
use portus::CongAlg;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Command line.
#[derive(Parser, Debug)]
#[command(name = "ccp-test-agent", version, about)]
struct Cli {
    /// Which netlink backend carries the portus messages.
    #[arg(long, value_enum, default_value_t = IpcKind::Checked, global = true)]
    ipc: IpcKind,
    /// Log portus's debug messages too (each CREATE's details, installs).
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

/// The netlink backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum IpcKind {
    /// portus's framing; accepts only messages whose sender port id is 0 (the kernel).
    Checked,
    /// `portus::ipc::netlink::Socket` as shipped (no sender check).
    Portus,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Set a constant rate on every flow the module announces.
    ConstRate(algs::ConstRateArgs),
    /// Reno's window computed in the agent over per-RTT reports.
    Reno(algs::RenoArgs),
    /// Drop privileges and send a forged UPDATE_FIELDS to the kernel.
    Forge(forge::ForgeArgs),
}

/// Runs `alg` on `ipc` until SIGINT/SIGTERM (or the socket fails).
fn run_agent<I: Ipc, A: CongAlg<I> + 'static>(ipc: I, alg: A) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(true));
    install_signal_stop(stop.clone());
    tracing::info!(group = nl::CCP_GROUP, alg = A::name(), "agent listening on netlink");
    portus::RunBuilder::new(BackendBuilder { sock: ipc })
        .default_alg(alg)
        .with_stop_handle(stop)
        .run()
        .map_err(|e| anyhow!("portus: {}", e.0))?;
    tracing::info!(
        dropped_foreign = nl::DROPPED_FOREIGN.load(Ordering::Relaxed),
        dropped_bad = nl::DROPPED_BAD.load(Ordering::Relaxed),
        "agent stopped"
    );
    Ok(())
}

/// The flag portus's loop polls (once a second at most, its receive timeout).
static STOP: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();

extern "C" fn on_signal(_: libc::c_int) {
    if let Some(s) = STOP.get() {
        s.store(false, Ordering::SeqCst);
    }
}

fn install_signal_stop(flag: Arc<AtomicBool>) {
    let _ = STOP.set(flag);
    // SAFETY: The handler only does an atomic store (async-signal-safe).
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

fn run_with<A>(kind: IpcKind, alg: A) -> Result<()>
where
    A: CongAlg<nl::CheckedNetlink> + CongAlg<portus::ipc::netlink::Socket<Blocking>> + 'static,
{
    match kind {
        IpcKind::Checked => run_agent(nl::CheckedNetlink::new().map_err(|e| anyhow!(e.0))?, alg),
        IpcKind::Portus => {
            tracing::warn!("portus's netlink backend does not check the sender's port id");
            let s = portus::ipc::netlink::Socket::<Blocking>::new()
                .map_err(|e| anyhow!("netlink socket (needs CAP_NET_ADMIN): {}", e.0))?;
            run_agent(s, alg)
        }
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let level = if cli.verbose { tracing::Level::DEBUG } else { tracing::Level::INFO };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    match cli.cmd {
        Cmd::ConstRate(a) => {
            let alg = algs::ConstRate::new(&a).context("const-rate")?;
            run_with(cli.ipc, alg)
        }
        Cmd::Reno(a) => run_with(cli.ipc, algs::Reno::new(&a)),
        Cmd::Forge(a) => forge::run(&a),
    }
}

/// Reads a rate in Mbit/s from `path` (a decimal number, surrounding whitespace ignored).
pub fn read_rate_file(path: &PathBuf) -> Result<f64> {
    let s = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: f64 = s.trim().parse().with_context(|| format!("{}: not a number: {:?}", path.display(), s.trim()))?;
    if !(v > 0.0 && v.is_finite()) {
        return Err(anyhow!("{}: rate must be positive", path.display()));
    }
    Ok(v)
}
