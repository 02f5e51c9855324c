// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `mlcc-agent-core`: the agent core, the per-host scheduler of ccp-agent as a state machine
//! without I/O. Datapath reports, progress readings, switch feedback, peer notices and the time
//! go in ([`Input`]); rate and window updates, program installs, RPC requests, notices and the
//! status come out ([`Action`]). Its own crate so that the compiler holds the line: no portus,
//! tokio, tonic or hyper is in its dependency tree (`ci/check-core-deps.sh` checks it), and it
//! opens no socket or file and reads no clock. The agent's shell (`ccp_agent::ccp`,
//! `ccp_agent::net`, `ccp_agent::run`) performs the actions and feeds the inputs, and the tests
//! here feed a simulated datapath.
//!
//! The plain data the core speaks: [`config::CoreConfig`] (what it is configured with, built by
//! the agent from its files), [`fabric`] (hosts, switches, links, routes), [`flows`] (flow
//! identities), [`registration`] (what the progress regions say of a flow), [`proto`] (the gRPC
//! messages, prost only; the agent adds the tonic services) and [`io`] (inputs and actions).
//!
//! "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers", Sec. IV-V: Sec. IV
//! (Alg. 1 and 2, the control protocol of Sec. IV-C) and Sec. V (the prototype's scheduler on
//! CCP). At the first [`Input::Tick`] of every slot (`slot_us`, aligned to multiples of its
//! length on the wall clock, so that agents and switches agree on slot numbers) the core:
//!
//! 1. turns the reports of the past slot into each flow's achieved rate, and records per NIC
//!    link the total achieved rate as a rate sample (network-limited when a flow that had bytes
//!    to send got less than 80% of its planned bytes and saw losses; the table's
//!    available-bandwidth estimate, the largest sample of the past 4 slots, comes from these);
//! 2. takes the latest progress reading ([`Input::Progress`]) and installs the datapath program
//!    on the flows of newly registered processes (unregistered flows get none: native MLTCP);
//! 3. asks the switches for feedback on the links its flows cross ([`Rpc::FetchFeedback`], one
//!    per switch, deadline `rpc_timeout_ms`) and waits for every answer ([`Input::Feedback`]);
//!    for a switch that failed, its last feedback stands in while it is less than K slots old,
//!    and after that its links are planned at their configured capacity less what this agent
//!    planned on them: the other agents' load is then unknown, but a plan never exceeds the
//!    link itself (with no switch answering, this is NIC-only planning);
//! 4. decides the flows it plans with the scheduling library's policy layer
//!    (`mlcc_sched::policy::decide`, the same entry point the cluster simulator plans
//!    through; `plan` builds its snapshot): coflow groups (a job's ring flows; per parameter
//!    server, the aggregation flows into it, then its broadcast flows; any other flow alone),
//!    each planned jointly (Alg. 1 over the group, each member advancing by the same fraction of
//!    its bytes left per slot, Varys's MADD, then Alg. 2's raise per member), in the order of
//!    the configured rules (`[sched] rules`: `mlcc`, the unit further into its iteration first,
//!    then smallest effective bottleneck first, Varys's SEBF, ties by job; or `interleave`, by
//!    job first); the dependencies on flows decided together are cut within the group (the
//!    receiver's cut of Alg. 2), those on other hosts' flows come from their latest notices; only
//!    the bytes a dependency lets a flow send are planned; then work conservation (a flow
//!    planned no bytes this slot gets a share of what the plans leave free on its path) and the
//!    rate floor. The link views: NIC links from the agent's own table, switch links from the
//!    feedback, the decided flows' own schedules excluded (every flow decided this slot leaves
//!    the NIC table first, so the order decides on NIC links too). Planned one flow at a time
//!    (before), Alg. 1 gave each shared link wholly to one flow of each ring job in the VM
//!    testbed, and both jobs ran 3-6x slower than under cubic;
//! 5. sends the schedules to the switches ([`Rpc::UpdateSchedule`], one per switch), which
//!    *admit* them: each is clipped to what is left on the switch's links at that moment
//!    (`mlcc_sched::LinkLoadTable::admit`), and the core cuts its plan to the admitted rates
//!    (`Decision::clipped_to`; over several switches, the least of their admissions). A flow's
//!    spare share of the current slot (work conservation, step 7) is part of the schedule it
//!    asks for, up to what carries its bytes left in one slot (none for a flow with no bytes
//!    left), and is cut to the admitted rate after the plan's bytes: a spare share the
//!    switches never counted could meet another agent's later admission of the same
//!    bandwidth. It waits
//!    ([`Input::Admission`]) for what is left of `rpc_timeout_ms` after step 3, at least a
//!    quarter of it, and not for a switch whose feedback failed this slot (a switch that does
//!    not answer in time admits nothing the agent knows of: the plan stands as made);
//! 6. sends each flow's accumulated bytes F_i to the agent of its receiver ([`Rpc::Notify`];
//!    none when the receiver is one of this agent's hosts: step 4 decided both together); a
//!    receiver cuts its successor flows by the excess (`mlcc_sched::receiver_cut_bytes`, ring:
//!    (F_succ − F_i − chunk)+; PS broadcast: (F_j − F_a^min)+) with `mlcc_sched::reduce`, one
//!    flow at a time. Only a notice of the current slot cuts; the
//!    latest notices of the same iteration are the dependencies of the next planning, and are
//!    forgotten after K slots. Notices that arrive while the slot waits for the switches are
//!    handled here, in arrival order;
//! 7. sets every flow's `Rate` (bytes/s, u32) and window ceiling for the slot ([`Action::SetRate`]):
//!    the planned rate (a slot that completes the flow: its MADD share of the available
//!    bandwidth), or its spare share when larger (on a switch path, as admitted in step 5),
//!    at least `min_rate_bps`; a flow whose job
//!    gave no bytes per iteration is not planned and runs at its NIC's capacity. The Rate is
//!    sent every slot even when it did not change (the module's `ccp_heartbeat_ms` keepalive).
//!    With `[sched] held_flows = "scavenger"` ([`CoreConfig::held_flows`]) a flow held at the
//!    floor runs unthrottled instead, its window set by the program's LEDBAT (RFC 6817) toward
//!    [`CoreConfig::scavenger_target_us`] of queueing delay (`Control.scavenge_us`);
//! 8. sends the schedules changed later in the slot (reductions by notices) without waiting,
//!    and emits the status ([`Action::Status`]) and the flows' RTTs ([`Action::Rtts`]).
//!
//! Traffic classes (`[sched] classes` > 0, [`CoreConfig::classes`]; not in the mlcc paper):
//! step 4 also compresses the policy's job order onto that many strict-priority classes
//! (`mlcc_sched::policy::classes::TrafficClasses`, kept from slot to slot: a job keeps its
//! class while the order around it stays), and step 7 marks each flow with its job's class's
//! DSCP ([`Action::SetClass`]) when it differs from the one last set, releasing it when the
//! flow is no longer planned. Rates are those without classes. With classes off the core sets
//! no class.
//!
//! Work conservation (`[sched] work_conserving`, default on; not in the mlcc paper): the policy
//! layer treats a plan as a claim, not a limit (`mlcc_sched::PolicyOptions::work_conserving`:
//! active flows share what the slot's plans leave of their links; under strict priority idle
//! jobs claim nothing). Without switches the core also re-plans the slot between its
//! boundaries: when a flow has delivered what it was planned to send now (a burst's or a ring
//! chunk's end, seen in its reports) and when the progress regions, read at every
//! [`Input::Poll`], show a burst beginning. With switches a re-plan would need their feedback
//! and admission again, so it waits for the next slot.
//!
//! A slot whose answers are still missing at the next slot's tick ends without them (as if
//! the switches had failed) before the next slot starts. RPC failures never drop a flow: a flow
//! is forgotten only when its datapath closes it ([`Input::FlowClosed`]).
//!
//! Progress of a flow: F_i (sent bytes) is the bytes the flow's reports acknowledged since its
//! job's current iteration began; the bytes left are the flow's share of the job's bytes per
//! iteration minus F_i, so bytes still queued in the socket are still planned, and a job
//! between iterations reserves nothing. Each report is dated on CLOCK_MONOTONIC (the datapath
//! time of its ACK, `Report.now`, calibrated against arrivals: `measure`); when the region's
//! iteration number has moved, only the reports dated after the region's `iter_start_ns` count
//! for the new iteration. The datapath program reports once per slot and also at the ACK that
//! empties the pipe, so an iteration's tail is reported before the next iteration begins.

