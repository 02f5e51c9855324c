// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The `bpf` backend: a CCP datapath emulated in user space over the BPF agent datapath of
//! `mltcp-bpf` (kmod/mltcp-bpf/bpf/mltcp.bpf.c, layouts in mltcp_agent.h), for stock kernels
//! that cannot load tcp_mltcp.ko.
//!
//! The BPF side runs one program only, the agent's slot program
//! (datapath-programs/mlcc-slot.ccp), in fixed C (mltcp_slot.h, pinned to the interpreted
//! program by kmod/mltcp-bpf/difftest's tests/slot.rs). This backend:
//!
//! - turns the ring buffer's records (`mltcp_events`) into the CCP messages the agent expects, in
//!   the project's wire format ([`ccp_datapath::wire`]): a flow's CREATE, a MEASURE per report
//!   (fields in the order the slot program declares its Report registers), the closing MEASURE;
//! - parses what the agent sends with the same wire parser ([`Translator::from_agent`]): INSTALL
//!   is accepted only for the slot program (its events and instructions compared with the
//!   program's, as portus compiles it, not a file name) and any other program is refused with an
//!   error naming it (logged and counted, never a panic); CHANGE_PROG and UPDATE_FIELDS become the
//!   flow's entry in `mltcp_ctl` (Rate, Cwnd, Control.slot_us, Control.cwnd_cap,
//!   Control.scavenge_us); SET_CLASS becomes its DSCP there ([`BpfClassSender`]);
//! - keeps the datapath attached with a heartbeat in `mltcp_agent`, refreshed every
//!   [`HEARTBEAT_PERIOD`] by a thread of its own: the BPF side honours the agent's controls only
//!   while the heartbeat is younger than [`HEARTBEAT_TIMEOUT`], so flows go back to plain BPF
//!   `mltcp` (no pacing limit, their own marking) within that time after the agent exits, however
//!   it exits (kill -9 included); a clean exit clears it at once. A new agent first deletes the
//!   control entries a previous one left, so that one's flows stay on plain `mltcp`.
//!
//! The maps are found by name through the kernel's map IDs (CAP_SYS_ADMIN), as `mltcp-bpf status`
//! finds its own; `mltcp-bpf load` must have registered a version with the agent datapath.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ccp_datapath::program::{Instr, Op, RegKind};
use ccp_datapath::wire::{self, EventMsg, InstrMsg, Msg, UpdateField};
use libbpf_rs::query::MapInfoIter;
use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType, RingBuffer, RingBufferBuilder};
use portus::ipc::Ipc;
use portus::{Error, Result};

/// The slot program, as shipped (comment lines are dropped before compiling, as the agent does).
const SLOT_PROGRAM: &str = include_str!("../../../datapath-programs/mlcc-slot.ccp");

/// The slot program's text as an agent hands it to portus: the shipped
/// datapath-programs/mlcc-slot.ccp without its comment lines (`ccp_datapath::program_lines`),
/// the text [`SlotProgram::compile`] compiles. An INSTALL of it is the one this backend accepts
/// (`ccp-test-agent --ipc bpf const-rate` installs it so).
pub fn slot_program_source() -> String {
    ccp_datapath::program_lines(SLOT_PROGRAM)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Record kinds of `mltcp_events` (mltcp_agent.h `MLTCP_REC_*`).
pub const REC_CREATE: u32 = 1;
/// A report (`struct mltcp_rec_measure`).
pub const REC_MEASURE: u32 = 2;
/// The flow released the algorithm (`struct mltcp_rec_close`).
pub const REC_CLOSE: u32 = 3;
/// Bytes of `struct mltcp_rec_create`.
pub const CREATE_REC_LEN: usize = 40;
/// The CREATE record's algorithms (`MLTCP_REC_ALG_*`, its last field), by the names the module's
/// CREATE gives them: `mltcp` (0) and `mltcp_cubic` (1).
pub const REC_ALGS: [&[u8]; 2] = [b"mltcp", b"mltcp_cubic"];
/// Report fields of the slot program (`MLTCP_SLOT_REPORT_FIELDS`).
pub const REPORT_FIELDS: usize = 14;
/// Bytes of `struct mltcp_rec_measure`.
pub const MEASURE_REC_LEN: usize = 8 + 8 * REPORT_FIELDS;
/// Bytes of `struct mltcp_rec_close`.
pub const CLOSE_REC_LEN: usize = 8;
/// Bytes of `struct mltcp_agent_ctl`.
pub const CTL_LEN: usize = 56;
/// Bytes of `struct mltcp_agent_attach`.
pub const ATTACH_LEN: usize = 16;
/// `MLTCP_NO_CLASS`: the flow keeps its socket's own marking.
pub const NO_CLASS: u32 = 0xff;

/// How often the backend refreshes its heartbeat.
pub const HEARTBEAT_PERIOD: Duration = Duration::from_millis(200);
/// How long a heartbeat holds on the BPF side: the longest a flow follows an agent that died.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(1);

/// The map names (mltcp.bpf.c).
const EVENTS_MAP: &str = "mltcp_events";
const ATTACH_MAP: &str = "mltcp_agent";
const CTL_MAP: &str = "mltcp_ctl";

/// Register types, opcodes and implicit registers: `ccp_datapath::program::{RegKind, Op}` and
/// `ccp_datapath::machine::{CWND, RATE}`, as bytes and indices of the wire format.
const REG_CONTROL: u8 = RegKind::NonvolatileControl as u8;
const REG_CONTROL_VOLATILE: u8 = RegKind::VolatileControl as u8;
const REG_IMPLICIT: u8 = RegKind::Implicit as u8;
const IMPLICIT_CWND: u32 = ccp_datapath::machine::CWND as u32;
const IMPLICIT_RATE: u32 = ccp_datapath::machine::RATE as u32;
const OP_DEF: u8 = Op::Def as u8;

/// Why a message from the agent was not applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The message does not parse with the wire parser.
    Wire(ccp_datapath::Error),
    /// An INSTALL of a program other than the slot program.
    NotSlotProgram {
        /// Its uid.
        uid: u32,
        /// Its number of Report fields (the slot program has [`REPORT_FIELDS`]).
        report_fields: usize,
        /// Its number of instructions.
        instrs: usize,
        /// The slot program's instructions.
        slot_instrs: usize,
    },
    /// CHANGE_PROG to a program uid that was not installed (or was refused).
    UnknownProgram(u32),
    /// A message for a flow the datapath did not announce (or that has closed).
    UnknownFlow(u32),
    /// An update of a register the slot program does not let the agent set.
    BadRegister {
        /// The register type.
        typ: u8,
        /// Its index.
        index: u32,
    },
    /// A message a datapath sends, not one it takes (CREATE, MEASURE, READY).
    Unexpected(u16),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Wire(e) => write!(f, "malformed CCP message: {e:?}"),
            Refusal::NotSlotProgram {
                uid,
                report_fields,
                instrs,
                slot_instrs,
            } => write!(
                f,
                "the BPF datapath runs only the agent's slot program (datapath-programs/mlcc-slot.ccp, \
                 {REPORT_FIELDS} report fields, {slot_instrs} instructions): program uid {uid} \
                 ({report_fields} report fields, {instrs} instructions) refused; use --ipc netlink \
                 with tcp_mltcp.ko for other programs"
            ),
            Refusal::UnknownProgram(uid) => {
                write!(f, "CHANGE_PROG to program uid {uid}, which is not installed")
            }
            Refusal::UnknownFlow(sid) => write!(f, "no flow {sid} in the BPF datapath"),
            Refusal::BadRegister { typ, index } => write!(
                f,
                "register type {typ} index {index} is not one the slot program lets the agent set"
            ),
            Refusal::Unexpected(t) => write!(f, "message type {t} is not one a datapath takes"),
        }
    }
}

