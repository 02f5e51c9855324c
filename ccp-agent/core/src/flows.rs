// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Flow identities: the 4-tuple of a CCP flow as the datapath announces it, and the 64-bit flow
//! id agents and switches share.
//!
//! `tcp_mltcp.ko`'s CREATE carries `src_ip`, `src_port`, `dst_ip`, `dst_port` as the socket holds
//! them, in network byte order, each read as a native integer (portus hands them over unchanged
//! as `u32`s): on a little-endian host 10.0.0.1 arrives as `0x0100_000a` and port 5201 as
//! `0x5114`. [`FlowKey::from_ccp`] undoes that.

use std::net::Ipv4Addr;

/// A TCP connection seen from its sending end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// Source (this host's) address.
    pub src: Ipv4Addr,
    /// Source port.
    pub src_port: u16,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Destination port.
    pub dst_port: u16,
}

impl FlowKey {
    /// The key of a CREATE's fields (network byte order read as native integers, as the kernel
    /// module and portus give them). Ports above 16 bits are truncated (the datapath never
    /// sends them).
    pub fn from_ccp(src_ip: u32, src_port: u32, dst_ip: u32, dst_port: u32) -> Self {
        FlowKey {
            src: Ipv4Addr::from(src_ip.to_ne_bytes()),
            src_port: u16::from_be_bytes((src_port as u16).to_ne_bytes()),
            dst: Ipv4Addr::from(dst_ip.to_ne_bytes()),
            dst_port: u16::from_be_bytes((dst_port as u16).to_ne_bytes()),
        }
    }

    /// The key of a progress region's flow record (local → remote), `None` for IPv6.
    pub fn from_record(f: &mltcp_progress::FlowRecord) -> Option<Self> {
        let (std::net::IpAddr::V4(src), std::net::IpAddr::V4(dst)) =
            (f.local().ip(), f.remote().ip())
        else {
            return None;
        };
        Some(FlowKey {
            src,
            src_port: f.local_port,
            dst,
            dst_port: f.remote_port,
        })
    }

    /// The inverse of [`FlowKey::from_ccp`]: `(src_ip, src_port, dst_ip, dst_port)` as a
    /// datapath puts them in CREATE (used by user-space datapaths in tests).
    pub fn to_ccp(&self) -> (u32, u32, u32, u32) {
        (
            u32::from_ne_bytes(self.src.octets()),
            u32::from(u16::from_ne_bytes(self.src_port.to_be_bytes())),
            u32::from_ne_bytes(self.dst.octets()),
            u32::from(u16::from_ne_bytes(self.dst_port.to_be_bytes())),
        )
    }

    /// The flow id agents and switches share: FNV-1a 64 of the 12 bytes
    /// `src ‖ src_port ‖ dst ‖ dst_port` (big endian). Two flows of a cluster colliding would
    /// share one table entry; at 2^-64 per pair this is left unhandled.
    pub fn id(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |b: u8| {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        };
        self.src.octets().into_iter().for_each(&mut eat);
        self.src_port.to_be_bytes().into_iter().for_each(&mut eat);
        self.dst.octets().into_iter().for_each(&mut eat);
        self.dst_port.to_be_bytes().into_iter().for_each(&mut eat);
        h
    }
}

impl std::fmt::Display for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{} -> {}:{}",
            self.src, self.src_port, self.dst, self.dst_port
        )
    }
}

/// Convenience for callers holding a flow id.
pub fn flow_id(key: &FlowKey) -> u64 {
    key.id()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ccp_fields_round_trip() {
        let k = FlowKey {
            src: Ipv4Addr::new(10, 0, 0, 1),
            src_port: 5201,
            dst: Ipv4Addr::new(10, 0, 0, 2),
            dst_port: 40000,
        };
        let (a, b, c, d) = k.to_ccp();
        assert_eq!(FlowKey::from_ccp(a, b, c, d), k);
        if cfg!(target_endian = "little") {
            assert_eq!((a, b), (0x0100_000a, 0x5114));
        }
        assert_ne!(
            k.id(),
            FlowKey {
                dst_port: 40001,
                ..k
            }
            .id()
        );
        assert_eq!(k.to_string(), "10.0.0.1:5201 -> 10.0.0.2:40000");
    }
}
