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

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::mem::{offset_of, size_of};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::config::{CcVariant, JobPlan, Paradigm};
use crate::progress::{Identity, ProgressDir, Reporter};
use crate::queue::{QueueProbe, QueueSample};
use crate::seeds::ComputeDraws;
use mltcp_math::info::{MltcpInfo, MLTCP_INFO_LEN};
use mltcp_progress::{FlowKind, Paradigm as PParadigm, Role};
use nix::sys::socket::{
    connect, getsockopt, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, SockaddrIn,
};

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

// ---------------------------------------------------------------------------------------------
// Shared run state.

struct Ctx {
    t0: Instant,
    cc: String,
    run: String,
    net: Net,
    abort: AtomicBool,
    error: Mutex<Option<String>>,
    flows: Mutex<Vec<(FlowInfo, TcpStream)>>,
    /// Iterations completed per job (for progress).
    progress: Vec<AtomicU32>,
    /// All workers of all jobs, once connected: start offsets count from when they all are.
    go: Barrier,
    /// The time all workers were connected, µs.
    go_us: std::sync::OnceLock<u64>,
    /// Where the workers report progress.
    progress_dir: ProgressDir,
    /// PCN: the workers' `before_burst` timeout.
    before_burst: Option<Duration>,
    /// Whether the run has jobs (a background-only baseline has none).
    has_jobs: bool,
    /// Set when every job's threads have finished (background flows without a stop_ms end then).
    jobs_done: AtomicBool,
    /// The run's seed.
    seed: u64,
}

impl Ctx {
    fn us(&self) -> u64 {
        self.t0.elapsed().as_micros() as u64
    }
    fn fail(&self, msg: String) {
        let mut e = self.error.lock().unwrap();
        if e.is_none() {
            *e = Some(msg);
        }
        self.abort.store(true, Ordering::SeqCst);
    }
    fn check(&self) -> Result<()> {
        if self.abort.load(Ordering::SeqCst) {
            bail!("aborted");
        }
        Ok(())
    }
    /// Waits until every worker of the run is connected, then until `offset_ms` after that.
    fn start(&self, offset_ms: f64) -> Result<()> {
        self.go.wait(&self.abort)?;
        let go = *self.go_us.get_or_init(|| self.us());
        sleep_until(self, go + (offset_ms * 1000.0) as u64)
    }
    /// Adds a flow for the sampler; returns its id.
    fn register(&self, mut info: FlowInfo, s: &TcpStream) -> Result<usize> {
        info.ecn = ecn_negotiated(s.as_fd());
        let dup = s.try_clone().context("dup socket for the sampler")?;
        let mut v = self.flows.lock().unwrap();
        let id = v.len();
        info.id = id;
        v.push((info, dup));
        Ok(id)
    }
}

/// A reusable barrier that gives up when the run aborts (std's Barrier cannot).
pub struct Barrier {
    n: usize,
    state: Mutex<(usize, u64)>,
    cv: Condvar,
}

impl Barrier {
    /// A barrier for `n` threads.
    pub fn new(n: usize) -> Self {
        Barrier {
            n,
            state: Mutex::new((0, 0)),
            cv: Condvar::new(),
        }
    }
    /// Blocks until `n` threads have called it (then all return Ok), or `abort` is set.
    pub fn wait(&self, abort: &AtomicBool) -> Result<()> {
        let mut g = self.state.lock().unwrap();
        let gen = g.1;
        g.0 += 1;
        if g.0 == self.n {
            g.0 = 0;
            g.1 += 1;
            self.cv.notify_all();
            return Ok(());
        }
        while g.1 == gen {
            if abort.load(Ordering::SeqCst) {
                bail!("aborted");
            }
            g = self
                .cv
                .wait_timeout(g, Duration::from_millis(100))
                .unwrap()
                .0;
        }
        Ok(())
    }
}

/// A monotone byte counter one thread advances and others wait on.
struct Counter {
    v: Mutex<u64>,
    cv: Condvar,
}

impl Counter {
    fn new() -> Self {
        Counter {
            v: Mutex::new(0),
            cv: Condvar::new(),
        }
    }
    fn add(&self, n: u64) {
        *self.v.lock().unwrap() += n;
        self.cv.notify_all();
    }
    fn wait_for(&self, target: u64, abort: &AtomicBool) -> Result<()> {
        let mut g = self.v.lock().unwrap();
        while *g < target {
            if abort.load(Ordering::SeqCst) {
                bail!("aborted");
            }
            g = self
                .cv
                .wait_timeout(g, Duration::from_millis(100))
                .unwrap()
                .0;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Sockets.

const IO_TIMEOUT: Duration = Duration::from_millis(500);
static ZEROS: [u8; 256 * 1024] = [0; 256 * 1024];

fn enter(ns: &Option<PathBuf>) -> Result<()> {
    if let Some(p) = ns {
        let f = File::open(p).with_context(|| format!("open {}", p.display()))?;
        nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET)
            .with_context(|| format!("setns({})", p.display()))?;
    }
    Ok(())
}

/// Sets the congestion control of socket `fd` (setsockopt TCP_CONGESTION).
pub fn set_cc(fd: &impl AsFd, cc: &str) -> Result<()> {
    setsockopt(fd, sockopt::TcpCongestion, &OsString::from(cc))
        .with_context(|| format!("setsockopt(TCP_CONGESTION, {cc})"))
}

/// Reads the congestion control of socket `fd` (getsockopt TCP_CONGESTION).
pub fn get_cc(fd: &impl AsFd) -> Result<String> {
    let name = getsockopt(fd, sockopt::TcpCongestion).context("getsockopt(TCP_CONGESTION)")?;
    Ok(name.to_string_lossy().into_owned())
}

fn listen_cc(ip: Ipv4Addr, cc: &str) -> Result<TcpListener> {
    let l = TcpListener::bind(SocketAddrV4::new(ip, 0)).with_context(|| format!("bind {ip}:0"))?;
    // No connection can arrive before the address is published, after this.
    set_cc(&l, cc)?;
    Ok(l)
}

/// Connects to `addr` with congestion control `cc` set before the SYN (so the whole flow runs it).
fn connect_cc(addr: SocketAddr, cc: &str) -> Result<TcpStream> {
    let SocketAddr::V4(a) = addr else {
        bail!("IPv4 only")
    };
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .context("socket(AF_INET, SOCK_STREAM)")?;
    set_cc(&fd, cc)?;
    connect(fd.as_raw_fd(), &SockaddrIn::from(a)).with_context(|| format!("connect {addr}"))?;
    Ok(TcpStream::from(fd))
}

fn accept_cc(l: &TcpListener, cc: &str, ctx: &Ctx) -> Result<TcpStream> {
    l.set_nonblocking(true)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                set_cc(&s, cc)?;
                return Ok(s);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                ctx.check()?;
                if Instant::now() > deadline {
                    bail!("no connection within 30 s on {}", l.local_addr()?);
                }
                thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(e).context("accept"),
        }
    }
}