impl std::error::Error for Refusal {}

/// A record of the ring buffer, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// A new flow (`struct mltcp_rec_create`).
    Create(wire::Create),
    /// A report: the flow id and the slot program's Report registers in order.
    Measure {
        /// The flow id.
        sid: u32,
        /// The fields.
        fields: [u64; REPORT_FIELDS],
    },
    /// The flow released the algorithm.
    Close {
        /// The flow id.
        sid: u32,
    },
}

fn rd_u32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at.checked_add(4)?)?
        .try_into()
        .ok()
        .map(u32::from_ne_bytes)
}

fn rd_u64(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at.checked_add(8)?)?
        .try_into()
        .ok()
        .map(u64::from_ne_bytes)
}

/// Decodes one ring-buffer record (host-endian, mltcp_agent.h); `None` for a record of unknown
/// kind or the wrong length for its kind.
pub fn decode_record(b: &[u8]) -> Option<Record> {
    let kind = rd_u32(b, 0)?;
    let sid = rd_u32(b, 4)?;
    match kind {
        REC_CREATE if b.len() == CREATE_REC_LEN => {
            let mut c = wire::Create {
                sid,
                init_cwnd: rd_u32(b, 8)?,
                mss: rd_u32(b, 12)?,
                src_ip: rd_u32(b, 16)?,
                dst_ip: rd_u32(b, 20)?,
                src_port: rd_u32(b, 24)?,
                dst_port: rd_u32(b, 28)?,
                alg: [0; wire::ALG_NAME_LEN],
            };
            let alg = usize::try_from(rd_u32(b, 36)?).ok()?;
            c.set_alg_name(REC_ALGS.get(alg)?).ok()?;
            Some(Record::Create(c))
        }
        REC_MEASURE if b.len() == MEASURE_REC_LEN => {
            let mut fields = [0u64; REPORT_FIELDS];
            for (i, f) in fields.iter_mut().enumerate() {
                *f = rd_u64(b, 8 + 8 * i)?;
            }
            Some(Record::Measure { sid, fields })
        }
        REC_CLOSE if b.len() == CLOSE_REC_LEN => Some(Record::Close { sid }),
        _ => None,
    }
}

/// The agent's controls of one flow (`struct mltcp_agent_ctl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ctl {
    /// `Rate`, bytes/s.
    pub rate: u64,
    /// `Cwnd`, bytes.
    pub cwnd: u64,
    /// `Control.slot_us`, µs.
    pub slot_us: u64,
    /// `Control.cwnd_cap`, bytes.
    pub cwnd_cap: u64,
    /// `Control.scavenge_us`, µs.
    pub scavenge_us: u64,
    /// Changes when the agent sets `Rate`.
    pub rate_gen: u32,
    /// Changes when the agent sets `Cwnd`.
    pub cwnd_gen: u32,
    /// DSCP 0..=63, or [`NO_CLASS`].
    pub dscp: u32,
}

