//! A 2026-07-28 host's follow-ups of the tasks its calls made (SEP-2663: `tasks/get`,
//! `tasks/update`, `tasks/cancel`). The host names a task by planmux's sealed id
//! (`sealed.rs`), which says whose call made it; each follow-up passes the checkpoint as
//! a call of that tool would (a tool denied since then reaches its task no more) and goes
//! to its server under the server's own id. What the server answers comes back as it
//! gave it, under the host's id. A plan running as a task (`plans/task.rs`) is
//! planmux's own: its follow-ups go to the runner's tasks.

use rmcp::model::{
    CancelTaskParams, CancelTaskRequest, ClientRequest, GetTaskParams, GetTaskRequest,
    GetTaskResult, ResultType, ServerResult, UpdateTaskParams, UpdateTaskRequest,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::answers::{cancellable, routed_error};
use super::{Upstream, sealed};
use crate::downstream::Caller;
use crate::plan::EXECUTE_PLAN_TOOL;
use crate::policy::Route;

impl Upstream {
    /// The host's `tasks/get`: the task as its server describes it.
    pub(super) async fn get_task_downstream(
        &self,
        mut params: GetTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let named = params.task_id.clone();
        let (tool, id) = sealed::open_task_id(&named, self.viewer(context).as_ref())?;
        if tool == EXECUTE_PLAN_TOOL {
            let mut got = GetTaskResult::new(self.runner.tasks.get(&id)?);
            got.task.task.task_id = named;
            return Ok(got);
        }
        params.task_id = id;
        let request = ClientRequest::GetTaskRequest(GetTaskRequest::new(params));
        match self.task_request(request, &tool, context).await? {
            ServerResult::GetTaskResult(mut got) => {
                got.task.task.task_id = named;
                got.result_type = ResultType::COMPLETE;
                Ok(got)
            }
            _ => Err(not_an_answer("tasks/get", &tool)),
        }
    }

    /// The host's `tasks/update`: its answers to what the task asked.
    pub(super) async fn update_task_downstream(
        &self,
        mut params: UpdateTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (tool, id) = sealed::open_task_id(&params.task_id, self.viewer(context).as_ref())?;
        if tool == EXECUTE_PLAN_TOOL {
            return self.runner.tasks.update(&id, params.input_responses);
        }
        params.task_id = id;
        let request = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(params));
        acknowledged(self.task_request(request, &tool, context).await?, &tool)
    }

    /// The host's `tasks/cancel`.
    pub(super) async fn cancel_task_downstream(
        &self,
        mut params: CancelTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (tool, id) = sealed::open_task_id(&params.task_id, self.viewer(context).as_ref())?;
        if tool == EXECUTE_PLAN_TOOL {
            return self.runner.tasks.cancel(&id);
        }
        params.task_id = id;
        let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(params));
        acknowledged(self.task_request(request, &tool, context).await?, &tool)
    }

    /// `request`, about a task a call of `tool` made, through the checkpoint to its
    /// server; cancelled with the host's request.
    async fn task_request(
        &self,
        request: ClientRequest,
        tool: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let proof = self
            .downstreams
            .authorize(tool, &Route::Direct, &self.grant(context))
            .await
            .map_err(|denied| ErrorData::invalid_params(denied.to_string(), None))?;
        let caller = Caller::of(context, &self.session);
        let cancel = self.shutdown.child_token();
        let answer = self
            .downstreams
            .task_request(request, &proof, &caller, &cancel);
        cancellable(answer, &cancel, context)
            .await
            .map_err(routed_error)
    }
}

/// A `tasks/update` or `tasks/cancel` answer: an empty acknowledgement.
fn acknowledged(answer: ServerResult, tool: &str) -> Result<(), ErrorData> {
    match answer {
        ServerResult::TaskAckResult(_) | ServerResult::EmptyResult(_) => Ok(()),
        _ => Err(not_an_answer("a task's acknowledgement", tool)),
    }
}

fn not_an_answer(what: &str, tool: &str) -> ErrorData {
    ErrorData::internal_error(
        format!("the server of {tool} answered {what} with something else"),
        None,
    )
}
