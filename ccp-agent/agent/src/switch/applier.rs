// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! How the switch daemon's ECN threshold changes reach the qdiscs: [`ThresholdApplier`] makes one
//! change ([`NetlinkApplier`] over rtnetlink; [`RecordingRunner`] records it instead, for tests),
//! [`tc_command`] names it as the equivalent `tc` line, and [`OrderedApplier`] makes the changes
//! the PCN bookkeeping decided one after another on its own thread, in the order they were
//! decided, so that no RPC waits for the kernel.

use crate::config::{ClassesConfig, EcnQueue, QdiscKind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Sets a queue's ECN marking threshold, and installs a port's traffic classes. The daemon uses
/// [`NetlinkApplier`]; tests use [`RecordingRunner`], which records the change instead of
/// making it.
pub trait ThresholdApplier: Send + Sync {
    /// Gives `q` the marking threshold `threshold_bytes`; `Err` describes the failure (the
    /// qdisc, the step, the kernel's error or a timeout).
    fn apply(&self, q: &EcnQueue, threshold_bytes: u32) -> Result<(), String>;

    /// Installs the traffic classes `c` on their port ([`ecn_qdisc::classes`]), replacing only
    /// an earlier installation's; `Ok` says what was installed (for the log), `Err` describes
    /// the failure (the device, the request that failed, the kernel's error).
    fn install_classes(&self, c: &ClassesConfig) -> Result<String, String>;
}

/// One change the PCN bookkeeping decided: `link`'s ECN queue gets the marking threshold
/// `threshold_bytes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThresholdChange {
    /// The link whose queue changes.
    pub link: u32,
    /// The link's ECN queue (`[link.ecn]` of the topology).
    pub queue: Arc<EcnQueue>,
    /// The new marking threshold, bytes.
    pub threshold_bytes: u32,
}

/// Makes `c` with `applier`: logs it with the time it took, or, on failure, logs it naming its
/// [`tc_command`] line and adds one to `failures`. The one place a change is made, by the
/// [`OrderedApplier`]'s thread (and by tests that apply changes synchronously). Returns the
/// failure's description.
pub(super) fn apply_logged(
    applier: &dyn ThresholdApplier,
    c: &ThresholdChange,
    failures: &AtomicU64,
) -> Result<(), String> {
    let t0 = Instant::now();
    match applier.apply(&c.queue, c.threshold_bytes) {
        Ok(()) => {
            tracing::info!(
                link = c.link,
                threshold_bytes = c.threshold_bytes,
                took_us = t0.elapsed().as_micros() as u64,
                "ECN threshold applied"
            );
            Ok(())
        }
        Err(e) => {
            failures.fetch_add(1, Ordering::Relaxed);
            let msg = format!(
                "link {}: setting the threshold to {} B (`{}`) failed: {e}",
                c.link,
                c.threshold_bytes,
                tc_command(&c.queue, c.threshold_bytes).join(" ")
            );
            tracing::warn!(error = %msg, "setting the ECN threshold failed");
            Err(msg)
        }
    }
}

/// What the [`OrderedApplier`]'s thread is asked to do.
enum Job {
    /// Make these changes, in order.
    Apply(Vec<ThresholdChange>),
    /// Answer once every change queued before this one is made.
    Flush(mpsc::SyncSender<()>),
}

/// Makes the switch's threshold changes on a thread of its own ("ccp-switch-qdisc"), one at a
/// time, in the order they were submitted (first in, first out), so the gRPC handlers and the
/// slot ticker never wait for the kernel while they hold the switch's state lock: a change the
/// kernel does not answer holds only this thread, for up to `[pcn] apply_timeout_ms`. Submit
/// under the state's lock, and the queue's order is the bookkeeping's.
///
/// The queue is unbounded: it grows only while changes are decided faster than the kernel makes
/// them (a change takes well under a millisecond; the bookkeeping decides at most one per ECN
/// link and request). The thread ends once every clone of the applier is dropped and the queue
/// is empty.
#[derive(Clone)]
pub struct OrderedApplier {
    tx: mpsc::Sender<Job>,
    failures: Arc<AtomicU64>,
}

