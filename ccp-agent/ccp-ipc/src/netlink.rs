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

use netlink_sys::{Socket, SocketAddr};
use nix::sys::socket::{recvmsg, setsockopt, sockopt, MsgFlags, NetlinkAddr};
use nix::sys::time::TimeVal;
use portus::ipc::Ipc;
use portus::{Error, Result};
use std::io::IoSliceMut;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The multicast group portus and the datapath use, and `NETLINK_USERSOCK`: defined once with
/// the wire format in `ccp-datapath`, which the kernel module compiles in.
pub use ccp_datapath::wire::{CCP_GROUP, NETLINK_USERSOCK};
/// Size of the netlink message header in front of every CCP message.
pub const NLMSG_HDRSIZE: usize = 16;
/// The receive buffer [`CheckedNetlink::new`] asks for, bytes.
const RCVBUF_BYTES: usize = 8 << 20;

/// Messages dropped because their sender was not the kernel (port id != 0), by every
/// [`CheckedNetlink`] of the process.
pub static DROPPED_FOREIGN: AtomicU64 = AtomicU64::new(0);
/// Messages from the kernel dropped as malformed or of a type a datapath never sends, by every
/// [`CheckedNetlink`] of the process.
pub static DROPPED_BAD: AtomicU64 = AtomicU64::new(0);

/// CCP messages sent to the kernel by every [`CheckedNetlink`] of the process (one per
/// successful `send`; an agent's cost per report is counted against these).
pub static SENT: AtomicU64 = AtomicU64::new(0);
/// CCP datagrams from the kernel that passed the checks, by every [`CheckedNetlink`] of the
/// process (one per successful `recv`).
pub static ACCEPTED: AtomicU64 = AtomicU64::new(0);

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
    sock: Socket,
    counters: Arc<DropCounters>,
}

/// What [`classify`] makes of one received netlink datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// CCP messages from the kernel: the payload is the first `len` bytes received after the
    /// netlink header (one CCP message, or several back to back, which portus parses in turn).
    Accept {
        /// Length of the CCP payload, bytes (the netlink header's length minus its 16 bytes).
        len: usize,
    },
    /// Sent by a process, not by the kernel (sender port id != 0): dropped.
    Foreign,
    /// From the kernel, but malformed, of a type a datapath never sends, or larger than the
    /// caller's buffer (truncated on receipt): dropped.
    Bad,
}

/// Classifies a netlink datagram received from sender port id `sender_portid` as its 16-byte
/// netlink `header` and the `body` bytes received after it, `truncated` when the datagram did
/// not fit the caller's buffer (`MSG_TRUNC`). Every CCP message in the payload must also be
/// [`crate::portus_safe`], which also refuses every type a datapath never sends (only CREATE,
/// MEASURE and READY pass). Pure: no I/O, never panics.
pub fn classify(sender_portid: u32, header: &[u8], body: &[u8], truncated: bool) -> Verdict {
    if sender_portid != 0 {
        return Verdict::Foreign;
    }
    if truncated || header.len() != NLMSG_HDRSIZE {
        return Verdict::Bad;
    }
    // One nlmsghdr: its length must cover the header and a CCP header (u16 type, u16 len, u32 sid).
    let nl_len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let Some(len) = nl_len.checked_sub(NLMSG_HDRSIZE) else {
        return Verdict::Bad;
    };
    let Some(payload) = body.get(..len) else {
        return Verdict::Bad;
    };
    if len < 8 || !crate::portus_safe(payload) {
        return Verdict::Bad;
    }
    Verdict::Accept { len }
}

/// Opens an unbound `NETLINK_USERSOCK` socket (close-on-exec).
pub fn open_usersock() -> Result<Socket> {
    Socket::new(NETLINK_USERSOCK as isize)
        .map_err(|e| Error(format!("socket(AF_NETLINK, NETLINK_USERSOCK): {e}")))
}

/// Binds `sock` to a kernel-chosen port id (no groups).
pub fn bind_auto(sock: &mut Socket) -> Result<()> {
    sock.bind_auto()
        .map(|_| ())
        .map_err(|e| Error(format!("bind(netlink): {e}")))
}

/// Sends `payload` behind a 16-byte netlink header (only the length set, as portus does) to
/// the kernel (port id 0, no group).
pub fn send_to_kernel(sock: &Socket, payload: &[u8]) -> std::io::Result<usize> {
    send_framed(sock, payload, 0)
}

