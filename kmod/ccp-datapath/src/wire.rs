//! CCP wire format: parsing into borrowed views and serialising into caller buffers.
//!
//! Every message starts with the 8-byte header `u16 type, u16 len, u32 sid` (little-endian; `len`
//! counts the header). Layouts follow libccp `serialize.h`/`serialize.c` and portus 0.9
//! `src/serialize/*.rs`; the reference is "CCP: Congestion Control Plane" (the ccp-project).
//! Nothing here allocates, indexes unchecked or panics: malformed input gives an `Error`.
//!
//! One message is this project's own, not portus's or libccp's: SET_CLASS ([`SET_CLASS`]), the
//! agent's per-flow traffic class. Its type lies far from the protocol's 0..=5 so that a later
//! CCP message type does not collide with it; a stock portus agent never sends it, libccp
//! refuses it as an unknown type, and everything else is parsed and written as before.

use super::error::Error;
use super::{MAX_EVENTS, MAX_INSTRS, MAX_UPDATES};

/// Length of the common header in bytes (portus `serialize::HDR_LENGTH`).
pub const HDR_LEN: usize = 8;

/// The netlink protocol the CCP messages travel over: `NETLINK_USERSOCK` (2, `linux/netlink.h`),
/// as portus 0.9's netlink backend uses. The one definition for the module and `ccp-ipc`.
pub const NETLINK_USERSOCK: i32 = 2;
/// The netlink multicast group the datapath sends on and the agent joins (portus 0.9's group).
pub const CCP_GROUP: u32 = 22;
/// Message type of CREATE (datapath → agent, portus `serialize::create`).
pub const CREATE: u16 = 0;
/// Message type of MEASURE (datapath → agent, portus `serialize::measure`).
pub const MEASURE: u16 = 1;
/// Message type of INSTALL (agent → datapath, portus `serialize::install`, libccp `INSTALL_EXPR`).
pub const INSTALL: u16 = 2;
/// Message type of UPDATE_FIELDS (agent → datapath, portus `serialize::update_field`).
pub const UPDATE_FIELDS: u16 = 3;
/// Message type of CHANGE_PROG (agent → datapath, portus `serialize::changeprog`).
pub const CHANGE_PROG: u16 = 4;
/// Message type of READY (datapath → agent, portus `serialize::ready`).
pub const READY: u16 = 5;
/// Message type of SET_CLASS (agent → datapath; this project's extension, not in portus or
/// libccp): `0x4d01`, the first of the extension types `0x4d00..=0x4dff` ("M" for MLTCP).
///
/// Layout (12 bytes, little-endian like the rest): the header (`type`, `len` = 12, `sid`),
/// then `u8 class`, then 3 reserved bytes that must be 0. `class` is a DSCP, 0..=63
/// (RFC 2474 §3: the upper six bits of the IPv4 TOS / IPv6 Traffic Class octet), to mark the
/// flow's packets with, or [`CLASS_RELEASE`] to give the flow back its socket's own marking.
/// Any other value, or a reserved byte that is not 0, is [`Error::BadClass`]. The datapath
/// applies it at the flow's next invocation, like UPDATE_FIELDS, and keeps it until the next
/// SET_CLASS or the flow's end; a host restores the socket's own marking whenever the agent is
/// not in charge of the flow.
pub const SET_CLASS: u16 = 0x4d01;

