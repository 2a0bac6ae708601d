//! What a run gives back: the record, and the lean result with only the outputs asked
//! for (whole steps or named selections), cut to size.

use super::*;

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
            "hot": [4, 5], "first": 1, "note": "first is 1", "whole": {"ms": 2}
        })
    );
    assert!(
        result["warnings"][0]
            .as_str()
            .is_some_and(|w| w.starts_with("outputs.missing: $ref:big.nope found nothing")),
        "{result}"
    );
    assert_eq!(
        record.status,
        RunStatus::Partial,
        "a selection that found nothing is not a success"
    );
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

#[tokio::test(start_paused = true)]
async fn a_deeply_nested_output_is_cut_so_hosts_can_parse_the_answer() {
    // Each step is handed the previous one's output: the last is nested 256 deep.
    let steps: Vec<Value> = (0..256)
        .map(|_| json!({"tool": "t__sleep", "args": {"ms": 0}}))
        .collect();
    let p = plan(json!({"strategy": "chained", "steps": steps, "outputs": ["s256"]}));
    let (record, _, _) = exec(&p, &settings()).await;
    let result = record.result(1_000_000);
    // What a host parses: the result inside a JSON-RPC response, as structuredContent.
    let answer = json!({"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": result}});
    let text = answer.to_string();
    assert!(
        serde_json::from_str::<Value>(&text).is_ok(),
        "serde_json's default limit (128 levels) refuses the answer"
    );
    assert_eq!(
        result["truncated"]["s256"]["max_depth"], 64,
        "{}",
        result["truncated"]
    );
    assert!(text.contains("nested deeper than 64 levels"));
}
