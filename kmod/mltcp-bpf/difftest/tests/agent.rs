// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The BPF agent datapath's glue (kmod/mltcp-bpf/bpf/mltcp.bpf.c, `agent_*`), compiled for user
//! space with the harness's maps: a flow is offered only while the agent's heartbeat is fresh
//! (CREATE record with its addresses); without a control entry it runs plain `mltcp`; with one,
//! the slot rule sets the window (the same C rule tests/slot.rs pins to the interpreter), the
//! rate becomes SO_MAX_PACING_RATE and the class IP_TOS/SO_PRIORITY, a slot's end sends a
//! MEASURE record; a stale heartbeat gives the flow back to plain `mltcp` (pacing limit lifted,
//! the socket's own marking restored), and release sends the CLOSE record. `mltcp_cubic` flows
//! are offered the same way, their CREATE naming `mltcp_cubic`.

use mltcp_bpf_difftest::{harness, AgentFields, Alg, Fields, SlotAck, SlotCtl, SlotState};
use mltcp_math::params::Params;

const SOL_SOCKET: i32 = 1;
const SOL_IP: i32 = 0;
const SO_PRIORITY: i32 = 12;
const SO_MAX_PACING_RATE: i32 = 47;
const IP_TOS: i32 = 1;

fn ctl_bytes(rate: u64, cwnd: u64, cap: u64, gens: (u32, u32), dscp: u32) -> [u8; 56] {
    let mut b = [0u8; 56];
    for (i, v) in [rate, cwnd, 60_000, cap, 0].iter().enumerate() {
        b[8 * i..8 * i + 8].copy_from_slice(&v.to_ne_bytes());
    }
    for (i, v) in [gens.0, gens.1, dscp, 0].iter().enumerate() {
        b[40 + 4 * i..44 + 4 * i].copy_from_slice(&v.to_ne_bytes());
    }
    b
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().unwrap())
}

/// The socket options the glue sets, in order: the pacing limit (bytes/s, -1 lifts it), the TOS
/// and the priority.
fn marking(rate: i32, tos: i32, priority: i32) -> Vec<(i32, i32, i32)> {
    vec![
        (SOL_SOCKET, SO_MAX_PACING_RATE, rate),
        (SOL_IP, IP_TOS, tos),
        (SOL_SOCKET, SO_PRIORITY, priority),
    ]
}

/// A socket of `alg` with fields `f` and `agent`, initialized while an agent is attached: the
/// socket and its one record, a CREATE (checked: 40 bytes, kind 1, a non-zero sid).
fn offered<'h>(
    h: &'h mltcp_bpf_difftest::Harness,
    f: &Fields,
    agent: &AgentFields,
    alg: Alg,
) -> (mltcp_bpf_difftest::Sock<'h>, Vec<u8>) {
    let mut s = h.sock();
    s.set(f);
    s.set_agent_fields(agent);
    s.init(alg);
    let mut recs = h.agent_records();
    assert_eq!(recs.len(), 1);
    let c = recs.remove(0);
    assert_eq!((c.len(), u32_at(&c, 0)), (40, 1), "a CREATE record");
    assert_ne!(u32_at(&c, 4), 0, "a sid");
    (s, c)
}

/// The slot program's state right after the control entry `ctl_bytes(1_250_000, 50_000,
/// 100_000, ..)`: Cwnd 50,000 bytes, Rate 1.25 MB/s.
fn installed_state() -> SlotState {
    SlotState {
        cwnd: 50_000,
        rate: 1_250_000,
        ..SlotState::default()
    }
}

/// The Control registers of that entry: 60 ms slots, a 100,000-byte ceiling, no scavenging.
fn installed_ctl() -> SlotCtl {
    SlotCtl {
        slot_us: 60_000,
        cwnd_cap: 100_000,
        scavenge_us: 0,
    }
}

/// The harness with HZ 1000, the default parameters and no agent state left from another test.
fn fresh_harness() -> mltcp_bpf_difftest::Harness {
    let h = harness();
    h.set_clock(1000, 1_000_000);
    h.set_params(&Params::default());
    h.agent_reset();
    h
}