#![deny(missing_docs)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod config;
pub mod fabric;
pub mod flows;
pub mod io;
pub(crate) mod measure;
mod plan;
pub mod proto;
pub mod registration;
#[cfg(test)]
mod tests;

pub use config::CoreConfig;
pub use io::{Action, Command, Input, LocalFlow, Measurement, Rpc};

use fabric::Switch;
use flows::FlowKey;
use measure::{carried_bytes, may_bottleneck, paced_cwnd_bytes, split_acked, DatapathClock};
use mlcc_sched::{FlowId, LinkId, LinkLoadTable, RateSample, SlotClock};
use plan::Planned;
use registration::{Registration, Registrations};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

/// The log target of the core's events that name none of their own: the agent's, so that the
/// agent's log filters (`RUST_LOG=ccp_agent=debug`) select them, as they do `ccp_agent::plan`
/// and `ccp_agent::progress`.
const LOG_TARGET: &str = "ccp_agent::agent_core";
/// [`LOG_TARGET`] of the planning step's events.
const PLAN_LOG_TARGET: &str = "ccp_agent::agent_core::plan";

/// One CCP flow of a datapath.
struct FlowEntry {
    key: FlowKey,
    id: u64,
    /// Whether the program is installed (counted from the [`Action::Install`] on; undone by
    /// [`Input::DatapathFailed`]).
    installed: bool,
    // Reports since the last slot tick. The acknowledged bytes of each report, with the time of
    // the report's ACK (CLOCK_MONOTONIC ns, see `DatapathClock`): the slot's achieved rate, and
    // split at the region's iteration start when the iteration moves.
    acked_log: Vec<(u64, u64)>,
    // The datapath clock of this flow's reports, calibrated against CLOCK_MONOTONIC.
    dp_clock: DatapathClock,
    // The time of its latest report of acknowledged bytes (CLOCK_MONOTONIC ns, 0: none): where
    // its job's burst ended, for `[sched] job_order = "slowdown_deadline"`.
    last_acked_ns: u64,
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
    // The `Control.scavenge_us` last set (0: Reno under the ceiling).
    applied_scavenge_us: Option<u32>,
    achieved_bps: u64,
    app_limited: bool,
    lost_last: u64,
    unthrottled_bps: u64,
    // Bytes of the current slot's reports that a mid-slot re-plan already counted into the
    // iteration (`acked_iter`): still the slot's achieved bytes.
    slot_folded: u64,
    // (iteration, bytes handed) of the registration at the last burst check.
    seen_sent: Option<(u64, u64)>,
    // The DSCP of its job's traffic class at the last planning (`[sched] classes`); `None`:
    // no class (classes off, or the flow not planned).
    dscp: Option<u8>,
    // The marking last set ([`Action::SetClass`]): `Some(None)` the socket's own (as at
    // CREATE), `None` unknown (the last SetClass failed: it is sent again).
    dscp_set: Option<Option<u8>>,
}

