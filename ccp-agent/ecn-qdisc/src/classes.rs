// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Traffic classes on a switch port, installed over rtnetlink: the one recipe of `ccp-agent
//! switch` and of the testbed's ports (trainemu's topo.rs installs it with this module;
//! docs/testbed.md "Traffic classes on a switch port"), built without I/O ([`install_requests`]) and sent on a
//! [`QdiscChanger`]'s socket of the port's namespace ([`QdiscChanger::install_classes`]).
//!
//! Under the port's rate limiter (the tbf's class, [`ClassesSpec::parent`]):
//!
//! ```text
//! htb 30: default 20
//! └─ class 30:1   rate = ceil = 2 × port rate
//!    ├─ class 30:10 (training)  rate = port rate, ceil = 2 × port rate, quantum 1514
//!    │  └─ prio 31: bands max(N, 2)
//!    │     └─ bfifo 51:, 52:, ... under 31:1, 31:2, ...
//!    └─ class 30:20 (other)     rate = port rate, ceil = 2 × port rate, quantum 1514
//!       └─ bfifo 40:
//! u32 filters (protocol ip, prio 1) on the IP header's DS field (tos = DSCP << 2, mask 0xfc):
//!   at 30: each training DSCP → 30:10;  at 31: training class c's DSCP → 31:(c+1)
//! ```
//!
//! The two HTB children are weighted 1:1 (equal rates and quanta) and each may borrow the whole
//! port, so training and the rest share the port evenly when both have traffic; among training
//! classes, prio serves the lowest band first (class 0 highest). The tbf above shapes the port's
//! rate; the HTB's 2× rates only make sure the HTB never is the bottleneck.
//!
//! Every request carries `NLM_F_CREATE | NLM_F_EXCL` (what `tc ... add` sends): nothing existing
//! is replaced, except the HTB `30:` of an earlier installation, which
//! [`QdiscChanger::install_classes`] deletes first (with everything under it), so that a
//! restarted daemon installs the same tree again.
//!
//! The messages are those `tc` sends for the recipe's command lines (iproute2's `tc/q_htb.c`,
//! `q_prio.c`, `q_fifo.c`, `f_u32.c`; the tests pin their bytes against `tc`'s, captured with
//! `strace -e trace=sendmsg`), with two differences:
//! - an HTB class carries no rate tables (`TCA_HTB_RTAB`, `TCA_HTB_CTAB`): its rates say
//!   `linklayer ethernet`, and `htb_change_class` (`net/sched/sch_htb.c`) reads the tables only
//!   for rates whose link layer is unknown (compatibility with old `tc`);
//! - prio's priomap (which band a packet's `skb->priority` picks when no filter matches) is
//!   `tc`'s default map with every band above the last one lowered to the last: the kernel
//!   refuses a map naming a band ≥ `bands` (`prio_tune`, `net/sched/sch_prio.c`), which is what
//!   `tc qdisc add ... prio bands 2` sends. Only packets of a training DSCP reach the prio, and
//!   each has a filter, so the map is never used.

use crate::{QdiscChanger, QdiscError, TcHandle, TCA_OPTIONS};
use netlink_packet_core::{DefaultNla, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST};
use netlink_packet_route::tc::{
    TcAttribute, TcFilterU32Option, TcMessage, TcOption, TcU32Key, TcU32Selector,
    TcU32SelectorFlags,
};
use netlink_packet_route::RouteNetlinkMessage;

/// The handle `major:minor`.
const fn handle(major: u16, minor: u16) -> TcHandle {
    TcHandle { major, minor }
}

/// The HTB's handle, `30:`.
pub const HTB_HANDLE: TcHandle = handle(0x30, 0);
/// The HTB's root class, `30:1`.
pub const ROOT_CLASS: TcHandle = handle(0x30, 1);
/// The training class, `30:10`.
pub const TRAINING_CLASS: TcHandle = handle(0x30, 0x10);
/// The class of all other traffic (the HTB's default), `30:20`.
pub const OTHER_CLASS: TcHandle = handle(0x30, 0x20);
/// The bfifo of the other traffic, `40:`.
pub const OTHER_FIFO: TcHandle = handle(0x40, 0);
/// The prio among training classes, `31:`.
pub const PRIO_HANDLE: TcHandle = handle(0x31, 0);
/// The bfifo of prio band `b` (1-based) has the handle `(0x50 + b):`.
pub const BAND_FIFO_BASE: u16 = 0x50;
/// Most training classes: the DSCP map's length (`mlcc_sched::DEFAULT_DSCP`).
pub const MAX_TRAINING: usize = 8;
/// The flags of every installing request: `NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE |
/// NLM_F_EXCL` (`include/uapi/linux/netlink.h`), as `tc ... add` sends.
pub const INSTALL_FLAGS: u16 = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
/// The quantum of the two HTB children, bytes: one Ethernet frame, so they take turns packet by
/// packet (`tc ... htb ... quantum 1514`).
pub const CHILD_QUANTUM: u32 = 1514;

