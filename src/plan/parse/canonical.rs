//! Writing a parsed plan back out in the canonical form of docs/plan-language.md,
//! whatever dialect it came in: for records, `planmux validate`, and tests that pin
//! what each seed dialect means.

use serde_json::{Map, Value, json};

use super::plan::{Plan, Step};
use crate::plan::condition::Condition;
use crate::plan::refs::{RawRef, RawRoot, format_path};
use crate::plan::template::{Template, Writer};
use crate::plan::text_form::TextForm;

impl RawRef {
    /// The reference in canonical text: `STEP.PATH`, `steps[N].PATH` or `input.PATH`
    /// (state slots keep their seed form, `†state.slot.PATH`).
    pub fn canonical(&self) -> String {
        let root = match &self.root {
            RawRoot::Step(id) => id.clone(),
            RawRoot::Index(n) => format!("steps[{n}]"),
            RawRoot::Input => "input".to_owned(),
            RawRoot::State(slot) => format!("†state.{slot}"),
            RawRoot::Item => "item".to_owned(),
            RawRoot::ItemIndex => "index".to_owned(),
        };
        format!("{root}{}", format_path(&self.path))
    }

    fn whole_value(&self) -> Value {
        let body = self.canonical();
        if matches!(self.root, RawRoot::State(_)) {
            return Value::String(body);
        }
        if self.query.is_none() && self.form.is_none() && self.default.is_none() {
            return Value::String(format!("$ref:{body}"));
        }
        let mut object = Map::new();
        object.insert("$ref".into(), Value::String(body));
        if let Some(query) = &self.query {
            object.insert("jsonpath".into(), json!(query.as_str()));
        }
        match &self.form {
            Some(TextForm::Json) => object.insert("parse".into(), json!("json")),
            Some(TextForm::Split(sep)) => object.insert("split".into(), json!(sep)),
            Some(TextForm::Match(re)) => object.insert("match".into(), json!(re.as_str())),
            None => None,
        };
        if let Some(default) = &self.default {
            object.insert("default".into(), Value::clone(default));
        }
        Value::Object(object)
    }
}

impl Template<RawRef> {
    /// The template as JSON in canonical syntax: whole references as `"$ref:…"` (or
    /// the object form when they carry a JSONPath), spliced ones as `${…}`, and literal
    /// text with `$${` escapes where it needs them.
    pub fn to_canonical(&self) -> Value {
        self.to_json(&Writer {
            literal: &escape_value,
            text: &escape_text,
            whole: &RawRef::whole_value,
            spliced: &|r| format!("${{{}}}", r.canonical()),
        })
    }
}

/// Escapes literal text so that it reads back as the same text.
fn escape_text(text: &str) -> String {
    let text = text.replace("${", "$${").replace("$<", "$$<");
    match text.strip_prefix("$ref:") {
        Some(rest) => format!("$$ref:{rest}"),
        None => text,
    }
}

fn escape_value(value: &Value) -> Value {
    match value {
        Value::String(text) => Value::String(escape_text(text)),
        Value::Array(items) => Value::Array(items.iter().map(escape_value).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), escape_value(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

impl Condition<RawRef> {
    /// The condition in canonical syntax.
    pub fn to_canonical(&self) -> Value {
        match self {
            Condition::Constant(b) => Value::Bool(*b),
            Condition::Truthy(r) => r.whole_value(),
            Condition::Compare {
                subject,
                op,
                operand,
            } => {
                let mut map = match subject.whole_value() {
                    Value::Object(map) => map,
                    other => {
                        let body = other.as_str().unwrap_or_default();
                        let body = body.strip_prefix("$ref:").unwrap_or(body);
                        Map::from_iter([("$ref".to_owned(), Value::String(body.to_owned()))])
                    }
                };
                map.insert(op.name().into(), operand.to_canonical());
                Value::Object(map)
            }
            Condition::All(parts) => {
                json!({"all": parts.iter().map(Condition::to_canonical).collect::<Vec<_>>()})
            }
            Condition::Any(parts) => {
                json!({"any": parts.iter().map(Condition::to_canonical).collect::<Vec<_>>()})
            }
            Condition::Not(inner) => json!({"not": inner.to_canonical()}),
        }
    }
}

impl Step {
    /// The step in canonical form; fields at their defaults are left out.
    pub fn to_canonical(&self) -> Value {
        let mut map = Map::new();
        map.insert("id".into(), Value::String(self.id.clone()));
        if let Some(when) = &self.when {
            map.insert("when".into(), when.to_canonical());
        }
        if let Some(items) = &self.foreach {
            map.insert("foreach".into(), items.to_canonical());
        }
        if let Some(n) = self.concurrency {
            map.insert("concurrency".into(), json!(n));
        }
        if let Some(value) = &self.value {
            map.insert("value".into(), value.to_canonical());
            return Value::Object(map);
        }
        map.insert("tool".into(), Value::String(self.tool.clone()));
        if let Some(server) = &self.server {
            map.insert("server".into(), Value::String(server.clone()));
        }
        map.insert("args".into(), self.args.to_canonical());
        if !self.depends_on.is_empty() {
            map.insert("depends_on".into(), json!(self.depends_on));
        }
        if let Some(ms) = self.timeout_ms {
            map.insert("timeout_ms".into(), json!(ms));
        }
        if self.retries > 0 {
            map.insert("retries".into(), json!(self.retries));
        }
        if self.retry_unsafe {
            map.insert("retry_unsafe".into(), json!(true));
        }
        if let Some(pipe) = &self.pipe_to {
            map.insert("pipe_to".into(), json!(pipe));
        }
        if let Some(slots) = &self.output_slots {
            let path = match &slots.error {
                Some(error) => format!("†state.{} || †state.{error}", slots.success),
                None => format!("†state.{}", slots.success),
            };
            map.insert("output_path".into(), Value::String(path));
        }
        Value::Object(map)
    }
}

impl Plan {
    /// The plan in canonical form (strategy and on_error always written out).
    pub fn to_canonical(&self) -> Value {
        let mut map = Map::new();
        if let Some(goal) = &self.goal {
            map.insert("goal".into(), Value::String(goal.clone()));
        }
        map.insert("strategy".into(), json!(self.strategy.as_str()));
        map.insert(
            "steps".into(),
            Value::Array(self.steps.iter().map(Step::to_canonical).collect()),
        );
        if !self.selections.is_empty() {
            let named: serde_json::Map<String, Value> = self
                .selections
                .iter()
                .map(|(name, template)| (name.clone(), template.to_canonical()))
                .collect();
            map.insert("outputs".into(), Value::Object(named));
        } else if let Some(outputs) = &self.outputs {
            map.insert("outputs".into(), json!(outputs));
        }
        map.insert("on_error".into(), json!(self.on_error.as_str()));
        if self.inputs.as_object().is_some_and(|m| !m.is_empty()) {
            map.insert("inputs".into(), self.inputs.clone());
        }
        if let Some(ms) = self.timeout_ms {
            map.insert("timeout_ms".into(), json!(ms));
        }
        if self.lazy {
            map.insert("mode".into(), json!("lazy"));
        }
        if self.as_task {
            map.insert("as_task".into(), json!(true));
        }
        for (key, text) in &self.prompts {
            map.insert(key.clone(), json!(text));
        }
        Value::Object(map)
    }
}
