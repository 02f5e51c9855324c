// SPDX-License-Identifier: GPL-2.0

//! The CCP datapath of tcp_mltcp: glue between the kernel's TCP callbacks, a netlink socket and
//! the `ccp-datapath` core.
//!
//! CCP ("Restructuring Endpoint Congestion Control", Narayan et al., SIGCOMM '18) moves
//! congestion-control decisions to a user-space agent (built on `portus`). This datapath speaks
//! the portus 0.9 wire protocol over `NETLINK_USERSOCK`, multicast group 22:
//!
//! - a new `mltcp`/`mltcp_cubic`/`mltcp_dctcp` connection is announced with CREATE when an agent
//!   listens, and its end with the closing MEASURE when the socket releases the algorithm;
//! - per ACK, the flow's primitives (derived from the socket's counters) run the agent's
//!   datapath program, which reports MEASUREs and sets `Cwnd` and `Rate`;
//! - `Rate` is enforced as the socket's maximum pacing rate with internal pacing on, `Cwnd` as
//!   cwnd; the kernel's `cong_avoid` path, loss recovery and pacing update stay in place;
//! - a traffic class the agent sets with SET_CLASS (this project's extension of the protocol,
//!   `wire::SET_CLASS`: a DSCP, or release) is written into the socket's TOS (`dscp << 2`, the
//!   ECN bits kept) with `sk_priority` = its precedence (`dscp >> 3`) for the host's qdisc,
//!   while the agent is in charge; the socket's own TOS and priority, saved when the class is
//!   first applied, come back whenever the flow returns to native MLTCP (below), on release by
//!   the agent, and when the socket releases the algorithm.
//!
//! The flow stays on native MLTCP whenever the agent is not in charge: no agent listening on
//! group 22 (a killed agent's socket closes, so this is immediate), no program installed for the
//! flow, an error in its program, or (module parameter `ccp_heartbeat_ms`, 0 = off by default)
//! no message from the agent for longer than that. Messages from senders without `CAP_NET_ADMIN` are dropped
//! and counted; so are the others the core refuses, split in two: late ones (for a flow that has
//! ended, normal under connection churn) and malformed ones.
//!
//! Locking: no datapath-wide lock on the ACK path. The core's [`ShardedDatapath`] splits the
//! 4096 flows into 64 shards of 64 flows; each shard (its flows, their glue state and a replica
//! of the program table) has its own bottom-half-safe spinlock. An ACK, and an agent message for
//! one flow, take only that flow's shard lock; flows in other shards run in parallel. INSTALL
//! (rare: when an agent starts) builds the program outside any lock, installs it under the
//! program master's lock, then copies it into each shard in turn. Whether an agent listens is an
//! atomic read per ACK; only the transitions (READY) take the agent lock. Programs are shared as
//! `Arc<Program>`: a replica holds a pointer per program, and an INSTALL replacing a program
//! frees the old one when the last replica lets it go.
//!
//! Programs run per ACK in their compiled form, built by the core at INSTALL
//! (`ccp_datapath::compiled`); module parameter `ccp_interpret` = 1 (writable at run time, read
//! per ACK) forces the core's interpreter, the reference, with the same results.
//!
//! Read-only module parameters show the datapath's state: `ccp_live_flows` (CCP flows in the
//! table now: back to 0 once every offered connection is gone), `ccp_dropped_late`,
//! `ccp_dropped_malformed`, `ccp_dropped_unprivileged` and `ccp_table_full`.

use super::ccp_datapath::{
    DatapathOps, DropCause, Error as CcpError, ExecMode, FlowInfo, FlowLoc, FlowTable, Invoked,
    Primitives, Program, ProgramMaster, ProgramStore, ProgramTable, SendError, ShardedDatapath,
    Shards,
};
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicUsize, Ordering};
use kernel::{
    alloc::{flags, KVec, VBox},
    init::{pin_init_array_from_fn, zeroed, Zeroable},
    net::netlink::{capability, KernelSocket, Message, Receiver},
    net::tcp::{PacingStatus, Sock},
    new_condvar, new_spinlock, new_spinlock_bh,
    prelude::*,
    sync::{Arc, CondVar, SpinLock, SpinLockBh, UniqueArc},
    time::Ktime,
};

// The netlink protocol and multicast group of the CCP messages (defined with the wire format).
use super::ccp_datapath::wire::{CCP_GROUP, NETLINK_USERSOCK};
/// Shards of the flow table, each behind its own lock.
const SHARDS: usize = 64;
/// Flows per shard.
const PER_SHARD: usize = 64;
/// Concurrent CCP flows (a full table leaves new flows on native MLTCP).
const FLOWS: usize = SHARDS * PER_SHARD;
/// Installed datapath programs.
const PROGRAMS: usize = 32;

