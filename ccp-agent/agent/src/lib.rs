// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `ccp-agent`: the per-host DNN-aware flow scheduler on CCP, and its emulated switch daemon.
//!
//! The scheduler of "Dynamic Flow Scheduling for DNN Training Workloads in Data Centers" (Zhao,
//! Wu, Zhu; the "mlcc" prototype), Sec. IV–V, on `tcp_mltcp.ko`'s CCP datapath:
//!
//! - [`monitor`]: the monitoring block, over the `mltcp-progress` regions written by the
//!   communication libraries; flows of unregistered processes get no program (native MLTCP);
//! - [`agent_core`] (the crate `mlcc-agent-core`, re-exported): the scheduler as an I/O-free
//!   state machine (reports, progress readings, switch feedback, notices and the time in; rate
//!   updates, RPC requests and notices out): the per-slot work (slots of `--slot-ms`, aligned on
//!   the wall clock; horizon K), Alg. 1 + Alg. 2 through `mlcc_sched`, feedback from and
//!   schedules to the switches, dependency notices between agents. Its own crate, so that no
//!   runtime, datapath or RPC crate can reach it; it is configured with a
//!   [`agent_core::CoreConfig`] that [`config::AgentConfig::core_config`] builds;
//! - the shell around it: [`ccp`] (the portus 0.9 algorithm, the datapath side of the core's
//!   actions, and the IPC wrapper through which other threads' inputs reach portus's thread;
//!   the datapath program comes from a file, `datapath-programs/mlcc-slot.ccp`), [`ticker`]
//!   (the slot timer thread), [`net`] (the core's RPCs as tokio tasks, answers posted back);
//! - [`switch`]: the switch daemon (`ccp-agent switch`), a load table per link over K slots
//!   that admits the agents' schedules, and PCN's ECN thresholds, changed over rtnetlink by one
//!   ordered applier outside the state's lock;
//! - [`burst`]: the PCN burst gate, which answers the libraries' `before_burst` with PCN-START
//!   to the switches and grants the burst after one RTT or the switches' acknowledgement;
//! - [`proto`]: the gRPC services (tonic, no protoc) over the core's messages;
//! - [`config`]: `agent.toml` and `topo.toml`, refused with an error naming file, field, value;
//! - [`run`], [`status`], [`peer`], [`shared`]: wiring, `ccp-agent status`, the agent's gRPC
//!   service, state shared with it; [`flows`]: flow identities (the core's, re-exported).
//!
//! IPC: netlink to the kernel through `ccp_ipc::CheckedNetlink` (only messages with sender port
//! id 0, the kernel, are accepted; the rest are counted), or unix datagrams for user-space
//! datapaths. The kernel's CCP socket lives in the initial network namespace: the agent checks
//! at start-up that it runs there (`ccp_ipc::check_initial_netns`).
#![deny(missing_docs)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub use mlcc_agent_core as agent_core;
pub use mlcc_agent_core::flows;

pub mod burst;
pub mod ccp;
pub mod config;
mod core_config;
pub mod metrics;
pub mod monitor;
pub mod net;
pub mod peer;
pub mod proto;
pub mod run;
pub mod shared;
pub mod status;
pub mod switch;
pub mod ticker;

/// Wall-clock time in microseconds since the Unix epoch (0 if the clock is before it). Agents
/// and switches number slots from it, so their clocks must be synchronised (NTP/PTP) to well
/// under a slot.
pub fn wall_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// The connections accepted on `l`, with Nagle's algorithm off (tonic sets `TCP_NODELAY` only on
/// the connections of listeners it binds itself; without it a small reply can wait for the
/// peer's delayed ACK, tens of milliseconds, more than a slot's RPC deadline).
pub fn nodelay_incoming(
    l: tokio::net::TcpListener,
) -> impl tokio_stream::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    use tokio_stream::StreamExt;
    tokio_stream::wrappers::TcpListenerStream::new(l).map(|s| {
        let s = s?;
        s.set_nodelay(true)?;
        Ok(s)
    })
}
