// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The sampler: reads every sending socket's `TCP_INFO` (and the MLTCP module's `TCP_CC_INFO`).

use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, BorrowedFd};

use mltcp_math::info::{MltcpInfo, MLTCP_INFO_LEN};

use super::Sample;

/// Plain-old-data types that `getsockopt` may fill: every bit pattern is a valid value.
///
/// # Safety
/// Implement only for types made of integers (and arrays of them), without padding invariants.
pub(super) unsafe trait SockoptBuf: Sized {}
// SAFETY: a byte array is valid for any contents.
unsafe impl<const N: usize> SockoptBuf for [u8; N] {}
// SAFETY: `struct tcp_info` is integers only (u8, u16, u32, u64 fields).
unsafe impl SockoptBuf for libc::tcp_info {}

/// getsockopt(IPPROTO_TCP, `opt`) into `out`; the number of bytes the kernel wrote (it writes
/// at most `size_of::<T>()`, fewer when its struct is shorter: the rest of `out` is kept).
pub(super) fn tcp_sockopt<T: SockoptBuf>(
    fd: BorrowedFd<'_>,
    opt: libc::c_int,
    out: &mut T,
) -> Option<usize> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `fd` is an open descriptor for the call's duration (BorrowedFd); `out` is a valid,
    // writable `T` of `len` bytes, and any bytes the kernel writes form a valid `T` (SockoptBuf).
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            opt,
            (out as *mut T).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(len as usize)
}

/// `struct tcp_info` of socket `fd` and the number of its bytes the kernel filled; fields past
/// that (an older kernel) stay zero.
pub(super) fn tcp_info(fd: BorrowedFd<'_>) -> Option<(libc::tcp_info, usize)> {
    // SAFETY: `tcp_info` is integers only, so all-zero bytes are a valid value.
    let mut ti: libc::tcp_info = unsafe { std::mem::zeroed() };
    let n = tcp_sockopt(fd, libc::TCP_INFO, &mut ti)?;
    Some((ti, n))
}

/// TCPI_OPT_ECN in tcp_info's `tcpi_options`.
pub(super) const TCPI_OPT_ECN: u8 = 8;

/// Whether connection `fd` negotiated ECN.
pub(super) fn ecn_negotiated(fd: BorrowedFd<'_>) -> bool {
    tcp_info(fd).is_some_and(|(ti, n)| {
        n > offset_of!(libc::tcp_info, tcpi_options) && ti.tcpi_options & TCPI_OPT_ECN != 0
    })
}

/// Shortest `struct tcp_info` that holds every field [`sample`] reads (the ABI only appends).
pub(super) const TCP_INFO_SAMPLED_LEN: usize =
    offset_of!(libc::tcp_info, tcpi_bytes_acked) + size_of::<u64>();

/// One sample of socket `fd`: `struct tcp_info` (rtt, snd_cwnd, total_retrans, bytes_acked) and,
/// for tcp_mltcp's sockets (`mltcp`), the MLTCP block ([`mltcp_math::info::MltcpInfo`]).
pub(super) fn sample(fd: BorrowedFd<'_>, flow: usize, t_us: u64, mltcp: bool) -> Option<Sample> {
    let (ti, n) = tcp_info(fd)?;
    if n < TCP_INFO_SAMPLED_LEN {
        return None;
    }
    let mut s = Sample {
        t_us,
        flow,
        bytes_acked: ti.tcpi_bytes_acked,
        cwnd: ti.tcpi_snd_cwnd,
        srtt_us: ti.tcpi_rtt,
        retrans: ti.tcpi_total_retrans,
        bytes_ratio_fx: None,
        f_fx: None,
    };
    if mltcp {
        let mut c = [0u8; MLTCP_INFO_LEN];
        let info = tcp_sockopt(fd, libc::TCP_CC_INFO, &mut c)
            .and_then(|n| c.get(..n))
            .and_then(MltcpInfo::decode);
        if let Some(i) = info {
            s.bytes_ratio_fx = Some(i.bytes_ratio_fx);
            s.f_fx = Some(i.f_fx);
        }
    }
    Some(s)
}
