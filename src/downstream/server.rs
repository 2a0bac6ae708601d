//! One downstream server: its lifecycle (start, death, restart with backoff, close) and
//! forwarding one call to it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::{CancelledNotificationParam, ClientCapabilities, ClientRequest};
use rmcp::model::{ServerResult, Tool};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod ends;
mod inputs;
mod meta;
pub(super) use inputs::MAX_ROUNDS;
mod sign_in;
mod tasks;
mod watches;

use super::DownstreamError;
use super::calls::{CallTable, Modern, SETTLE};
use super::changes::{Changed, Changes};
use super::era::{self, Era, EraCell};
use super::fields::ToolFields;
use super::host_link::HostLink;
pub use super::offer::Offer;
use super::offer::{Offered, list_offer};
use super::relay::{Caller, Relay};
use super::remembered::Remembered;
use super::tap::{Forwarding, ProgressRoutes};
use super::transport::{self, CLOSE_GRACE, TERM_GRACE};
use crate::config::ServerConfig;

/// First restart delay after a failed start; doubles per failure up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// A server that keeps failing is retried at most this often.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long a finished call waits for its progress notifications to reach the host.
const FLUSH_LIMIT: Duration = Duration::from_secs(1);

/// Where a downstream is in its life.
#[derive(Clone)]
pub enum State {
    /// Not connected yet.
    Starting,
    /// Connected; calls go to `Live`.
    Ready(Arc<Live>),
    /// Not connected: it failed to start or died. The next call after `retry_at`
    /// restarts it; calls before that fail at once with `error`.
    Failed {
        error: String,
        failures: u32,
        retry_at: Instant,
    },
    /// Not connected: it needs the user to sign in (OAuth). Calls fail at once saying
    /// so; a new sign-in (its store changes, `stamp`) lets the next call connect.
    SignedOut {
        signed_out: crate::oauth::SignedOut,
        stamp: Option<std::time::SystemTime>,
    },
    /// Shut down for good.
    Closed,
}

/// A live connection.
pub struct Live {
    pub(crate) peer: Peer<RoleClient>,
    /// Cancelled when the connection ends, for whatever reason.
    ended: CancellationToken,
    /// Cancel to ask the connection to close.
    stop: CancellationToken,
    /// Resolves when the connection is fully closed (its processes gone).
    closed: tokio::sync::watch::Receiver<bool>,
    /// Where this connection's progress notifications go, per call.
    routes: Arc<ProgressRoutes>,
    /// The calls forwarded as raw JSON (line connections only).
    pub(crate) table: Option<Arc<CallTable>>,
}

/// One configured downstream server.
pub struct Server {
    pub config: ServerConfig,
    state: Mutex<State>,
    /// Serialises (re)connects so concurrent callers start one process, not several.
    connecting: tokio::sync::Mutex<()>,
    /// What it offers (tools after include/exclude), kept across restarts; before it
    /// first lists, what it listed when it last started.
    offer: Offered,
    /// Its tools' definition fields rmcp's types leave out.
    pub(crate) fields: Arc<ToolFields>,
    /// The protocol era its last connection spoke.
    era: EraCell,
    /// A 2026-07-28 server's subscribed resources: each one's listen stream's stop.
    watches: Mutex<std::collections::HashMap<String, CancellationToken>>,
    /// How long the last successful start took.
    startup: Mutex<Option<Duration>>,
    host: Arc<HostLink>,
    changes: Arc<Changes>,
    tracker: TaskTracker,
    /// Whether its OAuth sign-in works, as its connection last found it.
    standing: Arc<crate::oauth::Standing>,
    /// Where its OAuth sign-in is kept (browser sign-in only), found at the first look.
    sign_in_store: std::sync::OnceLock<Option<crate::oauth::store::Store>>,
    /// Held while a host is offered its sign-in, so that calls waiting on it at once
    /// offer it once.
    sign_in_turn: tokio::sync::Mutex<()>,
}

