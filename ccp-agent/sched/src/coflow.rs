// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Joint (coflow) planning: Alg. 1 and Alg. 2 of "Dynamic Flow Scheduling for DNN Training
//! Workloads in Data Centers" (Sec. IV-B, IV-C) generalised from one flow to a *group* of flows
//! of one job that must progress together, with the rates inside the group set as Varys's MADD
//! does ("Efficient Coflow Scheduling with Varys", SIGCOMM'14, Sec. 5.1: every member gets a
//! rate proportional to its remaining bytes, so all finish together at the group's bottleneck).
//!
//! ## Why
//!
//! Planned one flow at a time, Alg. 1 gives a shared link wholly to the flow planned first in
//! the slots it likes; its partners get later slots. For a ring all-reduce (a flow may run at
//! most one chunk ahead of its predecessor) or a parameter server (a broadcast carries only what
//! the slowest aggregation delivered), that leaves one fast flow with nothing it may send and
//! one crawling flow: the job advances at the pace of its slowest member anyway, and the
//! bandwidth given to the fast one is wasted.
//!
//! ## The group's Alg. 1 ([`decide_group`], first step)
//!
//! Members i with G_i bytes left, G = Σ G_i; on link l, D_l = Σ G_i over the members crossing
//! l and n_l their number (members with nothing left take no part). In slot t the group
//! advances by a fraction x_t of what it has left, every member by x_t · G_i, so in group
//! bytes X_t = x_t · G:
//! - capacity: X_t ≤ min over the group's links of B_l(t) · G / D_l, with B_l(t) the bytes
//!   link l carries in the slot for the group: `bytes_in_slot(a − (n_l − 1)) − (n_l − 1)`, a
//!   the link's available bandwidth (its estimate less the other flows' load). The two
//!   `n_l − 1` terms pay for rounding: each member's bytes are rounded to whole bytes and its
//!   rate up to a whole bit/s, and with them the members' bytes never exceed what the link
//!   carries in the slot nor their rates its available bandwidth. For one member they vanish;
//! - path load of the group in slot t: the sum over the *union* of the members' links of the
//!   other flows' load (each link counted once, as for one flow's path), and its available
//!   bandwidth min over those links of a_l · G / D_l (the rate of the whole group when the
//!   tightest link is full). The per-byte price is then [`byte_price_fx`] of the two, exactly as
//!   for one flow.
//!
//! Then Alg. 1's rule unchanged ([`crate::greedy`], one implementation for both): for each
//! candidate completion slot β, fill slots up to β cheapest first with the largest feasible X_t
//! until G is placed, cost = β + 1 slots + Σ X_t · price(t) (= Σ x_t · G · price: fraction
//! times load), keep the least-cost β. Member i gets, by slot t, ⌊G_i · C_t / G⌋ bytes, C_t =
//! Σ_{s ≤ t} X_s: whole bytes, each member's bytes sum to exactly G_i when the group completes,
//! every member with bytes left completes in the group's last slot β, and a member with 0 bytes
//! left gets nothing. A group of one is exactly [`crate::initial_schedule`].
//!
//! ## The group's Alg. 2 (our reading)
//!
//! Each member keeps its own dependency ([`Dependency`](crate::Dependency)) and Δ_i = (F − F_i)+ with F_i = sent
//! bytes + its initial current-slot bytes r_i, as in [`crate::decide`]. A member with Δ_i > 0
//! is raised, in member order, to r_i + Δ_i if that is below B_i and within its bytes left,
//! else to B_i (capped by its bytes left, never below r_i); B_i is r_i plus the headroom of its
//! tightest link in the current slot (B_l(0) less the current-slot bytes of the group's members
//! on l, less what earlier raises took). The later slots are then re-planned jointly with what
//! each member has left, so the group still finishes together. For a group of one B_i is the
//! slot's available bytes and this is [`crate::decide`] exactly.
//!
//! The receiver's cut (Alg. 2 lines 13-16) on a group, [`reduce_group`]: each member's
//! current-slot bytes lose its excess, and the later slots are re-planned jointly; for a group
//! of one it is [`crate::reduce`]. A PS's broadcast group is bounded this way by the least
//! accumulated bytes of its aggregation group (F_a^min), so the broadcast pipelines behind the
//! aggregation instead of waiting for the last push.
//!
//! ## Order of the groups of a slot
//!
//! The groups are planned one after the other against the table (a group sees the ones planned
//! before it). The order is Varys's smallest-effective-bottleneck-first (SEBF, Sec. 5.1):
//! [`effective_bottleneck_us`], the time the group's remaining bytes take at its bottleneck link
//! at full link rate, ascending, ties by the caller's group key. Computed from link capacities
//! and the groups' own bytes, it is the same order on every link, so one job's coflow completes
//! before the other's starts taking the shared links (interleaving) instead of both crawling.

use serde::{Deserialize, Serialize};

use crate::dependency::{finish, Decision, Outcome};
use crate::error::SchedError;
use crate::greedy::{byte_price_fx, fill_slots, plan_cost_by, plan_cost_fx, Plan};
use crate::planner::FlowRequest;
use crate::slot::SlotClock;
use crate::table::{LinkId, LinkView, PathView};

