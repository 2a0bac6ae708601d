//! `[pipelines.NAME]`: saved plans exported as tools (seed 003). Each is read and parsed
//! at load, and pipelines that call each other in a cycle are a config error.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value as Json;

use super::read::Section;
use super::validate::Cx;
use super::values::PlanSource;
use super::{is_name_char, wire};

/// Names the host already knows as planmux's own tools.
const RESERVED: &[&str] = &["execute_plan", "approve_plan", "search_tools"];

/// One pipeline, as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineConfig {
    /// Its name, and the name of the tool it is listed as.
    pub name: String,
    /// The tool's description.
    pub description: String,
    /// The plan, in any dialect, as JSON.
    pub plan: Json,
    /// Where the plan came from: its file, or `inline`.
    pub source: String,
    /// The tool's input schema, when the config gives one (otherwise it is derived from
    /// the plan's `input.*` references).
    pub input_schema: Option<Json>,
}

impl Cx<'_> {
    /// One `[pipelines.NAME]`; `separator` is `None` when `[proxy]` refused a key, and then
    /// the name is not checked against it.
    pub(super) fn pipeline(
        &self,
        name: &str,
        section: Section<wire::Pipeline>,
        separator: Option<&str>,
    ) -> Option<PipelineConfig> {
        let wrong_name = if let Some(separator) = separator.filter(|sep| name.contains(sep)) {
            Some(format!(
                "a pipeline name may not contain the separator '{separator}': it would read as a server's tool"
            ))
        } else if name.is_empty() || !name.chars().all(is_name_char) {
            Some("a pipeline name uses only A-Z a-z 0-9 _ -: it is the name of a tool".into())
        } else if RESERVED.contains(&name) {
            Some(format!(
                "'{name}' is one of planmux's own tools; choose another name"
            ))
        } else {
            None
        };
        if let Some(message) = wrong_name {
            self.key_error("[pipelines]", name, message);
            return None;
        }
        let s = &format!("[pipelines.{name}]");
        let w = self.accept(section, s, "[pipelines]", name)?;
        let plan = match w.plan {
            Some(PlanSource::File(path)) => {
                let file = self.base.join(self.home(path));
                read_plan(&file).map(|plan| (plan, file.display().to_string()))
            }
            Some(PlanSource::Inline(plan)) => Ok((plan, "inline".to_owned())),
            None => Err("is missing: give the plan file".to_owned()),
        };
        let (plan, source) = plan
            .and_then(|(plan, source)| runnable(&plan, &source).map(|()| (plan, source)))
            .map_err(|message| self.key_error(s, "plan", message))
            .ok()?;
        Some(PipelineConfig {
            name: name.to_owned(),
            description: (w.description.map(|text| text.0))
                .unwrap_or_else(|| format!("Runs the pipeline '{name}'.")),
            plan,
            source,
            input_schema: w.input_schema.map(|schema| schema.0),
        })
    }

    /// Pipelines may call pipelines, but never in a cycle.
    pub(super) fn pipeline_cycles(&self, pipelines: &[PipelineConfig]) {
        let index: HashMap<&str, usize> = pipelines
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.as_str(), i))
            .collect();
        let edges: Vec<Vec<usize>> = pipelines
            .iter()
            .map(|p| {
                called_tools(&p.plan)
                    .iter()
                    .filter_map(|tool| index.get(tool.as_str()).copied())
                    .collect()
            })
            .collect();
        for (i, pipeline) in pipelines.iter().enumerate() {
            if edges[i].contains(&i) {
                let section = format!("[pipelines.{}]", pipeline.name);
                self.section_error(&section, "the pipeline calls itself");
            }
        }
        for cycle in crate::plan::find_cycles(&edges) {
            let mut names: Vec<&str> = cycle.iter().map(|&i| pipelines[i].name.as_str()).collect();
            names.push(names[0]);
            // `a → b`: a calls b.
            names.reverse();
            let message = format!(
                "pipelines call each other in a cycle: {}",
                names.join(" → ")
            );
            self.section_error("[pipelines]", message);
        }
    }
}

/// A plan file's JSON.
fn read_plan(file: &Path) -> Result<Json, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", file.display()))
}

/// Whether a pipeline can run the plan from `source`: it parses, and it is not lazy.
fn runnable(plan: &Json, source: &str) -> Result<(), String> {
    match crate::plan::parse(plan) {
        Err(issues) => {
            let issues = crate::plan::IssueList(&issues);
            let message = format!("the plan in {source} does not parse:\n{issues}");
            Err(message.trim_end().to_owned())
        }
        Ok(parsed) if parsed.lazy => Err(format!(
            "the plan in {source} is lazy (mode lazy / dry_run), and a pipeline runs its plan: remove it"
        )),
        Ok(_) => Ok(()),
    }
}

/// The tools a plan's steps name, as written.
pub fn called_tools(plan: &Json) -> Vec<String> {
    crate::plan::parse(plan)
        .map(|p| p.steps.iter().map(|s| s.tool.clone()).collect())
        .unwrap_or_default()
}