/// Size of the algorithm-name field of CREATE in bytes (libccp `MAX_CONG_ALG_SIZE`).
pub const ALG_NAME_LEN: usize = 64;
/// Total length of a CREATE message: header + 6 × u32 + 64-byte name (libccp `CREATE_MSG_SIZE`).
pub const CREATE_LEN: usize = HDR_LEN + 24 + ALG_NAME_LEN;
/// Total length of a READY message (libccp `READY_MSG_SIZE`).
pub const READY_LEN: usize = HDR_LEN + 4;
/// Total length of a SET_CLASS message: header + class byte + 3 reserved bytes.
pub const SET_CLASS_LEN: usize = HDR_LEN + 4;
/// The largest DSCP (a 6-bit field, RFC 2474 §3).
pub const DSCP_MAX: u8 = 63;
/// The class byte of a SET_CLASS that releases the flow's class: its packets go back to the
/// socket's own marking.
pub const CLASS_RELEASE: u8 = 0xff;
/// Length of the fixed part of MEASURE: header + program uid + field count.
pub const MEASURE_FIXED_LEN: usize = HDR_LEN + 8;
/// Length of the fixed part of INSTALL: header + uid + event count + instruction count.
pub const INSTALL_FIXED_LEN: usize = HDR_LEN + 12;
/// Length of the fixed part of UPDATE_FIELDS: header + update count.
pub const UPDATE_FIXED_LEN: usize = HDR_LEN + 4;
/// Length of the fixed part of CHANGE_PROG: header + program uid + update count.
pub const CHANGE_PROG_FIXED_LEN: usize = HDR_LEN + 8;
/// Size of one serialised event (4 × u32, libccp `struct ExpressionMsg`).
pub const EVENT_LEN: usize = 16;
/// Size of one serialised instruction (u8 op + 3 × {u8 type, u32}, libccp `struct InstructionMsg`).
pub const INSTR_LEN: usize = 16;
/// Size of one serialised update (packed u8 type, u32 index, u64 value; libccp `struct UpdateField`).
pub const UPDATE_LEN: usize = 13;

// ---------------------------------------------------------------------------------------------
// Little-endian readers and a bounded writer.

fn rd_u16(b: &[u8], off: usize) -> Option<u16> {
    b.get(off..)?
        .first_chunk::<2>()
        .map(|a| u16::from_le_bytes(*a))
}

fn rd_u32(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..)?
        .first_chunk::<4>()
        .map(|a| u32::from_le_bytes(*a))
}

fn rd_u64(b: &[u8], off: usize) -> Option<u64> {
    b.get(off..)?
        .first_chunk::<8>()
        .map(|a| u64::from_le_bytes(*a))
}

/// Writes bytes into a caller buffer at an advancing position, never past its end.
struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    /// Checks that `total` bytes fit both `buf` and a u16 header length, then writes the header.
    fn start(buf: &'a mut [u8], typ: u16, total: usize, sid: u32) -> Result<Self, Error> {
        let len = u16::try_from(total).map_err(|_| Error::MsgTooLong)?;
        if buf.len() < total {
            return Err(Error::BufferTooSmall);
        }
        let mut w = Writer { buf, pos: 0 };
        w.put(&typ.to_le_bytes())?;
        w.put(&len.to_le_bytes())?;
        w.put(&sid.to_le_bytes())?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let end = self
            .pos
            .checked_add(bytes.len())
            .ok_or(Error::BufferTooSmall)?;
        let dst = self
            .buf
            .get_mut(self.pos..end)
            .ok_or(Error::BufferTooSmall)?;
        dst.copy_from_slice(bytes);
        self.pos = end;
        Ok(())
    }

    fn u32(&mut self, v: u32) -> Result<(), Error> {
        self.put(&v.to_le_bytes())
    }

    fn u64(&mut self, v: u64) -> Result<(), Error> {
        self.put(&v.to_le_bytes())
    }

    fn done(self) -> usize {
        self.pos
    }
}

/// `fixed + n * each`, or `None` when it overflows.
fn body_len(fixed: usize, n: usize, each: usize) -> Option<usize> {
    n.checked_mul(each)?.checked_add(fixed)
}

// ---------------------------------------------------------------------------------------------
// Header.

/// The common CCP header (libccp `struct CcpMsgHeader`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Message type, one of [`CREATE`]..=[`READY`].
    pub typ: u16,
    /// Total message length in bytes, header included.
    pub len: u16,
    /// Socket id of the flow (0 for INSTALL and READY).
    pub sid: u32,
}

impl Header {
    /// Reads the header and checks `8 <= len <= buf.len()`.
    ///
    /// Errors: [`Error::Truncated`] (fewer than 8 bytes), [`Error::BadLength`].
    pub fn parse(buf: &[u8]) -> Result<Header, Error> {
        let typ = rd_u16(buf, 0).ok_or(Error::Truncated)?;
        let len = rd_u16(buf, 2).ok_or(Error::Truncated)?;
        let sid = rd_u32(buf, 4).ok_or(Error::Truncated)?;
        if usize::from(len) < HDR_LEN || usize::from(len) > buf.len() {
            return Err(Error::BadLength);
        }
        Ok(Header { typ, len, sid })
    }
}

