// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Rust side of the differential test of the BPF struct_ops programs: a safe handle on the BPF
//! program source (kmod/mltcp-bpf/bpf/mltcp.bpf.c) compiled for user space by build.rs behind
//! the shim of shim/ (see shim/harness.c). [`harness`] gives exclusive access to the program's
//! globals (its maps, `CONFIG_HZ`, the jiffies clock), [`Sock`] is one socket whose callbacks run
//! through the program's struct_ops tables, as the kernel calls them.
//!
//! tests/differential.rs drives these and `mltcp-math` (the module's math) through the same
//! sequences and compares them.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard};

use mltcp_math::c_header::{bpf_param_names, BpfStats};
use mltcp_math::mltcp::{MltcpCubicState, MltcpRenoState, ICSK_CA_PRIV_SIZE};
use mltcp_math::params::Params;

/// The socket fields the programs read or write, flat; `struct dt_fields` of shim/harness.c,
/// same order. Windows in segments, times as the kernel keeps them (`lsndtime` in jiffies,
/// `srtt_us` in µs << 3, `tcp_mstamp` in µs), `pacing_rate` in bytes/s, `gso_max_size` in bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    /// `tp->snd_cwnd`.
    pub cwnd: u32,
    /// `tp->snd_cwnd_cnt`.
    pub cwnd_cnt: u32,
    /// `tp->snd_ssthresh`.
    pub ssthresh: u32,
    /// `tp->snd_cwnd_clamp`.
    pub cwnd_clamp: u32,
    /// `tp->prior_cwnd`.
    pub prior_cwnd: u32,
    /// `tp->snd_nxt`.
    pub snd_nxt: u32,
    /// `tp->snd_una`.
    pub snd_una: u32,
    /// `tp->lsndtime`, jiffies.
    pub lsndtime: u32,
    /// `tp->srtt_us` (smoothed RTT << 3, µs).
    pub srtt_us: u32,
    /// `tp->max_packets_out`.
    pub max_packets_out: u32,
    /// `tp->is_cwnd_limited` (0 or 1).
    pub is_cwnd_limited: u32,
    /// `sk->sk_pacing_status` (0: `SK_PACING_NONE`).
    pub pacing_status: u32,
    /// `sk->sk_gso_max_size`.
    pub gso_max_size: u32,
    /// Padding of the C struct.
    pub pad: u32,
    /// `tp->bytes_acked`.
    pub bytes_acked: u64,
    /// `tp->tcp_mstamp`, µs.
    pub tcp_mstamp: u64,
    /// `sk->sk_pacing_rate`.
    pub pacing_rate: u64,
}

/// Which of the program's two struct_ops tables (`MLTCP_ALG_*` in mltcp.bpf.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alg {
    /// `mltcp` (Reno based).
    Reno = 0,
    /// `mltcp_cubic` (CUBIC + HyStart based).
    Cubic = 1,
}

/// `struct tcp_sock` of the user-space build, opaque here.
#[repr(C)]
struct TcpSock {
    _opaque: [u8; 0],
}

extern "C" {
    fn dt_set_clock(hz: std::ffi::c_ulong, jiffies: u64);
    fn dt_set_params(v: *const u32, n: u32) -> i32;
    fn dt_get_stats(alg: u32, out: *mut BpfStats);
    fn dt_reset_stats();
    fn dt_name(alg: u32, name: *mut u8);
    fn dt_sock_new() -> *mut TcpSock;
    fn dt_sock_free(tp: *mut TcpSock);
    fn dt_sock_set(tp: *mut TcpSock, f: *const Fields);
    fn dt_sock_get(tp: *const TcpSock, f: *mut Fields);
    fn dt_sock_priv(tp: *const TcpSock) -> *const c_void;
    fn dt_init(alg: u32, tp: *mut TcpSock);
    fn dt_release(alg: u32, tp: *mut TcpSock);
    fn dt_ssthresh(alg: u32, tp: *mut TcpSock) -> u32;
    fn dt_undo_cwnd(alg: u32, tp: *mut TcpSock) -> u32;
    fn dt_cong_avoid(alg: u32, tp: *mut TcpSock, ack: u32, acked: u32);
    fn dt_cwnd_event(alg: u32, tp: *mut TcpSock, ev: i32);
    fn dt_set_state(alg: u32, tp: *mut TcpSock, state: u8);
    fn dt_pkts_acked(alg: u32, tp: *mut TcpSock, pkts: u32, rtt_us: i32);
}

