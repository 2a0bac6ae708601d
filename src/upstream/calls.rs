//! A host's call of a downstream tool on rmcp's typed path: forwarded, cancelled with the
//! host's request, a server's `requestState` sealed for a 2026-07-28 host and opened on
//! its retry (`sealed.rs`), and, when the server needs the user to sign in and the host
//! can show the link (`sign_in.rs`), made once more after the sign-in.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse, ResultType,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::answers::{cancellable, host_answer, routed_error};
use super::{Upstream, sealed};
use crate::downstream::{Caller, DownstreamError};
use crate::policy::Authorized;

impl Upstream {
    /// What the host reads for its call `request` of a downstream tool (authorized by
    /// `proof`): the server's answer, or why there is none. A 2026-07-28 host's call may
    /// be answered `input_required`, the server's `requestState` sealed
    /// (`sealed.rs`); its retry's state is unsealed before it goes to the server.
    pub(super) async fn call_tool_downstream(
        &self,
        mut request: CallToolRequestParams,
        proof: &Authorized,
        caller: &Caller,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool = proof.tool().to_owned();
        sealed::open_retry(&mut request.request_state, &tool)?;
        match self.call_downstream(request, proof, caller, context).await {
            Ok(CallToolResponse::Complete(mut result)) => {
                // A 2026-07-28 host requires resultType; rmcp strips it for older hosts.
                result.result_type = Some(ResultType::COMPLETE);
                Ok(CallToolResponse::Complete(result))
            }
            Ok(CallToolResponse::InputRequired(mut asked)) => {
                sealed::seal_asked(&mut asked, &tool)?;
                Ok(CallToolResponse::InputRequired(asked))
            }
            Ok(CallToolResponse::Task(mut created)) => {
                created.task.task_id = sealed::task_id(&tool, &created.task.task_id)?;
                Ok(CallToolResponse::Task(created))
            }
            Ok(other) => Ok(other),
            Err(error) => host_answer(error).map(Into::into),
        }
    }

    /// What the host reads for its `prompts/get`: the server's prompt, or for a
    /// 2026-07-28 host what the server asks first (MRTR), its state sealed as a tool's.
    pub(super) async fn get_prompt_downstream(
        &self,
        mut request: GetPromptRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let cancel = self.shutdown.child_token();
        let caller = Caller::of(context, &self.session);
        let bound = format!("prompt {}", request.name);
        sealed::open_retry(&mut request.request_state, &bound)?;
        let get = self.downstreams.get_prompt(request, &caller, &cancel);
        match cancellable(get, &cancel, context).await {
            Ok(GetPromptResponse::Complete(mut prompt)) => {
                // A 2026-07-28 host requires resultType; rmcp strips it for older hosts.
                prompt.result_type = Some(ResultType::COMPLETE);
                Ok(prompt.into())
            }
            Ok(GetPromptResponse::InputRequired(mut asked)) => {
                sealed::seal_asked(&mut asked, &bound)?;
                Ok(GetPromptResponse::InputRequired(asked))
            }
            Ok(other) => Ok(other),
            Err(error) => Err(routed_error(error)),
        }
    }

    /// The downstream's answer to the host's call `request` (authorized by `proof`).
    async fn call_downstream(
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
