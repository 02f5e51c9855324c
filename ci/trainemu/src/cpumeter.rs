// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `trainemu cpu-meter`: the guest's busy CPU time over a window, to the microsecond
//! (CPU per GB of the module's paths on guest time).
//!
//! `/proc/stat` cannot give it: the testbed kernel has a periodic tick (`CONFIG_HZ=1000`, no
//! `NO_HZ`, `TICK_CPU_ACCOUNTING`), so its busy and idle times are samples of whatever ran at each
//! tick. On the virtual clock the ticks fall at fixed instruction counts, and a workload with its
//! own period can alias with them: the same 3.76 GB transfer was charged 2.60-2.95 busy seconds.
//!
//! The meter measures idle time instead of busy time. One thread per online CPU, pinned to it and
//! running under `SCHED_IDLE` (sched(7): it runs only when nothing else wants the CPU, and any
//! normal task that wakes preempts it), spins until told to stop. The kernel keeps each thread's
//! run time to the nanosecond (`CLOCK_THREAD_CPUTIME_ID`, the scheduler's `sum_exec_runtime`), so
//! per CPU: idle = the spinner's run time over the window, and busy = window − idle. What the
//! spinner changes: the CPUs never halt (the idle path's own work disappears, for every kind
//! alike), and a softirq that interrupts the spinner is charged to it (counted as idle; on the
//! testbed's veth pairs the receive softirq runs in the sender's context, not from interrupts).
//!
//! Protocol (for shell scripts): the meter prints `ready` on standard output once every spinner is
//! pinned and the window has started, and on SIGTERM or SIGINT prints one line
//! `cpus N window_ns W busy_ns B idle_ns I` and exits 0.

use anyhow::{bail, Context, Result};
use nix::sched::{sched_setaffinity, CpuSet};
use nix::sys::signal::{SigSet, Signal};
use nix::time::{clock_gettime, ClockId};
use nix::unistd::Pid;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

/// A clock reading in nanoseconds.
fn now_ns(clock: ClockId) -> Result<u64> {
    let t = clock_gettime(clock).with_context(|| format!("clock_gettime({clock:?})"))?;
    Ok(t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
}

/// One window's result: `cpus` spinners, window length and summed idle time, nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub cpus: usize,
    pub window_ns: u64,
    pub idle_ns: u64,
}

impl Reading {
    /// Busy CPU time summed over the CPUs, nanoseconds: `cpus × window − idle`, floored at 0
    /// (a spinner's time can exceed the window by the few microseconds between the window's end
    /// and its own last reading).
    pub fn busy_ns(&self) -> u64 {
        (self.cpus as u64 * self.window_ns).saturating_sub(self.idle_ns)
    }

    /// The line the protocol prints.
    pub fn line(&self) -> String {
        format!(
            "cpus {} window_ns {} busy_ns {} idle_ns {}",
            self.cpus,
            self.window_ns,
            self.busy_ns(),
            self.idle_ns
        )
    }
}

