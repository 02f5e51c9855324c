// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Writer/reader round trips, regions of the wrong version or shape (refused with the file, field
//! and value named, while the scanner keeps serving the good ones), stale and crashed writers, and
//! the bounded burst wait.

mod common;

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{opts, TempDir};
use mltcp_progress::layout::{self, region_size};
use mltcp_progress::{
    BurstOutcome, FlowKind, FlowRecord, Paradigm, Region, Role, Scanner, Writer, NO_RANK,
};

/// Overwrites `bytes` at `off` in the file at `path`.
fn poke(path: &Path, off: u64, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(off)).unwrap();
    f.write_all(bytes).unwrap();
}

/// A copy of `src` named `<name>.region` in the same directory.
fn copy_as(src: &Path, name: &str) -> std::path::PathBuf {
    let dst = src.with_file_name(format!("{name}.region"));
    std::fs::copy(src, &dst).unwrap();
    dst
}

#[test]
fn round_trip_through_the_scanner() {
    let dir = TempDir::new("roundtrip");
    let mut w = Writer::create("bert", 2, &opts(dir.path(), 0)).unwrap();
    assert_eq!(w.path(), dir.path().join("bert.2.region"));
    w.set_job(Paradigm::ParameterServer, Role::Worker, 5);
    w.set_bytes_per_iteration(440_000_000);
    let push = FlowRecord::new(
        "10.0.0.3:41000".parse().unwrap(),
        "10.0.0.9:9000".parse().unwrap(),
        FlowKind::PsPush,
        4,
    );
    let pull = FlowRecord::new(
        "[fd00::3]:41001".parse().unwrap(),
        "[fd00::9]:9001".parse().unwrap(),
        FlowKind::PsPull,
        4,
    );
    w.set_flows(&[push, pull]).unwrap();
    w.begin_iteration(3);
    w.add_bytes(1000);
    w.add_bytes(500);

    let mut s = Scanner::new(dir.path());
    let rep = s.scan().unwrap();
    assert_eq!(rep.added, vec![w.path().to_path_buf()]);
    assert!(rep.refused.is_empty() && rep.removed.is_empty());
    let (snaps, errors) = s.poll();
    assert!(errors.is_empty(), "{errors:?}");
    let b = &snaps[0].1.body;
    assert_eq!(b.job.job_id, "bert");
    assert_eq!((b.job.rank, b.job.world_size), (2, 5));
    assert_eq!(
        Paradigm::from_raw(b.job.paradigm),
        Some(Paradigm::ParameterServer)
    );
    assert_eq!(Role::from_raw(b.job.role), Some(Role::Worker));
    assert_eq!((b.job.ring_pred, b.job.ring_succ), (NO_RANK, NO_RANK));
    assert_eq!(b.job.bytes_per_iteration, 440_000_000);
    assert_eq!(b.flows, vec![push, pull]);
    assert_eq!(
        (b.hot.iteration, b.hot.iter_bytes, b.hot.total_bytes),
        (3, 1500, 1500)
    );
    assert!(b.hot.iter_start_ns > 0 && b.hot.update_ns >= b.hot.iter_start_ns);
    let region = s.region(w.path()).unwrap();
    assert!(region.writer_alive());
    assert_eq!(region.header().writer_pid, std::process::id());

    // A new iteration resets the iteration's bytes, not the total; fewer flows clear the rest.
    w.begin_iteration(4);
    w.add_bytes(7);
    w.set_flows(&[pull]).unwrap();
    let snap = s.region(w.path()).unwrap().snapshot().unwrap();
    assert_eq!(
        (
            snap.body.hot.iteration,
            snap.body.hot.iter_bytes,
            snap.body.hot.total_bytes
        ),
        (4, 7, 1507)
    );
    assert_eq!(snap.body.flows, vec![pull]);

    // Closing removes the file; the next scan drops the region.
    let path = w.path().to_path_buf();
    drop(w);
    assert!(!path.exists());
    let rep = s.scan().unwrap();
    assert_eq!(rep.removed, vec![path]);
    assert_eq!(s.regions().count(), 0);
}

