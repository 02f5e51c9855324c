// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Test helpers: temporary directories, config files, and a user-space CCP datapath (the
//! `ccp-datapath` core, as in `tcp_mltcp.ko`) talking to an agent over portus's unix IPC.
#![allow(dead_code)]

use ccp_agent::flows::FlowKey;
use ccp_datapath::{Datapath, DatapathOps, FlowInfo, Primitives, SendError};
use mltcp_progress::{FlowKind, FlowRecord, Paradigm, Role, Writer, WriterOptions};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let p = std::env::temp_dir().join(format!("ccp-agent-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The repository's datapath program file.
pub fn program_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datapath-programs/mlcc-slot.ccp")
}

struct Host {
    sock: UnixDatagram,
    agent: PathBuf,
    start: Instant,
    current: u32,
    rates: HashMap<u32, u64>,
    cwnds: HashMap<u32, u64>,
}

impl DatapathOps for Host {
    fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }
    fn send_msg(&mut self, msg: &[u8]) -> Result<(), SendError> {
        self.sock
            .send_to(msg, &self.agent)
            .map(|_| ())
            .map_err(|_| SendError)
    }
    fn set_cwnd(&mut self, bytes: u64) {
        self.cwnds.insert(self.current, bytes);
    }
    fn set_rate_abs(&mut self, bytes_per_sec: u64) {
        self.rates.insert(self.current, bytes_per_sec);
    }
}

/// One emulated flow of a [`MockDatapath`].
#[derive(Clone, Debug)]
pub struct MockFlow {
    pub key: FlowKey,
    /// Bytes/s the flow sends when the agent set no rate.
    pub line_rate: u64,
}

/// What a [`MockDatapath`] saw, per flow (index in the flow list).
#[derive(Clone, Debug, Default)]
pub struct MockStats {
    /// Rates set by the agent, bytes/s, in order (changes only).
    pub rates: Vec<Vec<u64>>,
    /// Whether the flow got a program.
    pub has_program: Vec<bool>,
    /// Bytes "acknowledged" so far.
    pub acked: Vec<u64>,
    /// Datapath errors counted by the core, but for failed sends (the agent's unix datagram
    /// queue, 10 messages by default, may be full while its thread waits on an RPC).
    pub errors: u64,
    /// Reports and CREATEs that could not be sent.
    pub send_failed: u64,
    /// The core's counters, when there were errors.
    pub error_detail: String,
}

