//! The last runs' records for `planmux://runs/{run_id}`, each listed and readable only by
//! its owner: the host session that ran it, or a verified caller across its sessions (over
//! HTTP, sessions do not see each other's). A run with no owner (a stateless HTTP
//! request's without an identity) is listed to no one and read by its id alone, which
//! cannot be guessed.
//!
//! In this process by default; with a shared store (`[state] store`, `state.rs`) every
//! instance writes there, so a caller reads its run on whichever instance it reaches.
//! There each owner's last `kept_runs` are listed, and a record is kept for
//! [`SHARED_RUN_TTL`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};

use super::RunRecord;
use crate::config::{DEFAULT_KEPT_RUN_BYTES, DEFAULT_KEPT_RUNS};
use crate::identity::Owner;
use crate::state::{Shared, StoreError, now_ms};

/// How long a shared store keeps a run record.
pub const SHARED_RUN_TTL: Duration = Duration::from_secs(24 * 3600);

/// The most recent run records, oldest dropped first.
pub struct RunStore {
    runs: Mutex<VecDeque<Kept>>,
    /// How many are kept, and how much they may weigh together.
    most: usize,
    bytes: usize,
    /// Where they are kept when several instances share them.
    shared: Option<Shared>,
}

/// A kept run as a list shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Listed {
    pub run_id: String,
    /// Its status, size, time and goal in a line.
    pub description: String,
}

/// A run as the shared store lists it: until when its record is kept, so a list is read
/// without fetching the records.
#[derive(serde::Serialize, serde::Deserialize)]
struct SharedItem {
    #[serde(flatten)]
    listed: Listed,
    until_ms: u64,
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
}

/// Whether `viewer`, knowing its id, may read a run of `owner`'s: its owner, or anyone
/// who was given the id of a run with no owner.
fn readable_by<T: PartialEq>(owner: Option<&T>, viewer: Option<&T>) -> bool {
    owner.is_none() || owner == viewer
}

/// A run in a line: its status, size, time and goal.
pub fn describe(run: &RunRecord) -> String {
    let goal = run
        .goal
        .as_deref()
        .map(|g| format!(": {g}"))
        .unwrap_or_default();
    format!(
        "{} plan, {}, {} ms{goal}",
        run.status.as_str(),
        crate::text::count(run.steps.len(), "step"),
        run.duration_ms.round(),
    )
}

impl RunStore {
    /// A store keeping at most `most` records, weighing `bytes` together (`[proxy]
    /// kept_runs`, `kept_run_bytes`); the newest is always kept.
    pub fn new(most: usize, bytes: usize) -> Self {
        Self {
            runs: Mutex::default(),
            most,
            bytes,
            shared: None,
        }
    }

    /// The same store, kept in `shared` when there is one (each owner's last `most`).
    pub fn kept_in(self, shared: Option<Shared>) -> Self {
        Self { shared, ..self }
    }

