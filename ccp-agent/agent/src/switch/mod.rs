// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The emulated switch daemon (`ccp-agent switch`): one load table over the next K slots for the
//! links the topology gives this switch, served over gRPC.
//!
//! "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers", Sec. IV-A and V: a
//! daemon per (non-programmable) switch keeps a load table of its links; `fetch_feedback()`
//! returns the load estimation of its links over the future K slots and `update_schedule()` adds
//! a flow's newly computed schedule into the table. Here:
//!
//! - `FetchFeedback`: per requested link, capacity, available-bandwidth estimate and the load of
//!   the other flows (the caller's own stored schedules, listed in `exclude_flows`, are left
//!   out), for the K slots from the table's current slot;
//! - `UpdateSchedule`: an admission. Per flow, its schedule along the switch's links of its path
//!   is clipped to what is left on those links at that moment (`LinkLoadTable::admit`: the
//!   estimate less the other flows' load, slot by slot), replaces the flow's previous one (an
//!   empty schedule removes it) and is returned in `UpdateReply::admitted`, for the agent to
//!   enforce; its achieved rate of a past slot is recorded on those links (the estimate of
//!   [`mlcc_sched::table`]: samples of one slot add up). Requests are served one at a time under
//!   the state's lock, so agents that planned the same free bandwidth in the same slot (each
//!   read `FetchFeedback` before the other's update landed) cannot both get it: the committed
//!   load of a link never exceeds its capacity;
//! - `PcnStart` / `PcnEnd` ("Proactive Congestion Avoidance for Distributed Deep Learning", Sec.
//!   3.2): a start lowers the ECN marking threshold of the switch's links of the burst's path
//!   that have an ECN queue (`[link.ecn]` in the topology), counting concurrent starts per link
//!   and combining their thresholds by the topology's `[pcn] combine` policy
//!   ([`mlcc_sched::pcn::PcnThresholds`]); the initial threshold comes back (once no other start
//!   is outstanding on the link) when the burst arrives -- the first `UpdateSchedule` of one of
//!   the start's flows whose achieved rate is > 0 in the start's slot or later --, on `PcnEnd`,
//!   or when the start is older than `[pcn] timeout_ms`. The threshold is applied over
//!   rtnetlink (what `tc qdisc change` sends, [`NetlinkApplier`]) through a
//!   [`ThresholdApplier`], outside the state's lock: the bookkeeping decides the changes under
//!   the lock and queues them, in its order, for one [`OrderedApplier`] thread, which makes them
//!   one after another in that order; the RPC's reply does not wait for them (a change takes
//!   well under a millisecond; one the kernel does not answer fails after
//!   `[pcn] apply_timeout_ms`, holding only that thread). A failed change is logged and
//!   counted (`threshold_failures`), never fatal, and not reported in the reply; the
//!   bookkeeping goes on;
//! - every slot, and on every request, the table moves to the current wall-clock slot, so expired
//!   slots are dropped;
//! - at start-up, before serving, the traffic classes of the links with a `[link.classes]` table
//!   are installed on their ports over rtnetlink ([`install_all`], [`ecn_qdisc::classes`]); a
//!   port whose classes cannot be installed stops the daemon, naming the port.
//!
//! Security: like the load table, the PCN service is unauthenticated: whoever reaches the port
//! can lower a link's marking threshold (for at most `[pcn] timeout_ms` per start, never above
//! the initial threshold, at most [`MAX_PCN_STARTS`] starts at a time). Bind it to a management
//! network.
//!
//! Several daemons (one per switch of a hierarchy) each own disjoint links; an agent talks to
//! every switch its flows cross. All state is in one mutex-protected [`SwitchState`]; requests
//! never panic on bad input: an unknown link or a bad schedule is refused with a gRPC error or
//! an entry of `UpdateReply::errors` naming it.
//!
//! The pieces: [`SwitchState`] (the load table and its admission, `state.rs`) with its PCN
//! bookkeeping (`pcn.rs`); the appliers and `tc` lines (`applier.rs`); the traffic classes'
//! installation (`classes.rs`); the gRPC service
//! [`SwitchService`] (`service.rs`); the metrics [`switch_registry`] (`metrics.rs`); the serve
//! loop here.

