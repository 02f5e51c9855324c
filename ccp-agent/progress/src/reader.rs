// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The agent side: [`Region`] validates one region and takes consistent [`Snapshot`]s of it;
//! [`Scanner`] keeps the set of valid regions of a directory current, refusing (once per file) the
//! ones of the wrong version or shape while it keeps serving the others.
//!
//! The reader never maps a region: it copies it with `pread`. A region's file belongs to the job's
//! user, who could truncate it at any time; a mapping of a truncated file raises `SIGBUS` in the
//! reader, a `pread` merely comes back short. The agent area is written with 8-byte `pwrite`s of
//! checked words for the same reason.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::layout::{self, Body, Header, Hot, Invalid};
use crate::sys;
use crate::writer::{region_dir, REGION_SUFFIX};

/// How long [`Region::snapshot`] retries copies that raced with the writer before it gives up (a
/// writer that died in the middle of an update leaves `seq` odd for ever).
pub const SNAPSHOT_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(20);

/// How long [`Scanner::poll`] retries a region whose previous snapshot failed.
pub const FAILING_SNAPSHOT_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(1);

/// Most regions a [`Scanner`] keeps open by default (one file descriptor and one copy per slot
/// each; well under the usual limit of 1024 descriptors); files beyond wait until others close.
pub const MAX_REGIONS: usize = 512;

/// Consecutive polls a region must stay unreadable with a transient error before
/// [`Scanner::poll`] reports it.
pub const BUSY_POLLS: u32 = 10;

/// Why a region was refused or could not be read: the file, the field and its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionError {
    /// The region's file.
    pub path: PathBuf,
    /// The field at fault (a name of the layout table, or `file` for I/O errors).
    pub field: String,
    /// Its value (or the I/O error).
    pub value: String,
    /// What was expected.
    pub expected: String,
    /// The error may go away by itself (see [`RegionError::is_transient`]).
    pub transient: bool,
}

impl RegionError {
    /// A permanent error: `field` of the region at `path` holds `value`, `expected` was expected.
    pub fn new(
        path: &Path,
        field: &str,
        value: impl Into<String>,
        expected: impl Into<String>,
    ) -> Self {
        RegionError {
            path: path.to_path_buf(),
            field: field.into(),
            value: value.into(),
            expected: expected.into(),
            transient: false,
        }
    }

    /// Whether the error may go away by itself: the copy kept racing with the writer (`seq`),
    /// as when the writer is preempted in the middle of an update (a writer that died in an update
    /// leaves this error for good), or the reader ran out of descriptors or memory, or had too
    /// many regions open.
    pub fn is_transient(&self) -> bool {
        self.transient
    }

    fn invalid(path: &Path, e: Invalid) -> Self {
        Self::new(path, e.field, e.value, e.expected)
    }

    fn io(path: &Path, e: &io::Error, expected: &str) -> Self {
        let transient = matches!(
            e.raw_os_error(),
            Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM)
        );
        RegionError {
            transient,
            ..Self::new(path, "file", e.to_string(), expected)
        }
    }
}

impl fmt::Display for RegionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "progress region {}: field `{}` = {} (expected {})",
            self.path.display(),
            self.field,
            self.value,
            self.expected
        )
    }
}

impl std::error::Error for RegionError {}

/// One consistent copy of a region's body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The region's header.
    pub header: Header,
    /// The decoded body.
    pub body: Body,
    /// The seqlock sequence the copy was taken at (even; grows by 2 per update).
    pub seq: u64,
}

impl Snapshot {
    /// Whether the writer has closed the region.
    pub fn closed(&self) -> bool {
        self.body.hot.flags & layout::FLAG_CLOSED != 0
    }
}

/// The agent area as last written (values of the checked words; `None` where a word is unset or
/// torn).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AgentArea {
    /// Attached agent's pid (0 = detached).
    pub agent_pid: Option<u32>,
    /// Agent heartbeat, CLOCK_MONOTONIC ms (32-bit, wrapping).
    pub heartbeat_ms: Option<u32>,
    /// Burst requests granted.
    pub burst_grant: Option<u32>,
}

