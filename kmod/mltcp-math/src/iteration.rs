// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Training-iteration tracking: where the flow is in its iteration (`bytes_ratio`) and the
//! resulting window-increase gain `F`.
//!
//! Source: Rajasekaran, MIT thesis, ch. 1 and 5 (MLTCP): `bytes_ratio` = bytes sent in the current
//! iteration / bytes per iteration; `F(bytes_ratio) = slope * bytes_ratio + intercept`. The thesis
//! does not say how a kernel finds iteration boundaries; this module's design (REFERENCE.md §2):
//! - a training iteration alternates a compute phase (the socket is idle) and a communication
//!   phase, so a send that follows an idle gap (`CA_EVENT_TX_START`, `net/ipv4/tcp_output.c`
//!   fires it when data is sent with nothing in flight) longer than
//!   `max(idle_gap_us, 2*SRTT)` begins a new iteration. Pauses shorter than that (ring
//!   all-reduce steps waiting on a neighbour, ACK-clock gaps) stay inside the iteration;
//! - progress is counted in `tp->bytes_acked` (RFC 4898 `tcpEStatsAppHCThruOctetsAcked`), which
//!   only counts bytes the receiver has confirmed, so retransmissions do not inflate it;
//! - bytes per iteration is an EWMA of the completed iterations, or a value handed down by the
//!   agent (which knows the model size), which then takes precedence.

use super::fixed::{ln_ratio_q16, mul_fx_u64, ratio_fx, FX_ONE, FX_SHIFT};
use super::params::Params;

/// `Iteration::flags` bit 0: `est_bytes` was handed down by the agent; samples still update the
/// EWMA (`ewma_bytes`) but not the estimate in use.
pub const FLAG_PINNED: u32 = 1 << 0;

/// `Iteration::flags` bit 1: the current iteration began at an observed idle boundary. Only such
/// iterations are complete samples: the first stretch of a connection (handshake, bootstrap
/// exchange) or of a socket that switched to MLTCP in mid-transfer is never a whole iteration.
pub const FLAG_ALIGNED: u32 = 1 << 1;

/// Per-socket iteration tracking.
///
/// Valid when all-zero: "iteration 0 began at bytes_acked 0 (boundary not observed), no estimate
/// yet", which makes F = 1.0 (plain Reno/CUBIC) until the first complete iteration is measured.
/// Sizes in bytes, counters plain integers. Layout is `repr(C)`, 32 bytes, 8-aligned.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Iteration {
    /// `tp->bytes_acked` when the current iteration began, bytes.
    pub start_bytes_acked: u64,
    /// Bytes per iteration in use for `bytes_ratio`: the agent's value when pinned, else the
    /// EWMA; 0 = no estimate yet.
    pub est_bytes: u64,
    /// EWMA of the bytes of completed iterations (first sample taken as is); 0 = no sample yet.
    /// Kept while pinned, so that unpinning falls back to what was measured.
    pub ewma_bytes: u64,
    /// Completed (measured) iterations since init, wrapping counter.
    pub iterations: u32,
    /// [`FLAG_PINNED`] | [`FLAG_ALIGNED`].
    pub flags: u32,
}

impl Iteration {
    /// Starts tracking on a socket whose `tp->bytes_acked` is `bytes_acked` (the algorithm's
    /// `init`; optional, the all-zero state is equivalent for a fresh connection).
    pub fn init(&mut self, bytes_acked: u64) {
        *self = Iteration {
            start_bytes_acked: bytes_acked,
            ..Iteration::default()
        };
    }

