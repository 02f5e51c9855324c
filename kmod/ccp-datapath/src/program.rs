//! Datapath programs: decoded instructions and events, install-time validation, the storage
//! trait through which the host keeps installed programs, and the fixed-capacity program table
//! shared by all flows.
//!
//! Semantics follow libccp (`machine.c` read_instruction/read_expression, `ccp.c`
//! datapath_program_install/datapath_program_lookup_uid, `ccp_priv.h` opcodes and register
//! types); programs come from portus `lang::compile`. Unlike libccp, everything an instruction or
//! event refers to is checked once at install time, so execution never needs to.

use super::compiled::{Compiled, ExecMode};
use super::error::Error;
use super::wire::{Install, InstrMsg, RegMsg};
use super::{
    CONTROL_REGS, IMPLICIT_REGS, LOCAL_REGS, MAX_EVENTS, MAX_INSTRS, NUM_PRIMITIVES, REPORT_REGS,
    TMP_REGS,
};
use core::fmt;
use core::ops::Deref;

/// The lines of a datapath program file without its comment lines (first non-blank character
/// `#`). The project's program files (`datapath-programs/*.ccp`) carry comments, but portus 0.9's
/// `lang::compile` accepts a comment only before an event, so a program is compiled from these
/// lines. Used by ccp-agent to load a program and by the tests that run the shipped one.
pub fn program_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter(|l| !l.trim_start().starts_with('#'))
}

/// The report fields and control registers ccp-agent reads or sets in its slot program
/// (`datapath-programs/mlcc-slot.ccp`): every report's acknowledged bytes, losses, RTT, rate
/// and time, and the slot length, window ceiling and scavenger target it installs
/// (`Report.now` is used when present, so it is not required).
pub const SLOT_PROGRAM_FIELDS: [&str; 8] = [
    "Report.acked",
    "Report.lost",
    "Report.rtt",
    "Report.rate",
    "Report.micros",
    "Control.slot_us",
    "Control.cwnd_cap",
    "Control.scavenge_us",
];

/// A program that does not name a field its user reads or sets ([`check_slot_program`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissingField {
    /// The first field of [`SLOT_PROGRAM_FIELDS`] the program lacks.
    pub field: &'static str,
}

impl fmt::Display for MissingField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the program lacks ")?;
        f.write_str(self.field)?;
        f.write_str(", which the agent reads or sets")
    }
}

impl core::error::Error for MissingField {}

/// Checks that a slot program's text (as compiled: [`program_lines`]) names every field of
/// [`SLOT_PROGRAM_FIELDS`]. Errors: [`MissingField`], naming the first one it lacks. Whether
/// the text compiles is portus's check (`lang::compile`), not this one.
pub fn check_slot_program(text: &str) -> Result<(), MissingField> {
    match SLOT_PROGRAM_FIELDS.iter().find(|f| !text.contains(**f)) {
        Some(field) => Err(MissingField { field }),
        None => Ok(()),
    }
}

/// Instruction opcodes (libccp `ccp_priv.h`, portus `lang::serialize::serialize_op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Op {
    /// `ret = left + right`; error on overflow.
    #[default]
    Add = 0,
    /// `ret = right`.
    Bind = 1,
    /// Declares a Report/Control register and its default (`right`); a no-op when executed.
    Def = 2,
    /// `ret = left / right`; error on division by zero.
    Div = 3,
    /// `ret = (left == right)`.
    Equiv = 4,
    /// `ret = (left * ret + (10 - left) * right) / 10`, or `right` when `ret` is 0 (libccp
    /// `myewma64`, weight in tenths, wrapping arithmetic).
    Ewma = 5,
    /// `ret = (left > right)`.
    Gt = 6,
    /// `if left != 0 { ret = right }`.
    If = 7,
    /// `ret = (left < right)`.
    Lt = 8,
    /// `ret = max(left, right)`.
    Max = 9,
    /// Maximum of two 32-bit sequence-like values under wraparound (libccp `mymax64_wrap`).
    MaxWrap = 10,
    /// `ret = min(left, right)`.
    Min = 11,
    /// `ret = left * right`; error on overflow as libccp detects it.
    Mul = 12,
    /// `if left == 0 { ret = right }`.
    NotIf = 13,
    /// `ret = left - right`; error on underflow.
    Sub = 14,
}

