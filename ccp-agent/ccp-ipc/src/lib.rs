// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `ccp-ipc`: the [`portus::ipc::Ipc`] backends of this project's CCP agents
//! (`ccp-agent` and `kmod/ccp-test-agent`).
//!
//! - [`netlink::CheckedNetlink`]: portus's netlink framing (`NETLINK_USERSOCK`, multicast group
//!   22, a 16-byte `nlmsghdr` with only the length set) that accepts only messages whose sender
//!   port id is 0 (the kernel) and of a type a datapath sends, and counts what it drops. portus's
//!   own backend does not check the sender, so any local process could forge CREATE or MEASURE
//!   messages, and an INSTALL-typed one reaches portus's `unreachable!()`.
//! - [`unix::UnixIpc`]: portus's unix-datagram IPC (`/tmp/ccp/<name>`, the same addressing as
//!   `portus::ipc::unix::Socket`) with a descriptor the caller can poll, for user-space
//!   datapaths (tests).
//! - [`netns::check_initial_netns`]: the module's kernel socket lives in the initial network
//!   namespace only (`init_net`); an agent elsewhere would listen to nothing.
//! - [`set_class_msg`], [`send_set_class`], [`netlink::KernelSender`]: this project's SET_CLASS
//!   message (a flow's traffic class, `ccp_datapath::wire::SET_CLASS`), which portus cannot
//!   send, encoded by the one wire format and sent through any backend or a send-only socket.
//!
//! - [`bpf::BpfIpc`]: a CCP datapath emulated in user space over the BPF agent datapath of
//!   `mltcp-bpf` (ring buffer and maps), for stock kernels; it runs the agent's slot program only.
//! - [`ClassSender`]: where the agent's traffic classes go (the kernel, or the BPF datapath).
//!
//! The backends implement [`PollableIpc`], so a caller can wait on the socket with a deadline
//! of its own (the agent's slot boundaries) instead of the sockets' 1 s receive timeout.

pub mod bpf;
pub mod netlink;
pub mod netns;
pub mod unix;

pub use bpf::{BpfClassSender, BpfIpc};
pub use netlink::{CheckedNetlink, DropCounters, KernelSender, Verdict};
pub use netns::{check_initial_netns, NetnsError};
pub use unix::UnixIpc;

/// Whether portus 0.9 can take the datagram `buf` safely: every CCP message in it parses with
/// the project's wire parser (`ccp_datapath::wire`), is one a datapath sends (CREATE, MEASURE,
/// READY), and a CREATE's algorithm name has its NUL within the 64 bytes. portus's own parser
/// panics on an UPDATE_FIELDS (`unimplemented!()`), on an INSTALL in its loop
/// (`unreachable!()`), on a short CREATE or a name without NUL (slice indexing), and its loop
/// ends on a message it cannot parse; so both agents drop such datagrams before portus sees
/// them. Pure; never panics.
pub fn portus_safe(buf: &[u8]) -> bool {
    use ccp_datapath::wire::{self, Msg};
    let mut off = 0;
    while off < buf.len() {
        let Some(rest) = buf.get(off..) else {
            return false;
        };
        match wire::parse(rest) {
            Ok((Msg::Create(c), used)) if c.alg.contains(&0) => off += used,
            Ok((Msg::Measure(_) | Msg::Ready { .. }, used)) => off += used,
            _ => return false,
        }
    }
    !buf.is_empty()
}

/// The SET_CLASS message for flow `sid` (`ccp_datapath::wire::write_set_class`: type `0x4d01`,
/// 12 bytes): `Some(dscp)`, 0..=63, marks the flow's packets with that DSCP, `None` gives it
/// back its socket's own marking. The datapath applies it at the flow's next ACK while the
/// agent is in charge of the flow.
///
/// Errors: `ccp_datapath::Error::BadClass` for a DSCP above 63.
pub fn set_class_msg(
    sid: u32,
    dscp: Option<u8>,
) -> Result<[u8; ccp_datapath::wire::SET_CLASS_LEN], ccp_datapath::Error> {
    let mut b = [0u8; ccp_datapath::wire::SET_CLASS_LEN];
    ccp_datapath::wire::write_set_class(&mut b, sid, dscp)?;
    Ok(b)
}

/// Sends a SET_CLASS ([`set_class_msg`]) through any portus backend `ipc` to `to` (the kernel
/// for netlink, a user-space datapath's address for unix sockets).
///
/// Errors: a DSCP above 63, or the backend's send error.
pub fn send_set_class<I: portus::ipc::Ipc>(
    ipc: &I,
    to: &I::Addr,
    sid: u32,
    dscp: Option<u8>,
) -> portus::Result<()> {
    let msg = set_class_msg(sid, dscp).map_err(|e| portus::Error(format!("SET_CLASS: {e}")))?;
    ipc.send(&msg, to)
}

