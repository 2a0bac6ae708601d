//! planmux's own tools as `tools/list` shows them: `execute_plan` (its description built
//! from the live catalog: an example plan over its tools and, when compact, the servers
//! search_tools reaches) and `approve_plan`; both kept loaded in hosts that defer tools.

use std::sync::Arc;

use rmcp::model::{MetaObject, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use super::example::example;
use crate::approval::APPROVE_PLAN_TOOL;
use crate::catalog::Catalog;
use crate::exec::result_schema;
use crate::plan::{EXECUTE_PLAN_TOOL, execute_plan_description, execute_plan_input_schema};
use crate::policy::{Confirm, Tier};

/// The `execute_plan` tool definition, from the live catalog: its example uses tools the
/// catalog has; when `compact`, it names the servers whose tools search_tools finds. Its
/// hints are honest about what a plan can reach: read-only when every tool is,
/// destructive when any tool is.
pub fn execute_plan_tool(catalog: &Catalog, confirm: Confirm, compact: bool) -> Tool {
    let most = catalog.tool_specs().iter().map(|t| t.tier).max();
    let example = example(catalog)
        .unwrap_or_else(|| "No tool is available yet: there is nothing to plan with.".into());
    let mut description = execute_plan_description(&example);
    if compact {
        description.push_str(&format!(
            "\n\nNot every tool is listed: find them with search_tools, then use their names here. Servers (tools): {}.",
            server_index(catalog)
        ));
    }
    if confirm != Confirm::None {
        description.push_str("\n\n");
        description.push_str(APPROVAL_NOTE);
    }
    kept_loaded(
        Tool::new(
            EXECUTE_PLAN_TOOL,
            description,
            Arc::new(as_object(execute_plan_input_schema())),
        )
        .with_raw_output_schema(Arc::new(as_object(result_schema())))
        .with_annotations(
            ToolAnnotations::new()
                .read_only(most.is_none_or(|t| t == Tier::Read))
                .destructive(most == Some(Tier::Destructive))
                .open_world(true),
        ),
    )
}

/// What `execute_plan`'s description adds when plans may need approval.
const APPROVAL_NOTE: &str = "Before a plan that calls a write or destructive tool runs, your user approves it: \
    either planmux asks them directly, or the result has status \"needs_approval\" with \
    approval.token and approval.steps; then call approve_plan with both, unchanged.";

/// The `approve_plan` tool definition: destructive, so that hosts ask their user.
pub fn approve_plan_tool() -> Tool {
    kept_loaded(
        Tool::new(
            APPROVE_PLAN_TOOL,
            "Runs a plan that execute_plan answered with status \"needs_approval\": pass its \
             approval.token and repeat approval.steps (and approval.inputs, when present) exactly. Your user sees these steps when \
             asked to allow this call. The token runs its plan once and expires after 10 minutes.",
            Arc::new(as_object(json!({
                "type": "object",
                "properties": {
                    "token": {"type": "string", "description": "approval.token from execute_plan's result"},
                    "steps": {
                        "type": "array",
                        "description": "approval.steps from execute_plan's result, unchanged: each step's id, tool, tier and arguments as written",
                        "items": {"type": "object"}
                    },
                    "inputs": {"description": "approval.inputs from execute_plan's result, unchanged, when it has them"}
                },
                "required": ["token", "steps"]
            }))),
        )
        .with_raw_output_schema(Arc::new(as_object(result_schema())))
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(true),
        ),
    )
}

fn as_object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Marks one of planmux's own tools to stay loaded in hosts that defer MCP tools
/// (Claude Code reads `_meta["anthropic/alwaysLoad"]`).
pub fn kept_loaded(mut tool: Tool) -> Tool {
    let mut meta = Map::new();
    meta.insert("anthropic/alwaysLoad".into(), Value::Bool(true));
    tool.meta = Some(MetaObject(meta));
    tool
}

/// Longest server index in a compact `execute_plan` description.
const MAX_INDEX_CHARS: usize = 1_200;

/// One line per server with its tool count, for a compact description: bounded, naming
/// how many servers did not fit.
pub fn server_index(catalog: &Catalog) -> String {
    let servers = catalog.servers();
    let mut text = String::new();
    for (shown, (server, tools)) in servers.iter().enumerate() {
        let part = format!("{}{server} ({tools})", if shown == 0 { "" } else { ", " });
        if text.len() + part.len() > MAX_INDEX_CHARS {
            text.push_str(&format!(" and {} more servers", servers.len() - shown));
            break;
        }
        text.push_str(&part);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Pins, ServerTools};
    #[cfg(feature = "bench")]
    use crate::demo::demo_catalog;
    use crate::demo::{DemoKind, DemoServer};
    use crate::policy::{Policy, TierRules};

    /// The example in a description, parsed.
    fn example_of(description: &str) -> Value {
        let Some(start) = description.find("{\"steps\"") else {
            return Value::Null;
        };
        let rest = &description[start..];
        let end = rest.find("\"outputs\"").unwrap_or(0);
        let end = end + rest[end..].find('}').unwrap_or(0) + 1;
        serde_json::from_str(&rest[..end]).unwrap_or(Value::Null)
    }

    #[cfg(feature = "bench")] // tiktoken-rs comes with the benches (Cargo.toml)
    #[test]
    fn the_description_names_only_tools_of_the_catalog_and_stays_small() {
        let bpe = tiktoken_rs::o200k_base().expect("the tokenizer's data is built in");
        let catalog = demo_catalog();
        let tool = execute_plan_tool(&catalog, Confirm::None, false);
        let description = tool.description.as_deref().unwrap_or_default();
        let tokens = bpe.encode_ordinary(description).len();
        assert!(tokens <= 400, "description: {tokens} tokens\n{description}");
        let example = example_of(description);
        let plan = crate::plan::prepare(&example, catalog.tool_specs(), &Default::default());
        assert!(plan.is_ok(), "{example}: {plan:?}");
        let steps = example["steps"].as_array().map_or(0, Vec::len);
        assert_eq!(steps, 2, "{example}");
        // The first step's output feeds the second by a path its schema declares.
        assert_eq!(
            example["steps"][1]["args"]["name"],
            "$ref:a.metrics[0].name"
        );
        // Compact: the servers are named, within bounds.
        let compact = execute_plan_tool(&catalog, Confirm::Write, true);
        let description = compact.description.as_deref().unwrap_or_default();
        assert!(description.contains("search_tools"));
        assert!(
            description.contains("metrics (3), weather (4)"),
            "{description}"
        );
        assert!(description.contains("approve_plan"));
    }

    #[test]
    fn with_no_tools_the_description_says_so_and_names_none() {
        let catalog = Catalog::default();
        let tool = execute_plan_tool(&catalog, Confirm::None, false);
        let description = tool.description.as_deref().unwrap_or_default();
        assert!(description.contains("No tool is available yet"));
        assert_eq!(example_of(description), Value::Null);
    }

    #[test]
    fn the_server_index_is_bounded() {
        let servers: Vec<ServerTools> = (0..500)
            .map(|i| ServerTools {
                server: format!("server{i}"),
                namespace: true,
                tools: DemoServer::new(DemoKind::Weather, None).tools(),
                tiers: TierRules::default(),
            })
            .collect();
        let catalog = Catalog::build("__", &servers, &Policy::default(), &Pins::Unpinned);
        let index = server_index(&catalog);
        assert!(index.len() <= MAX_INDEX_CHARS + 40, "{}", index.len());
        assert!(index.ends_with("more servers"), "{index}");
    }
}