fn prepare(s: &TcpStream, cc: &str) -> Result<String> {
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let got = get_cc(s)?;
    if got != cc {
        bail!("socket uses congestion control {got}, not {cc}");
    }
    Ok(got)
}

/// True for a socket error after which the call is simply retried: the socket's timeout
/// expired (`WouldBlock` / `TimedOut`, SO_RCVTIMEO / SO_SNDTIMEO) or a signal interrupted it.
fn retryable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Writes `n` bytes, retrying on timeouts until the run aborts.
fn send_bytes(s: &mut TcpStream, mut n: u64, ctx: &Ctx, rep: &mut Reporter) -> Result<()> {
    while n > 0 {
        let k = n.min(ZEROS.len() as u64) as usize;
        match s.write(&ZEROS[..k]) {
            Ok(0) => bail!("peer closed"),
            Ok(w) => {
                n -= w as u64;
                rep.add_bytes(w as u64);
            }
            Err(e) if retryable(&e) => ctx.check()?,
            Err(e) => return Err(e).context("write"),
        }
    }
    Ok(())
}

/// Reads exactly `n` bytes, retrying on timeouts; returns the time the first byte arrived (µs).
fn recv_bytes(
    s: &mut TcpStream,
    mut n: u64,
    buf: &mut [u8],
    ctx: &Ctx,
    progress: Option<&Counter>,
) -> Result<u64> {
    let mut first = None;
    while n > 0 {
        let k = n.min(buf.len() as u64) as usize;
        match s.read(&mut buf[..k]) {
            Ok(0) => bail!("peer closed with {n} bytes outstanding"),
            Ok(r) => {
                first.get_or_insert_with(|| ctx.us());
                n -= r as u64;
                if let Some(c) = progress {
                    c.add(r as u64);
                }
            }
            Err(e) if retryable(&e) => ctx.check()?,
            Err(e) => return Err(e).context("read"),
        }
    }
    Ok(first.unwrap_or_else(|| ctx.us()))
}

fn sleep_until(ctx: &Ctx, t_us: u64) -> Result<()> {
    loop {
        ctx.check()?;
        let now = ctx.us();
        if now >= t_us {
            return Ok(());
        }
        thread::sleep(Duration::from_micros((t_us - now).min(50_000)));
    }
}

// ---------------------------------------------------------------------------------------------
// Ring all-reduce byte plan.

/// Chunk sizes of a gradient of `g` bytes split over `w` workers (they differ by at most 1 byte).
pub fn chunks(g: u64, w: usize) -> Vec<u64> {
    let w64 = w as u64;
    (0..w64).map(|c| g / w64 + u64::from(c < g % w64)).collect()
}

