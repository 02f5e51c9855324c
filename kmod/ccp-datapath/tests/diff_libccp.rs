//! Differential tests against libccp 1.2 (the C reference datapath, built by the `libccp` crate):
//! the same portus-compiled programs, the same message bytes and the same primitive sequences
//! must give the same `set_cwnd`/`set_rate_abs` calls, the same MEASURE reports and the same
//! success/error per invocation.
//!
//! SET_CLASS, this project's own message, is interleaved too: libccp must refuse it as an unknown
//! type, we must accept it, and it must change nothing libccp can see (only `set_class` calls,
//! one per class change at the next invocation).
//!
//! libccp reads the wall clock through function pointers in `struct ccp_datapath`; the safe
//! wrapper does not expose them, so [`LibccpDp`] overwrites them with a per-thread manual clock
//! through a `#[repr(C)]` mirror of the struct (layout checked below and at run time). Values
//! stay below 2^32 where libccp's callbacks take u32 (`set_cwnd`, `set_rate_abs`).

mod common;

use ccp_datapath::{Datapath, Invoked, Primitives};
use common::*;
use portus::lang::Reg;
use proptest::prelude::*;
use std::cell::Cell;
use std::os::raw::c_void;
use std::sync::{Arc, Mutex};

// ---------------------------------------------------------------------------------------------
// libccp with a manual clock.

thread_local! {
    /// libccp's clock, in ns (its `now()` unit; `since_usecs` divides by 1000).
    static CLOCK_NS: Cell<u64> = const { Cell::new(0) };
}

extern "C" fn mock_now() -> u64 {
    CLOCK_NS.with(Cell::get)
}
extern "C" fn mock_since_usecs(then: u64) -> u64 {
    mock_now().wrapping_sub(then) / 1000
}
extern "C" fn mock_after_usecs(us: u64) -> u64 {
    mock_now().wrapping_add(us.wrapping_mul(1000))
}

/// `struct ccp_datapath` from libccp's `ccp.h` (gcc x86-64: 128 bytes; `now` at 40,
/// `max_connections` at 64, `fto_us` at 80, `max_programs` at 104).
#[repr(C)]
struct CcpDatapathMirror {
    set_cwnd: *const c_void,
    set_rate_abs: *const c_void,
    send_msg: *const c_void,
    log: *const c_void,
    time_zero: u64,
    now: Option<extern "C" fn() -> u64>,
    since_usecs: Option<extern "C" fn(u64) -> u64>,
    after_usecs: Option<extern "C" fn(u64) -> u64>,
    max_connections: usize,
    ccp_active_connections: *mut c_void,
    fto_us: u64,
    last_msg_sent: u64,
    in_fallback: bool,
    max_programs: usize,
    programs: *mut c_void,
    impl_: *mut c_void,
}
const _: () = assert!(std::mem::size_of::<CcpDatapathMirror>() == 128);
/// `sizeof(struct ccp_connection)` (gcc x86-64).
const CCP_CONNECTION_SIZE: usize = 216;
/// Connections we let libccp use (its wrapper mallocs 1024 without zeroing them).
const LIBCCP_CONNS: usize = 4;

struct Sink(Arc<Mutex<Vec<Vec<u8>>>>);
impl libccp::DatapathOps for Sink {
    fn send_msg(&mut self, msg: &[u8]) {
        self.0.lock().unwrap().push(msg.to_vec());
    }
}

#[derive(Default)]
struct LibccpFlow {
    acts: Vec<Act>,
}
impl libccp::CongestionOps for LibccpFlow {
    fn set_cwnd(&mut self, cwnd: u32) {
        self.acts.push(Act::Cwnd(u64::from(cwnd)));
    }
    fn set_rate_abs(&mut self, rate: u32) {
        self.acts.push(Act::Rate(u64::from(rate)));
    }
}