impl Ctl {
    /// The map value's bytes (host-endian, mltcp_agent.h's layout).
    pub fn to_bytes(&self) -> [u8; CTL_LEN] {
        let mut b = [0u8; CTL_LEN];
        let words64 = [
            self.rate,
            self.cwnd,
            self.slot_us,
            self.cwnd_cap,
            self.scavenge_us,
        ];
        for (c, v) in b.chunks_exact_mut(8).zip(words64) {
            c.copy_from_slice(&v.to_ne_bytes());
        }
        let words32 = [self.rate_gen, self.cwnd_gen, self.dscp, 0];
        if let Some(tail) = b.get_mut(40..) {
            for (c, v) in tail.chunks_exact_mut(4).zip(words32) {
                c.copy_from_slice(&v.to_ne_bytes());
            }
        }
        b
    }
}

/// What the slot program looks like on the wire, from compiling the shipped text with portus.
#[derive(Clone, Debug)]
pub struct SlotProgram {
    events: Vec<EventMsg>,
    instrs: Vec<InstrMsg>,
    /// (type, index) of Control.slot_us, Control.cwnd_cap, Control.scavenge_us.
    slot_us: (u8, u32),
    cwnd_cap: (u8, u32),
    scavenge_us: (u8, u32),
    /// The Control registers' defaults (the program's DEFs).
    defaults: Ctl,
}

/// The (type, index) portus serialises for `name` of scope `sc`.
fn reg_of(sc: &portus::lang::Scope, name: &str) -> std::result::Result<(u8, u32), String> {
    let reg = sc
        .get(name)
        .ok_or_else(|| format!("the slot program has no {name}"))?
        .clone();
    let msg = portus::serialize::update_field::Msg {
        sid: 0,
        num_fields: 1,
        fields: vec![(reg, 0)],
    };
    let bytes = portus::serialize::serialize(&msg).map_err(|e| e.0)?;
    match wire::parse(&bytes) {
        Ok((Msg::UpdateFields(u), _)) => u
            .updates
            .iter()
            .next()
            .map(|f| (f.reg_type, f.reg_index))
            .ok_or_else(|| format!("no update for {name}")),
        other => Err(format!("{name}: {other:?}")),
    }
}

fn is_control(typ: u8) -> bool {
    typ == REG_CONTROL || typ == REG_CONTROL_VOLATILE
}

/// Number of Report registers an INSTALL defines (its DEFs of report registers, types 5 and 6).
fn report_fields(instrs: &[InstrMsg]) -> usize {
    instrs
        .iter()
        .filter(|i| {
            i.op == OP_DEF
                && (i.left.typ == RegKind::VolatileReport as u8
                    || i.left.typ == RegKind::NonvolatileReport as u8)
        })
        .count()
}

impl SlotProgram {
    /// Compiles the shipped slot program with portus and reads its layout.
    ///
    /// Errors: portus cannot compile it, or it lacks a register the BPF datapath serves.
    pub fn compile() -> std::result::Result<Self, String> {
        let (bin, sc) = portus::lang::compile(slot_program_source().as_bytes(), &[])
            .map_err(|e| format!("compiling the slot program: {e:?}"))?;
        let install = portus::serialize::serialize(&portus::serialize::install::Msg {
            sid: 0,
            program_uid: sc.program_uid,
            num_events: bin.events.len() as u32,
            num_instrs: bin.instrs.len() as u32,
            instrs: bin,
        })
        .map_err(|e| e.0)?;
        let Ok((Msg::Install(i), _)) = wire::parse(&install) else {
            return Err(String::from("the slot program's INSTALL does not parse"));
        };
        let events: Vec<EventMsg> = i.events().collect();
        let instrs: Vec<InstrMsg> = i.instrs().collect();
        if report_fields(&instrs) != REPORT_FIELDS {
            return Err(format!(
                "the slot program has {} report fields, the BPF datapath {REPORT_FIELDS}",
                report_fields(&instrs)
            ));
        }
        let slot_us = reg_of(&sc, "Control.slot_us")?;
        let cwnd_cap = reg_of(&sc, "Control.cwnd_cap")?;
        let scavenge_us = reg_of(&sc, "Control.scavenge_us")?;
        let default_of = |r: (u8, u32)| {
            instrs
                .iter()
                .filter(|i| i.op == OP_DEF && is_control(i.left.typ) && i.left.val == r.1)
                .find_map(|i| Instr::from_msg(i).ok().map(|d| d.def_value()))
                .unwrap_or(0)
        };
        let defaults = Ctl {
            rate: 0,
            cwnd: 0,
            slot_us: default_of(slot_us),
            cwnd_cap: default_of(cwnd_cap),
            scavenge_us: default_of(scavenge_us),
            rate_gen: 0,
            cwnd_gen: 0,
            dscp: NO_CLASS,
        };
        Ok(SlotProgram {
            events,
            instrs,
            slot_us,
            cwnd_cap,
            scavenge_us,
            defaults,
        })
    }

    /// Accepts an INSTALL only of this program (the same events and instructions).
    fn check(&self, i: &wire::Install<'_>) -> std::result::Result<(), Refusal> {
        let events: Vec<EventMsg> = i.events().collect();
        let instrs: Vec<InstrMsg> = i.instrs().collect();
        if events == self.events && instrs == self.instrs {
            return Ok(());
        }
        Err(Refusal::NotSlotProgram {
            uid: i.program_uid,
            report_fields: report_fields(&instrs),
            instrs: instrs.len(),
            slot_instrs: self.instrs.len(),
        })
    }

