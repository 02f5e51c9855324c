// SPDX-License-Identifier: GPL-2.0

//! tcp_mltcp: MLTCP congestion control for distributed DNN training.
//!
//! MLTCP ("MLTCP: A Distributed Technique to Approximate Centralized Flow Scheduling For
//! Machine Learning", Rajasekaran et al., HotNets '24; the MIT thesis "Cassini and MLTCP",
//! ch. 1 and 5) scales a loss-based algorithm's window increase by
//! `F(bytes_ratio) = slope * bytes_ratio + intercept`, where `bytes_ratio` is the share of the
//! current training iteration's bytes already acknowledged. A job further into its communication
//! phase grows faster, so jobs that share a bottleneck drift apart, iteration after iteration,
//! until their communication phases interleave instead of colliding.
//!
//! Three algorithms are registered, all on the `cong_avoid` hook so the kernel's own loss
//! recovery (PRR) and pacing-rate update stay in charge:
//!
//! - `mltcp`: Reno (`net/ipv4/tcp_cong.c`) with F segments per RTT in congestion avoidance;
//! - `mltcp_cubic`: CUBIC with HyStart (`net/ipv4/tcp_cubic.c`, RFC 9438) whose per-ACK growth
//!   is scaled by F;
//! - `mltcp_dctcp`: DCTCP (`net/ipv4/tcp_dctcp.c`, RFC 8257: ECN required, the window cut in
//!   proportion to the fraction of CE-marked packets) with MLTCP-Reno's F-scaled increase; without
//!   ECN negotiated it runs MLTCP-Reno, as tcp_dctcp.c falls back to Reno.
//!
//! Multiplicative decrease is the base's, except `mltcp`'s by default (`scale_decrease = 2`:
//! a loss keeps the larger of Reno's half and `1 − 1/(2F)`, so a flow late in its iteration
//! keeps more; 1 scales both ways, 0 is Reno's: `mltcp_math::reno::mltcp_ssthresh`); slow start
//! is scaled by F capped at 1.0 (`scale_slow_start`). Iterations are found in the flow itself:
//! a send after an idle gap longer than `idle_gap_us` (and than two smoothed RTTs) starts a new
//! iteration; bytes per iteration are an EWMA of completed iterations. Until one iteration has
//! completed, F = 1 and the algorithms behave exactly as Reno and CUBIC. All the math lives in the
//! `mltcp-math` crate (integer fixed point, tested in user space); this file is glue.
//!
//! The module also carries a CCP datapath (`ccp.rs`): when a user-space agent built on `portus`
//! listens on netlink (`NETLINK_USERSOCK`, group 22), new flows are offered to it, and once it
//! installs a program for a flow the agent sets its rate and cwnd; whenever it does not (no agent,
//! no program, agent killed), the flow runs native MLTCP.
//!
//! Each algorithm is a [`Base`] (its window math, through `mltcp-math`) inside one generic
//! wrapper, [`Mltcp`], which owns everything the three share: the CCP glue (offer the flow at
//! `init`, end it at `release`, run the agent's program per ACK and during window reductions),
//! MLTCP's iteration tracking (`init`, `CA_EVENT_TX_START`) and `get_info`. Adding a base is one
//! `impl Base` and one `Registration`.
//!
//! Operators read the per-socket state (iterations, bytes_ratio, F, bytes per iteration) with
//! `getsockopt(TCP_CC_INFO)` or the `INET_DIAG_INFO` answer of sock_diag, as the attribute
//! [`MLTCP_INFO_ATTR`]; `mltcp-stat` prints it for every socket.

use kernel::net::tcp::{
    cong::{self, AckSample, Algorithm, CcInfo, Event, Registration},
    jiffies32, jiffies_to_usecs, tcp_state, PacingStatus, Sock,
};
use kernel::{c_str, prelude::*};

// Public so the kernel's unreachable-pub and dead-code lints treat the crates' APIs as exported.
mod ccp;
#[allow(unused_attributes)]
#[path = "ccp-datapath/src/lib.rs"]
pub mod ccp_datapath;
#[path = "mltcp-math/src/lib.rs"]
pub mod mltcp_math;

