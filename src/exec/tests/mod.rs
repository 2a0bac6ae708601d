//! Scheduler tests: paused tokio time and a fake invoker, so timings are exact.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::plan::{Limits, StepId, ToolSpec, ValidatedPlan, prepare};

mod failures;
mod language;
mod results;
mod stops;
mod strategies;
mod table;
mod text;

/// Tools of the fake server `t`: `sleep {ms}` (answers its args after ms), `fail
/// {message, ms}`, `flaky {fails}` (fails that many times, then succeeds), `hang` (until
/// cancelled), `deaf {ms}` (sleeps, ignoring cancellation), `refuse` (a call the server
/// rejects), and `write` (unsafe: not read-only, not idempotent).
fn tools() -> Vec<ToolSpec> {
    ["sleep", "fail", "flaky", "hang", "deaf", "refuse", "write"]
        .into_iter()
        .map(|name| ToolSpec {
            exported: format!("t__{name}"),
            server: if name == "write" {
                "w".into()
            } else {
                "t".into()
            },
            tool: name.into(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            read_only: name != "write",
            idempotent: false,
            tier: if name == "write" {
                crate::policy::Tier::Destructive
            } else {
                crate::policy::Tier::Read
            },
        })
        .collect()
}

#[derive(Default)]
struct Fake {
    /// (step id, start, end or None when cancelled)
    calls: Mutex<Vec<(String, Duration, Option<Duration>)>>,
    active: Mutex<(usize, usize)>,
    flaky: Mutex<u64>,
    epoch: Mutex<Option<Instant>>,
}

impl Fake {
    fn now(&self) -> Duration {
        let mut epoch = self.epoch.lock().unwrap_or_else(|e| e.into_inner());
        epoch.get_or_insert_with(Instant::now).elapsed()
    }

    fn started(&self, id: &str) -> Option<Duration> {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        calls.iter().find(|c| c.0 == id).map(|c| c.1)
    }

    fn cancelled(&self, id: &str) -> bool {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        calls.iter().any(|c| c.0 == id && c.2.is_none())
    }

    fn max_active(&self) -> usize {
        self.active.lock().unwrap_or_else(|e| e.into_inner()).1
    }
}

impl Invoker for Fake {
    async fn invoke(
        &self,
        _run: &str,
        step: &PlannedStep,
        args: Value,
        cancel: CancellationToken,
    ) -> Result<Value, InvokeError> {
        let start = self.now();
        {
            let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
            active.0 += 1;
            active.1 = active.1.max(active.0);
        }
        let ms = args["ms"].as_u64().unwrap_or(0);
        if step.tool == "deaf" {
            // An invoker that ignores cancellation: the executor must not wait for it.
            tokio::time::sleep(Duration::from_millis(ms)).await;
            return Ok(json!({"structuredContent": args, "content": []}));
        }
        let work = async {
            match step.tool.as_str() {
                "sleep" | "write" => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok(json!({"structuredContent": args.clone(), "content": []}))
                }
                "fail" => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    let message = args["message"].as_str().unwrap_or("boom").to_string();
                    Ok(json!({"isError": true, "content": [{"type": "text", "text": message}]}))
                }
                "flaky" => {
                    let n = {
                        let mut count = self.flaky.lock().unwrap_or_else(|e| e.into_inner());
                        *count += 1;
                        *count
                    };
                    if n <= args["fails"].as_u64().unwrap_or(0) {
                        Err(InvokeError::Unavailable(format!("flake {n}")))
                    } else {
                        Ok(json!({"content": [{"type": "text", "text": "{\"ok\": true}"}]}))
                    }
                }
                "refuse" => {
                    *self.flaky.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                    Err(InvokeError::Rejected("invalid params".into()))
                }
                _ => std::future::pending().await,
            }
        };
        let result = tokio::select! {
            r = work => Some(r),
            () = cancel.cancelled() => None,
        };
        self.active.lock().unwrap_or_else(|e| e.into_inner()).0 -= 1;
        let end = result.as_ref().map(|_| self.now());
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).push((
            step.id.to_string(),
            start,
            end,
        ));
        result.unwrap_or(Err(InvokeError::Cancelled))
    }
}

fn plan(value: Value) -> ValidatedPlan {
    match prepare(&value, &tools(), &Limits::default()) {
        Ok(plan) => plan,
        Err(issues) => panic!("invalid test plan: {}", crate::plan::render_issues(&issues)),
    }
}

fn settings() -> Settings {
    Settings {
        retry_backoff: Duration::from_millis(100),
        ..Settings::default()
    }
}

async fn exec(plan: &ValidatedPlan, settings: &Settings) -> (RunRecord, Arc<Fake>, Duration) {
    let fake = Arc::new(Fake::default());
    fake.now();
    let started = Instant::now();
    let record = run(
        plan,
        fake.clone(),
        settings,
        &Quiet,
        CancellationToken::new(),
    )
    .await;
    (record, fake, started.elapsed())
}

fn status(record: &RunRecord, id: &str) -> (StepStatus, Option<String>) {
    let step = record
        .step(id)
        .map(|s| (s.status, s.error.clone().or(s.reason.clone())));
    step.unwrap_or((StepStatus::Skipped, Some("no such step".into())))
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Runs `plan` and returns the record, `id=status` for every step, and the output of
/// each succeeded step.
async fn outcome(plan_json: Value) -> (RunRecord, String, Value) {
    let p = plan(plan_json);
    let (record, _, _) = exec(&p, &settings()).await;
    let statuses: Vec<String> = record
        .steps
        .iter()
        .map(|s| format!("{}={}", s.id, s.status.as_str()))
        .collect();
    let outputs: serde_json::Map<String, Value> = record
        .steps
        .iter()
        .filter_map(|s| Some((s.id.clone(), s.output.clone()?)))
        .collect();
    (record, statuses.join(" "), Value::Object(outputs))
}
