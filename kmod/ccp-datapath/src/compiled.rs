//! The compiled form of an installed program: built once at INSTALL beside the interpreter's
//! [`FlatInstr`]s, run per ACK by [`super::FlowState`] instead of the interpreter unless the
//! datapath's [`ExecMode`] says otherwise.
//!
//! The interpreter (libccp `state_machine`, machine.c) walks the events, evaluates each event's
//! condition, tests `__eventFlag` and `__shouldContinue` after every event and checks every
//! instruction's result register for `Micros`. The compiled form is one straight list of
//! [`Step`]s per program with everything that install time can decide already decided:
//!
//! - DEF instructions inside events (no-ops when executed) are dropped.
//! - Constant folding: an instruction whose operands are both immediates becomes a [`StepKind::Const`]
//!   (or nothing, for an `if`/`!if` whose constant condition never writes); one that would fail
//!   on its constants stays an operation, so it fails at the same point.
//! - The two flags the event loop tests are tracked through the program: at the start of a run
//!   both are 0, and a constant write (`(when true ..)`, `(fallthrough)`) makes them known. A
//!   condition known true runs its body without a test, one known false drops the body, a write
//!   of a flag's known value is dropped, and the "first event that fires without `(fallthrough)`
//!   stops the run" test is dropped once `(fallthrough)` is known to have run (libccp keeps it
//!   set for the rest of the run) or ends the program where it is known to stop it.
//! - An operation whose result portus moves into another register with the next instruction
//!   (`op tmp ..; bind dst tmp`, how portus compiles every `(:= dst (op ..))`) is one step that
//!   writes both registers.
//! - `Micros` writes need no per-step check: during a run, `Micros` always equals the clock
//!   minus the flow's time zero (the run sets it so, and libccp's `write_reg` keeps it so), so
//!   the runner derives the time zero once, from `Micros`, when the run ends.
//!
//! What is left per ACK is one `match` on a pre-specialised [`StepKind`] per step, over operands
//! resolved to register-file slots at install ([`Operand`]). The arithmetic of every operation is
//! the interpreter's own ([`super::machine::alu`]), so the two cannot disagree on an operator; the
//! differential tests (`tests/compiled.rs`) and the fuzz target run both side by side.

use super::machine::{alu, EVENT_FLAG, SHOULD_CONTINUE};
use super::program::{file, Event, FlatInstr, Op, Operand};
use super::{MAX_EVENTS, MAX_INSTRS};

/// Capacity of a compiled program, in steps: every instruction once (what portus emits: each
/// instruction belongs to one event) plus 64 event tests (one per event whose condition is not
/// known at install, plus one per event that may stop the run). A program
/// that needs more (events sharing instructions, which only hand-made INSTALLs do) is not
/// compiled and runs in the interpreter.
pub const MAX_STEPS: usize = MAX_INSTRS + 64;

/// What a [`Step`] does. Operations read `left`/`right` (slot plus immediate, as the
/// interpreter's [`FlatInstr`]) and write their result to `ret` and `also`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum StepKind {
    /// Writes the constant [`Step::constant`] (a folded instruction or an immediate `bind`).
    #[default]
    Const = 0,
    /// Writes `left` (a `bind` from a register).
    Copy,
    /// [`Op::Add`].
    Add,
    /// [`Op::Sub`].
    Sub,
    /// [`Op::Mul`].
    Mul,
    /// [`Op::Div`].
    Div,
    /// [`Op::Equiv`].
    Equiv,
    /// [`Op::Gt`].
    Gt,
    /// [`Op::Lt`].
    Lt,
    /// [`Op::Max`].
    Max,
    /// [`Op::Min`].
    Min,
    /// [`Op::MaxWrap`].
    MaxWrap,
    /// [`Op::Ewma`] (reads `ret` too).
    Ewma,
    /// [`Op::If`]: writes `right` when `left` != 0.
    If,
    /// [`Op::NotIf`]: writes `right` when `left` == 0.
    NotIf,
    /// Skips the next [`Step::skip`] steps (an event's body) when `__eventFlag` is 0.
    SkipUnlessFlag,
    /// Ends the run when `__eventFlag` != 0 and `__shouldContinue` == 0.
    BreakUnlessContinue,
}

impl StepKind {
    /// The step kind of an operation (`None` for DEF, which does nothing when executed).
    fn of(op: Op) -> Option<StepKind> {
        Some(match op {
            Op::Add => StepKind::Add,
            Op::Bind => StepKind::Copy,
            Op::Def => return None,
            Op::Div => StepKind::Div,
            Op::Equiv => StepKind::Equiv,
            Op::Ewma => StepKind::Ewma,
            Op::Gt => StepKind::Gt,
            Op::If => StepKind::If,
            Op::Lt => StepKind::Lt,
            Op::Max => StepKind::Max,
            Op::MaxWrap => StepKind::MaxWrap,
            Op::Min => StepKind::Min,
            Op::Mul => StepKind::Mul,
            Op::NotIf => StepKind::NotIf,
            Op::Sub => StepKind::Sub,
        })
    }

