//! The MCP server the host talks to: the merged catalog in `tools/list`, each `tools/call`
//! forwarded to its downstream, `execute_plan` with its approval (elicitation, the
//! host's input-required retry, or `approve_plan`). This is the one place that builds MCP
//! errors.

// Logging is deprecated by SEP-2577, but hosts still show relayed log messages.
#![allow(deprecated)]

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ClientResult, CompleteRequestParams, CompleteResult, ContentBlock, DiscoverResult,
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    ErrorCode, GetPromptRequestParams, GetPromptResponse, Implementation, InitializeRequestParams,
    InitializeResult, InputRequest, InputRequests, InputRequiredResult, InputResponses, JsonObject,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, ResultType, ServerCapabilities, ServerConfig,
    ServerRequest, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, Tool,
    ToolAnnotations, UnsubscribeRequestParams,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RequestContext, ServiceError, SubscriptionContext,
};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::approval::{APPROVE_PLAN_TOOL, Channel, Request};
use crate::downstream::{DownstreamError, Downstreams, HostLink, ProgressSink};
use crate::exec::{Observer, StepRecord, StepStatus, is_error, result_schema};
use crate::plan::{
    EXECUTE_PLAN_DESCRIPTION, EXECUTE_PLAN_TOOL, ValidatedPlan, execute_plan_input_schema,
    render_issues,
};
use crate::policy::{Approval, Approver, Confirm, Route, Tier};
use crate::runner::{PlanRunner, Unchecked};

/// Longest error text a tool result carries: room for every plan issue reported, a cap
/// for anything quoted from outside.
const MAX_ERROR_CHARS: usize = 16_000;

/// Run records are resources under this prefix: `planmux://runs/{run_id}`.
const RUNS_URI: &str = "planmux://runs/";

/// The upstream MCP server.
#[derive(Clone)]
pub struct Upstream {
    downstreams: Arc<Downstreams>,
    runner: Arc<PlanRunner>,
    host: Arc<HostLink>,
    /// Cancelled when planmux shuts down: every call in flight stops.
    shutdown: CancellationToken,
    /// How many listen streams hold each resource URI: the downstream subscription is
    /// made for the first and ended with the last.
    listening: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
}

