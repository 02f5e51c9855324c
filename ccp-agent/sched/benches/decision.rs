// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Decision-time benchmark of the scheduling library: the per-flow
//! decision (Alg. 1 + Alg. 2 for one flow, K = 10, 60 ms slots) at 10, 100 and 1000 active
//! flows, and the whole per-slot step (expire the old slot, plan every flow), as latency
//! percentiles (p50/p90/p99 over individually timed calls) followed by criterion's estimates.
//!
//! Run: `cargo bench -p mlcc-sched --bench decision` (percentiles only: add `-- --percentiles`).
//! Target: p90 per-flow decision <= 15 us on the 2-core reference machine.
//!
//! Topology: racks of 10 hosts, 25 Gbit/s NICs, 100 Gbit/s ToR uplinks; one host per 10 active
//! flows; a flow crosses its source NIC, and, between racks, both ToR uplinks/downlinks, and the
//! destination NIC (2 or 4 links). Flows carry 1-200 MB; every third one is a ring flow whose
//! predecessor is ahead, so Alg. 2's raise branch runs too. The coflow rows plan groups of 4
//! consecutive flows jointly (`plan_group`) and report the group's time over its members. The
//! policy rows time the layer's whole per-slot decision as the agent calls it
//! (`policy::decide` over a snapshot of every flow, the same flows as 4-worker ring jobs) under
//! the rule the agent runs by default (`Rules::Priority`, jobs ranked earliest deadline first,
//! work-conserving, spare sharing) and under the paper's `Rules::Mlcc`, reported as
//! the call's time over its flows.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use mlcc_sched::*;

const NIC_BPS: u64 = 25_000_000_000;
const TOR_BPS: u64 = 100_000_000_000;
/// Members of a coflow group in the group rows.
const GROUP: usize = 4;

/// A deterministic xorshift generator (the library has no randomness and wants none).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Link numbering: host h: NIC up 4h, NIC down 4h+1; rack r: ToR up 4r+2, ToR down 4r+3.
fn setup(flows: usize) -> (LinkLoadTable, Vec<FlowRequest>) {
    let hosts = (flows / 10).max(4) as u64;
    let mut t = LinkLoadTable::new(
        SlotClock::new(DEFAULT_SLOT_US, DEFAULT_HORIZON).unwrap(),
        1_000,
    );
    for h in 0..hosts {
        t.add_link(LinkId((4 * h) as u32), NIC_BPS).unwrap();
        t.add_link(LinkId((4 * h + 1) as u32), NIC_BPS).unwrap();
    }
    for r in 0..hosts.div_ceil(10) {
        t.add_link(LinkId((4 * r + 2) as u32), TOR_BPS).unwrap();
        t.add_link(LinkId((4 * r + 3) as u32), TOR_BPS).unwrap();
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let reqs = (0..flows as u64)
        .map(|f| {
            let src = rng.below(hosts);
            let dst = (src + 1 + rng.below(hosts - 1)) % hosts;
            let mut path = vec![LinkId((4 * src) as u32)];
            if src / 10 != dst / 10 {
                path.push(LinkId((4 * (src / 10) + 2) as u32));
                path.push(LinkId((4 * (dst / 10) + 3) as u32));
            }
            path.push(LinkId((4 * dst + 1) as u32));
            let remaining_bytes = 1_000_000 + rng.below(200_000_000);
            let dependency = if f % 3 == 2 {
                Dependency::Ring {
                    predecessor_bytes: remaining_bytes / 4,
                }
            } else {
                Dependency::Independent
            };
            FlowRequest {
                flow: FlowId(f),
                path,
                progress: FlowProgress {
                    sent_bytes: 0,
                    remaining_bytes,
                },
                dependency,
            }
        })
        .collect();
    // Warm the table: one slot of decisions so every flow has a schedule in it.
    for r in &reqs {
        plan_flow(&mut t, r).unwrap();
    }
    (t, reqs)
}

/// The flows of [`setup`] as 4-worker ring jobs (job = flow / 4, each flow's predecessor the
/// previous flow of its ring), a snapshot for the policy layer.
fn ring_snapshot(reqs: &[FlowRequest]) -> Snapshot {
    let flows = reqs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let first = i / GROUP * GROUP;
            let members = GROUP.min(reqs.len() - first);
            let pred = first + (i - first + members - 1) % members;
            let size = r.progress.sent_bytes + r.progress.remaining_bytes;
            FlowState {
                flow: r.flow,
                job: JobKey((i / GROUP) as u64),
                role: FlowRole::RingSend {
                    predecessor: Some(reqs[pred].flow),
                    chunk_bytes: (size / GROUP as u64).max(1),
                },
                path: r.path.clone(),
                progress: r.progress,
                iteration_bytes: size,
                decide: true,
            }
        })
        .collect();
    Snapshot {
        slot: 0,
        flows,
        min_rate_bps: 0,
    }
}

