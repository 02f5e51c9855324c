// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `topo.toml`: the topology shared by agents and switch daemons (links, their ECN queues and
//! traffic classes, hosts, switch daemons, routes, the slot grid and the switches' PCN policy),
//! as written ([`RawTopology`]) and checked ([`Topology`]).

use mlcc_agent_core::fabric;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use super::{
    err, field_err, parse, ranged, read, ConfigError, FieldError, Horizon, NonZeroBytes, SlotMs,
    Word, DEFAULT_HORIZON, DEFAULT_SLOT_MS,
};

ranged!(
    /// A link's capacity, Mbit/s: 1..=10000000.
    CapacityMbps(u64, "u64"),
    1..=10_000_000,
    "must be 1..=10000000"
);
ranged!(
    /// `[pcn] timeout_ms` of topo.toml: 1..=600000.
    PcnTimeoutMs(u64, "u64"),
    1..=600_000,
    "must be 1..=600000"
);
ranged!(
    /// `[pcn] apply_timeout_ms` of topo.toml: 1..=60000.
    ApplyTimeoutMs(u64, "u64"),
    1..=60_000,
    "must be 1..=60000"
);
ranged!(
    /// RED's average packet size, bytes: 64..=65535.
    AvpktBytes(u32, "u32"),
    64..=65_535,
    "must be 64..=65535"
);

ranged!(
    /// Training classes of a switch port: 1..=8 (the length of `mlcc_sched::DEFAULT_DSCP`).
    TrainingClasses(u8, "u8"),
    1..=8,
    "must be 1..=8"
);
ranged!(
    /// A switch port's rate for its traffic classes, kbit/s (1 kbit = 1000 bit/s, tc's `kbit`):
    /// 1..=1000000000 (1 Tbit/s).
    PortRateKbit(u64, "u64"),
    1..=1_000_000_000,
    "must be 1..=1000000000"
);

/// One link of the topology.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    /// Link id, unique in the topology.
    pub id: u32,
    /// A name for logs.
    #[serde(default)]
    pub name: String,
    /// Capacity, Mbit/s.
    pub capacity_mbps: CapacityMbps,
    /// The link's ECN-marking queue, for PCN (switch links only).
    pub ecn: Option<EcnConfig>,
    /// The link's traffic classes, installed by its switch daemon at start-up (switch links
    /// only).
    pub classes: Option<ClassesConfig>,
}

/// `[link.classes]` as written.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RawClassesConfig {
    /// Network namespace of the device (none: the daemon's own).
    pub netns: Option<Word>,
    /// Egress device.
    pub dev: Word,
    /// Where the classes' HTB goes: the class of the port's rate limiter (e.g. `"10:1"` under a
    /// tbf `10:`), tc notation, or `"root"`.
    pub parent: Word,
    /// Training classes N: DSCPs `mlcc_sched::DEFAULT_DSCP[..N]`, class 0 highest.
    pub training: TrainingClasses,
    /// The port's rate, kbit/s.
    pub rate_kbit: PortRateKbit,
    /// Limit of each class queue (bfifo), bytes.
    pub queue_bytes: NonZeroBytes,
}

/// `[link.classes]` checked: the parent a tc handle whose major is none of the classes' own
/// ([`ecn_qdisc::classes::uses_major`]). What the switch daemon installs on the port: see
/// [`ecn_qdisc::classes`] (the testbed's recipe, docs/testbed.md).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(try_from = "RawClassesConfig")]
pub struct ClassesConfig {
    /// Network namespace of the device.
    pub netns: Option<String>,
    /// Egress device.
    pub dev: String,
    /// The HTB's parent, tc notation as written.
    pub parent: String,
    /// The parent, parsed.
    pub parent_handle: ecn_qdisc::TcHandle,
    /// Training classes, 1..=8.
    pub training: u8,
    /// The port's rate, kbit/s (1..=10⁹).
    pub rate_kbit: u64,
    /// Limit of each class queue, bytes (> 0).
    pub queue_bytes: u32,
}

