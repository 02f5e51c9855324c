// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The network the core plans on: hosts, switches, link capacities and routes, as plain data,
//! and the lookups over them (which host owns an address, the links of a flow, the switch that
//! owns a link, the ingress links of served hosts).
//!
//! "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers", Sec. IV-A: a flow's
//! rate is planned on every link of its path, the NIC links by its agent and the switch links
//! with the switches' feedback. The agent reads these from `topo.toml` (`ccp_agent::config`,
//! whose `Topology` holds the same [`Host`]s, [`Switch`]es and [`Routes`] and answers the same
//! lookups through the functions here, so each rule has one definition).

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};

/// Routes: (from, to) host names → the links of the path, in order.
pub type Routes = HashMap<(String, String), Vec<u32>>;

/// A checked host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Name.
    pub name: String,
    /// IPv4 addresses.
    pub addrs: Vec<Ipv4Addr>,
    /// NIC egress link.
    pub nic: u32,
    /// Agent address (the gRPC address of the agent that serves it: where its notices go).
    pub agent: SocketAddr,
}

/// A checked switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    /// Name.
    pub name: String,
    /// gRPC address.
    pub listen: SocketAddr,
    /// Owned links.
    pub links: Vec<u32>,
}

/// The part of a topology the core plans on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fabric {
    /// Link id → capacity, bit/s.
    pub links: HashMap<u32, u64>,
    /// Hosts, in file order.
    pub hosts: Vec<Host>,
    /// Switches, in file order.
    pub switches: Vec<Switch>,
    /// The routes between hosts.
    pub routes: Routes,
}

impl Fabric {
    /// The host that owns `ip` ([`host_of`]).
    pub fn host_of(&self, ip: Ipv4Addr) -> Option<&Host> {
        host_of(&self.hosts, ip)
    }

    /// The links of a flow from `from` to `to` ([`path`]).
    pub fn path(&self, from: &Host, to: Option<&Host>) -> Vec<u32> {
        path(&self.routes, from, to)
    }

    /// The ingress links of the hosts named in `served` ([`served_ingress`]).
    pub fn served_ingress(&self, served: &[String]) -> Vec<u32> {
        served_ingress(&self.routes, &self.hosts, served)
    }

    /// The switch that owns `link`, if any ([`switch_of`]).
    pub fn switch_of(&self, link: u32) -> Option<&Switch> {
        switch_of(&self.switches, link)
    }
}

/// The host of `hosts` that owns `ip`.
pub fn host_of(hosts: &[Host], ip: Ipv4Addr) -> Option<&Host> {
    hosts.iter().find(|h| h.addrs.contains(&ip))
}

/// The links of a flow from `from` to `to` (hosts): the route, or `from`'s NIC.
pub fn path(routes: &Routes, from: &Host, to: Option<&Host>) -> Vec<u32> {
    to.and_then(|t| routes.get(&(from.name.clone(), t.name.clone())))
        .cloned()
        .unwrap_or_else(|| vec![from.nic])
}

/// The ingress links of the hosts named in `served`: the last link of every route into one of
/// them that is not its sender's NIC (ascending, without repeats). A NIC-only agent plans them
/// beside its NICs, the receive side of the hosts it serves: with both ends of a flow served
/// here, no notice (the mlcc paper's Alg. 2) carries the receiver's limit.
pub fn served_ingress(routes: &Routes, hosts: &[Host], served: &[String]) -> Vec<u32> {
    let mut out: Vec<u32> = routes
        .iter()
        .filter(|((_, to), _)| served.contains(to))
        .filter_map(|((from, _), links)| {
            let last = *links.last()?;
            let nic = hosts.iter().find(|h| &h.name == from)?.nic;
            (last != nic).then_some(last)
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The switch of `switches` that owns `link`, if any.
pub fn switch_of(switches: &[Switch], link: u32) -> Option<&Switch> {
    switches.iter().find(|s| s.links.contains(&link))
}
