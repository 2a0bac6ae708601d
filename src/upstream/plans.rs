//! `execute_plan` and `approve_plan` for the host: a plan checked, its approval asked
//! for (an elicitation, a 2026-07-28 host's input-required retry, or `needs_approval`
//! and a token), then run with progress relayed and the lean result answered.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ClientResult, ContentBlock, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationSchema, ErrorCode, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, JsonObject, ProgressNotificationParam, ProgressToken,
    ProtocolVersion, ServerRequest,
};
use rmcp::service::{PeerRequestOptions, RequestContext, ServiceError};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Upstream, tool_error};
use crate::approval::{Channel, Request};
use crate::downstream::Caller;
use crate::exec::{ItemRecord, Observer, RunRecord, StepRecord, StepStatus, is_error};
use crate::pipelines::Pipelines;
use crate::plan::{PlannedStep, Ref, Template, ValidatedPlan, check_args, render_issues};
use crate::policy::{Approval, Approver, Route};
use crate::runner::Unchecked;

mod task;

impl Upstream {
    /// `execute_plan`: validates, asks for approval when a step needs it, runs.
    pub(super) async fn execute_plan(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let cancel = self.shutdown.child_token();
        let owner = Caller::of(context, &self.session).owner();
        let grant = self.grant(context);
        let checked = match self
            .runner
            .check(arguments.clone(), owner, &grant, &cancel)
            .await
        {
            Ok(checked) => checked,
            Err(why) => return unchecked(why),
        };
        if checked.plan.lazy() {
            // Seed 004's lazy mode: the blueprint, checked; nothing runs, nobody is asked.
            self.runner.live.note_planned(&checked);
            let mut answer = CallToolResult::structured(checked.planned());
            answer.content = vec![ContentBlock::text(format!(
                "Nothing ran (lazy plan). Send it again without \"mode\": \"lazy\" / \"dry_run\" to run it.\n{}",
                checked.planned_text()
            ))];
            answer.is_error = Some(false);
            return answer.into();
        }
        // A host that holds tasks may have the plan run as one (it asked, or the plan may
        // run longer than hosts wait for a call); its approval is then the task's
        // question, so it needs a host that shows forms.
        if task::runs_long(&checked.plan)
            && task::holds_tasks(context)
            && (checked.approval.is_none() || form_elicitation(context))
        {
            return self
                .plan_as_task(checked.plan, checked.approval, context)
                .unwrap_or_else(|e| tool_error(format!("{}; nothing ran", e.message)).into());
        }
        let approval = match checked.approval {
            None => None,
            Some(asked) => {
                let answer = Answer {
                    responses: request.input_responses,
                    state: request.request_state,
                };
                match self.ask(asked, arguments, answer, context).await {
                    Ok(approval) => Some(approval),
                    Err(Instead(response)) => return *response,
                }
            }
        };
        self.run(&checked.plan, approval, context, cancel).await
    }

    /// A pipeline called by name: its plan, with the call's arguments as inputs, checked,
    /// approved and run exactly as `execute_plan` would run it.
    pub(super) async fn call_pipeline(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let state = self.runner.pipelines().into_iter().find(|s| s.name == name);
        let ready = match state.map(|s| s.ready) {
            Some(Ok(ready)) => ready,
            Some(Err(why)) => {
                return Ok(tool_error(format!("pipeline '{name}' cannot run: {why}")).into());
            }
            None => {
                let why = "it is not configured";
                return Ok(tool_error(format!("pipeline '{name}' cannot run: {why}")).into());
            }
        };
        // The checkpoint for the call itself ([policy] deny); its steps meet it in turn.
        self.downstreams
            .policy()
            .authorize(
                &name,
                Some(ready.spec.tier),
                None,
                &Route::Direct,
                &self.grant(context),
            )
            .map_err(|denied| ErrorData::invalid_params(denied.to_string(), None))?;
        let Some(pipeline) = self.runner.pipeline(&name) else {
            return Ok(tool_error(format!("pipeline '{name}' is not configured")).into());
        };
        let inputs = Value::Object(request.arguments.clone().unwrap_or_default());
        // planmux is the server of this tool: the arguments meet its input schema here,
        // as a server's own would, before anything is asked or run.
        let literal = Template::<Ref>::Literal(inputs.clone());
        let problems = check_args(&ready.spec.input_schema, &literal, "arguments", &[]);
        if !problems.is_empty() {
            let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
            return Ok(tool_error(format!(
                "pipeline '{name}' was not run: its arguments do not fit its input schema: {}",
                list.join("; ")
            ))
            .into());
        }
        let mut as_plan = request;
        as_plan.arguments = match Pipelines::arguments(pipeline, inputs) {
            Value::Object(map) => Some(map),
            _ => None,
        };
        Ok(self.execute_plan(as_plan, context).await)
    }

