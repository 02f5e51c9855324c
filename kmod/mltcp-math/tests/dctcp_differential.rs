// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `mltcp_dctcp` against a reference model of Linux 6.12's `net/ipv4/tcp_dctcp.c` (written here
//! from the C source, in its own u32 arithmetic) driving Reno's `tcp_reno_cong_avoid`: with
//! `slope = 0, intercept = 1.0` the two must agree step by step (window, ssthresh, alpha, ACK
//! actions) over random sequences of ACKs with CE echoes, ECE-triggered reductions, recoveries,
//! RTOs, undos, received CE flips and idle gaps. With the default F, the decrease stays DCTCP's
//! and only the additive increase changes.

mod common;

use common::*;
use mltcp_math::dctcp::{
    Counters, EceAction, DCTCP_MAX_ALPHA, DEFAULT_ALPHA_ON_INIT, DEFAULT_SHIFT_G,
};
use mltcp_math::fixed::FX_ONE;
use mltcp_math::mltcp::{DctcpMode, MltcpDctcpState};
use mltcp_math::params::Params;
use mltcp_math::reno::Window;
use proptest::prelude::*;

/// `TCP_CA_Recovery` / `TCP_CA_Open` as `enum tcp_ca_state` numbers them.
const RECOVERY: u8 = 3;
const OPEN: u8 = 0;
const MSS: u32 = 1000;

/// tcp_dctcp.c's `struct dctcp` (without PLB) and its ops, transcribed.
#[derive(Clone, Copy, Debug, Default)]
struct RefDctcp {
    old_delivered: u32,
    old_delivered_ce: u32,
    prior_rcv_nxt: u32,
    dctcp_alpha: u32,
    next_seq: u32,
    ce_state: u32,
    loss_cwnd: u32,
}

impl RefDctcp {
    fn reset(&mut self, c: &Counters) {
        self.next_seq = c.snd_nxt;
        self.old_delivered = c.delivered;
        self.old_delivered_ce = c.delivered_ce;
    }
    fn init(&mut self, c: &Counters, rcv_nxt: u32) {
        self.prior_rcv_nxt = rcv_nxt;
        self.dctcp_alpha = DEFAULT_ALPHA_ON_INIT.min(DCTCP_MAX_ALPHA);
        self.loss_cwnd = 0;
        self.ce_state = 0;
        self.reset(c);
    }
    fn ssthresh(&mut self, tp: &RefTp) -> u32 {
        self.loss_cwnd = tp.snd_cwnd;
        (tp.snd_cwnd - ((tp.snd_cwnd * self.dctcp_alpha) >> 11)).max(2)
    }
    fn update_alpha(&mut self, c: &Counters) {
        // `!before(tp->snd_una, ca->next_seq)`
        if (c.snd_una.wrapping_sub(self.next_seq) as i32) >= 0 {
            let delivered = c.delivered.wrapping_sub(self.old_delivered);
            let mut delivered_ce = c.delivered_ce.wrapping_sub(self.old_delivered_ce);
            let mut alpha = self.dctcp_alpha;
            // min_not_zero(alpha, alpha >> g)
            let decay = if alpha >> DEFAULT_SHIFT_G == 0 {
                alpha
            } else {
                (alpha >> DEFAULT_SHIFT_G).min(alpha)
            };
            alpha -= decay;
            if delivered_ce != 0 {
                delivered_ce <<= 10 - DEFAULT_SHIFT_G;
                delivered_ce /= delivered.max(1);
                alpha = (alpha + delivered_ce).min(DCTCP_MAX_ALPHA);
            }
            self.dctcp_alpha = alpha;
            self.reset(c);
        }
    }
    fn react_to_loss(&mut self, tp: &mut RefTp) {
        self.loss_cwnd = tp.snd_cwnd;
        tp.snd_ssthresh = (tp.snd_cwnd >> 1).max(2);
    }
    fn undo(&self, tp: &RefTp) -> u32 {
        tp.snd_cwnd.max(self.loss_cwnd)
    }
    /// `dctcp_ece_ack_update`, with the socket effects returned as our `EceAction`.
    fn ece_ack_update(&mut self, is_ce: bool, rcv_nxt: u32, ack_timer: bool) -> EceAction {
        let new_ce_state = u32::from(is_ce);
        let mut a = EceAction::default();
        if self.ce_state != new_ce_state {
            if ack_timer {
                a.delayed_ack_ece = self.ce_state == 1;
                a.send_delayed_ack = Some(self.prior_rcv_nxt);
            }
            a.ack_now = true;
        }
        self.prior_rcv_nxt = rcv_nxt;
        self.ce_state = new_ce_state;
        a.demand_cwr = new_ce_state == 1;
        a
    }
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// `acked` segments ACKed, `marked` of them with ECE.
    Ack {
        acked: u32,
        marked: u32,
        cwnd_limited: bool,
    },
    /// ECE seen: TCP enters CWR and sets ssthresh (and cwnd, eventually) from the `ssthresh` op.
    Cwr,
    /// Fast retransmit: `set_state(Recovery)`, then the window falls to ssthresh.
    Recovery,
    /// Retransmission timeout: `CA_EVENT_LOSS`, cwnd 1.
    Rto,
    /// The reduction was spurious: `undo_cwnd`.
    Undo,
    /// Receiver side: a data packet with or without CE, with or without a delayed ACK pending.
    Rx { is_ce: bool, ack_timer: bool },
    /// The sender idles (a training iteration boundary for MLTCP).
    Idle { gap_us: u32 },
}