impl Upstream {
    /// A server over started downstreams; `host` is the link the downstreams relay to.
    pub fn new(
        downstreams: Arc<Downstreams>,
        runner: Arc<PlanRunner>,
        host: Arc<HostLink>,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            downstreams,
            runner,
            host,
            shutdown,
            listening: Arc::default(),
        }
    }

    /// Counts a listen stream's interest in `uri`: true when it is the first (`add`) or
    /// the last (not `add`), when the downstream must be told.
    fn hold(&self, uri: &str, add: bool) -> bool {
        let mut counts = self
            .listening
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = counts.entry(uri.to_owned()).or_default();
        if add {
            *count += 1;
            return *count == 1;
        }
        *count = count.saturating_sub(1);
        let last = *count == 0;
        if last {
            counts.remove(uri);
        }
        last
    }

    /// Waits for the servers' first start: in full for a host that ignores `list_changed`,
    /// else within the list grace.
    async fn settle(&self, context: &RequestContext<RoleServer>) {
        let full = context
            .client_info()
            .is_some_and(|info| IGNORE_LIST_CHANGED.contains(&info.name.as_str()));
        self.downstreams.settled(full).await;
    }

    /// planmux's instructions, then each server's own under its name, bounded: each to
    /// 2,000 characters, all to 8,000 (the servers that no longer fit are named).
    fn instructions(&self) -> String {
        let mut text = OWN_INSTRUCTIONS.to_owned();
        let mut left_out = Vec::new();
        for (server, own) in self.downstreams.instructions() {
            let part = format!(
                "\n\n## {server}\n{}",
                crate::text::clip(own.trim(), MAX_SERVER_INSTRUCTIONS)
            );
            if text.len() + part.len() > MAX_INSTRUCTIONS {
                left_out.push(server);
            } else {
                text.push_str(&part);
            }
        }
        if !left_out.is_empty() {
            text.push_str(&format!(
                "\n\n(Instructions of {} left out for length.)",
                left_out.join(", ")
            ));
        }
        text
    }

    /// The `execute_plan` tool definition. Its hints are honest about what a plan can
    /// reach: read-only when every tool is, destructive when any tool is.
    fn execute_plan_tool(&self) -> Tool {
        let catalog = self.downstreams.catalog();
        let most = catalog.tool_specs().iter().map(|t| t.tier).max();
        let confirm = self.runner.confirm();
        let description = if confirm == Confirm::None {
            EXECUTE_PLAN_DESCRIPTION.to_owned()
        } else {
            format!("{EXECUTE_PLAN_DESCRIPTION}\n\n{APPROVAL_NOTE}")
        };
        Tool::new(
            EXECUTE_PLAN_TOOL,
            description,
            Arc::new(as_object(execute_plan_input_schema())),
        )
        .with_raw_output_schema(Arc::new(as_object(result_schema())))
        .with_annotations(
            ToolAnnotations::new()
                .read_only(most.is_none_or(|t| t == Tier::Read))
                .destructive(most == Some(Tier::Destructive))
                .open_world(true),
        )
    }

    /// The `approve_plan` tool definition: destructive, so that hosts ask their user.
    fn approve_plan_tool() -> Tool {
        Tool::new(
            APPROVE_PLAN_TOOL,
            "Runs a plan that execute_plan answered with status \"needs_approval\": pass its \
             approval.token and repeat approval.steps (and approval.inputs, when present) exactly. Your user sees these steps when \
             asked to allow this call. The token runs its plan once and expires after 10 minutes.",
            Arc::new(as_object(json!({
                "type": "object",
                "properties": {
                    "token": {"type": "string", "description": "approval.token from execute_plan's result"},
                    "steps": {
                        "type": "array",
                        "description": "approval.steps from execute_plan's result, unchanged: each step's id, tool, tier and arguments as written",
                        "items": {"type": "object"}
                    },
                    "inputs": {"description": "approval.inputs from execute_plan's result, unchanged, when it has them"}
                },
                "required": ["token", "steps"]
            }))),
        )
        .with_raw_output_schema(Arc::new(as_object(result_schema())))
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(true),
        )
    }

    /// `execute_plan`: validates, asks for approval when a step needs it, runs.
    async fn execute_plan(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let cancel = self.shutdown.child_token();
        let checked = match self.runner.check(arguments.clone(), &cancel).await {
            Ok(checked) => checked,
            Err(why) => return unchecked(why),
        };
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

    /// `approve_plan`: runs the plan a token stands for, once.
    async fn approve_plan(
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
        let (asked, plan) = match self.runner.tokens.redeem_steps(token, &steps, inputs) {
            Ok(found) => found,
            Err(refused) => return tool_error(format!("{refused}; nothing ran")).into(),
        };
        let cancel = self.shutdown.child_token();
        let checked = match self.runner.check(plan, &cancel).await {
            Ok(checked) => checked,
            Err(why) => return unchecked(why),
        };
        // The catalog may have changed since approval was asked for (tiers, tools): what
        // needs approval now must be exactly what the user saw.
        if checked
            .approval
            .as_ref()
            .is_some_and(|now| now.steps != asked.steps)
        {
            return tool_error(
                "the tools this plan calls changed since approval was asked for; nothing ran. \
                 Send the plan to execute_plan again"
                    .into(),
            )
            .into();
        }
        let approval = self.runner.approve(&asked, Approver::Token);
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
        if let Some(state) = answer.state {
            let approved = self
                .runner
                .tokens
                .redeem_digest(&state, &asked.digest)
                .map_err(|refused| tool_error(format!("{refused}; nothing ran")))?;
            if approved.steps != asked.steps {
                return Err(tool_error(
                    "the tools this plan calls changed while the user was asked; nothing ran"
                        .into(),
                )
                .into());
            }
            let reply = answer
                .responses
                .and_then(|mut responses| responses.remove(APPROVAL_KEY))
                .and_then(|reply| serde_json::from_value::<ElicitResult>(reply).ok());
            return match reply {
                Some(reply) => self.decided(&asked, reply.action),
                None => {
                    self.runner.decline(&asked, Approver::Host);
                    Err(tool_error(format!(
                    "the host's retry carried no answer to the approval request '{APPROVAL_KEY}'; nothing ran"
                ))
                .into())
                }
            };
        }
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
                    .issue(asked, Value::Null, Channel::Host)
                    .map_err(|e| tool_error(format!("{e}; nothing ran")))?;
                let request = InputRequest::Elicitation(ElicitRequest::new(params));
                let requests = InputRequests::from([(APPROVAL_KEY.to_owned(), request)]);
                return Err(InputRequiredResult::new(Some(requests), Some(token)).into());
            }
            match self.elicit(params, context).await {
                Elicited::Answer(action) => return self.decided(&asked, action),
                Elicited::Unanswered(why) => {
                    self.runner.decline(&asked, Approver::Host);
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
            .issue(asked.clone(), arguments, Channel::Model)
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
    ) -> Result<Arc<Approval>, Instead> {
        match action {
            ElicitationAction::Accept => Ok(self.runner.approve(asked, Approver::Host)),
            // Decline, cancel, and anything a later protocol adds: not a yes.
            _ => {
                let how = if action == ElicitationAction::Cancel {
                    "cancelled"
                } else {
                    "declined"
                };
                self.runner.decline(asked, Approver::Host);
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
            let run = self.runner.run(plan, approval, observer, cancel.clone());
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
        let failed = is_error(&record);
        let (result, text) = self.runner.answer(record).await;
        let mut answer = CallToolResult::structured(result);
        answer.content = vec![ContentBlock::text(text)];
        answer.is_error = Some(failed);
        answer.into()
    }
}

/// A plan that could not be checked, as the model reads it.
fn unchecked(why: Unchecked) -> CallToolResponse {
    match why {
        Unchecked::Invalid(issues) => tool_error(render_issues(&issues)).into(),
        Unchecked::Unfinished(why) | Unchecked::Unshowable(why) => tool_error(why).into(),
    }
}

/// Hosts known to ignore `list_changed` (by `clientInfo.name`): their lists wait for
/// every server's first start, since a server announced later would never be seen.
/// Claude Desktop reads the tool list once per connection.
const IGNORE_LIST_CHANGED: [&str; 1] = ["claude-ai"];

/// Longest instructions taken from one server, and from all of them together.
const MAX_SERVER_INSTRUCTIONS: usize = 2_000;
const MAX_INSTRUCTIONS: usize = 8_000;

/// planmux's own instructions, before each server's.
const OWN_INSTRUCTIONS: &str = "planmux fronts several MCP servers: their tools and prompts are \
    listed as <server>__<name>, their resources under their own URIs. To run several calls \
    that feed each other, send one execute_plan instead of one call per turn.";

/// The key of planmux's approval request among a 2026-07-28 host's input requests.
const APPROVAL_KEY: &str = "planmux_approval";

/// What `execute_plan`'s description adds when plans may need approval.
const APPROVAL_NOTE: &str = "Before a plan that calls a write or destructive tool runs, your user approves it: \
    either planmux asks them directly, or the result has status \"needs_approval\" with \
    approval.token and approval.steps; then call approve_plan with both, unchanged.";

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

fn as_object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
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
                record.tool,
                record.duration_ms.unwrap_or(0.0).round()
            ),
        };
        let message = format!("{} {}: {detail}", record.id, record.status.as_str());
        let param = ProgressNotificationParam::new(self.token.clone(), finished as f64)
            .with_total(total as f64)
            .with_message(message);
        let _ = self.tx.send(param);
    }
}

