//! What a model misspells against real tools, found before anything runs: a field the
//! tool's `outputSchema` cannot have, an argument its `inputSchema` does not list (a
//! warning where the schema lets others through), another system's template syntax.

use serde_json::{Value, json};

use super::super::{Limits, PlanIssue, ToolSpec, prepare, render_issues};
use super::{demo_catalog, snapshot_settings, spec};

/// The demo catalog, plus tools with output schemas and git's open argument schema.
fn catalog() -> Vec<ToolSpec> {
    let mut tools = demo_catalog();
    let mut time = spec("time", "get_current_time", json!({"type": "object"}));
    time.output_schema = Some(json!({
        "type": "object",
        "properties": {
            "datetime": {"type": "string"},
            "timezone": {"type": "string"},
            "is_dst": {"type": "boolean"}
        },
        "required": ["datetime", "timezone", "is_dst"]
    }));
    let mut search = spec("docs", "search", json!({"type": "object"}));
    search.output_schema = Some(json!({
        "type": "object",
        "$defs": {"Hit": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "score": {"type": "number"}},
            "additionalProperties": false
        }},
        "properties": {
            "data": {
                "type": "object",
                "properties": {
                    "hits": {"type": "array", "items": {"$ref": "#/$defs/Hit"}},
                    "raw": {"type": "string"},
                    "next": {"anyOf": [{"$ref": "#/$defs/Hit"}, {"type": "null"}]}
                },
                "additionalProperties": false
            },
            "meta": {"type": "object", "additionalProperties": {"type": "object"}}
        }
    }));
    let log = spec(
        "git",
        "git_log",
        json!({"type": "object", "properties": {
            "repo_path": {"type": "string"}, "max_count": {"type": "integer"}
        }, "required": ["repo_path"]}),
    );
    tools.extend([time, search, log]);
    tools
}

fn check(plan: &Value) -> Result<Vec<PlanIssue>, String> {
    match prepare(plan, &catalog(), &Limits::default()) {
        Ok(valid) => Ok(valid.warnings().to_vec()),
        Err(issues) => Err(render_issues(&issues)),
    }
}

fn snap_invalid(name: &str, plan: Value) {
    let text = check(&plan)
        .err()
        .unwrap_or_else(|| panic!("{name}: expected issues"));
    snapshot_settings().bind(|| insta::assert_snapshot!(name, text));
}

fn time() -> Value {
    json!({"id": "t", "tool": "time__get_current_time", "args": {}})
}

fn search() -> Value {
    json!({"id": "s", "tool": "docs__search", "args": {}})
}

#[test]
fn a_field_the_output_schema_cannot_have_is_an_issue() {
    snap_invalid(
        "issue_output_fields",
        json!({"steps": [time(), search(),
            {"id": "each", "foreach": [1, 2], "tool": "time__get_current_time", "args": {}},
            {"id": "use", "tool": "chaos__echo", "when": {"$ref": "t.is_dts", "eq": false},
             "args": {"message": "now ${t.date_time}", "input": {
                "hit": "$ref:s.data.hits[0].titel",
                "next": "$ref:s.data.nxt",
                "zone": "$ref:each[1].timezon"
            }}}
        ]}),
    );
}

#[test]
fn a_path_the_schema_allows_or_does_not_describe_passes() {
    let plan = json!({"steps": [time(), search(),
        {"id": "each", "foreach": [1, 2], "tool": "time__get_current_time", "args": {}},
        {"id": "use", "tool": "chaos__echo", "args": {"input": [
            "$ref:t.datetime",
            // Open, and nothing like a listed field: may be there.
            "$ref:t.utc_offset_seconds",
            // Text that may hold JSON: read at run time.
            "$ref:s.data.raw.items[0]",
            "$ref:s.data.next.score",
            "$ref:s.meta.anything.at_all",
            "$ref:s.data.hits[0].title",
            "$ref:each[0].timezone",
            "$ref:each"
        ]}}
    ]});
    assert_eq!(check(&plan), Ok(Vec::new()));
}

#[test]
fn an_argument_the_input_schema_does_not_list_is_a_warning_when_others_pass() {
    let plan = json!({"steps": [
        {"id": "log", "tool": "git__git_log", "args": {"repo_path": ".", "limit": 5}},
        {"tool": "chaos__echo", "args": {"mesage": "hi", "colour": "red"}}
    ]});
    let warnings = check(&plan).unwrap_or_else(|issues| panic!("{issues}"));
    let text: String = warnings.iter().map(|w| format!("{w}\n")).collect();
    snapshot_settings().bind(|| insta::assert_snapshot!("warning_unlisted_arguments", text));
    // Where the schema forbids others it is an issue, as before.
    let closed =
        json!({"steps": [{"tool": "metrics__query_metric", "args": {"name": "cpu", "limit": 1}}]});
    assert!(check(&closed).is_err_and(|text| text.contains("unknown argument \"limit\"")));
}

#[test]
fn another_systems_template_naming_a_step_is_an_issue() {
    snap_invalid(
        "issue_foreign_templates",
        json!({"steps": [time(),
            {"id": "say", "tool": "chaos__echo", "args": {
                "message": "It is {{t.datetime}} in {{ t.timezone }}",
                "input": ["$t.datetime", "{t}", "{steps[0].is_dst}", "$input.city"]
            }},
            {"id": "v", "value": {"at": "{t.timezone}"}},
            {"id": "w", "tool": "chaos__echo", "args": {},
             "when": {"$ref": "t.timezone", "eq": "{{t.timezone}}"},
             "foreach": ["$t.datetime"]}
        ]}),
    );
}

#[test]
fn text_that_only_looks_like_a_template_passes() {
    let plan = json!({"steps": [time(),
        {"id": "say", "tool": "chaos__echo", "args": {
            "message": "costs $5, $HOME/bin, {a} {{b.c}} $$t.x $${t.x} {\"t\": 1}",
            "input": "{\"t\": {\"x\": 1}} ${t.datetime}"
        }}
    ]});
    assert_eq!(check(&plan), Ok(Vec::new()));
}