fn ev() -> impl Strategy<Value = Ev> {
    prop_oneof![
        30 => (1u32..=64, 0u32..=64, prop::bool::weighted(0.9))
            .prop_map(|(acked, m, cwnd_limited)| Ev::Ack { acked, marked: m.min(acked), cwnd_limited }),
        3 => Just(Ev::Cwr),
        1 => Just(Ev::Recovery),
        1 => Just(Ev::Rto),
        1 => Just(Ev::Undo),
        4 => (any::<bool>(), any::<bool>()).prop_map(|(is_ce, ack_timer)| Ev::Rx { is_ce, ack_timer }),
        2 => (0u32..3_000_000).prop_map(|gap_us| Ev::Idle { gap_us }),
    ]
}

/// The socket fields both sides read.
#[derive(Clone, Copy, Debug)]
struct Net {
    c: Counters,
    rcv_nxt: u32,
    bytes_acked: u64,
    ca_state: u8,
}

impl Net {
    fn new(snd_una: u32) -> Self {
        Net {
            c: Counters {
                snd_una,
                snd_nxt: snd_una.wrapping_add(10 * MSS),
                delivered: 0,
                delivered_ce: 0,
            },
            rcv_nxt: 7,
            bytes_acked: 0,
            ca_state: OPEN,
        }
    }
    fn ack(&mut self, acked: u32, marked: u32, cwnd: u32) {
        self.c.snd_una = self.c.snd_una.wrapping_add(acked * MSS);
        self.c.snd_nxt = self.c.snd_una.wrapping_add(cwnd * MSS);
        self.c.delivered = self.c.delivered.wrapping_add(acked);
        self.c.delivered_ce = self.c.delivered_ce.wrapping_add(marked);
        self.bytes_acked += u64::from(acked * MSS);
    }
}

