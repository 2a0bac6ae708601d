//! Validation: a parsed [`Plan`] plus the catalog becomes a [`ValidatedPlan`], or every
//! problem is reported at once.

use std::collections::HashMap;

use serde_json::Value;

use super::condition::Condition;
use super::graph::find_cycles;
use super::issue::{IssueKind, PlanIssue, sort_issues};
use super::model::{Plan, Step, StepId, Strategy};
use super::names::closest;
use super::names::fold_name;
use super::refs::{self, PathSeg, RawRef, RawRoot};
use super::schema::check_args;
use super::template::{Ref, RefSource, Template};
use super::tools::{RESOURCE_TOOL, ToolMatch, ToolSpec, resolve_tool, resource_spec};
use super::validated::{
    Dependency, DependencyKind, Foreach, Limits, Pipe, PlannedStep, StepKind, ValidatedPlan,
};

mod outputs;

/// The meta-tool's own name; a plan may not call it.
pub const EXECUTE_PLAN_TOOL: &str = "execute_plan";
/// The argument that receives the previous output under `chained` unless `pipe_to` says.
pub const DEFAULT_PIPE_TO: &str = "input";
/// Longest step id: ids are names to read and write references with, and they are
/// quoted in every message about their step.
pub const MAX_ID_CHARS: usize = 64;
/// Words that cannot be step ids because references use them as roots.
const RESERVED_IDS: &[&str] = &["input", "inputs", "steps", "item", "index"];

/// Checks a parsed plan against the catalog and the limits.
pub fn validate(
    plan: Plan,
    tools: &[ToolSpec],
    limits: &Limits,
) -> Result<ValidatedPlan, Vec<PlanIssue>> {
    let mut v = Validator {
        plan: &plan,
        issues: Vec::new(),
        warnings: Vec::new(),
        first_index: HashMap::new(),
    };
    // Past the step limit nothing else is worth the work: that one problem is the answer.
    if !v.limits(limits) {
        return Err(v.issues);
    }
    v.ids();
    let specs: Vec<Option<&ToolSpec>> = plan
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| v.tool(i, s, tools))
        .collect();
    let mut slots: HashMap<String, (usize, bool)> = HashMap::new();
    let mut steps = Vec::new();
    let mut edges: Vec<Vec<usize>> = Vec::new();
    for (i, step) in plan.steps.iter().enumerate() {
        let read = v.reads(i, step, &slots, limits);
        if let Some(out) = &step.output_slots {
            slots.insert(out.success.clone(), (i, false));
            if let Some(error) = &out.error {
                slots.insert(error.clone(), (i, true));
            }
        }
        let after = v.depends_on(i, step);
        edges.push(v.edges(read.as_ref(), &after));
        let pipe = v.pipe(i, step, specs[i], read.as_ref());
        if let Some(spec) = specs[i] {
            let implied: Vec<String> = pipe.iter().map(|p| p.into.clone()).collect();
            v.issues.extend(check_args(
                &spec.input_schema,
                &step.args,
                &format!("steps[{i}].args"),
                &implied,
            ));
        }
        let action = match (&step.value, specs[i]) {
            (Some(_), _) => Some(None),
            (None, Some(spec)) => Some(Some(spec)),
            (None, None) => None,
        };
        if let (Some(read), Some(spec)) = (read, action) {
            steps.push(v.planned(i, step, spec, read, after, pipe));
        }
    }
    let (selections, outputs) = v.asked();
    v.cycles(&edges);
    if plan.prompts.iter().any(|(key, _)| key == "conditionPrompt")
        && plan.steps.iter().all(|s| s.when.is_none())
    {
        v.warnings.push(PlanIssue::new(
            "conditionPrompt",
            IssueKind::PromptNotActedOn,
        ));
    }
    if !v.issues.is_empty() {
        sort_issues(&mut v.issues);
        return Err(v.issues);
    }
    let warnings = v.warnings;
    let index = steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.clone(), i))
        .collect();
    Ok(ValidatedPlan {
        index,
        goal: plan.goal,
        strategy: plan.strategy,
        on_error: plan.on_error,
        steps,
        outputs,
        selections,
        inputs: plan.inputs,
        timeout_ms: plan.timeout_ms,
        lazy: plan.lazy,
        prompts: plan.prompts,
        warnings,
    })
}

/// Everything a step reads, bound: its arguments (or value), its condition, its items.
struct Read {
    args: Template,
    when: Option<Condition>,
    foreach: Option<Foreach>,
}

