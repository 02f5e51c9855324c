// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Configuration files: the topology shared by agents and switch daemons (`topo.toml`) and one
//! agent's own file (`agent.toml`). TOML, read with serde; unknown fields are refused
//! (`deny_unknown_fields`), and every refusal is a [`ConfigError`] naming the file, the field and
//! the value, so a bad config stops the program before it touches any socket.
//!
//! The fields, with their meaning and defaults, are in [`TOPOLOGY_HELP`] and [`AGENT_HELP`]
//! (also printed by `ccp-agent switch --help` and `ccp-agent run --help`).

/// `topo.toml`, every field (printed by `ccp-agent switch --help`).
pub const TOPOLOGY_HELP: &str = r#"# topo.toml
slot_ms = 60              # slot length, ms (default 60); agents and switches must agree
horizon = 10              # K planned slots (default 10)

[[link]]                  # every link a scheduled flow may cross (one direction)
id = 1
name = "h1-nic"           # optional, for logs
capacity_mbps = 100

[[host]]                  # a host (on a real cluster one per agent; in the VM testbed an
name = "h1"               #  emulated host, several per agent)
addrs = ["10.0.0.1"]      # its IPv4 addresses (flows are matched by their source address)
nic = 1                   # the link id of its NIC egress (kept by its agent)
agent = "127.0.0.1:50061" # its agent's gRPC address

[[switch]]                # an emulated switch daemon (`ccp-agent switch --name s1`)
name = "s1"
listen = "127.0.0.1:50070"
links = [10]              # the links whose load table it owns

[[route]]                 # the links a flow from `from` to `to` crosses, in order
from = "h1"               # (default without a route: the source host's NIC only)
to = "h2"
links = [1, 10]
"#;

/// `agent.toml`, every field (printed by `ccp-agent run --help`).
pub const AGENT_HELP: &str = r#"# agent.toml
topology = "topo.toml"    # relative paths are relative to this file's directory
hosts = ["h1"]            # the hosts of the topology this agent serves
listen = "127.0.0.1:50061"  # optional; default: the `agent` address of its first host
program = "../../datapath-programs/mlcc-slot.ccp"   # the datapath program file
progress_dir = "/dev/shm/mltcp-progress"  # optional; default $MLTCP_PROGRESS_DIR or that
unix_name = "ccp-agent"   # with --ipc unix: the agent binds /tmp/ccp/<unix_name>
nic_only = false          # true: no switch daemons, the agent keeps only its NIC links
slot_ms = 60              # optional; overrides the topology's; --slot-ms overrides both
horizon = 10              # optional; likewise --horizon
min_rate_kbps = 1000      # floor of an applied rate (a planned 0 would stall the flow)
cwnd_bytes = 16777216     # Cwnd set at install, so that Rate and not the window limits
rpc_timeout_ms = 20       # deadline of FetchFeedback, which the slot waits for (default slot/3);
                          # UpdateSchedule and Notify, which nobody waits for, get a slot
"#;

use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

