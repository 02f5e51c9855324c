//! `ccp-test-agent churn`: many short TCP connections of one congestion-control algorithm, for
//! checking that every flow the module offers to an agent leaves its CCP flow table when the
//! connection ends (the module's read-only `ccp_live_flows` is back to 0 afterwards).
//!
//! Each connection sets `TCP_CONGESTION` before the handshake, sends `--bytes`, and closes; a
//! sink (`mltcp-burst sink`) reads and discards. `--parallel` threads share the work.

use anyhow::{anyhow, Context, Result};
use nix::sys::socket::{
    connect, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, SockaddrIn,
};
use std::ffi::OsString;
use std::io::Write;
use std::net::{SocketAddrV4, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// `ccp-test-agent churn` options.
#[derive(clap::Args, Debug, Clone)]
pub struct ChurnArgs {
    /// The sink's address (IPv4).
    #[arg(long)]
    pub to: SocketAddrV4,
    /// Congestion control of every connection (e.g. mltcp, mltcp_cubic, mltcp_dctcp).
    #[arg(long)]
    pub cc: String,
    /// Connections to open, in all.
    #[arg(long, default_value_t = 1000)]
    pub connections: u64,
    /// Bytes each connection sends before it closes.
    #[arg(long, default_value_t = 10_000)]
    pub bytes: usize,
    /// Threads opening connections at the same time.
    #[arg(long, default_value_t = 4)]
    pub parallel: u64,
}

/// One connection: socket, `TCP_CONGESTION`, connect, send, close.
fn one(to: SocketAddrV4, cc: &OsString, data: &[u8]) -> Result<()> {
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .context("socket")?;
    setsockopt(&fd, sockopt::TcpCongestion, cc)
        .with_context(|| format!("setsockopt(TCP_CONGESTION, {cc:?})"))?;
    connect(fd.as_raw_fd(), &SockaddrIn::from(to)).with_context(|| format!("connect {to}"))?;
    let mut s = TcpStream::from(fd);
    s.write_all(data).context("write")?;
    Ok(())
}

/// Runs the churn; prints one summary line (connections, failures, seconds, connections/s).
pub fn run(a: &ChurnArgs) -> Result<()> {
    let cc = OsString::from(&a.cc);
    let data = vec![0x5au8; a.bytes];
    let next = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    let first_error = std::sync::Mutex::new(None::<String>);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..a.parallel.max(1) {
            s.spawn(|| {
                while next.fetch_add(1, Ordering::Relaxed) < a.connections {
                    if let Err(e) = one(a.to, &cc, &data) {
                        failed.fetch_add(1, Ordering::Relaxed);
                        let mut f = first_error.lock().unwrap_or_else(|p| p.into_inner());
                        f.get_or_insert_with(|| format!("{e:#}"));
                    }
                }
            });
        }
    });
    let secs = t0.elapsed().as_secs_f64();
    let failed = failed.into_inner();
    println!(
        "churn cc={} connections={} failed={} bytes_each={} seconds={:.2} per_second={:.0}",
        a.cc,
        a.connections,
        failed,
        a.bytes,
        secs,
        a.connections as f64 / secs.max(1e-9)
    );
    match first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) if failed > 0 => Err(anyhow!(
            "{failed} of {} connections failed; first: {e}",
            a.connections
        )),
        _ => Ok(()),
    }
}
