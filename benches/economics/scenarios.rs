//! The scenarios of the seeds, each as the plan a model would send, the request it
//! answers and the answer it ends with.

use anyhow::{Context, bail, ensure};
use planmux::exec::RunRecord;
use serde_json::{Value, json};

/// One task, replayed in every arm.
pub struct Scenario {
    /// A short name for tables, JSON and the chart.
    pub name: &'static str,
    /// What the user asks.
    pub request: &'static str,
    /// `execute_plan`'s arguments.
    pub plan: Value,
    /// Steps only a plan needs: a model that reads the data itself does their work in its
    /// head, so the direct arms do not call them.
    pub plan_only: &'static [&'static str],
    /// The final answer, with `{step}` or `{step/json/pointer}` standing for values of the
    /// plan's outputs (strings raw, arrays of strings joined by commas, anything else as
    /// JSON).
    answer: &'static str,
}

impl Scenario {
    /// The final answer, filled from the plan's run.
    pub fn answer(&self, record: &RunRecord) -> anyhow::Result<String> {
        let mut out = String::new();
        let mut rest = self.answer;
        while let Some(start) = rest.find('{') {
            let Some(len) = rest[start..].find('}') else {
                bail!("{}: unclosed '{{' in the answer", self.name);
            };
            out.push_str(&rest[..start]);
            out.push_str(&value_text(lookup(record, &rest[start + 1..start + len])?));
            rest = &rest[start + len + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// `name` or `name/json/pointer` in what a run returns: a named selection of the plan's
/// `outputs`, or a step it returns. Nothing else counts: the plan arm's model writes its
/// answer from what came back.
fn lookup<'r>(record: &'r RunRecord, place: &str) -> anyhow::Result<&'r Value> {
    let (name, pointer) = match place.split_once('/') {
        Some((name, path)) => (name, format!("/{path}")),
        None => (place, String::new()),
    };
    let value = if record.selections.is_empty() {
        ensure!(
            record.outputs.iter().any(|o| o == name),
            "the answer reads step '{name}', which the plan does not return"
        );
        record.step(name).and_then(|s| s.output.as_ref())
    } else {
        record
            .selections
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.value.as_ref())
    };
    value
        .and_then(|output| output.pointer(&pointer))
        .with_context(|| format!("the answer reads {place}, which the run did not produce"))
}

fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            let items: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            items.join(", ")
        }
        other => other.to_string(),
    }
}

/// Every scenario, in report order.
pub fn all() -> Vec<Scenario> {
    vec![
        cpu_check(),
        three_cities(),
        weather_to_file(),
        disk_alert(),
        hot_hours(),
    ]
}

/// Seed 001: a discover-then-query chain of three calls.
fn cpu_check() -> Scenario {
    Scenario {
        name: "cpu-check",
        request: "List the compute metrics, query CPU usage, and tell me whether it is above 80%.",
        plan: json!({
            "goal": "Check if CPU usage exceeds 80%",
            "steps": [
                {"id": "list", "tool": "metrics__list_metrics", "args": {"category": "compute"}},
                {"id": "cpu", "tool": "metrics__query_metric", "args": {"name": "$ref:list.metrics[0].name"}},
                {"id": "check", "tool": "metrics__check_threshold",
                 "args": {"metric": "${cpu.name}", "value": "$ref:cpu.current", "threshold": 80, "op": "gt"}}
            ],
            "outputs": ["check"]
        }),
        plan_only: &[],
        answer: "CPU usage ({check/metric}) is {check/value}% against an 80% threshold, \
                 so exceeded = {check/exceeded}: no action needed.",
    }
}