    /// Called on `CA_EVENT_TX_START` (first send with nothing in flight).
    ///
    /// `idle_us`: time since the previous send, µs (`tcp_jiffies32 - tp->lsndtime` converted);
    /// `srtt_us`: smoothed RTT, µs (`tp->srtt_us >> 3`); `bytes_acked`: `tp->bytes_acked`, bytes.
    /// A new iteration begins when `idle_us > max(p.idle_gap_us, 2*srtt_us)`. The finished
    /// iteration's bytes (`bytes_acked - start_bytes_acked`) update the EWMA estimate (the first
    /// sample is taken as is) if that iteration began at an observed boundary and is not empty.
    ///
    /// Returns true when a new iteration began after a measured one (i.e. `iterations` grew);
    /// false for a short pause, and for the first boundary, which only aligns the tracking.
    pub fn on_tx_start(
        &mut self,
        p: &Params,
        idle_us: u32,
        srtt_us: u32,
        bytes_acked: u64,
    ) -> bool {
        let threshold = p.idle_gap_us.max(srtt_us.saturating_mul(2));
        if bytes_acked < self.start_bytes_acked {
            // bytes_acked went backwards (counter reset under us): restart, unaligned.
            self.start_bytes_acked = bytes_acked;
            self.flags &= !FLAG_ALIGNED;
            return false;
        }
        if idle_us <= threshold {
            return false;
        }
        let finished = bytes_acked.saturating_sub(self.start_bytes_acked);
        let measured = self.flags & FLAG_ALIGNED != 0 && finished > 0;
        if measured {
            self.ewma_bytes = ewma(self.ewma_bytes, finished, p.ewma_weight_fx);
            if self.flags & FLAG_PINNED == 0 {
                self.est_bytes = self.ewma_bytes;
            }
            self.iterations = self.iterations.wrapping_add(1);
        }
        self.start_bytes_acked = bytes_acked;
        self.flags |= FLAG_ALIGNED;
        measured
    }

    /// Bytes ACKed since the current iteration began (0 if `bytes_acked` is behind the start).
    #[inline]
    pub fn bytes_in_iteration(&self, bytes_acked: u64) -> u64 {
        bytes_acked.saturating_sub(self.start_bytes_acked)
    }

    /// `bytes_ratio` in fixed point, clamped to `[0, FX_ONE]` (an iteration longer than the
    /// estimate stays at 1.0); `None` while there is no estimate.
    #[inline]
    pub fn bytes_ratio_fx(&self, bytes_acked: u64) -> Option<u32> {
        if self.est_bytes == 0 {
            return None;
        }
        Some(ratio_fx(
            self.bytes_in_iteration(bytes_acked),
            self.est_bytes,
        ))
    }

    /// F for the current ACK, fixed point: [`FX_ONE`] (plain Reno/CUBIC) until an estimate exists,
    /// else [`f_fx`]`(p, bytes_ratio)`.
    #[inline]
    pub fn scale_fx(&self, p: &Params, bytes_acked: u64) -> u32 {
        match self.bytes_ratio_fx(bytes_acked) {
            Some(r) => f_fx(p, r),
            None => FX_ONE,
        }
    }

    /// Agent hand-down of bytes per iteration (bytes). A non-zero value pins the estimate (the
    /// EWMA keeps learning but is not used); 0 forgets it and goes back to the EWMA.
    pub fn set_bytes_per_iteration(&mut self, bytes: u64) {
        if bytes == 0 {
            self.flags &= !FLAG_PINNED;
            self.est_bytes = self.ewma_bytes;
        } else {
            self.flags |= FLAG_PINNED;
            self.est_bytes = bytes;
        }
    }

    /// Whether the estimate in use was handed down by the agent.
    #[inline]
    pub fn pinned(&self) -> bool {
        self.flags & FLAG_PINNED != 0
    }

    /// A consistent view of the state for reporting (netlink query, tests).
    pub fn snapshot(&self, p: &Params, bytes_acked: u64) -> Snapshot {
        Snapshot {
            iterations: self.iterations,
            bytes_in_iteration: self.bytes_in_iteration(bytes_acked),
            est_bytes: self.est_bytes,
            bytes_ratio_fx: self.bytes_ratio_fx(bytes_acked).unwrap_or(0),
            f_fx: self.scale_fx(p, bytes_acked),
            pinned: self.pinned(),
        }
    }
}

