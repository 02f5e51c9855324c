// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Tests of rank compression ([`mlcc_sched::policy::classes`]): the policy's job order onto N
//! traffic classes (Crux, SIGCOMM '24; IEEE 802.1Qaz classes), case by case and as properties
//! over random jobs, links and slot sequences: at most N classes, no inversion among jobs that
//! share a link beyond the ties N forces, the fresh assignment is `priority_levels` capped,
//! classes stay put while a job's neighbourhood keeps its order, the result is deterministic,
//! re-assigning only the components that changed (`assign_part`) gives the classes of assigning all;
//! and through the policy layer, classes without any change to `decide`'s rates.

use mlcc_sched::policy::decide;
use mlcc_sched::*;
use proptest::collection::vec;
use proptest::prelude::*;
use std::collections::HashMap;

fn job(j: u64, rank: u64, links: &[u32]) -> RankedJob {
    RankedJob {
        job: JobKey(j),
        rank,
        links: links.iter().map(|l| LinkId(*l)).collect(),
    }
}

fn classes_of(out: &[JobClass]) -> HashMap<JobKey, u8> {
    out.iter().map(|c| (c.job, c.class)).collect()
}

#[test]
fn a_chain_longer_than_n_shares_the_last_class() {
    // Jobs 0..6 in a chain of shared links (j and j+1 share link j), ranked in job order.
    let jobs: Vec<RankedJob> = (0..6)
        .map(|j| job(j, j, &[j.saturating_sub(1) as u32, j as u32]))
        .collect();
    let mut tc = TrafficClasses::default();
    let out = tc.assign(&jobs).unwrap();
    let cls: Vec<u8> = out.iter().map(|c| c.class).collect();
    assert_eq!(cls, [0, 1, 2, 3, 3, 3]);
    let dscp: Vec<u8> = out.iter().map(|c| c.dscp).collect();
    assert_eq!(dscp, [34, 26, 18, 10, 10, 10], "AF41, AF31, AF21, AF11");
    assert_eq!(tc.class_of(JobKey(4)), Some(3));
    // Jobs on disjoint links reuse class 0.
    let out = tc
        .assign(&[job(7, 5, &[10]), job(8, 1, &[11]), job(9, 9, &[10])])
        .unwrap();
    assert_eq!(
        classes_of(&out),
        HashMap::from([(JobKey(8), 0), (JobKey(7), 0), (JobKey(9), 1)])
    );
    assert_eq!(
        tc.class_of(JobKey(0)),
        None,
        "jobs not listed are forgotten"
    );
}

#[test]
fn a_change_elsewhere_does_not_move_a_job() {
    // Link 0: a(0) > b(1). Link 1: b > c(2). Link 2: d(3) > e(4), apart from the others.
    let slot1 = [
        job(1, 0, &[0]),
        job(2, 1, &[0, 1]),
        job(3, 2, &[1]),
        job(4, 3, &[2]),
        job(5, 4, &[2]),
    ];
    let mut tc = TrafficClasses::new(4).unwrap();
    let c1 = classes_of(&tc.assign(&slot1).unwrap());
    assert_eq!(
        [1, 2, 3, 4, 5].map(|j| c1[&JobKey(j)]),
        [0, 1, 2, 0, 1],
        "levels"
    );
    // d and e swap: a, b, c keep their classes; e takes d's place and d goes below it.
    let mut slot2 = slot1.clone();
    slot2[3].rank = 9;
    let c2 = classes_of(&tc.assign(&slot2).unwrap());
    assert_eq!([1, 2, 3].map(|j| c2[&JobKey(j)]), [0, 1, 2]);
    assert_eq!((c2[&JobKey(5)], c2[&JobKey(4)]), (0, 1));
    // New numeric ranks in the same order: nothing moves.
    let slot3: Vec<RankedJob> = slot2
        .iter()
        .map(|j| RankedJob {
            rank: j.rank * 10 + 3,
            ..j.clone()
        })
        .collect();
    assert_eq!(classes_of(&tc.assign(&slot3).unwrap()), c2);
}

