//! Parsing one step: the canonical object with its aliases, and seed 004's
//! `{"_tool": …, "_outputPath": …}` call.

use serde_json::{Map, Value};

use super::plan::{OutputSlots, Step};
use super::wrapper::parse_json_text;
use super::{Parser, first_of};
use crate::plan::condition::Condition;
use crate::plan::ids::StepId;
use crate::plan::issue::IssueKind;
use crate::plan::names::closest;
use crate::plan::refs::{self, RawRef};
use crate::plan::template::Template;
use crate::plan::tools::RESOURCE_TOOL;

const STEP_FIELDS: &[&str] = &[
    "id",
    "tool",
    "server",
    "args",
    "depends_on",
    "timeout_ms",
    "retries",
    "retry_unsafe",
    "pipe_to",
    "output_path",
    "description",
    "resource",
    "value",
    "when",
    "foreach",
    "concurrency",
];
const ARG_ALIASES: &[&str] = &["args", "arguments", "parameters", "params"];

impl Parser {
    pub(super) fn step(&mut self, index: usize, value: &Value) -> Step {
        let at = format!("steps[{index}]");
        let mut step = Step {
            id: StepId::positional(index).to_string(),
            ..Step::default()
        };
        let Value::Object(map) = value else {
            self.shape(
                at,
                "a step object such as {\"tool\": \"...\", \"args\": {...}}",
                value,
            );
            return step;
        };
        if map.contains_key("_tool") {
            self.call_step(&at, map, &mut step);
        } else {
            self.canonical_step(&at, map, &mut step);
        }
        step
    }

    /// Seed 004: `{"_tool": "x", "arg": …, "_outputPath": "†state.y"}`.
    fn call_step(&mut self, at: &str, map: &Map<String, Value>, step: &mut Step) {
        let mut args = Map::new();
        for (key, value) in map {
            match key.as_str() {
                "_tool" => match value {
                    Value::String(tool) => step.tool = tool.clone(),
                    other => self.shape(format!("{at}._tool"), "a tool name", other),
                },
                "_outputPath" => self.output_path(&format!("{at}._outputPath"), value, step),
                "_id" => self.id(at, value, step),
                "_description" => step.description = value.as_str().map(str::to_owned),
                other if other.starts_with('_') => {
                    let near = closest(other, ["_tool", "_outputPath", "_id"])
                        .into_iter()
                        .next();
                    self.issue(
                        format!("{at}.{other}"),
                        IssueKind::UnknownField {
                            field: other.into(),
                            closest: near,
                        },
                    );
                }
                _ => {
                    args.insert(key.clone(), value.clone());
                }
            }
        }
        let args = Value::Object(args);
        step.args = self.template(&format!("{at}.args"), &args);
        step.written_args = args;
    }

    /// `_outputPath` / `output_path`: `"†state.ok"` or `"†state.ok || †state.error"`.
    fn output_path(&mut self, at: &str, value: &Value, step: &mut Step) {
        match value {
            Value::String(path) => match refs::parse_output_path(path) {
                Ok((success, error)) => step.output_slots = Some(OutputSlots { success, error }),
                Err(message) => self.issue(
                    at,
                    IssueKind::BadOutputPath {
                        text: path.clone(),
                        message,
                    },
                ),
            },
            other => self.shape(at, "a state path such as \"†state.name\"", other),
        }
    }

    fn id(&mut self, at: &str, value: &Value, step: &mut Step) {
        match value {
            Value::String(id) => {
                step.id = id.clone();
                step.explicit_id = true;
            }
            Value::Number(n) => {
                step.id = n.to_string();
                step.explicit_id = true;
            }
            Value::Null => {}
            other => self.shape(format!("{at}.id"), "a string id", other),
        }
    }