/// An [`Ipc`](portus::ipc::Ipc) whose socket can be polled for input: [`AsFd`] lends its
/// descriptor, which stays owned by the backend.
///
/// [`AsFd`]: std::os::fd::AsFd
pub trait PollableIpc: portus::ipc::Ipc + std::os::fd::AsFd {}

impl PollableIpc for CheckedNetlink {}

impl PollableIpc for UnixIpc {}

impl PollableIpc for BpfIpc {}

/// Where a flow's traffic class (SET_CLASS) goes: the kernel module ([`KernelSender`]) or the
/// BPF datapath ([`BpfClassSender`]).
pub trait ClassSender {
    /// Sets flow `sid`'s class: `Some(dscp)` (0..=63) marks its packets with that DSCP, `None`
    /// gives it back the socket's own marking.
    ///
    /// Errors: `InvalidInput` for a DSCP above 63; the datapath's refusal or send error.
    fn set_class(&self, sid: u32, dscp: Option<u8>) -> std::io::Result<()>;
}

impl ClassSender for KernelSender {
    fn set_class(&self, sid: u32, dscp: Option<u8>) -> std::io::Result<()> {
        KernelSender::set_class(self, sid, dscp)
    }
}

#[cfg(test)]
mod tests {
    use super::{portus_safe, send_set_class, set_class_msg};
    use std::cell::RefCell;

    /// A backend that records what it is asked to send.
    struct Recorder(RefCell<Vec<Vec<u8>>>);

    impl portus::ipc::Ipc for Recorder {
        type Addr = ();
        fn name() -> String {
            String::from("recorder")
        }
        fn send(&self, msg: &[u8], _to: &()) -> portus::Result<()> {
            self.0.borrow_mut().push(msg.to_vec());
            Ok(())
        }
        fn recv(&self, _buf: &mut [u8]) -> portus::Result<(usize, ())> {
            Err(portus::Error(String::from("nothing to receive")))
        }
        fn close(&mut self) -> portus::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn set_class_is_the_wire_format_and_never_reaches_portus() {
        use ccp_datapath::wire::{self, Msg, SetClass};
        let m = set_class_msg(0x0002_0005, Some(26)).unwrap();
        assert_eq!(
            wire::parse(&m).unwrap(),
            (
                Msg::SetClass(SetClass {
                    sid: 0x0002_0005,
                    dscp: Some(26)
                }),
                12
            )
        );
        assert!(set_class_msg(1, Some(64)).is_err());
        assert!(!portus_safe(&m), "agent -> datapath only");
        let r = Recorder(RefCell::new(Vec::new()));
        send_set_class(&r, &(), 7, None).unwrap();
        assert!(send_set_class(&r, &(), 7, Some(200)).is_err());
        let sent = r.0.into_inner();
        assert_eq!(sent, [set_class_msg(7, None).unwrap().to_vec()]);
    }

    fn msg(typ: u16, body: &[u8]) -> Vec<u8> {
        let mut v = typ.to_le_bytes().to_vec();
        v.extend_from_slice(&((8 + body.len()) as u16).to_le_bytes());
        v.extend_from_slice(&7u32.to_le_bytes());
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn only_what_portus_survives_passes() {
        let ready = msg(5, &1u32.to_le_bytes());
        assert!(portus_safe(&ready));
        let mut two = ready.clone();
        two.extend_from_slice(&msg(1, &[0; 8]));
        assert!(portus_safe(&two), "READY then a closing MEASURE");
        assert!(!portus_safe(&[]));
        assert!(!portus_safe(&ready[..6]), "truncated");
        let mut create = [0u8; 24 + 64];
        create[24..29].copy_from_slice(b"mltcp");
        assert!(portus_safe(&msg(0, &create)));
        create[24..].fill(b'x');
        assert!(
            !portus_safe(&msg(0, &create)),
            "a name without NUL panics portus"
        );
        assert!(!portus_safe(&msg(0, &create[..40])), "short CREATE");
        assert!(
            !portus_safe(&msg(3, &[0; 4])),
            "UPDATE_FIELDS: unimplemented!() in portus"
        );
        assert!(!portus_safe(&msg(2, &[0; 12])), "INSTALL");
        assert!(
            !portus_safe(&msg(1, &[0; 12])),
            "MEASURE whose length disagrees with its count"
        );
    }
}