use core::marker::PhantomData;
use mltcp_math::{
    cubic::{Clock, CubicParams},
    dctcp::Counters,
    info::MltcpInfo,
    iteration::{f_log_mean_fx, slow_start_gain_fx, Iteration, Snapshot},
    mltcp::{DctcpMode, MltcpCubicState, MltcpDctcpState, MltcpRenoState},
    params::{self, ParamError, Params},
    reno::{self, Window},
    wrapper::{self, MltcpState, WithCcp},
};

module! {
    type: MltcpModule,
    name: "tcp_mltcp",
    author: "The MLTCP project",
    description: "MLTCP: Reno, CUBIC and DCTCP whose window increase is scaled by F(bytes_ratio), for DNN training jobs",
    license: "GPL",
}

/// Turns a refused parameter value into `EINVAL`, with a log line naming it.
fn refuse(e: ParamError) -> Error {
    pr_warn!(
        "refused {}={} (valid range {}..={})\n",
        e.name,
        e.value,
        e.min,
        e.max
    );
    EINVAL
}

// The module's parameters: names, defaults and ranges are `mltcp_math::params::PARAMS`'s (the
// macro needs literal names; a test in kmod/mltcp-math/tests/module_params.rs pins them to the
// table, both ways).
kernel::module_param!(
    /// Slope of F(bytes_ratio), fixed point (1024 = 1.0).
    static SLOPE_FX: u32 = params::SLOPE_FX.default;
    module: "tcp_mltcp", name: "slope_fx", perm: 0o644,
    check: |v| params::SLOPE_FX.check(v).map_err(refuse),
    desc: "Slope of F(bytes_ratio) = slope*bytes_ratio + intercept, fixed point 1024 = 1.0 (0..65536)"
);
kernel::module_param!(
    /// Intercept of F(bytes_ratio), fixed point (1024 = 1.0).
    static INTERCEPT_FX: u32 = params::INTERCEPT_FX.default;
    module: "tcp_mltcp", name: "intercept_fx", perm: 0o644,
    check: |v| params::INTERCEPT_FX.check(v).map_err(refuse),
    desc: "Intercept of F(bytes_ratio), fixed point 1024 = 1.0 (1..65536)"
);
kernel::module_param!(
    /// Idle gap that starts a new training iteration, in microseconds.
    static IDLE_GAP_US: u32 = params::IDLE_GAP_US.default;
    module: "tcp_mltcp", name: "idle_gap_us", perm: 0o644,
    check: |v| params::IDLE_GAP_US.check(v).map_err(refuse),
    desc: "A send after an idle gap longer than this (and than 2 smoothed RTTs) starts a new iteration, in us"
);
kernel::module_param!(
    /// Weight of the newest iteration in the bytes-per-iteration EWMA, fixed point.
    static EWMA_WEIGHT_FX: u32 = params::EWMA_WEIGHT_FX.default;
    module: "tcp_mltcp", name: "ewma_weight_fx", perm: 0o644,
    check: |v| params::EWMA_WEIGHT_FX.check(v).map_err(refuse),
    desc: "Weight of the newest iteration in the bytes-per-iteration EWMA, fixed point 1024 = 1.0 (1..1024)"
);

kernel::module_param!(
    /// Whether F also scales the slow-start increase (capped at 1.0).
    static SCALE_SLOW_START: u32 = params::SCALE_SLOW_START.default;
    module: "tcp_mltcp", name: "scale_slow_start", perm: 0o644,
    check: |v| params::SCALE_SLOW_START.check(v).map_err(refuse),
    desc: "1: F(bytes_ratio) also scales the slow-start increase, capped at 1.0; 0: Linux's slow start (0..1)"
);

