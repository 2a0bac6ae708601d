//! The downstream servers: starting them together, the merged catalog, routing a call to
//! the right one, refreshing on list changes and reconnects, and shutting them all down.

mod calls;
pub mod fields;
mod host_link;
mod sessions;
pub use calls::{LineCall, RawReply, RouteSink, Sink};
mod relay;
mod resources;
mod route;
mod server;
mod tap;
mod transport;

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, JsonObject};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use fields::restore as restore_tool_fields;
pub use host_link::HostLink;
pub use relay::{Caller, Changed, LogLevel, Session};
pub use route::{LineRoute, NotSent};
pub use server::{Offer, Server, State};

use crate::catalog::{Catalog, Pins, Resources, ServerResources, ServerTools};
use crate::config::{Config, PolicyConfig};
use crate::lock::Lock;
use crate::policy::{Authorized, Denied, Policy, Route, Tier};
use relay::Changes;

/// Why a call to a downstream did not produce a tool result.
#[derive(Debug, thiserror::Error)]
pub enum DownstreamError {
    /// No exported tool has this name.
    #[error("unknown tool '{name}'{}", hint(.closest))]
    UnknownTool { name: String, closest: Vec<String> },
    /// No exported prompt has this name.
    #[error("unknown prompt '{name}'")]
    UnknownPrompt { name: String },
    /// No server listed this URI, matches it with a template, or linked it, and none of
    /// the servers with resources could read it.
    #[error("no server has the resource '{uri}'")]
    UnknownResource { uri: String },
    /// The server could not be started just now.
    #[error("server '{server}' failed to start: {reason}")]
    StartFailed { server: String, reason: String },
    /// A tool of a server that never started: its tools are unknown, not missing.
    #[error("server '{server}' is configured but failed to start: {reason}")]
    NeverStarted { server: String, reason: String },
    /// The server is down and backing off before the next restart.
    #[error("server '{server}' is unavailable: {reason} (next restart attempt in {} ms)", .retry_in.as_millis())]
    Down {
        server: String,
        reason: String,
        retry_in: Duration,
    },
    /// The connection broke while the call was in flight.
    #[error("server '{server}' went away during the call: {detail}")]
    Exited { server: String, detail: String },
    /// The call took longer than the server's `call_timeout_ms`.
    #[error("server '{server}' did not answer {tool} within {} ms", .after.as_millis())]
    Timeout {
        server: String,
        tool: String,
        after: Duration,
    },
    /// The caller cancelled the call.
    #[error("call to {tool} on server '{server}' was cancelled")]
    Cancelled { server: String, tool: String },
    /// The server answered with a JSON-RPC error; it is passed on as it is. (Or planmux
    /// refused its answer, and says so.)
    #[error("{}", rpc_error(server, error))]
    Rpc {
        server: String,
        error: Box<ErrorData>,
    },
    /// The server answered with something that is not valid here.
    #[error("server '{server}' broke the protocol: {message}")]
    Protocol { server: String, message: String },
    /// planmux is shutting down.
    #[error("server '{server}' is shut down")]
    Closed { server: String },
    /// The call's proof of authorization is for another tool.
    #[error("the call to '{tool}' was not authorized")]
    Unauthorized { tool: String },
}

/// A server's JSON-RPC error as a message, or planmux's refusal of its answer (which the
/// server did not send).
fn rpc_error(server: &str, error: &ErrorData) -> String {
    let refused = error
        .data
        .as_ref()
        .is_some_and(|data| data.get(crate::wire::REFUSED).is_some());
    if refused {
        format!(
            "planmux could not take the answer of server '{server}': {}",
            error.message
        )
    } else {
        format!(
            "server '{server}' answered with an error: {}",
            error.message
        )
    }
}

