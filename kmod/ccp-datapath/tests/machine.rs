//! The datapath's own behaviour: flow and program tables, staging, timers, reports, validation,
//! error counting, sizes, and the all-zero initial state the kernel relies on.

mod common;

use ccp_datapath::machine::{ewma, max_wrap, CWND, MICROS, RATE};
use ccp_datapath::wire::{self, EventMsg, InstrMsg, RegMsg, UpdateField};
use ccp_datapath::{
    Datapath, DropCause, Error, FlowInfo, FlowState, FlowTable, Handled, Invoked, Primitives,
    ReportStatus,
};
use common::*;

type Dp = Datapath<8, 4>;

fn new_dp() -> (Box<Dp>, MockOps) {
    let mut dp = Box::new(Dp::new());
    dp.init(1_000);
    (
        dp,
        MockOps {
            now: 1_000,
            ..Default::default()
        },
    )
}

fn info() -> FlowInfo {
    FlowInfo {
        init_cwnd: 14480,
        mss: 1448,
        src_ip: 1,
        src_port: 2,
        dst_ip: 3,
        dst_port: 4,
        ..Default::default()
    }
    .with_alg_name(b"mltcp")
    .unwrap()
}

fn reg(typ: u8, val: u32) -> RegMsg {
    RegMsg { typ, val }
}

fn instr(op: u8, ret: RegMsg, left: RegMsg, right: RegMsg) -> InstrMsg {
    InstrMsg {
        op,
        ret,
        left,
        right,
    }
}

fn install_raw(uid: u32, events: &[EventMsg], instrs: &[InstrMsg]) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    let n = wire::write_install(&mut b, 0, uid, events, instrs).unwrap();
    b.truncate(n);
    b
}

fn upd(sid: u32, ups: &[UpdateField]) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    let n = wire::write_update_fields(&mut b, sid, ups).unwrap();
    b.truncate(n);
    b
}

fn chg(sid: u32, uid: u32, ups: &[UpdateField]) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    let n = wire::write_change_prog(&mut b, sid, uid, ups).unwrap();
    b.truncate(n);
    b
}

const CWND_UPD: u8 = 2;

fn report_of(msg: &[u8]) -> (u32, u32, Vec<u64>) {
    match wire::parse(msg).unwrap().0 {
        wire::Msg::Measure(m) => (m.sid, m.program_uid, m.fields.iter().collect()),
        other => panic!("expected MEASURE, got {other:?}"),
    }
}

#[test]
fn sizes() {
    let flow = std::mem::size_of::<FlowState>();
    let dp = std::mem::size_of::<Datapath<4096, 32>>();
    println!(
        "FlowState {flow} B, Program {} B, Datapath<4096, 32> {dp} B",
        std::mem::size_of::<ccp_datapath::Program>()
    );
    // 856 B since the register file holds the primitives too (one flat array, program.rs `file`).
    assert!(flow <= 896, "per-flow state {flow} B");
    assert!(dp <= 4 << 20, "datapath {dp} B");
}

/// The kernel allocates programs zeroed (`Zeroable for Program` in kmod/ccp.rs) before it loads
/// an INSTALL into them: the all-zero program, compiled form included, is `Program::new()`.
#[test]
fn all_zero_program_is_new() {
    let layout = std::alloc::Layout::new::<ccp_datapath::Program>();
    // SAFETY: every field is an integer, bool, fieldless enum with a 0 variant, or an array of
    // them, which is what this test checks against `new()`.
    let zeroed: Box<ccp_datapath::Program> =
        unsafe { Box::from_raw(std::alloc::alloc_zeroed(layout).cast()) };
    let fresh = Box::new(ccp_datapath::Program::new());
    assert!(
        format!("{zeroed:?}") == format!("{fresh:?}"),
        "all-zero Program differs from new()"
    );
    assert!(!zeroed.compiled().ready());
}

/// The kernel allocates its shards' flow tables zeroed instead of copying `new()` into place.
#[test]
fn all_zero_is_new() {
    let layout = std::alloc::Layout::new::<FlowTable<16>>();
    // SAFETY: every field is an integer, bool, fieldless enum with a 0 variant, or an array of
    // them, which is what this test checks against `new()`.
    let zeroed: Box<FlowTable<16>> =
        unsafe { Box::from_raw(std::alloc::alloc_zeroed(layout).cast()) };
    let fresh = Box::new(FlowTable::<16>::new());
    assert!(
        format!("{zeroed:?}") == format!("{fresh:?}"),
        "all-zero FlowTable differs from new()"
    );
}

