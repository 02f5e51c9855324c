// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Reno window updates (`net/ipv4/tcp_cong.c`: `tcp_slow_start`, `tcp_cong_avoid_ai`,
//! `tcp_reno_cong_avoid`, `tcp_reno_ssthresh`, `tcp_reno_undo_cwnd`; RFC 5681) and MLTCP-Reno.
//!
//! Window sizes are in segments (MSS units), as `tp->snd_cwnd`. The updates are bit-for-bit the
//! Linux 6.12 ones wherever Linux's 32-bit arithmetic does not overflow (window sums below
//! 2^32); where it would wrap, these saturate instead (documented per function).

use super::fixed::{FX_ONE, FX_SHIFT};

/// The `tcp_sock` window fields the updates read and write (all in segments, `snd_cwnd_cnt` in
/// ACKed segments). The glue copies them out of and back into `tcp_sock`.
///
/// All-zero is harmless (no panic) but not a real socket state: `cwnd_clamp = 0` clamps the window
/// to 0, as Linux would. Fill `cwnd_clamp` from `tp->snd_cwnd_clamp` (default `~0U`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// Congestion window, segments (`tp->snd_cwnd`).
    pub cwnd: u32,
    /// ACKed segments accumulated toward the next +1 of `cwnd` (`tp->snd_cwnd_cnt`).
    pub cwnd_cnt: u32,
    /// Slow-start threshold, segments (`tp->snd_ssthresh`).
    pub ssthresh: u32,
    /// Upper bound of `cwnd`, segments (`tp->snd_cwnd_clamp`).
    pub cwnd_clamp: u32,
}

/// `tcp_in_slow_start` (`include/net/tcp.h`): `cwnd < ssthresh`.
#[inline]
pub fn in_slow_start(w: &Window) -> bool {
    w.cwnd < w.ssthresh
}

/// `tcp_slow_start` (`net/ipv4/tcp_cong.c`, RFC 5681 §3.1 with stretch ACKs counted in full):
/// grows `cwnd` by `acked` segments but not beyond `ssthresh` (then clamps to `cwnd_clamp`), and
/// returns the ACKed segments left over for congestion avoidance.
///
/// Deviation from Linux only when `cwnd + acked` exceeds 2^32 - 1: saturates instead of wrapping.
#[inline]
pub fn slow_start(w: &mut Window, acked: u32) -> u32 {
    let cwnd = w.cwnd.saturating_add(acked).min(w.ssthresh);
    // As in C (u32): when called outside slow start (cwnd > ssthresh) the difference wraps and
    // gives back `acked + (old cwnd - ssthresh)`, which is what Linux returns too.
    let left = acked.wrapping_sub(cwnd.wrapping_sub(w.cwnd));
    w.cwnd = cwnd.min(w.cwnd_clamp);
    left
}

/// `tcp_cong_avoid_ai` (`net/ipv4/tcp_cong.c`): additive increase of one segment per `ai_w` ACKed
/// segments (`cwnd += acked / ai_w` with the remainder kept in `cwnd_cnt`), then clamp.
/// Reno passes `ai_w = cwnd` (one segment per RTT, RFC 5681 §3.1).
///
/// `ai_w = 0` (Linux would divide by zero) is treated as 1. Deviation from Linux only when
/// `cwnd_cnt + acked` or `cwnd + delta` exceed 2^32 - 1: saturates instead of wrapping.
#[inline]
pub fn cong_avoid_ai(w: &mut Window, ai_w: u32, acked: u32) {
    let ai_w = ai_w.max(1);
    // Credits accumulated while `ai_w` was larger: apply one segment now, gently.
    if w.cwnd_cnt >= ai_w {
        w.cwnd_cnt = 0;
        w.cwnd = w.cwnd.saturating_add(1);
    }
    w.cwnd_cnt = w.cwnd_cnt.saturating_add(acked);
    if w.cwnd_cnt >= ai_w {
        // ai_w >= 1: the division is defined and delta * ai_w <= cwnd_cnt cannot overflow.
        let delta = w.cwnd_cnt.checked_div(ai_w).unwrap_or(0);
        w.cwnd_cnt = w.cwnd_cnt.wrapping_sub(delta.wrapping_mul(ai_w));
        w.cwnd = w.cwnd.saturating_add(delta);
    }
    w.cwnd = w.cwnd.min(w.cwnd_clamp);
}

