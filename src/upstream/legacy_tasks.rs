//! Tasks of 2025-11-25 (SEP-1686) for a host of that era, which rmcp 3.9 does not model:
//! it drops a call's `task` field and reads `tasks/get` as the 2026-07-28 extension's. So
//! these messages are caught before rmcp reads them: the stdio passthrough takes them off
//! the host's line, and the HTTP front hands them to rmcp renamed ([`RENAMED`], marked
//! with [`Renamed`] so that no host can send them so itself). Either way they end here.
//!
//! A `tools/call` of a downstream tool with a `task` passes the checkpoint, then runs as a
//! task of the session's own ([`TaskSet`]; the call follows a server's own task as any
//! call does); `tasks/get`, `tasks/result` (answered when the task ends), `tasks/list` and
//! `tasks/cancel` are answered from that set, in 2025-11-25's shapes. What the call's
//! server asks meanwhile reaches the host as during any call (over HTTP, on the session's
//! standalone stream: the call's own has closed). planmux says it can in its `initialize`
//! answer ([`offer`]).

use std::time::Duration;

use rmcp::model::{
    CallToolResult, CustomNotification, CustomRequest, CustomResult, DetailedTask, ErrorData,
    JsonObject, ServerNotification, ServerResult, TaskPayload,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::TaskExit;
use rmcp::{Peer, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use super::Upstream;
use crate::downstream::{Caller, DownstreamError};
use crate::policy::Route;
use crate::task_set::TaskSet;
use crate::upstream::host_answer;

/// How many of a session's tasks are kept (each observable until its time-to-live).
const KEPT: usize = 64;
/// How long a task stays observable.
const TTL_MS: u64 = 5 * 60 * 1000;
/// How often the host should poll.
const POLL_MS: u64 = 500;
/// How often `tasks/result` looks whether its task ended.
const LOOK: Duration = Duration::from_millis(50);
/// The notification of a task's new status.
const STATUS: &str = "notifications/tasks/status";
/// The key of a result's task in its `_meta`.
const RELATED: &str = "io.modelcontextprotocol/related-task";
/// The methods answered here, each named on the HTTP front as [`RENAMED`] + its name.
pub const METHODS: [&str; 5] = [
    "tools/call",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
];
/// How the HTTP front names them to rmcp.
pub const RENAMED: &str = "planmux/2025-11-25/";

/// The HTTP front's mark on a request it renamed (an extension of the HTTP request,
/// which no host can set).
#[derive(Clone, Copy, Debug)]
pub struct Renamed;

/// A session's 2025-11-25 tasks.
pub fn task_set() -> TaskSet {
    TaskSet::new(KEPT, TTL_MS, POLL_MS)
}

/// Offers tasks in `result`, an `initialize` answer to a 2025-11-25 host (rmcp's
/// capabilities have no such field); whether it was one.
pub fn offer(result: &mut Value) -> bool {
    let Some(capabilities) = result
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    else {
        return false;
    };
    let offer = json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
    capabilities.insert("tasks".into(), offer);
    true
}

/// The method of `request` when the HTTP front renamed it (`None` for any other).
pub(super) fn renamed<'a>(
    request: &'a CustomRequest,
    context: &RequestContext<RoleServer>,
) -> Option<&'a str> {
    let method = request.method.strip_prefix(RENAMED)?;
    let parts = context.extensions.get::<http::request::Parts>()?;
    parts.extensions.get::<Renamed>()?;
    Some(method)
}

impl Upstream {
    /// A message the HTTP front renamed: a `tools/call` of anything but a downstream tool
    /// runs as without a `task` (as rmcp runs it for a stdio host); the rest is answered
    /// here, for the session's request.
    pub(super) async fn legacy_task_request(
        &self,
        method: &str,
        params: Option<Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let params = match params {
            Some(Value::Object(params)) => params,
            _ => Map::new(),
        };
        if !self.is_legacy_task(method, &params) {
            let call = serde_json::from_value(Value::Object(params))
                .map_err(|e| ErrorData::invalid_params(format!("tools/call: {e}"), None))?;
            // The host's own call, as rmcp would have handed it over (its checkpoint is
            // in there).
            let answer = <Self as ServerHandler>::call_tool(self, call, context.clone()).await?;
            let answer = ServerResult::from(answer);
            let mut answer = serde_json::to_value(answer)
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            // A host before 2026-07-28 must not get it.
            if let Some(result) = answer.as_object_mut() {
                result.remove("resultType");
            }
            return Ok(CustomResult(answer));
        }
        let caller = Caller::of(context, &self.session);
        let answer = self.answer_legacy_task(method, params, Some(caller));
        answer.await.map(CustomResult)
    }

