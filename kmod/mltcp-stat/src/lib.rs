// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `mltcp-stat`'s library part: the sock_diag dump ([`diag`]), the decoding of the kernel's
//! records ([`info`]) and the rows printed ([`report`]). The binary (`src/main.rs`) is the CLI.

pub mod diag;
pub mod info;
pub mod report;