#[test]
fn hysteresis_keeps_a_class_that_is_still_below_its_higher_neighbours() {
    // Link 1: b(0) > a(1); link 0: a > z(2). Classes 0, 1, 2.
    let slot1 = [job(1, 1, &[0, 1]), job(2, 0, &[1]), job(3, 2, &[0])];
    let mut tc = TrafficClasses::new(4).unwrap();
    let c = classes_of(&tc.assign(&slot1).unwrap());
    assert_eq!([2, 1, 3].map(|j| c[&JobKey(j)]), [0, 1, 2]);
    // b leaves: a's neighbourhood changed, it rises to 0; z's ([a, z]) did not, and its class
    // 2 is still below a's: it stays (a fresh assignment would give it 1).
    let slot2 = [job(1, 1, &[0, 1]), job(3, 2, &[0])];
    let c = classes_of(&tc.assign(&slot2).unwrap());
    assert_eq!((c[&JobKey(1)], c[&JobKey(3)]), (0, 2));
    let fresh = classes_of(&TrafficClasses::new(4).unwrap().assign(&slot2).unwrap());
    assert_eq!(fresh[&JobKey(3)], 1);
    // A newcomer between them changes z's neighbourhood: recomputed, right below it.
    let slot3 = [job(1, 1, &[0, 1]), job(3, 2, &[0]), job(4, 1, &[0])];
    let c = classes_of(&tc.assign(&slot3).unwrap());
    assert_eq!([1, 4, 3].map(|j| c[&JobKey(j)]), [0, 1, 2]);
}

#[test]
fn configuration_is_checked() {
    assert!(TrafficClasses::new(0).is_err());
    assert!(TrafficClasses::new(9).is_err());
    assert_eq!(TrafficClasses::new(8).unwrap().classes(), 8);
    assert_eq!(TrafficClasses::default().classes(), DEFAULT_CLASSES);
    let tc = TrafficClasses::with_dscp(vec![46, 0]).unwrap();
    assert_eq!(
        (tc.dscp(0), tc.dscp(1), tc.dscp(2)),
        (Some(46), Some(0), None)
    );
    assert!(TrafficClasses::with_dscp(vec![]).is_err());
    assert!(TrafficClasses::with_dscp(vec![64]).is_err());
    assert!(TrafficClasses::with_dscp(vec![10, 10]).is_err());
    assert!(TrafficClasses::with_dscp(vec![1; 9]).is_err());
    let mut tc = TrafficClasses::default();
    tc.assign(&[job(1, 0, &[0])]).unwrap();
    assert!(tc.assign(&[job(1, 0, &[0]), job(1, 1, &[1])]).is_err());
    assert_eq!(
        tc.class_of(JobKey(1)),
        Some(0),
        "a refused call keeps the state"
    );
    tc.reset();
    assert_eq!(tc.class_of(JobKey(1)), None);
}

// ---------------------------------------------------------------------------------------------
// Properties.

/// Up to 12 jobs with small (tying) ranks and 1..=3 of 6 links each.
fn arb_jobs() -> impl Strategy<Value = Vec<RankedJob>> {
    vec((0u64..8, vec(0u32..6, 1..=3)), 1..12).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(j, (rank, links))| job(j as u64, rank, &links))
            .collect()
    })
}

/// The same jobs in another slot: some ranks redrawn, some jobs gone or moved.
fn arb_next(jobs: Vec<RankedJob>) -> impl Strategy<Value = Vec<RankedJob>> {
    let n = jobs.len();
    vec((0u8..6, 0u64..8, vec(0u32..6, 1..=3)), n).prop_map(move |edits| {
        jobs.iter()
            .zip(edits)
            .filter_map(|(j, (what, rank, links))| match what {
                0 => None,
                1 => Some(RankedJob { rank, ..j.clone() }),
                2 => Some(job(j.job.0, j.rank, &links)),
                _ => Some(j.clone()),
            })
            .collect()
    })
}

fn shares(a: &RankedJob, b: &RankedJob) -> bool {
    a.links.iter().any(|l| b.links.contains(l))
}

fn above(a: &RankedJob, b: &RankedJob) -> bool {
    (a.rank, a.job) < (b.rank, b.job)
}

/// Rank order of the jobs sharing a link with `j`, and `j`.
fn neighbourhood(jobs: &[RankedJob], j: &RankedJob) -> Vec<JobKey> {
    let mut v: Vec<&RankedJob> = jobs
        .iter()
        .filter(|o| o.job == j.job || shares(o, j))
        .collect();
    v.sort_by_key(|o| (o.rank, o.job));
    v.iter().map(|o| o.job).collect()
}

