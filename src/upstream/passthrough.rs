//! The passthrough path: a host's plain `tools/call` of a downstream tool, forwarded as
//! raw JSON, with the server's answer moved back without being decoded. rmcp decodes
//! every message into its protocol types (trying untagged enum variants in turn) and
//! encodes it again, on both sides: for a call that planmux only routes, that is most of
//! what it adds (BENCHMARKS.md §1).
//!
//! The request is taken off the host's stream before rmcp sees it (`wire::Divert`) when
//! it can take this path: a stdio host that finished an `initialize` handshake (protocol
//! before 2026-07-28), a tool of the catalog that is not planmux's own nor a pipeline,
//! and a server up on a line connection. Anything else goes to rmcp as before. On the
//! way it meets what a call through rmcp meets: the checkpoint (with the audit trail),
//! the call's time limit, the host's cancellation (the server is told), its progress
//! token (notifications relayed in order before the answer), a server that exits or
//! restarts, and the same error mapping.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use memchr::memmem::Finder;
use rmcp::model::{CallToolResult, ErrorData, ProgressToken, RequestId};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use super::{Upstream, tool_error};
use crate::downstream::{Caller, DownstreamError, RawReply, RouteSink, RoutedCall};
use crate::policy::{Authorized, Route};
use crate::wire::{Divert, Diverted, Forward, RawSender};

/// The calls on the passthrough path, and where their answers go.
pub struct Passthrough {
    upstream: Upstream,
    /// The host's stream.
    writer: RawSender,
    /// The calls in flight, by the host's request id (as JSON text).
    in_flight: Mutex<HashMap<String, Flight>>,
    /// What tells the messages this path looks at, built once (every host message is
    /// scanned).
    cancellation: Finder<'static>,
    call: Finder<'static>,
    /// Whether the host may take this path, once its handshake tells.
    host_fits: OnceLock<bool>,
}

/// A passthrough call in flight.
enum Flight {
    /// Routed in place (`downstream::routed`): its answer comes back through
    /// [`RouteSink`].
    Routed {
        /// The host's progress token, as JSON text, if it gave one.
        progress: Option<String>,
        call: RoutedCall,
    },
    /// On a task of its own (the checkpoint had to wait, or the server is not up, or its
    /// queue is full): cancelling this stops it.
    Task(CancellationToken),
}

/// A host's `tools/call` as read on its line, nothing decoded but what routes it.
#[derive(Deserialize)]
struct HostCall<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<CallParams<'a>>,
}

#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
    task: Option<serde::de::IgnoredAny>,
    #[serde(borrow, rename = "_meta")]
    meta: Option<CallMeta<'a>>,
}

#[derive(Deserialize)]
struct CallMeta<'a> {
    #[serde(borrow, rename = "progressToken")]
    progress_token: Option<&'a RawValue>,
}

/// A call this path takes, and where in its line the parts it rewrites are.
struct Plain {
    /// Its id as JSON text: the call's key among those in flight, and the id of the
    /// host's answer.
    key: String,
    name: String,
    /// The progress token as JSON text, when it is one (a string or an integer).
    progress: Option<String>,
    id_at: Range<usize>,
    name_at: Range<usize>,
    token_at: Option<Range<usize>>,
}

