// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Builds a scenario's topology with iproute2 (`ip`, `tc`; in the VM /usr/sbin/ip and /usr/sbin/tc)
//! and sets its TCP sysctls. Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN for setns).
//!
//! Shape: a star. Host N (1-based, in `topology.hosts` order) is namespace `te-NAME` with `eth0`
//! = 10.77.N.1/24 and a default route via 10.77.N.254; the switch namespace `te-sw` holds the peer
//! `v-NAME` = 10.77.N.254/24 and forwards (net.ipv4.ip_forward = 1). A host's link: netem
//! (delay, loss) at the egress of both ends (host `eth0` and switch `v-NAME`), and the rate limit
//! (tbf, queue limit given as latency) at the switch's egress toward the host only, as a child of
//! that netem (the netem recipe: delay first, then the rate limiter). So a link's rate limits the
//! traffic arriving at its host, and the queue that builds is a forwarding switch port's, whose
//! drops TCP sees as losses (a qdisc on the sender's own egress would instead push back on the
//! socket without a loss).

use std::fs;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::config::{Host, Scenario};
use crate::emu::Net;

/// Namespace of the switch.
pub const SWITCH_NS: &str = "te-sw";

/// Namespace name of host `h`.
pub fn ns_name(h: &str) -> String {
    format!("te-{h}")
}

/// Address of the `idx`-th host (0-based).
pub fn host_addr(idx: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 77, (idx + 1) as u8, 1)
}

fn sh(args: &[&str]) -> Result<()> {
    let out = Command::new(args[0]).args(&args[1..]).output().with_context(|| format!("cannot run {}", args[0]))?;
    if !out.status.success() {
        bail!("`{}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Writes a sysctl in namespace `ns` (from a thread that entered it: /proc/sys/net follows the
/// opener's network namespace).
fn sysctl_in(ns: &str, key: &str, value: &str) -> Result<()> {
    let path = PathBuf::from(format!("/run/netns/{ns}"));
    let file = format!("/proc/sys/{}", key.replace('.', "/"));
    let (k, v) = (key.to_string(), value.to_string());
    std::thread::spawn(move || -> Result<()> {
        let f = fs::File::open(&path).with_context(|| format!("open {}", path.display()))?;
        nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).context("setns")?;
        fs::write(&file, format!("{v}\n")).with_context(|| format!("sysctl {k}={v} ({file})"))?;
        Ok(())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("sysctl thread panicked"))?
    .with_context(|| format!("in namespace {ns}"))
}

/// Deletes every namespace this module may have made (ignores those that do not exist).
pub fn teardown(s: &Scenario) {
    for h in &s.topology.hosts {
        let _ = Command::new("ip").args(["netns", "del", &ns_name(&h.name)]).output();
    }
    let _ = Command::new("ip").args(["netns", "del", SWITCH_NS]).output();
}

fn shape(ns: &str, dev: &str, h: &Host, with_rate: bool) -> Result<()> {
    let netem = h.delay_ms > 0.0 || h.loss_pct > 0.0;
    let mut tbf: Vec<String> = Vec::new();
    if let (Some(rate), true) = (h.rate_mbit, with_rate) {
        let burst = h.burst_bytes.unwrap_or(64_000);
        let queue = h.queue_ms.unwrap_or(100.0);
        tbf = vec![
            "tbf".into(),
            "rate".into(),
            format!("{}kbit", (rate * 1000.0).round() as u64),
            "burst".into(),
            burst.to_string(),
            "latency".into(),
            format!("{}us", (queue * 1000.0).round() as u64),
        ];
    }
    let base = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev];
    if netem {
        let mut a: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        a.extend(["root", "handle", "1:", "netem", "limit", "100000", "delay"].map(String::from));
        a.push(format!("{}us", (h.delay_ms * 1000.0).round() as u64));
        if h.loss_pct > 0.0 {
            a.push("loss".into());
            a.push(format!("{}%", h.loss_pct));
        }
        sh(&a.iter().map(String::as_str).collect::<Vec<_>>())?;
        if !tbf.is_empty() {
            let mut a: Vec<String> = base.iter().map(|s| s.to_string()).collect();
            a.extend(["parent", "1:1", "handle", "10:"].map(String::from));
            a.extend(tbf);
            sh(&a.iter().map(String::as_str).collect::<Vec<_>>())?;
        }
    } else if !tbf.is_empty() {
        let mut a: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        a.extend(["root", "handle", "1:"].map(String::from));
        a.extend(tbf);
        sh(&a.iter().map(String::as_str).collect::<Vec<_>>())?;
    }
    Ok(())
}

/// Builds the topology and applies the sysctls; returns where each host lives.
pub fn build(s: &Scenario) -> Result<Net> {
    teardown(s);
    sh(&["ip", "netns", "add", SWITCH_NS])?;
    sh(&["ip", "-n", SWITCH_NS, "link", "set", "lo", "up"])?;
    sysctl_in(SWITCH_NS, "net.ipv4.ip_forward", "1")?;
    let mut hosts = Vec::new();
    for (i, h) in s.topology.hosts.iter().enumerate() {
        let ns = ns_name(&h.name);
        let swdev = format!("v-{}", h.name);
        let a = host_addr(i);
        let gw = Ipv4Addr::new(10, 77, (i + 1) as u8, 254);
        sh(&["ip", "netns", "add", &ns])?;
        sh(&["ip", "link", "add", &swdev, "netns", SWITCH_NS, "type", "veth", "peer", "name", "eth0", "netns", &ns])?;
        sh(&["ip", "-n", &ns, "addr", "add", &format!("{a}/24"), "dev", "eth0"])?;
        sh(&["ip", "-n", SWITCH_NS, "addr", "add", &format!("{gw}/24"), "dev", &swdev])?;
        sh(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
        sh(&["ip", "-n", &ns, "link", "set", "eth0", "up"])?;
        sh(&["ip", "-n", SWITCH_NS, "link", "set", &swdev, "up"])?;
        sh(&["ip", "-n", &ns, "route", "add", "default", "via", &gw.to_string()])?;
        shape(&ns, "eth0", h, false)?;
        shape(SWITCH_NS, &swdev, h, true)?;
        for (k, v) in s.sysctl.pairs() {
            sysctl_in(&ns, &k, &v)?;
        }
        hosts.push((h.name.clone(), PathBuf::from(format!("/run/netns/{ns}")), a));
    }
    Ok(Net::Netns(hosts))
}

/// The congestion controls the running kernel offers.
pub fn available_ccs() -> Vec<String> {
    fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}