impl Op {
    /// Decodes an opcode byte. Errors: [`Error::BadOpcode`] for values >= 15.
    pub fn from_u8(v: u8) -> Result<Op, Error> {
        Ok(match v {
            0 => Op::Add,
            1 => Op::Bind,
            2 => Op::Def,
            3 => Op::Div,
            4 => Op::Equiv,
            5 => Op::Ewma,
            6 => Op::Gt,
            7 => Op::If,
            8 => Op::Lt,
            9 => Op::Max,
            10 => Op::MaxWrap,
            11 => Op::Min,
            12 => Op::Mul,
            13 => Op::NotIf,
            14 => Op::Sub,
            _ => return Err(Error::BadOpcode),
        })
    }
}

/// Register types (libccp `ccp_priv.h`, portus `lang::serialize` `impl IntoIterator for Reg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum RegKind {
    /// Control register kept across reports (type 0).
    #[default]
    NonvolatileControl = 0,
    /// Immediate: the operand's u32 is the value (type 1).
    Immediate = 1,
    /// Implicit register 0..=5: `__eventFlag, __shouldContinue, __shouldReport, Micros, Cwnd,
    /// Rate` (type 2).
    Implicit = 2,
    /// Local variable of the program (type 3).
    Local = 3,
    /// Measurement primitive 0..=14, read-only (type 4).
    Primitive = 4,
    /// Report register reset to its default after each report (type 5).
    VolatileReport = 5,
    /// Report register kept across reports (type 6).
    NonvolatileReport = 6,
    /// Temporary of expression evaluation (type 7).
    Tmp = 7,
    /// Control register reset to its default after each report (type 8).
    VolatileControl = 8,
}

impl RegKind {
    /// Decodes a register type byte. Errors: [`Error::BadRegType`] for values > 8.
    pub fn from_u8(v: u8) -> Result<RegKind, Error> {
        Ok(match v {
            0 => RegKind::NonvolatileControl,
            1 => RegKind::Immediate,
            2 => RegKind::Implicit,
            3 => RegKind::Local,
            4 => RegKind::Primitive,
            5 => RegKind::VolatileReport,
            6 => RegKind::NonvolatileReport,
            7 => RegKind::Tmp,
            8 => RegKind::VolatileControl,
            _ => return Err(Error::BadRegType),
        })
    }

    /// How many registers of this kind exist (the bound on the index); `None` for immediates.
    pub const fn size(self) -> Option<usize> {
        match self {
            RegKind::Immediate => None,
            RegKind::NonvolatileControl | RegKind::VolatileControl => Some(CONTROL_REGS),
            RegKind::Implicit => Some(IMPLICIT_REGS),
            RegKind::Local => Some(LOCAL_REGS),
            RegKind::Primitive => Some(NUM_PRIMITIVES),
            RegKind::VolatileReport | RegKind::NonvolatileReport => Some(REPORT_REGS),
            RegKind::Tmp => Some(TMP_REGS),
        }
    }

    /// True for the two Report kinds.
    pub const fn is_report(self) -> bool {
        matches!(self, RegKind::VolatileReport | RegKind::NonvolatileReport)
    }
}

/// Where each register kind lives in a flow's register file (one flat array of u64, see
/// [`super::Registers`]): install time resolves every operand to an index into it, so that an
/// ACK reads a register with one load instead of a `match` on its kind. Primitives are copied
/// into their part once per invocation; the last slot always holds 0 (immediates read it, see
/// [`Operand`]).
pub mod file {
    use super::super::{
        CONTROL_REGS, IMPLICIT_REGS, LOCAL_REGS, NUM_PRIMITIVES, REPORT_REGS, TMP_REGS,
    };

