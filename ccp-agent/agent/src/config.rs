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

[pcn]                     # optional: PCN on the switches' ECN links ("Proactive Congestion
                          #  Avoidance for Distributed Deep Learning", Sec. 3.2)
combine = "min"           # concurrent starts on a link: "min" (least threshold, default) or
                          #  "harmonic" (1/T = 1/T1 + 1/T2 + ..., at least 1 byte)
timeout_ms = 500          # a start whose burst is not seen within this many ms expires and the
                          #  initial threshold comes back (default 500; arrival is noticed at
                          #  the flow's next UpdateSchedule, so keep it above 2 slots)
apply_timeout_ms = 1000   # a threshold change (rtnetlink) the kernel has not answered within
                          #  this many ms counts as failed (default 1000)

[[link]]                  # every link a scheduled flow may cross (one direction)
id = 1
name = "h1-nic"           # optional, for logs
capacity_mbps = 100

[[link]]
id = 10
name = "s1-to-h2"
capacity_mbps = 40
[link.ecn]                # optional, switch links only: the link's ECN-marking egress queue,
                          #  whose threshold the switch daemon sets over rtnetlink
netns = "sw"              # optional: the qdisc's network namespace (a name under /run/netns
                          #  or a path such as /proc/PID/ns/net)
dev = "sw-eth1"           # the egress device
parent = "1:1"            # optional: the qdisc's parent class (default: the root qdisc)
qdisc = "fq_codel"        # "fq_codel" (ce_threshold = the threshold's time at capacity_mbps)
                          #  or "red" (min = threshold, max = min + red_span_bytes, ecn,
                          #  probability 1.0, bandwidth = capacity_mbps)
initial_threshold_bytes = 60000  # without PCN starts (default 60000: the paper's 40 packets)
# red only:
# red_limit_bytes = 600000  # hard queue limit (default 10 x initial_threshold_bytes)
# red_avpkt_bytes = 1500    # average packet size (default 1500)
# red_span_bytes = 1500     # max - min (default red_avpkt_bytes: step marking, as DCTCP)

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

/// The default floor of every rate the agent applies (`min_rate_kbps`), kbit/s.
///
/// A flow held at the floor takes a raised rate only at its next ACK, and its next segment
/// leaves at the old rate's spacing (Linux paces by departure time, `tcp_update_skb_after_send()`
/// in net/ipv4/tcp_output.c), so a hand-over from the served flow to a held one costs about a
/// segment's time at the floor: 23 ms for two 1448-byte segments at 1 Mbit/s (seen in the VM's
/// per-flow timelines: 30-40 ms of an idle port after a burst's end), 4.6 ms at 5 Mbit/s.
/// Chosen by measurement (ci/scenarios/agent.toml, guest time, one vCPU, 20 iterations,
/// `mltcp+agent+rules=priority` with `+floor=KBPS`, 2026-11-27): against 1000 in the same
/// invocation, 5000 made the mean iteration 4.2, 3.8 and 7.5 % shorter (seeds 1-3) and, in a
/// second invocation, 6.4, 5.2 and 0.6 %; over 12 seeds the agent at 5000 was 2.0 % [0.6, 3.5]
/// faster than cubic (README, "The hand-over and the rate floor"); 10000 gave 1.286 [1.139, 1.433] x ideal where
/// 5000 gave 1.257 [1.206, 1.308] (seeds 4-6). The held flows' floors are not reserved: on a
/// port where n flows are held, the port is booked n x the floor beyond its capacity.
pub const DEFAULT_MIN_RATE_KBPS: u64 = 5000;

/// `agent.toml`, every field (printed by `ccp-agent run --help`).
pub const AGENT_HELP: &str = r#"# agent.toml
topology = "topo.toml"    # relative paths are relative to this file's directory
hosts = ["h1"]            # the hosts of the topology this agent serves
listen = "127.0.0.1:50061"  # optional; default: the `agent` address of its first host
program = "../../datapath-programs/mlcc-slot.ccp"   # the datapath program file
progress_dir = "/dev/shm/mltcp-progress"  # optional; default $MLTCP_PROGRESS_DIR or that
unix_name = "ccp-agent"   # with --ipc unix: the agent binds /tmp/ccp/<unix_name>
nic_only = false          # true: no switch daemons, the agent keeps only its NIC links and
                          #  its hosts' ingress links (the last link of each route into them)
