//! Errors of the CCP datapath core and the counters that record them.
//!
//! One flat, `Copy` error enum covers the wire format, program installation, flow bookkeeping and
//! program execution, so that the kernel can count every kind in one array (`Stats`) and print
//! them by name. The libccp counterparts (`ccp_error.h`, `LIBCCP_*`) are named in each doc.

use core::fmt;

/// Everything that can go wrong in the datapath core.
///
/// Every public function of this crate that can fail returns one of these; the [`super::Datapath`]
/// methods also count it in [`Stats`]. The discriminant (`as usize`) indexes [`Stats::errors`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Error {
    // ---- wire format (libccp serialize.c, portus src/serialize) ----
    /// The buffer is shorter than the 8-byte CCP header, or than the fixed part of the message.
    Truncated = 0,
    /// The header's `len` is below 8 or above the buffer's length (libccp
    /// `LIBCCP_BUFSIZE_TOO_SMALL`; portus "nonsensical len in header").
    BadLength,
    /// The header's `len` disagrees with the counts inside the message body.
    LengthMismatch,
    /// The header's message type is not one of CREATE..READY or SET_CLASS (libccp
    /// `LIBCCP_READ_INVALID_HEADER_TYPE`).
    UnknownType,
    /// A well-formed message that the datapath does not accept (CREATE, MEASURE, READY sent to
    /// the datapath; libccp `read_header` rejects them too).
    UnexpectedMsg,
    /// INSTALL with more events than [`super::MAX_EVENTS`] (libccp `LIBCCP_INSTALL_TOO_MANY_EXPR`).
    TooManyEvents,
    /// INSTALL with more instructions than [`super::MAX_INSTRS`] (libccp
    /// `LIBCCP_INSTALL_TOO_MANY_INSTR`).
    TooManyInstrs,
    /// UPDATE_FIELDS / CHANGE_PROG with more than [`super::MAX_UPDATES`] updates (libccp
    /// `LIBCCP_UPDATE_TOO_MANY`, `LIBCCP_CHANGE_TOO_MANY`).
    TooManyUpdates,
    /// The output buffer of a serialiser is too small (libccp `LIBCCP_BUFSIZE_TOO_SMALL`).
    BufferTooSmall,
    /// A message to serialise would not fit the header's 16-bit length.
    MsgTooLong,
    /// An algorithm name longer than the CREATE message (63 bytes + NUL) or the per-flow store
    /// ([`super::FLOW_ALG_NAME_MAX`]) allows.
    AlgNameTooLong,

    // ---- program installation (libccp machine.c read_instruction, ccp.c datapath_program_install) ----
    /// An opcode >= 15 (libccp `LIBCCP_READ_INVALID_OP`).
    BadOpcode,
    /// A register type byte that is not 0..=8 (libccp `LIBCCP_READ_INVALID_*_REG`).
    BadRegType,
    /// An immediate or primitive register as an instruction's result (libccp
    /// `LIBCCP_READ_REG_NOT_ALLOWED`).
    BadResultReg,
    /// A register index beyond its register file (libccp does not check; it reads out of bounds).
    RegIndexOutOfRange,
    /// An event whose condition or body lies outside the program's instructions (libccp does not
    /// check).
    EventOutOfRange,
    /// A program that reports more fields than [`super::REPORT_REGS`].
    TooManyReportFields,
    /// A DEF instruction whose default value is not an immediate.
    DefNotImmediate,
    /// No free slot in the program table (libccp `LIBCCP_PROG_TABLE_FULL`).
    ProgramTableFull,

    // ---- flows and updates (libccp ccp.c ccp_read_msg, stage_update) ----
    /// A message or call names a socket id that is not a live flow (libccp
    /// `LIBCCP_UNKNOWN_CONNECTION`).
    UnknownFlow,
    /// No free slot in the flow table (libccp `ccp_connection_start` returns NULL).
    FlowTableFull,
    /// CHANGE_PROG names a program uid that is not installed (libccp logs and ignores it).
    ProgramNotFound,
    /// The flow's program was replaced or cleared by a later INSTALL; the flow runs no program
    /// until the agent sends CHANGE_PROG again.
    ProgramGone,
    /// An update names a register type other than control or implicit (libccp
    /// `LIBCCP_UPDATE_INVALID_REG_TYPE`).
    BadUpdateReg,
    /// An update names a control register index beyond [`super::CONTROL_REGS`] (libccp writes
    /// out of bounds).
    UpdateIndexOutOfRange,

    // ---- execution (libccp machine.c process_instruction) ----
    /// ADD overflowed (libccp `LIBCCP_ADD_INT_OVERFLOW`).
    AddOverflow,
    /// SUB underflowed (libccp `LIBCCP_SUB_INT_UNDERFLOW`).
    SubUnderflow,
    /// MUL overflow as libccp detects it (libccp `LIBCCP_MUL_INT_OVERFLOW`).
    MulOverflow,
    /// DIV by zero (libccp `LIBCCP_DIV_BY_ZERO`).
    DivByZero,

    // ---- I/O ----
    /// [`super::DatapathOps::send_msg`] failed (no agent listening, buffer full).
    SendFailed,
    /// The host had no memory for a program an INSTALL carried ([`super::ProgramStore::build`]).
    AllocFailed,

    // ---- this project's extension messages (wire.rs SET_CLASS) ----
    /// SET_CLASS with a class byte that is neither a DSCP (0..=63, RFC 2474 §3) nor the release
    /// marker, or with a reserved byte that is not 0 (see [`super::wire::SET_CLASS`]).
    BadClass,
}

