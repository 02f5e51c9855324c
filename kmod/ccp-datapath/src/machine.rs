//! The datapath program machine: per-flow registers, staged updates and one invocation per ACK.
//!
//! This is libccp's `ccp_invoke` (ccp.c) and `state_machine`/`process_expression`/
//! `process_instruction` (machine.c) with the same order of effects and the same arithmetic,
//! written over fixed-size state so that it runs in softirq context: nothing allocates, nothing
//! panics, and every register access is bounds-checked (install-time validation makes the checks
//! never fail).
//!
//! Per ACK the machine reads operands from one flat register file per flow ([`Registers`], laid
//! out as `program::file` says) through slots resolved at install ([`FlatInstr`]): one load per
//! operand instead of a `match` on its kind, with this invocation's primitives copied into the
//! file first. By default a program runs through its compiled form instead ([`super::compiled`],
//! [`FlowState::run_compiled`]), built at install; the interpreter ([`FlowState::run`]) stays as
//! the reference and runs when the datapath's [`ExecMode`] says so. Benchmark:
//! `cargo bench -p ccp-datapath --bench invoke`.

use super::compiled::{ExecMode, Step, StepKind};
use super::error::Error;
use super::program::{file, FlatInstr, Op, Operand, ProgRef, Program, ProgramTable, Reg, RegKind};
use super::wire::{self, Create, UpdateField, Updates};
use super::{
    DatapathOps, FlowInfo, CONTROL_REGS, CREATE_RETRY_US, IMPLICIT_REGS, LOCAL_REGS,
    NUM_PRIMITIVES, REPORT_REGS, TMP_REGS,
};
use core::ops::Deref;

/// Implicit register `__eventFlag`: set by an event's condition.
pub const EVENT_FLAG: usize = 0;
/// Implicit register `__shouldContinue`: set by `(fallthrough)`.
pub const SHOULD_CONTINUE: usize = 1;
/// Implicit register `__shouldReport`: set by `(report)`.
pub const SHOULD_REPORT: usize = 2;
/// Implicit register `Micros`: µs since the flow's timer was last reset.
pub const MICROS: usize = 3;
/// Implicit register `Cwnd`: congestion window in bytes.
pub const CWND: usize = 4;
/// Implicit register `Rate`: pacing rate in bytes/s.
pub const RATE: usize = 5;

/// Measurement primitives of one invocation (libccp `struct ccp_primitives`; register names
/// `Ack.*`/`Flow.*` as in portus `lang`). All counts are per invocation unless noted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Primitives {
    /// `Ack.bytes_acked` (0): newly acked in-order bytes.
    pub bytes_acked: u64,
    /// `Ack.bytes_misordered` (1): out-of-order bytes.
    pub bytes_misordered: u64,
    /// `Ack.ecn_bytes` (2): ECN-marked bytes.
    pub ecn_bytes: u64,
    /// `Ack.ecn_packets` (3): ECN-marked packets.
    pub ecn_packets: u64,
    /// `Ack.lost_pkts_sample` (4): packets lost.
    pub lost_pkts_sample: u64,
    /// `Ack.packets_acked` (6): newly acked in-order packets.
    pub packets_acked: u64,
    /// `Ack.packets_misordered` (7): out-of-order packets.
    pub packets_misordered: u64,
    /// `Flow.bytes_in_flight` (8).
    pub bytes_in_flight: u64,
    /// `Flow.bytes_pending` (9): bytes waiting in the send buffer (absolute).
    pub bytes_pending: u64,
    /// `Flow.packets_in_flight` (10).
    pub packets_in_flight: u64,
    /// `Flow.rate_incoming` (11): receive rate sample, bytes/s.
    pub rate_incoming: u64,
    /// `Flow.rate_outgoing` (12): send rate sample, bytes/s.
    pub rate_outgoing: u64,
    /// `Flow.rtt_sample_us` (13): RTT sample in µs; 0 (no sample) reads as 0xffff_ffff.
    pub rtt_sample_us: u64,
    /// `Flow.was_timeout` (14).
    pub was_timeout: bool,
    /// The flow's current congestion window in bytes; loaded into `Cwnd` before each run. It
    /// must be what the datapath enforces (the last value set), or `Cwnd` drifts.
    pub snd_cwnd: u64,
    /// The flow's current rate limit in bytes/s; loaded into `Rate` before each run (0 = none).
    pub snd_rate: u64,
}

