// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The gRPC messages between agents and switch daemons (package `mlcc.v1`), as plain prost
//! structs.
//!
//! The control protocol of "Dynamic Flow Scheduling for DNN Training Workloads in Data
//! Centers", Sec. IV-A and IV-C: every slot an agent fetches the load of the links its flows
//! cross for the next K slots (`FetchFeedback`), plans, and publishes each flow's new schedule
//! with its achieved rate (`UpdateSchedule`); an agent whose flow was capped by Alg. 2 tells the
//! receiver's agent (`Notify`), which cuts its successor flows by the excess. `Status` serves
//! `ccp-agent status`.
//!
//! `UpdateSchedule` is an admission: the switch clips each schedule to what is left on its links
//! at that moment (under its lock) and returns the admitted schedules, which the agent enforces,
//! so agents planning in the same slot cannot both take the same free bandwidth
//! (`mlcc_sched::LinkLoadTable::admit`).
//!
//! PCN ("Proactive Congestion Avoidance for Distributed Deep Learning", Sec. 3.1-3.2): before a
//! job's burst the agent sends `PcnStart` (the job's rank, its flows and their links, the PCN
//! threshold in bytes) to the switches on the path; the switch lowers the ECN marking threshold
//! of those links and acknowledges; the threshold comes back when the burst arrives (the flow's
//! next `UpdateSchedule` reports bytes in or after the start's slot), on `PcnEnd`, or when the
//! start times out.
//!
//! The schema is `proto/mlcc.proto`, the one definition of this wire; `build.rs` compiles its
//! messages (protox and prost-build, no protoc) into the structs re-exported here. The services
//! (tonic clients and servers) are not here: the agent generates them over these structs
//! (`ccp_agent::proto`), so the core's dependency tree holds no RPC runtime.
//!
//! Units: rates in bit/s, sizes in bytes, slots are numbers on the wall-clock grid
//! (`floor(unix_time_us / slot_us)`), flows are [`crate::flows::flow_id`]s of their 4-tuple.

/// The messages generated from `proto/mlcc.proto`.
#[allow(clippy::all, clippy::pedantic, unused_qualifications)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/mlcc.v1.rs"));
}

pub use generated::*;

/// Notice kinds of [`DependencyNotice::kind`].
pub mod notice_kind {
    /// A ring flow from `from_rank` to its successor `to_rank`.
    pub const RING: u32 = 1;
    /// A worker's aggregation (push) flow to the PS `to_rank`.
    pub const PS_AGGREGATION: u32 = 2;
    /// A PS's broadcast flow to the worker `to_rank`; `bound_bytes` is F_b^max of the PS.
    pub const PS_BROADCAST: u32 = 3;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs(flow: u64) -> FlowSchedule {
        FlowSchedule {
            flow,
            links: vec![3, 70_000],
            start_slot: 1 << 40,
            rates_bps: vec![10_000_000_000, 0, 1],
            achieved_bps: 123_456_789,
            achieved_slot: (1 << 40) - 1,
            app_limited: true,
        }
    }

