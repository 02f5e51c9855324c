// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! CUBIC window updates (`net/ipv4/tcp_cubic.c` of Linux 6.12, with HyStart) and MLTCP-CUBIC.
//!
//! Sources: RFC 9438 (CUBIC, obsoletes RFC 8312) for the curve
//! `W_cubic(t) = C·(t − K)^3 + W_max`, `K = cbrt(W_max·(1 − β)/C)`, the Reno-friendly region and
//! fast convergence; Ha and Rhee, *Taming the Elephants: New TCP Slow Start* (HyStart);
//! `net/ipv4/tcp_cubic.c` for the integer formulation, the constants and every quirk kept here.
//!
//! Units, as in tcp_cubic.c: windows in segments; `epoch_start`/`last_time` in jiffies
//! (`tcp_jiffies32`, `hz` per second); `delay_min`/`curr_rtt` and the HyStart clocks in µs
//! (`tp->tcp_mstamp` truncated to 32 bits); `bic_K` in 2^-10 s ("BICTCP_HZ" units).
//!
//! Bit-for-bit the Linux algorithm wherever Linux's own arithmetic stays in range (the kernel
//! comment: cwnd below about one million segments, RTT below 100 s). Outside that range, where
//! the C code would wrap around, divide by zero or loop for a long time, this code saturates or
//! takes a bounded path instead; each such place says so. None of it can panic.

use super::fixed::{FX_ONE, FX_SHIFT};

/// Fraction mask of a fixed-point value.
const FX_MASK: u64 = (1 << FX_SHIFT) - 1;
use super::reno::{self, Window};

/// Fixed-point scale of `beta` (`BICTCP_BETA_SCALE`): beta = 717 means 717/1024 ≈ 0.7 (RFC 9438
/// §4.6 β_cubic).
pub const BICTCP_BETA_SCALE: u32 = 1024;

/// log2 of the time resolution of the cubic function (`BICTCP_HZ`): time is counted in 2^-10 s.
pub const BICTCP_HZ: u32 = 10;

/// `hystart_detect` bit: exit slow start when the ACKs of a round arrive as a train lasting
/// longer than half the minimum RTT (HyStart "ACK train").
pub const HYSTART_ACK_TRAIN: u32 = 0x1;

/// `hystart_detect` bit: exit slow start when the round's minimum RTT rises by a threshold over
/// the flow's minimum RTT (HyStart "delay increase").
pub const HYSTART_DELAY: u32 = 0x2;

/// RTT samples taken per round before the delay-increase test (`HYSTART_MIN_SAMPLES`).
pub const HYSTART_MIN_SAMPLES: u8 = 8;

/// Lower clamp of the delay-increase threshold, µs (`HYSTART_DELAY_MIN`, 4 ms).
pub const HYSTART_DELAY_MIN: u32 = 4000;

/// Upper clamp of the delay-increase threshold, µs (`HYSTART_DELAY_MAX`, 16 ms).
pub const HYSTART_DELAY_MAX: u32 = 16000;

/// CUBIC constants: tcp_cubic.c's module parameters with their Linux defaults, `hz` (the kernel's
/// HZ, 1000 in our config) and the scale factors Linux precomputes at registration.
///
/// Build with [`CubicParams::LINUX_DEFAULT`] or, after changing a knob, recompute the scales with
/// [`CubicParams::with_scales`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CubicParams {
    /// Fast convergence (RFC 9438 §4.7): after a loss below the previous W_max, remember a smaller
    /// W_max (`cwnd·(1+β)/2`) to release bandwidth to newer flows. Linux default on.
    pub fast_convergence: bool,
    /// Multiplicative decrease factor β_cubic scaled by 1024 (717 ≈ 0.7, RFC 9438 §4.6).
    /// Must be < 1024.
    pub beta: u32,
    /// Slow-start threshold set at init when HyStart is off, segments; 0 = keep the socket's.
    pub initial_ssthresh: u32,
    /// C of the cubic function scaled by 1024·10/… : `bic_scale/1024` is `C / 10`, i.e. 41 gives
    /// C = 410/1024 ≈ 0.4 segments/s^3 (RFC 9438 §5.1; tcp_cubic.c's fixed 100 ms reference RTT
    /// supplies the factor 10).
    pub bic_scale: u32,
    /// Reno-friendly region (RFC 9438 §4.3): never grow slower than an emulated Reno with the same
    /// average window. Linux default on.
    pub tcp_friendliness: bool,
    /// HyStart (hybrid slow start). Linux default on.
    pub hystart: bool,
    /// HyStart detectors, [`HYSTART_ACK_TRAIN`] | [`HYSTART_DELAY`] (Linux default: both).
    pub hystart_detect: u32,
    /// HyStart acts only from this window on, segments (Linux default 16).
    pub hystart_low_window: u32,
    /// ACKs closer than this, µs, belong to one train (Linux default 2000).
    pub hystart_ack_delta_us: u32,
    /// Kernel tick rate (HZ), jiffies per second. 1000 in our kernel config.
    pub hz: u32,
    /// Derived: `8·(1024 + beta) / 3 / (1024 − beta)` (15 for beta = 717), the number of ACKs
    /// (×8/cwnd) per segment of growth of the emulated Reno window: 3(1−β)/(1+β) per RTT
    /// (RFC 9438 §4.3, α_cubic).
    pub beta_scale: u32,
    /// Derived: `bic_scale · 10` (410): C·1024 for the reference RTT of 100 ms.
    pub cube_rtt_scale: u32,
    /// Derived: `2^(10 + 3·BICTCP_HZ) / cube_rtt_scale` (2^40/410): converts `W_max − cwnd` into
    /// `K^3` in (2^-10 s)^3.
    pub cube_factor: u64,
}