/// EWMA step `old + w*(sample - old)` with `w = weight_fx / FX_ONE`, bytes; `old == 0` (no sample
/// yet) takes the sample as is. Rounded toward `old`, exact for all u64 inputs; a weight above
/// `FX_ONE` is treated as `FX_ONE`.
fn ewma(old: u64, sample: u64, weight_fx: u32) -> u64 {
    if old == 0 {
        return sample;
    }
    let w = weight_fx.min(FX_ONE);
    if sample >= old {
        old.saturating_add(mul_fx_u64(sample.saturating_sub(old), w))
    } else {
        old.saturating_sub(mul_fx_u64(old.saturating_sub(sample), w))
    }
}

/// `F(bytes_ratio) = intercept + slope * bytes_ratio` in fixed point (MLTCP, thesis ch. 5).
///
/// `ratio_fx` is clamped to `[0, FX_ONE]`; the product is rounded down, so F is monotone
/// non-decreasing in the ratio, equals `intercept_fx` at 0 and `intercept_fx + slope_fx` at
/// `FX_ONE`, and is never 0 when `intercept_fx >= 1`. Saturates at `u32::MAX` for absurd params.
#[inline]
pub fn f_fx(p: &Params, ratio_fx: u32) -> u32 {
    let r = u64::from(ratio_fx.min(FX_ONE));
    let inc = (u64::from(p.slope_fx).saturating_mul(r)) >> FX_SHIFT;
    let f = u64::from(p.intercept_fx).saturating_add(inc);
    u32::try_from(f).unwrap_or(u32::MAX)
}

/// F's mean over an iteration as a byte-weighted harmonic mean: the `L` for which `L / F`
/// averages 1 over the iteration's bytes. F rises linearly in the bytes from `a = intercept` to
/// `b = intercept + slope`, so the mean of `1/F` is `ln(b/a) / (b - a)` and `L` is the
/// logarithmic mean of `a` and `b`, `(b - a) / ln(b/a)` (`a` when the slope is 0). Fixed point;
/// defaults: 0.25 and 1.75 give 1.5 / ln 7 = 0.771 (789). `mltcp_dctcp`'s cut scaled by `L/F`
/// ([`super::dctcp::Dctcp::ssthresh_scaled`], `dctcp_scale_cut = 3`) is thus DCTCP's on average
/// over an iteration. This project's extension (docs/results/mltcp.md, MLTCP on ECN ports).
pub fn f_log_mean_fx(p: &Params) -> u32 {
    let a = p.intercept_fx.max(1);
    let b = a.saturating_add(p.slope_fx);
    let ln_q16 = ln_ratio_q16(b, a);
    if ln_q16 == 0 {
        return a;
    }
    // (b - a) < 2^32, so (b - a) << 16 < 2^48.
    let l = (u64::from(b.saturating_sub(a)) << 16)
        .checked_div(ln_q16)
        .unwrap_or(0);
    u32::try_from(l).unwrap_or(u32::MAX)
}

/// The slow-start gain for an ACK whose congestion-avoidance gain is `f_fx`: `min(F, 1)` when
/// `p.scale_slow_start` is on (F scales every window increase, the slow-start one included, but
/// slow start is never made more aggressive than Linux's), else [`FX_ONE`] (Linux's slow start).
/// Feed it to [`super::reno::mltcp_slow_start`] (through `mltcp_cong_avoid`).
#[inline]
pub fn slow_start_gain_fx(p: &Params, f_fx: u32) -> u32 {
    if p.scale_slow_start != 0 {
        f_fx.min(FX_ONE)
    } else {
        FX_ONE
    }
}

