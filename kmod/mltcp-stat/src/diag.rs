// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The sock_diag (NETLINK_SOCK_DIAG, inet_diag) dump of the TCP sockets of the current network
//! namespace, through the rust-netlink crates.
//!
//! The request asks for `INET_DIAG_INFO | INET_DIAG_VEGASINFO | INET_DIAG_CONG` (what `ss -ti`
//! asks for): the kernel then answers with `struct tcp_info`, the algorithm name, and calls the
//! algorithm's `get_info`, whose MLTCP block arrives as attribute [`MLTCP_INFO_ATTR`];
//! `netlink-packet-sock-diag` hands such unknown attributes over as `Nla::Other(DefaultNla)`,
//! whose raw value we copy out through the `Nla` trait.

use std::fmt;
use std::io;
use std::net::SocketAddr;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, Nla as _, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_sock_diag::{
    constants::{AF_INET, AF_INET6, IPPROTO_TCP},
    inet::{nlas::Nla, ExtensionFlags, InetRequest, InetResponse, SocketId, StateFlags},
    SockDiagMessage,
};
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr as NlAddr};

use crate::info::MLTCP_INFO_ATTR;

/// Address family of a dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `AF_INET`.
    V4,
    /// `AF_INET6` (dual-stack sockets show IPv4-mapped addresses).
    V6,
}

impl Family {
    fn af(self) -> u8 {
        match self {
            Family::V4 => AF_INET,
            Family::V6 => AF_INET6,
        }
    }
}

/// One socket of the dump, attributes still raw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SockEntry {
    /// Local address and port.
    pub local: SocketAddr,
    /// Remote address and port.
    pub remote: SocketAddr,
    /// TCP state (`TCP_ESTABLISHED` = 1, ...); see [`state_name`].
    pub state: u8,
    /// Congestion-control name (`INET_DIAG_CONG`), when the kernel sent one.
    pub cong: Option<String>,
    /// `struct tcp_info` (`INET_DIAG_INFO`), raw.
    pub tcp_info: Option<Vec<u8>>,
    /// The MLTCP block (attribute [`MLTCP_INFO_ATTR`]), raw.
    pub mltcp: Option<Vec<u8>>,
}

/// A failed dump.
#[derive(Debug)]
pub enum DiagError {
    /// A socket call or a kernel `NLMSG_ERROR` answer failed; `what` names the step.
    Io {
        /// The step that failed (e.g. "opening the NETLINK_SOCK_DIAG socket").
        what: &'static str,
        /// The OS error.
        err: io::Error,
    },
    /// The kernel's answer could not be parsed.
    Decode(String),
}

impl fmt::Display for DiagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiagError::Io { what, err } => {
                write!(f, "netlink sock_diag dump failed: {what}: {}", os_text(err))?;
                if matches!(err.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
                    write!(f, " (need CAP_NET_ADMIN?)")?;
                }
                Ok(())
            }
            DiagError::Decode(m) => write!(f, "netlink sock_diag dump failed: {m}"),
        }
    }
}

impl std::error::Error for DiagError {}

/// `err` as text without std's " (os error N)" suffix.
fn os_text(err: &io::Error) -> String {
    let s = err.to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> DiagError {
    move |err| DiagError::Io { what, err }
}

/// States listed: those of `ss -t` (connected sockets: not LISTEN, CLOSE, TIME_WAIT, SYN_RECV),
/// the ones that have a congestion-control state.
pub fn connected_states() -> StateFlags {
    StateFlags::all()
        - StateFlags::LISTEN
        - StateFlags::CLOSE
        - StateFlags::TIME_WAIT
        - StateFlags::SYN_RECV
}

/// `ss`'s short name of a TCP state.
pub fn state_name(state: u8) -> &'static str {
    match state {
        1 => "ESTAB",
        2 => "SYN-SENT",
        3 => "SYN-RECV",
        4 => "FIN-WAIT-1",
        5 => "FIN-WAIT-2",
        6 => "TIME-WAIT",
        7 => "UNCONN",
        8 => "CLOSE-WAIT",
        9 => "LAST-ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        _ => "UNKNOWN",
    }
}