kernel::module_param!(
    /// Whether `mltcp`'s multiplicative decrease is scaled by F as well.
    static SCALE_DECREASE: u32 = params::SCALE_DECREASE.default;
    module: "tcp_mltcp", name: "scale_decrease", perm: 0o644,
    check: |v| params::SCALE_DECREASE.check(v).map_err(refuse),
    desc: "mltcp at a loss: 0 keeps Reno's half; 1 keeps 1 - 1/(2F) (within 1/8..7/8); 2 keeps the larger of the two (0..2)"
);

kernel::module_param!(
    /// CCP: fall back to native MLTCP after this long without a message from the agent (0: off).
    static CCP_HEARTBEAT_MS: u32 = params::CCP_HEARTBEAT_MS.default;
    module: "tcp_mltcp", name: "ccp_heartbeat_ms", perm: 0o644,
    check: |v| params::CCP_HEARTBEAT_MS.check(v).map_err(refuse),
    desc: "CCP: flows go back to native MLTCP when the agent sent nothing for this long, in ms; 0 = off (0..600000)"
);

kernel::module_param!(
    /// CCP: 1 runs agent programs in the interpreter instead of their compiled form.
    static CCP_INTERPRET: u32 = params::CCP_INTERPRET.default;
    module: "tcp_mltcp", name: "ccp_interpret", perm: 0o644,
    check: |v| params::CCP_INTERPRET.check(v).map_err(refuse),
    desc: "CCP: 0 runs agent programs compiled (built at install); 1 forces the interpreter, the reference (0..1)"
);

kernel::module_param!(
    /// DCTCP's alpha gain g = 1/2^shift_g (tcp_dctcp.c's `dctcp_shift_g`).
    static DCTCP_SHIFT_G: u32 = params::DCTCP_SHIFT_G.default;
    module: "tcp_mltcp", name: "dctcp_shift_g", perm: 0o644,
    check: |v| params::DCTCP_SHIFT_G.check(v).map_err(refuse),
    desc: "mltcp_dctcp: alpha's EWMA gain is 1/2^dctcp_shift_g, as tcp_dctcp.c (0..10, default 4)"
);
kernel::module_param!(
    /// DCTCP's initial alpha (tcp_dctcp.c's `dctcp_alpha_on_init`), fixed point 1024 = 1.0.
    static DCTCP_ALPHA_ON_INIT: u32 = params::DCTCP_ALPHA_ON_INIT.default;
    module: "tcp_mltcp", name: "dctcp_alpha_on_init", perm: 0o644,
    check: |v| params::DCTCP_ALPHA_ON_INIT.check(v).map_err(refuse),
    desc: "mltcp_dctcp: initial alpha, fixed point 1024 = 1.0, as tcp_dctcp.c (0..1024)"
);

kernel::module_param!(
    /// How F scales mltcp_dctcp's ECN cut (0: DCTCP's; 1: divided by F; 2: by max(F, 1); 3: by
    /// F over its log-mean).
    static DCTCP_SCALE_CUT: u32 = params::DCTCP_SCALE_CUT.default;
    module: "tcp_mltcp", name: "dctcp_scale_cut", perm: 0o644,
    check: |v| params::DCTCP_SCALE_CUT.check(v).map_err(refuse),
    desc: "mltcp_dctcp on an ECN cut: 0 cuts cwnd*alpha/2 as DCTCP; 1 cuts cwnd*alpha/(2F), at most half; 2 the same with F below 1 counted as 1; 3 cuts cwnd*alpha*L/(2F), L the log-mean of F (0..3)"
);

/// The CCP heartbeat timeout, ms (0: off).
fn ccp_heartbeat_ms() -> u32 {
    CCP_HEARTBEAT_MS.get()
}

/// Whether the CCP datapath runs programs in the interpreter (`ccp_interpret` = 1) rather than
/// their compiled form.
fn ccp_interpret() -> bool {
    CCP_INTERPRET.get() != 0
}