    /// True for the kinds that always write their result (not `if`/`!if`, not the tests).
    fn always_writes(self) -> bool {
        !matches!(
            self,
            StepKind::If
                | StepKind::NotIf
                | StepKind::SkipUnlessFlag
                | StepKind::BreakUnlessContinue
        )
    }
}

/// One step of a compiled program (16 bytes). The all-zero value writes 0 to slot 0; it only
/// fills the unused capacity. Operands are as the interpreter's [`Operand`], in flat fields:
/// the register at the slot plus the immediate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Step {
    /// What the step does.
    pub kind: StepKind,
    /// Result slot in the flow's register file ([`file`]).
    pub ret: u8,
    /// Second result slot, written with the same value: the target of a fused `bind`, else
    /// `ret` again.
    pub also: u8,
    /// Left operand's slot.
    pub left_slot: u8,
    /// Right operand's slot.
    pub right_slot: u8,
    /// Left operand's immediate; for [`StepKind::Const`], the constant's low 32 bits.
    pub left_imm: u32,
    /// Right operand's immediate; for [`StepKind::Const`], the constant's high 32 bits; for
    /// [`StepKind::SkipUnlessFlag`], the number of steps to skip.
    pub right_imm: u32,
}

impl Step {
    const EMPTY: Step = Step {
        kind: StepKind::Const,
        ret: 0,
        also: 0,
        left_slot: 0,
        right_slot: 0,
        left_imm: 0,
        right_imm: 0,
    };

    /// The value a [`StepKind::Const`] writes.
    pub fn constant(&self) -> u64 {
        u64::from(self.left_imm) | (u64::from(self.right_imm) << 32)
    }

    /// The number of steps a [`StepKind::SkipUnlessFlag`] skips.
    pub fn skip(&self) -> usize {
        self.right_imm as usize
    }

    /// The left operand.
    pub fn left(&self) -> Operand {
        Operand {
            slot: self.left_slot,
            imm: self.left_imm,
        }
    }

    /// The right operand.
    pub fn right(&self) -> Operand {
        Operand {
            slot: self.right_slot,
            imm: self.right_imm,
        }
    }

    fn op(kind: StepKind, ret: u8, left: Operand, right: Operand) -> Step {
        Step {
            kind,
            ret,
            also: ret,
            left_slot: left.slot,
            right_slot: right.slot,
            left_imm: left.imm,
            right_imm: right.imm,
        }
    }

    fn constant_of(ret: u8, v: u64) -> Step {
        Step {
            kind: StepKind::Const,
            ret,
            also: ret,
            left_slot: file::ZERO as u8,
            right_slot: file::ZERO as u8,
            left_imm: v as u32,
            right_imm: (v >> 32) as u32,
        }
    }

    fn test(kind: StepKind) -> Step {
        Step {
            kind,
            ..Step::EMPTY
        }
    }
}

/// Which path runs installed programs: a runtime setting of the datapath (see
/// [`super::ProgramTable::set_exec_mode`]); both give the same registers, reports and commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ExecMode {
    /// The compiled form, where the program has one (every program portus emits); the
    /// interpreter otherwise. The default.
    #[default]
    Compiled,
    /// The interpreter (libccp's machine.c semantics, the reference), for every program.
    Interpret,
}

/// The flags' values known at a point of the program at install time (`None`: unknown).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Known {
    flag: Option<u64>,
    cont: Option<u64>,
}

impl Known {
    /// What a write of `v` (`None`: not a constant) to `slot` makes known.
    fn write(&mut self, slot: u8, v: Option<u64>) {
        if usize::from(slot) == file::IMPLICIT.saturating_add(EVENT_FLAG) {
            self.flag = v;
        }
        if usize::from(slot) == file::IMPLICIT.saturating_add(SHOULD_CONTINUE) {
            self.cont = v;
        }
    }

    /// What is known after either of two paths.
    fn merge(self, other: Known) -> Known {
        Known {
            flag: self.flag.filter(|_| self.flag == other.flag),
            cont: self.cont.filter(|_| self.cont == other.cont),
        }
    }

    /// Whether writing `v` to `slot` is known to change nothing.
    fn redundant(&self, slot: u8, v: u64) -> bool {
        let s = usize::from(slot);
        (s == file::IMPLICIT.saturating_add(EVENT_FLAG) && self.flag == Some(v))
            || (s == file::IMPLICIT.saturating_add(SHOULD_CONTINUE) && self.cont == Some(v))
    }
}

/// A program's compiled form (about 5 KiB); the all-zero value is "not compiled".
#[derive(Clone, Debug)]
pub struct Compiled {
    /// Whether `steps` holds the program (else the interpreter runs it).
    ready: bool,
    n_steps: u16,
    steps: [Step; MAX_STEPS],
}

impl Compiled {
    /// Not compiled.
    pub const fn new() -> Self {
        Compiled {
            ready: false,
            n_steps: 0,
            steps: [Step::EMPTY; MAX_STEPS],
        }
    }

