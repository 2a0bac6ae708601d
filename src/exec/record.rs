//! What a run produced: every step's status, timings and values (the run record), and the
//! lean result that goes back to the model.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::truncate::{MAX_OUTPUT_DEPTH, truncate};
use crate::text::clip;

/// Longest error, reason or warning the model reads; the run record keeps them whole.
pub const MAX_MESSAGE_CHARS: usize = 1_000;
/// Most warnings listed per step or per plan in the result.
const MAX_WARNINGS: usize = 10;

/// Messages for the model: at most [`MAX_WARNINGS`], each clipped, then how many more.
fn bounded<T: ToString>(messages: &[T]) -> Vec<String> {
    let mut out: Vec<String> = messages
        .iter()
        .take(MAX_WARNINGS)
        .map(|m| clip(&m.to_string(), MAX_MESSAGE_CHARS).into_owned())
        .collect();
    if messages.len() > MAX_WARNINGS {
        out.push(format!("… and {} more", messages.len() - MAX_WARNINGS));
    }
    out
}
use crate::plan::Missing;

/// How a step ended. Every step ends in exactly one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Succeeded,
    Failed,
    /// Never started; `reason` says why.
    Skipped,
    /// Started, then stopped by the host, `fail_fast`, or losing a `competitive` race.
    Cancelled,
    TimedOut,
}

impl StepStatus {
    /// The status as the result spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timed_out",
        }
    }

    /// Failed or timed out: the step ran and did not succeed.
    pub fn is_failure(self) -> bool {
        matches!(self, Self::Failed | Self::TimedOut)
    }
}

/// How the whole plan ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every step it was asked for succeeded, and nothing failed.
    Succeeded,
    /// Some of what it was asked for succeeded.
    Partial,
    /// Nothing it was asked for succeeded.
    Failed,
}

impl RunStatus {
    /// The status as the result spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Partial => "partial",
            Self::Failed => "failed",
        }
    }
}

/// Everything about one step of a run.
#[derive(Debug, Clone, Serialize)]
pub struct StepRecord {
    pub id: String,
    pub tool: String,
    pub server: String,
    /// What the tool can change.
    pub tier: crate::policy::Tier,
    /// What the plan said the step is for (`description`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub status: StepStatus,
    /// The error, for failed, timed-out and cancelled steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why a step was skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The arguments after references were resolved (absent when never started).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// The step's output value (for failures under `continue`, the error text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Calls made (1 + retries used); 0 when never started.
    pub attempts: u32,
    /// When it started, from the start of the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<f64>,
    /// How long it ran (all attempts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// A `foreach` step's items, in item order (their outputs are the step's output).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<ItemRecord>,
    /// The steps it waited for (what its references and `depends_on` name), in plan
    /// order: the plan's graph.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
}

/// One item of a `foreach` step.
#[derive(Debug, Clone, Serialize)]
pub struct ItemRecord {
    /// Its position among the items.
    pub index: usize,
    pub status: StepStatus,
    /// The error, or why it did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its arguments, resolved (absent for a value step, or when it never started).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
}

impl ItemRecord {
    /// The record of item `index` before it runs: skipped, nothing yet.
    pub(crate) fn unstarted(index: usize) -> Self {
        Self {
            index,
            status: StepStatus::Skipped,
            error: None,
            args: None,
            attempts: 0,
            duration_ms: None,
        }
    }
}

/// One named output selection after the run.
#[derive(Debug, Clone, Serialize)]
pub struct Selection {
    pub name: String,
    /// `None` when a step it reads did not succeed, or a reference found nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// The reference that found nothing, if one did: the selection is left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<Missing>,
}

/// The full record of a run: kept for the last runs, readable as a resource and with
/// `planmux run --record`. It never goes into the model's context unasked.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub run_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    pub strategy: String,
    pub on_error: String,
    pub status: RunStatus,
    /// The steps whose values go back to the model.
    pub outputs: Vec<String>,
    /// When the plan named selections (`outputs` as an object), what each resolved to;
    /// these go back instead of whole step outputs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub selections: Vec<Selection>,
    /// Under `competitive`: the step that won.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub winner: Option<String>,
    /// Set when the plan as a whole stopped early (timeout, cancellation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// What validation let through but the model should know (e.g. retries refused).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Seed 002's `conditionPrompt` / `aggregationPrompt`, kept for the reader: planmux
    /// decides with `when` and `foreach`, and returns the outputs unaggregated.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub prompts: Map<String, Value>,
    pub duration_ms: f64,
    /// In plan order.
    pub steps: Vec<StepRecord>,
}

