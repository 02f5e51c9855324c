// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! DCTCP (Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010; RFC 8257) as Linux 6.12's
//! `net/ipv4/tcp_dctcp.c` computes it, for `mltcp_dctcp` (MLTCP over DCTCP, thesis ch. 5: the
//! additive increase scaled by F(bytes_ratio), the ECN-based decrease unchanged).
//!
//! The sender keeps `alpha`, an estimate of the fraction of its bytes that see congestion (CE
//! marks echoed as ECE), updated once per window of data (one RTT):
//! `alpha <- (1 - g) * alpha + g * F_ce`, with `F_ce` = marked / delivered packets in that window
//! and `g = 1/2^shift_g` (1/16 by default). On congestion (an ECE-triggered CWR, the `ssthresh`
//! op) the window shrinks in proportion to the congestion seen: `cwnd * (1 - alpha/2)`, rather than
//! by half. Loss still halves the window, once per RTT (`react_to_loss`). The receiver side
//! ([`Dctcp::ece_ack_update`]) echoes the CE state of each packet exactly, sending an ACK at once
//! whenever the state flips (RFC 8257 §3.2), so delayed ACKs do not blur the marks.
//!
//! Fixed point: `alpha` in `[0, DCTCP_MAX_ALPHA]` with 1024 = 1.0, as tcp_dctcp.c. Sequence numbers
//! and packet counters are the socket's `u32` fields (`snd_una`, `snd_nxt`, `delivered`,
//! `delivered_ce`, `rcv_nxt`), compared with wrap-around as `before()` does.

/// `alpha` = 1.0 (`DCTCP_MAX_ALPHA` in tcp_dctcp.c).
pub const DCTCP_MAX_ALPHA: u32 = 1024;

/// Default `g = 1/2^4` (tcp_dctcp.c's `dctcp_shift_g`, RFC 8257 §4.2 recommends 1/16).
pub const DEFAULT_SHIFT_G: u32 = 4;

/// Default initial `alpha`: 1.0, so the first congestion signal halves the window as Reno would
/// until alpha has been measured (tcp_dctcp.c's `dctcp_alpha_on_init`).
pub const DEFAULT_ALPHA_ON_INIT: u32 = DCTCP_MAX_ALPHA;

/// Per-socket DCTCP state (tcp_dctcp.c's `struct dctcp` without its PLB part). All-zero is valid
/// (alpha 0 until `init`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dctcp {
    /// `delivered` at the start of the current observation window.
    pub old_delivered: u32,
    /// `delivered_ce` at the start of the current observation window.
    pub old_delivered_ce: u32,
    /// The window ends when `snd_una` reaches this sequence number.
    pub next_seq: u32,
    /// Estimated fraction of marked packets, fixed point (1024 = 1.0).
    pub alpha: u32,
    /// cwnd before the last reduction, segments (for undo).
    pub loss_cwnd: u32,
    /// Receiver side: `rcv_nxt` when the CE state was last seen.
    pub prior_rcv_nxt: u32,
    /// Receiver side: whether the last data packet carried CE (0 or 1).
    pub ce_state: u32,
}

/// The sender's counters DCTCP reads (from `tcp_sock`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// `tp->snd_una`.
    pub snd_una: u32,
    /// `tp->snd_nxt`.
    pub snd_nxt: u32,
    /// `tp->delivered`: packets delivered (SACKed or ACKed) so far.
    pub delivered: u32,
    /// `tp->delivered_ce`: of those, packets whose ACK carried ECE.
    pub delivered_ce: u32,
}

/// What the receiver side must do after a data packet ([`Dctcp::ece_ack_update`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EceAction {
    /// A delayed ACK is pending and the CE state flipped: send it now, acknowledging up to this
    /// `rcv_nxt` with ECE = `delayed_ack_ece` (the state it covered), before anything else.
    pub send_delayed_ack: Option<u32>,
    /// The ECE flag of that delayed ACK.
    pub delayed_ack_ece: bool,
    /// Schedule an immediate ACK (`ICSK_ACK_NOW`): the CE state flipped.
    pub ack_now: bool,
    /// Whether ACKs from now on carry ECE (`TCP_ECN_DEMAND_CWR` set or cleared).
    pub demand_cwr: bool,
}

/// `before(a, b)` (`include/net/tcp.h`): `a` precedes `b` in 32-bit sequence space.
#[inline]
pub fn seq_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

