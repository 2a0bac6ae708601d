//! Plans on the data real servers return (DESIGN §17): text holding JSON read by paths,
//! loops over it and text forms, loops paired by `[index]`, and references that find
//! nothing failing their step, as the model reads it.

use super::*;

fn output(record: &RunRecord, id: &str) -> Value {
    record
        .step(id)
        .and_then(|s| s.output.clone())
        .unwrap_or(Value::Null)
}

/// What a read tool of server-filesystem answers for a JSON file: its text in `content`.
/// The fake `t__sleep` answers its arguments, so this step answers `{"content": TEXT}`.
fn read_file(id: &str, text: &str) -> Value {
    json!({"id": id, "tool": "t__sleep", "args": {"content": text}})
}

#[tokio::test(start_paused = true)]
async fn a_condition_reads_into_json_text() {
    let (record, got, _) = outcome(json!({"steps": [
        read_file("cfg", "{\"threshold\": 3, \"mode\": \"strict\"}\n"),
        {"id": "alert", "when": {"$ref": "cfg.content.threshold", "gt": 2}, "tool": "t__sleep", "args": {"mode": "${cfg.content.mode}"}},
        {"id": "calm", "when": {"$ref": "cfg.content.threshold", "lte": 2}, "tool": "t__sleep", "args": {}},
        {"id": "typo", "when": {"$ref": "cfg.content.treshold", "gt": 2}, "tool": "t__sleep", "args": {}}
    ]}))
    .await;
    assert_eq!(
        got,
        "cfg=succeeded alert=succeeded calm=skipped typo=failed"
    );
    assert_eq!(output(&record, "alert"), json!({"mode": "strict"}));
    let error = status(&record, "typo").1.unwrap_or_default();
    assert!(
        error.contains("`cfg.content` has no `treshold`; its fields: threshold, mode"),
        "a misspelled field fails the step rather than skipping it: {error}"
    );
}

#[tokio::test(start_paused = true)]
async fn foreach_loops_over_text_holding_a_json_array() {
    let (record, got, _) = outcome(json!({"steps": [
        {"id": "tree", "tool": "t__sleep", "args": {"text": " [{\"name\": \"a\"}, {\"name\": \"b\"}] "}},
        {"id": "names", "foreach": "$ref:tree.text", "value": "${item.name}!"},
        {"id": "prose", "tool": "t__sleep", "args": {"text": "no files here"}},
        {"id": "none", "foreach": "$ref:prose.text", "value": "$ref:item"}
    ]}))
    .await;
    assert_eq!(
        got,
        "tree=succeeded names=succeeded prose=succeeded none=failed"
    );
    assert_eq!(output(&record, "names"), json!(["a!", "b!"]));
    let error = status(&record, "none").1.unwrap_or_default();
    insta::assert_snapshot!("foreach_over_prose", error);
}

#[tokio::test(start_paused = true)]
async fn index_pairs_a_loop_with_an_earlier_loop_over_the_same_items() {
    let (record, got, _) = outcome(json!({"inputs": {"files": ["a.json", "b.json"]}, "steps": [
        {"id": "read", "foreach": "$ref:input.files", "tool": "t__sleep",
         "args": {"content": "{\"size\": ${index}}"}},
        {"id": "pair", "foreach": "$ref:input.files",
         "value": {"file": "$ref:item", "size": "$ref:read[index].content.size", "again": {"$ref": "read[index].content", "parse": "json", "jsonpath": "$.size"}}},
        {"id": "text", "foreach": "$ref:input.files", "value": "${item}: ${read[index].content}"}
    ]}))
    .await;
    assert_eq!(got, "read=succeeded pair=succeeded text=succeeded");
    assert_eq!(
        output(&record, "pair"),
        json!([
            {"file": "a.json", "size": 0, "again": 0},
            {"file": "b.json", "size": 1, "again": 1}
        ])
    );
    assert_eq!(
        output(&record, "text"),
        json!(["a.json: {\"size\": 0}", "b.json: {\"size\": 1}"])
    );
}

#[tokio::test(start_paused = true)]
async fn text_forms_read_what_servers_print() {
    let (record, got, _) = outcome(json!({"steps": [
        // mcp-server-sqlite answers Python reprs.
        {"id": "q", "tool": "t__sleep", "args": {"rows": "[{'id': 1, 'name': 'a', 'ok': True}, {'id': 2, 'name': 'b', 'ok': None}]"}},
        {"id": "names", "foreach": {"$ref": "q.rows", "parse": "json"}, "value": "${item.id}=${item.name}"},
        {"id": "log", "tool": "t__sleep", "args": {"text": "a.txt\nb.txt\n\n", "versions": "core v1.2, ui v3.4"}},
        {"id": "forms", "value": {
            "lines": {"$ref": "log.text", "split": "\n"},
            "pairs": {"$ref": "log.versions", "match": "(?P<name>\\w+) v(?P<version>[\\d.]+)"},
            "first": {"$ref": "q.rows", "parse": "json", "jsonpath": "$[0].ok"}
        }},
        {"id": "wrong", "value": {"$ref": "q", "split": ","}}
    ]}))
    .await;
    assert_eq!(
        got,
        "q=succeeded names=succeeded log=succeeded forms=succeeded wrong=failed"
    );
    assert_eq!(output(&record, "names"), json!(["1=a", "2=b"]));
    assert_eq!(
        output(&record, "forms"),
        json!({
            "lines": ["a.txt", "b.txt"],
            "pairs": [{"name": "core", "version": "1.2"}, {"name": "ui", "version": "3.4"}],
            "first": true
        })
    );
    let error = status(&record, "wrong").1.unwrap_or_default();
    insta::assert_snapshot!("text_form_on_an_object", error);
}

/// The plan a model wrote for a time server whose field is `datetime`: it used to
/// "succeed" with `Echo: Now: null`.
fn date_time_plan(message: Value) -> Value {
    json!({"steps": [
        {"id": "t", "tool": "t__sleep", "args": {"datetime": "2025-06-01T12:00:00+02:00", "timezone": "Europe/Paris", "is_dst": true}},
        {"id": "echo", "tool": "t__sleep", "args": {"message": message}}
    ], "outputs": ["echo"]})
}

#[tokio::test(start_paused = true)]
async fn a_reference_that_finds_nothing_fails_its_step_and_says_so() {
    let (record, got, _) = outcome(date_time_plan(json!("Echo: Now: ${t.date_time}"))).await;
    assert_eq!(got, "t=succeeded echo=failed");
    assert_eq!(record.status, RunStatus::Failed);
    let text = record.render_text(&record.result(8_000));
    insta::assert_snapshot!("date_time_run_text", text);
    // With a default, what it stands for is used instead.
    let fallback = json!({"$ref": "t.date_time", "default": "unknown"});
    let (record, got, _) = outcome(date_time_plan(fallback)).await;
    assert_eq!(got, "t=succeeded echo=succeeded");
    assert_eq!(output(&record, "echo")["message"], json!("unknown"));
}

#[tokio::test(start_paused = true)]
async fn every_warning_of_a_run_is_in_its_text() {
    let (record, _, _) = outcome(json!({"steps": [
        {"id": "w", "tool": "t__write", "args": {"size": 3}, "retries": 2},
        {"id": "v", "value": {"n": 1}}
    ], "outputs": {"size": "$ref:w.size", "gone": "$ref:v.m"}}))
    .await;
    assert_eq!(record.status, RunStatus::Partial);
    let text = record.render_text(&record.result(8_000));
    insta::assert_snapshot!("warnings_in_run_text", text);
}
