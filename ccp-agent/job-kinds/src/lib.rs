// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! A DNN training job's communication paradigm ([`Paradigm`]) and a process's role in its job
//! ([`Role`]): one definition for the progress interface's shared layout (their `u32` wire values,
//! `mltcp_progress::layout`), the testbed's scenario files and the simulator's trace files (their
//! serde names, with the `serde` feature), and the agent.
//!
//! Both carry an `Unknown` variant, the wire's "not told (yet)" (value 0). Files never name it:
//! it is skipped by serde, so `paradigm = "unknown"` is an unknown variant; code that needs a
//! known paradigm asks [`Paradigm::known`].
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// Communication paradigm of a job.
///
/// Serde names (scenario and trace files): `ring`, `ps` (also accepted: `parameter_server`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[repr(u32)]
pub enum Paradigm {
    /// Not told (yet): the wire's 0. Never read from or written to a file.
    #[cfg_attr(feature = "serde", serde(skip))]
    Unknown = 0,
    /// Ring all-reduce: each process sends to its successor and receives from its predecessor.
    #[cfg_attr(feature = "serde", serde(rename = "ring"))]
    Ring = 1,
    /// Parameter server: workers push (aggregation) to and pull (broadcast) from servers.
    #[cfg_attr(feature = "serde", serde(rename = "ps", alias = "parameter_server"))]
    ParameterServer = 2,
}

impl Paradigm {
    /// The paradigm of a raw field value, if this version defines it.
    pub fn from_raw(v: u32) -> Option<Self> {
        match v {
            0 => Some(Self::Unknown),
            1 => Some(Self::Ring),
            2 => Some(Self::ParameterServer),
            _ => None,
        }
    }

    /// `self` unless it is [`Paradigm::Unknown`]: what a job that has flows must have.
    pub fn known(self) -> Option<Self> {
        (self != Self::Unknown).then_some(self)
    }

    /// The name files use (`ring`, `ps`), `unknown` for [`Paradigm::Unknown`].
    pub fn name(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Ring => "ring",
            Self::ParameterServer => "ps",
        }
    }
}

/// This process's role in its job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[repr(u32)]
pub enum Role {
    /// Not told (yet): the wire's 0. Never read from or written to a file.
    #[cfg_attr(feature = "serde", serde(skip))]
    Unknown = 0,
    /// A worker (ring member, or parameter-server client).
    Worker = 1,
    /// A parameter server.
    ParameterServer = 2,
}

impl Role {
    /// The role of a raw field value, if this version defines it.
    pub fn from_raw(v: u32) -> Option<Self> {
        match v {
            0 => Some(Self::Unknown),
            1 => Some(Self::Worker),
            2 => Some(Self::ParameterServer),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_values_round_trip() {
        for p in [Paradigm::Unknown, Paradigm::Ring, Paradigm::ParameterServer] {
            assert_eq!(Paradigm::from_raw(p as u32), Some(p));
        }
        for r in [Role::Unknown, Role::Worker, Role::ParameterServer] {
            assert_eq!(Role::from_raw(r as u32), Some(r));
        }
        assert_eq!(Paradigm::from_raw(3), None);
        assert_eq!(Role::from_raw(3), None);
    }

    #[cfg(feature = "serde")]
    #[test]
    fn file_names_parse_and_unknown_is_refused() {
        #[derive(serde::Deserialize, serde::Serialize)]
        struct J {
            paradigm: Paradigm,
        }
        let p = |s: &str| toml::from_str::<J>(&format!("paradigm = \"{s}\"")).map(|j| j.paradigm);
        assert_eq!(p("ring").unwrap(), Paradigm::Ring);
        assert_eq!(p("ps").unwrap(), Paradigm::ParameterServer);
        assert_eq!(p("parameter_server").unwrap(), Paradigm::ParameterServer);
        assert!(p("unknown").is_err());
        let s = toml::to_string(&J {
            paradigm: Paradigm::ParameterServer,
        })
        .unwrap();
        assert_eq!(s.trim(), "paradigm = \"ps\"");
        assert_eq!(Paradigm::ParameterServer.name(), "ps");
    }
}
