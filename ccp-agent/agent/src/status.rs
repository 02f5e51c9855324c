// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `ccp-agent status`: asks a running agent (gRPC `Status`) for its last slot and prints, per
//! controlled flow, the scheduled and the achieved rate and its DSCP (`-`: no traffic class,
//! the socket's own marking); or asks a switch daemon
//! (`FetchFeedback` of all its links) for its load table.

use crate::proto::{self, agent_client::AgentClient, switch_client::SwitchClient};
use anyhow::{anyhow, Result};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

fn mbit(bps: u64) -> String {
    format!("{:.2}", bps as f64 / 1e6)
}

/// The agent's status as a table (one line per flow), rates in Mbit/s.
pub fn format_agent(s: &proto::StatusReply) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "slot {} ({} ms, {}, work {} us): {} controlled flows, {} native; dropped: {} foreign, {} bad; notices received {}, RPC failures {}; bursts granted {} ({} on ack), PCN starts {} ({} ended on the burst)",
        s.slot,
        s.slot_us / 1000,
        s.mode,
        s.slot_work_us,
        s.flows.len(),
        s.native_flows,
        s.dropped_foreign,
        s.dropped_bad,
        s.notices_received,
        s.rpc_failures,
        s.bursts_granted,
        s.bursts_granted_on_ack,
        s.pcn_starts,
        s.pcn_ends_on_burst
    );
    let _ = writeln!(
        out,
        "{:<16} {:>4} {:<22} {:<22} {:>10} {:>10} {:>12} {:>8} {:>5} {:>9} {:>6} {:>4}",
        "job",
        "rank",
        "src",
        "dst",
        "sched_Mbps",
        "achv_Mbps",
        "left_bytes",
        "rtt_us",
        "lost",
        "outcome",
        "iter",
        "dscp"
    );
    for f in &s.flows {
        let _ = writeln!(
            out,
            "{:<16} {:>4} {:<22} {:<22} {:>10} {:>10} {:>12} {:>8} {:>5} {:>9} {:>6} {:>4}",
            f.job,
            f.rank,
            f.src,
            f.dst,
            mbit(f.scheduled_bps),
            mbit(f.achieved_bps),
            f.remaining_bytes,
            f.rtt_us,
            f.lost,
            f.outcome,
            f.iteration,
            f.dscp.map_or_else(|| String::from("-"), |d| d.to_string())
        );
    }
    out
}

/// A switch's table as text: per link capacity, estimate and the load of the K slots, Mbit/s,
/// and for an ECN link its marking threshold (bytes) and outstanding PCN starts.
pub fn format_switch(r: &proto::FeedbackReply) -> String {
    let mut out = format!(
        "slot {}: {} flow schedules; PCN starts {}, expired {}, tc failures {}\n",
        r.start_slot, r.flows, r.pcn_starts, r.pcn_expired, r.threshold_failures
    );
    for l in &r.links {
        let loads: Vec<String> = l.load_bps.iter().map(|b| mbit(*b)).collect();
        let _ = write!(
            out,
            "link {:>4}: capacity {} estimate {} load [{}]",
            l.link,
            mbit(l.capacity_bps),
            mbit(l.estimate_bps),
            loads.join(" ")
        );
        if l.ecn_threshold_bytes > 0 {
            let _ = write!(
                out,
                " ecn_threshold {} B, {} PCN starts",
                l.ecn_threshold_bytes, l.pcn_outstanding
            );
        }
        out.push('\n');
    }
    out
}

fn endpoint(addr: SocketAddr) -> Result<tonic::transport::Endpoint> {
    Ok(
        tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(2)),
    )
}

/// Fetches an agent's status.
pub async fn agent_status(addr: SocketAddr) -> Result<proto::StatusReply> {
    let ch = endpoint(addr)?
        .connect()
        .await
        .map_err(|e| anyhow!("agent {addr}: {e}"))?;
    Ok(AgentClient::new(ch)
        .status(proto::StatusRequest {})
        .await
        .map_err(|e| anyhow!("agent {addr}: {}", e.message()))?
        .into_inner())
}

/// Fetches a switch's whole table.
pub async fn switch_status(addr: SocketAddr) -> Result<proto::FeedbackReply> {
    let ch = endpoint(addr)?
        .connect()
        .await
        .map_err(|e| anyhow!("switch {addr}: {e}"))?;
    let req = proto::FeedbackRequest {
        links: vec![],
        exclude_flows: vec![],
        slot: 0,
    };
    Ok(SwitchClient::new(ch)
        .fetch_feedback(req)
        .await
        .map_err(|e| anyhow!("switch {addr}: {}", e.message()))?
        .into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_show_rates_in_mbit() {
        let s = proto::StatusReply {
            slot: 7,
            slot_us: 60_000,
            mode: "switch".into(),
            flows: vec![proto::FlowStatus {
                job: "j".into(),
                src: "10.0.0.1:1".into(),
                dst: "10.0.0.2:2".into(),
                scheduled_bps: 40_000_000,
                achieved_bps: 12_500_000,
                outcome: "raised".into(),
                ..Default::default()
            }],
            native_flows: 2,
            ..Default::default()
        };
        let t = format_agent(&s);
        assert!(
            t.starts_with("slot 7 (60 ms, switch, work 0 us): 1 controlled flows, 2 native"),
            "{t}"
        );
        assert!(
            t.contains("40.00") && t.contains("12.50") && t.contains("raised"),
            "{t}"
        );
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[1].ends_with("dscp") && lines[2].ends_with(" -"),
            "{t}"
        );
        let mut classed = s.clone();
        classed.flows[0].dscp = Some(34);
        let t = format_agent(&classed);
        assert!(t.lines().nth(2).is_some_and(|l| l.ends_with(" 34")), "{t}");
        let r = proto::FeedbackReply {
            start_slot: 3,
            flows: 1,
            links: vec![proto::LinkFeedback {
                link: 10,
                capacity_bps: 40_000_000,
                estimate_bps: 30_000_000,
                load_bps: vec![1_000_000, 0],
                ecn_threshold_bytes: 15_000,
                pcn_outstanding: 1,
            }],
            ..Default::default()
        };
        let t = format_switch(&r);
        assert!(
            t.contains("link   10: capacity 40.00 estimate 30.00 load [1.00 0.00] ecn_threshold 15000 B, 1 PCN starts"),
            "{t}"
        );
    }
}
