// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! A job's communication slowdown, for the burst order [`super::JobOrder::SlowdownDeadline`]:
//! how much longer the job's bursts have been taking than they would alone, smoothed over its
//! bursts, and the deadline scaling it gives.
//!
//! Earliest deadline first ([`super::rank_earliest_deadline`]) ranks a burst by its start plus
//! its time alone. A job whose bursts are long (a parameter server's push and broadcast) then
//! yields to the short bursts of ring jobs in almost every collision, and pays for their gain:
//! on the testbed's agent scenario the fluid model runs the parameter-server job 4.8 % slower
//! than fair sharing does, the VM 7.7 % slower than CUBIC (docs/results/agent.md, "The VM keeps
//! the fluid model's gain"). Scaling each job's time alone by the inverse of its measured
//! slowdown, `alone / (measured / alone)`, brings a job's deadline forward the more its bursts
//! have been stretched, so that the jobs' slowdowns even out: the order stays EDF among jobs
//! slowed alike, and a job held back burst after burst catches up. The same idea as weighting a
//! scheduler's order by slowdown (stretch) instead of by size (Bender, Chakrabarti and
//! Muthukrishnan, "Flow and Stretch Metrics for Scheduling Continuous Job Streams", SODA 1998).
//! Not in the mlcc paper.
//!
//! The slowdown is an exponentially weighted moving average over bursts, each burst's sample
//! being its measured communication time over its time alone, with gain
//! 2^-[`SLOWDOWN_GAIN_SHIFT`] (the way TCP smooths RTT samples, RFC 6298). Fixed point in
//! 1/[`SLOWDOWN_ONE`] so that the agent and the simulator compute the same integers.

use serde::{Deserialize, Serialize};

/// Fixed-point unit of a slowdown: [`SLOWDOWN_ONE`] is a burst that took exactly its time
/// alone.
pub const SLOWDOWN_ONE: u64 = 1024;

/// The smoothing gain of [`CommSlowdown::on_burst`] is 2^-this (1/4). In the simulator's
/// fluid model of the agent scenario (20 seeds), gains of 1/8, 1/4, 1/2 and 1 gave the same
/// result within 0.03 points of the mean iteration; 1/4 follows a change of the jobs' phase
/// within a few bursts without swinging on one (docs/results/agent.md, "Slowdown-scaled
/// deadlines").
pub const SLOWDOWN_GAIN_SHIFT: u32 = 2;

/// The least and the most a slowdown may count, in [`SLOWDOWN_ONE`] units (1/16 to 16): a
/// sample outside (a burst measured across a lost report, a time alone misestimated) moves the
/// average only that far, and the scaled time alone stays within 16 times the unscaled one.
pub const SLOWDOWN_RANGE: (u64, u64) = (SLOWDOWN_ONE / 16, SLOWDOWN_ONE * 16);

/// One job's smoothed communication slowdown (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommSlowdown {
    /// The average of measured / alone over the bursts seen, in [`SLOWDOWN_ONE`] units; 0
    /// before the first burst.
    slowdown_fx: u64,
}

impl CommSlowdown {
    /// No burst seen yet: [`CommSlowdown::scaled_alone_ns`] leaves times alone as they are.
    pub fn new() -> Self {
        Self::default()
    }

    /// The smoothed slowdown in [`SLOWDOWN_ONE`] units (0: no burst seen yet).
    pub fn slowdown_fx(&self) -> u64 {
        self.slowdown_fx
    }

    /// Counts one finished burst: its time alone and how long it took, both ns. A burst with a
    /// time alone or a measured time of 0 is not counted. The first burst sets the average;
    /// each later one moves it by 2^-[`SLOWDOWN_GAIN_SHIFT`] of the difference. The sample is
    /// clamped to [`SLOWDOWN_RANGE`].
    pub fn on_burst(&mut self, alone_ns: u64, measured_ns: u64) {
        if alone_ns == 0 || measured_ns == 0 {
            return;
        }
        let sample = u128::from(measured_ns) * u128::from(SLOWDOWN_ONE) / u128::from(alone_ns);
        let sample = u64::try_from(sample)
            .unwrap_or(u64::MAX)
            .clamp(SLOWDOWN_RANGE.0, SLOWDOWN_RANGE.1);
        self.slowdown_fx = if self.slowdown_fx == 0 {
            sample
        } else {
            // avg + (sample - avg) / 2^shift, in signed arithmetic on values below 2^15.
            let avg = self.slowdown_fx as i64;
            let moved = avg + ((sample as i64 - avg) >> SLOWDOWN_GAIN_SHIFT);
            (moved as u64).clamp(SLOWDOWN_RANGE.0, SLOWDOWN_RANGE.1)
        };
    }

    /// The time alone that [`super::JobOrder::SlowdownDeadline`] adds to a burst's start:
    /// `alone_ns` divided by the smoothed slowdown (unchanged before the first burst), ns.
    pub fn scaled_alone_ns(&self, alone_ns: u64) -> u64 {
        if self.slowdown_fx == 0 {
            return alone_ns;
        }
        let ns = u128::from(alone_ns) * u128::from(SLOWDOWN_ONE) / u128::from(self.slowdown_fx);
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_any_burst_the_time_alone_is_kept() {
        let s = CommSlowdown::new();
        assert_eq!(s.slowdown_fx(), 0);
        assert_eq!(s.scaled_alone_ns(160_000_000), 160_000_000);
    }

    #[test]
    fn the_first_burst_sets_the_slowdown_and_later_ones_move_it_by_a_quarter() {
        let mut s = CommSlowdown::new();
        // Took twice its time alone.
        s.on_burst(100_000_000, 200_000_000);
        assert_eq!(s.slowdown_fx(), 2 * SLOWDOWN_ONE);
        assert_eq!(s.scaled_alone_ns(160_000_000), 80_000_000);
        // Then one burst at its time alone: 2 + (1 - 2) / 4 = 1.75.
        s.on_burst(100_000_000, 100_000_000);
        assert_eq!(s.slowdown_fx(), 1792);
        // Then one at three times: 1.75 + (3 - 1.75) / 4 = 2.0625.
        s.on_burst(50, 150);
        assert_eq!(s.slowdown_fx(), 2112);
    }

    #[test]
    fn empty_bursts_are_not_counted_and_samples_are_clamped() {
        let mut s = CommSlowdown::new();
        s.on_burst(0, 5);
        s.on_burst(5, 0);
        assert_eq!(s.slowdown_fx(), 0);
        s.on_burst(1, u64::MAX);
        assert_eq!(s.slowdown_fx(), SLOWDOWN_RANGE.1);
        assert_eq!(s.scaled_alone_ns(1600), 100);
        let mut t = CommSlowdown::new();
        t.on_burst(u64::MAX, 1);
        assert_eq!(t.slowdown_fx(), SLOWDOWN_RANGE.0);
        assert_eq!(t.scaled_alone_ns(100), 1600);
        assert_eq!(t.scaled_alone_ns(u64::MAX), u64::MAX);
    }

    #[test]
    fn a_job_slowed_more_gets_the_earlier_deadline() {
        // Two jobs whose bursts start together with the same time alone: the one whose bursts
        // have been stretched more ranks first.
        let (mut a, mut b) = (CommSlowdown::new(), CommSlowdown::new());
        a.on_burst(100, 130);
        b.on_burst(100, 180);
        assert!(b.scaled_alone_ns(300) < a.scaled_alone_ns(300));
    }
}
