//! The validated plan: the only form the executor accepts.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use super::condition::Condition;
use super::ids::StepId;
use super::issue::PlanIssue;
use super::parse::OutputSlots;
use super::resolve::{Missing, Reader};
use super::strategy::{OnError, Strategy};
use super::template::{Ref, RefSource, Template};

/// Default cap on steps per plan; `[proxy] max_plan_steps` overrides it.
pub const DEFAULT_MAX_PLAN_STEPS: usize = 256;

/// Default cap on the items of one `foreach` step; `[proxy] max_foreach_items`
/// overrides it. Each item is a tool call: a thousand is a large batch already.
pub const DEFAULT_MAX_FOREACH_ITEMS: usize = 1_000;

/// Limits applied by validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Plans with more steps are rejected before anything runs.
    pub max_plan_steps: usize,
    /// A `foreach` over more items fails (before anything runs when the items are
    /// written in the plan).
    pub max_foreach_items: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_plan_steps: DEFAULT_MAX_PLAN_STEPS,
            max_foreach_items: DEFAULT_MAX_FOREACH_ITEMS,
        }
    }
}

/// What a step does once it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// Calls its tool (once, or once per item).
    Call,
    /// Calls nothing: its output is its `value` with the references resolved (`args`
    /// holds that value).
    Value,
}

/// A `foreach` step's loop.
#[derive(Debug, Clone, PartialEq)]
pub struct Foreach {
    /// The items: an array, or a reference to one.
    pub items: Template,
    /// How many items run at once (`None`: as many as the plan's limits allow).
    pub concurrency: Option<usize>,
    /// More items than this fail the step.
    pub max_items: usize,
}

/// Why a step waits for another; the executor decides from this what a failure of the
/// other step means for this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DependencyKind {
    /// Reads the other step's output: needs it to succeed (or `on_error: continue`).
    Output,
    /// Reads the other step's caught error (`†state.error`): runs only if it failed.
    Error,
    /// Listed in `depends_on`: needs it to succeed, reads nothing.
    After,
    /// Implied by listed order under `sequential`: waits for it to finish, whatever
    /// the outcome.
    Sequence,
}

/// One edge into a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dependency {
    /// The step waited for.
    pub step: StepId,
    /// Why.
    pub kind: DependencyKind,
}

/// Under `chained`: the previous step's output goes into one argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pipe {
    /// The previous step.
    pub from: StepId,
    /// The argument that receives its output (`pipe_to`, default `input`).
    pub into: String,
}

/// A step ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedStep {
    /// The step's id (given, or `s1`, `s2`, … by position).
    pub id: StepId,
    /// 0-based position in the plan.
    pub index: usize,
    /// The exported tool name.
    pub exported: String,
    /// The downstream server.
    pub server: String,
    /// The tool's name on that server.
    pub tool: String,
    /// What the tool can change.
    pub tier: crate::policy::Tier,
    /// The arguments with references parsed.
    pub args: Template,
    /// The arguments object as the model wrote it (references unresolved).
    pub written_args: Value,
    /// What this step waits for, without duplicates, in plan order.
    pub depends_on: Vec<Dependency>,
    /// Per-step time limit requested by the plan.
    pub timeout_ms: Option<u64>,
    /// Retries that will actually happen (0 when the tool is not safe to repeat).
    pub retries: u32,
    /// Whether the step is retried only because the plan said `retry_unsafe` (its tool
    /// is neither read-only nor idempotent): then a timed-out call, which may have done
    /// its work, is not repeated. False for a tool safe to repeat, whatever the plan said.
    pub retry_unsafe: bool,
    /// Under `chained`, where the previous output goes (absent when args set it).
    pub pipe: Option<Pipe>,
    /// The top-level arguments the tool's input schema types as strings only: a
    /// reference's value that is not text reaches them as text (compact JSON), as it
    /// would spliced into a longer string, rather than as a value the tool refuses.
    pub text_args: Vec<String>,
    /// Seed-004 `_outputPath` slots.
    pub output_slots: Option<OutputSlots>,
    /// The step's description, if the plan gave one.
    pub description: Option<String>,
    /// A tool call or a value step.
    pub kind: StepKind,
    /// Runs only when this holds; otherwise it is skipped, which is no failure.
    pub when: Option<Condition>,
    /// Runs once per item.
    pub foreach: Option<Foreach>,
}

impl Foreach {
    /// What the loop goes over, in one line: the reference as written, or how many
    /// items the plan lists.
    pub fn describe(&self) -> String {
        let concurrency = self
            .concurrency
            .map(|n| format!(", {n} at a time"))
            .unwrap_or_default();
        let items = match &self.items {
            Template::Ref(r) => r.to_string(),
            Template::Literal(Value::Array(items)) => format!("{} items", items.len()),
            _ => "items".into(),
        };
        format!("{items}{concurrency}")
    }
}

