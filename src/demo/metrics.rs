//! The monitoring scenario of seed 001: list compute metrics, query one, check a threshold.

use rmcp::model::{CallToolResult, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use super::{OutputSchemaExt, done, failure, num_arg, str_arg, tool};

/// name, category, unit, current value: fixed, so plans and tests are reproducible.
const METRICS: &[(&str, &str, &str, f64)] = &[
    ("cpu_usage", "compute", "%", 72.5),
    ("memory_usage", "compute", "%", 64.0),
    ("disk_usage", "storage", "%", 81.2),
    ("disk_iops", "storage", "ops/s", 1250.0),
    ("net_in", "network", "MB/s", 12.4),
    ("net_out", "network", "MB/s", 3.1),
];

pub(super) fn tools() -> Vec<Tool> {
    let read_only = ToolAnnotations::new().read_only(true);
    vec![
        tool(
            "list_metrics",
            "List the available metrics, optionally of one category (compute, storage, network).",
            json!({"type": "object", "properties": {
                "category": {"type": "string", "description": "compute, storage or network"}}}),
        )
        .with_output_schema_value(json!({"type": "object", "properties": {
            "metrics": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "category": {"type": "string"}, "unit": {"type": "string"}}}}},
            "required": ["metrics"]}))
        .with_annotations(read_only.clone()),
        tool(
            "query_metric",
            "Read the current value of a metric.",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        )
        .with_output_schema_value(json!({"type": "object", "properties": {
            "name": {"type": "string"}, "current": {"type": "number"}, "unit": {"type": "string"},
            "category": {"type": "string"}}, "required": ["name", "current", "unit"]}))
        .with_annotations(read_only.clone()),
        tool(
            "check_threshold",
            "Compare a metric's value with a threshold. Without 'value', the metric's current value is used. op: gt, gte, lt, lte, eq (or >, >=, <, <=, ==).",
            json!({"type": "object", "properties": {
                "metric": {"type": "string"},
                "metric_name": {"type": "string", "description": "alias of metric"},
                "value": {"type": ["number", "string"]},
                "threshold": {"type": ["number", "string"]},
                "op": {"type": "string"},
                "operator": {"type": "string", "description": "alias of op"}},
                "required": ["threshold"]}),
        )
        .with_output_schema_value(json!({"type": "object", "properties": {
            "metric": {"type": "string"}, "value": {"type": "number"}, "threshold": {"type": "number"},
            "op": {"type": "string"}, "exceeded": {"type": "boolean"}}, "required": ["value", "threshold", "op", "exceeded"]}))
        .with_annotations(read_only),
    ]
}

pub(super) fn call(name: &str, args: &JsonObject) -> Result<CallToolResult, rmcp::ErrorData> {
    done(match name {
        "list_metrics" => Ok(list(args)),
        "query_metric" => str_arg(args, "name").and_then(query),
        "check_threshold" => check(args),
        other => Err(failure(format!("unknown tool '{other}'"))),
    })
}

fn list(args: &JsonObject) -> CallToolResult {
    let category = args.get("category").and_then(Value::as_str);
    let metrics: Vec<Value> = METRICS
        .iter()
        .filter(|(_, c, _, _)| category.is_none_or(|want| want == *c))
        .map(|(name, category, unit, _)| json!({"name": name, "category": category, "unit": unit}))
        .collect();
    CallToolResult::structured(json!({ "metrics": metrics }))
}

fn find(
    name: &str,
) -> Result<&'static (&'static str, &'static str, &'static str, f64), CallToolResult> {
    METRICS.iter().find(|m| m.0 == name).ok_or_else(|| {
        let names: Vec<_> = METRICS.iter().map(|m| m.0).collect();
        failure(format!(
            "unknown metric '{name}' (known: {})",
            names.join(", ")
        ))
    })
}

fn query(name: &str) -> Result<CallToolResult, CallToolResult> {
    let (name, category, unit, current) = find(name)?;
    Ok(CallToolResult::structured(
        json!({"name": name, "current": current, "unit": unit, "category": category}),
    ))
}

fn check(args: &JsonObject) -> Result<CallToolResult, CallToolResult> {
    let metric = args
        .get("metric")
        .or_else(|| args.get("metric_name"))
        .and_then(Value::as_str);
    let value = match (num_arg(args, "value")?, metric) {
        (Some(v), _) => v,
        (None, Some(metric)) => find(metric)?.3,
        (None, None) => {
            return Err(failure(
                "give 'value', or 'metric' to read its current value",
            ));
        }
    };
    let threshold = num_arg(args, "threshold")?
        .ok_or_else(|| failure("missing required argument 'threshold'"))?;
    let op = args
        .get("op")
        .or_else(|| args.get("operator"))
        .and_then(Value::as_str)
        .unwrap_or("gt");
    let exceeded = match op {
        "gt" | ">" => value > threshold,
        "gte" | ">=" => value >= threshold,
        "lt" | "<" => value < threshold,
        "lte" | "<=" => value <= threshold,
        "eq" | "==" => (value - threshold).abs() < f64::EPSILON,
        other => {
            return Err(failure(format!(
                "unknown op '{other}' (gt, gte, lt, lte, eq)"
            )));
        }
    };
    Ok(CallToolResult::structured(json!({
        "metric": metric, "value": value, "threshold": threshold, "op": op, "exceeded": exceeded
    })))
}
