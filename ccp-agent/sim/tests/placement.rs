// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Tests of the packed placement (the default, `sim` module header): a small job lands on one
//! server and sends nothing over the network, a job too large for one server spans the fewest
//! servers, jobs fragment across servers once the cluster is partly full, flows inside a server
//! use only its internal links, and a whole-cluster policy's partial re-allocation (only the
//! jobs whose decision moved) gives the same run as re-solving everything.

use mlcc_sim::policy::fair::Fair;
use mlcc_sim::sim::{Phase, Placement, Sim, SimConfig};
use mlcc_sim::topo::{Tier, Tree, TreeConfig};
use mlcc_sim::workload::{JobSpec, Paradigm};
use mlcc_sim::{make_policy, PolicyConfig};

/// `servers` servers of 8 GPUs, `per_rack` per rack, 2 racks per edge switch.
fn tree(servers: u32, per_rack: u32) -> Tree {
    Tree::new(TreeConfig {
        servers,
        servers_per_rack: per_rack,
        racks_per_edge: 2,
        ..TreeConfig::default()
    })
    .unwrap()
}

fn job(paradigm: Paradigm, workers: u32, iterations: u32) -> JobSpec {
    JobSpec {
        arrival_s: 0.0,
        model: "t".into(),
        paradigm,
        workers,
        iterations,
        gradient_bytes: 1e8,
        compute_s: 0.05,
        compute_s_per_iteration: Vec::new(),
        hosts: None,
    }
}

fn distinct(v: &[u32]) -> Vec<u32> {
    let mut d = v.to_vec();
    d.sort_unstable();
    d.dedup();
    d
}

#[test]
fn a_small_job_stays_inside_one_server() {
    let t = tree(4, 2);
    let iterations = 7;
    let mut sim = Sim::new(
        t.clone(),
        SimConfig::default(),
        vec![job(Paradigm::Ring, 2, iterations)],
    )
    .unwrap();
    sim.run(&mut Fair, &mut |_| {});
    let j = &sim.jobs[0];
    assert_eq!(j.phase, Phase::Done);
    assert_eq!(j.iterations_done, iterations, "iterations counted exactly");
    assert_eq!(j.servers, vec![0, 0]);
    assert!(!j.network);
    for f in &j.flows {
        assert_eq!(f.path, t.path(0, 0));
        assert!(f.path.iter().all(|l| t.tier[*l as usize] == Tier::Intra));
    }
    // Nothing crossed the network; the internal links carried every byte.
    for (l, b) in sim.link_bytes.iter().enumerate() {
        let want = if t.path(0, 0).contains(&(l as u32)) {
            f64::from(iterations) * j.flows.iter().map(|f| f.size).sum::<f64>()
        } else {
            0.0
        };
        assert!(
            (b - want).abs() <= 1e-6 * want.max(1.0),
            "link {l}: {b} bytes, want {want}"
        );
    }
    // Alone on the 100 Gbit/s fabric: each ring flow (G bytes for W = 2) in G / 12.5 GB/s,
    // both flows sharing the same two internal links.
    let comm = 2.0 * 1e8 / (100e9 / 8.0);
    assert!(
        (j.alone_comm_s - comm).abs() < 1e-6,
        "alone comm {} s, want {comm}",
        j.alone_comm_s
    );
    let want = f64::from(iterations) * (0.05 + comm);
    assert!(
        (j.finish_s - want).abs() < 1e-3,
        "JCT {} s, want {want}",
        j.finish_s
    );
}

#[test]
fn a_large_job_spans_the_fewest_servers_of_one_rack() {
    // 12 workers: 8 + 4 GPUs, two servers of rack 0 (not three, not across racks).
    let t = tree(6, 3);
    let mut sim = Sim::new(
        t.clone(),
        SimConfig::default(),
        vec![job(Paradigm::Ring, 12, 1000)],
    )
    .unwrap();
    sim.start(&mut Fair);
    let j = &sim.jobs[0];
    assert_eq!(distinct(&j.servers), vec![0, 1]);
    assert_eq!(j.servers.iter().filter(|s| **s == 0).count(), 8);
    assert!(j.network);
    // Ring neighbours share a server except at the two boundaries.
    let crossing = j.flows.iter().filter(|f| f.src != f.dst).count();
    assert_eq!(crossing, 2);
    for f in &j.flows {
        let network = f.path.iter().any(|l| t.tier[*l as usize] != Tier::Intra);
        assert_eq!(
            network,
            f.src != f.dst,
            "flow {} -> {}: path {:?}",
            f.src,
            f.dst,
            f.path
        );
    }
}

