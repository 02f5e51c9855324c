// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! A simulated cluster for the agent core's tests: agents ([`Core`]s) over a fluid datapath
//! model, training jobs that enforce their own dependencies, and one switch daemon owning the
//! shared link, all advanced slot by slot on a simulated clock (no threads, no sockets, no wall
//! clock: every run is the same).
//!
//! Topology ([`config`]): hosts h1-h4 (10.0.0.1-4) with 1 Gbit/s NICs (links 1-4); every
//! route h_i → h_j is [NIC of h_i, 10], link 10 (100 Mbit/s) belonging to switch s1. Agent A
//! (127.0.0.1:7101) serves h1 and h2, agent B (127.0.0.1:7102) h3 and h4.
//!
//! Datapath: in a slot a flow sends what its application may send, at most its Rate over the
//! slot; when the flows on a link want more than the link carries, each gets its demand scaled
//! down to fit and sees a loss. Applications: a ring worker may send at most its own chunk
//! more than it received from its predecessor; a parameter server may broadcast at most what
//! the slowest push delivered; a job whose flows all delivered their bytes computes for some
//! slots, then begins its next iteration.

use crate::fabric::{Fabric, Host, Routes, Switch};
use crate::flows::FlowKey;
use crate::proto;
use crate::registration::{Registration, Registrations};
use crate::{Action, Core, CoreConfig, Input, LocalFlow, Measurement, Rpc};
use mlcc_sched::{JobOrder, Rules};
use mltcp_progress::{FlowKind, Paradigm, Role};
use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};

/// Slot length of the simulated cluster, µs.
pub const SLOT_US: u64 = 20_000;
/// The shared link and its capacity, bit/s.
pub const SHARED_LINK: u32 = 10;
/// Capacity of the shared link, bit/s.
pub const SHARED_BPS: u64 = 100_000_000;
const NIC_BPS: u64 = 1_000_000_000;
/// Slot number of the first simulated slot (wall-clock grid).
pub const FIRST_SLOT: u64 = 90_000_000;
const AGENT_A: &str = "127.0.0.1:7101";
const AGENT_B: &str = "127.0.0.1:7102";
/// The rate floor, bit/s (agent.toml's default `min_rate_kbps`, 5000).
pub const MIN_RATE_BPS: u64 = 5_000_000;

/// The address of host `n` (1-4).
pub fn host_ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, n)
}

/// A change a test makes to [`config`]'s defaults.
pub type Tweak = fn(&mut CoreConfig);

/// The config of an agent serving `hosts` (names) on the topology above, with agent.toml's
/// defaults for everything else (rate floor 5 Mbit/s, 16 MB window, RPC deadline a third of
/// the slot, the `mlcc` rules, work conservation on, strict rates off, no traffic classes);
/// `extra` changes it (e.g. `|c| c.nic_only = true`).
pub fn config(hosts: &[&str], extra: Tweak) -> CoreConfig {
    let agent_of = |n: u8| -> SocketAddr {
        let a = if n <= 2 { AGENT_A } else { AGENT_B };
        a.parse().expect("an agent address")
    };
    let host_name = |n: u8| format!("h{n}");
    let mut links: HashMap<u32, u64> = (1..=4u32).map(|n| (n, NIC_BPS)).collect();
    links.insert(SHARED_LINK, SHARED_BPS);
    let host_list = (1..=4u8)
        .map(|n| Host {
            name: host_name(n),
            addrs: vec![host_ip(n)],
            nic: u32::from(n),
            agent: agent_of(n),
        })
        .collect();
    let switches = vec![Switch {
        name: String::from("s1"),
        listen: "127.0.0.1:7200".parse().expect("a switch address"),
        links: vec![SHARED_LINK],
    }];
    let mut routes = Routes::new();
    for a in 1..=4u8 {
        for b in (1..=4u8).filter(|b| *b != a) {
            routes.insert(
                (host_name(a), host_name(b)),
                vec![u32::from(a), SHARED_LINK],
            );
        }
    }
    let first: u8 = hosts[0][1..].parse().expect("a host h1-h4");
    let slot_ms = SLOT_US / 1000;
    let mut cfg = CoreConfig {
        slot_ms,
        horizon: 5,
        topology: Fabric {
            links,
            hosts: host_list,
            switches,
            routes,
        },
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        listen: agent_of(first),
        nic_only: false,
        schedule: true,
        min_rate_bps: MIN_RATE_BPS,
        cwnd_bytes: 16 << 20,
        rpc_timeout_ms: (slot_ms / 3).max(1),
        rules: Rules::default(),
        job_order: JobOrder::default(),
        work_conserving: true,
        strict_rates: false,
        classes: 0,
        class_rates: mlcc_sched::ClassRates::Plan,
        held_flows: mlcc_sched::HeldFlows::Floor,
        scavenger_target_us: 1000,
    };
    extra(&mut cfg);
    cfg
}

