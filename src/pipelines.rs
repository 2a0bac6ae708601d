//! Pipelines (seed 003): plans saved in the config and listed as tools. Calling one runs
//! its plan with the call's arguments as the plan's `inputs`, through the same checks,
//! approval and executor as `execute_plan`; its result is the plan's result. A plan may
//! call a pipeline as a step (nesting; the config refuses cycles).
//!
//! Each pipeline is checked against the live catalog whenever it is listed or called, so
//! a pipeline whose tool is gone says which one, instead of failing half-way.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use crate::config::PipelineConfig;
use crate::exec::result_schema;
use crate::plan::{IssueList, Limits, ToolSpec, prepare};
use crate::policy::Tier;

/// The server a pipeline's tool belongs to in plans and records. No downstream server can
/// have this name (parentheses are not allowed in server names).
pub const PIPELINE_SERVER: &str = "(pipeline)";

/// The pipelines of a config, callees before their callers.
#[derive(Debug, Clone, Default)]
pub struct Pipelines {
    list: Vec<PipelineConfig>,
}

/// A pipeline, checked against the current catalog.
#[derive(Debug, Clone)]
pub struct PipelineState {
    pub name: String,
    /// Its tool, or why it cannot run now.
    pub ready: Result<Ready, String>,
}

/// A pipeline that can run.
#[derive(Debug, Clone)]
pub struct Ready {
    /// What plans validate its steps against.
    pub spec: ToolSpec,
    /// Its listing.
    pub tool: Tool,
    /// Steps in its plan.
    pub steps: usize,
    /// The servers its steps call, those of the pipelines it calls included (a step that
    /// reads a resource names none: its server is known only when it runs).
    pub servers: Vec<String>,
}

impl Pipelines {
    /// The configured pipelines, ordered so that each comes after those it calls (the
    /// config has refused cycles).
    pub fn new(configs: &[PipelineConfig]) -> Self {
        let index: HashMap<&str, usize> = configs
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.as_str(), i))
            .collect();
        let mut order: Vec<usize> = Vec::new();
        fn visit(
            i: usize,
            configs: &[PipelineConfig],
            index: &HashMap<&str, usize>,
            order: &mut Vec<usize>,
            seen: &mut Vec<bool>,
        ) {
            if seen[i] {
                return;
            }
            seen[i] = true;
            for tool in crate::config::called_tools(&configs[i].plan) {
                if let Some(&j) = index.get(tool.as_str()) {
                    visit(j, configs, index, order, seen);
                }
            }
            order.push(i);
        }
        let mut seen = vec![false; configs.len()];
        for i in 0..configs.len() {
            visit(i, configs, &index, &mut order, &mut seen);
        }
        Self {
            list: order.into_iter().map(|i| configs[i].clone()).collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The pipeline called `name`.
    pub fn get(&self, name: &str) -> Option<&PipelineConfig> {
        self.list.iter().find(|p| p.name == name)
    }

    /// What running `pipeline` with `inputs` sends to the plan checks: `execute_plan`'s
    /// arguments. The call's arguments are the plan's inputs, over any the saved plan
    /// sets itself (as defaults).
    pub fn arguments(pipeline: &PipelineConfig, inputs: Value) -> Value {
        let Some(mut plan) = opened(&pipeline.plan) else {
            // Not a plan: the plan checks say why.
            return json!({"plan": pipeline.plan, "inputs": inputs});
        };
        let saved = plan.remove("inputs").or_else(|| plan.remove("input"));
        let mut merged = match saved {
            Some(Value::Object(defaults)) => defaults,
            _ => Map::new(),
        };
        if let Value::Object(given) = inputs {
            merged.extend(given);
        }
        plan.insert("inputs".into(), Value::Object(merged));
        Value::Object(plan)
    }

    /// Every pipeline checked against the catalog's `tools` (and the pipelines it calls),
    /// in config-independent call order.
    pub fn check(&self, tools: &[ToolSpec], limits: &Limits) -> Vec<PipelineState> {
        if self.list.is_empty() {
            return Vec::new();
        }
        let mut specs: Vec<ToolSpec> = tools.to_vec();
        let mut states: Vec<PipelineState> = Vec::new();
        for pipeline in &self.list {
            let ready = ready(pipeline, &specs, limits, &states);
            if let Ok(ready) = &ready {
                specs.push(ready.spec.clone());
            }
            states.push(PipelineState {
                name: pipeline.name.clone(),
                ready,
            });
        }
        states
    }
}

