// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Seeded randomness of a run: per-iteration compute-time jitter and per-seed start offsets.
//!
//! A run is a function of (scenario, congestion control, seed): every random choice of trainemu
//! is drawn here, from a ChaCha8 stream ([`chacha20::ChaCha8Rng`], the same values on every
//! platform and rand version) whose 256-bit key is made of the seed and whose 64-bit stream id
//! is made of (purpose, job index, worker index) ([`stream_id`]). So:
//! - the same seed gives the same draws under every congestion control (paired comparisons);
//! - a job's draws depend only on (seed, its index in the scenario's job list, worker): adding a
//!   job at the end of the list, or running a job alone (the solo runs), does not change them;
//! - iteration k of a worker uses that worker's k-th draw, in the solo run as in the run of all
//!   jobs together.
//!
//! Start offsets ([`seeded_offset_ms`]): the first job (index 0) never gets a seeded offset; each
//! other job gets its scenario `start_offset_ms` plus a seeded extra offset uniform in
//! `[0, start_ms)`, except under seed 1, where every extra offset is exactly 0, so seed 1 is
//! always the exact collision of the scenario's fixed offsets (all jobs at once when they are 0).

use chacha20::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, LogNormal, Normal};
use serde::{Deserialize, Serialize};

/// The seed whose start offsets are the scenario's fixed ones (no seeded extra offset).
pub const COLLISION_SEED: u64 = 1;

/// Default coefficient of variation of the compute time: **our estimate, not a measured value**.
///
/// Reasoning: the per-iteration work of a data-parallel job on dedicated GPUs is the same every
/// iteration (same model, same batch size), and iteration times are described as highly regular
/// and predictable: Gandiva ("Gandiva: Introspective Cluster Scheduling for Deep Learning",
/// OSDI 2018, abstract and Sec. 3) builds its scheduler on this "intra-job predictability", but
/// gives no coefficient of variation. We found no published per-iteration CV for GPU compute
/// phases (searches for one gave only epoch-level timing studies), so we take 2 %: small enough
/// not to break the periodicity MLTCP relies on, large enough that the seeds perturb the phases
/// the way data loading, kernel scheduling and clock changes do on real GPUs. Scenarios can set
/// their own (`[jitter] compute = { dist = "normal", cv = ... }`) or turn it off
/// (`{ dist = "none" }`).
pub const DEFAULT_CV: f64 = 0.02;

/// Largest accepted coefficient of variation (a normal draw would be negative too often above).
pub const MAX_CV: f64 = 0.5;

/// Distribution of a compute phase's length around the job's compute time C.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JitterDist {
    /// Always exactly C.
    None,
    /// Normal, mean C, standard deviation cv·C, clamped at 0.
    Normal,
    /// Log-normal with mean C and coefficient of variation cv (right-skewed: occasional slow
    /// iterations, as with stragglers).
    Lognormal,
}

/// Which compute phases share a draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JitterPer {
    /// Each worker draws its own compute time every iteration (independent GPUs; the job's
    /// iteration waits for the slowest worker).
    Worker,
    /// All workers of a job use the same draw every iteration.
    Job,
}

/// Compute-time jitter of a job: `compute = { dist = "normal", cv = 0.02, per = "worker" }`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeJitter {
    /// The distribution.
    pub dist: JitterDist,
    /// Coefficient of variation (standard deviation / mean), 0..=0.5 (default [`DEFAULT_CV`]).
    #[serde(default = "default_cv")]
    pub cv: f64,
    /// Per worker (default) or per job.
    #[serde(default = "default_per")]
    pub per: JitterPer,
}

fn default_cv() -> f64 {
    DEFAULT_CV
}
fn default_per() -> JitterPer {
    JitterPer::Worker
}

impl Default for ComputeJitter {
    fn default() -> Self {
        ComputeJitter {
            dist: JitterDist::Normal,
            cv: DEFAULT_CV,
            per: JitterPer::Worker,
        }
    }
}

impl ComputeJitter {
    /// No jitter.
    pub const NONE: ComputeJitter = ComputeJitter {
        dist: JitterDist::None,
        cv: 0.0,
        per: JitterPer::Worker,
    };

    /// Checks the values; the error says what is wrong.
    pub fn check(&self) -> Result<(), String> {
        if !(self.cv.is_finite() && (0.0..=MAX_CV).contains(&self.cv)) {
            return Err(format!("cv must be in 0..={MAX_CV}"));
        }
        Ok(())
    }
}

/// The scenario's `[jitter]` table (all fields optional).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct JitterSpec {
    /// Compute-time jitter of every job without its own `compute_jitter` (default: normal,
    /// cv [`DEFAULT_CV`], per worker).
    #[serde(default)]
    pub compute: ComputeJitter,
    /// Width of the seeded extra start offset of every job but the first, in milliseconds
    /// (uniform in `[0, start_ms)`; 0 = none, the fixed offsets only; default: the smallest
    /// compute time C of the scenario's jobs, i.e. any phase within one compute phase). Seed 1
    /// has no extra offset whatever this is.
    pub start_ms: Option<f64>,
}

