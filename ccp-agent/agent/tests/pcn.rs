// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! PCN end to end without a kernel: an agent and a switch daemon over loopback gRPC, and a
//! progress writer calling `before_burst` ("Proactive Congestion Avoidance for Distributed Deep
//! Learning", Sec. 3.1-3.2).
//!
//! Topology: h1 (the agent's) and h2, NIC links 1 and 2, a switch s1 owning link 10 (h1 → h2,
//! 40 Mbit/s) with an fq_codel ECN queue; the switch runs its `tc` commands through a recording
//! runner. Checked: the agent attaches to the region of a process on h1 (and not to one on h2),
//! grants the writer's burst well within its timeout, the switch got the PcnStart (link 10's
//! threshold lowered to the agent's 15 000 bytes, the `tc` command recorded), and the start,
//! never followed by a burst (no datapath here), expires after the switch's timeout and the
//! initial threshold comes back. With a datapath carrying the flow, the burst's bytes, reported
//! by the agent's next `UpdateSchedule`, restore the threshold long before the timeout. In
//! NIC-only mode the burst is granted at once, no start sent. With `schedule = false` (PCN only)
//! the flow gets no datapath program and keeps its native congestion control, and the start ends
//! as soon as the process hands the burst's first bytes to the network.

mod common;

use ccp_agent::config::{AgentConfig, Topology};
use ccp_agent::switch::RecordingRunner;
use common::{
    agent_toml, listeners, with_progress_dir, AgentProc, MockDatapath, MockFlow, SwitchDaemon,
};
use mltcp_progress::{BurstOutcome, FlowKind, FlowRecord, Paradigm, Role, Writer, WriterOptions};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn topo_text(agent: SocketAddr, switch: SocketAddr, timeout_ms: u64) -> String {
    format!(
        r#"slot_ms = 20
horizon = 5
[pcn]
timeout_ms = {timeout_ms}
[[link]]
id = 1
capacity_mbps = 100
[[link]]
id = 2
capacity_mbps = 100
[[link]]
id = 10
capacity_mbps = 40
[link.ecn]
dev = "s1-eth2"
qdisc = "fq_codel"
[[host]]
name = "h1"
addrs = ["10.2.0.1"]
nic = 1
agent = "{agent}"
[[host]]
name = "h2"
addrs = ["10.2.0.2"]
nic = 2
agent = "127.0.0.1:1"
[[switch]]
name = "s1"
listen = "{switch}"
links = [10]
[[route]]
from = "h1"
to = "h2"
links = [1, 10]
"#
    )
}

/// A ring rank's region with one flow `src:sp → dst:dp`.
fn writer(dir: &std::path::Path, job: &str, rank: u32, src: &str, dst: &str) -> Writer {
    let mut w = Writer::create(
        job,
        rank,
        &WriterOptions {
            dir: Some(dir.to_path_buf()),
            max_flows: 0,
        },
    )
    .unwrap();
    w.set_job(Paradigm::Ring, Role::Worker, 2);
    w.set_ring(1 - rank, 1 - rank);
    w.set_bytes_per_iteration(1_000_000);
    w.add_flow(FlowRecord::new(
        src.parse().unwrap(),
        dst.parse().unwrap(),
        FlowKind::RingSend,
        1 - rank,
    ))
    .unwrap();
    w.begin_iteration(1);
    w
}

