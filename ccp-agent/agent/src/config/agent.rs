// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `agent.toml`: one agent's own file (the topology it reads, the hosts it serves, its datapath
//! program, addresses, slot grid, rate floor, `[sched]` and `[pcn]`), as written
//! ([`RawAgentConfig`]) and checked with its topology ([`AgentConfig`]), and the command-line
//! values that replace its fields ([`Overrides`]).

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::topo::{sockaddr, Topology, DEFAULT_PCN_THRESHOLD_BYTES};
use super::{err, parse, ranged, read, relative, ConfigError, Horizon, NonZeroBytes, SlotMs};

/// The default floor of every rate the agent applies (`min_rate_kbps`), kbit/s.
///
/// A flow held at the floor takes a raised rate only at its next ACK, and its next segment
/// leaves at the old rate's spacing (Linux paces by departure time, `tcp_update_skb_after_send()`
/// in net/ipv4/tcp_output.c), so a hand-over from the served flow to a held one costs about a
/// segment's time at the floor: 23 ms for two 1448-byte segments at 1 Mbit/s, 4.6 ms at
/// 5 Mbit/s. The held flows' floors are not reserved: on a port where n flows are held, the port
/// is booked n x the floor beyond its capacity. 5000 chosen by measurement:
/// docs/results/agent-defaults.md.
pub const DEFAULT_MIN_RATE_KBPS: u64 = 5000;

/// Default of `[sched] strict_rates`: off (strict-priority shares as the rates made iterations
/// longer where the jobs locked into computing at once), chosen by measurement:
/// docs/results/agent-defaults.md.
pub const DEFAULT_STRICT_RATES: bool = false;

/// Default of `[sched] work_conserving`: on (shorter iterations under every rule set), chosen
/// by measurement: docs/results/agent-defaults.md.
pub const DEFAULT_WORK_CONSERVING: bool = true;

/// Default cwnd at install, bytes (16 MiB).
pub const DEFAULT_CWND_BYTES: u32 = 16 << 20;

ranged!(
    /// A rate floor, kbit/s: above 0 (`min_rate_kbps`; a zero rate stalls the flow).
    NonZeroRateKbps(u64, "u64"),
    1..=u64::MAX,
    "must be > 0 (a zero rate stalls the flow)"
);
ranged!(
    /// The cwnd at install, bytes: at least 2 segments of 1448 bytes (`cwnd_bytes`).
    CwndBytes(u32, "u32"),
    2 * 1448..=u32::MAX,
    "must be at least 2 segments (2896)"
);
ranged!(
    /// `[pcn] default_rtt_us`: 1..=1000000.
    DefaultRttUs(u64, "u64"),
    1..=1_000_000,
    "must be 1..=1000000"
);
ranged!(
    /// `[pcn] poll_us`: 50..=100000.
    PollUs(u64, "u64"),
    50..=100_000,
    "must be 50..=100000"
);

/// `[pcn]` of `agent.toml` as written.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct RawAgentPcn {
    /// Whether the agent answers `before_burst`.
    pub enabled: Option<bool>,
    /// PCN threshold, bytes.
    pub threshold_bytes: Option<NonZeroBytes>,
    /// Grant delay without an RTT sample, µs.
    pub default_rtt_us: Option<DefaultRttUs>,
    /// Region poll period, µs.
    pub poll_us: Option<PollUs>,
}

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

impl From<RawAgentPcn> for AgentPcn {
    fn from(raw: RawAgentPcn) -> Self {
        AgentPcn {
            enabled: raw.enabled.unwrap_or(true),
            threshold_bytes: raw
                .threshold_bytes
                .map_or(DEFAULT_PCN_THRESHOLD_BYTES, NonZeroBytes::get),
            default_rtt_us: raw.default_rtt_us.map_or(1000, DefaultRttUs::get),
            poll_us: raw.poll_us.map_or(500, PollUs::get),
        }
    }
}

/// A value of a type whose names are its `FromStr` (the policy layer's [`mlcc_sched::Rules`] and
/// [`JobOrder`]), refused with that `FromStr`'s reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String", bound = "T: std::str::FromStr<Err = String>")]
pub struct Named<T>(pub T);

impl<T: std::str::FromStr<Err = String>> TryFrom<String> for Named<T> {
    type Error = String;
    fn try_from(v: String) -> Result<Self, String> {
        v.parse().map(Named)
    }
}

