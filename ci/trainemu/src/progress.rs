//! Progress reporting of the emulated workers through the agent's progress interface
//! (`mltcp-progress`), exactly as a patched communication library reports: one region per
//! process of a job (here: per emulated worker or parameter server), with the paradigm, the role,
//! the ring peers, the flows' 4-tuples, bytes per iteration, the iteration number and the bytes
//! handed to the network so far in it.
//!
//! Reporting never fails a run: when the region cannot be created (no `/dev/shm`, a full
//! directory) the worker logs one warning and goes on without it.

use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use mltcp_progress::{BurstOutcome, FlowKind, FlowRecord, Paradigm, Role, Writer, WriterOptions};

/// Where (and whether) the workers of a run report.
#[derive(Clone, Debug)]
pub enum ProgressDir {
    /// Do not report.
    Off,
    /// `$MLTCP_PROGRESS_DIR`, else the interface's default (`/dev/shm/mltcp-progress`).
    Default,
    /// This directory.
    Dir(PathBuf),
}

/// What a worker tells the agent about itself.
pub struct Identity<'a> {
    /// Run label (the congestion control), part of the job id so runs never share a region.
    pub run: &'a str,
    /// Job name of the scenario.
    pub job: &'a str,
    /// This process's rank: the worker index; a parameter server gets rank = number of workers.
    pub rank: u32,
    /// Processes in the job.
    pub world_size: u32,
    /// Ring all-reduce or parameter server.
    pub paradigm: Paradigm,
    /// Worker or parameter server.
    pub role: Role,
    /// Ring predecessor and successor ranks (ring only).
    pub ring: Option<(u32, u32)>,
    /// Bytes this process sends per iteration.
    pub bytes_per_iteration: u64,
}

