//! A 2026-07-28 host's own call, held between its rounds. A legacy server asks during a
//! call by sending requests (elicitation, sampling, roots), which a 2026-07-28 host does
//! not take: it is asked by `input_required` (SEP-2322) instead. So the call's questions
//! come here ([`Caller::asks`]), and the host's request is answered `input_required` with
//! them while the call goes on; its `requestState` is planmux's own (the hold's id,
//! sealed like a server's state, bound to the tool as a hold). The host's retry with it
//! is the same call again: the answers go to the server's requests, and the retry waits
//! for the call's end or its next questions. A hold the host does not come back for
//! within the state's time limit is dropped, which cancels the call.
//!
//! [`Caller::asks`]: crate::downstream::Caller

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::Instant;

use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, InputRequests, InputRequiredResult, InputResponses};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::sealed;
use crate::downstream::{Asked, Asks, DownstreamError, Downstreams};

/// A call's answer, or why there is none.
pub(super) type Answer = Result<CallToolResponse, DownstreamError>;
/// A call, made to run on its own (it owns what it uses).
pub(super) type Call = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// The calls waiting for their hosts' retries, by id.
static HELD: LazyLock<Mutex<HashMap<String, Held>>> = LazyLock::new(Mutex::default);

/// A 2026-07-28 host's call that a legacy server may ask during.
pub(super) struct Held {
    /// The exported tool called.
    tool: String,
    running: Running,
    questions: mpsc::UnboundedReceiver<Asked>,
    /// The questions put to the host and not answered yet, by key.
    waiting: BTreeMap<String, oneshot::Sender<Result<Value, ErrorData>>>,
    asked: usize,
    /// The call's own cancellation: the call stops when the hold goes.
    stop: CancellationToken,
    _stopping: DropGuard,
    since: Instant,
}

/// Where the call runs: in the host's request until it is first held, then on a task of
/// its own, whose answer comes here.
enum Running {
    Here(Call),
    Driven(oneshot::Receiver<Answer>),
}

/// How one round of the host's ended.
pub(super) enum Round {
    /// The call's answer.
    Ended(Answer),
    /// Questions for the host, the state its retry brings back sealed.
    Asked(InputRequiredResult),
}

impl Held {
    /// The call `make` makes, held for the exported `tool`: `make` gets the question box
    /// its caller carries and the call's own cancellation.
    pub(super) fn new(tool: &str, make: impl FnOnce(Asks, CancellationToken) -> Call) -> Self {
        let (asks, questions) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        Held {
            tool: tool.to_owned(),
            running: Running::Here(make(Asks(asks), stop.clone())),
            questions,
            waiting: BTreeMap::new(),
            asked: 0,
            _stopping: stop.clone().drop_guard(),
            stop,
            since: Instant::now(),
        }
    }
}

/// The bound of a hold's state: a state of the server's for the same tool does not open
/// as one.
fn bound(tool: &str) -> String {
    format!("planmux hold of {tool}")
}

/// The hold the host's retry `state` names for `tool`, with its answers given to the
/// server's requests; `None` when the state is not a hold's (a server's, or none).
pub(super) fn resume(
    state: &Option<String>,
    responses: &mut Option<InputResponses>,
    tool: &str,
) -> Result<Option<Held>, ErrorData> {
    let Some(id) = state
        .as_ref()
        .and_then(|s| sealed::open(s, &bound(tool)).ok())
    else {
        return Ok(None);
    };
    let held = HELD
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&id);
    let Some(mut held) = held else {
        let why =
            format!("the call of {tool} this retry continues has ended (or was retried already)");
        return Err(ErrorData::invalid_params(why, None));
    };
    let mut responses = responses.take().unwrap_or_default();
    for (key, answer) in std::mem::take(&mut held.waiting) {
        let given = responses.remove(&key).ok_or_else(|| {
            ErrorData::invalid_params(format!("the host's retry did not answer '{key}'"), None)
        });
        let _ = answer.send(given);
    }
    Ok(Some(held))
}

