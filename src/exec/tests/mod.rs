//! Scheduler tests: paused tokio time and a fake invoker, so timings are exact.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::plan::{Limits, StepId, ToolSpec, ValidatedPlan, prepare};

mod language;
mod stops;
mod table;

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

#[tokio::test(start_paused = true)]
async fn a_diamond_with_unequal_branches_finishes_at_its_critical_path() {
    // a → b (500) ─┐
    //   → c → d ───┴→ e      critical path a+b+e = 700; waves would take 800.
    let p = plan(json!({"steps": [
        {"id": "a", "tool": "t__sleep", "args": {"ms": 100}},
        {"id": "b", "tool": "t__sleep", "args": {"ms": 500, "x": "$ref:a.ms"}},
        {"id": "c", "tool": "t__sleep", "args": {"ms": 100, "x": "$ref:a.ms"}},
        {"id": "d", "tool": "t__sleep", "args": {"ms": 100, "x": "$ref:c.ms"}},
        {"id": "e", "tool": "t__sleep", "args": {"ms": 100, "b": "$ref:b.ms", "d": "$ref:d.ms"}}
    ]}));
    let (record, fake, took) = exec(&p, &settings()).await;
    assert_eq!(record.status, RunStatus::Succeeded);
    assert_eq!(took, ms(700));
    assert_eq!(
        fake.started("d"),
        Some(ms(200)),
        "d starts when c ends, not after b"
    );
    assert_eq!(fake.started("e"), Some(ms(600)));
    assert_eq!(
        record.step("e").and_then(|s| s.args.clone()),
        Some(json!({"ms": 100, "b": 500, "d": 100}))
    );
}

#[tokio::test(start_paused = true)]
async fn concurrency_is_bounded_by_the_plan_limit() {
    let steps: Vec<Value> = (0..6)
        .map(|i| json!({"id": format!("s{i}"), "tool": "t__sleep", "args": {"ms": 100}}))
        .collect();
    let p = plan(json!({ "steps": steps }));
    let (record, fake, took) = exec(
        &p,
        &Settings {
            max_concurrency: 2,
            ..settings()
        },
    )
    .await;
    assert_eq!(record.count(StepStatus::Succeeded), 6);
    assert_eq!((fake.max_active(), took), (2, ms(300)));
}

#[tokio::test(start_paused = true)]
async fn concurrency_is_bounded_per_server() {
    let steps: Vec<Value> = (0..4)
        .map(|i| json!({"id": format!("s{i}"), "tool": "t__sleep", "args": {"ms": 100}}))
        .collect();
    let p = plan(json!({ "steps": steps }));
    let per_server = [("t".to_string(), 1)].into_iter().collect();
    let (_, fake, took) = exec(
        &p,
        &Settings {
            per_server,
            ..settings()
        },
    )
    .await;
    assert_eq!((fake.max_active(), took), (1, ms(400)));
}

#[tokio::test(start_paused = true)]
async fn sequential_runs_one_at_a_time_in_order_and_fails_forward() {
    let p = plan(json!({"strategy": "sequential", "steps": [
        {"id": "a", "tool": "t__sleep", "args": {"ms": 100}},
        {"id": "b", "tool": "t__fail", "args": {"ms": 100}},
        {"id": "c", "tool": "t__sleep", "args": {"ms": 100}}
    ]}));
    let (record, fake, took) = exec(&p, &settings()).await;
    assert_eq!(took, ms(300));
    assert_eq!(
        (fake.started("b"), fake.started("c")),
        (Some(ms(100)), Some(ms(200)))
    );
    assert_eq!(fake.max_active(), 1);
    assert_eq!(
        status(&record, "c").0,
        StepStatus::Succeeded,
        "c does not read b"
    );
    assert_eq!(record.status, RunStatus::Partial);
}

#[tokio::test(start_paused = true)]
async fn chained_pipes_each_output_into_the_next_step() {
    let p = plan(json!({"strategy": "chained", "steps": [
        {"id": "a", "tool": "t__sleep", "args": {"ms": 10, "v": 1}},
        {"id": "b", "tool": "t__sleep", "args": {"ms": 10}},
        {"id": "c", "tool": "t__sleep", "args": {"ms": 10}, "pipe_to": "prev"}
    ]}));
    let (record, _, took) = exec(&p, &settings()).await;
    assert_eq!(took, ms(30));
    let args = |id| record.step(id).and_then(|s| s.args.clone());
    assert_eq!(
        args("b"),
        Some(json!({"ms": 10, "input": {"ms": 10, "v": 1}}))
    );
    assert_eq!(
        args("c"),
        Some(json!({"ms": 10, "prev": {"ms": 10, "input": {"ms": 10, "v": 1}}}))
    );
}