/// `TCA_HTB_PARMS`, `TCA_HTB_INIT`, `TCA_HTB_RATE64`, `TCA_HTB_CEIL64`
/// (`include/uapi/linux/pkt_sched.h`).
const TCA_HTB_PARMS: u16 = 1;
const TCA_HTB_INIT: u16 = 2;
const TCA_HTB_RATE64: u16 = 6;
const TCA_HTB_CEIL64: u16 = 7;
/// `TC_HTB_PROTOVER` (`include/uapi/linux/pkt_sched.h`): the version `htb_init` expects.
const TC_HTB_PROTOVER: u32 = 3;
/// `rate2quantum` of the HTB (`tc`'s default `r2q 10`): a class without a quantum gets rate / 10.
const HTB_RATE2QUANTUM: u32 = 10;
/// The HTB's default class minor, `default 20` (hexadecimal in tc: 0x20).
const HTB_DEFAULT_MINOR: u32 = 0x20;
/// `TC_LINKLAYER_ETHERNET` (`include/uapi/linux/pkt_sched.h`).
const TC_LINKLAYER_ETHERNET: u8 = 1;
/// The `cell_log` and `cell_align` `tc` puts in a rate (its rate table's cell for a 2047-byte
/// MTU, and −1); unused by the kernel for an Ethernet rate, kept so the bytes are `tc`'s.
const TC_CELL_LOG: u8 = 3;
const TC_CELL_ALIGN: i16 = -1;
/// Ticks of the packet scheduler's clock per second: a tick is 64 ns (`PSCHED_SHIFT` 6,
/// `include/net/pkt_sched.h`; `htb_change_class` takes `buffer` and `cbuffer` in ticks).
const PSCHED_TICKS_PER_SEC: u64 = 1_000_000_000 >> 6;
/// `tc`'s HTB burst: rate / HZ + MTU bytes, with HZ the 4th field of `/proc/net/psched`
/// (10⁹ on a kernel with high-resolution timers) and the default MTU of `q_htb.c`, 1600 bytes.
const TC_HZ: u64 = 1_000_000_000;
const TC_HTB_MTU: u64 = 1600;
/// `tc`'s default priomap (`q_prio.c`; `sch_generic.c`'s `sch_default_prio2band`).
const TC_DEFAULT_PRIOMAP: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
/// `ETH_P_IP` (`include/uapi/linux/if_ether.h`).
const ETH_P_IP: u16 = 0x0800;
/// The filters' priority (`tc filter ... prio 1`).
const FILTER_PRIO: u32 = 1;
/// The DS field's mask in the first 32-bit word of the IP header (network order: the 2nd
/// byte), what `match ip dsfield TOS 0xfc` puts in its `struct tc_u32_key`.
const DSFIELD_MASK: u32 = 0x00fc_0000;

/// What to install on a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassesSpec {
    /// Where the HTB goes: the port's tbf class (e.g. `10:1`), or [`TcHandle::ROOT`].
    pub parent: TcHandle,
    /// The DSCP of each training class, class 0 (the highest priority) first: 1..=8 code
    /// points, each < 64 (the agent's map is `mlcc_sched::DEFAULT_DSCP`).
    pub training_dscp: Vec<u8>,
    /// The port's rate, kbit/s (1 kbit = 1000 bit/s, as `tc`'s `kbit`): each HTB child's
    /// guaranteed rate; the root class and the ceilings get twice this.
    pub rate_kbit: u64,
    /// The limit of each bfifo, bytes (> 0).
    pub queue_bytes: u32,
}

impl ClassesSpec {
    /// A spec [`ClassesSpec::check`]ed (the fields' meanings are theirs).
    pub fn new(
        parent: TcHandle,
        training_dscp: Vec<u8>,
        rate_kbit: u64,
        queue_bytes: u32,
    ) -> Result<Self, QdiscError> {
        let s = ClassesSpec {
            parent,
            training_dscp,
            rate_kbit,
            queue_bytes,
        };
        s.check()?;
        Ok(s)
    }

    /// Refuses what the kernel would refuse or the recipe cannot express: no training class or
    /// more than [`MAX_TRAINING`], a DSCP ≥ 64 or listed twice, a rate of 0 or above 2⁶⁴ / 250
    /// kbit/s, a bfifo limit of 0, a parent that is one of the recipe's own handles.
    pub fn check(&self) -> Result<(), QdiscError> {
        let bad = |m: String| Err(QdiscError::Invalid(m));
        let n = self.training_dscp.len();
        if n == 0 || n > MAX_TRAINING {
            return bad(format!("{n} training classes: must be 1..={MAX_TRAINING}"));
        }
        for (i, d) in self.training_dscp.iter().enumerate() {
            if *d >= 64 {
                return bad(format!("DSCP {d} of training class {i}: must be < 64"));
            }
            if self.training_dscp[..i].contains(d) {
                return bad(format!("DSCP {d} of training class {i}: listed twice"));
            }
        }
        if self.rate_kbit == 0 || self.rate_kbit > u64::MAX / 250 {
            return bad(format!(
                "rate {} kbit/s: must be 1..={}",
                self.rate_kbit,
                u64::MAX / 250
            ));
        }
        if self.queue_bytes == 0 {
            return bad("queue limit 0 B: must be > 0".into());
        }
        if self.parent != TcHandle::ROOT && uses_major(self.parent.major) {
            return bad(format!(
                "parent {}: its qdisc's handle is one the classes use",
                tc_name(self.parent)
            ));
        }
        Ok(())
    }