    /// Every message with every field set, encoded.
    fn encoded() -> Vec<(&'static str, Vec<u8>)> {
        use prost::Message;
        vec![
            (
                "FeedbackRequest",
                FeedbackRequest {
                    links: vec![1, 300],
                    exclude_flows: vec![u64::MAX, 7],
                    slot: 99,
                }
                .encode_to_vec(),
            ),
            (
                "FeedbackReply",
                FeedbackReply {
                    start_slot: 5,
                    links: vec![LinkFeedback {
                        link: 2,
                        capacity_bps: 100_000_000,
                        estimate_bps: 90_000_000,
                        load_bps: vec![1, 2, 3],
                        ecn_threshold_bytes: 30_000,
                        pcn_outstanding: 4,
                    }],
                    flows: 6,
                    pcn_starts: 7,
                    pcn_expired: 8,
                    threshold_failures: 9,
                }
                .encode_to_vec(),
            ),
            (
                "ScheduleUpdate",
                ScheduleUpdate {
                    agent: "h1".into(),
                    slot: 11,
                    flows: vec![fs(12), fs(13)],
                }
                .encode_to_vec(),
            ),
            (
                "UpdateReply",
                UpdateReply {
                    accepted: 1,
                    errors: vec!["no link 9".into()],
                    admitted: vec![fs(14)],
                }
                .encode_to_vec(),
            ),
            (
                "PcnStart",
                PcnStart {
                    job: "j".into(),
                    rank: 3,
                    flows: vec![15, 16],
                    links: vec![1],
                    threshold_bytes: 20_000,
                    agent: "h2".into(),
                }
                .encode_to_vec(),
            ),
            (
                "PcnEnd",
                PcnEnd {
                    job: "j".into(),
                    rank: 4,
                }
                .encode_to_vec(),
            ),
            (
                "PcnAck",
                PcnAck {
                    ecn_links: 2,
                    errors: vec!["tc".into()],
                }
                .encode_to_vec(),
            ),
            (
                "DependencyNotice",
                DependencyNotice {
                    job: "ring".into(),
                    from_rank: 1,
                    to_rank: 2,
                    kind: 3,
                    slot: 17,
                    iteration: 18,
                    accumulated_bytes: 1 << 33,
                    bound_bytes: 19,
                }
                .encode_to_vec(),
            ),
            (
                "NoticeReply",
                NoticeReply { reduced_bytes: 20 }.encode_to_vec(),
            ),
            ("StatusRequest", StatusRequest {}.encode_to_vec()),
            (
                "StatusReply",
                StatusReply {
                    slot: 21,
                    slot_us: 60_000,
                    mode: "switch".into(),
                    flows: vec![FlowStatus {
                        job: "j".into(),
                        rank: 1,
                        src: "10.0.0.1:5201".into(),
                        dst: "10.0.0.2:40000".into(),
                        flow: 22,
                        scheduled_bps: 23,
                        achieved_bps: 24,
                        remaining_bytes: 25,
                        rtt_us: 26,
                        lost: 27,
                        outcome: "raised".into(),
                        iteration: 28,
                        dscp: None,
                    }],
                    native_flows: 29,
                    dropped_foreign: 30,
                    dropped_bad: 31,
                    notices_received: 32,
                    rpc_failures: 33,
                    slot_work_us: 34,
                    bursts_granted: 35,
                    bursts_granted_on_ack: 36,
                    pcn_starts: 37,
                    pcn_ends_on_burst: 38,
                }
                .encode_to_vec(),
            ),
        ]
    }

    /// The encodings of [`encoded`]'s messages by the hand-written prost structs this module
    /// had before the schema became `proto/mlcc.proto`: the wire must not move.
    const GOLDEN: [(&str, &str); 11] = [
        ("FeedbackRequest", "0a0301ac02120bffffffffffffffffff01071863"),
        ("FeedbackReply", "0805121708021080c2d72f188095f52a220301020328b0ea0130041806200728083009"),
        ("ScheduleUpdate", "0a026831100b1a26080c120403f0a20418808080808020220780c8afa025000128959aef3a30ffffffffff1f38011a26080d120403f0a20418808080808020220780c8afa025000128959aef3a30ffffffffff1f3801"),
        ("UpdateReply", "080112096e6f206c696e6b20391a26080e120403f0a20418808080808020220780c8afa025000128959aef3a30ffffffffff1f3801"),
        ("PcnStart", "0a016a10031a020f1022010128a09c0132026832"),
        ("PcnEnd", "0a016a1004"),
        ("PcnAck", "080212027463"),
        ("DependencyNotice", "0a0472696e67100118022003281130123880808080204013"),
        ("NoticeReply", "0814"),
        ("StatusRequest", ""),
        ("StatusReply", "081510e0d4031a06737769746368223a0a016a10011a0d31302e302e302e313a35323031220e31302e302e302e323a34303030302816301738184019481a501b5a06726169736564601c281d301e381f4020482150225823602468257026"),
    ];

    #[test]
    fn encodings_match_the_wire_before_the_proto_file() {
        let got = encoded();
        assert_eq!(got.len(), GOLDEN.len());
        for ((name, bytes), (gname, ghex)) in got.iter().zip(GOLDEN) {
            assert_eq!(*name, gname);
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(hex, ghex, "{name}");
        }
    }
}