impl Held {
    /// One round of the host's: the call's end, or its next questions (then the hold is
    /// kept for the retry, the call driven by a task `downstreams` owns). A host that
    /// cancels its request (`cancelled`) cancels the call.
    pub(super) async fn round(
        mut self,
        cancelled: &CancellationToken,
        downstreams: &Downstreams,
    ) -> Result<Round, ErrorData> {
        let first = tokio::select! {
            ended = self.running.answer() => return Ok(Round::Ended(ended)),
            Some(first) = self.questions.recv() => first,
            () = cancelled.cancelled() => {
                self.stop.cancel();
                return Ok(Round::Ended(self.running.answer().await));
            }
        };
        let mut questions = InputRequests::new();
        let mut next = Some(first);
        while let Some(Asked { question, answer }) = next {
            self.asked += 1;
            let key = format!("q{}", self.asked);
            questions.insert(key.clone(), question);
            self.waiting.insert(key, answer);
            // Asked at the same time: one round.
            next = self.questions.try_recv().ok();
        }
        self.running.drive(downstreams);
        // Random as a run's id is; sealed, so only planmux's own opens a hold.
        let id = uuid::Uuid::new_v4().simple().to_string();
        let state = sealed::seal(&id, &bound(&self.tool))?;
        let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        held.retain(|_, hold| hold.since.elapsed() < sealed::STATE_TTL);
        self.since = Instant::now();
        held.insert(id, self);
        Ok(Round::Asked(InputRequiredResult::new(
            Some(questions),
            Some(state),
        )))
    }
}

impl Running {
    async fn answer(&mut self) -> Answer {
        match self {
            Running::Here(call) => call.as_mut().await,
            // Its task never ran: planmux is shutting down.
            Running::Driven(answer) => answer.await.unwrap_or(Err(DownstreamError::Closed {
                server: "planmux".into(),
            })),
        }
    }

