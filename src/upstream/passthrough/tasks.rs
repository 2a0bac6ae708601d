//! Tasks of 2025-11-25 (SEP-1686) for a stdio host of that era. rmcp 3.9 models none:
//! it drops a call's `task` field and reads `tasks/get` as the 2026-07-28 extension's,
//! so these messages are taken off the host's line here, before rmcp sees them. A
//! `tools/call` of a downstream tool with a `task` runs as a task of planmux's own (on a
//! [`TaskSet`]: it passes the checkpoint first, and the call follows a server's own task
//! as any call does); `tasks/get`, `tasks/result` (answered when the task ends),
//! `tasks/list` and `tasks/cancel` are answered from that set, in 2025-11-25's shapes.
//! What the call's server asks meanwhile reaches the host as during any call. planmux
//! says it can in its `initialize` answer (`capabilities.tasks`, [`offered_in`]).

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolResult, DetailedTask, ErrorData, JsonObject, JsonRpcMessage, ServerResult, TaskPayload,
};
use rmcp::service::TxJsonRpcMessage;
use rmcp::task_manager::TaskExit;
use serde_json::{Map, Value, json};

use super::Passthrough;
use crate::policy::Route;
use crate::upstream::host_answer;

/// How many of the host's tasks are kept (each observable until its time-to-live).
pub(super) const KEPT: usize = 64;
/// How long a task stays observable when the host asks for no time-to-live.
pub(super) const TTL_MS: u64 = 5 * 60 * 1000;
/// How often the host should poll.
pub(super) const POLL_MS: u64 = 500;
/// How often `tasks/result` looks whether its task ended.
const LOOK: Duration = Duration::from_millis(50);
/// The key of a result's task in its `_meta`.
const RELATED: &str = "io.modelcontextprotocol/related-task";

/// planmux's `initialize` answer with the `tasks` capability a 2025-11-25 stdio host is
/// offered (rmcp's capabilities have no such field); `None` for any other message.
pub fn offered_in(message: &TxJsonRpcMessage<RoleServer>) -> Option<Vec<u8>> {
    let JsonRpcMessage::Response(response) = message else {
        return None;
    };
    let ServerResult::InitializeResult(_) = &response.result else {
        return None;
    };
    let mut value = serde_json::to_value(message).ok()?;
    let capabilities = value.pointer_mut("/result/capabilities")?.as_object_mut()?;
    let offer = json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
    capabilities.insert("tasks".into(), offer);
    serde_json::to_vec(&value).ok()
}

/// One of the host's task messages, read.
struct Message {
    /// The request's id, as JSON text.
    id: String,
    method: String,
    params: Map<String, Value>,
}

impl Passthrough {
    /// Takes the host's line when it is a 2025-11-25 task message planmux answers: a
    /// `tools/call` of a downstream tool with a `task`, or `tasks/*`. Whether it took it.
    pub(super) fn claim_task(self: &Arc<Self>, line: &[u8]) -> bool {
        if self.task.find(line).is_none() || !self.host_fits() {
            return false;
        }
        let Some(message) = read(line) else {
            return false;
        };
        let ours = match message.method.as_str() {
            "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" => true,
            "tools/call" => {
                let name = message.params.get("name").and_then(Value::as_str);
                message.params.get("task").is_some_and(Value::is_object)
                    && name.is_some_and(|name| self.upstream.is_downstream_tool(name))
            }
            _ => false,
        };
        if ours {
            self.tasks.spawn(self.clone().answer_task(message));
        }
        ours
    }