/// The job id of a run's job: `<run>.<job>` with characters outside `[A-Za-z0-9._-]` as `_`, at
/// most 63 bytes (the interface's limit).
pub fn job_id(run: &str, job: &str) -> String {
    let mut s: String = format!("{run}.{job}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    s.truncate(63);
    s
}

/// One worker's region (or nothing, when reporting is off or failed).
pub struct Reporter {
    w: Option<Writer>,
    iteration: Option<u64>,
}

impl Reporter {
    /// Opens the region of `id` under `dir` and writes the job description. Never fails: an error
    /// is logged once and the reporter does nothing.
    pub fn open(dir: &ProgressDir, id: &Identity) -> Reporter {
        let opts = match dir {
            ProgressDir::Off => {
                return Reporter {
                    w: None,
                    iteration: None,
                }
            }
            ProgressDir::Default => WriterOptions::default(),
            ProgressDir::Dir(d) => WriterOptions {
                dir: Some(d.clone()),
                ..WriterOptions::default()
            },
        };
        let job = job_id(id.run, id.job);
        match Writer::create(&job, id.rank, &opts) {
            Ok(mut w) => {
                w.batch(|w| {
                    w.set_job(id.paradigm, id.role, id.world_size);
                    if let Some((pred, succ)) = id.ring {
                        w.set_ring(pred, succ);
                    }
                    w.set_bytes_per_iteration(id.bytes_per_iteration);
                });
                Reporter {
                    w: Some(w),
                    iteration: None,
                }
            }
            Err(e) => {
                tracing::warn!(
                    "job {job} rank {}: no progress region ({e}); running without reporting",
                    id.rank
                );
                Reporter {
                    w: None,
                    iteration: None,
                }
            }
        }
    }

    /// A reporter that reports nothing.
    pub fn none() -> Reporter {
        Reporter {
            w: None,
            iteration: None,
        }
    }

    /// Adds the connection `s` (this process's end) as a flow of `kind` to or from `peer_rank`.
    pub fn add_flow(&mut self, s: &TcpStream, kind: FlowKind, peer_rank: u32) {
        let Some(w) = &mut self.w else { return };
        let (Ok(local), Ok(remote)) = (s.local_addr(), s.peer_addr()) else {
            return;
        };
        if let Err(e) = w.add_flow(FlowRecord::new(local, remote, kind, peer_rank)) {
            tracing::warn!(
                "progress region {}: flow not added: {e}",
                w.path().display()
            );
        }
    }

    /// Starts iteration `k` (once; later calls for the same `k` do nothing).
    pub fn begin_iteration(&mut self, k: u64) {
        if self.iteration == Some(k) {
            return;
        }
        self.iteration = Some(k);
        if let Some(w) = &mut self.w {
            w.begin_iteration(k);
        }
    }

    /// `n` more bytes handed to the network in this iteration.
    pub fn add_bytes(&mut self, n: u64) {
        if let Some(w) = &mut self.w {
            w.add_bytes(n);
        }
    }

    /// PCN: the bounded wait before a communication burst ([`Writer::before_burst`]): at most
    /// `timeout`, granted by an attached agent, at once without one. Returns the outcome's name:
    /// "granted", "no_agent", "timed_out", or "no_region" when this reporter writes no region.
    pub fn before_burst(&mut self, timeout: Duration) -> &'static str {
        match &mut self.w {
            None => "no_region",
            Some(w) => match w.before_burst(timeout) {
                BurstOutcome::Granted => "granted",
                BurstOutcome::NoAgent => "no_agent",
                BurstOutcome::TimedOut => "timed_out",
            },
        }
    }

    /// Whether a region is being written.
    #[cfg(test)]
    pub fn active(&self) -> bool {
        self.w.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mltcp_progress::Scanner;
    use std::net::TcpListener;

    #[test]
    fn job_ids_are_valid_names() {
        assert_eq!(job_id("mltcp[slope_fx=1]", "A"), "mltcp_slope_fx_1_.A");
        assert_eq!(job_id(&"x".repeat(100), "A").len(), 63);
    }

    #[test]
    fn reports_what_a_library_reports() {
        let dir = std::env::temp_dir().join(format!("trainemu-progress-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let id = Identity {
            run: "cubic",
            job: "A",
            rank: 1,
            world_size: 3,
            paradigm: Paradigm::Ring,
            role: Role::Worker,
            ring: Some((0, 2)),
            bytes_per_iteration: 4000,
        };
        let mut r = Reporter::open(&ProgressDir::Dir(dir.clone()), &id);
        assert!(r.active());
        r.add_flow(&c, FlowKind::RingSend, 2);
        r.begin_iteration(7);
        r.add_bytes(1000);
        r.begin_iteration(7);
        r.add_bytes(500);
        // No agent attached: the bounded wait returns at once, and counts the request.
        let t = std::time::Instant::now();
        assert_eq!(r.before_burst(Duration::from_millis(500)), "no_agent");
        assert!(t.elapsed() < Duration::from_millis(400));
        let mut sc = Scanner::new(&dir);
        sc.scan().unwrap();
        let (snaps, errs) = sc.poll();
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(snaps.len(), 1);
        let b = &snaps[0].1.body;
        assert_eq!(b.job.job_id, "cubic.A");
        assert_eq!(b.hot.iteration, 7);
        assert_eq!(b.hot.iter_bytes, 1500);
        assert_eq!(b.hot.burst_requests, 1);
        assert_eq!(b.job.bytes_per_iteration, 4000);
        assert_eq!(
            (b.job.ring_pred, b.job.ring_succ, b.job.world_size),
            (0, 2, 3)
        );
        assert_eq!(b.flows.len(), 1);
        assert_eq!(b.flows[0].remote_port, l.local_addr().unwrap().port());
        drop(r);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn off_and_unwritable_dirs_do_nothing() {
        let id = Identity {
            run: "r",
            job: "J",
            rank: 0,
            world_size: 2,
            paradigm: Paradigm::ParameterServer,
            role: Role::ParameterServer,
            ring: None,
            bytes_per_iteration: 1,
        };
        assert!(!Reporter::open(&ProgressDir::Off, &id).active());
        let mut r = Reporter::open(&ProgressDir::Dir(PathBuf::from("/proc/no/such/dir")), &id);
        assert!(!r.active());
        assert_eq!(r.before_burst(Duration::from_secs(1)), "no_region");
        r.begin_iteration(1);
        r.add_bytes(5);
    }
}
