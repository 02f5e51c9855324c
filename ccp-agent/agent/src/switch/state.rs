// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The state of one switch daemon: its load table over the next K slots ("Dynamic Flow
//! Scheduling for DNN Training Workloads in Data Centers", Sec. IV-A and V), the admission of the
//! agents' schedules into it, the feedback read from it, and its PCN bookkeeping
//! ([`super::pcn`]). It touches no qdisc: the threshold changes it decides are handed out by
//! [`SwitchState::take_changes`] for the applier to make.

use super::applier::ThresholdChange;
use super::pcn::Pcn;
use crate::config::{Switch, Topology};
use crate::proto;
use crate::wall_us;
use mlcc_sched::{
    FlowId, LinkId, LinkLoadTable, RateSample, Schedule, SlotClock, RATE_WINDOW_SLOTS,
};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

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

/// Where a switch state reads the time its slots are numbered from: wall-clock µs since the
/// Unix epoch ([`crate::wall_us`] on the daemon).
pub type TimeSource = Box<dyn Fn() -> u64 + Send>;

/// The table of one switch, and its PCN state.
pub struct SwitchState {
    /// The switch's name.
    pub name: String,
    table: LinkLoadTable,
    now_us: TimeSource,
    pcn: Pcn,
    epoch: Instant,
    /// Counted by the service, per request.
    pub(super) served: Served,
    /// The traffic classes installed at start-up.
    pub(super) classes: super::ClassesCount,
}

impl SwitchState {
    /// The state of `switch` of `topo`, its table at the current wall-clock slot and its ECN
    /// links at their initial thresholds, nothing applied yet (see
    /// [`SwitchState::queue_initial_thresholds`]). Errors: a link of the switch missing from
    /// the topology, a capacity or PCN threshold the table refuses.
    pub fn new(
        topo: &Topology,
        switch: &Switch,
        clock: SlotClock,
    ) -> Result<Self, mlcc_sched::SchedError> {
        Self::with_time(topo, switch, clock, Box::new(wall_us))
    }

