// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `mlcc-sim`: a cluster-scale, trace-driven simulator of DNN training traffic, comparing fair
//! (TCP-like) sharing, MLTCP, MCS, CCML, Cassini (on fair sharing and on MLTCP) and the mlcc
//! scheduler (the agent's own scheduling library), and the policy layer's job-level strict
//! priority (`priority`, `cassini+priority`; `priority-fc` and `priority-edf`, ranked by burst as
//! ccp-agent ranks: first come, first served, or earliest deadline first), with unlimited
//! levels or on the agent's N strict-priority traffic classes ([`PolicyConfig::classes`]).
//!
//! The setting is that of "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers"
//! (Zhao, Wu, Zhu), Sec. VII: 1000 servers of 8 GPUs in a three-tier tree (10/20/40 Gbit/s), jobs
//! arriving by a Google-trace-like process, each iteration a compute phase then its flows. The
//! algorithms are never re-implemented here: Alg. 1/2, the load tables and Cassini's score and
//! BFS come from `mlcc-sched`, MLTCP's F from `mltcp-math`, the model profiles from
//! `dnn-profiles` (the same models.toml as the traffic emulator).
//!
//! Modules: [`topo`] (the tree, and each server's internal links between its GPUs),
//! [`workload`] (arrivals, job mix, trace files), [`sim`] (the engine: GPU-level placement,
//! packed by default, flows, dependencies, time), [`alloc`] (weighted max-min with caps),
//! [`policy`] (one module per policy), [`report`] (statistics, table, JSON, PNG),
//! [`scenario`] (the VM testbed's scenario files: the same jobs on the same star, for fidelity).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod alloc;
pub mod error;
pub mod policy;
pub mod report;
pub mod scenario;
pub mod sim;
pub mod topo;
pub mod workload;

use policy::cassini::Cassini;
use policy::ccml::Ccml;
use policy::fair::Fair;
use policy::mcs::Mcs;
use policy::mlcc::Mlcc;
use policy::mltcp::{FSample, FUpdate, Mltcp};
use policy::priority::{Levels, Priority, PriorityByBurst};
use policy::Policy;

pub use error::SimError;

/// The policies a run may name, in the default order.
pub const POLICIES: &[&str] = &[
    "fair",
    "mltcp",
    "mcs",
    "ccml",
    "cassini",
    "cassini+mltcp",
    "mlcc",
    "mlcc-il",
    "cassini+mlcc-il",
    "priority",
    "cassini+priority",
    "priority-fc",
    "priority-edf",
    "priority-sedf",
];

/// Parameters of the policies (see each policy's module for their meaning and source).
#[derive(Clone, Debug, serde::Serialize)]
pub struct PolicyConfig {
    /// mlcc slot length, µs (paper: 60 ms).
    pub slot_us: u64,
    /// mlcc horizon K, slots (paper: 10).
    pub horizon: usize,
    /// MLTCP: re-evaluate F when a bytes_ratio may have moved by this much; 0 = only at events
    /// (default [`policy::mltcp::DEFAULT_RATIO_STEP`]).
    pub mltcp_ratio_step: f64,
    /// MLTCP: where in a step F is sampled ([`FSample`], default the midpoint).
    pub mltcp_sample: FSample,
    /// CCML: weight ratio between priority levels.
    pub ccml_ratio: f64,
    /// Cassini: candidate placements.
    pub cassini_candidates: usize,
    /// Cassini: angles sampled on a unified circle.
    pub cassini_angles: usize,
    /// Reference mode: mlcc re-plans every coflow unit at every slot, MCS re-decides every
    /// coflow at every event, MLTCP re-evaluates every job's F and `priority-fc`/`priority-edf`
    /// re-level every job at every change (no plan reuse, no component-restricted decisions, no
    /// skipped jobs; slow at scale, see `policy::mlcc`, `policy::mcs`, `policy::mltcp` and
    /// `policy::priority`).
    pub exact: bool,
    /// mlcc: re-plan an incomplete plan at its age limit instead of rolling it forward
    /// (`policy::mlcc`, "Rolling incomplete plans forward"); the previous approximation, kept to
    /// measure the roll against.
    pub no_extend: bool,
    /// Strict-priority traffic classes of the priority family (`priority`, `cassini+priority`,
    /// `priority-fc`, `priority-edf`): 0 = unlimited levels ([`mlcc_sched::priority_levels`]),
    /// 1..=8 = the jobs' ranks compressed onto that many classes as `ccp-agent` compresses them
    /// ([`mlcc_sched::TrafficClasses`], `policy::priority`'s "Traffic classes").
    pub classes: u8,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            slot_us: mlcc_sched::PAPER_SLOT_US,
            horizon: mlcc_sched::DEFAULT_HORIZON,
            mltcp_ratio_step: policy::mltcp::DEFAULT_RATIO_STEP,
            mltcp_sample: FSample::Midpoint,
            ccml_ratio: policy::ccml::DEFAULT_RATIO,
            cassini_candidates: 3,
            cassini_angles: 60,
            exact: false,
            no_extend: false,
            classes: 0,
        }
    }
}

