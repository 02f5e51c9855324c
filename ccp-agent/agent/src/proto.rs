// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The gRPC services between agents and switch daemons (package `mlcc.v1`) and, re-exported
//! from the agent core ([`mlcc_agent_core::proto`], which documents the protocol: "Dynamic Flow
//! Scheduling for DNN Training Workloads in Data Centers", Sec. IV-A and IV-C, and PCN), their
//! messages.
//!
//! The schema is the core's `proto/mlcc.proto`, the one definition of this wire. The core
//! compiles its messages with prost alone; `build.rs` (protox and tonic-prost-build, no protoc)
//! compiles its services over those structs (`extern_path`), so each message has one Rust
//! definition: the `Switch` client and server ([`switch_client`], [`switch_server`]) and the
//! `Agent` ones ([`agent_client`], [`agent_server`]).

/// The services generated from the core's `proto/mlcc.proto`.
#[allow(clippy::all, clippy::pedantic, unused_qualifications)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/mlcc.v1.rs"));
}

pub use generated::*;
pub use mlcc_agent_core::proto::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_those_of_package_mlcc_v1() {
        let code = include_str!(concat!(env!("OUT_DIR"), "/mlcc.v1.rs"));
        for route in [
            "/mlcc.v1.Switch/FetchFeedback",
            "/mlcc.v1.Switch/UpdateSchedule",
            "/mlcc.v1.Switch/PcnStart",
            "/mlcc.v1.Switch/PcnEnd",
            "/mlcc.v1.Agent/Notify",
            "/mlcc.v1.Agent/Status",
        ] {
            assert!(code.contains(&format!("\"{route}\"")), "no route {route}");
        }
        assert_eq!(switch_server::SERVICE_NAME, "mlcc.v1.Switch");
        assert_eq!(agent_server::SERVICE_NAME, "mlcc.v1.Agent");
    }

    #[test]
    fn the_services_carry_the_cores_messages() {
        let code = include_str!(concat!(env!("OUT_DIR"), "/mlcc.v1.rs"));
        assert!(
            !code.contains("::prost::Message)]"),
            "a message was generated here, a second definition of the core's"
        );
        assert!(code.contains("::mlcc_agent_core::proto::FeedbackRequest"));
    }
}
