//! Tests of the plan language. Shared fixtures live here; each file covers one concept.

mod bounds;
mod issues;
mod misspelled;
mod properties;
mod references;
mod resolve;
mod seeds;

use serde_json::{Value, json};

use super::{Limits, ToolSpec, ValidatedPlan, prepare, render_issues};

/// Snapshots sit in src/plan/snapshots and are named without the module path, so the
/// same files serve this module wherever it is mounted.
fn snapshot_settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings
}

fn spec(server: &str, tool: &str, schema: Value) -> ToolSpec {
    ToolSpec {
        exported: format!("{server}__{tool}"),
        server: server.to_owned(),
        tool: tool.to_owned(),
        input_schema: schema,
        output_schema: None,
        read_only: server == "metrics" || server == "weather",
        idempotent: false,
        tier: if server == "metrics" || server == "weather" {
            crate::policy::Tier::Read
        } else {
            crate::policy::Tier::Destructive
        },
    }
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// A catalog shaped like the demo servers, with strict schemas (additionalProperties:
/// false, enums) so that every schema issue shows up in the snapshots.
fn demo_catalog() -> Vec<ToolSpec> {
    vec![
        spec(
            "metrics",
            "list_metrics",
            object(json!({"category": {"type": "string"}}), &[]),
        ),
        spec(
            "metrics",
            "query_metric",
            object(json!({"name": {"type": "string"}}), &["name"]),
        ),
        spec(
            "metrics",
            "check_threshold",
            object(
                json!({
                    "metric": {"type": "string"},
                    "value": {"type": "number"},
                    "threshold": {"type": "number"},
                    "op": {"type": "string", "enum": ["gt", "gte", "lt", "lte", "eq"]}
                }),
                &["metric", "value", "threshold", "op"],
            ),
        ),
        spec(
            "weather",
            "get_forecast",
            json!({"type": "object", "properties": {
                "location": {"type": "string"},
                "latitude": {"type": "number"},
                "longitude": {"type": "number"}
            }}),
        ),
        spec(
            "weather",
            "compare",
            object(json!({"a": {}, "b": {}}), &["a", "b"]),
        ),
        spec(
            "files",
            "write_file",
            object(
                json!({"path": {"type": "string"}, "content": {"type": "string"}}),
                &["path", "content"],
            ),
        ),
        spec(
            "files",
            "read_file",
            object(json!({"path": {"type": "string"}}), &["path"]),
        ),
        spec(
            "chaos",
            "echo",
            json!({"type": "object", "properties": {"input": {}, "message": {"type": "string"}}}),
        ),
        spec(
            "chaos",
            "fail",
            json!({"type": "object", "properties": {"message": {"type": "string"}}}),
        ),
        spec(
            "chaos",
            "sleep",
            object(json!({"ms": {"type": "integer"}}), &["ms"]),
        ),
        // Two servers offering one bare name, for ambiguity.
        spec("files", "status", json!({"type": "object"})),
        spec("chaos", "status", json!({"type": "object"})),
    ]
}

/// Tools named in the seeds' own examples, on a server `seed`, with open schemas.
fn seed_catalog() -> Vec<ToolSpec> {
    let tools = [
        "get_weather",
        "compare_data",
        "summarize",
        "flaky_api",
        "reliable_api",
        "process",
        "list_metrics",
        "query_metric",
        "check_threshold",
        "fetchUserProfile",
        "summarizeProfile",
        "detectLanguage",
        "isEnglish",
        "translateText",
        "processPayment",
        "confirmOrder",
        "reportFailure",
    ];
    let mut specs: Vec<ToolSpec> = tools
        .iter()
        .map(|t| spec("seed", t, json!({"type": "object"})))
        .collect();
    specs.push(spec("weather", "get-forecast", json!({"type": "object"})));
    specs.push(spec("files", "write_file", json!({"type": "object"})));
    specs
}

/// Prepares a plan against the demo catalog, panicking with the rendered issues.
fn valid(plan: Value) -> ValidatedPlan {
    match prepare(&plan, &demo_catalog(), &Limits::default()) {
        Ok(plan) => plan,
        Err(issues) => panic!("expected a valid plan:\n{}", render_issues(&issues)),
    }
}

/// The rendered issues of a plan that must be invalid against the demo catalog.
fn invalid(plan: Value) -> String {
    invalid_with(plan, &Limits::default())
}

fn invalid_with(plan: Value, limits: &Limits) -> String {
    match prepare(&plan, &demo_catalog(), limits) {
        Ok(plan) => panic!("expected issues, got a valid plan: {plan:?}"),
        Err(issues) => render_issues(&issues),
    }
}