/// Options for the policy rows: `rules`, with the jobs of [`ring_snapshot`] ranked earliest
/// deadline first (seeded burst starts and times alone, µs) under [`Rules::Priority`].
fn policy_options(rules: Rules, jobs: usize) -> PolicyOptions {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let bursts: Vec<(JobKey, u64, u64)> = (0..jobs as u64)
        .map(|j| (JobKey(j), rng.below(1_000_000), 1_000 + rng.below(500_000)))
        .collect();
    PolicyOptions {
        rules,
        share_spare: true,
        sendable_only: false,
        work_conserving: rules == Rules::Priority,
        strict_rates: false,
        job_rank: if rules == Rules::Priority {
            rank_earliest_deadline(&bursts).unwrap()
        } else {
            Vec::new()
        },
    }
}

/// One slot of the policy layer: expire the past slot, decide every flow of `snapshot` at once
/// (its slot set to the new one).
fn policy_slot(t: &mut LinkLoadTable, snapshot: &mut Snapshot, options: &PolicyOptions) -> usize {
    let next = t.current_slot() + 1;
    t.advance_to(next).unwrap();
    snapshot.slot = next;
    policy::decide(t, snapshot, options).unwrap().groups.len()
}

/// One whole slot: expire the past slot, plan every flow, let each send its current-slot bytes
/// (a finished flow starts its next iteration).
fn run_slot(t: &mut LinkLoadTable, reqs: &mut [FlowRequest], bytes: &[u64]) {
    let next = t.current_slot() + 1;
    t.advance_to(next).unwrap();
    for (r, b) in reqs.iter_mut().zip(bytes) {
        let d = plan_flow(t, r).unwrap();
        let sent = d.plan.bytes[0];
        r.progress.sent_bytes += sent;
        r.progress.remaining_bytes -= sent;
        if r.progress.remaining_bytes == 0 {
            r.progress = FlowProgress {
                sent_bytes: 0,
                remaining_bytes: *b,
            };
        }
    }
}

/// p50, p90 and p99 (nearest rank, [`mlcc_stats`]) of nanosecond samples, in microseconds.
fn percentiles(ns: &[u64]) -> (f64, f64, f64) {
    let mut us: Vec<f64> = ns.iter().map(|&n| n as f64 / 1000.0).collect();
    mlcc_stats::sort(&mut us);
    let at = |q: f64| mlcc_stats::quantile_sorted(&us, q).unwrap_or(f64::NAN);
    (at(0.50), at(0.90), at(0.99))
}

