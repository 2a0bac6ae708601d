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

use std::fs::File;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::NumberOrString;
use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

pub use reader::Blocking;
use reader::{Inbox, Reader};
pub use writer::RawSender;
use writer::{Frame, Outlet};

mod reader;
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
    writer: mpsc::Sender<Frame>,
    outlet: Arc<dyn Outlet>,
    /// Cancelled when the peer closes its side.
    eof: CancellationToken,
    outbound: Option<Outbound<R>>,
    /// The reading end, until the first `receive` starts it.
    reader: Option<Box<Reader<R, In>>>,
    /// What the reader leaves for rmcp, once started.
    inbox: Option<Inbox<R>>,
}

impl<R: ServiceRole> LineTransport<R, Blocking> {
    /// A transport reading the file or pipe `read` with blocking calls, on a thread of
    /// its own ([`Blocking`]); otherwise as [`LineTransport::new`].
    pub fn blocking<Out>(read: File, write: Out, limits: Limits, peer: impl Into<String>) -> Self
    where
        Out: AsyncWrite + Send + Unpin + 'static,
    {
        Self::new(Blocking::new(read), write, limits, peer)
    }
}

impl<R: ServiceRole, In: AsyncRead + Send + Unpin + 'static> LineTransport<R, In> {
    /// A transport reading `read` and writing `write`; `peer` names the other end in
    /// messages. The writer runs on its own task, which ends when the transport is
    /// dropped or closed, after writing what was queued; the reader runs on its own
    /// task (or thread) from the first `receive` until the transport is dropped.
    pub fn new<Out>(read: In, write: Out, limits: Limits, peer: impl Into<String>) -> Self
    where
        Out: AsyncWrite + Send + Unpin + 'static,
    {
        let (writer, outlet) = writer::start(write);
        let eof = CancellationToken::new();
        let own = RawSender::new(&writer, &outlet);
        let reader = Reader::new(read, limits, peer.into(), own, eof.clone());
        Self {
            writer,
            outlet,
            eof,
            outbound: None,
            reader: Some(Box::new(reader)),
            inbox: None,
        }
    }

    /// The reader, to set up before the first `receive`.
    fn reader(&mut self) -> Option<&mut Reader<R, In>> {
        self.reader.as_deref_mut()
    }

    /// Shows `hook` the text of every well-formed message received.
    pub fn with_inbound(mut self, hook: Inbound) -> Self {
        if let Some(reader) = self.reader() {
            reader.inbound = Some(hook);
        }
        self
    }

    /// Lets `hook` take the well-formed messages it wants before they are decoded.
    pub fn with_divert(mut self, hook: Divert) -> Self {
        if let Some(reader) = self.reader() {
            reader.divert = Some(hook);
        }
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
        if let Some(reader) = self.reader() {
            reader.awaiting_request = true;
        }
        self
    }

    /// A token cancelled when the peer closes its side of the stream.
    pub fn eof(&self) -> CancellationToken {
        self.eof.clone()
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
        if let Some(reader) = self.reader.take() {
            self.inbox = Some(reader.start());
        }
        self.inbox.as_mut()?.next().await
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

/// Parses a message whose nesting was already checked, beyond serde's default depth.
fn parse<R: ServiceRole>(text: &[u8]) -> Result<RxJsonRpcMessage<R>, serde_json::Error> {
    decode_checked(text)
}

/// Decodes JSON read off a wire transport (so its nesting is within `max_nesting`)
/// beyond serde's default depth of 128.
pub(crate) fn decode_checked<T: serde::de::DeserializeOwned>(
    text: &[u8],
) -> Result<T, serde_json::Error> {
    let mut parser = serde_json::Deserializer::from_slice(text);
    parser.disable_recursion_limit();
    let value = T::deserialize(&mut parser)?;
    parser.end()?;
    Ok(value)
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
