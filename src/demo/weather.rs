//! The weather scenario of seeds 000 and 002: per-city weather with structured output, a
//! forecast by coordinates, and a comparison of two results.

use rmcp::model::{CallToolResult, JsonObject, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use super::{OutputSchemaExt, done, failure, num_arg, str_arg, tool};

const CONDITIONS: &[&str] = &[
    "sunny",
    "partly cloudy",
    "cloudy",
    "light rain",
    "windy",
    "clear",
];

pub(super) fn tools() -> Vec<Tool> {
    let read_only = ToolAnnotations::new().read_only(true).idempotent(true);
    let report = json!({"type": "object", "properties": {
        "location": {"type": "string"}, "temperature_c": {"type": "number"},
        "condition": {"type": "string"}, "humidity_pct": {"type": "number"},
        "wind_kph": {"type": "number"}},
        "required": ["location", "temperature_c", "condition", "humidity_pct", "wind_kph"]});
    vec![
        tool(
            "get_weather",
            "Current weather for a city (deterministic demo data).",
            json!({"type": "object", "properties": {"location": {"type": "string", "description": "a city, e.g. Tokyo"}}, "required": ["location"]}),
        )
        .with_output_schema_value(report.clone())
        .with_annotations(read_only.clone()),
        tool(
            "get-forecast",
            "Forecast for a latitude/longitude (deterministic demo data).",
            json!({"type": "object", "properties": {"latitude": {"type": "number"}, "longitude": {"type": "number"}}, "required": ["latitude", "longitude"]}),
        )
        .with_output_schema_value(report)
        .with_annotations(read_only.clone()),
        tool(
            "compare_data",
            "Compare two JSON values (e.g. two weather reports): shared numeric fields and their differences (a - b).",
            json!({"type": "object", "properties": {"data_a": {}, "data_b": {}}, "required": ["data_a", "data_b"]}),
        )
        .with_annotations(read_only),
    ]
}

pub(super) fn call(name: &str, args: &JsonObject) -> Result<CallToolResult, rmcp::ErrorData> {
    done(match name {
        "get_weather" => str_arg(args, "location").map(|l| CallToolResult::structured(report(l))),
        "get-forecast" => forecast(args),
        "compare_data" => compare(args),
        other => Err(failure(format!("unknown tool '{other}'"))),
    })
}

/// FNV-1a: a stable seed per place, so the same city always has the same weather.
fn seed(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn report(location: &str) -> Value {
    let h = seed(&location.to_lowercase());
    let temperature = (h % 400) as f64 / 10.0 - 5.0;
    json!({
        "location": location,
        "temperature_c": temperature,
        "condition": CONDITIONS[(h / 400 % CONDITIONS.len() as u64) as usize],
        "humidity_pct": (h / 7 % 70 + 25) as f64,
        "wind_kph": (h / 11 % 40) as f64,
    })
}

fn forecast(args: &JsonObject) -> Result<CallToolResult, CallToolResult> {
    let lat = num_arg(args, "latitude")?
        .ok_or_else(|| failure("missing required argument 'latitude'"))?;
    let lon = num_arg(args, "longitude")?
        .ok_or_else(|| failure("missing required argument 'longitude'"))?;
    if !(-90.0..=90.0).contains(&lat) || !(-180.0..=180.0).contains(&lon) {
        return Err(failure(format!("no such place: {lat}, {lon}")));
    }
    Ok(CallToolResult::structured(report(&format!(
        "{lat:.4},{lon:.4}"
    ))))
}

fn compare(args: &JsonObject) -> Result<CallToolResult, CallToolResult> {
    let (Some(a), Some(b)) = (args.get("data_a"), args.get("data_b")) else {
        return Err(failure("missing required arguments 'data_a' and 'data_b'"));
    };
    let (a, b) = (parse_json_text(a), parse_json_text(b));
    let mut differences = Map::new();
    if let (Value::Object(a), Value::Object(b)) = (&a, &b) {
        for (key, va) in a {
            if let (Some(x), Some(y)) = (va.as_f64(), b.get(key).and_then(Value::as_f64)) {
                differences.insert(key.clone(), json!(((x - y) * 100.0).round() / 100.0));
            }
        }
    }
    let label = |v: &Value| {
        v.get("location")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string()
    };
    let summary = match differences.get("temperature_c").and_then(Value::as_f64) {
        Some(d) if d > 0.0 => format!("{} is {d} °C warmer than {}", label(&a), label(&b)),
        Some(d) if d < 0.0 => format!("{} is {} °C cooler than {}", label(&a), -d, label(&b)),
        Some(_) => format!("{} and {} have the same temperature", label(&a), label(&b)),
        None => format!("{} shared numeric fields", differences.len()),
    };
    Ok(CallToolResult::structured(json!({
        "equal": a == b, "differences": differences, "summary": summary
    })))
}

/// Accepts a value or a JSON document in a string (references may hand either).
fn parse_json_text(value: &Value) -> Value {
    match value {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| value.clone()),
        other => other.clone(),
    }
}