/// At most N classes with their DSCPs, and no inversion beyond the ties N forces.
fn check(tc: &TrafficClasses, jobs: &[RankedJob], out: &[JobClass]) -> Result<(), TestCaseError> {
    let n = tc.classes();
    prop_assert_eq!(out.len(), jobs.len());
    let c = classes_of(out);
    for o in out {
        prop_assert!(o.class < n);
        prop_assert_eq!(Some(o.dscp), tc.dscp(o.class));
    }
    for a in jobs {
        for b in jobs {
            if a.job != b.job && shares(a, b) && above(a, b) {
                let (ca, cb) = (c[&a.job], c[&b.job]);
                prop_assert!(
                    ca < cb || (ca == cb && cb == n - 1),
                    "{:?} (class {}) above {:?} (class {})",
                    a.job,
                    ca,
                    b.job,
                    cb
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A fresh assignment is `priority_levels` capped at the last class, and obeys the bounds.
    #[test]
    fn fresh_is_levels_capped(jobs in arb_jobs(), n in 1u8..=8) {
        let mut tc = TrafficClasses::new(n).unwrap();
        let out = tc.assign(&jobs).unwrap();
        check(&tc, &jobs, &out)?;
        let c = classes_of(&out);
        for (j, level) in priority_levels(&jobs).unwrap() {
            prop_assert_eq!(u32::from(c[&j]), level.min(u32::from(n) - 1));
        }
    }

    /// Over a sequence of slots: the bounds hold in every slot; a job whose neighbourhood keeps
    /// its order and whose higher neighbours keep their classes keeps its class; the same slot
    /// again changes nothing; the input's order does not matter.
    #[test]
    fn stable_and_never_inverted_over_slots(
        (s1, s2) in arb_jobs().prop_flat_map(|j| (Just(j.clone()), arb_next(j))),
        s3 in arb_jobs(),
        n in 1u8..=8,
    ) {
        let mut tc = TrafficClasses::new(n).unwrap();
        let mut prev: Option<(Vec<RankedJob>, HashMap<JobKey, u8>)> = None;
        for slot in [&s1, &s2, &s3, &s1] {
            let out = tc.assign(slot).unwrap();
            check(&tc, slot, &out)?;
            let c = classes_of(&out);
            if let Some((pjobs, pc)) = &prev {
                for j in slot.iter() {
                    let Some(pj) = pjobs.iter().find(|p| p.job == j.job) else { continue };
                    let nb = neighbourhood(slot, j);
                    let higher_kept = slot
                        .iter()
                        .filter(|h| h.job != j.job && shares(h, j) && above(h, j))
                        .all(|h| pc.get(&h.job) == Some(&c[&h.job]));
                    if nb == neighbourhood(pjobs, pj) && higher_kept {
                        prop_assert_eq!(c[&j.job], pc[&j.job], "{:?} moved", j.job);
                    }
                }
            }
            // Idempotent, and the order of the input does not matter.
            let mut again = tc.clone();
            let mut rev = slot.clone();
            rev.reverse();
            prop_assert_eq!(classes_of(&again.assign(&rev).unwrap()), c.clone());
            prop_assert_eq!(&again, &tc);
            prev = Some((slot.clone(), c));
        }
    }

    /// Deterministic: two compressors fed the same slots agree; and new numeric ranks in the
    /// same order move nothing.
    #[test]
    fn deterministic_and_blind_to_rank_values(s1 in arb_jobs(), s2 in arb_jobs(), n in 1u8..=8) {
        let (mut a, mut b) = (TrafficClasses::new(n).unwrap(), TrafficClasses::new(n).unwrap());
        for s in [&s1, &s2] {
            prop_assert_eq!(a.assign(s).unwrap(), b.assign(s).unwrap());
        }
        // Ranks made distinct in (rank, job) order, then spread: the order is the same.
        let mut sorted = s2.clone();
        sorted.sort_by_key(|j| (j.rank, j.job));
        let spread: Vec<RankedJob> = sorted
            .iter()
            .enumerate()
            .map(|(i, j)| RankedJob { rank: 1000 + 7 * i as u64, ..j.clone() })
            .collect();
        let before = classes_of(&a.assign(&s2).unwrap());
        prop_assert_eq!(classes_of(&a.assign(&spread).unwrap()), before);
    }
}

/// The link-connected components of `jobs` (jobs sharing a link, directly or through others),
/// each in input order.
fn components(jobs: &[RankedJob]) -> Vec<Vec<RankedJob>> {
    let mut comp: Vec<usize> = (0..jobs.len()).collect();
    // Merge until stable (few jobs): every job takes the least component among its sharers.
    loop {
        let mut moved = false;
        for a in 0..jobs.len() {
            for b in 0..jobs.len() {
                if shares(&jobs[a], &jobs[b]) && comp[b] > comp[a] {
                    comp[b] = comp[a];
                    moved = true;
                }
            }
        }
        if !moved {
            break;
        }
    }
    let mut ids: Vec<usize> = comp.clone();
    ids.sort_unstable();
    ids.dedup();
    ids.iter()
        .map(|&c| {
            jobs.iter()
                .zip(&comp)
                .filter(|(_, &k)| k == c)
                .map(|(j, _)| j.clone())
                .collect()
        })
        .collect()
}

/// A component's jobs by rank order, with their links: equal for a component unchanged between
/// slots (the same jobs, links and order), whatever the rank values.
fn shape(comp: &[RankedJob]) -> Vec<(JobKey, Vec<LinkId>)> {
    let mut v: Vec<&RankedJob> = comp.iter().collect();
    v.sort_by_key(|j| (j.rank, j.job));
    v.iter()
        .map(|j| {
            let mut l = j.links.clone();
            l.sort_unstable();
            l.dedup();
            (j.job, l)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Re-assigning only the components that changed since the last slot (`assign_part`, the
    /// jobs that left forgotten) gives every job the class one `assign` of all the slot's jobs
    /// gives, slot after slot.
    #[test]
    fn assigning_changed_components_equals_assigning_all(
        (s1, s2) in arb_jobs().prop_flat_map(|j| (Just(j.clone()), arb_next(j))),
        s3 in arb_jobs(),
        n in 1u8..=8,
    ) {
        let mut all = TrafficClasses::new(n).unwrap();
        let mut part = TrafficClasses::new(n).unwrap();
        let mut prev: Vec<RankedJob> = Vec::new();
        for slot in [&s1, &s2, &s1, &s3, &s3] {
            let want = classes_of(&all.assign(slot).unwrap());
            for p in &prev {
                if !slot.iter().any(|j| j.job == p.job) {
                    part.forget(p.job);
                }
            }
            let before: Vec<_> = components(&prev).iter().map(|c| shape(c)).collect();
            for c in components(slot) {
                if !before.contains(&shape(&c)) {
                    part.assign_part(&c).unwrap();
                }
            }
            for j in slot.iter() {
                prop_assert_eq!(part.class_of(j.job), Some(want[&j.job]), "{:?}", j.job);
            }
            prev = slot.clone();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Through the policy layer.

const UNIT_SLOT_US: u64 = 8_000_000;

fn flow(id: u64, job: u64, path: &[u32], left: u64) -> FlowState {
    FlowState {
        flow: FlowId(id),
        job: JobKey(job),
        role: FlowRole::Other,
        path: path.iter().map(|l| LinkId(*l)).collect(),
        progress: FlowProgress {
            sent_bytes: 0,
            remaining_bytes: left,
        },
        iteration_bytes: left,
        decide: true,
    }
}

fn table() -> LinkLoadTable {
    let clock = SlotClock::new(UNIT_SLOT_US, 4).unwrap();
    let mut t = LinkLoadTable::new(clock, 0);
    for l in 0..3 {
        t.add_link(LinkId(l), 1_000).unwrap();
    }
    t
}

#[test]
fn decide_with_classes_adds_classes_and_changes_no_rate() {
    // Jobs 1, 2, 3 on link 0 (3 also on link 1), job 4 alone on link 2; priority by job rank
    // 3 > 1 > 2 > 4.
    let snap = Snapshot {
        slot: 0,
        flows: vec![
            flow(10, 1, &[0], 3_000),
            flow(11, 1, &[0], 1_000),
            flow(20, 2, &[0], 2_000),
            flow(30, 3, &[0, 1], 500),
            flow(40, 4, &[2], 4_000),
        ],
        min_rate_bps: 0,
    };
    let options = PolicyOptions {
        rules: Rules::Priority,
        work_conserving: true,
        job_rank: vec![
            (JobKey(3), 0),
            (JobKey(1), 1),
            (JobKey(2), 2),
            (JobKey(4), 3),
        ],
        ..PolicyOptions::default()
    };
    let plain = decide(&mut table(), &snap, &options).unwrap();
    let mut tc = TrafficClasses::default();
    let with = decide_with_classes(&mut table(), &snap, &options, &mut tc).unwrap();
    // Everything but the classes is decide's.
    let mut stripped = with.clone();
    for g in &mut stripped.groups {
        g.classes.clear();
    }
    assert_eq!(stripped, plain);
    let got: Vec<Option<u8>> = [10, 11, 20, 30, 40].map(|f| with.class(FlowId(f))).to_vec();
    assert_eq!(got, [Some(1), Some(1), Some(2), Some(0), Some(0)]);
    assert_eq!(plain.class(FlowId(10)), None, "decide alone sets no class");
    for (f, r) in [10, 11, 20, 30, 40].map(|f| (f, plain.rate_bps(FlowId(f)))) {
        assert_eq!(with.rate_bps(FlowId(f)), r, "flow {f}");
    }
    // decide's serialised form has no classes field; with classes it round-trips.
    let json = serde_json::to_string(&plain).unwrap();
    assert!(!json.contains("classes"), "{json}");
    let back: Decisions = serde_json::from_str(&serde_json::to_string(&with).unwrap()).unwrap();
    assert_eq!(back, with);
    let order = job_order(&with, &snap);
    let ranked: Vec<(u64, u64)> = order.iter().map(|j| (j.job.0, j.rank)).collect();
    assert_eq!(ranked, [(3, 0), (1, 1), (2, 2), (4, 3)]);
}