/// The register files of one flow (libccp `struct register_file`), kept as one array laid out
/// as [`file`] says, plus the primitives of the current invocation. Public for inspection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registers {
    file: [u64; file::LEN],
}

impl Registers {
    /// All registers zero.
    pub const fn new() -> Self {
        Registers {
            file: [0; file::LEN],
        }
    }

    fn part(&self, base: usize, len: usize) -> &[u64] {
        let end = base.saturating_add(len);
        self.file.get(base..end).unwrap_or(&[])
    }

    /// Report registers (`Report.*`).
    pub fn report(&self) -> &[u64] {
        self.part(file::REPORT, REPORT_REGS)
    }

    /// Control registers (`Control.*` / plain `def` variables).
    pub fn control(&self) -> &[u64] {
        self.part(file::CONTROL, CONTROL_REGS)
    }

    /// Implicit registers, see [`EVENT_FLAG`]..[`RATE`].
    pub fn implicit(&self) -> &[u64] {
        self.part(file::IMPLICIT, IMPLICIT_REGS)
    }

    /// Temporaries.
    pub fn tmp(&self) -> &[u64] {
        self.part(file::TMP, TMP_REGS)
    }

    /// Locals.
    pub fn local(&self) -> &[u64] {
        self.part(file::LOCAL, LOCAL_REGS)
    }

    /// The register at `slot` (0 beyond the file, which validation excludes).
    fn get(&self, slot: usize) -> u64 {
        self.file.get(slot).copied().unwrap_or(0)
    }

    /// Sets the register at `slot` (nothing beyond the file, which validation excludes).
    fn set(&mut self, slot: usize, v: u64) {
        if let Some(r) = self.file.get_mut(slot) {
            *r = v;
        }
    }

    /// An operand's value (libccp `read_reg`): the register plus an immediate's value.
    fn read(&self, o: Operand) -> u64 {
        self.get(usize::from(o.slot)).wrapping_add(u64::from(o.imm))
    }

    /// Copies the primitives of this invocation into their part (libccp `read_reg` reads them
    /// from `struct ccp_primitives`; they do not change during a run). `ack_now_us` is
    /// `Ack.now`, µs since the datapath's time zero.
    fn load_primitives(&mut self, p: &Primitives, ack_now_us: u64) {
        // libccp reads an RTT sample of 0 (none) as 0xffff_ffff.
        let rtt = if p.rtt_sample_us == 0 {
            0xffff_ffff
        } else {
            p.rtt_sample_us
        };
        let values: [u64; NUM_PRIMITIVES] = [
            p.bytes_acked,
            p.bytes_misordered,
            p.ecn_bytes,
            p.ecn_packets,
            p.lost_pkts_sample,
            ack_now_us,
            p.packets_acked,
            p.packets_misordered,
            p.bytes_in_flight,
            p.bytes_pending,
            p.packets_in_flight,
            p.rate_incoming,
            p.rate_outgoing,
            rtt,
            u64::from(p.was_timeout),
        ];
        // One array store: the part's length is NUM_PRIMITIVES by `file`'s layout, so the
        // conversion cannot fail. (A zip over the slice here compiled, in the kernel's build,
        // to an out-of-line `ExactSizeIterator::len` call per primitive.)
        if let Some(dst) = self.file.get_mut(file::PRIMITIVE..file::ZERO) {
            if let Ok(dst) = <&mut [u64; NUM_PRIMITIVES]>::try_from(dst) {
                *dst = values;
            }
        }
    }
}

impl Default for Registers {
    fn default() -> Self {
        Self::new()
    }
}

const _: () = assert!(
    CONTROL_REGS <= u16::BITS as usize,
    "Staged::control_pending has one bit per Control register"
);

/// Updates received from the agent, applied at the start of the next invocation (libccp
/// `struct staged_update` and `staged_program_index`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Staged {
    control: [u64; CONTROL_REGS],
    /// Bit `i` set: `control[i]` is pending (one check per ACK tells whether any is).
    control_pending: u16,
    cwnd: u64,
    cwnd_pending: bool,
    rate: u64,
    rate_pending: bool,
    program: ProgRef,
    program_pending: bool,
    /// The SET_CLASS class byte waiting for the next invocation (a DSCP, or
    /// [`wire::CLASS_RELEASE`]); a plain byte and a flag, so that all-zero is "nothing staged".
    class: u8,
    class_pending: bool,
}

