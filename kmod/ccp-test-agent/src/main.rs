//! `ccp-test-agent`: a portus 0.9 agent for tcp_mltcp.ko's CCP datapath (and, for `const-rate`,
//! for mltcp-bpf's BPF agent datapath on a stock kernel).
//!
//! Runs as root in the initial network namespace (the module's `NETLINK_USERSOCK` kernel socket
//! lives there; joining multicast group 22 needs CAP_NET_ADMIN). Subcommands:
//!
//! - `const-rate`: every `mltcp`/`mltcp_cubic` flow gets a constant `Rate` (bytes/s, optionally
//!   re-read from a file on every report) and a `Cwnd` large enough not to limit it, and, with
//!   `--dscp` or `--class-file`, a traffic class (SET_CLASS, this project's extension);
//! - `reno`: Reno's window computed in the agent from per-RTT reports (the benchmark against the
//!   kernel's native reno);
//! - `ping`: the agent -> datapath -> report round trip, over netlink to the kernel or over
//!   portus's unix-socket IPC to `userspace-dp` (a user-space datapath on the `ccp-datapath`
//!   core), for the benchmark's netlink/unix ratio;
//! - `forge`: drops privileges and sends a well-formed UPDATE_FIELDS to the kernel, to show that
//!   an unprivileged sender changes nothing;
//! - `churn`: many short connections of one algorithm (not an agent: the load a churn test runs
//!   while an agent controls the flows).
//!
//! portus picks the algorithm of a CREATE by its name only among `additional_alg`s; the
//! `default_alg` gets every name it does not know. Each agent here registers one algorithm as
//! the default, so flows announced as `mltcp` and as `mltcp_cubic` both reach it.
//!
//! IPC: by default [`nl::CheckedNetlink`], portus's netlink framing plus a check that the sender
//! is the kernel (portus's own netlink backend does not check the sender's port id, so a forged
//! multicast on group 22 reaches the algorithm, or crashes portus with an INSTALL message);
//! `--ipc portus` uses `portus::ipc::netlink::Socket` unchanged.
//!
//! `--ipc bpf`: [`ccp_ipc::BpfIpc`], the backend `ccp-agent run --ipc bpf` uses, over the BPF
//! agent datapath of `mltcp-bpf` (docs/bpf.md). That datapath runs only the agent's slot program
//! (datapath-programs/mlcc-slot.ccp), so only `const-rate` runs over it, and it installs the slot
//! program instead of its own: `Rate` and `Cwnd` as over netlink, `Control.slot_us` from
//! `--report-ms`; the window then follows the slot program's rule within its default ceiling, and
//! the rate is the flow's pacing limit; `--dscp` / `--class-file` mark its packets through the
//! datapath's control map (`ccp_ipc::BpfIpc::class_sender`). A test can so command a fixed rate
//! or a traffic class to a flow of the BPF datapath, and kill the agent under it
//! (ci/vm-tests/bpf.sh, `bpf_agent_hold`, `bpf_agent_class`).

mod algs;
mod churn;
mod forge;
mod ping;
mod reno_program;

/// The sender-checked netlink backend, shared with `ccp-agent` (crate `ccp-ipc`).
use ccp_ipc::netlink as nl;

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
    /// With `--ipc unix`: the socket name (portus binds /tmp/ccp/NAME).
    #[arg(long, default_value = "ccp-ping", global = true)]
    unix_name: String,
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
    /// portus's unix-socket IPC (binds /tmp/ccp/NAME, `--unix-name`), for a user-space datapath.
    Unix,
    /// mltcp-bpf's BPF agent datapath (`ccp_ipc::BpfIpc`; `mltcp-bpf load` first, run as root):
    /// `const-rate` only, which then installs the slot program.
    Bpf,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Set a constant rate on every flow the module announces.
    ConstRate(algs::ConstRateArgs),
    /// Reno's window computed in the agent over per-RTT reports.
    Reno(algs::RenoArgs),
    /// Drop privileges and send a forged UPDATE_FIELDS to the kernel.
    Forge(forge::ForgeArgs),
    /// Measure the agent -> datapath -> report round trip on the first flow announced.
    Ping(ping::PingArgs),
    /// A user-space datapath (the `ccp-datapath` core, one emulated flow) over unix-socket IPC.
    UserspaceDp(ping::UserspaceDpArgs),
    /// Open many short connections of one congestion-control algorithm (not an agent).
    Churn(churn::ChurnArgs),
}

/// Runs `alg` on `ipc` until SIGINT/SIGTERM (or the socket fails).
fn run_agent<I: Ipc, A: CongAlg<I> + 'static>(ipc: I, alg: A, stop: Arc<AtomicBool>) -> Result<()> {
    install_signal_stop(stop.clone());
    tracing::info!(
        ipc = %I::name(),
        group = nl::CCP_GROUP,
        alg = A::name(),
        "agent listening"
    );
    portus::RunBuilder::new(BackendBuilder { sock: ipc })
        .default_alg(alg)
        .with_stop_handle(stop)
        .run()
        .map_err(|e| anyhow!("portus: {}", e.0))?;
    let u = own_rusage();
    tracing::info!(
        dropped_foreign = nl::DROPPED_FOREIGN.load(Ordering::Relaxed),
        dropped_bad = nl::DROPPED_BAD.load(Ordering::Relaxed),
        msgs_in = nl::ACCEPTED.load(Ordering::Relaxed),
        msgs_out = nl::SENT.load(Ordering::Relaxed),
        utime_us = u.utime_us,
        stime_us = u.stime_us,
        vol_ctxsw = u.voluntary_switches,
        invol_ctxsw = u.involuntary_switches,
        "agent stopped"
    );
    Ok(())
}

