//! Every validation issue, snapshot-tested for the exact text a model reads.

use serde_json::{Value, json};

use super::super::Limits;
use super::{invalid, invalid_with, snapshot_settings};

fn snap(name: &str, plan: Value) {
    let text = invalid(plan);
    snapshot_settings().bind(|| insta::assert_snapshot!(name, text));
}

fn list() -> Value {
    json!({"id": "list", "tool": "metrics__list_metrics", "args": {"category": "compute"}})
}

#[test]
fn malformed_json() {
    snap(
        "issue_malformed_plan_json",
        json!({"plan": "{\"steps\": [{\"tool\": \"metrics__list_metrics\"]}"}),
    );
    snap("issue_malformed_bare_string", json!("{\"steps\": [}"));
    snap(
        "issue_malformed_args_json",
        json!({"steps": [{"tool": "metrics__list_metrics", "arguments": "{\"category\": compute}"}]}),
    );
}

#[test]
fn wrong_shapes() {
    snap("issue_plan_not_object", json!(42));
    snap(
        "issue_steps_not_array",
        json!({"steps": {"tool": "metrics__list_metrics"}}),
    );
    snap(
        "issue_step_not_object",
        json!({"steps": ["metrics__list_metrics"]}),
    );
    snap(
        "issue_args_not_object",
        json!({"steps": [{"tool": "metrics__list_metrics", "args": [1, 2]}]}),
    );
    snap(
        "issue_field_types",
        json!({"goal": 7, "outputs": "list", "inputs": [1], "steps": [
            {"id": ["x"], "tool": "metrics__list_metrics", "depends_on": [1], "timeout_ms": -5,
             "retries": "twice", "retry_unsafe": "yes", "pipe_to": 3}
        ]}),
    );
    snap("issue_no_steps", json!({"steps": []}));
    snap("issue_missing_steps", json!({"goal": "nothing"}));
}

/// A loop that may run no item at a time would never end: its plan is refused.
#[test]
fn a_loop_concurrency_of_zero_is_refused() {
    let text = invalid(json!({"steps": [
        {"id": "each", "foreach": [1, 2], "tool": "metrics__list_metrics", "args": {},
         "concurrency": 0}
    ]}));
    assert!(
        text.contains("steps[0].concurrency") && text.contains("a whole number ≥ 1"),
        "{text}"
    );
}

#[test]
fn unknown_fields_and_values() {
    snap(
        "issue_unknown_fields",
        json!({"ouputs": ["list"], "steps": [
            {"id": "list", "tool": "metrics__list_metrics", "dependson": [], "arg": {}},
            {"_tool": "metrics__list_metrics", "_outputpath": "†state.x"}
        ]}),
    );
    snap(
        "issue_bad_strategy",
        json!({"planType": "RANDOM", "on_error": "explode", "steps": [list()]}),
    );
    snap(
        "issue_two_argument_fields",
        json!({"steps": [{"tool": "metrics__list_metrics", "args": {}, "params": {}}]}),
    );
}

#[test]
fn too_many_steps() {
    let text = invalid_with(
        json!({"steps": [list(), list(), list()]}),
        &Limits {
            max_plan_steps: 2,
            ..Limits::default()
        },
    );
    snapshot_settings().bind(|| insta::assert_snapshot!("issue_too_many_steps", text));
}

#[test]
fn tools() {
    snap(
        "issue_missing_tool",
        json!({"steps": [{"id": "a", "args": {}}, {"tool": "  "}]}),
    );
    snap(
        "issue_unknown_tool",
        json!({"steps": [
            {"tool": "metrics__query_metrics", "args": {"name": "cpu"}},
            {"tool": "weather_forecast"},
            {"serverId": "metrics", "toolName": "query"},
            {"server": "nowhere", "tool": "zzz"}
        ]}),
    );
    snap(
        "issue_ambiguous_tool",
        json!({"steps": [{"tool": "status"}]}),
    );
    snap(
        "issue_recursive_plan",
        json!({"steps": [{"tool": "execute_plan", "args": {"steps": []}}]}),
    );
}