/// The core over our shards; programs live in kernel `Arc`s.
type Core = ShardedDatapath<SHARDS, PER_SHARD, PROGRAMS, KernelPrograms>;

/// The program store of the kernel: each installed program in its own `Arc` (about 14 KiB,
/// allocated in the netlink input's process context), shared by the master table and the
/// shards' replicas, freed with the last of them.
struct KernelPrograms;

// SAFETY: The all-zero `Program` is a valid value, the empty program (`Program::new()`): its
// fields are integers, bools and arrays of `Event`/`Instr`/`FlatInstr`/`Step` (its `Compiled`
// form), whose fields are integers and the fieldless `#[repr(u8)]` enums `Op`, `RegKind` and
// `StepKind`, each with a variant of discriminant 0 (the core documents this, and its
// `all_zero_is_new` tests check it).
unsafe impl Zeroable for Program {}

impl ProgramStore for KernelPrograms {
    type Shared = Arc<Program>;

    fn build(
        fill: impl FnOnce(&mut Program) -> core::result::Result<(), CcpError>,
    ) -> core::result::Result<Arc<Program>, CcpError> {
        let empty = UniqueArc::<Program>::new_uninit(flags::GFP_KERNEL)
            .map_err(|_| CcpError::AllocFailed)?;
        let Ok(mut prog) = empty.init_with(zeroed());
        fill(&mut prog)?;
        Ok(prog.into())
    }
}
/// The id this datapath announces in READY.
const DATAPATH_ID: u32 = 0;

/// Per-flow glue state beside the core's flow table, indexed like it (sid & 0xffff) - 1.
#[derive(Clone, Copy)]
struct FlowExtra {
    /// `tp->bytes_acked` at the previous invocation, bytes.
    last_bytes_acked: u64,
    /// `tp->lost` at the previous invocation, packets.
    last_lost: u32,
    /// The cwnd the agent last set, bytes (0: none yet).
    cwnd_bytes: u64,
    /// The rate the agent last set, bytes/s (0: none).
    rate_bps: u64,
    /// Whether the agent currently controls the flow (pacing limit installed).
    controlled: bool,
    /// A program error made the flow native for good.
    dead: bool,
    /// The DSCP the agent set (SET_CLASS), valid when `has_class`; kept while the flow is
    /// native, so that it applies again when the agent is back in charge.
    class_dscp: u8,
    has_class: bool,
    /// Whether the socket carries the agent's class now (its own TOS and priority saved).
    class_applied: bool,
    /// The socket's own TOS octet and `sk_priority`, saved when the class was applied.
    own_tos: u8,
    own_priority: u32,
    /// The TOS octet (without ECN bits) and priority the class left on the socket: a restore
    /// puts the socket's own back only where they are still there (a `setsockopt(IP_TOS)` or
    /// `SO_PRIORITY` meanwhile wins).
    applied_tos: u8,
    applied_priority: u32,
}

/// The ECN bits of a TOS octet (RFC 3168 §5), which TCP owns.
const ECN_MASK: u8 = 0b11;

/// One shard's flows: the core's table and the glue state of each slot (same index).
struct ShardFlows {
    table: FlowTable<PER_SHARD>,
    extra: [FlowExtra; PER_SHARD],
}

/// What one shard lock guards.
struct Shard {
    /// Always `Some` once the datapath is built (an `Option` only so the shards can be
    /// pin-initialised from boxes allocated before).
    flows: Option<VBox<ShardFlows>>,
    /// This shard's replica of the program table.
    programs: ProgramTable<PROGRAMS, Arc<Program>>,
}

/// A shard's flow table, glue state and program replica, borrowed apart ([`Shard::parts`]).
type ShardParts<'a> = (
    &'a mut FlowTable<PER_SHARD>,
    &'a mut [FlowExtra; PER_SHARD],
    &'a mut ProgramTable<PROGRAMS, Arc<Program>>,
);

impl Shard {
    /// The flow table, glue state and program replica, split for separate borrows.
    fn parts(&mut self) -> Option<ShardParts<'_>> {
        let f = self.flows.as_deref_mut()?;
        Some((&mut f.table, &mut f.extra, &mut self.programs))
    }
}

