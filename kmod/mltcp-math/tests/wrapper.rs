//! The pure part of the module's generic MLTCP wrapper (`mltcp_math::wrapper`): the per-socket
//! data of every wrapped base, and the decisions the kernel glue takes from it (when the CCP
//! datapath runs, when a flow's CCP life ends, when `get_info` answers).

use mltcp_math::mltcp::{MltcpCubicState, MltcpDctcpState, MltcpRenoState, ICSK_CA_PRIV_SIZE};
use mltcp_math::wrapper::{
    fits_icsk_ca_priv, native_runs, wants_info, MltcpState, WithCcp, CA_CWR, CA_RECOVERY,
};
use proptest::prelude::*;

/// `TCP_CA_Open`, `TCP_CA_Disorder`, `TCP_CA_Loss` (include/uapi/linux/tcp.h).
const CA_OPEN: u8 = 0;
const CA_DISORDER: u8 = 1;
const CA_LOSS: u8 = 4;

#[test]
fn every_base_fits_icsk_ca_priv() {
    assert!(fits_icsk_ca_priv::<MltcpRenoState>());
    assert!(fits_icsk_ca_priv::<MltcpCubicState>());
    assert!(fits_icsk_ca_priv::<MltcpDctcpState>());
    // mltcp_cubic uses the whole area: the layout of before the wrapper (state, then the sid).
    assert_eq!(
        std::mem::size_of::<WithCcp<MltcpCubicState>>(),
        ICSK_CA_PRIV_SIZE
    );
    assert_eq!(
        std::mem::offset_of!(WithCcp<MltcpCubicState>, ccp_sid),
        std::mem::size_of::<MltcpCubicState>()
    );
}

/// The all-zero area the kernel hands to `init` (and to `release` without `init`) is the default
/// value, with no CCP flow.
#[test]
fn all_zero_is_no_flow() {
    fn zero<S: Copy>() -> WithCcp<S> {
        // SAFETY: (test helper) every field of the MLTCP states and the sid are integers.
        unsafe { std::mem::zeroed() }
    }
    let z: WithCcp<MltcpCubicState> = zero();
    assert_eq!(z.sid(), None);
    let mut z2: WithCcp<MltcpRenoState> = zero();
    assert_eq!(z2.take_sid(), None, "release without init ends no flow");
    let d: WithCcp<MltcpDctcpState> = zero();
    assert_eq!(d.sid(), None);
    assert!(native_runs(d.sid(), |_| panic!(
        "no datapath call without a flow"
    )));
}

#[test]
fn release_ends_the_flow_exactly_once() {
    let mut d = WithCcp::new(MltcpCubicState::default(), 0x0003_0007);
    assert_eq!(d.sid(), Some(0x0003_0007));
    assert_eq!(d.take_sid(), Some(0x0003_0007));
    assert_eq!(d.take_sid(), None);
    assert_eq!(d.sid(), None);
    // After release no callback reaches the datapath.
    assert!(native_runs(d.sid(), |_| panic!("released flow invoked")));
    assert_eq!(d.ccp_runs_in_pkts_acked(CA_RECOVERY), None);
}

#[test]
fn native_growth_runs_unless_the_agent_is_in_charge() {
    let d = WithCcp::new(MltcpRenoState::default(), 9);
    let mut seen = None;
    assert!(!native_runs(d.sid(), |sid| {
        seen = Some(sid);
        true
    }));
    assert_eq!(seen, Some(9));
    assert!(
        native_runs(d.sid(), |_| false),
        "no program / no agent: native MLTCP"
    );
    let none = WithCcp::new(MltcpRenoState::default(), 0);
    assert!(native_runs(none.sid(), |_| true));
}

#[test]
fn pkts_acked_runs_the_program_only_in_window_reductions() {
    let d = WithCcp::new(MltcpDctcpState::default(), 5);
    for (state, runs) in [
        (CA_OPEN, false),
        (CA_DISORDER, false),
        (CA_CWR, true),
        (CA_RECOVERY, true),
        (CA_LOSS, false),
    ] {
        assert_eq!(
            d.ccp_runs_in_pkts_acked(state),
            runs.then_some(5),
            "state {state}"
        );
    }
}

#[test]
fn get_info_answers_info_and_vegas_requests_only() {
    const INFO: u32 = 1 << (2 - 1); // INET_DIAG_INFO
    const VEGAS: u32 = 1 << (3 - 1); // INET_DIAG_VEGASINFO
    assert!(wants_info(INFO));
    assert!(wants_info(VEGAS));
    assert!(wants_info(INFO | VEGAS | 1));
    assert!(!wants_info(0));
    assert!(!wants_info(1 | (1 << 3) | (1 << 7)));
}

/// The wrapper's iteration hooks reach each base's own iteration state.
#[test]
fn iteration_state_of_every_base() {
    fn check<S: MltcpState>() {
        let mut s = S::default();
        s.iter_mut().init(12_345);
        assert_eq!(s.iter().start_bytes_acked, 12_345);
        assert_eq!(S::default().iter().start_bytes_acked, 0);
    }
    check::<MltcpRenoState>();
    check::<MltcpCubicState>();
    check::<MltcpDctcpState>();
}

proptest! {
    /// Any sequence of the wrapper's callbacks ends at most one flow, and only the one `init`
    /// started.
    #[test]
    fn one_release_per_flow(sid in any::<u32>(), ops in proptest::collection::vec(0u8..3, 0..20)) {
        let mut d = WithCcp::new(MltcpRenoState::default(), sid);
        let mut ended = vec![];
        for op in ops {
            match op {
                0 => if let Some(s) = d.take_sid() { ended.push(s) },
                1 => {
                    let mut seen = None;
                    let _ = native_runs(d.sid(), |s| { seen = Some(s); true });
                    prop_assert!(seen.is_none() || seen == Some(sid));
                }
                _ => { let _ = d.ccp_runs_in_pkts_acked(CA_RECOVERY); }
            }
        }
        if let Some(s) = d.take_sid() { ended.push(s) }
        prop_assert_eq!(ended, if sid == 0 { vec![] } else { vec![sid] });
    }
}
