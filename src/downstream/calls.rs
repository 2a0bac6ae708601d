//! One line connection's calls in flight (a stdio child or a built-in server): the one
//! table every `tools/call` forwarded as raw JSON goes through, whoever made it.
//!
//! A call goes out as the caller's JSON with a planmux id, and the server's answer with
//! that id is taken off the stream before rmcp decodes it (a `wire` divert hook), so a
//! large result is moved, not parsed into protocol types and encoded again. The table
//! owns each call's waiter until the call ends, in exactly one of four ways: the answer
//! (or a JSON-RPC error) comes; its time limit passes (the one sweeper task tells the
//! server and the waiter); the connection ends (every waiter hears why); or the caller
//! cancels ([`LineCall::cancel`], the server is told). Every waiter is a [`Sink`]: the
//! host's line (the passthrough, answered where the server's messages are read, with
//! progress in wire order before the answer) or a oneshot for a caller that awaits (a
//! plan step, which keeps every field of the result that way).
//!
//! Everything else on the connection (the handshake, lists, the server's own requests,
//! an awaiting caller's progress) stays with rmcp. Raw ids are strings with a prefix no
//! rmcp id has (rmcp numbers its requests), so the two never meet.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::DownstreamError;
use super::fields::ToolFields;
use super::sessions::Caller;
use crate::wire::{Divert, Diverted, Forward, RawSender};
use asked::Turns;
pub(crate) use asked::{Answerer, InputTurn, Modern, Wants};

mod asked;
mod legacy_tasks;
mod params;
pub use params::with_traceparent;
mod reply;

pub use reply::RawReply;

/// How long a failed call waits for the connection's watcher to record why it ended, and
/// a cancellation notice for a server's queue to take it.
pub(super) const SETTLE: Duration = Duration::from_secs(1);
/// What every raw id starts with.
const PREFIX: &str = "planmux-raw-";
/// How far from a message's end its id is looked for first.
const ID_AT_END: usize = 128;

/// Where the messages of calls for the host's line go: the passthrough. Called where the
/// server's messages are read, in wire order; what it returns is written before the next
/// one is read. `key` is what the call was sent with (the host's id), `id` its raw id.
pub trait RouteSink: Send + Sync {
    /// The server answered the call, as `reply` (from server `server`).
    fn answered(&self, key: &str, id: &str, server: &str, reply: RawReply) -> Option<Forward>;
    /// The server sent progress for the call: its line, the token's bytes at `token`.
    fn progress(&self, key: &str, id: &str, line: Vec<u8>, token: Range<usize>) -> Option<Forward>;
    /// The call ended without an answer.
    fn failed(&self, key: &str, id: &str, error: DownstreamError) -> Option<Forward>;
    /// Server `server` sent a log message (`line`) while the host's calls were in flight:
    /// relayed here, in wire order, it cannot be overtaken by their answers. `Left` leaves
    /// it to rmcp's relay.
    fn log(&self, server: &str, line: &mut Vec<u8>) -> Diverted;
    /// Whom call `key` is for, if this sink knows: where its server's questions go.
    fn caller(&self, _key: &str) -> Option<Caller> {
        None
    }
}

/// Who hears how a call ended.
pub enum Sink {
    /// The host's line: answer, progress and failure made into the host's messages.
    Host { key: String, to: Arc<dyn RouteSink> },
    /// A caller awaiting the answer ([`LineCall::answer`]); its progress stays with rmcp.
    Await(oneshot::Sender<Result<RawReply, DownstreamError>>),
}

impl Sink {
    /// A sink for a caller that awaits, and where its answer arrives.
    pub fn awaiting() -> (Self, oneshot::Receiver<Result<RawReply, DownstreamError>>) {
        let (tx, rx) = oneshot::channel();
        (Self::Await(tx), rx)
    }

    fn answered(self, id: &str, server: &str, reply: RawReply) -> Diverted {
        match self {
            Self::Host { key, to } => diverted(to.answered(&key, id, server, reply)),
            Self::Await(tx) => {
                let _ = tx.send(Ok(reply));
                Diverted::Taken
            }
        }
    }