/// The outcome of the group's Alg. 2 for the current slot: one [`Decision`] per member, in
/// member order, and what the caller needs to apply them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupDecision {
    /// Per member: its plan over the horizon and its current-slot rate, as [`crate::decide`]
    /// gives for one flow.
    pub decisions: Vec<Decision>,
    /// Per member: its own path as the group saw it (load summed, available bandwidth the least
    /// over its links; the group's own schedules excluded), bit/s.
    pub views: Vec<PathView>,
    /// Per member: its MADD share of the current slot's available bandwidth, bit/s: the least
    /// over its links of a_l(0) · G_i / D_l. Pass it as `available_now_bps` to
    /// [`Decision::pacing_rate_bps`]: the members completing together in this slot then never
    /// pace above their link's available bandwidth together. One member: its available
    /// bandwidth.
    pub share_now_bps: Vec<u64>,
    /// The group's cost in [`crate::greedy::COST_ONE_SLOT_FX`] units: completion slot plus
    /// Σ X_t · price(t) (see the module documentation).
    pub cost_fx: u128,
}

/// The group's links as indices into `links`, per member; checks every array.
fn prepare(
    clock: &SlotClock,
    members: &[FlowRequest],
    links: &[LinkView],
) -> Result<Paths, SchedError> {
    let k = clock.horizon();
    for v in links {
        if v.load_bps.len() != k {
            return Err(SchedError::LengthMismatch {
                what: "load_bps",
                expected: k,
                got: v.load_bps.len(),
            });
        }
        if v.available_bps.len() != k {
            return Err(SchedError::LengthMismatch {
                what: "available_bps",
                expected: k,
                got: v.available_bps.len(),
            });
        }
    }
    paths_over(members, links.iter().map(|v| v.link))
}

/// The members' links as indices into `links` (the group's links, in that order), per member.
/// Refuses an empty path, a link not in `links` and a link listed twice in a path.
fn paths_over(
    members: &[FlowRequest],
    links: impl Iterator<Item = LinkId>,
) -> Result<Paths, SchedError> {
    let mut paths = Paths {
        idx: Vec::with_capacity(members.iter().map(|m| m.path.len()).sum()),
        at: Vec::with_capacity(members.len() + 1),
    };
    // The links sorted (with their first place), to find each path link by binary search.
    let mut sorted: Vec<(LinkId, usize)> = links.enumerate().map(|(i, l)| (l, i)).collect();
    sorted.sort_unstable();
    paths.at.push(0);
    for m in members {
        if m.path.is_empty() {
            return Err(SchedError::EmptyPath);
        }
        let start = paths.idx.len();
        for l in &m.path {
            let i = sorted
                .get(sorted.partition_point(|x| x.0 < *l))
                .filter(|x| x.0 == *l)
                .map(|x| x.1)
                .ok_or(SchedError::UnknownLink(*l))?;
            if paths.idx.get(start..).is_some_and(|p| p.contains(&i)) {
                return Err(SchedError::DuplicateLinkInPath(*l));
            }
            paths.idx.push(i);
        }
        paths.at.push(paths.idx.len());
    }
    Ok(paths)
}

/// The members' links as indices into the group's link views, every path in one buffer:
/// member i's are `idx[at[i]..at[i + 1]]`.
struct Paths {
    idx: Vec<usize>,
    at: Vec<usize>,
}

impl Paths {
    /// Member `i`'s links.
    fn get(&self, i: usize) -> Option<&[usize]> {
        self.idx.get(*self.at.get(i)?..*self.at.get(i + 1)?)
    }

    /// Every member's links, in member order.
    fn iter(&self) -> impl Iterator<Item = &[usize]> {
        self.at
            .windows(2)
            .map(|w| self.idx.get(w[0]..w[1]).unwrap_or(&[]))
    }
}

/// Bytes link `available_bps` carries in a slot for `n` members (see the module docs).
fn budget(clock: &SlotClock, available_bps: u64, n: u64) -> u64 {
    let slack = n.saturating_sub(1);
    clock
        .bytes_in_slot(available_bps.saturating_sub(slack))
        .saturating_sub(slack)
}

/// Alg. 1's bound on the group's bytes in a slot from one link (see the module docs):
/// B_l(t) · G / D_l, with `available_bps` a_l(t), `n` = n_l members and `d` = D_l bytes left on
/// the link, `g` = G bytes left in the group.
fn link_bound(clock: &SlotClock, available_bps: u64, n: u64, g: u128, d: u128) -> u64 {
    mul_div(budget(clock, available_bps, n), g, d)
}

/// `a · b / c` in `u128`, saturated to `u64` (`c > 0`).
fn mul_div(a: u64, b: u128, c: u128) -> u64 {
    // In 64 bits when the operands and the product fit: the same quotient without a 128-bit
    // division.
    if let (Ok(b), Ok(c)) = (u64::try_from(b), u64::try_from(c)) {
        if let Some(p) = a.checked_mul(b) {
            return p / c.max(1);
        }
    }
    u64::try_from(u128::from(a).saturating_mul(b) / c.max(1)).unwrap_or(u64::MAX)
}

/// Per link: (D_l, n_l) over the members with bytes left in `rem`.
fn demand(links: usize, idx: &Paths, rem: &[u64]) -> (Vec<u128>, Vec<u64>) {
    let mut d = vec![0u128; links];
    let mut n = vec![0u64; links];
    for (path, r) in idx.iter().zip(rem) {
        if *r == 0 {
            continue;
        }
        for &l in path {
            if let (Some(dl), Some(nl)) = (d.get_mut(l), n.get_mut(l)) {
                *dl += u128::from(*r);
                *nl += 1;
            }
        }
    }
    (d, n)
}