/// `[sched]` of `agent.toml` as written.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct RawAgentSched {
    /// The rule set: "mlcc", "interleave" or "priority".
    pub rules: Option<Named<mlcc_sched::Rules>>,
    /// Work-conserving rates and event re-planning (default true).
    pub work_conserving: Option<bool>,
    /// Strict-priority shares as the rates (default [`DEFAULT_STRICT_RATES`]).
    pub strict_rates: Option<bool>,
    /// The job ranks under "interleave" and "priority": a [`mlcc_sched::JobOrder::name`].
    pub job_order: Option<Named<JobOrder>>,
    /// Traffic classes, 0 (off, the default) or 1..=8.
    pub classes: Option<TrafficClassCount>,
    /// The rates of classed flows: "plan" or "line" (a [`mlcc_sched::ClassRates::name`]).
    pub class_rates: Option<Named<mlcc_sched::ClassRates>>,
    /// How held flows are enforced: "floor" or "scavenger" (a [`mlcc_sched::HeldFlows::name`]).
    pub held_flows: Option<Named<mlcc_sched::HeldFlows>>,
    /// The scavenger's target queueing delay, µs (1..=100000).
    pub scavenger_target_us: Option<ScavengerTargetUs>,
}

/// `[sched] scavenger_target_us` of `agent.toml`: LEDBAT's target queueing delay (RFC 6817,
/// Sec. 2.4.2), 1..=100000 µs. Any other value is refused, naming the field and the value.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(try_from = "i64")]
pub struct ScavengerTargetUs(pub u32);

impl TryFrom<i64> for ScavengerTargetUs {
    type Error = String;
    fn try_from(n: i64) -> Result<Self, String> {
        u32::try_from(n)
            .ok()
            .filter(|t| (1..=MAX_SCAVENGER_TARGET_US).contains(t))
            .map(ScavengerTargetUs)
            .ok_or_else(|| {
                format!("{n}: must be 1..={MAX_SCAVENGER_TARGET_US} µs of queueing delay")
            })
    }
}

/// The largest `[sched] scavenger_target_us` (the policy layer's bound).
pub use mlcc_sched::MAX_SCAVENGER_TARGET_US;

/// Default of `[sched] rules`: "priority" (job-level strict priority, work-conserving), not the
/// policy layer's own default (the mlcc paper's rules, which the simulator keeps as its
/// reference), by measurement: on the agent scenario the agent's iterations were 7.4 % shorter
/// than under the mlcc rules, and 4.7 % shorter than cubic's where the mlcc rules were 3.0 %
/// longer (docs/results/agent-defaults.md).
pub const DEFAULT_RULES: mlcc_sched::Rules = mlcc_sched::Rules::Priority;

/// Default of `[sched] held_flows`: "scavenger", by measurement: on the agent scenario the
/// agent's iterations were shorter than with held flows at the floor, and no scenario measured
/// showed a loss (docs/results/agent-defaults.md).
pub const DEFAULT_HELD_FLOWS: mlcc_sched::HeldFlows = mlcc_sched::HeldFlows::Scavenger;

/// Default of `[sched] scavenger_target_us`, µs (see docs/results/agent-defaults.md).
pub const DEFAULT_SCAVENGER_TARGET_US: u32 = 1000;

/// `[sched] classes` of `agent.toml`: 0 (off) or 1..=8 (`mlcc_sched::policy::classes::
/// MAX_CLASSES`, a switch's 8 traffic classes, IEEE 802.1Q). Any other value is refused,
/// naming the field and the value.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(try_from = "i64")]
pub struct TrafficClassCount(pub u8);

impl TryFrom<i64> for TrafficClassCount {
    type Error = String;
    fn try_from(n: i64) -> Result<Self, String> {
        let max = mlcc_sched::policy::classes::MAX_CLASSES;
        u8::try_from(n)
            .ok()
            .filter(|c| *c <= max)
            .map(TrafficClassCount)
            .ok_or_else(|| format!("{n}: must be 0 (off) or 1..={max} traffic classes"))
    }
}

/// Default of `[sched] classes`: off, by measurement: on ports that serve the classes by
/// strict priority, classes did not make the agent's iterations shorter (docs/results/
/// agent-defaults.md).
pub const DEFAULT_CLASSES: u8 = 0;

/// Default of `[sched] class_rates`: the policy's rates ("plan"), by measurement: unthrottled
/// classed flows ("line") made the iterations longer (docs/results/agent-defaults.md).
pub const DEFAULT_CLASS_RATES: mlcc_sched::ClassRates = mlcc_sched::ClassRates::Plan;

