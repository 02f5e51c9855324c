//! The datapath: program table + fixed-capacity flow tables + error counters, and the entry
//! points a host (the kernel module, a user-space mock) calls: start/end a flow, invoke it per
//! ACK, hand it a message from the agent.
//!
//! Mirrors libccp `ccp.c` (ccp_init, ccp_connection_start/free, ccp_invoke, ccp_read_msg). Socket
//! ids carry a per-slot generation so that a message for a finished flow never reaches the next
//! flow in the same slot.
//!
//! Two datapaths share the same pieces ([`FlowTable`], [`ProgramTable`]):
//!
//! - [`Datapath`]: one flow table and one program table, single-threaded (`&mut self`): tests,
//!   the differential tests against libccp, the fuzz target, user-space datapaths.
//! - [`ShardedDatapath`]: `SHARDS` flow tables of `PER_SHARD` flows each, each with its own
//!   replica of the program table, behind locks the host provides ([`Shards`]). Everything a
//!   flow's ACK or an agent message for one flow touches is in that flow's shard, so concurrent
//!   flows in different shards never wait for each other; only INSTALL (rare: when an agent
//!   starts) visits every shard, one at a time. What crosses shards is lock-free: the live-flow
//!   count and the round-robin hint of [`ShardedDatapath::flow_start`] are atomics.

use super::compiled::ExecMode;
use super::error::{DropCause, Error, Stats};
use super::machine::{FlowState, Invoked, Primitives, ReportStatus};
use super::program::{build_program, InlineProgram, Program, ProgramStore, ProgramTable};
use super::wire::{self, Msg};
use super::FLOW_ALG_NAME_MAX;
use core::marker::PhantomData;
use core::ops::Deref;
use core::sync::atomic::{AtomicUsize, Ordering};

/// Returned by [`DatapathOps::send_msg`] when a message could not be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendError;

/// What the host provides: a clock, a way to send to the agent, and the actuators of the flow
/// being invoked (libccp `struct ccp_datapath` callbacks, plus this project's traffic class).
pub trait DatapathOps {
    /// Monotonic clock in µs (any origin).
    fn now_us(&self) -> u64;
    /// Sends one complete message to the agent (netlink multicast, unix datagram).
    fn send_msg(&mut self, msg: &[u8]) -> Result<(), SendError>;
    /// Sets the congestion window of the flow being invoked, in bytes (libccp `set_cwnd`,
    /// which takes u32).
    fn set_cwnd(&mut self, bytes: u64);
    /// Sets the rate of the flow being invoked, in bytes/s (libccp `set_rate_abs`, which takes
    /// u32; here u64 because UPDATE_FIELDS carries u64).
    fn set_rate_abs(&mut self, bytes_per_sec: u64);
    /// Sets the traffic class of the flow being invoked (not in libccp; the agent's SET_CLASS,
    /// [`wire::SET_CLASS`]): `Some(dscp)`, 0..=63, marks its packets with that DSCP (RFC 2474
    /// §3; the kernel module writes `dscp << 2` into the IP TOS, keeping the ECN bits, and the
    /// matching `sk_priority`), `None` restores the socket's own marking. Called during an
    /// invocation, only when the class changes ([`FlowState::class`] tells the class in force).
    /// The default ignores it: a host that cannot mark packets (a user-space mock).
    fn set_class(&mut self, dscp: Option<u8>) {
        let _ = dscp;
    }
}

/// What CREATE announces about a flow (libccp `struct ccp_datapath_info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FlowInfo {
    /// Initial congestion window in bytes.
    pub init_cwnd: u32,
    /// Maximum segment size in bytes.
    pub mss: u32,
    /// Source IPv4 address.
    pub src_ip: u32,
    /// Source port.
    pub src_port: u32,
    /// Destination IPv4 address.
    pub dst_ip: u32,
    /// Destination port.
    pub dst_port: u32,
    /// Algorithm name, NUL-padded (portus picks the algorithm by it; empty = default).
    pub alg: [u8; FLOW_ALG_NAME_MAX],
}

impl FlowInfo {
    /// The algorithm name: the bytes of [`FlowInfo::alg`] before the first NUL.
    pub fn alg_name(&self) -> &[u8] {
        let end = self
            .alg
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(FLOW_ALG_NAME_MAX);
        self.alg.get(..end).unwrap_or(&[])
    }

    /// Sets the algorithm name (at most [`FLOW_ALG_NAME_MAX`] bytes).
    ///
    /// Errors: [`Error::AlgNameTooLong`].
    pub fn with_alg_name(mut self, name: &[u8]) -> Result<Self, Error> {
        let dst = self
            .alg
            .get_mut(..name.len())
            .ok_or(Error::AlgNameTooLong)?;
        dst.copy_from_slice(name);
        if let Some(rest) = self.alg.get_mut(name.len()..) {
            rest.fill(0);
        }
        Ok(self)
    }
}

