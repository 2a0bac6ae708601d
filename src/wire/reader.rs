//! A stream's reading end: lines read within the limits, each message taken by the
//! divert hook, answered when it cannot be delivered, or left for rmcp.
//!
//! The reader runs apart from rmcp, started by the transport's first `receive`: a
//! message the hook takes (a routed call, its answer) is handled as soon as it is read,
//! without a pass through rmcp's service loop, which polls its channels and its
//! cancellation on every wake-up. A pipe or file ([`Blocking`]) is read on a thread of
//! its own with blocking calls, as a byte copier reads: a message wakes that thread
//! alone, where a stream polled by the runtime wakes its poller, then the runtime, then
//! the reading task (BENCHMARKS.md §1). Any other stream is read on a task.
//!
//! The reader decodes a message only once rmcp has asked for the next one (its turn), so
//! rmcp has handled each message left for it, and seen what it carries, before the next
//! is taken: a server's log line is routed to the call it came during before that call's
//! answer ends it, as when rmcp read the stream itself.

use std::fs::File;
use std::io::{self, Read};
use std::marker::PhantomData;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, NumberOrString};
use rmcp::service::{RxJsonRpcMessage, ServiceRole};
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader, ReadBuf};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::{
    Divert, Diverted, Envelope, Forward, HEAD_BYTES, Inbound, Kind, Limits, REFUSED, RawSender,
    SPARE, nesting, parse, trim,
};

/// Bytes read from a stream at a time.
const READ_BUFFER: usize = 64 * 1024;
/// Bytes read from a [`Blocking`] pipe at a time: as much as a widened pipe holds, so a
/// large answer crosses in few reads (each wakes the thread and contends for the pipe
/// with its writer). Its pages are touched only as far as reads fill them.
const PIPE_READ_BUFFER: usize = 1024 * 1024;

/// A file or pipe, read with blocking calls on its reader's own thread (and only there:
/// polling it elsewhere would block whoever polls).
pub struct Blocking {
    file: File,
}

impl Blocking {
    pub(super) fn new(file: File) -> Self {
        Self { file }
    }
}

impl AsyncRead for Blocking {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let file = &self.file;
        let read = loop {
            match (&mut &*file).read(buf.initialize_unfilled()) {
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                // Made non-blocking by someone else (the descriptor may be shared): wait
                // for input as a blocking read would.
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLIN)];
                    if let Err(error) = poll(&mut fds, PollTimeout::NONE)
                        && error != nix::errno::Errno::EINTR
                    {
                        break Err(error.into());
                    }
                }
                read => break read,
            }
        };
        Poll::Ready(read.map(|n| buf.advance(n)))
    }
}

/// Whether `In` is read with blocking calls.
fn is_blocking<In: 'static>() -> bool {
    std::any::TypeId::of::<In>() == std::any::TypeId::of::<Blocking>()
}

/// The reading end of a line transport.
pub(super) struct Reader<R: ServiceRole, In> {
    read: BufReader<In>,
    line: Vec<u8>,
    /// Bytes of the oversized line being skipped, once it passed the limit.
    skipping: Option<usize>,
    limits: Limits,
    /// Who is at the other end, for messages ("the host", "server 'fs'").
    peer: String,
    /// This stream's writing end, for replies.
    own: RawSender,
    /// Serving: notifications before the first request are dropped.
    pub(super) awaiting_request: bool,
    /// Cancelled when the peer closes its side.
    eof: CancellationToken,
    pub(super) inbound: Option<Inbound>,
    pub(super) divert: Option<Divert>,
    _role: PhantomData<fn() -> R>,
}

/// What a started reader leaves for rmcp, as the transport takes it.
pub(super) struct Inbox<R: ServiceRole> {
    messages: mpsc::Receiver<RxJsonRpcMessage<R>>,
    /// One permit: the reader's turn to decode a message.
    turn: Arc<Semaphore>,
    /// Whether a message was handed out: asking for the next one gives the turn back.
    handed: bool,
    /// The reader's task, stopped with the transport (a thread stops at its next line,
    /// or at the stream's end).
    _task: Option<AbortOnDropHandle<()>>,
}

impl<R: ServiceRole> Inbox<R> {
    /// The next message left for rmcp; `None` once the reader stopped.
    pub(super) async fn next(&mut self) -> Option<RxJsonRpcMessage<R>> {
        if std::mem::take(&mut self.handed) {
            self.turn.add_permits(1);
        }
        let message = self.messages.recv().await;
        self.handed = message.is_some();
        message
    }
}

impl<R: ServiceRole> Drop for Inbox<R> {
    fn drop(&mut self) {
        self.turn.close();
    }
}

