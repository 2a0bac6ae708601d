//! The host side of planmux as the downstreams see it ([`HostLink`]): who is connected
//! upstream (no host, one host, or many HTTP sessions: [`HostMode`]), and so where a
//! server's log messages, list changes, resource updates and requests go; the host's
//! `subscriptions/listen` streams and the resource subscriptions held for it.

// Logging is deprecated by SEP-2577 but hosts and servers still use it.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use rmcp::model::{
    ClientCapabilities, ElicitationCapability, FormElicitationCapability, LoggingLevel,
    LoggingMessageNotificationParam, ResourceUpdatedNotificationParam, UrlElicitationCapability,
};
use rmcp::service::SubscriptionSink;
use rmcp::{Peer, RoleServer};
use tokio::sync::Notify;

use super::changes::Changed;
use super::sessions::{Caller, Calling, Calls, LogLevel, Session};

/// How long a downstream's request (roots, sampling, elicitation) waits for a host that
/// is still connecting.
const HOST_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The host side of planmux, as the downstreams see it: who is connected upstream, and
/// so where what a server asks or says goes.
#[derive(Default)]
pub struct HostLink {
    mode: HostMode,
    /// `subscriptions/listen` streams of hosts on protocol 2026-07-28, by request.
    listeners: Mutex<Vec<(u64, SubscriptionSink)>>,
    next_listener: AtomicU64,
    /// The log level the host set (`logging/setLevel`).
    log_level: LogLevel,
    /// How many sessions (or listen streams) are subscribed to each resource URI: the
    /// downstream subscription is made for the first and ended with the last. Held while
    /// the downstream is told, so the next holder waits for the outcome.
    interest: tokio::sync::Mutex<HashMap<String, usize>>,
    /// The downstream calls in flight and whom each is for: with many sessions, what a
    /// server asks or says goes to the session whose call it is; with any host, a
    /// legacy server's request during a 2026-07-28 host's own call goes to that call.
    calls: Arc<Calls>,
}

/// Who is connected upstream.
enum HostMode {
    /// No host will connect (`planmux run`, `check`): a server's request for the host
    /// fails at once instead of waiting for one.
    Absent(OneHost),
    /// One host (`serve` over stdio): its peer, once it connects.
    One(OneHost),
    /// Many sessions at once (`serve --http`): what a server asks or says goes to the
    /// session whose call is in flight on it (see [`HostLink::caller_of`]), never another.
    Sessions(Sessions),
}

impl Default for HostMode {
    fn default() -> Self {
        Self::Absent(OneHost::default())
    }
}

/// The one host's connection, as it comes.
#[derive(Default)]
struct OneHost {
    peer: RwLock<Option<Peer<RoleServer>>>,
    /// Woken when the host connects or finishes its handshake, for requests that came
    /// before.
    connected: Notify,
    /// Whether the host finished its handshake (`notifications/initialized`): nothing but
    /// the handshake's answer may reach it before.
    initialized: AtomicBool,
}

/// The sessions of `serve --http`.
#[derive(Default)]
struct Sessions {
    /// Every session and its peer, for what goes to all of them (lists changed) or to
    /// those that subscribed (resource updates); closed ones are dropped as they are met.
    everyone: RwLock<Vec<(Arc<Session>, Peer<RoleServer>)>>,
}

impl HostLink {
    fn with(mode: HostMode) -> Self {
        Self {
            mode,
            ..Self::default()
        }
    }

    /// The one host's connection, if planmux has (or expects) one host.
    fn one(&self) -> Option<&OneHost> {
        match &self.mode {
            HostMode::Absent(one) | HostMode::One(one) => Some(one),
            HostMode::Sessions(_) => None,
        }
    }

    /// The sessions, with many.
    fn sessions(&self) -> Option<&Sessions> {
        match &self.mode {
            HostMode::Sessions(sessions) => Some(sessions),
            HostMode::Absent(_) | HostMode::One(_) => None,
        }
    }

    /// Whether the one host finished its handshake.
    fn initialized(&self) -> bool {
        self.one()
            .is_some_and(|one| one.initialized.load(Ordering::Acquire))
    }

    /// The link of `serve`, where a host is expected to connect.
    pub fn expecting_host() -> Self {
        Self::with(HostMode::One(OneHost::default()))
    }

    /// The link of `serve --http`, shared by every session: what a server asks or says
    /// goes to the session whose call is in flight on it.
    pub fn for_sessions() -> Self {
        Self::with(HostMode::Sessions(Sessions::default()))
    }