impl StepRecord {
    /// A record for `step` that has not run: skipped, no reason yet, no values.
    pub(crate) fn unstarted(step: &crate::plan::PlannedStep) -> Self {
        Self {
            id: step.id.to_string(),
            tool: step.exported.clone(),
            server: step.server.clone(),
            tier: step.tier,
            description: step.description.clone(),
            status: StepStatus::Skipped,
            error: None,
            reason: None,
            args: None,
            output: None,
            attempts: 0,
            started_ms: None,
            duration_ms: None,
            items: Vec::new(),
            after: step.depends_on.iter().map(|d| d.step.to_string()).collect(),
        }
    }
}

pub(crate) fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

impl RunRecord {
    /// Counts per status.
    pub fn count(&self, status: StepStatus) -> usize {
        self.steps.iter().filter(|s| s.status == status).count()
    }

    /// A step by id.
    pub fn step(&self, id: &str) -> Option<&StepRecord> {
        self.steps.iter().find(|s| s.id == id)
    }

    /// The lean result for the model: the `outputs` values (each cut to `max_chars` and
    /// [`MAX_OUTPUT_DEPTH`] levels, saying so under `truncated`), every step's status
    /// without its value, and stats.
    pub fn result(&self, max_chars: usize) -> Value {
        let mut outputs = Map::new();
        let mut truncated = Map::new();
        let by_id: std::collections::HashMap<&str, &StepRecord> =
            self.steps.iter().map(|s| (s.id.as_str(), s)).collect();
        let values: Vec<(&String, &Value)> = if self.selections.is_empty() {
            self.outputs
                .iter()
                .filter_map(|id| {
                    let step = by_id.get(id.as_str())?;
                    let value = step
                        .output
                        .as_ref()
                        .filter(|_| step.status == StepStatus::Succeeded)?;
                    Some((id, value))
                })
                .collect()
        } else {
            self.selections
                .iter()
                .filter_map(|s| Some((&s.name, s.value.as_ref()?)))
                .collect()
        };
        for (name, value) in values {
            let (value, cut) = truncate(value, max_chars);
            if let Some(cut) = cut {
                let mut said = json!({"original_chars": cut.original, "kept_chars": cut.kept});
                if cut.too_deep {
                    said["max_depth"] = json!(MAX_OUTPUT_DEPTH);
                }
                truncated.insert(name.clone(), said);
            }
            outputs.insert(name.clone(), value);
        }
        let mut steps = Map::new();
        for step in &self.steps {
            let mut entry = Map::new();
            entry.insert("status".into(), json!(step.status.as_str()));
            if let Some(d) = step.duration_ms {
                entry.insert("duration_ms".into(), json!(d));
            }
            if let Some(e) = &step.error {
                entry.insert("error".into(), json!(clip(e, MAX_MESSAGE_CHARS)));
            }
            if let Some(r) = &step.reason {
                entry.insert("reason".into(), json!(clip(r, MAX_MESSAGE_CHARS)));
            }
            // Calls beyond one per item (or one for the step): retries happened.
            if step.attempts as usize > step.items.len().max(1) {
                entry.insert("attempts".into(), json!(step.attempts));
            }
            if !step.items.is_empty() {
                let count = |status| step.items.iter().filter(|i| i.status == status).count();
                entry.insert(
                    "items".into(),
                    json!({"total": step.items.len(), "succeeded": count(StepStatus::Succeeded)}),
                );
            }
            steps.insert(step.id.clone(), Value::Object(entry));
        }
        let mut result = json!({
            "status": self.status.as_str(),
            "outputs": outputs,
            "steps": steps,
            "stats": {
                "steps": self.steps.len(),
                "succeeded": self.count(StepStatus::Succeeded),
                "failed": self.count(StepStatus::Failed) + self.count(StepStatus::TimedOut),
                "skipped": self.count(StepStatus::Skipped),
                "cancelled": self.count(StepStatus::Cancelled),
                "duration_ms": self.duration_ms,
            },
            "run_id": self.run_id,
        });
        if let Value::Object(map) = &mut result {
            if !truncated.is_empty() {
                map.insert("truncated".into(), Value::Object(truncated));
            }
            if let Some(winner) = &self.winner {
                map.insert("winner".into(), json!(winner));
            }
            if let Some(stopped) = &self.stopped {
                map.insert("stopped".into(), json!(clip(stopped, MAX_MESSAGE_CHARS)));
            }
            let warnings = self.warnings_for_model();
            if !warnings.is_empty() {
                map.insert("warnings".into(), json!(warnings));
            }
        }
        result
    }