/// Sends `payload` behind a 16-byte netlink header (only the length set) to port id 0 and to
/// the multicast groups in the bit mask `groups` (0: the kernel only).
pub fn send_framed(sock: &Socket, payload: &[u8], groups: u32) -> std::io::Result<usize> {
    let len = NLMSG_HDRSIZE + payload.len();
    let nl_len = u32::try_from(len).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "CCP message of {} bytes: too long for a netlink header",
                payload.len()
            ),
        )
    })?;
    let to = SocketAddr::new(0, groups);
    // The agents' messages (UPDATE_FIELDS, CHANGE_PROG: tens of bytes) are framed on the stack,
    // with no allocation per message; only an INSTALL (once per program) takes the heap.
    let mut small = [0u8; SMALL_FRAME];
    if let Some(frame) = small.get_mut(..len) {
        frame_into(frame, nl_len, payload);
        return sock.send_to(frame, &to, 0);
    }
    let mut msg = vec![0u8; len];
    frame_into(&mut msg, nl_len, payload);
    sock.send_to(&msg, &to, 0)
}

/// The largest framed message [`send_framed`] builds on the stack, bytes (header included): an
/// UPDATE_FIELDS of 16 fields is 8 + 4 + 16 × 13 = 220 bytes of payload.
const SMALL_FRAME: usize = 256;

/// Writes the 16-byte header (length `nl_len`, the rest 0) and `payload` into `frame`, which is
/// exactly `NLMSG_HDRSIZE + payload.len()` bytes long.
fn frame_into(frame: &mut [u8], nl_len: u32, payload: &[u8]) {
    let (hdr, body) = frame.split_at_mut(NLMSG_HDRSIZE);
    hdr.fill(0);
    hdr[..4].copy_from_slice(&nl_len.to_le_bytes());
    body.copy_from_slice(payload);
}

/// A socket that only sends CCP messages to the kernel (port id 0, no group joined): how an
/// agent sends what portus's `Datapath` handle cannot, this project's SET_CLASS
/// ([`ccp_datapath::wire::SET_CLASS`]), beside the socket portus reads from. The module takes
/// messages only from senders with CAP_NET_ADMIN.
pub struct KernelSender {
    sock: Socket,
}

impl KernelSender {
    /// Opens and binds the socket (no privilege needed to open it; the module checks the
    /// sender's CAP_NET_ADMIN per message).
    pub fn new() -> Result<Self> {
        let mut sock = open_usersock()?;
        bind_auto(&mut sock)?;
        Ok(Self { sock })
    }

    /// Sends one CCP message (`payload`, header included) to the kernel.
    pub fn send(&self, payload: &[u8]) -> std::io::Result<()> {
        send_to_kernel(&self.sock, payload)?;
        SENT.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Sends a SET_CLASS for flow `sid`: `Some(dscp)` (0..=63) marks its packets with that DSCP,
    /// `None` gives it back the socket's own marking (see [`crate::set_class_msg`]).
    ///
    /// Errors: `InvalidInput` for a DSCP above 63; the socket's send error.
    pub fn set_class(&self, sid: u32, dscp: Option<u8>) -> std::io::Result<()> {
        let msg = crate::set_class_msg(sid, dscp).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("SET_CLASS: {e}"))
        })?;
        self.send(&msg)
    }
}

impl CheckedNetlink {
    /// Opens the socket, joins group 22 (needs CAP_NET_ADMIN in the initial network namespace,
    /// where the module's kernel socket lives), enlarges its receive buffer, and sets a 1 s
    /// receive timeout so portus's loop can notice a stop request.
    pub fn new() -> Result<Self> {
        let mut sock = open_usersock()?;
        bind_auto(&mut sock)?;
        sock.add_membership(CCP_GROUP).map_err(|e| {
            Error(format!(
                "joining netlink group {CCP_GROUP} (needs CAP_NET_ADMIN): {e}"
            ))
        })?;
        // Reports of many flows every 10 ms: a bigger buffer than the default avoids ENOBUFS.
        // SO_RCVBUFFORCE passes rmem_max with CAP_NET_ADMIN; without it SO_RCVBUF gets what
        // rmem_max allows, and the default buffer is kept if even that fails.
        if setsockopt(&sock, sockopt::RcvBufForce, &RCVBUF_BYTES).is_err() {
            let _ = setsockopt(&sock, sockopt::RcvBuf, &RCVBUF_BYTES);
        }
        setsockopt(&sock, sockopt::ReceiveTimeout, &TimeVal::new(1, 0))
            .map_err(|e| Error(format!("SO_RCVTIMEO on the netlink socket: {e}")))?;
        Ok(Self {
            sock,
            counters: Arc::default(),
        })
    }

