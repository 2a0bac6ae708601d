//! Table-driven reference resolution: one line per case.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::super::StepId;
use super::{snapshot_settings, valid};

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
        (
            StepId::new("file"),
            json!({"content": "  {\"threshold\": 3, \"tags\": [\"a\", \"b\"], \"inner\": \"{\\\"deep\\\": true}\"}\n"}),
        ),
        (
            StepId::new("sqlite"),
            json!(
                "[{'id': 1, 'name': 'a', 'ok': True, 'x': None}, {'id': 2, 'name': \"it's\", 'ok': False, 'x': (1, 2)}]"
            ),
        ),
        (StepId::new("json5"), json!("{a: 'one', b: [1, 2,],}")),
        (StepId::new("lines"), json!("alpha\r\n beta\n\n gamma \n")),
        (StepId::new("csv"), json!("a, b,,c")),
        (StepId::new("log"), json!("core=v1.2 ui=v3.4")),
        (StepId::new("k1"), json!({"s": "{\"k\": 1}"})),
        (StepId::new("k2"), json!({"s": "{\"k\": 2}"})),
    ])
}

/// Resolves `arg` as the `input` argument of a step after the steps of [`outputs`].
fn resolve(arg: Value) -> Result<Value, String> {
    let ids = [
        "list", "cpu", "text", "n", "file", "sqlite", "json5", "lines", "csv", "log", "k1", "k2",
    ];
    let steps: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "tool": "chaos__echo"}))
        .chain([json!({"id": "t", "tool": "chaos__echo", "args": {"input": arg}})])
        .collect();
    let plan = valid(json!({"inputs": {"city": "Paris", "days": 3}, "steps": steps}));
    let outputs = outputs();
    let errors = HashMap::new();
    plan.resolve_args_from(&StepId::new("t"), &outputs, &errors)
        .map(|args| args["input"].clone())
        .map_err(|missing| missing.to_string())
}

/// Resolves `arg` and compares the value.
fn check(arg: Value, expected: Value) {
    assert_eq!(resolve(arg.clone()), Ok(expected), "resolving {arg}");
}

/// Resolves `arg`, which must find nothing, and returns the message.
fn miss(arg: Value) -> String {
    match resolve(arg.clone()) {
        Ok(value) => panic!("{arg} found {value}"),
        Err(message) => message,
    }
}

#[test]
fn whole_values_are_typed() {
    check(json!("$ref:list"), outputs()[&StepId::new("list")].clone());
    check(json!("$ref:list.count"), json!(3));
    check(json!("$ref:list.metrics[0].name"), json!("cpu_usage"));
    check(json!("$ref:cpu.current"), json!(72.5));
    check(json!("$ref:cpu.ok"), json!(true));
    check(json!("$ref:cpu.tags"), json!(null));
    check(json!("$ref:list.metrics[2].category"), json!("storage"));
    check(json!("$ref:text"), json!("Sunny, 22°C"));
    check(json!("$ref:n"), json!(42));
    check(json!({"$ref": "cpu.current"}), json!(72.5));
    check(json!({"$ref": "$ref:cpu.unit"}), json!("%"));
    check(json!("${cpu.name}"), json!("cpu_usage"));
    check(json!("${cpu.current}"), json!(72.5));
    check(json!("${cpu.nested}"), json!([[1, 2], [3, [4, 5]]]));
    check(json!("${cpu.tags}"), json!(null));
    check(json!("$<cpu.current>"), json!(72.5));
    check(json!("${ cpu.name }"), json!("cpu_usage"));
}