/// A flow at its start: cwnd 10, no ssthresh, srtt 2 ms, cwnd-limited.
fn start_fields() -> Fields {
    Fields {
        cwnd: 10,
        ssthresh: u32::MAX,
        cwnd_clamp: 10_000,
        srtt_us: 2_000 << 3,
        is_cwnd_limited: 1,
        bytes_acked: 0,
        tcp_mstamp: 5_000_000,
        ..Fields::default()
    }
}

/// An IPv4 flow 10.77.1.1:`sport` -> 10.77.2.1:5201, MSS 1448.
fn agent_fields(sport: u16) -> AgentFields {
    AgentFields {
        mss: 1448,
        family: 2,
        saddr: 0x0101_4d0a,
        daddr: 0x0102_4d0a,
        sport,
        dport_be: 0x5114,
        ..AgentFields::default()
    }
}

#[test]
fn an_offered_flow_follows_the_agent_and_falls_back_when_the_heartbeat_stops() {
    let h = fresh_harness();
    let mut f = start_fields();
    let agent = agent_fields(5201);

    // No agent: nothing offered, plain mltcp.
    let mut plain = h.sock();
    plain.set(&f);
    plain.set_agent_fields(&agent);
    plain.init(Alg::Reno);
    assert!(h.agent_records().is_empty());

    // An agent attached: the flow is offered.
    h.agent_set(1_000_000_000, 1_000_000_000, 1_200_000_000);
    let (mut s, c) = offered(&h, &f, &agent, Alg::Reno);
    let sid = u32_at(&c, 4);
    assert_eq!(
        u32_at(&c, 36),
        0,
        "the CREATE names mltcp (MLTCP_REC_ALG_RENO)"
    );
    assert_eq!(
        (
            u32_at(&c, 8),
            u32_at(&c, 12),
            u32_at(&c, 16),
            u32_at(&c, 20),
            u32_at(&c, 24),
            u32_at(&c, 28),
            u32_at(&c, 32)
        ),
        (
            14_480,
            1448,
            0x0101_4d0a,
            0x0102_4d0a,
            u32::from(5201u16.to_be()),
            0x5114,
            2
        )
    );

    // Offered, no program yet: plain mltcp's growth (slow start: +1 segment per segment).
    f.bytes_acked += 1448;
    s.set(&f);
    s.cong_avoid(Alg::Reno, 1);
    let mut g = f;
    s.get(&mut g);
    assert_eq!(g.cwnd, 11);
    assert!(h.agent_sockopts().is_empty());

    // The agent installs the program: the window is the program's, the rate and class applied.
    h.agent_ctl(sid, &ctl_bytes(1_250_000, 50_000, 100_000, (1, 1), 26));
    let mut want = installed_state();
    f.cwnd = 11;
    f.bytes_acked += 2 * 1448;
    f.tcp_mstamp += 100;
    want.start(f.tcp_mstamp);
    s.set(&f);
    s.cong_avoid(Alg::Reno, 2);
    let ctl = installed_ctl();
    let ack = |f: &Fields, acked: u64| SlotAck {
        bytes_acked: acked,
        lost_pkts: 0,
        rtt_us: 2_000,
        rate_in: 0,
        rate_out: 0,
        now_us: f.tcp_mstamp,
        in_flight: 0,
    };
    // packets_out 0 and acked > 0: this ACK reports at once.
    let r = want.run(&ctl, &ack(&f, 2 * 1448), f.tcp_mstamp);
    s.get(&mut g);
    assert_eq!(
        u64::from(g.cwnd),
        want.cwnd / 1448,
        "the program's window, in segments"
    );
    assert_eq!(h.agent_sockopts(), marking(1_250_000, 26 << 2, 26 >> 3));
    let recs = h.agent_records();
    assert_eq!(recs.len(), 1);
    let m = &recs[0];
    assert_eq!((m.len(), u32_at(m, 0), u32_at(m, 4)), (120, 2, sid));
    let mltcp_bpf_difftest::SlotRun::Ran(Some(rep)) = r else {
        panic!("the C rule reported: {r:?}")
    };
    let fields: Vec<u64> = (0..14).map(|i| u64_at(m, 8 + 8 * i)).collect();
    assert_eq!(fields, rep.fields().to_vec());

    // The heartbeat goes stale (the agent was killed): plain mltcp again, the pacing limit
    // lifted and the socket's own marking back, and no record.
    h.agent_set(1_000_000_000, 1_000_000_000, 2_000_000_001);
    f.cwnd = g.cwnd;
    f.ssthresh = 5;
    f.bytes_acked += 1448;
    s.set(&f);
    s.cong_avoid(Alg::Reno, 1);
    s.get(&mut g);
    assert_eq!(
        g.cwnd, f.cwnd,
        "congestion avoidance: no growth on a 1-segment ACK"
    );
    assert_eq!(h.agent_sockopts(), marking(-1, 0, 0));
    assert!(h.agent_records().is_empty());

    // Release: the CLOSE record.
    s.release(Alg::Reno);
    let recs = h.agent_records();
    assert_eq!(recs, vec![[3u32.to_ne_bytes(), sid.to_ne_bytes()].concat()]);
    plain.release(Alg::Reno);
    assert!(
        h.agent_records().is_empty(),
        "a flow never offered sends nothing"
    );
    h.agent_reset();
}

