//! SET_CLASS, this project's per-flow traffic-class message (`wire::SET_CLASS`): its wire format
//! (round trip, bounds, malformed input), and how both datapaths stage it, apply it at the
//! flow's next invocation through `DatapathOps::set_class`, and count what they refuse.

mod common;

use ccp_datapath::wire::{self, Msg, SetClass, CLASS_RELEASE, DSCP_MAX, SET_CLASS, SET_CLASS_LEN};
use ccp_datapath::{
    Datapath, DropCause, Error, FlowInfo, FlowTable, Handled, InlineProgram, Invoked, Primitives,
    ProgramMaster, ProgramTable, ShardedDatapath, Shards,
};
use common::*;
use proptest::prelude::*;
use std::cell::RefCell;

/// SET_CLASS bytes built by hand: header, class byte, reserved bytes, with a chosen `len`.
fn raw(sid: u32, class: u8, reserved: [u8; 3], len: u16) -> Vec<u8> {
    let mut b = SET_CLASS.to_le_bytes().to_vec();
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&sid.to_le_bytes());
    b.push(class);
    b.extend_from_slice(&reserved);
    b
}

#[test]
fn layout_is_twelve_bytes_with_the_class_after_the_header() {
    let mut b = [0xaau8; 16];
    let n = wire::write_set_class(&mut b, 0x0003_0007, Some(46)).unwrap();
    assert_eq!(n, SET_CLASS_LEN);
    assert_eq!(SET_CLASS_LEN, 12);
    assert_eq!(&b[..n], &raw(0x0003_0007, 46, [0; 3], 12)[..]);
    assert_eq!(
        &b[..4],
        &[0x01, 0x4d, 12, 0],
        "type 0x4d01, len 12, little-endian"
    );
    let n = wire::write_set_class(&mut b, 9, None).unwrap();
    assert_eq!(b[8], CLASS_RELEASE, "release is 0xff");
    assert_eq!(
        wire::parse(&b[..n]).unwrap(),
        (Msg::SetClass(SetClass { sid: 9, dscp: None }), 12)
    );
}

#[test]
fn every_dscp_round_trips_and_others_are_refused() {
    let mut b = [0u8; SET_CLASS_LEN];
    for class in 0..=u8::MAX {
        let dscp = (class != CLASS_RELEASE).then_some(class);
        let msg = raw(5, class, [0; 3], 12);
        match (
            class <= DSCP_MAX || class == CLASS_RELEASE,
            wire::parse(&msg),
        ) {
            (true, Ok((m, 12))) => {
                assert_eq!(m, Msg::SetClass(SetClass { sid: 5, dscp }));
                assert_eq!(m.typ(), SET_CLASS);
                assert_eq!(m.write(&mut b), Ok(12));
                assert_eq!(&b[..], &msg[..], "re-serialises to its bytes");
            }
            (false, Err(Error::BadClass)) => {
                assert_eq!(
                    wire::write_set_class(&mut b, 5, Some(class)),
                    Err(Error::BadClass),
                    "the writer refuses DSCP {class} too"
                );
            }
            (ok, r) => panic!("class byte {class}: valid {ok}, parsed {r:?}"),
        }
    }
}

#[test]
fn malformed_set_class_is_refused_by_name() {
    let good = raw(5, 10, [0; 3], 12);
    assert!(wire::parse(&good).is_ok());
    for r in [[1, 0, 0], [0, 1, 0], [0, 0, 0x80]] {
        assert_eq!(
            wire::parse(&raw(5, 10, r, 12)),
            Err(Error::BadClass),
            "reserved {r:?}"
        );
    }
    // A longer message (len 13, a byte more) and a shorter one (len 11).
    let mut long = raw(5, 10, [0; 3], 13);
    long.push(0);
    assert_eq!(wire::parse(&long), Err(Error::LengthMismatch));
    assert_eq!(
        wire::parse(&raw(5, 10, [0; 3], 11)),
        Err(Error::LengthMismatch)
    );
    assert_eq!(
        wire::parse(&good[..11]),
        Err(Error::BadLength),
        "buffer shorter than len"
    );
    assert_eq!(wire::parse(&good[..6]), Err(Error::Truncated));
    // Padding after the message is not looked at (netlink pads to 4 bytes).
    let mut padded = good.clone();
    padded.extend_from_slice(&[0xff; 4]);
    assert_eq!(wire::parse(&padded).map(|(_, n)| n), Ok(12));
    assert_eq!(
        wire::write_set_class(&mut [0u8; 11], 5, Some(1)),
        Err(Error::BufferTooSmall)
    );
}

fn info() -> FlowInfo {
    FlowInfo {
        init_cwnd: 14480,
        mss: 1448,
        ..Default::default()
    }
}

fn set_class(sid: u32, dscp: Option<u8>) -> Vec<u8> {
    let mut b = vec![0u8; SET_CLASS_LEN];
    wire::write_set_class(&mut b, sid, dscp).unwrap();
    b
}

