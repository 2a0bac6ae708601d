//! Tool lookup, output values, dependencies, pipes, state slots, schedules and pictures.

use std::collections::HashMap;

use serde_json::{Value, json};

#[cfg(feature = "bench")]
use super::super::execute_plan_input_schema;
use super::super::{
    DependencyKind, OnError, RefSource, StepId, Strategy, ToolMatch, ToolOutcome, dot, mermaid,
    output_value, resolve_called, resolve_tool, schedule, tool_outcome,
};
use super::{demo_catalog, invalid, seed_catalog, snapshot_settings, valid};

fn lookup(server: Option<&str>, name: &str) -> Result<String, String> {
    let tools = demo_catalog();
    match resolve_tool(&tools, server, name) {
        ToolMatch::Found(spec) => Ok(spec.exported.clone()),
        ToolMatch::Unknown(near) => Err(format!("unknown: {}", near.join(","))),
        ToolMatch::Ambiguous(all) => Err(format!("ambiguous: {}", all.join(","))),
    }
}

#[test]
fn tool_names_resolve() {
    let found = |s: &str| Ok::<String, String>(s.to_owned());
    assert_eq!(
        lookup(None, "metrics__query_metric"),
        found("metrics__query_metric")
    );
    assert_eq!(
        lookup(Some("metrics"), "query_metric"),
        found("metrics__query_metric")
    );
    assert_eq!(
        lookup(Some("metrics-server"), "query_metric"),
        found("metrics__query_metric")
    );
    assert_eq!(
        lookup(Some("weather_server"), "get-forecast"),
        found("weather__get_forecast")
    );
    assert_eq!(
        lookup(None, "weather-server:get-forecast"),
        found("weather__get_forecast")
    );
    assert_eq!(
        lookup(None, "check_threshold"),
        found("metrics__check_threshold")
    );
    assert_eq!(
        lookup(None, "Check-Threshold"),
        found("metrics__check_threshold")
    );
    assert_eq!(
        lookup(Some("filesystem-server"), "write_file"),
        found("files__write_file")
    );
    assert_eq!(lookup(Some("files"), "status"), found("files__status"));
    assert_eq!(
        lookup(None, "status"),
        Err("ambiguous: chaos__status,files__status".into())
    );
    assert_eq!(
        lookup(None, "query_metrics"),
        Err("unknown: metrics__query_metric".into())
    );
    assert_eq!(lookup(Some("metrics"), "echo"), Err("unknown: ".into()));
}

/// One rule for plans and direct calls (docs/plan-language.md, "Naming tools"): case and
/// `-` versus `_` are ignored, separators are not dropped.
#[test]
fn tool_names_fold_case_and_dashes_only() {
    let object = json!({"type": "object"});
    let tools = vec![
        super::spec("git", "git_log", object.clone()),
        super::spec("git", "git_status", object.clone()),
        super::spec("files", "status", object.clone()),
        super::spec("chaos", "status", object),
    ];
    let show = |found: ToolMatch<'_>| match found {
        ToolMatch::Found(spec) => spec.exported.clone(),
        ToolMatch::Unknown(near) => format!("unknown, did you mean: {}", near.join(", ")),
        ToolMatch::Ambiguous(all) => format!("ambiguous: {}", all.join(", ")),
    };
    let cases = [
        ("git__git_log", "git__git_log"),
        ("GIT__GIT-LOG", "git__git_log"),
        ("git_log", "git__git_log"),
        ("Git-Log", "git__git_log"),
        ("git__gitlog", "unknown, did you mean: git__git_log"),
        ("git__log", "unknown, did you mean: git__git_log"),
        ("status", "ambiguous: chaos__status, files__status"),
        ("STATUS", "ambiguous: chaos__status, files__status"),
    ];
    for (name, want) in cases {
        assert_eq!(show(resolve_tool(&tools, None, name)), want, "plan: {name}");
        assert_eq!(show(resolve_called(&tools, name)), want, "direct: {name}");
    }
    // The server forms are a plan's only.
    assert_eq!(
        show(resolve_tool(&tools, Some("git-server"), "LOG")),
        "unknown, did you mean: git__git_log"
    );
    assert_eq!(
        show(resolve_tool(&tools, Some("GIT"), "git-log")),
        "git__git_log"
    );
    assert!(show(resolve_called(&tools, "git:git_log")).starts_with("unknown"));
}

