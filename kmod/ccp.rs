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
//!   cwnd; the kernel's `cong_avoid` path, loss recovery and pacing update stay in place.
//!
//! The flow stays on native MLTCP whenever the agent is not in charge: no agent listening on
//! group 22 (a killed agent's socket closes, so this is immediate), no program installed for the
//! flow, an error in its program, or (module parameter `ccp_heartbeat_ms`, 0 = off by default)
//! no message from the agent for longer than that. Messages from senders without `CAP_NET_ADMIN` are dropped
//! and counted; so are the others the core refuses, split in two: late ones (for a flow that has
//! ended, normal under connection churn) and malformed ones. One lock (bottom-half safe)
//! serialises the netlink path and the ACK path, so neither sees a torn update.
//!
//! Read-only module parameters show the datapath's state: `ccp_live_flows` (CCP flows in the
//! table now: back to 0 once every offered connection is gone), `ccp_dropped_late`,
//! `ccp_dropped_malformed`, `ccp_dropped_unprivileged` and `ccp_table_full`.

use super::ccp_datapath::{
    Datapath, DatapathOps, DropCause, Error as CcpError, FlowInfo, Invoked, Primitives, SendError,
};
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicUsize, Ordering};
use kernel::{
    alloc::{flags, KBox, VBox},
    net::netlink::{capability, KernelSocket, Message, Receiver},
    net::tcp::{PacingStatus, Sock},
    new_spinlock_bh,
    prelude::*,
    sync::SpinLockBh,
    time::Ktime,
};

// The netlink protocol and multicast group of the CCP messages (defined with the wire format).
use super::ccp_datapath::wire::{CCP_GROUP, NETLINK_USERSOCK};
/// Concurrent CCP flows (a full table leaves new flows on native MLTCP).
const FLOWS: usize = 4096;
/// Installed datapath programs.
const PROGRAMS: usize = 32;
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
}

struct Tables {
    dp: Datapath<FLOWS, PROGRAMS>,
    extra: [FlowExtra; FLOWS],
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
    #[pin]
    tables: SpinLockBh<VBox<Tables>>,
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
/// Netlink input callbacks currently using [`CCP`] (unload waits for them).
static INPUT_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// The datapath, owned by the module; unpublished and freed on drop.
pub(crate) struct CcpHandle(Option<Pin<KBox<Ccp>>>);

impl CcpHandle {
    /// Allocates the tables (zeroed: the core's documented initial state), creates the netlink
    /// socket and publishes the datapath. Sends READY in case an agent already listens.
    pub(crate) fn new(module: &'static ThisModule) -> Result<Self> {
        let tables = VBox::<Tables>::new_uninit(flags::GFP_KERNEL | flags::__GFP_ZERO)?;
        // SAFETY: All-zero is a valid `Tables`: the core documents that an all-zero `Datapath`
        // equals `Datapath::new()`, and `FlowExtra` is integers and bools.
        let tables = unsafe { tables.assume_init() };
        let nl = KernelSocket::new(module, NETLINK_USERSOCK, CCP_GROUP)?;
        let ccp = KBox::pin_init(
            pin_init!(Ccp {
                tables <- new_spinlock_bh!(tables, "tcp_mltcp_ccp"),
                nl,
                agent_up: AtomicBool::new(false),
                last_msg_ns: AtomicI64::new(Ktime::ktime_get().to_ns()),
                silent: AtomicBool::new(false),
            }),
            flags::GFP_KERNEL,
        )?;
        CCP.store(&*ccp as *const Ccp as *mut Ccp, Ordering::Release);
        {
            let mut t = ccp.tables.lock();
            ccp.check_agent(&mut t);
        }
        Ok(Self(Some(ccp)))
    }
}

impl Drop for CcpHandle {
    fn drop(&mut self) {
        // SeqCst on both sides (here: store CCP, load the count; in `NetlinkRx::receive`: bump the
        // count, load CCP): either the input sees null, or this loop sees its count.
        CCP.store(core::ptr::null_mut(), Ordering::SeqCst);
        // A netlink input that loaded the pointer before it was cleared may still run.
        while INPUT_IN_FLIGHT.load(Ordering::SeqCst) != 0 {
            core::hint::spin_loop();
        }
        if self.0.take().is_some() {
            pr_info!(
                "ccp: dropped {} unprivileged, {} late and {} malformed messages; {} flows found the table full\n",
                DROPPED_UNPRIVILEGED.get(),
                DROPPED_LATE.get(),
                DROPPED_MALFORMED.get(),
                TABLE_FULL.get()
            );
        }
    }
}

fn ccp() -> Option<&'static Ccp> {
    let p = CCP.load(Ordering::SeqCst);
    // SAFETY: A non-null pointer is the pinned `Ccp` owned by the module's `CcpHandle`, which
    // outlives every TCP callback (the module cannot unload while a socket uses it); netlink
    // input callbacks are tracked by `INPUT_IN_FLIGHT` before `drop` frees it.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// `DatapathOps` for one invocation: sends through netlink, records what the program sets.
struct Ops<'a> {
    nl: &'a KernelSocket<NetlinkRx>,
    now_us: u64,
    cwnd_bytes: Option<u64>,
    rate_bps: Option<u64>,
}

