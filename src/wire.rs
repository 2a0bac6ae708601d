//! JSON-RPC over a newline-delimited byte stream (stdio, a child's pipes, an in-memory
//! pipe), with limits that answer instead of dropping.
//!
//! rmcp's own line transport drops a line over 16 MiB or nested deeper than serde's 128
//! levels without a word: a host's request then never gets an answer, and a downstream's
//! answer never reaches the call waiting for it, which times out a minute later blaming
//! the server. This transport reads lines with a size cap (`max_message_bytes`) and a
//! nesting cap (`max_nesting`), and when it cannot deliver a message whose id it can read,
//! it says why at once: a request gets an error reply, and a response becomes an error
//! response for the call that waits for it.
//!
//! It also drops notifications that arrive before the peer's first request when serving
//! (a host that sends `notifications/initialized` too early must not end the session).

use std::io;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, NumberOrString};
use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

pub use writer::RawSender;
use writer::{Frame, Outlet};

mod writer;

/// Largest message accepted by default: well above the 16 MiB at which rmcp gives up, so
/// a tool that returns a 20 MB file (which arrives twice, as text and as structured
/// content) still gets through.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// Deepest nesting accepted by default: far beyond any real tool result (serde's own
/// limit is 128, which a long plan chain reaches), shallow enough for the parser's stack.
pub const DEFAULT_MAX_NESTING: usize = 512;
/// How much of an oversized line is kept to find its id: ids come first in practice.
const HEAD_BYTES: usize = 64 * 1024;
/// Bytes read from the stream at a time.
const READ_BUFFER: usize = 64 * 1024;
/// The largest line buffer kept for the next large message ([`Spare`]).
const SPARE_MAX: usize = 32 * 1024 * 1024;

/// The two limits on one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest line, in bytes.
    pub max_message_bytes: usize,
    /// Deepest nesting of arrays and objects.
    pub max_nesting: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_nesting: DEFAULT_MAX_NESTING,
        }
    }
}

/// The key of the `data` of an error planmux made in place of a peer's answer it could
/// not read (too large, too deep, not JSON-RPC): the peer did not send that error.
pub const REFUSED: &str = "planmux/refusedAnswer";

/// Sees the text of each message as it arrives, before it is decoded: what the protocol
/// types leave out is still there.
pub type Inbound = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// May take a message off the stream before it is decoded (rmcp never sees a message
/// taken): how calls forwarded as raw JSON get their messages. It gets the message's line
/// without its newline, and may keep the buffer itself (`std::mem::take`), so a large
/// message is moved, not copied.
pub type Divert = Arc<dyn Fn(&mut Vec<u8>) -> Diverted + Send + Sync>;

/// What a [`Divert`] hook did with a message.
pub enum Diverted {
    /// Left it for rmcp.
    Left,
    /// Took it.
    Taken,
    /// Took it, and made this message of it, written before the next one is read: in
    /// wire order, and held back while the other stream's queue is full.
    Forward(Forward),
}

impl Diverted {
    /// Whether the message was taken.
    pub fn taken(&self) -> bool {
        !matches!(self, Self::Left)
    }
}

/// A message for a stream: `bytes[from..]`, without its newline (one built in place in a
/// larger buffer is not copied).
pub struct Forward {
    pub to: RawSender,
    pub bytes: Vec<u8>,
    pub from: usize,
}

impl Forward {
    /// Writes it (at once, or queued for the stream's writer).
    pub async fn send(self) -> io::Result<()> {
        self.to.send_from(self.bytes, self.from).await
    }
}

/// May encode an outgoing message itself: its bytes, or `None` for the usual encoding.
pub type Outbound<R> = Arc<dyn Fn(&TxJsonRpcMessage<R>) -> Option<Vec<u8>> + Send + Sync>;

