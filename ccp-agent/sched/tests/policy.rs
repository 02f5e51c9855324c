// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Tests of the policy layer ([`mlcc_sched::policy::decide`]): its grouping, dependency,
//! order, cut and rate rules ("Dynamic Flow Scheduling for DNN Training Workloads in Data
//! Centers", Sec. IV; the group generalisation of `mlcc_sched::coflow`), case by case and as
//! properties over random ring and parameter-server jobs: ring flows stay within a chunk of
//! their predecessor, a PS's broadcast never runs ahead of its slowest aggregation, the table
//! never holds more than a link's capacity, units go in planning order, spare sharing and the
//! rate floor apply only where they should, bad snapshots are refused naming the value; the
//! strict-priority rule set (`Rules::Priority`): its levels, weights and per-slot shares.

use mlcc_sched::policy::{decide, group_phase, receiver_cut_bytes, slot_rate_bps, unit_key};
use mlcc_sched::*;
use proptest::collection::vec;
use proptest::prelude::*;

/// 8 s slots: bytes per slot equal bit/s.
const UNIT_SLOT_US: u64 = 8_000_000;

fn table(caps: &[u64], k: usize) -> LinkLoadTable {
    let clock = SlotClock::new(UNIT_SLOT_US, k).unwrap();
    let mut t = LinkLoadTable::new(clock, 0);
    for (l, c) in caps.iter().enumerate() {
        t.add_link(LinkId(l as u32), *c).unwrap();
    }
    t
}

fn flow(id: u64, job: u64, role: FlowRole, path: &[u32], sent: u64, left: u64) -> FlowState {
    FlowState {
        flow: FlowId(id),
        job: JobKey(job),
        role,
        path: path.iter().map(|l| LinkId(*l)).collect(),
        progress: FlowProgress {
            sent_bytes: sent,
            remaining_bytes: left,
        },
        iteration_bytes: sent + left,
        decide: true,
    }
}

fn ring(
    job: u64,
    first_id: u64,
    n: u64,
    chunk: u64,
    sent_left: &[(u64, u64)],
    links: &[u32],
) -> Vec<FlowState> {
    (0..n)
        .map(|i| {
            let pred = first_id + (i + n - 1) % n;
            let (s, l) = sent_left[i as usize % sent_left.len()];
            flow(
                first_id + i,
                job,
                FlowRole::RingSend {
                    predecessor: Some(FlowId(pred)),
                    chunk_bytes: chunk,
                },
                &[links[i as usize % links.len()]],
                s,
                l,
            )
        })
        .collect()
}

fn snapshot(flows: Vec<FlowState>) -> Snapshot {
    Snapshot {
        slot: 0,
        flows,
        min_rate_bps: 0,
    }
}

fn group(d: &Decisions, id: u64) -> (&GroupOutcome, usize) {
    d.groups
        .iter()
        .find_map(|g| g.flows.iter().position(|f| f.0 == id).map(|k| (g, k)))
        .expect("flow decided")
}

#[test]
fn groups_follow_the_paradigm() {
    let ps = |id, role| flow(id, 7, role, &[0], 0, 100);
    let flows = vec![
        ps(1, FlowRole::PsPush { ps: 0 }),
        ps(2, FlowRole::PsPush { ps: 0 }),
        ps(3, FlowRole::PsPull { ps: 0 }),
        ps(4, FlowRole::PsPush { ps: 1 }),
        flow(5, 8, FlowRole::Other, &[1], 0, 50),
        flow(6, 8, FlowRole::Other, &[1], 0, 50),
    ];
    let mut t = table(&[1_000, 1_000], 4);
    let d = decide(&mut t, &snapshot(flows), &PolicyOptions::default()).unwrap();
    let sets: Vec<(GroupPhase, Vec<u64>)> = d
        .groups
        .iter()
        .map(|g| (g.phase, g.flows.iter().map(|f| f.0).collect()))
        .collect();
    assert!(sets.contains(&(GroupPhase::Aggregation, vec![1, 2])));
    assert!(sets.contains(&(GroupPhase::Broadcast, vec![3])));
    assert!(sets.contains(&(GroupPhase::Aggregation, vec![4])));
    assert!(sets.contains(&(GroupPhase::All, vec![5])));
    assert!(sets.contains(&(GroupPhase::All, vec![6])));
    assert_eq!(sets.len(), 5);
    // A PS's aggregation group is planned right before its broadcast group.
    let agg = d
        .groups
        .iter()
        .position(|g| g.flows.contains(&FlowId(1)))
        .unwrap();
    assert_eq!(d.groups[agg + 1].flows, vec![FlowId(3)]);
    assert_eq!(group_phase(&FlowRole::Other), GroupPhase::All);
    assert_eq!(
        unit_key(JobKey(1), FlowId(9), &FlowRole::Other).1,
        UnitKind::Alone { flow: FlowId(9) }
    );
}