fn classes(ops: &mut MockOps) -> Vec<Option<u8>> {
    std::mem::take(&mut ops.acts)
        .into_iter()
        .filter_map(|a| match a {
            Act::Class(c) => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn staged_then_applied_once_at_the_next_invocation() {
    let mut dp = Box::new(Datapath::<4, 2>::new());
    let mut ops = MockOps::default();
    let sid = dp.flow_start(&info(), &mut ops).unwrap();
    let p = Primitives::default();
    assert_eq!(
        dp.handle_msg(&set_class(sid, Some(26))),
        Ok(Handled::ClassStaged {
            sid,
            dscp: Some(26)
        })
    );
    let f = dp.flow(sid).unwrap();
    assert_eq!((f.class(), f.class_pending()), (None, Some(Some(26))));
    assert!(
        classes(&mut ops).is_empty(),
        "nothing applied before an invocation"
    );
    // No program: the class still applies (the host decides whether the agent is in charge).
    assert_eq!(dp.flow_invoke(sid, &p, &mut ops), Ok(Invoked::NoProgram));
    assert_eq!(classes(&mut ops), [Some(26)]);
    assert_eq!(dp.flow(sid).unwrap().class(), Some(26));
    assert_eq!(dp.flow(sid).unwrap().class_pending(), None);
    // The same class again: no call; a later one replaces a staged one before it applies.
    dp.handle_msg(&set_class(sid, Some(26))).unwrap();
    dp.flow_invoke(sid, &p, &mut ops).unwrap();
    assert!(classes(&mut ops).is_empty());
    dp.handle_msg(&set_class(sid, Some(10))).unwrap();
    dp.handle_msg(&set_class(sid, Some(34))).unwrap();
    dp.flow_invoke(sid, &p, &mut ops).unwrap();
    assert_eq!(classes(&mut ops), [Some(34)]);
    // Release.
    dp.handle_msg(&set_class(sid, None)).unwrap();
    dp.flow_invoke(sid, &p, &mut ops).unwrap();
    assert_eq!(classes(&mut ops), [None]);
    assert_eq!(dp.flow(sid).unwrap().class(), None);
    assert_eq!(dp.stats().total_errors(), 0);
    assert_eq!(dp.stats().msgs_handled, 5);
}

#[test]
fn change_prog_keeps_a_staged_class() {
    let mut dp = Box::new(Datapath::<4, 2>::new());
    let mut ops = MockOps::default();
    let sid = dp.flow_start(&info(), &mut ops).unwrap();
    let (install, sc, _) =
        compile_install("(def (Report.acked 0)) (when true (:= Report.acked Ack.bytes_acked))");
    dp.handle_msg(&install).unwrap();
    dp.handle_msg(&set_class(sid, Some(18))).unwrap();
    dp.handle_msg(&change_prog(sid, sc.program_uid, vec![]))
        .unwrap();
    let r = dp.flow_invoke(sid, &Primitives::default(), &mut ops);
    assert!(matches!(r, Ok(Invoked::Ran { .. })), "{r:?}");
    assert_eq!(classes(&mut ops), [Some(18)]);
}

#[test]
fn refusals_are_counted_and_classified() {
    let mut dp = Box::new(Datapath::<4, 2>::new());
    let mut ops = MockOps::default();
    let sid = dp.flow_start(&info(), &mut ops).unwrap();
    // A bad class byte: refused, counted, malformed, nothing staged.
    let bad = raw(sid, 64, [0; 3], 12);
    assert_eq!(dp.handle_msg(&bad), Err(Error::BadClass));
    assert_eq!(dp.stats().count(Error::BadClass), 1);
    assert_eq!(dp.drop_cause(&bad, Error::BadClass), DropCause::Malformed);
    assert_eq!(dp.flow(sid).unwrap().class_pending(), None);
    // A wrong length.
    assert_eq!(
        dp.handle_msg(&raw(sid, 1, [0; 3], 11)),
        Err(Error::LengthMismatch)
    );
    // An id never handed out, then a flow that has ended.
    let never = set_class(0x0009_0003, Some(1));
    assert_eq!(dp.handle_msg(&never), Err(Error::UnknownFlow));
    assert_eq!(
        dp.drop_cause(&never, Error::UnknownFlow),
        DropCause::Malformed
    );
    dp.flow_end(sid, &mut ops).unwrap();
    let late = set_class(sid, Some(1));
    assert_eq!(dp.handle_msg(&late), Err(Error::UnknownFlow));
    assert_eq!(dp.drop_cause(&late, Error::UnknownFlow), DropCause::Late);
    assert_eq!(dp.stats().count(Error::UnknownFlow), 2);
    assert_eq!(dp.stats().total_errors(), 4);
    assert!(classes(&mut ops).is_empty());
}

#[test]
fn a_new_flow_in_a_reused_slot_starts_without_a_class() {
    let mut dp = Box::new(Datapath::<1, 1>::new());
    let mut ops = MockOps::default();
    let a = dp.flow_start(&info(), &mut ops).unwrap();
    dp.handle_msg(&set_class(a, Some(40))).unwrap();
    dp.flow_invoke(a, &Primitives::default(), &mut ops).unwrap();
    dp.handle_msg(&set_class(a, Some(8))).unwrap(); // staged, never applied
    dp.flow_end(a, &mut ops).unwrap();
    let b = dp.flow_start(&info(), &mut ops).unwrap();
    assert_ne!(a, b);
    let f = dp.flow(b).unwrap();
    assert_eq!((f.class(), f.class_pending()), (None, None));
    ops.acts.clear();
    dp.flow_invoke(b, &Primitives::default(), &mut ops).unwrap();
    assert!(classes(&mut ops).is_empty());
}

/// One shard of 4 flows and one program, unlocked (single-threaded test).
struct OneShard {
    table: RefCell<FlowTable<4>>,
    programs: RefCell<ProgramTable<1, InlineProgram>>,
    master: RefCell<ProgramMaster<1, InlineProgram>>,
}

impl Shards<4, 1, InlineProgram> for OneShard {
    fn with_shard<R>(
        &self,
        shard: usize,
        f: impl FnOnce(&mut FlowTable<4>, &mut ProgramTable<1, InlineProgram>) -> R,
    ) -> Option<R> {
        (shard == 0).then(|| {
            f(
                &mut self.table.borrow_mut(),
                &mut self.programs.borrow_mut(),
            )
        })
    }

    fn with_master<R>(&self, f: impl FnOnce(&mut ProgramMaster<1, InlineProgram>) -> R) -> R {
        f(&mut self.master.borrow_mut())
    }
}

#[test]
fn the_sharded_datapath_stages_it_under_the_flow_shard() {
    let host = OneShard {
        table: RefCell::new(FlowTable::new()),
        programs: RefCell::new(ProgramTable::new()),
        master: RefCell::new(ProgramMaster::new()),
    };
    let dp = ShardedDatapath::<1, 4, 1, InlineProgram>::new(0);
    let mut ops = MockOps::default();
    let sid = dp.flow_start(&host, &info(), &mut ops).unwrap();
    assert_eq!(
        dp.handle_msg(&host, &set_class(sid, Some(12))),
        Ok(Handled::ClassStaged {
            sid,
            dscp: Some(12)
        })
    );
    assert_eq!(
        dp.handle_msg(&host, &raw(sid, 200, [0; 3], 12)),
        Err((Error::BadClass, DropCause::Malformed))
    );
    dp.flow_invoke(&host, sid, &Primitives::default(), &mut ops)
        .unwrap();
    assert_eq!(classes(&mut ops), [Some(12)]);
    dp.flow_end(&host, sid, &mut ops).unwrap();
    assert_eq!(
        dp.handle_msg(&host, &set_class(sid, None)),
        Err((Error::UnknownFlow, DropCause::Late))
    );
    assert_eq!(dp.stats(&host).count(Error::BadClass), 1);
}

proptest! {
    /// Any 12-byte SET_CLASS-typed message parses or is refused by name, never panics, and a
    /// parsed one re-serialises to its bytes.
    #[test]
    fn arbitrary_bodies_parse_or_are_refused(sid in any::<u32>(), body in any::<[u8; 4]>(), len in 0u16..20) {
        let mut msg = raw(sid, body[0], [body[1], body[2], body[3]], len);
        msg.resize(usize::from(len).max(msg.len()), 0);
        match wire::parse(&msg) {
            Ok((m, n)) => {
                let mut out = [0u8; SET_CLASS_LEN];
                prop_assert_eq!(m.write(&mut out), Ok(n));
                prop_assert_eq!(&out[..], &msg[..n]);
            }
            Err(e) => prop_assert!(matches!(
                e,
                Error::BadClass | Error::LengthMismatch | Error::BadLength | Error::Truncated
            )),
        }
    }

    /// Whatever sequence of SET_CLASS and invocations, `set_class` is called exactly when the
    /// class in force changes, with the last class staged.
    #[test]
    fn set_class_calls_follow_the_last_staged_class(steps in prop::collection::vec(prop::option::of(prop::option::of(0u8..=DSCP_MAX)), 1..40)) {
        let mut dp = Box::new(Datapath::<2, 1>::new());
        let mut ops = MockOps::default();
        let sid = dp.flow_start(&info(), &mut ops).unwrap();
        let (mut now, mut staged) = (None, None);
        for s in steps {
            match s {
                Some(dscp) => {
                    dp.handle_msg(&set_class(sid, dscp)).unwrap();
                    staged = Some(dscp);
                }
                None => {
                    dp.flow_invoke(sid, &Primitives::default(), &mut ops).unwrap();
                    let want: Vec<Option<u8>> = match staged.take() {
                        Some(c) if c != now => { now = c; vec![c] }
                        _ => vec![],
                    };
                    prop_assert_eq!(classes(&mut ops), want);
                    prop_assert_eq!(dp.flow(sid).unwrap().class(), now);
                }
            }
        }
    }
}
