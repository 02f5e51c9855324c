// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Small deterministic cases for comparing the policies by hand: one, two or three ring jobs
//! (2 workers each) on the same two servers, so their flows share the two server links.
//! `cargo run --release -p mlcc-sim --example cases`: prints each job's JCT per policy.
use mlcc_sim::sim::{Placement, Sim, SimConfig};
use mlcc_sim::topo::{Tree, TreeConfig};
use mlcc_sim::workload::{JobSpec, Paradigm};
use mlcc_sim::{make_policy, PolicyConfig, POLICIES};

/// `ring2`: the tests' helpers.
#[path = "../tests/common/mod.rs"]
mod common;
use common::ring2;

fn ring(arrival_s: f64, workers: u32, compute_s: f64, m_s: f64, iterations: u32) -> JobSpec {
    JobSpec {
        workers,
        ..ring2(arrival_s, compute_s, m_s, iterations)
    }
}

fn ps(arrival_s: f64, workers: u32, compute_s: f64, m_s: f64, iterations: u32) -> JobSpec {
    JobSpec {
        paradigm: Paradigm::ParameterServer,
        workers,
        ..ring2(arrival_s, compute_s, m_s, iterations)
    }
}

fn main() {
    let tree = Tree::new(TreeConfig {
        servers: 10,
        servers_per_rack: 10,
        racks_per_edge: 1,
        ..TreeConfig::default()
    })
    .unwrap();
    let cases: Vec<(&str, Vec<JobSpec>)> = vec![
        ("1 job C=0.1 M=0.1", vec![ring2(0.0, 0.1, 0.1, 50)]),
        (
            "2 jobs C=0.1 M=0.1 same start",
            vec![ring2(0.0, 0.1, 0.1, 50), ring2(0.0, 0.1, 0.1, 50)],
        ),
        (
            "2 jobs C=0.1 M=0.1 start +10ms",
            vec![ring2(0.0, 0.1, 0.1, 50), ring2(0.01, 0.1, 0.1, 50)],
        ),
        (
            "2 jobs C=0.3 M=0.1 start +4ms",
            vec![ring2(0.0, 0.3, 0.1, 50), ring2(0.004, 0.3, 0.1, 50)],
        ),
        (
            "2 jobs C=0.14 M=0.5 (comm heavy)",
            vec![ring2(0.0, 0.14, 0.5, 30), ring2(0.0, 0.14, 0.5, 30)],
        ),
        (
            "3 jobs C=0.2 M=0.1",
            vec![
                ring2(0.0, 0.2, 0.1, 50),
                ring2(0.0, 0.2, 0.1, 50),
                ring2(0.0, 0.2, 0.1, 50),
            ],
        ),
        (
            "1 job C=0.1 M=0.035 (comm < slot)",
            vec![ring2(0.0, 0.1, 0.035, 50)],
        ),
        (
            "1 PS job, 2 workers, C=0.1 M=0.1",
            vec![ps(0.0, 2, 0.1, 0.1, 50)],
        ),
        (
            "1 ring job, 4 workers, C=0.1 M=0.1",
            vec![ring(0.0, 4, 0.1, 0.1, 50)],
        ),
        (
            "1 PS job, 8 workers (2 PS), C=0.1 M=0.1",
            vec![ps(0.0, 8, 0.1, 0.1, 50)],
        ),
        (
            "4 ring jobs (4 workers) arriving 0.37 s apart, C=0.2 M=0.1",
            (0..4)
                .map(|k| ring(0.37 * k as f64, 4, 0.2, 0.1, 50))
                .collect(),
        ),
        (
            "2 PS jobs (2 workers) +10ms, C=0.1 M=0.1",
            vec![ps(0.0, 2, 0.1, 0.1, 50), ps(0.01, 2, 0.1, 0.1, 50)],
        ),
    ];
    let cfg = PolicyConfig::default();
    for (name, jobs) in cases {
        println!("{name}");
        for p in POLICIES {
            let mut pol = make_policy(p, &cfg, &tree.capacity).unwrap();
            let mut sim = Sim::new(
                tree.clone(),
                SimConfig {
                    placement: Placement::Spread,
                    ..SimConfig::default()
                },
                jobs.clone(),
            )
            .unwrap();
            sim.run(pol.as_mut(), &mut |_| {});
            let jct: Vec<String> = sim
                .jobs
                .iter()
                .map(|j| format!("{:.3}", j.finish_s - j.spec.arrival_s))
                .collect();
            let avg = sim
                .jobs
                .iter()
                .map(|j| j.finish_s - j.spec.arrival_s)
                .sum::<f64>()
                / sim.jobs.len() as f64;
            let per_it: Vec<String> = sim
                .jobs
                .iter()
                .map(|j| {
                    format!(
                        "{:.4}",
                        (j.finish_s - j.start_s) / f64::from(j.spec.iterations)
                    )
                })
                .collect();
            println!(
                "  {p:<14} avg {avg:8.3}  JCT {}  s/iter {}",
                jct.join(" "),
                per_it.join(" ")
            );
        }
    }
}