#[test]
fn writer_rejects_bad_arguments() {
    let dir = TempDir::new("args");
    for bad in ["", ".x", "a/b", "a b", &"j".repeat(64)] {
        let e = Writer::create(bad, 0, &opts(dir.path(), 0)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{bad:?}");
    }
    assert!(Writer::create("j", 0, &opts(dir.path(), layout::MAX_FLOWS_LIMIT + 1)).is_err());
    let mut w = Writer::create("j", 0, &opts(dir.path(), 2)).unwrap();
    // The same job and rank while the writer lives: EEXIST.
    let e = Writer::create("j", 0, &opts(dir.path(), 2)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
    let f = FlowRecord::new(
        "1.1.1.1:1".parse().unwrap(),
        "2.2.2.2:2".parse().unwrap(),
        FlowKind::RingSend,
        1,
    );
    assert!(w.set_flows(&[f, f, f]).is_err());
    w.add_flow(f).unwrap();
    w.add_flow(f).unwrap();
    assert_eq!(
        w.add_flow(f).unwrap_err().raw_os_error(),
        Some(libc::ENOSPC)
    );
    let mut bad = f;
    bad.family = 5;
    assert!(w.set_flows(&[bad]).is_err());
    assert_eq!(w.flows(), &[f, f]);
    // No temporary files left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("j.0.region")]);
}

#[test]
fn creates_a_missing_directory_world_writable_and_sticky() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("mkdir");
    let sub = dir.path().join("progress");
    let w = Writer::create("j", 0, &opts(&sub, 0)).unwrap();
    let mode = std::fs::metadata(&sub).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o1777);
    drop(w);
}

/// A corruption: file name, what it does to a copy of a valid region, the field and the start of
/// the value the refusal must name.
type Case<'a> = (&'a str, Box<dyn Fn(&Path)>, &'a str, &'a str);