#[tokio::test(start_paused = true)]
async fn competitive_takes_the_first_success_and_cancels_the_rest() {
    let p = plan(json!({"strategy": "competitive", "steps": [
        {"id": "slow", "tool": "t__sleep", "args": {"ms": 500}},
        {"id": "broken", "tool": "t__fail", "args": {"ms": 50}},
        {"id": "fast", "tool": "t__sleep", "args": {"ms": 100}}
    ]}));
    let (record, fake, took) = exec(&p, &settings()).await;
    assert_eq!(took, ms(100));
    assert_eq!(record.winner.as_deref(), Some("fast"));
    assert_eq!(record.status, RunStatus::Succeeded);
    assert_eq!(
        status(&record, "slow"),
        (
            StepStatus::Cancelled,
            Some("lost the race to 'fast'".into())
        )
    );
    assert!(fake.cancelled("slow"), "the loser was cancelled downstream");
    assert_eq!(record.outputs, vec!["fast"]);
    let result = record.result(1000);
    assert_eq!(result["winner"], "fast");
    assert_eq!(result["outputs"], json!({"fast": {"ms": 100}}));
}

#[tokio::test(start_paused = true)]
async fn competitive_fails_only_when_every_runner_fails() {
    let p = plan(json!({"strategy": "competitive", "steps": [
        {"id": "x", "tool": "t__fail", "args": {"ms": 10}},
        {"id": "y", "tool": "t__fail", "args": {"ms": 20}}
    ]}));
    let (record, _, _) = exec(&p, &settings()).await;
    assert_eq!(
        (record.status, record.winner.clone()),
        (RunStatus::Failed, None)
    );
}

#[tokio::test(start_paused = true)]
async fn fail_forward_skips_dependents_and_runs_independent_steps() {
    let p = plan(json!({"steps": [
        {"id": "cpu", "tool": "t__fail", "args": {"ms": 10, "message": "no such metric"}},
        {"id": "check", "tool": "t__sleep", "args": {"ms": 10, "v": "$ref:cpu.value"}},
        {"id": "after_check", "tool": "t__sleep", "args": {"ms": 10}, "depends_on": ["check"]},
        {"id": "other", "tool": "t__sleep", "args": {"ms": 10}}
    ]}));
    let (record, _, _) = exec(&p, &settings()).await;
    assert_eq!(
        status(&record, "cpu"),
        (StepStatus::Failed, Some("no such metric".into()))
    );
    assert_eq!(
        status(&record, "check"),
        (StepStatus::Skipped, Some("dependency 'cpu' failed".into()))
    );
    assert_eq!(
        status(&record, "after_check"),
        (
            StepStatus::Skipped,
            Some("dependency 'check' was skipped".into())
        )
    );
    assert_eq!(status(&record, "other").0, StepStatus::Succeeded);
    assert_eq!(record.status, RunStatus::Partial);
}

#[tokio::test(start_paused = true)]
async fn fail_fast_cancels_running_steps_and_skips_the_rest() {
    let p = plan(json!({"on_error": "fail_fast", "steps": [
        {"id": "bad", "tool": "t__fail", "args": {"ms": 100}},
        {"id": "long", "tool": "t__sleep", "args": {"ms": 1000}},
        {"id": "later", "tool": "t__sleep", "args": {"ms": 10, "x": "$ref:long.ms"}}
    ]}));
    let (record, fake, took) = exec(&p, &settings()).await;
    assert_eq!(took, ms(100));
    assert_eq!(
        status(&record, "long"),
        (
            StepStatus::Cancelled,
            Some("fail_fast: 'bad' failed".into())
        )
    );
    assert_eq!(
        status(&record, "later"),
        (StepStatus::Skipped, Some("fail_fast: 'bad' failed".into()))
    );
    assert!(fake.cancelled("long"));
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(record.stopped.as_deref(), Some("fail_fast: 'bad' failed"));
}

#[tokio::test(start_paused = true)]
async fn continue_hands_the_error_text_on_as_the_output() {
    let p = plan(json!({"on_error": "continue", "steps": [
        {"id": "bad", "tool": "t__fail", "args": {"ms": 10, "message": "quota exceeded"}},
        {"id": "report", "tool": "t__sleep", "args": {"ms": 10, "why": "$ref:bad"}}
    ]}));
    let (record, _, _) = exec(&p, &settings()).await;
    assert_eq!(status(&record, "report").0, StepStatus::Succeeded);
    assert_eq!(
        record.step("report").and_then(|s| s.args.clone()),
        Some(json!({"ms": 10, "why": "quota exceeded"}))
    );
}

