//! The tools of the tasks extension's scenarios (SEP-2663, `io.modelcontextprotocol/tasks`,
//! protocol 2026-07-28): `greet` (never a task), `slow_compute`, `failing_job`,
//! `protocol_error_job`, `confirm_delete`, `multi_input` (each run as a task when the call
//! declares the extension) and `test_tool_with_task` (asks a name by input-required result
//! first, then runs as a task), with the names, arguments and texts the scenarios check.
//!
//! planmux's [`TaskSet`] (rmcp's `TaskManager`, one per task) runs each task and answers
//! `tasks/get`, `tasks/update` and `tasks/cancel` for it, keeping the newest
//! [`MAX_TASKS`].

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ContentBlock, CreateTaskResult, GetTaskParams, GetTaskResult, InputRequiredResult, JsonObject,
    Task, Tool, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskContext, TaskExit, TaskFuture};
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use super::mrtr::questions::{Ask, Question, Reply};
use crate::demo::{failure, num_arg, str_arg, tool};
use crate::task_set::TaskSet;

/// How many tasks are kept at once; beyond that the oldest is shut down. The suite keeps a
/// few per scenario.
const MAX_TASKS: usize = 256;
/// How long a task stays observable: rmcp's default, five minutes, far past any scenario's
/// polling (their longest task, `slow_compute` of 60 s, is cancelled).
const TASK_TTL_MS: u64 = rmcp::task_manager::DEFAULT_TASK_TTL_MS;
/// How often a client should poll: the suite polls every 200 ms whatever it is told.
const POLL_INTERVAL_MS: u64 = 200;
/// The longest `slow_compute` sleeps, whatever it is asked: within a task's TTL.
const MAX_SECONDS: f64 = 240.0;
/// How long `failing_job` works before it fails: "~1s", as the scenarios print it.
const FAILING_AFTER: Duration = Duration::from_secs(1);

/// Every tool of the tasks scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TaskTool {
    Greet,
    SlowCompute,
    FailingJob,
    ProtocolErrorJob,
    ConfirmDelete,
    MultiInput,
    /// Asks a name by input-required result, then runs as a task (`tasks-mrtr-composition`).
    WithTask,
}

/// Whether a tool runs as a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Support {
    /// Never: a plain result, whatever the client declared.
    Never,
    /// When the call declares the extension; otherwise it runs while the call waits.
    Optional,
    /// Only as a task: a call that does not declare the extension is refused (-32021).
    Required,
}

impl TaskTool {
    /// The tools, in the order `tools/list` shows them.
    const ALL: [Self; 7] = [
        Self::Greet,
        Self::SlowCompute,
        Self::FailingJob,
        Self::ProtocolErrorJob,
        Self::ConfirmDelete,
        Self::MultiInput,
        Self::WithTask,
    ];

    /// The tool a `tools/call` names, if it is one of these.
    pub(super) fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|job| job.name() == name)
    }

    fn name(self) -> &'static str {
        match self {
            Self::Greet => "greet",
            Self::SlowCompute => "slow_compute",
            Self::FailingJob => "failing_job",
            Self::ProtocolErrorJob => "protocol_error_job",
            Self::ConfirmDelete => "confirm_delete",
            Self::MultiInput => "multi_input",
            Self::WithTask => "test_tool_with_task",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Self::Greet => "SEP-2663: says hello at once, never as a task",
            Self::SlowCompute => "SEP-2663: sleeps `seconds`, as a task when the client can poll",
            Self::FailingJob => "SEP-2663: a task only; fails as a tool after about a second",
            Self::ProtocolErrorJob => "SEP-2663: a task that fails with a protocol error",
            Self::ConfirmDelete => "SEP-2663: a task that asks the client to confirm a deletion",
            Self::MultiInput => "SEP-2663: a task that asks a name and a confirmation at once",
            Self::WithTask => {
                "SEP-2663: asks a name by input-required result, then greets as a task"
            }
        }
    }

    fn schema(self) -> Value {
        let properties = match self {
            Self::Greet => json!({"name": {"type": "string", "description": "Who to greet"}}),
            Self::SlowCompute => json!({
                "seconds": {"type": "number", "description": "How long to work"},
                "label": {"type": "string", "description": "A name for the result"}
            }),
            Self::ConfirmDelete => {
                json!({"filename": {"type": "string", "description": "The file to delete"}})
            }
            Self::FailingJob | Self::ProtocolErrorJob | Self::MultiInput | Self::WithTask => {
                json!({})
            }
        };
        let mut schema = json!({"type": "object", "properties": properties});
        match self {
            Self::Greet => schema["required"] = json!(["name"]),
            Self::ConfirmDelete => schema["required"] = json!(["filename"]),
            _ => {}
        }
        schema
    }

    fn support(self) -> Support {
        match self {
            Self::Greet => Support::Never,
            Self::SlowCompute | Self::ProtocolErrorJob => Support::Optional,
            Self::FailingJob | Self::ConfirmDelete | Self::MultiInput | Self::WithTask => {
                Support::Required
            }
        }
    }
}

