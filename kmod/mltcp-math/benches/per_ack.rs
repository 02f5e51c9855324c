// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Per-ACK cost in congestion avoidance: plain Reno/CUBIC against MLTCP (including
//! `Iteration::scale_fx`, i.e. bytes_ratio and F, on every ACK).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use mltcp_math::cubic::{Clock, Cubic, CubicParams};
use mltcp_math::fixed::FX_ONE;
use mltcp_math::params::Params;
use mltcp_math::reno;

const ACKS: u32 = 1024;

#[path = "../tests/common/per_ack_state.rs"]
mod per_ack_state;
use per_ack_state::{ca_window, iteration};

fn bench(c: &mut Criterion) {
    let p = Params::DEFAULT;
    let cp = CubicParams::LINUX_DEFAULT;
    let mut g = c.benchmark_group("per_ack");
    g.throughput(criterion::Throughput::Elements(ACKS as u64));

    g.bench_function("reno::cong_avoid", |b| {
        b.iter(|| {
            let mut w = ca_window();
            for _ in 0..ACKS {
                reno::cong_avoid(black_box(&mut w), black_box(1), black_box(true));
            }
            w
        })
    });
    g.bench_function("reno::mltcp_cong_avoid+scale_fx", |b| {
        let it = iteration();
        b.iter(|| {
            let mut w = ca_window();
            let mut acked = 1u64 << 30;
            for _ in 0..ACKS {
                acked += 1448;
                let f = black_box(&it).scale_fx(&p, black_box(acked));
                reno::mltcp_cong_avoid(black_box(&mut w), black_box(1), black_box(true), f, FX_ONE);
            }
            w
        })
    });
    g.bench_function("Cubic::cong_avoid", |b| {
        b.iter(|| {
            let mut w = ca_window();
            let mut cu = Cubic {
                last_max_cwnd: 6000,
                delay_min: 100,
                ..Cubic::default()
            };
            for i in 0..ACKS {
                let clk = Clock {
                    now_jiffies: 100_000 + i / 8,
                    ..Clock::default()
                };
                cu.cong_avoid(&cp, black_box(&mut w), black_box(1), black_box(true), &clk);
            }
            (w, cu)
        })
    });
    g.bench_function("Cubic::mltcp_cong_avoid+scale_fx", |b| {
        let it = iteration();
        b.iter(|| {
            let mut w = ca_window();
            let mut cu = Cubic {
                last_max_cwnd: 6000,
                delay_min: 100,
                ..Cubic::default()
            };
            let mut acked = 1u64 << 30;
            for i in 0..ACKS {
                acked += 1448;
                let clk = Clock {
                    now_jiffies: 100_000 + i / 8,
                    ..Clock::default()
                };
                let f = black_box(&it).scale_fx(&p, black_box(acked));
                cu.mltcp_cong_avoid(
                    &cp,
                    black_box(&mut w),
                    black_box(1),
                    black_box(true),
                    &clk,
                    f,
                    FX_ONE,
                );
            }
            (w, cu)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
