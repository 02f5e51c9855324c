// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The initial-network-namespace check.
//!
//! `tcp_mltcp.ko` creates its `NETLINK_USERSOCK` kernel socket in the initial network namespace
//! (`init_net`) only, so its CREATE and MEASURE multicasts reach agents there and nowhere else;
//! an agent in another namespace (a container, `ip netns exec`) would join group 22 of its own
//! namespace and hear nothing. The check compares the namespace of this process
//! (`/proc/self/ns/net`) with that of pid 1 (`/proc/1/ns/net`): same device and inode, same
//! namespace. Limitation: inside a PID namespace pid 1 is that namespace's init, so the check
//! cannot see the host's initial namespace from there.

use std::fmt;
use std::path::Path;

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

fn ns_id(path: &'static str) -> Result<(u64, u64, String), NetnsError> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(Path::new(path))
        .map_err(|error| NetnsError::Unreadable { path, error })?;
    let name = std::fs::read_link(path)
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    Ok((md.dev(), md.ino(), name))
}

/// Ok when this process is in the same network namespace as pid 1 (see the module docs).
pub fn check_initial_netns() -> Result<(), NetnsError> {
    let ours = ns_id("/proc/self/ns/net")?;
    let initial = ns_id("/proc/1/ns/net")?;
    if (ours.0, ours.1) == (initial.0, initial.1) {
        Ok(())
    } else {
        Err(NetnsError::NotInitial {
            ours: ours.2,
            initial: initial.2,
        })
    }
}