/// Dumps the TCP sockets of `family` in `states` of the current network namespace.
pub fn dump(family: Family, states: StateFlags) -> Result<Vec<SockEntry>, DiagError> {
    let mut sock =
        Socket::new(NETLINK_SOCK_DIAG).map_err(io_err("opening the NETLINK_SOCK_DIAG socket"))?;
    sock.bind_auto()
        .map_err(io_err("binding the netlink socket"))?;
    sock.connect(&NlAddr::new(0, 0))
        .map_err(io_err("connecting to the kernel"))?;

    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_REQUEST | NLM_F_DUMP;
    hdr.sequence_number = 1;
    let mut req = NetlinkMessage::new(
        hdr,
        SockDiagMessage::InetRequest(InetRequest {
            family: family.af(),
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::INFO | ExtensionFlags::VEGASINFO | ExtensionFlags::CONG,
            states,
            socket_id: match family {
                Family::V4 => SocketId::new_v4(),
                Family::V6 => SocketId::new_v6(),
            },
        })
        .into(),
    );
    req.finalize();
    let mut buf = vec![0u8; req.buffer_len()];
    req.serialize(&mut buf);
    sock.send(&buf, 0).map_err(io_err("sending the request"))?;

    let mut out = Vec::new();
    loop {
        let (data, _) = sock
            .recv_from_full()
            .map_err(io_err("receiving the answer"))?;
        if data.is_empty() {
            return Err(DiagError::Decode(
                "the kernel closed the dump without NLMSG_DONE".into(),
            ));
        }
        if parse_datagram(&data, &mut out)? {
            return Ok(out);
        }
    }
}

/// Parses one datagram of the dump's answer into `out`; true once `NLMSG_DONE` was seen.
///
/// `NLM_F_DUMP_INTR` (the socket tables changed during the dump, so an entry may be missing or
/// doubled) is tolerated, as `ss` does: this is a status listing.
pub fn parse_datagram(data: &[u8], out: &mut Vec<SockEntry>) -> Result<bool, DiagError> {
    let mut off = 0;
    while off < data.len() {
        let msg = <NetlinkMessage<SockDiagMessage>>::deserialize(&data[off..])
            .map_err(|e| DiagError::Decode(format!("cannot parse an answer: {e}")))?;
        let len = msg.header.length as usize;
        match msg.payload {
            NetlinkPayload::Done(_) => return Ok(true),
            NetlinkPayload::Error(e) if e.code.is_some() => {
                return Err(DiagError::Io {
                    what: "the kernel refused the request",
                    err: e.to_io(),
                })
            }
            NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => out.push(entry(&r)),
            _ => {}
        }
        if len == 0 {
            break;
        }
        off += (len + 3) & !3; // NLMSG_ALIGN
    }
    Ok(false)
}

