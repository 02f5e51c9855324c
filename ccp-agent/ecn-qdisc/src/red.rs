// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! RED's parameters as the kernel takes them (`struct tc_red_qopt`, the idle-damping table),
//! computed without I/O so that they are tested here.
//!
//! RED ("Random Early Detection Gateways for Congestion Avoidance", Floyd and Jacobson, 1993)
//! marks on an exponentially weighted average of the queue, `avg ← (1 − W)·avg + W·q` with
//! `W = 2^−Wlog` (`include/net/red.h`). While the queue is idle no packet updates the average,
//! so on the first arrival after an idle period the kernel decays it as if packets of the
//! average size had been sent at the link's rate during the idle time: `avg·(1 − W)^n`, n the
//! number of such packets. It looks the decay up in a 256-entry table indexed by
//! `idle_µs >> Scell_log`, each entry a right shift of `avg` (`red_calc_qavg_from_idle_time`);
//! an entry 0 means "use the linear approximation". [`idle_damping`] computes that table from
//! the decay law: `(1 − W)^n = 2^−shift`, so `shift = n·(−log2(1 − W))`.

/// Entries of RED's idle-damping table (`RED_STAB_SIZE` in `include/net/red.h`).
pub const RED_STAB_SIZE: usize = 256;
/// Largest shift the kernel accepts in the table (`red_check_params`: each entry < 32).
pub const MAX_SHIFT: u8 = 31;
/// `TC_RED_ECN` (`include/uapi/linux/pkt_sched.h`): mark instead of dropping.
pub const TC_RED_ECN: u8 = 1;

/// `struct tc_red_qopt` (`include/uapi/linux/pkt_sched.h`): RED's configuration as the kernel
/// dumps and takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedQopt {
    /// Hard limit of the child bfifo, bytes. On a change, 0 keeps the current child (and its
    /// queue): a limit > 0 makes `__red_change` (`net/sched/sch_red.c`) create a new child
    /// fifo and purge the old one's packets.
    pub limit: u32,
    /// Average queue from which marking starts, bytes.
    pub qth_min: u32,
    /// Average queue from which every packet is marked, bytes.
    pub qth_max: u32,
    /// log2 of 1/W, the average's weight.
    pub wlog: u8,
    /// log2 of max_P / (qth_max − qth_min) (unused when `TCA_RED_MAX_P` is given).
    pub plog: u8,
    /// log2 of the idle-damping table's cell, µs.
    pub scell_log: u8,
    /// `TC_RED_*` flags.
    pub flags: u8,
}

/// Size of `struct tc_red_qopt`, bytes.
pub const RED_QOPT_LEN: usize = 16;

impl RedQopt {
    /// Parses the kernel's `TCA_RED_PARMS` payload (native byte order); `None` when it is not
    /// [`RED_QOPT_LEN`] bytes long.
    pub fn parse(b: &[u8]) -> Option<Self> {
        if b.len() != RED_QOPT_LEN {
            return None;
        }
        let u = |o: usize| u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        Some(RedQopt {
            limit: u(0),
            qth_min: u(4),
            qth_max: u(8),
            wlog: b[12],
            plog: b[13],
            scell_log: b[14],
            flags: b[15],
        })
    }

    /// The `TCA_RED_PARMS` payload.
    pub fn to_bytes(&self) -> [u8; RED_QOPT_LEN] {
        let mut b = [0u8; RED_QOPT_LEN];
        b[0..4].copy_from_slice(&self.limit.to_ne_bytes());
        b[4..8].copy_from_slice(&self.qth_min.to_ne_bytes());
        b[8..12].copy_from_slice(&self.qth_max.to_ne_bytes());
        b[12] = self.wlog;
        b[13] = self.plog;
        b[14] = self.scell_log;
        b[15] = self.flags;
        b
    }

    /// Whether the kernel's `red_check_params` (`include/net/red.h`) accepts these thresholds
    /// and weight: `fls(qth) + Wlog < 32` for both, `qth_max ≥ qth_min`, `Scell_log < 32`.
    pub fn kernel_accepts(&self) -> bool {
        let fls = |x: u32| 32 - x.leading_zeros();
        fls(self.qth_min) + u32::from(self.wlog) < 32
            && fls(self.qth_max) + u32::from(self.wlog) < 32
            && self.qth_max >= self.qth_min
            && self.scell_log < 32
    }
}

/// A RED configuration like the testbed's (30 kB at 100 Mbit/s), for the tests.
#[cfg(test)]
pub(crate) const SAMPLE: RedQopt = RedQopt {
    limit: 126_500,
    qth_min: 30_000,
    qth_max: 31_500,
    wlog: 3,
    plog: 20,
    scell_log: 9,
    flags: TC_RED_ECN,
};

