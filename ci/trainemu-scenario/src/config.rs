// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Scenario and model-profile files (TOML): their types, loading and validation.
//!
//! A scenario names the topology (hosts as network namespaces around one switch namespace, each
//! host's link with tbf rate and netem delay/loss), the TCP sysctls to set, the jobs (model,
//! paradigm, placement, iterations, start offset) and the congestion controls to compare. Every
//! table is `deny_unknown_fields`; a value's own range is a rule newtype read while parsing
//! (`deserialize_with = "via::<Rule, ..>"`), and [`Scenario::validate`] then checks what crosses
//! fields (names, hosts, cross references, the models).
//! Every error names the file, the field (as a TOML path such as `jobs[1].workers[0]`) and the
//! offending value, and nothing is started before a scenario has passed validation.
//!
//! Model profiles (`ci/scenarios/models.toml`, built into the binary) give each model's gradient
//! bytes per iteration, compute time and sources; their types and parsing live in the shared
//! `dnn-profiles` crate (also used by the cluster simulator). A job's emulated gradient is
//! `bytes_per_iteration × scale × time_scale` bytes and its compute phase `compute_ms × time_scale`.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::seeds::{ComputeJitter, JitterSpec};
use mltcp_math::params;

pub use dnn_profiles::ModelFile;

/// Marks a value rule's refusal in serde's message, so [`Scenario::parse`] can name the field by
/// its path (a control character no TOML value holds unescaped).
const RULE: char = '\u{1f}';

/// Defines newtypes, one per rule on one value, with `TryFrom` (read through serde's `try_from`):
/// `$ok` says whether `$v` is accepted, `$why` why not. A field keeps its plain type and reads
/// through the newtype with `deserialize_with = "via::<Newtype, Plain, _>"` (or `via_opt`), so
/// the rule is written once, here, and a refusal names the field's TOML path and the value.
macro_rules! rules {
    ($($(#[$doc:meta])* $name:ident($t:ty, $ts:tt) if |$v:ident| $ok:expr, else $why:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
        #[serde(try_from = $ts)]
        pub struct $name(pub $t);

        impl TryFrom<$t> for $name {
            type Error = String;
            fn try_from($v: $t) -> std::result::Result<Self, String> {
                if $ok {
                    Ok(Self($v))
                } else {
                    Err(format!("{RULE}{:?}: {}", $v, $why))
                }
            }
        }

        impl From<$name> for $t {
            fn from(x: $name) -> $t {
                x.0
            }
        }
    )*};
}

/// Reads a `T` through the rule of newtype `N`.
fn via<'de, N, T, D>(d: D) -> std::result::Result<T, D::Error>
where
    N: Deserialize<'de> + Into<T>,
    D: serde::Deserializer<'de>,
{
    N::deserialize(d).map(Into::into)
}

/// Reads an optional `T` through the rule of newtype `N`.
fn via_opt<'de, N, T, D>(d: D) -> std::result::Result<Option<T>, D::Error>
where
    N: Deserialize<'de> + Into<T>,
    D: serde::Deserializer<'de>,
{
    Option::<N>::deserialize(d).map(|o| o.map(Into::into))
}

/// Whether `v` is finite and within `lo..=hi`.
fn within(v: f64, lo: f64, hi: f64) -> bool {
    v.is_finite() && (lo..=hi).contains(&v)
}

/// Whether `v` is finite, above 0 and at most `hi`.
fn positive_to(v: f64, hi: f64) -> bool {
    v.is_finite() && v > 0.0 && v <= hi
}

rules! {
    /// Iterations: 1..=100000 (`iterations`, a job's `iterations`).
    Iterations(u32, "u32") if |v| (1..=100_000).contains(&v), else "must be in 1..=100000";
    /// `solo_iterations`: at least 1.
    SoloIterations(u32, "u32") if |v| v >= 1, else "must be >= 1";
    /// `sample_ms`: 1..=20 ms.
    SampleMs(f64, "f64") if |v| within(v, 1.0, 20.0), else "must be in 1..=20 (milliseconds)";
    /// A host's `rate_mbit`: (0, 100000] Mbit/s.
    RateMbit(f64, "f64") if |v| positive_to(v, 100_000.0), else "must be in (0, 100000] Mbit/s";
    /// A host's `delay_ms`: 0..=10000 ms.
    DelayMs(f64, "f64") if |v| within(v, 0.0, 10_000.0), else "must be in 0..=10000 ms";
    /// A host's `loss_pct`: 0..=100 percent.
    LossPct(f64, "f64") if |v| within(v, 0.0, 100.0), else "must be in 0..=100 percent";
    /// A host's `burst_bytes`: at least one MTU-sized packet.
    BurstBytes(u64, "u64") if |v| v >= 1600, else "must be >= 1600 bytes (one MTU-sized packet)";
    /// A host's `queue_ms`: (0, 10000] ms.
    QueueMs(f64, "f64") if |v| positive_to(v, 10_000.0), else "must be in (0, 10000] ms";
    /// A start time or offset, ms: 0..=3600000 (a job's `start_offset_ms`, a background flow's
    /// `start_ms`).
    OffsetMs(f64, "f64") if |v| within(v, 0.0, 3_600_000.0), else "must be in 0..=3600000 ms";
    /// A 0/1 sysctl (`tcp_slow_start_after_idle`, `tcp_no_metrics_save`).
    Flag(u8, "u8") if |v| v <= 1, else "must be in 0..=1";
    /// The `tcp_ecn` sysctl: 0..=2.
    TcpEcn(u8, "u8") if |v| v <= 2, else "must be in 0..=2";
    /// A job's `compute_ms`: 0..=600000 ms.
    ComputeMs(f64, "f64") if |v| within(v, 0.0, 600_000.0), else "must be in 0..=600000 ms";
    /// A job's `scale`: (0, 1].
    Scale(f64, "f64") if |v| positive_to(v, 1.0), else "must be in (0, 1]";
    /// A job's `time_scale`: (0, 1000].
    TimeScale(f64, "f64") if |v| positive_to(v, 1000.0), else "must be in (0, 1000]";
    /// `background_baseline_s`: 1..=3600 s.
    BaselineS(f64, "f64") if |v| within(v, 1.0, 3600.0), else "must be in 1..=3600 s";
    /// `before_burst_ms`: 0..=1000 ms.
    BeforeBurstMs(f64, "f64") if |v| within(v, 0.0, 1000.0), else "must be in 0..=1000 ms";
}

/// The default scenarios built into the binary, by file name, so that the guest can run
/// `trainemu run a.toml` even though only the binary crosses into the VM.
pub const BUILTIN_SCENARIOS: &[(&str, &str)] = &[
    ("a.toml", include_str!("../../scenarios/a.toml")),
    ("b.toml", include_str!("../../scenarios/b.toml")),
    ("c.toml", include_str!("../../scenarios/c.toml")),
    ("e2e.toml", include_str!("../../scenarios/e2e.toml")),
];

/// Congestion controls a scenario may name (those of Linux and of tcp_mltcp.ko we know of).
pub const KNOWN_CCS: &[&str] = &[
    "cubic",
    "reno",
    "mltcp",
    "mltcp_cubic",
    "mltcp_dctcp",
    "bbr",
    "dctcp",
    "vegas",
    "htcp",
    "bic",
];

/// Congestion controls that need ECN (their connections negotiate it; without it they run Reno).
pub const NEEDS_ECN: &[&str] = &["dctcp", "mltcp_dctcp"];

/// How a run's flows are scheduled by `ccp-agent` (a `ccs` entry's `+agent` suffix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentMode {
    /// `+agent`: one `ccp-agent` for all emulated hosts, NIC-only (it keeps its hosts' NIC links;
    /// the mlcc paper, Sec. VI-H).
    NicOnly,
    /// `+agent+switch`: the agent plus a `ccp-agent switch` daemon owning the switch ports toward
    /// the hosts (the mlcc paper, Sec. IV-A).
    Switch,
    /// `+pcn` (any congestion control): PCN alone, the PCN paper's system: the agent with
    /// `schedule = false` (no flow gets a datapath program; each keeps its own congestion
    /// control) serves the workers' `before_burst`, and the switch daemon lowers the port's
    /// marking threshold.
    PcnOnly,
}

/// PCN in a run scheduled by `ccp-agent` (a `ccs` entry's `+nopcn` or `+pcn=BYTES[:COMBINE]`):
/// "Proactive Congestion Avoidance for Distributed Deep Learning", Sec. 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PcnVariant {
    /// The agent's defaults (PCN on: threshold 15000 B, combine "min"; a NIC-only agent grants
    /// at once, no switch to ask).
    #[default]
    Default,
    /// `+nopcn`: the agent's `[pcn] enabled = false`: it does not answer `before_burst`, whose
    /// bounded wait returns at once (the run without PCN's head start).
    Off,
    /// `+pcn=BYTES[:min|harmonic]`: the threshold an agent asks for, bytes, and how the switch
    /// combines concurrent starts (`[pcn] combine`; default min).
    On {
        /// `[pcn] threshold_bytes` of the agent.
        threshold_bytes: u32,
        /// `[pcn] combine = "harmonic"` on the switch (else "min").
        harmonic: bool,
    },
}

