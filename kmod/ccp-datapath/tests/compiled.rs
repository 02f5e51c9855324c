//! Differential tests of the compiled path (`ccp_datapath::compiled`) against the interpreter
//! (the reference, libccp's machine.c semantics): two datapaths, one in each [`ExecMode`], get
//! the same messages and the same ACKs, and after every message and every ACK must hold the
//! same flow state (every register, the flow's time zero, staged updates, class), the same
//! counters, and must have sent the same reports and made the same actuator calls (cwnd, rate,
//! class) with the same result.
//!
//! Programs: every shipped program (`datapath-programs/*.ccp`, and ccp-test-agent's Reno in each
//! of its window rules), portus-compiled random programs, and raw INSTALLs portus never emits
//! (flags written by arbitrary instructions, DEFs inside events, shared and empty instruction
//! ranges, `Micros` written by any operation), each under random scenarios.

mod common;

use ccp_datapath::wire::{self, EventMsg, InstrMsg, RegMsg, UpdateField};
use ccp_datapath::{program_lines, Datapath, Error, ExecMode, FlowInfo, Invoked, Primitives};
use common::arb::*;
use common::*;
use portus::lang::Reg;
use proptest::prelude::*;

use common::per_ack::reno_program;

type Dp = Datapath<4, 8>;

/// The two datapaths: `[interpreted, compiled]`, each with its own host.
struct Pair {
    dps: [Box<Dp>; 2],
    ops: [MockOps; 2],
    sid: u32,
}

impl Pair {
    fn new(now: u64) -> Pair {
        let mut dps = [Box::new(Dp::new()), Box::new(Dp::new())];
        dps[0].set_exec_mode(ExecMode::Interpret);
        dps[1].set_exec_mode(ExecMode::Compiled);
        let mut ops = [MockOps::default(), MockOps::default()];
        let info = FlowInfo {
            init_cwnd: 14_480,
            mss: 1448,
            ..Default::default()
        };
        let mut sids = [0u32; 2];
        for k in 0..2 {
            ops[k].now = now;
            dps[k].init(now);
            sids[k] = dps[k].flow_start(&info, &mut ops[k]).unwrap();
        }
        assert_eq!(sids[0], sids[1]);
        let mut p = Pair {
            dps,
            ops,
            sid: sids[0],
        };
        p.check("start").unwrap();
        p
    }

    /// Both datapaths agree on everything observable; clears what the hosts recorded.
    fn check(&mut self, what: &str) -> Result<(), TestCaseError> {
        let [a, b] = &mut self.ops;
        prop_assert_eq!(&a.sent, &b.sent, "{}: messages sent", what);
        prop_assert_eq!(&a.acts, &b.acts, "{}: actuator calls", what);
        a.sent.clear();
        a.acts.clear();
        b.sent.clear();
        b.acts.clear();
        let [x, y] = &self.dps;
        prop_assert_eq!(x.flow(self.sid), y.flow(self.sid), "{}: flow state", what);
        prop_assert_eq!(x.stats(), y.stats(), "{}: counters", what);
        Ok(())
    }

    /// Hands both datapaths one message.
    fn msg(&mut self, bytes: &[u8], what: &str) -> Result<(), TestCaseError> {
        let r0 = self.dps[0].handle_msg(bytes);
        let r1 = self.dps[1].handle_msg(bytes);
        prop_assert_eq!(r0, r1, "{}: result", what);
        self.check(what)
    }

    /// One ACK `dt` µs after the previous one, on both.
    fn ack(&mut self, dt: u64, prims: &Primitives, what: &str) -> Result<(), TestCaseError> {
        let mut rs: [Result<Invoked, Error>; 2] = [Ok(Invoked::NoProgram); 2];
        for (k, r) in rs.iter_mut().enumerate() {
            self.ops[k].now = self.ops[k].now.wrapping_add(dt);
            *r = self.dps[k].flow_invoke(self.sid, prims, &mut self.ops[k]);
        }
        prop_assert_eq!(rs[0], rs[1], "{}: result", what);
        self.check(what)
    }
}