/// `tcp_reno_cong_avoid` (`net/ipv4/tcp_cong.c`, Jacobson SIGCOMM '88): nothing unless the flow is
/// cwnd-limited (`tcp_is_cwnd_limited`); slow start below `ssthresh`; the leftover ACKs grow the
/// window by one segment per window of ACKs.
#[inline]
pub fn cong_avoid(w: &mut Window, acked: u32, cwnd_limited: bool) {
    if !cwnd_limited {
        return;
    }
    let mut acked = acked;
    if in_slow_start(w) {
        acked = slow_start(w, acked);
        if acked == 0 {
            return;
        }
    }
    cong_avoid_ai(w, w.cwnd, acked);
}

/// ACKs per +1 segment for MLTCP-Reno: `max(cwnd * FX_ONE / f_fx, 1)`, i.e. F segments per RTT.
/// `f_fx = 0` gives `u32::MAX` (no growth); the quotient saturates at `u32::MAX`.
#[inline]
pub fn mltcp_ai_w(cwnd: u32, f_fx: u32) -> u32 {
    let w = (u64::from(cwnd) << FX_SHIFT)
        .checked_div(u64::from(f_fx))
        .unwrap_or(u64::MAX);
    u32::try_from(w).unwrap_or(u32::MAX).max(1)
}

/// MLTCP slow start: [`slow_start`] with the increase scaled by `ss_f_fx` (fixed point,
/// [`FX_ONE`] = 1.0): `cwnd` grows by `acked · ss_f_fx / FX_ONE` segments, the fraction (in
/// 1/[`FX_ONE`] segments, below one segment) carried in `cwnd_cnt`, which Linux's slow start does
/// not use. Returns the ACKed segments left over for congestion avoidance once `ssthresh` is
/// reached (those not needed to get there), and then clears the carry. (When HyStart ends slow
/// start instead, by lowering `ssthresh`, the carry left in `cwnd_cnt` counts as fewer than
/// [`FX_ONE`] ACKs toward the next congestion-avoidance increment: at most one segment early.)
///
/// With `ss_f_fx = FX_ONE` this is exactly [`slow_start`] (`cwnd_cnt` untouched). The glue passes
/// `min(F, 1)` ([`super::iteration::slow_start_gain_fx`]) when `scale_slow_start` is on: a flow early
/// in its iteration ramps up more slowly (×(1 + F) per RTT instead of ×2), and slow start is never
/// more aggressive than Linux's. `ss_f_fx = 0` never grows the window and never divides by zero.
#[inline]
pub fn mltcp_slow_start(w: &mut Window, acked: u32, ss_f_fx: u32) -> u32 {
    if ss_f_fx == FX_ONE {
        return slow_start(w, acked);
    }
    if ss_f_fx == 0 {
        // No growth at all (F is never 0 with validated parameters): the ACKs are spent.
        return 0;
    }
    let room = w.ssthresh.saturating_sub(w.cwnd);
    // The carry is below one segment (FX_ONE); anything larger is a CA count left from before.
    let carry = u64::from(w.cwnd_cnt.min(FX_ONE - 1));
    // acked · ss_f_fx < 2^64 for u32 operands; the carry is < 2^10: saturation never happens.
    let total_fx = u64::from(acked)
        .saturating_mul(u64::from(ss_f_fx))
        .saturating_add(carry);
    let inc = total_fx >> FX_SHIFT;
    if inc < u64::from(room) {
        // inc < room <= u32::MAX: the conversion cannot fail and the sum stays below ssthresh.
        w.cwnd = w
            .cwnd
            .saturating_add(u32::try_from(inc).unwrap_or(room))
            .min(w.cwnd_clamp);
        w.cwnd_cnt = u32::try_from(total_fx & u64::from(FX_ONE - 1)).unwrap_or(0);
        return 0;
    }
    // ssthresh reached: the ACKs it took are ceil((room·FX_ONE − carry) / ss_f_fx); the others
    // are left to congestion avoidance.
    let need_fx = (u64::from(room) << FX_SHIFT).saturating_sub(carry);
    let used = need_fx.div_ceil(u64::from(ss_f_fx));
    w.cwnd = w.cwnd.saturating_add(room).min(w.cwnd_clamp);
    w.cwnd_cnt = 0;
    acked.saturating_sub(u32::try_from(used).unwrap_or(u32::MAX))
}

