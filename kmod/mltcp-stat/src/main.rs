// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `mltcp-stat`: lists the TCP sockets of the current network namespace (IPv4 and IPv6) that use
//! `mltcp`/`mltcp_cubic` (or all with `--all`) with their congestion window, smoothed RTT and the
//! MLTCP state `tcp_mltcp.ko` reports over sock_diag (attribute 0x2000, which `ss -ti` cannot
//! decode): iterations, bytes_ratio, F, bytes per iteration, pinned flag.
//!
//! ```text
//! mltcp-stat [--all] [--json | --prometheus] [--watch MS [--count N]]
//! ```
//!
//! Exit status: 0 on success, 1 when the dump fails, 2 on a usage error.

use std::io::{self, Write};
use std::process::ExitCode;
use std::thread::sleep;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;

use mltcp_stat::diag::{connected_states, dump, DiagError, Family};
use mltcp_stat::report::{is_mltcp, prometheus, text_table, Row};

/// Command line.
#[derive(Parser, Debug)]
#[command(
    name = "mltcp-stat",
    version,
    about = "List TCP sockets using mltcp/mltcp_cubic with their MLTCP state (from sock_diag)",
    long_about = "List the connected TCP sockets of the current network namespace (IPv4 and IPv6) \
that use the mltcp or mltcp_cubic congestion control of tcp_mltcp.ko, one line each: addresses, \
state, algorithm, cwnd and smoothed RTT (struct tcp_info), and the MLTCP block the module reports \
(iterations completed, bytes_ratio, F, bytes per iteration, pinned = handed down by an agent). \
Run it inside a namespace with `ip netns exec NS mltcp-stat`."
)]
struct Cli {
    /// List every connected TCP socket, whatever its congestion control.
    #[arg(long)]
    all: bool,
    /// Print one JSON object per socket and line instead of a table.
    #[arg(long, conflicts_with = "prometheus")]
    json: bool,
    /// Print the MLTCP state in the Prometheus text format instead of a table (one sample per
    /// socket and metric, labelled local/remote/cc: mltcp_socket_bytes_ratio, mltcp_socket_f,
    /// mltcp_socket_iterations_total, mltcp_socket_bytes_per_iteration_bytes,
    /// mltcp_socket_pinned), e.g. for node_exporter's textfile collector.
    #[arg(long)]
    prometheus: bool,
    /// Repeat every MS milliseconds (until interrupted, or --count times).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    watch: Option<u64>,
    /// With --watch: stop after N listings.
    #[arg(long, value_name = "N", requires = "watch", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One listing: the sockets of both families, filtered, decoded.
fn rows(all: bool) -> Result<Vec<Row>, DiagError> {
    let mut out = Vec::new();
    for fam in [Family::V4, Family::V6] {
        for e in dump(fam, connected_states())? {
            if all || is_mltcp(&e) {
                out.push(Row::from_entry(&e));
            }
        }
    }
    Ok(out)
}

/// Prints one listing; `round` counts from 0.
fn print(out: &mut impl Write, cli: &Cli, round: u64, mut rows: Vec<Row>) -> io::Result<()> {
    if cli.prometheus {
        write!(out, "{}", prometheus(&rows))?;
    } else if cli.json {
        let t = cli.watch.map(|_| now_ms());
        for r in &mut rows {
            r.time_ms = t;
            writeln!(out, "{}", r.to_json())?;
        }
    } else {
        if round > 0 {
            writeln!(out)?;
        }
        write!(out, "{}", text_table(&rows))?;
        if rows.is_empty() && cli.watch.is_none() && !cli.all {
            eprintln!(
                "mltcp-stat: no TCP socket uses mltcp or mltcp_cubic (--all lists every socket)"
            );
        }
    }
    out.flush()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = io::stdout();
    let mut round = 0u64;
    loop {
        let listing = match rows(cli.all) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("mltcp-stat: {e}");
                return ExitCode::from(1);
            }
        };
        if let Err(e) = print(&mut stdout.lock(), &cli, round, listing) {
            if e.kind() == io::ErrorKind::BrokenPipe {
                return ExitCode::SUCCESS; // e.g. `mltcp-stat --watch 100 | head`
            }
            eprintln!("mltcp-stat: writing to stdout failed: {e}");
            return ExitCode::from(1);
        }
        round += 1;
        match (cli.watch, cli.count) {
            (None, _) => return ExitCode::SUCCESS,
            (Some(_), Some(n)) if round >= n => return ExitCode::SUCCESS,
            (Some(ms), _) => sleep(Duration::from_millis(ms)),
        }
    }
}
