// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Differential tests: our Reno and CUBIC against reference models of Linux 6.12's tcp_cong.c and
//! tcp_cubic.c (tests/common), and MLTCP with `slope = 0, intercept = FX_ONE` against plain
//! Reno/CUBIC, step by step over random ACK / loss / RTO / undo / idle sequences.

mod common;

use common::*;
use mltcp_math::cubic::{Clock, Cubic, CubicParams};
use mltcp_math::fixed::FX_ONE;
use mltcp_math::iteration::Iteration;
use mltcp_math::params::Params;
use mltcp_math::reno::{self, Window};
use proptest::prelude::*;

fn ev() -> impl Strategy<Value = Ev> {
    prop_oneof![
        30 => (1u32..=64, prop::bool::weighted(0.9), 0u32..5000, prop_oneof![1 => Just(-1i32), 6 => 0i32..3000])
            .prop_map(|(acked, cwnd_limited, dt_us, rtt_us)| Ev::Ack { acked, cwnd_limited, dt_us, rtt_us }),
        1 => Just(Ev::Loss),
        1 => Just(Ev::Rto),
        1 => Just(Ev::Undo),
        2 => (0u32..3_000_000).prop_map(|gap_us| Ev::Idle { gap_us }),
    ]
}

/// Identity params: F = intercept = 1.0 whatever the ratio.
const IDENTITY: Params = Params {
    slope_fx: 0,
    intercept_fx: FX_ONE,
    idle_gap_us: 20_000,
    ewma_weight_fx: 256,
    scale_slow_start: 0,
    scale_decrease: 0,
};

#[derive(Clone, Copy, Debug)]
struct Net {
    now_us: u64,
    jiffies_base: u32,
    snd_una: u32,
    bytes_acked: u64,
}

impl Net {
    fn clock(&self, cwnd: u32) -> Clock {
        Clock {
            now_jiffies: self.jiffies_base.wrapping_add((self.now_us / 1000) as u32),
            now_us: self.now_us as u32,
            snd_una: self.snd_una,
            snd_nxt: self.snd_una.wrapping_add(cwnd.wrapping_mul(MSS as u32)),
            pacing_enabled: false,
        }
    }
    fn ack(&mut self, acked: u32, dt_us: u32) {
        self.now_us += dt_us as u64;
        self.snd_una = self.snd_una.wrapping_add(acked.wrapping_mul(MSS as u32));
        self.bytes_acked += acked as u64 * MSS;
    }
}