impl Error {
    /// Number of error kinds: the length of [`Stats::errors`].
    pub const COUNT: usize = Error::BadClass as usize + 1;

    /// Every error kind, in discriminant order (for printing all counters).
    pub const ALL: [Error; Error::COUNT] = [
        Error::Truncated,
        Error::BadLength,
        Error::LengthMismatch,
        Error::UnknownType,
        Error::UnexpectedMsg,
        Error::TooManyEvents,
        Error::TooManyInstrs,
        Error::TooManyUpdates,
        Error::BufferTooSmall,
        Error::MsgTooLong,
        Error::AlgNameTooLong,
        Error::BadOpcode,
        Error::BadRegType,
        Error::BadResultReg,
        Error::RegIndexOutOfRange,
        Error::EventOutOfRange,
        Error::TooManyReportFields,
        Error::DefNotImmediate,
        Error::ProgramTableFull,
        Error::UnknownFlow,
        Error::FlowTableFull,
        Error::ProgramNotFound,
        Error::ProgramGone,
        Error::BadUpdateReg,
        Error::UpdateIndexOutOfRange,
        Error::AddOverflow,
        Error::SubUnderflow,
        Error::MulOverflow,
        Error::DivByZero,
        Error::SendFailed,
        Error::AllocFailed,
        Error::BadClass,
    ];

