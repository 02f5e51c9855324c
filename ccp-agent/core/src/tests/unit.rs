// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Unit tests of the agent core's state machine: one core, inputs fed by hand, the actions
//! checked one by one (topology and registrations of [`super::sim`]).

use super::sim::{
    config, host_ip, registration, slot_start_us, Tweak, FIRST_SLOT, MIN_RATE_BPS, SHARED_LINK,
};
use crate::flows::FlowKey;
use crate::proto::{self, notice_kind};
use crate::registration::{Registration, Registrations};
use crate::{Action, Command, Core, CoreConfig, Input, Rpc};
use mltcp_progress::{FlowKind, Paradigm, Role};

/// Bytes per iteration of the test ring's flows (2 workers: a chunk is half of it).
const RING_BYTES: u64 = 1_000_000;

fn key(src: u8, dst: u8, port: u16) -> FlowKey {
    FlowKey {
        src: host_ip(src),
        src_port: port,
        dst: host_ip(dst),
        dst_port: port + 1000,
    }
}

/// A 2-worker ring: rank 0 on h1 sends to rank 1 on h3 (flow `key(1, 3, 5000)`) and back
/// (`key(3, 1, 5001)`).
fn ring_regs() -> Registrations {
    let reg = |rank, peer| {
        registration(
            "ring",
            Paradigm::Ring,
            Role::Worker,
            FlowKind::RingSend,
            (rank, peer),
            RING_BYTES,
            2,
        )
    };
    Registrations::from([(key(1, 3, 5000), reg(0, 1)), (key(3, 1, 5001), reg(1, 0))])
}

fn tick(slot: u64) -> Input {
    Input::Tick {
        now_us: slot_start_us(slot) + 1,
    }
}

/// A core serving `hosts`, with the ring registered and its flows on those hosts created
/// (flow numbers 1 and 2).
fn core_with_ring(hosts: &[&str], extra: Tweak) -> Core {
    let cfg = config(hosts, extra);
    let mut core = Core::new(cfg, slot_start_us(FIRST_SLOT)).expect("a core");
    assert!(core.handle(Input::Progress(ring_regs())).is_empty());
    core.handle(Input::FlowCreated {
        flow: 1,
        key: key(1, 3, 5000),
        sock_id: 0,
    });
    core.handle(Input::FlowCreated {
        flow: 2,
        key: key(3, 1, 5001),
        sock_id: 0,
    });
    core
}

fn rates(actions: &[Action]) -> Vec<(u64, u32)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::SetRate {
                flow, rate_bytes, ..
            } => Some((*flow, *rate_bytes)),
            _ => None,
        })
        .collect()
}

fn status(actions: &[Action]) -> Option<&proto::StatusReply> {
    actions.iter().rev().find_map(|a| match a {
        Action::Status(s) => Some(s),
        _ => None,
    })
}

fn rpcs(actions: &[Action]) -> Vec<&Rpc> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Rpc(r) => Some(r),
            _ => None,
        })
        .collect()
}

