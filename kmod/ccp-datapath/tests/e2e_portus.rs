//! End to end: a real portus 0.9 agent (its runtime, unix-socket IPC under `/tmp/ccp/<name>`)
//! drives a user-space flow backed by this crate. The datapath sends READY, portus installs its
//! program, the datapath announces a flow with CREATE, the agent switches it to the program with
//! an initial `Cwnd`, receives MEASURE reports, sets `Rate` and `Cwnd` with UPDATE_FIELDS, and
//! the flow's actuators see both; closing the flow reaches the agent's `Flow::close`.

mod common;

use ccp_datapath::{Datapath, DatapathOps, FlowInfo, Primitives, SendError};
use portus::ipc::{unix::Socket, BackendBuilder, Blocking, Ipc};
use portus::lang::Scope;
use portus::{CongAlg, DatapathInfo, DatapathTrait, Flow, Report};
use std::collections::HashMap;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const PROGRAM: &str = "
    (def (Report (volatile acked 0) (volatile rtt 0) (cwnd 0) (rate 0)))
    (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Report.rtt Flow.rtt_sample_us)
        (:= Report.cwnd Cwnd)
        (:= Report.rate Rate)
        (fallthrough))
    (when (> Micros 10000) (report) (:= Micros 0))";

const INIT_CWND: u32 = 20_000;
const NEW_CWND: u32 = 30_000;
const NEW_RATE: u32 = 1_250_000; // 10 Mbit/s

#[derive(Debug)]
enum Event {
    Created(DatapathInfo),
    Report {
        acked: u64,
        rtt: u64,
        cwnd: u64,
        rate: u64,
    },
    Closed,
}

struct Alg(mpsc::Sender<Event>);

struct AlgFlow<I: Ipc> {
    control: portus::Datapath<I>,
    sc: Scope,
    tx: mpsc::Sender<Event>,
    updated: bool,
}

impl<I: Ipc> CongAlg<I> for Alg {
    type Flow = AlgFlow<I>;

    fn name() -> &'static str {
        "e2e"
    }

    fn datapath_programs(&self) -> HashMap<&'static str, String> {
        HashMap::from([("e2e", PROGRAM.to_string())])
    }

    fn new_flow(&self, mut control: portus::Datapath<I>, info: DatapathInfo) -> Self::Flow {
        let sc = control
            .set_program("e2e", Some(&[("Cwnd", INIT_CWND)]))
            .expect("set_program");
        self.0.send(Event::Created(info)).unwrap();
        AlgFlow {
            control,
            sc,
            tx: self.0.clone(),
            updated: false,
        }
    }
}

impl<I: Ipc> Flow for AlgFlow<I> {
    fn on_report(&mut self, _sock_id: u32, m: Report) {
        let get = |f: &str| m.get_field(f, &self.sc).expect("report field");
        let ev = Event::Report {
            acked: get("Report.acked"),
            rtt: get("Report.rtt"),
            cwnd: get("Report.cwnd"),
            rate: get("Report.rate"),
        };
        let _ = self.tx.send(ev);
        if !self.updated {
            self.updated = true;
            self.control
                .update_field(&self.sc, &[("Rate", NEW_RATE), ("Cwnd", NEW_CWND)])
                .expect("update_field");
        }
    }

    fn close(&mut self) {
        let _ = self.tx.send(Event::Closed);
    }
}

/// The user-space host: real clock, unix datagram socket to the agent, recorded actuators.
struct UnixHost {
    sock: UnixDatagram,
    agent: PathBuf,
    start: Instant,
    cwnd: u64,
    rate: u64,
    cwnd_history: Vec<u64>,
}

impl DatapathOps for UnixHost {
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
        if self.cwnd != bytes {
            self.cwnd_history.push(bytes);
        }
        self.cwnd = bytes;
    }
    fn set_rate_abs(&mut self, bytes_per_sec: u64) {
        self.rate = bytes_per_sec;
    }
}