    /// A short snake_case name, stable, for logs and counters.
    pub const fn name(self) -> &'static str {
        match self {
            Error::Truncated => "truncated",
            Error::BadLength => "bad_length",
            Error::LengthMismatch => "length_mismatch",
            Error::UnknownType => "unknown_type",
            Error::UnexpectedMsg => "unexpected_msg",
            Error::TooManyEvents => "too_many_events",
            Error::TooManyInstrs => "too_many_instrs",
            Error::TooManyUpdates => "too_many_updates",
            Error::BufferTooSmall => "buffer_too_small",
            Error::MsgTooLong => "msg_too_long",
            Error::AlgNameTooLong => "alg_name_too_long",
            Error::BadOpcode => "bad_opcode",
            Error::BadRegType => "bad_reg_type",
            Error::BadResultReg => "bad_result_reg",
            Error::RegIndexOutOfRange => "reg_index_out_of_range",
            Error::EventOutOfRange => "event_out_of_range",
            Error::TooManyReportFields => "too_many_report_fields",
            Error::DefNotImmediate => "def_not_immediate",
            Error::ProgramTableFull => "program_table_full",
            Error::UnknownFlow => "unknown_flow",
            Error::FlowTableFull => "flow_table_full",
            Error::ProgramNotFound => "program_not_found",
            Error::ProgramGone => "program_gone",
            Error::BadUpdateReg => "bad_update_reg",
            Error::UpdateIndexOutOfRange => "update_index_out_of_range",
            Error::AddOverflow => "add_overflow",
            Error::SubUnderflow => "sub_underflow",
            Error::MulOverflow => "mul_overflow",
            Error::DivByZero => "div_by_zero",
            Error::SendFailed => "send_failed",
            Error::AllocFailed => "alloc_failed",
            Error::BadClass => "bad_class",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl core::error::Error for Error {}

/// Why [`super::Datapath::handle_msg`] dropped a message from the agent, for a host that counts
/// and logs the two apart ([`super::Datapath::drop_cause`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropCause {
    /// A well-formed UPDATE_FIELDS or CHANGE_PROG for a flow that has ended (its slot is free or
    /// holds a later flow). Normal under connection churn: the agent answers reports of flows
    /// that close before its answer arrives.
    Late,
    /// Anything else: a malformed message, one the datapath does not accept, or one naming a
    /// socket id the datapath never handed out.
    Malformed,
}

/// Counters kept by [`super::Datapath`]: one per [`Error`] kind plus a few event counters.
///
/// All counters wrap (they never panic); the all-zero value is the initial state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Errors by kind, indexed by `Error as usize` (see [`Error::ALL`]).
    pub errors: [u64; Error::COUNT],
    /// Messages from the agent handled successfully.
    pub msgs_handled: u64,
    /// Programs installed (INSTALL accepted).
    pub programs_installed: u64,
    /// MEASURE reports sent (not counting the closing MEASURE of a flow).
    pub reports_sent: u64,
    /// Flows started.
    pub flows_started: u64,
    /// Flows ended ([`super::Datapath::flow_end`] of a live flow); `flows_started - flows_ended`
    /// flows are live.
    pub flows_ended: u64,
    /// Program invocations (calls of [`super::Datapath::flow_invoke`] on a live flow).
    pub invocations: u64,
}

impl Stats {
    /// All counters at zero.
    pub const fn new() -> Self {
        Stats {
            errors: [0; Error::COUNT],
            msgs_handled: 0,
            programs_installed: 0,
            reports_sent: 0,
            flows_started: 0,
            flows_ended: 0,
            invocations: 0,
        }
    }

    /// Counts one occurrence of `e`.
    pub fn record(&mut self, e: Error) {
        if let Some(c) = self.errors.get_mut(e as usize) {
            *c = c.wrapping_add(1);
        }
    }

    /// How many times `e` was counted.
    pub fn count(&self, e: Error) -> u64 {
        self.errors.get(e as usize).copied().unwrap_or(0)
    }

    /// Adds every counter of `other` to this one's (wrapping): the sum over the shards of a
    /// [`super::ShardedDatapath`].
    pub fn add(&mut self, other: &Stats) {
        for (a, b) in self.errors.iter_mut().zip(other.errors.iter()) {
            *a = a.wrapping_add(*b);
        }
        self.msgs_handled = self.msgs_handled.wrapping_add(other.msgs_handled);
        self.programs_installed = self
            .programs_installed
            .wrapping_add(other.programs_installed);
        self.reports_sent = self.reports_sent.wrapping_add(other.reports_sent);
        self.flows_started = self.flows_started.wrapping_add(other.flows_started);
        self.flows_ended = self.flows_ended.wrapping_add(other.flows_ended);
        self.invocations = self.invocations.wrapping_add(other.invocations);
    }

    /// Sum of all error counters.
    pub fn total_errors(&self) -> u64 {
        self.errors.iter().fold(0u64, |a, &c| a.wrapping_add(c))
    }
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}