#[test]
fn output_values_from_tool_results() {
    let cases = [
        (
            json!({"content": [{"type": "text", "text": "{\"a\":1}"}], "structuredContent": {"b": 2}}),
            json!({"b": 2}),
        ),
        (
            json!({"content": [{"type": "text", "text": "{\"a\": [1, 2]}"}]}),
            json!({"a": [1, 2]}),
        ),
        (
            json!({"content": [{"type": "text", "text": "Sunny, 22°C"}]}),
            json!("Sunny, 22°C"),
        ),
        (
            json!({"content": [{"type": "text", "text": "42"}]}),
            json!(42),
        ),
        (
            json!({"content": [{"type": "text", "text": "[1,"}, {"type": "text", "text": "2]"}]}),
            json!([1, 2]),
        ),
        (
            json!({"content": [{"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"}]}),
            json!("line 1\nline 2"),
        ),
        (
            json!({"content": [{"type": "image", "data": "AAA=", "mimeType": "image/png"}]}),
            json!([{"type": "image", "data": "AAA=", "mimeType": "image/png"}]),
        ),
        (json!({"content": []}), json!(null)),
        (
            json!({"structuredContent": null, "content": [{"type": "text", "text": ""}]}),
            json!(""),
        ),
        (json!("not a result"), json!(null)),
    ];
    for (result, expected) in cases {
        assert_eq!(output_value(&result), expected, "{result}");
    }
    let failed = json!({"isError": true, "content": [{"type": "text", "text": "card declined"}]});
    assert_eq!(
        tool_outcome(&failed),
        ToolOutcome::Failure {
            message: "card declined".into(),
            value: json!("card declined")
        }
    );
    let silent = json!({"isError": true, "content": []});
    assert!(
        matches!(tool_outcome(&silent), ToolOutcome::Failure { message, .. } if message.contains("without a message"))
    );
    assert_eq!(
        tool_outcome(&json!({"content": [{"type": "text", "text": "ok"}]})),
        ToolOutcome::Success(json!("ok"))
    );
}

fn cpu_plan() -> Value {
    json!({
        "goal": "Check if CPU usage exceeds 80%",
        "strategy": "auto",
        "steps": [
            {"id": "list", "tool": "metrics__list_metrics", "args": {"category": "compute"}},
            {"id": "cpu", "tool": "metrics__query_metric", "args": {"name": "$ref:list.metrics[0].name"}},
            {"id": "check", "tool": "metrics__check_threshold",
             "args": {"metric": "${cpu.name}", "value": "$ref:cpu.current", "threshold": 80, "op": "gt"}}
        ],
        "outputs": ["check"],
        "on_error": "fail_forward"
    })
}

#[test]
fn design_example_validates_and_resolves() {
    let plan = valid(cpu_plan());
    assert_eq!(plan.strategy(), Strategy::Auto);
    assert_eq!(plan.on_error(), OnError::FailForward);
    assert_eq!(plan.outputs(), vec![StepId::new("check")]);
    let check = &plan.steps()[2];
    assert_eq!(
        (check.server.as_str(), check.tool.as_str()),
        ("metrics", "check_threshold")
    );
    let waits: Vec<&str> = check.waits_for().map(StepId::as_str).collect();
    assert_eq!(waits, ["cpu"]);
    let outputs = HashMap::from([(
        StepId::new("cpu"),
        json!({"name": "cpu_usage", "current": 72.5}),
    )]);
    let args = plan.resolve_args_from(&StepId::new("check"), &outputs, &HashMap::new());
    assert_eq!(
        args,
        Ok(json!({"metric": "cpu_usage", "value": 72.5, "threshold": 80, "op": "gt"}))
    );
}