impl OrderedApplier {
    /// Starts the thread that makes the changes with `applier`, counting the failed ones in
    /// `failures` (the switch state's counter, [`super::SwitchState::failure_counter`]).
    /// Errors: the thread cannot be started.
    pub fn spawn(
        applier: Arc<dyn ThresholdApplier>,
        failures: Arc<AtomicU64>,
    ) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        let counter = failures.clone();
        std::thread::Builder::new()
            .name("ccp-switch-qdisc".into())
            .spawn(move || {
                for job in rx {
                    match job {
                        Job::Apply(changes) => {
                            for c in &changes {
                                // Failures are logged and counted there; the next change goes on.
                                let _ = apply_logged(&*applier, c, &counter);
                            }
                        }
                        Job::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            })?;
        Ok(OrderedApplier { tx, failures })
    }

    /// Queues `changes` behind those submitted before; returns at once. Should the thread be
    /// gone (a panicking applier), the changes are logged and counted as failed.
    pub fn submit(&self, changes: Vec<ThresholdChange>) {
        if changes.is_empty() {
            return;
        }
        if let Err(mpsc::SendError(Job::Apply(lost))) = self.tx.send(Job::Apply(changes)) {
            self.failures
                .fetch_add(lost.len() as u64, Ordering::Relaxed);
            tracing::warn!(
                changes = lost.len(),
                "the ECN threshold applier has stopped: changes not made"
            );
        }
    }

    /// Waits until every change submitted before this call has been made (or has failed): at
    /// start-up and shutdown, and in tests. Blocks the calling thread.
    pub fn flush(&self) {
        let (done, wait) = mpsc::sync_channel(1);
        if self.tx.send(Job::Flush(done)).is_ok() {
            // An error means the thread is gone: nothing is left to wait for.
            let _ = wait.recv();
        }
    }

    /// Changes that failed so far (the counter given at [`OrderedApplier::spawn`]).
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }
}

/// Changes the qdisc over rtnetlink ([`ecn_qdisc::QdiscChanger`]: one `NETLINK_ROUTE` socket per
/// network namespace, opened inside it; a change takes well under a millisecond, where one `ip
/// netns exec NS tc ...` process per change took over a second in the testbed's emulated VM).
/// What a change keeps is in [`ecn_qdisc`]'s docs: fq_codel gets only its `ce_threshold`; RED
/// keeps its weight, flags, max_P and child queue (its packets are not purged, unlike `tc qdisc
/// change ... red limit L`).
pub struct NetlinkApplier {
    changer: Mutex<ecn_qdisc::QdiscChanger>,
}

impl NetlinkApplier {
    /// An applier whose requests fail after `timeout` without the kernel's answer.
    pub fn new(timeout: Duration) -> Self {
        NetlinkApplier {
            changer: Mutex::new(ecn_qdisc::QdiscChanger::new(timeout)),
        }
    }
}

/// Where `q` is and the threshold that gives it `threshold_bytes` (see [`tc_command`] for the
/// conversions).
pub fn qdisc_change(
    q: &EcnQueue,
    threshold_bytes: u32,
) -> (ecn_qdisc::QdiscPath, ecn_qdisc::Threshold) {
    let path = ecn_qdisc::QdiscPath {
        netns: q.netns.clone(),
        dev: q.dev.clone(),
        parent: q.parent.clone(),
    };
    let t = match q.qdisc {
        QdiscKind::FqCodel => ecn_qdisc::Threshold::FqCodelCeUs(fq_codel_ce_us(q, threshold_bytes)),
        QdiscKind::Red => ecn_qdisc::Threshold::Red {
            min_bytes: threshold_bytes,
            max_bytes: threshold_bytes.saturating_add(q.red_span_bytes),
            avpkt_bytes: q.red_avpkt_bytes,
            rate_bps: q.capacity_bps,
        },
    };
    (path, t)
}

