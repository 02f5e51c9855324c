// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Per-flow measurement arithmetic of the agent core: dating reports on the progress regions'
//! clock, splitting acknowledged bytes at an iteration's start, and the congestion window that
//! goes with a pacing rate. Pure functions of their arguments.
//!
//! Progress of a flow ("Dynamic Flow Scheduling for DNN Training Workloads in Data Centers",
//! Sec. V, the monitoring block): F_i is the bytes the flow's reports acknowledged since its
//! job's current iteration began, so each report must be dated on the clock of the iteration's
//! start (CLOCK_MONOTONIC).

/// Dates a flow's reports on CLOCK_MONOTONIC from the datapath clock they carry (`Report.now`,
/// `Ack.now` at the reporting ACK, µs since the datapath's own origin). The offset between the
/// two clocks is estimated as the least (arrival − datapath time) seen so far: a report always
/// arrives after its ACK, so that least value is the offset plus the smallest delivery delay,
/// and it only gets better. Dating by arrival alone put a report that a loaded agent read late
/// after the next iteration's start, and its bytes in the wrong iteration.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DatapathClock {
    /// Least (arrival µs − datapath µs) so far; `None` before the first report.
    offset_us: Option<u64>,
}

impl DatapathClock {
    /// The CLOCK_MONOTONIC time (ns) of a report carrying datapath time `dp_now_us` that
    /// arrived at `arrival_ns`; never later than its arrival.
    pub(crate) fn date_ns(&mut self, dp_now_us: u64, arrival_ns: u64) -> u64 {
        let arrival_us = arrival_ns / 1000;
        let seen = arrival_us.wrapping_sub(dp_now_us);
        let offset = self.offset_us.map_or(seen, |o| o.min(seen));
        self.offset_us = Some(offset);
        dp_now_us
            .wrapping_add(offset)
            .saturating_mul(1000)
            .min(arrival_ns)
    }
}

/// Splits reports' acknowledged bytes, given as (date in CLOCK_MONOTONIC ns, bytes), at
/// `start_ns`: (bytes of reports dated before it, bytes of those dated at or after it); with
/// `start_ns` 0, (0, all of them).
pub(crate) fn split_acked(log: &[(u64, u64)], start_ns: u64) -> (u64, u64) {
    log.iter().fold((0u64, 0u64), |(before, after), &(t, b)| {
        if t < start_ns {
            (before.saturating_add(b), after)
        } else {
            (before, after.saturating_add(b))
        }
    })
}

/// The bytes a flow's old iteration counted beyond its size, which belong to the new one: a
/// flow delivers exactly `iteration_bytes` per iteration, in order on one socket, so the old
/// iteration's count (`old_bytes`) can exceed it only by bytes of the next burst counted
/// before the progress reading showed that burst's iteration (a re-plan between the new
/// burst's first report and the next reading folds the report into the old iteration; dating
/// cannot split what was already folded). Carried only from iteration `from` to `from + 1`
/// with a known size; at most one iteration's bytes.
///
/// Seen in the VM (agent.toml, 2026-11-29): without it a ring flow's iteration stayed 20-84 KB
/// short after its last byte was acknowledged, so the agent kept the finished flow first in
/// line on its port for 0.4 s, and the next job's flows into that port were held back.
pub(crate) fn carried_bytes(
    from: Option<u64>,
    iteration_bytes: Option<u64>,
    old_bytes: u64,
    to: u64,
) -> u64 {
    match (from, iteration_bytes) {
        (Some(k), Some(size)) if k.checked_add(1) == Some(to) => {
            old_bytes.saturating_sub(size).min(size)
        }
        _ => 0,
    }
}