/// Every way a region can be of the wrong version or shape: each refused once, naming the file,
/// the field and the value, while the good region keeps being served.
#[test]
fn bad_regions_are_refused_and_the_others_served() {
    let dir = TempDir::new("bad");
    let mut good = Writer::create("good", 0, &opts(dir.path(), 4)).unwrap();
    good.add_bytes(42);
    // A template to corrupt: a valid closed-over copy of another writer's region.
    let tmpl_writer = Writer::create("tmpl", 0, &opts(dir.path(), 4)).unwrap();
    let tmpl = dir.path().join("template.bin");
    std::fs::copy(tmpl_writer.path(), &tmpl).unwrap();
    drop(tmpl_writer);

    let long = (region_size(4) + 8).to_string();
    let cases: Vec<Case> = vec![
        (
            "magic",
            Box::new(|p| poke(p, 0, b"NOTMLTCP")),
            "magic",
            "0x",
        ),
        (
            "version",
            Box::new(|p| poke(p, 8, &2u32.to_ne_bytes())),
            "version",
            "2",
        ),
        (
            "header",
            Box::new(|p| poke(p, 12, &32u32.to_ne_bytes())),
            "header_size",
            "32",
        ),
        (
            "flowsize",
            Box::new(|p| poke(p, 24, &40u32.to_ne_bytes())),
            "flow_size",
            "40",
        ),
        (
            "maxflows",
            Box::new(|p| poke(p, 20, &0u32.to_ne_bytes())),
            "max_flows",
            "0",
        ),
        (
            "total",
            Box::new(|p| poke(p, 16, &1234u32.to_ne_bytes())),
            "total_size",
            "1234",
        ),
        (
            "short",
            Box::new(|p| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(p)
                    .unwrap()
                    .set_len(200)
                    .unwrap()
            }),
            "file size",
            "200",
        ),
        (
            "tiny",
            Box::new(|p| std::fs::write(p, b"x").unwrap()),
            "file size",
            "1",
        ),
        (
            "long",
            Box::new(|p| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(p)
                    .unwrap()
                    .set_len(region_size(4) as u64 + 8)
                    .unwrap()
            }),
            "file size",
            &long,
        ),
    ];
    for (name, corrupt, _, _) in &cases {
        let p = copy_as(&tmpl, name);
        corrupt(&p);
    }
    // A symlink to a good region is not followed.
    std::os::unix::fs::symlink(good.path(), dir.path().join("link.region")).unwrap();
    // Files that are not regions are ignored.
    std::fs::write(dir.path().join("notes.txt"), b"hello").unwrap();
    std::fs::write(dir.path().join(".inprogress.region"), b"").unwrap();

    let mut s = Scanner::new(dir.path());
    let rep = s.scan().unwrap();
    assert_eq!(rep.added, vec![good.path().to_path_buf()]);
    for (name, _, field, value) in &cases {
        let path = dir.path().join(format!("{name}.region"));
        let e = rep
            .refused
            .iter()
            .find(|e| e.path == path)
            .unwrap_or_else(|| panic!("{name} not refused: {rep:?}"));
        assert_eq!(e.field, *field, "{e}");
        assert!(e.value.starts_with(value), "{e}");
        let line = e.to_string();
        assert!(
            line.contains(&*path.to_string_lossy()) && line.contains(field),
            "{line}"
        );
    }
    let link = rep
        .refused
        .iter()
        .find(|e| e.path.ends_with("link.region"))
        .expect("symlink refused");
    assert_eq!(link.field, "file");
    assert_eq!(rep.refused.len(), cases.len() + 1, "{:?}", rep.refused);

    // Refused once: the next scan is quiet, and the good region is still served.
    let rep = s.scan().unwrap();
    assert!(
        rep.refused.is_empty() && rep.added.is_empty() && rep.removed.is_empty(),
        "{rep:?}"
    );
    let (snaps, errors) = s.poll();
    assert!(errors.is_empty());
    assert_eq!(snaps.len(), 1);
    assert_eq!(snaps[0].1.body.hot.total_bytes, 42);

    // A refused file replaced by a good one (a new file under the same name) is taken.
    let replaced = dir.path().join("version.region");
    std::fs::remove_file(&replaced).unwrap();
    // (Past the file-time granularity, so the new file differs from the old one even if it gets
    // the same inode number.)
    std::thread::sleep(Duration::from_millis(20));
    std::fs::copy(&tmpl, &replaced).unwrap();
    let rep = s.scan().unwrap();
    assert_eq!(rep.added, vec![replaced.clone()]);
    good.add_bytes(1);
}

