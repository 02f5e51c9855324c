//! The agent's shipped datapath program (`datapath-programs/mlcc-slot.ccp`), compiled by portus
//! and run by this crate as tcp_mltcp runs it: the window stays under the agent's ceiling
//! (`Control.cwnd_cap`), is halved on loss at most once per RTT, grows as Reno's below the
//! ceiling, slow-starts toward a raised ceiling, and follows a lowered one at once.

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
            packets_in_flight: 10,
            rtt_sample_us: RTT_US,
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