    /// Bands of the prio: one per training class, at least 2 (prio's minimum,
    /// `TCQ_MIN_PRIO_BANDS`).
    pub fn bands(&self) -> u8 {
        (self.training_dscp.len() as u8).max(2)
    }
}

/// Whether the classes use qdisc handle major `major` (`30:`, `31:`, `40:`, `51:`..`58:`): the
/// qdisc above them (their parent's) must have another.
pub fn uses_major(major: u16) -> bool {
    [HTB_HANDLE.major, PRIO_HANDLE.major, OTHER_FIFO.major].contains(&major)
        || (BAND_FIFO_BASE + 1..=BAND_FIFO_BASE + MAX_TRAINING as u16).contains(&major)
}

/// One request of an installation: what it does, in `tc`'s words, and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassRequest {
    /// "RTM_NEWQDISC htb 30: parent 10:1 default 20", ...: names the request in logs and
    /// errors.
    pub what: String,
    /// The message (sent with [`INSTALL_FLAGS`], a deletion with `NLM_F_REQUEST | NLM_F_ACK`).
    pub msg: RouteNetlinkMessage,
}

/// What [`QdiscChanger::install_classes`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassesInstalled {
    /// The device's index.
    pub ifindex: i32,
    /// Whether an HTB `30:` (an earlier installation) was deleted first, and where it was.
    pub replaced: Option<TcHandle>,
    /// The requests the kernel took, in order ([`ClassRequest::what`]).
    pub requests: Vec<String>,
}

/// A handle in `tc`'s notation: hexadecimal `MAJ:MIN`, `MAJ:` when the minor is 0, `root`.
pub fn tc_name(h: TcHandle) -> String {
    if h == TcHandle::ROOT {
        "root".into()
    } else if h.minor == 0 {
        format!("{:x}:", h.major)
    } else {
        format!("{:x}:{:x}", h.major, h.minor)
    }
}

/// `struct tc_ratespec` (`include/uapi/linux/pkt_sched.h`, 12 bytes, native order) for
/// `rate_bytes_per_s`: cell_log, linklayer (Ethernet), overhead 0, cell_align, mpu 0, rate
/// (bytes/s; `u32::MAX` when it does not fit, the real rate then going in `TCA_HTB_RATE64` /
/// `TCA_HTB_CEIL64`).
pub fn rate_spec(rate_bytes_per_s: u64) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[0] = TC_CELL_LOG;
    b[1] = TC_LINKLAYER_ETHERNET;
    b[4..6].copy_from_slice(&TC_CELL_ALIGN.to_ne_bytes());
    let rate = u32::try_from(rate_bytes_per_s).unwrap_or(u32::MAX);
    b[8..12].copy_from_slice(&rate.to_ne_bytes());
    b
}

/// `struct tc_htb_glob` (`include/uapi/linux/pkt_sched.h`, 20 bytes), the payload of
/// `TCA_HTB_INIT`: version [`TC_HTB_PROTOVER`] (3), rate2quantum 10, the default class's minor
/// `defcls`, debug 0, direct_pkts 0.
pub fn htb_glob(defcls: u32) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[0..4].copy_from_slice(&TC_HTB_PROTOVER.to_ne_bytes());
    b[4..8].copy_from_slice(&HTB_RATE2QUANTUM.to_ne_bytes());
    b[8..12].copy_from_slice(&defcls.to_ne_bytes());
    b
}

/// An HTB class's burst at `rate_bytes_per_s`, in scheduler ticks of 64 ns: the time to send
/// `tc`'s default burst (rate / HZ + 1600 bytes, `q_htb.c`) at that rate, as `tc` computes it
/// (truncated). At least 1 B/s.
pub fn htb_buffer_ticks(rate_bytes_per_s: u64) -> u32 {
    let rate = rate_bytes_per_s.max(1);
    let burst = rate / TC_HZ + TC_HTB_MTU;
    let ticks = u128::from(burst) * u128::from(PSCHED_TICKS_PER_SEC) / u128::from(rate);
    u32::try_from(ticks).unwrap_or(u32::MAX)
}

/// `struct tc_htb_opt` (`include/uapi/linux/pkt_sched.h`, 44 bytes), the payload of
/// `TCA_HTB_PARMS`: rate and ceil ([`rate_spec`], bytes/s), buffer and cbuffer
/// ([`htb_buffer_ticks`]), `quantum` (bytes; 0: the kernel takes rate / rate2quantum), level 0,
/// prio 0.
pub fn htb_opt(rate_bytes_per_s: u64, ceil_bytes_per_s: u64, quantum: u32) -> [u8; 44] {
    let mut b = [0u8; 44];
    b[0..12].copy_from_slice(&rate_spec(rate_bytes_per_s));
    b[12..24].copy_from_slice(&rate_spec(ceil_bytes_per_s));
    b[24..28].copy_from_slice(&htb_buffer_ticks(rate_bytes_per_s).to_ne_bytes());
    b[28..32].copy_from_slice(&htb_buffer_ticks(ceil_bytes_per_s).to_ne_bytes());
    b[32..36].copy_from_slice(&quantum.to_ne_bytes());
    b
}

