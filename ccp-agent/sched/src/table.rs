// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Link load tables: per link, the load that scheduled ML flows put on it over the next K slots,
//! and the bandwidth available to ML flows, estimated from recorded rates.
//!
//! "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers", Sec. IV-A: each switch
//! keeps a load table of its links over the future K slots; every flow's schedule (its rates over
//! the K slots) is added onto the rows of the links it crosses, and the load of a path in a slot
//! is the sum of its links' loads. Without switches (Sec. VI-H) a host keeps the table of its own
//! NIC links. The same structure serves both: the switch daemon, the agent in NIC-only mode, and
//! the simulator.
//!
//! Available bandwidth (Sec. IV-B, IV-C): the largest rate recorded on the link over the past
//! [`RATE_WINDOW_SLOTS`] slots, minus the load of the *other* flows in the slot, so non-ML TCP
//! traffic (which the table does not see) keeps what it had. Our reading of "recorded rate",
//! following BBR which the paper cites for the rule: a sample is the total rate the ML flows
//! achieved on the link in a past slot; a sample taken while the flows only sent what they were
//! scheduled to send is *app-limited* (the schedule, not the network, bounded it) and cannot
//! lower the estimate below capacity by itself. The estimate is the largest sample of the window
//! if any sample of the window was network-limited, and the link capacity otherwise (no ML flow
//! has met a limit, so nothing says the link is shared); it never exceeds the capacity. Once
//! lowered, the estimate holds while the flows keep to their (lowered) schedules, whose samples
//! are app-limited, and returns to the capacity when the network-limited sample leaves the
//! window: every [`RATE_WINDOW_SLOTS`] slots the ML flows probe for more, as BBR does.
//!
//! Samples of a slot add up, so each reporter (an agent for its flows, or a switch daemon for
//! the flows that update their schedule through it) reports each flow once per slot.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

use crate::error::SchedError;
use crate::slot::{SlotClock, RATE_WINDOW_SLOTS};

/// A link (one direction of a wire, or a host NIC's egress), as numbered by the topology config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LinkId(pub u32);

/// A flow (one TCP connection of a training job), as numbered by its agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FlowId(pub u64);

/// A flow's planned rates over consecutive slots: `rates_bps[i]` holds in slot `start_slot + i`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// First slot of the schedule.
    pub start_slot: u64,
    /// Rate in bits per second in each slot, from `start_slot` on.
    pub rates_bps: Vec<u64>,
}

impl Schedule {
    /// The planned rate in `slot`, 0 outside the schedule.
    pub fn rate_bps_at(&self, slot: u64) -> u64 {
        slot.checked_sub(self.start_slot)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| self.rates_bps.get(i).copied())
            .unwrap_or(0)
    }
}

/// One measurement of the total rate ML flows achieved on a link in a past slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateSample {
    /// The slot measured.
    pub slot: u64,
    /// Achieved rate in bits per second.
    pub rate_bps: u64,
    /// True when the flows sent no more than their schedule allowed, so the sample says nothing
    /// about what the network could have carried (BBR's "application-limited").
    pub app_limited: bool,
}

/// What a flow about to be scheduled sees of its path over the horizon, its own load excluded.
/// Index `i` is slot `start_slot + i`. This is also what a switch's `FetchFeedback` returns.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathView {
    /// The first slot (the table's current slot).
    pub start_slot: u64,
    /// Path load: the sum over the path's links of the other flows' scheduled rates, in bit/s.
    pub load_bps: Vec<u64>,
    /// Available bandwidth: the least over the path's links of (estimated bandwidth − other
    /// flows' load), in bit/s.
    pub available_bps: Vec<u64>,
}

/// What a group of flows (a coflow, see [`crate::coflow`]) sees of one link over the horizon,
/// the group's own schedules excluded. Index `i` is slot `start_slot + i` of the view's table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkView {
    /// The link.
    pub link: LinkId,
    /// The other flows' scheduled rates on the link, bit/s.
    pub load_bps: Vec<u64>,
    /// Estimated bandwidth less the other flows' load, bit/s.
    pub available_bps: Vec<u64>,
}

/// One link of a [`TableSnapshot`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkRow {
    /// The link.
    pub link: LinkId,
    /// Its capacity, bit/s.
    pub capacity_bps: u64,
    /// Its estimated bandwidth for ML flows now, bit/s.
    pub estimate_bps: u64,
    /// Its load over the K slots from the current one, bit/s.
    pub load_bps: Vec<u64>,
}

/// A plain-data copy of a table's links, for status output and switch feedback.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSnapshot {
    /// The table's current slot (index 0 of every `load_bps`).
    pub current_slot: u64,
    /// Number of flow schedules in the table.
    pub flows: usize,
    /// The links, in increasing order.
    pub links: Vec<LinkRow>,
}

/// Hasher of the table's keys ([`LinkId`], [`FlowId`]: integers the caller numbers), in place
/// of the standard library's SipHash, which is built to resist keys chosen against it: no
/// outside party picks these ids, and the table looks them up several times per flow planned.
/// A multiplicative hash (Fibonacci hashing, Knuth TAOCP vol. 3, 6.4) with the high bits
/// folded down, since the hash map takes its bucket from the low bits.
#[derive(Clone, Copy, Debug, Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        let h = self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^ (h >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x100_0000_01B3);
        }
    }

    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A hash map keyed by table ids.
type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[derive(Clone, Debug)]
struct LinkState {
    capacity_bps: u64,
    /// Load per slot, slot `s` at index `s % horizon` when `load_slot` there is `s` (else the
    /// cell holds an expired slot and the load in `s` is 0): slots expire without a pass over
    /// every link.
    load_bps: Vec<u64>,
    /// The slot each cell of `load_bps` holds.
    load_slot: Vec<u64>,
    /// Samples, slot `s` at index `s % RATE_WINDOW_SLOTS`.
    samples: [Option<RateSample>; RATE_WINDOW_SLOTS],
}

#[derive(Clone, Debug)]
struct FlowEntry {
    path: Vec<LinkId>,
    schedule: Schedule,
}

/// Link ids below this bound are kept by index in [`Links`], the others in a hash map. The
/// simulator numbers its links densely from 0 (a few thousand) and switch configs number theirs;
/// the indexed part grows to the largest such id in use, one `LinkState` (~150 bytes) per id.
const DENSE_LINK_IDS: u32 = 1 << 16;