impl Staged {
    /// Nothing staged.
    pub const fn new() -> Self {
        Staged {
            control: [0; CONTROL_REGS],
            control_pending: 0,
            cwnd: 0,
            cwnd_pending: false,
            rate: 0,
            rate_pending: false,
            program: ProgRef::NONE,
            program_pending: false,
            class: 0,
            class_pending: false,
        }
    }

    /// Clears the staged register updates (not a staged class: CHANGE_PROG does not touch it).
    fn clear_updates(&mut self) {
        self.control_pending = 0;
        self.cwnd_pending = false;
        self.rate_pending = false;
    }

    /// Checks one update (libccp `stage_update` accepts control and implicit types).
    fn check(u: &UpdateField) -> Result<(), Error> {
        match RegKind::from_u8(u.reg_type) {
            Ok(RegKind::NonvolatileControl | RegKind::VolatileControl) => {
                if u.reg_index as usize >= CONTROL_REGS {
                    return Err(Error::UpdateIndexOutOfRange);
                }
                Ok(())
            }
            Ok(RegKind::Implicit) => Ok(()),
            _ => Err(Error::BadUpdateReg),
        }
    }

    /// Stages one checked update. Implicit registers other than `Cwnd` and `Rate` are ignored,
    /// as in libccp.
    fn stage(&mut self, u: &UpdateField) {
        match RegKind::from_u8(u.reg_type) {
            Ok(RegKind::NonvolatileControl | RegKind::VolatileControl) => {
                let i = u.reg_index as usize;
                if let Some(v) = self.control.get_mut(i) {
                    *v = u.value;
                    self.control_pending |= 1u16.checked_shl(u.reg_index).unwrap_or(0);
                }
            }
            Ok(RegKind::Implicit) if u.reg_index as usize == CWND => {
                self.cwnd = u.value;
                self.cwnd_pending = true;
            }
            Ok(RegKind::Implicit) if u.reg_index as usize == RATE => {
                self.rate = u.value;
                self.rate_pending = true;
            }
            _ => {}
        }
    }

    /// True if any update (Control, `Cwnd`, `Rate`, the class) waits for the next invocation.
    fn any_update(&self) -> bool {
        self.control_pending != 0 || self.cwnd_pending || self.rate_pending || self.class_pending
    }

    /// True if Control register `i` has a staged value.
    fn control_is_pending(&self, i: usize) -> bool {
        u32::try_from(i)
            .ok()
            .and_then(|i| self.control_pending.checked_shr(i))
            .is_some_and(|m| m & 1 != 0)
    }

    /// The staged Control registers: (index, value) of each pending one.
    fn pending_control(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.control
            .iter()
            .enumerate()
            .filter(|&(i, _)| self.control_is_pending(i))
            .map(|(i, &v)| (i, v))
    }

    /// Validates all updates, then stages them all (all or nothing).
    fn stage_all(&mut self, updates: &Updates<'_>) -> Result<(), Error> {
        updates.iter().try_for_each(|u| Self::check(&u))?;
        updates.iter().for_each(|u| self.stage(&u));
        Ok(())
    }
}

impl Default for Staged {
    fn default() -> Self {
        Self::new()
    }
}

/// What one invocation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invoked {
    /// CREATE has not reached the agent yet; it was (re)tried and nothing else ran (libccp
    /// `ccp_invoke` returns early too).
    CreatePending,
    /// Staged updates were applied, but the flow has no (valid) program.
    NoProgram,
    /// The program ran.
    Ran {
        /// Whether it asked for a report, and whether sending it worked.
        report: ReportStatus,
    },
}

/// Whether a run produced a MEASURE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportStatus {
    /// `__shouldReport` stayed false.
    None,
    /// A MEASURE was sent.
    Sent,
    /// A MEASURE was due but [`DatapathOps::send_msg`] failed (registers were reset anyway, as
    /// in libccp).
    SendFailed,
}

