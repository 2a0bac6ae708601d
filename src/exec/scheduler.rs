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

use super::record::{RunRecord, RunStatus, Selection, StepRecord, StepStatus, millis};
use super::step::{Args, Attempted, CANCEL_GRACE, Ending, Launch, Resolve, attempt};
use super::{Invoker, Observer, Settings};
use crate::plan::{
    DependencyKind, OnError, PlannedStep, RefSource, StepId, Strategy, ValidatedPlan,
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
        while let Some(i) = run.next_ready(settings) {
            steps.push(run.launch(i, &invoker, settings, observer));
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
    /// losers of a race, the error path not taken, failures caught into a slot.
    benign: Vec<bool>,
    outputs: HashMap<StepId, Value>,
    errors: HashMap<StepId, Value>,
    ready: VecDeque<usize>,
    /// Running steps: their cancel token and, once decided, why they were cancelled.
    running: HashMap<usize, (CancellationToken, Option<String>)>,
    per_server: HashMap<String, usize>,
    finished: usize,
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
        let ready = (0..steps.len()).filter(|&i| waiting[i] == 0).collect();
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
            per_server: HashMap::new(),
            finished: 0,
            winner: None,
            phase: Phase::Open,
        }
    }

    fn step(&self, i: usize) -> &'p PlannedStep {
        &self.plan.steps()[i]
    }

    /// The next step to start, if the limits allow one.
    fn next_ready(&mut self, settings: &Settings) -> Option<usize> {
        if self.phase != Phase::Open {
            return None;
        }
        // A race too: runners past the limit start as earlier ones fail.
        if self.running.len() >= settings.max_concurrency.max(1) {
            return None;
        }
        let free = |i: &usize| {
            let server = &self.plan.steps()[*i].server;
            settings
                .per_server
                .get(server)
                .is_none_or(|max| self.per_server.get(server).copied().unwrap_or(0) < *max)
        };
        let pos = self.ready.iter().position(free)?;
        self.ready.remove(pos)
    }

    fn launch<I: Invoker>(
        &mut self,
        i: usize,
        invoker: &Arc<I>,
        settings: &Settings,
        observer: &dyn Observer,
    ) -> impl Future<Output = Attempted> + Send + 'static {
        let step = self.step(i);
        let (args, recorded) = if step.queries() {
            (Args::Deferred(self.resolver(step)), None)
        } else {
            let (args, warnings) =
                self.plan
                    .resolve_args_from(&step.id, &self.outputs, &self.errors);
            (Args::Ready(args.clone()), Some((args, warnings)))
        };
        let token = CancellationToken::new();
        *self.per_server.entry(step.server.clone()).or_default() += 1;
        self.running.insert(i, (token.clone(), None));
        let (args_now, warnings) = recorded.map_or((None, Vec::new()), |(a, w)| (Some(a), w));
        self.records[i] = Some(StepRecord {
            args: args_now,
            warnings,
            started_ms: Some(millis(self.started.elapsed())),
            ..StepRecord::unstarted(step)
        });
        observer.step_started(step);
        let timeout = step
            .timeout_ms
            .map(Duration::from_millis)
            .or(settings.step_timeout);
        let launch = Launch {
            invoker: invoker.clone(),
            run: self.run_id.clone(),
            step: step.clone(),
            index: i,
            timeout,
            backoff: settings.retry_backoff,
        };
        attempt(launch, args, token)
    }

    /// Resolves `step`'s arguments later, elsewhere: from copies of what it reads.
    fn resolver(&self, step: &PlannedStep) -> Resolve {
        let mut read: HashMap<RefSource, Value> = HashMap::new();
        for source in step.sources() {
            let value = match &source {
                RefSource::Output(id) => self.outputs.get(id),
                RefSource::Error(id) => self.errors.get(id),
                RefSource::Input => None,
            };
            if let Some(value) = value {
                read.insert(source, value.clone());
            }
        }
        let inputs = self.plan.inputs().clone();
        let step = step.clone();
        Box::new(move || step.resolve(&inputs, &|source| read.get(source)))
    }

    /// Records a finished step and applies the strategy and error policy.
    fn finish(&mut self, done: Attempted, observer: &dyn Observer) {
        let i = done.index;
        if let (Some((args, warnings)), Some(record)) = (done.resolved, self.records[i].as_mut()) {
            record.args = Some(args);
            record.warnings = warnings;
        }
        let step = self.step(i);
        let (_, cancel_reason) = self.running.remove(&i).unwrap_or_default();
        if let Some(n) = self.per_server.get_mut(&step.server) {
            *n = n.saturating_sub(1);
        }
        let (status, error, output) = match done.ending {
            Ending::Succeeded(value) => (StepStatus::Succeeded, None, Some(value)),
            Ending::Failed { message, value, .. } => (StepStatus::Failed, Some(message), value),
            Ending::TimedOut(message) => (StepStatus::TimedOut, Some(message), None),
            Ending::Cancelled => {
                let reason = cancel_reason.unwrap_or_else(|| "cancelled".into());
                (self.stopped_status(), Some(reason), None)
            }
        };
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
                    self.outputs.insert(step.id.clone(), text);
                }
            }
            _ => {}
        }
        if let Some(record) = self.records[i].as_mut() {
            record.status = status;
            record.error = error;
            record.output = match status {
                StepStatus::Succeeded => output,
                _ => self.outputs.get(&step.id).cloned(),
            };
            record.attempts = done.attempts;
            record.duration_ms = Some(millis(done.finished - done.started));
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
                            self.ready.push_back(j);
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
            observer.step_finished(record, self.finished, self.plan.steps().len());
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

    /// Ends every step still running after a stop and its grace, without it.
    fn abandon(&mut self, observer: &dyn Observer) {
        let status = self.stopped_status();
        let mut left: Vec<(usize, Option<String>)> =
            self.running.drain().map(|(i, (_, why))| (i, why)).collect();
        left.sort_unstable_by_key(|(i, _)| *i);
        for (i, why) in left {
            let reason = why.unwrap_or_else(|| "cancelled".into());
            if let Some(record) = self.records[i].as_mut() {
                record.status = status;
                record.error = Some(format!("{reason} (it did not stop; abandoned)"));
                record.duration_ms = record
                    .started_ms
                    .map(|start| millis(self.started.elapsed()) - start);
            }
            self.ended(i, observer);
        }
    }

    /// Starts nothing more: tells every running step to stop (with `reason`) and skips
    /// every step not yet started.
    fn halt(&mut self, reason: &str, benign: bool, observer: &dyn Observer) {
        for (i, (token, why)) in self.running.iter_mut() {
            *why = Some(reason.to_string());
            self.benign[*i] |= benign;
            token.cancel();
        }
        self.ready.clear();
        for j in 0..self.records.len() {
            if self.records[j].is_none() && !self.running.contains_key(&j) {
                self.skip(j, reason.to_string(), observer);
                self.benign[j] = benign;
            }
        }
    }

    fn into_record(self) -> RunRecord {
        let plan = self.plan;
        let records: Vec<StepRecord> = self
            .records
            .into_iter()
            .enumerate()
            .map(|(i, record)| {
                record.unwrap_or_else(|| StepRecord {
                    reason: Some("never became ready".into()),
                    ..StepRecord::unstarted(&plan.steps()[i])
                })
            })
            .collect();
        let winner = self.winner.map(|i| plan.steps()[i].id.to_string());
        let outputs: Vec<String> = match (&winner, plan.strategy(), plan.outputs_listed()) {
            (Some(winner), Strategy::Competitive, false) => vec![winner.clone()],
            _ => plan.outputs().iter().map(ToString::to_string).collect(),
        };
        let position: HashMap<&str, usize> = records
            .iter()
            .enumerate()
            .map(|(i, r)| (r.id.as_str(), i))
            .collect();
        // Once a race is won, the other runners' failures do not matter.
        let race_won = plan.strategy() == Strategy::Competitive && winner.is_some();
        let problem = !race_won
            && records
                .iter()
                .enumerate()
                .any(|(i, r)| r.status != StepStatus::Succeeded && !self.benign[i]);
        let asked: Vec<usize> = outputs
            .iter()
            .filter_map(|id| position.get(id.as_str()).copied())
            .filter(|&i| !self.benign[i])
            .collect();
        let succeeded = asked
            .iter()
            .filter(|&&i| records[i].status == StepStatus::Succeeded)
            .count();
        let status = if asked.is_empty() {
            if problem {
                RunStatus::Failed
            } else {
                RunStatus::Succeeded
            }
        } else if succeeded == 0 {
            RunStatus::Failed
        } else if problem || succeeded < asked.len() {
            RunStatus::Partial
        } else {
            RunStatus::Succeeded
        };
        let selections = plan
            .resolve_selections(&self.outputs)
            .into_iter()
            .map(|(name, value, warnings)| Selection {
                name,
                value,
                warnings,
            })
            .collect();
        RunRecord {
            selections,
            run_id: self.run_id.to_string(),
            goal: plan.goal().map(str::to_string),
            strategy: plan.strategy().as_str().to_string(),
            on_error: plan.on_error().as_str().to_string(),
            status,
            outputs,
            winner,
            stopped: match self.phase {
                Phase::Stopped { reason, .. } => Some(reason),
                _ => None,
            },
            warnings: plan
                .warnings()
                .iter()
                .map(|w| format!("{}: {}", w.location, w.message()))
                .collect(),
            duration_ms: millis(self.started.elapsed()),
            steps: records,
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

/// A short id, unique within this process and unlikely to repeat across restarts.
fn new_run_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default();
    format!("{:x}-{n}", t & 0xff_ffff_ffff)
}
