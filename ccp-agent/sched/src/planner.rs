// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! One scheduler's per-slot step over a [`LinkLoadTable`], as in "Dynamic Flow Scheduling for
//! DNN Training Workloads in Data Centers", Sec. IV-C (control protocol): for every active flow,
//! read its path's load and available bandwidth (its own old schedule excluded), run Alg. 2, and
//! put the new schedule into the table in place of the old one, so the flows planned after it in
//! the same slot see it. The agent (NIC-only mode), the switch daemon's callers and the simulator
//! all drive the same functions.

use serde::{Deserialize, Serialize};

use crate::coflow::{decide_group, effective_bottleneck_us, reduce_group, GroupDecision};
use crate::dependency::{decide, reduce, Decision, Dependency, FlowProgress};
use crate::error::SchedError;
use crate::table::{FlowId, LinkId, LinkLoadTable, Schedule};

/// One flow to schedule in the current slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowRequest {
    /// The flow.
    pub flow: FlowId,
    /// The links it crosses, in order (fixed by ECMP for the flow's life).
    pub path: Vec<LinkId>,
    /// Its progress in the current iteration.
    pub progress: FlowProgress,
    /// The flows of its job it keeps pace with.
    pub dependency: Dependency,
}

/// Takes `flow` off the table, if it is there.
fn forget(table: &mut LinkLoadTable, flow: FlowId) -> Result<(), SchedError> {
    match table.remove_flow(flow) {
        Ok(_) | Err(SchedError::UnknownFlow(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

fn publish(table: &mut LinkLoadTable, req: &FlowRequest, d: &Decision) -> Result<(), SchedError> {
    if d.plan.rates_bps.iter().all(|r| *r == 0) {
        forget(table, req.flow)
    } else {
        table.set_schedule(req.flow, &req.path, &d.plan.schedule())
    }
}

/// Alg. 2 for one flow against `table`, whose entry for the flow is then replaced by the new
/// schedule (or removed when nothing is planned). Refuses a bad path (empty, unknown or repeated
/// link) and leaves the table unchanged then.
pub fn plan_flow(table: &mut LinkLoadTable, req: &FlowRequest) -> Result<Decision, SchedError> {
    let view = table.path_view(&req.path, Some(req.flow))?;
    let d = decide(table.clock(), &req.progress, &req.dependency, &view)?;
    publish(table, req, &d)?;
    Ok(d)
}

/// The receiver side of Alg. 2 (lines 13-16) for one of its own flows: takes `excess_bytes`
/// off the current slot of `decision` (made by [`plan_flow`] for `req` in this slot), re-plans
/// the rest and updates the table.
pub fn apply_reduction(
    table: &mut LinkLoadTable,
    req: &FlowRequest,
    decision: &Decision,
    excess_bytes: u64,
) -> Result<Decision, SchedError> {
    let view = table.path_view(&req.path, Some(req.flow))?;
    let d = reduce(table.clock(), decision, &req.progress, excess_bytes, &view)?;
    publish(table, req, &d)?;
    Ok(d)
}

/// The links of the members' paths, each once, in order of first appearance.
fn group_links(members: &[FlowRequest]) -> Vec<LinkId> {
    // (link, place of its first appearance), by sorting rather than a search per link.
    let mut all: Vec<(LinkId, usize)> = members
        .iter()
        .flat_map(|m| &m.path)
        .enumerate()
        .map(|(i, l)| (*l, i))
        .collect();
    all.sort_unstable();
    all.dedup_by_key(|x| x.0);
    all.sort_unstable_by_key(|x| x.1);
    all.into_iter().map(|x| x.0).collect()
}

fn publish_group(
    table: &mut LinkLoadTable,
    members: &[FlowRequest],
    g: &GroupDecision,
) -> Result<(), SchedError> {
    for (m, d) in members.iter().zip(&g.decisions) {
        publish(table, m, d)?;
    }
    Ok(())
}

/// Alg. 2 for a group of flows of one job planned jointly ([`crate::coflow`]) against `table`,
/// the group's own stored schedules excluded; the members' entries are then replaced by their
/// new schedules (or removed when nothing is planned). A group of one is [`plan_flow`].
/// Refuses a bad path (empty, unknown or repeated link) and leaves the table unchanged then.
pub fn plan_group(
    table: &mut LinkLoadTable,
    members: &[FlowRequest],
) -> Result<GroupDecision, SchedError> {
    let exclude: Vec<FlowId> = members.iter().map(|m| m.flow).collect();
    let views = table.link_views(&group_links(members), &exclude)?;
    let g = decide_group(table.clock(), table.current_slot(), members, &views)?;
    publish_group(table, members, &g)?;
    Ok(g)
}

/// The receiver side of Alg. 2 for a group planned by [`plan_group`] in this slot: member i's
/// current-slot bytes lose `excess_bytes[i]`, the later slots are re-planned jointly and the
/// table updated.
pub fn apply_group_reduction(
    table: &mut LinkLoadTable,
    members: &[FlowRequest],
    current: &GroupDecision,
    excess_bytes: &[u64],
) -> Result<GroupDecision, SchedError> {
    let exclude: Vec<FlowId> = members.iter().map(|m| m.flow).collect();
    let views = table.link_views(&group_links(members), &exclude)?;
    let g = reduce_group(
        table.clock(),
        table.current_slot(),
        members,
        &views,
        current,
        excess_bytes,
    )?;
    publish_group(table, members, &g)?;
    Ok(g)
}

/// Rolls the stored plan of a group forward ([`crate::coflow::extend_group_bytes`]): member i
/// keeps `kept_bytes[i]` in the first slots from the current one and gets Alg. 1's fill of the
/// slots that joined the horizon since; the members' entries in `table` are replaced by the
/// result (a member with nothing planned leaves it). Returns per member its bytes per slot over
/// the horizon from the current slot, or `None`, the table unchanged, when the group would
/// complete within the horizon and is not held at nothing in every kept slot (re-plan it with
/// [`plan_group`]). Refuses what [`crate::coflow::extend_group_bytes`] refuses, and leaves the
/// table unchanged then.
pub fn extend_group(
    table: &mut LinkLoadTable,
    members: &[FlowRequest],
    kept_bytes: &[&[u64]],
) -> Result<Option<Vec<Vec<u64>>>, SchedError> {
    let links = group_links(members);
    let kept = crate::coflow::check_kept(table.clock(), members.len(), kept_bytes)?;
    // A group held at nothing (its members have no stored schedule, see `publish`, so the
    // bandwidth available to it is the links') whose new slots carry nothing either: found
    // without building the link views.
    let now = table.current_slot();
    let held = crate::coflow::waiting(kept_bytes)
        && crate::coflow::held_from(table.clock(), members, &links, kept, |l, t| {
            table.available_bps_at(l, now.saturating_add(t as u64))
        })?;
    if held {
        for m in members {
            forget(table, m.flow)?;
        }
        return Ok(Some(vec![vec![0; table.clock().horizon()]; members.len()]));
    }
    let exclude: Vec<FlowId> = members.iter().map(|m| m.flow).collect();
    let views = table.link_views(&links, &exclude)?;
    let Some(bytes) =
        crate::coflow::extend_group_bytes(table.clock(), members, &views, kept_bytes)?
    else {
        return Ok(None);
    };
    let start_slot = table.current_slot();
    for (m, b) in members.iter().zip(&bytes) {
        if b.iter().all(|x| *x == 0) {
            forget(table, m.flow)?;
        } else {
            let schedule = Schedule {
                start_slot,
                rates_bps: b
                    .iter()
                    .map(|x| table.clock().rate_bps_for_bytes(*x))
                    .collect(),
            };
            table.set_schedule(m.flow, &m.path, &schedule)?;
        }
    }
    Ok(Some(bytes))
}

/// Per member of a group, its MADD share of the current slot's available bandwidth against
/// `table` (the group's own stored schedules excluded), bit/s: what [`plan_group`] would give
/// as [`GroupDecision::share_now_bps`] for the same members, without planning and without
/// changing the table ([`crate::coflow::group_share_now_bps`]). Refuses a bad path.
pub fn group_share_now_bps(
    table: &LinkLoadTable,
    members: &[FlowRequest],
) -> Result<Vec<u64>, SchedError> {
    let exclude: Vec<FlowId> = members.iter().map(|m| m.flow).collect();
    let views = table.link_views(&group_links(members), &exclude)?;
    crate::coflow::group_share_now_bps(table.clock(), members, &views)
}

/// The SEBF key of a group over `table`: [`effective_bottleneck_us`] at the links' capacities.
pub fn group_bottleneck_us(
    table: &LinkLoadTable,
    members: &[FlowRequest],
) -> Result<u64, SchedError> {
    effective_bottleneck_us(members, |l| table.capacity_bps(l).ok())
}

/// [`plan_flow`] for every request, in order. A refused request gets its error and the others
/// are still planned.
pub fn plan_slot(
    table: &mut LinkLoadTable,
    requests: &[FlowRequest],
) -> Vec<Result<Decision, SchedError>> {
    requests.iter().map(|r| plan_flow(table, r)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slot::SlotClock;

    /// An independent flow `f` over links `path` with `sent` bytes sent and `rem` left.
    fn request(f: u64, path: &[u32], sent: u64, rem: u64) -> FlowRequest {
        FlowRequest {
            flow: FlowId(f),
            path: path.iter().map(|l| LinkId(*l)).collect(),
            progress: FlowProgress {
                sent_bytes: sent,
                remaining_bytes: rem,
            },
            dependency: Dependency::Independent,
        }
    }

    #[test]
    fn flows_planned_later_see_the_earlier_ones() {
        let mut t = LinkLoadTable::new(SlotClock::new(8_000_000, 3).unwrap(), 0);
        t.add_link(LinkId(0), 10).unwrap();
        let req = |f| request(f, &[0], 0, 10);
        let bad = FlowRequest {
            path: vec![LinkId(5)],
            ..req(9)
        };
        let out = plan_slot(&mut t, &[req(1), bad, req(2)]);
        assert_eq!(out[0].as_ref().unwrap().plan.bytes, vec![10, 0, 0]);
        assert_eq!(out[1], Err(SchedError::UnknownLink(LinkId(5))));
        assert_eq!(out[2].as_ref().unwrap().plan.bytes, vec![0, 10, 0]);
        assert_eq!(t.link_load_bps(LinkId(0)).unwrap(), vec![10, 10, 0]);
        // Re-planning flow 1 replaces its entry rather than adding to it.
        let d = plan_flow(&mut t, &req(1)).unwrap();
        assert_eq!(d.plan.bytes, vec![10, 0, 0]);
        assert_eq!(t.link_load_bps(LinkId(0)).unwrap(), vec![10, 10, 0]);
        // A reduction frees the current slot.
        let r = apply_reduction(&mut t, &req(1), &d, 4).unwrap();
        assert_eq!(r.plan.bytes, vec![6, 0, 4]);
        assert_eq!(t.link_load_bps(LinkId(0)).unwrap(), vec![6, 10, 4]);
        // A finished flow leaves the table.
        let done = FlowRequest {
            progress: FlowProgress {
                sent_bytes: 10,
                remaining_bytes: 0,
            },
            ..req(1)
        };
        plan_flow(&mut t, &done).unwrap();
        assert_eq!(t.flow_count(), 1);
    }

    /// Two members (one sharing its link with another flow's schedule) that cannot finish
    /// within the horizon: rolled forward after `a` slots of following their plan, they get
    /// what a re-plan of the whole group gives (Alg. 1 fills every slot), in the kept slots and
    /// in the new ones, but for the rounding of each member's cumulative bytes to whole bytes
    /// (at most one byte, in any prefix of slots); a group that would complete is left to a
    /// re-plan.
    #[test]
    fn extending_an_incomplete_group_equals_its_replan() {
        let k = 6;
        let mut t = LinkLoadTable::new(SlotClock::new(8_000_000, k).unwrap(), 0);
        for l in 0..3 {
            t.add_link(LinkId(l), 1_000).unwrap();
        }
        // Another flow on link 1, with a schedule that varies.
        let other_schedule = Schedule {
            start_slot: 0,
            rates_bps: vec![200, 600, 0, 400, 400, 100, 300, 300, 0, 500],
        };
        t.set_schedule(FlowId(9), &[LinkId(1)], &other_schedule)
            .unwrap();
        let sizes = [20_000u64, 9_000];
        let members = [
            request(1, &[0, 1], 0, sizes[0]),
            request(2, &[2], 0, sizes[1]),
        ];
        let g = plan_group(&mut t, &members).unwrap();
        assert!(g.decisions.iter().all(|d| !d.plan.is_complete()));
        for a in 1..=k {
            // Each member sent its plan's first `a` slots.
            let mut rolled = t.clone();
            rolled.advance_to(a as u64).unwrap();
            let mut replanned = rolled.clone();
            let now: Vec<FlowRequest> = members
                .iter()
                .zip(&g.decisions)
                .map(|(m, d)| {
                    let sent: u64 = d.plan.bytes[..a].iter().sum();
                    FlowRequest {
                        progress: FlowProgress {
                            sent_bytes: sent,
                            remaining_bytes: m.progress.remaining_bytes - sent,
                        },
                        ..m.clone()
                    }
                })
                .collect();
            let kept: Vec<&[u64]> = g.decisions.iter().map(|d| &d.plan.bytes[a..]).collect();
            let ext = extend_group(&mut rolled, &now, &kept).unwrap().unwrap();
            let re = plan_group(&mut replanned, &now).unwrap();
            for (i, d) in re.decisions.iter().enumerate() {
                assert!(!d.plan.is_complete());
                let (mut cum_ext, mut cum_re) = (0i64, 0i64);
                for (x, y) in ext[i].iter().zip(&d.plan.bytes) {
                    cum_ext += *x as i64;
                    cum_re += *y as i64;
                    assert!(
                        (cum_ext - cum_re).abs() <= 1,
                        "member {i} after {a} slots: {:?} against {:?}",
                        ext[i],
                        d.plan.bytes
                    );
                }
            }
            // The table holds the same load but for those bytes' rates (1 bit/s per byte
            // here: 8 s slots).
            for l in 0..3 {
                let x = rolled.link_load_bps(LinkId(l)).unwrap();
                let y = replanned.link_load_bps(LinkId(l)).unwrap();
                for (p, q) in x.iter().zip(&y) {
                    assert!(
                        p.abs_diff(*q) <= 2,
                        "link {l} after {a} slots: {x:?} against {y:?}"
                    );
                }
            }
        }
        // Nearly done: the bytes left fit the horizon, so the group is re-planned instead.
        let mut rolled = t.clone();
        rolled.advance_to(2).unwrap();
        let before = rolled.snapshot();
        let small = [
            request(1, &[0, 1], 19_900, 100),
            request(2, &[2], 8_950, 50),
        ];
        let kept: Vec<&[u64]> = vec![&[50, 0, 0, 0], &[20, 0, 0, 0]];
        assert_eq!(extend_group(&mut rolled, &small, &kept).unwrap(), None);
        assert_eq!(rolled.snapshot(), before);
        // Kept bytes must be one list per member, of one length.
        assert!(extend_group(&mut rolled, &small, &kept[..1]).is_err());
        assert!(extend_group(&mut rolled, &small, &[&[50; 4], &[0; 3]]).is_err());
    }

    /// A flow held at nothing by another flow's bookings over its whole plan, rolled forward:
    /// while the slots that join the horizon are booked it stays held at nothing; when the link
    /// frees up there it gets what a re-plan gives, although it now completes within the
    /// horizon.
    #[test]
    fn extending_a_held_group_equals_its_replan_also_when_it_completes() {
        let mut t = LinkLoadTable::new(SlotClock::new(8_000_000, 6).unwrap(), 0);
        t.add_link(LinkId(0), 1_000).unwrap();
        let busy = Schedule {
            start_slot: 0,
            rates_bps: vec![1_000; 8],
        };
        t.set_schedule(FlowId(9), &[LinkId(0)], &busy).unwrap();
        let req = |rem| request(1, &[0], 0, rem);
        let g = plan_group(&mut t, &[req(2_500)]).unwrap();
        assert_eq!(g.decisions[0].plan.bytes, vec![0; 6]);
        // One slot on, the slot that joins the horizon is booked too: held at nothing.
        let mut held = t.clone();
        held.advance_to(1).unwrap();
        let busy_on = Schedule {
            start_slot: 1,
            rates_bps: vec![1_000; 6],
        };
        held.set_schedule(FlowId(9), &[LinkId(0)], &busy_on)
            .unwrap();
        let kept: Vec<&[u64]> = vec![&g.decisions[0].plan.bytes[1..]];
        let ext = extend_group(&mut held, &[req(2_500)], &kept)
            .unwrap()
            .unwrap();
        assert_eq!(ext, vec![vec![0; 6]]);
        assert_eq!(
            plan_group(&mut held.clone(), &[req(2_500)])
                .unwrap()
                .decisions[0]
                .plan
                .bytes,
            vec![0; 6]
        );
        assert_eq!(held.flow_count(), 1);
        t.advance_to(4).unwrap();
        let mut replanned = t.clone();
        let kept: Vec<&[u64]> = vec![&g.decisions[0].plan.bytes[4..]];
        let ext = extend_group(&mut t, &[req(2_500)], &kept).unwrap().unwrap();
        let re = plan_group(&mut replanned, &[req(2_500)]).unwrap();
        assert!(re.decisions[0].plan.is_complete());
        assert_eq!(ext, vec![re.decisions[0].plan.bytes.clone()]);
        assert_eq!(ext[0].iter().sum::<u64>(), 2_500);
        assert_eq!(t.snapshot(), replanned.snapshot());
    }
}
