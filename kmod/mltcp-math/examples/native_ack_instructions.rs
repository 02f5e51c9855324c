// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Runs N ACKs through a native window update, for counting the instructions one ACK costs
//! under an instruction-counting tool: the native side of `ci/ack-instructions.sh`, which runs
//! it under valgrind's callgrind at two values of N and divides the difference.
//!
//! Usage: `native_ack_instructions PATH ACKS`, PATH one of (`--help` lists them)
//! - `reno`: [`reno::cong_avoid`] in congestion avoidance on a window-limited flow (what
//!   the kernel's `tcp_reno_cong_avoid` does per ACK; on a flow that is not window-limited it
//!   returns at its first test);
//! - `mltcp`: MLTCP's Reno per ACK, [`Iteration::scale_fx`] (bytes_ratio and F) and
//!   [`reno::mltcp_cong_avoid`].
//!
//! The window and iteration are those of the criterion benchmark `per_ack`
//! (`tests/common/per_ack_state.rs`).

use std::hint::black_box;

use clap::{Parser, ValueEnum};
use mltcp_math::fixed::FX_ONE;
use mltcp_math::params::Params;
use mltcp_math::reno;

#[path = "../tests/common/per_ack_state.rs"]
mod per_ack_state;
use per_ack_state::{ca_window, iteration};

/// The window update.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum PathArg {
    /// Native Reno's `cong_avoid`.
    Reno,
    /// MLTCP's Reno: `scale_fx` and `mltcp_cong_avoid`.
    Mltcp,
}

/// Runs ACKS ACKs through PATH.
#[derive(Parser, Debug)]
struct Args {
    /// The window update.
    #[arg(value_enum)]
    path: PathArg,
    /// ACKs to run.
    acks: u64,
}

fn main() {
    let Args { path, acks } = Args::parse();
    let mut w = ca_window();
    let it = iteration();
    let p = Params::DEFAULT;
    let mut bytes_acked = 1u64 << 30;
    match path {
        PathArg::Reno => {
            for _ in 0..acks {
                reno::cong_avoid(black_box(&mut w), black_box(1), black_box(true));
            }
        }
        PathArg::Mltcp => {
            for _ in 0..acks {
                bytes_acked += 1448;
                let f = black_box(&it).scale_fx(&p, black_box(bytes_acked));
                reno::mltcp_cong_avoid(black_box(&mut w), black_box(1), black_box(true), f, FX_ONE);
            }
        }
    }
    println!("{path:?} acks {acks} cwnd {}", w.cwnd);
}
