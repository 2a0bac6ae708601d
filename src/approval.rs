//! Plan approval (DESIGN.md §5): which steps of a plan need the user's yes, what the user
//! is shown, and the single-use tokens that carry a pending approval from one call to the
//! next (`approve_plan`, or a 2026-07-28 host's input-required retry).
//!
//! This module decides what to ask and remembers what was asked; the checkpoint in
//! [`crate::policy`] enforces the answer, so a path that forgets to ask fails closed.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::plan::ValidatedPlan;
use crate::policy::{Approval, Approver, Confirm, Policy, Tier};
use crate::text::clip;

/// How long a token stays good.
pub const TOKEN_TTL: Duration = Duration::from_secs(600);
/// Tokens remembered at once (used and expired ones included, so that reusing one says
/// so); the oldest are forgotten first.
const MAX_TOKENS: usize = 256;
/// Longest JSON text of one step's arguments shown for approval; longer ones are shown
/// clipped, as a string.
const MAX_ARGS_CHARS: usize = 1_000;
/// Steps listed one per line in the message a user reads (all are in `steps`).
const MAX_LISTED: usize = 30;
/// Longest arguments text on one line of that message.
const MAX_LINE_ARGS_CHARS: usize = 200;

/// A step that needs approval, as the user is shown it: its arguments as written, with
/// references unresolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalStep {
    pub id: String,
    pub tool: String,
    pub tier: Tier,
    pub args: Value,
}

/// What one plan needs approved.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The plan's goal, if it gave one.
    pub goal: Option<String>,
    /// The steps whose tier `[policy] confirm` covers, in plan order.
    pub steps: Vec<ApprovalStep>,
    /// SHA-256 of the plan's arguments as sent (hex): what a token is bound to.
    pub digest: String,
}

impl Request {
    /// What `plan` (sent as `arguments`) needs approved under `confirm`; `None` when no
    /// step needs it.
    pub fn for_plan(plan: &ValidatedPlan, arguments: &Value, confirm: Confirm) -> Option<Self> {
        let steps: Vec<ApprovalStep> = plan
            .steps()
            .iter()
            .filter(|step| confirm.covers(step.tier))
            .map(|step| {
                let mut args = match &step.written_args {
                    Value::Object(map) => map.clone(),
                    _ => Map::new(),
                };
                // Under `chained`, the previous step's output lands in an argument the
                // plan did not write: show where.
                if let Some(pipe) = &step.pipe {
                    args.insert(pipe.into.clone(), format!("$ref:{}", pipe.from).into());
                }
                ApprovalStep {
                    id: step.id.to_string(),
                    tool: step.exported.clone(),
                    tier: step.tier,
                    args: bounded(Value::Object(args)),
                }
            })
            .collect();
        (!steps.is_empty()).then(|| Request {
            goal: plan.goal().map(str::to_owned),
            steps,
            digest: digest(arguments),
        })
    }

    /// The text a user reads: the goal and each step with its tool, tier and arguments.
    pub fn message(&self) -> String {
        let mut text = String::from("planmux: approve this plan before it runs?\n");
        if let Some(goal) = &self.goal {
            let _ = writeln!(text, "Goal: {}", clip(goal, 300));
        }
        let _ = writeln!(text, "{} step(s) can change things:", self.steps.len());
        for step in self.steps.iter().take(MAX_LISTED) {
            let args = serde_json::to_string(&step.args).unwrap_or_default();
            let _ = writeln!(
                text,
                "  - {} → {} ({}): {}",
                step.id,
                step.tool,
                step.tier,
                clip(&args, MAX_LINE_ARGS_CHARS)
            );
        }
        if self.steps.len() > MAX_LISTED {
            let _ = writeln!(text, "  … and {} more", self.steps.len() - MAX_LISTED);
        }
        text.push_str("References (${…}, $ref:…) are filled in from earlier steps when the plan runs. Nothing runs unless you approve.");
        text
    }

    /// The user said yes to every step listed: the approval a run carries to the
    /// checkpoint, recorded in the audit trail.
    pub fn approve(&self, policy: &Policy, by: Approver) -> Approval {
        policy.approve(self.audited(), by)
    }

    /// The user said no (or did not answer): recorded in the audit trail.
    pub fn decline(&self, policy: &Policy, by: Approver) {
        policy.decline(self.audited(), by);
    }

    fn audited(&self) -> impl Iterator<Item = (&str, &str, Tier)> {
        self.steps
            .iter()
            .map(|s| (s.id.as_str(), s.tool.as_str(), s.tier))
    }
}

/// A step's arguments as shown: the object itself, or, past [`MAX_ARGS_CHARS`], its JSON
/// text clipped.
fn bounded(args: Value) -> Value {
    let text = serde_json::to_string(&args).unwrap_or_default();
    if text.chars().count() <= MAX_ARGS_CHARS {
        args
    } else {
        Value::String(clip(&text, MAX_ARGS_CHARS).into_owned())
    }
}

