//! Fuzz target: message parsing plus program installation and execution.
//!
//! The input is a script of operations on one datapath (8 flows, 4 programs): raw messages
//! (parsed, re-serialised and handed to the datapath), structured INSTALL / UPDATE_FIELDS /
//! CHANGE_PROG / SET_CLASS messages built from the input (so that many programs pass validation
//! and run, and most classes are valid), flow starts and ends, and invocations with fuzzed
//! primitives and clock steps. Properties: no panic (overflow checks are on in this build), a
//! parsed message re-serialises to its bytes, every returned error is counted exactly once, and
//! `set_class` is called only with a DSCP (0..=63) or `None`, only when the flow's class changes,
//! and leaves that class in force.
//!
//! Every operation also runs on a second datapath that runs programs in the interpreter
//! (`ExecMode::Interpret`, the reference; the first runs them compiled, the default): after each
//! one both must have returned the same result, sent the same messages, made the same actuator
//! calls and hold the same flows (every register) and counters.
#![no_main]

use ccp_datapath::wire::{self, EventMsg, InstrMsg, RegMsg, UpdateField};
use ccp_datapath::{Datapath, DatapathOps, ExecMode, FlowInfo, Primitives, SendError};
use libfuzzer_sys::fuzz_target;

/// What a datapath did through its host, in order (compared between the two datapaths).
#[derive(Debug, PartialEq)]
enum Did {
    Sent(Vec<u8>),
    Cwnd(u64),
    Rate(u64),
    Class(Option<u8>),
}

struct Ops {
    now: u64,
    fail: bool,
    out: [u8; 256],
    /// The `set_class` calls of the current invocation.
    classes: Vec<Option<u8>>,
    /// Everything done since the last comparison.
    did: Vec<Did>,
}

impl DatapathOps for Ops {
    fn now_us(&self) -> u64 {
        self.now
    }
    fn send_msg(&mut self, msg: &[u8]) -> Result<(), SendError> {
        // Everything the datapath sends must parse.
        let (m, n) = wire::parse(msg).expect("datapath sent a malformed message");
        assert_eq!(n, msg.len());
        let k = m.write(&mut self.out).expect("re-serialise");
        assert_eq!(&self.out[..k], msg);
        self.did.push(Did::Sent(msg.to_vec()));
        if self.fail {
            Err(SendError)
        } else {
            Ok(())
        }
    }
    fn set_cwnd(&mut self, bytes: u64) {
        self.did.push(Did::Cwnd(bytes));
    }
    fn set_rate_abs(&mut self, bytes_per_sec: u64) {
        self.did.push(Did::Rate(bytes_per_sec));
    }
    fn set_class(&mut self, dscp: Option<u8>) {
        assert!(
            dscp.is_none_or(|d| d <= wire::DSCP_MAX),
            "set_class({dscp:?})"
        );
        self.classes.push(dscp);
        self.did.push(Did::Class(dscp));
    }
}

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*b)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes([
            self.byte()?,
            self.byte()?,
            self.byte()?,
            self.byte()?,
        ]))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from(self.u32()?) | (u64::from(self.u32()?) << 32))
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    /// A small value most of the time, anything sometimes.
    fn val(&mut self) -> Option<u64> {
        let sel = self.byte()?;
        Some(match sel % 4 {
            0 => u64::from(sel >> 2),
            1 => u64::from(self.u32()? % 100_000),
            2 => u64::from(self.u32()?),
            _ => self.u64()?,
        })
    }
    fn reg(&mut self) -> Option<RegMsg> {
        let t = self.byte()? % 10;
        let v = if t == 1 {
            self.val()? as u32
        } else {
            u32::from(self.byte()? % 20)
        };
        Some(RegMsg { typ: t, val: v })
    }
}

type Dp = Datapath<8, 4>;

/// The interpreter's datapath and its host, beside the compiled one under test.
struct Reference {
    dp: Box<Dp>,
    ops: Ops,
}

impl Reference {
    /// After an operation that returned `got` on the compiled datapath `dp` (with `ops`) and
    /// `want` here: the same result, the same things done, the same flows and counters.
    fn agree<T: PartialEq + std::fmt::Debug>(
        &mut self,
        dp: &Dp,
        ops: &mut Ops,
        sids: &[u32],
        got: T,
        want: T,
    ) {
        assert_eq!(got, want, "compiled against interpreted: result");
        assert_eq!(
            ops.did, self.ops.did,
            "compiled against interpreted: host calls"
        );
        ops.did.clear();
        self.ops.did.clear();
        for &s in sids {
            assert_eq!(
                dp.flow(s),
                self.dp.flow(s),
                "compiled against interpreted: flow {s}"
            );
        }
        assert_eq!(
            dp.stats(),
            self.dp.stats(),
            "compiled against interpreted: counters"
        );
    }