impl<R: ServiceRole, In: AsyncRead + Send + Unpin + 'static> Reader<R, In> {
    /// Reads `read`, whose peer is `peer`, replying on `own` and cancelling `eof` at its
    /// end.
    pub(super) fn new(
        read: In,
        limits: Limits,
        peer: String,
        own: RawSender,
        eof: CancellationToken,
    ) -> Self {
        Self {
            // Large enough that a big answer is read in few calls.
            read: BufReader::with_capacity(
                match is_blocking::<In>() {
                    true => PIPE_READ_BUFFER,
                    false => READ_BUFFER,
                },
                read,
            ),
            line: Vec::new(),
            skipping: None,
            limits,
            peer,
            own,
            awaiting_request: false,
            eof,
            inbound: None,
            divert: None,
            _role: PhantomData,
        }
    }

    /// Starts reading: on a thread of its own for a [`Blocking`] stream, else on a task.
    /// Must be called within the runtime.
    pub(super) fn start(self: Box<Self>) -> Inbox<R> {
        let (left, messages) = mpsc::channel(1);
        let turn = Arc::new(Semaphore::new(1));
        let peer = self.peer.clone();
        let run = self.run(left, turn.clone());
        let task = if is_blocking::<In>() {
            // The runtime's handle lets the hooks spawn tasks and wake them from there.
            let runtime = tokio::runtime::Handle::current();
            let started = std::thread::Builder::new()
                .name("planmux-read".into())
                .spawn(move || runtime.block_on(run));
            if let Err(error) = started {
                // The transport ends as if the peer had hung up.
                tracing::error!(%peer, %error, "cannot start a thread to read from it");
            }
            None
        } else {
            Some(AbortOnDropHandle::new(tokio::spawn(run)))
        };
        Inbox {
            messages,
            turn,
            handed: false,
            _task: task,
        }
    }

    /// Reads messages until the stream ends, its own writer fails, or the transport is
    /// gone: what the hook takes is handled here, the rest is left on `rmcp`.
    async fn run(
        mut self: Box<Self>,
        rmcp: mpsc::Sender<RxJsonRpcMessage<R>>,
        turn: Arc<Semaphore>,
    ) {
        loop {
            let Some(line) = self.read_line().await else {
                self.eof.cancel();
                return;
            };
            let Ok(permit) = turn.acquire().await else {
                return;
            };
            let decoded = self.decode(line);
            self.line.clear();
            if self.line.capacity() > HEAD_BYTES * 4 {
                SPARE.keep(std::mem::take(&mut self.line));
            }
            let forward = match decoded {
                Decoded::Message(message) => {
                    // The turn comes back when rmcp asks for the next message.
                    permit.forget();
                    if rmcp.try_send(message).is_err() {
                        return;
                    }
                    continue;
                }
                Decoded::Forward(forward) => forward,
                Decoded::Skip => continue,
            };
            drop(permit);
            // Written before the next message is read: at once if the stream takes it,
            // else queued, waiting while that stream's queue is full.
            let own = forward.to.same_stream(&self.own);
            if forward.send().await.is_err() && own {
                // This stream's own writer failed: the session is over.
                return;
            }
        }
    }

    /// Reads one line into `self.line`, never holding more than the limit.
    async fn read_line(&mut self) -> Option<Line> {
        loop {
            let available = match self.read.fill_buf().await {
                Ok(available) => available,
                Err(error) => {
                    tracing::warn!(peer = %self.peer, %error, "read failed");
                    return None;
                }
            };
            if available.is_empty() {
                return None;
            }
            let newline = memchr::memchr(b'\n', available);
            let take = newline.map_or(available.len(), |at| at + 1);
            if newline.is_none() && self.line.is_empty() && self.skipping.is_none() {
                // A line longer than what came: a large message may be on its way.
                if let Some(spare) = SPARE.take() {
                    self.line = spare;
                }
            }
            let mut done = None;
            match self.skipping.as_mut() {
                Some(skipped) => {
                    *skipped += take;
                    if newline.is_some() {
                        done = Some(Line::Oversized(*skipped));
                    }
                }
                None if self.line.len() + take > self.limits.max_message_bytes => {
                    // Keep the head (the id is there), skip the rest.
                    let room = HEAD_BYTES.saturating_sub(self.line.len()).min(take);
                    self.line.extend_from_slice(&available[..room]);
                    let size = self.line.len() - room + take;
                    if newline.is_some() {
                        done = Some(Line::Oversized(size));
                    } else {
                        self.skipping = Some(size);
                    }
                }
                None => {
                    self.line.extend_from_slice(&available[..take]);
                    if newline.is_some() {
                        done = Some(Line::Whole);
                    }
                }
            }
            self.read.consume(take);
            if let Some(line) = done {
                self.skipping = None;
                return Some(line);
            }
        }
    }

    /// What to do with the line in `self.line`.
    fn decode(&mut self, line: Line) -> Decoded<R> {
        trim(&mut self.line);
        if self.line.is_empty() {
            return Decoded::Skip;
        }
        let problem = match line {
            Line::Oversized(size) => Problem::TooLarge(size),
            Line::Whole => match nesting(&self.line) {
                depth if depth > self.limits.max_nesting => Problem::TooDeep(depth),
                _ if let Some(divert) = &self.divert
                    && let diverted @ (Diverted::Taken | Diverted::Forward(_)) =
                        divert(&mut self.line) =>
                {
                    return match diverted {
                        Diverted::Forward(forward) => Decoded::Forward(forward),
                        _ => Decoded::Skip,
                    };
                }
                _ => match parse::<R>(&self.line) {
                    Ok(message) => {
                        if let Some(hook) = &self.inbound {
                            hook(&self.line);
                        }
                        return self.admit(message);
                    }
                    Err(error) => Problem::Invalid(error),
                },
            },
        };
        if self.line.first() == Some(&b'[') {
            return self.reject_batch(problem);
        }
        self.reject(Envelope::scan(&self.line), problem)
    }

    /// Passes a parsed message on, unless it is a notification before the first request.
    fn admit(&mut self, message: RxJsonRpcMessage<R>) -> Decoded<R> {
        if self.awaiting_request {
            if !matches!(message, JsonRpcMessage::Request(_)) {
                tracing::debug!(peer = %self.peer, "ignoring a message before the first request");
                return Decoded::Skip;
            }
            self.awaiting_request = false;
        }
        Decoded::Message(message)
    }

    /// `bytes` for this stream's peer.
    fn reply(&self, bytes: Vec<u8>) -> Decoded<R> {
        Decoded::Forward(Forward {
            to: self.own.clone(),
            bytes,
            from: 0,
        })
    }

    /// The answer to a message that cannot be delivered: an error reply to a request, an
    /// error response in place of a response, or (with no readable id) a log line.
    fn reject(&self, envelope: Envelope, problem: Problem) -> Decoded<R> {
        let message = problem.describe(&self.peer, &self.limits);
        if envelope.kind == Kind::BadId {
            // JSON-RPC: when a request's id cannot be read, the error's id is null.
            tracing::warn!(peer = %self.peer, "refused a request without a readable id: {message}");
            let reply = json!({"jsonrpc": "2.0", "id": null, "error": {
                "code": ErrorCode::INVALID_REQUEST.0,
                "message": format!("{message} (an id is a string or an integer)")}});
            return self.reply(reply.to_string().into_bytes());
        }
        let Some(id) = envelope.id else {
            tracing::warn!(peer = %self.peer, "dropped a message without a readable id: {message}");
            return Decoded::Skip;
        };
        // An id alone, with neither a method nor an answer: from a server, most likely a
        // broken answer to planmux (its call fails at once); from a host, a request
        // that is not one (it is answered).
        let kind = match envelope.kind {
            Kind::Bare if R::IS_CLIENT => Kind::Response,
            Kind::Bare => Kind::Request,
            kind => kind,
        };
        match kind {
            Kind::Request => {
                tracing::warn!(peer = %self.peer, %id, "refused a request: {message}");
                let error = ErrorData::new(problem.code(), message, None);
                let reply = JsonRpcError::new(Some(id), error);
                match serde_json::to_vec(&reply) {
                    Ok(bytes) => self.reply(bytes),
                    Err(_) => Decoded::Skip,
                }
            }
            Kind::Response => {
                tracing::warn!(peer = %self.peer, %id, "an answer could not be read: {message}");
                let refused = json!({REFUSED: true});
                let error = ErrorData::new(ErrorCode::INTERNAL_ERROR, message, Some(refused));
                let response = JsonRpcError::new(Some(id), error);
                // An answer to a raw call goes to that call, like any other answer of its.
                let diverted = match (&self.divert, serde_json::to_vec(&response)) {
                    (Some(divert), Ok(mut bytes)) => divert(&mut bytes),
                    _ => Diverted::Left,
                };
                match diverted {
                    Diverted::Left => Decoded::Message(JsonRpcMessage::Error(response)),
                    Diverted::Taken => Decoded::Skip,
                    Diverted::Forward(forward) => Decoded::Forward(forward),
                }
            }
            Kind::Notification | Kind::Bare | Kind::BadId => Decoded::Skip,
        }
    }

    /// A JSON-RPC batch (an array of messages), which MCP dropped in 2025-06-18: each
    /// request in it with a readable id is answered with an error saying so.
    fn reject_batch(&self, problem: Problem) -> Decoded<R> {
        let Ok(batch) = serde_json::from_slice::<Batch>(&self.line) else {
            return self.reject(Envelope::scan(&self.line), problem);
        };
        let message = format!(
            "{} sent a JSON-RPC batch; MCP has no batches since 2025-06-18: send each message on its own line",
            self.peer
        );
        let refuse = |id: Option<NumberOrString>, message: String| {
            let error = ErrorData::new(ErrorCode::INVALID_REQUEST, message, None);
            serde_json::to_string(&JsonRpcError::new(id, error)).unwrap_or_default()
        };
        let mut replies: Vec<String> = batch
            .ids
            .into_iter()
            .map(|id| refuse(Some(id), message.clone()))
            .collect();
        if batch.more > 0 {
            // Bounded work: a batch of millions is not answered a million times.
            let more = format!(
                "{message} ({} more requests in the batch were not answered)",
                batch.more
            );
            replies.push(
                json!({"jsonrpc": "2.0", "id": null, "error": {
                "code": ErrorCode::INVALID_REQUEST.0, "message": more}})
                .to_string(),
            );
        }
        tracing::warn!(peer = %self.peer, requests = replies.len(), "refused a batch");
        if replies.is_empty() {
            return Decoded::Skip;
        }
        // One frame, one line per answer: the writer ends it with the last newline.
        self.reply(replies.join("\n").into_bytes())
    }
}

