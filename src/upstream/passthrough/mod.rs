//! The passthrough: a stdio host's plain `tools/call` of a downstream tool on a line
//! connection, forwarded as raw JSON, with the server's answer moved back without being
//! decoded. rmcp decodes every message into its protocol types (trying untagged enum
//! variants in turn) and encodes it again, on both sides: for a call that planmux only
//! routes, that is most of what it adds (BENCHMARKS.md §1).
//!
//! The request is taken off the host's stream before rmcp sees it (`wire::Divert`) when
//! it can take this path: a stdio host that finished an `initialize` handshake (protocol
//! before 2026-07-28), a tool of the catalog that is not planmux's own nor a pipeline, on
//! a server reached over a line connection. Anything else goes to rmcp as before.
//!
//! Every call taken goes through the one send of `downstream::LineRoute` into its
//! connection's call table, with the host's line as its sink: at once, where the
//! request is read, when the checkpoint decides without waiting and the server is up
//! with room in its queue; otherwise after an admission wait on a task of this path's
//! own (the checkpoint, the server's start). Either way it meets the checkpoint (with
//! the audit trail), the call's time limit, the host's cancellation (the server is told,
//! with the host's reason), its progress token (notifications relayed in order before
//! the answer), a server that exits or restarts, and the one error mapping
//! ([`super::host_answer`]); with traces on, its spans (`traced.rs`). An HTTP session's
//! calls take the same path off their POSTs (`sessions.rs`); what a call in flight is
//! and how it ends waiting is one thing for both (`flight.rs`).
//!
//! A 2025-11-25 host's tasks (a call with a `task`, `tasks/*`) are taken off its line here
//! too (`tasks.rs`): rmcp models none.

mod encode;
mod flight;
mod read;
pub mod sessions;
mod tasks;
mod traced;
pub use tasks::offered_in as offer_tasks;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use rmcp::model::{ErrorData, LoggingLevel};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::surface::SEARCH_TOOLS_TOOL;
use super::{Upstream, host_answer};
use crate::approval::APPROVE_PLAN_TOOL;
use crate::downstream::{
    DownstreamError, Downstreams, LineCall, LineRoute, RawReply, RouteSink, Sink,
};
use crate::plan::EXECUTE_PLAN_TOOL;
use crate::policy::{Authorized, Route};
use crate::runner::PlanRunner;
use crate::wire::{Divert, Diverted, Forward, RawSender};
use encode::{Answer, encode};
use flight::{Flight, Refused, Stage};
use read::Plain;
use traced::Spans;

/// What planmux tells a server whose call it cancels for the host when the host gave no
/// reason, or when planmux shuts down.
const CANCELLED: &str = "cancelled by the client";
/// What a call's spans say when planmux answered it without sending it (refused, or its
/// server not up in time).
const NOT_SENT: &str = "planmux did not send the call";

/// Where a host's `tools/call` of `name` goes on this path, if it may take it now: a
/// downstream tool (not planmux's own nor a pipeline) whose server is up on a line
/// connection.
pub(super) fn route_for(
    downstreams: &Downstreams,
    runner: &PlanRunner,
    name: &str,
) -> Option<LineRoute> {
    let ours = [EXECUTE_PLAN_TOOL, APPROVE_PLAN_TOOL, SEARCH_TOOLS_TOOL].contains(&name);
    let pipeline = runner.pipeline(name).is_some() && downstreams.catalog().get(name).is_none();
    (!ours && !pipeline)
        .then(|| downstreams.line_route(name))
        .flatten()
}

/// Which way a host's calls go: the knob that forces each route, so a test can show they
/// answer alike (`PLANMUX_ROUTE`: `in-place`, the default; `admission`; `rmcp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RouteChoice {
    /// At once where it can, else after an admission wait.
    #[default]
    InPlace,
    /// Always after an admission wait on a task.
    Admission,
    /// Never taken: every call goes to rmcp's typed path.
    Rmcp,
}

