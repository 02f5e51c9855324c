// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The agent core's configuration from the agent's: [`AgentConfig::core_config`] hands the core
//! ([`crate::agent_core`]) what it reads of the checked `agent.toml` and `topo.toml`, as a plain
//! struct, so the core depends on no file format and no module that reads files.

use crate::agent_core::fabric::Fabric;
use crate::agent_core::CoreConfig;
use crate::config::AgentConfig;

impl AgentConfig {
    /// What the core reads of this configuration: the slot grid, the topology's links, hosts,
    /// switches and routes, the served hosts, the agent's address and the scheduling options.
    pub fn core_config(&self) -> CoreConfig {
        let t = &self.topology;
        CoreConfig {
            slot_ms: self.slot_ms,
            horizon: self.horizon,
            topology: Fabric {
                links: t.links.clone(),
                hosts: t.hosts.clone(),
                switches: t.switches.clone(),
                routes: t.routes.clone(),
            },
            hosts: self.hosts.clone(),
            listen: self.listen,
            nic_only: self.nic_only,
            schedule: self.schedule,
            min_rate_bps: self.min_rate_bps,
            cwnd_bytes: self.cwnd_bytes,
            rpc_timeout_ms: self.rpc_timeout_ms,
            rules: self.rules,
            job_order: self.job_order,
            work_conserving: self.work_conserving,
            strict_rates: self.strict_rates,
            classes: self.classes,
            class_rates: self.class_rates,
            held_flows: self.held_flows,
            scavenger_target_us: self.scavenger_target_us,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_core::fabric::{Host, Switch};
    use std::collections::HashMap;

    /// A parsed agent.toml and topo.toml give the core their values, agent.toml's defaults
    /// included (the values the core's own tests configure by hand).
    #[test]
    fn the_core_gets_the_checked_values_and_defaults() {
        let n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let dir =
            std::env::temp_dir().join(format!("ccp-agent-core-config-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let topo = "slot_ms = 20\nhorizon = 5\n\
            [[link]]\nid = 1\ncapacity_mbps = 1000\n\
            [[link]]\nid = 10\ncapacity_mbps = 100\n\
            [[host]]\nname = \"h1\"\naddrs = [\"10.0.0.1\"]\nnic = 1\nagent = \"127.0.0.1:7101\"\n\
            [[switch]]\nname = \"s1\"\nlisten = \"127.0.0.1:7200\"\nlinks = [10]\n\
            [[route]]\nfrom = \"h1\"\nto = \"h1\"\nlinks = [1, 10]\n";
        std::fs::write(dir.join("topo.toml"), topo).unwrap();
        let program = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../datapath-programs/mlcc-slot.ccp"
        );
        let text = format!(
            "topology = \"topo.toml\"\nhosts = [\"h1\"]\nprogram = {program:?}\nnic_only = true\n\
             [sched]\nrules = \"priority\"\n"
        );
        let file = dir.join("agent.toml");
        let cfg = AgentConfig::parse_text(&file, &text, &Default::default()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let want = CoreConfig {
            slot_ms: 20,
            horizon: 5,
            topology: Fabric {
                links: HashMap::from([(1, 1_000_000_000), (10, 100_000_000)]),
                hosts: vec![Host {
                    name: "h1".into(),
                    addrs: vec!["10.0.0.1".parse().unwrap()],
                    nic: 1,
                    agent: "127.0.0.1:7101".parse().unwrap(),
                }],
                switches: vec![Switch {
                    name: "s1".into(),
                    listen: "127.0.0.1:7200".parse().unwrap(),
                    links: vec![10],
                }],
                routes: HashMap::from([(("h1".into(), "h1".into()), vec![1, 10])]),
            },
            hosts: vec!["h1".into()],
            listen: "127.0.0.1:7101".parse().unwrap(),
            nic_only: true,
            schedule: true,
            min_rate_bps: crate::config::DEFAULT_MIN_RATE_KBPS * 1000,
            cwnd_bytes: 16 << 20,
            rpc_timeout_ms: 6,
            rules: mlcc_sched::Rules::Priority,
            job_order: mlcc_sched::JobOrder::default(),
            work_conserving: crate::config::DEFAULT_WORK_CONSERVING,
            strict_rates: crate::config::DEFAULT_STRICT_RATES,
            classes: crate::config::DEFAULT_CLASSES,
            class_rates: crate::config::DEFAULT_CLASS_RATES,
            held_flows: crate::config::DEFAULT_HELD_FLOWS,
            scavenger_target_us: crate::config::DEFAULT_SCAVENGER_TARGET_US,
        };
        assert_eq!(cfg.core_config(), want);
        assert_eq!(want.min_rate_bps, 5_000_000);
        assert!(want.work_conserving && !want.strict_rates);
        assert_eq!(want.classes, 0, "classes off by default");
        assert_eq!(want.class_rates, mlcc_sched::ClassRates::Plan);
        assert_eq!(want.held_flows, mlcc_sched::HeldFlows::Scavenger);
    }
}
