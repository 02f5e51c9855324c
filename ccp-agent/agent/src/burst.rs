// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The PCN burst gate: answers the progress interface's bounded wait before a burst
//! (`Writer::before_burst`, `mltcp_progress_before_burst`) with a PCN-START to the switches.
//!
//! "Proactive Congestion Avoidance for Distributed Deep Learning" (Kang et al., Sensors 2021),
//! Sec. 3.1-3.2: a worker sends PCN-START, carrying its PCN threshold, before its burst, and
//! starts the burst after the ACK, one RTT later; the switch meanwhile lowers its ECN marking
//! threshold, so background senders back off and the queue drains before the burst arrives.
//! Here the library's `before_burst` plays the worker's side and the agent does the rest:
//!
//! 1. every `[pcn] poll_us` (every 10 ms while it is attached to none) the gate reads the
//!    progress regions of processes with a flow from one of the agent's hosts (its own
//!    [`mltcp_progress::Scanner`], independent of the slot loop's, so a request is seen within
//!    `poll_us` and not at the next slot: a poll reads only the 48 bytes of the hot counters of
//!    the regions it is attached to, and checks the others at each directory scan, every
//!    100 ms); it attaches the agent to them (from then on the writers' `before_burst` waits
//!    for a grant, at most its own timeout) and stamps the heartbeat every 500 ms (writers stop waiting for an agent whose
//!    heartbeat is older than `mltcp_progress::AGENT_STALE_MS`);
//! 2. a region whose `burst_requests` grew has a new burst: the gate sends `PcnStart` (job,
//!    rank, the process's sending flows, the links of their paths, `[pcn] threshold_bytes`) to
//!    every switch daemon owning a link of those paths;
//! 3. it grants the request (writes `burst_grant`) when every such switch has acknowledged, or
//!    once one RTT has passed since the start, whichever comes first: the RTT is the largest of
//!    the flows' RTTs in the last slot's datapath reports, `[pcn] default_rtt_us` when none has
//!    one yet. In NIC-only mode, or when no path crosses a switch, there is nobody to warn and
//!    the request is granted at once;
//! 4. the switch restores its threshold when the burst arrives: the gate sends `PcnEnd` as soon
//!    as the process's bytes handed to the network (the region's `total_bytes`) grow past their
//!    value at the request, i.e. the burst has left the host and reaches the switch within
//!    about half an RTT (seen within `poll_us`; the paper's switch sees the burst's first
//!    packet itself; the end waits for the start's RPC to complete, so it never overtakes it); in scheduling mode the flow's next `UpdateSchedule` reporting bytes does
//!    it too, whichever comes first; failing both, the switch's own timeout. The gate also sends
//!    `PcnEnd` when a region with a start goes away and at shutdown.
//!
//! A library that never calls `before_burst` is not affected; with `[pcn] enabled = false` the
//! gate does not run, the agent does not attach, and `before_burst` returns at once.

use crate::config::AgentConfig;
use crate::flows::FlowKey;
use crate::monitor::is_sending;
use crate::proto::{self, switch_client::SwitchClient};
use crate::shared::Shared;
use mltcp_progress::{FlowKind, Role, Scanner};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// How often the directory is rescanned for new regions.
const SCAN_EVERY: Duration = Duration::from_millis(100);
/// How often the heartbeat of attached regions is stamped (well under `AGENT_STALE_MS`).
const HEARTBEAT_EVERY: Duration = Duration::from_millis(500);
/// The poll period while no region is attached (no writer can be waiting for the agent).
const IDLE_POLL: Duration = Duration::from_millis(10);
/// How long a `PcnStart` or `PcnEnd` may take. Neither is on a burst's critical path (the grant
/// comes after one RTT at the latest), so the deadline only bounds a hung switch; a short one
/// would cancel requests that a loaded switch was about to serve (the slots' `rpc_timeout_ms`,
/// 20 ms by default, cancelled every start in the emulated testbed).
const PCN_RPC_TIMEOUT: Duration = Duration::from_secs(1);

