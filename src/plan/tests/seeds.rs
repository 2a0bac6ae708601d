//! The seeds' own example plans, exactly as written there, normalise to the canonical
//! plan we expect and validate against a catalog holding the seeds' tools.

use serde_json::{Value, json};

use super::super::{Limits, parse, prepare, render_issues};
use super::seed_catalog;

/// Parses `seed`, compares its canonical form with `expected`, and validates it.
fn check(seed: Value, expected: Value) {
    let plan = match parse(&seed) {
        Ok(plan) => plan,
        Err(issues) => panic!("seed did not parse:\n{}", render_issues(&issues)),
    };
    assert_eq!(plan.to_canonical(), expected);
    if let Err(issues) = prepare(&seed, &seed_catalog(), &Limits::default()) {
        panic!("seed did not validate:\n{}", render_issues(&issues));
    }
    // The canonical form reads back as the same plan.
    let again = parse(&expected)
        .map(|p| p.to_canonical())
        .map_err(|i| render_issues(&i));
    assert_eq!(again, Ok(expected));
}

#[test]
fn seed_000_weather_comparison() {
    let seed = json!({
      "steps": [
        {"id": "weather_tokyo", "tool": "get_weather", "arguments": "{\"location\": \"Tokyo\"}"},
        {"id": "weather_london", "tool": "get_weather", "arguments": "{\"location\": \"London\"}"},
        {"id": "comparison", "tool": "compare_data",
         "arguments": "{\"data_a\": \"$ref:weather_tokyo\", \"data_b\": \"$ref:weather_london\"}"}
      ],
      "output_steps": ["comparison"]
    });
    let expected = json!({
        "strategy": "auto",
        "steps": [
            {"id": "weather_tokyo", "tool": "get_weather", "args": {"location": "Tokyo"}},
            {"id": "weather_london", "tool": "get_weather", "args": {"location": "London"}},
            {"id": "comparison", "tool": "compare_data",
             "args": {"data_a": "$ref:weather_tokyo", "data_b": "$ref:weather_london"}}
        ],
        "outputs": ["comparison"],
        "on_error": "fail_forward"
    });
    check(seed, expected);
}

#[test]
fn seed_000_parallel_summary() {
    let seed = json!({
      "steps": [
        {"id": "a", "tool": "get_weather", "arguments": "{\"location\": \"Tokyo\"}"},
        {"id": "b", "tool": "get_weather", "arguments": "{\"location\": \"London\"}"},
        {"id": "c", "tool": "get_weather", "arguments": "{\"location\": \"Paris\"}"},
        {"id": "summary", "tool": "summarize", "arguments": "{\"data\": [\"$ref:a\", \"$ref:b\", \"$ref:c\"]}"}
      ],
      "output_steps": ["summary"]
    });
    let expected = json!({
        "strategy": "auto",
        "steps": [
            {"id": "a", "tool": "get_weather", "args": {"location": "Tokyo"}},
            {"id": "b", "tool": "get_weather", "args": {"location": "London"}},
            {"id": "c", "tool": "get_weather", "args": {"location": "Paris"}},
            {"id": "summary", "tool": "summarize", "args": {"data": ["$ref:a", "$ref:b", "$ref:c"]}}
        ],
        "outputs": ["summary"],
        "on_error": "fail_forward"
    });
    check(seed, expected);
}

#[test]
fn seed_000_fail_forward() {
    let seed = json!({
      "steps": [
        {"id": "s1", "tool": "flaky_api", "arguments": "{}"},
        {"id": "s2", "tool": "reliable_api", "arguments": "{}"},
        {"id": "s3", "tool": "process", "arguments": "{\"data\": \"$ref:s1\"}"}
      ],
      "output_steps": ["s2", "s3"]
    });
    let expected = json!({
        "strategy": "auto",
        "steps": [
            {"id": "s1", "tool": "flaky_api", "args": {}},
            {"id": "s2", "tool": "reliable_api", "args": {}},
            {"id": "s3", "tool": "process", "args": {"data": "$ref:s1"}}
        ],
        "outputs": ["s2", "s3"],
        "on_error": "fail_forward"
    });
    check(seed, expected);
}

