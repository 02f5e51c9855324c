// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The C ABI declared in `include/progress.h`. Every function catches panics and reports errors
//! as a negative errno; a handle serializes its callers with a mutex, so several threads of a
//! library may report through one handle.

use std::ffi::{c_char, c_int, CStr};
use std::io;
use std::mem::ManuallyDrop;
use std::net::SocketAddr;
use std::os::fd::FromRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::layout::{FlowKind, FlowRecord, Paradigm, Role, VERSION};
use crate::writer::{AgentView, BurstOutcome, Writer, WriterOptions};

/// The opaque handle behind `mltcp_progress *`.
pub struct Handle {
    writer: Mutex<Writer>,
    view: AgentView,
}

impl Handle {
    fn lock(&self) -> MutexGuard<'_, Writer> {
        // A panic while holding the lock was caught at the ABI boundary; the writer's state is
        // still a valid region image, so keep going.
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn errno_of(e: &io::Error) -> c_int {
    if let Some(n) = e.raw_os_error() {
        return n;
    }
    match e.kind() {
        io::ErrorKind::InvalidInput => libc::EINVAL,
        io::ErrorKind::AlreadyExists => libc::EEXIST,
        io::ErrorKind::NotFound => libc::ENOENT,
        io::ErrorKind::PermissionDenied => libc::EACCES,
        _ => libc::EIO,
    }
}

/// Runs `f`, turning a panic into `-EIO` and an error into its negative errno.
fn guard(f: impl FnOnce() -> io::Result<c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => -errno_of(&e),
        Err(_) => -libc::EIO,
    }
}

/// Runs `f` on the handle `h`, or returns `-EINVAL` for a null handle.
fn with_handle(h: *const Handle, f: impl FnOnce(&Handle) -> io::Result<c_int>) -> c_int {
    // SAFETY: a non-null `h` is a pointer returned by `mltcp_progress_open` and not yet closed
    // (the header's contract); `Handle` is `Sync`, so shared references from several threads are
    // fine.
    match unsafe { h.as_ref() } {
        None => -libc::EINVAL,
        Some(h) => guard(|| f(h)),
    }
}

