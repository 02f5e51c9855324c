//! One flow running one of the project's installed programs, ready to take ACKs: the set-up
//! shared by the per-ACK benchmark (`benches/invoke.rs`) and the instruction counter
//! (`examples/ack_instructions.rs`), so that both measure the same invocation.
//!
//! ACKs arrive every [`ACK_GAP_US`], each acknowledging two 1448-byte segments with 100 in flight
//! and an RTT of 100 µs, so Reno (report floor 10 ms) reports once per 1000 ACKs and mlcc-slot
//! (60 ms slots) once per 6000: almost every ACK only runs the program.

use ccp_datapath::{
    program_lines, Datapath, DatapathOps, ExecMode, FlowInfo, Primitives, SendError,
};
use portus::lang::Reg;

/// Interval between ACKs, µs.
pub const ACK_GAP_US: u64 = 10;

/// The program text of ccp-test-agent's Reno (one definition, shared through `#[path]`).
#[path = "../../../ccp-test-agent/src/reno_program.rs"]
pub mod reno_program;

/// A host that keeps nothing: a clock and a count of what was sent.
#[derive(Default)]
pub struct NullOps {
    /// The clock, µs.
    pub now: u64,
    /// Messages sent.
    pub sent: u64,
}

impl DatapathOps for NullOps {
    fn now_us(&self) -> u64 {
        self.now
    }
    fn send_msg(&mut self, _msg: &[u8]) -> Result<(), SendError> {
        self.sent += 1;
        Ok(())
    }
    fn set_cwnd(&mut self, bytes: u64) {
        std::hint::black_box(bytes);
    }
    fn set_rate_abs(&mut self, bytes_per_sec: u64) {
        std::hint::black_box(bytes_per_sec);
    }
}

/// An installed program: its text and the CHANGE_PROG fields (names in its scope) that start it.
pub struct Installed {
    /// Short name (`reno`, `mlcc-slot`).
    pub name: &'static str,
    /// The program's text.
    pub src: String,
    /// CHANGE_PROG fields.
    pub fields: &'static [(&'static str, u64)],
}

/// ccp-test-agent's Reno as `ccp-test-agent reno --min-report-us 10000` installs it (the kernel
/// window rule).
pub fn reno() -> Installed {
    Installed {
        name: "reno",
        src: reno_program::text(10_000, reno_program::INFLIGHT_KERNEL),
        fields: &[("Cwnd", 14_480)],
    }
}

/// ccp-agent's `datapath-programs/mlcc-slot.ccp`, without its comment lines, with ccp-agent's
/// install fields (ccp-agent's ccp.rs; as tests/mlcc_program.rs).
pub fn mlcc_slot() -> Installed {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../datapath-programs/mlcc-slot.ccp"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Installed {
        name: "mlcc-slot",
        src: program_lines(&text).collect::<Vec<_>>().join("\n"),
        fields: &[
            ("Cwnd", 200 * 1448),
            ("Control.cwnd_cap", 16_777_216),
            ("Rate", 500_000_000),
            ("Control.slot_us", 60_000),
        ],
    }
}

/// One flow running `p` in `mode`, switched to it with CHANGE_PROG, and one invocation done so
/// that the switch is applied.
pub fn flow(p: &Installed, mode: ExecMode) -> (Box<Datapath<4, 4>>, NullOps, u32) {
    let (install, sc, _) = super::compile_install(&p.src);
    let mut dp = Box::new(Datapath::<4, 4>::new());
    dp.set_exec_mode(mode);
    let mut ops = NullOps {
        now: 1_000,
        sent: 0,
    };
    dp.init(ops.now);
    let info = FlowInfo {
        init_cwnd: 14_480,
        mss: 1448,
        ..Default::default()
    };
    let sid = dp.flow_start(&info, &mut ops).expect("flow starts");
    dp.handle_msg(&install).expect("INSTALL");
    let regs: Vec<(Reg, u64)> = p
        .fields
        .iter()
        .map(|&(n, v)| (super::reg_of(&sc, n), v))
        .collect();
    dp.handle_msg(&super::change_prog(sid, sc.program_uid, regs))
        .expect("CHANGE_PROG");
    dp.flow_invoke(sid, &prims(), &mut ops).expect("first ACK");
    (dp, ops, sid)
}

/// The measurements of every ACK.
pub fn prims() -> Primitives {
    Primitives {
        bytes_acked: 2 * 1448,
        packets_acked: 2,
        bytes_in_flight: 100 * 1448,
        packets_in_flight: 100,
        rate_incoming: 500_000_000,
        rate_outgoing: 500_000_000,
        rtt_sample_us: 100,
        snd_cwnd: 200 * 1448,
        snd_rate: 500_000_000,
        ..Primitives::default()
    }
}
