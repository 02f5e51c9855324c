// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The shell's slot clock: a thread that posts an [`Input::Tick`] to the agent core at start
//! and at every slot boundary of the wall clock (multiples of `slot_us` since the Unix epoch,
//! the grid agents and switches share), whether or not the datapath sends anything. The tick
//! wakes the portus thread through [`Shared::post`]; see [`crate::ccp`]. Between boundaries,
//! when asked to, it also posts an [`Input::Poll`] every `poll_us` (the shell then reads the
//! progress regions, so a burst that begins mid-slot is seen within it).

use crate::agent_core::Input;
use crate::shared::Shared;
use crate::wall_us;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The longest single sleep, so a cleared `running` flag is seen within it.
const MAX_SLEEP: Duration = Duration::from_millis(100);

/// The first slot boundary after `now_us` on a grid of `slot_us` (> 0) µs.
pub fn next_boundary_us(now_us: u64, slot_us: u64) -> u64 {
    let slot_us = slot_us.max(1);
    (now_us / slot_us + 1).saturating_mul(slot_us)
}

/// Starts the slot timer: ticks for slots of `slot_us` µs go to `shared` until `running` is
/// cleared, and with `poll_us` an [`Input::Poll`] every `poll_us` between them. Errors: the
/// thread could not be started.
pub fn spawn(
    slot_us: u64,
    poll_us: Option<u64>,
    shared: Arc<Shared>,
    running: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(String::from("ccp-agent-slots"))
        .spawn(move || {
            let mut now = wall_us();
            while running.load(Ordering::SeqCst) {
                shared.post(Input::Tick { now_us: now });
                let next = next_boundary_us(now, slot_us);
                let mut poll_at = poll_us.map(|p| now.saturating_add(p.max(1)));
                loop {
                    now = wall_us();
                    if now >= next || !running.load(Ordering::SeqCst) {
                        break;
                    }
                    if let (Some(at), Some(p)) = (poll_at, poll_us) {
                        if now >= at {
                            shared.post(Input::Poll);
                            poll_at = Some(now.saturating_add(p.max(1)));
                        }
                    }
                    let until = poll_at.map_or(next, |at| at.min(next));
                    std::thread::sleep(
                        Duration::from_micros(until.saturating_sub(now)).min(MAX_SLEEP),
                    );
                }
            }
        })
}

#[cfg(test)]
mod tests {
    use super::next_boundary_us;

    #[test]
    fn boundaries_are_multiples_of_the_slot() {
        assert_eq!(next_boundary_us(0, 60_000), 60_000);
        assert_eq!(next_boundary_us(59_999, 60_000), 60_000);
        assert_eq!(next_boundary_us(60_000, 60_000), 120_000);
        assert_eq!(next_boundary_us(7, 0), 8, "a zero slot is taken as 1 µs");
        assert_eq!(next_boundary_us(u64::MAX, 10), u64::MAX);
    }
}
