//! The MCP server the host talks to: the merged catalog in `tools/list`, each `tools/call`
//! forwarded to its downstream, prompts, resources, completions, subscriptions and roots
//! routed, the servers' instructions merged; `execute_plan` and `approve_plan` are in
//! [`plans`]. The errors a host reads for its requests are built here (and, for the
//! calls it takes, in [`passthrough`]); `wire` answers what cannot be read at all.

// Logging is deprecated by SEP-2577, but hosts still show relayed log messages.
#![allow(deprecated)]

mod answers;
mod cache;
mod held;
mod instructions;
pub(crate) mod legacy_tasks;
use cache::cached;
mod calls;
mod misread;
pub(crate) mod passthrough;
mod plans;
mod runs;
mod sealed;
mod search;
mod session_end;
use session_end::{Joins, SessionEnd};
mod sign_in;
pub mod surface;
mod tasks;
mod traced;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
    CompleteResult, CustomRequest, CustomResult, DiscoverResult, GetPromptRequestParams,
    GetPromptResponse, GetTaskParams, GetTaskResult, Implementation, InitializeRequestParams,
    InitializeResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, Reference, Resource, ResourceTemplate, ResultType, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, Tool,
    UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;

use crate::approval::APPROVE_PLAN_TOOL;
use crate::catalog::Catalog;
use crate::config::ProxySettings;
use crate::downstream::{Caller, Downstreams, HostLink, Session};
use crate::plan::EXECUTE_PLAN_TOOL;
use crate::policy::{Confirm, Route};
use crate::runner::PlanRunner;
use search::search_tools;
use surface::{SEARCH_TOOLS_TOOL, Shape, search_tools_tool};

pub(crate) use answers::host_answer;
use answers::{cancellable, complete_read, routed_error, tool_error};
use runs::RUNS_URI;
pub use sealed::share_key as share_sealing_key;

/// The upstream MCP server.
#[derive(Clone)]
pub struct Upstream {
    downstreams: Arc<Downstreams>,
    runner: Arc<PlanRunner>,
    host: Arc<HostLink>,
    /// This host session (over HTTP, one `Upstream` per session).
    session: Arc<Session>,
    /// Cancelled when planmux shuts down: every call in flight stops.
    shutdown: CancellationToken,
    /// How `tools/list` is shaped (`[proxy] surface`).
    shape: Arc<Shape>,
    /// Whether the last list was compact (what `execute_plan`'s description says).
    compact: Arc<std::sync::atomic::AtomicBool>,
    /// The session's 2025-11-25 tasks (`legacy_tasks`).
    legacy_tasks: Arc<crate::task_set::TaskSet>,
    /// What the session leaves behind when the last clone of this goes (it closed).
    ended: Arc<SessionEnd>,
    /// Where this session joins the HTTP passthrough once its host introduced itself.
    joins: Option<Arc<dyn Joins>>,
}

impl Upstream {
    /// Whether `name` calls a pipeline: a configured one, and no tool of the catalog (a
    /// tool that took the name stays callable; the pipeline is reported as unable to run).
    fn is_pipeline(&self, name: &str) -> bool {
        self.runner.pipeline(name).is_some() && self.downstreams.catalog().get(name).is_none()
    }

    /// Whether a stdio host may take the passthrough path: it introduced itself before
    /// 2026-07-28 (which needs `resultType` set). `None` until its handshake.
    fn passthrough_host(&self) -> Option<bool> {
        let peer = self.host.get()?;
        let info = peer.peer_info()?;
        Some(info.protocol_version < ProtocolVersion::V_2026_07_28 && !self.host.is_shared())
    }

    /// Whether `name` calls a tool of a downstream server (listed; not planmux's own nor
    /// a pipeline).
    fn is_downstream_tool(&self, name: &str) -> bool {
        let ours = [EXECUTE_PLAN_TOOL, APPROVE_PLAN_TOOL, SEARCH_TOOLS_TOOL].contains(&name);
        let listed = self.downstreams.catalog().find_called(name).is_some();
        !ours && !self.is_pipeline(name) && listed
    }

