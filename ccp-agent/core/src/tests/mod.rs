// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Tests of the agent core: unit tests of its state machine ([`unit`]) and scenario tests of
//! agents over a simulated datapath and switch ([`scenarios`], on [`sim`]).

mod scenarios;
pub(super) mod sim;
mod unit;