/// MLTCP-Reno (thesis ch. 1 and 5: `cwnd += F(bytes_ratio) * additive_increase`): as
/// [`cong_avoid`] but congestion avoidance grows the window by F segments per RTT (`ai_w =`
/// [`mltcp_ai_w`]`(cwnd, f_fx)`) and slow start by `ss_f_fx` ([`mltcp_slow_start`]; `FX_ONE`:
/// Linux's slow start). The decrease is unchanged.
/// With `f_fx = ss_f_fx = FX_ONE` this is exactly [`cong_avoid`].
#[inline]
pub fn mltcp_cong_avoid(w: &mut Window, acked: u32, cwnd_limited: bool, f_fx: u32, ss_f_fx: u32) {
    if !cwnd_limited {
        return;
    }
    let mut acked = acked;
    if in_slow_start(w) {
        acked = mltcp_slow_start(w, acked, ss_f_fx);
        if acked == 0 {
            return;
        }
    }
    cong_avoid_ai(w, mltcp_ai_w(w.cwnd, f_fx), acked);
}

/// `tcp_reno_ssthresh` (`net/ipv4/tcp_cong.c`, RFC 5681 §3.1 with the flight size taken as
/// cwnd): half the window, at least 2 segments.
#[inline]
pub fn ssthresh(cwnd: u32) -> u32 {
    (cwnd >> 1).max(2)
}

/// Least fraction of the window a scaled decrease keeps ([`mltcp_ssthresh`]), fixed point: 1/8.
pub const MIN_KEEP_FX: u32 = FX_ONE / 8;
/// Largest fraction of the window a scaled decrease keeps ([`mltcp_ssthresh`]), fixed point:
/// 7/8, so a loss always lowers the window.
pub const MAX_KEEP_FX: u32 = FX_ONE - FX_ONE / 8;

/// The fraction of the window MLTCP-Reno keeps at a loss when the decrease is scaled by F
/// (`Params::scale_decrease`), fixed point: `1 − 1/(2F)`, Reno's half at F = 1, clamped to
/// [[`MIN_KEEP_FX`], [`MAX_KEEP_FX`]] (at F ≤ 4/7 a flow keeps an eighth; `f_fx = 0` likewise).
///
/// Why: with synchronized losses an AIMD flow's mean window is proportional to its increase
/// over its decrease (Chiu and Jain, "Analysis of the Increase and Decrease Algorithms for
/// Congestion Avoidance in Computer Networks", 1989), so scaling the increase alone by F
/// (the MLTCP thesis, ch. 5) reaches F-weighted shares only after several loss cycles; on the
/// testbed a burst spans one to three, and the higher-F flow got 0.54 of the link where 0.75
/// was meant. Scaling the decrease as well puts the flows near their weighted shares at the
/// first loss. This project's extension, not in the thesis.
#[inline]
pub fn decrease_keep_fx(f_fx: u32) -> u32 {
    // 1/(2F) in fixed point: FX_ONE² / (2 f_fx); f_fx = 0 gives the largest decrease.
    let drop_fx = (u64::from(FX_ONE) << FX_SHIFT)
        .checked_div(u64::from(f_fx).saturating_mul(2))
        .unwrap_or(u64::MAX);
    let keep = u64::from(FX_ONE).saturating_sub(drop_fx);
    u32::try_from(keep)
        .unwrap_or(MAX_KEEP_FX)
        .clamp(MIN_KEEP_FX, MAX_KEEP_FX)
}