/// The state of one flow: 856 bytes on x86-64, no pointers. The all-zero value is a valid (unused)
/// state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowState {
    /// What CREATE announces.
    pub info: FlowInfo,
    /// Register files.
    pub regs: Registers,
    staged: Staged,
    program: ProgRef,
    /// Clock value (µs) at which `Micros` was last 0 (libccp `implicit_time_zero`).
    time_zero_us: u64,
    created: bool,
    create_tried: bool,
    last_create_us: u64,
    /// The DSCP the agent set with SET_CLASS and the datapath applied, valid when `has_class`
    /// (a byte and a flag rather than an `Option`, so that all-zero is "none").
    class: u8,
    has_class: bool,
}

impl FlowState {
    /// A fresh flow: no program, registers zero, `Micros` counting from `time_zero_us` (libccp
    /// `init_ccp_priv_state` uses the datapath's time zero).
    pub const fn new(info: FlowInfo, time_zero_us: u64) -> Self {
        FlowState {
            info,
            regs: Registers::new(),
            staged: Staged::new(),
            program: ProgRef::NONE,
            time_zero_us,
            created: false,
            create_tried: false,
            last_create_us: 0,
            class: 0,
            has_class: false,
        }
    }

    /// The traffic class in force: the DSCP of the agent's last SET_CLASS applied at an
    /// invocation, or `None` (the socket's own marking: never set, or released). A host restores
    /// the socket's own marking while the agent is not in charge and applies this again when it
    /// is.
    pub fn class(&self) -> Option<u8> {
        self.has_class.then_some(self.class)
    }

    /// The class staged by a SET_CLASS and not applied yet: `Some(Some(dscp))`, `Some(None)`
    /// (release), or `None` (nothing staged).
    pub fn class_pending(&self) -> Option<Option<u8>> {
        self.staged
            .class_pending
            .then(|| (self.staged.class != wire::CLASS_RELEASE).then_some(self.staged.class))
    }

    /// Stages a SET_CLASS: `Some(dscp)` (0..=[`wire::DSCP_MAX`]) or `None` (release), applied
    /// at the next invocation ([`DatapathOps::set_class`], called only when the class changes).
    /// A later SET_CLASS before that invocation replaces it; CHANGE_PROG keeps it.
    ///
    /// Errors: [`Error::BadClass`] for a DSCP above [`wire::DSCP_MAX`] (nothing staged).
    pub fn stage_class(&mut self, dscp: Option<u8>) -> Result<(), Error> {
        self.staged.class = wire::SetClass::class_byte(dscp)?;
        self.staged.class_pending = true;
        Ok(())
    }

    /// Whether the agent has been sent this flow's CREATE.
    pub fn created(&self) -> bool {
        self.created
    }

    /// The program the flow runs (may be stale; check with [`ProgramTable::get`]).
    pub fn program(&self) -> ProgRef {
        self.program
    }

    /// True if a CHANGE_PROG is staged and not applied yet.
    pub fn program_pending(&self) -> bool {
        self.staged.program_pending
    }

    /// Sends this flow's CREATE, at most once per [`CREATE_RETRY_US`] (libccp `send_conn_create`).
    ///
    /// Errors: [`Error::SendFailed`] (also while the retry interval has not passed).
    pub fn send_create(&mut self, sid: u32, ops: &mut impl DatapathOps) -> Result<(), Error> {
        let now = ops.now_us();
        if self.create_tried && now.wrapping_sub(self.last_create_us) < CREATE_RETRY_US {
            return Err(Error::SendFailed);
        }
        self.create_tried = true;
        self.last_create_us = now;
        let mut c = Create {
            sid,
            init_cwnd: self.info.init_cwnd,
            mss: self.info.mss,
            src_ip: self.info.src_ip,
            src_port: self.info.src_port,
            dst_ip: self.info.dst_ip,
            dst_port: self.info.dst_port,
            alg: [0; wire::ALG_NAME_LEN],
        };
        c.set_alg_name(self.info.alg_name())?;
        let mut buf = [0u8; wire::CREATE_LEN];
        let n = c.write(&mut buf)?;
        ops.send_msg(buf.get(..n).unwrap_or(&[]))
            .map_err(|_| Error::SendFailed)?;
        self.created = true;
        Ok(())
    }