/// The registration of a flow as a progress region would give it.
pub fn registration(
    job: &str,
    paradigm: Paradigm,
    role: Role,
    kind: FlowKind,
    (rank, peer_rank): (u32, u32),
    iteration_bytes: u64,
    world_size: u64,
) -> Registration {
    Registration {
        job: job.to_string(),
        rank,
        paradigm,
        role,
        kind,
        peer_rank,
        iteration: 0,
        iter_start_ns: 0,
        sent_bytes: 0,
        iteration_bytes: Some(iteration_bytes),
        sending: true,
        ring_chunk_bytes: (paradigm == Paradigm::Ring && world_size >= 2)
            .then(|| iteration_bytes / (2 * (world_size - 1))),
    }
}

/// One flow of the simulated datapath.
pub struct SimFlow {
    /// Its 4-tuple.
    pub key: FlowKey,
    /// Its job (index into [`Sim::jobs`]).
    pub job: usize,
    /// What its progress region says (iteration fields kept up to date).
    pub reg: Registration,
    /// The agent that controls it (index into [`Sim::agents`]) and its number there.
    pub agent: usize,
    /// Its number at its agent.
    pub local: LocalFlow,
    /// Whether the program is installed.
    pub installed: bool,
    /// The last Rate set, bytes/s.
    pub rate_bytes: u64,
    /// Bytes delivered in the current iteration.
    pub acked_iter: u64,
    /// Whether the datapath closed it.
    pub closed: bool,
    /// The last slot a SetRate reached it.
    pub last_set_slot: Option<u64>,
    /// The DSCP its last SetClass set (`None`: the socket's own).
    pub dscp: Option<u8>,
}

/// One simulated job.
pub struct SimJob {
    /// Its flows (indices into [`Sim::flows`]).
    pub flows: Vec<usize>,
    /// Current iteration.
    pub iteration: u64,
    /// Slots of computation between iterations.
    pub compute_slots: u64,
    /// `Some(slot)`: computing until that slot begins.
    pub computing_until: Option<u64>,
    /// Iterations completed.
    pub completed: u64,
    /// CLOCK_MONOTONIC ns of the current iteration's start.
    pub iter_start_ns: u64,
}

/// One agent of the simulated cluster.
pub struct SimAgent {
    /// The core under test.
    pub core: Core,
    /// Its config.
    pub cfg: CoreConfig,
    /// The last status it emitted.
    pub status: Option<proto::StatusReply>,
    /// Every notice it sent to another agent, with the peer's address.
    pub notices_sent: Vec<(SocketAddr, proto::DependencyNotice)>,
    /// Every action it emitted, in order.
    pub actions: Vec<Action>,
}

/// The switch daemon s1, reduced to its table: flow → (agent, start slot, rates).
#[derive(Default)]
pub struct SimSwitch {
    /// Failing: every RPC fails (as if the daemon were down).
    pub failing: bool,
    /// Its table.
    pub table: HashMap<u64, (String, u64, Vec<u64>)>,
    /// Requests it answered.
    pub answered: u64,
}

impl SimSwitch {
    fn feedback(&mut self, req: &proto::FeedbackRequest) -> Result<proto::FeedbackReply, String> {
        if self.failing {
            return Err(String::from("unavailable (simulated)"));
        }
        self.answered += 1;
        let k = 5;
        let links = req
            .links
            .iter()
            .map(|l| {
                let mut load = vec![0u64; k];
                for (flow, (_, start, rates)) in &self.table {
                    if req.exclude_flows.contains(flow) {
                        continue;
                    }
                    for (i, cell) in load.iter_mut().enumerate() {
                        let s = req.slot + i as u64;
                        if s >= *start {
                            let j = usize::try_from(s - start).unwrap_or(usize::MAX);
                            *cell += rates.get(j).copied().unwrap_or(0);
                        }
                    }
                }
                proto::LinkFeedback {
                    link: *l,
                    capacity_bps: SHARED_BPS,
                    estimate_bps: SHARED_BPS,
                    load_bps: load,
                    ..Default::default()
                }
            })
            .collect();
        Ok(proto::FeedbackReply {
            start_slot: req.slot,
            links,
            ..Default::default()
        })
    }