#[test]
fn a_ring_flow_whose_predecessor_is_context_depends_on_its_f_plus_a_chunk() {
    let mut flows = ring(1, 10, 3, 100, &[(0, 900)], &[0, 1, 2]);
    flows[0].decide = false; // flow 10 is decided elsewhere: context
    flows[0].progress.sent_bytes = 250;
    let mut t = table(&[10_000, 10_000, 10_000], 4);
    let d = decide(&mut t, &snapshot(flows), &PolicyOptions::default()).unwrap();
    let (g, k) = group(&d, 11);
    assert_eq!(
        g.dependencies[k],
        Dependency::Ring {
            predecessor_bytes: 350
        }
    );
    // Its own predecessor's F bounds it through the cut: within a chunk of 250.
    assert!(g.decision.decisions[k].accumulated_bytes <= 350);
    // Flow 12 follows flow 11 in the same group: cut to 11's planned F (before 11's own cut,
    // as Alg. 2's receiver cuts against the F its predecessor announced) plus a chunk.
    let (g2, k2) = group(&d, 12);
    assert_eq!(g2.dependencies[k2], Dependency::Independent);
    assert!(g.cuts_bytes[k] > 0);
    assert!(
        g2.decision.decisions[k2].accumulated_bytes
            <= g.decision.decisions[k].accumulated_bytes + g.cuts_bytes[k] + 100
    );
    assert!(d.rate_bps(FlowId(10)).is_none());
}

#[test]
fn sendable_only_plans_no_more_than_the_dependency_lets_a_flow_send() {
    let mut flows = ring(1, 10, 2, 0, &[(0, 1_000)], &[0, 1]);
    flows[0].decide = false;
    flows[0].progress.sent_bytes = 300;
    let mut t = table(&[10_000, 10_000], 4);
    let opts = PolicyOptions {
        sendable_only: true,
        ..PolicyOptions::default()
    };
    let d = decide(&mut t, &snapshot(flows), &opts).unwrap();
    let (g, k) = group(&d, 11);
    assert_eq!(g.progress[k].remaining_bytes, 300);
    assert_eq!(g.decision.decisions[k].plan.scheduled_bytes(), 300);
}

#[test]
fn spare_sharing_and_the_floor() {
    // Flow 11 waits on its predecessor (F = 0, no chunk): planned nothing now. With spare
    // sharing it gets what the slot's plans leave on its link, split with the other idle
    // flow there; without, the floor.
    let mut flows = ring(1, 10, 2, 0, &[(0, 1_000)], &[0, 0]);
    flows[0].decide = false;
    flows.push(flow(20, 2, FlowRole::Other, &[0], 0, 300));
    let mut other = ring(3, 30, 2, 0, &[(0, 1_000)], &[0, 0]);
    other[0].decide = false;
    flows.push(other.pop().unwrap());
    flows.push(other.pop().unwrap());
    let caps = [1_000u64];
    let opts = |spare| PolicyOptions {
        share_spare: spare,
        sendable_only: true,
        ..PolicyOptions::default()
    };
    let mut snap = snapshot(flows);
    let mut t = table(&caps, 4);
    let d = decide(&mut t, &snap, &opts(true)).unwrap();
    // Flow 20 plans its 300 bytes in the slot; 700 bit/s are left to flows 11 and 31.
    let free = t.available_bps_at(LinkId(0), 0).unwrap();
    assert_eq!(d.rate_bps(FlowId(11)), Some(free / 2));
    assert_eq!(d.rate_bps(FlowId(31)), Some(free / 2));
    assert!(d.rate_bps(FlowId(20)).unwrap() >= 300);
    snap.min_rate_bps = 7;
    let mut t = table(&caps, 4);
    let d = decide(&mut t, &snap, &opts(false)).unwrap();
    assert_eq!(d.rate_bps(FlowId(11)), Some(7));
    assert_eq!(d.rate_bps(FlowId(31)), Some(7));
}

#[test]
fn the_receivers_cut_and_the_slot_rate() {
    // Ring: (F − (F_pred + chunk))+; PS broadcast: (F − F_a^min)+; never for a push or another
    // flow.
    let ring = FlowRole::RingSend {
        predecessor: None,
        chunk_bytes: 100,
    };
    assert_eq!(receiver_cut_bytes(&ring, 1_000, 800), 100);
    assert_eq!(receiver_cut_bytes(&ring, 900, 800), 0);
    assert_eq!(
        receiver_cut_bytes(&FlowRole::PsPull { ps: 0 }, 1_000, 800),
        200
    );
    assert_eq!(receiver_cut_bytes(&FlowRole::PsPull { ps: 0 }, 700, 800), 0);
    assert_eq!(receiver_cut_bytes(&FlowRole::PsPush { ps: 0 }, 1_000, 0), 0);
    assert_eq!(receiver_cut_bytes(&FlowRole::Other, 1_000, 0), 0);
    // The slot rate: the pacing rate, raised to the spare share and the floor.
    let mut t = table(&[1_000], 4);
    let d = decide(
        &mut t,
        &snapshot(vec![flow(1, 1, FlowRole::Other, &[0], 0, 2_500)]),
        &PolicyOptions::default(),
    )
    .unwrap();
    let (g, k) = group(&d, 1);
    let x = &g.decision.decisions[k];
    let pace = x.pacing_rate_bps(2_500, g.decision.share_now_bps[k]);
    assert_eq!(pace, 1_000);
    assert_eq!(
        slot_rate_bps(
            RateRule::PlanOrShare,
            x,
            2_500,
            g.decision.share_now_bps[k],
            0,
            0
        ),
        pace
    );
    assert_eq!(
        slot_rate_bps(
            RateRule::PlanOrShare,
            x,
            2_500,
            g.decision.share_now_bps[k],
            1_500,
            0
        ),
        1_500
    );
    assert_eq!(
        slot_rate_bps(
            RateRule::PlanOrShare,
            x,
            2_500,
            g.decision.share_now_bps[k],
            1_500,
            2_000
        ),
        2_000
    );
    assert_eq!(g.spare_bps, vec![0]);
    // Under the strict-priority rule the share is the rate: the plan does not raise it.
    assert_eq!(
        slot_rate_bps(RateRule::Share, x, 2_500, g.decision.share_now_bps[k], 0, 0),
        0
    );
    assert_eq!(
        slot_rate_bps(
            RateRule::Share,
            x,
            2_500,
            g.decision.share_now_bps[k],
            300,
            200
        ),
        300
    );
    assert_eq!(
        slot_rate_bps(
            RateRule::Share,
            x,
            2_500,
            g.decision.share_now_bps[k],
            100,
            200
        ),
        200
    );
}

