//! `search_tools` (DESIGN §7): the catalog's tools found by what they do, best first,
//! with their full definitions and tiers; with no query, an index of the servers.
//!
//! It reads the catalog only: denied and quarantined tools are not in it, and a tool
//! found here is called like any other, through the safety checkpoint.

use std::sync::Arc;

use rmcp::model::{CallToolResult, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use super::surface::kept_loaded;
use super::tool_error;
use crate::catalog::{Catalog, Entry};

/// The tool's name; no exported name can take it.
pub const SEARCH_TOOLS_TOOL: &str = "search_tools";

/// Results when the query gives no `limit`, and the most it may ask for.
const DEFAULT_LIMIT: u64 = 5;
const MAX_LIMIT: u64 = 20;
/// A server's description in the index, at most.
const MAX_SERVER_DESCRIPTION: usize = 200;
/// Phrasings one query may give, and the longest one (a ranker reads no more of one).
const MAX_PHRASINGS: usize = 5;
const MAX_PHRASING_CHARS: usize = crate::catalog::search::MAX_QUERY_CHARS;

/// The `search_tools` definition; `servers` is how many servers have tools.
pub fn search_tools_tool(servers: usize) -> Tool {
    let description = format!(
        "Find tools by what they do: the tools of {servers} servers are not all listed. \
         query: the user's words plus 2-3 phrasings in the words tool names use (verb + \
         object: \"list pull requests\", \"create calendar event\"), as a list. Results \
         come best first with each tool's name, description, inputSchema and tier (read, \
         write, destructive). Use a found tool by its name in execute_plan (one step is \
         fine). Nothing fits: search again with other words, or with server. No query: \
         each server with its tool count."
    );
    let schema = json!({
        "type": "object",
        "properties": {
            "query": {"type": ["string", "array"], "items": {"type": "string"}, "maxItems": MAX_PHRASINGS,
                      "description": "what the tool should do, or its name; or up to 5 phrasings of it"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
            "server": {"type": "string", "description": "only this server's tools"}
        }
    });
    let Value::Object(schema) = schema else {
        unreachable!("a JSON object literal")
    };
    kept_loaded(
        Tool::new(SEARCH_TOOLS_TOOL, description, Arc::new(schema)).with_annotations(
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
    )
}

/// Answers a `search_tools` call. `instructions` gives each server's own instructions,
/// which describe it in the index.
pub fn search_tools(
    catalog: &Catalog,
    instructions: &[(String, String)],
    arguments: Option<&JsonObject>,
) -> CallToolResult {
    let empty = JsonObject::new();
    let arguments = arguments.unwrap_or(&empty);
    let phrasings = match phrasings(arguments.get("query")) {
        Ok(phrasings) => phrasings,
        Err(problem) => return tool_error(problem),
    };
    let limit = match arguments.get("limit") {
        None | Some(Value::Null) => DEFAULT_LIMIT,
        Some(limit) => match limit.as_u64().or_else(|| {
            // 5.0 is a fine 5.
            limit
                .as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 1.0)
                .map(|f| f as u64)
        }) {
            Some(n) if n >= 1 => n.min(MAX_LIMIT),
            _ => {
                return tool_error(format!(
                    "\"limit\" must be an integer from 1 to {MAX_LIMIT}, not {limit}"
                ));
            }
        },
    } as usize;
    let server = match arguments.get("server") {
        None | Some(Value::Null) => None,
        Some(Value::String(server)) if server.trim().is_empty() => None,
        Some(Value::String(server)) => {
            if catalog.server_tools(server).is_empty() {
                let known = catalog.servers();
                let names: Vec<&str> = known.iter().map(|(name, _)| *name).collect();
                return tool_error(format!(
                    "no server '{server}' has tools; servers: {}",
                    names.join(", ")
                ));
            }
            Some(server.as_str())
        }
        Some(other) => return tool_error(format!("\"server\" must be a string, not {other}")),
    };
    let structured = match (phrasings.as_slice(), server) {
        ([], None) => json!({"servers": server_index(catalog, instructions)}),
        ([], Some(server)) => found(&catalog.server_tools(server), limit),
        (phrasings, server) => found(&catalog.search_phrasings(phrasings, server), limit),
    };
    // The JSON goes in the text content too, for hosts that read only that.
    CallToolResult::structured(structured)
}

/// The phrasings `query` gives: none for no query (or an empty string), one for a
/// string, up to [`MAX_PHRASINGS`] for a list; or what is wrong with it.
fn phrasings(query: Option<&Value>) -> Result<Vec<&str>, String> {
    match query {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(query)) if query.trim().is_empty() => Ok(Vec::new()),
        Some(Value::String(query)) => Ok(vec![query.trim()]),
        Some(Value::Array(items)) if items.is_empty() => Err(
            "\"query\" is an empty list: give the need in words, and up to 5 phrasings of it".into(),
        ),
        Some(Value::Array(items)) if items.len() > MAX_PHRASINGS => Err(format!(
            "\"query\" has {} phrasings; give at most {MAX_PHRASINGS}",
            items.len()
        )),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(text) if text.trim().is_empty() => {
                    Err(format!("\"query\"[{i}] is empty"))
                }
                Value::String(text) if text.chars().count() > MAX_PHRASING_CHARS => Err(format!(
                    "\"query\"[{i}] is {} characters long; a phrasing has at most {MAX_PHRASING_CHARS}",
                    text.chars().count()
                )),
                Value::String(text) => Ok(text.trim()),
                other => Err(format!("\"query\"[{i}] must be a string, not {}", crate::text::clip(&other.to_string(), 80))),
            })
            .collect(),
        Some(other) => Err(format!(
            "\"query\" must be a string or a list of strings, not {}",
            crate::text::clip(&other.to_string(), 80)
        )),
    }
}

