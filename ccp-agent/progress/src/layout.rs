// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The byte layout of a progress region, version [`VERSION`], and the pure encoding and decoding of
//! its parts (no I/O). All integers are in the host's byte order (a region never leaves its host);
//! a region written with the other byte order fails the magic check.
//!
//! N = max_flows (flow slots, [`DEFAULT_MAX_FLOWS`] unless the writer chose otherwise).
//!
//! ```text
//! offset            size  part      field
//! 0                 8     header    magic = MAGIC (bytes "MLTCPPRG" on a little-endian host)
//! 8                 4     header    version = 1
//! 12                4     header    header_size = 64
//! 16                4     header    total_size (bytes of the whole file)
//! 20                4     header    max_flows (flow slots in the body, 1..=MAX_FLOWS_LIMIT)
//! 24                4     header    flow_size = 48
//! 28                4     header    writer_pid
//! 32                8     header    created_ns (CLOCK_REALTIME, ns)
//! 40                4     header    body_offset = 128
//! 44                4     header    body_size (bytes from body_offset to the end)
//! 48                16    header    reserved, 0
//! 64                8     agent     agent_pid        (checked word, see below)
//! 72                8     agent     agent_heartbeat  (checked word: CLOCK_MONOTONIC ms, wrapping)
//! 80                8     agent     burst_grant      (checked word: burst requests granted)
//! 88                40    agent     reserved, 0
//! 128               8     body      seq (seqlock sequence: odd while the writer updates)
//! 136               8     body      checksum (FNV-1a 64 of bytes 144..248+48*n_flows, then H..H+48)
//! 144               64    body      job_id (ASCII, NUL padded, at most 63 bytes)
//! 208               4     body      rank (this process's index in the job)
//! 212               4     body      world_size (processes in the job, 0 unknown)
//! 216               4     body      paradigm (Paradigm)
//! 220               4     body      role (Role)
//! 224               4     body      ring_pred (rank, NO_RANK = none)
//! 228               4     body      ring_succ (rank, NO_RANK = none)
//! 232               4     body      n_flows (<= max_flows)
//! 236               4     body      reserved, 0
//! 240               8     body      bytes_per_iteration (bytes, 0 = unknown: the agent learns it)
//! 248               48*N  body      flows[max_flows] (FlowRecord; the first n_flows are valid)
//! H = 248 + 48*N    8     body/hot  iteration (number of the current iteration)
//! H+8               8     body/hot  iter_bytes (bytes handed to the network in this iteration)
//! H+16              8     body/hot  total_bytes (bytes handed to the network since open)
//! H+24              8     body/hot  iter_start_ns (CLOCK_MONOTONIC ns at begin_iteration)
//! H+32              8     body/hot  update_ns (CLOCK_MONOTONIC ns of the last update)
//! H+40              4     body/hot  burst_requests (before_burst calls so far)
//! H+44              4     body/hot  flags (FLAG_CLOSED)
//! H+48                              end: total_size = 296 + 48*N
//! ```
//!
//! The header is written once, before the file appears under its final name. The agent area is
//! written by the agent only, with `pwrite`, as *checked words*: a `u64` whose low half is the
//! value and whose high half is its bitwise complement, so a reader that catches a half-written word
//! sees a mismatch and ignores it. The body is written by the library only, under the seqlock; the
//! checksum lets a reader that copies the body with `read` (not through a mapping) detect a copy torn
//! by a concurrent update even when the sequence numbers happen to match.

use std::fmt;

/// Magic number at offset 0: the bytes "MLTCPPRG" read as a little-endian `u64`.
pub const MAGIC: u64 = u64::from_le_bytes(*b"MLTCPPRG");
/// Layout version this crate writes and reads.
pub const VERSION: u32 = 1;
/// Size in bytes of the header.
pub const HEADER_SIZE: u32 = 64;
/// Offset in bytes of the agent area.
pub const AGENT_OFFSET: usize = 64;
/// Offset in bytes of the seqlock body (its `seq` word).
pub const BODY_OFFSET: u32 = 128;
/// Size in bytes of one flow record.
pub const FLOW_SIZE: u32 = 48;
/// Flow slots of a region opened without an explicit number.
pub const DEFAULT_MAX_FLOWS: u32 = 64;
/// Largest number of flow slots a region may have.
pub const MAX_FLOWS_LIMIT: u32 = 4096;
/// Longest job id in bytes (the field has room for a terminating NUL).
pub const JOB_ID_MAX: usize = 63;
/// A rank field that names no process.
pub const NO_RANK: u32 = u32::MAX;
/// `flags` bit: the writer closed the region (the file is being removed).
pub const FLAG_CLOSED: u32 = 1;
/// Every `flags` bit this version defines.
pub const FLAGS_KNOWN: u32 = FLAG_CLOSED;