impl CubicParams {
    /// Linux 6.12 defaults (`tcp_cubic.c` module parameters) with HZ = 1000.
    pub const LINUX_DEFAULT: CubicParams = CubicParams {
        fast_convergence: true,
        beta: 717,
        initial_ssthresh: 0,
        bic_scale: 41,
        tcp_friendliness: true,
        hystart: true,
        hystart_detect: HYSTART_ACK_TRAIN | HYSTART_DELAY,
        hystart_low_window: 16,
        hystart_ack_delta_us: 2000,
        hz: 1000,
        beta_scale: 0,
        cube_rtt_scale: 0,
        cube_factor: 0,
    }
    .with_scales();

    /// Recomputes the derived scale factors as `cubictcp_register` does. `beta` is treated as at
    /// most 1023 and `bic_scale` as at least 1 here (Linux would divide by zero).
    pub const fn with_scales(mut self) -> CubicParams {
        let beta = if self.beta < BICTCP_BETA_SCALE {
            self.beta
        } else {
            BICTCP_BETA_SCALE - 1
        };
        // 8 * (1024 + beta) / 3 / (1024 - beta); all terms small (beta < 1024).
        let num = (BICTCP_BETA_SCALE.wrapping_add(beta)).wrapping_mul(8) / 3;
        self.beta_scale = match num.checked_div(BICTCP_BETA_SCALE.wrapping_sub(beta)) {
            Some(v) => v,
            None => 0,
        };
        let bic = if self.bic_scale == 0 {
            1
        } else {
            self.bic_scale
        };
        self.cube_rtt_scale = bic.saturating_mul(10);
        self.cube_factor =
            match (1u64 << (10 + 3 * BICTCP_HZ)).checked_div(self.cube_rtt_scale as u64) {
                Some(v) => v,
                None => 1u64 << (10 + 3 * BICTCP_HZ),
            };
        self
    }
}

impl Default for CubicParams {
    fn default() -> Self {
        CubicParams::LINUX_DEFAULT
    }
}

/// Per-socket CUBIC state: the fields and meaning of tcp_cubic.c's `struct bictcp`, same order,
/// `repr(C)`, 60 bytes. Valid when all-zero (no epoch, no W_max, no RTT sample; HyStart's clocks
/// at 0, so its detectors stay quiet until [`Cubic::init`] or a loss resets them).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cubic {
    /// Grow cwnd by one segment per this many ACKed segments.
    pub cnt: u32,
    /// W_max: the window before the last reduction, segments.
    pub last_max_cwnd: u32,
    /// cwnd at the last update of `cnt`, segments.
    pub last_cwnd: u32,
    /// When `last_cwnd` was recorded, jiffies.
    pub last_time: u32,
    /// The plateau of the cubic curve for this epoch (W_max or the cwnd at epoch start), segments.
    pub bic_origin_point: u32,
    /// K: time from epoch start to the plateau, 2^-10 s.
    pub bic_k: u32,
    /// Minimum RTT seen, µs (0 = none yet).
    pub delay_min: u32,
    /// Start of the current congestion-avoidance epoch, jiffies (0 = no epoch).
    pub epoch_start: u32,
    /// ACKed segments counted toward the emulated Reno window.
    pub ack_cnt: u32,
    /// Emulated Reno window (Reno-friendly region), segments.
    pub tcp_cwnd: u32,
    /// `struct bictcp`'s `unused` padding, used by MLTCP-CUBIC only: the fraction (1/1024 ACK) of
    /// the F-scaled ACK count not yet added to `ack_cnt`. Always 0 for plain CUBIC.
    pub ack_frac_fx: u16,
    /// RTT samples taken this round (HyStart delay detector).
    pub sample_cnt: u8,
    /// 1 once HyStart found the slow-start exit point.
    pub found: u8,
    /// Start of the current HyStart round, µs.
    pub round_start: u32,
    /// `snd_nxt` at the start of the round: the round ends when `snd_una` passes it.
    pub end_seq: u32,
    /// Time of the last ACK of the current train, µs.
    pub last_ack: u32,
    /// Minimum RTT of the current round, µs.
    pub curr_rtt: u32,
}