    /// [`SwitchState::new`] with the time read from `now_us` instead of the wall clock: the
    /// table starts at its slot and every request moves it to at least its slot then (tests
    /// drive the table on a virtual clock). Errors: as [`SwitchState::new`].
    pub fn with_time(
        topo: &Topology,
        switch: &Switch,
        clock: SlotClock,
        now_us: TimeSource,
    ) -> Result<Self, mlcc_sched::SchedError> {
        let pcn = Pcn::new(topo, switch)?;
        let mut table = LinkLoadTable::new(clock, clock.slot_at(now_us()));
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
            now_us,
            pcn,
            epoch: Instant::now(),
            served: Served::default(),
            classes: super::ClassesCount::default(),
        })
    }

    /// The ports whose traffic classes were installed, and the failures (see
    /// [`super::install_all`]).
    pub fn classes(&self) -> super::ClassesCount {
        self.classes
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

    /// The ECN threshold changes decided since the last call, in the order the bookkeeping
    /// decided them, each once: for the switch's [`super::OrderedApplier`] (taken under the
    /// state's lock, so that the applier's queue keeps that order).
    pub fn take_changes(&mut self) -> Vec<ThresholdChange> {
        self.pcn.take_changes()
    }

    /// The counter of failed threshold changes: whoever makes the changes adds to it; the
    /// feedback (`threshold_failures`) and the metrics read it.
    pub fn failure_counter(&self) -> Arc<AtomicU64> {
        self.pcn.failures().clone()
    }

    /// Threshold changes that failed so far (or timed out).
    pub fn threshold_failures(&self) -> u64 {
        self.pcn.failure_count()
    }

    /// Decides every ECN link's current threshold (the initial one without starts), whatever
    /// was decided before: at start-up, and at shutdown after [`SwitchState::end_all_pcn`].
    pub fn queue_initial_thresholds(&mut self) {
        self.pcn.queue_all();
    }

    /// Drops every outstanding start (at shutdown), deciding the initial thresholds.
    pub fn end_all_pcn(&mut self) {
        self.pcn.end_all();
    }

    /// `PcnStart` at time `now_ms` (of [`SwitchState::now_ms`]) in `slot`: replaces an earlier
    /// start of the same (job, rank), lowers the thresholds of the start's ECN links. Errors:
    /// an empty or too long job name, a zero threshold, too many starts outstanding, named.
    pub fn pcn_start(
        &mut self,
        req: &proto::PcnStart,
        now_ms: u64,
        slot: u64,
    ) -> Result<proto::PcnAck, String> {
        self.pcn.start(req, now_ms, slot)
    }

    /// `PcnEnd`: drops the start of (job, rank), restoring thresholds; an unknown one changes
    /// nothing.
    pub fn pcn_end(&mut self, req: &proto::PcnEnd) -> proto::PcnAck {
        self.pcn.end(req)
    }

    /// Drops the starts older than `[pcn] timeout_ms` at `now_ms`, restoring thresholds.
    /// Returns how many expired.
    pub fn expire_pcn(&mut self, now_ms: u64) -> usize {
        self.pcn.expire(now_ms)
    }

    /// The ECN threshold of `link` now, bytes, and its outstanding starts (`None`: no ECN queue).
    pub fn ecn_threshold(&self, link: u32) -> Option<(u32, usize)> {
        self.pcn.threshold(link)
    }

    /// Moves the table to `slot` if it is later than the current one.
    pub fn advance(&mut self, slot: u64) {
        if slot > self.table.current_slot() {
            // Never fails going forward.
            let _ = self.table.advance_to(slot);
        }
    }

    /// `FetchFeedback` on the state. Errors: a requested link the switch does not own.
    pub fn feedback(
        &mut self,
        req: &proto::FeedbackRequest,
    ) -> Result<proto::FeedbackReply, String> {
        self.advance(req.slot.max(self.table.clock().slot_at((self.now_us)())));
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
            pcn_starts: self.pcn.starts(),
            pcn_expired: self.pcn.expired(),
            threshold_failures: self.threshold_failures(),
        })
    }

    /// `UpdateSchedule` on the state: admission of each schedule (see the module docs), rate
    /// samples, PCN bursts seen.
    pub fn update(&mut self, req: &proto::ScheduleUpdate) -> proto::UpdateReply {
        self.advance(req.slot.max(self.table.clock().slot_at((self.now_us)())));
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
            self.pcn
                .bursts_seen(f.flow, f.achieved_bps, f.achieved_slot);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::applier::{apply_logged, RecordingRunner};
    use crate::switch::fixtures::{ecn_topo, plain_state};
    use crate::switch::{MAX_JOB_BYTES, MAX_PCN_STARTS};

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
        let mut s = plain_state();
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

    fn ecn_state(combine: &str, fail: bool) -> (SwitchState, Arc<RecordingRunner>) {
        let topo = ecn_topo(combine);
        let runner = Arc::new(RecordingRunner {
            fail,
            ..Default::default()
        });
        let s = SwitchState::new(
            &topo,
            &topo.switches[0],
            SlotClock::new(1_000_000, 4).unwrap(),
        )
        .unwrap();
        (s, runner)
    }

    /// Makes the changes `s` decided so far with `runner`, as the daemon's applier would, but
    /// at once; returns the failures.
    fn apply(s: &mut SwitchState, runner: &RecordingRunner) -> Vec<String> {
        let failures = s.failure_counter();
        s.take_changes()
            .iter()
            .filter_map(|c| apply_logged(runner, c, &failures).err())
            .collect()
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
    fn pcn_overlapping_starts_take_the_minimum_and_bursts_restore() {
        let (mut s, runner) = ecn_state("min", false);
        s.queue_initial_thresholds();
        assert!(apply(&mut s, &runner).is_empty());
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
        apply(&mut s, &runner);
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
        apply(&mut s, &runner);
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
        apply(&mut s, &runner);
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
        assert!(s.take_changes().is_empty());
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
    fn pcn_start_without_a_burst_expires_and_failures_are_counted() {
        let (mut s, runner) = ecn_state("min", true);
        let slot = s.table().current_slot();
        let ack = s
            .pcn_start(&start("a", &[1], &[10], 15_000), 100, slot)
            .unwrap();
        assert_eq!(ack.ecn_links, 1, "{ack:?}");
        let errors = apply(&mut s, &runner);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("tc qdisc change dev s-eth10"),
            "{errors:?}"
        );
        // The bookkeeping goes on although tc failed.
        assert_eq!(thr(&s, 10), (15_000, 1));
        assert_eq!(s.expire_pcn(600), 0, "500 ms old: not yet");
        assert_eq!(thr(&s, 10), (15_000, 1));
        assert_eq!(s.expire_pcn(601), 1);
        assert_eq!(thr(&s, 10), (60_000, 0));
        apply(&mut s, &runner);
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
        let mut s = plain_state();
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
        let mut s = plain_state();
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