schedule = true           # false: PCN only (the PCN paper's system): no flow gets a datapath
                          #  program, every flow keeps its own congestion control (e.g. dctcp),
                          #  and the agent only serves before_burst ([pcn] below)
slot_ms = 60              # optional; overrides the topology's; --slot-ms overrides both
horizon = 10              # optional; likewise --horizon
min_rate_kbps = 5000      # floor of an applied rate (a planned 0 would stall the flow; see
                          #  DEFAULT_MIN_RATE_KBPS for the measurement that chose 5000)
cwnd_bytes = 16777216     # Cwnd and its ceiling at install (the program backs off on loss below it)
rpc_timeout_ms = 20       # how long a slot waits for the switches (default slot/3): FetchFeedback,
                          # then UpdateSchedule (admission) in what is left, at least a quarter
                          # of it; Notify and later updates, which nobody waits for, get a slot
metrics_addr = "127.0.0.1:9470"  # optional: serve Prometheus metrics (GET /metrics) here;
                          # --metrics-addr overrides it (default: no metrics endpoint)

[sched]                   # optional: the scheduling rules (mlcc_sched::policy::decide)
rules = "mlcc"            # "mlcc" (default): the mlcc paper's Alg. 1 + 2 over coflow groups,
                          #  ordered by progress then smallest bottleneck first; "interleave":
                          #  the same planning with a job-level priority (jobs ranked by name,
                          #  the order every agent agrees on without talking), so that one job's
                          #  phase goes first and the others fill its gaps; "priority": that
                          #  order as a work-conserving strict priority, each flow paced at
                          #  least at what higher-ranked jobs leave of the slot (sim RESULTS.md
                          #  round 11)
job_order = "earliest_deadline"  # "interleave"/"priority": the job ranks, "earliest_deadline"
                          #  (default: a burst's deadline is its start plus its time alone, the
                          #  job's bytes over its links' capacities), "first_come" (the job whose
                          #  communication phase began first goes first) or "least_attained"
                          #  (the job with the fewest iterations first)
work_conserving = true    # (default true) a plan is a claim, not a limit: active flows share
                          #  what the slot's plans leave of their links, idle flows claim
                          #  nothing, and (NIC-only) a burst's start or end re-plans the slot
                          #  at once; false: the paper's per-slot rates
strict_rates = false      # "priority" with work_conserving: true paces each flow at its
                          #  strict-priority share (at least min_rate_kbps, the floors of the
                          #  flows with bytes to send reserved first), so a port is never booked
                          #  beyond its capacity; false (default): also at least its own plan's
                          #  rate
classes = 0               # traffic classes (0 = off, the default; 1..=8): the job order
                          #  compressed onto that many strict-priority classes, each flow's
                          #  packets marked with its class's DSCP (class 0 first: 34 AF41, 26
                          #  AF31, 18 AF21, 10 AF11, 32 CS4, 24 CS3, 16 CS2, 8 CS1); needs --ipc
                          #  netlink and switches serving those DSCPs by strict priority

[pcn]                     # optional: PCN bursts ("Proactive Congestion Avoidance for
                          #  Distributed Deep Learning", Sec. 3.1)
enabled = true            # attach to the progress regions and answer before_burst (default
                          #  true); false: writers' before_burst returns at once (no agent)
threshold_bytes = 15000   # PCN threshold sent in PcnStart (default 15000: 10 packets of 1500 B,
                          #  the paper's example against an initial 40)
default_rtt_us = 1000     # grant delay when no datapath report gave the flows' RTT yet
poll_us = 500             # how often the attached progress regions are checked for burst
                          #  requests (default 500: a burst waits at most this much longer; each
                          #  poll costs 3 preads per attached region)
