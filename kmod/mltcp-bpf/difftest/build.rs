// kmod/mltcp-bpf/difftest/build.rs: writes mltcp_consts.h from mltcp-math (as mltcp-bpf's
// build.rs does) and compiles the BPF program source for the host, through shim/harness.c and
// the shim headers standing in for libbpf's, into a static library this crate links.

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut header = String::new();
    mltcp_math::c_header::write_c_header(&mut header).expect("writing to a String cannot fail");
    fs::write(out.join("mltcp_consts.h"), header).expect("cannot write mltcp_consts.h to OUT_DIR");

    cc::Build::new()
        .file("shim/harness.c")
        // The shim's bpf/*.h first, so that they stand in for libbpf's.
        .include("shim")
        .include("../bpf")
        .include(&out)
        .warnings(true)
        .extra_warnings(false)
        .flag_if_supported("-Wno-unused-parameter")
        .warnings_into_errors(true)
        .compile("mltcp_bpf_user");

    for f in [
        "shim/harness.c",
        "shim/bpf/bpf_helpers.h",
        "shim/bpf/bpf_tracing.h",
        "shim/bpf/bpf_core_read.h",
        "../bpf/mltcp.bpf.c",
        "../bpf/mltcp_math.h",
        "../bpf/mltcp_kern.h",
        "../bpf/mltcp_slot.h",
        "../bpf/mltcp_agent.h",
        "shim/bpf/bpf_endian.h",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    println!("cargo:rerun-if-changed=../../mltcp-math/src");
}