/// The current parameters (each read lock-free; a write between reads mixes old and new values
/// for one ACK at most, which is harmless).
fn params() -> Params {
    Params {
        slope_fx: SLOPE_FX.get(),
        intercept_fx: INTERCEPT_FX.get(),
        idle_gap_us: IDLE_GAP_US.get(),
        ewma_weight_fx: EWMA_WEIGHT_FX.get(),
        scale_slow_start: SCALE_SLOW_START.get(),
        scale_decrease: SCALE_DECREASE.get(),
    }
}

/// CUBIC's constants, as Linux's tcp_cubic.c module defaults (HZ = 1000 in our kernels is
/// checked at build time below).
const CUBIC: CubicParams = CubicParams::LINUX_DEFAULT;
const _: () = assert!(CUBIC.hz == kernel::time::HZ);

/// Netlink attribute type of the MLTCP block in `INET_DIAG_INFO` answers (defined in
/// [`mltcp_math::info`], with the block's layout).
pub const MLTCP_INFO_ATTR: u16 = mltcp_math::info::MLTCP_INFO_ATTR;

/// Encodes a snapshot as the 20-byte MLTCP info block ([`MltcpInfo`]: the layout, encoder and
/// decoder `mltcp-stat` and `trainemu` read it with).
fn info_block(s: &Snapshot) -> Option<CcInfo> {
    CcInfo::new(MLTCP_INFO_ATTR, &MltcpInfo::from_snapshot(s).encode()).ok()
}

/// Reads the window fields the math updates.
fn window<T: ?Sized>(sk: &Sock<'_, T>) -> Window {
    Window {
        cwnd: sk.snd_cwnd(),
        cwnd_cnt: sk.snd_cwnd_cnt(),
        ssthresh: sk.snd_ssthresh(),
        cwnd_clamp: sk.snd_cwnd_clamp(),
    }
}

/// Writes back what the math changed.
fn apply<T: ?Sized>(sk: &mut Sock<'_, T>, before: &Window, after: &Window) {
    if after.cwnd != before.cwnd {
        sk.set_snd_cwnd(after.cwnd);
    }
    if after.cwnd_cnt != before.cwnd_cnt {
        sk.set_snd_cwnd_cnt(after.cwnd_cnt);
    }
    if after.ssthresh != before.ssthresh {
        sk.set_snd_ssthresh(after.ssthresh);
    }
}

/// Microseconds the socket was idle before the send that raised `CA_EVENT_TX_START`
/// (`lsndtime` still holds the previous send's time then).
fn idle_us<T: ?Sized>(sk: &Sock<'_, T>) -> u32 {
    jiffies_to_usecs(jiffies32().wrapping_sub(sk.lsndtime()))
}

fn clock<T: ?Sized>(sk: &Sock<'_, T>) -> Clock {
    Clock {
        now_jiffies: jiffies32(),
        // `bictcp_clock_us()`: the socket's cached clock, truncated as tcp_cubic.c does.
        now_us: sk.tcp_mstamp_us() as u32,
        snd_nxt: sk.snd_nxt(),
        snd_una: sk.snd_una(),
        pacing_enabled: sk.pacing_status() != PacingStatus::None,
    }
}

// The wrapper's congestion states are the kernel's.
const _: () =
    assert!(wrapper::CA_CWR == cong::state::CWR && wrapper::CA_RECOVERY == cong::state::RECOVERY);

// SAFETY: Integers only; all-zero is the documented initial state of every MLTCP state.
unsafe impl kernel::init::Zeroable for MltcpRenoState {}
// SAFETY: As above.
unsafe impl kernel::init::Zeroable for MltcpCubicState {}
// SAFETY: As above.
unsafe impl kernel::init::Zeroable for MltcpDctcpState {}
// SAFETY: A `Zeroable` state and an integer; a zero `ccp_sid` means "no CCP flow".
unsafe impl<S: kernel::init::Zeroable> kernel::init::Zeroable for WithCcp<S> {}

/// The socket handle the callbacks of base `B` receive.
type Sk<'a, B> = Sock<'a, Mltcp<B>>;

