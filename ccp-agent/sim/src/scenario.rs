// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The VM testbed's scenarios in the simulator (it reads trainemu's scenario files), so that a policy's mean iteration time in the fluid model can be set beside
//! the VM's for the same jobs, placement, topology and start offsets: the simulator's fidelity.
//!
//! A scenario file (`ci/scenarios/*.toml`, read by the `trainemu-scenario` crate, the same code
//! trainemu runs in the VM) becomes:
//! - a star ([`Tree::star`]): one server per host, in the file's order. The link from the switch
//!   to a host has the host's `rate_mbit` (the testbed's tbf on the switch port); the link from a
//!   host to the switch, and the port of a host without `rate_mbit`, are unshaped veths in the
//!   testbed, here [`UNSHAPED_GBPS`]. Delay, loss, queue length and ECN have no counterpart in
//!   the fluid model (no RTT, no packets) and are ignored;
//! - one [`JobSpec`] per job, fixed on its hosts ([`JobSpec::hosts`]: workers in rank order,
//!   then the parameter server), with trainemu's own resolution of the job
//!   ([`trainemu_scenario::config::Scenario::seeded_plans`]): gradient bytes (model bytes ×
//!   scale × time_scale), compute time (× time_scale), iterations, and the start offset under the
//!   seed (arrival = offset);
//! - each job's compute time per iteration ([`ComputeModel`]): by default trainemu's own seeded
//!   draws ([`trainemu_scenario::seeds::ComputeDraws`], the same stream for the same seed, job
//!   index, worker and iteration as in the VM), the job's phase lasting as long as its slowest
//!   worker's draw, since the engine starts a job's flows together. Without these draws the
//!   fluid model has no noise: two identical jobs that start together stay in lock-step under
//!   any symmetric policy (MLTCP's F equal on both), where the VM's jitter lets one pull ahead.
//!
//! Iteration time is measured as trainemu measures it: from a compute start to the end of that
//! iteration's communication (in the engine, from one communication start to the next), after
//! the scenario's warm-up iterations, and only while every job still runs.
//!
//! Fidelity ([`fidelity`]): each job's mean iteration time under a policy against the VM's
//! under a congestion control (`trainemu report`'s summary.json, [`read_vm_summary`]), averaged
//! over the seeds both have, as a relative error.

use std::path::Path;

use serde::{Deserialize, Serialize};

use dnn_profiles::ModelFile;
use mlcc_stats::intervals::{ci95, mean, Interval};
use trainemu_scenario::config::Scenario;
use trainemu_scenario::seeds::{ComputeDraws, ComputeJitter};

use crate::error::SimError;
use crate::policy::{DepMode, Policy};
use crate::sim::{Phase, Sim, SimConfig};
use crate::topo::Tree;
use crate::workload::{JobSpec, Paradigm};

/// Capacity of a link the testbed does not shape (a host's egress veth, and the port toward a
/// host without `rate_mbit`), Gbit/s: far above every shaped port of the scenarios (≤ 1 Gbit/s);
/// the VM's veths carried 4-5 Gbit/s before the guest CPU ran out (measured by the CCP overhead
/// benchmark), so no flow of a scenario is limited there.
pub const UNSHAPED_GBPS: f64 = 10.0;

/// A scenario under one seed, ready to simulate.
#[derive(Clone, Debug)]
pub struct ScenarioRun {
    /// The star of the scenario's hosts.
    pub tree: Tree,
    /// Its jobs, sorted by arrival (start offset), fixed on their hosts.
    pub jobs: Vec<JobSpec>,
    /// The scenario's name of each job of `jobs` (same order).
    pub names: Vec<String>,
    /// Host names, by server index.
    pub hosts: Vec<String>,
    /// Iterations left out of each job's mean at the start (the scenario's `warmup_iterations`).
    pub warmup: u32,
    /// The seed of the start offsets.
    pub seed: u64,
}

/// One job's result in one run.
#[derive(Clone, Debug, Serialize)]
pub struct JobResult {
    /// The job's name in the scenario.
    pub name: String,
    /// Mean iteration time (compute start to communication end), seconds, over the iterations
    /// counted ([`ScenarioRun`]'s rules); NaN when the job completed too few.
    pub mean_iter_s: f64,
    /// The job alone on its hosts: compute time plus its communication time alone, seconds.
    pub ideal_s: f64,
    /// Iterations counted in the mean.
    pub counted: usize,
}