/// Offset of `agent_pid`.
pub const OFF_AGENT_PID: usize = AGENT_OFFSET;
/// Offset of `agent_heartbeat`.
pub const OFF_AGENT_HEARTBEAT: usize = AGENT_OFFSET + 8;
/// Offset of `burst_grant`.
pub const OFF_BURST_GRANT: usize = AGENT_OFFSET + 16;
/// Offset of the seqlock sequence word.
pub const OFF_SEQ: usize = BODY_OFFSET as usize;
/// Offset of the body checksum.
pub const OFF_CHECKSUM: usize = OFF_SEQ + 8;
/// Offset of the first checksummed byte of the body (`job_id`).
pub const OFF_DATA: usize = OFF_SEQ + 16;
/// Offset of the first flow record.
pub const OFF_FLOWS: usize = 248;
/// Size in bytes of the hot part of the body (iteration counters).
pub const HOT_SIZE: usize = 48;

/// Size in bytes of a region with `max_flows` flow slots.
pub const fn region_size(max_flows: u32) -> usize {
    OFF_FLOWS + FLOW_SIZE as usize * max_flows as usize + HOT_SIZE
}

/// Offset of the hot part in a region with `max_flows` flow slots.
pub const fn hot_offset(max_flows: u32) -> usize {
    OFF_FLOWS + FLOW_SIZE as usize * max_flows as usize
}

// A job's paradigm and a process's role: one definition, shared with the scenario files, the
// simulator and the agent (their wire values are the `repr(u32)` discriminants).
pub use mltcp_job_kinds::{Paradigm, Role};

/// What a flow carries, seen from this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum FlowKind {
    /// Not told.
    Unspecified = 0,
    /// Ring: this process sends to its successor.
    RingSend = 1,
    /// Ring: this process receives from its predecessor.
    RingRecv = 2,
    /// Parameter server: a worker's push (aggregation) to a server, or a server receiving one.
    PsPush = 3,
    /// Parameter server: a server's broadcast to a worker, or a worker's pull of it.
    PsPull = 4,
}

impl FlowKind {
    /// The kind of a raw field value, if this version defines it.
    pub fn from_raw(v: u16) -> Option<Self> {
        match v {
            0 => Some(Self::Unspecified),
            1 => Some(Self::RingSend),
            2 => Some(Self::RingRecv),
            3 => Some(Self::PsPush),
            4 => Some(Self::PsPull),
            _ => None,
        }
    }
}

/// Address family value of an IPv4 flow record.
pub const FAMILY_IPV4: u16 = 4;
/// Address family value of an IPv6 flow record.
pub const FAMILY_IPV6: u16 = 6;

/// One flow record, as stored in the region and as passed through the C ABI
/// (`struct mltcp_flow` in `progress.h`, 48 bytes).
///
/// Ports are in host byte order; addresses are in network byte order, an IPv4 address in the first
/// 4 bytes with the rest 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct FlowRecord {
    /// [`FAMILY_IPV4`] or [`FAMILY_IPV6`].
    pub family: u16,
    /// A [`FlowKind`] value.
    pub kind: u16,
    /// This process's port.
    pub local_port: u16,
    /// The peer's port.
    pub remote_port: u16,
    /// The peer's rank in the job ([`NO_RANK`] if not told).
    pub peer_rank: u32,
    /// Reserved, 0.
    pub reserved: u32,
    /// This process's address.
    pub local_addr: [u8; 16],
    /// The peer's address.
    pub remote_addr: [u8; 16],
}

const _: () = assert!(std::mem::size_of::<FlowRecord>() == FLOW_SIZE as usize);

