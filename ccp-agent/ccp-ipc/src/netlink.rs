// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! A portus [`Ipc`] backend over `NETLINK_USERSOCK` multicast group 22 that accepts only what the
//! kernel sent.
//!
//! portus 0.9's own backend (`portus::ipc::netlink::Socket`) reads messages without looking at
//! the sender's port id, so any unprivileged process can multicast on group 22 (joining it needs
//! privilege, sending to it does not) and forge CREATE or MEASURE messages; an INSTALL-typed
//! message even reaches portus's `unreachable!()` and kills the agent. This backend uses the same
//! framing (a 16-byte `nlmsghdr` with only the length set, to the kernel at port id 0) but drops
//! every message whose sender port id is not 0 (the kernel) and every message type a datapath
//! never sends (only CREATE, MEASURE and READY pass), counting and logging what it dropped.

use portus::ipc::Ipc;
use portus::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The multicast group portus and the datapath use, and `NETLINK_USERSOCK`: defined once with
/// the wire format in `ccp-datapath`, which the kernel module compiles in.
pub use ccp_datapath::wire::{CCP_GROUP, NETLINK_USERSOCK};
/// Size of the netlink message header in front of every CCP message.
pub const NLMSG_HDRSIZE: usize = 16;

/// Messages dropped because their sender was not the kernel (port id != 0), by every
/// [`CheckedNetlink`] of the process.
pub static DROPPED_FOREIGN: AtomicU64 = AtomicU64::new(0);
/// Messages from the kernel dropped as malformed or of a type a datapath never sends, by every
/// [`CheckedNetlink`] of the process.
pub static DROPPED_BAD: AtomicU64 = AtomicU64::new(0);

/// The drop counters of one [`CheckedNetlink`] (shared with whoever asked for them through
/// [`CheckedNetlink::counters`], e.g. a status endpoint, after the socket moved into portus).
#[derive(Debug, Default)]
pub struct DropCounters {
    /// Messages whose sender port id was not 0.
    pub foreign: AtomicU64,
    /// Messages from the kernel that were malformed or of a type a datapath never sends.
    pub bad: AtomicU64,
}

/// A netlink socket subscribed to group 22 that checks the sender of every message.
pub struct CheckedNetlink {
    fd: OwnedFd,
    counters: Arc<DropCounters>,
}

/// What [`classify`] makes of one received netlink datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A CCP message from the kernel: the payload is `datagram[NLMSG_HDRSIZE..end]`.
    Accept {
        /// End of the CCP payload in the datagram (the netlink header's length).
        end: usize,
    },
    /// Sent by a process, not by the kernel (sender port id != 0): dropped.
    Foreign,
    /// From the kernel, but malformed, of a type a datapath never sends, or larger than the
    /// caller's buffer (`buf_len`): dropped.
    Bad,
}

/// Classifies a netlink datagram (the message must also be [`crate::portus_safe`]) `datagram` received from sender port id `sender_portid`, for
/// a caller whose message buffer holds `buf_len` bytes. Pure: no I/O, never panics.
pub fn classify(sender_portid: u32, datagram: &[u8], buf_len: usize) -> Verdict {
    if sender_portid != 0 {
        return Verdict::Foreign;
    }
    // One nlmsghdr: its length must cover the header and a CCP header (u16 type, u16 len, u32 sid).
    let Some(b) = datagram.get(..4) else {
        return Verdict::Bad;
    };
    let nl_len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
    if nl_len < NLMSG_HDRSIZE + 8 || nl_len > datagram.len() {
        return Verdict::Bad;
    }
    let payload = &datagram[NLMSG_HDRSIZE..nl_len];
    let typ = u16::from_le_bytes([payload[0], payload[1]]);
    if !from_datapath(typ) || payload.len() > buf_len || !crate::portus_safe(payload) {
        return Verdict::Bad;
    }
    Verdict::Accept { end: nl_len }
}

fn errno_err(what: &str) -> Error {
    Error(format!("{what}: {}", std::io::Error::last_os_error()))
}