    /// First implicit register (`__eventFlag`; `Micros` is `IMPLICIT + 3`).
    pub const IMPLICIT: usize = 0;
    /// First Report register (volatile and non-volatile share the file, as in libccp).
    pub const REPORT: usize = IMPLICIT + IMPLICIT_REGS;
    /// First Control register (volatile and non-volatile share the file, as in libccp).
    pub const CONTROL: usize = REPORT + REPORT_REGS;
    /// First temporary.
    pub const TMP: usize = CONTROL + CONTROL_REGS;
    /// First local.
    pub const LOCAL: usize = TMP + TMP_REGS;
    /// First primitive (`Ack.bytes_acked`); primitive `i` is at `PRIMITIVE + i`.
    pub const PRIMITIVE: usize = LOCAL + LOCAL_REGS;
    /// The slot that is never written (0): what an immediate operand reads.
    pub const ZERO: usize = PRIMITIVE + NUM_PRIMITIVES;
    /// Registers in the file (78: 624 bytes per flow).
    pub const LEN: usize = ZERO + 1;
    const _: () = assert!(LEN <= u8::MAX as usize, "slots are u8");
}

/// A validated register operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Reg {
    /// The register file.
    pub kind: RegKind,
    /// Index into the register file (checked against [`RegKind::size`]), or the value of an
    /// immediate.
    pub val: u32,
}

impl Reg {
    /// Validates a serialised operand. Errors: [`Error::BadRegType`],
    /// [`Error::RegIndexOutOfRange`].
    pub fn from_msg(m: RegMsg) -> Result<Reg, Error> {
        let kind = RegKind::from_u8(m.typ)?;
        if let Some(n) = kind.size() {
            if m.val as usize >= n {
                return Err(Error::RegIndexOutOfRange);
            }
        }
        Ok(Reg { kind, val: m.val })
    }

    /// The register index as `usize` (the value for an immediate).
    pub fn index(self) -> usize {
        self.val as usize
    }

    /// This register's index in a flow's register file ([`file`]); [`file::ZERO`] for an
    /// immediate. The index is below [`file::LEN`] for a validated register.
    pub fn slot(self) -> usize {
        let base = match self.kind {
            RegKind::Immediate => return file::ZERO,
            RegKind::Implicit => file::IMPLICIT,
            RegKind::VolatileReport | RegKind::NonvolatileReport => file::REPORT,
            RegKind::VolatileControl | RegKind::NonvolatileControl => file::CONTROL,
            RegKind::Tmp => file::TMP,
            RegKind::Local => file::LOCAL,
            RegKind::Primitive => file::PRIMITIVE,
        };
        base.saturating_add(self.index())
    }

    /// The register's slot as an [`Operand`] reads it, with an immediate's value as its addend.
    fn operand(self) -> Operand {
        let imm = if self.kind == RegKind::Immediate {
            self.val
        } else {
            0
        };
        Operand {
            slot: u8::try_from(self.slot()).unwrap_or(file::ZERO as u8),
            imm,
        }
    }
}

/// An operand resolved at install time: its value is `file[slot] + imm`. A register has
/// `imm` 0; an immediate reads [`file::ZERO`] (always 0) plus its value. So a read is one load
/// and one add, the same for every kind, with no branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Operand {
    /// Index into the flow's register file, below [`file::LEN`].
    pub slot: u8,
    /// Added to the register's value: an immediate's value, else 0.
    pub imm: u32,
}

/// An instruction as the machine executes it: [`Instr`] with its operands resolved into the
/// register file ([`Operand`]); built once at install.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FlatInstr {
    /// Operation.
    pub op: Op,
    /// Result register's slot (a writable kind: never [`file::ZERO`] or a primitive).
    pub ret: u8,
    /// Left operand.
    pub left: Operand,
    /// Right operand.
    pub right: Operand,
}

impl FlatInstr {
    const EMPTY: FlatInstr = FlatInstr {
        op: Op::Add,
        ret: 0,
        left: Operand { slot: 0, imm: 0 },
        right: Operand { slot: 0, imm: 0 },
    };

    /// Resolves a validated instruction.
    fn of(i: &Instr) -> FlatInstr {
        FlatInstr {
            op: i.op,
            ret: i.ret.operand().slot,
            left: i.left.operand(),
            right: i.right.operand(),
        }
    }
}

