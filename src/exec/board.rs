//! Seed 004's whiteboard across plans: the state slots a session's runs wrote, so that
//! its next plan (a replanned one, say) may read `†state.error` that no call of its own
//! writes. Each session has its own board; a run with no session (a stateless HTTP
//! request's) writes none. Bounded: a slot's value over [`MAX_SLOT_BYTES`] of JSON is
//! not kept, a board holds [`MAX_SLOTS`] slots (the oldest written go first), and
//! [`MAX_BOARDS`] sessions have one (the least recently written go first).

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use serde_json::{Map, Value};

use super::{RunRecord, StepStatus};
use crate::plan::ValidatedPlan;

/// The largest slot value kept, as JSON: a board is read into later plans' inputs.
pub const MAX_SLOT_BYTES: usize = 16 * 1024;
/// Slots per board.
pub const MAX_SLOTS: usize = 64;
/// Sessions with a board.
pub const MAX_BOARDS: usize = 64;

/// One session's slots, oldest written first.
type Board = Vec<(String, Value)>;

/// Every session's board, most recently written last.
#[derive(Default)]
pub struct Boards {
    boards: Mutex<VecDeque<(u64, Board)>>,
}

impl Boards {
    /// What `owner`'s earlier runs wrote (empty for none, or no session).
    pub fn get(&self, owner: Option<u64>) -> Map<String, Value> {
        let Some(owner) = owner else {
            return Map::new();
        };
        let boards = self.boards.lock().unwrap_or_else(PoisonError::into_inner);
        boards
            .iter()
            .find(|(o, _)| *o == owner)
            .map(|(_, board)| board.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Writes on `owner`'s board the slots `record`'s run of `plan` wrote.
    pub fn write(&self, owner: Option<u64>, plan: &ValidatedPlan, record: &RunRecord) {
        self.keep(owner, written(plan, record));
    }

    /// Writes `written` (slot, value), in order, on `owner`'s board.
    fn keep(&self, owner: Option<u64>, written: Board) {
        let Some(owner) = owner else {
            return;
        };
        if written.is_empty() {
            return;
        }
        let mut boards = self.boards.lock().unwrap_or_else(PoisonError::into_inner);
        let mut board = match boards.iter().position(|(o, _)| *o == owner) {
            Some(at) => boards.remove(at).map(|(_, b)| b).unwrap_or_default(),
            None => Vec::new(),
        };
        for (slot, value) in written {
            // Written again, it is the newest (or gone, when too large to keep).
            board.retain(|(kept, _)| *kept != slot);
            if serde_json::to_vec(&value).map_or(usize::MAX, |json| json.len()) <= MAX_SLOT_BYTES {
                board.push((slot, value));
            }
        }
        let over = board.len().saturating_sub(MAX_SLOTS);
        board.drain(..over);
        boards.push_back((owner, board));
        while boards.len() > MAX_BOARDS {
            boards.pop_front();
        }
    }
}

/// The slots a run wrote, in plan order: a succeeded step's output to its slot, a
/// failed step's error to its error slot.
fn written(plan: &ValidatedPlan, record: &RunRecord) -> Board {
    let mut written = Vec::new();
    for (step, ran) in plan.steps().iter().zip(&record.steps) {
        let Some(slots) = &step.output_slots else {
            continue;
        };
        match (ran.status, &slots.error) {
            (StepStatus::Succeeded, _) => {
                if let Some(output) = &ran.output {
                    written.push((slots.success.clone(), output.clone()));
                }
            }
            (status, Some(error)) if status.is_failure() => {
                let text = ran.error.clone().unwrap_or_default();
                written.push((error.clone(), Value::String(text)));
            }
            _ => {}
        }
    }
    written
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn slots(board: &Map<String, Value>) -> Vec<&str> {
        board.keys().map(String::as_str).collect()
    }

    #[test]
    fn boards_are_per_session_and_bounded() {
        let boards = Boards::default();
        boards.keep(
            Some(1),
            vec![("a".into(), json!(1)), ("b".into(), json!(2))],
        );
        boards.keep(None, vec![("x".into(), json!(0))]);
        boards.keep(Some(2), vec![("a".into(), json!("other"))]);
        assert_eq!(
            boards.get(Some(1)),
            json!({"a": 1, "b": 2})
                .as_object()
                .cloned()
                .unwrap_or_default()
        );
        assert_eq!(boards.get(Some(2))["a"], "other");
        assert!(
            boards.get(None).is_empty(),
            "a run without a session writes nothing"
        );
        // Written again: the newest value, last; too large: gone.
        boards.keep(
            Some(1),
            vec![
                ("a".into(), json!(3)),
                ("b".into(), json!("x".repeat(MAX_SLOT_BYTES))),
            ],
        );
        assert_eq!(slots(&boards.get(Some(1))), ["a"]);
        let many: Vec<(String, Value)> = (0..MAX_SLOTS + 5)
            .map(|i| (format!("s{i}"), json!(i)))
            .collect();
        boards.keep(Some(1), many);
        let board = boards.get(Some(1));
        assert_eq!(board.len(), MAX_SLOTS);
        assert!(
            board.get("s4").is_none() && board.get("s5").is_some(),
            "the oldest go first"
        );
        for owner in 10..10 + MAX_BOARDS as u64 {
            boards.keep(Some(owner), vec![("k".into(), json!(owner))]);
        }
        assert!(
            boards.get(Some(2)).is_empty(),
            "the least recently written board goes first"
        );
    }
}
