// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The library side: [`Writer`] creates a region, keeps it current under the seqlock, makes the
//! optional bounded-wait burst call, and removes the region when dropped.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::layout::{self, FlowRecord, Fnv, Header, Hot, JobInfo, Paradigm, Role};
use crate::sys::{self, Mapping};

/// The directory regions live in unless told otherwise.
pub const DEFAULT_DIR: &str = "/dev/shm/mltcp-progress";
/// Environment variable overriding [`DEFAULT_DIR`] (for writers and for [`crate::Scanner::from_env`]).
pub const DIR_ENV: &str = "MLTCP_PROGRESS_DIR";
/// Suffix of a region's file name: `<job_id>.<rank>.region`.
pub const REGION_SUFFIX: &str = ".region";
/// An agent whose heartbeat is older than this (ms) counts as gone.
pub const AGENT_STALE_MS: u32 = 2000;

/// The region directory: `dir` if given, else `$MLTCP_PROGRESS_DIR` (if set and not empty), else
/// [`DEFAULT_DIR`].
pub fn region_dir(dir: Option<&Path>) -> PathBuf {
    match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::var_os(DIR_ENV)
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR)),
    }
}

/// File name of the region of `job_id`, rank `rank`.
pub fn region_file_name(job_id: &str, rank: u32) -> String {
    format!("{job_id}.{rank}{REGION_SUFFIX}")
}

/// What [`Writer::before_burst`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BurstOutcome {
    /// The agent granted the request: start the burst.
    Granted,
    /// No live agent is attached to the region (none ever, detached, or heartbeat older than
    /// [`AGENT_STALE_MS`]): returned at once, without waiting.
    NoAgent,
    /// An agent is attached but did not grant within the timeout.
    TimedOut,
}

/// Options of [`Writer::create`].
#[derive(Clone, Debug, Default)]
pub struct WriterOptions {
    /// Region directory (see [`region_dir`]); created with mode 1777 if missing.
    pub dir: Option<PathBuf>,
    /// Flow slots (0 = [`layout::DEFAULT_MAX_FLOWS`]; at most [`layout::MAX_FLOWS_LIMIT`]).
    pub max_flows: u32,
}

/// Read-only view of a region's agent area, usable without holding the writer (so one thread can
/// wait for a grant while others keep reporting bytes).
#[derive(Clone, Debug)]
pub struct AgentView {
    map: Arc<Mapping>,
}

impl AgentView {
    fn read(&self, off: usize) -> Option<u32> {
        layout::checked_value(self.map.word(off).load(Ordering::Acquire))
    }

    /// Whether a live agent is attached: a non-zero `agent_pid` and a heartbeat no older than
    /// [`AGENT_STALE_MS`] (CLOCK_MONOTONIC, compared wrapping).
    pub fn agent_attached(&self) -> bool {
        match (
            self.read(layout::OFF_AGENT_PID),
            self.read(layout::OFF_AGENT_HEARTBEAT),
        ) {
            (Some(pid), Some(hb)) if pid != 0 => {
                sys::monotonic_ms32().wrapping_sub(hb) <= AGENT_STALE_MS
            }
            _ => false,
        }
    }

    /// Whether request number `request` has been granted (`burst_grant >= request`, wrapping).
    pub fn granted(&self, request: u32) -> bool {
        self.read(layout::OFF_BURST_GRANT)
            .is_some_and(|g| g.wrapping_sub(request) as i32 >= 0)
    }

    /// Waits up to `timeout` for request `request` to be granted; see [`Writer::before_burst`].
    pub fn wait_for_grant(&self, request: u32, timeout: Duration) -> BurstOutcome {
        if !self.agent_attached() {
            return BurstOutcome::NoAgent;
        }
        let deadline = Instant::now() + timeout;
        let mut nap = Duration::from_micros(5);
        loop {
            if self.granted(request) {
                return BurstOutcome::Granted;
            }
            let now = Instant::now();
            if now >= deadline {
                return BurstOutcome::TimedOut;
            }
            if !self.agent_attached() {
                return BurstOutcome::NoAgent;
            }
            std::thread::sleep(nap.min(deadline - now));
            nap = (nap * 2).min(Duration::from_micros(200));
        }
    }
}