    /// Stages UPDATE_FIELDS updates (libccp `stage_multiple_updates`), all or nothing.
    ///
    /// Errors: [`Error::BadUpdateReg`], [`Error::UpdateIndexOutOfRange`].
    pub fn stage_updates(&mut self, updates: &Updates<'_>) -> Result<(), Error> {
        self.staged.stage_all(updates)
    }

    /// Stages CHANGE_PROG: a switch to `program` plus its updates; drops updates staged before
    /// (libccp `ccp_read_msg`). All or nothing.
    ///
    /// Errors: [`Error::BadUpdateReg`], [`Error::UpdateIndexOutOfRange`].
    pub fn stage_program(&mut self, program: ProgRef, updates: &Updates<'_>) -> Result<(), Error> {
        updates.iter().try_for_each(|u| Staged::check(&u))?;
        self.staged.clear_updates();
        self.staged.program = program;
        self.staged.program_pending = true;
        self.staged.stage_all(updates)
    }

    /// One invocation (libccp `ccp_invoke`): retry CREATE if needed; load `Cwnd`/`Rate` from
    /// `prims`; apply a staged program switch (reset report/control registers to their DEF
    /// defaults, restart `Micros`); apply staged updates (calling `set_cwnd`/`set_rate_abs` for
    /// non-zero staged `Cwnd`/`Rate`); run the program; enforce `Cwnd` (> 0) and `Rate` (!= 0);
    /// send a MEASURE if `(report)` ran.
    ///
    /// `dp_time_zero_us` is the datapath's start time (`Ack.now` counts from it).
    ///
    /// Errors: [`Error::ProgramGone`] (the program was replaced; the flow now has none) and the
    /// execution errors [`Error::AddOverflow`], [`Error::SubUnderflow`], [`Error::MulOverflow`],
    /// [`Error::DivByZero`] (the run stops there: no enforcement, no report, as in libccp).
    pub fn invoke<const P: usize, H: Deref<Target = Program>>(
        &mut self,
        sid: u32,
        programs: &ProgramTable<P, H>,
        prims: &Primitives,
        dp_time_zero_us: u64,
        ops: &mut impl DatapathOps,
    ) -> Result<Invoked, Error> {
        if !self.created {
            // Failure is expected while no agent listens; the caller counts nothing here.
            let _ = self.send_create(sid, ops);
            return Ok(Invoked::CreatePending);
        }
        let now = ops.now_us();
        self.set_implicit(CWND, prims.snd_cwnd);
        self.set_implicit(RATE, prims.snd_rate);

        let mut gone = false;
        if self.staged.program_pending {
            self.staged.program_pending = false;
            self.program = self.staged.program;
            match programs.get(self.program) {
                Some(p) => {
                    self.reset_volatile(p);
                    self.init_nonvolatile(p);
                }
                None => {
                    self.program = ProgRef::NONE;
                    gone = true;
                }
            }
            self.time_zero_us = now;
            self.set_implicit(MICROS, 0);
        }

        if self.staged.any_update() {
            self.apply_updates(ops);
        }
        if gone {
            return Err(Error::ProgramGone);
        }
        if self.program.is_none() {
            return Ok(Invoked::NoProgram);
        }
        let Some(prog) = programs.get(self.program) else {
            self.program = ProgRef::NONE;
            return Err(Error::ProgramGone);
        };

        match programs.exec_mode() {
            ExecMode::Compiled => self.run_compiled(prog, prims, now, dp_time_zero_us)?,
            ExecMode::Interpret => self.run(prog, prims, now, dp_time_zero_us)?,
        }
        self.enforce(ops);
        let mut report = ReportStatus::None;
        if self.implicit(SHOULD_REPORT) != 0 {
            report = self.send_report(sid, prog, ops);
            self.reset_volatile(prog);
        }
        Ok(Invoked::Ran { report })
    }

