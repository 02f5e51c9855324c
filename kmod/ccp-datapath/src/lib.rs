//! The datapath side of CCP ("CCP: Congestion Control Plane", ccp-project): the wire format,
//! the program machine with libccp's semantics, and a fixed-capacity flow table.
//!
//! `no_std`, no allocation, no dependencies, no `unsafe`, integer-only, no panics: the same
//! files are compiled into the `tcp_mltcp` kernel module (as `#[path]` modules, so nothing here
//! names `crate::`) and tested in user space against portus 0.9 and libccp 1.2.
//!
//! - [`wire`]: parse every message (CREATE, MEASURE, INSTALL, UPDATE_FIELDS, CHANGE_PROG, READY)
//!   into borrowed views and serialise into caller buffers, exactly as portus 0.9 does; and this
//!   project's own SET_CLASS (a flow's traffic class, [`wire::SET_CLASS`]).
//! - [`program`]: validated programs and the program table (libccp `machine.c`, `ccp.c`), and
//!   the text checks of a program file ([`program_lines`], [`check_slot_program`]).
//! - [`machine`]: per-flow registers, staged updates and one invocation (libccp `ccp_invoke`).
//! - [`compiled`]: a program's compiled form, built at install and run per ACK instead of the
//!   interpreter (which stays as the reference, chosen by [`ExecMode`]).
//! - [`Datapath`]: the flow table and the entry points a host calls; the host implements
//!   [`DatapathOps`] (clock, send, `set_cwnd`, `set_rate_abs`, `set_class`).
//! - [`ShardedDatapath`]: the same over `SHARDS` flow tables, each behind its own lock (the host
//!   provides the locks through [`Shards`] and the program storage through [`ProgramStore`]),
//!   so that the per-ACK path and the agent's per-flow messages take only their flow's shard
//!   lock: what the kernel module uses.
//! - [`Error`] and [`Stats`]: every failure is typed and counted.
//!
//! Typical use (the kernel's): `init(now)`; `send_ready(id)` when an agent appears;
//! `flow_start(info)` for a new socket (keeps the returned socket id); `flow_invoke(sid, prims)`
//! on every ACK; `handle_msg(buf)` for every message from the agent (one message per call;
//! trailing padding is ignored); `flow_end(sid)` on release. Included into the kernel module
//! with `#[path = "ccp-datapath/src/lib.rs"] #[allow(unused_attributes)] mod ccp_datapath;`
//! (`#![no_std]` is a crate-level attribute and only warns inside a module).
//!
//! # Differences from libccp 1.2 and portus 0.9
//!
//! Identical results are checked by the differential tests for everything portus emits; the
//! differences are on inputs libccp mishandles, or deliberate:
//!
//! - Validation at INSTALL: register indices, event ranges, DEF operands and the instruction and
//!   event counts are checked (libccp reads and writes out of bounds, checks the counts before
//!   reading them, and loops forever on an event ending at instruction 256).
//! - Register files sized to what portus can serialise: 16 Report, 16 Control, 16 temporaries
//!   (libccp: 110, 110, but only 8 temporaries: it drops writes to temporaries 8..=15 and reads
//!   the local registers instead), 8 locals.
//! - UPDATE_FIELDS and CHANGE_PROG are all or nothing (libccp stages the updates before the bad
//!   one); the update count is read as u32 (libccp reads one signed byte); control indices are
//!   checked (libccp writes out of bounds). CHANGE_PROG to an unknown uid is an error (libccp
//!   logs it and returns a positive value).
//! - Replacing a uid replaces the program (libccp installs a duplicate and keeps using the old
//!   one); flows that ran a replaced or cleared program stop running it ([`Error::ProgramGone`]).
//!   INSTALL of uid 1 clears the table, as in libccp.
//! - Rates and windows are u64 up to the [`DatapathOps`] callbacks (libccp: u32).
//! - SET_CLASS ([`wire::SET_CLASS`], type `0x4d01`): a flow's traffic class (DSCP), staged
//!   like UPDATE_FIELDS and applied through [`DatapathOps::set_class`]; libccp refuses the type.
//! - `Micros` is in µs on the host's clock; writing `v` to it makes it read `v` now (libccp
//!   subtracts µs from its nanosecond clock; the same for `(:= Micros 0)`, all portus emits).
//! - No global fallback timer (libccp `fto_us`): the host decides liveness.
//! - Socket ids carry a slot generation in their upper 16 bits (libccp: slot + 1), so a message
//!   for a finished flow is rejected instead of reaching the next flow in its slot.
//! - Kept on purpose, for identical results: libccp's MUL overflow check (misses some overflows),
//!   its EWMA (wrapping, weight in tenths) and `wrapped_max` arithmetic, "infinity" as
//!   0xffff_ffff, `(fallthrough)` staying set for the rest of a run, Report fields counted from
//!   DEFs before the first other instruction.
//!
//! portus 0.9 itself: it can serialise CREATE only without an algorithm name (a name panics or
//! is refused; we write the name ourselves, NUL-padded, and portus parses it); its parser panics
//! on INSTALL/UPDATE_FIELDS (`unimplemented!`, the agent never receives them); it compiles
//! `(:= Cwnd (ewma ..))`, `(if ..)`, `(!if ..)` into implicit registers to an operand its own
//! INSTALL serialiser rejects with `unreachable!()`.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::arithmetic_side_effects,
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic
    )
)]

