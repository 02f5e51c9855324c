// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The agent core's planning rules: coflow groups and their order, the dependency each
//! paradigm implies, Alg. 1 + Alg. 2 per group (through `mlcc_sched`), work conservation within
//! a slot, the cut of a plan to the switches' admission, and the dependency notices (sent and
//! received).
//!
//! "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers", Sec. IV-A (Alg. 1),
//! IV-B (Alg. 2, dependencies) and IV-C (the control protocol); the steps are described in
//! [`crate::agent_core`]'s module docs. These functions read and write the core's state and
//! queue RPCs as [`Action`]s; they do no I/O. They are kept together here, apart from the
//! core's state machine, so that `mlcc_sched`'s policy layer can replace them as one piece.

use super::Core;
use crate::agent_core::io::{Action, Rpc};
use crate::flows::FlowKey;
use crate::monitor::Registration;
use crate::proto::{self, notice_kind};
use mlcc_sched::{Decision, Dependency, FlowId, FlowProgress, LinkId, LinkView, PathView};
use mltcp_progress::{FlowKind, Paradigm, Role, NO_RANK};
use std::collections::{BTreeMap, HashMap};

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
pub(super) struct Planned {
    pub(super) slot: u64,
    pub(super) decision: Decision,
    pub(super) view: PathView,
    /// The flow's MADD share of its path's available bandwidth in the current slot, bit/s: the
    /// pacing rate of a slot that completes it (`GroupDecision::share_now_bps`).
    pub(super) available_now_bps: u64,
    /// For a flow planned no bytes in the current slot (between iterations, waiting on a
    /// dependency, or deferred by Alg. 1): its share of what every plan of the slot leaves
    /// free on its path, bit/s ([`Core::share_spare`]); 0 for a flow with bytes planned.
    pub(super) spare_bps: u64,
    pub(super) progress: FlowProgress,
    pub(super) local: Vec<LinkId>,
    pub(super) remote: Vec<u32>,
}

/// A flow to plan in the current slot, as one member of its group.
#[derive(Clone, Debug)]
pub(super) struct Member {
    local: u64,
    pub(super) id: u64,
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

impl Core {
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
    pub(super) fn tally(&mut self, remote: &[u32], rates: &[u64], add: bool) {
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
    pub(super) fn groups(&self) -> Vec<Vec<Member>> {
        let mut groups: BTreeMap<GroupKey, Vec<Member>> = BTreeMap::new();
        for (local, f) in &self.flows {
            if !f.installed {
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
                !self.local_links.contains(l) && self.switches.iter().any(|s| s.links.contains(l))
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
    pub(super) fn plan_group(&mut self, members: &[Member], slot: u64) {
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
    pub(super) fn share_spare(&mut self, slot: u64) {
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

    pub(super) fn publish_local(&mut self, id: u64, p: &Planned) {
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

    pub(super) fn queue_update(&mut self, id: u64, p: &Planned) {
        if self.switches.is_empty() {
            return;
        }
        let (achieved_bps, app_limited) = self
            .flows
            .values()
            .find(|f| f.id == id)
            .map_or((0, true), |f| (f.achieved_bps, f.app_limited));
        let s = p.decision.plan.schedule();
        for sw in &self.switches {
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

    /// Cuts each flow's plan of `slot` to the least of the rates the switches admitted for it
    /// (`admitted`: flow id → the admitted schedules, one per answering switch), with
    /// `Decision::clipped_to`; the cut plans replace the flows' schedules on the NIC table and
    /// the slot's switch-link tally.
    pub(super) fn cut_to_admitted(
        &mut self,
        slot: u64,
        admitted: &HashMap<u64, Vec<mlcc_sched::Schedule>>,
    ) {
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

    /// Alg. 2's sender side: each flow planned this slot tells its receiver's agent its
    /// accumulated bytes F_i (`Notify`; handled in place when the receiver is one of this
    /// agent's hosts); a PS's broadcast notices carry F_b^max over its broadcast flows as
    /// `bound_bytes`.
    pub(super) fn send_notices(&mut self, slot: u64) {
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
            self.out.push(Action::Rpc(Rpc::Notify {
                peer: addr,
                notice: n,
                timeout: self.rpc.slot,
            }));
        }
    }

    /// Alg. 2's receiver side for one notice: remembers F_i, and cuts the successor flows of the
    /// receiving process that are ahead of it by the excess.
    pub(super) fn handle_notice(&mut self, n: proto::DependencyNotice) {
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
}

#[cfg(test)]
mod tests {
    use super::{group_key, least_admitted, spare_shares};
    use crate::agent_core::tests::sim::registration;
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
        registration("j", paradigm, role, kind, (rank, peer_rank), 1, 0)
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