"#;

use mlcc_agent_core::fabric;
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

/// Default slot length, ms: the scheduling library's [`mlcc_sched::DEFAULT_SLOT_US`] ("Dynamic
/// Flow Scheduling for DNN Training Workloads in Data Centers", Sec. VI: 60 ms).
pub const DEFAULT_SLOT_MS: u64 = mlcc_sched::DEFAULT_SLOT_US / 1000;
/// Default horizon K: the scheduling library's (same paper, Sec. IV-A).
pub use mlcc_sched::DEFAULT_HORIZON;

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
    /// The link's ECN-marking queue, for PCN (switch links only).
    pub ecn: Option<EcnConfig>,
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
pub struct EcnConfig {
    /// Network namespace of the device (none: the daemon's own).
    pub netns: Option<String>,
    /// Egress device.
    pub dev: String,
    /// Parent class of the qdisc (none: the root qdisc).
    pub parent: Option<String>,
    /// Qdisc kind.
    pub qdisc: QdiscKind,
    /// Threshold without PCN starts, bytes.
    pub initial_threshold_bytes: Option<u32>,
    /// RED hard limit, bytes.
    pub red_limit_bytes: Option<u32>,
    /// RED average packet size, bytes.
    pub red_avpkt_bytes: Option<u32>,
    /// RED max − min, bytes.
    pub red_span_bytes: Option<u32>,
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
    pub timeout_ms: Option<u64>,
    /// Threshold change timeout, ms.
    pub apply_timeout_ms: Option<u64>,
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

/// `[pcn]` of `agent.toml` as written.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct RawAgentPcn {
    /// Whether the agent answers `before_burst`.
    pub enabled: Option<bool>,
    /// PCN threshold, bytes.
    pub threshold_bytes: Option<u32>,
    /// Grant delay without an RTT sample, µs.
    pub default_rtt_us: Option<u64>,
    /// Region poll period, µs.
    pub poll_us: Option<u64>,
}

/// `[sched]` of `agent.toml` as written.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct RawAgentSched {
    /// The rule set: "mlcc", "interleave" or "priority".
    pub rules: Option<String>,
    /// Work-conserving rates and event re-planning (default true).
    pub work_conserving: Option<bool>,
    /// Strict-priority shares as the rates (default [`DEFAULT_STRICT_RATES`]).
    pub strict_rates: Option<bool>,
    /// The job ranks under "interleave" and "priority": a [`mlcc_sched::JobOrder::name`].
    pub job_order: Option<String>,
    /// Traffic classes, 0 (off, the default) or 1..=8.
    pub classes: Option<i64>,
}

/// How the agent ranks jobs under `mlcc_sched::Rules::Interleave` and
/// `mlcc_sched::Rules::Priority` (`[sched] job_order`; the names are the policy layer's,
/// [`mlcc_sched::JobOrder::name`]). The default, earliest deadline first, and the measurements
/// that chose it are documented on [`mlcc_sched::JobOrder::EarliestDeadline`]. Before it, first
/// come: `priority` with it and work conservation gave 1.438 [1.406, 1.470] x ideal on
/// `ci/scenarios/agent.toml` against 1.713 [1.598, 1.829] with least attained service and no
/// work conservation (seeds 1-3, guest time, 2026-11-26; the two changes measured together).
pub use mlcc_sched::JobOrder;

/// Checks `[sched]` of `agent.toml`: the policy layer's rule set (default
/// [`mlcc_sched::Rules::Mlcc`]), the job order, work conservation and strict rates.
fn check_agent_sched(
    file: &Path,
    raw: &RawAgentSched,
) -> Result<(mlcc_sched::Rules, JobOrder, bool, bool), ConfigError> {
    let rules = match raw.rules.as_deref() {
        None => mlcc_sched::Rules::default(),
        Some(v) => v
            .parse()
            .map_err(|why: String| err(file, "sched.rules", format!("{v:?}"), why))?,
    };
    let job_order = match raw.job_order.as_deref() {
        None => JobOrder::default(),
        Some(v) => v
            .parse()
            .map_err(|why: String| err(file, "sched.job_order", format!("{v:?}"), why))?,
    };
    let work_conserving = raw.work_conserving.unwrap_or(DEFAULT_WORK_CONSERVING);
    let strict_rates = raw.strict_rates.unwrap_or(DEFAULT_STRICT_RATES);
    Ok((rules, job_order, work_conserving, strict_rates))
}

