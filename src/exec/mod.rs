//! The executor: runs a [`ValidatedPlan`](crate::plan::ValidatedPlan) by calling tools
//! through an [`Invoker`], starting each step the moment what it waits for has finished,
//! and records everything in a [`RunRecord`]. Usable as a library without the MCP server.

mod board;
mod foreach;
mod record;
mod runs;
mod scheduler;
mod step;
mod traced;
mod truncate;

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use board::{Board, Boards, slot};
pub use record::{
    ItemRecord, RunRecord, RunStatus, Selection, StepRecord, StepStatus, is_error, result_schema,
};
pub use runs::{RunStore, describe};
pub use scheduler::run;
pub use truncate::{Cut, MAX_OUTPUT_DEPTH, truncate};

use crate::plan::PlannedStep;

/// Why a tool call produced no result. The kind decides whether another attempt can help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvokeError {
    /// The call ran out of time (the message says whose limit).
    #[error("{0}")]
    Timeout(String),
    /// The call was cancelled through its token.
    #[error("the call was cancelled")]
    Cancelled,
    /// The server could not take the call just now: it is down, restarting, or went away
    /// during the call. Another attempt may succeed.
    #[error("{0}")]
    Unavailable(String),
    /// The call was refused or broke for a reason a repeat would meet again: invalid
    /// arguments, an error answer, a protocol violation.
    #[error("{0}")]
    Rejected(String),
}

/// Calls one tool. planmux's invoker is the downstream servers (see `runner`); tests use
/// fakes.
pub trait Invoker: Send + Sync + 'static {
    /// Calls `step`'s tool with `args` for the run `run` (its id, for the audit trail)
    /// and returns the `CallToolResult` as JSON. Should stop
    /// promptly (returning [`InvokeError::Cancelled`]) when `cancel` fires; the executor
    /// does not rely on it, and abandons a call that has not stopped after a short grace.
    fn invoke(
        &self,
        run: &str,
        step: &PlannedStep,
        args: Value,
        cancel: CancellationToken,
    ) -> impl Future<Output = Result<Value, InvokeError>> + Send;
}

/// Limits and defaults for a run (from `[proxy]` and the servers' sections).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Concurrent tool calls per plan.
    pub max_concurrency: usize,
    /// Concurrent tool calls per server, for servers that set one.
    pub per_server: HashMap<String, usize>,
    /// A step's time limit when the plan sets none (`None`: only the downstream's).
    pub step_timeout: Option<Duration>,
    /// The whole plan's time limit when the plan sets none.
    pub plan_timeout: Duration,
    /// First pause before a retry; doubles per attempt.
    pub retry_backoff: Duration,
}

/// First pause before a retry: long enough for a flaky server to recover from a blip.
pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_millis(200);

impl Default for Settings {
    fn default() -> Self {
        Self {
            max_concurrency: crate::config::DEFAULT_MAX_CONCURRENCY,
            per_server: HashMap::new(),
            step_timeout: None,
            plan_timeout: Duration::from_millis(crate::config::DEFAULT_PLAN_TIMEOUT_MS),
            retry_backoff: DEFAULT_RETRY_BACKOFF,
        }
    }
}

impl Settings {
    /// Settings from a validated config.
    pub fn from_config(config: &crate::config::Config) -> Self {
        Self {
            max_concurrency: config.proxy.max_concurrency,
            per_server: config
                .servers
                .iter()
                .filter_map(|s| s.max_concurrency.map(|n| (s.name.clone(), n)))
                .collect(),
            step_timeout: None,
            plan_timeout: config.proxy.plan_timeout,
            retry_backoff: DEFAULT_RETRY_BACKOFF,
        }
    }
}

/// Hears about steps as they start and finish (progress notifications, the CLI's lines).
pub trait Observer: Send + Sync {
    /// A step is about to call its tool.
    fn step_started(&self, _step: &PlannedStep) {}
    /// A step ended; `finished` of `total` units of work have now ended. A unit is a step,
    /// or one item of a `foreach` step (whose items count once they are known).
    fn step_finished(&self, _record: &StepRecord, _finished: usize, _total: usize) {}
    /// One item of the `foreach` step `step` ended; counted as [`Self::step_finished`]
    /// counts.
    fn item_finished(
        &self,
        _step: &PlannedStep,
        _item: &ItemRecord,
        _finished: usize,
        _total: usize,
    ) {
    }
}

/// An observer that ignores everything.
pub struct Quiet;

impl Observer for Quiet {}

#[cfg(test)]
mod tests;
