// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! No overflow, no panic, sane results at the edges: windows up to 2^31 segments (100 Gbit/s and
//! beyond), bytes_acked near u64::MAX, huge SRTT, arbitrary (even all-zero or garbage) per-socket
//! state, F at its minimum and maximum, invalid params. Run in debug (overflow checks on).

use mltcp_math::cubic::{cubic_root, Clock, Cubic, CubicParams};
use mltcp_math::dctcp::{Counters, Dctcp, DCTCP_MAX_ALPHA};
use mltcp_math::fixed::FX_ONE;
use mltcp_math::iteration::{f_fx, Iteration};
use mltcp_math::mltcp::{MltcpCubicState, MltcpRenoState};
use mltcp_math::params::Params;
use mltcp_math::reno::{self, Window};
use proptest::prelude::*;

fn any_cubic() -> impl Strategy<Value = Cubic> {
    (
        prop::array::uniform16(any::<u32>()),
        any::<u8>(),
        any::<u8>(),
    )
        .prop_map(|(a, s, f)| Cubic {
            cnt: a[0],
            last_max_cwnd: a[1],
            last_cwnd: a[2],
            last_time: a[3],
            bic_origin_point: a[4],
            bic_k: a[5],
            delay_min: a[6],
            epoch_start: a[7],
            ack_cnt: a[8],
            tcp_cwnd: a[9],
            ack_frac_fx: a[10] as u16,
            sample_cnt: s,
            found: f,
            round_start: a[11],
            end_seq: a[12],
            last_ack: a[13],
            curr_rtt: a[14],
        })
}

fn any_window() -> impl Strategy<Value = Window> {
    (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
        |(cwnd, cwnd_cnt, ssthresh, cwnd_clamp)| Window {
            cwnd,
            cwnd_cnt,
            ssthresh,
            cwnd_clamp,
        },
    )
}

fn any_clock() -> impl Strategy<Value = Clock> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<bool>(),
    )
        .prop_map(|(j, u, n, a, p)| Clock {
            now_jiffies: j,
            now_us: u,
            snd_nxt: n,
            snd_una: a,
            pacing_enabled: p,
        })
}

fn any_cubic_params() -> impl Strategy<Value = CubicParams> {
    (
        any::<bool>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<bool>(),
        any::<bool>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(|(fc, beta, iss, bic, tf, hy, det, low, delta, hz)| {
            CubicParams {
                fast_convergence: fc,
                beta,
                initial_ssthresh: iss,
                bic_scale: bic,
                tcp_friendliness: tf,
                hystart: hy,
                hystart_detect: det,
                hystart_low_window: low,
                hystart_ack_delta_us: delta,
                hz,
                ..CubicParams::LINUX_DEFAULT
            }
            .with_scales()
        })
}

fn any_params() -> impl Strategy<Value = Params> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(|(s, i, g, w, ss)| Params {
            slope_fx: s,
            intercept_fx: i,
            idle_gap_us: g,
            ewma_weight_fx: w,
            scale_slow_start: ss,
            scale_decrease: 0,
        })
}