/// What the updates need from the socket besides the [`Window`].
///
/// Additions to the brief's three fields: `snd_una` (Linux 6.12's `hystart_update` starts a new
/// round when `tp->snd_una` passes `end_seq`) and `pacing_enabled` (`sk->sk_pacing_status !=
/// SK_PACING_NONE`; the ACK-train threshold is halved when not paced).
#[derive(Clone, Copy, Debug, Default)]
pub struct Clock {
    /// `tcp_jiffies32`, jiffies.
    pub now_jiffies: u32,
    /// `tp->tcp_mstamp` (µs) truncated to 32 bits.
    pub now_us: u32,
    /// `tp->snd_nxt`, sequence number.
    pub snd_nxt: u32,
    /// `tp->snd_una`, sequence number.
    pub snd_una: u32,
    /// `sk->sk_pacing_status != SK_PACING_NONE`.
    pub pacing_enabled: bool,
}

/// `after(seq1, seq2)` of `include/net/tcp.h`: `seq1` is later than `seq2` in 32-bit serial
/// arithmetic (also used on jiffies there).
#[inline]
fn after(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) < 0
}

/// `usecs_to_jiffies` (`include/linux/jiffies.h`), rounding up: `ceil(us · hz / 10^6)`. Computed
/// in 64 bits: Linux's `u + USEC_PER_SEC/HZ − 1` wraps for `us` within 1000 of 2^32 (71 min),
/// this does not.
#[inline]
fn usecs_to_jiffies(us: u32, hz: u32) -> u64 {
    (u64::from(us)
        .wrapping_mul(u64::from(hz))
        .wrapping_add(999_999))
        / 1_000_000
}

/// `(scale · offs^3) >> (10 + 3·BICTCP_HZ)`, the cubic term `C·(t − K)^3` in segments, saturated
/// to u32. Exact (bit-identical to Linux) while the 64-bit product does not overflow, i.e.
/// `|t − K|` below ~347 s for scale 410; Linux's product wraps beyond that. There it is computed
/// from `offs` rounded down to whole seconds (relative error < 1 %), and saturates at
/// `u32::MAX` when even that overflows.
#[inline]
fn cubic_delta(scale: u32, offs: u64) -> u32 {
    const SHIFT: u32 = 10 + 3 * BICTCP_HZ;
    let exact = u64::from(scale)
        .checked_mul(offs)
        .and_then(|v| v.checked_mul(offs))
        .and_then(|v| v.checked_mul(offs));
    let d = match exact {
        Some(v) => v >> SHIFT,
        None => {
            // offs = o·2^10 + r: scale·o^3·2^30 >> 40 = scale·o^3 >> 10.
            let o = offs >> BICTCP_HZ;
            match u64::from(scale)
                .checked_mul(o)
                .and_then(|v| v.checked_mul(o))
                .and_then(|v| v.checked_mul(o))
            {
                Some(v) => v >> (SHIFT - 3 * BICTCP_HZ),
                None => u64::MAX,
            }
        }
    };
    u32::try_from(d).unwrap_or(u32::MAX)
}

/// `cbrt(x)` estimates for `x` in `[0, 63]`, stored as `cbrt(x·2^18) − 1` (a value `v` stands
/// for `(v + 10) / 64`). Linux's `cubic_root` table (tuned by Willy Tarreau); identical values so
/// that K is bit-for-bit the kernel's.
const CBRT_TABLE: [u8; 64] = [
    0, 54, 54, 54, 118, 118, 118, 118, //
    123, 129, 134, 138, 143, 147, 151, 156, //
    157, 161, 164, 168, 170, 173, 176, 179, //
    181, 185, 187, 190, 192, 194, 197, 199, //
    200, 202, 204, 206, 209, 211, 213, 215, //
    217, 219, 221, 222, 224, 225, 227, 229, //
    231, 232, 234, 236, 237, 239, 240, 242, //
    244, 245, 246, 248, 250, 251, 252, 254, //
];

#[inline]
fn cbrt_table(i: u64) -> u32 {
    usize::try_from(i)
        .ok()
        .and_then(|i| CBRT_TABLE.get(i))
        .map_or(0, |&v| u32::from(v))
}