    /// `approve_plan`: runs the plan a token stands for, once.
    pub(super) async fn approve_plan(
        &self,
        arguments: Option<JsonObject>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let arguments = arguments.unwrap_or_default();
        let Some(token) = arguments.get("token").and_then(Value::as_str) else {
            return tool_error(
                "approve_plan needs \"token\": the approval.token of execute_plan's needs_approval result; nothing ran".into(),
            )
            .into();
        };
        let steps = arguments.get("steps").cloned().unwrap_or(Value::Null);
        let inputs = arguments.get("inputs");
        let owner = Caller::of(context, &self.session).owner();
        let tokens = &self.runner.tokens;
        let (asked, plan) = match tokens
            .redeem_steps(token, &steps, inputs, owner.clone())
            .await
        {
            Ok(found) => found,
            Err(refused) => return tool_error(format!("{refused}; nothing ran")).into(),
        };
        let cancel = self.shutdown.child_token();
        let grant = self.grant(context);
        let checked = match self.runner.check(plan, owner, &grant, &cancel).await {
            Ok(checked) => checked,
            Err(why) => return unchecked(why),
        };
        // The catalog may have changed since approval was asked for (tiers, tools): what
        // needs approval now must be exactly what the user saw.
        if checked
            .approval
            .as_ref()
            .is_some_and(|now| now.steps != asked.steps || now.inputs != asked.inputs)
        {
            return tool_error(
                "the tools this plan calls, or what it reads from before, changed since approval was asked for; nothing ran. \
                 Send the plan to execute_plan again"
                    .into(),
            )
            .into();
        }
        let caller = Some(grant.caller()).filter(|c| !c.is_empty());
        let approval = self.runner.approve(&asked, Approver::Token, caller);
        self.run(&checked.plan, Some(approval), context, cancel)
            .await
    }

