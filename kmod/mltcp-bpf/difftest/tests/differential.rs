// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The differential test of the BPF struct_ops programs
//! (kmod/mltcp-bpf/bpf/mltcp.bpf.c, compiled for user space, see src/lib.rs) against the kernel
//! module's behaviour, i.e. mltcp-math driven by a copy of the module's glue
//! (kmod/tcp_mltcp.rs: `window`, `apply`, `clock`, `idle_us`, and each callback of `Mltcp<B>`,
//! `Reno` and `Cubic`). Both see the same sockets, clock, HZ and parameters, through the same
//! random sequences of ACKs, losses (fast recovery, RTO), undos, idle gaps (iteration
//! boundaries) and parameter changes; after every callback the windows (`snd_cwnd`,
//! `snd_cwnd_cnt`, `snd_ssthresh`), the callbacks' answers and the whole per-socket state
//! (`icsk_ca_priv` read as the module's state structs) must be equal, bit for bit.

use mltcp_bpf_difftest::{harness, Alg, Fields, Sock};
use mltcp_math::cubic::{Clock, CubicParams};
use mltcp_math::fixed::FX_ONE;
use mltcp_math::iteration::slow_start_gain_fx;
use mltcp_math::mltcp::{MltcpCubicState, MltcpRenoState};
use mltcp_math::params::{self, Params};
use mltcp_math::reno::{self, Window};
use proptest::prelude::*;

/// Bytes per segment of the simulated flow.
const MSS: u32 = 1448;
/// `CA_EVENT_TX_START` and `CA_EVENT_LOSS` (`enum tcp_ca_event`).
const TX_START: i32 = 0;
const EV_LOSS: i32 = 1;
/// `enum tcp_ca_state`.
const CA_OPEN: u8 = 0;
const CA_RECOVERY: u8 = 3;
const CA_LOSS: u8 = 4;

/// What happens to the flow next.
#[derive(Clone, Debug)]
enum Ev {
    /// `acked` segments ACKed `dt_us` after the previous event, with an RTT sample (`rtt_us`
    /// < 0: none); `limited`/`max_out` feed `tcp_is_cwnd_limited`.
    Ack {
        acked: u32,
        dt_us: u32,
        rtt_us: i32,
        limited: bool,
        max_out: u32,
    },
    /// Fast retransmit: `ssthresh`, Recovery, the window set to ssthresh, Open.
    Loss,
    /// Retransmission timeout: `ssthresh`, `CA_EVENT_LOSS`, cwnd 1, the Loss state.
    Rto,
    /// A spurious reduction undone (`undo_cwnd`).
    Undo,
    /// The application pauses `gap_us`, then sends (`CA_EVENT_TX_START`).
    Idle { gap_us: u32 },
    /// New parameter values (`mltcp-bpf set` / the module's sysfs parameters).
    Set(Params),
    /// The pacing state changes (`sk_pacing_status`, `sk_pacing_rate`).
    Pacing { status: u32, rate: u64 },
}

/// Valid parameters: each field within its [`params::PARAMS`] range, the defaults often.
fn params_strategy() -> impl Strategy<Value = Params> {
    let r = |s: params::ParamSpec| s.min..=s.max;
    prop_oneof![
        2 => Just(Params::DEFAULT),
        3 => (
            r(params::SLOPE_FX),
            r(params::INTERCEPT_FX),
            prop_oneof![r(params::IDLE_GAP_US), 100u32..100_000],
            r(params::EWMA_WEIGHT_FX),
            r(params::SCALE_SLOW_START),
            r(params::SCALE_DECREASE),
        )
            .prop_map(|(slope_fx, intercept_fx, idle_gap_us, ewma_weight_fx, scale_slow_start, scale_decrease)| Params {
                slope_fx,
                intercept_fx,
                idle_gap_us,
                ewma_weight_fx,
                scale_slow_start,
                scale_decrease,
            }),
    ]
}