/// A user-space datapath with a few flows, running in its own thread: READY, CREATE for each
/// flow once the programs are installed, then an ACK clock every millisecond acknowledging
/// `rate / 1000` bytes per flow (the agent's rate, or the line rate), calling `on_acked(i, n)`.
pub struct MockDatapath {
    pub stats: Arc<Mutex<MockStats>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MockDatapath {
    pub fn start(
        agent_name: &str,
        flows: Vec<MockFlow>,
        mut on_acked: impl FnMut(usize, u64) + Send + 'static,
    ) -> Self {
        let agent = PathBuf::from(format!("/tmp/ccp/{agent_name}"));
        let me = PathBuf::from(format!("/tmp/ccp/{agent_name}-dp"));
        let _ = std::fs::remove_file(&me);
        let sock = UnixDatagram::bind(&me).unwrap();
        sock.set_nonblocking(true).unwrap();
        let stats = Arc::new(Mutex::new(MockStats {
            rates: vec![vec![]; flows.len()],
            has_program: vec![false; flows.len()],
            acked: vec![0; flows.len()],
            errors: 0,
            send_failed: 0,
            error_detail: String::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (stats.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut host = Host {
                sock,
                agent,
                start: Instant::now(),
                current: 0,
                rates: HashMap::new(),
                cwnds: HashMap::new(),
            };
            let mut dp: Box<Datapath<16, 8>> = Box::new(Datapath::new());
            dp.init(host.now_us());
            // The agent may still be binding: retry READY.
            let t0 = Instant::now();
            while dp.send_ready(1, &mut host).is_err() && t0.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let mut sids: Vec<Option<u32>> = vec![None; flows.len()];
            let mut buf = [0u8; 4096];
            let mut carry = vec![0u64; flows.len()];
            let mut next = Instant::now();
            while !sp.load(Ordering::SeqCst) {
                while let Ok(n) = host.sock.recv(&mut buf) {
                    let _ = dp.handle_msg(&buf[..n]);
                }
                if !dp.programs().is_empty() {
                    for (i, f) in flows.iter().enumerate() {
                        if sids[i].is_none() {
                            let (a, b, c, d) = f.key.to_ccp();
                            let info = FlowInfo {
                                init_cwnd: 14_480,
                                mss: 1448,
                                src_ip: a,
                                src_port: b,
                                dst_ip: c,
                                dst_port: d,
                                ..Default::default()
                            }
                            .with_alg_name(b"mltcp")
                            .unwrap();
                            sids[i] = dp.flow_start(&info, &mut host).ok();
                        }
                    }
                }
                for (i, f) in flows.iter().enumerate() {
                    let Some(sid) = sids[i] else { continue };
                    host.current = sid;
                    let rate = host
                        .rates
                        .get(&sid)
                        .copied()
                        .filter(|r| *r > 0)
                        .unwrap_or(f.line_rate)
                        .min(f.line_rate);
                    carry[i] += rate;
                    let bytes = carry[i] / 1000;
                    carry[i] %= 1000;
                    let prims = Primitives {
                        bytes_acked: bytes,
                        packets_acked: bytes / 1448,
                        // Always sending: the pipe never empties (a flow whose pipe empties
                        // reports at that ACK, see datapath-programs/mlcc-slot.ccp).
                        packets_in_flight: 1 + bytes / 1448,
                        bytes_in_flight: 1448 + bytes,
                        rtt_sample_us: 1000,
                        rate_incoming: rate,
                        rate_outgoing: rate,
                        snd_cwnd: host.cwnds.get(&sid).copied().unwrap_or(14_480),
                        snd_rate: host.rates.get(&sid).copied().unwrap_or(0),
                        ..Default::default()
                    };
                    let _ = dp.flow_invoke(sid, &prims, &mut host);
                    let mut s = st.lock().unwrap();
                    s.has_program[i] = dp.flow_has_program(sid);
                    if let Some(r) = host.rates.get(&sid) {
                        if s.rates[i].last() != Some(r) {
                            s.rates[i].push(*r);
                        }
                    }
                    s.acked[i] += bytes;
                    s.send_failed = dp.stats().count(ccp_datapath::Error::SendFailed);
                    s.errors = dp.stats().total_errors() - s.send_failed;
                    if s.errors > 0 && s.error_detail.len() < 2000 {
                        let detail = format!("{:?}; ", dp.stats());
                        s.error_detail.push_str(&detail);
                    }
                    drop(s);
                    if bytes > 0 {
                        on_acked(i, bytes);
                    }
                }
                next += Duration::from_millis(1);
                if let Some(d) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(d);
                } else {
                    next = Instant::now();
                }
            }
            for sid in sids.into_iter().flatten() {
                let _ = dp.flow_end(sid, &mut host);
            }
            let _ = std::fs::remove_file(&me);
        });
        MockDatapath {
            stats,
            stop,
            thread: Some(thread),
        }
    }

    pub fn snapshot(&self) -> MockStats {
        self.stats.lock().unwrap().clone()
    }
}

impl Drop for MockDatapath {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A switch daemon served on its own thread and runtime from an already bound listener.
pub struct SwitchDaemon {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SwitchDaemon {
    /// Serves the topology's first switch on `l` with slots of `slot_us` and horizon `horizon`;
    /// its `tc` commands go to `runner` (`None`: the system's).
    pub fn start(
        topology: ccp_agent::config::Topology,
        l: std::net::TcpListener,
        (slot_us, horizon): (u64, usize),
        runner: Option<Arc<dyn ccp_agent::switch::ThresholdApplier>>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(true));
        let flag = stop.clone();
        l.set_nonblocking(true).unwrap();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let sw = topology.switches[0].clone();
            let clock = mlcc_sched::SlotClock::new(slot_us, horizon).unwrap();
            rt.block_on(async move {
                let l = tokio::net::TcpListener::from_std(l).unwrap();
                let shutdown = async move {
                    while flag.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                };
                match runner {
                    Some(r) => {
                        ccp_agent::switch::serve_with(
                            &topology,
                            &sw,
                            clock,
                            Some(l),
                            None,
                            r,
                            shutdown,
                        )
                        .await
                    }
                    None => {
                        ccp_agent::switch::serve(&topology, &sw, clock, Some(l), None, shutdown)
                            .await
                    }
                }
                .unwrap();
            });
        });
        SwitchDaemon {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the daemon (its graceful shutdown waits for the clients' connections to close:
    /// drop the clients' runtimes first).
    pub fn stop(mut self) {
        self.stop.store(false, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

/// An agent run by `run_agent` on its own thread with unix IPC.
pub struct AgentProc {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
    pub shared: Arc<ccp_agent::shared::Shared>,
}

impl AgentProc {
    /// Starts the agent of `cfg` serving gRPC on `l`; returns once its shared state exists.
    pub fn start(cfg: ccp_agent::config::AgentConfig, l: std::net::TcpListener) -> Self {
        let stop = Arc::new(AtomicBool::new(true));
        let (tx, rx) = std::sync::mpsc::channel();
        let opts = ccp_agent::run::RunOptions {
            ipc: ccp_agent::run::IpcKind::Unix,
            listener: Some(l),
            stop: stop.clone(),
            shared_out: Some(tx),
        };
        let thread = Some(std::thread::spawn(move || {
            ccp_agent::run::run_agent(cfg, opts)
        }));
        let shared = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("agent started");
        AgentProc {
            stop,
            thread,
            shared,
        }
    }

    /// Clears the stop flag and waits for the agent to return; panics on its error.
    pub fn stop(mut self) {
        self.stop.store(false, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap().unwrap();
        }
    }
}

/// Waits (at most 10 s) until the agents' unix sockets `/tmp/ccp/<name>` exist.
pub fn wait_for_sockets(names: &[String]) {
    let t0 = Instant::now();
    while names
        .iter()
        .any(|n| !Path::new(&format!("/tmp/ccp/{n}")).exists())
        && t0.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Writes `<host>.toml` in `tmp`: an agent of `host` of the topology `topo`, the repository's
/// program, regions under `progress`, unix socket `name`, and the `extra` lines.
pub fn agent_toml(
    tmp: &TempDir,
    host: &str,
    name: &str,
    topo: &Path,
    progress: &Path,
    extra: &str,
) -> PathBuf {
    tmp.write(
        &format!("{host}.toml"),
        &format!(
            "topology = {:?}\nhosts = [{host:?}]\nprogram = {:?}\nprogress_dir = {:?}\nunix_name = {name:?}\n{extra}",
            topo.display().to_string(),
            program_file().display().to_string(),
            progress.display().to_string()
        ),
    )
}

/// A temporary directory with a `progress` directory for the regions in it.
pub fn with_progress_dir(tag: &str) -> (TempDir, PathBuf) {
    let tmp = TempDir::new(tag);
    let progress = tmp.0.join("progress");
    std::fs::create_dir_all(&progress).unwrap();
    (tmp, progress)
}

/// `N` listeners on loopback ports of the system's choice, and their addresses.
pub fn listeners<const N: usize>() -> ([TcpListener; N], [SocketAddr; N]) {
    let ls: [TcpListener; N] = std::array::from_fn(|_| TcpListener::bind("127.0.0.1:0").unwrap());
    let addrs = std::array::from_fn(|i| ls[i].local_addr().unwrap());
    (ls, addrs)
}

/// Bytes per iteration and flow of a [`Rank`].
pub const ITER_BYTES: u64 = 600_000;

/// A flow key from octets and ports.
pub fn key(src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16) -> FlowKey {
    FlowKey {
        src: Ipv4Addr::from(src),
        src_port: sp,
        dst: Ipv4Addr::from(dst),
        dst_port: dp,
    }
}

/// The local (`local`) or remote socket address of a flow.
pub fn sa(k: &FlowKey, local: bool) -> SocketAddr {
    if local {
        SocketAddr::from((k.src, k.src_port))
    } else {
        SocketAddr::from((k.dst, k.dst_port))
    }
}

/// A rank's progress writer driven by the bytes its flow gets acknowledged: an iteration of
/// `ITER_BYTES`, then 100 ms of "compute", then the next.
pub struct Rank {
    /// The region.
    pub w: Writer,
    /// The current iteration.
    pub it: u64,
    in_iter: u64,
    iter_bytes: u64,
    idle_until: Option<Instant>,
}

impl Rank {
    /// A one-flow process: a ring rank (`peer` is both predecessor and successor) or, with
    /// `peer` `None`, a job without paradigm.
    pub fn new(
        dir: &std::path::Path,
        job: &str,
        rank: u32,
        flow: &FlowKey,
        peer: Option<u32>,
    ) -> Self {
        match peer {
            Some(p) => Self::with_flows(
                dir,
                job,
                rank,
                (Paradigm::Ring, Role::Worker),
                &[(*flow, FlowKind::RingSend, p)],
            ),
            None => Self::with_flows(
                dir,
                job,
                rank,
                (Paradigm::Unknown, Role::Unknown),
                &[(*flow, FlowKind::Unspecified, mltcp_progress::NO_RANK)],
            ),
        }
    }

    /// A process sending `ITER_BYTES` per iteration on each of its `flows` (key, kind, peer).
    pub fn with_flows(
        dir: &std::path::Path,
        job: &str,
        rank: u32,
        (paradigm, role): (Paradigm, Role),
        flows: &[(FlowKey, FlowKind, u32)],
    ) -> Self {
        let opts = WriterOptions {
            dir: Some(dir.to_path_buf()),
            max_flows: 0,
        };
        let mut w = Writer::create(job, rank, &opts).unwrap();
        let iter_bytes = ITER_BYTES * flows.len() as u64;
        w.set_bytes_per_iteration(iter_bytes);
        if paradigm != Paradigm::Unknown {
            w.set_job(paradigm, role, 3);
        }
        if paradigm == Paradigm::Ring {
            w.set_ring(flows[0].2, flows[0].2);
        }
        for (flow, kind, peer) in flows {
            w.add_flow(FlowRecord::new(
                sa(flow, true),
                sa(flow, false),
                *kind,
                *peer,
            ))
            .unwrap();
        }
        w.begin_iteration(1);
        Rank {
            w,
            it: 1,
            in_iter: 0,
            iter_bytes,
            idle_until: None,
        }
    }

    /// `n` more bytes of the process's flows acknowledged.
    pub fn acked(&mut self, n: u64) {
        if let Some(t) = self.idle_until {
            if Instant::now() < t {
                return;
            }
            self.idle_until = None;
            self.it += 1;
            self.in_iter = 0;
            self.w.begin_iteration(self.it);
        }
        let n = n.min(self.iter_bytes - self.in_iter);
        self.w.add_bytes(n);
        self.in_iter += n;
        if self.in_iter >= self.iter_bytes {
            self.idle_until = Some(Instant::now() + Duration::from_millis(100));
        }
    }
}

/// Test logging at `filter` (the first test of the process to call it sets it).
pub fn init_tracing(filter: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_test_writer()
        .try_init();
}

/// A current-thread runtime for the test's own gRPC clients.
pub fn client_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}