fn mltcp(cfg: &PolicyConfig) -> Mltcp {
    let update = if cfg.mltcp_ratio_step > 0.0 {
        FUpdate::Continuous {
            ratio_step: cfg.mltcp_ratio_step.min(1.0),
        }
    } else {
        FUpdate::Events
    };
    Mltcp {
        update,
        sample: cfg.mltcp_sample,
        skip_alone: !cfg.exact,
        coalesce: if cfg.exact {
            0.0
        } else {
            policy::mltcp::COALESCE
        },
        ..Mltcp::default()
    }
}

/// The mlcc paper's scheduler (`policy::mlcc`, the policy layer's [`mlcc_sched::Rules::Mlcc`]).
fn mlcc(cfg: &PolicyConfig, link_capacity: &[f64]) -> Result<Mlcc, SimError> {
    let mut m = Mlcc::new(link_capacity, cfg.slot_us, cfg.horizon, cfg.exact)?;
    m.extend = !cfg.no_extend;
    Ok(m)
}

/// `mlcc-il`: the policy layer's [`mlcc_sched::Rules::Interleave`] (job ranks, shortest
/// remaining time first, [`mlcc_sched::rank_jobs`]) with spare sharing within the slot; every
/// byte left planned (planning only sendable bytes cost 5-15 % of average JCT on the 100-job
/// seeds 1-3, docs/results/simulator.md).
fn mlcc_il(cfg: &PolicyConfig, link_capacity: &[f64]) -> Result<Mlcc, SimError> {
    let mut m = mlcc(cfg, link_capacity)?;
    m.options = mlcc_sched::PolicyOptions {
        rules: mlcc_sched::Rules::Interleave,
        share_spare: true,
        sendable_only: false,
        work_conserving: false,
        strict_rates: false,
        job_rank: Vec::new(),
    };
    m.name = "mlcc-il".into();
    Ok(m)
}

/// The policy called `name` (one of [`POLICIES`]) for a network of link capacities
/// `link_capacity` (bytes/s). Refuses an unknown name and bad parameters, naming the value.
pub fn make_policy(
    name: &str,
    cfg: &PolicyConfig,
    link_capacity: &[f64],
) -> Result<Box<dyn Policy>, SimError> {
    if !(cfg.ccml_ratio.is_finite() && cfg.ccml_ratio >= 1.0) {
        return Err(SimError::Config(format!(
            "ccml_ratio = {}: must be >= 1",
            cfg.ccml_ratio
        )));
    }
    if !(cfg.mltcp_ratio_step.is_finite() && cfg.mltcp_ratio_step >= 0.0) {
        return Err(SimError::Config(format!(
            "mltcp_ratio_step = {}: must be >= 0",
            cfg.mltcp_ratio_step
        )));
    }
    if cfg.classes > mlcc_sched::MAX_CLASSES {
        return Err(SimError::Config(format!(
            "classes = {}: at most {} (0: unlimited levels)",
            cfg.classes,
            mlcc_sched::MAX_CLASSES
        )));
    }
    Ok(match name {
        "fair" => Box::new(Fair),
        "mltcp" => Box::new(mltcp(cfg)),
        "mcs" => Box::new(Mcs::new(cfg.exact)),
        "ccml" => Box::new(Ccml::new(cfg.ccml_ratio)),
        "cassini" => Box::new(Cassini::new(
            Box::new(Fair),
            cfg.cassini_candidates,
            cfg.cassini_angles,
        )),
        "cassini+mltcp" => Box::new(Cassini::new(
            Box::new(mltcp(cfg)),
            cfg.cassini_candidates,
            cfg.cassini_angles,
        )),
        "mlcc" => Box::new(mlcc(cfg, link_capacity)?),
        "mlcc-il" => Box::new(mlcc_il(cfg, link_capacity)?),
        "cassini+mlcc-il" => Box::new(Cassini::new(
            Box::new(mlcc_il(cfg, link_capacity)?),
            cfg.cassini_candidates,
            cfg.cassini_angles,
        )),
        "priority" => Box::new(Priority::new(
            mlcc_sched::PRIORITY_WEIGHT_RATIO,
            Levels::new(cfg.classes)?,
        )),
        "cassini+priority" => Box::new(Cassini::new(
            Box::new(Priority::new(
                mlcc_sched::PRIORITY_WEIGHT_RATIO,
                Levels::new(cfg.classes)?,
            )),
            cfg.cassini_candidates,
            cfg.cassini_angles,
        )),
        "priority-fc" => Box::new(PriorityByBurst::new(
            mlcc_sched::PRIORITY_WEIGHT_RATIO,
            mlcc_sched::JobOrder::FirstCome,
            cfg.exact,
            Levels::new(cfg.classes)?,
        )),
        "priority-edf" => Box::new(PriorityByBurst::new(
            mlcc_sched::PRIORITY_WEIGHT_RATIO,
            mlcc_sched::JobOrder::EarliestDeadline,
            cfg.exact,
            Levels::new(cfg.classes)?,
        )),
        "priority-sedf" => Box::new(PriorityByBurst::new(
            mlcc_sched::PRIORITY_WEIGHT_RATIO,
            mlcc_sched::JobOrder::SlowdownDeadline,
            cfg.exact,
            Levels::new(cfg.classes)?,
        )),
        other => {
            return Err(SimError::Config(format!(
                "unknown policy '{other}' (known: {})",
                POLICIES.join(", ")
            )));
        }
    })
}