/// The table's links by id, looked up without hashing for ids below [`DENSE_LINK_IDS`]: the
/// table looks up every link of a path each time it reads or writes the path's load.
#[derive(Clone, Debug, Default)]
struct Links {
    /// The state of link `i` at index `i`, for the ids below [`DENSE_LINK_IDS`].
    dense: Vec<Option<LinkState>>,
    /// The links of larger ids.
    far: IdMap<LinkId, LinkState>,
}

impl Links {
    /// The index of `link` in `dense`, if its id is below [`DENSE_LINK_IDS`].
    fn dense_index(link: LinkId) -> Option<usize> {
        if link.0 < DENSE_LINK_IDS {
            usize::try_from(link.0).ok()
        } else {
            None
        }
    }

    fn get(&self, link: LinkId) -> Option<&LinkState> {
        match Self::dense_index(link) {
            Some(i) => self.dense.get(i)?.as_ref(),
            None => self.far.get(&link),
        }
    }

    fn get_mut(&mut self, link: LinkId) -> Option<&mut LinkState> {
        match Self::dense_index(link) {
            Some(i) => self.dense.get_mut(i)?.as_mut(),
            None => self.far.get_mut(&link),
        }
    }

    fn contains(&self, link: LinkId) -> bool {
        self.get(link).is_some()
    }

    /// The state of `link`, made by `new` first if the link is not known.
    fn get_or_insert_with(
        &mut self,
        link: LinkId,
        new: impl FnOnce() -> LinkState,
    ) -> &mut LinkState {
        let Some(i) = Self::dense_index(link) else {
            return self.far.entry(link).or_insert_with(new);
        };
        if self.dense.len() <= i {
            self.dense.resize_with(i + 1, || None);
        }
        // In bounds: the vector was just grown past `i`.
        self.dense[i].get_or_insert_with(new)
    }

    fn remove(&mut self, link: LinkId) -> Option<LinkState> {
        match Self::dense_index(link) {
            Some(i) => self.dense.get_mut(i)?.take(),
            None => self.far.remove(&link),
        }
    }

    /// The known links' ids, in increasing order (the indexed ones are all below the others).
    fn ids(&self) -> Vec<LinkId> {
        let mut far: Vec<LinkId> = self.far.keys().copied().collect();
        far.sort_unstable();
        self.dense
            .iter()
            .zip(0..DENSE_LINK_IDS)
            .filter(|(s, _)| s.is_some())
            .map(|(_, i)| LinkId(i))
            .chain(far)
            .collect()
    }
}

/// The slot after the last slot of `s`: the slot from which it has nothing left.
fn end_slot(s: &Schedule) -> u64 {
    s.start_slot.saturating_add(s.rates_bps.len() as u64)
}

/// The stored flows by the slot their schedule ends ([`end_slot`]), so that `advance_to` finds
/// the flows with nothing left without a pass over every flow. A ring of K + 1 lists, the entry
/// `(e, flow)` in list `e % (K + 1)`: a schedule set in slot `c` ends in one of the slots
/// `c..=c + K` (or later if it is empty and starts after the horizon; such an entry waits in its
/// list until its slot comes). An entry is added when a flow is stored with a new end, and is
/// never taken out by `set_schedule` or `remove_flow`: one that no longer gives its flow's end
/// is dropped the next time its list is visited, within K + 1 slots.
///
/// Invariant: each stored flow has an entry giving its end.
#[derive(Clone, Debug)]
struct Expiry {
    lists: Vec<Vec<(u64, FlowId)>>,
}

impl Expiry {
    /// An empty ring for a horizon of `k` slots.
    fn new(k: usize) -> Self {
        Expiry {
            lists: vec![Vec::new(); k.saturating_add(1)],
        }
    }

    /// Notes that the schedule of `flow` now ends in slot `end`.
    fn push(&mut self, end: u64, flow: FlowId) {
        let n = self.lists.len();
        if let Some(list) = self.lists.get_mut(ring_index(end, n)) {
            list.push((end, flow));
        }
    }

    /// Forgets the flows of `flows` whose schedule ends at or before `slot`, for a table going
    /// from slot `current` to `slot`: every stored end is at least `current`, so the lists of
    /// the slots `current..=slot` (all of them after a jump of more than K slots) hold them.
    fn expire(&mut self, flows: &mut IdMap<FlowId, FlowEntry>, current: u64, slot: u64) {
        let n = self.lists.len();
        let last = slot.min(current.saturating_add(n as u64 - 1));
        for s in current..=last {
            if let Some(list) = self.lists.get_mut(ring_index(s, n)) {
                list.retain(|(end, flow)| Self::keep(flows, *end, *flow, slot));
            }
        }
    }

    /// Whether the entry `(end, flow)` stays once the table is at `slot`: only while it gives
    /// the end of the stored flow, which is after `slot` (else the flow is forgotten here).
    fn keep(flows: &mut IdMap<FlowId, FlowEntry>, end: u64, flow: FlowId, slot: u64) -> bool {
        let Entry::Occupied(stored) = flows.entry(flow) else {
            return false;
        };
        let now = end_slot(&stored.get().schedule);
        if now <= slot {
            stored.remove();
            return false;
        }
        now == end
    }
}

/// The load table of a set of links over the next K slots, and the schedules that make it up.
///
/// Invariant: the load of a link in a slot is the sum of the rates, in that slot, of the stored
/// schedules whose path crosses the link (saturating at `u64::MAX`).
#[derive(Clone, Debug)]
pub struct LinkLoadTable {
    clock: SlotClock,
    current_slot: u64,
    links: Links,
    flows: IdMap<FlowId, FlowEntry>,
    expiry: Expiry,
}

fn ring_index(slot: u64, len: usize) -> usize {
    // `len` is at most MAX_HORIZON + 1, so the remainder fits any usize.
    (slot % len as u64) as usize
}

impl LinkState {
    /// The load in `slot`, one of the `k` slots of the horizon, bit/s.
    fn load_at(&self, slot: u64, k: usize) -> u64 {
        let i = ring_index(slot, k);
        match (self.load_bps.get(i), self.load_slot.get(i)) {
            (Some(v), Some(s)) if *s == slot => *v,
            _ => 0,
        }
    }