/// The nested `TCA_OPTIONS` of an HTB class (`htb_change_class`, `net/sched/sch_htb.c`):
/// `TCA_HTB_RATE64` / `TCA_HTB_CEIL64` (u64 bytes/s) for a rate of 2³² B/s or more, then
/// `TCA_HTB_PARMS` ([`htb_opt`]); `tc`'s order.
pub fn htb_class_options(
    rate_bytes_per_s: u64,
    ceil_bytes_per_s: u64,
    quantum: u32,
) -> Vec<TcOption> {
    let mut v = Vec::new();
    for (kind, r) in [
        (TCA_HTB_RATE64, rate_bytes_per_s),
        (TCA_HTB_CEIL64, ceil_bytes_per_s),
    ] {
        if r > u64::from(u32::MAX) {
            v.push(TcOption::Other(DefaultNla::new(
                kind,
                r.to_ne_bytes().to_vec(),
            )));
        }
    }
    v.push(TcOption::Other(DefaultNla::new(
        TCA_HTB_PARMS,
        htb_opt(rate_bytes_per_s, ceil_bytes_per_s, quantum).to_vec(),
    )));
    v
}

/// `struct tc_prio_qopt` (`include/uapi/linux/pkt_sched.h`, 20 bytes): `bands` (int) and the
/// priomap, `tc`'s default with every band ≥ `bands` lowered to the last band (see the module
/// docs).
pub fn prio_qopt(bands: u8) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[0..4].copy_from_slice(&i32::from(bands).to_ne_bytes());
    let last = bands.saturating_sub(1);
    for (i, band) in TC_DEFAULT_PRIOMAP.iter().enumerate() {
        b[4 + i] = (*band).min(last);
    }
    b
}

/// prio's `TCA_OPTIONS` payload as `tc` sends it: [`prio_qopt`], then an empty nested
/// `TCA_OPTIONS` attribute (`addattr_nest_compat`, where `TCA_PRIO_MQ` would go).
pub fn prio_options(bands: u8) -> Vec<u8> {
    let mut v = prio_qopt(bands).to_vec();
    v.extend_from_slice(&4u16.to_ne_bytes());
    v.extend_from_slice(&TCA_OPTIONS.to_ne_bytes());
    v
}

/// `struct tc_fifo_qopt` (`include/uapi/linux/pkt_sched.h`): a bfifo's limit, bytes.
pub fn fifo_qopt(limit_bytes: u32) -> [u8; 4] {
    limit_bytes.to_ne_bytes()
}

/// The `TCA_OPTIONS` of a u32 filter sending IPv4 packets whose DS field is `tos` (DSCP << 2;
/// the ECN bits are masked off) to `flowid`: `TCA_U32_CLASSID`, then `TCA_U32_SEL` (`struct
/// tc_u32_sel`, terminal, one `struct tc_u32_key`: mask 0x00fc0000, value tos << 16, offset 0,
/// the first 32-bit word of the IP header), what `tc filter ... u32 match ip dsfield TOS 0xfc
/// flowid F` sends (`f_u32.c`; `net/sched/cls_u32.c`).
pub fn dsfield_filter_options(tos: u8, flowid: TcHandle) -> Vec<TcOption> {
    let mut key = TcU32Key::default();
    key.mask = DSFIELD_MASK;
    key.val = (u32::from(tos) << 16) & DSFIELD_MASK;
    let mut sel = TcU32Selector::default();
    sel.flags = TcU32SelectorFlags::Terminal;
    sel.nkeys = 1;
    sel.keys = vec![key];
    vec![
        TcOption::U32(TcFilterU32Option::ClassId(flowid)),
        TcOption::U32(TcFilterU32Option::Selector(sel)),
    ]
}

/// A `struct tcmsg` (`include/uapi/linux/rtnetlink.h`) on `ifindex` with `handle`, `parent`,
/// `info`, kind `kind` and `options`.
fn tc_message(
    ifindex: i32,
    handle: TcHandle,
    parent: TcHandle,
    info: u32,
    kind: &str,
    options: TcAttribute,
) -> TcMessage {
    let mut m = TcMessage::with_index(ifindex);
    m.header.handle = handle;
    m.header.parent = parent;
    m.header.info = info;
    m.attributes.push(TcAttribute::Kind(kind.into()));
    m.attributes.push(options);
    m
}

/// Raw `TCA_OPTIONS` (a struct, not nested attributes).
fn raw_options(payload: Vec<u8>) -> TcAttribute {
    TcAttribute::Other(DefaultNla::new(TCA_OPTIONS, payload))
}

fn new_qdisc(
    ifindex: i32,
    handle: TcHandle,
    parent: TcHandle,
    kind: &str,
    options: TcAttribute,
    detail: &str,
) -> ClassRequest {
    ClassRequest {
        what: format!(
            "RTM_NEWQDISC {kind} {} parent {}{detail}",
            tc_name(handle),
            tc_name(parent)
        ),
        msg: RouteNetlinkMessage::NewQueueDiscipline(tc_message(
            ifindex, handle, parent, 0, kind, options,
        )),
    }
}