    /// This socket's drop counters.
    pub fn counters(&self) -> Arc<DropCounters> {
        self.counters.clone()
    }
}

impl AsFd for CheckedNetlink {
    /// The socket's descriptor (to poll it; it stays owned by `self`).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
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
        send_to_kernel(&self.sock, msg).map_err(Error::from)?;
        SENT.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Receives one datagram: its netlink header into a 16-byte array on the stack and the CCP
    /// payload straight into portus's buffer `buf` (one `recvmsg` with two I/O vectors), so a
    /// report costs no zeroing, no copy and no allocation here.
    fn recv(&self, buf: &mut [u8]) -> Result<(usize, ())> {
        let mut header = [0u8; NLMSG_HDRSIZE];
        let (n, sender, truncated) = {
            let mut iov = [IoSliceMut::new(&mut header), IoSliceMut::new(buf)];
            // Timeouts (EAGAIN) and ENOBUFS: portus's loop logs at trace level and retries.
            let r =
                recvmsg::<NetlinkAddr>(self.sock.as_raw_fd(), &mut iov, None, MsgFlags::empty())
                    .map_err(|e| Error(format!("recv(netlink): {e}")))?;
            (
                r.bytes,
                // No address: not a netlink sender we know, so not the kernel.
                r.address.map_or(u32::MAX, |a| a.pid()),
                r.flags.contains(MsgFlags::MSG_TRUNC),
            )
        };
        let body = buf.get(..n.saturating_sub(NLMSG_HDRSIZE)).unwrap_or(&[]);
        match classify(sender, &header, body, truncated) {
            Verdict::Foreign => {
                self.counters.foreign.fetch_add(1, Ordering::Relaxed);
                if let Some(k) = rate_limited(&DROPPED_FOREIGN) {
                    tracing::warn!(
                        sender_portid = sender,
                        total = k,
                        "dropped a netlink message not sent by the kernel"
                    );
                }
                Err(Error(String::from("foreign sender")))
            }
            Verdict::Bad => {
                self.counters.bad.fetch_add(1, Ordering::Relaxed);
                let typ = body.get(..2).map(|b| u16::from_le_bytes([b[0], b[1]]));
                if let Some(k) = rate_limited(&DROPPED_BAD) {
                    tracing::warn!(
                        len = n,
                        ?typ,
                        truncated,
                        total = k,
                        "dropped a malformed or unexpected message from the kernel"
                    );
                }
                Err(Error(String::from("bad message")))
            }
            Verdict::Accept { len } => {
                ACCEPTED.fetch_add(1, Ordering::Relaxed);
                Ok((len, ()))
            }
        }
    }
    fn close(&mut self) -> Result<()> {
        // The socket closes on drop.
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
    fn frames_carry_the_length_and_the_payload() {
        for n in [0usize, 8, SMALL_FRAME - NLMSG_HDRSIZE, SMALL_FRAME, 4000] {
            let payload: Vec<u8> = (0..n).map(|i| i as u8 | 1).collect();
            let mut frame = vec![0xffu8; NLMSG_HDRSIZE + n];
            frame_into(&mut frame, (NLMSG_HDRSIZE + n) as u32, &payload);
            assert_eq!(frame[..4], ((NLMSG_HDRSIZE + n) as u32).to_le_bytes());
            assert!(
                frame[4..NLMSG_HDRSIZE].iter().all(|&b| b == 0),
                "header rest zeroed"
            );
            assert_eq!(frame[NLMSG_HDRSIZE..], payload[..]);
        }
    }

    /// Splits a framed datagram into its netlink header and the bytes after it.
    fn parts(d: &[u8]) -> (&[u8], &[u8]) {
        d.split_at(NLMSG_HDRSIZE.min(d.len()))
    }

    #[test]
    fn only_kernel_datapath_messages_pass() {
        let m = framed(1, 8); // a closing MEASURE: uid 0, no fields
        let (h, b) = parts(&m);
        assert_eq!(classify(0, h, b, false), Verdict::Accept { len: b.len() });
        assert_eq!(classify(4242, h, b, false), Verdict::Foreign);
        // INSTALL (2), UPDATE_FIELDS (3) and CHANGE_PROG (4) never come from a datapath.
        for t in [2, 3, 4, 9] {
            let f = framed(t, 16);
            let (h, b) = parts(&f);
            assert_eq!(classify(0, h, b, false), Verdict::Bad, "type {t}");
        }
        assert_eq!(
            classify(0, h, b, true),
            Verdict::Bad,
            "larger than the caller's buffer"
        );
        assert_eq!(
            classify(0, &m[..10], &[], false),
            Verdict::Bad,
            "truncated header"
        );
        assert_eq!(
            classify(0, h, &b[..b.len() - 1], false),
            Verdict::Bad,
            "length beyond datagram"
        );
        assert_eq!(classify(0, &[], &[], false), Verdict::Bad);
    }

    /// One datagram carrying several MEASUREs back to back, as the module's batches do.
    fn batch(reports: &[(u32, Vec<u64>)]) -> Vec<u8> {
        let mut payload = Vec::new();
        for (sid, fields) in reports {
            let mut m = [0u8; 256];
            let n = ccp_datapath::wire::write_measure(&mut m, *sid, 7, fields).expect("fits");
            payload.extend_from_slice(&m[..n]);
        }
        let mut d = ((NLMSG_HDRSIZE + payload.len()) as u32)
            .to_le_bytes()
            .to_vec();
        d.extend_from_slice(&[0; 12]);
        d.extend_from_slice(&payload);
        d
    }

    #[test]
    fn a_batch_of_reports_passes_whole_and_one_bad_message_drops_it() {
        let reports: Vec<(u32, Vec<u64>)> = (1..=5).map(|s| (s, vec![u64::from(s); 6])).collect();
        let d = batch(&reports);
        let (h, b) = parts(&d);
        assert_eq!(classify(0, h, b, false), Verdict::Accept { len: b.len() });
        // An UPDATE_FIELDS-typed message in the middle of the batch would reach portus's
        // `unimplemented!()`: the whole datagram is dropped.
        let mut bad = d.clone();
        let second = NLMSG_HDRSIZE + b.len() / 5;
        bad[second] = 3;
        let (h, b) = parts(&bad);
        assert_eq!(classify(0, h, b, false), Verdict::Bad);
    }

    /// A portus `Ipc` that hands out one preset payload, then reports the channel closed.
    struct Once(
        std::cell::Cell<Option<Vec<u8>>>,
        Arc<std::sync::atomic::AtomicBool>,
    );

    impl Ipc for Once {
        type Addr = ();
        fn name() -> String {
            String::from("once")
        }
        fn send(&self, _: &[u8], _: &()) -> Result<()> {
            Ok(())
        }
        fn recv(&self, buf: &mut [u8]) -> Result<(usize, ())> {
            match self.0.take() {
                Some(p) => {
                    buf[..p.len()].copy_from_slice(&p);
                    Ok((p.len(), ()))
                }
                None => {
                    self.1.store(false, Ordering::SeqCst);
                    Err(Error(String::from("closed")))
                }
            }
        }
        fn close(&mut self) -> Result<()> {
            Ok(())
        }
    }

    /// portus 0.9's receive loop (`Backend::next`) parses every CCP message of one received
    /// payload in turn: the wire protocol carries batched reports as they are.
    #[test]
    fn portus_reads_every_report_of_a_batch() {
        use portus::serialize::Msg;
        let reports: Vec<(u32, Vec<u64>)> = (1..=9)
            .map(|s| (s * 3, (0..8).map(|k| u64::from(s) * 100 + k).collect()))
            .collect();
        let d = batch(&reports);
        let (h, b) = parts(&d);
        let Verdict::Accept { len } = classify(0, h, b, false) else {
            panic!("batch refused")
        };
        let go = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let ipc = Once(std::cell::Cell::new(Some(b[..len].to_vec())), go.clone());
        let mut rbuf = [0u8; 1024];
        let mut backend = portus::ipc::Backend::new(ipc, go, &mut rbuf[..]);
        let mut got = Vec::new();
        while let Some((msg, ())) = backend.next() {
            match msg {
                Msg::Ms(m) => got.push((m.sid, m.fields)),
                other => panic!("not a MEASURE: {other:?}"),
            }
        }
        assert_eq!(got, reports);
    }
}
