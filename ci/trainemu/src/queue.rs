// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Queue sampling of the bottleneck switch port: its qdiscs' backlog read with
//! `tc -s -j qdisc show dev v-HOST` in the switch namespace, about every [`QUEUE_PERIOD`], during
//! each run (the PCN paper's queue-length metrics come from these samples).
//!
//! The sampling thread enters the switch namespace with `setns(2)`; the `tc` it spawns inherits
//! that namespace. The backlog is the port's tbf's (bytes and packets waiting for tokens: the
//! port's queue, whatever child qdisc holds them); the marks are the ECN child's (RED `marked`,
//! fq_codel `ecn_mark` + `ce_mark`), cumulative since the qdisc was made.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// Target period of the queue samples (100 Hz); a sample that takes longer (`tc` is a process per
/// sample) delays the next one, and the report states the rate reached.
pub const QUEUE_PERIOD: Duration = Duration::from_millis(10);

/// Which port to sample.
#[derive(Debug, Clone)]
pub struct QueueProbe {
    /// The switch namespace's file (`/run/netns/te-sw`).
    pub netns: PathBuf,
    /// The port (`v-HOST`).
    pub dev: String,
}

/// One sample of the port's queue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QueueSample {
    /// Time since the run's start, µs (the middle of the `tc` call).
    pub t_us: u64,
    /// Backlog of the port's tbf, bytes.
    pub backlog_bytes: u64,
    /// Backlog of the port's tbf, packets.
    pub backlog_pkts: u64,
    /// Packets the tbf (or its child) dropped so far.
    pub drops: u64,
    /// Packets the ECN child marked CE so far (None: no ECN qdisc on the port).
    pub marks: Option<u64>,
}

/// Parses the output of `tc -s -j qdisc show dev DEV` into a sample at `t_us`: backlog and drops
/// of the `tbf` qdisc (the root qdisc when there is no tbf), marks of a `red` or `fq_codel` child.
pub fn parse_tc_json(text: &str, t_us: u64) -> Result<QueueSample> {
    let v: serde_json::Value = serde_json::from_str(text).context("tc -j output is not JSON")?;
    let qs = v.as_array().context("tc -j output is not a JSON array of qdiscs")?;
    let kind = |q: &serde_json::Value| q.get("kind").and_then(|k| k.as_str()).unwrap_or("").to_string();
    let num = |q: &serde_json::Value, k: &str| q.get(k).and_then(|x| x.as_u64());
    let port = qs
        .iter()
        .find(|q| kind(q) == "tbf")
        .or_else(|| qs.iter().find(|q| q.get("root").and_then(|r| r.as_bool()).unwrap_or(false)))
        .or_else(|| qs.first());
    let Some(port) = port else { bail!("tc shows no qdisc on the port") };
    let (Some(backlog_bytes), Some(backlog_pkts)) = (num(port, "backlog"), num(port, "qlen")) else {
        bail!("qdisc {} has no backlog/qlen statistics (was tc run with -s?)", kind(port));
    };
    let marks = qs.iter().find_map(|q| match kind(q).as_str() {
        "red" => num(q, "marked"),
        "fq_codel" => Some(num(q, "ecn_mark").unwrap_or(0) + num(q, "ce_mark").unwrap_or(0)),
        _ => None,
    });
    Ok(QueueSample { t_us, backlog_bytes, backlog_pkts, drops: num(port, "drops").unwrap_or(0), marks })
}

