// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! CUBIC against known values: K and the curve W(t) = C(t − K)^3 + W_max of RFC 9438 (float
//! reference, test only), the Reno-friendly region, fast convergence, HyStart exits, the epoch
//! shift after idle, and MLTCP-CUBIC's F-times-faster growth.

use mltcp_math::cubic::{Clock, Cubic, CubicParams};
use mltcp_math::fixed::FX_ONE;
use mltcp_math::reno::Window;

const C: CubicParams = CubicParams::LINUX_DEFAULT;
/// Linux's C = 410/1024 and β = 717/1024 (RFC 9438 §5: C = 0.4, β = 0.7).
const C_F: f64 = 410.0 / 1024.0;
const BETA_F: f64 = 717.0 / 1024.0;

/// Sets up the state right after a loss at `wmax` with min RTT `rtt_us`; returns cwnd = β·wmax.
fn after_loss(wmax: u32, rtt_us: u32) -> (Cubic, Window) {
    let mut cu = Cubic::default();
    let mut w = Window {
        cwnd: wmax,
        cwnd_cnt: 0,
        ssthresh: wmax,
        cwnd_clamp: u32::MAX,
    };
    let clk = Clock {
        now_jiffies: 1_000_000,
        now_us: 5,
        ..Clock::default()
    };
    cu.init(&C, &mut w, &clk);
    cu.delay_min = rtt_us;
    let ss = cu.recalc_ssthresh(&C, &w);
    assert_eq!(cu.last_max_cwnd, wmax);
    w.ssthresh = ss;
    w.cwnd = ss;
    (cu, w)
}

/// Runs a cwnd-limited flow for `secs`: every ms the ACKs of cwnd/RTT segments arrive (one
/// call per segment). Calls `probe(t_seconds, cwnd)` once per simulated second; `f_fx` scales
/// the growth (MLTCP), FX_ONE = plain.
fn run(
    cu: &mut Cubic,
    w: &mut Window,
    rtt_us: u32,
    secs: u32,
    f_fx: u32,
    mut probe: impl FnMut(f64, u32),
) {
    let mut credit = 0u64; // segments × 1000 (per-ms fraction)
    for ms in 1..=secs * 1000 {
        let clk = Clock {
            now_jiffies: 1_000_000 + ms,
            now_us: 5 + ms * 1000,
            ..Clock::default()
        };
        credit += w.cwnd as u64 * 1_000_000 / rtt_us as u64; // per ms, ×1000
        while credit >= 1000 {
            credit -= 1000;
            if f_fx == FX_ONE {
                cu.cong_avoid(&C, w, 1, true, &clk);
            } else {
                cu.mltcp_cong_avoid(&C, w, 1, true, &clk, f_fx, FX_ONE);
            }
        }
        if ms % 1000 == 0 {
            probe(ms as f64 / 1000.0, w.cwnd);
        }
    }
}

#[test]
fn k_for_given_wmax() {
    for &wmax in &[100u32, 1000, 10_000, 100_000, 1_000_000] {
        let (mut cu, mut w) = after_loss(wmax, 100_000);
        let clk = Clock {
            now_jiffies: 1_000_001,
            ..Clock::default()
        };
        cu.cong_avoid(&C, &mut w, 1, true, &clk);
        let k = cu.bic_k as f64 / 1024.0;
        let k_ref = ((wmax - w.cwnd.min(wmax)) as f64 / C_F).cbrt();
        let k_rfc = (wmax as f64 * (1.0 - BETA_F) / C_F).cbrt();
        assert!(
            (k - k_ref).abs() <= 0.005 * k_ref + 0.002,
            "wmax {wmax}: K {k} vs {k_ref}"
        );
        assert!(
            (k - k_rfc).abs() <= 0.01 * k_rfc + 0.01,
            "wmax {wmax}: K {k} vs RFC {k_rfc}"
        );
        assert_eq!(cu.bic_origin_point, wmax);
    }
}

