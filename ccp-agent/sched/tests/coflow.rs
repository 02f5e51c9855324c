// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Property and case tests of the coflow planner ([`mlcc_sched::coflow`]): a group plan never
//! plans above any link's available bandwidth in any slot, places every byte when the group's
//! capacity over the horizon carries them, finishes every member in the same slot, conserves
//! each member's bytes, equals Alg. 1 / Alg. 2 / the reduction of "Dynamic Flow Scheduling for
//! DNN Training Workloads in Data Centers" (Sec. IV-B, IV-C) for a group of one, and matches a
//! brute-force optimum on tiny cases; and the two cases that motivated it: two ring jobs on two
//! shared links (no starvation), two pushes into one PS link (equal shares, same finish).

use mlcc_sched::greedy::{byte_price_fx, plan_cost_fx};
use mlcc_sched::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::subsequence;

/// 8 s slots: bytes per slot equal bit/s.
const UNIT_SLOT_US: u64 = 8_000_000;

fn clock_strategy() -> impl Strategy<Value = SlotClock> {
    (
        prop_oneof![
            Just(1_000u64),
            Just(60_000),
            Just(UNIT_SLOT_US),
            1u64..200_000
        ],
        1usize..=8,
    )
        .prop_map(|(us, k)| SlotClock::new(us, k).unwrap())
}

fn dependency_strategy() -> impl Strategy<Value = Dependency> {
    prop_oneof![
        Just(Dependency::Independent),
        (0u64..2_000_000).prop_map(|f| Dependency::Ring {
            predecessor_bytes: f
        }),
        (0u64..2_000_000).prop_map(|f| Dependency::PsBroadcast {
            aggregation_min_bytes: f
        }),
        (0u64..2_000_000).prop_map(|f| Dependency::PsAggregation {
            broadcast_max_bytes: f
        }),
    ]
}

/// A clock, views of `1..=4` links and `1..=4` members whose paths are subsets of them.
fn group_strategy(
    max_avail: u64,
    max_rem: u64,
) -> impl Strategy<Value = (SlotClock, Vec<LinkView>, Vec<FlowRequest>)> {
    (clock_strategy(), 1usize..=4, 1usize..=4).prop_flat_map(move |(clock, nl, nm)| {
        let k = clock.horizon();
        let links = (0..nl)
            .map(|l| {
                (vec(0..=max_avail, k), vec(0..=max_avail, k)).prop_map(
                    move |(load_bps, available_bps)| LinkView {
                        link: LinkId(l as u32),
                        load_bps,
                        available_bps,
                    },
                )
            })
            .collect::<Vec<_>>();
        let all: Vec<u32> = (0..nl as u32).collect();
        let members = (0..nm)
            .map(|f| {
                (
                    subsequence(all.clone(), 1..=nl),
                    0..=max_rem,
                    0u64..1_000_000,
                    dependency_strategy(),
                )
                    .prop_map(move |(path, rem, sent, dependency)| FlowRequest {
                        flow: FlowId(f as u64),
                        path: path.into_iter().map(LinkId).collect(),
                        progress: FlowProgress {
                            sent_bytes: sent,
                            remaining_bytes: rem,
                        },
                        dependency,
                    })
            })
            .collect::<Vec<_>>();
        (Just(clock), links, members)
    })
}

/// The documented per-link budget of the group in one slot.
fn budget(clock: &SlotClock, avail: u64, n: u64) -> u64 {
    let s = n.saturating_sub(1);
    clock
        .bytes_in_slot(avail.saturating_sub(s))
        .saturating_sub(s)
}

