// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The portus side of the shell: the congestion-control "algorithm" whose flows feed the agent
//! core ([`crate::agent_core::Core`]), the [`Shell`] that performs the core's actions, and the
//! IPC wrapper through which inputs from other threads reach the portus thread.
//!
//! portus 0.9's runtime (`RunBuilder::run`) owns its receive loop and calls the algorithm only
//! on CREATE (`new_flow`), MEASURE (`Flow::on_report`) and a flow's end (`Flow::close`); it has
//! no timer and no way to inject work, and its `Datapath` handle (which sends UPDATE_FIELDS and
//! installs programs) is not `Send`. The one place where the portus thread can wait on
//! something else is the IPC's `recv`. So [`ShellIpc`] wraps the real backend: it polls the
//! datapath socket *and* the eventfd of [`Shared`], and when the eventfd fires it hands the
//! posted inputs (ticks of the slot timer [`crate::ticker`], RPC answers of [`crate::net`],
//! other agents' notices) to the [`Shell`] through a thread-local handle (installed by
//! [`install_driver`] before portus runs; the IPC must be `Send`, the shell holds `Rc`s). The
//! slot clock is the timer thread, not the arrival of datapath messages, and no RPC is waited
//! for on this thread: the core's slot work that needs the switches resumes when their answers
//! are posted. The wrapper also drops datagrams portus could not take safely
//! ([`ccp_ipc::portus_safe`]).
//!
//! A flow's traffic class ([`Action::SetClass`], `[sched] classes`) goes out as this
//! project's SET_CLASS message, which portus's `Datapath` handle cannot send: through a
//! [`ccp_ipc::ClassSender`] addressed by the flow's socket id: a send-only netlink socket to the
//! kernel ([`ccp_ipc::KernelSender`]) with `--ipc netlink`, the BPF datapath's control map
//! ([`ccp_ipc::BpfClassSender`]) with `--ipc bpf`. With `--ipc unix` there is none (the run logs
//! it once at start).

use crate::agent_core::{Action, Command, Core, Input, LocalFlow, Measurement};
use crate::flows::FlowKey;
use crate::monitor::Monitor;
use crate::net::Net;
use crate::shared::Shared;
use ccp_ipc::PollableIpc;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use portus::ipc::Ipc;
use portus::lang::Scope;
use portus::{CongAlg, Datapath, DatapathInfo, DatapathTrait, Flow, Report};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Name of the datapath program in portus's table.
pub const PROGRAM_NAME: &str = "mlcc";

/// One flow's datapath handle and, once installed, the program's scope.
struct DpFlow<I: Ipc> {
    dp: Datapath<I>,
    scope: Option<Scope>,
    key: FlowKey,
}

/// The shell around the core on the portus thread: feeds it inputs and performs its actions
/// (datapath commands here, RPCs through [`Net`], status and RTTs into [`Shared`]).
pub struct Shell<I: Ipc> {
    core: Core,
    /// Where SET_CLASS goes (see the module docs); `None`: classes are not sent.
    classes: Option<Box<dyn ccp_ipc::ClassSender>>,
    flows: HashMap<LocalFlow, DpFlow<I>>,
    next_local: LocalFlow,
    monitor: Monitor,
    last_refresh: Option<Instant>,
    net: Net,
    shared: Arc<Shared>,
    /// Time this thread spent on the current slot's work so far, µs: in the core and its
    /// actions for the slot's tick and the switches' answers (waits for the switches are not
    /// work: the thread serves the datapath meanwhile).
    slot_work_us: u64,
    /// The inputs [`Shell::feed`] has still to hand to the core, kept between calls so that a
    /// report (one input, no actions) allocates nothing: its capacity is reused.
    queue: VecDeque<Input>,
}

impl<I: Ipc> Shell<I> {
    /// A shell around `core`, reading the progress regions with `monitor`, sending the flows'
    /// traffic classes through `classes` (`None`: not sent).
    pub fn new(
        core: Core,
        monitor: Monitor,
        net: Net,
        shared: Arc<Shared>,
        classes: Option<Box<dyn ccp_ipc::ClassSender>>,
    ) -> Self {
        Shell {
            core,
            classes,
            flows: HashMap::new(),
            next_local: 1,
            monitor,
            last_refresh: None,
            net,
            shared,
            slot_work_us: 0,
            queue: VecDeque::new(),
        }
    }