/// Runs portus programs `srcs` (installed in order, the first switched to first) under a
/// scenario; `names` are the variables updates may set. Returns the pair for further checks.
fn run_pair(srcs: &[String], names: &[&str], steps: &[Step]) -> Result<Pair, TestCaseError> {
    let compiled: Vec<_> = srcs.iter().map(|s| compile_install(s)).collect();
    let mut p = Pair::new(1_000_000);
    for (k, (bytes, sc, _)) in compiled.iter().enumerate() {
        p.msg(bytes, &format!("INSTALL {k}"))?;
        let prog = p.dps[1].program(sc.program_uid).unwrap();
        prop_assert!(prog.compiled().ready(), "program {} compiled", k);
    }
    let regs = |scope: usize, ups: &[(usize, u64)]| -> Vec<(Reg, u64)> {
        ups.iter()
            .filter_map(|&(i, v)| {
                compiled[scope]
                    .1
                    .get(names[i % names.len()])
                    .map(|r| (r.clone(), v))
            })
            .collect()
    };
    let mut cur = 0usize;
    let first = [Step::Change {
        prog: 0,
        updates: vec![],
    }];
    for (k, step) in first.iter().chain(steps).enumerate() {
        let what = format!("step {k}: {step:?}");
        match step {
            Step::Invoke { dt, prims } => p.ack(*dt, prims, &what)?,
            Step::Update(ups) => {
                let m = update_fields(p.sid, regs(cur, ups));
                p.msg(&m, &what)?;
            }
            Step::Change { prog, updates } => {
                let (uid, sc) = match compiled.get(*prog) {
                    Some(c) => (c.1.program_uid, *prog),
                    None => (u32::MAX - 1, cur),
                };
                p.msg(&change_prog(p.sid, uid, regs(sc, updates)), &what)?;
                if *prog < compiled.len() {
                    cur = *prog;
                }
            }
            Step::Class(dscp) => {
                let mut b = [0u8; wire::SET_CLASS_LEN];
                wire::write_set_class(&mut b, p.sid, *dscp).unwrap();
                p.msg(&b, &what)?;
            }
        }
    }
    Ok(p)
}

/// The shipped programs: every `datapath-programs/*.ccp` as ccp-agent loads it (without its
/// comment lines), and ccp-test-agent's Reno with each window rule, with and without a report
/// floor.
fn shipped() -> Vec<(String, String)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../datapath-programs");
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ccp"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no program in {dir}");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let src = program_lines(&text).collect::<Vec<_>>().join("\n");
        out.push((f.display().to_string(), src));
    }
    for rule in [
        reno_program::INFLIGHT_KERNEL,
        reno_program::INFLIGHT_HALF_PEAK,
        reno_program::INFLIGHT_HALF_AT_REPORT,
    ] {
        for floor in [0, 10_000] {
            out.push((
                format!("reno {rule} floor {floor}"),
                reno_program::text(floor, rule),
            ));
        }
    }
    out
}

/// The variables ccp-agent and ccp-test-agent set in their programs (names absent from a
/// program's scope are skipped).
const SHIPPED_NAMES: &[&str] = &[
    "Control.slot_us",
    "Control.cwnd_cap",
    "Control.scavenge_us",
    "Cwnd",
    "Rate",
];

/// ACKs of a bulk flow: 1-4 segments acked, losses and timeouts now and then, RTT samples
/// around a base with queueing, occasional ACKs that ack nothing.
fn arb_flow_prims() -> impl Strategy<Value = Primitives> {
    (
        prop_oneof![1 => Just(0u64), 6 => 1u64..5],
        prop_oneof![12 => Just(0u64), 1 => 1u64..4],
        prop_oneof![20 => Just(false), 1 => Just(true)],
        prop_oneof![1 => Just(0u64), 8 => 50u64..5_000],
        0u64..400,
        prop_oneof![0u64..4, 1_000u64..4_000_000],
        0u64..2_000_000_000,
    )
        .prop_map(|(segs, lost, to, rtt, inflight, cwnd, rate)| Primitives {
            bytes_acked: segs * 1448,
            packets_acked: segs,
            lost_pkts_sample: lost,
            was_timeout: to,
            rtt_sample_us: rtt,
            packets_in_flight: inflight,
            bytes_in_flight: inflight * 1448,
            rate_incoming: rate,
            rate_outgoing: rate / 2,
            snd_cwnd: cwnd,
            snd_rate: rate,
            ..Primitives::default()
        })
}

