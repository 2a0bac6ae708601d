//! Plan approval (DESIGN.md §5): which steps of a plan need the user's yes, what the user
//! is shown, and the single-use tokens that carry a pending approval from one call to the
//! next (`approve_plan`, or a 2026-07-28 host's input-required retry).
//!
//! This module decides what to ask and remembers what was asked; the checkpoint in
//! [`crate::policy`] enforces the answer, so a path that forgets to ask fails closed.

mod message;
mod request;
mod tokens;

pub use request::Request;
#[cfg(test)]
pub(crate) use request::{ApprovalStep, digest};
pub use tokens::{Channel, Tokens, Waiting};

/// The tool that runs a plan the user approved through the model (DESIGN.md §5).
pub const APPROVE_PLAN_TOOL: &str = "approve_plan";

/// Requests as the tests of each part build them.
#[cfg(test)]
mod fixtures {
    use serde_json::{Value, json};

    use super::{ApprovalStep, Request, digest};
    use crate::policy::Tier;

    /// A request asking about `steps` (id, tool, tier), each with the same arguments.
    pub(super) fn request(steps: &[(&str, &str, Tier)]) -> Request {
        Request {
            goal: Some("tidy up".into()),
            steps: steps
                .iter()
                .map(|(id, tool, tier)| ApprovalStep {
                    id: (*id).into(),
                    tool: (*tool).into(),
                    tier: *tier,
                    args: json!({"path": "${list.files[0]}", "mode": 420.0}),
                    foreach: None,
                    items: None,
                    when: None,
                })
                .collect(),
            inputs: None,
            values: Vec::new(),
            digest: digest(&json!({"steps": []})),
        }
    }

    /// The steps as the model repeats them to `approve_plan`.
    pub(super) fn steps_of(request: &Request) -> Value {
        serde_json::to_value(&request.steps).unwrap_or_default()
    }
}