impl Read {
    fn visit_refs(&self, f: &mut dyn FnMut(&Ref)) {
        self.args.visit_refs(&mut |r: &Ref, _| f(r));
        if let Some(when) = &self.when {
            when.visit_refs(f);
        }
        if let Some(foreach) = &self.foreach {
            foreach.items.visit_refs(&mut |r: &Ref, _| f(r));
        }
    }
}

struct Validator<'p> {
    plan: &'p Plan,
    issues: Vec<PlanIssue>,
    warnings: Vec<PlanIssue>,
    /// Each id's first position (later duplicates are reported, not indexed).
    first_index: HashMap<&'p str, usize>,
}

impl<'p> Validator<'p> {
    fn issue(&mut self, location: impl Into<String>, kind: IssueKind) {
        self.issues.push(PlanIssue::new(location, kind));
    }

    /// Checks the step count; false when the plan has too many steps to look further.
    fn limits(&mut self, limits: &Limits) -> bool {
        let count = self.plan.steps.len();
        if count == 0 {
            self.issue("steps", IssueKind::NoSteps);
        } else if count > limits.max_plan_steps {
            self.issue(
                "steps",
                IssueKind::TooManySteps {
                    count,
                    max: limits.max_plan_steps,
                },
            );
            return false;
        }
        true
    }

    fn ids(&mut self) {
        let plan = self.plan;
        for (i, step) in plan.steps.iter().enumerate() {
            let id = step.id.as_str();
            let bad_char = id
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'));
            let reason = if id.is_empty() {
                Some("it is empty".to_owned())
            } else if id.chars().count() > MAX_ID_CHARS {
                Some(format!("it is longer than {MAX_ID_CHARS} characters"))
            } else if let Some(c) = bad_char {
                Some(format!("it contains {c:?}"))
            } else if RESERVED_IDS.contains(&id) {
                Some("references use this word for something else".to_owned())
            } else {
                None
            };
            if let Some(reason) = reason {
                self.issue(
                    format!("steps[{i}].id"),
                    IssueKind::InvalidId {
                        id: id.to_owned(),
                        reason,
                    },
                );
            }
            match self.first_index.get(id) {
                Some(&first) => self.issue(
                    format!("steps[{i}].id"),
                    IssueKind::DuplicateId {
                        id: id.to_owned(),
                        first,
                    },
                ),
                None => {
                    self.first_index.insert(id, i);
                }
            }
        }
    }

