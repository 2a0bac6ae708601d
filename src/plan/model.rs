//! The canonical plan: what every dialect is normalised into before validation.
//!
//! A [`Plan`] is the parsed, not yet checked form. It still names tools the way the
//! model wrote them and references steps by whatever the model wrote (`cpu`,
//! `steps[1]`, `†state.language`); [`super::validate`] turns it into a
//! [`super::ValidatedPlan`].

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use super::condition::Condition;
use super::names::fold_name;
use super::refs::RawRef;
use super::template::Template;

/// The identifier of a step inside one plan (`cpu`, or `s2` when the model gave none).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct StepId(String);

impl StepId {
    /// Wraps an identifier; validation checks that it is well formed and unique.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The default id of the step at 0-based `index`: `s1`, `s2`, ….
    pub fn positional(index: usize) -> Self {
        Self(format!("s{}", index + 1))
    }

    /// The identifier as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StepId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for StepId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// How the steps of a plan are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// A dependency graph: each step starts when what it reads has finished.
    #[default]
    Auto,
    /// The same graph as `Auto`; accepted because models and seed dialects say it.
    Parallel,
    /// One step at a time, in listed order.
    Sequential,
    /// Listed order, and each step also receives the previous step's output.
    Chained,
    /// All steps at once; the first success wins and the rest are cancelled.
    Competitive,
}

impl Strategy {
    /// Every strategy with its canonical name, for parsing and for messages.
    pub const ALL: [(Strategy, &'static str); 5] = [
        (Strategy::Auto, "auto"),
        (Strategy::Parallel, "parallel"),
        (Strategy::Sequential, "sequential"),
        (Strategy::Chained, "chained"),
        (Strategy::Competitive, "competitive"),
    ];

    /// The canonical (snake_case) name.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Auto => "auto",
            Strategy::Parallel => "parallel",
            Strategy::Sequential => "sequential",
            Strategy::Chained => "chained",
            Strategy::Competitive => "competitive",
        }
    }

    /// Parses a strategy in any case (`AUTO`, `Parallel`, `planType: "CHAINED"`). Seed
    /// 002's `CONDITIONAL` and `ITERATIVE` are `auto`: their branches and loops are the
    /// steps' `when` and `foreach`.
    pub fn parse(text: &str) -> Option<Self> {
        let key = fold_name(text);
        if key == "conditional" || key == "iterative" {
            return Some(Strategy::Auto);
        }
        Self::ALL
            .iter()
            .find(|(_, name)| fold_name(name) == key)
            .map(|(strategy, _)| *strategy)
    }

    /// Whether steps run strictly in listed order, so a reference may only look back.
    pub fn is_ordered(self) -> bool {
        matches!(self, Strategy::Sequential | Strategy::Chained)
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a step failure does to the rest of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    /// Dependents of a failed step are skipped; independent steps run on.
    #[default]
    FailForward,
    /// The first failure cancels everything still running.
    FailFast,
    /// A failed step's error text becomes its output and dependents run.
    Continue,
}

impl OnError {
    /// Every policy with its canonical name.
    pub const ALL: [(OnError, &'static str); 3] = [
        (OnError::FailForward, "fail_forward"),
        (OnError::FailFast, "fail_fast"),
        (OnError::Continue, "continue"),
    ];

    /// The canonical (snake_case) name.
    pub fn as_str(self) -> &'static str {
        match self {
            OnError::FailForward => "fail_forward",
            OnError::FailFast => "fail_fast",
            OnError::Continue => "continue",
        }
    }

    /// Parses a policy in any case and with `_`, `-` or nothing between words.
    pub fn parse(text: &str) -> Option<Self> {
        let key = fold_name(text);
        Self::ALL
            .iter()
            .find(|(_, name)| fold_name(name) == key)
            .map(|(policy, _)| *policy)
    }
}

impl fmt::Display for OnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parsed plan in canonical form, before it is checked against the catalog.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// What the plan is for, as the model wrote it; shown in schedules and records.
    pub goal: Option<String>,
    /// The scheduling strategy (`auto` when the plan did not say).
    pub strategy: Strategy,
    /// The failure policy.
    pub on_error: OnError,
    /// Steps in listed order.
    pub steps: Vec<Step>,
    /// The steps whose values go back to the model; `None` means all of them.
    pub outputs: Option<Vec<String>>,
    /// Named selections that go back instead of whole step outputs (`outputs` written as
    /// an object: `{"hot": {"$ref": "hist", "jsonpath": "…"}}`), in written order.
    pub selections: Vec<(String, Template<RawRef>)>,
    /// The plan's `inputs` object, read by `input.…` and `†input.…` references.
    pub inputs: Value,
    /// A whole-plan time limit requested by the model, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// `"mode": "lazy"` or `"dry_run": true`: validate and return the schedule, run
    /// nothing.
    pub lazy: bool,
    /// Seed 002's `conditionPrompt` / `aggregationPrompt`: kept in the run record for
    /// the reader, not acted on.
    pub prompts: Vec<(String, String)>,
}

