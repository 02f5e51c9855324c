// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! # The MLTCP progress interface, version 1
//!
//! How a communication library (patched NCCL, libzmq/ps-lite, the traffic emulator) tells the
//! local `ccp-agent` about the training job it serves: the paradigm (ring all-reduce or parameter
//! server), this process's role (worker or parameter server, ring predecessor and successor), the
//! socket 4-tuples of its flows, the bytes it sends per iteration, the current iteration number,
//! and the bytes handed to the network so far in this iteration. This is the monitoring block of
//! "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers" (Sec. V: the patched NCCL
//! writes the accumulated tensor bytes of the iteration to host shared memory, and the scheduler
//! compares them with the model size to learn the iteration and the bytes left).
//!
//! ## Mechanism: one shared-memory file per process of a job
//!
//! Each process of a job writes one region, `<dir>/<job_id>.<rank>.region`, where `dir` is
//! `$MLTCP_PROGRESS_DIR` or [`DEFAULT_DIR`] (`/dev/shm/mltcp-progress`, tmpfs: no disk I/O). The
//! library maps it and updates it in place under a seqlock; the agent scans the directory every
//! slot and copies each region. We chose this over a Unix socket because:
//!
//! - **The hot path costs no system call.** `add_bytes` runs in the library's enqueue path
//!   (per collective, possibly per chunk); here it is a clock read and a few stores to memory
//!   (0.16 µs per call measured on the 2-core reference machine, release build, checksum
//!   included), where a socket message costs a `sendmsg` and a wake-up of the agent each time.
//!   The agent's copy of a region costs about 2 µs (`pread` + checksum), once per region per slot.
//! - **The agent reads at its own pace.** It needs the counters once per slot (60 ms), not every
//!   update; a socket would queue every update (or force the library to batch and time them).
//! - **No ordering of start-ups.** A library can write its region before the agent starts, and an
//!   agent restart loses nothing: it re-reads the directory. With a socket, each side would have to
//!   reconnect and replay state.
//! - **A stuck or dead agent never blocks the library**: writes never wait on the agent (the
//!   optional [`Writer::before_burst`] wait is bounded and returns at once when no agent is
//!   attached).
//! - **A crashed job leaves evidence**: its file stays with the writer's pid in it
//!   ([`Region::writer_alive`]).
//!
//! What a socket gives and this does not: the agent is not *told* when a job appears (it notices at
//! its next scan, one slot later), and it does not learn the writer's credentials from the kernel
//! (`SO_PEERCRED`); the file's owner plays that part. This is also what the mlcc prototype does (SysV
//! shared memory keyed by the ranks' addresses); a named file in a directory replaces its key
//! scheme with names an operator can list.
//!
//! ## Layout and consistency
//!
//! The byte layout is in [`layout`] (a table of every offset). Three parts with one writer each:
//! the **header** (magic, version, sizes; written once, before the file appears under its name),
//! the **agent area** (written by the agent: its pid, a heartbeat, the burst grant), and the
//! **body** (written by the library under a seqlock: `seq` is odd during an update). The reader
//! copies the body with `pread`, never through a mapping, so a job that truncates its file cannot
//! make the agent fault; the copy is accepted when `seq` was even and unchanged across it and the
//! body's FNV-1a checksum matches.
//!
//! ## Security
//!
//! The directory is world-writable and sticky (mode 1777, like `/dev/shm`): any local user's job
//! may add its region, and only its owner (or root) can change or remove it. Region files are
//! mode 0644: the job's flow 4-tuples and counters are readable by local users. The agent runs as
//! root and treats every region as untrusted input: it opens only regular files, never through a
//! symlink (`O_NOFOLLOW`), copies them with `pread` (a truncated file gives an error, not a
//! `SIGBUS`), validates every field it uses, writes only the 24 bytes of the agent area and only
//! in files whose header is valid, and keeps at most [`reader::MAX_REGIONS`] regions open.
//!
//! ## Versioning
//!
//! `version` (offset 8) is [`VERSION`]; any change to the layout's meaning gets a new number. A
//! reader refuses a region whose magic, version, header size, flow record size, flow count or file
//! size differ from what it knows, with an error naming the file, the field and the value
//! ([`RegionError`]), and keeps serving the other regions ([`Scanner`]). The C ABI has the same
//! version (`MLTCP_PROGRESS_VERSION`, [`ffi::mltcp_progress_abi_version`]).
//!
//! ## The bounded wait before a burst
//!
//! A library may call [`Writer::before_burst`] (`mltcp_progress_before_burst`) before it starts a
//! burst (used later for PCN-style burst announcements). It increments `burst_requests` in the
//! body and waits until the agent writes a `burst_grant` at least that large, for at most the
//! timeout. With no live agent attached (no `agent_pid`, or a heartbeat older than
//! [`AGENT_STALE_MS`]) it returns at once. The library sends its burst in every case: the call only
//! delays it.
//!
//! ## Use
//!
//! Library side: [`Writer`] (Rust) or `include/progress.h` (C; link `libmltcp_progress.a` or
//! `libmltcp_progress.so`). Agent side: [`Scanner`] and [`Region`].
//!
//! ```
//! use mltcp_progress::{Paradigm, Role, Scanner, Writer, WriterOptions};
//! let dir = std::env::temp_dir().join(format!("mltcp-progress-doc-{}", std::process::id()));
//! let mut w = Writer::create("job1", 0, &WriterOptions { dir: Some(dir.clone()), max_flows: 0 })?;
//! w.set_job(Paradigm::Ring, Role::Worker, 4);
//! w.set_ring(3, 1);
//! w.begin_iteration(7);
//! w.add_bytes(1 << 20);
//!
//! let mut s = Scanner::new(&dir);
//! assert!(s.scan()?.refused.is_empty());
//! let (snaps, errors) = s.poll();
//! assert!(errors.is_empty());
//! assert_eq!(snaps[0].1.body.hot.iter_bytes, 1 << 20);
//! # drop(w); std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod ffi;
pub mod layout;
pub mod reader;
mod sys;
pub mod writer;

pub use layout::{FlowKind, FlowRecord, Hot, JobInfo, Paradigm, Role, NO_RANK, VERSION};
pub use reader::{AgentArea, Region, RegionError, ScanReport, Scanner, Snapshot};
/// CLOCK_MONOTONIC now, in ns: the clock of the region's timestamps (`iter_start_ns`,
/// `update_ns`), shared by every process of the host, so a reader can order its own events
/// (e.g. the agent's receipt of a datapath report) against a writer's `begin_iteration`.
pub use sys::monotonic_ns;
pub use writer::{
    region_dir, AgentView, BurstOutcome, Writer, WriterOptions, AGENT_STALE_MS, DEFAULT_DIR,
    DIR_ENV,
};
