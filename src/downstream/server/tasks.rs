//! A server's tasks (the extension `io.modelcontextprotocol/tasks` of 2026-07-28,
//! SEP-2663) on rmcp's typed path. A 2026-07-28 host holds the tasks of its own calls: it
//! gets the server's task (or, when it did not declare the extension, the server's
//! `-32021`) as the server gave it, and follows it with `tasks/get`, `tasks/update` and
//! `tasks/cancel` ([`Server::task_request`]). Anyone else (a legacy host, a plan step)
//! cannot hold one, so planmux follows it for them ([`Server::follow`]): a tool that runs
//! only as a task (the server answers `-32021` naming the extension) is called once more
//! declaring it; the task is polled at the server's interval within the call's time limit,
//! its questions go to the host as a legacy server's requests would and their answers back
//! in `tasks/update`, and its end is the call's answer. A call that is cancelled, runs out
//! of time or is dropped cancels the task.
//!
//! A 2025-11-25 server's task (SEP-1686), which rmcp does not model, is followed on the
//! raw path of line connections (`calls/legacy_tasks.rs`), and for other servers (HTTP) by
//! asking for its `tasks/result` ([`Server::call_legacy_task`]).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, CancelTaskRequest,
    ClientCapabilities, ClientRequest, CustomRequest, GetTaskParams, GetTaskRequest, InputRequests,
    JsonObject, ServerResult, TASKS_EXTENSION_ID, Task, TaskPayload, UpdateTaskParams,
    UpdateTaskRequest,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::Server;
use crate::downstream::DownstreamError;
use crate::downstream::calls::{InputTurn, SETTLE};
use crate::downstream::relay::{Caller, InputTo};
use crate::downstream::route::LineRoute;
use crate::policy::Authorized;

/// A task is polled no sooner than this after the last look, whatever the server says.
const MIN_POLL: Duration = Duration::from_millis(50);
/// Nor later than this: a server that asks for hours still gets looked at.
const MAX_POLL: Duration = Duration::from_secs(5);
/// When the server suggests no interval.
const DEFAULT_POLL: Duration = Duration::from_millis(500);

/// Whether planmux follows `caller`'s tasks: anyone but a 2026-07-28 host's own call.
pub(super) fn follows_for(caller: Option<&Caller>) -> bool {
    caller.is_none_or(|c| c.input == InputTo::Host)
}

