//! The sharded datapath (`ShardedDatapath`, what the kernel module runs): the same results as the
//! single-threaded `Datapath` on the same inputs, flow-table-full and drop causes across shards,
//! INSTALL reaching every shard's replica, the execution mode (compiled or interpreted) reaching
//! every replica, and many threads at once over per-shard mutexes (the
//! module's per-shard spinlocks) with a thread re-installing programs meanwhile.

mod common;

use ccp_datapath::wire::{self, EventMsg, InstrMsg, Msg};
use ccp_datapath::{
    Datapath, DropCause, Error, ExecMode, FlowInfo, FlowTable, Handled, Invoked, Primitives,
    Program, ProgramMaster, ProgramStore, ProgramTable, ShardedDatapath, Shards,
};
use common::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Programs in `Arc`s, as the kernel keeps them (there: the kernel's `Arc`).
struct ArcStore;

impl ProgramStore for ArcStore {
    type Shared = Arc<Program>;
    fn build(fill: impl FnOnce(&mut Program) -> Result<(), Error>) -> Result<Arc<Program>, Error> {
        let mut p = Box::new(Program::new());
        fill(&mut p)?;
        Ok(Arc::from(p))
    }
}

type Replica<const P: usize> = ProgramTable<P, Arc<Program>>;

/// A host with one mutex per shard and one for the master (the kernel: bottom-half spinlocks).
struct Host<const SHARDS: usize, const PER: usize, const P: usize> {
    shards: Vec<Mutex<(Box<FlowTable<PER>>, Replica<P>)>>,
    master: Mutex<ProgramMaster<P, Arc<Program>>>,
    /// Set while some thread holds a shard lock (to check the core never nests two).
    held: Vec<AtomicBool>,
}

impl<const SHARDS: usize, const PER: usize, const P: usize> Host<SHARDS, PER, P> {
    fn new() -> Self {
        Host {
            shards: (0..SHARDS)
                .map(|_| Mutex::new((Box::new(FlowTable::new()), ProgramTable::new())))
                .collect(),
            master: Mutex::new(ProgramMaster::new()),
            held: (0..SHARDS).map(|_| AtomicBool::new(false)).collect(),
        }
    }
}

impl<const SHARDS: usize, const PER: usize, const P: usize> Shards<PER, P, Arc<Program>>
    for Host<SHARDS, PER, P>
{
    fn with_shard<R>(
        &self,
        shard: usize,
        f: impl FnOnce(&mut FlowTable<PER>, &mut Replica<P>) -> R,
    ) -> Option<R> {
        let mut g = self.shards.get(shard)?.lock().unwrap();
        assert!(!self.held[shard].swap(true, Ordering::SeqCst));
        let (t, p) = &mut *g;
        let r = f(t, p);
        self.held[shard].store(false, Ordering::SeqCst);
        Some(r)
    }
    fn with_master<R>(&self, f: impl FnOnce(&mut ProgramMaster<P, Arc<Program>>) -> R) -> R {
        f(&mut self.master.lock().unwrap())
    }
}

type Dp<const S: usize, const PER: usize, const P: usize> = ShardedDatapath<S, PER, P, ArcStore>;

const PROG: &str = "(def (Report.acked 0) (Control.num_invoked 0) (Report.cwnd 0) (Report.rate 0))
     (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Control.num_invoked (+ Control.num_invoked 1))
        (:= Report.cwnd Cwnd) (:= Report.rate Rate) (:= Cwnd (+ Cwnd 1448)) (fallthrough))
     (when (== Control.num_invoked 5) (:= Control.num_invoked 0) (report))";

/// `PROG` compiled by portus, re-serialised as INSTALL of `uid`.
fn install_of(uid: u32) -> Vec<u8> {
    let (bytes, _, _) = compile_install(PROG);
    let (msg, _) = wire::parse(&bytes).unwrap();
    let Msg::Install(i) = msg else { panic!() };
    let events: Vec<EventMsg> = i.events().collect();
    let instrs: Vec<InstrMsg> = i.instrs().collect();
    let mut b = vec![0u8; 1 << 16];
    let n = wire::write_install(&mut b, 0, uid, &events, &instrs).unwrap();
    b.truncate(n);
    b
}

