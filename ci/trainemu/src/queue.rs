// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Queue sampling of the bottleneck switch port: its qdiscs' statistics read with an rtnetlink
//! dump (`RTM_GETQDISC`, what `tc -s qdisc show` asks for) in the switch namespace every
//! [`QUEUE_PERIOD`] during each run (the PCN paper's queue-length metrics come from these samples).
//! Spawning `tc` per sample reached only 1-3 Hz in the VM under TCG; one dump on an open netlink
//! socket costs well under a millisecond.
//!
//! The sampling thread enters the switch namespace with `setns(2)`, opens its `NETLINK_ROUTE`
//! socket there and runs at SCHED_FIFO priority 10 when allowed. The backlog is the port's tbf's (bytes and packets waiting for
//! tokens: the port's queue, whatever child qdisc holds them); the marks are the ECN child's
//! (RED `marked`, fq_codel `ecn_mark` + `ce_mark`, from their xstats), cumulative since the qdisc
//! was made.
//!
//! Message layout (include/uapi/linux/{netlink,rtnetlink,pkt_sched,gen_stats}.h): `nlmsghdr`
//! (len u32, type u16, flags u16, seq u32, pid u32), `tcmsg` (family u8, 3 pad bytes, ifindex i32,
//! handle u32, parent u32, info u32), then attributes (`rtattr`: len u16, type u16, payload,
//! padded to 4): `TCA_KIND` (string), `TCA_STATS2` (nested; `TCA_STATS_QUEUE` = `gnet_stats_queue`:
//! qlen, backlog, drops, requeues, overlimits, u32 each), `TCA_XSTATS` (the qdisc's own struct).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// Target period of the queue samples (200 Hz, so that late wake-ups in a loaded VM under TCG
/// still leave at least the 100 Hz PCN's metrics want: 47-84 Hz were reached there with a 10 ms
/// period); a dump that takes longer delays the next one, and the report states the rate reached.
pub const QUEUE_PERIOD: Duration = Duration::from_millis(5);

/// Which port to sample.
#[derive(Debug, Clone)]
pub struct QueueProbe {
    /// The switch namespace's file (`/run/netns/te-sw`).
    pub netns: PathBuf,
    /// The port (`v-HOST`).
    pub dev: String,
}

/// One sample of the port's queue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QueueSample {
    /// Time since the run's start, µs (the middle of the dump).
    pub t_us: u64,
    /// Backlog of the port's tbf, bytes.
    pub backlog_bytes: u64,
    /// Backlog of the port's tbf, packets.
    pub backlog_pkts: u64,
    /// Packets the tbf (or its child) dropped so far.
    pub drops: u64,
    /// Packets the ECN child marked CE so far (None: no ECN qdisc on the port).
    pub marks: Option<u64>,
}

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const TCA_KIND: u16 = 1;
const TCA_XSTATS: u16 = 4;
const TCA_STATS2: u16 = 7;
const TCA_STATS_QUEUE: u16 = 3;
const NLMSG_HDRLEN: usize = 16;
const TCMSG_LEN: usize = 20;

/// One qdisc of a dump, the fields the sampler uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qdisc {
    /// Interface index.
    pub ifindex: i32,
    /// Handle (major:minor as u32).
    pub handle: u32,
    /// Parent handle (0xFFFFFFFF: root).
    pub parent: u32,
    /// Kind ("tbf", "red", ...).
    pub kind: String,
    /// Queue length, packets.
    pub qlen: u32,
    /// Backlog, bytes.
    pub backlog: u32,
    /// Drops so far.
    pub drops: u32,
    /// The qdisc's own statistics struct (`TCA_XSTATS`), empty when absent.
    pub xstats: Vec<u8>,
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_ne_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().unwrap())
}

/// The attributes (type, payload) of `b`.
fn attrs(mut b: &[u8]) -> Result<Vec<(u16, &[u8])>> {
    let mut v = Vec::new();
    while b.len() >= 4 {
        let len = u16_at(b, 0) as usize;
        if len < 4 || len > b.len() {
            bail!("attribute length {len} outside its message ({} bytes left)", b.len());
        }
        v.push((u16_at(b, 2) & 0x3fff, &b[4..len]));
        b = &b[len.next_multiple_of(4).min(b.len())..];
    }
    Ok(v)
}

