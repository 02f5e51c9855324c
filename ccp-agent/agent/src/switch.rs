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
//!   [`ThresholdApplier`]; a failed change is logged and counted, never fatal; the bookkeeping
//!   goes on. The change runs under the state's lock, so concurrent changes reach the qdisc in
//!   the order of the bookkeeping (a change takes well under a millisecond; one the kernel does
//!   not answer fails after `[pcn] apply_timeout_ms`);
//! - every slot, and on every request, the table moves to the current wall-clock slot, so expired
//!   slots are dropped.
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

use crate::config::{EcnQueue, QdiscKind, Switch, SwitchPcn, Topology};
use crate::proto::{self, switch_server};
use crate::wall_us;
use mlcc_sched::pcn::{BurstId, PcnConfig, PcnThresholds};
use mlcc_sched::{
    FlowId, LinkId, LinkLoadTable, RateSample, Schedule, SlotClock, RATE_WINDOW_SLOTS,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::{Request, Response, Status};

/// Sets a queue's ECN marking threshold. The daemon uses [`NetlinkApplier`]; tests use
/// [`RecordingRunner`], which records the change instead of making it.
pub trait ThresholdApplier: Send + Sync {
    /// Gives `q` the marking threshold `threshold_bytes`; `Err` describes the failure (the
    /// qdisc, the step, the kernel's error or a timeout).
    fn apply(&self, q: &EcnQueue, threshold_bytes: u32) -> Result<(), String>;
}

/// Changes the qdisc over rtnetlink ([`ecn_qdisc::QdiscChanger`]: one `NETLINK_ROUTE` socket per
/// network namespace, opened inside it; a change takes well under a millisecond, where one `ip
/// netns exec NS tc ...` process per change took over a second in the testbed's emulated VM).
/// What a change keeps is in [`ecn_qdisc`]'s docs: fq_codel gets only its `ce_threshold`; RED
/// keeps its weight, flags, max_P and child queue (its packets are not purged, unlike `tc qdisc
/// change ... red limit L`).
pub struct NetlinkApplier {
    changer: Mutex<ecn_qdisc::QdiscChanger>,
}

impl NetlinkApplier {
    /// An applier whose requests fail after `timeout` without the kernel's answer.
    pub fn new(timeout: Duration) -> Self {
        NetlinkApplier {
            changer: Mutex::new(ecn_qdisc::QdiscChanger::new(timeout)),
        }
    }
}

/// Where `q` is and the threshold that gives it `threshold_bytes` (see [`tc_command`] for the
/// conversions).
pub fn qdisc_change(
    q: &EcnQueue,
    threshold_bytes: u32,
) -> (ecn_qdisc::QdiscPath, ecn_qdisc::Threshold) {
    let path = ecn_qdisc::QdiscPath {
        netns: q.netns.clone(),
        dev: q.dev.clone(),
        parent: q.parent.clone(),
    };
    let t = match q.qdisc {
        QdiscKind::FqCodel => ecn_qdisc::Threshold::FqCodelCeUs(fq_codel_ce_us(q, threshold_bytes)),
        QdiscKind::Red => ecn_qdisc::Threshold::Red {
            min_bytes: threshold_bytes,
            max_bytes: threshold_bytes.saturating_add(q.red_span_bytes),
            avpkt_bytes: q.red_avpkt_bytes,
            rate_bps: q.capacity_bps,
        },
    };
    (path, t)
}

/// fq_codel's `ce_threshold` for `threshold_bytes`, µs: the time the link needs to send them at
/// its capacity (rounded up, at least 1 µs, at most u32::MAX): fq_codel marks on sojourn time.
fn fq_codel_ce_us(q: &EcnQueue, threshold_bytes: u32) -> u32 {
    let us = (u128::from(threshold_bytes) * 8_000_000)
        .div_ceil(u128::from(q.capacity_bps.max(1)))
        .max(1);
    u32::try_from(us).unwrap_or(u32::MAX)
}

impl ThresholdApplier for NetlinkApplier {
    fn apply(&self, q: &EcnQueue, threshold_bytes: u32) -> Result<(), String> {
        let (path, t) = qdisc_change(q, threshold_bytes);
        self.changer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set(&path, t)
            .map_err(|e| e.to_string())
    }
}

/// Records each change as its [`tc_command`] line instead of making it (tests, dry runs); fails
/// every change when `fail` is set.
#[derive(Default)]
pub struct RecordingRunner {
    /// The changes, as `tc` argument vectors, in order.
    pub commands: Mutex<Vec<Vec<String>>>,
    /// Whether every change fails.
    pub fail: bool,
}

impl RecordingRunner {
    /// The changes recorded so far, each joined by spaces.
    pub fn lines(&self) -> Vec<String> {
        self.commands
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|c| c.join(" "))
            .collect()
    }
}

impl ThresholdApplier for RecordingRunner {
    fn apply(&self, q: &EcnQueue, threshold_bytes: u32) -> Result<(), String> {
        self.commands
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(tc_command(q, threshold_bytes));
        if self.fail {
            Err(String::from("recording runner set to fail"))
        } else {
            Ok(())
        }
    }
}

