// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The scenario files of the VM testbed, read by both of their users: `trainemu` (the traffic
//! emulator that runs a scenario on real TCP sockets in the VM) and `mlcc-sim` (the fluid
//! simulator, which runs the same jobs on the same star topology so that the two can be compared
//! one to one). One definition of the format, its validation and its seeded draws, so the two
//! cannot disagree about what a scenario means.
//!
//! - [`config`]: the TOML types ([`config::Scenario`], hosts, jobs, congestion-control labels),
//!   validation with errors that name the file, field and value, and [`config::JobPlan`], a job
//!   resolved against the model profiles (gradient bytes, compute time, start offset).
//! - [`seeds`]: every random choice of a run (per-iteration compute time, per-seed start offset),
//!   drawn from ChaCha8 streams keyed by (seed, job, worker), so runs are paired across ccs.
#![forbid(unsafe_code)]

pub mod config;
pub mod seeds;
