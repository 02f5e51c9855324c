// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Tests with known answers: two jobs on one link (fair sharing and perfect
//! interleaving in closed form, MLTCP's start-gap trajectory against the Shift(Δ) recurrence),
//! Cassini's score of two half-duty square waves, the Affinity-graph BFS and loop refusal, and
//! conservation of bytes on random small clusters; the policy layer's job-level strict priority
//! interleaving two collided jobs and running the shortest remaining job first.

use mlcc_sched::cassini::{
    affinity_has_loop, affinity_time_shifts, best_shifts, compatibility_score, AffinityEdge, JobId,
};
use mlcc_sched::LinkId;
use mlcc_sim::policy::cassini::{circle, Cassini};
use mlcc_sim::policy::fair::Fair;
use mlcc_sim::policy::mltcp::{FUpdate, Mltcp};
use mlcc_sim::policy::Policy;
use mlcc_sim::sim::{Phase, Placement, Sim, SimConfig};
use mlcc_sim::{make_policy, PolicyConfig, POLICIES};
use mltcp_math::params::Params;
use proptest::prelude::*;

mod common;
use common::{random_jobs, ring2, small_cluster, small_tree, spread, B};

/// Two 2-worker ring jobs on servers 0 and 1 of a 2-server tree, B starting `d0` s after A
/// (compute `c` s, communication alone `m` s, `n` iterations); `record`: keep per-iteration
/// communication starts.
fn two_rings(c: f64, m: f64, n: u32, d0: f64, record: bool) -> Sim {
    let cfg = SimConfig { record, ..spread() };
    Sim::new(
        small_tree(2),
        cfg,
        vec![ring2(0.0, c, m, n), ring2(d0, c, m, n)],
    )
    .unwrap()
}

fn run(sim: &mut Sim, p: &mut dyn Policy) {
    sim.run(p, &mut |_| {});
    assert!(sim.all_done(), "not all jobs finished by t = {}", sim.t);
}

#[test]
fn two_jobs_fair_sharing_closed_form() {
    // Both jobs on servers 0 and 1, starting together: every iteration C + 2M.
    let (c, m, n) = (0.1, 0.1, 20);
    let mut sim = two_rings(c, m, n, 0.0, false);
    run(&mut sim, &mut Fair);
    for j in &sim.jobs {
        assert!(
            (j.alone_comm_s - m).abs() < 1e-9,
            "alone comm {}",
            j.alone_comm_s
        );
        let want = f64::from(n) * (c + 2.0 * m);
        assert!(
            (j.finish_s - want).abs() < 1e-6 * want,
            "JCT {} vs {want}",
            j.finish_s
        );
    }
}

#[test]
fn two_jobs_cassini_interleave_perfectly() {
    // Half-duty jobs (C = M): Cassini's shift makes every iteration after the first C + M.
    let (c, m, n) = (0.1, 0.1, 30);
    let mut sim = two_rings(c, m, n, 0.0, true);
    let mut cassini = Cassini::new(Box::new(Fair), 1, 100);
    run(&mut sim, &mut cassini);
    for j in &sim.jobs {
        let s = &j.comm_starts;
        // After the shift is applied (first iteration collides), iterations are C + M apart.
        for w in s[3..].windows(2) {
            assert!(
                (w[1] - w[0] - (c + m)).abs() < 1e-6,
                "iteration {} s, want {}",
                w[1] - w[0],
                c + m
            );
        }
    }
    let (a, b) = (&sim.jobs[0].comm_starts, &sim.jobs[1].comm_starts);
    let gap = (b[n as usize - 1] - a[n as usize - 1]).abs();
    assert!((gap - m).abs() < 1e-6, "final gap {gap}, want {m}");
    assert_eq!(cassini.stats.shifts_applied, 2);
}

/// One iteration of the HotNets '24 recurrence: the gap after, from the gap before (REFERENCE §2).
fn shift(p: &Params, at: f64, d: f64) -> f64 {
    let (s, i) = (
        f64::from(p.slope_fx) / 1024.0,
        f64::from(p.intercept_fx) / 1024.0,
    );
    s * d * (at - d) / (at * i + d * s)
}