impl FlowEntry {
    /// Bytes delivered in the current iteration so far: those already counted (`acked_iter`)
    /// and those of the reports since the last slot tick.
    fn delivered_in_iteration(&self) -> u64 {
        self.acked_iter
            .saturating_add(split_acked(&self.acked_log, 0).1)
    }
}

/// The RPC deadlines the core puts on its requests.
#[derive(Clone, Copy, Debug)]
struct Deadlines {
    /// `FetchFeedback`, and the slot's waits for the switches together (`rpc_timeout_ms`).
    timeout: Duration,
    /// The RPCs nobody waits for to the end (`UpdateSchedule`, `Notify`): one slot.
    slot: Duration,
}

/// Where the current slot's work stands.
#[derive(Debug)]
enum Phase {
    /// Done (or no slot yet).
    Idle,
    /// Step 3: waiting for the switches' feedback.
    Feedback {
        slot: u64,
        /// The slot's tick, wall-clock µs.
        tick_us: u64,
        /// Switch → the links asked for.
        waiting: HashMap<String, Vec<u32>>,
        /// The latest answer so far, wall-clock µs.
        last_at_us: u64,
    },
    /// Step 5: waiting for the switches' admissions.
    Admission {
        slot: u64,
        waiting: HashSet<String>,
        /// Flow id → the schedules admitted for it so far.
        admitted: HashMap<u64, Vec<mlcc_sched::Schedule>>,
    },
}

/// The agent core (see the module docs).
pub struct Core {
    cfg: CoreConfig,
    clock: SlotClock,
    /// The switches (none in NIC-only mode).
    switches: Vec<Switch>,
    rpc: Deadlines,
    /// The latest progress reading.
    progress: Registrations,
    flows: BTreeMap<LocalFlow, FlowEntry>,
    table: LinkLoadTable,
    local_links: HashSet<u32>,
    slot: Option<u64>,
    phase: Phase,
    notices: HashMap<(String, u32, u32, u32), proto::DependencyNotice>,
    /// Notices that arrived while the slot's work waits for the switches.
    inbox: Vec<proto::DependencyNotice>,
    gone: Vec<u64>,
    failing: HashSet<String>,
    pending: HashMap<String, Vec<proto::FlowSchedule>>,
    last_feedback: HashMap<u32, (u64, u64, Vec<u64>)>,
    /// This slot's switch feedback: link → (estimate, load of the other agents' flows).
    feedback: HashMap<u32, (u64, Vec<u64>)>,
    /// This slot's plans of this agent's flows on switch links, per link and slot.
    adds: HashMap<u32, Vec<u64>>,
    /// The actions of the input being handled.
    out: Vec<Action>,
    /// Slots planned so far (step 4 run), for the shell's decision timing.
    planned: u64,
    /// The traffic classes (`[sched] classes` > 0): the rank compressor, with its hysteresis
    /// from slot to slot, and the jobs' keys it knows them by (see `plan::ClassKeys`).
    classes: Option<(mlcc_sched::policy::classes::TrafficClasses, plan::ClassKeys)>,
    /// Each job's bursts and smoothed slowdown, by job name (`[sched] job_order =
    /// "slowdown_deadline"`; see `plan::track_bursts`).
    bursts: HashMap<String, plan::JobBurstTrack>,
}

impl Core {
    /// A core for `cfg` at wall-clock time `now_us` (µs). Errors: slot length or horizon
    /// refused by `mlcc_sched::SlotClock`, a NIC link refused by the table, a class count
    /// above 8 refused by `mlcc_sched::policy::classes::TrafficClasses::new` (none happens
    /// with a checked config).
    pub fn new(cfg: CoreConfig, now_us: u64) -> Result<Self, mlcc_sched::SchedError> {
        let clock = SlotClock::new(cfg.slot_ms * 1000, cfg.horizon)?;
        let classes = match cfg.classes {
            0 => None,
            n => Some((
                mlcc_sched::policy::classes::TrafficClasses::new(n)?,
                plan::ClassKeys::default(),
            )),
        };
        let mut table = LinkLoadTable::new(clock, clock.slot_at(now_us));
        let mut local_links = HashSet::new();
        for h in cfg.served() {
            let cap = cfg.topology.links.get(&h.nic).copied().unwrap_or(1);
            table.add_link(LinkId(h.nic), cap)?;
            local_links.insert(h.nic);
        }
        if cfg.nic_only {
            for l in cfg.topology.served_ingress(&cfg.hosts) {
                let cap = cfg.topology.links.get(&l).copied().unwrap_or(1);
                if local_links.insert(l) {
                    table.add_link(LinkId(l), cap)?;
                }
            }
        }
        let switches = if cfg.nic_only {
            Vec::new()
        } else {
            cfg.topology.switches.clone()
        };
        let rpc = Deadlines {
            timeout: Duration::from_millis(cfg.rpc_timeout_ms),
            slot: Duration::from_millis(cfg.slot_ms),
        };
        Ok(Core {
            cfg,
            clock,
            switches,
            rpc,
            progress: Registrations::new(),
            flows: BTreeMap::new(),
            table,
            local_links,
            slot: None,
            phase: Phase::Idle,
            notices: HashMap::new(),
            inbox: Vec::new(),
            gone: Vec::new(),
            failing: HashSet::new(),
            pending: HashMap::new(),
            last_feedback: HashMap::new(),
            feedback: HashMap::new(),
            adds: HashMap::new(),
            out: Vec::new(),
            planned: 0,
            classes,
            bursts: HashMap::new(),
        })
    }