    /// Applies the staged updates (libccp `ccp_invoke`): Control registers, then `Cwnd` and
    /// `Rate`, each also set in the datapath when non-zero; then a staged class (not in
    /// libccp), through [`DatapathOps::set_class`] when it differs from the class in force.
    fn apply_updates(&mut self, ops: &mut impl DatapathOps) {
        for (i, v) in self.staged.pending_control() {
            self.regs.set(file::CONTROL.saturating_add(i), v);
        }
        if self.staged.cwnd_pending {
            self.set_implicit(CWND, self.staged.cwnd);
            if self.staged.cwnd != 0 {
                ops.set_cwnd(self.staged.cwnd);
            }
        }
        if self.staged.rate_pending {
            self.set_implicit(RATE, self.staged.rate);
            if self.staged.rate != 0 {
                ops.set_rate_abs(self.staged.rate);
            }
        }
        if self.staged.class_pending {
            self.staged.class_pending = false;
            let class = (self.staged.class != wire::CLASS_RELEASE).then_some(self.staged.class);
            if class != self.class() {
                self.class = class.unwrap_or(0);
                self.has_class = class.is_some();
                ops.set_class(class);
            }
        }
        self.staged.clear_updates();
    }

    /// Enforces what a run left in `Cwnd` (when > 0) and `Rate` (when != 0) (libccp
    /// `state_machine`).
    fn enforce(&self, ops: &mut impl DatapathOps) {
        let cwnd = self.implicit(CWND);
        if cwnd > 0 {
            ops.set_cwnd(cwnd);
        }
        let rate = self.implicit(RATE);
        if rate != 0 {
            ops.set_rate_abs(rate);
        }
    }

    /// Runs the program's events once (libccp `state_machine` without enforcement and report):
    /// clears the three flags, sets `Micros`, then evaluates events in order until one fires
    /// without `(fallthrough)`. This is the interpreter, the reference for
    /// [`FlowState::run_compiled`].
    ///
    /// Errors: the execution errors of [`FlowState::invoke`].
    pub fn run(
        &mut self,
        prog: &Program,
        prims: &Primitives,
        now_us: u64,
        dp_time_zero_us: u64,
    ) -> Result<(), Error> {
        self.begin_run(prims, now_us, dp_time_zero_us);
        for ev in prog.events() {
            for i in prog.flat_range(ev.cond_start, ev.cond_len) {
                self.exec(i, now_us)?;
            }
            if self.implicit(EVENT_FLAG) != 0 {
                for i in prog.flat_range(ev.body_start, ev.body_len) {
                    self.exec(i, now_us)?;
                }
            }
            if self.implicit(EVENT_FLAG) != 0 && self.implicit(SHOULD_CONTINUE) == 0 {
                break;
            }
        }
        Ok(())
    }

    /// Runs the program once through its compiled form ([`Program::compiled`]), or through the
    /// interpreter ([`FlowState::run`]) when it has none: the same registers, flow time zero and
    /// result as [`FlowState::run`].
    ///
    /// Errors: the execution errors of [`FlowState::invoke`].
    pub fn run_compiled(
        &mut self,
        prog: &Program,
        prims: &Primitives,
        now_us: u64,
        dp_time_zero_us: u64,
    ) -> Result<(), Error> {
        let c = prog.compiled();
        if !c.ready() {
            return self.run(prog, prims, now_us, dp_time_zero_us);
        }
        self.begin_run(prims, now_us, dp_time_zero_us);
        let r = self.exec_steps(c.steps());
        // `Micros` reads `now - time zero` throughout a run: set so by `begin_run`, and every
        // write of `Micros` moves the time zero to keep it so (libccp `write_reg`).
        self.time_zero_us = now_us.wrapping_sub(self.implicit(MICROS));
        r
    }

    /// The start of a run: the three flags cleared, `Micros` and the primitives loaded.
    fn begin_run(&mut self, prims: &Primitives, now_us: u64, dp_time_zero_us: u64) {
        self.set_implicit(EVENT_FLAG, 0);
        self.set_implicit(SHOULD_CONTINUE, 0);
        self.set_implicit(SHOULD_REPORT, 0);
        self.set_implicit(MICROS, now_us.wrapping_sub(self.time_zero_us));
        self.regs
            .load_primitives(prims, now_us.wrapping_sub(dp_time_zero_us));
    }