/// Checks `[sched] classes` of `agent.toml`: 0 (off; [`DEFAULT_CLASSES`] when absent) or
/// 1..=8 (`mlcc_sched::policy::classes::MAX_CLASSES`, a switch's 8 traffic classes, IEEE
/// 802.1Q). Errors: any other value, naming the file, the field and the value.
fn check_agent_classes(file: &Path, raw: &RawAgentSched) -> Result<u8, ConfigError> {
    let max = mlcc_sched::policy::classes::MAX_CLASSES;
    match raw.classes {
        None => Ok(DEFAULT_CLASSES),
        Some(n) => u8::try_from(n).ok().filter(|c| *c <= max).ok_or_else(|| {
            err(
                file,
                "sched.classes",
                n,
                format!("must be 0 (off) or 1..={max} traffic classes"),
            )
        }),
    }
}

/// Default of `[sched] classes`: off. Whether and how many classes help is for a measurement
/// in the VM testbed to decide (strict priority in its switch against the per-slot rates
/// alone); until it has been run, the agent sets no class.
pub const DEFAULT_CLASSES: u8 = 0;

/// Checked `[pcn]` of `agent.toml`: how the agent answers the writers' `before_burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentPcn {
    /// Attach to the regions and grant bursts (default true).
    pub enabled: bool,
    /// The PCN threshold of the agent's starts, bytes (> 0; default 15000).
    pub threshold_bytes: u32,
    /// Grant delay when the flows have no RTT sample, µs (default 1000).
    pub default_rtt_us: u64,
    /// Region poll period, µs (default 500).
    pub poll_us: u64,
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
    /// PCN policy of the switch daemons.
    pub pcn: SwitchPcn,
}

/// A checked host and a checked switch: the agent core's plain data ([`mlcc_agent_core::fabric`]).
pub use mlcc_agent_core::fabric::{Host, Switch};

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

/// A device, namespace or class name passed to `ip`/`tc` as one argument: non-empty, at most
/// 64 bytes, no whitespace, no leading '-'.
fn check_word(file: &Path, field: String, v: &str) -> Result<(), ConfigError> {
    if v.is_empty() || v.len() > 64 || v.starts_with('-') || v.chars().any(char::is_whitespace) {
        return Err(err(
            file,
            field,
            format!("{v:?}"),
            "must be 1..=64 characters, no whitespace, not starting with '-'",
        ));
    }
    Ok(())
}