/// A refused configuration: which file, which field, which value, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// The field, as a TOML path (`link[2].capacity_mbps`), or the position of a syntax error.
    pub field: String,
    /// The refused value as written (empty when the field is missing).
    pub value: String,
    /// Why it was refused.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: field `{}`", self.file.display(), self.field)?;
        if !self.value.is_empty() {
            write!(f, " = {}", self.value)?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ConfigError {}

fn err(
    file: &Path,
    field: impl Into<String>,
    value: impl fmt::Display,
    reason: impl Into<String>,
) -> ConfigError {
    ConfigError {
        file: file.to_path_buf(),
        field: field.into(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Default slot length, ms ("Dynamic Flow Scheduling for DNN Training Workloads in Data
/// Centers", Sec. VI: 60 ms).
pub const DEFAULT_SLOT_MS: u64 = 60;
/// Default horizon K (same paper, Sec. IV-A).
pub const DEFAULT_HORIZON: usize = 10;

/// One link of the topology.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    /// Link id, unique in the topology.
    pub id: u32,
    /// A name for logs.
    #[serde(default)]
    pub name: String,
    /// Capacity, Mbit/s (> 0).
    pub capacity_mbps: u64,
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
    pub slot_ms: Option<u64>,
    /// Horizon K.
    pub horizon: Option<usize>,
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
}

/// A checked host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Name.
    pub name: String,
    /// IPv4 addresses.
    pub addrs: Vec<Ipv4Addr>,
    /// NIC egress link.
    pub nic: u32,
    /// Agent address.
    pub agent: SocketAddr,
}

/// A checked switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    /// Name.
    pub name: String,
    /// gRPC address.
    pub listen: SocketAddr,
    /// Owned links.
    pub links: Vec<u32>,
}

fn read(file: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(file).map_err(|e| err(file, "(file)", "", format!("cannot read: {e}")))
}

/// Parses `text` as TOML into `T`, mapping a parse error to the field it names.
fn parse<T: serde::de::DeserializeOwned>(file: &Path, text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let (field, value) = match e.span() {
            Some(span) => {
                let before = text.get(..span.start).unwrap_or("");
                let line = before.matches('\n').count() + 1;
                let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                let snippet = text
                    .get(span.clone())
                    .unwrap_or("")
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim();
                (
                    format!("line {line}, column {col}"),
                    snippet.chars().take(60).collect::<String>(),
                )
            }
            None => (String::from("(document)"), String::new()),
        };
        err(file, field, value, e.message().trim().to_string())
    })
}

fn check_slots(file: &Path, slot_ms: u64, horizon: usize) -> Result<(), ConfigError> {
    if !(1..=60_000).contains(&slot_ms) {
        return Err(err(file, "slot_ms", slot_ms, "must be 1..=60000"));
    }
    if !(1..=1024).contains(&horizon) {
        return Err(err(file, "horizon", horizon, "must be 1..=1024"));
    }
    Ok(())
}

fn sockaddr(file: &Path, field: String, v: &str) -> Result<SocketAddr, ConfigError> {
    v.parse()
        .map_err(|_| err(file, field, format!("{v:?}"), "not an ip:port address"))
}

impl Topology {
    /// Reads and checks `file`.
    pub fn load(file: &Path) -> Result<Topology, ConfigError> {
        let text = read(file)?;
        Self::parse_text(file, &text)
    }

    /// Checks the topology `text` (read from `file`, named in errors).
    pub fn parse_text(file: &Path, text: &str) -> Result<Topology, ConfigError> {
        let raw: RawTopology = parse(file, text)?;
        let slot_ms = raw.slot_ms.unwrap_or(DEFAULT_SLOT_MS);
        let horizon = raw.horizon.unwrap_or(DEFAULT_HORIZON);
        check_slots(file, slot_ms, horizon)?;
        let mut links = HashMap::new();
        for (i, l) in raw.link.iter().enumerate() {
            if !(1..=10_000_000).contains(&l.capacity_mbps) {
                return Err(err(
                    file,
                    format!("link[{i}].capacity_mbps"),
                    l.capacity_mbps,
                    "must be 1..=10000000",
                ));
            }
            if links.insert(l.id, l.capacity_mbps * 1_000_000).is_some() {
                return Err(err(
                    file,
                    format!("link[{i}].id"),
                    l.id,
                    "link id listed twice",
                ));
            }
        }
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
        })
    }

    /// The host that owns `ip`.
    pub fn host_of(&self, ip: Ipv4Addr) -> Option<&Host> {
        self.hosts.iter().find(|h| h.addrs.contains(&ip))
    }

    /// The links of a flow from `from` to `to` (host names): the route, or `from`'s NIC.
    pub fn path(&self, from: &Host, to: Option<&Host>) -> Vec<u32> {
        to.and_then(|t| self.routes.get(&(from.name.clone(), t.name.clone())))
            .cloned()
            .unwrap_or_else(|| vec![from.nic])
    }

    /// The switch that owns `link`, if any.
    pub fn switch_of(&self, link: u32) -> Option<&Switch> {
        self.switches.iter().find(|s| s.links.contains(&link))
    }
}