/// A validated instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Instr {
    /// Operation.
    pub op: Op,
    /// Result register (never an immediate or a primitive).
    pub ret: Reg,
    /// Left operand.
    pub left: Reg,
    /// Right operand.
    pub right: Reg,
}

impl Instr {
    /// Validates a serialised instruction (libccp `read_instruction`, plus index checks).
    ///
    /// Errors: [`Error::BadOpcode`], [`Error::BadResultReg`], [`Error::BadRegType`],
    /// [`Error::RegIndexOutOfRange`].
    pub fn from_msg(m: &InstrMsg) -> Result<Instr, Error> {
        let op = Op::from_u8(m.op)?;
        if m.ret.typ == RegKind::Immediate as u8 || m.ret.typ == RegKind::Primitive as u8 {
            return Err(Error::BadResultReg);
        }
        Ok(Instr {
            op,
            ret: Reg::from_msg(m.ret)?,
            left: Reg::from_msg(m.left)?,
            right: Reg::from_msg(m.right)?,
        })
    }

    /// The default value of a DEF (libccp `reset_state`: the immediate 0x3fffffff means
    /// "infinity" and becomes `(u64)~0U` = 0xffff_ffff).
    pub fn def_value(&self) -> u64 {
        if self.right.val == 0x3fff_ffff {
            0xffff_ffff
        } else {
            u64::from(self.right.val)
        }
    }
}

/// A validated event: instruction ranges of its condition and body (libccp `struct Expression`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Event {
    /// First condition instruction.
    pub cond_start: u16,
    /// Number of condition instructions.
    pub cond_len: u16,
    /// First body instruction.
    pub body_start: u16,
    /// Number of body instructions.
    pub body_len: u16,
}

fn range_in(start: u32, len: u32, n_instrs: usize) -> Result<(u16, u16), Error> {
    let end = start.checked_add(len).ok_or(Error::EventOutOfRange)?;
    if end as usize > n_instrs {
        return Err(Error::EventOutOfRange);
    }
    let s = u16::try_from(start).map_err(|_| Error::EventOutOfRange)?;
    let l = u16::try_from(len).map_err(|_| Error::EventOutOfRange)?;
    Ok((s, l))
}

/// An installed program: fixed capacity ([`MAX_EVENTS`] events, [`MAX_INSTRS`] instructions),
/// about 19 KiB (each instruction kept as decoded and as the interpreter executes it,
/// [`FlatInstr`], and the program's compiled form, [`Compiled`]). The all-zero value is an empty
/// program (not compiled: the interpreter runs it, which does nothing).
#[derive(Clone, Debug)]
pub struct Program {
    uid: u32,
    n_events: u16,
    n_instrs: u16,
    def_prefix: u16,
    n_report: u8,
    events: [Event; MAX_EVENTS],
    instrs: [Instr; MAX_INSTRS],
    /// `instrs` resolved for execution, index by index.
    flat: [FlatInstr; MAX_INSTRS],
    /// The compiled form, built at install from `events` and `flat`.
    compiled: Compiled,
}

const EMPTY_EVENT: Event = Event {
    cond_start: 0,
    cond_len: 0,
    body_start: 0,
    body_len: 0,
};
const EMPTY_REG: Reg = Reg {
    kind: RegKind::NonvolatileControl,
    val: 0,
};
const EMPTY_INSTR: Instr = Instr {
    op: Op::Add,
    ret: EMPTY_REG,
    left: EMPTY_REG,
    right: EMPTY_REG,
};

impl Program {
    /// An empty program (no events, no instructions).
    pub const fn new() -> Self {
        Program {
            uid: 0,
            n_events: 0,
            n_instrs: 0,
            def_prefix: 0,
            n_report: 0,
            events: [EMPTY_EVENT; MAX_EVENTS],
            instrs: [EMPTY_INSTR; MAX_INSTRS],
            flat: [FlatInstr::EMPTY; MAX_INSTRS],
            compiled: Compiled::new(),
        }
    }