/// Integer cube root, `≈ cbrt(a)` rounded to an integer: exactly Linux's `cubic_root`
/// (`net/ipv4/tcp_cubic.c`), a 64-entry table lookup on the top bits followed by one
/// Newton–Raphson step `x ← (2x + a/(x·(x−1)))/3` (the `/3` as `·341 >> 10`). Linux quotes an
/// average error of ~0.2 %; the tests bound the error against the exact cube root (at most 1
/// for `a < 64`, and within 1 + 1 % of `cbrt(a)` above). Total: the table index is always in
/// range and the Newton divisor is never 0 for `a ≥ 64` (x ≥ 4 there), which the tests check
/// for every bit length; a 0 divisor would give quotient 0 instead of a trap.
pub fn cubic_root(a: u64) -> u32 {
    let bits = u64::BITS.wrapping_sub(a.leading_zeros()); // fls64(a)
    if bits < 7 {
        // a in [0, 63]: the table alone, rounded (+35 instead of +10).
        return cbrt_table(a).wrapping_add(35) >> 6;
    }
    // b ≈ bits/3 − 1 (84/256 ≈ 1/3): a >> 3b keeps the top ~6 bits, cbrt(a) ≈ cbrt(top)·2^b.
    let b = (bits.wrapping_mul(84) >> 8).wrapping_sub(1);
    let top = a.wrapping_shr(b.wrapping_mul(3));
    let x = cbrt_table(top).wrapping_add(10).wrapping_shl(b) >> 6;
    // One Newton-Raphson step.
    let div = u64::from(x).wrapping_mul(u64::from(x.wrapping_sub(1)));
    let q = a.checked_div(div).unwrap_or(0) as u32;
    let x = x.wrapping_mul(2).wrapping_add(q);
    x.wrapping_mul(341) >> 10
}

/// `max(cnt · FX_ONE / f_fx, 1)`: the ACKs-per-increment count of MLTCP-CUBIC, so that the window
/// grows F times as fast as CUBIC's. `f_fx = 0` gives `u32::MAX` (no growth); saturates.
#[inline]
pub fn mltcp_scale_cnt(cnt: u32, f_fx: u32) -> u32 {
    let c = (u64::from(cnt) << FX_SHIFT)
        .checked_div(u64::from(f_fx))
        .unwrap_or(u64::MAX);
    u32::try_from(c).unwrap_or(u32::MAX).max(1)
}

impl Cubic {
    /// `bictcp_reset`: clears everything up to `unused`/`ack_frac_fx` (the epoch, W_max, `delay_min`, the Reno
    /// emulation) and `found`; the HyStart round fields are kept.
    fn reset(&mut self) {
        *self = Cubic {
            ack_frac_fx: self.ack_frac_fx,
            sample_cnt: self.sample_cnt,
            found: 0,
            round_start: self.round_start,
            end_seq: self.end_seq,
            last_ack: self.last_ack,
            curr_rtt: self.curr_rtt,
            ..Cubic::default()
        };
    }

    /// `bictcp_hystart_reset`: a new HyStart round begins now and ends when `snd_nxt` is ACKed.
    fn hystart_reset(&mut self, clk: &Clock) {
        self.round_start = clk.now_us;
        self.last_ack = clk.now_us;
        self.end_seq = clk.snd_nxt;
        self.curr_rtt = u32::MAX;
        self.sample_cnt = 0;
    }

    /// `cubictcp_init` (`initial_ssthresh` from `c`, Linux default 0 = untouched).
    pub fn init(&mut self, c: &CubicParams, w: &mut Window, clk: &Clock) {
        self.reset();
        if c.hystart {
            self.hystart_reset(clk);
        }
        if !c.hystart && c.initial_ssthresh != 0 {
            w.ssthresh = c.initial_ssthresh;
        }
    }

    /// `cubictcp_cwnd_event(CA_EVENT_TX_START)`: after an application-limited (idle) period, shift
    /// `epoch_start` forward by the idle time so the window keeps following the cubic curve
    /// instead of jumping (never beyond now). `lsndtime_jiffies` = `tp->lsndtime`.
    pub fn on_tx_start(&mut self, clk: &Clock, lsndtime_jiffies: u32) {
        let now = clk.now_jiffies;
        let delta = now.wrapping_sub(lsndtime_jiffies) as i32;
        if self.epoch_start != 0 && delta > 0 {
            self.epoch_start = self.epoch_start.wrapping_add(delta as u32);
            if after(self.epoch_start, now) {
                self.epoch_start = now;
            }
        }
    }

