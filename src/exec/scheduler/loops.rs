//! A `foreach` step's items as units of the run: expanded when the step is decided,
//! each run, recorded and counted, and the step concluded when the last one ends (the
//! rule is in `exec::foreach`).

use serde_json::Value;

use super::outcomes::{Outcome, describe};
use super::{Phase, Run, Unit};
use crate::exec::Observer;
use crate::exec::foreach::{ItemOutcome, Loop};
use crate::exec::record::{StepStatus, millis};
use crate::exec::step::Attempted;
use crate::plan::OnError;

impl Run<'_> {
    /// A `foreach` step's items are known: each becomes a unit ready to run.
    pub(super) fn expand(&mut self, i: usize, items: Vec<Value>, observer: &dyn Observer) {
        let step = self.step(i);
        if items.is_empty() {
            let outcome = Outcome {
                status: StepStatus::Succeeded,
                error: None,
                output: Some(Value::Array(Vec::new())),
                kept: None,
                handed_on: None,
                attempts: 0,
                duration_ms: Some(0.0),
            };
            self.conclude(i, outcome, observer);
            return;
        }
        let settings_cap = step.foreach.as_ref().and_then(|f| f.concurrency);
        let n = items.len();
        self.total += n;
        self.loops
            .insert(i, Loop::new(items, settings_cap.unwrap_or(usize::MAX)));
        self.ready.extend((0..n).map(|k| Unit {
            step: i,
            item: Some(k),
        }));
    }

    /// One item of `foreach` step `i` ended.
    pub(super) fn finish_item(
        &mut self,
        i: usize,
        k: usize,
        done: Attempted,
        cancel_reason: Option<String>,
        observer: &dyn Observer,
    ) {
        // An item is never decided as a whole step is: it neither skips nor loops.
        let (status, error, output) = self
            .called(done.ending, cancel_reason)
            .unwrap_or_else(|_| (StepStatus::Failed, Some("an item cannot loop".into()), None));
        let outcome = ItemOutcome {
            status,
            error,
            output,
            attempts: done.attempts,
            duration_ms: Some(millis(done.finished - done.started)),
            resolved: done.resolved,
        };
        self.end_item(i, k, outcome, observer);
        if status.is_failure()
            && self.plan.on_error() == OnError::FailFast
            && self.phase == Phase::Open
        {
            let reason = format!(
                "fail_fast: item {k} of '{}' {}",
                self.step(i).id,
                describe(status)
            );
            self.stop(reason, StepStatus::Cancelled, observer);
        }
        self.conclude_loop_if_done(i, observer);
    }

    pub(super) fn end_item(
        &mut self,
        i: usize,
        k: usize,
        outcome: ItemOutcome,
        observer: &dyn Observer,
    ) {
        let Some(lp) = self.loops.get_mut(&i) else {
            return;
        };
        let record = lp.end(k, outcome);
        self.finished += 1;
        observer.item_finished(&self.plan.steps()[i], record, self.finished, self.total);
    }

    pub(super) fn conclude_loop_if_done(&mut self, i: usize, observer: &dyn Observer) {
        if !self.loops.get(&i).is_some_and(Loop::done) {
            return;
        }
        let Some(lp) = self.loops.remove(&i) else {
            return;
        };
        let stopped = match &self.phase {
            Phase::Stopped { status, .. } => Some(*status),
            _ => None,
        };
        let attempts = lp.attempts;
        let items = lp.records.iter().flatten().cloned().collect();
        let concluded = lp.conclude(stopped);
        let started_ms = self.records[i].as_ref().and_then(|r| r.started_ms);
        if let Some(record) = self.records[i].as_mut() {
            record.items = items;
        }
        let succeeded = concluded.status == StepStatus::Succeeded;
        let outcome = Outcome {
            status: concluded.status,
            error: concluded.error,
            output: succeeded.then(|| concluded.output.clone()),
            kept: Some(concluded.output),
            handed_on: Some(concluded.handed_on),
            attempts,
            duration_ms: started_ms.map(|start| millis(self.started.elapsed()) - start),
        };
        self.conclude(i, outcome, observer);
    }
}
