// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Helpers shared by the integration tests and the `cases` example: 10 Gbit/s server links,
//! one-rack trees, spread placement, 2-worker ring jobs sized in seconds of a server link, and
//! random small clusters' jobs.

#![allow(dead_code)]

use mlcc_sim::sim::{Placement, SimConfig};
use mlcc_sim::topo::{Tree, TreeConfig};
use mlcc_sim::workload::{JobSpec, Paradigm};

/// 10 Gbit/s server links: 1.25e9 bytes/s.
pub const B: f64 = 1.25e9;

/// The engine's defaults with one GPU on each of distinct servers: every flow crosses network
/// links.
pub fn spread() -> SimConfig {
    SimConfig {
        placement: Placement::Spread,
        ..SimConfig::default()
    }
}

/// `servers` servers in one rack under one edge switch (server links 10 Gbit/s).
pub fn small_tree(servers: u32) -> Tree {
    Tree::new(TreeConfig {
        servers,
        servers_per_rack: servers,
        racks_per_edge: 1,
        ..TreeConfig::default()
    })
    .unwrap()
}

/// A 2-worker ring job arriving at `arrival_s`, computing `compute_s` s per iteration, whose
/// flows carry `m_s` seconds of a 10 Gbit/s link each way, for `iterations` iterations.
pub fn ring2(arrival_s: f64, compute_s: f64, m_s: f64, iterations: u32) -> JobSpec {
    JobSpec {
        arrival_s,
        model: "test".into(),
        paradigm: Paradigm::Ring,
        workers: 2,
        iterations,
        // Ring flow = 2(W−1)/W · G = G for W = 2.
        gradient_bytes: m_s * B,
        compute_s,
        compute_s_per_iteration: Vec::new(),
        hosts: None,
    }
}

/// A small cluster for random cases: `servers` servers of 2 GPUs, `per_rack` per rack,
/// `per_edge` racks per edge switch.
pub fn small_cluster(servers: u32, per_rack: u32, per_edge: u32) -> Tree {
    Tree::new(TreeConfig {
        servers,
        servers_per_rack: per_rack,
        racks_per_edge: per_edge,
        gpus_per_server: 2,
        ..TreeConfig::default()
    })
    .unwrap()
}

/// Jobs from drawn tuples (arrival s, compute s, seconds of a 10 Gbit/s link per flow,
/// workers, ring (else PS), iterations), those that fit on `servers` servers of 2 GPUs, sorted
/// by arrival.
pub fn random_jobs(draws: &[(f64, f64, f64, u32, bool, u32)], servers: u32) -> Vec<JobSpec> {
    let mut specs: Vec<JobSpec> = draws
        .iter()
        .map(|&(a, c, m, w, ring, it)| JobSpec {
            paradigm: if ring {
                Paradigm::Ring
            } else {
                Paradigm::ParameterServer
            },
            workers: w,
            ..ring2(a, c, m, it)
        })
        .filter(|j| j.gpus() <= servers)
        .collect();
    specs.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s));
    specs
}