/// Which way a scaled decrease may move the window kept at a loss away from Reno's half
/// (`Params::scale_decrease`: 1 = [`DecreaseScaling::Both`], 2 = [`DecreaseScaling::RaiseOnly`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecreaseScaling {
    /// [`decrease_keep_fx`] as it is: a flow early in its iteration (F < 1) keeps less than
    /// half, one late in it (F > 1) more.
    Both,
    /// At least Reno's half: only a flow late in its iteration (F > 1) keeps more; F < 1 keeps
    /// half, so a flow that starts its burst on an empty link is not cut deeper than Reno.
    RaiseOnly,
}

/// MLTCP-Reno's slow-start threshold after a loss with the decrease scaled by F: the window
/// times [`decrease_keep_fx`]`(f_fx)` (at least one half under [`DecreaseScaling::RaiseOnly`]),
/// at least 2 segments (as [`ssthresh`]). With `f_fx = FX_ONE` this is exactly [`ssthresh`].
#[inline]
pub fn mltcp_ssthresh(cwnd: u32, f_fx: u32, scaling: DecreaseScaling) -> u32 {
    let keep_fx = match scaling {
        DecreaseScaling::Both => decrease_keep_fx(f_fx),
        DecreaseScaling::RaiseOnly => decrease_keep_fx(f_fx).max(FX_ONE / 2),
    };
    // cwnd < 2^32 and the fraction <= FX_ONE: the product cannot saturate.
    let kept = u64::from(cwnd).saturating_mul(u64::from(keep_fx)) >> FX_SHIFT;
    u32::try_from(kept).unwrap_or(u32::MAX).max(2)
}

