// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The C that the NCCL and libzmq patches add (`patches/nccl/`, `patches/libzmq/`), compiled
//! standalone against `include/progress.h` and this crate's static library, and run.
//!
//! NCCL cannot be built here (it needs CUDA) and libzmq takes minutes (`ci/build-libzmq.sh` does
//! that), so this test takes the hook files out of the patches themselves, checks that both patches
//! carry the same hook as `patches/common/`, compiles it as C++ (as both libraries do) with
//! `-DMLTCP_HOOK_PROGRESS`, links `tests/c/hook_smoke.c` to it, runs it, and reads what it
//! reported through the agent's reader.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{assert_ring_worker, scan_one, staticlib, TempDir};
use mltcp_progress::FlowKind;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The content of the file `path` that the unified diff `patch` creates (`new file mode`).
fn added_file(patch: &str, path: &str) -> String {
    let header = format!("diff --git a/{path} b/{path}\n");
    let start = patch
        .find(&header)
        .unwrap_or_else(|| panic!("the patch does not touch {path}"));
    let rest = &patch[start + header.len()..];
    let end = rest.find("\ndiff --git ").map_or(rest.len(), |e| e + 1);
    let section = &rest[..end];
    assert!(
        section.starts_with("new file mode"),
        "{path}: not a new file in the patch"
    );
    let mut out = String::new();
    let mut in_hunk = false;
    for line in section.lines() {
        if line.starts_with("@@ ") {
            in_hunk = true;
        } else if in_hunk {
            let body = line
                .strip_prefix('+')
                .unwrap_or_else(|| panic!("{path}: unexpected line in a new file: {line:?}"));
            out.push_str(body);
            out.push('\n');
        }
    }
    out
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

const NCCL_PATCH: &str = "patches/nccl/nccl-v2.30.7-1-mltcp.patch";
const LIBZMQ_PATCH: &str = "patches/libzmq/libzmq-4.3.5-mltcp.patch";

/// Both patches add the one hook of `patches/common/`, unchanged.
#[test]
fn patches_carry_the_common_hook() {
    let r = repo();
    let h = read(&r.join("patches/common/mltcp_hook.h"));
    let c = read(&r.join("patches/common/mltcp_hook.c"));
    let nccl = read(&r.join(NCCL_PATCH));
    let zmq = read(&r.join(LIBZMQ_PATCH));
    for (patch, name, path, want) in [
        (&nccl, "NCCL", "src/include/mltcp_hook.h", &h),
        (&nccl, "NCCL", "src/misc/mltcp_hook.cc", &c),
        (&zmq, "libzmq", "src/mltcp_hook.h", &h),
        (&zmq, "libzmq", "src/mltcp_hook.cpp", &c),
    ] {
        assert!(
            added_file(patch, path) == *want,
            "{name} patch: {path} differs from patches/common/ (regenerate the patch)"
        );
    }
    // The insertion points the docs describe are in the patches.
    for needle in [
        "+  if (sock->type == ncclSocketTypeNetSocket) (void)mltcp_hook_set_cc(",
        "+  ncclMltcpReportEnqueue(info);",
    ] {
        assert!(nccl.contains(needle), "NCCL patch lacks {needle:?}");
    }
    for needle in [
        "+    mltcp_tune (s_);",
        "+    mltcp_hook_sent (s_, static_cast<long> (nbytes));",
    ] {
        assert!(zmq.contains(needle), "libzmq patch lacks {needle:?}");
    }
}

/// Compiles the hook as the libraries do (C++, with and without progress) and runs the smoke
/// program against the progress library.
#[test]
fn hook_sets_cc_and_reports_progress() {
    let dir = TempDir::new("lib-patches");
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let nccl = read(&repo().join(NCCL_PATCH));
    std::fs::write(
        src.join("mltcp_hook.h"),
        added_file(&nccl, "src/include/mltcp_hook.h"),
    )
    .unwrap();
    std::fs::write(
        src.join("mltcp_hook.cc"),
        added_file(&nccl, "src/misc/mltcp_hook.cc"),
    )
    .unwrap();
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");

    let cxx = |defs: &[&str], out: &Path| {
        let o = Command::new("c++")
            .args([
                "-x",
                "c++",
                "-std=c++11",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-fPIC",
                "-O1",
                "-c",
            ])
            .args(defs)
            .arg("-I")
            .arg(&src)
            .arg("-I")
            .arg(&include)
            .arg(src.join("mltcp_hook.cc"))
            .arg("-o")
            .arg(out)
            .output()
            .expect("run c++ (Debian: apt-get install g++)");
        assert!(
            o.status.success(),
            "c++ {defs:?}:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    // Without the progress library (a build without MLTCP_PROGRESS) it compiles too.
    cxx(&[], &dir.path().join("hook_plain.o"));
    let obj = dir.path().join("hook.o");
    cxx(&["-DMLTCP_HOOK_PROGRESS"], &obj);

    let bin = dir.path().join("hook_smoke");
    let o = Command::new("cc")
        .args([
            "-std=c11",
            "-D_DEFAULT_SOURCE",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-O1",
            "-I",
        ])
        .arg(&src)
        .arg("-I")
        .arg(&include)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/hook_smoke.c"))
        .arg(&obj)
        .arg(staticlib())
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s", "-o"])
        .arg(&bin)
        .output()
        .expect("run cc");
    assert!(
        o.status.success(),
        "cc:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let regions = dir.path().join("regions");
    let mut child = Command::new(&bin)
        // reno is always available and always allowed; the other name never exists.
        .args(["reno", "no_such_cc"])
        .env("MLTCP_PROGRESS_DIR", &regions)
        .env("MLTCP_JOB_ID", "hookjob")
        .env("MLTCP_BYTES_PER_ITER", "1000")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines.next().expect("hook_smoke output").unwrap();
    // 600 | 400 -> iteration 1 | 200 + 600: iteration 1, 800 bytes in it.
    assert_eq!(ready, "READY 1 800");

    let (_, snap) = scan_one(&regions, "hookjob.2.region");
    let b = &snap.body;
    assert_ring_worker(b, ("hookjob", 2, 4), (1, 3, 1000));
    assert_eq!(
        (b.hot.iteration, b.hot.iter_bytes, b.hot.total_bytes),
        (1, 800, 1800)
    );
    assert_eq!(b.flows.len(), 1);
    assert_eq!(
        FlowKind::from_raw(b.flows[0].kind),
        Some(FlowKind::RingSend)
    );
    assert_eq!(b.flows[0].peer_rank, 3);
    assert_eq!(
        b.flows[0].remote().ip(),
        std::net::IpAddr::from([127, 0, 0, 1])
    );

    writeln!(stdin, "go").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "CLOSED");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // The refused algorithm is reported once, for two refusals.
    assert_eq!(err.matches("TCP_CONGESTION").count(), 1, "{err}");
    assert!(
        err.contains("smoke mltcp: setsockopt(TCP_CONGESTION, \"no_such_cc\") failed"),
        "{err}"
    );
}

/// Each library's README records the hashes of its `SHA256SUMS.*` files (what
/// `patches/check-patch.sh` checks), so the page cannot drift from the patch.
#[test]
fn readmes_record_the_patch_hashes() {
    for lib in ["nccl", "libzmq"] {
        let dir = repo().join("patches").join(lib);
        let readme = read(&dir.join("README.md"));
        for sums in ["SHA256SUMS.base", "SHA256SUMS.patched"] {
            for line in read(&dir.join(sums)).lines() {
                let (hash, file) = line.split_once("  ").expect("sha256sum line");
                assert!(
                    readme.contains(hash),
                    "patches/{lib}/README.md lacks the {sums} hash of {file}"
                );
            }
        }
    }
}
