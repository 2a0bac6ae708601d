//! What a host shows the model about `execute_plan`: its description and input schema.
//! Both are condensed from docs/plan-language.md, which is the specification.

use serde_json::{Value, json};

use super::model::{OnError, Strategy};

/// The `execute_plan` tool description around its example: the format, the reference
/// forms, strategies and `on_error`. It is sent with every request the model gets, so
/// every token counts: with its example, under 400 (a test holds it there).
const INTRO: &str = r#"Run many tool calls in one call: a step starts once the steps it reads are done, in parallel; only the outputs you list come back.

Step: {"id", "tool", "args"}, optional "depends_on", "timeout_ms", "retries".
"when": {"$ref": "STEP.PATH", "gt": 80} (eq ne gte lt lte in contains matches exists; all/any/not) runs it only if true; "foreach": "$ref:STEP.list" runs per item (args: item, item.PATH, index); {"id", "value": …} reshapes; "mode": "lazy" shows the schedule only.
References in args: "$ref:STEP.PATH", {"$ref": "STEP.PATH"} or "${STEP.PATH}" alone give the value, typed; "a ${STEP.PATH} b" splices it into text. STEP: step id, steps[N] or input (the plan's "inputs"); PATH: a.b[0].c. Filter: {"$ref": "STEP", "jsonpath": "$.items[?@.size > 10]"}. Missing path: null. Literal ${: $${.
"outputs": step ids, or named picks: {"n": "$ref:cpu.name"}."#;

const RULES: &str = r#""strategy": auto (default) or parallel, sequential, chained (in order; previous output into arg "input" or "pipe_to"), competitive (first success wins).
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
            "plan": {"type": ["string", "object"]}
        }
    })
}
