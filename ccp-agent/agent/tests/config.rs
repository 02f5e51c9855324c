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
    let e = agent_err(
        TOPO,
        &format!("{}metrics_addr = \"9470\"\n", good_agent()),
        None,
    );
    assert!(
        e.contains("field `metrics_addr` = \"9470\"") && e.contains("ip:port"),
        "{e}"
    );
    let e = agent_err(
        TOPO,
        &format!("{}metrics_addr = \"127.0.0.1:50061\"\n", good_agent()),
        None,
    );
    assert!(e.contains("metrics_addr") && e.contains("`listen`"), "{e}");
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

/// TOPO with a RED ECN queue on switch link 10, `extra` lines added to its `[link.ecn]`.
fn ecn_topo(extra: &str) -> String {
    TOPO.replace(
        "capacity_mbps = 40\n",
        &format!("capacity_mbps = 40\n[link.ecn]\ndev = \"s1-eth1\"\nqdisc = \"red\"\n{extra}"),
    )
}

#[test]
fn pcn_and_ecn_fields_load_with_defaults_and_bad_ones_are_named() {
    let t = TempDir::new("cfg");
    let p = t.write(
        "topo.toml",
        &format!("[pcn]\ncombine = \"harmonic\"\n{}", ecn_topo("")),
    );
    let topo = Topology::load(&p).unwrap();
    assert_eq!(topo.pcn.combine, mlcc_sched::pcn::Combine::Harmonic);
    assert_eq!(
        (topo.pcn.timeout_ms, topo.pcn.apply_timeout_ms),
        (500, 1000)
    );
    let q = &topo.ecn[&10];
    assert_eq!(
        (
            q.initial_threshold_bytes,
            q.red_limit_bytes,
            q.red_avpkt_bytes,
            q.red_span_bytes
        ),
        (60_000, 600_000, 1500, 1500)
    );
    assert_eq!(q.capacity_bps, 40_000_000);
    assert!(q.netns.is_none() && q.parent.is_none());
    // Agent side: defaults, and a disabled gate.
    t.write("topo.toml", TOPO);
    let a = t.write("agent.toml", &good_agent());
    let c = AgentConfig::load(&a, None, None).unwrap();
    assert!(c.pcn.enabled);
    assert_eq!(
        (c.pcn.threshold_bytes, c.pcn.default_rtt_us, c.pcn.poll_us),
        (15_000, 1000, 500)
    );
    let a = t.write(
        "agent.toml",
        &format!("{}[pcn]\nenabled = false\n", good_agent()),
    );
    assert!(!AgentConfig::load(&a, None, None).unwrap().pcn.enabled);

    let e = topo_err(&ecn_topo("initial_threshold_bytes = 0\n"));
    assert!(
        e.contains("link[1].ecn.initial_threshold_bytes") && e.contains("= 0"),
        "{e}"
    );
    let e = topo_err(&ecn_topo("red_limit_bytes = 1000\n"));
    assert!(
        e.contains("link[1].ecn.red_limit_bytes") && e.contains("1000"),
        "{e}"
    );
    let e = topo_err(&ecn_topo("").replace("qdisc = \"red\"", "qdisc = \"pfifo\""));
    assert!(e.contains("pfifo"), "{e}");
    let e = topo_err(
        &ecn_topo("red_span_bytes = 10\n").replace("qdisc = \"red\"", "qdisc = \"fq_codel\""),
    );
    assert!(
        e.contains("link[1].ecn.red_span_bytes") && e.contains("only for qdisc"),
        "{e}"
    );
    let e = topo_err(&ecn_topo("").replace("dev = \"s1-eth1\"", "dev = \"eth0; reboot\""));
    assert!(e.contains("link[1].ecn.dev") && e.contains("reboot"), "{e}");
    let e = topo_err(&ecn_topo("netns = \"-n\"\n"));
    assert!(e.contains("link[1].ecn.netns"), "{e}");
    let e = topo_err(&format!("[pcn]\ntimeout_ms = 0\n{TOPO}"));
    assert!(e.contains("pcn.timeout_ms") && e.contains("= 0"), "{e}");
    let e = topo_err(&format!("[pcn]\ncombine = \"max\"\n{TOPO}"));
    assert!(e.contains("max"), "{e}");
    // ECN on a host's NIC link: no switch daemon sets it.
    let e = topo_err(&TOPO.replace(
        "capacity_mbps = 100\n",
        "capacity_mbps = 100\n[link.ecn]\ndev = \"h1-eth0\"\nqdisc = \"fq_codel\"\n",
    ));
    assert!(e.contains("link[0].ecn") && e.contains("NIC"), "{e}");
    let e = agent_err(
        TOPO,
        &format!("{}[pcn]\nthreshold_bytes = 0\n", good_agent()),
        None,
    );
    assert!(
        e.contains("pcn.threshold_bytes") && e.contains("= 0"),
        "{e}"
    );
    let e = agent_err(TOPO, &format!("{}[pcn]\npoll_us = 1\n", good_agent()), None);
    assert!(e.contains("pcn.poll_us") && e.contains("= 1"), "{e}");
    let e = agent_err(
        TOPO,
        &format!("{}[pcn]\nthreshold = 5\n", good_agent()),
        None,
    );
    assert!(e.contains("threshold"), "{e}");
}

