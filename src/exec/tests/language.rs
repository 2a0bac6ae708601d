//! Conditions, loops and value steps as they run: one plan and its expectations a case.

use super::*;

#[tokio::test(start_paused = true)]
async fn conditions_decide_which_steps_run() {
    let cases: &[(Value, &str, RunStatus)] = &[
        // A condition that holds runs the step; one that does not skips it and its
        // readers, and neither counts against the plan.
        (
            json!({"steps": [
                {"id": "cpu", "tool": "t__sleep", "args": {"ms": 10, "load": 85}},
                {"id": "alert", "when": {"$ref": "cpu.load", "gt": 80}, "tool": "t__sleep", "args": {"ms": 1}},
                {"id": "calm", "when": {"$ref": "cpu.load", "lte": 80}, "tool": "t__sleep", "args": {"ms": 1}},
                {"id": "after_calm", "tool": "t__sleep", "args": {"x": "$ref:calm.ms"}}
            ]}),
            "cpu=succeeded alert=succeeded calm=skipped after_calm=skipped",
            RunStatus::Succeeded,
        ),
        (
            json!({"inputs": {"send": false}, "steps": [
                {"id": "send", "when": "$ref:input.send", "tool": "t__write", "args": {}},
                {"id": "other", "tool": "t__sleep", "args": {}}
            ]}),
            "send=skipped other=succeeded",
            RunStatus::Succeeded,
        ),
        (
            json!({"steps": [
                {"id": "a", "tool": "t__sleep", "args": {"tags": ["x", "y"], "name": "web-1"}},
                {"id": "b", "when": {"all": [{"$ref": "a.tags", "contains": "y"},
                                             {"not": {"$ref": "a.name", "matches": "^db"}}]},
                 "tool": "t__sleep", "args": {}},
                {"id": "c", "when": {"any": [{"$ref": "a.missing", "exists": true}, false]},
                 "tool": "t__sleep", "args": {}}
            ]}),
            "a=succeeded b=succeeded c=skipped",
            RunStatus::Succeeded,
        ),
        // A condition that cannot be decided fails its step, with the reason.
        (
            json!({"steps": [
                {"id": "a", "tool": "t__sleep", "args": {"obj": {"k": 1}}},
                {"id": "b", "when": {"$ref": "a.obj", "gt": 3}, "tool": "t__sleep", "args": {}}
            ]}),
            "a=succeeded b=failed",
            RunStatus::Partial,
        ),
        // Seed 002's CONDITIONAL runs as auto.
        (
            json!({"planType": "CONDITIONAL", "steps": [
                {"id": "a", "tool": "t__sleep", "args": {"ok": true}},
                {"id": "b", "when": "${a.ok}", "tool": "t__sleep", "args": {}}
            ]}),
            "a=succeeded b=succeeded",
            RunStatus::Succeeded,
        ),
    ];
    for (plan_json, expect, run_status) in cases {
        let (record, got, _) = outcome(plan_json.clone()).await;
        assert_eq!(&got, expect, "{plan_json}");
        assert_eq!(record.status, *run_status, "{plan_json}");
    }
    let (record, _, _) = outcome(cases[0].0.clone()).await;
    let calm = record.step("calm").expect("calm");
    assert_eq!(calm.reason.as_deref(), Some(crate::plan::CONDITION_FALSE));
    assert_eq!(calm.attempts, 0, "a skipped step calls nothing");
    let after = record.step("after_calm").expect("after_calm");
    assert_eq!(
        after.reason.as_deref(),
        Some("dependency 'calm' was skipped")
    );
    let (record, _, _) = outcome(cases[3].0.clone()).await;
    let error = record
        .step("b")
        .and_then(|s| s.error.clone())
        .unwrap_or_default();
    assert!(error.contains("cannot order an object"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn value_steps_reshape_without_calling_anything() {
    let (record, got, outputs) = outcome(json!({"inputs": {"city": "Paris"}, "steps": [
        {"id": "a", "tool": "t__sleep", "args": {"temp": 21, "unit": "C"}},
        {"id": "v", "value": {"where": "${input.city}", "reading": "${a.temp} ${a.unit}", "raw": "$ref:a.temp"}},
        {"id": "b", "tool": "t__sleep", "args": {"report": "$ref:v"}}
    ]}))
    .await;
    assert_eq!(got, "a=succeeded v=succeeded b=succeeded");
    assert_eq!(
        outputs["v"],
        json!({"where": "Paris", "reading": "21 C", "raw": 21})
    );
    assert_eq!(outputs["b"]["report"], outputs["v"]);
    assert_eq!(record.step("v").map(|s| s.attempts), Some(0));
}

#[tokio::test(start_paused = true)]
async fn foreach_calls_once_per_item_bounded_by_its_concurrency() {
    let p = plan(json!({"steps": [
        {"id": "list", "tool": "t__sleep", "args": {"ms": 10, "hosts": [
            {"name": "a", "ms": 100}, {"name": "b", "ms": 100}, {"name": "c", "ms": 100},
            {"name": "d", "ms": 100}, {"name": "e", "ms": 100}]}},
        {"id": "ping", "foreach": "$ref:list.hosts", "concurrency": 2,
         "tool": "t__sleep", "args": {"ms": "$ref:item.ms", "host": "${item.name}", "n": "$ref:index"}},
        {"id": "names", "foreach": "$ref:ping", "value": "${item.host}#${index}"}
    ]}));
    let (record, fake, took) = exec(&p, &settings()).await;
    assert_eq!(record.status, RunStatus::Succeeded);
    // 5 items, 2 at a time, 100 ms each: 3 rounds after the 10 ms list.
    assert_eq!(took, ms(310));
    assert_eq!(fake.max_active(), 2);
    let ping = record.step("ping").expect("ping");
    assert_eq!(ping.items.len(), 5);
    assert_eq!(
        ping.output.as_ref().map(|o| o[3]["host"].clone()),
        Some(json!("d"))
    );
    assert_eq!(
        ping.output.as_ref().map(|o| o[3]["n"].clone()),
        Some(json!(3))
    );
    assert_eq!(ping.attempts, 5);
    assert_eq!(
        record.step("names").and_then(|s| s.output.clone()),
        Some(json!(["a#0", "b#1", "c#2", "d#3", "e#4"]))
    );
    let result = record.result(10_000);
    assert_eq!(
        result["steps"]["ping"]["items"],
        json!({"total": 5, "succeeded": 5})
    );
    assert!(
        result["steps"]["ping"].get("attempts").is_none(),
        "one call per item is no retry"
    );
}

#[tokio::test(start_paused = true)]
async fn foreach_without_concurrency_is_bounded_by_the_plan_limit() {
    let items: Vec<Value> = (0..10).map(|_| json!(50)).collect();
    let p = plan(json!({"steps": [
        {"id": "each", "foreach": items, "tool": "t__sleep", "args": {"ms": "$ref:item"}}
    ]}));
    let limited = Settings {
        max_concurrency: 4,
        ..settings()
    };
    let (record, fake, took) = exec(&p, &limited).await;
    assert_eq!(record.status, RunStatus::Succeeded);
    assert_eq!(fake.max_active(), 4);
    assert_eq!(took, ms(150));
}

/// Items 1 and 3 fail; what the step and its reader become under each `on_error`.
#[tokio::test(start_paused = true)]
async fn a_partly_failed_loop_follows_the_plan_error_policy() {
    let mixed = |on_error: &str| {
        json!({"on_error": on_error, "steps": [
            {"id": "ok", "foreach": [0, 2, 4], "tool": "t__sleep", "args": {"ms": 10, "i": "$ref:item"}},
            {"id": "bad", "foreach": [1, 3], "tool": "t__fail", "args": {"ms": 10, "message": "item ${item} broke"}},
            {"id": "read", "tool": "t__sleep", "args": {"ok": "$ref:ok", "bad": "$ref:bad"}}
        ]})
    };
    let (record, got, _) = outcome(mixed("fail_forward")).await;
    assert_eq!(got, "ok=succeeded bad=failed read=skipped");
    assert_eq!(record.status, RunStatus::Partial);
    let bad = record.step("bad").expect("bad");
    assert_eq!(
        bad.error.as_deref(),
        Some("2 of 2 items did not succeed: item 0: item 1 broke; item 1: item 3 broke")
    );
    assert_eq!(bad.items.len(), 2);

    let (_, got, outputs) = outcome(mixed("continue")).await;
    assert_eq!(got, "ok=succeeded bad=failed read=succeeded");
    assert_eq!(
        outputs["read"]["bad"],
        json!(["item 1 broke", "item 3 broke"])
    );
}

#[tokio::test(start_paused = true)]
async fn fail_fast_stops_a_loop_at_its_first_failed_item() {
    let p = plan(json!({"on_error": "fail_fast", "steps": [
        {"id": "each", "foreach": [30, 10, 500, 500], "concurrency": 2,
         "tool": "t__fail", "args": {"ms": "$ref:item", "message": "broke after ${item}"}}
    ]}));
    let (record, _, took) = exec(&p, &settings()).await;
    assert_eq!(took, ms(10), "the item still running is cancelled at once");
    let each = record.step("each").expect("each");
    assert_eq!(each.status, StepStatus::Failed, "its own item failed");
    let items: Vec<&str> = each.items.iter().map(|i| i.status.as_str()).collect();
    // Item 1 failed at 10 ms and item 0 was cancelled; items 2 and 3 never started.
    assert_eq!(items, ["cancelled", "failed", "skipped", "skipped"]);
    assert_eq!(record.status, RunStatus::Failed);
}

#[tokio::test(start_paused = true)]
async fn foreach_items_are_checked_when_they_are_known() {
    let cases: &[(Value, &str, &str)] = &[
        (
            json!({"steps": [
                {"id": "a", "tool": "t__sleep", "args": {"list": {"not": "an array"}}},
                {"id": "b", "foreach": "$ref:a.list", "tool": "t__sleep", "args": {}}
            ]}),
            "a=succeeded b=failed",
            "foreach needs an array, and its items are an object",
        ),
        (
            json!({"steps": [
                {"id": "a", "tool": "t__sleep", "args": {"list": []}},
                {"id": "b", "foreach": "$ref:a.list", "tool": "t__sleep", "args": {}},
                {"id": "c", "tool": "t__sleep", "args": {"b": "$ref:b"}}
            ]}),
            "a=succeeded b=succeeded c=succeeded",
            "",
        ),
        (
            json!({"steps": [
                {"id": "a", "tool": "t__sleep", "args": {"x": 1, "y": 2}},
                {"id": "b", "foreach": ["$ref:a.x", "$ref:a.y", 3], "value": "$ref:item"},
                {"id": "c", "tool": "t__sleep", "args": {"b": "$ref:b"}}
            ]}),
            "a=succeeded b=succeeded c=succeeded",
            "",
        ),
        (
            json!({"steps": [
                {"id": "a", "tool": "t__sleep", "args": {"go": false}},
                {"id": "b", "when": "$ref:a.go", "foreach": [1, 2], "tool": "t__sleep", "args": {}}
            ]}),
            "a=succeeded b=skipped",
            "",
        ),
    ];
    for (plan_json, expect, error) in cases {
        let (record, got, _) = outcome(plan_json.clone()).await;
        assert_eq!(&got, expect, "{plan_json}");
        let text = record
            .step("b")
            .and_then(|s| s.error.clone())
            .unwrap_or_default();
        assert!(text.contains(error), "{text}");
    }
    let few = prepare(
        &json!({"steps": [
            {"id": "a", "tool": "t__sleep", "args": {"list": [1, 2, 3]}},
            {"id": "b", "foreach": "$ref:a.list", "tool": "t__sleep", "args": {}}
        ]}),
        &tools(),
        &Limits {
            max_foreach_items: 2,
            ..Limits::default()
        },
    )
    .unwrap_or_else(|issues| panic!("{}", crate::plan::render_issues(&issues)));
    let (record, _, _) = exec(&few, &settings()).await;
    let error = record
        .step("b")
        .and_then(|s| s.error.clone())
        .unwrap_or_default();
    assert!(error.contains("foreach over 3 items; at most 2"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn progress_counts_items() {
    #[derive(Default)]
    struct Counts(Mutex<Vec<(String, usize, usize)>>);
    impl Observer for Counts {
        fn step_finished(&self, record: &StepRecord, finished: usize, total: usize) {
            let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
            seen.push((record.id.clone(), finished, total));
        }
        fn item_finished(
            &self,
            step: &PlannedStep,
            item: &ItemRecord,
            finished: usize,
            total: usize,
        ) {
            let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
            seen.push((format!("{}[{}]", step.id, item.index), finished, total));
        }
    }
    let p = plan(json!({"steps": [
        {"id": "a", "tool": "t__sleep", "args": {"ms": 10, "list": [10, 20, 30]}},
        {"id": "b", "foreach": "$ref:a.list", "tool": "t__sleep", "args": {"ms": "$ref:item"}}
    ]}));
    let counts = Counts::default();
    let fake = Arc::new(Fake::default());
    run(&p, fake, &settings(), &counts, CancellationToken::new()).await;
    let seen = counts.0.into_inner().unwrap_or_else(|e| e.into_inner());
    let expected: Vec<(String, usize, usize)> = [
        ("a", 1, 2),
        ("b[0]", 2, 5),
        ("b[1]", 3, 5),
        ("b[2]", 4, 5),
        ("b", 5, 5),
    ]
    .iter()
    .map(|(id, f, t)| ((*id).to_owned(), *f, *t))
    .collect();
    assert_eq!(seen, expected);
}

#[tokio::test(start_paused = true)]
async fn the_plan_time_limit_ends_a_running_loop_as_timed_out() {
    let p = plan(json!({"timeout_ms": 250, "steps": [
        {"id": "each", "foreach": [100, 100, 100, 100], "concurrency": 1,
         "tool": "t__sleep", "args": {"ms": "$ref:item"}}
    ]}));
    let (record, _, took) = exec(&p, &settings()).await;
    assert_eq!(took, ms(250));
    let each = record.step("each").expect("each");
    assert_eq!(each.status, StepStatus::TimedOut);
    let items: Vec<&str> = each.items.iter().map(|i| i.status.as_str()).collect();
    assert_eq!(items, ["succeeded", "succeeded", "timed_out", "skipped"]);
}

/// A loop stopped before its items could start still ends, once, with a reason.
#[tokio::test(start_paused = true)]
async fn a_loop_stopped_before_its_items_start_ends_with_a_reason() {
    let cases: &[(Value, &str)] = &[
        // The value step wins the race before the loop's items start.
        (
            json!({"strategy": "competitive", "steps": [
                {"id": "v", "value": 1},
                {"id": "each", "foreach": [10, 20], "tool": "t__sleep", "args": {"ms": "$ref:item"}}
            ]}),
            "lost the race to 'v'",
        ),
        // The first loop fails at once (its items are no array) while the second waits.
        (
            json!({"on_error": "fail_fast", "steps": [
                {"id": "bad", "foreach": "$ref:input.x", "tool": "t__sleep", "args": {}},
                {"id": "each", "foreach": [10, 20], "tool": "t__sleep", "args": {"ms": "$ref:item"}}
            ], "inputs": {"x": {"not": "an array"}}}),
            "fail_fast: 'bad' failed",
        ),
    ];
    for (plan_json, reason) in cases {
        let p = plan(plan_json.clone());
        let (record, _, _) = exec(&p, &settings()).await;
        let each = record.step("each").expect("each");
        assert_ne!(each.status, StepStatus::Succeeded, "{plan_json}");
        let why = each
            .error
            .clone()
            .or(each.reason.clone())
            .unwrap_or_default();
        assert_eq!(why, *reason, "{plan_json}: {each:?}");
    }
}