    fn send_report(&self, sid: u32, prog: &Program, ops: &mut impl DatapathOps) -> ReportStatus {
        let fields = self.regs.report().get(..prog.num_report()).unwrap_or(&[]);
        let mut buf = [0u8; wire::MEASURE_FIXED_LEN + 8 * REPORT_REGS];
        match wire::write_measure(&mut buf, sid, prog.uid(), fields) {
            Ok(n) => match ops.send_msg(buf.get(..n).unwrap_or(&[])) {
                Ok(()) => ReportStatus::Sent,
                Err(_) => ReportStatus::SendFailed,
            },
            Err(_) => ReportStatus::SendFailed,
        }
    }

    /// Resets volatile Report and Control registers to their DEF defaults (libccp `reset_state`).
    fn reset_volatile(&mut self, prog: &Program) {
        for d in prog.defs() {
            if matches!(
                d.left.kind,
                RegKind::VolatileReport | RegKind::VolatileControl
            ) {
                self.store(d.left, d.def_value());
            }
        }
    }

    /// Sets non-volatile Report and Control registers to their DEF defaults (libccp
    /// `init_register_state`).
    fn init_nonvolatile(&mut self, prog: &Program) {
        for d in prog.defs() {
            if matches!(
                d.left.kind,
                RegKind::NonvolatileReport | RegKind::NonvolatileControl
            ) {
                self.store(d.left, d.def_value());
            }
        }
    }

    /// The value of implicit register `i` (0 if out of range).
    pub fn implicit(&self, i: usize) -> u64 {
        self.regs.implicit().get(i).copied().unwrap_or(0)
    }

    fn set_implicit(&mut self, i: usize, v: u64) {
        if i < IMPLICIT_REGS {
            self.regs.set(file::IMPLICIT.saturating_add(i), v);
        }
    }

    /// Plain store into a register file (no `Micros` side effect); ignores read-only kinds.
    fn store(&mut self, r: Reg, v: u64) {
        if !matches!(r.kind, RegKind::Immediate | RegKind::Primitive) {
            self.regs.set(r.slot(), v);
        }
    }

    /// Instruction result write (libccp `write_reg`): writing `Micros` moves the flow's time zero
    /// so that `Micros` reads `v` now. `ret` is a writable slot (install-time validation).
    fn write(&mut self, ret: u8, v: u64, now_us: u64) {
        let slot = usize::from(ret);
        if slot == file::IMPLICIT.saturating_add(MICROS) {
            self.time_zero_us = now_us.wrapping_sub(v);
        }
        self.regs.set(slot, v);
    }

    /// Executes one instruction (libccp `process_instruction`) at clock `now_us`.
    fn exec(&mut self, i: &FlatInstr, now_us: u64) -> Result<(), Error> {
        let a = self.regs.read(i.left);
        let b = self.regs.read(i.right);
        let cur = self.regs.get(usize::from(i.ret));
        if let Some(v) = alu(i.op, a, b, cur)? {
            self.write(i.ret, v, now_us);
        }
        Ok(())
    }

    /// Runs a compiled program's steps ([`Compiled`]): the same writes in the same order as
    /// the interpreter's events, except the `Micros` bookkeeping, which the caller does once.
    fn exec_steps(&mut self, steps: &[Step]) -> Result<(), Error> {
        let flag = file::IMPLICIT.saturating_add(EVENT_FLAG);
        let cont = file::IMPLICIT.saturating_add(SHOULD_CONTINUE);
        let mut pc = 0usize;
        while let Some(s) = steps.get(pc) {
            pc = pc.wrapping_add(1);
            let out = match s.kind {
                StepKind::Const => Some(s.constant()),
                StepKind::Copy => Some(self.regs.read(s.left())),
                StepKind::Add => self.step_op(Op::Add, s)?,
                StepKind::Sub => self.step_op(Op::Sub, s)?,
                StepKind::Mul => self.step_op(Op::Mul, s)?,
                StepKind::Div => self.step_op(Op::Div, s)?,
                StepKind::Equiv => self.step_op(Op::Equiv, s)?,
                StepKind::Gt => self.step_op(Op::Gt, s)?,
                StepKind::Lt => self.step_op(Op::Lt, s)?,
                StepKind::Max => self.step_op(Op::Max, s)?,
                StepKind::Min => self.step_op(Op::Min, s)?,
                StepKind::MaxWrap => self.step_op(Op::MaxWrap, s)?,
                StepKind::Ewma => self.step_op(Op::Ewma, s)?,
                StepKind::If => self.step_op(Op::If, s)?,
                StepKind::NotIf => self.step_op(Op::NotIf, s)?,
                StepKind::SkipUnlessFlag => {
                    if self.regs.get(flag) == 0 {
                        pc = pc.wrapping_add(s.skip());
                    }
                    None
                }
                StepKind::BreakUnlessContinue => {
                    if self.regs.get(flag) != 0 && self.regs.get(cont) == 0 {
                        break;
                    }
                    None
                }
            };
            if let Some(v) = out {
                self.regs.set(usize::from(s.ret), v);
                self.regs.set(usize::from(s.also), v);
            }
        }
        Ok(())
    }