/// The `tc` command equivalent to giving `q` the marking threshold `threshold_bytes` (logs,
/// tests, and for an operator to reproduce a change by hand; the daemon itself changes the qdisc
/// over rtnetlink, [`NetlinkApplier`]):
///
/// - fq_codel: `tc qdisc change dev DEV root fq_codel ce_threshold Nus`, where N is the time the
///   link needs to send `threshold_bytes` at its capacity (rounded up, at least 1 µs): fq_codel
///   marks on sojourn time, not bytes;
/// - red: `tc qdisc change dev DEV root red limit L min T max T+S avpkt A bandwidth Bbit
///   probability 1.0 ecn` (step marking from T bytes, as a DCTCP switch; tc derives `burst`).
///   Unlike the rtnetlink change, this `tc` line replaces RED's child queue (dropping its
///   packets) and recomputes the weight from `burst`.
///
/// With a `parent` the qdisc is named by `parent P` instead of `root`; with a `netns` the
/// command is `ip netns exec NS tc ...`.
pub fn tc_command(q: &EcnQueue, threshold_bytes: u32) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    if let Some(ns) = &q.netns {
        v.extend(["ip", "netns", "exec", ns.as_str()].map(String::from));
    }
    v.extend(["tc", "qdisc", "change", "dev", q.dev.as_str()].map(String::from));
    match &q.parent {
        Some(p) => v.extend([String::from("parent"), p.clone()]),
        None => v.push(String::from("root")),
    }
    match q.qdisc {
        QdiscKind::FqCodel => {
            v.extend([
                String::from("fq_codel"),
                String::from("ce_threshold"),
                format!("{}us", fq_codel_ce_us(q, threshold_bytes)),
            ]);
        }
        QdiscKind::Red => {
            let max = u64::from(threshold_bytes) + u64::from(q.red_span_bytes);
            // The limit stays above max even when a start asks for more than the initial
            // threshold (never applied: thresholds are capped at the initial one).
            let limit = u64::from(q.red_limit_bytes).max(max + 1);
            v.extend([
                String::from("red"),
                String::from("limit"),
                limit.to_string(),
                String::from("min"),
                threshold_bytes.to_string(),
                String::from("max"),
                max.to_string(),
                String::from("avpkt"),
                q.red_avpkt_bytes.to_string(),
                String::from("bandwidth"),
                format!("{}bit", q.capacity_bps),
                String::from("probability"),
                String::from("1.0"),
                String::from("ecn"),
            ]);
        }
    }
    v
}

/// Most PCN starts a switch keeps outstanding: the gRPC service is unauthenticated (see the
/// module docs), and a flood of starts under distinct names must not grow the state without
/// bound. Far above any real count (one per process of a job, each for at most the timeout).
pub const MAX_PCN_STARTS: usize = 4096;
/// Longest job name a start may carry, bytes (a progress region's job id has at most 63).
pub const MAX_JOB_BYTES: usize = 255;

/// One ECN link of the switch: its queue, its PCN bookkeeping, the threshold last applied.
struct EcnLink {
    queue: EcnQueue,
    pcn: PcnThresholds,
    applied: u32,
}

/// An outstanding PCN start.
struct Burst {
    id: BurstId,
    links: Vec<u32>,
    flows: Vec<u64>,
    slot: u64,
    at_ms: u64,
}

/// PCN state of a switch (see the module docs).
struct PcnState {
    policy: SwitchPcn,
    links: BTreeMap<u32, EcnLink>,
    bursts: HashMap<(String, u32), Burst>,
    next_id: u64,
    runner: Arc<dyn ThresholdApplier>,
    starts: u64,
    expired: u64,
    threshold_failures: u64,
}

impl PcnState {
    /// Applies `threshold` to `link` if it differs from the applied one; returns the error.
    fn apply(&mut self, link: u32, threshold: u32, force: bool) -> Option<String> {
        let l = self.links.get_mut(&link)?;
        if l.applied == threshold && !force {
            return None;
        }
        l.applied = threshold;
        let t0 = Instant::now();
        match self.runner.apply(&l.queue, threshold) {
            Ok(()) => {
                tracing::info!(
                    link,
                    threshold_bytes = threshold,
                    took_us = t0.elapsed().as_micros() as u64,
                    "ECN threshold applied"
                );
                None
            }
            Err(e) => {
                self.threshold_failures += 1;
                let msg = format!(
                    "link {link}: setting the threshold to {threshold} B (`{}`) failed: {e}",
                    tc_command(&l.queue, threshold).join(" ")
                );
                tracing::warn!(error = %msg, "setting the ECN threshold failed");
                Some(msg)
            }
        }
    }

    /// Takes the start of `key` off its links and applies the resulting thresholds.
    fn finish(&mut self, key: &(String, u32)) -> (u32, Vec<String>) {
        let Some(b) = self.bursts.remove(key) else {
            return (0, Vec::new());
        };
        let mut errors = Vec::new();
        for l in &b.links {
            let t = match self.links.get_mut(l) {
                Some(e) => e.pcn.on_arrival(LinkId(*l), b.id),
                None => continue,
            };
            errors.extend(self.apply(*l, t, false));
        }
        (b.links.len() as u32, errors)
    }
}