// ---------------------------------------------------------------------------------------------
// Message bodies.

/// CREATE: a new flow (libccp `struct CreateMsg`, portus `serialize::create::Msg`).
///
/// Owned (88 bytes); the name is NUL-padded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Create {
    /// Socket id of the new flow.
    pub sid: u32,
    /// Initial congestion window in bytes.
    pub init_cwnd: u32,
    /// Maximum segment size in bytes.
    pub mss: u32,
    /// Source IPv4 address (as the datapath stores it; libccp passes it through).
    pub src_ip: u32,
    /// Source port.
    pub src_port: u32,
    /// Destination IPv4 address.
    pub dst_ip: u32,
    /// Destination port.
    pub dst_port: u32,
    /// Congestion-control algorithm name, NUL-padded (portus picks the algorithm by it).
    pub alg: [u8; ALG_NAME_LEN],
}

impl Create {
    /// The algorithm name: the bytes of [`Create::alg`] before the first NUL.
    pub fn alg_name(&self) -> &[u8] {
        let end = self
            .alg
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(ALG_NAME_LEN);
        self.alg.get(..end).unwrap_or(&[])
    }

    /// Sets the algorithm name. It must leave room for a NUL (at most 63 bytes), because
    /// portus's parser looks for one and panics without it.
    ///
    /// Errors: [`Error::AlgNameTooLong`].
    pub fn set_alg_name(&mut self, name: &[u8]) -> Result<(), Error> {
        if name.len() >= ALG_NAME_LEN {
            return Err(Error::AlgNameTooLong);
        }
        let dst = self
            .alg
            .get_mut(..name.len())
            .ok_or(Error::AlgNameTooLong)?;
        dst.copy_from_slice(name);
        if let Some(rest) = self.alg.get_mut(name.len()..) {
            rest.fill(0);
        }
        Ok(())
    }

    fn parse(h: &Header, body: &[u8]) -> Result<Create, Error> {
        if usize::from(h.len) != CREATE_LEN {
            return Err(Error::LengthMismatch);
        }
        let u = |i: usize| rd_u32(body, i.wrapping_mul(4)).ok_or(Error::Truncated);
        let alg = body
            .get(24..)
            .and_then(|b| b.first_chunk::<ALG_NAME_LEN>())
            .copied()
            .ok_or(Error::Truncated)?;
        Ok(Create {
            sid: h.sid,
            init_cwnd: u(0)?,
            mss: u(1)?,
            src_ip: u(2)?,
            src_port: u(3)?,
            dst_ip: u(4)?,
            dst_port: u(5)?,
            alg,
        })
    }

    /// Serialises into `out`; returns the length written ([`CREATE_LEN`]).
    ///
    /// Errors: [`Error::BufferTooSmall`].
    pub fn write(&self, out: &mut [u8]) -> Result<usize, Error> {
        let mut w = Writer::start(out, CREATE, CREATE_LEN, self.sid)?;
        for v in [
            self.init_cwnd,
            self.mss,
            self.src_ip,
            self.src_port,
            self.dst_ip,
            self.dst_port,
        ] {
            w.u32(v)?;
        }
        w.put(&self.alg)?;
        Ok(w.done())
    }
}

/// A packed array of little-endian u64 values inside a message (MEASURE's fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct U64s<'a>(&'a [u8]);

impl<'a> U64s<'a> {
    /// Number of values.
    pub fn len(&self) -> usize {
        self.0.len() / 8
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.0.len() < 8
    }

    /// The `i`-th value, if any.
    pub fn get(&self, i: usize) -> Option<u64> {
        rd_u64(self.0, i.checked_mul(8)?)
    }

    /// The values in order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + 'a {
        self.0
            .chunks_exact(8)
            .filter_map(|c| c.first_chunk::<8>().map(|a| u64::from_le_bytes(*a)))
    }
}

/// MEASURE: a report of a program's Report registers (libccp `struct MeasureMsg`, portus
/// `serialize::measure::Msg`). Zero fields with program uid 0 means "flow closed".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Measure<'a> {
    /// Socket id.
    pub sid: u32,
    /// Uid of the program whose registers these are.
    pub program_uid: u32,
    /// The report fields, in Report-register order.
    pub fields: U64s<'a>,
}