impl TryFrom<RawClassesConfig> for ClassesConfig {
    type Error = FieldError;
    fn try_from(c: RawClassesConfig) -> Result<Self, FieldError> {
        let parent = c.parent.0;
        let handle = ecn_qdisc::parse_handle(&parent).ok_or_else(|| {
            field_err(
                "parent",
                format!("{parent:?}"),
                "not a tc handle (hexadecimal MAJ:MIN, e.g. \"10:1\", or \"root\")",
            )
        })?;
        if handle != ecn_qdisc::TcHandle::ROOT && ecn_qdisc::classes::uses_major(handle.major) {
            return Err(field_err(
                "parent",
                format!("{parent:?}"),
                "its qdisc's handle is one the classes use (30:, 31:, 40:, 51:..58:)",
            ));
        }
        Ok(ClassesConfig {
            netns: c.netns.map(|w| w.0),
            dev: c.dev.0,
            parent,
            parent_handle: handle,
            training: c.training.get(),
            rate_kbit: c.rate_kbit.get(),
            queue_bytes: c.queue_bytes.get(),
        })
    }
}

impl ClassesConfig {
    /// What to install: the first `training` DSCPs of the agent's map
    /// (`mlcc_sched::DEFAULT_DSCP`), class 0 first.
    pub fn spec(&self) -> ecn_qdisc::classes::ClassesSpec {
        ecn_qdisc::classes::ClassesSpec {
            parent: self.parent_handle,
            training_dscp: mlcc_sched::DEFAULT_DSCP[..usize::from(self.training)].to_vec(),
            rate_kbit: self.rate_kbit,
            queue_bytes: self.queue_bytes,
        }
    }

    /// The port in words: "dev D" or "dev D in netns N".
    pub fn port(&self) -> String {
        match &self.netns {
            Some(ns) => format!("dev {} in netns {ns}", self.dev),
            None => format!("dev {}", self.dev),
        }
    }
}

/// The qdisc kind of an ECN queue.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum QdiscKind {
    /// `fq_codel ... ce_threshold TIME`.
    FqCodel,
    /// `red ... ecn`.
    Red,
}

/// `[link.ecn]` as written.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RawEcnConfig {
    /// Network namespace of the device (none: the daemon's own).
    pub netns: Option<Word>,
    /// Egress device.
    pub dev: Word,
    /// Parent class of the qdisc (none: the root qdisc).
    pub parent: Option<Word>,
    /// Qdisc kind.
    pub qdisc: QdiscKind,
    /// Threshold without PCN starts, bytes.
    pub initial_threshold_bytes: Option<NonZeroBytes>,
    /// RED hard limit, bytes.
    pub red_limit_bytes: Option<u32>,
    /// RED average packet size, bytes.
    pub red_avpkt_bytes: Option<AvpktBytes>,
    /// RED max − min, bytes.
    pub red_span_bytes: Option<u32>,
}

/// `[link.ecn]` checked, defaults filled in: the RED fields only with `qdisc = "red"`, the
/// span above 0, the hard limit above the initial threshold plus the span.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(try_from = "RawEcnConfig")]
pub struct EcnConfig {
    /// Network namespace of the device.
    pub netns: Option<String>,
    /// Egress device.
    pub dev: String,
    /// Parent class (none: root).
    pub parent: Option<String>,
    /// Qdisc kind.
    pub qdisc: QdiscKind,
    /// Threshold without PCN starts, bytes (> 0; default [`DEFAULT_INITIAL_THRESHOLD_BYTES`]).
    pub initial_threshold_bytes: u32,
    /// RED hard limit, bytes (default 10 × the initial threshold).
    pub red_limit_bytes: u32,
    /// RED average packet size, bytes (default 1500).
    pub red_avpkt_bytes: u32,
    /// RED max − min, bytes (> 0; default the average packet size: step marking, as DCTCP).
    pub red_span_bytes: u32,
}

