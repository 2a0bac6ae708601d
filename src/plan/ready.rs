//! What a step does once everything it waits for has finished: its condition decided,
//! then its items, its value or its arguments resolved. The executor calls this on the
//! I/O thread, or on a blocking thread when a reference runs a JSONPath query.

use serde_json::Value;

use super::issue::describe_value;
use super::resolve::ResolveWarning;
use super::template::RefSource;
use super::validated::{PlannedStep, StepKind, with_inputs};

/// The reason recorded for a step whose `when` does not hold.
pub const CONDITION_FALSE: &str = "condition false";

/// A ready step, decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Prepared {
    /// Its condition does not hold: it is skipped, which is no failure.
    Skip(String),
    /// It cannot run: its condition cannot be decided, or its items are not an array
    /// or too many.
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
    /// holds (the plan's inputs are supplied here). References that find nothing become
    /// `null`, each with a warning.
    pub fn prepare<'a>(
        &self,
        inputs: &'a Value,
        lookup: &dyn Fn(&RefSource) -> Option<&'a Value>,
    ) -> (Prepared, Vec<ResolveWarning>) {
        let full = with_inputs(inputs, lookup);
        let mut warnings = Vec::new();
        if let Some(when) = &self.when {
            match when.holds(&full, &mut warnings) {
                Ok(true) => {}
                Ok(false) => return (Prepared::Skip(CONDITION_FALSE.into()), warnings),
                Err(why) => {
                    let why = format!("its condition cannot be decided: {why}");
                    return (Prepared::Fail(why), warnings);
                }
            }
        }
        if let Some(foreach) = &self.foreach {
            let items = foreach.items.resolve(&full, &mut warnings);
            let prepared = match items {
                Value::Array(items) if items.len() > foreach.max_items => Prepared::Fail(format!(
                    "foreach over {} items; at most {} are allowed ([proxy] max_foreach_items)",
                    items.len(),
                    foreach.max_items
                )),
                Value::Array(items) => Prepared::Items(items),
                other => Prepared::Fail(format!(
                    "foreach needs an array, and its items are {}",
                    describe_value(&other)
                )),
            };
            return (prepared, warnings);
        }
        let (args, more) = self.resolve(inputs, lookup);
        warnings.extend(more);
        (self.outcome(args), warnings)
    }

    /// Resolves a `foreach` step's arguments (or value) for the item at `index`.
    pub fn prepare_item<'a>(
        &self,
        inputs: &'a Value,
        lookup: &dyn Fn(&RefSource) -> Option<&'a Value>,
        item: &'a Value,
        index: usize,
    ) -> (Prepared, Vec<ResolveWarning>) {
        let position = Value::from(index);
        let with_item = |source: &RefSource| -> Option<&Value> {
            match source {
                RefSource::Item => Some(item),
                RefSource::Index => Some(&position),
                other => lookup(other),
            }
        };
        let (args, warnings) = self.resolve(inputs, &with_item);
        (self.outcome(args), warnings)
    }

    fn outcome(&self, resolved: Value) -> Prepared {
        match self.kind {
            StepKind::Call => Prepared::Call(resolved),
            StepKind::Value => Prepared::Value(resolved),
        }
    }
}