/// Whether a flow's shortfall can be laid at a link of capacity `link_bps` (bit/s) on its path,
/// given the capacities of the path's links that the agent knows (`path_bps`, the link's own
/// among them or not): only when none of them is narrower. A flow that lost packets and fell short of its plan was
/// stopped by some link of its path; the mlcc paper's bandwidth estimation (Sec. V-A) turns that
/// rate into the link's estimate, which is right for the path's narrowest link and wrong for a
/// wider one: a host's 1 Gbit/s NIC behind a 100 Mbit/s switch port would take on the rate the
/// port gave the flow, and the next plans would hold every flow of that host to it while the
/// port is free. Seen in the VM (`ci/scenarios/agent.toml`, 2026-11-29, docs/results/agent.md):
/// h3's NIC estimated at 62-69 Mbit/s after its flows had lost packets sharing h2's port, and a
/// ring flow alone on that port then paced at 62-69 Mbit/s for 110 ms. Links of equal capacity
/// may each be the bottleneck: the shortfall counts on each.
pub(crate) fn may_bottleneck(link_bps: u64, mut path_bps: impl Iterator<Item = u64>) -> bool {
    path_bps.all(|o| link_bps <= o)
}

/// The congestion window that goes with a pacing rate of `rate_bps` (bit/s): the bytes of
/// `max(slot / 4, 2 x RTT)` at that rate, at least 4 segments of 1448 bytes, at most
/// `max_bytes` (the configured `cwnd_bytes`).
///
/// Why a rate needs a window: Linux sizes a TSO segment by the pacing rate *and* the RTT
/// (`tcp_tso_autosize()` in net/ipv4/tcp_output.c adds `sk_gso_max_size >> (min_rtt_us >> 9)`),
/// so below 512 µs of RTT a segment is up to 64 KB whatever the rate, and its departure time
/// (`tcp_update_skb_after_send()`, the EDT model) moves the next one by up to half of
/// len/rate: at a 1 Mbit/s floor, 260 ms. A raised rate takes effect only at the next ACK and
/// does not pull that departure time back, so a flow held at the floor and then planned at the
/// full link sat idle for a quarter of a second per segment (seen in the VM: a PS job's pushes
/// at 1.2 Mbit/s for 0.5 s while planned at 100 Mbit/s). A segment is at most half the window
/// (`tcp_cwnd_test()`), so with this window the gap a segment leaves at the old rate is at
/// most an eighth of a slot or an RTT (at rates where 4 segments are more than that: the time
/// of 2 segments, 23 ms at 1 Mbit/s), and the window never limits the rate by itself: it
/// holds at least two RTTs of it.
pub(crate) fn paced_cwnd_bytes(rate_bps: u64, rtt_us: u64, slot_us: u64, max_bytes: u32) -> u32 {
    const MIN_BYTES: u64 = 4 * 1448;
    let span_us = (slot_us / 4).max(rtt_us.saturating_mul(2));
    let bytes = u128::from(rate_bps) * u128::from(span_us) / 8_000_000;
    u32::try_from(bytes.clamp(u128::from(MIN_BYTES), u128::from(max_bytes.max(1))))
        .unwrap_or(max_bytes)
}

#[cfg(test)]
mod tests {
    use super::{carried_bytes, may_bottleneck, paced_cwnd_bytes, split_acked, DatapathClock};

    #[test]
    fn a_shortfall_is_laid_only_at_the_paths_narrowest_links() {
        let gbit = 1_000_000_000;
        let port = 100_000_000;
        // A 1 Gbit/s NIC behind a 100 Mbit/s switch port: not the NIC; the port, yes.
        assert!(!may_bottleneck(gbit, [port].into_iter()));
        assert!(may_bottleneck(port, [gbit].into_iter()));
        // Equal capacities: each may be it; no other known link: the link itself.
        assert!(may_bottleneck(port, [port, gbit].into_iter()));
        assert!(may_bottleneck(gbit, std::iter::empty()));
    }