/// The order of one start's RPC to one switch and the `PcnEnd` that follows it: the end must
/// not reach the switch before the start (it would find nothing to end, and the start would then
/// hold the threshold down until the switch's timeout). Whichever of the start's completion and
/// the burst comes last sends the end, exactly once.
#[derive(Default)]
struct StartOrder {
    /// The start's RPC completed (answered, refused or timed out).
    done: AtomicBool,
    /// The burst was seen: the start should end.
    end_requested: AtomicBool,
    /// The end was sent (or is being sent).
    ended: AtomicBool,
}

/// A start as the region remembers it: (job, rank) and, per switch index, the order of its RPC.
type Started = ((String, u32), Vec<(usize, Arc<StartOrder>)>);

/// A burst request waiting for its grant.
struct Pending {
    /// `burst_requests` value to grant.
    upto: u32,
    /// Grant at this time at the latest (start + one RTT).
    deadline: Instant,
    /// Switches that have not acknowledged yet.
    acks_left: Arc<AtomicUsize>,
}

/// What the gate knows of one region.
#[derive(Default)]
struct RegionState {
    /// `burst_requests` last seen.
    seen: Option<u32>,
    /// Whether the agent is attached (the region has a flow from a served host).
    attached: bool,
    /// Whether attaching failed (not retried while the region stays).
    unwritable: bool,
    /// (job, rank) and the switches of its last start (with the order of its RPC to each), for
    /// `PcnEnd`.
    started: Option<Started>,
    /// The region's `total_bytes` when its outstanding start was sent: the burst is seen when
    /// they grow.
    bytes_at_start: Option<u64>,
}

/// The gate (see the module docs). Runs on its own thread ([`BurstGate::run`]).
pub struct BurstGate {
    cfg: Arc<AgentConfig>,
    shared: Arc<Shared>,
    rt: tokio::runtime::Handle,
    switches: Vec<(crate::config::Switch, SwitchClient<Channel>)>,
    scanner: Scanner,
    regions: BTreeMap<PathBuf, RegionState>,
    pending: BTreeMap<PathBuf, Pending>,
    pid: u32,
}

impl BurstGate {
    /// A gate for `cfg`'s hosts; RPCs go through `rt`. Switch channels connect at their first
    /// RPC. No switch in NIC-only mode.
    pub fn new(cfg: Arc<AgentConfig>, shared: Arc<Shared>, rt: tokio::runtime::Handle) -> Self {
        let switches = if cfg.nic_only {
            Vec::new()
        } else {
            let _g = rt.enter();
            cfg.topology
                .switches
                .iter()
                .filter_map(|s| {
                    let ep =
                        tonic::transport::Endpoint::from_shared(format!("http://{}", s.listen))
                            .ok()?
                            .connect_timeout(Duration::from_secs(1))
                            .tcp_nodelay(true);
                    Some((s.clone(), SwitchClient::new(ep.connect_lazy())))
                })
                .collect()
        };
        let scanner = Scanner::new(&cfg.progress_dir);
        BurstGate {
            cfg,
            shared,
            rt,
            switches,
            scanner,
            regions: BTreeMap::new(),
            pending: BTreeMap::new(),
            pid: std::process::id(),
        }
    }

    /// Polls until `running` clears, then ends the outstanding starts and detaches.
    pub fn run(mut self, running: Arc<AtomicBool>) {
        let poll = Duration::from_micros(self.cfg.pcn.poll_us);
        let mut last_scan: Option<Instant> = None;
        let mut last_beat = Instant::now();
        tracing::info!(
            poll_us = self.cfg.pcn.poll_us,
            threshold_bytes = self.cfg.pcn.threshold_bytes,
            switches = self.switches.len(),
            "PCN burst gate running"
        );
        while running.load(Ordering::SeqCst) {
            let full = last_scan.is_none_or(|t| t.elapsed() >= SCAN_EVERY);
            if full {
                self.scan();
                last_scan = Some(Instant::now());
            }
            if last_beat.elapsed() >= HEARTBEAT_EVERY {
                self.heartbeat();
                last_beat = Instant::now();
            }
            self.poll_once(full);
            let idle = self.pending.is_empty() && !self.regions.values().any(|st| st.attached);
            std::thread::sleep(if idle { IDLE_POLL.max(poll) } else { poll });
        }
        self.shutdown();
    }