fn chg(sid: u32, uid: u32) -> Vec<u8> {
    let mut b = vec![0u8; 256];
    let n = wire::write_change_prog(&mut b, sid, uid, &[]).unwrap();
    b.truncate(n);
    b
}

fn cwnd_update(sid: u32, v: u64) -> Vec<u8> {
    let mut b = vec![0u8; 256];
    let n = wire::write_update_fields(
        &mut b,
        sid,
        &[wire::UpdateField {
            reg_type: 2,
            reg_index: 4,
            value: v,
        }],
    )
    .unwrap();
    b.truncate(n);
    b
}

fn info(port: u32) -> FlowInfo {
    FlowInfo {
        init_cwnd: 14480,
        mss: 1448,
        src_port: port,
        dst_port: 5201,
        ..Default::default()
    }
    .with_alg_name(b"mltcp")
    .unwrap()
}

fn prims(k: u64) -> Primitives {
    Primitives {
        bytes_acked: 1448 * (k % 3 + 1),
        packets_acked: 1,
        rtt_sample_us: 100 + k % 7,
        snd_cwnd: 14480 + 1448 * k,
        ..Primitives::default()
    }
}

/// What one flow's host saw: the messages sent (socket ids replaced by the flow's index, since
/// the two datapaths number slots differently) and the actuator calls.
fn normalised(ops: &MockOps, sid: u32, idx: u32) -> (Vec<Vec<u8>>, Vec<Act>) {
    let sent = ops
        .sent
        .iter()
        .map(|m| {
            let mut m = m.clone();
            // Every message a flow sends (CREATE, MEASURE) has the socket id at bytes 4..8.
            assert_eq!(u32::from_le_bytes(m[4..8].try_into().unwrap()), sid);
            m[4..8].copy_from_slice(&idx.to_le_bytes());
            m
        })
        .collect();
    (sent, ops.acts.clone())
}

