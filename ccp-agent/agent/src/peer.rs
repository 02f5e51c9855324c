// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The agent's gRPC service: `Notify` (another agent's dependency notice, queued for the portus
//! thread, which it wakes) and `Status` (the last slot's per-flow scheduled and achieved rates).

use crate::proto::{self, agent_server};
use crate::shared::Shared;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The service over the agent's [`Shared`] state.
#[derive(Clone)]
pub struct AgentService {
    shared: Arc<Shared>,
}

impl AgentService {
    /// A service over `shared`.
    pub fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

#[tonic::async_trait]
impl agent_server::Agent for AgentService {
    async fn notify(
        &self,
        req: Request<proto::DependencyNotice>,
    ) -> Result<Response<proto::NoticeReply>, Status> {
        let n = req.into_inner();
        if n.job.is_empty() || n.job.len() > 63 {
            return Err(Status::invalid_argument(format!(
                "notice job id {:?}: must be 1..=63 bytes",
                n.job
            )));
        }
        self.shared.deliver(n);
        Ok(Response::new(proto::NoticeReply { reduced_bytes: 0 }))
    }

    async fn status(
        &self,
        _req: Request<proto::StatusRequest>,
    ) -> Result<Response<proto::StatusReply>, Status> {
        Ok(Response::new(self.shared.status()))
    }
}
