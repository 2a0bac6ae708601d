//! Dispatch on readiness: a step starts the moment every step it waits for has finished
//! (no waves, no barriers), bounded by the concurrency limits, with the plan's strategy and
//! error policy applied as steps end (`outcomes`), loops run item by item (`loops`), an
//! early stop (`stops`) and the record once all have ended (`summary`).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::foreach::Loop;
use super::record::{RunRecord, StepRecord, StepStatus, millis};
use super::step::{Args, Attempted, Launch, Resolve, attempt};
use super::{Invoker, Observer, Settings};
use crate::plan::{DependencyKind, PlannedStep, Prepared, RefSource, StepId, ValidatedPlan};

mod loops;
mod outcomes;
mod stops;
mod summary;

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
                    .visit_refs(&mut |r: &crate::plan::Ref, _| found |= r.costly_per_item());
                found
            }
        };
        let (args, recorded) = if deferred {
            (Args::Deferred(self.resolver(step, unit.item)), None)
        } else {
            let prepared = self.prepare(step, unit.item);
            let args = match &prepared {
                Prepared::Call(args) => Some(args.clone()),
                _ => None,
            };
            (Args::Ready(prepared), Some(args))
        };
        let token = CancellationToken::new();
        *self.per_server.entry(step.server.clone()).or_default() += 1;
        self.running.insert(unit, (token.clone(), None));
        let args_now = recorded.flatten();
        match unit.item {
            None => {
                self.records[i] = Some(StepRecord {
                    args: args_now,
                    started_ms: Some(millis(self.started.elapsed())),
                    ..StepRecord::unstarted(step)
                });
            }
            Some(k) => {
                if let Some(lp) = self.loops.get_mut(&i) {
                    lp.start(k, args_now);
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
        super::traced::traced(attempt(launch, args, token), step, unit.item)
    }

    /// Decides a step, or one item of it, here and now.
    fn prepare(&self, step: &PlannedStep, item: Option<usize>) -> Prepared {
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
}

/// A random id (122 bits, as hex): it cannot be guessed, so a run with no session to
/// belong to (a stateless HTTP request's) is read only by whoever was given its id.
fn new_run_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