impl FlowRecord {
    /// A record for the connection `local` → `remote` (both of the same family).
    pub fn new(
        local: std::net::SocketAddr,
        remote: std::net::SocketAddr,
        kind: FlowKind,
        peer_rank: u32,
    ) -> Self {
        let mut r = FlowRecord {
            kind: kind as u16,
            peer_rank,
            ..Default::default()
        };
        let (fam, la) = addr_bytes(local.ip());
        let (_, ra) = addr_bytes(remote.ip());
        r.family = fam;
        r.local_addr = la;
        r.remote_addr = ra;
        r.local_port = local.port();
        r.remote_port = remote.port();
        r
    }

    /// This process's end of the flow.
    pub fn local(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::new(ip_from(self.family, &self.local_addr), self.local_port)
    }

    /// The peer's end of the flow.
    pub fn remote(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::new(ip_from(self.family, &self.remote_addr), self.remote_port)
    }

    fn encode(&self, out: &mut [u8]) {
        out[0..2].copy_from_slice(&self.family.to_ne_bytes());
        out[2..4].copy_from_slice(&self.kind.to_ne_bytes());
        out[4..6].copy_from_slice(&self.local_port.to_ne_bytes());
        out[6..8].copy_from_slice(&self.remote_port.to_ne_bytes());
        out[8..12].copy_from_slice(&self.peer_rank.to_ne_bytes());
        out[12..16].copy_from_slice(&self.reserved.to_ne_bytes());
        out[16..32].copy_from_slice(&self.local_addr);
        out[32..48].copy_from_slice(&self.remote_addr);
    }

    fn decode(b: &[u8]) -> Self {
        FlowRecord {
            family: ne_u16(b, 0),
            kind: ne_u16(b, 2),
            local_port: ne_u16(b, 4),
            remote_port: ne_u16(b, 6),
            peer_rank: ne_u32(b, 8),
            reserved: ne_u32(b, 12),
            local_addr: b[16..32].try_into().expect("16 bytes"),
            remote_addr: b[32..48].try_into().expect("16 bytes"),
        }
    }
}

fn addr_bytes(ip: std::net::IpAddr) -> (u16, [u8; 16]) {
    let mut a = [0u8; 16];
    match ip {
        std::net::IpAddr::V4(v4) => {
            a[..4].copy_from_slice(&v4.octets());
            (FAMILY_IPV4, a)
        }
        std::net::IpAddr::V6(v6) => (FAMILY_IPV6, v6.octets()),
    }
}

fn ip_from(family: u16, a: &[u8; 16]) -> std::net::IpAddr {
    if family == FAMILY_IPV4 {
        std::net::IpAddr::from([a[0], a[1], a[2], a[3]])
    } else {
        std::net::IpAddr::from(*a)
    }
}

/// The fixed header of a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: u64,
    /// [`VERSION`].
    pub version: u32,
    /// [`HEADER_SIZE`].
    pub header_size: u32,
    /// Size in bytes of the whole region.
    pub total_size: u32,
    /// Number of flow slots.
    pub max_flows: u32,
    /// [`FLOW_SIZE`].
    pub flow_size: u32,
    /// Process id of the writer.
    pub writer_pid: u32,
    /// Creation time, CLOCK_REALTIME ns.
    pub created_ns: u64,
    /// [`BODY_OFFSET`].
    pub body_offset: u32,
    /// `total_size - body_offset`.
    pub body_size: u32,
}

impl Header {
    /// The header of a new region of this version with `max_flows` slots.
    pub fn new(max_flows: u32, writer_pid: u32, created_ns: u64) -> Self {
        let total = region_size(max_flows) as u32;
        Header {
            magic: MAGIC,
            version: VERSION,
            header_size: HEADER_SIZE,
            total_size: total,
            max_flows,
            flow_size: FLOW_SIZE,
            writer_pid,
            created_ns,
            body_offset: BODY_OFFSET,
            body_size: total - BODY_OFFSET,
        }
    }

    /// Writes the header into the first [`HEADER_SIZE`] bytes of `out`.
    pub fn encode(&self, out: &mut [u8]) {
        out[..HEADER_SIZE as usize].fill(0);
        out[0..8].copy_from_slice(&self.magic.to_ne_bytes());
        out[8..12].copy_from_slice(&self.version.to_ne_bytes());
        out[12..16].copy_from_slice(&self.header_size.to_ne_bytes());
        out[16..20].copy_from_slice(&self.total_size.to_ne_bytes());
        out[20..24].copy_from_slice(&self.max_flows.to_ne_bytes());
        out[24..28].copy_from_slice(&self.flow_size.to_ne_bytes());
        out[28..32].copy_from_slice(&self.writer_pid.to_ne_bytes());
        out[32..40].copy_from_slice(&self.created_ns.to_ne_bytes());
        out[40..44].copy_from_slice(&self.body_offset.to_ne_bytes());
        out[44..48].copy_from_slice(&self.body_size.to_ne_bytes());
    }

