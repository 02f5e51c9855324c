// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The switch daemon's traffic classes: at start-up, before it serves, the daemon installs the
//! classes of each of its links that has a `[link.classes]` table (the testbed's recipe,
//! [`ecn_qdisc::classes`]) through its [`ThresholdApplier`] ([`super::NetlinkApplier`]: over
//! rtnetlink, in the port's namespace), logs what it installed, counts the ports installed and
//! the failures ([`ClassesCount`], the metrics `ccp_switch_classes_ports` and
//! `ccp_switch_classes_failures_total`), and refuses to start when a port's classes cannot be
//! installed: a switch whose ports do not schedule by DSCP would let the agents' strict priority
//! among jobs silently not happen.

use super::ThresholdApplier;
use crate::config::{ClassesConfig, Switch, Topology};
use std::time::Instant;

/// Ports whose classes were installed, and installations that failed, since start-up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassesCount {
    /// Ports with their classes installed.
    pub ports: u64,
    /// Installations that failed.
    pub failures: u64,
}

/// The ports of `switch` with traffic classes, in the order of its links: (link, classes).
pub fn switch_classes(topo: &Topology, switch: &Switch) -> Vec<(u32, ClassesConfig)> {
    switch
        .links
        .iter()
        .filter_map(|l| Some((*l, topo.classes.get(l)?.clone())))
        .collect()
}

/// Installs the classes of `ports` (of switch `name`) one port after another with `runner`,
/// logging each, until one fails. Returns the count, and the first failure as an error naming
/// the switch, the link, the port (device, namespace) and the runner's description (the request
/// that failed and the kernel's errno). Blocks for the kernel's answers.
pub fn install_all(
    name: &str,
    ports: &[(u32, ClassesConfig)],
    runner: &dyn ThresholdApplier,
) -> (ClassesCount, anyhow::Result<()>) {
    let mut count = ClassesCount::default();
    for (link, c) in ports {
        let t0 = Instant::now();
        match runner.install_classes(c) {
            Ok(done) => {
                count.ports += 1;
                tracing::info!(
                    link,
                    port = %c.port(),
                    parent = %c.parent,
                    training = c.training,
                    rate_kbit = c.rate_kbit,
                    queue_bytes = c.queue_bytes,
                    took_us = t0.elapsed().as_micros() as u64,
                    installed = %done,
                    "traffic classes installed"
                );
            }
            Err(e) => {
                count.failures += 1;
                let msg = format!(
                    "switch {name:?}: link {link} ({}): installing the traffic classes failed: {e}",
                    c.port()
                );
                tracing::error!(error = %msg, "traffic classes not installed");
                return (count, Err(anyhow::anyhow!(msg)));
            }
        }
    }
    (count, Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::RecordingRunner;
    use std::path::Path;

    /// A switch "s" whose link 10 has classes, 11 none, 12 classes in the daemon's namespace.
    const CLASSES_TOPO: &str = r#"
[[link]]
id = 10
capacity_mbps = 100
[link.classes]
netns = "sw"
dev = "s-eth10"
parent = "10:1"
training = 3
rate_kbit = 100000
queue_bytes = 126500
[[link]]
id = 11
capacity_mbps = 100
[[link]]
id = 12
capacity_mbps = 40
[link.classes]
dev = "s-eth12"
parent = "1:1"
training = 1
rate_kbit = 40000
queue_bytes = 60000
[[switch]]
name = "s"
listen = "127.0.0.1:1"
links = [12, 11, 10]
"#;

    fn topo() -> Topology {
        Topology::parse_text(Path::new("topo.toml"), CLASSES_TOPO).unwrap()
    }

    #[test]
    fn each_port_with_classes_is_installed_in_link_order() {
        let topo = topo();
        let ports = switch_classes(&topo, &topo.switches[0]);
        assert_eq!(ports.iter().map(|p| p.0).collect::<Vec<_>>(), [12, 10]);
        let runner = RecordingRunner::default();
        let (count, r) = install_all("s", &ports, &runner);
        r.unwrap();
        assert_eq!(
            count,
            ClassesCount {
                ports: 2,
                failures: 0
            }
        );
        assert_eq!(
            runner.lines(),
            [
                "classes dev s-eth12 parent 1:1 training 1 rate_kbit 40000 queue_bytes 60000",
                "classes dev s-eth10 in netns sw parent 10:1 training 3 rate_kbit 100000 queue_bytes 126500",
            ]
        );
    }

    #[test]
    fn a_port_that_fails_stops_the_installation_and_is_named() {
        let topo = topo();
        let ports = switch_classes(&topo, &topo.switches[0]);
        let runner = RecordingRunner {
            fail: true,
            ..Default::default()
        };
        let (count, r) = install_all("s", &ports, &runner);
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("switch \"s\": link 12 (dev s-eth12)") && e.contains("recording runner"),
            "{e}"
        );
        assert_eq!(
            count,
            ClassesCount {
                ports: 0,
                failures: 1
            }
        );
        assert_eq!(runner.lines().len(), 1, "stopped at the first failure");
    }

    /// Runs the daemon of `topo`'s switch with `runner` on an ephemeral port until it has
    /// started (the shutdown future is ready at once).
    fn run_daemon(topo: &Topology, runner: std::sync::Arc<RecordingRunner>) -> anyhow::Result<()> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let clock = mlcc_sched::SlotClock::new(1_000_000, 4).unwrap();
            crate::switch::serve_with(
                topo,
                &topo.switches[0],
                clock,
                Some(l),
                None,
                runner,
                async {},
            )
            .await
        })
    }

    #[test]
    fn the_daemon_installs_the_classes_before_serving_and_refuses_to_start_without_them() {
        let topo = topo();
        let runner = std::sync::Arc::new(RecordingRunner::default());
        run_daemon(&topo, runner.clone()).unwrap();
        assert_eq!(runner.lines().len(), 2, "{:?}", runner.lines());
        let runner = std::sync::Arc::new(RecordingRunner {
            fail: true,
            ..Default::default()
        });
        let e = run_daemon(&topo, runner).unwrap_err().to_string();
        assert!(e.contains("link 12 (dev s-eth12)"), "{e}");
    }
}