#[test]
fn follows_the_cubic_curve() {
    let wmax = 1000u32;
    let rtt_us = 100_000u32;
    let (mut cu, mut w) = after_loss(wmax, rtt_us);
    let w0 = w.cwnd as f64;
    let k = ((wmax as f64 - w0) / C_F).cbrt();
    let mut worst = 0.0f64;
    run(&mut cu, &mut w, rtt_us, 16, FX_ONE, |t, cwnd| {
        // The window chases W(t + RTT) one RTT ahead, so it sits on W(t).
        let wc = C_F * (t - k).powi(3) + wmax as f64;
        let err = (cwnd as f64 - wc).abs() / wc;
        worst = worst.max(err);
        assert!(err < 0.02, "t {t}: cwnd {cwnd} vs W(t) {wc:.1}");
    });
    // Concave then convex: at t = 16 s well above W_max.
    assert!(w.cwnd > wmax + 100, "{}", w.cwnd);
    println!("cubic curve: worst relative error {:.4}", worst);
}

#[test]
fn reno_friendly_region() {
    // Small W_max, short RTT: the cubic curve stays near W_max for seconds, the emulated Reno
    // window (3(1−β)/(1+β) segments per RTT, RFC 9438 §4.3) overtakes it and cwnd follows Reno.
    let wmax = 20u32;
    let rtt_us = 10_000u32;
    let (mut cu, mut w) = after_loss(wmax, rtt_us);
    let w0 = w.cwnd as f64;
    let alpha = 3.0 * (1.0 - BETA_F) / (1.0 + BETA_F);
    run(&mut cu, &mut w, rtt_us, 2, FX_ONE, |t, cwnd| {
        let reno = w0 + alpha * t * 1e6 / rtt_us as f64;
        let k = ((wmax as f64 - w0) / C_F).cbrt();
        let cubic = C_F * (t - k).powi(3) + wmax as f64;
        assert!(cubic < reno * 0.5, "not the Reno region at t {t}");
        assert!(
            (cwnd as f64 - reno).abs() < 0.1 * reno,
            "t {t}: cwnd {cwnd} vs reno {reno:.1}"
        );
    });
    // Same with the Reno-friendly region off: cwnd stays near the cubic curve (≈ W_max).
    let c2 = CubicParams {
        tcp_friendliness: false,
        ..C
    };
    let (mut cu, mut w) = after_loss(wmax, rtt_us);
    for ms in 1..=2000u32 {
        let clk = Clock {
            now_jiffies: 1_000_000 + ms,
            ..Clock::default()
        };
        for _ in 0..(w.cwnd / 10).max(1) {
            cu.cong_avoid(&c2, &mut w, 1, true, &clk);
        }
    }
    assert!(w.cwnd <= wmax + 2, "{}", w.cwnd);
}

#[test]
fn fast_convergence() {
    let mut cu = Cubic {
        last_max_cwnd: 1000,
        ..Cubic::default()
    };
    let w = Window {
        cwnd: 800,
        cwnd_cnt: 0,
        ssthresh: 5,
        cwnd_clamp: u32::MAX,
    };
    assert_eq!(cu.recalc_ssthresh(&C, &w), 800 * 717 / 1024);
    assert_eq!(cu.last_max_cwnd, 800 * (1024 + 717) / 2048); // W_max·(1+β)/2 = 680
    assert_eq!(cu.epoch_start, 0);
    let off = CubicParams {
        fast_convergence: false,
        ..C
    };
    let mut cu = Cubic {
        last_max_cwnd: 1000,
        ..Cubic::default()
    };
    cu.recalc_ssthresh(&off, &w);
    assert_eq!(cu.last_max_cwnd, 800);
    // Above the old W_max: plain W_max = cwnd.
    let mut cu = Cubic {
        last_max_cwnd: 500,
        ..Cubic::default()
    };
    cu.recalc_ssthresh(&C, &w);
    assert_eq!(cu.last_max_cwnd, 800);
    // Minimum ssthresh 2.
    let tiny = Window { cwnd: 1, ..w };
    assert_eq!(Cubic::default().recalc_ssthresh(&C, &tiny), 2);
}

/// A slow-start round: ACKs spaced `spacing_us` apart with RTT `rtt_us`, starting at `t0_us`.
struct SlowStart {
    cu: Cubic,
    w: Window,
    now_us: u32,
    snd_una: u32,
}

