//! The client side of each downstream connection: relays what a downstream server sends
//! (log messages, list changes, and its requests for sampling, elicitation and roots) to
//! the host that is connected upstream. Progress goes through [`super::tap`].

// Sampling, roots and logging are deprecated by SEP-2577 but hosts and servers still use them.
#![allow(deprecated)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

pub use super::sessions::{Caller, LogLevel, Session};
use super::sessions::{Calling, Calls};
use super::tap::{LogFor, LogRouter};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use rmcp::model::{
    CancelledNotificationParam, ClientCapabilities, ClientConfig, ClientResult,
    CreateMessageRequest, CreateMessageRequestParams, CreateMessageResult, ElicitRequest,
    ElicitRequestParams, ElicitResult, ElicitationCapability, ErrorCode, FormElicitationCapability,
    GetExtensions, Implementation, ListRootsRequest, ListRootsResult, LoggingLevel,
    LoggingMessageNotificationParam, ProtocolVersion, RequestId, ResourceUpdatedNotificationParam,
    ServerRequest, UrlElicitationCapability,
};
use rmcp::service::{
    NotificationContext, OriginatingRequestId, PeerRequestOptions, RequestContext, SubscriptionSink,
};
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
    /// The log level the host set (`logging/setLevel`).
    log_level: LogLevel,
    /// Many hosts at once (`serve --http`): what a server asks or says goes to the
    /// session whose call is in flight on it (see [`Self::caller_of`]), never another.
    sessions: bool,
    /// With many sessions: every session and its peer, for what goes to all of them
    /// (lists changed) or to those that subscribed (resource updates); closed ones are
    /// dropped as they are met.
    everyone: RwLock<Vec<(Arc<Session>, Peer<RoleServer>)>>,
    /// With many sessions: the downstream calls in flight and whom each is for.
    calls: Calls,
    /// How many sessions (or listen streams) are subscribed to each resource URI: the
    /// downstream subscription is made for the first and ended with the last. Held while
    /// the downstream is told, so the next holder waits for the outcome.
    interest: tokio::sync::Mutex<HashMap<String, usize>>,
}

impl HostLink {
    /// The link of `serve`, where a host is expected to connect.
    pub fn expecting_host() -> Self {
        Self {
            expecting: true,
            ..Self::default()
        }
    }

    /// The link of `serve --http`, shared by every session: what a server asks or says
    /// goes to the session whose call is in flight on it (see the `sessions` field).
    pub fn for_sessions() -> Self {
        Self {
            sessions: true,
            ..Self::default()
        }
    }

    /// Whether many sessions share this link (`serve --http`), or one host has it.
    pub fn has_sessions(&self) -> bool {
        self.sessions
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
    pub fn joined(&self, session: Arc<Session>, peer: Peer<RoleServer>) {
        if self.sessions {
            let mut everyone = self
                .everyone
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            everyone.retain(|(_, p)| !p.is_transport_closed());
            everyone.push((session, peer));
        }
    }

    /// Whether many sessions share this link (`serve --http`).
    pub fn is_shared(&self) -> bool {
        self.sessions
    }

    /// Notes a call to `server` in flight for `caller`, until the returned guard drops.
    /// Only with many sessions: one host needs no telling apart.
    pub(crate) fn calling(&self, server: &str, caller: Option<&Caller>) -> Option<Calling<'_>> {
        let caller = caller.filter(|_| self.sessions)?;
        Some(self.calls.start(server, caller))
    }

    /// With many sessions, whom what `server` asks or says now is for (see
    /// [`Calls::caller_of`]).
    pub(crate) fn caller_of(&self, server: &str) -> Result<Caller, String> {
        self.calls.caller_of(server)
    }

    /// Counts one more holder of `uri` (a session's subscription or a listen stream's),
    /// running `subscribe` (the downstream subscription) when it is the first. Holders
    /// take turns: one that comes while the first is being subscribed waits for the
    /// outcome, and a failed subscription counts nobody (the next holder tries again).
    pub async fn hold<E>(
        &self,
        uri: &str,
        subscribe: impl Future<Output = Result<(), E>>,
    ) -> Result<(), E> {
        let mut counts = self.interest.lock().await;
        let count = counts.get(uri).copied().unwrap_or_default();
        if count == 0 {
            subscribe.await?;
        }
        counts.insert(uri.to_owned(), count + 1);
        Ok(())
    }