fn bfifo(ifindex: i32, handle: TcHandle, parent: TcHandle, limit: u32) -> ClassRequest {
    new_qdisc(
        ifindex,
        handle,
        parent,
        "bfifo",
        raw_options(fifo_qopt(limit).to_vec()),
        &format!(" limit {limit}"),
    )
}

fn htb_class(
    ifindex: i32,
    classid: TcHandle,
    parent: TcHandle,
    rate: u64,
    ceil: u64,
    quantum: u32,
) -> ClassRequest {
    let q = if quantum > 0 {
        format!(" quantum {quantum}")
    } else {
        String::new()
    };
    ClassRequest {
        what: format!(
            "RTM_NEWTCLASS htb {} parent {} rate {rate}B/s ceil {ceil}B/s{q}",
            tc_name(classid),
            tc_name(parent)
        ),
        msg: RouteNetlinkMessage::NewTrafficClass(tc_message(
            ifindex,
            classid,
            parent,
            0,
            "htb",
            TcAttribute::Options(htb_class_options(rate, ceil, quantum)),
        )),
    }
}

fn dsfield_filter(ifindex: i32, at: TcHandle, tos: u8, flowid: TcHandle) -> ClassRequest {
    // TC_H_MAKE(prio << 16, htons(ETH_P_IP)): the protocol in network order in the low half.
    let info = (FILTER_PRIO << 16) | u32::from(ETH_P_IP.to_be());
    ClassRequest {
        what: format!(
            "RTM_NEWTFILTER u32 parent {} protocol ip prio {FILTER_PRIO} dsfield 0x{tos:02x}/0xfc flowid {}",
            tc_name(at),
            tc_name(flowid)
        ),
        msg: RouteNetlinkMessage::NewTrafficFilter(tc_message(
            ifindex,
            TcHandle::UNSPEC,
            at,
            info,
            "u32",
            TcAttribute::Options(dsfield_filter_options(tos, flowid)),
        )),
    }
}

/// The requests that install `spec` on device `ifindex`, in order (each needs the ones before
/// it): the HTB, its three classes, the other traffic's bfifo, the filters at `30:` (one per
/// training class, in class order), the prio and its bands' bfifos, then the filters at `31:`.
/// Errors: `spec` fails [`ClassesSpec::check`].
pub fn install_requests(ifindex: i32, spec: &ClassesSpec) -> Result<Vec<ClassRequest>, QdiscError> {
    spec.check()?;
    let port = spec.rate_kbit * 125;
    let both = 2 * port;
    let mut v = vec![
        new_qdisc(
            ifindex,
            HTB_HANDLE,
            spec.parent,
            "htb",
            TcAttribute::Options(vec![TcOption::Other(DefaultNla::new(
                TCA_HTB_INIT,
                htb_glob(HTB_DEFAULT_MINOR).to_vec(),
            ))]),
            &format!(" default {HTB_DEFAULT_MINOR:x}"),
        ),
        htb_class(ifindex, ROOT_CLASS, HTB_HANDLE, both, both, 0),
        htb_class(
            ifindex,
            TRAINING_CLASS,
            ROOT_CLASS,
            port,
            both,
            CHILD_QUANTUM,
        ),
        htb_class(ifindex, OTHER_CLASS, ROOT_CLASS, port, both, CHILD_QUANTUM),
        bfifo(ifindex, OTHER_FIFO, OTHER_CLASS, spec.queue_bytes),
    ];
    for dscp in &spec.training_dscp {
        v.push(dsfield_filter(
            ifindex,
            HTB_HANDLE,
            dscp << 2,
            TRAINING_CLASS,
        ));
    }
    let bands = spec.bands();
    v.push(new_qdisc(
        ifindex,
        PRIO_HANDLE,
        TRAINING_CLASS,
        "prio",
        raw_options(prio_options(bands)),
        &format!(" bands {bands}"),
    ));
    for band in 1..=u16::from(bands) {
        let fifo = handle(BAND_FIFO_BASE + band, 0);
        let parent = handle(PRIO_HANDLE.major, band);
        v.push(bfifo(ifindex, fifo, parent, spec.queue_bytes));
    }
    for (class, dscp) in spec.training_dscp.iter().enumerate() {
        let band = handle(PRIO_HANDLE.major, class as u16 + 1);
        v.push(dsfield_filter(ifindex, PRIO_HANDLE, dscp << 2, band));
    }
    Ok(v)
}

/// The request deleting the qdisc `handle` under `parent` of device `ifindex` (with its classes,
/// filters and children), sent with `NLM_F_REQUEST | NLM_F_ACK`.
pub fn delete_request(
    ifindex: i32,
    handle: TcHandle,
    parent: TcHandle,
    kind: &str,
) -> ClassRequest {
    let mut m = TcMessage::with_index(ifindex);
    m.header.handle = handle;
    m.header.parent = parent;
    ClassRequest {
        what: format!(
            "RTM_DELQDISC {kind} {} parent {}",
            tc_name(handle),
            tc_name(parent)
        ),
        msg: RouteNetlinkMessage::DelQueueDiscipline(m),
    }
}

