// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Alg. 1 of "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers" (Sec. IV-B):
//! the initial schedule of one flow by the greedy least-path-load rule.
//!
//! The paper relaxes the per-iteration makespan problem to its dual (Eq. 10-11): a schedule s
//! costs β_s + Σ_t r_s(t) · λ(t), the completion slot plus the transmission cost, where the dual
//! variable λ_l(t) is the unit cost of bandwidth on link l in slot t, approximated by the path
//! load fed back by the switches. For each candidate completion slot β (offsets `0..K` of the
//! horizon, the current slot being 0) Alg. 1 sorts the slots up to β by cost, fills them in that
//! order with the largest feasible rate (`min over path links of u_l(t) − b_l(t)`, our
//! [`PathView::available_bps`]) until the flow's remaining bytes G are placed, and keeps the β of
//! least total cost.
//!
//! Our reading where the text leaves a choice:
//! - both terms of the cost are counted in slots, so that they can be added: β + 1 slots for
//!   completing at offset β, and, for the bytes b placed in slot t, the share of the slot they
//!   occupy times how loaded the path is, `b / bytes(ref) · load / ref` with `ref = load +
//!   available` (the path's bandwidth as the flow sees it). Sorting by this per-byte price is
//!   sorting by path load whenever `ref` is the same in every slot, as the paper states. Costs
//!   are fixed point ([`COST_ONE_SLOT_FX`] = one slot) in `u128`, so the agent, the switch and
//!   the simulator decide bit-for-bit alike. Without the β term (a literal reading of "pick the
//!   least transmission cost"), a flow always prefers the empty slots at the end of the horizon,
//!   which recede every slot: our property tests found ring and PS jobs that never finished;
//! - ties between slots of equal price go to the earlier slot, and ties between equal costs to
//!   the earlier β;
//! - when G does not fit in the horizon ("not enough available time slots"), the plan fills every
//!   slot to its available bandwidth and reports the rest as [`Plan::unscheduled_bytes`], to be
//!   planned in later slots as the horizon moves;
//! - per slot, the planned bytes are at most `bytes_in_slot(available)`, and the rate is the
//!   least rate that carries them (`rate_bps_for_bytes`), so it never exceeds the available
//!   bandwidth.
//!
//! Cost: O(K²) after one O(K log K) sort (the paper states O(K² log K) by sorting per β).

use serde::{Deserialize, Serialize};

use crate::error::SchedError;
use crate::slot::SlotClock;
use crate::table::{PathView, Schedule};

/// One slot in the fixed point of [`Plan::cost_fx`].
pub const COST_ONE_SLOT_FX: u128 = 1 << 48;

/// The price of one byte sent in a slot whose path load is `load_bps` and available bandwidth
/// `available_bps`, in [`COST_ONE_SLOT_FX`] units: `(load / ref) / bytes_in_slot(ref)` with
/// `ref = load + available`; 0 when `ref` carries no byte.
pub fn byte_price_fx(clock: &SlotClock, load_bps: u64, available_bps: u64) -> u128 {
    if load_bps == 0 {
        return 0;
    }
    let reference = u128::from(load_bps) + u128::from(available_bps);
    let ref_bytes = u128::from(clock.bytes_in_slot(u64::try_from(reference).unwrap_or(u64::MAX)));
    if ref_bytes == 0 {
        return 0;
    }
    // load <= reference, so the quotient is at most COST_ONE_SLOT_FX. One division by the
    // product, when it fits, is the two divisions: ⌊⌊a / b⌋ / c⌋ = ⌊a / (b·c)⌋.
    match reference.checked_mul(ref_bytes) {
        Some(d) => u128::from(load_bps) * COST_ONE_SLOT_FX / d,
        None => u128::from(load_bps) * COST_ONE_SLOT_FX / reference / ref_bytes,
    }
}

/// The cost of placing `bytes[i]` in slot offset `i` at the per-byte `prices_fx[i]`: the slots
/// up to the last busy one, plus the bytes times their prices, in [`COST_ONE_SLOT_FX`] units.
pub fn plan_cost_fx(bytes: &[u64], prices_fx: &[u128]) -> u128 {
    plan_cost_by(bytes, |i| prices_fx.get(i).copied().unwrap_or(0))
}