/// A libccp datapath on the manual clock, in a stable heap location.
struct LibccpDp {
    dp: Box<libccp::Datapath>,
    sent: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl LibccpDp {
    fn new(now_us: u64) -> Self {
        CLOCK_NS.with(|c| c.set(now_us * 1000));
        let sent = Arc::new(Mutex::new(vec![]));
        let dp = libccp::DatapathBuilder::default()
            .with_ops(Sink(sent.clone()))
            .with_id(7)
            .init()
            .unwrap();
        let mut dp = Box::new(dp);
        // SAFETY: `libccp::Datapath` is a newtype around `ccp_datapath`; the mirror has its C
        // layout, checked by the three known values the wrapper sets before we write anything.
        unsafe {
            let m = &mut *(&mut *dp as *mut libccp::Datapath as *mut CcpDatapathMirror);
            assert_eq!(
                (m.max_connections, m.max_programs, m.fto_us),
                (1024, 10, 1000),
                "ccp_datapath layout"
            );
            m.now = Some(mock_now);
            m.since_usecs = Some(mock_since_usecs);
            m.after_usecs = Some(mock_after_usecs);
            m.time_zero = mock_now();
            std::ptr::write_bytes(
                m.ccp_active_connections as *mut u8,
                0,
                LIBCCP_CONNS * CCP_CONNECTION_SIZE,
            );
            m.max_connections = LIBCCP_CONNS;
        }
        sent.lock().unwrap().clear(); // READY
        LibccpDp { dp, sent }
    }

    fn take_sent(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut *self.sent.lock().unwrap())
    }
}

fn libccp_prims(p: &Primitives) -> libccp::Primitives {
    libccp::Primitives::default()
        .with_bytes_acked(p.bytes_acked as u32)
        .with_packets_acked(p.packets_acked as u32)
        .with_bytes_misordered(p.bytes_misordered as u32)
        .with_packets_misordered(p.packets_misordered as u32)
        .with_ecn_bytes(p.ecn_bytes as u32)
        .with_ecn_packets(p.ecn_packets as u32)
        .with_lost_pkts_sample(p.lost_pkts_sample as u32)
        .with_was_timeout(p.was_timeout)
        .with_rtt_sample_us(p.rtt_sample_us)
        .with_rate_outgoing(p.rate_outgoing)
        .with_rate_incoming(p.rate_incoming)
        .with_bytes_in_flight(p.bytes_in_flight as u32)
        .with_packets_in_flight(p.packets_in_flight as u32)
        .with_snd_cwnd(p.snd_cwnd as u32)
        .with_snd_rate(p.snd_rate)
        .with_bytes_pending(p.bytes_pending as u32)
}

// ---------------------------------------------------------------------------------------------
// Scenarios.

/// One step of a scenario.
#[derive(Clone, Debug)]
enum Step {
    /// Advance the clock by `dt` µs, then invoke with these primitives.
    Invoke { dt: u64, prims: Primitives },
    /// UPDATE_FIELDS: (variable index into the scenario's updatable names, value).
    Update(Vec<(usize, u64)>),
    /// CHANGE_PROG to program `prog` (index; out of range = a uid nobody installed).
    Change {
        prog: usize,
        updates: Vec<(usize, u64)>,
    },
    /// SET_CLASS (ours only: libccp refuses the type): a DSCP, or `None` for release.
    Class(Option<u8>),
}

/// MEASURE contents, sid-free.
fn measures(msgs: &[Vec<u8>]) -> Vec<(u32, Vec<u64>)> {
    msgs.iter()
        .filter_map(
            |m| match ccp_datapath::wire::parse(m).expect("parse sent message").0 {
                ccp_datapath::wire::Msg::Measure(x) => {
                    Some((x.program_uid, x.fields.iter().collect()))
                }
                _ => None,
            },
        )
        .collect()
}