    /// Gets the user's yes to `asked`, or the answer to return instead: an elicitation for
    /// a host that can show one (for a 2026-07-28 host, an input-required result, and its
    /// retry carries the answer), a `needs_approval` result for any other.
    async fn ask(
        &self,
        asked: Request,
        arguments: Value,
        answer: Answer,
        context: &RequestContext<RoleServer>,
    ) -> Result<Arc<Approval>, Instead> {
        // A token is redeemed only in the session it was handed to.
        let owner = Caller::of(context, &self.session).owner();
        let grant = self.grant(context);
        let caller = Some(grant.caller()).filter(|c| !c.is_empty());
        if let Some(state) = answer.state {
            let approved = self
                .runner
                .tokens
                .redeem_digest(&state, &asked.digest, owner)
                .await
                .map_err(|refused| tool_error(format!("{refused}; nothing ran")))?;
            if approved.steps != asked.steps || approved.inputs != asked.inputs {
                return Err(tool_error(
                    "the tools this plan calls, or what it reads from before, changed while the user was asked; nothing ran"
                        .into(),
                )
                .into());
            }
            let reply = answer
                .responses
                .and_then(|mut responses| responses.remove(APPROVAL_KEY))
                .and_then(|reply| serde_json::from_value::<ElicitResult>(reply).ok());
            return match reply {
                Some(reply) => self.decided(&asked, reply.action, caller),
                None => {
                    self.runner.decline(&asked, Approver::Host, caller);
                    Err(tool_error(format!(
                    "the host's retry carried no answer to the approval request '{APPROVAL_KEY}'; nothing ran"
                ))
                .into())
                }
            };
        }
        crate::metrics::approval(crate::metrics::Approval::Asked);
        if form_elicitation(context) {
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: asked.message(),
                requested_schema: ElicitationSchema::new(Default::default()),
            };
            if context
                .protocol_version()
                .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
            {
                let token = self
                    .runner
                    .tokens
                    .issue(asked, Value::Null, Channel::Host, owner)
                    .await
                    .map_err(|e| tool_error(format!("{e}; nothing ran")))?;
                let request = InputRequest::Elicitation(ElicitRequest::new(params));
                let requests = InputRequests::from([(APPROVAL_KEY.to_owned(), request)]);
                return Err(InputRequiredResult::new(Some(requests), Some(token)).into());
            }
            match self.elicit(params, context).await {
                Elicited::Answer(action) => return self.decided(&asked, action, caller),
                Elicited::Unanswered(why) => {
                    self.runner.decline(&asked, Approver::Host, caller);
                    return Err(tool_error(format!("{why}; nothing ran")).into());
                }
                Elicited::Unsupported(error) => {
                    // The host said it could, then said it cannot: the model can still ask.
                    tracing::warn!(%error, "the host cannot show the approval request; answering needs_approval");
                }
            }
        }
        let expires_in_s = self.runner.tokens.ttl().as_secs();
        let token = self
            .runner
            .tokens
            .issue(asked.clone(), arguments, Channel::Model, owner)
            .await
            .map_err(|e| tool_error(format!("{e}; nothing ran")))?;
        Err(needs_approval(&asked, &token, expires_in_s).into())
    }

    /// Sends the approval request to the host and waits, within the plan time limit, for
    /// its user's answer. A request that times out or is cancelled is cancelled on the
    /// host too, so its dialog does not stay open.
    async fn elicit(
        &self,
        params: ElicitRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Elicited {
        let limit = self.runner.plan_timeout();
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        let peer = &context.peer;
        let handle = match peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(e) => {
                return Elicited::Unanswered(format!(
                    "the approval request could not be sent: {e}"
                ));
            }
        };
        let id = handle.id.clone();
        let (answer, why) = tokio::select! {
            answer = tokio::time::timeout(limit, handle.await_response()) => match answer {
                Ok(answer) => (Some(answer), String::new()),
                Err(_) => (None, format!("the host did not answer the approval request within {} ms", limit.as_millis())),
            },
            () = context.ct.cancelled() => (None, "the plan was cancelled while its approval was asked for".to_owned()),
        };
        let Some(answer) = answer else {
            let param = CancelledNotificationParam::new(Some(id), Some(why.clone()));
            let _ =
                tokio::time::timeout(Duration::from_secs(1), peer.notify_cancelled(param)).await;
            return Elicited::Unanswered(why);
        };
        match answer {
            Ok(ClientResult::ElicitResult(reply)) => Elicited::Answer(reply.action),
            Err(ServiceError::McpError(e)) if e.code == ErrorCode::METHOD_NOT_FOUND => {
                Elicited::Unsupported(e.message.to_string())
            }
            // Anything else (an error, a dismissed dialog some hosts report as one): no.
            Err(e) => Elicited::Unanswered(format!(
                "the host answered the approval request with an error ({e})"
            )),
            Ok(_) => Elicited::Unanswered(
                "the host answered the approval request with something else".into(),
            ),
        }
    }

    /// The user's answer: accepted, or the declined result.
    fn decided(
        &self,
        asked: &Request,
        action: ElicitationAction,
        caller: Option<&str>,
    ) -> Result<Arc<Approval>, Instead> {
        match action {
            ElicitationAction::Accept => Ok(self.runner.approve(asked, Approver::Host, caller)),
            // Decline, cancel, and anything a later protocol adds: not a yes.
            _ => {
                let how = if action == ElicitationAction::Cancel {
                    "cancelled"
                } else {
                    "declined"
                };
                self.runner.decline(asked, Approver::Host, caller);
                Err(tool_error(format!(
                    "the user {how} the plan's approval; nothing ran ({} step(s) needed it)",
                    asked.steps.len()
                ))
                .into())
            }
        }
    }

    /// Runs a validated plan, relaying progress and cancellation, and answers its result.
    async fn run(
        &self,
        plan: &ValidatedPlan,
        approval: Option<Arc<Approval>>,
        context: &RequestContext<RoleServer>,
        cancel: CancellationToken,
    ) -> CallToolResponse {
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| ProgressRelay::start(context.peer.clone(), token));
        let observer: &dyn Observer = match &progress {
            Some(relay) => relay,
            None => &crate::exec::Quiet,
        };
        let record = {
            // Each step's call is this session's: what its server asks comes back here.
            let caller = Caller::of(context, &self.session).for_plan();
            let run = self
                .runner
                .run(plan, approval, Some(caller), observer, cancel.clone());
            tokio::pin!(run);
            tokio::select! {
                record = &mut run => record,
                () = context.ct.cancelled() => {
                    cancel.cancel();
                    run.await
                }
            }
        };
        if let Some(relay) = progress {
            relay.finish().await;
        }
        self.answered(record).await.into()
    }

    /// A run's record as the answer the model reads.
    async fn answered(&self, record: Arc<RunRecord>) -> CallToolResult {
        let failed = is_error(&record);
        let (result, text) = self.runner.answer(record).await;
        let mut answer = CallToolResult::structured(result);
        answer.content = vec![ContentBlock::text(text)];
        answer.is_error = Some(failed);
        answer
    }
}

