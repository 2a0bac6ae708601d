//! What a host shows the model about `execute_plan`: its description and input schema.
//! Both are condensed from docs/plan-language.md, which is the specification.

use serde_json::{Value, json};

use super::strategy::{OnError, Strategy};

/// The `execute_plan` tool description around its example: the format, the reference
/// forms, strategies and `on_error`. It is sent with every request the model gets, so
/// every token counts: with its example, under 400 (a test holds it there).
const INTRO: &str = r#"Run many tool calls in one call: a step starts once the steps it reads are done, in parallel; only the outputs you list come back.

Step: {"id", "tool", "args"}, optional "depends_on", "timeout_ms", "retries".
"when": {"$ref": "STEP.PATH", "gt": 80} (eq ne gte lt lte in contains matches exists; all/any/not) runs it only if true; "foreach": "$ref:STEP.list" runs per item (args: item, item.PATH, index); {"id", "value": …} reshapes; "mode": "lazy" shows the schedule only.
References in args: "$ref:STEP.PATH", {"$ref": "STEP.PATH"} or "${STEP.PATH}" alone give the value, typed; "a ${STEP.PATH} b" splices it into text. STEP: step id, steps[N] or input ("inputs"); PATH: a.b[0].c. Filter: {"$ref": "STEP", "jsonpath": "$.items[?@.size > 10]"}. A missing path fails the step (unless "default": V).
"outputs": step ids, or named picks: {"n": "$ref:cpu.name"}."#;

const RULES: &str = r#""strategy": auto (default), parallel, sequential, chained (in order; previous output into arg "input" or "pipe_to"), competitive (first success wins).
"on_error": fail_forward (default; skip a failure's dependents), fail_fast, continue (pass the error on)."#;

/// The `execute_plan` description with `example` (a plan over tools the catalog has,
/// introduced by a line saying so) between the format and the rules.
pub fn execute_plan_description(example: &str) -> String {
    format!("{INTRO}\n\n{example}\n\n{RULES}")
}

/// The JSON Schema of `execute_plan`'s arguments: the canonical fields, or `plan` as a
/// JSON string (or object). Aliases from the seed dialects are accepted too but not
/// advertised, so the schema stays short.
pub fn execute_plan_input_schema() -> Value {
    let strategies: Vec<&str> = Strategy::ALL.iter().map(|(_, name)| *name).collect();
    let policies: Vec<&str> = OnError::ALL.iter().map(|(_, name)| *name).collect();
    // Only what a model needs to write a plan: the rarer fields (timeout_ms, retries,
    // retry_unsafe, pipe_to, a plan timeout) are in the description or the docs, and are
    // accepted all the same. Every property here is sent with every request. No step
    // field is required: a value step has no tool.
    json!({
        "type": "object",
        "properties": {
            "goal": {"type": "string"},
            "strategy": {"enum": strategies},
            "steps": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "tool": {"type": "string"},
                        "args": {"type": ["object", "string"]},
                        "depends_on": {"type": "array", "items": {"type": "string"}}
                    }
                }
            },
            "outputs": {"type": ["array", "object"]},
            "on_error": {"enum": policies},
            "inputs": {"type": "object"},
            "as_task": {"type": "boolean", "description": "answer at once with a task the host follows (hosts with tasks)"},
            "plan": {"type": ["string", "object", "array"]}
        }
    })
}

/// The JSON Schema of a plan in its canonical form, with every field
/// (`planmux schema plan`): for editors and generators. `execute_plan` advertises the
/// short form above; both accept the same plans.
pub fn plan_schema() -> Value {
    let mut schema = execute_plan_input_schema();
    let step = &mut schema["properties"]["steps"]["items"]["properties"];
    for (key, value) in [
        (
            "server",
            json!({"type": "string", "description": "a server beside a bare tool name"}),
        ),
        ("timeout_ms", json!({"type": "integer", "minimum": 0})),
        (
            "retries",
            json!({"type": "integer", "minimum": 0, "maximum": 5}),
        ),
        ("retry_unsafe", json!({"type": "boolean"})),
        (
            "pipe_to",
            json!({"type": "string", "description": "under chained: the argument that receives the previous output"}),
        ),
        (
            "output_path",
            json!({"type": "string", "description": "seed 004: \"†state.ok\" or \"†state.ok || †state.error\""}),
        ),
        ("description", json!({"type": "string"})),
        (
            "resource",
            json!({"type": "string", "description": "a resource URI to read instead of calling a tool"}),
        ),
        (
            "when",
            json!({"description": "runs the step only if this holds: a reference, {\"$ref\": REF, OP: VALUE}, {\"all\"|\"any\": [...]}, {\"not\": ...}"}),
        ),
        (
            "foreach",
            json!({"description": "an array, or a reference to one: the tool is called once per item"}),
        ),
        ("concurrency", json!({"type": "integer", "minimum": 1})),
        (
            "value",
            json!({"description": "a value step: no tool call, its output is this with references resolved"}),
        ),
    ] {
        step[key] = value;
    }
    let plan = &mut schema["properties"];
    plan["timeout_ms"] = json!({"type": "integer", "minimum": 0});
    plan["mode"] = json!({"anyOf": [
        {"enum": ["lazy", "eager"]},
        {"type": "string", "description": "lazy or eager, in any case"}
    ]});
    // One step's id alone is read as a list of one.
    plan["outputs"] = json!({"type": ["array", "object", "string"]});
    plan["dry_run"] = json!({"type": "boolean"});
    // Names are read in any case, with `-` and `_` ignored (`PARALLEL`, `fail-fast`),
    // and seed 002's CONDITIONAL and ITERATIVE run as auto: an editor still offers the
    // canonical names, and validation names a value it does not know.
    for (key, what) in [
        (
            "strategy",
            "any case; seed 002's CONDITIONAL and ITERATIVE run as auto",
        ),
        ("on_error", "any case, '-' or '_' alike"),
    ] {
        let canonical = plan[key].clone();
        plan[key] = json!({"anyOf": [canonical, {"type": "string", "description": what}]});
    }
    let steps_alone = json!({
        "type": "array",
        "description": "steps alone, as seed dialects write them (seed 004's bare array of {\"_tool\": …})",
        "items": {"type": "object"}
    });
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "planmux plan",
        "anyOf": [schema, steps_alone]
    })
}