/// fq_codel's `ce_threshold` for `threshold_bytes`, µs: the time the link needs to send them at
/// its capacity (rounded up, at least 1 µs, at most u32::MAX): fq_codel marks on sojourn time.
fn fq_codel_ce_us(q: &EcnQueue, threshold_bytes: u32) -> u32 {
    let us = (u128::from(threshold_bytes) * 8_000_000)
        .div_ceil(u128::from(q.capacity_bps.max(1)))
        .max(1);
    u32::try_from(us).unwrap_or(u32::MAX)
}

impl ThresholdApplier for NetlinkApplier {
    fn apply(&self, q: &EcnQueue, threshold_bytes: u32) -> Result<(), String> {
        let (path, t) = qdisc_change(q, threshold_bytes);
        self.changer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set(&path, t)
            .map_err(|e| e.to_string())
    }

    fn install_classes(&self, c: &ClassesConfig) -> Result<String, String> {
        let done = self
            .changer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .install_classes(&c.netns, &c.dev, &c.spec())
            .map_err(|e| e.to_string())?;
        let replaced = match done.replaced {
            Some(p) => format!(
                " (the HTB installed before under {} deleted first)",
                ecn_qdisc::classes::tc_name(p)
            ),
            None => String::new(),
        };
        Ok(format!(
            "{} requests{replaced}: {}",
            done.requests.len(),
            done.requests.join("; ")
        ))
    }
}

/// Records each change as its [`tc_command`] line instead of making it (tests, dry runs); fails
/// every change when `fail` is set.
#[derive(Default)]
pub struct RecordingRunner {
    /// The changes, as `tc` argument vectors, in order.
    pub commands: Mutex<Vec<Vec<String>>>,
    /// Whether every change fails.
    pub fail: bool,
}

