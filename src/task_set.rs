//! Tasks that planmux runs itself: a plan a host asked to run as a task (SEP-2663, the
//! extension `io.modelcontextprotocol/tasks`), a 2025-11-25 stdio host's task-augmented
//! calls (SEP-1686), and the conformance fixture's jobs. rmcp's
//! [`TaskManager`] runs each and answers `tasks/get`, `tasks/update` and `tasks/cancel`
//! for it: its state, its input requests, its TTL, cooperative cancel. A manager has no
//! way to forget one task, so each task gets its own, and a [`TaskSet`] keeps the newest
//! of them: the oldest is shut down (its work aborted, its state dropped) when one more
//! starts past the bound, so a client that never polls cannot grow planmux without bound.
//! The set owns its tasks' work: dropping it shuts every one down.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use rmcp::ErrorData;
use rmcp::model::{DetailedTask, InputResponses, Task};
use rmcp::task_manager::{TaskContext, TaskFuture, TaskManager, TaskOptions};

/// A bounded set of tasks.
pub struct TaskSet {
    kept: Mutex<VecDeque<(String, TaskManager)>>,
    /// How many are kept.
    max: usize,
    /// How long each stays observable, and how often a client should poll.
    ttl_ms: u64,
    poll_interval_ms: u64,
}

impl TaskSet {
    /// At most `max` tasks, each observable for `ttl_ms`, polled every
    /// `poll_interval_ms`.
    pub fn new(max: usize, ttl_ms: u64, poll_interval_ms: u64) -> Self {
        Self {
            kept: Mutex::default(),
            max: max.max(1),
            ttl_ms,
            poll_interval_ms,
        }
    }

    /// Starts `work` as a task; it is observable by [`Self::get`] before this returns.
    pub fn start(&self, work: impl FnOnce(TaskContext) -> TaskFuture) -> Task {
        let options = TaskOptions::new()
            .with_ttl_ms(self.ttl_ms)
            .with_poll_interval_ms(self.poll_interval_ms);
        let manager = TaskManager::new();
        let task = manager.spawn(options, work);
        let mut kept = self.kept();
        while kept.len() >= self.max {
            if let Some((_, oldest)) = kept.pop_front() {
                oldest.shutdown();
            }
        }
        kept.push_back((task.task_id.clone(), manager));
        task
    }

    /// The manager of a task, or the -32602 an unknown `taskId` is.
    fn manager(&self, task_id: &str) -> Result<TaskManager, ErrorData> {
        let kept = self.kept();
        let found = kept.iter().find(|(id, _)| id == task_id);
        found
            .map(|(_, manager)| manager.clone())
            .ok_or_else(|| ErrorData::invalid_params(format!("unknown task '{task_id}'"), None))
    }

    /// `tasks/get`.
    pub fn get(&self, task_id: &str) -> Result<DetailedTask, ErrorData> {
        self.manager(task_id)?.get_task(task_id)
    }

    /// `tasks/update`: answers the task's questions; keys it did not ask are ignored.
    pub fn update(&self, task_id: &str, responses: InputResponses) -> Result<(), ErrorData> {
        self.manager(task_id)?.update_task(task_id, responses)
    }

    /// `tasks/cancel`: asks the task to stop; a finished task stays as it ended.
    pub fn cancel(&self, task_id: &str) -> Result<(), ErrorData> {
        self.manager(task_id)?.cancel_task(task_id)
    }

    /// Every kept task, oldest first.
    pub fn list(&self) -> Vec<DetailedTask> {
        let kept: Vec<(String, TaskManager)> = self.kept().iter().cloned().collect();
        kept.iter()
            .filter_map(|(id, manager)| manager.get_task(id).ok())
            .collect()
    }

    /// How many tasks are kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.kept().len()
    }

    /// The kept tasks. A poisoned lock still holds a valid queue (no push or pop panics
    /// half-way), so it is used as is.
    fn kept(&self) -> MutexGuard<'_, VecDeque<(String, TaskManager)>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for TaskSet {
    /// The tasks' work ends with the set: a manager's tasks run on their own until it is
    /// shut down.
    fn drop(&mut self) {
        for (_, manager) in self.kept().drain(..) {
            manager.shutdown();
        }
    }
}
