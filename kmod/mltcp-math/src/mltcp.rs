// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Per-socket private data of the two MLTCP algorithms (`mltcp` and `mltcp_cubic`), stored in
//! `inet_csk(sk)->icsk_ca_priv` (`ICSK_CA_PRIV_SIZE` = 104 bytes on Linux 6.x,
//! `include/net/inet_connection_sock.h`), which the kernel zeroes before `init`.

use super::cubic::Cubic;
use super::dctcp::Dctcp;
use super::iteration::Iteration;

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
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MltcpDctcpState {
    /// DCTCP state.
    pub dctcp: Dctcp,
    /// Training-iteration tracking and bytes-per-iteration estimate.
    pub iter: Iteration,
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
