// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! # `libmltcp_preload.so`: MLTCP for unmodified programs
//!
//! An `LD_PRELOAD` shim that sets the TCP congestion control (`setsockopt(IPPROTO_TCP,
//! TCP_CONGESTION)`) on the TCP sockets a program creates, without patching it:
//!
//! - `connect()`: on an IPv4/IPv6 TCP socket, set before the real `connect` (so the handshake
//!   already runs under the algorithm);
//! - `accept()`, `accept4()`: on the accepted socket, right after the real call (before the program
//!   can send on it).
//!
//! ```sh
//! cargo build --release -p mltcp-preload
//! LD_PRELOAD=$PWD/target/release/libmltcp_preload.so MLTCP_PORTS=5201 iperf3 -c 10.0.0.2
//! ss -ti dport = :5201          # shows "mltcp" for the connection
//! ```
//!
//! ## Environment
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `MLTCP_CC` | algorithm to set; `""` or `none` turns the shim off | `mltcp` |
//! | `MLTCP_PORTS` | comma-separated ports and inclusive ranges, e.g. `5000-5100,29500`: only sockets whose peer port or own port is in one | every port |
//! | `MLTCP_DSTS` | comma-separated peer address prefixes, e.g. `10.0.0.0/24,fd00::/8` (a bare address is a host prefix; IPv4-mapped IPv6 peers match IPv4 prefixes) | every peer |
//! | `MLTCP_PRELOAD_DEBUG` | `1`: one stderr line per socket decision | off |
//!
//! With both `MLTCP_PORTS` and `MLTCP_DSTS`, a socket must match both. The variables are read
//! once, at the first `connect`/`accept` of the process.
//!
//! ## Failures
//!
//! The shim never changes what the program's calls return (nor `errno`). If the algorithm cannot
//! be set — not loaded (`ENOENT`: e.g. `tcp_mltcp.ko` not inserted), not allowed for an
//! unprivileged process (`EPERM`: add it to `net.ipv4.tcp_allowed_congestion_control`) — the
//! socket keeps the system default and the shim says so once on stderr (`mltcp-preload: ...`). A
//! variable that does not parse turns the shim off, also said once. Non-TCP sockets (UDP, Unix,
//! MPTCP) are left alone. Programs that make their system calls without the dynamic C library
//! (statically linked ones, Go) bypass the shim.
//!
//! ## Without the shim
//!
//! Other ways to the same end, per host: `sysctl -w net.ipv4.tcp_congestion_control=mltcp` (every
//! new socket of the network namespace), or per destination `ip route replace 10.0.0.0/24 dev eth1
//! congctl mltcp` (the route's algorithm wins over the default, and a program's own `setsockopt`
//! wins over both). The shim is for one program at a time, and for filtering by port.

pub mod config;

use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

pub use config::{Config, PortRange, Prefix};

type ConnectFn = unsafe extern "C" fn(c_int, *const libc::sockaddr, libc::socklen_t) -> c_int;
type AcceptFn = unsafe extern "C" fn(c_int, *mut libc::sockaddr, *mut libc::socklen_t) -> c_int;
type Accept4Fn =
    unsafe extern "C" fn(c_int, *mut libc::sockaddr, *mut libc::socklen_t, c_int) -> c_int;

/// The next definition of `name` after this library (libc's, normally), or null.
fn next_symbol(name: &CStr) -> *mut c_void {
    // SAFETY: `name` is NUL-terminated; RTLD_NEXT lookups are thread-safe in glibc.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
}

macro_rules! real {
    ($name:literal, $ty:ty) => {{
        static SYM: OnceLock<usize> = OnceLock::new();
        let p = *SYM.get_or_init(|| next_symbol($name) as usize);
        if p == 0 {
            None
        } else {
            // SAFETY: `p` is the address of the libc function of that name, whose C signature is
            // `$ty`.
            Some(unsafe { std::mem::transmute::<usize, $ty>(p) })
        }
    }};
}

/// The configuration, read once; `None` = shim off.
fn config() -> Option<&'static Config> {
    static CONFIG: OnceLock<Option<Config>> = OnceLock::new();
    CONFIG
        .get_or_init(|| match Config::from_env() {
            Ok(c) => c,
            Err(e) => {
                log(&format!("{e}; the shim is off"));
                None
            }
        })
        .as_ref()
}

/// One line to stderr, prefixed with the shim's name.
fn log(msg: &str) {
    let line = format!("mltcp-preload: {msg}\n");
    // SAFETY: writes `line.len()` bytes from a live buffer to fd 2; a failure is ignored.
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
    }
}

fn errno() -> c_int {
    // SAFETY: glibc's per-thread errno location is always valid.
    unsafe { *libc::__errno_location() }
}

fn set_errno(v: c_int) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = v }
}