fn seed_001_plan() -> Value {
    json!({
      "goal": "Check if CPU usage exceeds 80%",
      "steps": [
        {
          "tool": "list_metrics",
          "args": { "category": "compute" },
          "description": "Get available compute metrics"
        },
        {
          "tool": "query_metric",
          "args": { "name": { "$ref": "steps[0].result.metrics[0].name" } },
          "description": "Query the first compute metric"
        },
        {
          "tool": "check_threshold",
          "args": {
            "metric_name": { "$ref": "steps[0].result.metrics[0].name" },
            "threshold": "80",
            "operator": "gt"
          },
          "description": "Check if above 80%"
        }
      ]
    })
}

#[test]
fn seed_001_cpu_check() {
    let expected = json!({
        "goal": "Check if CPU usage exceeds 80%",
        "strategy": "auto",
        "steps": [
            {"id": "s1", "tool": "list_metrics", "args": {"category": "compute"}},
            {"id": "s2", "tool": "query_metric", "args": {"name": "$ref:steps[0].metrics[0].name"}},
            {"id": "s3", "tool": "check_threshold", "args": {
                "metric_name": "$ref:steps[0].metrics[0].name", "threshold": "80", "operator": "gt"
            }}
        ],
        "on_error": "fail_forward"
    });
    check(seed_001_plan(), expected.clone());
    // The seed sends it as {"plan": "<json>"}.
    let as_string = json!({"plan": seed_001_plan().to_string()});
    check(as_string, expected);
}

#[test]
fn seed_002_weather_to_file() {
    let seed = json!({
      "planType": "SEQUENTIAL",
      "steps": [
        {
          "id": "step1",
          "serverId": "weather-server",
          "toolName": "get-forecast",
          "parameters": {
            "latitude": 40.7128,
            "longitude": -74.0060
          },
          "dependencies": []
        },
        {
          "id": "step2",
          "serverId": "filesystem-server",
          "toolName": "write_file",
          "parameters": {
            "path": "documents/weather.txt",
            "content": "${step1.result}"
          },
          "dependencies": ["step1"]
        }
      ]
    });
    let expected = json!({
        "strategy": "sequential",
        "steps": [
            {"id": "step1", "tool": "get-forecast", "server": "weather-server",
             "args": {"latitude": 40.7128, "longitude": -74.0060}},
            {"id": "step2", "tool": "write_file", "server": "filesystem-server",
             "args": {"path": "documents/weather.txt", "content": "$ref:step1"},
             "depends_on": ["step1"]}
        ],
        "on_error": "fail_forward"
    });
    check(seed, expected);
}

#[test]
fn seed_002_variable_substitution() {
    let seed = json!({
      "steps": [
        {"id": "get_weather", "toolName": "weather_query", "parameters": {"location": "NYC"}},
        {"id": "save_weather", "toolName": "write_file",
         "parameters": {"path": "weather.txt", "content": "${get_weather.result}"},
         "dependencies": ["get_weather"]}
      ]
    });
    let plan = parse(&seed)
        .map(|p| p.to_canonical())
        .map_err(|i| render_issues(&i));
    let expected = json!({
        "strategy": "auto",
        "steps": [
            {"id": "get_weather", "tool": "weather_query", "args": {"location": "NYC"}},
            {"id": "save_weather", "tool": "write_file",
             "args": {"path": "weather.txt", "content": "$ref:get_weather"}, "depends_on": ["get_weather"]}
        ],
        "on_error": "fail_forward"
    });
    assert_eq!(plan, Ok(expected));
}