/// The `[link.classes]` of [`classes_topo`].
const CLASSES: &str = "netns = \"sw\"\ndev = \"s1-eth1\"\nparent = \"10:1\"\ntraining = 2\n\
                       rate_kbit = 40000\nqueue_bytes = 126500\n";

/// TOPO with traffic classes `fields` on switch link 10.
fn classes_topo(fields: &str) -> String {
    TOPO.replace(
        "capacity_mbps = 40\n",
        &format!("capacity_mbps = 40\n[link.classes]\n{fields}"),
    )
}

#[test]
fn traffic_classes_load_and_bad_fields_are_named_with_their_values() {
    let t = TempDir::new("cfg");
    let p = t.write("topo.toml", &classes_topo(CLASSES));
    let topo = Topology::load(&p).unwrap();
    let c = &topo.classes[&10];
    assert_eq!(c.port(), "dev s1-eth1 in netns sw");
    let s = c.spec();
    assert_eq!(
        (&s.training_dscp[..], s.rate_kbit, s.queue_bytes),
        (&mlcc_sched::DEFAULT_DSCP[..2], 40_000, 126_500)
    );
    assert_eq!((s.parent.major, s.parent.minor), (0x10, 1));
    assert!(s.check().is_ok());
    assert!(topo.ecn.is_empty() && topo.classes.len() == 1);
    for (from, to, value) in [
        ("training = 2", "training = 9", "9"),
        ("training = 2", "training = 0", "0"),
        ("rate_kbit = 40000", "rate_kbit = 0", "0"),
        ("queue_bytes = 126500", "queue_bytes = 0", "0"),
        ("parent = \"10:1\"", "parent = \"10\"", "\"10\""),
        ("parent = \"10:1\"", "parent = \"30:1\"", "\"30:1\""),
        ("parent = \"10:1\"", "parent = \"53:\"", "\"53:\""),
        ("dev = \"s1-eth1\"", "dev = \"eth0; reboot\"", "reboot"),
    ] {
        let field = to.split(' ').next().unwrap();
        let e = topo_err(&classes_topo(&CLASSES.replace(from, to)));
        assert!(
            e.contains(&format!("link[1].classes.{field}")) && e.contains(value),
            "{to}: {e}"
        );
    }
    let e = topo_err(&classes_topo(&CLASSES.replace("rate_kbit = 40000\n", "")));
    assert!(e.contains("rate_kbit"), "{e}");
    let e = topo_err(&classes_topo(&format!("{CLASSES}bands = 3\n")));
    assert!(e.contains("bands"), "{e}");
    // On a host's NIC link: no switch daemon installs them.
    let e = topo_err(&TOPO.replace(
        "capacity_mbps = 100\n",
        &format!("capacity_mbps = 100\n[link.classes]\n{CLASSES}"),
    ));
    assert!(e.contains("link[0].classes") && e.contains("NIC"), "{e}");
    // Where the link's ECN qdisc is: the HTB would have to replace it.
    let both = classes_topo(CLASSES).replace(
        "[link.classes]",
        "[link.ecn]\nnetns = \"sw\"\ndev = \"s1-eth1\"\nparent = \"10:1\"\nqdisc = \"fq_codel\"\n[link.classes]",
    );
    let e = topo_err(&both);
    assert!(
        e.contains("link[1].classes.parent") && e.contains("10:1") && e.contains("ECN"),
        "{e}"
    );
    // Elsewhere on the port (the ECN qdisc under another class), both are kept.
    let t2 = TempDir::new("cfg");
    let p = t2.write(
        "topo.toml",
        &both.replacen("parent = \"10:1\"", "parent = \"1:1\"", 1),
    );
    let topo = Topology::load(&p).unwrap();
    assert!(topo.ecn.contains_key(&10) && topo.classes.contains_key(&10));
}