/// The switch service's RPCs, in the order of [`Served::requests`].
pub const SWITCH_RPCS: [&str; 4] = ["FetchFeedback", "UpdateSchedule", "PcnStart", "PcnEnd"];

/// What a switch daemon served since it started (its metrics, `--metrics-addr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// Requests received, per RPC of [`SWITCH_RPCS`] (answered or refused).
    pub requests: [u64; 4],
    /// Link entries sent in `FetchFeedback` replies.
    pub feedback_links: u64,
}

/// The table of one switch, and its PCN state.
pub struct SwitchState {
    /// The switch's name.
    pub name: String,
    table: LinkLoadTable,
    pcn: PcnState,
    epoch: Instant,
    served: Served,
}

impl SwitchState {
    /// The state of `switch` of `topo`, its table at the current wall-clock slot; ECN
    /// thresholds are applied over rtnetlink ([`NetlinkApplier`]).
    pub fn new(
        topo: &Topology,
        switch: &Switch,
        clock: SlotClock,
    ) -> Result<Self, mlcc_sched::SchedError> {
        let runner = Arc::new(NetlinkApplier::new(Duration::from_millis(
            topo.pcn.apply_timeout_ms,
        )));
        Self::with_runner(topo, switch, clock, runner)
    }

    /// [`SwitchState::new`] with the commands run by `runner`. Nothing is run yet (see
    /// [`SwitchState::apply_initial_thresholds`]).
    pub fn with_runner(
        topo: &Topology,
        switch: &Switch,
        clock: SlotClock,
        runner: Arc<dyn ThresholdApplier>,
    ) -> Result<Self, mlcc_sched::SchedError> {
        let mut links = BTreeMap::new();
        for l in &switch.links {
            let Some(q) = topo.ecn.get(l) else { continue };
            let pcn = PcnThresholds::new(PcnConfig {
                initial_threshold_pkts: q.initial_threshold_bytes,
                combine: topo.pcn.combine,
                max_age_slots: topo.pcn.timeout_ms,
            })?;
            links.insert(
                *l,
                EcnLink {
                    queue: q.clone(),
                    pcn,
                    applied: q.initial_threshold_bytes,
                },
            );
        }
        let pcn = PcnState {
            policy: topo.pcn,
            links,
            bursts: HashMap::new(),
            next_id: 1,
            runner,
            starts: 0,
            expired: 0,
            threshold_failures: 0,
        };
        let mut table = LinkLoadTable::new(clock, clock.slot_at(wall_us()));
        for l in &switch.links {
            let cap = topo
                .links
                .get(l)
                .copied()
                .ok_or(mlcc_sched::SchedError::UnknownLink(LinkId(*l)))?;
            table.add_link(LinkId(*l), cap)?;
        }
        Ok(Self {
            name: switch.name.clone(),
            table,
            pcn,
            epoch: Instant::now(),
            served: Served::default(),
        })
    }

    /// What the daemon served so far.
    pub fn served(&self) -> Served {
        self.served
    }

    /// The whole table as `FetchFeedback` of every link answers it (`ccp-agent status
    /// --switch` and the metrics read this), not counted as served.
    pub fn snapshot(&mut self) -> proto::FeedbackReply {
        let all = proto::FeedbackRequest::default();
        // Every link of `link_ids()` is the switch's own: this request cannot be refused.
        self.feedback(&all).unwrap_or_default()
    }

    /// Milliseconds since the state was made (the PCN clock).
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Sets every ECN link to its current threshold (the initial one without starts), whatever
    /// was applied before: at start-up, and at shutdown after [`SwitchState::end_all_pcn`].
    /// Returns the failures.
    pub fn apply_initial_thresholds(&mut self) -> Vec<String> {
        let links: Vec<(u32, u32)> = self
            .pcn
            .links
            .iter()
            .map(|(l, e)| (*l, e.pcn.threshold_pkts(LinkId(*l))))
            .collect();
        links
            .into_iter()
            .filter_map(|(l, t)| self.pcn.apply(l, t, true))
            .collect()
    }

    /// Drops every outstanding start (at shutdown), restoring the initial thresholds.
    pub fn end_all_pcn(&mut self) -> Vec<String> {
        let keys: Vec<(String, u32)> = self.pcn.bursts.keys().cloned().collect();
        keys.into_iter()
            .flat_map(|k| self.pcn.finish(&k).1)
            .collect()
    }

