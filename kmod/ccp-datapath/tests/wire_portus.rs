//! Wire-format round trips against portus 0.9's own serialiser and parser
//! (`portus::serialize`), plus malformed-input checks.
//!
//! portus can serialise every message type but parses only CREATE, MEASURE and READY (its
//! `install::Msg::from_raw_msg` and `update_field` parsing are `unimplemented!()`), so the
//! agent-to-datapath direction is checked as "portus bytes → our parse → same values, and our
//! serialiser → the same bytes".

mod common;

use ccp_datapath::wire::{self, Msg, UpdateField};
use ccp_datapath::Error;
use common::*;
use portus::lang::Reg;
use portus::serialize;
use proptest::prelude::*;

/// Programs covering every construct portus compiles.
pub const PROGRAMS: &[&str] = &[
    "(def (Report.acked 0) (Control.num_invoked 0) (Report.cwnd 0) (Report.rate 0))
     (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Control.num_invoked (+ Control.num_invoked 1))
        (:= Report.cwnd Cwnd)
        (:= Report.rate Rate)
        (fallthrough))
     (when (== Control.num_invoked 20) (:= Control.num_invoked 0) (report))",
    "(def (Report (volatile foo 0) (bar 0) (volatile sum 0)) (volatile foo1 0) (bar1 0))
     (when true
        (:= Report.foo (+ Report.foo 1)) (:= Report.bar (+ Report.bar 1))
        (:= foo1 (+ foo1 1)) (:= bar1 (+ bar1 1))
        (:= Report.sum (+ foo1 bar1)) (fallthrough))
     (when (> Micros 3000) (report) (:= Micros 0))",
    "(def (Report (volatile acked 0) (volatile loss 0) (volatile minrtt +infinity) (ewmaRTT 0)))
     (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Report.loss (+ Report.loss Ack.lost_pkts_sample))
        (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us))
        (:= Report.ewmaRTT (ewma 2 Flow.rtt_sample_us))
        (fallthrough))
     (when (|| (> Report.loss 0) (> Micros (* 2 Report.minrtt))) (report) (:= Micros 0))",
    "(def (Report (volatile x 0) (volatile y 0)) (state 0))
     (when (&& (< Flow.packets_in_flight 10) (== state 0))
        (:= Report.x (max Flow.rate_incoming Flow.rate_outgoing))
        (:= Report.y (wrapped_max Report.y Ack.now))
        (:= Cwnd (- (* Cwnd 2) 1))
        (:= Rate (/ Flow.rate_outgoing 2))
        (:= state (if (> Ack.ecn_packets 0) 1))
        (report))
     (when true
        (:= state (!if Flow.was_timeout 0))
        (:= Report.x (+ Ack.bytes_misordered Ack.packets_misordered))
        (:= Report.y (+ Ack.ecn_bytes Flow.bytes_pending))
        (:= Report.x (+ Report.x (+ Flow.bytes_in_flight Ack.packets_acked))))",
];

/// Operand as portus's serialiser encodes it (independent of our decoder).
fn expected_reg(r: &Reg) -> (u8, u32) {
    match r {
        Reg::Control(i, _, v) => (if *v { 8 } else { 0 }, u32::from(*i)),
        Reg::ImmNum(n) => (1, *n as u32),
        Reg::ImmBool(b) => (1, u32::from(*b)),
        Reg::Implicit(i, _) => (2, u32::from(*i)),
        Reg::Local(i, _) => (3, u32::from(*i)),
        Reg::Primitive(i, _) => (4, u32::from(*i)),
        Reg::Report(i, _, v) => (if *v { 5 } else { 6 }, u32::from(*i)),
        Reg::Tmp(i, _) => (7, u32::from(*i)),
        Reg::None => panic!("Reg::None is never serialised"),
    }
}

