//! Single-use approval tokens: a pending approval carried from the call that asked to the
//! call that answers. A token lasts ten minutes, is bound to the plan it was asked for
//! (its digest, or the steps repeated), is redeemed once, only the way it was handed out
//! (the model's `approve_plan`, or the host's input-required retry) and only by the owner
//! it was handed to. With a shared store (`[state] store`, `state.rs`) tokens live there,
//! so any instance redeems one another issued, and still only once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::request::{ApprovalStep, Request};
use crate::identity::Owner;
use crate::state::{Shared, StoreError, now_ms};

/// How long a token stays good.
pub const TOKEN_TTL: Duration = Duration::from_secs(600);
/// Tokens remembered at once (used and expired ones included, so that reusing one says
/// so); the oldest are forgotten first.
const MAX_TOKENS: usize = 256;
/// Plan arguments kept for unredeemed tokens, in bytes; the oldest go first past it.
const MAX_KEPT_BYTES: usize = 64 << 20;

/// The shared store's list of tokens issued (for the consoles).
const WAITING_LIST: &str = "approvals";
/// The used mark of a token redeemed by its owner (the console's says how it settled it).
const USED: &str = "1";

/// Tokens issued by this process so far.
static ISSUED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Who a token was handed to: it is redeemed only the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Approved or declined on the console: how, and where its run is.
    #[error("this approval token was {0}")]
    Settled(String),
    /// The shared store could not be asked: the token is neither used nor refused.
    #[error("{0}; the approval token is still unused: try again once the store is back")]
    Store(String),
}

/// A pending approval, as kept in memory or (as JSON) in the shared store.
#[derive(Serialize, Deserialize)]
struct Pending {
    request: Request,
    arguments: Value,
    /// The size of `arguments` as JSON, counted against [`MAX_KEPT_BYTES`].
    bytes: usize,
    channel: Channel,
    /// When it was issued, in ms since the epoch (instances share no other clock).
    issued_ms: u64,
    /// Used already (in memory; the shared store keeps a key of its own for it).
    #[serde(skip)]
    used: bool,
    /// Its place in the order tokens were issued in this process (the oldest go first).
    #[serde(skip)]
    order: u64,
    /// Whose it is, as [`Owner::stored`] spells it (see [`Tokens::issue`]).
    owner: Option<String>,
    /// How the console settled it, told to a later use (in memory).
    #[serde(skip)]
    settled: Option<String>,
}

