//! A host's call of a server's tool on rmcp's typed path, and what a 2026-07-28 server
//! asks during a call (MRTR: an `input_required` result instead of requests during the
//! call). A 2026-07-28 host's own call gets that result as the server gave it
//! ([`InputTo::Caller`]); for anyone else planmux puts each question to the host as the
//! request a legacy server would have sent (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`: [`Relay::answer`]) and calls again with the
//! answers and the server's `requestState`, at most [`MAX_ROUNDS`] times. On a line
//! connection the rounds go through the call's table (`calls/asked.rs`) and the
//! [`Server::answerer`] here. A task the server makes of the call is the caller's or
//! followed by planmux, by the same rule (`tasks.rs`).

use std::sync::Arc;

use futures::future::try_join_all;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientRequest,
    DEFAULT_MRTR_MAX_ROUNDS, InputRequests, InputRequiredResult, InputResponses, ServerResult,
};
use tokio_util::sync::CancellationToken;

use super::Server;
use super::tasks::follows_for;
use crate::downstream::DownstreamError;
use crate::downstream::calls::{Answerer, InputTurn, Wants};
use crate::downstream::era::Era;
use crate::downstream::relay::{Caller, InputTo, Relay};
use crate::policy::Authorized;
use crate::traces::{self, FutureExt as _};

/// At most this many rounds of questions per call (rmcp's bound for its own client).
pub const MAX_ROUNDS: usize = DEFAULT_MRTR_MAX_ROUNDS;

impl Server {
    /// Forwards one `tools/call` (its name already the downstream's) for `caller` and
    /// returns the downstream's answer unchanged, once the server's questions are
    /// answered and its task followed (unless they are the caller's). The only way to a
    /// downstream tool on this path: it takes the checkpoint's proof.
    pub(crate) async fn call(
        self: &Arc<Self>,
        params: CallToolRequestParams,
        proof: &Authorized,
        caller: Option<&Caller>,
        cancel: &CancellationToken,
    ) -> Result<CallToolResponse, DownstreamError> {
        let started =
            crate::metrics::on().then(|| (std::time::Instant::now(), params.name.to_string()));
        let span = traces::outgoing(
            format!("call {}/{}", self.config.name, params.name),
            vec![
                traces::attribute("planmux.server", self.config.name.clone()),
                traces::attribute("planmux.tool", params.name.to_string()),
            ],
        );
        let calling = async {
            if self.era() == Era::Legacy && self.fields.runs_only_as_task(&params.name) {
                Box::pin(self.call_legacy_task(params, proof, caller, cancel)).await
            } else {
                let declared = caller.and_then(|c| c.capabilities.clone());
                // On the heap: its rounds and tasks make a large future, which a debug
                // build would copy along the stack of every caller's.
                Box::pin(self.call_declaring(params, caller, declared, cancel)).await
            }
        };
        let answer = match &span {
            Some(cx) => calling.with_context(cx.clone()).await,
            None => calling.await,
        };
        if started.is_none() && span.is_none() {
            return answer;
        }
        let error = match &answer {
            Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => {
                Some("the tool's result is an error".to_owned())
            }
            Ok(_) => None,
            Err(error) => Some(error.to_string()),
        };
        if let Some((started, tool)) = started {
            crate::metrics::call_ended(
                &self.config.name,
                &tool,
                started.elapsed(),
                error.is_some(),
            );
        }
        if let Some(cx) = span {
            traces::end(&cx, Vec::new(), error);
        }
        answer
    }

    /// [`Self::call`], telling a 2026-07-28 server the client can answer what `declared`
    /// says (else what planmux's connection declared).
    pub(super) async fn call_declaring(
        self: &Arc<Self>,
        mut params: CallToolRequestParams,
        caller: Option<&Caller>,
        mut declared: Option<ClientCapabilities>,
        cancel: &CancellationToken,
    ) -> Result<CallToolResponse, DownstreamError> {
        let tool = params.name.to_string();
        // Declaring the tasks extension for a caller planmux follows tasks for is not a
        // round of questions.
        let mut rounds = 0;
        while rounds <= MAX_ROUNDS {
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
            let answer = self
                .exchange(request, &tool, caller, declared.as_ref(), cancel)
                .await;
            let asked = match answer {
                Ok(ServerResult::CallToolResult(result)) => {
                    return Ok(CallToolResponse::Complete(result));
                }
                Ok(ServerResult::InputRequiredResult(asked)) => asked,
                Ok(ServerResult::CreateTaskResult(created)) if !follows_for(caller) => {
                    return Ok(CallToolResponse::Task(created));
                }
                Ok(ServerResult::CreateTaskResult(created)) => {
                    let declared = declared.unwrap_or_else(|| self.declaring_tasks(caller));
                    // On the heap: following is rare, and would double every call's future.
                    let followed = self.follow(created.task, &tool, caller, &declared, cancel);
                    return Box::pin(followed).await.map(CallToolResponse::Complete);
                }
                Err(error) if follows_for(caller) && error.needs_tasks() => {
                    // Asked again even though the extension was declared: that is final.
                    if declared
                        .as_ref()
                        .is_some_and(ClientCapabilities::supports_tasks)
                    {
                        return Err(error);
                    }
                    declared = Some(self.declaring_tasks(caller));
                    continue;
                }
                Err(error) => return Err(error),
                Ok(_) => {
                    return Err(DownstreamError::Protocol {
                        server: self.config.name.clone(),
                        message: "answered tools/call with something that is not a tool result"
                            .into(),
                    });
                }
            };
            if caller.is_some_and(|c| c.input == InputTo::Caller) {
                return Ok(CallToolResponse::InputRequired(asked));
            }
            if rounds == MAX_ROUNDS {
                break;
            }
            rounds += 1;
            // The host (its user) answers within the call's time limit, as a legacy
            // server's request during the call would have to.
            let limit = self.config.call_timeout;
            let answers = self.answers(asked, &tool, caller, cancel);
            let (responses, state) =
                tokio::time::timeout(limit, answers).await.map_err(|_| {
                    DownstreamError::Timeout {
                        server: self.config.name.clone(),
                        tool: tool.clone(),
                        after: limit,
                    }
                })??;
            params.input_responses = responses;
            params.request_state = state;
        }
        Err(self.too_many_rounds(&tool))
    }