/// What [`Datapath::handle_msg`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handled {
    /// INSTALL: the program with this uid is installed.
    Installed {
        /// Program uid.
        uid: u32,
    },
    /// UPDATE_FIELDS staged for this flow.
    Updated {
        /// Socket id.
        sid: u32,
    },
    /// CHANGE_PROG staged for this flow.
    ProgramChanged {
        /// Socket id.
        sid: u32,
        /// Program uid.
        uid: u32,
    },
    /// SET_CLASS staged for this flow (applied at its next invocation).
    ClassStaged {
        /// Socket id.
        sid: u32,
        /// The DSCP, or `None` for the socket's own marking.
        dscp: Option<u8>,
    },
}

#[derive(Clone, Debug)]
struct FlowSlot {
    used: bool,
    gen: u16,
    state: FlowState,
}

/// Bits of a socket id that hold `slot index + 1`; the upper 16 bits hold the slot generation.
const SID_SLOT_MASK: u32 = 0xffff;

/// Where a socket id points: its shard, its slot in the shard's [`FlowTable`] and the
/// generation the id carries. The id's low 16 bits are `shard * PER_SHARD + slot + 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowLoc {
    /// Index of the shard (0 for [`Datapath`]).
    pub shard: usize,
    /// Slot in the shard's flow table.
    pub slot: usize,
    /// Generation of the slot the id was handed out with.
    pub gen: u16,
}

impl FlowLoc {
    /// Splits `sid` for `shards` shards of `per_shard` slots; `None` when its slot part is 0 or
    /// beyond the tables.
    pub fn of(sid: u32, shards: usize, per_shard: usize) -> Option<FlowLoc> {
        let idx = ((sid & SID_SLOT_MASK) as usize).checked_sub(1)?;
        let shard = idx.checked_div(per_shard)?;
        if shard >= shards {
            return None;
        }
        Some(FlowLoc {
            shard,
            slot: idx.checked_rem(per_shard)?,
            gen: (sid >> 16) as u16,
        })
    }
}

/// `N` flow slots with their generations, a round-robin hint and the counters of what happened
/// to them: all the flows of a [`Datapath`], one shard of a [`ShardedDatapath`].
///
/// Size on x86-64: `N` × 864 B + 300 B. Every field is an integer, bool or array of them, and
/// the all-zero bit pattern is the same value as [`FlowTable::new`], so the kernel may allocate
/// it zeroed. Not thread-safe by itself: a host locks it (one lock per shard).
#[derive(Clone, Debug)]
pub struct FlowTable<const N: usize> {
    flows: [FlowSlot; N],
    next_slot: usize,
    stats: Stats,
}

impl<const N: usize> FlowTable<N> {
    const EMPTY_FLOW: FlowSlot = FlowSlot {
        used: false,
        gen: 0,
        state: FlowState::new(FLOW_INFO_ZERO, 0),
    };
    const SIZE_OK: () = assert!(
        N > 0 && N < SID_SLOT_MASK as usize,
        "flow table size must be 1..65535"
    );

