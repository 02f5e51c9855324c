// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `priority-sedf` (earliest deadline with each job's time alone divided by its smoothed
//! communication slowdown, `mlcc_sched::JobOrder::SlowdownDeadline`) on the testbed's agent
//! scenario: earliest deadline first makes the parameter-server job pay for the ring jobs'
//! gain (slower than under fair sharing); the slowdown-scaled order keeps every job at most as
//! slow as fair sharing leaves it, and still gains on the mean iteration.

use std::path::PathBuf;

use dnn_profiles::ModelFile;
use mlcc_sim::sim::SimConfig;
use mlcc_sim::{make_policy, scenario, PolicyConfig};

/// Mean iteration time (s) per job of ci/scenarios/agent.toml (jobs A, B: rings; C: the PS
/// job), averaged over seeds 1-5 with the testbed's seeded compute jitter, under `policy`.
fn agent_means(policy: &str) -> Vec<f64> {
    let models = ModelFile::builtin();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../ci/scenarios/agent.toml");
    let s = scenario::load(&path, &models).unwrap();
    let seeds = 1..=5u64;
    let names: Vec<&str> = s.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["A", "B", "C"]);
    let mut sum = vec![0.0; names.len()];
    for seed in seeds.clone() {
        let run = scenario::build(&s, &models, seed, scenario::ComputeModel::Seeded).unwrap();
        let mut p = make_policy(policy, &PolicyConfig::default(), &run.tree.capacity).unwrap();
        // mlcc-sim's defaults (`--min-step-ms 1`).
        let cfg = SimConfig {
            min_step_s: 1e-3,
            ..SimConfig::default()
        };
        let jobs = scenario::simulate(&run, p.as_mut(), &cfg).unwrap();
        // (Results come in the run's order, which follows the seeded start offsets.)
        for j in &jobs {
            assert!(
                j.mean_iter_s.is_finite(),
                "{policy}, seed {seed}: job {}",
                j.name
            );
            let k = names.iter().position(|n| *n == j.name).unwrap();
            sum[k] += j.mean_iter_s;
        }
    }
    let n = seeds.count() as f64;
    sum.iter().map(|x| x / n).collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn slowdown_scaled_deadlines_keep_the_ps_job_no_slower_than_fair_sharing() {
    let fair = agent_means("fair");
    let edf = agent_means("priority-edf");
    let sedf = agent_means("priority-sedf");
    // Earliest deadline first: the PS job (C) slower than under fair sharing.
    assert!(
        edf[2] > 1.03 * fair[2],
        "edf C {} fair C {}",
        edf[2],
        fair[2]
    );
    // Slowdown-scaled: no job slower than under fair sharing (1 % for the seeds' noise).
    for k in 0..3 {
        assert!(
            sedf[k] <= 1.01 * fair[k],
            "job {k}: sedf {} fair {}",
            sedf[k],
            fair[k]
        );
    }
    // Still a gain on the mean iteration, less than earliest deadline's.
    assert!(
        mean(&sedf) < 0.95 * mean(&fair),
        "sedf {sedf:?} fair {fair:?}"
    );
    assert!(mean(&edf) <= mean(&sedf), "edf {edf:?} sedf {sedf:?}");
}
