// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Alg. 2 of "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers" (Sec. IV-C):
//! the rate a flow actually applies in the current slot, given the flows it depends on.
//!
//! ## Our reading of the paper's F
//!
//! The paper writes F_i for the "accumulated rate" of flow f_i: the sum of its *actual* sending
//! rates in the earlier slots of the current communication phase plus its *initially scheduled*
//! rate for the current slot, each multiplied by the slot length. That product is a byte count,
//! so here `F_i = sent_bytes + planned bytes of the current slot` ([`Decision::accumulated_bytes`]),
//! counted from the start of the flow's current iteration. The dependencies compare these byte
//! counts across flows of one job:
//!
//! - parameter server, at PS p: for every slot t, min over aggregation flows into p of their
//!   bytes by t ≥ max over broadcast flows out of p of theirs. A worker's aggregation flow i is
//!   raised by Δ_i = (F_b^max − F_i)+ (F_b^max: the largest F of p's broadcast flows); p's
//!   broadcast flow i by Δ_i = (F_a^min − F_i)+ (F_a^min: the least F of p's aggregation flows);
//! - ring all-reduce: the bytes a worker sends to its successor never exceed what it received
//!   from its predecessor: flow i is raised by Δ_i = (F_j − F_i)+, j the predecessor's flow.
//!   The chain is the path of one gradient chunk around the ring; its first flow depends on
//!   nothing.
//!
//! ## Alg. 2 as implemented by [`decide`]
//!
//! 1. Alg. 1 gives the initial plan; r is its current-slot bytes.
//! 2. Δ = 0: apply r. Else if r + Δ < B_i: apply r + Δ; else apply B_i. B_i is the bytes the
//!    current slot's available bandwidth carries ([`PathView::available_bps`]`[0]`, the largest
//!    recorded rate of the past 4 slots minus the others' load), and the current slot never
//!    carries more than the flow has left.
//! 3. The future slots are re-planned by Alg. 1 with the bytes that are left.
//! 4. Lines 13-16 ("the receiver's scheduler reduces its successor flows"): the receiver of flow
//!    i computes [`excess_bytes`] for each of its own dependent flows (PS: each broadcast flow j
//!    by (F_j − F_a^min)+; ring: its outgoing flow by (F_succ − F_i)+) and applies it with
//!    [`reduce`], which takes the excess off the current slot and re-plans the rest, so the freed
//!    bandwidth goes to other jobs. After it, the PS and ring invariants hold for the slot.

use serde::{Deserialize, Serialize};

use crate::error::SchedError;
use crate::greedy::{check_view, initial_schedule, with_first_slot, Plan};
use crate::slot::SlotClock;
use crate::table::{PathView, Schedule};

/// Which flows of its job a flow must keep pace with, with their accumulated bytes F for the
/// current slot (as decided by their own schedulers and exchanged between agents).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Dependency {
    /// No dependency (the first flow of a ring chain, or a job without one).
    #[default]
    Independent,
    /// A worker's aggregation (push) flow to a PS; F_b^max of that PS's broadcast flows.
    PsAggregation {
        /// F_b^max: the largest accumulated bytes among the PS's broadcast flows.
        broadcast_max_bytes: u64,
    },
    /// A PS's broadcast (pull) flow to a worker; F_a^min of that PS's aggregation flows.
    PsBroadcast {
        /// F_a^min: the least accumulated bytes among the PS's aggregation flows.
        aggregation_min_bytes: u64,
    },
    /// A ring all-reduce flow; F_j of the predecessor's flow into this worker.
    Ring {
        /// F_j: the accumulated bytes of the predecessor's flow.
        predecessor_bytes: u64,
    },
}

impl Dependency {
    /// Aggregation-flow dependency from the accumulated bytes of the PS's broadcast flows
    /// (F_b^max is their maximum); none when the PS has no broadcast flow yet.
    pub fn ps_aggregation(broadcast_accumulated_bytes: &[u64]) -> Self {
        broadcast_accumulated_bytes
            .iter()
            .max()
            .map_or(Self::Independent, |m| Self::PsAggregation {
                broadcast_max_bytes: *m,
            })
    }

    /// Broadcast-flow dependency from the accumulated bytes of the PS's aggregation flows
    /// (F_a^min is their minimum); none when the PS has no aggregation flow.
    pub fn ps_broadcast(aggregation_accumulated_bytes: &[u64]) -> Self {
        aggregation_accumulated_bytes
            .iter()
            .min()
            .map_or(Self::Independent, |m| Self::PsBroadcast {
                aggregation_min_bytes: *m,
            })
    }

