// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The monitoring block: which CCP flows belong to registered training jobs, and how far each
//! is into its iteration.
//!
//! "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers", Sec. V: the patched
//! communication library records the bytes of the current iteration in host shared memory and
//! the scheduler compares them with the model size. Here the library writes an
//! `mltcp-progress` region per process; every slot [`Monitor::refresh`] copies every region
//! (`mltcp_progress::Scanner`) and maps each IPv4 flow record (local → remote 4-tuple) to a
//! [`Registration`] (the agent core's plain data, re-exported here). A CCP flow whose 4-tuple is in no region belongs to an unregistered process
//! and gets no program: it runs native MLTCP. A refused region (wrong version or shape) is
//! logged once, naming the file, field and value, and the other regions are still served.
//!
//! Per-flow progress: a region's counters are per process, so the bytes of the iteration and the
//! bytes per iteration are split evenly over the process's *sending* flows (ring: the flow to the
//! successor; PS worker: its pushes; PS: its broadcasts; unspecified kinds count as sending).

use crate::flows::FlowKey;
pub use mlcc_agent_core::registration::{is_sending, Registration, Registrations};
use mltcp_progress::{FlowKind, Paradigm, Role, Scanner};
use std::collections::HashMap;
use std::path::Path;

/// The registry of the progress regions of one directory.
pub struct Monitor {
    scanner: Scanner,
    by_key: Registrations,
}

impl Monitor {
    /// A monitor of the regions under `dir` (nothing read yet).
    pub fn new(dir: &Path) -> Self {
        Monitor {
            scanner: Scanner::new(dir),
            by_key: HashMap::new(),
        }
    }

    /// Re-reads the directory and every region; logs refused regions and snapshot errors (once
    /// per problem, as the scanner reports them). The monitor does not attach to the regions:
    /// the PCN burst gate ([`crate::burst`]) does, and grants the bursts; with PCN disabled no
    /// one attaches and a library's `before_burst` returns at once.
    pub fn refresh(&mut self) {
        match self.scanner.scan() {
            Ok(report) => {
                for e in &report.refused {
                    tracing::warn!(error = %e, "progress region refused");
                }
                for p in &report.added {
                    tracing::info!(region = %p.display(), "progress region registered");
                }
                for p in &report.removed {
                    tracing::info!(region = %p.display(), "progress region gone");
                }
            }
            Err(e) => {
                tracing::debug!(dir = %self.scanner.dir().display(), error = %e, "progress directory unreadable")
            }
        }
        let (snaps, errors) = self.scanner.poll();
        for e in &errors {
            tracing::warn!(error = %e, "progress region unreadable");
        }
        self.by_key.clear();
        for (_, s) in snaps {
            if s.closed() {
                continue;
            }
            let job = &s.body.job;
            let paradigm = Paradigm::from_raw(job.paradigm).unwrap_or(Paradigm::Unknown);
            let role = Role::from_raw(job.role).unwrap_or(Role::Unknown);
            let kinds: Vec<FlowKind> = s
                .body
                .flows
                .iter()
                .map(|f| FlowKind::from_raw(f.kind).unwrap_or(FlowKind::Unspecified))
                .collect();
            let n_send = kinds
                .iter()
                .filter(|k| is_sending(role, **k))
                .count()
                .max(1) as u64;
            for (f, kind) in s.body.flows.iter().zip(kinds) {
                let Some(key) = FlowKey::from_record(f) else {
                    continue;
                };
                let iteration_bytes =
                    (job.bytes_per_iteration > 0).then(|| job.bytes_per_iteration / n_send);
                // A ring worker sends 2(W-1) chunks of G/W per iteration.
                let ring_chunk_bytes = match (paradigm, iteration_bytes, job.world_size) {
                    (Paradigm::Ring, Some(b), w) if w >= 2 => Some(b / (2 * (u64::from(w) - 1))),
                    _ => None,
                };
                self.by_key.insert(
                    key,
                    Registration {
                        job: job.job_id.clone(),
                        rank: job.rank,
                        paradigm,
                        role,
                        kind,
                        peer_rank: f.peer_rank,
                        iteration: s.body.hot.iteration,
                        iter_start_ns: s.body.hot.iter_start_ns,
                        sent_bytes: s.body.hot.iter_bytes / n_send,
                        iteration_bytes,
                        sending: is_sending(role, kind),
                        ring_chunk_bytes,
                    },
                );
            }
        }
    }

    /// The registration of the flow `key`, if a region lists it.
    pub fn lookup(&self, key: &FlowKey) -> Option<&Registration> {
        self.by_key.get(key)
    }

    /// The last reading, every registered flow record.
    pub fn registrations(&self) -> &Registrations {
        &self.by_key
    }

    /// Number of registered flow records.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether no flow is registered.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Detaches from every region (at shutdown; clears an attachment a previous agent left).
    pub fn detach(&self) {
        self.scanner.detach_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mltcp_progress::{FlowRecord, Writer, WriterOptions};
    use std::net::{Ipv4Addr, SocketAddr};

    #[test]
    fn registered_flows_are_found_and_split() {
        let n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let dir =
            std::env::temp_dir().join(format!("ccp-agent-monitor-{}-{n}", std::process::id()));
        let mut w = Writer::create(
            "ps1",
            0,
            &WriterOptions {
                dir: Some(dir.clone()),
                max_flows: 0,
            },
        )
        .unwrap();
        w.set_job(Paradigm::ParameterServer, Role::ParameterServer, 3);
        w.set_bytes_per_iteration(1000);
        let me = |p| SocketAddr::from((Ipv4Addr::new(10, 0, 0, 1), p));
        let peer = |p| SocketAddr::from((Ipv4Addr::new(10, 0, 0, 2), p));
        w.add_flow(FlowRecord::new(me(1), peer(2), FlowKind::PsPull, 1))
            .unwrap();
        w.add_flow(FlowRecord::new(me(3), peer(4), FlowKind::PsPull, 2))
            .unwrap();
        w.add_flow(FlowRecord::new(me(5), peer(6), FlowKind::PsPush, 1))
            .unwrap();
        w.begin_iteration(4);
        w.add_bytes(300);
        let mut m = Monitor::new(&dir);
        m.refresh();
        assert_eq!(m.len(), 3);
        let k = |a: u16, b: u16| FlowKey {
            src: Ipv4Addr::new(10, 0, 0, 1),
            src_port: a,
            dst: Ipv4Addr::new(10, 0, 0, 2),
            dst_port: b,
        };
        let r = m.lookup(&k(1, 2)).unwrap();
        assert!(r.sending, "a PS's broadcast is sent by it");
        assert_eq!(
            (
                r.iteration,
                r.sent_bytes,
                r.iteration_bytes,
                r.remaining_bytes()
            ),
            (4, 150, Some(500), 350)
        );
        assert_eq!(r.peer_rank, 1);
        assert!(
            !m.lookup(&k(5, 6)).unwrap().sending,
            "a push into a PS is received by it"
        );
        assert!(m.lookup(&k(9, 9)).is_none(), "unregistered");
        drop(w);
        m.refresh();
        assert!(m.is_empty(), "a closed region registers nothing");
        m.detach();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
