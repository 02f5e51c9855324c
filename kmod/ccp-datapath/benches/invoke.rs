// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Per-ACK cost of the program machine: one [`Datapath::flow_invoke`] per ACK (what tcp_mltcp's
//! `ccp::on_ack` calls through `FlowTable::invoke`) for the two programs the project's agents
//! install: ccp-test-agent's Reno and ccp-agent's `datapath-programs/mlcc-slot.ccp`, each run by
//! the interpreter (`<program>/interpreted`, the reference) and in its compiled form
//! (`<program>/compiled`, the default; [`ExecMode`]).
//!
//! ACKs arrive every 10 µs, each acknowledging two 1448-byte segments with 100 in flight and an
//! RTT of 100 µs, so Reno (report floor 10 ms) reports once per 1000 ACKs and mlcc-slot (60 ms
//! slots) once per 6000: almost every ACK only runs the program.

use std::hint::black_box;

use ccp_datapath::{
    program_lines, Datapath, DatapathOps, ExecMode, FlowInfo, Primitives, SendError,
};
use criterion::{criterion_group, criterion_main, Criterion};
use portus::lang::Reg;

#[path = "../tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;

const ACKS: u32 = 1024;
/// Interval between ACKs, µs.
const ACK_GAP_US: u64 = 10;

/// The program text of ccp-test-agent's Reno (one definition, shared through `#[path]`).
#[path = "../../ccp-test-agent/src/reno_program.rs"]
#[allow(dead_code)] // the bench runs one of its window rules
mod reno_program;

/// ccp-agent's program, without its comment lines (as the agent compiles it).
fn mlcc_slot() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../datapath-programs/mlcc-slot.ccp"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    program_lines(&text).collect::<Vec<_>>().join("\n")
}

/// A host that keeps nothing: a clock and a count of what was sent.
#[derive(Default)]
struct NullOps {
    now: u64,
    sent: u64,
}

impl DatapathOps for NullOps {
    fn now_us(&self) -> u64 {
        self.now
    }
    fn send_msg(&mut self, _msg: &[u8]) -> Result<(), SendError> {
        self.sent += 1;
        Ok(())
    }
    fn set_cwnd(&mut self, bytes: u64) {
        black_box(bytes);
    }
    fn set_rate_abs(&mut self, bytes_per_sec: u64) {
        black_box(bytes_per_sec);
    }
}

/// One flow running `src` in `mode`, switched to it with CHANGE_PROG carrying `fields` (names in
/// the program's scope), and one invocation done so that the switch is applied.
fn flow(src: &str, fields: &[(&str, u64)], mode: ExecMode) -> (Box<Datapath<4, 4>>, NullOps, u32) {
    let (install, sc, _) = common::compile_install(src);
    let mut dp = Box::new(Datapath::<4, 4>::new());
    dp.set_exec_mode(mode);
    let mut ops = NullOps {
        now: 1_000,
        sent: 0,
    };
    dp.init(ops.now);
    let info = FlowInfo {
        init_cwnd: 14_480,
        mss: 1448,
        ..Default::default()
    };
    let sid = dp.flow_start(&info, &mut ops).expect("flow starts");
    dp.handle_msg(&install).expect("INSTALL");
    let regs: Vec<(Reg, u64)> = fields
        .iter()
        .map(|&(n, v)| (common::reg_of(&sc, n), v))
        .collect();
    dp.handle_msg(&common::change_prog(sid, sc.program_uid, regs))
        .expect("CHANGE_PROG");
    dp.flow_invoke(sid, &prims(), &mut ops).expect("first ACK");
    (dp, ops, sid)
}

/// The measurements of every ACK.
fn prims() -> Primitives {
    Primitives {
        bytes_acked: 2 * 1448,
        packets_acked: 2,
        bytes_in_flight: 100 * 1448,
        packets_in_flight: 100,
        rate_incoming: 500_000_000,
        rate_outgoing: 500_000_000,
        rtt_sample_us: 100,
        snd_cwnd: 200 * 1448,
        snd_rate: 500_000_000,
        ..Primitives::default()
    }
}

fn bench_program(c: &mut Criterion, name: &str, src: &str, fields: &[(&str, u64)]) {
    let mut g = c.benchmark_group(format!("invoke/{name}"));
    g.throughput(criterion::Throughput::Elements(u64::from(ACKS)));
    for (mode, label) in [
        (ExecMode::Interpret, "interpreted"),
        (ExecMode::Compiled, "compiled"),
    ] {
        let (mut dp, mut ops, sid) = flow(src, fields, mode);
        let p = prims();
        g.bench_function(label, |b| {
            b.iter(|| {
                for _ in 0..ACKS {
                    ops.now += ACK_GAP_US;
                    let r = dp.flow_invoke(black_box(sid), black_box(&p), &mut ops);
                    black_box(r).expect("the program runs");
                }
            })
        });
        black_box(ops.sent);
    }
    g.finish();
}

fn bench(c: &mut Criterion) {
    // As `ccp-test-agent reno --min-report-us 10000` installs it (the kernel window rule).
    let reno = reno_program::text(10_000, reno_program::INFLIGHT_KERNEL);
    bench_program(c, "reno", &reno, &[("Cwnd", 14_480)]);
    // ccp-agent's install (ccp-agent's ccp.rs; as tests/mlcc_program.rs).
    bench_program(
        c,
        "mlcc-slot",
        &mlcc_slot(),
        &[
            ("Cwnd", 200 * 1448),
            ("Control.cwnd_cap", 16_777_216),
            ("Rate", 500_000_000),
            ("Control.slot_us", 60_000),
        ],
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
