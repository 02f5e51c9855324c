// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Compiles the gRPC schema `proto/mlcc.proto` (package `mlcc.v1`: the `Switch` and `Agent`
//! services and their messages) into prost messages and tonic clients and servers, included
//! by `src/proto.rs`. `protox` parses the schema in Rust, so no `protoc` is needed.

use std::error::Error;

const SCHEMA: &str = "proto/mlcc.proto";

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={SCHEMA}");
    let descriptors =
        protox::compile([SCHEMA], ["proto"]).map_err(|e| format!("compiling {SCHEMA}: {e:?}"))?;
    tonic_prost_build::configure()
        .compile_fds(descriptors)
        .map_err(|e| format!("generating the gRPC code of {SCHEMA}: {e}"))?;
    Ok(())
}
