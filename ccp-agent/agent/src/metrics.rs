// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Prometheus metrics of the agent and of the switch daemon (`--metrics-addr ADDR:PORT`):
//! `GET /metrics` answers the Prometheus text exposition format (version 0.0.4), encoded by
//! `prometheus-client`; any other path is 404.
//!
//! This file holds the exposition (the helpers that write a metric family, the encoding, the
//! HTTP endpoint) and the agent's metrics; the switch daemon's collector is the switch's own
//! ([`crate::switch::switch_registry`]), written with the helpers here.
//!
//! The numbers come from where `ccp-agent status` gets its own, read at each scrape: the agent's
//! [`Shared::status`] (the last slot's flows and the live counters) and [`Shared`]'s counters by
//! cause or RPC. Only the two timing histograms are observed as they happen (by the shell,
//! [`crate::ccp`]): a slot's numbers are gone by the next scrape.
//!
//! Agent metrics (names carry their unit; `_total` is a counter):
//!
//! | name | type | labels | what |
//! | --- | --- | --- | --- |
//! | `ccp_agent_slot` | gauge | | the last slot's number |
//! | `ccp_agent_flows_controlled` | gauge | | flows running the agent's program |
//! | `ccp_agent_flows_native` | gauge | | flows without it (native MLTCP) |
//! | `ccp_agent_job_planned_rate_bps` | gauge | `job` | sum of the job's flows' scheduled rates this slot, bit/s |
//! | `ccp_agent_job_achieved_rate_bps` | gauge | `job` | sum of their achieved rates in the last slot, bit/s |
//! | `ccp_agent_slot_work_seconds` | histogram | | the datapath thread's work per slot |
//! | `ccp_agent_decision_seconds` | histogram | | the core's handling of the input that planned the slot |
//! | `ccp_agent_rpc_failures_total` | counter | `rpc` | failed or timed-out RPCs |
//! | `ccp_agent_pcn_grants_total` | counter | | burst requests granted by the PCN gate |
//! | `ccp_agent_pcn_grants_on_ack_total` | counter | | of those, granted on the switches' acknowledgement |
//! | `ccp_agent_pcn_starts_total` | counter | | `PcnStart`s sent |
//! | `ccp_agent_notices_received_total` | counter | | dependency notices received |
//! | `ccp_agent_datapath_drops_total` | counter | `cause` | datapath messages dropped: `foreign`, `malformed`, `unparsable` |
//! | `ccp_agent_class_send_failures_total` | counter | | SET_CLASS messages (a flow's traffic class) the datapath socket did not take |
//!
//! The switch daemon's metrics are listed with its collector ([`crate::switch::switch_registry`]).

use crate::proto;
use crate::shared::Shared;
use anyhow::{Context, Result};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

/// One metric family with one label, for [`Collector::encode`]: `rows` are (label value,
/// metric); nothing is written when there are none (e.g. no job yet). Errors: the encoder's.
pub fn family<M: EncodeMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    rows: Vec<(String, M)>,
) -> std::fmt::Result {
    let Some((_, first)) = rows.first() else {
        return Ok(());
    };
    let mut me = enc.encode_descriptor(name, help, None, first.metric_type())?;
    for (value, m) in rows {
        let labels = [(label, value)];
        m.encode(me.encode_family(&labels)?)?;
    }
    Ok(())
}

/// An unlabelled gauge or counter, for [`Collector::encode`]. Errors: the encoder's.
pub fn single(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    m: impl EncodeMetric,
) -> std::fmt::Result {
    m.encode(enc.encode_descriptor(name, help, None, m.metric_type())?)
}

/// A gauge of `v` (saturated at `i64::MAX`, the exposition's gauge type).
pub fn gauge(v: u64) -> ConstGauge<i64> {
    ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX))
}

/// A counter of `v`.
pub fn counter(v: u64) -> ConstCounter<u64> {
    ConstCounter::new(v)
}

/// Per job: (planned, achieved) rate summed over its flows in `s`, bit/s, jobs by name.
pub fn job_rates(s: &proto::StatusReply) -> BTreeMap<String, (u64, u64)> {
    let mut jobs: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for f in &s.flows {
        let e = jobs.entry(f.job.clone()).or_default();
        e.0 = e.0.saturating_add(f.scheduled_bps);
        e.1 = e.1.saturating_add(f.achieved_bps);
    }
    jobs
}

/// The agent's metrics, read from its [`Shared`] state at each scrape.
#[derive(Clone)]
struct AgentCollector(Arc<Shared>);

impl std::fmt::Debug for AgentCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentCollector")
    }
}

