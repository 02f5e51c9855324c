// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The C ABI from C: compiles `tests/c/progress_test.c` against `include/progress.h` and the
//! crate's static library with `cc`, runs it, and plays the agent against it through the Rust
//! reader (checks what the C side wrote, attaches, grants one burst and lets another time out).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_ring_worker, scan_one, staticlib, TempDir};
use mltcp_progress::FlowKind;

/// Compiles the C test program into `out_dir`; returns the binary.
fn compile(out_dir: &Path) -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = out_dir.join("progress_test");
    let out = Command::new("cc")
        .args([
            "-std=c11",
            "-D_DEFAULT_SOURCE",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-O1",
            "-I",
        ])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/progress_test.c"))
        .arg(staticlib())
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s", "-o"])
        .arg(&bin)
        .output()
        .expect("run cc (Debian: apt-get install gcc)");
    assert!(
        out.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// The header also compiles as C++ (NCCL and libzmq are C++) and pedantic C99.
#[test]
fn header_compiles_as_cxx_and_c99() {
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    for (compiler, args) in [
        ("c++", ["-x", "c++", "-std=c++11"]),
        ("cc", ["-x", "c", "-std=c99"]),
    ] {
        let out = Command::new(compiler)
            .args(args)
            .args(["-Wall", "-Wextra", "-pedantic", "-Werror", "-fsyntax-only", "-"])
            .arg("-I")
            .arg(&include)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                c.stdin.take().unwrap().write_all(b"#include \"progress.h\"\nint main(void) { return (int)mltcp_progress_abi_version(); }\n")?;
                c.wait_with_output()
            })
            .unwrap_or_else(|e| panic!("run {compiler}: {e}"));
        assert!(
            out.status.success(),
            "{compiler} {args:?}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn c_program_reports_through_progress_h() {
    let dir = TempDir::new("c-abi");
    let bin = compile(dir.path());
    let regions = dir.path().join("regions");
    let mut child = Command::new(&bin)
        .arg(&regions)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || lines.next().expect("C program output").unwrap();

    let ready = next();
    let port: u16 = ready
        .strip_prefix("READY ")
        .unwrap_or_else(|| panic!("got {ready:?}"))
        .parse()
        .unwrap();

    // What the C side wrote, through the agent's reader.
    let (mut s, snap) = scan_one(&regions, "cjob.1.region");
    let b = &snap.body;
    assert_ring_worker(b, ("cjob", 1, 3), (0, 2, 3_000_000));
    assert_eq!(b.flows.len(), 2);
    assert_eq!(b.flows[0].local(), "10.0.0.1:40000".parse().unwrap());
    assert_eq!(b.flows[0].remote(), "10.0.0.2:5000".parse().unwrap());
    assert_eq!(
        (FlowKind::from_raw(b.flows[0].kind), b.flows[0].peer_rank),
        (Some(FlowKind::RingSend), 2)
    );
    assert_eq!(
        b.flows[1].local(),
        format!("127.0.0.1:{port}").parse().unwrap()
    );
    assert_eq!(
        b.flows[1].remote().ip(),
        std::net::IpAddr::from([127, 0, 0, 1])
    );
    assert_eq!(
        FlowKind::from_raw(b.flows[1].kind),
        Some(FlowKind::RingRecv)
    );
    assert_eq!(
        (b.hot.iteration, b.hot.iter_bytes, b.hot.total_bytes),
        (42, 1234, 2233)
    );
    assert_eq!(
        b.hot.burst_requests, 1,
        "the no-agent call still counts as a request"
    );
    let region = s.region(&regions.join("cjob.1.region")).unwrap();
    assert_eq!(region.header().writer_pid, child.id());

    // The dump tool shows the same.
    let dump = Command::new(env!("CARGO_BIN_EXE_mltcp-progress-dump"))
        .arg(&regions)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&dump.stdout);
    assert!(dump.status.success(), "{text}");
    assert!(
        text.contains("job=cjob rank=1 world=3 paradigm=Ring role=Worker pred=0 succ=2"),
        "{text}"
    );
    assert!(
        text.contains("iteration=42 iter_bytes=1234 total_bytes=2233"),
        "{text}"
    );
    assert!(
        text.contains("flow 10.0.0.1:40000 -> 10.0.0.2:5000 kind=RingSend peer_rank=2"),
        "{text}"
    );

    // Attach, and grant the next request.
    region.attach(std::process::id()).unwrap();
    writeln!(stdin, "go").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let snap = region.snapshot().unwrap();
        if snap.body.hot.burst_requests == 2 {
            region.grant_bursts(2).unwrap();
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no burst request from the C side"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(next(), "BURST 0");
    // The next request is not granted: 20 ms timeout.
    writeln!(stdin, "go").unwrap();
    assert_eq!(next(), "BURST 2");
    assert_eq!(next(), "CLOSED");
    assert!(child.wait().unwrap().success());
    // Closed: the file is gone and the scanner drops it.
    assert_eq!(s.scan().unwrap().removed.len(), 1);
}