/// An empty feedback of switch s1 for link 10 at `slot`.
fn feedback(slot: u64) -> Input {
    Input::Feedback {
        switch: String::from("s1"),
        slot,
        at_us: slot_start_us(slot) + 2_000,
        reply: Ok(proto::FeedbackReply {
            start_slot: slot,
            links: vec![proto::LinkFeedback {
                link: SHARED_LINK,
                capacity_bps: 100_000_000,
                estimate_bps: 100_000_000,
                load_bps: vec![0; 5],
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

/// The awaited `UpdateSchedule` among `actions`.
fn awaited_update(actions: &[Action]) -> Option<&proto::ScheduleUpdate> {
    rpcs(actions).into_iter().find_map(|r| match r {
        Rpc::UpdateSchedule {
            request,
            admission_wait: Some(_),
            ..
        } => Some(request),
        _ => None,
    })
}

/// Runs slot `slot` of a switch-mode core to its end, admitting every schedule as asked.
fn run_switch_slot(core: &mut Core, slot: u64) -> Vec<Action> {
    let mut all = core.handle(tick(slot));
    let a = core.handle(feedback(slot));
    let admitted = awaited_update(&a).map(|u| u.flows.clone());
    all.extend(a);
    if let Some(flows) = admitted {
        all.extend(core.handle(Input::Admission {
            switch: String::from("s1"),
            slot,
            reply: Some(proto::UpdateReply {
                admitted: flows,
                ..Default::default()
            }),
        }));
    }
    all
}

#[test]
fn the_program_goes_only_to_registered_flows_of_served_hosts() {
    let cfg = config(&["h1", "h2"], |c| c.nic_only = true);
    let mut core = Core::new(cfg.clone(), slot_start_us(FIRST_SLOT)).expect("a core");
    core.handle(Input::Progress(ring_regs()));
    let a = core.handle(Input::FlowCreated {
        flow: 1,
        key: key(1, 3, 5000),
        sock_id: 0,
    });
    assert_eq!(
        a,
        vec![Action::Install {
            flow: 1,
            rate_bytes: 125_000_000,
            cwnd_bytes: cfg.cwnd_bytes,
            slot_us: 20_000,
        }],
        "at the NIC's capacity (1 Gbit/s) and the configured window"
    );
    // Unregistered (native MLTCP), and registered but sent from a host of another agent.
    assert!(core
        .handle(Input::FlowCreated {
            flow: 2,
            key: key(1, 2, 7000),
            sock_id: 0,
        })
        .is_empty());
    assert!(core
        .handle(Input::FlowCreated {
            flow: 3,
            key: key(3, 1, 5001),
            sock_id: 0,
        })
        .is_empty());
    assert_eq!(core.counts(), (3, 1));
}

#[test]
fn a_nic_only_slot_is_planned_at_its_tick_and_only_once() {
    let mut core = core_with_ring(&["h1", "h2", "h3", "h4"], |c| c.nic_only = true);
    let a = core.handle(tick(FIRST_SLOT));
    assert!(rpcs(&a).is_empty(), "no switch, no peer: {a:?}");
    let r = rates(&a);
    assert_eq!(r.iter().map(|(f, _)| *f).collect::<Vec<_>>(), vec![1, 2]);
    let s = status(&a).expect("a status");
    assert_eq!(
        (s.slot, s.mode.as_str(), s.flows.len()),
        (FIRST_SLOT, "nic-only", 2)
    );
    // A second tick of the same slot does nothing; the next slot's tick sends the rates
    // again (the datapath's keepalive).
    assert!(core.handle(tick(FIRST_SLOT)).is_empty());
    assert_eq!(rates(&core.handle(tick(FIRST_SLOT + 1))).len(), 2);
}

/// The registration of [`incast_core`]'s ring job `job` (rank 0 of 2, to rank 1 on h3) in
/// iteration `iteration`.
fn incast_reg(job: &str, iteration: u64) -> Registration {
    let mut r = registration(
        job,
        Paradigm::Ring,
        Role::Worker,
        FlowKind::RingSend,
        (0, 1),
        RING_BYTES,
        2,
    );
    r.iteration = iteration;
    r
}

/// [`incast_core`]'s progress reading: its two ring jobs at iterations `r1` and `r2`.
fn incast_iterations(r1: u64, r2: u64) -> Input {
    Input::Progress(Registrations::from([
        (key(1, 3, 5000), incast_reg("r1", r1)),
        (key(2, 3, 6000), incast_reg("r2", r2)),
    ]))
}

/// Two ring jobs whose flows from h1 and from h2 both go to h3: different NICs (1 Gbit/s
/// each), one ingress (the last link of both routes, 100 Mbit/s).
fn incast_core(extra: Tweak) -> Core {
    let cfg = config(&["h1", "h2", "h3", "h4"], extra);
    let mut core = Core::new(cfg, slot_start_us(FIRST_SLOT)).expect("a core");
    core.handle(incast_iterations(0, 0));
    for (flow, k) in [(1, key(1, 3, 5000)), (2, key(2, 3, 6000))] {
        core.handle(Input::FlowCreated {
            flow,
            key: k,
            sock_id: 0,
        });
    }
    core
}

#[test]
fn a_nic_only_agent_plans_the_ingress_of_the_hosts_it_serves() {
    let cfg = config(&["h3"], |c| c.nic_only = true);
    assert_eq!(cfg.topology.served_ingress(&cfg.hosts), vec![SHARED_LINK]);
    // Flows into h3 from two of its hosts: one is served at h3's ingress capacity, the other
    // waits at the rate floor. Planned on the NICs alone, each would get a NIC's gigabit.
    let mut core = incast_core(|c| {
        c.nic_only = true;
        c.work_conserving = false;
    });
    let mut r: Vec<u64> = rates(&core.handle(tick(FIRST_SLOT)))
        .iter()
        .map(|(_, b)| 8 * u64::from(*b))
        .collect();
    r.sort_unstable();
    assert_eq!(
        r,
        vec![MIN_RATE_BPS, 100_000_000],
        "bit/s into a 100 Mbit/s ingress"
    );
}

#[test]
fn a_slot_waits_for_the_switch_without_holding_reports() {
    let mut core = core_with_ring(&["h1", "h2", "h3", "h4"], |_| ());
    let s = FIRST_SLOT;
    let a = core.handle(tick(s));
    let fetch: Vec<_> = rpcs(&a)
        .into_iter()
        .filter_map(|r| match r {
            Rpc::FetchFeedback {
                switch, request, ..
            } => Some((switch.clone(), request.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(fetch.len(), 1, "{a:?}");
    assert_eq!((fetch[0].0.as_str(), fetch[0].1.slot), ("s1", s));
    assert_eq!(fetch[0].1.links, vec![SHARED_LINK]);
    assert_eq!(fetch[0].1.exclude_flows.len(), 2);
    assert!(rates(&a).is_empty() && status(&a).is_none(), "{a:?}");
    // Reports are taken while the slot waits.
    let report = Input::Report {
        flow: 1,
        fields: crate::Measurement {
            acked: Some(1000),
            rtt_us: Some(500),
            arrival_ns: slot_start_us(s) * 1000 + 1,
            ..Default::default()
        },
    };
    assert!(core.handle(report).is_empty());
    // The feedback: the schedules go out, awaited within the RPC budget.
    let a = core.handle(feedback(s));
    let wait = rpcs(&a).iter().find_map(|r| match r {
        Rpc::UpdateSchedule { admission_wait, .. } => *admission_wait,
        _ => None,
    });
    let budget = std::time::Duration::from_millis(6);
    assert!(
        wait.is_some_and(|w| w > std::time::Duration::ZERO && w <= budget),
        "{a:?}"
    );
    assert!(rates(&a).is_empty(), "rates wait for the admission: {a:?}");
    let update = awaited_update(&a).expect("an awaited update").clone();
    assert_eq!(update.flows.len(), 2);
    // The switch admits 10 Mbit/s per flow: the rates follow the admission.
    let admitted = update
        .flows
        .iter()
        .map(|f| proto::FlowSchedule {
            rates_bps: f.rates_bps.iter().map(|r| (*r).min(10_000_000)).collect(),
            ..f.clone()
        })
        .collect();
    let a = core.handle(Input::Admission {
        switch: String::from("s1"),
        slot: s,
        reply: Some(proto::UpdateReply {
            admitted,
            ..Default::default()
        }),
    });
    let r = rates(&a);
    assert_eq!(r.len(), 2, "{a:?}");
    for (_, bytes) in r {
        assert!(u64::from(bytes) * 8 <= 10_000_000, "{bytes} bytes/s");
    }
    assert_eq!(status(&a).map(|s| s.mode.as_str()), Some("switch"));
    // A late answer for a slot that is over changes nothing.
    assert!(core.handle(feedback(s)).is_empty());
}

#[test]
fn a_slot_still_waiting_at_the_next_tick_ends_without_the_switch() {
    let mut core = core_with_ring(&["h1", "h2", "h3", "h4"], |_| ());
    let s = FIRST_SLOT;
    core.handle(tick(s));
    let a = core.handle(tick(s + 1));
    // The old slot ends first (planned as if the switch had failed, its updates not waited
    // for), then the new one asks for feedback.
    let old_status = a
        .iter()
        .position(|x| matches!(x, Action::Status(st) if st.slot == s))
        .expect("the late slot's status");
    let new_fetch = a
        .iter()
        .position(|x| {
            matches!(x, Action::Rpc(Rpc::FetchFeedback { request, .. }) if request.slot == s + 1)
        })
        .expect("the new slot's feedback request");
    assert!(old_status < new_fetch, "{a:?}");
    assert_eq!(rates(&a).len(), 2);
    assert!(awaited_update(&a).is_none(), "{a:?}");
    // The late answer of the old slot is dropped; the new slot goes on with its own.
    assert!(core.handle(feedback(s)).is_empty());
    assert!(awaited_update(&core.handle(feedback(s + 1))).is_some());
}

#[test]
fn a_ring_notice_bounds_the_successor_and_waits_for_the_slot() {
    // Agent A (h1, h2) plans rank 0's flow; rank 1 (h3) is another agent's.
    let mut core = core_with_ring(&["h1", "h2"], |_| ());
    let s = FIRST_SLOT;
    let a = run_switch_slot(&mut core, s);
    let flow = &status(&a).expect("a status").flows[0];
    assert_eq!(
        flow.remaining_bytes, RING_BYTES,
        "no notice yet: independent"
    );
    // Rank 0 tells rank 1's agent its accumulated bytes.
    let sent: Vec<_> = rpcs(&a)
        .into_iter()
        .filter_map(|r| match r {
            Rpc::Notify { peer, notice, .. } => Some((*peer, notice.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(sent.len(), 1, "{a:?}");
    assert_eq!(sent[0].0.to_string(), "127.0.0.1:7102");
    assert_eq!(
        (
            sent[0].1.kind,
            sent[0].1.from_rank,
            sent[0].1.to_rank,
            sent[0].1.slot
        ),
        (notice_kind::RING, 0, 1, s)
    );
    // Rank 1's notice arrives while slot s+1 waits for the switch: nothing happens until the
    // slot's work ends.
    assert!(!core.handle(tick(s + 1)).is_empty());
    let notice = proto::DependencyNotice {
        job: String::from("ring"),
        from_rank: 1,
        to_rank: 0,
        kind: notice_kind::RING,
        slot: s + 1,
        iteration: 0,
        accumulated_bytes: 100_000,
        bound_bytes: 100_000,
    };
    assert!(core.handle(Input::Notices(vec![notice])).is_empty());
    let a = core.handle(feedback(s + 1));
    let admitted = awaited_update(&a).expect("an awaited update").flows.clone();
    let a = core.handle(Input::Admission {
        switch: String::from("s1"),
        slot: s + 1,
        reply: Some(proto::UpdateReply {
            admitted,
            ..Default::default()
        }),
    });
    assert_eq!(rates(&a).len(), 1);
    // The next slot plans only what the dependency allows: F_pred + one chunk.
    let a = run_switch_slot(&mut core, s + 2);
    let flow = &status(&a).expect("a status").flows[0];
    assert_eq!(flow.remaining_bytes, 100_000 + RING_BYTES / 2);
}

#[test]
fn a_failed_install_is_retried_at_the_next_slot() {
    let cfg = config(&["h1", "h2"], |c| c.nic_only = true);
    let mut core = Core::new(cfg, slot_start_us(FIRST_SLOT)).expect("a core");
    core.handle(Input::Progress(ring_regs()));
    core.handle(Input::FlowCreated {
        flow: 1,
        key: key(1, 3, 5000),
        sock_id: 0,
    });
    assert!(core
        .handle(Input::DatapathFailed {
            flow: 1,
            command: Command::Install,
        })
        .is_empty());
    assert_eq!(core.counts(), (1, 0));
    let a = core.handle(tick(FIRST_SLOT));
    assert!(matches!(a.first(), Some(Action::Rtts(_))), "{a:?}");
    assert!(
        a.iter()
            .any(|x| matches!(x, Action::Install { flow: 1, .. })),
        "{a:?}"
    );
    assert_eq!(core.counts(), (1, 1));
}

#[test]
fn a_closed_flow_leaves_the_switch_and_the_status() {
    let mut core = core_with_ring(&["h1", "h2", "h3", "h4"], |_| ());
    let s = FIRST_SLOT;
    run_switch_slot(&mut core, s);
    let gone = key(1, 3, 5000).id();
    assert!(core.handle(Input::FlowClosed { flow: 1 }).is_empty());
    let a = run_switch_slot(&mut core, s + 1);
    let removal = awaited_update(&a)
        .expect("an update")
        .flows
        .iter()
        .any(|f| f.flow == gone && f.rates_bps.is_empty());
    assert!(removal, "{a:?}");
    assert!(rates(&a).iter().all(|(f, _)| *f != 1));
    let st = status(&a).expect("a status");
    assert!(st.flows.iter().all(|f| f.flow != gone), "{st:?}");
    assert_eq!(core.counts(), (1, 1));
}

#[test]
fn stopping_takes_the_schedules_off_the_switch() {
    let mut core = core_with_ring(&["h1", "h2", "h3", "h4"], |_| ());
    run_switch_slot(&mut core, FIRST_SLOT);
    let a = core.handle(Input::Stop {
        now_us: slot_start_us(FIRST_SLOT + 1),
    });
    let Some(Rpc::UpdateSchedule {
        request,
        admission_wait: None,
        ..
    }) = rpcs(&a).first().copied()
    else {
        panic!("one update: {a:?}");
    };
    let mut removed: Vec<u64> = request.flows.iter().map(|f| f.flow).collect();
    removed.sort_unstable();
    let mut ids = vec![key(1, 3, 5000).id(), key(3, 1, 5001).id()];
    ids.sort_unstable();
    assert_eq!(removed, ids);
    assert!(request.flows.iter().all(|f| f.rates_bps.is_empty()));
}

/// A report of `acked` bytes of flow `flow` a little after the start of slot `slot`.
fn report(flow: u64, slot: u64, acked: u64) -> Input {
    Input::Report {
        flow,
        fields: crate::Measurement {
            acked: Some(acked),
            rtt_us: Some(500),
            arrival_ns: (slot_start_us(slot) + 5_000) * 1000,
            ..Default::default()
        },
    }
}

/// Flow `flow`'s progress as its latest plan saw it: (sent bytes, bytes left).
fn planned_progress(core: &Core, flow: u64) -> Option<(u64, u64)> {
    core.flows
        .get(&flow)
        .and_then(|f| f.plan.as_ref())
        .map(|p| (p.progress.sent_bytes, p.progress.remaining_bytes))
}

/// The ring's registrations at `iteration`, begun at `iter_start_ns` (CLOCK_MONOTONIC).
fn ring_regs_at(iteration: u64, iter_start_ns: u64) -> Registrations {
    let mut regs = ring_regs();
    for reg in regs.values_mut() {
        reg.iteration = iteration;
        reg.iter_start_ns = iter_start_ns;
    }
    regs
}

#[test]
fn work_conserving_nic_only_slots_are_replanned_at_a_burst_end_and_start() {
    let s = FIRST_SLOT;
    // Work conservation off: a flow that delivers its bytes mid-slot keeps its rate until the
    // next slot, and a poll changes nothing.
    let mut core = core_with_ring(&["h1", "h2", "h3", "h4"], |c| {
        c.nic_only = true;
        c.work_conserving = false;
    });
    core.handle(tick(s));
    assert!(core.handle(report(1, s, RING_BYTES)).is_empty());
    assert!(core.handle(Input::Poll).is_empty());
    let left = |core: &Core| planned_progress(core, 1).map(|(_, left)| left);
    assert_eq!(left(&core), Some(RING_BYTES), "planned at the tick only");
    // On (the default): the burst's end re-plans the slot at once (the flow that is done is
    // planned nothing); the next iteration seen by a poll re-plans it again.
    let mut core = core_with_ring(&["h1", "h2", "h3", "h4"], |c| c.nic_only = true);
    let first = rates(&core.handle(tick(s)));
    assert!(first.iter().any(|(f, _)| *f == 1), "{first:?}");
    core.handle(report(1, s, RING_BYTES));
    assert_eq!(left(&core), Some(0), "re-planned at the burst's end");
    // The same reading again: no burst began.
    assert!(rates(&core.handle(Input::Poll)).is_empty());
    core.handle(Input::Progress(ring_regs_at(
        1,
        (slot_start_us(s) + 10_000) * 1000,
    )));
    core.handle(Input::Poll);
    assert_eq!(
        left(&core),
        Some(RING_BYTES),
        "the new burst is planned at once"
    );
    // The slot's bytes still count as its achieved rate at the next tick.
    let a = core.handle(tick(s + 1));
    let st = status(&a).expect("a status");
    let f1 = st
        .flows
        .iter()
        .find(|f| f.src.starts_with("10.0.0.1"))
        .expect("flow 1");
    assert!(f1.achieved_bps > 0, "{f1:?}");
}

/// A new burst's first report, folded into the old iteration by a re-plan before the progress
/// reading shows the new iteration, still counts for the new iteration once it does: the flow
/// is not left with bytes "to send" after its last byte was acknowledged.
#[test]
fn a_bursts_first_report_counted_before_its_iteration_was_seen_moves_to_it() {
    let s = FIRST_SLOT;
    let mut core = core_with_ring(&["h1", "h2", "h3", "h4"], |c| c.nic_only = true);
    core.handle(tick(s));
    let left = |core: &Core| planned_progress(core, 1);
    // Iteration 0 of flow 1 ends (a burst-end re-plan counts it).
    core.handle(report(1, s, RING_BYTES));
    assert_eq!(left(&core), Some((RING_BYTES, 0)));
    // Iteration 1 begins: its first 20 000 bytes are reported before the reading shows it, and
    // flow 2's burst end re-plans the slot in between.
    core.handle(report(1, s, 20_000));
    core.handle(report(2, s, RING_BYTES));
    core.handle(Input::Progress(ring_regs_at(
        1,
        (slot_start_us(s) + 4_000) * 1000,
    )));
    core.handle(Input::Poll);
    assert_eq!(
        left(&core),
        Some((20_000, RING_BYTES - 20_000)),
        "the new iteration owns its first report"
    );
}

/// The [`Action::SetClass`]es of `actions`, (flow, DSCP).
fn set_classes(actions: &[Action]) -> Vec<(u64, Option<u8>)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::SetClass { flow, dscp } => Some((*flow, *dscp)),
            _ => None,
        })
        .collect()
}

/// The classes tests' planning: NIC-only, strict priority by least attained service.
fn by_least_attained(c: &mut CoreConfig) {
    c.nic_only = true;
    c.rules = mlcc_sched::Rules::Priority;
    c.job_order = mlcc_sched::JobOrder::LeastAttained;
}

#[test]
fn classes_follow_the_policy_order_and_are_sent_only_on_change() {
    // Strict priority by least attained service, 4 classes: the job with fewer iterations is
    // ranked first, and its flow gets class 0 (AF41, DSCP 34), the other, which shares h3's
    // ingress with it, class 1 (AF31, 26).
    let mut core = incast_core(|c| {
        by_least_attained(c);
        c.classes = 4;
    });
    core.handle(incast_iterations(5, 2));
    let a = core.handle(tick(FIRST_SLOT));
    assert_eq!(set_classes(&a), vec![(1, Some(26)), (2, Some(34))]);
    let st = status(&a).expect("a status");
    let mut shown: Vec<(u64, Option<u32>)> = st.flows.iter().map(|f| (f.flow, f.dscp)).collect();
    shown.sort_unstable();
    let mut want = vec![
        (key(1, 3, 5000).id(), Some(26)),
        (key(2, 3, 6000).id(), Some(34)),
    ];
    want.sort_unstable();
    assert_eq!(shown, want, "the status shows each flow's DSCP");
    // The same order: the rates go out again (keepalive), the classes do not.
    let a = core.handle(tick(FIRST_SLOT + 1));
    assert_eq!(rates(&a).len(), 2);
    assert!(set_classes(&a).is_empty(), "{a:?}");
    // r2 moves ahead of r1: both classes change, and are sent once.
    core.handle(incast_iterations(5, 9));
    let a = core.handle(tick(FIRST_SLOT + 2));
    assert_eq!(set_classes(&a), vec![(1, Some(34)), (2, Some(26))]);
    assert!(set_classes(&core.handle(tick(FIRST_SLOT + 3))).is_empty());
    // A failed SetClass is sent again at the next application.
    core.handle(Input::DatapathFailed {
        flow: 2,
        command: Command::SetClass,
    });
    let a = core.handle(tick(FIRST_SLOT + 4));
    assert_eq!(set_classes(&a), vec![(2, Some(26))]);
    // A flow no longer registered is not planned: it gets its socket's own marking back.
    core.handle(Input::Progress(Registrations::from([(
        key(1, 3, 5000),
        incast_reg("r1", 5),
    )])));
    let a = core.handle(tick(FIRST_SLOT + 5));
    assert_eq!(set_classes(&a), vec![(2, None)]);
}

#[test]
fn classes_off_set_no_class() {
    let mut core = incast_core(by_least_attained);
    core.handle(incast_iterations(5, 2));
    for s in 0..4 {
        if s == 2 {
            core.handle(incast_iterations(5, 9));
        }
        let a = core.handle(tick(FIRST_SLOT + s));
        assert_eq!(rates(&a).len(), 2);
        assert!(set_classes(&a).is_empty(), "{a:?}");
        let st = status(&a).expect("a status");
        assert!(st.flows.iter().all(|f| f.dscp.is_none()), "{st:?}");
    }
}

#[test]
fn line_class_rates_leave_the_classed_flows_unthrottled() {
    // The incast of a_nic_only_agent_plans_the_ingress_of_the_hosts_it_serves, with classes:
    // under `plan` one flow waits at the floor as without classes; under `line` neither is
    // held (each at its host's unthrottled rate), the class alone orders them.
    fn classed(c: &mut CoreConfig) {
        by_least_attained(c);
        c.work_conserving = false;
        c.classes = 4;
    }
    let run = |class_rates| {
        let tweak: Tweak = match class_rates {
            mlcc_sched::ClassRates::Plan => classed,
            mlcc_sched::ClassRates::Line => |c| {
                classed(c);
                c.class_rates = mlcc_sched::ClassRates::Line;
            },
        };
        let mut core = incast_core(tweak);
        core.handle(incast_iterations(5, 2));
        let a = core.handle(tick(FIRST_SLOT));
        let mut r: Vec<u64> = rates(&a).iter().map(|(_, b)| 8 * u64::from(*b)).collect();
        r.sort_unstable();
        (r, set_classes(&a))
    };
    let (plan, plan_classes) = run(mlcc_sched::ClassRates::Plan);
    assert_eq!(plan, vec![MIN_RATE_BPS, 100_000_000]);
    let (line, line_classes) = run(mlcc_sched::ClassRates::Line);
    assert_eq!(line.len(), 2);
    assert!(line.iter().all(|r| *r > 100_000_000), "{line:?}");
    assert_eq!(line[0], line[1], "both at their hosts' unthrottled rate");
    assert_eq!(plan_classes, line_classes, "the classes are the same");
    assert_eq!(line_classes, vec![(1, Some(26)), (2, Some(34))]);
}

#[test]
fn scavenger_held_flows_run_unthrottled_with_the_target_and_served_ones_keep_their_rate() {
    // The incast of a_nic_only_agent_plans_the_ingress_of_the_hosts_it_serves: one flow served
    // at the port's rate, one held at the floor. With `held_flows = "scavenger"` the held one
    // runs at its host's unthrottled rate under the configured window with the scavenger
    // target (the program's LEDBAT sets its window); the served one is unchanged, target 0.
    fn planned(c: &mut CoreConfig) {
        by_least_attained(c);
        c.work_conserving = false;
        c.scavenger_target_us = 750;
    }
    fn scavenging(c: &mut CoreConfig) {
        planned(c);
        c.held_flows = mlcc_sched::HeldFlows::Scavenger;
    }
    let run = |tweak: Tweak| {
        let mut core = incast_core(tweak);
        core.handle(incast_iterations(5, 2));
        let a = core.handle(tick(FIRST_SLOT));
        let mut sets: Vec<(u64, u32, u32)> = a
            .iter()
            .filter_map(|x| match x {
                Action::SetRate {
                    rate_bytes,
                    cwnd_bytes,
                    scavenge_us,
                    ..
                } => Some((8 * u64::from(*rate_bytes), *cwnd_bytes, *scavenge_us)),
                _ => None,
            })
            .collect();
        sets.sort_unstable();
        sets
    };
    let floor = run(planned);
    assert_eq!(floor.len(), 2);
    assert_eq!(floor[0].0, MIN_RATE_BPS, "held at the floor: {floor:?}");
    assert!(floor.iter().all(|s| s.2 == 0), "no target: {floor:?}");
    let scav = run(scavenging);
    assert_eq!(scav.len(), 2);
    let served = floor[1];
    assert_eq!(scav[0], served, "the served flow as under the floor mode");
    assert!(scav[1].0 > 100_000_000, "unthrottled: {scav:?}");
    assert_eq!((scav[1].1, scav[1].2), (16 << 20, 750), "{scav:?}");
    // The next slot, the same plan: nothing is sent again but the per-slot keepalive, which
    // repeats the same three fields.
    let mut core = incast_core(scavenging);
    core.handle(incast_iterations(5, 2));
    let first = core.handle(tick(FIRST_SLOT));
    let again = core.handle(tick(FIRST_SLOT + 1));
    let targets = |a: &[Action]| {
        let mut t: Vec<u32> = a
            .iter()
            .filter_map(|x| match x {
                Action::SetRate { scavenge_us, .. } => Some(*scavenge_us),
                _ => None,
            })
            .collect();
        t.sort_unstable();
        t
    };
    assert_eq!(targets(&first), vec![0, 750]);
    assert_eq!(targets(&again), vec![0, 750]);
}

#[test]
fn a_spare_share_on_a_switch_path_runs_only_as_asked_for_and_admitted() {
    let s = FIRST_SLOT;
    let mut core = core_with_ring(&["h1", "h2", "h3", "h4"], |_| ());
    run_switch_slot(&mut core, s);
    // Both ring flows deliver their iteration in slot s: in slot s + 1 neither has bytes left,
    // and each is reckoned a share of the free link.
    core.handle(report(1, s, RING_BYTES));
    core.handle(report(2, s, RING_BYTES));
    core.handle(tick(s + 1));
    let a = core.handle(feedback(s + 1));
    let update = awaited_update(&a).expect("an awaited update").clone();
    for local in [1, 2] {
        let p = core.flows[&local].plan.as_ref().expect("planned");
        assert_eq!(p.progress.remaining_bytes, 0);
        assert!(p.spare_bps > MIN_RATE_BPS, "flow {local}: {}", p.spare_bps);
    }
    // Not asked of the switch (it would be held from the other agents' plans for bytes that
    // may not come within the slot), so not run at: the flows go at the floor.
    assert_eq!(update.flows.len(), 2);
    for f in &update.flows {
        assert_eq!(f.rates_bps.first(), Some(&0), "{f:?}");
    }
    let a = core.handle(Input::Admission {
        switch: String::from("s1"),
        slot: s + 1,
        reply: Some(proto::UpdateReply {
            admitted: update.flows.clone(),
            ..Default::default()
        }),
    });
    let r = rates(&a);
    assert_eq!(r.len(), 2, "{a:?}");
    for (flow, bytes) in r {
        assert_eq!(u64::from(bytes) * 8, MIN_RATE_BPS, "flow {flow}");
    }
}

/// A flow that lost packets and fell short of its plan lowers the bandwidth estimate of its
/// NIC only when the NIC may have been its bottleneck: behind a narrower link (the test
/// topology's 1 Gbit/s NICs before the 100 Mbit/s shared link, which a NIC-only agent plans as
/// the hosts' ingress) the NIC keeps its capacity, and the narrowest link takes the rate.
#[test]
fn a_shortfall_behind_a_narrower_link_leaves_the_nic_estimate_alone() {
    let s = FIRST_SLOT;
    let mut core = core_with_ring(&["h1", "h2", "h3", "h4"], |c| c.nic_only = true);
    core.handle(tick(s));
    let estimate = |core: &Core, l: u32| {
        core.table
            .estimate_bps(mlcc_sched::LinkId(l))
            .expect("a link of the table")
    };
    assert_eq!(estimate(&core, 1), 1_000_000_000);
    assert_eq!(estimate(&core, SHARED_LINK), 100_000_000);
    // 20 000 bytes in the 20 ms slot (8 Mbit/s), with losses: network-limited by the rule of
    // the mlcc paper's estimation.
    core.handle(Input::Report {
        flow: 1,
        fields: crate::Measurement {
            acked: Some(20_000),
            lost: Some(3),
            rtt_us: Some(500),
            arrival_ns: (slot_start_us(s) + 5_000) * 1000,
            ..Default::default()
        },
    });
    core.handle(tick(s + 1));
    assert_eq!(
        estimate(&core, 1),
        1_000_000_000,
        "h1's NIC did not take on the 8 Mbit/s"
    );
    assert_eq!(estimate(&core, SHARED_LINK), 8_000_000);
}