/// Samples `probe` until `stop` returns true; `now_us` is the run's clock. A failing `tc` ends the
/// sampling with the error (the samples so far are kept by the caller).
pub fn sample_port(probe: &QueueProbe, now_us: &dyn Fn() -> u64, stop: &dyn Fn() -> bool, out: &mut Vec<QueueSample>) -> Result<()> {
    let f = std::fs::File::open(&probe.netns).with_context(|| format!("open {}", probe.netns.display()))?;
    nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).with_context(|| format!("setns({})", probe.netns.display()))?;
    let mut next = std::time::Instant::now();
    while !stop() {
        let t0 = now_us();
        let o = Command::new("tc").args(["-s", "-j", "qdisc", "show", "dev", &probe.dev]).output().context("cannot run tc")?;
        if !o.status.success() {
            bail!("`tc -s -j qdisc show dev {}` failed: {}", probe.dev, String::from_utf8_lossy(&o.stderr).trim());
        }
        let t = (t0 + now_us()) / 2;
        out.push(parse_tc_json(&String::from_utf8_lossy(&o.stdout), t).with_context(|| format!("port {}", probe.dev))?);
        next += QUEUE_PERIOD;
        let now = std::time::Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tc -s -j qdisc show dev v-h2` (iproute2 6.1) of a port with netem, tbf and RED in ECN mode,
    /// while a queue stood (pretty-printed here; tc prints one line).
    const RED_PORT: &str = r#"[{"kind":"netem","handle":"1:","root":true,"refcnt":2,"options":{"limit":100000,"delay":{"delay":0.0001,"jitter":0,"correlation":0},"ecn":false,"gap":0},
      "bytes":91462012,"packets":60467,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0},
     {"kind":"tbf","handle":"10:","parent":"1:1","options":{"rate":12500000,"burst":64000,"lat":5000},
      "bytes":91462012,"packets":60467,"drops":12,"overlimits":48122,"requeues":0,"backlog":45420,"qlen":30},
     {"kind":"red","handle":"20:","parent":"10:1","options":{"limit":126500,"min":30000,"max":31500,"ecn":true,"probability":1},
      "bytes":91416592,"packets":60437,"drops":12,"overlimits":1519,"requeues":0,"backlog":45420,"qlen":30,
      "marked":1507,"early":12,"pdrop":0,"other":0}]"#;

    /// The same for fq_codel with ce_threshold, without netem (tbf is the root).
    const FQ_CODEL_PORT: &str = r#"[{"kind":"tbf","handle":"1:","root":true,"refcnt":2,"options":{"rate":12500000,"burst":64000,"lat":5000},"bytes":5000,"packets":4,"drops":0,"overlimits":3,"requeues":0,"backlog":3028,"qlen":2},{"kind":"fq_codel","handle":"20:","parent":"1:1","options":{"limit":84,"flows":1024,"quantum":1514,"target":4999,"ce_threshold":499,"interval":99999,"memory_limit":33554432,"ecn":true,"drop_batch":64},"bytes":5000,"packets":4,"drops":0,"overlimits":0,"requeues":0,"backlog":3028,"qlen":2,"maxpacket":1514,"drop_overlimit":0,"new_flow_count":1,"ecn_mark":2,"ce_mark":5,"new_flows_len":0,"old_flows_len":1}]"#;

    #[test]
    fn parses_the_tbf_backlog_and_the_ecn_marks() {
        let s = parse_tc_json(RED_PORT, 77).unwrap();
        assert_eq!(s, QueueSample { t_us: 77, backlog_bytes: 45420, backlog_pkts: 30, drops: 12, marks: Some(1507) });
        let s = parse_tc_json(FQ_CODEL_PORT, 5).unwrap();
        assert_eq!(s, QueueSample { t_us: 5, backlog_bytes: 3028, backlog_pkts: 2, drops: 0, marks: Some(7) });
    }

    #[test]
    fn a_port_without_tbf_or_ecn_uses_the_root_and_has_no_marks() {
        let t = r#"[{"kind":"netem","handle":"1:","root":true,"bytes":1,"packets":1,"drops":3,"overlimits":0,"requeues":0,"backlog":1514,"qlen":1}]"#;
        assert_eq!(parse_tc_json(t, 1).unwrap(), QueueSample { t_us: 1, backlog_bytes: 1514, backlog_pkts: 1, drops: 3, marks: None });
    }

    #[test]
    fn refuses_output_without_statistics_or_not_json() {
        let e = format!("{:#}", parse_tc_json(r#"[{"kind":"tbf","handle":"1:","root":true}]"#, 0).unwrap_err());
        assert!(e.contains("tbf") && e.contains("-s"), "{e}");
        assert!(parse_tc_json("qdisc tbf 1: root refcnt 2", 0).is_err());
        assert!(parse_tc_json("[]", 0).unwrap_err().to_string().contains("no qdisc"));
    }
}
