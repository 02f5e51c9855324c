// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The switch daemon's Prometheus metrics (`ccp-agent switch --metrics-addr ADDR:PORT`, served by
//! [`crate::metrics::serve`]), read at each scrape from its state: [`SwitchState::snapshot`]
//! (what `status --switch` prints) and [`SwitchState::served`]. A scrape is not a request.
//!
//! | name | type | labels | what |
//! | --- | --- | --- | --- |
//! | `ccp_switch_requests_total` | counter | `rpc` | gRPC requests received, answered or refused |
//! | `ccp_switch_feedback_links_served_total` | counter | | link entries sent in `FetchFeedback` replies |
//! | `ccp_switch_links` | gauge | | links in the load table |
//! | `ccp_switch_flow_schedules` | gauge | | flows with a stored schedule |
//! | `ccp_switch_pcn_starts_total` | counter | | `PcnStart`s taken |
//! | `ccp_switch_pcn_expired_total` | counter | | starts whose burst never came within the timeout |
//! | `ccp_switch_tc_failures_total` | counter | | ECN threshold changes that failed or timed out |
//! | `ccp_switch_classes_ports` | gauge | | ports whose traffic classes were installed at start-up |
//! | `ccp_switch_classes_failures_total` | counter | | traffic-class installations that failed (the daemon then stops) |
//! | `ccp_switch_link_capacity_bps` | gauge | `link` | capacity, bit/s |
//! | `ccp_switch_link_estimate_bps` | gauge | `link` | available-bandwidth estimate, bit/s |
//! | `ccp_switch_link_load_bps` | gauge | `link` | load stored for the current slot, bit/s |
//! | `ccp_switch_link_ecn_threshold_bytes` | gauge | `link` | ECN marking threshold now (ECN links), bytes |

use super::state::{SwitchState, SWITCH_RPCS};
use crate::metrics::{counter, family, gauge, single};
use crate::proto;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use std::sync::{Arc, Mutex};

/// The switch daemon's metrics, read from its state at each scrape.
struct SwitchCollector(Arc<Mutex<SwitchState>>);

impl std::fmt::Debug for SwitchCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SwitchCollector")
    }
}

impl Collector for SwitchCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let (t, served, classes) = {
            let mut st = self.0.lock().unwrap_or_else(|p| p.into_inner());
            (st.snapshot(), st.served(), st.classes())
        };
        let e = &mut enc;
        family(
            e,
            "ccp_switch_requests",
            "gRPC requests received, answered or refused.",
            "rpc",
            SWITCH_RPCS
                .iter()
                .zip(served.requests)
                .map(|(r, n)| (r.to_string(), counter(n)))
                .collect(),
        )?;
        single(
            e,
            "ccp_switch_feedback_links_served",
            "Link entries sent in FetchFeedback replies.",
            counter(served.feedback_links),
        )?;
        single(
            e,
            "ccp_switch_links",
            "Links in the switch's load table.",
            gauge(t.links.len() as u64),
        )?;
        single(
            e,
            "ccp_switch_flow_schedules",
            "Flows with a stored schedule.",
            gauge(u64::from(t.flows)),
        )?;
        single(
            e,
            "ccp_switch_pcn_starts",
            "PcnStart requests taken.",
            counter(t.pcn_starts),
        )?;
        single(
            e,
            "ccp_switch_pcn_expired",
            "PCN starts dropped because their burst never came within the timeout.",
            counter(t.pcn_expired),
        )?;
        single(
            e,
            "ccp_switch_tc_failures",
            "ECN threshold changes that failed or timed out.",
            counter(t.threshold_failures),
        )?;
        single(
            e,
            "ccp_switch_classes_ports",
            "Ports whose traffic classes were installed at start-up.",
            gauge(classes.ports),
        )?;
        single(
            e,
            "ccp_switch_classes_failures",
            "Traffic-class installations that failed (the daemon then stops).",
            counter(classes.failures),
        )?;
        let per_link = |f: &dyn Fn(&proto::LinkFeedback) -> u64| -> Vec<(String, ConstGauge<i64>)> {
            t.links
                .iter()
                .map(|l| (l.link.to_string(), gauge(f(l))))
                .collect()
        };
        family(
            e,
            "ccp_switch_link_capacity_bps",
            "Link capacity, bit/s.",
            "link",
            per_link(&|l| l.capacity_bps),
        )?;
        family(
            e,
            "ccp_switch_link_estimate_bps",
            "Link available-bandwidth estimate, bit/s.",
            "link",
            per_link(&|l| l.estimate_bps),
        )?;
        family(
            e,
            "ccp_switch_link_load_bps",
            "Load stored on the link for the current slot, bit/s.",
            "link",
            per_link(&|l| l.load_bps.first().copied().unwrap_or(0)),
        )?;
        let ecn: Vec<_> = t
            .links
            .iter()
            .filter(|l| l.ecn_threshold_bytes > 0)
            .map(|l| (l.link.to_string(), gauge(u64::from(l.ecn_threshold_bytes))))
            .collect();
        family(
            e,
            "ccp_switch_link_ecn_threshold_bytes",
            "ECN marking threshold of the link's queue now, bytes.",
            "link",
            ecn,
        )?;
        Ok(())
    }
}