impl RecordingRunner {
    /// The changes recorded so far, each joined by spaces.
    pub fn lines(&self) -> Vec<String> {
        self.commands
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|c| c.join(" "))
            .collect()
    }

    /// The changes recorded (as [`RecordingRunner::lines`]) once `done` holds of them, or when
    /// `timeout` has passed: the daemon's [`OrderedApplier`] makes its changes after the RPC
    /// that decided them has returned, so a test that saw the bookkeeping waits here for them.
    pub fn lines_when(&self, done: impl Fn(&[String]) -> bool, timeout: Duration) -> Vec<String> {
        let t0 = Instant::now();
        loop {
            let l = self.lines();
            if done(&l) || t0.elapsed() >= timeout {
                return l;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl RecordingRunner {
    /// Records `command`; fails when `fail` is set.
    fn record(&self, command: Vec<String>) -> Result<(), String> {
        self.commands
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(command);
        if self.fail {
            Err(String::from("recording runner set to fail"))
        } else {
            Ok(())
        }
    }
}

impl ThresholdApplier for RecordingRunner {
    fn apply(&self, q: &EcnQueue, threshold_bytes: u32) -> Result<(), String> {
        self.record(tc_command(q, threshold_bytes))
    }

    /// Records `classes PORT parent P training N rate_kbit R queue_bytes Q`.
    fn install_classes(&self, c: &ClassesConfig) -> Result<String, String> {
        let line = format!(
            "classes {} parent {} training {} rate_kbit {} queue_bytes {}",
            c.port(),
            c.parent,
            c.training,
            c.rate_kbit,
            c.queue_bytes
        );
        self.record(line.split(' ').map(String::from).collect())?;
        Ok(line)
    }
}

/// The `tc` command equivalent to giving `q` the marking threshold `threshold_bytes` (logs,
/// tests, and for an operator to reproduce a change by hand; the daemon itself changes the qdisc
/// over rtnetlink, [`NetlinkApplier`]):
///
/// - fq_codel: `tc qdisc change dev DEV root fq_codel ce_threshold Nus`, where N is the time the
///   link needs to send `threshold_bytes` at its capacity (rounded up, at least 1 µs): fq_codel
///   marks on sojourn time, not bytes;
/// - red: `tc qdisc change dev DEV root red limit L min T max T+S avpkt A bandwidth Bbit
///   probability 1.0 ecn` (step marking from T bytes, as a DCTCP switch; tc derives `burst`).
///   Unlike the rtnetlink change, this `tc` line replaces RED's child queue (dropping its
///   packets) and recomputes the weight from `burst`.
///
/// With a `parent` the qdisc is named by `parent P` instead of `root`; with a `netns` the
/// command is `ip netns exec NS tc ...`.
pub fn tc_command(q: &EcnQueue, threshold_bytes: u32) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    if let Some(ns) = &q.netns {
        v.extend(["ip", "netns", "exec", ns.as_str()].map(String::from));
    }
    v.extend(["tc", "qdisc", "change", "dev", q.dev.as_str()].map(String::from));
    match &q.parent {
        Some(p) => v.extend([String::from("parent"), p.clone()]),
        None => v.push(String::from("root")),
    }
    match q.qdisc {
        QdiscKind::FqCodel => {
            v.extend([
                String::from("fq_codel"),
                String::from("ce_threshold"),
                format!("{}us", fq_codel_ce_us(q, threshold_bytes)),
            ]);
        }
        QdiscKind::Red => {
            let max = u64::from(threshold_bytes) + u64::from(q.red_span_bytes);
            // The limit stays above max even when a start asks for more than the initial
            // threshold (never applied: thresholds are capped at the initial one).
            let limit = u64::from(q.red_limit_bytes).max(max + 1);
            v.extend([
                String::from("red"),
                String::from("limit"),
                limit.to_string(),
                String::from("min"),
                threshold_bytes.to_string(),
                String::from("max"),
                max.to_string(),
                String::from("avpkt"),
                q.red_avpkt_bytes.to_string(),
                String::from("bandwidth"),
                format!("{}bit", q.capacity_bps),
                String::from("probability"),
                String::from("1.0"),
                String::from("ecn"),
            ]);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::fixtures::{ecn_topo, queue};

    #[test]
    fn tc_command_strings() {
        let topo = ecn_topo("min");
        let q10 = queue(&topo, 10);
        // 15 000 bytes at 40 Mbit/s take 3 ms.
        assert_eq!(
            tc_command(&q10, 15_000).join(" "),
            "tc qdisc change dev s-eth10 root fq_codel ce_threshold 3000us"
        );
        assert_eq!(tc_command(&q10, 1).last().map(String::as_str), Some("1us"));
        let q11 = queue(&topo, 11);
        assert_eq!(
            tc_command(&q11, 15_000).join(" "),
            "ip netns exec sw tc qdisc change dev s-eth11 parent 1:1 red limit 300000 min 15000 \
             max 16500 avpkt 1500 bandwidth 100000000bit probability 1.0 ecn"
        );
    }

    #[test]
    fn the_ordered_applier_keeps_the_order_flushes_and_counts_failures() {
        let topo = ecn_topo("min");
        let change = |link, threshold_bytes| ThresholdChange {
            link,
            queue: Arc::new(queue(&topo, link)),
            threshold_bytes,
        };
        let runner = Arc::new(RecordingRunner {
            fail: true,
            ..Default::default()
        });
        let failures = Arc::new(AtomicU64::new(0));
        let a = OrderedApplier::spawn(runner.clone(), failures.clone()).unwrap();
        a.submit(vec![change(10, 15_000), change(11, 15_000)]);
        a.submit(Vec::new());
        a.clone().submit(vec![change(10, 60_000)]);
        a.flush();
        let l = runner.lines();
        assert_eq!(l.len(), 3, "{l:?}");
        assert!(l[0].ends_with("ce_threshold 3000us"), "{l:?}");
        assert!(l[1].contains("red limit 300000 min 15000"), "{l:?}");
        assert!(l[2].ends_with("ce_threshold 12000us"), "{l:?}");
        assert_eq!((a.failures(), failures.load(Ordering::Relaxed)), (3, 3));
    }
}
