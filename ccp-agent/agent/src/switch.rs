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
//! - `UpdateSchedule`: per flow, its schedule along the switch's links of its path replaces the
//!   flow's previous one (an empty schedule removes it), and its achieved rate of a past slot is
//!   recorded on those links (the estimate of [`mlcc_sched::table`]: samples of one slot add up);
//! - every slot, and on every request, the table moves to the current wall-clock slot, so expired
//!   slots are dropped.
//!
//! Several daemons (one per switch of a hierarchy) each own disjoint links; an agent talks to
//! every switch its flows cross. All state is in one mutex-protected [`SwitchState`]; requests
//! never panic on bad input: an unknown link or a bad schedule is refused with a gRPC error or
//! an entry of `UpdateReply::errors` naming it.

use crate::config::{Switch, Topology};
use crate::proto::{self, switch::switch_server};
use crate::wall_us;
use mlcc_sched::{
    FlowId, LinkId, LinkLoadTable, RateSample, Schedule, SlotClock, RATE_WINDOW_SLOTS,
};
use std::sync::{Arc, Mutex};
use tonic::{Request, Response, Status};

/// The table of one switch.
pub struct SwitchState {
    /// The switch's name.
    pub name: String,
    table: LinkLoadTable,
}

impl SwitchState {
    /// The state of `switch` of `topo`, its table at the current wall-clock slot.
    pub fn new(
        topo: &Topology,
        switch: &Switch,
        clock: SlotClock,
    ) -> Result<Self, mlcc_sched::SchedError> {
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
        })
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
            out.push(proto::LinkFeedback {
                link: l.0,
                capacity_bps: self.table.capacity_bps(l).unwrap_or(0),
                estimate_bps: self.table.estimate_bps(l).unwrap_or(0),
                load_bps: load,
            });
        }
        Ok(proto::FeedbackReply {
            start_slot: start,
            links: out,
            flows: self.table.flow_count() as u32,
        })
    }

    /// `UpdateSchedule` on the state.
    pub fn update(&mut self, req: &proto::ScheduleUpdate) -> proto::UpdateReply {
        self.advance(req.slot.max(self.table.clock().slot_at(wall_us())));
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
                    Ok(_) | Err(mlcc_sched::SchedError::UnknownFlow(_)) => Ok(()),
                    Err(e) => Err(e),
                }
            } else {
                self.table.set_schedule(
                    flow,
                    &links,
                    &Schedule {
                        start_slot: f.start_slot,
                        rates_bps: f.rates_bps.clone(),
                    },
                )
            };
            match r {
                Ok(()) => reply.accepted += 1,
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
        self.lock()
            .feedback(req.get_ref())
            .map(Response::new)
            .map_err(Status::invalid_argument)
    }

    async fn update_schedule(
        &self,
        req: Request<proto::ScheduleUpdate>,
    ) -> Result<Response<proto::UpdateReply>, Status> {
        let reply = self.lock().update(req.get_ref());
        for e in &reply.errors {
            tracing::warn!(error = %e, "schedule refused");
        }
        Ok(Response::new(reply))
    }
}

/// Serves `switch` of `topo` on its `listen` address (or `listener` when given, for tests)
/// until `shutdown` resolves; advances the table every slot.
pub async fn serve(
    topo: &Topology,
    switch: &Switch,
    clock: SlotClock,
    listener: Option<tokio::net::TcpListener>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let state = Arc::new(Mutex::new(SwitchState::new(topo, switch, clock)?));
    let ticker = {
        let state = state.clone();
        tokio::spawn(async move {
            let mut iv = tokio::time::interval(std::time::Duration::from_micros(clock.slot_us()));
            loop {
                iv.tick().await;
                let slot = clock.slot_at(wall_us());
                let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
                s.advance(slot);
                tracing::debug!(slot, flows = s.table().flow_count(), "switch slot");
            }
        })
    };
    let svc = switch_server::SwitchServer::new(SwitchService::new(state));
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
