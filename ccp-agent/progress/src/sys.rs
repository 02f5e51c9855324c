// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Thin wrappers over the few system calls the crate needs (mmap, clocks, positioned I/O, process
//! liveness), each with its safety argument in one place.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicU64;

/// A shared, read-write mapping of a whole file, unmapped on drop.
///
/// Only ever accessed through [`Mapping::word`] (atomic 8-byte words) and [`Mapping::copy_in`]
/// (before the file is published, while no other process can open it).
#[derive(Debug)]
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all concurrent access goes through atomics
// (`word`), and `copy_in` takes `&mut self`.
unsafe impl Send for Mapping {}
// SAFETY: as above: shared access only through `AtomicU64` references.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the first `len` bytes of `file` (opened read-write, at least `len` bytes long) shared.
    pub fn new(file: &File, len: usize) -> io::Result<Self> {
        // SAFETY: a fresh mapping chosen by the kernel (addr NULL) of a file descriptor we own; the
        // result is checked against MAP_FAILED before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    /// The 8-byte word at byte offset `off` (a multiple of 8, `off + 8 <= len`), as an atomic.
    pub fn word(&self, off: usize) -> &AtomicU64 {
        assert!(
            off % 8 == 0 && off + 8 <= self.len,
            "word offset {off} outside the mapping"
        );
        // SAFETY: in bounds and 8-aligned (mmap returns page-aligned memory, `off` is a multiple
        // of 8); the memory lives as long as `self`; every access to it is atomic.
        unsafe { &*(self.ptr.add(off) as *const AtomicU64) }
    }

    /// Copies `bytes` to the start of the mapping (`bytes.len() <= len`). Only used before the
    /// region is published, when no other process has it.
    pub fn copy_in(&mut self, bytes: &[u8]) {
        assert!(bytes.len() <= self.len);
        // SAFETY: in bounds (checked), `bytes` cannot overlap our private mapping, and no one else
        // accesses the mapping yet (`&mut self`, file not yet renamed into the directory).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr, bytes.len()) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned; no reference into the mapping
        // outlives `self` (the `word` borrows are tied to `&self`).
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock ids used here always exist on Linux.
    unsafe {
        libc::clock_gettime(clock, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC in ns (shared by every process of the host, not across a reboot).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_MONOTONIC in ms, truncated to 32 bits (the agent heartbeat's unit; compare wrapping).
pub fn monotonic_ms32() -> u32 {
    (monotonic_ns() / 1_000_000) as u32
}

/// CLOCK_REALTIME in ns.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// Reads exactly `buf.len()` bytes at `off`; a short read (file shorter than that) is
/// `UnexpectedEof`.
pub fn pread_exact(file: &File, buf: &mut [u8], off: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, off)
}

/// Writes the 8 bytes of `word` at `off` with a single `pwrite`.
pub fn pwrite_word(file: &File, word: u64, off: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, &word.to_ne_bytes(), off)
}

/// Whether process `pid` exists (0 never does): `kill(pid, 0)` succeeds or fails with `EPERM`.
pub fn process_alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; it only checks that the process exists.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// This process's id.
pub fn own_pid() -> u32 {
    std::process::id()
}
