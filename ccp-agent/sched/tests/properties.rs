// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Property tests of the scheduling library: Alg. 1 never plans above the available bandwidth,
//! places every byte when the horizon can carry them, and matches a brute-force optimum on small
//! cases; Alg. 2 and its reductions stay within the available bandwidth; the load table equals
//! the sum of its schedules; and, slot after slot, the parameter-server and ring all-reduce
//! invariants of "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers" (Sec.
//! IV-C) hold while no link is ever planned above its estimated bandwidth.

use std::collections::BTreeMap;

use mlcc_sched::greedy::{byte_price_fx, plan_cost_fx};
use mlcc_sched::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::subsequence;

/// 8 s slots: bytes per slot equal bit/s, which keeps the small cases readable.
const UNIT_SLOT_US: u64 = 8_000_000;

fn view_strategy(k: usize, max_load: u64, max_avail: u64) -> impl Strategy<Value = PathView> {
    (vec(0..=max_load, k), vec(0..=max_avail, k), 0u64..1_000_000).prop_map(
        |(load_bps, available_bps, start_slot)| PathView {
            start_slot,
            load_bps,
            available_bps,
        },
    )
}

fn clock_strategy() -> impl Strategy<Value = SlotClock> {
    (
        prop_oneof![
            Just(1_000u64),
            Just(60_000),
            Just(UNIT_SLOT_US),
            1u64..200_000
        ],
        1usize..=10,
    )
        .prop_map(|(us, k)| SlotClock::new(us, k).unwrap())
}

/// Checks the plan's rates against the view and the byte accounting; returns the total
/// capacity of the horizon in bytes.
fn check_plan(clock: &SlotClock, plan: &Plan, view: &PathView, remaining: u64) -> u64 {
    let k = clock.horizon();
    assert_eq!(plan.bytes.len(), k);
    assert_eq!(plan.rates_bps.len(), k);
    let mut cap_total = 0u64;
    for i in 0..k {
        assert!(
            plan.rates_bps[i] <= view.available_bps[i],
            "slot {i}: {plan:?} vs {view:?}"
        );
        assert!(plan.bytes[i] <= clock.bytes_in_slot(plan.rates_bps[i]));
        cap_total = cap_total.saturating_add(clock.bytes_in_slot(view.available_bps[i]));
    }
    assert_eq!(plan.scheduled_bytes() + plan.unscheduled_bytes, remaining);
    cap_total
}

