// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! PCN threshold bookkeeping, for the switch daemon: "Proactive Congestion Avoidance for
//! Distributed Deep Learning" (Kang, Yang, Yoo, Yoo, Sensors 2021), Sec. 3.
//!
//! A worker announces its burst with PCN-START, carrying its PCN threshold, one RTT before it
//! sends. On a START the switch lowers the ECN marking threshold of the link's egress queue, so
//! background senders back off and the queue drains before the burst; it counts the starts still
//! outstanding, and when a burst has arrived it restores the initial threshold (once no other
//! start is outstanding). Concurrent starts combine either by the minimum of their thresholds or
//! harmonically (1/T = 1/T1 + 1/T2 + ...), as a public re-implementation does; our copy of the
//! paper lacks its Sec. 3.3, so the policy is a parameter, to be chosen by measurement. A start
//! whose burst never shows up (a lost packet, a crashed worker) would pin the threshold low, so
//! starts older than `max_age_slots` expire.
//!
//! The arithmetic does not depend on the units, which the caller picks consistently: the names
//! say packets and slots (the paper's units), but `ccp-agent`'s switch daemon keeps one
//! [`PcnThresholds`] per ECN link with thresholds in bytes (what `tc` takes) and times in
//! milliseconds since its start (so `max_age_slots` is its start timeout in ms).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::error::SchedError;
use crate::table::LinkId;

/// How the thresholds of concurrent outstanding starts combine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Combine {
    /// The least of the thresholds.
    #[default]
    Min,
    /// 1/T = Σ 1/T_i (rounded down, at least 1 packet).
    Harmonic,
}

/// Configuration of PCN on the links of one switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcnConfig {
    /// The threshold when no burst is announced, in packets (40 in the paper's setup).
    pub initial_threshold_pkts: u32,
    /// How concurrent starts combine.
    pub combine: Combine,
    /// Slots after which an outstanding start whose burst has not arrived is dropped.
    pub max_age_slots: u64,
}

impl Default for PcnConfig {
    fn default() -> Self {
        PcnConfig {
            initial_threshold_pkts: 40,
            combine: Combine::Min,
            max_age_slots: 4,
        }
    }
}

/// A burst announced by a PCN-START (chosen by the worker, unique among its outstanding ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BurstId(pub u64);

#[derive(Clone, Copy, Debug)]
struct Start {
    threshold_pkts: u32,
    slot: u64,
}

/// Outstanding starts and the resulting ECN marking threshold of every link of a switch.
#[derive(Clone, Debug)]
pub struct PcnThresholds {
    config: PcnConfig,
    links: HashMap<LinkId, BTreeMap<BurstId, Start>>,
}