    /// Counts one holder of `uri` fewer, running `unsubscribe` when it was the last.
    pub async fn release<E>(
        &self,
        uri: &str,
        unsubscribe: impl Future<Output = Result<(), E>>,
    ) -> Result<(), E> {
        let mut counts = self.interest.lock().await;
        match counts.get_mut(uri) {
            Some(count) if *count > 1 => {
                *count -= 1;
                Ok(())
            }
            Some(_) => {
                counts.remove(uri);
                unsubscribe.await
            }
            None => Ok(()),
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
        // With many sessions, the usual set, elicitation in both of its modes: each
        // request goes to the calling session, and fails clearly if it does not support
        // it.
        let Some(peer) = self.get().filter(|_| !self.sessions) else {
            let mut offer = ClientCapabilities::builder()
                .enable_roots()
                .enable_sampling()
                .build();
            offer.elicitation = Some(
                ElicitationCapability::new()
                    .with_form(FormElicitationCapability::default())
                    .with_url(UrlElicitationCapability::default()),
            );
            return offer;
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

    /// Relays only downstream log messages at `level` or more severe (one host; over
    /// HTTP each session's own level applies).
    pub fn set_log_level(&self, level: LoggingLevel) {
        self.log_level.set(level);
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
        peers.extend(self.sessions_where(|_| true));
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

    /// The peers of the open HTTP sessions for which `wanted` holds.
    fn sessions_where(&self, wanted: impl Fn(&Session) -> bool) -> Vec<Peer<RoleServer>> {
        self.everyone
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(session, peer)| {
                !peer.is_transport_closed() && peer.peer_info().is_some() && wanted(session)
            })
            .map(|(_, peer)| peer.clone())
            .collect()
    }

    /// Tells the host a resource it subscribed to was updated (URI as the server gave
    /// it); over HTTP, each session that subscribed to it.
    pub async fn notify_resource_updated(&self, params: ResourceUpdatedNotificationParam) {
        let ready = self.initialized.load(Ordering::Acquire);
        let mut peers: Vec<Peer<RoleServer>> = self
            .get()
            .filter(|p| ready && p.peer_info().is_some())
            .into_iter()
            .collect();
        peers.extend(self.sessions_where(|s| s.subscribed_to(&params.uri)));
        for peer in peers {
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
        if !self.log_level.wants(LoggingLevel::Warning) {
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

    /// What either says changed.
    pub fn or(self, other: Changed) -> Changed {
        Changed {
            tools: self.tools || other.tools,
            prompts: self.prompts || other.prompts,
            resources: self.resources || other.resources,
        }
    }

    /// The tool list.
    pub const TOOLS: Changed = Changed {
        tools: true,
        prompts: false,
        resources: false,
    };
}

/// Servers whose lists must be read again (they said a list changed, or reconnected),
/// with the lists they said changed. Each is refreshed once however often it changed
/// meanwhile, so a server that floods `list_changed` costs one refresh at a time, and
/// one slow server does not hold up the others' refreshes.
#[derive(Default)]
pub(crate) struct Changes {
    dirty: Mutex<BTreeMap<String, Changed>>,
    wake: Notify,
}

impl Changes {
    /// Marks `server` as changed: it said the lists in `said` changed.
    pub(crate) fn mark(&self, server: &str, said: Changed) {
        let mut dirty = self.dirty.lock().unwrap_or_else(PoisonError::into_inner);
        let marked = dirty.entry(server.to_owned()).or_default();
        *marked = marked.or(said);
        drop(dirty);
        self.wake.notify_one();
    }

    /// Waits until something is marked (at once if something was marked meanwhile).
    pub(crate) async fn changed(&self) {
        self.wake.notified().await;
    }

    /// Takes the marked servers, with what each said, except those in `busy` (they stay
    /// marked).
    pub(crate) fn take(&self, busy: &HashSet<String>) -> Vec<(String, Changed)> {
        let mut dirty = self.dirty.lock().unwrap_or_else(PoisonError::into_inner);
        let ready: Vec<String> = dirty
            .keys()
            .filter(|s| !busy.contains(*s))
            .cloned()
            .collect();
        ready
            .into_iter()
            .filter_map(|server| dirty.remove_entry(&server))
            .collect()
    }
}

/// The `ClientHandler` of one downstream connection.
pub(crate) struct Relay {
    pub(crate) server: String,
    pub(crate) host: Arc<HostLink>,
    pub(crate) changes: Arc<Changes>,
}

impl Relay {
    /// With many sessions, what decides whom this server's log messages are for, as they
    /// are read.
    pub(crate) fn log_router(&self) -> Option<LogRouter> {
        let (host, server) = (self.host.clone(), self.server.clone());
        let router: LogRouter = Arc::new(move || host.caller_of(&server));
        self.host.sessions.then_some(router)
    }
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

impl Relay {
    /// Where this server's request goes: the host (one host), or the session whose call
    /// is in flight on it (many), with its capabilities and, for the latter, the
    /// session's request the server's request belongs to.
    async fn target(
        &self,
        what: &str,
    ) -> Result<(Peer<RoleServer>, ClientCapabilities, Option<RequestId>), ErrorData> {
        if !self.host.sessions {
            let (peer, caps) = self
                .host
                .capabilities()
                .await
                .ok_or_else(|| unsupported(what))?;
            return Ok((peer, caps, None));
        }
        let caller = self.host.caller_of(&self.server).map_err(|why| {
            ErrorData::internal_error(format!("planmux did not relay {what}: {why}"), None)
        })?;
        // A 2026-07-28 session takes no requests from a server.
        let caps = caller
            .peer
            .peer_info()
            .map(|info| info.capabilities.clone())
            .ok_or_else(|| unsupported(what))?;
        Ok((caller.peer, caps, Some(caller.request)))
    }

    /// Relays `request` to the host [`Self::target`] chose, if it `supported` it, and
    /// waits for the answer; a server that gives up on its request has the host's copy
    /// cancelled too (its dialog closes).
    async fn ask(
        &self,
        what: &str,
        mut request: ServerRequest,
        supported: impl Fn(&ClientCapabilities) -> bool,
        context: &RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        let (peer, caps, origin) = self.target(what).await?;
        if !supported(&caps) {
            return Err(unsupported(what));
        }
        if let Some(origin) = origin {
            // Over HTTP, on the stream of the session's call, as a direct server's would.
            request
                .extensions_mut()
                .insert(OriginatingRequestId(origin));
        }
        // Sent from a task of its own: this handler runs in rmcp's scope for the server's
        // request, and rmcp would mark the host's copy with that request's id (the
        // server's own numbering), in place of the host's call above, so it went on the
        // session's standalone stream instead of the call's.
        let sender = peer.clone();
        let handle = tokio::spawn(async move {
            sender
                .send_cancellable_request(request, PeerRequestOptions::no_options())
                .await
        })
        .await
        .map_err(|e| ErrorData::internal_error(format!("{what} relay failed: {e}"), None))?
        .map_err(|e| relay_error(what, e))?;
        let id = handle.id.clone();
        tokio::select! {
            answer = handle.await_response() => answer.map_err(|e| relay_error(what, e)),
            () = context.ct.cancelled() => {
                let why = format!("the server cancelled its {what} request");
                let param = CancelledNotificationParam::new(Some(id), Some(why.clone()));
                let limit = std::time::Duration::from_secs(1);
                let _ = tokio::time::timeout(limit, peer.notify_cancelled(param)).await;
                Err(ErrorData::internal_error(why, None))
            }
        }
    }
}

impl ClientHandler for Relay {
    fn get_info(&self) -> ClientConfig {
        let capabilities = self.host.offer();
        let mut config = ClientConfig::new(
            capabilities,
            Implementation::new("planmux", env!("CARGO_PKG_VERSION")),
        );
        // planmux connects with `initialize`, which 2026-07-28 (rmcp's LATEST) does not
        // have: name the newest version that does (servers answer with theirs).
        config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        config
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        let supported = |caps: &ClientCapabilities| caps.sampling.is_some();
        match self.ask("sampling", request, supported, &context).await? {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            _ => Err(ErrorData::internal_error(
                "the host answered sampling with something else",
                None,
            )),
        }
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let request = ServerRequest::ListRootsRequest(ListRootsRequest::default());
        let supported = |caps: &ClientCapabilities| caps.roots.is_some();
        match self.ask("roots", request, supported, &context).await? {
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
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let url = matches!(params, ElicitRequestParams::UrlElicitationParams { .. });
        let supported = move |caps: &ClientCapabilities| takes_elicitation(caps, url);
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        match self
            .ask("elicitation", request, supported, &context)
            .await?
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
        mut params: LoggingMessageNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        tracing::debug!(server = %self.server, level = ?params.level, "downstream log message");
        let peer = if self.host.sessions {
            // Over HTTP, only to the session whose call was in flight when the message
            // was read (`tap::LogFor`), at its own level.
            let caller = match context.extensions.get::<LogFor>() {
                Some(LogFor(caller)) => caller.clone(),
                None => self.host.caller_of(&self.server),
            };
            match caller {
                Ok(caller) if caller.session.log_level.wants(params.level) => caller.peer,
                Ok(_) => return,
                Err(why) => {
                    tracing::debug!(server = %self.server, %why, "log message not relayed");
                    return;
                }
            }
        } else {
            match self.host.ready() {
                Some(peer) if self.host.log_level.wants(params.level) => peer,
                _ => return,
            }
        };
        let logger = params.logger.take();
        params.logger = Some(match logger {
            Some(name) => format!("{}/{name}", self.server),
            None => self.server.clone(),
        });
        let _ = peer.notify_logging_message(params).await;
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changes.mark(&self.server, Changed::TOOLS);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let said = Changed {
            prompts: true,
            ..Changed::default()
        };
        self.changes.mark(&self.server, said);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let said = Changed {
            resources: true,
            ..Changed::default()
        };
        self.changes.mark(&self.server, said);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.host.notify_resource_updated(params).await;
    }
}

/// Whether a host takes an elicitation in URL mode (`url`) or form mode: a mode it did not
/// declare is refused, not relayed; declaring no mode means form (hosts older than modes).
fn takes_elicitation(caps: &ClientCapabilities, url: bool) -> bool {
    caps.elicitation.as_ref().is_some_and(|modes| {
        let form_only = modes.form.is_none() && modes.url.is_none();
        if url {
            modes.url.is_some()
        } else {
            modes.form.is_some() || form_only
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// Over HTTP (many sessions) servers are offered elicitation in both modes; each
    /// request then reaches a session only in a mode that session declared.
    #[test]
    fn elicitation_is_offered_in_both_modes_and_relayed_in_the_hosts() {
        let offer = HostLink::for_sessions().offer();
        assert!(takes_elicitation(&offer, true) && takes_elicitation(&offer, false));
        let form = ClientCapabilities::builder().enable_elicitation().build();
        let with = |modes: ElicitationCapability| {
            let mut caps = ClientCapabilities::default();
            caps.elicitation = Some(modes);
            caps
        };
        let legacy = with(ElicitationCapability::new());
        let url_only =
            with(ElicitationCapability::new().with_url(UrlElicitationCapability::default()));
        assert!(takes_elicitation(&legacy, false) && !takes_elicitation(&legacy, true));
        assert!(takes_elicitation(&url_only, true) && !takes_elicitation(&url_only, false));
        assert!(!takes_elicitation(&ClientCapabilities::default(), false));
        assert!(takes_elicitation(&form, false));
    }

    #[test]
    fn a_servers_changes_add_up_until_it_is_refreshed() {
        let changes = Changes::default();
        let prompts = Changed {
            prompts: true,
            ..Changed::default()
        };
        changes.mark("a", Changed::TOOLS);
        changes.mark("a", prompts);
        changes.mark("b", prompts);
        let busy = HashSet::from(["b".to_owned()]);
        assert_eq!(
            changes.take(&busy),
            vec![("a".to_owned(), Changed::TOOLS.or(prompts))]
        );
        assert_eq!(
            changes.take(&HashSet::new()),
            vec![("b".to_owned(), prompts)]
        );
        assert!(changes.take(&HashSet::new()).is_empty());
    }

    #[tokio::test]
    async fn subscribers_take_turns_and_a_failed_first_one_counts_nobody() {
        let link = HostLink::default();
        let (subscribed, unsubscribed) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let subscribe = |fails: bool| {
            let subscribed = &subscribed;
            async move {
                subscribed.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
                if fails { Err("refused") } else { Ok(()) }
            }
        };
        let unsubscribe = || async {
            unsubscribed.fetch_add(1, Ordering::SeqCst);
            Ok::<(), &str>(())
        };
        // Two at once, and the first one's subscription fails: the second subscribes anew.
        let (first, second) = tokio::join!(
            link.hold("test://r", subscribe(true)),
            link.hold("test://r", subscribe(false))
        );
        assert_eq!((first, second), (Err("refused"), Ok(())));
        assert_eq!(subscribed.load(Ordering::SeqCst), 2);
        // A third holder is counted without the server hearing of it; it hears of the last
        // release only.
        assert_eq!(link.hold("test://r", subscribe(false)).await, Ok(()));
        assert_eq!(subscribed.load(Ordering::SeqCst), 2);
        assert_eq!(link.release("test://r", unsubscribe()).await, Ok(()));
        assert_eq!(unsubscribed.load(Ordering::SeqCst), 0);
        assert_eq!(link.release("test://r", unsubscribe()).await, Ok(()));
        assert_eq!(unsubscribed.load(Ordering::SeqCst), 1);
        // Nothing held: a release is no news for the server.
        assert_eq!(link.release("test://r", unsubscribe()).await, Ok(()));
        assert_eq!(unsubscribed.load(Ordering::SeqCst), 1);
    }
}