    /// From now on the call runs on a task of its own.
    fn drive(&mut self, downstreams: &Downstreams) {
        let (tell, answer) = oneshot::channel();
        let running = std::mem::replace(self, Running::Driven(answer));
        match running {
            Running::Here(call) => downstreams.track(async move {
                let _ = tell.send(call.await);
            }),
            driven => *self = driven,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::{CallToolResult, InputRequest, ListRootsRequest};
    use serde_json::json;

    use super::*;
    use crate::config::Config;

    fn downstreams() -> Arc<Downstreams> {
        let config = Config::parse("", "test", std::path::Path::new("."), &|_| None);
        Downstreams::new(&config.expect("empty config"), Arc::default())
    }

    /// A call that asks `n` questions at once, then answers with what it was told.
    fn asking(n: usize) -> impl FnOnce(Asks, CancellationToken) -> Call {
        move |asks, _| {
            Box::pin(async move {
                let mut told = Vec::new();
                for _ in 0..n {
                    let (answer, answered) = oneshot::channel();
                    let question = InputRequest::ListRoots(ListRootsRequest::default());
                    let _ = asks.0.send(Asked { question, answer });
                    told.push(answered);
                }
                let mut answers = Vec::new();
                for answered in told {
                    answers.push(match answered.await {
                        Ok(Ok(answer)) => answer,
                        Ok(Err(error)) => json!(error.message),
                        Err(_) => json!("dropped"),
                    });
                }
                Ok(CallToolResponse::Complete(CallToolResult::structured(
                    json!(answers),
                )))
            })
        }
    }

    fn ended(round: Round) -> Value {
        match round {
            Round::Ended(Ok(CallToolResponse::Complete(result))) => {
                result.structured_content.unwrap_or_default()
            }
            _ => Value::Null,
        }
    }

    #[tokio::test]
    async fn questions_asked_at_once_make_one_round_and_the_retry_answers_them() {
        let (downstreams, never) = (downstreams(), CancellationToken::new());
        let held = Held::new("old__ask", asking(2));
        let Ok(Round::Asked(asked)) = held.round(&never, &downstreams).await else {
            panic!("not asked");
        };
        let keys: Vec<&String> = asked
            .input_requests
            .iter()
            .flatten()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, ["q1", "q2"]);
        let state = asked.request_state;
        // The state is a hold's of this tool only: another tool's retry does not resume it.
        let mut none = None;
        assert!(matches!(resume(&state, &mut none, "other__tool"), Ok(None)));
        let mut answers = Some(InputResponses::from([
            ("q1".to_owned(), json!({"roots": []})),
            ("q2".to_owned(), json!({"roots": [{"uri": "file:///b"}]})),
        ]));
        let held = resume(&state, &mut answers, "old__ask").ok().flatten();
        let held = held.expect("the hold resumed");
        let round = held.round(&never, &downstreams).await.ok();
        assert_eq!(
            round.map(ended),
            Some(json!([{"roots": []}, {"roots": [{"uri": "file:///b"}]}]))
        );
        // Each hold is resumed once.
        let again = resume(&state, &mut None, "old__ask")
            .err()
            .map(|e| e.message);
        assert!(again.is_some_and(|m| m.contains("retried already")));
    }

    #[tokio::test]
    async fn a_question_the_retry_leaves_out_is_refused_to_the_server() {
        let (downstreams, never) = (downstreams(), CancellationToken::new());
        let held = Held::new("old__ask", asking(1));
        let Ok(Round::Asked(asked)) = held.round(&never, &downstreams).await else {
            panic!("not asked");
        };
        let mut nothing = Some(InputResponses::new());
        let held = resume(&asked.request_state, &mut nothing, "old__ask")
            .ok()
            .flatten();
        let round = held
            .expect("resumed")
            .round(&never, &downstreams)
            .await
            .ok();
        assert_eq!(
            round.map(ended),
            Some(json!(["the host's retry did not answer 'q1'"]))
        );
    }

    #[tokio::test]
    async fn a_hold_dropped_or_a_round_cancelled_stops_its_call() {
        let (downstreams, never) = (downstreams(), CancellationToken::new());
        let (stopped, told) = (
            Arc::new(tokio::sync::Notify::new()),
            CancellationToken::new(),
        );
        let seen = stopped.clone();
        let held = Held::new("old__ask", move |asks, stop| {
            Box::pin(async move {
                let (answer, _answered) = oneshot::channel();
                let question = InputRequest::ListRoots(ListRootsRequest::default());
                let _ = asks.0.send(Asked { question, answer });
                stop.cancelled().await;
                seen.notify_one();
                Err(DownstreamError::Closed {
                    server: "old".into(),
                })
            })
        });
        let Ok(Round::Asked(asked)) = held.round(&never, &downstreams).await else {
            panic!("not asked");
        };
        let held = resume(&asked.request_state, &mut None, "old__ask")
            .ok()
            .flatten();
        // The host cancels its retry: the call is cancelled, and its end is the answer.
        told.cancel();
        let round = held.expect("resumed").round(&told, &downstreams).await;
        assert!(matches!(
            round,
            Ok(Round::Ended(Err(DownstreamError::Closed { .. })))
        ));
        let waited = tokio::time::timeout(std::time::Duration::from_secs(1), stopped.notified());
        assert!(waited.await.is_ok(), "the call did not stop");
        // A hold dropped (never resumed, or too old) cancels its call.
        let (tell, stop) = std::sync::mpsc::channel();
        let held = Held::new("old__ask", move |asks, token| {
            let _ = tell.send(token);
            asking(1)(asks, CancellationToken::new())
        });
        let stop = stop.recv().expect("the call's cancellation");
        assert!(!stop.is_cancelled());
        drop(held);
        assert!(stop.is_cancelled());
    }
}
