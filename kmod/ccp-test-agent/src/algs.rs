//! The agent's congestion-control algorithms: a constant rate ([`ConstRate`]) and Reno computed
//! in the agent ([`Reno`]).
//!
//! Both keep their datapath programs within what portus 0.9 can serialise and the datapath
//! accepts: Report fields fed in a `(when true ... (fallthrough))` event, and a `Micros` timer
//! event that reports; `Rate` and `Cwnd` are set from the agent with `update_field` (u32 values:
//! rates up to ~34 Gbit/s, windows up to 4 GB).

use anyhow::Result;
use clap::{Args, ValueEnum};
use portus::ipc::Ipc;
use portus::lang::Scope;
use portus::{CongAlg, Datapath, DatapathInfo, DatapathTrait, Flow, Report};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use ccp_ipc::{ClassSender, KernelSender};

use crate::reno_program;

/// Arguments of `const-rate`.
#[derive(Args, Debug, Clone)]
pub struct ConstRateArgs {
    /// The rate every flow is paced at, Mbit/s (1 Mbit = 10^6 bit).
    #[arg(long)]
    pub rate_mbit: f64,
    /// A file holding a rate in Mbit/s, re-read on every report; a changed value is applied to
    /// every flow at its next report (so a test can change the rate mid-flow).
    #[arg(long)]
    pub rate_file: Option<PathBuf>,
    /// Report interval of the datapath program, ms (a `Micros` timer; with `--ipc bpf`, the slot
    /// program's `Control.slot_us`).
    #[arg(long, default_value_t = 10)]
    pub report_ms: u32,
    /// The RTT assumed in the window when the measured one is smaller, ms: `Cwnd` = 2 × rate ×
    /// max(srtt, this), so the window never limits the paced rate.
    #[arg(long, default_value_t = 20)]
    pub min_rtt_ms: u32,
    /// Re-send the flow's Rate and Cwnd at least this often, ms, even when unchanged (a keepalive
    /// for the module's `ccp_heartbeat_ms`); 0: only on a change.
    #[arg(long, default_value_t = 0)]
    pub keepalive_ms: u64,
    /// Give every flow this traffic class, a DSCP (0..=63), with SET_CLASS (this project's
    /// extension of the CCP protocol) when it is created: the module marks its packets with it
    /// while the agent is in charge. Sent to the kernel over a send-only netlink socket (not
    /// with `--ipc unix`).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=63))]
    pub dscp: Option<u8>,
    /// A file holding a traffic class, re-read on every report: a DSCP (0..=63), or `release`
    /// (the socket's own marking); a changed value is sent to every flow at its next report
    /// (so a test can set and release classes mid-flow). Overrides `--dscp` while readable.
    #[arg(long)]
    pub class_file: Option<PathBuf>,
}

/// A traffic class as `--class-file` holds it: a DSCP 0..=63 (`Some`), or `release` / `none`
/// (`None`: the socket's own marking); surrounding whitespace ignored.
pub fn parse_class(s: &str) -> Result<Option<u8>> {
    match s.trim() {
        "release" | "none" => Ok(None),
        t => match t.parse::<u8>() {
            Ok(d) if d <= 63 => Ok(Some(d)),
            _ => Err(anyhow::anyhow!(
                "traffic class {t:?}: want a DSCP 0..=63 or \"release\""
            )),
        },
    }
}

/// Mbit/s to bytes/s, clamped to what `update_field` carries (u32).
fn mbit_to_bps(mbit: f64) -> u32 {
    (mbit * 1e6 / 8.0).round().clamp(1.0, f64::from(u32::MAX)) as u32
}

/// Constant-rate algorithm: sets `Rate` and a non-limiting `Cwnd` on every flow, and a traffic
/// class when asked (`--dscp`, `--class-file`).
pub struct ConstRate {
    args: ConstRateArgs,
    program: String,
    /// Where SET_CLASS goes (present when a class is asked for and the IPC reaches a datapath
    /// that marks packets: the module over netlink, or the BPF agent datapath).
    classes: Option<Arc<dyn ClassSender + Send + Sync>>,
    /// `program` is the agent's slot program (`--ipc bpf`): the report interval goes into its
    /// `Control.slot_us` when a flow is switched to it.
    slot_program: bool,
}

