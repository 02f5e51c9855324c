// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Slot arithmetic: the wall-clock time slots every agent and switch agrees on, and the
//! conversions between a rate held for one slot and the bytes it carries.
//!
//! "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers" (Sec. III, IV-A) runs
//! every scheduler in time slots (60 ms there) and plans over the next K slots (K = 10). Here a
//! slot is `slot_us` microseconds long and aligned to multiples of its length on the wall clock:
//! the slot number of time `t_us` (microseconds since the Unix epoch, or any epoch the parties
//! share) is `floor(t_us / slot_us)`, so hosts with synchronised clocks agree on slot numbers
//! without talking to each other.

use serde::{Deserialize, Serialize};

use crate::error::SchedError;

/// The paper's slot length: 60 ms, its testbed's (Sec. VI). The simulator's default
/// (`mlcc-sim --slot-ms`): its cluster-scale results and the accuracy checks of its fast mode
/// against the exact one are at this length.
pub const PAPER_SLOT_US: u64 = 60_000;
/// The agent's default slot length: 30 ms, half the paper's, chosen on the VM testbed (guest time,
/// paired seeds; the measurements are in the project's docs/results/agent-defaults.md, `slot_ms`).
pub const DEFAULT_SLOT_US: u64 = 30_000;
/// Default horizon: K = 10 future slots (the paper, Sec. IV-A and V).
pub const DEFAULT_HORIZON: usize = 10;
/// Largest horizon accepted: Alg. 1 costs O(K^2) per flow, so K is kept small.
pub const MAX_HORIZON: usize = 1024;
/// Length of the window of past slots whose largest recorded rate estimates a link's bandwidth
/// (the paper, Sec. IV-B and IV-C: "4 time slots in our experiments").
pub const RATE_WINDOW_SLOTS: usize = 4;

/// Microseconds per second times bits per byte: `bytes = rate_bps * slot_us / BITS_US`.
const BITS_US: u128 = 8_000_000;

/// The slot grid: slot length and horizon. Built by [`SlotClock::new`], which checks both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawSlotClock", into = "RawSlotClock")]
pub struct SlotClock {
    slot_us: u64,
    horizon: usize,
}

/// The serialised shape of a [`SlotClock`]; deserialising goes through [`SlotClock::new`].
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct RawSlotClock {
    slot_us: u64,
    horizon: usize,
}

impl TryFrom<RawSlotClock> for SlotClock {
    type Error = SchedError;
    fn try_from(raw: RawSlotClock) -> Result<Self, SchedError> {
        SlotClock::new(raw.slot_us, raw.horizon)
    }
}

impl From<SlotClock> for RawSlotClock {
    fn from(c: SlotClock) -> Self {
        RawSlotClock {
            slot_us: c.slot_us,
            horizon: c.horizon,
        }
    }
}

impl Default for SlotClock {
    fn default() -> Self {
        SlotClock {
            slot_us: DEFAULT_SLOT_US,
            horizon: DEFAULT_HORIZON,
        }
    }
}

impl SlotClock {
    /// A slot grid of `slot_us` microseconds per slot and `horizon` planned slots (the current
    /// one included). Refuses `slot_us == 0` and a horizon outside `1..=MAX_HORIZON`.
    pub fn new(slot_us: u64, horizon: usize) -> Result<Self, SchedError> {
        if slot_us == 0 {
            return Err(SchedError::InvalidSlotLength { slot_us });
        }
        if horizon == 0 || horizon > MAX_HORIZON {
            return Err(SchedError::InvalidHorizon {
                horizon,
                max: MAX_HORIZON,
            });
        }
        Ok(SlotClock { slot_us, horizon })
    }

    /// Slot length in microseconds.
    pub fn slot_us(&self) -> u64 {
        self.slot_us
    }

    /// Number of slots planned ahead, the current slot included (K).
    pub fn horizon(&self) -> usize {
        self.horizon
    }

    /// The slot that contains wall-clock time `t_us`: `floor(t_us / slot_us)`.
    pub fn slot_at(&self, t_us: u64) -> u64 {
        t_us / self.slot_us
    }

