// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! A forged multicast on group 22 is dropped and counted.
//!
//! Any local process may send to `NETLINK_USERSOCK` group 22 (the protocol allows non-root
//! sends); only the kernel's messages carry sender port id 0. This test joins the group with a
//! [`CheckedNetlink`] (needs CAP_NET_ADMIN: skipped, with a note, without it), multicasts a
//! well-formed CREATE and an INSTALL from a second, ordinary netlink socket of the same process,
//! and checks that neither is delivered and both are counted as foreign. No kernel module is
//! needed: the multicast group exists without it.

use ccp_ipc::netlink::{bind_auto, open_usersock, send_framed, CCP_GROUP};
use ccp_ipc::CheckedNetlink;
use portus::ipc::Ipc;
use std::sync::atomic::Ordering;

fn create_msg() -> Vec<u8> {
    // CREATE: header (type 0, len, sid), 6 x u32, 64-byte algorithm name.
    let len: u16 = 8 + 24 + 64;
    let mut b = Vec::new();
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&0xdeadu32.to_le_bytes());
    for v in [14_480u32, 1448, 0x0a00_0001, 5201, 0x0a00_0002, 40_000] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    let mut name = [0u8; 64];
    name[..5].copy_from_slice(b"mltcp");
    b.extend_from_slice(&name);
    b
}

#[test]
fn forged_multicast_is_dropped_and_counted() {
    let agent = match CheckedNetlink::new() {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "skipped: cannot join netlink group {CCP_GROUP} here ({})",
                e.0
            );
            return;
        }
    };
    let counters = agent.counters();
    let forger = open_usersock().expect("netlink socket");
    bind_auto(&forger).expect("bind");
    let mut install = create_msg();
    install[0] = 2; // INSTALL: what crashes a stock portus agent
    for m in [create_msg(), install] {
        // Port id 0 has no kernel socket without the module: the unicast part may fail with
        // ECONNREFUSED after the multicast went out; the multicast is what matters.
        let _ = send_framed(&forger, &m, 1 << (CCP_GROUP - 1));
    }
    let mut buf = [0u8; 1024];
    let mut delivered = 0;
    // Other group-22 traffic on this machine (another agent's test) may interleave: read until
    // both forged messages were seen, bounded by the socket's 1 s timeout per read.
    for _ in 0..20 {
        if agent.recv(&mut buf).is_ok() {
            delivered += 1;
        }
        if counters.foreign.load(Ordering::Relaxed) >= 2 {
            break;
        }
    }
    assert_eq!(delivered, 0, "a forged message was delivered");
    assert!(
        counters.foreign.load(Ordering::Relaxed) >= 2,
        "{counters:?}"
    );
    assert!(ccp_ipc::netlink::DROPPED_FOREIGN.load(Ordering::Relaxed) >= 2);
}