impl ConstRate {
    /// Builds the algorithm and its datapath program (reports every `report_ms`); opens the
    /// socket SET_CLASS goes through when a class is asked for and `to_kernel` (the IPC is
    /// netlink; over unix sockets the class is not sent, with a warning).
    pub fn new(args: &ConstRateArgs, to_kernel: bool) -> Result<Self> {
        anyhow::ensure!(args.rate_mbit > 0.0, "--rate-mbit must be positive");
        let wants_class = args.dscp.is_some() || args.class_file.is_some();
        let classes = match (wants_class, to_kernel) {
            (true, true) => Some(Arc::new(
                KernelSender::new().map_err(|e| anyhow::anyhow!("SET_CLASS socket: {}", e.0))?,
            ) as Arc<dyn ClassSender + Send + Sync>),
            (true, false) => {
                tracing::warn!("--dscp/--class-file need the netlink IPC: no class is sent");
                None
            }
            (false, _) => None,
        };
        let us = u64::from(args.report_ms.max(1)) * 1000;
        let program = format!(
            "(def (Report (volatile acked 0) (volatile loss 0) (rtt 0) (rin 0) (rate 0) (cwnd 0)))
             (when true
                 (:= Report.acked (+ Report.acked Ack.bytes_acked))
                 (:= Report.loss (+ Report.loss Ack.lost_pkts_sample))
                 (:= Report.rtt Flow.rtt_sample_us)
                 (:= Report.rin Flow.rate_incoming)
                 (:= Report.rate Rate)
                 (:= Report.cwnd Cwnd)
                 (fallthrough))
             (when (> Micros {us}) (report) (:= Micros 0))"
        );
        Ok(Self {
            args: args.clone(),
            program,
            classes,
            slot_program: false,
        })
    }

    /// The algorithm over the BPF agent datapath (`--ipc bpf`), which runs only the agent's slot
    /// program: installs that program (`ccp_ipc::bpf::slot_program_source`, the text the
    /// backend accepts) instead of its own and sets `Rate`, `Cwnd` and `Control.slot_us`
    /// (`--report-ms`) on every flow. The window then follows the slot program's rule (Reno
    /// within its default ceiling, `Control.cwnd_cap`, 16 MiB), so the rate, the flow's pacing
    /// limit, is what holds the flow. A traffic class (`--dscp`, `--class-file`) goes through
    /// `classes`, the datapath's SET_CLASS entry (`ccp_ipc::BpfIpc::class_sender`), which
    /// marks the flow's packets once it runs the slot program.
    pub fn over_slot_program<C: ClassSender + Send + Sync + 'static>(
        args: &ConstRateArgs,
        classes: C,
    ) -> Result<Self> {
        anyhow::ensure!(args.rate_mbit > 0.0, "--rate-mbit must be positive");
        let wants_class = args.dscp.is_some() || args.class_file.is_some();
        Ok(Self {
            args: args.clone(),
            program: ccp_ipc::bpf::slot_program_source(),
            classes: wants_class.then(|| Arc::new(classes) as Arc<dyn ClassSender + Send + Sync>),
            slot_program: true,
        })
    }

    /// The class to give the flows now: the class file's when it is set and readable, else
    /// `--dscp` (`None`: no class asked for, or the file says `release`).
    fn current_class(&self) -> Option<u8> {
        let from_file = self.args.class_file.as_ref().and_then(|p| {
            let s = std::fs::read_to_string(p).ok()?;
            match parse_class(&s) {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::warn!(file = %p.display(), err = %e, "class file ignored");
                    None
                }
            }
        });
        from_file.unwrap_or(self.args.dscp)
    }

    /// Sends `class` for `sid` when it differs from `last` (what was sent before; `None` at
    /// first, when only a class is worth sending); returns what is in force now.
    fn send_class(
        &self,
        sid: u32,
        class: Option<u8>,
        last: Option<Option<u8>>,
    ) -> Option<Option<u8>> {
        let Some(tx) = &self.classes else {
            return last;
        };
        if last == Some(class) || (last.is_none() && class.is_none()) {
            return last;
        }
        match tx.set_class(sid, class) {
            Ok(()) => {
                tracing::info!(sid, dscp = ?class, "SET_CLASS sent");
                Some(class)
            }
            Err(e) => {
                tracing::error!(sid, err = %e, "SET_CLASS failed");
                last
            }
        }
    }

    /// The rate to apply now, bytes/s: the rate file's when it is set and readable, else the
    /// command line's.
    fn current_rate(&self) -> u32 {
        match &self.args.rate_file {
            Some(p) => match crate::read_rate_file(p) {
                Ok(m) => mbit_to_bps(m),
                Err(_) => mbit_to_bps(self.args.rate_mbit),
            },
            None => mbit_to_bps(self.args.rate_mbit),
        }
    }

    fn cwnd_for(&self, rate: u32, srtt_us: u64, mss: u32) -> u32 {
        let rtt_us = srtt_us.max(u64::from(self.args.min_rtt_ms) * 1000);
        let bdp = u64::from(rate) * rtt_us / 1_000_000;
        (2 * bdp)
            .max(10 * u64::from(mss.max(536)))
            .min(u64::from(u32::MAX)) as u32
    }
}

/// One flow of [`ConstRate`].
pub struct ConstRateFlow<I: Ipc> {
    control: Datapath<I>,
    sc: Scope,
    sid: u32,
    mss: u32,
    rate: u32,
    cwnd: u32,
    /// The algorithm's settings (the rate file, the window rule).
    alg: ConstRate,
    reports: u64,
    started: Instant,
    /// When Rate/Cwnd were last sent (for `--keepalive-ms`).
    last_sent: Instant,
    /// The traffic class last sent with SET_CLASS (`Some(None)`: released; `None`: none sent).
    class: Option<Option<u8>>,
}