    /// `bictcp_update`: recompute `cnt` (ACKs per +1 segment) so that cwnd follows
    /// `W_cubic(t + RTT)` (RFC 9438 §4.2), limited by the Reno-friendly window (§4.3) and by
    /// "at most +1 segment per 2 ACKs".
    ///
    /// `f_fx` scales the ACK count of the Reno emulation (MLTCP; `FX_ONE` for plain CUBIC, which
    /// then counts exactly `acked`).
    fn update(&mut self, c: &CubicParams, cwnd: u32, acked: u32, now: u32, f_fx: u32) {
        let acked = self.scaled_acked(acked, f_fx);
        self.ack_cnt = self.ack_cnt.wrapping_add(acked);

        // Same window and less than 1/32 s since the last computation: keep cnt.
        let since_last = now.wrapping_sub(self.last_time) as i32;
        if self.last_cwnd == cwnd && i64::from(since_last) <= i64::from(c.hz / 32) {
            return;
        }

        // At most one cubic computation per jiffy (epoch_start = 0 after a reduction forces one).
        if !(self.epoch_start != 0 && now == self.last_time) {
            self.cubic_cnt(c, cwnd, acked, now);
        }

        if c.tcp_friendliness {
            self.reno_friendly(c, cwnd);
        }

        // Never faster than one segment per two ACKs (cwnd ×1.5 per RTT).
        self.cnt = self.cnt.max(2);
    }

    /// `acked · f_fx / FX_ONE` ACKs, carrying the fraction in `ack_frac_fx` (exactly `acked` and
    /// no carry when `f_fx = FX_ONE`).
    #[inline]
    fn scaled_acked(&mut self, acked: u32, f_fx: u32) -> u32 {
        let total = u64::from(acked)
            .wrapping_mul(u64::from(f_fx))
            .wrapping_add(u64::from(self.ack_frac_fx) & FX_MASK);
        self.ack_frac_fx = (total & FX_MASK) as u16;
        u32::try_from(total >> FX_SHIFT).unwrap_or(u32::MAX)
    }

    /// The cubic-curve part of `bictcp_update`.
    fn cubic_cnt(&mut self, c: &CubicParams, cwnd: u32, acked: u32, now: u32) {
        self.last_cwnd = cwnd;
        self.last_time = now;

        if self.epoch_start == 0 {
            // A new epoch: the curve starts at cwnd now.
            self.epoch_start = now;
            self.ack_cnt = acked;
            self.tcp_cwnd = cwnd;
            if self.last_max_cwnd <= cwnd {
                // Above the old maximum: probe from here (plateau at cwnd, K = 0).
                self.bic_k = 0;
                self.bic_origin_point = cwnd;
            } else {
                // K = cbrt((W_max − cwnd) / C) in 2^-10 s. The product fits 64 bits for any u32
                // difference with the default C; saturates otherwise (Linux would wrap).
                let gap = u64::from(self.last_max_cwnd.wrapping_sub(cwnd));
                self.bic_k = cubic_root(c.cube_factor.saturating_mul(gap));
                self.bic_origin_point = self.last_max_cwnd;
            }
        }

        // t = time since the epoch began + min RTT, in 2^-10 s (W_cubic(t + RTT), RFC 9438 §4.2).
        // Linux reads the elapsed jiffies as s32, so an epoch older than 2^31 jiffies (24.8 days
        // at HZ=1000) turns negative there; read as u32 here, which is right up to 49.7 days.
        let elapsed = u64::from(now.wrapping_sub(self.epoch_start));
        let t_jiffies = elapsed.wrapping_add(usecs_to_jiffies(self.delay_min, c.hz));
        // < 2^33 · 2^10: no overflow.
        let t = (t_jiffies << BICTCP_HZ)
            .checked_div(u64::from(c.hz))
            .unwrap_or(0);

        let k = u64::from(self.bic_k);
        let below = t < k;
        let offs = if below {
            k.wrapping_sub(t)
        } else {
            t.wrapping_sub(k)
        };
        let delta = cubic_delta(c.cube_rtt_scale, offs);
        let target = if below {
            self.bic_origin_point.saturating_sub(delta)
        } else {
            self.bic_origin_point.saturating_add(delta)
        };

        // Reach the target within one RTT (cwnd ACKs): one segment per cwnd/(target − cwnd).
        self.cnt = if target > cwnd {
            cwnd.checked_div(target.wrapping_sub(cwnd)).unwrap_or(0)
        } else {
            // At or above the target: grow very slowly (1 segment per 100 windows).
            cwnd.saturating_mul(100)
        };

        // No W_max yet (first epoch, bandwidth unknown): at least +5 % per RTT.
        if self.last_max_cwnd == 0 && self.cnt > 20 {
            self.cnt = 20;
        }
    }

