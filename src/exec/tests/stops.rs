//! Stopping is the executor's job: a plan ends within its limits plus a short grace even
//! when the invoker ignores cancellation, and configured limits are caps a plan cannot
//! raise.

use super::*;
use crate::exec::step::{CANCEL_GRACE, MAX_RETRIES};

/// Runs `plan`, cancelling it after `cancel_after` when given.
async fn exec_cancelled(p: &ValidatedPlan, cancel_after: Duration) -> (RunRecord, Duration) {
    let fake = Arc::new(Fake::default());
    let started = Instant::now();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let settings = settings();
    let run = run(p, fake, &settings, &Quiet, cancel);
    let timer = async {
        tokio::time::sleep(cancel_after).await;
        trigger.cancel();
        std::future::pending::<()>().await;
    };
    let record = tokio::select! {
        record = run => record,
        () = timer => unreachable!("the timer never ends"),
    };
    (record, started.elapsed())
}

/// A step whose invoker ignores cancellation and would take 30 s.
fn deaf(id: &str) -> Value {
    json!({"id": id, "tool": "t__deaf", "args": {"ms": 30_000}})
}

#[tokio::test(start_paused = true)]
async fn a_deaf_invoker_cannot_hold_a_stopped_plan() {
    // The plan's own time limit.
    let p = plan(json!({"steps": [deaf("d")], "timeout_ms": 500}));
    let (record, _, took) = exec(&p, &settings()).await;
    assert_eq!(status(&record, "d").0, StepStatus::TimedOut);
    assert_eq!(took, ms(500) + CANCEL_GRACE);

    // A step's own time limit.
    let p = plan(
        json!({"steps": [{"id": "d", "tool": "t__deaf", "args": {"ms": 30_000}, "timeout_ms": 300}]}),
    );
    let (record, _, took) = exec(&p, &settings()).await;
    assert_eq!(status(&record, "d").0, StepStatus::TimedOut);
    assert_eq!(took, ms(300) + CANCEL_GRACE);

    // fail_fast.
    let p = plan(json!({"on_error": "fail_fast", "steps": [
        deaf("d"),
        {"id": "f", "tool": "t__fail", "args": {"ms": 100}}
    ]}));
    let (record, _, took) = exec(&p, &settings()).await;
    assert_eq!(status(&record, "d").0, StepStatus::Cancelled);
    assert_eq!(took, ms(100) + CANCEL_GRACE);

    // A lost race.
    let p = plan(json!({"strategy": "competitive", "steps": [
        deaf("d"),
        {"id": "w", "tool": "t__sleep", "args": {"ms": 100}}
    ]}));
    let (record, _, took) = exec(&p, &settings()).await;
    assert_eq!(record.winner.as_deref(), Some("w"));
    assert_eq!(record.status, RunStatus::Succeeded);
    assert_eq!(took, ms(100) + CANCEL_GRACE);

    // The host's cancel.
    let p = plan(json!({"steps": [deaf("d")]}));
    let (record, took) = exec_cancelled(&p, ms(200)).await;
    assert_eq!(status(&record, "d").0, StepStatus::Cancelled);
    assert_eq!(took, ms(200) + CANCEL_GRACE);
}

#[tokio::test(start_paused = true)]
async fn a_plan_cannot_raise_the_configured_time_limit() {
    let p = plan(json!({"steps": [{"id": "h", "tool": "t__hang"}], "timeout_ms": 3_600_000}));
    let limited = Settings {
        plan_timeout: ms(1_000),
        ..settings()
    };
    let (record, _, took) = exec(&p, &limited).await;
    assert_eq!(status(&record, "h").0, StepStatus::TimedOut);
    assert_eq!(took, ms(1_000));
}

#[tokio::test(start_paused = true)]
async fn a_race_respects_the_concurrency_limit() {
    let steps: Vec<Value> = (0..6)
        .map(|i| json!({"id": format!("r{i}"), "tool": "t__fail", "args": {"ms": 100}}))
        .collect();
    let p = plan(json!({"strategy": "competitive", "steps": steps}));
    let two = Settings {
        max_concurrency: 2,
        ..settings()
    };
    let (record, fake, took) = exec(&p, &two).await;
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!((fake.max_active(), took), (2, ms(300)));
}

#[tokio::test(start_paused = true)]
async fn retries_are_capped_and_only_for_transient_failures() {
    let attempts = |record: &RunRecord, id: &str| record.step(id).map(|s| s.attempts);
    // A plan asking for a thousand retries gets MAX_RETRIES.
    let p = plan(
        json!({"steps": [{"id": "f", "tool": "t__flaky", "args": {"fails": 1_000}, "retries": 1_000}]}),
    );
    let (record, _, _) = exec(&p, &settings()).await;
    assert_eq!(attempts(&record, "f"), Some(MAX_RETRIES + 1));
    // A tool's own error and a refused call are not retried.
    let p = plan(json!({"steps": [
        {"id": "e", "tool": "t__fail", "args": {"ms": 1}, "retries": 3},
        {"id": "r", "tool": "t__refuse", "retries": 3}
    ]}));
    let (record, fake, took) = exec(&p, &settings()).await;
    assert_eq!(
        (attempts(&record, "e"), attempts(&record, "r")),
        (Some(1), Some(1))
    );
    assert_eq!(*fake.flaky.lock().unwrap_or_else(|e| e.into_inner()), 1);
    assert_eq!(took, ms(1), "no backoff pause");
}

#[tokio::test(start_paused = true)]
async fn a_step_with_a_jsonpath_query_is_resolved_off_the_io_thread_and_recorded() {
    let p = plan(json!({"steps": [
        {"id": "a", "tool": "t__sleep", "args": {"ms": 10, "items": [1, 5, 9]}},
        {"id": "b", "tool": "t__sleep", "args": {"ms": 10, "big": {"$ref": "a", "jsonpath": "$.items[?@ > 2]"}, "none": {"$ref": "a.nope", "default": 0}}},
        {"id": "c", "tool": "t__sleep", "args": {"gone": {"$ref": "a", "jsonpath": "$.nope"}}}
    ]}));
    let (record, _, _) = exec(&p, &settings()).await;
    assert_eq!(status(&record, "b").0, StepStatus::Succeeded);
    let b = record.step("b");
    assert_eq!(
        b.and_then(|s| s.args.clone()),
        Some(json!({"ms": 10, "big": [5, 9], "none": 0}))
    );
    let (c, error) = status(&record, "c");
    assert_eq!(c, StepStatus::Failed);
    assert!(
        error.is_some_and(|e| e.contains("JSONPath `$.nope` matched nothing in `a`")),
        "a query that finds nothing fails its step off the I/O thread too"
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
