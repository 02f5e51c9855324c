//! mltcp-burst: iteration-shaped TCP traffic over ONE connection, for checking tcp_mltcp's
//! iteration detection (`mltcp-stat` shows what the module saw).
//!
//! `mltcp-burst sink --listen ADDR:PORT` accepts connections and discards what they send.
//! `mltcp-burst send --to ADDR:PORT --bursts N --bytes B --gap-ms G [--cc NAME]` connects once
//! and sends N bursts of B bytes separated by G ms of silence, like a training job's
//! communication phases separated by compute phases. Writes are 256 KiB blocking `write`s, so a
//! burst is never paused by the program itself. `--warmup-bursts K --warmup-bytes W` sends K
//! bursts of W bytes first, each followed by the gap: tcp_mltcp counts an iteration only from an
//! observed idle boundary, so two short warm-up bursts give the socket its bytes-per-iteration
//! estimate (and F) before the measured bursts begin.

use clap::{Parser, Subcommand};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    version,
    about = "Iteration-shaped TCP bursts over one connection, and a sink for them"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Accept connections and discard their data (one thread per connection).
    Sink {
        /// Address to listen on.
        #[arg(long)]
        listen: SocketAddr,
    },
    /// Send bursts over one connection.
    Send {
        /// Receiver address.
        #[arg(long)]
        to: SocketAddr,
        /// Number of bursts (iterations).
        #[arg(long, default_value_t = 6)]
        bursts: u32,
        /// Bytes per burst.
        #[arg(long, default_value_t = 2_000_000)]
        bytes: u64,
        /// Silence between bursts, in milliseconds.
        #[arg(long, default_value_t = 200)]
        gap_ms: u64,
        /// Warm-up bursts sent before the `--bursts`, each followed by the gap.
        #[arg(long, default_value_t = 0)]
        warmup_bursts: u32,
        /// Bytes per warm-up burst.
        #[arg(long, default_value_t = 100_000)]
        warmup_bytes: u64,
        /// Congestion control for the socket (setsockopt TCP_CONGESTION before connect);
        /// default: the namespace's default.
        #[arg(long)]
        cc: Option<String>,
    },
}

fn set_cc(fd: i32, name: &str) -> std::io::Result<()> {
    // SAFETY: `fd` is an open socket; the option value is `name`'s bytes, length passed along.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// What `send` sends: `warmup` bursts of `warmup_bytes`, then `bursts` of `bytes`, each but the
/// last followed by `gap` of silence.
struct Plan {
    warmup: u32,
    warmup_bytes: u64,
    bursts: u32,
    bytes: u64,
    gap: Duration,
}

impl Plan {
    /// Each burst's size in bytes, in sending order, with whether it is a warm-up burst.
    fn sizes(&self) -> impl Iterator<Item = (u64, bool)> + '_ {
        (0..self.warmup)
            .map(|_| (self.warmup_bytes, true))
            .chain((0..self.bursts).map(|_| (self.bytes, false)))
    }
}

fn send(to: SocketAddr, plan: &Plan, cc: Option<&str>) -> Result<(), String> {
    let domain = if to.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // A socket of our own so TCP_CONGESTION is set before the handshake.
    // SAFETY: Plain socket(2) call.
    let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!("socket: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` is a fresh socket we own; TcpStream takes over closing it.
    let stream = unsafe { <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    if let Some(name) = cc {
        set_cc(fd, name).map_err(|e| format!("setsockopt(TCP_CONGESTION, {name}): {e}"))?;
    }
    let sa = socket2_addr(&to);
    // SAFETY: `sa` holds a valid sockaddr of the length passed.
    let r = unsafe { libc::connect(fd, sa.0.as_ptr().cast(), sa.1) };
    if r != 0 {
        return Err(format!("connect {to}: {}", std::io::Error::last_os_error()));
    }
    let mut stream = stream;
    let block = vec![0u8; 256 * 1024];
    let total = plan.warmup + plan.bursts;
    for (i, (bytes, warmup)) in (1u32..).zip(plan.sizes()) {
        let t0 = Instant::now();
        let mut left = bytes;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            stream
                .write_all(&block[..n])
                .map_err(|e| format!("write: {e}"))?;
            left -= n as u64;
        }
        if warmup {
            println!(
                "warm-up burst {i} of {}: {bytes} bytes in {:?}",
                plan.warmup,
                t0.elapsed()
            );
        } else {
            let k = i - plan.warmup;
            println!(
                "burst {k} of {}: {bytes} bytes in {:?}",
                plan.bursts,
                t0.elapsed()
            );
        }
        if i < total {
            std::thread::sleep(plan.gap);
        }
    }
    Ok(())
}

/// A `sockaddr_in`/`sockaddr_in6` for `addr`, as bytes and length.
fn socket2_addr(addr: &SocketAddr) -> (Vec<u8>, libc::socklen_t) {
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            let len = std::mem::size_of::<libc::sockaddr_in>();
            // SAFETY: Reads the bytes of a plain C struct.
            let b = unsafe {
                std::slice::from_raw_parts((&sin as *const libc::sockaddr_in).cast::<u8>(), len)
            };
            (b.to_vec(), len as libc::socklen_t)
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            let len = std::mem::size_of::<libc::sockaddr_in6>();
            // SAFETY: Reads the bytes of a plain C struct.
            let b = unsafe {
                std::slice::from_raw_parts((&sin6 as *const libc::sockaddr_in6).cast::<u8>(), len)
            };
            (b.to_vec(), len as libc::socklen_t)
        }
    }
}

fn sink(listen: SocketAddr) -> Result<(), String> {
    let l = TcpListener::bind(listen).map_err(|e| format!("listen {listen}: {e}"))?;
    for conn in l.incoming() {
        let Ok(mut c) = conn else { continue };
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 256 * 1024];
            while matches!(c.read(&mut buf), Ok(n) if n > 0) {}
        });
    }
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Sink { listen } => sink(listen),
        Cmd::Send {
            to,
            bursts,
            bytes,
            gap_ms,
            warmup_bursts,
            warmup_bytes,
            cc,
        } => send(
            to,
            &Plan {
                warmup: warmup_bursts,
                warmup_bytes,
                bursts,
                bytes,
                gap: Duration::from_millis(gap_ms),
            },
            cc.as_deref(),
        ),
    };
    if let Err(e) = r {
        eprintln!("mltcp-burst: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_bursts_come_first() {
        let p = Plan {
            warmup: 2,
            warmup_bytes: 10,
            bursts: 3,
            bytes: 99,
            gap: Duration::ZERO,
        };
        let v: Vec<_> = p.sizes().collect();
        assert_eq!(
            v,
            [
                (10, true),
                (10, true),
                (99, false),
                (99, false),
                (99, false)
            ]
        );
        let none = Plan { warmup: 0, ..p };
        assert_eq!(none.sizes().count(), 3);
        assert!(none.sizes().all(|(b, w)| b == 99 && !w));
    }
}