fn ev() -> impl Strategy<Value = Ev> {
    prop_oneof![
        40 => (1u32..=64, 0u32..20_000, prop_oneof![1 => Just(-1i32), 8 => 1i32..200_000], prop::bool::weighted(0.85), 0u32..400)
            .prop_map(|(acked, dt_us, rtt_us, limited, max_out)| Ev::Ack { acked, dt_us, rtt_us, limited, max_out }),
        2 => Just(Ev::Loss),
        1 => Just(Ev::Rto),
        1 => Just(Ev::Undo),
        4 => prop_oneof![0u32..40_000, 0u32..3_000_000].prop_map(|gap_us| Ev::Idle { gap_us }),
        1 => params_strategy().prop_map(Ev::Set),
        1 => (0u32..=2, prop_oneof![Just(0u64), 1u64..20_000_000_000]).prop_map(|(status, rate)| Ev::Pacing { status, rate }),
    ]
}

/// The simulated kernel: the socket's fields, its clock and HZ.
#[derive(Clone, Debug)]
struct Kernel {
    f: Fields,
    hz: u32,
    /// jiffies at `now_us = 0`.
    jiffies_base: u64,
    now_us: u64,
}

impl Kernel {
    fn jiffies64(&self) -> u64 {
        self.jiffies_base
            .wrapping_add(self.now_us * u64::from(self.hz) / 1_000_000)
    }
    fn jiffies32(&self) -> u32 {
        self.jiffies64() as u32
    }
}

/// The module's glue (kmod/tcp_mltcp.rs) over mltcp-math: the reference the BPF C must match.
struct Module {
    alg: Alg,
    p: Params,
    c: CubicParams,
    reno: MltcpRenoState,
    cubic: MltcpCubicState,
}

/// `window()` of tcp_mltcp.rs.
fn window(f: &Fields) -> Window {
    Window {
        cwnd: f.cwnd,
        cwnd_cnt: f.cwnd_cnt,
        ssthresh: f.ssthresh,
        cwnd_clamp: f.cwnd_clamp,
    }
}

/// `apply()` of tcp_mltcp.rs.
fn apply(f: &mut Fields, before: &Window, after: &Window) {
    if after.cwnd != before.cwnd {
        f.cwnd = after.cwnd;
    }
    if after.cwnd_cnt != before.cwnd_cnt {
        f.cwnd_cnt = after.cwnd_cnt;
    }
    if after.ssthresh != before.ssthresh {
        f.ssthresh = after.ssthresh;
    }
}

/// `tcp_is_cwnd_limited` (include/net/tcp.h), which the module calls.
fn is_cwnd_limited(f: &Fields) -> bool {
    if f.is_cwnd_limited != 0 {
        return true;
    }
    if f.cwnd < f.ssthresh {
        return u64::from(f.cwnd) < 2 * u64::from(f.max_packets_out);
    }
    false
}

/// `clock()` of tcp_mltcp.rs.
fn clock(k: &Kernel) -> Clock {
    Clock {
        now_jiffies: k.jiffies32(),
        now_us: k.f.tcp_mstamp as u32,
        snd_nxt: k.f.snd_nxt,
        snd_una: k.f.snd_una,
        pacing_enabled: k.f.pacing_status != 0,
    }
}

/// `jiffies_to_usecs(tcp_jiffies32 - lsndtime)` (include/linux/jiffies.h, truncated to u32).
fn idle_us(k: &Kernel) -> u32 {
    let j = k.jiffies32().wrapping_sub(k.f.lsndtime);
    (u64::from(j) * 1_000_000 / u64::from(k.hz)) as u32
}

impl Module {
    fn new(alg: Alg, p: Params, hz: u32) -> Self {
        Module {
            alg,
            p,
            c: CubicParams {
                hz,
                ..CubicParams::LINUX_DEFAULT
            }
            .with_scales(),
            reno: MltcpRenoState::default(),
            cubic: MltcpCubicState::default(),
        }
    }