/// F = 1.0 whatever the ratio (the identity), with F also scaling slow start (capped at 1.0).
const IDENTITY: Params = Params {
    slope_fx: 0,
    intercept_fx: FX_ONE,
    idle_gap_us: 20_000,
    ewma_weight_fx: 256,
    scale_slow_start: 1,
    scale_decrease: 0,
};

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn identity_f_is_dctcp(
        snd_una in any::<u32>(),
        cwnd in 2u32..200,
        ssthresh in prop_oneof![Just(0x7fff_ffffu32), 2u32..300],
        evs in prop::collection::vec(ev(), 1..300),
    ) {
        let mut net = Net::new(snd_una);
        let mut tp = RefTp { snd_cwnd: cwnd, snd_cwnd_cnt: 0, snd_ssthresh: ssthresh, snd_cwnd_clamp: 20_000 };
        let mut rf = RefDctcp::default();
        rf.init(&net.c, net.rcv_nxt);
        let mut w = tp.to_window();
        let mut m = MltcpDctcpState::default();
        prop_assert_eq!(m.init(&net.c, net.rcv_nxt, 0, true, false, DEFAULT_ALPHA_ON_INIT), DctcpMode::Dctcp);
        let mut prior_cwnd = cwnd;
        for (i, e) in evs.iter().enumerate() {
            match *e {
                Ev::Ack { acked, marked, cwnd_limited } => {
                    net.ack(acked, marked, tp.snd_cwnd);
                    // tcp_ack(): in_ack_event, then cong_avoid.
                    rf.update_alpha(&net.c);
                    m.in_ack_event(&net.c, DEFAULT_SHIFT_G);
                    ref_reno_cong_avoid(&mut tp, acked, cwnd_limited);
                    m.cong_avoid(&IDENTITY, &mut w, acked, cwnd_limited, net.bytes_acked);
                }
                Ev::Cwr => {
                    prior_cwnd = tp.snd_cwnd;
                    tp.snd_ssthresh = rf.ssthresh(&tp);
                    tp.snd_cwnd = tp.snd_ssthresh;
                    w.ssthresh = m.ssthresh(w.cwnd, FX_ONE, 0, || FX_ONE);
                    w.cwnd = w.ssthresh;
                }
                Ev::Recovery => {
                    prior_cwnd = tp.snd_cwnd;
                    if net.ca_state != RECOVERY {
                        rf.react_to_loss(&mut tp);
                    }
                    if let Some(s) = m.set_state(RECOVERY, net.ca_state, RECOVERY, w.cwnd) {
                        w.ssthresh = s;
                    }
                    net.ca_state = RECOVERY;
                    tp.snd_cwnd = tp.snd_ssthresh;
                    w.cwnd = w.ssthresh;
                }
                Ev::Rto => {
                    prior_cwnd = tp.snd_cwnd;
                    rf.react_to_loss(&mut tp);
                    if let Some(s) = m.on_rto(w.cwnd) {
                        w.ssthresh = s;
                    }
                    net.ca_state = OPEN;
                    tp.snd_cwnd = 1;
                    w.cwnd = 1;
                }
                Ev::Undo => {
                    tp.snd_cwnd = rf.undo(&tp);
                    w.cwnd = m.undo_cwnd(w.cwnd, prior_cwnd);
                    net.ca_state = OPEN;
                }
                Ev::Rx { is_ce, ack_timer } => {
                    net.rcv_nxt = net.rcv_nxt.wrapping_add(MSS);
                    let a = rf.ece_ack_update(is_ce, net.rcv_nxt, ack_timer);
                    prop_assert_eq!(m.on_ecn(is_ce, net.rcv_nxt, ack_timer), Some(a), "step {}: {:?}", i, e);
                }
                Ev::Idle { gap_us } => {
                    m.iter.on_tx_start(&IDENTITY, gap_us, 1000, net.bytes_acked);
                }
            }
            prop_assert_eq!(RefTp::from_window(&w), tp, "step {}: {:?}", i, e);
            prop_assert_eq!(m.dctcp.alpha, rf.dctcp_alpha, "step {}: {:?}", i, e);
            prop_assert_eq!(m.dctcp.loss_cwnd, rf.loss_cwnd, "step {}: {:?}", i, e);
        }
    }
}