impl<I: Ipc> CongAlg<I> for ConstRate {
    type Flow = ConstRateFlow<I>;

    fn name() -> &'static str {
        "mltcp"
    }

    fn datapath_programs(&self) -> HashMap<&'static str, String> {
        HashMap::from([("const_rate", self.program.clone())])
    }

    fn new_flow(&self, mut control: Datapath<I>, info: DatapathInfo) -> Self::Flow {
        let rate = self.current_rate();
        let cwnd = self.cwnd_for(rate, 0, info.mss);
        let mut updates = vec![("Rate", rate), ("Cwnd", cwnd)];
        if self.slot_program {
            let slot_us = self.args.report_ms.max(1).saturating_mul(1000);
            updates.push(("Control.slot_us", slot_us));
        }
        let sc = match control.set_program("const_rate", Some(&updates)) {
            Ok(sc) => sc,
            Err(e) => {
                tracing::error!(sid = info.sock_id, err = %e.0, "set_program failed");
                Scope::new()
            }
        };
        tracing::info!(
            sid = info.sock_id,
            mss = info.mss,
            init_cwnd = info.init_cwnd,
            src = %endpoint(info.src_ip, info.src_port),
            dst = %endpoint(info.dst_ip, info.dst_port),
            rate_bps = rate,
            rate_mbit = f64::from(rate) * 8.0 / 1e6,
            cwnd,
            "CREATE: flow under constant rate"
        );
        let class = self.send_class(info.sock_id, self.current_class(), None);
        ConstRateFlow {
            control,
            sc,
            sid: info.sock_id,
            mss: info.mss,
            rate,
            cwnd,
            alg: ConstRate {
                args: self.args.clone(),
                program: String::new(),
                classes: self.classes.clone(),
                slot_program: self.slot_program,
            },
            reports: 0,
            started: Instant::now(),
            last_sent: Instant::now(),
            class,
        }
    }
}

/// The endpoint as the datapath reports it (address and port in network byte order, as u32).
fn endpoint(ip_be: u32, port_be: u32) -> String {
    let ip = std::net::Ipv4Addr::from(u32::from_be(ip_be));
    let port = u16::from_be(port_be as u16);
    format!("{ip}:{port}")
}

impl<I: Ipc> Flow for ConstRateFlow<I> {
    fn on_report(&mut self, sock_id: u32, m: Report) {
        self.reports += 1;
        if self.alg.classes.is_some() {
            let now = self.alg.current_class();
            self.class = self.alg.send_class(sock_id, now, self.class);
        }
        let srtt = m.get_field("Report.rtt", &self.sc).unwrap_or(0);
        let rate = self.alg.current_rate();
        let cwnd = self.alg.cwnd_for(rate, srtt, self.mss);
        // Apply a new rate at once; re-derive the window when the RTT moves it by > 25 %.
        let cwnd_moved = cwnd > self.cwnd + self.cwnd / 4 || cwnd < self.cwnd - self.cwnd / 4;
        let keepalive = self.alg.args.keepalive_ms > 0
            && self.last_sent.elapsed().as_millis() >= u128::from(self.alg.args.keepalive_ms);
        if rate != self.rate || cwnd_moved || keepalive {
            self.last_sent = Instant::now();
            if let Err(e) = self
                .control
                .update_field(&self.sc, &[("Rate", rate), ("Cwnd", cwnd)])
            {
                tracing::error!(sid = sock_id, err = %e.0, "update_field failed");
                return;
            }
            if rate != self.rate {
                tracing::info!(
                    sid = sock_id,
                    t_s = self.started.elapsed().as_secs_f64(),
                    from_mbit = f64::from(self.rate) * 8.0 / 1e6,
                    to_mbit = f64::from(rate) * 8.0 / 1e6,
                    cwnd,
                    "rate changed"
                );
            }
            self.rate = rate;
            self.cwnd = cwnd;
        }
        if self.reports % 100 == 1 {
            let get = |f: &str| m.get_field(f, &self.sc).unwrap_or(0);
            tracing::debug!(
                sid = sock_id,
                acked = get("Report.acked"),
                loss = get("Report.loss"),
                srtt_us = srtt,
                rate_in_bps = get("Report.rin"),
                dp_rate = get("Report.rate"),
                dp_cwnd = get("Report.cwnd"),
                "report"
            );
        }
    }

    fn close(&mut self) {
        tracing::info!(sid = self.sid, reports = self.reports, "flow closed");
    }
}

