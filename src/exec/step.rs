//! Running one step: the call, its time limit, and its retries.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{InvokeError, Invoker};
use crate::plan::{PlannedStep, Prepared, ToolOutcome, tool_outcome};

/// How long a cancelled or timed-out call may take to acknowledge its cancellation (and
/// tell its server) before the step ends without it.
pub(super) const CANCEL_GRACE: Duration = Duration::from_secs(1);
/// Most attempts after the first, whatever a plan asks: five retries with doubling pauses
/// ride out a restart; more would only hold the plan up.
pub const MAX_RETRIES: u32 = 5;

/// How a step's attempts ended, before the scheduler applies the plan's policies.
#[derive(Debug)]
pub(super) enum Ending {
    Succeeded(Value),
    /// Its condition does not hold.
    Skipped(String),
    /// A `foreach` step's items: the scheduler runs each as a unit of its own.
    Expand(Vec<Value>),
    /// The tool said `isError`, or the call failed. `transient` when another attempt
    /// may succeed (the server was unavailable).
    Failed {
        message: String,
        transient: bool,
    },
    TimedOut(String),
    Cancelled,
}

/// Decides a step (or one item) on a blocking thread.
pub(super) type Resolve = Box<dyn FnOnce() -> Prepared + Send>;

/// A step decided already, or to decide off the I/O thread first (steps that run
/// JSONPath queries: their cost grows with the values they read).
pub(super) enum Args {
    Ready(Prepared),
    Deferred(Resolve),
}

/// What a step's task hands back to the scheduler.
#[derive(Debug)]
pub(super) struct Attempted {
    pub index: usize,
    /// The item, for one item of a `foreach` step.
    pub item: Option<usize>,
    pub ending: Ending,
    pub attempts: u32,
    pub started: Instant,
    pub finished: Instant,
    /// Arguments resolved in the task (deferred ones; the inner `None` for what calls
    /// nothing), for the record.
    pub resolved: Option<Option<Value>>,
}

/// One step's call, as the scheduler launches it.
pub(super) struct Launch<I> {
    pub invoker: Arc<I>,
    /// The run's id, for the invoker's audit trail.
    pub run: Arc<str>,
    pub step: PlannedStep,
    /// The step's position in the plan.
    pub index: usize,
    /// The item, for one item of a `foreach` step.
    pub item: Option<usize>,
    /// Its time limit per attempt, if any.
    pub timeout: Option<Duration>,
    /// The first pause before a retry.
    pub backoff: Duration,
}

/// Calls the step's tool, retrying what may be retried, within its time limit.
pub(super) async fn attempt<I: Invoker>(
    launch: Launch<I>,
    args: Args,
    cancel: CancellationToken,
) -> Attempted {
    let Launch {
        invoker,
        run,
        step,
        index,
        item,
        timeout,
        backoff,
    } = launch;
    let started = Instant::now();
    let ended = |ending: Ending, attempts: u32, resolved| Attempted {
        index,
        item,
        ending,
        attempts,
        started,
        finished: Instant::now(),
        resolved,
    };
    let (prepared, resolved) = match args {
        Args::Ready(prepared) => (prepared, None),
        Args::Deferred(resolve) => {
            let resolving = tokio::task::spawn_blocking(resolve);
            let done = tokio::select! {
                done = resolving => done,
                () = cancel.cancelled() => return ended(Ending::Cancelled, 0, None),
            };
            match done {
                Ok(prepared) => {
                    let args = match &prepared {
                        Prepared::Call(args) => Some(args.clone()),
                        _ => None,
                    };
                    (prepared, Some(args))
                }
                Err(broke) => {
                    let message = format!("resolving the arguments failed: {broke}");
                    let failed = Ending::Failed {
                        message,
                        transient: false,
                    };
                    return ended(failed, 0, None);
                }
            }
        }
    };
    // Told to stop while it was being decided: nothing more to do.
    if cancel.is_cancelled() {
        return ended(Ending::Cancelled, 0, resolved);
    }
    let args = match prepared {
        Prepared::Call(args) => args,
        Prepared::Skip(reason) => return ended(Ending::Skipped(reason), 0, resolved),
        Prepared::Value(value) => return ended(Ending::Succeeded(value), 0, resolved),
        Prepared::Items(items) => return ended(Ending::Expand(items), 0, resolved),
        Prepared::Fail(message) => {
            let failed = Ending::Failed {
                message,
                transient: false,
            };
            return ended(failed, 0, resolved);
        }
    };
    let retries = step.retries.min(MAX_RETRIES);
    let mut attempts = 0;
    let ending = loop {
        attempts += 1;
        let ending = once(
            invoker.as_ref(),
            &run,
            &step,
            args.clone(),
            timeout,
            &cancel,
        )
        .await;
        // Only what may go differently next time is repeated: not a tool's own error,
        // not arguments the server refused.
        let retryable = match &ending {
            Ending::Failed { transient, .. } => *transient,
            // A timed-out call may have done its work: repeat it only for tools that are
            // safe to repeat, never merely because the plan said `retry_unsafe`.
            Ending::TimedOut(_) => !step.retry_unsafe,
            Ending::Succeeded(_) | Ending::Cancelled | Ending::Skipped(_) | Ending::Expand(_) => {
                false
            }
        };
        if !retryable || attempts > retries {
            break ending;
        }
        let pause = backoff.saturating_mul(1 << (attempts - 1).min(10));
        tracing::debug!(step = %step.id, attempt = attempts, ms = pause.as_millis() as u64, "retrying");
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = cancel.cancelled() => break Ending::Cancelled,
        }
    };
    ended(ending, attempts, resolved)
}

/// One attempt, ended by its answer, its time limit or the step's cancellation, whichever
/// comes first. A call that does not stop within [`CANCEL_GRACE`] of being told to is
/// dropped, so neither a deaf invoker nor a wedged server can hold the plan.
async fn once<I: Invoker>(
    invoker: &I,
    run: &str,
    step: &PlannedStep,
    args: Value,
    timeout: Option<Duration>,
    cancel: &CancellationToken,
) -> Ending {
    let call_cancel = cancel.child_token();
    let call = invoker.invoke(run, step, args, call_cancel.clone());
    tokio::pin!(call);
    let limit = async {
        match timeout {
            Some(limit) => tokio::time::sleep(limit).await,
            None => std::future::pending().await,
        }
    };
    let result = tokio::select! {
        result = &mut call => result,
        () = limit => {
            call_cancel.cancel();
            let _ = tokio::time::timeout(CANCEL_GRACE, call).await;
            let limit = timeout.unwrap_or_default();
            return Ending::TimedOut(format!("timed out after {} ms", limit.as_millis()));
        }
        () = cancel.cancelled() => {
            // Let the invoker tell the downstream, but do not wait on it for ever.
            let _ = tokio::time::timeout(CANCEL_GRACE, call).await;
            return Ending::Cancelled;
        }
    };
    match result {
        Ok(result) => match tool_outcome(&result) {
            ToolOutcome::Success(value) => Ending::Succeeded(value),
            ToolOutcome::Failure { message, .. } => Ending::Failed {
                message,
                transient: false,
            },
        },
        Err(InvokeError::Timeout(message)) => Ending::TimedOut(message),
        Err(InvokeError::Cancelled) => Ending::Cancelled,
        Err(error @ InvokeError::Unavailable(_)) => Ending::Failed {
            message: error.to_string(),
            transient: true,
        },
        Err(error @ InvokeError::Rejected(_)) => Ending::Failed {
            message: error.to_string(),
            transient: false,
        },
    }
}
