//! The last runs' records, kept in memory for `planmux://runs/{run_id}`, each listed and
//! readable only by the host session that ran it (over HTTP, sessions do not see each
//! other's). A run with no session (a stateless HTTP request's) is listed to no one and
//! read by its id alone, which cannot be guessed.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use super::RunRecord;
use crate::config::{DEFAULT_KEPT_RUN_BYTES, DEFAULT_KEPT_RUNS};
use crate::identity::Owner;

/// The most recent run records, oldest dropped first.
pub struct RunStore {
    runs: Mutex<VecDeque<Kept>>,
    /// How many are kept, and how much they may weigh together.
    most: usize,
    bytes: usize,
}

impl Default for RunStore {
    /// [`DEFAULT_KEPT_RUNS`] records within [`DEFAULT_KEPT_RUN_BYTES`].
    fn default() -> Self {
        Self::new(DEFAULT_KEPT_RUNS, DEFAULT_KEPT_RUN_BYTES)
    }
}

/// One kept record: whose it is (`None`: a run with no owner, such as a stateless HTTP
/// request's without a verified identity), and its JSON size.
struct Kept {
    record: Arc<RunRecord>,
    owner: Option<Owner>,
    size: usize,
}

impl Kept {
    /// Whether `viewer` is shown it in a list: only its owner.
    fn listed_to(&self, viewer: Option<&Owner>) -> bool {
        self.owner.is_some() && self.owner.as_ref() == viewer
    }

    /// Whether `viewer`, knowing its id, may read it: its owner, or anyone who was given
    /// the id of a run with no owner.
    fn readable_by(&self, viewer: Option<&Owner>) -> bool {
        self.owner.is_none() || self.owner.as_ref() == viewer
    }
}

impl RunStore {
    /// A store keeping at most `most` records, weighing `bytes` together (`[proxy]
    /// kept_runs`, `kept_run_bytes`); the newest is always kept.
    pub fn new(most: usize, bytes: usize) -> Self {
        Self {
            runs: Mutex::default(),
            most,
            bytes,
        }
    }

    /// Keeps a record of `owner`'s, dropping the oldest beyond the store's bounds.
    pub fn insert(&self, record: Arc<RunRecord>, owner: Option<Owner>) {
        let (most, bytes) = (self.most, self.bytes);
        let size = serde_json::to_vec(&*record).map_or(0, |json| json.len());
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.push_back(Kept {
            record,
            owner,
            size,
        });
        let mut total: usize = runs.iter().map(|kept| kept.size).sum();
        while runs.len() > 1 && (runs.len() > most || total > bytes) {
            if let Some(dropped) = runs.pop_front() {
                total -= dropped.size;
            }
        }
    }

    /// A record by run id, if `viewer` may see it.
    pub fn get(&self, run_id: &str, viewer: Option<Owner>) -> Option<Arc<RunRecord>> {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.iter()
            .find(|kept| kept.record.run_id == run_id && kept.readable_by(viewer.as_ref()))
            .map(|kept| kept.record.clone())
    }

    /// Every kept record of `viewer`'s, newest first.
    pub fn list(&self, viewer: Option<Owner>) -> Vec<Arc<RunRecord>> {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.iter()
            .rev()
            .filter(|kept| kept.listed_to(viewer.as_ref()))
            .map(|kept| kept.record.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::RunStatus;

    fn record(id: &str, padding: usize) -> Arc<RunRecord> {
        Arc::new(RunRecord {
            run_id: id.into(),
            goal: Some("x".repeat(padding)),
            strategy: "auto".into(),
            on_error: "fail_forward".into(),
            status: RunStatus::Succeeded,
            outputs: Vec::new(),
            selections: Vec::new(),
            winner: None,
            stopped: None,
            warnings: Vec::new(),
            prompts: serde_json::Map::new(),
            duration_ms: 1.0,
            steps: Vec::new(),
        })
    }

    fn ids(store: &RunStore) -> Vec<String> {
        store
            .list(Some(Owner::Session(1)))
            .iter()
            .map(|r| r.run_id.clone())
            .collect()
    }

    #[test]
    fn keeps_the_newest_runs_within_count_and_bytes() {
        let store = RunStore::new(3, usize::MAX);
        for i in 0..5 {
            store.insert(record(&i.to_string(), 10), Some(Owner::Session(1)));
        }
        assert_eq!(ids(&store), ["4", "3", "2"]);
        assert!(
            store.get("1", Some(Owner::Session(1))).is_none()
                && store.get("3", Some(Owner::Session(1))).is_some()
        );

        let store = RunStore::new(10, 1200);
        store.insert(record("a", 400), Some(Owner::Session(1)));
        store.insert(record("b", 400), Some(Owner::Session(1)));
        store.insert(record("c", 400), Some(Owner::Session(1)));
        assert_eq!(
            ids(&store),
            ["c", "b"],
            "a third ~550-byte record does not fit in 1200"
        );
        store.insert(record("huge", 5000), Some(Owner::Session(1)));
        assert_eq!(
            ids(&store),
            ["huge"],
            "the newest is kept even alone over budget"
        );
    }

    #[test]
    fn a_sessions_runs_are_its_own() {
        let store = RunStore::default();
        store.insert(record("a1", 1), Some(Owner::Session(1)));
        store.insert(record("b1", 1), Some(Owner::Session(2)));
        store.insert(record("cli", 1), None);
        let seen = |viewer| -> Vec<String> {
            store
                .list(viewer)
                .iter()
                .map(|r| r.run_id.clone())
                .collect()
        };
        assert_eq!(seen(Some(Owner::Session(1))), ["a1"]);
        assert_eq!(seen(Some(Owner::Session(2))), ["b1"]);
        assert!(store.get("b1", Some(Owner::Session(1))).is_none());
        assert!(store.get("b1", Some(Owner::Session(2))).is_some());
        // A run with no session is listed to no one, and read by its id alone.
        assert!(seen(None).is_empty());
        assert!(
            store.get("cli", Some(Owner::Session(1))).is_some() && store.get("cli", None).is_some()
        );
        assert!(store.get("a1", None).is_none());
    }
}
