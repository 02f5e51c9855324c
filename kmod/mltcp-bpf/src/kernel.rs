// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! What `mltcp-bpf` asks the running kernel and how it talks to the loaded programs' maps: the
//! registered congestion controls, BTF and Kconfig availability, the maps found again by name
//! through their IDs, and the byte layout of the parameter and counter maps (the generated
//! header's `struct mltcp_params`, mltcp.bpf.c's `struct mltcp_stats`).

use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};
use libbpf_rs::query::MapInfoIter;
use libbpf_rs::{MapHandle, MapType};
use mltcp_math::c_header::{bpf_param_names, BpfStats};
use mltcp_math::params::{self, Params};

/// The algorithms mltcp.bpf.c registers, in the index order of its counter map
/// (`MLTCP_ALG_RENO`, `MLTCP_ALG_CUBIC`); also the names of their struct_ops maps.
pub const ALGORITHMS: [&str; 2] = ["mltcp", "mltcp_cubic"];

/// Name of the parameter map in mltcp.bpf.c.
pub const PARAMS_MAP: &str = "mltcp_params";

/// Name of the per-CPU counter map in mltcp.bpf.c.
pub const STATS_MAP: &str = "mltcp_stats";

/// Where the kernel lists its congestion controls.
const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";

/// The kernel's own BTF, which struct_ops and CO-RE need.
const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// The congestion controls the kernel has registered.
pub fn algorithms_available() -> Result<Vec<String>> {
    let s = fs::read_to_string(AVAILABLE).with_context(|| format!("reading {AVAILABLE}"))?;
    Ok(s.split_whitespace().map(str::to_owned).collect())
}

/// Fails with the cause when the kernel has no BTF (CONFIG_DEBUG_INFO_BTF off).
pub fn check_btf() -> Result<()> {
    if !Path::new(VMLINUX_BTF).exists() {
        bail!(
            "this kernel has no BTF ({VMLINUX_BTF} is missing): BPF struct_ops congestion controls need CONFIG_DEBUG_INFO_BTF=y; use tcp_mltcp.ko on such a kernel"
        );
    }
    Ok(())
}

/// Fails with the cause when libbpf could not read the kernel's Kconfig (for `CONFIG_HZ`).
pub fn check_kconfig_readable() -> Result<()> {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease")
        .context("reading /proc/sys/kernel/osrelease")?;
    let boot = format!("/boot/config-{}", release.trim());
    if Path::new(&boot).exists() || Path::new("/proc/config.gz").exists() {
        return Ok(());
    }
    bail!("cannot read the kernel's HZ: neither {boot} nor /proc/config.gz exists; pass --hz (CONFIG_HZ of this kernel, e.g. 250 for Debian's)")
}

/// What `load` does about congestion controls of [`ALGORITHMS`]' names already registered.
#[derive(Debug, PartialEq, Eq)]
pub enum Existing {
    /// None is registered: load.
    None,
    /// mltcp-bpf registered both and `--exist-ok` was given: keep them, set the parameters.
    Adopt,
}

/// Decides from the names already registered (`taken`) and those of them registered by
/// mltcp-bpf (`ours`: its struct_ops maps) whether `load` may go on; the error names the cause.
pub fn existing_registration(taken: &[&str], ours: &[&str], exist_ok: bool) -> Result<Existing> {
    if taken.is_empty() {
        return Ok(Existing::None);
    }
    let list = taken.join(" and ");
    if !exist_ok {
        bail!(
            "{list} already registered (by tcp_mltcp.ko, or by an earlier `mltcp-bpf load`: run `mltcp-bpf unload` or `rmmod tcp_mltcp` first, or pass --exist-ok to keep mltcp-bpf's)"
        );
    }
    let foreign: Vec<&str> = taken
        .iter()
        .copied()
        .filter(|t| !ours.contains(t))
        .collect();
    if !foreign.is_empty() {
        bail!(
            "{} already registered by another provider (tcp_mltcp.ko?), not by mltcp-bpf: `rmmod tcp_mltcp` first, or keep the module and do not load mltcp-bpf",
            foreign.join(" and ")
        );
    }
    if ALGORITHMS.iter().any(|a| !taken.contains(a)) {
        bail!(
            "only {list} registered by mltcp-bpf (a load that stopped half-way?): run `mltcp-bpf unload`, then load again"
        );
    }
    Ok(Existing::Adopt)
}