    /// The most bytes a flow that has sent `sent_bytes` of its iteration can send before the
    /// flows it depends on deliver more: ring, F_j − sent (`predecessor_bytes` already holds
    /// the worker's own chunk when the caller adds it); a PS's broadcast, F_a^min − sent (it
    /// never runs ahead of the slowest aggregation). `None` where the dependency sets no upper
    /// bound (independent flows; a worker's aggregation flow, which F_b^max only raises).
    ///
    /// Planning a flow for more than this reserves bandwidth it cannot use: Alg. 2 ("Dynamic
    /// Flow Scheduling for DNN Training Workloads in Data Centers", Sec. IV-C, lines 13-16)
    /// has the receiver cut the excess after the fact, and the slots it freed are then lost to
    /// the flows planned before the cut. Our reading: bound the bytes a flow is planned for by
    /// this value before Alg. 1 runs, so the excess is never reserved; the receiver's cut
    /// stays for what the dependencies learn later in the slot.
    pub fn sendable_bytes(&self, sent_bytes: u64) -> Option<u64> {
        match *self {
            Self::Independent | Self::PsAggregation { .. } => None,
            Self::PsBroadcast {
                aggregation_min_bytes: f,
            } => Some(f.saturating_sub(sent_bytes)),
            Self::Ring {
                predecessor_bytes: f,
            } => Some(f.saturating_sub(sent_bytes)),
        }
    }

    /// Δ_i in bytes for a flow whose accumulated bytes are `accumulated_bytes` (F_i).
    pub fn delta_bytes(&self, accumulated_bytes: u64) -> u64 {
        match *self {
            Self::Independent => 0,
            Self::PsAggregation {
                broadcast_max_bytes: f,
            } => f.saturating_sub(accumulated_bytes),
            Self::PsBroadcast {
                aggregation_min_bytes: f,
            } => f.saturating_sub(accumulated_bytes),
            Self::Ring {
                predecessor_bytes: f,
            } => f.saturating_sub(accumulated_bytes),
        }
    }
}

/// Where a flow stands in its current iteration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowProgress {
    /// Bytes actually sent in the earlier slots of this iteration.
    pub sent_bytes: u64,
    /// Bytes left to send in this iteration (G).
    pub remaining_bytes: u64,
}

/// Which branch of Alg. 2 gave the current slot's rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Δ = 0: the initial schedule's rate (Alg. 2 line 6).
    Initial,
    /// r + Δ fitted under B_i (line 9).
    Raised,
    /// Raised, but capped at B_i or at the bytes left (line 11).
    Capped,
    /// Cut by the receiver's excess (lines 13-16), see [`reduce`].
    Reduced,
}

/// The outcome of Alg. 2 for one flow in one slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The adjusted plan over the horizon; `plan.bytes[0]` is sent in the current slot.
    pub plan: Plan,
    /// The rate to apply in the current slot, bit/s.
    pub rate_bps: u64,
    /// F_i after the decision: sent bytes plus the current slot's bytes.
    pub accumulated_bytes: u64,
    /// Δ_i in bytes, as computed from the initial plan.
    pub delta_bytes: u64,
    /// Which branch decided.
    pub outcome: Outcome,
}

impl Decision {
    /// The pacing rate to enforce in the current slot, bit/s: [`Decision::rate_bps`] (the least
    /// rate carrying the slot's planned bytes), except when the plan completes the flow in this
    /// slot (`plan.bytes[0]` ≥ `remaining_bytes`): then its last bytes go at the largest feasible
    /// rate, `available_now_bps` (the path's available bandwidth in the current slot), as Alg. 1
    /// fills slots "with the largest feasible rate" ("Dynamic Flow Scheduling for DNN Training
    /// Workloads in Data Centers", Sec. IV-B), so they are not stretched to the slot's end. The
    /// flow still sends no more than planned: what it has left is the slot's bytes.
    pub fn pacing_rate_bps(&self, remaining_bytes: u64, available_now_bps: u64) -> u64 {
        pacing_rate_bps(
            self.plan.bytes.first().copied().unwrap_or(0),
            self.rate_bps,
            remaining_bytes,
            available_now_bps,
        )
    }
}