#[test]
fn portus_agent_drives_a_flow_over_unix_ipc() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let name = format!("ccp-datapath-e2e-{}-{nanos}", std::process::id());
    let agent_path = PathBuf::from(format!("/tmp/ccp/{name}"));
    let dp_path = PathBuf::from(format!("/tmp/ccp/{name}-dp"));

    // The agent: binds /tmp/ccp/<name> before returning.
    let (tx, rx) = mpsc::channel();
    let sock = Socket::<Blocking>::new(&name).expect("agent socket");
    let agent = portus::RunBuilder::new(BackendBuilder { sock })
        .default_alg(Alg(tx))
        .spawn_thread()
        .run()
        .expect("agent runs");

    // The datapath.
    let _ = std::fs::remove_file(&dp_path);
    let sock = UnixDatagram::bind(&dp_path).expect("datapath socket");
    sock.set_nonblocking(true).unwrap();
    let mut host = UnixHost {
        sock,
        agent: agent_path,
        start: Instant::now(),
        cwnd: 14_480,
        rate: 0,
        cwnd_history: vec![],
    };
    let mut dp = Box::new(Datapath::<16, 8>::new());
    dp.init(host.now_us());
    dp.send_ready(1, &mut host).expect("READY sent");

    let info = FlowInfo {
        init_cwnd: 14_480,
        mss: 1448,
        src_ip: 0x0a00_0001,
        src_port: 5201,
        dst_ip: 0x0a00_0002,
        dst_port: 40000,
        ..Default::default()
    }
    .with_alg_name(b"mltcp")
    .unwrap();
    let mut sid = None;
    let mut created = None;
    let mut reports = vec![];
    let mut buf = [0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        while let Ok(n) = host.sock.recv(&mut buf) {
            dp.handle_msg(&buf[..n]).expect("agent message accepted");
        }
        if sid.is_none() && !dp.programs().is_empty() {
            sid = Some(dp.flow_start(&info, &mut host).expect("flow starts"));
        }
        if let Some(s) = sid {
            let prims = Primitives {
                bytes_acked: 1448,
                packets_acked: 1,
                rtt_sample_us: 10_000,
                snd_cwnd: host.cwnd,
                snd_rate: host.rate,
                ..Default::default()
            };
            dp.flow_invoke(s, &prims, &mut host).expect("invoke");
        }
        while let Ok(ev) = rx.try_recv() {
            match ev {
                Event::Created(i) => created = Some(i),
                Event::Report {
                    acked,
                    rtt,
                    cwnd,
                    rate,
                } => reports.push((acked, rtt, cwnd, rate)),
                Event::Closed => panic!("closed early"),
            }
        }
        let done = reports
            .iter()
            .any(|&(_, _, c, r)| c == u64::from(NEW_CWND) && r == u64::from(NEW_RATE));
        if done && host.rate == u64::from(NEW_RATE) && host.cwnd == u64::from(NEW_CWND) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let sid = sid.expect("programs were installed");
    let created = created.expect("agent saw CREATE");
    assert_eq!(
        (
            created.sock_id,
            created.mss,
            created.init_cwnd,
            created.src_port,
            created.dst_port
        ),
        (sid, 1448, 14_480, 5201, 40000)
    );
    assert!(reports.len() >= 2, "reports: {reports:?}");
    let (acked, rtt, _, _) = reports[0];
    assert!(acked >= 1448 && acked % 1448 == 0, "acked {acked}");
    assert_eq!(rtt, 10_000);
    assert_eq!(
        host.rate,
        u64::from(NEW_RATE),
        "the flow's rate was set by the agent"
    );
    assert_eq!(
        host.cwnd,
        u64::from(NEW_CWND),
        "the flow's cwnd was set by the agent"
    );
    assert_eq!(
        &host.cwnd_history[..2],
        &[u64::from(INIT_CWND), u64::from(NEW_CWND)],
        "CHANGE_PROG's Cwnd, then UPDATE_FIELDS'"
    );
    assert_eq!(dp.stats().total_errors(), 0, "{:?}", dp.stats());

    // Closing the flow reaches the agent.
    dp.flow_end(sid, &mut host).unwrap();
    let closed = rx.iter().find(|e| matches!(e, Event::Closed));
    assert!(closed.is_some());

    agent.kill();
    agent.wait().unwrap();
    let _ = std::fs::remove_file(&dp_path);
    let _ = std::fs::remove_file(format!("/tmp/ccp/{name}"));
}
