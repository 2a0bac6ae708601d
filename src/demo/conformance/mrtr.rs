//! The tools and the prompt that ask the client through input-required results (SEP-2322,
//! "MRTR", protocol 2026-07-28): instead of sending `elicitation/create` on an open stream,
//! a call answers `resultType: "input_required"` with its questions, and the client calls
//! again with `inputResponses` (and the `requestState` it was given). One tool per
//! `input-required-result-*` scenario, with the keys, messages and texts they check, and
//! the prompt of `input-required-result-non-tool-request`. Beside it, `questions`: what
//! each question asks, and how its answer is read.
//!
//! What a call gathered between rounds stays here, in [`Pending`]; the client holds only an
//! unguessable handle to it as `requestState`, so a tampered or replayed state names nothing
//! and is refused (-32602). A handle needs no key: the fixture's state never leaves it
//! (planmux's own, which does, is sealed: `upstream/sealed.rs`).

pub(super) mod questions;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, InputRequests, InputRequiredResult,
    InputResponses, Prompt, PromptMessage, Role, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::json;

use crate::demo::{failure, tool};
use questions::{Question, Reply};

/// How many calls may wait for their next round at once; beyond that the oldest is
/// forgotten, so a client that never comes back cannot grow the fixture without bound. The
/// suite keeps at most one call waiting per scenario.
const MAX_PENDING: usize = 256;

/// Everything here that asks through input-required results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asker {
    Elicitation,
    Sampling,
    ListRoots,
    RequestState,
    MultipleInputs,
    MultiRound,
    TamperedState,
    Capabilities,
    /// Needs sampling whatever the client declared: `server-stateless` checks the -32021.
    MissingCapability,
    /// The one prompt; every other asker is a tool.
    Prompt,
}

impl Asker {
    /// The tools, in the order `tools/list` shows them.
    const TOOLS: [Self; 9] = [
        Self::Elicitation,
        Self::Sampling,
        Self::ListRoots,
        Self::RequestState,
        Self::MultipleInputs,
        Self::MultiRound,
        Self::TamperedState,
        Self::Capabilities,
        Self::MissingCapability,
    ];

    /// The tool a `tools/call` names, if it is one of these.
    pub(super) fn tool(name: &str) -> Option<Self> {
        Self::TOOLS.into_iter().find(|asker| asker.name() == name)
    }

    /// The prompt a `prompts/get` names, if it is this one.
    pub(super) fn prompt(name: &str) -> Option<Self> {
        (name == Self::Prompt.name()).then_some(Self::Prompt)
    }