    /// The same clock and send failure as the compiled datapath's host.
    fn sync(&mut self, ops: &Ops) {
        self.ops.now = ops.now;
        self.ops.fail = ops.fail;
    }
}

fn check_msg(
    dp: &mut Dp,
    rf: &mut Reference,
    ops: &mut Ops,
    sids: &[u32],
    msg: &[u8],
    scratch: &mut [u8],
) {
    if let Ok((m, n)) = wire::parse(msg) {
        let k = m.write(scratch).expect("re-serialise parsed message");
        assert_eq!(&scratch[..k], &msg[..n]);
    }
    let before = dp.stats().total_errors();
    let r = dp.handle_msg(msg);
    assert_eq!(dp.stats().total_errors() - before, u64::from(r.is_err()));
    let want = rf.dp.handle_msg(msg);
    rf.agree(dp, ops, sids, r, want);
}

fn run(data: &[u8]) -> Option<()> {
    let new_ops = || Ops {
        now: 0,
        fail: false,
        out: [0; 256],
        classes: Vec::new(),
        did: Vec::new(),
    };
    let mut dp = Box::new(Dp::new());
    dp.set_exec_mode(ExecMode::Compiled);
    let mut ops = new_ops();
    let mut rf = Reference {
        dp: Box::new(Dp::new()),
        ops: new_ops(),
    };
    rf.dp.set_exec_mode(ExecMode::Interpret);
    let mut inp = Input(data);
    let mut sids: Vec<u32> = Vec::new();
    let mut uids: Vec<u32> = vec![1, 2, 3];
    let mut buf = vec![0u8; 4096];
    let mut scratch = vec![0u8; 4096];
    ops.now = inp.u64()?;
    dp.init(ops.now);
    rf.dp.init(ops.now);
    let pick_sid = |inp: &mut Input, sids: &[u32]| -> Option<u32> {
        let b = inp.byte()?;
        Some(if sids.is_empty() || b == 255 {
            inp.u32()?
        } else {
            sids[usize::from(b) % sids.len()]
        })
    };
    while let Some(tag) = inp.byte() {
        match tag % 9 {
            0 => {
                let len = usize::from(inp.byte()?) * 4;
                let msg = inp.take(len).to_vec();
                check_msg(&mut dp, &mut rf, &mut ops, &sids, &msg, &mut scratch);
            }
            1 => {
                let l = usize::from(inp.byte()? % 20);
                let alg = inp.take(l).to_vec();
                let info = FlowInfo {
                    init_cwnd: inp.u32()?,
                    mss: inp.u32()?,
                    ..Default::default()
                };
                let info = info.with_alg_name(&alg).unwrap_or(info);
                ops.fail = inp.byte()? % 8 == 0;
                rf.sync(&ops);
                let r = dp.flow_start(&info, &mut ops);
                let want = rf.dp.flow_start(&info, &mut rf.ops);
                if let Ok(s) = r {
                    sids.push(s);
                }
                rf.agree(&dp, &mut ops, &sids, r, want);
                ops.fail = false;
            }
            2 => {
                let s = pick_sid(&mut inp, &sids)?;
                rf.sync(&ops);
                let r = dp.flow_end(s, &mut ops);
                let want = rf.dp.flow_end(s, &mut rf.ops);
                sids.retain(|&x| x != s);
                rf.agree(&dp, &mut ops, &sids, r, want);
            }
            3 | 4 => {
                let s = pick_sid(&mut inp, &sids)?;
                ops.now = ops.now.wrapping_add(inp.val()?);
                let prims = Primitives {
                    bytes_acked: inp.val()?,
                    bytes_misordered: inp.val()?,
                    ecn_bytes: inp.val()?,
                    ecn_packets: inp.val()?,
                    lost_pkts_sample: inp.val()?,
                    packets_acked: inp.val()?,
                    packets_misordered: inp.val()?,
                    bytes_in_flight: inp.val()?,
                    bytes_pending: inp.val()?,
                    packets_in_flight: inp.val()?,
                    rate_incoming: inp.val()?,
                    rate_outgoing: inp.val()?,
                    rtt_sample_us: inp.val()?,
                    was_timeout: inp.byte()? & 1 == 1,
                    snd_cwnd: inp.val()?,
                    snd_rate: inp.val()?,
                };
                ops.fail = inp.byte()? % 16 == 0;
                let before = dp.stats().total_errors();
                let class_before = dp.flow(s).map(|f| f.class());
                rf.sync(&ops);
                let r = dp.flow_invoke(s, &prims, &mut ops);
                let want = rf.dp.flow_invoke(s, &prims, &mut rf.ops);
                rf.ops.classes.clear();
                // At most one class change per invocation, to a class not in force before,
                // which is in force after.
                let calls = std::mem::take(&mut ops.classes);
                assert!(calls.len() <= 1, "set_class calls {calls:?}");
                if let Some(&c) = calls.first() {
                    assert_ne!(class_before, Some(c), "set_class without a change");
                    assert_eq!(dp.flow(s).map(|f| f.class()), Some(c));
                }
                let extra = u64::from(matches!(
                    r,
                    Ok(ccp_datapath::Invoked::Ran {
                        report: ccp_datapath::ReportStatus::SendFailed
                    })
                ));
                assert_eq!(
                    dp.stats().total_errors() - before,
                    u64::from(r.is_err()) + extra
                );
                rf.agree(&dp, &mut ops, &sids, r, want);
                ops.fail = false;
            }
            5 => {
                // A structured program: mostly valid, so that it installs and runs.
                let uid = match inp.byte()? % 4 {
                    0 => 1,
                    1 => inp.u32()?,
                    _ => u32::from(inp.byte()? % 6),
                };
                let ni = usize::from(inp.byte()? % 24);
                let ne = usize::from(inp.byte()? % 6);
                let mut instrs = Vec::with_capacity(ni);
                for _ in 0..ni {
                    let op = inp.byte()? % 16;
                    instrs.push(InstrMsg {
                        op,
                        ret: inp.reg()?,
                        left: inp.reg()?,
                        right: inp.reg()?,
                    });
                }
                let mut events = Vec::with_capacity(ne);
                let n = ni as u32 + 1;
                for _ in 0..ne {
                    events.push(EventMsg {
                        cond_start: u32::from(inp.byte()?) % n,
                        cond_len: u32::from(inp.byte()?) % n,
                        body_start: u32::from(inp.byte()?) % n,
                        body_len: u32::from(inp.byte()?) % n,
                    });
                }
                if let Ok(k) = wire::write_install(&mut buf, 0, uid, &events, &instrs) {
                    uids.push(uid);
                    let msg = buf[..k].to_vec();
                    check_msg(&mut dp, &mut rf, &mut ops, &sids, &msg, &mut scratch);
                }
            }
            6 | 7 => {
                let s = pick_sid(&mut inp, &sids)?;
                let n = usize::from(inp.byte()? % 6);
                let mut ups = Vec::with_capacity(n);
                for _ in 0..n {
                    let t = [0u8, 2, 8, 2, 5, 0][usize::from(inp.byte()?) % 6];
                    ups.push(UpdateField {
                        reg_type: t,
                        reg_index: u32::from(inp.byte()? % 18),
                        value: inp.val()?,
                    });
                }
                let k = if tag % 8 == 6 {
                    wire::write_update_fields(&mut buf, s, &ups)
                } else {
                    let uid = uids[usize::from(inp.byte()?) % uids.len()];
                    wire::write_change_prog(&mut buf, s, uid, &ups)
                };
                if let Ok(k) = k {
                    let msg = buf[..k].to_vec();
                    check_msg(&mut dp, &mut rf, &mut ops, &sids, &msg, &mut scratch);
                }
            }
            8 => {
                // SET_CLASS: a DSCP most of the time, release or a bad byte sometimes, and now
                // and then a non-zero reserved byte.
                let s = pick_sid(&mut inp, &sids)?;
                let class = match inp.byte()? {
                    b @ 0..=191 => b % 64,
                    b @ 192..=223 => b,
                    _ => wire::CLASS_RELEASE,
                };
                let reserved = if inp.byte()? % 16 == 0 {
                    inp.byte()?
                } else {
                    0
                };
                let mut msg = [0u8; wire::SET_CLASS_LEN];
                msg[..2].copy_from_slice(&wire::SET_CLASS.to_le_bytes());
                msg[2..4].copy_from_slice(&(wire::SET_CLASS_LEN as u16).to_le_bytes());
                msg[4..8].copy_from_slice(&s.to_le_bytes());
                msg[8] = class;
                msg[9] = reserved;
                let before = dp.flow(s).map(|f| f.class_pending());
                check_msg(&mut dp, &mut rf, &mut ops, &sids, &msg, &mut scratch);
                // A refused SET_CLASS stages nothing.
                if class > wire::DSCP_MAX && class != wire::CLASS_RELEASE || reserved != 0 {
                    assert_eq!(dp.flow(s).map(|f| f.class_pending()), before);
                }
            }
            _ => unreachable!(),
        }
    }
    Some(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(data);
});