/// SHA-256 of a plan's arguments as sent, in hex.
pub fn digest(arguments: &Value) -> String {
    let bytes = serde_json::to_vec(arguments).unwrap_or_default();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Who a token was handed to: it is redeemed only the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The model, in a `needs_approval` result: redeemed with `approve_plan`.
    Model,
    /// The host, as the `requestState` of an input-required result: redeemed by the
    /// host's retry of the same `execute_plan` call.
    Host,
}

/// Why a token did not run its plan. Nothing ran in any case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error(
        "unknown approval token: planmux never issued it, or has restarted since; send the plan to execute_plan again"
    )]
    Unknown,
    #[error(
        "this approval token was already used (a token runs its plan once); send the plan to execute_plan again"
    )]
    Used,
    #[error(
        "this approval token expired {0} s ago (tokens last {ttl} s); send the plan to execute_plan again",
        ttl = TOKEN_TTL.as_secs()
    )]
    Expired(u64),
    #[error(
        "the steps do not match what approval was asked for: {0}. Repeat approval.steps exactly as execute_plan returned them"
    )]
    Mismatch(String),
    #[error("this plan is not the one approval was asked for")]
    OtherPlan,
}

struct Pending {
    request: Request,
    arguments: Value,
    channel: Channel,
    issued: Instant,
    used: bool,
}

/// The approvals asked for and not yet given, by token.
pub struct Tokens {
    pending: Mutex<HashMap<String, Pending>>,
    ttl: Duration,
}

impl Default for Tokens {
    fn default() -> Self {
        Self::with_ttl(TOKEN_TTL)
    }
}

impl Tokens {
    /// Tokens that last `ttl` (tests shorten it).
    pub fn with_ttl(ttl: Duration) -> Self {
        Self {
            pending: Mutex::new(HashMap::new()),
            ttl,
        }
    }

