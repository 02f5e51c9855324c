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
//! socket without a loss). A host with `ecn` gets an ECN-marking child under that tbf (handle
//! [`ECN_HANDLE`], replacing the tbf's byte FIFO): RED in ECN mode as a step marker, or fq_codel
//! with `ce_threshold`; [`EcnPort`] describes it for the PCN switch daemon.

use std::fs;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use ecn_qdisc::classes::ClassesSpec;
use ecn_qdisc::{parse_handle, QdiscChanger};

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
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .with_context(|| format!("cannot run {}", args[0]))?;
    if !out.status.success() {
        bail!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
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
        let _ = Command::new("ip")
            .args(["netns", "del", &ns_name(&h.name)])
            .output();
    }
    let _ = Command::new("ip")
        .args(["netns", "del", SWITCH_NS])
        .output();
}

/// Handle of the ECN-marking child qdisc under a switch port's tbf.
pub const ECN_HANDLE: &str = "20:";
/// Mean packet size given to RED, bytes (one full-sized Ethernet frame).
pub const RED_AVPKT: u64 = 1500;

/// An ECN-marking qdisc of the topology: everything `tc qdisc change` needs to move its threshold
/// (what the PCN switch daemon does before a burst). Written to meta.json (`ecn_ports`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EcnPort {
    /// The host the port leads to.
    pub host: String,
    /// Network namespace of the switch (`te-sw`).
    pub netns: String,
    /// The port's device in it (`v-HOST`).
    pub dev: String,
    /// The qdisc's parent (the tbf's class: `10:1` under a netem root, else `1:1`).
    pub parent: String,
    /// The qdisc's handle ([`ECN_HANDLE`]).
    pub handle: String,
    /// "red" or "fq_codel".
    pub qdisc: String,
    /// The port's rate (its tbf), kbit/s.
    pub rate_kbit: u64,
    /// RED: `limit`, bytes (the port's queue: rate × queue_ms + tbf burst); fq_codel: the packet
    /// limit × 1500.
    pub limit_bytes: u64,
    /// RED: marking threshold (`min`), bytes; `max` = min + [`RED_AVPKT`], `burst` =
    /// ⌈min / avpkt⌉ (the averaging weight stays near 1/2: step marking).
    pub threshold_bytes: Option<u64>,
    /// fq_codel: `ce_threshold`, µs.
    pub ce_threshold_us: Option<u64>,
    /// The qdisc's arguments after its kind, as added (`tc qdisc add dev DEV parent P handle H
    /// KIND ARGS...`); `tc qdisc change` takes the same with the threshold replaced.
    pub args: Vec<String>,
}

impl EcnPort {
    /// The qdisc's arguments for marking threshold `threshold` (RED: bytes; fq_codel: µs), the
    /// other parameters as built.
    pub fn args_for(&self, threshold: u64) -> Vec<String> {
        let s = |x: &str| x.to_string();
        match self.qdisc.as_str() {
            "red" => vec![
                s("limit"),
                self.limit_bytes.to_string(),
                s("min"),
                threshold.to_string(),
                s("max"),
                (threshold + RED_AVPKT).to_string(),
                s("avpkt"),
                RED_AVPKT.to_string(),
                s("burst"),
                threshold.div_ceil(RED_AVPKT).max(1).to_string(),
                s("probability"),
                s("1.0"),
                s("ecn"),
                s("bandwidth"),
                format!("{}kbit", self.rate_kbit),
            ],
            _ => vec![
                s("limit"),
                (self.limit_bytes / RED_AVPKT).to_string(),
                s("ce_threshold"),
                format!("{threshold}us"),
                s("ecn"),
            ],
        }
    }

    /// `ip netns exec NS tc qdisc VERB dev DEV parent P handle H KIND ARGS` with `args`
    /// (VERB: "add" or "change").
    pub fn command(&self, verb: &str, args: &[String]) -> Vec<String> {
        let mut a: Vec<String> = [
            "ip",
            "netns",
            "exec",
            &self.netns,
            "tc",
            "qdisc",
            verb,
            "dev",
            &self.dev,
            "parent",
            &self.parent,
            "handle",
            &self.handle,
            &self.qdisc,
        ]
        .map(String::from)
        .to_vec();
        a.extend(args.iter().cloned());
        a
    }
}

