//! `[http] rate_limit`: at most N requests per caller in each period, as a token bucket
//! per caller (full at first, refilled evenly: N per period, never more than N held). A
//! request past it is told how long to wait. In memory, for this process. Callers are
//! many (each JWT `sub`): a bucket that has filled up again is the same as none, so such
//! buckets are dropped whenever more than [`SWEEP_OVER`] are kept.
//!
//! With a shared store (`[state] store`) the buckets are there, the same bucket for a
//! caller on every instance (`state.rs` takes from it atomically, by Redis's clock); a
//! store that cannot be reached admits no one (fail closed) and says so.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::config::RateLimit;
use crate::state::{Shared, StoreError};

/// Past this many buckets, the full ones are dropped.
const SWEEP_OVER: usize = 4096;

/// The buckets, by caller.
pub struct Limiter {
    rate: RateLimit,
    buckets: Mutex<HashMap<String, Bucket>>,
    /// Where the buckets are when several instances share them.
    shared: Option<Shared>,
}

/// Why a request is not admitted.
#[derive(Debug)]
pub enum OverRate {
    /// Past the caller's rate: this long until it may send one.
    Wait(Duration),
    /// The shared store could not count it.
    Store(StoreError),
}

/// What one caller has left, as of `at`.
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Limiter {
    pub fn new(rate: RateLimit) -> Self {
        Self {
            rate,
            buckets: Mutex::default(),
            shared: None,
        }
    }

    /// The same limiter, its buckets in `shared` when there is one.
    pub fn kept_in(self, shared: Option<Shared>) -> Self {
        Self { shared, ..self }
    }

    /// Takes one request for `caller`, from the shared bucket when there is one.
    pub async fn take(&self, caller: &str) -> Result<(), OverRate> {
        let Some(shared) = &self.shared else {
            return self.admit(caller, Instant::now()).map_err(OverRate::Wait);
        };
        let per_token = self.rate.per / self.rate.requests.max(1);
        match shared
            .take(&format!("rate:{caller}"), self.rate.requests, per_token)
            .await
        {
            Ok(None) => Ok(()),
            Ok(Some(wait)) => Err(OverRate::Wait(wait)),
            Err(error) => Err(OverRate::Store(error)),
        }
    }

    /// The limit in force.
    pub fn rate(&self) -> RateLimit {
        self.rate
    }

    /// Takes one request for `caller` at `now`, or says how long until it may send one.
    pub fn admit(&self, caller: &str, now: Instant) -> Result<(), Duration> {
        let capacity = f64::from(self.rate.requests);
        let per_token = self.rate.per.as_secs_f64() / capacity;
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if buckets.len() > SWEEP_OVER {
            let full = self.rate.per;
            buckets.retain(|_, b| now.saturating_duration_since(b.at) < full);
        }
        let bucket = buckets.entry(caller.to_owned()).or_insert(Bucket {
            tokens: capacity,
            at: now,
        });
        let refilled = now.saturating_duration_since(bucket.at).as_secs_f64() / per_token;
        bucket.tokens = (bucket.tokens + refilled).min(capacity);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        Err(Duration::from_secs_f64((1.0 - bucket.tokens) * per_token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_caller_gets_its_own_n_per_period_and_is_told_how_long_to_wait() {
        let limiter = Limiter::new(RateLimit {
            requests: 3,
            per: Duration::from_secs(60),
        });
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.admit("a", start), Ok(()));
        }
        let wait = limiter.admit("a", start).expect_err("the fourth");
        assert_eq!(wait.as_secs(), 20, "one request's share of the minute");
        assert_eq!(limiter.admit("b", start), Ok(()), "another caller");
        assert_eq!(limiter.admit("a", start + Duration::from_secs(20)), Ok(()));
        assert!(limiter.admit("a", start + Duration::from_secs(21)).is_err());
        // An idle caller's bucket fills up to N, no further.
        let later = start + Duration::from_secs(3600);
        for _ in 0..3 {
            assert_eq!(limiter.admit("a", later), Ok(()));
        }
        assert!(limiter.admit("a", later).is_err());
    }

    #[test]
    fn full_buckets_are_dropped_once_there_are_many_and_busy_ones_kept() {
        let limiter = Limiter::new(RateLimit {
            requests: 2,
            per: Duration::from_secs(60),
        });
        let start = Instant::now();
        for n in 0..=SWEEP_OVER {
            let _ = limiter.admit(&format!("idle{n}"), start);
        }
        let _ = limiter.admit("busy", start + Duration::from_secs(59));
        let _ = limiter.admit("busy", start + Duration::from_secs(59));
        let later = start + Duration::from_secs(61);
        assert!(
            limiter.admit("busy", later).is_err(),
            "busy keeps its empty bucket"
        );
        let kept = limiter.buckets.lock().map(|b| b.len()).unwrap_or_default();
        assert_eq!(kept, 1, "only busy's bucket is kept");
    }

    #[test]
    fn rates_are_read_as_written_and_wrong_ones_named() {
        let rate = |text| RateLimit::parse(text);
        assert_eq!(
            rate("120/min"),
            Ok(RateLimit {
                requests: 120,
                per: Duration::from_secs(60)
            })
        );
        assert_eq!(rate("5/s").map(|r| r.per), Ok(Duration::from_secs(1)));
        assert_eq!(rate("1000/h").map(|r| r.requests), Ok(1000));
        for wrong in ["120", "0/min", "x/min", "10/day", "-1/s"] {
            let why = rate(wrong).expect_err(wrong);
            assert!(why.contains(wrong) && why.contains("N/min"), "{why}");
        }
    }
}