    /// Who takes a line connection's rounds of questions: each on a task of the server's.
    pub(in crate::downstream) fn answerer(self: &Arc<Self>) -> Answerer {
        let server = Arc::downgrade(self);
        Arc::new(move |turn| {
            if let Some(server) = server.upgrade() {
                let tracker = server.tracker.clone();
                tracker.spawn(async move { server.answer_turn(turn).await });
            }
        })
    }

    /// One round of a line connection's call: the questions put to the host (during the
    /// call, whoever it is for is found as for a legacy server's request), the call sent
    /// again, or ended saying why not.
    async fn answer_turn(self: Arc<Self>, turn: InputTurn) {
        if turn.wants == Wants::Task {
            return self.run_as_task(turn).await;
        }
        if turn.round >= MAX_ROUNDS {
            let error = self.too_many_rounds(&turn.tool);
            return turn.fail(error).await;
        }
        let asked = crate::wire::decode_checked::<InputRequiredResult>(&turn.asked);
        let asked = match asked {
            Ok(asked) => asked,
            Err(e) => {
                let error = DownstreamError::Protocol {
                    server: self.config.name.clone(),
                    message: format!("answered tools/call with an unreadable input_required: {e}"),
                };
                return turn.fail(error).await;
            }
        };
        let limit = turn.deadline;
        let answered = tokio::time::timeout_at(
            limit,
            self.answers(asked, &turn.tool, turn.caller.as_ref(), &turn.cancel),
        );
        match answered.await {
            Ok(Ok((responses, state))) => turn.resume(responses, state).await,
            // The call's time limit ends it (its table's sweeper says so).
            Err(_) => {}
            Ok(Err(error)) => turn.fail(error).await,
        }
    }

    /// The host's answers to what the server `asked` about a call of `tool`, and the
    /// server's state to send back with them.
    pub(in crate::downstream) async fn answers(
        &self,
        asked: InputRequiredResult,
        tool: &str,
        caller: Option<&Caller>,
        cancel: &CancellationToken,
    ) -> Result<(Option<InputResponses>, Option<String>), DownstreamError> {
        let questions = asked.input_requests.unwrap_or_default();
        if questions.is_empty() && asked.request_state.is_none() {
            return Err(DownstreamError::Protocol {
                server: self.config.name.clone(),
                message: format!("answered {tool} with input_required that asks nothing"),
            });
        }
        let responses = self.ask_all(questions, tool, caller, cancel).await?;
        Ok((
            (!responses.is_empty()).then_some(responses),
            asked.request_state,
        ))
    }

    /// The host's answers to the server's `questions` about a call of `tool`, all asked
    /// at once; the first that fails fails them all.
    pub(in crate::downstream) async fn ask_all(
        &self,
        questions: InputRequests,
        tool: &str,
        caller: Option<&Caller>,
        cancel: &CancellationToken,
    ) -> Result<InputResponses, DownstreamError> {
        let relay = Relay {
            server: self.config.name.clone(),
            host: self.host.clone(),
            changes: self.changes.clone(),
        };
        let asking = questions.into_iter().map(|(key, question)| {
            let relay = &relay;
            async move {
                let answer = relay.answer(question, caller, cancel).await;
                let answer = answer.map_err(|error| error.message.to_string())?;
                let answer = serde_json::to_value(answer).map_err(|e| e.to_string())?;
                Ok::<_, String>((key, answer))
            }
        });
        let answers = try_join_all(asking)
            .await
            .map_err(|why| DownstreamError::Unanswered {
                server: self.config.name.clone(),
                tool: tool.to_owned(),
                why,
            })?;
        Ok(answers.into_iter().collect())
    }

    /// Why a call whose server kept asking has no answer.
    pub(in crate::downstream) fn too_many_rounds(&self, tool: &str) -> DownstreamError {
        DownstreamError::Unanswered {
            server: self.config.name.clone(),
            tool: tool.to_owned(),
            why: format!("it asked {MAX_ROUNDS} times in a row and still wanted more"),
        }
    }
}
