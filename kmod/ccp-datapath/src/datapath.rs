//! The datapath: program table + fixed-capacity flow table + error counters, and the entry
//! points a host (the kernel module, a user-space mock) calls: start/end a flow, invoke it per
//! ACK, hand it a message from the agent.
//!
//! Mirrors libccp `ccp.c` (ccp_init, ccp_connection_start/free, ccp_invoke, ccp_read_msg). Socket
//! ids carry a per-slot generation so that a message for a finished flow never reaches the next
//! flow in the same slot.

use super::error::{DropCause, Error, Stats};
use super::machine::{FlowState, Invoked, Primitives, ReportStatus};
use super::program::{Program, ProgramTable};
use super::wire::{self, Msg};
use super::FLOW_ALG_NAME_MAX;

/// Returned by [`DatapathOps::send_msg`] when a message could not be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendError;

/// What the host provides: a clock, a way to send to the agent, and the two actuators of the
/// flow being invoked (libccp `struct ccp_datapath` callbacks).
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
}

#[derive(Clone, Debug)]
struct FlowSlot {
    used: bool,
    gen: u16,
    state: FlowState,
}

/// Bits of a socket id that hold `slot index + 1`; the upper 16 bits hold the slot generation.
const SID_SLOT_MASK: u32 = 0xffff;

/// A CCP datapath for up to `FLOWS` flows (1..=65535) and `PROGRAMS` programs.
///
/// Size on x86-64: `FLOWS` × 752 B + `PROGRAMS` × 9.2 KiB (4096 flows and 32 programs:
/// 3,376,040 B, 3.2 MiB). Every field is an integer, bool or array of them, and the all-zero bit pattern is
/// the same value as [`Datapath::new`], so the kernel may allocate it zeroed. Not thread-safe by
/// itself: the host serialises calls (one lock for the message path and the ACK path).
#[derive(Clone, Debug)]
pub struct Datapath<const FLOWS: usize, const PROGRAMS: usize> {
    programs: ProgramTable<PROGRAMS>,
    flows: [FlowSlot; FLOWS],
    next_slot: usize,
    time_zero_us: u64,
    stats: Stats,
}

impl<const FLOWS: usize, const PROGRAMS: usize> Datapath<FLOWS, PROGRAMS> {
    const EMPTY_FLOW: FlowSlot = FlowSlot {
        used: false,
        gen: 0,
        state: FlowState::new(FLOW_INFO_ZERO, 0),
    };
    const SIZE_OK: () = assert!(
        FLOWS > 0 && FLOWS < SID_SLOT_MASK as usize,
        "flow table size must be 1..65535"
    );

    /// An empty datapath (time zero 0; call [`Datapath::init`]).
    pub const fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::SIZE_OK;
        Datapath {
            programs: ProgramTable::new(),
            flows: [Self::EMPTY_FLOW; FLOWS],
            next_slot: 0,
            time_zero_us: 0,
            stats: Stats::new(),
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
        let mut buf = [0u8; wire::READY_LEN];
        let r = wire::write_ready(&mut buf, id).and_then(|n| {
            ops.send_msg(buf.get(..n).unwrap_or(&[]))
                .map_err(|_| Error::SendFailed)
        });
        self.count(r)
    }

    /// The error and event counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The program table.
    pub fn programs(&self) -> &ProgramTable<PROGRAMS> {
        &self.programs
    }

    /// The installed program with this uid.
    pub fn program(&self, uid: u32) -> Option<&Program> {
        self.programs.by_uid(uid)
    }

    fn count<T>(&mut self, r: Result<T, Error>) -> Result<T, Error> {
        if let Err(e) = r {
            self.stats.record(e);
        }
        r
    }

    fn slot_of(sid: u32) -> Option<(usize, u16)> {
        let idx = ((sid & SID_SLOT_MASK) as usize).checked_sub(1)?;
        Some((idx, (sid >> 16) as u16))
    }

    fn lookup(&self, sid: u32) -> Option<&FlowState> {
        let (idx, gen) = Self::slot_of(sid)?;
        let s = self.flows.get(idx)?;
        (s.used && s.gen == gen).then_some(&s.state)
    }

    fn lookup_mut(&mut self, sid: u32) -> Option<&mut FlowState> {
        let (idx, gen) = Self::slot_of(sid)?;
        let s = self.flows.get_mut(idx)?;
        (s.used && s.gen == gen).then_some(&mut s.state)
    }

    /// The state of a live flow.
    pub fn flow(&self, sid: u32) -> Option<&FlowState> {
        self.lookup(sid)
    }

    /// True if the flow is live and runs, or is about to run, an installed program: the agent
    /// is in charge of it.
    pub fn flow_has_program(&self, sid: u32) -> bool {
        self.lookup(sid).is_some_and(|f| {
            let pending = f.program_pending();
            self.programs.get(f.program()).is_some() || pending
        })
    }

    /// Number of live flows (started and not ended; O(1), from the counters).
    pub fn num_flows(&self) -> usize {
        self.stats
            .flows_started
            .wrapping_sub(self.stats.flows_ended) as usize
    }