    /// Whom the call is for, if its sink knows.
    fn caller(&self) -> Option<Caller> {
        match self {
            Self::Host { key, to } => to.caller(key),
            Self::Await(_) => None,
        }
    }

    /// The call ended without an answer: the host's message saying so, to be written.
    fn failed(self, id: &str, error: DownstreamError) -> Option<Forward> {
        match self {
            Self::Host { key, to } => to.failed(&key, id, error),
            Self::Await(tx) => {
                let _ = tx.send(Err(error));
                None
            }
        }
    }
}

fn diverted(forward: Option<Forward>) -> Diverted {
    forward.map_or(Diverted::Taken, Diverted::Forward)
}

/// A call waiting for its answer.
struct Waiter {
    sink: Sink,
    /// The tool's name on its server, for errors.
    tool: String,
    started: Instant,
    deadline: Instant,
    /// Whether its request has left: until then its sender owns its failures (and may send
    /// it again on a new connection), so the sweeper and the connection's end leave it.
    written: bool,
    /// A 2026-07-28 server's calls: the request as sent and the server's questions so far
    /// (`asked.rs`).
    turns: Option<Turns>,
}

impl Waiter {
    /// Its call on `server` ended, an error when `failed` says so (asked only when
    /// metrics are on).
    fn ended(&self, server: &str, failed: impl FnOnce() -> bool) {
        if crate::metrics::on() {
            crate::metrics::call_ended(server, &self.tool, self.started.elapsed(), failed());
        }
    }
}

/// The calls waiting, by raw id.
#[derive(Default)]
struct Waiting {
    calls: HashMap<String, Waiter>,
    /// Whether the sweeper runs.
    sweeping: bool,
}

/// The calls in flight on one line connection.
pub(crate) struct CallTable {
    /// The server's name, for errors.
    pub(super) server: String,
    /// The server's `call_timeout_ms`: every call's time limit, counted from its start.
    pub(super) timeout: Duration,
    writer: RawSender,
    waiting: Mutex<Waiting>,
    next: AtomicU64,
    /// Finds [`PREFIX`] in a message, built once (every message of the server is scanned).
    prefix: memchr::memmem::Finder<'static>,
    /// Finds a log message's method.
    log: memchr::memmem::Finder<'static>,
    /// Where the sweeper and bounded notices run (the downstreams' tracker).
    tracker: TaskTracker,
    /// Cancelled when the connection ended: nothing waits on it after that.
    ended: CancellationToken,
    /// For a server that speaks 2026-07-28: the `_meta` its every request carries (the
    /// protocol version, planmux's client info and capabilities), and who answers its
    /// requests for input; set once after the handshake (`asked.rs`).
    modern: std::sync::OnceLock<Modern>,
    /// The server's tools' fields: which run only as tasks (`legacy_tasks.rs`).
    fields: Arc<ToolFields>,
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
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
    #[serde(borrow)]
    params: Option<ProgressParams<'a>>,
}

#[derive(Deserialize)]
struct ProgressParams<'a> {
    #[serde(borrow, rename = "progressToken")]
    token: Option<&'a RawValue>,
}

impl CallTable {
    /// The calls to server `server`, written with `writer`, each limited to `timeout`;
    /// the sweeper runs on `tracker`.
    pub(crate) fn new(
        writer: RawSender,
        server: &str,
        timeout: Duration,
        tracker: &TaskTracker,
        fields: Arc<ToolFields>,
    ) -> Arc<Self> {
        Arc::new(Self {
            server: server.to_owned(),
            timeout,
            writer,
            waiting: Mutex::default(),
            next: AtomicU64::new(1),
            prefix: memchr::memmem::Finder::new(PREFIX.as_bytes()),
            log: memchr::memmem::Finder::new(b"notifications/message"),
            tracker: tracker.clone(),
            ended: CancellationToken::new(),
            modern: std::sync::OnceLock::new(),
            fields,
        })
    }