impl<'a> Measure<'a> {
    fn parse(h: &Header, body: &'a [u8]) -> Result<Self, Error> {
        let program_uid = rd_u32(body, 0).ok_or(Error::Truncated)?;
        let n = rd_u32(body, 4).ok_or(Error::Truncated)?;
        let want = body_len(MEASURE_FIXED_LEN, n as usize, 8).ok_or(Error::LengthMismatch)?;
        if usize::from(h.len) != want {
            return Err(Error::LengthMismatch);
        }
        let fields = body.get(8..).ok_or(Error::Truncated)?;
        Ok(Measure {
            sid: h.sid,
            program_uid,
            fields: U64s(fields),
        })
    }
}

/// Serialises a MEASURE of `fields` into `out`; returns the length written (16 + 8 × n).
///
/// Source: libccp `write_measure_msg`. Errors: [`Error::BufferTooSmall`], [`Error::MsgTooLong`].
pub fn write_measure(
    out: &mut [u8],
    sid: u32,
    program_uid: u32,
    fields: &[u64],
) -> Result<usize, Error> {
    let total = body_len(MEASURE_FIXED_LEN, fields.len(), 8).ok_or(Error::MsgTooLong)?;
    let n = u32::try_from(fields.len()).map_err(|_| Error::MsgTooLong)?;
    let mut w = Writer::start(out, MEASURE, total, sid)?;
    w.u32(program_uid)?;
    w.u32(n)?;
    for &f in fields {
        w.u64(f)?;
    }
    Ok(w.done())
}

/// One event of an INSTALL (libccp `struct ExpressionMsg`, portus `lang::datapath::Event`):
/// instruction ranges of the condition and of the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct EventMsg {
    /// Index of the first condition instruction.
    pub cond_start: u32,
    /// Number of condition instructions.
    pub cond_len: u32,
    /// Index of the first body instruction.
    pub body_start: u32,
    /// Number of body instructions.
    pub body_len: u32,
}

/// A register operand as serialised: type byte and u32 (index, or value for an immediate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RegMsg {
    /// Register type (libccp `ccp_priv.h`: 0/8 control, 1 immediate, 2 implicit, 3 local,
    /// 4 primitive, 5/6 report, 7 tmp).
    pub typ: u8,
    /// Register index, or the immediate value.
    pub val: u32,
}

/// One instruction of an INSTALL (libccp `struct InstructionMsg`): opcode and three operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct InstrMsg {
    /// Opcode (see [`super::program::Op`]).
    pub op: u8,
    /// Result register.
    pub ret: RegMsg,
    /// Left operand.
    pub left: RegMsg,
    /// Right operand.
    pub right: RegMsg,
}

impl InstrMsg {
    fn read(c: &[u8]) -> Option<InstrMsg> {
        let reg = |o: usize| -> Option<RegMsg> {
            Some(RegMsg {
                typ: *c.get(o)?,
                val: rd_u32(c, o.checked_add(1)?)?,
            })
        };
        Some(InstrMsg {
            op: *c.first()?,
            ret: reg(1)?,
            left: reg(6)?,
            right: reg(11)?,
        })
    }
}

/// INSTALL: a datapath program, for all flows (portus `serialize::install::Msg`, libccp
/// `InstallExpressionMsgHdr` + events + instructions). Borrowed view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Install<'a> {
    /// Socket id from the header (portus sends 0; ignored by the datapath).
    pub sid: u32,
    /// Program uid assigned by the agent.
    pub program_uid: u32,
    events: &'a [u8],
    instrs: &'a [u8],
}

