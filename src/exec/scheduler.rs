//! Dispatch on readiness: a step starts the moment every step it waits for has finished
//! (no waves, no barriers), bounded by the concurrency limits, with the plan's strategy and
//! error policy applied as steps end.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::foreach::{ItemOutcome, Loop};

mod loops;
mod summary;
use super::record::{RunRecord, StepRecord, StepStatus, millis};
use super::step::{Args, Attempted, CANCEL_GRACE, Ending, Launch, Resolve, attempt};
use super::{Invoker, Observer, Settings};
use crate::plan::{
    DependencyKind, OnError, PlannedStep, Prepared, RefSource, StepId, Strategy, ValidatedPlan,
};

/// Runs the plan to the end and returns its record. Stops early, promptly, when `cancel`
/// fires or the plan's time limit passes; every step still ends in exactly one status.
pub async fn run<I: Invoker>(
    plan: &ValidatedPlan,
    invoker: Arc<I>,
    settings: &Settings,
    observer: &dyn Observer,
    cancel: CancellationToken,
) -> RunRecord {
    let mut run = Run::new(plan);
    // A plan may shorten its time limit, never lengthen it past the configured one.
    let limit = plan
        .timeout_ms()
        .map_or(settings.plan_timeout, Duration::from_millis)
        .min(settings.plan_timeout);
    let deadline = tokio::time::sleep(limit);
    tokio::pin!(deadline);
    // Steps are polled here, in the scheduler's own task, rather than spawned: a step
    // spends its life waiting on its server, and handing each one to another thread cost
    // more than the scheduling itself (see BENCHMARKS.md, scheduler scaling).
    let mut steps = FuturesUnordered::new();
    loop {
        while let Some(unit) = run.next_ready(settings) {
            steps.push(run.launch(unit, &invoker, settings));
            if unit.item.is_none() {
                observer.step_started(run.step(unit.step));
            }
        }
        if steps.is_empty() {
            break;
        }
        // Once stopped, steps have their grace to end; past it (plus a margin) they are
        // abandoned here, whatever they are doing.
        let abandon_at = run.abandon_at();
        let watching = !matches!(run.phase, Phase::Stopped { .. });
        tokio::select! {
            Some(done) = steps.next() => run.finish(done, observer),
            () = &mut deadline, if watching => {
                let reason = format!("the plan timed out after {} ms", limit.as_millis());
                run.stop(reason, StepStatus::TimedOut, observer);
            }
            () = cancel.cancelled(), if watching => {
                run.stop("the plan was cancelled".into(), StepStatus::Cancelled, observer);
            }
            () = sleep_until(abandon_at) => {
                run.abandon(observer);
                break;
            }
        }
    }
    run.into_record()
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Where a run is: the scheduler's decisions depend on it.
#[derive(Debug, Clone, PartialEq)]
enum Phase {
    /// Steps start as they become ready.
    Open,
    /// A `competitive` race was won: nothing more starts, the other runners were told to
    /// stop, and the plan's time limit and cancellation still apply.
    Won,
    /// Stopped early (`fail_fast`, the time limit, a cancel): nothing more starts, the
    /// running steps were told to stop and end as `status`.
    Stopped {
        reason: String,
        status: StepStatus,
        since: Instant,
    },
}

/// A unit of work: a step, or one item of a `foreach` step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Unit {
    step: usize,
    item: Option<usize>,
}

impl Unit {
    fn step(step: usize) -> Self {
        Self { step, item: None }
    }
}

/// How a step ended, as the scheduler records it and applies the plan's policies.
struct Outcome {
    status: StepStatus,
    error: Option<String>,
    /// The output, when it succeeded.
    output: Option<Value>,
    /// What the record keeps as its output when it did not succeed.
    kept: Option<Value>,
    /// What its readers get under `on_error: continue` when it did not succeed (its
    /// error text when `None`).
    handed_on: Option<Value>,
    attempts: u32,
    duration_ms: Option<f64>,
}

