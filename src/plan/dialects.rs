//! Parsing: every accepted plan dialect into the canonical [`Plan`].
//!
//! Accepted shapes (docs/plan-language.md has examples of each):
//! - the canonical object, with field aliases from the seed dialects;
//! - the same object as a JSON string, bare or as `{"plan": "<json>"}`;
//! - a bare array of steps, including seed 004's `{"_tool": …, "_outputPath": …}` calls,
//!   and `{"calls": [...]}` around such an array.

use serde_json::{Map, Value};

use super::issue::{IssueKind, PlanIssue, describe_value, sort_issues};
use super::model::{OnError, OutputSlots, Plan, Step, Strategy};
use super::refs;
use super::template::Template;

/// How deep `{"plan": "<json string>"}` may nest before we stop unwrapping.
const MAX_UNWRAP: usize = 4;

const PLAN_FIELDS: &[&str] = &[
    "goal",
    "strategy",
    "steps",
    "outputs",
    "on_error",
    "inputs",
    "timeout_ms",
];
/// Plan fields from seed dialects and model habits that carry nothing we run.
const IGNORED_PLAN_FIELDS: &[&str] = &[
    "description",
    "name",
    "conditionPrompt",
    "aggregationPrompt",
    "mode",
    "output",
    "reasoning",
    "$schema",
];
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
];
const ARG_ALIASES: &[&str] = &["args", "arguments", "parameters", "params"];

/// Parses a plan in any accepted dialect. Every problem found is returned, not just the
/// first.
pub fn parse(value: &Value) -> Result<Plan, Vec<PlanIssue>> {
    let (plan, issues) = parse_lenient(value);
    if issues.is_empty() {
        Ok(plan)
    } else {
        Err(issues)
    }
}

/// Parses as far as possible: the plan with broken parts left at their defaults, and
/// every problem met. Lets [`super::prepare`] validate the rest and report everything
/// at once.
pub(crate) fn parse_lenient(value: &Value) -> (Plan, Vec<PlanIssue>) {
    let mut parser = Parser::default();
    let plan = parser.plan(value, 0);
    let mut issues = parser.issues;
    sort_issues(&mut issues);
    (plan, issues)
}

#[derive(Default)]
struct Parser {
    issues: Vec<PlanIssue>,
}

/// Reads a JSON string as JSON, reporting where it breaks.
fn parse_json_text(text: &str) -> Result<Value, IssueKind> {
    serde_json::from_str(text).map_err(|e| IssueKind::MalformedJson {
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    })
}

/// serde_json appends " at line L column C"; the issue says that itself.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

/// The nearest of `known` to `word`, if it is near enough to be a likely typo.
pub(crate) fn closest<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut scored: Vec<(f64, &str)> = known
        .into_iter()
        .map(|k| {
            (
                strsim::jaro_winkler(&word.to_lowercase(), &k.to_lowercase()),
                k,
            )
        })
        .filter(|(score, _)| *score >= 0.75)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored.dedup_by(|a, b| a.1 == b.1);
    scored
        .into_iter()
        .take(3)
        .map(|(_, k)| k.to_owned())
        .collect()
}

fn first_of<'a>(map: &'a Map<String, Value>, names: &[&str]) -> Option<(&'a str, &'a Value)> {
    names
        .iter()
        .find_map(|name| map.get_key_value(*name))
        .map(|(k, v)| (k.as_str(), v))
}

impl Parser {
    fn issue(&mut self, location: impl Into<String>, kind: IssueKind) {
        self.issues.push(PlanIssue::new(location, kind));
    }

    fn shape(&mut self, location: impl Into<String>, expected: &str, found: &Value) {
        let kind = IssueKind::WrongShape {
            expected: expected.into(),
            found: describe_value(found),
        };
        self.issue(location, kind);
    }