    /// Reads a header from the first [`HEADER_SIZE`] bytes of `b` (no validation).
    pub fn decode(b: &[u8]) -> Self {
        Header {
            magic: ne_u64(b, 0),
            version: ne_u32(b, 8),
            header_size: ne_u32(b, 12),
            total_size: ne_u32(b, 16),
            max_flows: ne_u32(b, 20),
            flow_size: ne_u32(b, 24),
            writer_pid: ne_u32(b, 28),
            created_ns: ne_u64(b, 32),
            body_offset: ne_u32(b, 40),
            body_size: ne_u32(b, 44),
        }
    }

    /// Checks every field against this version's layout and `file_size`; on a mismatch names the
    /// field, its value and what was expected.
    pub fn validate(&self, file_size: u64) -> Result<(), Invalid> {
        let bad = |field, value: String, expected: String| {
            Err(Invalid {
                field,
                value,
                expected,
            })
        };
        if self.magic != MAGIC {
            return bad(
                "magic",
                format!("{:#018x}", self.magic),
                format!("{MAGIC:#018x}"),
            );
        }
        if self.version != VERSION {
            return bad(
                "version",
                self.version.to_string(),
                format!("{VERSION} (this reader's version)"),
            );
        }
        if self.header_size != HEADER_SIZE {
            return bad(
                "header_size",
                self.header_size.to_string(),
                HEADER_SIZE.to_string(),
            );
        }
        if self.flow_size != FLOW_SIZE {
            return bad(
                "flow_size",
                self.flow_size.to_string(),
                FLOW_SIZE.to_string(),
            );
        }
        if self.max_flows == 0 || self.max_flows > MAX_FLOWS_LIMIT {
            return bad(
                "max_flows",
                self.max_flows.to_string(),
                format!("1..={MAX_FLOWS_LIMIT}"),
            );
        }
        let want = region_size(self.max_flows) as u64;
        if self.total_size as u64 != want {
            return bad(
                "total_size",
                self.total_size.to_string(),
                format!("{want} for max_flows {}", self.max_flows),
            );
        }
        if self.body_offset != BODY_OFFSET {
            return bad(
                "body_offset",
                self.body_offset.to_string(),
                BODY_OFFSET.to_string(),
            );
        }
        if self.body_size as u64 != want - BODY_OFFSET as u64 {
            return bad(
                "body_size",
                self.body_size.to_string(),
                (want - BODY_OFFSET as u64).to_string(),
            );
        }
        if file_size != want {
            return bad(
                "file size",
                file_size.to_string(),
                format!("{want} (total_size)"),
            );
        }
        Ok(())
    }
}

/// A field that does not hold what this version of the layout allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// Name of the field (as in the layout table).
    pub field: &'static str,
    /// Its value.
    pub value: String,
    /// What this version expects there.
    pub expected: String,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "field `{}` = {} (expected {})",
            self.field, self.value, self.expected
        )
    }
}

/// The job description part of the body (everything but the flows and the hot counters).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobInfo {
    /// Job id (at most [`JOB_ID_MAX`] bytes of `[A-Za-z0-9._-]`).
    pub job_id: String,
    /// This process's rank in the job.
    pub rank: u32,
    /// Number of processes in the job (0 = unknown).
    pub world_size: u32,
    /// Raw [`Paradigm`].
    pub paradigm: u32,
    /// Raw [`Role`].
    pub role: u32,
    /// Ring predecessor's rank ([`NO_RANK`] = none).
    pub ring_pred: u32,
    /// Ring successor's rank ([`NO_RANK`] = none).
    pub ring_succ: u32,
    /// Bytes this process hands to the network per iteration (0 = unknown).
    pub bytes_per_iteration: u64,
}