    /// Every warning of the run, as the model reads them (in the result and in its
    /// text): the plan's, then each named selection that found nothing; bounded.
    fn warnings_for_model(&self) -> Vec<String> {
        let warnings: Vec<String> = self
            .warnings
            .iter()
            .cloned()
            .chain(
                self.selections
                    .iter()
                    .filter_map(|s| s.missing.as_ref().map(ToString::to_string)),
            )
            .collect();
        bounded(&warnings)
    }

    /// A short text rendering of [`Self::result`], for hosts that read only text: the
    /// outputs, every warning and every step that did not succeed.
    pub fn render_text(&self, result: &Value) -> String {
        let mut out = format!(
            "plan {}: {}/{} steps succeeded in {} ms",
            self.status.as_str(),
            self.count(StepStatus::Succeeded),
            self.steps.len(),
            self.duration_ms.round()
        );
        if let Some(winner) = &self.winner {
            out.push_str(&format!(" (winner: {winner})"));
        }
        if let Some(stopped) = &self.stopped {
            out.push_str(&format!("; {stopped}"));
        }
        if let Some(Value::Object(outputs)) = result.get("outputs") {
            for (id, value) in outputs {
                let text = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                out.push_str(&format!("\n{id}: {text}"));
            }
        }
        for warning in self.warnings_for_model() {
            out.push_str(&format!("\nwarning: {warning}"));
        }
        for step in &self.steps {
            match step.status {
                StepStatus::Succeeded => {}
                StepStatus::Skipped => {
                    out.push_str(&format!(
                        "\n{} skipped: {}",
                        step.id,
                        clip(step.reason.as_deref().unwrap_or(""), MAX_MESSAGE_CHARS)
                    ));
                }
                other => {
                    out.push_str(&format!(
                        "\n{} {}: {}",
                        step.id,
                        other.as_str(),
                        clip(step.error.as_deref().unwrap_or(""), MAX_MESSAGE_CHARS)
                    ));
                }
            }
        }
        out
    }
}

/// Whether a run's result is reported with `isError: true`: when nothing it was asked
/// for succeeded.
pub fn is_error(record: &RunRecord) -> bool {
    record.status == RunStatus::Failed
}

/// The JSON Schema of `execute_plan`'s structured result: a run's result, or, when the
/// plan waits for the user's approval, `needs_approval` with the approval to relay.
pub fn result_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["succeeded", "partial", "failed", "needs_approval", "planned"]},
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
                        "items": {"type": "object", "description": "A foreach step's items: how many, and how many succeeded."}
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
            "warnings": {"type": "array", "items": {"type": "string"}},
            "approval": {
                "type": "object",
                "description": "Nothing ran: call approve_plan with this token and these steps, unchanged.",
                "properties": {
                    "token": {"type": "string"},
                    "expires_in_s": {"type": "integer"},
                    "steps": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"}, "tool": {"type": "string"},
                            "tier": {"type": "string", "enum": ["read", "write", "destructive"]},
                            "args": {},
                            "foreach": {"type": "string"},
                            "when": {"type": "string"}
                        },
                        "required": ["id", "tool", "tier", "args"]
                    }}
                },
                "required": ["token", "expires_in_s", "steps"]
            },
            "schedule": {
                "type": "object",
                "description": "A lazy plan: its levels, critical path and steps; nothing ran."
            },
            "needs_approval": {
                "type": "array",
                "description": "A lazy plan: the steps that would need the user's approval.",
                "items": {"type": "object"}
            }
        },
        "required": ["status"],
        "if": {"properties": {"status": {"const": "needs_approval"}}},
        "then": {"required": ["approval"]},
        "else": {
            "if": {"properties": {"status": {"const": "planned"}}},
            "then": {"required": ["schedule", "needs_approval"]},
            "else": {"required": ["outputs", "steps", "stats", "run_id"]}
        }
    })
}