impl Plain {
    /// The call in `line`, if it is a plain `tools/call`: an id that is a string or an
    /// integer (anything else goes to rmcp, which refuses it), a tool name, and arguments
    /// that are an object if any (rmcp's path refuses others, saying so). A
    /// task-augmented call (SEP-1686) goes there too: planmux offers no tasks, so the call
    /// runs as a plain one rather than hand the host a task it cannot read back.
    fn read(line: &[u8]) -> Option<Self> {
        let call = serde_json::from_slice::<HostCall>(line).ok()?;
        let params = call
            .params
            .filter(|_| call.method.as_deref() == Some("tools/call"))?;
        let plain =
            params.arguments.is_none_or(|a| a.get().starts_with('{')) && params.task.is_none();
        let raw_id = call.id.filter(|_| plain)?;
        let key = id_text(raw_id.get())?.into_owned();
        let raw_name = params.name?;
        let name = match plain_string(raw_name.get()) {
            Some(name) => name.to_owned(),
            None => serde_json::from_str(raw_name.get()).ok()?,
        };
        let token = params.meta.and_then(|meta| meta.progress_token);
        let progress = token.and_then(|t| id_text(t.get())).map(Cow::into_owned);
        let start = line.as_ptr() as usize;
        let at = |raw: &RawValue| {
            let from = raw.get().as_ptr() as usize - start;
            from..from + raw.get().len()
        };
        Some(Self {
            key,
            name,
            progress,
            id_at: at(raw_id),
            name_at: at(raw_name),
            token_at: token.map(at),
        })
    }

    /// The request for the server: `line` with the id (and the progress token, if any)
    /// replaced by `id` and the name by `tool` (both JSON text); the rest as the host
    /// wrote it.
    fn forwarded(&self, line: &[u8], id: &str, tool: &str) -> Vec<u8> {
        let token = self.token_at.clone().map(|at| (at, id));
        let mut edits = [
            Some((self.id_at.clone(), id)),
            Some((self.name_at.clone(), tool)),
            token,
        ];
        edits.sort_by_key(|edit| edit.as_ref().map(|(at, _)| at.start));
        let mut out = Vec::with_capacity(line.len() + 2 * id.len() + tool.len() + 1);
        let mut from = 0;
        for (at, text) in edits.into_iter().flatten() {
            out.extend_from_slice(&line[from..at.start]);
            out.extend_from_slice(text.as_bytes());
            from = at.end;
        }
        out.extend_from_slice(&line[from..]);
        out
    }
}

/// The JSON text an id or a progress token is known by (what the host's later messages
/// about it are matched with), if it is a string or an integer; `None` for anything else.
/// A string without escapes or an integer written plainly is its own text (the usual
/// case, read without decoding); anything else is decoded and written again.
fn id_text(raw: &str) -> Option<Cow<'_, str>> {
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    let plain_integer = match digits.as_bytes() {
        [b'0'] => raw == "0",
        [b'1'..=b'9', rest @ ..] => {
            rest.iter().all(u8::is_ascii_digit) && raw.parse::<i64>().is_ok()
        }
        _ => false,
    };
    if plain_integer || plain_string(raw).is_some() {
        return Some(Cow::Borrowed(raw));
    }
    let id: Value = serde_json::from_str(raw).ok()?;
    if !(id.is_string() || id.is_i64()) {
        return None;
    }
    serde_json::to_string(&id).ok().map(Cow::Owned)
}

/// The text of a JSON string without escapes (`raw` is a whole JSON value).
fn plain_string(raw: &str) -> Option<&str> {
    raw.strip_prefix('"')?
        .strip_suffix('"')
        .filter(|text| !text.contains('\\'))
}

