//! Table-driven reference resolution: one line per case.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::super::StepId;
use super::valid;

fn outputs() -> HashMap<StepId, Value> {
    HashMap::from([
        (
            StepId::new("list"),
            json!({"metrics": [
                {"name": "cpu_usage", "category": "compute"},
                {"name": "memory_usage", "category": "compute"},
                {"name": "disk", "category": "storage"}
            ], "count": 3}),
        ),
        (
            StepId::new("cpu"),
            json!({"name": "cpu_usage", "current": 72.5, "unit": "%", "ok": true, "tags": null,
                   "a.b": 1, "x y": "sp", "nested": [[1, 2], [3, [4, 5]]], "result": "inner"}),
        ),
        (StepId::new("text"), json!("Sunny, 22°C")),
        (StepId::new("n"), json!(42)),
    ])
}

/// Resolves `arg` as the `input` argument of a step after list, cpu, text and n, and
/// compares the value and the number of warnings.
fn check(arg: Value, expected: Value, warnings: usize) {
    let plan = valid(json!({
        "inputs": {"city": "Paris", "days": 3},
        "steps": [
            {"id": "list", "tool": "chaos__echo"},
            {"id": "cpu", "tool": "chaos__echo"},
            {"id": "text", "tool": "chaos__echo"},
            {"id": "n", "tool": "chaos__echo"},
            {"id": "t", "tool": "chaos__echo", "args": {"input": arg.clone()}}
        ]
    }));
    let outputs = outputs();
    let errors = HashMap::new();
    let (args, found) = plan.resolve_args_from(&StepId::new("t"), &outputs, &errors);
    assert_eq!(args["input"], expected, "resolving {arg}");
    assert_eq!(found.len(), warnings, "warnings for {arg}: {found:?}");
}

#[test]
fn whole_values_are_typed() {
    check(
        json!("$ref:list"),
        outputs()[&StepId::new("list")].clone(),
        0,
    );
    check(json!("$ref:list.count"), json!(3), 0);
    check(json!("$ref:list.metrics[0].name"), json!("cpu_usage"), 0);
    check(json!("$ref:cpu.current"), json!(72.5), 0);
    check(json!("$ref:cpu.ok"), json!(true), 0);
    check(json!("$ref:cpu.tags"), json!(null), 0);
    check(json!("$ref:list.metrics[2].category"), json!("storage"), 0);
    check(json!("$ref:text"), json!("Sunny, 22°C"), 0);
    check(json!("$ref:n"), json!(42), 0);
    check(json!({"$ref": "cpu.current"}), json!(72.5), 0);
    check(json!({"$ref": "$ref:cpu.unit"}), json!("%"), 0);
    check(json!("${cpu.name}"), json!("cpu_usage"), 0);
    check(json!("${cpu.current}"), json!(72.5), 0);
    check(json!("${cpu.nested}"), json!([[1, 2], [3, [4, 5]]]), 0);
    check(json!("${cpu.tags}"), json!(null), 0);
    check(json!("$<cpu.current>"), json!(72.5), 0);
    check(json!("${ cpu.name }"), json!("cpu_usage"), 0);
}