    /// How long a token lasts.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Remembers `request` for the plan sent as `arguments` and returns its new token.
    pub fn issue(
        &self,
        request: Request,
        arguments: Value,
        channel: Channel,
    ) -> Result<String, String> {
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).map_err(|e| format!("no randomness for a token: {e}"))?;
        let token: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let token = format!("pa_{token}");
        let mut pending = self.lock();
        if pending.len() >= MAX_TOKENS {
            let forget = 2 * self.ttl;
            pending.retain(|_, p| p.issued.elapsed() < forget);
        }
        while pending.len() >= MAX_TOKENS {
            let oldest = pending
                .iter()
                .min_by_key(|(_, p)| p.issued)
                .map(|(t, _)| t.clone());
            match oldest {
                Some(oldest) => pending.remove(&oldest),
                None => break,
            };
        }
        pending.insert(
            token.clone(),
            Pending {
                request,
                arguments,
                channel,
                issued: Instant::now(),
                used: false,
            },
        );
        Ok(token)
    }

    /// `approve_plan`: the plan behind `token`, once, when `steps` repeats what was asked.
    /// A mismatch leaves the token good, so the model can send the steps again.
    pub fn redeem_steps(&self, token: &str, steps: &Value) -> Result<(Request, Value), TokenError> {
        self.redeem(token, Channel::Model, |request, _| {
            mismatch(&request.steps, steps).map_or(Ok(()), |why| Err(TokenError::Mismatch(why)))
        })
    }

    /// A host's retry: the request behind `token`, once, when the plan it resent is the
    /// one approval was asked for (same digest).
    pub fn redeem_digest(&self, token: &str, digest: &str) -> Result<Request, TokenError> {
        self.redeem(token, Channel::Host, |request, _| {
            if request.digest == digest {
                Ok(())
            } else {
                Err(TokenError::OtherPlan)
            }
        })
        .map(|(request, _)| request)
    }

    fn redeem(
        &self,
        token: &str,
        channel: Channel,
        check: impl FnOnce(&Request, &Value) -> Result<(), TokenError>,
    ) -> Result<(Request, Value), TokenError> {
        let mut pending = self.lock();
        let entry = pending
            .get_mut(token)
            .filter(|p| p.channel == channel)
            .ok_or(TokenError::Unknown)?;
        if entry.used {
            return Err(TokenError::Used);
        }
        let age = entry.issued.elapsed();
        if age > self.ttl {
            return Err(TokenError::Expired((age - self.ttl).as_secs()));
        }
        check(&entry.request, &entry.arguments)?;
        entry.used = true;
        Ok((entry.request.clone(), std::mem::take(&mut entry.arguments)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How `given` differs from the steps approval was asked for, if it does.
fn mismatch(asked: &[ApprovalStep], given: &Value) -> Option<String> {
    let parsed;
    let given = match given {
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(value) => {
                parsed = value;
                &parsed
            }
            Err(_) => return Some("steps is a string that is not JSON".into()),
        },
        other => other,
    };
    let Value::Array(given) = given else {
        return Some("steps must be the array approval.steps".into());
    };
    if given.len() != asked.len() {
        return Some(format!(
            "approval listed {} step(s), got {}",
            asked.len(),
            given.len()
        ));
    }
    asked.iter().zip(given).find_map(|(want, got)| {
        let want_value = serde_json::to_value(want).ok()?;
        (want_value != *got).then(|| {
            let field = ["id", "tool", "tier", "args"]
                .into_iter()
                .find(|f| want_value.get(f) != got.get(f))
                .unwrap_or("id");
            format!("step '{}' differs in '{field}'", want.id)
        })
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(steps: &[(&str, &str, Tier)]) -> Request {
        Request {
            goal: Some("tidy up".into()),
            steps: steps
                .iter()
                .map(|(id, tool, tier)| ApprovalStep {
                    id: (*id).into(),
                    tool: (*tool).into(),
                    tier: *tier,
                    args: json!({"path": "${list.files[0]}"}),
                })
                .collect(),
            digest: digest(&json!({"steps": []})),
        }
    }

    fn steps_of(request: &Request) -> Value {
        serde_json::to_value(&request.steps).unwrap_or_default()
    }

    #[test]
    fn a_token_runs_its_plan_once_with_the_steps_repeated() {
        let tokens = Tokens::default();
        let asked = request(&[("w", "fs__write", Tier::Write)]);
        let steps = steps_of(&asked);
        let token = tokens
            .issue(asked.clone(), json!({"plan": 1}), Channel::Model)
            .unwrap_or_default();
        assert!(token.starts_with("pa_") && token.len() == 35, "{token}");
        assert_eq!(
            tokens.redeem_steps("pa_nope", &steps),
            Err(TokenError::Unknown)
        );
        // A host token is not the model's to redeem, and the other way round.
        assert_eq!(
            tokens.redeem_digest(&token, &asked.digest),
            Err(TokenError::Unknown)
        );
        let mut changed = steps.clone();
        changed[0]["args"]["path"] = json!("/etc/passwd");
        assert_eq!(
            tokens.redeem_steps(&token, &changed),
            Err(TokenError::Mismatch("step 'w' differs in 'args'".into()))
        );
        assert!(matches!(
            tokens.redeem_steps(&token, &json!([])),
            Err(TokenError::Mismatch(_))
        ));
        let text = serde_json::to_string(&steps).unwrap_or_default();
        let (got, arguments) = tokens
            .redeem_steps(&token, &Value::String(text))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, asked);
        assert_eq!(arguments, json!({"plan": 1}));
        assert_eq!(tokens.redeem_steps(&token, &steps), Err(TokenError::Used));
    }

    #[test]
    fn a_host_token_is_bound_to_the_plan_digest_and_expires() {
        let tokens = Tokens::with_ttl(Duration::ZERO);
        let asked = request(&[("rm", "fs__rm", Tier::Destructive)]);
        let token = tokens
            .issue(asked.clone(), Value::Null, Channel::Host)
            .unwrap_or_default();
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(
            tokens.redeem_digest(&token, &asked.digest),
            Err(TokenError::Expired(_))
        ));
        let tokens = Tokens::default();
        let token = tokens
            .issue(asked.clone(), Value::Null, Channel::Host)
            .unwrap_or_default();
        assert_eq!(
            tokens.redeem_digest(&token, &digest(&json!({"other": true}))),
            Err(TokenError::OtherPlan)
        );
        assert_eq!(tokens.redeem_digest(&token, &asked.digest), Ok(asked));
    }

    #[test]
    fn tokens_are_bounded_and_the_oldest_go_first() {
        let tokens = Tokens::default();
        let asked = request(&[("w", "fs__write", Tier::Write)]);
        let first = tokens
            .issue(asked.clone(), Value::Null, Channel::Model)
            .unwrap_or_default();
        for _ in 0..MAX_TOKENS {
            let _ = tokens.issue(asked.clone(), Value::Null, Channel::Model);
        }
        assert_eq!(tokens.lock().len(), MAX_TOKENS);
        assert_eq!(
            tokens.redeem_steps(&first, &steps_of(&asked)),
            Err(TokenError::Unknown)
        );
    }

    #[test]
    fn the_message_lists_steps_with_bounded_arguments() {
        let mut asked = request(&[("w", "fs__write", Tier::Write)]);
        asked.steps[0].args = bounded(json!({"content": "x".repeat(50_000)}));
        assert!(
            asked.steps[0]
                .args
                .as_str()
                .is_some_and(|s| s.len() < 1_100)
        );
        asked.steps = (0..100).map(|_| asked.steps[0].clone()).collect();
        let message = asked.message();
        assert!(message.contains("Goal: tidy up"), "{message}");
        assert!(message.contains("w → fs__write (write)"), "{message}");
        assert!(message.contains("… and 70 more"), "{message}");
        assert!(message.len() < 20_000, "{}", message.len());
    }
}