    /// An empty table.
    pub const fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::SIZE_OK;
        FlowTable {
            flows: [Self::EMPTY_FLOW; N],
            next_slot: 0,
            stats: Stats::new(),
        }
    }

    /// The counters of this table.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    fn count<T>(&mut self, r: Result<T, Error>) -> Result<T, Error> {
        if let Err(e) = r {
            self.stats.record(e);
        }
        r
    }

    fn slot_mut(&mut self, loc: FlowLoc) -> Option<&mut FlowSlot> {
        self.flows
            .get_mut(loc.slot)
            .filter(|s| s.used && s.gen == loc.gen)
    }

    /// The state of the live flow at `loc`.
    pub fn flow(&self, loc: FlowLoc) -> Option<&FlowState> {
        let s = self.flows.get(loc.slot)?;
        (s.used && s.gen == loc.gen).then_some(&s.state)
    }

    /// Live flows in this table (started and not ended; O(1), from the counters).
    pub fn live(&self) -> usize {
        self.stats
            .flows_started
            .wrapping_sub(self.stats.flows_ended) as usize
    }

    /// Starts a flow in the first free slot from the round-robin hint and sends its CREATE
    /// (libccp `ccp_connection_start`); `shard` is this table's index, which the socket id
    /// encodes (slot part `shard * N + slot + 1`). Returns `None` when every slot is taken
    /// (nothing is counted then: the caller knows whether the datapath as a whole is full). A
    /// CREATE that cannot be sent is counted as [`Error::SendFailed`]; the flow starts anyway
    /// and [`FlowTable::invoke`] retries it.
    pub fn try_start(
        &mut self,
        shard: usize,
        info: &FlowInfo,
        time_zero_us: u64,
        ops: &mut impl DatapathOps,
    ) -> Option<u32> {
        let idx = (0..N)
            .map(|k| self.next_slot.wrapping_add(k).checked_rem(N).unwrap_or(0))
            .find(|&i| self.flows.get(i).is_some_and(|s| !s.used))?;
        let global = shard.checked_mul(N)?.checked_add(idx)?.checked_add(1)?;
        let global = u32::try_from(global).ok().filter(|&g| g <= SID_SLOT_MASK)?;
        let slot = self.flows.get_mut(idx)?;
        slot.used = true;
        slot.gen = slot.gen.wrapping_add(1);
        slot.state = FlowState::new(*info, time_zero_us);
        let sid = (u32::from(slot.gen) << 16) | global;
        let sent = slot.state.send_create(sid, ops);
        self.next_slot = idx.wrapping_add(1);
        self.stats.flows_started = self.stats.flows_started.wrapping_add(1);
        let _ = self.count(sent);
        Some(sid)
    }

    /// Ends the flow `sid` at `loc`: frees its slot and sends the closing MEASURE (uid 0, no
    /// fields; libccp `ccp_connection_free`).
    ///
    /// Errors (counted): [`Error::UnknownFlow`], [`Error::SendFailed`] (the slot is freed
    /// anyway).
    pub fn end(&mut self, loc: FlowLoc, sid: u32, ops: &mut impl DatapathOps) -> Result<(), Error> {
        let r = match self.slot_mut(loc) {
            None => Err(Error::UnknownFlow),
            Some(slot) => {
                slot.used = false;
                self.stats.flows_ended = self.stats.flows_ended.wrapping_add(1);
                let mut buf = [0u8; wire::MEASURE_FIXED_LEN];
                wire::write_measure(&mut buf, sid, 0, &[]).and_then(|n| {
                    ops.send_msg(buf.get(..n).unwrap_or(&[]))
                        .map_err(|_| Error::SendFailed)
                })
            }
        };
        self.count(r)
    }

    /// One invocation of the flow `sid` at `loc`, per ACK (libccp `ccp_invoke`; see
    /// [`FlowState::invoke`]), running programs of `programs`.
    ///
    /// Errors (counted): [`Error::UnknownFlow`], [`Error::ProgramGone`], the execution errors.
    /// A report that could not be sent is counted as [`Error::SendFailed`] and shows in the
    /// returned [`ReportStatus`].
    pub fn invoke<const P: usize, H: Deref<Target = Program>>(
        &mut self,
        loc: FlowLoc,
        sid: u32,
        programs: &ProgramTable<P, H>,
        prims: &Primitives,
        time_zero_us: u64,
        ops: &mut impl DatapathOps,
    ) -> Result<Invoked, Error> {
        let r = match self.slot_mut(loc) {
            None => Err(Error::UnknownFlow),
            Some(slot) => {
                let r = slot.state.invoke(sid, programs, prims, time_zero_us, ops);
                self.stats.invocations = self.stats.invocations.wrapping_add(1);
                r
            }
        };
        match r {
            Ok(Invoked::Ran {
                report: ReportStatus::Sent,
            }) => {
                self.stats.reports_sent = self.stats.reports_sent.wrapping_add(1);
            }
            Ok(Invoked::Ran {
                report: ReportStatus::SendFailed,
            }) => self.stats.record(Error::SendFailed),
            _ => {}
        }
        self.count(r)
    }

    /// Stages an UPDATE_FIELDS, a CHANGE_PROG or a SET_CLASS for the flow at `loc` (`None`: a
    /// socket id no table has); CHANGE_PROG looks the uid up in `programs`. Counts the outcome
    /// (handled or the error).
    ///
    /// Errors (counted): [`Error::UnknownFlow`], [`Error::ProgramNotFound`],
    /// [`Error::BadUpdateReg`], [`Error::UpdateIndexOutOfRange`], [`Error::BadClass`],
    /// [`Error::UnexpectedMsg`] for
    /// any other message. On error nothing changes.
    pub fn handle_flow_msg<const P: usize, H: Deref<Target = Program>>(
        &mut self,
        loc: Option<FlowLoc>,
        msg: &Msg<'_>,
        programs: &ProgramTable<P, H>,
    ) -> Result<Handled, Error> {
        let r = self.flow_msg_inner(loc, msg, programs);
        if r.is_ok() {
            self.stats.msgs_handled = self.stats.msgs_handled.wrapping_add(1);
        }
        self.count(r)
    }

    fn flow_msg_inner<const P: usize, H: Deref<Target = Program>>(
        &mut self,
        loc: Option<FlowLoc>,
        msg: &Msg<'_>,
        programs: &ProgramTable<P, H>,
    ) -> Result<Handled, Error> {
        match msg {
            Msg::UpdateFields(u) => {
                let slot = loc
                    .and_then(|l| self.slot_mut(l))
                    .ok_or(Error::UnknownFlow)?;
                slot.state.stage_updates(&u.updates)?;
                Ok(Handled::Updated { sid: u.sid })
            }
            Msg::ChangeProg(c) => {
                let slot = loc
                    .and_then(|l| self.slot_mut(l))
                    .ok_or(Error::UnknownFlow)?;
                let p = programs
                    .lookup_uid(c.program_uid)
                    .ok_or(Error::ProgramNotFound)?;
                slot.state.stage_program(p, &c.updates)?;
                Ok(Handled::ProgramChanged {
                    sid: c.sid,
                    uid: c.program_uid,
                })
            }
            Msg::SetClass(c) => {
                let slot = loc
                    .and_then(|l| self.slot_mut(l))
                    .ok_or(Error::UnknownFlow)?;
                slot.state.stage_class(c.dscp)?;
                Ok(Handled::ClassStaged {
                    sid: c.sid,
                    dscp: c.dscp,
                })
            }
            _ => Err(Error::UnexpectedMsg),
        }
    }

    /// Why a message for the flow at `loc` was refused with `e`: [`DropCause::Late`] when `e`
    /// is [`Error::UnknownFlow`] and the id names a flow this table started and has since ended
    /// (its slot's generation is the id's or up to 32767 later), [`DropCause::Malformed`]
    /// otherwise.
    pub fn drop_cause(&self, loc: Option<FlowLoc>, e: Error) -> DropCause {
        if e != Error::UnknownFlow {
            return DropCause::Malformed;
        }
        let ended = loc
            .and_then(|l| self.flows.get(l.slot).map(|s| (s, l.gen)))
            .is_some_and(|(s, gen)| {
                let age = s.gen.wrapping_sub(gen);
                gen != 0 && age < 0x8000 && !(s.used && age == 0)
            });
        if ended {
            DropCause::Late
        } else {
            DropCause::Malformed
        }
    }
}