impl Dctcp {
    /// `dctcp_init` for an ECN-capable connection: alpha = `alpha_on_init` (at most 1.0), no
    /// loss window, CE state 0, observation window from now.
    pub fn init(&mut self, c: &Counters, rcv_nxt: u32, alpha_on_init: u32) {
        *self = Dctcp {
            alpha: alpha_on_init.min(DCTCP_MAX_ALPHA),
            prior_rcv_nxt: rcv_nxt,
            ..Dctcp::default()
        };
        self.reset(c);
    }

    /// `dctcp_reset`: starts a new observation window at the current counters.
    #[inline]
    pub fn reset(&mut self, c: &Counters) {
        self.next_seq = c.snd_nxt;
        self.old_delivered = c.delivered;
        self.old_delivered_ce = c.delivered_ce;
    }

    /// `dctcp_update_alpha` (the `in_ack_event` op): once `snd_una` has passed the end of the
    /// observation window, `alpha <- alpha - alpha/2^g + (marked/delivered)/2^g` (the decay at
    /// least 1 while alpha > 0, as `min_not_zero`), capped at 1.0; then a new window starts.
    /// `shift_g` above 10 is treated as 10 (the marked fraction would round to 0 anyway).
    pub fn update_alpha(&mut self, c: &Counters, shift_g: u32) {
        if seq_before(c.snd_una, self.next_seq) {
            return;
        }
        let g = shift_g.min(10);
        let delivered = c.delivered.wrapping_sub(self.old_delivered);
        let delivered_ce = c.delivered_ce.wrapping_sub(self.old_delivered_ce);
        let mut alpha = self.alpha;
        // min_not_zero(alpha, alpha >> g): the decay, at least 1 while alpha > 0.
        let decay = match alpha >> g {
            0 => alpha,
            d => d.min(alpha),
        };
        alpha = alpha.saturating_sub(decay);
        if delivered_ce != 0 {
            // (ce << (10 - g)) / delivered, in 64 bits (tcp_dctcp.c's u32 wraps after 8 M
            // packets with g = 1).
            let frac = (u64::from(delivered_ce) << (10u32.saturating_sub(g)))
                .checked_div(u64::from(delivered.max(1)))
                .unwrap_or(0);
            let sum = u64::from(alpha).saturating_add(frac);
            alpha = u32::try_from(sum.min(u64::from(DCTCP_MAX_ALPHA))).unwrap_or(DCTCP_MAX_ALPHA);
        }
        self.alpha = alpha;
        self.reset(c);
    }

    /// `dctcp_ssthresh` (the `ssthresh` op, on an ECE-triggered CWR or loss recovery entry):
    /// remembers cwnd and returns `max(cwnd - cwnd * alpha / 2048, 2)`.
    pub fn ssthresh(&mut self, cwnd: u32) -> u32 {
        self.loss_cwnd = cwnd;
        let cut = (u64::from(cwnd).saturating_mul(u64::from(self.alpha))) >> 11;
        let cut = u32::try_from(cut).unwrap_or(cwnd);
        cwnd.saturating_sub(cut).max(2)
    }

    /// [`Dctcp::ssthresh`] with the cut scaled by `gain / F` (`gain_fx`, `f_fx`, fixed point
    /// 1024 = 1.0): keeps `cwnd - cwnd * alpha * gain / (2F)`, the cut at most half the window
    /// (Reno's, and DCTCP's own at alpha = 1), at least 2 segments. `gain_fx = 1024` divides the
    /// cut by F; F's log-mean ([`super::iteration::f_log_mean_fx`]) makes the scaled cut DCTCP's
    /// on average over an iteration. `raise_only`: F below 1 counts as 1, so only a flow further
    /// into its iteration than the mean cuts less. `f_fx = 0` cuts half.
    ///
    /// Why (this project's extension, MLTCP on ECN ports): DCTCP cuts once per window in which any
    /// of its packets was marked, so with few marks per marking episode a flow with a larger
    /// window is hit in more windows than a smaller one, and an increase scaled by F alone gives
    /// it less than F's share (docs/results/mltcp.md, "F's weighting on ECN ports").
    pub fn ssthresh_scaled(&mut self, cwnd: u32, f_fx: u32, gain_fx: u32, raise_only: bool) -> u32 {
        self.loss_cwnd = cwnd;
        let f_fx = if raise_only { f_fx.max(1024) } else { f_fx };
        // cwnd * alpha/2048 * gain/F = cwnd * alpha * gain_fx / (2048 f_fx); the product
        // saturates (beyond 2^64 the cut is capped at half the window anyway, for any F the
        // parameters allow).
        let cut = u64::from(cwnd)
            .saturating_mul(u64::from(self.alpha))
            .saturating_mul(u64::from(gain_fx))
            .checked_div(u64::from(f_fx).saturating_mul(2048))
            .unwrap_or(u64::MAX);
        let cut = u32::try_from(cut.min(u64::from(cwnd >> 1))).unwrap_or(cwnd >> 1);
        cwnd.saturating_sub(cut).max(2)
    }