/// The agent's scheduling settings a scheduled run may name (`+rules=NAME`, `+order=NAME`,
/// `+floor=KBPS`, `+strict=on|off`, `+classes=N`, `+class_rates=plan|line`,
/// `+held=floor|scavenger`, `+scavenger_us=N`, `+slot_ms=N`); each `None` leaves agent.toml's
/// default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AgentSched {
    /// `[sched] rules` (`+rules=NAME`; the names are `mlcc_sched::Rules`').
    pub rules: Option<mlcc_sched::Rules>,
    /// `[sched] job_order` (`+order=NAME`; the names are `mlcc_sched::JobOrder`').
    pub job_order: Option<mlcc_sched::JobOrder>,
    /// `min_rate_kbps`, the floor of every rate the agent applies, kbit/s (`+floor=KBPS`, > 0).
    pub min_rate_kbps: Option<u64>,
    /// `[sched] strict_rates` (`+strict=on|off`): under `priority`, each flow paced at its
    /// strict-priority share (`mlcc_sched::PolicyOptions::strict_rates`).
    pub strict_rates: Option<bool>,
    /// `[sched] classes` (`+classes=N`, 0..=8): the job order compressed onto N traffic classes,
    /// each flow marked with its class's DSCP (`mlcc_sched::policy::classes`).
    pub classes: Option<u8>,
    /// `[sched] class_rates` (`+class_rates=plan|line`): the classed flows' rates.
    pub class_rates: Option<mlcc_sched::ClassRates>,
    /// `[sched] held_flows` (`+held=floor|scavenger`): how flows held at the floor are
    /// enforced (`mlcc_sched::HeldFlows`).
    pub held_flows: Option<mlcc_sched::HeldFlows>,
    /// `[sched] scavenger_target_us` (`+scavenger_us=N`, 1..=100000): the scavenger's target
    /// queueing delay, µs.
    pub scavenger_target_us: Option<u32>,
    /// The slot length, ms (`+slot_ms=N`, 1..=60000): agent.toml's `slot_ms` and the topology's,
    /// so the agents and the switch daemon plan on one grid (the mlcc paper's time slot, Sec.
    /// IV-A; the agent's default 60).
    pub slot_ms: Option<u64>,
}

/// A `ccs` entry: a congestion control, optionally with tcp_mltcp module parameters for the run,
/// written `mltcp[slope_fx=3072,intercept_fx=512]` (a parameter sweep is a scenario
/// whose `ccs` list such variants), and optionally scheduled by `ccp-agent` through the module's
/// CCP datapath: `mltcp+agent` (NIC-only) or `mltcp+agent+switch`, then optionally `+nopcn` or
/// `+pcn=BYTES[:min|harmonic]` ([`PcnVariant`]); or, for any congestion control, PCN alone:
/// `dctcp+pcn` or `dctcp+pcn=BYTES[:min|harmonic]` ([`AgentMode::PcnOnly`]). A scheduled run
/// may also name the agent's rule set, `+rules=NAME` (agent.toml's `[sched] rules`, e.g.
/// `mltcp+agent+rules=interleave`; the names are `mlcc_sched::Rules`') and its job order,
/// `+order=NAME` (agent.toml's `[sched] job_order`, e.g. `+order=earliest_deadline`; the names
/// are `mlcc_sched::JobOrder`'), the floor of its rates, `+floor=KBPS` (agent.toml's
/// `min_rate_kbps`), and its strict-priority rates, `+strict=on|off` (`[sched]
/// strict_rates`), its traffic classes, `+classes=N` (`[sched] classes`), and their rates,
/// `+class_rates=plan|line` (`[sched] class_rates`), how held flows are enforced,
/// `+held=floor|scavenger` (`[sched] held_flows`), and the scavenger's target,
/// `+scavenger_us=N` (`[sched] scavenger_target_us`), and the slot length, `+slot_ms=N`
/// (`slot_ms` of agent.toml and of the topology); see [`AgentSched`]. The whole string labels
/// the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CcVariant {
    /// The entry as written (the run's label).
    pub label: String,
    /// The congestion control set on every socket.
    pub cc: String,
    /// Module parameters (name, value) written before the run and restored after it.
    pub params: Vec<(String, u32)>,
    /// Whether `ccp-agent` schedules the run's flows, and how.
    pub agent: Option<AgentMode>,
    /// PCN's settings when the agent schedules the run.
    pub pcn: PcnVariant,
    /// The agent's scheduling settings (`+rules=`, `+order=`, `+floor=`, `+strict=`,
    /// `+classes=`, `+class_rates=`, `+held=`, `+scavenger_us=`, `+slot_ms=`).
    pub sched: AgentSched,
}

/// One `+KEY=VALUE` setting of the agent in a `ccs` entry (`tokens`: the entry's tokens that
/// start with `KEY=`): `None` when absent, its value through `parse` when given once to a run
/// the agent schedules (`scheduled`); errors name the token, and say `what` the setting is when
/// the run has no agent.
fn agent_setting<T>(
    tokens: &[&str],
    key: &str,
    placeholder: &str,
    what: &str,
    scheduled: bool,
    parse: impl FnOnce(&str) -> std::result::Result<T, String>,
) -> std::result::Result<Option<T>, String> {
    match tokens {
        [] => Ok(None),
        [t] if !scheduled => Err(format!("'+{t}' needs +agent or +agent+switch ({what})")),
        [t] => parse(&t[key.len() + 1..])
            .map(Some)
            .map_err(|why| format!("'+{t}': {why}")),
        _ => Err(format!("+{key}={placeholder} given more than once")),
    }
}