    /// Whether the program was compiled (it was not when it needs more than [`MAX_STEPS`]).
    pub fn ready(&self) -> bool {
        self.ready
    }

    /// The steps, in order.
    pub fn steps(&self) -> &[Step] {
        self.steps.get(..usize::from(self.n_steps)).unwrap_or(&[])
    }

    /// Compiles a validated program (its events and resolved instructions, see
    /// [`super::Program`]) into `self`, in place; leaves it not ready when the program does not
    /// fit [`MAX_STEPS`].
    pub fn build(&mut self, events: &[Event], flat: &[FlatInstr]) {
        self.ready = false;
        self.n_steps = 0;
        if self.emit_all(events, flat).is_some() {
            self.ready = true;
        } else {
            self.n_steps = 0;
        }
    }

    fn emit_all(&mut self, events: &[Event], flat: &[FlatInstr]) -> Option<()> {
        let range = |start: u16, len: u16| {
            let s = usize::from(start);
            flat.get(s..s.saturating_add(usize::from(len)))
        };
        // A run starts with both flags cleared.
        let mut k = Known {
            flag: Some(0),
            cont: Some(0),
        };
        for ev in events.iter().take(MAX_EVENTS) {
            self.emit_range(range(ev.cond_start, ev.cond_len)?, &mut k)?;
            match k.flag {
                Some(0) => {}
                Some(_) => self.emit_range(range(ev.body_start, ev.body_len)?, &mut k)?,
                None => {
                    let at = usize::from(self.n_steps);
                    self.push(Step::test(StepKind::SkipUnlessFlag))?;
                    let mut ran = k;
                    self.emit_range(range(ev.body_start, ev.body_len)?, &mut ran)?;
                    let skip = usize::from(self.n_steps).checked_sub(at)?.checked_sub(1)?;
                    let test = self.steps.get_mut(at)?;
                    test.right_imm = u32::try_from(skip).ok()?;
                    k = k.merge(ran);
                }
            }
            let never = k.flag == Some(0) || k.cont.is_some_and(|c| c != 0);
            let always = k.flag.is_some_and(|f| f != 0) && k.cont == Some(0);
            if always {
                // The interpreter stops here on every run: nothing after it ever runs.
                break;
            }
            if !never {
                self.push(Step::test(StepKind::BreakUnlessContinue))?;
            }
        }
        Some(())
    }

    /// Emits the steps of one instruction range, folding and fusing as the module docs say.
    fn emit_range(&mut self, instrs: &[FlatInstr], k: &mut Known) -> Option<()> {
        let mut i = 0usize;
        while let Some(ins) = instrs.get(i) {
            i = i.saturating_add(1);
            let Some(kind) = StepKind::of(ins.op) else {
                continue;
            };
            let zero = file::ZERO as u8;
            let folded =
                if ins.left.slot == zero && ins.right.slot == zero && kind != StepKind::Ewma {
                    // Both operands are immediates: the result is known now, unless it fails.
                    match alu(ins.op, u64::from(ins.left.imm), u64::from(ins.right.imm), 0) {
                        Ok(Some(v)) => Some(Some(v)),
                        Ok(None) => Some(None),
                        Err(_) => None,
                    }
                } else if ins.op == Op::Bind && ins.right.slot == zero {
                    Some(Some(u64::from(ins.right.imm)))
                } else {
                    None
                };
            let mut step = match folded {
                // A constant `if` that never writes: nothing to do.
                Some(None) => continue,
                Some(Some(v)) => {
                    if k.redundant(ins.ret, v) {
                        continue;
                    }
                    Step::constant_of(ins.ret, v)
                }
                // A `bind` from a register is a copy of the right operand.
                None if ins.op == Op::Bind => {
                    Step::op(kind, ins.ret, ins.right, Operand::default())
                }
                None => Step::op(kind, ins.ret, ins.left, ins.right),
            };
            // `op t ..; bind d t`: one step writing both (only when the op always writes).
            if let Some(next) = instrs.get(i) {
                let moves_result = next.op == Op::Bind
                    && next.right.slot == step.ret
                    && next.right.imm == 0
                    && step.ret != zero;
                if moves_result && step.kind.always_writes() {
                    step.also = next.ret;
                    i = i.saturating_add(1);
                }
            }
            let v = (step.kind == StepKind::Const).then(|| step.constant());
            if step.kind.always_writes() {
                k.write(step.ret, v);
                k.write(step.also, v);
            } else {
                k.write(step.ret, None);
            }
            self.push(step)?;
        }
        Some(())
    }

    fn push(&mut self, s: Step) -> Option<()> {
        let slot = self.steps.get_mut(usize::from(self.n_steps))?;
        *slot = s;
        self.n_steps = self.n_steps.checked_add(1)?;
        Some(())
    }
}

impl Default for Compiled {
    fn default() -> Self {
        Self::new()
    }
}
