//! The downstream servers: starting them together, the merged catalog, routing a call to
//! the right one, refreshing on list changes and reconnects, and shutting them all down.

mod calls;
mod changes;
mod checkpoint;
mod era;
mod error;
pub(crate) mod fields;
mod host_link;
mod offer;
mod refresh;
mod relay;
mod remembered;
mod resources;
mod route;
mod server;
mod sessions;
mod sign_ins;
mod tap;
mod tasks;
mod transport;

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, JsonObject};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use calls::{LineCall, RawReply, RouteSink, Sink, with_traceparent};
pub use changes::Changed;
pub use error::DownstreamError;
pub use fields::restore as restore_tool_fields;
pub use host_link::HostLink;
pub use refresh::Reloaded;
pub use relay::{Asked, Asks, Caller, InputTo, LogLevel, Session, identity_of};
pub use route::{LineRoute, NotSent};
pub use server::{Offer, Server, State};
pub(crate) use sessions::Calling;

use crate::catalog::Catalog;
use crate::config::Config;
use crate::policy::{Authorized, Policy};
use changes::Changes;
use checkpoint::Checkpoint;

/// A status line for `planmux check`.
#[derive(Debug, Clone)]
pub struct ServerStatus {
    pub name: String,
    /// `connected`, `starting`, `failed`, `needs sign-in` or `closed`.
    pub state: &'static str,
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
    /// The checkpoint every call passes: the `[policy]` and the pins in force.
    checkpoint: Checkpoint,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    /// Bumped whenever a server's start ends, so waits for some servers look again.
    progress: tokio::sync::watch::Sender<()>,
    /// The servers whose first start has ended with the catalog rebuilt after it: what
    /// they listed (or their absence) is in it.
    listed: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Set when the first start of every server has ended ([`Self::start_all`], which
    /// runs once).
    starting_all: tokio::sync::OnceCell<()>,
    /// The config file the servers came from (its canonical path, found once): part of
    /// what a remembered list is kept under.
    source: String,
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
        this.start_all().await;
        this
    }