/// [`plan_cost_fx`] with the price of slot offset `i` given by `price_fx(i)` (no price list).
pub(crate) fn plan_cost_by(bytes: &[u64], price_fx: impl Fn(usize) -> u128) -> u128 {
    let slots = bytes
        .iter()
        .rposition(|b| *b > 0)
        .map_or(0, |i| i as u128 + 1);
    bytes
        .iter()
        .enumerate()
        // A slot without bytes adds nothing: its price (a 128-bit division) is not computed.
        .filter(|(_, b)| **b > 0)
        .fold(slots * COST_ONE_SLOT_FX, |c, (i, b)| {
            c.saturating_add(u128::from(*b).saturating_mul(price_fx(i)))
        })
}

/// A flow's plan over the horizon. Index `i` is slot `start_slot + i`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// First slot of the plan (the current slot).
    pub start_slot: u64,
    /// Bytes planned in each slot.
    pub bytes: Vec<u64>,
    /// Rate in each slot, bit/s: the least rate that carries `bytes[i]` in one slot.
    pub rates_bps: Vec<u64>,
    /// Bytes that did not fit in the horizon (0 when the plan completes the flow).
    pub unscheduled_bytes: u64,
    /// Cost of the plan in [`COST_ONE_SLOT_FX`] units: completion slot plus transmission cost
    /// (see the module documentation).
    pub cost_fx: u128,
}

impl Plan {
    /// True when every remaining byte is planned within the horizon.
    pub fn is_complete(&self) -> bool {
        self.unscheduled_bytes == 0
    }

    /// Offset of the last slot with bytes planned (the completion slot β when complete).
    pub fn last_busy_offset(&self) -> Option<usize> {
        self.bytes.iter().rposition(|b| *b > 0)
    }

    /// Total bytes planned over the horizon.
    pub fn scheduled_bytes(&self) -> u64 {
        self.bytes.iter().fold(0u64, |a, b| a.saturating_add(*b))
    }

    /// The rates as a [`Schedule`], to publish to the load tables.
    pub fn schedule(&self) -> Schedule {
        Schedule {
            start_slot: self.start_slot,
            rates_bps: self.rates_bps.clone(),
        }
    }
}

/// Checks that both per-slot arrays of `view` span the horizon.
pub(crate) fn check_view(clock: &SlotClock, view: &PathView) -> Result<(), SchedError> {
    let k = clock.horizon();
    if view.load_bps.len() != k {
        return Err(SchedError::LengthMismatch {
            what: "load_bps",
            expected: k,
            got: view.load_bps.len(),
        });
    }
    if view.available_bps.len() != k {
        return Err(SchedError::LengthMismatch {
            what: "available_bps",
            expected: k,
            got: view.available_bps.len(),
        });
    }
    Ok(())
}

/// Alg. 1: the initial schedule of a flow with `remaining_bytes` left, over the horizon of
/// `view` (the other flows' path load and the available bandwidth, per slot). Refuses a view
/// whose arrays do not span the horizon.
pub fn initial_schedule(
    clock: &SlotClock,
    remaining_bytes: u64,
    view: &PathView,
) -> Result<Plan, SchedError> {
    check_view(clock, view)?;
    Ok(greedy(clock, remaining_bytes, view, 0))
}

/// A plan whose first slot carries exactly `first_bytes` (at most `remaining_bytes` and at most
/// what the first slot's available bandwidth carries: the caller's duty) and whose later slots
/// carry the rest by Alg. 1. This is Alg. 2's "re-plan future slots". `view` must be checked.
pub(crate) fn with_first_slot(
    clock: &SlotClock,
    remaining_bytes: u64,
    view: &PathView,
    first_bytes: u64,
) -> Plan {
    let first = first_bytes.min(remaining_bytes);
    let mut plan = greedy(clock, remaining_bytes - first, view, 1);
    if let (Some(b), Some(r)) = (plan.bytes.first_mut(), plan.rates_bps.first_mut()) {
        *b = first;
        *r = clock.rate_bps_for_bytes(first);
    }
    plan.cost_fx = plan_cost_fx(&plan.bytes, &prices(clock, view));
    plan
}