    fn update(&mut self, req: &proto::ScheduleUpdate) -> Option<proto::UpdateReply> {
        if self.failing {
            return None;
        }
        self.answered += 1;
        for f in &req.flows {
            if f.rates_bps.is_empty() {
                self.table.remove(&f.flow);
            } else {
                self.table.insert(
                    f.flow,
                    (req.agent.clone(), f.start_slot, f.rates_bps.clone()),
                );
            }
        }
        Some(proto::UpdateReply {
            accepted: u32::try_from(req.flows.len()).unwrap_or(u32::MAX),
            errors: Vec::new(),
            admitted: req
                .flows
                .iter()
                .filter(|f| !f.rates_bps.is_empty())
                .cloned()
                .collect(),
        })
    }
}

/// The simulated cluster.
pub struct Sim {
    /// The agents.
    pub agents: Vec<SimAgent>,
    /// The flows.
    pub flows: Vec<SimFlow>,
    /// The jobs.
    pub jobs: Vec<SimJob>,
    /// Switch s1.
    pub switch: SimSwitch,
    /// The current slot (the next to run).
    pub slot: u64,
    /// Hold the switch's answers until every agent has ticked (replies slower than the
    /// agents' ticks), instead of answering at once.
    pub slow_switch: bool,
    /// Slots in which the flows' rates asked the shared link for more than its capacity
    /// (every sender then lost bytes).
    pub overbooked_slots: u64,
    next_local: LocalFlow,
    held: Vec<(usize, Input)>,
}

/// Wall-clock µs of slot `s`'s start.
pub fn slot_start_us(s: u64) -> u64 {
    s * SLOT_US
}

impl Sim {
    /// Two agents: A serves h1 and h2, B serves h3 and h4.
    pub fn two_agents(extra: Tweak) -> Self {
        Self::with_configs(vec![
            config(&["h1", "h2"], extra),
            config(&["h3", "h4"], extra),
        ])
    }

    /// The agents of `cfgs`, no job yet.
    pub fn with_configs(cfgs: Vec<CoreConfig>) -> Self {
        let agents = cfgs
            .into_iter()
            .map(|cfg| SimAgent {
                core: Core::new(cfg.clone(), slot_start_us(FIRST_SLOT)).expect("a core"),
                cfg,
                status: None,
                notices_sent: Vec::new(),
                actions: Vec::new(),
            })
            .collect();
        Sim {
            agents,
            flows: Vec::new(),
            jobs: Vec::new(),
            switch: SimSwitch::default(),
            slot: FIRST_SLOT,
            slow_switch: false,
            overbooked_slots: 0,
            next_local: 1,
            held: Vec::new(),
        }
    }

    fn agent_of(&self, ip: Ipv4Addr) -> usize {
        let name = self.agents[0]
            .cfg
            .topology
            .host_of(ip)
            .map(|h| h.name.clone())
            .unwrap_or_default();
        self.agents
            .iter()
            .position(|a| a.cfg.hosts.contains(&name))
            .expect("a host served by one of the agents")
    }

    fn add_flow(&mut self, job: usize, src: u8, dst: u8, reg: Registration) {
        let n = u16::try_from(self.flows.len()).expect("few flows");
        let key = FlowKey {
            src: host_ip(src),
            src_port: 5000 + n,
            dst: host_ip(dst),
            dst_port: 6000 + n,
        };
        let agent = self.agent_of(key.src);
        let local = self.next_local;
        self.next_local += 1;
        self.jobs[job].flows.push(self.flows.len());
        self.flows.push(SimFlow {
            key,
            job,
            reg,
            agent,
            local,
            installed: false,
            rate_bytes: NIC_BPS / 8,
            acked_iter: 0,
            closed: false,
            last_set_slot: None,
            dscp: None,
        });
    }

    fn add_job(&mut self, compute_slots: u64) -> usize {
        self.jobs.push(SimJob {
            flows: Vec::new(),
            iteration: 0,
            compute_slots,
            computing_until: None,
            completed: 0,
            iter_start_ns: 0,
        });
        self.jobs.len() - 1
    }

    /// A ring all-reduce job over `hosts` (host numbers, rank order): rank r sends
    /// `bytes` per iteration to rank r+1.
    pub fn ring(&mut self, name: &str, hosts: &[u8], bytes: u64, compute_slots: u64) {
        let j = self.add_job(compute_slots);
        let w = hosts.len();
        for (r, h) in hosts.iter().enumerate() {
            let next = (r + 1) % w;
            let reg = registration(
                name,
                Paradigm::Ring,
                Role::Worker,
                FlowKind::RingSend,
                (r as u32, next as u32),
                bytes,
                w as u64,
            );
            self.add_flow(j, *h, hosts[next], reg);
        }
    }