/// Move the calling thread to CPU `cpu` under `SCHED_IDLE`.
fn pin_idle(cpu: usize) -> Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu)
        .with_context(|| format!("CPU {cpu} out of range"))?;
    sched_setaffinity(Pid::from_raw(0), &set).with_context(|| format!("pin to CPU {cpu}"))?;
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler reads `param` (a valid, initialised sched_param that outlives
    // the call) and changes only the calling thread's policy (pid 0); no memory is shared.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if r != 0 {
        bail!(
            "sched_setscheduler(SCHED_IDLE) on CPU {cpu}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// The spinner of CPU `cpu`: pins itself, waits at `start`, then spins until `stop`; returns its
/// own run time over that span, nanoseconds.
fn spin(cpu: usize, start: Arc<Barrier>, stop: Arc<AtomicBool>) -> Result<u64> {
    let pinned = pin_idle(cpu);
    // Everyone meets the barrier, even a thread that failed, so that main never waits forever.
    start.wait();
    pinned?;
    let t0 = now_ns(ClockId::CLOCK_THREAD_CPUTIME_ID)?;
    while !stop.load(Ordering::Relaxed) {
        std::hint::spin_loop();
    }
    Ok(now_ns(ClockId::CLOCK_THREAD_CPUTIME_ID)? - t0)
}

/// Block SIGTERM and SIGINT in the calling thread (and the threads it spawns afterwards), so
/// that only [`wait_stop_signal`] takes them. Call it before any other thread exists.
pub fn block_stop_signals() -> Result<SigSet> {
    let mut sigs = SigSet::empty();
    sigs.add(Signal::SIGTERM);
    sigs.add(Signal::SIGINT);
    sigs.thread_block().context("block SIGTERM/SIGINT")?;
    Ok(sigs)
}

/// Wait for one of `sigs` (blocked by [`block_stop_signals`]).
pub fn wait_stop_signal(sigs: &SigSet) -> Result<()> {
    sigs.wait().context("sigwait")?;
    Ok(())
}

/// Run the meter on every CPU this process may use: prints `ready` on `out` once the window has
/// started, calls `wait_stop` (which returns when the window should end), then prints and
/// returns the reading.
pub fn measure(out: &mut dyn Write, wait_stop: impl FnOnce() -> Result<()>) -> Result<Reading> {
    let cpus: Vec<usize> = {
        let set = nix::sched::sched_getaffinity(Pid::from_raw(0)).context("sched_getaffinity")?;
        (0..CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect()
    };
    if cpus.is_empty() {
        bail!("no CPU in this process's affinity mask");
    }
    let start = Arc::new(Barrier::new(cpus.len() + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = cpus
        .iter()
        .map(|&c| {
            let (b, s) = (start.clone(), stop.clone());
            std::thread::Builder::new()
                .name(format!("cpu-meter-{c}"))
                .spawn(move || spin(c, b, s))
                .context("spawn a spinner thread")
        })
        .collect::<Result<_>>()?;
    start.wait();
    let t0 = now_ns(ClockId::CLOCK_MONOTONIC)?;
    let ready = writeln!(out, "ready").and_then(|_| out.flush());
    let waited = ready.map_err(anyhow::Error::from).and_then(|_| wait_stop());
    let t1 = now_ns(ClockId::CLOCK_MONOTONIC)?;
    // The spinners stop whatever happened, so that no thread is left spinning.
    stop.store(true, Ordering::Relaxed);
    let mut idle_ns = 0u64;
    for (t, c) in threads.into_iter().zip(&cpus) {
        idle_ns += t
            .join()
            .map_err(|_| anyhow::anyhow!("the spinner of CPU {c} panicked"))?
            .with_context(|| format!("the spinner of CPU {c}"))?;
    }
    waited?;
    let r = Reading {
        cpus: cpus.len(),
        window_ns: t1 - t0,
        idle_ns,
    };
    writeln!(out, "{}", r.line())?;
    out.flush()?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_is_window_times_cpus_minus_idle() {
        let r = Reading {
            cpus: 2,
            window_ns: 1_000,
            idle_ns: 600,
        };
        assert_eq!(r.busy_ns(), 1_400);
        assert_eq!(r.line(), "cpus 2 window_ns 1000 busy_ns 1400 idle_ns 600");
    }

    #[test]
    fn idle_beyond_the_window_floors_busy_at_zero() {
        let r = Reading {
            cpus: 1,
            window_ns: 1_000,
            idle_ns: 1_003,
        };
        assert_eq!(r.busy_ns(), 0);
    }

    /// The whole window in user space: a thread kept busy for 200 ms inside the window shows
    /// as at least 100 ms of busy time (lenient: anything else running on this machine only adds
    /// busy time, since the spinners run last), and busy never exceeds cpus × window.
    #[test]
    fn a_busy_thread_shows_as_busy_time() {
        let mut out = Vec::new();
        let r = measure(&mut out, || {
            let t = std::time::Instant::now();
            let mut x = 0u64;
            while t.elapsed() < std::time::Duration::from_millis(200) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            Ok(())
        })
        .expect("meter");
        let text = String::from_utf8(out).expect("utf-8");
        assert_eq!(text, format!("ready\n{}\n", r.line()));
        assert!(r.cpus >= 1);
        assert!(r.busy_ns() <= r.cpus as u64 * r.window_ns);
        assert!(r.window_ns >= 200_000_000, "window {} ns", r.window_ns);
        assert!(r.busy_ns() >= 100_000_000, "busy {} ns", r.busy_ns());
    }

    /// A failing wait still stops and joins the spinners, and the error reaches the caller.
    #[test]
    fn a_failed_wait_stops_the_spinners_and_reports() {
        let mut out = Vec::new();
        let e = measure(&mut out, || anyhow::bail!("no signal")).unwrap_err();
        assert!(format!("{e:#}").contains("no signal"));
    }
}