/// A bounded newline-delimited JSON-RPC transport for role `R`.
pub struct LineTransport<R: ServiceRole, In> {
    read: BufReader<In>,
    line: Vec<u8>,
    /// Bytes of the oversized line being skipped, once it passed the limit.
    skipping: Option<usize>,
    limits: Limits,
    /// Who is at the other end, for messages ("the host", "server 'fs'").
    peer: String,
    writer: mpsc::Sender<Frame>,
    outlet: Arc<dyn Outlet>,
    /// A message to write before reading on (an error reply, or what a divert hook made),
    /// kept while its stream's queue is full.
    outgoing: Option<Forward>,
    /// Serving: notifications before the first request are dropped.
    awaiting_request: bool,
    /// Cancelled when the peer closes its side.
    eof: CancellationToken,
    inbound: Option<Inbound>,
    outbound: Option<Outbound<R>>,
    divert: Option<Divert>,
    _role: PhantomData<fn() -> R>,
}

impl<R: ServiceRole, In: AsyncRead + Send + Unpin + 'static> LineTransport<R, In> {
    /// A transport reading `read` and writing `write`; `peer` names the other end in
    /// messages. The writer runs on its own task, which ends when the transport is
    /// dropped or closed, after writing what was queued.
    pub fn new<Out>(read: In, write: Out, limits: Limits, peer: impl Into<String>) -> Self
    where
        Out: AsyncWrite + Send + Unpin + 'static,
    {
        let (writer, outlet) = writer::start(write);
        Self {
            // Large enough that a big answer is read in few calls.
            read: BufReader::with_capacity(READ_BUFFER, read),
            line: Vec::new(),
            skipping: None,
            limits,
            peer: peer.into(),
            writer,
            outlet,
            outgoing: None,
            awaiting_request: false,
            eof: CancellationToken::new(),
            inbound: None,
            outbound: None,
            divert: None,
            _role: PhantomData,
        }
    }

    /// Shows `hook` the text of every well-formed message received.
    pub fn with_inbound(mut self, hook: Inbound) -> Self {
        self.inbound = Some(hook);
        self
    }

    /// Lets `hook` take the well-formed messages it wants before they are decoded.
    pub fn with_divert(mut self, hook: Divert) -> Self {
        self.divert = Some(hook);
        self
    }

    /// A handle that writes encoded messages to this stream.
    pub fn sender(&self) -> RawSender {
        RawSender::new(&self.writer, &self.outlet)
    }

    /// Lets `hook` encode outgoing messages it wants to write differently.
    pub fn with_outbound(mut self, hook: Outbound<R>) -> Self {
        self.outbound = Some(hook);
        self
    }

    /// Drops notifications and responses until the peer's first request: for serving,
    /// where rmcp ends the session on anything but a request before the handshake.
    pub fn serving(mut self) -> Self {
        self.awaiting_request = true;
        self
    }

    /// A token cancelled when the peer closes its side of the stream.
    pub fn eof(&self) -> CancellationToken {
        self.eof.clone()
    }

    /// Reads one line into `self.line`, never holding more than the limit. Cancel-safe:
    /// a partial line stays in `self.line` for the next call.
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
            to: self.sender(),
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

