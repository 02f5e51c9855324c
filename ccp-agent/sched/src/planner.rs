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
use crate::table::{FlowId, LinkId, LinkLoadTable};

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

fn publish(table: &mut LinkLoadTable, req: &FlowRequest, d: &Decision) -> Result<(), SchedError> {
    if d.plan.rates_bps.iter().all(|r| *r == 0) {
        match table.remove_flow(req.flow) {
            Ok(_) | Err(SchedError::UnknownFlow(_)) => Ok(()),
            Err(e) => Err(e),
        }
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

    #[test]
    fn flows_planned_later_see_the_earlier_ones() {
        let mut t = LinkLoadTable::new(SlotClock::new(8_000_000, 3).unwrap(), 0);
        t.add_link(LinkId(0), 10).unwrap();
        let req = |f| FlowRequest {
            flow: FlowId(f),
            path: vec![LinkId(0)],
            progress: FlowProgress {
                sent_bytes: 0,
                remaining_bytes: 10,
            },
            dependency: Dependency::Independent,
        };
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
}
