// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Test support: straightforward reference models of Linux 6.12's `net/ipv4/tcp_cong.c` (Reno) and
//! `net/ipv4/tcp_cubic.c` (CUBIC + HyStart), written the way the C code reads (u32 wrapping
//! arithmetic, `(s32)` casts, the Reno-emulation `while` loop), plus a small event-driven socket
//! model used by the differential and identity tests.
#![allow(dead_code)]

use mltcp_math::cubic::{Clock, Cubic, CubicParams};
use mltcp_math::reno::Window;

/// Linux's `tcp_sock` window fields, for the reference models.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RefTp {
    pub snd_cwnd: u32,
    pub snd_cwnd_cnt: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd_clamp: u32,
}

impl RefTp {
    pub fn from_window(w: &Window) -> Self {
        RefTp {
            snd_cwnd: w.cwnd,
            snd_cwnd_cnt: w.cwnd_cnt,
            snd_ssthresh: w.ssthresh,
            snd_cwnd_clamp: w.cwnd_clamp,
        }
    }
    pub fn to_window(self) -> Window {
        Window {
            cwnd: self.snd_cwnd,
            cwnd_cnt: self.snd_cwnd_cnt,
            ssthresh: self.snd_ssthresh,
            cwnd_clamp: self.snd_cwnd_clamp,
        }
    }
}

pub fn ref_in_slow_start(tp: &RefTp) -> bool {
    tp.snd_cwnd < tp.snd_ssthresh
}

/// tcp_slow_start, C semantics.
pub fn ref_slow_start(tp: &mut RefTp, mut acked: u32) -> u32 {
    let cwnd = tp.snd_cwnd.wrapping_add(acked).min(tp.snd_ssthresh);
    acked = acked.wrapping_sub(cwnd.wrapping_sub(tp.snd_cwnd));
    tp.snd_cwnd = cwnd.min(tp.snd_cwnd_clamp);
    acked
}

/// tcp_cong_avoid_ai, C semantics (w must be > 0, as in every Linux caller).
pub fn ref_cong_avoid_ai(tp: &mut RefTp, w: u32, acked: u32) {
    assert!(w > 0);
    if tp.snd_cwnd_cnt >= w {
        tp.snd_cwnd_cnt = 0;
        tp.snd_cwnd = tp.snd_cwnd.wrapping_add(1);
    }
    tp.snd_cwnd_cnt = tp.snd_cwnd_cnt.wrapping_add(acked);
    if tp.snd_cwnd_cnt >= w {
        let delta = tp.snd_cwnd_cnt / w;
        tp.snd_cwnd_cnt -= delta * w;
        tp.snd_cwnd = tp.snd_cwnd.wrapping_add(delta);
    }
    tp.snd_cwnd = tp.snd_cwnd.min(tp.snd_cwnd_clamp);
}

/// tcp_reno_cong_avoid.
pub fn ref_reno_cong_avoid(tp: &mut RefTp, mut acked: u32, cwnd_limited: bool) {
    if !cwnd_limited {
        return;
    }
    if ref_in_slow_start(tp) {
        acked = ref_slow_start(tp, acked);
        if acked == 0 {
            return;
        }
    }
    let w = tp.snd_cwnd;
    ref_cong_avoid_ai(tp, w, acked);
}

pub fn ref_reno_ssthresh(tp: &RefTp) -> u32 {
    (tp.snd_cwnd >> 1).max(2)
}

/// struct bictcp and the tcp_cubic.c functions, C semantics (HZ and the module params from
/// `CubicParams`, but scale factors recomputed here from scratch as cubictcp_register does).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RefBictcp {
    pub cnt: u32,
    pub last_max_cwnd: u32,
    pub last_cwnd: u32,
    pub last_time: u32,
    pub bic_origin_point: u32,
    pub bic_k: u32,
    pub delay_min: u32,
    pub epoch_start: u32,
    pub ack_cnt: u32,
    pub tcp_cwnd: u32,
    pub unused: u16,
    pub sample_cnt: u8,
    pub found: u8,
    pub round_start: u32,
    pub end_seq: u32,
    pub last_ack: u32,
    pub curr_rtt: u32,
}

