// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Changing the ECN marking threshold of a qdisc over rtnetlink (`RTM_NEWQDISC`, what `tc qdisc
//! change` sends), in the initial or another network namespace.
//!
//! PCN ("Proactive Congestion Avoidance for Distributed Deep Learning", Sec. 3.2) lowers a
//! switch port's marking threshold one RTT before a burst and restores it when the burst
//! arrives, so a change must take far less than an RTT. Spawning `ip netns exec NS tc ...` per
//! change took over a second in the testbed's VM under emulation (every change of the first
//! PCN run was killed at its 1 s timeout); a request on an open netlink socket takes well under a
//! millisecond. [`QdiscChanger`] keeps one `NETLINK_ROUTE` socket per namespace, opened inside it
//! (a socket belongs to the namespace it was created in, so a short-lived thread enters the
//! namespace with `setns(2)`, opens it and hands it back).
//!
//! Two marking qdiscs:
//! - **fq_codel** marks packets whose sojourn time exceeds `ce_threshold`
//!   (`TCA_FQ_CODEL_CE_THRESHOLD`, µs; `net/sched/sch_fq_codel.c`): the change carries only that
//!   attribute, so every other parameter and the queued packets stay;
//! - **RED** in ECN mode with max_P = 1 (`probability 1.0 ecn`) marks every packet once the
//!   average queue passes `qth_min` (step marking, as DCTCP wants from a switch). The kernel
//!   takes RED's parameters only as a whole (`TCA_RED_PARMS` and `TCA_RED_STAB` are mandatory in
//!   `__red_change`), so the change reads the current parameters back (a dump), keeps the
//!   weight, flags and max_P, sets the two thresholds and recomputes the idle-damping table
//!   ([`red::idle_damping`]). It sends a limit of 0, which keeps the child fifo: a limit > 0
//!   makes the kernel replace the child and purge its packets (so `tc qdisc change ... red
//!   limit L ...` drops the whole queue at every change; this does not).
//!
//! Errors name the device, namespace and step that failed; nothing here panics on a kernel
//! answer it does not expect.

pub mod classes;
pub mod red;

/// tc handles (`MAJ:MIN`) as the dumps give them.
pub use netlink_packet_route::tc::TcHandle;

use netlink_packet_core::{
    DefaultNla, NetlinkHeader, NetlinkMessage, NetlinkPayload, Nla as _, NlasIterator, NLM_F_ACK,
    NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::tc::{
    TcAttribute, TcFqCodelXstats, TcMessage, TcOption, TcQdiscFqCodelOption, TcStats2, TcXstats,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use red::{RedQopt, RED_STAB_SIZE};
use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// `TCA_OPTIONS` (`include/uapi/linux/rtnetlink.h`).
const TCA_OPTIONS: u16 = 2;
/// `TCA_RED_PARMS`, `TCA_RED_STAB`, `TCA_RED_MAX_P` (`include/uapi/linux/pkt_sched.h`).
const TCA_RED_PARMS: u16 = 1;
const TCA_RED_STAB: u16 = 2;
const TCA_RED_MAX_P: u16 = 3;
/// `NLA_F_NESTED | NLA_F_NET_BYTEORDER`: the flag bits of an attribute's type.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// A failure to change or read a qdisc.
#[derive(Debug)]
pub enum QdiscError {
    /// A system call or a kernel answer failed.
    Io {
        /// What was being done ("entering netns te-sw", "RTM_NEWQDISC on v-h2", ...).
        what: String,
        /// The error.
        err: std::io::Error,
    },
    /// The kernel answered something this crate cannot use.
    Protocol(String),
    /// The qdisc asked for does not exist or is not of the expected kind.
    NotFound(String),
    /// The caller asked for something the kernel would refuse or this crate cannot build.
    Invalid(String),
}

impl fmt::Display for QdiscError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QdiscError::Io { what, err } => write!(f, "{what}: {err}"),
            QdiscError::Protocol(m) | QdiscError::NotFound(m) | QdiscError::Invalid(m) => {
                f.write_str(m)
            }
        }
    }
}

impl std::error::Error for QdiscError {}