    fn name(self) -> &'static str {
        match self {
            Self::Elicitation => "test_input_required_result_elicitation",
            Self::Sampling => "test_input_required_result_sampling",
            Self::ListRoots => "test_input_required_result_list_roots",
            Self::RequestState => "test_input_required_result_request_state",
            Self::MultipleInputs => "test_input_required_result_multiple_inputs",
            Self::MultiRound => "test_input_required_result_multi_round",
            Self::TamperedState => "test_input_required_result_tampered_state",
            Self::Capabilities => "test_input_required_result_capabilities",
            Self::MissingCapability => "test_missing_capability",
            Self::Prompt => "test_input_required_result_prompt",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Self::Elicitation => "SEP-2322: asks the user's name, then greets them",
            Self::Sampling => "SEP-2322: asks the client's model a question",
            Self::ListRoots => "SEP-2322: asks the client's roots",
            Self::RequestState => "SEP-2322: asks with a requestState; state-ok when it returns",
            Self::MultipleInputs => "SEP-2322: asks a name, a greeting and the roots at once",
            Self::MultiRound => "SEP-2322: asks a name, then a color, a requestState each",
            Self::TamperedState => "SEP-2322: asks with a requestState; refuses a changed one",
            Self::Capabilities => "SEP-2322: asks only what the client declared it can answer",
            Self::MissingCapability => "SEP-2575: needs sampling; without it, error -32021",
            Self::Prompt => "SEP-2322: a prompt that asks the user for its context",
        }
    }

    /// Whether it keeps what it gathered between rounds, under a `requestState`: answers
    /// then count only when they come back with the state that asked for them.
    fn keeps_state(self) -> bool {
        matches!(
            self,
            Self::RequestState
                | Self::MultipleInputs
                | Self::MultiRound
                | Self::TamperedState
                | Self::Capabilities
        )
    }

    /// Its rounds of questions, in order. `Capabilities` asks only what the client declared.
    fn rounds(self, declared: &ClientCapabilities) -> Vec<Vec<Question>> {
        use Question::*;
        match self {
            Self::Elicitation => vec![vec![UserName]],
            Self::Sampling | Self::MissingCapability => vec![vec![Capital]],
            Self::ListRoots => vec![vec![ClientRoots]],
            Self::RequestState | Self::TamperedState => vec![vec![Confirm]],
            Self::MultipleInputs => vec![vec![UserName, Greeting, ClientRoots]],
            Self::MultiRound => vec![vec![Step1], vec![Step2]],
            Self::Capabilities => vec![
                [UserName, Greeting, ClientRoots]
                    .into_iter()
                    .filter(|q| q.capability().declared_by(declared))
                    .collect(),
            ],
            Self::Prompt => vec![vec![PromptContext]],
        }
    }

    /// Its answer once every question has been answered.
    fn finish(self, answers: &Answers) -> String {
        use Question::*;
        let answer = |q: Question| answers.get(&q).map_or("", String::as_str);
        match self {
            Self::Elicitation => format!("Hello, {}!", answer(UserName)),
            Self::Sampling | Self::MissingCapability => {
                format!("LLM response: {}", answer(Capital))
            }
            Self::ListRoots => format!("Client roots: {}", answer(ClientRoots)),
            Self::RequestState | Self::TamperedState => format!(
                "state-ok: the requestState came back as issued; ok={}",
                answer(Confirm)
            ),
            Self::MultipleInputs => format!(
                "{} {}! (roots: {})",
                answer(Greeting),
                answer(UserName),
                answer(ClientRoots)
            ),
            Self::MultiRound => {
                format!("{}'s favorite color is {}.", answer(Step1), answer(Step2))
            }
            Self::Capabilities if answers.is_empty() => {
                "The client declared no elicitation, sampling or roots: nothing to ask.".into()
            }
            Self::Capabilities => {
                let answered: Vec<String> = answers
                    .iter()
                    .map(|(q, a)| format!("{}={a}", q.key()))
                    .collect();
                format!("Answered: {}", answered.join("; "))
            }
            Self::Prompt => format!(
                "Write a short note for this context: {}",
                answer(PromptContext)
            ),
        }
    }
}

/// The tools, each without arguments.
pub(super) fn tools() -> Vec<Tool> {
    Asker::TOOLS
        .into_iter()
        .map(|asker| {
            let schema = json!({"type": "object", "properties": {}});
            tool(asker.name(), asker.description(), schema)
        })
        .collect()
}

/// The prompt, without arguments: what it needs, it asks.
pub(super) fn prompt() -> Prompt {
    let asker = Asker::Prompt;
    Prompt::new(asker.name(), Some(asker.description()), None).with_title("Prompt With Input")
}

/// `tools/call` of an asker: a refusal is a failed result.
pub(super) fn call_tool(
    asker: Asker,
    request: CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
    pending: &Pending,
) -> Result<CallToolResponse, ErrorData> {
    let declared = ctx.client_capabilities().unwrap_or_default();
    let state = request.request_state.as_deref();
    let outcome = respond(asker, &declared, request.input_responses, state, pending)?;
    Ok(match outcome {
        Outcome::Done(text) => CallToolResult::success(vec![ContentBlock::text(text)]).into(),
        Outcome::Asking(result) => result.into(),
        Outcome::Stopped(why) => failure(why).into(),
    })
}

/// `prompts/get` of the asker prompt: a prompt has no failed result, so a stop is an error.
pub(super) fn get_prompt(
    asker: Asker,
    request: GetPromptRequestParams,
    ctx: &RequestContext<RoleServer>,
    pending: &Pending,
) -> Result<GetPromptResponse, ErrorData> {
    let declared = ctx.client_capabilities().unwrap_or_default();
    let state = request.request_state.as_deref();
    match respond(asker, &declared, request.input_responses, state, pending)? {
        Outcome::Done(text) => {
            let message = PromptMessage::new_text(Role::User, text);
            Ok(GetPromptResult::new(vec![message]).into())
        }
        Outcome::Asking(result) => Ok(result.into()),
        Outcome::Stopped(why) => Err(ErrorData::invalid_request(why, None)),
    }
}

/// Where a call stands after one round.
#[derive(Debug)]
enum Outcome {
    /// Every question answered: the asker's text.
    Done(String),
    /// Questions left: the input-required result that asks them.
    Asking(InputRequiredResult),
    /// The call cannot go on (the user declined or cancelled): why.
    Stopped(String),
}