/// The same flows, programs, messages and ACKs through `Datapath` and `ShardedDatapath`: every
/// flow sends the same messages, sets the same windows, and the counters agree.
#[test]
fn same_results_as_the_single_threaded_datapath() {
    let mut single = Box::new(Datapath::<64, 4>::new());
    let host = Host::<8, 8, 4>::new();
    let sharded = Dp::<8, 8, 4>::new(0);
    let mut scratch = MockOps::default();
    for uid in [1, 2] {
        assert!(single.handle_msg(&install_of(uid)).is_ok());
        assert_eq!(
            sharded.handle_msg(&host, &install_of(uid)),
            Ok(Handled::Installed { uid })
        );
    }
    let n = 40u32;
    let mut sids = vec![];
    for i in 0..n {
        let (mut a, mut b) = (MockOps::default(), MockOps::default());
        let s1 = single.flow_start(&info(i), &mut a).unwrap();
        let s2 = sharded.flow_start(&host, &info(i), &mut b).unwrap();
        assert_eq!(normalised(&a, s1, i), normalised(&b, s2, i));
        sids.push((s1, s2));
    }
    assert_eq!(sharded.num_flows(), n as usize);
    // Flows spread over every shard.
    let shards: HashSet<usize> = sids
        .iter()
        .map(|&(_, s)| Dp::<8, 8, 4>::locate(s).unwrap().shard)
        .collect();
    assert_eq!(shards.len(), 8);
    for (i, &(s1, s2)) in sids.iter().enumerate() {
        let uid = 1 + (i as u32 % 2);
        assert_eq!(
            single.handle_msg(&chg(s1, uid)).is_ok(),
            sharded.handle_msg(&host, &chg(s2, uid)).is_ok()
        );
        if i % 3 == 0 {
            assert!(single
                .handle_msg(&cwnd_update(s1, 30_000 + i as u64))
                .is_ok());
            assert!(sharded
                .handle_msg(&host, &cwnd_update(s2, 30_000 + i as u64))
                .is_ok());
        }
    }
    for k in 0..12u64 {
        for (i, &(s1, s2)) in sids.iter().enumerate() {
            let (mut a, mut b) = (
                MockOps {
                    now: 1_000 * k,
                    ..Default::default()
                },
                MockOps {
                    now: 1_000 * k,
                    ..Default::default()
                },
            );
            let r1 = single.flow_invoke(s1, &prims(k), &mut a);
            let r2 = sharded.flow_invoke(&host, s2, &prims(k), &mut b);
            assert_eq!(r1, r2);
            assert_eq!(normalised(&a, s1, i as u32), normalised(&b, s2, i as u32));
        }
        if k == 6 {
            // A replaced program is gone for its flows in both.
            assert!(single.handle_msg(&install_of(2)).is_ok());
            assert!(sharded.handle_msg(&host, &install_of(2)).is_ok());
        }
    }
    for (i, &(s1, s2)) in sids.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        let (mut a, mut b) = (MockOps::default(), MockOps::default());
        assert_eq!(
            single.flow_end(s1, &mut a),
            sharded.flow_end(&host, s2, &mut b)
        );
        assert_eq!(normalised(&a, s1, i as u32), normalised(&b, s2, i as u32));
    }
    assert_eq!(single.num_flows(), sharded.num_flows());
    let (st1, st2) = (single.stats().clone(), sharded.stats(&host));
    assert_eq!(st1, st2);
    assert!(st2.reports_sent > 0 && st2.count(Error::ProgramGone) > 0);
    // Ending again: unknown, counted in both.
    let (s1, s2) = sids[0];
    assert_eq!(single.flow_end(s1, &mut scratch), Err(Error::UnknownFlow));
    assert_eq!(
        sharded.flow_end(&host, s2, &mut scratch),
        Err(Error::UnknownFlow)
    );
    assert_eq!(sharded.num_flows(), n as usize / 2);
}

#[test]
fn full_only_when_every_shard_is_full() {
    let host = Host::<4, 2, 2>::new();
    let dp = Dp::<4, 2, 2>::new(0);
    let mut ops = MockOps::default();
    let sids: Vec<u32> = (0..8)
        .map(|i| dp.flow_start(&host, &info(i), &mut ops).unwrap())
        .collect();
    let slots: HashSet<u32> = sids.iter().map(|s| s & 0xffff).collect();
    assert_eq!(slots.len(), 8, "distinct slots: {sids:x?}");
    assert!(slots.iter().all(|&s| (1..=8).contains(&s)));
    assert_eq!(
        dp.flow_start(&host, &info(9), &mut ops),
        Err(Error::FlowTableFull)
    );
    assert_eq!(dp.stats(&host).count(Error::FlowTableFull), 1);
    // One free slot anywhere is found, whichever shard the round-robin starts from.
    let freed = sids[5];
    dp.flow_end(&host, freed, &mut ops).unwrap();
    let again = dp.flow_start(&host, &info(10), &mut ops).unwrap();
    assert_eq!(again & 0xffff, freed & 0xffff);
    assert_ne!(again, freed, "new generation");
    assert_eq!(dp.num_flows(), 8);
    for s in sids.iter().filter(|&&s| s != freed).chain([&again]) {
        dp.flow_end(&host, *s, &mut ops).unwrap();
    }
    assert_eq!(dp.num_flows(), 0);
    let st = dp.stats(&host);
    assert_eq!((st.flows_started, st.flows_ended), (9, 9));
}

