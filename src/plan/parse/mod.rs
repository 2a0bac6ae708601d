//! Parsing, the first stage of the pipeline (wire → [`Plan`] → validated): every
//! accepted plan dialect into the one parsed [`Plan`], every problem met reported.
//!
//! Accepted shapes (docs/plan-language.md has examples of each):
//! - the canonical object, with field aliases from the seed dialects;
//! - the same object as a JSON string, bare or as `{"plan": "<json>"}`;
//! - a bare array of steps, including seed 004's `{"_tool": …, "_outputPath": …}` calls,
//!   and `{"calls": [...]}` around such an array.

mod canonical;
mod plan;
mod steps;
mod wrapper;

pub use plan::{OutputSlots, Plan, Step};
pub use wrapper::{MAX_UNWRAP, Unopened, open_wrapper};

use serde_json::{Map, Value};

use crate::plan::issue::{IssueKind, PlanIssue, describe_value, sort_issues};
use crate::plan::names::{closest, fold_name};
use crate::plan::strategy::{OnError, Strategy};
use wrapper::parse_json_text;

const PLAN_FIELDS: &[&str] = &[
    "goal",
    "strategy",
    "steps",
    "outputs",
    "on_error",
    "inputs",
    "timeout_ms",
    "mode",
    "dry_run",
    "as_task",
];
/// Plan fields from seed dialects and model habits that carry nothing we run.
const IGNORED_PLAN_FIELDS: &[&str] = &["description", "name", "output", "reasoning", "$schema"];

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
/// every problem met. Lets [`crate::plan::prepare`] validate the rest and report everything
/// at once.
pub(super) fn parse_lenient(value: &Value) -> (Plan, Vec<PlanIssue>) {
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
        match open_wrapper(outer, depth) {
            Ok(merged) => self.plan(&Value::Object(merged), depth + 1),
            Err(Unopened::Text(kind)) => {
                self.issue("plan", kind);
                Plan::default()
            }
            Err(Unopened::Shape(other)) => {
                self.shape(
                    "plan",
                    "a plan object with \"steps\" (or its JSON text)",
                    &other,
                );
                Plan::default()
            }
        }
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
                "mode",
                "dry_run",
                "dryRun",
                "as_task",
                "asTask",
                "conditionPrompt",
                "aggregationPrompt",
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
            match value {
                Value::Object(named) => {
                    // Named selections: each a reference, or a bare step id for its whole
                    // output. The steps they read are the outputs.
                    plan.outputs = Some(Vec::new());
                    for (name, selection) in named {
                        let selection = match selection {
                            Value::String(id) if !id.contains('$') => {
                                Value::String(format!("$ref:{id}"))
                            }
                            other => other.clone(),
                        };
                        let template = self.template(&format!("{key}.{name}"), &selection);
                        plan.selections.push((name.clone(), template));
                    }
                }
                _ => plan.outputs = self.string_list(key, value),
            }
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
        plan.lazy = self.lazy(map);
        plan.as_task = self.flag(map, &["as_task", "asTask"]);
        for key in ["conditionPrompt", "aggregationPrompt"] {
            match map.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::String(text)) => plan.prompts.push((key.to_owned(), text.clone())),
                Some(other) => self.shape(key, "a string", other),
            }
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

    /// `"mode": "lazy"` (seed 004; `"eager"` runs) or `"dry_run": true`.
    fn lazy(&mut self, map: &Map<String, Value>) -> bool {
        let mut lazy = false;
        match map.get("mode") {
            None | Some(Value::Null) => {}
            Some(Value::String(mode)) => match fold_name(mode).as_str() {
                "lazy" => lazy = true,
                "eager" => {}
                _ => self.issue(
                    "mode",
                    IssueKind::NotOneOf {
                        value: mode.clone(),
                        allowed: vec!["lazy".into(), "eager".into()],
                    },
                ),
            },
            Some(other) => self.shape("mode", "\"lazy\" or \"eager\"", other),
        }
        lazy | self.flag(map, &["dry_run", "dryRun"])
    }

    /// A `true`/`false` field named one of `keys` (absent or null: false).
    fn flag(&mut self, map: &Map<String, Value>, keys: &[&str]) -> bool {
        match first_of(map, keys) {
            None | Some((_, Value::Null)) => false,
            Some((_, Value::Bool(flag))) => *flag,
            Some((key, other)) => {
                self.shape(key, "true or false", other);
                false
            }
        }
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
}