/// Parses the messages of one `recv` of an `RTM_GETQDISC` dump: the qdiscs, and whether the dump
/// ended (`NLMSG_DONE`). An `NLMSG_ERROR` or a malformed message is an error.
pub fn parse_dump(mut b: &[u8]) -> Result<(Vec<Qdisc>, bool)> {
    let mut out = Vec::new();
    while b.len() >= NLMSG_HDRLEN {
        let len = u32_at(b, 0) as usize;
        let ty = u16_at(b, 4);
        if len < NLMSG_HDRLEN || len > b.len() {
            bail!("netlink message length {len} outside the buffer ({} bytes left)", b.len());
        }
        let body = &b[NLMSG_HDRLEN..len];
        match ty {
            NLMSG_DONE => return Ok((out, true)),
            NLMSG_ERROR => {
                let errno = if body.len() >= 4 { -(u32_at(body, 0) as i32) } else { 0 };
                bail!("netlink error: {}", std::io::Error::from_raw_os_error(errno));
            }
            RTM_NEWQDISC => {
                if body.len() < TCMSG_LEN {
                    bail!("qdisc message of {} bytes, shorter than a tcmsg", body.len());
                }
                let mut q = Qdisc {
                    ifindex: u32_at(body, 4) as i32,
                    handle: u32_at(body, 8),
                    parent: u32_at(body, 12),
                    kind: String::new(),
                    qlen: 0,
                    backlog: 0,
                    drops: 0,
                    xstats: Vec::new(),
                };
                for (t, p) in attrs(&body[TCMSG_LEN..])? {
                    match t {
                        TCA_KIND => q.kind = String::from_utf8_lossy(p).trim_end_matches('\0').to_string(),
                        TCA_XSTATS => q.xstats = p.to_vec(),
                        TCA_STATS2 => {
                            for (t2, p2) in attrs(p)? {
                                if t2 == TCA_STATS_QUEUE && p2.len() >= 12 {
                                    (q.qlen, q.backlog, q.drops) = (u32_at(p2, 0), u32_at(p2, 4), u32_at(p2, 8));
                                }
                            }
                        }
                        _ => {}
                    }
                }
                out.push(q);
            }
            _ => {}
        }
        b = &b[len.next_multiple_of(4).min(b.len())..];
    }
    Ok((out, false))
}

/// CE marks in an ECN qdisc's xstats: RED's `tc_red_xstats` (early, pdrop, other, marked),
/// fq_codel's `tc_fq_codel_xstats` (type 0 = qdisc: maxpacket, drop_overlimit, ecn_mark,
/// new_flow_count, new_flows_len, old_flows_len, ce_mark, ...): ecn_mark + ce_mark.
fn marks(q: &Qdisc) -> Option<u64> {
    let x = &q.xstats;
    match q.kind.as_str() {
        "red" if x.len() >= 16 => Some(u32_at(x, 12) as u64),
        "fq_codel" if x.len() >= 32 && u32_at(x, 0) == 0 => Some(u32_at(x, 12) as u64 + u32_at(x, 28) as u64),
        _ => None,
    }
}

/// The sample of interface `ifindex` among `qdiscs`: backlog and drops of its `tbf` (its root
/// qdisc when it has no tbf), marks of a `red` or `fq_codel` on it.
pub fn port_sample(qdiscs: &[Qdisc], ifindex: i32, t_us: u64) -> Result<QueueSample> {
    let mine: Vec<&Qdisc> = qdiscs.iter().filter(|q| q.ifindex == ifindex).collect();
    let port = mine.iter().find(|q| q.kind == "tbf").or_else(|| mine.iter().find(|q| q.parent == u32::MAX));
    let Some(port) = port else { bail!("interface {ifindex} has no tbf and no root qdisc in the dump") };
    Ok(QueueSample {
        t_us,
        backlog_bytes: port.backlog.into(),
        backlog_pkts: port.qlen.into(),
        drops: port.drops.into(),
        marks: mine.iter().find_map(|q| marks(q)),
    })
}

/// A `NETLINK_ROUTE` socket of the calling thread's network namespace.
struct Rtnl {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl Rtnl {
    fn open() -> Result<Rtnl> {
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) };
        if fd < 0 {
            bail!("netlink socket: {}", std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(Rtnl { fd: unsafe { OwnedFd::from_raw_fd(fd) }, seq: 0, buf: vec![0; 64 * 1024] })
    }

    /// One `RTM_GETQDISC` dump of every qdisc of the namespace.
    fn dump(&mut self) -> Result<Vec<Qdisc>> {
        self.seq = self.seq.wrapping_add(1);
        let mut req = [0u8; NLMSG_HDRLEN + TCMSG_LEN];
        req[0..4].copy_from_slice(&((NLMSG_HDRLEN + TCMSG_LEN) as u32).to_ne_bytes());
        req[4..6].copy_from_slice(&RTM_GETQDISC.to_ne_bytes());
        req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        req[8..12].copy_from_slice(&self.seq.to_ne_bytes());
        // SAFETY: `req` is a valid buffer of its length; the kernel is the destination (no address).
        if unsafe { libc::send(self.fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) } < 0 {
            bail!("netlink send: {}", std::io::Error::last_os_error());
        }
        let mut all = Vec::new();
        loop {
            // SAFETY: `buf` is writable for its length.
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), self.buf.as_mut_ptr().cast(), self.buf.len(), 0) };
            if n < 0 {
                bail!("netlink recv: {}", std::io::Error::last_os_error());
            }
            let (qs, done) = parse_dump(&self.buf[..n as usize])?;
            all.extend(qs);
            if done || n == 0 {
                return Ok(all);
            }
        }
    }
}