    fn plan(&mut self, value: &Value, depth: usize) -> Plan {
        match value {
            Value::String(text) if depth < MAX_UNWRAP => match parse_json_text(text) {
                Ok(inner) => self.plan(&inner, depth + 1),
                Err(kind) => {
                    self.issue("plan", kind);
                    Plan::default()
                }
            },
            Value::Array(_) => {
                let mut map = Map::new();
                map.insert("steps".into(), value.clone());
                self.plan_object(&map)
            }
            Value::Object(map) if depth < MAX_UNWRAP && map.contains_key("plan") => {
                self.wrapped(map, depth)
            }
            Value::Object(map) => self.plan_object(map),
            other => {
                self.shape("plan", "a plan object with \"steps\"", other);
                Plan::default()
            }
        }
    }

    /// `{"plan": <string|object|array>, ...}`: the inner plan, with outer fields (such
    /// as `inputs`) filling in what the inner one lacks.
    fn wrapped(&mut self, outer: &Map<String, Value>, depth: usize) -> Plan {
        let mut inner = outer.get("plan").cloned().unwrap_or(Value::Null);
        for _ in depth..MAX_UNWRAP {
            let Value::String(text) = &inner else { break };
            match parse_json_text(text) {
                Ok(parsed) => inner = parsed,
                Err(kind) => {
                    self.issue("plan", kind);
                    return Plan::default();
                }
            }
        }
        let mut merged = match inner {
            Value::Object(map) => map,
            Value::Array(steps) => Map::from_iter([("steps".to_owned(), Value::Array(steps))]),
            other => {
                self.shape(
                    "plan",
                    "a plan object with \"steps\" (or its JSON text)",
                    &other,
                );
                return Plan::default();
            }
        };
        for (key, item) in outer {
            if key != "plan" && !merged.contains_key(key) {
                merged.insert(key.clone(), item.clone());
            }
        }
        self.plan(&Value::Object(merged), depth + 1)
    }