fn check_ecn(
    file: &Path,
    i: usize,
    capacity_bps: u64,
    e: &EcnConfig,
) -> Result<EcnQueue, ConfigError> {
    let f = |name: &str| format!("link[{i}].ecn.{name}");
    if let Some(ns) = &e.netns {
        check_word(file, f("netns"), ns)?;
    }
    check_word(file, f("dev"), &e.dev)?;
    if let Some(p) = &e.parent {
        check_word(file, f("parent"), p)?;
    }
    let initial = e
        .initial_threshold_bytes
        .unwrap_or(DEFAULT_INITIAL_THRESHOLD_BYTES);
    if initial == 0 {
        return Err(err(file, f("initial_threshold_bytes"), 0, "must be > 0"));
    }
    if e.qdisc != QdiscKind::Red {
        for (name, v) in [
            ("red_limit_bytes", e.red_limit_bytes),
            ("red_avpkt_bytes", e.red_avpkt_bytes),
            ("red_span_bytes", e.red_span_bytes),
        ] {
            if let Some(v) = v {
                return Err(err(file, f(name), v, "only for qdisc = \"red\""));
            }
        }
    }
    let avpkt = e.red_avpkt_bytes.unwrap_or(1500);
    if !(64..=65_535).contains(&avpkt) {
        return Err(err(file, f("red_avpkt_bytes"), avpkt, "must be 64..=65535"));
    }
    let span = e.red_span_bytes.unwrap_or(avpkt);
    if span == 0 {
        return Err(err(
            file,
            f("red_span_bytes"),
            0,
            "must be > 0 (max above min)",
        ));
    }
    let limit = e
        .red_limit_bytes
        .unwrap_or_else(|| initial.saturating_mul(10));
    if u64::from(limit) <= u64::from(initial) + u64::from(span) {
        return Err(err(
            file,
            f("red_limit_bytes"),
            limit,
            format!(
                "must exceed initial_threshold_bytes + red_span_bytes ({})",
                u64::from(initial) + u64::from(span)
            ),
        ));
    }
    Ok(EcnQueue {
        netns: e.netns.clone(),
        dev: e.dev.clone(),
        parent: e.parent.clone(),
        qdisc: e.qdisc,
        initial_threshold_bytes: initial,
        capacity_bps,
        red_limit_bytes: limit,
        red_avpkt_bytes: avpkt,
        red_span_bytes: span,
    })
}

fn check_switch_pcn(file: &Path, raw: &RawSwitchPcn) -> Result<SwitchPcn, ConfigError> {
    let d = SwitchPcn::default();
    let timeout_ms = raw.timeout_ms.unwrap_or(d.timeout_ms);
    if !(1..=600_000).contains(&timeout_ms) {
        return Err(err(
            file,
            "pcn.timeout_ms",
            timeout_ms,
            "must be 1..=600000",
        ));
    }
    let apply_timeout_ms = raw.apply_timeout_ms.unwrap_or(d.apply_timeout_ms);
    if !(1..=60_000).contains(&apply_timeout_ms) {
        return Err(err(
            file,
            "pcn.apply_timeout_ms",
            apply_timeout_ms,
            "must be 1..=60000",
        ));
    }
    Ok(SwitchPcn {
        combine: raw.combine.unwrap_or(d.combine),
        timeout_ms,
        apply_timeout_ms,
    })
}

fn check_agent_pcn(file: &Path, raw: &RawAgentPcn) -> Result<AgentPcn, ConfigError> {
    let threshold_bytes = raw.threshold_bytes.unwrap_or(DEFAULT_PCN_THRESHOLD_BYTES);
    if threshold_bytes == 0 {
        return Err(err(file, "pcn.threshold_bytes", 0, "must be > 0"));
    }
    let default_rtt_us = raw.default_rtt_us.unwrap_or(1000);
    if !(1..=1_000_000).contains(&default_rtt_us) {
        return Err(err(
            file,
            "pcn.default_rtt_us",
            default_rtt_us,
            "must be 1..=1000000",
        ));
    }
    let poll_us = raw.poll_us.unwrap_or(500);
    if !(50..=100_000).contains(&poll_us) {
        return Err(err(file, "pcn.poll_us", poll_us, "must be 50..=100000"));
    }
    Ok(AgentPcn {
        enabled: raw.enabled.unwrap_or(true),
        threshold_bytes,
        default_rtt_us,
        poll_us,
    })
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
        let mut ecn = HashMap::new();
        for (i, l) in raw.link.iter().enumerate() {
            if let Some(e) = &l.ecn {
                ecn.insert(l.id, check_ecn(file, i, l.capacity_mbps * 1_000_000, e)?);
            }
        }
        let pcn = check_switch_pcn(file, &raw.pcn)?;
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
        }
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
            pcn,
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
    /// Whether registered flows are scheduled (default true).
    pub schedule: Option<bool>,
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
    /// Prometheus metrics address.
    pub metrics_addr: Option<String>,
    /// PCN bursts.
    #[serde(default)]
    pub pcn: RawAgentPcn,
    /// Scheduling rules.
    #[serde(default)]
    pub sched: RawAgentSched,
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
    /// NIC-only mode: no switch daemons; the agent plans its hosts' NIC links and their
    /// ingress links ([`Topology::served_ingress`]).
    pub nic_only: bool,
    /// Whether registered flows get the datapath program and the slot schedule; false: PCN
    /// only ("Proactive Congestion Avoidance for Distributed Deep Learning" on its own), every
    /// flow keeps its native congestion control.
    pub schedule: bool,
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
    /// Where to serve the Prometheus metrics (`GET /metrics`); `None`: not served.
    pub metrics_addr: Option<SocketAddr>,
    /// PCN bursts.
    pub pcn: AgentPcn,
    /// The policy layer's rule set (`[sched] rules`).
    pub rules: mlcc_sched::Rules,
    /// `[sched] job_order`.
    pub job_order: JobOrder,
    /// `[sched] work_conserving`: the policy layer's work-conserving rates
    /// (`mlcc_sched::PolicyOptions::work_conserving`), and, without switches, a re-plan of the
    /// slot when a burst begins or ends (see `crate::agent_core`). Default true: see
    /// [`DEFAULT_WORK_CONSERVING`].
    pub work_conserving: bool,
    /// `[sched] strict_rates`: under `priority` with work conservation, each flow is paced at
    /// its strict-priority share, the floors reserved
    /// (`mlcc_sched::PolicyOptions::strict_rates`). Default: [`DEFAULT_STRICT_RATES`].
    pub strict_rates: bool,
    /// `[sched] classes`: traffic classes, 0 (off) or 1..=8 (`mlcc_agent_core::CoreConfig::
    /// classes`). Default: [`DEFAULT_CLASSES`].
    pub classes: u8,
}

