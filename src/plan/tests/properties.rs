//! Property tests: parsing, validating, scheduling and resolving never panic, whatever
//! JSON or text arrives.

use std::collections::HashMap;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::super::{Limits, StepId, dot, mermaid, parse, prepare, render_issues, schedule};
use super::demo_catalog;

/// Text that is likely to hit the reference syntax.
fn plan_text() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "$",
        "${",
        "}",
        "$<",
        ">",
        "$$",
        "$ref:",
        "†state.",
        "†input.",
        "steps[",
        "]",
        "[",
        ".",
        "\"",
        "'",
        "list",
        "cpu",
        "input",
        "s1",
        "result",
        "0",
        "-1",
        "|",
        "$.",
        "?@",
        "==",
        " ",
        "x",
        "é",
        "\\",
    ]);
    prop::collection::vec(pieces, 0..12).prop_map(|parts| parts.concat())
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        plan_text().prop_map(Value::String),
        ".*".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let keys = prop::sample::select(vec![
            "steps",
            "tool",
            "args",
            "id",
            "$ref",
            "jsonpath",
            "plan",
            "strategy",
            "outputs",
            "depends_on",
            "_tool",
            "_outputPath",
            "inputs",
            "on_error",
            "pipe_to",
            "retries",
            "server",
            "name",
            "input",
        ]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((keys, inner), 0..6).prop_map(|pairs| Value::Object(
                pairs
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect::<Map<_, _>>()
            )),
        ]
    })
}

fn exercise(value: &Value) {
    let _ = parse(value);
    match prepare(value, &demo_catalog(), &Limits::default()) {
        Err(issues) => {
            let _ = render_issues(&issues);
        }
        Ok(plan) => {
            let sched = schedule(&plan);
            let _ = (
                sched.render_text(&plan),
                mermaid(&plan),
                dot(&plan),
                sched.critical_path(),
            );
            let outputs: HashMap<StepId, Value> = plan
                .steps()
                .iter()
                .map(|s| (s.id.clone(), json!({"a": [1, {"b": "c"}]})))
                .collect();
            for step in plan.steps() {
                let _ = plan.resolve_args_from(&step.id, &outputs, &HashMap::new());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_json_never_panics(value in json_value()) {
        exercise(&value);
    }

    #[test]
    fn arbitrary_strings_never_panic(text in ".*", syntax in plan_text()) {
        exercise(&Value::String(text.clone()));
        for arg in [text, syntax] {
            let plan = json!({"steps": [
                {"id": "list", "tool": "chaos__echo"},
                {"id": "cpu", "tool": "chaos__echo", "args": {"input": arg.clone(), "message": {"$ref": arg.clone()}}},
                {"id": "q", "tool": "chaos__echo", "args": {"input": {"$ref": "list", "jsonpath": arg.clone()}}}
            ]});
            exercise(&plan);
            exercise(&json!({"plan": arg.clone()}));
            exercise(&json!([{"_tool": "chaos__echo", "input": arg.clone(), "_outputPath": arg}]));
        }
    }

    #[test]
    fn arbitrary_step_lists_never_panic(steps in prop::collection::vec(json_value(), 0..6), strategy in plan_text()) {
        exercise(&json!({"strategy": strategy, "steps": steps}));
    }
}