impl CcVariant {
    /// Parses `CC`, `CC[NAME=VALUE,...]`, either followed by `+agent` or `+agent+switch`, then
    /// optionally `+nopcn` or `+pcn=BYTES[:min|harmonic]` (the latter with `+agent+switch`); or
    /// followed by `+pcn` / `+pcn=BYTES[:min|harmonic]` alone (PCN only). Errors name the part
    /// that is wrong.
    pub fn parse(label: &str) -> std::result::Result<Self, String> {
        const SUFFIXES: &str = "+agent, +agent+switch, then +rules=NAME, +order=NAME, +floor=KBPS, +strict=on|off, +classes=N, +class_rates=plan|line, +held=floor|scavenger, +scavenger_us=N, +slot_ms=N, +nopcn or +pcn=BYTES[:min|harmonic]; or +pcn[=BYTES[:min|harmonic]] alone";
        let (s, all_tokens) = match label.find('+') {
            Some(i) => (&label[..i], label[i + 1..].split('+').collect::<Vec<_>>()),
            None => (label, Vec::new()),
        };
        let (rules_tokens, other): (Vec<&str>, Vec<&str>) = all_tokens
            .into_iter()
            .partition(|t| t.starts_with("rules="));
        let (order_tokens, other): (Vec<&str>, Vec<&str>) =
            other.into_iter().partition(|t| t.starts_with("order="));
        let (floor_tokens, other): (Vec<&str>, Vec<&str>) =
            other.into_iter().partition(|t| t.starts_with("floor="));
        let (strict_tokens, other): (Vec<&str>, Vec<&str>) =
            other.into_iter().partition(|t| t.starts_with("strict="));
        let (classes_tokens, other): (Vec<&str>, Vec<&str>) =
            other.into_iter().partition(|t| t.starts_with("classes="));
        let (class_rates_tokens, other): (Vec<&str>, Vec<&str>) = other
            .into_iter()
            .partition(|t| t.starts_with("class_rates="));
        let (held_tokens, other): (Vec<&str>, Vec<&str>) =
            other.into_iter().partition(|t| t.starts_with("held="));
        let (scavenger_tokens, other): (Vec<&str>, Vec<&str>) = other
            .into_iter()
            .partition(|t| t.starts_with("scavenger_us="));
        let (slot_tokens, other): (Vec<&str>, Vec<&str>) =
            other.into_iter().partition(|t| t.starts_with("slot_ms="));
        let mut tokens = other.into_iter();
        let mut agent = None;
        let mut pcn = PcnVariant::Default;
        let mut next = tokens.next();
        if next == Some("agent") {
            agent = Some(AgentMode::NicOnly);
            next = tokens.next();
            if next == Some("switch") {
                agent = Some(AgentMode::Switch);
                next = tokens.next();
            }
        } else if next.is_some_and(|t| t == "pcn" || t.starts_with("pcn=")) {
            agent = Some(AgentMode::PcnOnly);
            if next == Some("pcn") {
                next = tokens.next();
                if let Some(t) = next {
                    return Err(format!(
                        "unknown suffix '+{t}' after the PCN setting (known: {SUFFIXES})"
                    ));
                }
            }
        }
        if let Some(t) = next {
            if agent.is_none() {
                return Err(format!("unknown suffix '+{t}' (known: {SUFFIXES})"));
            }
            pcn = if t == "nopcn" && agent != Some(AgentMode::PcnOnly) {
                PcnVariant::Off
            } else if let Some(v) = t.strip_prefix("pcn=") {
                let (bytes, combine) = v.split_once(':').unwrap_or((v, "min"));
                let threshold_bytes: u32 = match bytes.parse() {
                    Ok(b) if b > 0 => b,
                    _ => {
                        return Err(format!(
                            "'+{t}': the PCN threshold must be a number of bytes > 0"
                        ))
                    }
                };
                let harmonic = match combine {
                    "min" => false,
                    "harmonic" => true,
                    c => return Err(format!("'+{t}': unknown combine '{c}' (min or harmonic)")),
                };
                if agent == Some(AgentMode::NicOnly) {
                    return Err(format!(
                        "'+{t}' needs +agent+switch (the switch daemon changes the threshold)"
                    ));
                }
                PcnVariant::On {
                    threshold_bytes,
                    harmonic,
                }
            } else {
                return Err(format!("unknown suffix '+{t}' (known: {SUFFIXES})"));
            };
        }
        if let Some(t) = tokens.next() {
            return Err(format!(
                "unknown suffix '+{t}' after the PCN setting (known: {SUFFIXES})"
            ));
        }
        let (cc, rest) = match s.find('[') {
            None => (s, None),
            Some(i) => {
                let inner = s[i + 1..]
                    .strip_suffix(']')
                    .ok_or("a parameter list must end with ']'")?;
                (&s[..i], Some(inner))
            }
        };
        if !KNOWN_CCS.contains(&cc) {
            return Err(format!(
                "unknown congestion control '{cc}' (known: {})",
                KNOWN_CCS.join(", ")
            ));
        }
        let mut params: Vec<(String, u32)> = Vec::new();
        if let Some(inner) = rest {
            if !cc.starts_with("mltcp") {
                return Err(format!(
                    "module parameters apply to tcp_mltcp's algorithms only, not '{cc}'"
                ));
            }
            for kv in inner.split(',') {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| format!("'{kv}' is not NAME=VALUE"))?;
                // tcp_mltcp's parameters and their ranges: the module's own table.
                let Some(spec) = params::spec(k) else {
                    let known: Vec<&str> = params::PARAMS.iter().map(|p| p.name).collect();
                    return Err(format!(
                        "unknown module parameter '{k}' (known: {})",
                        known.join(", ")
                    ));
                };
                let v: u32 = v
                    .parse()
                    .map_err(|_| format!("{k} = '{v}' is not an unsigned 32-bit integer"))?;
                spec.check(v).map_err(|e| e.to_string())?;
                if params.iter().any(|(n, _)| n == k) {
                    return Err(format!("parameter '{k}' given twice"));
                }
                params.push((k.to_string(), v));
            }
            if params.is_empty() {
                return Err("empty parameter list".into());
            }
        }
        if matches!(agent, Some(AgentMode::NicOnly | AgentMode::Switch)) && !cc.starts_with("mltcp")
        {
            return Err(format!("ccp-agent schedules flows through tcp_mltcp's CCP datapath: '{cc}' is not one of its algorithms"));
        }
        let scheduled = matches!(agent, Some(AgentMode::NicOnly | AgentMode::Switch));
        // The agent's own names (mlcc_sched::Rules::name and JobOrder::name, as agent.toml
        // spells them).
        let rules = agent_setting(
            &rules_tokens,
            "rules",
            "NAME",
            "the rule set of the agent's scheduler",
            scheduled,
            |v| v.parse::<mlcc_sched::Rules>(),
        )?;
        let job_order = agent_setting(
            &order_tokens,
            "order",
            "NAME",
            "the job order of the agent's scheduler",
            scheduled,
            |v| v.parse::<mlcc_sched::JobOrder>(),
        )?;
        let min_rate_kbps = agent_setting(
            &floor_tokens,
            "floor",
            "KBPS",
            "the floor of the agent's rates",
            scheduled,
            |v| match v.parse::<u64>() {
                Ok(k) if k > 0 => Ok(k),
                _ => Err("the floor must be a whole number of kbit/s > 0".to_string()),
            },
        )?;
        let strict_rates = agent_setting(
            &strict_tokens,
            "strict",
            "on|off",
            "the agent's strict-priority rates",
            scheduled,
            |v| match v {
                "on" => Ok(true),
                "off" => Ok(false),
                _ => Err("strict rates are 'on' or 'off'".to_string()),
            },
        )?;
        let max = mlcc_sched::MAX_CLASSES;
        let classes = agent_setting(
            &classes_tokens,
            "classes",
            "N",
            "the agent's traffic classes",
            scheduled,
            |v| match v.parse::<u8>() {
                Ok(n) if n <= max => Ok(n),
                _ => Err(format!("the classes are 0 (off) or 1..={max}")),
            },
        )?;
        let class_rates = agent_setting(
            &class_rates_tokens,
            "class_rates",
            "plan|line",
            "the rates of the agent's classed flows",
            scheduled,
            |v| v.parse::<mlcc_sched::ClassRates>(),
        )?;
        let held_flows = agent_setting(
            &held_tokens,
            "held",
            "floor|scavenger",
            "how the agent enforces held flows",
            scheduled,
            |v| v.parse::<mlcc_sched::HeldFlows>(),
        )?;
        let scavenger_target_us = agent_setting(
            &scavenger_tokens,
            "scavenger_us",
            "N",
            "the agent's scavenger target",
            scheduled,
            |v| {
                let max = mlcc_sched::MAX_SCAVENGER_TARGET_US;
                match v.parse::<u32>() {
                    Ok(n) if (1..=max).contains(&n) => Ok(n),
                    _ => Err(format!("the scavenger target is 1..={max} µs")),
                }
            },
        )?;
        let slot_ms = agent_setting(
            &slot_tokens,
            "slot_ms",
            "N",
            "the agent's slot length",
            scheduled,
            |v| match v.parse::<u64>() {
                Ok(n) if (1..=60_000).contains(&n) => Ok(n),
                _ => Err("the slot length is 1..=60000 ms".to_string()),
            },
        )?;
        Ok(Self {
            label: label.to_string(),
            cc: cc.to_string(),
            params,
            agent,
            pcn,
            sched: AgentSched {
                rules,
                job_order,
                min_rate_kbps,
                strict_rates,
                classes,
                class_rates,
                held_flows,
                scavenger_target_us,
                slot_ms,
            },
        })
    }

    /// The run's directory name: the label with `[`, `]`, `,`, `=`, `+` and `:` replaced by `_`,
    /// `-`.
    pub fn dir_name(&self) -> String {
        self.label
            .replace(['[', ','], "_")
            .replace(']', "")
            .replace(['=', '+', ':'], "-")
    }
}

/// Communication pattern of a job: the shared definition, named `ring` and `ps` in scenario
/// files. Ring all-reduce: W−1 reduce-scatter then W−1 all-gather steps to the successor.
/// Parameter server: push gradients to the PS, which broadcasts parameters back.
/// [`Paradigm::Unknown`] (the progress interface's "not told") cannot be written in a file.
pub use mltcp_job_kinds::Paradigm;

/// One host (network namespace) and its link to the switch namespace.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Host name: 1-8 characters of `[a-z0-9]`; the namespace is `te-NAME`.
    pub name: String,
    /// tbf rate of the link toward the host (the switch port's egress), in Mbit/s; absent =
    /// unshaped.
    #[serde(default, deserialize_with = "via_opt::<RateMbit, f64, _>")]
    pub rate_mbit: Option<f64>,
    /// netem one-way delay added in each direction, in milliseconds (default 0).
    #[serde(default, deserialize_with = "via::<DelayMs, f64, _>")]
    pub delay_ms: f64,
    /// netem random loss in each direction, in percent (default 0).
    #[serde(default, deserialize_with = "via::<LossPct, f64, _>")]
    pub loss_pct: f64,
    /// tbf bucket size, in bytes (default 64000: above rate/HZ up to ~500 Mbit/s at HZ=1000).
    #[serde(default, deserialize_with = "via_opt::<BurstBytes, u64, _>")]
    pub burst_bytes: Option<u64>,
    /// tbf queue limit expressed as latency, in milliseconds (default 100).
    #[serde(default, deserialize_with = "via_opt::<QueueMs, f64, _>")]
    pub queue_ms: Option<f64>,
    /// An ECN-marking qdisc under the switch port's tbf (needs `rate_mbit`); absent = the tbf's
    /// plain byte FIFO (drop-tail).
    pub ecn: Option<EcnMark>,
    /// Traffic classes on the switch port under its tbf (needs `rate_mbit`, not with `ecn`);
    /// absent = one FIFO for all traffic.
    pub classes: Option<PortClasses>,
}

/// Traffic classes on a switch port, as a datacenter switch schedules them by DSCP (IEEE
/// 802.1Qaz): the first `training` code points of the agent's map (`mlcc_sched::DEFAULT_DSCP`,
/// class 0 first) get a queue each, served among themselves by strict priority in class order;
/// together they are one group weighted 1:1 against the port's other traffic (every other
/// DSCP, one queue), so training cannot starve another tenant; either group takes the whole
/// port when the other has nothing queued. Each queue holds up to the port's buffer (rate ×
/// queue_ms + burst: a shared buffer's per-queue cap). The tc recipe is trainemu's (topo.rs).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PortClasses {
    /// Training classes served by strict priority, 1..=8 (`mlcc_sched::MAX_CLASSES`).
    pub training: u8,
}

/// ECN marking on a switch port: a child qdisc of its tbf that marks CE above a threshold
/// (DCTCP's step marking; the threshold a PCN switch daemon lowers before a burst).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "RawEcnMark")]
pub struct EcnMark {
    /// "red" (RED in ECN mode with min = threshold_kb, max one packet above, probability 1.0, so
    /// it marks every ECT packet once the averaged queue passes the threshold) or "fq_codel"
    /// (fq_codel's `ce_threshold`: CE above a sojourn time).
    pub qdisc: String,
    /// RED only: the marking threshold (queue length), in kilobytes (1000 bytes).
    pub threshold_kb: Option<f64>,
    /// fq_codel only: the CE-marking sojourn-time threshold, in microseconds.
    pub ce_threshold_us: Option<f64>,
}

/// `ecn` of a host as written: [`EcnMark`]'s fields before their rules across fields.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEcnMark {
    /// See [`EcnMark::qdisc`].
    pub qdisc: String,
    /// See [`EcnMark::threshold_kb`].
    pub threshold_kb: Option<f64>,
    /// See [`EcnMark::ce_threshold_us`].
    pub ce_threshold_us: Option<f64>,
}

/// A refusal by a rule across a table's fields: `field` (below the table) = `value`: `why`,
/// marked for [`Scenario::parse`], which puts the table's path in front.
fn table_rule(field: &str, value: impl std::fmt::Debug, why: impl std::fmt::Display) -> String {
    format!("{RULE}{TABLE_FIELD}{field}{TABLE_FIELD}{value:?}: {why}")
}

/// Separates a table rule's field from its value in serde's message.
const TABLE_FIELD: char = '\u{1e}';

