// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The simulator's error type: every refusal names the value at fault.

use std::fmt;

/// Why the simulator refused its input or could not go on.
#[derive(Clone, Debug, PartialEq)]
pub enum SimError {
    /// A bad configuration value (the message names the parameter and the value).
    Config(String),
    /// A bad line of a trace file (file, line, what).
    Trace(String),
    /// A job that can never be placed (more GPUs than the cluster has).
    Unplaceable(String),
    /// A refusal of the scheduling library, with the context it happened in.
    Sched(String),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Config(m)
            | SimError::Trace(m)
            | SimError::Unplaceable(m)
            | SimError::Sched(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for SimError {}