impl Server {
    /// What planmux declares when it follows a task for `caller`: what it can answer for
    /// them (the host's offer), and the tasks extension.
    pub(super) fn declaring_tasks(&self, caller: Option<&Caller>) -> ClientCapabilities {
        let mut declared = caller
            .and_then(|c| c.capabilities.clone())
            .unwrap_or_else(|| self.host.offer());
        declared
            .extensions
            .get_or_insert_default()
            .insert(TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
        declared
    }

    /// A host's `tasks/get`, `tasks/update` or `tasks/cancel` (its task id the server's),
    /// for the task of a call of `tool`, forwarded with what the host declared.
    pub(crate) async fn task_request(
        self: &Arc<Self>,
        request: ClientRequest,
        tool: &str,
        caller: &Caller,
        cancel: &CancellationToken,
    ) -> Result<ServerResult, DownstreamError> {
        let declared = caller.capabilities.as_ref();
        self.exchange(request, tool, Some(caller), declared, cancel)
            .await
    }

    /// A line connection's call whose tool runs only as a task: sent again on rmcp's typed
    /// path declaring the extension, the task followed, and the call ended with its
    /// result, within the call's time limit.
    pub(super) async fn run_as_task(self: Arc<Self>, turn: InputTurn) {
        let params = crate::wire::decode_checked::<Value>(&turn.request)
            .ok()
            .and_then(|mut request| serde_json::from_value(request["params"].take()).ok());
        let Some(params) = params else {
            let error = DownstreamError::Protocol {
                server: self.config.name.clone(),
                message: format!("its call of {} could not be read again", turn.tool),
            };
            return turn.fail(error).await;
        };
        let declared = Some(self.declaring_tasks(None));
        let ran = self.call_declaring(params, None, declared, &turn.cancel);
        match tokio::time::timeout_at(turn.deadline, ran).await {
            Ok(Ok(CallToolResponse::Complete(result))) => turn.finish(&result).await,
            Ok(Ok(_)) => {
                // planmux follows the task and answers the questions of a call for no
                // caller: it cannot end otherwise.
                let error = DownstreamError::Protocol {
                    server: self.config.name.clone(),
                    message: format!("its call of {} as a task did not end", turn.tool),
                };
                turn.fail(error).await;
            }
            Ok(Err(error)) => turn.fail(error).await,
            // The call's time limit ends it (its table's sweeper says so).
            Err(_) => {}
        }
    }

    /// A call of a 2025-11-25 server's tool that runs only as a task (SEP-1686), which rmcp
    /// does not model. A line server's goes on the raw path, which follows such tasks
    /// (`calls/legacy_tasks.rs`), through the one send of line connections; any other's
    /// goes as a request rmcp passes as it is: the call with `"task": {}`, then
    /// `tasks/result`, which the server answers when the task ends (what it asks meanwhile
    /// reaches the caller as during any call). A call that stops first cancels the task.
    pub(super) async fn call_legacy_task(
        self: &Arc<Self>,
        params: CallToolRequestParams,
        proof: &Authorized,
        caller: Option<&Caller>,
        cancel: &CancellationToken,
    ) -> Result<CallToolResponse, DownstreamError> {
        let server = &self.config.name;
        let tool = params.name.to_string();
        let unreadable = |e: serde_json::Error| DownstreamError::Protocol {
            server: server.clone(),
            message: format!("answered {tool} with no tool result: {e}"),
        };
        // The server's answer, as JSON, as the call's.
        let complete = |answer: Value| {
            serde_json::from_value(answer)
                .map(CallToolResponse::Complete)
                .map_err(unreadable)
        };
        if self.is_line() {
            let route = LineRoute {
                exported: proof.tool().to_owned(),
                tool: tool.clone(),
                server: self.clone(),
            };
            let reply = route.call(proof, params.arguments.as_ref(), caller, cancel);
            return complete(reply.await?.tool_result(server)?);
        }
        let mut call = serde_json::to_value(&params).map_err(unreadable)?;
        call["task"] = Value::Object(JsonObject::new());
        let request = ClientRequest::CustomRequest(CustomRequest::new("tools/call", Some(call)));
        let created = self.exchange(request, &tool, caller, None, cancel).await?;
        let created = serde_json::to_value(created).map_err(unreadable)?;
        let Some(id) = created.pointer("/task/taskId").and_then(Value::as_str) else {
            // The server ran it at once after all: its answer is the call's.
            return complete(created);
        };
        let mut left = Unfinished {
            server: self.clone(),
            task: id.to_owned(),
            declared: ClientCapabilities::default(),
        };
        let result = json!({"taskId": id});
        let request =
            ClientRequest::CustomRequest(CustomRequest::new("tasks/result", Some(result)));
        let ended = self.exchange(request, &tool, caller, None, cancel).await;
        // The server answered: the task ended (a failed task's answer is its error).
        if matches!(ended, Ok(_) | Err(DownstreamError::Rpc { .. })) {
            left.task.clear();
        }
        complete(serde_json::to_value(ended?).map_err(unreadable)?)
    }

    /// Follows `task`, made by a call of `tool` declaring `declared`, to its end within
    /// the call's time limit: the tool's result, or why there is none.
    pub(super) async fn follow(
        self: &Arc<Self>,
        task: Task,
        tool: &str,
        caller: Option<&Caller>,
        declared: &ClientCapabilities,
        cancel: &CancellationToken,
    ) -> Result<CallToolResult, DownstreamError> {
        let mut left = Unfinished {
            server: self.clone(),
            task: task.task_id.clone(),
            declared: declared.clone(),
        };
        let limit = self.config.call_timeout;
        let polled = self.poll(task, tool, caller, declared, cancel);
        let ended = match tokio::time::timeout(limit, polled).await {
            Ok(ended) => ended,
            Err(_) => Err(DownstreamError::Timeout {
                server: self.config.name.clone(),
                tool: tool.to_owned(),
                after: limit,
            }),
        };
        // The task ended as the server says; otherwise it is cancelled (on drop).
        let ended = ended?;
        left.task.clear();
        ended
    }

    /// Looks at the task until it ends, answering what it asks on the way; an error when
    /// following it failed (the task may still run).
    async fn poll(
        self: &Arc<Self>,
        task: Task,
        tool: &str,
        caller: Option<&Caller>,
        declared: &ClientCapabilities,
        cancel: &CancellationToken,
    ) -> Result<TaskEnd, DownstreamError> {
        let server = &self.config.name;
        let id = task.task_id;
        let mut wait = MIN_POLL;
        // A question's key is the task's for good: one already answered that a server
        // still shows (it may lag) is not put to the user again.
        let mut answered = HashSet::new();
        loop {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = cancel.cancelled() => return Err(DownstreamError::Cancelled {
                    server: server.clone(),
                    tool: tool.to_owned(),
                }),
            }
            let get = ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(&id)));
            let got = match self
                .exchange(get, tool, caller, Some(declared), cancel)
                .await?
            {
                ServerResult::GetTaskResult(got) => got.task,
                _ => {
                    return Err(DownstreamError::Protocol {
                        server: server.clone(),
                        message: format!("answered tasks/get for {tool} with something else"),
                    });
                }
            };
            wait = got
                .task
                .poll_interval_ms
                .map_or(DEFAULT_POLL, Duration::from_millis)
                .clamp(MIN_POLL, MAX_POLL);
            let ended = match got.payload {
                TaskPayload::Working => continue,
                TaskPayload::InputRequired { input_requests } => {
                    let new: InputRequests = input_requests
                        .into_iter()
                        .filter(|(key, _)| !answered.contains(key))
                        .collect();
                    if new.is_empty() {
                        continue;
                    }
                    answered.extend(new.keys().cloned());
                    let responses = self.ask_all(new, tool, caller, cancel).await?;
                    let update = UpdateTaskParams::new(&id, responses);
                    let update = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(update));
                    self.exchange(update, tool, caller, Some(declared), cancel)
                        .await?;
                    wait = MIN_POLL;
                    continue;
                }
                TaskPayload::Completed { result } => {
                    serde_json::from_value(result.into()).map_err(|e| DownstreamError::Protocol {
                        server: server.clone(),
                        message: format!("its task for {tool} ended with no tool result: {e}"),
                    })
                }
                TaskPayload::Failed { error } => Err(failure(server, error)),
                _ => Err(DownstreamError::TaskCancelled {
                    server: server.clone(),
                    tool: tool.to_owned(),
                }),
            };
            return Ok(ended);
        }
    }
}