/// A region this process writes. Not `Sync`-shared by itself: wrap it in a mutex to report from
/// several threads (the C ABI does).
#[derive(Debug)]
pub struct Writer {
    path: PathBuf,
    file: File,
    map: Arc<Mapping>,
    /// Private copy of the whole region; the shared one is updated from it under the seqlock.
    image: Vec<u8>,
    max_flows: u32,
    job: JobInfo,
    flows: Vec<FlowRecord>,
    hot: Hot,
    /// FNV state after the cold part of the body (`OFF_DATA..hot_offset`), so a hot update hashes
    /// only the 48 hot bytes.
    cold_hash: Fnv,
    /// Inside [`Writer::batch`]: updates go to the image only.
    deferred: bool,
    /// Flow slots that may be non-zero in the shared mapping (published up to here).
    slots_published: usize,
}

impl Writer {
    /// Creates the region of `job_id` (1..=63 bytes of `[A-Za-z0-9._-]`), rank `rank`, as
    /// `<dir>/<job_id>.<rank>.region`. The file appears complete: it is written under a
    /// temporary name starting with '.' (which readers skip) and then linked into place. A region
    /// of the same name left by a dead process is replaced. Fails with `EEXIST` if a live process
    /// already writes that region, and with `EINVAL` on a bad job id or flow count.
    pub fn create(job_id: &str, rank: u32, opts: &WriterOptions) -> io::Result<Writer> {
        if !layout::valid_job_id(job_id) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad job id {job_id:?}"),
            ));
        }
        let max_flows = if opts.max_flows == 0 {
            layout::DEFAULT_MAX_FLOWS
        } else {
            opts.max_flows
        };
        if max_flows > layout::MAX_FLOWS_LIMIT {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("max_flows {max_flows} > {}", layout::MAX_FLOWS_LIMIT),
            ));
        }
        let dir = region_dir(opts.dir.as_deref());
        ensure_dir(&dir)?;
        let path = dir.join(region_file_name(job_id, rank));
        if let Some(pid) = live_writer(&path) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} is written by live process {pid}", path.display()),
            ));
        }
        let size = layout::region_size(max_flows);
        // Unique among this process's writers; one left by a dead process of the same pid is
        // stale, so it is removed first.
        static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(
            ".{}.{}.{serial}.tmp",
            region_file_name(job_id, rank),
            sys::own_pid()
        ));
        let _ = std::fs::remove_file(&tmp);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&tmp)?;
        let result = (|| {
            file.set_len(size as u64)?;
            let map = Mapping::new(&file, size)?;
            let job = JobInfo {
                job_id: job_id.to_string(),
                rank,
                ring_pred: layout::NO_RANK,
                ring_succ: layout::NO_RANK,
                ..Default::default()
            };
            let mut w = Writer {
                path: path.clone(),
                file: file.try_clone()?,
                map: Arc::new(map),
                image: vec![0u8; size],
                max_flows,
                job,
                flows: Vec::new(),
                hot: Hot {
                    update_ns: sys::monotonic_ns(),
                    ..Default::default()
                },
                cold_hash: Fnv::new(),
                deferred: false,
                slots_published: 0,
            };
            Header::new(max_flows, sys::own_pid(), sys::realtime_ns()).encode(&mut w.image);
            w.encode_cold();
            w.encode_hot();
            let sum = w.cold_hash.update(w.hot_bytes()).0;
            w.image[layout::OFF_CHECKSUM..layout::OFF_CHECKSUM + 8]
                .copy_from_slice(&sum.to_ne_bytes());
            Arc::get_mut(&mut w.map)
                .expect("not shared yet")
                .copy_in(&w.image);
            install(&tmp, &path)?;
            Ok(w)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    /// Path of the region file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The view of the agent area (see [`AgentView`]).
    pub fn agent_view(&self) -> AgentView {
        AgentView {
            map: Arc::clone(&self.map),
        }
    }

    /// Runs `f` and publishes everything it changed as one update: a reader sees either none or
    /// all of it (e.g. a new flow list together with its iteration).
    pub fn batch<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let outer = self.deferred;
        self.deferred = true;
        let r = f(self);
        self.deferred = outer;
        if !outer {
            self.publish_cold();
        }
        r
    }

    /// Sets the paradigm, this process's role and the job's size (processes, 0 = unknown).
    pub fn set_job(&mut self, paradigm: Paradigm, role: Role, world_size: u32) {
        self.job.paradigm = paradigm as u32;
        self.job.role = role as u32;
        self.job.world_size = world_size;
        self.publish_cold();
    }

    /// Sets the ring predecessor and successor ranks ([`layout::NO_RANK`] = none).
    pub fn set_ring(&mut self, pred: u32, succ: u32) {
        self.job.ring_pred = pred;
        self.job.ring_succ = succ;
        self.publish_cold();
    }

    /// Sets the bytes this process hands to the network per iteration (0 = unknown).
    pub fn set_bytes_per_iteration(&mut self, bytes: u64) {
        self.job.bytes_per_iteration = bytes;
        self.publish_cold();
    }

    /// Replaces the flow list. Fails with `EINVAL` (nothing changed) if there are more flows than
    /// slots or a record has a bad family or kind.
    pub fn set_flows(&mut self, flows: &[FlowRecord]) -> io::Result<()> {
        if flows.len() > self.max_flows as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} flows > {} slots", flows.len(), self.max_flows),
            ));
        }
        if let Some(f) = flows.iter().find(|f| {
            (f.family != layout::FAMILY_IPV4 && f.family != layout::FAMILY_IPV6)
                || layout::FlowKind::from_raw(f.kind).is_none()
        }) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad flow record {f:?}"),
            ));
        }
        for (i, f) in flows.iter().enumerate() {
            layout::encode_flow(i, f, &mut self.image);
        }
        for i in flows.len()..self.flows.len() {
            layout::encode_flow(i, &FlowRecord::default(), &mut self.image);
        }
        self.flows = flows.to_vec();
        self.publish_cold();
        Ok(())
    }

    /// Appends one flow. Fails with `ENOSPC` when every slot is used, `EINVAL` on a bad record.
    pub fn add_flow(&mut self, flow: FlowRecord) -> io::Result<()> {
        if self.flows.len() >= self.max_flows as usize {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let mut all = self.flows.clone();
        all.push(flow);
        self.set_flows(&all)
    }

    /// The current flow list.
    pub fn flows(&self) -> &[FlowRecord] {
        &self.flows
    }

    /// Starts iteration `iteration`: resets the iteration's byte count and stamps its start.
    pub fn begin_iteration(&mut self, iteration: u64) {
        let now = sys::monotonic_ns();
        self.hot.iteration = iteration;
        self.hot.iter_bytes = 0;
        self.hot.iter_start_ns = now;
        self.hot.update_ns = now;
        self.publish_hot();
    }

    /// Adds `bytes` handed to the network (to this iteration's and the total count, saturating).
    pub fn add_bytes(&mut self, bytes: u64) {
        self.hot.iter_bytes = self.hot.iter_bytes.saturating_add(bytes);
        self.hot.total_bytes = self.hot.total_bytes.saturating_add(bytes);
        self.hot.update_ns = sys::monotonic_ns();
        self.publish_hot();
    }

    /// The hot counters as last published.
    pub fn hot(&self) -> Hot {
        self.hot
    }

    /// Records a burst request and returns its number (what the agent grants).
    pub fn request_burst(&mut self) -> u32 {
        self.hot.burst_requests = self.hot.burst_requests.wrapping_add(1);
        self.hot.update_ns = sys::monotonic_ns();
        self.publish_hot();
        self.hot.burst_requests
    }

    /// The optional bounded wait before a burst: records a request (`burst_requests` + 1) and
    /// waits until the agent grants it (writes a `burst_grant` at least that number), at most
    /// `timeout`. With no live agent attached it returns [`BurstOutcome::NoAgent`] at once; if the
    /// agent goes away while waiting it returns `NoAgent` then; otherwise `Granted` or, after the
    /// timeout, `TimedOut`. Either way the caller then sends its burst: the wait only delays it.
    /// The wait polls the agent area with sleeps growing from 5 µs to 200 µs.
    pub fn before_burst(&mut self, timeout: Duration) -> BurstOutcome {
        let req = self.request_burst();
        self.agent_view().wait_for_grant(req, timeout)
    }

    fn hot_bytes(&self) -> &[u8] {
        let h = layout::hot_offset(self.max_flows);
        &self.image[h..h + layout::HOT_SIZE]
    }

    fn encode_cold(&mut self) {
        layout::encode_job(&self.job, &mut self.image);
        layout::encode_n_flows(self.flows.len() as u32, &mut self.image);
        self.cold_hash = layout::cold_hash(&self.image, self.max_flows);
    }

    fn encode_hot(&mut self) {
        let h = layout::hot_offset(self.max_flows);
        let hot = self.hot;
        hot.encode(&mut self.image[h..h + layout::HOT_SIZE]);
    }

    fn publish_cold(&mut self) {
        self.hot.update_ns = sys::monotonic_ns();
        self.encode_cold();
        self.encode_hot();
        if !self.deferred {
            // The job part, the flow slots in use now or before (cleared ones become 0), the hot
            // part: not the untouched slots, so an update costs in proportion to the flows.
            let slots = self.slots_published.max(self.flows.len());
            let h = layout::hot_offset(self.max_flows);
            self.publish(&[
                (
                    layout::OFF_DATA,
                    layout::OFF_FLOWS + layout::FLOW_SIZE as usize * slots,
                ),
                (h, h + layout::HOT_SIZE),
            ]);
            self.slots_published = self.flows.len();
        }
    }

    fn publish_hot(&mut self) {
        self.encode_hot();
        if self.deferred {
            return;
        }
        let h = layout::hot_offset(self.max_flows);
        self.publish(&[(h, h + layout::HOT_SIZE)]);
    }

    /// Seqlock write of the checksum and of the image byte ranges `ranges` (8-aligned) to the
    /// mapping.
    fn publish(&mut self, ranges: &[(usize, usize)]) {
        let sum = self.cold_hash.update(self.hot_bytes()).0;
        self.image[layout::OFF_CHECKSUM..layout::OFF_CHECKSUM + 8]
            .copy_from_slice(&sum.to_ne_bytes());
        let seq = self.map.word(layout::OFF_SEQ);
        let s = seq.load(Ordering::Relaxed);
        seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        self.map
            .word(layout::OFF_CHECKSUM)
            .store(sum, Ordering::Relaxed);
        for &(from, to) in ranges {
            for off in (from..to).step_by(8) {
                self.map
                    .word(off)
                    .store(layout::ne_u64(&self.image, off), Ordering::Relaxed);
            }
        }
        seq.store(s.wrapping_add(2), Ordering::Release);
    }
}

