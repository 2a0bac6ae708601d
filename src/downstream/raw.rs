//! Calls forwarded as raw JSON on one line connection (a stdio child or a built-in
//! server): the request goes out as the host's bytes with a planmux id, and the answer
//! with that id is taken off the stream before rmcp decodes it, so a large result is
//! moved, not parsed into protocol types and encoded again.
//!
//! Everything else on the connection (the handshake, lists, progress, the server's own
//! requests) stays with rmcp. Raw ids are strings with a prefix no rmcp id has (rmcp
//! numbers its requests), so the two never meet. A call routed in place
//! ([`super::routed`]) has its progress taken here too.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    ClientRequest, ErrorData, NumberOrString, ProgressToken, RequestId, ServerResult,
};
use rmcp::service::{PeerRequestOptions, RequestHandle, ServiceError};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::oneshot;

use super::routed::Routed;
use super::server::Live;
use crate::wire::{Divert, Diverted, RawSender};

/// What every raw id starts with.
const PREFIX: &str = "planmux-raw-";
/// How far from a message's end its id is looked for first.
const ID_AT_END: usize = 128;

/// The raw calls in flight on one connection.
pub(crate) struct RawCalls {
    /// The server's name, for errors.
    pub(super) server: String,
    /// The server's `call_timeout_ms`.
    pub(super) timeout: Duration,
    pub(super) writer: RawSender,
    pub(super) table: Mutex<Table>,
    next: AtomicU64,
    /// Finds [`PREFIX`] in a message, built once (every message of the server is scanned).
    prefix: memchr::memmem::Finder<'static>,
}

/// The calls waiting for an answer, by raw id.
#[derive(Default)]
pub(super) struct Table {
    pub(super) waiting: HashMap<String, Waiter>,
    /// Whether a task watches the routed calls' time limits.
    pub(super) sweeping: bool,
}

/// Who waits for a raw call's answer.
pub(super) enum Waiter {
    /// A call task (the passthrough's general path, a plan's step).
    Call(oneshot::Sender<RawReply>),
    /// A call routed in place: its answer is handed on where it is read.
    Routed(Routed),
}

/// A server's response line to a raw call, and where its result or error is in it: read
/// once, never decoded, so the host's answer is spliced from it.
#[derive(Debug, PartialEq)]
pub struct RawReply {
    pub line: Vec<u8>,
    /// The bytes of `result` (or of `error`, when `is_error`); `None` when it has neither.
    pub body: Option<Range<usize>>,
    pub is_error: bool,
}

impl RawReply {
    /// The result's or error's JSON text, if the response has one.
    pub fn body(&self) -> Option<&[u8]> {
        self.body.clone().map(|range| &self.line[range])
    }

    /// The result's JSON text, when the response is a result.
    pub fn result(&self) -> Option<&[u8]> {
        self.body().filter(|_| !self.is_error)
    }
}

/// A raw call's place among those in flight, given up when dropped (answered or not).
pub(crate) struct Pending {
    calls: Arc<RawCalls>,
    pub(crate) id: String,
    pub(crate) answer: oneshot::Receiver<RawReply>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.calls.table().waiting.remove(&self.id);
    }
}

/// A message's id, its `method` (a response has none), its result or error left as they
/// are, and a progress notification's token: one pass over the line.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    result: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow)]
    error: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow)]
    params: Option<ProgressParams<'a>>,
}

#[derive(Deserialize)]
struct ProgressParams<'a> {
    #[serde(borrow, rename = "progressToken")]
    token: Option<&'a serde_json::value::RawValue>,
}

impl RawCalls {
    /// Raw calls to server `server`, written with `writer`, routed ones limited to
    /// `timeout`.
    pub(crate) fn new(writer: RawSender, server: &str, timeout: Duration) -> Arc<Self> {
        Arc::new(Self {
            server: server.to_owned(),
            timeout,
            writer,
            table: Mutex::default(),
            next: AtomicU64::new(1),
            prefix: memchr::memmem::Finder::new(PREFIX.as_bytes()),
        })
    }

    pub(super) fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A fresh raw id.
    pub(super) fn next_id(&self) -> String {
        // Not `format!`: this is on every routed call's path, and the formatting machinery
        // is a good share of the code such a call runs (BENCHMARKS.md §1).
        [
            PREFIX,
            &self.next.fetch_add(1, Ordering::Relaxed).to_string(),
        ]
        .concat()
    }

    /// A fresh id, waiting for its answer.
    pub(crate) fn start(self: &Arc<Self>) -> Pending {
        let id = self.next_id();
        let (tx, answer) = oneshot::channel();
        self.table().waiting.insert(id.clone(), Waiter::Call(tx));
        Pending {
            calls: self.clone(),
            id,
            answer,
        }
    }

