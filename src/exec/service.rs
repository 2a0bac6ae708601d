//! `execute_plan` as a service over the downstreams: validate against the current
//! catalog, run, keep the record. Used by the MCP server and by `planmux run`.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Observer, RunRecord, RunStatus, RunStore, Settings, run};
use crate::config::Config;
use crate::downstream::Downstreams;
use crate::plan::{Limits, PlanIssue, ValidatedPlan, prepare};

/// What became of a plan.
pub enum Outcome {
    /// It did not validate; nothing ran.
    Invalid(Vec<PlanIssue>),
    /// It ran; the record is also kept in the run store.
    Ran(Arc<RunRecord>),
}

/// Runs plans against the downstreams.
pub struct PlanRunner {
    downstreams: Arc<Downstreams>,
    settings: Settings,
    limits: Limits,
    max_output_chars: usize,
    /// The last runs' records.
    pub runs: RunStore,
}

impl PlanRunner {
    /// A runner with the limits of `config`.
    pub fn new(downstreams: Arc<Downstreams>, config: &Config) -> Self {
        Self {
            downstreams,
            settings: Settings::from_config(config),
            limits: Limits {
                max_plan_steps: config.proxy.max_plan_steps,
            },
            max_output_chars: config.proxy.max_output_chars,
            runs: RunStore::default(),
        }
    }

    /// Parses and validates `execute_plan`'s arguments against the current catalog.
    pub fn validate(&self, arguments: &Value) -> Result<ValidatedPlan, Vec<PlanIssue>> {
        let catalog = self.downstreams.catalog();
        prepare(arguments, catalog.tool_specs(), &self.limits)
    }

    /// Validates and runs a plan; `cancel` stops it.
    pub async fn execute(
        &self,
        arguments: &Value,
        observer: &dyn Observer,
        cancel: CancellationToken,
    ) -> Outcome {
        // Validation needs the whole catalog: wait for the servers' first start.
        self.downstreams.started().await;
        match self.validate(arguments) {
            Err(issues) => Outcome::Invalid(issues),
            Ok(plan) => Outcome::Ran(self.run(&plan, observer, cancel).await),
        }
    }

    /// Runs a validated plan and keeps its record.
    pub async fn run(
        &self,
        plan: &ValidatedPlan,
        observer: &dyn Observer,
        cancel: CancellationToken,
    ) -> Arc<RunRecord> {
        let record = Arc::new(
            run(
                plan,
                self.downstreams.clone(),
                &self.settings,
                observer,
                cancel,
            )
            .await,
        );
        self.runs.insert(record.clone());
        record
    }

    /// The lean result of a run, as the model sees it.
    pub fn result(&self, record: &RunRecord) -> Value {
        record.result(self.max_output_chars)
    }
}

/// Whether a run's result is reported with `isError: true`: when nothing it was asked
/// for succeeded.
pub fn is_error(record: &RunRecord) -> bool {
    record.status == RunStatus::Failed
}

/// The JSON Schema of `execute_plan`'s structured result.
pub fn result_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["succeeded", "partial", "failed"]},
            "outputs": {"type": "object", "description": "The value of each step asked for."},
            "steps": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {
                        "status": {"type": "string", "enum": ["succeeded", "failed", "skipped", "cancelled", "timed_out"]},
                        "duration_ms": {"type": "number"},
                        "error": {"type": "string"},
                        "reason": {"type": "string"},
                        "attempts": {"type": "integer"},
                        "warnings": {"type": "array", "items": {"type": "string"}}
                    },
                    "required": ["status"]
                }
            },
            "stats": {
                "type": "object",
                "properties": {
                    "steps": {"type": "integer"}, "succeeded": {"type": "integer"},
                    "failed": {"type": "integer"}, "skipped": {"type": "integer"},
                    "cancelled": {"type": "integer"}, "duration_ms": {"type": "number"}
                }
            },
            "run_id": {"type": "string", "description": "The full record is the resource planmux://runs/{run_id}."},
            "winner": {"type": "string"},
            "truncated": {"type": "object"},
            "stopped": {"type": "string"},
            "warnings": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["status", "outputs", "steps", "stats", "run_id"]
    })
}