#[test]
fn drops_are_told_apart_across_shards() {
    let host = Host::<4, 4, 2>::new();
    let dp = Dp::<4, 4, 2>::new(0);
    let mut ops = MockOps::default();
    let sids: Vec<u32> = (0..6)
        .map(|i| dp.flow_start(&host, &info(i), &mut ops).unwrap())
        .collect();
    let gone = sids[3];
    dp.flow_end(&host, gone, &mut ops).unwrap();
    assert_eq!(
        dp.handle_msg(&host, &cwnd_update(gone, 1)),
        Err((Error::UnknownFlow, DropCause::Late))
    );
    // Never handed out: generation ahead, generation 0, slot beyond the tables.
    let live = sids[2];
    for never in [
        (live & 0xffff) | ((live >> 16).wrapping_add(1) << 16),
        live & 0xffff,
        (1 << 16) | 17,
    ] {
        assert_eq!(
            dp.handle_msg(&host, &cwnd_update(never, 1)),
            Err((Error::UnknownFlow, DropCause::Malformed)),
            "sid {never:#x}"
        );
    }
    let mut short = cwnd_update(live, 1);
    short.truncate(6);
    assert_eq!(
        dp.handle_msg(&host, &short).unwrap_err().1,
        DropCause::Malformed
    );
    assert_eq!(
        dp.handle_msg(&host, &chg(live, 77)),
        Err((Error::ProgramNotFound, DropCause::Malformed))
    );
    assert_eq!(
        dp.handle_msg(&host, &cwnd_update(live, 1)),
        Ok(Handled::Updated { sid: live })
    );
    let st = dp.stats(&host);
    assert_eq!(st.count(Error::UnknownFlow), 4);
    assert_eq!(st.msgs_handled, 1);
}

#[test]
fn install_reaches_every_shard_and_replicas_follow_the_master() {
    let host = Host::<8, 2, 4>::new();
    let dp = Dp::<8, 2, 4>::new(0);
    let mut ops = MockOps::default();
    let sids: Vec<u32> = (0..16)
        .map(|i| dp.flow_start(&host, &info(i), &mut ops).unwrap())
        .collect();
    dp.handle_msg(&host, &install_of(1)).unwrap();
    dp.handle_msg(&host, &install_of(7)).unwrap();
    for &sid in &sids {
        assert_eq!(
            dp.handle_msg(&host, &chg(sid, 7)),
            Ok(Handled::ProgramChanged { sid, uid: 7 })
        );
        let r = dp.flow_invoke(&host, sid, &prims(1), &mut ops);
        assert!(matches!(r, Ok(Invoked::Ran { .. })), "{r:?}");
    }
    // uid 1 again: a new agent, the table is cleared, uid 7 is gone in every shard.
    dp.handle_msg(&host, &install_of(1)).unwrap();
    let version = host.master.lock().unwrap().table().version();
    for s in &host.shards {
        let g = s.lock().unwrap();
        assert_eq!(g.1.version(), version);
        assert!(g.1.by_uid(7).is_none() && g.1.by_uid(1).is_some());
    }
    for &sid in &sids {
        assert_eq!(
            dp.flow_invoke(&host, sid, &prims(2), &mut ops),
            Err(Error::ProgramGone)
        );
    }
    // The replicas share the master's program: one allocation per install, not per shard.
    let master = host.master.lock().unwrap();
    let p = master.table().by_uid(1).unwrap() as *const Program;
    for s in &host.shards {
        assert!(std::ptr::eq(s.lock().unwrap().1.by_uid(1).unwrap(), p));
    }
}

/// `set_exec_mode` reaches the master and every replica, and replicas an INSTALL refreshes
/// afterwards keep it (they copy the master's table); the mode is not a table change.
#[test]
fn exec_mode_reaches_every_shard_and_survives_installs() {
    let host = Host::<4, 2, 4>::new();
    let dp = Dp::<4, 2, 4>::new(0);
    let mut ops = MockOps::default();
    let modes = |host: &Host<4, 2, 4>| -> Vec<ExecMode> {
        let mut m = vec![host.master.lock().unwrap().table().exec_mode()];
        m.extend(host.shards.iter().map(|s| s.lock().unwrap().1.exec_mode()));
        m
    };
    assert!(modes(&host).iter().all(|&m| m == ExecMode::Compiled));
    dp.set_exec_mode(&host, ExecMode::Interpret);
    assert!(modes(&host).iter().all(|&m| m == ExecMode::Interpret));
    assert_eq!(host.master.lock().unwrap().table().version(), 0);
    dp.handle_msg(&host, &install_of(1)).unwrap();
    assert!(modes(&host).iter().all(|&m| m == ExecMode::Interpret));
    let sid = dp.flow_start(&host, &info(0), &mut ops).unwrap();
    dp.handle_msg(&host, &chg(sid, 1)).unwrap();
    let r = dp.flow_invoke(&host, sid, &prims(1), &mut ops);
    assert!(matches!(r, Ok(Invoked::Ran { .. })), "{r:?}");
    dp.set_exec_mode(&host, ExecMode::Compiled);
    assert!(modes(&host).iter().all(|&m| m == ExecMode::Compiled));
}