    /// Reads the progress regions and hands the reading to the core.
    fn read_progress(&mut self) {
        self.monitor.refresh();
        self.last_refresh = Some(Instant::now());
        self.feed(Input::Progress(self.monitor.registrations().clone()));
    }

    /// Hands `input` to the core and performs the actions, with the inputs they produce.
    fn feed(&mut self, input: Input) {
        let started = Instant::now();
        if matches!(input, Input::Tick { .. }) {
            self.slot_work_us = 0;
        }
        let slot_work = matches!(
            input,
            Input::Tick { .. } | Input::Feedback { .. } | Input::Admission { .. }
        );
        // Taken out of `self` while `perform` borrows it; put back (empty, its capacity kept)
        // at the end (`perform` never calls `feed`).
        let mut queue = std::mem::take(&mut self.queue);
        queue.push_back(input);
        while let Some(input) = queue.pop_front() {
            let (planned, t0) = (self.core.slots_planned(), Instant::now());
            let actions = self.core.handle(input);
            if self.core.slots_planned() != planned {
                self.shared
                    .timings
                    .decision
                    .observe(t0.elapsed().as_secs_f64());
            }
            for a in actions {
                if let Some(back) = self.perform(a, started) {
                    queue.push_back(back);
                }
            }
        }
        self.queue = queue;
        if slot_work {
            let spent = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.slot_work_us = self.slot_work_us.saturating_add(spent);
        }
    }

    /// Performs one action; returns the input that reports its failure, if any.
    fn perform(&mut self, a: Action, started: Instant) -> Option<Input> {
        match a {
            Action::Install {
                flow,
                rate_bytes,
                cwnd_bytes,
                slot_us,
            } => {
                let f = self.flows.get_mut(&flow)?;
                match f.dp.set_program(
                    PROGRAM_NAME,
                    Some(&[
                        ("Cwnd", cwnd_bytes),
                        ("Control.cwnd_cap", cwnd_bytes),
                        ("Rate", rate_bytes),
                        ("Control.slot_us", slot_us),
                    ]),
                ) {
                    Ok(sc) => {
                        f.scope = Some(sc);
                        tracing::info!(flow = %f.key, "program installed");
                        None
                    }
                    Err(e) => {
                        tracing::warn!(flow = %f.key, error = %e.0, "set_program failed");
                        Some(Input::DatapathFailed {
                            flow,
                            command: Command::Install,
                        })
                    }
                }
            }
            Action::SetRate {
                flow,
                rate_bytes,
                cwnd_bytes,
                scavenge_us,
            } => {
                let f = self.flows.get(&flow)?;
                let sc = f.scope.as_ref()?;
                match f.dp.update_field(
                    sc,
                    &[
                        ("Rate", rate_bytes),
                        ("Control.cwnd_cap", cwnd_bytes),
                        ("Control.scavenge_us", scavenge_us),
                    ],
                ) {
                    Ok(()) => None,
                    Err(e) => {
                        tracing::warn!(flow = %f.key, error = %e.0, "setting Rate, Control.cwnd_cap and Control.scavenge_us failed");
                        Some(Input::DatapathFailed {
                            flow,
                            command: Command::SetRate,
                        })
                    }
                }
            }
            Action::SetClass { flow, dscp } => {
                let f = self.flows.get(&flow)?;
                let sender = self.classes.as_ref()?;
                let sid = f.dp.get_sock_id();
                match sender.set_class(sid, dscp) {
                    Ok(()) => {
                        tracing::debug!(flow = %f.key, sid, ?dscp, "traffic class set");
                        None
                    }
                    Err(e) => {
                        self.shared
                            .class_send_failures
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tracing::warn!(flow = %f.key, sid, ?dscp, error = %e, "SET_CLASS failed (sent again at the next rate update)");
                        Some(Input::DatapathFailed {
                            flow,
                            command: Command::SetClass,
                        })
                    }
                }
            }
            Action::Rpc(rpc) => {
                self.net.perform(rpc);
                None
            }
            Action::Status(mut s) => {
                let spent = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                s.slot_work_us = self.slot_work_us.saturating_add(spent);
                self.shared
                    .timings
                    .slot_work
                    .observe(s.slot_work_us as f64 / 1e6);
                *self.shared.status.lock().unwrap_or_else(|p| p.into_inner()) = s;
                None
            }
            Action::Rtts(r) => {
                *self.shared.rtt_us.lock().unwrap_or_else(|p| p.into_inner()) = r;
                None
            }
        }
    }