/// A validated region, open for reading (and for writing its agent area).
#[derive(Debug)]
pub struct Region {
    path: PathBuf,
    file: File,
    header: Header,
    dev: u64,
    ino: u64,
}

impl Region {
    /// Opens `path` (a regular file, symlinks refused) and validates its header: magic, version,
    /// sizes and the file's size. The error names the file, the field and its value.
    pub fn open(path: &Path) -> Result<Region, RegionError> {
        let open = |write: bool| {
            OpenOptions::new()
                .read(true)
                .write(write)
                .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(path)
        };
        // Read-write for the agent area; a reader without write permission still reads.
        let file = match open(true) {
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => open(false),
            r => r,
        }
        .map_err(|e| RegionError::io(path, &e, "a readable regular file"))?;
        let md = file
            .metadata()
            .map_err(|e| RegionError::io(path, &e, "a file that can be stat'ed"))?;
        if !md.file_type().is_file() {
            return Err(RegionError::new(
                path,
                "file",
                "not a regular file",
                "a regular file",
            ));
        }
        if md.len() < layout::HEADER_SIZE as u64 {
            let expected = format!("at least the {}-byte header", layout::HEADER_SIZE);
            return Err(RegionError::new(
                path,
                "file size",
                md.len().to_string(),
                expected,
            ));
        }
        let mut b = [0u8; layout::HEADER_SIZE as usize];
        sys::pread_exact(&file, &mut b, 0)
            .map_err(|e| RegionError::io(path, &e, "a readable header"))?;
        let header = Header::decode(&b);
        header
            .validate(md.len())
            .map_err(|e| RegionError::invalid(path, e))?;
        Ok(Region {
            path: path.to_path_buf(),
            file,
            header,
            dev: md.dev(),
            ino: md.ino(),
        })
    }

    /// The region's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The validated header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Whether the process that created the region still exists (a crashed writer leaves its file
    /// behind; the agent may remove it).
    pub fn writer_alive(&self) -> bool {
        sys::process_alive(self.header.writer_pid)
    }

    /// A consistent copy of the body: the whole region is read with `pread`, then `seq` again; the
    /// copy counts if `seq` was even and unchanged and the checksum matches, else it is retried
    /// (for up to [`SNAPSHOT_TIMEOUT`], yielding between tries). The body is then validated; an error
    /// names the field at fault.
    pub fn snapshot(&self) -> Result<Snapshot, RegionError> {
        self.snapshot_within(SNAPSHOT_TIMEOUT)
    }

    /// [`Region::snapshot`] retrying for at most `timeout`. A checksum that mismatches twice at
    /// the same stable `seq` is corruption, not a race: reported at once.
    pub fn snapshot_within(&self, timeout: std::time::Duration) -> Result<Snapshot, RegionError> {
        let size = self.header.total_size as usize;
        let mut buf = vec![0u8; size];
        let mut last_seq;
        let mut bad_at: Option<u64> = None;
        let deadline = std::time::Instant::now() + timeout;
        loop {
            sys::pread_exact(&self.file, &mut buf, 0)
                .map_err(|e| RegionError::io(&self.path, &e, &format!("{size} readable bytes")))?;
            let s1 = layout::ne_u64(&buf, layout::OFF_SEQ);
            let mut again = [0u8; 8];
            sys::pread_exact(&self.file, &mut again, layout::OFF_SEQ as u64)
                .map_err(|e| RegionError::io(&self.path, &e, "a readable seq"))?;
            let s2 = u64::from_ne_bytes(again);
            last_seq = s1;
            if s1 % 2 == 0 && s1 == s2 {
                let want = layout::checksum(&buf, self.header.max_flows);
                let have = layout::ne_u64(&buf, layout::OFF_CHECKSUM);
                if want == have {
                    return self.decode(&buf, s1);
                }
                if bad_at == Some(s1) {
                    let expected = format!("{want:#018x} (FNV-1a 64 of the body)");
                    return Err(RegionError::new(
                        &self.path,
                        "checksum",
                        format!("{have:#018x}"),
                        expected,
                    ));
                }
                bad_at = Some(s1);
            }
            if std::time::Instant::now() >= deadline {
                break;
            }
            std::thread::yield_now();
        }
        let expected = format!(
            "an even value, stable across a copy, within {timeout:?} (writer stuck in an update?)"
        );
        Err(RegionError {
            transient: true,
            ..RegionError::new(&self.path, "seq", last_seq.to_string(), expected)
        })
    }

