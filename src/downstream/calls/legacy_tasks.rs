//! A 2025-11-25 server's tools that run only as tasks (SEP-1686: `execution.taskSupport:
//! "required"`, which `fields.rs` notes from its raw `tools/list`) on a line connection.
//! rmcp 3.9 models no such task, so these calls take the raw path: the call goes with
//! `"task": {}`, the server answers with its task at once, and planmux asks for the task's
//! result under the call's raw id (`tasks/result`, which the server answers when the task
//! ends; what it asks meanwhile comes as requests during the call, relayed as any). The
//! result reaches the call's sink as its answer; the call's time limit, cancellation and
//! the connection's end hold. A call that ends before its task cancels the task
//! (`tasks/cancel`).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use serde::Deserialize;
use serde_json::json;

use super::params::edited;
use super::{CallTable, PREFIX};

/// The task a call became.
pub(super) struct LegacyTask {
    table: Weak<CallTable>,
    /// The server's id for it, from when it answered until the task ended.
    id: Option<String>,
}

impl LegacyTask {
    /// The task ended (its result, or an error, came): nothing to cancel.
    pub(super) fn ended(&mut self) {
        self.id = None;
    }

    /// Tells the server to cancel the task, if it is still out (bounded; its answer,
    /// under a raw id no call holds, is dropped).
    pub(super) fn cancel(&mut self) {
        let (Some(task), Some(table)) = (self.id.take(), self.table.upgrade()) else {
            return;
        };
        let id = [
            PREFIX,
            &table.next.fetch_add(1, Ordering::Relaxed).to_string(),
        ]
        .concat();
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tasks/cancel",
            "params": {"taskId": task}});
        if let Ok(bytes) = serde_json::to_vec(&request) {
            table.send_soon(bytes);
        }
    }
}

/// The answer that creates a task: `{"task": {"taskId": …}}`.
#[derive(Deserialize)]
struct Created {
    task: CreatedTask,
}

#[derive(Deserialize)]
struct CreatedTask {
    #[serde(rename = "taskId")]
    task_id: String,
}

impl CallTable {
    /// When the server speaks 2025-11-25 and its tool `tool` runs only as a task: the call
    /// (`bytes`) made a task (`"task": {}` in its params), and the task to follow.
    pub(super) fn as_task(self: &Arc<Self>, tool: &str, bytes: &mut Vec<u8>) -> Option<LegacyTask> {
        if !self.fields.runs_only_as_task(tool) {
            return None;
        }
        *bytes = edited(std::mem::take(bytes), |params| {
            params.entry("task").or_insert_with(|| json!({}));
        });
        Some(LegacyTask {
            table: Arc::downgrade(self),
            id: None,
        })
    }

    /// Whether `result`, the answer to call `id`, is the task it was sent to become: then
    /// the call stays, and asks for the task's result under the same id.
    pub(super) fn tasked(self: &Arc<Self>, id: &str, result: &[u8]) -> bool {
        // Most servers have no such tool, and most results are no task: a scan, not a
        // parse, tells.
        if !self.fields.any_task_only() || !crate::text::contains!(result, b"\"task\"") {
            return false;
        }
        let Ok(created) = serde_json::from_slice::<Created>(result) else {
            return false;
        };
        let task = created.task.task_id;
        {
            let mut waiting = self.waiting();
            let Some(waiter) = waiting.calls.get_mut(id) else {
                // Its call ended before the task came (a cancellation, its time limit):
                // the task is not left running. The answer itself is dropped.
                if id.starts_with(PREFIX) {
                    drop(waiting);
                    let mut orphan = LegacyTask {
                        table: Arc::downgrade(self),
                        id: Some(task),
                    };
                    orphan.cancel();
                }
                return false;
            };
            let following = waiter.turns.as_mut().and_then(|turns| turns.task.as_mut());
            let Some(following) = following.filter(|following| following.id.is_none()) else {
                return false;
            };
            following.id = Some(task.clone());
        }
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tasks/result",
            "params": {"taskId": task}});
        match serde_json::to_vec(&request) {
            Ok(bytes) => self.send_soon(bytes),
            Err(_) => return false,
        }
        true
    }
}