impl SlowStart {
    fn new(c: &CubicParams, cwnd: u32) -> Self {
        let mut w = Window {
            cwnd,
            cwnd_cnt: 0,
            ssthresh: 0x7fff_ffff,
            cwnd_clamp: u32::MAX,
        };
        let mut cu = Cubic::default();
        let clk = Clock {
            now_jiffies: 50_000,
            now_us: 1_000_000,
            snd_nxt: 100_000,
            snd_una: 0,
            pacing_enabled: false,
        };
        cu.init(c, &mut w, &clk);
        SlowStart {
            cu,
            w,
            now_us: 1_000_000,
            snd_una: 0,
        }
    }
    /// One ACK; a new round when snd_una passes the round's end (snd_nxt at its start).
    fn ack(&mut self, c: &CubicParams, spacing_us: u32, rtt_us: i32, paced: bool, rate: u64) {
        self.now_us += spacing_us;
        self.snd_una += 1;
        let clk = Clock {
            now_jiffies: 50_000 + self.now_us / 1000,
            now_us: self.now_us,
            snd_una: self.snd_una,
            snd_nxt: self.snd_una + self.w.cwnd,
            pacing_enabled: paced,
        };
        self.cu
            .pkts_acked(c, &mut self.w, rtt_us, &clk, rate, 65_536);
        self.cu.cong_avoid(c, &mut self.w, 1, true, &clk);
    }
}

#[test]
fn hystart_delay_exit() {
    let c = CubicParams {
        hystart_detect: mltcp_math::cubic::HYSTART_DELAY,
        ..C
    };
    // delay_min = 64 ms: the threshold is clamp(64/8, 4, 16) = 8 ms above it.
    for &(extra, exits) in &[(7_900i32, false), (8_100, true)] {
        let mut s = SlowStart::new(&c, 32);
        for _ in 0..12 {
            s.ack(&c, 3000, 64_000, false, 0);
        }
        assert_eq!(s.cu.found, 0);
        // A new round (snd_una passes end_seq), RTT up by `extra`.
        s.cu.end_seq = s.snd_una;
        for _ in 0..12 {
            s.ack(&c, 3000, 64_000 + extra, false, 0);
        }
        assert_eq!(s.cu.found == 1, exits, "extra {extra}");
        if exits {
            assert_eq!(s.w.ssthresh, s.w.cwnd);
            assert!(s.w.cwnd < 60);
        } else {
            assert_eq!(s.w.ssthresh, 0x7fff_ffff);
        }
    }
    // Below hystart_low_window (16) nothing happens.
    let mut s = SlowStart::new(&c, 4);
    s.w.cwnd_clamp = 15;
    for _ in 0..100 {
        s.ack(&c, 3000, 64_000 + 50_000, false, 0);
    }
    assert_eq!(s.cu.found, 0);
}

#[test]
fn hystart_ack_train_exit() {
    let c = CubicParams {
        hystart_detect: mltcp_math::cubic::HYSTART_ACK_TRAIN,
        ..C
    };
    // delay_min 10 ms, not paced: the train must last > 5 ms from the round start.
    let mut s = SlowStart::new(&c, 16);
    let mut n = 0;
    while s.cu.found == 0 && n < 1000 {
        s.ack(&c, 100, 10_000, false, 0);
        n += 1;
    }
    assert_eq!(s.cu.found, 1);
    // 100 µs per ACK: found after 5 ms (~51 ACKs).
    assert!((50..=52).contains(&n), "{n}");
    assert_eq!(s.w.ssthresh, s.w.cwnd);
    // Paced at 1 Gbit/s: threshold = delay_min + ack delay (4·64 KB at 125 MB/s, capped 1 ms).
    let mut s = SlowStart::new(&c, 16);
    let mut n = 0;
    while s.cu.found == 0 && n < 1000 {
        s.ack(&c, 100, 10_000, true, 125_000_000);
        n += 1;
    }
    assert!((110..=112).contains(&n), "{n}");
    // ACKs spaced more than hystart_ack_delta_us (2 ms) apart are no train.
    let mut s = SlowStart::new(&c, 16);
    s.w.cwnd_clamp = 1000;
    for _ in 0..500 {
        s.ack(&c, 2_500, 10_000, false, 0);
    }
    assert_eq!(s.cu.found, 0);
    // Samples within 1 s (HZ) of an epoch start are ignored.
    let mut cu = Cubic {
        epoch_start: 1000,
        ..Cubic::default()
    };
    let mut w = Window {
        cwnd: 10,
        cwnd_cnt: 0,
        ssthresh: 100,
        cwnd_clamp: u32::MAX,
    };
    cu.pkts_acked(
        &C,
        &mut w,
        5000,
        &Clock {
            now_jiffies: 1999,
            ..Clock::default()
        },
        0,
        0,
    );
    assert_eq!(cu.delay_min, 0);
    cu.pkts_acked(
        &C,
        &mut w,
        5000,
        &Clock {
            now_jiffies: 2000,
            ..Clock::default()
        },
        0,
        0,
    );
    assert_eq!(cu.delay_min, 5000);
    cu.pkts_acked(
        &C,
        &mut w,
        -1,
        &Clock {
            now_jiffies: 2000,
            ..Clock::default()
        },
        0,
        0,
    );
    cu.pkts_acked(
        &C,
        &mut w,
        0,
        &Clock {
            now_jiffies: 2000,
            ..Clock::default()
        },
        0,
        0,
    );
    assert_eq!(cu.delay_min, 1);
}

