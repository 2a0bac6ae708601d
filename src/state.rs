//! `[state] store = "redis://…"`: what several planmux instances behind one load balancer
//! must share, in Redis. Approval tokens (`approval/tokens.rs`), run records
//! (`exec/runs.rs`), rate-limit buckets (`rate_limit.rs`) and the key that seals what
//! planmux hands a host (`upstream/sealed.rs`) each keep their rules in their own module
//! and use the few operations here; with `store = "memory"` (the default) none of this
//! exists and each keeps its state in the process, as before.
//!
//! Every key is under `planmux:` and expires by itself. The connection is made when
//! first needed and again after Redis went away (redis's `ConnectionManager`); each
//! operation waits at most [`WAIT`], and a store that cannot be reached is an error that
//! names it (its address, never its password) for the request that needed it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::AsyncCommands;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::config::StateStore;

/// The longest one operation (connecting included) may take.
const WAIT: Duration = Duration::from_secs(2);
/// Every key planmux writes starts with this.
const PREFIX: &str = "planmux:";

/// The store several instances share.
#[derive(Clone)]
pub struct Shared {
    connection: ConnectionManager,
    /// Where it is, without credentials: what errors and logs name.
    label: String,
}

/// A store that did not answer, or answered what planmux cannot read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the state store ({label}) {why}")]
pub struct StoreError {
    label: String,
    why: String,
}

/// A token bucket taken from atomically: refilled by the time Redis gives (one clock for
/// every instance), one taken when there is one; else how many ms until there is. A
/// bucket left alone until full expires, which is the same as a full one.
const TAKE_SCRIPT: &str = r"
local capacity = tonumber(ARGV[1])
local per_token = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local bucket = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(bucket[1]) or capacity
local at = tonumber(bucket[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - at) / per_token)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.ceil((1 - tokens) * per_token)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(capacity * per_token))
return wait
";

impl Shared {
    /// The shared store `store` names (`None` for `memory`). Nothing is sent yet: the
    /// first operation connects, so planmux starts while Redis is down, and the requests
    /// that need it say so until it is back.
    pub fn open(store: &StateStore) -> Result<Option<Self>, StoreError> {
        let StateStore::Redis { url, label } = store else {
            return Ok(None);
        };
        let error = |e: redis::RedisError| StoreError {
            label: label.clone(),
            why: format!("cannot be used: {}", e.detail().unwrap_or("bad address")),
        };
        let client = redis::Client::open(url.0.as_str()).map_err(error)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(WAIT))
            .set_response_timeout(Some(WAIT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let connection = ConnectionManager::new_lazy_with_config(client, config).map_err(error)?;
        Ok(Some(Self {
            connection,
            label: label.clone(),
        }))
    }

    /// Where the store is, without credentials.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The full key for `name`.
    fn key(name: &str) -> String {
        format!("{PREFIX}{name}")
    }

    /// An answer, or the error that names the store; never longer than [`WAIT`] (and a
    /// little for the reconnection it may start).
    async fn answer<T>(
        &self,
        operation: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        let why = match tokio::time::timeout(2 * WAIT, operation).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(e)) if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() => {
                format!("cannot be reached: {e}")
            }
            Ok(Err(e)) => format!("refused the operation: {e}"),
            Err(_) => format!("did not answer within {} s", (2 * WAIT).as_secs()),
        };
        Err(StoreError {
            label: self.label.clone(),
            why,
        })
    }

    /// Writes `value` at `name` for `ttl`, unless something is there: whether it wrote.
    pub async fn put_new(
        &self,
        name: &str,
        value: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let mut connection = self.connection.clone();
        let options = redis::SetOptions::default()
            .conditional_set(redis::ExistenceCheck::NX)
            .with_expiration(redis::SetExpiry::PX(millis(ttl)));
        let set: Option<String> = self
            .answer(connection.set_options(Self::key(name), value, options))
            .await?;
        Ok(set.is_some())
    }

    /// Writes `value` at `name` for `ttl`.
    pub async fn put(&self, name: &str, value: &str, ttl: Duration) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        self.answer(connection.pset_ex(Self::key(name), value, millis(ttl)))
            .await
    }

    /// What is at `name`, if anything.
    pub async fn get(&self, name: &str) -> Result<Option<String>, StoreError> {
        let mut connection = self.connection.clone();
        self.answer(connection.get(Self::key(name))).await
    }

    /// What is at each of `names`, in order (`None` where nothing is).
    pub async fn get_all(&self, names: &[String]) -> Result<Vec<Option<String>>, StoreError> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = names.iter().map(|name| Self::key(name)).collect();
        let mut connection = self.connection.clone();
        self.answer(connection.mget(keys)).await
    }

    /// Puts `item` first in the list at `name`, keeps its first `keep` items, and keeps the
    /// list for `ttl` from now; all at once.
    pub async fn push_front(
        &self,
        name: &str,
        item: &str,
        keep: usize,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let key = Self::key(name);
        let last = isize::try_from(keep)
            .unwrap_or(isize::MAX)
            .saturating_sub(1);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .lpush(&key, item)
            .ignore()
            .ltrim(&key, 0, last)
            .ignore()
            .pexpire(&key, i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
            .ignore();
        let mut connection = self.connection.clone();
        self.answer(pipe.query_async::<()>(&mut connection)).await
    }

    /// The items of the list at `name`, first first.
    pub async fn list(&self, name: &str) -> Result<Vec<String>, StoreError> {
        let mut connection = self.connection.clone();
        self.answer(connection.lrange(Self::key(name), 0, -1)).await
    }

    /// Takes one from the bucket at `name`, which holds `capacity` and gains one every
    /// `per_token`: `Ok(None)` when taken, `Ok(Some(wait))` when empty.
    pub async fn take(
        &self,
        name: &str,
        capacity: u32,
        per_token: Duration,
    ) -> Result<Option<Duration>, StoreError> {
        let per_token_ms = per_token.as_secs_f64() * 1e3;
        let script = redis::Script::new(TAKE_SCRIPT);
        let mut invocation = script.key(Self::key(name));
        invocation.arg(capacity).arg(per_token_ms);
        let mut connection = self.connection.clone();
        let wait: u64 = self
            .answer(invocation.invoke_async(&mut connection))
            .await?;
        Ok((wait > 0).then(|| Duration::from_millis(wait)))
    }

    /// The secret every instance shares at `name`: the first instance to ask makes it
    /// (`make`), the others read it. It never expires.
    pub async fn secret(
        &self,
        name: &str,
        make: impl FnOnce() -> Option<String>,
    ) -> Result<String, StoreError> {
        let mut connection = self.connection.clone();
        let key = Self::key(name);
        if let Some(made) = make() {
            let options = redis::SetOptions::default().conditional_set(redis::ExistenceCheck::NX);
            let _: Option<String> = self
                .answer(connection.set_options(&key, made, options))
                .await?;
        }
        let kept: Option<String> = self.answer(connection.get(&key)).await?;
        kept.ok_or_else(|| StoreError {
            label: self.label.clone(),
            why: format!("lost {key} as soon as it was written"),
        })
    }

    /// An error of this store's about what it answered.
    pub fn unreadable(&self, what: &str, why: impl std::fmt::Display) -> StoreError {
        StoreError {
            label: self.label.clone(),
            why: format!("holds {what} planmux cannot read: {why}"),
        }
    }
}

/// `d` in whole milliseconds, at least 1 (Redis refuses an expiry of 0).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Now, in ms since the epoch: the one clock instances share (their monotonic ones are
/// their own).
pub fn now_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}