/// Declares a read-only `u64` module parameter through which the datapath reports its state.
macro_rules! ccp_stat {
    ($(#[$m:meta])* $id:ident, $name:literal, $desc:literal) => {
        kernel::module_param!(
            $(#[$m])*
            static $id: u64 = 0;
            module: "tcp_mltcp", name: $name, perm: 0o444, check: kernel::module_param::read_only,
            desc: $desc
        );
    };
}

ccp_stat!(
    /// CCP flows in the table now (offered to an agent and not released).
    LIVE_FLOWS, "ccp_live_flows",
    "CCP: flows offered to the agent and not yet closed (read-only; 0 when no such connection is left)"
);
ccp_stat!(
    /// Agent messages dropped because their flow has ended.
    DROPPED_LATE, "ccp_dropped_late",
    "CCP: agent messages dropped because their flow had ended (normal under connection churn; read-only)"
);
ccp_stat!(
    /// Agent messages dropped as malformed or refused.
    DROPPED_MALFORMED, "ccp_dropped_malformed",
    "CCP: agent messages dropped as malformed or refused (read-only)"
);
ccp_stat!(
    /// Messages dropped because their sender lacks CAP_NET_ADMIN.
    DROPPED_UNPRIVILEGED, "ccp_dropped_unprivileged",
    "CCP: netlink messages dropped because the sender lacks CAP_NET_ADMIN (read-only)"
);
ccp_stat!(
    /// New flows that found the flow table full (and stayed native).
    TABLE_FULL, "ccp_table_full",
    "CCP: new flows that found the flow table full and stayed native (read-only)"
);

/// Whether the `n`-th (from 0) occurrence of something is logged: the 1st, 2nd, 4th, 8th...
fn log_now(n: u64) -> bool {
    n == 0 || n.is_power_of_two()
}

#[pin_data]
struct Ccp {
    /// The flow shards: an ACK or a per-flow agent message takes only its flow's.
    #[pin]
    shards: [SpinLockBh<Shard>; SHARDS],
    /// The program master table and the counters of messages no shard owns (INSTALL, malformed).
    #[pin]
    master: SpinLockBh<ProgramMaster<PROGRAMS, Arc<Program>>>,
    /// Serialises the agent transitions (READY; see [`Ccp::check_agent`]).
    #[pin]
    agent_lock: SpinLockBh<()>,
    /// The unload waits here, under this lock, for the netlink inputs still inside (see
    /// [`INPUT_GATE`]).
    #[pin]
    gate: SpinLock<()>,
    #[pin]
    drained: CondVar,
    core: Core,
    nl: KernelSocket<NetlinkRx>,
    /// Whether an agent was listening when last checked (for the transition log lines).
    agent_up: AtomicBool,
    /// CLOCK_MONOTONIC ns of the last message from a privileged sender (the agent).
    last_msg_ns: AtomicI64,
    /// Whether the agent was past the heartbeat timeout when last checked (for the log lines).
    silent: AtomicBool,
}

/// The live datapath (null while loading or unloading).
static CCP: AtomicPtr<Ccp> = AtomicPtr::new(core::ptr::null_mut());

/// Bit of [`INPUT_GATE`] that says the gate is closed (before the datapath is published, and
/// from the start of the unload).
const GATE_CLOSED: usize = 1 << (usize::BITS - 1);

/// The gate of the netlink input callbacks: [`GATE_CLOSED`] plus the number of inputs inside.
///
/// The netlink core calls [`NetlinkRx::receive`] in the sending process's context and does not
/// wait for it when the socket is released, so unload must wait for the inputs that use the
/// datapath. An input enters only while the gate is open, by a compare-and-swap that increments
/// the count (so no input can enter once the unload closed it), and uses [`CCP`] only while
/// inside. It leaves by decrementing: with a compare-and-swap while the gate is open (no lock);
/// once the gate is closed, under [`Ccp::gate`], waking the unload when it was the last. The
/// unload closes the gate (`fetch_or`), then sleeps on [`Ccp::drained`] under [`Ccp::gate`]
/// until the count is 0; see [`CcpHandle::drop`] for why that is neither a lost wake-up nor a
/// use after free.
static INPUT_GATE: AtomicUsize = AtomicUsize::new(GATE_CLOSED);

/// Enters the gate; false (and nothing to undo) when it is closed.
fn gate_enter() -> bool {
    let mut s = INPUT_GATE.load(Ordering::Relaxed);
    loop {
        if s & GATE_CLOSED != 0 {
            return false;
        }
        match INPUT_GATE.compare_exchange_weak(
            s,
            s.wrapping_add(1),
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => return true,
            Err(now) => s = now,
        }
    }
}

/// Leaves the gate entered by [`gate_enter`]; `c` is the datapath used inside.
fn gate_leave(c: &Ccp) {
    let mut s = INPUT_GATE.load(Ordering::Relaxed);
    loop {
        if s & GATE_CLOSED != 0 {
            // Unloading: decrement under the gate lock, so the unload, which checks the count
            // under the same lock, either sees this decrement or is asleep on `drained` and is
            // woken here. `c` stays valid until this function has released the lock: the
            // unload frees it only after it took the lock again and saw the count at 0.
            let _g = c.gate.lock();
            let before = INPUT_GATE.fetch_sub(1, Ordering::AcqRel);
            if before & !GATE_CLOSED == 1 {
                c.drained.notify_all();
            }
            return;
        }
        match INPUT_GATE.compare_exchange_weak(
            s,
            s.wrapping_sub(1),
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => return,
            Err(now) => s = now,
        }
    }
}

/// The datapath, owned by the module; unpublished and freed on drop.
pub(crate) struct CcpHandle(Option<Pin<VBox<Ccp>>>);

/// One zeroed shard flow table.
fn new_shard_flows() -> Result<VBox<ShardFlows>> {
    let flows = VBox::<ShardFlows>::new_uninit(flags::GFP_KERNEL | flags::__GFP_ZERO)?;
    // SAFETY: All-zero is a valid `ShardFlows`: the core documents that an all-zero `FlowTable`
    // equals `FlowTable::new()` (its test `all_zero_is_new` checks it), and `FlowExtra` is
    // integers and bools.
    Ok(unsafe { flows.assume_init() })
}

impl CcpHandle {
    /// Allocates the shards (zeroed flow tables: the core's documented initial state), creates
    /// the netlink socket and publishes the datapath. Sends READY in case an agent already
    /// listens.
    pub(crate) fn new(module: &'static ThisModule) -> Result<Self> {
        let mut boxes = KVec::with_capacity(SHARDS, flags::GFP_KERNEL)?;
        for _ in 0..SHARDS {
            boxes.push(new_shard_flows()?, flags::GFP_KERNEL)?;
        }
        let mut boxes = boxes.into_iter();
        let nl = KernelSocket::new(module, NETLINK_USERSOCK, CCP_GROUP)?;
        let ccp = VBox::pin_init(
            pin_init!(Ccp {
                shards <- pin_init_array_from_fn(|_| {
                    new_spinlock_bh!(
                        Shard { flows: boxes.next(), programs: ProgramTable::new() },
                        "tcp_mltcp_ccp_shard"
                    )
                }),
                master <- new_spinlock_bh!(ProgramMaster::new(), "tcp_mltcp_ccp_programs"),
                agent_lock <- new_spinlock_bh!((), "tcp_mltcp_ccp_agent"),
                gate <- new_spinlock!((), "tcp_mltcp_ccp_gate"),
                drained <- new_condvar!("tcp_mltcp_ccp_drained"),
                core: Core::new(0),
                nl,
                agent_up: AtomicBool::new(false),
                last_msg_ns: AtomicI64::new(Ktime::ktime_get().to_ns()),
                silent: AtomicBool::new(false),
            }),
            flags::GFP_KERNEL,
        )?;
        CCP.store(&*ccp as *const Ccp as *mut Ccp, Ordering::Release);
        // Open the gate: netlink inputs may use the datapath from now on.
        INPUT_GATE.fetch_and(!GATE_CLOSED, Ordering::Release);
        ccp.check_agent();
        Ok(Self(Some(ccp)))
    }
}

impl Drop for CcpHandle {
    /// Waits, asleep, for the netlink inputs still using the datapath, then frees it.
    ///
    /// Why this is correct:
    /// - No input enters after the `fetch_or`: entering is a compare-and-swap that fails on a
    ///   closed gate. So the count only falls from here.
    /// - No lost wake-up: an input that leaves before the `fetch_or` decrements with a
    ///   compare-and-swap, which then fails or lands before it, so the count read below
    ///   includes it. One that leaves after decrements under `gate`, the lock under which this
    ///   function reads the count, and notifies `drained` when it was the last; `CondVar::wait`
    ///   releases `gate` only once this thread is on the wait queue, so the notification finds
    ///   it there.
    /// - No use after free: the last input touches the datapath (`gate`, `drained`) only while
    ///   holding `gate`, and a spinlock's unlock is its last access to the lock; this function
    ///   frees the datapath only after it took `gate` again and saw the count at 0.
    /// - TCP callbacks need no gate: a socket using one of the module's algorithms holds a
    ///   module reference, so the module (and this drop) cannot go while they run.
    ///
    /// What is left is the few instructions of module text an input runs after leaving the gate
    /// (returning through `KernelSocket::input`); the module's text is freed after the kernel's
    /// `free_module()` waits for an RCU grace period, which, with this kernel's non-preemptible
    /// configuration, the input's CPU reaches only after it has left them.
    fn drop(&mut self) {
        let Some(ccp) = self.0.take() else { return };
        INPUT_GATE.fetch_or(GATE_CLOSED, Ordering::AcqRel);
        {
            let mut g = ccp.gate.lock();
            while INPUT_GATE.load(Ordering::Acquire) & !GATE_CLOSED != 0 {
                ccp.drained.wait(&mut g);
            }
        }
        CCP.store(core::ptr::null_mut(), Ordering::Release);
        pr_info!(
            "ccp: dropped {} unprivileged, {} late and {} malformed messages; {} flows found the table full\n",
            DROPPED_UNPRIVILEGED.get(),
            DROPPED_LATE.get(),
            DROPPED_MALFORMED.get(),
            TABLE_FULL.get()
        );
        drop(ccp);
    }
}

fn ccp() -> Option<&'static Ccp> {
    let p = CCP.load(Ordering::Acquire);
    // SAFETY: A non-null pointer is the pinned `Ccp` owned by the module's `CcpHandle`, which
    // outlives every TCP callback (the module cannot unload while a socket uses it); netlink
    // input callbacks use it only inside `INPUT_GATE`, which `CcpHandle::drop` drains before
    // freeing it.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// `DatapathOps` for one invocation: sends through netlink, records what the program sets.
struct Ops<'a> {
    nl: &'a KernelSocket<NetlinkRx>,
    now_us: u64,
    cwnd_bytes: Option<u64>,
    rate_bps: Option<u64>,
    /// A class change of this invocation: `Some(Some(dscp))`, `Some(None)` (release), `None`.
    class: Option<Option<u8>>,
}

impl<'a> Ops<'a> {
    fn new(nl: &'a KernelSocket<NetlinkRx>, now_us: u64) -> Self {
        Ops {
            nl,
            now_us,
            cwnd_bytes: None,
            rate_bps: None,
            class: None,
        }
    }
}

impl DatapathOps for Ops<'_> {
    fn now_us(&self) -> u64 {
        self.now_us
    }
    fn send_msg(&mut self, msg: &[u8]) -> Result<(), SendError> {
        self.nl
            .multicast(CCP_GROUP, msg, flags::GFP_ATOMIC)
            .map_err(|_| SendError)
    }
    fn set_cwnd(&mut self, bytes: u64) {
        self.cwnd_bytes = Some(bytes);
    }
    fn set_rate_abs(&mut self, bytes_per_sec: u64) {
        self.rate_bps = Some(bytes_per_sec);
    }
    fn set_class(&mut self, dscp: Option<u8>) {
        self.class = Some(dscp);
    }
}

