// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The agent on netlink drops and counts messages not sent by the kernel, and survives them.
//!
//! Any local process may multicast on `NETLINK_USERSOCK` group 22. This test runs an agent with
//! `--ipc netlink` (needs root or CAP_NET_ADMIN in the initial network namespace: skipped, with a
//! note, elsewhere; no kernel module is needed), multicasts a MEASURE, an UPDATE_FIELDS (which
//! reaches `unimplemented!()` in a stock portus agent) and a READY from another socket, and
//! checks that the agent counted all three as foreign in its status, created no flow, and still
//! answers. (`ccp-ipc`'s own test forges CREATE and INSTALL.)

mod common;

use ccp_agent::config::AgentConfig;
use ccp_agent::run::{run_agent, IpcKind, RunOptions};
use ccp_ipc::netlink::{bind_auto, open_usersock, send_framed, CCP_GROUP};
use common::{program_file, TempDir};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Forged datapath messages: a MEASURE for socket 1 (written by the project's wire writer),
/// the same bytes typed UPDATE_FIELDS (portus: `unimplemented!()`), and a READY (portus would
/// re-install its programs).
fn forged() -> Vec<Vec<u8>> {
    let mut m = [0u8; 64];
    let n = ccp_datapath::wire::write_measure(&mut m, 1, 1, &[1448, 1000]).unwrap();
    let mut update = m[..n].to_vec();
    update[0] = 3;
    let ready = [5u8, 0, 12, 0, 0, 0, 0, 0, 1, 0, 0, 0].to_vec();
    vec![m[..n].to_vec(), update, ready]
}

#[test]
fn forged_multicast_is_dropped_counted_and_survived() {
    if let Err(e @ ccp_ipc::NetnsError::NotInitial { .. }) = ccp_ipc::check_initial_netns() {
        eprintln!("skipped: {e}");
        return;
    }
    if let Err(e) = ccp_ipc::CheckedNetlink::new() {
        eprintln!(
            "skipped: cannot join netlink group {CCP_GROUP} here ({})",
            e.0
        );
        return;
    }
    let tmp = TempDir::new("forge");
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    tmp.write(
        "topo.toml",
        &format!("slot_ms = 20\n[[link]]\nid = 1\ncapacity_mbps = 100\n[[host]]\nname = \"h1\"\naddrs = [\"10.0.0.1\"]\nnic = 1\nagent = \"{addr}\"\n"),
    );
    let p = tmp.write(
        "agent.toml",
        &format!(
            "topology = \"topo.toml\"\nhosts = [\"h1\"]\nprogram = {:?}\nprogress_dir = {:?}\n",
            program_file().display().to_string(),
            tmp.0.join("progress").display().to_string()
        ),
    );
    let cfg = AgentConfig::load(&p, None, None).unwrap();
    let stop = Arc::new(AtomicBool::new(true));
    let (tx, rx) = std::sync::mpsc::channel();
    let opts = RunOptions {
        ipc: IpcKind::Netlink,
        listener: Some(l),
        stop: stop.clone(),
        shared_out: Some(tx),
    };
    let agent = std::thread::spawn(move || run_agent(cfg, opts));
    let shared = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("agent started");
    // Wait until the agent's socket is in the group (it reports a first slot).
    let t0 = Instant::now();
    while shared.status().slot == 0 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut forger = open_usersock().unwrap();
    bind_auto(&mut forger).unwrap();
    for msg in forged() {
        // No kernel socket at port id 0 without the module: the unicast part may fail after the
        // multicast went out.
        let _ = send_framed(&forger, &msg, 1 << (CCP_GROUP - 1));
    }
    let t0 = Instant::now();
    while shared.status().dropped_foreign < 3 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let st = shared.status();
    assert!(st.dropped_foreign >= 3, "{st:?}");
    assert_eq!(
        (st.flows.len(), st.native_flows),
        (0, 0),
        "a forged message made a flow: {st:?}"
    );
    assert!(
        !agent.is_finished(),
        "the agent survived the forged INSTALL"
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert!(rt.block_on(ccp_agent::status::agent_status(addr)).is_ok());
    stop.store(false, Ordering::SeqCst);
    agent.join().unwrap().unwrap();
}