/// Default of `[sched] strict_rates`: off, by measurement. On `ci/scenarios/agent.toml` (guest
/// time, one vCPU, 20 iterations, seeds 1-12 in one invocation, 2026-11-27: `run-scenario.sh
/// --seeds 12 --vms 2 --iterations 20 --ccs "cubic,mltcp+agent+rules=priority+strict=off,
/// mltcp+agent+rules=priority+strict=on"`, README "Strict-priority rates"), strict rates made
/// the mean iteration 4.6 % [0.3, 8.8] longer than the plan-or-share rates, paired per seed
/// (against cubic: off −2.8 % [−5.0, −0.6], on +1.6 % [−2.7, +6.0]). The port's drops fell
/// (seed 1: 298 against 658), but in 5 of 12 seeds the jobs locked into a schedule where all
/// three computed at once and the port sat idle (rings at 1.45-1.50 x ideal against 1.13-1.27).
pub const DEFAULT_STRICT_RATES: bool = false;

/// Default of `[sched] work_conserving`. Chosen by the guest-time runs of
/// `ci/scenarios/agent.toml` (seeds 1-3, 20 iterations, 2026-11-26, README "The ccp-agent
/// scenario on guest time", work conservation): mean iteration −2.9 % [−4.2, −1.6] under the
/// mlcc rules and −11.7 % [−17.7, −5.7] under `priority` (with `first_come`), paired per seed
/// against the same rules without it.
pub const DEFAULT_WORK_CONSERVING: bool = true;

/// A datapath program file's text without its comment lines ([`ccp_datapath::program_lines`]),
/// as portus compiles it.
pub fn strip_program_comments(text: &str) -> String {
    ccp_datapath::program_lines(text)
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

/// Command-line values that replace agent.toml's (`ccp-agent run`/`check` flags and their
/// environment variables). Each is checked exactly as the file's field would be; an error names
/// the field and says that the value came from the command line.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--slot-ms`: replaces `slot_ms`.
    pub slot_ms: Option<u64>,
    /// `--horizon`: replaces `horizon`.
    pub horizon: Option<usize>,
    /// `--host` / `CCP_AGENT_HOSTS` (when not empty): replaces `hosts`.
    pub hosts: Vec<String>,
    /// `--metrics-addr`: replaces `metrics_addr`.
    pub metrics_addr: Option<SocketAddr>,
}