/// Arguments of `reno`.
#[derive(Args, Debug, Clone)]
pub struct RenoArgs {
    /// Log every report (window, acked, losses).
    #[arg(long)]
    pub trace: bool,
    /// Floor of the report period, µs: the datapath reports once per max(smoothed RTT, this)
    /// (losses and timeouts still at once). 0: once per RTT, Reno's own time scale. The acked
    /// bytes are summed in the datapath between reports, so the window grows by the same bytes
    /// per RTT in fewer, larger steps; a CCP algorithm chooses its report frequency (Narayan et
    /// al., "Restructuring Endpoint Congestion Control", SIGCOMM 2018: the datapath folds
    /// per-ACK measurements into a report at the frequency the algorithm asks for). The agent
    /// alone spends 27-28 µs of guest CPU per report when it answers each, 10-46 µs when it
    /// sends only changed windows (`ci/scenarios/ccp-overhead.sh`, 2026-11-27, docs/results/ccp-overhead.md), so on a path whose RTT is tens of µs a floor is what bounds that cost.
    #[arg(long, default_value_t = 0)]
    pub min_report_us: u32,
    /// Send the window to the datapath on every report, even when it did not change (the
    /// behaviour before 2026-11-27). By default only a changed window is sent (the datapath
    /// keeps enforcing the last one on every ACK), plus `--keepalive-ms`. The default was chosen
    /// by `ccp-overhead.sh --rounds 3 --secs 2 --app-rate 4000 --kinds "reno ccp1 ccpx1"
    /// --ccp-args --update-unchanged` (2026-11-27): messages to the kernel fell from 1.00 to
    /// 0.0002 per report and the agent's system time from 14.9 to 10.8 µs per report; CPU per
    /// GB moved −6.5 % [−122, +109] (not resolved: the window the flow settled at varied more).
    #[arg(long)]
    pub update_unchanged: bool,
    /// Re-send an unchanged window at least this often, ms (a keepalive for the module's
    /// `ccp_heartbeat_ms`: set it below that); 0: only on a change.
    #[arg(long, default_value_t = 0)]
    pub keepalive_ms: u64,
    /// When the window counts as used, so that Reno may grow it (the values below). The default,
    /// `kernel`, follows Linux's `tcp_is_cwnd_limited`; `half-peak` and `half-at-report` are the
    /// agent's earlier rules, kept for comparison.
    #[arg(long, value_enum, default_value_t = GrowRule::Kernel)]
    pub grow_rule: GrowRule,
}

/// When the agent's Reno counts its window as used and lets it grow. RFC 5681 (§3.1) grows the
/// window on every ACK in slow start and by about one MSS per RTT in congestion avoidance; Linux
/// does so only while the flow is cwnd-limited (`tcp_reno_cong_avoid` in net/ipv4/tcp_cong.c
/// returns unless `tcp_is_cwnd_limited`, include/net/tcp.h), so an application-limited flow does
/// not inflate a window it does not use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GrowRule {
    /// Linux's rule. The kernel takes `max_packets_out`, the most packets out right after a send
    /// within the current window, and `is_cwnd_limited`, whether a send stopped at the window
    /// (`tcp_cwnd_validate` in net/ipv4/tcp_output.c). The datapath runs on ACKs, so the report
    /// carries the most packets in flight just before any ACK since the last report
    /// (`Flow.packets_in_flight + Ack.packets_acked`, the packets the ACK found outstanding: a
    /// lower bound of `max_packets_out` over the report period). The window, in segments, grows
    /// when that reached it (cwnd-limited), or in slow start while it is below twice that.
    /// The default since 2026-11-27 (branch ovh3), chosen by one paired round of
    /// `ccp-overhead.sh --rounds 1 --secs 2 --app-rate 4000 --kinds "reno ccp1 ccpx1"
    /// --ccpx-args "--grow-rule half-peak"` (docs/results/ccp-overhead.md, "The window rule"; an
    /// anecdote): the data flow closed at 2321 segments against 71 under `half-peak` and native
    /// reno's 1186, at CPU per GB +22.2 % over reno against +25.6 %.
    Kernel,
    /// The rule of 2026-11-27 (branch ovh2): the most packets in flight just after any ACK since
    /// the last report; grows in both phases while that is at least half the window. Windows
    /// of 55-327 segments where native reno's grew to 688-2141 (2026-11-27, docs/results/ccp-overhead.md, run D).
    HalfPeak,
    /// The rule before 2026-11-27: as `half-peak`, with the packets in flight just after the ACK
    /// that triggers the report (when in flight is lowest): windows of 22-88 segments.
    HalfAtReport,
}

impl GrowRule {
    /// The program's expression for `Report.inflight`, packets.
    fn inflight_expr(self) -> &'static str {
        match self {
            GrowRule::Kernel => reno_program::INFLIGHT_KERNEL,
            GrowRule::HalfPeak => reno_program::INFLIGHT_HALF_PEAK,
            GrowRule::HalfAtReport => reno_program::INFLIGHT_HALF_AT_REPORT,
        }
    }

    /// Whether a window of `cwnd` bytes (segments of `mss` bytes, as the datapath enforces it:
    /// `cwnd / mss`, at least 1) may grow, given `used`, the report's `Report.inflight`
    /// (packets), and whether the flow is in slow start (window below ssthresh).
    pub fn may_grow(self, cwnd: u64, mss: u64, slow_start: bool, used: u64) -> bool {
        match self {
            GrowRule::Kernel => {
                let segs = (cwnd / mss.max(1)).max(1);
                used >= segs || (slow_start && segs < 2 * used)
            }
            GrowRule::HalfPeak | GrowRule::HalfAtReport => used * mss * 2 >= cwnd,
        }
    }
}