proptest! {
    #[test]
    fn alg1_respects_available_and_places_all_bytes_when_feasible(
        (clock, view) in clock_strategy().prop_flat_map(|c| (Just(c), view_strategy(c.horizon(), 100_000_000_000, 100_000_000_000))),
        remaining in prop_oneof![0u64..1_000, 0u64..10_000_000_000, Just(u64::MAX)],
    ) {
        let plan = initial_schedule(&clock, remaining, &view).unwrap();
        let cap_total = check_plan(&clock, &plan, &view, remaining);
        if cap_total >= remaining {
            prop_assert!(plan.is_complete());
        } else {
            prop_assert_eq!(plan.scheduled_bytes(), cap_total);
        }
    }

    #[test]
    fn alg1_matches_brute_force_on_small_cases(
        view in (1usize..=4).prop_flat_map(|k| view_strategy(k, 3, 4)),
        remaining in 0u64..=12,
    ) {
        let k = view.load_bps.len();
        let clock = SlotClock::new(UNIT_SLOT_US, k).unwrap();
        let plan = initial_schedule(&clock, remaining, &view).unwrap();
        // Every integer split of `remaining` over the slots within their capacity:
        // the least cost, then the earliest last busy slot.
        let prices: Vec<u128> = (0..k).map(|i| byte_price_fx(&clock, view.load_bps[i], view.available_bps[i])).collect();
        let mut best: Option<(u128, Option<usize>)> = None;
        let mut split = vec![0u64; k];
        loop {
            if split.iter().sum::<u64>() == remaining {
                let cost = plan_cost_fx(&split, &prices);
                let cand = (cost, split.iter().rposition(|b| *b > 0));
                if best.is_none_or(|b| cand < b) {
                    best = Some(cand);
                }
            }
            // Next split (odometer).
            let mut i = 0;
            while i < k && split[i] == view.available_bps[i] {
                split[i] = 0;
                i += 1;
            }
            if i == k { break; }
            split[i] += 1;
        }
        match best {
            Some(b) => prop_assert_eq!((plan.cost_fx, plan.last_busy_offset()), b, "{:?}", plan),
            None => prop_assert!(!plan.is_complete()),
        }
    }

    #[test]
    fn alg2_and_reductions_respect_available(
        (clock, view) in clock_strategy().prop_flat_map(|c| (Just(c), view_strategy(c.horizon(), 1_000_000, 10_000_000_000))),
        sent in 0u64..1_000_000_000,
        remaining in 0u64..1_000_000_000,
        dep_bytes in 0u64..2_000_000_000,
        kind in 0u8..4,
        excess in prop_oneof![Just(0u64), 0u64..1_000_000_000],
    ) {
        let dep = match kind {
            0 => Dependency::Independent,
            1 => Dependency::PsAggregation { broadcast_max_bytes: dep_bytes },
            2 => Dependency::PsBroadcast { aggregation_min_bytes: dep_bytes },
            _ => Dependency::Ring { predecessor_bytes: dep_bytes },
        };
        let progress = FlowProgress { sent_bytes: sent, remaining_bytes: remaining };
        let d = decide(&clock, &progress, &dep, &view).unwrap();
        check_plan(&clock, &d.plan, &view, remaining);
        prop_assert_eq!(d.accumulated_bytes, sent + d.plan.bytes[0]);
        prop_assert_eq!(d.rate_bps, d.plan.rates_bps[0]);
        let initial = initial_schedule(&clock, remaining, &view).unwrap();
        // Alg. 2 only ever raises the current slot, and never past the dependency.
        prop_assert!(d.plan.bytes[0] >= initial.bytes[0]);
        if d.outcome == Outcome::Raised {
            prop_assert_eq!(d.plan.bytes[0], initial.bytes[0] + d.delta_bytes);
        }
        let r = reduce(&clock, &d, &progress, excess, &view).unwrap();
        check_plan(&clock, &r.plan, &view, remaining);
        prop_assert_eq!(r.plan.bytes[0], d.plan.bytes[0].saturating_sub(excess));
    }

    #[test]
    fn load_table_is_the_sum_of_its_schedules(
        ops in vec((0u8..4, 0u64..6, subsequence(vec![0u32, 1, 2, 3, 4], 1..=3), 0u64..3, vec(0u64..1000, 0..8)), 1..40),
    ) {
        let clock = SlotClock::new(1000, 5).unwrap();
        let mut t = LinkLoadTable::new(clock, 10);
        for l in 0..5 { t.add_link(LinkId(l), 1_000_000).unwrap(); }
        for (op, flow, path, slot_off, rates) in ops {
            let path: Vec<LinkId> = path.into_iter().map(LinkId).collect();
            match op {
                0 | 1 => t.set_schedule(FlowId(flow), &path, &Schedule { start_slot: t.current_slot() + slot_off - 1, rates_bps: rates }).unwrap(),
                2 => { let _ = t.remove_flow(FlowId(flow)); }
                _ => { let s = t.current_slot() + slot_off; t.advance_to(s).unwrap(); }
            }
            for l in 0..5u32 {
                let expect: Vec<u64> = (0..5).map(|i| {
                    let slot = t.current_slot() + i;
                    (0..6).filter(|f| t.flow_path(FlowId(*f)).is_some_and(|p| p.contains(&LinkId(l))))
                        .map(|f| t.flow_schedule(FlowId(f)).unwrap().rate_bps_at(slot)).sum()
                }).collect();
                prop_assert_eq!(t.link_load_bps(LinkId(l)).unwrap(), expect);
            }
        }
    }
}

