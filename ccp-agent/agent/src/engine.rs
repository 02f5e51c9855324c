// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The agent's per-slot work: monitoring, Alg. 1 + Alg. 2 for every registered flow, rates
//! through CCP, schedules to the switches, dependency notices to the other agents.
//!
//! "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers", Sec. IV (Alg. 1 and 2,
//! the control protocol of Sec. IV-C) and Sec. V (the prototype's scheduler on CCP). Every slot
//! (`slot_us`, aligned to multiples of its length on the wall clock, so that agents and switches
//! agree on slot numbers) [`AgentCore::on_slot`]:
//!
//! 1. turns the reports of the past slot into each flow's achieved rate, and records per NIC
//!    link the total achieved rate as a rate sample (network-limited when a flow that had bytes
//!    to send got less than 80% of its planned bytes; the table's available-bandwidth estimate,
//!    the largest sample of the past 4 slots, comes from these);
//! 2. refreshes the monitoring block (progress regions) and installs the datapath program on the
//!    flows of newly registered processes (unregistered flows get none: native MLTCP);
//! 3. fetches the switches' feedback for the links its flows cross (`FetchFeedback`, one RPC
//!    per switch, with a deadline; for a switch that does not answer, its last feedback stands
//!    in while it is less than K slots old, and after that its links are planned at their
//!    configured capacity less what this agent planned on them: the other agents' load is then
//!    unknown, but a plan never exceeds the link itself);
//! 4. groups the flows it plans into coflows of one job and plans each group jointly
//!    (`mlcc_sched::decide_group`: Alg. 1 over the group, each member advancing by the same
//!    fraction of its bytes left per slot, Varys's MADD, then Alg. 2's raise per member; see
//!    `mlcc_sched::coflow`) on the combined link views (NIC links from the agent's own table,
//!    switch links from the feedback plus what this agent planned earlier in the slot; the
//!    group's own schedules excluded; every flow planned this slot leaves the NIC table
//!    before the first group is planned, so the order below decides on NIC links too, not the
//!    plans of the slot before), and stores each member's new schedule. Groups: a job's
//!    ring flows (all that this agent plans: in the VM testbed, where one agent serves every
//!    emulated host, the whole ring); per parameter server, the aggregation flows into it, then
//!    its broadcast flows; any other flow alone. Order (`mlcc_sched::planning_key`): the unit
//!    further into its iteration first, then smallest effective bottleneck first (Varys's SEBF
//!    at the links' configured capacities; a PS's aggregation group before its broadcast
//!    group; ties by job), so one job's coflow completes before another's takes the
//!    links they share, rather than each job getting one fast and one starved flow. Planned
//!    one flow at a time (before), Alg. 1 gave each shared link wholly to one flow of each ring
//!    job in the VM testbed, and both jobs ran 3-6x slower than under cubic. Members on other
//!    agents are tied in by the notices of step 6, as before; a group of one plans exactly as
//!    `mlcc_sched::decide` does;
//! 5. sends the schedules to the switches (`UpdateSchedule`, one RPC per switch, waited for
//!    within what is left of `rpc_timeout_ms` after step 3, at least a quarter of it; not
//!    waited for from a switch whose feedback failed this slot), which *admit* them: each is clipped to what is left on the
//!    switch's links at that moment ([`mlcc_sched::LinkLoadTable::admit`]), and the agent cuts
//!    its plan to the admitted rates (`Decision::clipped_to`; over several switches, the least of
//!    their admissions). This fixes the race between agents that plan in the same slot: both
//!    read the feedback before either's update lands, so both may plan the same free bandwidth;
//!    the switch serves the updates one at a time and the second gets only what the first left.
//!    A switch that does not answer in time admits nothing the agent knows of: the plan stands
//!    as made (the switch clips it anyway if the request lands late, so its table still holds no
//!    more than the capacity; only this slot's applied rate may exceed it);
//! 6. sends each flow's accumulated bytes F_i to the agent of its receiver (`Notify`; handled in
//!    place when the receiver is one of this agent's hosts); a receiver cuts its successor flows
//!    by the excess (ring: (F_succ − F_i − chunk)+, a worker's own first chunk G/W being free of
//!    any dependency; PS broadcast: (F_j − F_a^min)+) with
//!    `mlcc_sched::reduce`, re-planning their later slots against what the other flows hold
//!    now. Only a notice of the current slot cuts; the latest notices of the same iteration are
//!    the dependencies of the next planning (ring: F_j of the predecessor; PS worker: F_b^max,
//!    which the PS's agent sends as `bound_bytes`; PS: F_a^min over its workers' notices), and
//!    are forgotten after K slots;
//! 7. sets every flow's `Rate` (bytes/s, u32) for the slot: the planned rate (a slot that
//!    completes the flow: its MADD share of the available bandwidth), at least
//!    `min_rate_bps` (a 0 would stall the flow); a flow whose job gave no bytes per iteration is
//!    not planned and runs at its NIC's capacity. The Rate is sent every slot even when it did
//!    not change, which keeps the module's optional `ccp_heartbeat_ms` satisfied;
//! 8. publishes the schedules changed later in the slot (reductions by notices; admitted as
//!    well, without waiting) and the status; the flows' RTTs go to the shared state, for the
//!    PCN burst gate ([`crate::burst`]).
//!
//! Progress of a flow: F_i (sent bytes) is the bytes the flow's reports acknowledged since its
//! job's current iteration began; the bytes left are the flow's share of the job's bytes per
//! iteration minus F_i, so bytes still queued in the socket after the library handed them over
//! are still planned, and a job between iterations (all acknowledged) reserves nothing. Each
//! report is dated on CLOCK_MONOTONIC, the progress region's clock (the datapath time of its
//! ACK, `Report.now`, calibrated against arrivals: `DatapathClock`); when the region's
//! iteration number has moved, only the reports dated after the region's `iter_start_ns` count
//! for the new iteration. The datapath program reports once per slot and
//! also at the ACK that empties the pipe, so an iteration's tail is reported before the next
//! iteration begins: before that report existed, the tail waited in the datapath for the next
//! iteration's first ACK and counted as the next iteration's (seen in the VM: a ring flow
//! with 2.36 MB "acknowledged" of a 2.01 MB iteration, then held at the rate floor with data
//! left while its peer waited).

use crate::config::AgentConfig;
use crate::flows::FlowKey;
use crate::monitor::{Monitor, Registration};
use crate::proto::{
    self, agent::agent_client::AgentClient, notice_kind, switch::switch_client::SwitchClient,
};
use crate::shared::Shared;
use mlcc_sched::{
    Decision, Dependency, FlowId, FlowProgress, LinkId, LinkLoadTable, LinkView, PathView,
    RateSample, SlotClock,
};
use mltcp_progress::{FlowKind, Paradigm, Role, NO_RANK};
use portus::ipc::Ipc;
use portus::lang::Scope;
use portus::{DatapathInfo, DatapathTrait, Report};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::Channel;

/// Name of the datapath program in portus's table.
pub const PROGRAM_NAME: &str = "mlcc";

/// The agent's gRPC side: runtime handle and clients.
pub struct Net {
    rt: tokio::runtime::Handle,
    switches: Vec<(crate::config::Switch, SwitchClient<Channel>)>,
    peers: HashMap<SocketAddr, AgentClient<Channel>>,
    /// Deadline of `FetchFeedback`, which the slot waits for (`rpc_timeout_ms`).
    timeout: Duration,
    /// Deadline of the RPCs nobody waits for (`UpdateSchedule`, `Notify`): one slot.
    slot: Duration,
    name: String,
}

/// A channel to `addr` that connects at its first RPC; each call carries its own deadline.
fn channel(addr: SocketAddr) -> Option<Channel> {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .ok()
        .map(|e| e.connect_timeout(Duration::from_secs(1)).connect_lazy())
}

impl Net {
    /// Clients for the switches of `cfg` (none in NIC-only mode): each connected at once when
    /// it answers within a second, else lazily at its first RPC.
    pub fn new(cfg: &AgentConfig, rt: tokio::runtime::Handle) -> Self {
        let timeout = Duration::from_millis(cfg.rpc_timeout_ms);
        let list = if cfg.nic_only {
            Vec::new()
        } else {
            cfg.topology.switches.clone()
        };
        let switches = rt.block_on(async move {
            let mut out = Vec::new();
            for s in list {
                let Ok(ep) =
                    tonic::transport::Endpoint::from_shared(format!("http://{}", s.listen))
                else {
                    continue;
                };
                let ep = ep.connect_timeout(Duration::from_secs(1));
                let ch = match tokio::time::timeout(Duration::from_secs(1), ep.connect()).await {
                    Ok(Ok(ch)) => ch,
                    _ => ep.connect_lazy(),
                };
                out.push((s, SwitchClient::new(ch)));
            }
            out
        });
        Net {
            rt,
            switches,
            peers: HashMap::new(),
            timeout,
            slot: Duration::from_millis(cfg.slot_ms),
            name: cfg.listen.to_string(),
        }
    }