impl TryFrom<RawEcnConfig> for EcnConfig {
    type Error = FieldError;
    fn try_from(e: RawEcnConfig) -> Result<Self, FieldError> {
        if e.qdisc != QdiscKind::Red {
            for (name, v) in [
                ("red_limit_bytes", e.red_limit_bytes),
                ("red_avpkt_bytes", e.red_avpkt_bytes.map(AvpktBytes::get)),
                ("red_span_bytes", e.red_span_bytes),
            ] {
                if let Some(v) = v {
                    return Err(field_err(name, v, "only for qdisc = \"red\""));
                }
            }
        }
        let initial = e
            .initial_threshold_bytes
            .map_or(DEFAULT_INITIAL_THRESHOLD_BYTES, NonZeroBytes::get);
        let avpkt = e.red_avpkt_bytes.map_or(1500, AvpktBytes::get);
        let span = e.red_span_bytes.unwrap_or(avpkt);
        if span == 0 {
            return Err(field_err(
                "red_span_bytes",
                0,
                "must be > 0 (max above min)",
            ));
        }
        let limit = e
            .red_limit_bytes
            .unwrap_or_else(|| initial.saturating_mul(10));
        let floor = u64::from(initial) + u64::from(span);
        if u64::from(limit) <= floor {
            return Err(field_err(
                "red_limit_bytes",
                limit,
                format!("must exceed initial_threshold_bytes + red_span_bytes ({floor})"),
            ));
        }
        Ok(EcnConfig {
            netns: e.netns.map(|w| w.0),
            dev: e.dev.0,
            parent: e.parent.map(|w| w.0),
            qdisc: e.qdisc,
            initial_threshold_bytes: initial,
            red_limit_bytes: limit,
            red_avpkt_bytes: avpkt,
            red_span_bytes: span,
        })
    }
}

/// A checked ECN queue of a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EcnQueue {
    /// Network namespace of the device.
    pub netns: Option<String>,
    /// Egress device.
    pub dev: String,
    /// Parent class (none: root).
    pub parent: Option<String>,
    /// Qdisc kind.
    pub qdisc: QdiscKind,
    /// Threshold without PCN starts, bytes (> 0).
    pub initial_threshold_bytes: u32,
    /// The link's capacity, bit/s (RED's `bandwidth`; fq_codel's bytes → time conversion).
    pub capacity_bps: u64,
    /// RED hard limit, bytes (above the initial threshold plus the span).
    pub red_limit_bytes: u32,
    /// RED average packet size, bytes.
    pub red_avpkt_bytes: u32,
    /// RED max − min, bytes (> 0).
    pub red_span_bytes: u32,
}

impl EcnQueue {
    /// The queue `e` of a link of `capacity_bps`.
    fn new(e: &EcnConfig, capacity_bps: u64) -> Self {
        EcnQueue {
            netns: e.netns.clone(),
            dev: e.dev.clone(),
            parent: e.parent.clone(),
            qdisc: e.qdisc,
            initial_threshold_bytes: e.initial_threshold_bytes,
            capacity_bps,
            red_limit_bytes: e.red_limit_bytes,
            red_avpkt_bytes: e.red_avpkt_bytes,
            red_span_bytes: e.red_span_bytes,
        }
    }
}

/// Default initial ECN threshold, bytes: 40 packets of 1500 B ("Proactive Congestion Avoidance
/// for Distributed Deep Learning", Sec. 3.2: an initial threshold of 40 packets).
pub const DEFAULT_INITIAL_THRESHOLD_BYTES: u32 = 40 * 1500;
/// Default PCN threshold an agent asks for, bytes: 10 packets of 1500 B (same paper, Sec. 3.2's
/// example of a PCN threshold of 10 against the initial 40).
pub const DEFAULT_PCN_THRESHOLD_BYTES: u32 = 10 * 1500;

/// `[pcn]` of `topo.toml` as written.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct RawSwitchPcn {
    /// How concurrent starts combine.
    pub combine: Option<mlcc_sched::pcn::Combine>,
    /// Start timeout, ms.
    pub timeout_ms: Option<PcnTimeoutMs>,
    /// Threshold change timeout, ms.
    pub apply_timeout_ms: Option<ApplyTimeoutMs>,
}

