// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Per-socket private data of the three MLTCP algorithms (`mltcp`, `mltcp_cubic`, `mltcp_dctcp`), stored in
//! `inet_csk(sk)->icsk_ca_priv` (`ICSK_CA_PRIV_SIZE` = 104 bytes on Linux 6.x,
//! `include/net/inet_connection_sock.h`), which the kernel zeroes before `init`.

use super::cubic::Cubic;
use super::dctcp::{Counters, Dctcp, EceAction};
use super::fixed::FX_ONE;
use super::iteration::{slow_start_gain_fx, Iteration};
use super::params::Params;
use super::reno::{self, Window};

/// Size of `icsk_ca_priv` in bytes (`ICSK_CA_PRIV_SIZE`, 13 × u64 on Linux 6.12).
pub const ICSK_CA_PRIV_SIZE: usize = 104;

/// Private data of `mltcp` (MLTCP over Reno, thesis ch. 5): only the iteration tracking, Reno has
/// no state of its own. Valid when all-zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MltcpRenoState {
    /// Training-iteration tracking and bytes-per-iteration estimate.
    pub iter: Iteration,
}

/// Private data of `mltcp_cubic` (MLTCP over CUBIC): tcp_cubic.c's `struct bictcp` plus the
/// iteration tracking. Valid when all-zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MltcpCubicState {
    /// CUBIC state (`struct bictcp`).
    pub cubic: Cubic,
    /// Training-iteration tracking and bytes-per-iteration estimate.
    pub iter: Iteration,
}

/// Private data of `mltcp_dctcp` (MLTCP over DCTCP, thesis ch. 5): tcp_dctcp.c's state plus the
/// iteration tracking; the additive increase is MLTCP-Reno's. Valid when all-zero.
///
/// The methods are tcp_dctcp.c's ops, one each, with the socket's fields passed in and the
/// changes returned, so the kernel glue only moves values. As tcp_dctcp.c, a connection whose peer
/// did not negotiate ECN falls back to Reno (`dctcp_reno`: Reno's ssthresh and undo, no alpha), here
/// MLTCP-Reno.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MltcpDctcpState {
    /// DCTCP state.
    pub dctcp: Dctcp,
    /// 1: ECN was not negotiated at `init`, the connection runs MLTCP-Reno (tcp_dctcp.c switches
    /// such sockets to its `dctcp_reno` ops); 0: DCTCP.
    pub reno_fallback: u32,
    /// Training-iteration tracking and bytes-per-iteration estimate.
    pub iter: Iteration,
}

/// What the `init` op found ([`MltcpDctcpState::init`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DctcpMode {
    /// ECN negotiated (or not yet known: a listener or unconnected socket): DCTCP.
    Dctcp,
    /// No ECN: MLTCP-Reno; the caller must stop sending ECT (`INET_ECN_dontxmit`).
    RenoFallback,
}

impl MltcpDctcpState {
    /// `dctcp_init`: DCTCP when the connection negotiated ECN (`ecn_ok`) or is not connected yet
    /// (`not_connected`: `TCP_LISTEN` or `TCP_CLOSE`, whose ops children inherit), else the Reno
    /// fallback. Starts iteration tracking at `bytes_acked`.
    pub fn init(
        &mut self,
        c: &Counters,
        rcv_nxt: u32,
        bytes_acked: u64,
        ecn_ok: bool,
        not_connected: bool,
        alpha_on_init: u32,
    ) -> DctcpMode {
        *self = MltcpDctcpState::default();
        self.iter.init(bytes_acked);
        if ecn_ok || not_connected {
            self.dctcp.init(c, rcv_nxt, alpha_on_init);
            DctcpMode::Dctcp
        } else {
            self.reno_fallback = 1;
            DctcpMode::RenoFallback
        }
    }

    /// Whether the connection runs DCTCP (not the Reno fallback).
    #[inline]
    pub fn is_dctcp(&self) -> bool {
        self.reno_fallback == 0
    }

    /// The `cong_avoid` op: tcp_dctcp.c uses `tcp_reno_cong_avoid`; here MLTCP-Reno's increase,
    /// F(bytes_ratio) segments per RTT ([`reno::mltcp_cong_avoid`]).
    pub fn cong_avoid(
        &mut self,
        p: &Params,
        w: &mut Window,
        acked: u32,
        cwnd_limited: bool,
        bytes_acked: u64,
    ) {
        let f_fx = self.iter.scale_fx(p, bytes_acked);
        reno::mltcp_cong_avoid(w, acked, cwnd_limited, f_fx, slow_start_gain_fx(p, f_fx));
    }

