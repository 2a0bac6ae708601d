//! Who a downstream call is for: each host session (its log level, its subscriptions,
//! whether it introduced itself), the caller of a call (session, request, progress
//! token, where a legacy server's questions for a 2026-07-28 host's call go), and the
//! calls in flight per server, from which what a server asks or says is given to the one
//! session (or 2026-07-28 call) it can be for.

// Logging is deprecated by SEP-2577, but hosts still set levels and show messages.
#![allow(deprecated)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientCapabilities, InputRequest, LoggingLevel, ProgressToken, ProtocolVersion, RequestId,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::identity::{Identity, Owner};

/// A downstream call in flight for a session.
struct InFlight {
    key: u64,
    server: String,
    caller: Caller,
    /// When the call was given up without an answer (cancelled, timed out): the server
    /// may still be working on it, so it still counts for [`ABANDONED`].
    abandoned: Option<Instant>,
}

/// How long a call given up without an answer still counts as the server's business:
/// what the server asks meanwhile may be for it, and must not go to another session.
const ABANDONED: Duration = Duration::from_secs(5);

/// The least severe log level a host wants (`logging/setLevel`); unset: all.
#[derive(Default)]
pub struct LogLevel(RwLock<Option<LoggingLevel>>);

impl LogLevel {
    /// The host asked for messages at `level` or more severe.
    pub fn set(&self, level: LoggingLevel) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Some(level);
    }

    /// Whether the host wants messages at `level`.
    pub(crate) fn wants(&self, level: LoggingLevel) -> bool {
        let min = *self.0.read().unwrap_or_else(PoisonError::into_inner);
        // LoggingLevel lists its variants from least to most severe.
        min.is_none_or(|min| level as u8 >= min as u8)
    }
}

/// One host session, and what it asked for itself: its log level and the resources it
/// subscribed to. With one host (stdio) there is one; over HTTP, one per session.
#[derive(Default)]
pub struct Session {
    id: u64,
    pub log_level: LogLevel,
    subscribed: Mutex<HashSet<String>>,
    /// Whether the session lives past one request: the host introduced itself with
    /// `initialize`, or it is the one host of a stdio connection (rmcp gives stateless
    /// requests a made-up peer info of their own).
    introduced: AtomicBool,
}

impl Session {
    /// A session with an id no other session of this process has.
    pub fn new() -> Arc<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Arc::new(Self {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            ..Self::default()
        })
    }

    /// Its id, unique in this process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The session lives past one request: the host sent `initialize` on it, or it is a
    /// stdio connection's.
    pub fn introduced(&self) {
        self.introduced.store(true, Ordering::Release);
    }

    /// Records a subscription to `uri`: whether it is new for this session.
    pub fn subscribe(&self, uri: &str) -> bool {
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uri.to_owned())
    }

    /// Ends a subscription to `uri`: whether this session had it.
    pub fn unsubscribe(&self, uri: &str) -> bool {
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uri)
    }

    /// Ends every subscription of this session: the URIs it had.
    pub fn unsubscribe_all(&self) -> Vec<String> {
        let mut subscribed = self
            .subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        subscribed.drain().collect()
    }

    /// Whether the session lives past one request (a stateless request's does not).
    pub fn is_introduced(&self) -> bool {
        self.introduced.load(Ordering::Acquire)
    }

    pub(crate) fn subscribed_to(&self, uri: &str) -> bool {
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(uri)
    }
}

/// Whom a downstream call is made for: the session whose request caused it, that
/// request, and the progress token the host gave for it (a plan's steps have none).
#[derive(Clone)]
pub struct Caller {
    pub peer: Peer<RoleServer>,
    pub session: Arc<Session>,
    /// The host's request: over HTTP, a server's request during the call rides that
    /// request's stream (none: the session's standalone stream, as for a task whose
    /// request was answered at once).
    pub request: Option<RequestId>,
    pub progress: Option<ProgressToken>,
    /// Who answers what a 2026-07-28 server asks during the call (`input_required`).
    pub input: InputTo,
    /// What a 2026-07-28 host declared it can answer (its request's `_meta`), which its
    /// own calls tell the server in place of planmux's: the server asks only that.
    pub capabilities: Option<ClientCapabilities>,
    /// Where a legacy server's requests during a 2026-07-28 host's own call go: that
    /// call, which puts them to the host as `input_required` (the host takes no
    /// requests) and hands back the answers of its retry.
    pub asks: Option<Asks>,
    /// Who sent the request, as the HTTP front found it (`None` over stdio).
    pub identity: Option<Identity>,
}

/// A legacy server's request during a call, put to the call's host as a question of
/// `input_required` (SEP-2322), and the host's answer once it retried.
pub struct Asked {
    pub question: InputRequest,
    /// The host's answer (the result of the request, as JSON), or why there is none.
    pub answer: oneshot::Sender<Result<Value, ErrorData>>,
}