impl AgentConfig {
    /// Reads and checks `file` and the topology it names; `slot_ms` and `horizon` (command
    /// line) override the files'.
    pub fn load(
        file: &Path,
        slot_ms: Option<u64>,
        horizon: Option<usize>,
    ) -> Result<AgentConfig, ConfigError> {
        Self::load_with(
            file,
            &Overrides {
                slot_ms,
                horizon,
                ..Overrides::default()
            },
        )
    }

    /// [`AgentConfig::load`] with every command-line override.
    pub fn load_with(file: &Path, o: &Overrides) -> Result<AgentConfig, ConfigError> {
        let text = read(file)?;
        Self::parse_text(file, &text, o)
    }

    /// [`AgentConfig::load_with`] on text already read.
    pub fn parse_text(file: &Path, text: &str, o: &Overrides) -> Result<AgentConfig, ConfigError> {
        let mut raw: RawAgentConfig = parse(file, text)?;
        // A field replaced from the command line is named as such in errors.
        let hosts_field = if o.hosts.is_empty() {
            "hosts"
        } else {
            raw.hosts = o.hosts.clone();
            "hosts (from --host / CCP_AGENT_HOSTS)"
        };
        let (slot_ms, horizon) = (o.slot_ms, o.horizon);
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
                hosts_field,
                "[]",
                "an agent serves at least one host",
            ));
        }
        for (i, h) in raw.hosts.iter().enumerate() {
            if !topology.hosts.iter().any(|t| &t.name == h) {
                return Err(err(
                    file,
                    format!("{hosts_field}[{i}]"),
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
        if let Err(e) = ccp_datapath::check_slot_program(&program) {
            return Err(err(
                file,
                "program",
                format!("{:?}", raw.program.display().to_string()),
                e.to_string(),
            ));
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
        let min_rate_kbps = raw.min_rate_kbps.unwrap_or(DEFAULT_MIN_RATE_KBPS);
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
        let metrics_addr = match (o.metrics_addr, &raw.metrics_addr) {
            (Some(a), _) => Some((a, "metrics_addr (from --metrics-addr)")),
            (None, Some(m)) => Some((
                sockaddr(file, String::from("metrics_addr"), m)?,
                "metrics_addr",
            )),
            (None, None) => None,
        };
        if let Some((a, field)) = metrics_addr {
            if a == listen {
                return Err(err(
                    file,
                    field,
                    format!("\"{a}\""),
                    "is the gRPC `listen` address; give the metrics their own port",
                ));
            }
        }
        let metrics_addr = metrics_addr.map(|(a, _)| a);
        let pcn = check_agent_pcn(file, &raw.pcn)?;
        let (rules, job_order, work_conserving, strict_rates) =
            check_agent_sched(file, &raw.sched)?;
        let classes = check_agent_classes(file, &raw.sched)?;
        Ok(AgentConfig {
            pcn,
            rules,
            job_order,
            work_conserving,
            strict_rates,
            classes,
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
            schedule: raw.schedule.unwrap_or(true),
            slot_ms,
            horizon,
            min_rate_bps: min_rate_kbps.saturating_mul(1000),
            cwnd_bytes,
            rpc_timeout_ms,
            metrics_addr,
        })
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
            (2, 1, 1, 1)
        );
        assert!(t.link[1].ecn.is_some() && t.pcn.timeout_ms.is_some());
        let a: RawAgentConfig = toml::from_str(AGENT_HELP).unwrap();
        assert_eq!(a.hosts, ["h1"]);
        assert_eq!(a.pcn.threshold_bytes, Some(DEFAULT_PCN_THRESHOLD_BYTES));
        assert_eq!(a.sched.rules.as_deref(), Some("mlcc"));
        assert_eq!(a.metrics_addr.as_deref(), Some("127.0.0.1:9470"));
        assert_eq!(strip_program_comments("# c\n(def)\n  # d\n"), "(def)");
    }
}