    /// The slot grid.
    pub fn clock(&self) -> SlotClock {
        self.clock
    }

    /// How many slots the core has planned (step 4) so far: the shell times the input whose
    /// handling moves it as the slot's decision.
    pub fn slots_planned(&self) -> u64 {
        self.planned
    }

    /// Number of flows and how many run the program.
    pub fn counts(&self) -> (usize, usize) {
        (
            self.flows.len(),
            self.flows.values().filter(|f| f.installed).count(),
        )
    }

    /// Handles one input; returns the actions to perform, in order.
    pub fn handle(&mut self, input: Input) -> Vec<Action> {
        match input {
            Input::Tick { now_us } => self.on_tick(now_us),
            Input::Progress(r) => self.progress = r,
            Input::Poll => self.on_poll(),
            Input::FlowCreated { flow, key, sock_id } => self.on_created(flow, key, sock_id),
            Input::Report { flow, fields } => self.on_report(flow, &fields),
            Input::FlowClosed { flow } => self.on_closed(flow),
            Input::DatapathFailed { flow, command } => self.on_failed(flow, command),
            Input::Feedback {
                switch,
                slot,
                at_us,
                reply,
            } => self.on_feedback(switch, slot, at_us, reply),
            Input::Admission {
                switch,
                slot,
                reply,
            } => self.on_admission(&switch, slot, reply),
            Input::Notices(n) => self.on_notices(n),
            Input::Stop { now_us } => self.on_stop(now_us),
        }
        std::mem::take(&mut self.out)
    }

    /// The capacity (bit/s) of the NIC of `key`'s source when it is a host this agent serves.
    fn served_src(&self, key: &FlowKey) -> Option<u64> {
        let h = self.cfg.topology.host_of(key.src)?;
        if !self.cfg.hosts.contains(&h.name) {
            return None;
        }
        self.cfg.topology.links.get(&h.nic).copied()
    }

    /// The registration of a flow sent from a served host, in the latest progress reading.
    fn registration(&self, key: &FlowKey) -> Option<Registration> {
        self.served_src(key)?;
        self.progress.get(key).filter(|r| r.sending).cloned()
    }

    /// A CREATE: remembers the flow and installs the program at once when its process is
    /// registered.
    fn on_created(&mut self, local: LocalFlow, key: FlowKey, sock_id: u32) {
        if self.flows.contains_key(&local) {
            tracing::warn!(target: LOG_TARGET, flow = local, key = %key, "CREATE for a flow number already in use: ignored");
            return;
        }
        let unthrottled_bps = self.served_src(&key).unwrap_or(u64::from(u32::MAX) * 8);
        let mut f = FlowEntry {
            key,
            id: key.id(),
            installed: false,
            acked_log: Vec::new(),
            dp_clock: DatapathClock::default(),
            last_acked_ns: 0,
            lost: 0,
            rtt_us: 0,
            reg: None,
            iteration: None,
            acked_iter: 0,
            plan: None,
            applied_bps: None,
            applied_cwnd: None,
            applied_scavenge_us: None,
            achieved_bps: 0,
            app_limited: true,
            lost_last: 0,
            unthrottled_bps,
            slot_folded: 0,
            seen_sent: None,
            dscp: None,
            dscp_set: Some(None),
        };
        f.reg = self.registration(&key);
        tracing::info!(target: LOG_TARGET, sid = sock_id, flow = %key, registered = f.reg.is_some(), "CREATE");
        if f.reg.is_some() && self.cfg.schedule {
            self.install(local, &mut f);
        }
        self.flows.insert(local, f);
    }

    /// Installs the program on `f` at its NIC's capacity and the configured window.
    fn install(&mut self, local: LocalFlow, f: &mut FlowEntry) {
        let slot_us = u32::try_from(self.clock.slot_us()).unwrap_or(u32::MAX);
        let rate = u32::try_from(f.unthrottled_bps / 8).unwrap_or(u32::MAX);
        self.out.push(Action::Install {
            flow: local,
            rate_bytes: rate,
            cwnd_bytes: self.cfg.cwnd_bytes,
            slot_us,
        });
        f.installed = true;
        f.applied_bps = Some(rate);
        f.applied_cwnd = Some(self.cfg.cwnd_bytes);
        f.applied_scavenge_us = Some(0);
    }