static LOCK: Mutex<()> = Mutex::new(());

/// Exclusive access to the compiled program's globals (maps, HZ, clock): one test at a time.
pub struct Harness {
    _guard: MutexGuard<'static, ()>,
}

/// Takes the harness (waits for other tests to release it; a test that panicked holding it
/// does not poison the others).
pub fn harness() -> Harness {
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    Harness { _guard: guard }
}

impl Harness {
    /// Sets the kernel's HZ (`CONFIG_HZ`) and the jiffies clock (`bpf_jiffies64`).
    pub fn set_clock(&self, hz: u32, jiffies: u64) {
        // SAFETY: Writes two globals of the harness; the lock serializes access to them.
        unsafe { dt_set_clock(hz.into(), jiffies) }
    }

    /// Writes `p` into the program's parameter map, field by field in the generated header's
    /// order ([`bpf_param_names`]).
    pub fn set_params(&self, p: &Params) {
        let v: Vec<u32> = bpf_param_names()
            .map(|n| p.get(n).expect("bpf_param_names lists Params fields only"))
            .collect();
        let n = u32::try_from(v.len()).expect("a handful of parameters");
        // SAFETY: `v` holds `n` u32 values; the harness copies them only when `n` matches its
        // struct's field count.
        let rc = unsafe { dt_set_params(v.as_ptr(), n) };
        assert_eq!(
            rc, 0,
            "struct mltcp_params of the C does not have {n} fields"
        );
    }

    /// The program's counters of `alg`.
    pub fn stats(&self, alg: Alg) -> BpfStats {
        let mut s = BpfStats::default();
        // SAFETY: `s` is a valid `struct mltcp_stats` to write.
        unsafe { dt_get_stats(alg as u32, &mut s) };
        s
    }

    /// Zeroes the program's counters.
    pub fn reset_stats(&self) {
        // SAFETY: Clears a global of the harness, under the lock.
        unsafe { dt_reset_stats() }
    }

    /// The `name` of `alg`'s struct_ops table (what `TCP_CONGESTION` selects).
    pub fn name(&self, alg: Alg) -> String {
        let mut buf = [0u8; 16];
        // SAFETY: `buf` has the 16 bytes of `tcp_congestion_ops.name` the harness copies.
        unsafe { dt_name(alg as u32, buf.as_mut_ptr()) };
        let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..len]).into_owned()
    }

    /// A new zeroed socket (as the kernel zeroes `icsk_ca_priv` before `init`).
    pub fn sock(&self) -> Sock<'_> {
        // SAFETY: Allocates a zeroed struct; a null return is checked below.
        let ptr = unsafe { dt_sock_new() };
        Sock {
            tp: NonNull::new(ptr).expect("calloc of a tcp_sock failed"),
            _harness: PhantomData,
        }
    }
}

/// One socket of the compiled program, valid while the [`Harness`] is held.
pub struct Sock<'h> {
    tp: NonNull<TcpSock>,
    _harness: PhantomData<&'h Harness>,
}

impl Drop for Sock<'_> {
    fn drop(&mut self) {
        // SAFETY: `tp` came from dt_sock_new and is freed once, here.
        unsafe { dt_sock_free(self.tp.as_ptr()) }
    }
}

