// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `mltcp-bpf`: loads MLTCP's congestion controls `mltcp` and `mltcp_cubic` into a stock kernel
//! as BPF struct_ops (bpf/mltcp.bpf.c, compiled at build time), unloads them, reports them, and
//! sets their parameters — the same names, defaults and ranges as tcp_mltcp.ko's module
//! parameters (`mltcp_math::params::PARAMS`).
//!
//! After `load` the algorithms are registered like any other: `sysctl net.ipv4.tcp_congestion_control`,
//! `ip route ... congctl`, `setsockopt(TCP_CONGESTION)` select them. The registration outlives
//! this process (the kernel holds the struct_ops maps); `unload` removes it. The parameter and
//! counter maps are found again by name (`mltcp_params`, `mltcp_stats`) through the kernel's map
//! IDs, so no BPF filesystem is needed.

mod kernel;

use std::ffi::CString;
use std::mem::MaybeUninit;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags};
use mltcp_math::c_header::bpf_param_names;
use mltcp_math::params::Params;
use tracing::{debug, info, warn};
use tracing_subscriber::EnvFilter;

use kernel::{
    algorithms_available, decode_stats, encode_params, existing_registration, find_maps,
    parse_assignment, Existing, ALGORITHMS, PARAMS_MAP, STATS_MAP,
};

mod skel {
    // The generated skeleton: its unsafe blocks are libbpf-cargo's, documented there.
    #![allow(clippy::undocumented_unsafe_blocks, unused_imports)]
    include!(concat!(env!("OUT_DIR"), "/mltcp.skel.rs"));
}

/// MLTCP (`mltcp`, `mltcp_cubic`) as BPF struct_ops congestion controls for kernels that cannot
/// load tcp_mltcp.ko. Needs a kernel with BTF, and root: CAP_BPF and CAP_PERFMON to load,
/// CAP_SYS_ADMIN to find the loaded maps again (unload, status, set, load --exist-ok).
#[derive(Parser, Debug)]
#[command(name = "mltcp-bpf", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Registers `mltcp` and `mltcp_cubic` with the kernel (they stay registered after this
    /// command exits), with the default parameters changed by any NAME=VALUE given.
    Load {
        /// The kernel's HZ (CONFIG_HZ); by default read from /boot/config-$(uname -r) or
        /// /proc/config.gz. Needed when neither exists.
        #[arg(long)]
        hz: Option<u32>,
        /// When mltcp-bpf has already registered both algorithms, set the parameters (the
        /// defaults changed by any NAME=VALUE, as a fresh load would) and succeed instead of
        /// refusing; the loaded programs and their HZ stay. Names another provider
        /// (tcp_mltcp.ko) registered are still refused. For boot units and init containers.
        #[arg(long)]
        exist_ok: bool,
        /// Parameters to set before registering, as NAME=VALUE (see `status` for the names).
        #[arg(value_name = "NAME=VALUE")]
        params: Vec<String>,
    },
    /// Unregisters both algorithms. Sockets already using one keep running its programs until
    /// they close; new sockets can no longer select it.
    Unload,
    /// Shows whether the algorithms are registered, their counters and the parameters.
    Status,
    /// Changes parameters of the loaded programs, as NAME=VALUE; applies from the next ACK on.
    Set {
        /// NAME=VALUE pairs.
        #[arg(value_name = "NAME=VALUE", required = true)]
        params: Vec<String>,
    },
}

/// Routes libbpf's messages (the verifier's log among them) to tracing.
fn libbpf_log(level: libbpf_rs::PrintLevel, msg: String) {
    let msg = msg.trim_end();
    match level {
        libbpf_rs::PrintLevel::Warn => warn!(target: "libbpf", "{msg}"),
        libbpf_rs::PrintLevel::Info => info!(target: "libbpf", "{msg}"),
        libbpf_rs::PrintLevel::Debug => debug!(target: "libbpf", "{msg}"),
    }
}

/// Parses every NAME=VALUE of `args` onto `p`; the first bad one is the error.
fn apply_assignments(p: &mut Params, args: &[String]) -> Result<()> {
    for a in args {
        let (name, value) = parse_assignment(a)?;
        if !p.set(name, value) {
            bail!("parameter {name} is not one of the BPF programs' parameters");
        }
    }
    Ok(())
}

