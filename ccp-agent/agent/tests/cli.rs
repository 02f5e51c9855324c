// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The binary: a bad config refuses to start, naming file, field and value, with exit status 78
//! (EX_CONFIG, which the systemd units do not restart on), and `check` says the same without
//! starting; SIGTERM closes the datapath socket and exits cleanly; `status` reads a running agent.

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
    assert_eq!(out.status.code(), Some(78));
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
    assert_eq!(out.status.code(), Some(78));
    // `check` finds the same fault without starting anything, in both files.
    for flag in ["--config", "--topology"] {
        let file = if flag == "--config" {
            p.clone()
        } else {
            t.0.join("topo.toml")
        };
        let (code, _, err) = check(&[flag], &file, None);
        assert_eq!(code, Some(78), "{flag}");
        assert!(
            err.contains("topo.toml") && err.contains("-5"),
            "{flag}: {err}"
        );
    }
    t.write("topo.toml", "[[link]]\nid = 1\ncapacity_mbps = 100\n[[host]]\nname = \"h1\"\naddrs = [\"10.0.0.1\"]\nnic = 1\nagent = \"127.0.0.1:50061\"\n");
    let (code, stdout, err) = check(&["--config"], &p, None);
    assert_eq!(code, Some(0), "{err}");
    assert!(stdout.contains("valid"), "{stdout}");
    // --host / CCP_AGENT_HOSTS replace the file's `hosts` (one agent.toml for every node).
    let (code, _, err) = check(&["--host", "h9", "--config"], &p, None);
    assert_eq!(code, Some(78));
    assert!(err.contains("\"h9\"") && err.contains("--host"), "{err}");
    let (code, _, err) = check(&["--config"], &p, Some("h1"));
    assert_eq!(code, Some(0), "{err}");
}

/// `ccp-agent check ARGS FILE` (with CCP_AGENT_HOSTS when given): exit code, stdout, stderr.
fn check(
    args: &[&str],
    file: &std::path::Path,
    hosts_env: Option<&str>,
) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.arg("check")
        .args(args)
        .arg(file)
        .env_remove("CCP_AGENT_HOSTS");
    if let Some(h) = hosts_env {
        cmd.env("CCP_AGENT_HOSTS", h);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