/// The tools, as `tools/list` shows them.
pub(super) fn tools() -> Vec<Tool> {
    TaskTool::ALL
        .into_iter()
        .map(|job| tool(job.name(), job.description(), job.schema()))
        .collect()
}

/// `tools/call` of one of these: a task when it may be one and the call declared the
/// extension (in its `_meta` or, for a 2025-11-25 session, at `initialize`).
pub(super) async fn call_tool(
    job: TaskTool,
    request: CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
    tasks: &Tasks,
) -> Result<CallToolResponse, ErrorData> {
    let args = request.arguments.clone().unwrap_or_default();
    let declared = ctx
        .client_capabilities()
        .is_some_and(|c| c.supports_tasks());
    let work = match Work::of(job, &args) {
        Ok(work) => work,
        Err(failed) => return Ok(failed.into()),
    };
    match (job.support(), declared) {
        (Support::Never, _) | (Support::Optional, false) => return Ok(work.now(ctx).await.into()),
        (Support::Required, false) => {
            let required = ClientCapabilities::builder().enable_tasks().build();
            return Err(ErrorData::missing_required_client_capability(required));
        }
        (Support::Optional | Support::Required, true) => {}
    }
    let work = match job {
        TaskTool::WithTask => match ask_name(&request)? {
            Named::Asking(asking) => return Ok(asking.into()),
            Named::Refused(why) => return Ok(failure(why).into()),
            Named::Given(name) => Work::Greet { name },
        },
        _ => work,
    };
    let task = tasks.start(move |cx| Box::pin(work.run(cx)));
    Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
}

/// Where `test_tool_with_task`'s first round stands.
enum Named {
    /// No name yet: the input-required result that asks it.
    Asking(InputRequiredResult),
    Refused(String),
    Given(String),
}

/// `test_tool_with_task`'s question, or the name its answer gave. It keeps nothing between
/// rounds, so it needs no `requestState`.
fn ask_name(request: &CallToolRequestParams) -> Result<Named, ErrorData> {
    let question = Question::UserName;
    let key = question.key();
    let answer = request.input_responses.as_ref().and_then(|r| r.get(key));
    let Some(answer) = answer else {
        let requests = BTreeMap::from([(key.to_owned(), question.ask().request())]);
        return Ok(Named::Asking(InputRequiredResult::new(
            Some(requests),
            None,
        )));
    };
    match question.ask().read(answer) {
        Ok(Reply::Given(name)) => Ok(Named::Given(name)),
        Ok(Reply::Refused) => Ok(Named::Refused(format!("the user did not accept '{key}'"))),
        Err(e) => Err(ErrorData::invalid_params(
            format!("inputResponses.{key}: {e}"),
            None,
        )),
    }
}

/// What a tool does, with what its call gave it: owned, as a task outlives its call.
#[derive(Debug, Clone, PartialEq)]
enum Work {
    /// `greet`, and `test_tool_with_task` once it has the name.
    Greet {
        name: String,
    },
    Compute {
        seconds: f64,
        label: String,
    },
    Fail,
    Crash,
    ConfirmDelete {
        filename: String,
    },
    MultiInput,
}

impl Work {
    /// The work a call asks for, or the failed result its arguments make.
    fn of(job: TaskTool, args: &JsonObject) -> Result<Self, CallToolResult> {
        Ok(match job {
            TaskTool::Greet => Self::Greet {
                name: str_arg(args, "name")?.to_owned(),
            },
            // Its name comes from the client's answer; this is replaced then.
            TaskTool::WithTask => Self::Greet {
                name: String::new(),
            },
            TaskTool::SlowCompute => Self::Compute {
                seconds: num_arg(args, "seconds")?
                    .unwrap_or(1.0)
                    .clamp(0.0, MAX_SECONDS),
                label: args
                    .get("label")
                    .and_then(Value::as_str)
                    .unwrap_or("slow_compute")
                    .to_owned(),
            },
            TaskTool::FailingJob => Self::Fail,
            TaskTool::ProtocolErrorJob => Self::Crash,
            TaskTool::ConfirmDelete => Self::ConfirmDelete {
                filename: str_arg(args, "filename")?.to_owned(),
            },
            TaskTool::MultiInput => Self::MultiInput,
        })
    }

    /// Runs it while the call waits (a client that cannot poll): until it ends or the call
    /// is cancelled. Only `greet`, `slow_compute` and `protocol_error_job` run so.
    async fn now(self, ctx: &RequestContext<RoleServer>) -> CallToolResult {
        let outcome = match self {
            Self::Greet { name } => Ok(greeting(&name)),
            Self::Compute { seconds, label } => compute(seconds, &label, ctx.ct.cancelled())
                .await
                .ok_or(TaskExit::Cancelled),
            Self::Crash => Err(TaskExit::Error(crash())),
            Self::Fail | Self::ConfirmDelete { .. } | Self::MultiInput => Ok(failure(
                "this tool runs only as a task: declare the tasks extension",
            )),
        };
        match outcome {
            Ok(result) => result,
            Err(TaskExit::Cancelled) => failure("cancelled"),
            Err(TaskExit::Error(e)) => failure(e.message.into_owned()),
        }
    }

