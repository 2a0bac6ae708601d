//! The last runs' records, kept in memory for `planmux://runs/{run_id}`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use super::RunRecord;

/// How many run records are kept: enough to look back over a session.
pub const KEPT_RUNS: usize = 32;
/// How much they may weigh together (their JSON size): a few runs over large outputs must
/// not pin hundreds of megabytes. The newest record is always kept.
pub const KEPT_BYTES: usize = 64 * 1024 * 1024;

/// The most recent run records, oldest dropped first.
#[derive(Default)]
pub struct RunStore {
    runs: Mutex<VecDeque<(Arc<RunRecord>, usize)>>,
}

impl RunStore {
    /// Keeps a record, dropping the oldest beyond [`KEPT_RUNS`] or [`KEPT_BYTES`].
    pub fn insert(&self, record: Arc<RunRecord>) {
        self.insert_within(record, KEPT_RUNS, KEPT_BYTES);
    }

    fn insert_within(&self, record: Arc<RunRecord>, most: usize, bytes: usize) {
        let size = serde_json::to_vec(&*record).map_or(0, |json| json.len());
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.push_back((record, size));
        let mut total: usize = runs.iter().map(|(_, size)| size).sum();
        while runs.len() > 1 && (runs.len() > most || total > bytes) {
            if let Some((_, dropped)) = runs.pop_front() {
                total -= dropped;
            }
        }
    }

    /// A record by run id.
    pub fn get(&self, run_id: &str) -> Option<Arc<RunRecord>> {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.iter()
            .find(|(r, _)| r.run_id == run_id)
            .map(|(r, _)| r.clone())
    }

    /// Every kept record, newest first.
    pub fn list(&self) -> Vec<Arc<RunRecord>> {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.iter().rev().map(|(r, _)| r.clone()).collect()
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
        store.list().iter().map(|r| r.run_id.clone()).collect()
    }

    #[test]
    fn keeps_the_newest_runs_within_count_and_bytes() {
        let store = RunStore::default();
        for i in 0..5 {
            store.insert_within(record(&i.to_string(), 10), 3, usize::MAX);
        }
        assert_eq!(ids(&store), ["4", "3", "2"]);
        assert!(store.get("1").is_none() && store.get("3").is_some());

        let store = RunStore::default();
        store.insert_within(record("a", 400), 10, 1200);
        store.insert_within(record("b", 400), 10, 1200);
        store.insert_within(record("c", 400), 10, 1200);
        assert_eq!(
            ids(&store),
            ["c", "b"],
            "a third ~550-byte record does not fit in 1200"
        );
        store.insert_within(record("huge", 5000), 10, 1200);
        assert_eq!(
            ids(&store),
            ["huge"],
            "the newest is kept even alone over budget"
        );
    }
}