/// Without ECN the connection runs MLTCP-Reno, as tcp_dctcp.c's `dctcp_reno` fallback: Reno's
/// halving, Reno's undo, no alpha, no ACK actions. A listener keeps DCTCP (its children negotiate).
#[test]
fn no_ecn_falls_back_to_reno() {
    let net = Net::new(0);
    let mut m = MltcpDctcpState::default();
    assert_eq!(
        m.init(&net.c, 0, 0, false, false, DEFAULT_ALPHA_ON_INIT),
        DctcpMode::RenoFallback
    );
    m.dctcp.alpha = 0; // would keep the window whole under DCTCP
    assert_eq!(m.ssthresh(100, FX_ONE, 0, || FX_ONE), 50);
    assert_eq!(
        m.ssthresh(100, 2 * FX_ONE, 1, || FX_ONE),
        50,
        "the fallback's cut is Reno's whatever F"
    );
    assert_eq!(m.undo_cwnd(50, 100), 100);
    assert_eq!(m.on_ecn(true, 10, true), None);
    assert_eq!(m.on_rto(100), None);
    assert_eq!(m.set_state(RECOVERY, OPEN, RECOVERY, 100), None);
    assert_eq!(
        m.init(&net.c, 0, 0, false, true, DEFAULT_ALPHA_ON_INIT),
        DctcpMode::Dctcp
    );
}

/// With the default F the decrease is DCTCP's and the increase is F segments per RTT: late in an
/// iteration (F > 1) the window grows faster than DCTCP's, early (F < 1) slower.
#[test]
fn default_f_scales_only_the_increase() {
    let p = Params::DEFAULT;
    let net = Net::new(0);
    let mut m = MltcpDctcpState::default();
    m.init(&net.c, 0, 0, true, false, DEFAULT_ALPHA_ON_INIT);
    // One measured iteration of 1 MB: the first boundary aligns, the second completes it.
    m.iter.on_tx_start(&p, 1_000_000, 1000, 0);
    m.iter.on_tx_start(&p, 1_000_000, 1000, 1_000_000);
    let grow = |m: &mut MltcpDctcpState, bytes_acked: u64| {
        let mut w = Window {
            cwnd: 100,
            cwnd_cnt: 0,
            ssthresh: 50,
            cwnd_clamp: 20_000,
        };
        // Ten RTTs of ACKs at a fixed point of the iteration.
        for _ in 0..10 * 100 {
            m.cong_avoid(&p, &mut w, 1, true, bytes_acked);
        }
        w.cwnd
    };
    let early = grow(&mut m, 1_000_000 + 50_000); // bytes_ratio 0.05
    let late = grow(&mut m, 1_000_000 + 950_000); // bytes_ratio 0.95
    let mut tp = RefTp {
        snd_cwnd: 100,
        snd_cwnd_cnt: 0,
        snd_ssthresh: 50,
        snd_cwnd_clamp: 20_000,
    };
    for _ in 0..10 * 100 {
        ref_reno_cong_avoid(&mut tp, 1, true);
    }
    assert!(
        early < tp.snd_cwnd && tp.snd_cwnd < late,
        "early {early}, dctcp {}, late {late}",
        tp.snd_cwnd
    );
    // The decrease does not depend on F by default (dctcp_scale_cut = 0); scaled, F = 2 halves
    // the cut, and F = 1 is DCTCP's.
    m.dctcp.alpha = 512;
    assert_eq!(m.ssthresh(100, 2 * FX_ONE, 0, || FX_ONE), 75);
    assert_eq!(m.ssthresh(100, 2 * FX_ONE, 1, || FX_ONE), 88);
    assert_eq!(m.ssthresh(100, FX_ONE, 1, || FX_ONE), 75);
    assert_eq!(m.ssthresh(100, FX_ONE / 2, 2, || FX_ONE), 75);
    // The log-mean is computed in mode 3 only.
    for mode in 0..3 {
        m.ssthresh(100, FX_ONE, mode, || {
            panic!("F's log-mean computed in mode {mode}")
        });
    }
    // 3: scaled by L/F, L = F's log-mean (0.771 by default): F = L is DCTCP's cut, F = 2L
    // half of it, F = L/2 twice.
    let l = mltcp_math::iteration::f_log_mean_fx(&mltcp_math::params::Params::DEFAULT);
    assert_eq!(m.ssthresh(100, l, 3, || l), 75);
    assert_eq!(m.ssthresh(100, 2 * l, 3, || l), 88);
    assert_eq!(m.ssthresh(100, l / 2, 3, || l), 50);
}