    /// The cell of `slot`, one of the `k` slots of the horizon (emptied first if it held an
    /// expired slot).
    fn load_cell(&mut self, slot: u64, k: usize) -> Option<&mut u64> {
        let i = ring_index(slot, k);
        let (Some(v), Some(s)) = (self.load_bps.get_mut(i), self.load_slot.get_mut(i)) else {
            return None;
        };
        if *s != slot {
            *s = slot;
            *v = 0;
        }
        Some(v)
    }
}

/// Checks that `path` is non-empty, has no link twice and only links of `links`.
fn check_path(links: &Links, path: &[LinkId]) -> Result<(), SchedError> {
    if path.is_empty() {
        return Err(SchedError::EmptyPath);
    }
    for (i, l) in path.iter().enumerate() {
        if !links.contains(*l) {
            return Err(SchedError::UnknownLink(*l));
        }
        if path.get(..i).is_some_and(|before| before.contains(l)) {
            return Err(SchedError::DuplicateLinkInPath(*l));
        }
    }
    Ok(())
}

impl LinkLoadTable {
    /// An empty table on the grid `clock`, whose current slot is `current_slot`.
    pub fn new(clock: SlotClock, current_slot: u64) -> Self {
        LinkLoadTable {
            clock,
            current_slot,
            links: Links::default(),
            flows: IdMap::default(),
            expiry: Expiry::new(clock.horizon()),
        }
    }

    /// The slot grid.
    pub fn clock(&self) -> &SlotClock {
        &self.clock
    }

    /// The current slot: the first of the K slots the table holds.
    pub fn current_slot(&self) -> u64 {
        self.current_slot
    }

    /// Adds a link of `capacity_bps`, or changes the capacity of a known one.
    pub fn add_link(&mut self, link: LinkId, capacity_bps: u64) -> Result<(), SchedError> {
        if capacity_bps == 0 {
            return Err(SchedError::InvalidCapacity { link, capacity_bps });
        }
        let k = self.clock.horizon();
        let state = self.links.get_or_insert_with(link, || LinkState {
            capacity_bps,
            load_bps: vec![0; k],
            load_slot: vec![u64::MAX; k],
            samples: [None; RATE_WINDOW_SLOTS],
        });
        state.capacity_bps = capacity_bps;
        Ok(())
    }

    /// Removes a link no stored flow crosses; else the error names the least such flow.
    pub fn remove_link(&mut self, link: LinkId) -> Result<(), SchedError> {
        if !self.links.contains(link) {
            return Err(SchedError::UnknownLink(link));
        }
        let crossing = self
            .flows
            .iter()
            .filter(|(_, e)| e.path.contains(&link))
            .map(|(f, _)| *f)
            .min();
        if let Some(flow) = crossing {
            return Err(SchedError::LinkInUse { link, flow });
        }
        self.links.remove(link);
        Ok(())
    }

    /// The known links, in increasing order.
    pub fn link_ids(&self) -> Vec<LinkId> {
        self.links.ids()
    }

    /// The capacity of `link` in bit/s.
    pub fn capacity_bps(&self, link: LinkId) -> Result<u64, SchedError> {
        self.links
            .get(link)
            .map(|s| s.capacity_bps)
            .ok_or(SchedError::UnknownLink(link))
    }

    /// Number of stored flow schedules.
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// The stored schedule of `flow`, if any: within the horizon, but it may still begin with
    /// slots before the current one (they expire without being cut from every schedule at each
    /// slot; read it with [`Schedule::rate_bps_at`]).
    pub fn flow_schedule(&self, flow: FlowId) -> Option<&Schedule> {
        self.flows.get(&flow).map(|e| &e.schedule)
    }

    /// The stored path of `flow`, if any.
    pub fn flow_path(&self, flow: FlowId) -> Option<&[LinkId]> {
        self.flows.get(&flow).map(|e| e.path.as_slice())
    }

    /// Adds (or takes off) `e`'s rates from slot `current` on along its path (its slots before
    /// `current` have expired: their cells hold later slots now).
    fn apply(links: &mut Links, e: &FlowEntry, k: usize, current: u64, add: bool) {
        let skip =
            usize::try_from(current.saturating_sub(e.schedule.start_slot)).unwrap_or(usize::MAX);
        for l in &e.path {
            if let Some(state) = links.get_mut(*l) {
                for (i, r) in e.schedule.rates_bps.iter().enumerate().skip(skip) {
                    let slot = e.schedule.start_slot.saturating_add(i as u64);
                    if let Some(cell) = state.load_cell(slot, k) {
                        *cell = if add {
                            cell.saturating_add(*r)
                        } else {
                            cell.saturating_sub(*r)
                        };
                    }
                }
            }
        }
    }

    /// Adds `flow`'s schedule along `path` to the table, replacing (and first taking off) any
    /// schedule the flow had. The parts of `schedule` outside the K slots from the current slot
    /// are dropped. Refuses an empty path, an unknown link and a link listed twice.
    pub fn set_schedule(
        &mut self,
        flow: FlowId,
        path: &[LinkId],
        schedule: &Schedule,
    ) -> Result<(), SchedError> {
        check_path(&self.links, path)?;
        let k = self.clock.horizon();
        let end = self.current_slot.saturating_add(k as u64);
        let first = schedule.start_slot.max(self.current_slot);
        // The flow's old entry is taken off the links and its buffers reused for the new one.
        let (entry, old_end) = match self.flows.get_mut(&flow) {
            Some(old) => {
                Self::apply(&mut self.links, old, k, self.current_slot, false);
                let old_end = end_slot(&old.schedule);
                (old, Some(old_end))
            }
            None => {
                let new = self.flows.entry(flow).or_insert(FlowEntry {
                    path: Vec::new(),
                    schedule: Schedule::default(),
                });
                (new, None)
            }
        };
        entry.path.clear();
        entry.path.extend_from_slice(path);
        let rates = &mut entry.schedule.rates_bps;
        rates.clear();
        let mut slot = first;
        while slot < end {
            rates.push(schedule.rate_bps_at(slot));
            slot += 1;
        }
        while rates.last() == Some(&0) {
            rates.pop();
        }
        entry.schedule.start_slot = first;
        Self::apply(&mut self.links, entry, k, self.current_slot, true);
        let new_end = end_slot(&entry.schedule);
        if old_end != Some(new_end) {
            self.expiry.push(new_end, flow);
        }
        Ok(())
    }

