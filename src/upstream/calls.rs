//! A host's call of a downstream tool on rmcp's typed path: forwarded, cancelled with the
//! host's request, a server's `requestState` sealed for a 2026-07-28 host and opened on
//! its retry (`sealed.rs`), and, when the server needs the user to sign in and the host
//! can show the link (`sign_in.rs`), made once more after the sign-in.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse, Reference,
    ResultType,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::answers::{cancellable, host_answer, routed_error};
use super::{Upstream, held, sealed};
use crate::downstream::identity_of;
use crate::downstream::{Caller, DownstreamError, InputTo};
use crate::identity::Owner;
use crate::policy::{Authorized, Grant};

impl Upstream {
    /// What the caller of the request in `context` may see and call (`[[access]]`).
    pub(super) fn grant(&self, context: &RequestContext<RoleServer>) -> Grant {
        self.downstreams.grant(identity_of(context).as_ref())
    }

    /// Refuses, as for one that does not exist, a resource (`uri`), prompt (`prompt`) or
    /// completion reference of a server the caller may use none of the tools of.
    pub(super) fn may_reach(
        &self,
        context: &RequestContext<RoleServer>,
        reference: &Reference,
    ) -> Result<(), ErrorData> {
        let grant = self.grant(context);
        if grant.is_all() {
            return Ok(());
        }
        let visible = self.downstreams.catalog_for(&grant);
        let resources = visible.resources();
        match reference {
            Reference::Prompt(prompt) if resources.prompt(&prompt.name).is_none() => {
                let why = format!("unknown prompt '{}'", prompt.name);
                Err(ErrorData::invalid_params(why, None))
            }
            Reference::Resource(resource)
                if resources.server_of(&resource.uri).is_none()
                    && resources.server_of_template(&resource.uri).is_none() =>
            {
                let why = format!("no server has the resource '{}'", resource.uri);
                Err(ErrorData::resource_not_found(why, None))
            }
            Reference::Prompt(_) | Reference::Resource(_) => Ok(()),
            _ => Err(ErrorData::invalid_params(
                "an unknown kind of reference",
                None,
            )),
        }
    }

    /// What the host reads for its call `request` of a downstream tool (authorized by
    /// `proof`): the server's answer, or why there is none. A 2026-07-28 host's call may
    /// be answered `input_required`, the server's `requestState` sealed
    /// (`sealed.rs`); its retry's state is unsealed before it goes to the server. Its
    /// call of a legacy server's tool is held between its rounds (`held.rs`).
    pub(super) async fn call_tool_downstream(
        &self,
        mut request: CallToolRequestParams,
        proof: Authorized,
        caller: &Caller,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool = proof.tool().to_owned();
        if let Some(held) =
            held::resume(&request.request_state, &mut request.input_responses, &tool)?
        {
            let owner = caller.owner();
            return after_round(
                held.round(&context.ct, &self.downstreams).await?,
                &tool,
                owner,
            );
        }
        sealed::open_retry(&mut request.request_state, &tool)?;
        if caller.input == InputTo::Caller && self.downstreams.is_legacy_tool(&tool) {
            // A legacy server may ask during the call, by request: the call is held
            // between the host's rounds.
            let this = self.clone();
            let owner = caller.owner();
            let (caller, mut own) = (caller.clone(), context.clone());
            let held = held::Held::new(&tool, move |asks, stop| {
                own.ct = stop;
                let caller = Caller {
                    asks: Some(asks),
                    ..caller
                };
                Box::pin(async move { this.call_downstream(request, &proof, &caller, &own).await })
            });
            return after_round(
                held.round(&context.ct, &self.downstreams).await?,
                &tool,
                owner,
            );
        }
        let answer = self.call_downstream(request, &proof, caller, context).await;
        call_answer(answer, &tool, caller.owner())
    }
    /// What the host reads for its `prompts/get`: the server's prompt, or for a
    /// 2026-07-28 host what the server asks first (MRTR), its state sealed as a tool's.
    pub(super) async fn get_prompt_downstream(
        &self,
        mut request: GetPromptRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let prompt = Reference::for_prompt(request.name.clone());
        self.may_reach(context, &prompt)?;
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

/// What the host reads after one round of a held call for `owner`.
fn after_round(
    round: held::Round,
    tool: &str,
    owner: Option<Owner>,
) -> Result<CallToolResponse, ErrorData> {
    match round {
        held::Round::Ended(answer) => call_answer(answer, tool, owner),
        held::Round::Asked(asked) => Ok(CallToolResponse::InputRequired(asked)),
    }
}

/// What the host reads for a call's `answer`; a task it makes is `owner`'s.
fn call_answer(
    answer: Result<CallToolResponse, DownstreamError>,
    tool: &str,
    owner: Option<Owner>,
) -> Result<CallToolResponse, ErrorData> {
    match answer {
        Ok(CallToolResponse::Complete(mut result)) => {
            // A 2026-07-28 host requires resultType; rmcp strips it for older hosts.
            result.result_type = Some(ResultType::COMPLETE);
            Ok(CallToolResponse::Complete(result))
        }
        Ok(CallToolResponse::InputRequired(mut asked)) => {
            sealed::seal_asked(&mut asked, tool)?;
            Ok(CallToolResponse::InputRequired(asked))
        }
        Ok(CallToolResponse::Task(mut created)) => {
            let id = &created.task.task_id;
            created.task.task_id = sealed::task_id(tool, id, owner.as_ref())?;
            Ok(CallToolResponse::Task(created))
        }
        Ok(other) => Ok(other),
        Err(error) => host_answer(error).map(Into::into),
    }
}
