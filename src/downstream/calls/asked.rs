//! A 2026-07-28 server's calls on a line connection: each request carries the protocol's
//! `_meta`, and a call the server answers `input_required` (MRTR: it asks its client for
//! input instead of sending requests during the call) stays in the table under its raw
//! id while the questions are put to the host (by the server's [`Answerer`]), then is
//! sent again under the same id with the answers and the server's `requestState`. Its
//! end reaches its sink as any call's does: its answer, its time limit, the connection's
//! end or a cancellation (which stops the questions too).
//!
//! A call the server answers `-32021` because the tool runs only as a task (the tasks
//! extension, which the raw calls do not declare) is a turn too: the answerer runs it as
//! a task on rmcp's typed path and [`InputTurn::finish`]es it with the task's result.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::InputResponses;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::CallTable;
use super::legacy_tasks::LegacyTask;
use super::params::{edited, spliced_meta};
use crate::downstream::DownstreamError;
use crate::downstream::sessions::Caller;

/// Who answers a server's questions: takes each turn and ends it ([`InputTurn::resume`]
/// or [`InputTurn::fail`]).
pub(crate) type Answerer = Arc<dyn Fn(InputTurn) + Send + Sync>;

/// What a table needs for a 2026-07-28 server.
pub(crate) struct Modern {
    /// What every request carries in its `_meta`.
    pub meta: Map<String, Value>,
    /// The same as JSON text, its members without the braces, to splice.
    members: String,
    pub answerer: Answerer,
}

impl Modern {
    pub(crate) fn new(meta: Map<String, Value>, answerer: Answerer) -> Self {
        let text = serde_json::to_string(&meta).unwrap_or_default();
        let members = (text.strip_prefix('{').and_then(|t| t.strip_suffix('}')))
            .unwrap_or_default()
            .to_owned();
        Self {
            meta,
            members,
            answerer,
        }
    }
}

/// A call's request as last sent, and its rounds of questions.
pub(super) struct Turns {
    request: Arc<[u8]>,
    rounds: usize,
    /// Cancelled when the call ends while its questions are out.
    asking: CancellationToken,
    /// The task the call became on a 2025-11-25 server (`legacy_tasks.rs`).
    pub(super) task: Option<LegacyTask>,
}

/// However a call ends (its answer, its time limit, the connection's end, a cancellation),
/// the questions still out about it stop: the host's dialog closes; and a task it became
/// that has not ended is cancelled.
impl Drop for Turns {
    fn drop(&mut self) {
        self.asking.cancel();
        if let Some(task) = self.task.as_mut() {
            task.cancel();
        }
    }
}

impl Turns {
    pub(super) fn new(request: &[u8]) -> Self {
        Self {
            request: request.into(),
            rounds: 0,
            asking: CancellationToken::new(),
            task: None,
        }
    }

    /// A call's turns that follow the task it is sent to become (`legacy_tasks.rs`).
    pub(super) fn following(request: &[u8], task: LegacyTask) -> Self {
        let mut turns = Self::new(request);
        turns.task = Some(task);
        turns
    }

    /// The call's answer came: a task it became has ended.
    pub(super) fn ended(&mut self) {
        if let Some(task) = self.task.as_mut() {
            task.ended();
        }
    }
}

/// What the server wants before a call can end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wants {
    /// Input (an `input_required` result).
    Input,
    /// The call to run as a task (a `-32021` error naming the tasks extension).
    Task,
}

/// One round of a server's questions about a call.
pub(crate) struct InputTurn {
    pub wants: Wants,
    table: Arc<CallTable>,
    id: String,
    /// The tool's name on its server.
    pub tool: String,
    /// The server's `input_required` result (or its error), as JSON text.
    pub asked: Vec<u8>,
    /// The call's request as last sent, as JSON text.
    pub request: Arc<[u8]>,
    /// How many rounds came before this one.
    pub round: usize,
    /// Cancelled when the call ends meanwhile (the host cancelled it, or its time ran out).
    pub cancel: CancellationToken,
    /// The call's time limit.
    pub deadline: Instant,
    /// Whom the call is for, when its sink knows (an HTTP session's passthrough call);
    /// else the questions go where a legacy server's requests would.
    pub caller: Option<Caller>,
}

/// `request` with `meta`'s members in its `params._meta` (theirs over the caller's: they
/// are what planmux's connection is). A request that cannot be read is left as it is,
/// for the server to refuse. Its nesting was checked where it was read (the host's line)
/// or made (a plan's arguments), so it is read beyond serde's default depth.
pub(super) fn with_meta(request: Vec<u8>, modern: &Modern) -> Vec<u8> {
    // The usual case, without decoding the request: the members spliced in as text.
    if let Some(spliced) = spliced_meta(&request, &modern.members, modern.meta.keys()) {
        return spliced;
    }
    let meta = &modern.meta;
    edited(request, |params| {
        let carried = params.entry("_meta").or_insert_with(|| json!({}));
        if let Some(carried) = carried.as_object_mut() {
            for (key, value) in meta {
                carried.insert(key.clone(), value.clone());
            }
        }
    })
}