/// The state of one run.
struct Run<'p> {
    plan: &'p ValidatedPlan,
    started: Instant,
    run_id: Arc<str>,
    /// Per step: who waits for it, and why.
    dependents: Vec<Vec<(usize, DependencyKind)>>,
    /// Per step: how many of the steps it waits for have not yet let it go.
    waiting: Vec<usize>,
    records: Vec<Option<StepRecord>>,
    /// Steps that ended without being a problem although they did not succeed: the
    /// losers of a race, the error path not taken, failures caught into a slot, steps
    /// whose condition did not hold.
    benign: Vec<bool>,
    outputs: HashMap<StepId, Value>,
    errors: HashMap<StepId, Value>,
    ready: VecDeque<Unit>,
    /// Running units: their cancel token and, once decided, why they were cancelled.
    running: HashMap<Unit, (CancellationToken, Option<String>)>,
    /// The loops of `foreach` steps whose items are running.
    loops: HashMap<usize, Loop>,
    per_server: HashMap<String, usize>,
    /// Units ended, of `total`: steps, and the items of `foreach` steps once known.
    finished: usize,
    total: usize,
    winner: Option<usize>,
    phase: Phase,
}

impl<'p> Run<'p> {
    fn new(plan: &'p ValidatedPlan) -> Self {
        let steps = plan.steps();
        let index: HashMap<&StepId, usize> =
            steps.iter().enumerate().map(|(i, s)| (&s.id, i)).collect();
        let mut dependents = vec![Vec::new(); steps.len()];
        let mut waiting = vec![0; steps.len()];
        for (i, step) in steps.iter().enumerate() {
            for dep in &step.depends_on {
                if let Some(&d) = index.get(&dep.step) {
                    dependents[d].push((i, dep.kind));
                    waiting[i] += 1;
                }
            }
        }
        let ready = (0..steps.len())
            .filter(|&i| waiting[i] == 0)
            .map(Unit::step)
            .collect();
        Self {
            plan,
            started: Instant::now(),
            run_id: new_run_id().into(),
            dependents,
            waiting,
            records: vec![None; steps.len()],
            benign: vec![false; steps.len()],
            outputs: HashMap::new(),
            errors: HashMap::new(),
            ready,
            running: HashMap::new(),
            loops: HashMap::new(),
            per_server: HashMap::new(),
            finished: 0,
            total: steps.len(),
            winner: None,
            phase: Phase::Open,
        }
    }