impl Shards<PER_SHARD, PROGRAMS, Arc<Program>> for Ccp {
    fn with_shard<R>(
        &self,
        shard: usize,
        f: impl FnOnce(&mut FlowTable<PER_SHARD>, &mut ProgramTable<PROGRAMS, Arc<Program>>) -> R,
    ) -> Option<R> {
        let mut g = self.shards.get(shard)?.lock();
        let (table, _, programs) = g.parts()?;
        Some(f(table, programs))
    }

    fn with_master<R>(&self, f: impl FnOnce(&mut ProgramMaster<PROGRAMS, Arc<Program>>) -> R) -> R {
        f(&mut self.master.lock())
    }
}

impl Ccp {
    /// Whether an agent listens now; logs the transitions (once each) and sends READY when one
    /// appears, so it installs its programs.
    ///
    /// Lock-free while nothing changes (one `netlink_has_listeners()` and one atomic load, as on
    /// every ACK). A transition is handled under `agent_lock`, and `agent_up` turns true only
    /// after READY was sent. A CREATE is sent only after this returned true: either its caller
    /// saw `agent_up` true, so READY was already sent, or it took `agent_lock`, behind the one
    /// who sent READY. So the READY of a new agent always reaches it before any CREATE that
    /// follows the transition. (Without this, a CREATE sent by another CPU between the
    /// transition and the READY reached portus first; portus then dropped the flow on READY and
    /// re-installed its programs, leaving that flow native.)
    fn check_agent(&self) -> bool {
        let up = self.nl.has_listeners(CCP_GROUP);
        if up == self.agent_up.load(Ordering::Acquire) {
            return up;
        }
        let _g = self.agent_lock.lock();
        let up = self.nl.has_listeners(CCP_GROUP);
        if up != self.agent_up.load(Ordering::Relaxed) {
            if up {
                pr_info!(
                    "ccp: agent listening on netlink group {}: new flows are offered to it\n",
                    CCP_GROUP
                );
                // A new agent counts as heard from now.
                self.last_msg_ns
                    .store(Ktime::ktime_get().to_ns(), Ordering::Relaxed);
                let mut ops = Ops::new(&self.nl, 0);
                let _ = self.core.send_ready(self, DATAPATH_ID, &mut ops);
            } else {
                pr_info!("ccp: agent gone: every flow is back on native MLTCP\n");
            }
            self.agent_up.store(up, Ordering::Release);
        }
        up
    }

