// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `mltcp-progress-dump [DIR]`: prints every progress region of `DIR` (default
//! `$MLTCP_PROGRESS_DIR` or `/dev/shm/mltcp-progress`) as the agent reads it: one line per
//! region, one indented line per flow, and one line per refused region naming the file, field and
//! value. To check that a library reports (job, iteration, bytes) without running the agent.
//! Exit status 0, or 1 if the directory cannot be read.

use mltcp_progress::{FlowKind, Paradigm, Role, Scanner, NO_RANK};

fn rank(r: u32) -> String {
    if r == NO_RANK {
        "-".into()
    } else {
        r.to_string()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") || args.len() > 1 {
        eprintln!("usage: mltcp-progress-dump [DIR]   (default: $MLTCP_PROGRESS_DIR or /dev/shm/mltcp-progress)");
        std::process::exit(if args.len() > 1 { 2 } else { 0 });
    }
    let mut scanner = match args.first() {
        Some(d) => Scanner::new(d),
        None => Scanner::from_env(),
    };
    let report = match scanner.scan() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mltcp-progress-dump: {}: {e}", scanner.dir().display());
            std::process::exit(1);
        }
    };
    for e in &report.refused {
        println!("refused {e}");
    }
    let (snaps, errors) = scanner.poll();
    for e in &errors {
        println!("unreadable {e}");
    }
    for (path, s) in snaps {
        let (j, h) = (&s.body.job, &s.body.hot);
        let alive = scanner.region(&path).is_some_and(|r| r.writer_alive());
        println!(
            "{} job={} rank={} world={} paradigm={:?} role={:?} pred={} succ={} bytes_per_iteration={} iteration={} iter_bytes={} total_bytes={} burst_requests={} writer_pid={}{}{}",
            path.display(),
            j.job_id,
            j.rank,
            j.world_size,
            Paradigm::from_raw(j.paradigm).expect("validated"),
            Role::from_raw(j.role).expect("validated"),
            rank(j.ring_pred),
            rank(j.ring_succ),
            j.bytes_per_iteration,
            h.iteration,
            h.iter_bytes,
            h.total_bytes,
            h.burst_requests,
            s.header.writer_pid,
            if alive { "" } else { " (writer gone)" },
            if s.closed() { " (closed)" } else { "" },
        );
        for f in &s.body.flows {
            println!(
                "  flow {} -> {} kind={:?} peer_rank={}",
                f.local(),
                f.remote(),
                FlowKind::from_raw(f.kind).expect("validated"),
                rank(f.peer_rank)
            );
        }
    }
}
