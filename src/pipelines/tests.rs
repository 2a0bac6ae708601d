//! Pipelines: which can run against a catalog, and why the others cannot.

use serde_json::json;

use super::*;

fn spec(exported: &str, tier: Tier) -> ToolSpec {
    let (server, tool) = exported.split_once("__").unwrap_or(("s", exported));
    ToolSpec {
        exported: exported.into(),
        server: server.into(),
        tool: tool.into(),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        read_only: tier == Tier::Read,
        idempotent: false,
        tier,
    }
}

fn pipeline(name: &str, plan: Value, schema: Option<Value>) -> PipelineConfig {
    PipelineConfig {
        name: name.into(),
        description: format!("{name} pipeline"),
        plan,
        source: "inline".into(),
        input_schema: schema,
    }
}

fn catalog() -> Vec<ToolSpec> {
    vec![
        spec("metrics__query_metric", Tier::Read),
        spec("files__write_file", Tier::Write),
    ]
}

#[test]
fn pipelines_are_checked_in_call_order_with_the_tier_of_their_highest_step() {
    let alert = pipeline(
        "alert",
        json!({"steps": [
            {"id": "cpu", "tool": "metrics__query_metric", "args": {"name": "${input.metric}"}},
            {"id": "save", "when": {"$ref": "cpu.current", "gt": "$ref:input.threshold"},
             "tool": "files__write_file", "args": {"path": "a.txt", "content": "${cpu.current}"}}
        ]}),
        None,
    );
    // Listed first, but it calls `alert`: it is checked after it.
    let outer = pipeline(
        "nightly",
        json!({"steps": [{"tool": "alert", "args": {"metric": "cpu", "threshold": 80}}]}),
        Some(json!({"type": "object", "properties": {}})),
    );
    let pipelines = Pipelines::new(&[outer, alert]);
    let states = pipelines.check(&catalog(), &Limits::default());
    let names: Vec<&str> = states.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["alert", "nightly"]);
    for state in &states {
        let ready = state.ready.as_ref().expect("ready");
        assert_eq!(ready.spec.tier, Tier::Write, "{}", state.name);
        assert_eq!(ready.spec.server, PIPELINE_SERVER);
    }
    let alert = states[0].ready.as_ref().expect("alert");
    assert_eq!(
        serde_json::to_value(&*alert.tool.input_schema).ok(),
        Some(
            json!({"type": "object", "required": ["metric", "threshold"],
            "properties": {"metric": {"description": "read by the plan as input.metric"},
                           "threshold": {"description": "read by the plan as input.threshold"}}})
        )
    );
    assert_eq!(alert.steps, 2);
}

#[test]
fn a_pipeline_that_cannot_run_says_why() {
    let gone = pipeline(
        "report",
        json!({"steps": [{"id": "q", "tool": "metrics__query_metrics", "args": {}}]}),
        None,
    );
    let taken = pipeline(
        "metrics__query_metric",
        json!({"steps": [{"tool": "metrics__query_metric", "args": {}}]}),
        None,
    );
    let uses_gone = pipeline("outer", json!({"steps": [{"tool": "report"}]}), None);
    let states = Pipelines::new(&[gone, taken, uses_gone]).check(&catalog(), &Limits::default());
    let why: Vec<String> = states
        .iter()
        .map(|s| s.ready.as_ref().err().cloned().unwrap_or_default())
        .collect();
    assert!(
        why[0].contains("unknown tool \"metrics__query_metrics\""),
        "{}",
        why[0]
    );
    assert!(
        why[1].contains("taken by the tool 'query_metric' of server 'metrics'"),
        "{}",
        why[1]
    );
    assert!(why[2].contains("\"report\""), "{}", why[2]);
}

#[test]
fn the_call_s_arguments_are_the_plan_s_inputs_over_its_saved_defaults() {
    let saved = pipeline(
        "p",
        json!({"inputs": {"days": 7, "city": "Oslo"}, "steps": [{"tool": "x"}]}),
        None,
    );
    let arguments = Pipelines::arguments(&saved, json!({"city": "Lima"}));
    assert_eq!(arguments["inputs"], json!({"days": 7, "city": "Lima"}));
    let bare = pipeline("q", json!([{"_tool": "x"}]), None);
    assert_eq!(
        Pipelines::arguments(&bare, json!({"a": 1})),
        json!({"steps": [{"_tool": "x"}], "inputs": {"a": 1}})
    );
    // A wrapped plan, as JSON text or as an object, is opened first: the call's
    // arguments still win over the defaults it saves.
    let inner = json!({"inputs": {"metric": "memory_usage"}, "steps": [{"tool": "x"}]});
    for plan in [
        json!({"plan": inner.to_string(), "goal": "g"}),
        json!({"plan": inner.clone(), "inputs": {"days": 1}}),
    ] {
        let arguments = Pipelines::arguments(&pipeline("w", plan, None), json!({"metric": "cpu"}));
        assert_eq!(arguments["inputs"]["metric"], "cpu", "{arguments}");
        assert_eq!(arguments["steps"], json!([{"tool": "x"}]), "{arguments}");
        assert!(arguments.get("plan").is_none(), "{arguments}");
    }
}

/// Without an `input_schema`, what the saved plan's `inputs` give a default is not
/// required of the caller (a direct call, checked against the schema, may leave it out);
/// a wrapped plan's JSON text may carry comments, and the call's arguments still win.
#[test]
fn saved_defaults_are_not_required_and_wrapped_text_may_carry_comments() {
    let plan = json!({"inputs": {"days": 7}, "steps": [
        {"id": "q", "tool": "metrics__query_metric", "args": {"name": "${input.city}", "d": "$ref:input.days"}}
    ]});
    let p = pipeline("p", plan, None);
    let states = Pipelines::new(std::slice::from_ref(&p)).check(&catalog(), &Limits::default());
    let ready = states[0].ready.as_ref().map_err(Clone::clone);
    let schema = ready
        .map(|r| r.spec.input_schema.clone())
        .unwrap_or_default();
    assert_eq!(schema["required"], json!(["city"]), "{schema}");
    let text =
        "{\"inputs\": {\"city\": \"Oslo\"}, // saved default\n \"steps\": [{\"tool\": \"x\"}]}";
    let wrapped = pipeline("w", json!({ "plan": text }), None);
    let arguments = Pipelines::arguments(&wrapped, json!({"city": "Lima"}));
    assert_eq!(arguments["inputs"]["city"], "Lima", "{arguments}");
}