fn wait_attached(w: &Writer, within: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if w.agent_view().agent_attached() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// The switch at `addr`'s whole feedback, and that of its link `link`.
fn link_status(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    link: u32,
) -> (
    ccp_agent::proto::FeedbackReply,
    ccp_agent::proto::LinkFeedback,
) {
    let r = rt.block_on(ccp_agent::status::switch_status(addr)).unwrap();
    let l = r.links.iter().find(|l| l.link == link).unwrap().clone();
    (r, l)
}

/// The switch's `tc` lines once the initial threshold (12 ms) has followed the PCN one (3 ms),
/// or after 3 s: the switch makes its changes after the RPC that decided them, so a test that
/// saw the restored threshold in the bookkeeping waits here for the change itself.
fn restored_lines(runner: &RecordingRunner) -> Vec<String> {
    runner.lines_when(
        |l| {
            l.iter()
                .skip_while(|c| !c.ends_with("ce_threshold 3000us"))
                .any(|c| c.ends_with("ce_threshold 12000us"))
        },
        Duration::from_secs(3),
    )
}

#[test]
fn before_burst_is_granted_and_the_switch_lowers_then_restores_the_threshold() {
    common::init_tracing("ccp_agent=debug");
    let (tmp, progress) = with_progress_dir("pcn");
    let ([la, ls], [aa, as_]) = listeners();
    let topo = tmp.write("topo.toml", &topo_text(aa, as_, 300));
    let topology = Topology::load(&topo).unwrap();
    let name = format!("pcn-a-{}", std::process::id());
    let extra = "rpc_timeout_ms = 15\n[pcn]\nthreshold_bytes = 15000\npoll_us = 200\n";
    let cfg = agent_toml(&tmp, "h1", &name, &topo, &progress, extra);
    let cfg = AgentConfig::load(&cfg, None, None).unwrap();

    // The switch, its tc commands recorded.
    let runner = Arc::new(RecordingRunner::default());
    let switch = SwitchDaemon::start(topology, ls, (20_000, 5), Some(runner.clone()));
    let agent = AgentProc::start(cfg, la);

    let mut w0 = writer(&progress, "pcnjob", 0, "10.2.0.1:41000", "10.2.0.2:5000");
    let w1 = writer(&progress, "pcnjob", 1, "10.2.0.2:41001", "10.2.0.1:5001");
    assert!(
        wait_attached(&w0, Duration::from_secs(10)),
        "the agent attaches to the region of its host's process"
    );
    let rt = common::client_rt();
    let link10 = |rt: &tokio::runtime::Runtime| link_status(rt, as_, 10);
    let (_, l) = link10(&rt);
    assert_eq!((l.ecn_threshold_bytes, l.pcn_outstanding), (60_000, 0));

    let t0 = Instant::now();
    let outcome = w0.before_burst(Duration::from_secs(3));
    let waited = t0.elapsed();
    assert_eq!(outcome, BurstOutcome::Granted);
    assert!(waited < Duration::from_secs(1), "granted after {waited:?}");
    // The switch received the start (granted on its ack or after the 1 ms default RTT: the ack
    // may trail the grant by a little).
    let t1 = Instant::now();
    let (mut r, mut l) = link10(&rt);
    while r.pcn_starts == 0 && t1.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
        (r, l) = link10(&rt);
    }
    assert_eq!(r.pcn_starts, 1, "{r:?}");
    // The switch makes its threshold changes after the RPC that decided them: wait for them.
    let lines = runner.lines_when(
        |l| l.iter().any(|c| c.ends_with("ce_threshold 3000us")),
        Duration::from_secs(2),
    );
    println!("granted after {waited:?}; switch: {r:?}; tc: {lines:?}");
    if r.pcn_expired == 0 {
        assert_eq!((l.ecn_threshold_bytes, l.pcn_outstanding), (15_000, 1));
    }
    assert_eq!(
        lines[0], "tc qdisc change dev s1-eth2 root fq_codel ce_threshold 12000us",
        "initial threshold at start-up: 60 000 bytes at 40 Mbit/s"
    );
    assert!(
        lines.iter().any(|c| c.ends_with("ce_threshold 3000us")),
        "the PCN threshold applied: {lines:?}"
    );
    // The region of the process on h2 is not this agent's.
    assert!(!w1.agent_view().agent_attached());

    // No burst follows (no datapath): the start expires after 300 ms, the threshold returns.
    let t2 = Instant::now();
    loop {
        let (r, l) = link10(&rt);
        if r.pcn_expired == 1 {
            assert_eq!((l.ecn_threshold_bytes, l.pcn_outstanding), (60_000, 0));
            break;
        }
        assert!(
            t2.elapsed() < Duration::from_secs(3),
            "start not expired: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(restored_lines(&runner)
        .last()
        .unwrap()
        .ends_with("ce_threshold 12000us"));
    let st = rt.block_on(ccp_agent::status::agent_status(aa)).unwrap();
    assert_eq!((st.bursts_granted, st.pcn_starts), (1, 1), "{st:?}");
    assert_eq!(agent.shared.status().bursts_granted, 1);

    // A second burst, then the agent stops: writers stop waiting for it.
    assert_eq!(
        w0.before_burst(Duration::from_secs(3)),
        BurstOutcome::Granted
    );
    agent.stop();
    assert!(!w0.agent_view().agent_attached(), "detached at shutdown");
    assert_eq!(
        w0.before_burst(Duration::from_secs(3)),
        BurstOutcome::NoAgent
    );
    // The agent ended its start at shutdown (or it expired): the threshold is back.
    let t3 = Instant::now();
    while link10(&rt).1.ecn_threshold_bytes != 60_000 {
        assert!(
            t3.elapsed() < Duration::from_secs(2),
            "threshold not restored"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The client runtime goes first: its idle connections would hold the switch's graceful
    // shutdown.
    drop(rt);
    switch.stop();
}

#[test]
fn nic_only_agent_grants_at_once() {
    let (tmp, progress) = with_progress_dir("pcn-nic");
    let la = TcpListener::bind("127.0.0.1:0").unwrap();
    let aa = la.local_addr().unwrap();
    // A switch address nobody serves: NIC-only mode must not use it.
    let topo = tmp.write(
        "topo.toml",
        &topo_text(aa, "127.0.0.1:9".parse().unwrap(), 300),
    );
    let name = format!("pcn-nic-{}", std::process::id());
    let cfg = agent_toml(&tmp, "h1", &name, &topo, &progress, "nic_only = true\n");
    let cfg = AgentConfig::load(&cfg, None, None).unwrap();
    let agent = AgentProc::start(cfg, la);
    let mut w = writer(&progress, "nicjob", 0, "10.2.0.1:41000", "10.2.0.2:5000");
    assert!(wait_attached(&w, Duration::from_secs(10)));
    let t0 = Instant::now();
    assert_eq!(
        w.before_burst(Duration::from_secs(3)),
        BurstOutcome::Granted
    );
    // Granted, not timed out: no switch was asked (its address is served by nobody, which
    // would cost the RPC deadline). The bound is loose because the agent polls the region
    // every 500 us on a host that may be busy running the other tests; the 3 s timeout is
    // what "not at once" would cost.
    assert!(
        t0.elapsed() < Duration::from_millis(2000),
        "{:?}",
        t0.elapsed()
    );
    let st = agent.shared.status();
    assert_eq!((st.bursts_granted, st.pcn_starts), (1, 0));
    agent.stop();
}

/// An agent for h1 and the switch s1 (its threshold changes recorded), a writer with one flow
/// h1 → h2 (job `job`, rank 0) and a mock datapath carrying that flow; `extra` is added to the
/// agent's config. The start timeout is far above the tests' waits: only the burst restores the
/// threshold.
struct OneFlow {
    _tmp: common::TempDir,
    switch: SwitchDaemon,
    switch_addr: SocketAddr,
    agent: AgentProc,
    agent_addr: SocketAddr,
    runner: Arc<RecordingRunner>,
    w: Writer,
    dp: MockDatapath,
}

impl OneFlow {
    fn start(tag: &str, job: &str, extra: &str) -> Self {
        let (tmp, progress) = with_progress_dir(tag);
        let ([la, ls], [aa, as_]) = listeners();
        let topo = tmp.write("topo.toml", &topo_text(aa, as_, 60_000));
        let topology = Topology::load(&topo).unwrap();
        let name = format!("{tag}-{}", std::process::id());
        let cfg = agent_toml(&tmp, "h1", &name, &topo, &progress, extra);
        let cfg = AgentConfig::load(&cfg, None, None).unwrap();
        let runner = Arc::new(RecordingRunner::default());
        let switch = SwitchDaemon::start(topology, ls, (20_000, 5), Some(runner.clone()));
        let agent = AgentProc::start(cfg, la);
        common::wait_for_sockets(std::slice::from_ref(&name));
        let w = writer(&progress, job, 0, "10.2.0.1:41000", "10.2.0.2:5000");
        let key = ccp_agent::flows::FlowKey {
            src: "10.2.0.1".parse().unwrap(),
            src_port: 41000,
            dst: "10.2.0.2".parse().unwrap(),
            dst_port: 5000,
        };
        let dp = MockDatapath::start(
            &name,
            vec![MockFlow {
                key,
                line_rate: 12_500_000,
            }],
            |_, _| {},
        );
        assert!(wait_attached(&w, Duration::from_secs(10)));
        OneFlow {
            _tmp: tmp,
            switch,
            switch_addr: as_,
            agent,
            agent_addr: aa,
            runner,
            w,
            dp,
        }
    }

    fn stop(self, rt: tokio::runtime::Runtime) {
        drop(self.dp);
        self.agent.stop();
        // The client runtime goes first: its idle connections would hold the switch's graceful
        // shutdown.
        drop(rt);
        self.switch.stop();
    }
}

#[test]
fn the_bursts_bytes_restore_the_threshold() {
    let mut f = OneFlow::start("pcn-arr", "arrjob", "rpc_timeout_ms = 15\n");
    let rt = common::client_rt();
    let as_ = f.switch_addr;
    let link10 = |rt: &tokio::runtime::Runtime| link_status(rt, as_, 10);
    // Wait for the flow to be planned (its schedule in the switch's table).
    let t0 = Instant::now();
    while link10(&rt).0.flows == 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "flow never planned");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        f.w.before_burst(Duration::from_secs(3)),
        BurstOutcome::Granted
    );
    let t1 = Instant::now();
    loop {
        let (r, l) = link10(&rt);
        if r.pcn_starts == 1 && l.ecn_threshold_bytes == 60_000 {
            assert_eq!((r.pcn_expired, l.pcn_outstanding), (0, 0), "{r:?}");
            break;
        }
        assert!(
            t1.elapsed() < Duration::from_secs(3),
            "the burst did not restore the threshold: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let lines = restored_lines(&f.runner);
    assert!(
        lines.iter().any(|c| c.ends_with("ce_threshold 3000us")),
        "{lines:?}"
    );
    assert!(
        lines.last().unwrap().ends_with("ce_threshold 12000us"),
        "{lines:?}"
    );
    println!("restored after {:?}; tc: {lines:?}", t1.elapsed());
    f.stop(rt);
}

#[test]
fn pcn_only_agent_leaves_flows_native_and_ends_the_start_when_the_burst_leaves() {
    let extra = "schedule = false\nrpc_timeout_ms = 15\n[pcn]\npoll_us = 200\n";
    let mut f = OneFlow::start("pcn-only", "onlyjob", extra);
    let rt = common::client_rt();
    let as_ = f.switch_addr;
    let link10 = |rt: &tokio::runtime::Runtime| link_status(rt, as_, 10);
    assert_eq!(
        f.w.before_burst(Duration::from_secs(3)),
        BurstOutcome::Granted
    );
    // The start lowers the threshold and stays: no schedule reaches the switch.
    let t0 = Instant::now();
    loop {
        let (r, l) = link10(&rt);
        if r.pcn_starts == 1 {
            assert_eq!(
                (l.ecn_threshold_bytes, l.pcn_outstanding),
                (15_000, 1),
                "{r:?}"
            );
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(3), "no start: {r:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        link10(&rt).1.ecn_threshold_bytes,
        15_000,
        "nothing but the burst ends it"
    );
    // The burst leaves the process: the agent ends the start, the threshold comes back.
    f.w.add_bytes(64_000);
    let t1 = Instant::now();
    loop {
        let (r, l) = link10(&rt);
        if l.ecn_threshold_bytes == 60_000 {
            assert_eq!((r.pcn_expired, l.pcn_outstanding), (0, 0), "{r:?}");
            break;
        }
        assert!(
            t1.elapsed() < Duration::from_secs(3),
            "the burst's bytes did not end the start: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    println!("restored {:?} after the burst's first bytes", t1.elapsed());
    let st = rt
        .block_on(ccp_agent::status::agent_status(f.agent_addr))
        .unwrap();
    assert_eq!((st.pcn_starts, st.pcn_ends_on_burst), (1, 1), "{st:?}");
    // The flow was created but never controlled.
    let stats = f.dp.snapshot();
    assert_eq!(stats.has_program, vec![false], "{stats:?}");
    assert!(stats.rates[0].is_empty(), "{stats:?}");
    assert!(st.flows.is_empty(), "{st:?}");
    f.stop(rt);
}