    fn waiting(&self) -> MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a call of `tool` (its name on the server) for `sink`, and makes its
    /// request: `request(id, tool)` is the line with raw id `id` and the tool's name (both
    /// as JSON strings). Waiting starts before the request is written: the answer may
    /// come at once. The request is the caller's to write ([`Self::try_write`],
    /// [`Self::write`]), then [`LineCall::sent`].
    pub(crate) fn start(
        self: &Arc<Self>,
        tool: &str,
        sink: Sink,
        request: impl FnOnce(&str, &str) -> Vec<u8>,
    ) -> (LineCall, Vec<u8>) {
        // Not `format!`: this is on every call's path, and the formatting machinery is a
        // good share of the code such a call runs (BENCHMARKS.md §1).
        let id = [
            PREFIX,
            &self.next.fetch_add(1, Ordering::Relaxed).to_string(),
        ]
        .concat();
        // Raw ids need no escaping.
        let quoted = serde_json::to_string(tool).unwrap_or_default();
        let mut bytes = request(&["\"", id.as_str(), "\""].concat(), &quoted);
        let turns = match self.modern.get() {
            Some(modern) => {
                bytes = asked::with_meta(std::mem::take(&mut bytes), modern);
                Some(Turns::new(&bytes))
            }
            None => self
                .as_task(tool, &mut bytes)
                .map(|task| Turns::following(&bytes, task)),
        };
        let started = Instant::now();
        let waiter = Waiter {
            sink,
            tool: tool.to_owned(),
            started,
            deadline: started + self.timeout,
            written: false,
            turns,
        };
        self.waiting().calls.insert(id.clone(), waiter);
        let call = LineCall {
            table: self.clone(),
            id,
            tool: tool.to_owned(),
        };
        (call, bytes)
    }

    /// Queues `bytes` for the server if its queue has room, without waiting.
    pub(crate) fn try_write(&self, bytes: Vec<u8>) -> bool {
        self.writer.try_send(bytes).is_ok()
    }

    /// Writes `bytes` to the server, waiting for room.
    pub(crate) async fn write(&self, bytes: Vec<u8>) -> std::io::Result<()> {
        self.writer.send(bytes).await
    }

    /// The hook for the connection's transport: takes the answers to the table's calls,
    /// and the progress of the host's.
    pub(crate) fn divert(self: &Arc<Self>) -> Divert {
        let table = Arc::downgrade(self);
        Arc::new(move |line: &mut Vec<u8>| {
            let Some(table) = table.upgrade() else {
                return Diverted::Left;
            };
            // Most messages are not ours: a scan, not a parse, tells. A large answer has
            // its id at one end (the TypeScript SDK writes it after the result): the end is
            // looked at first, so the scan does not cross the result.
            let end = line.len().saturating_sub(ID_AT_END);
            let ours =
                table.prefix.find(&line[end..]).is_some() || table.prefix.find(line).is_some();
            // A log message is the host's only while its calls are in flight: `take` asks.
            if !ours && table.log.find(line).is_none() {
                return Diverted::Left;
            }
            table.take(line)
        })
    }

