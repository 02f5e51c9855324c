// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! MLTCP congestion-control math: the pure, deterministic part of `tcp_mltcp.ko`.
//!
//! MLTCP (Rajasekaran, *Cassini/MLTCP* MIT thesis, ch. 1 and 5; HotNets '24) scales the
//! congestion-avoidance window increase of a TCP flow that carries DNN-training traffic by
//! `F(bytes_ratio) = slope * bytes_ratio + intercept`, where `bytes_ratio` is the share of the
//! current training iteration's bytes that has already been ACKed. The flow that is further into
//! its iteration grabs more bandwidth, so the communication phases of competing jobs slide apart
//! until they interleave.
//!
//! Modules:
//! - [`fixed`]: the fixed-point convention (`FX_ONE` = 1.0 = 1024, as tcp_cubic.c scales beta);
//! - [`params`]: the tunables (slope, intercept, idle gap, EWMA weight) and their validators;
//! - [`info`]: the 20-byte MLTCP info block of `get_info` (layout, encoder, decoder);
//! - [`iteration`]: per-socket training-iteration tracking, `bytes_ratio` and `F`;
//! - [`reno`]: `net/ipv4/tcp_cong.c` (slow start, AIMD) and MLTCP-Reno;
//! - [`cubic`]: `net/ipv4/tcp_cubic.c` (CUBIC + HyStart) and MLTCP-CUBIC;
//! - [`dctcp`]: `net/ipv4/tcp_dctcp.c` (ECN-fraction window reduction) for MLTCP-DCTCP;
//! - [`mltcp`]: the per-socket private data of the three algorithms and MLTCP-DCTCP's ops;
//! - `c_header` (user space only): the C header of these constants for the BPF struct_ops
//!   programs of `kmod/mltcp-bpf`;
//! - [`wrapper`]: the pure part of the module's generic MLTCP wrapper (CCP socket id, when the
//!   CCP datapath runs, when `get_info` answers).
//!
//! Rules this code keeps, because the same files are compiled into the kernel module with
//! `#[path = "mltcp-math/src/lib.rs"] mod mltcp_math;`: no dependencies, no allocation, no
//! floating point, no 128-bit integers, no `crate::` paths, and nothing that can panic (the
//! kernel is built with overflow checks; a panic in softirq is a kernel BUG). Every arithmetic
//! operation is explicitly wrapping, saturating or checked, and the lints below enforce it.
// In the kernel, Kbuild already makes the module crate `no_std` and sets `CONFIG_RUST`; a
// `#![no_std]` inside a module would only earn an `unused_attributes` warning there.
#![cfg_attr(not(CONFIG_RUST), no_std)]
#![cfg_attr(
    not(test),
    deny(
        clippy::arithmetic_side_effects,
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::float_arithmetic,
    )
)]
#![deny(missing_docs)]

// Not in the kernel module: the C header of the BPF programs is generated in user space only.
#[cfg(not(CONFIG_RUST))]
pub mod c_header;
pub mod cubic;
pub mod dctcp;
pub mod fixed;
pub mod info;
pub mod iteration;
pub mod mltcp;
pub mod params;
pub mod reno;
pub mod wrapper;