/// The hot counters of the body, updated on every [`add_bytes`](crate::Writer::add_bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hot {
    /// Number of the current iteration.
    pub iteration: u64,
    /// Bytes handed to the network in the current iteration.
    pub iter_bytes: u64,
    /// Bytes handed to the network since the region was opened.
    pub total_bytes: u64,
    /// CLOCK_MONOTONIC ns when the current iteration began (0 = never).
    pub iter_start_ns: u64,
    /// CLOCK_MONOTONIC ns of the last update.
    pub update_ns: u64,
    /// Number of `before_burst` requests made.
    pub burst_requests: u32,
    /// `FLAG_*` bits.
    pub flags: u32,
}

impl Hot {
    /// Writes the hot part into `out` ([`HOT_SIZE`] bytes).
    pub fn encode(&self, out: &mut [u8]) {
        out[0..8].copy_from_slice(&self.iteration.to_ne_bytes());
        out[8..16].copy_from_slice(&self.iter_bytes.to_ne_bytes());
        out[16..24].copy_from_slice(&self.total_bytes.to_ne_bytes());
        out[24..32].copy_from_slice(&self.iter_start_ns.to_ne_bytes());
        out[32..40].copy_from_slice(&self.update_ns.to_ne_bytes());
        out[40..44].copy_from_slice(&self.burst_requests.to_ne_bytes());
        out[44..48].copy_from_slice(&self.flags.to_ne_bytes());
    }

    /// Reads the hot part from `b` ([`HOT_SIZE`] bytes).
    pub fn decode(b: &[u8]) -> Self {
        Hot {
            iteration: ne_u64(b, 0),
            iter_bytes: ne_u64(b, 8),
            total_bytes: ne_u64(b, 16),
            iter_start_ns: ne_u64(b, 24),
            update_ns: ne_u64(b, 32),
            burst_requests: ne_u32(b, 40),
            flags: ne_u32(b, 44),
        }
    }
}

/// Checks a job id: 1..=[`JOB_ID_MAX`] bytes of `[A-Za-z0-9._-]`, not starting with '.'.
pub fn valid_job_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= JOB_ID_MAX
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'-')
}

/// Writes the job part of the body into `region` (a whole region image, `OFF_DATA..OFF_FLOWS`).
pub fn encode_job(job: &JobInfo, region: &mut [u8]) {
    let b = &mut region[OFF_DATA..OFF_FLOWS];
    b.fill(0);
    let id = job.job_id.as_bytes();
    let n = id.len().min(JOB_ID_MAX);
    b[..n].copy_from_slice(&id[..n]);
    let mut put =
        |off: usize, v: &[u8]| b[off - OFF_DATA..off - OFF_DATA + v.len()].copy_from_slice(v);
    put(208, &job.rank.to_ne_bytes());
    put(212, &job.world_size.to_ne_bytes());
    put(216, &job.paradigm.to_ne_bytes());
    put(220, &job.role.to_ne_bytes());
    put(224, &job.ring_pred.to_ne_bytes());
    put(228, &job.ring_succ.to_ne_bytes());
    put(240, &job.bytes_per_iteration.to_ne_bytes());
}

/// Writes `n_flows` into a region image.
pub fn encode_n_flows(n: u32, region: &mut [u8]) {
    region[232..236].copy_from_slice(&n.to_ne_bytes());
}

/// Writes flow record `i` into a region image.
pub fn encode_flow(i: usize, flow: &FlowRecord, region: &mut [u8]) {
    let off = OFF_FLOWS + i * FLOW_SIZE as usize;
    flow.encode(&mut region[off..off + FLOW_SIZE as usize]);
}

/// The whole body of a region, decoded and validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Body {
    /// The job description.
    pub job: JobInfo,
    /// The valid flow records.
    pub flows: Vec<FlowRecord>,
    /// The hot counters.
    pub hot: Hot,
}