    /// Hands a response whose id is one of the table's to its sink, with its line (moved
    /// out of `line`); and a host call's progress to the host.
    fn take(self: &Arc<Self>, line: &mut Vec<u8>) -> Diverted {
        let Ok(envelope) = serde_json::from_slice::<Envelope>(line) else {
            return Diverted::Left;
        };
        let start = line.as_ptr() as usize;
        let span = |raw: &RawValue| {
            let from = raw.get().as_ptr() as usize - start;
            from..from + raw.get().len()
        };
        if let Some(method) = &envelope.method {
            if method == "notifications/message" {
                return match self.host_sink() {
                    Some(to) => to.log(&self.server, line),
                    None => Diverted::Left,
                };
            }
            let token = envelope.params.as_ref().and_then(|p| p.token);
            let Some(token) = token.filter(|_| method == "notifications/progress") else {
                return Diverted::Left;
            };
            let Ok(id) = serde_json::from_str::<Cow<str>>(token.get()) else {
                return Diverted::Left;
            };
            let host = match self.waiting().calls.get(id.as_ref()).map(|w| &w.sink) {
                Some(Sink::Host { key, to }) => (key.clone(), to.clone()),
                // An awaiting caller's progress is rmcp's to drop.
                _ => return Diverted::Left,
            };
            let (key, to, id, token) = (host.0, host.1, id.into_owned(), span(token));
            return diverted(to.progress(&key, &id, std::mem::take(line), token));
        }
        let Some(id) = envelope.id.map(Cow::into_owned) else {
            return Diverted::Left;
        };
        let turned = match (envelope.result, envelope.error) {
            (Some(result), _) => {
                let result = result.get().as_bytes();
                self.asks(&id, result) || self.tasked(&id, result)
            }
            (None, Some(error)) => self.wants_task(&id, error.get().as_bytes()),
            (None, None) => false,
        };
        if turned {
            return Diverted::Taken;
        }
        let Some(mut waiter) = self.waiting().calls.remove(&id) else {
            // A call that gave up meanwhile drops the answer, as rmcp would.
            return if id.starts_with(PREFIX) {
                Diverted::Taken
            } else {
                Diverted::Left
            };
        };
        if let Some(turns) = waiter.turns.as_mut() {
            // Its task's result (or error) came: the task is over.
            turns.ended();
        }
        let body = envelope.result.or(envelope.error).map(span);
        let is_error = envelope.result.is_none() && envelope.error.is_some();
        waiter.ended(&self.server, || {
            is_error || reply::marked_error(envelope.result)
        });
        let reply = RawReply {
            body,
            is_error,
            line: std::mem::take(line),
        };
        waiter.sink.answered(&id, &self.server, reply)
    }

    /// Where the host's calls in flight here are answered, if any is.
    fn host_sink(&self) -> Option<Arc<dyn RouteSink>> {
        self.waiting()
            .calls
            .values()
            .find_map(|waiter| match &waiter.sink {
                Sink::Host { to, .. } => Some(to.clone()),
                Sink::Await(_) => None,
            })
    }

    /// Takes the written calls `which` picks out of the table.
    fn take_written(&self, which: impl Fn(&Waiter) -> bool) -> Vec<(String, Waiter)> {
        self.waiting()
            .calls
            .extract_if(|_, waiter| waiter.written && which(waiter))
            .collect()
    }

    /// The connection ended: its calls end with `error` (a call not written yet is its
    /// sender's, which sends it again or fails it).
    pub(crate) async fn end(&self, error: impl Fn() -> DownstreamError) {
        self.ended.cancel();
        for (id, waiter) in self.take_written(|_| true) {
            waiter.ended(&self.server, || true);
            if let Some(forward) = waiter.sink.failed(&id, error()) {
                let _ = forward.send().await;
            }
        }
    }

    /// Tells the server that call `id` is cancelled.
    fn notify_cancelled(&self, id: &str, reason: Option<&str>) {
        self.send_soon(cancelled(id, reason));
    }

    /// Writes `notice`, bounded (the server may have stopped reading): at once when its
    /// queue has room, else on the tracker.
    fn send_soon(&self, notice: Vec<u8>) {
        if let Err(notice) = self.writer.try_send(notice) {
            let writer = self.writer.clone();
            self.tracker.spawn(async move {
                let _ = tokio::time::timeout(SETTLE, writer.send(notice)).await;
            });
        }
    }
}

/// A call in the table, until its end reaches its sink.
pub struct LineCall {
    table: Arc<CallTable>,
    id: String,
    /// The tool's name on its server.
    tool: String,
}

impl LineCall {
    /// Its raw id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The error for the call, cancelled.
    pub fn cancelled(&self) -> DownstreamError {
        DownstreamError::Cancelled {
            server: self.table.server.clone(),
            tool: self.tool.clone(),
        }
    }