    fn scan(&mut self) {
        match self.scanner.scan() {
            Ok(report) => {
                for p in report.removed {
                    self.pending.remove(&p);
                    if let Some(st) = self.regions.remove(&p) {
                        if let Some((key, sw)) = st.started {
                            let sw: Vec<usize> = sw.into_iter().map(|(i, _)| i).collect();
                            self.send_end(&key, &sw, false);
                        }
                    }
                }
            }
            Err(e) => {
                tracing::debug!(dir = %self.scanner.dir().display(), error = %e, "progress directory unreadable")
            }
        }
    }

    fn heartbeat(&self) {
        for (path, st) in &self.regions {
            if st.attached {
                if let Some(r) = self.scanner.region(path) {
                    let _ = r.heartbeat();
                }
            }
        }
    }

    /// One pass over the regions: new requests, due grants. An attached region costs a read of
    /// its hot counters ([`mltcp_progress::Region::peek_hot`]), and a checksummed snapshot only
    /// when its request count changed; the others are examined (snapshot, attach when one of
    /// their flows leaves from a served host) only when `full` (after a directory scan).
    fn poll_once(&mut self, full: bool) {
        let paths: Vec<PathBuf> = self
            .scanner
            .regions()
            .map(|r| r.path().to_path_buf())
            .collect();
        let mut burst_seen = Vec::new();
        for path in paths {
            let Some(region) = self.scanner.region(&path) else {
                continue;
            };
            let st = self.regions.entry(path.clone()).or_default();
            if st.unwritable || !(st.attached || full) {
                continue;
            }
            if st.attached {
                let Ok(Some(h)) = region.peek_hot() else {
                    continue;
                };
                if st.bytes_at_start.is_some_and(|b| h.total_bytes > b) {
                    st.bytes_at_start = None;
                    if let Some(started) = st.started.take() {
                        burst_seen.push(started);
                    }
                }
                if st.seen == Some(h.burst_requests) {
                    continue;
                }
            }
            let Ok(snap) = region.snapshot_within(mltcp_progress::reader::FAILING_SNAPSHOT_TIMEOUT)
            else {
                continue;
            };
            if snap.closed() {
                continue;
            }
            let flows = self.served_flows(&snap);
            let Some(st) = self.regions.get_mut(&path) else {
                continue;
            };
            if !st.attached {
                if flows.is_empty() {
                    continue;
                }
                match region.attach(self.pid) {
                    Ok(()) => {
                        st.attached = true;
                        tracing::info!(region = %path.display(), "attached: its before_burst now waits for the agent's grant");
                    }
                    Err(e) => {
                        tracing::warn!(region = %path.display(), error = %e, "cannot attach (not writable?): its bursts go ungated");
                        // Not retried while the region stays.
                        st.unwritable = true;
                        continue;
                    }
                }
                // Requests made before the agent attached were not waited for.
                st.seen = Some(snap.body.hot.burst_requests);
                let _ = region.grant_bursts(snap.body.hot.burst_requests);
                continue;
            }
            let req = snap.body.hot.burst_requests;
            if st.seen == Some(req) {
                continue;
            }
            st.seen = Some(req);
            let key = (snap.body.job.job_id.clone(), snap.body.job.rank);
            let started = self.start(&path, &key, &flows, req);
            if let Some(st) = self.regions.get_mut(&path) {
                if !started.is_empty() {
                    st.started = Some((key, started));
                    st.bytes_at_start = Some(snap.body.hot.total_bytes);
                }
            }
        }
        for (key, sw) in burst_seen {
            self.shared
                .pcn_ends_on_burst
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(job = %key.0, rank = key.1, "burst seen leaving its process: PcnEnd");
            for (i, order) in sw {
                order.end_requested.store(true, Ordering::SeqCst);
                // A start still in flight sends the end itself when it completes.
                if order.done.load(Ordering::SeqCst) && !order.ended.swap(true, Ordering::SeqCst) {
                    self.send_end(&key, &[i], false);
                }
            }
        }
        self.grant_due();
    }

