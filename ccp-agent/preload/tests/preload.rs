// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `libmltcp_preload.so` on real loopback connections: this test binary re-runs itself (test
//! `child_probe`) under `LD_PRELOAD` with the shim's environment, makes two connections through
//! std's `connect`/`accept4`, and prints the congestion control of both ends of each; the parent
//! tests check them against the request and the system default. User-space tests use `reno` or
//! `cubic` (whichever is not the default): `mltcp` is a kernel module this host has not loaded.

use std::ffi::c_int;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;

/// The shim cargo built for this test (`target/<profile>/` or its `deps/`).
fn shim() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for d in [deps.parent().unwrap(), deps] {
        let p = d.join("libmltcp_preload.so");
        if p.exists() {
            return p;
        }
    }
    panic!("libmltcp_preload.so not found near {}", exe.display());
}

/// The congestion control of socket `fd`.
fn cc_of(fd: c_int) -> String {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf`/`len` describe a writable 16-byte buffer, the size of TCP_CONGESTION names.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    assert_eq!(
        r,
        0,
        "getsockopt(TCP_CONGESTION): {}",
        std::io::Error::last_os_error()
    );
    let s = &buf[..len as usize];
    String::from_utf8_lossy(&s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())]).into_owned()
}

fn read_proc(name: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}"))
        .unwrap()
        .trim()
        .to_string()
}

/// The system default, and another algorithm this process may set: available, and for a
/// process without CAP_NET_ADMIN also in the allowed list.
fn default_and_other() -> (String, String) {
    let default = read_proc("tcp_congestion_control");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let usable = read_proc(if root {
        "tcp_available_congestion_control"
    } else {
        "tcp_allowed_congestion_control"
    });
    let other = ["reno", "cubic"]
        .into_iter()
        .find(|a| *a != default && usable.split_whitespace().any(|x| x == *a))
        .expect("reno or cubic usable besides the default");
    (default, other.to_string())
}

/// The child: two loopback connections, one line "CC <client> <server>" each.
#[test]
fn child_probe() {
    if std::env::var_os("MLTCP_PRELOAD_CHILD").is_none() {
        return; // only meaningful when run by the tests below
    }
    let port: u16 = std::env::var("MLTCP_TEST_PORT")
        .map(|p| p.parse().unwrap())
        .unwrap_or(0);
    let host = std::env::var("MLTCP_TEST_HOST").unwrap_or_else(|_| "127.0.0.1".into());
    let l = TcpListener::bind((host.as_str(), port)).unwrap();
    let addr = l.local_addr().unwrap();
    for _ in 0..2 {
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        println!("CC {} {}", cc_of(c.as_raw_fd()), cc_of(s.as_raw_fd()));
    }
}

struct Run {
    /// (client, server) algorithm per connection.
    ccs: Vec<(String, String)>,
    /// The shim's stderr lines.
    logs: Vec<String>,
}

/// Runs `child_probe` under the shim with `env`, listening on 127.0.0.1 port `port`.
fn run(env: &[(&str, &str)], port: u16) -> Run {
    run_on("127.0.0.1", env, port)
}

/// Runs `child_probe` under the shim with `env`, listening on `host` port `port`.
fn run_on(host: &str, env: &[(&str, &str)], port: u16) -> Run {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["child_probe", "--exact", "--nocapture", "--test-threads=1"])
        .env("LD_PRELOAD", shim())
        .env("MLTCP_PRELOAD_CHILD", "1")
        .env("MLTCP_TEST_PORT", port.to_string())
        .env("MLTCP_TEST_HOST", host);
    for k in [
        "MLTCP_CC",
        "MLTCP_PORTS",
        "MLTCP_DSTS",
        "MLTCP_PRELOAD_DEBUG",
    ] {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    let ccs: Vec<(String, String)> = stdout
        .lines()
        // (libtest prints "test child_probe ... " before the first line, without a newline.)
        .filter_map(|l| l.split_once("CC ").map(|(_, rest)| rest))
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (a.to_string(), b.to_string())
        })
        .collect();
    assert_eq!(ccs.len(), 2, "child output:\n{stdout}\n{stderr}");
    let logs = stderr
        .lines()
        .filter(|l| l.starts_with("mltcp-preload:"))
        .map(str::to_string)
        .collect();
    Run { ccs, logs }
}

/// A port free right now (the child binds it next).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn assert_all(r: &Run, want: &str) {
    for (c, s) in &r.ccs {
        assert_eq!((c.as_str(), s.as_str()), (want, want), "logs: {:?}", r.logs);
    }
}

#[test]
fn sets_the_requested_algorithm_on_connect_and_accept() {
    let (default, other) = default_and_other();
    let r = run(&[("MLTCP_CC", &other)], free_port());
    assert_all(&r, &other);
    assert!(r.logs.is_empty(), "{:?}", r.logs);
    // Without the variable set, nothing else changes: the child's sockets default otherwise.
    let r = run(&[("MLTCP_CC", "none")], free_port());
    assert_all(&r, &default);
}

#[test]
fn port_filter() {
    let (default, other) = default_and_other();
    let port = free_port();
    let ports = format!("1-2, {}-{}", port, port.saturating_add(3));
    let r = run(&[("MLTCP_CC", &other), ("MLTCP_PORTS", &ports)], port);
    assert_all(&r, &other);
    let port = free_port();
    let r = run(&[("MLTCP_CC", &other), ("MLTCP_PORTS", "1-2")], port);
    assert_all(&r, &default);
}

#[test]
fn destination_filter() {
    let (default, other) = default_and_other();
    let r = run(
        &[("MLTCP_CC", &other), ("MLTCP_DSTS", "127.0.0.0/8")],
        free_port(),
    );
    assert_all(&r, &other);
    let r = run(
        &[("MLTCP_CC", &other), ("MLTCP_DSTS", "10.0.0.0/8,fd00::/8")],
        free_port(),
    );
    assert_all(&r, &default);
    // Both filters: both must match.
    let port = free_port();
    let r = run(
        &[
            ("MLTCP_CC", &other),
            ("MLTCP_DSTS", "10.0.0.0/8"),
            ("MLTCP_PORTS", &port.to_string()),
        ],
        port,
    );
    assert_all(&r, &default);
    let r = run(
        &[
            ("MLTCP_CC", &other),
            ("MLTCP_DSTS", "127.0.0.1"),
            ("MLTCP_PORTS", &port.to_string()),
        ],
        port,
    );
    assert_all(&r, &other);
}

#[test]
fn unknown_algorithm_keeps_the_default_and_says_so_once() {
    let (default, _) = default_and_other();
    let r = run(&[("MLTCP_CC", "nosuchcc")], free_port());
    assert_all(&r, &default);
    assert_eq!(r.logs.len(), 1, "{:?}", r.logs);
    assert!(
        r.logs[0].contains("TCP_CONGESTION=nosuchcc") && r.logs[0].contains("system default"),
        "{}",
        r.logs[0]
    );
}

#[test]
fn bad_filter_turns_the_shim_off_and_says_so() {
    let (default, other) = default_and_other();
    let r = run(
        &[("MLTCP_CC", &other), ("MLTCP_PORTS", "5000-x")],
        free_port(),
    );
    assert_all(&r, &default);
    assert_eq!(r.logs.len(), 1, "{:?}", r.logs);
    assert!(
        r.logs[0].contains("MLTCP_PORTS") && r.logs[0].contains("5000-x"),
        "{}",
        r.logs[0]
    );
}

#[test]
fn debug_logs_each_decision() {
    let (_, other) = default_and_other();
    let r = run(
        &[("MLTCP_CC", &other), ("MLTCP_PRELOAD_DEBUG", "1")],
        free_port(),
    );
    assert_all(&r, &other);
    // Two connections: a connect and an accept each.
    assert_eq!(r.logs.len(), 4, "{:?}", r.logs);
    assert!(
        r.logs.iter().any(|l| l.contains("connect fd"))
            && r.logs.iter().any(|l| l.contains("accept fd"))
    );
}

#[test]
fn ipv6_sockets() {
    let (default, other) = default_and_other();
    let Ok(l) = TcpListener::bind("[::1]:0") else {
        eprintln!("no IPv6 loopback here: skipped");
        return;
    };
    let port = l.local_addr().unwrap().port();
    drop(l);
    let r = run_on(
        "::1",
        &[("MLTCP_CC", &other), ("MLTCP_DSTS", "::1/128")],
        port,
    );
    assert_all(&r, &other);
    let r = run_on(
        "::1",
        &[("MLTCP_CC", &other), ("MLTCP_DSTS", "fd00::/8,127.0.0.0/8")],
        port,
    );
    assert_all(&r, &default);
}