#[test]
fn first_come_ranks_the_earliest_phase_first() {
    let r = rank_first_come(&[(JobKey(1), 300), (JobKey(2), u64::MAX), (JobKey(3), 100)]);
    assert_eq!(
        r.unwrap(),
        vec![(JobKey(3), 0), (JobKey(1), 1), (JobKey(2), 2)]
    );
    let e = rank_first_come(&[(JobKey(5), 1), (JobKey(5), 2)]).unwrap_err();
    assert!(e.to_string().contains('5'), "{e}");
}

#[test]
fn earliest_deadline_lets_a_short_burst_pass_a_long_one() {
    // Job 1's long burst began at 0 and takes 320 alone (deadline 320); job 2's short one began
    // at 100 and takes 160 (deadline 260): job 2 first, though it came second (first come
    // would rank job 1 first). Job 3 began at 250, 160 alone: deadline 410, last. A job with
    // nothing to send (start u64::MAX) stays last without overflowing.
    let r = rank_earliest_deadline(&[
        (JobKey(1), 0, 320),
        (JobKey(2), 100, 160),
        (JobKey(3), 250, 160),
        (JobKey(4), u64::MAX, 500),
    ])
    .unwrap();
    assert_eq!(
        r,
        vec![
            (JobKey(2), 0),
            (JobKey(1), 1),
            (JobKey(3), 2),
            (JobKey(4), 3)
        ]
    );
    // Equal deadlines: by job.
    let r = rank_earliest_deadline(&[(JobKey(9), 10, 90), (JobKey(8), 50, 50)]).unwrap();
    assert_eq!(r, vec![(JobKey(8), 0), (JobKey(9), 1)]);
    let e = rank_earliest_deadline(&[(JobKey(6), 1, 1), (JobKey(6), 2, 2)]).unwrap_err();
    assert!(e.to_string().contains('6'), "{e}");
}

#[test]
fn job_order_names_round_trip_and_errors_list_them() {
    for o in JobOrder::ALL {
        assert_eq!(o.name().parse::<JobOrder>().unwrap(), o);
    }
    assert_eq!(JobOrder::default(), JobOrder::SlowdownDeadline);
    let e = "edf".parse::<JobOrder>().unwrap_err();
    assert!(
        e.contains("\"first_come\"") && e.contains("\"earliest_deadline\""),
        "{e}"
    );
}

#[test]
fn least_attained_service_ranks_the_job_behind_first() {
    let r = rank_least_attained(&[(JobKey(1), 7), (JobKey(2), 5), (JobKey(3), 7)]).unwrap();
    assert_eq!(r, vec![(JobKey(2), 0), (JobKey(1), 1), (JobKey(3), 2)]);
    assert!(rank_least_attained(&[]).unwrap().is_empty());
    let e = rank_least_attained(&[(JobKey(4), 1), (JobKey(4), 2)]).unwrap_err();
    assert!(e.to_string().contains('4'), "{e}");
}

#[test]
fn interleave_orders_units_by_job_rank() {
    // Two jobs on one link; job 2 is further into its iteration (mlcc plans it first), job 1
    // ranks first (interleave plans it first and it takes the link).
    let flows = vec![
        flow(1, 1, FlowRole::Other, &[0], 0, 2_000),
        flow(2, 2, FlowRole::Other, &[0], 1_500, 2_000),
    ];
    let mut t = table(&[1_000], 4);
    let d = decide(&mut t, &snapshot(flows.clone()), &PolicyOptions::default()).unwrap();
    assert_eq!(d.groups[0].flows, vec![FlowId(2)]);
    let ranks = rank_jobs(&[
        JobWork {
            job: JobKey(2),
            remaining_us: 50,
        },
        JobWork {
            job: JobKey(1),
            remaining_us: 10,
        },
    ])
    .unwrap();
    assert_eq!(ranks, vec![(JobKey(1), 0), (JobKey(2), 1)]);
    let opts = PolicyOptions {
        rules: Rules::Interleave,
        job_rank: ranks,
        ..PolicyOptions::default()
    };
    let mut t = table(&[1_000], 4);
    let d = decide(&mut t, &snapshot(flows), &opts).unwrap();
    assert_eq!(d.groups[0].flows, vec![FlowId(1)]);
    assert_eq!(d.groups[0].decision.decisions[0].plan.bytes[0], 1_000);
    assert_eq!(d.groups[1].decision.decisions[0].plan.bytes[0], 0);
}