fn big_f() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1),
        Just(FX_ONE),
        Just(128 * FX_ONE),
        Just(u32::MAX),
        any::<u32>()
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn reno_never_panics(mut w in any_window(), acked in any::<u32>(), lim in any::<bool>(), f in big_f(), ai in any::<u32>(), prior in any::<u32>()) {
        let mut w2 = w;
        reno::cong_avoid(&mut w, acked, lim);
        reno::mltcp_cong_avoid(&mut w2, acked, lim, f, f);
        let _ = reno::mltcp_slow_start(&mut w2, acked, f);
        reno::cong_avoid_ai(&mut w2, ai, acked);
        let left = reno::slow_start(&mut w2, acked);
        let _ = (left, reno::ssthresh(w.cwnd), reno::undo_cwnd(w.cwnd, prior));
        if lim {
            prop_assert!(w.cwnd <= w.cwnd_clamp);
        }
    }

    #[test]
    fn cubic_never_panics(
        mut cu in any_cubic(), mut w in any_window(), clk in any_clock(), c in any_cubic_params(),
        acked in any::<u32>(), lim in any::<bool>(), f in big_f(), rtt in any::<i32>(), rate in any::<u64>(), gso in any::<u32>(), lsnd in any::<u32>(),
    ) {
        let mut cm = cu;
        let mut wm = w;
        cu.pkts_acked(&c, &mut w, rtt, &clk, rate, gso);
        cu.cong_avoid(&c, &mut w, acked, lim, &clk);
        cm.mltcp_cong_avoid(&c, &mut wm, acked, lim, &clk, f, f);
        cu.on_tx_start(&clk, lsnd);
        let _ = cu.recalc_ssthresh(&c, &w);
        cu.on_loss_state(&c, &clk);
        cu.init(&c, &mut w, &clk);
        prop_assert!(cu.cnt == 0 || cu.cnt >= 1);
    }

    #[test]
    fn cubic_root_never_panics(a in any::<u64>()) {
        let r = cubic_root(a) as f64;
        let e = (a as f64).cbrt();
        prop_assert!((r - e).abs() <= 1.0 + 0.01 * e, "{} {} {}", a, r, e);
    }

    #[test]
    fn iteration_never_panics(
        start in any::<u64>(), est in any::<u64>(), ewma in any::<u64>(), n in any::<u32>(), flags in any::<u32>(),
        p in any_params(), idle in any::<u32>(), srtt in any::<u32>(), acked in any::<u64>(), pin in any::<u64>(),
    ) {
        let mut it = Iteration { start_bytes_acked: start, est_bytes: est, ewma_bytes: ewma, iterations: n, flags };
        let _ = it.on_tx_start(&p, idle, srtt, acked);
        let r = it.bytes_ratio_fx(acked);
        prop_assert!(r.is_none_or(|r| r <= FX_ONE));
        let _ = it.scale_fx(&p, acked);
        let _ = it.snapshot(&p, acked);
        it.set_bytes_per_iteration(pin);
        let _ = f_fx(&p, idle);
    }
}

#[test]
fn all_zero_states() {
    let p = Params::DEFAULT;
    let c = CubicParams::LINUX_DEFAULT;
    let clk = Clock::default();
    let mut r = MltcpRenoState::default();
    let mut s = MltcpCubicState::default();
    let mut w = Window::default();
    // release-without-init style: everything on zeros.
    assert_eq!(r.iter.scale_fx(&p, 0), FX_ONE);
    reno::mltcp_cong_avoid(&mut w, 1, true, r.iter.scale_fx(&p, 0), FX_ONE);
    s.cubic
        .mltcp_cong_avoid(&c, &mut w, 1, true, &clk, s.iter.scale_fx(&p, 0), FX_ONE);
    s.cubic.pkts_acked(&c, &mut w, 0, &clk, 0, 0);
    s.cubic.on_tx_start(&clk, 0);
    let _ = s.cubic.recalc_ssthresh(&c, &w);
    r.iter.on_tx_start(&p, 0, 0, 0);
    let snap = r.iter.snapshot(&p, 0);
    assert_eq!(
        snap,
        mltcp_math::iteration::Snapshot {
            f_fx: FX_ONE,
            ..Default::default()
        }
    );
    // A zero window with a real clamp still grows.
    let mut w = Window {
        cwnd_clamp: u32::MAX,
        ..Window::default()
    };
    for _ in 0..10 {
        reno::cong_avoid(&mut w, 1, true);
    }
    assert!(w.cwnd > 0);
}

#[test]
fn huge_windows_stay_sane() {
    // 2^31-segment window (far beyond 100 Gbit/s × 1 s), loss, then 10 s of ACKs in 1 ms steps.
    let c = CubicParams::LINUX_DEFAULT;
    for &wmax in &[1_000_000u32, 10_000_000, 1 << 31] {
        let mut cu = Cubic {
            delay_min: 100,
            ..Cubic::default()
        };
        let mut w = Window {
            cwnd: wmax,
            cwnd_cnt: 0,
            ssthresh: wmax,
            cwnd_clamp: u32::MAX,
        };
        let ss = cu.recalc_ssthresh(&c, &w);
        // 64-bit product: exactly floor(wmax·717/1024), where Linux's u32 product wraps above 6 M.
        assert_eq!(ss as u64, wmax as u64 * 717 / 1024);
        w.cwnd = ss;
        w.ssthresh = ss;
        let mut prev = w.cwnd;
        for ms in 1..=10_000u32 {
            let clk = Clock {
                now_jiffies: 10_000 + ms,
                ..Clock::default()
            };
            // Stretch ACKs: a window's worth per 100 ms.
            let acked = (w.cwnd / 100).max(1);
            cu.mltcp_cong_avoid(&c, &mut w, acked, true, &clk, 2 * FX_ONE, FX_ONE);
            assert!(w.cwnd >= prev, "never shrinks without loss");
            prev = w.cwnd;
        }
        // Concave approach: no jump past W_max long before K (K ≈ 1750 s for 2^31).
        assert!(w.cwnd <= wmax, "wmax {wmax}: cwnd {}", w.cwnd);
        assert!(cu.cnt >= 2);
    }
    // Reno at 2^31 and at the u32 edge.
    let mut w = Window {
        cwnd: u32::MAX - 1,
        cwnd_cnt: u32::MAX - 1,
        ssthresh: 2,
        cwnd_clamp: u32::MAX,
    };
    reno::mltcp_cong_avoid(&mut w, u32::MAX, true, u32::MAX, u32::MAX);
    assert_eq!(w.cwnd, u32::MAX);
}