impl RouteChoice {
    /// The choice `PLANMUX_ROUTE` makes (a test's knob; unset, the default).
    pub fn from_env() -> Self {
        match std::env::var("PLANMUX_ROUTE").as_deref() {
            Ok("admission") => Self::Admission,
            Ok("rmcp") => Self::Rmcp,
            Ok("in-place") | Err(_) => Self::InPlace,
            Ok(other) => {
                tracing::warn!(
                    route = other,
                    "PLANMUX_ROUTE is in-place, admission or rmcp; using in-place"
                );
                Self::InPlace
            }
        }
    }
}

/// The calls on the passthrough path, and where their answers go.
pub struct Passthrough {
    upstream: Upstream,
    /// The host's stream.
    writer: RawSender,
    /// The host's calls in flight, by the host's request id (as JSON text). The server's
    /// side of each is its connection's call table, by raw id.
    in_flight: Mutex<HashMap<String, Flight<Option<Spans>>>>,
    /// Whether the host may take this path, once its handshake tells.
    host_fits: OnceLock<bool>,
    choice: RouteChoice,
    /// The admission waits and the shutdown watcher; [`Self::finish`] waits for them.
    tasks: TaskTracker,
    /// Tells apart a call from a later one under the same host id.
    serial: AtomicU64,
}

impl Passthrough {
    /// The passthrough path of `upstream`, answering on `writer` (the host's stream),
    /// sending calls as `choice` says. Must be called within the runtime: a task answers
    /// the calls still in flight when planmux shuts down.
    pub fn new(upstream: Upstream, writer: RawSender, choice: RouteChoice) -> Arc<Self> {
        let shutdown = upstream.shutdown.clone();
        let path = Arc::new(Self {
            upstream,
            writer,
            in_flight: Mutex::default(),
            host_fits: OnceLock::new(),
            choice,
            tasks: TaskTracker::new(),
            serial: AtomicU64::new(0),
        });
        let closing = Arc::downgrade(&path);
        path.tasks.spawn(async move {
            shutdown.cancelled().await;
            if let Some(path) = closing.upgrade() {
                path.close().await;
            }
        });
        path
    }

    /// The hook for the host's transport: takes the calls this path serves, and notes
    /// the host's cancellation of them (rmcp sees that too, and ignores an id it does
    /// not know).
    pub fn divert(self: &Arc<Self>) -> Divert {
        let path = self.clone();
        Arc::new(move |line: &mut Vec<u8>| path.claim(line))
    }

    /// Waits (at most `limit`) for the admission waits still running to answer; after
    /// shutdown each ends at once.
    pub async fn finish(&self, limit: Duration) {
        self.tasks.close();
        let _ = tokio::time::timeout(limit, self.tasks.wait()).await;
    }

