// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Sockets: congestion control per socket, connecting, accepting and moving bytes with the run's
//! abort and timeouts.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::progress::Reporter;
use nix::sys::socket::{
    connect, getsockopt, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, SockaddrIn,
};

use super::ctx::{Counter, Ctx};

pub(super) const IO_TIMEOUT: Duration = Duration::from_millis(500);
pub(super) static ZEROS: [u8; 256 * 1024] = [0; 256 * 1024];

pub(super) fn enter(ns: &Option<PathBuf>) -> Result<()> {
    if let Some(p) = ns {
        let f = File::open(p).with_context(|| format!("open {}", p.display()))?;
        nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET)
            .with_context(|| format!("setns({})", p.display()))?;
    }
    Ok(())
}

/// Sets the congestion control of socket `fd` (setsockopt TCP_CONGESTION).
pub fn set_cc(fd: &impl AsFd, cc: &str) -> Result<()> {
    setsockopt(fd, sockopt::TcpCongestion, &OsString::from(cc))
        .with_context(|| format!("setsockopt(TCP_CONGESTION, {cc})"))
}

/// Reads the congestion control of socket `fd` (getsockopt TCP_CONGESTION).
pub fn get_cc(fd: &impl AsFd) -> Result<String> {
    let name = getsockopt(fd, sockopt::TcpCongestion).context("getsockopt(TCP_CONGESTION)")?;
    Ok(name.to_string_lossy().into_owned())
}

pub(super) fn listen_cc(ip: Ipv4Addr, cc: &str) -> Result<TcpListener> {
    let l = TcpListener::bind(SocketAddrV4::new(ip, 0)).with_context(|| format!("bind {ip}:0"))?;
    // No connection can arrive before the address is published, after this.
    set_cc(&l, cc)?;
    Ok(l)
}

/// Connects to `addr` with congestion control `cc` set before the SYN (so the whole flow runs it).
pub(super) fn connect_cc(addr: SocketAddr, cc: &str) -> Result<TcpStream> {
    let SocketAddr::V4(a) = addr else {
        bail!("IPv4 only")
    };
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .context("socket(AF_INET, SOCK_STREAM)")?;
    set_cc(&fd, cc)?;
    connect(fd.as_raw_fd(), &SockaddrIn::from(a)).with_context(|| format!("connect {addr}"))?;
    Ok(TcpStream::from(fd))
}

pub(super) fn accept_cc(l: &TcpListener, cc: &str, ctx: &Ctx) -> Result<TcpStream> {
    l.set_nonblocking(true)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                set_cc(&s, cc)?;
                return Ok(s);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                ctx.check()?;
                if Instant::now() > deadline {
                    bail!("no connection within 30 s on {}", l.local_addr()?);
                }
                thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(e).context("accept"),
        }
    }
}

pub(super) fn prepare(s: &TcpStream, cc: &str) -> Result<String> {
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let got = get_cc(s)?;
    if got != cc {
        bail!("socket uses congestion control {got}, not {cc}");
    }
    Ok(got)
}

/// True for a socket error after which the call is simply retried: the socket's timeout
/// expired (`WouldBlock` / `TimedOut`, SO_RCVTIMEO / SO_SNDTIMEO) or a signal interrupted it.
pub(super) fn retryable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Writes `n` bytes, retrying on timeouts until the run aborts.
pub(super) fn send_bytes(
    s: &mut TcpStream,
    mut n: u64,
    ctx: &Ctx,
    rep: &mut Reporter,
) -> Result<()> {
    while n > 0 {
        let k = n.min(ZEROS.len() as u64) as usize;
        match s.write(&ZEROS[..k]) {
            Ok(0) => bail!("peer closed"),
            Ok(w) => {
                n -= w as u64;
                rep.add_bytes(w as u64);
            }
            Err(e) if retryable(&e) => ctx.check()?,
            Err(e) => return Err(e).context("write"),
        }
    }
    Ok(())
}

/// Reads exactly `n` bytes, retrying on timeouts; returns the time the first byte arrived (µs).
pub(super) fn recv_bytes(
    s: &mut TcpStream,
    mut n: u64,
    buf: &mut [u8],
    ctx: &Ctx,
    progress: Option<&Counter>,
) -> Result<u64> {
    let mut first = None;
    while n > 0 {
        let k = n.min(buf.len() as u64) as usize;
        match s.read(&mut buf[..k]) {
            Ok(0) => bail!("peer closed with {n} bytes outstanding"),
            Ok(r) => {
                first.get_or_insert_with(|| ctx.us());
                n -= r as u64;
                if let Some(c) = progress {
                    c.add(r as u64);
                }
            }
            Err(e) if retryable(&e) => ctx.check()?,
            Err(e) => return Err(e).context("read"),
        }
    }
    Ok(first.unwrap_or_else(|| ctx.us()))
}

pub(super) fn sleep_until(ctx: &Ctx, t_us: u64) -> Result<()> {
    loop {
        ctx.check()?;
        let now = ctx.us();
        if now >= t_us {
            return Ok(());
        }
        thread::sleep(Duration::from_micros((t_us - now).min(50_000)));
    }
}
