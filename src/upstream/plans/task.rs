//! A plan run as a task (SEP-2663, the extension `io.modelcontextprotocol/tasks`): a host
//! that declared the extension and sent `"as_task": true` gets a task at once, its id
//! sealed like a server's (bound to `execute_plan`). The plan runs on planmux's
//! [`TaskSet`](crate::task_set::TaskSet) (the runner's, which every session shares):
//! `tasks/get` shows its status and, as a status message, each finished step; its
//! approval, when `[policy] confirm` asks for one, is the task's input request (a form
//! elicitation, answered by `tasks/update`); `tasks/cancel` stops the run; its result is
//! the plan's result.

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResponse, CreateTaskResult, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationSchema, InputRequest,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskContext, TaskExit};

use super::{APPROVAL_KEY, Instead};
use crate::approval::Request;
use crate::downstream::Caller;
use crate::exec::{ItemRecord, Observer, StepRecord};
use crate::plan::{EXECUTE_PLAN_TOOL, PlannedStep, ValidatedPlan};
use crate::policy::{Approval, Approver};
use crate::upstream::{Upstream, sealed};

/// A plan allowed longer than this (its `timeout_ms`) runs as a task for a host that
/// holds tasks, as if it said `"as_task": true`: hosts commonly give up on a call after a
/// minute.
const LONG_PLAN_MS: u64 = 60_000;

/// Whether `plan` runs as a task for a host that holds tasks: it asked to, or it may run
/// longer than [`LONG_PLAN_MS`].
pub(super) fn runs_long(plan: &ValidatedPlan) -> bool {
    plan.as_task() || plan.timeout_ms().is_some_and(|ms| ms > LONG_PLAN_MS)
}

/// Whether the host of `context` holds tasks: it declared the extension.
pub(super) fn holds_tasks(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .is_some_and(|caps| caps.supports_tasks())
}

impl Upstream {
    /// Starts `plan` as a task (`asked`: the approval it needs, asked within the task)
    /// and answers with the task.
    pub(super) fn plan_as_task(
        &self,
        plan: ValidatedPlan,
        asked: Option<Request>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let upstream = self.clone();
        // Each step's call is this session's, as when the plan runs in the call.
        let caller = Caller::of(context, &self.session).for_plan();
        let owner = caller.owner();
        let task = self.runner.tasks.start(move |cx| {
            Box::pin(async move { upstream.run_task(plan, asked, caller, cx).await })
        });
        let mut created = CreateTaskResult::new(task);
        let id = &created.task.task_id;
        created.task.task_id = sealed::task_id(EXECUTE_PLAN_TOOL, id, owner.as_ref())?;
        Ok(CallToolResponse::Task(created))
    }

    /// The task's work: the approval, then the run, until the plan ends or the host
    /// cancels the task.
    async fn run_task(
        self,
        plan: ValidatedPlan,
        asked: Option<Request>,
        caller: Caller,
        cx: TaskContext,
    ) -> Result<rmcp::model::CallToolResult, TaskExit> {
        // Who asked, as the audit trail names the answer.
        let who = (caller.identity.as_ref())
            .map(|i| i.sub.clone())
            .filter(|sub| !sub.is_empty());
        let approval = match asked {
            None => None,
            Some(asked) => match self.approved_in(&asked, &cx, who.as_deref()).await? {
                Ok(approval) => Some(approval),
                Err(Instead(instead)) => return Ok(instead_result(*instead)),
            },
        };
        cx.set_status_message("running");
        let cancel = self.shutdown.child_token();
        // A task shut down (evicted, or planmux stopping) drops this: its steps stop.
        let _stop = cancel.clone().drop_guard();
        let observer = Status(cx.clone());
        let run = self
            .runner
            .run(&plan, approval, Some(caller), &observer, cancel.clone());
        tokio::pin!(run);
        let (record, cancelled) = tokio::select! {
            record = &mut run => (record, false),
            () = cx.cancelled() => {
                cancel.cancel();
                (run.await, true)
            }
        };
        if cancelled {
            return Err(TaskExit::Cancelled);
        }
        Ok(self.answered(record).await)
    }

    /// The user's answer to `asked`, put to the host as the task's input request: the
    /// approval, or the answer to give instead (declined).
    async fn approved_in(
        &self,
        asked: &Request,
        cx: &TaskContext,
        who: Option<&str>,
    ) -> Result<Result<Arc<Approval>, Instead>, TaskExit> {
        cx.set_status_message("waiting for the user's approval");
        crate::metrics::approval(crate::metrics::Approval::Asked);
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: asked.message(),
            requested_schema: ElicitationSchema::new(Default::default()),
        };
        let request = InputRequest::Elicitation(ElicitRequest::new(params));
        let reply = match cx.request_input(APPROVAL_KEY, request).await {
            Ok(reply) => reply,
            Err(exit) => {
                self.runner.decline(asked, Approver::Host, who);
                return Err(exit);
            }
        };
        match serde_json::from_value::<ElicitResult>(reply) {
            Ok(reply) => Ok(self.decided(asked, reply.action, who)),
            Err(e) => {
                self.runner.decline(asked, Approver::Host, who);
                let why = format!("inputResponses.{APPROVAL_KEY}: not an elicitation result: {e}");
                Err(TaskExit::Error(ErrorData::invalid_params(why, None)))
            }
        }
    }
}

/// The tool result an answer given instead of a run is (a declined approval).
fn instead_result(instead: CallToolResponse) -> rmcp::model::CallToolResult {
    match instead {
        CallToolResponse::Complete(result) => result,
        _ => crate::upstream::tool_error("the plan did not run".into()),
    }
}

/// The task's status message: the steps finished so far.
struct Status(TaskContext);

impl Observer for Status {
    fn step_finished(&self, record: &StepRecord, finished: usize, total: usize) {
        let status = record.status.as_str();
        let message = format!("{finished}/{total} done; last: {} {status}", record.id);
        self.0.set_status_message(message);
    }

    fn item_finished(&self, step: &PlannedStep, item: &ItemRecord, finished: usize, total: usize) {
        let (index, status) = (item.index, item.status.as_str());
        let message = format!(
            "{finished}/{total} done; last: {} item {index} {status}",
            step.id
        );
        self.0.set_status_message(message);
    }
}