    /// The sending flows of `snap` from one of the agent's hosts, with their path links.
    fn served_flows(&self, snap: &mltcp_progress::Snapshot) -> Vec<(FlowKey, Vec<u32>)> {
        let role = Role::from_raw(snap.body.job.role).unwrap_or(Role::Unknown);
        let topo = &self.cfg.topology;
        let mut out = Vec::new();
        for f in &snap.body.flows {
            let kind = FlowKind::from_raw(f.kind).unwrap_or(FlowKind::Unspecified);
            if !is_sending(role, kind) {
                continue;
            }
            let Some(key) = FlowKey::from_record(f) else {
                continue;
            };
            let Some(h) = topo.host_of(key.src) else {
                continue;
            };
            if !self.cfg.hosts.contains(&h.name) {
                continue;
            }
            out.push((key, topo.path(h, topo.host_of(key.dst))));
        }
        out
    }

    /// Sends the `PcnStart`s of a new request (number `upto`) of the region at `path`, and
    /// queues its grant; grants at once when no switch is on the paths. Returns the switches
    /// (indices) the start went to.
    fn start(
        &mut self,
        path: &std::path::Path,
        key: &(String, u32),
        flows: &[(FlowKey, Vec<u32>)],
        upto: u32,
    ) -> Vec<(usize, Arc<StartOrder>)> {
        let mut per_switch: BTreeMap<usize, (Vec<u64>, Vec<u32>)> = BTreeMap::new();
        for (fk, links) in flows {
            for l in links {
                if let Some(i) = self.switches.iter().position(|(s, _)| s.links.contains(l)) {
                    let e = per_switch.entry(i).or_default();
                    if !e.0.contains(&fk.id()) {
                        e.0.push(fk.id());
                    }
                    if !e.1.contains(l) {
                        e.1.push(*l);
                    }
                }
            }
        }
        if per_switch.is_empty() {
            self.grant(path, upto, false);
            return Vec::new();
        }
        let rtt_us = {
            let rtts = self.shared.rtt_us.lock().unwrap_or_else(|p| p.into_inner());
            flows
                .iter()
                .filter_map(|(fk, _)| rtts.get(&fk.id()).copied())
                .max()
                .unwrap_or(self.cfg.pcn.default_rtt_us)
        };
        let acks_left = Arc::new(AtomicUsize::new(per_switch.len()));
        let mut switches = Vec::new();
        for (i, (flow_ids, links)) in per_switch {
            let Some((sw, client)) = self.switches.get(i) else {
                continue;
            };
            let req = proto::PcnStart {
                job: key.0.clone(),
                rank: key.1,
                flows: flow_ids,
                links,
                threshold_bytes: self.cfg.pcn.threshold_bytes,
                agent: self.cfg.listen.to_string(),
            };
            let (mut c, name) = (client.clone(), sw.name.clone());
            let (acks, shared) = (acks_left.clone(), self.shared.clone());
            let order = Arc::new(StartOrder::default());
            switches.push((i, order.clone()));
            let end = proto::PcnEnd {
                job: key.0.clone(),
                rank: key.1,
            };
            self.shared.pcn_starts.fetch_add(1, Ordering::Relaxed);
            self.rt.spawn(async move {
                match tokio::time::timeout(PCN_RPC_TIMEOUT, c.pcn_start(req)).await {
                    Ok(Ok(r)) => {
                        for e in &r.get_ref().errors {
                            tracing::warn!(switch = %name, error = %e, "PcnStart: switch reports");
                        }
                        acks.fetch_sub(1, Ordering::SeqCst);
                    }
                    Ok(Err(s)) => {
                        shared.rpc_failures.add(crate::shared::RpcKind::PcnStart);
                        tracing::warn!(switch = %name, error = %s.message(), "PcnStart refused");
                    }
                    Err(_) => {
                        shared.rpc_failures.add(crate::shared::RpcKind::PcnStart);
                        tracing::warn!(switch = %name, "PcnStart: no answer within {PCN_RPC_TIMEOUT:?}");
                    }
                }
                order.done.store(true, Ordering::SeqCst);
                if order.end_requested.load(Ordering::SeqCst)
                    && !order.ended.swap(true, Ordering::SeqCst)
                {
                    let _ = tokio::time::timeout(PCN_RPC_TIMEOUT, c.pcn_end(end)).await;
                }
            });
        }
        tracing::debug!(job = %key.0, rank = key.1, rtt_us, switches = switches.len(), "burst request: PCN start sent");
        self.pending.insert(
            path.to_path_buf(),
            Pending {
                upto,
                deadline: Instant::now() + Duration::from_micros(rtt_us),
                acks_left,
            },
        );
        switches
    }

