//! The client side of each downstream connection: relays what a downstream server sends
//! (log messages, list changes, and its requests for sampling, elicitation and roots) to
//! the host that is connected upstream. Progress goes through [`super::tap`].

// Sampling, roots and logging are deprecated by SEP-2577 but hosts and servers still use them.
#![allow(deprecated)]

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientResult, CreateMessageRequest,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequest, ElicitRequestParams,
    ElicitResult, ErrorCode, Implementation, ListRootsRequest, ListRootsResult, LoggingLevel,
    LoggingMessageNotificationParam, ProgressToken, ResourceUpdatedNotificationParam,
    ServerRequest,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionSink};
use rmcp::{ClientHandler, ErrorData, Peer, RoleClient, RoleServer};
use tokio::sync::Notify;

/// How long a downstream's request (roots, sampling, elicitation) waits for a host that
/// is still connecting.
const HOST_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The host connected upstream, once it has connected.
#[derive(Default)]
pub struct HostLink {
    /// Whether a host will connect at all (`serve`); without one (`planmux run`, `check`)
    /// a downstream's request for the host fails at once instead of waiting.
    expecting: bool,
    peer: RwLock<Option<Peer<RoleServer>>>,
    /// Woken when a host connects, for requests that came before it.
    connected: Notify,
    /// Whether the host finished its handshake (`notifications/initialized`): nothing but
    /// the handshake's answer may reach it before.
    initialized: std::sync::atomic::AtomicBool,
    /// `subscriptions/listen` streams of hosts on protocol 2026-07-28, by request.
    listeners: Mutex<Vec<(u64, SubscriptionSink)>>,
    next_listener: AtomicU64,
    /// The least severe log level the host wants (`logging/setLevel`); `None`: all.
    log_level: RwLock<Option<LoggingLevel>>,
    /// Many hosts at once (`serve --http`): a server's request or message cannot be told
    /// apart by the session whose call caused it, so none is relayed to any session —
    /// never to the wrong one. Each session's own calls keep their progress,
    /// cancellation and approval, which travel with the call.
    sessions: bool,
    /// With many sessions: every session's peer, for what may go to all of them (lists
    /// changed); closed ones are dropped as they are met.
    everyone: RwLock<Vec<Peer<RoleServer>>>,
}

impl HostLink {
    /// The link of `serve`, where a host is expected to connect.
    pub fn expecting_host() -> Self {
        Self {
            expecting: true,
            ..Self::default()
        }
    }

    /// The link of `serve --http`, shared by every session: it relays nothing a server
    /// asks on its own (see the `sessions` field).
    pub fn for_sessions() -> Self {
        Self {
            sessions: true,
            ..Self::default()
        }
    }

    /// Remembers the host's peer (called by the upstream server on each connection);
    /// with many sessions, none is remembered.
    pub fn set(&self, peer: Peer<RoleServer>) {
        if self.sessions {
            return;
        }
        *self.peer.write().unwrap_or_else(PoisonError::into_inner) = Some(peer);
        self.connected.notify_waiters();
    }

    /// A session finished its handshake (called once per session): with many sessions,
    /// it hears from now on what goes to all of them.
    pub fn joined(&self, peer: Peer<RoleServer>) {
        if self.sessions {
            let mut everyone = self
                .everyone
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            everyone.retain(|p| !p.is_transport_closed());
            everyone.push(peer);
        }
    }