impl Sock<'_> {
    /// Writes every field of `f` into the socket.
    pub fn set(&mut self, f: &Fields) {
        // SAFETY: `tp` is live; `f` is a valid `struct dt_fields`.
        unsafe { dt_sock_set(self.tp.as_ptr(), f) }
    }

    /// Reads back the window fields the programs write (`cwnd`, `cwnd_cnt`, `ssthresh`) into
    /// `f`, leaving the others as they are.
    pub fn get(&self, f: &mut Fields) {
        // SAFETY: `tp` is live; `f` is a valid `struct dt_fields` to write.
        unsafe { dt_sock_get(self.tp.as_ptr(), f) }
    }

    /// A copy of `icsk_ca_priv`.
    pub fn ca_priv(&self) -> [u8; ICSK_CA_PRIV_SIZE] {
        let mut out = [0u8; ICSK_CA_PRIV_SIZE];
        // SAFETY: `icsk_ca_priv` of a live socket is ICSK_CA_PRIV_SIZE (104) bytes (13 u64s in
        // mltcp_kern.h), readable and not aliased mutably while `self` is borrowed.
        unsafe {
            let src = dt_sock_priv(self.tp.as_ptr()).cast::<u8>();
            std::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), ICSK_CA_PRIV_SIZE);
        }
        out
    }

    /// `icsk_ca_priv` read as the module's `mltcp` state.
    pub fn reno_state(&self) -> MltcpRenoState {
        let b = self.ca_priv();
        // SAFETY: MltcpRenoState is repr(C), integers only (every bit pattern valid) and smaller
        // than the 104 bytes read; read_unaligned needs no alignment.
        unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<MltcpRenoState>()) }
    }

    /// `icsk_ca_priv` read as the module's `mltcp_cubic` state.
    pub fn cubic_state(&self) -> MltcpCubicState {
        let b = self.ca_priv();
        // SAFETY: As in `reno_state`: repr(C) integers, 96 of the 104 bytes.
        unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<MltcpCubicState>()) }
    }

    /// The `init` callback of `alg`.
    pub fn init(&mut self, alg: Alg) {
        // SAFETY: `tp` is live and exclusively borrowed.
        unsafe { dt_init(alg as u32, self.tp.as_ptr()) }
    }

    /// The `release` callback.
    pub fn release(&mut self, alg: Alg) {
        // SAFETY: As in `init`.
        unsafe { dt_release(alg as u32, self.tp.as_ptr()) }
    }

    /// The `ssthresh` callback's answer.
    pub fn ssthresh(&mut self, alg: Alg) -> u32 {
        // SAFETY: As in `init`.
        unsafe { dt_ssthresh(alg as u32, self.tp.as_ptr()) }
    }

    /// The `undo_cwnd` callback's answer.
    pub fn undo_cwnd(&mut self, alg: Alg) -> u32 {
        // SAFETY: As in `init`.
        unsafe { dt_undo_cwnd(alg as u32, self.tp.as_ptr()) }
    }

    /// The `cong_avoid` callback for `acked` newly ACKed segments.
    pub fn cong_avoid(&mut self, alg: Alg, acked: u32) {
        // SAFETY: As in `init`.
        unsafe { dt_cong_avoid(alg as u32, self.tp.as_ptr(), 0, acked) }
    }

    /// The `cwnd_event` callback (`ev`: `enum tcp_ca_event`; 0 = `CA_EVENT_TX_START`).
    pub fn cwnd_event(&mut self, alg: Alg, ev: i32) {
        // SAFETY: As in `init`.
        unsafe { dt_cwnd_event(alg as u32, self.tp.as_ptr(), ev) }
    }

    /// The `set_state` callback, where the algorithm has one.
    pub fn set_state(&mut self, alg: Alg, state: u8) {
        // SAFETY: As in `init`.
        unsafe { dt_set_state(alg as u32, self.tp.as_ptr(), state) }
    }

    /// The `pkts_acked` callback, where the algorithm has one (`rtt_us` < 0: no sample).
    pub fn pkts_acked(&mut self, alg: Alg, pkts: u32, rtt_us: i32) {
        // SAFETY: As in `init`.
        unsafe { dt_pkts_acked(alg as u32, self.tp.as_ptr(), pkts, rtt_us) }
    }
}