/// A resource's contents as the host gets them: `resultType: "complete"`, which a
/// 2026-07-28 host requires (rmcp strips it for older hosts).
fn complete_read(mut result: ReadResourceResult) -> ReadResourceResponse {
    result.result_type = Some(ResultType::COMPLETE);
    result.into()
}

/// Runs a routed request until it ends or the host cancels it (then the downstream is
/// told, and the request ends with that).
async fn cancellable<T>(
    request: impl Future<Output = Result<T, DownstreamError>>,
    cancel: &CancellationToken,
    context: &RequestContext<RoleServer>,
) -> Result<T, DownstreamError> {
    tokio::pin!(request);
    tokio::select! {
        result = &mut request => result,
        () = context.ct.cancelled() => {
            cancel.cancel();
            request.await
        }
    }
}

/// A routed request's failure as the host's error: a server's own error as it is, an
/// unknown name as invalid params, an unknown resource as not found, anything else
/// (timeouts, a dead server) as an internal error naming the server.
fn routed_error(error: DownstreamError) -> ErrorData {
    match error {
        DownstreamError::Rpc { error, .. } => *error,
        e @ DownstreamError::UnknownResource { .. } => {
            ErrorData::resource_not_found(e.to_string(), None)
        }
        e @ (DownstreamError::UnknownPrompt { .. } | DownstreamError::UnknownTool { .. }) => {
            ErrorData::invalid_params(e.to_string(), None)
        }
        e => ErrorData::internal_error(e.to_string(), None),
    }
}