impl Server {
    /// A server not started yet. What `memory` remembers of its last start is what it
    /// offers until it lists again.
    pub(crate) fn new(
        config: ServerConfig,
        memory: Option<Remembered>,
        host: Arc<HostLink>,
        changes: Arc<Changes>,
        tracker: TaskTracker,
    ) -> Self {
        let fields = Arc::new(ToolFields::default());
        let offer = Offered::new(memory, |tool| config.keeps(tool), &fields);
        Self {
            config,
            state: Mutex::new(State::Starting),
            connecting: tokio::sync::Mutex::new(()),
            offer,
            fields,
            startup: Mutex::new(None),
            era: EraCell::default(),
            watches: Mutex::default(),
            host,
            changes,
            tracker,
            standing: Arc::default(),
            sign_in_store: std::sync::OnceLock::new(),
            sign_in_turn: tokio::sync::Mutex::new(()),
        }
    }

    /// Whether it is reached over a line connection (a stdio child or a built-in server),
    /// whose calls go through a [`CallTable`].
    pub(crate) fn is_line(&self) -> bool {
        !matches!(self.config.transport, crate::config::Transport::Http { .. })
    }

    /// The protocol era its last connection spoke.
    pub(crate) fn era(&self) -> Era {
        self.era.get()
    }

    /// The link to the host its messages are relayed to.
    pub(super) fn host(&self) -> &HostLink {
        &self.host
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Moves to `next`, unless the server was closed for good meanwhile (planmux shut
    /// down while it was starting); returns whether it moved.
    fn transition(&self, next: State) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*state, State::Closed) {
            return false;
        }
        *state = next;
        true
    }

    /// Its tools (after filters), as last listed.
    pub fn tools(&self) -> Vec<Tool> {
        self.offer.get().tools
    }

    /// How long its lists may be cached, as it last said (2026-07-28 `ttlMs`).
    pub(super) fn offered_ttl_ms(&self) -> Option<u64> {
        self.offer.ttl_ms()
    }

    /// Everything it offers, as last listed.
    pub fn offer(&self) -> Offer {
        self.offer.get()
    }

    /// Its `instructions`, as it gave them.
    pub fn instructions(&self) -> Option<String> {
        self.offer.get().instructions
    }

    /// Keeps what the server listed, its tools filtered by include/exclude, and
    /// remembers it for the next start.
    async fn keep(&self, mut offer: Offer) {
        offer.tools.retain(|t| self.config.keeps(&t.name));
        self.offer
            .keep(&self.config.name, offer, &self.fields)
            .await;
    }

    /// Whether what it offers is still what was remembered of its last start: it has not
    /// listed since planmux started.
    pub fn is_recalled(&self) -> bool {
        self.offer.is_recalled()
    }