    /// Writes one encoded message to the server.
    pub(crate) async fn send(&self, bytes: Vec<u8>) -> std::io::Result<()> {
        self.writer.send(bytes).await
    }

    /// The hook for the connection's transport: takes the answers to raw calls.
    pub(crate) fn divert(self: &Arc<Self>) -> Divert {
        let calls = Arc::downgrade(self);
        Arc::new(move |line: &mut Vec<u8>| {
            let Some(calls) = calls.upgrade() else {
                return Diverted::Left;
            };
            // Most messages are not ours: a scan, not a parse, tells. A large answer has
            // its id at one end (the TypeScript SDK writes it after the result): the end is
            // looked at first, so the scan does not cross the result.
            let end = line.len().saturating_sub(ID_AT_END);
            if calls.prefix.find(&line[end..]).is_none() && calls.prefix.find(line).is_none() {
                return Diverted::Left;
            }
            calls.take(line)
        })
    }

    /// Hands a response whose id is a raw call's to that call, with its line (moved out
    /// of `line`); and a routed call's progress to where its answer will go.
    fn take(&self, line: &mut Vec<u8>) -> Diverted {
        let Ok(envelope) = serde_json::from_slice::<Envelope>(line) else {
            return Diverted::Left;
        };
        let start = line.as_ptr() as usize;
        let span = |raw: &serde_json::value::RawValue| {
            let from = raw.get().as_ptr() as usize - start;
            from..from + raw.get().len()
        };
        if let Some(method) = &envelope.method {
            let token = envelope.params.as_ref().and_then(|p| p.token);
            return match token {
                Some(token) if method == "notifications/progress" => {
                    let Ok(id) = serde_json::from_str::<Cow<str>>(token.get()) else {
                        return Diverted::Left;
                    };
                    let token = span(token);
                    let routed = match self.table().waiting.get(id.as_ref()) {
                        Some(Waiter::Routed(routed)) => routed.clone(),
                        // The general path's progress goes through the tap.
                        _ => return Diverted::Left,
                    };
                    routed.progress(&id, std::mem::take(line), token)
                }
                _ => Diverted::Left,
            };
        }
        let Some(id) = envelope.id.map(Cow::into_owned) else {
            return Diverted::Left;
        };
        let waiting = self.table().waiting.remove(&id);
        let Some(waiter) = waiting else {
            // A call that gave up meanwhile drops the answer, as rmcp would.
            return if id.starts_with(PREFIX) {
                Diverted::Taken
            } else {
                Diverted::Left
            };
        };
        let body = envelope.result.or(envelope.error).map(span);
        let is_error = envelope.result.is_none() && envelope.error.is_some();
        let reply = RawReply {
            body,
            is_error,
            line: std::mem::take(line),
        };
        match waiter {
            Waiter::Call(call) => {
                let _ = call.send(reply);
                Diverted::Taken
            }
            Waiter::Routed(routed) => routed.answered(&id, &self.server, reply),
        }
    }
}

/// A request for a server: rmcp's, or a `tools/call` as the host's JSON (its id and
/// progress token are replaced on the way).
#[derive(Clone)]
// One per call, moved a few times: boxing the large variant would allocate per call.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Outgoing {
    Typed(ClientRequest),
    Raw(Value),
}

/// The server's answer: decoded by rmcp, or its raw response line.
// One per call, moved a few times: boxing the large variant would allocate per call.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Answer {
    Typed(ServerResult),
    Raw(RawReply),
}

/// A request the server has, waiting for its answer.
// One per call, moved a few times: boxing the large variant would allocate per call.
#[allow(clippy::large_enum_variant)]
pub(crate) enum InFlight {
    Typed(RequestHandle<RoleClient>),
    Raw(Pending),
}

impl InFlight {
    /// Sends `outgoing` on `live`. A raw request whose host asked for progress carries a
    /// progress token equal to its id.
    pub(crate) async fn send(live: &Live, outgoing: Outgoing) -> Result<Self, ServiceError> {
        match outgoing {
            Outgoing::Typed(request) => live
                .peer
                .send_cancellable_request(request, PeerRequestOptions::no_options())
                .await
                .map(Self::Typed),
            Outgoing::Raw(mut request) => {
                let raw = live.raw.as_ref().ok_or(ServiceError::TransportClosed)?;
                let pending = raw.start();
                request["id"] = Value::from(pending.id.as_str());
                if let Some(token) = request.pointer_mut("/params/_meta/progressToken") {
                    *token = Value::from(pending.id.as_str());
                }
                let bytes = serde_json::to_vec(&request).map_err(|e| {
                    ServiceError::McpError(ErrorData::internal_error(e.to_string(), None))
                })?;
                raw.send(bytes)
                    .await
                    .map_err(|_| ServiceError::TransportClosed)?;
                Ok(Self::Raw(pending))
            }
        }
    }

