//! Stopping a run early: `fail_fast`, the plan's time limit or a cancel tells every
//! running unit to stop and skips the rest (`halt`); units that have not stopped within
//! their grace are abandoned. A won race halts the same way without the `Stopped` phase.

use tokio::time::Instant;

use super::{Phase, Run, Unit};
use crate::exec::Observer;
use crate::exec::foreach::{ItemOutcome, Loop};
use crate::exec::record::{StepStatus, millis};
use crate::exec::step::CANCEL_GRACE;

impl Run<'_> {
    /// How a running step that ends cancelled is recorded: timed out when the plan's
    /// time limit stopped it, cancelled otherwise.
    pub(super) fn stopped_status(&self) -> StepStatus {
        match &self.phase {
            Phase::Stopped { status, .. } => *status,
            _ => StepStatus::Cancelled,
        }
    }

    /// Stops the plan early: running steps end as `status`, the rest are skipped.
    pub(super) fn stop(&mut self, reason: String, status: StepStatus, observer: &dyn Observer) {
        self.phase = Phase::Stopped {
            reason: reason.clone(),
            status,
            since: Instant::now(),
        };
        self.halt(&reason, false, observer);
    }

    /// When the scheduler stops waiting for stopped steps.
    pub(super) fn abandon_at(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Stopped { since, .. } => Some(*since + CANCEL_GRACE * 2),
            _ => None,
        }
    }

    /// Ends every unit still running after a stop and its grace, without it.
    pub(super) fn abandon(&mut self, observer: &dyn Observer) {
        let status = self.stopped_status();
        let mut left: Vec<(Unit, Option<String>)> =
            self.running.drain().map(|(u, (_, why))| (u, why)).collect();
        left.sort_unstable_by_key(|(u, _)| (u.step, u.item));
        for (unit, why) in left {
            let reason = why.unwrap_or_else(|| "cancelled".into());
            let error = Some(format!("{reason} (it did not stop; abandoned)"));
            let i = unit.step;
            if let Some(k) = unit.item {
                let outcome = ItemOutcome {
                    status,
                    error,
                    output: None,
                    attempts: 1,
                    duration_ms: None,
                    resolved: None,
                };
                self.end_item(i, k, outcome, observer);
                self.conclude_loop_if_done(i, observer);
                continue;
            }
            if let Some(record) = self.records[i].as_mut() {
                record.status = status;
                record.error = error;
                record.duration_ms = record
                    .started_ms
                    .map(|start| millis(self.started.elapsed()) - start);
            }
            self.ended(i, observer);
        }
    }

    /// Starts nothing more: tells every running unit to stop (with `reason`), and skips
    /// every step and item not yet started.
    pub(super) fn halt(&mut self, reason: &str, benign: bool, observer: &dyn Observer) {
        for (unit, (token, why)) in self.running.iter_mut() {
            *why = Some(reason.to_string());
            self.benign[unit.step] |= benign;
            token.cancel();
        }
        self.ready.clear();
        let mut looping: Vec<usize> = self.loops.keys().copied().collect();
        looping.sort_unstable();
        for &i in &looping {
            self.benign[i] |= benign;
            let unstarted = self.loops.get(&i).map(Loop::unstarted).unwrap_or_default();
            for k in unstarted {
                let outcome = ItemOutcome {
                    status: StepStatus::Skipped,
                    error: Some(reason.to_string()),
                    output: None,
                    attempts: 0,
                    duration_ms: None,
                    resolved: None,
                };
                self.end_item(i, k, outcome, observer);
            }
        }
        for j in 0..self.records.len() {
            if self.records[j].is_none() && !self.running.contains_key(&Unit::step(j)) {
                self.skip(j, reason.to_string(), observer);
                self.benign[j] = benign;
            }
        }
        for i in looping {
            self.conclude_loop_if_done(i, observer);
        }
    }
}