/// The switch daemon's registry, over its state (the metrics of the module docs).
pub fn switch_registry(state: Arc<Mutex<SwitchState>>) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(SwitchCollector(state)));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::tests::{parse, value};
    use crate::metrics::{bind, encode, serve};
    use crate::switch::fixtures::plain_state;
    use crate::switch::Served;
    use std::io::{Read, Write};
    use std::net::SocketAddr;

    #[test]
    fn switch_metrics_carry_the_table_and_the_requests() {
        let st = Arc::new(Mutex::new(plain_state()));
        let text = encode(&switch_registry(st.clone()));
        let s = parse(&text);
        assert_eq!(value(&s, "ccp_switch_links", None), 2.0);
        assert_eq!(value(&s, "ccp_switch_flow_schedules", None), 0.0);
        assert_eq!(
            value(&s, "ccp_switch_link_capacity_bps", Some(("link", "11"))),
            10e6
        );
        for r in SWITCH_RPCS {
            assert_eq!(
                value(&s, "ccp_switch_requests_total", Some(("rpc", r))),
                0.0
            );
        }
        // A scrape is not a request: the switch's own snapshot serves it.
        assert_eq!(st.lock().unwrap().served(), Served::default());
    }

    /// One HTTP/1.1 GET of `path` on `addr`: (status line, whole response).
    fn get(addr: SocketAddr, path: &str) -> (String, String) {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        write!(
            c,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut r = String::new();
        c.read_to_string(&mut r).unwrap();
        (r.lines().next().unwrap_or("").to_string(), r)
    }

    #[test]
    fn the_endpoint_serves_the_text_format_on_metrics_only() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let l = bind("127.0.0.1:0".parse().unwrap(), "--metrics-addr").unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let registry = Arc::new(switch_registry(Arc::new(Mutex::new(plain_state()))));
        let task = rt.spawn(serve(l, registry, async {
            let _ = rx.await;
        }));
        let (status, resp) = get(addr, "/metrics");
        assert!(status.contains("200"), "{resp}");
        assert!(
            resp.to_ascii_lowercase()
                .contains("content-type: text/plain; version=0.0.4"),
            "{resp}"
        );
        let body = resp.split("\r\n\r\n").nth(1).unwrap_or("");
        assert_eq!(value(&parse(body), "ccp_switch_links", None), 2.0);
        assert!(get(addr, "/").0.contains("404"));
        let _ = tx.send(());
        rt.block_on(task).unwrap().unwrap();
        // A taken address is refused naming the flag and the address.
        let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = busy.local_addr().unwrap();
        let e = format!("{:#}", bind(a, "--metrics-addr").unwrap_err());
        assert!(
            e.contains("--metrics-addr") && e.contains(&a.to_string()),
            "{e}"
        );
    }
}
