// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Runs N ACKs through one flow's installed program, for counting the instructions one ACK
//! costs under an instruction-counting tool (`ci/ack-instructions.sh` runs it under valgrind's
//! callgrind at two values of N and divides the difference, so that set-up cancels).
//!
//! Usage: `ack_instructions PROGRAM FORM ACKS`. The flows and ACKs are those of the criterion
//! benchmark `invoke` (`tests/common/per_ack.rs`).

use std::hint::black_box;
use std::process::ExitCode;

use ccp_datapath::ExecMode;
use clap::{Parser, ValueEnum};

#[path = "../tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;

use common::per_ack::{self, ACK_GAP_US};

/// The installed program.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum ProgramArg {
    /// ccp-test-agent's Reno, 10 ms report floor.
    Reno,
    /// ccp-agent's `datapath-programs/mlcc-slot.ccp`.
    MlccSlot,
}

/// How the datapath runs it.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum FormArg {
    /// The compiled form (the datapath's default).
    Compiled,
    /// The interpreter (libccp's semantics, the reference).
    Interpreted,
}

/// Runs ACKS ACKs through one flow running PROGRAM in FORM.
#[derive(Parser, Debug)]
struct Args {
    /// The program.
    #[arg(value_enum)]
    program: ProgramArg,
    /// The form it runs in.
    #[arg(value_enum)]
    form: FormArg,
    /// ACKs to run.
    acks: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let p = match args.program {
        ProgramArg::Reno => per_ack::reno(),
        ProgramArg::MlccSlot => per_ack::mlcc_slot(),
    };
    let mode = match args.form {
        FormArg::Compiled => ExecMode::Compiled,
        FormArg::Interpreted => ExecMode::Interpret,
    };
    let (mut dp, mut ops, sid) = per_ack::flow(&p, mode);
    let prims = per_ack::prims();
    for _ in 0..args.acks {
        ops.now += ACK_GAP_US;
        if let Err(e) = dp.flow_invoke(black_box(sid), black_box(&prims), &mut ops) {
            eprintln!("ack_instructions: the program failed: {e:?}");
            return ExitCode::FAILURE;
        }
    }
    println!(
        "{} {:?} acks {} reports {}",
        p.name, args.form, args.acks, ops.sent
    );
    ExitCode::SUCCESS
}