/// Seed 000: three independent lookups, then comparisons that read them.
fn three_cities() -> Scenario {
    let compare = |id: &str, a: &str, b: &str| {
        json!({"id": id, "tool": "weather__compare_data",
               "args": {"data_a": format!("$ref:{a}"), "data_b": format!("$ref:{b}")}})
    };
    Scenario {
        name: "three-cities",
        request: "Compare the current weather in Tokyo, London and Paris with each other \
                  and give me a short summary.",
        plan: json!({
            "goal": "Compare the weather of three cities",
            "steps": [
                {"id": "tokyo", "tool": "weather__get_weather", "args": {"location": "Tokyo"}},
                {"id": "london", "tool": "weather__get_weather", "args": {"location": "London"}},
                {"id": "paris", "tool": "weather__get_weather", "args": {"location": "Paris"}},
                compare("tokyo_london", "tokyo", "london"),
                compare("london_paris", "london", "paris"),
                compare("paris_tokyo", "paris", "tokyo")
            ],
            "outputs": ["tokyo_london", "london_paris", "paris_tokyo"]
        }),
        plan_only: &[],
        answer: "{tokyo_london/summary}; {london_paris/summary}; {paris_tokyo/summary}. \
                 Tokyo is the warmest of the three and London the coldest.",
    }
}

/// Seed 002: a forecast written to a file.
fn weather_to_file() -> Scenario {
    Scenario {
        name: "weather-to-file",
        request: "Get the forecast for New York (40.7128, -74.0060) and save it to \
                  documents/weather.txt.",
        plan: json!({
            "goal": "Save the New York forecast",
            "steps": [
                {"id": "forecast", "tool": "weather__get-forecast",
                 "args": {"latitude": 40.7128, "longitude": -74.0060}},
                {"id": "save", "tool": "files__write_file",
                 "args": {"path": "documents/weather.txt", "content": "${forecast.result}"}}
            ],
            "outputs": ["save"]
        }),
        plan_only: &[],
        answer: "Done: {save}.",
    }
}

/// A five-step chain (seed 001's "a 5-step chain drops from 6 LLM calls to 2"): find the
/// storage metric, read it, check it, write an alert note, and read the note back.
fn disk_alert() -> Scenario {
    Scenario {
        name: "disk-alert-chain",
        request: "Check the main storage metric against 80%, write the result as an alert \
                  note to reports/disk-alert.txt, and show me the saved note.",
        plan: json!({
            "goal": "Write and show a disk alert note",
            "steps": [
                {"id": "list", "tool": "metrics__list_metrics", "args": {"category": "storage"}},
                {"id": "disk", "tool": "metrics__query_metric", "args": {"name": "$ref:list.metrics[0].name"}},
                {"id": "check", "tool": "metrics__check_threshold",
                 "args": {"metric": "${disk.name}", "value": "$ref:disk.current", "threshold": 80, "op": "gt"}},
                {"id": "note", "tool": "files__write_file",
                 "args": {"path": "reports/disk-alert.txt",
                          "content": "Disk alert: ${check.metric} is at ${check.value}% (threshold ${check.threshold}%, exceeded: ${check.exceeded})."}},
                {"id": "saved", "tool": "files__read_file",
                 "args": {"path": "reports/disk-alert.txt"}, "depends_on": ["note"]}
            ],
            "outputs": ["saved"]
        }),
        plan_only: &[],
        answer: "The note is saved in reports/disk-alert.txt and reads: \"{saved}\"",
    }
}

/// A large output of which the model needs a few items: a week of hourly readings, of
/// which a named JSONPath selection in `outputs` returns just the hours.
fn hot_hours() -> Scenario {
    Scenario {
        name: "hot-hours-filter",
        request: "At which hours over the last 7 days was Tokyo warmer than 25 °C?",
        plan: json!({
            "goal": "Find the hours above 25 °C in Tokyo's last week",
            "steps": [
                {"id": "hist", "tool": "weather__get_history", "args": {"location": "Tokyo", "days": 7}}
            ],
            "outputs": {"hot_hours": {"$ref": "hist", "jsonpath": "$.readings[?@.temperature_c > 25].time"}}
        }),
        plan_only: &[],
        answer: "Tokyo was warmer than 25 °C at these hours (UTC): {hot_hours}.",
    }
}