/// The group's Alg. 1 over slot offsets `from..K`: per member its bytes per slot, and the
/// group's cost. Slots before `from` get nothing.
fn fill_group(
    clock: &SlotClock,
    links: &[LinkView],
    idx: &Paths,
    rem: &[u64],
    from: usize,
) -> Result<(Vec<Vec<u64>>, u128), SchedError> {
    let k = clock.horizon();
    let g128: u128 = rem.iter().map(|r| u128::from(*r)).sum();
    let g = u64::try_from(g128).map_err(|_| SchedError::Overflow {
        what: "remaining bytes of the group",
    })?;
    let mut out = vec![vec![0u64; k]; rem.len()];
    if g == 0 {
        return Ok((out, 0));
    }
    let (d, n) = demand(links.len(), idx, rem);
    let used: Vec<usize> = (0..links.len())
        .filter(|l| d.get(*l).is_some_and(|x| *x > 0))
        .collect();
    let mut slot_prices = vec![0u128; k];
    let mut caps = vec![0u64; k];
    for t in 0..k {
        let mut load = 0u64;
        let mut avail_eq = u64::MAX;
        let mut cap = u64::MAX;
        for &l in &used {
            let (Some(v), Some(dl), Some(nl)) = (links.get(l), d.get(l), n.get(l)) else {
                continue;
            };
            let a = v.available_bps.get(t).copied().unwrap_or(0);
            load = load.saturating_add(v.load_bps.get(t).copied().unwrap_or(0));
            avail_eq = avail_eq.min(mul_div(a, g128, *dl));
            cap = cap.min(link_bound(clock, a, *nl, g128, *dl));
        }
        if let (Some(p), Some(c)) = (slot_prices.get_mut(t), caps.get_mut(t)) {
            *p = byte_price_fx(clock, load, avail_eq);
            *c = cap.min(g);
        }
    }
    let (x, _) = fill_slots(&slot_prices, &caps, g, from);
    // Member i has ⌊G_i · C_t / G⌋ bytes by slot t.
    for (member, r) in out.iter_mut().zip(rem) {
        let mut cum = 0u128;
        let mut before = 0u64;
        for (b, xt) in member.iter_mut().zip(&x) {
            cum += u128::from(*xt);
            let now = mul_div(*r, cum, g128);
            *b = now.saturating_sub(before);
            before = now;
        }
    }
    Ok((out, plan_cost_fx(&x, &slot_prices)))
}

/// Member `path`'s view over the group's link views.
fn member_view(start_slot: u64, k: usize, links: &[LinkView], path: &[usize]) -> PathView {
    let mut v = PathView {
        start_slot,
        load_bps: vec![0; k],
        available_bps: vec![u64::MAX; k],
    };
    for l in path.iter().filter_map(|l| links.get(*l)) {
        for (i, (vl, va)) in v
            .load_bps
            .iter_mut()
            .zip(v.available_bps.iter_mut())
            .enumerate()
        {
            *vl = vl.saturating_add(l.load_bps.get(i).copied().unwrap_or(0));
            *va = (*va).min(l.available_bps.get(i).copied().unwrap_or(0));
        }
    }
    v
}

/// A member's MADD share of the current slot: the least over its links (`path`, indices into
/// `links`) of a_l(0) · G_i / D_l (`d`: D_l per link, see [`demand`]).
fn share_now(links: &[LinkView], path: &[usize], remaining_bytes: u64, d: &[u128]) -> u64 {
    path.iter()
        .filter_map(|l| {
            let a = links.get(*l)?.available_bps.first().copied().unwrap_or(0);
            Some(mul_div(a, u128::from(remaining_bytes), *d.get(*l)?))
        })
        .min()
        .unwrap_or(0)
}

/// Per member of a group, its MADD share of the current slot's available bandwidth, bit/s, as
/// [`GroupDecision::share_now_bps`] gives it, without planning: the least over its links of
/// a_l(0) · G_i / D_l, `links` being the views of the members' links with the group's own
/// schedules excluded (Varys's MADD, SIGCOMM'14 Sec. 5.1; paced at by
/// [`crate::Decision::pacing_rate_bps`] when a plan completes a member in the current slot,
/// Alg. 1's "largest feasible rate", mlcc paper Sec. IV-B). Same refusals as
/// [`group_schedule`] except the overflow of the group's bytes.
pub fn group_share_now_bps(
    clock: &SlotClock,
    members: &[FlowRequest],
    links: &[LinkView],
) -> Result<Vec<u64>, SchedError> {
    let idx = prepare(clock, members, links)?;
    let rem: Vec<u64> = members.iter().map(|m| m.progress.remaining_bytes).collect();
    let (d, _) = demand(links.len(), &idx, &rem);
    Ok(idx
        .iter()
        .zip(&rem)
        .map(|(path, r)| share_now(links, path, *r, &d))
        .collect())
}