    /// Its id on the server's connection.
    pub(crate) fn id(&self) -> RequestId {
        match self {
            Self::Typed(handle) => handle.id.clone(),
            Self::Raw(pending) => NumberOrString::String(pending.id.as_str().into()),
        }
    }

    /// The progress token the server's notifications for it carry.
    pub(crate) fn progress_token(&self) -> ProgressToken {
        match self {
            Self::Typed(handle) => handle.progress_token.clone(),
            Self::Raw(pending) => ProgressToken(NumberOrString::String(pending.id.as_str().into())),
        }
    }

    /// The server's answer; a raw answer comes as it was written (an error response too).
    pub(crate) async fn answer(self) -> Result<Answer, ServiceError> {
        match self {
            Self::Typed(handle) => handle.await_response().await.map(Answer::Typed),
            Self::Raw(mut pending) => (&mut pending.answer)
                .await
                .map(Answer::Raw)
                .map_err(|_| ServiceError::TransportClosed),
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{DuplexStream, ReadHalf};

    use super::*;
    use crate::wire::{Limits, LineTransport};

    /// Raw calls on a connection that goes nowhere, and the transport that keeps its
    /// writer open.
    fn raw_calls() -> (
        LineTransport<RoleClient, ReadHalf<DuplexStream>>,
        Arc<RawCalls>,
    ) {
        let (ours, _theirs) = tokio::io::duplex(64);
        let (read, write) = tokio::io::split(ours);
        let transport = LineTransport::new(read, write, Limits::default(), "test");
        let calls = RawCalls::new(transport.sender(), "test", Duration::from_secs(60));
        (transport, calls)
    }

    #[tokio::test]
    async fn answers_to_raw_calls_are_taken_and_others_left() {
        let (_transport, calls) = raw_calls();
        let divert = calls.divert();
        let mut pending = calls.start();
        let answer = format!(
            r#"{{"result":{{"content":[]}},"jsonrpc":"2.0","id":"{}"}}"#,
            pending.id
        );
        assert!(
            !divert(&mut br#"{"jsonrpc":"2.0","id":3,"result":{}}"#.to_vec()).taken(),
            "rmcp's own"
        );
        let request = format!(
            r#"{{"jsonrpc":"2.0","id":"{}","method":"ping"}}"#,
            pending.id
        );
        assert!(
            !divert(&mut request.into_bytes()).taken(),
            "a request that reuses the id"
        );
        let mut answer = answer.into_bytes();
        assert!(divert(&mut answer).taken());
        assert!(answer.is_empty(), "the line is moved to the call");
        let reply = pending.answer.try_recv().ok();
        assert_eq!(
            reply.as_ref().and_then(RawReply::result),
            Some(&br#"{"content":[]}"#[..])
        );
        // An answer to a call that already gave up is dropped, not passed to rmcp.
        let late = format!(r#"{{"jsonrpc":"2.0","id":"{}","result":{{}}}}"#, pending.id);
        drop(pending);
        assert!(divert(&mut late.into_bytes()).taken());
    }

    /// The id is looked for at a message's end first: a large answer is taken whichever
    /// end its id is at, and one that is not a raw call's is left whatever its size.
    #[tokio::test]
    async fn a_large_answer_is_taken_whichever_end_its_id_is_at() {
        let (_transport, calls) = raw_calls();
        let divert = calls.divert();
        let text = "x".repeat(4096);
        let result = format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#);
        let (mut last, mut first) = (calls.start(), calls.start());
        let id_last = format!(
            r#"{{"result":{result},"jsonrpc":"2.0","id":"{}"}}"#,
            last.id
        );
        let id_first = format!(
            r#"{{"jsonrpc":"2.0","id":"{}","result":{result}}}"#,
            first.id
        );
        let not_ours = format!(r#"{{"result":{result},"jsonrpc":"2.0","id":7}}"#);
        assert!(divert(&mut id_last.into_bytes()).taken());
        assert!(divert(&mut id_first.into_bytes()).taken());
        assert!(!divert(&mut not_ours.into_bytes()).taken());
        for pending in [&mut last, &mut first] {
            let reply = pending.answer.try_recv().ok();
            assert_eq!(
                reply.as_ref().and_then(RawReply::result),
                Some(result.as_bytes())
            );
        }
    }
}
