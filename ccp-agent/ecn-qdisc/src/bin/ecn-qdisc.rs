// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `ecn-qdisc`: set or show the ECN marking threshold of a qdisc over rtnetlink, as the PCN
//! switch daemon (`ccp-agent switch`) does; for operators and the VM tests (ci/vm-tests/ecn.sh).
//!
//! ```text
//! ecn-qdisc [--netns NS] --dev DEV [--parent MAJ:MIN] fq-codel --ce-threshold-us N
//! ecn-qdisc [--netns NS] --dev DEV [--parent MAJ:MIN] red --min-bytes N --max-bytes N \
//!           [--avpkt-bytes 1500] --rate-bps R
//! ecn-qdisc [--netns NS] show
//! ```
//! Each change prints the time it took (`--repeat N`: N changes on one socket). Exit status 1 with a message naming the qdisc on error.

use clap::{Parser, Subcommand};
use ecn_qdisc::{QdiscChanger, QdiscPath, Threshold};
use std::time::{Duration, Instant};

/// Set or show the ECN marking threshold of an fq_codel or RED qdisc over rtnetlink.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Network namespace: a name under /run/netns or a path (default: this process's).
    #[arg(long, global = true)]
    netns: Option<String>,
    /// Egress device of the qdisc (needed by the set commands).
    #[arg(long, global = true)]
    dev: Option<String>,
    /// Parent handle of the qdisc, tc notation (hexadecimal MAJ:MIN); default: root.
    #[arg(long, global = true)]
    parent: Option<String>,
    /// How long to wait for the kernel's answer, ms.
    #[arg(long, default_value_t = 1000, global = true)]
    timeout_ms: u64,
    /// Make the change this many times on one socket, printing each time (the first includes
    /// opening the socket in the namespace; the daemon keeps its socket, like the later ones).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000), global = true)]
    repeat: u32,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Set fq_codel's ce_threshold (every other parameter and the queued packets stay).
    FqCodel {
        /// The new ce_threshold, µs (≥ 1).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        ce_threshold_us: u32,
    },
    /// Set RED's min and max thresholds (weight, flags, max_P, limit and queue stay).
    Red {
        /// Average queue where marking starts, bytes.
        #[arg(long)]
        min_bytes: u32,
        /// Average queue from which every packet is marked, bytes (≥ min).
        #[arg(long)]
        max_bytes: u32,
        /// Average packet size, bytes (for the idle-damping table).
        #[arg(long, default_value_t = 1500)]
        avpkt_bytes: u32,
        /// The link's rate, bit/s (for the idle-damping table).
        #[arg(long)]
        rate_bps: u64,
    },
    /// List the namespace's qdiscs (RED ones with their thresholds).
    Show,
}

fn main() {
    let cli = Cli::parse();
    let mut c = QdiscChanger::new(Duration::from_millis(cli.timeout_ms));
    let threshold = match cli.cmd {
        Cmd::Show => match c.dump(&cli.netns) {
            Ok(qs) => {
                for q in qs {
                    let red = q.red.map_or(String::new(), |(p, max_p)| {
                        format!(
                            " min {} max {} Wlog {} flags {} max_P {:?}",
                            p.qth_min, p.qth_max, p.wlog, p.flags, max_p
                        )
                    });
                    println!(
                        "ifindex {} {} handle {:x}:{:x} parent {:x}:{:x}{red}",
                        q.ifindex,
                        q.kind,
                        q.handle.major,
                        q.handle.minor,
                        q.parent.major,
                        q.parent.minor
                    );
                }
                return;
            }
            Err(e) => {
                eprintln!("ecn-qdisc: {e}");
                std::process::exit(1);
            }
        },
        Cmd::FqCodel { ce_threshold_us } => Threshold::FqCodelCeUs(ce_threshold_us),
        Cmd::Red {
            min_bytes,
            max_bytes,
            avpkt_bytes,
            rate_bps,
        } => Threshold::Red {
            min_bytes,
            max_bytes,
            avpkt_bytes,
            rate_bps,
        },
    };
    let Some(dev) = cli.dev else {
        eprintln!("ecn-qdisc: --dev is needed to set a threshold");
        std::process::exit(2);
    };
    let path = QdiscPath {
        netns: cli.netns,
        dev,
        parent: cli.parent,
    };
    for _ in 0..cli.repeat {
        let t0 = Instant::now();
        match c.set(&path, threshold) {
            Ok(()) => println!("set in {} us", t0.elapsed().as_micros()),
            Err(e) => {
                eprintln!("ecn-qdisc: {e}");
                std::process::exit(1);
            }
        }
    }
}