/// The documented capacity (group bytes) and price per group byte of every slot.
fn caps_and_prices(
    clock: &SlotClock,
    links: &[LinkView],
    members: &[FlowRequest],
) -> (Vec<u64>, Vec<u128>) {
    let g: u128 = members
        .iter()
        .map(|m| u128::from(m.progress.remaining_bytes))
        .sum();
    let k = clock.horizon();
    let mut caps = vec![u64::MAX; k];
    let mut prices = vec![0u128; k];
    for t in 0..k {
        let (mut load, mut avail_eq) = (0u64, u64::MAX);
        for v in links {
            let on: Vec<&FlowRequest> = members
                .iter()
                .filter(|m| m.progress.remaining_bytes > 0 && m.path.contains(&v.link))
                .collect();
            if on.is_empty() {
                continue;
            }
            let d: u128 = on
                .iter()
                .map(|m| u128::from(m.progress.remaining_bytes))
                .sum();
            let a = v.available_bps[t];
            load = load.saturating_add(v.load_bps[t]);
            avail_eq = avail_eq.min(u64::try_from(u128::from(a) * g / d).unwrap_or(u64::MAX));
            let b = budget(clock, a, on.len() as u64);
            caps[t] = caps[t].min(u64::try_from(u128::from(b) * g / d).unwrap_or(u64::MAX));
        }
        caps[t] = caps[t].min(u64::try_from(g).unwrap_or(u64::MAX));
        prices[t] = byte_price_fx(clock, load, avail_eq);
    }
    (caps, prices)
}

/// Per link and slot: the members' rates within the available bandwidth and their bytes within
/// what it carries; every member's bytes conserved; returns true when complete.
fn check_group(
    clock: &SlotClock,
    links: &[LinkView],
    members: &[FlowRequest],
    g: &GroupDecision,
) -> bool {
    let k = clock.horizon();
    assert_eq!(g.decisions.len(), members.len());
    for v in links {
        for t in 0..k {
            let on = members
                .iter()
                .zip(&g.decisions)
                .filter(|(m, _)| m.path.contains(&v.link));
            let (rate, bytes) = on.fold((0u128, 0u128), |(r, b), (_, d)| {
                (
                    r + u128::from(d.plan.rates_bps[t]),
                    b + u128::from(d.plan.bytes[t]),
                )
            });
            assert!(
                rate <= u128::from(v.available_bps[t]),
                "link {:?} slot {t}: {rate} > {:?}",
                v.link,
                v.available_bps
            );
            assert!(bytes <= u128::from(clock.bytes_in_slot(v.available_bps[t])));
        }
    }
    let mut complete = true;
    for (m, d) in members.iter().zip(&g.decisions) {
        assert_eq!(d.plan.bytes.len(), k);
        assert_eq!(
            d.plan.scheduled_bytes() + d.plan.unscheduled_bytes,
            m.progress.remaining_bytes
        );
        assert_eq!(d.accumulated_bytes, m.progress.sent_bytes + d.plan.bytes[0]);
        for (b, r) in d.plan.bytes.iter().zip(&d.plan.rates_bps) {
            assert_eq!(*r, clock.rate_bps_for_bytes(*b));
        }
        complete &= d.plan.is_complete();
    }
    complete
}

/// A member's own path as one flow sees it.
fn path_view(start_slot: u64, k: usize, links: &[LinkView], path: &[LinkId]) -> PathView {
    let mut v = PathView {
        start_slot,
        load_bps: vec![0; k],
        available_bps: vec![u64::MAX; k],
    };
    for l in links.iter().filter(|l| path.contains(&l.link)) {
        for i in 0..k {
            v.load_bps[i] = v.load_bps[i].saturating_add(l.load_bps[i]);
            v.available_bps[i] = v.available_bps[i].min(l.available_bps[i]);
        }
    }
    v
}

