// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The switch daemon's gRPC service (`FetchFeedback`, `UpdateSchedule`, `PcnStart`, `PcnEnd`):
//! each request is served under the state's lock, and the ECN threshold changes it decided are
//! queued for the [`OrderedApplier`] before the lock is released; the reply never waits for the
//! kernel.

use super::applier::OrderedApplier;
use super::state::SwitchState;
use crate::proto::{self, switch_server};
use crate::wall_us;
use std::sync::{Arc, Mutex};
use tonic::{Request, Response, Status};

/// The gRPC service over a shared [`SwitchState`] and the applier of its threshold changes.
#[derive(Clone)]
pub struct SwitchService {
    state: Arc<Mutex<SwitchState>>,
    applier: OrderedApplier,
}

impl SwitchService {
    /// A service over `state`, whose threshold changes `applier` makes.
    pub fn new(state: Arc<Mutex<SwitchState>>, applier: OrderedApplier) -> Self {
        Self { state, applier }
    }

    /// Runs `f` on the state under its lock and queues the threshold changes it decided before
    /// the lock is released (so the applier's queue keeps the bookkeeping's order across
    /// concurrent requests); returns at once, without waiting for them to be made. Every access
    /// that may change the PCN bookkeeping goes through here (the RPCs, the slot ticker, start-up
    /// and shutdown).
    pub fn with_state<R>(&self, f: impl FnOnce(&mut SwitchState) -> R) -> R {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let r = f(&mut s);
        self.applier.submit(s.take_changes());
        r
    }

    /// The applier of the threshold changes (to wait for them: [`OrderedApplier::flush`]).
    pub fn applier(&self) -> &OrderedApplier {
        &self.applier
    }
}

#[tonic::async_trait]
impl switch_server::Switch for SwitchService {
    async fn fetch_feedback(
        &self,
        req: Request<proto::FeedbackRequest>,
    ) -> Result<Response<proto::FeedbackReply>, Status> {
        self.with_state(|s| {
            s.served.requests[0] += 1;
            let r = s.feedback(req.get_ref());
            if let Ok(r) = &r {
                s.served.feedback_links += r.links.len() as u64;
            }
            r
        })
        .map(Response::new)
        .map_err(Status::invalid_argument)
    }

    async fn update_schedule(
        &self,
        req: Request<proto::ScheduleUpdate>,
    ) -> Result<Response<proto::UpdateReply>, Status> {
        let reply = self.with_state(|s| {
            s.served.requests[1] += 1;
            s.update(req.get_ref())
        });
        for e in &reply.errors {
            tracing::warn!(error = %e, "schedule refused");
        }
        Ok(Response::new(reply))
    }

    async fn pcn_start(
        &self,
        req: Request<proto::PcnStart>,
    ) -> Result<Response<proto::PcnAck>, Status> {
        self.with_state(|s| {
            s.served.requests[2] += 1;
            let (now, slot) = (s.now_ms(), s.table().clock().slot_at(wall_us()));
            s.pcn_start(req.get_ref(), now, slot)
        })
        .map(Response::new)
        .map_err(Status::invalid_argument)
    }

    async fn pcn_end(
        &self,
        req: Request<proto::PcnEnd>,
    ) -> Result<Response<proto::PcnAck>, Status> {
        let ack = self.with_state(|s| {
            s.served.requests[3] += 1;
            s.pcn_end(req.get_ref())
        });
        Ok(Response::new(ack))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EcnQueue;
    use crate::switch::fixtures::ecn_topo;
    use crate::switch::ThresholdApplier;
    use std::time::{Duration, Instant};
    use switch_server::Switch as _;

    /// Takes `delay` over each change, then records (device, threshold).
    struct SlowApplier {
        delay: Duration,
        made: Mutex<Vec<(String, u32)>>,
    }

    impl ThresholdApplier for SlowApplier {
        fn apply(&self, q: &EcnQueue, threshold_bytes: u32) -> Result<(), String> {
            std::thread::sleep(self.delay);
            self.made
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((q.dev.clone(), threshold_bytes));
            Ok(())
        }

        fn install_classes(&self, c: &crate::config::ClassesConfig) -> Result<String, String> {
            Err(format!("{}: not in this test", c.dev))
        }
    }

    /// The reply of `rpc`, which must come well before one slow change is made.
    async fn quick<T>(
        what: &str,
        rpc: impl std::future::Future<Output = Result<Response<T>, Status>>,
    ) -> T {
        let t0 = Instant::now();
        let r = rpc.await.unwrap_or_else(|e| panic!("{what}: {e}"));
        let took = t0.elapsed();
        assert!(took < Duration::from_millis(100), "{what} took {took:?}");
        r.into_inner()
    }

    #[test]
    fn a_slow_applier_does_not_delay_the_rpcs() {
        let topo = ecn_topo("min");
        let clock = mlcc_sched::SlotClock::new(1_000_000, 4).unwrap();
        let state = SwitchState::new(&topo, &topo.switches[0], clock).unwrap();
        let slow = Arc::new(SlowApplier {
            delay: Duration::from_millis(500),
            made: Mutex::default(),
        });
        let applier = OrderedApplier::spawn(slow.clone(), state.failure_counter()).unwrap();
        let svc = SwitchService::new(Arc::new(Mutex::new(state)), applier);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            // A start lowers links 10 and 11 (two slow changes queued).
            let start = proto::PcnStart {
                job: "a".into(),
                flows: vec![1],
                links: vec![10, 11],
                threshold_bytes: 15_000,
                ..Default::default()
            };
            let ack = quick("PcnStart", svc.pcn_start(Request::new(start))).await;
            assert_eq!((ack.ecn_links, ack.errors.len()), (2, 0));
            // The burst arrives: both links go back (two more).
            let slot = clock.slot_at(wall_us());
            let update = proto::ScheduleUpdate {
                agent: "a".into(),
                slot,
                flows: vec![proto::FlowSchedule {
                    flow: 1,
                    links: vec![10],
                    start_slot: slot,
                    rates_bps: vec![1000],
                    achieved_bps: 5_000,
                    achieved_slot: slot,
                    app_limited: true,
                }],
            };
            let r = quick("UpdateSchedule", svc.update_schedule(Request::new(update))).await;
            assert_eq!((r.accepted, r.errors.len()), (1, 0), "{r:?}");
            // The feedback tells the bookkeeping's thresholds at once.
            let req = proto::FeedbackRequest {
                links: vec![10, 11],
                ..Default::default()
            };
            let f = quick("FetchFeedback", svc.fetch_feedback(Request::new(req))).await;
            let t: Vec<u32> = f.links.iter().map(|l| l.ecn_threshold_bytes).collect();
            assert_eq!(t, [60_000, 30_000]);
        });
        let early = slow.made.lock().unwrap().len();
        assert!(early < 4, "{early} changes made before the RPCs returned");
        svc.applier().flush();
        let made = slow.made.lock().unwrap().clone();
        assert_eq!(
            made,
            [
                ("s-eth10".to_string(), 15_000),
                ("s-eth11".to_string(), 15_000),
                ("s-eth10".to_string(), 60_000),
                ("s-eth11".to_string(), 30_000),
            ],
            "all made, in bookkeeping order"
        );
        assert_eq!(svc.with_state(|s| s.served()).requests, [1, 1, 1, 0]);
    }
}