    /// Applies one register update to `c`.
    fn apply(&self, c: &mut Ctl, u: UpdateField) -> std::result::Result<(), Refusal> {
        let r = (u.reg_type, u.reg_index);
        let control = |want: (u8, u32)| is_control(r.0) && is_control(want.0) && r.1 == want.1;
        if r == (REG_IMPLICIT, IMPLICIT_RATE) {
            c.rate = u.value;
            c.rate_gen = c.rate_gen.wrapping_add(1);
        } else if r == (REG_IMPLICIT, IMPLICIT_CWND) {
            c.cwnd = u.value;
            c.cwnd_gen = c.cwnd_gen.wrapping_add(1);
        } else if control(self.slot_us) {
            c.slot_us = u.value;
        } else if control(self.cwnd_cap) {
            c.cwnd_cap = u.value;
        } else if control(self.scavenge_us) {
            c.scavenge_us = u.value;
        } else {
            return Err(Refusal::BadRegister {
                typ: u.reg_type,
                index: u.reg_index,
            });
        }
        Ok(())
    }
}

/// What to do to `mltcp_ctl` after a message of the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapOp {
    /// Write flow `sid`'s entry.
    Write(u32, Ctl),
}

/// One flow as the backend knows it.
#[derive(Clone, Copy, Debug)]
struct FlowCtl {
    ctl: Ctl,
    /// The agent switched it to the slot program (its entry is in the map).
    installed: bool,
}

/// The translation between the BPF records and maps and the CCP wire format, without I/O.
#[derive(Debug)]
pub struct Translator {
    prog: SlotProgram,
    /// The uid under which the agent installed the slot program.
    uid: Option<u32>,
    flows: HashMap<u32, FlowCtl>,
}

impl Translator {
    /// A translator for the shipped slot program ([`SlotProgram::compile`]).
    pub fn new(prog: SlotProgram) -> Self {
        Translator {
            prog,
            uid: None,
            flows: HashMap::new(),
        }
    }

    /// Writes the CCP message of ring-buffer record `rec` into `out`; returns its length, or
    /// `None` for a record that does not decode or does not fit `out`. CREATE starts tracking
    /// the flow, CLOSE ends it (the BPF side deletes its map entry itself).
    pub fn from_datapath(&mut self, rec: &[u8], out: &mut [u8]) -> Option<usize> {
        match decode_record(rec)? {
            Record::Create(c) => {
                self.flows.insert(
                    c.sid,
                    FlowCtl {
                        ctl: self.prog.defaults,
                        installed: false,
                    },
                );
                c.write(out).ok()
            }
            Record::Measure { sid, fields } => {
                let uid = self.uid.unwrap_or(0);
                wire::write_measure(out, sid, uid, &fields).ok()
            }
            Record::Close { sid } => {
                self.flows.remove(&sid);
                wire::write_measure(out, sid, 0, &[]).ok()
            }
        }
    }

    /// Applies one message of the agent (`msg`, parsed with the wire parser); returns the map
    /// write it needs, if any.
    ///
    /// Errors: a [`Refusal`]; nothing changes then.
    pub fn from_agent(&mut self, msg: &[u8]) -> std::result::Result<Option<MapOp>, Refusal> {
        let (m, _) = wire::parse(msg).map_err(Refusal::Wire)?;
        match m {
            Msg::Install(i) => {
                self.prog.check(&i)?;
                self.uid = Some(i.program_uid);
                Ok(None)
            }
            Msg::ChangeProg(c) => {
                if self.uid != Some(c.program_uid) {
                    return Err(Refusal::UnknownProgram(c.program_uid));
                }
                let f = self.flows.get(&c.sid).ok_or(Refusal::UnknownFlow(c.sid))?;
                // A program switch: the Control registers back to their defaults, then the
                // switch's updates (CCP's CHANGE_PROG); the class stays.
                let mut ctl = self.prog.defaults;
                ctl.dscp = f.ctl.dscp;
                ctl.rate_gen = f.ctl.rate_gen;
                ctl.cwnd_gen = f.ctl.cwnd_gen;
                for u in c.updates.iter() {
                    self.prog.apply(&mut ctl, u)?;
                }
                self.flows.insert(
                    c.sid,
                    FlowCtl {
                        ctl,
                        installed: true,
                    },
                );
                Ok(Some(MapOp::Write(c.sid, ctl)))
            }
            Msg::UpdateFields(u) => {
                let f = self
                    .flows
                    .get(&u.sid)
                    .copied()
                    .ok_or(Refusal::UnknownFlow(u.sid))?;
                let mut ctl = f.ctl;
                for x in u.updates.iter() {
                    self.prog.apply(&mut ctl, x)?;
                }
                self.flows.insert(u.sid, FlowCtl { ctl, ..f });
                Ok(f.installed.then_some(MapOp::Write(u.sid, ctl)))
            }
            Msg::SetClass(s) => {
                let f = self
                    .flows
                    .get(&s.sid)
                    .copied()
                    .ok_or(Refusal::UnknownFlow(s.sid))?;
                let mut ctl = f.ctl;
                ctl.dscp = s.dscp.map_or(NO_CLASS, u32::from);
                self.flows.insert(s.sid, FlowCtl { ctl, ..f });
                Ok(f.installed.then_some(MapOp::Write(s.sid, ctl)))
            }
            Msg::Create(_) | Msg::Measure(_) | Msg::Ready { .. } => {
                Err(Refusal::Unexpected(m.typ()))
            }
        }
    }
}

/// The maps of the loaded BPF agent datapath.
struct Maps {
    events: MapHandle,
    attach: MapHandle,
    ctl: MapHandle,
}