    fn peer(&mut self, addr: SocketAddr) -> Option<AgentClient<Channel>> {
        if let Some(c) = self.peers.get(&addr) {
            return Some(c.clone());
        }
        let _g = self.rt.enter();
        let c = AgentClient::new(channel(addr)?);
        self.peers.insert(addr, c.clone());
        Some(c)
    }
}

/// The least of the switches' `admitted` schedules of a flow, slot by slot over its `planned`
/// one. A slot before a switch's admitted schedule begins (the switch had moved on to a later
/// slot when the request came: that slot is over for it) is not cut by that switch.
fn least_admitted(
    planned: &mlcc_sched::Schedule,
    admitted: &[mlcc_sched::Schedule],
) -> mlcc_sched::Schedule {
    let rates = (0..planned.rates_bps.len() as u64)
        .map(|i| {
            let slot = planned.start_slot + i;
            let own = planned.rate_bps_at(slot);
            admitted
                .iter()
                .map(|a| {
                    if slot < a.start_slot {
                        own
                    } else {
                        a.rate_bps_at(slot)
                    }
                })
                .fold(own, u64::min)
        })
        .collect();
    mlcc_sched::Schedule {
        start_slot: planned.start_slot,
        rates_bps: rates,
    }
}

/// What a flow was planned in a slot.
#[derive(Clone, Debug)]
struct Planned {
    slot: u64,
    decision: Decision,
    view: PathView,
    /// The flow's MADD share of its path's available bandwidth in the current slot, bit/s: the
    /// pacing rate of a slot that completes it (`GroupDecision::share_now_bps`).
    available_now_bps: u64,
    /// For a flow planned no bytes in the current slot (between iterations, waiting on a
    /// dependency, or deferred by Alg. 1): its share of what every plan of the slot leaves
    /// free on its path, bit/s ([`AgentCore::share_spare`]); 0 for a flow with bytes planned.
    spare_bps: u64,
    progress: FlowProgress,
    local: Vec<LinkId>,
    remote: Vec<u32>,
}

/// A flow to plan in the current slot, as one member of its group.
#[derive(Clone, Debug)]
struct Member {
    local: u64,
    id: u64,
    key: FlowKey,
    reg: Registration,
    local_links: Vec<LinkId>,
    remote: Vec<u32>,
    progress: FlowProgress,
    dependency: Dependency,
}

impl Member {
    fn request(&self) -> mlcc_sched::FlowRequest {
        mlcc_sched::FlowRequest {
            flow: FlowId(self.id),
            path: self
                .local_links
                .iter()
                .copied()
                .chain(self.remote.iter().map(|l| LinkId(*l)))
                .collect(),
            progress: self.progress,
            dependency: self.dependency,
        }
    }
}

/// A coflow group of this agent's flows: (job, class, unit, phase). Class 0: a ring (unit 0);
/// class 1: a parameter server (unit: the PS's rank; phase 0 its aggregation flows, 1 its
/// broadcast flows); class 2: any other flow alone (unit: its local id).
type GroupKey = (String, u8, u64, u8);

/// Dates a flow's reports on CLOCK_MONOTONIC from the datapath clock they carry (`Report.now`,
/// `Ack.now` at the reporting ACK, µs since the datapath's own origin). The offset between the
/// two clocks is estimated as the least (arrival − datapath time) seen so far: a report always
/// arrives after its ACK, so that least value is the offset plus the smallest delivery delay,
/// and it only gets better. Dating by arrival alone put a report that a loaded agent read late
/// after the next iteration's start, and its bytes in the wrong iteration.
#[derive(Clone, Copy, Debug, Default)]
struct DatapathClock {
    /// Least (arrival µs − datapath µs) so far; `None` before the first report.
    offset_us: Option<u64>,
}

impl DatapathClock {
    /// The CLOCK_MONOTONIC time (ns) of a report carrying datapath time `dp_now_us` that
    /// arrived at `arrival_ns`; never later than its arrival.
    fn date_ns(&mut self, dp_now_us: u64, arrival_ns: u64) -> u64 {
        let arrival_us = arrival_ns / 1000;
        let seen = arrival_us.wrapping_sub(dp_now_us);
        let offset = self.offset_us.map_or(seen, |o| o.min(seen));
        self.offset_us = Some(offset);
        dp_now_us
            .wrapping_add(offset)
            .saturating_mul(1000)
            .min(arrival_ns)
    }
}

/// Each idle flow's share of the spare capacity, bit/s: `paths` lists (flow id, links of its
/// path); `free(link, id)` is what the slot's plans leave free on the link (bit/s, the flow's
/// own plan excluded). A link's free capacity is split equally among the idle flows that cross
/// it, and a flow gets the least of its links' shares (0 for a flow without links). Same order
/// as `paths`.
fn spare_shares(paths: &[(u64, Vec<u32>)], free: impl Fn(u32, u64) -> u64) -> Vec<u64> {
    let mut per_link: HashMap<u32, u64> = HashMap::new();
    for (_, links) in paths {
        for l in links {
            *per_link.entry(*l).or_insert(0) += 1;
        }
    }
    paths
        .iter()
        .map(|(id, links)| {
            links
                .iter()
                .map(|l| free(*l, *id) / per_link.get(l).copied().unwrap_or(1).max(1))
                .min()
                .unwrap_or(0)
        })
        .collect()
}

/// Splits reports' acknowledged bytes, given as (date in CLOCK_MONOTONIC ns, bytes), at
/// `start_ns`: (bytes of reports dated before it, bytes of those dated at or after it); with
/// `start_ns` 0, (0, all of them).
fn split_acked(log: &[(u64, u64)], start_ns: u64) -> (u64, u64) {
    log.iter().fold((0u64, 0u64), |(before, after), &(t, b)| {
        if t < start_ns {
            (before.saturating_add(b), after)
        } else {
            (before, after.saturating_add(b))
        }
    })
}

/// The congestion window that goes with a pacing rate of `rate_bps` (bit/s): the bytes of
/// `max(slot / 4, 2 x RTT)` at that rate, at least 4 segments of 1448 bytes, at most
/// `max_bytes` (the configured `cwnd_bytes`).
///
/// Why a rate needs a window: Linux sizes a TSO segment by the pacing rate *and* the RTT
/// (`tcp_tso_autosize()` in net/ipv4/tcp_output.c adds `sk_gso_max_size >> (min_rtt_us >> 9)`),
/// so below 512 µs of RTT a segment is up to 64 KB whatever the rate, and its departure time
/// (`tcp_update_skb_after_send()`, the EDT model) moves the next one by up to half of
/// len/rate: at a 1 Mbit/s floor, 260 ms. A raised rate takes effect only at the next ACK and
/// does not pull that departure time back, so a flow held at the floor and then planned at the
/// full link sat idle for a quarter of a second per segment (seen in the VM: a PS job's pushes
/// at 1.2 Mbit/s for 0.5 s while planned at 100 Mbit/s). A segment is at most half the window
/// (`tcp_cwnd_test()`), so with this window the gap a segment leaves at the old rate is at
/// most an eighth of a slot or an RTT (at rates where 4 segments are more than that: the time
/// of 2 segments, 23 ms at 1 Mbit/s), and the window never limits the rate by itself: it
/// holds at least two RTTs of it.
fn paced_cwnd_bytes(rate_bps: u64, rtt_us: u64, slot_us: u64, max_bytes: u32) -> u32 {
    const MIN_BYTES: u64 = 4 * 1448;
    let span_us = (slot_us / 4).max(rtt_us.saturating_mul(2));
    let bytes = u128::from(rate_bps) * u128::from(span_us) / 8_000_000;
    u32::try_from(bytes.clamp(u128::from(MIN_BYTES), u128::from(max_bytes.max(1))))
        .unwrap_or(max_bytes)
}

fn group_key(r: &Registration, local: u64) -> GroupKey {
    match (r.paradigm, r.role, r.kind) {
        (Paradigm::Ring, _, FlowKind::RingSend | FlowKind::Unspecified) => (r.job.clone(), 0, 0, 0),
        (Paradigm::ParameterServer, Role::Worker, FlowKind::PsPush) => {
            (r.job.clone(), 1, u64::from(r.peer_rank), 0)
        }
        (Paradigm::ParameterServer, Role::ParameterServer, FlowKind::PsPull) => {
            (r.job.clone(), 1, u64::from(r.rank), 1)
        }
        _ => (r.job.clone(), 2, local, 0),
    }
}

/// One CCP flow of a datapath.
struct FlowEntry<I: Ipc> {
    dp: portus::Datapath<I>,
    scope: Option<Scope>,
    key: FlowKey,
    id: u64,
    // Reports since the last slot tick. The acknowledged bytes of each report, with the time of
    // the report's ACK (CLOCK_MONOTONIC ns, see `DatapathClock`): the slot's achieved rate, and
    // split at the region's iteration start when the iteration moves.
    acked_log: Vec<(u64, u64)>,
    // The datapath clock of this flow's reports, calibrated against CLOCK_MONOTONIC.
    dp_clock: DatapathClock,
    lost: u64,
    rtt_us: u64,
    // Progress bookkeeping.
    reg: Option<Registration>,
    iteration: Option<u64>,
    acked_iter: u64,
    plan: Option<Planned>,
    applied_bps: Option<u32>,
    // The Cwnd last set (bytes): see `paced_cwnd_bytes`.
    applied_cwnd: Option<u32>,
    achieved_bps: u64,
    app_limited: bool,
    lost_last: u64,
    unthrottled_bps: u64,
}

