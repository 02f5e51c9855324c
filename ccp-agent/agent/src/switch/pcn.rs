// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The switch daemon's PCN bookkeeping ("Proactive Congestion Avoidance for Distributed Deep
//! Learning", Sec. 3.2): per ECN link of the switch, the outstanding starts and the marking
//! threshold they combine to ([`mlcc_sched::pcn::PcnThresholds`]), the starts by (job, rank)
//! with the flows and slot that tell their burst's arrival, and the threshold changes this
//! decides, queued in bookkeeping order for the switch's applier ([`super::OrderedApplier`]).
//! Nothing here touches a qdisc.

use super::applier::ThresholdChange;
use crate::config::{EcnQueue, Switch, SwitchPcn, Topology};
use crate::proto;
use mlcc_sched::pcn::{BurstId, PcnConfig, PcnThresholds};
use mlcc_sched::LinkId;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Most PCN starts a switch keeps outstanding: the gRPC service is unauthenticated (see
/// [`crate::switch`]'s docs), and a flood of starts under distinct names must not grow the state without
/// bound. Far above any real count (one per process of a job, each for at most the timeout).
pub const MAX_PCN_STARTS: usize = 4096;
/// Longest job name a start may carry, bytes (a progress region's job id has at most 63).
pub const MAX_JOB_BYTES: usize = 255;

/// One ECN link of the switch: its queue, its PCN bookkeeping, the threshold last decided.
struct EcnLink {
    queue: Arc<EcnQueue>,
    pcn: PcnThresholds,
    decided: u32,
}

/// An outstanding PCN start.
struct Burst {
    id: BurstId,
    links: Vec<u32>,
    flows: Vec<u64>,
    slot: u64,
    at_ms: u64,
}

/// PCN state of a switch (see the module docs). Times are milliseconds of the switch's PCN
/// clock ([`super::SwitchState::now_ms`]).
pub(super) struct Pcn {
    policy: SwitchPcn,
    links: BTreeMap<u32, EcnLink>,
    bursts: HashMap<(String, u32), Burst>,
    next_id: u64,
    starts: u64,
    expired: u64,
    /// Decided changes not yet taken by [`Pcn::take_changes`], oldest first.
    pending: Vec<ThresholdChange>,
    /// Failed threshold changes, counted by whoever makes them.
    failures: Arc<AtomicU64>,
}

impl Pcn {
    /// The bookkeeping of `switch`'s ECN links (`[link.ecn]` of `topo`), each at its initial
    /// threshold. Errors: a threshold or policy `mlcc_sched` refuses.
    pub(super) fn new(topo: &Topology, switch: &Switch) -> Result<Self, mlcc_sched::SchedError> {
        let mut links = BTreeMap::new();
        for l in &switch.links {
            let Some(q) = topo.ecn.get(l) else { continue };
            let pcn = PcnThresholds::new(PcnConfig {
                initial_threshold_pkts: q.initial_threshold_bytes,
                combine: topo.pcn.combine,
                max_age_slots: topo.pcn.timeout_ms,
            })?;
            links.insert(
                *l,
                EcnLink {
                    queue: Arc::new(q.clone()),
                    pcn,
                    decided: q.initial_threshold_bytes,
                },
            );
        }
        Ok(Pcn {
            policy: topo.pcn,
            links,
            bursts: HashMap::new(),
            next_id: 1,
            starts: 0,
            expired: 0,
            pending: Vec::new(),
            failures: Arc::default(),
        })
    }

    /// Queues the change of `link` to `threshold` if it differs from the one decided last (or
    /// whatever it is, with `force`).
    fn set(&mut self, link: u32, threshold: u32, force: bool) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        if l.decided == threshold && !force {
            return;
        }
        l.decided = threshold;
        self.pending.push(ThresholdChange {
            link,
            queue: l.queue.clone(),
            threshold_bytes: threshold,
        });
    }

    /// Takes the start of `key` off its links and queues the resulting thresholds; returns how
    /// many ECN links it had (0: no such start).
    fn finish(&mut self, key: &(String, u32)) -> u32 {
        let Some(b) = self.bursts.remove(key) else {
            return 0;
        };
        for l in &b.links {
            let t = match self.links.get_mut(l) {
                Some(e) => e.pcn.on_arrival(LinkId(*l), b.id),
                None => continue,
            };
            self.set(*l, t, false);
        }
        b.links.len() as u32
    }

    /// The changes decided since the last call, in the order they were decided.
    pub(super) fn take_changes(&mut self) -> Vec<ThresholdChange> {
        std::mem::take(&mut self.pending)
    }

    /// Queues every ECN link's current threshold (the initial one without starts), whatever
    /// was decided before.
    pub(super) fn queue_all(&mut self) {
        let links: Vec<(u32, u32)> = self
            .links
            .iter()
            .map(|(l, e)| (*l, e.pcn.threshold_pkts(LinkId(*l))))
            .collect();
        for (l, t) in links {
            self.set(l, t, true);
        }
    }

    /// Drops every outstanding start, queueing the initial thresholds.
    pub(super) fn end_all(&mut self) {
        let keys: Vec<(String, u32)> = self.bursts.keys().cloned().collect();
        for k in &keys {
            self.finish(k);
        }
    }

    /// `PcnStart` at `now_ms` in `slot`: replaces an earlier start of the same (job, rank),
    /// lowers the thresholds of the start's ECN links. Errors: an empty or too long job name, a
    /// zero threshold, [`MAX_PCN_STARTS`] starts outstanding, named.
    pub(super) fn start(
        &mut self,
        req: &proto::PcnStart,
        now_ms: u64,
        slot: u64,
    ) -> Result<proto::PcnAck, String> {
        if req.job.is_empty() || req.job.len() > MAX_JOB_BYTES {
            return Err(format!(
                "PcnStart: job name of {} bytes, must be 1..={MAX_JOB_BYTES}",
                req.job.len()
            ));
        }
        if req.threshold_bytes == 0 {
            return Err(format!(
                "PcnStart of job {:?} rank {}: threshold_bytes = 0, must be > 0",
                req.job, req.rank
            ));
        }
        self.expire(now_ms);
        let key = (req.job.clone(), req.rank);
        if self.bursts.len() >= MAX_PCN_STARTS && !self.bursts.contains_key(&key) {
            return Err(format!(
                "PcnStart of job {:?} rank {}: {MAX_PCN_STARTS} starts already outstanding",
                req.job, req.rank
            ));
        }
        self.finish(&key);
        let mut links: Vec<u32> = req
            .links
            .iter()
            .copied()
            .filter(|l| self.links.contains_key(l))
            .collect();
        links.sort_unstable();
        links.dedup();
        self.starts += 1;
        let id = BurstId(self.next_id);
        self.next_id += 1;
        for l in &links {
            let t = match self.links.get_mut(l) {
                Some(e) => e
                    .pcn
                    .on_start(LinkId(*l), id, req.threshold_bytes, now_ms)
                    .map_err(|e| format!("PcnStart on link {l}: {e}"))?,
                None => continue,
            };
            self.set(*l, t, false);
        }
        tracing::debug!(job = %req.job, rank = req.rank, agent = %req.agent, links = ?links, threshold_bytes = req.threshold_bytes, "PCN start");
        let ecn_links = links.len() as u32;
        if ecn_links > 0 {
            self.bursts.insert(
                key,
                Burst {
                    id,
                    links,
                    flows: req.flows.clone(),
                    slot,
                    at_ms: now_ms,
                },
            );
        }
        Ok(proto::PcnAck {
            ecn_links,
            errors: Vec::new(),
        })
    }

    /// `PcnEnd`: drops the start of (job, rank), restoring thresholds; an unknown one changes
    /// nothing.
    pub(super) fn end(&mut self, req: &proto::PcnEnd) -> proto::PcnAck {
        proto::PcnAck {
            ecn_links: self.finish(&(req.job.clone(), req.rank)),
            errors: Vec::new(),
        }
    }

    /// Drops the starts older than `[pcn] timeout_ms` at `now_ms`, restoring thresholds.
    /// Returns how many expired.
    pub(super) fn expire(&mut self, now_ms: u64) -> usize {
        let timeout = self.policy.timeout_ms;
        let old: Vec<(String, u32)> = self
            .bursts
            .iter()
            .filter(|(_, b)| now_ms.saturating_sub(b.at_ms) > timeout)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &old {
            tracing::info!(job = %k.0, rank = k.1, timeout_ms = timeout, "PCN start expired: no burst seen");
            self.expired += 1;
            self.finish(k);
        }
        old.len()
    }

    /// Finishes the starts whose burst arrived with an update of `flow` achieving
    /// `achieved_bps` (> 0) in `achieved_slot` (the start's slot or later).
    pub(super) fn bursts_seen(&mut self, flow: u64, achieved_bps: u64, achieved_slot: u64) {
        if achieved_bps == 0 {
            return;
        }
        let keys: Vec<(String, u32)> = self
            .bursts
            .iter()
            .filter(|(_, b)| b.flows.contains(&flow) && achieved_slot >= b.slot)
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            tracing::debug!(job = %k.0, rank = k.1, flow, "PCN burst arrived");
            self.finish(&k);
        }
    }

    /// The ECN threshold of `link` now, bytes, and its outstanding starts (`None`: no ECN queue).
    pub(super) fn threshold(&self, link: u32) -> Option<(u32, usize)> {
        let e = self.links.get(&link)?;
        Some((
            e.pcn.threshold_pkts(LinkId(link)),
            e.pcn.outstanding(LinkId(link)),
        ))
    }

    /// `PcnStart`s taken so far.
    pub(super) fn starts(&self) -> u64 {
        self.starts
    }

    /// Starts dropped because their burst never came within the timeout.
    pub(super) fn expired(&self) -> u64 {
        self.expired
    }

    /// The counter of failed threshold changes, shared with whoever makes them.
    pub(super) fn failures(&self) -> &Arc<AtomicU64> {
        &self.failures
    }

    /// Failed threshold changes so far.
    pub(super) fn failure_count(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::fixtures::ecn_topo;

    fn start(job: &str, threshold_bytes: u32) -> proto::PcnStart {
        proto::PcnStart {
            job: job.into(),
            links: vec![10],
            threshold_bytes,
            ..Default::default()
        }
    }

    #[test]
    fn pcn_harmonic_combination_and_restart_replaces() {
        let topo = ecn_topo("harmonic");
        let mut p = Pcn::new(&topo, &topo.switches[0]).unwrap();
        p.start(&start("a", 30_000), 0, 0).unwrap();
        p.start(&start("b", 30_000), 0, 0).unwrap();
        assert_eq!(p.threshold(10), Some((15_000, 2)));
        p.start(&start("c", 60_000), 0, 0).unwrap();
        assert_eq!(p.threshold(10), Some((12_000, 3))); // 1 / (2/30000 + 1/60000)
                                                        // A repeated start of the same (job, rank) replaces the earlier one.
        p.start(&start("c", 15_000), 0, 0).unwrap();
        assert_eq!(p.threshold(10), Some((7_500, 3)));
        // Shutdown drops them all.
        p.end_all();
        assert_eq!(p.threshold(10), Some((60_000, 0)));
        // The changes in bookkeeping order: a, b, c, c's end and restart, ..., all ended.
        let t: Vec<u32> = p.take_changes().iter().map(|c| c.threshold_bytes).collect();
        assert_eq!(t[..5], [30_000, 15_000, 12_000, 15_000, 7_500], "{t:?}");
        assert_eq!(t.last(), Some(&60_000), "{t:?}");
        assert!(p.take_changes().is_empty(), "taken once");
    }
}
