// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Configuration files: the topology shared by agents and switch daemons (`topo.toml`, [`topo`])
//! and one agent's own file (`agent.toml`, [`agent`]). TOML, read with serde; unknown fields are
//! refused (`deny_unknown_fields`), and every refusal is a [`ConfigError`] naming the file, the
//! field and the value, so a bad config stops the program before it touches any socket.
//!
//! Each rule is written once, beside its type: a rule on one value is a small newtype whose
//! `TryFrom` refuses what it must (serde's `try_from`, e.g. [`SlotMs`], [`topo::CapacityMbps`]);
//! a rule across the fields of one table is a `try_from` from that table as written (e.g.
//! [`topo::EcnConfig`]); rules across tables or files (ids, names, routes, the program file) stay
//! in [`Topology::parse_text`] and [`AgentConfig::parse_text`]. A value refused while
//! deserializing is named by its TOML path, found from the position toml reports.
//!
//! The fields, their meaning and defaults: docs/agent.md ([`TOPOLOGY_HELP`], [`AGENT_HELP`] are
//! what `ccp-agent switch --help` and `ccp-agent run --help` print).

use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};

pub mod agent;
pub mod topo;

pub use agent::*;
pub use topo::*;

/// `topo.toml` in brief (printed by `ccp-agent switch --help`).
pub const TOPOLOGY_HELP: &str = "\
topo.toml: the links (id, capacity_mbps, optional [link.ecn] queue), the hosts (name, addrs, nic,
agent), the switch daemons (name, listen, links), the routes (from, to, links), the slot grid
(slot_ms, horizon) and the switches' PCN policy ([pcn]). Every field, its meaning and default:
docs/agent.md (a commented sample: ccp-agent/agent/src/config/samples/topo.toml).";

/// `agent.toml` in brief (printed by `ccp-agent run --help`).
pub const AGENT_HELP: &str = "\
agent.toml: the topology file, the hosts this agent serves, the datapath program, its addresses
(listen, metrics_addr), the slot grid (slot_ms, horizon), rate floor (min_rate_kbps), cwnd_bytes,
rpc_timeout_ms, [sched] (rules, job_order, work_conserving, strict_rates, classes, class_rates,
held_flows, scavenger_target_us) and [pcn].
Every field, its meaning and default: docs/agent.md (a commented sample:
ccp-agent/agent/src/config/samples/agent.toml).";

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

pub(crate) fn err(
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

/// A rule across the fields of one table, broken: which field of the table (a name, or a path
/// below the table), its value and why. Its `Display` is what serde carries to [`parse`], which
/// puts the table's path in front of the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field, relative to its table.
    pub field: &'static str,
    /// The refused value as written.
    pub value: String,
    /// Why it was refused.
    pub reason: String,
}

/// Separates [`FieldError`]'s parts in serde's message (a control character no TOML value holds
/// unescaped).
const SEP: char = '\u{1f}';

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{SEP}{}{SEP}{}{SEP}{}",
            self.field, self.value, self.reason
        )
    }
}

/// A [`FieldError`] for `field` = `value`.
pub(crate) fn field_err(
    field: &'static str,
    value: impl fmt::Display,
    reason: impl Into<String>,
) -> FieldError {
    FieldError {
        field,
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Defines a newtype over an integer that refuses values outside `$range` with `$why`, through
/// serde's `try_from` (so the refusal names the field) and `TryFrom` (for values from the
/// command line).
macro_rules! ranged {
    ($(#[$doc:meta])* $name:ident($t:ty, $ts:tt), $range:expr, $why:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
        #[serde(try_from = $ts)]
        pub struct $name(pub $t);

        impl TryFrom<$t> for $name {
            type Error = String;
            fn try_from(v: $t) -> Result<Self, String> {
                if ($range).contains(&v) {
                    Ok(Self(v))
                } else {
                    Err(String::from($why))
                }
            }
        }

        impl $name {
            /// The value.
            pub fn get(self) -> $t {
                self.0
            }
        }
    };
}
pub(crate) use ranged;

ranged!(
    /// A slot length, ms: 1..=60000 (`slot_ms` of both files, `--slot-ms`).
    SlotMs(u64, "u64"),
    1..=60_000,
    "must be 1..=60000"
);
ranged!(
    /// A horizon K, slots: 1..=1024 (`horizon` of both files, `--horizon`).
    Horizon(usize, "usize"),
    1..=1024,
    "must be 1..=1024"
);
ranged!(
    /// A byte count that must not be 0 (ECN thresholds, the PCN threshold).
    NonZeroBytes(u32, "u32"),
    1..=u32::MAX,
    "must be > 0"
);

/// Default slot length, ms: the scheduling library's [`mlcc_sched::DEFAULT_SLOT_US`], 30 ms, half
/// of "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers" (Sec. VI: 60 ms),
/// chosen on the VM testbed (docs/results/agent-defaults.md, `slot_ms`).
pub const DEFAULT_SLOT_MS: u64 = mlcc_sched::DEFAULT_SLOT_US / 1000;
/// Default horizon K: the scheduling library's (same paper, Sec. IV-A).
pub use mlcc_sched::DEFAULT_HORIZON;

pub(crate) fn read(file: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(file).map_err(|e| err(file, "(file)", "", format!("cannot read: {e}")))
}

/// The TOML path of the table holding byte `pos` of `text` (`link[1].ecn`, `pcn`, empty at the
/// top), and the key written on `pos`'s line before it, if any. Enough for this module's files:
/// tables by `[name]` / `[[name]]` headers (a sub-table of the last array element is
/// `name[i].sub`), one `key = value` per line.
fn toml_path_at(text: &str, pos: usize) -> (String, Option<String>) {
    let mut counts: Vec<(String, usize)> = Vec::new();
    let mut table = String::new();
    let mut key = None;
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let end = start + line.len();
        let t = line.trim();
        if let Some(name) = t.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
            let name = name.trim().to_string();
            let i = match counts.iter_mut().find(|(n, _)| *n == name) {
                Some((_, c)) => {
                    *c += 1;
                    *c - 1
                }
                None => {
                    counts.push((name.clone(), 1));
                    0
                }
            };
            table = format!("{name}[{i}]");
        } else if let Some(name) = t.strip_prefix('[').and_then(|r| r.split(']').next()) {
            let name = name.trim();
            table = match name.split_once('.') {
                Some((head, rest)) => match counts.iter().find(|(n, _)| n == head) {
                    Some((_, c)) => format!("{head}[{}].{rest}", c - 1),
                    None => name.to_string(),
                },
                None => name.to_string(),
            };
        } else if pos < end {
            key = line
                .split_once('=')
                .filter(|(k, _)| start + k.len() <= pos)
                .map(|(k, _)| k.trim().to_string());
        }
        if pos < end {
            break;
        }
        start = end;
    }
    (table, key)
}

/// `table.key`, or either alone.
fn join_path(table: &str, key: &str) -> String {
    match (table.is_empty(), key.is_empty()) {
        (true, _) => key.to_string(),
        (_, true) => table.to_string(),
        _ => format!("{table}.{key}"),
    }
}

/// Parses `text` as TOML into `T`, mapping an error to the field it names: the TOML path of the
/// value toml points at (with a [`FieldError`]'s field below its table), the value as written,
/// and why, with the line and column.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(
    file: &Path,
    text: &str,
) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let message = e.message().trim();
        let Some(span) = e.span() else {
            return err(file, "(document)", "", message.to_string());
        };
        let before = text.get(..span.start).unwrap_or("");
        let line = before.matches('\n').count() + 1;
        let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        let at = format!("line {line}, column {col}");
        let (table, key) = toml_path_at(text, span.start);
        if let Some(rest) = message.strip_prefix(SEP) {
            // A rule across a table's fields: the table, then the field it names.
            let mut parts = rest.splitn(3, SEP);
            let (field, value, reason) = (
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
            );
            return err(
                file,
                join_path(&table, field),
                value,
                format!("{reason} ({at})"),
            );
        }
        let snippet = text
            .get(span.clone())
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .chars()
            .take(60)
            .collect::<String>();
        let field = match key {
            Some(k) => join_path(&table, &k),
            None if !table.is_empty() => table,
            None => at.clone(),
        };
        err(file, field, snippet, format!("{message} ({at})"))
    })
}