/// How a scenario's compute phases are modelled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ComputeModel {
    /// Iteration k of a job computes for the largest of its workers' k-th draws of trainemu's
    /// seeded compute-time jitter ([`trainemu_scenario::seeds::ComputeDraws`]; the scenario's
    /// `[jitter] compute`, default normal with cv 2 %), rounded down to whole microseconds as
    /// trainemu sleeps. In the VM the workers of a ring send as each finishes, but a ring's
    /// chunks are chained and a PS's broadcast waits for every push, so the iteration's critical
    /// path starts at the slowest worker's end; the engine, which starts a job's flows together,
    /// starts them there.
    #[default]
    Seeded,
    /// Every iteration computes for the plan's mean time (no jitter).
    Mean,
}

/// Iteration k's compute time of the job at `index` of the scenario with `workers` workers,
/// for k in 0..`iterations`, seconds, under `seed` ([`ComputeModel::Seeded`]).
pub fn seeded_compute_s(
    seed: u64,
    index: usize,
    workers: usize,
    iterations: u32,
    mean_ms: f64,
    jitter: &ComputeJitter,
) -> Vec<f64> {
    let mut draws: Vec<ComputeDraws> = (0..workers.max(1))
        .map(|w| ComputeDraws::new(seed, index, w, mean_ms, jitter))
        .collect();
    (0..iterations)
        .map(|_| {
            let slowest_ms = draws
                .iter_mut()
                .map(|d| d.next_ms())
                .fold(0.0_f64, f64::max);
            // trainemu sleeps `(ms * 1000.0) as u64` microseconds.
            (slowest_ms * 1000.0).floor() / 1e6
        })
        .collect()
}

/// Reads a scenario file (or a built-in scenario's name, as trainemu does), validated by
/// trainemu's own rules; every error names the file, field and value.
pub fn load(path: &Path, models: &ModelFile) -> Result<Scenario, SimError> {
    Scenario::load(path, models)
        .map(|(s, _)| s)
        .map_err(|e| SimError::Config(format!("{e:#}")))
}

/// The run of scenario `s` under `seed` ([`ScenarioRun`]), its compute phases modelled as
/// `compute` says.
pub fn build(
    s: &Scenario,
    models: &ModelFile,
    seed: u64,
    compute: ComputeModel,
) -> Result<ScenarioRun, SimError> {
    let hosts: Vec<String> = s.topology.hosts.iter().map(|h| h.name.clone()).collect();
    let index = |name: &str| -> Result<u32, SimError> {
        hosts
            .iter()
            .position(|h| h == name)
            .map(|i| i as u32)
            .ok_or_else(|| SimError::Config(format!("host '{name}' is not in the topology")))
    };
    let unshaped = UNSHAPED_GBPS * 1e9 / 8.0;
    let up = vec![unshaped; hosts.len()];
    let down: Vec<f64> = s
        .topology
        .hosts
        .iter()
        .map(|h| h.rate_mbit.map_or(unshaped, |m| m * 1e6 / 8.0))
        .collect();
    let mut jobs = Vec::with_capacity(s.jobs.len());
    let mut gpus = vec![0u32; hosts.len()];
    for p in s.seeded_plans(models, seed) {
        let mut on: Vec<u32> = p
            .workers
            .iter()
            .map(|w| index(w))
            .collect::<Result<_, _>>()?;
        if p.paradigm == Paradigm::ParameterServer {
            let ps = p.ps.as_deref().ok_or_else(|| {
                SimError::Config(format!("job '{}': paradigm ps without a ps host", p.name))
            })?;
            on.push(index(ps)?);
        }
        let paradigm = p.paradigm;
        for s in &on {
            gpus[*s as usize] += 1;
        }
        jobs.push((
            JobSpec {
                arrival_s: p.start_offset_ms / 1000.0,
                model: p.model.clone(),
                paradigm,
                workers: p.workers.len() as u32,
                iterations: p.iterations,
                gradient_bytes: p.gradient_bytes as f64,
                compute_s: p.compute_ms / 1000.0,
                compute_s_per_iteration: match compute {
                    ComputeModel::Seeded => seeded_compute_s(
                        seed,
                        p.index,
                        p.workers.len(),
                        p.iterations,
                        p.compute_ms,
                        &p.jitter,
                    ),
                    ComputeModel::Mean => Vec::new(),
                },
                hosts: Some(on),
            },
            p.name,
        ));
    }
    jobs.sort_by(|a, b| a.0.arrival_s.total_cmp(&b.0.arrival_s));
    let per_server = gpus.iter().copied().max().unwrap_or(1).max(1);
    let tree = Tree::star(hosts.len() as u32, per_server, &up, &down)?;
    let (jobs, names) = jobs.into_iter().unzip();
    Ok(ScenarioRun {
        tree,
        jobs,
        names,
        hosts,
        warmup: s.warmup_iterations,
        seed,
    })
}

