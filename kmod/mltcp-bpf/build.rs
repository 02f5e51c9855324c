// kmod/mltcp-bpf/build.rs: writes mltcp_consts.h from mltcp-math (the one definition of the
// constants the BPF C shares with the Rust math), then compiles bpf/mltcp.bpf.c with clang for
// the BPF target (CO-RE, BTF) and generates its libbpf-rs skeleton, both into OUT_DIR.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_cargo::SkeletonBuilder;

/// The directory of the multiarch C headers (`asm/types.h` for `linux/types.h`), which clang's
/// BPF target does not search by itself: `/usr/include/<triple>` as gcc reports it.
fn multiarch_include() -> Option<PathBuf> {
    let out = Command::new("gcc").arg("-print-multiarch").output().ok()?;
    let triple = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    let dir = Path::new("/usr/include").join(triple);
    dir.is_dir().then_some(dir)
}

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut header = String::new();
    mltcp_math::c_header::write_c_header(&mut header).expect("writing to a String cannot fail");
    fs::write(out.join("mltcp_consts.h"), header).expect("cannot write mltcp_consts.h to OUT_DIR");

    let src = Path::new("bpf/mltcp.bpf.c");
    let mut args = vec![
        format!("-I{}", out.display()),
        "-Ibpf".to_owned(),
        "-Wall".to_owned(),
        "-Werror".to_owned(),
    ];
    if let Some(dir) = multiarch_include() {
        args.push(format!("-I{}", dir.display()));
    }
    SkeletonBuilder::new()
        .source(src)
        .clang_args(&args)
        .build_and_generate(out.join("mltcp.skel.rs"))
        .unwrap_or_else(|e| {
            panic!(
                "compiling {} for BPF failed (needs clang and libelf/zlib headers; ci/deps.sh installs them): {e:#}",
                src.display()
            )
        });
    for f in [
        "bpf/mltcp.bpf.c",
        "bpf/mltcp_math.h",
        "bpf/mltcp_kern.h",
        "bpf/mltcp_slot.h",
        "bpf/mltcp_agent.h",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    println!("cargo:rerun-if-changed=../mltcp-math/src");
}