    /// The Reno-friendly part of `bictcp_update` (RFC 9438 §4.3): an emulated Reno window grows
    /// by one segment per `cwnd·beta_scale/8` ACKs, i.e. by `3(1−β)/(1+β)` per RTT; if it is ahead
    /// of cwnd, grow at least as fast as needed to catch up within one RTT.
    ///
    /// Linux steps `ack_cnt` down in a loop (and would spin forever if the step were 0); this
    /// computes the same result with one division, and skips a zero step. The step is computed
    /// in 64 bits and saturated (Linux's u32 product wraps beyond 286 M segments).
    fn reno_friendly(&mut self, c: &CubicParams, cwnd: u32) {
        let step = (u64::from(cwnd).wrapping_mul(u64::from(c.beta_scale))) >> 3;
        let step = u32::try_from(step).unwrap_or(u32::MAX);
        if step != 0 && self.ack_cnt > step {
            // Linux: while (ack_cnt > step) { ack_cnt -= step; tcp_cwnd++; }
            let n = self.ack_cnt.wrapping_sub(1).checked_div(step).unwrap_or(0);
            self.ack_cnt = self.ack_cnt.wrapping_sub(n.wrapping_mul(step));
            self.tcp_cwnd = self.tcp_cwnd.saturating_add(n);
        }
        if self.tcp_cwnd > cwnd {
            let behind = self.tcp_cwnd.wrapping_sub(cwnd);
            let max_cnt = cwnd.checked_div(behind).unwrap_or(0);
            if self.cnt > max_cnt {
                self.cnt = max_cnt;
            }
        }
    }

    /// `cubictcp_cong_avoid`: nothing unless cwnd-limited; slow start below ssthresh
    /// ([`reno::slow_start`]); then CUBIC growth through [`reno::cong_avoid_ai`] with `cnt`.
    #[inline]
    pub fn cong_avoid(
        &mut self,
        c: &CubicParams,
        w: &mut Window,
        acked: u32,
        cwnd_limited: bool,
        clk: &Clock,
    ) {
        if let Some(acked) = self.prepare(c, w, acked, cwnd_limited, clk, FX_ONE, FX_ONE) {
            reno::cong_avoid_ai(w, self.cnt, acked);
        }
    }