#[test]
fn flow_lifecycle_create_and_close() {
    let (mut dp, mut ops) = new_dp();
    dp.send_ready(42, &mut ops).unwrap();
    assert_eq!(
        wire::parse(&ops.sent[0]).unwrap().0,
        wire::Msg::Ready { sid: 0, id: 42 }
    );
    let sid = dp.flow_start(&info(), &mut ops).unwrap();
    assert_ne!(sid, 0);
    let wire::Msg::Create(c) = wire::parse(&ops.sent[1]).unwrap().0 else {
        panic!()
    };
    assert_eq!(
        (
            c.sid,
            c.init_cwnd,
            c.mss,
            c.src_port,
            c.dst_port,
            c.alg_name()
        ),
        (sid, 14480, 1448, 2, 4, &b"mltcp"[..])
    );
    assert!(dp.flow(sid).unwrap().created());
    dp.flow_end(sid, &mut ops).unwrap();
    assert_eq!(report_of(&ops.sent[2]), (sid, 0, vec![]));
    assert_eq!(dp.flow_end(sid, &mut ops), Err(Error::UnknownFlow));
    assert_eq!(dp.stats().count(Error::UnknownFlow), 1);
    assert_eq!(dp.num_flows(), 0);
}

#[test]
fn stale_sid_never_reaches_the_next_flow_in_the_slot() {
    let (mut dp, mut ops) = new_dp();
    let mut sids = vec![];
    for _ in 0..8 {
        sids.push(dp.flow_start(&info(), &mut ops).unwrap());
    }
    assert_eq!(dp.flow_start(&info(), &mut ops), Err(Error::FlowTableFull));
    assert_eq!(dp.stats().count(Error::FlowTableFull), 1);
    dp.flow_end(sids[3], &mut ops).unwrap();
    let new = dp.flow_start(&info(), &mut ops).unwrap();
    assert_ne!(new, sids[3], "same slot, new generation");
    assert_eq!(new & 0xffff, sids[3] & 0xffff);
    let u = upd(
        sids[3],
        &[UpdateField {
            reg_type: CWND_UPD,
            reg_index: 4,
            value: 1,
        }],
    );
    assert_eq!(dp.handle_msg(&u), Err(Error::UnknownFlow));
    assert_eq!(
        dp.flow_invoke(sids[3], &Primitives::default(), &mut ops),
        Err(Error::UnknownFlow)
    );
    assert_eq!(
        dp.flow_invoke(0, &Primitives::default(), &mut ops),
        Err(Error::UnknownFlow)
    );
}

#[test]
fn live_flow_count_follows_starts_and_ends() {
    let (mut dp, mut ops) = new_dp();
    assert_eq!(dp.num_flows(), 0);
    let mut sids = vec![];
    for k in 0..8 {
        sids.push(dp.flow_start(&info(), &mut ops).unwrap());
        assert_eq!(dp.num_flows(), k + 1);
    }
    // A full table does not count; ending an unknown or ended flow does not either.
    assert!(dp.flow_start(&info(), &mut ops).is_err());
    assert_eq!(dp.num_flows(), 8);
    for (k, &sid) in sids.iter().enumerate() {
        dp.flow_end(sid, &mut ops).unwrap();
        assert!(dp.flow_end(sid, &mut ops).is_err());
        assert_eq!(dp.num_flows(), 7 - k);
    }
    // Many more flows than slots, started and ended in turn (the module's churn): back to 0.
    for _ in 0..1000 {
        let a = dp.flow_start(&info(), &mut ops).unwrap();
        let b = dp.flow_start(&info(), &mut ops).unwrap();
        dp.flow_end(a, &mut ops).unwrap();
        dp.flow_end(b, &mut ops).unwrap();
    }
    assert_eq!(dp.num_flows(), 0);
    assert_eq!(dp.stats().flows_started, 2008);
    assert_eq!(dp.stats().flows_ended, 2008);
}