    fn grant_due(&mut self) {
        let now = Instant::now();
        let due: Vec<(PathBuf, u32, bool)> = self
            .pending
            .iter()
            .filter_map(|(p, g)| {
                let acked = g.acks_left.load(Ordering::SeqCst) == 0;
                (acked || now >= g.deadline).then(|| (p.clone(), g.upto, acked && now < g.deadline))
            })
            .collect();
        for (p, upto, on_ack) in due {
            self.pending.remove(&p);
            self.grant(&p, upto, on_ack);
        }
    }

    fn grant(&self, path: &std::path::Path, upto: u32, on_ack: bool) {
        let Some(r) = self.scanner.region(path) else {
            return;
        };
        // Counted before the grant is published, so whoever sees the grant (the writer, then
        // a status query) also sees it counted; taken back if the grant cannot be written.
        self.shared.bursts_granted.fetch_add(1, Ordering::SeqCst);
        if on_ack {
            self.shared
                .bursts_granted_on_ack
                .fetch_add(1, Ordering::SeqCst);
        }
        match r.grant_bursts(upto) {
            Ok(()) => {
                tracing::debug!(region = %path.display(), upto, on_ack, "burst granted");
            }
            Err(e) => {
                self.shared.bursts_granted.fetch_sub(1, Ordering::SeqCst);
                if on_ack {
                    self.shared
                        .bursts_granted_on_ack
                        .fetch_sub(1, Ordering::SeqCst);
                }
                tracing::warn!(region = %path.display(), error = %e, "cannot grant the burst (the writer's wait times out)")
            }
        }
    }

    /// `PcnEnd` of `key` to the switches `sw`; waits (within the RPC deadline) when `wait`.
    fn send_end(&self, key: &(String, u32), sw: &[usize], wait: bool) {
        let timeout = PCN_RPC_TIMEOUT;
        let mut handles = Vec::new();
        for i in sw {
            let Some((_, client)) = self.switches.get(*i) else {
                continue;
            };
            let mut c = client.clone();
            let req = proto::PcnEnd {
                job: key.0.clone(),
                rank: key.1,
            };
            handles.push(
                self.rt
                    .spawn(async move { tokio::time::timeout(timeout, c.pcn_end(req)).await }),
            );
        }
        if wait {
            for h in handles {
                let _ = self.rt.block_on(h);
            }
        }
    }

    fn shutdown(&mut self) {
        // Grant what is pending (the writers would otherwise wait out their timeouts), end the
        // starts, detach.
        let pending: Vec<(PathBuf, u32)> = self
            .pending
            .iter()
            .map(|(p, g)| (p.clone(), g.upto))
            .collect();
        for (p, upto) in pending {
            self.grant(&p, upto, false);
        }
        self.pending.clear();
        let ends: Vec<Started> = self
            .regions
            .values_mut()
            .filter_map(|st| st.started.take())
            .collect();
        let mut by_key: HashMap<(String, u32), Vec<usize>> = HashMap::new();
        for (k, sw) in ends {
            by_key
                .entry(k)
                .or_default()
                .extend(sw.into_iter().map(|(i, _)| i));
        }
        for (k, sw) in by_key {
            self.send_end(&k, &sw, true);
        }
        for (path, st) in &self.regions {
            if st.attached {
                if let Some(r) = self.scanner.region(path) {
                    let _ = r.detach();
                }
            }
        }
        tracing::info!("PCN burst gate stopped");
    }
}