mod applier;
mod classes;
mod metrics;
mod pcn;
mod service;
mod state;

pub use applier::{
    qdisc_change, tc_command, NetlinkApplier, OrderedApplier, RecordingRunner, ThresholdApplier,
    ThresholdChange,
};
pub use classes::{install_all, switch_classes, ClassesCount};
pub use metrics::switch_registry;
pub use pcn::{MAX_JOB_BYTES, MAX_PCN_STARTS};
pub use service::SwitchService;
pub use state::{Served, SwitchState, TimeSource, SWITCH_RPCS};

use crate::config::{Switch, Topology};
use crate::proto::switch_server;
use crate::wall_us;
use mlcc_sched::SlotClock;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Serves `switch` of `topo` on its `listen` address (or `listener` when given, for tests)
/// until `shutdown` resolves, changing the ECN thresholds over rtnetlink, and its Prometheus
/// metrics on `metrics` when given ([`crate::metrics::bind`]); see [`serve_with`].
pub async fn serve(
    topo: &Topology,
    switch: &Switch,
    clock: SlotClock,
    listener: Option<tokio::net::TcpListener>,
    metrics: Option<std::net::TcpListener>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let runner = Arc::new(NetlinkApplier::new(Duration::from_millis(
        topo.pcn.apply_timeout_ms,
    )));
    serve_with(topo, switch, clock, listener, metrics, runner, shutdown).await
}

/// [`serve`] with the thresholds applied by `runner` (on the [`OrderedApplier`]'s thread): first
/// installs the traffic classes of the switch's links that have them (`[link.classes]`, with
/// `runner`, see [`install_all`]), sets every ECN link to its initial threshold (waiting for
/// those changes before serving), advances the table every slot and expires PCN starts (checked
/// every 10 ms), and at shutdown drops the outstanding starts and waits until the initial
/// thresholds are back. Errors: a topology the table refuses, a port whose classes cannot be
/// installed (named), the applier's thread cannot start, the listen address cannot be served.
pub async fn serve_with(
    topo: &Topology,
    switch: &Switch,
    clock: SlotClock,
    listener: Option<tokio::net::TcpListener>,
    metrics: Option<std::net::TcpListener>,
    runner: Arc<dyn ThresholdApplier>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let mut state = SwitchState::new(topo, switch, clock)?;
    let ports = switch_classes(topo, switch);
    if !ports.is_empty() {
        let (name, r) = (switch.name.clone(), runner.clone());
        let (count, installed) =
            tokio::task::spawn_blocking(move || install_all(&name, &ports, &*r))
                .await
                .map_err(|e| {
                    anyhow::anyhow!(
                        "switch {:?}: installing the traffic classes: {e}",
                        switch.name
                    )
                })?;
        state.classes = count;
        installed?;
    }
    let applier = OrderedApplier::spawn(runner, state.failure_counter()).map_err(|e| {
        anyhow::anyhow!(
            "switch {:?}: starting the qdisc applier thread: {e}",
            switch.name
        )
    })?;
    let state = Arc::new(Mutex::new(state));
    let svc = SwitchService::new(state.clone(), applier);
    let (metrics_stop, metrics_stopped) = tokio::sync::oneshot::channel::<()>();
    let metrics_task = metrics.map(|l| {
        let registry = Arc::new(switch_registry(state.clone()));
        tokio::spawn(async move {
            let stopped = async {
                let _ = metrics_stopped.await;
            };
            if let Err(e) = crate::metrics::serve(l, registry, stopped).await {
                tracing::warn!(error = %format!("{e:#}"), "metrics server stopped");
            }
        })
    });
    svc.with_state(|s| s.queue_initial_thresholds());
    flush(&svc).await;
    // The state is new: every failure so far is one of these.
    let failed = svc.applier().failures();
    if failed > 0 {
        tracing::warn!(failures = failed, "some ECN queues did not take their initial threshold (see above); PCN bookkeeping goes on");
    }
    let ticker = {
        let svc = svc.clone();
        tokio::spawn(async move {
            let mut iv = tokio::time::interval(Duration::from_millis(10));
            let mut last = 0;
            loop {
                iv.tick().await;
                let slot = clock.slot_at(wall_us());
                svc.with_state(|s| {
                    s.advance(slot);
                    let now = s.now_ms();
                    s.expire_pcn(now);
                    if slot != last {
                        last = slot;
                        tracing::debug!(slot, flows = s.table().flow_count(), "switch slot");
                    }
                });
            }
        })
    };
    tracing::info!(switch = %switch.name, links = ?switch.links, listen = %switch.listen, "switch daemon serving");
    let router = tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .add_service(switch_server::SwitchServer::new(svc.clone()));
    let r = match listener {
        Some(l) => {
            router
                .serve_with_incoming_shutdown(crate::nodelay_incoming(l), shutdown)
                .await
        }
        None => router.serve_with_shutdown(switch.listen, shutdown).await,
    };
    ticker.abort();
    let _ = metrics_stop.send(());
    if let Some(t) = metrics_task {
        let _ = tokio::time::timeout(Duration::from_secs(1), t).await;
    }
    svc.with_state(|s| s.end_all_pcn());
    flush(&svc).await;
    r.map_err(|e| anyhow::anyhow!("switch {:?} on {}: {e}", switch.name, switch.listen))
}

