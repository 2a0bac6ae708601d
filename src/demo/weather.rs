//! The weather scenario of seeds 000 and 002: per-city weather with structured output, a
//! forecast by coordinates, and a comparison of two results; and an hourly history, a large
//! output of which a model usually needs only a few items (the economics benchmark's
//! filter task).

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

/// Most days `get_history` returns: a month of hourly readings (720) is already far more
/// than a model should read whole.
const MAX_HISTORY_DAYS: u64 = 30;

/// The history covers whole days of June 2025 ending on the 30th, so the timestamps need
/// no calendar arithmetic and stay the same from run to run.
const HISTORY_LAST_DAY: u64 = 30;

/// Offset from the day's mean by hour (UTC): coldest before dawn, warmest mid-afternoon.
const DIURNAL_C: [f64; 24] = [
    -4.0, -4.4, -4.8, -5.0, -5.0, -4.6, -3.6, -2.2, -0.8, 0.6, 2.0, 3.2, 4.2, 4.8, 5.0, 4.8, 4.2,
    3.2, 2.0, 0.8, -0.4, -1.6, -2.6, -3.4,
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
        .with_annotations(read_only.clone()),
        tool(
            "get_history",
            "Hourly weather readings for a city over the last 'days' days, oldest first (deterministic demo data; at most 30 days).",
            json!({"type": "object", "properties": {
                "location": {"type": "string", "description": "a city, e.g. Tokyo"},
                "days": {"type": "integer", "minimum": 1, "maximum": MAX_HISTORY_DAYS, "description": "how many days back, 1 to 30"}},
                "required": ["location", "days"]}),
        )
        .with_output_schema_value(json!({"type": "object", "properties": {
            "location": {"type": "string"}, "days": {"type": "integer"},
            "readings": {"type": "array", "items": {"type": "object", "properties": {
                "time": {"type": "string"}, "temperature_c": {"type": "number"},
                "condition": {"type": "string"}, "humidity_pct": {"type": "number"},
                "wind_kph": {"type": "number"}},
                "required": ["time", "temperature_c", "condition", "humidity_pct", "wind_kph"]}}},
            "required": ["location", "days", "readings"]}))
        .with_annotations(read_only),
    ]
}

pub(super) fn call(name: &str, args: &JsonObject) -> Result<CallToolResult, rmcp::ErrorData> {
    done(match name {
        "get_weather" => str_arg(args, "location").map(|l| CallToolResult::structured(report(l))),
        "get-forecast" => forecast(args),
        "compare_data" => compare(args),
        "get_history" => history(args),
        other => Err(failure(format!("unknown tool '{other}'"))),
    })
}

/// A stable seed per place, so the same city always has the same weather.
fn seed(text: &str) -> u64 {
    crate::fnv::fnv1a(text)
}

fn report(location: &str) -> Value {
    let h = seed(&location.to_lowercase());
    json!({
        "location": location,
        "temperature_c": temperature_now(h),
        "condition": CONDITIONS[(h / 400 % CONDITIONS.len() as u64) as usize],
        "humidity_pct": (h / 7 % 70 + 25) as f64,
        "wind_kph": (h / 11 % 40) as f64,
    })
}

/// The current temperature of the place whose seed is `h`: -5 to 35 °C in tenths. One
/// division of a whole number, so the value prints as it reads (6.2, not 6.199999999999999).
fn temperature_now(h: u64) -> f64 {
    ((h % 400) as f64 - 50.0) / 10.0
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

fn history(args: &JsonObject) -> Result<CallToolResult, CallToolResult> {
    let location = str_arg(args, "location")?;
    let days = num_arg(args, "days")?.ok_or_else(|| failure("missing required argument 'days'"))?;
    if days < 1.0 || days.fract() != 0.0 {
        return Err(failure(format!(
            "'days' must be a whole number from 1 to {MAX_HISTORY_DAYS}, got {days}"
        )));
    }
    let days = (days as u64).min(MAX_HISTORY_DAYS);
    let key = location.to_lowercase();
    let mean = temperature_now(seed(&key));
    let readings: Vec<Value> = (HISTORY_LAST_DAY + 1 - days..=HISTORY_LAST_DAY)
        .flat_map(|day| (0..24).map(move |hour| (day, hour)))
        .map(|(day, hour)| reading(&key, mean, day, hour))
        .collect();
    Ok(CallToolResult::structured(json!({
        "location": location, "days": days, "readings": readings
    })))
}

/// One hourly reading: the city's mean, a drift per day (±3 °C), the hour's place in the
/// daily cycle, and a little noise (±1 °C), all derived from the city, day and hour.
fn reading(key: &str, mean: f64, day: u64, hour: usize) -> Value {
    let daily = seed(&format!("{key}/{day}"));
    let hourly = seed(&format!("{key}/{day}/{hour}"));
    let drift = (daily % 61) as f64 / 10.0 - 3.0;
    let noise = (hourly % 21) as f64 / 10.0 - 1.0;
    let temperature = mean + drift + DIURNAL_C[hour] + noise;
    json!({
        "time": format!("2025-06-{day:02}T{hour:02}:00Z"),
        "temperature_c": (temperature * 10.0).round() / 10.0,
        "condition": CONDITIONS[(hourly / 21 % CONDITIONS.len() as u64) as usize],
        "humidity_pct": (hourly / 7 % 70 + 25) as f64,
        "wind_kph": (hourly / 11 % 40) as f64,
    })
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::call;

    /// Calls `get_history` and returns its structured output, or its error text.
    fn history(args: Value) -> Result<Value, String> {
        let Value::Object(args) = args else {
            return Err("arguments must be an object".into());
        };
        let result = call("get_history", &args).map_err(|e| e.message.to_string())?;
        if result.is_error == Some(true) {
            return Err(format!("{:?}", result.content));
        }
        result
            .structured_content
            .ok_or_else(|| "no structured output".into())
    }

    fn readings(value: &Value) -> &[Value] {
        value["readings"].as_array().map_or(&[], Vec::as_slice)
    }

    #[test]
    fn history_has_a_reading_per_hour_ending_on_the_last_day() {
        let week = history(json!({"location": "Tokyo", "days": 7})).expect("a week");
        let readings = readings(&week);
        assert_eq!(readings.len(), 7 * 24);
        assert_eq!(readings[0]["time"], "2025-06-24T00:00Z");
        assert_eq!(readings[167]["time"], "2025-06-30T23:00Z");
    }

    #[test]
    fn history_is_the_same_on_every_call_and_caps_at_thirty_days() {
        let a = history(json!({"location": "Paris", "days": 45})).expect("capped");
        let b = history(json!({"location": "paris", "days": "30"})).expect("the same");
        assert_eq!(a["days"], 30);
        assert_eq!(readings(&a).len(), 30 * 24);
        assert_eq!(readings(&a), readings(&b));
    }

    #[test]
    fn history_rejects_days_that_are_not_a_positive_whole_number() {
        for days in [json!(0), json!(2.5), json!(-1), json!("many")] {
            assert!(history(json!({"location": "Oslo", "days": days})).is_err());
        }
    }
}