proptest! {
    #[test]
    fn group_plan_respects_links_places_all_bytes_and_finishes_together(
        (clock, links, members) in group_strategy(100_000_000_000, 10_000_000_000),
    ) {
        let g = group_schedule(&clock, 42, &members, &links).unwrap();
        let complete = check_group(&clock, &links, &members, &g);
        let (caps, _) = caps_and_prices(&clock, &links, &members);
        let total: u128 = members.iter().map(|m| u128::from(m.progress.remaining_bytes)).sum();
        let cap_total: u128 = caps.iter().map(|c| u128::from(*c)).sum();
        prop_assert_eq!(complete, cap_total >= total, "caps {:?}", caps);
        if complete {
            let last: Vec<Option<usize>> = g
                .decisions
                .iter()
                .zip(&members)
                .filter(|(_, m)| m.progress.remaining_bytes > 0)
                .map(|(d, _)| d.plan.last_busy_offset())
                .collect();
            prop_assert!(last.windows(2).all(|w| w[0] == w[1]), "{:?}", last);
        }
        // Alg. 2 and the receiver's cut stay within the links too.
        let d = decide_group(&clock, 42, &members, &links).unwrap();
        check_group(&clock, &links, &members, &d);
        let excess: Vec<u64> = d.decisions.iter().map(|x| x.plan.bytes[0] / 2).collect();
        let r = reduce_group(&clock, 42, &members, &links, &d, &excess).unwrap();
        check_group(&clock, &links, &members, &r);
        // MADD shares of the current slot never sum above a link's available bandwidth.
        for v in &links {
            let s: u128 = members.iter().zip(&d.share_now_bps).filter(|(m, _)| m.path.contains(&v.link)).map(|(_, s)| u128::from(*s)).sum();
            prop_assert!(s <= u128::from(v.available_bps[0]));
        }
    }

    #[test]
    fn group_of_one_is_alg1_alg2_and_the_reduction(
        (clock, links, members) in group_strategy(100_000_000_000, 10_000_000_000),
        excess in 0u64..10_000_000_000,
    ) {
        let m = &members[..1];
        let k = clock.horizon();
        // Only the member's own links, as a caller passes them.
        let own: Vec<LinkView> = links.iter().filter(|l| m[0].path.contains(&l.link)).cloned().collect();
        let view = path_view(7, k, &own, &m[0].path);
        let g = group_schedule(&clock, 7, m, &own).unwrap();
        prop_assert_eq!(&g.decisions[0].plan, &initial_schedule(&clock, m[0].progress.remaining_bytes, &view).unwrap());
        prop_assert_eq!(&g.views[0], &view);
        prop_assert_eq!(g.share_now_bps[0], view.available_bps[0]);
        let d = decide_group(&clock, 7, m, &own).unwrap();
        let one = decide(&clock, &m[0].progress, &m[0].dependency, &view).unwrap();
        prop_assert_eq!(&d.decisions[0], &one);
        let r = reduce_group(&clock, 7, m, &own, &d, &[excess]).unwrap();
        prop_assert_eq!(&r.decisions[0], &reduce(&clock, &one, &m[0].progress, excess, &view).unwrap());
    }

    #[test]
    fn group_cost_is_the_least_over_all_schedules_on_tiny_cases(
        (clock, links, members) in group_strategy(4, 4).prop_filter("unit slots, K <= 4", |(c, _, _)| c.horizon() <= 4)
            .prop_map(|(_, l, m)| (SlotClock::new(UNIT_SLOT_US, l[0].load_bps.len()).unwrap(), l, m)),
    ) {
        let g = group_schedule(&clock, 0, &members, &links).unwrap();
        if !g.decisions.iter().all(|d| d.plan.is_complete()) {
            return Ok(());
        }
        let total: u64 = members.iter().map(|m| m.progress.remaining_bytes).sum();
        let (caps, prices) = caps_and_prices(&clock, &links, &members);
        // Every way of placing the group's bytes under the slots' capacities.
        let k = caps.len();
        let mut best = u128::MAX;
        let mut x = vec![0u64; k];
        fn walk(t: usize, left: u64, x: &mut Vec<u64>, caps: &[u64], prices: &[u128], best: &mut u128) {
            if t == caps.len() {
                if left == 0 {
                    *best = (*best).min(plan_cost_fx(x, prices));
                }
                return;
            }
            for b in 0..=left.min(caps[t]) {
                x[t] = b;
                walk(t + 1, left - b, x, caps, prices, best);
            }
            x[t] = 0;
        }
        walk(0, total, &mut x, &caps, &prices, &mut best);
        prop_assert_eq!(g.cost_fx, best);
    }
}

fn ring_flow(f: u64, link: u32, rem: u64) -> FlowRequest {
    FlowRequest {
        flow: FlowId(f),
        path: vec![LinkId(link)],
        progress: FlowProgress {
            sent_bytes: 0,
            remaining_bytes: rem,
        },
        dependency: Dependency::Independent,
    }
}

