// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! What a flow the policy holds back does on the wire: `[sched] held_flows` of ccp-agent,
//! `+held=NAME` of a testbed scenario.
//!
//! The policy serves some flows of a link in a slot and holds the others at the rate floor
//! ([`super::slot_rate_bps`]'s `min_rate_bps`). A held flow paced at the floor keeps the port
//! for the served flow, but it also idles the port at every hand-over: its next segment leaves
//! at the floor rate's spacing, and its window must grow again once the agent raises its rate.
//! A scavenger instead sends whatever the served flows leave unused and yields as soon as they
//! queue: the lower-than-best-effort congestion control LEDBAT (RFC 6817), run by the datapath
//! program on the flow's queueing delay, with the agent's target.

use serde::{Deserialize, Serialize};

/// How a flow held at the rate floor is enforced (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldFlows {
    /// Paced at the rate floor, its window under the floor's ceiling.
    #[default]
    Floor,
    /// Unthrottled, its window set by LEDBAT (RFC 6817, Sec. 2.4.2) in the datapath program:
    /// it grows while the flow's queueing delay is below the target and shrinks above it.
    Scavenger,
}

impl HeldFlows {
    /// Every mode, in the order their names are listed to users.
    pub const ALL: [HeldFlows; 2] = [HeldFlows::Floor, HeldFlows::Scavenger];

    /// The mode's name, as agent.toml's `[sched] held_flows` and the serde form spell it.
    pub fn name(self) -> &'static str {
        match self {
            HeldFlows::Floor => "floor",
            HeldFlows::Scavenger => "scavenger",
        }
    }
}

impl std::str::FromStr for HeldFlows {
    type Err = String;

    /// Parses a [`HeldFlows::name`]; the error lists the known names, quoted.
    fn from_str(s: &str) -> Result<Self, String> {
        super::by_name(&HeldFlows::ALL, HeldFlows::name, s)
    }
}

/// The largest scavenger target queueing delay, µs: 100 ms, RFC 6817's upper bound on TARGET
/// (Sec. 2.5.1). The agent's `[sched] scavenger_target_us` and a scenario's `+scavenger_us=N`
/// take 1..=this.
pub const MAX_SCAVENGER_TARGET_US: u32 = 100_000;

/// Whether a flow whose slot rate is `rate_bps` (from [`super::slot_rate_bps`]) is held: the
/// policy gave it no more than the floor `min_rate_bps`.
pub fn is_held(rate_bps: u64, min_rate_bps: u64) -> bool {
    rate_bps <= min_rate_bps
}

#[cfg(test)]
mod tests {
    use super::{is_held, HeldFlows};

    #[test]
    fn names_round_trip_and_unknown_names_are_listed() {
        for m in HeldFlows::ALL {
            assert_eq!(m.name().parse::<HeldFlows>(), Ok(m));
        }
        let e = "ledbat".parse::<HeldFlows>().unwrap_err();
        assert_eq!(e, "must be one of \"floor\", \"scavenger\"");
        assert_eq!(HeldFlows::default(), HeldFlows::Floor);
    }

    #[test]
    fn a_flow_at_the_floor_is_held_and_one_above_it_is_served() {
        assert!(is_held(5_000_000, 5_000_000));
        assert!(is_held(1, 5_000_000));
        assert!(!is_held(5_000_001, 5_000_000));
    }
}