/// `agent.toml` as written.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RawAgentConfig {
    /// Topology file.
    pub topology: PathBuf,
    /// Served hosts.
    pub hosts: Vec<String>,
    /// gRPC listen address.
    pub listen: Option<String>,
    /// Datapath program file.
    pub program: PathBuf,
    /// Progress region directory.
    pub progress_dir: Option<PathBuf>,
    /// Unix socket name.
    pub unix_name: Option<String>,
    /// NIC-only mode.
    #[serde(default)]
    pub nic_only: bool,
    /// Slot length, ms.
    pub slot_ms: Option<u64>,
    /// Horizon.
    pub horizon: Option<usize>,
    /// Rate floor, kbit/s.
    pub min_rate_kbps: Option<u64>,
    /// Cwnd at install, bytes.
    pub cwnd_bytes: Option<u32>,
    /// RPC deadline, ms.
    pub rpc_timeout_ms: Option<u64>,
}

/// A checked agent configuration with its topology.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The file it was read from.
    pub file: PathBuf,
    /// The topology.
    pub topology: Topology,
    /// Names of the served hosts.
    pub hosts: Vec<String>,
    /// gRPC listen address.
    pub listen: SocketAddr,
    /// The datapath program file.
    pub program_file: PathBuf,
    /// The program's text, comments removed.
    pub program: String,
    /// Progress region directory.
    pub progress_dir: PathBuf,
    /// Unix socket name (`--ipc unix`).
    pub unix_name: String,
    /// NIC-only mode.
    pub nic_only: bool,
    /// Slot length, ms.
    pub slot_ms: u64,
    /// Horizon K.
    pub horizon: usize,
    /// Rate floor, bit/s.
    pub min_rate_bps: u64,
    /// Cwnd at install, bytes.
    pub cwnd_bytes: u32,
    /// RPC deadline, ms.
    pub rpc_timeout_ms: u64,
}

/// Removes the comment lines (first non-blank character `#`) of a datapath program file: the
/// portus 0.9 parser accepts a comment only before an event.
pub fn strip_program_comments(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

fn relative(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.parent().unwrap_or(Path::new(".")).join(p)
    }
}

impl AgentConfig {
    /// Reads and checks `file` and the topology it names; `slot_ms` and `horizon` (command
    /// line) override the files'.
    pub fn load(
        file: &Path,
        slot_ms: Option<u64>,
        horizon: Option<usize>,
    ) -> Result<AgentConfig, ConfigError> {
        let text = read(file)?;
        Self::parse_text(file, &text, slot_ms, horizon)
    }