/// One round of a call: takes the answers the client brought (with the state, for an
/// asker that keeps one), then finishes or asks what is still missing. A `requestState`
/// this server did not issue to this asker, an answer that is not the result its request
/// calls for, or a question the client did not declare it can answer, is the client's
/// error.
fn respond(
    asker: Asker,
    declared: &ClientCapabilities,
    responses: Option<InputResponses>,
    state: Option<&str>,
    pending: &Pending,
) -> Result<Outcome, ErrorData> {
    let (mut answers, responses) = match (asker.keeps_state(), state) {
        (true, Some(handle)) => {
            let gathered = pending.redeem(asker, handle).ok_or_else(|| {
                let message = format!(
                    "requestState is not one this server issued to '{}' (tampered, replayed or \
                     forgotten)",
                    asker.name()
                );
                ErrorData::invalid_params(message, None)
            })?;
            (gathered, responses.unwrap_or_default())
        }
        // A first call: answers without the state that asked for them do not count.
        (true, None) => (Answers::new(), InputResponses::new()),
        (false, _) => (Answers::new(), responses.unwrap_or_default()),
    };
    let rounds = asker.rounds(declared);
    // Keys this asker does not ask are ignored, as SEP-2322 asks.
    for &question in rounds.iter().flatten() {
        let Some(response) = responses.get(question.key()) else {
            continue;
        };
        let reply = question.ask().read(response).map_err(|e| {
            ErrorData::invalid_params(format!("inputResponses.{}: {e}", question.key()), None)
        })?;
        match reply {
            Reply::Given(text) => answers.insert(question, text),
            Reply::Refused => {
                let why = format!("the user did not accept '{}'", question.key());
                return Ok(Outcome::Stopped(why));
            }
        };
    }
    let missing = rounds
        .iter()
        .map(|round| {
            let missing = round.iter().filter(|q| !answers.contains_key(q));
            missing.copied().collect::<Vec<_>>()
        })
        .find(|missing| !missing.is_empty());
    let Some(missing) = missing else {
        return Ok(Outcome::Done(asker.finish(&answers)));
    };
    // SEP-2575: what the client did not declare, it is not asked.
    if let Some(q) = missing
        .iter()
        .find(|q| !q.capability().declared_by(declared))
    {
        let required = q.capability().alone();
        return Err(ErrorData::missing_required_client_capability(required));
    }
    let requests: InputRequests = missing
        .iter()
        .map(|q| (q.key().to_owned(), q.ask().request()))
        .collect();
    let state = asker.keeps_state().then(|| pending.issue(asker, answers));
    let result = InputRequiredResult::new(Some(requests), state);
    Ok(Outcome::Asking(result))
}

/// What a call has gathered: each answered question, as the text its answer reads as.
type Answers = BTreeMap<Question, String>;

/// The calls waiting for their next round: what each gathered, under the handle it gave
/// the client as `requestState`. One serves every instance an HTTP listener makes (each
/// 2026-07-28 request gets a fresh handler), so a retry finds its first round.
#[derive(Default)]
pub(super) struct Pending {
    waiting: Mutex<VecDeque<Waiting>>,
}

/// One call between rounds.
struct Waiting {
    /// The `requestState` the client must bring back: 122 random bits, so no client can
    /// guess another's.
    handle: String,
    asker: Asker,
    answers: Answers,
}

impl Pending {
    /// Keeps `answers` for `asker`'s next round, and returns the handle to give the client.
    fn issue(&self, asker: Asker, answers: Answers) -> String {
        let handle = format!("mrtr-{}", uuid::Uuid::new_v4().simple());
        let mut waiting = self.waiting();
        if waiting.len() >= MAX_PENDING {
            waiting.pop_front();
        }
        waiting.push_back(Waiting {
            handle: handle.clone(),
            asker,
            answers,
        });
        handle
    }

    /// What `asker` gathered under `handle`, once: a handle is good for one retry, so a
    /// replayed state is refused like a tampered one.
    fn redeem(&self, asker: Asker, handle: &str) -> Option<Answers> {
        let mut waiting = self.waiting();
        let at = waiting
            .iter()
            .position(|w| w.handle == handle && w.asker == asker)?;
        waiting.remove(at).map(|w| w.answers)
    }

    /// The waiting calls. A poisoned lock still holds a valid queue (no push or remove
    /// panics half-way), so it is used as is.
    fn waiting(&self) -> MutexGuard<'_, VecDeque<Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests;