#[test]
fn jobs_fragment_when_the_cluster_fills() {
    // Four servers; four 6-GPU jobs take one server each (best fit: the first of equals),
    // leaving 2 free GPUs per server. A 2-worker job then fits one server (best fit); a
    // 4-worker job no longer fits any server and fragments over two (2 + 2, same rack); a
    // 9-GPU PS job (8 workers, 2 PS = 10 GPUs) waits for GPUs.
    let t = tree(4, 2);
    let mut specs: Vec<JobSpec> = (0..4).map(|_| job(Paradigm::Ring, 6, 1000)).collect();
    specs.push(job(Paradigm::Ring, 2, 1000));
    specs.push(job(Paradigm::Ring, 4, 1000));
    specs.push(job(Paradigm::ParameterServer, 8, 1000));
    let mut sim = Sim::new(t, SimConfig::default(), specs).unwrap();
    sim.start(&mut Fair);
    for k in 0..4 {
        assert_eq!(sim.jobs[k].servers, vec![k as u32; 6], "job {k}");
    }
    assert_eq!(sim.jobs[4].servers, vec![0, 0]);
    assert_eq!(distinct(&sim.jobs[5].servers), vec![2, 3]);
    assert!(sim.jobs[5].network);
    assert!(
        sim.jobs[6].servers.is_empty(),
        "queued: {:?}",
        sim.jobs[6].servers
    );
    assert_eq!(sim.jobs[6].phase, Phase::Waiting);
}

#[test]
fn spread_keeps_one_gpu_per_server() {
    let t = tree(4, 2);
    let cfg = SimConfig {
        placement: Placement::Spread,
        ..SimConfig::default()
    };
    let mut sim = Sim::new(
        t,
        cfg,
        vec![
            job(Paradigm::Ring, 2, 10),
            job(Paradigm::ParameterServer, 2, 10),
        ],
    )
    .unwrap();
    sim.start(&mut Fair);
    assert_eq!(sim.jobs[0].servers, vec![0, 1]);
    assert_eq!(sim.jobs[1].servers, vec![0, 1, 2]);
    assert!(sim
        .jobs
        .iter()
        .all(|j| j.flows.iter().all(|f| f.src != f.dst)));
    assert!("packed".parse::<Placement>().is_ok());
    assert!("tight"
        .parse::<Placement>()
        .unwrap_err()
        .to_string()
        .contains("placement = 'tight'"));
}

#[test]
fn cassini_candidates_are_packed_options() {
    // Two free servers of 8: a 2-GPU job's candidates are each server alone.
    let t = tree(2, 2);
    let sim = Sim::new(t, SimConfig::default(), vec![job(Paradigm::Ring, 2, 10)]).unwrap();
    assert_eq!(sim.candidates(0, 3), vec![vec![0, 0], vec![1, 1]]);
}

#[test]
fn partial_reallocation_equals_the_full_solve() {
    // A mix of single-server and multi-server jobs on a small tree: MCS and mlcc (whole-cluster
    // policies, re-allocating only what their decision moved) against the reference that
    // re-solves every flow at every event.
    let t = tree(4, 2);
    let mut specs = Vec::new();
    for (k, (p, w)) in [
        (Paradigm::Ring, 6),
        (Paradigm::ParameterServer, 4),
        (Paradigm::Ring, 4),
        (Paradigm::Ring, 8),
        (Paradigm::ParameterServer, 8),
        (Paradigm::Ring, 2),
    ]
    .into_iter()
    .enumerate()
    {
        let mut s = job(p, w, 15);
        s.arrival_s = 0.07 * k as f64;
        s.compute_s = 0.03 + 0.01 * k as f64;
        specs.push(s);
    }
    for name in ["mcs", "mlcc", "cassini"] {
        let mut jct = Vec::new();
        for full_alloc in [false, true] {
            // Exact policies: the whole-cluster decision at every change, whose partial
            // re-allocation this compares with the full one.
            let cfg = PolicyConfig {
                slot_us: 20_000,
                exact: true,
                ..PolicyConfig::default()
            };
            let mut p = make_policy(name, &cfg, &t.capacity).unwrap();
            let mut sim = Sim::new(
                t.clone(),
                SimConfig {
                    full_alloc,
                    ..SimConfig::default()
                },
                specs.clone(),
            )
            .unwrap();
            sim.run(p.as_mut(), &mut |_| {});
            assert!(sim.all_done(), "{name}");
            assert!(sim.jobs.iter().any(|j| j.network) && sim.jobs.iter().any(|j| !j.network));
            jct.push(
                sim.jobs
                    .iter()
                    .map(|j| j.finish_s - j.spec.arrival_s)
                    .collect::<Vec<f64>>(),
            );
        }
        for (a, b) in jct[0].iter().zip(&jct[1]) {
            assert!(
                (a - b).abs() <= 1e-6 * b,
                "{name}: JCT {a} (partial) vs {b} (full)"
            );
        }
    }
}
