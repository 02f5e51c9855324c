// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The binary: a bad config refuses to start, naming file, field and value; SIGTERM closes the
//! datapath socket and exits cleanly; `status` reads a running agent.

mod common;

use common::{program_file, TempDir};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ccp-agent");

#[test]
fn bad_config_refuses_to_start() {
    let t = TempDir::new("cli");
    t.write("topo.toml", "[[link]]\nid = 1\ncapacity_mbps = -5\n");
    let p = t.write(
        "agent.toml",
        &format!(
            "topology = \"topo.toml\"\nhosts = [\"h1\"]\nprogram = {:?}\n",
            program_file().display().to_string()
        ),
    );
    let out = Command::new(BIN)
        .args(["run", "--ipc", "unix", "--config"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("topo.toml") && err.contains("line 3") && err.contains("-5"),
        "{err}"
    );
    let out = Command::new(BIN)
        .args(["run", "--ipc", "unix", "--slot-ms", "0", "--config"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn sigterm_closes_the_datapath_socket() {
    let t = TempDir::new("cli");
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let name = format!("cli-{}", std::process::id());
    t.write("topo.toml", &format!("[[link]]\nid = 1\ncapacity_mbps = 100\n[[host]]\nname = \"h1\"\naddrs = [\"10.0.0.1\"]\nnic = 1\nagent = \"{addr}\"\n"));
    let p = t.write(
        "agent.toml",
        &format!(
            "topology = \"topo.toml\"\nhosts = [\"h1\"]\nprogram = {:?}\nunix_name = {name:?}\nprogress_dir = {:?}\n",
            program_file().display().to_string(),
            t.0.join("progress").display().to_string()
        ),
    );
    let mut child = Command::new(BIN)
        .args(["run", "--ipc", "unix", "--slot-ms", "20", "--config"])
        .arg(&p)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sock = std::path::PathBuf::from(format!("/tmp/ccp/{name}"));
    let t0 = Instant::now();
    while !sock.exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(sock.exists(), "the agent bound its socket");
    // `status` reads it.
    let mut ok = false;
    for _ in 0..50 {
        let out = Command::new(BIN)
            .args(["status", "--agent", &addr.to_string()])
            .output()
            .unwrap();
        if out.status.success() && String::from_utf8_lossy(&out.stdout).contains("nic-only") {
            ok = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ok, "status answered");
    let pid = child.id() as libc::pid_t;
    // SAFETY: Sends SIGTERM to the child we spawned (still running: not yet waited for).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the agent did not stop"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "{status:?}");
    assert!(!sock.exists(), "socket closed and removed");
}