    fn canonical_step(&mut self, at: &str, map: &Map<String, Value>, step: &mut Step) {
        let known = [
            "id",
            "tool",
            "toolName",
            "tool_name",
            "server",
            "serverId",
            "server_id",
            "args",
            "arguments",
            "parameters",
            "params",
            "depends_on",
            "dependencies",
            "dependsOn",
            "timeout_ms",
            "timeoutMs",
            "retries",
            "retry_unsafe",
            "retryUnsafe",
            "pipe_to",
            "pipeTo",
            "output_path",
            "_outputPath",
            "description",
            "title",
            "name",
            "resource",
            "value",
            "when",
            "foreach",
            "for_each",
            "forEach",
            "concurrency",
        ];
        for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
            let near = closest(key, STEP_FIELDS.iter().copied()).into_iter().next();
            self.issue(
                format!("{at}.{key}"),
                IssueKind::UnknownField {
                    field: key.clone(),
                    closest: near,
                },
            );
        }
        if let Some(value) = map.get("id") {
            self.id(at, value, step);
        }
        // `name` names the tool only in the function-call shape {"name", "arguments"}
        // (beside a `resource`, it is a label).
        let tool_keys: &[&str] = if first_of(map, &["tool", "toolName", "tool_name"]).is_some()
            || map.contains_key("resource")
        {
            &["tool", "toolName", "tool_name"]
        } else {
            &["name"]
        };
        if let Some(value) = map.get("value") {
            step.value = Some(self.template(&format!("{at}.value"), value));
            let beside = ["tool", "toolName", "tool_name", "resource"]
                .into_iter()
                .chain(ARG_ALIASES.iter().copied())
                .find(|k| map.contains_key(*k));
            if let Some(key) = beside {
                self.issue(
                    format!("{at}.{key}"),
                    IssueKind::ValueWithTool { field: key.into() },
                );
                return;
            }
        }
        if let Some(when) = map.get("when") {
            step.when = self.condition(&format!("{at}.when"), when);
        }
        if let Some((key, items)) = first_of(map, &["foreach", "for_each", "forEach"]) {
            step.foreach = Some(self.template(&format!("{at}.{key}"), items));
        }
        if let Some(value) = map.get("concurrency") {
            let at = format!("{at}.concurrency");
            step.concurrency = match self.number(at.clone(), value) {
                // No items at a time would never run the loop.
                Some(0) => {
                    self.shape(at, "a whole number ≥ 1", value);
                    None
                }
                n => n,
            };
        }
        match (first_of(map, tool_keys), map.get("resource")) {
            (Some((key, _)), Some(_)) => {
                let kind = IssueKind::WrongShape {
                    expected: "either a tool or a resource".into(),
                    found: format!("both \"{key}\" and \"resource\""),
                };
                self.issue(format!("{at}.resource"), kind);
            }
            (None, Some(uri)) => {
                // `{"resource": URI}` is `{"tool": "resources/read", "args": {"uri": URI}}`.
                step.tool = RESOURCE_TOOL.to_owned();
                let args = serde_json::json!({ "uri": uri });
                step.args = self.template(&format!("{at}.resource"), &args);
                step.written_args = args;
            }
            (Some((_, Value::String(tool))), None) => step.tool = tool.clone(),
            (Some((key, other)), None) => self.shape(format!("{at}.{key}"), "a tool name", other),
            (None, None) if step.value.is_some() => {}
            (None, None) => self.issue(format!("{at}.tool"), IssueKind::MissingTool),
        }
        match first_of(map, &["server", "serverId", "server_id"]) {
            None | Some((_, Value::Null)) => {}
            Some((_, Value::String(server))) => step.server = Some(server.clone()),
            Some((key, other)) => self.shape(format!("{at}.{key}"), "a server name", other),
        }
        let given: Vec<&str> = ARG_ALIASES
            .iter()
            .copied()
            .filter(|k| map.contains_key(*k))
            .collect();
        if given.len() > 1 {
            let kind = IssueKind::WrongShape {
                expected: "one arguments field".into(),
                found: format!("both \"{}\" and \"{}\"", given[0], given[1]),
            };
            self.issue(format!("{at}.{}", given[1]), kind);
        }
        let beside_resource = [
            "args",
            "arguments",
            "parameters",
            "params",
            "server",
            "serverId",
            "server_id",
        ];
        if map.contains_key("resource")
            && let Some(key) = beside_resource.iter().find(|k| map.contains_key(**k))
        {
            let kind = IssueKind::WrongShape {
                expected: "a resource step with its URI alone".into(),
                found: format!("\"{key}\" beside \"resource\""),
            };
            self.issue(format!("{at}.{key}"), kind);
        } else if let Some((_, value)) = first_of(map, ARG_ALIASES) {
            (step.args, step.written_args) = self.args(&format!("{at}.args"), value);
        }
        if let Some((key, value)) = first_of(map, &["depends_on", "dependencies", "dependsOn"]) {
            step.depends_on = self
                .string_list(&format!("{at}.{key}"), value)
                .unwrap_or_default();
        }
        if let Some((key, value)) = first_of(map, &["timeout_ms", "timeoutMs"]) {
            step.timeout_ms = self.number(format!("{at}.{key}"), value);
        }
        if let Some(value) = map.get("retries") {
            let retries = self.number(format!("{at}.retries"), value).unwrap_or(0);
            step.retries = u32::try_from(retries).unwrap_or(u32::MAX);
        }
        if let Some((key, value)) = first_of(map, &["retry_unsafe", "retryUnsafe"]) {
            match value {
                Value::Bool(flag) => step.retry_unsafe = *flag,
                other => self.shape(format!("{at}.{key}"), "true or false", other),
            }
        }
        if let Some((key, value)) = first_of(map, &["output_path", "_outputPath"]) {
            self.output_path(&format!("{at}.{key}"), value, step);
        }
        if let Some((key, value)) = first_of(map, &["pipe_to", "pipeTo"]) {
            match value {
                Value::String(name) => step.pipe_to = Some(name.clone()),
                other => self.shape(format!("{at}.{key}"), "an argument name", other),
            }
        }
        let note_keys: &[&str] = if tool_keys == ["name"] {
            &["description", "title"]
        } else {
            &["description", "title", "name"]
        };
        if let Some((_, Value::String(text))) = first_of(map, note_keys) {
            step.description = Some(text.clone());
        }
    }

    /// A step's arguments, an object or the JSON text of one: parsed, and the object as
    /// written.
    fn args(&mut self, at: &str, value: &Value) -> (Template<RawRef>, Value) {
        let none = || (Template::default(), Value::Object(Map::new()));
        let value = match value {
            Value::Null => return none(),
            Value::String(text) if text.trim().is_empty() => return none(),
            Value::String(text) => match parse_json_text(text) {
                Ok(inner) => inner,
                Err(kind) => {
                    self.issue(at, kind);
                    return none();
                }
            },
            other => other.clone(),
        };
        if !value.is_object() {
            self.shape(
                at,
                "an object of named arguments (or its JSON text)",
                &value,
            );
            return none();
        }
        (self.template(at, &value), value)
    }

    fn condition(&mut self, at: &str, value: &Value) -> Option<Condition<RawRef>> {
        let mut problems = Vec::new();
        let parsed = Condition::parse(value, &mut problems);
        for problem in problems {
            self.issue(
                format!("{at}{}", problem.at),
                IssueKind::BadCondition {
                    message: problem.message,
                },
            );
        }
        parsed
    }

    pub(super) fn template(&mut self, at: &str, value: &Value) -> Template<RawRef> {
        let mut problems = Vec::new();
        let template = Template::from_value(value, &mut problems);
        for problem in problems {
            let kind = IssueKind::BadReference {
                text: problem.text,
                message: problem.message,
            };
            self.issue(format!("{at}{}", problem.at), kind);
        }
        template
    }
}