/// The first `limit` of `tools` with their definitions, and how many there were.
fn found(tools: &[&Entry], limit: usize) -> Value {
    let shown: Vec<Value> = tools.iter().take(limit).map(|e| described(e)).collect();
    json!({"tools": shown, "total": tools.len()})
}

/// One result: the definition as `tools/list` would give it, and the tier.
fn described(entry: &Entry) -> Value {
    let definition = &entry.definition;
    let mut tool = json!({
        "name": entry.exported.as_str(),
        "description": definition.description.as_deref().unwrap_or_default(),
        "inputSchema": &*definition.input_schema,
    });
    if let Some(output) = &definition.output_schema {
        tool["outputSchema"] = Value::Object((**output).clone());
    }
    if let Some(annotations) = &definition.annotations
        && let Ok(value) = serde_json::to_value(annotations)
    {
        tool["annotations"] = value;
    }
    tool["tier"] = json!(entry.tier.as_str());
    tool
}

/// Each server with tools: its name, how many, and what it is for (the start of its
/// instructions, else some of its tools' names).
fn server_index(catalog: &Catalog, instructions: &[(String, String)]) -> Vec<Value> {
    catalog
        .servers()
        .into_iter()
        .map(|(server, tools)| {
            let own = instructions
                .iter()
                .find(|(name, _)| name == server)
                .map(|(_, text)| first_sentence(text));
            let description = match own {
                Some(text) if !text.is_empty() => text,
                _ => {
                    let names: Vec<&str> = catalog
                        .entries()
                        .iter()
                        .filter(|e| e.server == server)
                        .take(6)
                        .map(|e| e.tool.as_str())
                        .collect();
                    let more = if tools > names.len() { ", …" } else { "" };
                    format!("tools: {}{more}", names.join(", "))
                }
            };
            json!({"name": server, "tools": tools, "description": description})
        })
        .collect()
}