    /// `Mltcp::init` + `Cubic::init`.
    fn init(&mut self, k: &mut Kernel) {
        let bytes = k.f.bytes_acked;
        match self.alg {
            Alg::Reno => {
                self.reno = MltcpRenoState::default();
                self.reno.iter.init(bytes);
            }
            Alg::Cubic => {
                self.cubic = MltcpCubicState::default();
                self.cubic.iter.init(bytes);
                let clk = clock(k);
                let before = window(&k.f);
                let mut w = before;
                self.cubic.cubic.init(&self.c, &mut w, &clk);
                apply(&mut k.f, &before, &w);
            }
        }
    }

    /// `Reno::ssthresh` / `Cubic::ssthresh`.
    fn ssthresh(&mut self, k: &Kernel) -> u32 {
        match self.alg {
            Alg::Reno => match self.p.decrease_scaling() {
                None => reno::ssthresh(k.f.cwnd),
                Some(scaling) => {
                    let f_fx = self.reno.iter.scale_fx(&self.p, k.f.bytes_acked);
                    reno::mltcp_ssthresh(k.f.cwnd, f_fx, scaling)
                }
            },
            Alg::Cubic => self.cubic.cubic.recalc_ssthresh(&self.c, &window(&k.f)),
        }
    }

    /// `undo_cwnd` of both.
    fn undo_cwnd(&self, k: &Kernel) -> u32 {
        reno::undo_cwnd(k.f.cwnd, k.f.prior_cwnd)
    }

    /// `Reno::cong_avoid` / `Cubic::cong_avoid`.
    fn cong_avoid(&mut self, k: &mut Kernel, acked: u32) {
        let bytes = k.f.bytes_acked;
        let limited = is_cwnd_limited(&k.f);
        let before = window(&k.f);
        let mut w = before;
        match self.alg {
            Alg::Reno => {
                let f_fx = self.reno.iter.scale_fx(&self.p, bytes);
                reno::mltcp_cong_avoid(
                    &mut w,
                    acked,
                    limited,
                    f_fx,
                    slow_start_gain_fx(&self.p, f_fx),
                );
            }
            Alg::Cubic => {
                let clk = clock(k);
                let f_fx = self.cubic.iter.scale_fx(&self.p, bytes);
                self.cubic.cubic.mltcp_cong_avoid(
                    &self.c,
                    &mut w,
                    acked,
                    limited,
                    &clk,
                    f_fx,
                    slow_start_gain_fx(&self.p, f_fx),
                );
            }
        }
        apply(&mut k.f, &before, &w);
    }

    /// `Mltcp::cwnd_event` + `Cubic::cwnd_event`.
    fn cwnd_event(&mut self, k: &Kernel, ev: i32) {
        if ev != TX_START {
            return;
        }
        let (idle, srtt, bytes) = (idle_us(k), k.f.srtt_us >> 3, k.f.bytes_acked);
        match self.alg {
            Alg::Reno => {
                self.reno.iter.on_tx_start(&self.p, idle, srtt, bytes);
            }
            Alg::Cubic => {
                self.cubic.iter.on_tx_start(&self.p, idle, srtt, bytes);
                self.cubic.cubic.on_tx_start(&clock(k), k.f.lsndtime);
            }
        }
    }

    /// `Cubic::set_state` (Reno has none).
    fn set_state(&mut self, k: &Kernel, state: u8) {
        if self.alg == Alg::Cubic && state == CA_LOSS {
            self.cubic.cubic.on_loss_state(&self.c, &clock(k));
        }
    }

    /// `Cubic::pkts_acked` (Reno has none).
    fn pkts_acked(&mut self, k: &mut Kernel, rtt_us: i32) {
        if self.alg != Alg::Cubic {
            return;
        }
        let clk = clock(k);
        let before = window(&k.f);
        let mut w = before;
        self.cubic.cubic.pkts_acked(
            &self.c,
            &mut w,
            rtt_us,
            &clk,
            k.f.pacing_rate,
            k.f.gso_max_size,
        );
        apply(&mut k.f, &before, &w);
    }