#[test]
fn portus_install_parses_to_the_same_program() {
    for src in PROGRAMS {
        let (bytes, sc, bin) = compile_install(src);
        let (msg, used) = wire::parse(&bytes).unwrap();
        assert_eq!(used, bytes.len());
        let Msg::Install(ins) = msg else {
            panic!("not INSTALL")
        };
        assert_eq!(ins.sid, 0);
        assert_eq!(ins.program_uid, sc.program_uid);
        assert_eq!(ins.num_events(), bin.events.len());
        assert_eq!(ins.num_instrs(), bin.instrs.len());
        for (ours, theirs) in ins.events().zip(&bin.events) {
            assert_eq!(
                (
                    ours.cond_start,
                    ours.cond_len,
                    ours.body_start,
                    ours.body_len
                ),
                (
                    theirs.flag_idx,
                    theirs.num_flag_instrs,
                    theirs.body_idx,
                    theirs.num_body_instrs
                )
            );
        }
        for (ours, theirs) in ins.instrs().zip(&bin.instrs) {
            let op = ccp_datapath::Op::from_u8(ours.op).unwrap();
            assert_eq!(
                format!("{op:?}"),
                format!("{:?}", theirs.op),
                "opcode names agree"
            );
            assert_eq!((ours.ret.typ, ours.ret.val), expected_reg(&theirs.res));
            assert_eq!((ours.left.typ, ours.left.val), expected_reg(&theirs.left));
            assert_eq!(
                (ours.right.typ, ours.right.val),
                expected_reg(&theirs.right)
            );
        }
        // Re-serialise, both from the view and from decoded parts: the same bytes as portus.
        let mut out = vec![0u8; bytes.len()];
        assert_eq!(msg.write(&mut out).unwrap(), bytes.len());
        assert_eq!(out, bytes);
        let evs: Vec<_> = ins.events().collect();
        let ins_v: Vec<_> = ins.instrs().collect();
        let mut out2 = vec![0u8; bytes.len()];
        let n = wire::write_install(&mut out2, 0, ins.program_uid, &evs, &ins_v).unwrap();
        assert_eq!(&out2[..n], &bytes[..]);
        // And the program installs.
        let mut dp = Box::new(ccp_datapath::Datapath::<4, 4>::new());
        dp.handle_msg(&bytes).unwrap();
        assert!(dp.program(sc.program_uid).is_some());
    }
}

fn update_regs() -> Vec<Reg> {
    let (_, sc, _) = compile_install(PROGRAMS[1]);
    vec![
        reg_of(&sc, "foo1"),
        reg_of(&sc, "bar1"),
        reg_of(&sc, "Cwnd"),
        reg_of(&sc, "Rate"),
    ]
}

fn as_field(r: &Reg, v: u64) -> UpdateField {
    let (t, i) = expected_reg(r);
    UpdateField {
        reg_type: t,
        reg_index: i,
        value: v,
    }
}