    /// False when the heartbeat is on (`ccp_heartbeat_ms` > 0) and the agent has sent nothing for
    /// longer than it; logs each transition once. No READY when the agent speaks again: its
    /// flows and programs are still in place, so control simply resumes.
    fn heard_recently(&self) -> bool {
        let hb_ms = super::ccp_heartbeat_ms();
        if hb_ms == 0 {
            return true;
        }
        let idle_ns = Ktime::ktime_get()
            .to_ns()
            .saturating_sub(self.last_msg_ns.load(Ordering::Relaxed));
        let silent = idle_ns > i64::from(hb_ms).saturating_mul(1_000_000);
        // A plain load first: on almost every ACK nothing changed, and a swap would write the
        // shared cache line on each one. Only a transition pays for the swap, and the swap's
        // result decides which CPU logs it.
        if silent != self.silent.load(Ordering::Acquire)
            && silent != self.silent.swap(silent, Ordering::AcqRel)
        {
            if silent {
                pr_info!(
                    "ccp: no message from the agent for over {} ms: flows back on native MLTCP\n",
                    hb_ms
                );
            } else {
                pr_info!("ccp: the agent speaks again: its flows are under its control again\n");
            }
        }
        !silent
    }

    /// Runs `f` on the glue state of the flow slot at `loc`, under that flow's shard lock.
    fn with_extra<R>(&self, loc: FlowLoc, f: impl FnOnce(&mut FlowExtra) -> R) -> Option<R> {
        let mut g = self.shards.get(loc.shard)?.lock();
        let (_, extra, _) = g.parts()?;
        Some(f(extra.get_mut(loc.slot)?))
    }

