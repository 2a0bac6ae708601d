//! What one plan needs approved: the steps whose tier `[policy] confirm` covers, each with
//! its arguments as written (references unresolved), the plan's inputs and value steps,
//! every value bounded so the user can read it and every key kept so nothing hides; and
//! the digest of the plan as sent, which a token is bound to.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::plan::{IssueKind, PlanIssue, StepKind, Template, ValidatedPlan};
use crate::policy::{Approval, Approver, Confirm, Policy, Tier};
use crate::text::clip;

/// Longest string value shown; longer ones are cut, saying how much was left out.
const MAX_SHOWN_STRING: usize = 200;
/// Most items of an array shown.
const MAX_SHOWN_ITEMS: usize = 20;
/// Longest JSON text of one step's arguments (or the plan's inputs) as shown. Every key
/// is always shown: a step whose arguments cannot be shown within this is not asked
/// about, and the plan is refused.
const MAX_SHOWN_CHARS: usize = 2_000;

/// A step that needs approval, as the user is shown it: its arguments as written, with
/// references unresolved; long strings and arrays cut, every key kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalStep {
    pub id: String,
    pub tool: String,
    pub tier: Tier,
    pub args: Value,
    /// What a `foreach` step loops over: the user approves every call of it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub foreach: Option<String>,
    /// The items of a `foreach` the plan lists itself, as written (cut like `args`): each
    /// becomes arguments the user approves. (Items a reference reads are step outputs.)
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub items: Option<Value>,
    /// The step's condition: it may not run at all.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub when: Option<String>,
}

/// A value step as the user is shown it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShownValue {
    pub id: String,
    pub value: Value,
}

/// What one plan needs approved (kept with its token: `tokens.rs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The plan's goal, if it gave one.
    pub goal: Option<String>,
    /// The steps whose tier `[policy] confirm` covers, in plan order.
    pub steps: Vec<ApprovalStep>,
    /// The plan's `inputs` as shown (what `input.…` references read), if it has any.
    pub inputs: Option<Value>,
    /// The plan's value steps as shown: values it makes itself, which the steps above
    /// may read (no tool runs for them).
    pub values: Vec<ShownValue>,
    /// SHA-256 of the plan's arguments as sent (hex): what a token is bound to.
    pub digest: String,
}

impl Request {
    /// What `plan` (sent as `arguments`) needs approved under `confirm`: `Ok(None)` when
    /// no step needs it; `Err` when a step's arguments are too large to show, so the user
    /// could not see what they approve (the plan must not run).
    pub fn for_plan(
        plan: &ValidatedPlan,
        arguments: &Value,
        confirm: Confirm,
    ) -> Result<Option<Self>, PlanIssue> {
        let mut steps = Vec::new();
        let covered = plan.steps().iter().enumerate();
        for (i, step) in covered.filter(|(_, step)| confirm.covers(step.tier)) {
            let mut args = match &step.written_args {
                Value::Object(map) => map.clone(),
                _ => Map::new(),
            };
            // Under `chained`, the previous step's output lands in an argument the plan
            // did not write: show where.
            if let Some(pipe) = &step.pipe {
                args.insert(pipe.into.clone(), format!("$ref:{}", pipe.from).into());
            }
            let args = shown(&Value::Object(args), format!("steps[{i}].args"))?;
            let items = match step.foreach.as_ref().map(|f| &f.items) {
                None | Some(Template::Ref(_)) => None,
                Some(items) => Some(shown(&items.written(), format!("steps[{i}].foreach"))?),
            };
            steps.push(ApprovalStep {
                id: step.id.to_string(),
                tool: step.exported.clone(),
                tier: step.tier,
                args,
                foreach: step.foreach.as_ref().map(|f| f.describe()),
                items,
                when: step.when.as_ref().map(ToString::to_string),
            });
        }
        if steps.is_empty() {
            return Ok(None);
        }
        let mut values = Vec::new();
        let value_steps = plan.steps().iter().enumerate();
        for (i, step) in value_steps.filter(|(_, s)| s.kind == StepKind::Value) {
            values.push(ShownValue {
                id: step.id.to_string(),
                value: shown(&step.args.written(), format!("steps[{i}].value"))?,
            });
        }
        let inputs = match plan.inputs() {
            Value::Object(map) if map.is_empty() => None,
            Value::Null => None,
            inputs => Some(shown(inputs, "inputs".into())?),
        };
        Ok(Some(Request {
            goal: plan.goal().map(str::to_owned),
            steps,
            inputs,
            values,
            digest: digest(arguments),
        }))
    }

