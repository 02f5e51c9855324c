//! The agent -> datapath -> report round trip: `ccp-test-agent ping` and the
//! user-space datapath it is compared with, `ccp-test-agent userspace-dp`.
//!
//! The program keeps a control register `Control.ping` and a report register `Report.seq`; on
//! every ACK where the agent's ping number is ahead of the last one reported, it copies it and
//! reports at once:
//!
//! ```text
//! (def (Report.seq 0) (Control.ping 0))
//! (when (> Control.ping Report.seq) (:= Report.seq Control.ping) (report))
//! ```
//!
//! The agent sends ping k (`update_field("Control.ping", k)`, one UPDATE_FIELDS message), waits
//! for the MEASURE carrying `seq = k`, records the time in between, and sends k + 1. Over netlink
//! against `tcp_mltcp.ko` the round trip includes the wait for the flow's next ACK (the program
//! runs per ACK); the user-space datapath runs the flow's program as soon as a message arrives,
//! so its figure is the IPC and the datapath machine alone. The flow's window is opened once
//! (`Cwnd`, 4 MB) so ACKs keep coming.

use anyhow::{anyhow, Result};
use ccp_datapath::{Datapath, DatapathOps, FlowInfo, Primitives, SendError};
use portus::ipc::Ipc;
use portus::lang::Scope;
use portus::{CongAlg, Datapath as PortusDatapath, DatapathInfo, DatapathTrait, Flow, Report};
use std::collections::HashMap;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The round-trip program (see the module docs).
pub const PING_PROGRAM: &str = "(def (Report.seq 0) (Control.ping 0))
(when (> Control.ping Report.seq) (:= Report.seq Control.ping) (report))";

/// `ccp-test-agent ping` options.
#[derive(clap::Args, Debug, Clone)]
pub struct PingArgs {
    /// Round trips to measure (on the first flow announced; later flows are left alone).
    #[arg(long, default_value_t = 2000)]
    pub samples: u32,
    /// Round trips left out at the start (warm-up).
    #[arg(long, default_value_t = 50)]
    pub warmup: u32,
    /// Measure only on a flow to this destination port (e.g. iperf3's 5201: the sending side,
    /// whose ACKs run the program); 0: the first flow announced.
    #[arg(long, default_value_t = 0)]
    pub dst_port: u16,
    /// Give up after this many seconds, printing what was measured.
    #[arg(long, default_value_t = 60)]
    pub timeout_s: u64,
}

/// Round-trip times, microseconds, shared with `main` to print when the agent stops.
#[derive(Default)]
pub struct Samples {
    /// Measured round trips, µs (after the warm-up).
    pub rtt_us: Vec<f64>,
    /// Whether a flow is being measured (only the first one is).
    pub busy: bool,
}

/// The round-trip algorithm.
pub struct Ping {
    args: PingArgs,
    samples: Arc<Mutex<Samples>>,
    stop: Arc<AtomicBool>,
}

impl Ping {
    /// The algorithm; `stop` is portus's run flag, cleared when enough samples are in or
    /// `args.timeout_s` has passed (a watchdog thread).
    pub fn new(args: &PingArgs, samples: Arc<Mutex<Samples>>, stop: Arc<AtomicBool>) -> Self {
        let (watch, t) = (stop.clone(), Duration::from_secs(args.timeout_s));
        std::thread::spawn(move || {
            std::thread::sleep(t);
            if watch.swap(false, Ordering::SeqCst) {
                tracing::warn!(
                    timeout_s = t.as_secs(),
                    "ping: timed out; reporting what was measured"
                );
            }
        });
        Self {
            args: args.clone(),
            samples,
            stop,
        }
    }
}

/// One flow of [`Ping`].
pub struct PingFlow<I: Ipc> {
    control: PortusDatapath<I>,
    sc: Option<Scope>,
    seq: u32,
    sent: Instant,
    args: PingArgs,
    samples: Arc<Mutex<Samples>>,
    stop: Arc<AtomicBool>,
}

impl<I: Ipc> CongAlg<I> for Ping {
    type Flow = PingFlow<I>;

    fn name() -> &'static str {
        "mltcp"
    }

    fn datapath_programs(&self) -> HashMap<&'static str, String> {
        HashMap::from([("ping", PING_PROGRAM.to_string())])
    }

    fn new_flow(&self, mut control: PortusDatapath<I>, info: DatapathInfo) -> Self::Flow {
        // portus hands ports in network byte order (as the datapath sends them).
        let dst_port = u16::from_be(info.dst_port as u16);
        let wanted = self.args.dst_port == 0 || self.args.dst_port == dst_port;
        let first = wanted && {
            let mut s = self.samples.lock().unwrap_or_else(|p| p.into_inner());
            !std::mem::replace(&mut s.busy, true)
        };
        let mut sc = None;
        if first {
            match control.set_program("ping", Some(&[("Cwnd", 4 << 20)])) {
                Ok(s) => sc = Some(s),
                Err(e) => tracing::error!(sid = info.sock_id, err = %e.0, "set_program failed"),
            }
            tracing::info!(
                sid = info.sock_id,
                dst_port,
                "CREATE: measuring round trips on this flow"
            );
        } else {
            tracing::info!(
                sid = info.sock_id,
                dst_port,
                "CREATE: another flow, left alone"
            );
        }
        let mut f = PingFlow {
            control,
            sc,
            seq: 0,
            sent: Instant::now(),
            args: self.args.clone(),
            samples: self.samples.clone(),
            stop: self.stop.clone(),
        };
        f.send_next();
        f
    }
}