    #[test]
    fn an_old_iterations_excess_goes_to_the_next_one_only() {
        // 20 000 bytes of the next burst counted in iteration 3 of 2 008 987 bytes.
        assert_eq!(
            carried_bytes(Some(3), Some(2_008_987), 2_028_987, 4),
            20_000
        );
        // Exactly complete, or short: nothing to carry.
        assert_eq!(carried_bytes(Some(3), Some(2_008_987), 2_008_987, 4), 0);
        assert_eq!(carried_bytes(Some(3), Some(2_008_987), 1_000_000, 4), 0);
        // Not the next iteration (a skipped reading, a restart), no size, no old iteration.
        assert_eq!(carried_bytes(Some(3), Some(2_008_987), 2_028_987, 5), 0);
        assert_eq!(carried_bytes(Some(3), None, 2_028_987, 4), 0);
        assert_eq!(carried_bytes(None, Some(2_008_987), 2_028_987, 0), 0);
        // At most one iteration's bytes; no overflow at the last iteration number.
        assert_eq!(carried_bytes(Some(3), Some(100), 1_000, 4), 100);
        assert_eq!(carried_bytes(Some(u64::MAX), Some(100), 1_000, 0), 0);
    }

    #[test]
    fn paced_window_bounds_a_segment_and_never_limits_the_rate() {
        let slot_us = 60_000;
        // 1 Mbit/s floor, 1 ms RTT: a quarter slot of it is 1875 bytes, below 4 segments.
        assert_eq!(
            paced_cwnd_bytes(1_000_000, 1_000, slot_us, 16 << 20),
            4 * 1448
        );
        // 100 Mbit/s: a quarter slot (15 ms) of it, 187500 bytes.
        assert_eq!(
            paced_cwnd_bytes(100_000_000, 1_000, slot_us, 16 << 20),
            187_500
        );
        // A long RTT: two RTTs of the rate.
        assert_eq!(
            paced_cwnd_bytes(100_000_000, 20_000, slot_us, 16 << 20),
            500_000
        );
        // Never above the configured window; no overflow at absurd rates.
        assert_eq!(
            paced_cwnd_bytes(u64::MAX, u64::MAX, slot_us, 1 << 20),
            1 << 20
        );
        for rate in [1_000_000u64, 10_000_000, 100_000_000, 10_000_000_000] {
            let w = u64::from(paced_cwnd_bytes(rate, 500, slot_us, u32::MAX));
            // A segment (at most half the window) takes at most slot/8 at the rate...
            assert!(
                w / 2 * 8_000_000 / rate <= slot_us / 8 || w == 4 * 1448,
                "{rate}: {w}"
            );
            // ...and the window carries the rate over 2 RTTs.
            assert!(w * 8_000_000 / rate >= 2 * 500, "{rate}: {w}");
        }
    }

    #[test]
    fn reports_are_dated_by_the_datapath_clock() {
        // The datapath clock runs 5 s behind CLOCK_MONOTONIC; deliveries take 1-300 ms.
        let mut c = DatapathClock::default();
        let ms = 1_000_000u64;
        // First report: ACK at dp 1000 ms, arrived 300 ms late: dated at its arrival.
        assert_eq!(c.date_ns(1_000_000, 6_300 * ms), 6_300 * ms);
        // A report delivered within 1 ms calibrates the offset...
        assert_eq!(c.date_ns(2_000_000, 7_001 * ms), 7_001 * ms);
        // ...so a later report read 400 ms late is dated near its ACK, not at its arrival.
        assert_eq!(c.date_ns(3_000_000, 8_400 * ms), 8_001 * ms);
        // Never after the arrival, even if the offset estimate were stale.
        assert!(c.date_ns(4_000_000, 8_500 * ms) <= 8_500 * ms);
    }

    #[test]
    fn acked_bytes_split_at_the_iteration_start() {
        let log = [(10, 100), (20, 7), (30, 1000)];
        assert_eq!(split_acked(&log, 0), (0, 1107));
        assert_eq!(
            split_acked(&log, 20),
            (100, 1007),
            "a report at the start counts for it"
        );
        assert_eq!(split_acked(&log, 31), (1107, 0));
        assert_eq!(split_acked(&[], 5), (0, 0));
    }
}
