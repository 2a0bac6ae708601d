//! Validation, the second stage of the pipeline (wire → plan → validated): a parsed
//! [`Plan`] plus the catalog becomes a [`ValidatedPlan`], or every problem is reported at
//! once. Here: ids, tools, cycles and the order of the work; `bind` ties what each step
//! reads to its source, `planned` makes each step ready to run, `outputs` binds what the
//! plan asks back.

use std::collections::HashMap;

use super::cycles::find_cycles;
use super::ids;
use super::issue::{IssueKind, PlanIssue, sort_issues};
use super::names::fold_name;
use super::parse::{Plan, Step};
use super::schema::{check_args, unlisted_arguments};
use super::tools::{RESOURCE_TOOL, ToolMatch, ToolSpec, resolve_tool, resource_spec};
use super::validated::{Limits, ValidatedPlan};
use foreign::foreign_templates;

mod bind;
mod fields;
mod foreign;
mod outputs;
mod planned;

/// The meta-tool's own name; a plan may not call it.
pub const EXECUTE_PLAN_TOOL: &str = "execute_plan";
/// The argument that receives the previous output under `chained` unless `pipe_to` says.
pub const DEFAULT_PIPE_TO: &str = "input";

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
    let ids: Vec<&str> = plan.steps.iter().map(|s| s.id.as_str()).collect();
    let mut slots: HashMap<String, (usize, bool)> = HashMap::new();
    let mut steps = Vec::new();
    let mut edges: Vec<Vec<usize>> = Vec::new();
    for (i, step) in plan.steps.iter().enumerate() {
        let read = v.reads(i, step, &slots, limits);
        v.issues.extend(foreign_templates(i, step, &ids));
        if let Some(read) = &read {
            v.fields(i, read, &specs);
        }
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
            let at = format!("steps[{i}].args");
            let schema = &spec.input_schema;
            v.issues
                .extend(check_args(schema, &step.args, &at, &implied));
            let tool = &spec.exported;
            v.warnings
                .extend(unlisted_arguments(schema, &step.args, &at, tool, &implied));
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
        as_task: plan.as_task,
        prompts: plan.prompts,
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
            let reason = ids::unusable(id);
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
