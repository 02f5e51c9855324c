// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The 20-byte MLTCP info block: the one definition of its layout, encoder and decoder.
//!
//! `tcp_mltcp.ko` answers `getsockopt(TCP_CC_INFO)` and the `INET_DIAG_INFO` request of sock_diag
//! (as netlink attribute [`MLTCP_INFO_ATTR`]) with this block; `mltcp-stat` and the traffic
//! emulator (`trainemu`) decode it. Wire layout, little endian, 20 bytes:
//!
//! | bytes | field |
//! | --- | --- |
//! | 0..4 | `u32 iterations` |
//! | 4..6 | `u16 bytes_ratio_fx` |
//! | 6..8 | `u16 f_fx` |
//! | 8..16 | `u64 bytes_per_iteration` |
//! | 16..20 | `u32 flags` (bit 0: [`FLAG_PINNED`]) |
//!
//! Integer-only and panic-free like the rest of the crate (it may be compiled into the module).

use super::iteration::Snapshot;

/// Netlink attribute type of the MLTCP block in `INET_DIAG_INFO` answers, chosen far above the
/// kernel's `INET_DIAG_*` types (about 14) so `ss` ignores it.
pub const MLTCP_INFO_ATTR: u16 = 0x2000;

/// Size of the block, bytes.
pub const MLTCP_INFO_LEN: usize = 20;

/// Flags bit 0: bytes per iteration was handed down by an agent (pinned), not measured.
pub const FLAG_PINNED: u32 = 1;

/// The MLTCP block of one socket.
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
    /// The block the module reports for an iteration snapshot (fixed-point values above
    /// `u16::MAX` saturate).
    pub fn from_snapshot(s: &Snapshot) -> MltcpInfo {
        let sat16 = |x: u32| u16::try_from(x).unwrap_or(u16::MAX);
        MltcpInfo {
            iterations: s.iterations,
            bytes_ratio_fx: sat16(s.bytes_ratio_fx),
            f_fx: sat16(s.f_fx),
            bytes_per_iteration: s.est_bytes,
            flags: if s.pinned { FLAG_PINNED } else { 0 },
        }
    }

    /// Whether bytes per iteration was handed down by an agent (flags bit 0).
    pub fn pinned(&self) -> bool {
        self.flags & FLAG_PINNED != 0
    }

    /// Encodes the block in the wire layout (the inverse of [`MltcpInfo::decode`]).
    pub fn encode(&self) -> [u8; MLTCP_INFO_LEN] {
        let [a0, a1, a2, a3] = self.iterations.to_le_bytes();
        let [b0, b1] = self.bytes_ratio_fx.to_le_bytes();
        let [c0, c1] = self.f_fx.to_le_bytes();
        let [d0, d1, d2, d3, d4, d5, d6, d7] = self.bytes_per_iteration.to_le_bytes();
        let [e0, e1, e2, e3] = self.flags.to_le_bytes();
        [
            a0, a1, a2, a3, b0, b1, c0, c1, d0, d1, d2, d3, d4, d5, d6, d7, e0, e1, e2, e3,
        ]
    }

    /// Decodes a block; `None` unless `b` is exactly [`MLTCP_INFO_LEN`] bytes.
    pub fn decode(b: &[u8]) -> Option<MltcpInfo> {
        let [a0, a1, a2, a3, b0, b1, c0, c1, d0, d1, d2, d3, d4, d5, d6, d7, e0, e1, e2, e3] =
            *<&[u8; MLTCP_INFO_LEN]>::try_from(b).ok()?;
        Some(MltcpInfo {
            iterations: u32::from_le_bytes([a0, a1, a2, a3]),
            bytes_ratio_fx: u16::from_le_bytes([b0, b1]),
            f_fx: u16::from_le_bytes([c0, c1]),
            bytes_per_iteration: u64::from_le_bytes([d0, d1, d2, d3, d4, d5, d6, d7]),
            flags: u32::from_le_bytes([e0, e1, e2, e3]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block built byte by byte as the module lays it out.
    const HAND_BUILT: [u8; 20] = [
        0x07, 0x00, 0x00, 0x00, // iterations = 7
        0x00, 0x02, // bytes_ratio_fx = 512 (0.5)
        0x00, 0x05, // f_fx = 1280 (1.25)
        0x80, 0x84, 0x1e, 0x00, 0x00, 0x00, 0x00, 0x00, // bytes_per_iteration = 2_000_000
        0x01, 0x00, 0x00, 0x00, // flags = pinned
    ];

    /// Pins the layout the module writes: snapshot → block → bytes, byte for byte.
    #[test]
    fn module_layout_is_pinned() {
        let s = Snapshot {
            iterations: 7,
            bytes_in_iteration: 1_000_000,
            est_bytes: 2_000_000,
            bytes_ratio_fx: 512,
            f_fx: 1280,
            pinned: true,
        };
        let i = MltcpInfo::from_snapshot(&s);
        assert_eq!(i.encode(), HAND_BUILT);
        assert_eq!(MltcpInfo::decode(&HAND_BUILT), Some(i));
        assert!(i.pinned());
        let big = Snapshot {
            bytes_ratio_fx: 70_000,
            f_fx: u32::MAX,
            pinned: false,
            ..s
        };
        let j = MltcpInfo::from_snapshot(&big);
        assert_eq!((j.bytes_ratio_fx, j.f_fx, j.flags), (u16::MAX, u16::MAX, 0));
    }

    #[test]
    fn round_trip_and_length() {
        let extreme = MltcpInfo {
            iterations: u32::MAX,
            bytes_ratio_fx: u16::MAX,
            f_fx: 0,
            bytes_per_iteration: u64::MAX - 1,
            flags: 0xdead_beef,
        };
        assert_eq!(MltcpInfo::decode(&extreme.encode()), Some(extreme));
        for n in [0usize, 16, 19, 21, 24] {
            assert_eq!(MltcpInfo::decode(&[0u8; 24][..n]), None);
        }
    }
}