#[test]
fn idle_shifts_epoch() {
    let mut cu = Cubic {
        epoch_start: 1000,
        ..Cubic::default()
    };
    cu.on_tx_start(
        &Clock {
            now_jiffies: 5000,
            ..Clock::default()
        },
        4000,
    );
    assert_eq!(cu.epoch_start, 2000);
    // Never beyond now.
    cu.on_tx_start(
        &Clock {
            now_jiffies: 5000,
            ..Clock::default()
        },
        0,
    );
    assert_eq!(cu.epoch_start, 5000);
    // No epoch: untouched; lsndtime in the future: untouched.
    let mut cu = Cubic::default();
    cu.on_tx_start(
        &Clock {
            now_jiffies: 5000,
            ..Clock::default()
        },
        4000,
    );
    assert_eq!(cu.epoch_start, 0);
    let mut cu = Cubic {
        epoch_start: 10,
        ..Cubic::default()
    };
    cu.on_tx_start(
        &Clock {
            now_jiffies: 5000,
            ..Clock::default()
        },
        6000,
    );
    assert_eq!(cu.epoch_start, 10);
}

#[test]
fn mltcp_cubic_grows_f_times_faster() {
    // In the Reno-friendly region the growth is linear in ACKs and F-scaled: F = 2 doubles it.
    // On the cubic curve F only changes the catch-up speed (printed, not asserted).
    let grow = |f: u32| {
        let (mut cu, mut w) = after_loss(20, 10_000);
        let w0 = w.cwnd;
        run(&mut cu, &mut w, 10_000, 1, f, |_, _| {});
        w.cwnd - w0
    };
    let g1 = grow(FX_ONE);
    let g2 = grow(2 * FX_ONE);
    let gq = grow(FX_ONE / 4);
    println!("reno region growth in 1 s: F=0.25 {gq}, F=1 {g1}, F=2 {g2}");
    assert!(g2 as f64 > 1.7 * g1 as f64, "{g1} {g2}");
    assert!((gq as f64) < 0.4 * g1 as f64, "{g1} {gq}");
    let grow2 = |f: u32, secs: u32| {
        let (mut cu, mut w) = after_loss(1000, 100_000);
        let w0 = w.cwnd;
        run(&mut cu, &mut w, 100_000, secs, f, |_, _| {});
        w.cwnd - w0
    };
    for secs in [1, 3, 9, 14] {
        println!(
            "curve region growth in {secs} s: F=0.25 {}, F=1 {}, F=2 {}",
            grow2(256, secs),
            grow2(1024, secs),
            grow2(2048, secs)
        );
    }
}

#[test]
fn first_epoch_without_wmax_grows_5_percent_per_rtt() {
    // last_max_cwnd = 0 (no loss yet) after leaving slow start: cnt capped at 20.
    let mut cu = Cubic::default();
    let mut w = Window {
        cwnd: 100,
        cwnd_cnt: 0,
        ssthresh: 100,
        cwnd_clamp: u32::MAX,
    };
    let clk = Clock {
        now_jiffies: 777,
        ..Clock::default()
    };
    cu.cong_avoid(&C, &mut w, 1, true, &clk);
    assert!(cu.cnt <= 20);
}