/// Scenarios for the shipped programs: mostly ACKs (realistic or arbitrary), with the agents'
/// updates (slot length, window ceiling, scavenger target, window, rate) and class changes.
fn arb_shipped_steps() -> impl Strategy<Value = Vec<Step>> {
    let update = prop::collection::vec(
        (
            0usize..5,
            prop_oneof![0u64..3, 0u64..100_000, 0u64..=u64::from(u32::MAX)],
        ),
        1..3,
    );
    let step = prop_oneof![
        12 => (prop_oneof![0u64..30, 0u64..70_000], arb_flow_prims()).prop_map(|(dt, prims)| Step::Invoke { dt, prims }),
        3 => (0u64..5000, arb_prims()).prop_map(|(dt, prims)| Step::Invoke { dt, prims }),
        2 => update.clone().prop_map(Step::Update),
        1 => update.prop_map(|updates| Step::Change { prog: 0, updates }),
        1 => prop::option::of(0u8..=63).prop_map(Step::Class),
    ];
    prop::collection::vec(step, 1..120)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Every shipped program, under flows of ACKs and the agents' updates.
    #[test]
    fn shipped_programs_compiled_match_interpreted(which in 0usize..64, steps in arb_shipped_steps()) {
        let progs = shipped();
        let (_, src) = &progs[which % progs.len()];
        run_pair(std::slice::from_ref(src), SHIPPED_NAMES, &steps)?;
    }
}

/// Each shipped program over a long fixed flow: slow start, losses, scavenger mode on and off,
/// ceiling changes, with reports along the way.
#[test]
fn shipped_programs_long_flow() {
    for (name, src) in shipped() {
        let mut steps = Vec::new();
        let mut cwnd = 14_480u64;
        for i in 0..20_000u64 {
            let prims = Primitives {
                bytes_acked: 2 * 1448,
                packets_acked: 2,
                lost_pkts_sample: u64::from(i % 997 == 0),
                rtt_sample_us: 200 + (i % 50) * 20,
                packets_in_flight: if i % 3001 == 0 { 0 } else { 40 },
                snd_cwnd: cwnd,
                rate_incoming: 1_000_000_000,
                rate_outgoing: 900_000_000,
                ..Primitives::default()
            };
            cwnd = (cwnd + 1448).min(4_000_000);
            steps.push(Step::Invoke { dt: 7, prims });
            match i % 5000 {
                1000 => steps.push(Step::Update(vec![(2, 500)])),
                2500 => steps.push(Step::Update(vec![(2, 0), (1, 100_000)])),
                4000 => steps.push(Step::Update(vec![(1, 16_777_216), (3, 30_000)])),
                _ => {}
            }
        }
        let p = run_pair(std::slice::from_ref(&src), SHIPPED_NAMES, &steps)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            p.dps[1].stats().reports_sent > 0,
            "{name}: the flow reported"
        );
    }
}