impl QdiscError {
    /// The same error, its message prefixed with `place` ("dev v-h2 parent 1:1 in netns
    /// te-sw").
    fn within(self, place: &str) -> QdiscError {
        match self {
            QdiscError::Io { what, err } => QdiscError::Io {
                what: format!("{place}: {what}"),
                err,
            },
            QdiscError::Protocol(m) => QdiscError::Protocol(format!("{place}: {m}")),
            QdiscError::NotFound(m) => QdiscError::NotFound(format!("{place}: {m}")),
            QdiscError::Invalid(m) => QdiscError::Invalid(format!("{place}: {m}")),
        }
    }
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> QdiscError {
    let what = what.into();
    move |err| QdiscError::Io { what, err }
}

/// Where a marking qdisc is: its namespace, device and parent.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QdiscPath {
    /// Network namespace: a name under `/run/netns` (as `ip netns` makes) or a path
    /// (`/proc/PID/ns/net`); `None` is the caller's namespace.
    pub netns: Option<String>,
    /// Egress device.
    pub dev: String,
    /// Parent handle in tc's notation (`"1:1"`, `"10:"`, hexadecimal as in tc); `None` is the
    /// root qdisc.
    pub parent: Option<String>,
}

impl QdiscPath {
    fn describe(&self) -> String {
        let parent = self
            .parent
            .as_deref()
            .map_or("root".into(), |p| format!("parent {p}"));
        match &self.netns {
            Some(ns) => format!("dev {} {parent} in netns {ns}", self.dev),
            None => format!("dev {} {parent}", self.dev),
        }
    }
}

/// Parses a tc handle `MAJ:MIN` (hexadecimal, either part may be empty and means 0), or `root`.
pub fn parse_handle(s: &str) -> Option<TcHandle> {
    if s == "root" {
        return Some(TcHandle::ROOT);
    }
    let (maj, min) = s.split_once(':')?;
    let part = |p: &str| {
        if p.is_empty() {
            Some(0)
        } else {
            u16::from_str_radix(p, 16).ok()
        }
    };
    Some(TcHandle {
        major: part(maj)?,
        minor: part(min)?,
    })
}

/// The marking threshold to set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threshold {
    /// fq_codel's `ce_threshold`, µs (≥ 1).
    FqCodelCeUs(u32),
    /// RED's `qth_min` and `qth_max`, bytes, for packets of `avpkt_bytes` on a link of
    /// `rate_bps` (the idle-damping table depends on both).
    Red {
        /// Marking starts at this average queue, bytes.
        min_bytes: u32,
        /// Every packet is marked from this average queue, bytes (≥ `min_bytes`).
        max_bytes: u32,
        /// Average packet size, bytes.
        avpkt_bytes: u32,
        /// The link's rate, bit/s.
        rate_bps: u64,
    },
}

/// One qdisc of a dump: where it is, its kind and statistics.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QdiscInfo {
    /// Interface index.
    pub ifindex: i32,
    /// Its handle.
    pub handle: TcHandle,
    /// Its parent.
    pub parent: TcHandle,
    /// Kind (`"red"`, `"fq_codel"`, ...).
    pub kind: String,
    /// RED's parameters and max_P, when it is RED.
    pub red: Option<(RedQopt, Option<u32>)>,
    /// Packets queued (`gnet_stats_queue.qlen`, from `TCA_STATS2`).
    pub qlen: u32,
    /// Bytes queued (`gnet_stats_queue.backlog`).
    pub backlog_bytes: u32,
    /// Packets dropped so far (`gnet_stats_queue.drops`).
    pub drops: u32,
    /// Packets marked CE so far, for a marking qdisc: RED's `marked` (`struct tc_red_xstats`:
    /// early, pdrop, other, marked), fq_codel's `ecn_mark + ce_mark` (`struct
    /// tc_fq_codel_qd_stats`); `None` for other kinds.
    pub ce_marks: Option<u64>,
}