fn setsockopt_int(fd: i32, level: i32, opt: i32, val: i32) -> std::io::Result<()> {
    // SAFETY: `val` outlives the call; the length matches the pointed-to c_int.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            &val as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Opens an unbound `NETLINK_USERSOCK` raw socket.
pub fn open_usersock() -> Result<OwnedFd> {
    // SAFETY: Plain socket(2) call; the result is checked before it is wrapped.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_USERSOCK,
        )
    };
    if fd < 0 {
        return Err(errno_err("socket(AF_NETLINK, NETLINK_USERSOCK)"));
    }
    // SAFETY: `fd` is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Binds `fd` to a kernel-chosen port id (no groups).
pub fn bind_auto(fd: &OwnedFd) -> Result<()> {
    // SAFETY: An all-zero sockaddr_nl is valid; it is fully initialised below.
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as u16;
    // SAFETY: `sa` is a valid sockaddr_nl of the given length.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(errno_err("bind(netlink)"));
    }
    Ok(())
}

/// Sends `payload` behind a 16-byte netlink header (only the length set, as portus does) to
/// the kernel (port id 0, no group).
pub fn send_to_kernel(fd: &OwnedFd, payload: &[u8]) -> std::io::Result<usize> {
    send_framed(fd, payload, 0)
}

/// Sends `payload` behind a 16-byte netlink header (only the length set) to port id 0 and to
/// the multicast groups in the bit mask `groups` (0: the kernel only).
pub fn send_framed(fd: &OwnedFd, payload: &[u8], groups: u32) -> std::io::Result<usize> {
    let len = NLMSG_HDRSIZE + payload.len();
    let mut msg = Vec::with_capacity(len);
    msg.extend_from_slice(&(len as u32).to_le_bytes());
    msg.extend_from_slice(&[0u8; 12]);
    msg.extend_from_slice(payload);
    // SAFETY: An all-zero sockaddr_nl is valid: family and groups set below, port id 0.
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as u16;
    sa.nl_groups = groups;
    // SAFETY: `msg` and `sa` are valid for the given lengths.
    let r = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            msg.as_ptr() as *const libc::c_void,
            msg.len(),
            0,
            &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

impl CheckedNetlink {
    /// Opens the socket, joins group 22 (needs CAP_NET_ADMIN in the initial network namespace,
    /// where the module's kernel socket lives), enlarges its receive buffer, and sets a 1 s
    /// receive timeout so portus's loop can notice a stop request.
    pub fn new() -> Result<Self> {
        let fd = open_usersock()?;
        bind_auto(&fd)?;
        let raw = fd.as_raw_fd();
        setsockopt_int(
            raw,
            libc::SOL_NETLINK,
            libc::NETLINK_ADD_MEMBERSHIP,
            CCP_GROUP as i32,
        )
        .map_err(|e| {
            Error(format!(
                "joining netlink group {CCP_GROUP} (needs CAP_NET_ADMIN): {e}"
            ))
        })?;
        // Reports of many flows every 10 ms: a bigger buffer than the default avoids ENOBUFS.
        if setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20).is_err() {
            let _ = setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, 8 << 20);
        }
        let tv = libc::timeval {
            tv_sec: 1,
            tv_usec: 0,
        };
        // SAFETY: `tv` outlives the call; the length matches.
        unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            );
        }
        Ok(Self {
            fd,
            counters: Arc::default(),
        })
    }

    /// This socket's drop counters.
    pub fn counters(&self) -> Arc<DropCounters> {
        self.counters.clone()
    }

    /// The socket's descriptor (to poll it; it stays owned by `self`).
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

/// Whether a CCP message type is one a datapath sends (CREATE 0, MEASURE 1, READY 5).
fn from_datapath(typ: u16) -> bool {
    matches!(typ, 0 | 1 | 5)
}

fn rate_limited(counter: &AtomicU64) -> Option<u64> {
    let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
    n.is_power_of_two().then_some(n)
}

impl Ipc for CheckedNetlink {
    type Addr = ();

    fn name() -> String {
        String::from("netlink")
    }