    fn receive(&self, msg: &Message<'_>) {
        if !msg.sender_capable(capability::NET_ADMIN) {
            let n = DROPPED_UNPRIVILEGED.add(1);
            if log_now(n) {
                pr_warn!(
                    "ccp: dropped a message from a sender without CAP_NET_ADMIN (total {})\n",
                    n + 1
                );
            }
            return;
        }
        self.last_msg_ns
            .store(Ktime::ktime_get().to_ns(), Ordering::Relaxed);
        // UPDATE_FIELDS and CHANGE_PROG lock only their flow's shard; INSTALL the program
        // master, then each shard in turn.
        match self.core.handle_msg(self, msg.payload()) {
            Ok(_) => {}
            Err((_, DropCause::Late)) => {
                let n = DROPPED_LATE.add(1);
                if log_now(n) {
                    pr_info!("ccp: dropped an agent message for a flow that has ended (normal when connections close; total {})\n", n + 1);
                }
            }
            Err((e, DropCause::Malformed)) => {
                let n = DROPPED_MALFORMED.add(1);
                if log_now(n) {
                    pr_warn!(
                        "ccp: dropped a malformed or refused agent message: {:?} (total {})\n",
                        e,
                        n + 1
                    );
                }
            }
        }
    }
}

/// Receives the agent's messages.
pub(crate) struct NetlinkRx;