    /// `dctcp_react_to_loss` (entering Recovery from another state, or `CA_EVENT_LOSS`): remembers
    /// cwnd and returns the new ssthresh, half the window (at least 2), as Reno.
    pub fn react_to_loss(&mut self, cwnd: u32) -> u32 {
        self.loss_cwnd = cwnd;
        (cwnd >> 1).max(2)
    }

    /// `dctcp_cwnd_undo`: after a spurious reduction, the window before it.
    pub fn undo_cwnd(&self, cwnd: u32) -> u32 {
        cwnd.max(self.loss_cwnd)
    }

    /// `dctcp_ece_ack_update` (receiver side, `CA_EVENT_ECN_IS_CE` / `CA_EVENT_ECN_NO_CE`): when
    /// the CE state of arriving data flips, a pending delayed ACK is sent first with the old state
    /// (acknowledging up to the `rcv_nxt` of the last packet in that state) and an immediate ACK
    /// is scheduled; ACKs then echo the new state. `ack_timer_pending`: a delayed ACK is pending
    /// (`icsk_ack.pending & ICSK_ACK_TIMER`); `rcv_nxt`: the socket's after this packet.
    pub fn ece_ack_update(
        &mut self,
        is_ce: bool,
        rcv_nxt: u32,
        ack_timer_pending: bool,
    ) -> EceAction {
        let new_state = u32::from(is_ce);
        let mut a = EceAction {
            demand_cwr: is_ce,
            ..EceAction::default()
        };
        if self.ce_state != new_state {
            if ack_timer_pending {
                a.send_delayed_ack = Some(self.prior_rcv_nxt);
                a.delayed_ack_ece = self.ce_state != 0;
            }
            a.ack_now = true;
        }
        self.prior_rcv_nxt = rcv_nxt;
        self.ce_state = new_state;
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(snd_una: u32, snd_nxt: u32, delivered: u32, delivered_ce: u32) -> Counters {
        Counters {
            snd_una,
            snd_nxt,
            delivered,
            delivered_ce,
        }
    }

    #[test]
    fn scaled_cut_divides_dctcps_cut_by_f() {
        let mut d = Dctcp {
            alpha: 512,
            ..Dctcp::default()
        };
        // F = 1: DCTCP's own cut, cwnd * alpha / 2048 = 100 * 512 / 2048 = 25.
        let mut plain = d;
        assert_eq!(
            d.ssthresh_scaled(100, 1024, 1024, false),
            plain.ssthresh(100)
        );
        assert_eq!(d.ssthresh_scaled(100, 1024, 1024, false), 75);
        assert_eq!(d.loss_cwnd, 100);
        // F = 2: half the cut; F = 0.5: twice the cut.
        assert_eq!(d.ssthresh_scaled(100, 2048, 1024, false), 88);
        assert_eq!(d.ssthresh_scaled(100, 512, 1024, false), 50);
        // Raise only: F = 0.5 cuts as DCTCP, F = 2 as above.
        assert_eq!(d.ssthresh_scaled(100, 512, 1024, true), 75);
        assert_eq!(d.ssthresh_scaled(100, 2048, 1024, true), 88);
        // Never more than half, never below 2; F = 0 cuts half.
        d.alpha = DCTCP_MAX_ALPHA;
        assert_eq!(d.ssthresh_scaled(100, 256, 1024, false), 50);
        assert_eq!(d.ssthresh_scaled(100, 0, 1024, false), 50);
        assert_eq!(d.ssthresh_scaled(3, 256, 1024, false), 2);
        assert_eq!(
            d.ssthresh_scaled(u32::MAX, 1, 1024, false),
            u32::MAX - (u32::MAX >> 1)
        );
    }

    #[test]
    fn alpha_waits_for_the_window_to_end() {
        let mut d = Dctcp::default();
        d.init(&counters(100, 1000, 0, 0), 0, DEFAULT_ALPHA_ON_INIT);
        assert_eq!((d.alpha, d.next_seq), (1024, 1000));
        d.update_alpha(&counters(999, 1500, 10, 10), DEFAULT_SHIFT_G);
        assert_eq!(d.alpha, 1024, "snd_una has not reached next_seq");
        d.update_alpha(&counters(1000, 1500, 10, 0), DEFAULT_SHIFT_G);
        // No marks: alpha decays by alpha/16.
        assert_eq!(d.alpha, 1024 - 64);
        assert_eq!((d.next_seq, d.old_delivered), (1500, 10));
    }

    #[test]
    fn alpha_tracks_the_marked_fraction() {
        // Half of the packets marked every window: alpha converges to 512.
        for start in [0u32, 1024] {
            let mut d = Dctcp {
                alpha: start,
                ..Dctcp::default()
            };
            let (mut seq, mut del, mut ce) = (0u32, 0u32, 0u32);
            for _ in 0..400 {
                seq = seq.wrapping_add(100);
                del = del.wrapping_add(100);
                ce = ce.wrapping_add(50);
                d.update_alpha(
                    &counters(seq, seq.wrapping_add(100), del, ce),
                    DEFAULT_SHIFT_G,
                );
            }
            assert!((496..=528).contains(&d.alpha), "from {start}: {}", d.alpha);
        }
        // All marked: 1.0; none: decays to 0 (the decay is at least 1 while alpha > 0).
        let mut d = Dctcp {
            alpha: 0,
            ..Dctcp::default()
        };
        d.update_alpha(&counters(0, 10, 10, 10), DEFAULT_SHIFT_G);
        assert_eq!(d.alpha, 64);
        for i in 1..200u32 {
            d.update_alpha(
                &counters(10 * i, 10 * i + 10, 10 * i + 10, 10 * i + 10),
                DEFAULT_SHIFT_G,
            );
        }
        assert_eq!(d.alpha, DCTCP_MAX_ALPHA);
        for i in 200..600u32 {
            d.update_alpha(
                &counters(10 * i, 10 * i + 10, 10 * i + 10, 2000),
                DEFAULT_SHIFT_G,
            );
        }
        assert_eq!(d.alpha, 0);
    }

    #[test]
    fn counters_wrap() {
        let mut d = Dctcp::default();
        d.init(
            &counters(u32::MAX - 5, u32::MAX - 1, u32::MAX - 9, u32::MAX - 9),
            0,
            0,
        );
        // snd_una wrapped past next_seq; 20 delivered, 10 of them marked.
        d.update_alpha(&counters(3, 50, 10, 0), DEFAULT_SHIFT_G);
        assert_eq!(d.alpha, (10u32 << 6) / 20);
    }

    #[test]
    fn ssthresh_scales_with_alpha() {
        let mut d = Dctcp {
            alpha: 1024,
            ..Dctcp::default()
        };
        assert_eq!(d.ssthresh(100), 50);
        assert_eq!(d.loss_cwnd, 100);
        d.alpha = 512;
        assert_eq!(d.ssthresh(100), 75);
        d.alpha = 0;
        assert_eq!(d.ssthresh(100), 100);
        d.alpha = 1024;
        assert_eq!(d.ssthresh(3), 2);
        assert_eq!(d.ssthresh(u32::MAX), u32::MAX - (u32::MAX >> 1));
        assert_eq!(d.react_to_loss(10), 5);
        assert_eq!(d.undo_cwnd(7), 10);
        assert_eq!(d.undo_cwnd(12), 12);
    }

    #[test]
    fn ce_flip_sends_the_delayed_ack_then_acks_now() {
        let mut d = Dctcp::default();
        // CE 0 -> 0: nothing special.
        assert_eq!(d.ece_ack_update(false, 100, true), EceAction::default());
        // 0 -> 1 with a delayed ACK pending: send it (up to 100, no ECE), then ACK now with ECE.
        let a = d.ece_ack_update(true, 200, true);
        assert_eq!(
            a,
            EceAction {
                send_delayed_ack: Some(100),
                delayed_ack_ece: false,
                ack_now: true,
                demand_cwr: true
            }
        );
        // 1 -> 1: keep echoing ECE.
        assert_eq!(
            d.ece_ack_update(true, 300, false),
            EceAction {
                demand_cwr: true,
                ..EceAction::default()
            }
        );
        // 1 -> 0 without a pending delayed ACK: just ACK now, without ECE.
        assert_eq!(
            d.ece_ack_update(false, 400, false),
            EceAction {
                ack_now: true,
                ..EceAction::default()
            }
        );
        assert_eq!((d.prior_rcv_nxt, d.ce_state), (400, 0));
    }
}