/// Waits, off the runtime's worker threads, until the changes queued so far are made.
async fn flush(svc: &SwitchService) {
    let applier = svc.applier().clone();
    // An error means the waiting task panicked: nothing more to wait for.
    let _ = tokio::task::spawn_blocking(move || applier.flush()).await;
}

/// Fixtures of the switch's tests: a topology without ECN queues, and one with an fq_codel
/// queue (link 10), a RED queue in a network namespace (link 11) and a link without (12).
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use crate::config::EcnQueue;
    use std::path::Path;

    /// A state of switch "s" with links 10 (40 Mbit/s) and 11 (10 Mbit/s), no ECN queues,
    /// slots of 1 s, horizon 4.
    pub(crate) fn plain_state() -> SwitchState {
        let topo = Topology::parse_text(
            Path::new("topo.toml"),
            "[[link]]\nid = 10\ncapacity_mbps = 40\n[[link]]\nid = 11\ncapacity_mbps = 10\n[[switch]]\nname = \"s\"\nlisten = \"127.0.0.1:1\"\nlinks = [10, 11]\n",
        )
        .unwrap();
        SwitchState::new(
            &topo,
            &topo.switches[0],
            SlotClock::new(1_000_000, 4).unwrap(),
        )
        .unwrap()
    }

    const ECN_TOPO: &str = r#"
[pcn]
combine = "COMBINE"
timeout_ms = 500
[[link]]
id = 10
capacity_mbps = 40
[link.ecn]
dev = "s-eth10"
qdisc = "fq_codel"
[[link]]
id = 11
capacity_mbps = 100
[link.ecn]
netns = "sw"
dev = "s-eth11"
parent = "1:1"
qdisc = "red"
initial_threshold_bytes = 30000
[[link]]
id = 12
capacity_mbps = 100
[[switch]]
name = "s"
listen = "127.0.0.1:1"
links = [10, 11, 12]
"#;

    /// The ECN topology, its starts combined by `combine` (`[pcn] combine`).
    pub(crate) fn ecn_topo(combine: &str) -> Topology {
        Topology::parse_text(
            Path::new("topo.toml"),
            &ECN_TOPO.replace("COMBINE", combine),
        )
        .unwrap()
    }

    /// The ECN queue of `link` in `topo`.
    pub(crate) fn queue(topo: &Topology, link: u32) -> EcnQueue {
        topo.ecn[&link].clone()
    }
}