impl Receiver for NetlinkRx {
    fn receive(msg: &Message<'_>) {
        if !gate_enter() {
            return;
        }
        // Inside the gate the datapath is published (it is, before the gate opens) and stays
        // alive until this input has left.
        match ccp() {
            Some(c) => {
                c.receive(msg);
                gate_leave(c);
            }
            None => {
                // Not reached (the gate is open only while `CCP` is set); undo the entry
                // without a datapath to wake anyone through.
                INPUT_GATE.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

/// Offers a new connection to the agent (when one listens). Returns the CCP socket id to keep
/// in the socket's private data, or 0 (native only).
pub(crate) fn flow_init<T: ?Sized>(sk: &Sock<'_, T>, alg: &[u8]) -> u32 {
    let Some(c) = ccp() else { return 0 };
    let a = sk.inet_addrs();
    let mss = sk.mss_cache();
    let info = FlowInfo {
        init_cwnd: sk.snd_cwnd().saturating_mul(mss),
        mss,
        src_ip: a.saddr_be,
        src_port: a.sport_be.into(),
        dst_ip: a.daddr_be,
        dst_port: a.dport_be.into(),
        alg: [0; super::ccp_datapath::FLOW_ALG_NAME_MAX],
    };
    let Ok(info) = info.with_alg_name(alg) else {
        return 0;
    };
    if !c.check_agent() {
        return 0;
    }
    let mut ops = Ops::new(&c.nl, sk.tcp_mstamp_us());
    match c.core.flow_start(c, &info, &mut ops) {
        Ok(sid) => {
            // The slot's glue state is reset in a second short critical section: nothing else
            // reads it before this socket keeps `sid` (the slot's previous flow has ended).
            if let Some(loc) = Core::locate(sid) {
                c.with_extra(loc, |e| {
                    *e = FlowExtra {
                        last_bytes_acked: sk.bytes_acked(),
                        last_lost: sk.lost(),
                        cwnd_bytes: 0,
                        rate_bps: 0,
                        controlled: false,
                        dead: false,
                        class_dscp: 0,
                        has_class: false,
                        class_applied: false,
                        own_tos: 0,
                        own_priority: 0,
                        applied_tos: 0,
                        applied_priority: 0,
                    }
                });
            }
            LIVE_FLOWS.add(1);
            sid
        }
        Err(CcpError::FlowTableFull) => {
            let n = TABLE_FULL.add(1);
            if log_now(n) {
                pr_warn!(
                    "ccp: flow table full ({} flows): new flow stays native (total {})\n",
                    FLOWS,
                    n + 1
                );
            }
            0
        }
        Err(_) => 0,
    }
}

/// Runs the agent's program for this ACK. Returns true when the agent is in charge of the flow
/// (the caller then skips native MLTCP growth); false means native MLTCP runs.
///
/// Takes only the flow's shard lock.
pub(crate) fn on_ack<T: ?Sized>(sk: &mut Sock<'_, T>, sid: u32, acked: u32) -> bool {
    let Some(c) = ccp() else { return false };
    let Some(loc) = Core::locate(sid) else {
        return false;
    };
    // New flows are offered whenever an agent listens (a restarted agent speaks only once it is
    // offered one); control additionally needs the agent to have spoken recently.
    let up = c.check_agent() && c.heard_recently();
    let Some(shard) = c.shards.get(loc.shard) else {
        return false;
    };
    let mut guard = shard.lock();
    let Some((table, extra, programs)) = guard.parts() else {
        return false;
    };
    let Some(e) = extra.get_mut(loc.slot) else {
        return false;
    };
    if !up || e.dead {
        release_control(sk, e);
        return false;
    }
    let mss = u64::from(sk.mss_cache().max(1));
    let bytes_acked = sk.bytes_acked();
    let lost = sk.lost();
    let in_flight = u64::from(sk.packets_in_flight());
    let cur_cwnd_bytes = u64::from(sk.snd_cwnd()).saturating_mul(mss);
    let rate = delivery_rate_bps(sk, mss);
    let prims = Primitives {
        bytes_acked: bytes_acked.wrapping_sub(e.last_bytes_acked),
        packets_acked: acked.into(),
        lost_pkts_sample: lost.wrapping_sub(e.last_lost).into(),
        bytes_in_flight: in_flight.saturating_mul(mss),
        packets_in_flight: in_flight,
        rate_incoming: rate,
        rate_outgoing: rate,
        // The smoothed RTT: the last raw sample is not kept (no room in icsk_ca_priv for
        // mltcp_cubic), which makes `Flow.rtt_sample_us` smoother than libccp's.
        rtt_sample_us: sk.srtt_us().into(),
        was_timeout: sk.ca_state() == kernel::net::tcp::cong::state::LOSS,
        snd_cwnd: if e.cwnd_bytes != 0 {
            e.cwnd_bytes
        } else {
            cur_cwnd_bytes
        },
        snd_rate: e.rate_bps,
        ..Primitives::default()
    };
    e.last_bytes_acked = bytes_acked;
    e.last_lost = lost;
    // `ccp_interpret` is writable at run time: the shard's replica follows it from its next ACK
    // (an INSTALL's new replica, a copy of the master's, is corrected here too).
    let mode = if super::ccp_interpret() {
        ExecMode::Interpret
    } else {
        ExecMode::Compiled
    };
    if programs.exec_mode() != mode {
        programs.set_exec_mode(mode);
    }
    let mut ops = Ops::new(&c.nl, sk.tcp_mstamp_us());
    let r = table.invoke(loc, sid, programs, &prims, c.core.time_zero_us(), &mut ops);
    // A class change is recorded whatever the outcome; it is applied only under control.
    if let Some(class) = ops.class {
        e.class_dscp = class.unwrap_or(0);
        e.has_class = class.is_some();
    }
    match r {
        Ok(Invoked::Ran { .. }) => {
            if let Some(b) = ops.cwnd_bytes {
                e.cwnd_bytes = b;
                let segs = (b / mss).clamp(1, u64::from(sk.snd_cwnd_clamp().max(1)));
                sk.set_snd_cwnd(segs as u32);
            }
            if let Some(r) = ops.rate_bps {
                e.rate_bps = r;
            }
            take_control(sk, e);
            true
        }
        Ok(Invoked::CreatePending) | Ok(Invoked::NoProgram) => {
            release_control(sk, e);
            false
        }
        Err(_) => {
            // A broken or vanished program (e.g. the agent restarted): native for good.
            e.dead = true;
            release_control(sk, e);
            false
        }
    }
}

/// Enforces the agent's rate through the pacing limit, with internal pacing on.
fn take_control<T: ?Sized>(sk: &mut Sock<'_, T>, e: &mut FlowExtra) {
    if e.rate_bps != 0 {
        sk.set_max_pacing_rate(e.rate_bps);
        if sk.pacing_status() == PacingStatus::None {
            sk.set_pacing_status(PacingStatus::Needed);
        }
    } else if e.controlled {
        sk.set_max_pacing_rate(u64::MAX);
    }
    e.controlled = true;
    if e.has_class {
        apply_class(sk, e);
    } else {
        restore_class(sk, e);
    }
}

/// Marks the flow with the agent's class: TOS `dscp << 2` (the ECN bits kept by `set_tos`,
/// which also resets the route on a change) and `sk_priority` = the DSCP's precedence
/// (`dscp >> 3`, RFC 2474 §4.2.2.2), the band a host's `prio`/`mqprio` qdisc maps it to
/// (`rt_tos2priority()`, which `set_tos` applies as `IP_TOS` does, gives every AF class the same
/// band). Saves the socket's own TOS and priority first when the socket carries its own.
/// Nothing is written when the class is already in place.
fn apply_class<T: ?Sized>(sk: &mut Sock<'_, T>, e: &mut FlowExtra) {
    let tos = e.class_dscp << 2;
    if e.class_applied && e.applied_tos == tos {
        return;
    }
    if !e.class_applied {
        e.own_tos = sk.tos();
        e.own_priority = sk.priority();
    }
    sk.set_tos(tos);
    let prio = u32::from(e.class_dscp >> 3);
    sk.set_priority(prio);
    e.class_applied = true;
    e.applied_tos = tos;
    e.applied_priority = prio;
}

/// Gives the socket back its own TOS and priority, where the class's are still in place.
fn restore_class<T: ?Sized>(sk: &mut Sock<'_, T>, e: &mut FlowExtra) {
    if !e.class_applied {
        return;
    }
    e.class_applied = false;
    if sk.tos() & !ECN_MASK == e.applied_tos {
        sk.set_tos(e.own_tos);
    }
    if sk.priority() == e.applied_priority {
        sk.set_priority(e.own_priority);
    }
}

/// Gives the flow back to native MLTCP: no pacing limit, internal pacing off, the socket's own
/// TOS and priority (the agent's class stays recorded for when it is in charge again).
fn release_control<T: ?Sized>(sk: &mut Sock<'_, T>, e: &mut FlowExtra) {
    restore_class(sk, e);
    if e.controlled {
        sk.set_max_pacing_rate(u64::MAX);
        if sk.pacing_status() == PacingStatus::Needed {
            sk.set_pacing_status(PacingStatus::None);
        }
        e.controlled = false;
        e.cwnd_bytes = 0;
        e.rate_bps = 0;
    }
}

/// The last delivery-rate sample, bytes/s (`rate_delivered` packets over `rate_interval_us`).
fn delivery_rate_bps<T: ?Sized>(sk: &Sock<'_, T>, mss: u64) -> u64 {
    let interval = u64::from(sk.rate_interval_us());
    if interval == 0 {
        return 0;
    }
    u64::from(sk.rate_delivered())
        .saturating_mul(mss)
        .saturating_mul(1_000_000)
        / interval
}

/// Ends the flow's CCP life (the socket releases the algorithm). Takes only the flow's shard
/// lock (twice: the glue state, then the core's slot).
pub(crate) fn flow_release<T: ?Sized>(sk: &mut Sock<'_, T>, sid: u32) {
    let Some(c) = ccp() else { return };
    let Some(loc) = Core::locate(sid) else { return };
    c.with_extra(loc, |e| release_control(sk, e));
    let mut ops = Ops::new(&c.nl, sk.tcp_mstamp_us());
    // A live flow's slot is freed even when its closing MEASURE cannot be sent.
    if !matches!(
        c.core.flow_end(c, sid, &mut ops),
        Err(CcpError::UnknownFlow)
    ) {
        LIVE_FLOWS.add(u64::MAX); // wrapping: minus one
    }
}