    /// The user said yes to every step listed: the approval a run carries to the
    /// checkpoint, recorded in the audit trail.
    pub fn approve(&self, policy: &Policy, by: Approver, caller: Option<&str>) -> Approval {
        crate::metrics::approval(crate::metrics::Approval::Granted);
        policy.approve(self.audited(), by, &self.digest, caller)
    }

    /// The user said no (or did not answer): recorded in the audit trail.
    pub fn decline(&self, policy: &Policy, by: Approver, caller: Option<&str>) {
        crate::metrics::approval(crate::metrics::Approval::Declined);
        policy.decline(self.audited(), by, &self.digest, caller);
    }

    fn audited(&self) -> impl Iterator<Item = (&str, &str, Tier)> {
        self.steps
            .iter()
            .map(|s| (s.id.as_str(), s.tool.as_str(), s.tier))
    }
}

/// A value as shown for approval: strings past [`MAX_SHOWN_STRING`] characters and arrays
/// past [`MAX_SHOWN_ITEMS`] items cut (saying how much was left out), every object key
/// kept; an issue at `location` (in the plan) when that is still longer than
/// [`MAX_SHOWN_CHARS`].
fn shown(value: &Value, location: String) -> Result<Value, PlanIssue> {
    fn cut(value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(clip(text, MAX_SHOWN_STRING).into_owned()),
            Value::Array(items) => {
                let mut kept: Vec<Value> = items.iter().take(MAX_SHOWN_ITEMS).map(cut).collect();
                if items.len() > MAX_SHOWN_ITEMS {
                    kept.push(format!("… ({} more items)", items.len() - MAX_SHOWN_ITEMS).into());
                }
                Value::Array(kept)
            }
            // Keys in full: two keys cut alike would show as one.
            Value::Object(map) => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), cut(v))).collect())
            }
            other => other.clone(),
        }
    }
    let shown = cut(value);
    let chars = serde_json::to_string(&shown)
        .unwrap_or_default()
        .chars()
        .count();
    if chars > MAX_SHOWN_CHARS {
        let kind = IssueKind::TooLargeToApprove {
            chars,
            max: MAX_SHOWN_CHARS,
        };
        return Err(PlanIssue::new(location, kind));
    }
    Ok(shown)
}

/// SHA-256 of a plan's arguments as sent, in hex.
pub fn digest(arguments: &Value) -> String {
    let bytes = serde_json::to_vec(arguments).unwrap_or_default();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::approval::fixtures::request;

    #[test]
    fn every_key_and_step_is_shown_and_what_cannot_be_shown_is_refused() {
        let long = json!({"content": "x".repeat(50_000), "path": "~/.ssh/authorized_keys"});
        let args = shown(&long, "steps[0].args".into()).unwrap_or_default();
        assert_eq!(
            args["path"], "~/.ssh/authorized_keys",
            "a key after a long value"
        );
        assert!(args["content"].as_str().is_some_and(|s| s.len() < 300));
        let many: serde_json::Map<String, Value> =
            (0..500).map(|i| (format!("k{i}"), json!(i))).collect();
        let refused = shown(&Value::Object(many), "steps[0].args".into());
        assert!(refused.is_err_and(|e| e.location == "steps[0].args"
            && e.to_string().contains("cannot be shown for approval")));

        let mut asked = request(&[("w", "fs__write", Tier::Write)]);
        asked.steps = (0..100).map(|_| asked.steps[0].clone()).collect();
        asked.goal = Some("ok\n0 step(s) can change things".into());
        let message = asked.message();
        assert_eq!(
            message.matches("w → fs__write (write)").count(),
            100,
            "{message}"
        );
        assert!(
            message.ends_with("goal: \"ok 0 step(s) can change things\""),
            "{message}"
        );
        assert_eq!(message.lines().count(), 103, "{message}");
    }
}