#[test]
fn an_mltcp_cubic_flow_is_offered_by_name_and_follows_the_agent() {
    let h = fresh_harness();
    let mut f = start_fields();
    let agent = agent_fields(5202);
    h.agent_set(1_000_000_000, 1_000_000_000, 1_200_000_000);
    let (mut s, c) = offered(&h, &f, &agent, Alg::Cubic);
    assert_eq!(
        u32_at(&c, 36),
        1,
        "the CREATE names mltcp_cubic (MLTCP_REC_ALG_CUBIC)"
    );
    let sid = u32_at(&c, 4);

    // The program installed: the window is the program's, not CUBIC's, and a report is sent.
    h.agent_ctl(sid, &ctl_bytes(1_250_000, 50_000, 100_000, (1, 1), 10));
    let mut want = installed_state();
    f.bytes_acked += 2 * 1448;
    f.tcp_mstamp += 100;
    want.start(f.tcp_mstamp);
    s.set(&f);
    s.cong_avoid(Alg::Cubic, 2);
    let ctl = installed_ctl();
    let a = SlotAck {
        bytes_acked: 2 * 1448,
        lost_pkts: 0,
        rtt_us: 2_000,
        rate_in: 0,
        rate_out: 0,
        now_us: f.tcp_mstamp,
        in_flight: 0,
    };
    let r = want.run(&ctl, &a, f.tcp_mstamp);
    let mut g = f;
    s.get(&mut g);
    assert_eq!(u64::from(g.cwnd), want.cwnd / 1448, "the program's window");
    assert_eq!(h.agent_sockopts(), marking(1_250_000, 10 << 2, 10 >> 3));
    let recs = h.agent_records();
    assert_eq!(recs.len(), 1);
    assert_eq!((recs[0].len(), u32_at(&recs[0], 0)), (120, 2));
    assert!(matches!(r, mltcp_bpf_difftest::SlotRun::Ran(Some(_))));

    // The heartbeat goes stale: plain mltcp_cubic again, the limit lifted, the marking back.
    h.agent_set(1_000_000_000, 1_000_000_000, 2_000_000_001);
    f.cwnd = g.cwnd;
    f.bytes_acked += 1448;
    s.set(&f);
    s.cong_avoid(Alg::Cubic, 1);
    assert_eq!(h.agent_sockopts(), marking(-1, 0, 0));
    assert!(h.agent_records().is_empty());

    s.release(Alg::Cubic);
    assert_eq!(
        h.agent_records(),
        vec![[3u32.to_ne_bytes(), sid.to_ne_bytes()].concat()]
    );
    h.agent_reset();
}