/// Bodies that pass the header checks but hold values of the wrong shape: the region stays open
/// but its snapshots fail naming the field; `poll` reports each problem once and serves the rest.
#[test]
fn bad_bodies_are_reported_once() {
    let dir = TempDir::new("badbody");
    let good = Writer::create("good", 0, &opts(dir.path(), 4)).unwrap();
    let mut bad = Writer::create("bad", 0, &opts(dir.path(), 4)).unwrap();
    bad.add_bytes(1);
    let mut s = Scanner::new(dir.path());
    s.scan().unwrap();
    let (snaps, errors) = s.poll();
    assert_eq!((snaps.len(), errors.len()), (2, 0));

    // Paradigm 9 (with a matching checksum: a writer of another version, not a torn copy).
    let path = bad.path().to_path_buf();
    let region = Region::open(&path).unwrap();
    let mut img = std::fs::read(&path).unwrap();
    img[216..220].copy_from_slice(&9u32.to_ne_bytes());
    let sum = layout::checksum(&img, 4);
    img[layout::OFF_CHECKSUM..layout::OFF_CHECKSUM + 8].copy_from_slice(&sum.to_ne_bytes());
    poke(&path, 0, &img);
    let e = region.snapshot().unwrap_err();
    assert_eq!((e.field.as_str(), e.value.as_str()), ("paradigm", "9"));
    let (snaps, errors) = s.poll();
    assert_eq!(snaps.len(), 1);
    assert_eq!(snaps[0].1.body.job.job_id, "good");
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].to_string().contains("bad.0.region"),
        "{}",
        errors[0]
    );
    let (_, errors) = s.poll();
    assert!(errors.is_empty(), "reported again: {errors:?}");

    // A checksum that never matches.
    poke(&path, layout::OFF_CHECKSUM as u64, &[0xab; 8]);
    assert_eq!(region.snapshot().unwrap_err().field, "checksum");
    let (_, errors) = s.poll();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].field, "checksum");

    // A writer that died inside an update: seq odd for ever (transient-looking, so reported only
    // after it lasted BUSY_POLLS polls).
    poke(&path, layout::OFF_SEQ as u64, &7u64.to_ne_bytes());
    let e = region.snapshot().unwrap_err();
    assert_eq!((e.field.as_str(), e.value.as_str()), ("seq", "7"));
    assert!(e.is_transient());
    let mut reported = 0;
    for _ in 0..mltcp_progress::reader::BUSY_POLLS + 3 {
        reported += s.poll().1.len();
    }
    assert_eq!(reported, 1);

    // The header rewritten after open (same size): refused naming the header.
    poke(&path, layout::OFF_SEQ as u64, &8u64.to_ne_bytes());
    let mut img = std::fs::read(&path).unwrap();
    img[28..32].copy_from_slice(&1u32.to_ne_bytes()); // writer_pid
    img[216..220].copy_from_slice(&0u32.to_ne_bytes()); // a valid paradigm again
    let sum = layout::checksum(&img, 4);
    img[layout::OFF_CHECKSUM..layout::OFF_CHECKSUM + 8].copy_from_slice(&sum.to_ne_bytes());
    poke(&path, 0, &img);
    assert_eq!(region.snapshot().unwrap_err().field, "header");

    // The file shrunk under the reader: an error, not a crash.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(100)
        .unwrap();
    assert_eq!(region.snapshot().unwrap_err().field, "file");
    drop(good);
}

#[test]
fn crashed_writer_is_detected_and_its_region_replaced() {
    let dir = TempDir::new("crash");
    let w = Writer::create("j", 1, &opts(dir.path(), 0)).unwrap();
    let path = w.path().to_path_buf();
    // Pretend the file was left by a process that has exited.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    std::mem::forget(w); // no close: the file stays, like after a crash
    poke(&path, 28, &dead.to_ne_bytes());
    let r = Region::open(&path).unwrap();
    assert!(!r.writer_alive());
    let w2 =
        Writer::create("j", 1, &opts(dir.path(), 0)).expect("a dead writer's region is replaced");
    assert_eq!(
        Region::open(&path).unwrap().header().writer_pid,
        std::process::id()
    );
    drop(w2);
}

#[test]
fn burst_wait_without_agent_returns_at_once() {
    let dir = TempDir::new("burst-none");
    let mut w = Writer::create("j", 0, &opts(dir.path(), 0)).unwrap();
    let t = Instant::now();
    assert_eq!(
        w.before_burst(Duration::from_secs(5)),
        BurstOutcome::NoAgent
    );
    // Far below the 5 s a wait would cost; loose, as the host may be busy with other tests.
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(w.hot().burst_requests, 1);
}