impl PlannedStep {
    /// The tool as a schedule shows it: the exported name, or `(value)` for a value step.
    pub fn shown_tool(&self) -> &str {
        match self.kind {
            StepKind::Call => &self.exported,
            StepKind::Value => "(value)",
        }
    }

    /// Resolves the arguments: `lookup` returns what a step's output or caught error
    /// holds, `inputs` are the plan's. See [`ValidatedPlan::resolve_args`].
    pub fn resolve<'a>(
        &self,
        inputs: &'a Value,
        lookup: &dyn Fn(&RefSource) -> Option<&'a Value>,
    ) -> Result<Value, Missing> {
        let full = with_inputs(inputs, lookup);
        self.resolve_with(&Reader::new(&full))
    }

    /// [`Self::resolve`], reading with `reader` (the plan's inputs supplied).
    pub(super) fn resolve_with(&self, reader: &Reader<'_, '_>) -> Result<Value, Missing> {
        let field = match self.kind {
            StepKind::Call => "args",
            StepKind::Value => "value",
        };
        let mut args = reader.template(&self.args, field)?;
        if let (Some(pipe), Value::Object(map)) = (&self.pipe, &mut args)
            && !map.contains_key(&pipe.into)
        {
            let value = reader
                .source(&RefSource::Output(pipe.from.clone()))
                .cloned()
                .ok_or_else(|| Missing {
                    location: format!("args.{}", pipe.into),
                    reference: format!("pipe from {}", pipe.from),
                    message: format!("step `{}` has no output", pipe.from),
                    fallback: "read it with a {\"$ref\": …} that gives a \"default\"".into(),
                })?;
            map.insert(pipe.into.clone(), value);
        }
        if let Value::Object(map) = &mut args {
            for name in &self.text_args {
                if let Some(value) = map.get_mut(name)
                    && !matches!(value, Value::String(_) | Value::Null)
                {
                    *value = Value::String(value.to_string());
                }
            }
        }
        Ok(args)
    }

    /// Calls `f` on every reference the step reads: in its arguments (or value), its
    /// condition and its items.
    pub fn visit_refs(&self, f: &mut dyn FnMut(&Ref)) {
        self.args.visit_refs(&mut |r: &Ref, _| f(r));
        if let Some(when) = &self.when {
            when.visit_refs(f);
        }
        if let Some(foreach) = &self.foreach {
            foreach.items.visit_refs(&mut |r: &Ref, _| f(r));
        }
    }

    /// The sources this step reads (the piped step included).
    pub fn sources(&self) -> Vec<RefSource> {
        let mut sources: Vec<RefSource> = Vec::new();
        self.visit_refs(&mut |r: &Ref| {
            if !sources.contains(&r.source) {
                sources.push(r.source.clone());
            }
        });
        if let Some(pipe) = &self.pipe {
            sources.push(RefSource::Output(pipe.from.clone()));
        }
        sources
    }

    /// Whether a reference of this step runs a JSONPath query or a text form: its cost
    /// grows with the value it reads, so the executor resolves such a step off the I/O
    /// thread.
    pub fn queries(&self) -> bool {
        let mut found = false;
        self.visit_refs(&mut |r: &Ref| found |= r.costly());
        found
    }

    /// The ids this step waits for.
    pub fn waits_for(&self) -> impl Iterator<Item = &StepId> {
        self.depends_on.iter().map(|d| &d.step)
    }

    /// Whether a failure of this step is caught into a state slot (seed 004's
    /// `"†state.ok || †state.error"`), so it does not count against the plan.
    pub fn catches_errors(&self) -> bool {
        self.output_slots
            .as_ref()
            .is_some_and(|slots| slots.error.is_some())
    }
}

/// `lookup`, with the plan's `inputs` supplied for [`RefSource::Input`].
pub(super) fn with_inputs<'a, 'l>(
    inputs: &'a Value,
    lookup: &'l dyn Fn(&RefSource) -> Option<&'a Value>,
) -> impl Fn(&RefSource) -> Option<&'a Value> + 'l
where
    'a: 'l,
{
    move |source: &RefSource| match source {
        RefSource::Input => Some(inputs),
        other => lookup(other),
    }
}

/// A plan that passed validation. Only [`super::validate()`] builds one.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidatedPlan {
    pub(super) goal: Option<String>,
    pub(super) strategy: Strategy,
    pub(super) on_error: OnError,
    pub(super) steps: Vec<PlannedStep>,
    pub(super) outputs: Option<Vec<StepId>>,
    pub(super) selections: Vec<(String, Template)>,
    pub(super) inputs: Value,
    pub(super) timeout_ms: Option<u64>,
    pub(super) lazy: bool,
    pub(super) as_task: bool,
    pub(super) prompts: Vec<(String, String)>,
    pub(super) warnings: Vec<PlanIssue>,
    /// Step id → position in `steps`, so lookups stay O(1) in plans of thousands of steps.
    pub(super) index: HashMap<StepId, usize>,
}

