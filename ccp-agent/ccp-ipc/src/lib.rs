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
//!
//! Both backends implement [`PollableIpc`], so a caller can wait on the socket with a deadline
//! of its own (the agent's slot boundaries) instead of the sockets' 1 s receive timeout.

pub mod netlink;
pub mod netns;
pub mod unix;

pub use netlink::{CheckedNetlink, DropCounters, Verdict};
pub use netns::{check_initial_netns, NetnsError};
pub use unix::UnixIpc;

/// An [`Ipc`](portus::ipc::Ipc) whose socket can be polled for input.
pub trait PollableIpc: portus::ipc::Ipc {
    /// The socket's descriptor; it stays owned by the backend.
    fn raw_fd(&self) -> std::os::fd::RawFd;
}

impl PollableIpc for CheckedNetlink {
    fn raw_fd(&self) -> std::os::fd::RawFd {
        CheckedNetlink::raw_fd(self)
    }
}

impl PollableIpc for UnixIpc {
    fn raw_fd(&self) -> std::os::fd::RawFd {
        UnixIpc::raw_fd(self)
    }
}