    /// `PcnStart` at time `now_ms` (of [`SwitchState::now_ms`]) in `slot`: replaces an earlier
    /// start of the same (job, rank), lowers the thresholds of the start's ECN links, applies
    /// them. Errors: an empty job or a zero threshold, named.
    pub fn pcn_start(
        &mut self,
        req: &proto::PcnStart,
        now_ms: u64,
        slot: u64,
    ) -> Result<proto::PcnAck, String> {
        if req.job.is_empty() || req.job.len() > MAX_JOB_BYTES {
            return Err(format!(
                "PcnStart: job name of {} bytes, must be 1..={MAX_JOB_BYTES}",
                req.job.len()
            ));
        }
        if req.threshold_bytes == 0 {
            return Err(format!(
                "PcnStart of job {:?} rank {}: threshold_bytes = 0, must be > 0",
                req.job, req.rank
            ));
        }
        self.expire_pcn(now_ms);
        let key = (req.job.clone(), req.rank);
        if self.pcn.bursts.len() >= MAX_PCN_STARTS && !self.pcn.bursts.contains_key(&key) {
            return Err(format!(
                "PcnStart of job {:?} rank {}: {MAX_PCN_STARTS} starts already outstanding",
                req.job, req.rank
            ));
        }
        let (_, mut errors) = self.pcn.finish(&key);
        let mut links: Vec<u32> = req
            .links
            .iter()
            .copied()
            .filter(|l| self.pcn.links.contains_key(l))
            .collect();
        links.sort_unstable();
        links.dedup();
        self.pcn.starts += 1;
        let id = BurstId(self.pcn.next_id);
        self.pcn.next_id += 1;
        for l in &links {
            let t = match self.pcn.links.get_mut(l) {
                Some(e) => e
                    .pcn
                    .on_start(LinkId(*l), id, req.threshold_bytes, now_ms)
                    .map_err(|e| format!("PcnStart on link {l}: {e}"))?,
                None => continue,
            };
            errors.extend(self.pcn.apply(*l, t, false));
        }
        tracing::debug!(job = %req.job, rank = req.rank, agent = %req.agent, links = ?links, threshold_bytes = req.threshold_bytes, "PCN start");
        let ecn_links = links.len() as u32;
        if ecn_links > 0 {
            self.pcn.bursts.insert(
                key,
                Burst {
                    id,
                    links,
                    flows: req.flows.clone(),
                    slot,
                    at_ms: now_ms,
                },
            );
        }
        Ok(proto::PcnAck { ecn_links, errors })
    }

    /// `PcnEnd`: drops the start of (job, rank), restoring thresholds; an unknown one changes
    /// nothing.
    pub fn pcn_end(&mut self, req: &proto::PcnEnd) -> proto::PcnAck {
        let (ecn_links, errors) = self.pcn.finish(&(req.job.clone(), req.rank));
        proto::PcnAck { ecn_links, errors }
    }

    /// Drops the starts older than `[pcn] timeout_ms` at `now_ms`, restoring thresholds.
    /// Returns how many expired.
    pub fn expire_pcn(&mut self, now_ms: u64) -> usize {
        let timeout = self.pcn.policy.timeout_ms;
        let old: Vec<(String, u32)> = self
            .pcn
            .bursts
            .iter()
            .filter(|(_, b)| now_ms.saturating_sub(b.at_ms) > timeout)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &old {
            tracing::info!(job = %k.0, rank = k.1, timeout_ms = timeout, "PCN start expired: no burst seen");
            self.pcn.expired += 1;
            self.pcn.finish(k);
        }
        old.len()
    }

    /// The ECN threshold of `link` now, bytes, and its outstanding starts (`None`: no ECN queue).
    pub fn ecn_threshold(&self, link: u32) -> Option<(u32, usize)> {
        let e = self.pcn.links.get(&link)?;
        Some((
            e.pcn.threshold_pkts(LinkId(link)),
            e.pcn.outstanding(LinkId(link)),
        ))
    }

    /// `tc` failures so far.
    pub fn threshold_failures(&self) -> u64 {
        self.pcn.threshold_failures
    }

    /// The bursts that arrived with an update of `flow` achieving `achieved_bps` in
    /// `achieved_slot`: their starts are finished.
    fn bursts_seen(&mut self, flow: u64, achieved_bps: u64, achieved_slot: u64) -> Vec<String> {
        if achieved_bps == 0 {
            return Vec::new();
        }
        let keys: Vec<(String, u32)> = self
            .pcn
            .bursts
            .iter()
            .filter(|(_, b)| b.flows.contains(&flow) && achieved_slot >= b.slot)
            .map(|(k, _)| k.clone())
            .collect();
        let mut errors = Vec::new();
        for k in keys {
            tracing::debug!(job = %k.0, rank = k.1, flow, "PCN burst arrived");
            errors.extend(self.pcn.finish(&k).1);
        }
        errors
    }

    /// Moves the table to `slot` if it is later than the current one.
    pub fn advance(&mut self, slot: u64) {
        if slot > self.table.current_slot() {
            // Never fails going forward.
            let _ = self.table.advance_to(slot);
        }
    }

    /// `FetchFeedback` on the state.
    pub fn feedback(
        &mut self,
        req: &proto::FeedbackRequest,
    ) -> Result<proto::FeedbackReply, String> {
        self.advance(req.slot.max(self.table.clock().slot_at(wall_us())));
        let links: Vec<LinkId> = if req.links.is_empty() {
            self.table.link_ids()
        } else {
            req.links.iter().map(|l| LinkId(*l)).collect()
        };
        let start = self.table.current_slot();
        let mut out = Vec::with_capacity(links.len());
        for l in links {
            let mut load = self
                .table
                .link_load_bps(l)
                .map_err(|_| format!("link {} is not owned by switch {:?}", l.0, self.name))?;
            for f in &req.exclude_flows {
                let (Some(path), Some(s)) = (
                    self.table.flow_path(FlowId(*f)),
                    self.table.flow_schedule(FlowId(*f)),
                ) else {
                    continue;
                };
                if path.contains(&l) {
                    for (i, cell) in load.iter_mut().enumerate() {
                        *cell = cell.saturating_sub(s.rate_bps_at(start.saturating_add(i as u64)));
                    }
                }
            }
            let (ecn_threshold_bytes, outstanding) = self.ecn_threshold(l.0).unwrap_or((0, 0));
            out.push(proto::LinkFeedback {
                link: l.0,
                capacity_bps: self.table.capacity_bps(l).unwrap_or(0),
                estimate_bps: self.table.estimate_bps(l).unwrap_or(0),
                load_bps: load,
                ecn_threshold_bytes,
                pcn_outstanding: outstanding as u32,
            });
        }
        Ok(proto::FeedbackReply {
            start_slot: start,
            links: out,
            flows: self.table.flow_count() as u32,
            pcn_starts: self.pcn.starts,
            pcn_expired: self.pcn.expired,
            threshold_failures: self.pcn.threshold_failures,
        })
    }

