// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The flow state of the per-ACK measurements, shared by the criterion benchmark `per_ack` and
//! the instruction counter `examples/native_ack_instructions.rs` (through `#[path]`), so that both
//! measure the same update.

use mltcp_math::iteration::Iteration;
use mltcp_math::reno::Window;

/// A window-limited flow in congestion avoidance: 5000 segments, ssthresh 100.
pub fn ca_window() -> Window {
    Window {
        cwnd: 5000,
        cwnd_cnt: 0,
        ssthresh: 100,
        cwnd_clamp: u32::MAX,
    }
}

/// An iteration in progress: 64 MiB per iteration, 1 GiB acknowledged at its start.
pub fn iteration() -> Iteration {
    Iteration {
        start_bytes_acked: 1 << 30,
        est_bytes: 64 << 20,
        ewma_bytes: 64 << 20,
        iterations: 10,
        flags: 2,
    }
}