/// `p` relative to `base`'s directory (unless absolute).
pub(crate) fn relative(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.parent().unwrap_or(Path::new(".")).join(p)
    }
}

/// A device, namespace or class name passed to `ip`/`tc` as one argument: non-empty, at most
/// 64 bytes, no whitespace, no leading '-'.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Word(pub String);

impl TryFrom<String> for Word {
    type Error = String;
    fn try_from(v: String) -> Result<Self, String> {
        if v.is_empty() || v.len() > 64 || v.starts_with('-') || v.chars().any(char::is_whitespace)
        {
            return Err(String::from(
                "must be 1..=64 characters, no whitespace, not starting with '-'",
            ));
        }
        Ok(Word(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_samples_name_only_real_fields() {
        let t: RawTopology = toml::from_str(include_str!("samples/topo.toml")).unwrap();
        assert_eq!(
            (t.link.len(), t.host.len(), t.switch.len(), t.route.len()),
            (2, 1, 1, 1)
        );
        assert!(t.link[1].ecn.is_some() && t.pcn.timeout_ms.is_some());
        // The commented [link.classes], uncommented.
        let sample = include_str!("samples/topo.toml");
        let from = sample.find("# [link.classes]").unwrap();
        let to = from + sample[from..].find("\n\n").unwrap();
        let block: String = sample[from..to]
            .lines()
            .map(|l| format!("{}\n", l.strip_prefix("# ").unwrap_or(l)))
            .collect();
        let t: RawTopology =
            toml::from_str(&format!("{}{block}{}", &sample[..from], &sample[to..])).unwrap();
        let c = t.link[1].classes.as_ref().unwrap();
        assert_eq!(
            (c.training, c.rate_kbit, c.parent.as_str()),
            (2, 40_000, "10:1")
        );
        let a: RawAgentConfig = toml::from_str(include_str!("samples/agent.toml")).unwrap();
        assert_eq!(a.hosts, ["h1"]);
        assert_eq!(
            a.pcn.threshold_bytes.map(NonZeroBytes::get),
            Some(DEFAULT_PCN_THRESHOLD_BYTES)
        );
        assert_eq!(a.sched.rules.map(|r| r.0), Some(DEFAULT_RULES));
        assert_eq!(a.metrics_addr.as_deref(), Some("127.0.0.1:9470"));
        assert_eq!(strip_program_comments("# c\n(def)\n  # d\n"), "(def)");
    }

    #[test]
    fn a_toml_path_is_found_from_a_position() {
        let text = "slot_ms = 1\n[[link]]\nid = 1\n[[link]]\nid = 2\n[link.ecn]\ndev = \"x\"\n[pcn]\nt = 3\n";
        let at = |s: &str| toml_path_at(text, text.find(s).unwrap());
        assert_eq!(at("1\n"), (String::new(), Some("slot_ms".into())));
        assert_eq!(at("2\n"), ("link[1]".into(), Some("id".into())));
        assert_eq!(at("\"x\""), ("link[1].ecn".into(), Some("dev".into())));
        assert_eq!(at("[link.ecn]"), ("link[1].ecn".into(), None));
        assert_eq!(at("3\n"), ("pcn".into(), Some("t".into())));
    }
}