    fn send(&self, msg: &[u8], _to: &()) -> Result<()> {
        send_to_kernel(&self.fd, msg)
            .map(|_| ())
            .map_err(Error::from)
    }

    fn recv(&self, buf: &mut [u8]) -> Result<(usize, ())> {
        let mut nl_buf = [0u8; 4096];
        // SAFETY: An all-zero sockaddr_nl is valid; recvfrom fills it.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        let mut sa_len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
        // SAFETY: `nl_buf`, `sa` and `sa_len` are valid for writes of the given sizes.
        let n = unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                nl_buf.as_mut_ptr() as *mut libc::c_void,
                nl_buf.len(),
                0,
                &mut sa as *mut libc::sockaddr_nl as *mut libc::sockaddr,
                &mut sa_len,
            )
        };
        if n < 0 {
            // Timeouts (EAGAIN) and ENOBUFS: portus's loop logs at trace level and retries.
            return Err(errno_err("recv(netlink)"));
        }
        let n = n as usize;
        let datagram = &nl_buf[..n.min(nl_buf.len())];
        match classify(sa.nl_pid, datagram, buf.len()) {
            Verdict::Foreign => {
                self.counters.foreign.fetch_add(1, Ordering::Relaxed);
                if let Some(k) = rate_limited(&DROPPED_FOREIGN) {
                    tracing::warn!(
                        sender_portid = sa.nl_pid,
                        total = k,
                        "dropped a netlink message not sent by the kernel"
                    );
                }
                Err(Error(String::from("foreign sender")))
            }
            Verdict::Bad => {
                self.counters.bad.fetch_add(1, Ordering::Relaxed);
                let typ = datagram
                    .get(NLMSG_HDRSIZE..NLMSG_HDRSIZE + 2)
                    .map(|b| u16::from_le_bytes([b[0], b[1]]));
                if let Some(k) = rate_limited(&DROPPED_BAD) {
                    tracing::warn!(
                        len = n,
                        ?typ,
                        total = k,
                        "dropped a malformed or unexpected message from the kernel"
                    );
                }
                Err(Error(String::from("bad message")))
            }
            Verdict::Accept { end } => {
                let payload = &datagram[NLMSG_HDRSIZE..end];
                buf[..payload.len()].copy_from_slice(payload);
                Ok((payload.len(), ()))
            }
        }
    }
    fn close(&mut self) -> Result<()> {
        // The OwnedFd closes on drop.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(typ: u16, body: usize) -> Vec<u8> {
        let len = NLMSG_HDRSIZE + 8 + body;
        let mut v = (len as u32).to_le_bytes().to_vec();
        v.extend_from_slice(&[0; 12]);
        v.extend_from_slice(&typ.to_le_bytes());
        v.extend_from_slice(&((8 + body) as u16).to_le_bytes());
        v.extend_from_slice(&[0; 4]);
        v.extend(std::iter::repeat_n(0u8, body));
        v
    }

    #[test]
    fn only_kernel_datapath_messages_pass() {
        let m = framed(1, 8); // a closing MEASURE: uid 0, no fields
        assert_eq!(classify(0, &m, 1024), Verdict::Accept { end: m.len() });
        assert_eq!(classify(4242, &m, 1024), Verdict::Foreign);
        // INSTALL (2), UPDATE_FIELDS (3) and CHANGE_PROG (4) never come from a datapath.
        for t in [2, 3, 4, 9] {
            assert_eq!(classify(0, &framed(t, 16), 1024), Verdict::Bad, "type {t}");
        }
        assert_eq!(
            classify(0, &m, 8),
            Verdict::Bad,
            "larger than the caller's buffer"
        );
        assert_eq!(
            classify(0, &m[..10], 1024),
            Verdict::Bad,
            "truncated header"
        );
        assert_eq!(
            classify(0, &m[..m.len() - 1], 1024),
            Verdict::Bad,
            "length beyond datagram"
        );
        assert_eq!(classify(0, &[], 1024), Verdict::Bad);
    }
}