/// The compiled form is smaller than the interpreter's work per ACK: DEFs, redundant flag writes
/// and event tests are gone and `op tmp; bind dst tmp` pairs are fused (what makes it cheaper).
#[test]
fn shipped_programs_compile_to_fewer_steps() {
    for (name, src) in shipped() {
        let (install, sc, _) = compile_install(&src);
        let mut dp = Box::new(Dp::new());
        dp.handle_msg(&install).unwrap();
        let prog = dp.program(sc.program_uid).unwrap();
        let c = prog.compiled();
        assert!(c.ready(), "{name}");
        let in_events: usize = prog
            .events()
            .iter()
            .map(|e| usize::from(e.cond_len) + usize::from(e.body_len))
            .sum();
        println!(
            "{name}: {} instructions ({in_events} in events, {} events) -> {} steps",
            prog.instrs().len(),
            prog.events().len(),
            c.steps().len()
        );
        // The interpreter also tests the flags twice per event.
        assert!(
            c.steps().len() <= in_events && c.steps().len() < in_events + prog.events().len(),
            "{name}: {} steps",
            c.steps().len()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random portus programs (two, switched between), random primitives and updates.
    #[test]
    fn random_programs_compiled_match_interpreted(p0 in arb_program(), p1 in arb_program(), steps in arb_steps(2)) {
        run_pair(&[p0, p1], NAMES, &steps)?;
    }

    /// The hand-written programs of the libccp differential tests.
    #[test]
    fn fixed_programs_compiled_match_interpreted(which in 0usize..FIXED.len(), other in 0usize..FIXED.len(), steps in arb_steps(2)) {
        run_pair(&[FIXED[which].to_string(), FIXED[other].to_string()], NAMES, &steps)?;
    }
}

/// `(fallthrough)` in an event that fires only sometimes: whether a later event that fires
/// without `(fallthrough)` stops the run is known only at run time, so the compiled form keeps
/// the test there (and runs the last event exactly when the interpreter does).
#[test]
fn sticky_fallthrough_from_a_conditional_event() {
    let src = "(def (Report (volatile r0 0) (volatile r1 0) (volatile r2 0)) (c0 0) (c1 0) (volatile vc0 0))
        (when (> Ack.bytes_acked 5) (:= Report.r0 (+ Report.r0 1)) (fallthrough))
        (when true (:= Report.r1 (+ Report.r1 1)))
        (when true (:= Report.r2 (+ Report.r2 1)) (report))";
    let steps: Vec<Step> = [0u64, 10, 3, 7, 0, 0, 9]
        .iter()
        .map(|&b| Step::Invoke {
            dt: 1,
            prims: Primitives {
                bytes_acked: b,
                ..Primitives::default()
            },
        })
        .collect();
    let p = run_pair(&[src.to_string()], NAMES, &steps).unwrap();
    // The ACKs that acked more than 5 bytes reached the last event and reported.
    assert_eq!(p.dps[0].stats().reports_sent, 3);
}

// ---------------------------------------------------------------------------------------------
// Raw INSTALLs: what portus never emits, but an agent may send.

/// An operand: mostly registers the program shares (flags, `Micros`, `Cwnd`, a few report,
/// control, temporary and local registers, primitives), immediates often.
fn arb_reg() -> impl Strategy<Value = RegMsg> {
    prop_oneof![
        3 => (prop_oneof![0u32..3, 0u32..100_000, Just(0x3fff_ffff), any::<u32>()]).prop_map(|val| RegMsg { typ: 1, val }),
        2 => (0u32..6).prop_map(|val| RegMsg { typ: 2, val }),
        3 => (prop::sample::select(&[0u8, 3, 4, 5, 6, 7, 8][..]), 0u32..3).prop_map(|(typ, val)| RegMsg { typ, val }),
    ]
}

/// A result register: never an immediate or a primitive.
fn arb_ret() -> impl Strategy<Value = RegMsg> {
    arb_reg().prop_map(|r| match r.typ {
        1 | 4 => RegMsg {
            typ: 7,
            val: r.val % 3,
        },
        _ => r,
    })
}

/// An instruction: any operation, or often a constant write of an implicit register (what
/// `(when true ..)`, `(fallthrough)`, `(report)` and `(:= Micros 0)` compile to, and what the
/// compiled form's flag tracking reasons about).
fn arb_instr() -> impl Strategy<Value = InstrMsg> {
    let op =
        (0u8..15, arb_ret(), arb_reg(), arb_reg()).prop_map(|(op, ret, left, right)| InstrMsg {
            op,
            ret,
            left,
            right,
        });
    let flag = (0u32..4, prop_oneof![Just(0u32), Just(1), any::<u32>()]).prop_map(|(i, v)| {
        let ret = RegMsg { typ: 2, val: i };
        InstrMsg {
            op: 1,
            ret,
            left: ret,
            right: RegMsg { typ: 1, val: v },
        }
    });
    prop_oneof![2 => op, 1 => flag]
}

/// A raw program: a DEF prefix, then instructions, and events over arbitrary (possibly
/// overlapping, empty or shared) ranges.
fn arb_raw_program() -> impl Strategy<Value = (Vec<EventMsg>, Vec<InstrMsg>)> {
    let def = (
        prop::sample::select(&[0u8, 5, 6, 8][..]),
        0u32..3,
        0u32..1000,
    )
        .prop_map(|(typ, val, d)| InstrMsg {
            op: 2,
            ret: RegMsg { typ, val },
            left: RegMsg { typ, val },
            right: RegMsg { typ: 1, val: d },
        });
    (
        prop::collection::vec(def, 0..4),
        prop::collection::vec(arb_instr(), 1..24),
    )
        .prop_flat_map(|(defs, body)| {
            let n = (defs.len() + body.len()) as u32;
            let first = defs.len() as u32;
            let ev =
                (first..n, 0u32..4, first..n + 1, 0u32..8).prop_map(move |(cs, cl, bs, bl)| {
                    let cl = cl.min(n - cs);
                    let bs = bs.min(n);
                    EventMsg {
                        cond_start: cs,
                        cond_len: cl,
                        body_start: bs,
                        body_len: bl.min(n - bs),
                    }
                });
            let mut instrs = defs;
            instrs.extend(body);
            (prop::collection::vec(ev, 1..6), Just(instrs))
        })
}

fn arb_raw_update() -> impl Strategy<Value = UpdateField> {
    (
        prop::sample::select(&[0u8, 8, 2][..]),
        0u32..6,
        prop_oneof![0u64..3, 0u64..100_000, any::<u64>()],
    )
        .prop_map(|(reg_type, i, value)| UpdateField {
            reg_type,
            // Implicit: Cwnd (4) or Rate (5); control: 0..=2.
            reg_index: if reg_type == 2 { 4 + i % 2 } else { i % 3 },
            value,
        })
}

/// A step of a raw scenario.
#[derive(Clone, Debug)]
enum RawStep {
    Ack(u64, Primitives),
    Update(Vec<UpdateField>),
    Change(u32, Vec<UpdateField>),
}

fn arb_raw_steps() -> impl Strategy<Value = Vec<RawStep>> {
    let ups = || prop::collection::vec(arb_raw_update(), 0..3);
    prop::collection::vec(
        prop_oneof![
            10 => (prop_oneof![0u64..10, 0u64..5000], arb_prims()).prop_map(|(dt, p)| RawStep::Ack(dt, p)),
            2 => ups().prop_map(RawStep::Update),
            1 => (1u32..3, ups()).prop_map(|(uid, u)| RawStep::Change(uid, u)),
        ],
        1..40,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Raw programs (uids 1 and 2) under random ACKs, updates and switches.
    #[test]
    fn raw_programs_compiled_match_interpreted(
        p1 in arb_raw_program(),
        p2 in arb_raw_program(),
        steps in arb_raw_steps(),
    ) {
        let mut p = Pair::new(5_000);
        let mut buf = vec![0u8; 8192];
        for (uid, (events, instrs)) in [(1u32, &p1), (2, &p2)] {
            let n = wire::write_install(&mut buf, 0, uid, events, instrs).unwrap();
            p.msg(&buf[..n], &format!("INSTALL {uid}"))?;
        }
        let n = wire::write_change_prog(&mut buf, p.sid, 1, &[]).unwrap();
        p.msg(&buf[..n], "CHANGE_PROG 1")?;
        for (k, s) in steps.iter().enumerate() {
            let what = format!("step {k}: {s:?}");
            match s {
                RawStep::Ack(dt, prims) => p.ack(*dt, prims, &what)?,
                RawStep::Update(u) => {
                    let n = wire::write_update_fields(&mut buf, p.sid, u).unwrap();
                    p.msg(&buf[..n], &what)?;
                }
                RawStep::Change(uid, u) => {
                    let n = wire::write_change_prog(&mut buf, p.sid, *uid, u).unwrap();
                    p.msg(&buf[..n], &what)?;
                }
            }
        }
    }
}
