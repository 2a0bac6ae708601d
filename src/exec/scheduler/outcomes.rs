//! How a unit's end is taken: its status, error and output recorded, then the plan's
//! strategy (a won race) and `on_error` applied, and the steps waiting for it released
//! or skipped.

use serde_json::Value;

use super::{Phase, Run, Unit};
use crate::exec::Observer;
use crate::exec::record::{StepRecord, StepStatus, millis};
use crate::exec::step::{Attempted, Ending};
use crate::plan::{DependencyKind, OnError, Strategy};

/// How a step ended, as the scheduler records it and applies the plan's policies.
pub(super) struct Outcome {
    pub(super) status: StepStatus,
    pub(super) error: Option<String>,
    /// The output, when it succeeded.
    pub(super) output: Option<Value>,
    /// What the record keeps as its output when it did not succeed.
    pub(super) kept: Option<Value>,
    /// What its readers get under `on_error: continue` when it did not succeed (its
    /// error text when `None`).
    pub(super) handed_on: Option<Value>,
    pub(super) attempts: u32,
    pub(super) duration_ms: Option<f64>,
}

impl Run<'_> {
    /// Takes a finished unit: records it and applies the strategy and error policy.
    pub(super) fn finish(&mut self, done: Attempted, observer: &dyn Observer) {
        let unit = Unit {
            step: done.index,
            item: done.item,
        };
        let (_, cancel_reason) = self.running.remove(&unit).unwrap_or_default();
        let server = &self.step(unit.step).server;
        if let Some(n) = self.per_server.get_mut(server) {
            *n = n.saturating_sub(1);
        }
        if let Some(k) = unit.item {
            self.finish_item(unit.step, k, done, cancel_reason, observer);
            return;
        }
        let i = unit.step;
        if let (Some(args), Some(record)) = (done.resolved, self.records[i].as_mut()) {
            record.args = args;
        }
        let duration_ms = Some(millis(done.finished - done.started));
        let (status, error, output) = match self.called(done.ending, cancel_reason.clone()) {
            Ok(ended) => ended,
            Err(Ending::Skipped(reason)) => {
                if let Some(record) = self.records[i].as_mut() {
                    record.started_ms = None;
                    record.reason = Some(reason);
                }
                self.benign[i] = true;
                self.ended(i, observer);
                self.release_dependents(i, StepStatus::Skipped, observer);
                return;
            }
            // Told to stop before its items could start (a stop, a won race): it ends
            // as a running step would.
            Err(Ending::Expand(_)) if cancel_reason.is_some() || self.phase != Phase::Open => {
                let reason = match (&cancel_reason, &self.phase) {
                    (Some(why), _) => why.clone(),
                    (None, Phase::Stopped { reason, .. }) => reason.clone(),
                    _ => "cancelled".into(),
                };
                (self.stopped_status(), Some(reason), None)
            }
            Err(Ending::Expand(items)) => {
                self.expand(i, items, observer);
                return;
            }
            Err(_) => return,
        };
        let outcome = Outcome {
            status,
            error,
            output,
            kept: None,
            handed_on: None,
            attempts: done.attempts,
            duration_ms,
        };
        self.conclude(i, outcome, observer);
    }

    /// The status, error and output of a unit that called its tool (or resolved its
    /// value); a step's own decision (skipped, or items to loop over) comes back as `Err`.
    pub(super) fn called(
        &self,
        ending: Ending,
        cancel_reason: Option<String>,
    ) -> Result<(StepStatus, Option<String>, Option<Value>), Ending> {
        Ok(match ending {
            Ending::Succeeded(value) => (StepStatus::Succeeded, None, Some(value)),
            Ending::Failed { message, .. } => (StepStatus::Failed, Some(message), None),
            Ending::TimedOut(message) => (StepStatus::TimedOut, Some(message), None),
            Ending::Cancelled => {
                let reason = cancel_reason.unwrap_or_else(|| "cancelled".into());
                (self.stopped_status(), Some(reason), None)
            }
            decided @ (Ending::Skipped(_) | Ending::Expand(_)) => return Err(decided),
        })
    }

    /// Records how step `i` ended and applies the strategy and error policy.
    pub(super) fn conclude(&mut self, i: usize, outcome: Outcome, observer: &dyn Observer) {
        let Outcome {
            status,
            error,
            output,
            kept,
            handed_on,
            attempts,
            duration_ms,
        } = outcome;
        let step = self.step(i);
        let caught = status.is_failure() && step.catches_errors();
        match (&output, status) {
            (Some(value), StepStatus::Succeeded) => {
                self.outputs.insert(step.id.clone(), value.clone());
            }
            (_, s) if s.is_failure() => {
                let text = Value::String(error.clone().unwrap_or_default());
                if caught {
                    self.errors.insert(step.id.clone(), text.clone());
                    self.benign[i] = true;
                }
                if self.plan.on_error() == OnError::Continue {
                    self.outputs
                        .insert(step.id.clone(), handed_on.unwrap_or(text));
                }
            }
            _ => {}
        }
        if let Some(record) = self.records[i].as_mut() {
            record.status = status;
            record.error = error;
            record.output = match status {
                StepStatus::Succeeded => output,
                _ => self.outputs.get(&step.id).cloned().or(kept),
            };
            record.attempts = attempts;
            record.duration_ms = duration_ms;
        }
        self.ended(i, observer);
        if status == StepStatus::Succeeded
            && self.plan.strategy() == Strategy::Competitive
            && self.winner.is_none()
        {
            self.winner = Some(i);
            self.phase = Phase::Won;
            self.halt(&format!("lost the race to '{}'", step.id), true, observer);
        }
        if status.is_failure()
            && !caught
            && self.plan.on_error() == OnError::FailFast
            && self.phase == Phase::Open
        {
            let reason = format!("fail_fast: '{}' {}", step.id, describe(status));
            self.stop(reason, StepStatus::Cancelled, observer);
        }
        self.release_dependents(i, status, observer);
    }

    /// Lets dependents of step `i` go, or skips them, according to how `i` ended.
    pub(super) fn release_dependents(
        &mut self,
        i: usize,
        status: StepStatus,
        observer: &dyn Observer,
    ) {
        let mut work = vec![(i, status)];
        while let Some((done, status)) = work.pop() {
            let id = &self.step(done).id;
            for (j, kind) in self.dependents[done].clone() {
                if self.records[j].is_some() {
                    continue;
                }
                let continue_on_error =
                    self.plan.on_error() == OnError::Continue && status.is_failure();
                let verdict = match kind {
                    DependencyKind::Sequence => Ok(()),
                    DependencyKind::Output | DependencyKind::After
                        if status == StepStatus::Succeeded || continue_on_error =>
                    {
                        Ok(())
                    }
                    DependencyKind::Error if status.is_failure() => Ok(()),
                    DependencyKind::Error if status == StepStatus::Succeeded => Err((
                        format!("'{id}' succeeded, so there is no error to read"),
                        true,
                    )),
                    _ => Err((
                        format!("dependency '{id}' {}", describe(status)),
                        self.benign[done],
                    )),
                };
                match verdict {
                    Ok(()) => {
                        self.waiting[j] -= 1;
                        if self.waiting[j] == 0 && self.phase == Phase::Open {
                            self.ready.push_back(Unit::step(j));
                        }
                    }
                    Err((reason, benign)) => {
                        self.skip(j, reason, observer);
                        self.benign[j] = benign;
                        work.push((j, StepStatus::Skipped));
                    }
                }
            }
        }
    }

    pub(super) fn skip(&mut self, i: usize, reason: String, observer: &dyn Observer) {
        let step = self.step(i);
        self.records[i] = Some(StepRecord {
            reason: Some(reason),
            ..StepRecord::unstarted(step)
        });
        self.ended(i, observer);
    }

    pub(super) fn ended(&mut self, i: usize, observer: &dyn Observer) {
        self.finished += 1;
        if let Some(record) = &self.records[i] {
            observer.step_finished(record, self.finished, self.total);
        }
    }
}

/// How a step that ended with `status` is named in the reasons of the steps it affects.
pub(super) fn describe(status: StepStatus) -> &'static str {
    match status {
        StepStatus::Succeeded => "succeeded",
        StepStatus::Failed => "failed",
        StepStatus::Skipped => "was skipped",
        StepStatus::Cancelled => "was cancelled",
        StepStatus::TimedOut => "timed out",
    }
}