#[test]
fn bad_snapshots_are_refused_naming_the_value() {
    let mut t = table(&[1_000], 4);
    let opts = PolicyOptions::default();
    let mut s = snapshot(vec![flow(1, 1, FlowRole::Other, &[0], 0, 10)]);
    s.slot = 3;
    assert_eq!(
        decide(&mut t, &s, &opts),
        Err(SchedError::SlotMismatch {
            slot: 3,
            current_slot: 0
        })
    );
    let s = snapshot(vec![
        flow(1, 1, FlowRole::Other, &[0], 0, 10),
        flow(1, 2, FlowRole::Other, &[0], 0, 10),
    ]);
    assert_eq!(
        decide(&mut t, &s, &opts),
        Err(SchedError::DuplicateFlow(FlowId(1)))
    );
    let s = snapshot(vec![flow(1, 1, FlowRole::Other, &[5], 0, 10)]);
    assert_eq!(
        decide(&mut t, &s, &opts),
        Err(SchedError::UnknownLink(LinkId(5)))
    );
    let s = snapshot(vec![flow(1, 1, FlowRole::Other, &[], 0, 10)]);
    assert_eq!(decide(&mut t, &s, &opts), Err(SchedError::EmptyPath));
    assert_eq!(t.flow_count(), 0);
    let twice = [
        JobWork {
            job: JobKey(4),
            remaining_us: 1,
        },
        JobWork {
            job: JobKey(4),
            remaining_us: 2,
        },
    ];
    assert!(matches!(
        rank_jobs(&twice),
        Err(SchedError::InvalidParameter { value: 4, .. })
    ));
}

