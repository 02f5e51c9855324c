// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Generates the gRPC stubs of the `Switch` and `Agent` services with tonic-build's manual
//! (protoc-free) path: the messages are prost-derived structs written by hand in
//! `src/proto.rs`, whose doc comment carries the equivalent `.proto` schema.

fn method(name: &str, route: &str, input: &str, output: &str) -> tonic_build::manual::Method {
    tonic_build::manual::Method::builder()
        .name(name)
        .route_name(route)
        .input_type(format!("crate::proto::{input}"))
        .output_type(format!("crate::proto::{output}"))
        .codec_path("tonic_prost::ProstCodec")
        .build()
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let switch = tonic_build::manual::Service::builder()
        .name("Switch")
        .package("mlcc.v1")
        .method(method(
            "fetch_feedback",
            "FetchFeedback",
            "FeedbackRequest",
            "FeedbackReply",
        ))
        .method(method(
            "update_schedule",
            "UpdateSchedule",
            "ScheduleUpdate",
            "UpdateReply",
        ))
        .method(method("pcn_start", "PcnStart", "PcnStart", "PcnAck"))
        .method(method("pcn_end", "PcnEnd", "PcnEnd", "PcnAck"))
        .build();
    let agent = tonic_build::manual::Service::builder()
        .name("Agent")
        .package("mlcc.v1")
        .method(method(
            "notify",
            "Notify",
            "DependencyNotice",
            "NoticeReply",
        ))
        .method(method("status", "Status", "StatusRequest", "StatusReply"))
        .build();
    tonic_build::manual::Builder::new().compile(&[switch, agent]);
}