fn ready(
    pipeline: &PipelineConfig,
    specs: &[ToolSpec],
    limits: &Limits,
    called: &[PipelineState],
) -> Result<Ready, String> {
    let name = &pipeline.name;
    if let Some(taken) = specs.iter().find(|s| s.exported == *name) {
        return Err(format!(
            "its name is taken by the tool '{}' of server '{}'; rename the pipeline",
            taken.tool, taken.server
        ));
    }
    let plan =
        prepare(&Pipelines::arguments(pipeline, json!({})), specs, limits).map_err(|issues| {
            format!(
                "its plan ({}) does not validate against the tools available now:\n{}",
                pipeline.source,
                IssueList(&issues)
            )
            .trim_end()
            .to_owned()
        })?;
    let tier = plan
        .steps()
        .iter()
        .map(|s| s.tier)
        .max()
        .unwrap_or(Tier::Read);
    let input_schema = pipeline
        .input_schema
        .clone()
        .unwrap_or_else(|| derived_schema(pipeline));
    let spec = ToolSpec {
        exported: name.clone(),
        server: PIPELINE_SERVER.to_owned(),
        tool: name.clone(),
        input_schema: input_schema.clone(),
        output_schema: None,
        read_only: tier == Tier::Read,
        idempotent: false,
        tier,
    };
    let schema = match input_schema {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let tool = Tool::new(name.clone(), pipeline.description.clone(), Arc::new(schema))
        .with_raw_output_schema(Arc::new(match result_schema() {
            Value::Object(map) => map,
            _ => Map::new(),
        }))
        .with_annotations(
            ToolAnnotations::new()
                .read_only(tier == Tier::Read)
                .destructive(tier == Tier::Destructive)
                .idempotent(false)
                .open_world(true),
        );
    let mut servers: Vec<String> = Vec::new();
    for step in plan.steps() {
        let nested = called
            .iter()
            .filter(|c| step.server == PIPELINE_SERVER && c.name == step.tool)
            .filter_map(|c| c.ready.as_ref().ok());
        let named = nested.flat_map(|r| r.servers.iter().cloned());
        servers.extend(named.chain((step.server != PIPELINE_SERVER).then(|| step.server.clone())));
    }
    servers.sort();
    servers.dedup();
    Ok(Ready {
        spec,
        tool,
        steps: plan.steps().len(),
        servers,
    })
}

/// An input schema from the plan's `input.NAME` references: each name a property of any
/// type, required unless the saved plan's `inputs` give it a default.
fn derived_schema(pipeline: &PipelineConfig) -> Value {
    let plan = crate::plan::parse(&pipeline.plan).ok();
    let names = plan.as_ref().map(|p| p.inputs_read()).unwrap_or_default();
    let defaulted = |name: &String| {
        plan.as_ref()
            .is_some_and(|p| p.inputs.get(name.as_str()).is_some())
    };
    let required: Vec<&String> = names.iter().filter(|n| !defaulted(n)).collect();
    let properties: Map<String, Value> = names
        .iter()
        .map(|n| {
            (
                n.clone(),
                json!({"description": format!("read by the plan as input.{n}")}),
            )
        })
        .collect();
    json!({"type": "object", "properties": properties, "required": required})
}

/// A saved plan as one plan object, as the plan checks read it: steps alone become
/// `{"steps": …}`, and a `{"plan": …}` wrapper (its plan an object, steps, or their JSON
/// text) is opened, its other fields filling in what the inner plan lacks. `None` when
/// it is no plan.
fn opened(plan: &Value) -> Option<Map<String, Value>> {
    let mut plan = match plan {
        Value::Array(steps) => return Some(Map::from_iter([("steps".into(), json!(steps))])),
        Value::Object(plan) => plan.clone(),
        _ => return None,
    };
    // As deep as the plan checks open wrappers.
    for depth in 0..=crate::plan::MAX_UNWRAP {
        if !plan.contains_key("plan") {
            return Some(plan);
        }
        plan = crate::plan::open_wrapper(&plan, depth).ok()?;
    }
    None
}

#[cfg(test)]
mod tests;
