// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Background flows: bulk TCP transfers beside the jobs.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use super::ctx::Ctx;
use super::sockets::{accept_cc, connect_cc, enter, listen_cc, prepare, retryable, ZEROS};
use super::{BgPlan, BgRecord, FlowInfo};

/// Receiving end of a background flow: listens in `to`'s namespace with the flow's congestion
/// control (so an ECN-needing one negotiates ECN), publishes its address, reads until the sender
/// closes.
pub(super) fn bg_receiver(
    ctx: &Ctx,
    bg: &BgPlan,
    addr: std::sync::mpsc::Sender<SocketAddr>,
) -> Result<()> {
    let (ns, ip) = ctx.net.lookup(&bg.to)?;
    enter(&ns)?;
    let l = listen_cc(ip, &bg.cc)?;
    addr.send(l.local_addr()?)
        .map_err(|_| anyhow!("sender gone"))?;
    let mut s = accept_cc(&l, &bg.cc, ctx)?;
    prepare(&s, &bg.cc)?;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if retryable(&e) => ctx.check()?,
            Err(e) => return Err(e).context("read"),
        }
    }
}

/// Sending end of a background flow: connects from `from`'s namespace, waits for the run's start
/// like a worker, then writes as fast as TCP takes it from `start_ms` until `stop_ms` (or, without
/// one, until the run's jobs are done).
pub(super) fn bg_sender(
    ctx: &Ctx,
    bg: &BgPlan,
    addr: std::sync::mpsc::Receiver<SocketAddr>,
) -> Result<BgRecord> {
    let (ns, _) = ctx.net.lookup(&bg.from)?;
    enter(&ns)?;
    let a = addr
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| anyhow!("the receiver published no address within 30 s"))?;
    let mut s = connect_cc(a, &bg.cc)?;
    let cc = prepare(&s, &bg.cc)?;
    let info = FlowInfo {
        id: 0,
        job: bg.name.clone(),
        kind: "background".into(),
        worker: 0,
        src_host: bg.from.clone(),
        dst_host: bg.to.clone(),
        cc: cc.clone(),
        ecn: false,
    };
    let flow = ctx.register(info, &s)?;
    ctx.start(bg.start_ms)?;
    let go = *ctx
        .go_us
        .get()
        .ok_or_else(|| anyhow!("run start not set"))?;
    let stop_at = bg.stop_ms.map(|m| go + (m * 1000.0) as u64);
    let start_us = ctx.us();
    let mut sent = 0u64;
    const CHUNK: usize = 64 * 1024;
    loop {
        ctx.check()?;
        if stop_at.is_some_and(|t| ctx.us() >= t)
            || (ctx.has_jobs && ctx.jobs_done.load(Ordering::SeqCst))
        {
            break;
        }
        match s.write(&ZEROS[..CHUNK]) {
            Ok(0) => bail!("peer closed"),
            Ok(w) => sent += w as u64,
            Err(e) if retryable(&e) => {}
            Err(e) => return Err(e).context("write"),
        }
    }
    let stop_us = ctx.us();
    s.shutdown(std::net::Shutdown::Write).context("shutdown")?;
    Ok(BgRecord {
        name: bg.name.clone(),
        flow,
        from: bg.from.clone(),
        to: bg.to.clone(),
        cc,
        start_us,
        stop_us,
        bytes_sent: sent,
    })
}
