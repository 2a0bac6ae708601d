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

use crate::plan::{IssueKind, PlanIssue, StepKind, Template, ValidatedPlan};
use crate::policy::{Approval, Approver, Confirm, Policy, Tier};
use crate::text::clip;

/// The tool that runs a plan the user approved through the model (DESIGN.md §5).
pub const APPROVE_PLAN_TOOL: &str = "approve_plan";

/// How long a token stays good.
pub const TOKEN_TTL: Duration = Duration::from_secs(600);
/// Tokens remembered at once (used and expired ones included, so that reusing one says
/// so); the oldest are forgotten first.
const MAX_TOKENS: usize = 256;
/// Plan arguments kept for unredeemed tokens, in bytes; the oldest go first past it.
const MAX_KEPT_BYTES: usize = 64 << 20;
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
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShownValue {
    pub id: String,
    pub value: Value,
}

/// What one plan needs approved.
#[derive(Debug, Clone, PartialEq)]
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

    /// The user said yes to every step listed: the approval a run carries to the
    /// checkpoint, recorded in the audit trail.
    pub fn approve(&self, policy: &Policy, by: Approver) -> Approval {
        policy.approve(self.audited(), by, &self.digest)
    }

    /// The user said no (or did not answer): recorded in the audit trail.
    pub fn decline(&self, policy: &Policy, by: Approver) {
        policy.decline(self.audited(), by, &self.digest);
    }

    fn audited(&self) -> impl Iterator<Item = (&str, &str, Tier)> {
        self.steps
            .iter()
            .map(|s| (s.id.as_str(), s.tool.as_str(), s.tier))
    }
}