impl<const N: usize> Default for FlowTable<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// A single-threaded CCP datapath for up to `FLOWS` flows (1..=65535) and `PROGRAMS` programs,
/// programs kept by value ([`InlineProgram`]).
///
/// Size on x86-64: `FLOWS` × 864 B + `PROGRAMS` × 14 KiB. Not thread-safe by itself: calls take
/// `&mut self`; a multi-threaded host uses [`ShardedDatapath`].
#[derive(Clone, Debug)]
pub struct Datapath<const FLOWS: usize, const PROGRAMS: usize> {
    programs: ProgramTable<PROGRAMS, InlineProgram>,
    flows: FlowTable<FLOWS>,
    time_zero_us: u64,
}

impl<const FLOWS: usize, const PROGRAMS: usize> Datapath<FLOWS, PROGRAMS> {
    /// An empty datapath (time zero 0; call [`Datapath::init`]).
    pub const fn new() -> Self {
        Datapath {
            programs: ProgramTable::new(),
            flows: FlowTable::new(),
            time_zero_us: 0,
        }
    }

    /// Starts the datapath clock (`Ack.now` counts from here; libccp `ccp_init` sets
    /// `time_zero`). Does not touch flows or programs.
    pub fn init(&mut self, now_us: u64) {
        self.time_zero_us = now_us;
    }

    /// Sends READY with this datapath's `id` (libccp `ccp_init`). Portus answers READY by
    /// installing all its programs.
    ///
    /// Errors (counted): [`Error::SendFailed`].
    pub fn send_ready(&mut self, id: u32, ops: &mut impl DatapathOps) -> Result<(), Error> {
        let r = send_ready(id, ops);
        self.flows.count(r)
    }

    /// The error and event counters.
    pub fn stats(&self) -> &Stats {
        self.flows.stats()
    }

    /// The program table.
    pub fn programs(&self) -> &ProgramTable<PROGRAMS, InlineProgram> {
        &self.programs
    }

    /// The installed program with this uid.
    pub fn program(&self, uid: u32) -> Option<&Program> {
        self.programs.by_uid(uid)
    }

    /// Chooses the path that runs programs from the next invocation on: compiled (the
    /// default) or interpreted (the reference); see [`ProgramTable::set_exec_mode`].
    pub fn set_exec_mode(&mut self, mode: ExecMode) {
        self.programs.set_exec_mode(mode);
    }

    fn loc(sid: u32) -> Option<FlowLoc> {
        FlowLoc::of(sid, 1, FLOWS)
    }

    /// The state of a live flow.
    pub fn flow(&self, sid: u32) -> Option<&FlowState> {
        self.flows.flow(Self::loc(sid)?)
    }