/// Decodes and validates the body of a whole region image `region` whose header declares
/// `max_flows` slots (already validated).
pub fn decode_body(region: &[u8], max_flows: u32) -> Result<Body, Invalid> {
    let bad = |field, value: String, expected: &str| {
        Err(Invalid {
            field,
            value,
            expected: expected.to_string(),
        })
    };
    let id_bytes = &region[OFF_DATA..OFF_DATA + JOB_ID_MAX + 1];
    let Some(nul) = id_bytes.iter().position(|&c| c == 0) else {
        return bad(
            "job_id",
            "(no NUL in 64 bytes)".into(),
            "a NUL-terminated id",
        );
    };
    let job_id = String::from_utf8_lossy(&id_bytes[..nul]).into_owned();
    if !valid_job_id(&job_id) {
        return bad(
            "job_id",
            format!("{job_id:?}"),
            "1..=63 bytes of [A-Za-z0-9._-]",
        );
    }
    let job = JobInfo {
        job_id,
        rank: ne_u32(region, 208),
        world_size: ne_u32(region, 212),
        paradigm: ne_u32(region, 216),
        role: ne_u32(region, 220),
        ring_pred: ne_u32(region, 224),
        ring_succ: ne_u32(region, 228),
        bytes_per_iteration: ne_u64(region, 240),
    };
    if Paradigm::from_raw(job.paradigm).is_none() {
        return bad(
            "paradigm",
            job.paradigm.to_string(),
            "0 (unknown), 1 (ring) or 2 (parameter server)",
        );
    }
    if Role::from_raw(job.role).is_none() {
        return bad(
            "role",
            job.role.to_string(),
            "0 (unknown), 1 (worker) or 2 (parameter server)",
        );
    }
    let n_flows = ne_u32(region, 232);
    if n_flows > max_flows {
        return bad("n_flows", n_flows.to_string(), "at most max_flows");
    }
    let mut flows = Vec::with_capacity(n_flows as usize);
    for i in 0..n_flows as usize {
        let off = OFF_FLOWS + i * FLOW_SIZE as usize;
        let f = FlowRecord::decode(&region[off..off + FLOW_SIZE as usize]);
        if f.family != FAMILY_IPV4 && f.family != FAMILY_IPV6 {
            return bad(
                "flows[].family",
                format!("{} (flow {i})", f.family),
                "4 or 6",
            );
        }
        if FlowKind::from_raw(f.kind).is_none() {
            return bad("flows[].kind", format!("{} (flow {i})", f.kind), "0..=4");
        }
        flows.push(f);
    }
    let h = hot_offset(max_flows);
    let hot = Hot::decode(&region[h..h + HOT_SIZE]);
    if hot.flags & !FLAGS_KNOWN != 0 {
        return bad("flags", format!("{:#x}", hot.flags), "only bit 0 (closed)");
    }
    Ok(Body { job, flows, hot })
}

/// FNV-1a 64-bit hash state.
#[derive(Clone, Copy, Debug)]
pub struct Fnv(pub u64);

impl Fnv {
    /// The FNV-1a offset basis.
    pub const fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    /// Hashes `bytes` into the state.
    pub fn update(mut self, bytes: &[u8]) -> Self {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }
}

impl Default for Fnv {
    fn default() -> Self {
        Self::new()
    }
}

/// FNV state after the checksummed cold part of a region image: bytes
/// `OFF_DATA..OFF_FLOWS + FLOW_SIZE * n_flows` (`n_flows` as stored, at most `max_flows`). Unused
/// flow slots are not covered: readers ignore them, and hashing them would make every update cost
/// in proportion to the slots rather than to the flows.
pub fn cold_hash(region: &[u8], max_flows: u32) -> Fnv {
    let n = ne_u32(region, 232).min(max_flows) as usize;
    Fnv::new().update(&region[OFF_DATA..OFF_FLOWS + FLOW_SIZE as usize * n])
}

/// The checksum of a whole region image with `max_flows` slots: [`cold_hash`] continued over the
/// hot part.
pub fn checksum(region: &[u8], max_flows: u32) -> u64 {
    let h = hot_offset(max_flows);
    cold_hash(region, max_flows)
        .update(&region[h..h + HOT_SIZE])
        .0
}

/// Packs `value` into a checked word (low half the value, high half its complement).
pub const fn checked_word(value: u32) -> u64 {
    ((!value as u64) << 32) | value as u64
}

/// The value of a checked word, or `None` if its halves disagree (torn or never written: an
/// all-zero word reads as `None`).
pub const fn checked_value(word: u64) -> Option<u32> {
    let v = word as u32;
    if (word >> 32) as u32 == !v {
        Some(v)
    } else {
        None
    }
}

/// Native-endian `u16` at `off`.
pub fn ne_u16(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes(b[off..off + 2].try_into().expect("2 bytes"))
}

