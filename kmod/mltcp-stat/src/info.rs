// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Decoding of the fixed-size records `mltcp-stat` reads from the kernel: the 20-byte MLTCP block
//! of `tcp_mltcp.ko` (`get_info`, netlink attribute [`MLTCP_INFO_ATTR`] of sock_diag answers and
//! `getsockopt(TCP_CC_INFO)`), and the two `struct tcp_info` fields shown (cwnd, srtt).
//!
//! Everything here is pure (bytes in, values out) and unit tested; no I/O.

use std::fmt;
use std::mem::{offset_of, size_of};

/// Netlink attribute type of the MLTCP block in sock_diag answers (`MLTCP_INFO_ATTR` in
/// `kmod/tcp_mltcp.rs`).
pub const MLTCP_INFO_ATTR: u16 = 0x2000;

/// Size in bytes of the MLTCP block.
pub const MLTCP_INFO_LEN: usize = 20;

/// Fixed point one: the `_fx` fields are fractions of 1024.
pub const FX_ONE: u16 = 1024;

/// Flags bit 0: bytes per iteration was handed down by an agent (pinned), not measured.
pub const FLAG_PINNED: u32 = 1;

/// The MLTCP block of one socket, decoded.
///
/// Wire layout (little endian, 20 bytes):
/// `u32 iterations, u16 bytes_ratio_fx, u16 f_fx, u64 bytes_per_iteration, u32 flags`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MltcpInfo {
    /// Completed (measured) training iterations of the flow.
    pub iterations: u32,
    /// Share of the current iteration's bytes already ACKed, fixed point (1024 = 1.0).
    pub bytes_ratio_fx: u16,
    /// `F(bytes_ratio)` applied to the next ACK, fixed point (1024 = 1.0).
    pub f_fx: u16,
    /// Bytes per iteration in use (0 = no estimate yet).
    pub bytes_per_iteration: u64,
    /// Flag bits; see [`FLAG_PINNED`].
    pub flags: u32,
}

impl MltcpInfo {
    /// `bytes_ratio` as a fraction (1.0 = the whole iteration ACKed).
    pub fn bytes_ratio(&self) -> f64 {
        f64::from(self.bytes_ratio_fx) / f64::from(FX_ONE)
    }

    /// `F` as a fraction (1.0 = plain Reno/CUBIC growth).
    pub fn f(&self) -> f64 {
        f64::from(self.f_fx) / f64::from(FX_ONE)
    }

    /// Whether bytes per iteration was handed down by an agent (flags bit 0).
    pub fn pinned(&self) -> bool {
        self.flags & FLAG_PINNED != 0
    }

    /// Encodes the block in the kernel's wire layout (the inverse of [`decode_mltcp_info`]).
    pub fn to_bytes(&self) -> [u8; MLTCP_INFO_LEN] {
        let mut b = [0u8; MLTCP_INFO_LEN];
        b[0..4].copy_from_slice(&self.iterations.to_le_bytes());
        b[4..6].copy_from_slice(&self.bytes_ratio_fx.to_le_bytes());
        b[6..8].copy_from_slice(&self.f_fx.to_le_bytes());
        b[8..16].copy_from_slice(&self.bytes_per_iteration.to_le_bytes());
        b[16..20].copy_from_slice(&self.flags.to_le_bytes());
        b
    }
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

/// Decodes the 20-byte MLTCP block; any other length is refused.
pub fn decode_mltcp_info(b: &[u8]) -> Result<MltcpInfo, InfoError> {
    let b: &[u8; MLTCP_INFO_LEN] = b.try_into().map_err(|_| InfoError::MltcpLength(b.len()))?;
    let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let mut u64b = [0u8; 8];
    u64b.copy_from_slice(&b[8..16]);
    Ok(MltcpInfo {
        iterations: u32_at(0),
        bytes_ratio_fx: u16_at(4),
        f_fx: u16_at(6),
        bytes_per_iteration: u64::from_le_bytes(u64b),
        flags: u32_at(16),
    })
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

    /// A block built byte by byte as the kernel's `info_block()` lays it out.
    fn hand_built() -> [u8; 20] {
        [
            0x07, 0x00, 0x00, 0x00, // iterations = 7
            0x00, 0x02, // bytes_ratio_fx = 512 (0.5)
            0x00, 0x05, // f_fx = 1280 (1.25)
            0x80, 0x84, 0x1e, 0x00, 0x00, 0x00, 0x00, 0x00, // bytes_per_iteration = 2_000_000
            0x01, 0x00, 0x00, 0x00, // flags = pinned
        ]
    }

    #[test]
    fn decodes_hand_built_block() {
        let i = decode_mltcp_info(&hand_built()).unwrap();
        assert_eq!(
            i,
            MltcpInfo {
                iterations: 7,
                bytes_ratio_fx: 512,
                f_fx: 1280,
                bytes_per_iteration: 2_000_000,
                flags: 1
            }
        );
        assert_eq!(i.bytes_ratio(), 0.5);
        assert_eq!(i.f(), 1.25);
        assert!(i.pinned());
    }

    #[test]
    fn round_trip() {
        let b = hand_built();
        assert_eq!(decode_mltcp_info(&b).unwrap().to_bytes(), b);
        let extreme = MltcpInfo {
            iterations: u32::MAX,
            bytes_ratio_fx: u16::MAX,
            f_fx: 0,
            bytes_per_iteration: u64::MAX - 1,
            flags: 0xdead_beef,
        };
        assert_eq!(decode_mltcp_info(&extreme.to_bytes()).unwrap(), extreme);
        assert!(!MltcpInfo::default().pinned());
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