    /// How long the last successful start took.
    pub fn startup_time(&self) -> Option<Duration> {
        *self.startup.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A live connection: the current one, or a new one when the server is not running and
    /// its backoff has passed.
    pub(crate) async fn live(self: &Arc<Self>) -> Result<Arc<Live>, DownstreamError> {
        if let Some(live) = self.usable()? {
            return Ok(live);
        }
        let _guard = self.connecting.lock().await;
        if let Some(live) = self.usable()? {
            return Ok(live);
        }
        self.connect().await
    }

    /// `Some` when connected, `None` when a connect should be tried, an error when the
    /// server is closed or backing off.
    fn usable(&self) -> Result<Option<Arc<Live>>, DownstreamError> {
        match self.state() {
            State::Ready(live) if !live.ended.is_cancelled() => Ok(Some(live)),
            State::Closed => Err(DownstreamError::Closed {
                server: self.config.name.clone(),
            }),
            State::Failed {
                error, retry_at, ..
            } if Instant::now() < retry_at => Err(DownstreamError::Down {
                server: self.config.name.clone(),
                reason: error,
                retry_in: retry_at.saturating_duration_since(Instant::now()),
            }),
            State::SignedOut { signed_out, stamp } if stamp == self.sign_in_stamp() => {
                Err(DownstreamError::NeedsSignIn {
                    server: self.config.name.clone(),
                    signed_out,
                })
            }
            _ => Ok(None),
        }
    }

    /// Starts the server, lists its tools, and records the outcome in the state.
    async fn connect(self: &Arc<Self>) -> Result<Arc<Live>, DownstreamError> {
        let name = &self.config.name;
        let previous = self.state();
        let started = Instant::now();
        let attempt = tokio::time::timeout(self.config.startup_timeout, self.open()).await;
        let outcome = match attempt {
            Ok(Ok(live)) => Ok(live),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(format!(
                "did not start within {} ms",
                self.config.startup_timeout.as_millis()
            )),
        };
        match outcome {
            Ok((live, offer)) => {
                let elapsed = started.elapsed();
                tracing::info!(server = %name, tools = offer.tools.len(), prompts = offer.prompts.len(), resources = offer.resources.len(), ms = elapsed.as_millis() as u64, "connected");
                if !self.transition(State::Ready(live.clone())) {
                    // Shut down while it was starting: close the new connection at once
                    // rather than leave it running.
                    live.stop.cancel();
                    return Err(DownstreamError::Closed {
                        server: name.clone(),
                    });
                }
                *self.startup.lock().unwrap_or_else(PoisonError::into_inner) = Some(elapsed);
                self.keep(offer).await;
                if !matches!(previous, State::Starting) {
                    // Reconnected: the host lists its tools again, as DESIGN §3 says,
                    // whether or not they differ.
                    self.changes.mark(name, Changed::TOOLS);
                }
                Ok(live)
            }
            Err(_) if let Some(signed_out) = self.standing.signed_out() => {
                // No retries until the user signs in: the same request would be refused
                // the same way. Its tools stay listed.
                tracing::warn!(server = %name, reason = %signed_out.why, "needs a sign-in: planmux login {name}");
                self.transition(State::SignedOut {
                    signed_out: signed_out.clone(),
                    stamp: self.sign_in_stamp(),
                });
                Err(DownstreamError::NeedsSignIn {
                    server: name.clone(),
                    signed_out,
                })
            }
            Err(error) => {
                let error = crate::text::redact_urls(&error);
                let failures = match previous {
                    State::Failed { failures, .. } => failures + 1,
                    _ => 1,
                };
                let backoff = FIRST_BACKOFF
                    .saturating_mul(1 << (failures - 1).min(16))
                    .min(MAX_BACKOFF);
                tracing::warn!(server = %name, error = %error, retry_in_ms = backoff.as_millis() as u64, "failed to start");
                self.offer.forget_recalled();
                self.transition(State::Failed {
                    error: error.clone(),
                    failures,
                    retry_at: Instant::now() + backoff,
                });
                Err(DownstreamError::StartFailed {
                    server: name.clone(),
                    reason: error,
                })
            }
        }
    }

    /// Opens a connection, lists what it offers, and starts the task that watches it.
    async fn open(self: &Arc<Self>) -> Result<(Arc<Live>, Offer), String> {
        let relay = Relay {
            server: self.config.name.clone(),
            host: self.host.clone(),
            changes: self.changes.clone(),
        };
        let routes = Arc::new(ProgressRoutes::default());
        let tried = self.era.get();
        let connected = transport::connect(
            &self.config,
            relay,
            routes.clone(),
            self.fields.clone(),
            &self.standing,
            &self.tracker,
            &self.era,
        )
        .await
        .inspect_err(|_| self.era.failed(tried))?;
        let peer = connected.service.peer().clone();
        let era = Era::of(&peer);
        self.era.set(era);
        let table = connected.table.clone();
        if let (Era::Modern, Some(table)) = (era, &table) {
            let info = rmcp::ClientHandler::get_info(connected.service.service());
            table.speak_modern(Modern::new(era::request_meta(&info), self.answerer()));
        }
        let offer = match list_offer(&peer, &self.config.name).await {
            Ok(offer) => offer,
            Err(e) => {
                let stop = CancellationToken::new();
                stop.cancel();
                transport::watch(connected, stop).await;
                return Err(e);
            }
        };
        let ended = CancellationToken::new();
        let stop = CancellationToken::new();
        let (closed_tx, closed) = tokio::sync::watch::channel(false);
        let live = Arc::new(Live {
            peer,
            ended: ended.clone(),
            stop: stop.clone(),
            closed,
            routes,
            table,
        });
        if era == Era::Modern {
            self.tracker.spawn(super::era::listen(
                live.peer.clone(),
                self.config.name.clone(),
                self.changes.clone(),
                self.host.clone(),
                ended.clone(),
            ));
        }
        let (server, watched) = (Arc::downgrade(self), Arc::downgrade(&live));
        let table = live.table.clone();
        self.tracker.spawn(async move {
            let died = transport::watch(connected, stop).await;
            let server = server.upgrade();
            if let (Some(reason), Some(server), Some(live)) =
                (died, server.as_ref(), watched.upgrade())
            {
                server.mark_dead(&live, reason);
            }
            ended.cancel();
            // The calls in its table end as a call waiting here would.
            if let (Some(table), Some(server)) = (table, server) {
                table
                    .end(|| server.exit_error(&ServiceError::TransportClosed))
                    .await;
            }
            let _ = closed_tx.send(true);
        });
        Ok((live, offer))
    }

    /// Lists everything again on the live connection (after a `list_changed` or a
    /// restart), within the server's call timeout.
    /// Whether it was shut down for good.
    pub(crate) fn is_closed(&self) -> bool {
        matches!(
            *self.state.lock().unwrap_or_else(PoisonError::into_inner),
            State::Closed
        )
    }

    pub(crate) async fn relist(self: &Arc<Self>) -> Result<(), String> {
        let limit = self.config.call_timeout;
        let listing = async {
            let live = self.live().await.map_err(|e| e.to_string())?;
            list_offer(&live.peer, &self.config.name).await
        };
        let offer = tokio::time::timeout(limit, listing)
            .await
            .map_err(|_| format!("listing took longer than {} ms", limit.as_millis()))??;
        self.keep(offer).await;
        Ok(())
    }

    /// Forwards any other request (prompts, resources, completions) and returns the
    /// server's answer. `label` names it in errors (`prompts/get 'greet'`).
    pub(crate) async fn request(
        self: &Arc<Self>,
        request: ClientRequest,
        label: &str,
        cancel: &CancellationToken,
    ) -> Result<ServerResult, DownstreamError> {
        self.exchange(request, label, None, None, cancel).await
    }

    /// Sends one request within the call timeout, following cancellation (the server is
    /// told), with progress routed to `caller` if it asked for it, declaring `declared` (else
    /// what the connection declared); its answer, or why there is none. While it is in
    /// flight, what the server asks or says is for `caller`.
    async fn exchange(
        self: &Arc<Self>,
        request: ClientRequest,
        label: &str,
        caller: Option<&Caller>,
        declared: Option<&ClientCapabilities>,
        cancel: &CancellationToken,
    ) -> Result<ServerResult, DownstreamError> {
        let mut calling = self.host.calling(&self.config.name, caller);
        let server = &self.config.name;
        let tool = label.to_owned();
        let cancelled = || DownstreamError::Cancelled {
            server: server.clone(),
            tool: tool.clone(),
        };
        // A server that is (re)starting may take its whole start-up timeout: a cancelled
        // call does not wait for it.
        let mut live = tokio::select! {
            live = self.live() => live?,
            () = cancel.cancelled() => return Err(cancelled()),
        };
        // The call's time limit covers sending too: a server that stops reading its input
        // must not hold the call.
        let timeout = self.config.call_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let timed_out = || DownstreamError::Timeout {
            server: server.clone(),
            tool: tool.clone(),
            after: timeout,
        };
        let meta = meta::request_meta(declared);
        let send = |live: Arc<Live>, request: ClientRequest| {
            let mut options = PeerRequestOptions::no_options();
            options.meta = meta.clone();
            async move { live.peer.send_cancellable_request(request, options).await }
        };
        let first = tokio::select! {
            sent = send(live.clone(), request.clone()) => sent,
            () = cancel.cancelled() => return Err(cancelled()),
            () = tokio::time::sleep_until(deadline) => return Err(timed_out()),
        };
        let handle = match first {
            Ok(handle) => handle,
            Err(_) => {
                // The connection broke before the request left, so it is safe to send it
                // again: wait until the watcher has recorded the death, then restart.
                self.settle(&live).await;
                live = tokio::select! {
                    live = self.live() => live?,
                    () = cancel.cancelled() => return Err(cancelled()),
                };
                let again = tokio::select! {
                    sent = send(live.clone(), request) => sent,
                    () = cancel.cancelled() => return Err(cancelled()),
                    () = tokio::time::sleep_until(deadline) => return Err(timed_out()),
                };
                match again {
                    Ok(handle) => handle,
                    Err(e) => return Err(self.exited(&live, e).await),
                }
            }
        };
        // Progress goes to the host through a queue of this call's own, in wire order.
        let mut forwarding = caller
            .and_then(|c| Some((c.peer.clone(), c.progress.clone()?)))
            .map(|(peer, token)| {
                Forwarding::new(
                    live.routes.route(handle.progress_token.clone()),
                    peer,
                    token,
                )
            });
        let id = handle.id.clone();
        let notify_cancel = |reason: &str| {
            let peer = live.peer.clone();
            let param = CancelledNotificationParam::new(Some(id.clone()), Some(reason.to_string()));
            async move {
                // Bounded like everything else: the server may have stopped reading.
                let _ = tokio::time::timeout(SETTLE, peer.notify_cancelled(param)).await;
            }
        };
        let answer = handle.await_response();
        tokio::pin!(answer);
        let result = loop {
            break tokio::select! {
                response = &mut answer => match response {
                    Ok(result) => {
                        if let Some(calling) = calling.as_mut() {
                            calling.answered();
                        }
                        Ok(result)
                    }
                    Err(ServiceError::McpError(error)) => {
                        if let Some(calling) = calling.as_mut() {
                            calling.answered();
                        }
                        Err(DownstreamError::Rpc { server: server.clone(), error: Box::new(error) })
                    }
                    Err(e) => Err(self.exited(&live, e).await),
                },
                () = cancel.cancelled() => {
                    notify_cancel("cancelled by the client").await;
                    Err(cancelled())
                }
                () = tokio::time::sleep_until(deadline) => {
                    notify_cancel("timed out in planmux").await;
                    Err(timed_out())
                }
                () = live.ended.cancelled() => Err(self.exited(&live, ServiceError::TransportClosed).await),
                () = progress_started(&mut forwarding) => continue,
            };
        };
        // Every progress notification the server sent before its answer is queued by now:
        // forward them all before the answer goes to the host.
        if let Some(forwarding) = forwarding {
            forwarding.finish(FLUSH_LIMIT).await;
        }
        result
    }

    /// Tells the server, if it is running, that the host's roots changed (bounded: a server
    /// that stopped reading must not hold anyone up).
    pub(crate) async fn notify_roots_changed(&self) {
        if let State::Ready(live) = self.state() {
            let _ = tokio::time::timeout(SETTLE, live.peer.notify_roots_list_changed()).await;
        }
    }

    /// Closes the connection (if any) for good and waits until its processes are gone.
    pub(crate) async fn close(&self) {
        let previous = std::mem::replace(
            &mut *self.state.lock().unwrap_or_else(PoisonError::into_inner),
            State::Closed,
        );
        if let State::Ready(live) = previous {
            live.stop.cancel();
            let mut closed = live.closed.clone();
            let limit = CLOSE_GRACE + TERM_GRACE + Duration::from_secs(1);
            let _ = tokio::time::timeout(limit, closed.wait_for(|done| *done)).await;
        }
    }
}

/// Resolves when a call's first progress notification arrives (see [`Forwarding`]); never
/// for a call without a progress token.
async fn progress_started(forwarding: &mut Option<Forwarding>) {
    match forwarding {
        Some(forwarding) => forwarding.started().await,
        None => std::future::pending().await,
    }
}
