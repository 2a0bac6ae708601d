//! The plans running now, each step's state so far: what the console's runs page shows
//! while a plan runs (its record is kept only once it ends). A run is watched through an
//! [`Observer`] that notes each step and passes everything on to the run's own observer;
//! it leaves the list when its [`Watching`] is dropped, however the run ended. And the
//! last lazy plans (`"mode": "lazy"`), which run nothing: what would run.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::exec::{ItemRecord, Observer, StepRecord, StepStatus};
use crate::plan::{PlannedStep, ValidatedPlan};

/// How many lazy plans are kept.
const KEPT_PLANNED: usize = 16;

/// The plans running in this process, and the last lazy ones.
#[derive(Default)]
pub struct Live {
    running: Mutex<Vec<Arc<Running>>>,
    next: AtomicU64,
    planned: Mutex<VecDeque<Arc<Planned>>>,
}

/// A lazy plan: what would run, in what order, and what would need approval.
pub struct Planned {
    /// Its number in this process (the console's link).
    pub key: u64,
    pub goal: Option<String>,
    /// When it was sent, in ms since the epoch.
    pub at_ms: u64,
    /// Its steps, none started, each with what it would wait for.
    pub steps: Vec<StepRecord>,
    /// The schedule as `planmux validate` prints it (levels, critical path, approval).
    pub schedule: String,
}

/// One plan running.
pub struct Running {
    key: u64,
    pub goal: Option<String>,
    pub started: Instant,
    /// Each step's id and tool, in plan order.
    pub steps: Vec<(String, String)>,
    now: Mutex<Vec<StepNow>>,
}

/// Where a step is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepNow {
    Waiting,
    Running(Instant),
    /// Ended, with its status and how long it took.
    Ended(StepStatus, Option<f64>),
}

impl Running {
    /// Each step's state now, in plan order.
    pub fn now(&self) -> Vec<StepNow> {
        self.now
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, index: usize, state: StepNow) {
        let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = now.get_mut(index) {
            *slot = state;
        }
    }

    fn index_of(&self, id: &str) -> Option<usize> {
        self.steps.iter().position(|(step, _)| step == id)
    }
}

impl Live {
    /// The plans running now, the oldest first.
    pub fn now(&self) -> Vec<Arc<Running>> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The last lazy plans, newest first.
    pub fn planned(&self) -> Vec<Arc<Planned>> {
        let planned = self.planned.lock().unwrap_or_else(PoisonError::into_inner);
        planned.iter().rev().cloned().collect()
    }

    /// Keeps `checked`, a lazy plan, for the console (the oldest beyond
    /// [`KEPT_PLANNED`] dropped).
    pub fn note_planned(&self, checked: &super::Checked) {
        let plan = &checked.plan;
        let noted = Arc::new(Planned {
            key: self.next.fetch_add(1, Ordering::Relaxed),
            goal: plan.goal().map(str::to_owned),
            at_ms: crate::state::now_ms(),
            steps: plan.steps().iter().map(StepRecord::unstarted).collect(),
            schedule: checked.planned_text(),
        });
        let mut planned = self.planned.lock().unwrap_or_else(PoisonError::into_inner);
        if planned.len() >= KEPT_PLANNED {
            planned.pop_front();
        }
        planned.push_back(noted);
    }

    /// Lists `plan` as running until the returned watch is dropped; its observer notes
    /// each step and tells `inner` everything.
    pub fn watch<'a>(&'a self, plan: &ValidatedPlan, inner: &'a dyn Observer) -> Watching<'a> {
        let running = Arc::new(Running {
            key: self.next.fetch_add(1, Ordering::Relaxed),
            goal: plan.goal().map(str::to_owned),
            started: Instant::now(),
            steps: (plan.steps().iter())
                .map(|s| (s.id.to_string(), s.exported.clone()))
                .collect(),
            now: Mutex::new(vec![StepNow::Waiting; plan.steps().len()]),
        });
        (self.running.lock().unwrap_or_else(PoisonError::into_inner)).push(running.clone());
        Watching {
            live: self,
            running,
            inner,
        }
    }
}

/// A plan listed as running, and the observer of its steps.
pub struct Watching<'a> {
    live: &'a Live,
    running: Arc<Running>,
    inner: &'a dyn Observer,
}

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        let key = self.running.key;
        let mut running = self
            .live
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        running.retain(|r| r.key != key);
    }
}

impl Observer for Watching<'_> {
    fn step_started(&self, step: &PlannedStep) {
        self.running
            .set(step.index, StepNow::Running(Instant::now()));
        self.inner.step_started(step);
    }

    fn step_finished(&self, record: &StepRecord, finished: usize, total: usize) {
        if let Some(index) = self.running.index_of(&record.id) {
            self.running
                .set(index, StepNow::Ended(record.status, record.duration_ms));
        }
        self.inner.step_finished(record, finished, total);
    }

    fn item_finished(&self, step: &PlannedStep, item: &ItemRecord, finished: usize, total: usize) {
        self.inner.item_finished(step, item, finished, total);
    }
}