    fn in_flight(&self) -> MutexGuard<'_, HashMap<String, Flight<Option<Spans>>>> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn claim(self: &Arc<Self>, line: &[u8]) -> Diverted {
        if crate::text::contains!(line, b"notifications/cancelled") {
            self.cancelled(line);
            return Diverted::Left;
        }
        if self.claim_task(line) {
            return Diverted::Taken;
        }
        if self.choice == RouteChoice::Rmcp || !crate::text::contains!(line, b"tools/call") {
            return Diverted::Left;
        }
        let Some(call) = Plain::read(line) else {
            return Diverted::Left;
        };
        let route = self
            .host_fits()
            .then(|| {
                route_for(
                    &self.upstream.downstreams,
                    &self.upstream.runner,
                    &call.name,
                )
            })
            .flatten();
        let Some(route) = route else {
            return Diverted::Left;
        };
        let mut in_flight = self.in_flight();
        if in_flight.contains_key(&call.key) {
            // A second request with the id of one in flight: rmcp answers that.
            return Diverted::Left;
        }
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        let spans = Spans::start(&call.name, call.traceparent.as_deref(), &route);
        let traceparent = spans.as_ref().and_then(Spans::traceparent);
        // The checkpoint, where it need not wait; its proof sends the call at once.
        let proof = match self.upstream.downstreams.authorize_now(
            route.exported(),
            &Route::Direct,
            &self.upstream.downstreams.grant(None),
        ) {
            Some(Ok(proof)) if self.choice == RouteChoice::InPlace => {
                let sink = self.sink(&call.key);
                let request =
                    |id: &str, tool: &str| call.forwarded(line, id, tool, traceparent.as_deref());
                if let Ok(sent) = route.send_now(&proof, sink, request) {
                    let stage = Stage::Sent(sent);
                    let flight = call.flight(serial, stage, spans);
                    in_flight.insert(call.key, flight);
                    return Diverted::Taken;
                }
                Some(proof)
            }
            Some(Ok(proof)) => Some(proof),
            Some(Err(denied)) => {
                Spans::end_all(spans, Some(denied.to_string()));
                let error = ErrorData::invalid_params(denied.to_string(), None);
                return Diverted::Forward(self.reply(&call.key, Answer::Error(error)));
            }
            None => None,
        };
        let cancel = self.upstream.shutdown.child_token();
        let stage = Stage::Admitting(cancel.clone());
        in_flight.insert(call.key.clone(), call.flight(serial, stage, spans));
        let admission = Admission {
            line: line.to_vec(),
            call,
            route,
            serial,
            traceparent,
        };
        self.tasks
            .spawn(self.clone().admit(admission, proof, cancel));
        Diverted::Taken
    }

    /// Whether the host may take this path: a stdio host of an era before 2026-07-28,
    /// once its handshake tells.
    fn host_fits(&self) -> bool {
        match self.host_fits.get() {
            Some(fits) => *fits,
            None => self
                .upstream
                .passthrough_host()
                .is_some_and(|fits| *self.host_fits.get_or_init(|| fits)),
        }
    }

    /// Where the table hands the call `key`'s end: this path.
    fn sink(self: &Arc<Self>, key: &str) -> Sink {
        Sink::Host {
            key: key.to_owned(),
            to: self.clone(),
        }
    }

    /// The host cancelled a request: if it is one of ours, its call stops, and the server
    /// hears the host's reason. Like rmcp, the host gets no answer (it may reuse the id).
    fn cancelled(&self, text: &[u8]) {
        flight::cancel(self.in_flight(), text);
    }

    /// Takes the call `key` with raw id `id` out of those in flight, if it was there:
    /// its spans, to end.
    fn end(&self, key: &str, id: &str) -> Option<Option<Spans>> {
        let mut in_flight = self.in_flight();
        if !in_flight.get(key).is_some_and(|flight| flight.is(id)) {
            return None;
        }
        in_flight.remove(key).map(|flight| flight.to)
    }

    /// planmux is shutting down: the calls in the servers' tables are cancelled and
    /// answered as every call is (those still admitted answer so on their tasks).
    async fn close(&self) {
        let sent: Vec<(String, LineCall)> = self
            .in_flight()
            .extract_if(|_, flight| matches!(flight.stage, Stage::Sent(_)))
            .filter_map(|(key, flight)| match flight.stage {
                Stage::Sent(call) => Some((key, call)),
                Stage::Admitting(_) | Stage::Cancelled(_) => None,
            })
            .collect();
        for (key, call) in sent {
            if call.cancel(Some(CANCELLED)) {
                let answer = Answer::from(host_answer(call.cancelled()));
                let _ = self.reply(&key, answer).send().await;
            }
        }
    }

    /// The host's message answering request `id` (JSON text) with `answer`.
    fn reply(&self, id: &str, answer: Answer) -> Forward {
        let (bytes, from) = encode(id, answer);
        Forward {
            to: self.writer.clone(),
            bytes,
            from,
        }
    }

    /// An admitted call: the checkpoint (unless `proof` is its decision already), the
    /// server's start, then the one send; what ends it before the table holds it is
    /// answered here, unless the host cancelled it.
    async fn admit(
        self: Arc<Self>,
        admission: Admission,
        proof: Option<Authorized>,
        cancel: CancellationToken,
    ) {
        let outcome = self.admitted(&admission, proof, &cancel).await;
        let (key, serial) = (&admission.call.key, admission.serial);
        let settled = flight::settle(&mut self.in_flight(), key, serial, outcome);
        let Some((answer, spans)) = settled else {
            return;
        };
        Spans::end_all(spans, Some(NOT_SENT.to_owned()));
        if let Err(error) = self.reply(key, answer).send().await {
            tracing::debug!(%error, "the host's stream closed before a passthrough answer");
        }
    }

    /// [`Self::admit`]'s waits: the call in its table, or why not.
    async fn admitted(
        self: &Arc<Self>,
        admission: &Admission,
        proof: Option<Authorized>,
        cancel: &CancellationToken,
    ) -> Result<LineCall, Refused> {
        let Admission {
            line,
            call,
            route,
            traceparent,
            ..
        } = admission;
        let downstreams = &self.upstream.downstreams;
        let proof = match proof {
            Some(proof) => proof,
            None => {
                // The stdio host has no identity: `[[access]]` rules for "*" are its.
                let grant = downstreams.grant(None);
                let decided = tokio::select! {
                    decided = downstreams.authorize(route.exported(), &Route::Direct, &grant) => decided,
                    () = cancel.cancelled() => return Err(Refused::Answer(Answer::from(
                        host_answer(route.cancelled()),
                    ))),
                };
                decided.map_err(|denied| {
                    let error = ErrorData::invalid_params(denied.to_string(), None);
                    Refused::Answer(Answer::Error(error))
                })?
            }
        };
        let request = |id: &str, tool: &str| call.forwarded(line, id, tool, traceparent.as_deref());
        let sent = route.send(&proof, self.sink(&call.key), request, cancel);
        sent.await.map_err(|(error, sink)| match sink {
            Some(_) => Refused::Answer(Answer::from(host_answer(error))),
            None => Refused::Told,
        })
    }
}