/// The per-RTT program: accumulates acked bytes and losses, and the packets in flight as `rule`
/// measures them ([`GrowRule`]); reports once per smoothed RTT (or per `min_report_us` when that
/// is longer, and the floor is not 0), or at once on a loss or a timeout.
pub fn reno_program(min_report_us: u32, rule: GrowRule) -> String {
    reno_program::text(min_report_us, rule.inflight_expr())
}

/// Whether a window is sent to the datapath after a report: when it changed since the last
/// one sent (none sent yet counts as changed), when every report sends (`always`), or when the
/// keepalive is due.
fn should_send(cwnd: u64, last_sent: Option<u64>, always: bool, keepalive_due: bool) -> bool {
    always || keepalive_due || last_sent != Some(cwnd)
}

/// Reno in the agent (RFC 5681): slow start, additive increase of one MSS per window, both only
/// while the window is used ([`GrowRule`]), halving on loss (at most once per RTT), one MSS after
/// a timeout.
pub struct Reno {
    args: RenoArgs,
    program: String,
}

impl Reno {
    /// Builds the algorithm.
    pub fn new(args: &RenoArgs) -> Self {
        Self {
            args: args.clone(),
            program: reno_program(args.min_report_us, args.grow_rule),
        }
    }
}

/// One flow of [`Reno`].
pub struct RenoFlow<I: Ipc> {
    control: Datapath<I>,
    sc: Scope,
    sid: u32,
    mss: u64,
    cwnd: u64,
    ssthresh: u64,
    last_cut: Option<Instant>,
    srtt_us: u64,
    args: RenoArgs,
    reports: u64,
    cuts: u64,
    /// The window last sent to the datapath, bytes (`None`: not yet).
    sent_cwnd: Option<u64>,
    /// When a window was last sent (for `--keepalive-ms`).
    last_sent: Instant,
    /// UPDATE_FIELDS messages sent.
    updates: u64,
}

impl<I: Ipc> CongAlg<I> for Reno {
    type Flow = RenoFlow<I>;

    fn name() -> &'static str {
        "mltcp"
    }

    fn datapath_programs(&self) -> HashMap<&'static str, String> {
        HashMap::from([("reno", self.program.clone())])
    }

    fn new_flow(&self, mut control: Datapath<I>, info: DatapathInfo) -> Self::Flow {
        let mss = u64::from(info.mss.max(536));
        let cwnd = u64::from(info.init_cwnd).max(2 * mss);
        let sc = match control.set_program("reno", Some(&[("Cwnd", cwnd as u32)])) {
            Ok(sc) => sc,
            Err(e) => {
                tracing::error!(sid = info.sock_id, err = %e.0, "set_program failed");
                Scope::new()
            }
        };
        tracing::info!(
            sid = info.sock_id,
            mss,
            cwnd,
            "CREATE: flow under agent Reno"
        );
        RenoFlow {
            control,
            sc,
            sid: info.sock_id,
            mss,
            cwnd,
            ssthresh: u64::from(u32::MAX),
            last_cut: None,
            srtt_us: 0,
            args: self.args.clone(),
            reports: 0,
            cuts: 0,
            // set_program carried the initial window.
            sent_cwnd: Some(cwnd),
            last_sent: Instant::now(),
            updates: 0,
        }
    }
}