fn einval(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

/// Layout version of the regions this library writes (`MLTCP_PROGRESS_VERSION`).
#[no_mangle]
pub extern "C" fn mltcp_progress_abi_version() -> u32 {
    VERSION
}

/// See `progress.h`.
///
/// # Safety
/// `job_id` is a NUL-terminated string; `dir` is NULL or a NUL-terminated string; `out` is a
/// valid pointer to write the handle to.
#[no_mangle]
pub unsafe extern "C" fn mltcp_progress_open(
    job_id: *const c_char,
    rank: u32,
    dir: *const c_char,
    max_flows: u32,
    out: *mut *mut Handle,
) -> c_int {
    guard(|| {
        if job_id.is_null() || out.is_null() {
            return Err(einval("null argument"));
        }
        // SAFETY: non-null and NUL-terminated per the contract above.
        let job = unsafe { CStr::from_ptr(job_id) }
            .to_str()
            .map_err(|_| einval("job id is not UTF-8"))?;
        let dir = if dir.is_null() {
            None
        } else {
            // SAFETY: non-null and NUL-terminated per the contract above.
            let d = unsafe { CStr::from_ptr(dir) };
            Some(PathBuf::from(
                <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(d.to_bytes()),
            ))
        };
        let w = Writer::create(job, rank, &WriterOptions { dir, max_flows })?;
        let view = w.agent_view();
        let h = Box::new(Handle {
            writer: Mutex::new(w),
            view,
        });
        // SAFETY: `out` is non-null and writable per the contract.
        unsafe { *out = Box::into_raw(h) };
        Ok(0)
    })
}

/// See `progress.h`.
#[no_mangle]
pub extern "C" fn mltcp_progress_set_job(
    h: *const Handle,
    paradigm: u32,
    role: u32,
    world_size: u32,
) -> c_int {
    with_handle(h, |h| {
        let p = Paradigm::from_raw(paradigm).ok_or_else(|| einval("paradigm"))?;
        let r = Role::from_raw(role).ok_or_else(|| einval("role"))?;
        h.lock().set_job(p, r, world_size);
        Ok(0)
    })
}

/// See `progress.h`.
#[no_mangle]
pub extern "C" fn mltcp_progress_set_ring(h: *const Handle, pred: u32, succ: u32) -> c_int {
    with_handle(h, |h| {
        h.lock().set_ring(pred, succ);
        Ok(0)
    })
}

/// See `progress.h`.
#[no_mangle]
pub extern "C" fn mltcp_progress_set_bytes_per_iteration(h: *const Handle, bytes: u64) -> c_int {
    with_handle(h, |h| {
        h.lock().set_bytes_per_iteration(bytes);
        Ok(0)
    })
}

/// See `progress.h`.
///
/// # Safety
/// `flows` points to `n` readable `struct mltcp_flow` (or `n` is 0).
#[no_mangle]
pub unsafe extern "C" fn mltcp_progress_set_flows(
    h: *const Handle,
    flows: *const FlowRecord,
    n: usize,
) -> c_int {
    with_handle(h, |h| {
        let flows: &[FlowRecord] = if n == 0 {
            &[]
        } else if flows.is_null() {
            return Err(einval("null flows"));
        } else {
            // SAFETY: `flows` is non-null and points to `n` records per the contract; the records
            // are plain integers and byte arrays, valid for any bit pattern.
            unsafe { std::slice::from_raw_parts(flows, n) }
        };
        h.lock().set_flows(flows)?;
        Ok(0)
    })
}

/// This process's and the peer's address of the connected IP socket `fd`.
fn socket_ends(fd: c_int) -> io::Result<(SocketAddr, SocketAddr)> {
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: F_GETFD only reads the descriptor's flags; any integer is a valid argument.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is open (checked above) and, per progress.h, stays open during this call;
    // `ManuallyDrop` keeps the borrowed descriptor from being closed here.
    let s = ManuallyDrop::new(unsafe { <std::net::TcpStream as FromRawFd>::from_raw_fd(fd) });
    Ok((s.local_addr()?, s.peer_addr()?))
}

/// See `progress.h`.
#[no_mangle]
pub extern "C" fn mltcp_progress_add_flow_fd(
    h: *const Handle,
    fd: c_int,
    kind: u16,
    peer_rank: u32,
) -> c_int {
    with_handle(h, |h| {
        let kind = FlowKind::from_raw(kind).ok_or_else(|| einval("flow kind"))?;
        let (local, remote) = socket_ends(fd)?;
        h.lock()
            .add_flow(FlowRecord::new(local, remote, kind, peer_rank))?;
        Ok(0)
    })
}

/// See `progress.h`.
#[no_mangle]
pub extern "C" fn mltcp_progress_begin_iteration(h: *const Handle, iteration: u64) -> c_int {
    with_handle(h, |h| {
        h.lock().begin_iteration(iteration);
        Ok(0)
    })
}

/// See `progress.h`.
#[no_mangle]
pub extern "C" fn mltcp_progress_add_bytes(h: *const Handle, bytes: u64) -> c_int {
    with_handle(h, |h| {
        h.lock().add_bytes(bytes);
        Ok(0)
    })
}

/// Return value of `mltcp_progress_before_burst`: granted.
pub const BURST_GRANTED: c_int = 0;
/// Return value of `mltcp_progress_before_burst`: no live agent attached.
pub const BURST_NO_AGENT: c_int = 1;
/// Return value of `mltcp_progress_before_burst`: timed out.
pub const BURST_TIMED_OUT: c_int = 2;

/// See `progress.h`. The handle's lock is held only to record the request, not while waiting.
#[no_mangle]
pub extern "C" fn mltcp_progress_before_burst(h: *const Handle, timeout_us: u32) -> c_int {
    with_handle(h, |h| {
        let req = h.lock().request_burst();
        Ok(
            match h
                .view
                .wait_for_grant(req, Duration::from_micros(timeout_us as u64))
            {
                BurstOutcome::Granted => BURST_GRANTED,
                BurstOutcome::NoAgent => BURST_NO_AGENT,
                BurstOutcome::TimedOut => BURST_TIMED_OUT,
            },
        )
    })
}

/// See `progress.h`.
///
/// # Safety
/// `h` is NULL or a handle from `mltcp_progress_open` that no other thread uses any more.
#[no_mangle]
pub unsafe extern "C" fn mltcp_progress_close(h: *mut Handle) -> c_int {
    if h.is_null() {
        return 0;
    }
    guard(|| {
        // SAFETY: `h` came from `Box::into_raw` in `mltcp_progress_open` and is closed once.
        drop(unsafe { Box::from_raw(h) });
        Ok(0)
    })
}
