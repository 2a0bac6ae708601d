//! A host's follow-ups of a task its call made (`tasks/get`, `tasks/update`,
//! `tasks/cancel`: the 2026-07-28 extension `io.modelcontextprotocol/tasks`): routed to the
//! server of the tool whose call made it, with the checkpoint's proof for that tool.

use rmcp::model::{ClientRequest, ServerResult};
use tokio_util::sync::CancellationToken;

use super::{Caller, DownstreamError, Downstreams};
use crate::policy::Authorized;

impl Downstreams {
    /// Forwards `request`, about a task (its id the server's) a call of the tool `proof`
    /// is for made, and returns the server's answer unchanged.
    pub async fn task_request(
        &self,
        request: ClientRequest,
        proof: &Authorized,
        caller: &Caller,
        cancel: &CancellationToken,
    ) -> Result<ServerResult, DownstreamError> {
        let (server, _) = self.locate(proof.tool())?;
        let cancel = cancel.child_token();
        let answer = server.task_request(request, proof.tool(), caller, &cancel);
        tokio::pin!(answer);
        self.until_shutdown(&server.config.name, &cancel, answer)
            .await
    }
}