    /// Whether a host's `method` with `params` is one answered here: `tasks/*`, or a
    /// `tools/call` of a downstream tool with a `task`.
    pub(super) fn is_legacy_task(&self, method: &str, params: &Map<String, Value>) -> bool {
        match method {
            "tools/call" => {
                let name = params.get("name").and_then(Value::as_str);
                params.get("task").is_some_and(Value::is_object)
                    && name.is_some_and(|name| self.is_downstream_tool(name))
            }
            _ => METHODS.contains(&method),
        }
    }

    /// Answers one of the host's task messages ([`Self::is_legacy_task`]); `caller` is
    /// the session's request, over HTTP.
    pub(super) async fn answer_legacy_task(
        &self,
        method: &str,
        params: Map<String, Value>,
        caller: Option<Caller>,
    ) -> Result<Value, ErrorData> {
        let id = params.get("taskId").and_then(Value::as_str);
        let id = id.unwrap_or_default().to_owned();
        match method {
            "tools/call" => self.start_legacy_task(params, caller).await,
            "tasks/get" => self.legacy_tasks.get(&id).map(|task| legacy(&task)),
            "tasks/list" => {
                let tasks: Vec<Value> = self.legacy_tasks.list().iter().map(legacy).collect();
                Ok(json!({"tasks": tasks}))
            }
            "tasks/cancel" => self.cancel_legacy_task(&id).await,
            _ => self.legacy_task_result(&id).await,
        }
    }

    /// A `tools/call` with a `task`: through the checkpoint, then started as a task.
    async fn start_legacy_task(
        &self,
        mut params: Map<String, Value>,
        caller: Option<Caller>,
    ) -> Result<Value, ErrorData> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let downstreams = self.downstreams.clone();
        let grant = downstreams.grant(caller.as_ref().and_then(|c| c.identity.as_ref()));
        let proof = downstreams
            .authorize(name, &Route::Direct, &grant)
            .await
            .map_err(|denied| ErrorData::invalid_params(denied.to_string(), None))?;
        let arguments = match params.remove("arguments") {
            Some(Value::Object(arguments)) => Some(arguments),
            _ => None,
        };
        let peer = caller
            .as_ref()
            .map(|c| c.peer.clone())
            .or_else(|| self.host.get());
        // The host's request is answered with the task: its stream closes, and it follows
        // no progress.
        let caller = caller.map(|caller| Caller {
            request: None,
            progress: None,
            ..caller
        });
        let shutdown = self.shutdown.clone();
        let task = self.legacy_tasks.start(move |cx| {
            Box::pin(async move {
                let cancel = shutdown.child_token();
                let _stop = cancel.clone().drop_guard();
                let name = proof.tool().to_owned();
                let call =
                    downstreams.call_tool_json(&name, arguments, &proof, caller.as_ref(), &cancel);
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
                        DownstreamError::Protocol {
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
        self.tell_when_ended(&task.task_id, peer);
        let task = self.legacy_tasks.get(&task.task_id)?;
        Ok(json!({"task": legacy(&task)}))
    }

    /// Sends the host `notifications/tasks/status` once task `id` ended (its only change
    /// of status after `working`; the host may rely on `tasks/get` instead).
    fn tell_when_ended(&self, id: &str, peer: Option<Peer<RoleServer>>) {
        let Some(peer) = peer else { return };
        let (held, id, shutdown) = (
            self.legacy_tasks.clone(),
            id.to_owned(),
            self.shutdown.clone(),
        );
        self.downstreams.track(async move {
            let ended = loop {
                tokio::select! {
                    () = tokio::time::sleep(LOOK) => {}
                    () = shutdown.cancelled() => return,
                }
                match held.get(&id) {
                    Ok(task) if task.status().is_terminal() => break task,
                    Ok(_) => {}
                    Err(_) => return,
                }
            };
            let status = CustomNotification::new(STATUS, Some(legacy(&ended)));
            let told = peer.send_notification(ServerNotification::CustomNotification(status));
            // Bounded: a host that stopped reading must not keep this.
            let _ = tokio::time::timeout(Duration::from_secs(1), told).await;
        });
    }

    /// `tasks/cancel`: the task asked to stop; the task as it is once it settled (within
    /// a second).
    async fn cancel_legacy_task(&self, id: &str) -> Result<Value, ErrorData> {
        self.legacy_tasks.cancel(id)?;
        let mut task = self.legacy_tasks.get(id)?;
        for _ in 0..20 {
            if task.status().is_terminal() {
                break;
            }
            tokio::time::sleep(LOOK).await;
            task = self.legacy_tasks.get(id)?;
        }
        Ok(legacy(&task))
    }

    /// `tasks/result`: the task's result once it ended (its error, if it failed).
    async fn legacy_task_result(&self, id: &str) -> Result<Value, ErrorData> {
        loop {
            let task = self.legacy_tasks.get(id)?;
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