/// Builds the members' decisions from their per-slot bytes.
#[allow(clippy::too_many_arguments)]
fn assemble(
    clock: &SlotClock,
    start_slot: u64,
    members: &[FlowRequest],
    links: &[LinkView],
    idx: &Paths,
    bytes: Vec<Vec<u64>>,
    deltas: &[u64],
    outcomes: &[Outcome],
    cost_fx: u128,
) -> GroupDecision {
    let k = clock.horizon();
    let rem: Vec<u64> = members.iter().map(|m| m.progress.remaining_bytes).collect();
    let (d, _) = demand(links.len(), idx, &rem);
    let mut out = GroupDecision {
        decisions: Vec::with_capacity(members.len()),
        views: Vec::with_capacity(members.len()),
        share_now_bps: Vec::with_capacity(members.len()),
        cost_fx,
    };
    for (i, (m, b)) in members.iter().zip(bytes).enumerate() {
        let path = idx.get(i).unwrap_or(&[]);
        let view = member_view(start_slot, k, links, path);
        let scheduled = b.iter().fold(0u64, |a, x| a.saturating_add(*x));
        let plan = Plan {
            start_slot,
            rates_bps: b.iter().map(|x| clock.rate_bps_for_bytes(*x)).collect(),
            unscheduled_bytes: m.progress.remaining_bytes.saturating_sub(scheduled),
            cost_fx: plan_cost_by(&b, |t| {
                byte_price_fx(
                    clock,
                    view.load_bps.get(t).copied().unwrap_or(0),
                    view.available_bps.get(t).copied().unwrap_or(0),
                )
            }),
            bytes: b,
        };
        let share = share_now(links, path, m.progress.remaining_bytes, &d);
        let delta = deltas.get(i).copied().unwrap_or(0);
        let outcome = outcomes.get(i).copied().unwrap_or(Outcome::Initial);
        out.decisions
            .push(finish(plan, &m.progress, delta, outcome));
        out.views.push(view);
        out.share_now_bps.push(share);
    }
    out
}

/// Re-plans slots `1..K` jointly after the members' current-slot bytes were fixed to `first`.
fn with_first_slots(
    clock: &SlotClock,
    links: &[LinkView],
    idx: &Paths,
    members: &[FlowRequest],
    first: &[u64],
) -> Result<(Vec<Vec<u64>>, u128), SchedError> {
    let rest: Vec<u64> = members
        .iter()
        .zip(first)
        .map(|(m, f)| m.progress.remaining_bytes.saturating_sub(*f))
        .collect();
    let (mut bytes, cost) = fill_group(clock, links, idx, &rest, 1)?;
    for (b, f) in bytes.iter_mut().zip(first) {
        if let Some(b0) = b.first_mut() {
            *b0 = *f;
        }
    }
    Ok((bytes, cost))
}

/// True when every kept slot holds the group at nothing (see [`extend_group_bytes`]).
pub(crate) fn waiting(kept_bytes: &[&[u64]]) -> bool {
    kept_bytes.iter().all(|b| b.iter().all(|x| *x == 0))
}

/// The common length of `kept_bytes` (see [`extend_group_bytes`]): one list per member (of
/// `members`), all of one length at most K.
pub(crate) fn check_kept(
    clock: &SlotClock,
    members: usize,
    kept_bytes: &[&[u64]],
) -> Result<usize, SchedError> {
    if kept_bytes.len() != members {
        return Err(SchedError::MemberCountMismatch {
            what: "kept_bytes",
            expected: members,
            got: kept_bytes.len(),
        });
    }
    let kept = kept_bytes.first().map_or(0, |b| b.len());
    match kept_bytes
        .iter()
        .find(|b| b.len() != kept || b.len() > clock.horizon())
    {
        Some(b) => Err(SchedError::LengthMismatch {
            what: "kept_bytes",
            expected: kept.min(clock.horizon()),
            got: b.len(),
        }),
        None => Ok(kept),
    }
}