/// Pulls the attributes we show out of one answer.
fn entry(r: &InetResponse) -> SockEntry {
    let id = &r.header.socket_id;
    let mut e = SockEntry {
        local: SocketAddr::new(id.source_address, id.source_port),
        remote: SocketAddr::new(id.destination_address, id.destination_port),
        state: r.header.state,
        cong: None,
        tcp_info: None,
        mltcp: None,
    };
    for nla in &r.nlas {
        match nla {
            Nla::Congestion(name) => e.cong = Some(name.clone()),
            Nla::TcpInfo(bytes) => e.tcp_info = Some(bytes.clone()),
            Nla::Other(attr) if attr.kind() == MLTCP_INFO_ATTR => {
                let mut v = vec![0u8; attr.value_len()];
                attr.emit_value(&mut v);
                e.mltcp = Some(v);
            }
            _ => {}
        }
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eperm_message_has_hint() {
        let e = DiagError::Io {
            what: "receiving the answer",
            err: io::Error::from_raw_os_error(libc::EPERM),
        };
        assert_eq!(
            e.to_string(),
            "netlink sock_diag dump failed: receiving the answer: Operation not permitted \
             (need CAP_NET_ADMIN?)"
        );
        let e = DiagError::Io {
            what: "x",
            err: io::Error::from_raw_os_error(libc::ENOENT),
        };
        assert!(!e.to_string().contains("CAP_NET_ADMIN"));
    }

    /// Appends a netlink attribute (header, value, padding to 4 bytes).
    fn nla(buf: &mut Vec<u8>, kind: u16, value: &[u8]) {
        buf.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(value);
        buf.resize((buf.len() + 3) & !3, 0);
    }

    /// Appends a netlink message (`struct nlmsghdr` + payload).
    fn nlmsg(buf: &mut Vec<u8>, kind: u16, flags: u16, payload: &[u8]) {
        buf.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&1u32.to_ne_bytes()); // seq
        buf.extend_from_slice(&0u32.to_ne_bytes()); // pid
        buf.extend_from_slice(payload);
        buf.resize((buf.len() + 3) & !3, 0);
    }

    /// A dump answer laid out by hand as the kernel sends it: one `inet_diag_msg` (IPv4,
    /// ESTABLISHED) with INET_DIAG_INFO, INET_DIAG_CONG "mltcp" and the MLTCP block, then
    /// NLMSG_DONE. Checks that attribute 0x2000 survives the rust-netlink parser byte for byte.
    #[test]
    fn parses_kernel_layout_with_mltcp_attribute() {
        let mut m = vec![libc::AF_INET as u8, 1, 0, 0]; // family, state, timer, retrans
        m.extend_from_slice(&40000u16.to_be_bytes());
        m.extend_from_slice(&5201u16.to_be_bytes());
        let mut src = [0u8; 16];
        src[..4].copy_from_slice(&[10, 0, 0, 1]);
        let mut dst = [0u8; 16];
        dst[..4].copy_from_slice(&[10, 0, 0, 2]);
        m.extend_from_slice(&src);
        m.extend_from_slice(&dst);
        m.extend_from_slice(&[0u8; 4 + 8]); // if, cookie
        m.extend_from_slice(&[0u8; 20]); // expires, rqueue, wqueue, uid, inode
        assert_eq!(m.len(), 72);
        let mut ti = vec![0u8; 248];
        ti[80..84].copy_from_slice(&17u32.to_ne_bytes());
        nla(&mut m, 2, &ti); // INET_DIAG_INFO
        nla(&mut m, 4, b"mltcp\0"); // INET_DIAG_CONG
        let block: Vec<u8> = (1..=20).collect();
        nla(&mut m, MLTCP_INFO_ATTR, &block);
        let mut dgram = Vec::new();
        nlmsg(&mut dgram, 20, 2, &m); // SOCK_DIAG_BY_FAMILY, NLM_F_MULTI
        nlmsg(&mut dgram, 3, 2, &0i32.to_ne_bytes()); // NLMSG_DONE

        let mut out = Vec::new();
        assert!(parse_datagram(&dgram, &mut out).unwrap());
        assert_eq!(out.len(), 1);
        let e = &out[0];
        assert_eq!(e.local, "10.0.0.1:40000".parse().unwrap());
        assert_eq!(e.remote, "10.0.0.2:5201".parse().unwrap());
        assert_eq!((e.state, e.cong.as_deref()), (1, Some("mltcp")));
        assert_eq!(e.tcp_info.as_deref(), Some(&ti[..]));
        assert_eq!(e.mltcp.as_deref(), Some(&block[..]));
    }

    #[test]
    fn kernel_error_answer() {
        let mut p = (-libc::EPERM).to_ne_bytes().to_vec();
        p.extend_from_slice(&[0u8; 16]); // the request's header
        let mut dgram = Vec::new();
        nlmsg(&mut dgram, 2, 0, &p); // NLMSG_ERROR
        let e = parse_datagram(&dgram, &mut Vec::new()).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("Operation not permitted (need CAP_NET_ADMIN?)"),
            "{e}"
        );
    }

    #[test]
    fn states() {
        let s = connected_states();
        assert!(s.contains(StateFlags::ESTABLISHED | StateFlags::CLOSE_WAIT));
        assert!(!s.intersects(StateFlags::LISTEN | StateFlags::TIME_WAIT));
        assert_eq!(state_name(1), "ESTAB");
        assert_eq!(state_name(99), "UNKNOWN");
    }
}