impl TryFrom<RawEcnMark> for EcnMark {
    type Error = String;
    /// The qdisc is "red" (with a threshold_kb of at least one packet) or "fq_codel" (with a
    /// ce_threshold_us), and neither carries the other's field.
    fn try_from(e: RawEcnMark) -> std::result::Result<Self, String> {
        let (th, ce) = (e.threshold_kb, e.ce_threshold_us);
        // (its own field and value, the other qdisc and its field and value, own range, why)
        let (own, own_v, other_qdisc, other, other_v, lo, hi, why) = match e.qdisc.as_str() {
            "red" => (
                "threshold_kb",
                th,
                "fq_codel",
                "ce_threshold_us",
                ce,
                1.5,
                100_000.0,
                "must be in 1.5..=100000 kB (at least one packet)",
            ),
            "fq_codel" => (
                "ce_threshold_us",
                ce,
                "red",
                "threshold_kb",
                th,
                1.0,
                10_000_000.0,
                "must be in 1..=10000000 µs",
            ),
            q => return Err(table_rule("qdisc", q, "must be \"red\" or \"fq_codel\"")),
        };
        let q = &e.qdisc;
        match (own_v, other_v) {
            (None, _) => return Err(table_rule(own, "", format!("qdisc {q:?} needs a {own}"))),
            (_, Some(o)) => {
                return Err(table_rule(
                    other,
                    o,
                    format!("belongs to qdisc {other_qdisc:?}, not {q:?}"),
                ))
            }
            (Some(v), None) if !within(v, lo, hi) => return Err(table_rule(own, v, why)),
            _ => {}
        }
        Ok(EcnMark {
            qdisc: e.qdisc,
            threshold_kb: th,
            ce_threshold_us: ce,
        })
    }
}

/// A background (non-training) bulk TCP transfer during every run of all jobs together, with its
/// own congestion control (PCN's background traffic; its throughput lost against the
/// background-only baseline run is the overhead metric).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Background {
    /// Flow name: 1-16 characters of `[A-Za-z0-9_-]`, unique among jobs and background flows.
    pub name: String,
    /// Sending host.
    pub from: String,
    /// Receiving host.
    pub to: String,
    /// Congestion control of both ends (listener included, so "dctcp" negotiates ECN).
    pub cc: String,
    /// Start, in milliseconds after all workers are connected (as jobs' `start_offset_ms`;
    /// default 0).
    #[serde(default, deserialize_with = "via::<OffsetMs, f64, _>")]
    pub start_ms: f64,
    /// Stop, in milliseconds after the same moment; absent = when the last job finishes (in the
    /// baseline run: `start_ms` + `background_baseline_s`).
    pub stop_ms: Option<f64>,
}

/// Topology: a star of hosts around one switch namespace (`te-sw`, a router).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// The hosts; each gets 10.77.N.1/24 on its link, the switch 10.77.N.254.
    pub hosts: Vec<Host>,
    /// The host whose link is the shared bottleneck (plots show flows crossing it).
    pub bottleneck: String,
    /// Which direction of the bottleneck link the plots show: "ingress" (flows arriving at the
    /// host, through the rate-limited switch port; default) or "egress" (flows leaving it).
    #[serde(default = "default_direction")]
    pub bottleneck_direction: String,
    /// Whether the hosts hand their network GSO super-packets (up to 64 kB, one skb, as Linux's
    /// TCP builds them for a veth; default true, every scenario before 2026-11-28). `false` caps
    /// each host's `eth0` at one-MTU packets (`gso_max_size 1514`), so every switch port's qdisc
    /// sees the packets a real switch sees. It matters for ECN ports: a marking queue that marks
    /// or drops whole 64 kB super-packets locked one of two DCTCP flows at a 2-segment window
    /// (0.954 / 0.046 of the port over 3 s, both flows `dctcp`), where one-MTU packets split it
    /// 0.512 / 0.488 (docs/results/mltcp.md, "MLTCP on ECN ports"). Not serialized when true, so
    /// earlier scenarios keep their fingerprints.
    #[serde(default = "default_gso", skip_serializing_if = "is_true")]
    pub gso: bool,
}

fn default_direction() -> String {
    "ingress".into()
}

fn default_gso() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

impl Topology {
    /// Whether a flow from `src_host` to `dst_host` crosses the bottleneck link in the direction
    /// the results show: into the bottleneck host for "ingress", out of it for "egress".
    pub fn crosses_bottleneck(&self, src_host: &str, dst_host: &str) -> bool {
        let host = if self.bottleneck_direction == "ingress" {
            dst_host
        } else {
            src_host
        };
        host == self.bottleneck
    }
}

/// TCP sysctls set in every host namespace (absent = Linux's default kept).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Sysctls {
    /// net.ipv4.tcp_slow_start_after_idle (0 or 1; Linux default 1).
    #[serde(default, deserialize_with = "via_opt::<Flag, u8, _>")]
    pub tcp_slow_start_after_idle: Option<u8>,
    /// net.ipv4.tcp_no_metrics_save (0 or 1; Linux default 0).
    #[serde(default, deserialize_with = "via_opt::<Flag, u8, _>")]
    pub tcp_no_metrics_save: Option<u8>,
    /// net.ipv4.tcp_ecn (0, 1 or 2; Linux default 2).
    #[serde(default, deserialize_with = "via_opt::<TcpEcn, u8, _>")]
    pub tcp_ecn: Option<u8>,
    /// net.ipv4.tcp_wmem: "MIN DEFAULT MAX" in bytes.
    pub tcp_wmem: Option<String>,
    /// net.ipv4.tcp_rmem: "MIN DEFAULT MAX" in bytes.
    pub tcp_rmem: Option<String>,
}

impl Sysctls {
    /// The (key, value) pairs to write, keys as `net.ipv4.NAME`.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let mut v = Vec::new();
        let mut add = |k: &str, val: Option<String>| {
            if let Some(val) = val {
                v.push((format!("net.ipv4.{k}"), val));
            }
        };
        add(
            "tcp_slow_start_after_idle",
            self.tcp_slow_start_after_idle.map(|x| x.to_string()),
        );
        add(
            "tcp_no_metrics_save",
            self.tcp_no_metrics_save.map(|x| x.to_string()),
        );
        add("tcp_ecn", self.tcp_ecn.map(|x| x.to_string()));
        add("tcp_wmem", self.tcp_wmem.clone());
        add("tcp_rmem", self.tcp_rmem.clone());
        v
    }
}

/// One training job.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    /// Job name: 1-16 characters of `[A-Za-z0-9_-]`, unique in the scenario.
    pub name: String,
    /// Key of a profile in models.toml.
    pub model: String,
    /// "ring" (all-reduce) or "ps" (parameter server).
    pub paradigm: Paradigm,
    /// Placement: worker i runs on host `workers[i]`; W = len, W >= 2.
    pub workers: Vec<String>,
    /// Parameter-server host (paradigm "ps" only).
    pub ps: Option<String>,
    /// Iterations to run (default: the scenario's `iterations`).
    #[serde(default, deserialize_with = "via_opt::<Iterations, u32, _>")]
    pub iterations: Option<u32>,
    /// Delay of the job's first iteration after all workers of the run are connected, in
    /// milliseconds.
    #[serde(default, deserialize_with = "via::<OffsetMs, f64, _>")]
    pub start_offset_ms: f64,
    /// Overrides the model's compute time, in milliseconds (before `time_scale`).
    #[serde(default, deserialize_with = "via_opt::<ComputeMs, f64, _>")]
    pub compute_ms: Option<f64>,
    /// Overrides the model's byte scale factor.
    #[serde(default, deserialize_with = "via_opt::<Scale, f64, _>")]
    pub scale: Option<f64>,
    /// Stretches the job in time: multiplies both compute time and gradient bytes (default 1).
    #[serde(default = "one", deserialize_with = "via::<TimeScale, f64, _>")]
    pub time_scale: f64,
    /// This job's compute-time jitter, replacing the scenario's `[jitter] compute`
    /// (`{ dist = "none" }` turns it off for this job).
    pub compute_jitter: Option<ComputeJitter>,
}

fn one() -> f64 {
    1.0
}

/// A scenario file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Scenario name: 1-32 characters of `[A-Za-z0-9_-]`; names its results directory.
    pub name: String,
    /// One line on what the scenario shows.
    #[serde(default)]
    pub description: String,
    /// Default iterations per job.
    #[serde(deserialize_with = "via::<Iterations, u32, _>")]
    pub iterations: u32,
    /// Iterations excluded from means at the start of each run (slow start, connection set-up).
    #[serde(default = "default_warmup")]
    pub warmup_iterations: u32,
    /// Iterations of each solo run (each job alone, to measure its communication time M).
    #[serde(
        default = "default_solo",
        deserialize_with = "via::<SoloIterations, u32, _>"
    )]
    pub solo_iterations: u32,
    /// Congestion control of the solo runs.
    #[serde(default = "default_solo_cc")]
    pub solo_cc: String,
    /// Congestion controls to compare, one run each (all jobs together); an entry may carry
    /// tcp_mltcp module parameters for its run, `mltcp[slope_fx=3072,intercept_fx=512]`, and a
    /// `+agent` / `+agent+switch` suffix for a run scheduled by ccp-agent ([`CcVariant`]).
    pub ccs: Vec<String>,
    /// Throughput sampling period, in milliseconds (at most 20).
    #[serde(
        default = "default_sample_ms",
        deserialize_with = "via::<SampleMs, f64, _>"
    )]
    pub sample_ms: f64,
    /// The network.
    pub topology: Topology,
    /// TCP sysctls for every host namespace.
    #[serde(default)]
    pub sysctl: Sysctls,
    /// The jobs.
    pub jobs: Vec<Job>,
    /// Background flows (`[[background]]`), run beside the jobs in every run of all jobs together
    /// and alone in the `background-only` baseline run.
    #[serde(default)]
    pub background: Vec<Background>,
    /// Length of the baseline run of the background flows without a stop_ms, in seconds
    /// (default 10).
    #[serde(
        default = "default_baseline_s",
        deserialize_with = "via::<BaselineS, f64, _>"
    )]
    pub background_baseline_s: f64,
    /// PCN: before each communication phase every worker makes the progress interface's bounded
    /// `before_burst` wait, at most this long, in milliseconds (absent or 0 = no call; with no
    /// agent attached the call returns at once). `trainemu run --before-burst-ms` overrides it.
    #[serde(default, deserialize_with = "via_opt::<BeforeBurstMs, f64, _>")]
    pub before_burst_ms: Option<f64>,
    /// Seeded randomness (`[jitter]`): compute-time jitter and the width of the seeded start
    /// offsets ([`JitterSpec`]; absent = the defaults).
    #[serde(default)]
    pub jitter: JitterSpec,
}