    /// Checks an INSTALL without storing it; returns (DEF prefix length, report field count).
    ///
    /// Errors: those of [`Instr::from_msg`], [`Error::EventOutOfRange`],
    /// [`Error::DefNotImmediate`], [`Error::TooManyReportFields`], [`Error::TooManyEvents`],
    /// [`Error::TooManyInstrs`].
    pub fn validate(msg: &Install<'_>) -> Result<(u16, u8), Error> {
        let n_instrs = msg.num_instrs();
        if n_instrs > MAX_INSTRS {
            return Err(Error::TooManyInstrs);
        }
        if msg.num_events() > MAX_EVENTS {
            return Err(Error::TooManyEvents);
        }
        let mut def_prefix: u16 = 0;
        let mut in_prefix = true;
        let mut n_report: usize = 0;
        for m in msg.instrs() {
            let i = Instr::from_msg(&m)?;
            if in_prefix && i.op == Op::Def {
                def_prefix = def_prefix.saturating_add(1);
                let k = i.left.kind;
                let stateful = k.is_report()
                    || k == RegKind::NonvolatileControl
                    || k == RegKind::VolatileControl;
                if stateful && i.right.kind != RegKind::Immediate {
                    return Err(Error::DefNotImmediate);
                }
                if k.is_report() {
                    n_report = n_report.saturating_add(1);
                }
            } else {
                in_prefix = false;
            }
        }
        for e in msg.events() {
            range_in(e.cond_start, e.cond_len, n_instrs)?;
            range_in(e.body_start, e.body_len, n_instrs)?;
        }
        // libccp `reset_state` only sets `num_to_return` when it meets a non-DEF instruction.
        if in_prefix {
            n_report = 0;
        }
        if n_report > REPORT_REGS {
            return Err(Error::TooManyReportFields);
        }
        Ok((
            def_prefix,
            u8::try_from(n_report).map_err(|_| Error::TooManyReportFields)?,
        ))
    }

    /// Decodes a validated INSTALL into `self`, in place (no large temporaries).
    fn load(&mut self, msg: &Install<'_>, def_prefix: u16, n_report: u8) -> Result<(), Error> {
        self.uid = msg.program_uid;
        self.n_events = 0;
        self.n_instrs = 0;
        for ((dst, flat), m) in self.instrs.iter_mut().zip(&mut self.flat).zip(msg.instrs()) {
            *dst = Instr::from_msg(&m)?;
            *flat = FlatInstr::of(dst);
            self.n_instrs = self.n_instrs.saturating_add(1);
        }
        let n = usize::from(self.n_instrs);
        for (dst, e) in self.events.iter_mut().zip(msg.events()) {
            let (cond_start, cond_len) = range_in(e.cond_start, e.cond_len, n)?;
            let (body_start, body_len) = range_in(e.body_start, e.body_len, n)?;
            *dst = Event {
                cond_start,
                cond_len,
                body_start,
                body_len,
            };
            self.n_events = self.n_events.saturating_add(1);
        }
        self.def_prefix = def_prefix;
        self.n_report = n_report;
        let events = self.events.get(..usize::from(self.n_events)).unwrap_or(&[]);
        let flat = self.flat.get(..n).unwrap_or(&[]);
        self.compiled.build(events, flat);
        Ok(())
    }

    /// The compiled form, built at install ([`Compiled::ready`] is false when the program did
    /// not fit it; the interpreter runs it then).
    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    /// The uid the agent gave this program.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// The events, in evaluation order.
    pub fn events(&self) -> &[Event] {
        self.events.get(..usize::from(self.n_events)).unwrap_or(&[])
    }

    /// The instructions.
    pub fn instrs(&self) -> &[Instr] {
        self.instrs.get(..usize::from(self.n_instrs)).unwrap_or(&[])
    }

    /// The leading DEF instructions (libccp only honours DEFs before the first other op).
    pub fn defs(&self) -> &[Instr] {
        self.instrs
            .get(..usize::from(self.def_prefix))
            .unwrap_or(&[])
    }