/// Finds the maps by type and name; of several with one name (an unloaded registration's
/// linger until the kernel frees them), the newest (highest id).
fn find_maps() -> Result<Maps> {
    let (mut events, mut attach, mut ctl) = (None, None, None);
    for info in MapInfoIter::default() {
        let slot = match (info.ty, info.name.to_string_lossy().as_ref()) {
            (MapType::RingBuf, EVENTS_MAP) => &mut events,
            (MapType::Array, ATTACH_MAP) => &mut attach,
            (MapType::Hash, CTL_MAP) => &mut ctl,
            _ => continue,
        };
        if slot.is_none_or(|id| id < info.id) {
            *slot = Some(info.id);
        }
    }
    let open = |id: Option<u32>, name: &str| -> Result<Option<MapHandle>> {
        id.map(|id| {
            MapHandle::from_map_id(id)
                .map_err(|e| Error(format!("opening BPF map {name} (id {id}): {e}")))
        })
        .transpose()
    };
    let (events, attach, ctl) = (
        open(events, EVENTS_MAP)?,
        open(attach, ATTACH_MAP)?,
        open(ctl, CTL_MAP)?,
    );
    match (events, attach, ctl) {
        (Some(events), Some(attach), Some(ctl)) => Ok(Maps {
            events,
            attach,
            ctl,
        }),
        _ => Err(Error(format!(
            "the BPF agent datapath's maps ({EVENTS_MAP}, {ATTACH_MAP}, {CTL_MAP}) are not loaded: \
             run `mltcp-bpf load` (a version with the agent datapath) as root, and run the agent \
             as root (listing BPF maps needs CAP_SYS_ADMIN)"
        ))),
    }
}

/// CLOCK_MONOTONIC in ns (the clock of the BPF side's `bpf_ktime_get_ns`).
fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| {
            u64::try_from(t.tv_sec())
                .unwrap_or(0)
                .saturating_mul(1_000_000_000)
                .saturating_add(u64::try_from(t.tv_nsec()).unwrap_or(0))
        })
        .unwrap_or(0)
}

/// Writes the attach entry: a heartbeat now, or 0 (detached).
fn write_attach(map: &MapHandle, attached: bool) -> std::result::Result<(), libbpf_rs::Error> {
    let mut v = [0u8; ATTACH_LEN];
    let beat = if attached { monotonic_ns() } else { 0 };
    let timeout = u64::try_from(HEARTBEAT_TIMEOUT.as_nanos()).unwrap_or(u64::MAX);
    v[..8].copy_from_slice(&beat.to_ne_bytes());
    v[8..].copy_from_slice(&timeout.to_ne_bytes());
    map.update(&0u32.to_ne_bytes(), &v, MapFlags::ANY)
}

/// What [`BpfIpc`] and its [`BpfClassSender`]s share.
struct Control {
    tr: Translator,
    ctl: MapHandle,
}

/// Counters of the backend (read by the agent's status, logged when they grow).
#[derive(Debug, Default)]
pub struct BpfCounters {
    /// Agent messages refused ([`Refusal`]).
    pub refused: AtomicU64,
    /// Ring-buffer records that did not decode.
    pub bad_records: AtomicU64,
}

fn apply(ctl: &Mutex<Control>, counters: &BpfCounters, msg: &[u8]) -> Result<()> {
    let mut c = ctl.lock().unwrap_or_else(|p| p.into_inner());
    match c.tr.from_agent(msg) {
        Ok(Some(MapOp::Write(sid, v))) => c
            .ctl
            .update(&sid.to_ne_bytes(), &v.to_bytes(), MapFlags::ANY)
            .map_err(|e| Error(format!("writing {CTL_MAP}[{sid}]: {e}"))),
        Ok(None) => Ok(()),
        Err(e) => {
            let n = counters.refused.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::warn!(error = %e, refused = n, "BPF datapath refused an agent message");
            Err(Error(e.to_string()))
        }
    }
}

/// The `bpf` IPC backend ([module docs](self)).
pub struct BpfIpc {
    control: Arc<Mutex<Control>>,
    counters: Arc<BpfCounters>,
    ring: RingBuffer<'static>,
    queue: Arc<Mutex<VecDeque<Vec<u8>>>>,
    attach: Arc<MapHandle>,
    running: Arc<AtomicBool>,
    heartbeat: Option<std::thread::JoinHandle<()>>,
    _events: MapHandle,
}

