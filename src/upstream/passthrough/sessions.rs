//! The passthrough for HTTP sessions: a session's plain `tools/call` of a tool on a line
//! connection, read off its POST before rmcp decodes it, sent through the one send
//! (`LineRoute`) with the caller's checkpoint, and answered on the POST's own event
//! stream with the server's answer made in place (`encode.rs`). On rmcp's typed path
//! such a call is decoded and encoded again on each side and crosses three service
//! loops; here it costs what the stdio passthrough costs (BENCHMARKS.md §8).
//!
//! A session joins once its host finished an `initialize` handshake before protocol
//! 2026-07-28, and leaves when rmcp closes it. Anything else goes to rmcp as before: other
//! requests, a call with a `task`, a 2026-07-28 session's calls. With traces on, a call
//! is the host's request's span and the server call's inside it (`traced.rs`).
//!
//! Each call meets the checkpoint with the caller's grant (and the audit trail), its time
//! limit, the host's cancellation (a `notifications/cancelled` POST, which rmcp sees too
//! and ignores), its progress (on the call's stream, before the answer), what its server
//! asks meanwhile (sampling, elicitation, roots: put to the host on the call's stream
//! under an id of planmux's, the host's answer taken off its POST), a server that exits
//! or restarts, planmux's shutdown (answered as cancelled), and the one error mapping.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

mod questions;

use bytes::Bytes;
use rmcp::model::{ErrorData, ProtocolVersion};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::encode::{Answer, encode};
use super::flight::{self, Flight, Refused, Stage};
use super::read::Plain;
use super::traced::Spans;
use super::{CANCELLED, NOT_SENT, route_for};
use crate::downstream::{
    Asked, Asks, Caller, Calling, DownstreamError, InputTo, LineCall, LineRoute, RawReply,
    RouteSink, Sink,
};
use crate::identity::Identity;
use crate::policy::{Authorized, Route};
use crate::upstream::answers::host_answer;
use crate::upstream::session_end::{Joining, Joins, Leave};
use crate::wire::{Diverted, Forward};
use questions::Questions;

/// The HTTP sessions whose calls may take this path, by rmcp's session id.
#[derive(Default)]
pub struct Lanes {
    joined: Mutex<HashMap<String, Arc<Lane>>>,
}

/// What this path reads of a POST's headers.
pub struct Headers<'a> {
    /// `MCP-Protocol-Version`.
    pub version: Option<&'a [u8]>,
    /// `traceparent`: the host's trace, unless the call's `_meta` names one.
    pub traceparent: Option<&'a str>,
}

/// What a session's POST is to this path.
pub enum Taken {
    /// Not this path's: rmcp's to handle.
    Left,
    /// The host's answer to what this path asked it (202 Accepted).
    Answered,
    /// A call taken: the messages the host reads on the POST's stream.
    Call(Messages),
}

impl Lanes {
    fn joined(&self) -> MutexGuard<'_, HashMap<String, Arc<Lane>>> {
        self.joined.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What the POST `body` of session `session` is to this path: `headers` are its
    /// `MCP-Protocol-Version` and `traceparent`, `identity` who sent it. A call it takes
    /// is admitted here (the checkpoint, the server's start, the send).
    pub async fn take(
        &self,
        session: &str,
        headers: Headers<'_>,
        body: &[u8],
        identity: &Identity,
    ) -> Taken {
        let Headers {
            version,
            traceparent,
        } = headers;
        let Some(lane) = self.joined().get(session).cloned() else {
            return Taken::Left;
        };
        if crate::text::contains!(body, b"notifications/cancelled") {
            lane.cancelled(body);
            return Taken::Left;
        }
        if lane.questions.answered(body) {
            return Taken::Answered;
        }
        // rmcp checks a header, or a request's own `_meta`, naming another revision than
        // the session's.
        let other_version = version.is_some_and(|v| v != lane.version.as_str().as_bytes());
        if other_version
            || !crate::text::contains!(body, b"tools/call")
            || crate::text::contains!(body, b"protocolVersion")
        {
            return Taken::Left;
        }
        let Some(call) = Plain::read(body) else {
            return Taken::Left;
        };
        let parts = &lane.joining;
        let Some(route) = route_for(&parts.downstreams, &parts.runner, &call.name) else {
            return Taken::Left;
        };
        match lane.call(call, body, route, identity, traceparent).await {
            Some(messages) => Taken::Call(messages),
            None => Taken::Left,
        }
    }
}