/// One rtnetlink socket in one namespace.
struct Rtnl {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Rtnl {
    fn open(netns: Option<&str>, timeout: Duration) -> Result<Self, QdiscError> {
        let open_here = move || -> Result<Socket, QdiscError> {
            let mut sock =
                Socket::new(NETLINK_ROUTE).map_err(io_err("opening a NETLINK_ROUTE socket"))?;
            sock.bind_auto()
                .map_err(io_err("binding the netlink socket"))?;
            sock.connect(&SocketAddr::new(0, 0))
                .map_err(io_err("connecting the netlink socket to the kernel"))?;
            let tv = nix::sys::time::TimeVal::new(
                timeout.as_secs() as i64,
                i64::from(timeout.subsec_micros()),
            );
            nix::sys::socket::setsockopt(&sock, nix::sys::socket::sockopt::ReceiveTimeout, &tv)
                .map_err(|e| QdiscError::Io {
                    what: "setting SO_RCVTIMEO".into(),
                    err: e.into(),
                })?;
            Ok(sock)
        };
        let sock = match netns {
            None => open_here()?,
            Some(ns) => {
                let path = if ns.contains('/') {
                    PathBuf::from(ns)
                } else {
                    PathBuf::from("/run/netns").join(ns)
                };
                // The thread enters the namespace and ends; the socket stays in it.
                std::thread::scope(|s| {
                    s.spawn(|| {
                        let f = std::fs::File::open(&path)
                            .map_err(io_err(format!("opening netns {}", path.display())))?;
                        nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).map_err(
                            |e| QdiscError::Io {
                                what: format!("entering netns {}", path.display()),
                                err: e.into(),
                            },
                        )?;
                        open_here()
                    })
                    .join()
                    .unwrap_or_else(|_| {
                        Err(QdiscError::Protocol("the netns thread panicked".into()))
                    })
                })?
            }
        };
        Ok(Rtnl {
            sock,
            seq: 0,
            buf: vec![0; 1 << 16],
        })
    }

    /// Sends `msg` with `flags` and collects the answers until the ACK (or `NLMSG_DONE` for a
    /// dump); an error answer is returned as an error.
    fn request(
        &mut self,
        msg: RouteNetlinkMessage,
        flags: u16,
        what: &str,
    ) -> Result<Vec<RouteNetlinkMessage>, QdiscError> {
        self.seq = self.seq.wrapping_add(1);
        let out = wire(msg, flags, self.seq);
        self.sock
            .send(&out, 0)
            .map_err(io_err(format!("sending {what}")))?;
        let dump = flags & NLM_F_DUMP == NLM_F_DUMP;
        let mut answers = Vec::new();
        loop {
            let n = self
                .sock
                .recv(&mut &mut self.buf[..], 0)
                .map_err(io_err(format!("waiting for the answer to {what}")))?;
            let mut off = 0;
            while off < n {
                let m = <NetlinkMessage<RouteNetlinkMessage>>::deserialize(&self.buf[off..n])
                    .map_err(|e| {
                        QdiscError::Protocol(format!("cannot parse the answer to {what}: {e}"))
                    })?;
                let len = m.header.length as usize;
                // Answers to an earlier request that timed out are skipped.
                if m.header.sequence_number == self.seq {
                    match m.payload {
                        NetlinkPayload::Error(e) if e.code.is_some() => {
                            return Err(QdiscError::Io {
                                what: format!("the kernel refused {what}"),
                                err: e.to_io(),
                            });
                        }
                        // The ACK of a change (a dump ends with NLMSG_DONE instead).
                        NetlinkPayload::Error(_) if !dump => return Ok(answers),
                        NetlinkPayload::Done(_) => return Ok(answers),
                        NetlinkPayload::InnerMessage(r) => answers.push(r),
                        _ => {}
                    }
                }
                if len == 0 {
                    break;
                }
                off += (len + 3) & !3;
            }
        }
    }

    fn ifindex(&mut self, dev: &str) -> Result<i32, QdiscError> {
        let mut m = LinkMessage::default();
        m.attributes.push(LinkAttribute::IfName(dev.to_string()));
        let what = format!("RTM_GETLINK {dev}");
        let answers = self.request(
            RouteNetlinkMessage::GetLink(m),
            NLM_F_REQUEST | NLM_F_ACK,
            &what,
        )?;
        answers
            .iter()
            .find_map(|a| match a {
                RouteNetlinkMessage::NewLink(l) => Some(l.header.index as i32),
                _ => None,
            })
            .ok_or_else(|| QdiscError::NotFound(format!("no device {dev}")))
    }

    fn dump_qdiscs(&mut self) -> Result<Vec<QdiscInfo>, QdiscError> {
        let answers = self.request(
            RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default()),
            NLM_F_REQUEST | NLM_F_DUMP,
            "RTM_GETQDISC dump",
        )?;
        Ok(answers
            .into_iter()
            .filter_map(|a| match a {
                RouteNetlinkMessage::NewQueueDiscipline(t) => Some(qdisc_info(&t)),
                _ => None,
            })
            .collect())
    }
}