#[test]
fn ids() {
    snap(
        "issue_invalid_ids",
        json!({"steps": [
            {"id": "my step", "tool": "metrics__list_metrics"},
            {"id": "input", "tool": "metrics__list_metrics"},
            {"id": "", "tool": "metrics__list_metrics"}
        ]}),
    );
    snap("issue_duplicate_id", json!({"steps": [list(), list()]}));
}

#[test]
fn references() {
    snap(
        "issue_bad_reference_syntax",
        json!({"steps": [list(), {"tool": "chaos__echo", "args": {
            "a": "$ref:list.metrics[",
            "b": "${list",
            "c": "${}",
            "d": {"$ref": "list", "extra": 1},
            "e": {"$ref": "list", "jsonpath": "$[?"},
            "f": "$ref:list name",
            "g": "${list[\"open}"
        }}]}),
    );
    snap(
        "issue_bad_text_forms",
        json!({"steps": [list(), {"tool": "chaos__echo", "args": {
            "a": {"$ref": "list", "parse": "yaml"},
            "b": {"$ref": "list", "match": "(unclosed"},
            "c": {"$ref": "list", "split": ""},
            "d": {"$ref": "list", "split": ",", "parse": "json"},
            "e": {"$ref": "list", "match": "x".repeat(1_001)}
        }}]}),
    );
    snap(
        "issue_index_outside_foreach",
        json!({"steps": [
            {"id": "read", "foreach": ["a", "b"], "tool": "chaos__echo", "args": {"input": "$ref:item"}},
            {"id": "one", "tool": "chaos__echo", "args": {"input": "$ref:read[index].content"}},
            {"id": "each", "foreach": "$ref:read", "when": "${read[index]}", "tool": "chaos__echo", "args": {"input": "$ref:item"}}
        ], "outputs": {"x": {"$ref": "read[index]"}}}),
    );
    snap(
        "issue_unknown_step_reference",
        json!({"steps": [list(), {"tool": "chaos__echo", "args": {
            "input": "${lst.metrics}",
            "message": "home is ${HOME}"
        }}]}),
    );
    snap(
        "issue_step_index_out_of_range",
        json!({"steps": [list(), {"tool": "chaos__echo", "args": {"input": "$ref:steps[7].name"}}]}),
    );
    snap(
        "issue_self_reference",
        json!({"steps": [{"id": "me", "tool": "chaos__echo", "args": {"input": "$ref:me"}, "depends_on": ["me"]}]}),
    );
    snap(
        "issue_cycles",
        json!({"steps": [
            {"id": "a", "tool": "chaos__echo", "args": {"input": "$ref:b"}},
            {"id": "b", "tool": "chaos__echo", "args": {"input": "${a.x}"}},
            {"id": "c", "tool": "chaos__echo", "depends_on": ["e"]},
            {"id": "d", "tool": "chaos__echo", "args": {"input": {"$ref": "c"}}},
            {"id": "e", "tool": "chaos__echo", "args": {"input": "$ref:d"}}
        ]}),
    );
    snap(
        "issue_forward_reference",
        json!({"strategy": "sequential", "steps": [
            {"id": "first", "tool": "chaos__echo", "args": {"input": "$ref:second"}},
            {"id": "second", "tool": "chaos__echo", "depends_on": ["third"]},
            {"id": "third", "tool": "chaos__echo"}
        ]}),
    );
    snap(
        "issue_unknown_state_slot",
        json!([
            {"_tool": "chaos__echo", "input": "†state.later", "_outputPath": "†state.first"},
            {"_tool": "chaos__echo", "input": "†state.frist", "_outputPath": "†state.later"},
            {"_tool": "chaos__echo", "_outputPath": "state.x"}
        ]),
    );
    snap(
        "issue_competitive_dependency",
        json!({"strategy": "competitive", "steps": [
            {"id": "a", "tool": "chaos__echo"},
            {"id": "b", "tool": "chaos__echo", "args": {"input": "$ref:a"}}
        ]}),
    );
}