impl RefBictcp {
    pub fn to_cubic(self) -> Cubic {
        Cubic {
            cnt: self.cnt,
            last_max_cwnd: self.last_max_cwnd,
            last_cwnd: self.last_cwnd,
            last_time: self.last_time,
            bic_origin_point: self.bic_origin_point,
            bic_k: self.bic_k,
            delay_min: self.delay_min,
            epoch_start: self.epoch_start,
            ack_cnt: self.ack_cnt,
            tcp_cwnd: self.tcp_cwnd,
            ack_frac_fx: self.unused,
            sample_cnt: self.sample_cnt,
            found: self.found,
            round_start: self.round_start,
            end_seq: self.end_seq,
            last_ack: self.last_ack,
            curr_rtt: self.curr_rtt,
        }
    }
}

fn ref_after(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) < 0
}

const REF_CBRT: [u8; 64] = [
    0, 54, 54, 54, 118, 118, 118, 118, 123, 129, 134, 138, 143, 147, 151, 156, 157, 161, 164, 168,
    170, 173, 176, 179, 181, 185, 187, 190, 192, 194, 197, 199, 200, 202, 204, 206, 209, 211, 213,
    215, 217, 219, 221, 222, 224, 225, 227, 229, 231, 232, 234, 236, 237, 239, 240, 242, 244, 245,
    246, 248, 250, 251, 252, 254,
];

pub fn ref_cubic_root(a: u64) -> u32 {
    let b = 64 - a.leading_zeros();
    if b < 7 {
        return (REF_CBRT[a as usize] as u32 + 35) >> 6;
    }
    let b = ((b * 84) >> 8) - 1;
    let shift = (a >> (b * 3)) as u32;
    let x = ((REF_CBRT[shift as usize] as u32 + 10) << b) >> 6;
    let x = 2 * x + (a / (x as u64 * (x - 1) as u64)) as u32;
    (x * 341) >> 10
}

pub struct RefCubic {
    pub c: CubicParams,
    pub beta_scale: u32,
    pub cube_rtt_scale: u32,
    pub cube_factor: u64,
}

impl RefCubic {
    pub fn new(c: CubicParams) -> Self {
        let beta = c.beta as i32;
        let beta_scale = (8 * (1024 + beta) / 3 / (1024 - beta)) as u32;
        let cube_rtt_scale = c.bic_scale * 10;
        let cube_factor = (1u64 << 40) / (c.bic_scale as u64 * 10);
        RefCubic {
            c,
            beta_scale,
            cube_rtt_scale,
            cube_factor,
        }
    }

    fn reset(ca: &mut RefBictcp) {
        let keep = *ca;
        *ca = RefBictcp::default();
        ca.unused = keep.unused;
        ca.sample_cnt = keep.sample_cnt;
        ca.round_start = keep.round_start;
        ca.end_seq = keep.end_seq;
        ca.last_ack = keep.last_ack;
        ca.curr_rtt = keep.curr_rtt;
        ca.found = 0;
    }

    fn hystart_reset(ca: &mut RefBictcp, clk: &Clock) {
        ca.round_start = clk.now_us;
        ca.last_ack = clk.now_us;
        ca.end_seq = clk.snd_nxt;
        ca.curr_rtt = !0;
        ca.sample_cnt = 0;
    }

    pub fn init(&self, ca: &mut RefBictcp, tp: &mut RefTp, clk: &Clock) {
        Self::reset(ca);
        if self.c.hystart {
            Self::hystart_reset(ca, clk);
        }
        if !self.c.hystart && self.c.initial_ssthresh != 0 {
            tp.snd_ssthresh = self.c.initial_ssthresh;
        }
    }