    /// `UpdateSchedule` on the state: admission of each schedule (see the module docs), rate
    /// samples, PCN bursts seen.
    pub fn update(&mut self, req: &proto::ScheduleUpdate) -> proto::UpdateReply {
        self.advance(req.slot.max(self.table.clock().slot_at(wall_us())));
        let now_ms = self.now_ms();
        self.expire_pcn(now_ms);
        let mine = self.table.link_ids();
        let mut reply = proto::UpdateReply::default();
        for f in &req.flows {
            let links: Vec<LinkId> = f
                .links
                .iter()
                .map(|l| LinkId(*l))
                .filter(|l| mine.contains(l))
                .collect();
            let flow = FlowId(f.flow);
            let r = if f.rates_bps.is_empty() || links.is_empty() {
                match self.table.remove_flow(flow) {
                    Ok(_) | Err(mlcc_sched::SchedError::UnknownFlow(_)) => Ok(None),
                    Err(e) => Err(e),
                }
            } else {
                self.table
                    .admit(
                        flow,
                        &links,
                        &Schedule {
                            start_slot: f.start_slot,
                            rates_bps: f.rates_bps.clone(),
                        },
                    )
                    .map(Some)
            };
            let seen = self.bursts_seen(f.flow, f.achieved_bps, f.achieved_slot);
            reply.errors.extend(seen);
            match r {
                Ok(admitted) => {
                    reply.accepted += 1;
                    if let Some(a) = admitted {
                        reply.admitted.push(proto::FlowSchedule {
                            flow: f.flow,
                            links: links.iter().map(|l| l.0).collect(),
                            start_slot: a.start_slot,
                            rates_bps: a.rates_bps,
                            ..Default::default()
                        });
                    }
                }
                Err(e) => reply
                    .errors
                    .push(format!("flow {:#x} from {}: {e}", f.flow, req.agent)),
            }
            let cur = self.table.current_slot();
            if f.achieved_bps > 0
                && f.achieved_slot < cur
                && f.achieved_slot + RATE_WINDOW_SLOTS as u64 >= cur
            {
                for l in &links {
                    let s = RateSample {
                        slot: f.achieved_slot,
                        rate_bps: f.achieved_bps,
                        app_limited: f.app_limited,
                    };
                    if let Err(e) = self.table.record_rate(*l, s) {
                        reply
                            .errors
                            .push(format!("flow {:#x} rate sample: {e}", f.flow));
                    }
                }
            }
        }
        reply
    }

    /// The table (for tests and status).
    pub fn table(&self) -> &LinkLoadTable {
        &self.table
    }
}

/// The gRPC service over a shared [`SwitchState`].
#[derive(Clone)]
pub struct SwitchService {
    state: Arc<Mutex<SwitchState>>,
}

