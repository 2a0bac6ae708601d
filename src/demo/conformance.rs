//! The fixture server of the official MCP conformance suite: the tools, resources and prompts
//! its server scenarios call (`test_simple_text`, `test://static-text`, `test_simple_prompt`, …),
//! with the names, texts and shapes they check. `@modelcontextprotocol/conformance` 0.1.16
//! ships none, so this was written from the scenarios' expectations, mirroring the suite's own
//! reference `everything-server.ts`. Tests run the suite against it directly over streamable
//! HTTP, and through planmux with `namespace = false`, so every name reaches the suite
//! unchanged and any difference is planmux's.
//!
//! Here, the server: its state and the request each handler answers. Beside it: `tools`
//! (their definitions and calls), `asks` (the tools that ask the client on the call's
//! stream: sampling and elicitation), `mrtr` (the tools and the prompt that ask through
//! input-required results instead, for 2026-07-28 clients), `offers` (resources, prompts,
//! completions), `logging` (its log messages, at the level the client set) and `tasks`
//! (the tools of the tasks extension's scenarios, and the tasks they start).

// Sampling, elicitation relaying, logging and resources/subscribe are deprecated by SEP-2577
// (or legacy-only); the suite still tests them on 2025-06-18 and 2025-11-25 sessions.
#![allow(deprecated)]

mod asks;
mod logging;
mod mrtr;
mod offers;
mod tasks;
mod tools;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
    CompleteResult, CompletionInfo, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    GetTaskParams, GetTaskResult, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, LoggingLevel, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerCapabilities,
    ServerConfig, ServerNotification, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use logging::Logging;
use mrtr::{Asker, Pending};
use offers::{completions, contents, prompt_messages, prompts, resources, templates};
use tasks::{TaskTool, Tasks};
use tools::call;
pub(super) use tools::tools;

/// The conformance fixture. One instance may serve several sessions: its state is only what
/// the scenarios can observe (subscriptions, the log level), and sharing it is harmless.
pub struct ConformanceServer {
    /// URIs a client subscribed to: `notifications/resources/updated` goes only to these.
    subscriptions: Mutex<HashSet<String>>,
    /// The log messages it sends, at the level the client asked for.
    logging: Logging,
    /// The input-required calls waiting for their next round.
    pending: Arc<Pending>,
    /// The tasks its tools started, for `tasks/get`, `tasks/update` and `tasks/cancel`.
    tasks: Arc<Tasks>,
}

impl ConformanceServer {
    /// A fixture with no subscriptions and every log level enabled.
    pub fn new() -> Arc<Self> {
        Self::sharing(Arc::default(), Arc::default())
    }

    /// Fixtures for one HTTP listener, which makes one per session and one per 2026-07-28
    /// request: they share the input-required calls in flight, so that a retry finds the
    /// round that asked it, and the tasks, so that a `tasks/get` finds the task a call
    /// started.
    pub(in crate::demo) fn factory() -> impl Fn() -> Arc<Self> + Send + Sync + 'static {
        let pending = Arc::<Pending>::default();
        let tasks = Arc::<Tasks>::default();
        move || Self::sharing(pending.clone(), tasks.clone())
    }

    fn sharing(pending: Arc<Pending>, tasks: Arc<Tasks>) -> Arc<Self> {
        Arc::new(Self {
            subscriptions: Mutex::new(HashSet::new()),
            logging: Logging::default(),
            pending,
            tasks,
        })
    }

    /// The subscribed URIs. A poisoned lock still holds a valid set (inserts and removes do
    /// not panic half-way), so it is used as is.
    fn subscriptions(&self) -> MutexGuard<'_, HashSet<String>> {
        self.subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl ServerHandler for ConformanceServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_tools()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities).with_server_info(Implementation::new(
            "planmux-demo-conformance",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(asker) = Asker::tool(&request.name) {
            return mrtr::call_tool(asker, request, &context, &self.pending);
        }
        if let Some(job) = TaskTool::named(&request.name) {
            return tasks::call_tool(job, request, &context, &self.tasks).await;
        }
        if self.get_tool(&request.name).is_none() {
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{}'", request.name),
                None,
            ));
        }
        let args = request.arguments.clone().unwrap_or_default();
        // A tool that asks the client answers with text, or fails with its refusal.
        match asks::question(&request.name, &args) {
            Some(Ok(question)) => return Ok(asks::ask(question, &request, &context).await),
            Some(Err(failed)) => return Ok(failed.into()),
            None => {}
        }
        Ok(call(&request.name, &args, &context, &self.logging)
            .await
            .into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.tasks.get(request)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.update(request)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel(request)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(resources()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(templates()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        match contents(&request.uri) {
            Some(contents) => Ok(ReadResourceResult::new(vec![contents]).into()),
            None => Err(ErrorData::resource_not_found(
                format!("no resource '{}'", request.uri),
                None,
            )),
        }
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // rmcp narrows it to what was asked and what the capabilities declare.
        let mut filter = SubscriptionFilter::builder()
            .tools_list_changed()
            .prompts_list_changed()
            .resources_list_changed()
            .build();
        filter.resource_subscriptions = requested.resource_subscriptions.clone();
        Some(filter)
    }

    /// A 2026-07-28 client's subscriptions: each of its resources reported updated once
    /// when the stream opens (as `subscribe` does for an older client), then nothing until
    /// it is cancelled.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let sink = context.sink().clone();
        let uris = sink.accepted().resource_subscriptions.clone();
        for uri in uris.unwrap_or_default() {
            if contents(&uri).is_some() {
                let updated =
                    ResourceUpdatedNotification::new(ResourceUpdatedNotificationParam::new(uri));
                let _ = sink
                    .send(ServerNotification::ResourceUpdatedNotification(updated))
                    .await;
            }
        }
        context.cancelled().await;
        Ok(())
    }

    /// Records the subscription, then reports the resource updated once, so that a test can
    /// see `notifications/resources/updated` relayed without waiting for a timer.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let uri = request.uri;
        self.subscriptions().insert(uri.clone());
        self.logging
            .log(
                &context.peer,
                LoggingLevel::Info,
                format!("Subscribed to resource: {uri}"),
            )
            .await;
        // A separate statement, so the lock is released before the next await.
        let subscribed = self.subscriptions().contains(&uri);
        if subscribed && contents(&uri).is_some() {
            let _ = context
                .peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await;
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions().remove(&request.uri);
        let message = format!("Unsubscribed from resource: {}", request.uri);
        self.logging
            .log(&context.peer, LoggingLevel::Info, message)
            .await;
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(prompts()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if let Some(asker) = Asker::prompt(&request.name) {
            return mrtr::get_prompt(asker, request, &context, &self.pending);
        }
        let args = request.arguments.unwrap_or_default();
        let messages = prompt_messages(&request.name, &args)?;
        Ok(GetPromptResult::new(messages).into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let values = completions(&request.r#ref, &request.argument);
        let info = CompletionInfo::with_all_values(values).unwrap_or_default();
        Ok(CompleteResult::new(info))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.logging.set(request.level);
        let message = format!("Log level set to: {:?}", request.level).to_lowercase();
        self.logging
            .log(&context.peer, LoggingLevel::Info, message)
            .await;
        Ok(())
    }
}
