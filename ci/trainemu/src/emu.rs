// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The emulator proper: data-parallel training jobs on real TCP sockets.
//!
//! Every worker (and parameter server) is a thread that first enters its host's network namespace
//! with `setns(2)` (which affects only the calling thread; threads it spawns inherit it), so its
//! sockets live there. Each socket's congestion control is set with `setsockopt(TCP_CONGESTION)`
//! before `connect()` on the connecting side and on the listener and the accepted socket on the
//! other. Connections persist across iterations, as in NCCL and ps-lite.
//!
//! Iteration = compute (sleep for a drawn compute time: C with the job's seeded jitter, see
//! [`crate::seeds`]; worker i's k-th iteration uses its k-th draw) then communication, then an
//! in-process barrier of the job's workers (the emulator's stand-in for the framework's
//! synchronisation):
//! - ring all-reduce: the gradient G is split into W chunks; in 2(W−1) steps (W−1 reduce-scatter,
//!   W−1 all-gather) worker i sends one chunk to worker i+1; step s+1 starts only when the chunk of
//!   step s from worker i−1 has arrived. A worker's communication ends when it has received all its
//!   2(W−1) chunks. Per worker ≈ 2(W−1)/W · G bytes; per job exactly 2(W−1) · G.
//! - parameter server: each worker pushes G bytes to the PS; once the PS holds all W pushes of the
//!   iteration it sends G bytes of parameters back to every worker; a worker's communication ends
//!   when it has its G bytes back.
//!
//! A sampler thread reads every sending socket's `TCP_INFO` (bytes_acked, cwnd, srtt, retransmits)
//! and, for mltcp/mltcp_cubic, the module's `TCP_CC_INFO` block (bytes_ratio, F) every
//! `sample_ms`. Everything is kept in memory and written after the run, so file I/O (9p in the VM)
//! does not perturb the flows.
//!
//! Modules, in the order a run uses them: `ctx` (shared run state), `sockets`, `plan` (ring
//! byte plan), `workers`, `background` (background flows), `sampler`, `run`.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Result};
use serde::{Deserialize, Serialize};

use crate::config::{CcVariant, JobPlan};
use crate::progress::ProgressDir;
use crate::queue::{QueueProbe, QueueSample};

mod background;
mod ctx;
mod plan;
mod run;
mod sampler;
mod sockets;
mod workers;

pub use run::run;

/// Where hosts live: all on loopback (tests, no privileges) or in network namespaces.
#[derive(Debug, Clone)]
pub enum Net {
    /// Every host is 127.0.0.1 in the caller's namespace.
    Loopback,
    /// Host name → (namespace file, e.g. /run/netns/te-h1; its address).
    Netns(Vec<(String, PathBuf, Ipv4Addr)>),
}

impl Net {
    fn lookup(&self, host: &str) -> Result<(Option<PathBuf>, Ipv4Addr)> {
        match self {
            Net::Loopback => Ok((None, Ipv4Addr::LOCALHOST)),
            Net::Netns(v) => v
                .iter()
                .find(|(h, _, _)| h == host)
                .map(|(_, p, a)| (Some(p.clone()), *a))
                .ok_or_else(|| anyhow!("host {host} is not in the topology")),
        }
    }
}

/// One run: all `jobs` together under one congestion control.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Run label (e.g. "mltcp" or "solo-A"); names its results directory.
    pub name: String,
    /// Congestion control of every socket, with the module parameters of the run.
    pub cc: CcVariant,
    /// The jobs.
    pub jobs: Vec<JobPlan>,
    /// Sampling period of the throughput sampler, in milliseconds.
    pub sample_ms: f64,
    /// Abort the run after this long, in seconds.
    pub timeout_s: f64,
    /// Where the workers report progress (the agent's progress interface).
    pub progress: ProgressDir,
    /// Background flows of the run, their stops resolved ([`BgPlan`]).
    pub background: Vec<BgPlan>,
    /// PCN: the workers' `before_burst` timeout before each communication phase (None: no call).
    pub before_burst: Option<Duration>,
    /// The switch port whose queue is sampled (None: none, e.g. on loopback).
    pub queue: Option<QueueProbe>,
    /// The run's seed: selects the compute-time draws (the jobs' start offsets come already
    /// resolved for it in `jobs`).
    pub seed: u64,
}