/// Purposes of the streams (top byte of the stream id).
const PURPOSE_COMPUTE: u64 = 1;
const PURPOSE_START: u64 = 2;

/// The stream id of (purpose, job index, worker index): purpose in bits 56..64, job in 24..56,
/// worker in 0..24.
pub fn stream_id(purpose: u64, job: usize, worker: usize) -> u64 {
    (purpose << 56) | ((job as u64 & 0xffff_ffff) << 24) | (worker as u64 & 0xff_ffff)
}

/// The RNG of (seed, stream): key = "trainemu-seed-v1" tag bytes followed by the seed (little
/// endian), stream id as ChaCha's 64-bit stream.
pub fn rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    key[..16].copy_from_slice(b"trainemu-seed-v1");
    key[16..24].copy_from_slice(&seed.to_le_bytes());
    let mut r = ChaCha8Rng::from_seed(key);
    r.set_stream(stream);
    r
}

/// Draws successive compute times (ms) of one worker of one job.
pub struct ComputeDraws {
    rng: ChaCha8Rng,
    mean_ms: f64,
    dist: Sampler,
}

enum Sampler {
    Fixed,
    Normal(Normal<f64>),
    LogNormal(LogNormal<f64>),
}

impl ComputeDraws {
    /// The draws of worker `worker` of the job at index `job` of the scenario, whose mean
    /// compute time is `mean_ms`, under `seed`.
    pub fn new(seed: u64, job: usize, worker: usize, mean_ms: f64, j: &ComputeJitter) -> Self {
        let worker = match j.per {
            JitterPer::Worker => worker,
            JitterPer::Job => 0,
        };
        let sd = j.cv * mean_ms;
        let dist = match j.dist {
            _ if sd <= 0.0 || !sd.is_finite() => Sampler::Fixed,
            JitterDist::None => Sampler::Fixed,
            JitterDist::Normal => Sampler::Normal(Normal::new(mean_ms, sd).expect("sd > 0")),
            JitterDist::Lognormal => {
                // mean = exp(mu + s²/2), cv² = exp(s²) − 1.
                let s2 = (1.0 + j.cv * j.cv).ln();
                Sampler::LogNormal(
                    LogNormal::new(mean_ms.ln() - s2 / 2.0, s2.sqrt()).expect("sigma > 0"),
                )
            }
        };
        ComputeDraws {
            rng: rng(seed, stream_id(PURPOSE_COMPUTE, job, worker)),
            mean_ms,
            dist,
        }
    }

    /// The next compute time, ms (never negative).
    pub fn next_ms(&mut self) -> f64 {
        match &self.dist {
            Sampler::Fixed => self.mean_ms,
            Sampler::Normal(d) => d.sample(&mut self.rng).max(0.0),
            Sampler::LogNormal(d) => d.sample(&mut self.rng),
        }
    }
}