/// The bytes of the netlink request `msg` with `flags` (`NLM_F_*`) and sequence number `seq`,
/// port id 0 (the kernel's), as the socket sends them: `struct nlmsghdr`
/// (`include/uapi/linux/netlink.h`), then the message.
pub fn wire(msg: RouteNetlinkMessage, flags: u16, seq: u32) -> Vec<u8> {
    let mut hdr = NetlinkHeader::default();
    hdr.flags = flags;
    hdr.sequence_number = seq;
    let mut req = NetlinkMessage::new(hdr, NetlinkPayload::from(msg));
    req.finalize();
    let mut out = vec![0u8; req.buffer_len()];
    req.serialize(&mut out);
    out
}

/// The fields of one dumped qdisc that this crate uses.
fn qdisc_info(t: &TcMessage) -> QdiscInfo {
    let mut kind = String::new();
    let mut options: Option<Vec<u8>> = None;
    let mut xstats: Option<Vec<u8>> = None;
    let mut q = QdiscInfo {
        ifindex: t.header.index,
        handle: t.header.handle,
        parent: t.header.parent,
        ..QdiscInfo::default()
    };
    for a in &t.attributes {
        match a {
            TcAttribute::Kind(k) => kind = k.clone(),
            TcAttribute::Stats2(v) => {
                for st in v {
                    if let TcStats2::Queue(s) = st {
                        (q.qlen, q.backlog_bytes, q.drops) = (s.qlen, s.backlog, s.drops);
                    }
                }
            }
            TcAttribute::Xstats(TcXstats::FqCodel(TcFqCodelXstats::Qdisc(x))) => {
                q.ce_marks = Some(u64::from(x.ecn_mark) + u64::from(x.ce_mark));
            }
            TcAttribute::Xstats(TcXstats::Other(b)) => xstats = Some(b.clone()),
            // A kind the library does not know comes as one raw TCA_OPTIONS attribute.
            TcAttribute::Options(o) => {
                if let [TcOption::Other(nla)] = o.as_slice() {
                    if nla.kind() & NLA_TYPE_MASK == TCA_OPTIONS {
                        let mut v = vec![0u8; nla.value_len()];
                        nla.emit_value(&mut v);
                        options = Some(v);
                    }
                }
            }
            _ => {}
        }
    }
    if kind == "red" {
        q.red = options.as_deref().and_then(parse_red_options);
        // struct tc_red_xstats { early, pdrop, other, marked } (u32 each).
        if let Some(x) = xstats.filter(|x| x.len() >= 16) {
            q.ce_marks = Some(u64::from(u32::from_ne_bytes([x[12], x[13], x[14], x[15]])));
        }
    }
    q.kind = kind;
    q
}

/// RED's `TCA_PARMS` and `TCA_MAX_P` from the payload of its `TCA_OPTIONS`.
pub fn parse_red_options(b: &[u8]) -> Option<(RedQopt, Option<u32>)> {
    let mut parms = None;
    let mut max_p = None;
    for nla in NlasIterator::new(b) {
        let nla = nla.ok()?;
        match nla.kind() & NLA_TYPE_MASK {
            TCA_RED_PARMS => parms = RedQopt::parse(nla.value()),
            TCA_RED_MAX_P if nla.value().len() == 4 => {
                let v = nla.value();
                max_p = Some(u32::from_ne_bytes([v[0], v[1], v[2], v[3]]));
            }
            _ => {}
        }
    }
    Some((parms?, max_p))
}

/// The `TCA_OPTIONS` of a RED change: `current`'s weight, flags and max_P with the thresholds
/// of `t`, limit 0 (keep the child and its packets), and the idle-damping table for the weight.
/// Refused when the kernel would refuse it ([`RedQopt::kernel_accepts`]).
pub fn red_change_options(
    current: RedQopt,
    max_p: Option<u32>,
    min_bytes: u32,
    max_bytes: u32,
    avpkt_bytes: u32,
    rate_bps: u64,
) -> Result<Vec<TcOption>, QdiscError> {
    let (scell_log, stab) = red::idle_damping(current.wlog, avpkt_bytes, rate_bps);
    let q = RedQopt {
        limit: 0,
        qth_min: min_bytes,
        qth_max: max_bytes,
        scell_log,
        ..current
    };
    if !q.kernel_accepts() {
        return Err(QdiscError::Protocol(format!(
            "RED thresholds min {min_bytes} B, max {max_bytes} B are not valid with Wlog {}",
            q.wlog
        )));
    }
    debug_assert_eq!(stab.len(), RED_STAB_SIZE);
    let mut v = vec![
        TcOption::Other(DefaultNla::new(TCA_RED_PARMS, q.to_bytes().to_vec())),
        TcOption::Other(DefaultNla::new(TCA_RED_STAB, stab.to_vec())),
    ];
    if let Some(p) = max_p {
        v.push(TcOption::Other(DefaultNla::new(
            TCA_RED_MAX_P,
            p.to_ne_bytes().to_vec(),
        )));
    }
    Ok(v)
}