/// Runs programs `srcs` (first one is switched to first) through both datapaths, step by step,
/// and asserts identical observable behaviour. `names` are the variables UPDATE_FIELDS may set.
fn run_both(srcs: &[String], names: &[&str], steps: &[Step]) -> Result<(), TestCaseError> {
    let compiled: Vec<_> = srcs.iter().map(|s| compile_install(s)).collect();
    let scopes: Vec<_> = compiled.iter().map(|c| c.1.clone()).collect();
    let mut t: u64 = 1_000_000;

    let lc = LibccpDp::new(t);
    let mut lconn =
        libccp::Connection::start(&lc.dp, LibccpFlow::default(), libccp::FlowInfo::default())
            .unwrap();
    let lsid = 1u32;

    let mut ours = Box::new(Datapath::<4, 8>::new());
    let mut ops = MockOps {
        now: t,
        ..Default::default()
    };
    ours.init(t);
    let osid = ours
        .flow_start(&ccp_datapath::FlowInfo::default(), &mut ops)
        .unwrap();
    ops.sent.clear();
    lc.take_sent();

    for (bytes, _, _) in &compiled {
        let mut b = bytes.clone();
        lc.dp.recv_msg(&mut b).unwrap();
        ours.handle_msg(bytes).unwrap();
    }

    // Which register a name means in the current program's scope.
    let mut cur = 0usize;
    let regs = |scope_idx: usize, ups: &[(usize, u64)]| -> Vec<(Reg, u64)> {
        ups.iter()
            .filter_map(|&(i, v)| {
                scopes[scope_idx]
                    .get(names[i % names.len()])
                    .map(|r| (r.clone(), v))
            })
            .collect()
    };

    let first = [Step::Change {
        prog: 0,
        updates: vec![],
    }];
    // The class in force in our datapath and the one staged by SET_CLASS since the last
    // invocation (what the next `set_class` call must carry, if it differs).
    let mut class_now: Option<u8> = None;
    let mut class_staged: Option<Option<u8>> = None;
    for (k, step) in first.iter().chain(steps).enumerate() {
        let (lres, ores) = match step {
            Step::Invoke { dt, prims } => {
                t += dt;
                CLOCK_NS.with(|c| c.set(t * 1000));
                ops.now = t;
                lconn.load_primitives(libccp_prims(prims));
                let l = lconn.invoke().map_err(|e| format!("{e:?}"));
                let before = ours.flow(osid).map(|f| f.class());
                let o = match ours.flow_invoke(osid, prims, &mut ops) {
                    Ok(Invoked::Ran { .. }) => Ok(()),
                    Ok(Invoked::NoProgram) => Err("LibccpProgIsNull".to_string()),
                    Ok(Invoked::CreatePending) => Err("CreatePending".to_string()),
                    Err(e) => Err(match e {
                        ccp_datapath::Error::AddOverflow => "LibccpAddIntOverflow",
                        ccp_datapath::Error::SubUnderflow => "LibccpSubIntUnderflow",
                        ccp_datapath::Error::MulOverflow => "LibccpMulIntOverflow",
                        ccp_datapath::Error::DivByZero => "LibccpDivByZero",
                        _ => e.name(),
                    }
                    .to_string()),
                };
                prop_assert_eq!(
                    before,
                    Some(class_now),
                    "class in force before the invocation"
                );
                let want: Vec<Act> = match class_staged.take() {
                    Some(c) if c != class_now => {
                        class_now = c;
                        vec![Act::Class(c)]
                    }
                    _ => vec![],
                };
                let got: Vec<Act> = ops
                    .acts
                    .iter()
                    .copied()
                    .filter(|a| matches!(a, Act::Class(_)))
                    .collect();
                prop_assert_eq!(got, want, "set_class calls of step {}", k);
                (l, o)
            }
            Step::Class(dscp) => {
                let mut b = [0u8; ccp_datapath::wire::SET_CLASS_LEN];
                ccp_datapath::wire::write_set_class(&mut b, lsid, *dscp).unwrap();
                let l = lc.dp.recv_msg(&mut b.to_vec());
                prop_assert!(l.is_err(), "libccp refuses SET_CLASS: {:?}", l);
                ccp_datapath::wire::write_set_class(&mut b, osid, *dscp).unwrap();
                prop_assert_eq!(
                    ours.handle_msg(&b),
                    Ok(ccp_datapath::Handled::ClassStaged {
                        sid: osid,
                        dscp: *dscp
                    })
                );
                class_staged = Some(*dscp);
                (Ok(()), Ok(()))
            }
            Step::Update(ups) => {
                let f = regs(cur, ups);
                let mut lb = update_fields(lsid, f.clone());
                let l = lc.dp.recv_msg(&mut lb).map_err(|e| format!("{e:?}"));
                let o = ours
                    .handle_msg(&update_fields(osid, f))
                    .map(|_| ())
                    .map_err(|e| format!("{e:?}"));
                (l, o)
            }
            Step::Change { prog, updates } => {
                let (uid, sc) = match scopes.get(*prog) {
                    Some(sc) => (sc.program_uid, *prog),
                    None => (u32::MAX - 1, cur),
                };
                let f = regs(sc, updates);
                let mut lb = change_prog(lsid, uid, f.clone());
                let l = lc.dp.recv_msg(&mut lb).map_err(|e| format!("{e:?}"));
                let o = ours
                    .handle_msg(&change_prog(osid, uid, f))
                    .map(|_| ())
                    .map_err(|e| format!("{e:?}"));
                if scopes.get(*prog).is_some() {
                    cur = *prog;
                    prop_assert_eq!(&l, &Ok(()), "libccp accepts CHANGE_PROG");
                    prop_assert_eq!(&o, &Ok(()), "we accept CHANGE_PROG");
                } else {
                    // libccp logs and returns a positive length; we return ProgramNotFound.
                    prop_assert!(l.is_err() && o == Err("ProgramNotFound".to_string()));
                }
                (Ok(()), Ok(()))
            }
        };
        prop_assert_eq!(&lres, &ores, "step {} result: {:?}", k, step);
        let lacts = std::mem::take(&mut lconn.acts);
        let oacts: Vec<Act> = std::mem::take(&mut ops.acts)
            .into_iter()
            .filter_map(|a| match a {
                // libccp's callbacks take u32.
                Act::Cwnd(v) => Some(Act::Cwnd(u64::from(v as u32))),
                Act::Rate(v) => Some(Act::Rate(u64::from(v as u32))),
                // Checked above; libccp has no such callback.
                Act::Class(_) => None,
            })
            .collect();
        prop_assert_eq!(&lacts, &oacts, "step {} actuators: {:?}", k, step);
        let lm = measures(&lc.take_sent());
        let om = measures(&std::mem::take(&mut ops.sent));
        prop_assert_eq!(&lm, &om, "step {} reports: {:?}", k, step);
    }
    drop(lconn);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Generators.

fn arb_prims() -> impl Strategy<Value = Primitives> {
    // Small values often (so that conditions fire), any u32 sometimes.
    let v = || prop_oneof![3 => 0u64..20, 2 => 0u64..100_000, 1 => 0u64..=u64::from(u32::MAX)];
    (
        (v(), v(), v(), v(), v(), v(), v()),
        (v(), v(), v(), v(), v(), v(), any::<bool>()),
        (
            prop_oneof![0u64..1, 1u64..100_000_000],
            prop_oneof![0u64..1, 1u64..4_000_000_000],
        ),
    )
        .prop_map(
            |((a, b, c, d, e, f, g), (h, i, j, k, l, m, to), (cwnd, rate))| Primitives {
                bytes_acked: a,
                bytes_misordered: b,
                ecn_bytes: c,
                ecn_packets: d,
                lost_pkts_sample: e,
                packets_acked: f,
                packets_misordered: g,
                bytes_in_flight: h,
                bytes_pending: i,
                packets_in_flight: j,
                rate_incoming: k,
                rate_outgoing: l,
                rtt_sample_us: m,
                was_timeout: to,
                snd_cwnd: cwnd,
                snd_rate: rate,
            },
        )
}

const NUM_ATOMS: &[&str] = &[
    "Ack.bytes_acked",
    "Ack.bytes_misordered",
    "Ack.ecn_bytes",
    "Ack.ecn_packets",
    "Ack.lost_pkts_sample",
    "Ack.now",
    "Ack.packets_acked",
    "Ack.packets_misordered",
    "Flow.bytes_in_flight",
    "Flow.bytes_pending",
    "Flow.packets_in_flight",
    "Flow.rate_incoming",
    "Flow.rate_outgoing",
    "Flow.rtt_sample_us",
    "Cwnd",
    "Rate",
    "Micros",
    "Report.r0",
    "Report.r1",
    "Report.r2",
    "c0",
    "c1",
    "vc0",
];

fn arb_num_atom() -> BoxedStrategy<String> {
    prop_oneof![
        3 => prop::sample::select(NUM_ATOMS).prop_map(str::to_string),
        1 => prop_oneof![0u64..10, 0u64..2_000_000_000].prop_map(|n| n.to_string()),
    ]
    .boxed()
}

fn arb_num_expr(depth: u32) -> BoxedStrategy<String> {
    if depth == 0 {
        return arb_num_atom();
    }
    let bin = prop::sample::select(&["+", "-", "*", "/", "max", "min", "wrapped_max"][..]);
    prop_oneof![
        2 => arb_num_atom(),
        1 => (bin, arb_num_expr(depth - 1), arb_num_expr(depth - 1)).prop_map(|(o, a, b)| format!("({o} {a} {b})")),
    ]
    .boxed()
}

fn arb_bool_expr() -> BoxedStrategy<String> {
    let cmp = (
        prop::sample::select(&[">", "<", "=="][..]),
        arb_num_expr(1),
        arb_num_expr(1),
    )
        .prop_map(|(o, a, b)| format!("({o} {a} {b})"));
    prop_oneof![
        1 => Just("true".to_string()),
        1 => (0u64..3000).prop_map(|n| format!("(> Micros {n})")),
        3 => cmp.clone(),
        1 => (prop::sample::select(&["&&", "||"][..]), cmp.clone(), cmp).prop_map(|(o, a, b)| format!("({o} {a} {b})")),
    ]
    .boxed()
}

fn arb_stmt() -> BoxedStrategy<String> {
    let target = prop::sample::select(
        &[
            "Report.r0",
            "Report.r1",
            "Report.r2",
            "c0",
            "c1",
            "vc0",
            "Cwnd",
            "Rate",
        ][..],
    );
    prop_oneof![
        6 => (target.clone(), arb_num_expr(2)).prop_map(|(t, e)| format!("(:= {t} {e})")),
        1 => (target.clone(), 0u64..11, arb_num_atom()).prop_map(|(t, w, e)| format!("(:= {t} (ewma {w} {e}))")),
        1 => (target.clone(), prop::sample::select(&["if", "!if"][..]), arb_bool_expr(), arb_num_atom())
            .prop_map(|(t, o, c, e)| format!("(:= {t} ({o} {c} {e}))")),
        2 => Just("(report)".to_string()),
        2 => Just("(fallthrough)".to_string()),
        1 => Just("(:= Micros 0)".to_string()),
    ]
    .boxed()
}

fn arb_default() -> BoxedStrategy<String> {
    prop_oneof![
        Just("0".to_string()),
        Just("+infinity".to_string()),
        (0u64..1000).prop_map(|n| n.to_string())
    ]
    .boxed()
}

/// A random program over three report fields, two control variables and one volatile control
/// variable, compiled by portus (cases portus rejects are filtered out).
fn arb_program() -> impl Strategy<Value = String> {
    let vol = || prop::bool::ANY.prop_map(|v| if v { "volatile " } else { "" });
    let defs = (
        vol(),
        arb_default(),
        vol(),
        arb_default(),
        vol(),
        arb_default(),
        arb_default(),
        arb_default(),
        arb_default(),
    );
    let events = prop::collection::vec(
        (arb_bool_expr(), prop::collection::vec(arb_stmt(), 1..5)),
        1..5,
    );
    (defs, events)
        .prop_map(|((v0, d0, v1, d1, v2, d2, dc0, dc1, dvc), evs)| {
            let mut s = format!(
                "(def (Report ({v0}r0 {d0}) ({v1}r1 {d1}) ({v2}r2 {d2})) (c0 {dc0}) (c1 {dc1}) (volatile vc0 {dvc}))\n"
            );
            for (cond, body) in evs {
                s.push_str(&format!("(when {cond} {})\n", body.join(" ")));
            }
            s
        })
        .prop_filter("portus compiles it, libccp has the temporaries", |s| {
            // Compiling bumps portus's uid counter; harmless.
            match portus::lang::compile(s.as_bytes(), &[]) {
                Ok((bin, _)) => !has_reg_none(&bin) && !uses_tmp_beyond_libccp(&compile_install(s).0),
                Err(_) => false,
            }
        })
}

fn arb_updates() -> impl Strategy<Value = Vec<(usize, u64)>> {
    // Names: 0 c0, 1 c1, 2 vc0, 3 Cwnd, 4 Rate.
    prop::collection::vec(
        (
            0usize..5,
            prop_oneof![0u64..100, 0u64..=u64::from(u32::MAX), any::<u64>()],
        ),
        0..4,
    )
    .prop_map(|v| {
        v.into_iter()
            .map(|(i, x)| if i >= 3 { (i, x & 0xffff_ffff) } else { (i, x) })
            .collect()
    })
}

fn arb_steps(n_progs: usize) -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        8 => (prop_oneof![0u64..10, 0u64..5000], arb_prims()).prop_map(|(dt, prims)| Step::Invoke { dt, prims }),
        2 => arb_updates().prop_map(Step::Update),
        1 => (0..n_progs + 1, arb_updates()).prop_map(|(prog, updates)| Step::Change { prog, updates }),
        1 => prop::option::of(0u8..=63).prop_map(Step::Class),
    ];
    prop::collection::vec(step, 1..40)
}