fn default_warmup() -> u32 {
    2
}
fn default_solo() -> u32 {
    15
}
fn default_solo_cc() -> String {
    "cubic".into()
}
fn default_sample_ms() -> f64 {
    10.0
}
fn default_baseline_s() -> f64 {
    10.0
}

/// A job with its profile resolved into the numbers the emulator runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobPlan {
    /// Job name.
    pub name: String,
    /// Model key.
    pub model: String,
    /// Paradigm.
    pub paradigm: Paradigm,
    /// Worker hosts (index = rank).
    pub workers: Vec<String>,
    /// PS host, for paradigm "ps".
    pub ps: Option<String>,
    /// Iterations to run.
    pub iterations: u32,
    /// Start offset, in milliseconds.
    pub start_offset_ms: f64,
    /// Compute phase, in milliseconds.
    pub compute_ms: f64,
    /// Gradient bytes G per iteration (ring: each worker sends ~2(W−1)/W·G; PS: each worker
    /// pushes G and receives G).
    pub gradient_bytes: u64,
    /// Index of the job in the scenario's job list: with the seed, it selects the job's random
    /// streams ([`crate::seeds`]), also when the job runs alone.
    #[serde(default)]
    pub index: usize,
    /// Compute-time jitter (draws around `compute_ms`; absent in old meta.json files: none).
    #[serde(default = "no_jitter")]
    pub jitter: ComputeJitter,
}

fn no_jitter() -> ComputeJitter {
    ComputeJitter::NONE
}

fn valid_name(s: &str, max: usize, extra: &str) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || extra.contains(c))
}

impl Scenario {
    /// Reads `path`, or, when it does not exist and its file name is one of
    /// [`BUILTIN_SCENARIOS`], the built-in copy. Returns the scenario and its text.
    pub fn load(path: &Path, models: &ModelFile) -> Result<(Scenario, String)> {
        let file = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let base = path.file_name().and_then(|s| s.to_str()).unwrap_or("");
                match BUILTIN_SCENARIOS.iter().find(|(n, _)| *n == base) {
                    Some((_, t)) => {
                        tracing::warn!(
                            "{file} not found here: using the copy of {base} built into trainemu"
                        );
                        t.to_string()
                    }
                    None => bail!("{file}: cannot read: {e}"),
                }
            }
            Err(e) => return Err(e).with_context(|| format!("{file}: cannot read")),
        };
        let s = Scenario::parse(&text, &file, models)?;
        Ok((s, text))
    }

    /// Parses and validates scenario text; `file` names it in errors.
    pub fn parse(text: &str, file: &str, models: &ModelFile) -> Result<Scenario> {
        // A value's own rule (the newtypes above) refuses it while deserializing: named by its
        // TOML path; any other error as toml words it (position, snippet).
        let de = toml::Deserializer::parse(text).map_err(|e| anyhow!("{file}: {e}"))?;
        let s: Scenario = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            match e.inner().message().strip_prefix(RULE) {
                Some(rest) => match rest.strip_prefix(TABLE_FIELD) {
                    // A rule across a table's fields: the field below the table.
                    Some(rest) => {
                        let (field, rest) = rest.split_once(TABLE_FIELD).unwrap_or(("", rest));
                        anyhow!("{file}: {path}.{field} = {rest}")
                    }
                    None => anyhow!("{file}: {path} = {rest}"),
                },
                None => match toml::from_str::<Scenario>(text) {
                    Err(e) => anyhow!("{file}: {e}"),
                    Ok(_) => anyhow!("{file}: {}", e.into_inner()),
                },
            }
        })?;
        s.validate(file, models)?;
        Ok(s)
    }

    /// Checks what crosses fields (names, hosts, cross references, the ECN qdisc's fields, the
    /// models); each value's own range was checked while parsing (the rule newtypes). The error
    /// names file, field and value.
    pub fn validate(&self, file: &str, models: &ModelFile) -> Result<()> {
        macro_rules! refuse {
            ($field:expr, $val:expr, $why:expr) => {
                bail!("{}: {} = {:?}: {}", file, $field, $val, $why)
            };
        }
        if !valid_name(&self.name, 32, "_-ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
            refuse!(
                "name",
                self.name,
                "must be 1-32 characters of [A-Za-z0-9_-]"
            );
        }
        if !KNOWN_CCS.contains(&self.solo_cc.as_str()) {
            refuse!(
                "solo_cc",
                self.solo_cc,
                format!(
                    "unknown congestion control (known: {})",
                    KNOWN_CCS.join(", ")
                )
            );
        }
        if self.ccs.is_empty() {
            refuse!("ccs", self.ccs, "must name at least one congestion control");
        }
        let mut seen = BTreeSet::new();
        for (i, cc) in self.ccs.iter().enumerate() {
            if let Err(why) = CcVariant::parse(cc) {
                refuse!(format!("ccs[{i}]"), cc, why);
            }
            if !seen.insert(cc) {
                refuse!(format!("ccs[{i}]"), cc, "listed twice");
            }
        }
        // Topology.
        let t = &self.topology;
        if t.hosts.is_empty() || t.hosts.len() > 200 {
            refuse!("topology.hosts", t.hosts.len(), "must list 1..=200 hosts");
        }
        let mut hosts = BTreeSet::new();
        for (i, h) in t.hosts.iter().enumerate() {
            let f = |x: &str| format!("topology.hosts[{i}].{x}");
            if !valid_name(&h.name, 8, "") {
                refuse!(f("name"), h.name, "must be 1-8 characters of [a-z0-9]");
            }
            if h.name == "sw" {
                refuse!(f("name"), h.name, "\"sw\" is the switch namespace");
            }
            if !hosts.insert(h.name.clone()) {
                refuse!(f("name"), h.name, "duplicate host name");
            }
            if let Some(e) = &h.ecn {
                // The qdisc's own fields were checked while parsing (EcnMark's try_from);
                // what crosses into the host is checked here.
                if h.rate_mbit.is_none() {
                    refuse!(
                        f("ecn"),
                        e.qdisc,
                        "the ECN qdisc sits under the port's tbf: set rate_mbit too"
                    );
                }
            }
            if let Some(c) = &h.classes {
                let max = mlcc_sched::MAX_CLASSES;
                if !(1..=max).contains(&c.training) {
                    refuse!(
                        f("classes.training"),
                        c.training,
                        format!("must be 1..={max} traffic classes")
                    );
                }
                if h.rate_mbit.is_none() {
                    refuse!(
                        f("classes.training"),
                        c.training,
                        "the classes sit under the port's tbf: set rate_mbit too"
                    );
                }
                if h.ecn.is_some() {
                    refuse!(
                        f("classes.training"),
                        c.training,
                        "a port has either ECN marking or classes, not both"
                    );
                }
            }
        }
        if !hosts.contains(&t.bottleneck) {
            refuse!(
                "topology.bottleneck",
                t.bottleneck,
                format!("not a host of topology.hosts ({})", join(&hosts))
            );
        }
        if t.bottleneck_direction != "egress" && t.bottleneck_direction != "ingress" {
            refuse!(
                "topology.bottleneck_direction",
                t.bottleneck_direction,
                "must be \"egress\" or \"ingress\""
            );
        }
        // Sysctls.
        let sc = &self.sysctl;
        for (k, v) in [("tcp_wmem", &sc.tcp_wmem), ("tcp_rmem", &sc.tcp_rmem)] {
            if let Some(v) = v {
                let n: Vec<_> = v.split_whitespace().map(|x| x.parse::<u64>()).collect();
                if n.len() != 3 || n.iter().any(|x| x.is_err()) {
                    refuse!(
                        format!("sysctl.{k}"),
                        v,
                        "must be three byte counts \"MIN DEFAULT MAX\""
                    );
                }
            }
        }
        // Jobs.
        if self.jobs.is_empty() {
            refuse!(
                "jobs",
                self.jobs.len(),
                "must list at least one job ([[jobs]])"
            );
        }
        let mut names = BTreeSet::new();
        for (i, j) in self.jobs.iter().enumerate() {
            let f = |x: &str| format!("jobs[{i}].{x}");
            if !valid_name(&j.name, 16, "_-ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
                refuse!(
                    f("name"),
                    j.name,
                    "must be 1-16 characters of [A-Za-z0-9_-]"
                );
            }
            if !names.insert(j.name.clone()) {
                refuse!(f("name"), j.name, "duplicate job name");
            }
            if !models.models.contains_key(&j.model) {
                let known: BTreeSet<String> = models.models.keys().cloned().collect();
                refuse!(
                    f("model"),
                    j.model,
                    format!("not a model of models.toml ({})", join(&known))
                );
            }
            if j.workers.len() < 2 || j.workers.len() > 64 {
                refuse!(f("workers"), j.workers, "a job needs 2..=64 workers");
            }
            for (k, w) in j.workers.iter().enumerate() {
                if !hosts.contains(w) {
                    refuse!(
                        format!("jobs[{i}].workers[{k}]"),
                        w,
                        format!("not a host of topology.hosts ({})", join(&hosts))
                    );
                }
            }
            match (j.paradigm, &j.ps) {
                (Paradigm::ParameterServer, None) => {
                    refuse!(f("ps"), "", "paradigm \"ps\" needs a ps host")
                }
                (Paradigm::ParameterServer, Some(p)) if !hosts.contains(p) => {
                    refuse!(
                        f("ps"),
                        p,
                        format!("not a host of topology.hosts ({})", join(&hosts))
                    )
                }
                (Paradigm::Ring, Some(p)) => {
                    refuse!(f("ps"), p, "only paradigm \"ps\" has a ps host")
                }
                _ => {}
            }
            let plan = self.plan_job(i, j, models);
            if plan.gradient_bytes < plan.workers.len() as u64 {
                refuse!(
                    f("scale"),
                    j.scale.unwrap_or(models.models[&j.model].scale),
                    format!(
                        "gives a gradient of {} bytes, fewer than the {} workers",
                        plan.gradient_bytes,
                        plan.workers.len()
                    )
                );
            }
            if plan.gradient_bytes > 4 << 30 {
                refuse!(
                    f("scale"),
                    j.scale.unwrap_or(models.models[&j.model].scale),
                    format!(
                        "gives a gradient of {} bytes (> 4 GiB)",
                        plan.gradient_bytes
                    )
                );
            }
        }
        // Background flows.
        for (i, b) in self.background.iter().enumerate() {
            let f = |x: &str| format!("background[{i}].{x}");
            if !valid_name(&b.name, 16, "_-ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
                refuse!(
                    f("name"),
                    b.name,
                    "must be 1-16 characters of [A-Za-z0-9_-]"
                );
            }
            if !names.insert(b.name.clone()) {
                refuse!(
                    f("name"),
                    b.name,
                    "duplicate name (jobs and background flows share names)"
                );
            }
            for (k, h) in [("from", &b.from), ("to", &b.to)] {
                if !hosts.contains(h) {
                    refuse!(
                        f(k),
                        h,
                        format!("not a host of topology.hosts ({})", join(&hosts))
                    );
                }
            }
            if b.from == b.to {
                refuse!(f("to"), b.to, "a background flow needs two different hosts");
            }
            if !KNOWN_CCS.contains(&b.cc.as_str()) {
                refuse!(
                    f("cc"),
                    b.cc,
                    format!(
                        "unknown congestion control (known: {})",
                        KNOWN_CCS.join(", ")
                    )
                );
            }
            if let Some(stop) = b.stop_ms {
                if !(stop.is_finite() && stop > b.start_ms && stop <= 3_600_000.0) {
                    refuse!(
                        f("stop_ms"),
                        stop,
                        format!(
                            "must be after start_ms ({}) and at most 3600000 ms",
                            b.start_ms
                        )
                    );
                }
            }
        }
        if let Err(e) = self.jitter.compute.check() {
            refuse!("jitter.compute.cv", self.jitter.compute.cv, e);
        }
        if let Some(w) = self.jitter.start_ms {
            if !(w.is_finite() && (0.0..=3_600_000.0).contains(&w)) {
                refuse!("jitter.start_ms", w, "must be in 0..=3600000 ms");
            }
        }
        for (i, j) in self.jobs.iter().enumerate() {
            if let Some(Err(e)) = j.compute_jitter.map(|c| c.check()) {
                refuse!(
                    format!("jobs[{i}].compute_jitter.cv"),
                    j.compute_jitter.map(|c| c.cv).unwrap_or_default(),
                    e
                );
            }
        }
        Ok(())
    }

    /// The `before_burst` timeout of the workers, when they make the call.
    pub fn before_burst(&self) -> Option<std::time::Duration> {
        self.before_burst_ms
            .filter(|&m| m > 0.0)
            .map(|m| std::time::Duration::from_micros((m * 1000.0).round() as u64))
    }

    fn plan_job(&self, index: usize, j: &Job, models: &ModelFile) -> JobPlan {
        let m = &models.models[&j.model];
        let compute = j.compute_ms.unwrap_or(m.compute_ms) * j.time_scale;
        let bytes = (m.bytes_per_iteration as f64 * j.scale.unwrap_or(m.scale) * j.time_scale)
            .round() as u64;
        JobPlan {
            name: j.name.clone(),
            model: j.model.clone(),
            paradigm: j.paradigm,
            workers: j.workers.clone(),
            ps: j.ps.clone(),
            iterations: j.iterations.unwrap_or(self.iterations),
            start_offset_ms: j.start_offset_ms,
            compute_ms: compute,
            gradient_bytes: bytes,
            index,
            jitter: j.compute_jitter.unwrap_or(self.jitter.compute),
        }
    }

    /// Every job resolved against `models` (call after [`Scenario::validate`]), with the
    /// scenario's fixed start offsets.
    pub fn plans(&self, models: &ModelFile) -> Vec<JobPlan> {
        self.jobs
            .iter()
            .enumerate()
            .map(|(i, j)| self.plan_job(i, j, models))
            .collect()
    }

    /// Width of the seeded extra start offsets, ms: `[jitter] start_ms`, by default the
    /// smallest compute time of the jobs in `plans`.
    pub fn start_width_ms(&self, plans: &[JobPlan]) -> f64 {
        self.jitter.start_ms.unwrap_or_else(|| {
            plans
                .iter()
                .map(|p| p.compute_ms)
                .fold(f64::INFINITY, f64::min)
                .clamp(0.0, 3_600_000.0)
        })
    }

    /// The plans of a run under `seed`: every job's start offset is its fixed `start_offset_ms`
    /// plus its seeded extra offset ([`crate::seeds::seeded_offset_ms`]; none under seed 1).
    pub fn seeded_plans(&self, models: &ModelFile, seed: u64) -> Vec<JobPlan> {
        let mut plans = self.plans(models);
        let width = self.start_width_ms(&plans);
        for p in &mut plans {
            p.start_offset_ms += crate::seeds::seeded_offset_ms(seed, p.index, width);
        }
        plans
    }
}