#[test]
fn paths_steps_result_and_input() {
    check(json!("$ref:cpu.nested[1][1][0]"), json!(4), 0);
    check(json!("$ref:cpu.nested[-1][0]"), json!(3), 0);
    check(json!("$ref:list.metrics.0.name"), json!("cpu_usage"), 0);
    check(json!("$ref:steps[1].current"), json!(72.5), 0);
    check(json!("$ref:steps[1].result.current"), json!(72.5), 0);
    check(
        json!({"$ref": "steps[0].result.metrics[0].name"}),
        json!("cpu_usage"),
        0,
    );
    check(json!("${steps[3].result}"), json!(42), 0);
    check(
        json!("$ref:cpu.result"),
        outputs()[&StepId::new("cpu")].clone(),
        0,
    );
    check(json!("$ref:cpu.result.result"), json!("inner"), 0);
    check(json!("${input.city}"), json!("Paris"), 0);
    check(json!("$ref:input.days"), json!(3), 0);
    check(json!("$ref:input"), json!({"city": "Paris", "days": 3}), 0);
    check(json!("†input.city"), json!("Paris"), 0);
    check(json!(r#"$ref:cpu["a.b"]"#), json!(1), 0);
    check(json!("${cpu['x y']}"), json!("sp"), 0);
    check(
        json!(["$ref:n", {"k": "${cpu.unit}"}, 1]),
        json!([42, {"k": "%"}, 1]),
        0,
    );
}

#[test]
fn splicing_into_text() {
    check(
        json!("CPU is ${cpu.current}${cpu.unit}"),
        json!("CPU is 72.5%"),
        0,
    );
    check(
        json!("${cpu.name} and ${list.metrics[1].name}"),
        json!("cpu_usage and memory_usage"),
        0,
    );
    check(json!("pair: ${cpu.nested[0]}"), json!("pair: [1,2]"), 0);
    check(
        json!("Weather for ${input.city} in ${input.days} days"),
        json!("Weather for Paris in 3 days"),
        0,
    );
    check(json!("${cpu.ok}!"), json!("true!"), 0);
    check(json!("say $<text>"), json!("say Sunny, 22°C"), 0);
}

#[test]
fn missing_paths_yield_null_and_a_warning() {
    check(json!("$ref:cpu.missing"), json!(null), 1);
    check(json!("${cpu.missing.deeper}"), json!(null), 1);
    check(json!("x ${cpu.missing} y"), json!("x null y"), 1);
    check(json!("$ref:list.metrics[9]"), json!(null), 1);
    check(json!("$ref:text.length"), json!(null), 1);
    check(json!(["${cpu.nope}", "$ref:n.x"]), json!([null, null]), 2);
}

#[test]
fn jsonpath_selects_and_filters() {
    let names = json!(["cpu_usage", "memory_usage"]);
    check(
        json!({"$ref": "list", "jsonpath": "$.metrics[?@.category=='compute'].name"}),
        names,
        0,
    );
    check(
        json!({"$ref": "list.metrics", "jsonpath": "$[?@.name=='disk']"}),
        json!([{"name": "disk", "category": "storage"}]),
        0,
    );
    check(json!({"$ref": "list", "jsonpath": "$.count"}), json!(3), 0);
    check(
        json!("$ref:list | $.metrics[*].name"),
        json!(["cpu_usage", "memory_usage", "disk"]),
        0,
    );
    check(
        json!("$ref:list|$..name"),
        json!(["cpu_usage", "memory_usage", "disk"]),
        0,
    );
    check(
        json!({"$ref": "list", "jsonpath": "$.metrics[?@.category=='gpu'].name"}),
        json!([]),
        0,
    );
    check(
        json!({"$ref": "list", "jsonpath": "$.nothing"}),
        json!(null),
        1,
    );
}

#[test]
fn literal_dollars_and_escapes() {
    check(json!("costs $5"), json!("costs $5"), 0);
    check(json!("$HOME/bin"), json!("$HOME/bin"), 0);
    check(
        json!("price: $ 10, $$ and $"),
        json!("price: $ 10, $$ and $"),
        0,
    );
    check(json!("$${cpu.name}"), json!("${cpu.name}"), 0);
    check(
        json!("literal $${ and ${cpu.unit}"),
        json!("literal ${ and %"),
        0,
    );
    check(json!("$$<cpu.name>"), json!("$<cpu.name>"), 0);
    check(json!("$$ref:cpu"), json!("$ref:cpu"), 0);
    check(json!("a $< b"), json!("a $< b"), 0);
    check(json!("$<not a ref>"), json!("$<not a ref>"), 0);
    check(json!("a $<b> c"), json!("a $<b> c"), 0);
    check(json!("$<b>"), json!("$<b>"), 0);
    check(json!("<$<b> $<cpu.unit>>"), json!("<$<b> %>"), 0);
    check(json!("ref:cpu"), json!("ref:cpu"), 0);
    check(
        json!({"$ref": "#/definitions/x"}),
        json!({"$ref": "#/definitions/x"}),
        0,
    );
    check(json!("†unknown.thing"), json!("†unknown.thing"), 0);
}

#[test]
fn angle_references_are_read_in_one_pass() {
    check(json!("$< cpu.unit >"), json!("%"), 0);
    check(json!("x $<cpu.unit>y"), json!("x %y"), 0);
    check(json!("$<cpu.unit"), json!("$<cpu.unit"), 0);
    // 400 kB of `$<` (once quadratic: each `$<` searched on for a `>`), and a long
    // unclosed quoted key after each: literal text, read in one pass.
    let many = "$<".repeat(200_000);
    check(
        json!(many.clone() + "$<cpu.unit>"),
        json!(many.clone() + "%"),
        0,
    );
    let quoted = "$<a[\"".repeat(50_000) + ">";
    check(json!(quoted.clone()), json!(quoted), 0);
}

#[test]
fn jsonpath_work_is_bounded() {
    use crate::plan::JsonQuery;
    let refused = |query: &str| match JsonQuery::parse(query) {
        Ok(_) => panic!("{query} was accepted"),
        Err(message) => message,
    };
    assert!(JsonQuery::parse("$..*").is_ok());
    assert!(JsonQuery::parse("$..a[?@.b == '..']").is_ok());
    for query in [
        "$..*..*",
        "$..*..*..*..*[?@ == 7]",
        "$[?@..a]..b",
        "$..a[?count(@..b) > 0]",
    ] {
        assert!(refused(query).contains("descendant segments"), "{query}");
    }
    let long = format!("$.{}", "a".repeat(2_000));
    assert!(refused(&long).contains("at most 1024 are allowed"));
    // `$..*` copies every subtree: 100 chains 200 deep select over 2 million nodes.
    let chain = (0..200).fold(json!(1), |inner, _| json!([inner]));
    let wide = Value::Array(vec![chain; 100]);
    let everything = JsonQuery::parse("$..*").unwrap_or_else(|e| panic!("{e}"));
    match everything.eval(&wide) {
        Err(message) => assert!(message.contains("selects more than 1000000 values")),
        Ok(found) => panic!(
            "selected {} values",
            found.map_or(0, |v| v.to_string().len())
        ),
    }
}