    /// F the module would apply to the next ACK.
    fn f_fx(&self, k: &Kernel) -> u32 {
        match self.alg {
            Alg::Reno => self.reno.iter.scale_fx(&self.p, k.f.bytes_acked),
            Alg::Cubic => self.cubic.iter.scale_fx(&self.p, k.f.bytes_acked),
        }
    }

    fn iterations(&self) -> u32 {
        match self.alg {
            Alg::Reno => self.reno.iter.iterations,
            Alg::Cubic => self.cubic.iter.iterations,
        }
    }
}

/// The BPF side and the module side after one callback: the windows and states must agree.
fn check(sock: &Sock<'_>, m: &Module, k: &Kernel, what: &str) -> Result<(), TestCaseError> {
    let mut got = k.f;
    sock.get(&mut got);
    prop_assert_eq!(
        (got.cwnd, got.cwnd_cnt, got.ssthresh),
        (k.f.cwnd, k.f.cwnd_cnt, k.f.ssthresh),
        "window after {}",
        what
    );
    match m.alg {
        Alg::Reno => prop_assert_eq!(sock.reno_state().iter, m.reno.iter, "state after {}", what),
        Alg::Cubic => {
            let s = sock.cubic_state();
            prop_assert_eq!(s.cubic, m.cubic.cubic, "CUBIC state after {}", what);
            prop_assert_eq!(s.iter, m.cubic.iter, "iteration state after {}", what);
        }
    }
    Ok(())
}

/// What one run saw, for the coverage checks.
#[derive(Default, Debug)]
struct Seen {
    /// ACKs processed with F != 1.0.
    acks_with_f: u32,
    /// Measured iterations at the end.
    iterations: u32,
}

