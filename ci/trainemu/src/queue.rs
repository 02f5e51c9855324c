// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Queue sampling of the bottleneck switch port: its qdiscs' statistics read with an rtnetlink
//! dump (`RTM_GETQDISC`, what `tc -s qdisc show` asks for) in the switch namespace every
//! [`QUEUE_PERIOD`] during each run (the PCN paper's queue-length metrics come from these samples).
//! Spawning `tc` per sample reached only 1-3 Hz in the VM under TCG; one dump on an open netlink
//! socket costs well under a millisecond.
//!
//! The dump and its parsing are the `ecn-qdisc` crate's (the PCN switch daemon's qdisc access,
//! on `netlink-packet-route`): its socket is opened inside the switch namespace, and the
//! sampling thread runs at SCHED_FIFO priority 10 when allowed. The backlog is the port's tbf's
//! (bytes and packets waiting for tokens: the port's queue, whatever child qdisc holds them);
//! the marks are the ECN child's (RED `marked`, fq_codel `ecn_mark` + `ce_mark`), cumulative
//! since the qdisc was made.

use ecn_qdisc::{QdiscChanger, QdiscInfo, TcHandle};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// Target period of the queue samples (200 Hz, so that late wake-ups in a loaded VM under TCG
/// still leave at least the 100 Hz PCN's metrics want: 47-84 Hz were reached there with a 10 ms
/// period); a dump that takes longer delays the next one, and the report states the rate reached.
pub const QUEUE_PERIOD: Duration = Duration::from_millis(5);

/// Which port to sample.
#[derive(Debug, Clone)]
pub struct QueueProbe {
    /// The switch namespace's file (`/run/netns/te-sw`).
    pub netns: PathBuf,
    /// The port (`v-HOST`).
    pub dev: String,
}

/// One sample of the port's queue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QueueSample {
    /// Time since the run's start, µs (the middle of the dump).
    pub t_us: u64,
    /// Backlog of the port's tbf, bytes.
    pub backlog_bytes: u64,
    /// Backlog of the port's tbf, packets.
    pub backlog_pkts: u64,
    /// Packets the tbf (or its child) dropped so far.
    pub drops: u64,
    /// Packets the ECN child marked CE so far (None: no ECN qdisc on the port).
    pub marks: Option<u64>,
}

/// The sample of interface `ifindex` among `qdiscs`: backlog and drops of its `tbf` (its root
/// qdisc when it has no tbf), marks of a `red` or `fq_codel` on it.
pub fn port_sample(qdiscs: &[QdiscInfo], ifindex: i32, t_us: u64) -> Result<QueueSample> {
    let mine: Vec<&QdiscInfo> = qdiscs.iter().filter(|q| q.ifindex == ifindex).collect();
    let port = mine
        .iter()
        .find(|q| q.kind == "tbf")
        .or_else(|| mine.iter().find(|q| q.parent == TcHandle::ROOT));
    let Some(port) = port else {
        bail!("interface {ifindex} has no tbf and no root qdisc in the dump")
    };
    Ok(QueueSample {
        t_us,
        backlog_bytes: port.backlog_bytes.into(),
        backlog_pkts: port.qlen.into(),
        drops: port.drops.into(),
        marks: mine.iter().find_map(|q| q.ce_marks),
    })
}

/// Samples `probe` until `stop` returns true; `now_us` is the run's clock. A failing dump ends the
/// sampling with the error (the samples so far are kept by the caller).
pub fn sample_port(
    probe: &QueueProbe,
    now_us: &dyn Fn() -> u64,
    stop: &dyn Fn() -> bool,
    out: &mut Vec<QueueSample>,
) -> Result<()> {
    let netns = Some(probe.netns.display().to_string());
    let mut nl = QdiscChanger::new(std::time::Duration::from_secs(1));
    let ifindex = nl
        .ifindex(&netns, &probe.dev)
        .with_context(|| format!("device {} in {}", probe.dev, probe.netns.display()))?;
    // Wake up on time although the workers keep every (emulated) CPU busy: a real-time priority
    // for this thread, whose work per sample is one short dump. Best effort (needs CAP_SYS_NICE).
    let prio = libc::sched_param { sched_priority: 10 };
    // SAFETY: pid 0 = the calling thread; `prio` is a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &prio) } != 0 {
        tracing::debug!(
            "queue sampler stays SCHED_OTHER: {}",
            std::io::Error::last_os_error()
        );
    }
    let mut next = std::time::Instant::now();
    while !stop() {
        let t0 = now_us();
        let qs = nl.dump(&netns)?;
        let t = (t0 + now_us()) / 2;
        out.push(port_sample(&qs, ifindex, t).with_context(|| format!("port {}", probe.dev))?);
        next += QUEUE_PERIOD;
        let now = std::time::Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qd(
        ifindex: i32,
        kind: &str,
        parent: TcHandle,
        queue: (u32, u32, u32),
        ce_marks: Option<u64>,
    ) -> QdiscInfo {
        QdiscInfo {
            ifindex,
            kind: kind.into(),
            parent,
            qlen: queue.0,
            backlog_bytes: queue.1,
            drops: queue.2,
            ce_marks,
            ..Default::default()
        }
    }

    #[test]
    fn samples_the_tbf_with_the_marks_of_its_ecn_child() {
        // netem 1: (root), tbf 10: (1:1) and RED 20: (10:1) on interface 5; a noqueue lo (1).
        let qs = [
            qd(1, "noqueue", TcHandle::ROOT, (0, 0, 0), None),
            qd(5, "netem", TcHandle::ROOT, (0, 0, 0), None),
            qd(
                5,
                "tbf",
                TcHandle { major: 1, minor: 1 },
                (30, 45_420, 12),
                None,
            ),
            qd(
                5,
                "red",
                TcHandle {
                    major: 0x10,
                    minor: 1,
                },
                (30, 45_420, 12),
                Some(1507),
            ),
        ];
        let s = port_sample(&qs, 5, 77).unwrap();
        assert_eq!(
            s,
            QueueSample {
                t_us: 77,
                backlog_bytes: 45_420,
                backlog_pkts: 30,
                drops: 12,
                marks: Some(1507)
            }
        );
        // lo has no tbf: its root, without marks.
        assert_eq!(
            port_sample(&qs, 1, 0).unwrap(),
            QueueSample {
                t_us: 0,
                backlog_bytes: 0,
                backlog_pkts: 0,
                drops: 0,
                marks: None
            }
        );
        assert!(port_sample(&qs, 9, 0)
            .unwrap_err()
            .to_string()
            .contains("interface 9"));
    }

    #[test]
    fn a_root_tbf_with_an_fq_codel_child() {
        let qs = [
            qd(3, "tbf", TcHandle::ROOT, (2, 3028, 0), None),
            qd(
                3,
                "fq_codel",
                TcHandle { major: 1, minor: 1 },
                (2, 3028, 0),
                Some(7),
            ),
        ];
        assert_eq!(
            port_sample(&qs, 3, 5).unwrap(),
            QueueSample {
                t_us: 5,
                backlog_bytes: 3028,
                backlog_pkts: 2,
                drops: 0,
                marks: Some(7)
            }
        );
    }
}