#[tokio::test(start_paused = true)]
async fn step_and_plan_timeouts_end_steps_as_timed_out() {
    let p = plan(json!({"timeout_ms": 300, "steps": [
        {"id": "quick_limit", "tool": "t__hang", "timeout_ms": 100},
        {"id": "forever", "tool": "t__hang"},
        {"id": "never", "tool": "t__sleep", "args": {"ms": 1, "x": "$ref:forever"}}
    ]}));
    let (record, fake, took) = exec(&p, &settings()).await;
    assert_eq!(took, ms(300));
    assert_eq!(
        status(&record, "quick_limit"),
        (StepStatus::TimedOut, Some("timed out after 100 ms".into()))
    );
    assert_eq!(
        status(&record, "forever"),
        (
            StepStatus::TimedOut,
            Some("the plan timed out after 300 ms".into())
        )
    );
    assert_eq!(
        status(&record, "never"),
        (
            StepStatus::Skipped,
            Some("the plan timed out after 300 ms".into())
        )
    );
    assert!(fake.cancelled("quick_limit") && fake.cancelled("forever"));
    assert_eq!(record.status, RunStatus::Failed);
}

#[tokio::test(start_paused = true)]
async fn retries_are_honoured_for_read_only_tools_with_backoff() {
    let p = plan(
        json!({"steps": [{"id": "f", "tool": "t__flaky", "args": {"fails": 2}, "retries": 3}]}),
    );
    let (record, _, took) = exec(&p, &settings()).await;
    assert_eq!(status(&record, "f").0, StepStatus::Succeeded);
    assert_eq!(record.step("f").map(|s| s.attempts), Some(3));
    assert_eq!(took, ms(300), "backoff 100 then 200");
}