/// A plan that could not be checked, as the model reads it.
fn unchecked(why: Unchecked) -> CallToolResponse {
    match why {
        Unchecked::Invalid(issues) => tool_error(render_issues(&issues)).into(),
        Unchecked::Unfinished(why) => tool_error(why).into(),
    }
}

/// The key of planmux's approval request among a 2026-07-28 host's input requests.
const APPROVAL_KEY: &str = "planmux_approval";

/// The answer to give instead of running the plan (declined, unanswered, needs_approval,
/// input required).
struct Instead(Box<CallToolResponse>);

impl<T: Into<CallToolResponse>> From<T> for Instead {
    fn from(response: T) -> Self {
        Self(Box::new(response.into()))
    }
}

/// What became of an approval request sent to the host.
enum Elicited {
    /// The user's answer.
    Answer(ElicitationAction),
    /// No answer: out of time, cancelled, or refused with an error. Not a yes.
    Unanswered(String),
    /// The host does not take elicitation requests after all (method not found).
    Unsupported(String),
}

/// A 2026-07-28 host's retry of an input-required call.
struct Answer {
    responses: Option<InputResponses>,
    state: Option<String>,
}

/// Whether the host can show a form-mode elicitation (an empty elicitation capability
/// means form, for hosts older than modes).
fn form_elicitation(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|caps| caps.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// The `needs_approval` result: not an error; the model relays the token.
fn needs_approval(asked: &Request, token: &str, expires_in_s: u64) -> CallToolResult {
    let mut approval = json!({
        "token": token,
        "expires_in_s": expires_in_s,
        "steps": asked.steps,
    });
    let mut repeat = "\"steps\": <approval.steps, unchanged>".to_owned();
    if let Some(inputs) = &asked.inputs {
        approval["inputs"] = inputs.clone();
        repeat.push_str(", \"inputs\": <approval.inputs, unchanged>");
    }
    // What the plan's value steps make, for the user to see (bound to the plan: not
    // repeated).
    if !asked.values.is_empty() {
        approval["values"] = json!(asked.values);
    }
    // The steps are bounded already (each step's arguments as shown); only the prose is
    // cut, so a host that reads only text can still relay them.
    let text = format!(
        "Nothing ran. To run it, call approve_plan with {{\"token\": \"{token}\", {repeat}}}; \
         your user is asked to allow that call.\napproval: {}\n\n{}",
        approval,
        crate::text::clip(&asked.message(), 2_000)
    );
    let mut result = CallToolResult::structured(json!({
        "status": "needs_approval",
        "approval": approval,
    }));
    result.content = vec![ContentBlock::text(text)];
    result.is_error = Some(false);
    result
}

/// Sends one progress notification per finished step, in order, to the host.
struct ProgressRelay {
    token: ProgressToken,
    tx: mpsc::UnboundedSender<ProgressNotificationParam>,
    task: tokio::task::JoinHandle<()>,
}

impl ProgressRelay {
    fn start(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<ProgressNotificationParam>();
        let task = tokio::spawn(async move {
            while let Some(param) = rx.recv().await {
                let _ = peer.notify_progress(param).await;
            }
        });
        Self { token, tx, task }
    }

    /// Queues one notification: `finished` of `total` units of work (steps and items).
    fn send(&self, finished: usize, total: usize, message: String) {
        let param = ProgressNotificationParam::new(self.token.clone(), finished as f64)
            .with_total(total as f64)
            .with_message(message);
        let _ = self.tx.send(param);
    }

    /// Waits until every notification is sent, so none arrives after the result.
    async fn finish(self) {
        drop(self.tx);
        let _ = self.task.await;
    }
}

impl Observer for ProgressRelay {
    fn step_finished(&self, record: &StepRecord, finished: usize, total: usize) {
        let detail = match record.status {
            StepStatus::Skipped => record.reason.clone().unwrap_or_default(),
            _ => format!(
                "{}, {} ms",
                // A value step calls no tool.
                if record.tool.is_empty() {
                    "value"
                } else {
                    &record.tool
                },
                record.duration_ms.unwrap_or(0.0).round()
            ),
        };
        let message = format!("{} {}: {detail}", record.id, record.status.as_str());
        self.send(finished, total, message);
    }

    fn item_finished(&self, step: &PlannedStep, item: &ItemRecord, finished: usize, total: usize) {
        let message = format!("{} item {} {}", step.id, item.index, item.status.as_str());
        self.send(finished, total, message);
    }
}