    fn step(&self, i: usize) -> &'p PlannedStep {
        &self.plan.steps()[i]
    }

    /// The next unit to start, if the limits allow one.
    fn next_ready(&mut self, settings: &Settings) -> Option<Unit> {
        if self.phase != Phase::Open {
            return None;
        }
        // A race too: runners past the limit start as earlier ones fail.
        if self.running.len() >= settings.max_concurrency.max(1) {
            return None;
        }
        let free = |unit: &Unit| {
            let server = &self.plan.steps()[unit.step].server;
            let server_free = settings
                .per_server
                .get(server)
                .is_none_or(|max| self.per_server.get(server).copied().unwrap_or(0) < *max);
            let loop_free =
                unit.item.is_none() || self.loops.get(&unit.step).is_some_and(Loop::has_room);
            server_free && loop_free
        };
        let pos = self.ready.iter().position(free)?;
        self.ready.remove(pos)
    }

    fn launch<I: Invoker>(
        &mut self,
        unit: Unit,
        invoker: &Arc<I>,
        settings: &Settings,
    ) -> impl Future<Output = Attempted> + Send + 'static {
        let i = unit.step;
        let step = self.step(i);
        // Only the arguments are resolved per item: the condition and the items were
        // read when the step itself was decided.
        let deferred = match unit.item {
            None => step.queries(),
            Some(_) => {
                let mut found = false;
                step.args
                    .visit_refs(&mut |r: &crate::plan::Ref, _| found |= r.query.is_some());
                found
            }
        };
        let (args, recorded) = if deferred {
            (Args::Deferred(self.resolver(step, unit.item)), None)
        } else {
            let (prepared, warnings) = self.prepare(step, unit.item);
            let args = match &prepared {
                Prepared::Call(args) => Some(args.clone()),
                _ => None,
            };
            (Args::Ready(prepared), Some((args, warnings)))
        };
        let token = CancellationToken::new();
        *self.per_server.entry(step.server.clone()).or_default() += 1;
        self.running.insert(unit, (token.clone(), None));
        let (args_now, warnings) = recorded.unwrap_or_default();
        match unit.item {
            None => {
                self.records[i] = Some(StepRecord {
                    args: args_now,
                    warnings,
                    started_ms: Some(millis(self.started.elapsed())),
                    ..StepRecord::unstarted(step)
                });
            }
            Some(k) => {
                if let Some(lp) = self.loops.get_mut(&i) {
                    lp.start(k, args_now, warnings);
                }
            }
        }
        let timeout = step
            .timeout_ms
            .map(Duration::from_millis)
            .or(settings.step_timeout);
        let launch = Launch {
            invoker: invoker.clone(),
            run: self.run_id.clone(),
            step: step.clone(),
            index: i,
            item: unit.item,
            timeout,
            backoff: settings.retry_backoff,
        };
        attempt(launch, args, token)
    }

    /// Decides a step, or one item of it, here and now.
    fn prepare(
        &self,
        step: &PlannedStep,
        item: Option<usize>,
    ) -> (Prepared, Vec<crate::plan::ResolveWarning>) {
        let lookup = |source: &RefSource| match source {
            RefSource::Output(id) => self.outputs.get(id),
            RefSource::Error(id) => self.errors.get(id),
            RefSource::Input | RefSource::Item | RefSource::Index => None,
        };
        let inputs = self.plan.inputs();
        match item.and_then(|k| Some((k, self.loops.get(&step.index)?.items.get(k)?))) {
            Some((k, value)) => step.prepare_item(inputs, &lookup, value, k),
            None => step.prepare(inputs, &lookup),
        }
    }

    /// Decides a step (or one item of it) later, elsewhere: from copies of what it reads.
    fn resolver(&self, step: &PlannedStep, item: Option<usize>) -> Resolve {
        let mut read: HashMap<RefSource, Value> = HashMap::new();
        for source in step.sources() {
            let value = match &source {
                RefSource::Output(id) => self.outputs.get(id),
                RefSource::Error(id) => self.errors.get(id),
                RefSource::Input | RefSource::Item | RefSource::Index => None,
            };
            if let Some(value) = value {
                read.insert(source, value.clone());
            }
        }
        let item = item.and_then(|k| Some((k, self.loops.get(&step.index)?.items.get(k)?.clone())));
        let inputs = self.plan.inputs().clone();
        let step = step.clone();
        Box::new(move || match &item {
            Some((k, value)) => step.prepare_item(&inputs, &|source| read.get(source), value, *k),
            None => step.prepare(&inputs, &|source| read.get(source)),
        })
    }

    /// Takes a finished unit: records it and applies the strategy and error policy.
    fn finish(&mut self, done: Attempted, observer: &dyn Observer) {
        let unit = Unit {
            step: done.index,
            item: done.item,
        };
        let (_, cancel_reason) = self.running.remove(&unit).unwrap_or_default();
        let server = &self.step(unit.step).server;
        if let Some(n) = self.per_server.get_mut(server) {
            *n = n.saturating_sub(1);
        }
        if let Some(k) = unit.item {
            self.finish_item(unit.step, k, done, cancel_reason, observer);
            return;
        }
        let i = unit.step;
        if let (Some((args, warnings)), Some(record)) = (done.resolved, self.records[i].as_mut()) {
            record.args = args;
            record.warnings = warnings;
        }
        let duration_ms = Some(millis(done.finished - done.started));
        let (status, error, output) = match self.called(done.ending, cancel_reason.clone()) {
            Ok(ended) => ended,
            Err(Ending::Skipped(reason)) => {
                if let Some(record) = self.records[i].as_mut() {
                    record.started_ms = None;
                    record.reason = Some(reason);
                }
                self.benign[i] = true;
                self.ended(i, observer);
                self.release_dependents(i, StepStatus::Skipped, observer);
                return;
            }
            // Told to stop before its items could start (a stop, a won race): it ends
            // as a running step would.
            Err(Ending::Expand(_)) if cancel_reason.is_some() || self.phase != Phase::Open => {
                let reason = match (&cancel_reason, &self.phase) {
                    (Some(why), _) => why.clone(),
                    (None, Phase::Stopped { reason, .. }) => reason.clone(),
                    _ => "cancelled".into(),
                };
                (self.stopped_status(), Some(reason), None)
            }
            Err(Ending::Expand(items)) => {
                self.expand(i, items, observer);
                return;
            }
            Err(_) => return,
        };
        let outcome = Outcome {
            status,
            error,
            output,
            kept: None,
            handed_on: None,
            attempts: done.attempts,
            duration_ms,
        };
        self.conclude(i, outcome, observer);
    }

    /// The status, error and output of a unit that called its tool (or resolved its
    /// value); a step's own decision (skipped, or items to loop over) comes back as `Err`.
    fn called(
        &self,
        ending: Ending,
        cancel_reason: Option<String>,
    ) -> Result<(StepStatus, Option<String>, Option<Value>), Ending> {
        Ok(match ending {
            Ending::Succeeded(value) => (StepStatus::Succeeded, None, Some(value)),
            Ending::Failed { message, .. } => (StepStatus::Failed, Some(message), None),
            Ending::TimedOut(message) => (StepStatus::TimedOut, Some(message), None),
            Ending::Cancelled => {
                let reason = cancel_reason.unwrap_or_else(|| "cancelled".into());
                (self.stopped_status(), Some(reason), None)
            }
            decided @ (Ending::Skipped(_) | Ending::Expand(_)) => return Err(decided),
        })
    }

    /// Records how step `i` ended and applies the strategy and error policy.
    fn conclude(&mut self, i: usize, outcome: Outcome, observer: &dyn Observer) {
        let Outcome {
            status,
            error,
            output,
            kept,
            handed_on,
            attempts,
            duration_ms,
        } = outcome;
        let step = self.step(i);
        let caught = status.is_failure() && step.catches_errors();
        match (&output, status) {
            (Some(value), StepStatus::Succeeded) => {
                self.outputs.insert(step.id.clone(), value.clone());
            }
            (_, s) if s.is_failure() => {
                let text = Value::String(error.clone().unwrap_or_default());
                if caught {
                    self.errors.insert(step.id.clone(), text.clone());
                    self.benign[i] = true;
                }
                if self.plan.on_error() == OnError::Continue {
                    self.outputs
                        .insert(step.id.clone(), handed_on.unwrap_or(text));
                }
            }
            _ => {}
        }
        if let Some(record) = self.records[i].as_mut() {
            record.status = status;
            record.error = error;
            record.output = match status {
                StepStatus::Succeeded => output,
                _ => self.outputs.get(&step.id).cloned().or(kept),
            };
            record.attempts = attempts;
            record.duration_ms = duration_ms;
        }
        self.ended(i, observer);
        if status == StepStatus::Succeeded
            && self.plan.strategy() == Strategy::Competitive
            && self.winner.is_none()
        {
            self.winner = Some(i);
            self.phase = Phase::Won;
            self.halt(&format!("lost the race to '{}'", step.id), true, observer);
        }
        if status.is_failure()
            && !caught
            && self.plan.on_error() == OnError::FailFast
            && self.phase == Phase::Open
        {
            let reason = format!("fail_fast: '{}' {}", step.id, describe(status));
            self.stop(reason, StepStatus::Cancelled, observer);
        }
        self.release_dependents(i, status, observer);
    }

    /// Lets dependents of step `i` go, or skips them, according to how `i` ended.
    fn release_dependents(&mut self, i: usize, status: StepStatus, observer: &dyn Observer) {
        let mut work = vec![(i, status)];
        while let Some((done, status)) = work.pop() {
            let id = &self.step(done).id;
            for (j, kind) in self.dependents[done].clone() {
                if self.records[j].is_some() {
                    continue;
                }
                let continue_on_error =
                    self.plan.on_error() == OnError::Continue && status.is_failure();
                let verdict = match kind {
                    DependencyKind::Sequence => Ok(()),
                    DependencyKind::Output | DependencyKind::After
                        if status == StepStatus::Succeeded || continue_on_error =>
                    {
                        Ok(())
                    }
                    DependencyKind::Error if status.is_failure() => Ok(()),
                    DependencyKind::Error if status == StepStatus::Succeeded => Err((
                        format!("'{id}' succeeded, so there is no error to read"),
                        true,
                    )),
                    _ => Err((
                        format!("dependency '{id}' {}", describe(status)),
                        self.benign[done],
                    )),
                };
                match verdict {
                    Ok(()) => {
                        self.waiting[j] -= 1;
                        if self.waiting[j] == 0 && self.phase == Phase::Open {
                            self.ready.push_back(Unit::step(j));
                        }
                    }
                    Err((reason, benign)) => {
                        self.skip(j, reason, observer);
                        self.benign[j] = benign;
                        work.push((j, StepStatus::Skipped));
                    }
                }
            }
        }
    }

    fn skip(&mut self, i: usize, reason: String, observer: &dyn Observer) {
        let step = self.step(i);
        self.records[i] = Some(StepRecord {
            reason: Some(reason),
            ..StepRecord::unstarted(step)
        });
        self.ended(i, observer);
    }

    fn ended(&mut self, i: usize, observer: &dyn Observer) {
        self.finished += 1;
        if let Some(record) = &self.records[i] {
            observer.step_finished(record, self.finished, self.total);
        }
    }

    /// How a running step that ends cancelled is recorded: timed out when the plan's
    /// time limit stopped it, cancelled otherwise.
    fn stopped_status(&self) -> StepStatus {
        match &self.phase {
            Phase::Stopped { status, .. } => *status,
            _ => StepStatus::Cancelled,
        }
    }

    /// Stops the plan early: running steps end as `status`, the rest are skipped.
    fn stop(&mut self, reason: String, status: StepStatus, observer: &dyn Observer) {
        self.phase = Phase::Stopped {
            reason: reason.clone(),
            status,
            since: Instant::now(),
        };
        self.halt(&reason, false, observer);
    }

    /// When the scheduler stops waiting for stopped steps.
    fn abandon_at(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Stopped { since, .. } => Some(*since + CANCEL_GRACE * 2),
            _ => None,
        }
    }

    /// Ends every unit still running after a stop and its grace, without it.
    fn abandon(&mut self, observer: &dyn Observer) {
        let status = self.stopped_status();
        let mut left: Vec<(Unit, Option<String>)> =
            self.running.drain().map(|(u, (_, why))| (u, why)).collect();
        left.sort_unstable_by_key(|(u, _)| (u.step, u.item));
        for (unit, why) in left {
            let reason = why.unwrap_or_else(|| "cancelled".into());
            let error = Some(format!("{reason} (it did not stop; abandoned)"));
            let i = unit.step;
            if let Some(k) = unit.item {
                let outcome = ItemOutcome {
                    status,
                    error,
                    output: None,
                    attempts: 1,
                    duration_ms: None,
                    resolved: None,
                };
                self.end_item(i, k, outcome, observer);
                self.conclude_loop_if_done(i, observer);
                continue;
            }
            if let Some(record) = self.records[i].as_mut() {
                record.status = status;
                record.error = error;
                record.duration_ms = record
                    .started_ms
                    .map(|start| millis(self.started.elapsed()) - start);
            }
            self.ended(i, observer);
        }
    }

    /// Starts nothing more: tells every running unit to stop (with `reason`), and skips
    /// every step and item not yet started.
    fn halt(&mut self, reason: &str, benign: bool, observer: &dyn Observer) {
        for (unit, (token, why)) in self.running.iter_mut() {
            *why = Some(reason.to_string());
            self.benign[unit.step] |= benign;
            token.cancel();
        }
        self.ready.clear();
        let mut looping: Vec<usize> = self.loops.keys().copied().collect();
        looping.sort_unstable();
        for &i in &looping {
            self.benign[i] |= benign;
            let unstarted = self.loops.get(&i).map(Loop::unstarted).unwrap_or_default();
            for k in unstarted {
                let outcome = ItemOutcome {
                    status: StepStatus::Skipped,
                    error: Some(reason.to_string()),
                    output: None,
                    attempts: 0,
                    duration_ms: None,
                    resolved: None,
                };
                self.end_item(i, k, outcome, observer);
            }
        }
        for j in 0..self.records.len() {
            if self.records[j].is_none() && !self.running.contains_key(&Unit::step(j)) {
                self.skip(j, reason.to_string(), observer);
                self.benign[j] = benign;
            }
        }
        for i in looping {
            self.conclude_loop_if_done(i, observer);
        }
    }
}

fn describe(status: StepStatus) -> &'static str {
    match status {
        StepStatus::Succeeded => "succeeded",
        StepStatus::Failed => "failed",
        StepStatus::Skipped => "was skipped",
        StepStatus::Cancelled => "was cancelled",
        StepStatus::TimedOut => "timed out",
    }
}

/// A random id (122 bits, as hex): it cannot be guessed, so a run with no session to
/// belong to (a stateless HTTP request's) is read only by whoever was given its id.
fn new_run_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