#[test]
fn outputs_depends_on_and_pipes() {
    snap(
        "issue_unknown_outputs",
        json!({"steps": [list()], "outputs": ["lists", "steps[4]", "check"]}),
    );
    snap(
        "issue_unknown_depends_on",
        json!({"steps": [list(), {"tool": "chaos__echo", "dependencies": ["lis", "steps[9]"]}]}),
    );
    snap(
        "issue_pipe_target_missing",
        json!({"strategy": "CHAINED", "steps": [
            list(),
            {"tool": "metrics__query_metric", "args": {"name": "cpu"}},
            {"tool": "metrics__query_metric", "pipe_to": "metric", "args": {"name": "cpu"}}
        ]}),
    );
}

#[test]
fn arguments_against_input_schema() {
    snap(
        "issue_schema_arguments",
        json!({"steps": [
            {"tool": "metrics__check_threshold", "args": {
                "metric": 5, "value": "$ref:steps[1].x", "threshold": "80", "operator": "gt"
            }},
            {"tool": "metrics__query_metric"},
            {"tool": "metrics__check_threshold", "args": {
                "metric": "cpu ${steps[1].name}", "value": 1, "threshold": 2, "op": "bigger"
            }},
            {"tool": "chaos__sleep", "args": {"ms": 1.5}}
        ]}),
    );
}

#[test]
fn nested_schemas() {
    let text = {
        use super::super::{ToolSpec, prepare, render_issues};
        let schema = json!({
            "type": "object",
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
            "properties": {
                "points": {"type": "array", "items": {"$ref": "#/$defs/Point"}},
                "mode": {"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]},
                "size": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
                "tags": {"type": "object", "additionalProperties": {"type": "string"}}
            },
            "additionalProperties": false
        });
        let tools = vec![ToolSpec {
            exported: "geo__plot".into(),
            server: "geo".into(),
            tool: "plot".into(),
            input_schema: schema,
            output_schema: None,
            read_only: true,
            idempotent: true,
            tier: crate::policy::Tier::Read,
        }];
        let plan = json!({"steps": [{"tool": "geo__plot", "args": {
            "points": [{"x": 1}, {"y": 2}, {"x": "3"}],
            "mode": "c",
            "size": true,
            "tags": {"ok": "yes", "bad": 1}
        }}]});
        match prepare(&plan, &tools, &Limits::default()) {
            Ok(_) => panic!("expected issues"),
            Err(issues) => render_issues(&issues),
        }
    };
    snapshot_settings().bind(|| insta::assert_snapshot!("issue_schema_nested", text));
}

#[test]
fn everything_at_once() {
    snap(
        "issue_everything_at_once",
        json!({"plan": serde_json::to_string(&json!({
            "strategy": "auto",
            "steps": [
                {"id": "list", "tool": "metrics__list_metric", "args": {"category": "compute"}},
                {"id": "cpu", "tool": "metrics__query_metric", "args": {"name": "$ref:lst.metrics[0].name"}},
                {"id": "cpu", "tool": "metrics__check_threshold",
                 "args": {"metric": "${cpu.name}", "value": "$ref:cpu.current", "threshold": 80}},
                {"tool": "execute_plan"}
            ],
            "outputs": ["check"]
        })).unwrap_or_default()}),
    );
}

#[test]
fn conditions_loops_and_value_steps() {
    // Every problem of the second part of the language, reported together.
    snap(
        "issue_language_second_part",
        json!({"strategy": "sequential", "steps": [
            {"id": "list", "tool": "metrics__list_metrics", "args": {},
             "when": {"$ref": "check.ok", "eq": true}},
            {"id": "cpu", "tool": "metrics__query_metric", "args": {"name": "${item.name}"}},
            {"id": "each", "foreach": {"name": "cpu"}, "tool": "metrics__query_metric",
             "args": {"name": "$ref:item"}},
            {"id": "v", "value": {"n": "$ref:list"}, "tool": "metrics__list_metrics"},
            {"id": "check", "tool": "metrics__list_metrics", "args": {},
             "when": {"$ref": "cpu.current", "greater": 80}},
            {"id": "late", "tool": "metrics__list_metrics", "args": {}, "concurrency": 2,
             "when": {"$ref": "index", "gt": 1}},
            {"id": "many", "foreach": "$ref:list.metrics", "tool": "metrics__query_metric",
             "args": {"name": "$ref:item.name"}, "when": "$ref:item.on"}
        ], "outputs": {"first": "$ref:item"}}),
    );
}