impl<I: Ipc> PingFlow<I> {
    fn send_next(&mut self) {
        let Some(sc) = &self.sc else { return };
        self.seq += 1;
        self.sent = Instant::now();
        if let Err(e) = self.control.update_field(sc, &[("Control.ping", self.seq)]) {
            tracing::error!(err = %e.0, "update_field failed");
        }
    }
}

impl<I: Ipc> Flow for PingFlow<I> {
    fn on_report(&mut self, _sock_id: u32, m: Report) {
        let Some(sc) = &self.sc else { return };
        let Ok(seq) = m.get_field("Report.seq", sc) else {
            return;
        };
        if seq != u64::from(self.seq) {
            return;
        }
        let rtt_us = self.sent.elapsed().as_secs_f64() * 1e6;
        let n = {
            let mut s = self.samples.lock().unwrap_or_else(|p| p.into_inner());
            if self.seq > self.args.warmup {
                s.rtt_us.push(rtt_us);
            }
            s.rtt_us.len()
        };
        if n >= self.args.samples as usize {
            self.stop.store(false, Ordering::SeqCst);
            return;
        }
        self.send_next();
    }

    fn close(&mut self) {
        tracing::info!(pings = self.seq, "flow closed");
        if self.sc.is_some() {
            // The next flow announced is measured instead.
            self.samples.lock().unwrap_or_else(|p| p.into_inner()).busy = false;
        }
    }
}

/// One summary line: "round trip over IPC: n=N mean=.. p50=.. p90=.. p99=.. us".
pub fn summary(ipc: &str, samples: &Samples) -> String {
    let mut v = samples.rtt_us.clone();
    mlcc_stats::sort(&mut v);
    // Nearest rank; NaN (printed "NaN") when there are no samples.
    let quantile = |q| mlcc_stats::quantile_sorted(&v, q).unwrap_or(f64::NAN);
    let mean = if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    };
    format!(
        "round trip over {ipc}: n={} mean={mean:.1} p50={:.1} p90={:.1} p99={:.1} us",
        v.len(),
        quantile(0.5),
        quantile(0.9),
        quantile(0.99)
    )
}

// ---------------------------------------------------------------------------------------------
// The user-space datapath.

/// `ccp-test-agent userspace-dp` options.
#[derive(clap::Args, Debug, Clone)]
pub struct UserspaceDpArgs {
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 60)]
    pub secs: u64,
    /// Also run the flow's program every this many microseconds without a message (an "ACK
    /// clock"); 0: only when a message arrives.
    #[arg(long, default_value_t = 1000)]
    pub tick_us: u64,
}

struct UnixHost {
    sock: UnixDatagram,
    agent: PathBuf,
    start: Instant,
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
    fn set_cwnd(&mut self, _bytes: u64) {}
    fn set_rate_abs(&mut self, _bytes_per_sec: u64) {}
}

/// Runs one emulated flow on the `ccp-datapath` core over portus's unix-socket IPC: sends READY,
/// starts the flow once programs are installed, runs its program after every received message
/// (and every `tick_us`), until `secs` pass. `unix_name`: the agent's socket, /tmp/ccp/NAME.
pub fn run_userspace_dp(a: &UserspaceDpArgs, unix_name: &str) -> Result<()> {
    let agent = PathBuf::from(format!("/tmp/ccp/{unix_name}"));
    let me = PathBuf::from(format!("/tmp/ccp/{unix_name}-dp-{}", std::process::id()));
    let _ = std::fs::remove_file(&me);
    let sock = UnixDatagram::bind(&me).map_err(|e| anyhow!("binding {}: {e}", me.display()))?;
    let tick = if a.tick_us == 0 {
        Duration::from_secs(1)
    } else {
        Duration::from_micros(a.tick_us)
    };
    sock.set_read_timeout(Some(tick))?;
    let mut host = UnixHost {
        sock,
        agent,
        start: Instant::now(),
    };
    let mut dp: Box<Datapath<16, 8>> = Box::new(Datapath::new());
    dp.init(host.now_us());
    dp.send_ready(1, &mut host).map_err(|e| {
        anyhow!(
            "READY not sent to {}: {e:?} (is the agent running?)",
            host.agent.display()
        )
    })?;
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
    .map_err(|e| anyhow!("flow info: {e:?}"))?;
    let mut sid = None;
    let mut buf = [0u8; 4096];
    let (mut handled, mut bad) = (0u64, 0u64);
    let end = Instant::now() + Duration::from_secs(a.secs);
    while Instant::now() < end {
        match host.sock.recv(&mut buf) {
            Ok(n) => match dp.handle_msg(&buf[..n]) {
                Ok(_) => handled += 1,
                Err(_) => bad += 1,
            },
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(anyhow!("recv: {e}")),
        }
        if sid.is_none() && !dp.programs().is_empty() {
            sid = Some(
                dp.flow_start(&info, &mut host)
                    .map_err(|e| anyhow!("flow_start: {e:?}"))?,
            );
        }
        if let Some(s) = sid {
            let prims = Primitives {
                bytes_acked: 1448,
                packets_acked: 1,
                rtt_sample_us: 100,
                snd_cwnd: 14_480,
                ..Default::default()
            };
            let _ = dp.flow_invoke(s, &prims, &mut host);
        }
    }
    if let Some(s) = sid {
        let _ = dp.flow_end(s, &mut host);
    }
    let _ = std::fs::remove_file(&me);
    tracing::info!(handled, bad, "user-space datapath stopped");
    Ok(())
}