/// How the agent ranks jobs under `mlcc_sched::Rules::Interleave` and
/// `mlcc_sched::Rules::Priority` (`[sched] job_order`; the names are the policy layer's,
/// [`mlcc_sched::JobOrder::name`]). The default, earliest deadline first with each job's time
/// alone scaled by its slowdown, and the measurements that chose it are documented on
/// [`mlcc_sched::JobOrder::SlowdownDeadline`] and in docs/results/agent-defaults.md.
pub use mlcc_sched::JobOrder;

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
    pub slot_ms: Option<SlotMs>,
    /// Horizon.
    pub horizon: Option<Horizon>,
    /// Rate floor, kbit/s.
    pub min_rate_kbps: Option<NonZeroRateKbps>,
    /// Cwnd at install, bytes.
    pub cwnd_bytes: Option<CwndBytes>,
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
    /// The policy layer's rule set (`[sched] rules`). Default: [`DEFAULT_RULES`].
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
    /// `[sched] class_rates`: with classes on, the classed flows' rates, the policy's per-slot
    /// rates ("plan") or unthrottled ("line") (`mlcc_agent_core::CoreConfig::class_rates`).
    /// Default: [`DEFAULT_CLASS_RATES`].
    pub class_rates: mlcc_sched::ClassRates,
    /// `[sched] held_flows`: how a flow the policy holds at the floor is enforced
    /// (`mlcc_agent_core::CoreConfig::held_flows`). Default: [`DEFAULT_HELD_FLOWS`].
    pub held_flows: mlcc_sched::HeldFlows,
    /// `[sched] scavenger_target_us`: the scavenger's target queueing delay, µs
    /// (`mlcc_agent_core::CoreConfig::scavenger_target_us`). Default:
    /// [`DEFAULT_SCAVENGER_TARGET_US`].
    pub scavenger_target_us: u32,
}

/// A datapath program file's text without its comment lines ([`ccp_datapath::program_lines`]),
/// as portus compiles it.
pub fn strip_program_comments(text: &str) -> String {
    ccp_datapath::program_lines(text)
        .collect::<Vec<_>>()
        .join("\n")
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

    /// [`AgentConfig::load_with`] on text already read: the values by their types, then what
    /// crosses fields and files (the topology's hosts, the program, the slot grid, addresses).
    pub fn parse_text(file: &Path, text: &str, o: &Overrides) -> Result<AgentConfig, ConfigError> {
        let mut raw: RawAgentConfig = parse(file, text)?;
        // A field replaced from the command line is named as such in errors.
        let hosts_field = if o.hosts.is_empty() {
            "hosts"
        } else {
            raw.hosts = o.hosts.clone();
            "hosts (from --host / CCP_AGENT_HOSTS)"
        };
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
        let program_field = || format!("{:?}", raw.program.display().to_string());
        let program_text = std::fs::read_to_string(&program_file).map_err(|e| {
            err(
                file,
                "program",
                program_field(),
                format!("cannot read {}: {e}", program_file.display()),
            )
        })?;
        let program = strip_program_comments(&program_text);
        if let Err(e) = portus::lang::compile(program.as_bytes(), &[]) {
            return Err(err(
                file,
                "program",
                program_field(),
                format!("does not compile: {e:?}"),
            ));
        }
        if let Err(e) = ccp_datapath::check_slot_program(&program) {
            return Err(err(file, "program", program_field(), e.to_string()));
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
        // Command line first, then this file, then the topology's.
        let slot_ms = match o.slot_ms {
            Some(v) => SlotMs::try_from(v).map_err(|why| err(file, "slot_ms", v, why))?,
            None => raw.slot_ms.unwrap_or(SlotMs(topology.slot_ms)),
        }
        .get();
        let horizon = match o.horizon {
            Some(v) => Horizon::try_from(v).map_err(|why| err(file, "horizon", v, why))?,
            None => raw.horizon.unwrap_or(Horizon(topology.horizon)),
        }
        .get();
        if slot_ms != topology.slot_ms || horizon != topology.horizon {
            tracing::warn!(
                slot_ms,
                horizon,
                topology_slot_ms = topology.slot_ms,
                topology_horizon = topology.horizon,
                "slot grid differs from the topology's: switches plan on the topology's"
            );
        }
        let min_rate_kbps = raw
            .min_rate_kbps
            .map_or(DEFAULT_MIN_RATE_KBPS, NonZeroRateKbps::get);
        let cwnd_bytes = raw.cwnd_bytes.map_or(DEFAULT_CWND_BYTES, CwndBytes::get);
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
        let sched = &raw.sched;
        Ok(AgentConfig {
            pcn: AgentPcn::from(raw.pcn.clone()),
            rules: sched.rules.map_or(DEFAULT_RULES, |r| r.0),
            job_order: sched.job_order.map(|j| j.0).unwrap_or_default(),
            work_conserving: sched.work_conserving.unwrap_or(DEFAULT_WORK_CONSERVING),
            strict_rates: sched.strict_rates.unwrap_or(DEFAULT_STRICT_RATES),
            classes: sched.classes.map_or(DEFAULT_CLASSES, |c| c.0),
            class_rates: sched.class_rates.map_or(DEFAULT_CLASS_RATES, |c| c.0),
            held_flows: sched.held_flows.map_or(DEFAULT_HELD_FLOWS, |c| c.0),
            scavenger_target_us: sched
                .scavenger_target_us
                .map_or(DEFAULT_SCAVENGER_TARGET_US, |t| t.0),
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
            metrics_addr: metrics_addr.map(|(a, _)| a),
        })
    }
}