/// The idle-damping table and its cell size for weight `2^−wlog`, packets of `avpkt_bytes` and
/// a link of `rate_bps`: `(Scell_log, table)`. The cell is the smallest power of two (µs) for
/// which the table's 256 cells reach the full decay (a shift of [`MAX_SHIFT`]); entry i is the
/// shift for an idle time of `i << Scell_log` µs, rounded down, entry 0 is 0 and the last
/// entry is [`MAX_SHIFT`] (see the module docs for the law). `wlog = 0` (W = 1: the average is
/// the instantaneous queue) decays fully on any idle time. Degenerate inputs (`avpkt_bytes` or
/// `rate_bps` 0) are taken as 1.
pub fn idle_damping(wlog: u8, avpkt_bytes: u32, rate_bps: u64) -> (u8, [u8; RED_STAB_SIZE]) {
    let mut stab = [MAX_SHIFT; RED_STAB_SIZE];
    stab[0] = 0;
    if wlog == 0 {
        return (0, stab);
    }
    // Time to send one average packet, µs.
    let xmit_us = f64::from(avpkt_bytes.max(1)) * 8e6 / (rate_bps.max(1) as f64);
    // Shift per µs of idle time: −log2(1 − W) per packet time. ln_1p keeps precision for the
    // small W of large Wlog.
    let w = (-f64::from(wlog.min(31))).exp2();
    let shift_per_us = -(-w).ln_1p() / std::f64::consts::LN_2 / xmit_us;
    // Idle time after which the average is shifted out entirely.
    let full_us = f64::from(MAX_SHIFT) / shift_per_us;
    let mut scell_log = 0u8;
    while scell_log < 31 && full_us / f64::from(1u32 << scell_log) >= RED_STAB_SIZE as f64 {
        scell_log += 1;
    }
    let cell_us = f64::from(1u32 << scell_log);
    for (i, s) in stab.iter_mut().enumerate().take(RED_STAB_SIZE - 1).skip(1) {
        *s = (i as f64 * cell_us * shift_per_us)
            .floor()
            .min(f64::from(MAX_SHIFT)) as u8;
    }
    (scell_log, stab)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn qopt_round_trips_and_checks_like_the_kernel() {
        let q = SAMPLE;
        assert_eq!(RedQopt::parse(&q.to_bytes()), Some(q));
        assert_eq!(RedQopt::parse(&[0; 15]), None);
        assert!(q.kernel_accepts());
        assert!(!RedQopt {
            qth_max: 29_999,
            ..q
        }
        .kernel_accepts());
        // 30 000 needs 15 bits; with Wlog 17 that is 32 bits: refused.
        assert!(RedQopt { wlog: 16, ..q }.kernel_accepts());
        assert!(!RedQopt { wlog: 17, ..q }.kernel_accepts());
    }

    #[test]
    fn damping_follows_the_decay_law() {
        // W = 1/2, 1500 B at 100 Mbit/s: 120 µs per packet, one bit of shift per packet time.
        let (scell_log, stab) = idle_damping(1, 1500, 100_000_000);
        // 31 packet times = 3720 µs over 256 cells: cells of 16 µs (3720/8 = 465 ≥ 256,
        // 3720/16 = 232.5 < 256).
        assert_eq!(scell_log, 4);
        assert_eq!(stab[0], 0);
        // 120 µs = 7.5 cells: entry 8 (128 µs) is the first with a full shift of 1.
        assert_eq!(stab[7], 0);
        assert_eq!(stab[8], 1);
        assert_eq!(stab[15], 2); // 240 µs = 2 packet times
        assert_eq!(stab[255], MAX_SHIFT);
        assert_eq!(
            idle_damping(0, 1500, 100_000_000),
            (0, {
                let mut s = [MAX_SHIFT; RED_STAB_SIZE];
                s[0] = 0;
                s
            })
        );
    }

    proptest! {
        #[test]
        fn damping_is_monotone_bounded_and_covers_full_decay(
            wlog in 1u8..24, avpkt in 64u32..9000, rate in 1_000_000u64..100_000_000_000,
        ) {
            let (scell_log, stab) = idle_damping(wlog, avpkt, rate);
            prop_assert!(scell_log < 32);
            prop_assert_eq!(stab[0], 0);
            prop_assert!(stab.windows(2).all(|w| w[0] <= w[1]));
            prop_assert!(stab.iter().all(|&s| s <= MAX_SHIFT));
            // The table's span reaches the full decay, and half of it does not (the smallest
            // cell that covers it), unless cells are already 1 µs.
            let xmit_us = f64::from(avpkt) * 8e6 / rate as f64;
            let per_us = -(-(-f64::from(wlog)).exp2()).ln_1p() / std::f64::consts::LN_2 / xmit_us;
            let span_us = 256.0 * f64::from(1u32 << scell_log);
            prop_assert!(span_us * per_us >= 31.0);
            if scell_log > 0 {
                prop_assert!(span_us / 2.0 * per_us < 31.0 + 1e-9);
            }
        }
    }
}
