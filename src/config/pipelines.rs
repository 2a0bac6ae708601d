//! `[pipelines.NAME]`: saved plans exported as tools (seed 003). Each is read and parsed
//! at load, and pipelines that call each other in a cycle are a config error.

use std::collections::HashMap;

use serde_json::Value as Json;
use toml::{Table, Value};

use super::parse::{Cx, unknown};
use super::{ConfigError, is_name_char};

pub(super) const PIPELINE_KEYS: &[&str] = &["description", "plan", "input_schema"];
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
    pub(super) fn pipeline(
        &self,
        name: &str,
        table: &Table,
        separator: &str,
    ) -> Result<PipelineConfig, ConfigError> {
        let section = format!("[pipelines.{name}]");
        if name.contains(separator) {
            return Err(self.key_error(
                "[pipelines]",
                name,
                format!("a pipeline name may not contain the separator '{separator}': it would read as a server's tool"),
            ));
        }
        if name.is_empty() || !name.chars().all(is_name_char) {
            return Err(self.key_error(
                "[pipelines]",
                name,
                "a pipeline name uses only A-Z a-z 0-9 _ -: it is the name of a tool",
            ));
        }
        if RESERVED.contains(&name) {
            return Err(self.key_error(
                "[pipelines]",
                name,
                format!("'{name}' is one of planmux's own tools; choose another name"),
            ));
        }
        if let Some(key) = table.keys().find(|k| !PIPELINE_KEYS.contains(&k.as_str())) {
            return Err(self.key_error(&section, key, unknown(key, PIPELINE_KEYS)));
        }
        let description = match table.get("description") {
            Some(Value::String(text)) => text.clone(),
            Some(other) => {
                let found = format!("expected a string, found {}", other.type_str());
                return Err(self.key_error(&section, "description", found));
            }
            None => format!("Runs the pipeline '{name}'."),
        };
        let (plan, source) = match table.get("plan") {
            Some(Value::String(path)) => {
                let file = self.base.join(self.home(path.clone()));
                let text = std::fs::read_to_string(&file).map_err(|e| {
                    self.key_error(
                        &section,
                        "plan",
                        format!("cannot read {}: {e}", file.display()),
                    )
                })?;
                let plan: Json = serde_json::from_str(&text).map_err(|e| {
                    self.key_error(
                        &section,
                        "plan",
                        format!("{} is not JSON: {e}", file.display()),
                    )
                })?;
                (plan, file.display().to_string())
            }
            Some(Value::Table(inline)) => (to_json(&Value::Table(inline.clone())), "inline".into()),
            Some(other) => {
                let found = format!(
                    "expected a plan file (a string) or an inline plan (a table), found {}",
                    other.type_str()
                );
                return Err(self.key_error(&section, "plan", found));
            }
            None => return Err(self.key_error(&section, "plan", "is missing: give the plan file")),
        };
        match crate::plan::parse(&plan) {
            Err(issues) => {
                let message = format!(
                    "the plan in {source} does not parse:\n{}",
                    crate::plan::IssueList(&issues)
                );
                return Err(self.key_error(&section, "plan", message.trim_end()));
            }
            Ok(parsed) if parsed.lazy => {
                let message = format!(
                    "the plan in {source} is lazy (mode lazy / dry_run), and a pipeline runs its plan: remove it"
                );
                return Err(self.key_error(&section, "plan", message));
            }
            Ok(_) => {}
        }
        let input_schema = match table.get("input_schema") {
            None => None,
            Some(Value::Table(schema)) => Some(to_json(&Value::Table(schema.clone()))),
            Some(other) => {
                let found = format!("expected a JSON Schema table, found {}", other.type_str());
                return Err(self.key_error(&section, "input_schema", found));
            }
        };
        Ok(PipelineConfig {
            name: name.to_owned(),
            description,
            plan,
            source,
            input_schema,
        })
    }

    /// Pipelines may call pipelines, but never in a cycle.
    pub(super) fn pipeline_cycles(&self, pipelines: &[PipelineConfig]) -> Result<(), ConfigError> {
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
        if let Some(i) = (0..edges.len()).find(|&i| edges[i].contains(&i)) {
            return Err(ConfigError::Section {
                file: self.file.into(),
                section: format!("[pipelines.{}]", pipelines[i].name),
                message: "the pipeline calls itself".into(),
            });
        }
        match crate::plan::find_cycles(&edges).first() {
            None => Ok(()),
            Some(cycle) => {
                let mut names: Vec<&str> =
                    cycle.iter().map(|&i| pipelines[i].name.as_str()).collect();
                names.push(names[0]);
                // `a → b`: a calls b.
                names.reverse();
                Err(ConfigError::Section {
                    file: self.file.into(),
                    section: "[pipelines]".into(),
                    message: format!(
                        "pipelines call each other in a cycle: {}",
                        names.join(" → ")
                    ),
                })
            }
        }
    }
}

/// The tools a plan's steps name, as written.
pub fn called_tools(plan: &Json) -> Vec<String> {
    crate::plan::parse(plan)
        .map(|p| p.steps.iter().map(|s| s.tool.clone()).collect())
        .unwrap_or_default()
}

/// TOML as JSON (datetimes become their text).
fn to_json(value: &Value) -> Json {
    match value {
        Value::String(s) => Json::String(s.clone()),
        Value::Integer(n) => Json::from(*n),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
        Value::Boolean(b) => Json::Bool(*b),
        Value::Datetime(d) => Json::String(d.to_string()),
        Value::Array(items) => Json::Array(items.iter().map(to_json).collect()),
        Value::Table(table) => {
            Json::Object(table.iter().map(|(k, v)| (k.clone(), to_json(v))).collect())
        }
    }
}