/// A failure a model should read, as a tool result with `isError: true`.
fn tool_error(message: String) -> CallToolResult {
    let message = crate::text::clip(&message, MAX_ERROR_CHARS).into_owned();
    CallToolResult::error(vec![ContentBlock::text(message)])
}

impl ServerHandler for Upstream {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_completions()
            .enable_logging()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("planmux", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions())
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // The answer carries the servers' instructions: give slow servers the list grace.
        context.peer.set_peer_info(request.clone());
        self.host.set(context.peer.clone());
        self.settle(&context).await;
        self.negotiate_initialize(&request)
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        if self.host.get().is_none() {
            self.host.set(context.peer.clone());
        }
        self.settle(&context).await;
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // rmcp intersects this with what the host asked for and what get_info declares.
        let mut filter = SubscriptionFilter::builder()
            .tools_list_changed()
            .prompts_list_changed()
            .resources_list_changed()
            .build();
        filter.resource_subscriptions = requested.resource_subscriptions.clone();
        Some(filter)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        // A 2026-07-28 host subscribes to resources for as long as its stream lasts.
        let uris = context
            .sink()
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let cancel = self.shutdown.child_token();
        for uri in &uris {
            if !self.hold(uri, true) {
                continue;
            }
            let params = SubscribeRequestParams::new(uri.clone());
            if let Err(e) = self.downstreams.subscribe(params, &cancel).await {
                tracing::warn!(uri = %uri, error = %e, "could not subscribe to a resource");
            }
        }
        let key = self.host.add_listener(context.sink().clone());
        context.cancelled().await;
        self.host.remove_listener(key);
        for uri in uris {
            if self.hold(&uri, false) {
                let params = UnsubscribeRequestParams::new(uri);
                let _ = self.downstreams.unsubscribe(params, &cancel).await;
            }
        }
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let roots = context
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        self.host.set(context.peer);
        self.host.set_initialized();
        // A server that asked for roots while the host was still connecting (and gave up)
        // asks again.
        if roots {
            self.downstreams.roots_changed().await;
        }
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tracing::debug!(level = ?request.level, "host set the log level");
        self.host.set_log_level(request.level);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.settle(&context).await;
        let catalog = self.downstreams.catalog();
        let mut tools: Vec<Tool> = catalog.definitions().cloned().collect();
        tools.push(self.execute_plan_tool());
        if self.runner.confirm() != Confirm::None {
            tools.push(Self::approve_plan_tool());
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        if name == EXECUTE_PLAN_TOOL {
            return Some(self.execute_plan_tool());
        }
        if name == APPROVE_PLAN_TOOL && self.runner.confirm() != Confirm::None {
            return Some(Self::approve_plan_tool());
        }
        self.downstreams
            .catalog()
            .get(name)
            .map(|e| e.definition.clone())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = self
            .runner
            .runs
            .list()
            .iter()
            .map(|run| {
                let goal = run
                    .goal
                    .as_deref()
                    .map(|g| format!(": {g}"))
                    .unwrap_or_default();
                let mut resource = Resource::new(
                    format!("{RUNS_URI}{}", run.run_id),
                    format!("run {}", run.run_id),
                )
                .with_description(format!(
                    "{} plan, {} steps, {} ms{goal}",
                    run.status.as_str(),
                    run.steps.len(),
                    run.duration_ms.round(),
                ));
                resource.mime_type = Some("application/json".into());
                resource
            })
            .collect::<Vec<_>>();
        self.settle(&context).await;
        let catalog = self.downstreams.catalog();
        let mut all: Vec<Resource> = catalog.resources().resources().cloned().collect();
        all.extend(resources);
        Ok(ListResourcesResult::with_all_items(all))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let mut template = ResourceTemplate::new(
            format!("{RUNS_URI}{{run_id}}"),
            "plan run record",
        )
        .with_description(
            "The full record of a recent execute_plan run: resolved arguments, outputs, timings.",
        );
        template.mime_type = Some("application/json".into());
        self.settle(&context).await;
        let catalog = self.downstreams.catalog();
        let mut all: Vec<ResourceTemplate> = catalog.resources().templates().cloned().collect();
        all.push(template);
        Ok(ListResourceTemplatesResult::with_all_items(all))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let Some(id) = request.uri.strip_prefix(RUNS_URI) else {
            let cancel = self.shutdown.child_token();
            let read = self.downstreams.read_resource(request, &cancel);
            let result = cancellable(read, &cancel, &context).await;
            return result.map(complete_read).map_err(routed_error);
        };
        let record = self.runner.runs.get(id).ok_or_else(|| {
            ErrorData::resource_not_found(
                format!(
                    "no run record at '{}' (only the last runs are kept)",
                    request.uri
                ),
                None,
            )
        })?;
        let text = serde_json::to_string_pretty(&*record)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let contents = ResourceContents::text(text, request.uri).with_mime_type("application/json");
        Ok(complete_read(ReadResourceResult::new(vec![contents])))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.settle(&context).await;
        let catalog = self.downstreams.catalog();
        let prompts = catalog.resources().prompts().cloned().collect();
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let cancel = self.shutdown.child_token();
        let get = self.downstreams.get_prompt(request, &cancel);
        let result = cancellable(get, &cancel, &context).await;
        result
            .map(|mut prompt| {
                // A 2026-07-28 host requires resultType; rmcp strips it for older hosts.
                prompt.result_type = Some(ResultType::COMPLETE);
                prompt.into()
            })
            .map_err(routed_error)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let cancel = self.shutdown.child_token();
        let complete = self.downstreams.complete(request, &cancel);
        let mut result = cancellable(complete, &cancel, &context)
            .await
            .map_err(routed_error)?;
        result.result_type = Some(ResultType::COMPLETE);
        Ok(result)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let cancel = self.shutdown.child_token();
        let subscribe = self.downstreams.subscribe(request, &cancel);
        cancellable(subscribe, &cancel, &context)
            .await
            .map_err(routed_error)
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let cancel = self.shutdown.child_token();
        let unsubscribe = self.downstreams.unsubscribe(request, &cancel);
        cancellable(unsubscribe, &cancel, &context)
            .await
            .map_err(routed_error)
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        tracing::debug!("the host's roots changed; telling every server");
        self.downstreams.roots_changed().await;
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.host.get().is_none() {
            self.host.set(context.peer.clone());
        }
        if request.name == EXECUTE_PLAN_TOOL {
            return Ok(self.execute_plan(request, &context).await);
        }
        if request.name == APPROVE_PLAN_TOOL && self.runner.confirm() != Confirm::None {
            return Ok(self.approve_plan(request.arguments, &context).await);
        }
        let progress = context.meta.get_progress_token().map(|token| ProgressSink {
            peer: context.peer.clone(),
            token,
        });
        // The checkpoint: a denied tool is refused like an unknown one, saying why.
        let proof = self
            .downstreams
            .authorize(&request.name, &Route::Direct)
            .await
            .map_err(|denied| ErrorData::invalid_params(denied.to_string(), None))?;
        let cancel = self.shutdown.child_token();
        let call = self
            .downstreams
            .call_tool(request, &proof, progress, &cancel);
        tokio::pin!(call);
        let result = tokio::select! {
            result = &mut call => result,
            () = context.ct.cancelled() => {
                // Let the call tell its downstream, then finish.
                cancel.cancel();
                call.await
            }
        };
        match result {
            Ok(CallToolResponse::Complete(mut result)) => {
                // A 2026-07-28 host requires resultType; rmcp strips it for older hosts.
                result.result_type = Some(ResultType::COMPLETE);
                Ok(CallToolResponse::Complete(result))
            }
            Ok(other) => Ok(other),
            Err(DownstreamError::Rpc { error, .. }) => Err(*error),
            Err(e @ DownstreamError::UnknownTool { .. }) => {
                Err(ErrorData::invalid_params(e.to_string(), None))
            }
            Err(e) => Ok(tool_error(e.to_string()).into()),
        }
    }
}