/// The rule of [`Decision::pacing_rate_bps`] on its parts: a flow with `planned_now_bytes`
/// planned in the current slot at `planned_rate_bps` (the least rate carrying them) and
/// `remaining_bytes` left is paced at `planned_rate_bps`, or, when the slot's bytes complete it,
/// at the largest feasible rate `available_now_bps` (never below `planned_rate_bps`), bit/s
/// (mlcc paper, Sec. IV-B: Alg. 1 fills slots "with the largest feasible rate").
pub fn pacing_rate_bps(
    planned_now_bytes: u64,
    planned_rate_bps: u64,
    remaining_bytes: u64,
    available_now_bps: u64,
) -> u64 {
    if planned_now_bytes == 0 || planned_now_bytes < remaining_bytes {
        planned_rate_bps
    } else {
        available_now_bps.max(planned_rate_bps)
    }
}

pub(crate) fn finish(
    plan: Plan,
    progress: &FlowProgress,
    delta_bytes: u64,
    outcome: Outcome,
) -> Decision {
    let now = plan.bytes.first().copied().unwrap_or(0);
    Decision {
        rate_bps: plan.rates_bps.first().copied().unwrap_or(0),
        accumulated_bytes: progress.sent_bytes.saturating_add(now),
        plan,
        delta_bytes,
        outcome,
    }
}

/// Alg. 2: the current slot's rate of a flow and its re-planned future, given its progress,
/// its dependency and what it sees of its path. Never plans more than the available bandwidth
/// of any slot. Refuses a view whose arrays do not span the horizon.
pub fn decide(
    clock: &SlotClock,
    progress: &FlowProgress,
    dependency: &Dependency,
    view: &PathView,
) -> Result<Decision, SchedError> {
    let initial = initial_schedule(clock, progress.remaining_bytes, view)?;
    let r = initial.bytes.first().copied().unwrap_or(0);
    let delta = dependency.delta_bytes(progress.sent_bytes.saturating_add(r));
    if delta == 0 {
        return Ok(finish(initial, progress, 0, Outcome::Initial));
    }
    let b_i = clock.bytes_in_slot(view.available_bps.first().copied().unwrap_or(0));
    let wanted = r.saturating_add(delta);
    let (now, outcome) = if wanted < b_i && wanted <= progress.remaining_bytes {
        (wanted, Outcome::Raised)
    } else {
        (b_i.min(progress.remaining_bytes).max(r), Outcome::Capped)
    };
    let plan = with_first_slot(clock, progress.remaining_bytes, view, now);
    Ok(finish(plan, progress, delta, outcome))
}

impl Decision {
    /// The decision cut down to the rates a switch admitted (see
    /// [`crate::LinkLoadTable::admit`]): in each slot of the plan, the bytes are at most those
    /// the admitted rate carries in one slot; the bytes cut become unscheduled (the next slot's
    /// planning takes them up again), `rate_bps` is the admitted rate of the plan's first slot,
    /// and F_i (`accumulated_bytes`) counts only the admitted bytes of that slot. A slot the
    /// admitted schedule does not cover is admitted at 0. `progress` is the one the decision was
    /// made with. `cost_fx` is kept (the cost of the plan as made). Never raises a slot.
    pub fn clipped_to(
        &self,
        clock: &SlotClock,
        progress: &FlowProgress,
        admitted: &Schedule,
    ) -> Decision {
        let mut plan = self.plan.clone();
        let mut cut = 0u64;
        for (i, (b, r)) in plan
            .bytes
            .iter_mut()
            .zip(plan.rates_bps.iter_mut())
            .enumerate()
        {
            let slot = plan.start_slot.saturating_add(i as u64);
            let allowed_bps = admitted.rate_bps_at(slot);
            if *r > allowed_bps {
                let allowed = clock.bytes_in_slot(allowed_bps).min(*b);
                cut = cut.saturating_add(b.saturating_sub(allowed));
                *b = allowed;
                *r = allowed_bps;
            }
        }
        plan.unscheduled_bytes = plan.unscheduled_bytes.saturating_add(cut);
        let mut d = finish(plan, progress, self.delta_bytes, self.outcome);
        d.rate_bps = d.rate_bps.min(self.rate_bps);
        d
    }
}

/// The excess a receiver takes off one of its dependent flows: `(F_succ − F_bound)+`, with
/// F_bound the predecessor's F (ring) or F_a^min (a PS's broadcast flows).
pub fn excess_bytes(successor_accumulated_bytes: u64, bound_bytes: u64) -> u64 {
    successor_accumulated_bytes.saturating_sub(bound_bytes)
}