impl DatapathOps for Ops<'_> {
    fn now_us(&self) -> u64 {
        self.now_us
    }
    fn send_msg(&mut self, msg: &[u8]) -> Result<(), SendError> {
        self.nl.multicast(CCP_GROUP, msg, flags::GFP_ATOMIC).map_err(|_| SendError)
    }
    fn set_cwnd(&mut self, bytes: u64) {
        self.cwnd_bytes = Some(bytes);
    }
    fn set_rate_abs(&mut self, bytes_per_sec: u64) {
        self.rate_bps = Some(bytes_per_sec);
    }
}

impl Ccp {
    /// Whether an agent listens now; logs the transitions (once each) and sends READY when one
    /// appears, so it installs its programs.
    ///
    /// Runs with the tables locked (`t` is the guarded tables): every CREATE is sent under the
    /// same lock, so the READY of a new agent always reaches it before any CREATE that follows
    /// the transition. (Without this, a CREATE sent by another CPU between the transition and
    /// the READY reached portus first; portus then dropped the flow on READY and re-installed
    /// its programs, leaving that flow native.)
    fn check_agent(&self, t: &mut Tables) -> bool {
        let up = self.nl.has_listeners(CCP_GROUP);
        if up != self.agent_up.swap(up, Ordering::AcqRel) {
            if up {
                pr_info!("ccp: agent listening on netlink group {}: new flows are offered to it\n", CCP_GROUP);
                // A new agent counts as heard from now.
                self.last_msg_ns.store(Ktime::ktime_get().to_ns(), Ordering::Relaxed);
                let mut ops = Ops { nl: &self.nl, now_us: 0, cwnd_bytes: None, rate_bps: None };
                let _ = t.dp.send_ready(DATAPATH_ID, &mut ops);
            } else {
                pr_info!("ccp: agent gone: every flow is back on native MLTCP\n");
            }
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
        let idle_ns = Ktime::ktime_get().to_ns().saturating_sub(self.last_msg_ns.load(Ordering::Relaxed));
        let silent = idle_ns > i64::from(hb_ms).saturating_mul(1_000_000);
        if silent != self.silent.swap(silent, Ordering::AcqRel) {
            if silent {
                pr_info!("ccp: no message from the agent for over {} ms: flows back on native MLTCP\n", hb_ms);
            } else {
                pr_info!("ccp: the agent speaks again: its flows are under its control again\n");
            }
        }
        !silent
    }

    fn receive(&self, msg: &Message<'_>) {
        if !msg.sender_capable(capability::NET_ADMIN) {
            let n = DROPPED_UNPRIVILEGED.add(1);
            if log_now(n) {
                pr_warn!("ccp: dropped a message from a sender without CAP_NET_ADMIN (total {})\n", n + 1);
            }
            return;
        }
        self.last_msg_ns.store(Ktime::ktime_get().to_ns(), Ordering::Relaxed);
        let payload = msg.payload();
        let dropped = {
            let mut t = self.tables.lock();
            t.dp.handle_msg(payload).err().map(|e| (e, t.dp.drop_cause(payload, e)))
        };
        match dropped {
            None => {}
            Some((_, DropCause::Late)) => {
                let n = DROPPED_LATE.add(1);
                if log_now(n) {
                    pr_info!("ccp: dropped an agent message for a flow that has ended (normal when connections close; total {})\n", n + 1);
                }
            }
            Some((e, DropCause::Malformed)) => {
                let n = DROPPED_MALFORMED.add(1);
                if log_now(n) {
                    pr_warn!("ccp: dropped a malformed or refused agent message: {:?} (total {})\n", e, n + 1);
                }
            }
        }
    }
}

/// Receives the agent's messages.
pub(crate) struct NetlinkRx;

impl Receiver for NetlinkRx {
    fn receive(msg: &Message<'_>) {
        INPUT_IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        if let Some(c) = ccp() {
            c.receive(msg);
        }
        INPUT_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
    }
}

fn slot(sid: u32) -> Option<usize> {
    ((sid & 0xffff) as usize).checked_sub(1).filter(|&i| i < FLOWS)
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
    let Ok(info) = info.with_alg_name(alg) else { return 0 };
    let mut guard = c.tables.lock();
    let t: &mut Tables = &mut guard;
    if !c.check_agent(t) {
        return 0;
    }
    let mut ops = Ops { nl: &c.nl, now_us: sk.tcp_mstamp_us(), cwnd_bytes: None, rate_bps: None };
    match t.dp.flow_start(&info, &mut ops) {
        Ok(sid) => {
            if let Some(e) = slot(sid).and_then(|i| t.extra.get_mut(i)) {
                *e = FlowExtra {
                    last_bytes_acked: sk.bytes_acked(),
                    last_lost: sk.lost(),
                    cwnd_bytes: 0,
                    rate_bps: 0,
                    controlled: false,
                    dead: false,
                };
            }
            LIVE_FLOWS.set(t.dp.num_flows() as u64);
            sid
        }
        Err(CcpError::FlowTableFull) => {
            let n = TABLE_FULL.add(1);
            if log_now(n) {
                pr_warn!("ccp: flow table full ({} flows): new flow stays native (total {})\n", FLOWS, n + 1);
            }
            0
        }
        Err(_) => 0,
    }
}

/// Runs the agent's program for this ACK. Returns true when the agent is in charge of the flow
/// (the caller then skips native MLTCP growth); false means native MLTCP runs.
pub(crate) fn on_ack<T: ?Sized>(sk: &mut Sock<'_, T>, sid: u32, acked: u32) -> bool {
    let Some(c) = ccp() else { return false };
    let Some(i) = slot(sid) else { return false };
    let mut guard = c.tables.lock();
    let t: &mut Tables = &mut guard;
    // New flows are offered whenever an agent listens (a restarted agent speaks only once it is
    // offered one); control additionally needs the agent to have spoken recently.
    let up = c.check_agent(t) && c.heard_recently();
    let Some(e) = t.extra.get_mut(i) else { return false };
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
        snd_cwnd: if e.cwnd_bytes != 0 { e.cwnd_bytes } else { cur_cwnd_bytes },
        snd_rate: e.rate_bps,
        ..Primitives::default()
    };
    e.last_bytes_acked = bytes_acked;
    e.last_lost = lost;
    let mut ops = Ops { nl: &c.nl, now_us: sk.tcp_mstamp_us(), cwnd_bytes: None, rate_bps: None };
    match t.dp.flow_invoke(sid, &prims, &mut ops) {
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
}

/// Gives the flow back to native MLTCP: no pacing limit, internal pacing off.
fn release_control<T: ?Sized>(sk: &mut Sock<'_, T>, e: &mut FlowExtra) {
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

/// Ends the flow's CCP life (the socket releases the algorithm).
pub(crate) fn flow_release<T: ?Sized>(sk: &mut Sock<'_, T>, sid: u32) {
    let Some(c) = ccp() else { return };
    let Some(i) = slot(sid) else { return };
    let mut guard = c.tables.lock();
    let t: &mut Tables = &mut guard;
    if let Some(e) = t.extra.get_mut(i) {
        release_control(sk, e);
    }
    let mut ops = Ops { nl: &c.nl, now_us: sk.tcp_mstamp_us(), cwnd_bytes: None, rate_bps: None };
    let _ = t.dp.flow_end(sid, &mut ops);
    LIVE_FLOWS.set(t.dp.num_flows() as u64);
}
