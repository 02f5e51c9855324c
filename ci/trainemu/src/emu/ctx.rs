// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The state a run's threads share (`Ctx`), the abortable barrier and the byte counter they
//! synchronise on.

use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::progress::ProgressDir;

use super::sampler::ecn_negotiated;
use super::sockets::sleep_until;
use super::{FlowInfo, Net};

pub(super) struct Ctx {
    pub(super) t0: Instant,
    pub(super) cc: String,
    pub(super) run: String,
    pub(super) net: Net,
    pub(super) abort: AtomicBool,
    pub(super) error: Mutex<Option<String>>,
    pub(super) flows: Mutex<Vec<(FlowInfo, TcpStream)>>,
    /// Iterations completed per job (for progress).
    pub(super) progress: Vec<AtomicU32>,
    /// All workers of all jobs, once connected: start offsets count from when they all are.
    pub(super) go: Barrier,
    /// The time all workers were connected, µs.
    pub(super) go_us: std::sync::OnceLock<u64>,
    /// Where the workers report progress.
    pub(super) progress_dir: ProgressDir,
    /// PCN: the workers' `before_burst` timeout.
    pub(super) before_burst: Option<Duration>,
    /// Whether the run has jobs (a background-only baseline has none).
    pub(super) has_jobs: bool,
    /// Set when every job's threads have finished (background flows without a stop_ms end then).
    pub(super) jobs_done: AtomicBool,
    /// The run's seed.
    pub(super) seed: u64,
}

impl Ctx {
    pub(super) fn us(&self) -> u64 {
        self.t0.elapsed().as_micros() as u64
    }
    pub(super) fn fail(&self, msg: String) {
        let mut e = self.error.lock().unwrap();
        if e.is_none() {
            *e = Some(msg);
        }
        self.abort.store(true, Ordering::SeqCst);
    }
    pub(super) fn check(&self) -> Result<()> {
        if self.abort.load(Ordering::SeqCst) {
            bail!("aborted");
        }
        Ok(())
    }
    /// Waits until every worker of the run is connected, then until `offset_ms` after that.
    pub(super) fn start(&self, offset_ms: f64) -> Result<()> {
        self.go.wait(&self.abort)?;
        let go = *self.go_us.get_or_init(|| self.us());
        sleep_until(self, go + (offset_ms * 1000.0) as u64)
    }
    /// Adds a flow for the sampler; returns its id.
    pub(super) fn register(&self, mut info: FlowInfo, s: &TcpStream) -> Result<usize> {
        info.ecn = ecn_negotiated(s.as_fd());
        let dup = s.try_clone().context("dup socket for the sampler")?;
        let mut v = self.flows.lock().unwrap();
        let id = v.len();
        info.id = id;
        v.push((info, dup));
        Ok(id)
    }
}

/// A reusable barrier that gives up when the run aborts (std's Barrier cannot).
pub struct Barrier {
    pub(super) n: usize,
    pub(super) state: Mutex<(usize, u64)>,
    pub(super) cv: Condvar,
}

impl Barrier {
    /// A barrier for `n` threads.
    pub fn new(n: usize) -> Self {
        Barrier {
            n,
            state: Mutex::new((0, 0)),
            cv: Condvar::new(),
        }
    }
    /// Blocks until `n` threads have called it (then all return Ok), or `abort` is set.
    pub fn wait(&self, abort: &AtomicBool) -> Result<()> {
        let mut g = self.state.lock().unwrap();
        let gen = g.1;
        g.0 += 1;
        if g.0 == self.n {
            g.0 = 0;
            g.1 += 1;
            self.cv.notify_all();
            return Ok(());
        }
        wait_or_abort(&self.cv, g, abort, |st| st.1 != gen)
    }
}

/// Waits on `cv` with `guard` until `done` holds for the guarded state, checking `abort` every
/// 100 ms (the waits of [`Barrier`] and [`Counter`]). Errors: "aborted" once `abort` is set.
fn wait_or_abort<T>(
    cv: &Condvar,
    mut guard: std::sync::MutexGuard<'_, T>,
    abort: &AtomicBool,
    done: impl Fn(&T) -> bool,
) -> Result<()> {
    while !done(&guard) {
        if abort.load(Ordering::SeqCst) {
            bail!("aborted");
        }
        guard = cv
            .wait_timeout(guard, Duration::from_millis(100))
            .unwrap()
            .0;
    }
    Ok(())
}

/// A monotone byte counter one thread advances and others wait on.
pub(super) struct Counter {
    pub(super) v: Mutex<u64>,
    pub(super) cv: Condvar,
}

impl Counter {
    pub(super) fn new() -> Self {
        Counter {
            v: Mutex::new(0),
            cv: Condvar::new(),
        }
    }
    pub(super) fn add(&self, n: u64) {
        *self.v.lock().unwrap() += n;
        self.cv.notify_all();
    }
    pub(super) fn wait_for(&self, target: u64, abort: &AtomicBool) -> Result<()> {
        wait_or_abort(&self.cv, self.v.lock().unwrap(), abort, |v| *v >= target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;

    #[test]
    fn barrier_releases_all_and_is_reusable() {
        let b = Arc::new(Barrier::new(3));
        let abort = Arc::new(AtomicBool::new(false));
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let (b, a) = (b.clone(), abort.clone());
                thread::spawn(move || (0..50).try_for_each(|_| b.wait(&a)))
            })
            .collect();
        for h in hs {
            h.join().unwrap().unwrap();
        }
        // A waiter alone gives up on abort.
        let b2 = Barrier::new(2);
        abort.store(true, Ordering::SeqCst);
        assert!(b2.wait(&abort).is_err());
    }
}