    /// Whether many sessions share this link (`serve --http`), or one host has it.
    pub fn has_sessions(&self) -> bool {
        self.sessions().is_some()
    }

    /// Remembers the host's peer (called by the upstream server on each connection);
    /// with many sessions, none is remembered.
    pub fn set(&self, peer: Peer<RoleServer>) {
        if let Some(one) = self.one() {
            *one.peer.write().unwrap_or_else(PoisonError::into_inner) = Some(peer);
            one.connected.notify_waiters();
        }
    }

    /// A session finished its handshake (called once per session): with many sessions,
    /// it hears from now on what goes to all of them.
    pub fn joined(&self, session: Arc<Session>, peer: Peer<RoleServer>) {
        if let Some(sessions) = self.sessions() {
            let mut everyone = sessions
                .everyone
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            everyone.retain(|(_, p)| !p.is_transport_closed());
            everyone.push((session, peer));
        }
    }

    /// Whether many sessions share this link (`serve --http`).
    pub fn is_shared(&self) -> bool {
        self.has_sessions()
    }

    /// Notes a call to `server` in flight for `caller`, until the returned guard drops:
    /// with many sessions, every call; with one host, only a 2026-07-28 host's own call,
    /// which takes a legacy server's requests itself (one host needs no telling apart).
    pub(crate) fn calling(&self, server: &str, caller: Option<&Caller>) -> Option<Calling> {
        let caller = caller?;
        (self.has_sessions() || caller.asks.is_some()).then(|| self.calls.start(server, caller))
    }

    /// Whom what `server` asks or says now is for (see [`Calls::caller_of`]): with one
    /// host, only a 2026-07-28 host's own call is told apart.
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
        let one = self.one()?;
        one.peer
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The host's peer once its handshake has ended: before, nothing may be sent to it
    /// (rmcp would hold the message until the handshake's answer, and a wait would stall).
    fn ready(&self) -> Option<Peer<RoleServer>> {
        self.get().filter(|_| self.initialized())
    }

    /// The one host's peer, for a server's log message at `level`: once its handshake
    /// ended, and only at the level it set or more severe.
    pub(super) fn log_peer(&self, level: LoggingLevel) -> Option<Peer<RoleServer>> {
        self.ready().filter(|_| self.log_level.wants(level))
    }

    /// Whether the one host, its handshake ended, wants a log message at `level`; `None`
    /// when there is no such host to ask.
    pub fn wants_log(&self, level: LoggingLevel) -> Option<bool> {
        self.ready().map(|_| self.log_level.wants(level))
    }

    /// The host finished its handshake: notifications may go to it.
    pub fn set_initialized(&self) {
        if let Some(one) = self.one() {
            one.initialized.store(true, Ordering::Release);
            one.connected.notify_waiters();
        }
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
        let one = self.one()?;
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            // Registered before looking, so a change in between is not missed.
            let changed = one.connected.notified();
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
        let Some(peer) = self.get() else {
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
        let mut peers = self.ready_peer();
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

    /// The one host's peer, if it has finished its handshake with `initialize` (a
    /// 2026-07-28 host has no session to notify).
    fn ready_peer(&self) -> Vec<Peer<RoleServer>> {
        let ready = self.initialized();
        self.get()
            .filter(|p| ready && p.peer_info().is_some())
            .into_iter()
            .collect()
    }

    /// The peers of the open HTTP sessions for which `wanted` holds.
    fn sessions_where(&self, wanted: impl Fn(&Session) -> bool) -> Vec<Peer<RoleServer>> {
        let Some(sessions) = self.sessions() else {
            return Vec::new();
        };
        sessions
            .everyone
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
        let mut peers = self.ready_peer();
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
    pub(super) async fn capabilities(&self) -> Option<(Peer<RoleServer>, ClientCapabilities)> {
        let wait = match self.mode {
            HostMode::One(_) => HOST_WAIT,
            HostMode::Absent(_) | HostMode::Sessions(_) => std::time::Duration::ZERO,
        };
        let decided = || {
            let peer = self.get()?;
            // A 2026-07-28 host has no session to send requests on: no wait helps.
            let Some(info) = peer.peer_info() else {
                return Some(None);
            };
            let caps = info.capabilities.clone();
            // Nothing may reach a host before its handshake is done.
            self.initialized().then_some(Some((peer, caps)))
        };
        self.until(wait, decided).await.flatten()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

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