    /// The `ssthresh` op: `dctcp_ssthresh` (cwnd × (1 − alpha/2)), or Reno's half in the fallback.
    /// `scale_cut` (the `dctcp_scale_cut` parameter, [`super::params::DCTCP_SCALE_CUT`]): 0
    /// DCTCP's cut; 1 the cut divided by F = `f_fx`/1024; 2 divided by max(F, 1); 3 scaled by
    /// `L/F`, `L` = `f_mean_fx`, F's log-mean over an iteration
    /// ([`super::iteration::f_log_mean_fx`]), so DCTCP's cut on average ([`Dctcp::ssthresh_scaled`]).
    /// `f_mean_fx` is called only in mode 3 (the log-mean costs a logarithm per cut).
    pub fn ssthresh(
        &mut self,
        cwnd: u32,
        f_fx: u32,
        scale_cut: u32,
        f_mean_fx: impl FnOnce() -> u32,
    ) -> u32 {
        if !self.is_dctcp() {
            return reno::ssthresh(cwnd);
        }
        match scale_cut {
            0 => self.dctcp.ssthresh(cwnd),
            1 => self.dctcp.ssthresh_scaled(cwnd, f_fx, FX_ONE, false),
            2 => self.dctcp.ssthresh_scaled(cwnd, f_fx, FX_ONE, true),
            _ => self.dctcp.ssthresh_scaled(cwnd, f_fx, f_mean_fx(), false),
        }
    }

    /// The `undo_cwnd` op: `dctcp_cwnd_undo`, or `tcp_reno_undo_cwnd` in the fallback.
    pub fn undo_cwnd(&self, cwnd: u32, prior_cwnd: u32) -> u32 {
        if self.is_dctcp() {
            self.dctcp.undo_cwnd(cwnd)
        } else {
            reno::undo_cwnd(cwnd, prior_cwnd)
        }
    }

    /// The `in_ack_event` op: `dctcp_update_alpha` (nothing in the fallback).
    pub fn in_ack_event(&mut self, c: &Counters, shift_g: u32) {
        if self.is_dctcp() {
            self.dctcp.update_alpha(c, shift_g);
        }
    }

    /// The `set_state` op (`dctcp_state`): entering Recovery from another state halves the
    /// window once; returns the new ssthresh to set, if any.
    pub fn set_state(
        &mut self,
        new_state: u8,
        old_state: u8,
        recovery: u8,
        cwnd: u32,
    ) -> Option<u32> {
        (self.is_dctcp() && new_state == recovery && new_state != old_state)
            .then(|| self.dctcp.react_to_loss(cwnd))
    }

    /// `CA_EVENT_LOSS` (an RTO, `dctcp_cwnd_event`): returns the new ssthresh to set, if any.
    pub fn on_rto(&mut self, cwnd: u32) -> Option<u32> {
        self.is_dctcp().then(|| self.dctcp.react_to_loss(cwnd))
    }

    /// `CA_EVENT_ECN_IS_CE` / `CA_EVENT_ECN_NO_CE` (receiver side, `dctcp_ece_ack_update`): the
    /// ACK actions to perform, if any (none in the fallback).
    pub fn on_ecn(
        &mut self,
        is_ce: bool,
        rcv_nxt: u32,
        ack_timer_pending: bool,
    ) -> Option<EceAction> {
        self.is_dctcp()
            .then(|| self.dctcp.ece_ack_update(is_ce, rcv_nxt, ack_timer_pending))
    }
}

const _: () = assert!(core::mem::size_of::<MltcpRenoState>() <= ICSK_CA_PRIV_SIZE);
const _: () = assert!(core::mem::size_of::<MltcpDctcpState>() <= ICSK_CA_PRIV_SIZE);
const _: () = assert!(core::mem::align_of::<MltcpDctcpState>() <= 8);
const _: () = assert!(core::mem::size_of::<MltcpCubicState>() <= ICSK_CA_PRIV_SIZE);
// icsk_ca_priv is u64-aligned.
const _: () = assert!(core::mem::align_of::<MltcpCubicState>() <= 8);
const _: () = assert!(core::mem::align_of::<MltcpRenoState>() <= 8);
// Same size as struct bictcp, so the field layout matches tcp_cubic.c's.
const _: () = assert!(core::mem::size_of::<Cubic>() == 60);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(core::mem::size_of::<Iteration>(), 32);
        assert_eq!(core::mem::size_of::<MltcpRenoState>(), 32);
        assert_eq!(core::mem::size_of::<MltcpCubicState>(), 96);
        assert_eq!(core::mem::size_of::<MltcpDctcpState>(), 64);
    }
}