/// Where the questions of one call go ([`Caller::asks`]).
#[derive(Clone, Debug)]
pub struct Asks(pub mpsc::UnboundedSender<Asked>);

/// Who answers a 2026-07-28 server's questions about a call (its `input_required`
/// result: MRTR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputTo {
    /// The caller: a 2026-07-28 host's own call gets the result as the server gave it
    /// (its `requestState` sealed by `upstream`), and answers in its retry.
    Caller,
    /// The host, asked by planmux the requests a legacy server would have sent; planmux
    /// retries with the answers (a legacy host's call, every plan step).
    Host,
}

/// Who sent the request in `context`, as the HTTP front found it (`None` over stdio).
pub fn identity_of(context: &RequestContext<RoleServer>) -> Option<Identity> {
    let parts = context.extensions.get::<http::request::Parts>()?;
    parts.extensions.get::<Identity>().cloned()
}

impl Caller {
    /// The caller of the host's request in `context`, on `session`.
    pub fn of(context: &RequestContext<RoleServer>, session: &Arc<Session>) -> Self {
        let modern = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        Self {
            peer: context.peer.clone(),
            session: session.clone(),
            request: Some(context.id.clone()),
            progress: context.meta.get_progress_token(),
            input: if modern {
                InputTo::Caller
            } else {
                InputTo::Host
            },
            capabilities: modern.then(|| context.client_capabilities().unwrap_or_default()),
            asks: None,
            identity: identity_of(context),
        }
    }

    /// Whose this caller's runs, approvals and state are: a verified identity's
    /// (`[http.auth]`), whichever session it uses; else a stdio host's session, or an
    /// HTTP session that introduced itself with `initialize`. A stateless HTTP request
    /// without a verified identity has none, and no later request could prove to be it.
    pub fn owner(&self) -> Option<Owner> {
        if let Some(owner) = self.identity.as_ref().and_then(Identity::owner) {
            return Some(owner);
        }
        let introduced = self.session.introduced.load(Ordering::Acquire);
        introduced.then(|| Owner::Session(self.session.id()))
    }

    /// The same caller, for a plan's steps: their progress is not relayed (the plan
    /// reports its own), and what their servers ask is asked of the host by planmux
    /// (the plan's answer cannot be a server's question).
    pub fn for_plan(mut self) -> Self {
        self.progress = None;
        self.input = InputTo::Host;
        self.capabilities = None;
        self
    }
}

/// A call's place among the calls in flight: removed when dropped after the server
/// answered, kept [`ABANDONED`] longer otherwise.
pub(crate) struct Calling {
    calls: Arc<Calls>,
    key: u64,
    answered: bool,
}

impl Calling {
    /// The server answered: the call is over for it too.
    pub(crate) fn answered(&mut self) {
        self.answered = true;
    }
}

impl Drop for Calling {
    fn drop(&mut self) {
        let mut calls = self.calls.lock();
        if self.answered {
            calls.retain(|call| call.key != self.key);
        } else if let Some(call) = calls.iter_mut().find(|call| call.key == self.key) {
            call.abandoned = Some(Instant::now());
        }
    }
}

/// The downstream calls in flight, and whom each is for.
#[derive(Default)]
pub(crate) struct Calls {
    calls: Mutex<Vec<InFlight>>,
    next: AtomicU64,
}

impl Calls {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<InFlight>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes a call to `server` for `caller`, until the returned guard drops.
    pub(crate) fn start(self: &Arc<Self>, server: &str, caller: &Caller) -> Calling {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let mut calls = self.lock();
        calls.retain(|call| call.abandoned.is_none_or(|at| at.elapsed() < ABANDONED));
        calls.push(InFlight {
            key,
            server: server.to_owned(),
            caller: caller.clone(),
            abandoned: None,
        });
        Calling {
            calls: self.clone(),
            key,
            answered: false,
        }
    }

    /// Whom what `server` asks or says now is for: the session whose calls are in flight
    /// on it (its oldest call; calls given up in the last [`ABANDONED`] count too). MCP
    /// gives a server's request no link to the call that caused it, so when no session or
    /// several have calls there, no session is chosen and the reason is returned.
    pub(crate) fn caller_of(&self, server: &str) -> Result<Caller, String> {
        let calls = self.lock();
        let mut on_server = calls.iter().filter(|c| {
            c.server == server && c.abandoned.is_none_or(|at| at.elapsed() < ABANDONED)
        });
        let Some(first) = on_server.next() else {
            return Err(format!(
                "no call is in flight on '{server}', so planmux cannot tell which HTTP session it is for"
            ));
        };
        if on_server.any(|c| c.caller.session.id() != first.caller.session.id()) {
            return Err(format!(
                "calls of several HTTP sessions are in flight on '{server}', so planmux cannot tell which one it is for"
            ));
        }
        Ok(first.caller.clone())
    }
}