impl Passthrough {
    /// The passthrough path of `upstream`, answering on `writer` (the host's stream).
    /// Must be called within the runtime: a task answers the routed calls still in flight
    /// when planmux shuts down.
    pub fn new(upstream: Upstream, writer: RawSender) -> Arc<Self> {
        let shutdown = upstream.shutdown.clone();
        let path = Arc::new(Self {
            upstream,
            writer,
            in_flight: Mutex::default(),
            cancellation: Finder::new(b"notifications/cancelled"),
            call: Finder::new(b"tools/call"),
            host_fits: OnceLock::new(),
        });
        let closing = Arc::downgrade(&path);
        tokio::spawn(async move {
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

    fn in_flight(&self) -> MutexGuard<'_, HashMap<String, Flight>> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn claim(self: &Arc<Self>, line: &[u8]) -> Diverted {
        if self.cancellation.find(line).is_some() {
            self.cancelled(line);
            return Diverted::Left;
        }
        if self.call.find(line).is_none() {
            return Diverted::Left;
        }
        let Some(call) = Plain::read(line) else {
            return Diverted::Left;
        };
        let host_fits = match self.host_fits.get() {
            Some(fits) => *fits,
            None => self
                .upstream
                .passthrough_host()
                .is_some_and(|fits| *self.host_fits.get_or_init(|| fits)),
        };
        let route = host_fits
            .then(|| self.upstream.passthrough_route(&call.name))
            .flatten();
        let Some(route) = route else {
            return Diverted::Left;
        };
        let mut in_flight = self.in_flight();
        if in_flight.contains_key(&call.key) {
            // A second request with the id of one in flight: rmcp answers that.
            return Diverted::Left;
        }
        // The checkpoint, where it need not wait; its proof routes the call in place.
        let downstreams = &self.upstream.downstreams;
        let proof = match downstreams.authorize_now(&call.name, &Route::Direct) {
            Some(Ok(proof)) => {
                let sink: Arc<dyn RouteSink> = self.clone();
                let forwarded = |id: &str, tool: &str| call.forwarded(line, id, tool);
                if let Some(routed) = route.send(&proof, &call.key, sink, forwarded) {
                    let flight = Flight::Routed {
                        progress: call.progress,
                        call: routed,
                    };
                    in_flight.insert(call.key, flight);
                    return Diverted::Taken;
                }
                Some(proof)
            }
            Some(Err(denied)) => {
                let error = ErrorData::invalid_params(denied.to_string(), None);
                return Diverted::Forward(self.reply(&call.key, Answer::Error(error)));
            }
            None => None,
        };
        let Ok(request) = serde_json::from_slice::<Value>(line) else {
            return Diverted::Left;
        };
        let cancel = self.upstream.shutdown.child_token();
        in_flight.insert(call.key.clone(), Flight::Task(cancel.clone()));
        tokio::spawn(
            self.clone()
                .run(request, call.name, call.key, proof, cancel),
        );
        Diverted::Taken
    }

    /// The host cancelled a request: if it is one of ours, its call stops.
    fn cancelled(&self, text: &[u8]) {
        let Ok(notice) = serde_json::from_slice::<Value>(text) else {
            return;
        };
        let Some(id) = notice.pointer("/params/requestId") else {
            return;
        };
        let Ok(key) = serde_json::to_string(id) else {
            return;
        };
        let mut in_flight = self.in_flight();
        match in_flight.get(&key) {
            Some(Flight::Task(cancel)) => cancel.cancel(),
            Some(Flight::Routed { .. }) => {
                if let Some(Flight::Routed { call, .. }) = in_flight.remove(&key) {
                    drop(in_flight);
                    // Like rmcp, no answer (the host may reuse the id).
                    let _ = call.cancel("cancelled by the client");
                }
            }
            None => {}
        }
    }

    /// Takes the routed call `key` with raw id `id` out of those in flight: whether it
    /// was there.
    fn end_routed(&self, key: &str, id: &str) -> bool {
        let mut in_flight = self.in_flight();
        let ours =
            matches!(in_flight.get(key), Some(Flight::Routed { call, .. }) if call.id() == id);
        if ours {
            in_flight.remove(key);
        }
        ours
    }

    /// planmux is shutting down: the routed calls in flight are cancelled and answered
    /// as the general path's are.
    async fn close(&self) {
        let routed: Vec<(String, RoutedCall)> = self
            .in_flight()
            .extract_if(|_, flight| matches!(flight, Flight::Routed { .. }))
            .filter_map(|(key, flight)| match flight {
                Flight::Routed { call, .. } => Some((key, call)),
                Flight::Task(_) => None,
            })
            .collect();
        for (id, call) in routed {
            if call.cancel("cancelled by the client") {
                let answer = Answer::Result(tool_error(call.cancelled().to_string()));
                let _ = self.reply(&id, answer).send().await;
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

    /// Runs one call on a task of its own and writes its answer to the host.
    async fn run(
        self: Arc<Self>,
        request: Value,
        name: String,
        key: String,
        proof: Option<Authorized>,
        cancel: CancellationToken,
    ) {
        let answer = self.answer(request, &name, proof, &cancel).await;
        self.in_flight().remove(&key);
        if cancel.is_cancelled() && !self.upstream.shutdown.is_cancelled() {
            // The host cancelled it: like rmcp, no answer (the host may reuse the id).
            return;
        }
        if let Err(error) = self.reply(&key, answer).send().await {
            tracing::debug!(%error, "the host's stream closed before a passthrough answer");
        }
    }

    /// The checkpoint (unless `proof` is its decision already), then the call: the
    /// server's response line, or what to answer instead (as the rmcp path would).
    async fn answer(
        &self,
        request: Value,
        name: &str,
        proof: Option<Authorized>,
        cancel: &CancellationToken,
    ) -> Answer {
        let downstreams = &self.upstream.downstreams;
        let proof = match proof {
            Some(proof) => proof,
            None => match downstreams.authorize(name, &Route::Direct).await {
                Ok(proof) => proof,
                Err(denied) => {
                    return Answer::Error(ErrorData::invalid_params(denied.to_string(), None));
                }
            },
        };
        let Some(caller) = self.caller(&request) else {
            return Answer::Error(ErrorData::internal_error("the host is gone", None));
        };
        match downstreams
            .call_tool_raw(request, &proof, Some(&caller), cancel)
            .await
        {
            Ok(reply) => Answer::Reply(reply),
            Err(e @ DownstreamError::UnknownTool { .. }) => {
                Answer::Error(ErrorData::invalid_params(e.to_string(), None))
            }
            Err(DownstreamError::Rpc { error, .. }) => Answer::Error(*error),
            Err(e) => Answer::Result(tool_error(e.to_string())),
        }
    }

    /// Whom the call is for: the host, this request, and its progress token if any.
    fn caller(&self, request: &Value) -> Option<Caller> {
        let peer = self.upstream.host.get()?;
        let progress = request
            .pointer("/params/_meta/progressToken")
            .and_then(|token| serde_json::from_value::<ProgressToken>(token.clone()).ok());
        Some(Caller {
            peer,
            session: self.upstream.session.clone(),
            request: serde_json::from_value::<RequestId>(request["id"].clone()).ok()?,
            progress,
        })
    }
}

/// Where the answers of calls routed in place arrive (on the server's read path).
impl RouteSink for Passthrough {
    fn answered(&self, key: &str, id: &str, server: &str, reply: RawReply) -> Option<Forward> {
        // Not in flight any more: the host cancelled it, and gets no answer.
        if !self.end_routed(key, id) {
            return None;
        }
        if let Some(result) = reply.result() {
            self.upstream.downstreams.note_raw_links(server, result);
        }
        Some(self.reply(key, Answer::Reply(reply)))
    }

    fn progress(
        &self,
        key: &str,
        id: &str,
        mut line: Vec<u8>,
        token: Range<usize>,
    ) -> Option<Forward> {
        let host_token = match self.in_flight().get(key) {
            Some(Flight::Routed {
                call,
                progress: Some(progress),
                ..
            }) if call.id() == id => progress.clone(),
            _ => return None,
        };
        line.splice(token, host_token.into_bytes());
        Some(Forward {
            to: self.writer.clone(),
            bytes: line,
            from: 0,
        })
    }

    fn failed(&self, key: &str, id: &str, error: DownstreamError) -> Option<Forward> {
        if !self.end_routed(key, id) {
            return None;
        }
        Some(self.reply(key, Answer::Result(tool_error(error.to_string()))))
    }
}

/// What the host gets for a passthrough call.
enum Answer {
    /// The server's response: its result or error, as they are.
    Reply(RawReply),
    /// A tool result planmux makes (a timeout, an exited server, …).
    Result(CallToolResult),
    /// A JSON-RPC error planmux makes (a refused or unknown tool).
    Error(ErrorData),
}

/// The host's response to request `id` (JSON text), and where it starts in the buffer. A server's
/// result or error is not copied: the response is made in place in the server's line,
/// as `{"result":…,"jsonrpc":"2.0","id":…}` (JSON-RPC does not order members; Node servers
/// write theirs in this order too). `{"result":` fits before the result in any line that
/// has one.
fn encode(id: &str, answer: Answer) -> (Vec<u8>, usize) {
    const RESULT: &str = r#"{"result":"#;
    const ERROR: &str = r#"{"error":"#;
    let (head, body) = match answer {
        Answer::Reply(reply) => match (reply.body.clone(), reply.is_error) {
            (Some(body), true) => (ERROR, Body::Within(reply.line, body)),
            (Some(body), false) => {
                let mut line = reply.line;
                if blank_result_type(&mut line[body.clone()]) {
                    (RESULT, Body::Within(line, body))
                } else {
                    (RESULT, Body::Own(legacy(&line[body]).into_owned()))
                }
            }
            (None, _) => {
                let error = ErrorData::internal_error(
                    "the server answered tools/call with something that is not a tool result",
                    None,
                );
                (
                    ERROR,
                    Body::Own(serde_json::to_vec(&error).unwrap_or_default()),
                )
            }
        },
        Answer::Result(result) => {
            let mut result = serde_json::to_vec(&result).unwrap_or_default();
            if !blank_result_type(&mut result) {
                result = legacy(&result).into_owned();
            }
            (RESULT, Body::Own(result))
        }
        Answer::Error(error) => (
            ERROR,
            Body::Own(serde_json::to_vec(&error).unwrap_or_default()),
        ),
    };
    // Not `format!`: this is on every routed call's path (see `RawCalls::next_id`).
    let tail = [r#","jsonrpc":"2.0","id":"#, id, "}"].concat();
    match body {
        Body::Within(mut line, body) if body.start >= head.len() => {
            let from = body.start - head.len();
            line[from..body.start].copy_from_slice(head.as_bytes());
            line.truncate(body.end);
            // Room for the tail and the writer's newline.
            line.reserve(tail.len() + 1);
            line.extend_from_slice(tail.as_bytes());
            (line, from)
        }
        Body::Within(line, body) => (joined(head, &line[body], &tail), 0),
        Body::Own(body) => (joined(head, &body, &tail), 0),
    }
}

/// What goes between a response's head and tail.
enum Body {
    /// A range of the server's line.
    Within(Vec<u8>, std::ops::Range<usize>),
    Own(Vec<u8>),
}

/// `head`, `body` and `tail` in one buffer, with room for the writer's newline.
fn joined(head: &str, body: &[u8], tail: &str) -> Vec<u8> {
    let mut joined = Vec::with_capacity(head.len() + body.len() + tail.len() + 1);
    joined.extend_from_slice(head.as_bytes());
    joined.extend_from_slice(body);
    joined.extend_from_slice(tail.as_bytes());
    joined
}

/// Makes `result` what a host before 2026-07-28 gets, without `resultType` (which rmcp
/// removes for such hosts too), in place: the member is blanked with spaces (JSON allows
/// whitespace between tokens), so a large result is neither decoded nor copied. False
/// when it cannot (the key written with escapes): [`legacy`] rewrites the result then.
fn blank_result_type(result: &mut [u8]) -> bool {
    const KEY: &[u8] = b"\"resultType\"";
    if memchr::memmem::find(result, KEY).is_none() {
        return true;
    }
    let start = result.as_ptr() as usize;
    let values: Vec<Range<usize>> = match serde_json::from_slice::<ResultTypes>(result) {
        Ok(found) => found
            .0
            .iter()
            .map(|raw| {
                let from = raw.get().as_ptr() as usize - start;
                from..from + raw.get().len()
            })
            .collect(),
        // Not an object: nothing to remove.
        Err(_) => return true,
    };
    let space = |b: &u8| b.is_ascii_whitespace();
    let mut blanks = Vec::new();
    for value in values {
        // Back from the value over `"resultType" :`.
        let before = &result[..value.start];
        let before = before.trim_ascii_end();
        let Some(before) = before.strip_suffix(b":") else {
            return false;
        };
        let before = before.trim_ascii_end();
        if !before.ends_with(KEY) {
            return false;
        }
        let mut from = before.len() - KEY.len();
        let mut to = value.end;
        // With the comma that joins it to the next member, or else to the previous one.
        let next = result[to..]
            .iter()
            .position(|b| !space(b))
            .map(|at| to + at);
        match next {
            Some(at) if result[at] == b',' => to = at + 1,
            _ => {
                if let Some(at) = result[..from].iter().rposition(|b| !space(b))
                    && result[at] == b','
                {
                    from = at;
                }
            }
        }
        blanks.push(from..to);
    }
    for blank in blanks {
        result[blank].fill(b' ');
    }
    true
}

/// The values of an object's top-level `resultType` members, read without decoding the
/// rest.
struct ResultTypes<'a>(Vec<&'a RawValue>);

impl<'de> Deserialize<'de> for ResultTypes<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = ResultTypes<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a tool result")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut found = Vec::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "resultType" {
                        found.push(map.next_value::<&'de RawValue>()?);
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(ResultTypes(found))
            }
        }
        deserializer.deserialize_map(Members)
    }
}

/// [`blank_result_type`]'s fallback: the result decoded, `resultType` removed, encoded
/// again.
fn legacy(result: &[u8]) -> Cow<'_, [u8]> {
    if memchr::memmem::find(result, b"\"resultType\"").is_none() {
        return result.into();
    }
    match serde_json::from_slice::<Value>(result) {
        Ok(Value::Object(mut fields)) => {
            fields.remove("resultType");
            serde_json::to_vec(&fields).map_or(result.into(), Into::into)
        }
        _ => result.into(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The reply the divert hook makes of `line`.
    fn served(line: &[u8], key: &str) -> Answer {
        let text = std::str::from_utf8(line).unwrap_or_default();
        let value: Value = serde_json::from_slice(line).unwrap_or_default();
        let body = value[key].to_string();
        let from = text.find(&body).unwrap_or_default();
        Answer::Reply(RawReply {
            line: line.to_vec(),
            body: Some(from..from + body.len()),
            is_error: key == "error",
        })
    }

    /// The host's response, parsed.
    fn sent((buffer, from): (Vec<u8>, usize)) -> Value {
        serde_json::from_slice(&buffer[from..]).unwrap_or_default()
    }

    /// An id or a token is known by the text decoding and writing it again gives,
    /// whether it was read plainly or decoded; anything but a string or an integer is
    /// none.
    #[test]
    fn ids_are_known_by_one_text_however_written() {
        for raw in [
            "7",
            "0",
            "-12",
            "9223372036854775807",
            r#""abc""#,
            r#""""#,
            r#""a\"b""#,
            r#""\u0041""#,
            "-0",
            "9223372036854775808",
            "1.5",
            "1e3",
            "null",
            "[1]",
            r#"{"a":1}"#,
        ] {
            let decoded: Value = serde_json::from_str(raw).unwrap_or_default();
            let expected = (decoded.is_string() || decoded.is_i64())
                .then(|| serde_json::to_string(&decoded).unwrap_or_default());
            assert_eq!(id_text(raw).map(Cow::into_owned), expected, "{raw}");
        }
        assert!(
            matches!(id_text("42"), Some(Cow::Borrowed(_))),
            "read plainly"
        );
        assert!(matches!(id_text(r#""k-1""#), Some(Cow::Borrowed(_))));
    }

    #[test]
    fn answers_keep_the_servers_bytes_and_the_hosts_id() {
        let line = br#"{"result":{"content":[{"type":"text","text":"a  b"}],"resultType":"complete"},"jsonrpc":"2.0","id":"planmux-raw-1"}"#;
        let reply = sent(encode(r#""host-7""#, served(line, "result")));
        assert_eq!(
            reply,
            json!({"jsonrpc": "2.0", "id": "host-7", "result": {"content": [{"type": "text", "text": "a  b"}]}})
        );
        let error = br#"{"jsonrpc":"2.0","id":"planmux-raw-2","error":{"code":-32602,"message":"no","data":{"x":1}}}"#;
        let reply = sent(encode("3", served(error, "error")));
        assert_eq!(reply["id"], 3);
        assert_eq!(
            reply["error"],
            json!({"code": -32602, "message": "no", "data": {"x": 1}})
        );
        let made = sent(encode("4", Answer::Result(tool_error("timed out".into()))));
        assert_eq!(made["result"]["isError"], true);
        // Like a server's, planmux's own result reaches a host before 2026-07-28
        // without `resultType`.
        assert!(made["result"].get("resultType").is_none(), "{made}");
    }

    #[test]
    fn result_type_is_blanked_in_place_wherever_it_stands() {
        let cases = [
            r#"{"resultType":"complete","content":[]}"#,
            r#"{"content":[] , "resultType" : "complete" }"#,
            r#"{"content":[],"resultType":"complete","isError":false}"#,
            r#"{"resultType":"complete"}"#,
        ];
        for case in cases {
            let mut bytes = case.as_bytes().to_vec();
            assert!(blank_result_type(&mut bytes), "{case}");
            assert_eq!(bytes.len(), case.len(), "in place: {case}");
            let mut expected: Value = serde_json::from_str(case).unwrap_or_default();
            expected.as_object_mut().map(|o| o.remove("resultType"));
            let blanked: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            assert_eq!(blanked, expected, "{}", String::from_utf8_lossy(&bytes));
        }
        // Only the top-level member goes.
        let nested = r#"{"structuredContent":{"resultType":"x"},"content":[{"type":"text","text":"\"resultType\""}]}"#;
        let mut bytes = nested.as_bytes().to_vec();
        assert!(blank_result_type(&mut bytes));
        assert_eq!(bytes, nested.as_bytes());
        // A key written with escapes is left to the decoding fallback.
        let escaped = r#"{"result\u0054ype":"complete","content":[],"note":"resultType"}"#;
        assert!(!blank_result_type(&mut escaped.as_bytes().to_vec()));
        let rewritten: Value =
            serde_json::from_slice(&legacy(escaped.as_bytes())).unwrap_or_default();
        assert_eq!(rewritten, json!({"content": [], "note": "resultType"}));
    }

    #[test]
    fn a_servers_result_becomes_the_hosts_answer_in_place() {
        // The id first (rmcp's order) and last (Node's), a host id longer than the room
        // the server's id leaves, and a result whose text holds what the head looks like.
        let text = r#"{\"result\":1,\"id\":2}"#;
        let result = format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#);
        let lines = [
            format!(r#"{{"jsonrpc":"2.0","id":"planmux-raw-9","result":{result}}}"#),
            format!(r#"{{"result":{result},"jsonrpc":"2.0","id":"planmux-raw-9"}}"#),
        ];
        let id = json!("a-host-id-longer-than-the-servers-own-one-by-far");
        for line in lines {
            let Answer::Reply(mut reply) = served(line.as_bytes(), "result") else {
                unreachable!("served makes replies");
            };
            // As the transport's buffer has, room to spare.
            reply.line.reserve(4096);
            let (start, from_body) = (reply.line.as_ptr(), reply.body.clone());
            let (buffer, from) = encode(&id.to_string(), Answer::Reply(reply));
            assert_eq!(
                buffer.as_ptr(),
                start,
                "the server's line is reused: {line}"
            );
            assert_eq!(
                Some(from + r#"{"result":"#.len()),
                from_body.map(|b| b.start)
            );
            let reply = sent((buffer, from));
            assert_eq!(reply["id"], id);
            assert_eq!(reply["jsonrpc"], "2.0");
            assert_eq!(
                reply["result"]["content"][0]["text"],
                r#"{"result":1,"id":2}"#
            );
        }
    }
}
