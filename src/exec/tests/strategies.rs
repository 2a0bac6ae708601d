//! Strategies and limits as they run: a step starts when what it reads has finished,
//! within the plan's and each server's concurrency; `sequential`, `chained` and
//! `competitive` as written.

use super::*;

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