    /// MLTCP-CUBIC (thesis ch. 5: scale the increase step by F). Identical to
    /// [`Cubic::cong_avoid`] except:
    /// - the ACKs-per-increment count from `bictcp_update` is divided by F
    ///   ([`mltcp_scale_cnt`]`(cnt, f_fx)`), so cwnd approaches its target F times as fast
    ///   (`cnt` itself is stored unscaled, it may be reused on the next ACK);
    /// - the Reno emulation of the Reno-friendly region (RFC 9438 §4.3) counts `acked · F` ACKs,
    ///   so the emulated window grows `F · 3(1−β)/(1+β)` segments per RTT.
    ///
    /// Why the second: CUBIC's target is a function of time (curve) or of ACKs (emulated Reno),
    /// not of past increments, so dividing `cnt` alone only changes how fast cwnd catches up with
    /// a target that moves at CUBIC's pace (measured: growth after 1 s at 10 ms RTT 48/51/52
    /// segments for F = 0.25/1/2). With the emulation scaled too, F acts wherever the
    /// Reno-friendly region governs, which is the data-centre case (small windows, µs RTTs, K of
    /// seconds). On the cubic curve itself (large BDP) F still only changes the catch-up speed.
    ///
    /// - slow start grows by `ss_f_fx` per ACKed segment ([`reno::mltcp_slow_start`]; the glue
    ///   passes [`super::iteration::slow_start_gain_fx`]).
    ///
    /// With `f_fx = ss_f_fx = FX_ONE` this is exactly [`Cubic::cong_avoid`] (same state, bit for
    /// bit).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn mltcp_cong_avoid(
        &mut self,
        c: &CubicParams,
        w: &mut Window,
        acked: u32,
        cwnd_limited: bool,
        clk: &Clock,
        f_fx: u32,
        ss_f_fx: u32,
    ) {
        if let Some(acked) = self.prepare(c, w, acked, cwnd_limited, clk, f_fx, ss_f_fx) {
            reno::cong_avoid_ai(w, mltcp_scale_cnt(self.cnt, f_fx), acked);
        }
    }

    /// Common head of the two: slow start (scaled by `ss_f_fx`, [`reno::mltcp_slow_start`]),
    /// then `bictcp_update`; `None` when nothing is left to do.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn prepare(
        &mut self,
        c: &CubicParams,
        w: &mut Window,
        acked: u32,
        cwnd_limited: bool,
        clk: &Clock,
        f_fx: u32,
        ss_f_fx: u32,
    ) -> Option<u32> {
        if !cwnd_limited {
            return None;
        }
        let mut acked = acked;
        if reno::in_slow_start(w) {
            acked = reno::mltcp_slow_start(w, acked, ss_f_fx);
            if acked == 0 {
                return None;
            }
        }
        self.update(c, w.cwnd, acked, clk.now_jiffies, f_fx);
        Some(acked)
    }

    /// `cubictcp_recalc_ssthresh` (the `ssthresh` op, on loss/ECN): ends the epoch, records W_max
    /// (reduced to `cwnd·(1+β)/2` by fast convergence when below the previous W_max, RFC 9438
    /// §4.7) and returns the new ssthresh `max(cwnd·β, 2)` (§4.6). Products in 64 bits (Linux's
    /// u32 products wrap above ~2.4 M and ~6 M segments), identical below.
    pub fn recalc_ssthresh(&mut self, c: &CubicParams, w: &Window) -> u32 {
        const SCALE: u64 = BICTCP_BETA_SCALE as u64;
        // u32 · (u32 + 1024) < 2^64: no overflow.
        let cwnd = u64::from(w.cwnd);
        let beta = u64::from(c.beta);
        self.epoch_start = 0;
        self.last_max_cwnd = if w.cwnd < self.last_max_cwnd && c.fast_convergence {
            let v = cwnd.wrapping_mul(SCALE.wrapping_add(beta)) / (2 * SCALE);
            u32::try_from(v).unwrap_or(u32::MAX)
        } else {
            w.cwnd
        };
        let ss = cwnd.wrapping_mul(beta) / SCALE;
        u32::try_from(ss).unwrap_or(u32::MAX).max(2)
    }

    /// `cubictcp_state(TCP_CA_Loss)` (RTO): forget the epoch, W_max and `delay_min`, and start a
    /// new HyStart round.
    pub fn on_loss_state(&mut self, _c: &CubicParams, clk: &Clock) {
        self.reset();
        self.hystart_reset(clk);
    }

    /// `cubictcp_acked` (the `pkts_acked` op): track the minimum RTT and run HyStart in slow
    /// start. `rtt_us < 0` means no sample; samples within 1 s of a reduction (epoch start) are
    /// ignored. `pacing_rate`: `sk->sk_pacing_rate`, bytes/s; `gso_max_size`:
    /// `sk->sk_gso_max_size`, bytes. May set `w.ssthresh = w.cwnd` (slow-start exit).
    pub fn pkts_acked(
        &mut self,
        c: &CubicParams,
        w: &mut Window,
        rtt_us: i32,
        clk: &Clock,
        pacing_rate: u64,
        gso_max_size: u32,
    ) {
        if rtt_us < 0 {
            return;
        }
        let since_epoch = clk.now_jiffies.wrapping_sub(self.epoch_start) as i32;
        if self.epoch_start != 0 && i64::from(since_epoch) < i64::from(c.hz) {
            return;
        }
        let delay = (rtt_us as u32).max(1);
        if self.delay_min == 0 || self.delay_min > delay {
            self.delay_min = delay;
        }
        if self.found == 0 && reno::in_slow_start(w) && c.hystart {
            self.hystart_update(c, w, delay, clk, pacing_rate, gso_max_size);
        }
    }

    /// `hystart_update`: the two HyStart slow-start exit detectors.
    fn hystart_update(
        &mut self,
        c: &CubicParams,
        w: &mut Window,
        delay: u32,
        clk: &Clock,
        pacing_rate: u64,
        gso_max_size: u32,
    ) {
        if after(clk.snd_una, self.end_seq) {
            self.hystart_reset(clk);
        }
        if w.cwnd < c.hystart_low_window {
            return;
        }
        if c.hystart_detect & HYSTART_ACK_TRAIN != 0 {
            let now = clk.now_us;
            let gap = now.wrapping_sub(self.last_ack) as i32;
            if i64::from(gap) <= i64::from(c.hystart_ack_delta_us) {
                self.last_ack = now;
                let mut threshold = self
                    .delay_min
                    .saturating_add(hystart_ack_delay(pacing_rate, gso_max_size));
                // Unpaced: the train must last half the min RTT (pacing may delay it up to RTT/2).
                if !clk.pacing_enabled {
                    threshold >>= 1;
                }
                // Unsigned comparison, as in C (s32 vs u32).
                if now.wrapping_sub(self.round_start) > threshold {
                    self.found = 1;
                    w.ssthresh = w.cwnd;
                }
            }
        }
        if c.hystart_detect & HYSTART_DELAY != 0 {
            if self.curr_rtt > delay {
                self.curr_rtt = delay;
            }
            if self.sample_cnt < HYSTART_MIN_SAMPLES {
                self.sample_cnt = self.sample_cnt.wrapping_add(1);
            } else {
                let eta = (self.delay_min >> 3).clamp(HYSTART_DELAY_MIN, HYSTART_DELAY_MAX);
                if self.curr_rtt > self.delay_min.saturating_add(eta) {
                    self.found = 1;
                    w.ssthresh = w.cwnd;
                }
            }
        }
    }
}

