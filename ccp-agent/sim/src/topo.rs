// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The simulated network: the three-tier tree of "Dynamic Flow Scheduling for DNN Training
//! Workloads in Data Centers", Sec. VII (Simulator): servers with 8 GPUs, 10 servers per rack
//! under a ToR switch (server links 10 Gbit/s), 10 racks per edge switch (ToR uplinks
//! 20 Gbit/s), all edge switches under one aggregation switch (edge uplinks 40 Gbit/s). Every
//! wire is two directed links (up, down), each with its own capacity; a flow's path is unique
//! (a tree has one route), so no ECMP is needed.
//!
//! Traffic between two GPUs of one server does not enter the network: it crosses the server's
//! internal fabric, modelled as two more directed links per server (GPU → PCIe switch and PCIe
//! switch → GPU, like a wire's up and down) of capacity `intra_gbps` each, shared by every flow
//! inside that server. Default 100 Gbit/s: a PCIe 3.0 x16 link carries 15.75 GB/s (126 Gbit/s)
//! per direction after 128b/130b encoding (PCI-SIG, PCIe Base Specification 3.0: 8 GT/s per
//! lane), and GPU-to-GPU copies through a PCIe switch reach about 80 % of that in practice; our
//! round figure. Internal links come after the network's links, so the network's link indices do
//! not depend on them.

use serde::{Deserialize, Serialize};
use smallvec::{smallvec, SmallVec};

use crate::error::SimError;

/// Links of a path, held inline up to six, the tree's longest path: the uplinks of the sending
/// server, its ToR and its edge switch, then the downlinks of the receiving edge switch, ToR and
/// server (a longer path, on another topology, spills to the heap). Flows and the engine's
/// allocation keep their paths inside their entries, so the passes over a job's flows do not
/// chase one buffer per flow.
pub type Path = SmallVec<[u32; 6]>;

/// Sizes and speeds of the tree (all configurable from the command line).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TreeConfig {
    /// Number of servers (default 1000).
    pub servers: u32,
    /// GPUs per server (default 8); a worker or a parameter server takes one.
    pub gpus_per_server: u32,
    /// Servers per rack / ToR switch (default 10).
    pub servers_per_rack: u32,
    /// Racks per edge switch (default 10).
    pub racks_per_edge: u32,
    /// Server ↔ ToR link speed, Gbit/s (default 10).
    pub server_gbps: f64,
    /// ToR ↔ edge link speed, Gbit/s (default 20).
    pub tor_gbps: f64,
    /// Edge ↔ aggregation link speed, Gbit/s (default 40).
    pub edge_gbps: f64,
    /// Speed of a server's internal fabric between two of its GPUs, Gbit/s per direction
    /// (default 100, about a PCIe 3.0 x16 link; see the module header).
    #[serde(default = "default_intra_gbps")]
    pub intra_gbps: f64,
}

/// Default internal fabric speed, Gbit/s (see the module header).
pub const DEFAULT_INTRA_GBPS: f64 = 100.0;

fn default_intra_gbps() -> f64 {
    DEFAULT_INTRA_GBPS
}

impl Default for TreeConfig {
    fn default() -> Self {
        TreeConfig {
            servers: 1000,
            gpus_per_server: 8,
            servers_per_rack: 10,
            racks_per_edge: 10,
            server_gbps: 10.0,
            tor_gbps: 20.0,
            edge_gbps: 40.0,
            intra_gbps: DEFAULT_INTRA_GBPS,
        }
    }
}

/// Which tier a link belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Server ↔ ToR.
    Server,
    /// ToR ↔ edge.
    Tor,
    /// Edge ↔ aggregation.
    Edge,
    /// Inside a server (GPU ↔ GPU over its PCIe fabric); not part of the network.
    Intra,
}

/// The built tree: link capacities and routes.
#[derive(Clone, Debug)]
pub struct Tree {
    /// The configuration it was built from.
    pub config: TreeConfig,
    /// Capacity of each link, bytes/s, by link index.
    pub capacity: Vec<f64>,
    /// Tier of each link.
    pub tier: Vec<Tier>,
    racks: u32,
}

