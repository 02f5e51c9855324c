//! The agent's shipped datapath program (`datapath-programs/mlcc-slot.ccp`), compiled by portus
//! and run by this crate as tcp_mltcp runs it: the window stays under the agent's ceiling
//! (`Control.cwnd_cap`), is halved on loss at most once per RTT, grows as Reno's below the
//! ceiling, slow-starts toward a raised ceiling, and follows a lowered one at once; in scavenger
//! mode (`Control.scavenge_us`) it follows LEDBAT (RFC 6817) on the queueing delay instead.

mod common;

use ccp_datapath::{
    check_slot_program, program_lines, Datapath, FlowInfo, MissingField, Primitives,
    SLOT_PROGRAM_FIELDS,
};
use common::*;
use portus::lang::Scope;

/// The program as ccp-agent loads it: without its comment lines ([`program_lines`]).
fn shipped_program() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../datapath-programs/mlcc-slot.ccp"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    program_lines(&text).collect::<Vec<_>>().join("\n")
}

/// One flow under the program, driven ACK by ACK as the module drives it: `snd_cwnd` is the
/// window the program set last (tcp_mltcp reports that, not the kernel's, see kmod/ccp.rs).
struct Flow {
    dp: Box<Datapath<4, 4>>,
    ops: MockOps,
    sid: u32,
    sc: Scope,
    cwnd: u64,
    /// The RTT sample the next ACKs carry, µs.
    rtt_us: u64,
    /// The packets in flight after the next ACK (`Flow.packets_in_flight`).
    in_flight: u64,
}

const RTT_US: u64 = 2_000;

impl Flow {
    fn new(cwnd: u64, cap: u64) -> Flow {
        let (install, sc, _) = compile_install(&shipped_program());
        let mut dp = Box::new(Datapath::<4, 4>::new());
        let mut ops = MockOps {
            now: 1_000,
            ..Default::default()
        };
        dp.init(ops.now);
        let info = FlowInfo {
            init_cwnd: 14_480,
            mss: 1448,
            ..Default::default()
        };
        let sid = dp.flow_start(&info, &mut ops).unwrap();
        dp.handle_msg(&install).unwrap();
        // The agent's install: Cwnd, its ceiling, the rate and the slot (ccp-agent's ccp.rs).
        let fields = vec![
            (reg_of(&sc, "Cwnd"), cwnd),
            (reg_of(&sc, "Control.cwnd_cap"), cap),
            (reg_of(&sc, "Rate"), 12_500_000),
            (reg_of(&sc, "Control.slot_us"), 60_000),
        ];
        dp.handle_msg(&change_prog(sid, sc.program_uid, fields))
            .unwrap();
        let mut f = Flow {
            dp,
            ops,
            sid,
            sc,
            cwnd: 14_480,
            rtt_us: RTT_US,
            in_flight: 10,
        };
        f.ack(0, 0);
        f
    }

    /// One ACK `dt_us` after the previous one, acknowledging `acked` bytes and reporting `lost`
    /// newly lost packets; returns the window the program leaves (bytes).
    fn ack_after(&mut self, dt_us: u64, acked: u64, lost: u64) -> u64 {
        self.ops.now += dt_us;
        let prims = Primitives {
            bytes_acked: acked,
            lost_pkts_sample: lost,
            packets_in_flight: self.in_flight,
            rtt_sample_us: self.rtt_us,
            snd_cwnd: self.cwnd,
            snd_rate: 12_500_000,
            ..Primitives::default()
        };
        self.ops.acts.clear();
        self.dp
            .flow_invoke(self.sid, &prims, &mut self.ops)
            .unwrap();
        for a in &self.ops.acts {
            if let Act::Cwnd(c) = a {
                self.cwnd = *c;
            }
        }
        self.cwnd
    }

    fn ack(&mut self, acked: u64, lost: u64) -> u64 {
        self.ack_after(100, acked, lost)
    }

    /// The agent's per-slot update: a new ceiling.
    fn set_cap(&mut self, cap: u64) {
        let msg = update_fields(self.sid, vec![(reg_of(&self.sc, "Control.cwnd_cap"), cap)]);
        self.dp.handle_msg(&msg).unwrap();
    }