    /// Instructions `start..start+len` (empty if out of range, which validation excludes).
    pub fn instr_range(&self, start: u16, len: u16) -> &[Instr] {
        let s = usize::from(start);
        let e = s.saturating_add(usize::from(len));
        self.instrs().get(s..e).unwrap_or(&[])
    }

    /// Instructions `start..start+len` resolved for execution ([`FlatInstr`]; empty if out of
    /// range, which validation excludes).
    pub fn flat_range(&self, start: u16, len: u16) -> &[FlatInstr] {
        let s = usize::from(start);
        let e = s.saturating_add(usize::from(len));
        self.flat
            .get(..usize::from(self.n_instrs))
            .and_then(|f| f.get(s..e))
            .unwrap_or(&[])
    }

    /// Number of fields a MEASURE of this program carries: Report-register DEFs in the DEF
    /// prefix (libccp `num_to_return`).
    pub fn num_report(&self) -> usize {
        usize::from(self.n_report)
    }
}

impl Default for Program {
    fn default() -> Self {
        Self::new()
    }
}

/// A reference from a flow to a program-table slot, valid while the slot keeps its generation.
/// The all-zero value refers to no program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ProgRef {
    slot: u16,
    gen: u32,
}

impl ProgRef {
    /// No program.
    pub const NONE: ProgRef = ProgRef { slot: 0, gen: 0 };

    /// True if this refers to no program at all.
    pub fn is_none(&self) -> bool {
        self.slot == 0
    }
}

/// Where installed programs live: shared, immutable storage provided by the host.
///
/// A [`ProgramTable`] holds one `Shared` per installed program; a sharded datapath
/// ([`super::ShardedDatapath`]) keeps a replica of the table in every shard, so the per-ACK path
/// reads its flow's program through its own shard's replica, under that shard's lock only, while
/// an INSTALL builds the next program elsewhere. The kernel's store is `Arc<Program>`
/// (reference-counted, freed with the last replica that holds it); [`InlineProgram`] keeps the
/// program by value for a single-threaded [`super::Datapath`], without allocation.
pub trait ProgramStore {
    /// A read-only, cheaply cloned reference to an installed program.
    type Shared: Clone + Deref<Target = Program>;

    /// Builds a program: `fill` loads it into an empty [`Program`] (the all-zero value) in fresh
    /// storage, in place; the result is then shared read-only.
    ///
    /// Errors: [`Error::AllocFailed`] when the host has no memory for it, or `fill`'s error.
    fn build(fill: impl FnOnce(&mut Program) -> Result<(), Error>) -> Result<Self::Shared, Error>;
}

/// A program kept by value: the [`ProgramStore`] of the single-threaded [`super::Datapath`]
/// (no allocation; a clone copies the program, about 14 KiB).
#[derive(Clone, Debug, Default)]
pub struct InlineProgram(Program);

impl Deref for InlineProgram {
    type Target = Program;
    fn deref(&self) -> &Program {
        &self.0
    }
}

impl ProgramStore for InlineProgram {
    type Shared = InlineProgram;
    fn build(fill: impl FnOnce(&mut Program) -> Result<(), Error>) -> Result<Self, Error> {
        let mut p = InlineProgram(Program::new());
        fill(&mut p.0)?;
        Ok(p)
    }
}

/// Checks an INSTALL and builds its program in a store (libccp `datapath_program_install`
/// without the table update). Nothing is allocated when the message is refused.
///
/// Errors: those of [`Program::validate`], [`Error::AllocFailed`].
pub fn build_program<S: ProgramStore>(msg: &Install<'_>) -> Result<S::Shared, Error> {
    let (def_prefix, n_report) = Program::validate(msg)?;
    S::build(|p| p.load(msg, def_prefix, n_report))
}

#[derive(Clone, Debug)]
struct ProgSlot<H> {
    used: bool,
    gen: u32,
    uid: u32,
    prog: Option<H>,
}