pub mod compiled;
pub mod datapath;
pub mod error;
pub mod machine;
pub mod program;
pub mod wire;

pub use self::compiled::{Compiled, ExecMode};
pub use self::datapath::{
    Datapath, DatapathOps, FlowInfo, FlowLoc, FlowTable, Handled, ProgramMaster, SendError,
    ShardedDatapath, Shards,
};
pub use self::error::{DropCause, Error, Stats};
pub use self::machine::{FlowState, Invoked, Primitives, Registers, ReportStatus};
pub use self::program::{
    build_program, check_slot_program, program_lines, InlineProgram, Instr, MissingField, Op,
    ProgRef, Program, ProgramStore, ProgramTable, Reg, RegKind, SLOT_PROGRAM_FIELDS,
};

/// Maximum events per program (libccp `MAX_EXPRESSIONS`).
pub const MAX_EVENTS: usize = 256;
/// Maximum instructions per program (libccp `MAX_INSTRUCTIONS`).
pub const MAX_INSTRS: usize = 256;
/// Report registers per flow. portus 0.9 refuses Report indices above 15
/// (`lang::serialize`), so 16 cover every program it emits (libccp has 110).
pub const REPORT_REGS: usize = 16;
/// Control registers per flow (portus limit 15, as for Report; libccp has 110).
pub const CONTROL_REGS: usize = 16;
/// Implicit registers: `__eventFlag, __shouldContinue, __shouldReport, Micros, Cwnd, Rate`.
pub const IMPLICIT_REGS: usize = 6;
/// Temporary registers per flow (portus limit 15; libccp has only 8, see the crate docs).
pub const TMP_REGS: usize = 16;
/// Local registers per flow (libccp `MAX_LOCAL_REG`; portus limit 5).
pub const LOCAL_REGS: usize = 8;
/// Number of primitives (`Ack.*` 0..=7, `Flow.*` 8..=14; libccp `ccp_priv.h`).
pub const NUM_PRIMITIVES: usize = 15;
/// Maximum updates in one UPDATE_FIELDS or CHANGE_PROG (libccp `MAX_MUTABLE_REG`).
pub const MAX_UPDATES: usize = 222;
/// Interval between CREATE retries of a flow, µs (libccp `CREATE_TIMEOUT_US`).
pub const CREATE_RETRY_US: u64 = 100_000;
/// Longest algorithm name a flow stores, bytes (the kernel's `TCP_CA_NAME_MAX`).
pub const FLOW_ALG_NAME_MAX: usize = 16;