#[test]
fn drops_are_told_apart_late_from_malformed() {
    let (mut dp, mut ops) = new_dp();
    let cwnd = [UpdateField {
        reg_type: CWND_UPD,
        reg_index: 4,
        value: 1,
    }];
    let sid = dp.flow_start(&info(), &mut ops).unwrap();
    dp.flow_end(sid, &mut ops).unwrap();
    // The agent's answer to a flow that just closed: late.
    let u = upd(sid, &cwnd);
    let e = dp.handle_msg(&u).unwrap_err();
    assert_eq!(dp.drop_cause(&u, e), DropCause::Late);
    // Still late once the slot holds a later flow.
    let next = dp.flow_start(&info(), &mut ops).unwrap();
    let e = dp.handle_msg(&u).unwrap_err();
    assert_eq!(dp.drop_cause(&u, e), DropCause::Late);
    // A sid never handed out (generation ahead of its slot's, generation 0, slot out of range).
    for never in [
        (next & 0xffff) | ((next >> 16).wrapping_add(1) << 16),
        next & 0xffff,
        (1 << 16) | 200,
    ] {
        let u = upd(never, &cwnd);
        let e = dp.handle_msg(&u).unwrap_err();
        assert_eq!(e, Error::UnknownFlow);
        assert_eq!(dp.drop_cause(&u, e), DropCause::Malformed, "sid {never:#x}");
    }
    // Malformed messages.
    let mut short = upd(next, &cwnd);
    short.truncate(6);
    let e = dp.handle_msg(&short).unwrap_err();
    assert_eq!(dp.drop_cause(&short, e), DropCause::Malformed);
    let mut bad_type = upd(next, &cwnd);
    bad_type[0] = 77;
    let e = dp.handle_msg(&bad_type).unwrap_err();
    assert_eq!(dp.drop_cause(&bad_type, e), DropCause::Malformed);
    // The live flow's own message is accepted.
    assert!(dp.handle_msg(&upd(next, &cwnd)).is_ok());
}

#[test]
fn create_is_retried_at_most_every_100ms() {
    let (mut dp, mut ops) = new_dp();
    ops.fail_send = true;
    let sid = dp.flow_start(&info(), &mut ops).unwrap();
    assert_eq!(dp.stats().count(Error::SendFailed), 1);
    ops.fail_send = false;
    ops.now += 50_000;
    assert_eq!(
        dp.flow_invoke(sid, &Primitives::default(), &mut ops),
        Ok(Invoked::CreatePending)
    );
    assert!(ops.sent.is_empty(), "too early to retry");
    ops.now += 50_000;
    assert_eq!(
        dp.flow_invoke(sid, &Primitives::default(), &mut ops),
        Ok(Invoked::CreatePending)
    );
    assert_eq!(ops.sent.len(), 1, "retried");
    assert_eq!(
        dp.flow_invoke(sid, &Primitives::default(), &mut ops),
        Ok(Invoked::NoProgram)
    );
}

const RENO: &str = "(def (Report (volatile acked 0) (total 0)) (volatile vc 7) (c 0))
    (when true (:= Report.acked (+ Report.acked Ack.bytes_acked)) (:= Report.total (+ Report.total 1))
               (:= vc (+ vc 1)) (fallthrough))
    (when (> Micros 10000) (:= Cwnd (+ Cwnd c)) (report) (:= Micros 0))";