/// How a task ended, as its server says: the tool's result, or why there is none.
type TaskEnd = Result<CallToolResult, DownstreamError>;

/// A failed task's error, as the server's JSON-RPC error.
fn failure(server: &str, error: JsonObject) -> DownstreamError {
    match serde_json::from_value(error.into()) {
        Ok(error) => DownstreamError::Rpc {
            server: server.to_owned(),
            error: Box::new(error),
        },
        Err(e) => DownstreamError::Protocol {
            server: server.to_owned(),
            message: format!("its task failed with an unreadable error: {e}"),
        },
    }
}

/// A task planmux follows and has not seen end: cancelled when the following stops.
struct Unfinished {
    server: Arc<Server>,
    /// Empty once the task ended.
    task: String,
    declared: ClientCapabilities,
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if self.task.is_empty() {
            return;
        }
        let (server, declared) = (self.server.clone(), self.declared.clone());
        let cancel = CancelTaskParams::new(std::mem::take(&mut self.task));
        let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(cancel));
        self.server.tracker.spawn(async move {
            // Bounded: a server that stopped reading must not keep this.
            let never = CancellationToken::new();
            let sent = server.exchange(request, "tasks/cancel", None, Some(&declared), &never);
            let _ = tokio::time::timeout(SETTLE, sent).await;
        });
    }
}