/// A result's `resultType`, read without the rest.
#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(rename = "resultType", borrow)]
    result_type: Option<Cow<'a, str>>,
}

impl CallTable {
    /// From now on, requests carry the 2026-07-28 `_meta`, and `input_required` answers go
    /// to `modern`'s answerer.
    pub(crate) fn speak_modern(&self, modern: Modern) {
        let _ = self.modern.set(modern);
    }

    /// Whether `result`, the answer to call `id`, asks for input; if so the call stays
    /// and its questions go to the answerer.
    pub(super) fn asks(self: &Arc<Self>, id: &str, result: &[u8]) -> bool {
        // Most results are not: a scan, not a parse, tells.
        if self.modern.get().is_none() || !crate::text::contains!(result, b"input_required") {
            return false;
        }
        let asks = serde_json::from_slice::<Kind>(result)
            .is_ok_and(|kind| kind.result_type.as_deref() == Some("input_required"));
        asks && self.turn(id, result, Wants::Input)
    }

    /// Whether `error`, the answer to call `id`, says the tool runs only as a task; if so
    /// the call stays and the answerer runs it as one.
    pub(super) fn wants_task(self: &Arc<Self>, id: &str, error: &[u8]) -> bool {
        if self.modern.get().is_none() || !crate::text::contains!(error, b"-32021") {
            return false;
        }
        let wants = serde_json::from_slice::<rmcp::ErrorData>(error)
            .is_ok_and(|error| crate::downstream::error::wants_tasks(&error));
        wants && self.turn(id, error, Wants::Task)
    }

    /// Hands call `id`'s turn to the answerer, if the call is still waiting.
    fn turn(self: &Arc<Self>, id: &str, asked: &[u8], wants: Wants) -> bool {
        let Some(modern) = self.modern.get() else {
            return false;
        };
        let turn = {
            let mut waiting = self.waiting();
            let Some(waiter) = waiting.calls.get_mut(id) else {
                return false;
            };
            let deadline = waiter.deadline;
            let Some(turns) = waiter.turns.as_mut() else {
                return false;
            };
            turns.asking = CancellationToken::new();
            InputTurn {
                wants,
                table: self.clone(),
                id: id.to_owned(),
                tool: waiter.tool.clone(),
                request: turns.request.clone(),
                asked: asked.to_vec(),
                round: turns.rounds,
                cancel: turns.asking.clone(),
                deadline,
                caller: waiter.sink.caller(),
            }
        };
        (modern.answerer)(turn);
        true
    }
}

impl InputTurn {
    /// Sends the call again with the host's `responses` and the server's `state`, as it
    /// gave it; nothing when the call ended meanwhile.
    pub(crate) async fn resume(self, responses: Option<InputResponses>, state: Option<String>) {
        let request = edited(self.request.to_vec(), |params| {
            let responses = responses.and_then(|r| serde_json::to_value(r).ok());
            match responses {
                Some(responses) => params.insert("inputResponses".into(), responses),
                None => params.remove("inputResponses"),
            };
            match state {
                Some(state) => params.insert("requestState".into(), Value::String(state)),
                None => params.remove("requestState"),
            };
        });
        {
            let mut waiting = self.table.waiting();
            let Some(turns) = waiting
                .calls
                .get_mut(&self.id)
                .and_then(|waiter| waiter.turns.as_mut())
            else {
                return;
            };
            turns.request = request.as_slice().into();
            turns.rounds += 1;
        }
        // A connection that ends meanwhile ends the call; its time limit still holds.
        let _ = tokio::time::timeout_at(self.deadline, self.table.write(request)).await;
    }

    /// Ends the call with `result`, as if the server had answered it so.
    pub(crate) async fn finish(self, result: &rmcp::model::CallToolResult) {
        let Some(waiter) = self.table.waiting().calls.remove(&self.id) else {
            return;
        };
        let id = serde_json::to_vec(&self.id).unwrap_or_default();
        let result = serde_json::to_vec(result).unwrap_or_else(|_| b"{}".to_vec());
        let mut line = br#"{"jsonrpc":"2.0","id":"#.to_vec();
        line.extend_from_slice(&id);
        line.extend_from_slice(br#","result":"#);
        let body = line.len()..line.len() + result.len();
        line.extend_from_slice(&result);
        line.push(b'}');
        let reply = super::RawReply {
            body: Some(body),
            is_error: false,
            line,
        };
        if let crate::wire::Diverted::Forward(forward) =
            waiter.sink.answered(&self.id, &self.table.server, reply)
        {
            let _ = forward.send().await;
        }
    }

    /// Ends the call with `error`, told to its sink.
    pub(crate) async fn fail(self, error: DownstreamError) {
        let waiter = self.table.waiting().calls.remove(&self.id);
        if let Some(forward) = waiter.and_then(|waiter| waiter.sink.failed(&self.id, error)) {
            let _ = forward.send().await;
        }
    }
}