impl<R: ServiceRole, In: AsyncRead + Send + Unpin + 'static> Transport<R> for LineTransport<R, In> {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<R>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let (queue, outlet) = (self.writer.clone(), self.outlet.clone());
        let own = self.outbound.as_ref().and_then(|hook| hook(&item));
        let bytes = match own {
            Some(bytes) => Ok(bytes),
            None => serde_json::to_vec(&item),
        };
        async move {
            let mut bytes = bytes.map_err(io::Error::other)?;
            bytes.push(b'\n');
            let (done, written) = oneshot::channel();
            let permit = queue.reserve().await.map_err(|_| writer::closed())?;
            outlet.queuing();
            permit.send((bytes, 0, Some(done)));
            written.await.map_err(|_| writer::closed())?
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<R>> {
        loop {
            if let Some(Forward { to, bytes, from }) = self.outgoing.take() {
                // At once, if the stream takes it now.
                let left = match to.queue() {
                    Some(queue) => to.write_now(&queue, bytes, from).err(),
                    None => Some(bytes),
                };
                if let Some(bytes) = left {
                    self.outgoing = Some(Forward { to, bytes, from });
                }
            }
            if let Some(outgoing) = &self.outgoing {
                // Reserve first, take after: a cancelled wait loses nothing. A closed
                // stream takes nothing more.
                let queue = outgoing.to.queue();
                let permit = match queue.as_ref() {
                    Some(queue) => queue.reserve().await.ok(),
                    None => None,
                };
                let outgoing = self.outgoing.take();
                match (permit, outgoing) {
                    (Some(permit), Some(outgoing)) => {
                        outgoing.to.enqueue(permit, outgoing.bytes, outgoing.from);
                    }
                    // This stream's own writer failed: the session is over.
                    (None, _) if queue.as_ref().is_some_and(|q| q.same_channel(&self.writer)) => {
                        return None;
                    }
                    _ => {}
                }
            }
            let Some(line) = self.read_line().await else {
                self.eof.cancel();
                return None;
            };
            let decoded = self.decode(line);
            self.line.clear();
            if self.line.capacity() > HEAD_BYTES * 4 {
                SPARE.keep(std::mem::take(&mut self.line));
            }
            match decoded {
                Decoded::Message(message) => return Some(message),
                Decoded::Forward(forward) => self.outgoing = Some(forward),
                Decoded::Skip => {}
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Replacing the sender ends the writer task once what is queued is written.
        let (closed, _) = mpsc::channel(1);
        self.writer = closed;
        Ok(())
    }
}

/// One large line buffer, kept between large messages for the next one.
///
/// A large message's line is a fresh buffer otherwise (often moved on with the message:
/// a server's answer becomes the host's in place), and a fresh buffer of tens of MB costs
/// the kernel a page fault and a page cleared per 4 KiB: a third of planmux's time on a
/// 20 MB answer (BENCHMARKS.md §1). A buffer a writer is done with is kept instead (the
/// roomiest one, up to [`SPARE_MAX`]), and the next line that does not fit in one read
/// starts in it. One per process ([`SPARE`]): what planmux holds after a large message.
struct Spare(Mutex<Vec<u8>>);

static SPARE: Spare = Spare::new();

impl Spare {
    const fn new() -> Self {
        Self(Mutex::new(Vec::new()))
    }

    /// Keeps `buffer` for the next large line, if it is large and roomier than the one kept.
    fn keep(&self, mut buffer: Vec<u8>) {
        let capacity = buffer.capacity();
        if capacity <= HEAD_BYTES * 4 || capacity > SPARE_MAX {
            return;
        }
        buffer.clear();
        let mut spare = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if spare.capacity() < capacity {
            *spare = buffer;
        }
    }

    /// The kept buffer, empty, if there is one.
    fn take(&self) -> Option<Vec<u8>> {
        let mut spare = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (spare.capacity() > 0).then(|| std::mem::take(&mut *spare))
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

/// Parses a message whose nesting was already checked, beyond serde's default depth.
fn parse<R: ServiceRole>(text: &[u8]) -> Result<RxJsonRpcMessage<R>, serde_json::Error> {
    let mut parser = serde_json::Deserializer::from_slice(text);
    parser.disable_recursion_limit();
    let message = RxJsonRpcMessage::<R>::deserialize(&mut parser)?;
    parser.end()?;
    Ok(message)
}

/// Strips the line ending, a carriage return and a UTF-8 byte order mark.
fn trim(line: &mut Vec<u8>) {
    if line.ends_with(b"\n") {
        line.pop();
    }
    if line.ends_with(b"\r") {
        line.pop();
    }
    if line.starts_with(b"\xEF\xBB\xBF") {
        line.drain(..3);
    }
}

/// The deepest nesting of arrays and objects in `text`, in one pass (brackets inside
/// strings do not count).
fn nesting(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut at = 0;
    while at < text.len() {
        match text[at] {
            b'"' => {
                // Jump through the string: a large answer is mostly one long string.
                at = string_end(text, at + 1);
            }
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    deepest
}

/// Where the string that starts at `from` (just after its opening quote) ends: the index
/// of its closing quote, or the end of `text`.
fn string_end(text: &[u8], mut from: usize) -> usize {
    while let Some(found) = memchr::memchr2(b'"', b'\\', &text[from..]) {
        let at = from + found;
        if text[at] == b'"' {
            return at;
        }
        // An escape: skip the escaped byte too.
        from = at + 2;
        if from >= text.len() {
            break;
        }
    }
    text.len()
}

/// What kind of message a line that cannot be parsed seems to be.
#[derive(Debug, PartialEq)]
enum Kind {
    Request,
    Response,
    Notification,
    /// An id, and neither a method nor a result or error.
    Bare,
    /// A method, and an `id` that is no MCP id (a fraction, null, an object).
    BadId,
}

/// The top-level `id` and kind of a message, read without parsing the rest of it.
#[derive(Debug, PartialEq)]
struct Envelope {
    id: Option<NumberOrString>,
    kind: Kind,
}

impl Envelope {
    /// Walks the top-level object's keys in one pass, skipping values, until it knows the
    /// id and whether a `method` (request) or `result`/`error` (response) is there.
    fn scan(text: &[u8]) -> Envelope {
        let mut scan = Scanner { text, at: 0 };
        let (mut id, mut method, mut answer, mut id_key) = (None, false, false, false);
        if scan.skip_space() == Some(b'{') {
            scan.at += 1;
            while let Some(key) = scan.string() {
                if scan.skip_space() != Some(b':') {
                    break;
                }
                scan.at += 1;
                scan.skip_space();
                match key {
                    b"id" => {
                        id_key = true;
                        id = scan.id();
                    }
                    b"method" => method = true,
                    b"result" | b"error" => answer = true,
                    _ => {}
                }
                if id.is_some() && (method || answer) {
                    break;
                }
                if !scan.skip_value() || scan.skip_space() != Some(b',') {
                    break;
                }
                scan.at += 1;
                scan.skip_space();
            }
        }
        let kind = match (method, answer, &id) {
            (true, _, Some(_)) => Kind::Request,
            (false, true, Some(_)) => Kind::Response,
            (false, false, Some(_)) => Kind::Bare,
            (true, _, None) if id_key => Kind::BadId,
            _ => Kind::Notification,
        };
        let id = if matches!(kind, Kind::Notification | Kind::BadId) {
            None
        } else {
            id
        };
        Envelope { id, kind }
    }
}

/// A cursor over raw JSON that skips values without building them.
struct Scanner<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn skip_space(&mut self) -> Option<u8> {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.at += 1;
        }
        self.peek()
    }

    /// A string's raw bytes (escapes left as they are), the cursor after its quote.
    fn string(&mut self) -> Option<&'a [u8]> {
        if self.peek() != Some(b'"') {
            return None;
        }
        let start = self.at + 1;
        let mut i = start;
        while i < self.text.len() {
            match self.text[i] {
                b'\\' => i += 2,
                b'"' => {
                    self.at = i + 1;
                    return self.text.get(start..i);
                }
                _ => i += 1,
            }
        }
        None
    }

    /// An id: a string (its escapes decoded), or an integer that fits.
    fn id(&mut self) -> Option<NumberOrString> {
        if self.peek() == Some(b'"') {
            let start = self.at;
            self.string()?;
            // The string with its quotes, decoded as JSON (a lone surrogate is no id).
            let text: String = serde_json::from_slice(&self.text[start..self.at]).ok()?;
            return Some(NumberOrString::String(Arc::from(text)));
        }
        let start = self.at;
        while matches!(self.peek(), Some(b'-' | b'0'..=b'9')) {
            self.at += 1;
        }
        let digits = std::str::from_utf8(&self.text[start..self.at]).ok()?;
        match self.peek() {
            Some(b'.' | b'e' | b'E') => None,
            _ => digits.parse().ok().map(NumberOrString::Number),
        }
    }

    /// Skips one value (any nesting, strings honoured), stopping at the `,` or closing
    /// bracket after it; false when the text ends first.
    fn skip_value(&mut self) -> bool {
        let mut depth = 0usize;
        while let Some(byte) = self.peek() {
            match byte {
                b'"' => {
                    if self.string().is_none() {
                        return false;
                    }
                }
                b'[' | b'{' => {
                    depth += 1;
                    self.at += 1;
                }
                b']' | b'}' if depth > 0 => {
                    depth -= 1;
                    self.at += 1;
                }
                b',' | b']' | b'}' if depth == 0 => return true,
                _ => self.at += 1,
            }
        }
        false
    }
}

#[cfg(test)]
mod tests;