/// Requests of a batch answered one by one; the rest are counted.
const MAX_BATCH_ANSWERS: usize = 64;

/// The requests of a JSON-RPC batch: the ids of the first [`MAX_BATCH_ANSWERS`] with a
/// method and a readable id, and how many more there were. Read in one pass, keeping no
/// more than that.
struct Batch {
    ids: Vec<NumberOrString>,
    more: usize,
}

impl<'de> Deserialize<'de> for Batch {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// One member: a request-like object, or anything else (skipped).
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Member {
            Request {
                id: NumberOrString,
                #[allow(dead_code)]
                method: serde::de::IgnoredAny,
            },
            Other(serde::de::IgnoredAny),
        }
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = Batch;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON-RPC batch")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Batch, A::Error> {
                let mut batch = Batch {
                    ids: Vec::new(),
                    more: 0,
                };
                while let Some(member) = seq.next_element::<Member>()? {
                    if let Member::Request { id, .. } = member {
                        if batch.ids.len() < MAX_BATCH_ANSWERS {
                            batch.ids.push(id);
                        } else {
                            batch.more += 1;
                        }
                    }
                }
                Ok(batch)
            }
        }
        deserializer.deserialize_seq(Members)
    }
}

/// How a line read ended.
enum Line {
    /// A whole line is in the buffer.
    Whole,
    /// The line (this many bytes) was over the limit; only its head is in the buffer.
    Oversized(usize),
}