    /// Admission of `flow`'s requested `schedule` along `path`: each slot's rate is clipped to
    /// what is left on the path at this moment, `min over the path's links of (estimate − load of
    /// the other flows)` (the estimate of [`LinkLoadTable::estimate_bps`], never above the
    /// capacity), then the clipped schedule replaces the flow's stored one, as
    /// [`LinkLoadTable::set_schedule`] does, and is returned.
    ///
    /// This closes the race of "Dynamic Flow Scheduling for DNN Training Workloads in Data
    /// Centers", Sec. IV-C, between schedulers that plan in the same slot: each reads the switch's
    /// feedback (`fetch_feedback()`) before the others' `update_schedule()` lands, so two of them
    /// can plan the same free bandwidth. With every schedule admitted by this call, one at a time
    /// (the switch daemon holds its lock across it), the committed load of a link never exceeds
    /// its estimate at the time of each admission, hence never its capacity: by induction, an
    /// admission adds at most `estimate − others ≤ capacity − others`.
    ///
    /// Slots before the current one and beyond the horizon are dropped, as in `set_schedule`.
    /// Refuses an empty path, an unknown link and a link listed twice.
    pub fn admit(
        &mut self,
        flow: FlowId,
        path: &[LinkId],
        schedule: &Schedule,
    ) -> Result<Schedule, SchedError> {
        let view = self.path_view(path, Some(flow))?;
        let first = schedule.start_slot.max(self.current_slot);
        let end = self
            .current_slot
            .saturating_add(self.clock.horizon() as u64);
        let mut rates = Vec::new();
        let mut slot = first;
        while slot < end {
            let i = usize::try_from(slot - self.current_slot).unwrap_or(usize::MAX);
            let free = view.available_bps.get(i).copied().unwrap_or(0);
            rates.push(schedule.rate_bps_at(slot).min(free));
            slot += 1;
        }
        while rates.last() == Some(&0) {
            rates.pop();
        }
        let admitted = Schedule {
            start_slot: first,
            rates_bps: rates,
        };
        self.set_schedule(flow, path, &admitted)?;
        Ok(admitted)
    }

    /// Takes `flow`'s schedule off the table and returns it (from the current slot on).
    pub fn remove_flow(&mut self, flow: FlowId) -> Result<Schedule, SchedError> {
        let old = self
            .flows
            .remove(&flow)
            .ok_or(SchedError::UnknownFlow(flow))?;
        Self::apply(
            &mut self.links,
            &old,
            self.clock.horizon(),
            self.current_slot,
            false,
        );
        let mut s = old.schedule;
        if s.start_slot < self.current_slot {
            let cut = usize::try_from(self.current_slot - s.start_slot).unwrap_or(usize::MAX);
            s.rates_bps.drain(..cut.min(s.rates_bps.len()));
            s.start_slot = self.current_slot;
        }
        Ok(s)
    }

    /// Moves the table to `slot`: the slots before it expire (their load is dropped, they no
    /// longer count in the schedules, and the flows with nothing left are forgotten). Refuses
    /// going back.
    pub fn advance_to(&mut self, slot: u64) -> Result<(), SchedError> {
        if slot < self.current_slot {
            return Err(SchedError::SlotInPast {
                slot,
                current_slot: self.current_slot,
            });
        }
        // A schedule's expired slots stay until it is replaced or removed (`apply` skips them);
        // a flow whose schedule has no slot left is forgotten (stored schedules never end in
        // a zero rate, see `set_schedule`), found through `expiry`.
        self.expiry.expire(&mut self.flows, self.current_slot, slot);
        // The links' cells of the expired slots read as 0 from now on (`LinkState::load_at`).
        self.current_slot = slot;
        Ok(())
    }

    /// The load of `link` in each of the K slots from the current one, in bit/s.
    pub fn link_load_bps(&self, link: LinkId) -> Result<Vec<u64>, SchedError> {
        let state = self.links.get(link).ok_or(SchedError::UnknownLink(link))?;
        let k = self.clock.horizon();
        Ok((0..k as u64)
            .map(|i| {
                let s = self.current_slot.saturating_add(i);
                state.load_at(s, k)
            })
            .collect())
    }

    /// Records a rate achieved on `link` in a past slot (one of the [`RATE_WINDOW_SLOTS`] slots
    /// before the current one). Samples of the same slot add up (several flows, or several
    /// agents reporting to one switch); the sum is app-limited only if every part was.
    pub fn record_rate(&mut self, link: LinkId, sample: RateSample) -> Result<(), SchedError> {
        let current_slot = self.current_slot;
        if sample.slot >= current_slot
            || sample.slot.saturating_add(RATE_WINDOW_SLOTS as u64) < current_slot
        {
            return Err(SchedError::SampleOutOfWindow {
                slot: sample.slot,
                current_slot,
            });
        }
        let state = self
            .links
            .get_mut(link)
            .ok_or(SchedError::UnknownLink(link))?;
        if let Some(cell) = state
            .samples
            .get_mut(ring_index(sample.slot, RATE_WINDOW_SLOTS))
        {
            *cell = Some(match *cell {
                Some(old) if old.slot == sample.slot => RateSample {
                    slot: old.slot,
                    rate_bps: old.rate_bps.saturating_add(sample.rate_bps),
                    app_limited: old.app_limited && sample.app_limited,
                },
                _ => sample,
            });
        }
        Ok(())
    }

    /// The bandwidth of `link` available to ML flows, in bit/s: the largest rate recorded over
    /// the past [`RATE_WINDOW_SLOTS`] slots if one of them was network-limited, else the link
    /// capacity; never above the capacity (see the module documentation).
    pub fn estimate_bps(&self, link: LinkId) -> Result<u64, SchedError> {
        let state = self.links.get(link).ok_or(SchedError::UnknownLink(link))?;
        Ok(self.estimate_of(state))
    }