/// Simulates `run` under `policy` and measures each job ([`JobResult`], in `run.jobs` order).
/// `config.record` is turned on (the iteration times need every communication start), and the
/// dependencies are trainemu's ([`DepMode::StartAfter`], unless `config.deps` says otherwise).
pub fn simulate(
    run: &ScenarioRun,
    policy: &mut dyn Policy,
    config: &SimConfig,
) -> Result<Vec<JobResult>, SimError> {
    let mut sim = Sim::new(
        run.tree.clone(),
        SimConfig {
            record: true,
            deps: Some(config.deps.unwrap_or(DepMode::StartAfter)),
            ..config.clone()
        },
        run.jobs.clone(),
    )?;
    sim.run(policy, &mut |_| {});
    // Counted while every job runs: up to the first job's end (trainemu's rule).
    let all_run_until = sim
        .jobs
        .iter()
        .map(|j| {
            if j.phase == Phase::Done {
                j.finish_s
            } else {
                sim.t
            }
        })
        .fold(f64::INFINITY, f64::min);
    Ok(sim
        .jobs
        .iter()
        .zip(&run.names)
        .map(|(j, name)| {
            let (mean_iter_s, counted) =
                mean_iteration_s(&j.comm_starts, run.warmup, all_run_until);
            JobResult {
                name: name.clone(),
                mean_iter_s,
                ideal_s: j.alone_iter_s,
                counted,
            }
        })
        .collect())
}

/// Mean time between consecutive communication starts `starts` (seconds, ascending), skipping
/// the first `warmup` iterations and any iteration that ends after `until`; when that leaves
/// none, every iteration after the warm-up. Returns (mean, iterations counted); NaN when fewer
/// than two starts remain.
pub fn mean_iteration_s(starts: &[f64], warmup: u32, until: f64) -> (f64, usize) {
    let after: &[f64] = starts.get(warmup as usize..).unwrap_or(&[]);
    let in_window: Vec<f64> = after.iter().copied().filter(|t| *t <= until).collect();
    let use_ = if in_window.len() >= 2 {
        &in_window[..]
    } else {
        after
    };
    if use_.len() < 2 {
        return (f64::NAN, 0);
    }
    let n = use_.len() - 1;
    ((use_[n] - use_[0]) / n as f64, n)
}

/// One job's mean iteration time in one VM run (a row of `trainemu report`'s summary.json).
#[derive(Clone, Debug, PartialEq)]
pub struct VmRow {
    /// The run's congestion-control label (e.g. `cubic`, `mltcp+agent+rules=priority`).
    pub cc: String,
    /// The job's name.
    pub job: String,
    /// The seed.
    pub seed: u64,
    /// Mean iteration time, ms.
    pub mean_ms: f64,
}

// The fields of summary.json this comparison reads (written by trainemu's report.rs `Summary`
// and `Row`; everything else in the file is ignored).
#[derive(Deserialize)]
struct SummaryFile {
    per_seed: Vec<SeedFile>,
}
#[derive(Deserialize)]
struct SeedFile {
    seed: Option<u64>,
    rows: Vec<RowFile>,
}
#[derive(Deserialize)]
struct RowFile {
    cc: String,
    job: String,
    mean_ms: Option<f64>,
}

/// Reads the per-seed, per-job mean iteration times of a VM results summary (`summary.json` of
/// a `trainemu report` or `ci/scenarios/run-scenario.sh` results directory); rows without a
/// mean (a job that completed too few iterations) are skipped. Errors name the file.
pub fn read_vm_summary(path: &Path) -> Result<Vec<VmRow>, SimError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SimError::Config(format!("{}: cannot read: {e}", path.display())))?;
    let f: SummaryFile = serde_json::from_str(&text).map_err(|e| {
        SimError::Config(format!(
            "{}: not a trainemu summary.json: {e}",
            path.display()
        ))
    })?;
    Ok(f.per_seed
        .into_iter()
        .flat_map(|s| {
            let seed = s.seed.unwrap_or(1);
            s.rows.into_iter().filter_map(move |r| {
                r.mean_ms.filter(|m| m.is_finite()).map(|mean_ms| VmRow {
                    cc: r.cc,
                    job: r.job,
                    seed,
                    mean_ms,
                })
            })
        })
        .collect())
}