    /// The agent's per-slot update of a held flow (`target_us` > 0) or a served one (0): the
    /// ceiling and the scavenger target, as ccp-agent's ccp.rs sends them.
    fn set_scavenge(&mut self, target_us: u64, cap: u64) {
        let msg = update_fields(
            self.sid,
            vec![
                (reg_of(&self.sc, "Control.cwnd_cap"), cap),
                (reg_of(&self.sc, "Control.scavenge_us"), target_us),
            ],
        );
        self.dp.handle_msg(&msg).unwrap();
    }

    /// How much the window moves over one window's worth of ACKs of one segment each, bytes
    /// (negative: it shrank).
    fn change_over_a_window(&mut self) -> i64 {
        let before = self.cwnd;
        let mut acked = 0;
        while acked < before {
            self.ack(1448, 0);
            acked += 1448;
        }
        self.cwnd as i64 - before as i64
    }
}

#[test]
fn window_stays_under_the_ceiling_without_loss() {
    let mut f = Flow::new(100_000, 100_000);
    assert_eq!(f.cwnd, 100_000);
    for _ in 0..200 {
        assert_eq!(f.ack(2896, 0), 100_000);
    }
}

#[test]
fn loss_halves_the_window_once_per_rtt_then_reno_grows_it() {
    let mut f = Flow::new(100_000, 100_000);
    // Halved, plus that ACK's own additive increase (1448 x 1448 / 50000 bytes).
    assert_eq!(
        f.ack_after(RTT_US + 1, 1448, 2),
        50_000 + 41,
        "halved on loss"
    );
    // More losses within the same RTT (one recovery episode): no second cut.
    assert!(f.ack(1448, 1) >= 50_000);
    assert!(f.ack(1448, 3) >= 50_000);
    // Congestion avoidance: about one segment per window acknowledged.
    let before = f.cwnd;
    let mut acked = 0;
    while acked < before {
        f.ack(1448, 0);
        acked += 1448;
    }
    let grown = f.cwnd - before;
    assert!(
        (1300..=1600).contains(&grown),
        "grew {grown} bytes over one window"
    );
    // A loss an RTT later cuts again.
    let w = f.cwnd;
    let half = w / 2;
    assert_eq!(f.ack_after(RTT_US + 1, 1448, 1), half + 1448 * 1448 / half);
    // Never below 4 segments.
    for _ in 0..20 {
        f.ack_after(RTT_US + 1, 1448, 1);
    }
    let floor = 4 * 1448;
    assert_eq!(f.cwnd, floor + 1448 * 1448 / floor);
}

#[test]
fn a_raised_ceiling_restarts_slow_start_and_a_lowered_one_applies_at_once() {
    let mut f = Flow::new(100_000, 100_000);
    f.ack_after(RTT_US + 1, 1448, 2);
    assert_eq!(f.cwnd, 50_000 + 41);
    // The agent plans a higher rate: slow start (the window grows by what is acknowledged)...
    f.set_cap(400_000);
    let w0 = f.ack(14_480, 0);
    assert!(w0 >= 50_041 + 14_480, "{w0}");
    for _ in 0..100 {
        f.ack(14_480, 0);
    }
    // ...up to the new ceiling and not beyond.
    assert_eq!(f.cwnd, 400_000);
    // A lower ceiling (a lower planned rate) takes effect on the next ACK.
    f.set_cap(20_000);
    assert_eq!(f.ack(1448, 0), 20_000);
    for _ in 0..50 {
        assert!(f.ack(1448, 0) <= 20_000);
    }
}

#[test]
fn the_shipped_program_names_every_field_the_agent_uses() {
    let program = shipped_program();
    assert_eq!(check_slot_program(&program), Ok(()));
    for field in SLOT_PROGRAM_FIELDS {
        let without = program.replace(field, "Report.other");
        let err = check_slot_program(&without).unwrap_err();
        assert_eq!(err, MissingField { field });
        assert_eq!(
            err.to_string(),
            format!("the program lacks {field}, which the agent reads or sets")
        );
    }
}