#[test]
fn chained_pipes_the_previous_output() {
    let plan = valid(json!({"strategy": "chained", "steps": [
        {"id": "a", "tool": "chaos__echo", "args": {"message": "hi"}},
        {"id": "b", "tool": "chaos__echo"},
        {"id": "c", "tool": "chaos__echo", "args": {"input": "mine"}},
        {"id": "d", "tool": "files__write_file", "pipe_to": "content", "args": {"path": "out.txt"}}
    ]}));
    let outputs = HashMap::from([
        (StepId::new("a"), json!({"said": "hi"})),
        (StepId::new("c"), json!("from c")),
    ]);
    let resolve = |id: &str| plan.resolve_args_from(&StepId::new(id), &outputs, &HashMap::new());
    assert_eq!(
        resolve("b").unwrap_or_default(),
        json!({"input": {"said": "hi"}})
    );
    assert_eq!(resolve("c").unwrap_or_default(), json!({"input": "mine"}));
    assert_eq!(
        resolve("d").unwrap_or_default(),
        json!({"path": "out.txt", "content": "from c"})
    );
    let kinds: Vec<DependencyKind> = plan
        .steps()
        .iter()
        .flat_map(|s| s.depends_on.iter().map(|d| d.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            DependencyKind::Output,
            DependencyKind::Sequence,
            DependencyKind::Output
        ]
    );
    let missing = plan.resolve_args_from(&StepId::new("b"), &HashMap::new(), &HashMap::new());
    assert_eq!(
        missing.map_err(|m| m.message),
        Err("step `a` has no output".to_owned())
    );
}

/// Seed 002's weather-to-file plan typed `CHAINED` (its query analysis calls it that):
/// the second step reads the first's result itself, so nothing is piped and no
/// `pipe_to` is needed; without such a reference the pipe is still checked.
#[test]
fn a_chained_step_that_reads_the_previous_output_gets_no_pipe() {
    let plan = valid(json!({"planType": "CHAINED", "steps": [
        {"id": "step1", "serverId": "weather", "toolName": "get-forecast",
         "parameters": {"latitude": 40.7128, "longitude": -74.006}, "dependencies": []},
        {"id": "step2", "serverId": "files", "toolName": "write_file",
         "parameters": {"path": "documents/weather.txt", "content": "${step1.result}"},
         "dependencies": ["step1"]}
    ]}));
    let outputs = HashMap::from([(StepId::new("step1"), json!("Sunny, 22°C"))]);
    let args = plan.resolve_args_from(&StepId::new("step2"), &outputs, &HashMap::new());
    assert_eq!(
        args,
        Ok(json!({"path": "documents/weather.txt", "content": "Sunny, 22°C"}))
    );
    let unwired = invalid(json!({"planType": "CHAINED", "steps": [
        {"id": "step1", "tool": "weather__get-forecast"},
        {"id": "step2", "tool": "files__write_file", "args": {"path": "a.txt", "content": "x"}}
    ]}));
    assert!(unwired.contains("pipe_to"), "{unwired}");
    // A tool that has the `input` argument still gets the pipe, whatever else it reads.
    let piped = valid(json!({"planType": "CHAINED", "steps": [
        {"id": "s1", "tool": "weather__get-forecast"},
        {"id": "s2", "tool": "chaos__echo", "args": {"message": "${s1.location}"}}
    ]}));
    let outputs = HashMap::from([(StepId::new("s1"), json!({"location": "NYC"}))]);
    let args = piped.resolve_args_from(&StepId::new("s2"), &outputs, &HashMap::new());
    assert_eq!(
        args,
        Ok(json!({"message": "NYC", "input": {"location": "NYC"}}))
    );
}