proptest! {
    #[test]
    fn portus_update_fields_round_trip(sid: u32, picks in prop::collection::vec((0usize..4, any::<u64>()), 0..40)) {
        let regs = update_regs();
        let fields: Vec<(Reg, u64)> = picks.iter().map(|&(i, v)| (regs[i].clone(), v)).collect();
        let bytes = update_fields(sid, fields.clone());
        let (msg, used) = wire::parse(&bytes).unwrap();
        prop_assert_eq!(used, bytes.len());
        let Msg::UpdateFields(u) = msg else { panic!("not UPDATE_FIELDS") };
        prop_assert_eq!(u.sid, sid);
        let want: Vec<UpdateField> = fields.iter().map(|(r, v)| as_field(r, *v)).collect();
        prop_assert_eq!(u.updates.iter().collect::<Vec<_>>(), want.clone());
        let mut out = vec![0u8; bytes.len()];
        prop_assert_eq!(wire::write_update_fields(&mut out, sid, &want).unwrap(), bytes.len());
        prop_assert_eq!(&out, &bytes);
        let mut out2 = vec![0u8; bytes.len()];
        msg.write(&mut out2).unwrap();
        prop_assert_eq!(&out2, &bytes);
    }

    #[test]
    fn portus_change_prog_round_trip(sid: u32, uid: u32, picks in prop::collection::vec((0usize..4, any::<u64>()), 0..40)) {
        let regs = update_regs();
        let fields: Vec<(Reg, u64)> = picks.iter().map(|&(i, v)| (regs[i].clone(), v)).collect();
        let bytes = change_prog(sid, uid, fields.clone());
        let (msg, used) = wire::parse(&bytes).unwrap();
        prop_assert_eq!(used, bytes.len());
        let Msg::ChangeProg(c) = msg else { panic!("not CHANGE_PROG") };
        prop_assert_eq!((c.sid, c.program_uid), (sid, uid));
        let want: Vec<UpdateField> = fields.iter().map(|(r, v)| as_field(r, *v)).collect();
        prop_assert_eq!(c.updates.iter().collect::<Vec<_>>(), want.clone());
        let mut out = vec![0u8; bytes.len()];
        prop_assert_eq!(wire::write_change_prog(&mut out, sid, uid, &want).unwrap(), bytes.len());
        prop_assert_eq!(&out, &bytes);
    }

    #[test]
    fn create_round_trip(sid: u32, v in any::<[u32; 6]>(), name in "[a-z_0-9]{0,63}") {
        // portus → ours (portus can only serialise an absent name, see below).
        let pm = serialize::create::Msg {
            sid, init_cwnd: v[0], mss: v[1], src_ip: v[2], src_port: v[3], dst_ip: v[4], dst_port: v[5],
            cong_alg: None,
        };
        let bytes = serialize::serialize(&pm).unwrap();
        let (msg, _) = wire::parse(&bytes).unwrap();
        let Msg::Create(c) = msg else { panic!("not CREATE") };
        prop_assert_eq!(
            (c.sid, c.init_cwnd, c.mss, c.src_ip, c.src_port, c.dst_ip, c.dst_port),
            (sid, v[0], v[1], v[2], v[3], v[4], v[5])
        );
        prop_assert_eq!(c.alg_name(), b"");
        let mut out = vec![0u8; wire::CREATE_LEN];
        msg.write(&mut out).unwrap();
        prop_assert_eq!(&out, &bytes);

        // ours → portus, with a name.
        let mut c2 = c;
        c2.set_alg_name(name.as_bytes()).unwrap();
        let n = c2.write(&mut out).unwrap();
        let (pmsg, plen) = serialize::Msg::from_buf(&out[..n]).unwrap();
        prop_assert_eq!(plen, n);
        let serialize::Msg::Cr(got) = pmsg else { panic!("portus did not see CREATE") };
        let want_name = if name.is_empty() { None } else { Some(name.clone()) };
        prop_assert_eq!(got, serialize::create::Msg { cong_alg: want_name, ..pm });
    }

    #[test]
    fn measure_round_trip(sid: u32, uid: u32, fields in prop::collection::vec(any::<u64>(), 0..=16)) {
        // portus → ours
        let pm = serialize::measure::Msg { sid, program_uid: uid, num_fields: fields.len() as u8, fields: fields.clone() };
        let bytes = serialize::serialize(&pm).unwrap();
        let (msg, _) = wire::parse(&bytes).unwrap();
        let Msg::Measure(m) = msg else { panic!("not MEASURE") };
        prop_assert_eq!((m.sid, m.program_uid), (sid, uid));
        prop_assert_eq!(m.fields.iter().collect::<Vec<_>>(), fields.clone());
        prop_assert_eq!(m.fields.len(), fields.len());
        // ours → portus
        let mut out = vec![0u8; 16 + 8 * fields.len()];
        let n = wire::write_measure(&mut out, sid, uid, &fields).unwrap();
        prop_assert_eq!(&out[..n], &bytes[..]);
        let (pmsg, _) = serialize::Msg::from_buf(&out[..n]).unwrap();
        prop_assert_eq!(pmsg, serialize::Msg::Ms(pm));
    }

    #[test]
    fn ready_round_trip(id: u32) {
        let bytes = serialize::serialize(&serialize::ready::Msg { id }).unwrap();
        let (msg, _) = wire::parse(&bytes).unwrap();
        prop_assert_eq!(msg, Msg::Ready { sid: 0, id });
        let mut out = [0u8; wire::READY_LEN];
        wire::write_ready(&mut out, id).unwrap();
        prop_assert_eq!(&out[..], &bytes[..]);
        let (pmsg, _) = serialize::Msg::from_buf(&out).unwrap();
        prop_assert_eq!(pmsg, serialize::Msg::Rdy(serialize::ready::Msg { id }));
    }

    /// Arbitrary bytes: never a panic; whatever parses re-serialises to the same bytes.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Ok((msg, used)) = wire::parse(&bytes) {
            let mut out = vec![0u8; used];
            prop_assert_eq!(msg.write(&mut out), Ok(used));
            prop_assert_eq!(&out[..], &bytes[..used]);
        }
        let mut dp = Box::new(ccp_datapath::Datapath::<4, 4>::new());
        let r = dp.handle_msg(&bytes);
        prop_assert_eq!(dp.stats().total_errors(), u64::from(r.is_err()));
    }

    /// Valid messages with a random header type/len or cut short: typed errors only.
    #[test]
    fn mutated_valid_messages(which in 0usize..4, cut in 0usize..200, typ in 0u16..8, len: u16) {
        let (install, _, _) = compile_install(PROGRAMS[which]);
        let regs = update_regs();
        let upd = update_fields(7, vec![(regs[0].clone(), 5), (regs[2].clone(), 9)]);
        let chg = change_prog(7, 3, vec![(regs[3].clone(), 5)]);
        for m in [install, upd, chg] {
            let cut = cut.min(m.len());
            prop_assert!(wire::parse(&m[..cut]).is_err() || cut == m.len());
            let mut t = m.clone();
            t[0..2].copy_from_slice(&typ.to_le_bytes());
            let _ = wire::parse(&t);
            let mut l = m.clone();
            l[2..4].copy_from_slice(&len.to_le_bytes());
            if usize::from(len) != m.len() {
                prop_assert!(wire::parse(&l).is_err());
            }
        }
    }
}