fn getsockopt_int(fd: c_int, level: c_int, opt: c_int) -> Option<c_int> {
    let mut v: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for writing an int option.
    let r = unsafe { libc::getsockopt(fd, level, opt, (&mut v as *mut c_int).cast(), &mut len) };
    (r == 0).then_some(v)
}

/// Whether `fd` is a TCP socket (stream, protocol TCP; MPTCP and Unix sockets are not).
fn is_tcp(fd: c_int) -> bool {
    getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TYPE) == Some(libc::SOCK_STREAM)
        && getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_PROTOCOL) == Some(libc::IPPROTO_TCP)
        && matches!(
            getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_DOMAIN),
            Some(libc::AF_INET | libc::AF_INET6)
        )
}

/// The socket's own (`peer = false`) or peer's address.
fn sock_addr(fd: c_int, peer: bool) -> Option<std::net::SocketAddr> {
    // SAFETY: all-zero bytes are a valid sockaddr_storage.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let p = (&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr>();
    // SAFETY: `p`/`len` describe a writable sockaddr_storage.
    let r = unsafe {
        if peer {
            libc::getpeername(fd, p, &mut len)
        } else {
            libc::getsockname(fd, p, &mut len)
        }
    };
    if r != 0 {
        return None;
    }
    // SAFETY: the kernel wrote `len` bytes (at most the storage's size) at `p`.
    unsafe { config::sockaddr_to_std(p, len) }
}

/// Sets the configured algorithm on TCP socket `fd` talking to `peer`, if the filter wants it.
fn apply(fd: c_int, peer: Option<std::net::SocketAddr>, side: &str) {
    let Some(cfg) = config() else { return };
    let Some(peer) = peer else { return };
    if !is_tcp(fd) {
        return;
    }
    let local_port = sock_addr(fd, false).map_or(0, |a| a.port());
    if !cfg.wants(peer, local_port) {
        if cfg.debug {
            log(&format!(
                "{side} fd {fd} peer {peer} local port {local_port}: filtered out, left alone"
            ));
        }
        return;
    }
    // SAFETY: `cfg.cc` is a live buffer of `len` bytes; the kernel copies at most that much.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cfg.cc.as_ptr().cast(),
            cfg.cc.len() as libc::socklen_t,
        )
    };
    if r == 0 {
        if cfg.debug {
            log(&format!(
                "{side} fd {fd} peer {peer}: TCP_CONGESTION={}",
                cfg.cc
            ));
        }
        return;
    }
    let err = std::io::Error::last_os_error();
    static LOGGED: AtomicBool = AtomicBool::new(false);
    if cfg.debug || !LOGGED.swap(true, Ordering::Relaxed) {
        let hint = match err.raw_os_error() {
            Some(libc::ENOENT) => " (not available: is its module loaded? see /proc/sys/net/ipv4/tcp_available_congestion_control)",
            Some(libc::EPERM) => " (not allowed: add it to net.ipv4.tcp_allowed_congestion_control)",
            _ => "",
        };
        log(&format!(
            "cannot set TCP_CONGESTION={}: {err}{hint}; sockets keep the system default (said once)",
            cfg.cc
        ));
    }
}

/// Runs the shim's own work for one call, keeping `errno` as it was and never unwinding.
fn quietly(f: impl FnOnce()) {
    let saved = errno();
    let _ = catch_unwind(AssertUnwindSafe(f));
    set_errno(saved);
}

/// `connect(2)`, with the congestion control set first.
///
/// # Safety
/// Same contract as libc's `connect`: `addr` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn connect(
    fd: c_int,
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> c_int {
    let Some(real) = real!(c"connect", ConnectFn) else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    quietly(|| {
        // SAFETY: the caller's contract: `addr` points to `len` readable bytes (or is null).
        let peer = unsafe { config::sockaddr_to_std(addr, len) };
        apply(fd, peer, "connect");
    });
    // SAFETY: forwarding the caller's arguments unchanged to libc's connect.
    unsafe { real(fd, addr, len) }
}

/// `accept(2)`, with the congestion control set on the accepted socket.
///
/// # Safety
/// Same contract as libc's `accept`.
#[no_mangle]
pub unsafe extern "C" fn accept(
    fd: c_int,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) -> c_int {
    let Some(real) = real!(c"accept", AcceptFn) else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: forwarding the caller's arguments unchanged to libc's accept.
    let r = unsafe { real(fd, addr, len) };
    if r >= 0 {
        quietly(|| apply(r, sock_addr(r, true), "accept"));
    }
    r
}

/// `accept4(2)`, with the congestion control set on the accepted socket.
///
/// # Safety
/// Same contract as libc's `accept4`.
#[no_mangle]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
    flags: c_int,
) -> c_int {
    let Some(real) = real!(c"accept4", Accept4Fn) else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: forwarding the caller's arguments unchanged to libc's accept4.
    let r = unsafe { real(fd, addr, len, flags) };
    if r >= 0 {
        quietly(|| apply(r, sock_addr(r, true), "accept"));
    }
    r
}