/// One job under one (policy, VM cc) pair: the simulator's and the VM's mean iteration times.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Fidelity {
    /// The simulator's policy.
    pub policy: String,
    /// The VM run's congestion-control label.
    pub cc: String,
    /// The job.
    pub job: String,
    /// Seeds present in both (the means below are over these).
    pub seeds: Vec<u64>,
    /// The simulator's mean iteration time, ms (mean over `seeds`).
    pub sim_ms: f64,
    /// The VM's, ms (mean over `seeds`).
    pub vm_ms: f64,
    /// `sim_ms / vm_ms - 1`, percent (negative: the simulator is faster than the VM).
    pub error_pct: f64,
}

/// Job name of the per-policy row of [`fidelity`].
pub const ALL_JOBS: &str = "all jobs";

/// Pairs the simulator's runs (`sim`: policy, seed, the jobs' results) with the VM's rows for
/// each (policy, cc) of `pairs`, job by job, over the seeds both have. Jobs or pairs without a
/// common seed are left out. After the jobs of a pair with more than one job comes a row for
/// the policy as a whole (job [`ALL_JOBS`]): the mean over its jobs of their mean iteration
/// times, simulator and VM, and the error of those (the fidelity is judged per policy); its
/// seeds are those every job row has.
pub fn fidelity(
    sim: &[(String, u64, Vec<JobResult>)],
    vm: &[VmRow],
    pairs: &[(String, String)],
) -> Vec<Fidelity> {
    let mut out = Vec::new();
    for (policy, cc) in pairs {
        let first = out.len();
        let mut jobs: Vec<&str> = sim
            .iter()
            .filter(|r| &r.0 == policy)
            .flat_map(|r| r.2.iter().map(|j| j.name.as_str()))
            .collect();
        jobs.sort_unstable();
        jobs.dedup();
        for job in jobs {
            let sim_of = |seed: u64| {
                sim.iter()
                    .filter(|r| &r.0 == policy && r.1 == seed)
                    .flat_map(|r| r.2.iter())
                    .find(|j| j.name == job && j.mean_iter_s.is_finite())
                    .map(|j| 1e3 * j.mean_iter_s)
            };
            let mut seeds = Vec::new();
            let (mut s_sum, mut v_sum) = (0.0, 0.0);
            for r in vm.iter().filter(|r| &r.cc == cc && r.job == job) {
                if seeds.contains(&r.seed) {
                    continue;
                }
                if let Some(s) = sim_of(r.seed) {
                    seeds.push(r.seed);
                    s_sum += s;
                    v_sum += r.mean_ms;
                }
            }
            if seeds.is_empty() {
                continue;
            }
            seeds.sort_unstable();
            let n = seeds.len() as f64;
            let (sim_ms, vm_ms) = (s_sum / n, v_sum / n);
            out.push(Fidelity {
                policy: policy.clone(),
                cc: cc.clone(),
                job: job.to_string(),
                seeds,
                sim_ms,
                vm_ms,
                error_pct: 100.0 * (sim_ms / vm_ms - 1.0),
            });
        }
        let rows = &out[first..];
        if rows.len() > 1 {
            let n = rows.len() as f64;
            let sim_ms = rows.iter().map(|r| r.sim_ms).sum::<f64>() / n;
            let vm_ms = rows.iter().map(|r| r.vm_ms).sum::<f64>() / n;
            let mut seeds = rows[0].seeds.clone();
            seeds.retain(|s| rows.iter().all(|r| r.seeds.contains(s)));
            out.push(Fidelity {
                policy: policy.clone(),
                cc: cc.clone(),
                job: ALL_JOBS.to_string(),
                seeds,
                sim_ms,
                vm_ms,
                error_pct: 100.0 * (sim_ms / vm_ms - 1.0),
            });
        }
    }
    out
}

/// A policy's gain over a base policy, in the simulator and in the VM, paired by seed
/// ([`gain`]): does the VM keep the relative gain the fluid model predicts?
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Gain {
    /// The candidate (simulator policy, VM congestion-control label).
    pub pair: (String, String),
    /// The base it is compared with (e.g. `fair` and `cubic`).
    pub base: (String, String),
    /// The seeds where both sides have every job under both the candidate and the base.
    pub seeds: Vec<u64>,
    /// Per seed, the simulator's mean over jobs of their mean iteration time under the
    /// candidate over the same under the base, minus 1 (fraction; negative: shorter
    /// iterations), with its 95 % t interval over the seeds.
    pub sim: Interval,
    /// The same in the VM.
    pub vm: Interval,
    /// Per seed, the VM's gain minus the simulator's (fraction; positive: the VM keeps less of
    /// the gain than the fluid model predicts), with its 95 % t interval: a paired comparison.
    pub vm_minus_sim: Interval,
}

