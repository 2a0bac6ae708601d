//! Validation: a parsed [`Plan`] plus the catalog becomes a [`ValidatedPlan`], or every
//! problem is reported at once.

use std::collections::HashMap;

use serde_json::Value;

use super::graph::find_cycles;
use super::issue::{IssueKind, PlanIssue, sort_issues};
use super::model::{Plan, Step, StepId, Strategy};
use super::names::closest;
use super::names::fold_name;
use super::refs::{self, RawRef, RawRoot};
use super::schema::check_args;
use super::template::{Ref, RefSource, Template};
use super::tools::{RESOURCE_TOOL, ToolMatch, ToolSpec, resolve_tool, resource_spec};
use super::validated::{Dependency, DependencyKind, Limits, Pipe, PlannedStep, ValidatedPlan};

mod outputs;

/// The meta-tool's own name; a plan may not call it.
pub const EXECUTE_PLAN_TOOL: &str = "execute_plan";
/// The argument that receives the previous output under `chained` unless `pipe_to` says.
pub const DEFAULT_PIPE_TO: &str = "input";
/// Longest step id: ids are names to read and write references with, and they are
/// quoted in every message about their step.
pub const MAX_ID_CHARS: usize = 64;
/// Words that cannot be step ids because references use them as roots.
const RESERVED_IDS: &[&str] = &["input", "inputs", "steps"];

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
        let args = v.references(i, step, &slots);
        if let Some(out) = &step.output_slots {
            slots.insert(out.success.clone(), (i, false));
            if let Some(error) = &out.error {
                slots.insert(error.clone(), (i, true));
            }
        }
        let after = v.depends_on(i, step);
        edges.push(v.edges(args.as_ref(), &after));
        let pipe = v.pipe(i, step, specs[i]);
        if let Some(spec) = specs[i] {
            let implied: Vec<String> = pipe.iter().map(|p| p.into.clone()).collect();
            v.issues.extend(check_args(
                &spec.input_schema,
                &step.args,
                &format!("steps[{i}].args"),
                &implied,
            ));
        }
        if let (Some(args), Some(spec)) = (args, specs[i]) {
            steps.push(v.planned(i, step, spec, args, after, pipe));
        }
    }
    let (selections, outputs) = v.asked();
    v.cycles(&edges);
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
        warnings,
    })
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
            RawRoot::Input | RawRoot::State(_) => None,
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

    fn references(
        &mut self,
        i: usize,
        step: &Step,
        slots: &HashMap<String, (usize, bool)>,
    ) -> Option<Template> {
        let plan = self.plan;
        let known = |name: &str| plan.steps.iter().any(|s| s.id == name);
        let prose = |r: &RawRef| {
            r.text.starts_with("$<") && matches!(&r.root, RawRoot::Step(name) if !known(name))
        };
        let args = step.args.literalize(&prose);
        let base = format!("steps[{i}].args");
        let mut map = |raw: &RawRef, below: &str| -> Option<Ref> {
            let at = format!("{base}{below}");
            let source = match &raw.root {
                RawRoot::Input => RefSource::Input,
                RawRoot::State(slot) => match slots.get(slot) {
                    Some(&(writer, caught)) => {
                        let id = StepId::new(self.plan.steps[writer].id.clone());
                        if caught {
                            RefSource::Error(id)
                        } else {
                            RefSource::Output(id)
                        }
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
                    let target = self.step_index(root, &raw.text, &at)?;
                    if !self.edge_allowed(i, target, &at) {
                        return None;
                    }
                    RefSource::Output(StepId::new(self.plan.steps[target].id.clone()))
                }
            };
            Some(Ref::bind(raw, source))
        };
        args.map_refs(&mut map)
    }

    fn depends_on(&mut self, i: usize, step: &Step) -> Vec<usize> {
        let mut after = Vec::new();
        for (k, entry) in step.depends_on.iter().enumerate() {
            let at = format!("steps[{i}].depends_on[{k}]");
            let root = match refs::parse_reference(entry, false) {
                Ok(parsed) if parsed.path.is_empty() && !matches!(parsed.root, RawRoot::Input) => {
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

    fn pipe(&mut self, i: usize, step: &Step, spec: Option<&ToolSpec>) -> Option<Pipe> {
        if self.plan.strategy != Strategy::Chained || i == 0 {
            return None;
        }
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
            from: StepId::new(self.plan.steps[i - 1].id.clone()),
            into,
        })
    }

    fn planned(
        &mut self,
        i: usize,
        step: &Step,
        spec: &ToolSpec,
        args: Template,
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
        args.visit_refs(&mut |r: &Ref, _| match &r.source {
            RefSource::Output(id) => add(id.clone(), DependencyKind::Output),
            RefSource::Error(id) => add(id.clone(), DependencyKind::Error),
            RefSource::Input => {}
        });
        let order = |id: &StepId| {
            self.first_index
                .get(id.as_str())
                .copied()
                .unwrap_or(usize::MAX)
        };
        depends_on.sort_by_key(|d| order(&d.step));
        let safe = spec.retry_safe() || step.retry_unsafe;
        if step.retries > 0 && !safe {
            self.warnings.push(PlanIssue::new(
                format!("steps[{i}].retries"),
                IssueKind::RetriesIgnored {
                    tool: spec.exported.clone(),
                },
            ));
        }
        PlannedStep {
            id: StepId::new(step.id.clone()),
            index: i,
            exported: spec.exported.clone(),
            server: spec.server.clone(),
            tool: spec.tool.clone(),
            tier: spec.tier,
            args,
            written_args: step.written_args.clone(),
            depends_on,
            timeout_ms: step.timeout_ms,
            retries: if safe { step.retries } else { 0 },
            retry_unsafe: step.retry_unsafe,
            pipe,
            output_slots: step.output_slots.clone(),
            description: step.description.clone(),
        }
    }

    /// The positions step's references and `depends_on` point at.
    fn edges(&self, args: Option<&Template>, after: &[usize]) -> Vec<usize> {
        let mut targets = after.to_vec();
        if let Some(args) = args {
            args.visit_refs(&mut |r: &Ref, _| {
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