    /// Runs it as a task: a tool's failure completes it with `isError`, a protocol error
    /// fails it, and `tasks/cancel` cancels it (sleeping or waiting for the client).
    async fn run(self, cx: TaskContext) -> Result<CallToolResult, TaskExit> {
        match self {
            Self::Greet { name } => Ok(greeting(&name)),
            Self::Compute { seconds, label } => compute(seconds, &label, cx.cancelled())
                .await
                .ok_or(TaskExit::Cancelled),
            Self::Fail => {
                tokio::select! {
                    _ = tokio::time::sleep(FAILING_AFTER) => {
                        Ok(failure("failing_job failed, as it always does"))
                    }
                    _ = cx.cancelled() => Err(TaskExit::Cancelled),
                }
            }
            Self::Crash => Err(TaskExit::Error(crash())),
            Self::ConfirmDelete { filename } => {
                let confirm = Ask::Form {
                    message: "Delete the file?",
                    field: "confirm",
                    boolean: true,
                };
                Ok(match ask(&cx, "confirm", confirm).await? {
                    Reply::Given(yes) if yes == "true" => text(format!("Deleted {filename}.")),
                    _ => text(format!("Kept {filename}: the deletion was not confirmed.")),
                })
            }
            Self::MultiInput => {
                let name = Ask::Form {
                    message: "What is your name?",
                    field: "name",
                    boolean: false,
                };
                let confirm = Ask::Form {
                    message: "Do you confirm?",
                    field: "confirm",
                    boolean: true,
                };
                let (name, confirm) =
                    tokio::join!(ask(&cx, "name", name), ask(&cx, "confirm", confirm));
                let said = |reply: Reply| match reply {
                    Reply::Given(text) => text,
                    Reply::Refused => "(refused)".to_owned(),
                };
                Ok(text(format!(
                    "name: {}; confirmed: {}",
                    said(name?),
                    said(confirm?)
                )))
            }
        }
    }
}

/// Asks the client one question from inside a task, and reads its answer (`tasks/update`).
async fn ask(cx: &TaskContext, key: &str, ask: Ask) -> Result<Reply, TaskExit> {
    let answer = cx.request_input(key, ask.request()).await?;
    ask.read(&answer).map_err(|e| {
        let message = format!("inputResponses.{key}: {e}");
        TaskExit::Error(ErrorData::invalid_params(message, None))
    })
}

/// `slow_compute`: its result after `seconds`, or `None` if `stop` came first.
async fn compute(
    seconds: f64,
    label: &str,
    stop: impl Future<Output = ()>,
) -> Option<CallToolResult> {
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_secs_f64(seconds)) => {
            Some(text(format!("Computed '{label}' in {seconds} s.")))
        }
        _ = stop => None,
    }
}

fn greeting(name: &str) -> CallToolResult {
    text(format!("Hello, {name}!"))
}

/// `protocol_error_job`'s error: the server failing, not the tool.
fn crash() -> ErrorData {
    ErrorData::internal_error("protocol_error_job crashed, as it always does", None)
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

/// The tasks, the newest [`MAX_TASKS`] kept. One set serves every instance an HTTP
/// listener makes (each 2026-07-28 request gets a fresh handler), so a `tasks/get` finds
/// the task a `tools/call` started.
pub(super) struct Tasks(TaskSet);

impl Default for Tasks {
    fn default() -> Self {
        Self(TaskSet::new(MAX_TASKS, TASK_TTL_MS, POLL_INTERVAL_MS))
    }
}

impl Tasks {
    /// Starts `work` as a task; it is observable by `tasks/get` before this returns.
    fn start(&self, work: impl FnOnce(TaskContext) -> TaskFuture) -> Task {
        self.0.start(work)
    }

    /// `tasks/get`.
    pub(super) fn get(&self, request: GetTaskParams) -> Result<GetTaskResult, ErrorData> {
        self.0.get(&request.task_id).map(GetTaskResult::new)
    }

    /// `tasks/update`: answers the task's questions; keys it did not ask are ignored.
    pub(super) fn update(&self, request: UpdateTaskParams) -> Result<(), ErrorData> {
        self.0.update(&request.task_id, request.input_responses)
    }

    /// `tasks/cancel`: asks the task to stop; a finished task stays as it ended.
    pub(super) fn cancel(&self, request: CancelTaskParams) -> Result<(), ErrorData> {
        tracing::info!(task = %request.task_id, "tasks/cancel");
        self.0.cancel(&request.task_id)
    }
}

#[cfg(test)]
mod tests;