/// Checked `[pcn]` of `topo.toml`: the switch daemons' PCN policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchPcn {
    /// How concurrent starts combine (default minimum).
    pub combine: mlcc_sched::pcn::Combine,
    /// A start whose burst is not seen within this many ms expires (default 500).
    pub timeout_ms: u64,
    /// A threshold change the kernel has not answered within this many ms fails (default 1000).
    pub apply_timeout_ms: u64,
}

impl Default for SwitchPcn {
    fn default() -> Self {
        SwitchPcn {
            combine: mlcc_sched::pcn::Combine::Min,
            timeout_ms: 500,
            apply_timeout_ms: 1000,
        }
    }
}

impl From<RawSwitchPcn> for SwitchPcn {
    fn from(raw: RawSwitchPcn) -> Self {
        let d = SwitchPcn::default();
        SwitchPcn {
            combine: raw.combine.unwrap_or(d.combine),
            timeout_ms: raw.timeout_ms.map_or(d.timeout_ms, PcnTimeoutMs::get),
            apply_timeout_ms: raw
                .apply_timeout_ms
                .map_or(d.apply_timeout_ms, ApplyTimeoutMs::get),
        }
    }
}

/// One host of the topology.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// Host name, unique.
    pub name: String,
    /// Its IPv4 addresses.
    pub addrs: Vec<String>,
    /// Link id of its NIC egress.
    pub nic: u32,
    /// Its agent's gRPC address (`ip:port`).
    pub agent: String,
}

/// One emulated switch daemon of the topology.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SwitchConfig {
    /// Switch name, unique.
    pub name: String,
    /// Its gRPC address (`ip:port`).
    pub listen: String,
    /// The links whose load table it owns.
    pub links: Vec<u32>,
}

/// The links of the flows from one host to another.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Source host name.
    pub from: String,
    /// Destination host name.
    pub to: String,
    /// Link ids in order; the first is `from`'s NIC.
    pub links: Vec<u32>,
}

/// `topo.toml` as written.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RawTopology {
    /// Slot length, ms.
    pub slot_ms: Option<SlotMs>,
    /// Horizon K.
    pub horizon: Option<Horizon>,
    /// Links.
    #[serde(default)]
    pub link: Vec<LinkConfig>,
    /// Hosts.
    #[serde(default)]
    pub host: Vec<HostConfig>,
    /// Switch daemons.
    #[serde(default)]
    pub switch: Vec<SwitchConfig>,
    /// Routes.
    #[serde(default)]
    pub route: Vec<RouteConfig>,
    /// PCN policy of the switch daemons.
    #[serde(default)]
    pub pcn: RawSwitchPcn,
}

/// A checked topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// The file it was read from.
    pub file: PathBuf,
    /// Slot length, ms (> 0).
    pub slot_ms: u64,
    /// Horizon K (1..=1024).
    pub horizon: usize,
    /// Link id → capacity, bit/s.
    pub links: HashMap<u32, u64>,
    /// Hosts, in file order.
    pub hosts: Vec<Host>,
    /// Switches, in file order.
    pub switches: Vec<Switch>,
    /// (from, to) host names → links.
    pub routes: HashMap<(String, String), Vec<u32>>,
    /// Link id → its ECN queue (links with `[link.ecn]`).
    pub ecn: HashMap<u32, EcnQueue>,
    /// Link id → its traffic classes (links with `[link.classes]`).
    pub classes: HashMap<u32, ClassesConfig>,
    /// PCN policy of the switch daemons.
    pub pcn: SwitchPcn,
}

/// A checked host and a checked switch: the agent core's plain data ([`mlcc_agent_core::fabric`]).
pub use mlcc_agent_core::fabric::{Host, Switch};

/// `v` as an `ip:port` address, else an error naming `field` of `file`.
pub(crate) fn sockaddr(file: &Path, field: String, v: &str) -> Result<SocketAddr, ConfigError> {
    v.parse()
        .map_err(|_| err(file, field, format!("{v:?}"), "not an ip:port address"))
}