/// Who redeems a token: its owner (as [`Owner::stored`] spells it), the way it was handed
/// out; or the console, for whoever asked, saying how it settled it.
#[derive(Clone, Copy)]
enum By<'a> {
    Owner(Channel, Option<&'a str>),
    Console(&'a str),
}

/// A plan waiting for approval, as the console shows it.
#[derive(Debug, Clone)]
pub struct Waiting {
    pub token: String,
    pub request: Request,
    pub channel: Channel,
    /// Whose it is, as [`Owner::stored`] spells it.
    pub owner: Option<String>,
    /// How long ago it was asked for.
    pub age: Duration,
}

impl Pending {
    /// It as the console lists it.
    fn waiting(&self, token: &str) -> Waiting {
        Waiting {
            token: token.to_owned(),
            request: self.request.clone(),
            channel: self.channel,
            owner: self.owner.clone(),
            age: self.age(),
        }
    }

    /// How long ago it was issued.
    fn age(&self) -> Duration {
        Duration::from_millis(now_ms().saturating_sub(self.issued_ms))
    }
}

/// The approvals asked for and not yet given, by token.
pub struct Tokens {
    pending: Mutex<HashMap<String, Pending>>,
    ttl: Duration,
    /// Where tokens live when several instances share them.
    shared: Option<Shared>,
}

impl Default for Tokens {
    fn default() -> Self {
        Self::with_ttl(TOKEN_TTL)
    }
}

impl Tokens {
    /// Tokens that last `ttl` (tests shorten it), in this process.
    pub fn with_ttl(ttl: Duration) -> Self {
        Self {
            pending: Mutex::new(HashMap::new()),
            ttl,
            shared: None,
        }
    }

    /// Tokens kept in `shared` when there is one, else in this process.
    pub fn kept_in(shared: Option<Shared>) -> Self {
        Self {
            shared,
            ..Self::default()
        }
    }

    /// How long a token lasts.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Remembers `request` for the plan sent as `arguments` and returns its new token,
    /// redeemable only by `owner` (a session, or a verified caller; `None`: a request
    /// that has neither, such as a stateless HTTP request without one).
    pub async fn issue(
        &self,
        request: Request,
        arguments: Value,
        channel: Channel,
        owner: Option<Owner>,
    ) -> Result<String, String> {
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).map_err(|e| format!("no randomness for a token: {e}"))?;
        let token: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let token = format!("pa_{token}");
        let bytes = serde_json::to_vec(&arguments).map_or(0, |v| v.len());
        let pending = Pending {
            request,
            arguments,
            bytes,
            channel,
            issued_ms: now_ms(),
            used: false,
            order: ISSUED.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            owner: owner.as_ref().map(Owner::stored),
            settled: None,
        };
        if let Some(shared) = &self.shared {
            // Kept past its life, so that a late or second use is told so.
            let text = serde_json::to_string(&pending).map_err(|e| e.to_string())?;
            let name = format!("approval:{token}");
            shared
                .put(&name, &text, 2 * self.ttl)
                .await
                .map_err(|e| e.to_string())?;
            // Listed for the consoles of every instance (the newest first).
            shared
                .push_front(WAITING_LIST, &token, MAX_TOKENS, 2 * self.ttl)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(token);
        }
        let mut kept = self.lock();
        if kept.len() >= MAX_TOKENS {
            let forget = 2 * self.ttl;
            kept.retain(|_, p| p.age() < forget);
        }
        let weight = |kept: &HashMap<String, Pending>| -> usize {
            kept.values().map(|p| p.bytes).sum::<usize>() + bytes
        };
        while kept.len() >= MAX_TOKENS || (!kept.is_empty() && weight(&kept) > MAX_KEPT_BYTES) {
            let oldest = kept
                .iter()
                .min_by_key(|(_, p)| p.order)
                .map(|(t, _)| t.clone());
            match oldest {
                Some(oldest) => kept.remove(&oldest),
                None => break,
            };
        }
        kept.insert(token.clone(), pending);
        Ok(token)
    }

    /// `approve_plan`: the plan behind `token`, once, when `steps` (and `inputs`, when the
    /// plan has any) repeat what was asked. A mismatch leaves the token good, so the model
    /// can send them again.
    pub async fn redeem_steps(
        &self,
        token: &str,
        steps: &Value,
        inputs: Option<&Value>,
        owner: Option<Owner>,
    ) -> Result<(Request, Value), TokenError> {
        let owner = owner.as_ref().map(Owner::stored);
        let by = By::Owner(Channel::Model, owner.as_deref());
        self.redeem(token, by, |request| {
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
        .await
    }

    /// A host's retry: the request behind `token`, once, when the plan it resent is the
    /// one approval was asked for (same digest).
    pub async fn redeem_digest(
        &self,
        token: &str,
        digest: &str,
        owner: Option<Owner>,
    ) -> Result<Request, TokenError> {
        let owner = owner.as_ref().map(Owner::stored);
        let by = By::Owner(Channel::Host, owner.as_deref());
        self.redeem(token, by, |request| {
            if request.digest == digest {
                Ok(())
            } else {
                Err(TokenError::OtherPlan)
            }
        })
        .await
        .map(|(request, _)| request)
    }

    /// The plan behind `token`, once, for `by`, when `check` passes: the token is marked
    /// used (by the console: with how it settled it).
    async fn redeem(
        &self,
        token: &str,
        by: By<'_>,
        check: impl FnOnce(&Request) -> Result<(), TokenError>,
    ) -> Result<(Request, Value), TokenError> {
        // Nothing planmux issued looks otherwise ("pa_" and 32 hex digits).
        let hex = token.strip_prefix("pa_").unwrap_or_default();
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(TokenError::Unknown);
        }
        // Another owner's token is as unknown here as a made-up one; the console settles
        // anyone's.
        let ours = |p: &Pending| match by {
            By::Owner(channel, owner) => p.channel == channel && p.owner.as_deref() == owner,
            By::Console(_) => true,
        };
        // An owner is told how the console settled its token.
        let owner_told = matches!(by, By::Owner(..));
        let mark = match by {
            By::Owner(..) => USED,
            By::Console(settled) => settled,
        };
        let ttl = self.ttl;
        let usable = |p: &Pending| {
            let age = p.age();
            if age > ttl {
                return Err(TokenError::Expired((age - ttl).as_secs()));
            }
            check(&p.request)
        };
        if let Some(shared) = &self.shared {
            let store = |e: crate::state::StoreError| TokenError::Store(e.to_string());
            let name = format!("approval:{token}");
            let used = format!("{name}:used");
            // The approval and its used mark, read together.
            let kept = shared.get_all(&[name, used.clone()]).await.map_err(store)?;
            let text = kept.first().cloned().flatten();
            let text = text.as_deref();
            let pending: Pending = match text.map(serde_json::from_str) {
                None => return Err(TokenError::Unknown),
                Some(Ok(pending)) => pending,
                Some(Err(e)) => return Err(store(shared.unreadable("an approval", e))),
            };
            if !ours(&pending) {
                return Err(TokenError::Unknown);
            }
            match kept.get(1).cloned().flatten() {
                // The console's mark says how it settled the token.
                Some(mark) if mark != USED && owner_told => return Err(TokenError::Settled(mark)),
                Some(_) => return Err(TokenError::Used),
                None => {}
            }
            usable(&pending)?;
            // Whichever instance marks it first runs the plan; the others are told it is used.
            if !shared.put_new(&used, mark, 2 * ttl).await.map_err(store)? {
                return Err(TokenError::Used);
            }
            return Ok((pending.request, pending.arguments));
        }
        let mut kept = self.lock();
        let entry = kept
            .get_mut(token)
            .filter(|p| ours(p))
            .ok_or(TokenError::Unknown)?;
        if let Some(settled) = entry.settled.as_ref().filter(|_| owner_told) {
            return Err(TokenError::Settled(settled.clone()));
        }
        if entry.used {
            return Err(TokenError::Used);
        }
        usable(entry)?;
        entry.used = true;
        if let By::Console(settled) = by {
            entry.settled = Some(settled.to_owned());
        }
        Ok((entry.request.clone(), std::mem::take(&mut entry.arguments)))
    }

    /// The plans waiting for approval (unused, unexpired), oldest first: this process's,
    /// or with a shared store every instance's.
    pub async fn waiting(&self) -> Result<Vec<Waiting>, StoreError> {
        let Some(shared) = &self.shared else {
            let kept = self.lock();
            let mut waiting: Vec<(u64, Waiting)> = (kept.iter())
                .filter(|(_, p)| !p.used && p.age() <= self.ttl)
                .map(|(token, p)| (p.order, p.waiting(token)))
                .collect();
            waiting.sort_by_key(|(order, _)| *order);
            return Ok(waiting.into_iter().map(|(_, w)| w).collect());
        };
        let mut listed = shared.list(WAITING_LIST).await?;
        listed.reverse();
        let names: Vec<String> = (listed.iter())
            .flat_map(|t| [format!("approval:{t}"), format!("approval:{t}:used")])
            .collect();
        let kept = if names.is_empty() {
            Vec::new()
        } else {
            shared.get_all(&names).await?
        };
        let mut waiting = Vec::new();
        for (token, pair) in listed.iter().zip(kept.chunks(2)) {
            let [Some(text), None] = pair else { continue };
            let pending: Pending =
                serde_json::from_str(text).map_err(|e| shared.unreadable("an approval", e))?;
            if pending.age() <= self.ttl {
                waiting.push(pending.waiting(token));
            }
        }
        Ok(waiting)
    }

    /// The console's answer to the plan behind `token`, whoever asked: its request and
    /// arguments, once (the token is used: a later `approve_plan` or retry is told
    /// `settled`, which says how).
    pub async fn settle(&self, token: &str, settled: &str) -> Result<(Request, Value), TokenError> {
        self.redeem(token, By::Console(settled), |_| Ok(())).await
    }

    /// Tells later uses of `token`, settled on the console, how it went (`settled`, once
    /// known). A shared store that cannot take it is logged: the token stays used.
    pub async fn note(&self, token: &str, settled: String) {
        if let Some(shared) = &self.shared {
            let used = format!("approval:{token}:used");
            if let Err(error) = shared.put(&used, &settled, 2 * self.ttl).await {
                tracing::warn!(%error, "how the console settled an approval is not kept");
            }
            return;
        }
        if let Some(entry) = self.lock().get_mut(token) {
            entry.settled = Some(settled);
        }
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
mod tests;