/// A small topology: `caps[l]` bytes per slot on link `l` (8 s slots), with optional
/// network-limited samples lowering the estimate of some links.
fn topology(caps: &[u64], samples: &[(usize, u64)]) -> LinkLoadTable {
    let mut t = LinkLoadTable::new(SlotClock::new(UNIT_SLOT_US, 10).unwrap(), 1);
    for (l, c) in caps.iter().enumerate() {
        t.add_link(LinkId(l as u32), *c).unwrap();
    }
    for (l, r) in samples {
        if *l < caps.len() {
            t.record_rate(
                LinkId(*l as u32),
                RateSample {
                    slot: 0,
                    rate_bps: *r,
                    app_limited: false,
                },
            )
            .unwrap();
        }
    }
    t
}

/// No link is planned above its estimated bandwidth in any slot of the horizon.
fn assert_within_estimates(t: &LinkLoadTable) {
    for l in t.link_ids() {
        let est = t.estimate_bps(l).unwrap();
        for (i, load) in t.link_load_bps(l).unwrap().iter().enumerate() {
            assert!(
                *load <= est,
                "link {l:?} slot +{i}: load {load} > estimate {est}"
            );
        }
    }
}

/// One simulated flow: its request and what it has sent.
struct SimFlow {
    req: FlowRequest,
}

impl SimFlow {
    fn new(id: u64, path: Vec<u32>, bytes: u64) -> Self {
        SimFlow {
            req: FlowRequest {
                flow: FlowId(id),
                path: path.into_iter().map(LinkId).collect(),
                progress: FlowProgress {
                    sent_bytes: 0,
                    remaining_bytes: bytes,
                },
                dependency: Dependency::Independent,
            },
        }
    }
    /// Sends what the decision planned for the current slot.
    fn send(&mut self, d: &Decision) {
        let b = d.plan.bytes[0];
        self.req.progress.sent_bytes += b;
        self.req.progress.remaining_bytes -= b;
    }
}