impl<'a> Install<'a> {
    fn parse(h: &Header, body: &'a [u8]) -> Result<Self, Error> {
        let program_uid = rd_u32(body, 0).ok_or(Error::Truncated)?;
        let ne = rd_u32(body, 4).ok_or(Error::Truncated)? as usize;
        let ni = rd_u32(body, 8).ok_or(Error::Truncated)? as usize;
        if ne > MAX_EVENTS {
            return Err(Error::TooManyEvents);
        }
        if ni > MAX_INSTRS {
            return Err(Error::TooManyInstrs);
        }
        let ev_bytes = ne.checked_mul(EVENT_LEN).ok_or(Error::LengthMismatch)?;
        let in_bytes = ni.checked_mul(INSTR_LEN).ok_or(Error::LengthMismatch)?;
        let want =
            body_len(INSTALL_FIXED_LEN, ne.saturating_add(ni), 16).ok_or(Error::LengthMismatch)?;
        if usize::from(h.len) != want {
            return Err(Error::LengthMismatch);
        }
        let rest = body.get(12..).ok_or(Error::Truncated)?;
        let events = rest.get(..ev_bytes).ok_or(Error::Truncated)?;
        let instrs = rest
            .get(ev_bytes..)
            .and_then(|r| r.get(..in_bytes))
            .ok_or(Error::Truncated)?;
        Ok(Install {
            sid: h.sid,
            program_uid,
            events,
            instrs,
        })
    }

    /// Number of events.
    pub fn num_events(&self) -> usize {
        self.events.len() / EVENT_LEN
    }

    /// Number of instructions.
    pub fn num_instrs(&self) -> usize {
        self.instrs.len() / INSTR_LEN
    }

    /// The events in order.
    pub fn events(&self) -> impl Iterator<Item = EventMsg> + 'a {
        self.events.chunks_exact(EVENT_LEN).filter_map(|c| {
            Some(EventMsg {
                cond_start: rd_u32(c, 0)?,
                cond_len: rd_u32(c, 4)?,
                body_start: rd_u32(c, 8)?,
                body_len: rd_u32(c, 12)?,
            })
        })
    }

    /// The instructions in order.
    pub fn instrs(&self) -> impl Iterator<Item = InstrMsg> + 'a {
        self.instrs
            .chunks_exact(INSTR_LEN)
            .filter_map(InstrMsg::read)
    }
}

/// Serialises an INSTALL into `out`; returns the length written (20 + 16 × (events + instrs)).
///
/// Source: portus `serialize::install` + `lang::serialize`. Errors: [`Error::BufferTooSmall`],
/// [`Error::MsgTooLong`].
pub fn write_install(
    out: &mut [u8],
    sid: u32,
    program_uid: u32,
    events: &[EventMsg],
    instrs: &[InstrMsg],
) -> Result<usize, Error> {
    let n = events
        .len()
        .checked_add(instrs.len())
        .ok_or(Error::MsgTooLong)?;
    let total = body_len(INSTALL_FIXED_LEN, n, 16).ok_or(Error::MsgTooLong)?;
    let ne = u32::try_from(events.len()).map_err(|_| Error::MsgTooLong)?;
    let ni = u32::try_from(instrs.len()).map_err(|_| Error::MsgTooLong)?;
    let mut w = Writer::start(out, INSTALL, total, sid)?;
    w.u32(program_uid)?;
    w.u32(ne)?;
    w.u32(ni)?;
    for e in events {
        for v in [e.cond_start, e.cond_len, e.body_start, e.body_len] {
            w.u32(v)?;
        }
    }
    for i in instrs {
        w.put(&[i.op])?;
        for r in [i.ret, i.left, i.right] {
            w.put(&[r.typ])?;
            w.u32(r.val)?;
        }
    }
    Ok(w.done())
}

/// One register update of UPDATE_FIELDS / CHANGE_PROG (libccp `struct UpdateField`, packed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct UpdateField {
    /// Register type (0/8 control, 2 implicit; others are rejected by the datapath).
    pub reg_type: u8,
    /// Register index (implicit 4 = `Cwnd`, 5 = `Rate`).
    pub reg_index: u32,
    /// New value (bytes for `Cwnd`, bytes/s for `Rate`).
    pub value: u64,
}

/// A packed array of [`UpdateField`]s inside a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Updates<'a>(&'a [u8]);

impl<'a> Updates<'a> {
    /// Number of updates.
    pub fn len(&self) -> usize {
        self.0.len() / UPDATE_LEN
    }

    /// True when there are no updates.
    pub fn is_empty(&self) -> bool {
        self.0.len() < UPDATE_LEN
    }

