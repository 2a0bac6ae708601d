//! What a step does once everything it waits for has finished: its condition decided,
//! then its items, its value or its arguments resolved. The executor calls this on the
//! I/O thread, or on a blocking thread when a reference runs a JSONPath query.

use serde_json::Value;

use super::issue::describe_value;
use super::lenient;
use super::resolve::{Missing, Reader};
use super::template::RefSource;
use super::validated::{PlannedStep, StepKind, with_inputs};

/// The reason recorded for a step whose `when` does not hold.
pub const CONDITION_FALSE: &str = "condition false";

/// A ready step, decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Prepared {
    /// Its condition does not hold: it is skipped, which is no failure.
    Skip(String),
    /// It cannot run: a reference found nothing, its condition cannot be decided, or its
    /// items are not an array or too many.
    Fail(String),
    /// A value step's output.
    Value(Value),
    /// A call's arguments.
    Call(Value),
    /// A `foreach` step's items, each to run with [`PlannedStep::prepare_item`].
    Items(Vec<Value>),
}

impl PlannedStep {
    /// Decides the step: `lookup` returns what a finished step's output or caught error
    /// holds (the plan's inputs are supplied here). A reference that finds nothing (and
    /// gives no `default`) fails the step, saying what it looked for and what is there.
    pub fn prepare<'a>(
        &self,
        inputs: &'a Value,
        lookup: &dyn Fn(&RefSource) -> Option<&'a Value>,
    ) -> Prepared {
        let full = with_inputs(inputs, lookup);
        let reader = Reader::new(&full);
        if let Some(when) = &self.when {
            match when.decide(&reader) {
                Ok(true) => {}
                Ok(false) => return Prepared::Skip(CONDITION_FALSE.into()),
                Err(why) => {
                    return Prepared::Fail(format!("its condition cannot be decided: {why}"));
                }
            }
        }
        if let Some(foreach) = &self.foreach {
            let items = match reader.template(&foreach.items, "foreach") {
                Ok(items) => items,
                Err(missing) => return Prepared::Fail(missing.to_string()),
            };
            return match items_of(items) {
                Ok(items) if items.len() > foreach.max_items => Prepared::Fail(format!(
                    "foreach over {} items; at most {} are allowed ([proxy] max_foreach_items)",
                    items.len(),
                    foreach.max_items
                )),
                Ok(items) => Prepared::Items(items),
                Err(found) => {
                    Prepared::Fail(format!("foreach needs an array, and its items are {found}"))
                }
            };
        }
        self.outcome(self.resolve_with(&reader))
    }

    /// Resolves a `foreach` step's arguments (or value) for the item at `index`.
    pub fn prepare_item<'a>(
        &self,
        inputs: &'a Value,
        lookup: &dyn Fn(&RefSource) -> Option<&'a Value>,
        item: &'a Value,
        index: usize,
    ) -> Prepared {
        let position = Value::from(index);
        let with_item = |source: &RefSource| -> Option<&Value> {
            match source {
                RefSource::Item => Some(item),
                RefSource::Index => Some(&position),
                other => lookup(other),
            }
        };
        self.outcome(self.resolve(inputs, &with_item))
    }

    fn outcome(&self, resolved: Result<Value, Missing>) -> Prepared {
        match (resolved, self.kind) {
            (Err(missing), _) => Prepared::Fail(missing.to_string()),
            (Ok(resolved), StepKind::Call) => Prepared::Call(resolved),
            (Ok(resolved), StepKind::Value) => Prepared::Value(resolved),
        }
    }
}

/// A loop's items: an array, or text that holds a JSON array; else what they are.
fn items_of(items: Value) -> Result<Vec<Value>, String> {
    match items {
        Value::Array(items) => Ok(items),
        Value::String(text) => match lenient::strict(&text) {
            Ok(Value::Array(items)) => Ok(items),
            Ok(other) => Err(format!(
                "{} that holds {}, not an array",
                describe_value(&Value::String(text)),
                describe_value(&other)
            )),
            Err(_) => Err(format!(
                "{}, which holds no JSON array; to loop over its lines, read it with {{\"$ref\": …, \"split\": \"\\n\"}}",
                describe_value(&Value::String(text))
            )),
        },
        other => Err(describe_value(&other)),
    }
}