    /// A CREATE: numbers the flow, reads the progress regions (at most once a millisecond in
    /// a burst of CREATEs; a flow whose region was missed gets its program at the next slot)
    /// and tells the core.
    fn new_flow(&mut self, dp: Datapath<I>, info: &DatapathInfo) -> LocalFlow {
        let key = FlowKey::from_ccp(info.src_ip, info.src_port, info.dst_ip, info.dst_port);
        let local = self.next_local;
        self.next_local += 1;
        self.flows.insert(
            local,
            DpFlow {
                dp,
                scope: None,
                key,
            },
        );
        if self
            .last_refresh
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(1))
        {
            self.read_progress();
        }
        self.feed(Input::FlowCreated {
            flow: local,
            key,
            sock_id: info.sock_id,
        });
        local
    }

    /// A MEASURE of an installed flow: its fields, dated on arrival.
    fn on_report(&mut self, local: LocalFlow, m: &Report) {
        let Some(sc) = self.flows.get(&local).and_then(|f| f.scope.as_ref()) else {
            return;
        };
        let get = |name: &str| m.get_field(name, sc).ok();
        let fields = Measurement {
            acked: get("Report.acked"),
            lost: get("Report.lost"),
            rtt_us: get("Report.rtt"),
            dp_now_us: get("Report.now"),
            arrival_ns: mltcp_progress::monotonic_ns(),
        };
        self.feed(Input::Report {
            flow: local,
            fields,
        });
    }

    fn close_flow(&mut self, local: LocalFlow) {
        self.flows.remove(&local);
        self.feed(Input::FlowClosed { flow: local });
    }

    /// Number of flows and how many run the program.
    pub fn counts(&self) -> (usize, usize) {
        self.core.counts()
    }

    /// At shutdown (the datapath socket is closed): the core takes its schedules off the
    /// switches, waited for here; the monitor detaches from the progress regions.
    pub fn shutdown(&mut self) {
        self.monitor.detach();
        for a in self.core.handle(Input::Stop {
            now_us: crate::wall_us(),
        }) {
            if let Action::Rpc(rpc) = a {
                self.net.perform_blocking(rpc);
            }
        }
    }
}

/// What [`ShellIpc`] calls on the portus thread.
pub trait Driver {
    /// Inputs were posted to [`Shared`]: hand them to the core.
    fn on_wake(&mut self);
}

impl<I: Ipc> Driver for Shell<I> {
    fn on_wake(&mut self) {
        let mut notices = Vec::new();
        for input in self.shared.take_inbox() {
            // Notices that arrived together are handled together (one round of updates).
            if let Input::Notices(n) = input {
                notices.extend(n);
                continue;
            }
            if !notices.is_empty() {
                self.feed(Input::Notices(std::mem::take(&mut notices)));
            }
            // The slot's work reads the progress regions as of its tick; a poll reads them to
            // see bursts beginning between ticks.
            if matches!(input, Input::Tick { .. } | Input::Poll) {
                self.read_progress();
            }
            self.feed(input);
        }
        if !notices.is_empty() {
            self.feed(Input::Notices(notices));
        }
    }
}

thread_local! {
    static DRIVER: RefCell<Option<Rc<RefCell<dyn Driver>>>> = const { RefCell::new(None) };
}

/// Makes `driver` the driver of the current thread (`None` removes it).
pub fn install_driver(driver: Option<Rc<RefCell<dyn Driver>>>) {
    DRIVER.with(|d| *d.borrow_mut() = driver);
}

fn with_driver(f: impl FnOnce(&mut dyn Driver)) {
    let d = DRIVER.with(|d| d.borrow().clone());
    if let Some(d) = d {
        // A driver already borrowed (never expected: portus does not nest calls) is skipped;
        // the inputs stay queued for the next wake-up.
        if let Ok(mut g) = d.try_borrow_mut() {
            f(&mut *g);
        }
    }
}