enum Decoded<R: ServiceRole> {
    Message(RxJsonRpcMessage<R>),
    /// To write (on this stream or another) before reading on.
    Forward(Forward),
    Skip,
}

/// Why a message could not be delivered.
enum Problem {
    TooLarge(usize),
    TooDeep(usize),
    Invalid(serde_json::Error),
}

impl Problem {
    fn describe(&self, peer: &str, limits: &Limits) -> String {
        match self {
            Problem::TooLarge(bytes) => format!(
                "a message of {} from {peer} exceeds max_message_bytes ({})",
                size(*bytes),
                size(limits.max_message_bytes)
            ),
            Problem::TooDeep(depth) => format!(
                "a message from {peer} is nested too deeply ({depth} levels; max_nesting is {})",
                limits.max_nesting
            ),
            Problem::Invalid(error) => {
                // serde names a broken `\u` escape by where it stopped reading.
                let text = error.to_string();
                let hint = if text.contains("hex escape") || text.contains("surrogate") {
                    " (a \\uD800-\\uDFFF escape must be half of a surrogate pair: \\uD83D\\uDE00, not alone)"
                } else {
                    ""
                };
                format!("a message from {peer} is not valid: {text}{hint}")
            }
        }
    }

    fn code(&self) -> ErrorCode {
        match self {
            Problem::Invalid(error) if error.is_syntax() || error.is_eof() => {
                ErrorCode::PARSE_ERROR
            }
            _ => ErrorCode::INVALID_REQUEST,
        }
    }
}

/// A size for people: `9.9 KiB`, `18.0 MiB`.
fn size(bytes: usize) -> String {
    let kib = bytes as f64 / 1024.0;
    if kib < 1024.0 {
        format!("{kib:.1} KiB")
    } else {
        format!("{:.1} MiB", kib / 1024.0)
    }
}