/// A session joins once its host introduced itself (before 2026-07-28: a later host's
/// answers need `resultType`, which `encode.rs` blanks), and leaves when it ends.
impl Joins for Arc<Lanes> {
    fn join(&self, id: &str, joining: Joining) -> Option<Leave> {
        let info = joining.peer.peer_info()?;
        let version = info.protocol_version.clone();
        if version >= ProtocolVersion::V_2026_07_28 {
            return None;
        }
        let caller = Caller {
            peer: joining.peer.clone(),
            session: joining.session.clone(),
            request: None,
            progress: None,
            input: InputTo::Host,
            capabilities: Some(info.capabilities.clone()),
            asks: None,
            identity: None,
        };
        let lane = Lane {
            joining,
            caller,
            version,
            in_flight: Mutex::default(),
            questions: Questions::default(),
            serial: AtomicU64::new(0),
        };
        self.joined().insert(id.to_owned(), Arc::new(lane));
        let (lanes, id) = (Arc::downgrade(self), id.to_owned());
        Some(Box::new(move || {
            if let Some(lanes) = lanes.upgrade() {
                lanes.joined().remove(&id);
            }
        }))
    }
}

/// A session on this path: its calls in flight and the questions put to its host.
pub struct Lane {
    joining: Joining,
    /// Whom its calls are for, but for who sent each and where its questions go.
    caller: Caller,
    /// The protocol revision its host negotiated.
    version: ProtocolVersion,
    /// Its calls in flight, by the host's request id (as JSON text).
    in_flight: Mutex<HashMap<String, Flight<Out>>>,
    /// What its servers asked during its calls, put to its host.
    questions: Questions,
    serial: AtomicU64,
}

/// Where a call's messages go, and whom it is for (where its server's questions go).
struct Out {
    stream: mpsc::UnboundedSender<Event>,
    caller: Caller,
    /// Its spans, when traces are on.
    spans: Option<Spans>,
}

impl Out {
    /// The call ended, failed when `error` says why: its spans end.
    fn ended(self, error: Option<String>) -> mpsc::UnboundedSender<Event> {
        Spans::end_all(self.spans, error);
        self.stream
    }
}

/// A message for the host on a call's stream: `bytes[from..]`.
enum Event {
    /// Progress.
    Said(Vec<u8>),
    /// The answer, and whether the server gave it (not planmux, for a call that ended
    /// without one).
    Answer(Vec<u8>, usize, bool),
}

