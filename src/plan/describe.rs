//! What a host shows the model about `execute_plan`: its description and input schema.
//! Both are condensed from docs/plan-language.md, which is the specification.

use serde_json::{Value, json};

use super::model::{OnError, Strategy};

/// The `execute_plan` tool description: the format, the reference forms, strategies and
/// `on_error`, with one worked example (about 400 tokens).
pub const EXECUTE_PLAN_DESCRIPTION: &str = r#"Run several tool calls as one plan. Independent steps run in parallel; only the listed outputs come back.

Step: {"id", "tool": exported tool name, "args": {...}}; optional "depends_on": [ids], "timeout_ms", "retries".
References in args read finished steps:
- "$ref:STEP.PATH", {"$ref": "STEP.PATH"} or "${STEP.PATH}" as a whole value: the value, typed
- "text ${STEP.PATH} text": spliced into the string
STEP: a step id, steps[N] (0-based) or input (the plan's "inputs"). PATH: a.b[0].c; a["x.y"] for odd keys. Filter: {"$ref": "list", "jsonpath": "$.metrics[?@.category=='compute']"}. Missing path: null. Literal ${ is written $${.

Example:
{"goal": "Is CPU above 80%?",
 "steps": [
  {"id": "list", "tool": "metrics__list_metrics", "args": {"category": "compute"}},
  {"id": "cpu", "tool": "metrics__query_metric", "args": {"name": "$ref:list.metrics[0].name"}},
  {"id": "check", "tool": "metrics__check_threshold",
   "args": {"metric": "${cpu.name}", "value": "$ref:cpu.current", "threshold": 80, "op": "gt"}}],
 "outputs": ["check"]}

"strategy": auto (default; a step starts when what it reads is done), parallel (same), sequential (one at a time, in order), chained (in order; each step also gets the previous output in arg "input" or its "pipe_to"), competitive (all at once, first success wins).
"on_error": fail_forward (default; skip dependents of a failed step), fail_fast (stop all), continue (pass the error on as the output).
The plan may also be sent as a JSON string: {"plan": "..."}. Invalid plans are rejected before anything runs, listing every problem."#;

/// The JSON Schema of `execute_plan`'s arguments: the canonical fields, or `plan` as a
/// JSON string (or object). Aliases from the seed dialects are accepted too but not
/// advertised, so the schema stays short.
pub fn execute_plan_input_schema() -> Value {
    let strategies: Vec<&str> = Strategy::ALL.iter().map(|(_, name)| *name).collect();
    let policies: Vec<&str> = OnError::ALL.iter().map(|(_, name)| *name).collect();
    json!({
        "type": "object",
        "properties": {
            "goal": {"type": "string", "description": "What the plan is for."},
            "strategy": {"type": "string", "enum": strategies, "default": "auto"},
            "steps": {
                "type": "array",
                "description": "The tool calls. Arguments may hold references such as \"$ref:STEP.PATH\" or \"${STEP.PATH}\".",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "Defaults to s1, s2, … by position."},
                        "tool": {"type": "string", "description": "An exported tool name from tools/list."},
                        "args": {"type": ["object", "string"], "description": "Arguments (an object, or its JSON text)."},
                        "depends_on": {"type": "array", "items": {"type": "string"}},
                        "timeout_ms": {"type": "integer", "minimum": 0},
                        "retries": {"type": "integer", "minimum": 0},
                        "retry_unsafe": {"type": "boolean"},
                        "pipe_to": {"type": "string"}
                    },
                    "required": ["tool"]
                }
            },
            "outputs": {"type": "array", "items": {"type": "string"}, "description": "Steps whose values to return; all when absent."},
            "on_error": {"type": "string", "enum": policies, "default": "fail_forward"},
            "inputs": {"type": "object", "description": "Values that references read as input.NAME."},
            "timeout_ms": {"type": "integer", "minimum": 0},
            "plan": {"type": ["string", "object"], "description": "The whole plan as a JSON string, instead of the fields above."}
        }
    })
}