fn report_percentiles() {
    println!(
        "mlcc-sched decision time, K = {DEFAULT_HORIZON}, slot = {} ms (microseconds)",
        DEFAULT_SLOT_US / 1000
    );
    println!(
        "{:>6}  {:<34} {:>8} {:>8} {:>8} {:>8}",
        "flows", "what", "p50", "p90", "p99", "samples"
    );
    for n in [10usize, 100, 1000] {
        let (mut t, mut reqs) = setup(n);
        let clock = *t.clock();
        // Pure Alg. 1 + Alg. 2 on the flow's view.
        let samples = 20_000;
        let mut ns = Vec::with_capacity(samples);
        for i in 0..samples {
            let r = &reqs[i % n];
            let view = t.path_view(&r.path, Some(r.flow)).unwrap();
            let s = Instant::now();
            black_box(decide(&clock, &r.progress, &r.dependency, black_box(&view)).unwrap());
            ns.push(s.elapsed().as_nanos() as u64);
        }
        let (a, b, c) = percentiles(&ns);
        println!(
            "{n:>6}  {:<34} {a:>8.2} {b:>8.2} {c:>8.2} {samples:>8}",
            "decide (Alg. 1 + Alg. 2)"
        );
        // The same with the table: read the path view, decide, replace the schedule.
        let mut ns = Vec::with_capacity(samples);
        for i in 0..samples {
            let r = &reqs[i % n];
            let s = Instant::now();
            black_box(plan_flow(&mut t, black_box(r)).unwrap());
            ns.push(s.elapsed().as_nanos() as u64);
        }
        let (a, b, c) = percentiles(&ns);
        println!(
            "{n:>6}  {:<34} {a:>8.2} {b:>8.2} {c:>8.2} {samples:>8}",
            "plan_flow (view + decide + publish)"
        );
        // Coflow groups of 4 consecutive flows (a 4-worker ring), planned jointly with the table
        // (link views, decide_group, publish); the group's time over its members is the per-flow
        // decision time.
        let groups: Vec<&[FlowRequest]> = reqs.chunks(GROUP).collect();
        let mut ns = Vec::with_capacity(samples);
        for i in 0..samples / GROUP {
            let g = groups[i % groups.len()];
            let s = Instant::now();
            black_box(plan_group(&mut t, black_box(g)).unwrap());
            let per_flow = s.elapsed().as_nanos() as u64 / g.len() as u64;
            ns.extend(std::iter::repeat_n(per_flow, g.len()));
        }
        let (a, b, c) = percentiles(&ns);
        let m = ns.len();
        println!(
            "{n:>6}  {:<34} {a:>8.2} {b:>8.2} {c:>8.2} {m:>8}",
            "plan_group of 4 (per flow)"
        );
        // The policy layer's per-slot decision over all flows, per flow.
        let mut snapshot = ring_snapshot(&reqs);
        for (rules, what) in [
            (Rules::Priority, "policy::decide priority (per flow)"),
            (Rules::Mlcc, "policy::decide mlcc (per flow)"),
        ] {
            let options = policy_options(rules, n.div_ceil(GROUP));
            let calls = (20_000 / n).clamp(20, 2000);
            let mut ns = Vec::with_capacity(calls * n);
            for _ in 0..calls {
                let s = Instant::now();
                black_box(policy_slot(&mut t, black_box(&mut snapshot), &options));
                let per_flow = s.elapsed().as_nanos() as u64 / n as u64;
                ns.extend(std::iter::repeat_n(per_flow, n));
            }
            let (a, b, c) = percentiles(&ns);
            println!("{n:>6}  {what:<34} {a:>8.2} {b:>8.2} {c:>8.2} {calls:>8}");
        }
        // Whole slots.
        let bytes: Vec<u64> = reqs.iter().map(|r| r.progress.remaining_bytes).collect();
        let slots = (20_000 / n).clamp(50, 2000);
        let mut ns = Vec::with_capacity(slots);
        for _ in 0..slots {
            let s = Instant::now();
            run_slot(&mut t, &mut reqs, &bytes);
            ns.push(s.elapsed().as_nanos() as u64);
        }
        let (a, b, c) = percentiles(&ns);
        println!(
            "{n:>6}  {:<34} {a:>8.2} {b:>8.2} {c:>8.2} {slots:>8}",
            "whole slot (advance + plan all)"
        );
    }
}

fn criterion_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("decision");
    for n in [10usize, 100, 1000] {
        let (mut t, reqs) = setup(n);
        let clock = *t.clock();
        let views: Vec<PathView> = reqs
            .iter()
            .map(|r| t.path_view(&r.path, Some(r.flow)).unwrap())
            .collect();
        let mut i = 0;
        g.bench_with_input(BenchmarkId::new("decide", n), &n, |b, _| {
            b.iter(|| {
                i = (i + 1) % n;
                let r = &reqs[i];
                decide(&clock, &r.progress, &r.dependency, &views[i]).unwrap()
            })
        });
        g.bench_with_input(BenchmarkId::new("plan_flow", n), &n, |b, _| {
            b.iter(|| {
                i = (i + 1) % n;
                plan_flow(&mut t, &reqs[i]).unwrap()
            })
        });
        let groups: Vec<Vec<FlowRequest>> =
            reqs.chunks(GROUP).map(<[FlowRequest]>::to_vec).collect();
        let mut gi = 0;
        g.bench_with_input(BenchmarkId::new("plan_group4", n), &n, |b, _| {
            b.iter(|| {
                gi = (gi + 1) % groups.len();
                plan_group(&mut t, &groups[gi]).unwrap()
            })
        });
        let mut reqs = reqs;
        let bytes: Vec<u64> = reqs.iter().map(|r| r.progress.remaining_bytes).collect();
        g.bench_with_input(BenchmarkId::new("whole_slot", n), &n, |b, _| {
            b.iter(|| run_slot(&mut t, &mut reqs, &bytes))
        });
    }
    g.finish();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo test --benches` runs this with `--test`: keep that quick.
    if args.iter().any(|a| a == "--test") {
        let (mut t, mut reqs) = setup(10);
        let bytes: Vec<u64> = reqs.iter().map(|r| r.progress.remaining_bytes).collect();
        run_slot(&mut t, &mut reqs, &bytes);
        plan_group(&mut t, &reqs[..GROUP]).unwrap();
        let mut snapshot = ring_snapshot(&reqs);
        for rules in [Rules::Priority, Rules::Mlcc] {
            let groups = policy_slot(&mut t, &mut snapshot, &policy_options(rules, 3));
            assert!(groups > 0, "{rules:?}: the policy layer decided no group");
        }
        println!("decision bench: smoke run ok");
        return;
    }
    report_percentiles();
    if args.iter().any(|a| a == "--percentiles") {
        return;
    }
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    criterion_benches(&mut c);
    c.final_summary();
}