#[test]
fn paths_steps_result_and_input() {
    check(json!("$ref:cpu.nested[1][1][0]"), json!(4));
    check(json!("$ref:cpu.nested[-1][0]"), json!(3));
    check(json!("$ref:list.metrics.0.name"), json!("cpu_usage"));
    check(json!("$ref:steps[1].current"), json!(72.5));
    check(json!("$ref:steps[1].result.current"), json!(72.5));
    check(
        json!({"$ref": "steps[0].result.metrics[0].name"}),
        json!("cpu_usage"),
    );
    check(json!("${steps[3].result}"), json!(42));
    check(
        json!("$ref:cpu.result"),
        outputs()[&StepId::new("cpu")].clone(),
    );
    check(json!("$ref:cpu.result.result"), json!("inner"));
    check(json!("${input.city}"), json!("Paris"));
    check(json!("$ref:input.days"), json!(3));
    check(json!("$ref:input"), json!({"city": "Paris", "days": 3}));
    check(json!("†input.city"), json!("Paris"));
    check(json!(r#"$ref:cpu["a.b"]"#), json!(1));
    check(json!("${cpu['x y']}"), json!("sp"));
    check(
        json!(["$ref:n", {"k": "${cpu.unit}"}, 1]),
        json!([42, {"k": "%"}, 1]),
    );
}

#[test]
fn splicing_into_text() {
    check(
        json!("CPU is ${cpu.current}${cpu.unit}"),
        json!("CPU is 72.5%"),
    );
    check(
        json!("${cpu.name} and ${list.metrics[1].name}"),
        json!("cpu_usage and memory_usage"),
    );
    check(json!("pair: ${cpu.nested[0]}"), json!("pair: [1,2]"));
    check(
        json!("Weather for ${input.city} in ${input.days} days"),
        json!("Weather for Paris in 3 days"),
    );
    check(json!("${cpu.ok}!"), json!("true!"));
    check(json!("say $<text>"), json!("say Sunny, 22°C"));
}

#[test]
fn a_reference_that_finds_nothing_says_what_is_there() {
    let found = [
        "$ref:cpu.missing",
        "${cpu.missing.deeper}",
        "x ${cpu.missing} y",
        "$ref:list.metrics[9]",
        "$ref:list.metrics.name",
        "$ref:text.length",
        "$ref:n.x",
        "$ref:cpu.nested[0][2]",
        "${input.town}",
    ]
    .map(|arg| format!("{arg}\n  {}", miss(json!(arg))));
    let objects = [
        json!({"$ref": "list", "jsonpath": "$.nothing"}),
        json!({"$ref": "list.count", "split": ","}),
        json!({"$ref": "text", "parse": "json"}),
    ]
    .map(|arg| format!("{arg}\n  {}", miss(arg.clone())));
    let text = found
        .into_iter()
        .chain(objects)
        .collect::<Vec<_>>()
        .join("\n");
    snapshot_settings().bind(|| insta::assert_snapshot!("reference_found_nothing", text));
    // An array of several: the first that finds nothing fails the whole.
    assert!(miss(json!(["${cpu.name}", "$ref:n.x"])).starts_with("args.input[1]: $ref:n.x"));
}

#[test]
fn a_default_stands_in_for_what_is_not_there() {
    check(json!({"$ref": "cpu.missing", "default": 0}), json!(0));
    check(json!({"$ref": "cpu.current", "default": 0}), json!(72.5));
    check(
        json!({"$ref": "list", "jsonpath": "$.nothing", "default": "none"}),
        json!("none"),
    );
    check(
        json!({"$ref": "text", "parse": "json", "default": {"raw": "$ref:text"}}),
        json!({"raw": "$ref:text"}),
    );
}

#[test]
fn paths_read_on_into_json_text() {
    check(json!("$ref:file.content.threshold"), json!(3));
    check(json!("${file.content.tags[1]}"), json!("b"));
    check(json!("$ref:file.content.inner.deep"), json!(true));
    check(json!("n = ${file.content.threshold}"), json!("n = 3"));
    // A path that ends at the text gives the text as it is.
    check(
        json!("$ref:file.content"),
        outputs()[&StepId::new("file")]["content"].clone(),
    );
    check(
        json!({"$ref": "file.content", "jsonpath": "$.tags[0]"}),
        json!("a"),
    );
    check(
        json!({"$ref": "file.content", "parse": "json", "jsonpath": "$.threshold"}),
        json!(3),
    );
}

/// Texts read for a JSONPath are each parsed as they are: two of the same length, read
/// in one resolution, are not taken for one another.
#[test]
fn each_text_a_jsonpath_reads_is_parsed_as_it_is() {
    check(
        json!({"a": {"$ref": "k1.s", "jsonpath": "$.k"}, "b": {"$ref": "k2.s", "jsonpath": "$.k"},
               "c": {"$ref": "k1.s", "jsonpath": "$.k"}}),
        json!({"a": 1, "b": 2, "c": 1}),
    );
}

#[test]
fn text_forms_read_text_into_values() {
    check(
        json!({"$ref": "sqlite", "parse": "json"}),
        json!([{"id": 1, "name": "a", "ok": true, "x": null}, {"id": 2, "name": "it's", "ok": false, "x": [1, 2]}]),
    );
    check(
        json!({"$ref": "json5", "parse": "json"}),
        json!({"a": "one", "b": [1, 2]}),
    );
    check(
        json!({"$ref": "lines", "split": "\n"}),
        json!(["alpha", "beta", "gamma"]),
    );
    check(json!({"$ref": "csv", "split": ","}), json!(["a", "b", "c"]));
    check(
        json!({"$ref": "log", "match": "v\\d+\\.\\d+"}),
        json!(["v1.2", "v3.4"]),
    );
    check(
        json!({"$ref": "log", "match": "(?P<name>\\w+)=(?P<version>v[\\d.]+)"}),
        json!([{"name": "core", "version": "v1.2"}, {"name": "ui", "version": "v3.4"}]),
    );
    check(
        json!({"$ref": "lines", "split": "\n", "jsonpath": "$[1]"}),
        json!("beta"),
    );
}

#[test]
fn jsonpath_selects_and_filters() {
    let names = json!(["cpu_usage", "memory_usage"]);
    check(
        json!({"$ref": "list", "jsonpath": "$.metrics[?@.category=='compute'].name"}),
        names,
    );
    check(
        json!({"$ref": "list.metrics", "jsonpath": "$[?@.name=='disk']"}),
        json!([{"name": "disk", "category": "storage"}]),
    );
    check(json!({"$ref": "list", "jsonpath": "$.count"}), json!(3));
    check(
        json!("$ref:list | $.metrics[*].name"),
        json!(["cpu_usage", "memory_usage", "disk"]),
    );
    check(
        json!("$ref:list|$..name"),
        json!(["cpu_usage", "memory_usage", "disk"]),
    );
    check(
        json!({"$ref": "list", "jsonpath": "$.metrics[?@.category=='gpu'].name"}),
        json!([]),
    );
}

#[test]
fn literal_dollars_and_escapes() {
    check(json!("costs $5"), json!("costs $5"));
    check(json!("$HOME/bin"), json!("$HOME/bin"));
    check(
        json!("price: $ 10, $$ and $"),
        json!("price: $ 10, $$ and $"),
    );
    check(json!("$${cpu.name}"), json!("${cpu.name}"));
    check(
        json!("literal $${ and ${cpu.unit}"),
        json!("literal ${ and %"),
    );
    check(json!("$$<cpu.name>"), json!("$<cpu.name>"));
    check(json!("$$ref:cpu"), json!("$ref:cpu"));
    check(json!("a $< b"), json!("a $< b"));
    check(json!("$<not a ref>"), json!("$<not a ref>"));
    check(json!("a $<b> c"), json!("a $<b> c"));
    check(json!("$<b>"), json!("$<b>"));
    check(json!("<$<b> $<cpu.unit>>"), json!("<$<b> %>"));
    check(json!("ref:cpu"), json!("ref:cpu"));
    check(
        json!({"$ref": "#/definitions/x"}),
        json!({"$ref": "#/definitions/x"}),
    );
    check(json!("†unknown.thing"), json!("†unknown.thing"));
}

#[test]
fn angle_references_are_read_in_one_pass() {
    check(json!("$< cpu.unit >"), json!("%"));
    check(json!("x $<cpu.unit>y"), json!("x %y"));
    check(json!("$<cpu.unit"), json!("$<cpu.unit"));
    // 400 kB of `$<` (once quadratic: each `$<` searched on for a `>`), and a long
    // unclosed quoted key after each: literal text, read in one pass.
    let many = "$<".repeat(200_000);
    check(
        json!(many.clone() + "$<cpu.unit>"),
        json!(many.clone() + "%"),
    );
    let quoted = "$<a[\"".repeat(50_000) + ">";
    check(json!(quoted.clone()), json!(quoted));
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

#[test]
fn text_forms_defaults_and_index_keep_their_meaning_in_the_canonical_form() {
    let written = json!({"steps": [
        {"id": "q", "tool": "chaos__echo"},
        {"id": "each", "foreach": {"$ref": "q.rows", "parse": "json"}, "tool": "chaos__echo",
         "args": {"input": {"$ref": "q.log", "match": "v\\d+", "jsonpath": "$[0]", "default": "v0"},
                  "message": "${q[index].name}", "lines": {"$ref": "q.text", "split": "\n"}}}
    ]});
    let canonical = crate::plan::parse(&written)
        .map(|p| p.to_canonical())
        .map_err(|i| crate::plan::render_issues(&i));
    let again = canonical
        .clone()
        .and_then(|c| crate::plan::parse(&c).map_err(|i| crate::plan::render_issues(&i)))
        .map(|p| p.to_canonical());
    assert_eq!(again, canonical);
    let args = canonical.map(|c| c["steps"][1].clone()).unwrap_or_default();
    assert_eq!(args["foreach"], json!({"$ref": "q.rows", "parse": "json"}));
    assert_eq!(
        args["args"]["input"],
        json!({"$ref": "q.log", "jsonpath": "$[0]", "match": "v\\d+", "default": "v0"})
    );
    assert_eq!(args["args"]["message"], json!("$ref:q[index].name"));
}