    fn estimate_of(&self, state: &LinkState) -> u64 {
        let lo = self.current_slot.saturating_sub(RATE_WINDOW_SLOTS as u64);
        let mut max = 0u64;
        let mut limited = false;
        for s in state.samples.iter().flatten() {
            if s.slot >= lo && s.slot < self.current_slot {
                max = max.max(s.rate_bps);
                limited |= !s.app_limited;
            }
        }
        if limited {
            max.min(state.capacity_bps)
        } else {
            state.capacity_bps
        }
    }

    /// A plain-data copy of every link's capacity, estimate and load.
    pub fn snapshot(&self) -> TableSnapshot {
        let links = self
            .link_ids()
            .into_iter()
            .filter_map(|link| {
                let state = self.links.get(link)?;
                Some(LinkRow {
                    link,
                    capacity_bps: state.capacity_bps,
                    estimate_bps: self.estimate_of(state),
                    load_bps: self.link_load_bps(link).ok()?,
                })
            })
            .collect();
        TableSnapshot {
            current_slot: self.current_slot,
            flows: self.flows.len(),
            links,
        }
    }

    /// Bandwidth available to ML flows on `link` in `slot` (one of the horizon's), bit/s: its
    /// estimate less the load of every stored schedule there, as [`LinkLoadTable::link_views`]
    /// gives it with nothing excluded, without building views. Refuses an unknown link.
    pub fn available_bps_at(&self, link: LinkId, slot: u64) -> Result<u64, SchedError> {
        let state = self.links.get(link).ok_or(SchedError::UnknownLink(link))?;
        let k = self.clock.horizon();
        Ok(self
            .estimate_of(state)
            .saturating_sub(state.load_at(slot, k)))
    }

    /// What a group of flows sees of each of `links` over the K slots from the current one:
    /// per link, the load of the flows not in `exclude` and the available bandwidth (estimate
    /// less that load), in the order of `links`. Refuses an unknown link.
    pub fn link_views(
        &self,
        links: &[LinkId],
        exclude: &[FlowId],
    ) -> Result<Vec<LinkView>, SchedError> {
        let k = self.clock.horizon();
        // The excluded flows' stored entries, each looked up once.
        let mut own = exclude.iter().filter_map(|f| self.flows.get(f)).peekable();
        let mut out = Vec::with_capacity(links.len());
        for l in links {
            if !self.links.contains(*l) {
                return Err(SchedError::UnknownLink(*l));
            }
            out.push(LinkView {
                link: *l,
                load_bps: vec![0; k],
                available_bps: vec![0; k],
            });
        }
        // The excluded flows' load per link and slot (their schedules start at or after the
        // current slot, see `set_schedule` and `advance_to`), summed first in `available_bps`:
        // each flow's path is walked once, its links found in `links` by binary search.
        if own.peek().is_some() {
            let mut at: Vec<(LinkId, usize)> =
                links.iter().enumerate().map(|(i, l)| (*l, i)).collect();
            at.sort_unstable();
            for e in own {
                for l in &e.path {
                    let lo = at.partition_point(|x| x.0 < *l);
                    for &(x, i) in at.get(lo..).unwrap_or(&[]) {
                        if x != *l {
                            break;
                        }
                        let Some(v) = out.get_mut(i) else { continue };
                        for (t, m) in v.available_bps.iter_mut().enumerate() {
                            let slot = self.current_slot.saturating_add(t as u64);
                            *m = m.saturating_add(e.schedule.rate_bps_at(slot));
                        }
                    }
                }
            }
        }
        for v in &mut out {
            let Some(state) = self.links.get(v.link) else {
                continue;
            };
            let est = self.estimate_of(state);
            for (i, (load, avail)) in v
                .load_bps
                .iter_mut()
                .zip(v.available_bps.iter_mut())
                .enumerate()
            {
                let slot = self.current_slot.saturating_add(i as u64);
                let total = state.load_at(slot, k);
                *load = total.saturating_sub(*avail);
                *avail = est.saturating_sub(*load);
            }
        }
        Ok(out)
    }