impl Lane {
    fn in_flight(&self) -> MutexGuard<'_, HashMap<String, Flight<Out>>> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The host cancelled a request: if it is one of this path's, its call stops (the
    /// server hears the host's reason) and its stream ends without an answer, as rmcp's.
    fn cancelled(&self, body: &[u8]) {
        flight::cancel(self.in_flight(), body);
    }

    /// The caller a call on this path is made for: this session, from `identity`; what
    /// its server asks goes to `asks` (the call's stream).
    fn caller(&self, identity: &Identity, asks: Asks) -> Caller {
        Caller {
            asks: Some(asks),
            identity: Some(identity.clone()),
            ..self.caller.clone()
        }
    }

    /// Takes the host's call: admitted (the checkpoint, the server's start, the send),
    /// then its messages. `None` leaves it to rmcp (a second request under the id of one
    /// in flight, which rmcp answers).
    async fn call(
        self: &Arc<Self>,
        call: Plain,
        line: &[u8],
        route: LineRoute,
        identity: &Identity,
        traceparent: Option<&str>,
    ) -> Option<Messages> {
        let (stream, events) = mpsc::unbounded_channel();
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        let cancel = self.joining.shutdown.child_token();
        let (asks, questions) = mpsc::unbounded_channel();
        let caller = self.caller(identity, Asks(asks));
        let sent_parent;
        {
            let mut in_flight = self.in_flight();
            if in_flight.contains_key(&call.key) {
                return None;
            }
            let spans = Spans::start(
                &call.name,
                call.traceparent.as_deref().or(traceparent),
                &route,
            );
            // The server's parent span is planmux's call's.
            sent_parent = spans.as_ref().and_then(Spans::traceparent);
            let out = Out {
                stream,
                caller: caller.clone(),
                spans,
            };
            let flight = call.flight(serial, Stage::Admitting(cancel.clone()), out);
            in_flight.insert(call.key.clone(), flight);
        }
        let calling = self.joining.host.calling(route.server(), Some(&caller));
        let parent = sent_parent.as_deref();
        let outcome = (self.admitted(line, &call, parent, &route, identity, &cancel)).await;
        let settled = flight::settle(&mut self.in_flight(), &call.key, serial, outcome);
        let first = settled.map(|(answer, out)| {
            out.ended(Some(NOT_SENT.to_owned()));
            let (bytes, from) = encode(&call.key, answer);
            Event::Answer(bytes, from, false)
        });
        Some(Messages {
            lane: self.clone(),
            key: call.key,
            first,
            events,
            questions,
            calling,
            stopping: false,
            done: false,
        })
    }

    /// The checkpoint and the send: the call in its table, or why not.
    /// `traceparent` is what the server is sent as its parent span.
    async fn admitted(
        self: &Arc<Self>,
        line: &[u8],
        call: &Plain,
        traceparent: Option<&str>,
        route: &LineRoute,
        identity: &Identity,
        cancel: &CancellationToken,
    ) -> Result<LineCall, Refused> {
        let downstreams = &self.joining.downstreams;
        let grant = downstreams.grant(Some(identity));
        let exported = route.exported();
        let decided = match downstreams.authorize_now(exported, &Route::Direct, &grant) {
            Some(decided) => decided,
            None => tokio::select! {
                decided = downstreams.authorize(exported, &Route::Direct, &grant) => decided,
                () = cancel.cancelled() => return Err(Refused::Answer(Answer::from(
                    host_answer(route.cancelled()),
                ))),
            },
        };
        let proof: Authorized = decided.map_err(|denied| {
            let error = ErrorData::invalid_params(denied.to_string(), None);
            Refused::Answer(Answer::Error(error))
        })?;
        let request = |id: &str, tool: &str| call.forwarded(line, id, tool, traceparent);
        let sink = Sink::Host {
            key: call.key.clone(),
            to: self.clone(),
        };
        let sink = match route.send_now(&proof, sink, request) {
            Ok(sent) => return Ok(sent),
            Err(sink) => sink,
        };
        let sent = route.send(&proof, sink, request, cancel).await;
        sent.map_err(|(error, sink)| match sink {
            Some(_) => Refused::Answer(Answer::from(host_answer(error))),
            None => Refused::Told,
        })
    }

    /// Takes call `key` with raw id `id` out of those in flight: where it was going.
    fn end(&self, key: &str, id: &str) -> Option<Out> {
        let mut in_flight = self.in_flight();
        if !in_flight.get(key).is_some_and(|flight| flight.is(id)) {
            return None;
        }
        in_flight.remove(key).map(|flight| flight.to)
    }

    /// planmux is shutting down: call `key` is cancelled and answered so, unless its
    /// table ended it first (its answer is then on its way).
    fn stop(&self, key: &str) -> Option<Event> {
        let flight = self.in_flight().remove(key)?;
        let Stage::Sent(call) = flight.stage else {
            return None;
        };
        if !call.cancel(Some(CANCELLED)) {
            return None;
        }
        let error = call.cancelled();
        flight.to.ended(Some(error.to_string()));
        let (bytes, from) = encode(key, Answer::from(host_answer(error)));
        Some(Event::Answer(bytes, from, false))
    }
}

/// Where the calls' ends arrive from their tables (on the server's read path).
impl RouteSink for Lane {
    fn answered(&self, key: &str, id: &str, server: &str, reply: RawReply) -> Option<Forward> {
        let to = self.end(key, id)?.ended(reply.failure().map(str::to_owned));
        if let Some(result) = reply.result() {
            self.joining.downstreams.note_raw_links(server, result);
        }
        let (bytes, from) = encode(key, Answer::Reply(reply));
        let _ = to.send(Event::Answer(bytes, from, true));
        None
    }