/// A whole-value reference gives the value typed, except into an argument the tool
/// types as text only: there a value that is not text arrives as compact JSON (seed 002's
/// `"content": "${step1.result}"` writes the forecast, which a file tool needs as text).
#[test]
fn a_reference_into_a_text_argument_arrives_as_text() {
    let plan = valid(json!({"steps": [
        {"id": "w", "tool": "weather__get_forecast", "args": {"location": "NYC"}},
        {"id": "save", "tool": "files__write_file", "args": {"path": "a.txt", "content": "${w.result}"}},
        {"id": "echo", "tool": "chaos__echo", "args": {"input": "$ref:w", "message": {"$ref": "w.days", "default": null}}}
    ]}));
    let forecast = json!({"location": "NYC", "temperature_c": 22});
    let outputs = HashMap::from([(StepId::new("w"), forecast.clone())]);
    let resolve = |id: &str| {
        plan.resolve_args_from(&StepId::new(id), &outputs, &HashMap::new())
            .unwrap_or_default()
    };
    assert_eq!(
        resolve("save"),
        json!({"path": "a.txt", "content": r#"{"location":"NYC","temperature_c":22}"#})
    );
    // Where the schema allows any value, it stays typed; a null default stays null.
    assert_eq!(resolve("echo"), json!({"input": forecast, "message": null}));
}

#[test]
fn state_slots_route_success_and_caught_errors() {
    let plan = super::super::prepare(
        &json!({"inputs": {"amount": 50}, "plan": [
            {"_tool": "processPayment", "amount": "†input.amount", "_outputPath": "†state.receipt || †state.error"},
            {"_tool": "confirmOrder", "receipt": "†state.receipt"},
            {"_tool": "reportFailure", "error": "†state.error"}
        ]}),
        &seed_catalog(),
        &super::super::Limits::default(),
    )
    .map_err(|i| super::super::render_issues(&i));
    let Ok(plan) = plan else { panic!("{plan:?}") };
    let deps: Vec<Vec<(String, DependencyKind)>> = plan
        .steps()
        .iter()
        .map(|s| {
            s.depends_on
                .iter()
                .map(|d| (d.step.to_string(), d.kind))
                .collect()
        })
        .collect();
    assert_eq!(
        deps,
        vec![
            vec![],
            vec![("s1".into(), DependencyKind::Output)],
            vec![("s1".into(), DependencyKind::Error)]
        ]
    );
    assert!(plan.steps()[0].catches_errors());
    let error = json!({"code": "card_declined"});
    let lookup = |source: &RefSource| match source {
        RefSource::Error(id) if id.as_str() == "s1" => Some(&error),
        _ => None,
    };
    assert_eq!(
        plan.resolve_args(&StepId::new("s3"), &lookup)
            .unwrap_or_default(),
        json!({"error": {"code": "card_declined"}})
    );
    assert_eq!(
        plan.resolve_args(&StepId::new("s1"), &lookup)
            .unwrap_or_default(),
        json!({"amount": 50})
    );
}

#[test]
fn state_slot_reads_the_latest_earlier_writer() {
    let plan = super::super::prepare(
        &json!([
            {"_tool": "detectLanguage", "text": "a", "_outputPath": "†state.x"},
            {"_tool": "isEnglish", "v": "†state.x.lang", "_outputPath": "†state.x"},
            {"_tool": "translateText", "v": "†state.x"}
        ]),
        &seed_catalog(),
        &super::super::Limits::default(),
    );
    let Ok(plan) = plan else { panic!("{plan:?}") };
    let waits: Vec<Vec<&str>> = plan
        .steps()
        .iter()
        .map(|s| s.waits_for().map(StepId::as_str).collect())
        .collect();
    assert_eq!(waits, vec![vec![], vec!["s1"], vec!["s2"]]);
}

fn diamond() -> Value {
    json!({"goal": "diamond", "steps": [
        {"id": "top", "tool": "chaos__echo"},
        {"id": "left", "tool": "chaos__sleep", "args": {"ms": "$ref:top.ms"}},
        {"id": "right", "tool": "chaos__echo", "args": {"input": "${top}"}},
        {"id": "deep", "tool": "chaos__echo", "args": {"input": "$ref:right"}},
        {"id": "bottom", "tool": "chaos__echo", "depends_on": ["left"], "args": {"input": ["$ref:deep"]}},
        {"id": "alone", "tool": "metrics__list_metrics", "retries": 2},
        {"id": "unsafe", "tool": "chaos__fail", "retries": 3}
    ], "outputs": ["bottom", "alone"]})
}

#[test]
fn schedule_levels_waits_and_critical_path() {
    let plan = valid(diamond());
    let sched = schedule(&plan);
    let names = |ids: Vec<StepId>| ids.into_iter().map(|i| i.to_string()).collect::<Vec<_>>();
    let levels: Vec<Vec<String>> = sched.levels().into_iter().map(names).collect();
    assert_eq!(
        levels,
        vec![
            vec!["top", "alone", "unsafe"],
            vec!["left", "right"],
            vec!["deep"],
            vec!["bottom"]
        ]
    );
    assert_eq!(
        names(sched.waits_for(&StepId::new("bottom"))),
        ["left", "deep"]
    );
    assert_eq!(
        names(sched.critical_path()),
        ["top", "right", "deep", "bottom"]
    );
    let durations = |id: &StepId| if id.as_str() == "left" { 500 } else { 10 };
    let (path, total) = sched.critical_path_weighted(&durations);
    assert_eq!(
        (names(path), total),
        (vec!["top".to_owned(), "left".into(), "bottom".into()], 520)
    );
    assert_eq!(plan.steps()[5].retries, 2);
    assert_eq!(plan.steps()[6].retries, 0);
    let text = sched.render_text(&plan);
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("schedule_text", text);
        insta::assert_snapshot!("schedule_mermaid", mermaid(&plan));
        insta::assert_snapshot!("schedule_dot", dot(&plan));
    });
}

