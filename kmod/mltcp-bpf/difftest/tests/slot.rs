// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The differential test of the BPF agent datapath's window rule: the agent's slot program
//! (datapath-programs/mlcc-slot.ccp) compiled by portus and run by the project's CCP datapath core
//! (kmod/ccp-datapath, as tcp_mltcp runs it), against its fixed C form
//! (kmod/mltcp-bpf/bpf/mltcp_slot.h, compiled for user space). Both see the same random sequences
//! of ACKs (bytes, losses, RTT, what is in flight, clock steps) and of the agent's updates (rate,
//! window ceiling, scavenger target); after every ACK the window they enforce, whether the run
//! completed, and every field of every report must be equal.

use ccp_datapath::wire::{self, Msg};
use ccp_datapath::{
    program_lines, Datapath, DatapathOps, FlowInfo, Invoked, Primitives, SendError,
};
use mltcp_bpf_difftest::{SlotAck, SlotCtl, SlotRun, SlotState};
use portus::lang::{Reg, Scope};
use portus::serialize;
use proptest::prelude::*;

/// The datapath's host: a manual clock, the messages it sends and the window/rate it enforces.
#[derive(Default)]
struct Host {
    now: u64,
    sent: Vec<Vec<u8>>,
    cwnd: Option<u64>,
    rate: Option<u64>,
}

impl DatapathOps for Host {
    fn now_us(&self) -> u64 {
        self.now
    }
    fn send_msg(&mut self, msg: &[u8]) -> Result<(), SendError> {
        self.sent.push(msg.to_vec());
        Ok(())
    }
    fn set_cwnd(&mut self, bytes: u64) {
        self.cwnd = Some(bytes);
    }
    fn set_rate_abs(&mut self, bytes_per_sec: u64) {
        self.rate = Some(bytes_per_sec);
    }
}

fn program() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../datapath-programs/mlcc-slot.ccp"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    program_lines(&text).collect::<Vec<_>>().join("\n")
}

fn reg(sc: &Scope, name: &str) -> Reg {
    sc.get(name).unwrap_or_else(|| panic!("{name}")).clone()
}

/// One step of a sequence.
#[derive(Clone, Debug)]
enum Step {
    /// An ACK `dt_us` after the previous one.
    Ack {
        dt_us: u64,
        acked: u64,
        lost: u64,
        rtt_us: u64,
        in_flight: u64,
        rate_in: u64,
    },
    /// The agent's per-slot UPDATE_FIELDS (Rate, Control.cwnd_cap, Control.scavenge_us).
    Update {
        rate: u64,
        cap: u64,
        scavenge_us: u64,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (
            prop_oneof![Just(0u64), 1..200u64, 1_000..80_000u64],
            prop_oneof![Just(0u64), Just(1448u64), 1..100_000u64],
            prop_oneof![6 => Just(0u64), 1 => 1..4u64],
            prop_oneof![Just(0u64), 500..3_000u64, 1_000..20_000u64],
            prop_oneof![Just(0u64), 1..100u64],
            0..2_000_000_000u64,
        )
            .prop_map(|(dt_us, acked, lost, rtt_us, in_flight, rate_in)| Step::Ack {
                dt_us,
                acked,
                lost,
                rtt_us,
                in_flight,
                rate_in
            }),
        1 => (
            prop_oneof![Just(0u64), 1..2_000_000_000u64],
            prop_oneof![Just(16u64 << 20), 2_896..1_000_000u64],
            prop_oneof![3 => Just(0u64), 1 => 100..5_000u64],
        )
            .prop_map(|(rate, cap, scavenge_us)| Step::Update { rate, cap, scavenge_us }),
    ]
}