#[test]
fn program_staging_timer_report_and_volatile_reset() {
    let (mut dp, mut ops) = new_dp();
    let (bytes, sc, _) = compile_install(RENO);
    let sid = dp.flow_start(&info(), &mut ops).unwrap();
    ops.sent.clear();
    assert_eq!(
        dp.handle_msg(&bytes),
        Ok(Handled::Installed {
            uid: sc.program_uid
        })
    );
    assert!(!dp.flow_has_program(sid));
    let c = reg_of(&sc, "c");
    let c_idx = match c {
        portus::lang::Reg::Control(i, _, _) => u32::from(i),
        _ => panic!(),
    };
    let ch = chg(
        sid,
        sc.program_uid,
        &[UpdateField {
            reg_type: 0,
            reg_index: c_idx,
            value: 1448,
        }],
    );
    assert_eq!(
        dp.handle_msg(&ch),
        Ok(Handled::ProgramChanged {
            sid,
            uid: sc.program_uid
        })
    );
    assert!(dp.flow_has_program(sid));

    let p = Primitives {
        bytes_acked: 1448,
        snd_cwnd: 14480,
        ..Default::default()
    };
    // First invocation applies the program: Micros restarts, no report yet.
    assert_eq!(
        dp.flow_invoke(sid, &p, &mut ops),
        Ok(Invoked::Ran {
            report: ReportStatus::None
        })
    );
    assert_eq!(
        ops.acts,
        vec![Act::Cwnd(14480)],
        "Cwnd is re-enforced with its loaded value"
    );
    ops.acts.clear();
    for _ in 0..10 {
        ops.now += 1000;
        assert_eq!(
            dp.flow_invoke(sid, &p, &mut ops),
            Ok(Invoked::Ran {
                report: ReportStatus::None
            })
        );
    }
    ops.now += 1;
    assert_eq!(
        dp.flow_invoke(sid, &p, &mut ops),
        Ok(Invoked::Ran {
            report: ReportStatus::Sent
        })
    );
    assert_eq!(ops.acts.last(), Some(&Act::Cwnd(14480 + 1448)));
    assert_eq!(
        report_of(ops.sent.last().unwrap()),
        (sid, sc.program_uid, vec![12 * 1448, 12])
    );
    let f = dp.flow(sid).unwrap();
    assert_eq!(f.regs.report()[0], 0, "volatile Report.acked reset");
    assert_eq!(f.regs.report()[1], 12, "non-volatile Report.total kept");
    assert_eq!(f.implicit(MICROS), 0, "(:= Micros 0)");
    // Next report needs another 10 ms.
    ops.now += 9_000;
    assert_eq!(
        dp.flow_invoke(sid, &p, &mut ops),
        Ok(Invoked::Ran {
            report: ReportStatus::None
        })
    );
    assert_eq!(dp.stats().reports_sent, 1);
}

#[test]
fn staged_updates_apply_on_next_invocation_and_u64_rates_pass_through() {
    let (mut dp, mut ops) = new_dp();
    let sid = dp.flow_start(&info(), &mut ops).unwrap();
    let big_rate = 10_000_000_000u64; // 80 Gbit/s: above libccp's u32
    let u = upd(
        sid,
        &[
            UpdateField {
                reg_type: CWND_UPD,
                reg_index: CWND as u32,
                value: 30_000,
            },
            UpdateField {
                reg_type: CWND_UPD,
                reg_index: RATE as u32,
                value: big_rate,
            },
            UpdateField {
                reg_type: CWND_UPD,
                reg_index: MICROS as u32,
                value: 5,
            }, // ignored, as in libccp
        ],
    );
    assert_eq!(dp.handle_msg(&u), Ok(Handled::Updated { sid }));
    assert!(ops.acts.is_empty(), "staged, not applied");
    assert_eq!(
        dp.flow_invoke(sid, &Primitives::default(), &mut ops),
        Ok(Invoked::NoProgram)
    );
    assert_eq!(ops.acts, vec![Act::Cwnd(30_000), Act::Rate(big_rate)]);
    ops.acts.clear();
    assert_eq!(
        dp.flow_invoke(sid, &Primitives::default(), &mut ops),
        Ok(Invoked::NoProgram)
    );
    assert!(ops.acts.is_empty(), "applied once");
}