/// Runs `evs` through both sides from the socket `f0` and checks them after every callback.
fn run(
    alg: Alg,
    hz: u32,
    jiffies_base: u64,
    now_us: u64,
    f0: Fields,
    p0: Params,
    evs: &[Ev],
) -> Result<Seen, TestCaseError> {
    let h = harness();
    h.reset_stats();
    let mut k = Kernel {
        f: f0,
        hz,
        jiffies_base,
        now_us,
    };
    k.f.tcp_mstamp = k.now_us;
    k.f.lsndtime = k.jiffies32();
    let mut m = Module::new(alg, p0, hz);
    h.set_params(&p0);
    let mut sock = h.sock();
    let mut seen = Seen::default();
    let mut losses = 0u64;

    // Every callback: the same socket and clock into the BPF side, then both run.
    macro_rules! both {
        ($what:expr, $bpf:expr, $module:expr) => {{
            h.set_clock(k.hz, k.jiffies64());
            sock.set(&k.f);
            let b = $bpf(&mut sock);
            let r = $module(&mut m, &mut k);
            prop_assert_eq!(b, r, "answer of {}", $what);
            check(&sock, &m, &k, $what)?;
        }};
    }

    both!(
        "init",
        |s: &mut Sock<'_>| s.init(alg),
        |m: &mut Module, k: &mut Kernel| m.init(k)
    );
    for ev in evs {
        match *ev {
            Ev::Ack {
                acked,
                dt_us,
                rtt_us,
                limited,
                max_out,
            } => {
                k.now_us += u64::from(dt_us);
                k.f.tcp_mstamp = k.now_us;
                k.f.snd_una = k.f.snd_una.wrapping_add(acked.wrapping_mul(MSS));
                k.f.bytes_acked += u64::from(acked) * u64::from(MSS);
                k.f.snd_nxt = k.f.snd_una.wrapping_add(k.f.cwnd.wrapping_mul(MSS));
                k.f.is_cwnd_limited = u32::from(limited);
                k.f.max_packets_out = max_out;
                if rtt_us > 0 {
                    k.f.srtt_us = (rtt_us as u32) << 3;
                }
                if m.f_fx(&k) != FX_ONE {
                    seen.acks_with_f += 1;
                }
                both!(
                    "pkts_acked",
                    |s: &mut Sock<'_>| s.pkts_acked(alg, acked, rtt_us),
                    |m: &mut Module, k: &mut Kernel| m.pkts_acked(k, rtt_us)
                );
                both!(
                    "cong_avoid",
                    |s: &mut Sock<'_>| s.cong_avoid(alg, acked),
                    |m: &mut Module, k: &mut Kernel| m.cong_avoid(k, acked)
                );
                k.f.lsndtime = k.jiffies32();
            }
            Ev::Loss | Ev::Rto => {
                let rto = matches!(ev, Ev::Rto);
                k.f.prior_cwnd = k.f.cwnd;
                let mut ss = 0;
                both!(
                    if rto {
                        "ssthresh (RTO)"
                    } else {
                        "ssthresh (loss)"
                    },
                    |s: &mut Sock<'_>| s.ssthresh(alg),
                    |m: &mut Module, k: &mut Kernel| {
                        ss = m.ssthresh(k);
                        ss
                    }
                );
                losses += 1;
                k.f.ssthresh = ss;
                macro_rules! state {
                    ($state:expr) => {
                        both!(
                            "set_state",
                            |s: &mut Sock<'_>| s.set_state(alg, $state),
                            |m: &mut Module, k: &mut Kernel| m.set_state(k, $state)
                        )
                    };
                }
                if rto {
                    // tcp_enter_loss: CA_EVENT_LOSS, cwnd 1, the Loss state.
                    both!(
                        "cwnd_event(LOSS)",
                        |s: &mut Sock<'_>| s.cwnd_event(alg, EV_LOSS),
                        |m: &mut Module, k: &mut Kernel| m.cwnd_event(k, EV_LOSS)
                    );
                    k.f.cwnd = 1;
                    k.f.cwnd_cnt = 0;
                    state!(CA_LOSS);
                } else {
                    // Fast recovery, then the window at ssthresh when it ends.
                    state!(CA_RECOVERY);
                    k.f.cwnd = ss.max(1);
                    k.f.cwnd_cnt = 0;
                    state!(CA_OPEN);
                }
            }
            Ev::Undo => {
                let mut cwnd = 0;
                both!(
                    "undo_cwnd",
                    |s: &mut Sock<'_>| s.undo_cwnd(alg),
                    |m: &mut Module, k: &mut Kernel| {
                        cwnd = m.undo_cwnd(k);
                        cwnd
                    }
                );
                k.f.cwnd = cwnd;
            }
            Ev::Idle { gap_us } => {
                k.now_us += u64::from(gap_us);
                k.f.tcp_mstamp = k.now_us;
                both!(
                    "cwnd_event(TX_START)",
                    |s: &mut Sock<'_>| s.cwnd_event(alg, TX_START),
                    |m: &mut Module, k: &mut Kernel| m.cwnd_event(k, TX_START)
                );
                k.f.lsndtime = k.jiffies32();
            }
            Ev::Set(p) => {
                m.p = p;
                h.set_params(&p);
            }
            Ev::Pacing { status, rate } => {
                k.f.pacing_status = status;
                k.f.pacing_rate = rate;
            }
        }
    }
    both!(
        "release",
        |s: &mut Sock<'_>| s.release(alg),
        |_: &mut Module, _: &mut Kernel| ()
    );

    let st = h.stats(alg);
    prop_assert_eq!(st.flows_started, 1);
    prop_assert_eq!(st.flows_released, 1);
    prop_assert_eq!(st.losses, losses);
    prop_assert_eq!(st.iterations, u64::from(m.iterations()));
    seen.iterations = m.iterations();
    Ok(seen)
}

