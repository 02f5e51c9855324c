// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! MLTCP (Rajasekaran, MIT thesis, ch. 5; HotNets '24): each flow's window increase is scaled by
//! `F(bytes_ratio)`, so flows sharing a bottleneck get bandwidth in proportion to F (in the fluid
//! model, additive-increase flows with gains F_i converge to shares proportional to F_i). F comes
//! from the kernel module's own math crate (`mltcp_math::iteration::f_fx` with
//! `Params::DEFAULT`, slope 1.5 and intercept 0.25), and `bytes_ratio` is the flow's bytes sent
//! in this iteration over its bytes per iteration (the value an agent pins, exact here).
//!
//! When F is evaluated ([`FUpdate`]): `Events` re-evaluates it only when the set of flows
//! changes (a flow starts, ends or becomes dependency-bound), i.e. F is taken when contention
//! starts and held: the assumption of the Shift(Δ) recurrence (REFERENCE.md §2), used by the
//! known-answer test. `Continuous { ratio_step }` (default [`DEFAULT_RATIO_STEP`]) also re-evaluates whenever
//! some flow's bytes_ratio may have grown by `ratio_step` since its F was taken
//! ([`crate::sim::Flow::decided_sent`]), following F as the kernel does per ACK. (Earlier
//! the step was counted from the job's last re-allocation: a job re-allocated by another job's
//! change, without being decided, had its re-evaluation postponed, so F could be many steps
//! stale; `tests/approx.rs` checks the bound.)
//!
//! Where F is sampled within a step ([`FSample`]): F is linear in bytes_ratio and a flow's
//! bytes_ratio grows linearly while its rate holds, so the weight that is exact *on average*
//! over the coming step is F at the step's midpoint, bytes_ratio + ratio_step / 2 (the midpoint
//! rule: its error per step is second order in the step where taking F at the step's start,
//! as the kernel's value at the last ACK, lags by half a step, first order). `Midpoint` is the
//! default, with a step of 1/8 ([`DEFAULT_RATIO_STEP`], where the measurements
//! are); `Start` is kept to compare.
//!
//! Fast mode (both off with `PolicyConfig::exact`, measured against it in docs/results/simulator.md and
//! `tests/approx.rs`); neither coarsens the step, no F is ever staler than `ratio_step`:
//! - `skip_alone` ([`Policy::job_next_decision`]): a job whose weights cannot move a rate
//!   ([`Sim::weights_inert`]) is not re-evaluated;
//! - `coalesce` ([`Policy::coalesce_within`]): when the engine decides some jobs at an event, a
//!   job sharing a network link with one of them whose F is due within `coalesce` (default one
//!   half) of the interval it was scheduled with is re-evaluated then, early: one re-allocation
//!   covers both jobs instead of one event and one re-allocation each. A job's F may so be
//!   re-taken after as little as half a step; the rates then differ from the exact mode's by
//!   the F of that earlier bytes_ratio (weights at most half a step fresher than the exact
//!   mode's would be at the same time, never staler).

use mltcp_math::fixed::{ratio_fx, FX_ONE};
use mltcp_math::iteration::f_fx;
use mltcp_math::params::Params;

use super::{Control, Policy};
use crate::sim::Sim;

/// When MLTCP's F is re-evaluated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FUpdate {
    /// Only when the flows change.
    Events,
    /// Also whenever a bytes_ratio may have moved by `ratio_step` (in (0, 1]).
    Continuous {
        /// Largest change of any bytes_ratio between two evaluations.
        ratio_step: f64,
    },
}

/// Where in a step of [`FUpdate::Continuous`] a flow's F is sampled (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum FSample {
    /// At the bytes_ratio the flow has now (the kernel's F at the last ACK); lags the step's
    /// mean F by half a step.
    Start,
    /// At the bytes_ratio it will have half a step on (`sent + ratio_step / 2 * size`, at most
    /// its size): F's mean over the step while the rate holds.
    Midpoint,
}

/// MLTCP sharing.
#[derive(Clone, Debug)]
pub struct Mltcp {
    /// The module's parameters.
    pub params: Params,
    /// When F is re-evaluated.
    pub update: FUpdate,
    /// With `Continuous` updates, where in the step F is sampled ([`FSample`]; `Events` always
    /// samples at the event).
    pub sample: FSample,
    /// With `Continuous` updates, skip re-evaluating a job whose weights cannot move a rate
    /// ([`Policy::job_next_decision`], [`Sim::weights_inert`]); false: the reference that
    /// re-evaluates every job.
    pub skip_alone: bool,
    /// With `Continuous` updates, [`Policy::coalesce_within`]: a job whose F is due within this
    /// fraction of its step interval is re-evaluated early, at an event of a job it shares a
    /// link with (0: each job at its own time, the reference).
    pub coalesce: f64,
}

impl Default for Mltcp {
    fn default() -> Self {
        Mltcp {
            params: Params::DEFAULT,
            update: FUpdate::Continuous {
                ratio_step: DEFAULT_RATIO_STEP,
            },
            sample: FSample::Midpoint,
            skip_alone: true,
            coalesce: COALESCE,
        }
    }
}

/// Default [`FUpdate::Continuous`] step of bytes_ratio between two evaluations of a flow's F,
/// with [`FSample::Midpoint`] (docs/results/simulator.md). 100-job workload, seeds 1-5, average JCT
/// against a reference of start sampling at 1/256: midpoint at 1/8 and at 1/16 within 0.2 % on
/// every seed; midpoint at 1/4 and start at 1/8 each jump to another schedule on seed 3 (-8.3 %,
/// -5.3 %), and the earlier default, start at 1/32, on seed 5 (+13.8 %). So 1/8 is the coarsest
/// step that matched on all five seeds, and it takes the default run (1000 jobs) from 79.9 s to
/// 37.8 s. There the average JCT moves by about +-2 % with any step, finer ones included (start
/// 1/32 to 1/128: 1123.9-1149.0 s; midpoint 1/8: 1142.0 s): one job's shifted finish changes
/// later placements, so that run does not converge in the step.
pub const DEFAULT_RATIO_STEP: f64 = 1.0 / 8.0;