    /// The host's peer, if a host is connected.
    pub fn get(&self) -> Option<Peer<RoleServer>> {
        self.peer
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The host's peer once its handshake has ended: before, nothing may be sent to it
    /// (rmcp would hold the message until the handshake's answer, and a wait would stall).
    fn ready(&self) -> Option<Peer<RoleServer>> {
        self.get()
            .filter(|_| self.initialized.load(Ordering::Acquire))
    }

    /// The host finished its handshake: notifications may go to it.
    pub fn set_initialized(&self) {
        self.initialized.store(true, Ordering::Release);
        self.connected.notify_waiters();
    }

    /// Waits until a host has connected (its handshake or first request), at most `limit`.
    pub async fn arrival(&self, limit: std::time::Duration) {
        self.until(limit, || self.get().map(|_| ())).await;
    }

    /// Waits, at most `limit`, until `decided` gives an answer, looking again each time a
    /// host connects or finishes its handshake.
    async fn until<T>(
        &self,
        limit: std::time::Duration,
        decided: impl Fn() -> Option<T>,
    ) -> Option<T> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            // Registered before looking, so a change in between is not missed.
            let changed = self.connected.notified();
            if let Some(answer) = decided() {
                return Some(answer);
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return None;
            }
        }
    }

    /// What planmux offers a downstream: what the host declared (roots, sampling,
    /// elicitation with its modes), so a server shows the tools the host can serve. A
    /// 2026-07-28 host takes no requests from a server: nothing is offered. Before any host
    /// connects (and for `planmux run`), the usual set; requests then fail clearly.
    pub fn offer(&self) -> ClientCapabilities {
        if self.sessions {
            // Nothing a server could ask of a host can be relayed.
            return ClientCapabilities::default();
        }
        let Some(peer) = self.get() else {
            return ClientCapabilities::builder()
                .enable_roots()
                .enable_sampling()
                .enable_elicitation()
                .build();
        };
        let Some(info) = peer.peer_info() else {
            return ClientCapabilities::default();
        };
        let host = &info.capabilities;
        let mut offer = ClientCapabilities::default();
        offer.roots = host.roots.clone();
        offer.sampling = host.sampling.clone();
        offer.elicitation = host.elicitation.clone();
        offer
    }

    /// Relays only downstream log messages at `level` or more severe.
    pub fn set_log_level(&self, level: LoggingLevel) {
        *self
            .log_level
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(level);
    }

    /// Whether the host wants log messages at `level`.
    fn wants_log(&self, level: LoggingLevel) -> bool {
        let min = *self
            .log_level
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        // LoggingLevel lists its variants from least to most severe.
        min.is_none_or(|min| level as u8 >= min as u8)
    }

    /// Keeps a listen stream until [`Self::remove_listener`] with the returned key.
    pub fn add_listener(&self, sink: SubscriptionSink) -> u64 {
        let key = self.next_listener.fetch_add(1, Ordering::Relaxed);
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((key, sink));
        key
    }

    /// Forgets a listen stream.
    pub fn remove_listener(&self, key: u64) {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(k, _)| *k != key);
    }

    /// Tells the host which of its lists changed: on the session of an `initialize`d
    /// host, and on every listen stream of a 2026-07-28 host (each stream gets only what
    /// it asked for).
    pub async fn notify_changed(&self, changed: Changed) {
        let ready = self.initialized.load(Ordering::Acquire);
        let mut peers: Vec<Peer<RoleServer>> = self
            .get()
            .filter(|p| ready && p.peer_info().is_some())
            .into_iter()
            .collect();
        // Every HTTP session: what changed is the same for all, and says nothing of any.
        peers.extend(
            self.everyone
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .filter(|p| !p.is_transport_closed() && p.peer_info().is_some())
                .cloned(),
        );
        for peer in peers {
            if changed.tools {
                let _ = peer.notify_tool_list_changed().await;
            }
            if changed.prompts {
                let _ = peer.notify_prompt_list_changed().await;
            }
            if changed.resources {
                let _ = peer.notify_resource_list_changed().await;
            }
        }
        for sink in self.sinks() {
            if changed.tools {
                let _ = sink.notify_tool_list_changed().await;
            }
            if changed.prompts {
                let _ = sink.notify_prompt_list_changed().await;
            }
            if changed.resources {
                let _ = sink.notify_resource_list_changed().await;
            }
        }
    }

    /// Tells the host a resource it subscribed to was updated (URI as the server gave it).
    pub async fn notify_resource_updated(&self, params: ResourceUpdatedNotificationParam) {
        let ready = self.initialized.load(Ordering::Acquire);
        if let Some(peer) = self.get().filter(|p| ready && p.peer_info().is_some()) {
            let _ = peer.notify_resource_updated(params.clone()).await;
        }
        for sink in self.sinks() {
            // A stream that did not subscribe to this URI refuses it.
            let _ = sink.notify_resource_updated(params.uri.clone()).await;
        }
    }

    fn sinks(&self) -> Vec<SubscriptionSink> {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(_, sink)| sink.clone())
            .collect()
    }

    /// Tells the host something it should know, as a warning log message.
    pub async fn notify_warning(&self, text: String) {
        let Some(peer) = self.ready() else {
            return;
        };
        if !self.wants_log(LoggingLevel::Warning) {
            return;
        }
        let mut param = LoggingMessageNotificationParam::new(
            LoggingLevel::Warning,
            serde_json::Value::String(text),
        );
        param.logger = Some("planmux".into());
        // Bounded like every wait: a host that stopped reading must not hold a refresh.
        let limit = std::time::Duration::from_secs(1);
        let _ = tokio::time::timeout(limit, peer.notify_logging_message(param)).await;
    }

    /// The host's peer and capabilities, waiting up to [`HOST_WAIT`] for a host that has
    /// not finished its handshake yet (servers start, and may ask for roots, before it
    /// ends).
    async fn capabilities(&self) -> Option<(Peer<RoleServer>, ClientCapabilities)> {
        let wait = if self.expecting {
            HOST_WAIT
        } else {
            std::time::Duration::ZERO
        };
        let decided = || {
            let peer = self.get()?;
            // A 2026-07-28 host has no session to send requests on: no wait helps.
            let Some(info) = peer.peer_info() else {
                return Some(None);
            };
            let caps = info.capabilities.clone();
            // Nothing may reach a host before its handshake is done.
            self.initialized
                .load(Ordering::Acquire)
                .then_some(Some((peer, caps)))
        };
        self.until(wait, decided).await.flatten()
    }
}

