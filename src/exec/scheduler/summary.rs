//! The run's record once every step has ended: each step's record, the run's status
//! and the named selections.

use std::collections::HashMap;

use serde_json::Value;

use super::{Phase, Run};
use crate::exec::record::{RunRecord, RunStatus, Selection, StepRecord, StepStatus, millis};
use crate::plan::Strategy;

impl Run<'_> {
    pub(super) fn into_record(self) -> RunRecord {
        let plan = self.plan;
        let records: Vec<StepRecord> = self
            .records
            .into_iter()
            .enumerate()
            .map(|(i, record)| {
                record.unwrap_or_else(|| StepRecord {
                    reason: Some("never became ready".into()),
                    ..StepRecord::unstarted(&plan.steps()[i])
                })
            })
            .collect();
        let winner = self.winner.map(|i| plan.steps()[i].id.to_string());
        let outputs: Vec<String> = match (&winner, plan.strategy(), plan.outputs_listed()) {
            (Some(winner), Strategy::Competitive, false) => vec![winner.clone()],
            _ => plan.outputs().iter().map(ToString::to_string).collect(),
        };
        let position: HashMap<&str, usize> = records
            .iter()
            .enumerate()
            .map(|(i, r)| (r.id.as_str(), i))
            .collect();
        // Once a race is won, the other runners' failures do not matter.
        let race_won = plan.strategy() == Strategy::Competitive && winner.is_some();
        let problem = !race_won
            && records
                .iter()
                .enumerate()
                .any(|(i, r)| r.status != StepStatus::Succeeded && !self.benign[i]);
        let asked: Vec<usize> = outputs
            .iter()
            .filter_map(|id| position.get(id.as_str()).copied())
            .filter(|&i| !self.benign[i])
            .collect();
        let succeeded = asked
            .iter()
            .filter(|&&i| records[i].status == StepStatus::Succeeded)
            .count();
        let status = if asked.is_empty() {
            if problem {
                RunStatus::Failed
            } else {
                RunStatus::Succeeded
            }
        } else if succeeded == 0 {
            RunStatus::Failed
        } else if problem || succeeded < asked.len() {
            RunStatus::Partial
        } else {
            RunStatus::Succeeded
        };
        let selections: Vec<Selection> = plan
            .resolve_selections(&self.outputs)
            .into_iter()
            .map(|(name, value, missing)| Selection {
                name,
                value,
                missing,
            })
            .collect();
        // A selection that found nothing is no success: the model did not get it.
        let missed = selections.iter().filter(|s| s.missing.is_some()).count();
        let status = match status {
            _ if missed == 0 => status,
            _ if missed == selections.len() => RunStatus::Failed,
            RunStatus::Succeeded => RunStatus::Partial,
            other => other,
        };
        RunRecord {
            selections,
            run_id: self.run_id.to_string(),
            goal: plan.goal().map(str::to_string),
            strategy: plan.strategy().as_str().to_string(),
            on_error: plan.on_error().as_str().to_string(),
            status,
            outputs,
            winner,
            stopped: match self.phase {
                Phase::Stopped { reason, .. } => Some(reason),
                _ => None,
            },
            warnings: plan
                .warnings()
                .iter()
                .map(|w| format!("{}: {}", w.location, w.message()))
                .collect(),
            prompts: plan
                .prompts()
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
            duration_ms: millis(self.started.elapsed()),
            steps: records,
        }
    }
}