/// The IPC wrapper (see the module docs).
pub struct ShellIpc<I: PollableIpc> {
    inner: I,
    shared: Arc<Shared>,
}

impl<I: PollableIpc> ShellIpc<I> {
    /// Wraps `inner`; inputs posted to `shared` are handed to the driver.
    pub fn new(inner: I, shared: Arc<Shared>) -> Self {
        Self { inner, shared }
    }
}

/// The longest single wait, ms, so portus's stop flag is seen within it.
const MAX_WAIT_MS: u16 = 100;

/// Whether `poll` reported anything on `fd` (input, an error or a hang-up; flags nix does not
/// know count too).
fn fired(fd: &PollFd<'_>) -> bool {
    fd.any() != Some(false)
}

impl<I: PollableIpc> Ipc for ShellIpc<I> {
    type Addr = I::Addr;

    fn name() -> String {
        I::name()
    }

    fn send(&self, msg: &[u8], to: &Self::Addr) -> portus::Result<()> {
        self.inner.send(msg, to)
    }

    fn recv(&self, buf: &mut [u8]) -> portus::Result<(usize, Self::Addr)> {
        let mut fds = [
            PollFd::new(self.inner.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.shared.wake_fd(), PollFlags::POLLIN),
        ];
        // An error (EINTR) is a wait without news: portus asks again.
        let ready = poll(&mut fds, PollTimeout::from(MAX_WAIT_MS)).is_ok_and(|n| n > 0);
        let (datapath, wake) = (ready && fired(&fds[0]), ready && fired(&fds[1]));
        if wake {
            with_driver(|d| d.on_wake());
        }
        if datapath {
            let (n, addr) = self.inner.recv(buf)?;
            if !ccp_ipc::portus_safe(buf.get(..n).unwrap_or(&[])) {
                self.shared
                    .dropped_unparsable
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(
                    len = n,
                    "dropped a datapath message portus could not take (malformed, or not CREATE, MEASURE or READY)"
                );
                return Err(portus::Error(String::from("unparsable message")));
            }
            return Ok((n, addr));
        }
        // portus logs this at trace level, checks its stop flag and asks again.
        Err(portus::Error(String::from("no datapath message yet")))
    }

    fn close(&mut self) -> portus::Result<()> {
        self.inner.close()
    }
}

/// The portus algorithm of the agent: every flow, whatever algorithm name its CREATE carries
/// (`mltcp`, `mltcp_cubic`), goes to the [`Shell`].
pub struct MlccAlg<I: Ipc> {
    shell: Rc<RefCell<Shell<I>>>,
    program: String,
}

impl<I: Ipc> MlccAlg<I> {
    /// The algorithm over `shell`, installing `program` (the text of the program file).
    pub fn new(shell: Rc<RefCell<Shell<I>>>, program: String) -> Self {
        Self { shell, program }
    }
}

/// One flow: forwards reports and the close to the shell.
pub struct MlccFlow<I: Ipc> {
    shell: Rc<RefCell<Shell<I>>>,
    local: LocalFlow,
}

impl<I: Ipc> CongAlg<I> for MlccAlg<I> {
    type Flow = MlccFlow<I>;

    fn name() -> &'static str {
        "mlcc"
    }

    fn datapath_programs(&self) -> HashMap<&'static str, String> {
        HashMap::from([(PROGRAM_NAME, self.program.clone())])
    }

    fn new_flow(&self, control: Datapath<I>, info: DatapathInfo) -> Self::Flow {
        let local = match self.shell.try_borrow_mut() {
            Ok(mut s) => s.new_flow(control, &info),
            Err(_) => 0,
        };
        MlccFlow {
            shell: self.shell.clone(),
            local,
        }
    }
}

impl<I: Ipc> Flow for MlccFlow<I> {
    fn on_report(&mut self, _sock_id: u32, m: Report) {
        if let Ok(mut s) = self.shell.try_borrow_mut() {
            s.on_report(self.local, &m);
        }
    }

    fn close(&mut self) {
        if let Ok(mut s) = self.shell.try_borrow_mut() {
            s.close_flow(self.local);
        }
    }
}