#[test]
fn burst_wait_with_agent_granted_timed_out_and_stale() {
    let dir = TempDir::new("burst-agent");
    let mut w = Writer::create("j", 0, &opts(dir.path(), 0)).unwrap();
    let region = Region::open(w.path()).unwrap();
    region.attach(4242).unwrap();
    let area = region.agent_area().unwrap();
    assert_eq!(area.agent_pid, Some(4242));
    assert!(w.agent_view().agent_attached());

    // Attached, nobody grants: waits the whole timeout.
    let t = Instant::now();
    assert_eq!(
        w.before_burst(Duration::from_millis(50)),
        BurstOutcome::TimedOut
    );
    assert!(t.elapsed() >= Duration::from_millis(50));

    // The hot counters alone read the same as a snapshot's.
    assert_eq!(
        region.peek_hot().unwrap(),
        Some(region.snapshot().unwrap().body.hot)
    );
    assert_eq!(region.peek_hot().unwrap().unwrap().burst_requests, 1);

    // An agent thread grants what it sees requested (polling the hot counters, confirming
    // with a snapshot, as ccp-agent's burst gate does).
    let agent = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let peek = region.peek_hot().unwrap().map_or(0, |h| h.burst_requests);
            let s = region.snapshot().unwrap();
            if peek >= 2 && s.body.hot.burst_requests >= 2 {
                region.grant_bursts(s.body.hot.burst_requests).unwrap();
                return region;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("no second request");
    });
    assert_eq!(
        w.before_burst(Duration::from_secs(10)),
        BurstOutcome::Granted
    );
    let region = agent.join().unwrap();
    assert_eq!(region.agent_area().unwrap().burst_grant, Some(2));

    // A heartbeat 10 s old counts as no agent.
    let stale = layout::checked_word(monotonic_ms().wrapping_sub(10_000));
    poke(
        w.path(),
        layout::OFF_AGENT_HEARTBEAT as u64,
        &stale.to_ne_bytes(),
    );
    let t = Instant::now();
    assert_eq!(
        w.before_burst(Duration::from_secs(5)),
        BurstOutcome::NoAgent
    );
    region.heartbeat().unwrap();
    assert!(w.agent_view().agent_attached());
    // Detached: no wait.
    region.detach().unwrap();
    assert_eq!(
        w.before_burst(Duration::from_secs(5)),
        BurstOutcome::NoAgent
    );
    // Far below the 5 s a wait would cost; loose, as the host may be busy with other tests.
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

/// CLOCK_MONOTONIC in ms, 32 bits (the heartbeat's unit).
fn monotonic_ms() -> u32 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000) as u32
}

#[test]
fn scanner_region_limit_defers_then_admits() {
    let dir = TempDir::new("limit");
    let a = Writer::create("a", 0, &opts(dir.path(), 1)).unwrap();
    let b = Writer::create("b", 0, &opts(dir.path(), 1)).unwrap();
    let c = Writer::create("c", 0, &opts(dir.path(), 1)).unwrap();
    let mut s = Scanner::new(dir.path()).with_max_regions(2);
    let rep = s.scan().unwrap();
    assert_eq!(rep.added.len(), 2);
    assert_eq!(rep.refused.len(), 1);
    let e = &rep.refused[0];
    assert!(
        e.is_transient() && e.field == "directory" && e.path == c.path(),
        "{e}"
    );
    // Reported once, retried at every scan.
    assert!(s.scan().unwrap().refused.is_empty());
    drop(a);
    let rep = s.scan().unwrap();
    assert_eq!(rep.removed.len(), 1);
    assert_eq!(rep.added, vec![c.path().to_path_buf()]);
    drop(b);
}

#[test]
fn scanner_attaches_and_detaches_every_region() {
    let dir = TempDir::new("attach");
    let mut a = Writer::create("a", 0, &opts(dir.path(), 1)).unwrap();
    let b = Writer::create("b", 3, &opts(dir.path(), 1)).unwrap();
    let mut s = Scanner::new(dir.path());
    s.scan().unwrap();
    assert!(!a.agent_view().agent_attached());
    assert!(s.attach_all(77).is_empty());
    assert!(a.agent_view().agent_attached() && b.agent_view().agent_attached());
    for r in s.regions() {
        assert_eq!(r.agent_area().unwrap().agent_pid, Some(77));
    }
    s.detach_all();
    assert!(!b.agent_view().agent_attached());
    assert_eq!(
        a.before_burst(Duration::from_secs(5)),
        BurstOutcome::NoAgent
    );
}