#[test]
fn specific_errors() {
    assert_eq!(wire::parse(&[]), Err(Error::Truncated));
    assert_eq!(wire::parse(&[2, 0, 7, 0, 0, 0, 0]), Err(Error::Truncated));
    assert_eq!(
        wire::parse(&[2, 0, 7, 0, 0, 0, 0, 0]),
        Err(Error::BadLength)
    );
    assert_eq!(
        wire::parse(&[2, 0, 9, 0, 0, 0, 0, 0]),
        Err(Error::BadLength)
    );
    assert_eq!(
        wire::parse(&[9, 0, 8, 0, 0, 0, 0, 0]),
        Err(Error::UnknownType)
    );
    assert_eq!(
        wire::parse(&[5, 0, 8, 0, 0, 0, 0, 0]),
        Err(Error::LengthMismatch)
    );
    // Found by fuzzing: a READY with a non-zero sid re-serialises with that sid.
    let ready = [5, 0, 12, 0, 12, 40, 40, 160, 0, 40, 0, 1];
    let (m, _) = wire::parse(&ready).unwrap();
    let mut out = [0u8; 12];
    m.write(&mut out).unwrap();
    assert_eq!(out, ready);
    // INSTALL claiming 1000 instructions.
    let mut m = vec![2, 0, 20, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(&1000u32.to_le_bytes());
    assert_eq!(wire::parse(&m), Err(Error::TooManyInstrs));
    // UPDATE_FIELDS claiming 2 updates but carrying 1.
    let regs = update_regs();
    let mut u = update_fields(1, vec![(regs[0].clone(), 1)]);
    u[8] = 2;
    assert_eq!(wire::parse(&u), Err(Error::LengthMismatch));
    // Trailing padding after a message is ignored (netlink aligns to 4 bytes).
    let mut p = update_fields(1, vec![(regs[0].clone(), 1)]);
    let n = p.len();
    p.extend_from_slice(&[0, 0, 0]);
    assert_eq!(wire::parse(&p).unwrap().1, n);
    // Output buffer too small, name too long.
    assert_eq!(
        wire::write_ready(&mut [0u8; 11], 1),
        Err(Error::BufferTooSmall)
    );
    let mut c = wire::Create {
        sid: 1,
        init_cwnd: 0,
        mss: 0,
        src_ip: 0,
        src_port: 0,
        dst_ip: 0,
        dst_port: 0,
        alg: [0; 64],
    };
    assert_eq!(c.set_alg_name(&[b'a'; 64]), Err(Error::AlgNameTooLong));
    assert!(c.set_alg_name(&[b'a'; 63]).is_ok());
    assert_eq!(
        wire::write_measure(&mut [0u8; 100_000], 1, 1, &[0u64; 9000]),
        Err(Error::MsgTooLong)
    );
}

/// Documents a portus 0.9 defect we work around: `serialize/create.rs` can serialise CREATE only
/// without an algorithm name. A name of up to 63 bytes panics in `copy_from_slice` (64-byte
/// buffer), a 64-byte name is refused as too long. Our datapath writes the name NUL-padded
/// itself, which portus parses fine (see `create_round_trip`).
#[test]
fn portus_create_cannot_serialise_a_name() {
    let mk = |name: &str| serialize::create::Msg {
        sid: 1,
        init_cwnd: 1,
        mss: 1,
        src_ip: 0,
        src_port: 0,
        dst_ip: 0,
        dst_port: 0,
        cong_alg: Some(name.to_string()),
    };
    let short = std::panic::catch_unwind(|| serialize::serialize(&mk("mltcp")));
    assert!(short.is_err(), "portus panics on a short name");
    assert!(
        serialize::serialize(&mk(&"x".repeat(64))).is_err(),
        "portus refuses 64 bytes"
    );
}

/// Writes fuzz seeds (`fuzz/seeds/`): scripts for `fuzz/fuzz_targets/datapath.rs` that start a
/// flow, install a portus-compiled program, switch the flow to it and invoke it a few times.
/// Run with `cargo test -p ccp-datapath --test wire_portus -- --ignored write_fuzz_seeds`.
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    std::fs::create_dir_all(&dir).unwrap();
    let raw = |s: &mut Vec<u8>, msg: &[u8]| {
        let words = msg.len().div_ceil(4);
        s.push(0);
        s.push(u8::try_from(words).unwrap());
        s.extend_from_slice(msg);
        s.resize(s.len() + words * 4 - msg.len(), 0);
    };
    for (k, src) in PROGRAMS.iter().enumerate() {
        let (install, sc, _) = compile_install(src);
        let mut s = 1000u64.to_le_bytes().to_vec();
        s.extend_from_slice(&[1, 5]);
        s.extend_from_slice(b"mltcp");
        s.extend_from_slice(&14480u32.to_le_bytes());
        s.extend_from_slice(&1448u32.to_le_bytes());
        s.push(1);
        raw(&mut s, &install);
        let cwnd = reg_of(&sc, "Cwnd");
        raw(
            &mut s,
            &change_prog((1 << 16) | 1, sc.program_uid, vec![(cwnd.clone(), 20000)]),
        );
        for i in 0..6u8 {
            s.extend_from_slice(&[3, 0, 200]); // invoke flow 0, clock += 50
            for v in [
                1448u32 >> 2,
                0,
                0,
                0,
                u32::from(i % 3 == 2),
                0,
                1,
                0,
                3,
                0,
                3,
                10,
                10,
                40,
                0,
                10,
            ] {
                s.push((v << 2) as u8);
            }
            s.extend_from_slice(&[0, 1]); // was_timeout, send ok
        }
        raw(&mut s, &update_fields((1 << 16) | 1, vec![(cwnd, 30000)]));
        s.extend_from_slice(&[2, 0]); // end the flow
        std::fs::write(dir.join(format!("portus_prog_{k}")), s).unwrap();
    }
}
