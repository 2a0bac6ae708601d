//! Conditions, one case a line: the `when` value, the inputs it reads, and whether it
//! holds (or the error, or the parse problem).

use serde_json::{Value, json};

use super::super::template::{Ref, RefSource};
use super::Condition;

/// Parses `when` with every reference reading the plan's inputs, and decides it.
fn decide(when: Value, inputs: Value) -> Result<bool, String> {
    let mut problems = Vec::new();
    let parsed = Condition::parse(&when, &mut problems);
    if let Some(problem) = problems.first() {
        return Err(format!("parse{}: {}", problem.at, problem.message));
    }
    let bound = parsed
        .and_then(|c| c.map_refs(&mut |raw| Some(Ref::bind(raw, RefSource::Input))))
        .ok_or("no condition")?;
    let lookup = |_: &RefSource| Some(&inputs);
    bound.holds(&lookup)
}

fn check(when: Value, inputs: Value, expect: Result<bool, &str>) {
    let got = decide(when.clone(), inputs);
    match expect {
        Ok(b) => assert_eq!(got, Ok(b), "{when}"),
        Err(part) => {
            let message = got.expect_err(&when.to_string());
            assert!(message.contains(part), "{when}: {message}");
        }
    }
}

#[test]
fn truthiness() {
    let inputs = json!({"t": true, "f": false, "zero": 0, "n": 3, "e": "", "s": "x",
                        "ea": [], "a": [1], "eo": {}, "o": {"k": 1}});
    for (path, holds) in [
        ("t", true),
        ("f", false),
        ("zero", false),
        ("n", true),
        ("e", false),
        ("s", true),
        ("ea", false),
        ("a", true),
        ("eo", false),
        ("o", true),
    ] {
        check(
            json!(format!("$ref:input.{path}")),
            inputs.clone(),
            Ok(holds),
        );
        check(
            json!({"$ref": format!("input.{path}")}),
            inputs.clone(),
            Ok(holds),
        );
    }
    check(json!(format!("${{input.n}}")), inputs.clone(), Ok(true));
    check(json!(true), inputs.clone(), Ok(true));
    check(json!(false), inputs, Ok(false));
}

#[test]
fn comparisons() {
    let inputs = json!({"cpu": 85.5, "text": "92", "name": "web-1", "tags": ["a", "b"],
                        "obj": {"k": 1}, "status": "ok"});
    let cases: &[(Value, Result<bool, &str>)] = &[
        (
            json!({"$ref": "input.cpu", "gt": "$ref:input.text"}),
            Ok(false),
        ),
        (
            json!({"$ref": "input.text", "eq": "${input.text}"}),
            Ok(true),
        ),
        (json!({"$ref": "input.cpu", "gt": 80}), Ok(true)),
        (json!({"$ref": "input.cpu", "gte": 85.5}), Ok(true)),
        (json!({"$ref": "input.cpu", "lt": 80}), Ok(false)),
        (json!({"$ref": "input.cpu", "lte": 85.5}), Ok(true)),
        (json!({"$ref": "input.text", "gt": 90}), Ok(true)),
        (json!({"$ref": "input.text", "eq": 92}), Ok(true)),
        (json!({"$ref": "input.status", "eq": "ok"}), Ok(true)),
        (json!({"$ref": "input.status", "ne": "ok"}), Ok(false)),
        (json!({"$ref": "input.name", "lt": "web-2"}), Ok(true)),
        (
            json!({"$ref": "input.status", "in": ["ok", "warn"]}),
            Ok(true),
        ),
        (json!({"$ref": "input.status", "in": "look"}), Ok(true)),
        (json!({"$ref": "input.tags", "contains": "b"}), Ok(true)),
        (json!({"$ref": "input.obj", "contains": "k"}), Ok(true)),
        (json!({"$ref": "input.name", "contains": "eb"}), Ok(true)),
        (
            json!({"$ref": "input.name", "matches": "^web-\\d+$"}),
            Ok(true),
        ),
        (json!({"$ref": "input.name", "matches": "^db"}), Ok(false)),
        (json!({"$ref": "input.cpu", "exists": true}), Ok(true)),
        (json!({"$ref": "input.nope", "exists": true}), Ok(false)),
        (json!({"$ref": "input.nope", "exists": false}), Ok(true)),
        // Only `exists` reads a missing path (as absent); anything else fails, so a
        // misspelled field cannot quietly skip a step.
        (
            json!({"$ref": "input.nope", "contains": "x"}),
            Err("`input` has no `nope`"),
        ),
        (json!("$ref:input.nope"), Err("`input` has no `nope`")),
        (
            json!({"not": {"$ref": "input.nope"}}),
            Err("`input` has no `nope`"),
        ),
        (
            json!({"$ref": "input.nope", "default": 0, "gt": 2}),
            Ok(false),
        ),
        (
            json!({"$ref": "input.name", "match": "\\d+", "eq": ["1"]}),
            Ok(true),
        ),
        (
            json!({"$ref": "input.obj", "gt": 1}),
            Err("cannot order an object"),
        ),
        (
            json!({"$ref": "input.cpu", "contains": 1}),
            Err("cannot contain"),
        ),
    ];
    for (when, expect) in cases {
        check(when.clone(), inputs.clone(), *expect);
    }
}

#[test]
fn combinators() {
    let inputs = json!({"a": 1, "b": 0});
    check(
        json!({"all": ["$ref:input.a", {"not": "$ref:input.b"}]}),
        inputs.clone(),
        Ok(true),
    );
    check(
        json!({"any": ["$ref:input.b", {"$ref": "input.a", "eq": 2}]}),
        inputs.clone(),
        Ok(false),
    );
    check(json!({"all": []}), inputs.clone(), Ok(true));
    check(json!({"any": []}), inputs.clone(), Ok(false));
    // `all` stops at the first false part, so a later part that cannot be decided is
    // not an error.
    check(
        json!({"all": ["$ref:input.b", {"$ref": "input.a", "contains": 1}]}),
        inputs,
        Ok(false),
    );
}

#[test]
fn problems_are_named() {
    let cases: &[(Value, &str)] = &[
        (
            json!({"$ref": "input.a", "greater": 3}),
            "unknown condition operator \"greater\"",
        ),
        (json!({"$ref": "input.a", "eqq": 3}), "did you mean \"eq\""),
        (
            json!({"$ref": "input.a", "gt": 1, "lt": 5}),
            "one operator per comparison",
        ),
        (
            json!({"$ref": "input.a", "matches": "("}),
            "bad \"matches\" pattern",
        ),
        (
            json!({"$ref": "input.a", "matches": "$ref:input.p"}),
            "not a reference",
        ),
        (json!({"$ref": "input.a", "gt": "$ref:input.b["}), "parse"),
        (
            json!({"$ref": "input.a", "matches": 3}),
            "takes a regular expression",
        ),
        (
            json!({"$ref": "input.a", "exists": "yes"}),
            "takes true or false",
        ),
        (json!("plain words"), "a condition is a reference"),
        (json!(3), "a condition is a reference"),
        (json!({"all": "$ref:input.a"}), "takes an array"),
        (json!({"all": [], "any": []}), "stands alone"),
        (json!({"any": [{"not": 4}]}), "parse.any[0].not"),
        (json!("$ref:input.a["), "parse"),
    ];
    for (when, part) in cases {
        check(when.clone(), json!({}), Err(part));
    }
    let mut deep = json!(true);
    for _ in 0..40 {
        deep = json!({"not": deep});
    }
    check(deep, json!({}), Err("nest at most"));
}
