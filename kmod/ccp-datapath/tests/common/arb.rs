//! Proptest generators shared by the differential tests (against libccp in `diff_libccp.rs`,
//! compiled against interpreted in `compiled.rs`): primitives, portus programs over a fixed set
//! of report and control variables, and scenarios of invocations, updates, program switches and
//! class changes.

use super::{compile_install, has_reg_none, uses_tmp_beyond_libccp};
use ccp_datapath::Primitives;
use proptest::prelude::*;

/// One step of a scenario.
#[derive(Clone, Debug)]
pub enum Step {
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

/// Primitives of one ACK: small values often (so that conditions fire), any u32 sometimes.
pub fn arb_prims() -> impl Strategy<Value = Primitives> {
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

/// The registers a generated expression reads.
pub const NUM_ATOMS: &[&str] = &[
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

/// A register of [`NUM_ATOMS`] or a constant.
pub fn arb_num_atom() -> BoxedStrategy<String> {
    prop_oneof![
        3 => prop::sample::select(NUM_ATOMS).prop_map(str::to_string),
        1 => prop_oneof![0u64..10, 0u64..2_000_000_000].prop_map(|n| n.to_string()),
    ]
    .boxed()
}

/// A numeric expression nested up to `depth`.
pub fn arb_num_expr(depth: u32) -> BoxedStrategy<String> {
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

/// An event condition.
pub fn arb_bool_expr() -> BoxedStrategy<String> {
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

/// One statement of an event body.
pub fn arb_stmt() -> BoxedStrategy<String> {
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

/// A DEF default.
pub fn arb_default() -> BoxedStrategy<String> {
    prop_oneof![
        Just("0".to_string()),
        Just("+infinity".to_string()),
        (0u64..1000).prop_map(|n| n.to_string())
    ]
    .boxed()
}

/// A random program over three report fields, two control variables and one volatile control
/// variable, compiled by portus (cases portus rejects are filtered out).
pub fn arb_program() -> impl Strategy<Value = String> {
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

/// UPDATE_FIELDS contents: (index into [`NAMES`], value).
pub fn arb_updates() -> impl Strategy<Value = Vec<(usize, u64)>> {
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

/// A scenario over `n_progs` programs (and a uid nobody installed).
pub fn arb_steps(n_progs: usize) -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        8 => (prop_oneof![0u64..10, 0u64..5000], arb_prims()).prop_map(|(dt, prims)| Step::Invoke { dt, prims }),
        2 => arb_updates().prop_map(Step::Update),
        1 => (0..n_progs + 1, arb_updates()).prop_map(|(prog, updates)| Step::Change { prog, updates }),
        1 => prop::option::of(0u8..=63).prop_map(Step::Class),
    ];
    prop::collection::vec(step, 1..40)
}

/// The variables a scenario's updates set, by index (see [`arb_updates`]).
pub const NAMES: &[&str] = &["c0", "c1", "vc0", "Cwnd", "Rate"];

/// Hand-written programs: portus's own integration-test programs and a Reno-like window.
pub const FIXED: &[&str] = &[
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
