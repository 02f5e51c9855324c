// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The example configuration shipped in the ccp-agent package
//! (`ccp-agent/packaging/examples`, installed to /usr/share/doc/ccp-agent/examples) passes the
//! same validation as `ccp-agent check` and the services, so an operator's copy starts.

use ccp_agent::config::{AgentConfig, Topology, DEFAULT_SLOT_MS};
use std::path::{Path, PathBuf};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/examples")
}

#[test]
fn example_topology_is_valid() {
    let topo = Topology::load(&examples().join("topo.toml")).expect("example topo.toml");
    // The example spells out the agent's default slot length.
    assert_eq!(topo.slot_ms, DEFAULT_SLOT_MS);
    assert_eq!(topo.hosts.len(), 1);
}

#[test]
fn example_agent_config_is_valid_once_the_program_is_installed() {
    // The example names the program where the package installs it; point it at the repository's
    // copy of the same file, in a scratch copy of /etc/ccp-agent.
    let dir = std::env::temp_dir().join(format!("ccp-agent-examples-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let program =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datapath-programs/mlcc-slot.ccp");
    let agent = std::fs::read_to_string(examples().join("agent.toml")).unwrap();
    assert!(
        agent.contains("\"/usr/share/ccp-agent/mlcc-slot.ccp\""),
        "the package's program path"
    );
    let agent = agent.replace(
        "/usr/share/ccp-agent/mlcc-slot.ccp",
        program.to_str().unwrap(),
    );
    std::fs::write(dir.join("agent.toml"), agent).unwrap();
    std::fs::copy(examples().join("topo.toml"), dir.join("topo.toml")).unwrap();
    let cfg = AgentConfig::load(&dir.join("agent.toml"), None, None);
    std::fs::remove_dir_all(&dir).unwrap();
    let cfg = cfg.expect("example agent.toml");
    assert_eq!(cfg.hosts, vec!["h1".to_string()]);
    assert!(cfg.nic_only);
    assert_eq!(cfg.listen, "127.0.0.1:50061".parse().unwrap());
}