fn path_strategy(links: usize) -> impl Strategy<Value = Vec<u32>> {
    subsequence((0..links as u32).collect::<Vec<_>>(), 1..=links.min(3)).prop_shuffle()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn independent_flows_never_overbook_a_link(
        caps in vec(1u64..100, 1..5),
        samples in vec((0usize..5, 1u64..100), 0..3),
        flows in vec((path_strategy(4), 0u64..500), 1..12),
    ) {
        let mut t = topology(&caps, &samples);
        let reqs: Vec<FlowRequest> = flows.into_iter().enumerate()
            .map(|(i, (p, b))| SimFlow::new(i as u64, p, b).req).collect();
        for (r, d) in reqs.iter().zip(plan_slot(&mut t, &reqs)) {
            match d {
                Ok(d) => prop_assert_eq!(d.plan.scheduled_bytes() + d.plan.unscheduled_bytes, r.progress.remaining_bytes),
                Err(e) => prop_assert!(r.path.iter().any(|l| l.0 as usize >= caps.len()), "{}", e),
            }
        }
        assert_within_estimates(&t);
    }

    #[test]
    fn ring_chain_never_sends_ahead_of_its_predecessor(
        caps in vec(5u64..60, 2..5),
        chain in vec(path_strategy(4), 2..5),
        background in vec((path_strategy(4), 0u64..300), 0..4),
        bytes in 1u64..300,
    ) {
        let links = caps.len() as u32;
        let fix = |p: Vec<u32>| -> Vec<u32> { let v: Vec<u32> = p.into_iter().filter(|l| *l < links).collect(); if v.is_empty() { vec![0] } else { v } };
        let mut t = topology(&caps, &[]);
        let mut ring: Vec<SimFlow> = chain.into_iter().enumerate().map(|(i, p)| SimFlow::new(i as u64, fix(p), bytes)).collect();
        let mut bg: Vec<SimFlow> = background.into_iter().enumerate().map(|(i, (p, b))| SimFlow::new(100 + i as u64, fix(p), b)).collect();
        for slot in 1..400u64 {
            t.advance_to(slot).unwrap();
            for f in bg.iter_mut() {
                let d = plan_flow(&mut t, &f.req).unwrap();
                f.send(&d);
            }
            let mut pred_f: Option<u64> = None;
            for f in ring.iter_mut() {
                f.req.dependency = pred_f.map_or(Dependency::Independent, |p| Dependency::Ring { predecessor_bytes: p });
                let d = plan_flow(&mut t, &f.req).unwrap();
                // The receiver (this flow's sender, the predecessor's receiver) cuts the excess.
                let d = match pred_f {
                    Some(p) => apply_reduction(&mut t, &f.req, &d, excess_bytes(d.accumulated_bytes, p)).unwrap(),
                    None => d,
                };
                if let Some(p) = pred_f {
                    prop_assert!(d.accumulated_bytes <= p, "slot {}: F {} > predecessor {}", slot, d.accumulated_bytes, p);
                }
                pred_f = Some(d.accumulated_bytes);
                f.send(&d);
            }
            assert_within_estimates(&t);
            if ring.iter().chain(bg.iter()).all(|f| f.req.progress.remaining_bytes == 0) {
                return Ok(());
            }
        }
        prop_assert!(false, "not finished in 400 slots: {:?}", ring.iter().map(|f| f.req.progress).collect::<Vec<_>>());
    }

    #[test]
    fn parameter_server_never_broadcasts_ahead_of_aggregation(
        caps in vec(5u64..60, 2..5),
        agg in vec(path_strategy(4), 1..4),
        bcast in vec(path_strategy(4), 1..4),
        bytes in 1u64..300,
    ) {
        let links = caps.len() as u32;
        let fix = |p: Vec<u32>| -> Vec<u32> { let v: Vec<u32> = p.into_iter().filter(|l| *l < links).collect(); if v.is_empty() { vec![0] } else { v } };
        let mut t = topology(&caps, &[]);
        let mut a: Vec<SimFlow> = agg.into_iter().enumerate().map(|(i, p)| SimFlow::new(i as u64, fix(p), bytes)).collect();
        let mut b: Vec<SimFlow> = bcast.into_iter().enumerate().map(|(i, p)| SimFlow::new(50 + i as u64, fix(p), bytes)).collect();
        for slot in 1..400u64 {
            t.advance_to(slot).unwrap();
            // Workers: raise toward the broadcast flows' progress (as last exchanged).
            let b_sent: Vec<u64> = b.iter().map(|f| f.req.progress.sent_bytes).collect();
            let mut fa = Vec::new();
            for f in a.iter_mut() {
                f.req.dependency = Dependency::ps_aggregation(&b_sent);
                let d = plan_flow(&mut t, &f.req).unwrap();
                fa.push(d.accumulated_bytes);
                f.send(&d);
            }
            let fa_min = *fa.iter().min().unwrap();
            // PS: raise toward F_a^min, then cut each broadcast flow's excess over it.
            let mut fb_max = 0;
            for f in b.iter_mut() {
                f.req.dependency = Dependency::ps_broadcast(&fa);
                let d = plan_flow(&mut t, &f.req).unwrap();
                let d = apply_reduction(&mut t, &f.req, &d, excess_bytes(d.accumulated_bytes, fa_min)).unwrap();
                fb_max = fb_max.max(d.accumulated_bytes);
                f.send(&d);
            }
            prop_assert!(fb_max <= fa_min, "slot {}: F_b^max {} > F_a^min {}", slot, fb_max, fa_min);
            assert_within_estimates(&t);
            if a.iter().chain(b.iter()).all(|f| f.req.progress.remaining_bytes == 0) {
                return Ok(());
            }
        }
        prop_assert!(false, "not finished in 400 slots");
    }
}