#[test]
fn the_rule_set_defaults_to_priority_and_a_bad_one_is_named() {
    let t = TempDir::new("cfg");
    t.write("topo.toml", TOPO);
    let a = t.write("agent.toml", &good_agent());
    let c = AgentConfig::load(&a, None, None).unwrap();
    assert_eq!(c.rules, mlcc_sched::Rules::Priority);
    assert_eq!(c.rules, ccp_agent::config::DEFAULT_RULES);
    for (name, rules) in [
        ("interleave", mlcc_sched::Rules::Interleave),
        ("mlcc", mlcc_sched::Rules::Mlcc),
    ] {
        let a = t.write(
            "agent.toml",
            &format!("{}[sched]\nrules = \"{name}\"\n", good_agent()),
        );
        let c = AgentConfig::load(&a, None, None).unwrap();
        assert_eq!(c.rules, rules);
    }
    let e = agent_err(
        TOPO,
        &format!("{}[sched]\nrules = \"fifo\"\n", good_agent()),
        None,
    );
    assert!(
        e.contains("agent.toml")
            && e.contains("sched.rules")
            && e.contains("\"fifo\"")
            && e.contains("\"priority\""),
        "{e}"
    );
    let e = agent_err(
        TOPO,
        &format!("{}[sched]\norder = \"mlcc\"\n", good_agent()),
        None,
    );
    assert!(e.contains("order"), "{e}");
    // Work conservation and the job order: defaults, values, a bad order named.
    assert!(c.work_conserving);
    assert_eq!(c.job_order, ccp_agent::config::JobOrder::SlowdownDeadline);
    let a = t.write(
        "agent.toml",
        &format!(
            "{}[sched]\nwork_conserving = false\njob_order = \"least_attained\"\n",
            good_agent()
        ),
    );
    let c = AgentConfig::load(&a, None, None).unwrap();
    assert!(!c.work_conserving);
    assert_eq!(c.job_order, ccp_agent::config::JobOrder::LeastAttained);
    let e = agent_err(
        TOPO,
        &format!("{}[sched]\njob_order = \"lifo\"\n", good_agent()),
        None,
    );
    assert!(
        e.contains("sched.job_order")
            && e.contains("\"lifo\"")
            && e.contains("first_come")
            && e.contains("earliest_deadline")
            && e.contains("slowdown_deadline"),
        "{e}"
    );
    let a = t.write(
        "agent.toml",
        &format!(
            "{}[sched]
job_order = \"earliest_deadline\"\n",
            good_agent()
        ),
    );
    let c = AgentConfig::load(&a, None, None).unwrap();
    assert_eq!(c.job_order, ccp_agent::config::JobOrder::EarliestDeadline);
}