    /// The set of servers, not yet started: [`Self::start_all`] starts them. Lets the
    /// MCP server answer the host's handshake while the downstreams are still starting.
    pub fn new(config: &Config, host: Arc<HostLink>) -> Arc<Downstreams> {
        let tracker = TaskTracker::new();
        let changes = Arc::new(Changes::default());
        let source = remembered::canonical(&config.source);
        let servers: Vec<Arc<Server>> = config
            .enabled_servers()
            .map(|c| {
                Arc::new(Server::new(
                    c.clone(),
                    remembered::Remembered::place(&source, c),
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
            checkpoint: Checkpoint::new(config),
            tracker: tracker.clone(),
            shutdown: CancellationToken::new(),
            progress: tokio::sync::watch::channel(()).0,
            listed: std::sync::Mutex::default(),
            starting_all: tokio::sync::OnceCell::new(),
            source,
            links: resources::Links::default(),
            list_grace: config.proxy.list_grace,
            grace_ends: std::sync::OnceLock::new(),
        });
        tracker.spawn(refresh::refresh_changed(
            Arc::downgrade(&this),
            changes,
            this.shutdown.clone(),
        ));
        // What the servers listed when they last started is the catalog until they list.
        this.rebuild_catalog();
        this
    }

    /// Starts every server concurrently (once, however often it is called: later calls
    /// wait for the first) and marks the set started. The catalog is rebuilt as each
    /// server comes up, so a slow one does not hold back the others' tools; a host that
    /// already listed them is told of each change.
    pub async fn start_all(&self) {
        self.starting_all
            .get_or_init(|| async {
                let servers = self.servers();
                futures::future::join_all(servers.iter().map(|s| self.start_one(s))).await;
            })
            .await;
        self.progress.send_replace(());
    }

    /// Starts the servers named `names` (those not running yet) concurrently, each
    /// within its `startup_timeout_ms`, and waits for them: what `planmux run` and a plan
    /// need when only some servers matter.
    pub async fn start_only(&self, names: &[String]) {
        let servers = self.servers();
        let wanted = servers.iter().filter(|s| names.contains(&s.config.name));
        futures::future::join_all(wanted.map(|s| self.start_one(s))).await;
    }

    /// Starts one server unless it is running, then brings the catalog (and the host)
    /// up to date with what it listed, or with its absence.
    async fn start_one(&self, server: &Arc<Server>) {
        let _ = server.live().await;
        let changed = self.rebuild_and_notify().await;
        self.listed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(server.config.name.clone());
        self.progress.send_replace(());
        if changed.any() {
            self.host.notify_changed(changed).await;
        }
    }

    /// Whether `server`'s first start has ended and the catalog shows what it listed.
    fn has_listed(&self, server: &Server) -> bool {
        self.listed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&server.config.name)
    }

    /// Whether every server has listed what it offers: its first start ended (and the
    /// catalog shows it), or it is still starting with what it listed last time
    /// remembered (`remembered.rs`).
    fn all_listed(&self) -> bool {
        self.is_started()
            || self
                .servers()
                .iter()
                .all(|s| s.is_recalled() || self.has_listed(s))
    }

    /// Waits until every server has listed what it offers (see [`Self::all_listed`]),
    /// or, unless `full`, until the list grace (`[proxy] list_grace_ms`) has passed: the
    /// host's lists then show what is known and late servers are announced with
    /// `list_changed`.
    pub async fn settled(&self, full: bool) {
        let listed = async {
            let mut progress = self.progress.subscribe();
            let _ = progress.wait_for(|()| self.all_listed()).await;
        };
        if full {
            listed.await;
        } else {
            let ends = *self
                .grace_ends
                .get_or_init(|| tokio::time::Instant::now() + self.list_grace);
            let _ = tokio::time::timeout_at(ends, listed).await;
        }
    }

    /// Waits for the server a call of `name` goes to, and for nothing else: a tool of a
    /// server still starting (listed from what it listed last time, or not yet listed)
    /// waits for that server's start, within its `startup_timeout_ms`. A name that is
    /// not an exact exported name (unknown, or a bare or folded one some server not yet
    /// listed may have too) first waits the list grace for every server to list.
    async fn ready_for(&self, name: &str) {
        if self.catalog().get(name).is_none() {
            self.settled(false).await;
        }
        let server = match self.catalog().find_called(name) {
            Some(entry) => self.server(&entry.server),
            None => self
                .servers()
                .iter()
                .find(|s| self.names(s, name) && !self.has_listed(s))
                .cloned(),
        };
        if let Some(server) = server.filter(|s| !self.has_listed(s)) {
            self.start_one(&server).await;
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

    /// Whether some server has listed nothing yet, not even from memory.
    pub fn any_unknown(&self) -> bool {
        self.servers()
            .iter()
            .any(|s| !s.is_recalled() && !self.has_listed(s))
    }

    /// Whether some server is listed only from what it listed when it last started.
    pub fn any_recalled(&self) -> bool {
        self.servers().iter().any(|s| s.is_recalled())
    }

    /// The servers whose first start has not ended with the catalog showing what they
    /// listed (listed from memory, or not at all).
    pub fn starting(&self) -> Vec<String> {
        self.servers()
            .iter()
            .filter(|s| !self.has_listed(s))
            .map(|s| s.config.name.clone())
            .collect()
    }

    /// Whether the first start of every server has ended.
    pub fn is_started(&self) -> bool {
        self.starting_all.initialized()
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The servers, in config order (as of now: a reload may swap them).
    /// How long a host may treat the merged lists as fresh: the shortest `ttlMs` a server
    /// gave, never longer than [`crate::config::LIST_TTL_MS`].
    pub fn list_ttl_ms(&self) -> u64 {
        self.servers()
            .iter()
            .filter_map(|server| server.offered_ttl_ms())
            .fold(crate::config::LIST_TTL_MS, u64::min)
    }

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
                let (state, error) = match s.state() {
                    State::Ready(_) => ("connected", None),
                    State::Failed { error, .. } => ("failed", Some(error)),
                    State::SignedOut { signed_out, .. } => (
                        "needs sign-in",
                        Some(crate::oauth::sign_in_message(&s.config.name, &signed_out)),
                    ),
                    State::Starting => ("starting", Some("not started".into())),
                    State::Closed => ("closed", Some("closed".into())),
                };
                ServerStatus {
                    name: s.config.name.clone(),
                    state,
                    ready: state == "connected",
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

    /// The server an exported name (or `server:tool`, as plans may write it) is under,
    /// whether or not it listed such a tool.
    pub fn server_named_by(&self, name: &str) -> Option<String> {
        let written = name.split_once(':').map(|(server, _)| server);
        self.servers()
            .iter()
            .find(|s| self.names(s, name) || written == Some(s.config.name.as_str()))
            .map(|s| s.config.name.clone())
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
                State::SignedOut { signed_out, .. } => {
                    return Some(DownstreamError::NeedsSignIn {
                        server: s.config.name.clone(),
                        signed_out,
                    });
                }
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
        self.checkpoint.policy()
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
        let call = server.call(params, proof, caller, &cancel);
        tokio::pin!(call);
        let result = self
            .until_shutdown(&server.config.name, &cancel, call)
            .await;
        if let Ok(CallToolResponse::Complete(answer)) = &result {
            self.links.note(&server.config.name, answer);
        }
        result
    }

    /// The server of the tool exported as `name`, and the tool's own name there.
    fn locate(&self, name: &str) -> Result<(Arc<Server>, String), DownstreamError> {
        let catalog = self.catalog();
        let Some(entry) = catalog.get(name) else {
            if let Some(failed) = self.never_started(name) {
                return Err(failed);
            }
            return Err(DownstreamError::unresolved(
                name,
                catalog.resolve_called(name),
            ));
        };
        match self.server(&entry.server) {
            Some(server) => Ok((server, entry.tool.clone())),
            None => Err(DownstreamError::Closed {
                server: entry.server.clone(),
            }),
        }
    }

    /// Where a call of `name` goes when its server is on a line connection (a stdio
    /// child or a built-in server), up or not: the catalog tool `name` resolves to (an
    /// exact exported name at the cost of a map lookup; the rest of the rule only on a
    /// miss). No hints: this runs on the host's read path, where an unknown name must not
    /// cost the closest-name hints `locate` builds for its error. The route's
    /// [`LineRoute::exported`] is the name to authorize.
    pub fn line_route(&self, name: &str) -> Option<LineRoute> {
        let catalog = self.catalog();
        let entry = catalog.find_called(name)?;
        let server = self.server(&entry.server)?;
        server.is_line().then(|| LineRoute {
            exported: entry.exported.to_string(),
            tool: entry.tool.clone(),
            server,
        })
    }

    /// Notes the resource links in a tool result that came as JSON text from `server`
    /// (what a client may read next), as for a decoded one.
    pub fn note_raw_links(&self, server: &str, result: &[u8]) {
        if crate::text::contains!(result, b"\"resource")
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
        tokio::pin!(call);
        let reply = self.until_shutdown(&server, &cancel, call).await?;
        reply.tool_result(&server).inspect(|_| {
            if let Some(result) = reply.result() {
                self.note_raw_links(&server, result);
            }
        })
    }

    /// `work` on `server`, unless planmux shuts down first: then `cancel` (the work's) is
    /// cancelled and the work ends saying the server is shut down. The work stays pinned
    /// where its caller made it: a call's future is large, and a debug build would copy
    /// it onto the stack again.
    async fn until_shutdown<T>(
        &self,
        server: &str,
        cancel: &CancellationToken,
        work: std::pin::Pin<&mut impl Future<Output = Result<T, DownstreamError>>>,
    ) -> Result<T, DownstreamError> {
        tokio::select! {
            done = work => done,
            () = self.shutdown.cancelled() => {
                cancel.cancel();
                Err(DownstreamError::Closed { server: server.to_owned() })
            }
        }
    }

    /// Runs `work` in the background, owned with the servers' own background work:
    /// shutdown waits for it (bounded). Nothing runs once shutdown has begun, or outside
    /// a runtime.
    pub(crate) fn track(&self, work: impl Future<Output = ()> + Send + 'static) {
        if !self.shutdown.is_cancelled() && tokio::runtime::Handle::try_current().is_ok() {
            self.tracker.spawn(work);
        }
    }

    /// Closes every server concurrently and waits (bounded) until their processes are gone.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        futures::future::join_all(self.servers().iter().map(|s| s.close())).await;
        self.tracker.close();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.tracker.wait()).await;
    }
}