    /// True if the flow is live and runs, or is about to run, an installed program: the agent
    /// is in charge of it.
    pub fn flow_has_program(&self, sid: u32) -> bool {
        self.flow(sid).is_some_and(|f| {
            let pending = f.program_pending();
            self.programs.get(f.program()).is_some() || pending
        })
    }

    /// Number of live flows (started and not ended; O(1), from the counters).
    pub fn num_flows(&self) -> usize {
        self.flows.live()
    }

    /// Why [`Datapath::handle_msg`] refused `buf` with `e`: [`DropCause::Late`] when `e` is
    /// [`Error::UnknownFlow`] and the message's socket id names a flow this datapath started
    /// and has since ended (a valid slot whose generation is the id's or up to 32767 later),
    /// [`DropCause::Malformed`] otherwise.
    pub fn drop_cause(&self, buf: &[u8], e: Error) -> DropCause {
        let loc = wire::Header::parse(buf).ok().and_then(|h| Self::loc(h.sid));
        self.flows.drop_cause(loc, e)
    }

    /// Starts a flow and sends its CREATE (libccp `ccp_connection_start`). Returns the socket id
    /// (never 0). If CREATE cannot be sent, the flow still starts and
    /// [`Datapath::flow_invoke`] retries it.
    ///
    /// Errors (counted): [`Error::FlowTableFull`]. A failed CREATE is counted as
    /// [`Error::SendFailed`] but not returned.
    pub fn flow_start(
        &mut self,
        info: &FlowInfo,
        ops: &mut impl DatapathOps,
    ) -> Result<u32, Error> {
        let tz = self.time_zero_us;
        let r = self
            .flows
            .try_start(0, info, tz, ops)
            .ok_or(Error::FlowTableFull);
        self.flows.count(r)
    }

    /// Ends a flow: frees its slot and sends the closing MEASURE (uid 0, no fields; libccp
    /// `ccp_connection_free`).
    ///
    /// Errors (counted): [`Error::UnknownFlow`], [`Error::SendFailed`] (the slot is freed
    /// anyway).
    pub fn flow_end(&mut self, sid: u32, ops: &mut impl DatapathOps) -> Result<(), Error> {
        match Self::loc(sid) {
            Some(loc) => self.flows.end(loc, sid, ops),
            None => self.flows.count(Err(Error::UnknownFlow)),
        }
    }

    /// One invocation of a flow, per ACK (libccp `ccp_invoke`; see [`FlowState::invoke`]).
    ///
    /// Errors (counted): [`Error::UnknownFlow`], [`Error::ProgramGone`], the execution errors.
    /// A report that could not be sent is counted as [`Error::SendFailed`] and shows in the
    /// returned [`ReportStatus`].
    pub fn flow_invoke(
        &mut self,
        sid: u32,
        prims: &Primitives,
        ops: &mut impl DatapathOps,
    ) -> Result<Invoked, Error> {
        let tz = self.time_zero_us;
        match Self::loc(sid) {
            Some(loc) => self.flows.invoke(loc, sid, &self.programs, prims, tz, ops),
            None => self.flows.count(Err(Error::UnknownFlow)),
        }
    }

    /// Handles one message from the agent (libccp `ccp_read_msg`): INSTALL, UPDATE_FIELDS or
    /// CHANGE_PROG, and this project's SET_CLASS ([`wire::SET_CLASS`]). Updates and classes are
    /// staged and take effect at the flow's next invocation. Bytes after the message's `len`
    /// are ignored.
    ///
    /// Errors (counted): every wire error, [`Error::UnexpectedMsg`] for CREATE/MEASURE/READY,
    /// the install errors, [`Error::UnknownFlow`], [`Error::ProgramNotFound`],
    /// [`Error::BadUpdateReg`], [`Error::UpdateIndexOutOfRange`], [`Error::BadClass`]. On error
    /// nothing changes.
    pub fn handle_msg(&mut self, buf: &[u8]) -> Result<Handled, Error> {
        let msg = match wire::parse(buf) {
            Ok((m, _)) => m,
            Err(e) => return self.flows.count(Err(e)),
        };
        match &msg {
            Msg::Install(i) => {
                let r = build_program::<InlineProgram>(i)
                    .and_then(|p| self.programs.install(i.program_uid, p))
                    .map(|_| Handled::Installed { uid: i.program_uid });
                if r.is_ok() {
                    let st = &mut self.flows.stats;
                    st.msgs_handled = st.msgs_handled.wrapping_add(1);
                    st.programs_installed = st.programs_installed.wrapping_add(1);
                }
                self.flows.count(r)
            }
            Msg::UpdateFields(u) => {
                let loc = Self::loc(u.sid);
                self.flows.handle_flow_msg(loc, &msg, &self.programs)
            }
            Msg::ChangeProg(c) => {
                let loc = Self::loc(c.sid);
                self.flows.handle_flow_msg(loc, &msg, &self.programs)
            }
            Msg::SetClass(c) => {
                let loc = Self::loc(c.sid);
                self.flows.handle_flow_msg(loc, &msg, &self.programs)
            }
            Msg::Create(_) | Msg::Measure(_) | Msg::Ready { .. } => {
                self.flows.count(Err(Error::UnexpectedMsg))
            }
        }
    }
}