    /// A MEASURE of flow `local`: adds its fields to the slot's measurements.
    fn on_report(&mut self, local: LocalFlow, m: &Measurement) {
        let Some(f) = self.flows.get_mut(&local) else {
            return;
        };
        if !f.installed {
            return;
        }
        if let Some(a) = m.acked {
            let stamp_ns = match m.dp_now_us {
                Some(dp_now_us) => f.dp_clock.date_ns(dp_now_us, m.arrival_ns),
                None => m.arrival_ns,
            };
            if a > 0 {
                f.acked_log.push((stamp_ns, a));
                f.last_acked_ns = f.last_acked_ns.max(stamp_ns);
            }
        }
        if let Some(l) = m.lost {
            f.lost = f.lost.saturating_add(l);
        }
        if let Some(r) = m.rtt_us {
            f.rtt_us = r;
        }
        // The end of what the flow was planned to send now (its burst, or a ring chunk):
        // what it claimed goes to the others at once.
        let slot = self.slot;
        let done = f.plan.as_ref().is_some_and(|p| {
            let planned = p.decision.plan.bytes.first().copied().unwrap_or(0);
            let live = f.delivered_in_iteration();
            Some(p.slot) == slot
                && planned > 0
                && live.saturating_sub(p.progress.sent_bytes) >= p.progress.remaining_bytes
        });
        if done {
            self.replan_mid_slot("burst end");
        }
    }

    /// [`Input::Poll`]: re-plans the slot when the latest progress reading shows a burst
    /// beginning: a flow in a new iteration, or a flow planned nothing now that has been handed
    /// bytes it has not delivered (once per such reading).
    fn on_poll(&mut self) {
        if !self.replans_mid_slot() {
            return;
        }
        let slot = self.slot;
        let mut began = false;
        let keys: Vec<(LocalFlow, FlowKey)> = self
            .flows
            .iter()
            .filter(|(_, f)| f.installed)
            .map(|(l, f)| (*l, f.key))
            .collect();
        for (local, key) in keys {
            let Some(r) = self.registration(&key) else {
                continue;
            };
            let Some(f) = self.flows.get_mut(&local) else {
                continue;
            };
            let seen = Some((r.iteration, r.sent_bytes));
            if f.seen_sent == seen {
                continue;
            }
            f.seen_sent = seen;
            if r.iteration_bytes.is_none() {
                continue;
            }
            let idle = f.plan.as_ref().is_none_or(|p| {
                Some(p.slot) != slot || p.decision.plan.bytes.first().is_none_or(|b| *b == 0)
            });
            let live = f.delivered_in_iteration();
            if f.iteration != Some(r.iteration) || (idle && r.sent_bytes > live) {
                began = true;
            }
        }
        if began {
            self.replan_mid_slot("burst start");
        }
    }

    /// Whether the slot may be re-planned between its boundaries: `[sched] work_conserving`,
    /// no switch (a re-plan would need their feedback and admission again), flows scheduled,
    /// and the slot's own work done.
    fn replans_mid_slot(&self) -> bool {
        self.cfg.work_conserving
            && self.cfg.schedule
            && self.switches.is_empty()
            && self.slot.is_some()
            && matches!(self.phase, Phase::Idle)
    }

    /// Re-plans the current slot now (`why`: for the log): the reports so far count into the
    /// iterations, every flow is decided again against the NIC table, and the rates that
    /// changed are set.
    fn replan_mid_slot(&mut self, why: &'static str) {
        if !self.replans_mid_slot() {
            return;
        }
        let Some(slot) = self.slot else { return };
        tracing::debug!(target: "ccp_agent::plan", slot, why, "re-plan within the slot");
        self.refresh_registrations(true);
        self.plan_flows(slot);
        self.apply_all();
    }

    /// The flow `local` closed: its schedules leave the tables (the switches' at the next
    /// update).
    fn on_closed(&mut self, local: LocalFlow) {
        if let Some(f) = self.flows.remove(&local) {
            let _ = self.table.remove_flow(FlowId(f.id));
            self.gone.push(f.id);
            tracing::info!(target: LOG_TARGET, flow = %f.key, "flow closed");
        }
    }

    fn on_failed(&mut self, local: LocalFlow, command: Command) {
        let Some(f) = self.flows.get_mut(&local) else {
            return;
        };
        match command {
            Command::SetClass => {
                f.dscp_set = None;
                return;
            }
            Command::Install => f.installed = false,
            Command::SetRate => {}
        }
        f.applied_bps = None;
        f.applied_cwnd = None;
        f.applied_scavenge_us = None;
    }

    /// Steps 1-3 at the first tick of a slot (see the module docs).
    fn on_tick(&mut self, now_us: u64) {
        let slot = self.clock.slot_at(now_us);
        if self.slot.is_some_and(|s| s >= slot) {
            return;
        }
        self.end_late_slot();
        self.slot = Some(slot);
        let _ = self.table.advance_to(slot);
        // Notices of jobs that stopped sending: forgotten after a horizon of slots.
        let horizon = self.clock.horizon() as u64;
        self.notices
            .retain(|_, n| n.slot.saturating_add(horizon) >= slot);
        self.measure(slot);
        self.refresh_registrations(false);
        self.feedback.clear();
        self.adds.clear();
        let wanted = self.wanted_feedback();
        if wanted.is_empty() {
            self.plan_slot(slot, Duration::ZERO, true);
            return;
        }
        let mut waiting = HashMap::new();
        for (switch, links, exclude) in wanted {
            self.out.push(Action::Rpc(Rpc::FetchFeedback {
                switch: switch.clone(),
                request: proto::FeedbackRequest {
                    links: links.clone(),
                    exclude_flows: exclude,
                    slot,
                },
                timeout: self.rpc.timeout,
            }));
            waiting.insert(switch, links);
        }
        self.phase = Phase::Feedback {
            slot,
            tick_us: now_us,
            waiting,
            last_at_us: now_us,
        };
    }