    /// Answers one task message.
    async fn answer_task(self: Arc<Self>, message: Message) {
        let id = message.params.get("taskId").and_then(Value::as_str);
        let id = id.unwrap_or_default().to_owned();
        let answer = match message.method.as_str() {
            "tools/call" => self.start_task(message.params).await,
            "tasks/get" => self.held.get(&id).map(|task| legacy(&task)),
            "tasks/list" => {
                let tasks: Vec<Value> = self.held.list().iter().map(legacy).collect();
                Ok(json!({"tasks": tasks}))
            }
            "tasks/cancel" => self.cancel_task(&id).await,
            _ => self.task_result(&id).await,
        };
        let (key, body) = match answer {
            Ok(result) => ("result", result),
            Err(error) => ("error", json!(error)),
        };
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{},"{key}":{}}}"#,
            message.id, body
        );
        let _ = self.writer.send(line.into_bytes()).await;
    }

    /// A `tools/call` with a `task`: through the checkpoint, then started as a task.
    async fn start_task(&self, mut params: Map<String, Value>) -> Result<Value, ErrorData> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let downstreams = self.upstream.downstreams.clone();
        let proof = downstreams
            .authorize(name, &Route::Direct)
            .await
            .map_err(|denied| ErrorData::invalid_params(denied.to_string(), None))?;
        let arguments = match params.remove("arguments") {
            Some(Value::Object(arguments)) => Some(arguments),
            _ => None,
        };
        let shutdown = self.upstream.shutdown.clone();
        let task = self.held.start(move |cx| {
            Box::pin(async move {
                let cancel = shutdown.child_token();
                let _stop = cancel.clone().drop_guard();
                let name = proof.tool().to_owned();
                let call = downstreams.call_tool_json(&name, arguments, &proof, None, &cancel);
                tokio::pin!(call);
                let called = tokio::select! {
                    called = &mut call => called,
                    () = cx.cancelled() => {
                        cancel.cancel();
                        let _ = call.await;
                        return Err(TaskExit::Cancelled);
                    }
                };
                let result = called.and_then(|value| {
                    serde_json::from_value::<CallToolResult>(value).map_err(|e| {
                        crate::downstream::DownstreamError::Protocol {
                            server: name.clone(),
                            message: format!("answered with no tool result: {e}"),
                        }
                    })
                });
                match result {
                    Ok(result) => Ok(result),
                    Err(error) => host_answer(error).map_err(TaskExit::Error),
                }
            })
        });
        let task = self.held.get(&task.task_id)?;
        Ok(json!({"task": legacy(&task)}))
    }

    /// `tasks/cancel`: the task asked to stop; the task as it is once it settled (within
    /// a second).
    async fn cancel_task(&self, id: &str) -> Result<Value, ErrorData> {
        self.held.cancel(id)?;
        let mut task = self.held.get(id)?;
        for _ in 0..20 {
            if task.status().is_terminal() {
                break;
            }
            tokio::time::sleep(LOOK).await;
            task = self.held.get(id)?;
        }
        Ok(legacy(&task))
    }

    /// `tasks/result`: the task's result once it ended (its error, if it failed).
    async fn task_result(&self, id: &str) -> Result<Value, ErrorData> {
        loop {
            let task = self.held.get(id)?;
            match task.payload {
                TaskPayload::Completed { mut result } => {
                    // A host before 2026-07-28 must not get it.
                    result.remove("resultType");
                    let meta = result
                        .entry("_meta")
                        .or_insert_with(|| Value::Object(JsonObject::new()));
                    if let Some(meta) = meta.as_object_mut() {
                        meta.insert(RELATED.into(), json!({"taskId": id}));
                    }
                    return Ok(Value::Object(result));
                }
                TaskPayload::Failed { error } => {
                    return Err(serde_json::from_value(Value::Object(error)).unwrap_or_else(
                        |_| ErrorData::internal_error(format!("task '{id}' failed"), None),
                    ));
                }
                TaskPayload::Cancelled => {
                    let why = format!("task '{id}' was cancelled");
                    return Err(ErrorData::internal_error(why, None));
                }
                _ => tokio::time::sleep(LOOK).await,
            }
        }
    }
}

/// A task in 2025-11-25's shape.
fn legacy(task: &DetailedTask) -> Value {
    let base = &task.task;
    // The statuses are named alike in both eras.
    let mut legacy = json!({
        "taskId": base.task_id,
        "status": task.status(),
        "createdAt": base.created_at,
        "lastUpdatedAt": base.last_updated_at,
        "ttl": base.ttl_ms,
    });
    if let Some(poll) = base.poll_interval_ms {
        legacy["pollInterval"] = json!(poll);
    }
    if let Some(message) = &base.status_message {
        legacy["statusMessage"] = json!(message);
    }
    legacy
}

/// The host's line as a request: its id (as JSON text), method and params.
fn read(line: &[u8]) -> Option<Message> {
    let mut message: Map<String, Value> = crate::wire::decode_checked(line).ok()?;
    let id = serde_json::to_string(message.get("id")?).ok()?;
    let method = message.get("method")?.as_str()?.to_owned();
    let params = match message.remove("params") {
        Some(Value::Object(params)) => params,
        _ => Map::new(),
    };
    Some(Message { id, method, params })
}