impl<const FLOWS: usize, const PROGRAMS: usize> Default for Datapath<FLOWS, PROGRAMS> {
    fn default() -> Self {
        Self::new()
    }
}

/// Serialises and sends READY (libccp `ccp_init`).
fn send_ready(id: u32, ops: &mut impl DatapathOps) -> Result<(), Error> {
    let mut buf = [0u8; wire::READY_LEN];
    wire::write_ready(&mut buf, id).and_then(|n| {
        ops.send_msg(buf.get(..n).unwrap_or(&[]))
            .map_err(|_| Error::SendFailed)
    })
}

/// The program table every INSTALL changes first, and the counters of messages that no flow's
/// shard owns (malformed ones, INSTALLs, ids outside the tables), of a [`ShardedDatapath`].
#[derive(Clone, Debug)]
pub struct ProgramMaster<const P: usize, H> {
    table: ProgramTable<P, H>,
    stats: Stats,
}

impl<const P: usize, H: Deref<Target = Program>> ProgramMaster<P, H> {
    /// No program, counters at zero.
    pub const fn new() -> Self {
        ProgramMaster {
            table: ProgramTable::new(),
            stats: Stats::new(),
        }
    }

    /// The master program table (the shards hold replicas of it).
    pub fn table(&self) -> &ProgramTable<P, H> {
        &self.table
    }

    /// The counters of the messages no shard owns.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    fn count<T>(&mut self, r: Result<T, Error>) -> Result<T, Error> {
        if let Err(e) = r {
            self.stats.record(e);
        }
        r
    }
}

impl<const P: usize, H: Deref<Target = Program>> Default for ProgramMaster<P, H> {
    fn default() -> Self {
        Self::new()
    }
}

/// The locks of a [`ShardedDatapath`], provided by the host: one per shard (guarding that
/// shard's [`FlowTable`] and its replica of the program table) and one for the
/// [`ProgramMaster`]. The kernel implements it with bottom-half-safe spinlocks, user-space
/// tests with mutexes or without locks.
///
/// Lock order: the core never holds two of these locks at once; a host that does (e.g. a shard
/// lock inside its own code) must not call back into the core from under it.
pub trait Shards<const PER_SHARD: usize, const P: usize, H> {
    /// Runs `f` on shard `shard` (its flow table and program replica) with that shard's lock
    /// held; `None` (and `f` not run) when there is no such shard.
    fn with_shard<R>(
        &self,
        shard: usize,
        f: impl FnOnce(&mut FlowTable<PER_SHARD>, &mut ProgramTable<P, H>) -> R,
    ) -> Option<R>;

    /// Runs `f` on the master program table with its lock held.
    fn with_master<R>(&self, f: impl FnOnce(&mut ProgramMaster<P, H>) -> R) -> R;
}

/// A CCP datapath of `SHARDS` × `PER_SHARD` flows (the product at most 65535) and `P` programs
/// for a multi-threaded host: the flow tables are split into shards, each behind its own lock
/// (the host's, through [`Shards`]), and each shard holds a replica of the program table (store
/// handles of `S`, e.g. `Arc<Program>`, so a replica costs a pointer per program).
///
/// - Per ACK ([`ShardedDatapath::flow_invoke`], or [`FlowTable::invoke`] on a shard the host
///   locked itself): the flow's shard only.
/// - UPDATE_FIELDS, CHANGE_PROG and SET_CLASS: the flow's shard only (CHANGE_PROG finds the
///   uid in the shard's replica).
/// - Flow start: one shard at a time, from a round-robin atomic hint, until one has room; the
///   datapath is full ([`Error::FlowTableFull`]) when every shard was full when visited. Flow
///   end: the flow's shard.
/// - INSTALL: the program is validated and built ([`ProgramStore::build`]) without any lock,
///   installed in the master table under the master lock (serialising INSTALLs; a snapshot of
///   the table is taken there), then copied into each shard's replica under that shard's lock,
///   one after the other. A replica only takes a snapshot newer than its own
///   ([`ProgramTable::version`]), so concurrent INSTALLs leave every replica at the latest table.
///   When `handle_msg` returns, every shard has it: a CHANGE_PROG the agent sends after its
///   INSTALL finds the program in any shard.
///
/// Semantics are those of [`Datapath`] (socket ids with generations, late against malformed
/// drops, counters), with one relaxation where shards meet: while an INSTALL is being copied,
/// shards it has not reached yet still run the previous table (as if their ACKs came before the
/// INSTALL), and [`ShardedDatapath::stats`] sums the shards one at a time, not at one instant.
pub struct ShardedDatapath<const SHARDS: usize, const PER_SHARD: usize, const P: usize, S> {
    time_zero_us: u64,
    live: AtomicUsize,
    next_shard: AtomicUsize,
    _store: PhantomData<fn() -> S>,
}