/// The maps of a loaded mltcp-bpf, found by name among the kernel's maps.
#[derive(Default)]
pub struct Found {
    /// The registered struct_ops maps, by algorithm name.
    pub struct_ops: Vec<(String, MapHandle)>,
    /// The parameter map.
    pub params: Option<MapHandle>,
    /// The counter map.
    pub stats: Option<MapHandle>,
}

/// Looks the maps up by type and name (IDs are enumerated, which needs CAP_SYS_ADMIN).
pub fn find_maps() -> Result<Found> {
    let mut found = Found::default();
    let mut seen_any = false;
    for info in MapInfoIter::default() {
        seen_any = true;
        let name = info.name.to_string_lossy().into_owned();
        let want = match info.ty {
            MapType::StructOps => ALGORITHMS.contains(&name.as_str()),
            MapType::Array => name == PARAMS_MAP && found.params.is_none(),
            MapType::PercpuArray => name == STATS_MAP && found.stats.is_none(),
            _ => false,
        };
        if !want {
            continue;
        }
        let handle = MapHandle::from_map_id(info.id)
            .with_context(|| format!("opening map {name} (id {})", info.id))?;
        match info.ty {
            MapType::StructOps => found.struct_ops.push((name, handle)),
            MapType::Array => found.params = Some(handle),
            _ => found.stats = Some(handle),
        }
    }
    if !seen_any && !is_root() {
        bail!("cannot list the kernel's BPF maps: run as root (CAP_SYS_ADMIN)");
    }
    if found.struct_ops.is_empty() {
        // Maps of an unloaded mltcp-bpf linger until the kernel frees them (an RCU grace
        // period after `unload`); they belong to nothing registered.
        found.params = None;
        found.stats = None;
    }
    Ok(found)
}

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Parses `NAME=VALUE` into a BPF parameter's name and a value within its range; the error
/// names the parameter, the value and the accepted range (or the valid names).
pub fn parse_assignment(a: &str) -> Result<(&'static str, u32)> {
    let Some((name, value)) = a.split_once('=') else {
        bail!("{a:?} is not NAME=VALUE");
    };
    let name = name.trim();
    let Some(spec) = params::spec(name).filter(|s| bpf_param_names().any(|n| n == s.name)) else {
        let valid: Vec<&str> = bpf_param_names().collect();
        bail!(
            "unknown parameter {name:?}; the BPF programs have: {}",
            valid.join(", ")
        );
    };
    let value: u32 = value
        .trim()
        .parse()
        .with_context(|| format!("{name} = {value:?} is not an unsigned 32-bit integer"))?;
    spec.check(value).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((spec.name, value))
}

/// `p` as the parameter map's value: one native-endian u32 per [`bpf_param_names`] entry.
pub fn encode_params(p: &Params) -> Vec<u8> {
    bpf_param_names()
        .flat_map(|n| p.get(n).unwrap_or(0).to_ne_bytes())
        .collect()
}

/// The parameter map's value read back as [`Params`] (the inverse of [`encode_params`]).
pub fn decode_params(v: &[u8]) -> Result<Params> {
    let n = bpf_param_names().count();
    if v.len() != 4 * n {
        bail!(
            "{PARAMS_MAP} holds {} bytes where this mltcp-bpf expects {} ({n} parameters): the loaded programs come from another build; unload and load again",
            v.len(),
            4 * n
        );
    }
    let mut p = Params::DEFAULT;
    for (name, chunk) in bpf_param_names().zip(v.chunks_exact(4)) {
        let mut b = [0u8; 4];
        b.copy_from_slice(chunk);
        p.set(name, u32::from_ne_bytes(b));
    }
    Ok(p)
}