    fn decode(&self, buf: &[u8], seq: u64) -> Result<Snapshot, RegionError> {
        let h = Header::decode(buf);
        if h != self.header {
            // The header is written once; a change means someone rewrote the file.
            h.validate(buf.len() as u64)
                .map_err(|e| RegionError::invalid(&self.path, e))?;
            return Err(RegionError::new(
                &self.path,
                "header",
                format!("{h:?}"),
                format!("unchanged since open: {:?}", self.header),
            ));
        }
        let body = layout::decode_body(buf, self.header.max_flows)
            .map_err(|e| RegionError::invalid(&self.path, e))?;
        Ok(Snapshot {
            header: h,
            body,
            seq,
        })
    }

    /// The hot counters alone (iteration, bytes, burst requests, flags: 48 bytes), for polling
    /// more often than a whole [`Region::snapshot`] is worth: `seq`, the hot part and `seq` again,
    /// three `pread`s and no checksum; `Ok(None)` when the writer was in an update (odd or
    /// changed `seq`). Without the checksum a copy torn by an update that the sequence numbers
    /// missed is not detected: a caller that acts on a change (the agent's burst gate) confirms
    /// it with a snapshot.
    pub fn peek_hot(&self) -> io::Result<Option<Hot>> {
        let mut seq = [0u8; 8];
        sys::pread_exact(&self.file, &mut seq, layout::OFF_SEQ as u64)?;
        let s1 = u64::from_ne_bytes(seq);
        let mut hot = [0u8; layout::HOT_SIZE];
        sys::pread_exact(
            &self.file,
            &mut hot,
            layout::hot_offset(self.header.max_flows) as u64,
        )?;
        sys::pread_exact(&self.file, &mut seq, layout::OFF_SEQ as u64)?;
        let s2 = u64::from_ne_bytes(seq);
        Ok((s1 % 2 == 0 && s1 == s2).then(|| Hot::decode(&hot)))
    }

    /// The agent area as it stands.
    pub fn agent_area(&self) -> io::Result<AgentArea> {
        let mut b = [0u8; 24];
        sys::pread_exact(&self.file, &mut b, layout::AGENT_OFFSET as u64)?;
        Ok(AgentArea {
            agent_pid: layout::checked_value(layout::ne_u64(&b, 0)),
            heartbeat_ms: layout::checked_value(layout::ne_u64(&b, 8)),
            burst_grant: layout::checked_value(layout::ne_u64(&b, 16)),
        })
    }

    /// Attaches agent `pid` (and stamps a heartbeat): from now on the writer's `before_burst`
    /// waits for grants. The agent must call [`Region::heartbeat`] at least every
    /// [`crate::AGENT_STALE_MS`] ms, or writers stop waiting for it.
    pub fn attach(&self, pid: u32) -> io::Result<()> {
        self.heartbeat()?;
        sys::pwrite_word(
            &self.file,
            layout::checked_word(pid),
            layout::OFF_AGENT_PID as u64,
        )
    }

    /// Stamps the agent heartbeat (CLOCK_MONOTONIC ms).
    pub fn heartbeat(&self) -> io::Result<()> {
        sys::pwrite_word(
            &self.file,
            layout::checked_word(sys::monotonic_ms32()),
            layout::OFF_AGENT_HEARTBEAT as u64,
        )
    }

    /// Detaches the agent: writers stop waiting at once.
    pub fn detach(&self) -> io::Result<()> {
        sys::pwrite_word(
            &self.file,
            layout::checked_word(0),
            layout::OFF_AGENT_PID as u64,
        )
    }