/// Per-socket MLTCP state for reporting (not used on the ACK path).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Completed (measured) iterations.
    pub iterations: u32,
    /// Bytes ACKed in the current iteration.
    pub bytes_in_iteration: u64,
    /// Bytes per iteration in use (0 = none yet).
    pub est_bytes: u64,
    /// `bytes_ratio`, fixed point `[0, FX_ONE]`; 0 while there is no estimate.
    pub bytes_ratio_fx: u32,
    /// F applied to the next ACK, fixed point (`FX_ONE` while there is no estimate).
    pub f_fx: u32,
    /// Estimate handed down by the agent.
    pub pinned: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_mean_of_f_makes_l_over_f_average_one_over_the_bytes() {
        for &(slope_fx, intercept_fx) in &[(1536u32, 256u32), (1024, 512), (4096, 64), (512, 1024)]
        {
            let p = Params {
                slope_fx,
                intercept_fx,
                ..Params::DEFAULT
            };
            let l = f64::from(f_log_mean_fx(&p));
            // The mean of L/F over evenly spaced byte ratios (F linear in the bytes).
            let n = 4096u32;
            let mean: f64 = (0..n)
                .map(|i| l / f64::from(f_fx(&p, ((2 * i + 1) * FX_ONE) / (2 * n))))
                .sum::<f64>()
                / f64::from(n);
            assert!(
                (mean - 1.0).abs() < 0.01,
                "slope {slope_fx} intercept {intercept_fx}: {mean}"
            );
        }
        // The defaults: 1.5 / ln 7 = 0.7708 (789.3 / 1024).
        assert_eq!(f_log_mean_fx(&Params::DEFAULT), 789);
        // No slope: F is the intercept throughout.
        let flat = Params {
            slope_fx: 0,
            intercept_fx: 700,
            ..Params::DEFAULT
        };
        assert_eq!(f_log_mean_fx(&flat), 700);
    }

    const P: Params = Params::DEFAULT;

    #[test]
    fn zero_state_is_plain() {
        let it = Iteration::default();
        assert_eq!(it.bytes_ratio_fx(12345), None);
        assert_eq!(it.scale_fx(&P, 12345), FX_ONE);
        assert_eq!(it.snapshot(&P, 7).bytes_in_iteration, 7);
        assert_eq!(it.snapshot(&P, 7).f_fx, FX_ONE);
    }

    #[test]
    fn f_endpoints() {
        assert_eq!(f_fx(&P, 0), 256);
        assert_eq!(f_fx(&P, 512), 256 + 768);
        assert_eq!(f_fx(&P, FX_ONE), 256 + 1536);
        assert_eq!(f_fx(&P, u32::MAX), 256 + 1536);
        let big = Params {
            slope_fx: u32::MAX,
            intercept_fx: u32::MAX,
            ..P
        };
        assert_eq!(f_fx(&big, FX_ONE), u32::MAX);
    }

    #[test]
    fn first_iteration_measured_after_alignment() {
        let mut it = Iteration::default();
        // Handshake + bootstrap: 1000 bytes, then a long pause: aligns, no sample.
        assert!(!it.on_tx_start(&P, 1_000_000, 100, 1000));
        assert_eq!(it.scale_fx(&P, 1000), FX_ONE);
        // First whole iteration: 1 MB.
        assert!(it.on_tx_start(&P, 50_000, 100, 1_001_000));
        assert_eq!(it.est_bytes, 1_000_000);
        assert_eq!(it.iterations, 1);
        assert_eq!(it.bytes_ratio_fx(1_001_000), Some(0));
        assert_eq!(it.bytes_ratio_fx(1_501_000), Some(512));
        assert_eq!(it.bytes_ratio_fx(9_000_000), Some(FX_ONE));
    }

    #[test]
    fn ewma_exact_and_rounding() {
        assert_eq!(ewma(0, 5, 256), 5);
        assert_eq!(ewma(1000, 2000, 256), 1250);
        assert_eq!(ewma(2000, 1000, 256), 1750);
        assert_eq!(ewma(u64::MAX, 0, 1024), 0);
        assert_eq!(ewma(1, u64::MAX, 1024), u64::MAX);
        assert_eq!(ewma(7, 9, 2000), 9);
    }

    #[test]
    fn pin_and_unpin() {
        let mut it = Iteration::default();
        it.on_tx_start(&P, 1_000_000, 0, 0);
        it.on_tx_start(&P, 1_000_000, 0, 4000);
        assert_eq!(it.est_bytes, 4000);
        it.set_bytes_per_iteration(10_000);
        assert!(it.pinned());
        it.on_tx_start(&P, 1_000_000, 0, 8000);
        assert_eq!(it.est_bytes, 10_000);
        assert_eq!(it.ewma_bytes, 4000);
        it.set_bytes_per_iteration(0);
        assert!(!it.pinned());
        assert_eq!(it.est_bytes, 4000);
    }
}
