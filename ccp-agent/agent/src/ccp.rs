// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The portus side: the congestion-control "algorithm" whose flows feed [`AgentCore`], and the
//! IPC wrapper that drives the per-slot loop from portus's own receive loop.
//!
//! portus 0.9 calls an algorithm only on CREATE (`new_flow`) and MEASURE (`Flow::on_report`),
//! has no timer, and its `Datapath` handle is not `Send`. To act at slot boundaries on the
//! thread that owns the flows, [`SlotIpc`] wraps the real backend: each time portus asks for the
//! next message it first runs the slot work when a boundary has passed, then polls the socket
//! and the agent's wake-up eventfd until the next boundary (at most 100 ms, so portus also sees
//! its stop flag promptly), and drops datagrams portus could not take safely
//! ([`ccp_ipc::portus_safe`]). The slot work reaches the flows through a thread-local handle to the
//! [`AgentCore`] (installed by [`install_driver`] on the portus thread before it runs): the IPC
//! must be `Send`, the core holds `Rc`s.

use crate::engine::{AgentCore, PROGRAM_NAME};
use crate::shared::Shared;
use crate::wall_us;
use ccp_ipc::PollableIpc;
use portus::ipc::Ipc;
use portus::{CongAlg, Datapath, DatapathInfo, Flow, Report};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

/// What [`SlotIpc`] calls on the portus thread.
pub trait SlotDriver {
    /// A slot boundary passed; `now_us` is the wall-clock time.
    fn on_slot(&mut self, now_us: u64);
    /// Another agent's notice arrived.
    fn on_wake(&mut self);
}

impl<I: Ipc> SlotDriver for AgentCore<I> {
    fn on_slot(&mut self, now_us: u64) {
        AgentCore::on_slot(self, now_us)
    }
    fn on_wake(&mut self) {
        AgentCore::on_wake(self)
    }
}

thread_local! {
    static DRIVER: RefCell<Option<Rc<RefCell<dyn SlotDriver>>>> = const { RefCell::new(None) };
}

/// Makes `driver` the slot driver of the current thread (`None` removes it).
pub fn install_driver(driver: Option<Rc<RefCell<dyn SlotDriver>>>) {
    DRIVER.with(|d| *d.borrow_mut() = driver);
}

fn with_driver(f: impl FnOnce(&mut dyn SlotDriver)) {
    let d = DRIVER.with(|d| d.borrow().clone());
    if let Some(d) = d {
        // A driver already borrowed (never expected: portus does not nest calls) is skipped.
        if let Ok(mut g) = d.try_borrow_mut() {
            f(&mut *g);
        }
    }
}

/// The IPC wrapper (see the module docs).
pub struct SlotIpc<I: PollableIpc> {
    inner: I,
    slot_us: u64,
    next_tick: Cell<u64>,
    shared: Arc<Shared>,
}

impl<I: PollableIpc> SlotIpc<I> {
    /// Wraps `inner`; slots of `slot_us` (> 0) microseconds.
    pub fn new(inner: I, slot_us: u64, shared: Arc<Shared>) -> Self {
        Self {
            inner,
            slot_us: slot_us.max(1),
            next_tick: Cell::new(0),
            shared,
        }
    }
}

/// The longest single wait, so portus's stop flag is seen within it.
const MAX_WAIT_MS: u64 = 100;

impl<I: PollableIpc> Ipc for SlotIpc<I> {
    type Addr = I::Addr;

    fn name() -> String {
        I::name()
    }

    fn send(&self, msg: &[u8], to: &Self::Addr) -> portus::Result<()> {
        self.inner.send(msg, to)
    }

    fn recv(&self, buf: &mut [u8]) -> portus::Result<(usize, Self::Addr)> {
        let now = wall_us();
        if now >= self.next_tick.get() {
            self.next_tick
                .set((now / self.slot_us + 1).saturating_mul(self.slot_us));
            with_driver(|d| d.on_slot(now));
        }
        let wait_ms = (self
            .next_tick
            .get()
            .saturating_sub(wall_us())
            .div_ceil(1000))
        .clamp(1, MAX_WAIT_MS);
        let mut fds = [
            libc::pollfd {
                fd: self.inner.raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.shared.wake_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a live array of two initialised pollfd structs.
        let r = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                wait_ms as libc::c_int,
            )
        };
        if r > 0 && fds[1].revents != 0 {
            with_driver(|d| d.on_wake());
        }
        if r > 0 && fds[0].revents != 0 {
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
        Err(portus::Error(String::from(
            "no message before the slot boundary",
        )))
    }

    fn close(&mut self) -> portus::Result<()> {
        self.inner.close()
    }
}

/// The portus algorithm of the agent: every flow, whatever algorithm name its CREATE carries
/// (`mltcp`, `mltcp_cubic`), goes to the [`AgentCore`].
pub struct MlccAlg<I: Ipc> {
    core: Rc<RefCell<AgentCore<I>>>,
    program: String,
}

impl<I: Ipc> MlccAlg<I> {
    /// The algorithm over `core`, installing `program` (the text of the program file).
    pub fn new(core: Rc<RefCell<AgentCore<I>>>, program: String) -> Self {
        Self { core, program }
    }
}

/// One flow: forwards reports and the close to the core.
pub struct MlccFlow<I: Ipc> {
    core: Rc<RefCell<AgentCore<I>>>,
    local: u64,
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
        let local = match self.core.try_borrow_mut() {
            Ok(mut c) => c.new_flow(control, &info),
            Err(_) => 0,
        };
        MlccFlow {
            core: self.core.clone(),
            local,
        }
    }
}

impl<I: Ipc> Flow for MlccFlow<I> {
    fn on_report(&mut self, _sock_id: u32, m: Report) {
        if let Ok(mut c) = self.core.try_borrow_mut() {
            c.on_report(self.local, &m);
        }
    }

    fn close(&mut self) {
        if let Ok(mut c) = self.core.try_borrow_mut() {
            c.close_flow(self.local);
        }
    }
}
