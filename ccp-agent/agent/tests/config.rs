// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! A bad configuration refuses to start with an error naming the file, the field and the value.

mod common;

use ccp_agent::config::{AgentConfig, Topology};
use common::{program_file, TempDir};

const TOPO: &str = r#"
[[link]]
id = 1
capacity_mbps = 100
[[link]]
id = 10
capacity_mbps = 40
[[host]]
name = "h1"
addrs = ["10.0.0.1"]
nic = 1
agent = "127.0.0.1:50061"
[[switch]]
name = "s1"
listen = "127.0.0.1:50070"
links = [10]
[[route]]
from = "h1"
to = "h1"
links = [1, 10]
"#;

fn topo_err(text: &str) -> String {
    let t = TempDir::new("cfg");
    let p = t.write("topo.toml", text);
    let e = Topology::load(&p).unwrap_err();
    assert_eq!(e.file, p);
    e.to_string()
}

fn agent_err(topo: &str, agent: &str, slot_ms: Option<u64>) -> String {
    let t = TempDir::new("cfg");
    t.write("topo.toml", topo);
    let p = t.write("agent.toml", agent);
    let e = AgentConfig::load(&p, slot_ms, None).unwrap_err();
    e.to_string()
}

fn good_agent() -> String {
    format!(
        "topology = \"topo.toml\"\nhosts = [\"h1\"]\nprogram = {:?}\n",
        program_file().display().to_string()
    )
}

#[test]
fn good_configs_load() {
    let t = TempDir::new("cfg");
    t.write("topo.toml", TOPO);
    let p = t.write("agent.toml", &good_agent());
    let c = AgentConfig::load(&p, Some(30), Some(4)).unwrap();
    assert_eq!((c.slot_ms, c.horizon), (30, 4));
    assert_eq!(c.listen.to_string(), "127.0.0.1:50061");
    assert_eq!(c.topology.links[&10], 40_000_000);
    assert!(!c.program.contains('#'), "comments stripped");
    assert_eq!(
        c.topology
            .path(&c.topology.hosts[0], Some(&c.topology.hosts[0])),
        vec![1, 10]
    );
}

#[test]
fn topology_errors_name_the_field_and_value() {
    let e = topo_err(&TOPO.replace("capacity_mbps = 40", "capacity_mbps = 0"));
    assert!(
        e.contains("topo.toml") && e.contains("link[1].capacity_mbps") && e.contains("= 0"),
        "{e}"
    );
    let e = topo_err(&TOPO.replace("addrs = [\"10.0.0.1\"]", "addrs = [\"10.0.0.300\"]"));
    assert!(
        e.contains("host[0].addrs[0]") && e.contains("10.0.0.300"),
        "{e}"
    );
    let e = topo_err(&TOPO.replace("links = [10]", "links = [1]"));
    assert!(e.contains("switch[0].links[0]") && e.contains("NIC"), "{e}");
    let e = topo_err(&TOPO.replace("links = [1, 10]", "links = [10, 1]"));
    assert!(e.contains("route[0].links") && e.contains("[10, 1]"), "{e}");
    let e = topo_err(&TOPO.replace("agent = \"127.0.0.1:50061\"", "agent = \"localhost\""));
    assert!(
        e.contains("host[0].agent") && e.contains("localhost"),
        "{e}"
    );
    let e = topo_err(&format!("slot_ms = 0\n{TOPO}"));
    assert!(e.contains("slot_ms") && e.contains("= 0"), "{e}");
    // Unknown fields are refused, with their position and name.
    let e = topo_err(&TOPO.replace("capacity_mbps = 40", "capacity_mbps = 40\nspeed = 3"));
    assert!(
        e.contains("topo.toml") && e.contains("speed") && e.contains("line"),
        "{e}"
    );
    // Wrong types too.
    let e = topo_err(&TOPO.replace("capacity_mbps = 40", "capacity_mbps = \"fast\""));
    assert!(e.contains("\"fast\""), "{e}");
    let e = topo_err("[[link]]\nid = 1\n");
    assert!(e.contains("capacity_mbps"), "{e}");
}

#[test]
fn agent_errors_name_the_field_and_value() {
    let e = agent_err(TOPO, &good_agent().replace("[\"h1\"]", "[\"h9\"]"), None);
    assert!(
        e.contains("agent.toml") && e.contains("hosts[0]") && e.contains("h9"),
        "{e}"
    );
    let e = agent_err(TOPO, &format!("{}slotms = 60\n", good_agent()), None);
    assert!(e.contains("agent.toml") && e.contains("slotms"), "{e}");
    let e = agent_err(TOPO, &good_agent(), Some(0));
    assert!(e.contains("slot_ms") && e.contains("= 0"), "{e}");
    let e = agent_err(
        TOPO,
        "topology = \"nope.toml\"\nhosts = [\"h1\"]\nprogram = \"x\"\n",
        None,
    );
    assert!(
        e.contains("agent.toml") && e.contains("topology") && e.contains("nope.toml"),
        "{e}"
    );
    let e = agent_err(
        TOPO,
        "topology = \"topo.toml\"\nhosts = [\"h1\"]\nprogram = \"missing.ccp\"\n",
        None,
    );
    assert!(
        e.contains("field `program`") && e.contains("missing.ccp"),
        "{e}"
    );
    let e = agent_err(TOPO, &format!("{}listen = \"x:y\"\n", good_agent()), None);
    assert!(e.contains("listen") && e.contains("x:y"), "{e}");
    let e = agent_err(TOPO, &format!("{}min_rate_kbps = 0\n", good_agent()), None);
    assert!(e.contains("min_rate_kbps") && e.contains("= 0"), "{e}");
    // The topology's own errors name the topology file.
    let e = agent_err(
        &TOPO.replace("capacity_mbps = 40", "capacity_mbps = 0"),
        &good_agent(),
        None,
    );
    assert!(
        e.contains("topo.toml") && e.contains("link[1].capacity_mbps"),
        "{e}"
    );
}

#[test]
fn a_program_that_does_not_compile_or_lacks_fields_is_refused() {
    let t = TempDir::new("cfg");
    t.write("topo.toml", TOPO);
    t.write(
        "bad.ccp",
        "(def (Report.x 0))\n(when true (:= Report.x Nonsense.y))\n",
    );
    let p = t.write(
        "agent.toml",
        "topology = \"topo.toml\"\nhosts = [\"h1\"]\nprogram = \"bad.ccp\"\n",
    );
    let e = AgentConfig::load(&p, None, None).unwrap_err().to_string();
    assert!(
        e.contains("field `program`") && e.contains("bad.ccp"),
        "{e}"
    );
    t.write(
        "small.ccp",
        "(def (Report.x 0))\n(when true (:= Report.x Ack.bytes_acked) (report))\n",
    );
    let p = t.write(
        "agent.toml",
        "topology = \"topo.toml\"\nhosts = [\"h1\"]\nprogram = \"small.ccp\"\n",
    );
    let e = AgentConfig::load(&p, None, None).unwrap_err().to_string();
    assert!(e.contains("lacks Report.acked"), "{e}");
}