impl SwitchService {
    /// A service over `state`.
    pub fn new(state: Arc<Mutex<SwitchState>>) -> Self {
        Self { state }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SwitchState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[tonic::async_trait]
impl switch_server::Switch for SwitchService {
    async fn fetch_feedback(
        &self,
        req: Request<proto::FeedbackRequest>,
    ) -> Result<Response<proto::FeedbackReply>, Status> {
        let mut s = self.lock();
        s.served.requests[0] += 1;
        let r = s.feedback(req.get_ref());
        if let Ok(r) = &r {
            s.served.feedback_links += r.links.len() as u64;
        }
        r.map(Response::new).map_err(Status::invalid_argument)
    }

    async fn update_schedule(
        &self,
        req: Request<proto::ScheduleUpdate>,
    ) -> Result<Response<proto::UpdateReply>, Status> {
        let reply = {
            let mut s = self.lock();
            s.served.requests[1] += 1;
            s.update(req.get_ref())
        };
        for e in &reply.errors {
            tracing::warn!(error = %e, "schedule refused");
        }
        Ok(Response::new(reply))
    }

    async fn pcn_start(
        &self,
        req: Request<proto::PcnStart>,
    ) -> Result<Response<proto::PcnAck>, Status> {
        let mut s = self.lock();
        s.served.requests[2] += 1;
        let (now, slot) = (s.now_ms(), s.table().clock().slot_at(wall_us()));
        s.pcn_start(req.get_ref(), now, slot)
            .map(Response::new)
            .map_err(Status::invalid_argument)
    }

    async fn pcn_end(
        &self,
        req: Request<proto::PcnEnd>,
    ) -> Result<Response<proto::PcnAck>, Status> {
        let mut s = self.lock();
        s.served.requests[3] += 1;
        Ok(Response::new(s.pcn_end(req.get_ref())))
    }
}

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

/// [`serve`] with the thresholds applied by `runner`: sets every ECN link to its initial
/// threshold, advances the table every slot and expires PCN starts (checked every 10 ms),
/// and at shutdown drops the outstanding starts so the initial thresholds are back.
pub async fn serve_with(
    topo: &Topology,
    switch: &Switch,
    clock: SlotClock,
    listener: Option<tokio::net::TcpListener>,
    metrics: Option<std::net::TcpListener>,
    runner: Arc<dyn ThresholdApplier>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let state = Arc::new(Mutex::new(SwitchState::with_runner(
        topo, switch, clock, runner,
    )?));
    let (metrics_stop, metrics_stopped) = tokio::sync::oneshot::channel::<()>();
    let metrics_task = metrics.map(|l| {
        let registry = Arc::new(crate::metrics::switch_registry(state.clone()));
        tokio::spawn(async move {
            let stopped = async {
                let _ = metrics_stopped.await;
            };
            if let Err(e) = crate::metrics::serve(l, registry, stopped).await {
                tracing::warn!(error = %format!("{e:#}"), "metrics server stopped");
            }
        })
    });
    {
        let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
        let failed = s.apply_initial_thresholds();
        if !failed.is_empty() {
            tracing::warn!(failures = failed.len(), "some ECN queues did not take their initial threshold (see above); PCN bookkeeping goes on");
        }
    }
    let ticker = {
        let state = state.clone();
        tokio::spawn(async move {
            let mut iv = tokio::time::interval(Duration::from_millis(10));
            let mut last = 0;
            loop {
                iv.tick().await;
                let slot = clock.slot_at(wall_us());
                let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
                s.advance(slot);
                let now = s.now_ms();
                s.expire_pcn(now);
                if slot != last {
                    last = slot;
                    tracing::debug!(slot, flows = s.table().flow_count(), "switch slot");
                }
            }
        })
    };
    let svc = switch_server::SwitchServer::new(SwitchService::new(state.clone()));
    tracing::info!(switch = %switch.name, links = ?switch.links, listen = %switch.listen, "switch daemon serving");
    let router = tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .add_service(svc);
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
    state
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .end_all_pcn();
    r.map_err(|e| anyhow::anyhow!("switch {:?} on {}: {e}", switch.name, switch.listen))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn state() -> SwitchState {
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

    fn fb(
        s: &mut SwitchState,
        links: &[u32],
        exclude: &[u64],
    ) -> Result<proto::FeedbackReply, String> {
        let slot = s.table().current_slot();
        s.feedback(&proto::FeedbackRequest {
            links: links.to_vec(),
            exclude_flows: exclude.to_vec(),
            slot,
        })
    }

    #[test]
    fn schedules_add_up_and_exclusion_and_removal_work() {
        let mut s = state();
        let slot = s.table().current_slot();
        let fs = |flow, rates: Vec<u64>| proto::FlowSchedule {
            flow,
            links: vec![1, 10],
            start_slot: slot,
            rates_bps: rates,
            ..Default::default()
        };
        let r = s.update(&proto::ScheduleUpdate {
            agent: "a".into(),
            slot,
            flows: vec![fs(1, vec![5, 6]), fs(2, vec![1])],
        });
        assert_eq!((r.accepted, r.errors.len()), (2, 0), "{r:?}");
        let f = fb(&mut s, &[10], &[]).unwrap();
        assert_eq!(f.links[0].load_bps[..2], [6, 6]);
        assert_eq!(f.links[0].capacity_bps, 40_000_000);
        let f = fb(&mut s, &[10], &[1]).unwrap();
        assert_eq!(f.links[0].load_bps[..2], [1, 0]);
        // Replacing and removing.
        s.update(&proto::ScheduleUpdate {
            agent: "a".into(),
            slot,
            flows: vec![fs(1, vec![2]), fs(2, vec![])],
        });
        let f = fb(&mut s, &[], &[]).unwrap();
        assert_eq!(f.flows, 1);
        assert_eq!(f.links.len(), 2, "all links");
        assert_eq!(f.links[0].load_bps[..2], [2, 0]);
        // An unknown link is refused by name.
        let e = fb(&mut s, &[99], &[]).unwrap_err();
        assert!(e.contains("link 99"), "{e}");
        // A flow whose path avoids the switch is not stored.
        let other = proto::FlowSchedule {
            flow: 7,
            links: vec![1],
            start_slot: slot,
            rates_bps: vec![3],
            ..Default::default()
        };
        s.update(&proto::ScheduleUpdate {
            agent: "a".into(),
            slot,
            flows: vec![other],
        });
        assert_eq!(s.table().flow_count(), 1);
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

    fn ecn_state(combine: &str, fail: bool) -> (SwitchState, Arc<RecordingRunner>) {
        let topo = Topology::parse_text(
            Path::new("topo.toml"),
            &ECN_TOPO.replace("COMBINE", combine),
        )
        .unwrap();
        let runner = Arc::new(RecordingRunner {
            fail,
            ..Default::default()
        });
        let s = SwitchState::with_runner(
            &topo,
            &topo.switches[0],
            SlotClock::new(1_000_000, 4).unwrap(),
            runner.clone(),
        )
        .unwrap();
        (s, runner)
    }

    fn start(job: &str, flows: &[u64], links: &[u32], threshold_bytes: u32) -> proto::PcnStart {
        proto::PcnStart {
            job: job.into(),
            rank: 0,
            flows: flows.to_vec(),
            links: links.to_vec(),
            threshold_bytes,
            agent: "a".into(),
        }
    }

    fn thr(s: &SwitchState, l: u32) -> (u32, usize) {
        s.ecn_threshold(l).unwrap()
    }

    #[test]
    fn tc_command_strings() {
        let (s, _) = ecn_state("min", false);
        let q10 = &s.pcn.links[&10].queue;
        // 15 000 bytes at 40 Mbit/s take 3 ms.
        assert_eq!(
            tc_command(q10, 15_000).join(" "),
            "tc qdisc change dev s-eth10 root fq_codel ce_threshold 3000us"
        );
        assert_eq!(tc_command(q10, 1).last().map(String::as_str), Some("1us"));
        let q11 = &s.pcn.links[&11].queue;
        assert_eq!(
            tc_command(q11, 15_000).join(" "),
            "ip netns exec sw tc qdisc change dev s-eth11 parent 1:1 red limit 300000 min 15000 \
             max 16500 avpkt 1500 bandwidth 100000000bit probability 1.0 ecn"
        );
    }

    #[test]
    fn pcn_overlapping_starts_take_the_minimum_and_bursts_restore() {
        let (mut s, runner) = ecn_state("min", false);
        assert!(s.apply_initial_thresholds().is_empty());
        assert_eq!(runner.lines().len(), 2, "both ECN links set at start-up");
        assert_eq!(s.ecn_threshold(12), None, "no ECN queue on link 12");
        let slot = s.table().current_slot();
        // Job a on links 10 and 11 (and 12, ignored), job b on link 10 only.
        let ack = s
            .pcn_start(&start("a", &[1], &[1, 10, 11, 12], 15_000), 0, slot)
            .unwrap();
        assert_eq!((ack.ecn_links, ack.errors.len()), (2, 0));
        let ack = s
            .pcn_start(&start("b", &[2], &[10], 30_000), 1, slot)
            .unwrap();
        assert_eq!(ack.ecn_links, 1);
        assert_eq!(thr(&s, 10), (15_000, 2));
        assert_eq!(thr(&s, 11), (15_000, 1));
        let l = runner.lines();
        assert_eq!(
            l.len(),
            4,
            "{l:?}: b's start leaves link 10 at a's lower threshold"
        );
        assert!(l[2].ends_with("fq_codel ce_threshold 3000us"), "{l:?}");
        assert!(
            l[3].contains("red limit 300000 min 15000 max 16500"),
            "{l:?}"
        );
        // An update of an unrelated flow, or of a's flow without bytes or from an earlier slot,
        // is no arrival.
        let upd = |flow, achieved_bps, achieved_slot| proto::ScheduleUpdate {
            agent: "a".into(),
            slot,
            flows: vec![proto::FlowSchedule {
                flow,
                links: vec![10],
                start_slot: slot,
                rates_bps: vec![1000],
                achieved_bps,
                achieved_slot,
                app_limited: true,
            }],
        };
        s.update(&upd(3, 5_000, slot));
        s.update(&upd(1, 0, slot));
        s.update(&upd(1, 5_000, slot - 1));
        assert_eq!(thr(&s, 10), (15_000, 2));
        // a's burst arrives: link 10 goes to b's threshold, link 11 back to its initial one.
        s.update(&upd(1, 5_000, slot));
        assert_eq!(thr(&s, 10), (30_000, 1));
        assert_eq!(thr(&s, 11), (30_000, 0));
        let l = runner.lines();
        assert!(l[4].ends_with("ce_threshold 6000us"), "{l:?}");
        assert!(l[5].contains("min 30000 max 31500"), "{l:?}");
        // b's PcnEnd: link 10 back to 60 000 bytes (12 ms at 40 Mbit/s).
        let ack = s.pcn_end(&proto::PcnEnd {
            job: "b".into(),
            rank: 0,
        });
        assert_eq!(ack.ecn_links, 1);
        assert_eq!(thr(&s, 10), (60_000, 0));
        assert!(runner.lines()[6].ends_with("ce_threshold 12000us"));
        // An unknown end changes nothing and runs nothing.
        assert_eq!(
            s.pcn_end(&proto::PcnEnd {
                job: "b".into(),
                rank: 0
            })
            .ecn_links,
            0
        );
        assert_eq!(runner.lines().len(), 7);
        // Counters in the feedback.
        let f = fb(&mut s, &[10, 12], &[]).unwrap();
        assert_eq!(
            (f.pcn_starts, f.pcn_expired, f.threshold_failures),
            (2, 0, 0)
        );
        assert_eq!(
            (
                f.links[0].ecn_threshold_bytes,
                f.links[1].ecn_threshold_bytes
            ),
            (60_000, 0)
        );
        // Bad starts are refused by name.
        let e = s
            .pcn_start(&start("c", &[], &[10], 0), 2, slot)
            .unwrap_err();
        assert!(e.contains("threshold_bytes = 0"), "{e}");
        assert!(s.pcn_start(&start("", &[], &[10], 5), 2, slot).is_err());
        let long = "j".repeat(MAX_JOB_BYTES + 1);
        assert!(s.pcn_start(&start(&long, &[], &[10], 5), 2, slot).is_err());
        // Starts are bounded; a start of a known (job, rank) still replaces.
        for i in 0..MAX_PCN_STARTS {
            s.pcn_start(&start(&format!("f{i}"), &[], &[10], 5), 3, slot)
                .unwrap();
        }
        let e = s
            .pcn_start(&start("one-more", &[], &[10], 5), 3, slot)
            .unwrap_err();
        assert!(e.contains("already outstanding"), "{e}");
        assert!(s.pcn_start(&start("f0", &[], &[10], 6), 3, slot).is_ok());
    }

    #[test]
    fn pcn_harmonic_combination_and_restart_replaces() {
        let (mut s, _) = ecn_state("harmonic", false);
        let slot = s.table().current_slot();
        s.pcn_start(&start("a", &[1], &[10], 30_000), 0, slot)
            .unwrap();
        s.pcn_start(&start("b", &[2], &[10], 30_000), 0, slot)
            .unwrap();
        assert_eq!(thr(&s, 10), (15_000, 2));
        s.pcn_start(&start("c", &[3], &[10], 60_000), 0, slot)
            .unwrap();
        assert_eq!(thr(&s, 10), (12_000, 3)); // 1 / (2/30000 + 1/60000)
                                              // A repeated start of the same (job, rank) replaces the earlier one.
        s.pcn_start(&start("c", &[3], &[10], 15_000), 0, slot)
            .unwrap();
        assert_eq!(thr(&s, 10), (7_500, 3));
        // Shutdown drops them all.
        assert!(s.end_all_pcn().is_empty());
        assert_eq!(thr(&s, 10), (60_000, 0));
    }

    #[test]
    fn pcn_start_without_a_burst_expires_and_failures_are_counted() {
        let (mut s, runner) = ecn_state("min", true);
        let slot = s.table().current_slot();
        let ack = s
            .pcn_start(&start("a", &[1], &[10], 15_000), 100, slot)
            .unwrap();
        assert_eq!(ack.errors.len(), 1, "{ack:?}");
        assert!(
            ack.errors[0].contains("tc qdisc change dev s-eth10"),
            "{ack:?}"
        );
        // The bookkeeping goes on although tc failed.
        assert_eq!(thr(&s, 10), (15_000, 1));
        assert_eq!(s.expire_pcn(600), 0, "500 ms old: not yet");
        assert_eq!(thr(&s, 10), (15_000, 1));
        assert_eq!(s.expire_pcn(601), 1);
        assert_eq!(thr(&s, 10), (60_000, 0));
        assert_eq!(s.threshold_failures(), 2);
        assert_eq!(runner.lines().len(), 2);
        let f = fb(&mut s, &[10], &[]).unwrap();
        assert_eq!((f.pcn_expired, f.threshold_failures), (1, 2));
        // A later burst of the expired start finds nothing to restore.
        assert_eq!(
            s.pcn_end(&proto::PcnEnd {
                job: "a".into(),
                rank: 0
            })
            .ecn_links,
            0
        );
    }

    #[test]
    fn admission_keeps_a_link_within_capacity() {
        let mut s = state();
        let slot = s.table().current_slot();
        // Two agents planned the whole 40 Mbit/s of link 10 from the same feedback.
        let req = |agent: &str, flow| proto::ScheduleUpdate {
            agent: agent.into(),
            slot,
            flows: vec![proto::FlowSchedule {
                flow,
                links: vec![1, 10],
                start_slot: slot,
                rates_bps: vec![30_000_000, 30_000_000],
                ..Default::default()
            }],
        };
        let a = s.update(&req("a", 1));
        let b = s.update(&req("b", 2));
        assert_eq!(a.admitted[0].rates_bps, [30_000_000, 30_000_000]);
        assert_eq!(b.admitted[0].rates_bps, [10_000_000, 10_000_000]);
        assert_eq!(b.admitted[0].links, [10]);
        let f = fb(&mut s, &[10], &[]).unwrap();
        assert_eq!(f.links[0].load_bps[..2], [40_000_000, 40_000_000]);
    }

    #[test]
    fn achieved_rates_lower_the_estimate_when_network_limited() {
        let mut s = state();
        let slot = s.table().current_slot() + 1;
        s.advance(slot);
        let fs = proto::FlowSchedule {
            flow: 1,
            links: vec![10],
            start_slot: slot,
            rates_bps: vec![1],
            achieved_bps: 20_000_000,
            achieved_slot: slot - 1,
            app_limited: false,
        };
        s.update(&proto::ScheduleUpdate {
            agent: "a".into(),
            slot,
            flows: vec![fs],
        });
        let f = fb(&mut s, &[10], &[1]).unwrap();
        assert_eq!(f.links[0].estimate_bps, 20_000_000);
    }
}