/// The slot program's Report registers (`struct mltcp_slot_report` of
/// kmod/mltcp-bpf/bpf/mltcp_slot.h), in datapath-programs/mlcc-slot.ccp's declaration order:
/// bytes, packets, µs and bytes/s as the program's header comment says.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotReport {
    /// `Report.acked`, bytes.
    pub acked: u64,
    /// `Report.lost`, packets.
    pub lost: u64,
    /// `Report.rtt`, µs.
    pub rtt: u64,
    /// `Report.rin`, bytes/s.
    pub rin: u64,
    /// `Report.rout`, bytes/s.
    pub rout: u64,
    /// `Report.rate`, bytes/s.
    pub rate: u64,
    /// `Report.micros`, µs.
    pub micros: u64,
    /// `Report.now`, µs.
    pub now: u64,
    /// `Report.ssthresh`, bytes.
    pub ssthresh: u64,
    /// `Report.cap_seen`, bytes.
    pub cap_seen: u64,
    /// `Report.cut_us`, µs.
    pub cut_us: u64,
    /// `Report.base_rtt`, µs.
    pub base_rtt: u64,
    /// `Report.qdelay`, µs.
    pub qdelay: u64,
    /// `Report.scav_seen`, µs.
    pub scav_seen: u64,
}

impl SlotReport {
    /// The fields in MEASURE order.
    pub fn fields(&self) -> [u64; 14] {
        [
            self.acked,
            self.lost,
            self.rtt,
            self.rin,
            self.rout,
            self.rate,
            self.micros,
            self.now,
            self.ssthresh,
            self.cap_seen,
            self.cut_us,
            self.base_rtt,
            self.qdelay,
            self.scav_seen,
        ]
    }
}

/// The agent's controls (`struct mltcp_slot_ctl`): `Control.slot_us` (µs), `Control.cwnd_cap`
/// (bytes), `Control.scavenge_us` (µs, 0 = Reno).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotCtl {
    /// `Control.slot_us`, µs.
    pub slot_us: u64,
    /// `Control.cwnd_cap`, bytes.
    pub cwnd_cap: u64,
    /// `Control.scavenge_us`, µs.
    pub scavenge_us: u64,
}

/// One ACK's primitives (`struct mltcp_slot_ack`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotAck {
    /// `Ack.bytes_acked`, bytes.
    pub bytes_acked: u64,
    /// `Ack.lost_pkts_sample`, packets.
    pub lost_pkts: u64,
    /// `Flow.rtt_sample_us`, µs (0: no sample).
    pub rtt_us: u64,
    /// `Flow.rate_incoming`, bytes/s.
    pub rate_in: u64,
    /// `Flow.rate_outgoing`, bytes/s.
    pub rate_out: u64,
    /// `Ack.now`, µs.
    pub now_us: u64,
    /// `Flow.packets_in_flight`.
    pub in_flight: u64,
}

/// One flow's state under the C rule (`struct mltcp_slot_state`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotState {
    /// The Report registers.
    pub r: SlotReport,
    /// `Cwnd`, bytes.
    pub cwnd: u64,
    /// `Rate`, bytes/s.
    pub rate: u64,
    /// Clock value at which `Micros` was last 0, µs.
    pub time_zero_us: u64,
}

extern "C" {
    fn dt_slot_run(
        s: *mut SlotState,
        c: *const SlotCtl,
        a: *const SlotAck,
        clock_us: u64,
        out: *mut SlotReport,
    ) -> i32;
    fn dt_slot_start(s: *mut SlotState, clock_us: u64);
}

/// The outcome of one run of the C slot rule ([`SlotState::run`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotRun {
    /// The run stopped on an arithmetic failure (nothing enforced, nothing reported).
    Failed,
    /// The run completed, with the report it sent, if any.
    Ran(Option<SlotReport>),
}

impl SlotState {
    /// A program switch at `clock_us` (`mm_slot_start`): Report registers to their defaults.
    pub fn start(&mut self, clock_us: u64) {
        // SAFETY: `self` is a valid, exclusively borrowed `struct mltcp_slot_state`.
        unsafe { dt_slot_start(self, clock_us) }
    }

    /// One invocation (`mm_slot_run`) on `a` at `clock_us` with the controls `c`.
    pub fn run(&mut self, c: &SlotCtl, a: &SlotAck, clock_us: u64) -> SlotRun {
        let mut out = SlotReport::default();
        // SAFETY: All four pointers are to valid repr(C) values of the C structs' layout;
        // `self` and `out` are exclusively borrowed; the function keeps none of them.
        let rc = unsafe { dt_slot_run(self, c, a, clock_us, &mut out) };
        match rc {
            0 => SlotRun::Failed,
            r if r & 2 != 0 => SlotRun::Ran(Some(out)),
            _ => SlotRun::Ran(None),
        }
    }
}