/// The first sentence (or line) of `text`, at most [`MAX_SERVER_DESCRIPTION`] characters.
fn first_sentence(text: &str) -> String {
    let text = text.trim();
    let end = text
        .find(". ")
        .map(|at| at + 1)
        .into_iter()
        .chain(text.find('\n'))
        .min()
        .unwrap_or(text.len());
    crate::text::clip(text[..end].trim(), MAX_SERVER_DESCRIPTION).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::demo_catalog;

    fn names(result: &CallToolResult) -> Vec<String> {
        let tools = result
            .structured_content
            .as_ref()
            .and_then(|s| s["tools"].as_array().cloned())
            .unwrap_or_default();
        tools
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    }

    fn search(arguments: Value) -> CallToolResult {
        let Value::Object(arguments) = arguments else {
            unreachable!()
        };
        search_tools(&demo_catalog(), &[], Some(&arguments))
    }

    #[test]
    fn results_come_best_first_with_definitions_and_tiers() {
        let result = search(json!({"query": "what is the weather like in Oslo"}));
        assert_eq!(result.is_error, Some(false));
        let found = names(&result);
        assert_eq!(
            found.first().map(String::as_str),
            Some("weather__get_weather"),
            "{found:?}"
        );
        let structured = result.structured_content.unwrap_or_default();
        let first = &structured["tools"][0];
        assert_eq!(first["tier"], "read");
        assert_eq!(first["inputSchema"]["required"], json!(["location"]));
        assert!(first["annotations"].is_object());
        assert!(structured["total"].as_u64() >= Some(1));
        assert!(found.len() <= 5);
    }

    #[test]
    fn an_exact_or_near_exact_name_comes_first() {
        for query in ["files__write_file", "write_file", "WriteFile", "write_fiel"] {
            let found = names(&search(json!({"query": query})));
            assert_eq!(
                found.first().map(String::as_str),
                Some("files__write_file"),
                "{query}: {found:?}"
            );
        }
    }

    #[test]
    fn limit_and_server_narrow_the_results() {
        let found = names(&search(json!({"query": "data", "limit": 1})));
        assert_eq!(found.len(), 1);
        let found = names(&search(
            json!({"query": "count the calls", "server": "chaos", "limit": 20}),
        ));
        assert!(
            !found.is_empty() && found.iter().all(|n| n.starts_with("chaos__")),
            "{found:?}"
        );
        let all_of_one = names(&search(json!({"server": "metrics", "limit": 20})));
        assert_eq!(all_of_one.len(), 3);
        let capped = search(json!({"query": "a", "limit": 500}));
        assert_eq!(capped.is_error, Some(false));
        for bad in [
            json!({"limit": 0}),
            json!({"limit": "five"}),
            json!({"query": 3}),
            json!({"server": "nowhere"}),
        ] {
            let result = search(bad.clone());
            assert_eq!(result.is_error, Some(true), "{bad}");
        }
        let unknown = search(json!({"server": "nowhere"}));
        let text = format!("{:?}", unknown.content);
        assert!(text.contains("metrics, weather, files, chaos"), "{text}");
    }

    /// A list of phrasings of one need: their rankings fused; a tool one phrasing finds
    /// and another misses still comes; one phrasing is the string form.
    #[test]
    fn phrasings_are_fused_into_one_ranking() {
        let alone = names(&search(json!({"query": "forecast"})));
        let listed = names(&search(json!({"query": ["forecast"]})));
        assert_eq!(alone, listed);
        let fused = names(&search(json!({
            "query": ["will I need an umbrella", "get weather forecast", "current temperature"]
        })));
        assert_eq!(
            fused.first().map(String::as_str),
            Some("weather__get_weather"),
            "{fused:?}"
        );
        let both = names(&search(
            json!({"query": ["list metrics", "get weather"], "limit": 20}),
        ));
        assert!(
            both.contains(&"metrics__list_metrics".to_owned())
                && both.contains(&"weather__get_weather".to_owned()),
            "{both:?}"
        );
    }

    #[test]
    fn bad_phrasings_are_named() {
        let long = "x".repeat(100_000);
        let cases = [
            json!({"query": []}),
            json!({"query": ["a", "b", "c", "d", "e", "f"]}),
            json!({"query": ["weather", 3]}),
            json!({"query": ["weather", "  "]}),
            json!({"query": ["weather", long]}),
            json!({"query": {"text": "weather"}}),
        ];
        let said: Vec<String> = cases
            .iter()
            .map(|case| {
                let result = search(case.clone());
                assert_eq!(result.is_error, Some(true), "{case}");
                let value = serde_json::to_value(&result).unwrap_or_default();
                value["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        insta::assert_snapshot!("search_bad_phrasings", said.join("\n"));
    }

    #[test]
    fn no_query_gives_the_server_index() {
        let instructions = vec![(
            "weather".to_owned(),
            "Weather reports for any city. Also history.".to_owned(),
        )];
        let result = search_tools(&demo_catalog(), &instructions, None);
        let servers = result.structured_content.unwrap_or_default()["servers"].clone();
        assert_eq!(servers[0]["name"], "metrics");
        assert_eq!(servers[0]["tools"], 3);
        assert_eq!(
            servers[0]["description"],
            "tools: list_metrics, query_metric, check_threshold"
        );
        assert_eq!(servers[1]["description"], "Weather reports for any city.");
    }

    #[test]
    fn a_denied_tool_is_never_found() {
        use crate::catalog::{Pins, ServerTools};
        let config = crate::config::Config::parse(
            "[policy]\ndeny = [\"weather__get_weather\"]",
            "t.toml",
            std::path::Path::new("."),
            &|_| None,
        )
        .expect("valid");
        let policy = crate::policy::Policy::new(config.policy.deny, config.policy.confirm, None);
        let tools = crate::demo::DemoServer::new(crate::demo::DemoKind::Weather, None).tools();
        let catalog = Catalog::build(
            "__",
            &[ServerTools {
                server: "weather".into(),
                namespace: true,
                tools,
                tiers: Default::default(),
            }],
            &policy,
            &Pins::Unpinned,
        );
        let Value::Object(arguments) = json!({"query": "weather__get_weather", "limit": 20}) else {
            unreachable!()
        };
        let found = names(&search_tools(&catalog, &[], Some(&arguments)));
        assert!(!found.is_empty());
        assert!(
            !found.contains(&"weather__get_weather".to_owned()),
            "{found:?}"
        );
    }
}