#[test]
fn mltcp_start_gap_follows_the_shift_recurrence() {
    // Job B starts Δ0 after job A; F is evaluated when contention starts (the recurrence's own
    // assumption). C = 0.3 s > M = 0.1 s, so the gap grows to M and stays (interleaved).
    let (c, m, n, d0) = (0.3, 0.1, 12, 0.004);
    let mut sim = two_rings(c, m, n, d0, true);
    let mut mltcp = Mltcp {
        update: FUpdate::Events,
        ..Mltcp::default()
    };
    run(&mut sim, &mut mltcp);
    let (a, b) = (&sim.jobs[0].comm_starts, &sim.jobs[1].comm_starts);
    let p = Params::DEFAULT;
    let mut pred = d0;
    let mut compared = 0;
    for k in 0..n as usize {
        let gap = b[k] - a[k];
        assert!(
            (gap - pred).abs() <= 0.10 * pred + 1e-9,
            "iteration {k}: gap {gap} vs recurrence {pred}"
        );
        compared += 1;
        pred = (pred + shift(&p, m, pred)).min(m);
    }
    assert_eq!(compared, n as usize);
    // Converged: interleaved, each iteration C + M.
    assert!((b[n as usize - 1] - a[n as usize - 1] - m).abs() < 1e-3);
    // Under fair sharing the same start gap never opens: the jobs stay collided.
    let mut fair = two_rings(c, m, n, d0, true);
    run(&mut fair, &mut Fair);
    let (a, b) = (&fair.jobs[0].comm_starts, &fair.jobs[1].comm_starts);
    assert!((b[n as usize - 1] - a[n as usize - 1]) < 2.0 * d0);
}

#[test]
fn cassini_score_is_one_for_two_half_duty_square_waves() {
    // Profiles as the simulator builds them: 200 ms iterations, 100 ms at full link rate.
    let cap_bps = 10_000_000_000u64;
    let j = circle(0.2, 0.1, 0.1, 0.1 * B);
    assert_eq!(j.iteration_ms, 200);
    let jobs = vec![j.clone(), j];
    let s = compatibility_score(&jobs, &[0, 100], cap_bps, 200).unwrap();
    assert!((s - 1.0).abs() < 1e-9, "score {s}");
    let s0 = compatibility_score(&jobs, &[0, 0], cap_bps, 200).unwrap();
    assert!((s0 - 0.5).abs() < 1e-9, "score {s0}");
    let r = best_shifts(&jobs, cap_bps, 200, 10).unwrap();
    assert_eq!(r.shifts_ms, vec![0, 100]);
}

#[test]
fn affinity_bfs_unique_shifts_and_loop_refusal() {
    // Loop-free chain j0 -l0- j1 -l1- j2.
    let e = |j, l, s| AffinityEdge {
        job: JobId(j),
        link: LinkId(l),
        shift_ms: s,
    };
    let chain = [e(0, 0, 0), e(1, 0, 40), e(1, 1, 10), e(2, 1, 70)];
    let iters = [(JobId(0), 200), (JobId(1), 200), (JobId(2), 200)]
        .into_iter()
        .collect();
    assert!(!affinity_has_loop(&chain));
    let s = affinity_time_shifts(&chain, &iters).unwrap();
    assert_eq!(
        s.shifts_ms.values().copied().collect::<Vec<_>>(),
        vec![0, 40, 100]
    );
    assert!(s.conflicts.is_empty());
    let mut looped = chain.to_vec();
    looped.push(e(2, 2, 0));
    looped.push(e(0, 2, 30));
    assert!(affinity_has_loop(&looped));

    // In the simulator: job 0 on servers 0, 1; job 1's first candidate (servers 0, 1 again)
    // shares two wires with it, a loop, so Cassini takes the other candidate (servers 2, 3).
    let mut sim = Sim::new(
        small_tree(4),
        spread(),
        vec![ring2(0.0, 0.1, 0.1, 3), ring2(0.0, 0.1, 0.1, 3)],
    )
    .unwrap();
    let mut cassini = Cassini::new(Box::new(Fair), 2, 60);
    sim.start(&mut cassini);
    assert_eq!(sim.jobs[0].servers, vec![0, 1]);
    assert_eq!(sim.jobs[1].servers, vec![2, 3]);
    assert_eq!(cassini.stats.first_candidate_looped, 1);
    assert_eq!(cassini.stats.resolved_by_other_candidate, 1);
}