/// The agent's own CPU use over its life (`getrusage(RUSAGE_SELF)`): what
/// `ci/scenarios/ccp-overhead.sh` divides by the reports to split CCP's cost per report into
/// the agent's user and system time and the rest. The kernel splits the task's exact run time
/// (`sum_exec_runtime`) in the ratio of its user and system tick samples, so the sum is exact
/// and the split is a sample.
#[derive(Debug, Clone, Copy, Default)]
struct OwnRusage {
    /// User CPU time, µs.
    utime_us: u64,
    /// System CPU time, µs (the agent's system calls, including the module's netlink input,
    /// which runs in the sender's context).
    stime_us: u64,
    /// Voluntary context switches (blocking in `recv`: one per wake-up by a report).
    voluntary_switches: u64,
    /// Involuntary context switches (preemption).
    involuntary_switches: u64,
}

fn own_rusage() -> OwnRusage {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a valid, writable `rusage`; getrusage only writes it.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) } != 0 {
        return OwnRusage::default();
    }
    // SAFETY: getrusage returned 0, so it filled `ru` (and it was zeroed before).
    let ru = unsafe { ru.assume_init() };
    let us = |t: libc::timeval| (t.tv_sec as u64) * 1_000_000 + t.tv_usec as u64;
    OwnRusage {
        utime_us: us(ru.ru_utime),
        stime_us: us(ru.ru_stime),
        voluntary_switches: ru.ru_nvcsw as u64,
        involuntary_switches: ru.ru_nivcsw as u64,
    }
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

fn run_with<A>(cli: &Cli, alg: A, stop: Arc<AtomicBool>) -> Result<()>
where
    A: CongAlg<nl::CheckedNetlink>
        + CongAlg<portus::ipc::netlink::Socket<Blocking>>
        + CongAlg<portus::ipc::unix::Socket<Blocking>>
        + CongAlg<ccp_ipc::BpfIpc>
        + 'static,
{
    match cli.ipc {
        IpcKind::Checked => run_agent(
            nl::CheckedNetlink::new().map_err(|e| anyhow!(e.0))?,
            alg,
            stop,
        ),
        IpcKind::Portus => {
            tracing::warn!("portus's netlink backend does not check the sender's port id");
            let s = portus::ipc::netlink::Socket::<Blocking>::new()
                .map_err(|e| anyhow!("netlink socket (needs CAP_NET_ADMIN): {}", e.0))?;
            run_agent(s, alg, stop)
        }
        IpcKind::Unix => {
            let _ = std::fs::create_dir_all("/tmp/ccp");
            let _ = std::fs::remove_file(format!("/tmp/ccp/{}", cli.unix_name));
            let s = portus::ipc::unix::Socket::<Blocking>::new(&cli.unix_name)
                .map_err(|e| anyhow!("unix socket /tmp/ccp/{}: {}", cli.unix_name, e.0))?;
            run_agent(s, alg, stop)
        }
        IpcKind::Bpf => run_agent(
            ccp_ipc::BpfIpc::new().map_err(|e| anyhow!("BPF datapath: {}", e.0))?,
            alg,
            stop,
        ),
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let level = if cli.verbose {
        tracing::Level::DEBUG
    } else {
        tracing::Level::INFO
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    let stop = Arc::new(AtomicBool::new(true));
    if cli.ipc == IpcKind::Bpf && matches!(cli.cmd, Cmd::Reno(_) | Cmd::Ping(_)) {
        return Err(anyhow!(
            "--ipc bpf: the BPF agent datapath runs only the slot program, which only const-rate \
             installs"
        ));
    }
    match &cli.cmd {
        Cmd::ConstRate(a) if cli.ipc == IpcKind::Bpf => {
            // The BPF datapath first: the algorithm's traffic classes go through its control map.
            let ipc = ccp_ipc::BpfIpc::new().map_err(|e| anyhow!("BPF datapath: {}", e.0))?;
            let alg =
                algs::ConstRate::over_slot_program(a, ipc.class_sender()).context("const-rate")?;
            run_agent(ipc, alg, stop)
        }
        Cmd::ConstRate(a) => {
            let alg = algs::ConstRate::new(a, cli.ipc != IpcKind::Unix).context("const-rate")?;
            run_with(&cli, alg, stop)
        }
        Cmd::Reno(a) => run_with(&cli, algs::Reno::new(a), stop),
        Cmd::Forge(a) => forge::run(a),
        Cmd::Ping(a) => {
            let samples = Arc::new(std::sync::Mutex::new(ping::Samples::default()));
            let r = run_with(
                &cli,
                ping::Ping::new(a, samples.clone(), stop.clone()),
                stop,
            );
            let s = samples.lock().unwrap_or_else(|p| p.into_inner());
            let ipc = match cli.ipc {
                IpcKind::Unix => "unix",
                _ => "netlink",
            };
            println!("{}", ping::summary(ipc, &s));
            r
        }
        Cmd::UserspaceDp(a) => ping::run_userspace_dp(a, &cli.unix_name),
        Cmd::Churn(a) => churn::run(a),
    }
}

/// Reads a rate in Mbit/s from `path` (a decimal number, surrounding whitespace ignored).
pub fn read_rate_file(path: &PathBuf) -> Result<f64> {
    let s = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: f64 = s
        .trim()
        .parse()
        .with_context(|| format!("{}: not a number: {:?}", path.display(), s.trim()))?;
    if !(v > 0.0 && v.is_finite()) {
        return Err(anyhow!("{}: rate must be positive", path.display()));
    }
    Ok(v)
}