/// Seed 002's planner may answer `CONDITIONAL` or `ITERATIVE` with its two prompts: run
/// as `auto`, the branches and loops written as `when` and `foreach`, the prompts kept.
#[test]
fn seed_002_conditional_and_iterative() {
    let seed = json!({
      "planType": "CONDITIONAL",
      "conditionPrompt": "Only write the file when it will rain",
      "aggregationPrompt": "Summarise the forecast in one line",
      "steps": [
        {"id": "step1", "serverId": "weather-server", "toolName": "get-forecast",
         "parameters": {"latitude": 40.7128, "longitude": -74.0060}},
        {"id": "step2", "serverId": "filesystem-server", "toolName": "write_file",
         "when": {"$ref": "step1.rain", "eq": true},
         "parameters": {"path": "documents/weather.txt", "content": "${step1.result}"},
         "dependencies": ["step1"]}
      ]
    });
    let expected = json!({
        "strategy": "auto",
        "steps": [
            {"id": "step1", "tool": "get-forecast", "server": "weather-server",
             "args": {"latitude": 40.7128, "longitude": -74.0060}},
            {"id": "step2", "when": {"$ref": "step1.rain", "eq": true}, "tool": "write_file",
             "server": "filesystem-server",
             "args": {"path": "documents/weather.txt", "content": "$ref:step1"},
             "depends_on": ["step1"]}
        ],
        "on_error": "fail_forward",
        "conditionPrompt": "Only write the file when it will rain",
        "aggregationPrompt": "Summarise the forecast in one line"
    });
    check(seed, expected);
    let iterative = json!({
      "planType": "ITERATIVE",
      "steps": [
        {"id": "days", "value": [1, 2, 3]},
        {"id": "each", "serverId": "weather-server", "toolName": "get-forecast",
         "foreach": "$ref:days", "concurrency": 2,
         "parameters": {"latitude": 40.7128, "longitude": "$ref:item"}}
      ]
    });
    let expected = json!({
        "strategy": "auto",
        "steps": [
            {"id": "days", "value": [1, 2, 3]},
            {"id": "each", "foreach": "$ref:days", "concurrency": 2, "tool": "get-forecast",
             "server": "weather-server", "args": {"latitude": 40.7128, "longitude": "$ref:item"}}
        ],
        "on_error": "fail_forward"
    });
    check(iterative, expected);
}

/// Seed 004's lazy mode: the same plan, flagged to be shown rather than run.
#[test]
fn seed_004_lazy_mode() {
    let seed = json!({"mode": "lazy", "calls": [
      {"_tool": "fetchUserProfile", "userName": "Alice", "_outputPath": "†state.userProfileData"}
    ]});
    let expected = json!({
        "strategy": "auto",
        "steps": [
            {"id": "s1", "tool": "fetchUserProfile", "args": {"userName": "Alice"},
             "output_path": "†state.userProfileData"}
        ],
        "on_error": "fail_forward",
        "mode": "lazy"
    });
    check(seed, expected);
    let plan = prepare(
        &json!({"dry_run": true, "steps": [{"tool": "fetchUserProfile", "args": {"userName": "A"}}]}),
        &seed_catalog(),
        &Limits::default(),
    );
    assert!(plan.is_ok_and(|p| p.lazy()));
}

#[test]
fn seed_004_profile_summary() {
    let seed = json!([
      {"_tool": "fetchUserProfile", "userName": "Alice", "_outputPath": "†state.userProfileData"},
      {"_tool": "summarizeProfile", "profile": "†state.userProfileData", "_outputPath": "†state.profileSummary"}
    ]);
    let expected = json!({
        "strategy": "auto",
        "steps": [
            {"id": "s1", "tool": "fetchUserProfile", "args": {"userName": "Alice"},
             "output_path": "†state.userProfileData"},
            {"id": "s2", "tool": "summarizeProfile", "args": {"profile": "†state.userProfileData"},
             "output_path": "†state.profileSummary"}
        ],
        "on_error": "fail_forward"
    });
    check(seed, expected);
}

#[test]
fn seed_004_language_detection() {
    let seed = json!({
      "calls": [
        {"_tool": "detectLanguage", "text": "†input.text", "_outputPath": "†state.language"},
        {"_tool": "isEnglish", "language": "†state.language", "_outputPath": "†state.isEnglish"},
        {"_tool": "translateText", "text": "†input.text", "isEnglish": "†state.isEnglish",
         "_outputPath": "†state.translatedText"}
      ],
      "output": null
    });
    let expected = json!({
        "strategy": "auto",
        "steps": [
            {"id": "s1", "tool": "detectLanguage", "args": {"text": "$ref:input.text"},
             "output_path": "†state.language"},
            {"id": "s2", "tool": "isEnglish", "args": {"language": "†state.language"},
             "output_path": "†state.isEnglish"},
            {"id": "s3", "tool": "translateText",
             "args": {"text": "$ref:input.text", "isEnglish": "†state.isEnglish"},
             "output_path": "†state.translatedText"}
        ],
        "on_error": "fail_forward"
    });
    check(seed, expected);
}