/// Command-line overrides (`--host`, `--metrics-addr`, `--slot-ms`) replace the file's fields and
/// are checked as the fields are; an error says the value came from the command line.
#[test]
fn command_line_overrides_are_checked_like_the_file() {
    use ccp_agent::config::Overrides;
    let t = TempDir::new("cfg");
    t.write("topo.toml", TOPO);
    let a = t.write(
        "agent.toml",
        &format!("{}metrics_addr = \"127.0.0.1:9470\"\n", good_agent()),
    );
    let c = AgentConfig::load_with(
        &a,
        &Overrides {
            slot_ms: Some(30),
            metrics_addr: Some("127.0.0.1:9999".parse().unwrap()),
            hosts: vec!["h1".into()],
            ..Overrides::default()
        },
    )
    .unwrap();
    assert_eq!(c.slot_ms, 30);
    assert_eq!(c.metrics_addr, Some("127.0.0.1:9999".parse().unwrap()));
    assert_eq!(c.hosts, ["h1"]);
    // Without overrides, the file's values.
    let c = AgentConfig::load_with(&a, &Overrides::default()).unwrap();
    assert_eq!(c.metrics_addr, Some("127.0.0.1:9470".parse().unwrap()));
    // A --host that the topology does not know.
    let e = AgentConfig::load_with(
        &a,
        &Overrides {
            hosts: vec!["h9".into()],
            ..Overrides::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("--host") && e.contains("\"h9\"") && e.contains("topo.toml"),
        "{e}"
    );
    // A --metrics-addr on the gRPC listen address (h1's agent address).
    let e = AgentConfig::load_with(
        &a,
        &Overrides {
            metrics_addr: Some("127.0.0.1:50061".parse().unwrap()),
            ..Overrides::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("--metrics-addr") && e.contains("127.0.0.1:50061") && e.contains("listen"),
        "{e}"
    );
    // A --slot-ms outside the allowed range is named as the file's would be.
    let e = AgentConfig::load_with(
        &a,
        &Overrides {
            slot_ms: Some(0),
            ..Overrides::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("slot_ms"), "{e}");
}

#[test]
fn traffic_classes_are_off_by_default_and_out_of_range_is_named() {
    let t = TempDir::new("cfg");
    t.write("topo.toml", TOPO);
    let a = t.write("agent.toml", &good_agent());
    let c = AgentConfig::load(&a, None, None).unwrap();
    assert_eq!((c.classes, c.core_config().classes), (0, 0));
    for n in [0u8, 1, 4, 8] {
        let a = t.write(
            "agent.toml",
            &format!("{}[sched]\nclasses = {n}\n", good_agent()),
        );
        let c = AgentConfig::load(&a, None, None).unwrap();
        assert_eq!((c.classes, c.core_config().classes), (n, n));
    }
    for bad in ["9", "-1", "300"] {
        let e = agent_err(
            TOPO,
            &format!("{}[sched]\nclasses = {bad}\n", good_agent()),
            None,
        );
        assert!(
            e.contains("agent.toml")
                && e.contains("sched.classes")
                && e.contains(&format!("= {bad}"))
                && e.contains("1..=8"),
            "{e}"
        );
    }
}

#[test]
fn class_rates_parse_by_name_and_a_bad_one_is_named() {
    let t = TempDir::new("cfg");
    t.write("topo.toml", TOPO);
    let a = t.write("agent.toml", &good_agent());
    let c = AgentConfig::load(&a, None, None).unwrap();
    assert_eq!(c.class_rates, mlcc_sched::ClassRates::Plan);
    for (name, want) in [
        ("plan", mlcc_sched::ClassRates::Plan),
        ("line", mlcc_sched::ClassRates::Line),
    ] {
        let a = t.write(
            "agent.toml",
            &format!(
                "{}[sched]\nclasses = 4\nclass_rates = \"{name}\"\n",
                good_agent()
            ),
        );
        let c = AgentConfig::load(&a, None, None).unwrap();
        assert_eq!((c.class_rates, c.core_config().class_rates), (want, want));
    }
    let e = agent_err(
        TOPO,
        &format!("{}[sched]\nclass_rates = \"fast\"\n", good_agent()),
        None,
    );
    assert!(
        e.contains("agent.toml")
            && e.contains("sched.class_rates")
            && e.contains("fast")
            && e.contains("\"line\""),
        "{e}"
    );
}

#[test]
fn held_flows_and_the_scavenger_target_parse_and_bad_ones_are_named() {
    let t = TempDir::new("cfg");
    t.write("topo.toml", TOPO);
    let a = t.write("agent.toml", &good_agent());
    let c = AgentConfig::load(&a, None, None).unwrap();
    assert_eq!(
        (c.held_flows, c.scavenger_target_us),
        (mlcc_sched::HeldFlows::Scavenger, 1000)
    );
    let a = t.write(
        "agent.toml",
        &format!(
            "{}[sched]\nheld_flows = \"scavenger\"\nscavenger_target_us = 400\n",
            good_agent()
        ),
    );
    let c = AgentConfig::load(&a, None, None).unwrap();
    let core = c.core_config();
    assert_eq!(
        (c.held_flows, c.scavenger_target_us),
        (mlcc_sched::HeldFlows::Scavenger, 400)
    );
    assert_eq!(
        (core.held_flows, core.scavenger_target_us),
        (c.held_flows, 400)
    );
    let e = agent_err(
        TOPO,
        &format!("{}[sched]\nheld_flows = \"ledbat\"\n", good_agent()),
        None,
    );
    assert!(
        e.contains("agent.toml")
            && e.contains("sched.held_flows")
            && e.contains("ledbat")
            && e.contains("\"scavenger\""),
        "{e}"
    );
    for bad in ["0", "100001", "-5"] {
        let e = agent_err(
            TOPO,
            &format!("{}[sched]\nscavenger_target_us = {bad}\n", good_agent()),
            None,
        );
        assert!(
            e.contains("agent.toml")
                && e.contains("sched.scavenger_target_us")
                && e.contains(&format!("= {bad}"))
                && e.contains("1..=100000"),
            "{e}"
        );
    }
}
