//! Runs a scenario for real against the demo servers: the plan through `execute_plan`'s
//! runner, and the same calls one by one as a model without plans would make them.
//!
//! The scripted model's direct calls take their arguments from the outputs it has read,
//! exactly as the plan's references would: each is resolved by planmux's own resolver
//! against the direct calls' real outputs, and checked against the arguments the plan run
//! resolved, so all three arms do the same work.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Context, anyhow, bail, ensure};
use planmux::downstream::Downstreams;
use planmux::exec::{Quiet, RunRecord, RunStatus};
use planmux::plan::{StepId, ValidatedPlan, output_value, render_issues, schedule};
use planmux::policy::Approver;
use planmux::runner::{PlanRunner, Unchecked};
use rmcp::model::{CallToolRequestParams, CallToolResponse};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::scenarios::Scenario;

/// One direct tool call and what came back.
pub struct Call {
    /// The exported tool name.
    pub tool: String,
    /// The arguments the model writes.
    pub args: Value,
    /// The result's text content: what the host puts into the conversation.
    pub result_text: String,
}

/// Everything the arms replay.
pub struct Replay {
    /// The direct calls by dependency level (a level's calls are independent).
    pub levels: Vec<Vec<Call>>,
    /// `execute_plan`'s arguments, as the model sends them.
    pub plan: Value,
    /// `execute_plan`'s result text: what the host puts into the conversation.
    pub plan_result_text: String,
    /// Bytes of the result's `structuredContent`, for hosts that show the model that
    /// instead of the text.
    pub plan_result_structured_bytes: usize,
    /// The model's final answer, the same in every arm.
    pub answer: String,
}

/// Runs `scenario` both ways. An invalid plan, a failed step, a reference that found
/// nothing or a direct call that differs from the plan's is an error: a broken scenario
/// must stop the benchmark, not skew its figures.
pub async fn replay(
    scenario: &Scenario,
    runner: &PlanRunner,
    downstreams: &Downstreams,
) -> anyhow::Result<Replay> {
    let plan = runner
        .validate(&scenario.plan)
        .map_err(|issues| anyhow!("invalid plan:\n{}", render_issues(&issues)))?;
    ensure!(
        plan.warnings().is_empty(),
        "plan warnings:\n{}",
        render_issues(plan.warnings())
    );
    for id in scenario.plan_only {
        ensure!(
            plan.step(&StepId::new(*id)).is_some(),
            "plan_only names no step '{id}'"
        );
    }
    let record = run_plan(scenario, runner).await?;
    let result = runner.result(&record);
    let levels = direct_calls(scenario, &plan, &record, downstreams).await?;
    Ok(Replay {
        levels,
        plan: scenario.plan.clone(),
        plan_result_text: record.render_text(&result),
        plan_result_structured_bytes: result.to_string().len(),
        answer: scenario.answer(&record)?,
    })
}

/// Runs the plan as `execute_plan` would, approved up front (a host asks its user either
/// way, direct calls included); anything short of full success is an error.
async fn run_plan(scenario: &Scenario, runner: &PlanRunner) -> anyhow::Result<Arc<RunRecord>> {
    let cancel = CancellationToken::new();
    let checked = match runner
        .check(
            scenario.plan.clone(),
            None,
            &planmux::policy::Grant::all(),
            &cancel,
        )
        .await
    {
        Ok(checked) => checked,
        Err(Unchecked::Invalid(issues)) => bail!("invalid plan:\n{}", render_issues(&issues)),
        Err(Unchecked::Unfinished(why)) => bail!("{why}"),
    };
    let approval = checked
        .approval
        .as_ref()
        .map(|asked| runner.approve(asked, Approver::Flag, None));
    let record = runner
        .run(&checked.plan, approval, None, &Quiet, cancel)
        .await;
    // A reference that finds nothing fails its step, so success says every one found.
    ensure!(
        record.status == RunStatus::Succeeded,
        "the plan {}: {}",
        record.status.as_str(),
        record.render_text(&runner.result(&record))
    );
    Ok(record)
}

/// The plan's calls made one by one, level by level, leaving out the steps a model that
/// reads the data itself does not need.
async fn direct_calls(
    scenario: &Scenario,
    plan: &ValidatedPlan,
    record: &RunRecord,
    downstreams: &Downstreams,
) -> anyhow::Result<Vec<Vec<Call>>> {
    let mut outputs: HashMap<StepId, Value> = HashMap::new();
    let errors = HashMap::new();
    let mut levels = Vec::new();
    for level in schedule(plan).levels() {
        let mut calls = Vec::new();
        for id in level
            .iter()
            .filter(|id| !scenario.plan_only.contains(&id.as_str()))
        {
            let args = plan
                .resolve_args_from(id, &outputs, &errors)
                .map_err(|missing| anyhow::anyhow!("step '{id}': {missing}"))?;
            let planned = record
                .step(id.as_str())
                .with_context(|| format!("step '{id}' is not in the run record"))?;
            ensure!(
                planned.args.as_ref() == Some(&args),
                "step '{id}': the direct call's arguments {args} differ from the plan's {:?}",
                planned.args
            );
            let (result_text, output) = call(downstreams, &planned.tool, &args).await?;
            outputs.insert(id.clone(), output);
            calls.push(Call {
                tool: planned.tool.clone(),
                args,
                result_text,
            });
        }
        if !calls.is_empty() {
            levels.push(calls);
        }
    }
    Ok(levels)
}

/// Calls a tool directly; returns the result's text content and its output value.
async fn call(
    downstreams: &Downstreams,
    tool: &str,
    args: &Value,
) -> anyhow::Result<(String, Value)> {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = args.as_object().cloned();
    // The benchmark plays the host calling tools one by one: the direct route.
    let grant = downstreams.grant(None);
    let proof = downstreams
        .authorize(tool, &planmux::policy::Route::Direct, &grant)
        .await?;
    let response = downstreams
        .call_tool(params, &proof, None, &CancellationToken::new())
        .await
        .with_context(|| format!("calling {tool}"))?;
    let CallToolResponse::Complete(result) = response else {
        bail!("{tool} asked for more input");
    };
    let text: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.as_str())
        .collect();
    let text = text.join("\n");
    ensure!(result.is_error != Some(true), "{tool} failed: {text}");
    let output = output_value(&serde_json::to_value(&result)?);
    Ok((text, output))
}