    /// Ends a slot still waiting for the switches when the next one begins: the missing
    /// feedback counts as failed, the missing admissions as not given.
    fn end_late_slot(&mut self) {
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Idle => {}
            Phase::Feedback { slot, waiting, .. } => {
                for (switch, links) in waiting {
                    let why = String::from("no answer before the next slot");
                    self.take_feedback(&switch, slot, links, Err(why));
                }
                self.plan_slot(slot, Duration::ZERO, false);
            }
            Phase::Admission { slot, admitted, .. } => {
                self.cut_to_admitted(slot, &admitted);
                self.end_slot(slot);
            }
        }
    }

    /// The slot's reports: each flow's achieved rate, and the NIC links' rate samples.
    fn measure(&mut self, slot: u64) {
        let slot_us = self.clock.slot_us().max(1);
        let mut samples: HashMap<u32, (u64, bool)> = HashMap::new();
        for f in self.flows.values_mut() {
            let acked = split_acked(&f.acked_log, 0)
                .1
                .saturating_add(std::mem::take(&mut f.slot_folded));
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
                    // The shortfall counts on a NIC link only if no link of the flow's path
                    // is narrower (`may_bottleneck`): a switch port downstream may have been it.
                    let links = &self.cfg.topology.links;
                    let cap = |l: u32| links.get(&l).copied();
                    let path = || {
                        let local = p.local.iter().map(|l| l.0);
                        local.chain(p.remote.iter().copied()).filter_map(cap)
                    };
                    for l in &p.local {
                        let here =
                            network_limited && cap(l.0).is_none_or(|c| may_bottleneck(c, path()));
                        let e = samples.entry(l.0).or_insert((0, true));
                        e.0 = e.0.saturating_add(f.achieved_bps);
                        e.1 &= !here;
                    }
                }
            }
        }
        let rtts = self
            .flows
            .values()
            .filter(|f| f.rtt_us > 0)
            .map(|f| (f.id, f.rtt_us))
            .collect();
        self.out.push(Action::Rtts(rtts));
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

    /// Step 2: each flow's registration in the latest progress reading, and its acknowledged
    /// bytes of the current iteration. `mid_slot`: for a re-plan within the slot (the bytes
    /// counted stay the slot's achieved bytes for the next [`Core::measure`]).
    fn refresh_registrations(&mut self, mid_slot: bool) {
        let locals: Vec<LocalFlow> = self.flows.keys().copied().collect();
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
            if mid_slot {
                f.slot_folded = f.slot_folded.saturating_add(split_acked(&log, 0).1);
            }
            match &reg {
                Some(r) => {
                    if f.iteration == Some(r.iteration) {
                        let (_, acked) = split_acked(&log, 0);
                        f.acked_iter = f.acked_iter.saturating_add(acked);
                    } else {
                        let (before, after) = split_acked(&log, r.iter_start_ns);
                        let old_bytes = f.acked_iter.saturating_add(before);
                        let carried = carried_bytes(
                            f.iteration,
                            f.reg.as_ref().and_then(|p| p.iteration_bytes),
                            old_bytes,
                            r.iteration,
                        );
                        tracing::debug!(
                            target: "ccp_agent::progress",
                            flow = %f.key,
                            job = %r.job,
                            rank = r.rank,
                            from = ?f.iteration,
                            to = r.iteration,
                            acked_bytes = old_bytes,
                            carried_bytes = carried,
                            iteration_bytes = ?r.iteration_bytes,
                            "iteration change"
                        );
                        f.iteration = Some(r.iteration);
                        f.acked_iter = after.saturating_add(carried);
                    }
                    if !f.installed && self.cfg.schedule {
                        self.install(l, &mut f);
                    }
                }
                None => {
                    if f.reg.is_some() {
                        tracing::info!(target: LOG_TARGET, flow = %f.key, "no longer registered: unplanned, at NIC capacity");
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

    /// The feedback to ask for: per switch whose links this agent's planned flows cross (in
    /// the topology's order), the links and the flows whose own schedules it leaves out.
    fn wanted_feedback(&self) -> Vec<(String, Vec<u32>, Vec<u64>)> {
        if self.switches.is_empty() {
            return Vec::new();
        }
        let mut wanted: HashMap<String, (HashSet<u32>, Vec<u64>)> = HashMap::new();
        for f in self.flows.values() {
            if f.reg.is_none() || !f.installed {
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
        self.switches
            .iter()
            .filter_map(|sw| {
                let (links, exclude) = wanted.remove(&sw.name)?;
                let mut links: Vec<u32> = links.into_iter().collect();
                links.sort_unstable();
                Some((sw.name.clone(), links, exclude))
            })
            .collect()
    }

    /// One switch's answer to the slot's `FetchFeedback` (step 3).
    fn on_feedback(
        &mut self,
        switch: String,
        slot: u64,
        at_us: u64,
        reply: Result<proto::FeedbackReply, String>,
    ) {
        let Phase::Feedback {
            slot: waiting_slot,
            tick_us,
            waiting,
            last_at_us,
        } = &mut self.phase
        else {
            return;
        };
        if *waiting_slot != slot {
            return;
        }
        let Some(links) = waiting.remove(&switch) else {
            return;
        };
        *last_at_us = (*last_at_us).max(at_us);
        let done = waiting.is_empty();
        let elapsed = Duration::from_micros(last_at_us.saturating_sub(*tick_us));
        self.take_feedback(&switch, slot, links, reply);
        if done {
            self.phase = Phase::Idle;
            self.plan_slot(slot, elapsed, true);
        }
    }

    /// Stores one switch's feedback for `wanted_links` (load aligned to `slot`), or, when it
    /// failed, lets its last feedback stand in while it is less than K slots old.
    fn take_feedback(
        &mut self,
        switch: &str,
        slot: u64,
        wanted_links: Vec<u32>,
        reply: Result<proto::FeedbackReply, String>,
    ) {
        let k = self.clock.horizon();
        match reply {
            Ok(reply) => {
                if self.failing.remove(switch) {
                    tracing::info!(target: LOG_TARGET, switch = %switch, "switch answers again");
                }
                for lf in reply.links {
                    let mut load = vec![0u64; k];
                    for (i, cell) in load.iter_mut().enumerate() {
                        let abs = slot.saturating_add(i as u64);
                        if abs >= reply.start_slot {
                            let j = usize::try_from(abs - reply.start_slot).unwrap_or(usize::MAX);
                            *cell = lf.load_bps.get(j).copied().unwrap_or(0);
                        }
                    }
                    self.last_feedback
                        .insert(lf.link, (slot, lf.estimate_bps, load.clone()));
                    self.feedback.insert(lf.link, (lf.estimate_bps, load));
                }
            }
            Err(why) => {
                if self.failing.insert(switch.to_string()) {
                    tracing::warn!(target: LOG_TARGET, switch = %switch, error = %why, "FetchFeedback failed: its last feedback (up to K slots old) stands in, then its links are planned at their capacity less this agent's own plans");
                }
                for l in wanted_links {
                    let Some((at, est, load)) = self.last_feedback.get(&l) else {
                        continue;
                    };
                    let age = usize::try_from(slot.saturating_sub(*at)).unwrap_or(usize::MAX);
                    if age < k {
                        let mut shifted: Vec<u64> = load.iter().skip(age).copied().collect();
                        shifted.resize(k, 0);
                        self.feedback.insert(l, (*est, shifted));
                    }
                }
            }
        }
    }

    /// Steps 4 and 5: plans the groups, then sends the schedules; waits for the admissions of
    /// the switches that answered this slot's feedback when `may_wait`, for what is left of
    /// the RPC budget after `elapsed` (the feedback's round trip), at least a quarter of it.
    fn plan_slot(&mut self, slot: u64, elapsed: Duration, may_wait: bool) {
        self.plan_flows(slot);
        self.planned += 1;
        let budget = self.rpc.timeout;
        let wait = budget.saturating_sub(elapsed).max(budget / 4);
        let mut waiting = HashSet::new();
        for (switch, request) in self.take_batches(slot) {
            let awaited = may_wait && !self.failing.contains(&switch);
            if awaited {
                waiting.insert(switch.clone());
            }
            self.out.push(Action::Rpc(Rpc::UpdateSchedule {
                switch,
                request,
                timeout: self.rpc.slot,
                admission_wait: awaited.then_some(wait),
            }));
        }
        if waiting.is_empty() {
            self.end_slot(slot);
        } else {
            self.phase = Phase::Admission {
                slot,
                waiting,
                admitted: HashMap::new(),
            };
        }
    }

    /// One switch's admission (step 5); the slot goes on when every awaited switch answered.
    fn on_admission(&mut self, switch: &str, slot: u64, reply: Option<proto::UpdateReply>) {
        let Phase::Admission {
            slot: waiting_slot,
            waiting,
            admitted,
        } = &mut self.phase
        else {
            return;
        };
        if *waiting_slot != slot || !waiting.remove(switch) {
            return;
        }
        match reply {
            Some(r) => {
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
            None => {
                tracing::debug!(target: LOG_TARGET, switch = %switch, "no admission in time: the plans stand as made");
            }
        }
        if waiting.is_empty() {
            let admitted = std::mem::take(admitted);
            self.phase = Phase::Idle;
            self.cut_to_admitted(slot, &admitted);
            self.end_slot(slot);
        }
    }

    /// Steps 6-8: notices out, notices in, every flow's rate, late schedule changes, status.
    fn end_slot(&mut self, slot: u64) {
        self.send_notices(slot);
        for n in std::mem::take(&mut self.inbox) {
            self.handle_notice(n);
        }
        // Every slot every controlled flow gets its Rate, changed or not: the keepalive the
        // module's `ccp_heartbeat_ms` expects (set it above the slot length).
        for f in self.flows.values_mut() {
            f.applied_bps = None;
        }
        self.apply_all();
        self.flush_updates(slot);
        self.publish_status(slot);
    }

    /// Other agents' notices: handled at once when no slot's work is waiting for the switches
    /// (the flows they cut get their new rates), else when that work ends.
    fn on_notices(&mut self, notices: Vec<proto::DependencyNotice>) {
        if notices.is_empty() {
            return;
        }
        if !matches!(self.phase, Phase::Idle) {
            self.inbox.extend(notices);
            return;
        }
        for n in notices {
            self.handle_notice(n);
        }
        self.apply_all();
        if let Some(slot) = self.slot {
            self.flush_updates(slot);
            self.publish_status(slot);
        }
    }

    /// The pending schedule updates of every switch, with removals for the flows gone, as one
    /// request per switch.
    fn take_batches(&mut self, slot: u64) -> Vec<(String, proto::ScheduleUpdate)> {
        for id in std::mem::take(&mut self.gone) {
            for sw in &self.switches {
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
        for sw in &self.switches {
            let Some(flows) = self.pending.remove(&sw.name) else {
                continue;
            };
            out.push((
                sw.name.clone(),
                proto::ScheduleUpdate {
                    agent: self.cfg.listen.to_string(),
                    slot,
                    flows,
                },
            ));
        }
        out
    }

    /// Sends the pending schedule updates without waiting: the admission of a reduction (it
    /// only lowers the current slot) is left to the switch.
    fn flush_updates(&mut self, slot: u64) {
        for (switch, request) in self.take_batches(slot) {
            self.out.push(Action::Rpc(Rpc::UpdateSchedule {
                switch,
                request,
                timeout: self.rpc.slot,
                admission_wait: None,
            }));
        }
    }

    /// The rate flow `f` should run at in the current slot, bit/s: unthrottled when it has a
    /// traffic class and the classes alone order the jobs (`class_rates = line`).
    fn target_bps(&self, f: &FlowEntry) -> u64 {
        if f.dscp.is_some() && self.cfg.class_rates == mlcc_sched::ClassRates::Line {
            return f.unthrottled_bps;
        }
        match (&f.reg, &f.plan) {
            (Some(r), Some(p)) if r.iteration_bytes.is_some() && Some(p.slot) == self.slot => {
                mlcc_sched::slot_rate_bps(
                    p.rate_rule,
                    &p.decision,
                    p.progress.remaining_bytes,
                    p.available_now_bps,
                    p.spare_bps,
                    self.cfg.min_rate_bps,
                )
            }
            _ => f.unthrottled_bps,
        }
    }

    /// How flow `f` is enforced in the current slot: (pacing rate bit/s, window ceiling bytes,
    /// scavenger target µs or 0). A planned rate gets the window that goes with it
    /// ([`paced_cwnd_bytes`]); the unthrottled rate the configured window. With
    /// [`mlcc_sched::HeldFlows::Scavenger`], a flow the policy holds at the floor
    /// ([`mlcc_sched::is_held`]) runs unthrottled under the configured window with the
    /// scavenger target, so the program's LEDBAT sets its window.
    fn enforcement(&self, f: &FlowEntry) -> (u64, u32, u32) {
        let target_bps = self.target_bps(f);
        if self.cfg.held_flows == mlcc_sched::HeldFlows::Scavenger
            && target_bps < f.unthrottled_bps
            && mlcc_sched::is_held(target_bps, self.cfg.min_rate_bps)
        {
            return (
                f.unthrottled_bps,
                self.cfg.cwnd_bytes,
                self.cfg.scavenger_target_us,
            );
        }
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
        (target_bps, cwnd, 0)
    }

    /// Step 7 for every installed flow whose Rate, Cwnd ceiling or scavenger target changed,
    /// and for every installed flow whose traffic class changed, its class.
    fn apply_all(&mut self) {
        let mut out = Vec::new();
        for (local, f) in &self.flows {
            if !f.installed {
                continue;
            }
            let (rate, cwnd, scavenge_us) = self.enforcement(f);
            let bytes = u32::try_from(rate / 8).unwrap_or(u32::MAX).max(1);
            if f.applied_bps == Some(bytes)
                && f.applied_cwnd == Some(cwnd)
                && f.applied_scavenge_us == Some(scavenge_us)
            {
                continue;
            }
            out.push((*local, bytes, cwnd, scavenge_us));
        }
        for (local, rate_bytes, cwnd_bytes, scavenge_us) in out {
            if let Some(f) = self.flows.get_mut(&local) {
                f.applied_bps = Some(rate_bytes);
                f.applied_cwnd = Some(cwnd_bytes);
                f.applied_scavenge_us = Some(scavenge_us);
            }
            self.out.push(Action::SetRate {
                flow: local,
                rate_bytes,
                cwnd_bytes,
                scavenge_us,
            });
        }
        // With classes off every flow stays at no class and its socket's own marking: nothing
        // is sent.
        for (local, f) in self.flows.iter_mut() {
            if f.installed && f.dscp_set != Some(f.dscp) {
                f.dscp_set = Some(f.dscp);
                self.out.push(Action::SetClass {
                    flow: *local,
                    dscp: f.dscp,
                });
            }
        }
    }

    /// Step 8's status: every registered flow with the program, the native ones counted.
    fn publish_status(&mut self, slot: u64) {
        let mut flows = Vec::new();
        let mut native = 0;
        for f in self.flows.values() {
            let Some(r) = &f.reg else {
                native += 1;
                continue;
            };
            if !f.installed {
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
                dscp: f.dscp_set.flatten().map(u32::from),
            });
        }
        let mode = if self.switches.is_empty() {
            "nic-only"
        } else {
            "switch"
        };
        self.out.push(Action::Status(proto::StatusReply {
            slot,
            slot_us: self.clock.slot_us(),
            mode: mode.to_string(),
            flows,
            native_flows: native,
            ..Default::default()
        }));
    }

    /// At shutdown: takes this agent's schedules off the switches (`UpdateSchedule` removals
    /// with the RPC deadline; the shell waits for them).
    fn on_stop(&mut self, now_us: u64) {
        let ids: Vec<u64> = self
            .flows
            .values()
            .filter(|f| f.plan.is_some())
            .map(|f| f.id)
            .collect();
        self.gone.extend(ids);
        for (switch, request) in self.take_batches(self.clock.slot_at(now_us)) {
            self.out.push(Action::Rpc(Rpc::UpdateSchedule {
                switch,
                request,
                timeout: self.rpc.timeout,
                admission_wait: None,
            }));
        }
    }
}