impl Collector for AgentCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let sh = &self.0;
        let s = sh.status();
        let e = &mut enc;
        single(
            e,
            "ccp_agent_slot",
            "The agent's last slot (number on the wall-clock grid).",
            gauge(s.slot),
        )?;
        single(
            e,
            "ccp_agent_flows_controlled",
            "Flows running the agent's datapath program.",
            gauge(s.flows.len() as u64),
        )?;
        single(
            e,
            "ccp_agent_flows_native",
            "Flows without the agent's program (native MLTCP).",
            gauge(u64::from(s.native_flows)),
        )?;
        let jobs = job_rates(&s);
        family(
            e,
            "ccp_agent_job_planned_rate_bps",
            "Sum of the job's flows' scheduled rates this slot, bit/s.",
            "job",
            jobs.iter().map(|(j, r)| (j.clone(), gauge(r.0))).collect(),
        )?;
        family(
            e,
            "ccp_agent_job_achieved_rate_bps",
            "Sum of the job's flows' achieved rates in the last slot, bit/s.",
            "job",
            jobs.iter().map(|(j, r)| (j.clone(), gauge(r.1))).collect(),
        )?;
        family(
            e,
            "ccp_agent_rpc_failures",
            "RPCs that failed or timed out.",
            "rpc",
            sh.rpc_failures
                .by_rpc()
                .iter()
                .map(|(r, n)| (r.name().to_string(), counter(*n)))
                .collect(),
        )?;
        single(
            e,
            "ccp_agent_pcn_grants",
            "Burst requests (before_burst) granted by the PCN gate.",
            counter(s.bursts_granted),
        )?;
        single(
            e,
            "ccp_agent_pcn_grants_on_ack",
            "Burst grants given on the switches' acknowledgement before one RTT passed.",
            counter(s.bursts_granted_on_ack),
        )?;
        single(
            e,
            "ccp_agent_pcn_starts",
            "PcnStart RPCs sent to switches.",
            counter(s.pcn_starts),
        )?;
        single(
            e,
            "ccp_agent_notices_received",
            "Dependency notices received from other agents.",
            counter(s.notices_received),
        )?;
        single(
            e,
            "ccp_agent_class_send_failures",
            "SET_CLASS messages (a flow's traffic class, [sched] classes) the datapath socket did not take.",
            counter(sh.class_send_failures.load(std::sync::atomic::Ordering::Relaxed)),
        )?;
        let d = sh.drops();
        family(e, "ccp_agent_datapath_drops", "Datapath messages the agent dropped, by cause (foreign: not sent by the kernel; malformed: from the kernel but malformed or of a type a datapath never sends; unparsable: refused by the agent's own check before portus).", "cause",
            vec![("foreign".into(), counter(d.foreign)), ("malformed".into(), counter(d.malformed)), ("unparsable".into(), counter(d.unparsable))])?;
        Ok(())
    }
}

/// The agent's registry: the collector over `shared` and its timing histograms.
pub fn agent_registry(shared: Arc<Shared>) -> Registry {
    let mut r = Registry::default();
    r.register(
        "ccp_agent_slot_work_seconds",
        "Time the datapath thread spent on a slot's work (tick and switch answers; waits excluded), seconds",
        shared.timings.slot_work.clone(),
    );
    r.register(
        "ccp_agent_decision_seconds",
        "Time the agent core took on the input that planned a slot (the policy decision), seconds",
        shared.timings.decision.clone(),
    );
    r.register_collector(Box::new(AgentCollector(shared)));
    r
}

/// `registry` in the Prometheus text format (version 0.0.4).
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String does not fail; the collectors only fail on a write error.
    if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut out, registry) {
        tracing::warn!(error = %e, "encoding the metrics failed");
    }
    out
}