/// The tc command lines that shape the egress of `dev` in `ns` for host `h` (`with_rate`: the
/// switch port, which also gets the tbf and the ECN qdisc), in order, the ECN qdisc built, and
/// the traffic classes to install under the tbf after the lines ([`crate::config::PortClasses`]:
/// the recipe is `ecn_qdisc::classes`', the one `ccp-agent switch` installs, with the agent's
/// DSCP map `mlcc_sched::DEFAULT_DSCP`).
pub fn shape_cmds(
    ns: &str,
    dev: &str,
    h: &Host,
    with_rate: bool,
) -> (Vec<Vec<String>>, Option<EcnPort>, Option<ClassesSpec>) {
    let netem = h.delay_ms > 0.0 || h.loss_pct > 0.0;
    let base: Vec<String> = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev]
        .map(String::from)
        .to_vec();
    let mut cmds = Vec::new();
    if netem {
        let mut a = base.clone();
        a.extend(["root", "handle", "1:", "netem", "limit", "100000", "delay"].map(String::from));
        a.push(format!("{}us", (h.delay_ms * 1000.0).round() as u64));
        if h.loss_pct > 0.0 {
            a.push("loss".into());
            a.push(format!("{}%", h.loss_pct));
        }
        cmds.push(a);
    }
    let (Some(rate), true) = (h.rate_mbit, with_rate) else {
        return (cmds, None, None);
    };
    let burst = h.burst_bytes.unwrap_or(64_000);
    let queue = h.queue_ms.unwrap_or(100.0);
    let rate_kbit = (rate * 1000.0).round() as u64;
    let mut a = base.clone();
    // Under a netem root the tbf is 10: (class 10:1); alone it is the root 1: (class 1:1).
    let tbf_class = if netem {
        a.extend(["parent", "1:1", "handle", "10:"].map(String::from));
        "10:1"
    } else {
        a.extend(["root", "handle", "1:"].map(String::from));
        "1:1"
    };
    a.extend(["tbf", "rate"].map(String::from));
    a.push(format!("{rate_kbit}kbit"));
    a.extend([
        "burst".into(),
        burst.to_string(),
        "latency".into(),
        format!("{}us", (queue * 1000.0).round() as u64),
    ]);
    cmds.push(a);
    // A child replaces the tbf's byte FIFO, so it gets that FIFO's limit.
    let queue_bytes = (rate * 1e6 / 8.0 * queue / 1000.0).round() as u64 + burst;
    if let Some(c) = &h.classes {
        let spec = ClassesSpec {
            parent: parse_handle(tbf_class).expect("a tbf class handle"),
            training_dscp: mlcc_sched::DEFAULT_DSCP[..usize::from(c.training)].to_vec(),
            rate_kbit,
            queue_bytes: u32::try_from(queue_bytes).unwrap_or(u32::MAX),
        };
        return (cmds, None, Some(spec));
    }
    let Some(e) = &h.ecn else {
        return (cmds, None, None);
    };
    let threshold_bytes = e.threshold_kb.map(|k| (k * 1000.0).round() as u64);
    let port = EcnPort {
        host: h.name.clone(),
        netns: ns.to_string(),
        dev: dev.to_string(),
        parent: tbf_class.to_string(),
        handle: ECN_HANDLE.to_string(),
        qdisc: e.qdisc.clone(),
        rate_kbit,
        limit_bytes: queue_bytes.max(threshold_bytes.unwrap_or(0) + 4 * RED_AVPKT),
        threshold_bytes,
        ce_threshold_us: e.ce_threshold_us.map(|u| u.round() as u64),
        args: Vec::new(),
    };
    let args = port.args_for(threshold_bytes.or(port.ce_threshold_us).unwrap_or(0));
    let port = EcnPort { args, ..port };
    cmds.push(port.command("add", &port.args));
    (cmds, Some(port), None)
}

/// A switch port of `rate_mbit` Mbit/s with a queue of `queue_ms` (default 100) and optionally
/// `classes` training classes, as a scenario host's (`trainemu port`). Errors: a rate that is
/// not positive and finite, classes outside 1..=8 (naming the value).
pub fn port_host(rate_mbit: f64, queue_ms: Option<f64>, classes: Option<u8>) -> Result<Host> {
    if !(rate_mbit.is_finite() && rate_mbit > 0.0) {
        bail!("--rate-mbit {rate_mbit}: must be a positive number of Mbit/s");
    }
    let max = mlcc_sched::MAX_CLASSES;
    if let Some(n) = classes.filter(|n| !(1..=max).contains(n)) {
        bail!("--classes {n}: must be 1..={max} traffic classes");
    }
    Ok(Host {
        name: "port".into(),
        rate_mbit: Some(rate_mbit),
        delay_ms: 0.0,
        loss_pct: 0.0,
        burst_bytes: None,
        queue_ms,
        ecn: None,
        classes: classes.map(|training| crate::config::PortClasses { training }),
    })
}