impl BpfIpc {
    /// Finds the BPF agent datapath's maps, attaches (heartbeat thread) and opens the ring
    /// buffer. Errors: the maps are not loaded or cannot be opened (not root), the slot program
    /// does not compile, the ring buffer cannot be mapped.
    pub fn new() -> Result<Self> {
        let prog = SlotProgram::compile().map_err(Error)?;
        let maps = find_maps()?;
        let queue: Arc<Mutex<VecDeque<Vec<u8>>>> = Arc::default();
        let q = queue.clone();
        let mut b = RingBufferBuilder::new();
        b.add(&maps.events, move |rec: &[u8]| {
            q.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push_back(rec.to_vec());
            0
        })
        .map_err(|e| Error(format!("ring buffer {EVENTS_MAP}: {e}")))?;
        let ring = b
            .build()
            .map_err(|e| Error(format!("ring buffer {EVENTS_MAP}: {e}")))?;
        // Entries a previous agent left (killed before it could clear them) would otherwise
        // steer its flows again once this agent's heartbeat is fresh: they go first.
        let stale: Vec<Vec<u8>> = maps.ctl.keys().collect();
        for k in &stale {
            maps.ctl
                .delete(k)
                .map_err(|e| Error(format!("clearing {CTL_MAP}: {e}")))?;
        }
        if !stale.is_empty() {
            tracing::info!(
                entries = stale.len(),
                "cleared a previous agent's controls: its flows stay on BPF mltcp"
            );
        }
        let attach = Arc::new(maps.attach);
        write_attach(&attach, true).map_err(|e| Error(format!("attaching ({ATTACH_MAP}): {e}")))?;
        let running = Arc::new(AtomicBool::new(true));
        let (a, r) = (attach.clone(), running.clone());
        let heartbeat = std::thread::Builder::new()
            .name(String::from("ccp-bpf-heartbeat"))
            .spawn(move || {
                while r.load(Ordering::Acquire) {
                    if let Err(e) = write_attach(&a, true) {
                        tracing::warn!(error = %e, "BPF datapath heartbeat failed");
                    }
                    std::thread::sleep(HEARTBEAT_PERIOD);
                }
            })
            .map_err(|e| Error(format!("starting the heartbeat thread: {e}")))?;
        tracing::info!(
            timeout_ms = HEARTBEAT_TIMEOUT.as_millis() as u64,
            "attached to the BPF agent datapath"
        );
        Ok(BpfIpc {
            control: Arc::new(Mutex::new(Control {
                tr: Translator::new(prog),
                ctl: maps.ctl,
            })),
            counters: Arc::default(),
            ring,
            queue,
            attach,
            running,
            heartbeat: Some(heartbeat),
            _events: maps.events,
        })
    }

    /// A sender of SET_CLASS into this datapath (for the agent's traffic classes).
    pub fn class_sender(&self) -> BpfClassSender {
        BpfClassSender {
            control: self.control.clone(),
            counters: self.counters.clone(),
        }
    }

    /// The backend's counters.
    pub fn counters(&self) -> Arc<BpfCounters> {
        self.counters.clone()
    }

    fn detach(&mut self) {
        self.running.store(false, Ordering::Release);
        if let Some(h) = self.heartbeat.take() {
            let _ = h.join();
            if let Err(e) = write_attach(&self.attach, false) {
                tracing::warn!(error = %e, "detaching from the BPF datapath failed (flows fall back when the heartbeat expires)");
            }
        }
    }

    fn pop(&self, buf: &mut [u8]) -> Option<usize> {
        loop {
            let rec = self
                .queue
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front()?;
            let mut c = self.control.lock().unwrap_or_else(|p| p.into_inner());
            match c.tr.from_datapath(&rec, buf) {
                Some(n) => return Some(n),
                None => {
                    let n = self.counters.bad_records.fetch_add(1, Ordering::Relaxed) + 1;
                    tracing::warn!(
                        len = rec.len(),
                        total = n,
                        "dropped a BPF datapath record that does not decode"
                    );
                }
            }
        }
    }
}

impl AsFd for BpfIpc {
    /// The ring buffer's epoll descriptor: readable when records wait.
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: `epoll_fd` is the descriptor libbpf's ring buffer owns; it stays open as long
        // as `self.ring`, which the returned borrow cannot outlive.
        unsafe { BorrowedFd::borrow_raw(self.ring.epoll_fd()) }
    }
}

impl Ipc for BpfIpc {
    type Addr = ();

    fn name() -> String {
        String::from("bpf")
    }

    fn send(&self, msg: &[u8], _to: &()) -> Result<()> {
        apply(&self.control, &self.counters, msg)
    }

    fn recv(&self, buf: &mut [u8]) -> Result<(usize, ())> {
        if let Some(n) = self.pop(buf) {
            return Ok((n, ()));
        }
        self.ring
            .poll(Duration::from_secs(1))
            .map_err(|e| Error(format!("ring buffer poll: {e}")))?;
        match self.pop(buf) {
            Some(n) => Ok((n, ())),
            None => Err(Error(String::from("timeout"))),
        }
    }

    fn close(&mut self) -> Result<()> {
        self.detach();
        Ok(())
    }
}

impl Drop for BpfIpc {
    fn drop(&mut self) {
        self.detach();
    }
}

/// Sends the agent's traffic classes (SET_CLASS, parsed by the same wire parser) into the BPF
/// datapath's control map; see [`BpfIpc::class_sender`].
#[derive(Clone)]
pub struct BpfClassSender {
    control: Arc<Mutex<Control>>,
    counters: Arc<BpfCounters>,
}