    /// Keeps a record of `owner`'s, dropping the oldest beyond the store's bounds. A
    /// shared store that cannot take it is logged: the run has happened all the same.
    pub async fn insert(&self, record: Arc<RunRecord>, owner: Option<Owner>) {
        // With a shared store, a copy stays here too: what the console shows of this
        // instance's runs.
        if let Some(shared) = &self.shared
            && let Err(error) = self.share(shared, &record, owner.as_ref()).await
        {
            tracing::warn!(run = %record.run_id, %error, "run record not kept");
        }
        let (most, bytes) = (self.most, self.bytes);
        let size = serde_json::to_vec(&*record).map_or(0, |json| json.len());
        let mut runs = self.lock();
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

    /// The records kept in this process, whoever's they are, newest first: the
    /// console's view (its users may see every server and tool).
    pub fn recent(&self) -> Vec<Arc<RunRecord>> {
        let runs = self.lock();
        runs.iter().rev().map(|kept| kept.record.clone()).collect()
    }

    /// Writes `record` to the shared store, and lists it to its owner.
    async fn share(
        &self,
        shared: &Shared,
        record: &RunRecord,
        owner: Option<&Owner>,
    ) -> Result<(), StoreError> {
        let owner = owner.map(Owner::stored);
        let kept = json!({"owner": owner, "record": record}).to_string();
        shared
            .put(&format!("run:{}", record.run_id), &kept, SHARED_RUN_TTL)
            .await?;
        if let Some(owner) = owner {
            let until = SHARED_RUN_TTL.as_millis();
            let item = SharedItem {
                listed: Listed {
                    run_id: record.run_id.clone(),
                    description: describe(record),
                },
                until_ms: now_ms().saturating_add(u64::try_from(until).unwrap_or(u64::MAX)),
            };
            let item = serde_json::to_string(&item).unwrap_or_default();
            shared
                .push_front(&format!("runs:{owner}"), &item, self.most, SHARED_RUN_TTL)
                .await?;
        }
        Ok(())
    }

    /// The record of run `run_id` as JSON text, if it is kept and `viewer` may read it.
    pub async fn read(
        &self,
        run_id: &str,
        viewer: Option<Owner>,
    ) -> Result<Option<String>, StoreError> {
        let Some(shared) = &self.shared else {
            let runs = self.lock();
            let found = runs.iter().find(|kept| {
                kept.record.run_id == run_id && readable_by(kept.owner.as_ref(), viewer.as_ref())
            });
            return Ok(found.and_then(|kept| serde_json::to_string_pretty(&*kept.record).ok()));
        };
        // Run ids are 32 hex digits: anything else names no key of planmux's.
        if run_id.len() != 32 || !run_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let Some(text) = shared.get(&format!("run:{run_id}")).await? else {
            return Ok(None);
        };
        let mut kept: Value =
            serde_json::from_str(&text).map_err(|e| shared.unreadable("a run record", e))?;
        let owner = kept.get("owner").and_then(Value::as_str).map(str::to_owned);
        let viewer = viewer.as_ref().map(Owner::stored);
        if !readable_by(owner.as_ref(), viewer.as_ref()) {
            return Ok(None);
        }
        let record = kept.get_mut("record").map(Value::take).unwrap_or_default();
        Ok(serde_json::to_string_pretty(&record).ok())
    }

    /// Every kept record of `viewer`'s, newest first.
    pub async fn list(&self, viewer: Option<Owner>) -> Result<Vec<Listed>, StoreError> {
        let Some(shared) = &self.shared else {
            let runs = self.lock();
            let listed = runs
                .iter()
                .rev()
                .filter(|kept| kept.listed_to(viewer.as_ref()));
            return Ok(listed
                .map(|kept| Listed {
                    run_id: kept.record.run_id.clone(),
                    description: describe(&kept.record),
                })
                .collect());
        };
        let Some(viewer) = viewer else {
            return Ok(Vec::new());
        };
        let items = shared.list(&format!("runs:{}", viewer.stored())).await?;
        // Listed while its record is kept.
        let now = now_ms();
        Ok(items
            .iter()
            .filter_map(|item| serde_json::from_str::<SharedItem>(item).ok())
            .filter(|item| item.until_ms > now)
            .map(|item| item.listed)
            .collect())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Kept>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
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

    async fn ids(store: &RunStore) -> Vec<String> {
        let listed = store
            .list(Some(Owner::Session(1)))
            .await
            .unwrap_or_default();
        listed.into_iter().map(|r| r.run_id).collect()
    }

    /// Whether `viewer` reads run `id`.
    async fn reads(store: &RunStore, id: &str, viewer: Option<Owner>) -> bool {
        store.read(id, viewer).await.ok().flatten().is_some()
    }

    #[tokio::test]
    async fn keeps_the_newest_runs_within_count_and_bytes() {
        let store = RunStore::new(3, usize::MAX);
        for i in 0..5 {
            store
                .insert(record(&i.to_string(), 10), Some(Owner::Session(1)))
                .await;
        }
        assert_eq!(ids(&store).await, ["4", "3", "2"]);
        assert!(!reads(&store, "1", Some(Owner::Session(1))).await);
        assert!(reads(&store, "3", Some(Owner::Session(1))).await);

        let store = RunStore::new(10, 1200);
        for id in ["a", "b", "c"] {
            store.insert(record(id, 400), Some(Owner::Session(1))).await;
        }
        assert_eq!(
            ids(&store).await,
            ["c", "b"],
            "a third ~550-byte record does not fit in 1200"
        );
        store
            .insert(record("huge", 5000), Some(Owner::Session(1)))
            .await;
        assert_eq!(
            ids(&store).await,
            ["huge"],
            "the newest is kept even alone over budget"
        );
    }

    #[tokio::test]
    async fn a_sessions_runs_are_its_own() {
        let store = RunStore::default();
        store.insert(record("a1", 1), Some(Owner::Session(1))).await;
        store.insert(record("b1", 1), Some(Owner::Session(2))).await;
        store.insert(record("cli", 1), None).await;
        let seen = async |viewer| -> Vec<String> {
            let listed = store.list(viewer).await.unwrap_or_default();
            listed.into_iter().map(|r| r.run_id).collect()
        };
        assert_eq!(seen(Some(Owner::Session(1))).await, ["a1"]);
        assert_eq!(seen(Some(Owner::Session(2))).await, ["b1"]);
        assert!(!reads(&store, "b1", Some(Owner::Session(1))).await);
        assert!(reads(&store, "b1", Some(Owner::Session(2))).await);
        // A run with no session is listed to no one, and read by its id alone.
        assert!(seen(None).await.is_empty());
        assert!(reads(&store, "cli", Some(Owner::Session(1))).await);
        assert!(reads(&store, "cli", None).await);
        assert!(!reads(&store, "a1", None).await);
    }
}