    pub fn cwnd_event_tx_start(&self, ca: &mut RefBictcp, clk: &Clock, lsndtime: u32) {
        let now = clk.now_jiffies;
        let delta = now.wrapping_sub(lsndtime) as i32;
        if ca.epoch_start != 0 && delta > 0 {
            ca.epoch_start = ca.epoch_start.wrapping_add(delta as u32);
            if ref_after(ca.epoch_start, now) {
                ca.epoch_start = now;
            }
        }
    }

    fn usecs_to_jiffies(&self, u: u32) -> u64 {
        let m = 1_000_000 / self.c.hz;
        (u.wrapping_add(m - 1) / m) as u64
    }

    pub fn update(&self, ca: &mut RefBictcp, cwnd: u32, acked: u32, now: u32) {
        let hz = self.c.hz;
        ca.ack_cnt = ca.ack_cnt.wrapping_add(acked);
        if ca.last_cwnd == cwnd && (now.wrapping_sub(ca.last_time) as i32) <= (hz / 32) as i32 {
            return;
        }
        if !(ca.epoch_start != 0 && now == ca.last_time) {
            ca.last_cwnd = cwnd;
            ca.last_time = now;
            if ca.epoch_start == 0 {
                ca.epoch_start = now;
                ca.ack_cnt = acked;
                ca.tcp_cwnd = cwnd;
                if ca.last_max_cwnd <= cwnd {
                    ca.bic_k = 0;
                    ca.bic_origin_point = cwnd;
                } else {
                    ca.bic_k = ref_cubic_root(
                        self.cube_factor
                            .wrapping_mul((ca.last_max_cwnd - cwnd) as u64),
                    );
                    ca.bic_origin_point = ca.last_max_cwnd;
                }
            }
            let mut t: u64 = (now.wrapping_sub(ca.epoch_start) as i32) as i64 as u64;
            t = t.wrapping_add(self.usecs_to_jiffies(ca.delay_min));
            t = t.wrapping_shl(10);
            t /= hz as u64;
            let offs = (ca.bic_k as u64).abs_diff(t);
            let delta = ((self.cube_rtt_scale as u64)
                .wrapping_mul(offs)
                .wrapping_mul(offs)
                .wrapping_mul(offs)
                >> 40) as u32;
            let bic_target = if t < ca.bic_k as u64 {
                ca.bic_origin_point.wrapping_sub(delta)
            } else {
                ca.bic_origin_point.wrapping_add(delta)
            };
            if bic_target > cwnd {
                ca.cnt = cwnd / (bic_target - cwnd);
            } else {
                ca.cnt = 100u32.wrapping_mul(cwnd);
            }
            if ca.last_max_cwnd == 0 && ca.cnt > 20 {
                ca.cnt = 20;
            }
        }
        // tcp_friendliness:
        if self.c.tcp_friendliness {
            let delta = cwnd.wrapping_mul(self.beta_scale) >> 3;
            while ca.ack_cnt > delta {
                ca.ack_cnt -= delta;
                ca.tcp_cwnd = ca.tcp_cwnd.wrapping_add(1);
            }
            if ca.tcp_cwnd > cwnd {
                let delta = ca.tcp_cwnd - cwnd;
                let max_cnt = cwnd / delta;
                if ca.cnt > max_cnt {
                    ca.cnt = max_cnt;
                }
            }
        }
        ca.cnt = ca.cnt.max(2);
    }

    pub fn cong_avoid(
        &self,
        ca: &mut RefBictcp,
        tp: &mut RefTp,
        mut acked: u32,
        cwnd_limited: bool,
        clk: &Clock,
    ) {
        if !cwnd_limited {
            return;
        }
        if ref_in_slow_start(tp) {
            acked = ref_slow_start(tp, acked);
            if acked == 0 {
                return;
            }
        }
        self.update(ca, tp.snd_cwnd, acked, clk.now_jiffies);
        ref_cong_avoid_ai(tp, ca.cnt, acked);
    }

