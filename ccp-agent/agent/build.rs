// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Compiles the services of the gRPC schema `../core/proto/mlcc.proto` (package `mlcc.v1`: the
//! `Switch` and `Agent` services) into tonic clients and servers, included by `src/proto.rs`.
//! The messages are not generated here: every `.mlcc.v1` type is the agent core's
//! (`mlcc_agent_core::proto`, prost only), so each message has one Rust definition. `protox`
//! parses the schema in Rust, so no `protoc` is needed.

use std::error::Error;

const SCHEMA_DIR: &str = "../core/proto";
const SCHEMA: &str = "../core/proto/mlcc.proto";

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={SCHEMA}");
    let descriptors = protox::compile([SCHEMA], [SCHEMA_DIR])
        .map_err(|e| format!("compiling {SCHEMA}: {e:?}"))?;
    tonic_prost_build::configure()
        .extern_path(".mlcc.v1", "::mlcc_agent_core::proto")
        .compile_fds(descriptors)
        .map_err(|e| format!("generating the gRPC code of {SCHEMA}: {e}"))?;
    Ok(())
}