impl Tree {
    /// Builds the tree; refuses zero sizes and speeds that are not positive and finite.
    pub fn new(config: TreeConfig) -> Result<Tree, SimError> {
        for (name, v) in [
            ("servers", config.servers),
            ("gpus_per_server", config.gpus_per_server),
            ("servers_per_rack", config.servers_per_rack),
            ("racks_per_edge", config.racks_per_edge),
        ] {
            if v == 0 {
                return Err(SimError::Config(format!("{name} = 0: must be at least 1")));
            }
        }
        for (name, v) in [
            ("server_gbps", config.server_gbps),
            ("tor_gbps", config.tor_gbps),
            ("edge_gbps", config.edge_gbps),
            ("intra_gbps", config.intra_gbps),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 1.0e6) {
                return Err(SimError::Config(format!(
                    "{name} = {v}: must be in (0, 1e6] Gbit/s"
                )));
            }
        }
        if config.servers > 1_000_000 {
            return Err(SimError::Config(format!(
                "servers = {}: at most 1000000",
                config.servers
            )));
        }
        let racks = config.servers.div_ceil(config.servers_per_rack);
        let edges = racks.div_ceil(config.racks_per_edge);
        let n = 2 * (2 * config.servers + racks + edges) as usize;
        let mut capacity = Vec::with_capacity(n);
        let mut tier = Vec::with_capacity(n);
        for (count, gbps, t) in [
            (config.servers, config.server_gbps, Tier::Server),
            (racks, config.tor_gbps, Tier::Tor),
            (edges, config.edge_gbps, Tier::Edge),
            (config.servers, config.intra_gbps, Tier::Intra),
        ] {
            for _ in 0..2 * count {
                capacity.push(gbps * 1e9 / 8.0);
                tier.push(t);
            }
        }
        Ok(Tree {
            config,
            capacity,
            tier,
            racks,
        })
    }

    /// A star: `n` servers under one switch (one rack), like the VM testbed's hosts around its
    /// switch namespace, with each server's own link capacities, bytes/s: `up[s]` from server
    /// `s` to the switch, `down[s]` from the switch to it (the testbed shapes only the switch's
    /// port toward a host). A path between two servers is `[up link of a, down link of b]`.
    /// Refuses `n = 0`, `up`/`down` of another length than `n`, and capacities that are not
    /// positive and finite (naming the server and the value).
    pub fn star(n: u32, gpus_per_server: u32, up: &[f64], down: &[f64]) -> Result<Tree, SimError> {
        if up.len() != n as usize || down.len() != n as usize {
            return Err(SimError::Config(format!(
                "star of {n} servers: {} up and {} down capacities given",
                up.len(),
                down.len()
            )));
        }
        let mut t = Tree::new(TreeConfig {
            servers: n,
            gpus_per_server,
            servers_per_rack: n.max(1),
            racks_per_edge: 1,
            ..TreeConfig::default()
        })?;
        for s in 0..n {
            for (down_link, bps) in [(false, up[s as usize]), (true, down[s as usize])] {
                if !(bps.is_finite() && bps > 0.0) {
                    return Err(SimError::Config(format!(
                        "server {s}: {} capacity {bps} bytes/s: must be > 0",
                        if down_link { "down" } else { "up" }
                    )));
                }
                let l = t.server_link(s, down_link) as usize;
                t.capacity[l] = bps;
            }
        }
        Ok(t)
    }

    /// Number of directed links.
    pub fn links(&self) -> usize {
        self.capacity.len()
    }

    /// Rack of server `s`.
    pub fn rack_of(&self, s: u32) -> u32 {
        s / self.config.servers_per_rack
    }

    /// Edge switch of server `s`.
    pub fn edge_of(&self, s: u32) -> u32 {
        self.rack_of(s) / self.config.racks_per_edge
    }

    fn server_link(&self, s: u32, down: bool) -> u32 {
        2 * s + u32::from(down)
    }

    fn rack_link(&self, r: u32, down: bool) -> u32 {
        2 * (self.config.servers + r) + u32::from(down)
    }

    fn edge_link(&self, e: u32, down: bool) -> u32 {
        2 * (self.config.servers + self.racks + e) + u32::from(down)
    }

    fn intra_link(&self, s: u32, down: bool) -> u32 {
        2 * (self.config.servers + self.racks + self.racks.div_ceil(self.config.racks_per_edge) + s)
            + u32::from(down)
    }

    /// True when link `l` is inside a server (not part of the network).
    pub fn is_intra(&self, l: u32) -> bool {
        self.tier.get(l as usize) == Some(&Tier::Intra)
    }

    /// The directed links from server `a` to server `b`, in order; when `a == b` (two GPUs of
    /// one server), the server's two internal links: such traffic does not enter the network.
    pub fn path(&self, a: u32, b: u32) -> Path {
        if a == b {
            return smallvec![self.intra_link(a, false), self.intra_link(a, true)];
        }
        let mut p: Path = smallvec![self.server_link(a, false)];
        let (ra, rb) = (self.rack_of(a), self.rack_of(b));
        if ra != rb {
            p.push(self.rack_link(ra, false));
            let (ea, eb) = (self.edge_of(a), self.edge_of(b));
            if ea != eb {
                p.push(self.edge_link(ea, false));
                p.push(self.edge_link(eb, true));
            }
            p.push(self.rack_link(rb, true));
        }
        p.push(self.server_link(b, true));
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_climb_only_as_high_as_needed() {
        let t = Tree::new(TreeConfig::default()).unwrap();
        assert_eq!(t.links(), 2 * (1000 + 100 + 10) + 2 * 1000);
        assert_eq!(t.path(3, 3).as_slice(), [2 * 1110 + 6, 2 * 1110 + 7]);
        assert!(t.path(3, 3).iter().all(|l| t.is_intra(*l)));
        assert_eq!(t.capacity[2 * 1110 + 6], 100e9 / 8.0);
        assert!(t.path(0, 100).iter().all(|l| !t.is_intra(*l)));
        assert_eq!(t.path(0, 1).as_slice(), [0, 3]);
        assert_eq!(t.path(0, 10).len(), 4);
        assert_eq!(t.path(0, 100).len(), 6);
        assert_eq!(t.capacity[0], 1.25e9);
        assert_eq!(t.tier[t.path(0, 100)[2] as usize], Tier::Edge);
        assert!(Tree::new(TreeConfig {
            servers: 0,
            ..TreeConfig::default()
        })
        .unwrap_err()
        .to_string()
        .contains("servers = 0"));
        assert!(Tree::new(TreeConfig {
            tor_gbps: -1.0,
            ..TreeConfig::default()
        })
        .is_err());
    }
}