#[test]
fn invalid_updates_change_nothing_and_are_counted() {
    let (mut dp, mut ops) = new_dp();
    let sid = dp.flow_start(&info(), &mut ops).unwrap();
    let ok = UpdateField {
        reg_type: CWND_UPD,
        reg_index: 4,
        value: 9,
    };
    for (bad, err) in [
        (
            UpdateField {
                reg_type: 5,
                reg_index: 0,
                value: 1,
            },
            Error::BadUpdateReg,
        ),
        (
            UpdateField {
                reg_type: 1,
                reg_index: 0,
                value: 1,
            },
            Error::BadUpdateReg,
        ),
        (
            UpdateField {
                reg_type: 99,
                reg_index: 0,
                value: 1,
            },
            Error::BadUpdateReg,
        ),
        (
            UpdateField {
                reg_type: 0,
                reg_index: 16,
                value: 1,
            },
            Error::UpdateIndexOutOfRange,
        ),
        (
            UpdateField {
                reg_type: 8,
                reg_index: u32::MAX,
                value: 1,
            },
            Error::UpdateIndexOutOfRange,
        ),
    ] {
        assert_eq!(dp.handle_msg(&upd(sid, &[ok, bad])), Err(err));
        assert!(dp.stats().count(err) > 0);
    }
    dp.flow_invoke(sid, &Primitives::default(), &mut ops)
        .unwrap();
    assert!(
        ops.acts.is_empty(),
        "the valid update before the bad one was not staged either"
    );
    assert_eq!(
        dp.handle_msg(&chg(sid, 12345, &[])),
        Err(Error::ProgramNotFound)
    );
    let mut cr = [0u8; wire::CREATE_LEN];
    let c = wire::Create {
        sid,
        init_cwnd: 0,
        mss: 0,
        src_ip: 0,
        src_port: 0,
        dst_ip: 0,
        dst_port: 0,
        alg: [0; 64],
    };
    c.write(&mut cr).unwrap();
    assert_eq!(dp.handle_msg(&cr), Err(Error::UnexpectedMsg));
    assert_eq!(dp.stats().total_errors(), 7);
    assert_eq!(dp.stats().msgs_handled, 0);
}

#[test]
fn replacing_or_clearing_programs() {
    let (mut dp, mut ops) = new_dp();
    let sid = dp.flow_start(&info(), &mut ops).unwrap();
    let ev = [EventMsg {
        cond_start: 0,
        cond_len: 1,
        body_start: 1,
        body_len: 1,
    }];
    let set_cwnd = |v: u32| {
        vec![
            instr(1, reg(2, 0), reg(2, 0), reg(1, 1)), // __eventFlag := true
            instr(1, reg(2, 4), reg(2, 4), reg(1, v)), // Cwnd := v
        ]
    };
    dp.handle_msg(&install_raw(5, &ev, &set_cwnd(1000)))
        .unwrap();
    dp.handle_msg(&install_raw(6, &ev, &set_cwnd(2000)))
        .unwrap();
    dp.handle_msg(&chg(sid, 5, &[])).unwrap();
    dp.flow_invoke(sid, &Primitives::default(), &mut ops)
        .unwrap();
    assert_eq!(ops.acts, vec![Act::Cwnd(1000)]);
    // Re-installing uid 5 replaces it; the flow no longer runs the old one.
    dp.handle_msg(&install_raw(5, &ev, &set_cwnd(3000)))
        .unwrap();
    assert_eq!(dp.programs().len(), 2);
    assert_eq!(
        dp.flow_invoke(sid, &Primitives::default(), &mut ops),
        Err(Error::ProgramGone)
    );
    assert_eq!(
        dp.flow_invoke(sid, &Primitives::default(), &mut ops),
        Ok(Invoked::NoProgram)
    );
    dp.handle_msg(&chg(sid, 5, &[])).unwrap();
    ops.acts.clear();
    dp.flow_invoke(sid, &Primitives::default(), &mut ops)
        .unwrap();
    assert_eq!(ops.acts, vec![Act::Cwnd(3000)]);
    // Fill the table (4 slots), then uid 1 (a new agent) clears it.
    dp.handle_msg(&install_raw(7, &ev, &set_cwnd(1))).unwrap();
    dp.handle_msg(&install_raw(8, &ev, &set_cwnd(1))).unwrap();
    assert_eq!(
        dp.handle_msg(&install_raw(9, &ev, &set_cwnd(1))),
        Err(Error::ProgramTableFull)
    );
    dp.handle_msg(&install_raw(1, &ev, &set_cwnd(1))).unwrap();
    assert_eq!(dp.programs().len(), 1);
    assert!(dp.program(5).is_none());
    assert!(!dp.flow_has_program(sid));
}

