//! Seed 004's whiteboard across plans: the state slots a session's runs wrote, so that
//! its next plan (a replanned one, say) may read `†state.error` that no call of its own
//! writes. Each session has its own board; a run with no session (a stateless HTTP
//! request's) writes none. A step with `ok || error` slots leaves the slot of the outcome
//! it did not have empty, so a stale `error` never outlives a success. Bounded: values
//! are kept as JSON text, one over [`MAX_SLOT_BYTES`] is not kept (nor a slot name over
//! [`MAX_SLOT_NAME`]), a board holds [`MAX_SLOTS`] slots (the oldest written go first),
//! and [`MAX_BOARDS`] sessions have one (the least recently written go first).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use super::{RunRecord, StepStatus};
use crate::identity::Owner;
use crate::plan::ValidatedPlan;

/// The largest slot value kept, as JSON: a board is read into later plans' inputs.
pub const MAX_SLOT_BYTES: usize = 16 * 1024;
/// The longest slot name kept.
pub const MAX_SLOT_NAME: usize = 128;
/// Slots per board.
pub const MAX_SLOTS: usize = 64;
/// Sessions with a board.
pub const MAX_BOARDS: usize = 64;

/// One session's slots and their values as JSON text, oldest written first.
pub type Board = Vec<(String, String)>;

/// What a run did to a slot: wrote this value, or emptied it.
type Written = Vec<(String, Option<Value>)>;

/// Every session's board, most recently written last.
#[derive(Default)]
pub struct Boards {
    boards: Mutex<VecDeque<(Owner, Arc<Board>)>>,
}

/// A slot's value on `board`, if it has the slot.
pub fn slot(board: &Board, name: &str) -> Option<Value> {
    let (_, json) = board.iter().find(|(slot, _)| slot == name)?;
    serde_json::from_str(json).ok()
}

impl Boards {
    /// What `owner`'s earlier runs wrote (empty for none, or no owner), shared: a
    /// plan reads the few slots it names with [`slot`].
    pub fn get(&self, owner: Option<Owner>) -> Arc<Board> {
        let Some(owner) = owner else {
            return Arc::default();
        };
        let boards = self.boards.lock().unwrap_or_else(PoisonError::into_inner);
        boards
            .iter()
            .find(|(o, _)| *o == owner)
            .map(|(_, board)| board.clone())
            .unwrap_or_default()
    }

    /// Writes on `owner`'s board the slots `record`'s run of `plan` wrote.
    pub fn write(&self, owner: Option<Owner>, plan: &ValidatedPlan, record: &RunRecord) {
        self.keep(owner, written(plan, record));
    }

    /// Applies `written` (a slot and its value, or `None` to empty it), in order, to
    /// `owner`'s board.
    fn keep(&self, owner: Option<Owner>, written: Written) {
        let Some(owner) = owner else {
            return;
        };
        if written.is_empty() {
            return;
        }
        let mut boards = self.boards.lock().unwrap_or_else(PoisonError::into_inner);
        let mut board: Board = match boards.iter().position(|(o, _)| *o == owner) {
            Some(at) => boards
                .remove(at)
                .map(|(_, b)| Arc::unwrap_or_clone(b))
                .unwrap_or_default(),
            None => Vec::new(),
        };
        for (slot, value) in written {
            // Written again, it is the newest (or gone: emptied, or too large to keep).
            board.retain(|(kept, _)| *kept != slot);
            let json = value.and_then(|v| serde_json::to_string(&v).ok());
            if let Some(json) = json
                && json.len() <= MAX_SLOT_BYTES
                && slot.chars().count() <= MAX_SLOT_NAME
            {
                board.push((slot, json));
            }
        }
        let over = board.len().saturating_sub(MAX_SLOTS);
        board.drain(..over);
        if !board.is_empty() {
            boards.push_back((owner, Arc::new(board)));
        }
        while boards.len() > MAX_BOARDS {
            boards.pop_front();
        }
    }
}

/// What a run did to the slots, in plan order: a succeeded step's output to its slot
/// (its error slot emptied), a failed step's error to its error slot (its success slot
/// emptied).
fn written(plan: &ValidatedPlan, record: &RunRecord) -> Written {
    let mut written = Vec::new();
    for (step, ran) in plan.steps().iter().zip(&record.steps) {
        let Some(slots) = &step.output_slots else {
            continue;
        };
        match (ran.status, &slots.error) {
            (StepStatus::Succeeded, error) => {
                written.push((slots.success.clone(), ran.output.clone()));
                if let Some(error) = error {
                    written.push((error.clone(), None));
                }
            }
            (status, Some(error)) if status.is_failure() => {
                let text = ran.error.clone().unwrap_or_default();
                written.push((error.clone(), Some(Value::String(text))));
                written.push((slots.success.clone(), None));
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

    fn slots(board: &Board) -> Vec<&str> {
        board.iter().map(|(slot, _)| slot.as_str()).collect()
    }

    #[test]
    fn boards_are_per_session_and_bounded() {
        let boards = Boards::default();
        let write = |owner, pairs: &[(&str, Option<Value>)]| {
            let pairs = pairs.iter().map(|(s, v)| ((*s).to_owned(), v.clone()));
            boards.keep(owner, pairs.collect());
        };
        write(
            Some(Owner::Session(1)),
            &[("a", Some(json!(1))), ("b", Some(json!(2)))],
        );
        write(None, &[("x", Some(json!(0)))]);
        write(Some(Owner::Session(2)), &[("a", Some(json!("other")))]);
        let first = boards.get(Some(Owner::Session(1)));
        assert_eq!(slots(&first), ["a", "b"]);
        assert_eq!(
            (slot(&first, "a"), slot(&first, "b")),
            (Some(json!(1)), Some(json!(2)))
        );
        assert_eq!(
            slot(&boards.get(Some(Owner::Session(2))), "a"),
            Some(json!("other"))
        );
        assert!(
            boards.get(None).is_empty(),
            "a run without a session writes nothing"
        );
        // Written again: the newest value, last; too large, or emptied: gone.
        let big = json!("x".repeat(MAX_SLOT_BYTES));
        write(
            Some(Owner::Session(1)),
            &[("a", Some(json!(3))), ("b", Some(big))],
        );
        assert_eq!(slots(&boards.get(Some(Owner::Session(1)))), ["a"]);
        write(Some(Owner::Session(1)), &[("a", None)]);
        assert!(boards.get(Some(Owner::Session(1))).is_empty());
        let many: Written = (0..MAX_SLOTS + 5)
            .map(|i| (format!("s{i}"), Some(json!(i))))
            .collect();
        boards.keep(Some(Owner::Session(1)), many);
        let board = boards.get(Some(Owner::Session(1)));
        assert_eq!(board.len(), MAX_SLOTS);
        assert!(
            slot(&board, "s4").is_none() && slot(&board, "s5").is_some(),
            "the oldest go first"
        );
        for owner in 10..10 + MAX_BOARDS as u64 {
            write(Some(Owner::Session(owner)), &[("k", Some(json!(owner)))]);
        }
        assert!(
            boards.get(Some(Owner::Session(2))).is_empty(),
            "the least recently written board goes first"
        );
    }
}