/// Text on one line: control characters (newlines included) become spaces, so nothing
/// the model wrote can forge lines of the approval text.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
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
    /// The size of `arguments` as JSON, counted against [`MAX_KEPT_BYTES`].
    bytes: usize,
    channel: Channel,
    issued: Instant,
    used: bool,
    /// The session it was issued to (see [`Tokens::issue`]).
    owner: Option<u64>,
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

    /// Remembers `request` for the plan sent as `arguments` and returns its new token,
    /// redeemable only in the session `owner` (`None`: a request that has none, such as
    /// a stateless HTTP request).
    pub fn issue(
        &self,
        request: Request,
        arguments: Value,
        channel: Channel,
        owner: Option<u64>,
    ) -> Result<String, String> {
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).map_err(|e| format!("no randomness for a token: {e}"))?;
        let token: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let token = format!("pa_{token}");
        let bytes = serde_json::to_vec(&arguments).map_or(0, |v| v.len());
        let mut pending = self.lock();
        if pending.len() >= MAX_TOKENS {
            let forget = 2 * self.ttl;
            pending.retain(|_, p| p.issued.elapsed() < forget);
        }
        let kept = |pending: &HashMap<String, Pending>| -> usize {
            pending.values().map(|p| p.bytes).sum::<usize>() + bytes
        };
        while pending.len() >= MAX_TOKENS
            || (!pending.is_empty() && kept(&pending) > MAX_KEPT_BYTES)
        {
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
                bytes,
                channel,
                issued: Instant::now(),
                used: false,
                owner,
            },
        );
        Ok(token)
    }

    /// `approve_plan`: the plan behind `token`, once, when `steps` (and `inputs`, when the
    /// plan has any) repeat what was asked. A mismatch leaves the token good, so the model
    /// can send them again.
    pub fn redeem_steps(
        &self,
        token: &str,
        steps: &Value,
        inputs: Option<&Value>,
        owner: Option<u64>,
    ) -> Result<(Request, Value), TokenError> {
        self.redeem(token, Channel::Model, owner, |request, _| {
            if let Some(why) = mismatch(&request.steps, steps) {
                return Err(TokenError::Mismatch(why));
            }
            let same_inputs = match (&request.inputs, inputs) {
                (None, None) => true,
                (Some(want), Some(got)) => same(want, parsed(got).as_ref().unwrap_or(got)),
                _ => false,
            };
            if !same_inputs {
                return Err(TokenError::Mismatch(
                    "'inputs' differs from approval.inputs".into(),
                ));
            }
            Ok(())
        })
    }

    /// A host's retry: the request behind `token`, once, when the plan it resent is the
    /// one approval was asked for (same digest).
    pub fn redeem_digest(
        &self,
        token: &str,
        digest: &str,
        owner: Option<u64>,
    ) -> Result<Request, TokenError> {
        self.redeem(token, Channel::Host, owner, |request, _| {
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
        owner: Option<u64>,
        check: impl FnOnce(&Request, &Value) -> Result<(), TokenError>,
    ) -> Result<(Request, Value), TokenError> {
        let mut pending = self.lock();
        // Another session's token is as unknown here as a made-up one.
        let entry = pending
            .get_mut(token)
            .filter(|p| p.channel == channel && p.owner == owner)
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

/// A value a model may have sent as JSON text instead of JSON: the parsed value.
fn parsed(value: &Value) -> Option<Value> {
    match value {
        Value::String(text) => serde_json::from_str(text).ok(),
        _ => None,
    }
}

/// JSON equality with numbers compared by value: a host that writes `80.0` back as `80`
/// (as JavaScript does) still repeats the same steps.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// How `given` differs from the steps approval was asked for, if it does.
fn mismatch(asked: &[ApprovalStep], given: &Value) -> Option<String> {
    let text = parsed(given);
    let given = match (given, &text) {
        (Value::String(_), None) => return Some("steps is a string that is not JSON".into()),
        (_, Some(value)) => value,
        (given, None) => given,
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
        (!same(&want_value, got)).then(|| {
            let field = ["id", "tool", "tier", "args"]
                .into_iter()
                .find(|f| match (want_value.get(f), got.get(f)) {
                    (Some(a), Some(b)) => !same(a, b),
                    (a, b) => a != b,
                })
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

    fn steps_of(request: &Request) -> Value {
        serde_json::to_value(&request.steps).unwrap_or_default()
    }

    #[test]
    fn a_token_runs_its_plan_once_with_the_steps_repeated() {
        let tokens = Tokens::default();
        let asked = request(&[("w", "fs__write", Tier::Write)]);
        let steps = steps_of(&asked);
        let token = tokens
            .issue(asked.clone(), json!({"plan": 1}), Channel::Model, None)
            .unwrap_or_default();
        assert!(token.starts_with("pa_") && token.len() == 35, "{token}");
        assert_eq!(
            tokens.redeem_steps("pa_nope", &steps, None, None),
            Err(TokenError::Unknown)
        );
        // A host token is not the model's to redeem, and the other way round.
        assert_eq!(
            tokens.redeem_digest(&token, &asked.digest, None),
            Err(TokenError::Unknown)
        );
        let mut changed = steps.clone();
        changed[0]["args"]["path"] = json!("/etc/passwd");
        assert_eq!(
            tokens.redeem_steps(&token, &changed, None, None),
            Err(TokenError::Mismatch("step 'w' differs in 'args'".into()))
        );
        assert!(matches!(
            tokens.redeem_steps(&token, &json!([]), None, None),
            Err(TokenError::Mismatch(_))
        ));
        assert!(matches!(
            tokens.redeem_steps(&token, &steps, Some(&json!({"x": 1})), None),
            Err(TokenError::Mismatch(_))
        ));
        // Repeated as JSON text, and with 420.0 written back as 420: the same steps.
        let text = serde_json::to_string(&steps)
            .unwrap_or_default()
            .replace("420.0", "420");
        let (got, arguments) = tokens
            .redeem_steps(&token, &Value::String(text), None, None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, asked);
        assert_eq!(arguments, json!({"plan": 1}));
        assert_eq!(
            tokens.redeem_steps(&token, &steps, None, None),
            Err(TokenError::Used)
        );
    }

    #[test]
    fn a_host_token_is_bound_to_the_plan_digest_and_expires() {
        let tokens = Tokens::with_ttl(Duration::ZERO);
        let asked = request(&[("rm", "fs__rm", Tier::Destructive)]);
        let token = tokens
            .issue(asked.clone(), Value::Null, Channel::Host, None)
            .unwrap_or_default();
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(
            tokens.redeem_digest(&token, &asked.digest, None),
            Err(TokenError::Expired(_))
        ));
        let tokens = Tokens::default();
        let token = tokens
            .issue(asked.clone(), Value::Null, Channel::Host, None)
            .unwrap_or_default();
        assert_eq!(
            tokens.redeem_digest(&token, &digest(&json!({"other": true})), None),
            Err(TokenError::OtherPlan)
        );
        assert_eq!(tokens.redeem_digest(&token, &asked.digest, None), Ok(asked));
    }

    #[test]
    fn a_loop_and_a_condition_are_shown_with_their_step() {
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
            .unwrap_or_default();
        let mut changed = steps_of(&asked);
        changed[0]["foreach"] = json!("other.files");
        assert!(matches!(
            tokens.redeem_steps(&token, &changed, None, None),
            Err(TokenError::Mismatch(_))
        ));
        assert!(
            tokens
                .redeem_steps(&token, &steps_of(&asked), None, None)
                .is_ok()
        );
    }

    /// Over HTTP a token is redeemed only in the session it was handed to: in another,
    /// it is as unknown as a made-up one, and stays good for its own.
    #[test]
    fn a_token_is_redeemed_only_by_its_session() {
        let tokens = Tokens::default();
        let asked = request(&[("w", "fs__write", Tier::Write)]);
        let token = tokens
            .issue(asked.clone(), Value::Null, Channel::Model, Some(1))
            .unwrap_or_default();
        let steps = steps_of(&asked);
        for other in [Some(2), None] {
            assert_eq!(
                tokens.redeem_steps(&token, &steps, None, other),
                Err(TokenError::Unknown)
            );
        }
        assert!(tokens.redeem_steps(&token, &steps, None, Some(1)).is_ok());
        let host = tokens
            .issue(asked.clone(), Value::Null, Channel::Host, Some(1))
            .unwrap_or_default();
        assert_eq!(
            tokens.redeem_digest(&host, &asked.digest, Some(2)),
            Err(TokenError::Unknown)
        );
        assert!(tokens.redeem_digest(&host, &asked.digest, Some(1)).is_ok());
    }

    #[test]
    fn tokens_are_bounded_and_the_oldest_go_first() {
        let tokens = Tokens::default();
        let asked = request(&[("w", "fs__write", Tier::Write)]);
        let first = tokens
            .issue(asked.clone(), Value::Null, Channel::Model, None)
            .unwrap_or_default();
        for _ in 0..MAX_TOKENS {
            let _ = tokens.issue(asked.clone(), Value::Null, Channel::Model, None);
        }
        assert_eq!(tokens.lock().len(), MAX_TOKENS);
        assert_eq!(
            tokens.redeem_steps(&first, &steps_of(&asked), None, None),
            Err(TokenError::Unknown)
        );
    }

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
