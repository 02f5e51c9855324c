// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Decoding of the fixed-size records `mltcp-stat` reads from the kernel: the 20-byte MLTCP block
//! of `tcp_mltcp.ko` (`get_info`, netlink attribute [`MLTCP_INFO_ATTR`] of sock_diag answers and
//! `getsockopt(TCP_CC_INFO)`; defined once in `mltcp_math::info`), and the two `struct tcp_info`
//! fields shown (cwnd, srtt).
//!
//! Everything here is pure (bytes in, values out) and unit tested; no I/O.

use std::fmt;
use std::mem::{offset_of, size_of};

pub use mltcp_math::info::{MltcpInfo, FLAG_PINNED, MLTCP_INFO_ATTR, MLTCP_INFO_LEN};

/// Fixed point one: the `_fx` fields of [`MltcpInfo`] are fractions of 1024.
pub const FX_ONE: u16 = 1024;
const _: () = assert!(FX_ONE as u32 == mltcp_math::fixed::FX_ONE);

/// A fixed-point field of [`MltcpInfo`] (`bytes_ratio_fx`, `f_fx`) as a fraction (1.0 = 1024).
pub fn fx_to_f64(fx: u16) -> f64 {
    f64::from(fx) / f64::from(FX_ONE)
}

/// A kernel record that does not have the expected size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InfoError {
    /// The MLTCP block is not [`MLTCP_INFO_LEN`] bytes long.
    MltcpLength(usize),
    /// `struct tcp_info` is too short to hold `tcpi_snd_cwnd`.
    TcpInfoLength(usize),
}

impl fmt::Display for InfoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            InfoError::MltcpLength(n) => write!(
                f,
                "MLTCP info block (attribute {MLTCP_INFO_ATTR:#x}) is {n} bytes, expected {MLTCP_INFO_LEN}"
            ),
            InfoError::TcpInfoLength(n) => write!(
                f,
                "INET_DIAG_INFO (struct tcp_info) is {n} bytes, need at least {TCP_INFO_MIN_LEN}"
            ),
        }
    }
}

impl std::error::Error for InfoError {}

/// Decodes the 20-byte MLTCP block ([`MltcpInfo::decode`]); any other length is refused.
pub fn decode_mltcp_info(b: &[u8]) -> Result<MltcpInfo, InfoError> {
    MltcpInfo::decode(b).ok_or(InfoError::MltcpLength(b.len()))
}

/// The `struct tcp_info` fields `mltcp-stat` shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfoFields {
    /// `tcpi_snd_cwnd`: congestion window, in segments.
    pub cwnd: u32,
    /// `tcpi_rtt`: smoothed RTT, in microseconds.
    pub srtt_us: u32,
}

const CWND_OFF: usize = offset_of!(libc::tcp_info, tcpi_snd_cwnd);
const RTT_OFF: usize = offset_of!(libc::tcp_info, tcpi_rtt);
/// Shortest `struct tcp_info` that holds both fields (the ABI only ever appends fields).
const TCP_INFO_MIN_LEN: usize = CWND_OFF + size_of::<u32>();
const _: () = assert!(RTT_OFF + size_of::<u32>() <= TCP_INFO_MIN_LEN);

/// Reads cwnd and srtt from the raw `INET_DIAG_INFO` payload (`struct tcp_info` in host byte
/// order, offsets from `libc::tcp_info`). Longer payloads (newer kernels) are fine.
pub fn decode_tcp_info(b: &[u8]) -> Result<TcpInfoFields, InfoError> {
    if b.len() < TCP_INFO_MIN_LEN {
        return Err(InfoError::TcpInfoLength(b.len()));
    }
    let u32_at = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    Ok(TcpInfoFields {
        cwnd: u32_at(CWND_OFF),
        srtt_us: u32_at(RTT_OFF),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout itself is pinned by `mltcp_math::info`'s tests; here only what this crate adds.
    #[test]
    fn decodes_and_converts_fixed_point() {
        let want = MltcpInfo {
            iterations: 7,
            bytes_ratio_fx: 512,
            f_fx: 1280,
            bytes_per_iteration: 2_000_000,
            flags: FLAG_PINNED,
        };
        let i = decode_mltcp_info(&want.encode()).unwrap();
        assert_eq!(i, want);
        assert_eq!(fx_to_f64(i.bytes_ratio_fx), 0.5);
        assert_eq!(fx_to_f64(i.f_fx), 1.25);
        assert_eq!(MLTCP_INFO_LEN, 20);
    }

    #[test]
    fn wrong_length_refused() {
        for n in [0usize, 16, 19, 21, 24] {
            let v = vec![0u8; n];
            let e = decode_mltcp_info(&v).unwrap_err();
            assert_eq!(e, InfoError::MltcpLength(n));
            let msg = e.to_string();
            assert!(msg.contains(&format!("is {n} bytes")), "{msg}");
            assert!(msg.contains("expected 20"), "{msg}");
        }
    }

    #[test]
    fn tcp_info_fields() {
        // tcp_info ABI: tcpi_rtt at byte 68, tcpi_snd_cwnd at byte 80.
        assert_eq!((RTT_OFF, CWND_OFF), (68, 80));
        let mut b = vec![0u8; 232];
        b[68..72].copy_from_slice(&1234u32.to_ne_bytes());
        b[80..84].copy_from_slice(&42u32.to_ne_bytes());
        assert_eq!(
            decode_tcp_info(&b).unwrap(),
            TcpInfoFields {
                cwnd: 42,
                srtt_us: 1234
            }
        );
        assert_eq!(decode_tcp_info(&b[..84]).unwrap().cwnd, 42);
        let e = decode_tcp_info(&b[..83]).unwrap_err();
        assert_eq!(e, InfoError::TcpInfoLength(83));
        assert!(e.to_string().contains("83 bytes"));
    }
}