    fn tool<'t>(&mut self, i: usize, step: &Step, tools: &'t [ToolSpec]) -> Option<&'t ToolSpec> {
        let at = format!("steps[{i}].tool");
        let name = step.tool.trim();
        if name.is_empty() {
            // A missing field was already reported by the parser; an empty one is not.
            if !step.tool.is_empty() {
                self.issue(at, IssueKind::MissingTool);
            }
            return None;
        }
        if name == RESOURCE_TOOL && step.server.is_none() {
            return Some(resource_spec());
        }
        let bare = name.rsplit("__").next().unwrap_or(name);
        if [EXECUTE_PLAN_TOOL, "execute_tool_plan"]
            .iter()
            .any(|t| fold_name(t) == fold_name(bare))
        {
            self.issue(
                at,
                IssueKind::RecursivePlan {
                    name: name.to_owned(),
                },
            );
            return None;
        }
        match resolve_tool(tools, step.server.as_deref(), name) {
            ToolMatch::Found(spec) => Some(spec),
            ToolMatch::Unknown(closest) => {
                let name = match &step.server {
                    Some(server) => format!("{server}:{name}"),
                    None => name.to_owned(),
                };
                self.issue(at, IssueKind::UnknownTool { name, closest });
                None
            }
            ToolMatch::Ambiguous(candidates) => {
                self.issue(
                    at,
                    IssueKind::AmbiguousTool {
                        name: name.to_owned(),
                        candidates,
                    },
                );
                None
            }
        }
    }

    /// Resolves a step-naming word or `steps[N]` to a position, reporting failures.
    fn step_index(&mut self, root: &RawRoot, text: &str, at: &str) -> Option<usize> {
        match root {
            RawRoot::Step(name) => match self.first_index.get(name.as_str()) {
                Some(&i) => Some(i),
                None => {
                    let ids = self
                        .plan
                        .steps
                        .iter()
                        .map(|s| s.id.as_str())
                        .chain(["input"]);
                    let closest = closest(name, ids);
                    let kind = IssueKind::UnknownStep {
                        text: text.to_owned(),
                        name: name.clone(),
                        closest,
                    };
                    self.issue(at, kind);
                    None
                }
            },
            RawRoot::Index(n) if *n < self.plan.steps.len() => Some(*n),
            RawRoot::Index(_) => {
                let count = self.plan.steps.len();
                self.issue(
                    at,
                    IssueKind::StepIndexOutOfRange {
                        text: text.to_owned(),
                        count,
                    },
                );
                None
            }
            RawRoot::Input | RawRoot::State(_) | RawRoot::Item | RawRoot::ItemIndex => None,
        }
    }

    /// Checks that step `i` may wait for step `target` under the plan's strategy.
    fn edge_allowed(&mut self, i: usize, target: usize, at: &str) -> bool {
        let steps = &self.plan.steps;
        let (me, them) = (steps[i].id.clone(), steps[target].id.clone());
        let kind = if target == i {
            IssueKind::SelfReference { id: me }
        } else if self.plan.strategy == Strategy::Competitive {
            IssueKind::CompetitiveDependency {
                step: me,
                target: them,
            }
        } else if self.plan.strategy.is_ordered() && target > i {
            let strategy = self.plan.strategy.to_string();
            IssueKind::ForwardReference {
                step: me,
                target: them,
                strategy,
            }
        } else {
            return true;
        };
        self.issue(at, kind);
        false
    }

    /// Binds every reference step `i` reads — in its arguments or value, its condition
    /// and its items — to what it reads, reporting each one that cannot be.
    fn reads(
        &mut self,
        i: usize,
        step: &Step,
        slots: &HashMap<String, (usize, bool)>,
        limits: &Limits,
    ) -> Option<Read> {
        let plan = self.plan;
        let known = |name: &str| plan.steps.iter().any(|s| s.id == name);
        let prose = |r: &RawRef| {
            r.text.starts_with("$<") && matches!(&r.root, RawRoot::Step(name) if !known(name))
        };
        let looped = step.foreach.is_some();
        let (written, field) = match &step.value {
            Some(value) => (value, "value"),
            None => (&step.args, "args"),
        };
        let base = format!("steps[{i}].{field}");
        let args = written.literalize(&prose).map_refs(&mut |raw, below| {
            let place = (!looped).then_some("this step has no foreach");
            self.bind(i, raw, &format!("{base}{below}"), slots, place)
        });
        let when = step.when.as_ref().map(|when| {
            when.map_refs(&mut |raw| {
                let place = Some("a step's condition is decided once, before its items");
                self.bind(i, raw, &format!("steps[{i}].when"), slots, place)
            })
        });
        let foreach = step.foreach.as_ref().map(|items| {
            let at = format!("steps[{i}].foreach");
            let bound = items.map_refs(&mut |raw, below| {
                let place = Some("the items are read before there is a current one");
                self.bind(i, raw, &format!("{at}{below}"), slots, place)
            })?;
            let written = match &bound {
                Template::Literal(Value::Array(items)) => Some(items.len()),
                Template::Array(items) => Some(items.len()),
                _ => None,
            };
            match &bound {
                _ if written.is_some_and(|n| n > limits.max_foreach_items) => {
                    let kind = IssueKind::TooManyItems {
                        count: written.unwrap_or_default(),
                        max: limits.max_foreach_items,
                    };
                    self.issue(at, kind);
                    None
                }
                Template::Literal(Value::Array(_)) | Template::Array(_) | Template::Ref(_) => {
                    Some(bound)
                }
                Template::Literal(other) => {
                    let found = super::describe_value(other);
                    self.issue(at, IssueKind::ForeachNotArray { found });
                    None
                }
                _ => {
                    let found = "an object or text with references inside".to_owned();
                    self.issue(at, IssueKind::ForeachNotArray { found });
                    None
                }
            }
        });
        if step.concurrency.is_some() && !looped {
            self.issue(
                format!("steps[{i}].concurrency"),
                IssueKind::ConcurrencyWithoutForeach,
            );
        }
        let concurrency = step
            .concurrency
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        Some(Read {
            args: args?,
            when: when.map_or(Some(None), |w| w.map(Some))?,
            foreach: foreach
                .map_or(Some(None), |f| f.map(Some))?
                .map(|items| Foreach {
                    items,
                    concurrency,
                    max_items: limits.max_foreach_items,
                }),
        })
    }

    /// What one reference of step `i` reads. `no_item` says why `item` / `index` cannot
    /// be read here, or is `None` where they can.
    fn bind(
        &mut self,
        i: usize,
        raw: &RawRef,
        at: &str,
        slots: &HashMap<String, (usize, bool)>,
        no_item: Option<&str>,
    ) -> Option<Ref> {
        let source = match &raw.root {
            RawRoot::Input => RefSource::Input,
            RawRoot::Item | RawRoot::ItemIndex => match no_item {
                Some(place) => {
                    let kind = IssueKind::ItemOutsideForeach {
                        text: raw.text.clone(),
                        place: place.to_owned(),
                    };
                    self.issue(at, kind);
                    return None;
                }
                None if matches!(raw.root, RawRoot::Item) => RefSource::Item,
                None => RefSource::Index,
            },
            RawRoot::State(slot) => match slots.get(slot) {
                Some(&(writer, caught)) => {
                    let id = StepId::new(self.plan.steps[writer].id.clone());
                    if caught {
                        RefSource::Error(id)
                    } else {
                        RefSource::Output(id)
                    }
                }
                // Written by an earlier run of the session: read from the plan's inputs.
                None if self.plan.inputs[super::BOARD_INPUT].get(slot).is_some() => {
                    let mut from_board = raw.clone();
                    let mut path = vec![
                        PathSeg::Key(super::BOARD_INPUT.to_owned()),
                        PathSeg::Key(slot.clone()),
                    ];
                    path.append(&mut from_board.path);
                    from_board.path = path;
                    return Some(Ref::bind(&from_board, RefSource::Input));
                }
                None => {
                    let closest = closest(slot, slots.keys().map(String::as_str));
                    self.issue(
                        at,
                        IssueKind::UnknownStateSlot {
                            slot: slot.clone(),
                            closest,
                        },
                    );
                    return None;
                }
            },
            root => {
                let target = self.step_index(root, &raw.text, at)?;
                if !self.edge_allowed(i, target, at) {
                    return None;
                }
                RefSource::Output(StepId::new(self.plan.steps[target].id.clone()))
            }
        };
        Some(Ref::bind(raw, source))
    }

    fn depends_on(&mut self, i: usize, step: &Step) -> Vec<usize> {
        let mut after = Vec::new();
        for (k, entry) in step.depends_on.iter().enumerate() {
            let at = format!("steps[{i}].depends_on[{k}]");
            let root = match refs::parse_reference(entry, false) {
                Ok(parsed)
                    if parsed.path.is_empty()
                        && matches!(parsed.root, RawRoot::Step(_) | RawRoot::Index(_)) =>
                {
                    parsed.root
                }
                _ => RawRoot::Step(entry.clone()),
            };
            if let Some(target) = self.step_index(&root, entry, &at)
                && self.edge_allowed(i, target, &at)
            {
                after.push(target);
            }
        }
        after
    }

    /// Under `chained`, where the previous step's output goes into this one. Nowhere
    /// when the args set that argument, or when the tool has no `input` argument and,
    /// with no `pipe_to`, the args already read the previous output themselves
    /// (`"content": "${step1.result}"` in seed 002's `CHAINED` plan): the data flows as
    /// written, and no argument is added.
    fn pipe(
        &mut self,
        i: usize,
        step: &Step,
        spec: Option<&ToolSpec>,
        read: Option<&Read>,
    ) -> Option<Pipe> {
        if self.plan.strategy != Strategy::Chained || i == 0 || step.value.is_some() {
            return None;
        }
        let previous = StepId::new(self.plan.steps[i - 1].id.clone());
        let into = step
            .pipe_to
            .clone()
            .unwrap_or_else(|| DEFAULT_PIPE_TO.to_owned());
        if step.args.object_keys().contains(&into.as_str()) {
            return None;
        }
        let properties = spec
            .and_then(|s| s.input_schema.get("properties"))
            .and_then(Value::as_object);
        if let (Some(spec), Some(properties)) = (spec, properties)
            && !properties.contains_key(&into)
        {
            let mut reads_previous = false;
            if let Some(read) = read {
                read.args.visit_refs(&mut |r: &Ref, _| {
                    reads_previous |= matches!(&r.source, RefSource::Output(id) if *id == previous);
                });
            }
            if step.pipe_to.is_none() && reads_previous {
                return None;
            }
            let mut available: Vec<String> = properties.keys().cloned().collect();
            available.sort();
            let kind = IssueKind::PipeTargetMissing {
                tool: spec.exported.clone(),
                argument: into.clone(),
                available,
            };
            let field = if step.pipe_to.is_some() {
                "pipe_to"
            } else {
                "tool"
            };
            self.issue(format!("steps[{i}].{field}"), kind);
        }
        Some(Pipe {
            from: previous,
            into,
        })
    }

    /// The step ready to run; `spec` is its tool, or `None` for a value step.
    fn planned(
        &mut self,
        i: usize,
        step: &Step,
        spec: Option<&ToolSpec>,
        read: Read,
        after: Vec<usize>,
        pipe: Option<Pipe>,
    ) -> PlannedStep {
        let steps = &self.plan.steps;
        let mut depends_on: Vec<Dependency> = Vec::new();
        let mut add = |step: StepId, kind: DependencyKind| match depends_on
            .iter_mut()
            .find(|d| d.step == step)
        {
            Some(existing)
                if existing.kind == DependencyKind::Sequence
                    || existing.kind == DependencyKind::After =>
            {
                existing.kind = kind;
            }
            Some(_) => {}
            None => depends_on.push(Dependency { step, kind }),
        };
        if self.plan.strategy.is_ordered() && i > 0 {
            let kind = if pipe.is_some() {
                DependencyKind::Output
            } else {
                DependencyKind::Sequence
            };
            add(StepId::new(steps[i - 1].id.clone()), kind);
        }
        for target in after {
            add(StepId::new(steps[target].id.clone()), DependencyKind::After);
        }
        read.visit_refs(&mut |r: &Ref| match &r.source {
            RefSource::Output(id) => add(id.clone(), DependencyKind::Output),
            RefSource::Error(id) => add(id.clone(), DependencyKind::Error),
            RefSource::Input | RefSource::Item | RefSource::Index => {}
        });
        let order = |id: &StepId| {
            self.first_index
                .get(id.as_str())
                .copied()
                .unwrap_or(usize::MAX)
        };
        depends_on.sort_by_key(|d| order(&d.step));
        let retry_safe = spec.is_none_or(ToolSpec::retry_safe);
        let safe = retry_safe || step.retry_unsafe;
        if let Some(spec) = spec
            && step.retries > 0
            && !safe
        {
            self.warnings.push(PlanIssue::new(
                format!("steps[{i}].retries"),
                IssueKind::RetriesIgnored {
                    tool: spec.exported.clone(),
                },
            ));
        }
        let (exported, server, tool) = spec.map_or_else(Default::default, |s| {
            (s.exported.clone(), s.server.clone(), s.tool.clone())
        });
        let text_args = spec.map(|s| text_args(&s.input_schema)).unwrap_or_default();
        PlannedStep {
            id: StepId::new(step.id.clone()),
            index: i,
            exported,
            server,
            tool,
            tier: spec.map_or(crate::policy::Tier::Read, |s| s.tier),
            kind: if spec.is_some() {
                StepKind::Call
            } else {
                StepKind::Value
            },
            args: read.args,
            when: read.when,
            foreach: read.foreach,
            written_args: step.written_args.clone(),
            depends_on,
            timeout_ms: step.timeout_ms,
            retries: if safe { step.retries } else { 0 },
            retry_unsafe: step.retry_unsafe && !retry_safe,
            pipe,
            text_args,
            output_slots: step.output_slots.clone(),
            description: step.description.clone(),
        }
    }

    /// The positions step's references and `depends_on` point at.
    fn edges(&self, read: Option<&Read>, after: &[usize]) -> Vec<usize> {
        let mut targets = after.to_vec();
        if let Some(read) = read {
            read.visit_refs(&mut |r: &Ref| {
                if let Some(&i) = r
                    .source
                    .step()
                    .and_then(|id| self.first_index.get(id.as_str()))
                {
                    targets.push(i);
                }
            });
        }
        targets.sort_unstable();
        targets.dedup();
        targets
    }

    /// Reports every dependency cycle once, as `a → b → a` in data-flow order
    /// (`a → b`: b reads a), starting from its earliest step.
    fn cycles(&mut self, edges: &[Vec<usize>]) {
        for cycle in find_cycles(edges) {
            let ids = &self.plan.steps;
            let mut path: Vec<String> = cycle.iter().map(|n| ids[*n].id.clone()).collect();
            if let Some(first) = path.first().cloned() {
                path.push(first);
            }
            let at = format!("steps[{}]", cycle.first().copied().unwrap_or(0));
            self.issue(at, IssueKind::Cycle { path });
        }
    }
}

/// The top-level properties `schema` types as strings and nothing else (`"type":
/// "string"`, or a list of types that are all `"string"` but for `"null"`).
fn text_args(schema: &Value) -> Vec<String> {
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return Vec::new();
    };
    let text_only = |property: &Value| match property.get("type") {
        Some(Value::String(kind)) => kind == "string",
        Some(Value::Array(kinds)) => {
            kinds.iter().any(|k| k == "string")
                && kinds.iter().all(|k| k == "string" || k == "null")
        }
        _ => false,
    };
    properties
        .iter()
        .filter(|(_, property)| text_only(property))
        .map(|(name, _)| name.clone())
        .collect()
}