    /// Why [`Datapath::handle_msg`] refused `buf` with `e`: [`DropCause::Late`] when `e` is
    /// [`Error::UnknownFlow`] and the message's socket id names a flow this datapath started
    /// and has since ended (a valid slot whose generation is the id's or up to 32767 later),
    /// [`DropCause::Malformed`] otherwise.
    pub fn drop_cause(&self, buf: &[u8], e: Error) -> DropCause {
        if e != Error::UnknownFlow {
            return DropCause::Malformed;
        }
        let ended = wire::Header::parse(buf)
            .ok()
            .and_then(|h| Self::slot_of(h.sid))
            .and_then(|(idx, gen)| self.flows.get(idx).map(|s| (s, gen)))
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
        let n = self.flows.len();
        let found = (0..n)
            .map(|k| self.next_slot.wrapping_add(k).checked_rem(n).unwrap_or(0))
            .find(|&i| self.flows.get(i).is_some_and(|s| !s.used));
        let Some(idx) = found else {
            return self.count(Err(Error::FlowTableFull));
        };
        let time_zero = self.time_zero_us;
        let Some(slot) = self.flows.get_mut(idx) else {
            return self.count(Err(Error::FlowTableFull));
        };
        slot.used = true;
        slot.gen = slot.gen.wrapping_add(1);
        slot.state = FlowState::new(*info, time_zero);
        let sid = (u32::from(slot.gen) << 16) | ((idx as u32).wrapping_add(1) & SID_SLOT_MASK);
        let sent = slot.state.send_create(sid, ops);
        self.next_slot = idx.wrapping_add(1);
        self.stats.flows_started = self.stats.flows_started.wrapping_add(1);
        let _ = self.count(sent);
        Ok(sid)
    }

    /// Ends a flow: frees its slot and sends the closing MEASURE (uid 0, no fields; libccp
    /// `ccp_connection_free`).
    ///
    /// Errors (counted): [`Error::UnknownFlow`], [`Error::SendFailed`] (the slot is freed
    /// anyway).
    pub fn flow_end(&mut self, sid: u32, ops: &mut impl DatapathOps) -> Result<(), Error> {
        let r = match Self::slot_of(sid)
            .and_then(|(i, g)| self.flows.get_mut(i).filter(|s| s.used && s.gen == g))
        {
            None => Err(Error::UnknownFlow),
            Some(slot) => {
                slot.used = false;
                self.stats.flows_ended = self.stats.flows_ended.wrapping_add(1);
                let mut buf = [0u8; wire::MEASURE_FIXED_LEN];
                wire::write_measure(&mut buf, sid, 0, &[])
                    .and_then(|n| {
                        ops.send_msg(buf.get(..n).unwrap_or(&[]))
                            .map_err(|_| Error::SendFailed)
                    })
                    .map(|_| ())
            }
        };
        self.count(r)
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
        let r = match Self::slot_of(sid)
            .and_then(|(i, g)| self.flows.get_mut(i).filter(|s| s.used && s.gen == g))
        {
            None => Err(Error::UnknownFlow),
            Some(slot) => {
                self.stats.invocations = self.stats.invocations.wrapping_add(1);
                slot.state.invoke(sid, &self.programs, prims, tz, ops)
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

    /// Handles one message from the agent (libccp `ccp_read_msg`): INSTALL, UPDATE_FIELDS or
    /// CHANGE_PROG. Updates are staged and take effect at the flow's next invocation. Bytes
    /// after the message's `len` are ignored.
    ///
    /// Errors (counted): every wire error, [`Error::UnexpectedMsg`] for CREATE/MEASURE/READY,
    /// the install errors, [`Error::UnknownFlow`], [`Error::ProgramNotFound`],
    /// [`Error::BadUpdateReg`], [`Error::UpdateIndexOutOfRange`]. On error nothing changes.
    pub fn handle_msg(&mut self, buf: &[u8]) -> Result<Handled, Error> {
        let r = self.handle_inner(buf);
        if r.is_ok() {
            self.stats.msgs_handled = self.stats.msgs_handled.wrapping_add(1);
        }
        if let Ok(Handled::Installed { .. }) = r {
            self.stats.programs_installed = self.stats.programs_installed.wrapping_add(1);
        }
        self.count(r)
    }

    fn handle_inner(&mut self, buf: &[u8]) -> Result<Handled, Error> {
        let (msg, _) = wire::parse(buf)?;
        match msg {
            Msg::Install(i) => {
                self.programs.install(&i)?;
                Ok(Handled::Installed { uid: i.program_uid })
            }
            Msg::UpdateFields(u) => {
                let f = self.lookup_mut(u.sid).ok_or(Error::UnknownFlow)?;
                f.stage_updates(&u.updates)?;
                Ok(Handled::Updated { sid: u.sid })
            }
            Msg::ChangeProg(c) => {
                if self.lookup(c.sid).is_none() {
                    return Err(Error::UnknownFlow);
                }
                let p = self
                    .programs
                    .lookup_uid(c.program_uid)
                    .ok_or(Error::ProgramNotFound)?;
                let f = self.lookup_mut(c.sid).ok_or(Error::UnknownFlow)?;
                f.stage_program(p, &c.updates)?;
                Ok(Handled::ProgramChanged {
                    sid: c.sid,
                    uid: c.program_uid,
                })
            }
            Msg::Create(_) | Msg::Measure(_) | Msg::Ready { .. } => Err(Error::UnexpectedMsg),
        }
    }
}

impl<const FLOWS: usize, const PROGRAMS: usize> Default for Datapath<FLOWS, PROGRAMS> {
    fn default() -> Self {
        Self::new()
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