/// A base algorithm that [`Mltcp`] wraps: its window math and its own callbacks, nothing of
/// CCP or of MLTCP's iteration tracking. Its state is `sk.data().m`. Optional callbacks are
/// registered with the kernel only when the base has them (`HAS_*`, from `#[vtable]`).
#[vtable]
trait Base: Sized + 'static {
    /// The algorithm's name (`TCP_CONGESTION`).
    const NAME: &'static CStr;
    /// `TCP_CONG_*` flags.
    const FLAGS: u32 = 0;
    /// Per-socket state, with the iteration tracking in it.
    type State: MltcpState + kernel::init::Zeroable;

    /// Returns the slow-start threshold after a loss.
    fn ssthresh(sk: &mut Sk<'_, Self>) -> u32;
    /// Returns the window to restore when a loss was spurious.
    fn undo_cwnd(sk: &mut Sk<'_, Self>) -> u32;
    /// Native window growth (F-scaled), when the agent is not in charge of the flow.
    fn cong_avoid(sk: &mut Sk<'_, Self>, acked: u32);

    /// The base's own `init`, after the wrapper reset the state and started iteration tracking.
    fn init(_sk: &mut Sk<'_, Self>) {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// The base's own `pkts_acked`, after the wrapper's.
    fn pkts_acked(_sk: &mut Sk<'_, Self>, _sample: &AckSample) {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// The base's own `cwnd_event`, after the wrapper's iteration tracking.
    fn cwnd_event(_sk: &mut Sk<'_, Self>, _ev: Event) {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `set_state`.
    fn set_state(_sk: &mut Sk<'_, Self>, _new_state: u8) {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `in_ack_event`.
    fn in_ack_event(_sk: &mut Sk<'_, Self>, _flags: u32) {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

/// MLTCP over base `B`, as registered with TCP: the glue every base shares, once.
///
/// - `init` offers the flow to the CCP agent (when one listens), resets the state with the
///   flow's socket id and starts iteration tracking; `release` ends the CCP flow, exactly once
///   ([`WithCcp::take_sid`]), for every base;
/// - `cong_avoid` runs the agent's program and leaves the window to it when it is in charge,
///   else the base grows it; `pkts_acked` runs the program during window reductions (CWR,
///   Recovery), when TCP calls PRR instead of `cong_avoid`;
/// - `CA_EVENT_TX_START` updates the iteration tracking; `get_info` reports it.
struct Mltcp<B>(PhantomData<B>);

#[vtable]
impl<B: Base> Algorithm for Mltcp<B> {
    const NAME: &'static CStr = B::NAME;
    const FLAGS: u32 = B::FLAGS;
    // Registered only for bases that have them (the wrapper adds nothing there).
    const HAS_SET_STATE: bool = B::HAS_SET_STATE;
    const HAS_IN_ACK_EVENT: bool = B::HAS_IN_ACK_EVENT;
    type Data = WithCcp<B::State>;

    fn init(sk: &mut Sock<'_, Self>) {
        let bytes = sk.bytes_acked();
        let sid = ccp::flow_init(sk, B::NAME.as_bytes());
        let d = sk.data();
        *d = WithCcp::new(B::State::default(), sid);
        d.m.iter_mut().init(bytes);
        if B::HAS_INIT {
            B::init(sk);
        }
    }

    fn release(sk: &mut Sock<'_, Self>) {
        if let Some(sid) = sk.data().take_sid() {
            ccp::flow_release(sk, sid);
        }
    }

    fn ssthresh(sk: &mut Sock<'_, Self>) -> u32 {
        B::ssthresh(sk)
    }

    fn undo_cwnd(sk: &mut Sock<'_, Self>) -> u32 {
        B::undo_cwnd(sk)
    }

    fn cong_avoid(sk: &mut Sock<'_, Self>, _ack: u32, acked: u32) {
        let sid = sk.data().sid();
        if wrapper::native_runs(sid, |sid| ccp::on_ack(sk, sid, acked)) {
            B::cong_avoid(sk, acked);
        }
    }

    fn pkts_acked(sk: &mut Sock<'_, Self>, sample: &AckSample) {
        let state = sk.ca_state();
        if let Some(sid) = sk.data().ccp_runs_in_pkts_acked(state) {
            // The window stays PRR's for this ACK: tcp_cwnd_reduction() sets it after us. The
            // state is the one before this ACK; an ACK that ends the reduction runs the program
            // twice, which is harmless (its counters are deltas since the last run, and the
            // reporting conditions need a non-zero delta or a new slot).
            let _ = ccp::on_ack(sk, sid, sample.pkts_acked);
        }
        if B::HAS_PKTS_ACKED {
            B::pkts_acked(sk, sample);
        }
    }

    fn cwnd_event(sk: &mut Sock<'_, Self>, ev: Event) {
        if ev == Event::TxStart {
            let (idle, srtt, bytes) = (idle_us(sk), sk.srtt_us(), sk.bytes_acked());
            sk.data()
                .m
                .iter_mut()
                .on_tx_start(&params(), idle, srtt, bytes);
        }
        if B::HAS_CWND_EVENT {
            B::cwnd_event(sk, ev);
        }
    }

    fn set_state(sk: &mut Sock<'_, Self>, new_state: u8) {
        if B::HAS_SET_STATE {
            B::set_state(sk, new_state);
        }
    }

    fn in_ack_event(sk: &mut Sock<'_, Self>, flags: u32) {
        if B::HAS_IN_ACK_EVENT {
            B::in_ack_event(sk, flags);
        }
    }

    fn get_info(sk: &Sock<'_, Self>, ext: u32) -> Option<CcInfo> {
        if !wrapper::wants_info(ext) {
            return None;
        }
        let it: Iteration = *sk.data_snapshot().m.iter();
        info_block(&it.snapshot(&params(), sk.bytes_acked()))
    }
}

/// DCTCP's view of the sender's counters.
fn dctcp_counters<T: ?Sized>(sk: &Sock<'_, T>) -> Counters {
    Counters {
        snd_una: sk.snd_una(),
        snd_nxt: sk.snd_nxt(),
        delivered: sk.delivered(),
        delivered_ce: sk.delivered_ce(),
    }
}

/// `mltcp`: Reno with an F-scaled additive increase.
struct Reno;

#[vtable]
impl Base for Reno {
    const NAME: &'static CStr = c_str!("mltcp");
    type State = MltcpRenoState;

    fn ssthresh(sk: &mut Sk<'_, Self>) -> u32 {
        let p = params();
        let Some(scaling) = p.decrease_scaling() else {
            return reno::ssthresh(sk.snd_cwnd());
        };
        let bytes = sk.bytes_acked();
        let f_fx = sk.data().m.iter.scale_fx(&p, bytes);
        reno::mltcp_ssthresh(sk.snd_cwnd(), f_fx, scaling)
    }

    fn undo_cwnd(sk: &mut Sk<'_, Self>) -> u32 {
        reno::undo_cwnd(sk.snd_cwnd(), sk.prior_cwnd())
    }

    fn cong_avoid(sk: &mut Sk<'_, Self>, acked: u32) {
        let (p, bytes) = (params(), sk.bytes_acked());
        let f_fx = sk.data().m.iter.scale_fx(&p, bytes);
        let before = window(sk);
        let mut w = before;
        reno::mltcp_cong_avoid(
            &mut w,
            acked,
            sk.is_cwnd_limited(),
            f_fx,
            slow_start_gain_fx(&p, f_fx),
        );
        apply(sk, &before, &w);
    }
}

/// `mltcp_cubic`: CUBIC with HyStart whose per-ACK growth is scaled by F.
struct Cubic;

#[vtable]
impl Base for Cubic {
    const NAME: &'static CStr = c_str!("mltcp_cubic");
    type State = MltcpCubicState;

    fn init(sk: &mut Sk<'_, Self>) {
        let clk = clock(sk);
        let before = window(sk);
        let mut w = before;
        sk.data().m.cubic.init(&CUBIC, &mut w, &clk);
        apply(sk, &before, &w);
    }

    fn ssthresh(sk: &mut Sk<'_, Self>) -> u32 {
        let w = window(sk);
        sk.data().m.cubic.recalc_ssthresh(&CUBIC, &w)
    }

    fn undo_cwnd(sk: &mut Sk<'_, Self>) -> u32 {
        reno::undo_cwnd(sk.snd_cwnd(), sk.prior_cwnd())
    }

    fn cong_avoid(sk: &mut Sk<'_, Self>, acked: u32) {
        let (clk, limited, bytes) = (clock(sk), sk.is_cwnd_limited(), sk.bytes_acked());
        let before = window(sk);
        let mut w = before;
        let d = &mut sk.data().m;
        let p = params();
        let f_fx = d.iter.scale_fx(&p, bytes);
        d.cubic.mltcp_cong_avoid(
            &CUBIC,
            &mut w,
            acked,
            limited,
            &clk,
            f_fx,
            slow_start_gain_fx(&p, f_fx),
        );
        apply(sk, &before, &w);
    }

    fn set_state(sk: &mut Sk<'_, Self>, new_state: u8) {
        if new_state == cong::state::LOSS {
            let clk = clock(sk);
            sk.data().m.cubic.on_loss_state(&CUBIC, &clk);
        }
    }

    fn cwnd_event(sk: &mut Sk<'_, Self>, ev: Event) {
        if ev == Event::TxStart {
            let (clk, lsnd) = (clock(sk), sk.lsndtime());
            sk.data().m.cubic.on_tx_start(&clk, lsnd);
        }
    }

    fn pkts_acked(sk: &mut Sk<'_, Self>, sample: &AckSample) {
        let clk = clock(sk);
        let (pacing, gso) = (sk.pacing_rate(), sk.gso_max_size());
        let before = window(sk);
        let mut w = before;
        sk.data()
            .m
            .cubic
            .pkts_acked(&CUBIC, &mut w, sample.rtt_us, &clk, pacing, gso);
        apply(sk, &before, &w);
    }
}

/// `mltcp_dctcp`: DCTCP whose additive increase is scaled by F (the decrease is DCTCP's).
struct Dctcp;

#[vtable]
impl Base for Dctcp {
    const NAME: &'static CStr = c_str!("mltcp_dctcp");
    const FLAGS: u32 = cong::flags::NEEDS_ECN;
    type State = MltcpDctcpState;

    fn init(sk: &mut Sk<'_, Self>) {
        let (c, rcv_nxt, bytes) = (dctcp_counters(sk), sk.rcv_nxt(), sk.bytes_acked());
        let not_connected = matches!(sk.sk_state(), tcp_state::LISTEN | tcp_state::CLOSE);
        let ecn_ok = sk.ecn_ok();
        let mode = sk.data().m.init(
            &c,
            rcv_nxt,
            bytes,
            ecn_ok,
            not_connected,
            DCTCP_ALPHA_ON_INIT.get(),
        );
        if mode == DctcpMode::RenoFallback {
            // As tcp_dctcp.c: ECT was set during the handshake for an ECN-needing algorithm.
            sk.ecn_dontxmit();
        }
    }

    fn ssthresh(sk: &mut Sk<'_, Self>) -> u32 {
        let (p, cwnd, bytes) = (params(), sk.snd_cwnd(), sk.bytes_acked());
        let m = &mut sk.data().m;
        let f_fx = m.iter.scale_fx(&p, bytes);
        m.ssthresh(cwnd, f_fx, DCTCP_SCALE_CUT.get(), || f_log_mean_fx(&p))
    }

    fn undo_cwnd(sk: &mut Sk<'_, Self>) -> u32 {
        let (cwnd, prior) = (sk.snd_cwnd(), sk.prior_cwnd());
        sk.data().m.undo_cwnd(cwnd, prior)
    }

    fn cong_avoid(sk: &mut Sk<'_, Self>, acked: u32) {
        let (limited, bytes) = (sk.is_cwnd_limited(), sk.bytes_acked());
        let before = window(sk);
        let mut w = before;
        sk.data()
            .m
            .cong_avoid(&params(), &mut w, acked, limited, bytes);
        apply(sk, &before, &w);
    }

    fn in_ack_event(sk: &mut Sk<'_, Self>, _flags: u32) {
        let c = dctcp_counters(sk);
        sk.data().m.in_ack_event(&c, DCTCP_SHIFT_G.get());
    }

    fn set_state(sk: &mut Sk<'_, Self>, new_state: u8) {
        let (old_state, cwnd) = (sk.ca_state(), sk.snd_cwnd());
        if let Some(ssthresh) =
            sk.data()
                .m
                .set_state(new_state, old_state, cong::state::RECOVERY, cwnd)
        {
            sk.set_snd_ssthresh(ssthresh);
        }
    }

    fn cwnd_event(sk: &mut Sk<'_, Self>, ev: Event) {
        match ev {
            // The Reno fallback sends no ECT. tcp_dctcp.c swaps in its `dctcp_reno` ops (no
            // TCP_CONG_NEEDS_ECN); these ops keep the flag, so when `init` ran from
            // tcp_init_congestion_control (the algorithm chosen by setsockopt before connect(), the
            // peer refusing ECN) that function sets ECT again right after `init` returns, and the
            // flow would send ECT packets whose CE marks nobody echoes: a flow deaf to its marks.
            // The first send of a burst clears it again, before the packet leaves
            // (`tcp_event_data_sent` runs ahead of `queue_xmit` in `__tcp_transmit_skb`). Only the
            // handshake's last ACK, sent before any data, can still carry ECT: no callback runs
            // between tcp_init_congestion_control and it (VM test ecn_fallback_setsockopt).
            Event::TxStart => {
                if !sk.data().m.is_dctcp() {
                    sk.ecn_dontxmit();
                }
            }
            Event::Loss => {
                let cwnd = sk.snd_cwnd();
                if let Some(ssthresh) = sk.data().m.on_rto(cwnd) {
                    sk.set_snd_ssthresh(ssthresh);
                }
            }
            Event::EcnIsCe | Event::EcnNoCe => {
                let (rcv_nxt, pending) = (sk.rcv_nxt(), sk.ack_timer_pending());
                let Some(a) = sk.data().m.on_ecn(ev == Event::EcnIsCe, rcv_nxt, pending) else {
                    return;
                };
                if let Some(ack_seq) = a.send_delayed_ack {
                    // The delayed ACK goes out first, echoing the CE state it covered.
                    sk.set_ecn_demand_cwr(a.delayed_ack_ece);
                    sk.send_ack(ack_seq);
                }
                if a.ack_now {
                    sk.schedule_ack_now();
                }
                sk.set_ecn_demand_cwr(a.demand_cwr);
            }
            _ => {}
        }
    }
}

// Fields drop in order: the algorithms are unregistered (no socket uses them, or rmmod would
// have failed) before the CCP datapath and its netlink socket go away.
struct MltcpModule {
    _reno: Registration<Mltcp<Reno>>,
    _cubic: Registration<Mltcp<Cubic>>,
    _dctcp: Registration<Mltcp<Dctcp>>,
    _ccp: ccp::CcpHandle,
}

impl kernel::Module for MltcpModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let ccp = ccp::CcpHandle::new(module)?;
        let reno = Registration::new(module)?;
        let cubic = Registration::new(module)?;
        let dctcp = Registration::new(module)?;
        let p = params();
        pr_info!(
            "registered mltcp, mltcp_cubic and mltcp_dctcp (slope_fx={} intercept_fx={} idle_gap_us={} ewma_weight_fx={} scale_slow_start={} scale_decrease={})\n",
            p.slope_fx,
            p.intercept_fx,
            p.idle_gap_us,
            p.ewma_weight_fx,
            p.scale_slow_start,
            p.scale_decrease
        );
        Ok(Self {
            _reno: reno,
            _cubic: cubic,
            _dctcp: dctcp,
            _ccp: ccp,
        })
    }
}