    /// The updates in order.
    pub fn iter(&self) -> impl Iterator<Item = UpdateField> + 'a {
        self.0.chunks_exact(UPDATE_LEN).filter_map(|c| {
            Some(UpdateField {
                reg_type: *c.first()?,
                reg_index: rd_u32(c, 1)?,
                value: rd_u64(c, 5)?,
            })
        })
    }

    fn parse(h: &Header, body: &'a [u8], fixed: usize, n: u32) -> Result<Self, Error> {
        let n = n as usize;
        if n > MAX_UPDATES {
            return Err(Error::TooManyUpdates);
        }
        let want = body_len(fixed, n, UPDATE_LEN).ok_or(Error::LengthMismatch)?;
        if usize::from(h.len) != want {
            return Err(Error::LengthMismatch);
        }
        let start = fixed.checked_sub(HDR_LEN).ok_or(Error::Truncated)?;
        let raw = body.get(start..).ok_or(Error::Truncated)?;
        Ok(Updates(raw))
    }
}

fn write_updates(w: &mut Writer<'_>, updates: &[UpdateField]) -> Result<(), Error> {
    for u in updates {
        w.put(&[u.reg_type])?;
        w.u32(u.reg_index)?;
        w.u64(u.value)?;
    }
    Ok(())
}

/// UPDATE_FIELDS: new values for a flow's control registers, `Cwnd` or `Rate` (portus
/// `serialize::update_field::Msg`). Borrowed view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpdateFieldsMsg<'a> {
    /// Socket id of the flow.
    pub sid: u32,
    /// The updates.
    pub updates: Updates<'a>,
}

/// Serialises an UPDATE_FIELDS into `out`; returns the length written (12 + 13 × n).
///
/// Errors: [`Error::BufferTooSmall`], [`Error::MsgTooLong`].
pub fn write_update_fields(
    out: &mut [u8],
    sid: u32,
    updates: &[UpdateField],
) -> Result<usize, Error> {
    let total = body_len(UPDATE_FIXED_LEN, updates.len(), UPDATE_LEN).ok_or(Error::MsgTooLong)?;
    let n = u32::try_from(updates.len()).map_err(|_| Error::MsgTooLong)?;
    let mut w = Writer::start(out, UPDATE_FIELDS, total, sid)?;
    w.u32(n)?;
    write_updates(&mut w, updates)?;
    Ok(w.done())
}

/// CHANGE_PROG: switch a flow to an installed program, with initial updates (portus
/// `serialize::changeprog::Msg`, libccp `struct ChangeProgMsg`). Borrowed view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChangeProg<'a> {
    /// Socket id of the flow.
    pub sid: u32,
    /// Uid of the program to run.
    pub program_uid: u32,
    /// Updates applied together with the switch.
    pub updates: Updates<'a>,
}

/// Serialises a CHANGE_PROG into `out`; returns the length written (16 + 13 × n).
///
/// Errors: [`Error::BufferTooSmall`], [`Error::MsgTooLong`].
pub fn write_change_prog(
    out: &mut [u8],
    sid: u32,
    program_uid: u32,
    updates: &[UpdateField],
) -> Result<usize, Error> {
    let total =
        body_len(CHANGE_PROG_FIXED_LEN, updates.len(), UPDATE_LEN).ok_or(Error::MsgTooLong)?;
    let n = u32::try_from(updates.len()).map_err(|_| Error::MsgTooLong)?;
    let mut w = Writer::start(out, CHANGE_PROG, total, sid)?;
    w.u32(program_uid)?;
    w.u32(n)?;
    write_updates(&mut w, updates)?;
    Ok(w.done())
}

/// Serialises a READY carrying the datapath `id` into `out`; returns [`READY_LEN`].
///
/// Source: libccp `write_ready_msg` (sid 0). Errors: [`Error::BufferTooSmall`].
pub fn write_ready(out: &mut [u8], id: u32) -> Result<usize, Error> {
    write_ready_sid(out, 0, id)
}

fn write_ready_sid(out: &mut [u8], sid: u32, id: u32) -> Result<usize, Error> {
    let mut w = Writer::start(out, READY, READY_LEN, sid)?;
    w.u32(id)?;
    Ok(w.done())
}

/// SET_CLASS: the agent's traffic class for one flow (this project's extension, see
/// [`SET_CLASS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetClass {
    /// Socket id of the flow.
    pub sid: u32,
    /// The DSCP to mark the flow's packets with (0..=[`DSCP_MAX`]), or `None` to restore the
    /// socket's own marking.
    pub dscp: Option<u8>,
}

