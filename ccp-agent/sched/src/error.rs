// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The one error type of the library. Every variant names the value that was refused, so a
//! caller (the agent, the switch daemon, the simulator) can log it and go on with other flows.

use std::fmt;

use crate::table::{FlowId, LinkId};

/// Why an operation of this library refused its input. Nothing in the library panics on bad
/// input; it returns one of these instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchedError {
    /// A slot length of zero microseconds.
    InvalidSlotLength {
        /// The refused slot length.
        slot_us: u64,
    },
    /// A horizon of zero slots, or more than [`crate::slot::MAX_HORIZON`].
    InvalidHorizon {
        /// The refused horizon.
        horizon: usize,
        /// The largest horizon accepted.
        max: usize,
    },
    /// A link capacity of zero.
    InvalidCapacity {
        /// The link.
        link: LinkId,
        /// The refused capacity.
        capacity_bps: u64,
    },
    /// A link that the load table does not know.
    UnknownLink(LinkId),
    /// A flow that the load table does not know.
    UnknownFlow(FlowId),
    /// A path without any link.
    EmptyPath,
    /// A path that lists the same link twice (its load would be counted twice).
    DuplicateLinkInPath(LinkId),
    /// A link that cannot be removed because a flow's path still uses it.
    LinkInUse {
        /// The link.
        link: LinkId,
        /// One flow whose path uses it.
        flow: FlowId,
    },
    /// A slot before the table's current slot.
    SlotInPast {
        /// The refused slot.
        slot: u64,
        /// The table's current slot.
        current_slot: u64,
    },
    /// A rate sample for a slot outside the estimation window (the past
    /// [`crate::slot::RATE_WINDOW_SLOTS`] slots).
    SampleOutOfWindow {
        /// The refused slot.
        slot: u64,
        /// The table's current slot.
        current_slot: u64,
    },
    /// Per-slot arrays of the wrong length.
    LengthMismatch {
        /// Which array.
        what: &'static str,
        /// The length expected (the horizon).
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A per-member array of a coflow group whose length is not the group's member count.
    MemberCountMismatch {
        /// Which array.
        what: &'static str,
        /// The group's member count.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A number too large for the arithmetic (named by `what`).
    Overflow {
        /// What overflowed.
        what: &'static str,
    },
    /// A Cassini job description that cannot be laid on a circle.
    InvalidJob {
        /// Index of the job in the input.
        index: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A numeric parameter outside its range (named by `name`).
    InvalidParameter {
        /// The parameter's name, with its unit.
        name: &'static str,
        /// The refused value.
        value: u64,
    },
    /// A policy snapshot for another slot than the load table's current one.
    SlotMismatch {
        /// The snapshot's slot.
        slot: u64,
        /// The table's current slot.
        current_slot: u64,
    },
    /// A flow listed twice in one policy snapshot.
    DuplicateFlow(FlowId),
    /// A PCN threshold of zero packets.
    InvalidThreshold {
        /// The refused threshold.
        threshold_pkts: u32,
    },
}

impl fmt::Display for SchedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidSlotLength { slot_us } => {
                write!(f, "slot length slot_us = {slot_us} must be at least 1")
            }
            Self::InvalidHorizon { horizon, max } => {
                write!(f, "horizon = {horizon} slots must be in 1..={max}")
            }
            Self::InvalidCapacity { link, capacity_bps } => {
                write!(f, "link {} capacity_bps = {capacity_bps} must be at least 1", link.0)
            }
            Self::UnknownLink(l) => write!(f, "unknown link {}", l.0),
            Self::UnknownFlow(fl) => write!(f, "unknown flow {}", fl.0),
            Self::SlotMismatch { slot, current_slot } => write!(
                f,
                "snapshot slot = {slot} is not the load table's current slot {current_slot}"
            ),
            Self::DuplicateFlow(fl) => write!(f, "flow {} listed twice in one snapshot", fl.0),
            Self::EmptyPath => write!(f, "empty path: a flow crosses at least one link"),
            Self::DuplicateLinkInPath(l) => write!(f, "link {} listed twice in one path", l.0),
            Self::LinkInUse { link, flow } => {
                write!(f, "link {} is still on the path of flow {}", link.0, flow.0)
            }
            Self::SlotInPast { slot, current_slot } => {
                write!(f, "slot {slot} is before the current slot {current_slot}")
            }
            Self::SampleOutOfWindow { slot, current_slot } => write!(
                f,
                "rate sample for slot {slot} is outside the past {} slots before slot {current_slot}",
                crate::slot::RATE_WINDOW_SLOTS
            ),
            Self::LengthMismatch { what, expected, got } => {
                write!(f, "{what} has {got} slots, expected {expected}")
            }
            Self::MemberCountMismatch { what, expected, got } => {
                write!(f, "{what} has {got} entries, expected one per group member ({expected})")
            }
            Self::Overflow { what } => write!(f, "{what} overflows"),
            Self::InvalidJob { index, reason } => write!(f, "job {index}: {reason}"),
            Self::InvalidParameter { name, value } => write!(f, "{name} = {value} is out of range"),
            Self::InvalidThreshold { threshold_pkts } => {
                write!(f, "PCN threshold threshold_pkts = {threshold_pkts} must be at least 1")
            }
        }
    }
}

impl std::error::Error for SchedError {}