#[test]
fn install_validation() {
    let (mut dp, _) = new_dp();
    let ev = [EventMsg {
        cond_start: 0,
        cond_len: 1,
        body_start: 1,
        body_len: 0,
    }];
    let bind = instr(1, reg(2, 0), reg(2, 0), reg(1, 1));
    let cases: Vec<(Vec<EventMsg>, Vec<InstrMsg>, Error)> = vec![
        (
            ev.to_vec(),
            vec![instr(15, reg(2, 0), reg(2, 0), reg(1, 1))],
            Error::BadOpcode,
        ),
        (
            ev.to_vec(),
            vec![instr(1, reg(9, 0), reg(2, 0), reg(1, 1))],
            Error::BadRegType,
        ),
        (
            ev.to_vec(),
            vec![instr(1, reg(2, 0), reg(2, 0), reg(200, 1))],
            Error::BadRegType,
        ),
        (
            ev.to_vec(),
            vec![instr(1, reg(1, 0), reg(2, 0), reg(1, 1))],
            Error::BadResultReg,
        ),
        (
            ev.to_vec(),
            vec![instr(1, reg(4, 0), reg(2, 0), reg(1, 1))],
            Error::BadResultReg,
        ),
        (
            ev.to_vec(),
            vec![instr(1, reg(2, 6), reg(2, 0), reg(1, 1))],
            Error::RegIndexOutOfRange,
        ),
        (
            ev.to_vec(),
            vec![instr(1, reg(7, 16), reg(2, 0), reg(1, 1))],
            Error::RegIndexOutOfRange,
        ),
        (
            ev.to_vec(),
            vec![instr(1, reg(3, 0), reg(4, 15), reg(1, 1))],
            Error::RegIndexOutOfRange,
        ),
        (
            ev.to_vec(),
            vec![instr(1, reg(5, 16), reg(2, 0), reg(1, 1))],
            Error::RegIndexOutOfRange,
        ),
        (
            vec![EventMsg {
                cond_start: 0,
                cond_len: 2,
                body_start: 0,
                body_len: 0,
            }],
            vec![bind],
            Error::EventOutOfRange,
        ),
        (
            vec![EventMsg {
                cond_start: u32::MAX,
                cond_len: 2,
                body_start: 0,
                body_len: 0,
            }],
            vec![bind],
            Error::EventOutOfRange,
        ),
        (
            ev.to_vec(),
            vec![instr(2, reg(5, 0), reg(5, 0), reg(3, 0)), bind],
            Error::DefNotImmediate,
        ),
        (
            ev.to_vec(),
            (0..17)
                .map(|i| instr(2, reg(5, i % 16), reg(5, i % 16), reg(1, 0)))
                .chain([bind])
                .collect(),
            Error::TooManyReportFields,
        ),
    ];
    for (evs, ins, err) in cases {
        assert_eq!(
            dp.handle_msg(&install_raw(3, &evs, &ins)),
            Err(err),
            "{ins:?}"
        );
    }
    assert!(dp.programs().is_empty());
    // Tmp 15 (portus's limit) is fine here, although libccp only has 8 temporaries.
    dp.handle_msg(&install_raw(
        3,
        &ev,
        &[instr(1, reg(7, 15), reg(2, 0), reg(1, 1))],
    ))
    .unwrap();
    // Without a non-DEF instruction libccp never sets num_to_return: 0 report fields.
    dp.handle_msg(&install_raw(
        4,
        &[],
        &[instr(2, reg(5, 0), reg(5, 0), reg(1, 3))],
    ))
    .unwrap();
    assert_eq!(dp.program(4).unwrap().num_report(), 0);
}