impl PcnThresholds {
    /// Bookkeeping with `config`; refuses an initial threshold of 0 packets.
    pub fn new(config: PcnConfig) -> Result<Self, SchedError> {
        if config.initial_threshold_pkts == 0 {
            return Err(SchedError::InvalidThreshold { threshold_pkts: 0 });
        }
        Ok(PcnThresholds {
            config,
            links: HashMap::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &PcnConfig {
        &self.config
    }

    /// A PCN-START for `burst` on `link` in `slot`, asking for `threshold_pkts`; returns the
    /// link's new threshold. A repeated start of the same burst replaces the earlier one.
    /// Refuses a threshold of 0 packets.
    pub fn on_start(
        &mut self,
        link: LinkId,
        burst: BurstId,
        threshold_pkts: u32,
        slot: u64,
    ) -> Result<u32, SchedError> {
        if threshold_pkts == 0 {
            return Err(SchedError::InvalidThreshold { threshold_pkts });
        }
        self.links.entry(link).or_default().insert(
            burst,
            Start {
                threshold_pkts,
                slot,
            },
        );
        Ok(self.threshold_pkts(link))
    }

    /// The burst announced as `burst` has arrived on `link`; returns the link's new threshold
    /// (the initial one once no start is outstanding). An unknown burst changes nothing.
    pub fn on_arrival(&mut self, link: LinkId, burst: BurstId) -> u32 {
        if let Some(m) = self.links.get_mut(&link) {
            m.remove(&burst);
            if m.is_empty() {
                self.links.remove(&link);
            }
        }
        self.threshold_pkts(link)
    }

    /// Drops the starts announced more than `max_age_slots` before `slot`; returns the links
    /// whose threshold changed, with their new threshold.
    pub fn expire(&mut self, slot: u64) -> Vec<(LinkId, u32)> {
        let max_age = self.config.max_age_slots;
        let mut changed = Vec::new();
        for (link, m) in self.links.iter_mut() {
            let before = m.len();
            m.retain(|_, s| slot.saturating_sub(s.slot) <= max_age);
            if m.len() != before {
                changed.push(*link);
            }
        }
        self.links.retain(|_, m| !m.is_empty());
        changed.sort_unstable();
        changed
            .into_iter()
            .map(|l| (l, self.threshold_pkts(l)))
            .collect()
    }

    /// Number of starts outstanding on `link`.
    pub fn outstanding(&self, link: LinkId) -> usize {
        self.links.get(&link).map_or(0, BTreeMap::len)
    }

    /// The ECN marking threshold of `link` now, in packets: the initial threshold without
    /// outstanding starts, else their combination, never above the initial threshold.
    pub fn threshold_pkts(&self, link: LinkId) -> u32 {
        let initial = self.config.initial_threshold_pkts;
        let Some(m) = self.links.get(&link).filter(|m| !m.is_empty()) else {
            return initial;
        };
        let combined = match self.config.combine {
            Combine::Min => m
                .values()
                .map(|s| s.threshold_pkts)
                .min()
                .unwrap_or(initial),
            Combine::Harmonic => {
                let inv: f64 = m.values().map(|s| 1.0 / f64::from(s.threshold_pkts)).sum();
                // inv > 0: every threshold is at least 1. The cast saturates. A combination
                // that is a whole number (1/(2/30000 + 1/60000) = 12000) may come out of the
                // float sum a hair below it; the relative 1e-12 nudge keeps it whole (far
                // below one unit for any u32 threshold).
                (((1.0 / inv) * (1.0 + 1e-12)).floor() as u32).max(1)
            }
        };
        combined.min(initial)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: LinkId = LinkId(3);

    #[test]
    fn starts_lower_and_arrivals_restore() {
        let mut p = PcnThresholds::new(PcnConfig::default()).unwrap();
        assert_eq!(p.threshold_pkts(L), 40);
        assert_eq!(p.on_start(L, BurstId(1), 10, 5).unwrap(), 10);
        assert_eq!(p.on_start(L, BurstId(2), 20, 5).unwrap(), 10);
        assert_eq!(p.outstanding(L), 2);
        assert_eq!(p.threshold_pkts(LinkId(4)), 40);
        assert_eq!(p.on_arrival(L, BurstId(1)), 20);
        assert_eq!(p.on_arrival(L, BurstId(9)), 20);
        assert_eq!(p.on_arrival(L, BurstId(2)), 40);
        assert_eq!(p.outstanding(L), 0);
        // A start above the initial threshold does not raise it.
        assert_eq!(p.on_start(L, BurstId(3), 100, 5).unwrap(), 40);
        assert_eq!(
            p.on_start(L, BurstId(3), 0, 5),
            Err(SchedError::InvalidThreshold { threshold_pkts: 0 })
        );
    }

    #[test]
    fn harmonic_combination() {
        let cfg = PcnConfig {
            combine: Combine::Harmonic,
            ..PcnConfig::default()
        };
        let mut p = PcnThresholds::new(cfg).unwrap();
        assert_eq!(p.on_start(L, BurstId(1), 20, 0).unwrap(), 20);
        assert_eq!(p.on_start(L, BurstId(2), 20, 0).unwrap(), 10);
        assert_eq!(p.on_start(L, BurstId(3), 30, 0).unwrap(), 7); // 1/(1/20+1/20+1/30) = 7.5
        p.on_arrival(L, BurstId(3));
        assert_eq!(p.on_start(L, BurstId(3), 60_000, 0).unwrap(), 9); // 1/(2/20+1/60000) = 9.998
        let mut q = PcnThresholds::new(PcnConfig {
            initial_threshold_pkts: 60_000,
            ..cfg
        })
        .unwrap();
        q.on_start(L, BurstId(1), 30_000, 0).unwrap();
        q.on_start(L, BurstId(2), 30_000, 0).unwrap();
        assert_eq!(
            q.on_start(L, BurstId(3), 60_000, 0).unwrap(),
            12_000,
            "whole, not 11 999"
        );
        for i in 4..100 {
            p.on_start(L, BurstId(i), 1, 0).unwrap();
        }
        assert_eq!(p.threshold_pkts(L), 1);
    }

    #[test]
    fn stale_starts_expire() {
        let mut p = PcnThresholds::new(PcnConfig {
            max_age_slots: 2,
            ..PcnConfig::default()
        })
        .unwrap();
        p.on_start(L, BurstId(1), 10, 10).unwrap();
        p.on_start(L, BurstId(2), 15, 11).unwrap();
        assert!(p.expire(12).is_empty());
        assert_eq!(p.expire(13), vec![(L, 15)]);
        assert_eq!(p.expire(14), vec![(L, 40)]);
        assert!(PcnThresholds::new(PcnConfig {
            initial_threshold_pkts: 0,
            ..PcnConfig::default()
        })
        .is_err());
    }
}