    pub fn recalc_ssthresh(&self, ca: &mut RefBictcp, tp: &RefTp) -> u32 {
        ca.epoch_start = 0;
        if tp.snd_cwnd < ca.last_max_cwnd && self.c.fast_convergence {
            ca.last_max_cwnd = tp.snd_cwnd.wrapping_mul(1024 + self.c.beta) / 2048;
        } else {
            ca.last_max_cwnd = tp.snd_cwnd;
        }
        (tp.snd_cwnd.wrapping_mul(self.c.beta) / 1024).max(2)
    }

    pub fn state_loss(&self, ca: &mut RefBictcp, clk: &Clock) {
        Self::reset(ca);
        Self::hystart_reset(ca, clk);
    }

    fn hystart_ack_delay(rate: u64, gso: u32) -> u32 {
        if rate == 0 {
            return 0;
        }
        (1000u64).min(gso as u64 * 4 * 1_000_000 / rate) as u32
    }

    fn hystart_update(
        &self,
        ca: &mut RefBictcp,
        tp: &mut RefTp,
        delay: u32,
        clk: &Clock,
        rate: u64,
        gso: u32,
    ) {
        if ref_after(clk.snd_una, ca.end_seq) {
            Self::hystart_reset(ca, clk);
        }
        if tp.snd_cwnd < self.c.hystart_low_window {
            return;
        }
        if self.c.hystart_detect & 1 != 0 {
            let now = clk.now_us;
            if (now.wrapping_sub(ca.last_ack) as i32) <= self.c.hystart_ack_delta_us as i32 {
                ca.last_ack = now;
                let mut threshold = ca
                    .delay_min
                    .wrapping_add(Self::hystart_ack_delay(rate, gso));
                if !clk.pacing_enabled {
                    threshold >>= 1;
                }
                if now.wrapping_sub(ca.round_start) > threshold {
                    ca.found = 1;
                    tp.snd_ssthresh = tp.snd_cwnd;
                }
            }
        }
        if self.c.hystart_detect & 2 != 0 {
            if ca.curr_rtt > delay {
                ca.curr_rtt = delay;
            }
            if ca.sample_cnt < 8 {
                ca.sample_cnt += 1;
            } else if ca.curr_rtt
                > ca.delay_min
                    .wrapping_add((ca.delay_min >> 3).clamp(4000, 16000))
            {
                ca.found = 1;
                tp.snd_ssthresh = tp.snd_cwnd;
            }
        }
    }

    pub fn acked(
        &self,
        ca: &mut RefBictcp,
        tp: &mut RefTp,
        rtt_us: i32,
        clk: &Clock,
        rate: u64,
        gso: u32,
    ) {
        if rtt_us < 0 {
            return;
        }
        if ca.epoch_start != 0
            && (clk.now_jiffies.wrapping_sub(ca.epoch_start) as i32) < self.c.hz as i32
        {
            return;
        }
        let mut delay = rtt_us as u32;
        if delay == 0 {
            delay = 1;
        }
        if ca.delay_min == 0 || ca.delay_min > delay {
            ca.delay_min = delay;
        }
        if ca.found == 0 && ref_in_slow_start(tp) && self.c.hystart {
            self.hystart_update(ca, tp, delay, clk, rate, gso);
        }
    }
}

/// A socket-level event for the differential and identity tests.
#[derive(Clone, Copy, Debug)]
pub enum Ev {
    /// An ACK of `acked` segments after `dt_us`, with an RTT sample (`rtt_us < 0`: none).
    Ack {
        acked: u32,
        cwnd_limited: bool,
        dt_us: u32,
        rtt_us: i32,
    },
    /// Fast retransmit / ECN: ssthresh op, then cwnd = ssthresh when recovery ends.
    Loss,
    /// RTO: ssthresh op, cwnd = 1, CA_Loss.
    Rto,
    /// Undo of the last reduction (spurious).
    Undo,
    /// The application pauses `gap_us` and sends again (CA_EVENT_TX_START).
    Idle { gap_us: u32 },
}

/// Segment size used to turn ACKed segments into bytes_acked.
pub const MSS: u64 = 1448;