fn window() -> impl Strategy<Value = Window> {
    (
        1u32..=100,
        prop_oneof![Just(0x7fff_ffffu32), 2u32..2000],
        prop_oneof![Just(0x7fff_ffffu32), 2u32..100_000],
    )
        .prop_map(|(cwnd, ssthresh, cwnd_clamp)| Window {
            cwnd: cwnd.min(cwnd_clamp),
            cwnd_cnt: 0,
            ssthresh,
            cwnd_clamp,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn reno_matches_linux_and_mltcp_identity(w0 in window(), evs in prop::collection::vec(ev(), 1..400)) {
        let mut tp = RefTp::from_window(&w0);
        let mut w = w0;
        let mut wm = w0;
        let mut iter = Iteration::default();
        let mut net = Net { now_us: 0, jiffies_base: 0, snd_una: 0, bytes_acked: 0 };
        let mut prior = w0.cwnd;
        for e in evs {
            match e {
                Ev::Ack { acked, cwnd_limited, dt_us, .. } => {
                    net.ack(acked, dt_us);
                    ref_reno_cong_avoid(&mut tp, acked, cwnd_limited);
                    reno::cong_avoid(&mut w, acked, cwnd_limited);
                    let f = iter.scale_fx(&IDENTITY, net.bytes_acked);
                    prop_assert_eq!(f, FX_ONE);
                    reno::mltcp_cong_avoid(&mut wm, acked, cwnd_limited, f, FX_ONE);
                }
                Ev::Loss | Ev::Rto => {
                    prior = w.cwnd;
                    let ss = ref_reno_ssthresh(&tp);
                    prop_assert_eq!(reno::ssthresh(w.cwnd), ss);
                    prop_assert_eq!(reno::ssthresh(wm.cwnd), ss);
                    let cwnd = if matches!(e, Ev::Rto) { 1 } else { ss };
                    for x in [&mut w, &mut wm] { x.ssthresh = ss; x.cwnd = cwnd; x.cwnd_cnt = 0; }
                    tp = RefTp::from_window(&w);
                }
                Ev::Undo => {
                    let c = tp.snd_cwnd.max(prior);
                    prop_assert_eq!(reno::undo_cwnd(w.cwnd, prior), c);
                    w.cwnd = c; wm.cwnd = c; tp.snd_cwnd = c;
                }
                Ev::Idle { gap_us } => {
                    net.now_us += gap_us as u64;
                    iter.on_tx_start(&IDENTITY, gap_us, 10_000, net.bytes_acked);
                }
            }
            prop_assert_eq!(w, tp.to_window());
            prop_assert_eq!(wm, w);
        }
    }

    #[test]
    fn cubic_matches_linux_and_mltcp_identity(
        w0 in window(),
        evs in prop::collection::vec(ev(), 1..400),
        jiffies_base in prop_oneof![Just(0u32), Just(u32::MAX - 3000), any::<u32>()],
        now0 in any::<u32>(),
        hystart in any::<bool>(),
        fast_convergence in any::<bool>(),
        tcp_friendliness in any::<bool>(),
        pacing in any::<bool>(),
        initial_ssthresh in prop_oneof![Just(0u32), 2u32..100],
        base_rtt in prop_oneof![1i32..2000, 2000i32..200_000],
        bdp in 8u32..300,
    ) {
        let c = CubicParams { hystart, fast_convergence, tcp_friendliness, initial_ssthresh, ..CubicParams::LINUX_DEFAULT };
        let r = RefCubic::new(c);
        let mut net = Net { now_us: now0 as u64, jiffies_base, snd_una: 7, bytes_acked: 0 };
        let (rate, gso) = if pacing { (12_500_000u64, 65_536u32) } else { (0, 65_536) };

        let mut tp = RefTp::from_window(&w0);
        let mut ca = RefBictcp::default();
        let mut w = w0;
        let mut cu = Cubic::default();
        let mut wm = w0;
        let mut cm = Cubic::default();
        let mut iter = Iteration::default();

        let mut clk = net.clock(w.cwnd);
        clk.pacing_enabled = pacing;
        r.init(&mut ca, &mut tp, &clk);
        cu.init(&c, &mut w, &clk);
        cm.init(&c, &mut wm, &clk);
        let mut prior = w.cwnd;
        let mut lsnd = clk.now_jiffies;
        for e in evs {
            match e {
                Ev::Ack { acked, cwnd_limited, dt_us, rtt_us } => {
                    // rtt_us is jitter on top of the path's base RTT; a window above the BDP
                    // queues, one base_rtt/bdp per extra segment (what HyStart's delay test sees).
                    let queue = (w.cwnd.saturating_sub(bdp) as i64 * base_rtt as i64 / bdp as i64).min(1_000_000) as i32;
                    let rtt_us = if rtt_us < 0 { rtt_us } else { base_rtt + rtt_us + queue };
                    net.ack(acked, dt_us);
                    let mut clk = net.clock(w.cwnd);
                    clk.pacing_enabled = pacing;
                    r.acked(&mut ca, &mut tp, rtt_us, &clk, rate, gso);
                    cu.pkts_acked(&c, &mut w, rtt_us, &clk, rate, gso);
                    cm.pkts_acked(&c, &mut wm, rtt_us, &clk, rate, gso);
                    r.cong_avoid(&mut ca, &mut tp, acked, cwnd_limited, &clk);
                    cu.cong_avoid(&c, &mut w, acked, cwnd_limited, &clk);
                    let f = iter.scale_fx(&IDENTITY, net.bytes_acked);
                    cm.mltcp_cong_avoid(&c, &mut wm, acked, cwnd_limited, &clk, f, FX_ONE);
                    lsnd = clk.now_jiffies;
                }
                Ev::Loss | Ev::Rto => {
                    prior = w.cwnd;
                    let clk = net.clock(w.cwnd);
                    let ss = r.recalc_ssthresh(&mut ca, &tp);
                    prop_assert_eq!(cu.recalc_ssthresh(&c, &w), ss);
                    prop_assert_eq!(cm.recalc_ssthresh(&c, &wm), ss);
                    let cwnd = if matches!(e, Ev::Rto) { 1 } else { ss };
                    for x in [&mut w, &mut wm] { x.ssthresh = ss; x.cwnd = cwnd; x.cwnd_cnt = 0; }
                    tp = RefTp::from_window(&w);
                    if matches!(e, Ev::Rto) {
                        r.state_loss(&mut ca, &clk);
                        cu.on_loss_state(&c, &clk);
                        cm.on_loss_state(&c, &clk);
                    }
                }
                Ev::Undo => {
                    let cw = tp.snd_cwnd.max(prior);
                    prop_assert_eq!(reno::undo_cwnd(w.cwnd, prior), cw);
                    w.cwnd = cw; wm.cwnd = cw; tp.snd_cwnd = cw;
                }
                Ev::Idle { gap_us } => {
                    net.now_us += gap_us as u64;
                    let clk = net.clock(w.cwnd);
                    r.cwnd_event_tx_start(&mut ca, &clk, lsnd);
                    cu.on_tx_start(&clk, lsnd);
                    cm.on_tx_start(&clk, lsnd);
                    iter.on_tx_start(&IDENTITY, gap_us, 10_000, net.bytes_acked);
                    lsnd = clk.now_jiffies;
                }
            }
            prop_assert_eq!(w, tp.to_window());
            prop_assert_eq!(cu, ca.to_cubic());
            prop_assert_eq!(wm, w);
            prop_assert_eq!(cm, cu);
        }
    }

    /// Our cubic_root is Linux's, bit for bit, over the whole u64 range.
    #[test]
    fn cubic_root_is_linux(a in any::<u64>(), small in 0u64..1_000_000) {
        prop_assert_eq!(mltcp_math::cubic::cubic_root(a), ref_cubic_root(a));
        prop_assert_eq!(mltcp_math::cubic::cubic_root(small), ref_cubic_root(small));
    }
}

/// MLTCP with the default params but without an estimate is plain Reno/CUBIC as well (F = 1.0
/// until the first measured iteration).
#[test]
fn no_estimate_is_plain() {
    let p = Params::DEFAULT;
    let it = Iteration::default();
    let c = CubicParams::LINUX_DEFAULT;
    let mut w = Window {
        cwnd: 10,
        cwnd_cnt: 0,
        ssthresh: 5,
        cwnd_clamp: u32::MAX,
    };
    let mut wm = w;
    let mut cu = Cubic::default();
    let mut cm = Cubic::default();
    for i in 0..10_000u32 {
        let clk = Clock {
            now_jiffies: 1000 + i / 10,
            ..Clock::default()
        };
        cu.cong_avoid(&c, &mut w, 1, true, &clk);
        cm.mltcp_cong_avoid(
            &c,
            &mut wm,
            1,
            true,
            &clk,
            it.scale_fx(&p, i as u64 * 1448),
            FX_ONE,
        );
    }
    assert_eq!(w, wm);
    assert_eq!(cu, cm);
}