impl QdiscChanger {
    /// Installs the traffic classes `spec` on device `dev` of `netns` (`None`: the caller's
    /// namespace), on the namespace's socket: looks the device up, deletes an HTB `30:` left by
    /// an earlier installation (a qdisc of another kind with that handle is an error: nothing
    /// else is replaced), then sends [`install_requests`] one by one, each waiting for the
    /// kernel's ACK. Errors name the device, the namespace, the request that failed and the
    /// kernel's errno; the requests taken before a failure stay installed.
    pub fn install_classes(
        &mut self,
        netns: &Option<String>,
        dev: &str,
        spec: &ClassesSpec,
    ) -> Result<ClassesInstalled, QdiscError> {
        let place = match netns {
            Some(ns) => format!("dev {dev} in netns {ns}"),
            None => format!("dev {dev}"),
        };
        let r = self.try_install_classes(netns, dev, spec);
        if matches!(r, Err(QdiscError::Io { .. }) | Err(QdiscError::Protocol(_))) {
            self.sockets.remove(netns);
        }
        r.map_err(|e| e.within(&place))
    }

    fn try_install_classes(
        &mut self,
        netns: &Option<String>,
        dev: &str,
        spec: &ClassesSpec,
    ) -> Result<ClassesInstalled, QdiscError> {
        spec.check()?;
        let rt = self.socket(netns)?;
        let ifindex = rt.ifindex(dev)?;
        let mut done = Vec::new();
        let existing = rt
            .dump_qdiscs()?
            .into_iter()
            .find(|q| q.ifindex == ifindex && q.handle == HTB_HANDLE);
        let replaced = match existing {
            Some(q) if q.kind != "htb" => {
                return Err(QdiscError::Invalid(format!(
                    "handle {} is a {} qdisc (parent {}), not the classes' HTB: not replacing it",
                    tc_name(HTB_HANDLE),
                    q.kind,
                    tc_name(q.parent)
                )));
            }
            Some(q) => {
                let del = delete_request(ifindex, q.handle, q.parent, &q.kind);
                rt.request(del.msg, NLM_F_REQUEST | NLM_F_ACK, &del.what)?;
                done.push(del.what);
                Some(q.parent)
            }
            None => None,
        };
        for r in install_requests(ifindex, spec)? {
            rt.request(r.msg, INSTALL_FLAGS, &r.what)?;
            done.push(r.what);
        }
        Ok(ClassesInstalled {
            ifindex,
            replaced,
            requests: done,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire;

    /// Hex digits (whitespace ignored) as bytes.
    fn hex(s: &str) -> Vec<u8> {
        let d: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        d.chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    /// The spec of the testbed's unit test (`classes_under_the_tbf_...` in
    /// ci/trainemu/src/topo.rs): under 10:1, two training classes, 100 Mbit/s, 126500 B.
    fn spec() -> ClassesSpec {
        ClassesSpec::new(handle(0x10, 1), vec![34, 26], 100_000, 126_500).unwrap()
    }

    const SEQ: u32 = 0x6b0a_8be0;
    const IFINDEX: i32 = 2;

    /// The bytes of `r` as the socket sends it (sequence [`SEQ`]).
    fn bytes(r: &ClassRequest) -> Vec<u8> {
        wire(r.msg.clone(), INSTALL_FLAGS, SEQ)
    }

    /// An nlmsghdr of `len` bytes of `rtm_type` with [`INSTALL_FLAGS`] and [`SEQ`], then a
    /// tcmsg on [`IFINDEX`]: the hex of `tc`'s messages below start with this (their sequence
    /// number and ifindex replaced by ours).
    fn head(len: u32, rtm_type: u16, handle: u32, parent: u32, info: u32) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&len.to_ne_bytes());
        v.extend_from_slice(&rtm_type.to_ne_bytes());
        v.extend_from_slice(&INSTALL_FLAGS.to_ne_bytes());
        v.extend_from_slice(&SEQ.to_ne_bytes());
        v.extend_from_slice(&0u32.to_ne_bytes());
        v.extend_from_slice(&[0, 0, 0, 0]);
        v.extend_from_slice(&IFINDEX.to_ne_bytes());
        for x in [handle, parent, info] {
            v.extend_from_slice(&x.to_ne_bytes());
        }
        v
    }

    const RTM_NEWQDISC: u16 = 36;
    const RTM_NEWTCLASS: u16 = 40;
    const RTM_NEWTFILTER: u16 = 44;

    #[test]
    fn the_requests_follow_the_testbed_recipe() {
        let r = install_requests(IFINDEX, &spec()).unwrap();
        let what: Vec<&str> = r.iter().map(|r| r.what.as_str()).collect();
        assert_eq!(
            what,
            [
                "RTM_NEWQDISC htb 30: parent 10:1 default 20",
                "RTM_NEWTCLASS htb 30:1 parent 30: rate 25000000B/s ceil 25000000B/s",
                "RTM_NEWTCLASS htb 30:10 parent 30:1 rate 12500000B/s ceil 25000000B/s quantum 1514",
                "RTM_NEWTCLASS htb 30:20 parent 30:1 rate 12500000B/s ceil 25000000B/s quantum 1514",
                "RTM_NEWQDISC bfifo 40: parent 30:20 limit 126500",
                "RTM_NEWTFILTER u32 parent 30: protocol ip prio 1 dsfield 0x88/0xfc flowid 30:10",
                "RTM_NEWTFILTER u32 parent 30: protocol ip prio 1 dsfield 0x68/0xfc flowid 30:10",
                "RTM_NEWQDISC prio 31: parent 30:10 bands 2",
                "RTM_NEWQDISC bfifo 51: parent 31:1 limit 126500",
                "RTM_NEWQDISC bfifo 52: parent 31:2 limit 126500",
                "RTM_NEWTFILTER u32 parent 31: protocol ip prio 1 dsfield 0x88/0xfc flowid 31:1",
                "RTM_NEWTFILTER u32 parent 31: protocol ip prio 1 dsfield 0x68/0xfc flowid 31:2",
            ]
        );
        // Eight classes: eight bands, the last DSCP (CS1, 0x20) to band 8.
        let mut s = spec();
        s.training_dscp = vec![34, 26, 18, 10, 32, 24, 16, 8];
        let r = install_requests(IFINDEX, &s).unwrap();
        assert_eq!(r.len(), 5 + 1 + 8 + 16);
        assert!(r
            .iter()
            .any(|r| r.what.ends_with("prio 31: parent 30:10 bands 8")));
        assert!(r
            .last()
            .unwrap()
            .what
            .ends_with("dsfield 0x20/0xfc flowid 31:8"));
        assert!(r
            .iter()
            .any(|r| r.what == "RTM_NEWQDISC bfifo 58: parent 31:8 limit 126500"));
    }

    // The expected bytes below are `tc`'s (iproute2 6.x on Linux 6.18, `strace -e
    // trace=sendmsg -x` of the testbed's command lines on a veth whose tbf is 10:), after the
    // header built by `head`.

    #[test]
    fn the_htb_qdisc_is_what_tc_sends() {
        // tc qdisc add dev D parent 10:1 handle 30: htb default 20
        let r = &install_requests(IFINDEX, &spec()).unwrap()[0];
        let mut want = head(72, RTM_NEWQDISC, 0x0030_0000, 0x0010_0001, 0);
        want.extend(hex(
            "08000100 68746200  1c000200 18000200 03000000 0a000000 20000000 00000000 00000000",
        ));
        assert_eq!(bytes(r), want);
    }

    #[test]
    fn htb_classes_are_what_tc_sends_without_the_rate_tables() {
        let r = install_requests(IFINDEX, &spec()).unwrap();
        // tc class add dev D parent 30: classid 30:1 htb rate 200000kbit ceil 200000kbit:
        // rate = ceil = 25e6 B/s (0x017d7840), buffer = cbuffer = 1000 ticks (1600 B at 25e6
        // B/s = 64 µs), quantum 0. tc's TCA_OPTIONS goes on with TCA_HTB_RTAB and _CTAB.
        let mut want = head(16 + 20 + 8 + 52, RTM_NEWTCLASS, 0x0030_0001, 0x0030_0000, 0);
        want.extend(hex("08000100 68746200  34000200 30000100
             03010000 ffff0000 40787d01  03010000 ffff0000 40787d01
             e8030000 e8030000 00000000 00000000 00000000"));
        assert_eq!(bytes(&r[1]), want);
        // tc class add dev D parent 30:1 classid 30:10 htb rate 100000kbit ceil 200000kbit
        // quantum 1514: rate 12.5e6 B/s (0x00bebc20), buffer 2000 ticks, quantum 0x5ea.
        let mut want = head(16 + 20 + 8 + 52, RTM_NEWTCLASS, 0x0030_0010, 0x0030_0001, 0);
        want.extend(hex("08000100 68746200  34000200 30000100
             03010000 ffff0000 20bcbe00  03010000 ffff0000 40787d01
             d0070000 e8030000 ea050000 00000000 00000000"));
        assert_eq!(bytes(&r[2]), want);
        assert_eq!(bytes(&r[3])[24..28], 0x0030_0020u32.to_ne_bytes());
    }

    #[test]
    fn rates_of_four_gigabytes_a_second_and_more_go_in_rate64() {
        // 40 Gbit/s = 5e9 B/s does not fit struct tc_ratespec's u32.
        let o = htb_class_options(5_000_000_000, 10_000_000_000, CHILD_QUANTUM);
        let kinds: Vec<u16> = o.iter().map(netlink_packet_core::Nla::kind).collect();
        assert_eq!(kinds, [TCA_HTB_RATE64, TCA_HTB_CEIL64, TCA_HTB_PARMS]);
        let parms = htb_opt(5_000_000_000, 10_000_000_000, CHILD_QUANTUM);
        assert_eq!(parms[8..12], u32::MAX.to_ne_bytes());
        assert_eq!(parms[20..24], u32::MAX.to_ne_bytes());
        // rate / HZ = 5 more bytes of burst: 1605 B at 5e9 B/s = 321 ns = 5 ticks.
        assert_eq!(htb_buffer_ticks(5_000_000_000), 5);
        assert_eq!(htb_class_options(25_000_000, 25_000_000, 0).len(), 1);
    }

    #[test]
    fn fifos_are_what_tc_sends() {
        // tc qdisc add dev D parent 30:20 handle 40: bfifo limit 126500
        let r = &install_requests(IFINDEX, &spec()).unwrap()[4];
        let mut want = head(56, RTM_NEWQDISC, 0x0040_0000, 0x0030_0020, 0);
        want.extend(hex("0a000100 62666966 6f000000  08000200 24ee0100"));
        assert_eq!(bytes(r), want);
    }

    #[test]
    fn prio_is_what_tc_sends_with_a_priomap_the_kernel_takes() {
        // tc qdisc add dev D parent 30:10 handle 31: prio bands 3 (tc's default priomap).
        let mut s = spec();
        s.training_dscp = vec![34, 26, 18];
        let r = &install_requests(IFINDEX, &s).unwrap()[8];
        let mut want = head(76, RTM_NEWQDISC, 0x0031_0000, 0x0030_0010, 0);
        want.extend(hex("09000100 7072696f 00000000  1c000200 03000000
             01020202 01020000 01010101 01010101  04000200"));
        assert_eq!(bytes(r), want);
        // bands 2: tc sends the same map (bands 2 in it), which prio_tune refuses; band 2 of
        // the map becomes band 1.
        let r = &install_requests(IFINDEX, &spec()).unwrap()[7];
        let mut want = head(76, RTM_NEWQDISC, 0x0031_0000, 0x0030_0010, 0);
        want.extend(hex("09000100 7072696f 00000000  1c000200 02000000
             01010101 01010000 01010101 01010101  04000200"));
        assert_eq!(bytes(r), want);
        for bands in 2..=8u8 {
            let q = prio_qopt(bands);
            assert!(q[4..].iter().all(|b| *b < bands), "{bands}: {q:?}");
        }
    }

    #[test]
    fn dsfield_filters_are_what_tc_sends() {
        // tc filter add dev D parent 30: protocol ip prio 1 u32 match ip dsfield 0x88 0xfc
        // flowid 30:10 (tcm_info: prio 1, htons(ETH_P_IP)).
        let r = install_requests(IFINDEX, &spec()).unwrap();
        let info = (1 << 16) | u32::from(0x0800u16.to_be());
        let mut want = head(92, RTM_NEWTFILTER, 0, 0x0030_0000, info);
        want.extend(hex("08000100 75333200  30000200 08000100 10003000
             24000500 01000100 00000000 00000000 00000000
             00fc0000 00880000 00000000 00000000"));
        assert_eq!(bytes(&r[5]), want);
        // The same code point at 31: to band 1; AF31 (0x68) to band 2.
        assert_eq!(bytes(&r[6])[80..84], [0, 0x68, 0, 0]);
        assert_eq!(bytes(&r[10])[24..32], [0, 0, 0, 0, 0, 0, 0x31, 0]);
        assert_eq!(bytes(&r[10])[52..56], 0x0031_0001u32.to_ne_bytes());
        assert_eq!(bytes(&r[11])[52..56], 0x0031_0002u32.to_ne_bytes());
        assert_eq!(bytes(&r[11])[80..84], [0, 0x68, 0, 0]);
    }

    #[test]
    fn deleting_the_htb_names_it_by_handle_and_parent() {
        let r = delete_request(IFINDEX, HTB_HANDLE, spec().parent, "htb");
        assert_eq!(r.what, "RTM_DELQDISC htb 30: parent 10:1");
        let b = wire(r.msg, NLM_F_REQUEST | NLM_F_ACK, SEQ);
        assert_eq!(b.len(), 36);
        assert_eq!(b[4..6], 37u16.to_ne_bytes()); // RTM_DELQDISC
        assert_eq!(b[24..28], 0x0030_0000u32.to_ne_bytes());
        assert_eq!(b[28..32], 0x0010_0001u32.to_ne_bytes());
    }

    #[test]
    fn specs_the_kernel_would_refuse_are_refused_naming_the_value() {
        type Change = fn(&mut ClassesSpec);
        let cases: [(Change, &str); 7] = [
            (|s| s.training_dscp.clear(), "0 training classes"),
            (|s| s.training_dscp = vec![1; 9], "9 training classes"),
            (
                |s| s.training_dscp = vec![64],
                "DSCP 64 of training class 0",
            ),
            (
                |s| s.training_dscp = vec![34, 34],
                "DSCP 34 of training class 1: listed twice",
            ),
            (|s| s.rate_kbit = 0, "rate 0 kbit/s"),
            (|s| s.queue_bytes = 0, "queue limit 0 B"),
            (|s| s.parent = handle(0x31, 1), "parent 31:1"),
        ];
        for (change, msg) in cases {
            let mut s = spec();
            change(&mut s);
            let e = install_requests(IFINDEX, &s).unwrap_err().to_string();
            assert!(e.contains(msg), "{e} lacks {msg:?}");
        }
        let mut s = spec();
        s.parent = TcHandle::ROOT;
        assert!(install_requests(IFINDEX, &s).is_ok());
        assert_eq!(tc_name(TcHandle::ROOT), "root");
    }

    #[test]
    fn a_missing_device_is_an_error_naming_it() {
        let mut c = QdiscChanger::new(std::time::Duration::from_secs(1));
        let e = c
            .install_classes(&None, "nodev-cls0", &spec())
            .unwrap_err()
            .to_string();
        assert!(e.contains("dev nodev-cls0"), "{e}");
    }
}