    /// [`AgentConfig::load`] on text already read.
    pub fn parse_text(
        file: &Path,
        text: &str,
        slot_ms: Option<u64>,
        horizon: Option<usize>,
    ) -> Result<AgentConfig, ConfigError> {
        let raw: RawAgentConfig = parse(file, text)?;
        let topo_file = relative(file, &raw.topology);
        let topology = Topology::load(&topo_file).map_err(|e| {
            if e.field == "(file)" {
                err(
                    file,
                    "topology",
                    format!("{:?}", raw.topology.display().to_string()),
                    e.reason,
                )
            } else {
                e
            }
        })?;
        if raw.hosts.is_empty() {
            return Err(err(
                file,
                "hosts",
                "[]",
                "an agent serves at least one host",
            ));
        }
        for (i, h) in raw.hosts.iter().enumerate() {
            if !topology.hosts.iter().any(|t| &t.name == h) {
                return Err(err(
                    file,
                    format!("hosts[{i}]"),
                    format!("{h:?}"),
                    format!("no [[host]] of {} has this name", topo_file.display()),
                ));
            }
        }
        let listen = match &raw.listen {
            Some(l) => sockaddr(file, String::from("listen"), l)?,
            None => topology
                .hosts
                .iter()
                .find(|t| t.name == raw.hosts[0])
                .map(|t| t.agent)
                .ok_or_else(|| err(file, "hosts[0]", &raw.hosts[0], "unknown host"))?,
        };
        let program_file = relative(file, &raw.program);
        let program_text = std::fs::read_to_string(&program_file).map_err(|e| {
            err(
                file,
                "program",
                format!("{:?}", raw.program.display().to_string()),
                format!("cannot read {}: {e}", program_file.display()),
            )
        })?;
        let program = strip_program_comments(&program_text);
        if let Err(e) = portus::lang::compile(program.as_bytes(), &[]) {
            return Err(err(
                file,
                "program",
                format!("{:?}", raw.program.display().to_string()),
                format!("does not compile: {e:?}"),
            ));
        }
        for f in crate::engine::REQUIRED_FIELDS {
            if !program.contains(f) {
                return Err(err(
                    file,
                    "program",
                    format!("{:?}", raw.program.display().to_string()),
                    format!("the program lacks {f}, which the agent reads or sets"),
                ));
            }
        }
        let unix_name = raw
            .unix_name
            .clone()
            .unwrap_or_else(|| String::from("ccp-agent"));
        if unix_name.is_empty() || unix_name.contains('/') {
            return Err(err(
                file,
                "unix_name",
                format!("{unix_name:?}"),
                "must be non-empty and without '/'",
            ));
        }
        let slot_ms = slot_ms.or(raw.slot_ms).unwrap_or(topology.slot_ms);
        let horizon = horizon.or(raw.horizon).unwrap_or(topology.horizon);
        check_slots(file, slot_ms, horizon)?;
        if slot_ms != topology.slot_ms || horizon != topology.horizon {
            tracing::warn!(
                slot_ms,
                horizon,
                topology_slot_ms = topology.slot_ms,
                topology_horizon = topology.horizon,
                "slot grid differs from the topology's: switches plan on the topology's"
            );
        }
        let min_rate_kbps = raw.min_rate_kbps.unwrap_or(1000);
        if min_rate_kbps == 0 {
            return Err(err(
                file,
                "min_rate_kbps",
                0,
                "must be > 0 (a zero rate stalls the flow)",
            ));
        }
        let cwnd_bytes = raw.cwnd_bytes.unwrap_or(16 << 20);
        if cwnd_bytes < 2 * 1448 {
            return Err(err(
                file,
                "cwnd_bytes",
                cwnd_bytes,
                "must be at least 2 segments (2896)",
            ));
        }
        let rpc_timeout_ms = raw.rpc_timeout_ms.unwrap_or((slot_ms / 3).max(1));
        if !(1..slot_ms.max(2)).contains(&rpc_timeout_ms) {
            return Err(err(
                file,
                "rpc_timeout_ms",
                rpc_timeout_ms,
                format!("must be 1..{slot_ms} (less than a slot)"),
            ));
        }
        Ok(AgentConfig {
            file: file.to_path_buf(),
            topology,
            hosts: raw.hosts,
            listen,
            program_file,
            program,
            progress_dir: raw
                .progress_dir
                .unwrap_or_else(|| mltcp_progress::region_dir(None)),
            unix_name,
            nic_only: raw.nic_only,
            slot_ms,
            horizon,
            min_rate_bps: min_rate_kbps.saturating_mul(1000),
            cwnd_bytes,
            rpc_timeout_ms,
        })
    }

    /// The served hosts.
    pub fn served(&self) -> impl Iterator<Item = &Host> {
        self.topology
            .hosts
            .iter()
            .filter(|h| self.hosts.contains(&h.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_samples_name_only_real_fields() {
        let t: RawTopology = toml::from_str(TOPOLOGY_HELP).unwrap();
        assert_eq!(
            (t.link.len(), t.host.len(), t.switch.len(), t.route.len()),
            (1, 1, 1, 1)
        );
        let a: RawAgentConfig = toml::from_str(AGENT_HELP).unwrap();
        assert_eq!(a.hosts, ["h1"]);
        assert_eq!(strip_program_comments("# c\n(def)\n  # d\n"), "(def)");
    }
}
