// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Runs N ACKs through one flow's installed program, for counting the instructions one ACK
//! costs under an instruction-counting tool (`ci/ack-instructions.sh` runs it under valgrind's
//! callgrind at two values of N and divides the difference, so that set-up cancels).
//!
//! Usage: `ack_instructions PROGRAM MODE ACKS`, PROGRAM `reno` or `mlcc-slot`, MODE `compiled`
//! or `interpreted`. The flows and ACKs are those of the criterion benchmark `invoke`
//! (`tests/common/per_ack.rs`).

use std::hint::black_box;
use std::process::ExitCode;

use ccp_datapath::ExecMode;

#[path = "../tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;

use common::per_ack::{self, ACK_GAP_US};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [program, mode, acks] = args.as_slice() else {
        eprintln!("usage: ack_instructions reno|mlcc-slot compiled|interpreted ACKS");
        return ExitCode::from(2);
    };
    let p = match program.as_str() {
        "reno" => per_ack::reno(),
        "mlcc-slot" => per_ack::mlcc_slot(),
        other => {
            eprintln!("ack_instructions: unknown PROGRAM {other:?} (reno, mlcc-slot)");
            return ExitCode::from(2);
        }
    };
    let mode = match mode.as_str() {
        "compiled" => ExecMode::Compiled,
        "interpreted" => ExecMode::Interpret,
        other => {
            eprintln!("ack_instructions: unknown MODE {other:?} (compiled, interpreted)");
            return ExitCode::from(2);
        }
    };
    let Ok(acks) = acks.parse::<u64>() else {
        eprintln!("ack_instructions: ACKS {acks:?} is not a count");
        return ExitCode::from(2);
    };
    let (mut dp, mut ops, sid) = per_ack::flow(&p, mode);
    let prims = per_ack::prims();
    for _ in 0..acks {
        ops.now += ACK_GAP_US;
        if let Err(e) = dp.flow_invoke(black_box(sid), black_box(&prims), &mut ops) {
            eprintln!("ack_instructions: the program failed: {e:?}");
            return ExitCode::FAILURE;
        }
    }
    println!("{} {} acks {acks} reports {}", p.name, args[1], ops.sent);
    ExitCode::SUCCESS
}