/// Bytes worker `i` of a `w`-worker ring sends in each of its 2(w−1) steps: reduce-scatter step s
/// sends chunk (i − s) mod w, all-gather step s sends chunk (i + 1 − s) mod w.
pub fn ring_steps(g: u64, w: usize, i: usize) -> Vec<u64> {
    let c = chunks(g, w);
    let mut v = Vec::with_capacity(2 * (w - 1));
    for s in 0..w - 1 {
        v.push(c[(i + w - s) % w]);
    }
    for s in 0..w - 1 {
        v.push(c[(i + 1 + w - s) % w]);
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Workers.

struct RingShared {
    addrs: Mutex<Vec<Option<SocketAddr>>>,
    setup: Barrier,
    iter: Barrier,
}

fn ring_worker(
    ctx: &Ctx,
    job_idx: usize,
    job: &JobPlan,
    i: usize,
    sh: &RingShared,
) -> Result<Vec<IterRecord>> {
    let w = job.workers.len();
    let host = &job.workers[i];
    let succ_host = &job.workers[(i + 1) % w];
    let (ns, ip) = ctx.net.lookup(host)?;
    enter(&ns)?;
    let l = listen_cc(ip, &ctx.cc)?;
    sh.addrs.lock().unwrap()[i] = Some(l.local_addr()?);
    sh.setup.wait(&ctx.abort)?;
    let succ =
        sh.addrs.lock().unwrap()[(i + 1) % w].ok_or_else(|| anyhow!("successor has no address"))?;
    let mut out = connect_cc(succ, &ctx.cc)?;
    let mut inp = accept_cc(&l, &ctx.cc, ctx)?;
    let cc = prepare(&out, &ctx.cc)?;
    prepare(&inp, &ctx.cc)?;
    ctx.register(
        FlowInfo {
            id: 0,
            job: job.name.clone(),
            kind: "ring".into(),
            worker: i,
            src_host: host.clone(),
            dst_host: succ_host.clone(),
            cc,
            ecn: false,
        },
        &out,
    )?;
    let send = ring_steps(job.gradient_bytes, w, i);
    let recv = ring_steps(job.gradient_bytes, w, (i + w - 1) % w);
    let send_total: u64 = send.iter().sum();
    let recv_total: u64 = recv.iter().sum();
    let iters = job.iterations as u64;
    let (rank, world) = (i as u32, w as u32);
    let mut rep = Reporter::open(
        &ctx.progress_dir,
        &Identity {
            run: &ctx.run,
            job: &job.name,
            rank,
            world_size: world,
            paradigm: PParadigm::Ring,
            role: Role::Worker,
            ring: Some(((rank + world - 1) % world, (rank + 1) % world)),
            bytes_per_iteration: send_total,
        },
    );
    rep.add_flow(&out, FlowKind::RingSend, (rank + 1) % world);
    rep.add_flow(&inp, FlowKind::RingRecv, (rank + world - 1) % world);
    let got = Arc::new(Counter::new());
    let records = thread::scope(|scope| -> Result<Vec<IterRecord>> {
        let got2 = got.clone();
        let receiver = scope.spawn(move || -> Result<()> {
            let mut buf = vec![0u8; 256 * 1024];
            let r = recv_bytes(&mut inp, recv_total * iters, &mut buf, ctx, Some(&got2));
            r.map(|_| ())
        });
        let mut recs = Vec::new();
        let mut draws = ComputeDraws::new(ctx.seed, job.index, i, job.compute_ms, &job.jitter);
        let res = (|| -> Result<()> {
            ctx.start(job.start_offset_ms)?;
            for k in 0..iters {
                let base = k * recv_total;
                let cs = ctx.us();
                sleep_until(ctx, cs + (draws.next_ms() * 1000.0) as u64)?;
                let ce = ctx.us();
                rep.begin_iteration(k);
                let (burst_wait_us, burst_outcome) = pcn_wait(ctx, &mut rep);
                let comm_start = ctx.us();
                let mut need = base;
                for (s, n) in send.iter().enumerate() {
                    if s > 0 {
                        need += recv[s - 1];
                        got.wait_for(need, &ctx.abort)?;
                    }
                    send_bytes(&mut out, *n, ctx, &mut rep)?;
                }
                got.wait_for(base + recv_total, &ctx.abort)?;
                let end = ctx.us();
                recs.push(IterRecord {
                    run: ctx.run.clone(),
                    job: job.name.clone(),
                    role: "worker".into(),
                    worker: i,
                    host: host.clone(),
                    iter: k as u32,
                    compute_start_us: Some(cs),
                    compute_end_us: Some(ce),
                    comm_start_us: comm_start,
                    comm_end_us: end,
                    bytes_sent: send_total,
                    bytes_recv: recv_total,
                    burst_wait_us,
                    burst_outcome,
                });
                sh.iter.wait(&ctx.abort)?;
                if i == 0 {
                    ctx.progress[job_idx].fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(())
        })();
        if let Err(e) = res {
            ctx.fail(format!("job {} worker {i} ({host}): {e:#}", job.name));
            let _ = receiver.join();
            return Err(e);
        }
        match receiver.join() {
            Ok(Ok(())) => Ok(recs),
            Ok(Err(e)) => Err(e.context("receiver")),
            Err(_) => Err(anyhow!("receiver thread panicked")),
        }
    })?;
    Ok(records)
}

struct PsShared {
    addr: Mutex<Option<SocketAddr>>,
    setup: Barrier,
    iter: Barrier,
    /// Pushes fully received per iteration index.
    pushed: Mutex<Vec<usize>>,
    pushed_cv: Condvar,
}

fn ps_worker(
    ctx: &Ctx,
    job_idx: usize,
    job: &JobPlan,
    i: usize,
    sh: &PsShared,
) -> Result<Vec<IterRecord>> {
    let host = &job.workers[i];
    let ps_host = job.ps.as_ref().ok_or_else(|| anyhow!("no ps host"))?;
    let (ns, _) = ctx.net.lookup(host)?;
    enter(&ns)?;
    sh.setup.wait(&ctx.abort)?;
    let addr = sh
        .addr
        .lock()
        .unwrap()
        .ok_or_else(|| anyhow!("PS has no address"))?;
    let mut s = connect_cc(addr, &ctx.cc)?;
    let cc = prepare(&s, &ctx.cc)?;
    s.write_all(&(i as u32).to_le_bytes())
        .context("hello to PS")?;
    ctx.register(
        FlowInfo {
            id: 0,
            job: job.name.clone(),
            kind: "push".into(),
            worker: i,
            src_host: host.clone(),
            dst_host: ps_host.clone(),
            cc,
            ecn: false,
        },
        &s,
    )?;
    let g = job.gradient_bytes;
    let w = job.workers.len() as u32;
    let mut rep = Reporter::open(
        &ctx.progress_dir,
        &Identity {
            run: &ctx.run,
            job: &job.name,
            rank: i as u32,
            world_size: w + 1,
            paradigm: PParadigm::ParameterServer,
            role: Role::Worker,
            ring: None,
            bytes_per_iteration: g,
        },
    );
    rep.add_flow(&s, FlowKind::PsPush, w);
    let mut buf = vec![0u8; 256 * 1024];
    let mut recs = Vec::new();
    let mut draws = ComputeDraws::new(ctx.seed, job.index, i, job.compute_ms, &job.jitter);
    ctx.start(job.start_offset_ms)?;
    for k in 0..job.iterations {
        let cs = ctx.us();
        sleep_until(ctx, cs + (draws.next_ms() * 1000.0) as u64)?;
        let ce = ctx.us();
        rep.begin_iteration(u64::from(k));
        let (burst_wait_us, burst_outcome) = pcn_wait(ctx, &mut rep);
        let comm_start = ctx.us();
        send_bytes(&mut s, g, ctx, &mut rep)?;
        recv_bytes(&mut s, g, &mut buf, ctx, None)?;
        let end = ctx.us();
        recs.push(IterRecord {
            run: ctx.run.clone(),
            job: job.name.clone(),
            role: "worker".into(),
            worker: i,
            host: host.clone(),
            iter: k,
            compute_start_us: Some(cs),
            compute_end_us: Some(ce),
            comm_start_us: comm_start,
            comm_end_us: end,
            bytes_sent: g,
            bytes_recv: g,
            burst_wait_us,
            burst_outcome,
        });
        sh.iter.wait(&ctx.abort)?;
        if i == 0 {
            ctx.progress[job_idx].fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(recs)
}

fn ps_server(ctx: &Ctx, job: &JobPlan, sh: &PsShared) -> Result<Vec<IterRecord>> {
    let w = job.workers.len();
    let host = job.ps.as_ref().ok_or_else(|| anyhow!("no ps host"))?;
    let (ns, ip) = ctx.net.lookup(host)?;
    enter(&ns)?;
    let l = listen_cc(ip, &ctx.cc)?;
    *sh.addr.lock().unwrap() = Some(l.local_addr()?);
    sh.setup.wait(&ctx.abort)?;
    let mut conns: Vec<Option<TcpStream>> = (0..w).map(|_| None).collect();
    for _ in 0..w {
        let mut s = accept_cc(&l, &ctx.cc, ctx)?;
        let cc = prepare(&s, &ctx.cc)?;
        let mut hello = [0u8; 4];
        recv_exact(&mut s, &mut hello, ctx)?;
        let idx = u32::from_le_bytes(hello) as usize;
        if idx >= w || conns[idx].is_some() {
            bail!("bad hello {idx} from a worker");
        }
        ctx.register(
            FlowInfo {
                id: 0,
                job: job.name.clone(),
                kind: "pull".into(),
                worker: idx,
                src_host: host.clone(),
                dst_host: job.workers[idx].clone(),
                cc,
                ecn: false,
            },
            &s,
        )?;
        conns[idx] = Some(s);
    }
    let g = job.gradient_bytes;
    let iters = job.iterations as usize;
    let mut rep = Reporter::open(
        &ctx.progress_dir,
        &Identity {
            run: &ctx.run,
            job: &job.name,
            rank: w as u32,
            world_size: w as u32 + 1,
            paradigm: PParadigm::ParameterServer,
            role: Role::ParameterServer,
            ring: None,
            bytes_per_iteration: g * w as u64,
        },
    );
    for (idx, c) in conns.iter().enumerate() {
        if let Some(c) = c {
            rep.add_flow(c, FlowKind::PsPull, idx as u32);
        }
    }
    // One region for the PS, written by its per-connection threads.
    let rep = Mutex::new(rep);
    *sh.pushed.lock().unwrap() = vec![0; iters];
    // Per connection: (first push byte µs, broadcast end µs) per iteration.
    let per_conn = thread::scope(|scope| -> Result<Vec<Vec<(u64, u64)>>> {
        let handles: Vec<_> = conns
            .into_iter()
            .map(|c| {
                let mut s = c.expect("all workers connected");
                let rep = &rep;
                scope.spawn(move || -> Result<Vec<(u64, u64)>> {
                    let mut buf = vec![0u8; 256 * 1024];
                    let mut v = Vec::with_capacity(iters);
                    for k in 0..iters {
                        let first = recv_bytes(&mut s, g, &mut buf, ctx, None)?;
                        {
                            let mut p = sh.pushed.lock().unwrap();
                            p[k] += 1;
                            sh.pushed_cv.notify_all();
                            while p[k] < w {
                                ctx.check()?;
                                p = sh
                                    .pushed_cv
                                    .wait_timeout(p, Duration::from_millis(100))
                                    .unwrap()
                                    .0;
                            }
                        }
                        // The broadcast is iteration k's: the region says so before its first
                        // byte (the agent plans a flow by its region's iteration; begun after the
                        // broadcast, the region kept iteration k-1, all sent, and the agent held
                        // the broadcast at its rate floor).
                        rep.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .begin_iteration(k as u64);
                        send_bytes(&mut s, g, ctx, &mut Reporter::none())?;
                        rep.lock().unwrap_or_else(|p| p.into_inner()).add_bytes(g);
                        v.push((first, ctx.us()));
                    }
                    Ok(v)
                })
            })
            .collect();
        let mut out = Vec::new();
        for h in handles {
            match h.join() {
                Ok(Ok(v)) => out.push(v),
                Ok(Err(e)) => {
                    ctx.fail(format!("job {} PS ({host}): {e:#}", job.name));
                    return Err(e);
                }
                Err(_) => bail!("PS connection thread panicked"),
            }
        }
        Ok(out)
    })?;
    Ok((0..iters)
        .map(|k| IterRecord {
            run: ctx.run.clone(),
            job: job.name.clone(),
            role: "ps".into(),
            worker: 0,
            host: host.clone(),
            iter: k as u32,
            compute_start_us: None,
            compute_end_us: None,
            comm_start_us: per_conn.iter().map(|v| v[k].0).min().unwrap_or(0),
            comm_end_us: per_conn.iter().map(|v| v[k].1).max().unwrap_or(0),
            bytes_sent: g * w as u64,
            bytes_recv: g * w as u64,
            burst_wait_us: None,
            burst_outcome: None,
        })
        .collect())
}

fn recv_exact(s: &mut TcpStream, buf: &mut [u8], ctx: &Ctx) -> Result<()> {
    let mut off = 0;
    while off < buf.len() {
        match s.read(&mut buf[off..]) {
            Ok(0) => bail!("peer closed"),
            Ok(n) => off += n,
            Err(e) if retryable(&e) => ctx.check()?,
            Err(e) => return Err(e).context("read"),
        }
    }
    Ok(())
}

/// PCN: the bounded `before_burst` wait of a worker about to communicate, when the run asks for
/// it; returns (waited µs, outcome) for its record.
fn pcn_wait(ctx: &Ctx, rep: &mut Reporter) -> (Option<u64>, Option<String>) {
    let Some(timeout) = ctx.before_burst else {
        return (None, None);
    };
    let t = ctx.us();
    let outcome = rep.before_burst(timeout);
    (Some(ctx.us() - t), Some(outcome.to_string()))
}

// ---------------------------------------------------------------------------------------------
// Background flows.

/// Receiving end of a background flow: listens in `to`'s namespace with the flow's congestion
/// control (so an ECN-needing one negotiates ECN), publishes its address, reads until the sender
/// closes.
fn bg_receiver(ctx: &Ctx, bg: &BgPlan, addr: std::sync::mpsc::Sender<SocketAddr>) -> Result<()> {
    let (ns, ip) = ctx.net.lookup(&bg.to)?;
    enter(&ns)?;
    let l = listen_cc(ip, &bg.cc)?;
    addr.send(l.local_addr()?)
        .map_err(|_| anyhow!("sender gone"))?;
    let mut s = accept_cc(&l, &bg.cc, ctx)?;
    prepare(&s, &bg.cc)?;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if retryable(&e) => ctx.check()?,
            Err(e) => return Err(e).context("read"),
        }
    }
}

/// Sending end of a background flow: connects from `from`'s namespace, waits for the run's start
/// like a worker, then writes as fast as TCP takes it from `start_ms` until `stop_ms` (or, without
/// one, until the run's jobs are done).
fn bg_sender(
    ctx: &Ctx,
    bg: &BgPlan,
    addr: std::sync::mpsc::Receiver<SocketAddr>,
) -> Result<BgRecord> {
    let (ns, _) = ctx.net.lookup(&bg.from)?;
    enter(&ns)?;
    let a = addr
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| anyhow!("the receiver published no address within 30 s"))?;
    let mut s = connect_cc(a, &bg.cc)?;
    let cc = prepare(&s, &bg.cc)?;
    let info = FlowInfo {
        id: 0,
        job: bg.name.clone(),
        kind: "background".into(),
        worker: 0,
        src_host: bg.from.clone(),
        dst_host: bg.to.clone(),
        cc: cc.clone(),
        ecn: false,
    };
    let flow = ctx.register(info, &s)?;
    ctx.start(bg.start_ms)?;
    let go = *ctx
        .go_us
        .get()
        .ok_or_else(|| anyhow!("run start not set"))?;
    let stop_at = bg.stop_ms.map(|m| go + (m * 1000.0) as u64);
    let start_us = ctx.us();
    let mut sent = 0u64;
    const CHUNK: usize = 64 * 1024;
    loop {
        ctx.check()?;
        if stop_at.is_some_and(|t| ctx.us() >= t)
            || (ctx.has_jobs && ctx.jobs_done.load(Ordering::SeqCst))
        {
            break;
        }
        match s.write(&ZEROS[..CHUNK]) {
            Ok(0) => bail!("peer closed"),
            Ok(w) => sent += w as u64,
            Err(e) if retryable(&e) => {}
            Err(e) => return Err(e).context("write"),
        }
    }
    let stop_us = ctx.us();
    s.shutdown(std::net::Shutdown::Write).context("shutdown")?;
    Ok(BgRecord {
        name: bg.name.clone(),
        flow,
        from: bg.from.clone(),
        to: bg.to.clone(),
        cc,
        start_us,
        stop_us,
        bytes_sent: sent,
    })
}

// ---------------------------------------------------------------------------------------------
// Sampler.

/// Plain-old-data types that `getsockopt` may fill: every bit pattern is a valid value.
///
/// # Safety
/// Implement only for types made of integers (and arrays of them), without padding invariants.
unsafe trait SockoptBuf: Sized {}
// SAFETY: a byte array is valid for any contents.
unsafe impl<const N: usize> SockoptBuf for [u8; N] {}
// SAFETY: `struct tcp_info` is integers only (u8, u16, u32, u64 fields).
unsafe impl SockoptBuf for libc::tcp_info {}

/// getsockopt(IPPROTO_TCP, `opt`) into `out`; the number of bytes the kernel wrote (it writes
/// at most `size_of::<T>()`, fewer when its struct is shorter: the rest of `out` is kept).
fn tcp_sockopt<T: SockoptBuf>(fd: BorrowedFd<'_>, opt: libc::c_int, out: &mut T) -> Option<usize> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `fd` is an open descriptor for the call's duration (BorrowedFd); `out` is a valid,
    // writable `T` of `len` bytes, and any bytes the kernel writes form a valid `T` (SockoptBuf).
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            opt,
            (out as *mut T).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(len as usize)
}

/// `struct tcp_info` of socket `fd` and the number of its bytes the kernel filled; fields past
/// that (an older kernel) stay zero.
fn tcp_info(fd: BorrowedFd<'_>) -> Option<(libc::tcp_info, usize)> {
    // SAFETY: `tcp_info` is integers only, so all-zero bytes are a valid value.
    let mut ti: libc::tcp_info = unsafe { std::mem::zeroed() };
    let n = tcp_sockopt(fd, libc::TCP_INFO, &mut ti)?;
    Some((ti, n))
}

/// TCPI_OPT_ECN in tcp_info's `tcpi_options`.
const TCPI_OPT_ECN: u8 = 8;

/// Whether connection `fd` negotiated ECN.
fn ecn_negotiated(fd: BorrowedFd<'_>) -> bool {
    tcp_info(fd).is_some_and(|(ti, n)| {
        n > offset_of!(libc::tcp_info, tcpi_options) && ti.tcpi_options & TCPI_OPT_ECN != 0
    })
}

/// Shortest `struct tcp_info` that holds every field [`sample`] reads (the ABI only appends).
const TCP_INFO_SAMPLED_LEN: usize = offset_of!(libc::tcp_info, tcpi_bytes_acked) + size_of::<u64>();

/// One sample of socket `fd`: `struct tcp_info` (rtt, snd_cwnd, total_retrans, bytes_acked) and,
/// for tcp_mltcp's sockets (`mltcp`), the MLTCP block ([`mltcp_math::info::MltcpInfo`]).
fn sample(fd: BorrowedFd<'_>, flow: usize, t_us: u64, mltcp: bool) -> Option<Sample> {
    let (ti, n) = tcp_info(fd)?;
    if n < TCP_INFO_SAMPLED_LEN {
        return None;
    }
    let mut s = Sample {
        t_us,
        flow,
        bytes_acked: ti.tcpi_bytes_acked,
        cwnd: ti.tcpi_snd_cwnd,
        srtt_us: ti.tcpi_rtt,
        retrans: ti.tcpi_total_retrans,
        bytes_ratio_fx: None,
        f_fx: None,
    };
    if mltcp {
        let mut c = [0u8; MLTCP_INFO_LEN];
        let info = tcp_sockopt(fd, libc::TCP_CC_INFO, &mut c)
            .and_then(|n| c.get(..n))
            .and_then(MltcpInfo::decode);
        if let Some(i) = info {
            s.bytes_ratio_fx = Some(i.bytes_ratio_fx);
            s.f_fx = Some(i.f_fx);
        }
    }
    Some(s)
}

// ---------------------------------------------------------------------------------------------
// The run.

/// Progress callback: (iterations done per job, seconds since the start).
pub type ProgressFn<'a> = &'a mut dyn FnMut(&[u32], f64);

/// Runs every job of `spec` to completion; `progress` is called about every 200 ms.
pub fn run(spec: &RunSpec, net: &Net, progress: ProgressFn) -> Result<RunOutput> {
    let ctx = Ctx {
        t0: Instant::now(),
        cc: spec.cc.cc.clone(),
        run: spec.name.clone(),
        net: net.clone(),
        abort: AtomicBool::new(false),
        error: Mutex::new(None),
        flows: Mutex::new(Vec::new()),
        progress: spec.jobs.iter().map(|_| AtomicU32::new(0)).collect(),
        go: Barrier::new(
            spec.jobs.iter().map(|j| j.workers.len()).sum::<usize>() + spec.background.len(),
        ),
        go_us: std::sync::OnceLock::new(),
        progress_dir: spec.progress.clone(),
        before_burst: spec.before_burst,
        has_jobs: !spec.jobs.is_empty(),
        jobs_done: AtomicBool::new(false),
        seed: spec.seed,
    };
    let stop_sampler = AtomicBool::new(false);
    let period = Duration::from_micros((spec.sample_ms * 1000.0) as u64);
    let ctx = &ctx;
    type Collected = (
        Vec<IterRecord>,
        Vec<Sample>,
        Vec<QueueSample>,
        Vec<BgRecord>,
    );
    let (records, samples, queue, background) = thread::scope(|scope| -> Result<Collected> {
        let stop = &stop_sampler;
        let queue_sampler = spec.queue.as_ref().map(|probe| {
            scope.spawn(move || {
                let mut out = Vec::new();
                if let Err(e) = crate::queue::sample_port(
                    probe,
                    &|| ctx.us(),
                    &|| stop.load(Ordering::SeqCst),
                    &mut out,
                ) {
                    tracing::warn!(
                        "run {}: queue sampling of {} stopped after {} samples: {e:#}",
                        ctx.run,
                        probe.dev,
                        out.len()
                    );
                }
                out
            })
        });
        let sampler = scope.spawn(move || {
            let mut out = Vec::new();
            let mut next = Instant::now();
            while !stop.load(Ordering::SeqCst) {
                let t = ctx.us();
                {
                    let flows = ctx.flows.lock().unwrap();
                    for (f, s) in flows.iter() {
                        // The MLTCP block is read from tcp_mltcp's sockets only (a background
                        // dctcp flow's TCP_CC_INFO is DCTCP's).
                        if let Some(x) = sample(s.as_fd(), f.id, t, f.cc.starts_with("mltcp")) {
                            out.push(x);
                        }
                    }
                }
                next += period;
                let now = Instant::now();
                if next > now {
                    thread::sleep(next - now);
                } else {
                    next = now; // fell behind (slow VM): no burst of catch-up samples
                }
            }
            out
        });
        let mut handles = Vec::new();
        for (ji, job) in spec.jobs.iter().enumerate() {
            let w = job.workers.len();
            match job.paradigm {
                Paradigm::Ring => {
                    let sh = Arc::new(RingShared {
                        addrs: Mutex::new(vec![None; w]),
                        setup: Barrier::new(w),
                        iter: Barrier::new(w),
                    });
                    for i in 0..w {
                        let sh = sh.clone();
                        handles.push(scope.spawn(move || {
                            ring_worker(ctx, ji, job, i, &sh).map_err(|e| {
                                ctx.fail(format!("job {} worker {i}: {e:#}", job.name));
                                e
                            })
                        }));
                    }
                }
                Paradigm::Ps => {
                    let sh = Arc::new(PsShared {
                        addr: Mutex::new(None),
                        setup: Barrier::new(w + 1),
                        iter: Barrier::new(w),
                        pushed: Mutex::new(Vec::new()),
                        pushed_cv: Condvar::new(),
                    });
                    let sh2 = sh.clone();
                    handles.push(scope.spawn(move || {
                        ps_server(ctx, job, &sh2).map_err(|e| {
                            ctx.fail(format!("job {} PS: {e:#}", job.name));
                            e
                        })
                    }));
                    for i in 0..w {
                        let sh = sh.clone();
                        handles.push(scope.spawn(move || {
                            ps_worker(ctx, ji, job, i, &sh).map_err(|e| {
                                ctx.fail(format!("job {} worker {i}: {e:#}", job.name));
                                e
                            })
                        }));
                    }
                }
            }
        }
        let mut bg_handles = Vec::new();
        for bg in &spec.background {
            let (tx, rx) = std::sync::mpsc::channel();
            let fail = move |e: anyhow::Error, end: &str| {
                ctx.fail(format!("background flow {} ({end}): {e:#}", bg.name));
                e
            };
            bg_handles.push(scope.spawn(move || {
                bg_receiver(ctx, bg, tx)
                    .map_err(|e| fail(e, "receiver"))
                    .map(|_| None)
            }));
            bg_handles.push(scope.spawn(move || {
                bg_sender(ctx, bg, rx)
                    .map_err(|e| fail(e, "sender"))
                    .map(Some)
            }));
        }
        // Watch: progress, timeout.
        loop {
            if handles.iter().all(|h| h.is_finished()) {
                ctx.jobs_done.store(true, Ordering::SeqCst);
                if bg_handles.iter().all(|h| h.is_finished()) {
                    break;
                }
            }
            let done: Vec<u32> = ctx
                .progress
                .iter()
                .map(|a| a.load(Ordering::Relaxed))
                .collect();
            let el = ctx.t0.elapsed().as_secs_f64();
            progress(&done, el);
            if el > spec.timeout_s && !ctx.abort.load(Ordering::SeqCst) {
                ctx.fail(format!(
                    "run {} timed out after {:.0} s (iterations done per job: {done:?})",
                    spec.name, spec.timeout_s
                ));
            }
            thread::sleep(Duration::from_millis(200));
        }
        let done: Vec<u32> = ctx
            .progress
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .collect();
        progress(&done, ctx.t0.elapsed().as_secs_f64());
        stop_sampler.store(true, Ordering::SeqCst);
        let mut records = Vec::new();
        for h in handles {
            if let Ok(Ok(r)) = h.join() {
                records.extend(r);
            }
        }
        let mut background = Vec::new();
        for h in bg_handles {
            if let Ok(Ok(Some(r))) = h.join() {
                background.push(r);
            }
        }
        let samples = sampler.join().map_err(|_| anyhow!("sampler panicked"))?;
        let queue = match queue_sampler {
            Some(h) => h.join().map_err(|_| anyhow!("queue sampler panicked"))?,
            None => Vec::new(),
        };
        Ok((records, samples, queue, background))
    })?;
    if let Some(e) = ctx.error.lock().unwrap().take() {
        bail!("run {} (cc {}) failed: {e}", spec.name, spec.cc.label);
    }
    let flows = ctx
        .flows
        .lock()
        .unwrap()
        .drain(..)
        .map(|(f, _)| f)
        .collect();
    Ok(RunOutput {
        records,
        flows,
        samples,
        queue,
        background,
        wall_s: ctx.t0.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(
        name: &str,
        paradigm: Paradigm,
        w: usize,
        g: u64,
        iters: u32,
        compute_ms: f64,
    ) -> JobPlan {
        JobPlan {
            name: name.into(),
            model: "test".into(),
            paradigm,
            workers: (0..w).map(|i| format!("h{i}")).collect(),
            ps: (paradigm == Paradigm::Ps).then(|| "ps".into()),
            iterations: iters,
            start_offset_ms: 0.0,
            compute_ms,
            gradient_bytes: g,
            index: 0,
            jitter: crate::seeds::ComputeJitter::NONE,
        }
    }

    fn spec_of(jobs: Vec<JobPlan>, cc: &str) -> RunSpec {
        RunSpec {
            name: "t".into(),
            cc: CcVariant::parse(cc).unwrap(),
            jobs,
            sample_ms: 5.0,
            timeout_s: 60.0,
            progress: ProgressDir::Off,
            background: Vec::new(),
            before_burst: None,
            queue: None,
            seed: 1,
        }
    }

    fn run_jobs(jobs: Vec<JobPlan>, cc: &str) -> RunOutput {
        run_jobs_reporting(jobs, cc, ProgressDir::Off)
    }

    fn run_jobs_reporting(jobs: Vec<JobPlan>, cc: &str, progress: ProgressDir) -> RunOutput {
        let spec = RunSpec {
            progress,
            ..spec_of(jobs, cc)
        };
        run(&spec, &Net::Loopback, &mut |_, _| {}).unwrap()
    }

    #[test]
    fn workers_report_through_the_progress_interface() {
        // An "agent" polls the region directory while a ring job and a PS job run: every
        // process's region appears with its job, role and flows, and the bytes of an iteration
        // never exceed what the process sends per iteration.
        let dir =
            std::env::temp_dir().join(format!("trainemu-emu-progress-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let stop = AtomicBool::new(false);
        let seen = thread::scope(|scope| {
            let agent = scope.spawn(|| {
                let mut sc = mltcp_progress::Scanner::new(&dir);
                // (job, rank) -> (paradigm, role, flows, bytes per iteration, most iteration bytes, last iteration).
                type Seen =
                    std::collections::BTreeMap<(String, u32), (u32, u32, usize, u64, u64, u64)>;
                let mut seen: Seen = Default::default();
                while !stop.load(Ordering::SeqCst) {
                    let _ = sc.scan();
                    let (snaps, errs) = sc.poll();
                    assert!(errs.is_empty(), "{errs:?}");
                    for (_, s) in snaps {
                        let b = &s.body;
                        let e = seen.entry((b.job.job_id.clone(), b.job.rank)).or_default();
                        *e = (
                            b.job.paradigm,
                            b.job.role,
                            b.flows.len(),
                            b.job.bytes_per_iteration,
                            e.4.max(b.hot.iter_bytes),
                            e.5.max(b.hot.iteration),
                        );
                    }
                    thread::sleep(Duration::from_millis(2));
                }
                seen
            });
            run_jobs_reporting(
                vec![
                    plan("R", Paradigm::Ring, 3, 300_000, 4, 20.0),
                    plan("P", Paradigm::Ps, 2, 200_000, 4, 20.0),
                ],
                "cubic",
                ProgressDir::Dir(dir.clone()),
            );
            stop.store(true, Ordering::SeqCst);
            agent.join().unwrap()
        });
        for r in 0..3u32 {
            let (paradigm, role, flows, bpi, max_iter_bytes, _) = seen[&("t.R".to_string(), r)];
            assert_eq!(
                (paradigm, role, flows),
                (PParadigm::Ring as u32, Role::Worker as u32, 2),
                "ring rank {r}"
            );
            assert_eq!(bpi, ring_steps(300_000, 3, r as usize).iter().sum::<u64>());
            assert!(
                max_iter_bytes > 0 && max_iter_bytes <= bpi,
                "ring rank {r}: {max_iter_bytes} of {bpi}"
            );
        }
        for r in 0..2u32 {
            let (paradigm, role, flows, bpi, max_iter_bytes, _) = seen[&("t.P".to_string(), r)];
            assert_eq!(
                (paradigm, role, flows, bpi),
                (
                    PParadigm::ParameterServer as u32,
                    Role::Worker as u32,
                    1,
                    200_000
                )
            );
            assert!(max_iter_bytes > 0 && max_iter_bytes <= bpi);
        }
        let (_, role, flows, bpi, _, last_iter) = seen[&("t.P".to_string(), 2)];
        assert_eq!(
            (role, flows, bpi),
            (Role::ParameterServer as u32, 2, 400_000)
        );
        assert!(last_iter >= 1);
        // Every region is removed when its process (here: worker) ends.
        assert_eq!(std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn ring_plan_sums_to_2w_minus_1_gradients() {
        for (g, w) in [
            (1000u64, 2usize),
            (1001, 3),
            (12345, 4),
            (7, 7),
            (1 << 20, 8),
        ] {
            let per: Vec<u64> = (0..w).map(|i| ring_steps(g, w, i).iter().sum()).collect();
            assert_eq!(
                per.iter().sum::<u64>(),
                2 * (w as u64 - 1) * g,
                "g={g} w={w}"
            );
            let c = chunks(g, w);
            for (i, p) in per.iter().enumerate() {
                assert_eq!(ring_steps(g, w, i).len(), 2 * (w - 1));
                // Every chunk but (i+1) in reduce-scatter, every chunk but (i+2) in all-gather.
                assert_eq!(*p, 2 * g - c[(i + 1) % w] - c[(i + 2) % w]);
            }
        }
    }

    #[test]
    fn ring_job_over_loopback_accounts_every_byte() {
        let (g, w, n) = (300_001u64, 3usize, 4u32);
        let out = run_jobs(vec![plan("R", Paradigm::Ring, w, g, n, 5.0)], "reno");
        assert_eq!(out.records.len(), w * n as usize);
        for k in 0..n {
            let it: Vec<_> = out.records.iter().filter(|r| r.iter == k).collect();
            assert_eq!(
                it.iter().map(|r| r.bytes_sent).sum::<u64>(),
                2 * (w as u64 - 1) * g
            );
            assert_eq!(
                it.iter().map(|r| r.bytes_recv).sum::<u64>(),
                2 * (w as u64 - 1) * g
            );
        }
        assert_eq!(out.flows.len(), w);
        assert!(out.flows.iter().all(|f| f.cc == "reno"));
        // The sampler saw the bytes: the last bytes_acked of each flow is close to what it sent over
        // all iterations (tcpi_bytes_acked counts the SYN as 1 byte; the last ACK may be in flight).
        for f in &out.flows {
            let last = out
                .samples
                .iter()
                .filter(|s| s.flow == f.id)
                .map(|s| s.bytes_acked)
                .max()
                .unwrap_or(0);
            let sent: u64 = ring_steps(g, w, f.worker).iter().sum::<u64>() * n as u64;
            assert!(
                last <= sent + 1 && last >= sent / 2,
                "flow {} acked {last} of {sent}",
                f.id
            );
        }
    }

    #[test]
    fn ps_job_over_loopback_accounts_every_byte() {
        let (g, w, n) = (200_000u64, 3usize, 3u32);
        let out = run_jobs(vec![plan("P", Paradigm::Ps, w, g, n, 2.0)], "cubic");
        let workers: Vec<_> = out.records.iter().filter(|r| r.role == "worker").collect();
        let ps: Vec<_> = out.records.iter().filter(|r| r.role == "ps").collect();
        assert_eq!(workers.len(), w * n as usize);
        assert_eq!(ps.len(), n as usize);
        assert!(workers
            .iter()
            .all(|r| r.bytes_sent == g && r.bytes_recv == g));
        assert!(ps
            .iter()
            .all(|r| r.bytes_sent == w as u64 * g && r.bytes_recv == w as u64 * g));
        // The PS broadcasts only after all pushes: every worker's iteration ends after the PS
        // started that iteration's broadcast, i.e. after its first push byte.
        for r in &workers {
            let p = ps.iter().find(|p| p.iter == r.iter).unwrap();
            assert!(r.comm_end_us >= p.comm_start_us);
        }
        assert_eq!(out.flows.iter().filter(|f| f.kind == "push").count(), w);
        assert_eq!(out.flows.iter().filter(|f| f.kind == "pull").count(), w);
    }

    #[test]
    fn iteration_barrier_holds_across_workers_and_jobs_run_concurrently() {
        let out = run_jobs(
            vec![
                plan("A", Paradigm::Ring, 4, 100_000, 5, 10.0),
                plan("B", Paradigm::Ps, 2, 50_000, 5, 3.0),
            ],
            "cubic",
        );
        for job in ["A", "B"] {
            let recs: Vec<_> = out
                .records
                .iter()
                .filter(|r| r.job == job && r.role == "worker")
                .collect();
            for k in 1..5u32 {
                let prev_end = recs
                    .iter()
                    .filter(|r| r.iter == k - 1)
                    .map(|r| r.comm_end_us)
                    .max()
                    .unwrap();
                let next_start = recs
                    .iter()
                    .filter(|r| r.iter == k)
                    .map(|r| r.compute_start_us.unwrap())
                    .min()
                    .unwrap();
                assert!(
                    next_start >= prev_end,
                    "job {job} iteration {k} started before the barrier"
                );
            }
            for r in &recs {
                let (cs, ce) = (r.compute_start_us.unwrap(), r.compute_end_us.unwrap());
                assert!(ce >= cs && r.comm_end_us >= r.comm_start_us);
            }
        }
    }

    #[test]
    fn start_offsets_count_from_when_all_workers_are_connected() {
        let mut b = plan("B", Paradigm::Ring, 2, 10_000, 2, 1.0);
        b.start_offset_ms = 80.0;
        let out = run_jobs(
            vec![plan("A", Paradigm::Ring, 2, 10_000, 2, 1.0), b],
            "cubic",
        );
        let first = |j: &str| {
            out.records
                .iter()
                .filter(|r| r.job == j && r.iter == 0)
                .map(|r| r.compute_start_us.unwrap())
                .min()
                .unwrap()
        };
        let d = first("B") as i64 - first("A") as i64;
        assert!(
            (75_000..200_000).contains(&d),
            "B started {d} µs after A, want ~80 ms"
        );
    }

    #[test]
    fn compute_phases_follow_the_seeded_draws() {
        let j = crate::seeds::ComputeJitter {
            dist: crate::seeds::JitterDist::Normal,
            cv: 0.3,
            per: crate::seeds::JitterPer::Worker,
        };
        let mut a = plan("A", Paradigm::Ring, 2, 10_000, 6, 30.0);
        a.jitter = j;
        a.index = 3;
        let spec = RunSpec {
            seed: 7,
            ..spec_of(vec![a], "cubic")
        };
        let out = run(&spec, &Net::Loopback, &mut |_, _| {}).unwrap();
        for w in 0..2 {
            let mut d = ComputeDraws::new(7, 3, w, 30.0, &j);
            let mut recs: Vec<&IterRecord> = out
                .records
                .iter()
                .filter(|r| r.role == "worker" && r.worker == w)
                .collect();
            recs.sort_by_key(|r| r.iter);
            assert_eq!(recs.len(), 6);
            for r in recs {
                let want = d.next_ms();
                let got = (r.compute_end_us.unwrap() - r.compute_start_us.unwrap()) as f64 / 1000.0;
                // Sleeps end no earlier than asked, and late by little on an idle machine.
                assert!(
                    got >= want - 0.01 && got < want + 20.0,
                    "worker {w} iteration {}: {got} ms for a draw of {want} ms",
                    r.iter
                );
            }
        }
    }

    #[test]
    fn barrier_releases_all_and_is_reusable() {
        let b = Arc::new(Barrier::new(3));
        let abort = Arc::new(AtomicBool::new(false));
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let (b, a) = (b.clone(), abort.clone());
                thread::spawn(move || (0..50).try_for_each(|_| b.wait(&a)))
            })
            .collect();
        for h in hs {
            h.join().unwrap().unwrap();
        }
        // A waiter alone gives up on abort.
        let b2 = Barrier::new(2);
        abort.store(true, Ordering::SeqCst);
        assert!(b2.wait(&abort).is_err());
    }

    fn bg(name: &str, start_ms: f64, stop_ms: Option<f64>) -> BgPlan {
        BgPlan {
            name: name.into(),
            from: "h0".into(),
            to: "h1".into(),
            cc: "reno".into(),
            start_ms,
            stop_ms,
        }
    }

    #[test]
    fn background_flows_run_beside_the_jobs_until_they_finish() {
        let spec = RunSpec {
            background: vec![bg("bg", 30.0, None)],
            before_burst: Some(Duration::from_millis(2)),
            ..spec_of(
                vec![plan("A", Paradigm::Ring, 2, 100_000, 4, 40.0)],
                "cubic",
            )
        };
        let out = run(&spec, &Net::Loopback, &mut |_, _| {}).unwrap();
        assert_eq!(out.background.len(), 1);
        let b = &out.background[0];
        let f = &out.flows[b.flow];
        assert_eq!(
            (
                f.kind.as_str(),
                f.job.as_str(),
                f.cc.as_str(),
                b.cc.as_str()
            ),
            ("background", "bg", "reno", "reno")
        );
        assert!(b.bytes_sent > 0);
        // reno does not ask for ECN (net.ipv4.tcp_ecn = 2: only accepted).
        assert!(out.flows.iter().all(|f| !f.ecn));
        // Started ~30 ms after the workers' start, stopped when the job was done.
        let first = out
            .records
            .iter()
            .map(|r| r.compute_start_us.unwrap())
            .min()
            .unwrap();
        let last = out.records.iter().map(|r| r.comm_end_us).max().unwrap();
        assert!(
            b.start_us >= first + 25_000,
            "start {} first {first}",
            b.start_us
        );
        assert!(
            b.stop_us >= last && b.stop_us < last + 1_000_000,
            "stop {} last {last}",
            b.stop_us
        );
        assert!(out
            .samples
            .iter()
            .any(|s| s.flow == b.flow && s.bytes_acked > 0));
        // No progress region: every worker made the call, which returned at once.
        for r in &out.records {
            assert_eq!(r.burst_outcome.as_deref(), Some("no_region"));
            assert!(
                r.burst_wait_us.unwrap() < 2_000 && r.comm_start_us >= r.compute_end_us.unwrap()
            );
        }
    }

    #[test]
    fn a_background_only_run_stops_at_stop_ms() {
        let spec = RunSpec {
            background: vec![bg("b1", 0.0, Some(300.0)), bg("b2", 100.0, Some(200.0))],
            ..spec_of(vec![], "cubic")
        };
        let out = run(&spec, &Net::Loopback, &mut |_, _| {}).unwrap();
        assert!(out.records.is_empty());
        let mut bs = out.background.clone();
        bs.sort_by(|a, b| a.name.cmp(&b.name));
        let (b1, b2) = (&bs[0], &bs[1]);
        let ms = |d: u64| d as f64 / 1000.0;
        assert!(
            (ms(b1.stop_us - b1.start_us) - 300.0).abs() < 60.0,
            "{b1:?}"
        );
        assert!(
            (ms(b2.stop_us - b2.start_us) - 100.0).abs() < 60.0,
            "{b2:?}"
        );
        assert!(
            (ms(b2.start_us) - ms(b1.start_us) - 100.0).abs() < 60.0,
            "{b1:?} {b2:?}"
        );
        assert!(b1.bytes_sent > 0 && b2.bytes_sent > 0);
    }

    #[test]
    fn unknown_congestion_control_fails_the_run_with_its_name() {
        let spec = RunSpec {
            cc: CcVariant {
                label: "nosuchcc".into(),
                cc: "nosuchcc".into(),
                params: vec![],
                agent: None,
                pcn: Default::default(),
                sched: Default::default(),
            },
            ..spec_of(vec![plan("A", Paradigm::Ring, 2, 1000, 1, 1.0)], "cubic")
        };
        let e = format!(
            "{:#}",
            run(&spec, &Net::Loopback, &mut |_, _| {}).unwrap_err()
        );
        assert!(e.contains("nosuchcc"), "{e}");
    }
}