/// Takes `excess_bytes` off the current slot of `decision` (at most all of it) and re-plans the
/// later slots by Alg. 1 with what is left. `progress` and `view` are those `decision` was made
/// with. Refuses a view whose arrays do not span the horizon.
pub fn reduce(
    clock: &SlotClock,
    decision: &Decision,
    progress: &FlowProgress,
    excess_bytes: u64,
    view: &PathView,
) -> Result<Decision, SchedError> {
    check_view(clock, view)?;
    if excess_bytes == 0 {
        return Ok(decision.clone());
    }
    let now = decision.plan.bytes.first().copied().unwrap_or(0);
    let plan = with_first_slot(
        clock,
        progress.remaining_bytes,
        view,
        now.saturating_sub(excess_bytes),
    );
    Ok(finish(
        plan,
        progress,
        decision.delta_bytes,
        Outcome::Reduced,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock() -> SlotClock {
        SlotClock::new(8_000_000, 4).unwrap()
    }

    fn view(avail: u64) -> PathView {
        PathView {
            start_slot: 0,
            load_bps: vec![0, 0, 0, 0],
            available_bps: vec![avail; 4],
        }
    }

    #[test]
    fn completing_slot_is_paced_at_the_available_bandwidth() {
        let plan = Plan {
            start_slot: 0,
            bytes: vec![1000, 500],
            rates_bps: vec![1000, 500],
            unscheduled_bytes: 0,
            cost_fx: 0,
        };
        let d = finish(
            plan,
            &FlowProgress {
                sent_bytes: 0,
                remaining_bytes: 1500,
            },
            0,
            Outcome::Initial,
        );
        // Bytes left after this slot: the plan's rate.
        assert_eq!(d.pacing_rate_bps(1500, 9000), 1000);
        // The slot completes the flow: the path's available bandwidth, never below the plan's.
        assert_eq!(d.pacing_rate_bps(1000, 9000), 9000);
        assert_eq!(d.pacing_rate_bps(800, 600), 1000);
        // Nothing planned now: the plan's (zero) rate.
        let idle = Plan {
            start_slot: 0,
            bytes: vec![0, 500],
            rates_bps: vec![0, 500],
            unscheduled_bytes: 0,
            cost_fx: 0,
        };
        let d = finish(
            idle,
            &FlowProgress {
                sent_bytes: 0,
                remaining_bytes: 500,
            },
            0,
            Outcome::Initial,
        );
        assert_eq!(d.pacing_rate_bps(500, 9000), 0);
    }

    #[test]
    fn dependency_deltas() {
        assert_eq!(
            Dependency::ps_aggregation(&[3, 9, 4]),
            Dependency::PsAggregation {
                broadcast_max_bytes: 9
            }
        );
        assert_eq!(
            Dependency::ps_broadcast(&[3, 9, 4]),
            Dependency::PsBroadcast {
                aggregation_min_bytes: 3
            }
        );
        assert_eq!(Dependency::ps_broadcast(&[]), Dependency::Independent);
        assert_eq!(
            Dependency::Ring {
                predecessor_bytes: 10
            }
            .delta_bytes(4),
            6
        );
        assert_eq!(
            Dependency::Ring {
                predecessor_bytes: 10
            }
            .delta_bytes(40),
            0
        );
        assert_eq!(Dependency::Independent.delta_bytes(0), 0);
        let j = serde_json::to_string(&Dependency::Ring {
            predecessor_bytes: 5,
        })
        .unwrap();
        assert_eq!(j, r#"{"kind":"ring","predecessor_bytes":5}"#);
    }

    #[test]
    fn sendable_bytes_bound_ring_and_broadcast_only() {
        assert_eq!(
            Dependency::Ring {
                predecessor_bytes: 10
            }
            .sendable_bytes(4),
            Some(6)
        );
        assert_eq!(
            Dependency::Ring {
                predecessor_bytes: 10
            }
            .sendable_bytes(12),
            Some(0)
        );
        assert_eq!(
            Dependency::PsBroadcast {
                aggregation_min_bytes: 7
            }
            .sendable_bytes(2),
            Some(5)
        );
        assert_eq!(
            Dependency::PsAggregation {
                broadcast_max_bytes: 7
            }
            .sendable_bytes(2),
            None
        );
        assert_eq!(Dependency::Independent.sendable_bytes(0), None);
    }

    #[test]
    fn no_dependency_applies_the_initial_rate() {
        // A loaded first slot is filled after the idle second one.
        let v = PathView {
            start_slot: 0,
            load_bps: vec![9, 0, 0, 0],
            available_bps: vec![10; 4],
        };
        let p = FlowProgress {
            sent_bytes: 0,
            remaining_bytes: 15,
        };
        let d = decide(&clock(), &p, &Dependency::Independent, &v).unwrap();
        assert_eq!(d.outcome, Outcome::Initial);
        assert_eq!(d.plan.bytes, vec![5, 10, 0, 0]);
        assert_eq!(d.rate_bps, 5);
        let d = decide(
            &clock(),
            &p,
            &Dependency::Ring {
                predecessor_bytes: 5,
            },
            &v,
        )
        .unwrap();
        assert_eq!((d.outcome, d.delta_bytes), (Outcome::Initial, 0));
        // A predecessor ahead raises the current slot and takes the rest off later slots.
        let d = decide(
            &clock(),
            &p,
            &Dependency::Ring {
                predecessor_bytes: 9,
            },
            &v,
        )
        .unwrap();
        assert_eq!(d.outcome, Outcome::Raised);
        assert_eq!(d.plan.bytes, vec![9, 6, 0, 0]);
        assert_eq!((d.accumulated_bytes, d.delta_bytes, d.rate_bps), (9, 4, 9));
    }

    #[test]
    fn raise_is_capped_by_available_bandwidth_and_bytes_left() {
        let p = FlowProgress {
            sent_bytes: 100,
            remaining_bytes: 50,
        };
        let d = decide(
            &clock(),
            &p,
            &Dependency::PsAggregation {
                broadcast_max_bytes: 200,
            },
            &view(10),
        )
        .unwrap();
        // r = 10 already fills the slot: capped at B_i.
        assert_eq!(d.outcome, Outcome::Capped);
        assert_eq!(d.plan.bytes, vec![10, 10, 10, 10]);
        assert_eq!(d.plan.unscheduled_bytes, 10);
        let p = FlowProgress {
            sent_bytes: 0,
            remaining_bytes: 5,
        };
        let d = decide(
            &clock(),
            &p,
            &Dependency::PsBroadcast {
                aggregation_min_bytes: 9,
            },
            &view(100),
        )
        .unwrap();
        assert_eq!(d.plan.bytes, vec![5, 0, 0, 0]);
        assert_eq!(d.accumulated_bytes, 5);
    }

    #[test]
    fn clipping_to_an_admitted_schedule() {
        let p = FlowProgress {
            sent_bytes: 10,
            remaining_bytes: 30,
        };
        let d = decide(&clock(), &p, &Dependency::Independent, &view(10)).unwrap();
        assert_eq!(d.plan.bytes, vec![10, 10, 10, 0]);
        // The tests' clock has 8 s slots: a rate of r bit/s carries r bytes in a slot.
        let c = d.clipped_to(
            &clock(),
            &p,
            &Schedule {
                start_slot: 0,
                rates_bps: vec![4, 10],
            },
        );
        assert_eq!(c.plan.bytes, vec![4, 10, 0, 0]);
        assert_eq!(c.plan.rates_bps[..3], [4, 10, 0]);
        assert_eq!(
            (c.rate_bps, c.accumulated_bytes, c.plan.unscheduled_bytes),
            (4, 14, 16)
        );
        // An admission that takes nothing off changes nothing.
        let same = d.clipped_to(&clock(), &p, &d.plan.schedule());
        assert_eq!(same, d);
    }

    #[test]
    fn reduction_defers_the_excess() {
        let p = FlowProgress {
            sent_bytes: 10,
            remaining_bytes: 30,
        };
        let d = decide(&clock(), &p, &Dependency::Independent, &view(10)).unwrap();
        assert_eq!(d.accumulated_bytes, 20);
        let r = reduce(
            &clock(),
            &d,
            &p,
            excess_bytes(d.accumulated_bytes, 13),
            &view(10),
        )
        .unwrap();
        assert_eq!(r.outcome, Outcome::Reduced);
        assert_eq!(r.accumulated_bytes, 13);
        assert_eq!(r.plan.bytes, vec![3, 10, 10, 7]);
        let r = reduce(&clock(), &d, &p, 1000, &view(10)).unwrap();
        assert_eq!(r.plan.bytes[0], 0);
        assert_eq!(reduce(&clock(), &d, &p, 0, &view(10)).unwrap(), d);
    }
}