impl Topology {
    /// Reads and checks `file`.
    pub fn load(file: &Path) -> Result<Topology, ConfigError> {
        let text = read(file)?;
        Self::parse_text(file, &text)
    }

    /// Checks the topology `text` (read from `file`, named in errors): the values and tables by
    /// their types, then what crosses tables (ids, names, NIC links, owners, routes).
    pub fn parse_text(file: &Path, text: &str) -> Result<Topology, ConfigError> {
        let raw: RawTopology = parse(file, text)?;
        let slot_ms = raw.slot_ms.map_or(DEFAULT_SLOT_MS, SlotMs::get);
        let horizon = raw.horizon.map_or(DEFAULT_HORIZON, Horizon::get);
        let mut links = HashMap::new();
        for (i, l) in raw.link.iter().enumerate() {
            if links
                .insert(l.id, l.capacity_mbps.get() * 1_000_000)
                .is_some()
            {
                return Err(err(
                    file,
                    format!("link[{i}].id"),
                    l.id,
                    "link id listed twice",
                ));
            }
        }
        let ecn: HashMap<u32, EcnQueue> = raw
            .link
            .iter()
            .filter_map(|l| {
                let e = l.ecn.as_ref()?;
                Some((l.id, EcnQueue::new(e, l.capacity_mbps.get() * 1_000_000)))
            })
            .collect();
        let known = |field: String, id: u32| -> Result<(), ConfigError> {
            if links.contains_key(&id) {
                Ok(())
            } else {
                Err(err(file, field, id, "no [[link]] has this id"))
            }
        };
        let mut hosts = Vec::new();
        let mut names = HashSet::new();
        let mut addrs = HashSet::new();
        for (i, h) in raw.host.iter().enumerate() {
            if h.name.is_empty() || !names.insert(h.name.clone()) {
                return Err(err(
                    file,
                    format!("host[{i}].name"),
                    format!("{:?}", h.name),
                    "empty or listed twice",
                ));
            }
            let mut v = Vec::new();
            for (j, a) in h.addrs.iter().enumerate() {
                let ip: Ipv4Addr = a.parse().map_err(|_| {
                    err(
                        file,
                        format!("host[{i}].addrs[{j}]"),
                        format!("{a:?}"),
                        "not an IPv4 address",
                    )
                })?;
                if !addrs.insert(ip) {
                    return Err(err(
                        file,
                        format!("host[{i}].addrs[{j}]"),
                        format!("{a:?}"),
                        "address of two hosts",
                    ));
                }
                v.push(ip);
            }
            if v.is_empty() {
                return Err(err(
                    file,
                    format!("host[{i}].addrs"),
                    "[]",
                    "a host needs at least one address",
                ));
            }
            known(format!("host[{i}].nic"), h.nic)?;
            hosts.push(Host {
                name: h.name.clone(),
                addrs: v,
                nic: h.nic,
                agent: sockaddr(file, format!("host[{i}].agent"), &h.agent)?,
            });
        }
        let nics: HashSet<u32> = hosts.iter().map(|h| h.nic).collect();
        for (i, l) in raw.link.iter().enumerate() {
            if l.ecn.is_some() && nics.contains(&l.id) {
                return Err(err(
                    file,
                    format!("link[{i}].ecn"),
                    l.id,
                    "a host's NIC link has no switch daemon to set its threshold",
                ));
            }
            let Some(c) = &l.classes else { continue };
            if nics.contains(&l.id) {
                return Err(err(
                    file,
                    format!("link[{i}].classes"),
                    l.id,
                    "a host's NIC link has no switch daemon to install its classes",
                ));
            }
            if let Some(e) = l.ecn.as_ref().filter(|e| {
                e.netns == c.netns && e.dev == c.dev && e.parent.as_deref() == Some(&c.parent)
            }) {
                return Err(err(
                    file,
                    format!("link[{i}].classes.parent"),
                    format!("{:?}", c.parent),
                    format!(
                        "the link's ECN qdisc ({:?}) is there: the classes' HTB cannot take its place",
                        e.qdisc
                    ),
                ));
            }
        }
        let classes: HashMap<u32, ClassesConfig> = raw
            .link
            .iter()
            .filter_map(|l| Some((l.id, l.classes.clone()?)))
            .collect();
        let mut switches = Vec::new();
        let mut owned = HashMap::new();
        for (i, s) in raw.switch.iter().enumerate() {
            if s.name.is_empty() || switches.iter().any(|o: &Switch| o.name == s.name) {
                return Err(err(
                    file,
                    format!("switch[{i}].name"),
                    format!("{:?}", s.name),
                    "empty or listed twice",
                ));
            }
            for (j, l) in s.links.iter().enumerate() {
                known(format!("switch[{i}].links[{j}]"), *l)?;
                if nics.contains(l) {
                    return Err(err(
                        file,
                        format!("switch[{i}].links[{j}]"),
                        l,
                        "a host's NIC link is kept by its agent, not a switch",
                    ));
                }
                if let Some(other) = owned.insert(*l, s.name.clone()) {
                    return Err(err(
                        file,
                        format!("switch[{i}].links[{j}]"),
                        l,
                        format!("already owned by switch {other:?}"),
                    ));
                }
            }
            switches.push(Switch {
                name: s.name.clone(),
                listen: sockaddr(file, format!("switch[{i}].listen"), &s.listen)?,
                links: s.links.clone(),
            });
        }
        let mut routes = HashMap::new();
        for (i, r) in raw.route.iter().enumerate() {
            let from = hosts.iter().find(|h| h.name == r.from);
            let Some(from) = from else {
                return Err(err(
                    file,
                    format!("route[{i}].from"),
                    format!("{:?}", r.from),
                    "no [[host]] has this name",
                ));
            };
            if !names.contains(&r.to) {
                return Err(err(
                    file,
                    format!("route[{i}].to"),
                    format!("{:?}", r.to),
                    "no [[host]] has this name",
                ));
            }
            let mut seen = HashSet::new();
            for (j, l) in r.links.iter().enumerate() {
                known(format!("route[{i}].links[{j}]"), *l)?;
                if !seen.insert(*l) {
                    return Err(err(
                        file,
                        format!("route[{i}].links[{j}]"),
                        l,
                        "link listed twice",
                    ));
                }
            }
            if r.links.first() != Some(&from.nic) {
                return Err(err(
                    file,
                    format!("route[{i}].links"),
                    format!("{:?}", r.links),
                    format!("must start with {:?}'s NIC link {}", from.name, from.nic),
                ));
            }
            if routes
                .insert((r.from.clone(), r.to.clone()), r.links.clone())
                .is_some()
            {
                return Err(err(
                    file,
                    format!("route[{i}]"),
                    format!("{} -> {}", r.from, r.to),
                    "route listed twice",
                ));
            }
        }
        Ok(Topology {
            file: file.to_path_buf(),
            slot_ms,
            horizon,
            links,
            hosts,
            switches,
            routes,
            ecn,
            classes,
            pcn: SwitchPcn::from(raw.pcn),
        })
    }

    /// The host that owns `ip` ([`mlcc_agent_core::fabric::host_of`]).
    pub fn host_of(&self, ip: Ipv4Addr) -> Option<&Host> {
        fabric::host_of(&self.hosts, ip)
    }

    /// The links of a flow from `from` to `to` (host names): the route, or `from`'s NIC
    /// ([`mlcc_agent_core::fabric::path`]).
    pub fn path(&self, from: &Host, to: Option<&Host>) -> Vec<u32> {
        fabric::path(&self.routes, from, to)
    }

    /// The ingress links of the hosts named in `served`
    /// ([`mlcc_agent_core::fabric::served_ingress`]).
    pub fn served_ingress(&self, served: &[String]) -> Vec<u32> {
        fabric::served_ingress(&self.routes, &self.hosts, served)
    }

    /// The switch that owns `link`, if any ([`mlcc_agent_core::fabric::switch_of`]).
    pub fn switch_of(&self, link: u32) -> Option<&Switch> {
        fabric::switch_of(&self.switches, link)
    }
}