    /// Its request has left: from now the table ends it on time and with the connection.
    /// `Err` with its sink when the connection ended meanwhile (nothing will answer it).
    pub(crate) fn sent(&self) -> Result<(), Sink> {
        let mut waiting = self.table.waiting();
        if self.table.ended.is_cancelled() {
            return match waiting.calls.remove(&self.id) {
                Some(waiter) => Err(waiter.sink),
                None => Ok(()),
            };
        }
        if let Some(waiter) = waiting.calls.get_mut(&self.id) {
            waiter.written = true;
            if !std::mem::replace(&mut waiting.sweeping, true) {
                let table = &self.table;
                table
                    .tracker
                    .spawn(sweep(Arc::downgrade(table), table.ended.clone()));
            }
        }
        Ok(())
    }

    /// Takes it out of the table without telling the server (its request never left),
    /// giving back its sink; `None` when it has ended already (its sink was told).
    pub(crate) fn forget(&self) -> Option<Sink> {
        self.table
            .waiting()
            .calls
            .remove(&self.id)
            .map(|waiter| waiter.sink)
    }

    /// Stops waiting for the answer (it is dropped when it comes) and tells the server
    /// why (`reason`, if any), if the call was still waiting. Whether it was.
    pub fn cancel(&self, reason: Option<&str>) -> bool {
        let waiter = self.table.waiting().calls.remove(&self.id);
        let waiting = waiter
            .inspect(|w| w.ended(&self.table.server, || true))
            .is_some();
        if waiting {
            self.table.notify_cancelled(&self.id, reason);
        }
        waiting
    }

    /// An awaiting caller's answer from `answer` (its [`Sink::awaiting`] half), or the
    /// call cancelled (the server told) when `cancel` fires first.
    pub(crate) async fn answer(
        self,
        answer: oneshot::Receiver<Result<RawReply, DownstreamError>>,
        cancel: &CancellationToken,
    ) -> Result<RawReply, DownstreamError> {
        tokio::select! {
            answer = answer => answer.unwrap_or_else(|_| Err(DownstreamError::Exited {
                server: self.table.server.clone(),
                detail: "the connection closed".into(),
            })),
            () = cancel.cancelled() => {
                self.cancel(Some("cancelled by the client"));
                Err(self.cancelled())
            }
        }
    }
}

/// The server's `notifications/cancelled` for raw id `id`, with `reason` if any.
fn cancelled(id: &str, reason: Option<&str>) -> Vec<u8> {
    let mut params = json!({"requestId": id});
    if let Some(reason) = reason {
        params["reason"] = json!(reason);
    }
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
        .to_string()
        .into_bytes()
}

/// Ends the calls that outlive their deadline, until none is left or the connection ends.
/// All a connection's calls have the same time limit, so the earliest deadline is the
/// oldest call's: one timer for the whole table.
async fn sweep(table: Weak<CallTable>, ended: CancellationToken) {
    loop {
        let next = {
            let Some(table) = table.upgrade() else {
                return;
            };
            let mut waiting = table.waiting();
            let written = waiting.calls.values().filter(|w| w.written);
            match written.map(|w| w.deadline).min() {
                Some(next) => next,
                None => {
                    waiting.sweeping = false;
                    return;
                }
            }
        };
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = ended.cancelled() => return,
        }
        let Some(table) = table.upgrade() else {
            return;
        };
        let now = Instant::now();
        for (id, waiter) in table.take_written(|waiter| waiter.deadline <= now) {
            // The server is told, then the caller.
            let notice = table
                .writer
                .send(cancelled(&id, Some("timed out in planmux")));
            let _ = tokio::time::timeout(SETTLE, notice).await;
            let error = DownstreamError::Timeout {
                server: table.server.clone(),
                tool: waiter.tool.clone(),
                after: table.timeout,
            };
            waiter.ended(&table.server, || true);
            if let Some(forward) = waiter.sink.failed(&id, error) {
                let _ = forward.send().await;
            }
        }
    }
}

#[cfg(test)]
mod tests;