    /// The tools of the pipelines that can run now, less those `[policy] deny` names.
    fn pipeline_tools(&self) -> Vec<Tool> {
        self.runner
            .listed_pipelines()
            .into_iter()
            .map(|ready| ready.tool)
            .collect()
    }

    /// A server over started downstreams; `host` is the link the downstreams relay to.
    pub fn new(
        downstreams: Arc<Downstreams>,
        runner: Arc<PlanRunner>,
        host: Arc<HostLink>,
        shutdown: CancellationToken,
        proxy: &ProxySettings,
    ) -> Self {
        let session = Session::new();
        if !host.has_sessions() {
            // One host (stdio): its session lasts as long as the connection, whether it
            // introduced itself with `initialize` or, at 2026-07-28, did not.
            session.introduced();
        }
        let ended = Arc::new(SessionEnd {
            session: session.clone(),
            host: host.clone(),
            downstreams: downstreams.clone(),
            shutdown: shutdown.clone(),
            runner: runner.clone(),
            leave: std::sync::Mutex::default(),
        });
        Self {
            downstreams,
            runner,
            host,
            session,
            shutdown,
            shape: Arc::new(Shape::new(proxy)),
            compact: Arc::default(),
            legacy_tasks: Arc::new(legacy_tasks::task_set()),
            ended,
            joins: None,
        }
    }

    /// The same server, its session joining `joins` once its host introduced itself.
    pub fn joining(mut self, joins: Arc<dyn Joins>) -> Self {
        self.joins = Some(joins);
        self
    }

    /// Whose run records a request may see: its session's; a stateless request has none
    /// (it reads a run with no session by its id alone).
    fn viewer(&self, context: &RequestContext<RoleServer>) -> Option<crate::identity::Owner> {
        Caller::of(context, &self.session).owner()
    }

    /// planmux's own tools listed beside the catalog's in full.
    fn own_tools(&self) -> usize {
        1 + usize::from(self.runner.confirm() != Confirm::None)
    }

    /// Full or compact for this host, now, over `catalog` (what its caller sees), logged
    /// when it changes.
    fn decide(&self, context: &RequestContext<RoleServer>, catalog: &Catalog) -> bool {
        let client = context.client_info();
        let host = surface::profile(client.as_ref());
        let decision = self.shape.decide(host, catalog, self.own_tools());
        self.shape.log(client.as_ref(), &decision);
        self.compact
            .store(decision.compact, std::sync::atomic::Ordering::Relaxed);
        decision.compact
    }