impl Plan {
    /// The names of the inputs the plan reads (`input.NAME…`, `†input.NAME…`), in the
    /// order first read: what a pipeline's derived input schema lists.
    pub fn inputs_read(&self) -> Vec<String> {
        self.read(&|r: &RawRef| match (&r.root, r.path.first()) {
            (super::refs::RawRoot::Input, Some(super::refs::PathSeg::Key(name))) => {
                Some(name.clone())
            }
            _ => None,
        })
    }

    /// The state slots the plan reads (`†state.SLOT`) that none of its own calls write:
    /// what it may take from an earlier run's board.
    pub fn slots_from_before(&self) -> Vec<String> {
        let written: Vec<&str> = self
            .steps
            .iter()
            .filter_map(|s| s.output_slots.as_ref())
            .flat_map(|o| std::iter::once(o.success.as_str()).chain(o.error.as_deref()))
            .collect();
        self.read(&|r: &RawRef| match &r.root {
            super::refs::RawRoot::State(slot) if !written.contains(&slot.as_str()) => {
                Some(slot.clone())
            }
            _ => None,
        })
    }

    /// What `pick` makes of the references the plan reads, each once, in plan order.
    fn read(&self, pick: &dyn Fn(&RawRef) -> Option<String>) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        let mut note = |r: &RawRef| {
            if let Some(name) = pick(r)
                && !names.contains(&name)
            {
                names.push(name);
            }
        };
        for step in &self.steps {
            if let Some(when) = &step.when {
                when.visit_refs(&mut note);
            }
            if let Some(items) = &step.foreach {
                items.visit_refs(&mut |r, _| note(r));
            }
            step.value
                .as_ref()
                .unwrap_or(&step.args)
                .visit_refs(&mut |r, _| note(r));
        }
        for (_, selection) in &self.selections {
            selection.visit_refs(&mut |r, _| note(r));
        }
        names
    }
}

/// One step of a parsed plan.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Step {
    /// The id the model gave, or the positional default (`s1`, `s2`, …).
    pub id: String,
    /// Whether `id` was written by the model (false for positional defaults).
    pub explicit_id: bool,
    /// The tool as written: an exported name, a bare tool name, or `server:tool`.
    pub tool: String,
    /// The server the model named beside a bare tool name (`serverId`/`server`).
    pub server: Option<String>,
    /// The arguments, with references already parsed.
    pub args: Template<RawRef>,
    /// The arguments object as the model wrote it (references unresolved): what a user
    /// is shown when asked to approve the step.
    pub written_args: Value,
    /// Explicit ordering edges (`depends_on`/`dependencies`), as written.
    pub depends_on: Vec<String>,
    /// Per-step time limit in milliseconds.
    pub timeout_ms: Option<u64>,
    /// How many times to retry a failed call (honoured only for safe tools).
    pub retries: u32,
    /// Allows retries on tools that are neither read-only nor idempotent.
    pub retry_unsafe: bool,
    /// Under `chained`, the argument that receives the previous step's output.
    pub pipe_to: Option<String>,
    /// Seed-004 `_outputPath`: the state slots this step writes.
    pub output_slots: Option<OutputSlots>,
    /// A human note (`description`), kept for records.
    pub description: Option<String>,
    /// A value step (`"value"`): no tool call; its output is this, references resolved.
    pub value: Option<Template<RawRef>>,
    /// Runs only when this holds (`"when"`).
    pub when: Option<Condition<RawRef>>,
    /// Calls the tool once per item of this array or reference (`"foreach"`).
    pub foreach: Option<Template<RawRef>>,
    /// Under `foreach`, how many items run at once.
    pub concurrency: Option<u64>,
}

/// Where a seed-004 step writes its result: `"†state.receipt || †state.error"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutputSlots {
    /// The state slot that receives the step's output when it succeeds.
    pub success: String,
    /// The state slot that receives the error when it fails; a failure written here is
    /// caught, so steps that read this slot run.
    pub error: Option<String>,
}
