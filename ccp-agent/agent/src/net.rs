// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The shell's gRPC side: performs the agent core's RPC requests ([`Rpc`]) on the tokio runtime
//! and posts their answers back as core inputs through [`Shared::post`], which wakes the portus
//! thread. Nothing here blocks the portus thread while the agent runs: every request is a task.
//!
//! The control protocol of "Dynamic Flow Scheduling for DNN Training Workloads in Data
//! Centers", Sec. IV-C: `FetchFeedback` is always answered ([`Input::Feedback`], the reply or
//! why there is none); an `UpdateSchedule` with an admission wait is answered
//! ([`Input::Admission`]) within that wait while the RPC itself goes on to its own deadline (a
//! late reply still lands: the switch keeps the admitted schedule); `Notify` is not answered.
//! Every failed or timed-out RPC is counted in [`Shared::rpc_failures`], by RPC.

use crate::agent_core::{Input, Rpc};
use crate::config::AgentConfig;
use crate::proto::{agent_client::AgentClient, switch_client::SwitchClient};
use crate::shared::{RpcKind, Shared};
use crate::wall_us;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::Channel;

/// The agent's gRPC clients and the runtime their calls run on.
pub struct Net {
    rt: tokio::runtime::Handle,
    switches: HashMap<String, SwitchClient<Channel>>,
    peers: HashMap<SocketAddr, AgentClient<Channel>>,
    shared: Arc<Shared>,
}

/// The endpoint of the agent or switch at `addr`, connecting within a second.
fn endpoint(addr: impl std::fmt::Display) -> Option<tonic::transport::Endpoint> {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .ok()
        .map(|e| e.connect_timeout(Duration::from_secs(1)))
}

/// A channel to `addr` that connects at its first RPC; each call carries its own deadline.
fn channel(addr: SocketAddr) -> Option<Channel> {
    endpoint(addr).map(|e| e.connect_lazy())
}

impl Net {
    /// Clients for the switches of `cfg` (none in NIC-only mode): each connected at once when
    /// it answers within a second, else lazily at its first RPC. Answers go to `shared`.
    pub fn new(cfg: &AgentConfig, rt: tokio::runtime::Handle, shared: Arc<Shared>) -> Self {
        let list = if cfg.nic_only {
            Vec::new()
        } else {
            cfg.topology.switches.clone()
        };
        let switches = rt.block_on(async move {
            let mut out = HashMap::new();
            for s in list {
                let Some(ep) = endpoint(s.listen) else {
                    continue;
                };
                let ch = match tokio::time::timeout(Duration::from_secs(1), ep.connect()).await {
                    Ok(Ok(ch)) => ch,
                    _ => ep.connect_lazy(),
                };
                out.insert(s.name, SwitchClient::new(ch));
            }
            out
        });
        Net {
            rt,
            switches,
            peers: HashMap::new(),
            shared,
        }
    }

    fn peer(&mut self, addr: SocketAddr) -> Option<AgentClient<Channel>> {
        if let Some(c) = self.peers.get(&addr) {
            return Some(c.clone());
        }
        let _g = self.rt.enter();
        let c = AgentClient::new(channel(addr)?);
        self.peers.insert(addr, c.clone());
        Some(c)
    }

    /// Starts `rpc` as a task; its answer, when the core waits for one, is posted as an input.
    pub fn perform(&mut self, rpc: Rpc) {
        let shared = self.shared.clone();
        match rpc {
            Rpc::FetchFeedback {
                switch,
                request,
                timeout,
            } => {
                let client = self.switches.get(&switch).cloned();
                self.rt.spawn(async move {
                    let slot = request.slot;
                    let reply = match client {
                        None => Err(format!("no client for switch {switch:?}")),
                        Some(mut c) => {
                            match tokio::time::timeout(timeout, c.fetch_feedback(request)).await {
                                Ok(Ok(r)) => Ok(r.into_inner()),
                                Ok(Err(s)) => Err(s.message().to_string()),
                                Err(_) => Err(String::from("deadline passed")),
                            }
                        }
                    };
                    if reply.is_err() {
                        shared.rpc_failures.add(RpcKind::FetchFeedback);
                    }
                    shared.post(Input::Feedback {
                        switch,
                        slot,
                        at_us: wall_us(),
                        reply,
                    });
                });
            }
            Rpc::UpdateSchedule {
                switch,
                request,
                timeout,
                admission_wait,
            } => {
                let slot = request.slot;
                let task = self.update_task(switch.clone(), request, timeout);
                if let Some(wait) = admission_wait {
                    self.rt.spawn(async move {
                        // Only the wait is bounded here: the RPC goes on to its own deadline.
                        let reply = match tokio::time::timeout(wait, task).await {
                            Ok(Ok(r)) => r,
                            _ => None,
                        };
                        shared.post(Input::Admission {
                            switch,
                            slot,
                            reply,
                        });
                    });
                }
            }
            Rpc::Notify {
                peer,
                notice,
                timeout,
            } => {
                let Some(mut c) = self.peer(peer) else {
                    shared.rpc_failures.add(RpcKind::Notify);
                    tracing::debug!(peer = %peer, "Notify failed: no channel to the peer");
                    return;
                };
                self.rt.spawn(async move {
                    let why = match tokio::time::timeout(timeout, c.notify(notice)).await {
                        Ok(Ok(_)) => return,
                        Ok(Err(s)) => s.message().to_string(),
                        Err(_) => String::from("deadline passed"),
                    };
                    shared.rpc_failures.add(RpcKind::Notify);
                    tracing::debug!(peer = %peer, error = %why, "Notify failed");
                });
            }
        }
    }

    /// Performs `rpc` and waits until it is done (at shutdown, when no input is read any
    /// more); answers are not posted.
    pub fn perform_blocking(&mut self, rpc: Rpc) {
        match rpc {
            Rpc::UpdateSchedule {
                switch,
                request,
                timeout,
                ..
            } => {
                let task = self.update_task(switch, request, timeout);
                let _ = self.rt.block_on(task);
            }
            other => {
                tracing::debug!(rpc = ?other, "not sent at shutdown");
            }
        }
    }

    /// One `UpdateSchedule` as a task yielding the reply (`None` on failure, counted).
    fn update_task(
        &self,
        switch: String,
        request: crate::proto::ScheduleUpdate,
        timeout: Duration,
    ) -> tokio::task::JoinHandle<Option<crate::proto::UpdateReply>> {
        let client = self.switches.get(&switch).cloned();
        let shared = self.shared.clone();
        self.rt.spawn(async move {
            let r = match client {
                Some(mut c) => tokio::time::timeout(timeout, c.update_schedule(request)).await,
                None => {
                    shared.rpc_failures.add(RpcKind::UpdateSchedule);
                    tracing::debug!(switch = %switch, "UpdateSchedule failed: no client for the switch");
                    return None;
                }
            };
            match r {
                Ok(Ok(r)) => {
                    let r = r.into_inner();
                    for e in &r.errors {
                        tracing::warn!(switch = %switch, error = %e, "schedule refused");
                    }
                    Some(r)
                }
                _ => {
                    shared.rpc_failures.add(RpcKind::UpdateSchedule);
                    tracing::debug!(switch = %switch, "UpdateSchedule failed");
                    None
                }
            }
        })
    }
}