fn join(s: &BTreeSet<String>) -> String {
    s.iter().cloned().collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
iterations = 5
ccs = ["cubic", "reno"]
[topology]
bottleneck = "h1"
hosts = [ { name = "h1", rate_mbit = 100, delay_ms = 2 }, { name = "h2" } ]
[[jobs]]
name = "A"
model = "vgg16"
paradigm = "ring"
workers = ["h1", "h2"]
"#;

    /// A scenario from text with the built-in models (also used by other modules' tests).
    pub(crate) fn parse(t: &str) -> Result<Scenario> {
        Scenario::parse(t, "x.toml", &ModelFile::builtin())
    }

    #[test]
    fn builtin_files_are_valid() {
        // The built-in model table itself is checked by dnn-profiles' own tests.
        let m = ModelFile::builtin();
        for (n, t) in BUILTIN_SCENARIOS {
            Scenario::parse(t, n, &m).unwrap();
        }
        parse(GOOD).unwrap();
    }

    #[test]
    fn every_scenario_file_parses() {
        let m = ModelFile::builtin();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.extension().is_some_and(|e| e == "toml") && name != "models.toml" {
                let text = std::fs::read_to_string(&p).unwrap();
                Scenario::parse(&text, &name, &m).unwrap_or_else(|e| panic!("{e:#}"));
                n += 1;
            }
        }
        assert!(n >= 4, "{n} scenario files in {}", dir.display());
    }

    fn err_of(t: &str) -> String {
        format!("{:#}", parse(t).unwrap_err())
    }

    #[test]
    fn gso_defaults_on_and_is_serialized_only_when_off() {
        let on = parse(GOOD).unwrap();
        assert!(on.topology.gso);
        let text = toml::to_string(&on.topology).unwrap();
        assert!(!text.contains("gso"), "{text}");
        let off = parse(&GOOD.replace("bottleneck = \"h1\"", "bottleneck = \"h1\"\ngso = false"))
            .unwrap();
        assert!(!off.topology.gso);
        assert!(toml::to_string(&off.topology)
            .unwrap()
            .contains("gso = false"));
        let e = err_of(&GOOD.replace("bottleneck = \"h1\"", "bottleneck = \"h1\"\ngso = 1"));
        assert!(e.contains("gso"), "{e}");
    }

    #[test]
    fn refuses_unknown_host_naming_field_and_value() {
        let e = err_of(&GOOD.replace(r#"workers = ["h1", "h2"]"#, r#"workers = ["h1", "h9"]"#));
        assert!(
            e.contains("x.toml") && e.contains("jobs[0].workers[1]") && e.contains("h9"),
            "{e}"
        );
    }

    #[test]
    fn a_value_refused_by_its_rule_is_named_by_its_path() {
        let e = err_of(&GOOD.replace("delay_ms = 2", "delay_ms = -2"));
        assert_eq!(
            e,
            "x.toml: topology.hosts[0].delay_ms = -2.0: must be in 0..=10000 ms"
        );
        let e = err_of(&ECN.replace("threshold_kb = 30", "threshold_kb = 0.5"));
        assert_eq!(
            e,
            "x.toml: topology.hosts[1].ecn.threshold_kb = 0.5: must be in 1.5..=100000 kB (at least one packet)"
        );
    }

    #[test]
    fn refuses_unknown_field() {
        let e = err_of(&GOOD.replace("iterations = 5", "iterations = 5\nitertions = 3"));
        assert!(e.contains("x.toml") && e.contains("itertions"), "{e}");
    }

    #[test]
    fn refuses_bad_values() {
        for (from, to, field, val) in [
            (
                "ccs = [\"cubic\", \"reno\"]",
                "ccs = [\"cubic\", \"newreno\"]",
                "ccs[1]",
                "newreno",
            ),
            (
                "model = \"vgg16\"",
                "model = \"vgg17\"",
                "jobs[0].model",
                "vgg17",
            ),
            (
                "bottleneck = \"h1\"",
                "bottleneck = \"h3\"",
                "topology.bottleneck",
                "h3",
            ),
            (
                "delay_ms = 2",
                "delay_ms = -2",
                "topology.hosts[0].delay_ms",
                "-2",
            ),
            ("iterations = 5", "iterations = 0", "iterations", "0"),
            (
                "workers = [\"h1\", \"h2\"]",
                "workers = [\"h1\"]",
                "jobs[0].workers",
                "h1",
            ),
            ("paradigm = \"ring\"", "paradigm = \"ps\"", "jobs[0].ps", ""),
        ] {
            let t = GOOD.replace(from, to);
            assert_ne!(t, GOOD, "{from}");
            let e = err_of(&t);
            assert!(e.contains(field) && e.contains(val), "{field} {val}: {e}");
        }
        let e = err_of(&GOOD.replace("paradigm = \"ring\"", "paradigm = \"tree\""));
        assert!(e.contains("tree") && e.contains("paradigm"), "{e}");
    }

    #[test]
    fn cc_variants_parse_and_refuse() {
        let v = CcVariant::parse("mltcp[slope_fx=3072,intercept_fx=512]").unwrap();
        assert_eq!(v.cc, "mltcp");
        assert_eq!(
            v.params,
            vec![
                ("slope_fx".to_string(), 3072),
                ("intercept_fx".to_string(), 512)
            ]
        );
        assert_eq!(v.dir_name(), "mltcp_slope_fx-3072_intercept_fx-512");
        assert_eq!(CcVariant::parse("cubic").unwrap().params, vec![]);
        assert_eq!(CcVariant::parse("cubic").unwrap().agent, None);
        let v = CcVariant::parse("mltcp[slope_fx=3072]+agent").unwrap();
        assert_eq!(
            (v.cc.as_str(), v.agent),
            ("mltcp", Some(AgentMode::NicOnly))
        );
        assert_eq!(v.params, vec![("slope_fx".to_string(), 3072)]);
        assert_eq!(v.dir_name(), "mltcp_slope_fx-3072-agent");
        let v = CcVariant::parse("mltcp_dctcp+agent+switch").unwrap();
        assert_eq!(
            (v.cc.as_str(), v.agent, v.pcn),
            ("mltcp_dctcp", Some(AgentMode::Switch), PcnVariant::Default)
        );
        let v = CcVariant::parse("mltcp_dctcp+agent+switch+nopcn").unwrap();
        assert_eq!((v.agent, v.pcn), (Some(AgentMode::Switch), PcnVariant::Off));
        let v = CcVariant::parse("mltcp_dctcp+agent+nopcn").unwrap();
        assert_eq!(
            (v.agent, v.pcn),
            (Some(AgentMode::NicOnly), PcnVariant::Off)
        );
        let v = CcVariant::parse("mltcp_dctcp+agent+switch+pcn=6000").unwrap();
        assert_eq!(
            v.pcn,
            PcnVariant::On {
                threshold_bytes: 6000,
                harmonic: false
            }
        );
        let v = CcVariant::parse("mltcp_dctcp+agent+switch+pcn=6000:harmonic").unwrap();
        assert_eq!(
            v.pcn,
            PcnVariant::On {
                threshold_bytes: 6000,
                harmonic: true
            }
        );
        assert_eq!(v.dir_name(), "mltcp_dctcp-agent-switch-pcn-6000-harmonic");
        let v = CcVariant::parse("dctcp+pcn").unwrap();
        assert_eq!(
            (v.cc.as_str(), v.agent, v.pcn),
            ("dctcp", Some(AgentMode::PcnOnly), PcnVariant::Default)
        );
        let v = CcVariant::parse("mltcp_dctcp+pcn=4500:harmonic").unwrap();
        assert_eq!(
            (v.agent, v.pcn),
            (
                Some(AgentMode::PcnOnly),
                PcnVariant::On {
                    threshold_bytes: 4500,
                    harmonic: true
                }
            )
        );
        let v = CcVariant::parse("mltcp+agent+rules=interleave").unwrap();
        assert_eq!(
            (v.agent, v.pcn, v.sched.rules),
            (
                Some(AgentMode::NicOnly),
                PcnVariant::Default,
                Some(mlcc_sched::Rules::Interleave)
            )
        );
        assert_eq!(v.dir_name(), "mltcp-agent-rules-interleave");
        let v = CcVariant::parse("mltcp+agent+switch+rules=mlcc+nopcn").unwrap();
        assert_eq!(
            (v.agent, v.pcn, v.sched.rules),
            (
                Some(AgentMode::Switch),
                PcnVariant::Off,
                Some(mlcc_sched::Rules::Mlcc)
            )
        );
        assert_eq!(CcVariant::parse("mltcp+agent").unwrap().sched.rules, None);
        let v = CcVariant::parse("mltcp+agent+rules=priority+order=earliest_deadline").unwrap();
        assert_eq!(
            (v.sched.rules, v.sched.job_order),
            (
                Some(mlcc_sched::Rules::Priority),
                Some(mlcc_sched::JobOrder::EarliestDeadline)
            )
        );
        assert_eq!(
            v.dir_name(),
            "mltcp-agent-rules-priority-order-earliest_deadline"
        );
        assert_eq!(
            CcVariant::parse("mltcp+agent").unwrap().sched.job_order,
            None
        );
        let v = CcVariant::parse("mltcp+agent+rules=priority+floor=5000").unwrap();
        assert_eq!(v.sched.min_rate_kbps, Some(5000));
        assert_eq!(v.dir_name(), "mltcp-agent-rules-priority-floor-5000");
        assert_eq!(
            CcVariant::parse("mltcp+agent").unwrap().sched.min_rate_kbps,
            None
        );
        let v = CcVariant::parse("mltcp+agent+rules=priority+strict=on").unwrap();
        assert_eq!(v.sched.strict_rates, Some(true));
        assert_eq!(v.dir_name(), "mltcp-agent-rules-priority-strict-on");
        assert_eq!(
            CcVariant::parse("mltcp+agent+strict=off")
                .unwrap()
                .sched
                .strict_rates,
            Some(false)
        );
        assert_eq!(
            CcVariant::parse("mltcp+agent").unwrap().sched.strict_rates,
            None
        );
        let v = CcVariant::parse("mltcp+agent+rules=priority+classes=4+class_rates=line").unwrap();
        assert_eq!(
            (v.sched.classes, v.sched.class_rates),
            (Some(4), Some(mlcc_sched::ClassRates::Line))
        );
        assert_eq!(
            v.dir_name(),
            "mltcp-agent-rules-priority-classes-4-class_rates-line"
        );
        let plain = CcVariant::parse("mltcp+agent").unwrap().sched;
        assert_eq!((plain.classes, plain.class_rates), (None, None));
        assert_eq!((plain.held_flows, plain.scavenger_target_us), (None, None));
        let v =
            CcVariant::parse("mltcp+agent+rules=priority+held=scavenger+scavenger_us=500").unwrap();
        assert_eq!(
            (v.sched.held_flows, v.sched.scavenger_target_us),
            (Some(mlcc_sched::HeldFlows::Scavenger), Some(500))
        );
        assert_eq!(
            v.dir_name(),
            "mltcp-agent-rules-priority-held-scavenger-scavenger_us-500"
        );
        let v = CcVariant::parse("mltcp+agent+slot_ms=20").unwrap();
        assert_eq!((v.sched.slot_ms, plain.slot_ms), (Some(20), None));
        assert_eq!(v.dir_name(), "mltcp-agent-slot_ms-20");
        for (bad, why) in [
            ("mltcp+slot_ms=20", "needs +agent or +agent+switch"),
            ("mltcp+agent+slot_ms=0", "1..=60000"),
            ("mltcp+agent+slot_ms=x", "1..=60000"),
            ("mltcp+agent+slot_ms=20+slot_ms=30", "more than once"),
            ("mltcp+held=scavenger", "needs +agent or +agent+switch"),
            ("mltcp+agent+held=ledbat", "must be one of \"floor\""),
            ("mltcp+agent+scavenger_us=0", "1..=100000"),
            ("mltcp+agent+scavenger_us=100001", "1..=100000"),
            ("mltcp+agent+held=floor+held=floor", "more than once"),
            ("mltcp+classes=4", "needs +agent or +agent+switch"),
            ("mltcp+agent+classes=9", "0 (off) or 1..=8"),
            ("mltcp+agent+classes=x", "0 (off) or 1..=8"),
            ("mltcp+agent+classes=1+classes=2", "more than once"),
            ("mltcp+class_rates=line", "needs +agent or +agent+switch"),
            ("mltcp+agent+class_rates=fast", "must be one of \"plan\""),
            ("mltcp+order=first_come", "needs +agent or +agent+switch"),
            ("mltcp+agent+order=lifo", "must be one of \"first_come\""),
            (
                "mltcp+agent+order=first_come+order=first_come",
                "more than once",
            ),
            ("mltcp+rules=mlcc", "needs +agent or +agent+switch"),
            ("mltcp+floor=5000", "needs +agent or +agent+switch"),
            ("mltcp+agent+floor=0", "whole number of kbit/s > 0"),
            ("mltcp+agent+floor=fast", "whole number of kbit/s > 0"),
            ("mltcp+agent+floor=1+floor=2", "more than once"),
            ("mltcp+strict=on", "needs +agent or +agent+switch"),
            ("mltcp+agent+strict=yes", "'on' or 'off'"),
            ("mltcp+agent+strict=on+strict=off", "more than once"),
            ("dctcp+pcn+rules=mlcc", "needs +agent or +agent+switch"),
            ("mltcp+agent+rules=fifo", "must be one of \"mlcc\""),
            ("mltcp+agent+rules=mlcc+rules=mlcc", "more than once"),
            ("cubic+agent", "not one of its algorithms"),
            ("mltcp+switch", "unknown suffix '+switch'"),
            ("mltcp+agent+", "unknown suffix '+'"),
            ("mltcp+agent+pcn=6000", "needs +agent+switch"),
            ("mltcp+agent+switch+pcn=0", "must be a number of bytes > 0"),
            ("mltcp+agent+switch+pcn=6000:max", "unknown combine 'max'"),
            ("mltcp+agent+switch+nopcn+agent", "after the PCN setting"),
            ("mltcp+agent+switch+pcn", "unknown suffix '+pcn'"),
            ("dctcp+pcn+agent", "after the PCN setting"),
            ("dctcp+pcn=1500+nopcn", "after the PCN setting"),
            ("dctcp+nopcn", "unknown suffix '+nopcn'"),
            ("dctcp+pcn=x", "must be a number of bytes > 0"),
            ("cubic[slope_fx=1]", "tcp_mltcp's algorithms only"),
            ("mltcp[slope=1]", "unknown module parameter 'slope'"),
            ("mltcp[slope_fx=-1]", "slope_fx = '-1'"),
            // Ranges come from the module's own table (mltcp_math::params::PARAMS).
            (
                "mltcp[slope_fx=65537]",
                "slope_fx = 65537 is out of range [0, 65536]",
            ),
            ("mltcp[scale_decrease=3]", "out of range [0, 2]"),
            ("mltcp[slope_fx=1", "must end with ']'"),
            ("mltcp[slope_fx=1,slope_fx=2]", "given twice"),
            ("mltcp[]", "is not NAME=VALUE"),
            ("mltcpx[slope_fx=1]", "unknown congestion control 'mltcpx'"),
        ] {
            let e = CcVariant::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let e = err_of(&GOOD.replace(
            "ccs = [\"cubic\", \"reno\"]",
            "ccs = [\"cubic\", \"mltcp[slope=2]\"]",
        ));
        assert!(
            e.contains("ccs[1]")
                && e.contains("mltcp[slope=2]")
                && e.contains("unknown module parameter"),
            "{e}"
        );
    }

    const ECN: &str = r#"
name = "t"
iterations = 5
ccs = ["dctcp"]
before_burst_ms = 2
[topology]
bottleneck = "h2"
hosts = [ { name = "h1", rate_mbit = 100 }, { name = "h2", rate_mbit = 100, ecn = { qdisc = "red", threshold_kb = 30 } },
          { name = "h3", rate_mbit = 100, ecn = { qdisc = "fq_codel", ce_threshold_us = 500 } } ]
[[jobs]]
name = "A"
model = "vgg16"
paradigm = "ring"
workers = ["h1", "h2"]
[[background]]
name = "bg1"
from = "h3"
to = "h2"
cc = "dctcp"
start_ms = 100
stop_ms = 900
"#;

    #[test]
    fn port_classes_parse_and_bad_ones_are_named() {
        let t = ECN.replace(
            "{ name = \"h1\", rate_mbit = 100 }",
            "{ name = \"h1\", rate_mbit = 100, classes = { training = 4 } }",
        );
        let s = parse(&t).unwrap();
        assert_eq!(
            s.topology.hosts[0].classes,
            Some(PortClasses { training: 4 })
        );
        assert_eq!(s.topology.hosts[1].classes, None);
        for (to, field, why) in [
            (
                "{ name = \"h1\", rate_mbit = 100, classes = { training = 9 } }",
                "topology.hosts[0].classes.training = 9",
                "1..=8",
            ),
            (
                "{ name = \"h1\", rate_mbit = 100, classes = { training = 0 } }",
                "topology.hosts[0].classes.training = 0",
                "1..=8",
            ),
            (
                "{ name = \"h1\", classes = { training = 2 } }",
                "topology.hosts[0].classes.training = 2",
                "set rate_mbit",
            ),
            (
                "{ name = \"h1\", rate_mbit = 100, classes = { training = 2 }, ecn = { qdisc = \"red\", threshold_kb = 30 } }",
                "topology.hosts[0].classes.training = 2",
                "not both",
            ),
            (
                "{ name = \"h1\", rate_mbit = 100, classes = { bands = 2 } }",
                "bands",
                "unknown field",
            ),
        ] {
            let e = err_of(&ECN.replace("{ name = \"h1\", rate_mbit = 100 }", to));
            assert!(e.contains(field) && e.contains(why), "{to}: {e}");
        }
    }

    #[test]
    fn ecn_background_and_before_burst_parse() {
        let s = parse(ECN).unwrap();
        let h = &s.topology.hosts;
        assert_eq!(h[0].ecn, None);
        assert_eq!(
            h[1].ecn,
            Some(EcnMark {
                qdisc: "red".into(),
                threshold_kb: Some(30.0),
                ce_threshold_us: None
            })
        );
        assert_eq!(h[2].ecn.as_ref().unwrap().ce_threshold_us, Some(500.0));
        assert_eq!(s.background.len(), 1);
        assert_eq!(
            (s.background[0].start_ms, s.background[0].stop_ms),
            (100.0, Some(900.0))
        );
        assert_eq!(s.background_baseline_s, 10.0);
        assert_eq!(s.before_burst(), Some(std::time::Duration::from_millis(2)));
        let off = parse(&ECN.replace("before_burst_ms = 2", "before_burst_ms = 0")).unwrap();
        assert_eq!(off.before_burst(), None);
        let t = ECN.replace("stop_ms = 900\n", "");
        assert_eq!(parse(&t).unwrap().background[0].stop_ms, None);
    }

    #[test]
    fn refuses_bad_ecn_background_and_before_burst_naming_the_field() {
        for (from, to, field, val) in [
            (
                "qdisc = \"red\"",
                "qdisc = \"pie\"",
                "topology.hosts[1].ecn.qdisc",
                "pie",
            ),
            (
                "threshold_kb = 30",
                "threshold_kb = 0.5",
                "topology.hosts[1].ecn.threshold_kb",
                "0.5",
            ),
            (
                "threshold_kb = 30",
                "ce_threshold_us = 30",
                "topology.hosts[1].ecn.threshold_kb",
                "needs a threshold_kb",
            ),
            (
                "threshold_kb = 30",
                "threshold_kb = 30, ce_threshold_us = 9",
                "topology.hosts[1].ecn.ce_threshold_us",
                "9",
            ),
            (
                "ce_threshold_us = 500",
                "ce_threshold_us = 0",
                "topology.hosts[2].ecn.ce_threshold_us",
                "0",
            ),
            (
                "ce_threshold_us = 500",
                "ce_threshold_us = 5, threshold_kb = 3",
                "topology.hosts[2].ecn.threshold_kb",
                "3",
            ),
            (
                "{ name = \"h2\", rate_mbit = 100, ecn",
                "{ name = \"h2\", ecn",
                "topology.hosts[1].ecn",
                "tbf",
            ),
            (
                "name = \"bg1\"",
                "name = \"A\"",
                "background[0].name",
                "\"A\"",
            ),
            (
                "name = \"bg1\"",
                "name = \"b g\"",
                "background[0].name",
                "b g",
            ),
            ("from = \"h3\"", "from = \"h9\"", "background[0].from", "h9"),
            (
                "to = \"h2\"",
                "to = \"h3\"",
                "background[0].to",
                "two different hosts",
            ),
            (
                "cc = \"dctcp\"",
                "cc = \"dctpc\"",
                "background[0].cc",
                "dctpc",
            ),
            (
                "start_ms = 100",
                "start_ms = -1",
                "background[0].start_ms",
                "-1",
            ),
            (
                "stop_ms = 900",
                "stop_ms = 100",
                "background[0].stop_ms",
                "100",
            ),
            (
                "before_burst_ms = 2",
                "before_burst_ms = 5000",
                "before_burst_ms",
                "5000",
            ),
            (
                "before_burst_ms = 2",
                "background_baseline_s = 0.5",
                "background_baseline_s",
                "0.5",
            ),
        ] {
            let t = ECN.replace(from, to);
            assert_ne!(t, ECN, "{from}");
            let e = err_of(&t);
            assert!(
                e.contains("x.toml") && e.contains(field) && e.contains(val),
                "{field} {val}: {e}"
            );
        }
        let e = err_of(&ECN.replace("threshold_kb = 30", "threshold_kb = 30, thresh = 1"));
        assert!(e.contains("thresh"), "{e}");
        let e = err_of(&ECN.replace("stop_ms = 900", "stop_ms = 900\nstart = 1"));
        assert!(e.contains("start"), "{e}");
    }

    #[test]
    fn plan_scales_bytes_and_time() {
        let m = ModelFile::builtin();
        let s = parse(&GOOD.replace(
            "workers = [\"h1\", \"h2\"]",
            "workers = [\"h1\", \"h2\"]\ntime_scale = 2\ncompute_ms = 100",
        ))
        .unwrap();
        let p = &s.plans(&m)[0];
        assert_eq!(p.compute_ms, 200.0);
        let v = &m.models["vgg16"];
        assert_eq!(
            p.gradient_bytes,
            (v.bytes_per_iteration as f64 * v.scale * 2.0).round() as u64
        );
    }
}
