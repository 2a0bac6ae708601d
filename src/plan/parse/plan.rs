//! The parsed plan: what every dialect is normalised into before validation.
//!
//! A [`Plan`] is the parsed, not yet checked form. It still names tools the way the
//! model wrote them and references steps by whatever the model wrote (`cpu`,
//! `steps[1]`, `†state.language`); `plan::validate` turns it into a
//! [`ValidatedPlan`](crate::plan::ValidatedPlan).

use serde::Serialize;
use serde_json::Value;

use crate::plan::condition::Condition;
use crate::plan::refs::{PathSeg, RawRef, RawRoot};
use crate::plan::strategy::{OnError, Strategy};
use crate::plan::template::Template;

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
    /// `"as_task": true`: answer a host that holds tasks (SEP-2663) with a task at once,
    /// and run the plan as that task.
    pub as_task: bool,
    /// Seed 002's `conditionPrompt` / `aggregationPrompt`: kept in the run record for
    /// the reader, not acted on.
    pub prompts: Vec<(String, String)>,
}

impl Plan {
    /// The names of the inputs the plan reads (`input.NAME…`, `†input.NAME…`), in the
    /// order first read: what a pipeline's derived input schema lists.
    pub fn inputs_read(&self) -> Vec<String> {
        self.read(&|r: &RawRef| match (&r.root, r.path.first()) {
            (RawRoot::Input, Some(PathSeg::Key(name))) => Some(name.clone()),
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
            RawRoot::State(slot) if !written.contains(&slot.as_str()) => Some(slot.clone()),
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