fn fields() -> impl Strategy<Value = Fields> {
    (
        1u32..=100,
        prop_oneof![Just(0x7fff_ffffu32), 2u32..2000],
        prop_oneof![Just(u32::MAX), 2u32..100_000],
        any::<u32>(),
        prop_oneof![Just(0u64), any::<u64>().prop_map(|b| b >> 8)],
        (0u32..=2, 1000u32..=65536),
    )
        .prop_map(
            |(cwnd, ssthresh, cwnd_clamp, una, bytes, (pacing, gso))| Fields {
                cwnd: cwnd.min(cwnd_clamp),
                ssthresh,
                cwnd_clamp,
                snd_una: una,
                snd_nxt: una.wrapping_add(cwnd.wrapping_mul(MSS)),
                srtt_us: 1000 << 3,
                bytes_acked: bytes,
                pacing_status: pacing,
                pacing_rate: 125_000_000,
                gso_max_size: gso,
                ..Fields::default()
            },
        )
}

fn hz() -> impl Strategy<Value = u32> {
    prop_oneof![Just(1000u32), Just(250u32), Just(100u32), Just(300u32)]
}

/// Everything a run starts from: the HZ, how far before the 32-bit jiffies wrap the clock starts
/// (so that runs cross it), the µs clock, the socket and the parameters.
fn start() -> impl Strategy<Value = (u32, u64, u64, Fields, Params)> {
    (
        hz(),
        (0u64..2_000_000).prop_map(|back| (1u64 << 32) - back),
        0u64..(1 << 34),
        fields(),
        params_strategy(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// `mltcp` (Reno based) and `mltcp_cubic` alike, each case on one of them.
    #[test]
    fn bpf_matches_the_module(
        alg in prop_oneof![Just(Alg::Reno), Just(Alg::Cubic)],
        (hz, jiffies_base, now_us, f0, p0) in start(),
        evs in prop::collection::vec(ev(), 1..400),
    ) {
        run(alg, hz, jiffies_base, now_us, f0, p0, &evs)?;
    }
}

/// A training-shaped flow (bursts of 200 ACKs separated by 100 ms of compute): the comparison
/// above is only worth something if F leaves 1.0; here iterations are measured and F acts on
/// most ACKs, on both algorithms, and both sides still agree.
#[test]
fn iterations_are_measured_and_f_acts() {
    let mut evs = Vec::new();
    for _ in 0..12 {
        evs.push(Ev::Idle { gap_us: 100_000 });
        for i in 0..200 {
            evs.push(Ev::Ack {
                acked: 2,
                dt_us: 50,
                rtt_us: 1000,
                limited: true,
                max_out: 0,
            });
            if i == 150 {
                evs.push(Ev::Loss);
            }
        }
    }
    let f0 = Fields {
        cwnd: 10,
        ssthresh: 0x7fff_ffff,
        cwnd_clamp: u32::MAX,
        srtt_us: 1000 << 3,
        gso_max_size: 65536,
        ..Fields::default()
    };
    for alg in [Alg::Reno, Alg::Cubic] {
        for hz in [1000, 250] {
            let seen = run(alg, hz, 1 << 31, 1 << 20, f0, Params::DEFAULT, &evs)
                .unwrap_or_else(|e| panic!("{alg:?} at HZ {hz}: {e}"));
            assert_eq!(seen.iterations, 11, "{alg:?} at HZ {hz}: {seen:?}");
            assert!(seen.acks_with_f > 1500, "{alg:?} at HZ {hz}: {seen:?}");
        }
    }
}

/// The struct_ops tables carry the module's algorithm names, so `TCP_CONGESTION`, sysctl and
/// `ip route ... congctl` select them the same way.
#[test]
fn names_are_the_modules() {
    let h = harness();
    assert_eq!(h.name(Alg::Reno), "mltcp");
    assert_eq!(h.name(Alg::Cubic), "mltcp_cubic");
}