pub(crate) fn prices(clock: &SlotClock, view: &PathView) -> Vec<u128> {
    view.load_bps
        .iter()
        .zip(&view.available_bps)
        .map(|(l, a)| byte_price_fx(clock, *l, *a))
        .collect()
}

/// Alg. 1 restricted to the slots at offsets `from..K`; the slots before `from` get nothing.
fn greedy(clock: &SlotClock, remaining_bytes: u64, view: &PathView, from: usize) -> Plan {
    let k = view.load_bps.len().min(view.available_bps.len());
    let slot_prices = prices(clock, view);
    let caps: Vec<u64> = view
        .available_bps
        .iter()
        .take(k)
        .map(|a| clock.bytes_in_slot(*a))
        .collect();
    let (bytes, unscheduled) = fill_slots(&slot_prices[..k], &caps, remaining_bytes, from);
    Plan {
        start_slot: view.start_slot,
        rates_bps: bytes
            .iter()
            .map(|b| {
                if *b == 0 {
                    0
                } else {
                    clock.rate_bps_for_bytes(*b)
                }
            })
            .collect(),
        cost_fx: plan_cost_fx(&bytes, &slot_prices),
        bytes,
        unscheduled_bytes: unscheduled,
    }
}

/// The core of Alg. 1 over abstract slots: `prices_fx[i]` is the price of one unit (byte) in
/// slot offset `i` ([`byte_price_fx`]), `caps[i]` the most units slot `i` carries. For each
/// candidate completion slot β in `from..K` the slots `from..=β` are filled cheapest first
/// (ties: earlier slot) with as much as they carry until `remaining` is placed; the least
/// cost (β + 1 slots plus units × price, [`plan_cost_fx`]) wins, the earlier β on ties. When
/// nothing completes within the horizon, every slot from `from` is filled. Returns the units
/// per slot (slots before `from` get 0) and the units left over. Shared by the one-flow
/// [`initial_schedule`] and the coflow planner ([`crate::coflow`]), so both are one Alg. 1.
pub(crate) fn fill_slots(
    prices_fx: &[u128],
    caps: &[u64],
    remaining: u64,
    from: usize,
) -> (Vec<u64>, u64) {
    let k = prices_fx.len().min(caps.len());
    let mut bytes = vec![0u64; k];
    if remaining == 0 || from >= k {
        return (bytes, remaining);
    }
    // (price per unit, offset, capacity in units) of the candidate slots, cheapest first.
    let mut order: Vec<(u128, usize, u64)> = (from..k)
        .map(|i| {
            (
                prices_fx.get(i).copied().unwrap_or(u128::MAX),
                i,
                caps.get(i).copied().unwrap_or(0),
            )
        })
        .collect();
    order.sort_unstable();

    // Candidate completion slots β: the least-cost complete schedule, earliest β on ties.
    let mut best: Option<(u128, usize)> = None;
    let mut cap_so_far = 0u64;
    for beta in from..k {
        cap_so_far = cap_so_far.saturating_add(caps.get(beta).copied().unwrap_or(0));
        if cap_so_far < remaining {
            continue; // infeasible by β
        }
        let mut rem = remaining;
        let mut cost = (beta as u128 + 1) * COST_ONE_SLOT_FX;
        for &(price, i, cap) in &order {
            if i > beta {
                continue;
            }
            let take = rem.min(cap);
            rem -= take;
            cost = cost.saturating_add(u128::from(take).saturating_mul(price));
            if rem == 0 {
                break;
            }
        }
        if best.is_none_or(|(c, _)| cost < c) {
            best = Some((cost, beta));
        }
        if best.is_some_and(|(c, _)| c <= (beta as u128 + 2) * COST_ONE_SLOT_FX) {
            break; // a later β costs at least its β + 1 slots
        }
    }
    // Not feasible within the horizon: send what fits everywhere.
    let beta = best.map_or(k - 1, |(_, b)| b);
    let mut rem = remaining;
    for &(_, i, cap) in &order {
        if i > beta || rem == 0 {
            continue;
        }
        let take = rem.min(cap);
        rem -= take;
        if let Some(b) = bytes.get_mut(i) {
            *b = take;
        }
    }
    (bytes, rem)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 8 s slots: one byte per slot per bit/s, so bytes and rates read the same.
    fn clock(k: usize) -> SlotClock {
        SlotClock::new(8_000_000, k).unwrap()
    }

    fn view(load: &[u64], avail: &[u64]) -> PathView {
        PathView {
            start_slot: 50,
            load_bps: load.to_vec(),
            available_bps: avail.to_vec(),
        }
    }

    #[test]
    fn empty_network_completes_earliest() {
        let p = initial_schedule(&clock(4), 25, &view(&[0; 4], &[10; 4])).unwrap();
        assert_eq!(p.bytes, vec![10, 10, 5, 0]);
        assert_eq!(p.rates_bps, p.bytes);
        assert!(p.is_complete());
        assert_eq!(p.last_busy_offset(), Some(2));
        assert_eq!(p.schedule().start_slot, 50);
    }

    #[test]
    fn loaded_slots_are_filled_last_within_the_completion_window() {
        // 15 bytes need two slots; of the first two, the idle one is filled first.
        let p = initial_schedule(&clock(4), 15, &view(&[90, 0, 0, 0], &[10; 4])).unwrap();
        assert_eq!(p.bytes, vec![5, 10, 0, 0]);
        let c = clock(4);
        assert_eq!(
            p.cost_fx,
            2 * COST_ONE_SLOT_FX + 5 * byte_price_fx(&c, 90, 10)
        );
        // A fuller first slot costs more than a slot of delay only when it is nearly all the
        // flow would send: 1 byte at 99 % load does not justify waiting a slot.
        let p = initial_schedule(&clock(2), 1, &view(&[99, 0], &[1, 1])).unwrap();
        assert_eq!(p.bytes, vec![1, 0]);
    }

    #[test]
    fn byte_prices() {
        let c = clock(1);
        assert_eq!(byte_price_fx(&c, 0, 10), 0);
        assert_eq!(byte_price_fx(&c, 0, 0), 0);
        assert_eq!(byte_price_fx(&c, 50, 50), COST_ONE_SLOT_FX / 2 / 100);
        assert_eq!(
            byte_price_fx(&c, u64::MAX, u64::MAX),
            COST_ONE_SLOT_FX / 2 / u128::from(u64::MAX)
        );
        assert_eq!(plan_cost_fx(&[0, 0], &[1, 1]), 0);
        assert_eq!(plan_cost_fx(&[0, 3], &[1, 2]), 2 * COST_ONE_SLOT_FX + 6);
    }

    #[test]
    fn infeasible_fills_everything_and_reports_the_rest() {
        let p = initial_schedule(&clock(3), 100, &view(&[3, 2, 1], &[10, 0, 20])).unwrap();
        assert_eq!(p.bytes, vec![10, 0, 20]);
        assert_eq!(p.unscheduled_bytes, 70);
        assert!(!p.is_complete());
    }

    #[test]
    fn zero_bytes_and_bad_views() {
        let p = initial_schedule(&clock(2), 0, &view(&[0, 0], &[1, 1])).unwrap();
        assert_eq!(p.bytes, vec![0, 0]);
        assert!(p.is_complete());
        let e = initial_schedule(&clock(3), 1, &view(&[0, 0], &[1, 1, 1])).unwrap_err();
        assert_eq!(
            e,
            SchedError::LengthMismatch {
                what: "load_bps",
                expected: 3,
                got: 2
            }
        );
    }

    #[test]
    fn rates_round_up_but_stay_under_available() {
        let c = SlotClock::new(60_000, 2).unwrap();
        // 1000 bit/s for 60 ms carries 7 bytes (7.5 rounded down).
        let p = initial_schedule(&c, 10, &view(&[0, 0], &[1000, 1000])).unwrap();
        assert_eq!(p.bytes, vec![7, 3]);
        assert_eq!(p.rates_bps, vec![934, 400]);
        assert!(p.rates_bps.iter().all(|r| *r <= 1000));
    }

    #[test]
    fn first_slot_fixed_rest_replanned() {
        let v = view(&[0, 5, 0, 0], &[10; 4]);
        let p = with_first_slot(&clock(4), 25, &v, 8);
        assert_eq!(p.bytes, vec![8, 7, 10, 0]);
        assert_eq!(p.unscheduled_bytes, 0);
    }
}