    /// Waits until every server has listed (or is remembered): in full for a host that
    /// ignores `list_changed` (it would never see a later server), else the list grace.
    async fn settle(&self, context: &RequestContext<RoleServer>) {
        let host = surface::profile(context.client_info().as_ref());
        self.downstreams.settled(!host.list_changed).await;
    }
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
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("planmux", env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions::merged(self.downstreams.instructions()))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // The answer carries the servers' instructions: those they gave when they last
        // started, remembered (then it is answered at once), else the list grace.
        context.peer.set_peer_info(request.clone());
        self.session.introduced();
        self.host.set(context.peer.clone());
        self.settle(&context).await;
        self.decide(
            &context,
            &self.downstreams.catalog_for(&self.grant(&context)),
        );
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
        let mut held = Vec::new();
        for uri in uris {
            let params = SubscribeRequestParams::new(uri.clone());
            let subscribe = self.downstreams.subscribe(params, &cancel);
            match Box::pin(self.host.hold(&uri, subscribe)).await {
                Ok(()) => held.push(uri),
                Err(e) => {
                    tracing::warn!(uri = %uri, error = %e, "could not subscribe to a resource");
                }
            }
        }
        let key = self.host.add_listener(context.sink().clone());
        context.cancelled().await;
        self.host.remove_listener(key);
        for uri in held {
            let params = UnsubscribeRequestParams::new(uri.clone());
            let unsubscribe = self.downstreams.unsubscribe(params, &cancel);
            let _ = Box::pin(self.host.release(&uri, unsubscribe)).await;
        }
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let roots = context
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        self.host.joined(self.session.clone(), context.peer.clone());
        if let Some(joins) = &self.joins {
            self.ended.join(joins.as_ref(), &context);
        }
        self.host.set(context.peer);
        self.host.set_initialized();
        // A server that asked for roots while the host was still connecting (and gave up)
        // asks again. Over HTTP, servers ask only during a session's call.
        if roots && !self.host.is_shared() {
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
        self.session.log_level.set(request.level);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.settle(&context).await;
        let grant = self.grant(&context);
        let catalog = self.downstreams.catalog_for(&grant);
        let compact = self.decide(&context, &catalog);
        let pipelines = self.pipeline_tools();
        let confirm = grant.confirm().unwrap_or(self.runner.confirm());
        let mut tools = surface::listed(&catalog, &self.shape, confirm, compact, pipelines);
        // planmux's own tools and pipelines too are the caller's only when allowed.
        tools.retain(|tool| grant.allows(&tool.name));
        let ttl = self.list_ttl(&context);
        Ok(cached!(ListToolsResult::with_all_items(tools), ttl))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        if name == EXECUTE_PLAN_TOOL {
            let compact = self.compact.load(std::sync::atomic::Ordering::Relaxed);
            let catalog = self.downstreams.catalog();
            return Some(surface::execute_plan_tool(
                &catalog,
                self.runner.confirm(),
                compact,
            ));
        }
        if name == SEARCH_TOOLS_TOOL {
            return Some(search_tools_tool(
                self.downstreams.catalog().servers().len(),
            ));
        }
        if name == APPROVE_PLAN_TOOL && self.runner.confirm() != Confirm::None {
            return Some(surface::approve_plan_tool());
        }
        if self.is_pipeline(name) {
            return self.pipeline_tools().into_iter().find(|t| t.name == name);
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
        let resources = self.run_resources(&context).await;
        self.settle(&context).await;
        let catalog = self.downstreams.catalog_for(&self.grant(&context));
        let mut all: Vec<Resource> = catalog.resources().resources().cloned().collect();
        all.extend(resources);
        let ttl = self.list_ttl(&context);
        Ok(cached!(ListResourcesResult::with_all_items(all), ttl))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.settle(&context).await;
        let catalog = self.downstreams.catalog_for(&self.grant(&context));
        let mut all: Vec<ResourceTemplate> = catalog.resources().templates().cloned().collect();
        all.push(runs::template());
        let ttl = self.list_ttl(&context);
        Ok(cached!(
            ListResourceTemplatesResult::with_all_items(all),
            ttl
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let Some(id) = request.uri.strip_prefix(RUNS_URI) else {
            self.may_reach(&context, &Reference::for_resource(request.uri.clone()))?;
            let cancel = self.shutdown.child_token();
            let read = self.downstreams.read_resource(request, &cancel);
            let result = cancellable(read, &cancel, &context).await;
            return result.map(complete_read).map_err(routed_error);
        };
        self.read_run(id, &request.uri, self.viewer(&context)).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.settle(&context).await;
        let catalog = self.downstreams.catalog_for(&self.grant(&context));
        let prompts = catalog.resources().prompts().cloned().collect();
        let ttl = self.list_ttl(&context);
        Ok(cached!(ListPromptsResult::with_all_items(prompts), ttl))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.get_prompt_downstream(request, &context).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.may_reach(&context, &request.r#ref)?;
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
        // The server hears of the first subscription of any session, and its updates go
        // to the sessions subscribed.
        if !self.session.is_introduced() {
            return Err(ErrorData::invalid_request(
                "resource subscriptions need a session, and this request has none \
                 (planmux serves stateless HTTP): no update could reach it",
                None,
            ));
        }
        self.may_reach(&context, &Reference::for_resource(request.uri.clone()))?;
        let uri = request.uri.clone();
        if !self.session.subscribe(&uri) {
            return Ok(());
        }
        let cancel = self.shutdown.child_token();
        let subscribe = self.downstreams.subscribe(request, &cancel);
        // Boxed: rmcp's HTTP service keeps several copies of the largest handler future on
        // its stack, and this one would be it.
        let result = Box::pin(
            self.host
                .hold(&uri, cancellable(subscribe, &cancel, &context)),
        )
        .await;
        if result.is_err() {
            self.session.unsubscribe(&uri);
        }
        result.map_err(routed_error)
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // Only this session's own subscription ends; the server hears of the last one.
        let uri = request.uri.clone();
        if !self.session.unsubscribe(&uri) {
            return Ok(());
        }
        let cancel = self.shutdown.child_token();
        let unsubscribe = self.downstreams.unsubscribe(request, &cancel);
        // Boxed, as in `subscribe`.
        Box::pin(
            self.host
                .release(&uri, cancellable(unsubscribe, &cancel, &context)),
        )
        .await
        .map_err(routed_error)
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        if self.host.is_shared() {
            // Servers shared by many sessions ask for roots only during a session's call
            // (which session's roots would they be asking for otherwise?).
            return;
        }
        tracing::debug!("the host's roots changed; telling every server");
        self.downstreams.roots_changed().await;
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        if let Some(method) = legacy_tasks::renamed(&request, &context) {
            let answer = self.legacy_task_request(method, request.params.clone(), &context);
            return Box::pin(answer).await;
        }
        let modern = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        Err(misread::misread(&request, modern))
    }

    // Each handler's future is boxed: rmcp's dispatch holds every handler's on its
    // stack, which a debug build does not share between them.
    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Box::pin(self.get_task_downstream(request, &context)).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Box::pin(self.update_task_downstream(request, &context)).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Box::pin(self.cancel_task_downstream(request, &context)).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.traced_call(request, context).await
    }
}

impl Upstream {
    /// A host's `tools/call` (`traced.rs` makes it a span when traces are on).
    async fn call_tool_here(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.host.get().is_none() {
            self.host.set(context.peer.clone());
        }
        // planmux's own tools and pipelines; a downstream tool's name is resolved, and
        // the checkpoint decides for what it names.
        let grant = self.grant(&context);
        let ours =
            [EXECUTE_PLAN_TOOL, APPROVE_PLAN_TOOL, SEARCH_TOOLS_TOOL].contains(&&*request.name);
        if (ours || self.is_pipeline(&request.name)) && !grant.allows(&request.name) {
            let why = format!("unknown tool '{}'", request.name);
            return Err(ErrorData::invalid_params(why, None));
        }
        if request.name == EXECUTE_PLAN_TOOL {
            return Ok(self.execute_plan(request, &context).await);
        }
        let confirm = grant.confirm().unwrap_or(self.runner.confirm());
        if request.name == APPROVE_PLAN_TOOL && confirm != Confirm::None {
            return Ok(self.approve_plan(request.arguments, &context).await);
        }
        if request.name == SEARCH_TOOLS_TOOL {
            let catalog = self.downstreams.catalog_for(&grant);
            let instructions = self.downstreams.instructions();
            return Ok(search_tools(&catalog, &instructions, request.arguments.as_ref()).into());
        }
        if self.is_pipeline(&request.name) {
            return self.call_pipeline(request, &context).await;
        }
        let caller = Caller::of(&context, &self.session);
        // The checkpoint: a denied tool is refused like an unknown one, saying why. The
        // proof is for the exported name the host's name resolves to; the call goes there.
        let proof = self
            .downstreams
            .authorize(&request.name, &Route::Direct, &grant)
            .await
            .map_err(|denied| ErrorData::invalid_params(denied.to_string(), None))?;
        request.name = proof.tool().to_owned().into();
        self.call_tool_downstream(request, proof, &caller, &context)
            .await
    }
}