    /// Wall-clock start of slot `slot` in microseconds; `Overflow` past `u64::MAX`.
    pub fn slot_start_us(&self, slot: u64) -> Result<u64, SchedError> {
        slot.checked_mul(self.slot_us).ok_or(SchedError::Overflow {
            what: "slot start time",
        })
    }

    /// Microseconds from `t_us` to the start of the next slot (never 0: at a slot boundary it is
    /// a whole slot).
    pub fn us_until_next_slot(&self, t_us: u64) -> u64 {
        self.slot_us - t_us % self.slot_us
    }

    /// Bytes a flow sends in one slot at `rate_bps`, rounded down (saturates at `u64::MAX`).
    pub fn bytes_in_slot(&self, rate_bps: u64) -> u64 {
        // In 64 bits whenever the product fits (every rate below 2^64 / slot_us): the same
        // quotient without a 128-bit division.
        if let Some(p) = rate_bps.checked_mul(self.slot_us) {
            return p / BITS_US as u64;
        }
        let b = u128::from(rate_bps) * u128::from(self.slot_us) / BITS_US;
        u64::try_from(b).unwrap_or(u64::MAX)
    }

    /// The least rate that sends `bytes` in one slot, rounded up (saturates at `u64::MAX`).
    /// For every `r`, `bytes <= bytes_in_slot(r)` implies `rate_bps_for_bytes(bytes) <= r`.
    pub fn rate_bps_for_bytes(&self, bytes: u64) -> u64 {
        // In 64 bits whenever the product fits: the same quotient without a 128-bit division.
        if let Some(num) = bytes.checked_mul(BITS_US as u64) {
            return num.div_ceil(self.slot_us);
        }
        let num = u128::from(bytes) * BITS_US;
        let den = u128::from(self.slot_us);
        u64::try_from(num.div_ceil(den)).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_align_to_multiples_of_the_length() {
        let c = SlotClock::new(60_000, 10).unwrap();
        assert_eq!(c.slot_at(0), 0);
        assert_eq!(c.slot_at(59_999), 0);
        assert_eq!(c.slot_at(60_000), 1);
        assert_eq!(
            c.slot_at(1_700_000_000_123_456),
            1_700_000_000_123_456 / 60_000
        );
        assert_eq!(c.slot_start_us(3).unwrap(), 180_000);
        assert_eq!(c.us_until_next_slot(180_000), 60_000);
        assert_eq!(c.us_until_next_slot(180_001), 59_999);
        assert!(c.slot_start_us(u64::MAX).is_err());
    }

    #[test]
    fn bad_grids_are_refused_with_their_value() {
        assert_eq!(
            SlotClock::new(0, 10),
            Err(SchedError::InvalidSlotLength { slot_us: 0 })
        );
        let e = SlotClock::new(1, 0).unwrap_err();
        assert!(e.to_string().contains("horizon = 0"), "{e}");
        assert!(SlotClock::new(1, MAX_HORIZON + 1).is_err());
        assert_eq!(SlotClock::default().horizon(), DEFAULT_HORIZON);
        let bad: Result<SlotClock, _> = serde_json::from_str(r#"{"slot_us":0,"horizon":10}"#);
        assert!(bad.unwrap_err().to_string().contains("slot_us = 0"));
        let good: SlotClock = serde_json::from_str(r#"{"slot_us":1000,"horizon":4}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&good).unwrap(),
            r#"{"slot_us":1000,"horizon":4}"#
        );
    }

    #[test]
    fn rate_and_bytes_round_trip() {
        let c = SlotClock::new(60_000, 10).unwrap();
        // 10 Gbit/s for 60 ms = 75 MB.
        assert_eq!(c.bytes_in_slot(10_000_000_000), 75_000_000);
        assert_eq!(c.rate_bps_for_bytes(75_000_000), 10_000_000_000);
        assert_eq!(c.rate_bps_for_bytes(1), 134); // ceil(8e6 / 60000)
        assert_eq!(c.bytes_in_slot(134), 1);
        assert_eq!(
            u128::from(c.bytes_in_slot(u64::MAX)),
            u128::from(u64::MAX) * 60_000 / 8_000_000
        );
        let tiny = SlotClock::new(1, 1).unwrap();
        assert_eq!(tiny.rate_bps_for_bytes(u64::MAX), u64::MAX);
    }
}