/// LEDBAT's window (RFC 6817, Sec. 2.4.2) with TARGET 1000 µs on a base delay of 2000 µs: a
/// segment per window with an empty queue, in proportion to (TARGET - queuing delay) / TARGET,
/// no change at the target, shrinking above it, never below 2 segments.
#[test]
fn a_scavenger_grows_below_the_target_delay_and_yields_above_it() {
    let mut f = Flow::new(100_000, 100_000);
    // The agent holds the flow: entering the mode cuts the window to 2 segments, and that
    // ACK's own LEDBAT step adds 1448 x 1448 / 2896 bytes (empty queue).
    f.set_scavenge(1000, 16 << 20);
    assert_eq!(f.ack(1448, 0), 2896 + 724);
    // Empty queue (RTT at its base): about a segment per window, as Reno.
    let g = f.change_over_a_window();
    assert!((1300..=1600).contains(&g), "grew {g} over a window");
    for _ in 0..5 {
        f.change_over_a_window();
    }
    // Half the target of queueing: about half a segment per window.
    f.rtt_us = RTT_US + 500;
    let g = f.change_over_a_window();
    assert!((600..=800).contains(&g), "grew {g} at half the target");
    // At the target: no change.
    f.rtt_us = RTT_US + 1000;
    assert_eq!(f.change_over_a_window(), 0);
    // Three times the target: two segments fewer per window of the starting size, a little
    // more as the window shrinks under the ACKs (from 13139 bytes: 3319 in the continuous
    // limit)...
    f.rtt_us = RTT_US + 3000;
    let w = f.cwnd;
    let g = f.change_over_a_window();
    assert!((-3 * 1448..=-2 * 1448).contains(&g), "shrank {g} from {w}");
    // ...down to 2 segments and no further; a queue far above the target cannot underflow it.
    f.rtt_us = RTT_US + 100_000;
    for _ in 0..50 {
        assert!(f.ack(64_000, 0) >= 2896);
    }
    assert_eq!(f.cwnd, 2896);
    // A loss does not raise a window below Reno's 4-segment floor.
    assert_eq!(f.ack_after(RTT_US + 200_000, 1448, 1), 2896);
    // The queue drains: it grows again.
    f.rtt_us = RTT_US;
    assert!(f.change_over_a_window() > 0);
}

#[test]
fn a_served_flow_leaves_scavenging_by_slow_start_toward_its_ceiling() {
    let mut f = Flow::new(100_000, 100_000);
    f.set_scavenge(1000, 16 << 20);
    f.rtt_us = RTT_US + 3000;
    for _ in 0..20 {
        f.ack(1448, 0);
    }
    assert_eq!(f.cwnd, 2896);
    // Served again: a planned ceiling and no target. The window doubles per window
    // acknowledged (slow start) up to the ceiling, though the queue is still above the target.
    f.set_scavenge(0, 200_000);
    let w0 = f.cwnd;
    assert_eq!(f.ack(2896, 0), w0 + 2896);
    for _ in 0..100 {
        f.ack(14_480, 0);
    }
    assert_eq!(f.cwnd, 200_000);
    // And Reno from then on: no LEDBAT shrinkage however long the queue.
    for _ in 0..100 {
        assert_eq!(f.ack(1448, 0), 200_000);
    }
}

#[test]
fn without_a_target_the_queueing_delay_changes_nothing() {
    // Scavenger mode off (the default, and `held_flows = "floor"`): the same window as before
    // the mode existed, whatever the RTT.
    let mut a = Flow::new(100_000, 400_000);
    let mut b = Flow::new(100_000, 400_000);
    b.rtt_us = RTT_US * 10;
    for i in 0..300 {
        let lost = u64::from(i % 97 == 0);
        assert_eq!(
            a.ack_after(RTT_US * 11, 1448, lost),
            b.ack_after(RTT_US * 11, 1448, lost)
        );
    }
}

/// The last ACK of a burst (nothing left in flight) reports at once, mid-slot: the program runs
/// only on ACKs, so otherwise the burst's last bytes would wait in the datapath until the next
/// burst's first ACK, and the agent would see the finished flow with bytes left to send.
#[test]
fn the_ack_that_empties_the_pipe_reports_the_bytes_at_once() {
    let mut f = Flow::new(100_000, 100_000);
    // The first slot's report (the install's ACK opened it; 60 ms later the next ACK reports).
    f.ack_after(61_000, 1448, 0);
    let sent_before = f.ops.sent.len();
    for _ in 0..20 {
        f.ack(1448, 0);
    }
    assert_eq!(
        f.ops.sent.len(),
        sent_before,
        "no report within the slot while data is in flight"
    );
    f.in_flight = 0;
    f.ack(1448, 0);
    assert_eq!(
        f.ops.sent.len(),
        sent_before + 1,
        "the ACK that leaves nothing in flight must report"
    );
    // An ACK with nothing newly acknowledged and nothing in flight does not report again.
    f.ack(0, 0);
    assert_eq!(f.ops.sent.len(), sent_before + 1);
}