/// Shapes `dev` in `ns` (see [`shape_cmds`]): runs the tc lines, then installs the traffic
/// classes over rtnetlink (`ecn_qdisc`, as `ccp-agent switch` does); returns the ECN qdisc
/// built, if any.
pub fn shape(ns: &str, dev: &str, h: &Host, with_rate: bool) -> Result<Option<EcnPort>> {
    let (cmds, port, classes) = shape_cmds(ns, dev, h, with_rate);
    for c in &cmds {
        sh(&c.iter().map(String::as_str).collect::<Vec<_>>())?;
    }
    if let Some(spec) = classes {
        QdiscChanger::new(std::time::Duration::from_secs(1))
            .install_classes(&Some(ns.to_string()), dev, &spec)
            .with_context(|| format!("traffic classes of host {}", h.name))?;
    }
    Ok(port)
}

/// The ECN-marking qdiscs scenario `s`'s topology has (what [`build`] adds), without building.
pub fn ecn_ports(s: &Scenario) -> Vec<EcnPort> {
    s.topology
        .hosts
        .iter()
        .filter_map(|h| shape_cmds(SWITCH_NS, &format!("v-{}", h.name), h, true).1)
        .collect()
}

/// A host's `gso_max_size` when its scenario has `gso = false`: one Ethernet frame of the veth's
/// 1500-byte MTU (1500 + 14 bytes of header), so TCP builds no skb larger than one packet.
const MTU_FRAME_BYTES: &str = "1514";

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
        sh(&[
            "ip", "link", "add", &swdev, "netns", SWITCH_NS, "type", "veth", "peer", "name",
            "eth0", "netns", &ns,
        ])?;
        sh(&[
            "ip",
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{a}/24"),
            "dev",
            "eth0",
        ])?;
        sh(&[
            "ip",
            "-n",
            SWITCH_NS,
            "addr",
            "add",
            &format!("{gw}/24"),
            "dev",
            &swdev,
        ])?;
        sh(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
        sh(&["ip", "-n", &ns, "link", "set", "eth0", "up"])?;
        if !s.topology.gso {
            // One-MTU skbs from the host's TCP: what a switch port sees on a real link.
            sh(&[
                "ip",
                "-n",
                &ns,
                "link",
                "set",
                "eth0",
                "gso_max_size",
                MTU_FRAME_BYTES,
            ])?;
        }
        sh(&["ip", "-n", SWITCH_NS, "link", "set", &swdev, "up"])?;
        sh(&[
            "ip",
            "-n",
            &ns,
            "route",
            "add",
            "default",
            "via",
            &gw.to_string(),
        ])?;
        shape(&ns, "eth0", h, false)?;
        if let Some(p) = shape(SWITCH_NS, &swdev, h, true)? {
            tracing::info!(
                "port {} of {}: ECN qdisc {} {}",
                p.dev,
                p.netns,
                p.qdisc,
                p.args.join(" ")
            );
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EcnMark;
    use ecn_qdisc::TcHandle;

    fn host(delay_ms: f64, ecn: Option<EcnMark>) -> Host {
        Host {
            name: "h2".into(),
            rate_mbit: Some(100.0),
            delay_ms,
            loss_pct: 0.0,
            burst_bytes: None,
            queue_ms: Some(5.0),
            ecn,
            classes: None,
        }
    }

    #[test]
    fn classes_under_the_tbf_strict_among_training_weighted_against_the_rest() {
        let mut h = host(0.0, None);
        h.classes = Some(crate::config::PortClasses { training: 2 });
        let (cmds, port, classes) = shape_cmds(SWITCH_NS, "v-h2", &h, true);
        assert_eq!(port, None);
        let got: Vec<String> = cmds.iter().map(|c| line(c)).collect();
        assert_eq!(
            got,
            vec!["ip netns exec te-sw tc qdisc add dev v-h2 root handle 1: tbf rate 100000kbit burst 64000 latency 5000us"]
        );
        // Under the tbf's class: AF41 (34) and AF31 (26), the port's rate, and per queue 100
        // Mbit/s × 5 ms = 62500 + the 64000-byte tbf burst.
        assert_eq!(
            classes,
            Some(ClassesSpec {
                parent: TcHandle { major: 1, minor: 1 },
                training_dscp: vec![34, 26],
                rate_kbit: 100_000,
                queue_bytes: 126_500,
            })
        );
        // Eight classes: the agent's whole map, CS1 (8) last; under a netem root, the tbf's
        // class is 10:1.
        let (_, _, classes) = shape_cmds(SWITCH_NS, "v-h2", &host(0.1, None), true);
        assert_eq!(classes, None, "no classes, no spec");
        let mut h = host(0.1, None);
        h.classes = Some(crate::config::PortClasses { training: 8 });
        let spec = shape_cmds(SWITCH_NS, "v-h2", &h, true).2.unwrap();
        assert_eq!(
            spec.parent,
            TcHandle {
                major: 0x10,
                minor: 1
            }
        );
        assert_eq!(spec.training_dscp, mlcc_sched::DEFAULT_DSCP.to_vec());
        assert_eq!(spec.bands(), 8);
        spec.check().expect("the kernel's limits");
    }

    #[test]
    fn port_host_is_a_scenario_port_and_refuses_bad_values() {
        let h = port_host(100.0, Some(5.0), Some(3)).unwrap();
        let (cmds, _, classes) = shape_cmds("snd", "veth-s", &h, true);
        assert_eq!(cmds.len(), 1, "the tbf");
        assert_eq!(classes.unwrap().training_dscp, vec![34, 26, 18]);
        let (_, _, classes) = shape_cmds(
            "snd",
            "veth-s",
            &port_host(100.0, None, None).unwrap(),
            true,
        );
        assert_eq!(classes, None);
        for (rate, classes, why) in [
            (0.0, None, "--rate-mbit 0"),
            (f64::NAN, None, "--rate-mbit NaN"),
            (100.0, Some(0), "--classes 0"),
            (100.0, Some(9), "--classes 9"),
        ] {
            let e = port_host(rate, None, classes).unwrap_err();
            assert!(e.to_string().contains(why), "{e}");
        }
    }

    fn line(c: &[String]) -> String {
        c.join(" ")
    }

    #[test]
    fn red_step_marker_under_the_tbf_below_netem() {
        let red = EcnMark {
            qdisc: "red".into(),
            threshold_kb: Some(30.0),
            ce_threshold_us: None,
        };
        let (cmds, port, _) = shape_cmds(SWITCH_NS, "v-h2", &host(0.1, Some(red)), true);
        let cmds: Vec<String> = cmds.iter().map(|c| line(c)).collect();
        assert_eq!(
            cmds,
            [
                "ip netns exec te-sw tc qdisc add dev v-h2 root handle 1: netem limit 100000 delay 100us",
                "ip netns exec te-sw tc qdisc add dev v-h2 parent 1:1 handle 10: tbf rate 100000kbit burst 64000 latency 5000us",
                // limit: 100 Mbit/s × 5 ms = 62500 + the 64000-byte tbf burst; max one packet above
                // min; burst ⌈30000 / 1500⌉.
                "ip netns exec te-sw tc qdisc add dev v-h2 parent 10:1 handle 20: red limit 126500 min 30000 max 31500 avpkt 1500 burst 20 probability 1.0 ecn bandwidth 100000kbit",
            ]
        );
        let p = port.unwrap();
        assert_eq!(
            (
                p.netns.as_str(),
                p.dev.as_str(),
                p.parent.as_str(),
                p.handle.as_str()
            ),
            ("te-sw", "v-h2", "10:1", "20:")
        );
        assert_eq!(
            (p.threshold_bytes, p.ce_threshold_us, p.rate_kbit),
            (Some(30_000), None, 100_000)
        );
        // What the PCN switch daemon runs to lower the threshold to 12 kB.
        assert_eq!(
            line(&p.command("change", &p.args_for(12_000))),
            "ip netns exec te-sw tc qdisc change dev v-h2 parent 10:1 handle 20: red limit 126500 min 12000 max 13500 avpkt 1500 burst 8 probability 1.0 ecn bandwidth 100000kbit"
        );
    }

    #[test]
    fn fq_codel_ce_threshold_under_a_root_tbf() {
        let fq = EcnMark {
            qdisc: "fq_codel".into(),
            threshold_kb: None,
            ce_threshold_us: Some(500.0),
        };
        let (cmds, port, _) = shape_cmds(SWITCH_NS, "v-h2", &host(0.0, Some(fq)), true);
        assert_eq!(cmds.len(), 2);
        assert_eq!(line(&cmds[0]), "ip netns exec te-sw tc qdisc add dev v-h2 root handle 1: tbf rate 100000kbit burst 64000 latency 5000us");
        assert_eq!(line(&cmds[1]), "ip netns exec te-sw tc qdisc add dev v-h2 parent 1:1 handle 20: fq_codel limit 84 ce_threshold 500us ecn");
        let p = port.unwrap();
        assert_eq!(
            (p.parent.as_str(), p.ce_threshold_us, p.threshold_bytes),
            ("1:1", Some(500), None)
        );
    }

    #[test]
    fn no_ecn_qdisc_without_ecn_or_on_the_host_side() {
        let red = EcnMark {
            qdisc: "red".into(),
            threshold_kb: Some(30.0),
            ce_threshold_us: None,
        };
        let (cmds, port, _) = shape_cmds(SWITCH_NS, "v-h2", &host(0.1, None), true);
        assert_eq!((cmds.len(), port), (2, None));
        // The host's own eth0 gets netem only, whatever the switch port has.
        let (cmds, port, _) = shape_cmds("te-h2", "eth0", &host(0.1, Some(red)), false);
        assert_eq!((cmds.len(), port), (1, None));
        assert!(line(&cmds[0]).contains("netem"));
    }
}