/// Native-endian `u32` at `off`.
pub fn ne_u32(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

/// Native-endian `u64` at `off`.
pub fn ne_u64(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_match_the_table() {
        assert_eq!(OFF_DATA, 144);
        assert_eq!(OFF_FLOWS, OFF_DATA + 64 + 40);
        assert_eq!(region_size(64), 296 + 48 * 64);
        assert_eq!(hot_offset(1), 296);
        assert_eq!(OFF_BURST_GRANT, 80);
        assert_eq!(MAGIC.to_le_bytes(), *b"MLTCPPRG");
    }

    #[test]
    fn header_round_trip_and_validation() {
        let h = Header::new(8, 42, 7);
        let mut b = vec![0u8; region_size(8)];
        h.encode(&mut b);
        let d = Header::decode(&b);
        assert_eq!(d, h);
        assert!(d.validate(region_size(8) as u64).is_ok());
        let e = d.validate(10).unwrap_err();
        assert_eq!(e.field, "file size");
        let mut v2 = d;
        v2.version = 2;
        let e = v2.validate(region_size(8) as u64).unwrap_err();
        assert_eq!(e.field, "version");
        assert_eq!(e.value, "2");
        let mut big = d;
        big.max_flows = MAX_FLOWS_LIMIT + 1;
        assert_eq!(big.validate(0).unwrap_err().field, "max_flows");
    }

    #[test]
    fn body_round_trip() {
        let mut b = vec![0u8; region_size(4)];
        let job = JobInfo {
            job_id: "resnet-50.a".into(),
            rank: 3,
            world_size: 4,
            paradigm: Paradigm::Ring as u32,
            role: Role::Worker as u32,
            ring_pred: 2,
            ring_succ: 0,
            bytes_per_iteration: 97_000_000,
        };
        encode_job(&job, &mut b);
        let f = FlowRecord::new(
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:5000".parse().unwrap(),
            FlowKind::RingSend,
            0,
        );
        let g = FlowRecord::new(
            "[fd00::1]:1".parse().unwrap(),
            "[fd00::2]:2".parse().unwrap(),
            FlowKind::RingRecv,
            2,
        );
        encode_flow(0, &f, &mut b);
        encode_flow(1, &g, &mut b);
        encode_n_flows(2, &mut b);
        let hot = Hot {
            iteration: 5,
            iter_bytes: 10,
            total_bytes: 20,
            iter_start_ns: 1,
            update_ns: 2,
            burst_requests: 3,
            flags: 0,
        };
        hot.encode(&mut b[hot_offset(4)..]);
        let body = decode_body(&b, 4).unwrap();
        assert_eq!(body.job, job);
        assert_eq!(body.flows, vec![f, g]);
        assert_eq!(body.flows[0].remote(), "10.0.0.2:5000".parse().unwrap());
        assert_eq!(body.flows[1].local(), "[fd00::1]:1".parse().unwrap());
        assert_eq!(body.hot, hot);
    }

    #[test]
    fn body_rejections_name_the_field() {
        let mut b = vec![0u8; region_size(2)];
        assert_eq!(decode_body(&b, 2).unwrap_err().field, "job_id");
        encode_job(
            &JobInfo {
                job_id: "j".into(),
                ..Default::default()
            },
            &mut b,
        );
        assert!(decode_body(&b, 2).is_ok());
        b[216..220].copy_from_slice(&9u32.to_ne_bytes());
        let e = decode_body(&b, 2).unwrap_err();
        assert_eq!((e.field, e.value.as_str()), ("paradigm", "9"));
        b[216..220].copy_from_slice(&0u32.to_ne_bytes());
        encode_n_flows(3, &mut b);
        assert_eq!(decode_body(&b, 2).unwrap_err().field, "n_flows");
        encode_n_flows(1, &mut b);
        assert_eq!(decode_body(&b, 2).unwrap_err().field, "flows[].family");
    }

    #[test]
    fn job_ids() {
        assert!(valid_job_id("job-1.rank_0"));
        assert!(!valid_job_id(""));
        assert!(!valid_job_id(".hidden"));
        assert!(!valid_job_id("a/b"));
        assert!(!valid_job_id(&"x".repeat(64)));
    }

    #[test]
    fn checked_words() {
        assert_eq!(checked_value(checked_word(0)), Some(0));
        assert_eq!(checked_value(checked_word(u32::MAX)), Some(u32::MAX));
        assert_eq!(checked_value(0), None);
        let torn = (checked_word(256) & 0xffff_ffff_0000_0000) | 255;
        assert_eq!(checked_value(torn), None);
    }
}