/// Changes marking thresholds over rtnetlink, one socket per namespace (opened on first use,
/// reopened after a failure).
pub struct QdiscChanger {
    timeout: Duration,
    sockets: HashMap<Option<String>, Rtnl>,
    /// What the first change of a qdisc looked up: its device's index and, for RED, the
    /// parameters a change keeps. Dropped on any failure, so the next change looks again.
    known: HashMap<QdiscPath, Known>,
}

/// The looked-up facts of one qdisc (see [`QdiscChanger`]).
#[derive(Debug, Clone, Copy)]
struct Known {
    ifindex: i32,
    red: Option<(RedQopt, Option<u32>)>,
}

impl QdiscChanger {
    /// A changer whose requests fail after waiting `timeout` for the kernel's answer.
    pub fn new(timeout: Duration) -> Self {
        QdiscChanger {
            timeout,
            sockets: HashMap::new(),
            known: HashMap::new(),
        }
    }

    fn socket(&mut self, netns: &Option<String>) -> Result<&mut Rtnl, QdiscError> {
        if !self.sockets.contains_key(netns) {
            let s = Rtnl::open(netns.as_deref(), self.timeout)?;
            self.sockets.insert(netns.clone(), s);
        }
        Ok(self.sockets.get_mut(netns).expect("inserted above"))
    }

    /// The index of device `dev` in `netns` (`None`: the caller's namespace).
    pub fn ifindex(&mut self, netns: &Option<String>, dev: &str) -> Result<i32, QdiscError> {
        let r = self.socket(netns).and_then(|s| s.ifindex(dev));
        if matches!(r, Err(QdiscError::Io { .. }) | Err(QdiscError::Protocol(_))) {
            self.sockets.remove(netns);
        }
        r
    }

    /// The qdiscs of `netns` (`None`: the caller's namespace), with their statistics: one
    /// `RTM_GETQDISC` dump on the namespace's socket (what `tc -s qdisc show` asks for).
    pub fn dump(&mut self, netns: &Option<String>) -> Result<Vec<QdiscInfo>, QdiscError> {
        let r = self.socket(netns).and_then(Rtnl::dump_qdiscs);
        if r.is_err() {
            self.sockets.remove(netns);
        }
        r
    }

    /// Sets the marking threshold of the qdisc at `path` (see the module docs for what a change
    /// keeps). Errors name the qdisc and the step.
    ///
    /// The first change of a qdisc looks up its device (`RTM_GETLINK`) and, for RED, its
    /// parameters (an `RTM_GETQDISC` dump); later ones reuse them and cost one `RTM_NEWQDISC`
    /// round trip (the PCN daemon is meant to be the only one changing the qdisc). After a
    /// failure the facts are looked up again, once, at once: a qdisc or device recreated behind
    /// the changer's back costs one failed request, not a failed change.
    pub fn set(&mut self, path: &QdiscPath, threshold: Threshold) -> Result<(), QdiscError> {
        let mut r = self.try_set(path, threshold);
        if r.is_err() && self.known.remove(path).is_some() {
            r = self.try_set(path, threshold);
        }
        if r.is_err() {
            self.known.remove(path);
        }
        if matches!(r, Err(QdiscError::Io { .. }) | Err(QdiscError::Protocol(_))) {
            // A timed-out or broken socket is not reused.
            self.sockets.remove(&path.netns);
        }
        r.map_err(|e| e.within(&path.describe()))
    }

