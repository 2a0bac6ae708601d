//! What a failure does: `on_error` (`fail_forward`, `fail_fast`, `continue`), a failure
//! caught into a state slot, and retries (only for tools safe to repeat).

use super::*;

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
