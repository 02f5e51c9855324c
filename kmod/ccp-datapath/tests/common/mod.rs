//! Helpers shared by the integration tests: a user-space `DatapathOps`, and portus-compiled
//! programs turned into INSTALL / CHANGE_PROG / UPDATE_FIELDS bytes with portus's own serialiser.
#![allow(dead_code)]

pub mod arb;
pub mod per_ack;

use ccp_datapath::{DatapathOps, SendError};
use portus::lang::{Bin, Reg, Scope};
use portus::serialize;

/// A call of one of the actuators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    Cwnd(u64),
    Rate(u64),
    /// `set_class` (this project's SET_CLASS; libccp has no such callback).
    Class(Option<u8>),
}

/// User-space host: manual clock, sent messages and actuator calls recorded.
#[derive(Default)]
pub struct MockOps {
    pub now: u64,
    pub sent: Vec<Vec<u8>>,
    pub acts: Vec<Act>,
    pub fail_send: bool,
}

impl DatapathOps for MockOps {
    fn now_us(&self) -> u64 {
        self.now
    }
    fn send_msg(&mut self, msg: &[u8]) -> Result<(), SendError> {
        if self.fail_send {
            return Err(SendError);
        }
        self.sent.push(msg.to_vec());
        Ok(())
    }
    fn set_cwnd(&mut self, bytes: u64) {
        self.acts.push(Act::Cwnd(bytes));
    }
    fn set_rate_abs(&mut self, bytes_per_sec: u64) {
        self.acts.push(Act::Rate(bytes_per_sec));
    }
    fn set_class(&mut self, dscp: Option<u8>) {
        self.acts.push(Act::Class(dscp));
    }
}

/// Compiles a program with portus and serialises its INSTALL with portus (sid 0, as portus does).
pub fn compile_install(src: &str) -> (Vec<u8>, Scope, Bin) {
    let (bin, sc) =
        portus::lang::compile(src.as_bytes(), &[]).expect("portus compiles the program");
    let msg = serialize::install::Msg {
        sid: 0,
        program_uid: sc.program_uid,
        num_events: bin.events.len() as u32,
        num_instrs: bin.instrs.len() as u32,
        instrs: bin.clone(),
    };
    (
        serialize::serialize(&msg).expect("portus serialises INSTALL"),
        sc,
        bin,
    )
}

/// Register of a named variable for UPDATE_FIELDS/CHANGE_PROG (as portus's `Datapath` builds it).
pub fn reg_of(sc: &Scope, name: &str) -> Reg {
    sc.get(name)
        .unwrap_or_else(|| panic!("{name} in scope"))
        .clone()
}

/// CHANGE_PROG bytes serialised by portus.
pub fn change_prog(sid: u32, uid: u32, fields: Vec<(Reg, u64)>) -> Vec<u8> {
    let m = serialize::changeprog::Msg {
        sid,
        program_uid: uid,
        num_fields: fields.len() as u32,
        fields,
    };
    serialize::serialize(&m).expect("portus serialises CHANGE_PROG")
}

/// UPDATE_FIELDS bytes serialised by portus.
pub fn update_fields(sid: u32, fields: Vec<(Reg, u64)>) -> Vec<u8> {
    let m = serialize::update_field::Msg {
        sid,
        num_fields: fields.len() as u8,
        fields,
    };
    serialize::serialize(&m).expect("portus serialises UPDATE_FIELDS")
}

/// Whether a serialised INSTALL uses a temporary register that libccp does not have (>= 8).
pub fn uses_tmp_beyond_libccp(install: &[u8]) -> bool {
    let (msg, _) = ccp_datapath::wire::parse(install).expect("parse INSTALL");
    let ccp_datapath::wire::Msg::Install(i) = msg else {
        panic!("not INSTALL")
    };
    i.instrs().any(|ins| {
        [ins.ret, ins.left, ins.right]
            .iter()
            .any(|r| r.typ == 7 && r.val >= 8)
    })
}

/// Whether portus compiled an operand it cannot serialise: `(:= Cwnd|Rate|Micros (ewma ..|if ..|!if ..))`
/// gives a `Reg::None` and `Bin::serialize` reaches `unreachable!()` (a portus 0.9 bug).
pub fn has_reg_none(bin: &Bin) -> bool {
    bin.instrs.iter().any(|i| {
        [&i.res, &i.left, &i.right]
            .iter()
            .any(|r| matches!(r, Reg::None))
    })
}
