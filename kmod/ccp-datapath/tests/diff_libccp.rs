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
use common::arb::*;
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random programs, primitives, updates and program switches.
    #[test]
    fn random_programs_match_libccp(p0 in arb_program(), p1 in arb_program(), steps in arb_steps(2)) {
        run_both(&[p0, p1], NAMES, &steps)?;
    }
}

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