/// The per-slot driver (see the module docs). Lives on the portus thread.
pub struct AgentCore<I: Ipc> {
    cfg: Arc<AgentConfig>,
    clock: SlotClock,
    monitor: Monitor,
    flows: BTreeMap<u64, FlowEntry<I>>,
    next_local: u64,
    table: LinkLoadTable,
    local_links: HashSet<u32>,
    slot: Option<u64>,
    shared: Arc<Shared>,
    net: Net,
    notices: HashMap<(String, u32, u32, u32), proto::DependencyNotice>,
    gone: Vec<u64>,
    failing: HashSet<String>,
    pending: HashMap<String, Vec<proto::FlowSchedule>>,
    last_feedback: HashMap<u32, (u64, u64, Vec<u64>)>,
    /// This slot's switch feedback: link → (estimate, load of the other agents' flows).
    feedback: HashMap<u32, (u64, Vec<u64>)>,
    /// This slot's plans of this agent's flows on switch links, per link and slot.
    adds: HashMap<u32, Vec<u64>>,
    /// When the progress regions were last read.
    last_refresh: Option<std::time::Instant>,
}

/// The datapath program's report fields and control register the agent uses.
pub const REQUIRED_FIELDS: [&str; 6] = [
    "Report.acked",
    "Report.lost",
    "Report.rtt",
    "Report.rate",
    "Report.micros",
    "Control.slot_us",
];

impl<I: Ipc> AgentCore<I> {
    /// A core for `cfg`; `net` carries the gRPC clients. Errors: a NIC link refused by the
    /// table (never with a checked config).
    pub fn new(
        cfg: Arc<AgentConfig>,
        shared: Arc<Shared>,
        net: Net,
    ) -> Result<Self, mlcc_sched::SchedError> {
        let clock = SlotClock::new(cfg.slot_ms * 1000, cfg.horizon)?;
        let mut table = LinkLoadTable::new(clock, clock.slot_at(crate::wall_us()));
        let mut local_links = HashSet::new();
        for h in cfg.served() {
            let cap = cfg.topology.links.get(&h.nic).copied().unwrap_or(1);
            table.add_link(LinkId(h.nic), cap)?;
            local_links.insert(h.nic);
        }
        let monitor = Monitor::new(&cfg.progress_dir);
        Ok(AgentCore {
            cfg,
            clock,
            monitor,
            flows: BTreeMap::new(),
            next_local: 1,
            table,
            local_links,
            slot: None,
            shared,
            net,
            notices: HashMap::new(),
            gone: Vec::new(),
            failing: HashSet::new(),
            pending: HashMap::new(),
            last_feedback: HashMap::new(),
            feedback: HashMap::new(),
            adds: HashMap::new(),
            last_refresh: None,
        })
    }

    /// The slot grid.
    pub fn clock(&self) -> SlotClock {
        self.clock
    }

    fn served_src(&self, key: &FlowKey) -> Option<u64> {
        let h = self.cfg.topology.host_of(key.src)?;
        if !self.cfg.hosts.contains(&h.name) {
            return None;
        }
        self.cfg.topology.links.get(&h.nic).copied()
    }

