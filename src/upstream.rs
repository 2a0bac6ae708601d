//! The MCP server the host talks to: the merged catalog in `tools/list`, each `tools/call`
//! forwarded to its downstream. This is the one place that builds MCP errors.

// Logging is deprecated by SEP-2577, but hosts still show relayed log messages.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    ResultType, ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscriptionFilter, Tool,
    ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::downstream::{DownstreamError, Downstreams, HostLink, ProgressSink};
use crate::exec::{Observer, StepRecord, StepStatus, is_error, result_schema};
use crate::plan::{
    EXECUTE_PLAN_DESCRIPTION, EXECUTE_PLAN_TOOL, execute_plan_input_schema, render_issues,
};
use crate::policy::Route;
use crate::runner::{Outcome, PlanRunner};

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
        }
    }

    /// The `execute_plan` tool definition.
    fn execute_plan_tool() -> Tool {
        Tool::new(
            EXECUTE_PLAN_TOOL,
            EXECUTE_PLAN_DESCRIPTION,
            Arc::new(as_object(execute_plan_input_schema())),
        )
        .with_raw_output_schema(Arc::new(as_object(result_schema())))
        .with_annotations(ToolAnnotations::new().open_world(true))
    }

    /// Runs a plan: issues as an `isError` result, otherwise the lean result.
    async fn execute_plan(
        &self,
        arguments: Option<JsonObject>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let arguments = Value::Object(arguments.unwrap_or_default());
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| ProgressRelay::start(context.peer.clone(), token));
        let cancel = self.shutdown.child_token();
        let observer: &dyn Observer = match &progress {
            Some(relay) => relay,
            None => &crate::exec::Quiet,
        };
        let outcome = {
            let run = self.runner.execute(arguments, observer, cancel.clone());
            tokio::pin!(run);
            tokio::select! {
                outcome = &mut run => outcome,
                () = context.ct.cancelled() => {
                    cancel.cancel();
                    run.await
                }
            }
        };
        if let Some(relay) = progress {
            relay.finish().await;
        }
        match outcome {
            Outcome::Invalid(issues) => tool_error(render_issues(&issues)),
            Outcome::Unfinished(why) => tool_error(why),
            Outcome::Ran(record) => {
                let failed = is_error(&record);
                let (result, text) = self.runner.answer(record).await;
                let mut answer = CallToolResult::structured(result);
                answer.content = vec![ContentBlock::text(text)];
                answer.is_error = Some(failed);
                answer
            }
        }
    }
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

/// A failure a model should read, as a tool result with `isError: true`.
fn tool_error(message: String) -> CallToolResult {
    let message = crate::text::clip(&message, MAX_ERROR_CHARS).into_owned();
    CallToolResult::error(vec![ContentBlock::text(message)])
}

impl ServerHandler for Upstream {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_resources()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("planmux", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "planmux fronts several MCP servers: their tools are listed as <server>__<tool>. \
                 To run several calls that feed each other, send one execute_plan instead of one \
                 call per turn.",
            )
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // rmcp intersects this with what the host asked for and what get_info declares.
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let key = self.host.add_listener(context.sink().clone());
        context.cancelled().await;
        self.host.remove_listener(key);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.host.set(context.peer);
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
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.downstreams.started().await;
        let catalog = self.downstreams.catalog();
        let mut tools: Vec<Tool> = catalog.definitions().cloned().collect();
        tools.push(Self::execute_plan_tool());
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        if name == EXECUTE_PLAN_TOOL {
            return Some(Self::execute_plan_tool());
        }
        self.downstreams
            .catalog()
            .get(name)
            .map(|e| e.definition.clone())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
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
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let mut template = ResourceTemplate::new(
            format!("{RUNS_URI}{{run_id}}"),
            "plan run record",
        )
        .with_description(
            "The full record of a recent execute_plan run: resolved arguments, outputs, timings.",
        );
        template.mime_type = Some("application/json".into());
        Ok(ListResourceTemplatesResult::with_all_items(vec![template]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let record = request
            .uri
            .strip_prefix(RUNS_URI)
            .and_then(|id| self.runner.runs.get(id))
            .ok_or_else(|| {
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
        Ok(ReadResourceResult::new(vec![contents]).into())
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
            return Ok(self.execute_plan(request.arguments, context).await.into());
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
