//! The last runs' records, kept in memory for `planmux://runs/{run_id}`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use super::RunRecord;

/// How many run records are kept: enough to look back over a session, bounded in memory.
pub const KEPT_RUNS: usize = 32;

/// The most recent run records, oldest dropped first.
#[derive(Default)]
pub struct RunStore {
    runs: Mutex<VecDeque<Arc<RunRecord>>>,
}

impl RunStore {
    /// Keeps a record, dropping the oldest beyond [`KEPT_RUNS`].
    pub fn insert(&self, record: Arc<RunRecord>) {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        if runs.len() == KEPT_RUNS {
            runs.pop_front();
        }
        runs.push_back(record);
    }

    /// A record by run id.
    pub fn get(&self, run_id: &str) -> Option<Arc<RunRecord>> {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.iter().find(|r| r.run_id == run_id).cloned()
    }

    /// Every kept record, newest first.
    pub fn list(&self) -> Vec<Arc<RunRecord>> {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.iter().rev().cloned().collect()
    }
}