    /// A CREATE: remembers the flow and installs the program at once when its process is
    /// registered. Returns the agent's id of the flow.
    pub fn new_flow(&mut self, dp: portus::Datapath<I>, info: &DatapathInfo) -> u64 {
        let key = FlowKey::from_ccp(info.src_ip, info.src_port, info.dst_ip, info.dst_port);
        let local = self.next_local;
        self.next_local += 1;
        let unthrottled_bps = self.served_src(&key).unwrap_or(u64::from(u32::MAX) * 8);
        let mut f = FlowEntry {
            dp,
            scope: None,
            key,
            id: key.id(),
            acked_log: Vec::new(),
            dp_clock: DatapathClock::default(),
            lost: 0,
            rtt_us: 0,
            reg: None,
            iteration: None,
            acked_iter: 0,
            plan: None,
            applied_bps: None,
            applied_cwnd: None,
            achieved_bps: 0,
            app_limited: true,
            lost_last: 0,
            unthrottled_bps,
        };
        // A burst of CREATEs rescans the regions at most once a millisecond; a flow whose region
        // was missed gets its program at the next slot.
        if self
            .last_refresh
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(1))
        {
            self.monitor.refresh();
            self.last_refresh = Some(std::time::Instant::now());
        }
        f.reg = self.registration(&key);
        tracing::info!(sid = info.sock_id, flow = %key, registered = f.reg.is_some(), "CREATE");
        if f.reg.is_some() && self.cfg.schedule {
            self.install(&mut f);
        }
        self.flows.insert(local, f);
        local
    }

    fn registration(&self, key: &FlowKey) -> Option<Registration> {
        self.served_src(key)?;
        self.monitor.lookup(key).filter(|r| r.sending).cloned()
    }

    fn install(&self, f: &mut FlowEntry<I>) {
        let slot_us = u32::try_from(self.clock.slot_us()).unwrap_or(u32::MAX);
        let rate = u32::try_from(f.unthrottled_bps / 8).unwrap_or(u32::MAX);
        match f.dp.set_program(
            PROGRAM_NAME,
            Some(&[
                ("Cwnd", self.cfg.cwnd_bytes),
                ("Rate", rate),
                ("Control.slot_us", slot_us),
            ]),
        ) {
            Ok(sc) => {
                f.scope = Some(sc);
                f.applied_bps = Some(rate);
                f.applied_cwnd = Some(self.cfg.cwnd_bytes);
                tracing::info!(flow = %f.key, "program installed");
            }
            Err(e) => tracing::warn!(flow = %f.key, error = %e.0, "set_program failed"),
        }
    }

    /// A MEASURE of flow `local`: adds its fields to the slot's measurements.
    pub fn on_report(&mut self, local: u64, m: &Report) {
        let Some(f) = self.flows.get_mut(&local) else {
            return;
        };
        let Some(sc) = &f.scope else { return };
        let get = |name: &str| m.get_field(name, sc).ok();
        if let Some(a) = get("Report.acked") {
            let arrival_ns = mltcp_progress::monotonic_ns();
            let stamp_ns = match get("Report.now") {
                Some(dp_now_us) => f.dp_clock.date_ns(dp_now_us, arrival_ns),
                None => arrival_ns,
            };
            if a > 0 {
                f.acked_log.push((stamp_ns, a));
            }
        }
        if let Some(l) = get("Report.lost") {
            f.lost = f.lost.saturating_add(l);
        }
        if let Some(r) = get("Report.rtt") {
            f.rtt_us = r;
        }
    }

    /// The flow `local` closed.
    pub fn close_flow(&mut self, local: u64) {
        if let Some(f) = self.flows.remove(&local) {
            let _ = self.table.remove_flow(FlowId(f.id));
            self.gone.push(f.id);
            tracing::info!(flow = %f.key, "flow closed");
        }
    }

    /// Number of flows and how many run a program.
    pub fn counts(&self) -> (usize, usize) {
        (
            self.flows.len(),
            self.flows.values().filter(|f| f.scope.is_some()).count(),
        )
    }

    /// The per-slot work (see the module docs); does nothing when the slot of `now_us` was
    /// already handled.
    pub fn on_slot(&mut self, now_us: u64) {
        let slot = self.clock.slot_at(now_us);
        if self.slot.is_some_and(|s| s >= slot) {
            return;
        }
        let started = std::time::Instant::now();
        self.slot = Some(slot);
        let _ = self.table.advance_to(slot);
        // Notices of jobs that stopped sending: forgotten after a horizon of slots.
        let horizon = self.clock.horizon() as u64;
        self.notices
            .retain(|_, n| n.slot.saturating_add(horizon) >= slot);
        self.measure(slot);
        self.refresh_registrations();
        let rpc_started = std::time::Instant::now();
        self.feedback = self.fetch_feedback(slot);
        self.adds.clear();
        let groups = self.groups();
        // Every flow planned this slot first leaves the NIC table: the groups then meet on the
        // NIC links in this slot's SEBF order, as they meet on the switch links (whose feedback
        // excludes all of this agent's flows), instead of behind the plans the other groups
        // made in the slot before (which made the NIC links first come, first served).
        for m in groups.iter().flatten() {
            let _ = self.table.remove_flow(FlowId(m.id));
        }
        for group in groups {
            self.plan_group(&group, slot);
        }
        self.share_spare(slot);
        self.admit_updates(slot, rpc_started);
        self.send_notices(slot);
        let inbox = self.shared.take_inbox();
        for n in inbox {
            self.handle_notice(n);
        }
        // Every slot every controlled flow gets its Rate, changed or not: the keepalive the
        // module's `ccp_heartbeat_ms` expects (set it above the slot length).
        for f in self.flows.values_mut() {
            f.applied_bps = None;
        }
        let locals: Vec<u64> = self.flows.keys().copied().collect();
        for l in locals {
            self.apply(l);
        }
        self.flush_updates(slot);
        self.publish_status(slot);
        let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.shared
            .status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .slot_work_us = us;
    }

    /// Notices arrived from other agents (the gRPC task woke the portus thread).
    pub fn on_wake(&mut self) {
        let inbox = self.shared.take_inbox();
        if inbox.is_empty() {
            return;
        }
        for n in inbox {
            self.handle_notice(n);
        }
        let locals: Vec<u64> = self.flows.keys().copied().collect();
        for l in locals {
            self.apply(l);
        }
        if let Some(slot) = self.slot {
            self.flush_updates(slot);
            self.publish_status(slot);
        }
    }

    fn measure(&mut self, slot: u64) {
        let slot_us = self.clock.slot_us().max(1);
        let mut samples: HashMap<u32, (u64, bool)> = HashMap::new();
        for f in self.flows.values_mut() {
            let (_, acked) = split_acked(&f.acked_log, 0);
            f.lost_last = std::mem::take(&mut f.lost);
            f.achieved_bps = u64::try_from(u128::from(acked) * 8_000_000 / u128::from(slot_us))
                .unwrap_or(u64::MAX);
            f.app_limited = true;
            if let Some(p) = &f.plan {
                if p.slot + 1 == slot {
                    let planned = p.decision.plan.bytes.first().copied().unwrap_or(0);
                    // Network-limited only when the flow fell short of its plan with bytes left
                    // AND saw losses: a shortfall without loss is the application (a ring step
                    // waiting for its predecessor's chunk, a compute phase) or our own pacing
                    // limit, and must not lower the link's estimate -- otherwise the estimate
                    // follows the rate we set, the next plan is lower, and the flows collapse to
                    // the rate floor (seen in the VM smoke test: a lone 2-worker ring job at
                    // 1 Mbit/s, 2.8x its ideal iteration time).
                    let network_limited = planned > 0
                        && acked.saturating_mul(10) < planned.saturating_mul(8)
                        && p.progress.remaining_bytes > acked
                        && f.lost_last > 0;
                    f.app_limited = !network_limited;
                    for l in &p.local {
                        let e = samples.entry(l.0).or_insert((0, true));
                        e.0 = e.0.saturating_add(f.achieved_bps);
                        e.1 &= f.app_limited;
                    }
                }
            }
        }
        {
            let mut rtts = self.shared.rtt_us.lock().unwrap_or_else(|p| p.into_inner());
            rtts.clear();
            for f in self.flows.values().filter(|f| f.rtt_us > 0) {
                rtts.insert(f.id, f.rtt_us);
            }
        }
        for (l, (rate_bps, app_limited)) in samples {
            let _ = self.table.record_rate(
                LinkId(l),
                RateSample {
                    slot: slot.saturating_sub(1),
                    rate_bps,
                    app_limited,
                },
            );
        }
    }

    fn refresh_registrations(&mut self) {
        self.monitor.refresh();
        self.last_refresh = Some(std::time::Instant::now());
        let locals: Vec<u64> = self.flows.keys().copied().collect();
        for l in locals {
            let Some(key) = self.flows.get(&l).map(|f| f.key) else {
                continue;
            };
            let reg = self.registration(&key);
            let Some(mut f) = self.flows.remove(&l) else {
                continue;
            };
            // This slot's acknowledged bytes: the current iteration's, or, when the iteration
            // moved, split at its start between the old one (only logged) and the new one.
            let log = std::mem::take(&mut f.acked_log);
            match &reg {
                Some(r) => {
                    if f.iteration == Some(r.iteration) {
                        let (_, acked) = split_acked(&log, 0);
                        f.acked_iter = f.acked_iter.saturating_add(acked);
                    } else {
                        let (before, after) = split_acked(&log, r.iter_start_ns);
                        tracing::debug!(
                            target: "ccp_agent::progress",
                            flow = %f.key,
                            job = %r.job,
                            rank = r.rank,
                            from = ?f.iteration,
                            to = r.iteration,
                            acked_bytes = f.acked_iter.saturating_add(before),
                            iteration_bytes = ?r.iteration_bytes,
                            "iteration change"
                        );
                        f.iteration = Some(r.iteration);
                        f.acked_iter = after;
                    }
                    if f.scope.is_none() && self.cfg.schedule {
                        self.install(&mut f);
                    }
                }
                None => {
                    if f.reg.is_some() {
                        tracing::info!(flow = %f.key, "no longer registered: unplanned, at NIC capacity");
                        let _ = self.table.remove_flow(FlowId(f.id));
                        self.gone.push(f.id);
                    }
                    f.plan = None;
                }
            }
            f.reg = reg;
            self.flows.insert(l, f);
        }
    }

    /// One `FetchFeedback` per switch whose links this agent's flows cross: link → (capacity,
    /// estimate, load of the others aligned to `slot`).
    fn fetch_feedback(&mut self, slot: u64) -> HashMap<u32, (u64, Vec<u64>)> {
        let mut out = HashMap::new();
        if self.net.switches.is_empty() {
            return out;
        }
        let mut wanted: HashMap<String, (HashSet<u32>, Vec<u64>)> = HashMap::new();
        for f in self.flows.values() {
            if f.reg.is_none() || f.scope.is_none() {
                continue;
            }
            let src = self.cfg.topology.host_of(f.key.src);
            let dst = self.cfg.topology.host_of(f.key.dst);
            let Some(src) = src else { continue };
            for l in self.cfg.topology.path(src, dst) {
                if let Some(s) = self.cfg.topology.switch_of(l) {
                    let e = wanted.entry(s.name.clone()).or_default();
                    e.0.insert(l);
                    if !e.1.contains(&f.id) {
                        e.1.push(f.id);
                    }
                }
            }
        }
        let k = self.clock.horizon();
        let mut tasks = Vec::new();
        for (sw, client) in &self.net.switches {
            let Some((links, exclude)) = wanted.remove(&sw.name) else {
                continue;
            };
            let mut links: Vec<u32> = links.into_iter().collect();
            links.sort_unstable();
            let mut c = client.clone();
            let t = self.net.timeout;
            let req = proto::FeedbackRequest {
                links,
                exclude_flows: exclude,
                slot,
            };
            let wanted_links = req.links.clone();
            let h = self
                .net
                .rt
                .spawn(async move { tokio::time::timeout(t, c.fetch_feedback(req)).await });
            tasks.push((sw.name.clone(), wanted_links, h));
        }
        for (name, wanted_links, h) in tasks {
            let r = self.net.rt.block_on(h);
            match r {
                Ok(Ok(Ok(reply))) => {
                    if self.failing.remove(&name) {
                        tracing::info!(switch = %name, "switch answers again");
                    }
                    let reply = reply.into_inner();
                    for lf in reply.links {
                        let mut load = vec![0u64; k];
                        for (i, cell) in load.iter_mut().enumerate() {
                            let abs = slot.saturating_add(i as u64);
                            if abs >= reply.start_slot {
                                let j =
                                    usize::try_from(abs - reply.start_slot).unwrap_or(usize::MAX);
                                *cell = lf.load_bps.get(j).copied().unwrap_or(0);
                            }
                        }
                        self.last_feedback
                            .insert(lf.link, (slot, lf.estimate_bps, load.clone()));
                        out.insert(lf.link, (lf.estimate_bps, load));
                    }
                }
                other => {
                    self.shared
                        .rpc_failures
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if self.failing.insert(name.clone()) {
                        let why = match other {
                            Ok(Ok(Err(s))) => s.message().to_string(),
                            Ok(Err(_)) => String::from("deadline passed"),
                            _ => String::from("task failed"),
                        };
                        tracing::warn!(switch = %name, error = %why, "FetchFeedback failed: its last feedback (up to K slots old) stands in, then its links are planned at their capacity less this agent's own plans");
                    }
                    for l in wanted_links {
                        let Some((at, est, load)) = self.last_feedback.get(&l) else {
                            continue;
                        };
                        let age = usize::try_from(slot.saturating_sub(*at)).unwrap_or(usize::MAX);
                        if age < k {
                            let mut shifted: Vec<u64> = load.iter().skip(age).copied().collect();
                            shifted.resize(k, 0);
                            out.insert(l, (*est, shifted));
                        }
                    }
                }
            }
        }
        out
    }

    fn dependency(&self, r: &Registration) -> Dependency {
        let same = |n: &&proto::DependencyNotice, kind: u32| {
            n.job == r.job && n.kind == kind && n.to_rank == r.rank && n.iteration == r.iteration
        };
        match (r.paradigm, r.role, r.kind) {
            (Paradigm::Ring, _, FlowKind::RingSend | FlowKind::Unspecified) => self
                .notices
                .values()
                .filter(|n| same(n, notice_kind::RING))
                .map(|n| n.accumulated_bytes)
                .max()
                .map_or(Dependency::Independent, |f| Dependency::Ring {
                    // A worker may be one chunk ahead of what it received: its own chunk.
                    predecessor_bytes: f.saturating_add(r.ring_chunk_bytes.unwrap_or(0)),
                }),
            (Paradigm::ParameterServer, Role::Worker, FlowKind::PsPush) => {
                let b: Vec<u64> = self
                    .notices
                    .values()
                    .filter(|n| same(n, notice_kind::PS_BROADCAST) && n.from_rank == r.peer_rank)
                    .map(|n| n.bound_bytes)
                    .collect();
                Dependency::ps_aggregation(&b)
            }
            (Paradigm::ParameterServer, Role::ParameterServer, FlowKind::PsPull) => {
                let a: Vec<u64> = self
                    .notices
                    .values()
                    .filter(|n| same(n, notice_kind::PS_AGGREGATION))
                    .map(|n| n.accumulated_bytes)
                    .collect();
                Dependency::ps_broadcast(&a)
            }
            _ => Dependency::Independent,
        }
    }

    /// What a flow sees of its path this slot: its NIC links from the agent's table (its own
    /// schedule excluded), its switch links from this slot's feedback plus what the agent
    /// planned on them so far in the slot, less `own` (the flow's own rates, when they are
    /// among those).
    fn path_view(
        &self,
        id: u64,
        local: &[LinkId],
        remote: &[u32],
        own: Option<&[u64]>,
    ) -> Option<PathView> {
        let mut view = match self.table.path_view(local, Some(FlowId(id))) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(flow = id, error = %e, "no path view");
                return None;
            }
        };
        for l in remote {
            let Some(lv) = self.switch_link_view(*l, own) else {
                continue;
            };
            for (i, (vl, va)) in view
                .load_bps
                .iter_mut()
                .zip(view.available_bps.iter_mut())
                .enumerate()
            {
                *vl = vl.saturating_add(lv.load_bps.get(i).copied().unwrap_or(0));
                *va = (*va).min(lv.available_bps.get(i).copied().unwrap_or(0));
            }
        }
        Some(view)
    }

    /// Adds (`add`) or takes off the rates of a plan on this slot's switch-link tally.
    fn tally(&mut self, remote: &[u32], rates: &[u64], add: bool) {
        let k = self.clock.horizon();
        for l in remote {
            let row = self.adds.entry(*l).or_insert_with(|| vec![0; k]);
            for (a, r) in row.iter_mut().zip(rates) {
                *a = if add {
                    a.saturating_add(*r)
                } else {
                    a.saturating_sub(*r)
                };
            }
        }
    }

    /// The flows this agent plans this slot, as coflow groups in planning order (see the
    /// module docs): a job's ring flows; per PS, its aggregation flows, then its broadcast
    /// flows; any other flow alone. Groups of one coflow unit (a ring, or a PS's aggregation and
    /// broadcast) are ordered by `mlcc_sched::planning_key`: the unit further into its
    /// iteration first, then Varys's smallest effective bottleneck first
    /// (`mlcc_sched::effective_bottleneck_us` at the links' configured capacities), ties by
    /// job and unit; members by rank.
    fn groups(&self) -> Vec<Vec<Member>> {
        let mut groups: BTreeMap<GroupKey, Vec<Member>> = BTreeMap::new();
        for (local, f) in &self.flows {
            if f.scope.is_none() {
                continue;
            }
            let Some(m) = self.member(*local) else {
                continue;
            };
            groups.entry(group_key(&m.reg, *local)).or_default().push(m);
        }
        // Per unit (job, class, unit), over all its members: bytes sent and per iteration,
        // and the SEBF bottleneck; the order is `mlcc_sched::planning_key` of them.
        let mut unit_key: HashMap<(String, u8, u64), (u64, u64, u64)> = HashMap::new();
        for (k, members) in &groups {
            let reqs: Vec<mlcc_sched::FlowRequest> = members.iter().map(Member::request).collect();
            let links = &self.cfg.topology.links;
            let gamma = mlcc_sched::effective_bottleneck_us(&reqs, |l| links.get(&l.0).copied())
                .unwrap_or(u64::MAX);
            let e = unit_key.entry((k.0.clone(), k.1, k.2)).or_insert((0, 0, 0));
            for m in members {
                e.0 = e.0.saturating_add(m.progress.sent_bytes);
                e.1 = e.1.saturating_add(m.reg.iteration_bytes.unwrap_or(0));
            }
            e.2 = e.2.max(gamma);
        }
        let mut out: Vec<(mlcc_sched::PlanningKey, GroupKey, Vec<Member>)> = groups
            .into_iter()
            .map(|(k, mut members)| {
                members.sort_by_key(|m| (m.reg.rank, m.local));
                let (sent, total, gamma) = unit_key
                    .get(&(k.0.clone(), k.1, k.2))
                    .copied()
                    .unwrap_or((0, 0, u64::MAX));
                (mlcc_sched::planning_key(sent, total, gamma), k, members)
            })
            .collect();
        out.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        out.into_iter().map(|(_, _, m)| m).collect()
    }

    /// What planning flow `local` needs: its path split into NIC links and switch links, its
    /// progress and dependency. `None` for a flow not planned (no bytes per iteration, no
    /// registration, no link the agent knows of).
    fn member(&self, local: u64) -> Option<Member> {
        let f = self.flows.get(&local)?;
        let reg = f.reg.clone()?;
        let iteration_bytes = reg.iteration_bytes?;
        let src = self.cfg.topology.host_of(f.key.src)?;
        let path = self
            .cfg
            .topology
            .path(src, self.cfg.topology.host_of(f.key.dst));
        let local_links: Vec<LinkId> = path
            .iter()
            .filter(|l| self.local_links.contains(l))
            .map(|l| LinkId(*l))
            .collect();
        let remote: Vec<u32> = path
            .iter()
            .copied()
            .filter(|l| {
                !self.local_links.contains(l)
                    && self.net.switches.iter().any(|(s, _)| s.links.contains(l))
            })
            .collect();
        if local_links.is_empty() && remote.is_empty() {
            tracing::warn!(flow = %f.key, "no link of this agent or its switches on the path: not planned");
            return None;
        }
        let dependency = self.dependency(&reg);
        // Only what the flow may send before its dependencies deliver more is planned (ring:
        // its predecessor's F plus its own chunk; PS broadcast: F_a^min): bytes it cannot send
        // yet reserve nothing, so the links they would hold go to the flows that can send.
        let left = iteration_bytes.saturating_sub(f.acked_iter);
        let remaining_bytes = dependency
            .sendable_bytes(f.acked_iter)
            .map_or(left, |s| s.min(left));
        let progress = FlowProgress {
            sent_bytes: f.acked_iter,
            remaining_bytes,
        };
        Some(Member {
            local,
            id: f.id,
            key: f.key,
            reg,
            local_links,
            remote,
            progress,
            dependency,
        })
    }

    /// What a group sees of link `l` this slot, its members' own schedules excluded: a NIC
    /// link from the agent's table; a switch link from this slot's feedback (or, without it,
    /// its configured capacity) plus what the agent planned on it so far in the slot.
    fn link_view(&self, l: u32, exclude: &[FlowId]) -> Option<LinkView> {
        if self.local_links.contains(&l) {
            return match self.table.link_views(&[LinkId(l)], exclude) {
                Ok(mut v) => v.pop(),
                Err(e) => {
                    tracing::warn!(link = l, error = %e, "no link view");
                    None
                }
            };
        }
        self.switch_link_view(l, None)
    }

    /// What switch link `l` leaves this slot: this slot's feedback (for a switch link without
    /// feedback, its daemon having missed the deadline before it ever answered: its configured
    /// capacity and no load, never as if the link were not there) plus what this agent planned
    /// on it so far in the slot, less `own` (a flow's own rates, when they are among those).
    fn switch_link_view(&self, l: u32, own: Option<&[u64]>) -> Option<LinkView> {
        let k = self.clock.horizon();
        let no_feedback = vec![0u64; k];
        let (est, load) = match self.feedback.get(&l) {
            Some((est, load)) => (*est, load),
            None => (*self.cfg.topology.links.get(&l)?, &no_feedback),
        };
        let add = self.adds.get(&l);
        let mut v = LinkView {
            link: LinkId(l),
            load_bps: vec![0; k],
            available_bps: vec![0; k],
        };
        for (i, (vl, va)) in v
            .load_bps
            .iter_mut()
            .zip(v.available_bps.iter_mut())
            .enumerate()
        {
            let planned = add.and_then(|a| a.get(i)).copied().unwrap_or(0);
            let mine = own.and_then(|o| o.get(i)).copied().unwrap_or(0);
            *vl = load
                .get(i)
                .copied()
                .unwrap_or(0)
                .saturating_add(planned.saturating_sub(mine));
            *va = est.saturating_sub(*vl);
        }
        Some(v)
    }

    /// Alg. 1 + Alg. 2 for one group, jointly (`mlcc_sched::decide_group`), against the
    /// combined link views; stores, tallies and queues each member's schedule.
    fn plan_group(&mut self, members: &[Member], slot: u64) {
        if members.is_empty() {
            return;
        }
        let exclude: Vec<FlowId> = members.iter().map(|m| FlowId(m.id)).collect();
        let mut links: Vec<u32> = Vec::new();
        for m in members {
            for l in m
                .local_links
                .iter()
                .map(|l| l.0)
                .chain(m.remote.iter().copied())
            {
                if !links.contains(&l) {
                    links.push(l);
                }
            }
        }
        let Some(views) = links
            .iter()
            .map(|l| self.link_view(*l, &exclude))
            .collect::<Option<Vec<LinkView>>>()
        else {
            return;
        };
        let reqs: Vec<mlcc_sched::FlowRequest> = members.iter().map(Member::request).collect();
        let g = match mlcc_sched::decide_group(
            &self.clock,
            self.table.current_slot(),
            &reqs,
            &views,
        ) {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!(job = %members[0].reg.job, flows = members.len(), error = %e, "Alg. 2 refused");
                return;
            }
        };
        for (i, (m, d)) in members.iter().zip(g.decisions).enumerate() {
            self.tally(&m.remote, &d.plan.rates_bps, true);
            let planned = Planned {
                slot,
                decision: d,
                view: g.views.get(i).cloned().unwrap_or_default(),
                available_now_bps: g.share_now_bps.get(i).copied().unwrap_or(0),
                spare_bps: 0,
                progress: m.progress,
                local: m.local_links.clone(),
                remote: m.remote.clone(),
            };
            tracing::debug!(
                target: "ccp_agent::plan",
                slot,
                flow = %m.key,
                job = %m.reg.job,
                rank = m.reg.rank,
                iteration = m.reg.iteration,
                sent_bytes = m.progress.sent_bytes,
                remaining_bytes = m.progress.remaining_bytes,
                rate_bps = planned.decision.rate_bps,
                available_now_bps = planned.available_now_bps,
                "planned"
            );
            self.publish_local(m.id, &planned);
            self.queue_update(m.id, &planned);
            if let Some(f) = self.flows.get_mut(&m.local) {
                f.plan = Some(planned);
            }
        }
    }

    /// Work conservation within the slot: every flow planned no bytes in the current slot gets,
    /// instead of the rate floor, an equal share (among such flows on the link) of what this
    /// slot's plans leave free on each link of its path, the least over its path. A burst that
    /// begins mid-slot (a new iteration, a ring chunk that just arrived) then starts at once on
    /// capacity nobody planned, instead of at the floor until the next slot's plan, and takes
    /// nothing any plan holds. The plans and the load tables are unchanged: the share is not a
    /// reservation, and the next slot plans the flow by Alg. 1 and Alg. 2 as before.
    fn share_spare(&mut self, slot: u64) {
        let (locals, paths): (Vec<u64>, Vec<(u64, Vec<u32>)>) = self
            .flows
            .iter()
            .filter_map(|(local, f)| {
                let p = f.plan.as_ref().filter(|p| p.slot == slot)?;
                if p.decision.plan.bytes.first().copied().unwrap_or(0) > 0 {
                    return None;
                }
                let links = p.local.iter().map(|l| l.0).chain(p.remote.iter().copied());
                Some((*local, (f.id, links.collect())))
            })
            .unzip();
        let spares = spare_shares(&paths, |l, id| {
            self.link_view(l, &[FlowId(id)])
                .and_then(|v| v.available_bps.first().copied())
                .unwrap_or(0)
        });
        for (local, spare) in locals.into_iter().zip(spares) {
            if let Some(p) = self.flows.get_mut(&local).and_then(|f| f.plan.as_mut()) {
                p.spare_bps = spare;
            }
        }
    }

    fn publish_local(&mut self, id: u64, p: &Planned) {
        let r = if p.decision.plan.rates_bps.iter().all(|r| *r == 0) {
            self.table.remove_flow(FlowId(id)).map(|_| ())
        } else {
            self.table
                .set_schedule(FlowId(id), &p.local, &p.decision.plan.schedule())
        };
        if let Err(e) = r {
            if !matches!(e, mlcc_sched::SchedError::UnknownFlow(_)) {
                tracing::warn!(flow = id, error = %e, "NIC table refused the schedule");
            }
        }
    }

    fn queue_update(&mut self, id: u64, p: &Planned) {
        if self.net.switches.is_empty() {
            return;
        }
        let (achieved_bps, app_limited) = self
            .flows
            .values()
            .find(|f| f.id == id)
            .map_or((0, true), |f| (f.achieved_bps, f.app_limited));
        let s = p.decision.plan.schedule();
        for (sw, _) in &self.net.switches {
            // Only the switch links the plan was made against (a switch whose feedback is
            // missing did not take part).
            if p.remote.iter().any(|l| sw.links.contains(l)) {
                self.pending
                    .entry(sw.name.clone())
                    .or_default()
                    .push(proto::FlowSchedule {
                        flow: id,
                        links: p.remote.clone(),
                        start_slot: s.start_slot,
                        rates_bps: s.rates_bps.clone(),
                        achieved_bps,
                        achieved_slot: p.slot.saturating_sub(1),
                        app_limited,
                    });
            }
        }
    }

    /// The pending schedule updates of every switch, with removals for the flows gone, as one
    /// request per switch.
    fn take_batches(
        &mut self,
        slot: u64,
    ) -> Vec<(String, SwitchClient<Channel>, proto::ScheduleUpdate)> {
        for id in std::mem::take(&mut self.gone) {
            for (sw, _) in &self.net.switches {
                self.pending
                    .entry(sw.name.clone())
                    .or_default()
                    .push(proto::FlowSchedule {
                        flow: id,
                        ..Default::default()
                    });
            }
        }
        let mut out = Vec::new();
        for (sw, client) in &self.net.switches {
            let Some(flows) = self.pending.remove(&sw.name) else {
                continue;
            };
            out.push((
                sw.name.clone(),
                client.clone(),
                proto::ScheduleUpdate {
                    agent: self.net.name.clone(),
                    slot,
                    flows,
                },
            ));
        }
        out
    }

    /// Sends the pending schedules to the switches and waits for their admission; cuts each
    /// flow's plan of `slot` to the least rates admitted for it. The slot's waits for the
    /// switches share one budget, `rpc_timeout_ms` from `rpc_started` (when `FetchFeedback` was
    /// sent), but the admission gets at least a quarter of it; a switch whose feedback failed
    /// this slot is not waited for (its update goes out as before admission existed, and the
    /// plan stands), so an overloaded switch does not get two deadlines a slot.
    fn admit_updates(&mut self, slot: u64, rpc_started: std::time::Instant) {
        let batches = self.take_batches(slot);
        if batches.is_empty() {
            return;
        }
        let budget = self.net.timeout;
        let t = budget.saturating_sub(rpc_started.elapsed()).max(budget / 4);
        let mut tasks = Vec::new();
        for (name, c, req) in batches {
            if self.failing.contains(&name) {
                drop(self.send_update(name, c, req));
            } else {
                tasks.push((name.clone(), self.send_update(name, c, req)));
            }
        }
        let mut admitted: HashMap<u64, Vec<mlcc_sched::Schedule>> = HashMap::new();
        for (name, h) in tasks {
            // Only the wait is bounded by `t`: a late reply still lands (the switch keeps the
            // admitted schedule), it is just not enforced this slot.
            let waited = self
                .net
                .rt
                .block_on(async move { tokio::time::timeout(t, h).await });
            match waited {
                Ok(Ok(Some(r))) => {
                    for a in r.admitted {
                        admitted
                            .entry(a.flow)
                            .or_default()
                            .push(mlcc_sched::Schedule {
                                start_slot: a.start_slot,
                                rates_bps: a.rates_bps,
                            });
                    }
                }
                _ => {
                    tracing::debug!(switch = %name, "no admission in time: the plans stand as made");
                }
            }
        }
        let locals: Vec<u64> = self.flows.keys().copied().collect();
        for local in locals {
            let Some(f) = self.flows.get(&local) else {
                continue;
            };
            let (Some(p), Some(a)) = (&f.plan, admitted.get(&f.id)) else {
                continue;
            };
            if p.slot != slot {
                continue;
            }
            let a = least_admitted(&p.decision.plan.schedule(), a);
            let d = p.decision.clipped_to(&self.clock, &p.progress, &a);
            if d == p.decision {
                continue;
            }
            let (id, key) = (f.id, f.key);
            tracing::debug!(flow = %key, planned_bps = p.decision.rate_bps, admitted_bps = d.rate_bps, "plan cut to the switch's admission");
            let mut np = p.clone();
            self.tally(&np.remote, &np.decision.plan.rates_bps, false);
            self.tally(&np.remote, &d.plan.rates_bps, true);
            np.decision = d;
            self.publish_local(id, &np);
            if let Some(f) = self.flows.get_mut(&local) {
                f.plan = Some(np);
            }
        }
    }

    fn flush_updates(&mut self, slot: u64) {
        for (name, c, req) in self.take_batches(slot) {
            // Nobody waits: the admission of a reduction (it only lowers the current slot) is
            // left to the switch.
            drop(self.send_update(name, c, req));
        }
    }

    /// Sends one `UpdateSchedule` (deadline: a slot); the task yields the reply (`None` on
    /// failure, counted), for whoever wants to wait for it.
    fn send_update(
        &self,
        name: String,
        mut c: SwitchClient<Channel>,
        req: proto::ScheduleUpdate,
    ) -> tokio::task::JoinHandle<Option<proto::UpdateReply>> {
        let t = self.net.slot;
        let shared = self.shared.clone();
        self.net.rt.spawn(async move {
            match tokio::time::timeout(t, c.update_schedule(req)).await {
                Ok(Ok(r)) => {
                    let r = r.into_inner();
                    for e in &r.errors {
                        tracing::warn!(switch = %name, error = %e, "schedule refused");
                    }
                    Some(r)
                }
                _ => {
                    shared
                        .rpc_failures
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::debug!(switch = %name, "UpdateSchedule failed");
                    None
                }
            }
        })
    }

    fn send_notices(&mut self, slot: u64) {
        let mut out = Vec::new();
        let mut bcast_max: HashMap<(String, u32), u64> = HashMap::new();
        for f in self.flows.values() {
            let (Some(r), Some(p)) = (&f.reg, &f.plan) else {
                continue;
            };
            if p.slot == slot && r.role == Role::ParameterServer && r.kind == FlowKind::PsPull {
                let e = bcast_max.entry((r.job.clone(), r.rank)).or_insert(0);
                *e = (*e).max(p.decision.accumulated_bytes);
            }
        }
        for f in self.flows.values() {
            let (Some(r), Some(p)) = (&f.reg, &f.plan) else {
                continue;
            };
            if p.slot != slot || r.peer_rank == NO_RANK {
                continue;
            }
            let kind = match (r.paradigm, r.role, r.kind) {
                (Paradigm::Ring, _, FlowKind::RingSend | FlowKind::Unspecified) => {
                    notice_kind::RING
                }
                (Paradigm::ParameterServer, Role::Worker, FlowKind::PsPush) => {
                    notice_kind::PS_AGGREGATION
                }
                (Paradigm::ParameterServer, Role::ParameterServer, FlowKind::PsPull) => {
                    notice_kind::PS_BROADCAST
                }
                _ => continue,
            };
            let acc = p.decision.accumulated_bytes;
            let bound = if kind == notice_kind::PS_BROADCAST {
                bcast_max
                    .get(&(r.job.clone(), r.rank))
                    .copied()
                    .unwrap_or(acc)
            } else {
                acc
            };
            let n = proto::DependencyNotice {
                job: r.job.clone(),
                from_rank: r.rank,
                to_rank: r.peer_rank,
                kind,
                slot,
                iteration: r.iteration,
                accumulated_bytes: acc,
                bound_bytes: bound,
            };
            out.push((f.key, n));
        }
        for (key, n) in out {
            let Some(dst) = self.cfg.topology.host_of(key.dst) else {
                continue;
            };
            let (local, addr) = (self.cfg.hosts.contains(&dst.name), dst.agent);
            if local {
                self.handle_notice(n);
                continue;
            }
            let Some(mut c) = self.net.peer(addr) else {
                continue;
            };
            let t = self.net.slot;
            let shared = self.shared.clone();
            self.net.rt.spawn(async move {
                let why = match tokio::time::timeout(t, c.notify(n)).await {
                    Ok(Ok(_)) => return,
                    Ok(Err(s)) => s.message().to_string(),
                    Err(_) => String::from("deadline passed"),
                };
                shared
                    .rpc_failures
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::debug!(peer = %addr, error = %why, "Notify failed");
            });
        }
    }

    /// Alg. 2's receiver side for one notice: remembers F_i, and cuts the successor flows of the
    /// receiving process that are ahead of it by the excess.
    fn handle_notice(&mut self, n: proto::DependencyNotice) {
        let Some(slot) = self.slot else { return };
        self.notices
            .insert((n.job.clone(), n.kind, n.from_rank, n.to_rank), n.clone());
        let bound = match n.kind {
            notice_kind::RING => n.accumulated_bytes,
            notice_kind::PS_AGGREGATION => self
                .notices
                .values()
                .filter(|m| {
                    m.job == n.job
                        && m.kind == notice_kind::PS_AGGREGATION
                        && m.to_rank == n.to_rank
                        && m.iteration == n.iteration
                })
                .map(|m| m.accumulated_bytes)
                .min()
                .unwrap_or(n.accumulated_bytes),
            _ => return,
        };
        let targets: Vec<u64> = self
            .flows
            .iter()
            .filter(|(_, f)| {
                let (Some(r), Some(p)) = (&f.reg, &f.plan) else {
                    return false;
                };
                let kind_ok = match n.kind {
                    notice_kind::RING => {
                        r.paradigm == Paradigm::Ring
                            && matches!(r.kind, FlowKind::RingSend | FlowKind::Unspecified)
                    }
                    _ => r.role == Role::ParameterServer && r.kind == FlowKind::PsPull,
                };
                // Only a notice of this very slot bounds this slot's plan (an older F is lower).
                kind_ok
                    && r.job == n.job
                    && r.rank == n.to_rank
                    && r.iteration == n.iteration
                    && p.slot == slot
                    && n.slot == slot
            })
            .map(|(l, _)| *l)
            .collect();
        for local in targets {
            let Some(f) = self.flows.get(&local) else {
                continue;
            };
            let Some(p) = f.plan.clone() else { continue };
            // Ring: the successor flow may run one chunk ahead (its worker's own chunk).
            let slack = match (n.kind, &f.reg) {
                (notice_kind::RING, Some(r)) => r.ring_chunk_bytes.unwrap_or(0),
                _ => 0,
            };
            let excess =
                mlcc_sched::excess_bytes(p.decision.accumulated_bytes, bound.saturating_add(slack));
            if excess == 0 {
                continue;
            }
            let (id, key) = (f.id, f.key);
            // Re-plan the later slots against what the other flows hold now (the view of the
            // planning time predates the flows planned after this one).
            let view = self
                .path_view(id, &p.local, &p.remote, Some(&p.decision.plan.rates_bps))
                .unwrap_or_else(|| p.view.clone());
            match mlcc_sched::reduce(&self.clock, &p.decision, &p.progress, excess, &view) {
                Ok(d) => {
                    tracing::debug!(flow = %key, excess, "successor flow reduced");
                    self.tally(&p.remote, &p.decision.plan.rates_bps, false);
                    self.tally(&p.remote, &d.plan.rates_bps, true);
                    let np = Planned {
                        decision: d,
                        view,
                        ..p
                    };
                    self.publish_local(id, &np);
                    self.queue_update(id, &np);
                    if let Some(f) = self.flows.get_mut(&local) {
                        f.plan = Some(np);
                    }
                }
                Err(e) => tracing::warn!(flow = id, error = %e, "reduction refused"),
            }
        }
    }

    /// The rate flow `local` should run at in the current slot, bit/s.
    fn target_bps(&self, f: &FlowEntry<I>) -> u64 {
        match (&f.reg, &f.plan) {
            (Some(r), Some(p)) if r.iteration_bytes.is_some() && Some(p.slot) == self.slot => p
                .decision
                .pacing_rate_bps(p.progress.remaining_bytes, p.available_now_bps)
                .max(p.spare_bps)
                .max(self.cfg.min_rate_bps),
            _ => f.unthrottled_bps,
        }
    }

    fn apply(&mut self, local: u64) {
        let Some(f) = self.flows.get(&local) else {
            return;
        };
        let Some(sc) = &f.scope else { return };
        let target_bps = self.target_bps(f);
        let bytes = u32::try_from(target_bps / 8).unwrap_or(u32::MAX).max(1);
        let cwnd = if target_bps >= f.unthrottled_bps {
            self.cfg.cwnd_bytes
        } else {
            paced_cwnd_bytes(
                target_bps,
                f.rtt_us,
                self.clock.slot_us(),
                self.cfg.cwnd_bytes,
            )
        };
        if f.applied_bps == Some(bytes) && f.applied_cwnd == Some(cwnd) {
            return;
        }
        if let Err(e) = f.dp.update_field(sc, &[("Rate", bytes), ("Cwnd", cwnd)]) {
            tracing::warn!(flow = %f.key, error = %e.0, "setting Rate and Cwnd failed");
            return;
        }
        if let Some(f) = self.flows.get_mut(&local) {
            f.applied_bps = Some(bytes);
            f.applied_cwnd = Some(cwnd);
        }
    }

    fn publish_status(&self, slot: u64) {
        let mut flows = Vec::new();
        let mut native = 0;
        for f in self.flows.values() {
            let Some(r) = &f.reg else {
                native += 1;
                continue;
            };
            if f.scope.is_none() {
                native += 1;
                continue;
            }
            let (outcome, remaining) = match &f.plan {
                Some(p) if p.slot == slot => (
                    format!("{:?}", p.decision.outcome).to_lowercase(),
                    p.progress.remaining_bytes,
                ),
                _ if r.iteration_bytes.is_none() => (String::from("unplanned"), 0),
                _ => (String::from("idle"), 0),
            };
            flows.push(proto::FlowStatus {
                job: r.job.clone(),
                rank: r.rank,
                src: format!("{}:{}", f.key.src, f.key.src_port),
                dst: format!("{}:{}", f.key.dst, f.key.dst_port),
                flow: f.id,
                scheduled_bps: self.target_bps(f),
                achieved_bps: f.achieved_bps,
                remaining_bytes: remaining,
                rtt_us: f.rtt_us,
                lost: f.lost_last,
                outcome,
                iteration: r.iteration,
            });
        }
        let mode = if self.cfg.nic_only || self.net.switches.is_empty() {
            "nic-only"
        } else {
            "switch"
        };
        let mut s = self.shared.status.lock().unwrap_or_else(|p| p.into_inner());
        *s = proto::StatusReply {
            slot,
            slot_us: self.clock.slot_us(),
            mode: mode.to_string(),
            flows,
            native_flows: native,
            ..Default::default()
        };
    }

    /// At shutdown: takes this agent's schedules off the switches (best effort, within the RPC
    /// deadline) and detaches from the progress regions.
    pub fn shutdown(&mut self) {
        self.monitor.detach();
        let ids: Vec<u64> = self
            .flows
            .values()
            .filter(|f| f.plan.is_some())
            .map(|f| f.id)
            .collect();
        self.gone.extend(ids);
        for (_, mut c, req) in self.take_batches(self.clock.slot_at(crate::wall_us())) {
            let t = self.net.timeout;
            // The timer must be made inside the runtime.
            let _ = self
                .net
                .rt
                .block_on(async move { tokio::time::timeout(t, c.update_schedule(req)).await });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{
        group_key, least_admitted, paced_cwnd_bytes, spare_shares, split_acked, DatapathClock,
    };
    use crate::monitor::Registration;
    use mlcc_sched::Schedule;
    use mltcp_progress::{FlowKind, Paradigm, Role};

    fn reg(
        paradigm: Paradigm,
        role: Role,
        kind: FlowKind,
        rank: u32,
        peer_rank: u32,
    ) -> Registration {
        Registration {
            job: String::from("j"),
            rank,
            paradigm,
            role,
            kind,
            peer_rank,
            iteration: 0,
            iter_start_ns: 0,
            sent_bytes: 0,
            iteration_bytes: Some(1),
            sending: true,
            ring_chunk_bytes: None,
        }
    }

    #[test]
    fn paced_window_bounds_a_segment_and_never_limits_the_rate() {
        let slot_us = 60_000;
        // 1 Mbit/s floor, 1 ms RTT: a quarter slot of it is 1875 bytes, below 4 segments.
        assert_eq!(
            paced_cwnd_bytes(1_000_000, 1_000, slot_us, 16 << 20),
            4 * 1448
        );
        // 100 Mbit/s: a quarter slot (15 ms) of it, 187500 bytes.
        assert_eq!(
            paced_cwnd_bytes(100_000_000, 1_000, slot_us, 16 << 20),
            187_500
        );
        // A long RTT: two RTTs of the rate.
        assert_eq!(
            paced_cwnd_bytes(100_000_000, 20_000, slot_us, 16 << 20),
            500_000
        );
        // Never above the configured window; no overflow at absurd rates.
        assert_eq!(
            paced_cwnd_bytes(u64::MAX, u64::MAX, slot_us, 1 << 20),
            1 << 20
        );
        for rate in [1_000_000u64, 10_000_000, 100_000_000, 10_000_000_000] {
            let w = u64::from(paced_cwnd_bytes(rate, 500, slot_us, u32::MAX));
            // A segment (at most half the window) takes at most slot/8 at the rate...
            assert!(
                w / 2 * 8_000_000 / rate <= slot_us / 8 || w == 4 * 1448,
                "{rate}: {w}"
            );
            // ...and the window carries the rate over 2 RTTs.
            assert!(w * 8_000_000 / rate >= 2 * 500, "{rate}: {w}");
        }
    }

    #[test]
    fn spare_capacity_is_split_among_the_idle_flows_of_a_link() {
        // Link 1 has 40 free, link 2 has 10 free; flows 7 and 8 cross link 1, flow 8 also link 2,
        // flow 9 only link 2; flow 10 has no link.
        let free = |l: u32, _id: u64| if l == 1 { 40 } else { 10 };
        let paths = vec![(7, vec![1]), (8, vec![1, 2]), (9, vec![2]), (10, vec![])];
        assert_eq!(spare_shares(&paths, free), vec![20, 5, 5, 0]);
        // The shares never oversubscribe a link.
        let s = spare_shares(&paths, free);
        assert!(s[0] + s[1] <= 40 && s[1] + s[2] <= 10);
        assert!(spare_shares(&[], free).is_empty());
    }

    #[test]
    fn reports_are_dated_by_the_datapath_clock() {
        // The datapath clock runs 5 s behind CLOCK_MONOTONIC; deliveries take 1-300 ms.
        let mut c = DatapathClock::default();
        let ms = 1_000_000u64;
        // First report: ACK at dp 1000 ms, arrived 300 ms late: dated at its arrival.
        assert_eq!(c.date_ns(1_000_000, 6_300 * ms), 6_300 * ms);
        // A report delivered within 1 ms calibrates the offset...
        assert_eq!(c.date_ns(2_000_000, 7_001 * ms), 7_001 * ms);
        // ...so a later report read 400 ms late is dated near its ACK, not at its arrival.
        assert_eq!(c.date_ns(3_000_000, 8_400 * ms), 8_001 * ms);
        // Never after the arrival, even if the offset estimate were stale.
        assert!(c.date_ns(4_000_000, 8_500 * ms) <= 8_500 * ms);
    }

    #[test]
    fn acked_bytes_split_at_the_iteration_start() {
        let log = [(10, 100), (20, 7), (30, 1000)];
        assert_eq!(split_acked(&log, 0), (0, 1107));
        assert_eq!(
            split_acked(&log, 20),
            (100, 1007),
            "a report at the start counts for it"
        );
        assert_eq!(split_acked(&log, 31), (1107, 0));
        assert_eq!(split_acked(&[], 5), (0, 0));
    }

    #[test]
    fn coflow_groups() {
        // A ring's flows are one group whatever their ranks.
        let a = group_key(
            &reg(Paradigm::Ring, Role::Worker, FlowKind::RingSend, 0, 1),
            1,
        );
        let b = group_key(
            &reg(Paradigm::Ring, Role::Worker, FlowKind::RingSend, 1, 0),
            2,
        );
        assert_eq!(a, b);
        // Pushes into PS 5 are one group, planned before PS 5's broadcast group (same unit).
        let push = |w| {
            group_key(
                &reg(
                    Paradigm::ParameterServer,
                    Role::Worker,
                    FlowKind::PsPush,
                    w,
                    5,
                ),
                u64::from(w),
            )
        };
        assert_eq!(push(0), push(1));
        let pull = group_key(
            &reg(
                Paradigm::ParameterServer,
                Role::ParameterServer,
                FlowKind::PsPull,
                5,
                0,
            ),
            9,
        );
        assert_eq!(
            (&pull.0, pull.1, pull.2),
            (&push(0).0, push(0).1, push(0).2)
        );
        assert!(push(0) < pull);
        // Pushes into another PS are another group.
        let other = group_key(
            &reg(
                Paradigm::ParameterServer,
                Role::Worker,
                FlowKind::PsPush,
                0,
                6,
            ),
            3,
        );
        assert_ne!(other, push(0));
        // Anything else is alone.
        let x = group_key(
            &reg(Paradigm::Ring, Role::Worker, FlowKind::PsPush, 0, 1),
            7,
        );
        let y = group_key(
            &reg(Paradigm::Ring, Role::Worker, FlowKind::PsPush, 0, 1),
            8,
        );
        assert_ne!(x, y);
    }

    fn sched(start_slot: u64, rates_bps: &[u64]) -> Schedule {
        Schedule {
            start_slot,
            rates_bps: rates_bps.to_vec(),
        }
    }

    #[test]
    fn the_least_admission_over_switches() {
        let planned = sched(10, &[8, 8, 8, 8]);
        // Two switches: one cut slots 10 and 12, the other (already in slot 11) slot 13; a
        // slot beyond an admitted schedule's end was admitted nothing.
        let a = least_admitted(&planned, &[sched(10, &[5, 8, 2, 8]), sched(11, &[8, 8, 3])]);
        assert_eq!(a, sched(10, &[5, 8, 2, 3]));
        let a = least_admitted(&planned, &[sched(10, &[8, 8])]);
        assert_eq!(a, sched(10, &[8, 8, 0, 0]));
        // No admission: the plan stands.
        assert_eq!(least_admitted(&planned, &[]), planned);
    }
}