proptest! {
    /// On a loop-free Affinity graph (a random tree of jobs and links, all jobs with one
    /// iteration time), the BFS finds shifts without conflict that reproduce every link's
    /// relative shifts: t_k − t_j = t_k^l − t_j^l (mod the iteration time).
    #[test]
    fn affinity_shifts_agree_with_every_link_on_trees(
        parents in vec(any::<prop::sample::Index>(), 1..12),
        offsets in vec(0u64..1000, 12),
        link_offsets in vec(0u64..1000, 12),
        iteration in 1u64..1000,
    ) {
        use mlcc_sched::cassini::{affinity_time_shifts, AffinityEdge, JobId};
        // Job i+1 shares link i with an earlier job: a tree.
        let true_shift = |j: usize| offsets[j] % iteration;
        let mut edges = Vec::new();
        for (i, p) in parents.iter().enumerate() {
            let (child, parent) = (i + 1, p.index(i + 1));
            for j in [parent, child] {
                let shift_ms = (true_shift(j) + link_offsets[i]) % iteration;
                edges.push(AffinityEdge { job: JobId(j as u32), link: LinkId(i as u32), shift_ms });
            }
        }
        let iters: BTreeMap<JobId, u64> = (0..=parents.len()).map(|j| (JobId(j as u32), iteration)).collect();
        let s = affinity_time_shifts(&edges, &iters).unwrap();
        prop_assert!(s.conflicts.is_empty());
        prop_assert_eq!(s.shifts_ms.len(), parents.len() + 1);
        prop_assert_eq!(s.shifts_ms[&JobId(0)], 0);
        for j in 0..=parents.len() {
            let expect = (true_shift(j) + iteration - true_shift(0)) % iteration;
            prop_assert_eq!(s.shifts_ms[&JobId(j as u32)], expect);
        }
    }
}

#[test]
fn views_and_decisions_serialize() {
    let d = decide(
        &SlotClock::new(UNIT_SLOT_US, 2).unwrap(),
        &FlowProgress {
            sent_bytes: 0,
            remaining_bytes: 3,
        },
        &Dependency::Independent,
        &PathView {
            start_slot: 4,
            load_bps: vec![0, 0],
            available_bps: vec![2, 2],
        },
    )
    .unwrap();
    let j = serde_json::to_string(&d).unwrap();
    let back: Decision = serde_json::from_str(&j).unwrap();
    assert_eq!(back, d);
}

fn extreme() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        Just(u64::MAX - 1),
        any::<u64>(),
        0u64..20
    ]
}

proptest! {
    /// Arbitrary and extreme inputs give results or errors, never a panic (tests run with
    /// overflow checks on).
    #[test]
    fn no_panics_on_arbitrary_input(
        slot_us in extreme(),
        k in 0usize..12,
        start in extreme(),
        ops in vec((0u8..7, extreme(), extreme(), vec(extreme(), 0..12), vec(0u32..4, 0..4)), 0..30),
    ) {
        let Ok(clock) = SlotClock::new(slot_us, k) else { return Ok(()) };
        let mut t = LinkLoadTable::new(clock, start);
        for (op, a, b, rates, path) in ops {
            let path: Vec<LinkId> = path.into_iter().map(LinkId).collect();
            match op {
                0 => { let _ = t.add_link(LinkId((a % 4) as u32), b); }
                1 => { let _ = t.set_schedule(FlowId(a % 4), &path, &Schedule { start_slot: b, rates_bps: rates }); }
                2 => { let _ = t.advance_to(a); }
                3 => { let _ = t.record_rate(LinkId((a % 4) as u32), RateSample { slot: b, rate_bps: a, app_limited: b % 2 == 0 }); }
                4 => {
                    let req = FlowRequest {
                        flow: FlowId(a % 4),
                        path,
                        progress: FlowProgress { sent_bytes: a, remaining_bytes: b },
                        dependency: Dependency::Ring { predecessor_bytes: rates.first().copied().unwrap_or(0) },
                    };
                    if let Ok(d) = plan_flow(&mut t, &req) {
                        let _ = apply_reduction(&mut t, &req, &d, rates.last().copied().unwrap_or(0));
                    }
                }
                5 => { let _ = t.remove_flow(FlowId(a % 4)); let _ = t.remove_link(LinkId((b % 4) as u32)); }
                _ => {
                    let view = PathView { start_slot: a, load_bps: rates.clone(), available_bps: rates.iter().rev().copied().collect() };
                    let _ = initial_schedule(&clock, b, &view);
                    let _ = decide(&clock, &FlowProgress { sent_bytes: a, remaining_bytes: b }, &Dependency::PsBroadcast { aggregation_min_bytes: a }, &view);
                }
            }
            let _ = t.snapshot();
            let _ = clock.slot_start_us(a);
            let _ = (clock.slot_at(a), clock.us_until_next_slot(b), clock.bytes_in_slot(a), clock.rate_bps_for_bytes(b));
        }
    }
}
