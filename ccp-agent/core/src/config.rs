// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! What the core is configured with: the slot grid, the network it plans on, the hosts it
//! serves and the scheduling options, as a plain struct. Nothing here reads a file: the agent
//! checks `agent.toml` and `topo.toml` and builds this from them (`ccp_agent::config`,
//! `AgentConfig::core_config`); the tests build it by hand.
//!
//! "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers", Sec. IV (slots of
//! length `slot_ms`, horizon K, Alg. 1 and 2) and Sec. V (one agent per host).

use crate::fabric::{Fabric, Host};
use mlcc_sched::{JobOrder, Rules};
use std::net::SocketAddr;

/// The core's configuration (see the module docs). The agent's checks guarantee what each
/// field's doc says; [`crate::Core::new`] refuses a slot grid or a link capacity the scheduling
/// library refuses.
#[derive(Debug, Clone, PartialEq)]
pub struct CoreConfig {
    /// Slot length, ms (> 0).
    pub slot_ms: u64,
    /// Horizon K, slots (1..=1024).
    pub horizon: usize,
    /// The network: link capacities, hosts, switches, routes.
    pub topology: Fabric,
    /// Names of the served hosts (each a host of `topology`).
    pub hosts: Vec<String>,
    /// This agent's gRPC address: its name in the switches' tables (`ScheduleUpdate.agent`).
    pub listen: SocketAddr,
    /// NIC-only mode: no switch daemons; the core plans its hosts' NIC links and their ingress
    /// links ([`Fabric::served_ingress`]).
    pub nic_only: bool,
    /// Whether registered flows get the datapath program and the slot schedule; false: no flow
    /// is controlled (the agent then only runs PCN).
    pub schedule: bool,
    /// Rate floor, bit/s (> 0).
    pub min_rate_bps: u64,
    /// Cwnd and its ceiling at install, bytes (at least 2 segments).
    pub cwnd_bytes: u32,
    /// RPC deadline, ms (less than a slot).
    pub rpc_timeout_ms: u64,
    /// The policy layer's rule set.
    pub rules: Rules,
    /// How jobs are ranked under `interleave` and `priority`.
    pub job_order: JobOrder,
    /// Work-conserving rates (`mlcc_sched::PolicyOptions::work_conserving`), and, without
    /// switches, a re-plan of the slot when a burst begins or ends (see [`crate`]).
    pub work_conserving: bool,
    /// Under `priority` with work conservation, each flow paced at its strict-priority share
    /// (`mlcc_sched::PolicyOptions::strict_rates`).
    pub strict_rates: bool,
    /// Traffic classes the policy's job order is compressed onto (`mlcc_sched::policy::classes`,
    /// DSCPs `mlcc_sched::policy::classes::DEFAULT_DSCP`, class 0 highest), 1..=8; each
    /// controlled flow is marked with its job's class ([`crate::Action::SetClass`]). 0: off,
    /// no class is ever set and the planning is [`mlcc_sched::policy::decide`]'s alone.
    /// `[sched] classes`. Source: the rank compression of Crux (Cao et al., SIGCOMM '24), as
    /// that module states it; not in the mlcc paper.
    pub classes: u8,
    /// With classes on, the rates of the classed flows: the policy's per-slot rates
    /// ([`mlcc_sched::ClassRates::Plan`]) or unthrottled ([`mlcc_sched::ClassRates::Line`]).
    /// `[sched] class_rates`. Ignored with classes off.
    pub class_rates: mlcc_sched::ClassRates,
    /// How a flow the policy holds at the floor is enforced: paced at the floor, or as a
    /// LEDBAT scavenger (`mlcc_sched::HeldFlows`). `[sched] held_flows`.
    pub held_flows: mlcc_sched::HeldFlows,
    /// The scavenger's target queueing delay, µs (> 0): LEDBAT's TARGET (RFC 6817, Sec. 2.4.2).
    /// `[sched] scavenger_target_us`. Used with [`mlcc_sched::HeldFlows::Scavenger`] only.
    pub scavenger_target_us: u32,
}

impl CoreConfig {
    /// The served hosts, in the topology's order.
    pub fn served(&self) -> impl Iterator<Item = &Host> {
        self.topology
            .hosts
            .iter()
            .filter(|h| self.hosts.contains(&h.name))
    }
}