impl<I: Ipc> Flow for RenoFlow<I> {
    fn on_report(&mut self, sock_id: u32, m: Report) {
        self.reports += 1;
        let get = |f: &str| m.get_field(f, &self.sc).unwrap_or(0);
        let (acked, loss, timeout, rtt, inflight) = (
            get("Report.acked"),
            get("Report.loss"),
            get("Report.timeout"),
            get("Report.rtt"),
            get("Report.inflight"),
        );
        if rtt > 0 {
            self.srtt_us = rtt;
        }
        let recent_cut = self
            .last_cut
            .is_some_and(|t| (t.elapsed().as_micros() as u64) < self.srtt_us.max(1000));
        if timeout != 0 && !recent_cut {
            self.ssthresh = (self.cwnd / 2).max(2 * self.mss);
            self.cwnd = self.mss;
            self.last_cut = Some(Instant::now());
            self.cuts += 1;
        } else if loss > 0 && !recent_cut {
            self.ssthresh = (self.cwnd / 2).max(2 * self.mss);
            self.cwnd = self.ssthresh;
            self.last_cut = Some(Instant::now());
            self.cuts += 1;
        } else if loss == 0
            && timeout == 0
            && self.args.grow_rule.may_grow(
                self.cwnd,
                self.mss,
                self.cwnd < self.ssthresh,
                inflight,
            )
        {
            // Grow only while the window is used; otherwise an application- or receiver-limited
            // flow would inflate the window without bound.
            if self.cwnd < self.ssthresh {
                self.cwnd = (self.cwnd + acked).min(self.ssthresh.max(self.cwnd + self.mss));
            } else {
                self.cwnd += self.mss * acked / self.cwnd.max(1);
            }
        }
        self.cwnd = self.cwnd.clamp(self.mss, u64::from(u32::MAX));
        if self.args.trace {
            tracing::info!(
                sid = sock_id,
                acked,
                loss,
                timeout,
                srtt_us = rtt,
                cwnd = self.cwnd,
                ssthresh = self.ssthresh,
                "report"
            );
        }
        let keepalive_due = self.args.keepalive_ms > 0
            && self.last_sent.elapsed().as_millis() >= u128::from(self.args.keepalive_ms);
        if !should_send(
            self.cwnd,
            self.sent_cwnd,
            self.args.update_unchanged,
            keepalive_due,
        ) {
            return;
        }
        match self
            .control
            .update_field(&self.sc, &[("Cwnd", self.cwnd as u32)])
        {
            Ok(()) => {
                self.sent_cwnd = Some(self.cwnd);
                self.last_sent = Instant::now();
                self.updates += 1;
            }
            Err(e) => tracing::error!(sid = sock_id, err = %e.0, "update_field failed"),
        }
    }