    /// A parameter-server job: workers on `workers` (ranks 0..), the PS (rank W) on `ps`; each
    /// push and each broadcast carries `bytes` per iteration.
    pub fn ps(&mut self, name: &str, ps: u8, workers: &[u8], bytes: u64, compute_slots: u64) {
        let j = self.add_job(compute_slots);
        let w = workers.len() as u32;
        let ps_reg = |role, kind, ranks| {
            registration(
                name,
                Paradigm::ParameterServer,
                role,
                kind,
                ranks,
                bytes,
                u64::from(w) + 1,
            )
        };
        for (r, h) in workers.iter().enumerate() {
            let reg = ps_reg(Role::Worker, FlowKind::PsPush, (r as u32, w));
            self.add_flow(j, *h, ps, reg);
        }
        for (r, h) in workers.iter().enumerate() {
            let reg = ps_reg(Role::ParameterServer, FlowKind::PsPull, (w, r as u32));
            self.add_flow(j, ps, *h, reg);
        }
    }

    fn registrations(&self) -> Registrations {
        self.flows
            .iter()
            .filter(|f| !f.closed)
            .map(|f| (f.key, f.reg.clone()))
            .collect()
    }

    /// Announces every flow not yet announced to its agent (CREATE), after a progress reading.
    pub fn create_flows(&mut self) {
        let regs = self.registrations();
        for a in 0..self.agents.len() {
            self.feed(a, Input::Progress(regs.clone()));
        }
        for i in 0..self.flows.len() {
            let (a, local, key) = (self.flows[i].agent, self.flows[i].local, self.flows[i].key);
            self.feed(
                a,
                Input::FlowCreated {
                    flow: local,
                    key,
                    sock_id: 0,
                },
            );
        }
    }

    /// The datapath closes every flow.
    pub fn close_all(&mut self) {
        for i in 0..self.flows.len() {
            self.flows[i].closed = true;
            let (a, local) = (self.flows[i].agent, self.flows[i].local);
            self.feed(a, Input::FlowClosed { flow: local });
        }
    }

    /// Hands `input` to agent `a` and performs the actions, with the inputs they cause.
    pub fn feed(&mut self, a: usize, input: Input) {
        let mut queue = VecDeque::from([(a, input)]);
        while let Some((a, input)) = queue.pop_front() {
            let actions = self.agents[a].core.handle(input);
            for act in actions {
                self.agents[a].actions.push(act.clone());
                self.perform(a, act, &mut queue);
            }
        }
    }

    fn flow_mut(&mut self, a: usize, local: LocalFlow) -> Option<&mut SimFlow> {
        self.flows
            .iter_mut()
            .find(|f| f.agent == a && f.local == local && !f.closed)
    }

    fn perform(&mut self, a: usize, act: Action, queue: &mut VecDeque<(usize, Input)>) {
        let slot = self.slot;
        match act {
            Action::Install {
                flow, rate_bytes, ..
            } => {
                if let Some(f) = self.flow_mut(a, flow) {
                    f.installed = true;
                    f.rate_bytes = u64::from(rate_bytes);
                }
            }
            Action::SetRate {
                flow, rate_bytes, ..
            } => {
                let f = self
                    .flow_mut(a, flow)
                    .expect("a rate only for a flow the datapath has open");
                assert!(f.installed, "a rate for a flow without the program");
                f.rate_bytes = u64::from(rate_bytes);
                f.last_set_slot = Some(slot);
            }
            Action::Rpc(Rpc::FetchFeedback {
                switch, request, ..
            }) => {
                assert_eq!(switch, "s1");
                let reply = self.switch.feedback(&request);
                let input = Input::Feedback {
                    switch,
                    slot: request.slot,
                    at_us: slot_start_us(slot) + 1_000,
                    reply,
                };
                self.answer(a, input, queue);
            }
            Action::Rpc(Rpc::UpdateSchedule {
                switch,
                request,
                admission_wait,
                ..
            }) => {
                let reply = self.switch.update(&request);
                if admission_wait.is_some() {
                    let input = Input::Admission {
                        switch,
                        slot: request.slot,
                        reply,
                    };
                    self.answer(a, input, queue);
                }
            }
            Action::Rpc(Rpc::Notify { peer, notice, .. }) => {
                self.agents[a].notices_sent.push((peer, notice.clone()));
                let to = self
                    .agents
                    .iter()
                    .position(|x| x.cfg.listen == peer)
                    .expect("a notice to a known agent");
                queue.push_back((to, Input::Notices(vec![notice])));
            }
            Action::SetClass { flow, dscp } => {
                let f = self
                    .flow_mut(a, flow)
                    .expect("a class only for a flow the datapath has open");
                assert!(f.installed, "a class for a flow without the program");
                f.dscp = dscp;
            }
            Action::Status(s) => self.agents[a].status = Some(s),
            Action::Rtts(_) => {}
        }
    }