    /// Grants every burst request up to number `upto` (a `burst_requests` value from a snapshot).
    pub fn grant_bursts(&self, upto: u32) -> io::Result<()> {
        sys::pwrite_word(
            &self.file,
            layout::checked_word(upto),
            layout::OFF_BURST_GRANT as u64,
        )
    }

    fn same_file(&self, md: &std::fs::Metadata) -> bool {
        md.dev() == self.dev && md.ino() == self.ino
    }
}

/// Identity of a refused file: device, inode, change time (ns) and size. The scanner holds no
/// descriptor of a refused file, so its inode number may be reused by a replacement; the change
/// time and size tell them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId(u64, u64, i64, i64, u64);

impl FileId {
    fn of(md: &std::fs::Metadata) -> Self {
        FileId(md.dev(), md.ino(), md.ctime(), md.ctime_nsec(), md.len())
    }
}

/// What one [`Scanner::scan`] changed.
#[derive(Debug, Default)]
pub struct ScanReport {
    /// Regions opened by this scan.
    pub added: Vec<PathBuf>,
    /// Regions whose file disappeared (or was replaced) since the last scan.
    pub removed: Vec<PathBuf>,
    /// Files refused by this scan, each reported once per file (a refused file is retried only
    /// when it changes: replaced by another file of the same name, or rewritten). A file left
    /// unopened for a transient reason ([`RegionError::is_transient`]: too many regions open,
    /// out of descriptors) is retried at every scan and reported once. The agent logs these.
    pub refused: Vec<RegionError>,
}

/// The set of valid regions of one directory.
#[derive(Debug)]
pub struct Scanner {
    dir: PathBuf,
    regions: BTreeMap<PathBuf, Region>,
    /// Refused files: path → their identity when refused.
    refused: HashMap<PathBuf, FileId>,
    /// Regions whose last snapshot failed: path → (the field at fault, consecutive failures).
    failing: HashMap<PathBuf, (String, u32)>,
    /// Files left unopened for a transient reason (too many regions or descriptors): retried
    /// at every scan, reported once.
    deferred: HashSet<PathBuf>,
    /// Most regions kept open.
    max_regions: usize,
}

