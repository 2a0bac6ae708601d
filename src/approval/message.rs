//! The text a user reads before a plan runs: every step that can change things with its
//! tool, tier and arguments, the inputs and values the steps read, then the model's stated
//! goal, quoted. Nothing the model wrote can forge a line of it.

use std::fmt::Write as _;

use super::request::Request;
use crate::text::clip;

impl Request {
    /// The text a user reads: every step with its tool, tier and arguments, the inputs,
    /// then the goal, quoted, as the model wrote it.
    pub fn message(&self) -> String {
        let mut text = format!(
            "planmux: approve this plan before it runs? {} step(s) can change things:\n",
            self.steps.len()
        );
        for step in &self.steps {
            let args = serde_json::to_string(&step.args).unwrap_or_default();
            let mut how = String::new();
            match (&step.items, &step.foreach) {
                (Some(items), _) => {
                    let items = serde_json::to_string(items).unwrap_or_default();
                    let _ = write!(how, ", once per item of {items}");
                }
                (None, Some(over)) => {
                    let _ = write!(how, ", once per item of {}", printable(over));
                }
                (None, None) => {}
            }
            if let Some(when) = &step.when {
                let _ = write!(how, ", only when {}", printable(when));
            }
            let _ = writeln!(
                text,
                "  - {} → {} ({}){how}: {args}",
                printable(&step.id),
                step.tool,
                step.tier,
            );
        }
        if let Some(inputs) = &self.inputs {
            let inputs = serde_json::to_string(inputs).unwrap_or_default();
            let _ = writeln!(text, "Inputs (what input.… reads): {inputs}");
        }
        for value in &self.values {
            let shown = serde_json::to_string(&value.value).unwrap_or_default();
            let _ = writeln!(
                text,
                "Value {} (made by the plan, no tool; $ref:{} reads it): {shown}",
                printable(&value.id),
                printable(&value.id)
            );
        }
        text.push_str("References (${…}, $ref:…) are filled in from earlier steps when the plan runs. Nothing runs unless you approve.");
        if let Some(goal) = &self.goal {
            let _ = write!(
                text,
                "\nThe model's stated goal: \"{}\"",
                clip(&printable(goal), 300)
            );
        }
        text
    }
}

/// Text on one line: control characters (newlines included) become spaces, so nothing
/// the model wrote can forge lines of the approval text.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::approval::fixtures::{request, steps_of};
    use crate::approval::tokens::{Channel, TokenError, Tokens};
    use crate::policy::Tier;

    #[tokio::test]
    async fn a_loop_and_a_condition_are_shown_with_their_step() {
        let mut asked = request(&[("each", "fs__write", Tier::Write)]);
        asked.steps[0].foreach = Some("list.files, 2 at a time".into());
        asked.steps[0].when = Some("list.count\ngt 0".into());
        let message = asked.message();
        assert!(
            message.contains(
                "each → fs__write (write), once per item of list.files, 2 at a time, only when list.count gt 0: "
            ),
            "{message}"
        );
        // The model repeats them with the steps, like the arguments.
        let tokens = Tokens::default();
        let token = tokens
            .issue(asked.clone(), Value::Null, Channel::Model, None)
            .await
            .unwrap_or_default();
        let mut changed = steps_of(&asked);
        changed[0]["foreach"] = json!("other.files");
        assert!(matches!(
            tokens.redeem_steps(&token, &changed, None, None).await,
            Err(TokenError::Mismatch(_))
        ));
        assert!(
            tokens
                .redeem_steps(&token, &steps_of(&asked), None, None)
                .await
                .is_ok()
        );
    }
}