    fn close(&mut self) {
        tracing::info!(
            sid = self.sid,
            reports = self.reports,
            updates = self.updates,
            cuts = self.cuts,
            cwnd = self.cwnd,
            cwnd_segs = self.cwnd / self.mss,
            "flow closed"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_datapath::{Datapath, DatapathOps, FlowInfo, Primitives, SendError};
    use portus::serialize;

    fn const_rate_args(dscp: Option<u8>) -> ConstRateArgs {
        ConstRateArgs {
            rate_mbit: 20.0,
            rate_file: None,
            report_ms: 10,
            min_rtt_ms: 1,
            keepalive_ms: 0,
            dscp,
            class_file: None,
        }
    }

    /// Over the BPF datapath the class goes to the sender it is given (the backend's control
    /// map): once when asked for, not again while unchanged, and not at all without `--dscp`.
    #[test]
    fn over_slot_program_sends_the_class_through_the_given_sender() {
        /// (sid, class) per SET_CLASS sent.
        type Sent = Vec<(u32, Option<u8>)>;
        #[derive(Clone, Default)]
        struct Recorder(Arc<std::sync::Mutex<Sent>>);
        impl ClassSender for Recorder {
            fn set_class(&self, sid: u32, dscp: Option<u8>) -> std::io::Result<()> {
                self.0.lock().unwrap().push((sid, dscp));
                Ok(())
            }
        }
        let rec = Recorder::default();
        let alg = ConstRate::over_slot_program(&const_rate_args(Some(46)), rec.clone()).unwrap();
        assert_eq!(alg.program, ccp_ipc::bpf::slot_program_source());
        let last = alg.send_class(7, alg.current_class(), None);
        assert_eq!(last, Some(Some(46)));
        assert_eq!(alg.send_class(7, alg.current_class(), last), last);
        assert_eq!(alg.send_class(7, None, last), Some(None));
        assert_eq!(*rec.0.lock().unwrap(), vec![(7, Some(46)), (7, None)]);

        let quiet = Recorder::default();
        let alg = ConstRate::over_slot_program(&const_rate_args(None), quiet.clone()).unwrap();
        assert_eq!(alg.send_class(7, alg.current_class(), None), None);
        assert!(quiet.0.lock().unwrap().is_empty());
        assert!(ConstRate::over_slot_program(
            &ConstRateArgs {
                rate_mbit: 0.0,
                ..const_rate_args(None)
            },
            quiet
        )
        .is_err());
    }

    #[test]
    fn class_file_values() {
        assert_eq!(parse_class(" 26\n").unwrap(), Some(26));
        assert_eq!(parse_class("0").unwrap(), Some(0));
        assert_eq!(parse_class("63").unwrap(), Some(63));
        assert_eq!(parse_class("release\n").unwrap(), None);
        assert_eq!(parse_class("none").unwrap(), None);
        for bad in ["64", "-1", "", "af41"] {
            assert!(parse_class(bad).is_err(), "{bad:?}");
        }
    }

    /// What `--dscp` sends reaches the user-space datapath as a class change at the flow's
    /// next invocation (the same message the kernel module gets).
    #[test]
    fn set_class_reaches_the_datapath() {
        #[derive(Default)]
        struct Classes(Vec<Option<u8>>);
        impl DatapathOps for Classes {
            fn now_us(&self) -> u64 {
                0
            }
            fn send_msg(&mut self, _msg: &[u8]) -> Result<(), SendError> {
                Ok(())
            }
            fn set_cwnd(&mut self, _bytes: u64) {}
            fn set_rate_abs(&mut self, _bytes_per_sec: u64) {}
            fn set_class(&mut self, dscp: Option<u8>) {
                self.0.push(dscp);
            }
        }
        let mut dp = Box::new(Datapath::<2, 1>::new());
        let mut host = Classes::default();
        let sid = dp.flow_start(&FlowInfo::default(), &mut host).unwrap();
        for class in [Some(34), None] {
            dp.handle_msg(&ccp_ipc::set_class_msg(sid, class).unwrap())
                .unwrap();
            dp.flow_invoke(sid, &Primitives::default(), &mut host)
                .unwrap();
        }
        assert_eq!(host.0, [Some(34), None]);
    }

    /// A user-space host for the datapath core: a manual clock, the MEASUREs counted and the
    /// last one kept.
    #[derive(Default)]
    struct Host {
        now: u64,
        measures: usize,
        last_measure: Vec<u8>,
    }

    impl DatapathOps for Host {
        fn now_us(&self) -> u64 {
            self.now
        }
        fn send_msg(&mut self, msg: &[u8]) -> Result<(), SendError> {
            // MEASURE is type 1 (a little-endian u16 at the start of the CCP header).
            if msg.get(..2) == Some(&[1, 0][..]) {
                self.measures += 1;
                self.last_measure = msg.to_vec();
            }
            Ok(())
        }
        fn set_cwnd(&mut self, _: u64) {}
        fn set_rate_abs(&mut self, _: u64) {}
    }

    /// What [`run`] saw.
    struct Seen {
        /// MEASUREs sent after the install.
        reports: usize,
        /// `Report.inflight` of the last one.
        last_inflight: u64,
    }

    /// Runs `reno_program(floor, rule)` as the module does, one ACK every 10 µs for `span_us`
    /// with a smoothed RTT of `rtt_us`; the ACK `t` µs in acks `acked_inflight(t).0` packets of
    /// 1448 bytes and leaves `.1` in flight; a loss on the ACK at `loss_at_us` when given.
    fn run(
        floor: u32,
        rule: GrowRule,
        rtt_us: u64,
        span_us: u64,
        loss_at_us: Option<u64>,
        acked_inflight: impl Fn(u64) -> (u64, u64),
    ) -> Seen {
        let (bin, sc) = portus::lang::compile(reno_program(floor, rule).as_bytes(), &[])
            .expect("portus compiles the program");
        let install = serialize::serialize(&serialize::install::Msg {
            sid: 0,
            program_uid: sc.program_uid,
            num_events: bin.events.len() as u32,
            num_instrs: bin.instrs.len() as u32,
            instrs: bin,
        })
        .unwrap();
        let mut dp = Box::new(Datapath::<4, 4>::new());
        let mut host = Host {
            now: 1_000,
            ..Host::default()
        };
        dp.init(host.now);
        let info = FlowInfo {
            init_cwnd: 14_480,
            mss: 1448,
            ..Default::default()
        };
        let sid = dp.flow_start(&info, &mut host).unwrap();
        dp.handle_msg(&install).unwrap();
        let cwnd = sc.get("Cwnd").unwrap().clone();
        let change = serialize::serialize(&serialize::changeprog::Msg {
            sid,
            program_uid: sc.program_uid,
            num_fields: 1,
            fields: vec![(cwnd, 14_480)],
        })
        .unwrap();
        dp.handle_msg(&change).unwrap();
        host.measures = 0;
        let start = host.now;
        while host.now - start < span_us {
            host.now += 10;
            let t = host.now - start;
            let (acked, in_flight) = acked_inflight(t);
            let prims = Primitives {
                bytes_acked: 1448 * acked,
                packets_acked: acked,
                lost_pkts_sample: u64::from(loss_at_us == Some(t)),
                packets_in_flight: in_flight,
                rtt_sample_us: rtt_us,
                snd_cwnd: 14_480,
                ..Primitives::default()
            };
            dp.flow_invoke(sid, &prims, &mut host).unwrap();
        }
        // MEASURE: 8-byte header, program uid, field count, then the u64 fields in order.
        let Some(portus::lang::Reg::Report(idx, _, _)) = sc.get("Report.inflight") else {
            panic!("Report.inflight is a report register");
        };
        let at = 16 + 8 * usize::from(*idx);
        let last_inflight = host
            .last_measure
            .get(at..at + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
        Seen {
            reports: host.measures,
            last_inflight,
        }
    }

    fn reports(floor: u32, rtt_us: u64, span_us: u64, loss_at_us: Option<u64>) -> usize {
        run(floor, GrowRule::Kernel, rtt_us, span_us, loss_at_us, |_| {
            (1, 10)
        })
        .reports
    }

    #[test]
    fn no_floor_reports_once_per_rtt() {
        // 30 µs RTT, ACKs every 10 µs: `Micros` > 30 at the fourth ACK, so one report per 40 µs.
        let n = reports(0, 30, 10_000, None);
        assert!((240..=260).contains(&n), "{n} reports in 10 ms");
    }

    #[test]
    fn the_floor_bounds_the_report_rate_and_a_longer_rtt_wins() {
        let n = reports(1_000, 30, 10_000, None);
        assert!(
            (9..=10).contains(&n),
            "{n} reports in 10 ms at a 1 ms floor"
        );
        // An RTT above the floor: once per RTT again.
        let n = reports(1_000, 2_000, 20_000, None);
        assert!((9..=10).contains(&n), "{n} reports in 20 ms at a 2 ms RTT");
        // A floor of 0 is the per-RTT program itself.
        assert!(!reno_program(0, GrowRule::HalfAtReport).contains("max"));
    }

    #[test]
    fn a_loss_reports_at_once_under_the_floor() {
        // Within the first 900 µs no periodic report is due; the loss at 500 µs reports.
        assert_eq!(reports(1_000, 30, 900, None), 0);
        assert_eq!(
            reports(1_000, 30, 900, Some(500)),
            1,
            "the loss is its own report"
        );
    }

    #[test]
    fn the_report_carries_in_flight_as_each_rule_measures_it() {
        // 30 µs RTT: reports at t = 40, 80, ... µs. The ACK midway between two reports
        // (t % 40 == 20) is a stretch ACK: it acks 18 packets and leaves 2 in flight (20 before
        // it); the others ack 1 and leave 5 (6 before), the reporting ones included.
        let acked_inflight = |t: u64| if t % 40 == 20 { (18, 2) } else { (1, 5) };
        let kernel = run(0, GrowRule::Kernel, 30, 1_000, None, acked_inflight);
        assert!(kernel.reports > 20);
        assert_eq!(kernel.last_inflight, 20, "the most in flight before an ACK");
        let peak = run(0, GrowRule::HalfPeak, 30, 1_000, None, acked_inflight);
        assert_eq!(peak.last_inflight, 5, "the most in flight after an ACK");
        let at_report = run(0, GrowRule::HalfAtReport, 30, 1_000, None, |t| {
            if t % 40 == 20 {
                (1, 20)
            } else {
                (1, 2)
            }
        });
        assert_eq!(at_report.last_inflight, 2, "the reporting ACK's");
    }

    #[test]
    fn the_kernel_rule_grows_a_used_window_and_in_slow_start_up_to_twice_the_use() {
        let (mss, k) = (1448, GrowRule::Kernel);
        // Congestion avoidance: only a window that was filled (`is_cwnd_limited`).
        assert!(k.may_grow(100 * mss, mss, false, 100));
        assert!(
            k.may_grow(100 * mss, mss, false, 120),
            "more in flight than the window"
        );
        assert!(!k.may_grow(100 * mss, mss, false, 99));
        assert!(
            !k.may_grow(100 * mss, mss, false, 51),
            "half used is not enough"
        );
        // Slow start: while the window is below twice the most in flight.
        assert!(k.may_grow(100 * mss, mss, true, 51));
        assert!(
            !k.may_grow(100 * mss, mss, true, 50),
            "100 < 2 x 50 is false"
        );
        assert!(!k.may_grow(100 * mss, mss, true, 0));
        // The window counts in whole segments, as the datapath enforces it: 100.9 MSS is 100.
        assert!(k.may_grow(100 * mss + mss - 1, mss, false, 100));
        assert!(!k.may_grow(100 * mss + mss - 1, mss, true, 50));
        // A window below one MSS is one segment.
        assert!(k.may_grow(100, mss, false, 1));
    }

    #[test]
    fn the_half_rules_grow_while_half_the_window_is_in_flight_in_either_phase() {
        let mss = 1448;
        for rule in [GrowRule::HalfPeak, GrowRule::HalfAtReport] {
            for slow_start in [false, true] {
                assert!(rule.may_grow(100 * mss, mss, slow_start, 50));
                assert!(!rule.may_grow(100 * mss, mss, slow_start, 49));
                // Bytes, not whole segments: 99 in flight do not cover half of 198.5 MSS.
                assert!(!rule.may_grow(198 * mss + mss / 2, mss, slow_start, 99));
            }
        }
        // Where the rules part: half the window in flight in congestion avoidance.
        assert!(!GrowRule::Kernel.may_grow(100 * mss, mss, false, 50));
    }

    #[test]
    fn only_a_changed_window_is_sent_unless_asked() {
        assert!(should_send(20_000, None, false, false), "nothing sent yet");
        assert!(should_send(20_000, Some(18_552), false, false), "changed");
        assert!(
            !should_send(20_000, Some(20_000), false, false),
            "unchanged"
        );
        assert!(
            should_send(20_000, Some(20_000), true, false),
            "--update-unchanged"
        );
        assert!(
            should_send(20_000, Some(20_000), false, true),
            "keepalive due"
        );
    }
}