impl SetClass {
    /// The wire byte of `dscp`: the DSCP itself, or [`CLASS_RELEASE`] for `None`.
    ///
    /// Errors: [`Error::BadClass`] for a DSCP above [`DSCP_MAX`].
    pub fn class_byte(dscp: Option<u8>) -> Result<u8, Error> {
        match dscp {
            None => Ok(CLASS_RELEASE),
            Some(d) if d <= DSCP_MAX => Ok(d),
            Some(_) => Err(Error::BadClass),
        }
    }

    fn parse(h: &Header, body: &[u8]) -> Result<Self, Error> {
        if usize::from(h.len) != SET_CLASS_LEN {
            return Err(Error::LengthMismatch);
        }
        let [class, r0, r1, r2] = *body.first_chunk::<4>().ok_or(Error::Truncated)?;
        if [r0, r1, r2] != [0, 0, 0] {
            return Err(Error::BadClass);
        }
        let dscp = match class {
            CLASS_RELEASE => None,
            d if d <= DSCP_MAX => Some(d),
            _ => return Err(Error::BadClass),
        };
        Ok(SetClass { sid: h.sid, dscp })
    }

    /// Serialises into `out`; returns the length written ([`SET_CLASS_LEN`]).
    ///
    /// Errors: [`Error::BadClass`] (a DSCP above [`DSCP_MAX`]), [`Error::BufferTooSmall`].
    pub fn write(&self, out: &mut [u8]) -> Result<usize, Error> {
        let class = Self::class_byte(self.dscp)?;
        let mut w = Writer::start(out, SET_CLASS, SET_CLASS_LEN, self.sid)?;
        w.put(&[class, 0, 0, 0])?;
        Ok(w.done())
    }
}

/// Serialises a SET_CLASS for flow `sid` into `out` (see [`SET_CLASS`]): `Some(dscp)` marks its
/// packets with `dscp`, `None` restores the socket's own marking. Returns [`SET_CLASS_LEN`].
///
/// Errors: [`Error::BadClass`] (a DSCP above [`DSCP_MAX`]), [`Error::BufferTooSmall`].
pub fn write_set_class(out: &mut [u8], sid: u32, dscp: Option<u8>) -> Result<usize, Error> {
    SetClass { sid, dscp }.write(out)
}

