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

/// A well-formed CREATE (sid 0xdead, 10.0.0.1:5201 -> 10.0.0.2:40000, "mltcp") written by the
/// project's wire writer, its type byte then set to `typ` (0 CREATE, 2 INSTALL).
fn forged(typ: u8) -> Vec<u8> {
    let mut c = ccp_datapath::wire::Create {
        sid: 0xdead,
        init_cwnd: 14_480,
        mss: 1448,
        src_ip: 0x0100_000a,
        src_port: 0x5114,
        dst_ip: 0x0200_000a,
        dst_port: 0x409c,
        alg: [0; ccp_datapath::wire::ALG_NAME_LEN],
    };
    c.set_alg_name(b"mltcp").unwrap();
    let mut b = vec![0u8; ccp_datapath::wire::CREATE_LEN];
    c.write(&mut b).unwrap();
    b[0] = typ;
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
    let mut forger = open_usersock().expect("netlink socket");
    bind_auto(&mut forger).expect("bind");
    let mut install = forged(0);
    install[0] = 2; // INSTALL: what crashes a stock portus agent
    for m in [forged(0), install] {
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