    fn try_set(&mut self, path: &QdiscPath, threshold: Threshold) -> Result<(), QdiscError> {
        let parent = match &path.parent {
            None => TcHandle::ROOT,
            Some(p) => parse_handle(p)
                .ok_or_else(|| QdiscError::Protocol(format!("bad parent handle {p:?}")))?,
        };
        let cached = self.known.get(path).copied();
        let rt = self.socket(&path.netns)?;
        let ifindex = match cached {
            Some(k) => k.ifindex,
            None => rt.ifindex(&path.dev)?,
        };
        let mut known = Known { ifindex, red: None };
        let (kind, options) = match threshold {
            Threshold::FqCodelCeUs(us) => (
                "fq_codel",
                vec![TcOption::FqCodel(TcQdiscFqCodelOption::CeThreshold(
                    us.max(1),
                ))],
            ),
            Threshold::Red {
                min_bytes,
                max_bytes,
                avpkt_bytes,
                rate_bps,
            } => {
                let (parms, max_p) = match cached.and_then(|k| k.red) {
                    Some(red) => red,
                    None => rt
                        .dump_qdiscs()?
                        .into_iter()
                        .find(|q| q.ifindex == ifindex && q.parent == parent && q.kind == "red")
                        .ok_or_else(|| QdiscError::NotFound("no RED qdisc there".into()))?
                        .red
                        .ok_or_else(|| {
                            QdiscError::Protocol("RED dump without TCA_RED_PARMS".into())
                        })?,
                };
                known.red = Some((parms, max_p));
                (
                    "red",
                    red_change_options(parms, max_p, min_bytes, max_bytes, avpkt_bytes, rate_bps)?,
                )
            }
        };
        let mut m = TcMessage::with_index(ifindex);
        m.header.parent = parent;
        m.attributes.push(TcAttribute::Kind(kind.into()));
        m.attributes.push(TcAttribute::Options(options));
        rt.request(
            RouteNetlinkMessage::NewQueueDiscipline(m),
            NLM_F_REQUEST | NLM_F_ACK,
            &format!("RTM_NEWQDISC ({kind})"),
        )?;
        self.known.insert(path.clone(), known);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::Emitable;

    #[test]
    fn handles_parse_like_tc() {
        assert_eq!(parse_handle("1:1"), Some(TcHandle { major: 1, minor: 1 }));
        assert_eq!(
            parse_handle("10:"),
            Some(TcHandle {
                major: 0x10,
                minor: 0
            })
        );
        assert_eq!(parse_handle("root"), Some(TcHandle::ROOT));
        assert_eq!(
            parse_handle("ffff:fff1"),
            Some(TcHandle {
                major: 0xffff,
                minor: 0xfff1
            })
        );
        assert_eq!(parse_handle("1"), None);
        assert_eq!(parse_handle("x:1"), None);
        assert_eq!(parse_handle("10000:1"), None);
    }

    #[test]
    fn red_change_keeps_weight_flags_and_max_p_and_the_child() {
        let current = red::SAMPLE;
        let opts =
            red_change_options(current, Some(u32::MAX), 12_000, 13_500, 1500, 100_000_000).unwrap();
        let nlas: Vec<(u16, Vec<u8>)> = opts
            .iter()
            .map(|o| {
                let mut v = vec![0u8; o.value_len()];
                o.emit_value(&mut v);
                (o.kind(), v)
            })
            .collect();
        assert_eq!(nlas.len(), 3);
        let q = RedQopt::parse(&nlas[0].1).unwrap();
        assert_eq!(
            (nlas[0].0, q.limit, q.qth_min, q.qth_max),
            (TCA_RED_PARMS, 0, 12_000, 13_500)
        );
        assert_eq!((q.wlog, q.plog, q.flags), (3, 20, red::TC_RED_ECN));
        assert_eq!((nlas[1].0, nlas[1].1.len()), (TCA_RED_STAB, RED_STAB_SIZE));
        let (scell_log, stab) = red::idle_damping(3, 1500, 100_000_000);
        assert_eq!((q.scell_log, &nlas[1].1[..]), (scell_log, &stab[..]));
        assert_eq!(nlas[2], (TCA_RED_MAX_P, u32::MAX.to_ne_bytes().to_vec()));
        // The same options, emitted as TCA_OPTIONS and parsed back as a dump would be.
        let mut nested = Vec::new();
        for (k, v) in &nlas {
            let len = 4 + v.len();
            nested.extend_from_slice(&(len as u16).to_ne_bytes());
            nested.extend_from_slice(&k.to_ne_bytes());
            nested.extend_from_slice(v);
            nested.resize(nested.len().next_multiple_of(4), 0);
        }
        assert_eq!(parse_red_options(&nested), Some((q, Some(u32::MAX))));
        // Thresholds the kernel would refuse are refused here, naming them.
        let e = red_change_options(current, None, 20_000, 10_000, 1500, 100_000_000).unwrap_err();
        assert!(e.to_string().contains("min 20000 B, max 10000 B"), "{e}");
    }

    #[test]
    fn dumped_qdiscs_give_their_queue_and_marks() {
        let mut queue = netlink_packet_route::tc::TcStatsQueue::default();
        (queue.qlen, queue.backlog, queue.drops) = (30, 45_420, 12);
        let opts =
            red_change_options(red::SAMPLE, Some(7), 30_000, 31_500, 1500, 100_000_000).unwrap();
        let mut nested = vec![0u8; opts.as_slice().buffer_len()];
        opts.as_slice().emit(&mut nested);
        let mut m = TcMessage::with_index(5);
        m.header.handle = TcHandle {
            major: 0x20,
            minor: 0,
        };
        m.header.parent = TcHandle {
            major: 0x10,
            minor: 1,
        };
        let red_xstats: Vec<u8> = [3u32, 0, 0, 1507]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        m.attributes = vec![
            TcAttribute::Kind("red".into()),
            // As the library parses a kind it does not know: one raw TCA_OPTIONS.
            TcAttribute::Options(vec![TcOption::Other(DefaultNla::new(TCA_OPTIONS, nested))]),
            TcAttribute::Stats2(vec![TcStats2::Queue(queue)]),
            TcAttribute::Xstats(TcXstats::Other(red_xstats)),
        ];
        let q = qdisc_info(&m);
        assert_eq!(
            (q.ifindex, q.kind.as_str(), q.parent),
            (
                5,
                "red",
                TcHandle {
                    major: 0x10,
                    minor: 1
                }
            )
        );
        assert_eq!(
            (q.qlen, q.backlog_bytes, q.drops, q.ce_marks),
            (30, 45_420, 12, Some(1507))
        );
        let (parms, max_p) = q.red.unwrap();
        assert_eq!(
            (parms.qth_min, parms.wlog, max_p),
            (30_000, red::SAMPLE.wlog, Some(7))
        );

        let mut fq = netlink_packet_route::tc::TcFqCodelQdStats::default();
        (fq.ecn_mark, fq.ce_mark) = (2, 5);
        let mut m = TcMessage::with_index(3);
        m.attributes = vec![
            TcAttribute::Kind("fq_codel".into()),
            TcAttribute::Xstats(TcXstats::FqCodel(TcFqCodelXstats::Qdisc(fq))),
        ];
        assert_eq!(qdisc_info(&m).ce_marks, Some(7));
        let mut m = TcMessage::with_index(3);
        m.attributes = vec![TcAttribute::Kind("tbf".into())];
        assert_eq!((qdisc_info(&m).ce_marks, qdisc_info(&m).red), (None, None));
    }

    #[test]
    fn a_live_dump_lists_the_loopback_root_qdisc() {
        // The kernel's own messages: lo always has a root qdisc (noqueue) with statistics.
        let mut c = QdiscChanger::new(Duration::from_secs(2));
        let lo = c.ifindex(&None, "lo").unwrap();
        let qs = c.dump(&None).unwrap();
        let q = qs
            .iter()
            .find(|q| q.ifindex == lo && q.parent == TcHandle::ROOT)
            .unwrap_or_else(|| panic!("no root qdisc of lo in {qs:?}"));
        assert!(!q.kind.is_empty() && q.kind.is_ascii(), "{q:?}");
    }

    #[test]
    fn a_missing_namespace_is_an_error_naming_it() {
        let mut c = QdiscChanger::new(Duration::from_millis(100));
        let path = QdiscPath {
            netns: Some("no-such-netns-ecn-qdisc-test".into()),
            dev: "v-x".into(),
            parent: Some("1:1".into()),
        };
        let e = c
            .set(&path, Threshold::FqCodelCeUs(100))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no-such-netns-ecn-qdisc-test") && e.contains("dev v-x"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_device_is_an_error_naming_it() {
        // The caller's own namespace: any unprivileged user can ask for a link by name.
        let mut c = QdiscChanger::new(Duration::from_millis(1000));
        let path = QdiscPath {
            netns: None,
            dev: "nodev-ecnq0".into(),
            parent: None,
        };
        let e = c
            .set(&path, Threshold::FqCodelCeUs(100))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nodev-ecnq0"), "{e}");
    }
}