/// The VM testbed's starvation: ring jobs A (h1 ↔ h2) and B (h3 ↔ h2) share h2's switch port
/// (link 1, carrying A.0 and B.0 into h2) and h2's NIC (link 2, carrying A.1 and B.1 out of h2).
#[test]
fn two_ring_groups_on_two_shared_links_take_turns_instead_of_starving() {
    let clock = SlotClock::new(UNIT_SLOT_US, 4).unwrap();
    let table = || {
        let mut t = LinkLoadTable::new(clock, 0);
        t.add_link(LinkId(1), 10).unwrap();
        t.add_link(LinkId(2), 10).unwrap();
        t
    };
    let a = [ring_flow(10, 1, 10), ring_flow(11, 2, 10)];
    let b = [ring_flow(20, 1, 10), ring_flow(21, 2, 10)];

    // Per flow, in the order that starved the testbed: each job gets one link now, and its
    // partner waits for a later slot.
    let mut t = table();
    let per_flow: Vec<Decision> = [&a[0], &b[1], &a[1], &b[0]]
        .iter()
        .map(|r| plan_flow(&mut t, r).unwrap())
        .collect();
    assert_eq!(per_flow[0].plan.bytes[..2], [10, 0]);
    assert_eq!(per_flow[2].plan.bytes[..2], [0, 10]);

    // Jointly, in SEBF order (equal keys: by group key, A first): A takes both links and
    // completes in slot 0, B is planned after it into slot 1.
    let mut t = table();
    let (ka, kb) = (
        group_bottleneck_us(&t, &a).unwrap(),
        group_bottleneck_us(&t, &b).unwrap(),
    );
    assert_eq!(ka, kb);
    let ga = plan_group(&mut t, &a).unwrap();
    let gb = plan_group(&mut t, &b).unwrap();
    for d in &ga.decisions {
        assert_eq!(d.plan.bytes, vec![10, 0, 0, 0]);
    }
    for d in &gb.decisions {
        assert_eq!(d.plan.bytes, vec![0, 10, 0, 0]);
    }
    // No member is planned at 0 in a slot in which its partner holds a link.
    for g in [&ga, &gb] {
        for s in 0..4 {
            let busy: Vec<bool> = g.decisions.iter().map(|d| d.plan.bytes[s] > 0).collect();
            assert!(
                busy.iter().all(|b| *b) || busy.iter().all(|b| !*b),
                "slot {s}: {busy:?}"
            );
        }
    }
    assert_eq!(t.link_load_bps(LinkId(1)).unwrap(), vec![10, 10, 0, 0]);
    // Re-planning A replaces its entries.
    plan_group(&mut t, &a).unwrap();
    assert_eq!(t.link_load_bps(LinkId(2)).unwrap(), vec![10, 10, 0, 0]);
}

/// Two pushes into one PS: equal shares of the PS's downlink, the same completion slot.
#[test]
fn two_pushes_into_one_ps_link_get_equal_shares() {
    let clock = SlotClock::new(60_000, 10).unwrap();
    let mut t = LinkLoadTable::new(clock, 5);
    for (l, c) in [
        (1, 10_000_000_000u64),
        (2, 10_000_000_000),
        (9, 10_000_000_000),
    ] {
        t.add_link(LinkId(l), c).unwrap();
    }
    let push = |f, up| FlowRequest {
        flow: FlowId(f),
        path: vec![LinkId(up), LinkId(9)],
        progress: FlowProgress {
            sent_bytes: 0,
            remaining_bytes: 125_000_000,
        },
        dependency: Dependency::Independent,
    };
    let g = plan_group(&mut t, &[push(1, 1), push(2, 2)]).unwrap();
    let (x, y) = (&g.decisions[0].plan, &g.decisions[1].plan);
    assert_eq!(x.bytes, y.bytes);
    assert!(x.is_complete() && y.is_complete());
    assert_eq!(x.last_busy_offset(), y.last_busy_offset());
    // 250 MB at 10 Gbit/s: 200 ms, four 60 ms slots.
    assert_eq!(x.last_busy_offset(), Some(3));
    let load = t.link_load_bps(LinkId(9)).unwrap();
    assert!(load.iter().all(|l| *l <= 10_000_000_000), "{load:?}");
    assert!(
        g.decisions[0].rate_bps >= 4_999_000_000,
        "{}",
        g.decisions[0].rate_bps
    );
}