impl crate::ClassSender for BpfClassSender {
    fn set_class(&self, sid: u32, dscp: Option<u8>) -> std::io::Result<()> {
        let msg = crate::set_class_msg(sid, dscp).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("SET_CLASS: {e}"))
        })?;
        apply(&self.control, &self.counters, &msg).map_err(|e| std::io::Error::other(e.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use portus::lang::Scope;

    fn prog() -> SlotProgram {
        SlotProgram::compile().expect("the shipped slot program compiles")
    }

    fn install_of(src: &str) -> (Vec<u8>, Scope) {
        let (bin, sc) = portus::lang::compile(src.as_bytes(), &[]).expect("compiles");
        let msg = portus::serialize::install::Msg {
            sid: 0,
            program_uid: sc.program_uid,
            num_events: bin.events.len() as u32,
            num_instrs: bin.instrs.len() as u32,
            instrs: bin,
        };
        (portus::serialize::serialize(&msg).expect("serialises"), sc)
    }

    fn shipped() -> String {
        ccp_datapath::program_lines(SLOT_PROGRAM)
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn create_rec(sid: u32) -> Vec<u8> {
        create_rec_of(sid, 0)
    }

    fn create_rec_of(sid: u32, alg: u32) -> Vec<u8> {
        let mut r = Vec::new();
        for v in [
            REC_CREATE,
            sid,
            14_480,
            1448,
            0x0100_000a,
            0x0200_000a,
            0x1027,
            0x5000,
            2,
            alg,
        ] {
            r.extend_from_slice(&v.to_ne_bytes());
        }
        r
    }

    #[test]
    fn layouts_are_mltcp_agent_h() {
        assert_eq!(CREATE_REC_LEN, 40);
        assert_eq!(MEASURE_REC_LEN, 120);
        assert_eq!(CLOSE_REC_LEN, 8);
        assert_eq!(CTL_LEN, 56);
        assert_eq!(ATTACH_LEN, 16);
        let c = Ctl {
            rate: 1,
            cwnd: 2,
            slot_us: 3,
            cwnd_cap: 4,
            scavenge_us: 5,
            rate_gen: 6,
            cwnd_gen: 7,
            dscp: 8,
        };
        let b = c.to_bytes();
        assert_eq!(rd_u64(&b, 32), Some(5));
        assert_eq!(rd_u32(&b, 40), Some(6));
        assert_eq!(rd_u32(&b, 48), Some(8));
    }

    #[test]
    fn the_shipped_program_is_read_with_its_defaults() {
        let p = prog();
        assert_eq!(p.defaults.slot_us, 60_000);
        assert_eq!(p.defaults.cwnd_cap, 16_777_216);
        assert_eq!(p.defaults.scavenge_us, 0);
        assert_eq!(p.defaults.dscp, NO_CLASS);
    }

    #[test]
    fn records_become_ccp_messages() {
        let mut t = Translator::new(prog());
        let mut out = [0u8; 256];
        let n = t.from_datapath(&create_rec(0x105), &mut out).unwrap();
        let (m, used) = wire::parse(&out[..n]).unwrap();
        assert_eq!(used, n);
        let Msg::Create(c) = m else { panic!("{m:?}") };
        assert_eq!(
            (c.sid, c.init_cwnd, c.mss, c.src_port, c.dst_port),
            (0x105, 14_480, 1448, 0x1027, 0x5000)
        );
        assert_eq!(c.alg_name(), b"mltcp");
        assert!(crate::portus_safe(&out[..n]));
        // An mltcp_cubic flow is announced by its name; an unknown algorithm does not decode.
        let mut t2 = Translator::new(prog());
        let n2 = t2
            .from_datapath(&create_rec_of(0x205, 1), &mut out)
            .unwrap();
        let (m2, _) = wire::parse(&out[..n2]).unwrap();
        let Msg::Create(c2) = m2 else {
            panic!("{m2:?}")
        };
        assert_eq!((c2.sid, c2.alg_name()), (0x205, &b"mltcp_cubic"[..]));
        assert!(t2
            .from_datapath(&create_rec_of(0x305, 2), &mut out)
            .is_none());
        assert_eq!(t2.flows.len(), 1);

        // A report before any INSTALL carries uid 0 (portus ignores it); after, the uid.
        let (install, _) = install_of(&shipped());
        t.from_agent(&install).unwrap();
        let mut rec = Vec::new();
        rec.extend_from_slice(&REC_MEASURE.to_ne_bytes());
        rec.extend_from_slice(&0x105u32.to_ne_bytes());
        for i in 0..REPORT_FIELDS as u64 {
            rec.extend_from_slice(&(1000 + i).to_ne_bytes());
        }
        let n = t.from_datapath(&rec, &mut out).unwrap();
        let (m, _) = wire::parse(&out[..n]).unwrap();
        let Msg::Measure(me) = m else { panic!("{m:?}") };
        assert_eq!(me.sid, 0x105);
        assert_eq!(me.program_uid, t.uid.unwrap());
        assert_eq!(
            me.fields.iter().collect::<Vec<_>>(),
            (1000..1000 + REPORT_FIELDS as u64).collect::<Vec<_>>()
        );
        assert!(crate::portus_safe(&out[..n]));

        let mut close = REC_CLOSE.to_ne_bytes().to_vec();
        close.extend_from_slice(&0x105u32.to_ne_bytes());
        let n = t.from_datapath(&close, &mut out).unwrap();
        let (m, _) = wire::parse(&out[..n]).unwrap();
        let Msg::Measure(me) = m else { panic!("{m:?}") };
        assert_eq!((me.sid, me.program_uid, me.fields.len()), (0x105, 0, 0));
        assert!(t.flows.is_empty());

        // Bad records: unknown kind, wrong length, truncated.
        assert_eq!(t.from_datapath(&[9, 0, 0, 0, 1, 0, 0, 0], &mut out), None);
        assert_eq!(t.from_datapath(&create_rec(1)[..39], &mut out), None);
        assert_eq!(t.from_datapath(&rec[..100], &mut out), None);
        assert_eq!(t.from_datapath(&[], &mut out), None);
        assert_eq!(t.from_datapath(&create_rec(1), &mut [0u8; 10]), None);
    }

    #[test]
    fn controls_follow_change_prog_update_fields_and_set_class() {
        let mut t = Translator::new(prog());
        let mut out = [0u8; 256];
        t.from_datapath(&create_rec(7), &mut out).unwrap();
        let (install, sc) = install_of(&shipped());
        assert_eq!(t.from_agent(&install), Ok(None));
        let reg = |n: &str| sc.get(n).unwrap().clone();
        // Before the program: updates and classes are kept, not written.
        let class = crate::set_class_msg(7, Some(26)).unwrap();
        assert_eq!(t.from_agent(&class), Ok(None));
        let change = portus::serialize::serialize(&portus::serialize::changeprog::Msg {
            sid: 7,
            program_uid: sc.program_uid,
            num_fields: 4,
            fields: vec![
                (reg("Cwnd"), 100_000),
                (reg("Control.cwnd_cap"), 100_000),
                (reg("Rate"), 12_500_000),
                (reg("Control.slot_us"), 50_000),
            ],
        })
        .unwrap();
        let Ok(Some(MapOp::Write(7, c))) = t.from_agent(&change) else {
            panic!("CHANGE_PROG writes the entry")
        };
        assert_eq!(
            (c.cwnd, c.cwnd_cap, c.rate, c.slot_us, c.scavenge_us, c.dscp),
            (100_000, 100_000, 12_500_000, 50_000, 0, 26)
        );
        let (rg, cg) = (c.rate_gen, c.cwnd_gen);
        let upd = portus::serialize::serialize(&portus::serialize::update_field::Msg {
            sid: 7,
            num_fields: 3,
            fields: vec![
                (reg("Rate"), 1_000_000),
                (reg("Control.cwnd_cap"), 30_000),
                (reg("Control.scavenge_us"), 1_000),
            ],
        })
        .unwrap();
        let Ok(Some(MapOp::Write(7, c))) = t.from_agent(&upd) else {
            panic!("UPDATE_FIELDS writes the entry")
        };
        assert_eq!(
            (c.rate, c.cwnd_cap, c.scavenge_us),
            (1_000_000, 30_000, 1_000)
        );
        assert_eq!(
            (c.rate_gen, c.cwnd_gen),
            (rg.wrapping_add(1), cg),
            "Cwnd not set again"
        );
        let release = crate::set_class_msg(7, None).unwrap();
        let Ok(Some(MapOp::Write(7, c))) = t.from_agent(&release) else {
            panic!("SET_CLASS writes the entry")
        };
        assert_eq!(c.dscp, NO_CLASS);

        // Unknown flow, unknown program, a register the program does not let the agent set.
        let upd8 = portus::serialize::serialize(&portus::serialize::update_field::Msg {
            sid: 8,
            num_fields: 1,
            fields: vec![(reg("Rate"), 1)],
        })
        .unwrap();
        assert_eq!(t.from_agent(&upd8), Err(Refusal::UnknownFlow(8)));
        let mut other_uid = change.clone();
        other_uid[8..12].copy_from_slice(&99u32.to_le_bytes());
        assert_eq!(t.from_agent(&other_uid), Err(Refusal::UnknownProgram(99)));
        let mut bad = [0u8; 64];
        let n = wire::write_update_fields(
            &mut bad,
            7,
            &[UpdateField {
                reg_type: REG_CONTROL,
                reg_index: 15,
                value: 1,
            }],
        )
        .unwrap();
        assert_eq!(
            t.from_agent(&bad[..n]),
            Err(Refusal::BadRegister { typ: 0, index: 15 })
        );
        // Garbage and datapath-to-agent messages are refused, never a panic.
        assert!(matches!(t.from_agent(&[1, 2, 3]), Err(Refusal::Wire(_))));
        let mut ready = [0u8; wire::READY_LEN];
        wire::write_ready(&mut ready, 1).unwrap();
        assert_eq!(t.from_agent(&ready), Err(Refusal::Unexpected(wire::READY)));
    }

    #[test]
    fn another_program_is_refused_with_an_error_naming_it() {
        let mut t = Translator::new(prog());
        // A program with another report layout.
        let other = "(def (Report.acked 0) (Control.cwnd_cap 100))\n\
                     (when true (:= Report.acked (+ Report.acked Ack.bytes_acked)) (fallthrough))\n\
                     (when (> Micros 10000) (report) (:= Micros 0))";
        let (install, sc) = install_of(other);
        let e = t.from_agent(&install).unwrap_err();
        assert_eq!(
            e,
            Refusal::NotSlotProgram {
                uid: sc.program_uid,
                report_fields: 1,
                instrs: match &e {
                    Refusal::NotSlotProgram { instrs, .. } => *instrs,
                    _ => 0,
                },
                slot_instrs: t.prog.instrs.len(),
            }
        );
        let text = e.to_string();
        assert!(
            text.contains(&format!("program uid {}", sc.program_uid)),
            "{text}"
        );
        assert!(text.contains("1 report fields"), "{text}");
        assert!(text.contains("mlcc-slot.ccp"), "{text}");
        // The slot program with one rule changed (the same layout, another rule) is refused too.
        let changed = shipped().replace("(max (/ Cwnd 2) 5792)", "(max (/ Cwnd 3) 5792)");
        assert_ne!(changed, shipped());
        let (install, _) = install_of(&changed);
        assert!(matches!(
            t.from_agent(&install),
            Err(Refusal::NotSlotProgram {
                report_fields: REPORT_FIELDS,
                ..
            })
        ));
        // Nothing was installed: CHANGE_PROG to either uid is refused.
        assert_eq!(t.uid, None);
        // The shipped program itself is accepted.
        let (install, sc) = install_of(&shipped());
        assert_eq!(t.from_agent(&install), Ok(None));
        assert_eq!(t.uid, Some(sc.program_uid));
    }
}
