// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Per-ACK cost of the program machine: one [`Datapath::flow_invoke`] per ACK (what tcp_mltcp's
//! `ccp::on_ack` calls through `FlowTable::invoke`) for the two programs the project's agents
//! install: ccp-test-agent's Reno and ccp-agent's `datapath-programs/mlcc-slot.ccp`, each run by
//! the interpreter (`<program>/interpreted`, the reference) and in its compiled form
//! (`<program>/compiled`, the default; [`ExecMode`]). The flows and ACKs are those of
//! `tests/common/per_ack.rs`, which `examples/ack_instructions.rs` counts instructions of.

use std::hint::black_box;

use ccp_datapath::ExecMode;
use criterion::{criterion_group, criterion_main, Criterion};

#[path = "../tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;

use common::per_ack::{self, Installed, ACK_GAP_US};

const ACKS: u32 = 1024;

fn bench_program(c: &mut Criterion, p: &Installed) {
    let mut g = c.benchmark_group(format!("invoke/{}", p.name));
    g.throughput(criterion::Throughput::Elements(u64::from(ACKS)));
    for (mode, label) in [
        (ExecMode::Interpret, "interpreted"),
        (ExecMode::Compiled, "compiled"),
    ] {
        let (mut dp, mut ops, sid) = per_ack::flow(p, mode);
        let prims = per_ack::prims();
        g.bench_function(label, |b| {
            b.iter(|| {
                for _ in 0..ACKS {
                    ops.now += ACK_GAP_US;
                    let r = dp.flow_invoke(black_box(sid), black_box(&prims), &mut ops);
                    black_box(r).expect("the program runs");
                }
            })
        });
        black_box(ops.sent);
    }
    g.finish();
}

fn bench(c: &mut Criterion) {
    bench_program(c, &per_ack::reno());
    bench_program(c, &per_ack::mlcc_slot());
}

criterion_group!(benches, bench);
criterion_main!(benches);