impl Drop for Writer {
    /// Marks the region closed and removes its file (if the file at the path is still this one).
    fn drop(&mut self) {
        self.hot.flags |= layout::FLAG_CLOSED;
        self.publish_hot();
        if let (Ok(a), Ok(b)) = (self.file.metadata(), std::fs::symlink_metadata(&self.path)) {
            if a.dev() == b.dev() && a.ino() == b.ino() {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// Creates `dir` (and parents) if missing; a directory this call creates gets mode 1777 (any user's
/// job may add its region; the sticky bit keeps each user's files their own), as `/dev/shm` has.
fn ensure_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o1777)
        .create(dir)
    {
        Ok(()) => {
            // Best effort: the umask may have cleared bits of the mode asked for.
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777));
            Ok(())
        }
        // Another process created it meanwhile.
        Err(_) if dir.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Puts the finished file `tmp` in place as `path`: with a hard link, which fails if `path`
/// exists (so two processes starting the same job and rank cannot replace each other's region);
/// an existing region of a dead writer (or of no valid shape) is replaced with a rename.
fn install(tmp: &Path, path: &Path) -> io::Result<()> {
    match std::fs::hard_link(tmp, path) {
        Ok(()) => {
            let _ = std::fs::remove_file(tmp);
            return Ok(());
        }
        // EEXIST: a region is there, replaced below if its writer is gone. EPERM: a file system
        // without hard links, where the checked rename below is the best we can do.
        Err(e)
            if e.kind() == io::ErrorKind::AlreadyExists
                || e.raw_os_error() == Some(libc::EPERM) => {}
        Err(e) => return Err(e),
    }
    if let Some(pid) = live_writer(path) {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} is written by live process {pid}", path.display()),
        ));
    }
    std::fs::rename(tmp, path)
}

/// The writer pid of an existing region at `path` if that process (this one included) is alive
/// and has not closed it.
fn live_writer(path: &Path) -> Option<u32> {
    let region = crate::Region::open(path).ok()?;
    let pid = region.header().writer_pid;
    let closed = region.snapshot().is_ok_and(|s| s.closed());
    (!closed && sys::process_alive(pid)).then_some(pid)
}