fn check_conservation(sim: &Sim) {
    let want: f64 = sim
        .jobs
        .iter()
        .map(|j| {
            f64::from(j.spec.iterations)
                * j.flows
                    .iter()
                    .map(|f| f.size * f.path.len() as f64)
                    .sum::<f64>()
        })
        .sum();
    let got: f64 = sim.link_bytes.iter().sum();
    assert!(
        (got - want).abs() <= 1e-6 * want.max(1.0),
        "link bytes {got} vs {want}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Random small clusters and jobs: under every policy and either placement all jobs
    /// finish, bytes in = bytes delivered, and no link ever carries more than its capacity.
    #[test]
    fn conservation_on_random_small_clusters(
        servers in 4u32..12,
        per_rack in 2u32..4,
        per_edge in 1u32..3,
        jobs in prop::collection::vec((0.0f64..2.0, 0.0f64..0.2, 0.01f64..0.3, 2u32..4, any::<bool>(), 1u32..4), 1..5),
    ) {
        let tree = small_cluster(servers, per_rack, per_edge);
        let specs = random_jobs(&jobs, servers);
        prop_assume!(!specs.is_empty());
        let cfg = PolicyConfig { slot_us: 20_000, ..PolicyConfig::default() };
        for (name, placement) in POLICIES.iter().flat_map(|n| [(n, Placement::Spread), (n, Placement::Packed)]) {
            let mut p = make_policy(name, &cfg, &tree.capacity).unwrap();
            let mut sim = Sim::new(tree.clone(), SimConfig { placement, ..SimConfig::default() }, specs.clone()).unwrap();
            sim.start(p.as_mut());
            let mut steps = 0u64;
            while !sim.all_done() && steps < 2_000_000 {
                prop_assert!(sim.step(p.as_mut()), "{name}: stalled at t = {}", sim.t);
                let mut load = vec![0.0; tree.links()];
                for job in sim.jobs.iter().filter(|j| j.phase == Phase::Communicating) {
                    for fl in job.flows.iter().filter(|f| !f.done) {
                        for &l in &fl.path { load[l as usize] += fl.rate; }
                    }
                }
                for (l, x) in load.iter().enumerate() {
                    prop_assert!(*x <= tree.capacity[l] * (1.0 + 1e-9), "{name}: link {l} at {x} > {}", tree.capacity[l]);
                }
                steps += 1;
            }
            prop_assert!(sim.jobs.iter().all(|j| j.phase == Phase::Done), "{name}: unfinished");
            check_conservation(&sim);
        }
    }
}

#[test]
fn mlcc_alone_is_not_stretched_by_its_slots() {
    // One job alone: every policy gives N·(C + M). Before mlcc paced a flow's last slot at
    // bytes/slot, its last bytes were stretched to the slot's end (0.24 s per 0.2 s iteration
    // here, 0.18 s per 0.135 s with M = 35 ms < one 60 ms slot).
    // Both policies plan through the policy layer (`mlcc_sched::policy::decide`).
    for ((c, m), name) in [(0.1, 0.1), (0.1, 0.035)]
        .into_iter()
        .flat_map(|cm| [(cm, "mlcc"), (cm, "mlcc-il")])
    {
        let n = 20;
        let tree = small_tree(2);
        let mut p = make_policy(name, &PolicyConfig::default(), &tree.capacity).unwrap();
        let mut sim = Sim::new(tree, spread(), vec![ring2(0.0, c, m, n)]).unwrap();
        run(&mut sim, p.as_mut());
        let want = f64::from(n) * (c + m);
        let got = sim.jobs[0].finish_s;
        assert!(
            (got - want).abs() < 1e-3 * want,
            "{name}: C = {c}, M = {m}: JCT {got}, want {want}"
        );
    }
}

#[test]
fn mlcc_and_mltcp_interleave_two_offset_jobs() {
    // Two identical half-duty jobs on one link, the second 10 ms later: fair sharing keeps them
    // collided (each iteration about C + 2M at first); MLTCP and mlcc interleave them, within
    // 3 % of the perfect N·(C + M).
    let (c, m, n) = (0.1, 0.1, 50);
    let tree = small_tree(2);
    let jobs = vec![ring2(0.0, c, m, n), ring2(0.01, c, m, n)];
    let perfect = f64::from(n) * (c + m);
    let mut fair = Sim::new(tree.clone(), spread(), jobs.clone()).unwrap();
    run(&mut fair, &mut Fair);
    let fair_avg = fair
        .jobs
        .iter()
        .map(|j| j.finish_s - j.spec.arrival_s)
        .sum::<f64>()
        / 2.0;
    assert!(fair_avg > 1.3 * perfect, "fair {fair_avg}");
    for name in ["mltcp", "mlcc"] {
        let mut p = make_policy(name, &PolicyConfig::default(), &tree.capacity).unwrap();
        let mut sim = Sim::new(tree.clone(), spread(), jobs.clone()).unwrap();
        run(&mut sim, p.as_mut());
        let avg = sim
            .jobs
            .iter()
            .map(|j| j.finish_s - j.spec.arrival_s)
            .sum::<f64>()
            / 2.0;
        assert!(
            avg < 1.03 * perfect && avg <= fair_avg,
            "{name}: average JCT {avg}, perfect {perfect}, fair {fair_avg}"
        );
    }
}

#[test]
fn priority_interleaves_two_collided_jobs_through_the_layer() {
    // Two identical half-duty jobs on one link starting together (fair sharing: C + 2M per
    // iteration for both). Under the policy layer's job-level strict priority (`priority`:
    // `mlcc_sched::rank_jobs`, `priority_levels`, `priority_weight`), job 0 (rank 0, ties by
    // job) runs as if alone, N·(C + M) (within 0.1 %); job 1 waits one communication phase in its first
    // iteration, which shifts its later phases into job 0's compute phases: N·(C + M) + M,
    // and the phases stay M apart.
    let (c, m, n) = (0.1, 0.1, 30);
    let tree = small_tree(2);
    let mut p = make_policy("priority", &PolicyConfig::default(), &tree.capacity).unwrap();
    let mut sim = two_rings(c, m, n, 0.0, true);
    run(&mut sim, p.as_mut());
    let perfect = f64::from(n) * (c + m);
    let (a, b) = (&sim.jobs[0], &sim.jobs[1]);
    assert!(
        // Near-strict: at weight ratio 1000 the lower rank keeps 1/1001 of the link.
        (a.finish_s - perfect).abs() < 1e-3 * perfect,
        "rank 0: JCT {}, want {perfect}",
        a.finish_s
    );
    assert!(
        (b.finish_s - (perfect + m)).abs() < 1e-2 * perfect,
        "rank 1: JCT {}, want {}",
        b.finish_s,
        perfect + m
    );
    for (x, y) in a.comm_starts.iter().zip(&b.comm_starts).skip(1) {
        assert!((y - x - m).abs() < 2e-3, "gap {}, want {m}", y - x);
    }
}

#[test]
fn priority_runs_the_shortest_remaining_job_first() {
    // Job 1 has a quarter of job 0's iterations: shortest remaining time first gives it the
    // link, so it runs as if alone, and job 0 interleaves behind it.
    let (c, m) = (0.1, 0.1);
    let tree = small_tree(2);
    let jobs = vec![ring2(0.0, c, m, 40), ring2(0.0, c, m, 10)];
    let mut p = make_policy("priority", &PolicyConfig::default(), &tree.capacity).unwrap();
    let mut sim = Sim::new(tree.clone(), spread(), jobs.clone()).unwrap();
    run(&mut sim, p.as_mut());
    let short = 10.0 * (c + m);
    assert!(
        // Near-strict: at weight ratio 1000 the lower rank keeps 1/1001 of the link.
        (sim.jobs[1].finish_s - short).abs() < 1e-3 * short,
        "short job: JCT {}, want {short}",
        sim.jobs[1].finish_s
    );
    let mut fair = Sim::new(tree, spread(), jobs).unwrap();
    run(&mut fair, &mut Fair);
    let avg = |s: &Sim| s.jobs.iter().map(|j| j.finish_s).sum::<f64>() / 2.0;
    assert!(
        avg(&sim) < 0.9 * avg(&fair),
        "priority {} fair {}",
        avg(&sim),
        avg(&fair)
    );
}