#[test]
fn schedule_of_the_design_example() {
    let plan = valid(cpu_plan());
    let text = schedule(&plan).render_text(&plan);
    snapshot_settings().bind(|| insta::assert_snapshot!("schedule_design_example", text));
}

#[test]
fn sequential_schedule_is_a_line() {
    let plan = valid(json!({"strategy": "sequential", "steps": [
        {"tool": "chaos__echo"}, {"tool": "chaos__echo"}, {"tool": "chaos__echo", "args": {"input": "$ref:s1"}}
    ]}));
    let sched = schedule(&plan);
    assert_eq!(sched.levels().len(), 3);
    let kinds: Vec<(String, DependencyKind)> = plan.steps()[2]
        .depends_on
        .iter()
        .map(|d| (d.step.to_string(), d.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("s1".to_owned(), DependencyKind::Output),
            ("s2".to_owned(), DependencyKind::Sequence)
        ]
    );
}

#[test]
fn competitive_schedule_is_flat() {
    let plan = valid(json!({"strategy": "Competitive", "steps": [
        {"tool": "weather__get_forecast", "args": {"location": "Oslo"}},
        {"tool": "chaos__echo", "args": {"input": "Oslo"}}
    ]}));
    assert_eq!(schedule(&plan).levels().len(), 1);
}

#[cfg(feature = "bench")] // tiktoken-rs comes with the benches (Cargo.toml)
#[test]
fn input_schema() {
    // Sent with every request a model gets: count it with a real tokenizer. The
    // description, built from the live catalog, is measured in upstream::surface.
    let bpe = tiktoken_rs::o200k_base().expect("the tokenizer's data is built in");
    let schema_tokens = bpe
        .encode_ordinary(&execute_plan_input_schema().to_string())
        .len();
    assert!(schema_tokens <= 150, "input schema: {schema_tokens} tokens");
    let schema = execute_plan_input_schema();
    assert_eq!(schema["properties"]["strategy"]["enum"][3], "chained");
    assert_eq!(
        schema["properties"]["plan"]["type"],
        json!(["string", "object", "array"])
    );
}

#[test]
fn a_name_full_of_colons_is_one_lookup_not_one_per_colon() {
    // Each `:` once meant a nested lookup: 200,000 of them overflowed the stack.
    let name = ":a".repeat(200_000);
    assert!(lookup(None, &name).is_err());
    assert_eq!(
        lookup(None, "nowhere:metrics:query_metric").ok(),
        None,
        "only the first ':' splits a server from its tool"
    );
}

#[test]
fn a_resource_step_reads_a_uri_with_references() {
    use crate::plan::{Limits, RESOURCE_TOOL, prepare};
    let tools = demo_catalog();
    let plan = json!({"inputs": {"a": 1}, "steps": [
        {"id": "r", "resource": "demo://item/${input.a}"},
        {"id": "e", "tool": "metrics__query_metric", "args": {"name": "${r}"}}
    ]});
    let validated = prepare(&plan, &tools, &Limits::default()).unwrap_or_else(|i| panic!("{i:?}"));
    let step = &validated.steps()[0];
    assert_eq!(step.exported, RESOURCE_TOOL);
    assert_eq!(step.tier, crate::policy::Tier::Read);
    assert_eq!(step.written_args, json!({"uri": "demo://item/${input.a}"}));
    let both = json!({"steps": [{"tool": "metrics__query_metric", "resource": "x://y"}]});
    let issues = prepare(&both, &tools, &Limits::default())
        .err()
        .unwrap_or_default();
    assert!(
        issues.iter().any(|i| i.location == "steps[0].resource"),
        "{issues:?}"
    );
    let with_args = json!({"steps": [{"resource": "x://y", "args": {"uri": "x://z"}}]});
    let issues = prepare(&with_args, &tools, &Limits::default())
        .err()
        .unwrap_or_default();
    assert!(
        issues.iter().any(|i| i.location == "steps[0].args"),
        "{issues:?}"
    );
    let labelled = json!({"steps": [{"name": "the doc", "resource": "x://y"}]});
    assert!(prepare(&labelled, &tools, &Limits::default()).is_ok());
}