    /// What a flow sees of `path` over the K slots from the current one: the other flows' path
    /// load and the available bandwidth. `exclude` names the flow being scheduled, whose own
    /// stored schedule (on the links of its stored path) is not counted as others' load.
    pub fn path_view(
        &self,
        path: &[LinkId],
        exclude: Option<FlowId>,
    ) -> Result<PathView, SchedError> {
        check_path(&self.links, path)?;
        let k = self.clock.horizon();
        let own = exclude.and_then(|f| self.flows.get(&f));
        let mut view = PathView {
            start_slot: self.current_slot,
            load_bps: vec![0; k],
            available_bps: vec![u64::MAX; k],
        };
        for l in path {
            let Some(state) = self.links.get(*l) else {
                continue;
            };
            let est = self.estimate_of(state);
            let own_here = own.filter(|e| e.path.contains(l)).map(|e| &e.schedule);
            for (i, (load, avail)) in view
                .load_bps
                .iter_mut()
                .zip(view.available_bps.iter_mut())
                .enumerate()
            {
                let slot = self.current_slot.saturating_add(i as u64);
                let total = state.load_at(slot, k);
                let mine = own_here.map_or(0, |s| s.rate_bps_at(slot));
                let others = total.saturating_sub(mine);
                *load = load.saturating_add(others);
                *avail = (*avail).min(est.saturating_sub(others));
            }
        }
        Ok(view)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;
    use proptest::sample::subsequence;
    use std::collections::BTreeMap;

    fn table() -> LinkLoadTable {
        let mut t = LinkLoadTable::new(SlotClock::new(1000, 4).unwrap(), 100);
        t.add_link(LinkId(1), 10_000).unwrap();
        t.add_link(LinkId(2), 5_000).unwrap();
        t
    }

    fn sched(start: u64, r: &[u64]) -> Schedule {
        Schedule {
            start_slot: start,
            rates_bps: r.to_vec(),
        }
    }

    #[test]
    fn admission_clips_to_what_is_left_and_replaces_the_own_schedule() {
        let mut t = table();
        // Two schedulers planned the same free 10 000 bit/s of link 1 in slot 100.
        let a = t
            .admit(FlowId(1), &[LinkId(1)], &sched(100, &[8_000, 8_000]))
            .unwrap();
        assert_eq!(a, sched(100, &[8_000, 8_000]));
        let b = t
            .admit(FlowId(2), &[LinkId(1)], &sched(100, &[8_000, 0, 9_000]))
            .unwrap();
        assert_eq!(b, sched(100, &[2_000, 0, 9_000]));
        assert_eq!(
            t.link_load_bps(LinkId(1)).unwrap(),
            vec![10_000, 8_000, 9_000, 0]
        );
        // A path takes its tightest link; the flow's own stored schedule does not count.
        let c = t
            .admit(
                FlowId(1),
                &[LinkId(1), LinkId(2)],
                &sched(100, &[6_000, 6_000, 6_000, 6_000]),
            )
            .unwrap();
        assert_eq!(c, sched(100, &[5_000, 5_000, 1_000, 5_000]));
        assert_eq!(
            t.link_load_bps(LinkId(1)).unwrap(),
            vec![7_000, 5_000, 10_000, 5_000]
        );
        assert_eq!(
            t.link_load_bps(LinkId(2)).unwrap(),
            vec![5_000, 5_000, 1_000, 5_000]
        );
        // Nothing left: an empty admitted schedule.
        let d = t
            .admit(FlowId(3), &[LinkId(2)], &sched(100, &[1, 1, 1, 1]))
            .unwrap();
        assert_eq!(d, sched(100, &[0, 0, 1]));
        assert!(t.admit(FlowId(4), &[LinkId(9)], &sched(100, &[1])).is_err());
    }

    #[test]
    fn available_at_a_slot_is_the_views_available_bandwidth() {
        let mut t = table();
        t.set_schedule(
            FlowId(1),
            &[LinkId(1), LinkId(2)],
            &sched(100, &[1_000, 6_000, 0, 2_000]),
        )
        .unwrap();
        t.set_schedule(FlowId(2), &[LinkId(1)], &sched(101, &[3_000]))
            .unwrap();
        t.advance_to(101).unwrap();
        let views = t.link_views(&[LinkId(1), LinkId(2)], &[]).unwrap();
        for v in &views {
            for (i, a) in v.available_bps.iter().enumerate() {
                assert_eq!(t.available_bps_at(v.link, 101 + i as u64).unwrap(), *a);
            }
        }
        assert_eq!(t.available_bps_at(LinkId(1), 101).unwrap(), 1_000);
        assert_eq!(t.available_bps_at(LinkId(2), 101).unwrap(), 0);
        assert_eq!(t.available_bps_at(LinkId(2), 102).unwrap(), 5_000);
        assert_eq!(
            t.available_bps_at(LinkId(7), 101),
            Err(SchedError::UnknownLink(LinkId(7)))
        );
    }

    #[test]
    fn add_replace_remove_expire() {
        let mut t = table();
        let (a, b) = (FlowId(7), FlowId(8));
        t.set_schedule(a, &[LinkId(1), LinkId(2)], &sched(100, &[1, 2, 3, 4, 5]))
            .unwrap();
        assert_eq!(t.link_load_bps(LinkId(1)).unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(t.flow_schedule(a).unwrap().rates_bps, vec![1, 2, 3, 4]);
        t.set_schedule(b, &[LinkId(1)], &sched(99, &[100, 10, 10]))
            .unwrap();
        assert_eq!(t.link_load_bps(LinkId(1)).unwrap(), vec![11, 12, 3, 4]);
        assert_eq!(t.link_load_bps(LinkId(2)).unwrap(), vec![1, 2, 3, 4]);
        // Replace a's schedule, on a shorter path.
        t.set_schedule(a, &[LinkId(2)], &sched(102, &[7])).unwrap();
        assert_eq!(t.link_load_bps(LinkId(1)).unwrap(), vec![10, 10, 0, 0]);
        assert_eq!(t.link_load_bps(LinkId(2)).unwrap(), vec![0, 0, 7, 0]);
        // Expire two slots: b is gone, a remains.
        t.advance_to(102).unwrap();
        assert_eq!(t.flow_count(), 1);
        assert_eq!(t.link_load_bps(LinkId(1)).unwrap(), vec![0, 0, 0, 0]);
        assert_eq!(t.link_load_bps(LinkId(2)).unwrap(), vec![7, 0, 0, 0]);
        // New slots at the end start empty.
        t.set_schedule(b, &[LinkId(1)], &sched(102, &[1, 1, 1, 1]))
            .unwrap();
        assert_eq!(t.link_load_bps(LinkId(1)).unwrap(), vec![1, 1, 1, 1]);
        assert_eq!(t.remove_flow(b).unwrap(), sched(102, &[1, 1, 1, 1]));
        assert_eq!(t.link_load_bps(LinkId(1)).unwrap(), vec![0; 4]);
        assert_eq!(t.remove_flow(b), Err(SchedError::UnknownFlow(b)));
        // A jump further than the horizon clears everything.
        t.advance_to(1000).unwrap();
        assert_eq!(t.flow_count(), 0);
        assert_eq!(t.link_load_bps(LinkId(2)).unwrap(), vec![0; 4]);
        assert_eq!(
            t.advance_to(999),
            Err(SchedError::SlotInPast {
                slot: 999,
                current_slot: 1000
            })
        );
    }

    #[test]
    fn expired_slots_of_a_kept_schedule_touch_no_later_slot() {
        // K = 4: slots 100 and 101 share their cells with 104 and 105.
        let mut t = table();
        let (a, b) = (FlowId(1), FlowId(2));
        t.set_schedule(a, &[LinkId(1)], &sched(100, &[1, 2, 3, 4]))
            .unwrap();
        t.advance_to(102).unwrap();
        // a still starts at 100; its slots 102 and 103 count.
        assert_eq!(t.flow_schedule(a).unwrap().rate_bps_at(102), 3);
        assert_eq!(t.link_load_bps(LinkId(1)).unwrap(), vec![3, 4, 0, 0]);
        t.set_schedule(b, &[LinkId(1)], &sched(102, &[0, 0, 7, 7]))
            .unwrap();
        assert_eq!(t.link_load_bps(LinkId(1)).unwrap(), vec![3, 4, 7, 7]);
        // Replacing or removing a takes off only its live slots.
        t.set_schedule(a, &[LinkId(1)], &sched(102, &[9])).unwrap();
        assert_eq!(t.link_load_bps(LinkId(1)).unwrap(), vec![9, 0, 7, 7]);
        t.set_schedule(a, &[LinkId(1)], &sched(102, &[1, 2, 3]))
            .unwrap();
        t.advance_to(103).unwrap();
        assert_eq!(t.remove_flow(a).unwrap(), sched(103, &[2, 3]));
        assert_eq!(t.link_load_bps(LinkId(1)).unwrap(), vec![0, 7, 7, 0]);
        // A schedule with nothing left is forgotten.
        t.advance_to(106).unwrap();
        assert_eq!(t.flow_count(), 0);
    }

    #[test]
    fn bad_paths_and_links_are_refused() {
        let mut t = table();
        let s = sched(100, &[1]);
        assert_eq!(
            t.set_schedule(FlowId(1), &[], &s),
            Err(SchedError::EmptyPath)
        );
        assert_eq!(
            t.set_schedule(FlowId(1), &[LinkId(9)], &s),
            Err(SchedError::UnknownLink(LinkId(9)))
        );
        assert_eq!(
            t.set_schedule(FlowId(1), &[LinkId(1), LinkId(2), LinkId(1)], &s),
            Err(SchedError::DuplicateLinkInPath(LinkId(1)))
        );
        assert_eq!(t.flow_count(), 0);
        assert!(t
            .add_link(LinkId(3), 0)
            .unwrap_err()
            .to_string()
            .contains("capacity_bps = 0"));
        t.set_schedule(FlowId(1), &[LinkId(2)], &s).unwrap();
        assert_eq!(
            t.remove_link(LinkId(2)),
            Err(SchedError::LinkInUse {
                link: LinkId(2),
                flow: FlowId(1)
            })
        );
        t.remove_link(LinkId(1)).unwrap();
        assert_eq!(t.link_ids(), vec![LinkId(2)]);
        assert_eq!(
            t.remove_link(LinkId(1)),
            Err(SchedError::UnknownLink(LinkId(1)))
        );
    }

    #[test]
    fn estimate_follows_the_largest_recent_network_limited_rate() {
        let mut t = table();
        let l = LinkId(1);
        assert_eq!(t.estimate_bps(l).unwrap(), 10_000);
        // App-limited samples alone leave the capacity.
        t.record_rate(
            l,
            RateSample {
                slot: 99,
                rate_bps: 3_000,
                app_limited: true,
            },
        )
        .unwrap();
        assert_eq!(t.estimate_bps(l).unwrap(), 10_000);
        // A network-limited one caps it at the largest sample of the window.
        t.record_rate(
            l,
            RateSample {
                slot: 98,
                rate_bps: 2_000,
                app_limited: false,
            },
        )
        .unwrap();
        assert_eq!(t.estimate_bps(l).unwrap(), 3_000);
        // Same-slot samples add up.
        t.record_rate(
            l,
            RateSample {
                slot: 98,
                rate_bps: 2_500,
                app_limited: true,
            },
        )
        .unwrap();
        assert_eq!(t.estimate_bps(l).unwrap(), 4_500);
        // Out of window.
        assert!(t
            .record_rate(
                l,
                RateSample {
                    slot: 100,
                    rate_bps: 1,
                    app_limited: false
                }
            )
            .is_err());
        assert!(t
            .record_rate(
                l,
                RateSample {
                    slot: 95,
                    rate_bps: 1,
                    app_limited: false
                }
            )
            .is_err());
        // Four slots later the samples have aged out.
        t.advance_to(102).unwrap();
        assert_eq!(t.estimate_bps(l).unwrap(), 4_500);
        t.advance_to(103).unwrap();
        assert_eq!(t.estimate_bps(l).unwrap(), 10_000);
        // Never above capacity.
        t.record_rate(
            l,
            RateSample {
                slot: 102,
                rate_bps: 50_000,
                app_limited: false,
            },
        )
        .unwrap();
        assert_eq!(t.estimate_bps(l).unwrap(), 10_000);
    }

    #[test]
    fn path_view_excludes_the_flow_itself() {
        let mut t = table();
        t.set_schedule(
            FlowId(1),
            &[LinkId(1), LinkId(2)],
            &sched(100, &[1000, 2000]),
        )
        .unwrap();
        t.set_schedule(FlowId(2), &[LinkId(1)], &sched(101, &[500]))
            .unwrap();
        let v = t
            .path_view(&[LinkId(1), LinkId(2)], Some(FlowId(1)))
            .unwrap();
        assert_eq!(v.load_bps, vec![0, 500, 0, 0]);
        assert_eq!(v.available_bps, vec![5_000, 5_000, 5_000, 5_000]);
        let v = t.path_view(&[LinkId(1), LinkId(2)], None).unwrap();
        assert_eq!(v.load_bps, vec![2000, 4500, 0, 0]);
        assert_eq!(v.available_bps, vec![4_000, 3_000, 5_000, 5_000]);
        let v = t.path_view(&[LinkId(1)], Some(FlowId(2))).unwrap();
        assert_eq!(v.available_bps, vec![9_000, 8_000, 10_000, 10_000]);
        assert_eq!(t.path_view(&[], None), Err(SchedError::EmptyPath));
        let snap = t.snapshot();
        assert_eq!(
            (snap.current_slot, snap.flows, snap.links.len()),
            (100, 2, 2)
        );
        assert_eq!(
            snap.links[1],
            LinkRow {
                link: LinkId(2),
                capacity_bps: 5_000,
                estimate_bps: 5_000,
                load_bps: vec![1000, 2000, 0, 0]
            }
        );
        let json = serde_json::to_string(&snap).unwrap();
        assert_eq!(serde_json::from_str::<TableSnapshot>(&json).unwrap(), snap);
    }

    #[test]
    fn links_of_small_and_large_ids_are_kept_apart_and_listed_in_order() {
        let mut t = table();
        let far = [
            LinkId(DENSE_LINK_IDS),
            LinkId(u32::MAX),
            LinkId(DENSE_LINK_IDS + 7),
        ];
        let near_edge = LinkId(DENSE_LINK_IDS - 1);
        for (i, l) in far.iter().chain([&near_edge, &LinkId(0)]).enumerate() {
            t.add_link(*l, 1_000 * (i as u64 + 1)).unwrap();
        }
        assert_eq!(
            t.link_ids(),
            vec![
                LinkId(0),
                LinkId(1),
                LinkId(2),
                near_edge,
                LinkId(DENSE_LINK_IDS),
                LinkId(DENSE_LINK_IDS + 7),
                LinkId(u32::MAX)
            ]
        );
        // A known link's capacity changes; its load stays.
        t.set_schedule(FlowId(1), &[LinkId(u32::MAX), LinkId(1)], &sched(100, &[5]))
            .unwrap();
        t.add_link(LinkId(u32::MAX), 9).unwrap();
        t.add_link(LinkId(1), 7).unwrap();
        assert_eq!(t.capacity_bps(LinkId(u32::MAX)), Ok(9));
        assert_eq!(t.capacity_bps(LinkId(1)), Ok(7));
        assert_eq!(t.link_load_bps(LinkId(u32::MAX)).unwrap(), vec![5, 0, 0, 0]);
        assert_eq!(t.link_load_bps(LinkId(1)).unwrap(), vec![5, 0, 0, 0]);
        // Unknown ids on both sides of the bound, and in the indexed range past its end.
        for l in [
            LinkId(3),
            LinkId(DENSE_LINK_IDS + 1),
            LinkId(DENSE_LINK_IDS - 2),
        ] {
            assert_eq!(t.capacity_bps(l), Err(SchedError::UnknownLink(l)));
            assert_eq!(t.remove_link(l), Err(SchedError::UnknownLink(l)));
        }
        // Links in use stay (the least crossing flow is named); the others go, and come back.
        t.set_schedule(FlowId(0), &[LinkId(u32::MAX)], &sched(100, &[1]))
            .unwrap();
        assert_eq!(
            t.remove_link(LinkId(u32::MAX)),
            Err(SchedError::LinkInUse {
                link: LinkId(u32::MAX),
                flow: FlowId(0)
            })
        );
        t.remove_link(LinkId(DENSE_LINK_IDS)).unwrap();
        t.remove_link(near_edge).unwrap();
        t.remove_link(LinkId(0)).unwrap();
        assert_eq!(
            t.capacity_bps(near_edge),
            Err(SchedError::UnknownLink(near_edge))
        );
        let rows: Vec<LinkId> = t.snapshot().links.iter().map(|r| r.link).collect();
        assert_eq!(
            rows,
            vec![
                LinkId(1),
                LinkId(2),
                LinkId(DENSE_LINK_IDS + 7),
                LinkId(u32::MAX)
            ]
        );
        t.add_link(LinkId(0), 3).unwrap();
        assert_eq!(t.link_load_bps(LinkId(0)).unwrap(), vec![0; 4]);
        assert_eq!(t.link_ids().first(), Some(&LinkId(0)));
    }

    /// The flows a table keeps, as the table kept them with a pass over every flow at each
    /// `advance_to`: the reference for the table's expiry index.
    struct FlowModel {
        current_slot: u64,
        horizon: u64,
        flows: BTreeMap<FlowId, Schedule>,
    }

    impl FlowModel {
        fn set(&mut self, flow: FlowId, s: &Schedule) {
            let first = s.start_slot.max(self.current_slot);
            let mut rates: Vec<u64> = (first..self.current_slot + self.horizon)
                .map(|slot| s.rate_bps_at(slot))
                .collect();
            while rates.last() == Some(&0) {
                rates.pop();
            }
            self.flows.insert(flow, sched(first, &rates));
        }

        fn advance_to(&mut self, slot: u64) {
            self.current_slot = slot;
            self.flows
                .retain(|_, s| s.start_slot + s.rates_bps.len() as u64 > slot);
        }
    }

    proptest! {
        #[test]
        fn expiry_forgets_the_same_flows_as_a_pass_over_every_flow(
            ops in vec((0u8..5, 0u64..6, subsequence(vec![0usize, 1, 2, 3], 1..=3), 0u64..8, vec(prop_oneof![Just(0u64), 1u64..3_000], 0..7)), 1..60),
        ) {
            // K = 4; links on both sides of the indexed range.
            let links = [LinkId(1), LinkId(2), LinkId(DENSE_LINK_IDS), LinkId(u32::MAX)];
            let mut t = table();
            t.add_link(links[2], 8_000).unwrap();
            t.add_link(links[3], 4_000).unwrap();
            let mut m = FlowModel { current_slot: 100, horizon: 4, flows: BTreeMap::new() };
            for (op, f, path, off, rates) in ops {
                let (flow, path): (FlowId, Vec<LinkId>) = (FlowId(f), path.iter().filter_map(|i| links.get(*i).copied()).collect());
                let s = sched((t.current_slot() + off).saturating_sub(2), &rates);
                match op {
                    0 | 1 => {
                        t.set_schedule(flow, &path, &s).unwrap();
                        m.set(flow, &s);
                    }
                    2 => {
                        let admitted = t.admit(flow, &path, &s).unwrap();
                        m.set(flow, &admitted);
                    }
                    3 => {
                        let got = t.remove_flow(flow).ok();
                        let want = m.flows.remove(&flow).map(|mut w| {
                            let cut = (t.current_slot() - w.start_slot.min(t.current_slot())) as usize;
                            w.rates_bps.drain(..cut.min(w.rates_bps.len()));
                            w.start_slot = w.start_slot.max(t.current_slot());
                            w
                        });
                        prop_assert_eq!(got, want);
                    }
                    _ => {
                        let slot = t.current_slot() + off % 6;
                        t.advance_to(slot).unwrap();
                        m.advance_to(slot);
                    }
                }
                prop_assert_eq!(t.flow_count(), m.flows.len());
                prop_assert_eq!(t.snapshot().flows, m.flows.len());
                for g in 0..6 {
                    prop_assert_eq!(t.flow_schedule(FlowId(g)), m.flows.get(&FlowId(g)));
                }
            }
            // Every entry goes once its slot has passed.
            t.advance_to(t.current_slot() + 100).unwrap();
            prop_assert_eq!(t.flow_count(), 0);
            prop_assert!(t.expiry.lists.iter().all(Vec::is_empty));
        }
    }
}