fn hint(closest: &[String]) -> String {
    if closest.is_empty() {
        String::new()
    } else {
        format!(
            " (did you mean {}?)",
            closest
                .iter()
                .map(|n| format!("'{n}'"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// What a reload changed, by server name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reloaded {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub restarted: Vec<String>,
    /// Whether `[policy]` changed (it is in force now).
    pub policy: bool,
}

impl Reloaded {
    /// Whether any server, or the policy, changed.
    pub fn any(&self) -> bool {
        self.policy
            || !(self.added.is_empty() && self.removed.is_empty() && self.restarted.is_empty())
    }
}

/// A status line for `planmux check`.
#[derive(Debug, Clone)]
pub struct ServerStatus {
    pub name: String,
    pub ready: bool,
    pub tools: usize,
    pub startup: Option<Duration>,
    pub error: Option<String>,
}

/// Every enabled downstream server and the merged catalog.
pub struct Downstreams {
    /// The servers, in config order; a reload swaps the list.
    servers: RwLock<Arc<Vec<Arc<Server>>>>,
    /// Where servers report a changed list (shared with those a reload starts).
    changes: Arc<Changes>,
    catalog: RwLock<Arc<Catalog>>,
    separator: String,
    host: Arc<HostLink>,
    /// The checkpoint every call passes, and the `[policy]` it was made of; a reload
    /// swaps both.
    policy: RwLock<(Arc<Policy>, PolicyConfig)>,
    /// Which definitions `servers.lock` trusts; read again on each reload.
    pins: RwLock<Arc<Pins>>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    /// True once the first start of every server has ended.
    started: tokio::sync::watch::Sender<bool>,
    /// URIs that tool results linked, and the server of each.
    links: resources::Links,
    /// How long the host's lists wait for slow servers (`[proxy] list_grace_ms`).
    list_grace: Duration,
    /// When the list grace ends: set by the first wait, so later ones do not restart it.
    grace_ends: std::sync::OnceLock<tokio::time::Instant>,
}

impl Downstreams {
    /// Starts every enabled server concurrently and builds the catalog. A server that fails
    /// to start is logged and left out of the catalog; it does not hold up the others.
    pub async fn start(config: &Config, host: Arc<HostLink>) -> Arc<Downstreams> {
        let this = Self::new(config, host);
        this.connect_all().await;
        this
    }

    /// The set of servers, not yet started: [`Self::connect_all`] starts them. Lets the
    /// MCP server answer the host's handshake while the downstreams are still starting.
    pub fn new(config: &Config, host: Arc<HostLink>) -> Arc<Downstreams> {
        let tracker = TaskTracker::new();
        let changes = Arc::new(Changes::default());
        let servers: Vec<Arc<Server>> = config
            .enabled_servers()
            .map(|c| {
                Arc::new(Server::new(
                    c.clone(),
                    host.clone(),
                    changes.clone(),
                    tracker.clone(),
                ))
            })
            .collect();
        let this = Arc::new(Downstreams {
            servers: RwLock::new(Arc::new(servers)),
            changes: changes.clone(),
            catalog: RwLock::default(),
            separator: config.proxy.separator.clone(),
            host,
            policy: RwLock::new((
                Arc::new(Policy::new(
                    config.policy.deny.clone(),
                    config.policy.confirm,
                    config.proxy.audit_log.clone(),
                )),
                config.policy.clone(),
            )),
            pins: RwLock::new(Arc::new(load_pins(config))),
            tracker: tracker.clone(),
            shutdown: CancellationToken::new(),
            started: tokio::sync::watch::channel(false).0,
            links: resources::Links::default(),
            list_grace: config.proxy.list_grace,
            grace_ends: std::sync::OnceLock::new(),
        });
        tracker.spawn(refresh_changed(
            Arc::downgrade(&this),
            changes,
            this.shutdown.clone(),
        ));
        this
    }

    /// Starts every server concurrently and marks the set started. The catalog is rebuilt
    /// as each server comes up, so a slow one does not hold back the others' tools; a host
    /// that already listed them is told of each change.
    pub async fn connect_all(&self) {
        let servers = self.servers();
        futures::future::join_all(servers.iter().map(|s| async move {
            let _ = s.live().await;
            let changed = self.rebuild_and_notify().await;
            if changed.any() {
                self.host.notify_changed(changed).await;
            }
        }))
        .await;
        self.started.send_replace(true);
    }

    /// Waits until every server's first start has ended, or, unless `full`, until the list
    /// grace (`[proxy] list_grace_ms`) has passed: the host's lists then show what is ready
    /// and late servers are announced with `list_changed`.
    pub async fn settled(&self, full: bool) {
        if full {
            self.started().await;
        } else {
            let ends = *self
                .grace_ends
                .get_or_init(|| tokio::time::Instant::now() + self.list_grace);
            let _ = tokio::time::timeout_at(ends, self.started()).await;
        }
    }

    /// Waits, within the list grace, for the servers to start; then, if `name` is a tool
    /// of a server still starting, for that server (within its `startup_timeout_ms`), so a
    /// call waits only for the server it goes to.
    async fn ready_for(&self, name: &str) {
        self.settled(false).await;
        if self.catalog().get(name).is_some() {
            return;
        }
        let servers = self.servers();
        let Some(server) = servers
            .iter()
            .find(|s| matches!(s.state(), State::Starting) && self.names(s, name))
        else {
            return;
        };
        let deadline = tokio::time::Instant::now() + server.config.startup_timeout;
        let mut started = self.started.subscribe();
        let waiting = || {
            let catalog = self.catalog();
            let listed = catalog
                .entries()
                .iter()
                .any(|e| e.server == server.config.name);
            catalog.get(name).is_none()
                && match server.state() {
                    State::Starting => true,
                    // Started: wait for its tools to reach the catalog.
                    State::Ready(_) => !listed && !server.tools().is_empty(),
                    State::Failed { .. } | State::Closed => false,
                }
        };
        while waiting() && tokio::time::Instant::now() < deadline {
            // Each server's start rebuilds the catalog; look again shortly.
            let _ = tokio::time::timeout(Duration::from_millis(50), started.wait_for(|d| *d)).await;
        }
    }

    /// Each server's own `instructions`, in config order, for those that gave some.
    pub fn instructions(&self) -> Vec<(String, String)> {
        self.servers()
            .iter()
            .filter_map(|s| Some((s.config.name.clone(), s.instructions()?)))
            .filter(|(_, text)| !text.trim().is_empty())
            .collect()
    }

    /// Waits until the first start of every server has ended (in success or failure).
    pub async fn started(&self) {
        let mut started = self.started.subscribe();
        let _ = started.wait_for(|done| *done).await;
    }

    /// Whether the first start of every server has ended.
    pub fn is_started(&self) -> bool {
        *self.started.borrow()
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The servers, in config order (as of now: a reload may swap them).
    pub fn servers(&self) -> Arc<Vec<Arc<Server>>> {
        self.servers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Status of every server, for `planmux check`.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.servers()
            .iter()
            .map(|s| {
                let (ready, error) = match s.state() {
                    State::Ready(_) => (true, None),
                    State::Failed { error, .. } => (false, Some(error)),
                    State::Starting => (false, Some("not started".into())),
                    State::Closed => (false, Some("closed".into())),
                };
                ServerStatus {
                    name: s.config.name.clone(),
                    ready,
                    tools: s.tools().len(),
                    startup: s.startup_time(),
                    error,
                }
            })
            .collect()
    }

    /// Whether `exported` is a name under `server`'s prefix (never, for a server with
    /// `namespace = false`: its names say nothing of it).
    fn names(&self, server: &Server, exported: &str) -> bool {
        server.config.namespace
            && exported
                .strip_prefix(server.config.name.as_str())
                .is_some_and(|rest| rest.starts_with(self.separator.as_str()))
    }

    /// For a name under a server that never started (so its tools are unknown), the error
    /// that says so. `name` is an exported name, or `server:tool` as plans may write it.
    pub fn never_started(&self, name: &str) -> Option<DownstreamError> {
        self.servers().iter().find_map(|s| {
            let written = name
                .split_once(':')
                .is_some_and(|(server, _)| server == s.config.name);
            if !(self.names(s, name) || written) || s.startup_time().is_some() {
                return None;
            }
            let reason = match s.state() {
                State::Failed { error, .. } => error,
                State::Starting => "it is still starting; try again in a moment".into(),
                State::Closed => "it is shut down".into(),
                State::Ready(_) => return None,
            };
            Some(DownstreamError::NeverStarted {
                server: s.config.name.clone(),
                reason,
            })
        })
    }

    /// The definition fields of the tool exported as `exported` that rmcp's types leave
    /// out, as its server sent them.
    pub fn unmodelled_fields(&self, exported: &str) -> Option<rmcp::model::JsonObject> {
        let catalog = self.catalog();
        let entry = catalog.get(exported)?;
        self.server(&entry.server)?.fields.of(&entry.tool)
    }

    /// What joins a server's name and its tools' in exported names (`[proxy] separator`).
    pub fn separator(&self) -> &str {
        &self.separator
    }

    /// The `[policy]` in force.
    pub fn policy(&self) -> Arc<Policy> {
        self.policy
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .clone()
    }

    /// Puts `config`'s `[policy]` in force, if it differs from the one in force (its
    /// audit trail goes on where it went: `[proxy]` is not reloaded). Whether it did.
    fn apply_policy(&self, config: &PolicyConfig) -> bool {
        let mut policy = self.policy.write().unwrap_or_else(PoisonError::into_inner);
        if format!("{config:?}") == format!("{:?}", policy.1) {
            return false;
        }
        let next = policy.0.with_rules(config.deny.clone(), config.confirm);
        *policy = (Arc::new(next), config.clone());
        true
    }

    /// The checkpoint: whether `route` may call the exported tool `name` (recorded in
    /// the audit trail). The proof it returns is what [`Self::call_tool`] requires.
    pub async fn authorize(&self, name: &str, route: &Route) -> Result<Authorized, Denied> {
        self.ready_for(name).await;
        let catalog = self.catalog();
        let tier = catalog.get(name).map(|e| e.tier);
        self.decide(&catalog, name, tier, route)
    }

    /// [`Self::authorize`] without waiting: `None` when it would wait (servers still
    /// starting within the list grace, or `name` not listed yet).
    pub fn authorize_now(&self, name: &str, route: &Route) -> Option<Result<Authorized, Denied>> {
        let settled = self.is_started()
            || self
                .grace_ends
                .get()
                .is_some_and(|ends| tokio::time::Instant::now() >= *ends);
        if !settled {
            return None;
        }
        let catalog = self.catalog();
        let tier = catalog.get(name)?.tier;
        Some(self.decide(&catalog, name, Some(tier), route))
    }

    /// The policy's decision on `name`, of `tier` (`None`: not listed), as `catalog`
    /// holds it back or not (recorded in the audit trail).
    fn decide(
        &self,
        catalog: &Catalog,
        name: &str,
        tier: Option<Tier>,
        route: &Route,
    ) -> Result<Authorized, Denied> {
        let held = catalog.quarantined().iter().find(|q| q.exported == name);
        self.policy()
            .authorize(name, tier, held.map(|q| q.change.as_str()), route)
    }

    /// The checkpoint for a plan's resource step: a read of `uri` (recorded in the audit
    /// trail). `[policy] deny` globs match `resource:<uri>`.
    pub fn authorize_read(&self, uri: &str, route: &Route) -> Result<(), Denied> {
        let name = format!("resource:{uri}");
        self.policy()
            .authorize(&name, Some(Tier::Read), None, route)
            .map(|_| ())
    }

    /// Routes a `tools/call` by exported name to its server and returns the answer as the
    /// server gave it. `proof` is the checkpoint's for this very tool. `caller` is the
    /// host session the call is for: where its progress, and what the server asks or
    /// says meanwhile, go.
    pub async fn call_tool(
        &self,
        mut params: CallToolRequestParams,
        proof: &Authorized,
        caller: Option<&Caller>,
        cancel: &CancellationToken,
    ) -> Result<CallToolResponse, DownstreamError> {
        if proof.tool() != params.name {
            return Err(DownstreamError::Unauthorized {
                tool: params.name.to_string(),
            });
        }
        self.ready_for(&params.name).await;
        let (server, tool) = self.locate(&params.name)?;
        params.name = tool.into();
        let cancel = cancel.child_token();
        let shutdown = self.shutdown.clone();
        let result = tokio::select! {
            result = server.call(params, proof, caller, &cancel) => result,
            () = shutdown.cancelled() => {
                cancel.cancel();
                Err(DownstreamError::Closed { server: server.config.name.clone() })
            }
        };
        if let Ok(CallToolResponse::Complete(answer)) = &result {
            self.links.note(&server.config.name, answer);
        }
        result
    }

    /// Puts `next` in force, unless it turns pinning off while a lock was in force.
    fn repin(&self, next: Pins) {
        let mut pins = self.pins.write().unwrap_or_else(PoisonError::into_inner);
        if matches!(next, Pins::Unpinned) && !matches!(**pins, Pins::Unpinned) {
            tracing::warn!(
                "servers.lock is gone: the tools it pinned stay pinned until `planmux lock` writes it again (restart planmux to run without a lock)"
            );
        } else {
            *pins = Arc::new(next);
        }
    }

    /// The server of the tool exported as `name`, and the tool's own name there.
    fn locate(&self, name: &str) -> Result<(Arc<Server>, String), DownstreamError> {
        let catalog = self.catalog();
        let Some(entry) = catalog.get(name) else {
            if let Some(failed) = self.never_started(name) {
                return Err(failed);
            }
            return Err(DownstreamError::UnknownTool {
                closest: catalog
                    .closest(name, 3)
                    .into_iter()
                    .map(String::from)
                    .collect(),
                name: name.to_owned(),
            });
        };
        match self.server(&entry.server) {
            Some(server) => Ok((server, entry.tool.clone())),
            None => Err(DownstreamError::Closed {
                server: entry.server.clone(),
            }),
        }
    }

    /// Where a call of `name` goes when its server is on a line connection (a stdio
    /// child or a built-in server), up or not: a catalog tool. A plain lookup: this runs
    /// on the host's read path, where an unknown name must not cost the closest-name
    /// hints `locate` builds for its error.
    pub fn line_route(&self, name: &str) -> Option<LineRoute> {
        let catalog = self.catalog();
        let entry = catalog.get(name)?;
        let server = self.server(&entry.server)?;
        server.is_line().then(|| LineRoute {
            exported: name.to_owned(),
            tool: entry.tool.clone(),
            server,
        })
    }

    /// Notes the resource links in a tool result that came as JSON text from `server`
    /// (what a client may read next), as for a decoded one.
    pub fn note_raw_links(&self, server: &str, result: &[u8]) {
        if memchr::memmem::find(result, b"\"resource").is_some()
            && let Ok(result) = serde_json::from_slice::<CallToolResult>(result)
        {
            self.links.note(server, &result);
        }
    }

    /// Calls a tool for a plan step: [`Self::call_tool`], with the result as JSON. On a
    /// line connection the server's result is read as it came (through its call table),
    /// so fields no SDK models and numbers as written reach the plan; elsewhere it is
    /// rmcp's decoded result. A result that asks for more input is `input_required`.
    pub async fn call_tool_json(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        proof: &Authorized,
        caller: Option<&Caller>,
        cancel: &CancellationToken,
    ) -> Result<serde_json::Value, DownstreamError> {
        self.ready_for(name).await;
        let route = match self.line_route(name) {
            Some(route) => route,
            None => {
                let mut params = CallToolRequestParams::new(name.to_owned());
                params.arguments = arguments;
                let encoded = match self.call_tool(params, proof, caller, cancel).await? {
                    CallToolResponse::Complete(result) => serde_json::to_value(result),
                    CallToolResponse::InputRequired(asked) => serde_json::to_value(asked),
                    _ => {
                        return Err(DownstreamError::Protocol {
                            server: name.to_owned(),
                            message: "answered tools/call with something that is not a tool result"
                                .into(),
                        });
                    }
                };
                return encoded.map_err(|e| DownstreamError::Protocol {
                    server: name.to_owned(),
                    message: e.to_string(),
                });
            }
        };
        let server = route.server.config.name.clone();
        let cancel = cancel.child_token();
        let call = route.call(proof, arguments.as_ref(), caller, &cancel);
        let reply = tokio::select! {
            reply = call => reply?,
            () = self.shutdown.cancelled() => {
                cancel.cancel();
                return Err(DownstreamError::Closed { server });
            }
        };
        reply.tool_result(&server).inspect(|_| {
            if let Some(result) = reply.result() {
                self.note_raw_links(&server, result);
            }
        })
    }

    /// Re-lists what one server offers (after a `list_changed` or a reconnect) and tells
    /// the host which of its lists changed, or the server `said` changed: a server's
    /// `list_changed` reaches the host even when the merged list reads the same.
    async fn refresh(&self, server_name: &str, said: Changed) {
        let Some(server) = self.server(server_name) else {
            return;
        };
        if let Err(e) = server.relist().await {
            // Shut down meanwhile: nothing to refresh, and nothing wrong.
            if !server.is_closed() {
                tracing::warn!(server = %server_name, error = %e, "could not refresh tools");
            }
            return;
        }
        let changed = self.rebuild_and_notify().await.or(said);
        if changed.any() {
            tracing::info!(server = %server_name, tools = changed.tools, prompts = changed.prompts, resources = changed.resources, "lists changed");
            self.host.notify_changed(changed).await;
        }
    }

    /// Rebuilds the catalog from what every server offers: what changed, and a notice per
    /// tool newly quarantined.
    fn rebuild_catalog(&self) -> (Changed, Vec<String>) {
        let servers = self.servers();
        let offers: Vec<(&Arc<Server>, Offer)> = servers.iter().map(|s| (s, s.offer())).collect();
        let lists: Vec<ServerTools> = offers
            .iter()
            .map(|(s, offer)| ServerTools {
                server: s.config.name.clone(),
                namespace: s.config.namespace,
                tools: offer.tools.clone(),
                tiers: s.config.tiers.clone(),
            })
            .collect();
        let listed: Vec<ServerResources> = offers
            .into_iter()
            .map(|(s, offer)| ServerResources {
                server: s.config.name.clone(),
                namespace: s.config.namespace,
                prompts: offer.prompts,
                resources: offer.resources,
                templates: offer.templates,
                subscribe: offer.subscribe,
            })
            .collect();
        let pins = self
            .pins
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let next = Catalog::build(&self.separator, &lists, &self.policy(), &pins)
            .with_resources(Resources::build(&self.separator, &listed));
        let mut current = self.catalog.write().unwrap_or_else(PoisonError::into_inner);
        let (was, now) = (current.resources(), next.resources());
        let changed = Changed {
            tools: current.definitions().ne(next.definitions()),
            prompts: was.prompts().ne(now.prompts()),
            resources: was.resources().ne(now.resources()) || was.templates().ne(now.templates()),
        };
        let newly: Vec<String> = next
            .quarantined()
            .iter()
            .filter(|q| !current.quarantined().contains(q))
            .map(|q| {
                format!(
                    "planmux quarantined {}: {}; run `planmux lock` to accept it",
                    q.exported, q.change
                )
            })
            .collect();
        *current = Arc::new(next);
        (changed, newly)
    }

    /// Rebuilds the catalog and tells the host about newly quarantined tools; what
    /// changed.
    async fn rebuild_and_notify(&self) -> Changed {
        let (changed, newly) = self.rebuild_catalog();
        for notice in newly {
            tracing::warn!("{notice}");
            self.host.notify_warning(notice).await;
        }
        changed
    }

    /// Applies a changed config's `[policy]` and servers: new ones start, removed ones
    /// stop, changed ones restart, the others keep running untouched; the host hears
    /// what changed. The rest of the config (`[proxy]`, `[http]`, pipelines) is not
    /// reloaded.
    pub async fn reload(&self, config: &Config) -> Reloaded {
        // A tool reviewed with `planmux lock` since is let out of quarantine now. A lock
        // that vanished (deleted, or mid-rename by an editor) does not turn pinning off:
        // the pins in force stay until a lock is there again.
        self.repin(load_pins(config));
        let old = self.servers();
        let mut next = Vec::new();
        let mut fresh = Vec::new();
        let mut done = Reloaded {
            policy: self.apply_policy(&config.policy),
            ..Reloaded::default()
        };
        for wanted in config.enabled_servers() {
            let existing = old.iter().find(|s| s.config.name == wanted.name);
            // The whole section as parsed (secrets included), compared in memory only.
            match existing {
                Some(server) if format!("{:?}", server.config) == format!("{wanted:?}") => {
                    next.push(server.clone());
                }
                _ => {
                    let server = Arc::new(Server::new(
                        wanted.clone(),
                        self.host.clone(),
                        self.changes.clone(),
                        self.tracker.clone(),
                    ));
                    match existing {
                        Some(_) => done.restarted.push(wanted.name.clone()),
                        None => done.added.push(wanted.name.clone()),
                    }
                    fresh.push(server.clone());
                    next.push(server);
                }
            }
        }
        let gone: Vec<Arc<Server>> = old
            .iter()
            .filter(|s| !next.iter().any(|n| Arc::ptr_eq(n, s)))
            .cloned()
            .collect();
        done.removed = gone
            .iter()
            .map(|s| s.config.name.clone())
            .filter(|name| !done.restarted.contains(name))
            .collect();
        *self.servers.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        futures::future::join_all(gone.iter().map(|s| s.close())).await;
        // Removed (or now denied) tools leave the lists now; each new server's arrive as
        // it comes up. A new policy may also change planmux's own tools (`approve_plan`
        // goes with `confirm = "none"`) and which pipelines are listed.
        let mut changed = self.rebuild_and_notify().await;
        if done.policy {
            changed = changed.or(Changed::TOOLS);
        }
        if changed.any() {
            self.host.notify_changed(changed).await;
        }
        futures::future::join_all(fresh.iter().map(|s| async move {
            let _ = s.live().await;
            let changed = self.rebuild_and_notify().await;
            if changed.any() {
                self.host.notify_changed(changed).await;
            }
        }))
        .await;
        done
    }

    /// Closes every server concurrently and waits (bounded) until their processes are gone.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        futures::future::join_all(self.servers().iter().map(|s| s.close())).await;
        self.tracker.close();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.tracker.wait()).await;
    }
}

/// `servers.lock`, when the config has one; a lock that cannot be read holds every tool
/// back rather than turning pinning off.
fn load_pins(config: &Config) -> Pins {
    let Some(path) = &config.lock_path else {
        return Pins::Unpinned;
    };
    match Lock::load(path) {
        Ok(Some(lock)) => Pins::Locked(lock),
        Ok(None) => Pins::Unpinned,
        Err(why) => {
            tracing::error!("{why}; every tool is quarantined until `planmux lock` rewrites it");
            Pins::Broken(why)
        }
    }
}

/// Refreshes servers as they report changes: each changed server once at a time, servers
/// concurrently, until shutdown.
async fn refresh_changed(
    downstreams: std::sync::Weak<Downstreams>,
    changes: Arc<Changes>,
    shutdown: CancellationToken,
) {
    let mut running = futures::stream::FuturesUnordered::new();
    let mut busy = std::collections::HashSet::new();
    loop {
        tokio::select! {
            () = changes.changed() => {}
            Some(done) = futures::StreamExt::next(&mut running) => {
                busy.remove(&done);
            }
            () = shutdown.cancelled() => return,
        }
        for (server, said) in changes.take(&busy) {
            let Some(this) = downstreams.upgrade() else {
                return;
            };
            busy.insert(server.clone());
            running.push(async move {
                this.refresh(&server, said).await;
                server
            });
        }
    }
}