/// A random mix: one ring job (2..=4 flows over links 0..3) and one PS job (1..=2 PS, 1..=3
/// workers, pushes on link 3, pulls on link 4), with random progress; some flows context only.
fn mix() -> impl Strategy<Value = (Vec<u64>, Vec<FlowState>, bool, bool)> {
    (
        vec(1u64..5_000, 5),
        2u64..=4,
        0u64..500,
        vec((0u64..3_000, 0u64..3_000, any::<bool>()), 4),
        1u32..=2,
        1u32..=3,
        vec((0u64..3_000, 1u64..3_000, any::<bool>()), 12),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(caps, n, chunk, rp, nps, w, pp, spare, sendable)| {
            let mut flows = Vec::new();
            for i in 0..n {
                let (s, l, ctx) = rp[i as usize];
                let mut f = flow(
                    100 + i,
                    1,
                    FlowRole::RingSend {
                        predecessor: Some(FlowId(100 + (i + n - 1) % n)),
                        chunk_bytes: chunk,
                    },
                    &[(i % 3) as u32],
                    s,
                    l,
                );
                f.decide = !ctx;
                flows.push(f);
            }
            let mut k = 0;
            for ps in 0..nps {
                for (role, link) in [(FlowRole::PsPush { ps }, 3), (FlowRole::PsPull { ps }, 4)] {
                    for _ in 0..w {
                        let (s, l, ctx) = pp[k % pp.len()];
                        let mut f = flow(200 + k as u64, 2, role, &[link], s, l);
                        f.decide = !ctx;
                        flows.push(f);
                        k += 1;
                    }
                }
            }
            (caps, flows, spare, sendable)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn dependencies_hold_and_links_are_never_overbooked(
        (caps, flows, spare, sendable) in mix(),
        interleave in any::<bool>(),
    ) {
        let mut t = table(&caps, 4);
        let opts = PolicyOptions {
            rules: if interleave { Rules::Interleave } else { Rules::Mlcc },
            share_spare: spare,
            sendable_only: sendable,
            work_conserving: false,
            strict_rates: false,
            job_rank: vec![(JobKey(2), 0), (JobKey(1), 1)],
        };
        let d = decide(&mut t, &snapshot(flows.clone()), &opts).unwrap();
        // Every decided flow once, no context flow.
        let mut decided: Vec<u64> = d.groups.iter().flat_map(|g| g.flows.iter().map(|f| f.0)).collect();
        decided.sort_unstable();
        let want: Vec<u64> = flows.iter().filter(|f| f.decide).map(|f| f.flow.0).collect();
        prop_assert_eq!(decided, want);
        // F of a flow as its successors are cut against: planned now (before its own cut, as
        // Alg. 2's receiver cuts against the F its predecessor announced), or its bytes sent.
        let f_planned = |id: u64| -> u64 {
            d.groups.iter().find_map(|g| g.flows.iter().position(|f| f.0 == id)
                .map(|k| g.decision.decisions[k].accumulated_bytes + g.cuts_bytes[k]))
                .unwrap_or_else(|| flows.iter().find(|f| f.flow.0 == id).unwrap().progress.sent_bytes)
        };
        let f_of = |id: u64| -> u64 {
            d.groups.iter().find_map(|g| g.flows.iter().position(|f| f.0 == id)
                .map(|k| g.decision.decisions[k].accumulated_bytes))
                .unwrap_or_else(|| flows.iter().find(|f| f.flow.0 == id).unwrap().progress.sent_bytes)
        };
        for g in &d.groups {
            for (k, id) in g.flows.iter().enumerate() {
                let fs = flows.iter().find(|f| f.flow == *id).unwrap();
                let acc = g.decision.decisions[k].accumulated_bytes;
                // Never planned beyond its bytes left.
                prop_assert!(acc <= fs.progress.sent_bytes + fs.progress.remaining_bytes);
                match fs.role {
                    // Within a chunk of its predecessor's F, or not ahead of where it was.
                    FlowRole::RingSend { predecessor: Some(p), chunk_bytes } => {
                        prop_assert!(acc <= (f_planned(p.0) + chunk_bytes).max(fs.progress.sent_bytes),
                            "ring flow {} at {} past predecessor {} at {} + {}", id.0, acc, p.0, f_planned(p.0), chunk_bytes);
                    }
                    // The broadcast never ahead of the slowest aggregation into its PS.
                    FlowRole::PsPull { ps } => {
                        let a_min = flows.iter().filter(|f| f.role == FlowRole::PsPush { ps })
                            .map(|f| f_of(f.flow.0)).min().unwrap_or(0);
                        prop_assert!(acc <= a_min.max(fs.progress.sent_bytes));
                    }
                    _ => {}
                }
            }
        }
        // The table never holds more than a link's capacity in any slot.
        for (l, c) in caps.iter().enumerate() {
            for x in t.link_load_bps(LinkId(l as u32)).unwrap() {
                prop_assert!(x <= *c, "link {} load {} over {}", l, x, c);
            }
        }
        // Units in planning order: under Interleave, every group of job 2 before job 1's.
        if interleave {
            let first_1 = d.groups.iter().position(|g| g.job == JobKey(1));
            let last_2 = d.groups.iter().rposition(|g| g.job == JobKey(2));
            if let (Some(a), Some(b)) = (first_1, last_2) {
                prop_assert!(b < a);
            }
        } else {
            for w in d.groups.windows(2) {
                prop_assert!(w[0].order <= w[1].order);
            }
        }
        // Every rate is `slot_rate_bps` of its parts; a spare share goes only to a flow planned
        // nothing now, and only with spare sharing on.
        for g in &d.groups {
            for (k, x) in g.decision.decisions.iter().enumerate() {
                prop_assert_eq!(g.rates_bps[k], slot_rate_bps(opts.rate_rule(), x, g.progress[k].remaining_bytes,
                    g.decision.share_now_bps[k], g.spare_bps[k], 0));
                let idle = x.plan.bytes.first().copied().unwrap_or(0) == 0;
                prop_assert!(g.spare_bps[k] == 0 || (spare && idle), "spare {} to flow {}", g.spare_bps[k], g.flows[k].0);
            }
        }
        // Spare sharing raises only flows planned nothing now.
        if !spare {
            for g in &d.groups {
                for (k, d) in g.decision.decisions.iter().enumerate() {
                    prop_assert_eq!(g.rates_bps[k], d.pacing_rate_bps(g.progress[k].remaining_bytes, g.decision.share_now_bps[k]));
                }
            }
        }
    }
}

#[test]
fn priority_gives_the_first_ranked_job_the_link_and_the_next_what_is_left() {
    // Two jobs on link 0 (1000 bit/s), job 2 also on link 1 (400 bit/s). Job 1 ranks first:
    // its flow may take the whole of link 0 in this slot; job 2's flow gets what job 1 leaves
    // there (nothing), however much its plan put in the slot.
    let flows = vec![
        flow(1, 1, FlowRole::Other, &[0], 0, 600),
        flow(2, 2, FlowRole::Other, &[0, 1], 0, 2_000),
    ];
    let opts = PolicyOptions {
        rules: Rules::Priority,
        job_rank: vec![(JobKey(1), 0), (JobKey(2), 1)],
        ..PolicyOptions::default()
    };
    let mut t = table(&[1_000, 400], 4);
    let d = decide(&mut t, &snapshot(flows.clone()), &opts).unwrap();
    assert_eq!(d.groups[0].flows, vec![FlowId(1)]);
    assert_eq!(d.groups[0].spare_bps, vec![1_000]);
    assert_eq!(d.rate_bps(FlowId(1)), Some(1_000));
    assert_eq!(d.groups[1].spare_bps, vec![0]);
    // Job 2's own plan (what job 1's plan leaves in the slot, 400) is kept as its floor.
    assert_eq!(d.rate_bps(FlowId(2)), Some(400));
    // Ranks swapped: job 2 first takes what its path allows (400), job 1 the rest (600).
    let opts = PolicyOptions {
        job_rank: vec![(JobKey(2), 0), (JobKey(1), 1)],
        ..opts
    };
    let mut t = table(&[1_000, 400], 4);
    let d = decide(&mut t, &snapshot(flows), &opts).unwrap();
    assert_eq!(d.rate_bps(FlowId(2)), Some(400));
    assert_eq!(d.rate_bps(FlowId(1)), Some(600));
}

#[test]
fn work_conservation_raises_active_flows_to_what_the_link_leaves() {
    // Link 0 (1000 bit/s) carries flow 1 (100 bytes left: planned 100 bit/s, completing, so
    // paced at its MADD share) and flow 2 (300 bytes left, all planned now), of jobs 1 and 2
    // (ranked by their planning key); flow 3 (job 3) has nothing to send (idle). Without work
    // conservation the active flows keep their plans' rates; with it, what their pacing rates
    // leave of the link goes to them in equal parts, and they fill the link.
    let flows = vec![
        flow(1, 1, FlowRole::Other, &[0], 900, 100),
        flow(2, 2, FlowRole::Other, &[0], 0, 3_000),
        flow(3, 3, FlowRole::Other, &[0], 500, 0),
    ];
    let off = PolicyOptions::default();
    let mut t = table(&[1_000], 4);
    let before = decide(&mut t, &snapshot(flows.clone()), &off).unwrap();
    let on = PolicyOptions {
        work_conserving: true,
        ..off
    };
    let mut t = table(&[1_000], 4);
    let d = decide(&mut t, &snapshot(flows.clone()), &on).unwrap();
    let (r1, r2) = (
        d.rate_bps(FlowId(1)).unwrap(),
        d.rate_bps(FlowId(2)).unwrap(),
    );
    let (b1, b2) = (
        before.rate_bps(FlowId(1)).unwrap(),
        before.rate_bps(FlowId(2)).unwrap(),
    );
    assert!(b1 + b2 <= 1_000, "plans within the link: {b1} + {b2}");
    let extra = (1_000 - b1 - b2) / 2;
    assert_eq!((r1, r2), (b1 + extra, b2 + extra));
    assert!(r1 + r2 >= 999, "the link is filled: {r1} + {r2}");
    // The idle flow claims nothing and is not raised.
    assert_eq!(d.rate_bps(FlowId(3)), Some(0));
    // A flow alone on its path gets the whole link whatever its plan.
    let alone = vec![flow(7, 1, FlowRole::Other, &[0], 0, 100)];
    let mut t = table(&[1_000], 4);
    let d = decide(&mut t, &snapshot(alone), &on).unwrap();
    assert_eq!(d.rate_bps(FlowId(7)), Some(1_000));
}

#[test]
fn work_conserving_priority_skips_idle_higher_ranked_jobs() {
    // Job 1 ranks first but has nothing to send in this slot (between iterations); job 2's
    // flow is active on the same link. Strict priority as before holds the whole link for
    // job 1 (job 2 runs at its own plan beside it: the link is booked twice if job 1 begins
    // its burst in the slot); work-conserving priority gives job 2 the link, and job 1 what
    // job 2 leaves (nothing).
    let flows = vec![
        flow(1, 1, FlowRole::Other, &[0], 600, 0),
        flow(2, 2, FlowRole::Other, &[0], 0, 300),
    ];
    let strict = PolicyOptions {
        rules: Rules::Priority,
        job_rank: vec![(JobKey(1), 0), (JobKey(2), 1)],
        ..PolicyOptions::default()
    };
    let mut t = table(&[1_000], 4);
    let d = decide(&mut t, &snapshot(flows.clone()), &strict).unwrap();
    assert_eq!(d.rate_bps(FlowId(1)), Some(1_000), "held while idle");
    let wc = PolicyOptions {
        work_conserving: true,
        ..strict
    };
    let mut t = table(&[1_000], 4);
    let d = decide(&mut t, &snapshot(flows), &wc).unwrap();
    assert_eq!(d.rate_bps(FlowId(2)), Some(1_000));
    assert_eq!(d.rate_bps(FlowId(1)), Some(0));
}

#[test]
fn work_conserving_priority_serves_idle_flows_that_can_send_before_those_that_cannot() {
    // Job 1 ranks first: its flow 1 is active on link 0 and takes it; its flow 2 on link 1 has
    // nothing it can send now (a PS broadcast waiting for its pushes; a computing flow). Job 2
    // is a ring of two (flows 3 on link 0 and 4 on link 1, a chunk of 500 bytes): its member
    // on link 0 gets nothing now, so the ring's plan may leave both members idle, but flow 4
    // can send its chunk on link 1, which nothing else uses. Before this rule job 1's idle
    // flow 2 took link 1 (idle members in rank order) and flow 4 sat at its plan: in the VM the
    // ring's free direction waited at the floor while its port was idle.
    let mut flows = vec![
        flow(1, 1, FlowRole::Other, &[0], 0, 600),
        flow(2, 1, FlowRole::Other, &[1], 600, 0),
    ];
    flows.extend(ring(2, 3, 2, 500, &[(0, 1_000)], &[0, 1]));
    let opts = PolicyOptions {
        rules: Rules::Priority,
        job_rank: vec![(JobKey(1), 0), (JobKey(2), 1)],
        work_conserving: true,
        sendable_only: true,
        ..PolicyOptions::default()
    };
    let mut t = table(&[1_000, 1_000], 4);
    let d = decide(&mut t, &snapshot(flows), &opts).unwrap();
    assert_eq!(d.rate_bps(FlowId(1)), Some(1_000));
    assert_eq!(
        d.rate_bps(FlowId(4)),
        Some(1_000),
        "the ring's free direction"
    );
    assert_eq!(
        d.rate_bps(FlowId(2)),
        Some(0),
        "nothing to send, nothing held"
    );
    // Job 2's member on link 0 gets what job 1 leaves there: nothing.
    assert_eq!(d.rate_bps(FlowId(3)), Some(0));
    // With nothing else on link 1, the flow without bytes keeps it (it starts at once when
    // its bytes come).
    let alone = vec![
        flow(1, 1, FlowRole::Other, &[0], 0, 600),
        flow(2, 1, FlowRole::Other, &[1], 600, 0),
    ];
    let mut t = table(&[1_000, 1_000], 4);
    let d = decide(&mut t, &snapshot(alone), &opts).unwrap();
    assert_eq!(d.rate_bps(FlowId(2)), Some(1_000));
}

#[test]
fn strict_rates_pace_a_lower_ranked_flow_at_its_share_with_the_floors_reserved() {
    // Both jobs active on link 0 (1000 bit/s): job 1's plan takes 600 of it in the slot and
    // leaves job 2's plan 400, but job 1's strict-priority share is the whole link. With the
    // plan-or-share rule job 2 also runs at its plan: the link is booked beyond its capacity.
    // With strict rates job 2 gets what job 1's share leaves (its floor, reserved first) and
    // the two rates add up to the link.
    let flows = vec![
        flow(1, 1, FlowRole::Other, &[0], 0, 600),
        flow(2, 2, FlowRole::Other, &[0, 1], 0, 2_000),
    ];
    let plan_or_share = PolicyOptions {
        rules: Rules::Priority,
        work_conserving: true,
        job_rank: vec![(JobKey(1), 0), (JobKey(2), 1)],
        ..PolicyOptions::default()
    };
    assert_eq!(plan_or_share.rate_rule(), RateRule::PlanOrShare);
    let floored = Snapshot {
        min_rate_bps: 10,
        ..snapshot(flows.clone())
    };
    let mut t = table(&[1_000, 400], 4);
    let d = decide(&mut t, &floored, &plan_or_share).unwrap();
    let (g2, k2) = group(&d, 2);
    assert!(
        g2.decision.decisions[k2].plan.bytes[0] > 0,
        "job 2 has a plan in the slot"
    );
    let booked =
        |d: &Decisions| -> u64 { [1, 2].iter().map(|f| d.rate_bps(FlowId(*f)).unwrap()).sum() };
    assert_eq!(d.rate_bps(FlowId(1)), Some(1_000));
    assert!(booked(&d) > 1_000, "overbooked: {}", booked(&d));
    let strict = PolicyOptions {
        strict_rates: true,
        ..plan_or_share.clone()
    };
    assert_eq!(strict.rate_rule(), RateRule::Share);
    let mut t = table(&[1_000, 400], 4);
    let d = decide(&mut t, &floored, &strict).unwrap();
    assert_eq!(d.rate_bps(FlowId(1)), Some(990));
    assert_eq!(d.rate_bps(FlowId(2)), Some(10));
    assert_eq!(booked(&d), 1_000);
    // Without a floor, job 2 gets nothing while job 1 sends.
    let mut t = table(&[1_000, 400], 4);
    let d = decide(&mut t, &snapshot(flows.clone()), &strict).unwrap();
    assert_eq!(d.rate_bps(FlowId(1)), Some(1_000));
    assert_eq!(d.rate_bps(FlowId(2)), Some(0));
    // Strict rates need work conservation and strict priority; elsewhere the rule is unchanged.
    for o in [
        PolicyOptions {
            work_conserving: false,
            ..strict.clone()
        },
        PolicyOptions {
            rules: Rules::Interleave,
            ..strict.clone()
        },
    ] {
        assert_eq!(o.rate_rule(), RateRule::PlanOrShare);
    }
}

#[test]
fn priority_levels_and_weights() {
    let job = |j: u64, rank: u64, links: &[u32]| RankedJob {
        job: JobKey(j),
        rank,
        links: links.iter().map(|l| LinkId(*l)).collect(),
    };
    // 1 and 2 share link 0, 2 and 3 link 1, 4 is alone: levels 0, 1, 2 and 0.
    let v = priority_levels(&[
        job(3, 2, &[1]),
        job(1, 0, &[0]),
        job(4, 3, &[7]),
        job(2, 1, &[0, 1]),
    ])
    .unwrap();
    assert_eq!(
        v,
        vec![
            (JobKey(1), 0),
            (JobKey(2), 1),
            (JobKey(3), 2),
            (JobKey(4), 0)
        ]
    );
    let e = priority_levels(&[job(1, 0, &[0]), job(1, 1, &[1])]).unwrap_err();
    assert!(e.to_string().contains("= 1"), "{e}");
    assert_eq!(priority_weight(0, PRIORITY_WEIGHT_RATIO), 1.0);
    assert_eq!(priority_weight(2, 10.0), 0.01);
    assert_eq!(priority_weight(3, 1.0), 1.0);
    assert_eq!(priority_weight(5, f64::NAN), 1.0);
    assert_eq!(priority_weight(u32::MAX, 1e3), PRIORITY_WEIGHT_MIN);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Of two jobs sharing a link, the higher-ranked (lower rank, ties by job) has the lower
    /// level and the larger weight; a job that shares no link with a higher-ranked one is at
    /// level 0; weights are positive.
    #[test]
    fn priority_levels_order_every_shared_link(
        jobs in vec((0u64..6, vec(0u32..6, 1..4)), 1..10),
    ) {
        let ranked: Vec<RankedJob> = jobs.iter().enumerate().map(|(j, (rank, links))| RankedJob {
            job: JobKey(j as u64),
            rank: *rank,
            links: links.iter().map(|l| LinkId(*l)).collect(),
        }).collect();
        let levels = priority_levels(&ranked).unwrap();
        prop_assert_eq!(levels.len(), ranked.len());
        let level = |j: &RankedJob| levels.iter().find(|(k, _)| *k == j.job).unwrap().1;
        for a in &ranked {
            let higher_sharing: Vec<&RankedJob> = ranked.iter()
                .filter(|b| (b.rank, b.job) < (a.rank, a.job) && b.links.iter().any(|l| a.links.contains(l)))
                .collect();
            for b in &higher_sharing {
                prop_assert!(level(b) < level(a));
                prop_assert!(priority_weight(level(b), PRIORITY_WEIGHT_RATIO)
                    > priority_weight(level(a), PRIORITY_WEIGHT_RATIO));
            }
            if higher_sharing.is_empty() {
                prop_assert_eq!(level(a), 0);
            }
            prop_assert!(priority_weight(level(a), PRIORITY_WEIGHT_RATIO) > 0.0);
        }
    }

    /// Under `Rules::Priority`: dependencies and the table's capacity hold as under the other
    /// rule sets, the strict-priority shares of a link never add up to more than it has free,
    /// every rate is at least its plan's, and a job ranked first with one flow alone in its group
    /// gets its whole path (the table holds nothing else).
    #[test]
    fn priority_shares_never_overbook_a_link(
        (caps, flows, _spare, sendable) in mix(),
        first in 1u64..=2,
    ) {
        let mut t = table(&caps, 4);
        let opts = PolicyOptions {
            rules: Rules::Priority,
            share_spare: false,
            sendable_only: sendable,
            work_conserving: false,
            strict_rates: false,
            job_rank: vec![(JobKey(first), 0), (JobKey(3 - first), 1)],
        };
        let d = decide(&mut t, &snapshot(flows.clone()), &opts).unwrap();
        for (l, c) in caps.iter().enumerate() {
            for x in t.link_load_bps(LinkId(l as u32)).unwrap() {
                prop_assert!(x <= *c, "link {} load {} over {}", l, x, c);
            }
            let shares: u64 = d.groups.iter().flat_map(|g| g.flows.iter().zip(&g.spare_bps))
                .filter(|(f, _)| flows.iter().find(|x| x.flow == **f).unwrap().path.contains(&LinkId(l as u32)))
                .map(|(_, s)| *s)
                .sum();
            prop_assert!(shares <= *c, "link {} shares {} over {}", l, shares, c);
        }
        if let Some(w) = d.groups.windows(2).find(|w| w[0].job == JobKey(3 - first) && w[1].job == JobKey(first)) {
            prop_assert!(false, "job {:?} planned before job {:?}", w[0].job, w[1].job);
        }
        for g in &d.groups {
            for (k, x) in g.decision.decisions.iter().enumerate() {
                prop_assert!(g.rates_bps[k] >= x.pacing_rate_bps(g.progress[k].remaining_bytes, g.decision.share_now_bps[k]));
                prop_assert!(g.rates_bps[k] >= g.spare_bps[k]);
            }
        }
        if let Some(g0) = d.groups.first().filter(|g| g.flows.len() == 1) {
            let path = &flows.iter().find(|f| f.flow == g0.flows[0]).unwrap().path;
            let whole = path.iter().map(|l| caps[l.0 as usize]).min().unwrap();
            prop_assert_eq!(g0.spare_bps[0], whole);
        }
    }

    /// Work-conserving strict priority with strict rates and a floor: on every link, the rates
    /// of the flows with bytes to send now (planned in the slot or not) add up to at most its
    /// capacity (their floors are reserved, none is raised to its own plan), and each is at
    /// least the floor.
    #[test]
    fn strict_rates_never_overbook_a_link_with_active_flows(
        (caps, flows, _spare, sendable) in mix(),
        first in 1u64..=2,
        floor in 0u64..=3,
    ) {
        let mut t = table(&caps, 4);
        let opts = PolicyOptions {
            rules: Rules::Priority,
            share_spare: true,
            sendable_only: sendable,
            work_conserving: true,
            strict_rates: true,
            job_rank: vec![(JobKey(first), 0), (JobKey(3 - first), 1)],
        };
        let snap = Snapshot { min_rate_bps: floor, ..snapshot(flows.clone()) };
        let d = decide(&mut t, &snap, &opts).unwrap();
        let path = |f: FlowId| &flows.iter().find(|x| x.flow == f).unwrap().path;
        for (l, c) in caps.iter().enumerate() {
            let link = LinkId(l as u32);
            let active: Vec<u64> = d.groups.iter()
                .flat_map(|g| (0..g.flows.len()).map(move |k| (g, k)))
                .filter(|(g, k)| g.progress[*k].remaining_bytes > 0)
                .filter(|(g, k)| path(g.flows[*k]).contains(&link))
                .map(|(g, k)| g.rates_bps[k])
                .collect();
            if floor * active.len() as u64 <= *c {
                let sum: u64 = active.iter().sum();
                prop_assert!(sum <= *c, "link {} active rates {:?} over {}", l, active, c);
            }
        }
        for g in &d.groups {
            for k in 0..g.flows.len() {
                prop_assert!(g.rates_bps[k] >= floor);
                prop_assert_eq!(g.rates_bps[k], g.spare_bps[k].max(floor));
            }
        }
    }
}