/// `tcp_reno_undo_cwnd` (`net/ipv4/tcp_cong.c`): after a spurious reduction, restore the window
/// in force before it (`tp->prior_cwnd`), never shrinking the current one.
#[inline]
pub fn undo_cwnd(cwnd: u32, prior_cwnd: u32) -> u32 {
    cwnd.max(prior_cwnd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn win(cwnd: u32, ssthresh: u32) -> Window {
        Window {
            cwnd,
            cwnd_cnt: 0,
            ssthresh,
            cwnd_clamp: u32::MAX,
        }
    }

    #[test]
    fn scaled_decrease_at_one_is_reno_and_keeps_more_at_larger_f() {
        for cwnd in [0u32, 1, 2, 3, 4, 5, 10, 99, 1000, u32::MAX] {
            assert_eq!(
                mltcp_ssthresh(cwnd, FX_ONE, DecreaseScaling::Both),
                ssthresh(cwnd),
                "cwnd {cwnd}"
            );
        }
        // F = 0.25 (an iteration's start, the default intercept) and F = 0: an eighth.
        assert_eq!(decrease_keep_fx(256), MIN_KEEP_FX);
        assert_eq!(decrease_keep_fx(0), MIN_KEEP_FX);
        assert_eq!(mltcp_ssthresh(80, 256, DecreaseScaling::Both), 10);
        // F = 1.75 (an iteration's end): 1 − 1/3.5 = 0.714.
        assert_eq!(decrease_keep_fx(1792), 1024 - 292);
        assert_eq!(mltcp_ssthresh(100, 1792, DecreaseScaling::Both), 71);
        // A huge F still lowers the window.
        assert_eq!(decrease_keep_fx(u32::MAX), MAX_KEEP_FX);
        assert_eq!(mltcp_ssthresh(100, u32::MAX, DecreaseScaling::Both), 87);
        // Never below 2 segments, and monotone in F.
        assert_eq!(mltcp_ssthresh(3, 256, DecreaseScaling::Both), 2);
        let mut last = 0;
        for f in (0..=8 * FX_ONE).step_by(7) {
            let k = decrease_keep_fx(f);
            assert!(k >= last, "keep {k} after {last} at f {f}");
            assert!((MIN_KEEP_FX..=MAX_KEEP_FX).contains(&k));
            last = k;
        }
    }

    #[test]
    fn raise_only_keeps_reno_half_below_one_and_the_scaled_fraction_above() {
        for cwnd in [0u32, 1, 2, 3, 4, 5, 10, 99, 1000, u32::MAX] {
            // F <= 1: Reno's half exactly (F = 0, the intercept 0.25, 0.5, 1.0).
            for f in [0, 256, 512, FX_ONE] {
                assert_eq!(
                    mltcp_ssthresh(cwnd, f, DecreaseScaling::RaiseOnly),
                    ssthresh(cwnd),
                    "cwnd {cwnd} f {f}"
                );
            }
            // F > 1: as the two-way scaling.
            for f in [FX_ONE + 1, 1792, 4 * FX_ONE, u32::MAX] {
                assert_eq!(
                    mltcp_ssthresh(cwnd, f, DecreaseScaling::RaiseOnly),
                    mltcp_ssthresh(cwnd, f, DecreaseScaling::Both),
                    "cwnd {cwnd} f {f}"
                );
            }
        }
        assert_eq!(mltcp_ssthresh(80, 256, DecreaseScaling::RaiseOnly), 40);
        assert_eq!(mltcp_ssthresh(100, 1792, DecreaseScaling::RaiseOnly), 71);
    }

    #[test]
    fn scaled_slow_start_at_one_is_linux() {
        for cwnd in [1u32, 2, 10, 100, 1000] {
            for ssthresh in [0u32, 5, 50, 5000, u32::MAX] {
                for acked in [0u32, 1, 3, 64] {
                    for cnt in [0u32, 7, 5000] {
                        let mut a = Window {
                            cwnd_cnt: cnt,
                            ..win(cwnd, ssthresh)
                        };
                        let mut b = a;
                        assert_eq!(
                            slow_start(&mut a, acked),
                            mltcp_slow_start(&mut b, acked, FX_ONE)
                        );
                        assert_eq!(a, b);
                    }
                }
            }
        }
    }

    #[test]
    fn scaled_slow_start_grows_by_f_per_ack() {
        // F = 0.5: ten single ACKs add five segments (×1.5 per RTT instead of ×2).
        let mut w = win(10, 1000);
        for _ in 0..10 {
            assert_eq!(mltcp_slow_start(&mut w, 1, FX_ONE / 2), 0);
        }
        assert_eq!((w.cwnd, w.cwnd_cnt), (15, 0));
        // F = 0.25: the quarter segments are carried until they make one.
        let mut w = win(10, 1000);
        for i in 1..=8u32 {
            mltcp_slow_start(&mut w, 1, FX_ONE / 4);
            assert_eq!(w.cwnd, 10 + i / 4, "after {i} ACKs");
        }
        assert_eq!(w.cwnd_cnt, 0);
        // A stretch ACK of 3 segments at F = 0.25: 0.75 carried.
        let mut w = win(10, 1000);
        mltcp_slow_start(&mut w, 3, FX_ONE / 4);
        assert_eq!((w.cwnd, w.cwnd_cnt), (10, 3 * FX_ONE / 4));
    }

    #[test]
    fn scaled_slow_start_hands_leftover_to_ca() {
        // cwnd 10, ssthresh 12, F = 0.5: 4 of the 10 ACKs reach ssthresh, 6 are left over.
        let mut w = win(10, 12);
        assert_eq!(mltcp_slow_start(&mut w, 10, FX_ONE / 2), 6);
        assert_eq!((w.cwnd, w.cwnd_cnt), (12, 0));
        // With a carry of 0.5 segment only 3 are needed.
        let mut w = Window {
            cwnd_cnt: FX_ONE / 2,
            ..win(10, 12)
        };
        assert_eq!(mltcp_slow_start(&mut w, 10, FX_ONE / 2), 7);
        // A large CA count in cwnd_cnt is not taken as a carry of more than one segment.
        let mut w = Window {
            cwnd_cnt: 50_000,
            ..win(10, 1000)
        };
        mltcp_slow_start(&mut w, 1, FX_ONE / 2);
        assert_eq!(w.cwnd, 11);
        assert!(w.cwnd_cnt < FX_ONE);
        // The clamp holds.
        let mut w = Window {
            cwnd_clamp: 11,
            ..win(10, 20)
        };
        mltcp_slow_start(&mut w, 100, FX_ONE / 2);
        assert_eq!(w.cwnd, 11);
    }

    #[test]
    fn mltcp_cong_avoid_scales_slow_start_then_ca() {
        // Slow start at F = 0.5 to ssthresh 20, then CA at F = 2 (2 segments per RTT).
        let mut w = win(10, 20);
        for _ in 0..20 {
            mltcp_cong_avoid(&mut w, 1, true, 2 * FX_ONE, FX_ONE / 2);
        }
        assert_eq!(w.cwnd, 20);
        for _ in 0..20 {
            mltcp_cong_avoid(&mut w, 1, true, 2 * FX_ONE, FX_ONE / 2);
        }
        assert_eq!(w.cwnd, 22);
    }

    #[test]
    fn slow_start_stops_at_ssthresh() {
        let mut w = win(10, 14);
        assert_eq!(slow_start(&mut w, 3), 0);
        assert_eq!(w.cwnd, 13);
        assert_eq!(slow_start(&mut w, 5), 4);
        assert_eq!(w.cwnd, 14);
    }

    #[test]
    fn ca_one_segment_per_window() {
        let mut w = win(10, 5);
        for _ in 0..10 {
            cong_avoid(&mut w, 1, true);
        }
        assert_eq!(w.cwnd, 11);
        assert_eq!(w.cwnd_cnt, 0);
        cong_avoid(&mut w, 100, false);
        assert_eq!(w.cwnd, 11);
    }

    #[test]
    fn ai_w_zero_is_one() {
        let mut w = win(10, 5);
        cong_avoid_ai(&mut w, 0, 3);
        assert_eq!(w.cwnd, 13);
    }

    #[test]
    fn mltcp_f_segments_per_rtt() {
        for &f in &[256u32, 1024, 1792, 4096] {
            let mut w = win(1000, 5);
            let mut acks = 0u32;
            // ten windows of ACKs with F constant
            while acks < 10_000 {
                mltcp_cong_avoid(&mut w, 1, true, f, FX_ONE);
                acks += 1;
            }
            let grown = w.cwnd - 1000;
            let expect = 10 * f / FX_ONE;
            assert!(
                grown.abs_diff(expect) <= 1 + expect / 50,
                "f={f} grown={grown}"
            );
        }
        assert_eq!(mltcp_ai_w(100, 0), u32::MAX);
        assert_eq!(mltcp_ai_w(0, 1024), 1);
        assert_eq!(mltcp_ai_w(u32::MAX, 1), u32::MAX);
    }

    #[test]
    fn ssthresh_and_undo() {
        assert_eq!(ssthresh(0), 2);
        assert_eq!(ssthresh(5), 2);
        assert_eq!(ssthresh(101), 50);
        assert_eq!(undo_cwnd(10, 20), 20);
        assert_eq!(undo_cwnd(30, 20), 30);
    }
}