fn load(hz: Option<u32>, exist_ok: bool, assignments: &[String]) -> Result<()> {
    let mut p = Params::DEFAULT;
    apply_assignments(&mut p, assignments)?;
    kernel::check_btf()?;
    let available = algorithms_available()?;
    let taken: Vec<&str> = ALGORITHMS
        .into_iter()
        .filter(|a| available.iter().any(|x| x == a))
        .collect();
    if !taken.is_empty() {
        // Only looked up when needed: enumerating the kernel's maps needs CAP_SYS_ADMIN.
        let maps = if exist_ok {
            find_maps()?
        } else {
            Default::default()
        };
        let ours: Vec<&str> = maps.struct_ops.iter().map(|(n, _)| n.as_str()).collect();
        match existing_registration(&taken, &ours, exist_ok)? {
            Existing::Adopt => {
                let m = maps.params.context(
                    "mltcp-bpf's algorithms are registered but no map named mltcp_params was found",
                )?;
                m.update(&0u32.to_ne_bytes(), &encode_params(&p), MapFlags::ANY)
                    .with_context(|| format!("writing {PARAMS_MAP}"))?;
                info!("mltcp and mltcp_cubic already registered by mltcp-bpf: parameters set, programs kept");
                return Ok(());
            }
            Existing::None => {}
        }
    }
    let kconfig = match hz {
        Some(0) => bail!("--hz 0 is not a valid HZ"),
        Some(hz) => Some(CString::new(format!("CONFIG_HZ={hz}\n")).context("HZ as kconfig")?),
        None => {
            kernel::check_kconfig_readable()?;
            None
        }
    };

    let builder = skel::MltcpSkelBuilder::default();
    let mut storage = MaybeUninit::uninit();
    let open = match &kconfig {
        Some(k) => {
            let opts = libbpf_rs::libbpf_sys::bpf_object_open_opts {
                sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_object_open_opts>() as _,
                kconfig: k.as_ptr(),
                ..Default::default()
            };
            builder.open_opts(opts, &mut storage)
        }
        None => builder.open(&mut storage),
    }
    .context("opening the BPF object")?;
    let mut skel = open.load().context(
        "loading the BPF programs (the verifier's log is above; RUST_LOG=libbpf=debug shows more)",
    )?;
    skel.maps
        .mltcp_params
        .update(&0u32.to_ne_bytes(), &encode_params(&p), MapFlags::ANY)
        .context("writing the parameters")?;
    for (name, map) in [
        ("mltcp", &mut skel.maps.mltcp),
        ("mltcp_cubic", &mut skel.maps.mltcp_cubic),
    ] {
        let mut link = map
            .attach_struct_ops()
            .with_context(|| format!("registering {name}"))?;
        // The registration must outlive this process: keep libbpf from undoing it on exit.
        link.disconnect();
        info!("registered {name}");
    }
    Ok(())
}

fn unload() -> Result<()> {
    let maps = find_maps()?;
    if maps.struct_ops.is_empty() {
        bail!("neither mltcp nor mltcp_cubic is registered by mltcp-bpf (nothing to unload)");
    }
    for (name, handle) in &maps.struct_ops {
        handle
            .delete(&0u32.to_ne_bytes())
            .with_context(|| format!("unregistering {name}"))?;
        info!("unregistered {name}");
    }
    Ok(())
}

fn status() -> Result<()> {
    let maps = find_maps()?;
    let available = algorithms_available()?;
    for name in ALGORITHMS {
        let registered = maps.struct_ops.iter().any(|(n, _)| n == name);
        let listed = available.iter().any(|a| a == name);
        let owner = match (registered, listed) {
            (true, _) => "registered by mltcp-bpf",
            (false, true) => "registered by another provider (tcp_mltcp.ko?)",
            (false, false) => "not registered",
        };
        println!("{name}: {owner}");
    }
    if let Some(stats) = &maps.stats {
        for (i, name) in ALGORITHMS.iter().enumerate() {
            let key = u32::try_from(i).unwrap_or(0).to_ne_bytes();
            let per_cpu = stats
                .lookup_percpu(&key, MapFlags::ANY)
                .with_context(|| format!("reading {STATS_MAP}"))?
                .unwrap_or_default();
            let s = decode_stats(&per_cpu)?;
            println!(
                "{name}: flows started {} released {} open {}, iterations {}, window reductions {}",
                s.flows_started,
                s.flows_released,
                s.flows_started.saturating_sub(s.flows_released),
                s.iterations,
                s.losses
            );
        }
    }
    match &maps.params {
        Some(m) => {
            let v = m
                .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
                .with_context(|| format!("reading {PARAMS_MAP}"))?
                .context("the parameter map has no entry 0")?;
            let p = kernel::decode_params(&v)?;
            for name in bpf_param_names() {
                println!("{name} = {}", p.get(name).unwrap_or(0));
            }
        }
        None => println!("parameters: not loaded"),
    }
    Ok(())
}

fn set(assignments: &[String]) -> Result<()> {
    let maps = find_maps()?;
    let m = maps.params.context(
        "mltcp-bpf is not loaded (no map named mltcp_params): run `mltcp-bpf load` first",
    )?;
    let key = 0u32.to_ne_bytes();
    let cur = m
        .lookup(&key, MapFlags::ANY)
        .with_context(|| format!("reading {PARAMS_MAP}"))?
        .context("the parameter map has no entry 0")?;
    let mut p = kernel::decode_params(&cur)?;
    apply_assignments(&mut p, assignments)?;
    m.update(&key, &encode_params(&p), MapFlags::ANY)
        .with_context(|| format!("writing {PARAMS_MAP}"))?;
    for a in assignments {
        info!("set {a}");
    }
    Ok(())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, libbpf_log)));
    let cli = Cli::parse();
    let r = match &cli.cmd {
        Cmd::Load {
            hz,
            exist_ok,
            params,
        } => load(*hz, *exist_ok, params),
        Cmd::Unload => unload(),
        Cmd::Status => status(),
        Cmd::Set { params } => set(params),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mltcp-bpf: {e:#}");
            ExitCode::FAILURE
        }
    }
}