/// The relative gain of `pair` (simulator policy, VM cc) over `base` in the simulator's runs
/// `sim` and the VM's rows `vm`, paired by seed: on each seed where the simulator ran both
/// policies and the VM has every one of the policy's jobs under both ccs, the mean over jobs of
/// their mean iteration times under the candidate over the base's, minus 1, on each side, and
/// the VM's minus the simulator's. The jobs are those the simulator ran under `pair`'s policy.
/// None when no seed qualifies. The fidelity of [`fidelity`] compares absolute iteration
/// times; this compares what a scheduler gains over fair sharing, which the fluid model's
/// missing packet-level costs (slow start, loss recovery, RTTs) move less when they hit both
/// sides alike.
pub fn gain(
    sim: &[(String, u64, Vec<JobResult>)],
    vm: &[VmRow],
    base: &(String, String),
    pair: &(String, String),
) -> Option<Gain> {
    let mut jobs: Vec<&str> = sim
        .iter()
        .filter(|r| r.0 == pair.0)
        .flat_map(|r| r.2.iter().map(|j| j.name.as_str()))
        .collect();
    jobs.sort_unstable();
    jobs.dedup();
    if jobs.is_empty() {
        return None;
    }
    // Mean over `jobs` of their mean iteration times, ms, on one seed; None if one is missing.
    let sim_mean = |policy: &str, seed: u64| -> Option<f64> {
        let run = sim.iter().find(|r| r.0 == policy && r.1 == seed)?;
        let ms: Option<Vec<f64>> = jobs
            .iter()
            .map(|job| {
                run.2
                    .iter()
                    .find(|j| j.name == *job && j.mean_iter_s.is_finite())
                    .map(|j| 1e3 * j.mean_iter_s)
            })
            .collect();
        mean(&ms?)
    };
    let vm_mean = |cc: &str, seed: u64| -> Option<f64> {
        let ms: Option<Vec<f64>> = jobs
            .iter()
            .map(|job| {
                vm.iter()
                    .find(|r| r.cc == cc && r.job == *job && r.seed == seed)
                    .map(|r| r.mean_ms)
            })
            .collect();
        mean(&ms?)
    };
    let mut seeds: Vec<u64> = vm.iter().map(|r| r.seed).collect();
    seeds.sort_unstable();
    seeds.dedup();
    let (mut s, mut v, mut d, mut kept) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for seed in seeds {
        let (Some(sc), Some(sb), Some(vc), Some(vb)) = (
            sim_mean(&pair.0, seed),
            sim_mean(&base.0, seed),
            vm_mean(&pair.1, seed),
            vm_mean(&base.1, seed),
        ) else {
            continue;
        };
        if !(sb > 0.0 && vb > 0.0) {
            continue;
        }
        let (gs, gv) = (sc / sb - 1.0, vc / vb - 1.0);
        kept.push(seed);
        s.push(gs);
        v.push(gv);
        d.push(gv - gs);
    }
    Some(Gain {
        pair: pair.clone(),
        base: base.clone(),
        seeds: kept,
        sim: ci95(&s)?,
        vm: ci95(&v)?,
        vm_minus_sim: ci95(&d)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_RINGS: &str = r#"
name = "t"
iterations = 12
warmup_iterations = 2
ccs = ["cubic"]
[topology]
bottleneck = "h2"
hosts = [ { name = "h1", rate_mbit = 100 }, { name = "h2", rate_mbit = 100 }, { name = "h3" } ]
[[jobs]]
name = "A"
model = "vgg16"
paradigm = "ring"
workers = ["h1", "h2"]
compute_ms = 400
[[jobs]]
name = "B"
model = "vgg16"
paradigm = "ps"
workers = ["h1", "h3"]
ps = "h2"
compute_ms = 400
start_offset_ms = 30
"#;

    fn scenario(t: &str) -> Scenario {
        Scenario::parse(t, "t.toml", &ModelFile::builtin()).unwrap()
    }

    #[test]
    fn jobs_sit_on_their_hosts_with_trainemus_numbers() {
        let m = ModelFile::builtin();
        let s = scenario(TWO_RINGS);
        let r = build(&s, &m, 1, ComputeModel::Mean).unwrap();
        assert_eq!(r.names, ["A", "B"]);
        assert_eq!(r.jobs[0].hosts.as_deref(), Some(&[0, 1][..]));
        // Workers first, then the parameter server.
        assert_eq!(r.jobs[1].hosts.as_deref(), Some(&[0, 2, 1][..]));
        assert_eq!(r.jobs[1].parameter_servers(), 1);
        let plan = &s.plans(&m)[0];
        assert_eq!(r.jobs[0].gradient_bytes, plan.gradient_bytes as f64);
        assert!((r.jobs[0].compute_s - 0.4).abs() < 1e-12);
        assert!((r.jobs[1].arrival_s - 0.03).abs() < 1e-12);
        // Shaped ports toward h1 and h2, the rest unshaped.
        let path = r.tree.path(0, 1);
        assert_eq!(r.tree.capacity[path[1] as usize], 100e6 / 8.0);
        assert_eq!(r.tree.capacity[path[0] as usize], UNSHAPED_GBPS * 1e9 / 8.0);
        let to_h3 = r.tree.path(0, 2);
        assert_eq!(
            r.tree.capacity[to_h3[1] as usize],
            UNSHAPED_GBPS * 1e9 / 8.0
        );
    }

    #[test]
    fn a_job_alone_runs_at_its_ideal() {
        let m = ModelFile::builtin();
        let mut s = scenario(TWO_RINGS);
        s.jobs.truncate(1);
        let r = build(&s, &m, 1, ComputeModel::Mean).unwrap();
        let mut fair = crate::policy::fair::Fair;
        let res = simulate(&r, &mut fair, &SimConfig::default()).unwrap();
        assert_eq!(res.len(), 1);
        let a = &res[0];
        assert_eq!(a.counted, 12 - 2 - 1);
        assert!(
            (a.mean_iter_s - a.ideal_s).abs() < 1e-3 * a.ideal_s,
            "alone: {} vs ideal {}",
            a.mean_iter_s,
            a.ideal_s
        );
        // Ring of 2 over one 100 Mbit/s port each way: 2(W-1)/W G = G bytes at 12.5 MB/s.
        let g = r.jobs[0].gradient_bytes;
        assert!(
            (a.ideal_s - (0.4 + g / 12.5e6)).abs() < 2e-3,
            "{}",
            a.ideal_s
        );
    }

    #[test]
    fn contention_stretches_iterations_under_fair_sharing() {
        let m = ModelFile::builtin();
        let r = build(&scenario(TWO_RINGS), &m, 1, ComputeModel::Mean).unwrap();
        let mut fair = crate::policy::fair::Fair;
        let res = simulate(&r, &mut fair, &SimConfig::default()).unwrap();
        assert!(res
            .iter()
            .all(|j| j.counted > 0 && j.mean_iter_s >= j.ideal_s * 0.999));
    }

    #[test]
    fn seeded_compute_is_trainemus_slowest_worker() {
        let j = ComputeJitter::default();
        let got = seeded_compute_s(3, 1, 2, 6, 400.0, &j);
        let mut w0 = ComputeDraws::new(3, 1, 0, 400.0, &j);
        let mut w1 = ComputeDraws::new(3, 1, 1, 400.0, &j);
        let want: Vec<f64> = (0..6)
            .map(|_| (w0.next_ms().max(w1.next_ms()) * 1000.0).floor() / 1e6)
            .collect();
        assert_eq!(got, want);
        // Jittered: not all equal, and another seed draws other times.
        assert!(got.iter().any(|c| (c - got[0]).abs() > 1e-6));
        assert_ne!(got, seeded_compute_s(4, 1, 2, 6, 400.0, &j));
        // No jitter: the mean, every iteration.
        let none = seeded_compute_s(3, 1, 2, 6, 400.0, &ComputeJitter::NONE);
        assert!(none.iter().all(|c| (c - 0.4).abs() < 1e-12));
    }

    #[test]
    fn built_jobs_carry_the_seeded_compute_times() {
        let m = ModelFile::builtin();
        let s = scenario(TWO_RINGS);
        let seeded = build(&s, &m, 2, ComputeModel::Seeded).unwrap();
        let mean = build(&s, &m, 2, ComputeModel::Mean).unwrap();
        for (k, (a, b)) in seeded.jobs.iter().zip(&mean.jobs).enumerate() {
            assert!(b.compute_s_per_iteration.is_empty());
            assert_eq!(a.compute_s_per_iteration.len(), a.iterations as usize);
            // Index k of the scenario's list is job k here (sorted by arrival, in file order).
            let plan = &s.seeded_plans(&m, 2)[k];
            let want = seeded_compute_s(
                2,
                plan.index,
                plan.workers.len(),
                plan.iterations,
                plan.compute_ms,
                &plan.jitter,
            );
            assert_eq!(a.compute_s_per_iteration, want);
            // The slowest of the workers' draws: above the mean on average.
            assert!(a.compute_s_mean() > a.compute_s);
        }
    }

    /// Two identical rings into one port, starting together (seed 1 is the exact collision):
    /// MLTCP's F is the same on both, so in a fluid model without noise they stay in lock-step
    /// and MLTCP is fair sharing; with the testbed's seeded jitter one pulls ahead and MLTCP
    /// interleaves them (as `mltcp_dctcp` does in the VM's d-collide).
    #[test]
    fn identical_jobs_interleave_under_mltcp_only_with_jitter() {
        const COLLIDE: &str = r#"
name = "t"
iterations = 30
warmup_iterations = 2
ccs = ["cubic"]
[topology]
bottleneck = "h2"
hosts = [ { name = "h1", rate_mbit = 100 }, { name = "h2", rate_mbit = 100 } ]
[[jobs]]
name = "A"
model = "vgg16"
paradigm = "ring"
workers = ["h1", "h2"]
time_scale = 2.5
[[jobs]]
name = "B"
model = "vgg16"
paradigm = "ring"
workers = ["h1", "h2"]
time_scale = 2.5
"#;
        let m = ModelFile::builtin();
        let s = scenario(COLLIDE);
        let mean_over_ideal = |compute: ComputeModel, policy: &str| -> f64 {
            let r = build(&s, &m, 1, compute).unwrap();
            let mut p =
                crate::make_policy(policy, &crate::PolicyConfig::default(), &r.tree.capacity)
                    .unwrap();
            let res = simulate(&r, p.as_mut(), &SimConfig::default()).unwrap();
            res.iter().map(|j| j.mean_iter_s / j.ideal_s).sum::<f64>() / res.len() as f64
        };
        let fair_mean = mean_over_ideal(ComputeModel::Mean, "fair");
        let mltcp_mean = mean_over_ideal(ComputeModel::Mean, "mltcp");
        assert!(
            (mltcp_mean - fair_mean).abs() < 1e-3 * fair_mean,
            "lock-step: mltcp {mltcp_mean} fair {fair_mean}"
        );
        let fair_jit = mean_over_ideal(ComputeModel::Seeded, "fair");
        let mltcp_jit = mean_over_ideal(ComputeModel::Seeded, "mltcp");
        assert!(
            mltcp_jit < 0.85 * fair_jit && mltcp_jit < 1.05,
            "jitter: mltcp {mltcp_jit} fair {fair_jit}"
        );
    }

    #[test]
    fn iteration_means_skip_warmup_and_the_tail() {
        let starts = [0.0, 1.0, 2.0, 3.5, 5.0, 6.5, 9.0];
        assert_eq!(mean_iteration_s(&starts, 2, f64::INFINITY), (7.0 / 4.0, 4));
        assert_eq!(mean_iteration_s(&starts, 2, 6.5), (4.5 / 3.0, 3));
        // Nothing left inside the window: every iteration after the warm-up.
        assert_eq!(mean_iteration_s(&starts, 5, 1.0), (2.5, 1));
        assert!(mean_iteration_s(&starts, 6, 100.0).0.is_nan());
        assert!(mean_iteration_s(&[], 0, 1.0).0.is_nan());
    }

    fn job(name: &str, mean_iter_s: f64) -> JobResult {
        JobResult {
            name: name.into(),
            mean_iter_s,
            ideal_s: 0.5,
            counted: 10,
        }
    }

    #[test]
    fn fidelity_pairs_jobs_over_common_seeds() {
        let sim = vec![
            ("fair".to_string(), 1, vec![job("A", 0.7), job("B", 0.8)]),
            (
                "fair".to_string(),
                2,
                vec![job("A", 0.9), job("B", f64::NAN)],
            ),
            ("fair".to_string(), 3, vec![job("A", 5.0), job("B", 5.0)]),
        ];
        let row = |cc: &str, job: &str, seed, mean_ms| VmRow {
            cc: cc.into(),
            job: job.into(),
            seed,
            mean_ms,
        };
        let vm = vec![
            row("cubic", "A", 1, 1000.0),
            row("cubic", "A", 2, 600.0),
            row("cubic", "B", 1, 1000.0),
            row("cubic", "B", 2, 700.0),
            row("reno", "A", 1, 1.0),
            row("cubic", "A", 4, 1.0),
        ];
        let f = fidelity(&sim, &vm, &[("fair".into(), "cubic".into())]);
        assert_eq!(f.len(), 3);
        // A: seeds 1 and 2 (seed 3 has no VM run, seed 4 no simulation): sim 800, VM 800.
        assert_eq!(f[0].job, "A");
        assert_eq!(f[0].seeds, [1, 2]);
        assert!((f[0].sim_ms - 800.0).abs() < 1e-9 && (f[0].vm_ms - 800.0).abs() < 1e-9);
        assert!(f[0].error_pct.abs() < 1e-9);
        // B: seed 2's simulation has no mean, so seed 1 only: 800 against 1000 ms.
        assert_eq!(f[1].seeds, [1]);
        assert!((f[1].error_pct + 20.0).abs() < 1e-9, "{}", f[1].error_pct);
        // The policy as a whole: the mean of the jobs' means, sim (800 + 800) / 2 against VM
        // (800 + 1000) / 2, over the seeds both jobs have.
        assert_eq!(f[2].job, ALL_JOBS);
        assert_eq!(f[2].seeds, [1]);
        assert!((f[2].sim_ms - 800.0).abs() < 1e-9 && (f[2].vm_ms - 900.0).abs() < 1e-9);
        assert!((f[2].error_pct - 100.0 * (800.0 / 900.0 - 1.0)).abs() < 1e-9);
        // A pair with no VM rows gives nothing.
        assert!(fidelity(&sim, &vm, &[("fair".into(), "bbr".into())]).is_empty());
    }

    #[test]
    fn gain_pairs_seeds_and_compares_vm_with_sim() {
        // Seeds 1-3: the simulator's edf is 10 % below fair on every seed; the VM's agent is
        // 8, 9 and 10 % below cubic (mean over jobs A and B).
        let mut sim = Vec::new();
        for seed in 1..=4 {
            sim.push(("fair".to_string(), seed, vec![job("A", 1.0), job("B", 2.0)]));
            sim.push(("edf".to_string(), seed, vec![job("A", 0.8), job("B", 1.9)]));
        }
        let row = |cc: &str, job: &str, seed, mean_ms| VmRow {
            cc: cc.into(),
            job: job.into(),
            seed,
            mean_ms,
        };
        let mut vm = Vec::new();
        for (seed, g) in [(1, 0.92), (2, 0.91), (3, 0.90)] {
            vm.push(row("cubic", "A", seed, 1000.0));
            vm.push(row("cubic", "B", seed, 3000.0));
            vm.push(row("agent", "A", seed, 1000.0 * g));
            vm.push(row("agent", "B", seed, 3000.0 * g));
        }
        // Seed 4 lacks the agent's job B in the VM, seed 5 has no simulation: both left out.
        vm.push(row("cubic", "A", 4, 1000.0));
        vm.push(row("cubic", "B", 4, 1000.0));
        vm.push(row("agent", "A", 4, 1.0));
        vm.push(row("agent", "A", 5, 1.0));
        vm.push(row("agent", "B", 5, 1.0));
        vm.push(row("cubic", "A", 5, 1.0));
        vm.push(row("cubic", "B", 5, 1.0));
        let base = ("fair".to_string(), "cubic".to_string());
        let pair = ("edf".to_string(), "agent".to_string());
        let g = gain(&sim, &vm, &base, &pair).unwrap();
        assert_eq!(g.seeds, [1, 2, 3]);
        assert!((g.sim.mean + 0.1).abs() < 1e-12, "{g:?}");
        assert!((g.vm.mean + 0.09).abs() < 1e-12, "{g:?}");
        assert!((g.vm_minus_sim.mean - 0.01).abs() < 1e-12, "{g:?}");
        // The VM's spread (8-10 %) is in the interval; the simulator's gains are all equal.
        assert!(g.vm_minus_sim.lo.unwrap() < 0.0 && g.vm_minus_sim.hi.unwrap() > 0.02);
        assert_eq!(g.sim.sd, Some(0.0));
        // A cc the VM never ran, or a policy the simulator never ran: nothing.
        assert_eq!(gain(&sim, &vm, &base, &("edf".into(), "bbr".into())), None);
        assert_eq!(
            gain(&sim, &vm, &base, &("mcs".into(), "agent".into())),
            None
        );
    }

    #[test]
    fn vm_summaries_are_read_and_bad_ones_named() {
        let dir = std::env::temp_dir().join(format!("mlcc-sim-fid-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("summary.json");
        std::fs::write(
            &good,
            r#"{"scenario": "x", "per_seed": [
                {"seed": 2, "other": 1, "rows": [
                    {"cc": "cubic", "job": "A", "mean_ms": 812.5, "p99_ms": 900},
                    {"cc": "cubic", "job": "B", "mean_ms": null}]}]}"#,
        )
        .unwrap();
        let rows = read_vm_summary(&good).unwrap();
        assert_eq!(
            rows,
            [VmRow {
                cc: "cubic".into(),
                job: "A".into(),
                seed: 2,
                mean_ms: 812.5
            }]
        );
        let bad = dir.join("bad.json");
        std::fs::write(&bad, r#"{"rows": []}"#).unwrap();
        let e = read_vm_summary(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.json") && e.contains("per_seed"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