/// The program table: `P` programs by uid, shared by all flows (libccp `datapath->programs`),
/// each held as a store handle `H` (see [`ProgramStore`]).
///
/// Installing a uid that is present replaces it; installing uid 1 first clears the table (libccp
/// `ccp_read_msg`: portus numbers programs from 1, so uid 1 means a new agent). A replaced or
/// cleared program is gone for the flows that ran it ([`Error::ProgramGone`]) until the agent
/// sends CHANGE_PROG. Every change bumps [`ProgramTable::version`], which orders the replicas of
/// a sharded datapath.
#[derive(Clone, Debug)]
pub struct ProgramTable<const P: usize, H> {
    slots: [ProgSlot<H>; P],
    version: u64,
    mode: ExecMode,
}

impl<const P: usize, H: Deref<Target = Program>> ProgramTable<P, H> {
    const EMPTY_SLOT: ProgSlot<H> = ProgSlot {
        used: false,
        gen: 0,
        uid: 0,
        prog: None,
    };
    const SIZE_OK: () = assert!(
        P > 0 && P < u16::MAX as usize,
        "program table size must be 1..65535"
    );

    /// An empty table (version 0).
    pub const fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::SIZE_OK;
        ProgramTable {
            slots: [Self::EMPTY_SLOT; P],
            version: 0,
            mode: ExecMode::Compiled,
        }
    }

    /// Which path runs this table's programs ([`ExecMode::Compiled`] unless set).
    pub fn exec_mode(&self) -> ExecMode {
        self.mode
    }

    /// Chooses the path that runs this table's programs from the next invocation on (both give
    /// the same results; [`ExecMode::Interpret`] is the reference). Not a change of the table:
    /// [`ProgramTable::version`] stays.
    pub fn set_exec_mode(&mut self, mode: ExecMode) {
        self.mode = mode;
    }

    /// How many changes (installs) the table has seen: a replica whose version is lower is
    /// behind.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Removes every program (their flows see [`Error::ProgramGone`]).
    pub fn clear(&mut self) {
        for s in self.slots.iter_mut() {
            if s.used {
                s.used = false;
                s.gen = s.gen.wrapping_add(1);
                s.prog = None;
            }
        }
    }

    /// Installs a built program (see [`build_program`]) under `uid`; returns its reference.
    ///
    /// Errors: [`Error::ProgramTableFull`]. On error the table is unchanged.
    pub fn install(&mut self, uid: u32, prog: H) -> Result<ProgRef, Error> {
        if uid == 1 {
            self.clear();
        }
        let idx = self
            .slots
            .iter()
            .position(|s| s.used && s.uid == uid)
            .or_else(|| self.slots.iter().position(|s| !s.used))
            .ok_or(Error::ProgramTableFull)?;
        let slot = self.slots.get_mut(idx).ok_or(Error::ProgramTableFull)?;
        slot.gen = slot.gen.wrapping_add(1);
        slot.uid = uid;
        slot.prog = Some(prog);
        slot.used = true;
        self.version = self.version.wrapping_add(1);
        Ok(ProgRef {
            slot: u16::try_from(idx.saturating_add(1)).unwrap_or(0),
            gen: slot.gen,
        })
    }

    /// The reference of the installed program with this uid.
    pub fn lookup_uid(&self, uid: u32) -> Option<ProgRef> {
        let idx = self.slots.iter().position(|s| s.used && s.uid == uid)?;
        let slot = self.slots.get(idx)?;
        Some(ProgRef {
            slot: u16::try_from(idx.checked_add(1)?).ok()?,
            gen: slot.gen,
        })
    }

    /// The program a reference points to, if it is still installed unchanged.
    pub fn get(&self, r: ProgRef) -> Option<&Program> {
        let idx = usize::from(r.slot).checked_sub(1)?;
        let s = self.slots.get(idx)?;
        if s.used && s.gen == r.gen {
            s.prog.as_deref()
        } else {
            None
        }
    }

    /// The installed program with this uid.
    pub fn by_uid(&self, uid: u32) -> Option<&Program> {
        self.get(self.lookup_uid(uid)?)
    }

    /// Number of installed programs.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.used).count()
    }

    /// True when no program is installed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<const P: usize, H: Deref<Target = Program>> Default for ProgramTable<P, H> {
    fn default() -> Self {
        Self::new()
    }
}
