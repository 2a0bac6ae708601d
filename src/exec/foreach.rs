//! A `foreach` step's loop: its items, which have started and how each ended, and the
//! step's outcome once every item has ended.
//!
//! The rule for partial failure (docs/plan-language.md, "Loops"): a `foreach` step
//! succeeds when every item succeeds, and its output is the array of the items' outputs
//! in item order. When an item fails, the step fails with an error that counts and names
//! the failed items; its record keeps every item's outcome and the outputs that did come
//! back. What that does to the rest of the plan is the plan's `on_error`:
//! - `fail_forward`: every item still runs; the step's readers are skipped.
//! - `fail_fast`: the first failed item cancels the items still running and stops the
//!   plan, as any failed step does.
//! - `continue`: every item runs; the readers get the array with each failed item's error
//!   text in its place.
//!
//! When the plan is stopped (cancelled, timed out, a race won), unstarted items are
//! skipped and running ones cancelled, and the step ends as a running step would.

use serde_json::Value;

use super::record::{ItemRecord, StepStatus};

/// Failed items named in a `foreach` step's error; the record has them all.
const NAMED_FAILURES: usize = 3;

/// The loop of one `foreach` step, while its items run.
#[derive(Debug)]
pub(super) struct Loop {
    /// The items, in order.
    pub items: Vec<Value>,
    /// How many items may run at once.
    pub concurrency: usize,
    /// Items running now.
    pub running: usize,
    /// Each item's record, from when it starts (`None`: not started).
    pub records: Vec<Option<ItemRecord>>,
    /// Each item's output (`Null` until it succeeds).
    pub outputs: Vec<Value>,
    /// Items that have ended.
    pub ended: usize,
    /// Calls made over all items.
    pub attempts: u32,
}

/// How a `foreach` step ended, once all its items have.
#[derive(Debug)]
pub(super) struct Concluded {
    pub status: StepStatus,
    pub error: Option<String>,
    /// Every item's output, in order (`null` where an item did not succeed).
    pub output: Value,
    /// What readers get under `on_error: continue`: the outputs with each failed item's
    /// error text in its place.
    pub handed_on: Value,
}

impl Loop {
    pub fn new(items: Vec<Value>, concurrency: usize) -> Self {
        let n = items.len();
        Self {
            items,
            concurrency: concurrency.max(1),
            running: 0,
            records: vec![None; n],
            outputs: vec![Value::Null; n],
            ended: 0,
            attempts: 0,
        }
    }

    /// Whether another item may start now.
    pub fn has_room(&self) -> bool {
        self.running < self.concurrency
    }

    /// Every item has ended.
    pub fn done(&self) -> bool {
        self.ended == self.items.len() && self.running == 0
    }

    /// Item `k` starts, with the arguments resolved so far.
    pub fn start(&mut self, k: usize, args: Option<Value>) {
        self.running += 1;
        self.records[k] = Some(ItemRecord {
            args,
            ..ItemRecord::unstarted(k)
        });
    }

    /// Item `k` ended (or will never start): its record is updated in place and
    /// returned.
    pub fn end(&mut self, k: usize, outcome: ItemOutcome) -> &ItemRecord {
        if self.records[k].is_some() {
            self.running = self.running.saturating_sub(1);
        }
        self.ended += 1;
        self.attempts += outcome.attempts;
        if let Some(value) = outcome.output {
            self.outputs[k] = value;
        }
        let record = self.records[k].get_or_insert_with(|| ItemRecord::unstarted(k));
        record.status = outcome.status;
        record.error = outcome.error;
        record.attempts = outcome.attempts;
        record.duration_ms = outcome.duration_ms;
        if let Some(args) = outcome.resolved {
            record.args = args;
        }
        record
    }

    /// The items that have not started: they will not, and end skipped with `reason`.
    pub fn unstarted(&self) -> Vec<usize> {
        (0..self.items.len())
            .filter(|k| self.records[*k].is_none())
            .collect()
    }

    /// The step's outcome. `stopped` is how the plan's stop ends a running step, when
    /// the plan was stopped.
    pub fn conclude(self, stopped: Option<StepStatus>) -> Concluded {
        let records: Vec<ItemRecord> = self.records.into_iter().flatten().collect();
        let failed: Vec<&ItemRecord> = records
            .iter()
            .filter(|r| r.status != StepStatus::Succeeded)
            .collect();
        let mut handed_on = self.outputs.clone();
        for record in &failed {
            let text = record
                .error
                .clone()
                .unwrap_or_else(|| record.status.as_str().into());
            handed_on[record.index] = Value::String(text);
        }
        let output = Value::Array(self.outputs);
        if failed.is_empty() {
            return Concluded {
                status: StepStatus::Succeeded,
                error: None,
                handed_on: output.clone(),
                output,
            };
        }
        // An item that failed makes the step fail, even when its failure stopped the
        // plan (`fail_fast`); otherwise a stop ends the step as it ends running steps.
        let status = if failed.iter().any(|r| r.status == StepStatus::Failed) {
            StepStatus::Failed
        } else if let Some(status) = stopped {
            status
        } else if failed.iter().any(|r| r.status.is_failure()) {
            StepStatus::Failed
        } else {
            StepStatus::Cancelled
        };
        let mut named: Vec<String> = failed
            .iter()
            .take(NAMED_FAILURES)
            .map(|r| {
                let why = r.error.as_deref().unwrap_or(r.status.as_str());
                format!("item {}: {why}", r.index)
            })
            .collect();
        if failed.len() > NAMED_FAILURES {
            named.push(format!("and {} more", failed.len() - NAMED_FAILURES));
        }
        let error = format!(
            "{} of {} items did not succeed: {}",
            failed.len(),
            records.len().max(failed.len()),
            named.join("; ")
        );
        Concluded {
            status,
            error: Some(error),
            output,
            handed_on: Value::Array(handed_on),
        }
    }
}

/// How one item ended.
#[derive(Debug)]
pub(super) struct ItemOutcome {
    pub status: StepStatus,
    pub error: Option<String>,
    pub output: Option<Value>,
    pub attempts: u32,
    pub duration_ms: Option<f64>,
    /// Arguments resolved in the item's task (deferred ones), for the record.
    pub resolved: Option<Option<Value>>,
}