/// True when, in every slot from offset `from` of the horizon, Alg. 1's bound on the group's
/// bytes (the least over its `links` of [`link_bound`]) is 0 with `available_bps(l, t)` the
/// bandwidth available on link `l` (an index into `links`) in slot offset `t`: the group's fill
/// of those slots ([`fill_group`]) is then 0 for every member. Refuses a path as
/// [`group_schedule`] does.
pub(crate) fn held_from(
    clock: &SlotClock,
    members: &[FlowRequest],
    links: &[LinkId],
    from: usize,
    mut available_bps: impl FnMut(LinkId, usize) -> Result<u64, SchedError>,
) -> Result<bool, SchedError> {
    let idx = paths_over(members, links.iter().copied())?;
    let rem: Vec<u64> = members.iter().map(|m| m.progress.remaining_bytes).collect();
    let g: u128 = rem.iter().map(|r| u128::from(*r)).sum();
    let (d, n) = demand(links.len(), &idx, &rem);
    for t in from..clock.horizon() {
        let mut held = false;
        for ((l, dl), nl) in links.iter().zip(&d).zip(&n) {
            if *dl > 0 && link_bound(clock, available_bps(*l, t)?, *nl, g, *dl) == 0 {
                held = true;
                break;
            }
        }
        if !held {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Rolling a kept plan forward (used by the simulator's plan reuse; our extension, not in the
/// paper): a group whose plan did not complete within the horizon, planned `K - kept` slots
/// ago, keeps its bytes for the `kept` slots of that plan still in the horizon (`kept_bytes[i]`,
/// member i, offsets `0..kept` from the current slot) and gets, in the slots that joined the
/// horizon since (offsets `kept..K`), what Alg. 1 gives there: `fill_group` from `kept` for
/// the bytes the kept slots leave, every such slot filled with the largest feasible X_t.
///
/// This is what re-planning the group would give while its plan is *still incomplete* after
/// the new slots and nothing it was planned against changed: Alg. 1 fills every slot when the
/// bytes do not fit the horizon, the free capacity of the kept slots is what the group holds
/// there, and the members' bytes left shrink in proportion (MADD), so each link's bound
/// B_l(t) · G / D_l is unchanged. The members' dependencies (Alg. 2) are not re-applied.
///
/// A group held at nothing in every kept slot (its kept bytes all 0: its links were booked
/// by others) is the exception: those slots carry nothing for it, so Alg. 1 over the whole
/// horizon never puts bytes there nor completes in them, and its fill from `kept` is the
/// re-plan's also when the group completes within the horizon.
///
/// `members[i].progress.remaining_bytes` is member i's bytes left now (the kept slots
/// included); `links` as for [`group_schedule`]. Returns per member its bytes over the whole
/// horizon, or `None` when the group (not held at nothing) would complete within the horizon
/// (Alg. 1's choice of the completion slot then spans every slot: re-plan it). Same refusals
/// as [`group_schedule`], and [`SchedError::MemberCountMismatch`] /
/// [`SchedError::LengthMismatch`] for `kept_bytes` not one list per member of one common
/// length at most K.
pub fn extend_group_bytes(
    clock: &SlotClock,
    members: &[FlowRequest],
    links: &[LinkView],
    kept_bytes: &[&[u64]],
) -> Result<Option<Vec<Vec<u64>>>, SchedError> {
    let kept = check_kept(clock, members.len(), kept_bytes)?;
    let idx = prepare(clock, members, links)?;
    let rest: Vec<u64> = members
        .iter()
        .zip(kept_bytes)
        .map(|(m, b)| {
            let held = b.iter().fold(0u64, |a, x| a.saturating_add(*x));
            m.progress.remaining_bytes.saturating_sub(held)
        })
        .collect();
    let (mut bytes, _) = fill_group(clock, links, &idx, &rest, kept)?;
    let placed: u128 = bytes.iter().flatten().map(|b| u128::from(*b)).sum();
    let wanted: u128 = rest.iter().map(|r| u128::from(*r)).sum();
    if placed >= wanted && !waiting(kept_bytes) {
        return Ok(None);
    }
    for (b, h) in bytes.iter_mut().zip(kept_bytes) {
        for (x, y) in b.iter_mut().zip(h.iter()) {
            *x = *y;
        }
    }
    Ok(Some(bytes))
}

/// The checked group (its links per member) and its Alg. 1 plan from the current slot.
type Initial = (Paths, Vec<Vec<u64>>, u128);

fn initial(
    clock: &SlotClock,
    members: &[FlowRequest],
    links: &[LinkView],
) -> Result<Initial, SchedError> {
    let idx = prepare(clock, members, links)?;
    let rem: Vec<u64> = members.iter().map(|m| m.progress.remaining_bytes).collect();
    let (bytes, cost) = fill_group(clock, links, &idx, &rem, 0)?;
    Ok((idx, bytes, cost))
}

/// Alg. 1 for a group (a coflow): the joint plan of `members` over the horizon against
/// `links`, the views of every link of the members' paths with the group's own schedules
/// excluded; `start_slot` is the views' first slot. The members' dependencies are not applied.
/// Refuses an empty path, a link listed twice in a path or missing from `links`, views that do
/// not span the horizon, and a group whose bytes left sum past `u64::MAX`.
pub fn group_schedule(
    clock: &SlotClock,
    start_slot: u64,
    members: &[FlowRequest],
    links: &[LinkView],
) -> Result<GroupDecision, SchedError> {
    let (idx, bytes, cost) = initial(clock, members, links)?;
    let none = vec![0; members.len()];
    let outcomes = vec![Outcome::Initial; members.len()];
    Ok(assemble(
        clock, start_slot, members, links, &idx, bytes, &none, &outcomes, cost,
    ))
}

/// Alg. 2 for a group: [`group_schedule`], then each member with a dependency delta raised in
/// the current slot up to its share of the available bandwidth, and the later slots re-planned
/// jointly (see the module documentation). A group of one decides as [`crate::decide`]. Same
/// refusals as [`group_schedule`].
pub fn decide_group(
    clock: &SlotClock,
    start_slot: u64,
    members: &[FlowRequest],
    links: &[LinkView],
) -> Result<GroupDecision, SchedError> {
    let (idx, bytes, cost) = initial(clock, members, links)?;
    let rem: Vec<u64> = members.iter().map(|m| m.progress.remaining_bytes).collect();
    let r: Vec<u64> = bytes
        .iter()
        .map(|b| b.first().copied().unwrap_or(0))
        .collect();
    let deltas: Vec<u64> = members
        .iter()
        .zip(&r)
        .map(|(m, ri)| {
            m.dependency
                .delta_bytes(m.progress.sent_bytes.saturating_add(*ri))
        })
        .collect();
    let mut outcomes = vec![Outcome::Initial; members.len()];
    if deltas.iter().all(|d| *d == 0) {
        return Ok(assemble(
            clock, start_slot, members, links, &idx, bytes, &deltas, &outcomes, cost,
        ));
    }
    // Headroom of each link in the current slot: what it carries for the group, less the
    // members' current-slot bytes on it.
    let (_, n) = demand(links.len(), &idx, &rem);
    let mut headroom: Vec<u64> = links
        .iter()
        .zip(&n)
        .map(|(v, nl)| budget(clock, v.available_bps.first().copied().unwrap_or(0), *nl))
        .collect();
    for (path, ri) in idx.iter().zip(&r) {
        for &l in path {
            if let Some(h) = headroom.get_mut(l) {
                *h = h.saturating_sub(*ri);
            }
        }
    }
    let mut first = r.clone();
    for i in 0..members.len() {
        let (Some(m), Some(path), Some(&delta), Some(&ri)) =
            (members.get(i), idx.get(i), deltas.get(i), r.get(i))
        else {
            continue;
        };
        if delta == 0 {
            continue;
        }
        let h = path
            .iter()
            .filter_map(|l| headroom.get(*l))
            .copied()
            .min()
            .unwrap_or(0);
        let b_i = ri.saturating_add(h);
        let wanted = ri.saturating_add(delta);
        let rem_i = m.progress.remaining_bytes;
        let (now, outcome) = if wanted < b_i && wanted <= rem_i {
            (wanted, Outcome::Raised)
        } else {
            (b_i.min(rem_i).max(ri), Outcome::Capped)
        };
        for &l in path {
            if let Some(hl) = headroom.get_mut(l) {
                *hl = hl.saturating_sub(now - ri);
            }
        }
        if let (Some(f), Some(o)) = (first.get_mut(i), outcomes.get_mut(i)) {
            *f = now;
            *o = outcome;
        }
    }
    let (bytes, cost) = with_first_slots(clock, links, &idx, members, &first)?;
    Ok(assemble(
        clock, start_slot, members, links, &idx, bytes, &deltas, &outcomes, cost,
    ))
}

/// The receiver's cut (Alg. 2 lines 13-16) on a group: member i's current-slot bytes in
/// `current` (decided for `members` against `links` in this slot) lose `excess_bytes[i]` (at
/// most all of them), and the later slots are re-planned jointly. Members cut are marked
/// [`Outcome::Reduced`]. A group of one is [`crate::reduce`]. Refuses `current` or
/// `excess_bytes` not one per member, besides [`group_schedule`]'s refusals.
pub fn reduce_group(
    clock: &SlotClock,
    start_slot: u64,
    members: &[FlowRequest],
    links: &[LinkView],
    current: &GroupDecision,
    excess_bytes: &[u64],
) -> Result<GroupDecision, SchedError> {
    let idx = prepare(clock, members, links)?;
    let m = members.len();
    if current.decisions.len() != m {
        return Err(SchedError::MemberCountMismatch {
            what: "decisions",
            expected: m,
            got: current.decisions.len(),
        });
    }
    if excess_bytes.len() != m {
        return Err(SchedError::MemberCountMismatch {
            what: "excess_bytes",
            expected: m,
            got: excess_bytes.len(),
        });
    }
    if excess_bytes.iter().all(|e| *e == 0) {
        return Ok(current.clone());
    }
    let first: Vec<u64> = current
        .decisions
        .iter()
        .zip(excess_bytes)
        .map(|(d, e)| {
            d.plan
                .bytes
                .first()
                .copied()
                .unwrap_or(0)
                .saturating_sub(*e)
        })
        .collect();
    let deltas: Vec<u64> = current.decisions.iter().map(|d| d.delta_bytes).collect();
    let outcomes: Vec<Outcome> = current
        .decisions
        .iter()
        .zip(excess_bytes)
        .map(|(d, e)| if *e > 0 { Outcome::Reduced } else { d.outcome })
        .collect();
    let (bytes, cost) = with_first_slots(clock, links, &idx, members, &first)?;
    Ok(assemble(
        clock, start_slot, members, links, &idx, bytes, &deltas, &outcomes, cost,
    ))
}

/// A coflow unit's place in a slot's planning order, as [`planning_key`] gives it: the fraction
/// of its iteration done (1/1024 steps, reversed so that more done sorts first), then its
/// effective bottleneck in microseconds.
pub type PlanningKey = (core::cmp::Reverse<u16>, u64);

/// The planning-order key of a coflow unit (a ring, or a PS's aggregation and broadcast):
/// units further into their iteration first, then smallest effective bottleneck first; sort
/// keys ascending. `sent_bytes` and `iteration_bytes` are summed over the unit's flows (the
/// fraction done is taken in 1/1024 steps, so bytes in flight do not reorder units that are
/// level); `bottleneck_us` is [`effective_bottleneck_us`].
///
/// Why not SEBF alone: planned smallest-bottleneck-first in every slot, a large coflow (a
/// parameter server's aggregation, whose bytes all cross the PS's downlink) is planned after
/// every smaller one, and each slot the smaller ones take the slots it had planned: it starves
/// while they run (seen in the VM testbed, a PS job with no iteration while two ring jobs ran).
/// Ordering by the fraction of the iteration done is the principle of MLTCP (the flow further
/// into its iteration gets more bandwidth, so jobs slide into an interleaved order; Rajasekaran,
/// MIT thesis, ch. 1 and 5) and, like FIFO (Baraat, SIGCOMM'14), it is free of starvation: a
/// unit that has started keeps its place ahead of every unit that has not. SEBF still decides
/// between units at the same point of their iterations, e.g. between jobs that start together.
pub fn planning_key(sent_bytes: u64, iteration_bytes: u64, bottleneck_us: u64) -> PlanningKey {
    let done_fx = if iteration_bytes == 0 {
        0
    } else {
        (u128::from(sent_bytes.min(iteration_bytes)) * 1024 / u128::from(iteration_bytes)) as u16
    };
    (core::cmp::Reverse(done_fx), bottleneck_us)
}

/// Varys's effective bottleneck of a group (SIGCOMM'14, Sec. 5.1), in microseconds: the most,
/// over the links l of the members' paths, of the time D_l bytes (the members' bytes left
/// crossing l) take at `rate_bps(l)` (a link's capacity, for an order that is the same on every
/// link). 0 for a group with nothing left; `u64::MAX` when a link it needs has rate 0. Groups
/// planned in increasing order of it (ties by a fixed group key) are smallest-effective-
/// bottleneck-first. Refuses a link for which `rate_bps` has no answer.
pub fn effective_bottleneck_us(
    members: &[FlowRequest],
    rate_bps: impl Fn(LinkId) -> Option<u64>,
) -> Result<u64, SchedError> {
    let mut per_link: Vec<(LinkId, u128)> = Vec::new();
    for m in members.iter().filter(|m| m.progress.remaining_bytes > 0) {
        for l in &m.path {
            match per_link.iter_mut().find(|(x, _)| x == l) {
                Some((_, d)) => *d += u128::from(m.progress.remaining_bytes),
                None => per_link.push((*l, u128::from(m.progress.remaining_bytes))),
            }
        }
    }
    let mut worst = 0u64;
    for (l, d) in per_link {
        let rate = rate_bps(l).ok_or(SchedError::UnknownLink(l))?;
        let us = if rate == 0 {
            u64::MAX
        } else {
            u64::try_from((d * 8_000_000).div_ceil(u128::from(rate))).unwrap_or(u64::MAX)
        };
        worst = worst.max(us);
    }
    Ok(worst)
}

#[cfg(test)]
mod tests {
    #[test]
    fn planning_key_orders_by_progress_then_bottleneck() {
        let mut units = [
            ("fresh ring", planning_key(0, 2_000_000, 160_000)),
            ("half-done PS", planning_key(1_700_000, 3_400_000, 140_000)),
            ("fresh small", planning_key(0, 1_000_000, 80_000)),
            ("nearly done", planning_key(1_900_000, 2_000_000, 8_000)),
        ];
        units.sort_by_key(|u| u.1);
        let order: Vec<&str> = units.iter().map(|u| u.0).collect();
        assert_eq!(
            order,
            ["nearly done", "half-done PS", "fresh small", "fresh ring"]
        );
        // Nothing to send: no progress, never a division by zero; bytes beyond the iteration
        // count as done.
        assert_eq!(planning_key(5, 0, 3), (core::cmp::Reverse(0), 3));
        assert_eq!(planning_key(9, 4, 3), (core::cmp::Reverse(1024), 3));
    }

    use super::*;
    use crate::dependency::{Dependency, FlowProgress};
    use crate::table::FlowId;

    /// 8 s slots: one byte per slot per bit/s.
    fn clock(k: usize) -> SlotClock {
        SlotClock::new(8_000_000, k).unwrap()
    }

    fn member(f: u64, path: &[u32], rem: u64) -> FlowRequest {
        FlowRequest {
            flow: FlowId(f),
            path: path.iter().map(|l| LinkId(*l)).collect(),
            progress: FlowProgress {
                sent_bytes: 0,
                remaining_bytes: rem,
            },
            dependency: Dependency::Independent,
        }
    }

    fn link(l: u32, load: &[u64], avail: &[u64]) -> LinkView {
        LinkView {
            link: LinkId(l),
            load_bps: load.to_vec(),
            available_bps: avail.to_vec(),
        }
    }

    #[test]
    fn two_pushes_into_one_ps_link_share_it_and_finish_together() {
        // Two workers push 30 bytes each into the PS's downlink (link 9, 20 bytes a slot); each
        // also crosses its own uplink.
        let links = [
            link(1, &[0; 4], &[100; 4]),
            link(2, &[0; 4], &[100; 4]),
            link(9, &[0; 4], &[20; 4]),
        ];
        let g = [member(1, &[1, 9], 30), member(2, &[2, 9], 30)];
        let d = decide_group(&clock(4), 7, &g, &links).unwrap();
        // Budget of the PS link for 2 members: bytes_in_slot(20 − 1) − 1 = 18.
        assert_eq!(d.decisions[0].plan.bytes, vec![9, 9, 9, 3]);
        assert_eq!(d.decisions[1].plan.bytes, d.decisions[0].plan.bytes);
        assert_eq!(d.decisions[0].plan.last_busy_offset(), Some(3));
        assert_eq!(d.share_now_bps, vec![10, 10]);
        // The same shares without planning.
        assert_eq!(
            group_share_now_bps(&clock(4), &g, &links).unwrap(),
            d.share_now_bps
        );
        let uneven = [member(1, &[1, 9], 10), member(2, &[2, 9], 30)];
        let e = decide_group(&clock(4), 7, &uneven, &links).unwrap();
        assert_eq!(e.share_now_bps, vec![5, 15]);
        assert_eq!(
            group_share_now_bps(&clock(4), &uneven, &links).unwrap(),
            e.share_now_bps
        );
        assert!(d
            .decisions
            .iter()
            .all(|x| x.plan.is_complete() && x.plan.start_slot == 7));
    }

    #[test]
    fn a_member_with_nothing_left_gets_nothing() {
        let links = [link(1, &[0; 3], &[10; 3])];
        let g = [member(1, &[1], 0), member(2, &[1], 15)];
        let d = group_schedule(&clock(3), 0, &g, &links).unwrap();
        assert_eq!(d.decisions[0].plan.bytes, vec![0, 0, 0]);
        assert_eq!(d.decisions[1].plan.bytes, vec![10, 5, 0]);
        let none = group_schedule(&clock(3), 0, &[member(1, &[1], 0)], &links).unwrap();
        assert!(none.decisions[0].plan.is_complete());
        assert!(group_schedule(&clock(3), 0, &[], &links)
            .unwrap()
            .decisions
            .is_empty());
    }

    #[test]
    fn bad_input_is_refused_with_its_value() {
        let links = [link(1, &[0; 3], &[10; 3])];
        let c = clock(3);
        assert_eq!(
            group_schedule(&c, 0, &[member(1, &[2], 1)], &links),
            Err(SchedError::UnknownLink(LinkId(2)))
        );
        assert_eq!(
            group_schedule(&c, 0, &[member(1, &[], 1)], &links),
            Err(SchedError::EmptyPath)
        );
        assert_eq!(
            group_schedule(&c, 0, &[member(1, &[1, 1], 1)], &links),
            Err(SchedError::DuplicateLinkInPath(LinkId(1)))
        );
        let short = [link(1, &[0; 2], &[10; 3])];
        assert_eq!(
            group_schedule(&c, 0, &[member(1, &[1], 1)], &short),
            Err(SchedError::LengthMismatch {
                what: "load_bps",
                expected: 3,
                got: 2
            })
        );
        let big = [member(1, &[1], u64::MAX), member(2, &[1], 1)];
        assert_eq!(
            group_schedule(&c, 0, &big, &links),
            Err(SchedError::Overflow {
                what: "remaining bytes of the group"
            })
        );
        let g = [member(1, &[1], 5)];
        let d = group_schedule(&c, 0, &g, &links).unwrap();
        let e = reduce_group(&c, 0, &g, &links, &d, &[]).unwrap_err();
        assert_eq!(
            e,
            SchedError::MemberCountMismatch {
                what: "excess_bytes",
                expected: 1,
                got: 0
            }
        );
        assert!(e.to_string().contains("excess_bytes has 0 entries"));
        assert_eq!(
            effective_bottleneck_us(&g, |_| None),
            Err(SchedError::UnknownLink(LinkId(1)))
        );
    }

    #[test]
    fn a_lagging_member_is_raised_and_the_group_replanned() {
        // A loaded first slot: the group puts 4 of its 200 bytes there (budget 98 a slot).
        let links = [link(1, &[90, 0, 0], &[100; 3])];
        let mut g = [member(1, &[1], 100), member(2, &[1], 100)];
        let d = decide_group(&clock(3), 0, &g, &links).unwrap();
        assert_eq!(d.decisions[0].plan.bytes, vec![2, 49, 49]);
        g[1].dependency = Dependency::Ring {
            predecessor_bytes: 70,
        };
        let d = decide_group(&clock(3), 0, &g, &links).unwrap();
        // Member 2 raised by 68 to 70, within the slot's headroom of 94.
        assert_eq!(d.decisions[1].delta_bytes, 68);
        assert_eq!(d.decisions[1].outcome, Outcome::Raised);
        assert_eq!(d.decisions[1].plan.bytes, vec![70, 22, 8]);
        assert_eq!(d.decisions[0].plan.bytes, vec![2, 75, 23]);
        // A raise past the headroom is capped at it.
        g[1].dependency = Dependency::Ring {
            predecessor_bytes: 1000,
        };
        let c = decide_group(&clock(3), 0, &g, &links).unwrap();
        assert_eq!(
            (c.decisions[1].outcome, c.decisions[1].plan.bytes[0]),
            (Outcome::Capped, 96)
        );
        for x in &d.decisions {
            assert!(x.plan.is_complete());
        }
        assert_eq!(
            d.decisions[0].plan.last_busy_offset(),
            d.decisions[1].plan.last_busy_offset()
        );
        // The receiver's cut of member 2 by 30 bytes.
        let r = reduce_group(&clock(3), 0, &g, &links, &d, &[0, 30]).unwrap();
        assert_eq!(r.decisions[1].plan.bytes[0], 40);
        assert_eq!(r.decisions[1].outcome, Outcome::Reduced);
        assert_eq!(r.decisions[1].accumulated_bytes, 40);
        assert_eq!(r.decisions[0].outcome, Outcome::Initial);
        assert_eq!(
            reduce_group(&clock(3), 0, &g, &links, &d, &[0, 0]).unwrap(),
            d
        );
    }

    #[test]
    fn bottleneck_order() {
        let g = [member(1, &[1, 9], 30), member(2, &[2, 9], 30)];
        // 60 bytes on link 9 at 480 bit/s: 1 s.
        assert_eq!(
            effective_bottleneck_us(&g, |l| Some(if l.0 == 9 { 480 } else { 8000 })).unwrap(),
            1_000_000
        );
        assert_eq!(effective_bottleneck_us(&g, |_| Some(0)).unwrap(), u64::MAX);
        assert_eq!(
            effective_bottleneck_us(&[member(1, &[1], 0)], |_| Some(0)).unwrap(),
            0
        );
    }
}