impl ValidatedPlan {
    /// The plan's goal, as written.
    pub fn goal(&self) -> Option<&str> {
        self.goal.as_deref()
    }

    /// The scheduling strategy.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The failure policy.
    pub fn on_error(&self) -> OnError {
        self.on_error
    }

    /// Steps in listed order.
    pub fn steps(&self) -> &[PlannedStep] {
        &self.steps
    }

    /// A step by id.
    pub fn step(&self, id: &StepId) -> Option<&PlannedStep> {
        self.index.get(id).map(|&i| &self.steps[i])
    }

    /// A step's position in the plan.
    pub fn position(&self, id: &StepId) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// The steps whose values go back to the model: those listed in `outputs`, or all.
    pub fn outputs(&self) -> Vec<StepId> {
        match &self.outputs {
            Some(listed) => listed.clone(),
            None => self.steps.iter().map(|s| s.id.clone()).collect(),
        }
    }

    /// Named selections to return instead of whole step outputs (empty when `outputs`
    /// was a list of steps or absent).
    pub fn selections(&self) -> &[(String, Template)] {
        &self.selections
    }

    /// Resolves the named selections against finished outputs: each name with its value,
    /// or `None` when a step it reads has no output (it failed or never ran) or a
    /// reference found nothing (then with why).
    pub fn resolve_selections(
        &self,
        outputs: &HashMap<StepId, Value>,
    ) -> Vec<(String, Option<Value>, Option<Missing>)> {
        self.selections
            .iter()
            .map(|(name, template)| {
                let mut complete = true;
                template.visit_refs(&mut |r: &super::template::Ref, _| {
                    if let Some(id) = r.source.step() {
                        complete &= outputs.contains_key(id);
                    }
                });
                if !complete {
                    return (name.clone(), None, None);
                }
                let lookup = |source: &RefSource| -> Option<&Value> {
                    match source {
                        RefSource::Output(id) => outputs.get(id),
                        RefSource::Input => Some(&self.inputs),
                        RefSource::Error(_) | RefSource::Item | RefSource::Index => None,
                    }
                };
                match Reader::new(&lookup).template(template, &format!("outputs.{name}")) {
                    Ok(value) => (name.clone(), Some(value), None),
                    Err(missing) => (name.clone(), None, Some(missing)),
                }
            })
            .collect()
    }

    /// Whether the plan listed its outputs (rather than defaulting to every step).
    pub fn outputs_listed(&self) -> bool {
        self.outputs.is_some()
    }

    /// The plan's `inputs` object (empty when none was given).
    pub fn inputs(&self) -> &Value {
        &self.inputs
    }

    /// A whole-plan time limit requested by the plan.
    pub fn timeout_ms(&self) -> Option<u64> {
        self.timeout_ms
    }

    /// Whether the plan asked to be checked and shown, not run (`"mode": "lazy"`,
    /// `"dry_run": true`).
    pub fn lazy(&self) -> bool {
        self.lazy
    }

    /// Whether the plan asked to run as a task (`"as_task": true`), for a host that
    /// holds tasks.
    pub fn as_task(&self) -> bool {
        self.as_task
    }

    /// Seed 002's `conditionPrompt` / `aggregationPrompt`, as written.
    pub fn prompts(&self) -> &[(String, String)] {
        &self.prompts
    }

    /// Problems that do not stop the plan (such as retries on an unsafe tool).
    pub fn warnings(&self) -> &[PlanIssue] {
        &self.warnings
    }

    /// Resolves a step's arguments against finished steps. `lookup` returns what a
    /// source holds: a step's output for [`RefSource::Output`], its caught error for
    /// [`RefSource::Error`], or `None` when it has none; the plan's inputs are supplied
    /// here. Under `chained`, the previous output is piped in. A reference that finds
    /// nothing (and has no `default`) is the error. An unknown step id yields `null`.
    pub fn resolve_args<'a>(
        &'a self,
        step: &StepId,
        lookup: &dyn Fn(&RefSource) -> Option<&'a Value>,
    ) -> Result<Value, Missing> {
        let Some(planned) = self.step(step) else {
            return Ok(Value::Null);
        };
        planned.resolve(&self.inputs, lookup)
    }

    /// [`Self::resolve_args`] over maps of finished outputs and caught errors.
    pub fn resolve_args_from<'a>(
        &'a self,
        step: &StepId,
        outputs: &'a HashMap<StepId, Value>,
        errors: &'a HashMap<StepId, Value>,
    ) -> Result<Value, Missing> {
        self.resolve_args(step, &|source| match source {
            RefSource::Output(id) => outputs.get(id),
            RefSource::Error(id) => errors.get(id),
            RefSource::Input | RefSource::Item | RefSource::Index => None,
        })
    }
}