#[tokio::test(start_paused = true)]
async fn retries_are_refused_for_unsafe_tools_unless_the_step_allows_it() {
    let refused =
        plan(json!({"steps": [{"id": "w", "tool": "t__write", "args": {"ms": 1}, "retries": 2}]}));
    assert_eq!(refused.steps()[0].retries, 0);
    assert!(!refused.warnings().is_empty(), "validation explains why");
    let allowed = plan(
        json!({"steps": [{"id": "w", "tool": "t__write", "args": {"ms": 1}, "retries": 2, "retry_unsafe": true}]}),
    );
    assert_eq!(allowed.steps()[0].retries, 2);
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_unsafe_step_is_not_retried() {
    let p = plan(
        json!({"steps": [{"id": "w", "tool": "t__write", "args": {"ms": 1000}, "retries": 2, "retry_unsafe": true, "timeout_ms": 100}]}),
    );
    let (record, _, took) = exec(&p, &settings()).await;
    assert_eq!(status(&record, "w").0, StepStatus::TimedOut);
    assert_eq!(
        (record.step("w").map(|s| s.attempts), took),
        (Some(1), ms(100))
    );
}

#[tokio::test(start_paused = true)]
async fn a_steps_description_is_kept_in_its_record() {
    let p = plan(json!({"goal": "g", "steps": [
        {"tool": "t__sleep", "args": {"ms": 1}, "description": "Get available compute metrics"}
    ]}));
    let (record, _, _) = exec(&p, &settings()).await;
    let step = &record.steps[0];
    assert_eq!(
        step.description.as_deref(),
        Some("Get available compute metrics")
    );
    let json = serde_json::to_value(&record).unwrap_or_default();
    assert_eq!(
        json["steps"][0]["description"],
        "Get available compute metrics"
    );
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_safe_step_is_retried_whatever_retry_unsafe_says() {
    for flag in [false, true] {
        let p = plan(
            json!({"steps": [{"id": "s", "tool": "t__sleep", "args": {"ms": 1000}, "retries": 2, "retry_unsafe": flag, "timeout_ms": 100}]}),
        );
        let (record, _, _) = exec(&p, &settings()).await;
        assert_eq!(status(&record, "s").0, StepStatus::TimedOut);
        assert_eq!(
            record.step("s").map(|s| s.attempts),
            Some(3),
            "retry_unsafe: {flag}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn cancelling_the_plan_stops_everything_promptly() {
    let p = plan(json!({"steps": [
        {"id": "a", "tool": "t__hang"},
        {"id": "b", "tool": "t__sleep", "args": {"ms": 10, "x": "$ref:a"}}
    ]}));
    let fake = Arc::new(Fake::default());
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(ms(150)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let record = run(&p, fake.clone(), &settings(), &Quiet, cancel).await;
    assert_eq!(started.elapsed(), ms(150));
    assert_eq!(
        status(&record, "a"),
        (StepStatus::Cancelled, Some("the plan was cancelled".into()))
    );
    assert_eq!(
        status(&record, "b"),
        (StepStatus::Skipped, Some("the plan was cancelled".into()))
    );
    assert!(fake.cancelled("a"));
}

#[tokio::test(start_paused = true)]
async fn a_caught_failure_runs_the_error_path_and_skips_the_success_path() {
    let p = plan(json!([
        {"_tool": "t__fail", "ms": 10, "message": "card declined", "_outputPath": "†state.receipt || †state.error"},
        {"_tool": "t__sleep", "ms": 1, "receipt": "†state.receipt"},
        {"_tool": "t__sleep", "ms": 1, "error": "†state.error"}
    ]));
    let (record, _, _) = exec(&p, &settings()).await;
    let ids: Vec<String> = record.steps.iter().map(|s| s.id.clone()).collect();
    assert_eq!(status(&record, &ids[1]).0, StepStatus::Skipped);
    assert_eq!(status(&record, &ids[2]).0, StepStatus::Succeeded);
    assert_eq!(
        record.step(&ids[2]).and_then(|s| s.args.clone()),
        Some(json!({"ms": 1, "error": "card declined"}))
    );
    assert_eq!(
        record.status,
        RunStatus::Succeeded,
        "a caught failure is the plan working as written"
    );
}

#[tokio::test(start_paused = true)]
async fn the_result_holds_only_the_asked_outputs_truncated() {
    let p = plan(json!({"steps": [
        {"id": "big", "tool": "t__sleep", "args": {"ms": 1, "blob": "x".repeat(5000)}},
        {"id": "small", "tool": "t__sleep", "args": {"ms": 1, "blob": "$ref:big.blob"}}
    ], "outputs": ["big"]}));
    let (record, _, _) = exec(&p, &settings()).await;
    let result = record.result(200);
    let outputs = result["outputs"].as_object().cloned().unwrap_or_default();
    assert_eq!(outputs.keys().collect::<Vec<_>>(), ["big"]);
    assert!(
        outputs["big"]["blob"]
            .as_str()
            .is_some_and(|s| s.ends_with("more chars]"))
    );
    assert!(result["truncated"]["big"]["original_chars"].as_u64() > Some(5000));
    assert!(result["steps"]["small"].get("output").is_none());
    assert_eq!(result["stats"]["succeeded"], 2);
}

#[tokio::test(start_paused = true)]
async fn named_selections_return_just_what_was_picked() {
    let p = plan(json!({"steps": [
        {"id": "big", "tool": "t__sleep", "args": {"ms": 1, "items": [1, 2, 3, 4, 5]}},
        {"id": "small", "tool": "t__sleep", "args": {"ms": 2}},
        {"id": "other", "tool": "t__sleep", "args": {"ms": 3}}
    ], "outputs": {
        "hot": {"$ref": "big", "jsonpath": "$.items[?@ > 3]"},
        "first": "$ref:big.items[0]",
        "note": "first is ${big.items[0]}",
        "whole": "small",
        "missing": "$ref:big.nope"
    }}));
    assert_eq!(p.outputs(), vec![StepId::new("big"), StepId::new("small")]);
    let (record, _, _) = exec(&p, &settings()).await;
    let result = record.result(1000);
    assert_eq!(
        result["outputs"],
        json!({
            "hot": [4, 5], "first": 1, "note": "first is 1", "whole": {"ms": 2}, "missing": null
        })
    );
    assert!(
        result["warnings"][0]
            .as_str()
            .is_some_and(|w| w.starts_with("outputs.missing: $ref:big.nope found nothing")),
        "{result}"
    );
    assert_eq!(record.status, RunStatus::Succeeded);
}

#[tokio::test(start_paused = true)]
async fn a_selection_of_a_failed_step_is_left_out() {
    let p = plan(json!({"steps": [
        {"id": "bad", "tool": "t__fail", "args": {"ms": 1}},
        {"id": "good", "tool": "t__sleep", "args": {"ms": 1}}
    ], "outputs": {"a": "$ref:bad.x", "b": "$ref:good.ms"}}));
    let (record, _, _) = exec(&p, &settings()).await;
    assert_eq!(record.result(1000)["outputs"], json!({"b": 1}));
    assert_eq!(record.status, RunStatus::Partial);
}

#[test]
fn selections_naming_unknown_steps_are_plan_issues() {
    let issues = prepare(
        &json!({"steps": [{"id": "a", "tool": "t__sleep"}], "outputs": {"x": "$ref:b.y", "y": "†state.z"}}),
        &tools(),
        &Limits::default(),
    )
    .err()
    .unwrap_or_default();
    let text = crate::plan::render_issues(&issues);
    assert!(
        text.contains("outputs.x") && text.contains("outputs.y"),
        "{text}"
    );
}
