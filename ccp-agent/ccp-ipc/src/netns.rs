// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The initial-network-namespace check.
//!
//! `tcp_mltcp.ko` creates its `NETLINK_USERSOCK` kernel socket in the initial network namespace
//! (`init_net`) only, so its CREATE and MEASURE multicasts reach agents there and nowhere else;
//! an agent in another namespace (a container, `ip netns exec`) would join group 22 of its own
//! namespace and hear nothing. The check compares the namespace of this process
//! (`/proc/self/ns/net`) with that of pid 1 (`/proc/1/ns/net`): the same link target
//! (`net:[inode]`), the same namespace. Limitation: inside a PID namespace pid 1 is that namespace's init, so the check
//! cannot see the host's initial namespace from there.

use std::fmt;

/// Why [`check_initial_netns`] refused.
#[derive(Debug)]
pub enum NetnsError {
    /// A namespace link could not be read (e.g. no permission on `/proc/1/ns/net`).
    Unreadable {
        /// The path.
        path: &'static str,
        /// The error.
        error: std::io::Error,
    },
    /// This process is not in pid 1's network namespace.
    NotInitial {
        /// `/proc/self/ns/net`'s target, e.g. `net:[4026532281]`.
        ours: String,
        /// `/proc/1/ns/net`'s target.
        initial: String,
    },
}

impl fmt::Display for NetnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetnsError::Unreadable { path, error } => write!(f, "cannot read {path}: {error}"),
            NetnsError::NotInitial { ours, initial } => write!(
                f,
                "this process's network namespace ({ours}) is not the initial one ({initial}, pid 1's): \
                 tcp_mltcp's CCP socket lives in the initial namespace only; run the agent there \
                 (not in a container or under `ip netns exec`)"
            ),
        }
    }
}

impl std::error::Error for NetnsError {}

fn ns_id(path: &'static str) -> Result<String, NetnsError> {
    // The link's target names the namespace (`net:[inode]`); reading it needs no access to the
    // namespace itself (a stat through the link may be refused where readlink is not).
    std::fs::read_link(path)
        .map(|p| p.display().to_string())
        .map_err(|error| NetnsError::Unreadable { path, error })
}

/// The namespace inode newer kernels give the initial network namespace
/// (`PROC_NET_INIT_INO`; dynamic namespace inodes start at `0xF000_0000`, so no other namespace
/// can have it). Linux 6.12 does not fix it yet: there the check needs `/proc/1/ns/net`.
pub const PROC_NET_INIT_INO: u64 = 0xEFFF_FFF9;

/// Ok when this process is in the initial network namespace: its namespace is pid 1's, or has
/// the fixed inode [`PROC_NET_INIT_INO`]. Errors: [`NetnsError::NotInitial`] (another
/// namespace: the agent refuses to start), [`NetnsError::Unreadable`] (pid 1's link cannot be
/// read, e.g. without ptrace access to pid 1, and the inode is not the fixed one: the agent
/// warns and goes on).
pub fn check_initial_netns() -> Result<(), NetnsError> {
    let ours = ns_id("/proc/self/ns/net")?;
    if ours == format!("net:[{PROC_NET_INIT_INO}]") {
        return Ok(());
    }
    let initial = ns_id("/proc/1/ns/net")?;
    if ours == initial {
        Ok(())
    } else {
        Err(NetnsError::NotInitial { ours, initial })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_is_compared_with_pid_1() {
        // Whatever the sandbox, the answer is a verdict or a named unreadable link, never a panic.
        match super::check_initial_netns() {
            Ok(()) => {}
            Err(e) => assert!(
                e.to_string().contains("/proc/") || e.to_string().contains("initial"),
                "{e}"
            ),
        }
    }
}