impl Scanner {
    /// A scanner of `dir` (nothing is read until [`Scanner::scan`]).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Scanner {
            dir: dir.into(),
            regions: BTreeMap::new(),
            refused: HashMap::new(),
            failing: HashMap::new(),
            deferred: HashSet::new(),
            max_regions: MAX_REGIONS,
        }
    }

    /// The same scanner keeping at most `n` regions open (default [`MAX_REGIONS`]).
    pub fn with_max_regions(mut self, n: usize) -> Self {
        self.max_regions = n;
        self
    }

    /// A scanner of `$MLTCP_PROGRESS_DIR`, or of [`crate::DEFAULT_DIR`].
    pub fn from_env() -> Self {
        Self::new(region_dir(None))
    }

    /// The directory scanned.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Re-reads the directory: opens new `*.region` files (names starting with '.' are writers'
    /// files in the making), drops the ones gone, and refuses invalid ones without affecting the
    /// others. A missing directory is an empty one; another error reading it is returned.
    pub fn scan(&mut self) -> io::Result<ScanReport> {
        let mut report = ScanReport::default();
        let mut seen: BTreeMap<PathBuf, std::fs::Metadata> = BTreeMap::new();
        match std::fs::read_dir(&self.dir) {
            Ok(rd) => {
                for ent in rd {
                    let ent = ent?;
                    let name = ent.file_name();
                    let Some(name) = name.to_str() else { continue };
                    if name.starts_with('.') || !name.ends_with(REGION_SUFFIX) {
                        continue;
                    }
                    if let Ok(md) = std::fs::symlink_metadata(ent.path()) {
                        seen.insert(ent.path(), md);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let gone: Vec<PathBuf> = self
            .regions
            .iter()
            .filter(|(p, r)| !seen.get(*p).is_some_and(|md| r.same_file(md)))
            .map(|(p, _)| p.clone())
            .collect();
        for p in gone {
            self.regions.remove(&p);
            self.failing.remove(&p);
            report.removed.push(p);
        }
        self.refused
            .retain(|p, id| seen.get(p).is_some_and(|md| FileId::of(md) == *id));
        self.deferred.retain(|p| seen.contains_key(p));
        for (path, md) in seen {
            if self.regions.contains_key(&path) || self.refused.contains_key(&path) {
                continue;
            }
            let result = if self.regions.len() >= self.max_regions {
                let expected = format!(
                    "at most {} regions (retried as others close)",
                    self.max_regions
                );
                Err(RegionError {
                    transient: true,
                    ..RegionError::new(
                        &path,
                        "directory",
                        format!("{} regions already open", self.regions.len()),
                        expected,
                    )
                })
            } else {
                Region::open(&path)
            };
            match result {
                Ok(r) => {
                    self.deferred.remove(&path);
                    report.added.push(path.clone());
                    self.regions.insert(path, r);
                }
                Err(e) if e.is_transient() => {
                    if self.deferred.insert(path) {
                        report.refused.push(e);
                    }
                }
                Err(e) => {
                    self.deferred.remove(&path);
                    self.refused.insert(path, FileId::of(&md));
                    report.refused.push(e);
                }
            }
        }
        Ok(report)
    }

    /// The valid regions, by path.
    pub fn regions(&self) -> impl Iterator<Item = &Region> {
        self.regions.values()
    }

    /// The region at `path`, if valid and open.
    pub fn region(&self, path: &Path) -> Option<&Region> {
        self.regions.get(path)
    }

    /// A snapshot of every valid region (an error names the region at fault; the others are still
    /// returned).
    pub fn snapshots(&self) -> Vec<Result<Snapshot, RegionError>> {
        self.regions.values().map(Region::snapshot).collect()
    }

    /// Attaches agent `pid` to every open region and stamps its heartbeat (call it at least every
    /// [`crate::AGENT_STALE_MS`] ms, e.g. every slot). Returns the regions it could not write
    /// (a region the agent may only read: the agent is not root).
    pub fn attach_all(&self, pid: u32) -> Vec<RegionError> {
        self.regions
            .values()
            .filter_map(|r| {
                r.attach(pid)
                    .err()
                    .map(|e| RegionError::io(&r.path, &e, "a writable agent area"))
            })
            .collect()
    }

    /// Detaches the agent from every open region (at shutdown: writers stop waiting at once).
    pub fn detach_all(&self) {
        for r in self.regions.values() {
            let _ = r.detach();
        }
    }

    /// The snapshots of every region that reads well, and the errors to log: a region whose
    /// snapshot fails is skipped, and its error is returned only when it differs from the region's
    /// previous failure (one log line per problem, not one per poll), and for a transient error
    /// only once it has lasted [`BUSY_POLLS`] polls; a later good snapshot clears it.
    pub fn poll(&mut self) -> (Vec<(PathBuf, Snapshot)>, Vec<RegionError>) {
        let mut good = Vec::new();
        let mut errors = Vec::new();
        for (path, r) in &self.regions {
            // A region that failed last time gets a short try, so a stuck one costs little.
            let timeout = if self.failing.contains_key(path) {
                FAILING_SNAPSHOT_TIMEOUT
            } else {
                SNAPSHOT_TIMEOUT
            };
            match r.snapshot_within(timeout) {
                Ok(s) => {
                    self.failing.remove(path);
                    good.push((path.clone(), s));
                }
                Err(e) => {
                    let entry = self
                        .failing
                        .entry(path.clone())
                        .or_insert_with(|| (e.field.clone(), 0));
                    if entry.0 != e.field {
                        *entry = (e.field.clone(), 0);
                    }
                    entry.1 += 1;
                    let threshold = if e.is_transient() { BUSY_POLLS } else { 1 };
                    if entry.1 == threshold {
                        errors.push(e);
                    }
                }
            }
        }
        (good, errors)
    }
}