/// Any parsed message: owned for the fixed-size ones, borrowed views for the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Msg<'a> {
    /// CREATE.
    Create(Create),
    /// MEASURE.
    Measure(Measure<'a>),
    /// INSTALL.
    Install(Install<'a>),
    /// UPDATE_FIELDS.
    UpdateFields(UpdateFieldsMsg<'a>),
    /// CHANGE_PROG.
    ChangeProg(ChangeProg<'a>),
    /// SET_CLASS (this project's extension).
    SetClass(SetClass),
    /// READY with the datapath id.
    Ready {
        /// Socket id from the header (libccp and we send 0; portus ignores it).
        sid: u32,
        /// The datapath's id.
        id: u32,
    },
}

/// Parses the first message in `buf`. Returns the message and its length (the header's `len`);
/// bytes after it are not looked at (netlink pads messages to 4 bytes).
///
/// Strict: the header's `len` must equal the length the counts in the body imply.
/// Errors: [`Error::Truncated`], [`Error::BadLength`], [`Error::LengthMismatch`],
/// [`Error::UnknownType`], [`Error::TooManyEvents`], [`Error::TooManyInstrs`],
/// [`Error::TooManyUpdates`], [`Error::BadClass`].
pub fn parse(buf: &[u8]) -> Result<(Msg<'_>, usize), Error> {
    let h = Header::parse(buf)?;
    let len = usize::from(h.len);
    let body = buf.get(HDR_LEN..len).ok_or(Error::BadLength)?;
    let m = match h.typ {
        CREATE => Msg::Create(Create::parse(&h, body)?),
        MEASURE => Msg::Measure(Measure::parse(&h, body)?),
        INSTALL => Msg::Install(Install::parse(&h, body)?),
        UPDATE_FIELDS => {
            let n = rd_u32(body, 0).ok_or(Error::Truncated)?;
            let updates = Updates::parse(&h, body, UPDATE_FIXED_LEN, n)?;
            Msg::UpdateFields(UpdateFieldsMsg {
                sid: h.sid,
                updates,
            })
        }
        CHANGE_PROG => {
            let program_uid = rd_u32(body, 0).ok_or(Error::Truncated)?;
            let n = rd_u32(body, 4).ok_or(Error::Truncated)?;
            let updates = Updates::parse(&h, body, CHANGE_PROG_FIXED_LEN, n)?;
            Msg::ChangeProg(ChangeProg {
                sid: h.sid,
                program_uid,
                updates,
            })
        }
        READY => {
            if len != READY_LEN {
                return Err(Error::LengthMismatch);
            }
            Msg::Ready {
                sid: h.sid,
                id: rd_u32(body, 0).ok_or(Error::Truncated)?,
            }
        }
        SET_CLASS => Msg::SetClass(SetClass::parse(&h, body)?),
        _ => return Err(Error::UnknownType),
    };
    Ok((m, len))
}

impl Msg<'_> {
    /// The message type code ([`CREATE`]..=[`READY`], or [`SET_CLASS`]).
    pub fn typ(&self) -> u16 {
        match self {
            Msg::Create(_) => CREATE,
            Msg::Measure(_) => MEASURE,
            Msg::Install(_) => INSTALL,
            Msg::UpdateFields(_) => UPDATE_FIELDS,
            Msg::ChangeProg(_) => CHANGE_PROG,
            Msg::Ready { .. } => READY,
            Msg::SetClass(_) => SET_CLASS,
        }
    }

    /// Serialises the message again into `out`; returns the length written. A parsed message
    /// serialises to exactly the bytes it was parsed from.
    ///
    /// Errors: [`Error::BufferTooSmall`], [`Error::MsgTooLong`].
    pub fn write(&self, out: &mut [u8]) -> Result<usize, Error> {
        match self {
            Msg::Create(c) => c.write(out),
            Msg::SetClass(c) => c.write(out),
            Msg::Ready { sid, id } => write_ready_sid(out, *sid, *id),
            Msg::Measure(m) => {
                let total = MEASURE_FIXED_LEN
                    .checked_add(m.fields.0.len())
                    .ok_or(Error::MsgTooLong)?;
                let n = u32::try_from(m.fields.len()).map_err(|_| Error::MsgTooLong)?;
                let mut w = Writer::start(out, MEASURE, total, m.sid)?;
                w.u32(m.program_uid)?;
                w.u32(n)?;
                w.put(m.fields.0)?;
                Ok(w.done())
            }
            Msg::Install(i) => {
                let total = INSTALL_FIXED_LEN
                    .checked_add(i.events.len())
                    .and_then(|t| t.checked_add(i.instrs.len()))
                    .ok_or(Error::MsgTooLong)?;
                let ne = u32::try_from(i.num_events()).map_err(|_| Error::MsgTooLong)?;
                let ni = u32::try_from(i.num_instrs()).map_err(|_| Error::MsgTooLong)?;
                let mut w = Writer::start(out, INSTALL, total, i.sid)?;
                w.u32(i.program_uid)?;
                w.u32(ne)?;
                w.u32(ni)?;
                w.put(i.events)?;
                w.put(i.instrs)?;
                Ok(w.done())
            }
            Msg::UpdateFields(u) => {
                let total = UPDATE_FIXED_LEN
                    .checked_add(u.updates.0.len())
                    .ok_or(Error::MsgTooLong)?;
                let n = u32::try_from(u.updates.len()).map_err(|_| Error::MsgTooLong)?;
                let mut w = Writer::start(out, UPDATE_FIELDS, total, u.sid)?;
                w.u32(n)?;
                w.put(u.updates.0)?;
                Ok(w.done())
            }
            Msg::ChangeProg(c) => {
                let total = CHANGE_PROG_FIXED_LEN
                    .checked_add(c.updates.0.len())
                    .ok_or(Error::MsgTooLong)?;
                let n = u32::try_from(c.updates.len()).map_err(|_| Error::MsgTooLong)?;
                let mut w = Writer::start(out, CHANGE_PROG, total, c.sid)?;
                w.u32(c.program_uid)?;
                w.u32(n)?;
                w.put(c.updates.0)?;
                Ok(w.done())
            }
        }
    }
}