#[test]
fn seed_004_caught_failure() {
    let seed = json!([
      {"_tool": "processPayment", "amount": "†input.amount", "_outputPath": "†state.receipt || †state.error"},
      {"_tool": "confirmOrder", "receipt": "†state.receipt"},
      {"_tool": "reportFailure", "error": "†state.error"}
    ]);
    let expected = json!({
        "strategy": "auto",
        "steps": [
            {"id": "s1", "tool": "processPayment", "args": {"amount": "$ref:input.amount"},
             "output_path": "†state.receipt || †state.error"},
            {"id": "s2", "tool": "confirmOrder", "args": {"receipt": "†state.receipt"}},
            {"id": "s3", "tool": "reportFailure", "args": {"error": "†state.error"}}
        ],
        "on_error": "fail_forward"
    });
    check(seed, expected);
}

/// The built-in demo servers' tools as src/demo declares them (schemas and
/// annotations), so that a plan in each seed dialect is shown to validate against what
/// `planmux validate` will see.
fn builtin_catalog() -> Vec<super::super::ToolSpec> {
    use crate::policy::Tier;
    let tool = |server: &str, name: &str, schema: Value, read_only: bool, idempotent: bool| {
        super::super::ToolSpec {
            exported: format!("{server}__{name}"),
            server: server.into(),
            tool: name.into(),
            input_schema: schema,
            output_schema: None,
            read_only,
            idempotent,
            tier: if read_only {
                Tier::Read
            } else {
                Tier::Destructive
            },
        }
    };
    vec![
        tool(
            "metrics",
            "list_metrics",
            json!({"type": "object", "properties": {"category": {"type": "string"}}}),
            true,
            false,
        ),
        tool(
            "metrics",
            "query_metric",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            true,
            false,
        ),
        tool(
            "metrics",
            "check_threshold",
            json!({"type": "object", "properties": {
                "metric": {"type": "string"}, "metric_name": {"type": "string"},
                "value": {"type": ["number", "string"]}, "threshold": {"type": ["number", "string"]},
                "op": {"type": "string"}, "operator": {"type": "string"}}, "required": ["threshold"]}),
            true,
            false,
        ),
        tool(
            "weather",
            "get_weather",
            json!({"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}),
            true,
            true,
        ),
        tool(
            "weather",
            "get-forecast",
            json!({"type": "object", "properties": {"latitude": {"type": "number"}, "longitude": {"type": "number"}},
                   "required": ["latitude", "longitude"]}),
            true,
            true,
        ),
        tool(
            "weather",
            "compare_data",
            json!({"type": "object", "properties": {"data_a": {}, "data_b": {}}, "required": ["data_a", "data_b"]}),
            true,
            true,
        ),
        tool(
            "files",
            "write_file",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {}}, "required": ["path", "content"]}),
            false,
            true,
        ),
        tool(
            "files",
            "read_file",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            true,
            false,
        ),
        tool(
            "chaos",
            "fail",
            json!({"type": "object", "properties": {"message": {"type": "string"}}}),
            false,
            false,
        ),
        tool("chaos", "echo", json!({"type": "object"}), true, true),
    ]
}