/// Which of the host's lists changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changed {
    pub tools: bool,
    pub prompts: bool,
    /// Resources or resource templates.
    pub resources: bool,
}

impl Changed {
    /// Whether anything changed.
    pub fn any(self) -> bool {
        self.tools || self.prompts || self.resources
    }
}

/// Where a call's progress notifications go: the host's peer and the token the host gave
/// (rmcp chooses its own token for each downstream request).
#[derive(Clone)]
pub struct ProgressSink {
    pub peer: Peer<RoleServer>,
    pub token: ProgressToken,
}

/// Servers whose tools must be listed again (they said their list changed, or
/// reconnected). Each is refreshed once however often it changed meanwhile, so a server
/// that floods `list_changed` costs one refresh at a time, and one slow server does not
/// hold up the others' refreshes.
#[derive(Default)]
pub(crate) struct Changes {
    dirty: Mutex<BTreeSet<String>>,
    wake: Notify,
}

impl Changes {
    /// Marks `server` as changed.
    pub(crate) fn mark(&self, server: &str) {
        self.dirty
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(server.to_owned());
        self.wake.notify_one();
    }

    /// Waits until something is marked (at once if something was marked meanwhile).
    pub(crate) async fn changed(&self) {
        self.wake.notified().await;
    }

    /// Takes the marked servers, except those in `busy` (they stay marked).
    pub(crate) fn take(&self, busy: &HashSet<String>) -> Vec<String> {
        let mut dirty = self.dirty.lock().unwrap_or_else(PoisonError::into_inner);
        let ready: Vec<String> = dirty
            .iter()
            .filter(|s| !busy.contains(*s))
            .cloned()
            .collect();
        for server in &ready {
            dirty.remove(server);
        }
        ready
    }
}

/// The `ClientHandler` of one downstream connection.
pub(crate) struct Relay {
    pub(crate) server: String,
    pub(crate) host: Arc<HostLink>,
    pub(crate) changes: Arc<Changes>,
}

fn unsupported(what: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("the host connected to planmux does not support {what}"),
        None,
    )
}

fn relay_error(what: &str, error: rmcp::service::ServiceError) -> ErrorData {
    match error {
        rmcp::service::ServiceError::McpError(e) => e,
        other => {
            ErrorData::internal_error(format!("relaying {what} to the host failed: {other}"), None)
        }
    }
}

impl ClientHandler for Relay {
    fn get_info(&self) -> ClientConfig {
        let capabilities = self.host.offer();
        ClientConfig::new(
            capabilities,
            Implementation::new("planmux", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let (peer, caps) = self
            .host
            .capabilities()
            .await
            .ok_or_else(|| unsupported("sampling"))?;
        if caps.sampling.is_none() {
            return Err(unsupported("sampling"));
        }
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        match peer
            .send_request(request)
            .await
            .map_err(|e| relay_error("sampling", e))?
        {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            _ => Err(ErrorData::internal_error(
                "the host answered sampling with something else",
                None,
            )),
        }
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let (peer, caps) = self
            .host
            .capabilities()
            .await
            .ok_or_else(|| unsupported("roots"))?;
        if caps.roots.is_none() {
            return Err(unsupported("roots"));
        }
        let request = ServerRequest::ListRootsRequest(ListRootsRequest::default());
        match peer
            .send_request(request)
            .await
            .map_err(|e| relay_error("roots/list", e))?
        {
            ClientResult::ListRootsResult(result) => Ok(result),
            _ => Err(ErrorData::internal_error(
                "the host answered roots/list with something else",
                None,
            )),
        }
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let (peer, caps) = self
            .host
            .capabilities()
            .await
            .ok_or_else(|| unsupported("elicitation"))?;
        if caps.elicitation.is_none() {
            return Err(unsupported("elicitation"));
        }
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        match peer
            .send_request(request)
            .await
            .map_err(|e| relay_error("elicitation", e))?
        {
            ClientResult::ElicitResult(result) => Ok(result),
            _ => Err(ErrorData::internal_error(
                "the host answered elicitation with something else",
                None,
            )),
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        tracing::debug!(server = %self.server, level = ?params.level, "downstream log message");
        if !self.host.wants_log(params.level) {
            return;
        }
        if let Some(peer) = self.host.ready() {
            let mut params = params;
            let logger = params.logger.take();
            params.logger = Some(match logger {
                Some(name) => format!("{}/{name}", self.server),
                None => self.server.clone(),
            });
            let _ = peer.notify_logging_message(params).await;
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changes.mark(&self.server);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changes.mark(&self.server);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changes.mark(&self.server);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.host.notify_resource_updated(params).await;
    }
}