    fn plan_object(&mut self, map: &Map<String, Value>) -> Plan {
        let mut plan = Plan {
            inputs: Value::Object(Map::new()),
            ..Plan::default()
        };
        for key in map.keys() {
            let known = [
                "goal",
                "strategy",
                "planType",
                "plan_type",
                "steps",
                "calls",
                "outputs",
                "output_steps",
                "outputSteps",
                "on_error",
                "onError",
                "inputs",
                "input",
                "timeout_ms",
                "timeoutMs",
            ];
            if !known.contains(&key.as_str()) && !IGNORED_PLAN_FIELDS.contains(&key.as_str()) {
                let near = closest(key, PLAN_FIELDS.iter().copied()).into_iter().next();
                self.issue(
                    key.clone(),
                    IssueKind::UnknownField {
                        field: key.clone(),
                        closest: near,
                    },
                );
            }
        }
        match map.get("goal") {
            None | Some(Value::Null) => {}
            Some(Value::String(goal)) => plan.goal = Some(goal.clone()),
            Some(other) => self.shape("goal", "a string", other),
        }
        if let Some((key, value)) = first_of(map, &["strategy", "planType", "plan_type"]) {
            plan.strategy =
                self.closed_set(key, value, Strategy::parse, &Strategy::ALL.map(|(_, n)| n));
        }
        if let Some((key, value)) = first_of(map, &["on_error", "onError"]) {
            plan.on_error =
                self.closed_set(key, value, OnError::parse, &OnError::ALL.map(|(_, n)| n));
        }
        if let Some((key, value)) = first_of(map, &["outputs", "output_steps", "outputSteps"]) {
            plan.outputs = self.string_list(key, value);
        }
        if let Some((key, value)) = first_of(map, &["inputs", "input"]) {
            match value {
                Value::Object(_) => plan.inputs = value.clone(),
                Value::Null => {}
                other => self.shape(key, "an object of named inputs", other),
            }
        }
        if let Some((key, value)) = first_of(map, &["timeout_ms", "timeoutMs"]) {
            plan.timeout_ms = self.number(key, value);
        }
        match first_of(map, &["steps", "calls"]) {
            Some((_, Value::Array(items))) => {
                plan.steps = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.step(i, item))
                    .collect();
            }
            Some((key, other)) => self.shape(key, "an array of steps", other),
            None => self.issue("steps", IssueKind::NoSteps),
        }
        plan
    }

    fn closed_set<T: Default>(
        &mut self,
        key: &str,
        value: &Value,
        parse: fn(&str) -> Option<T>,
        names: &[&str],
    ) -> T {
        match value {
            Value::String(text) => parse(text).unwrap_or_else(|| {
                let allowed = names.iter().map(|n| (*n).to_owned()).collect();
                self.issue(
                    key,
                    IssueKind::NotOneOf {
                        value: text.clone(),
                        allowed,
                    },
                );
                T::default()
            }),
            Value::Null => T::default(),
            other => {
                self.shape(key, &format!("one of: {}", names.join(", ")), other);
                T::default()
            }
        }
    }

    /// A list of step names; a single string counts as a list of one.
    fn string_list(&mut self, key: &str, value: &Value) -> Option<Vec<String>> {
        match value {
            Value::Null => None,
            Value::String(one) => Some(vec![one.clone()]),
            Value::Array(items) => Some(
                items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| match item {
                        Value::String(name) => Some(name.clone()),
                        other => {
                            self.shape(format!("{key}[{i}]"), "a step id (string)", other);
                            None
                        }
                    })
                    .collect(),
            ),
            other => {
                self.shape(key, "an array of step ids", other);
                None
            }
        }
    }

    fn number(&mut self, location: impl Into<String>, value: &Value) -> Option<u64> {
        match value {
            Value::Null => None,
            Value::Number(n) if n.as_u64().is_some() => n.as_u64(),
            Value::Number(n) if n.as_f64().is_some_and(|f| f >= 0.0 && f.fract() == 0.0) => {
                n.as_f64().map(|f| f as u64)
            }
            other => {
                self.shape(location, "a whole number ≥ 0", other);
                None
            }
        }
    }

    fn step(&mut self, index: usize, value: &Value) -> Step {
        let at = format!("steps[{index}]");
        let mut step = Step {
            id: super::model::StepId::positional(index).to_string(),
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
        step.args = self.template(&format!("{at}.args"), &Value::Object(args));
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
        // `name` names the tool only in the function-call shape {"name", "arguments"}.
        let tool_keys: &[&str] = if first_of(map, &["tool", "toolName", "tool_name"]).is_some() {
            &["tool", "toolName", "tool_name"]
        } else {
            &["name"]
        };
        match first_of(map, tool_keys) {
            Some((_, Value::String(tool))) => step.tool = tool.clone(),
            Some((key, other)) => self.shape(format!("{at}.{key}"), "a tool name", other),
            None => self.issue(format!("{at}.tool"), IssueKind::MissingTool),
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
        if let Some((_, value)) = first_of(map, ARG_ALIASES) {
            step.args = self.args(&format!("{at}.args"), value);
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

    /// A step's arguments: an object, or the JSON text of one.
    fn args(&mut self, at: &str, value: &Value) -> Template<refs::RawRef> {
        let parsed;
        let value = match value {
            Value::Null => return Template::default(),
            Value::String(text) if text.trim().is_empty() => return Template::default(),
            Value::String(text) => match parse_json_text(text) {
                Ok(inner) => {
                    parsed = inner;
                    &parsed
                }
                Err(kind) => {
                    self.issue(at, kind);
                    return Template::default();
                }
            },
            other => other,
        };
        if !value.is_object() {
            self.shape(at, "an object of named arguments (or its JSON text)", value);
            return Template::default();
        }
        self.template(at, value)
    }

    fn template(&mut self, at: &str, value: &Value) -> Template<refs::RawRef> {
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
