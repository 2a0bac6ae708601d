//! A host's call of a downstream tool on rmcp's typed path: forwarded, cancelled with the
//! host's request, and, when the server needs the user to sign in and the host can show
//! the link (`sign_in.rs`), made once more after the sign-in.

use rmcp::RoleServer;
use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::service::RequestContext;

use super::Upstream;
use super::answers::cancellable;
use crate::downstream::{Caller, DownstreamError};
use crate::policy::Authorized;

impl Upstream {
    /// The downstream's answer to the host's call `request` (authorized by `proof`).
    pub(super) async fn call_downstream(
        &self,
        request: CallToolRequestParams,
        proof: &Authorized,
        caller: &Caller,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, DownstreamError> {
        // Kept for one more try after a sign-in the host is offered (OAuth servers only).
        let again = self
            .downstreams
            .any_browser_sign_in()
            .then(|| request.clone());
        let result = self.forward(request, proof, caller, context).await;
        let (Err(DownstreamError::NeedsSignIn { server, .. }), Some(request)) = (&result, again)
        else {
            return result;
        };
        match self.offer_sign_in(server, context).await {
            Ok(()) => self.forward(request, proof, caller, context).await,
            Err(why) => {
                tracing::info!(server = %server, %why, "no sign-in through the host");
                result
            }
        }
    }

    /// One host call of a downstream tool, cancelled with the host's request.
    async fn forward(
        &self,
        request: CallToolRequestParams,
        proof: &Authorized,
        caller: &Caller,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, DownstreamError> {
        let cancel = self.shutdown.child_token();
        let call = self
            .downstreams
            .call_tool(request, proof, Some(caller), &cancel);
        cancellable(call, &cancel, context).await
    }
}
