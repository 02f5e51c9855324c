// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The pure part of the module's generic MLTCP wrapper (`Mltcp<B>` in `kmod/tcp_mltcp.rs`),
//! which owns the CCP glue of every base algorithm (`mltcp`, `mltcp_cubic`, `mltcp_dctcp`) once:
//! the per-socket data is the base's state plus the flow's CCP socket id ([`WithCcp`]), and the
//! decisions below say when the CCP datapath runs, when the flow's CCP life ends and when
//! `get_info` answers. The kernel glue only moves values between these and the socket.

use super::iteration::Iteration;
use super::mltcp::{MltcpCubicState, MltcpDctcpState, MltcpRenoState, ICSK_CA_PRIV_SIZE};

/// `TCP_CA_CWR` (`enum tcp_ca_state`, include/uapi/linux/tcp.h): window reduced after ECN.
pub const CA_CWR: u8 = 2;
/// `TCP_CA_Recovery`: fast retransmit / recovery.
pub const CA_RECOVERY: u8 = 3;

/// `INET_DIAG_INFO` and `INET_DIAG_VEGASINFO` request bits (`ss -i` sets both): the requests
/// that get the algorithm block, as in `tcp_bbr.c`'s `bbr_get_info`.
pub const DIAG_INFO_EXT: u32 = (1 << (2 - 1)) | (1 << (3 - 1));

/// Per-socket private data of a wrapped algorithm: the base's state `m` and the flow's CCP
/// socket id (0: not offered to an agent). Valid when all-zero (no CCP flow) if `S` is.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WithCcp<S> {
    /// The base algorithm's state (MLTCP iteration tracking included).
    pub m: S,
    /// CCP socket id of the flow; 0: none.
    pub ccp_sid: u32,
}

impl<S> WithCcp<S> {
    /// A socket's data at `init`: the base's state and the socket id the datapath returned.
    pub fn new(m: S, ccp_sid: u32) -> Self {
        Self { m, ccp_sid }
    }

    /// The flow's CCP socket id, if it was offered to an agent and is not released yet.
    pub fn sid(&self) -> Option<u32> {
        (self.ccp_sid != 0).then_some(self.ccp_sid)
    }

    /// Ends the flow's CCP life on the socket's side (`release`): returns the socket id to end
    /// in the datapath exactly once; later calls (and callbacks after it) see no flow.
    pub fn take_sid(&mut self) -> Option<u32> {
        let sid = self.sid();
        self.ccp_sid = 0;
        sid
    }

    /// Whether the CCP program runs from `pkts_acked` for an ACK in congestion state
    /// `ca_state`: in CWR and Recovery TCP runs PRR instead of `cong_avoid`, so the program, which
    /// otherwise runs from `cong_avoid`, would not see these ACKs.
    pub fn ccp_runs_in_pkts_acked(&self, ca_state: u8) -> Option<u32> {
        self.sid()
            .filter(|_| matches!(ca_state, CA_CWR | CA_RECOVERY))
    }
}

/// Whether the base's native window growth runs on this ACK (`cong_avoid`) of a flow with CCP
/// socket id `sid` ([`WithCcp::sid`]): always when it has none; otherwise when
/// `ccp_in_charge(sid)` (the datapath invocation, which runs the agent's program) says the agent
/// is not in charge.
pub fn native_runs(sid: Option<u32>, ccp_in_charge: impl FnOnce(u32) -> bool) -> bool {
    // Not `is_none_or`: the kernel's clippy holds the code to Rust 1.78 (its MSRV), which
    // lacks it.
    !sid.is_some_and(ccp_in_charge)
}

/// A base algorithm's per-socket state with MLTCP's iteration tracking in it: what the wrapper
/// starts at `init`, updates on `CA_EVENT_TX_START` and reports in `get_info` for every base.
pub trait MltcpState: Copy + Default {
    /// The iteration tracking.
    fn iter(&self) -> &Iteration;
    /// The iteration tracking, to update.
    fn iter_mut(&mut self) -> &mut Iteration;
}

macro_rules! mltcp_state {
    ($($t:ty),*) => {$(
        impl MltcpState for $t {
            fn iter(&self) -> &Iteration {
                &self.iter
            }
            fn iter_mut(&mut self) -> &mut Iteration {
                &mut self.iter
            }
        }
    )*};
}
mltcp_state!(MltcpRenoState, MltcpCubicState, MltcpDctcpState);

/// Whether `get_info` answers a request with extension bits `ext` (the MLTCP block is sent
/// for `INET_DIAG_INFO` / `INET_DIAG_VEGASINFO` requests only).
pub const fn wants_info(ext: u32) -> bool {
    ext & DIAG_INFO_EXT != 0
}

/// Whether `WithCcp<S>` fits `icsk_ca_priv` (checked at build time by the kernel abstraction
/// too; here so that `cargo test` catches a base state that grew).
pub const fn fits_icsk_ca_priv<S>() -> bool {
    core::mem::size_of::<WithCcp<S>>() <= ICSK_CA_PRIV_SIZE
        && core::mem::align_of::<WithCcp<S>>() <= 8
}