impl<const SHARDS: usize, const PER_SHARD: usize, const P: usize, S: ProgramStore>
    ShardedDatapath<SHARDS, PER_SHARD, P, S>
{
    const SIZE_OK: () = assert!(
        SHARDS > 0 && PER_SHARD > 0 && SHARDS * PER_SHARD < SID_SLOT_MASK as usize,
        "SHARDS * PER_SHARD must be 1..65535"
    );

    /// Total flow capacity.
    pub const FLOWS: usize = SHARDS * PER_SHARD;

    /// A datapath whose clock starts at `time_zero_us` (`Ack.now` counts from here). The host
    /// creates the shards ([`FlowTable::new`], [`ProgramTable::new`]) and the master.
    pub const fn new(time_zero_us: u64) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::SIZE_OK;
        ShardedDatapath {
            time_zero_us,
            live: AtomicUsize::new(0),
            next_shard: AtomicUsize::new(0),
            _store: PhantomData,
        }
    }

    /// The datapath's time zero, µs (pass it to [`FlowTable::invoke`]).
    pub fn time_zero_us(&self) -> u64 {
        self.time_zero_us
    }

    /// Where `sid` points (shard, slot, generation); `None` for an id outside the tables.
    pub fn locate(sid: u32) -> Option<FlowLoc> {
        FlowLoc::of(sid, SHARDS, PER_SHARD)
    }

    /// Number of live flows (started and not ended). Lock-free.
    pub fn num_flows(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Sends READY with this datapath's `id` (libccp `ccp_init`).
    ///
    /// Errors (counted in the master's counters): [`Error::SendFailed`].
    pub fn send_ready<H: Shards<PER_SHARD, P, S::Shared>>(
        &self,
        host: &H,
        id: u32,
        ops: &mut impl DatapathOps,
    ) -> Result<(), Error> {
        let r = send_ready(id, ops);
        if let Err(e) = r {
            host.with_master(|m| m.stats.record(e));
        }
        r
    }

    /// Starts a flow in the first shard with room, from a round-robin hint, and sends its
    /// CREATE (see [`FlowTable::try_start`]). Returns the socket id (never 0).
    ///
    /// Errors (counted): [`Error::FlowTableFull`] when every shard was full when visited.
    pub fn flow_start<H: Shards<PER_SHARD, P, S::Shared>>(
        &self,
        host: &H,
        info: &FlowInfo,
        ops: &mut impl DatapathOps,
    ) -> Result<u32, Error> {
        let first = self
            .next_shard
            .fetch_add(1, Ordering::Relaxed)
            .checked_rem(SHARDS)
            .unwrap_or(0);
        let tz = self.time_zero_us;
        for k in 0..SHARDS {
            let shard = first.wrapping_add(k).checked_rem(SHARDS).unwrap_or(0);
            let started = host
                .with_shard(shard, |t, _| t.try_start(shard, info, tz, &mut *ops))
                .flatten();
            if let Some(sid) = started {
                self.live.fetch_add(1, Ordering::Relaxed);
                return Ok(sid);
            }
        }
        host.with_master(|m| m.count(Err(Error::FlowTableFull)))
    }

    /// Ends a flow (see [`FlowTable::end`]).
    ///
    /// Errors (counted): [`Error::UnknownFlow`], [`Error::SendFailed`] (the slot is freed
    /// anyway).
    pub fn flow_end<H: Shards<PER_SHARD, P, S::Shared>>(
        &self,
        host: &H,
        sid: u32,
        ops: &mut impl DatapathOps,
    ) -> Result<(), Error> {
        let r = Self::locate(sid)
            .and_then(|loc| host.with_shard(loc.shard, |t, _| t.end(loc, sid, &mut *ops)));
        match r {
            None => host.with_master(|m| m.count(Err(Error::UnknownFlow))),
            Some(r) => {
                // A live flow's slot was freed (also when only the closing MEASURE failed).
                if !matches!(r, Err(Error::UnknownFlow)) {
                    self.live.fetch_sub(1, Ordering::Relaxed);
                }
                r
            }
        }
    }

    /// One invocation of a flow, per ACK, under its shard's lock only (see
    /// [`FlowTable::invoke`]).
    ///
    /// Errors (counted): [`Error::UnknownFlow`], [`Error::ProgramGone`], the execution errors.
    pub fn flow_invoke<H: Shards<PER_SHARD, P, S::Shared>>(
        &self,
        host: &H,
        sid: u32,
        prims: &Primitives,
        ops: &mut impl DatapathOps,
    ) -> Result<Invoked, Error> {
        let tz = self.time_zero_us;
        Self::locate(sid)
            .and_then(|loc| {
                host.with_shard(loc.shard, |t, p| {
                    t.invoke(loc, sid, p, prims, tz, &mut *ops)
                })
            })
            .unwrap_or_else(|| host.with_master(|m| m.count(Err(Error::UnknownFlow))))
    }

    /// Handles one message from the agent (see [`Datapath::handle_msg`]): UPDATE_FIELDS,
    /// CHANGE_PROG and SET_CLASS under their flow's shard lock only; INSTALL in the master, then in every
    /// shard's replica (see the type's documentation). On error, also says why the message was
    /// dropped (see [`FlowTable::drop_cause`]), decided under the same lock as the refusal.
    ///
    /// Errors (counted): those of [`Datapath::handle_msg`], and [`Error::AllocFailed`].
    pub fn handle_msg<H: Shards<PER_SHARD, P, S::Shared>>(
        &self,
        host: &H,
        buf: &[u8],
    ) -> Result<Handled, (Error, DropCause)> {
        let malformed = |e: Error| (e, DropCause::Malformed);
        let msg = match wire::parse(buf) {
            Ok((m, _)) => m,
            Err(e) => return host.with_master(|m| m.count(Err(e))).map_err(malformed),
        };
        let sid = match &msg {
            Msg::Install(i) => return self.install(host, i).map_err(malformed),
            Msg::UpdateFields(u) => u.sid,
            Msg::ChangeProg(c) => c.sid,
            Msg::SetClass(c) => c.sid,
            Msg::Create(_) | Msg::Measure(_) | Msg::Ready { .. } => {
                return host
                    .with_master(|m| m.count(Err(Error::UnexpectedMsg)))
                    .map_err(malformed)
            }
        };
        let Some(loc) = Self::locate(sid) else {
            return host
                .with_master(|m| m.count(Err(Error::UnknownFlow)))
                .map_err(malformed);
        };
        host.with_shard(loc.shard, |t, p| {
            t.handle_flow_msg(Some(loc), &msg, p)
                .map_err(|e| (e, t.drop_cause(Some(loc), e)))
        })
        .unwrap_or(Err((Error::UnknownFlow, DropCause::Malformed)))
    }

    fn install<H: Shards<PER_SHARD, P, S::Shared>>(
        &self,
        host: &H,
        msg: &wire::Install<'_>,
    ) -> Result<Handled, Error> {
        // Validation and the allocation happen before any lock (the host's store may sleep).
        let built = match build_program::<S>(msg) {
            Ok(p) => p,
            Err(e) => return host.with_master(|m| m.count(Err(e))),
        };
        let snapshot = host.with_master(|m| {
            let r = m.table.install(msg.program_uid, built);
            match m.count(r) {
                Ok(_) => {
                    m.stats.msgs_handled = m.stats.msgs_handled.wrapping_add(1);
                    m.stats.programs_installed = m.stats.programs_installed.wrapping_add(1);
                    Ok(m.table.clone())
                }
                Err(e) => Err(e),
            }
        })?;
        for shard in 0..SHARDS {
            host.with_shard(shard, |_, replica| {
                if snapshot.version() > replica.version() {
                    replica.clone_from(&snapshot);
                }
            });
        }
        Ok(Handled::Installed {
            uid: msg.program_uid,
        })
    }

    /// Chooses the path that runs programs from the next invocation on (see
    /// [`ProgramTable::set_exec_mode`]): in the master table, which later INSTALLs copy into the
    /// replicas, and in every shard's replica, one shard at a time.
    pub fn set_exec_mode<H: Shards<PER_SHARD, P, S::Shared>>(&self, host: &H, mode: ExecMode) {
        host.with_master(|m| m.table.set_exec_mode(mode));
        for shard in 0..SHARDS {
            host.with_shard(shard, |_, replica| replica.set_exec_mode(mode));
        }
    }

    /// Every counter summed: the master's and each shard's, taken one shard at a time.
    pub fn stats<H: Shards<PER_SHARD, P, S::Shared>>(&self, host: &H) -> Stats {
        let mut sum = host.with_master(|m| m.stats.clone());
        for shard in 0..SHARDS {
            host.with_shard(shard, |t, _| sum.add(t.stats()));
        }
        sum
    }
}

const FLOW_INFO_ZERO: FlowInfo = FlowInfo {
    init_cwnd: 0,
    mss: 0,
    src_ip: 0,
    src_port: 0,
    dst_ip: 0,
    dst_port: 0,
    alg: [0; FLOW_ALG_NAME_MAX],
};