    fn answer(&mut self, a: usize, input: Input, queue: &mut VecDeque<(usize, Input)>) {
        if self.slow_switch {
            self.held.push((a, input));
        } else {
            queue.push_back((a, input));
        }
    }

    /// Runs one slot: iterations begin, progress readings and ticks go to the agents (the
    /// switch's answers, when slow, after every tick), then the datapath moves the slot's
    /// bytes and reports them.
    pub fn step(&mut self) {
        let t_us = slot_start_us(self.slot);
        for j in &mut self.jobs {
            if j.computing_until.is_some_and(|u| self.slot >= u) {
                j.computing_until = None;
                j.iteration += 1;
                j.iter_start_ns = t_us * 1000;
                for &i in &j.flows {
                    self.flows[i].acked_iter = 0;
                    self.flows[i].reg.iteration = j.iteration;
                    self.flows[i].reg.iter_start_ns = j.iter_start_ns;
                }
            }
        }
        let regs = self.registrations();
        for a in 0..self.agents.len() {
            self.feed(a, Input::Progress(regs.clone()));
            self.feed(a, Input::Tick { now_us: t_us + 1 });
        }
        while !self.held.is_empty() {
            for (a, input) in std::mem::take(&mut self.held) {
                self.feed(a, input);
            }
        }
        self.move_bytes(t_us);
        self.slot += 1;
    }

    /// What flow `i`'s application may still send in this iteration, bytes.
    fn sendable(&self, i: usize) -> u64 {
        let f = &self.flows[i];
        let job = &self.jobs[f.job];
        if job.computing_until.is_some() || f.closed {
            return 0;
        }
        let total = f.reg.iteration_bytes.unwrap_or(0);
        let limit = match (f.reg.paradigm, f.reg.kind) {
            (Paradigm::Ring, _) => {
                // The flow into this worker: its predecessor's.
                let pred = job
                    .flows
                    .iter()
                    .map(|&k| &self.flows[k])
                    .find(|p| p.reg.peer_rank == f.reg.rank)
                    .map_or(total, |p| p.acked_iter);
                pred.saturating_add(f.reg.ring_chunk_bytes.unwrap_or(0))
            }
            (Paradigm::ParameterServer, FlowKind::PsPull) => job
                .flows
                .iter()
                .map(|&k| &self.flows[k])
                .filter(|p| p.reg.kind == FlowKind::PsPush)
                .map(|p| p.acked_iter)
                .min()
                .unwrap_or(total),
            _ => total,
        };
        limit.min(total).saturating_sub(f.acked_iter)
    }

    fn move_bytes(&mut self, t_us: u64) {
        let slot_s = SLOT_US as f64 / 1e6;
        let want: Vec<u64> = (0..self.flows.len())
            .map(|i| {
                let by_rate = (self.flows[i].rate_bytes as f64 * slot_s) as u64;
                self.sendable(i).min(by_rate)
            })
            .collect();
        let cap = (SHARED_BPS / 8) as f64 * slot_s;
        let total: u64 = want.iter().sum();
        let scale = if total as f64 > cap {
            self.overbooked_slots += 1;
            cap / total as f64
        } else {
            1.0
        };
        let end_ns = (t_us + SLOT_US - 1) * 1000;
        for (i, w) in want.into_iter().enumerate() {
            let sent = (w as f64 * scale) as u64;
            let lost = u64::from(scale < 1.0 && w > 0);
            self.flows[i].acked_iter += sent;
            let f = &self.flows[i];
            if f.closed || !f.installed {
                continue;
            }
            let (a, local) = (f.agent, f.local);
            self.feed(
                a,
                Input::Report {
                    flow: local,
                    fields: Measurement {
                        acked: Some(sent),
                        lost: Some(lost),
                        rtt_us: Some(1_000),
                        dp_now_us: Some(end_ns / 1000),
                        arrival_ns: end_ns,
                    },
                },
            );
        }
        let slot = self.slot;
        for j in &mut self.jobs {
            if j.computing_until.is_none()
                && j.flows.iter().all(|&i| {
                    self.flows[i].acked_iter >= self.flows[i].reg.iteration_bytes.unwrap_or(0)
                })
            {
                j.completed += 1;
                j.computing_until = Some(slot + 1 + j.compute_slots);
            }
        }
    }
}