/// Binds the metrics address `addr` (given by `source`: the flag or config field, named in
/// the error). Errors: the address cannot be bound (in use, not local, no permission).
pub fn bind(addr: SocketAddr, source: &str) -> Result<std::net::TcpListener> {
    let l = std::net::TcpListener::bind(addr)
        .with_context(|| format!("{source} {addr}: cannot bind the metrics address"))?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Serves `GET /metrics` from `registry` on `listener` until `shutdown` resolves (HTTP/1.1,
/// axum on the caller's tokio runtime). Errors: the listener cannot join the runtime.
pub async fn serve(
    listener: std::net::TcpListener,
    registry: Arc<Registry>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    use axum::http::header::CONTENT_TYPE;
    let addr = listener.local_addr()?;
    let l = tokio::net::TcpListener::from_std(listener)?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = registry.clone();
            async move {
                (
                    [(
                        CONTENT_TYPE,
                        prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                    )],
                    encode(&registry),
                )
            }
        }),
    );
    tracing::info!(metrics = %addr, "serving Prometheus metrics at /metrics");
    axum::serve(l, app)
        .with_graceful_shutdown(shutdown)
        .await
        .with_context(|| format!("metrics server on {addr}"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::shared::RpcKind;
    use prometheus_parse::{Scrape, Value};

    /// The exposition parsed with a Prometheus text-format parser (prometheus-parse); every
    /// non-comment line must be a sample it took.
    pub(crate) fn parse(text: &str) -> Scrape {
        for l in text.lines() {
            let known = l.is_empty()
                || l.starts_with('#')
                || matches!(
                    prometheus_parse::LineInfo::parse(l),
                    prometheus_parse::LineInfo::Sample { .. }
                );
            assert!(known, "line not in the text format: {l:?}");
        }
        Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap()
    }

    /// The value of `name` with the label `label` (or no label) in `s`.
    pub(crate) fn value(s: &Scrape, name: &str, label: Option<(&str, &str)>) -> f64 {
        let sample = s
            .samples
            .iter()
            .find(|x| x.metric == name && label.is_none_or(|(k, v)| x.labels.get(k) == Some(v)))
            .unwrap_or_else(|| panic!("no {name} {label:?}"));
        match &sample.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            other => panic!("{name}: {other:?}"),
        }
    }

    fn flow(job: &str, sched: u64, achv: u64) -> proto::FlowStatus {
        proto::FlowStatus {
            job: job.into(),
            scheduled_bps: sched,
            achieved_bps: achv,
            ..Default::default()
        }
    }

    #[test]
    fn agent_metrics_carry_the_status_numbers() {
        let sh = Shared::new().unwrap();
        *sh.status.lock().unwrap() = proto::StatusReply {
            slot: 42,
            flows: vec![
                flow("mltcp.A", 30_000_000, 20_000_000),
                flow("mltcp.A", 10_000_000, 5_000_000),
                flow("B", 1_000_000, 0),
            ],
            native_flows: 2,
            ..Default::default()
        };
        sh.rpc_failures.add(RpcKind::FetchFeedback);
        sh.rpc_failures.add(RpcKind::FetchFeedback);
        sh.rpc_failures.add(RpcKind::Notify);
        sh.bursts_granted
            .store(7, std::sync::atomic::Ordering::Relaxed);
        sh.dropped_unparsable
            .store(3, std::sync::atomic::Ordering::Relaxed);
        sh.class_send_failures
            .store(5, std::sync::atomic::Ordering::Relaxed);
        sh.timings.slot_work.observe(150e-6);
        sh.timings.decision.observe(40e-6);
        let text = encode(&agent_registry(sh.clone()));
        let s = parse(&text);
        let status = sh.status();
        assert_eq!(value(&s, "ccp_agent_slot", None), 42.0);
        assert_eq!(
            value(&s, "ccp_agent_flows_controlled", None),
            status.flows.len() as f64
        );
        assert_eq!(value(&s, "ccp_agent_flows_native", None), 2.0);
        let job = |n, j| value(&s, n, Some(("job", j)));
        assert_eq!(job("ccp_agent_job_planned_rate_bps", "mltcp.A"), 40e6);
        assert_eq!(job("ccp_agent_job_achieved_rate_bps", "mltcp.A"), 25e6);
        assert_eq!(job("ccp_agent_job_planned_rate_bps", "B"), 1e6);
        let rpc = |r| value(&s, "ccp_agent_rpc_failures_total", Some(("rpc", r)));
        assert_eq!(
            (rpc("FetchFeedback"), rpc("Notify"), rpc("PcnStart")),
            (2.0, 1.0, 0.0)
        );
        assert_eq!(status.rpc_failures, 3);
        assert_eq!(value(&s, "ccp_agent_pcn_grants_total", None), 7.0);
        assert_eq!(value(&s, "ccp_agent_class_send_failures_total", None), 5.0);
        let drop = |c| value(&s, "ccp_agent_datapath_drops_total", Some(("cause", c)));
        assert_eq!(
            (drop("foreign"), drop("malformed"), drop("unparsable")),
            (0.0, 0.0, 3.0)
        );
        assert_eq!(status.dropped_bad, 3);
        for h in ["ccp_agent_slot_work_seconds", "ccp_agent_decision_seconds"] {
            let b = s
                .samples
                .iter()
                .find(|x| x.metric == h)
                .unwrap_or_else(|| panic!("no {h}"));
            let Value::Histogram(buckets) = &b.value else {
                panic!("{h}: {:?}", b.value)
            };
            // One observation: the +Inf bucket counts it, the 10 µs one does not.
            assert_eq!(buckets.first().map(|c| c.count), Some(0.0), "{h}");
            assert_eq!(buckets.last().map(|c| c.count), Some(1.0), "{h}");
            assert_eq!(value(&s, &format!("{h}_count"), None), 1.0);
        }
        assert!(
            text.contains("# TYPE ccp_agent_decision_seconds histogram"),
            "{text}"
        );
    }
}