/// The seeded extra start offset (ms) of the job at index `job` under `seed`, for a width of
/// `width_ms`: 0 for job 0, for seed [`COLLISION_SEED`] and for a width of 0; else uniform in
/// `[0, width_ms)`.
pub fn seeded_offset_ms(seed: u64, job: usize, width_ms: f64) -> f64 {
    if job == 0 || seed == COLLISION_SEED || width_ms <= 0.0 || !width_ms.is_finite() {
        return 0.0;
    }
    let mut r = rng(seed, stream_id(PURPOSE_START, job, 0));
    r.random::<f64>() * width_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(seed: u64, job: usize, worker: usize, j: &ComputeJitter, n: usize) -> Vec<f64> {
        let mut d = ComputeDraws::new(seed, job, worker, 100.0, j);
        (0..n).map(|_| d.next_ms()).collect()
    }

    #[test]
    fn same_seed_same_draws_other_seed_other_draws() {
        let j = ComputeJitter::default();
        let a = draws(3, 0, 0, &j, 50);
        assert_eq!(a, draws(3, 0, 0, &j, 50));
        assert_ne!(a, draws(4, 0, 0, &j, 50));
        // Other job, other worker: other streams.
        assert_ne!(a, draws(3, 1, 0, &j, 50));
        assert_ne!(a, draws(3, 0, 1, &j, 50));
        // Per job: every worker of the job draws the same.
        let pj = ComputeJitter {
            per: JitterPer::Job,
            ..j
        };
        assert_eq!(draws(3, 0, 0, &pj, 20), draws(3, 0, 5, &pj, 20));
        // The draws vary within a stream.
        assert!(a.windows(2).any(|w| w[0] != w[1]));
    }

    #[test]
    fn draws_are_pinned_across_platforms_and_versions() {
        // Known values of the ChaCha8 stream: a change of the RNG, the key layout, the stream ids
        // or the normal sampler would change every run's compute times, so it must show up here.
        let mut r = rng(1, stream_id(PURPOSE_COMPUTE, 0, 0));
        assert_eq!(r.random::<u64>(), PINNED_U64);
        let a = draws(1, 0, 0, &ComputeJitter::default(), 3);
        for (x, want) in a.iter().zip(PINNED_DRAWS) {
            assert!((x - want).abs() < 1e-9, "{a:?}");
        }
        assert_eq!(stream_id(1, 2, 3), (1 << 56) | (2 << 24) | 3);
    }
    const PINNED_U64: u64 = 1688976642779065270;
    const PINNED_DRAWS: [f64; 3] = [98.09032897637692, 100.61778894900476, 98.01877628755078];

    fn mean_cv(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0);
        (m, var.sqrt() / m)
    }

    #[test]
    fn normal_and_lognormal_have_the_configured_mean_and_cv() {
        for dist in [JitterDist::Normal, JitterDist::Lognormal] {
            let j = ComputeJitter {
                dist,
                cv: 0.05,
                per: JitterPer::Worker,
            };
            let v = draws(11, 2, 1, &j, 200_000);
            let (m, cv) = mean_cv(&v);
            // Standard error of the mean: 0.05·100/√200000 ≈ 0.011 ms.
            assert!((m - 100.0).abs() < 0.1, "{dist:?}: mean {m}");
            assert!((cv - 0.05).abs() < 0.001, "{dist:?}: cv {cv}");
            assert!(v.iter().all(|&x| x > 0.0));
        }
        // Log-normal is right-skewed: more mass far above the mean than far below.
        let j = ComputeJitter {
            dist: JitterDist::Lognormal,
            cv: 0.3,
            per: JitterPer::Worker,
        };
        let v = draws(5, 0, 0, &j, 100_000);
        let hi = v.iter().filter(|&&x| x > 160.0).count();
        let lo = v.iter().filter(|&&x| x < 40.0).count();
        assert!(hi > 10 * (lo + 1), "hi {hi} lo {lo}");
    }

    #[test]
    fn no_jitter_is_exactly_c() {
        assert!(draws(9, 0, 0, &ComputeJitter::NONE, 10)
            .iter()
            .all(|&x| x == 100.0));
        let zero = ComputeJitter {
            cv: 0.0,
            ..ComputeJitter::default()
        };
        assert!(draws(9, 0, 0, &zero, 10).iter().all(|&x| x == 100.0));
    }

    #[test]
    fn seed_one_collides_other_seeds_spread_offsets() {
        assert_eq!(seeded_offset_ms(COLLISION_SEED, 1, 500.0), 0.0);
        assert_eq!(seeded_offset_ms(COLLISION_SEED, 2, 500.0), 0.0);
        assert_eq!(seeded_offset_ms(7, 0, 500.0), 0.0, "job 0 never moves");
        assert_eq!(
            seeded_offset_ms(7, 1, 0.0),
            0.0,
            "width 0: fixed offsets only"
        );
        let v: Vec<f64> = (2..202).map(|s| seeded_offset_ms(s, 1, 500.0)).collect();
        assert!(v.iter().all(|&x| (0.0..500.0).contains(&x)));
        let m = v.iter().sum::<f64>() / v.len() as f64;
        assert!((m - 250.0).abs() < 40.0, "mean {m}");
        // Reproducible, and independent between jobs.
        assert_eq!(seeded_offset_ms(7, 1, 500.0), seeded_offset_ms(7, 1, 500.0));
        assert_ne!(seeded_offset_ms(7, 1, 500.0), seeded_offset_ms(7, 2, 500.0));
    }

    #[test]
    fn jitter_tables_parse_with_defaults() {
        let s: JitterSpec = toml::from_str("").unwrap();
        assert_eq!(s.compute, ComputeJitter::default());
        assert_eq!(s.start_ms, None);
        let s: JitterSpec = toml::from_str(
            "compute = { dist = \"lognormal\", cv = 0.1, per = \"job\" }\nstart_ms = 0",
        )
        .unwrap();
        assert_eq!(s.compute.dist, JitterDist::Lognormal);
        assert_eq!(s.compute.per, JitterPer::Job);
        assert_eq!(s.start_ms, Some(0.0));
        let s: JitterSpec = toml::from_str("compute = { dist = \"none\" }").unwrap();
        assert_eq!(s.compute.dist, JitterDist::None);
        assert!(toml::from_str::<JitterSpec>("compute = { dist = \"uniform\" }").is_err());
        assert!(toml::from_str::<JitterSpec>("compute = { dist = \"normal\", sd = 1 }").is_err());
        assert!(ComputeJitter {
            cv: 0.9,
            ..Default::default()
        }
        .check()
        .is_err());
    }
}