    /// One operation of a compiled step; `op` is a constant at every call, so each arm of
    /// [`FlowState::exec_steps`] inlines its own operator.
    #[inline(always)]
    fn step_op(&self, op: Op, s: &Step) -> Result<Option<u64>, Error> {
        let a = self.regs.read(s.left());
        let b = self.regs.read(s.right());
        alu(op, a, b, self.regs.get(usize::from(s.ret)))
    }
}

/// The result of one operation (libccp `process_instruction`): `Some(v)` to write `v` to the
/// result register, `None` for no write (DEF, an `if`/`!if` whose condition fails). `cur` is the
/// result register's value (read by EWMA only). Shared by the interpreter, the compiled steps
/// and constant folding at install, so that the three agree on every operator.
///
/// Errors: [`Error::AddOverflow`], [`Error::SubUnderflow`], [`Error::MulOverflow`] (libccp's
/// check, which misses some overflows), [`Error::DivByZero`].
#[inline(always)]
pub(crate) fn alu(op: Op, a: u64, b: u64, cur: u64) -> Result<Option<u64>, Error> {
    Ok(match op {
        Op::Add => {
            let r = a.wrapping_add(b);
            if r < a {
                return Err(Error::AddOverflow);
            }
            Some(r)
        }
        Op::Bind => Some(b),
        Op::Def => None,
        Op::Div => Some(a.checked_div(b).ok_or(Error::DivByZero)?),
        Op::Equiv => Some(u64::from(a == b)),
        Op::Ewma => Some(ewma(a, cur, b)),
        Op::Gt => Some(u64::from(a > b)),
        Op::If => (a != 0).then_some(b),
        Op::Lt => Some(u64::from(a < b)),
        Op::Max => Some(a.max(b)),
        Op::MaxWrap => Some(max_wrap(a, b)),
        Op::Min => Some(a.min(b)),
        Op::Mul => {
            let r = a.wrapping_mul(b);
            // libccp's check, kept for identical results: it misses some overflows.
            if r < a && b > 0 {
                return Err(Error::MulOverflow);
            }
            Some(r)
        }
        Op::NotIf => (a == 0).then_some(b),
        Op::Sub => {
            let r = a.wrapping_sub(b);
            if r > a {
                return Err(Error::SubUnderflow);
            }
            Some(r)
        }
    })
}

/// libccp `myewma64(a, b, c)`: `a` = weight in tenths, `b` = current value, `c` = new sample.
/// Wrapping arithmetic, like the C code.
pub fn ewma(weight: u64, current: u64, sample: u64) -> u64 {
    if current == 0 {
        return sample;
    }
    let old = weight.wrapping_mul(current);
    let new = 10u64.wrapping_sub(weight).wrapping_mul(sample);
    old.wrapping_add(new).wrapping_div(10)
}

/// libccp `dif32`: distance walking from `left` to `right` on the 32-bit circle (the C code's
/// `(max32 - left) + right`, one short of the true distance when wrapping).
fn dif32(left: u32, right: u32) -> u32 {
    if right > left {
        right.wrapping_sub(left)
    } else {
        u32::MAX.wrapping_sub(left).wrapping_add(right)
    }
}

/// libccp `mymax64_wrap`: the later of two 32-bit wrapping values (0 means "unset").
pub fn max_wrap(a: u64, b: u64) -> u64 {
    if a == 0 {
        return b;
    }
    if b == 0 {
        return a;
    }
    let (a32, b32) = (a as u32, b as u32);
    if dif32(b32, a32) < dif32(a32, b32) {
        u64::from(a32)
    } else {
        u64::from(b32)
    }
}