/// Runs `steps` through both; `cwnd0` is the agent's initial Cwnd and ceiling.
fn run_both(cwnd0: u64, steps: &[Step]) -> Result<(), TestCaseError> {
    let (bin, sc) = portus::lang::compile(program().as_bytes(), &[]).expect("compiles");
    let install = serialize::serialize(&serialize::install::Msg {
        sid: 0,
        program_uid: sc.program_uid,
        num_events: bin.events.len() as u32,
        num_instrs: bin.instrs.len() as u32,
        instrs: bin,
    })
    .expect("serialises");

    // The interpreted side.
    let mut dp = Box::new(Datapath::<4, 4>::new());
    let mut host = Host {
        now: 5_000,
        ..Host::default()
    };
    let dp_zero = host.now;
    dp.init(dp_zero);
    let info = FlowInfo {
        init_cwnd: 14_480,
        mss: 1448,
        ..FlowInfo::default()
    };
    let sid = dp.flow_start(&info, &mut host).expect("flow starts");
    dp.handle_msg(&install).expect("INSTALL");
    let rate0 = 12_500_000;
    let change = serialize::serialize(&serialize::changeprog::Msg {
        sid,
        program_uid: sc.program_uid,
        num_fields: 4,
        fields: vec![
            (reg(&sc, "Cwnd"), cwnd0),
            (reg(&sc, "Control.cwnd_cap"), cwnd0),
            (reg(&sc, "Rate"), rate0),
            (reg(&sc, "Control.slot_us"), 60_000),
        ],
    })
    .expect("serialises");
    dp.handle_msg(&change).expect("CHANGE_PROG");
    // What tcp_mltcp's glue keeps: the window and rate last enforced.
    let mut dp_cwnd = 14_480u64;
    let mut dp_rate = 0u64;

    // The C side, with the glue mltcp.bpf.c runs around it: the agent's Cwnd and Rate take
    // effect at the first ACK after they were written, Rate in that run even when 0, the last
    // non-zero Rate afterwards.
    let mut c = SlotState::default();
    let mut ctl = SlotCtl {
        slot_us: 60_000,
        cwnd_cap: cwnd0,
        scavenge_us: 0,
    };
    let mut c_started = false;
    let mut c_new_rate = Some(rate0);
    let mut c_rate = 0u64;
    let mut c_cwnd = 14_480u64;

    for (i, s) in steps.iter().enumerate() {
        match *s {
            Step::Update {
                rate,
                cap,
                scavenge_us,
            } => {
                let m = serialize::serialize(&serialize::update_field::Msg {
                    sid,
                    num_fields: 3,
                    fields: vec![
                        (reg(&sc, "Rate"), rate),
                        (reg(&sc, "Control.cwnd_cap"), cap),
                        (reg(&sc, "Control.scavenge_us"), scavenge_us),
                    ],
                })
                .expect("serialises");
                dp.handle_msg(&m).expect("UPDATE_FIELDS");
                ctl.cwnd_cap = cap;
                ctl.scavenge_us = scavenge_us;
                c_new_rate = Some(rate);
            }
            Step::Ack {
                dt_us,
                acked,
                lost,
                rtt_us,
                in_flight,
                rate_in,
            } => {
                host.now += dt_us;
                host.sent.clear();
                host.cwnd = None;
                host.rate = None;
                let prims = Primitives {
                    bytes_acked: acked,
                    lost_pkts_sample: lost,
                    packets_in_flight: in_flight,
                    rtt_sample_us: rtt_us,
                    rate_incoming: rate_in,
                    rate_outgoing: rate_in,
                    snd_cwnd: dp_cwnd,
                    snd_rate: dp_rate,
                    ..Primitives::default()
                };
                let r = dp.flow_invoke(sid, &prims, &mut host);
                if let Some(w) = host.cwnd {
                    dp_cwnd = w;
                }
                if let Some(v) = host.rate {
                    dp_rate = v;
                }
                let dp_report = host.sent.iter().find_map(|m| match wire::parse(m) {
                    Ok((Msg::Measure(me), _)) => Some(me.fields.iter().collect::<Vec<_>>()),
                    _ => None,
                });

                if !c_started {
                    c.cwnd = cwnd0;
                    c.start(host.now);
                    c_started = true;
                } else {
                    c.cwnd = c_cwnd;
                }
                c.rate = c_new_rate.take().unwrap_or(c_rate);
                let a = SlotAck {
                    bytes_acked: acked,
                    lost_pkts: lost,
                    rtt_us,
                    rate_in,
                    rate_out: rate_in,
                    now_us: host.now - dp_zero,
                    in_flight,
                };
                let out = c.run(&ctl, &a, host.now);
                match (r, out) {
                    (Ok(Invoked::Ran { .. }), SlotRun::Ran(rep)) => {
                        if c.cwnd > 0 {
                            c_cwnd = c.cwnd;
                        }
                        if c.rate != 0 {
                            c_rate = c.rate;
                        }
                        prop_assert_eq!(dp_cwnd, c_cwnd, "window after step {}", i);
                        prop_assert_eq!(dp_rate, c_rate, "rate after step {}", i);
                        prop_assert_eq!(
                            dp_report,
                            rep.map(|r| r.fields().to_vec()),
                            "report at step {}",
                            i
                        );
                    }
                    (Err(_), SlotRun::Failed) => return Ok(()),
                    (dp, c) => {
                        prop_assert!(false, "step {i}: interpreter {dp:?}, C {c:?}");
                    }
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn the_c_rule_is_the_interpreted_program(
        cwnd0 in prop_oneof![Just(100_000u64), 2_896..2_000_000u64],
        steps in prop::collection::vec(step(), 1..300),
    ) {
        run_both(cwnd0, &steps)?;
    }
}

/// A fixed sequence through every rule: slow start to the ceiling, a loss halving once per RTT,
/// Reno growth, a slot's report, the report when nothing is in flight, scavenger mode below,
/// at and above the target, and back.
#[test]
fn a_fixed_sequence_through_every_rule() {
    let mut steps = Vec::new();
    let ack = |dt_us, acked, lost, rtt_us, in_flight| Step::Ack {
        dt_us,
        acked,
        lost,
        rtt_us,
        in_flight,
        rate_in: 1_000_000,
    };
    for _ in 0..50 {
        steps.push(ack(100, 14_480, 0, 2_000, 10));
    }
    steps.push(ack(2_500, 1448, 2, 2_000, 10));
    steps.push(ack(100, 1448, 1, 2_000, 10));
    for _ in 0..700 {
        steps.push(ack(100, 1448, 0, 2_000, 10));
    }
    steps.push(ack(100, 1448, 0, 2_000, 0));
    steps.push(Step::Update {
        rate: 1_000_000,
        cap: 16 << 20,
        scavenge_us: 1_000,
    });
    for rtt in [2_000, 2_500, 3_000, 5_000, 50_000] {
        for _ in 0..200 {
            steps.push(ack(100, 1448, 0, rtt, 10));
        }
    }
    steps.push(Step::Update {
        rate: 5_000_000,
        cap: 400_000,
        scavenge_us: 0,
    });
    for _ in 0..300 {
        steps.push(ack(100, 2_896, 0, 2_000, 10));
    }
    run_both(100_000, &steps).expect("the C rule follows the program");
}
