// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The workers: ring all-reduce workers, parameter-server workers and the parameter server.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use crate::config::{JobPlan, Paradigm};
use crate::progress::{Identity, Reporter};
use crate::seeds::ComputeDraws;
use mltcp_progress::{FlowKind, Role};

use super::ctx::{Barrier, Counter, Ctx};
use super::plan::ring_steps;
use super::sockets::{
    accept_cc, connect_cc, enter, listen_cc, prepare, recv_bytes, retryable, send_bytes,
    sleep_until,
};
use super::{FlowInfo, IterRecord};

pub(super) struct RingShared {
    pub(super) addrs: Mutex<Vec<Option<SocketAddr>>>,
    pub(super) setup: Barrier,
    pub(super) iter: Barrier,
}

pub(super) fn ring_worker(
    ctx: &Ctx,
    job_idx: usize,
    job: &JobPlan,
    i: usize,
    sh: &RingShared,
) -> Result<Vec<IterRecord>> {
    let w = job.workers.len();
    let host = &job.workers[i];
    let succ_host = &job.workers[(i + 1) % w];
    let (ns, ip) = ctx.net.lookup(host)?;
    enter(&ns)?;
    let l = listen_cc(ip, &ctx.cc)?;
    sh.addrs.lock().unwrap()[i] = Some(l.local_addr()?);
    sh.setup.wait(&ctx.abort)?;
    let succ =
        sh.addrs.lock().unwrap()[(i + 1) % w].ok_or_else(|| anyhow!("successor has no address"))?;
    let mut out = connect_cc(succ, &ctx.cc)?;
    let mut inp = accept_cc(&l, &ctx.cc, ctx)?;
    let cc = prepare(&out, &ctx.cc)?;
    prepare(&inp, &ctx.cc)?;
    ctx.register(
        FlowInfo {
            id: 0,
            job: job.name.clone(),
            kind: "ring".into(),
            worker: i,
            src_host: host.clone(),
            dst_host: succ_host.clone(),
            cc,
            ecn: false,
        },
        &out,
    )?;
    let send = ring_steps(job.gradient_bytes, w, i);
    let recv = ring_steps(job.gradient_bytes, w, (i + w - 1) % w);
    let send_total: u64 = send.iter().sum();
    let recv_total: u64 = recv.iter().sum();
    let iters = job.iterations as u64;
    let (rank, world) = (i as u32, w as u32);
    let mut rep = Reporter::open(
        &ctx.progress_dir,
        &Identity {
            run: &ctx.run,
            job: &job.name,
            rank,
            world_size: world,
            paradigm: Paradigm::Ring,
            role: Role::Worker,
            ring: Some(((rank + world - 1) % world, (rank + 1) % world)),
            bytes_per_iteration: send_total,
        },
    );
    rep.add_flow(&out, FlowKind::RingSend, (rank + 1) % world);
    rep.add_flow(&inp, FlowKind::RingRecv, (rank + world - 1) % world);
    let got = Arc::new(Counter::new());
    let records = thread::scope(|scope| -> Result<Vec<IterRecord>> {
        let got2 = got.clone();
        let receiver = scope.spawn(move || -> Result<()> {
            let mut buf = vec![0u8; 256 * 1024];
            let r = recv_bytes(&mut inp, recv_total * iters, &mut buf, ctx, Some(&got2));
            r.map(|_| ())
        });
        let mut recs = Vec::new();
        let mut draws = ComputeDraws::new(ctx.seed, job.index, i, job.compute_ms, &job.jitter);
        let res = (|| -> Result<()> {
            ctx.start(job.start_offset_ms)?;
            for k in 0..iters {
                let base = k * recv_total;
                let cs = ctx.us();
                sleep_until(ctx, cs + (draws.next_ms() * 1000.0) as u64)?;
                let ce = ctx.us();
                rep.begin_iteration(k);
                let (burst_wait_us, burst_outcome) = pcn_wait(ctx, &mut rep);
                let comm_start = ctx.us();
                let mut need = base;
                for (s, n) in send.iter().enumerate() {
                    if s > 0 {
                        need += recv[s - 1];
                        got.wait_for(need, &ctx.abort)?;
                    }
                    send_bytes(&mut out, *n, ctx, &mut rep)?;
                }
                got.wait_for(base + recv_total, &ctx.abort)?;
                let end = ctx.us();
                recs.push(IterRecord {
                    run: ctx.run.clone(),
                    job: job.name.clone(),
                    role: "worker".into(),
                    worker: i,
                    host: host.clone(),
                    iter: k as u32,
                    compute_start_us: Some(cs),
                    compute_end_us: Some(ce),
                    comm_start_us: comm_start,
                    comm_end_us: end,
                    bytes_sent: send_total,
                    bytes_recv: recv_total,
                    burst_wait_us,
                    burst_outcome,
                });
                sh.iter.wait(&ctx.abort)?;
                if i == 0 {
                    ctx.progress[job_idx].fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(())
        })();
        if let Err(e) = res {
            ctx.fail(format!("job {} worker {i} ({host}): {e:#}", job.name));
            let _ = receiver.join();
            return Err(e);
        }
        match receiver.join() {
            Ok(Ok(())) => Ok(recs),
            Ok(Err(e)) => Err(e.context("receiver")),
            Err(_) => Err(anyhow!("receiver thread panicked")),
        }
    })?;
    Ok(records)
}

pub(super) struct PsShared {
    pub(super) addr: Mutex<Option<SocketAddr>>,
    pub(super) setup: Barrier,
    pub(super) iter: Barrier,
    /// Pushes fully received per iteration index.
    pub(super) pushed: Mutex<Vec<usize>>,
    pub(super) pushed_cv: Condvar,
}

pub(super) fn ps_worker(
    ctx: &Ctx,
    job_idx: usize,
    job: &JobPlan,
    i: usize,
    sh: &PsShared,
) -> Result<Vec<IterRecord>> {
    let host = &job.workers[i];
    let ps_host = job.ps.as_ref().ok_or_else(|| anyhow!("no ps host"))?;
    let (ns, _) = ctx.net.lookup(host)?;
    enter(&ns)?;
    sh.setup.wait(&ctx.abort)?;
    let addr = sh
        .addr
        .lock()
        .unwrap()
        .ok_or_else(|| anyhow!("PS has no address"))?;
    let mut s = connect_cc(addr, &ctx.cc)?;
    let cc = prepare(&s, &ctx.cc)?;
    s.write_all(&(i as u32).to_le_bytes())
        .context("hello to PS")?;
    ctx.register(
        FlowInfo {
            id: 0,
            job: job.name.clone(),
            kind: "push".into(),
            worker: i,
            src_host: host.clone(),
            dst_host: ps_host.clone(),
            cc,
            ecn: false,
        },
        &s,
    )?;
    let g = job.gradient_bytes;
    let w = job.workers.len() as u32;
    let mut rep = Reporter::open(
        &ctx.progress_dir,
        &Identity {
            run: &ctx.run,
            job: &job.name,
            rank: i as u32,
            world_size: w + 1,
            paradigm: Paradigm::ParameterServer,
            role: Role::Worker,
            ring: None,
            bytes_per_iteration: g,
        },
    );
    rep.add_flow(&s, FlowKind::PsPush, w);
    let mut buf = vec![0u8; 256 * 1024];
    let mut recs = Vec::new();
    let mut draws = ComputeDraws::new(ctx.seed, job.index, i, job.compute_ms, &job.jitter);
    ctx.start(job.start_offset_ms)?;
    for k in 0..job.iterations {
        let cs = ctx.us();
        sleep_until(ctx, cs + (draws.next_ms() * 1000.0) as u64)?;
        let ce = ctx.us();
        rep.begin_iteration(u64::from(k));
        let (burst_wait_us, burst_outcome) = pcn_wait(ctx, &mut rep);
        let comm_start = ctx.us();
        send_bytes(&mut s, g, ctx, &mut rep)?;
        recv_bytes(&mut s, g, &mut buf, ctx, None)?;
        let end = ctx.us();
        recs.push(IterRecord {
            run: ctx.run.clone(),
            job: job.name.clone(),
            role: "worker".into(),
            worker: i,
            host: host.clone(),
            iter: k,
            compute_start_us: Some(cs),
            compute_end_us: Some(ce),
            comm_start_us: comm_start,
            comm_end_us: end,
            bytes_sent: g,
            bytes_recv: g,
            burst_wait_us,
            burst_outcome,
        });
        sh.iter.wait(&ctx.abort)?;
        if i == 0 {
            ctx.progress[job_idx].fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(recs)
}

pub(super) fn ps_server(ctx: &Ctx, job: &JobPlan, sh: &PsShared) -> Result<Vec<IterRecord>> {
    let w = job.workers.len();
    let host = job.ps.as_ref().ok_or_else(|| anyhow!("no ps host"))?;
    let (ns, ip) = ctx.net.lookup(host)?;
    enter(&ns)?;
    let l = listen_cc(ip, &ctx.cc)?;
    *sh.addr.lock().unwrap() = Some(l.local_addr()?);
    sh.setup.wait(&ctx.abort)?;
    let mut conns: Vec<Option<TcpStream>> = (0..w).map(|_| None).collect();
    for _ in 0..w {
        let mut s = accept_cc(&l, &ctx.cc, ctx)?;
        let cc = prepare(&s, &ctx.cc)?;
        let mut hello = [0u8; 4];
        recv_exact(&mut s, &mut hello, ctx)?;
        let idx = u32::from_le_bytes(hello) as usize;
        if idx >= w || conns[idx].is_some() {
            bail!("bad hello {idx} from a worker");
        }
        ctx.register(
            FlowInfo {
                id: 0,
                job: job.name.clone(),
                kind: "pull".into(),
                worker: idx,
                src_host: host.clone(),
                dst_host: job.workers[idx].clone(),
                cc,
                ecn: false,
            },
            &s,
        )?;
        conns[idx] = Some(s);
    }
    let g = job.gradient_bytes;
    let iters = job.iterations as usize;
    let mut rep = Reporter::open(
        &ctx.progress_dir,
        &Identity {
            run: &ctx.run,
            job: &job.name,
            rank: w as u32,
            world_size: w as u32 + 1,
            paradigm: Paradigm::ParameterServer,
            role: Role::ParameterServer,
            ring: None,
            bytes_per_iteration: g * w as u64,
        },
    );
    for (idx, c) in conns.iter().enumerate() {
        if let Some(c) = c {
            rep.add_flow(c, FlowKind::PsPull, idx as u32);
        }
    }
    // One region for the PS, written by its per-connection threads.
    let rep = Mutex::new(rep);
    *sh.pushed.lock().unwrap() = vec![0; iters];
    // Per connection: (first push byte µs, broadcast end µs) per iteration.
    let per_conn = thread::scope(|scope| -> Result<Vec<Vec<(u64, u64)>>> {
        let handles: Vec<_> = conns
            .into_iter()
            .map(|c| {
                let mut s = c.expect("all workers connected");
                let rep = &rep;
                scope.spawn(move || -> Result<Vec<(u64, u64)>> {
                    let mut buf = vec![0u8; 256 * 1024];
                    let mut v = Vec::with_capacity(iters);
                    for k in 0..iters {
                        let first = recv_bytes(&mut s, g, &mut buf, ctx, None)?;
                        {
                            let mut p = sh.pushed.lock().unwrap();
                            p[k] += 1;
                            sh.pushed_cv.notify_all();
                            while p[k] < w {
                                ctx.check()?;
                                p = sh
                                    .pushed_cv
                                    .wait_timeout(p, Duration::from_millis(100))
                                    .unwrap()
                                    .0;
                            }
                        }
                        // The broadcast is iteration k's: the region says so before its first
                        // byte (the agent plans a flow by its region's iteration; begun after the
                        // broadcast, the region kept iteration k-1, all sent, and the agent held
                        // the broadcast at its rate floor).
                        rep.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .begin_iteration(k as u64);
                        send_bytes(&mut s, g, ctx, &mut Reporter::none())?;
                        rep.lock().unwrap_or_else(|p| p.into_inner()).add_bytes(g);
                        v.push((first, ctx.us()));
                    }
                    Ok(v)
                })
            })
            .collect();
        let mut out = Vec::new();
        for h in handles {
            match h.join() {
                Ok(Ok(v)) => out.push(v),
                Ok(Err(e)) => {
                    ctx.fail(format!("job {} PS ({host}): {e:#}", job.name));
                    return Err(e);
                }
                Err(_) => bail!("PS connection thread panicked"),
            }
        }
        Ok(out)
    })?;
    Ok((0..iters)
        .map(|k| IterRecord {
            run: ctx.run.clone(),
            job: job.name.clone(),
            role: "ps".into(),
            worker: 0,
            host: host.clone(),
            iter: k as u32,
            compute_start_us: None,
            compute_end_us: None,
            comm_start_us: per_conn.iter().map(|v| v[k].0).min().unwrap_or(0),
            comm_end_us: per_conn.iter().map(|v| v[k].1).max().unwrap_or(0),
            bytes_sent: g * w as u64,
            bytes_recv: g * w as u64,
            burst_wait_us: None,
            burst_outcome: None,
        })
        .collect())
}

pub(super) fn recv_exact(s: &mut TcpStream, buf: &mut [u8], ctx: &Ctx) -> Result<()> {
    let mut off = 0;
    while off < buf.len() {
        match s.read(&mut buf[off..]) {
            Ok(0) => bail!("peer closed"),
            Ok(n) => off += n,
            Err(e) if retryable(&e) => ctx.check()?,
            Err(e) => return Err(e).context("read"),
        }
    }
    Ok(())
}

/// PCN: the bounded `before_burst` wait of a worker about to communicate, when the run asks for
/// it; returns (waited µs, outcome) for its record.
pub(super) fn pcn_wait(ctx: &Ctx, rep: &mut Reporter) -> (Option<u64>, Option<String>) {
    let Some(timeout) = ctx.before_burst else {
        return (None, None);
    };
    let t = ctx.us();
    let outcome = rep.before_burst(timeout);
    (Some(ctx.us() - t), Some(outcome.to_string()))
}
