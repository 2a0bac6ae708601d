//! Property tests: parsing, validating, scheduling and resolving never panic, whatever
//! JSON or text arrives.

use std::collections::HashMap;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::super::{
    Limits, MAX_ISSUES, StepId, ToolSpec, dot, mermaid, parse, prepare, render_issues, schedule,
};
use super::{demo_catalog, spec};

/// Cases per property: `PROPTEST_CASES` when set (for long runs by hand), else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// The demo catalog plus a tool whose schema refers to itself three times per level.
fn hostile_catalog() -> Vec<ToolSpec> {
    let mut tools = demo_catalog();
    let bomb = json!({"type": "object", "allOf": [{"$ref": "#"}, {"$ref": "#"}, {"$ref": "#"}]});
    tools.push(spec("hostile", "bomb", bomb));
    tools
}

/// The example plans of the repository, each dialect among them.
const EXAMPLES: [&str; 6] = [
    include_str!("../../../examples/plans/cpu-check.json"),
    include_str!("../../../examples/plans/cpu-check-declarative.json"),
    include_str!("../../../examples/plans/chained-report.json"),
    include_str!("../../../examples/plans/diamond.json"),
    include_str!("../../../examples/plans/state-slots.json"),
    include_str!("../../../examples/plans/weather-to-file.json"),
];

/// Replaces the `at`-th node (depth first) of `plan` with something hostile.
fn mutate(plan: &mut Value, at: prop::sample::Index, op: u8, n: u32) {
    fn count(value: &Value) -> usize {
        1 + match value {
            Value::Array(items) => items.iter().map(count).sum(),
            Value::Object(map) => map.values().map(count).sum(),
            _ => 0,
        }
    }
    fn nth<'a>(value: &'a mut Value, target: usize, seen: &mut usize) -> Option<&'a mut Value> {
        if *seen == target {
            return Some(value);
        }
        *seen += 1;
        match value {
            Value::Array(items) => items.iter_mut().find_map(|v| nth(v, target, seen)),
            Value::Object(map) => map.values_mut().find_map(|v| nth(v, target, seen)),
            _ => None,
        }
    }
    let target = at.index(count(plan));
    let Some(node) = nth(plan, target, &mut 0) else {
        return;
    };
    let n = n as usize;
    *node = match op % 10 {
        0 => json!("hostile__bomb"),
        1 => json!({"a": [1, {"b": [2, 3]}], "c": "d"}),
        2 => Value::String("$<".repeat(n % 50_000)),
        3 => Value::String("x".repeat(n % 200_000)),
        4 => {
            let query = ["$..*..*", "$..a[?@..b]", "$..*", "$.a"][n % 4];
            json!({"$ref": "input", "jsonpath": query})
        }
        5 => (0..n % 300).fold(json!(1), |inner, _| json!([inner])),
        6 => Value::String(format!("${{s{}.x}} $<s{}> $ref:steps[{}]", n % 7, n % 5, n % 9)),
        7 => json!({"id": "x".repeat(n % 1_000), "tool": "hostile__bomb", "args": {"a": 1}, "retries": n}),
        8 => Value::Array((0..n % 400).map(|i| json!({"id": format!("s{i}"), "tool": "nope", "args": {"v": format!("$ref:s{}", (i + 1) % 400)}})).collect()),
        _ => json!(null),
    };
}

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
    #![proptest_config(ProptestConfig { cases: cases(384), ..ProptestConfig::default() })]

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

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(2_000), ..ProptestConfig::default() })]

    /// Example plans with hostile mutations, against a catalog with a schema bomb: a
    /// result or bounded issues, never a panic, never unbounded work.
    #[test]
    fn mutated_examples_get_a_bounded_answer(
        example in 0..EXAMPLES.len(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), any::<u32>()), 1..5),
    ) {
        let mut plan: Value = serde_json::from_str(EXAMPLES[example]).unwrap_or(Value::Null);
        for (at, op, n) in edits {
            mutate(&mut plan, at, op, n);
        }
        if let Err(issues) = prepare(&plan, &hostile_catalog(), &Limits::default()) {
            prop_assert!(issues.len() <= MAX_ISSUES + 1);
            let text = render_issues(&issues);
            prop_assert!(text.len() <= 16_384, "{} bytes", text.len());
        }
    }
}
