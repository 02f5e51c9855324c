// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Fair sharing: every flow is a TCP-like flow, and flows crossing a link share it max-min fairly
//! (the mlcc paper, Sec. VII: "Flows that traverse the same link share the available bandwidth
//! equally"). Event driven: rates change only when the set of flows does; a flow's weight
//! (1) depends on nothing else, so the policy is per job ([`Policy::is_local`]).

use super::{Control, Policy};
use crate::sim::Sim;

/// Fair (TCP-like) sharing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fair;

impl Policy for Fair {
    fn name(&self) -> String {
        "fair".into()
    }

    fn decide(&mut self, sim: &Sim, ctl: &mut Control) -> f64 {
        ctl.fair(sim.active.len());
        f64::INFINITY
    }

    fn is_local(&self) -> bool {
        true
    }

    fn flow_control(&self, _sim: &Sim, _j: usize, _f: usize) -> Option<(f64, f64)> {
        Some((1.0, f64::INFINITY))
    }
}