/// Default [`Mltcp::coalesce`] (fraction of a job's re-evaluation interval; 0.25 and 0.75 gave
/// more work than 0.5 on a 300-job run, docs/results/simulator.md).
pub const COALESCE: f64 = 0.5;

/// F of a flow that has sent `sent` of `size` bytes, as a real number (1.0 = Reno's gain).
pub fn f_of(params: &Params, sent: f64, size: f64) -> f64 {
    let r = ratio_fx(sent.max(0.0) as u64, size.max(0.0) as u64);
    f64::from(f_fx(params, r)) / f64::from(FX_ONE)
}

impl Mltcp {
    /// The weight (F) of flow `fl` now: sampled where [`Mltcp::sample`] says within the coming
    /// step.
    fn flow_f(&self, fl: &crate::sim::Flow) -> f64 {
        let ahead = match (self.update, self.sample) {
            (FUpdate::Continuous { ratio_step }, FSample::Midpoint) => 0.5 * ratio_step * fl.size,
            _ => 0.0,
        };
        f_of(&self.params, (fl.sent + ahead).min(fl.size), fl.size)
    }

    /// Weights (F) for the active flows, and the time of the next re-evaluation.
    pub fn weights(&self, sim: &Sim, ctl: &mut Control) -> f64 {
        ctl.fair(sim.active.len());
        let mut next = f64::INFINITY;
        for (i, &(j, f)) in sim.active.iter().enumerate() {
            let fl = &sim.jobs[j].flows[f];
            ctl.weight[i] = self.flow_f(fl);
            if let FUpdate::Continuous { ratio_step } = self.update {
                if fl.rate > 0.0 {
                    next = next.min(sim.t + ratio_step * fl.size / fl.rate);
                }
            }
        }
        if matches!(self.update, FUpdate::Continuous { .. })
            && !next.is_finite()
            && !sim.active.is_empty()
        {
            // Rates are not known before the first allocation: look again soon.
            next = sim.t + 1e-3;
        }
        next
    }
}

impl Policy for Mltcp {
    fn name(&self) -> String {
        "mltcp".into()
    }

    fn decide(&mut self, sim: &Sim, ctl: &mut Control) -> f64 {
        self.weights(sim, ctl)
    }

    /// With `Continuous` updates each flow's F depends only on its own bytes_ratio, so the
    /// policy decides per job: a job's flows get F anew whenever one of them may have moved by
    /// `ratio_step` ([`Policy::job_next_decision`]), so no flow's F is staler than that, as with
    /// the whole-cluster re-evaluation, without re-deciding every other job. `Events` keeps the
    /// whole-cluster evaluation at every change (the recurrence's "F taken when contention
    /// starts" needs the running job's F taken when the other one starts).
    fn is_local(&self) -> bool {
        matches!(self.update, FUpdate::Continuous { .. })
    }

    fn coalesce_within(&self) -> f64 {
        match self.update {
            FUpdate::Continuous { .. } => self.coalesce,
            FUpdate::Events => 0.0,
        }
    }

    fn flow_control(&self, sim: &Sim, j: usize, f: usize) -> Option<(f64, f64)> {
        Some((self.flow_f(&sim.jobs[j].flows[f]), f64::INFINITY))
    }

    /// With `skip_alone` (documented approximation, off with `PolicyConfig::exact`), a job whose
    /// weights cannot move a rate ([`Sim::weights_inert`]: no other job crosses its links, and
    /// its active flows that share a link have the same size, bytes sent, rate and bytes sent at
    /// their last decision, so the same F now and until its next event; each flow alone on its
    /// links is the simplest case) is
    /// not re-evaluated: re-evaluating F would multiply the weights of each group of its flows
    /// linked by shared links by one factor, which moves no rate in weighted max-min. Its F is
    /// taken anew whenever it is decided, and every communicating job is decided when a job
    /// starts or ends (the only times a link gains or loses a job), so a job with a flow that
    /// shares a link with another job, or with a flow of its own that differs, is re-evaluated
    /// as before. A job with a flow capped at the rate of the flow it waits on whose cap is not
    /// that rate yet (the engine's two refinement rounds per allocation follow longer chains
    /// over several re-allocations, `crate::sim`) is not skipped either, so the skip leaves
    /// what a re-evaluation would do to it only up to rounding. The effect is measured in
    /// docs/results/simulator.md.
    fn job_next_decision(&self, sim: &Sim, j: usize) -> f64 {
        let FUpdate::Continuous { ratio_step } = self.update else {
            return f64::INFINITY;
        };
        let mut next = f64::INFINITY;
        // Flows inside a server are not TCP: the engine does not ask for their F.
        for fl in sim.jobs[j]
            .flows
            .iter()
            .filter(|f| !f.done && f.rate > 0.0 && f.src != f.dst)
        {
            // Its F was taken at `decided_sent`; its rate may have moved since (another job's
            // change re-allocates it without deciding it), so the step counts from there.
            let left = (fl.decided_sent + ratio_step * fl.size - fl.sent).max(0.0);
            next = next.min(sim.t + left / fl.rate);
        }
        if next.is_finite() && self.skip_alone && sim.weights_inert(j) {
            f64::INFINITY
        } else {
            next
        }
    }
}
