//! Each step made ready to run: where a `chained` plan pipes the previous output, what
//! it waits for and why, the retries its tool allows, and the arguments that take text.

use serde_json::Value;

use super::bind::Read;
use super::{DEFAULT_PIPE_TO, Validator};
use crate::plan::ids::StepId;
use crate::plan::issue::{IssueKind, PlanIssue};
use crate::plan::parse::Step;
use crate::plan::strategy::Strategy;
use crate::plan::template::{Ref, RefSource};
use crate::plan::tools::ToolSpec;
use crate::plan::validated::{Dependency, DependencyKind, Pipe, PlannedStep, StepKind};

impl Validator<'_> {
    /// Under `chained`, where the previous step's output goes into this one. Nowhere
    /// when the args set that argument, or when the tool has no `input` argument and,
    /// with no `pipe_to`, the args already read the previous output themselves
    /// (`"content": "${step1.result}"` in seed 002's `CHAINED` plan): the data flows as
    /// written, and no argument is added.
    pub(super) fn pipe(
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
    pub(super) fn planned(
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
    pub(super) fn edges(&self, read: Option<&Read>, after: &[usize]) -> Vec<usize> {
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