    fn progress(&self, key: &str, id: &str, line: Vec<u8>, token: Range<usize>) -> Option<Forward> {
        let in_flight = self.in_flight();
        let flight = in_flight.get(key)?;
        let _ = flight
            .to
            .stream
            .send(Event::Said(flight.host_progress(id, line, token)?));
        None
    }

    fn failed(&self, key: &str, id: &str, error: DownstreamError) -> Option<Forward> {
        let to = self.end(key, id)?.ended(Some(error.to_string()));
        let answered = matches!(error, DownstreamError::Rpc { .. });
        let (bytes, from) = encode(key, Answer::from(host_answer(error)));
        let _ = to.send(Event::Answer(bytes, from, answered));
        None
    }

    /// Left to rmcp's relay: like the typed path's, the session's log messages go on its
    /// standalone stream.
    fn log(&self, _server: &str, _line: &mut Vec<u8>) -> Diverted {
        Diverted::Left
    }

    /// A 2026-07-28 server's questions (`input_required`) about call `key` go on its
    /// stream, as a legacy server's requests during it do.
    fn caller(&self, key: &str) -> Option<Caller> {
        self.in_flight()
            .get(key)
            .map(|flight| flight.to.caller.clone())
    }
}

/// A call's messages for the host, in order, its answer last.
pub struct Messages {
    lane: Arc<Lane>,
    key: String,
    /// The answer, when the call ended before it was sent.
    first: Option<Event>,
    events: mpsc::UnboundedReceiver<Event>,
    /// What its server asks the host meanwhile.
    questions: mpsc::UnboundedReceiver<Asked>,
    /// The call among the session's calls in flight on its server.
    calling: Option<Calling>,
    stopping: bool,
    done: bool,
}

impl Messages {
    /// The next message (JSON text) for the host: progress, a server's question, the
    /// answer; `None` after the answer, or when the host cancelled the call.
    pub async fn next(&mut self) -> Option<Bytes> {
        if let Some(event) = self.first.take() {
            return self.event(Some(event));
        }
        loop {
            if self.done {
                return None;
            }
            let shutdown = self.lane.joining.shutdown.clone();
            let event = tokio::select! {
                biased;
                event = self.events.recv() => event,
                Some(asked) = self.questions.recv() => match self.lane.questions.put(asked) {
                    Some(request) => return Some(Bytes::from(request)),
                    None => continue,
                },
                () = shutdown.cancelled(), if !self.stopping => {
                    self.stopping = true;
                    match self.lane.stop(&self.key) {
                        Some(event) => Some(event),
                        None => continue,
                    }
                }
            };
            return self.event(event);
        }
    }

    /// Whether the answer has been given.
    pub fn is_done(&self) -> bool {
        self.done
    }

    fn event(&mut self, event: Option<Event>) -> Option<Bytes> {
        match event {
            Some(Event::Said(line)) => Some(Bytes::from(line)),
            Some(Event::Answer(bytes, from, answered)) => {
                self.done = true;
                if answered && let Some(calling) = self.calling.as_mut() {
                    calling.answered();
                }
                Some(Bytes::from(bytes).slice(from..))
            }
            None => {
                self.done = true;
                None
            }
        }
    }
}