/// A call taken for an admission wait: its line, what was read of it, where it goes.
struct Admission {
    line: Vec<u8>,
    call: Plain,
    route: LineRoute,
    serial: u64,
    /// What the server is sent as its parent span, when traced.
    traceparent: Option<String>,
}

impl Plain {
    /// Its record among the calls in flight, its messages going to `to`.
    fn flight<T>(&self, serial: u64, stage: Stage, to: T) -> Flight<T> {
        Flight {
            progress: self.progress.clone(),
            serial,
            stage,
            to,
        }
    }
}

/// Where the calls' ends arrive from their tables (on the server's read path).
impl RouteSink for Passthrough {
    fn answered(&self, key: &str, id: &str, server: &str, reply: RawReply) -> Option<Forward> {
        // Not in flight any more: the host cancelled it, and gets no answer.
        let spans = self.end(key, id)?;
        Spans::end_all(spans, reply.failure().map(str::to_owned));
        if let Some(result) = reply.result() {
            self.upstream.downstreams.note_raw_links(server, result);
        }
        Some(self.reply(key, Answer::Reply(reply)))
    }

    fn progress(&self, key: &str, id: &str, line: Vec<u8>, token: Range<usize>) -> Option<Forward> {
        let line = self.in_flight().get(key)?.host_progress(id, line, token)?;
        Some(Forward {
            to: self.writer.clone(),
            bytes: line,
            from: 0,
        })
    }

    fn failed(&self, key: &str, id: &str, error: DownstreamError) -> Option<Forward> {
        let spans = self.end(key, id)?;
        Spans::end_all(spans, Some(error.to_string()));
        Some(self.reply(key, Answer::from(host_answer(error))))
    }

    /// As rmcp's relay does it (at the host's level, the logger named after the server),
    /// but in wire order with the answers.
    fn log(&self, server: &str, line: &mut Vec<u8>) -> Diverted {
        let Ok(mut message) = serde_json::from_slice::<Value>(line) else {
            return Diverted::Left;
        };
        let params = &mut message["params"];
        let Ok(level) = serde_json::from_value::<LoggingLevel>(params["level"].clone()) else {
            return Diverted::Left;
        };
        match self.upstream.host.wants_log(level) {
            None => return Diverted::Left,
            Some(false) => return Diverted::Taken,
            Some(true) => {}
        }
        let logger = match params["logger"].as_str() {
            Some(name) => format!("{server}/{name}"),
            None => server.to_owned(),
        };
        params["logger"] = Value::String(logger);
        match serde_json::to_vec(&message) {
            Ok(bytes) => Diverted::Forward(Forward {
                to: self.writer.clone(),
                bytes,
                from: 0,
            }),
            Err(_) => Diverted::Left,
        }
    }
}