/// A background bulk flow as run.
#[derive(Debug, Clone)]
pub struct BgPlan {
    /// Flow name.
    pub name: String,
    /// Sending host.
    pub from: String,
    /// Receiving host.
    pub to: String,
    /// Congestion control of both ends.
    pub cc: String,
    /// Start, ms after all workers (and background senders) are connected.
    pub start_ms: f64,
    /// Stop, ms after the same moment; None = when the run's last job finishes.
    pub stop_ms: Option<f64>,
}

/// What a background flow did in a run (`background.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BgRecord {
    /// Flow name.
    pub name: String,
    /// Its flow id in flows.json / samples.csv.
    pub flow: usize,
    /// Sending host.
    pub from: String,
    /// Receiving host.
    pub to: String,
    /// Congestion control read back from the sending socket.
    pub cc: String,
    /// When it started sending, µs since the run's start.
    pub start_us: u64,
    /// When it stopped sending, µs since the run's start.
    pub stop_us: u64,
    /// Payload bytes written to the socket.
    pub bytes_sent: u64,
}

/// Per worker (or PS) and iteration: phase times in microseconds since the run's start.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IterRecord {
    /// Run label.
    pub run: String,
    /// Job name.
    pub job: String,
    /// "worker" or "ps".
    pub role: String,
    /// Worker rank (0 for the PS).
    pub worker: usize,
    /// Host the thread ran in.
    pub host: String,
    /// Iteration index, from 0.
    pub iter: u32,
    /// Start of the compute phase, µs (None for the PS).
    pub compute_start_us: Option<u64>,
    /// End of the compute phase, µs (None for the PS).
    pub compute_end_us: Option<u64>,
    /// Start of the communication phase, µs (PS: first pushed byte of the iteration read).
    pub comm_start_us: u64,
    /// End of the communication phase, µs (worker: all its data received; PS: broadcast written).
    pub comm_end_us: u64,
    /// Payload bytes this thread sent in the iteration.
    pub bytes_sent: u64,
    /// Payload bytes this thread received in the iteration.
    pub bytes_recv: u64,
    /// PCN: how long the worker's `before_burst` call waited before this communication phase
    /// (which starts at `comm_start_us`, after the wait), µs; None when it made no call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_wait_us: Option<u64>,
    /// PCN: the call's outcome: "granted", "no_agent", "timed_out" or "no_region".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_outcome: Option<String>,
}

/// One sending socket end, as sampled.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowInfo {
    /// Flow index in the run (the `flow` column of samples.csv).
    pub id: usize,
    /// Job name.
    pub job: String,
    /// "ring" (worker → successor), "push" (worker → PS) or "pull" (PS → worker).
    pub kind: String,
    /// Sending worker's rank (PS: the receiving worker's rank).
    pub worker: usize,
    /// Sending host.
    pub src_host: String,
    /// Receiving host.
    pub dst_host: String,
    /// Congestion control read back from the socket with getsockopt(TCP_CONGESTION).
    pub cc: String,
    /// Whether the connection negotiated ECN (TCP_INFO's TCPI_OPT_ECN, read when the flow was
    /// registered): an ECN-needing algorithm (dctcp, mltcp_dctcp) without it falls back to Reno.
    #[serde(default)]
    pub ecn: bool,
}

/// One throughput sample of one flow.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Sample {
    /// Time since the run's start, µs.
    pub t_us: u64,
    /// Flow id.
    pub flow: usize,
    /// tcpi_bytes_acked, bytes.
    pub bytes_acked: u64,
    /// tcpi_snd_cwnd, segments.
    pub cwnd: u32,
    /// tcpi_rtt (smoothed RTT), µs.
    pub srtt_us: u32,
    /// tcpi_total_retrans, segments.
    pub retrans: u32,
    /// MLTCP bytes_ratio (1024 = 1.0), for mltcp/mltcp_cubic sockets.
    pub bytes_ratio_fx: Option<u16>,
    /// MLTCP F(bytes_ratio) (1024 = 1.0), for mltcp/mltcp_cubic sockets.
    pub f_fx: Option<u16>,
}

/// Everything a run produced.
#[derive(Debug, Default)]
pub struct RunOutput {
    /// Per worker/PS and iteration.
    pub records: Vec<IterRecord>,
    /// Sampled flows.
    pub flows: Vec<FlowInfo>,
    /// Samples, in time order.
    pub samples: Vec<Sample>,
    /// Queue samples of the bottleneck port, in time order.
    pub queue: Vec<QueueSample>,
    /// Background flows.
    pub background: Vec<BgRecord>,
    /// Wall time of the run, seconds.
    pub wall_s: f64,
}