/// Sums the per-CPU values of one counter-map entry ([`BpfStats`]: four native-endian u64s).
pub fn decode_stats(per_cpu: &[Vec<u8>]) -> Result<BpfStats> {
    let mut s = BpfStats::default();
    for v in per_cpu {
        if v.len() != std::mem::size_of::<BpfStats>() {
            bail!(
                "{STATS_MAP} values are {} bytes, expected {}: the loaded programs come from another build",
                v.len(),
                std::mem::size_of::<BpfStats>()
            );
        }
        let mut f = [0u64; 4];
        for (x, chunk) in f.iter_mut().zip(v.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *x = u64::from_ne_bytes(b);
        }
        s.add(&BpfStats::from_array(f));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_are_checked() {
        assert_eq!(
            parse_assignment("slope_fx=2048").unwrap(),
            ("slope_fx", 2048)
        );
        assert_eq!(
            parse_assignment(" idle_gap_us = 5000 ").unwrap(),
            ("idle_gap_us", 5000)
        );
        let e = parse_assignment("slope=1").unwrap_err().to_string();
        assert!(
            e.contains("unknown parameter \"slope\"") && e.contains("slope_fx"),
            "{e}"
        );
        // A module parameter the BPF programs do not have.
        let e = parse_assignment("ccp_heartbeat_ms=5")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown parameter"), "{e}");
        let e = parse_assignment("ewma_weight_fx=0")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "ewma_weight_fx = 0 is out of range [1, 1024]");
        let e = parse_assignment("scale_decrease=-1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not an unsigned 32-bit integer"), "{e}");
        assert!(parse_assignment("slope_fx").is_err());
    }

    #[test]
    fn existing_registrations() {
        let both = ["mltcp", "mltcp_cubic"];
        assert_eq!(
            existing_registration(&[], &[], false).unwrap(),
            Existing::None
        );
        assert_eq!(
            existing_registration(&[], &[], true).unwrap(),
            Existing::None
        );
        assert_eq!(
            existing_registration(&both, &both, true).unwrap(),
            Existing::Adopt
        );
        let e = existing_registration(&both, &both, false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mltcp and mltcp_cubic already registered") && e.contains("--exist-ok"),
            "{e}"
        );
        // tcp_mltcp.ko's names are never adopted.
        let e = existing_registration(&both, &[], true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("another provider"), "{e}");
        let e = existing_registration(&both, &["mltcp"], true)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("mltcp_cubic already registered by another provider"),
            "{e}"
        );
        let e = existing_registration(&["mltcp"], &["mltcp"], true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("only mltcp registered by mltcp-bpf"), "{e}");
    }

    #[test]
    fn params_round_trip_in_header_order() {
        let p = Params {
            slope_fx: 1,
            intercept_fx: 2,
            idle_gap_us: 3,
            ewma_weight_fx: 4,
            scale_slow_start: 5,
            scale_decrease: 6,
        };
        let v = encode_params(&p);
        assert_eq!(v.len(), 24);
        // The generated header's field order is PARAMS's: slope first, scale_decrease last.
        assert_eq!(&v[..4], &1u32.to_ne_bytes());
        assert_eq!(&v[20..], &6u32.to_ne_bytes());
        assert_eq!(decode_params(&v).unwrap(), p);
        assert!(decode_params(&v[..20]).is_err());
    }

    #[test]
    fn stats_sum_over_cpus() {
        let cpu = |a: u64, b: u64, c: u64, d: u64| {
            [a, b, c, d]
                .iter()
                .flat_map(|x| x.to_ne_bytes())
                .collect::<Vec<u8>>()
        };
        let s = decode_stats(&[cpu(1, 0, 2, 3), cpu(4, 5, 6, 7)]).unwrap();
        assert_eq!(s, BpfStats::from_array([5, 5, 8, 10]));
        assert!(decode_stats(&[vec![0; 8]]).is_err());
    }
}