extern "C" {
    fn dt_agent_reset();
    fn dt_agent_set(heartbeat_ns: u64, timeout_ns: u64, ktime_ns: u64);
    fn dt_agent_ctl(sid: u32, v: *const u8) -> i32;
    fn dt_agent_ring(out: *mut u8, cap: u32) -> u32;
    fn dt_agent_opts(out: *mut i32, cap: u32) -> u32;
    fn dt_sock_set_agent(
        tp: *mut TcpSock,
        mss: u32,
        lost: u32,
        packets_out: u32,
        family: u32,
        saddr: u32,
        daddr: u32,
        sport: u16,
        dport_be: u16,
    );
}

/// The agent datapath's fields of a socket ([`Sock::set_agent_fields`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct AgentFields {
    /// `tp->mss_cache`, bytes.
    pub mss: u32,
    /// `tp->lost`, packets.
    pub lost: u32,
    /// `tp->packets_out`.
    pub packets_out: u32,
    /// `skc_family` (2: AF_INET).
    pub family: u32,
    /// `skc_rcv_saddr`, network order.
    pub saddr: u32,
    /// `skc_daddr`, network order.
    pub daddr: u32,
    /// `skc_num`, host order.
    pub sport: u16,
    /// `skc_dport`, network order.
    pub dport_be: u16,
}

impl Harness {
    /// Empties the agent datapath's maps, storage, ring and setsockopt logs (no agent attached).
    pub fn agent_reset(&self) {
        // SAFETY: Clears globals of the harness (and frees its socket storage), under the lock.
        unsafe { dt_agent_reset() }
    }

    /// Sets the attach entry (`heartbeat_ns`, `timeout_ns`; a timeout of 0 leaves no entry) and
    /// the monotonic clock `bpf_ktime_get_ns` reads.
    pub fn agent_set(&self, heartbeat_ns: u64, timeout_ns: u64, ktime_ns: u64) {
        // SAFETY: Writes globals of the harness, under the lock.
        unsafe { dt_agent_set(heartbeat_ns, timeout_ns, ktime_ns) }
    }

    /// Writes flow `sid`'s control entry (`struct mltcp_agent_ctl`'s bytes, 56).
    pub fn agent_ctl(&self, sid: u32, v: &[u8; 56]) {
        // SAFETY: `v` holds the 56 bytes the harness copies.
        let rc = unsafe { dt_agent_ctl(sid, v.as_ptr()) };
        assert_eq!(rc, 0, "the harness's control table is full");
    }

    /// The records sent to the ring buffer since the last call, in order.
    pub fn agent_records(&self) -> Vec<Vec<u8>> {
        let mut buf = vec![0u8; 1 << 16];
        // SAFETY: `buf` has the capacity passed.
        let n = unsafe { dt_agent_ring(buf.as_mut_ptr(), buf.len() as u32) } as usize;
        let mut out = Vec::new();
        let mut at = 0;
        while at + 4 <= n {
            let len = u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes")) as usize;
            out.push(buf[at + 4..at + 4 + len].to_vec());
            at += 4 + len;
        }
        out
    }

    /// The `bpf_setsockopt` calls since the last call, as (level, optname, value).
    pub fn agent_sockopts(&self) -> Vec<(i32, i32, i32)> {
        let mut buf = [0i32; 3 * 64];
        // SAFETY: `buf` holds 64 triples, the capacity passed.
        let n = unsafe { dt_agent_opts(buf.as_mut_ptr(), 64) } as usize;
        buf.chunks_exact(3)
            .take(n)
            .map(|c| (c[0], c[1], c[2]))
            .collect()
    }
}

impl Sock<'_> {
    /// Sets the fields only the agent datapath reads.
    pub fn set_agent_fields(&mut self, a: &AgentFields) {
        // SAFETY: `tp` is live and exclusively borrowed.
        unsafe {
            dt_sock_set_agent(
                self.tp.as_ptr(),
                a.mss,
                a.lost,
                a.packets_out,
                a.family,
                a.saddr,
                a.daddr,
                a.sport,
                a.dport_be,
            )
        }
    }
}
