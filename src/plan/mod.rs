//! The plan language: parse every dialect into one model, resolve references, and
//! validate against the catalog before anything runs. Pure: no I/O.
//!
//! The pipeline, one folder or file a stage: the wire's JSON → `parse/` → [`Plan`] →
//! `validate/` → [`ValidatedPlan`] (`validated`) → the executor, which asks each ready
//! step's [`PlannedStep`] what to do (`ready`: its condition, then its items, value or
//! arguments) as the steps it reads finish, and reads each call's output (`step_output`).
//! Beside it: `ids` and `strategy`, which every stage names; the reference language
//! (`refs`, `query`, `template`, `text_form`, `lenient`, `resolve`, `condition`); what validation checks against
//! (`tools`, `schema`, `cycles`) and reports (`issue`, `names` for hints); the schedule a
//! lazy plan shows (`levels`, `diagrams`) and the `execute_plan` text (`describe`).
//! docs/plan-language.md is the specification.

mod condition;
mod cycles;
mod describe;
mod diagrams;
mod ids;
mod issue;
mod lenient;
mod levels;
mod names;
mod parse;
mod query;
mod ready;
mod refs;
mod resolve;
mod schema;
mod step_output;
mod strategy;
mod template;
mod text_form;
mod tools;
mod validate;
mod validated;

#[cfg(test)]
mod tests;

pub use condition::{Condition, OPERATORS, Op, truthy};
pub use cycles::find_cycles;
pub use describe::{execute_plan_description, execute_plan_input_schema, plan_schema};
pub use diagrams::{dot, mermaid};
pub use ids::StepId;
pub use issue::{
    IssueKind, IssueList, MAX_ISSUE_CHARS, MAX_ISSUES, PlanIssue, cap_issues, describe_value,
    render_issues, sort_issues,
};
pub use lenient::{MAX_PARSED_DEPTH, MAX_PARSED_TEXT_BYTES};
pub use levels::{Schedule, schedule};
pub(crate) use names::fold_name;
pub use parse::{MAX_UNWRAP, OutputSlots, Plan, Step, Unopened, open_wrapper, parse};
pub use query::JsonQuery;
pub use ready::{CONDITION_FALSE, Prepared};
pub use refs::{PathSeg, RawRef, RawRoot, select};
pub use resolve::{Lookup, Missing, Reader};
pub use schema::{check_args, unlisted_arguments};
pub use step_output::{ToolOutcome, output_value, parse_text, tool_outcome};
pub use strategy::{OnError, Strategy};
pub use template::{Piece, REF_OBJECT_KEYS, Ref, RefSource, Template};
pub use text_form::TextForm;
pub use tools::{RESOURCE_TOOL, ToolMatch, ToolSpec, find_called, resolve_called, resolve_tool};
pub use validate::{DEFAULT_PIPE_TO, EXECUTE_PLAN_TOOL, validate};
pub use validated::{
    DEFAULT_MAX_FOREACH_ITEMS, DEFAULT_MAX_PLAN_STEPS, Dependency, DependencyKind, Foreach, Limits,
    Pipe, PlannedStep, StepKind, ValidatedPlan,
};

use serde_json::Value;

/// Parses and validates in one go: what `execute_plan` and `planmux validate` call. At
/// most [`MAX_ISSUES`] issues come back, then one that counts the rest.
///
/// Problems found while parsing and while validating are reported together, except
/// that a plan whose whole shape is broken (bad JSON, no steps array) is not validated,
/// and validation problems at a place the parser already reported are left out.
pub fn prepare(
    value: &Value,
    tools: &[ToolSpec],
    limits: &Limits,
) -> Result<ValidatedPlan, Vec<PlanIssue>> {
    prepare_on(value, tools, limits, &|_| None)
}

/// [`prepare`] for a plan that starts from `board`, which gives the value of a state slot
/// earlier runs of the same session wrote (seed 004's whiteboard): readable as
/// `†state.SLOT` where no call of the plan writes the slot. Only the slots the plan reads
/// are looked up; they travel in the plan's inputs, under [`BOARD_INPUT`], beside any the
/// plan sets there itself (the plan's win).
pub fn prepare_on(
    value: &Value,
    tools: &[ToolSpec],
    limits: &Limits,
    board: &dyn Fn(&str) -> Option<Value>,
) -> Result<ValidatedPlan, Vec<PlanIssue>> {
    check(value, tools, limits, board).map_err(issue::cap_issues)
}

/// The input that holds the slots a plan starts from.
pub const BOARD_INPUT: &str = "†state";

fn check(
    value: &Value,
    tools: &[ToolSpec],
    limits: &Limits,
    board: &dyn Fn(&str) -> Option<Value>,
) -> Result<ValidatedPlan, Vec<PlanIssue>> {
    names::reset_hint_budget();
    let (mut plan, mut issues) = parse::parse_lenient(value);
    // Only what the plan reads from before: the rest of the board stays out of its
    // inputs (and out of what an approval shows).
    let from_board: serde_json::Map<String, Value> = plan
        .slots_from_before()
        .into_iter()
        .filter_map(|slot| Some((slot.clone(), board(&slot)?)))
        .collect();
    if !from_board.is_empty()
        && let Value::Object(inputs) = &mut plan.inputs
    {
        let entry = inputs
            .entry(BOARD_INPUT)
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Value::Object(slots) = entry {
            for (slot, value) in from_board {
                slots.entry(slot).or_insert(value);
            }
        }
    }
    let fatal = issues
        .iter()
        .any(|i| matches!(i.location.as_str(), "plan" | "steps" | "calls"));
    if fatal {
        return Err(issues);
    }
    match validate(plan, tools, limits) {
        Ok(validated) if issues.is_empty() => Ok(validated),
        Ok(_) => Err(issues),
        Err(found) => {
            let broken: Vec<String> = issues.iter().map(|i| i.location.clone()).collect();
            let covered = |location: &str| {
                broken.iter().any(|b| {
                    location == b || (b.ends_with(".args") && location.starts_with(b.as_str()))
                })
            };
            for issue in found {
                if !covered(&issue.location) && !issues.contains(&issue) {
                    issues.push(issue);
                }
            }
            issue::sort_issues(&mut issues);
            Err(issues)
        }
    }
}