#[test]
fn bytes_acked_near_u64_max() {
    let p = Params::DEFAULT;
    let mut it = Iteration::default();
    let base = u64::MAX - (100 << 20);
    it.init(base - (50 << 20));
    assert!(!it.on_tx_start(&p, 1_000_000, u32::MAX, base)); // srtt huge: no split
    assert!(!it.on_tx_start(&p, u32::MAX, 1000, base)); // aligns
    assert!(it.on_tx_start(&p, u32::MAX, 1000, base + (40 << 20)));
    assert_eq!(it.est_bytes, 40 << 20);
    assert_eq!(it.bytes_ratio_fx(base + (60 << 20)), Some(FX_ONE / 2));
    assert_eq!(it.bytes_ratio_fx(u64::MAX), Some(FX_ONE));
    it.set_bytes_per_iteration(u64::MAX);
    assert_eq!(it.bytes_ratio_fx(u64::MAX), Some(0));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// DCTCP never panics and keeps alpha in [0, 1.0] and ssthresh >= 2, whatever the counters.
    #[test]
    fn dctcp_never_panics(
        state in any::<[u32; 7]>(), c in any::<[u32; 4]>(), g in any::<u32>(), cwnd in any::<u32>(),
        ce in any::<bool>(), rcv in any::<u32>(), pending in any::<bool>(),
        f_fx in any::<u32>(), raise in any::<bool>(),
    ) {
        let mut d = Dctcp {
            old_delivered: state[0], old_delivered_ce: state[1], next_seq: state[2],
            alpha: state[3] % (DCTCP_MAX_ALPHA + 1), loss_cwnd: state[4], prior_rcv_nxt: state[5], ce_state: state[6] & 1,
        };
        let c = Counters { snd_una: c[0], snd_nxt: c[1], delivered: c[2], delivered_ce: c[3] };
        d.update_alpha(&c, g);
        prop_assert!(d.alpha <= DCTCP_MAX_ALPHA);
        prop_assert!(d.ssthresh(cwnd) >= 2);
        // The F-scaled cut: DCTCP's at F = 1, never more than half (nor below 2), less for a
        // larger F.
        let plain = d.ssthresh(cwnd);
        prop_assert_eq!(d.ssthresh_scaled(cwnd, 1024, 1024, false), plain);
        prop_assert_eq!(d.ssthresh_scaled(cwnd, 1024, 1024, true), plain);
        let scaled = d.ssthresh_scaled(cwnd, f_fx, 1024, raise);
        prop_assert!(scaled >= 2 && scaled >= cwnd - cwnd / 2);
        prop_assert!(d.ssthresh_scaled(cwnd, f_fx.saturating_add(1), 1024, raise) >= scaled);
        // A larger gain cuts more (within the same bounds); F = gain is DCTCP's cut.
        let more = d.ssthresh_scaled(cwnd, f_fx, 2048, raise);
        prop_assert!(more <= scaled && more >= 2 && more >= cwnd - cwnd / 2);
        prop_assert_eq!(d.ssthresh_scaled(cwnd, 789, 789, false), plain);
        prop_assert!(d.react_to_loss(cwnd) >= 2);
        prop_assert!(d.undo_cwnd(cwnd) >= cwnd);
        let _ = d.ece_ack_update(ce, rcv, pending);
        d.init(&c, rcv, g);
        prop_assert!(d.alpha <= DCTCP_MAX_ALPHA);
    }
}