#[test]
fn each_dialect_validates_against_the_builtin_demo_servers() {
    let plans = [
        // 000: the weather comparison, exactly as the seed wrote it.
        json!({"steps": [
            {"id": "weather_tokyo", "tool": "get_weather", "arguments": "{\"location\": \"Tokyo\"}"},
            {"id": "weather_london", "tool": "get_weather", "arguments": "{\"location\": \"London\"}"},
            {"id": "comparison", "tool": "compare_data",
             "arguments": "{\"data_a\": \"$ref:weather_tokyo\", \"data_b\": \"$ref:weather_london\"}"}
        ], "output_steps": ["comparison"]}),
        // 001: the CPU check, exactly as the seed wrote it, sent as a string.
        json!({"plan": seed_001_plan().to_string()}),
        // 002: weather to file, exactly as the seed wrote it.
        json!({"planType": "SEQUENTIAL", "steps": [
            {"id": "step1", "serverId": "weather-server", "toolName": "get-forecast",
             "parameters": {"latitude": 40.7128, "longitude": -74.0060}, "dependencies": []},
            {"id": "step2", "serverId": "filesystem-server", "toolName": "write_file",
             "parameters": {"path": "documents/weather.txt", "content": "${step1.result}"},
             "dependencies": ["step1"]}
        ]}),
        // 004: state slots and a caught failure, on the demo tools.
        json!({"inputs": {"city": "Oslo"}, "calls": [
            {"_tool": "weather__get_weather", "location": "†input.city", "_outputPath": "†state.report"},
            {"_tool": "chaos__fail", "message": "no", "_outputPath": "†state.ok || †state.error"},
            {"_tool": "files__write_file", "path": "oslo.json", "content": "†state.report"},
            {"_tool": "chaos__echo", "problem": "†state.error"}
        ]}),
        // The description's own example.
        json!({"goal": "Is CPU above 80%?", "steps": [
            {"id": "list", "tool": "metrics__list_metrics", "args": {"category": "compute"}},
            {"id": "cpu", "tool": "metrics__query_metric", "args": {"name": "$ref:list.metrics[0].name"}},
            {"id": "check", "tool": "metrics__check_threshold",
             "args": {"metric": "${cpu.name}", "value": "$ref:cpu.current", "threshold": 80, "op": "gt"}}
        ], "outputs": ["check"]}),
    ];
    for plan in plans {
        if let Err(issues) = prepare(&plan, &builtin_catalog(), &Limits::default()) {
            panic!("{plan}\n{}", render_issues(&issues));
        }
    }
}

/// The seeds' articles annotate their JSON with `//` notes: a plan sent with them (as
/// text, the only way a comment can reach planmux) reads as the plan without them.
/// Slashes inside strings are text; a plan that is still no JSON keeps its own error.
#[test]
fn seed_plans_with_comments_read_as_without() {
    let annotated = r#"{
  "planType": "SEQUENTIAL",   // as seed 002 writes it
  /* the steps */
  "steps": [
    {"id": "w", "serverId": "weather", "toolName": "get-forecast", "parameters": {"url": "http://x//y"}},
    {"id": "save", "serverId": "files", "toolName": "write_file",
     "parameters": {"path": "documents/weather.txt", "content": "${w.result}"}  //  Magic happens here
    }
  ]
}"#;
    let plain = parse(&json!(annotated)).map(|p| p.to_canonical());
    let expected = json!({
        "strategy": "sequential",
        "steps": [
            {"id": "w", "tool": "get-forecast", "server": "weather", "args": {"url": "http://x//y"}},
            {"id": "save", "tool": "write_file", "server": "files",
             "args": {"path": "documents/weather.txt", "content": "$ref:w"}}
        ],
        "on_error": "fail_forward"
    });
    assert_eq!(plain.map_err(|i| render_issues(&i)), Ok(expected));
    let broken = parse(&json!("{\"steps\": [} // note")).map_err(|i| render_issues(&i));
    assert!(
        broken
            .as_ref()
            .is_err_and(|e| e.contains("line 1, column 12")),
        "{broken:?}"
    );
}

/// A `conditionPrompt` that no step's `when` carries out is kept, and the model is told
/// every step runs; with a `when`, nothing to say.
#[test]
fn a_condition_prompt_without_when_is_flagged() {
    let plan = |when: Option<Value>| {
        let mut step = json!({"id": "save", "serverId": "files", "toolName": "write_file",
                              "parameters": {"path": "a.txt", "content": "x"}});
        if let Some(when) = when {
            step["when"] = when;
        }
        let seed = json!({"planType": "CONDITIONAL",
                          "conditionPrompt": "Only write the alert if CPU is above 80%",
                          "steps": [{"id": "cpu", "serverId": "seed", "toolName": "query_metric"}, step]});
        prepare(&seed, &seed_catalog(), &Limits::default())
            .map(|p| {
                p.warnings()
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
            })
            .map_err(|i| render_issues(&i))
    };
    let flagged = plan(None);
    assert!(
        flagged.as_ref().is_ok_and(|w| w
            .iter()
            .any(|w| w.contains("conditionPrompt is kept, not acted on"))),
        "{flagged:?}"
    );
    assert_eq!(
        plan(Some(json!({"$ref": "cpu.value", "gt": 80}))),
        Ok(vec![])
    );
}