/// Samples `probe` until `stop` returns true; `now_us` is the run's clock. A failing dump ends the
/// sampling with the error (the samples so far are kept by the caller).
pub fn sample_port(probe: &QueueProbe, now_us: &dyn Fn() -> u64, stop: &dyn Fn() -> bool, out: &mut Vec<QueueSample>) -> Result<()> {
    let f = std::fs::File::open(&probe.netns).with_context(|| format!("open {}", probe.netns.display()))?;
    nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).with_context(|| format!("setns({})", probe.netns.display()))?;
    let name = std::ffi::CString::new(probe.dev.as_str()).context("device name")?;
    // SAFETY: a NUL-terminated name; the lookup happens in this thread's (the switch's) namespace.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) } as i32;
    if ifindex == 0 {
        bail!("no device {} in {}", probe.dev, probe.netns.display());
    }
    let mut nl = Rtnl::open()?;
    // Wake up on time although the workers keep every (emulated) CPU busy: a real-time priority
    // for this thread, whose work per sample is one short dump. Best effort (needs CAP_SYS_NICE).
    let prio = libc::sched_param { sched_priority: 10 };
    // SAFETY: pid 0 = the calling thread; `prio` is a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &prio) } != 0 {
        tracing::debug!("queue sampler stays SCHED_OTHER: {}", std::io::Error::last_os_error());
    }
    let mut next = std::time::Instant::now();
    while !stop() {
        let t0 = now_us();
        let qs = nl.dump()?;
        let t = (t0 + now_us()) / 2;
        out.push(port_sample(&qs, ifindex, t).with_context(|| format!("port {}", probe.dev))?);
        next += QUEUE_PERIOD;
        let now = std::time::Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes an attribute (type, payload), padded to 4 bytes.
    fn attr(t: u16, p: &[u8]) -> Vec<u8> {
        let mut v = ((4 + p.len()) as u16).to_ne_bytes().to_vec();
        v.extend(t.to_ne_bytes());
        v.extend(p);
        v.resize(v.len().next_multiple_of(4), 0);
        v
    }

    fn u32s(x: &[u32]) -> Vec<u8> {
        x.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    /// Encodes a netlink message of type `ty` with `body`.
    fn msg(ty: u16, body: &[u8]) -> Vec<u8> {
        let mut v = u32s(&[(NLMSG_HDRLEN + body.len()) as u32]);
        v.extend(ty.to_ne_bytes());
        v.extend(2u16.to_ne_bytes()); // NLM_F_MULTI
        v.extend(u32s(&[7, 0]));
        v.extend(body);
        v.resize(v.len().next_multiple_of(4), 0);
        v
    }

    /// An RTM_NEWQDISC as the kernel's tc_fill_qdisc lays it out: tcmsg, TCA_KIND, TCA_OPTIONS
    /// (ignored), TCA_STATS2 {BASIC, QUEUE}, TCA_STATS (compat, ignored), TCA_XSTATS.
    fn qdisc(ifindex: i32, handle: u32, parent: u32, kind: &str, queue: [u32; 5], xstats: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8, 0, 0, 0];
        b.extend(ifindex.to_ne_bytes());
        b.extend(u32s(&[handle, parent, 1]));
        let mut k = kind.as_bytes().to_vec();
        k.push(0);
        b.extend(attr(TCA_KIND, &k));
        b.extend(attr(2, &attr(1, &[9; 10])));
        let mut st = attr(1, &[0; 12]);
        st.extend(attr(TCA_STATS_QUEUE, &u32s(&queue)));
        b.extend(attr(TCA_STATS2, &st));
        b.extend(attr(3, &[0; 36]));
        if !xstats.is_empty() {
            b.extend(attr(TCA_XSTATS, xstats));
        }
        msg(RTM_NEWQDISC, &b)
    }

    /// A port with netem 1: (root), tbf 10: (1:1) and RED 20: (10:1) on interface 5, a noqueue
    /// lo (1), ending the dump.
    fn red_port_dump() -> Vec<u8> {
        let mut d = qdisc(1, 0, u32::MAX, "noqueue", [0, 0, 0, 0, 0], &[]);
        d.extend(qdisc(5, 0x1_0000, u32::MAX, "netem", [0, 0, 0, 0, 0], &[]));
        d.extend(qdisc(5, 0x10_0000, 0x1_0001, "tbf", [30, 45_420, 12, 0, 48_122], &[]));
        d.extend(qdisc(5, 0x20_0000, 0x10_0001, "red", [30, 45_420, 12, 0, 1519], &u32s(&[12, 0, 0, 1507])));
        d.extend(msg(NLMSG_DONE, &[0; 4]));
        d
    }

    #[test]
    fn parses_a_dump_and_samples_the_tbf_with_red_marks() {
        let (qs, done) = parse_dump(&red_port_dump()).unwrap();
        assert!(done);
        assert_eq!(qs.len(), 4);
        assert_eq!((qs[2].kind.as_str(), qs[2].handle, qs[2].parent, qs[2].ifindex), ("tbf", 0x10_0000, 0x1_0001, 5));
        assert_eq!((qs[2].qlen, qs[2].backlog, qs[2].drops), (30, 45_420, 12));
        let s = port_sample(&qs, 5, 77).unwrap();
        assert_eq!(s, QueueSample { t_us: 77, backlog_bytes: 45_420, backlog_pkts: 30, drops: 12, marks: Some(1507) });
        // lo has no tbf: its root, without marks.
        assert_eq!(port_sample(&qs, 1, 0).unwrap().marks, None);
        assert!(port_sample(&qs, 9, 0).unwrap_err().to_string().contains("interface 9"));
    }

    #[test]
    fn fq_codel_marks_are_ecn_plus_ce_and_a_dump_may_span_reads() {
        // tbf root 1:, fq_codel 20: under it; fq_codel qdisc xstats: type 0, maxpacket 1514,
        // drop_overlimit 0, ecn_mark 2, new_flow_count 1, new_flows_len 0, old_flows_len 1,
        // ce_mark 5, memory_usage, drop_overmemory.
        let d = [
            qdisc(3, 0x1_0000, u32::MAX, "tbf", [2, 3028, 0, 0, 3], &[]),
            qdisc(3, 0x20_0000, 0x1_0001, "fq_codel", [2, 3028, 0, 0, 0], &u32s(&[0, 1514, 0, 2, 1, 0, 1, 5, 4096, 0])),
        ]
        .concat();
        let (qs, done) = parse_dump(&d).unwrap();
        assert!(!done, "no NLMSG_DONE yet: the next read continues the dump");
        assert_eq!(port_sample(&qs, 3, 5).unwrap(), QueueSample { t_us: 5, backlog_bytes: 3028, backlog_pkts: 2, drops: 0, marks: Some(7) });
    }

    #[test]
    fn a_live_dump_of_this_namespace_lists_the_loopback_root_qdisc() {
        // The kernel's own layout, not only this file's encoder: lo always has a root qdisc
        // (noqueue) with statistics, and the dump ends.
        // SAFETY: a NUL-terminated literal name.
        let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) } as i32;
        assert!(lo > 0);
        let qs = Rtnl::open().unwrap().dump().unwrap();
        let q = qs.iter().find(|q| q.ifindex == lo && q.parent == u32::MAX).unwrap_or_else(|| panic!("no root qdisc of lo in {qs:?}"));
        assert!(!q.kind.is_empty() && q.kind.is_ascii(), "{q:?}");
        assert_eq!(port_sample(&qs, lo, 1).unwrap().t_us, 1);
    }

    #[test]
    fn refuses_errors_and_malformed_messages() {
        let e = parse_dump(&msg(NLMSG_ERROR, &u32s(&[(-libc::EPERM) as u32, 0, 0, 0, 0]))).unwrap_err();
        assert!(e.to_string().contains("netlink error"), "{e}");
        let mut d = red_port_dump();
        d.truncate(50);
        assert!(parse_dump(&d).unwrap_err().to_string().contains("outside the buffer"));
        let mut bad = qdisc(5, 0, u32::MAX, "tbf", [0; 5], &[]);
        bad[16 + TCMSG_LEN] = 200; // TCA_KIND's length past the message
        assert!(parse_dump(&bad).unwrap_err().to_string().contains("attribute length"));
        assert!(parse_dump(&msg(RTM_NEWQDISC, &[0; 8])).unwrap_err().to_string().contains("tcmsg"));
    }
}