const NAMES: &[&str] = &["c0", "c1", "vc0", "Cwnd", "Rate"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random programs, primitives, updates and program switches.
    #[test]
    fn random_programs_match_libccp(p0 in arb_program(), p1 in arb_program(), steps in arb_steps(2)) {
        run_both(&[p0, p1], NAMES, &steps)?;
    }
}

/// Hand-written programs: portus's own integration-test programs and a Reno-like window.
const FIXED: &[&str] = &[
    "(def (Report.acked 0) (Control.num_invoked 0) (Report.cwnd 0) (Report.rate 0))
     (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Control.num_invoked (+ Control.num_invoked 1))
        (:= Report.cwnd Cwnd) (:= Report.rate Rate) (fallthrough))
     (when (== Control.num_invoked 20) (:= Control.num_invoked 0) (report))",
    "(def (Report (volatile foo 0) (bar 0) (volatile sum 0)) (volatile foo1 0) (bar1 0))
     (when true
        (:= Report.foo (+ Report.foo 1)) (:= Report.bar (+ Report.bar 1))
        (:= foo1 (+ foo1 1)) (:= bar1 (+ bar1 1)) (:= Report.sum (+ foo1 bar1)) (fallthrough))
     (when (> Micros 3000) (report) (:= Micros 0))",
    "(def (Report (volatile acked 0) (volatile loss 0) (volatile rtt 0) (volatile minrtt +infinity)) (c0 0) (c1 0) (vc0 0))
     (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Report.loss (+ Report.loss Ack.lost_pkts_sample))
        (:= Report.rtt (ewma 2 Flow.rtt_sample_us))
        (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us))
        (fallthrough))
     (when (> Report.loss 0) (:= Cwnd (max 2896 (/ Cwnd 2))) (report) (:= Micros 0))
     (when (> Micros Report.minrtt) (:= Cwnd (+ Cwnd 1448)) (report) (:= Micros 0))",
    "(def (Report (volatile x 0) (volatile y 0)) (c0 0) (c1 0) (vc0 0))
     (when (&& (< Flow.packets_in_flight 10) (== c0 0))
        (:= Report.x (max Flow.rate_incoming Flow.rate_outgoing))
        (:= Report.y (wrapped_max Report.y Ack.now))
        (:= Rate (/ Flow.rate_outgoing 2))
        (:= c0 (if (> Ack.ecn_packets 0) 1))
        (report))
     (when true
        (:= c0 (!if Flow.was_timeout 0))
        (:= Rate c1)
        (:= Report.x (+ Ack.bytes_misordered Ack.packets_misordered)))",
    // `(fallthrough)` stays set for the rest of the run: all three events fire.
    "(def (Report (volatile a 0) (volatile b 0) (volatile c 0)) (c0 0) (c1 0) (vc0 0))
     (when true (:= Report.a (+ Report.a 1)) (fallthrough))
     (when true (:= Report.b (+ Report.b 1)))
     (when true (:= Report.c (+ Report.c 1)) (report))",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn fixed_programs_match_libccp(which in 0usize..FIXED.len(), other in 0usize..FIXED.len(), steps in arb_steps(2)) {
        run_both(&[FIXED[which].to_string(), FIXED[other].to_string()], NAMES, &steps)?;
    }
}

#[test]
fn sticky_fallthrough_matches_libccp() {
    let steps = vec![
        Step::Invoke {
            dt: 1,
            prims: Primitives::default()
        };
        3
    ];
    run_both(&[FIXED[4].to_string()], NAMES, &steps).unwrap();
}

/// A deterministic scenario, as a readable example of what is compared.
#[test]
fn reno_like_scenario() {
    let prims = |acked: u64, lost: u64, rtt: u64, cwnd: u64| Primitives {
        bytes_acked: acked,
        lost_pkts_sample: lost,
        rtt_sample_us: rtt,
        snd_cwnd: cwnd,
        ..Default::default()
    };
    let mut steps = vec![Step::Update(vec![(3, 14480)])];
    for i in 0..50u64 {
        steps.push(Step::Invoke {
            dt: 1000,
            prims: prims(1448, u64::from(i % 17 == 16), 20_000 + i, 14480 + 1448 * i),
        });
    }
    steps.push(Step::Update(vec![(4, 1_250_000), (0, 3)]));
    steps.push(Step::Invoke {
        dt: 100,
        prims: prims(0, 0, 0, 14480),
    });
    run_both(&[FIXED[2].to_string()], NAMES, &steps).unwrap();
}