/// Many threads at once, as CPUs in the kernel: each starts flows, runs them through ACKs,
/// answers them with UPDATE_FIELDS and CHANGE_PROG and ends them; another thread re-installs
/// programs meanwhile. Afterwards: no flow left, every start matched by an end, no socket id
/// handed to two live flows at once, every replica at the master's table.
#[test]
fn threads_share_the_datapath() {
    const THREADS: usize = 6;
    const ROUNDS: usize = 300;
    let host = Arc::new(Host::<16, 8, 4>::new());
    let dp = Arc::new(Dp::<16, 8, 4>::new(0));
    dp.handle_msg(&*host, &install_of(1)).unwrap();
    dp.handle_msg(&*host, &install_of(2)).unwrap();
    let live = Arc::new(Mutex::new(HashSet::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let installer = {
        let (host, dp, stop) = (host.clone(), dp.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                dp.handle_msg(&*host, &install_of(2 + (n % 2) as u32))
                    .unwrap();
                n += 1;
            }
            n
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (host, dp, live) = (host.clone(), dp.clone(), live.clone());
            std::thread::spawn(move || {
                let mut ops = MockOps::default();
                let mut ran = 0u64;
                for r in 0..ROUNDS {
                    let mut mine = vec![];
                    for f in 0..3 {
                        let Ok(sid) = dp.flow_start(&*host, &info((t * 1000 + f) as u32), &mut ops)
                        else {
                            continue;
                        };
                        assert!(
                            live.lock().unwrap().insert(sid),
                            "sid {sid:#x} handed out twice"
                        );
                        mine.push(sid);
                    }
                    for &sid in &mine {
                        let _ = dp.handle_msg(&*host, &chg(sid, 1 + (r % 3) as u32));
                        for k in 0..10 {
                            ops.sent.clear();
                            if let Ok(Invoked::Ran { .. }) =
                                dp.flow_invoke(&*host, sid, &prims(k), &mut ops)
                            {
                                ran += 1;
                            }
                            if k == 4 {
                                dp.handle_msg(&*host, &cwnd_update(sid, 20_000)).unwrap();
                            }
                        }
                    }
                    for &sid in &mine {
                        assert!(live.lock().unwrap().remove(&sid));
                        dp.flow_end(&*host, sid, &mut ops).unwrap();
                        // A late answer to the flow just ended.
                        assert_eq!(
                            dp.handle_msg(&*host, &cwnd_update(sid, 1)).unwrap_err().1,
                            DropCause::Late
                        );
                    }
                }
                ran
            })
        })
        .collect();
    let ran: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    stop.store(true, Ordering::Relaxed);
    let installs = installer.join().unwrap();
    assert_eq!(dp.num_flows(), 0);
    let st = dp.stats(&*host);
    assert_eq!(st.flows_started, st.flows_ended);
    assert_eq!(st.flows_started, (THREADS * ROUNDS * 3) as u64);
    assert_eq!(st.programs_installed, installs + 2);
    assert!(ran > 0, "programs ran");
    let version = host.master.lock().unwrap().table().version();
    for s in &host.shards {
        let g = s.lock().unwrap();
        assert_eq!(g.0.live(), 0);
        assert_eq!(g.1.version(), version, "a replica behind the master");
    }
    println!("{ran} program runs, {installs} concurrent installs");
}