#[test]
fn execution_errors_stop_the_run_and_are_counted() {
    let (mut dp, mut ops) = new_dp();
    let sid = dp.flow_start(&info(), &mut ops).unwrap();
    let ev = [EventMsg {
        cond_start: 0,
        cond_len: 1,
        body_start: 1,
        body_len: 2,
    }];
    for (k, (op, l, r, err)) in [
        (0u8, u32::MAX, 1u32, Error::AddOverflow), // Primitive(0) + ... built below
        (14, 0, 1, Error::SubUnderflow),
        (3, 5, 0, Error::DivByZero),
    ]
    .into_iter()
    .enumerate()
    {
        let _ = (l, r);
        let ins = [
            instr(1, reg(2, 0), reg(2, 0), reg(1, 1)),
            // tmp0 := bytes_acked <op> right-immediate
            instr(op, reg(7, 0), reg(4, 0), reg(1, r)),
            instr(1, reg(2, 2), reg(2, 2), reg(1, 1)), // (report), not reached
        ];
        let uid = 10 + k as u32;
        dp.handle_msg(&install_raw(uid, &ev, &ins)).unwrap();
        dp.handle_msg(&chg(sid, uid, &[])).unwrap();
        let p = Primitives {
            bytes_acked: if op == 0 { u64::MAX } else { 0 },
            ..Default::default()
        };
        ops.sent.clear();
        assert_eq!(dp.flow_invoke(sid, &p, &mut ops), Err(err));
        assert!(ops.sent.is_empty());
        assert_eq!(dp.stats().count(err), 1);
    }
    // libccp's multiplication check misses some overflows; kept for identical results.
    let ins = [
        instr(1, reg(2, 0), reg(2, 0), reg(1, 1)),
        instr(12, reg(7, 0), reg(4, 0), reg(4, 1)),
        instr(1, reg(5, 0), reg(5, 0), reg(7, 0)),
    ];
    dp.handle_msg(&install_raw(20, &ev, &ins)).unwrap();
    dp.handle_msg(&chg(sid, 20, &[])).unwrap();
    let p = Primitives {
        bytes_acked: 3,
        bytes_misordered: 1 << 63,
        ..Default::default()
    };
    assert!(
        dp.flow_invoke(sid, &p, &mut ops).is_ok(),
        "3 * 2^63 wraps to 2^63 > 3: not detected"
    );
    assert_eq!(dp.flow(sid).unwrap().regs.report()[0], 1 << 63);
    let p = Primitives {
        bytes_acked: 1 << 33,
        bytes_misordered: 1 << 33,
        ..Default::default()
    };
    assert_eq!(dp.flow_invoke(sid, &p, &mut ops), Err(Error::MulOverflow));
}

#[test]
fn fallthrough_and_first_match() {
    let (mut dp, mut ops) = new_dp();
    let sid = dp.flow_start(&info(), &mut ops).unwrap();
    let src = "(def (Report (volatile a 0) (volatile b 0) (volatile c 0)))
        (when true (:= Report.a 1) (fallthrough))
        (when true (:= Report.b 1))
        (when true (:= Report.c 1))";
    let (bytes, sc, _) = compile_install(src);
    dp.handle_msg(&bytes).unwrap();
    dp.handle_msg(&chg(sid, sc.program_uid, &[])).unwrap();
    dp.flow_invoke(sid, &Primitives::default(), &mut ops)
        .unwrap();
    // libccp clears `__shouldContinue` only at the start of a run, so one `(fallthrough)` keeps
    // every later event running too (checked against libccp in diff_libccp.rs, FIXED[4]).
    assert_eq!(&dp.flow(sid).unwrap().regs.report()[..3], &[1, 1, 1]);
    let src = "(def (Report (volatile a 0) (volatile b 0) (volatile c 0)))
        (when true (:= Report.a 1))
        (when true (:= Report.b 1) (fallthrough))
        (when true (:= Report.c 1))";
    let (bytes, sc, _) = compile_install(src);
    dp.handle_msg(&bytes).unwrap();
    dp.handle_msg(&chg(sid, sc.program_uid, &[])).unwrap();
    dp.flow_invoke(sid, &Primitives::default(), &mut ops)
        .unwrap();
    assert_eq!(
        &dp.flow(sid).unwrap().regs.report()[..3],
        &[1, 0, 0],
        "the first event that fires without fallthrough ends the run"
    );
}

#[test]
fn operator_semantics() {
    assert_eq!(ewma(2, 0, 50), 50, "first sample");
    assert_eq!(ewma(2, 100, 50), (2 * 100 + 8 * 50) / 10);
    assert_eq!(
        ewma(11, 100, 50),
        (11u64 * 100).wrapping_add(u64::MAX.wrapping_mul(50)) / 10,
        "libccp wraps"
    );
    assert_eq!(max_wrap(0, 7), 7);
    assert_eq!(max_wrap(7, 0), 7);
    assert_eq!(max_wrap(5, 9), 9);
    assert_eq!(max_wrap(0xffff_fff0, 0x10), 0x10, "0x10 is after the wrap");
    assert_eq!(max_wrap(0x1_0000_0005, 3), 5, "upper halves dropped");
}