/// `hystart_ack_delay`: allowance for TSO/GRO aggregation in the ACK-train test, µs: the time to
/// send 4 GSO-sized packets at the pacing rate, at most 1 ms; 0 when the rate is unknown.
#[inline]
fn hystart_ack_delay(pacing_rate: u64, gso_max_size: u32) -> u32 {
    // gso_max_size · 4 · 10^6 < 2^32 · 2^22: no overflow.
    let t = (u64::from(gso_max_size).wrapping_mul(4_000_000)).checked_div(pacing_rate);
    match t {
        None => 0,
        Some(t) => u32::try_from(t.min(1000)).unwrap_or(1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_scales() {
        let c = CubicParams::LINUX_DEFAULT;
        assert_eq!(c.beta_scale, 15);
        assert_eq!(c.cube_rtt_scale, 410);
        assert_eq!(c.cube_factor, (1u64 << 40) / 410);
        let odd = CubicParams {
            beta: 5000,
            bic_scale: 0,
            ..c
        }
        .with_scales();
        assert_eq!(odd.cube_rtt_scale, 10);
        assert!(odd.beta_scale > 0);
    }

    #[test]
    fn cubic_root_small() {
        for a in 0u64..64 {
            let r = cubic_root(a) as f64;
            assert!((r - (a as f64).cbrt()).abs() <= 1.0, "{a}: {r}");
        }
        assert_eq!(cubic_root(0), 0);
        assert_eq!(cubic_root(1), 1);
        assert_eq!(cubic_root(8), 2);
        assert_eq!(cubic_root(27), 3);
    }

    #[test]
    fn cubic_root_every_bit_length() {
        for bits in 7u32..=64 {
            let lo = 1u64 << (bits - 1);
            let hi = if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            for a in [lo, lo + 1, lo + lo / 3, lo / 2 + hi / 2, hi - 1, hi] {
                // Index of the table stays < 64 and x >= 4 before the Newton step.
                let b = ((bits * 84) >> 8) - 1;
                assert!(a >> (b * 3) < 64, "bits {bits}");
                let x = ((CBRT_TABLE[(a >> (b * 3)) as usize] as u32 + 10) << b) >> 6;
                assert!(x >= 4, "bits {bits} x {x}");
                let r = cubic_root(a) as f64;
                let e = (a as f64).cbrt();
                assert!((r - e).abs() <= 1.0 + e * 0.01, "a {a}: {r} vs {e}");
            }
        }
    }

    #[test]
    fn usecs_to_jiffies_rounds_up() {
        assert_eq!(usecs_to_jiffies(0, 1000), 0);
        assert_eq!(usecs_to_jiffies(1, 1000), 1);
        assert_eq!(usecs_to_jiffies(1000, 1000), 1);
        assert_eq!(usecs_to_jiffies(1001, 1000), 2);
        assert_eq!(usecs_to_jiffies(100_000, 250), 25);
        assert_eq!(usecs_to_jiffies(u32::MAX, 1000), 4_294_968);
    }

    #[test]
    fn delta_exact_then_coarse() {
        // In range: exactly Linux's expression.
        for offs in [0u64, 1, 1024, 100_000, 355_000] {
            let linux = (410u64
                .wrapping_mul(offs)
                .wrapping_mul(offs)
                .wrapping_mul(offs)
                >> 40) as u32;
            assert_eq!(cubic_delta(410, offs), linux);
        }
        // Beyond: monotone, close to C·t^3.
        let a = cubic_delta(410, 400 * 1024);
        let b = cubic_delta(410, 401 * 1024);
        assert!(b > a);
        let exact = 0.4004 * 400f64.powi(3);
        assert!(((a as f64) - exact).abs() < exact * 0.01, "{a} vs {exact}");
        assert_eq!(cubic_delta(410, u64::MAX), u32::MAX);
    }

    #[test]
    fn ack_delay() {
        assert_eq!(hystart_ack_delay(0, 65536), 0);
        assert_eq!(hystart_ack_delay(1, 65536), 1000);
        // 64 KB · 4 at 1.25 GB/s = 209 µs
        assert_eq!(hystart_ack_delay(1_250_000_000, 65536), 209);
        assert_eq!(hystart_ack_delay(u64::MAX, u32::MAX), 0);
    }

    #[test]
    fn scale_cnt() {
        assert_eq!(mltcp_scale_cnt(10, 1024), 10);
        assert_eq!(mltcp_scale_cnt(10, 2048), 5);
        assert_eq!(mltcp_scale_cnt(2, 4096), 1);
        assert_eq!(mltcp_scale_cnt(0, 1024), 1);
        assert_eq!(mltcp_scale_cnt(10, 0), u32::MAX);
        assert_eq!(mltcp_scale_cnt(u32::MAX, 1), u32::MAX);
    }
}
