//! What `tools/list` shows a host (DESIGN §7): every tool (full), or planmux's own tools
//! and `always_list` (compact), chosen by `[proxy] surface` and, for `auto`, by the
//! host's profile; and `execute_plan`'s description, built from the live catalog.

use std::sync::{Arc, Mutex};

use globset::GlobSet;
use rmcp::model::{Implementation, MetaObject, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

pub use super::search::{SEARCH_TOOLS_TOOL, search_tools, search_tools_tool};
use crate::approval::APPROVE_PLAN_TOOL;
use crate::catalog::{Catalog, Entry};
use crate::config::{ProxySettings, Surface};
use crate::exec::result_schema;
use crate::plan::{EXECUTE_PLAN_TOOL, execute_plan_description, execute_plan_input_schema};
use crate::policy::{Confirm, Tier};

/// What planmux knows of a host, by its `clientInfo.name`. README's "Hosts" table is
/// this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostProfile {
    /// Who it is, for the log.
    pub host: &'static str,
    /// The client names it announces, folded (lower case, letters and digits only); a
    /// name matches when it starts with one.
    names: &'static [&'static str],
    /// Tools it takes well: `auto` lists every tool only when they all fit.
    pub tool_budget: usize,
    /// Longest tool name it keeps: `auto` is compact when a name is longer.
    pub name_budget: usize,
    /// Whether it re-reads the lists on `list_changed` (if not, its lists wait for every
    /// server's first start).
    pub list_changed: bool,
}

/// The known hosts. Budgets come from what each documents or does: Cursor uses the first
/// 40 tools and drops names over 60 characters; VS Code sends at most 128 tools per
/// request, its own (about 30) included; Windsurf caps at 100; Claude Desktop reads the
/// list once per connection and drops definitions under context pressure; Claude Code
/// defers MCP tools itself past a share of the context (planmux's own tools carry
/// `anthropic/alwaysLoad`).
pub const PROFILES: &[HostProfile] = &[
    HostProfile {
        host: "Claude Desktop / claude.ai",
        names: &["claudeai"],
        tool_budget: 40,
        name_budget: 64,
        list_changed: false,
    },
    HostProfile {
        host: "Claude Code",
        names: &["claudecode"],
        tool_budget: 200,
        name_budget: 64,
        list_changed: true,
    },
    HostProfile {
        host: "Cursor",
        names: &["cursor"],
        tool_budget: 40,
        name_budget: 60,
        list_changed: true,
    },
    HostProfile {
        host: "VS Code",
        names: &["visualstudiocode", "vscode"],
        tool_budget: 96,
        name_budget: 64,
        list_changed: true,
    },
    HostProfile {
        host: "Windsurf",
        names: &["windsurf"],
        tool_budget: 100,
        name_budget: 64,
        list_changed: true,
    },
];

/// Any other host: past 30–50 tools, models choose worse.
pub const OTHER_HOST: HostProfile = HostProfile {
    host: "other host",
    names: &[],
    tool_budget: 40,
    name_budget: 64,
    list_changed: true,
};

/// The profile of a host by its `clientInfo.name`.
pub fn profile(client: Option<&Implementation>) -> &'static HostProfile {
    let Some(client) = client else {
        return &OTHER_HOST;
    };
    let folded: String = client
        .name
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    PROFILES
        .iter()
        .find(|p| p.names.iter().any(|n| folded.starts_with(n)))
        .unwrap_or(&OTHER_HOST)
}

/// `[proxy]`'s surface settings, and the last decision logged.
#[derive(Debug)]
pub struct Shape {
    mode: Surface,
    always_list: Option<GlobSet>,
    tool_budget: Option<usize>,
    logged: Mutex<String>,
}

/// How `tools/list` is shaped for one host and catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub compact: bool,
    /// Why, for the log.
    pub why: String,
    /// What the host will lose anyway (names too long for it, in full).
    pub warning: Option<String>,
}

impl Shape {
    pub fn new(proxy: &ProxySettings) -> Self {
        Self {
            mode: proxy.surface,
            always_list: proxy.always_list.clone(),
            tool_budget: proxy.tool_budget,
            logged: Mutex::default(),
        }
    }

    /// Full or compact for this host and catalog; `own` counts planmux's tools listed
    /// beside the catalog's in full.
    pub fn decide(&self, host: &HostProfile, catalog: &Catalog, own: usize) -> Decision {
        let tools = catalog.entries().len();
        let budget = self.tool_budget.unwrap_or(host.tool_budget);
        let long = catalog
            .entries()
            .iter()
            .filter(|e| e.exported.as_str().len() > host.name_budget)
            .count();
        let (compact, why) = match self.mode {
            Surface::Full => (false, "surface = \"full\"".to_owned()),
            Surface::Compact => (true, "surface = \"compact\"".to_owned()),
            Surface::Auto if tools + own > budget => (
                true,
                format!(
                    "auto: {} tools exceed the budget of {budget}{}",
                    tools + own,
                    match self.tool_budget {
                        Some(_) => " (tool_budget)".to_owned(),
                        None => format!(" for {}", host.host),
                    }
                ),
            ),
            Surface::Auto if long > 0 => (
                true,
                format!(
                    "auto: {long} tool names are longer than {} characters, which {} drops",
                    host.name_budget, host.host
                ),
            ),
            Surface::Auto => (
                false,
                format!("auto: {} tools fit the budget of {budget}", tools + own),
            ),
        };
        let warning = (!compact && long > 0).then(|| {
            format!(
                "{long} tool names are longer than {} characters, which {} drops; \
                 set [proxy] surface = \"compact\" to reach them through search_tools",
                host.name_budget, host.host
            )
        });
        Decision {
            compact,
            why,
            warning,
        }
    }

    /// Logs `decision` (and its warning) when it differs from the last one logged.
    pub fn log(&self, client: Option<&Implementation>, decision: &Decision) {
        let line = format!(
            "{} ({})",
            if decision.compact { "compact" } else { "full" },
            decision.why
        );
        let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        if *logged != line {
            let client = client.map_or("unknown", |c| c.name.as_str());
            tracing::info!(host = client, "tool surface: {line}");
            if let Some(warning) = &decision.warning {
                tracing::warn!(host = client, "{warning}");
            }
            *logged = line;
        }
    }

    /// The catalog's tools that a compact list shows: those `always_list` names.
    pub fn always_listed<'a>(&self, catalog: &'a Catalog) -> impl Iterator<Item = &'a Entry> {
        let always = self.always_list.clone();
        catalog.entries().iter().filter(move |e| {
            always
                .as_ref()
                .is_some_and(|set| set.is_match(e.exported.as_str()))
        })
    }
}

/// The tools `tools/list` shows: in full, every catalog tool, the pipelines, then
/// `execute_plan` and `approve_plan` (unless `confirm` is "none"); compact, only the
/// `always_list` tools of the catalog, the pipelines, and `search_tools` beside
/// planmux's own.
pub fn listed(
    catalog: &Catalog,
    shape: &Shape,
    confirm: Confirm,
    compact: bool,
    pipelines: Vec<Tool>,
) -> Vec<Tool> {
    let mut tools: Vec<Tool> = match compact {
        true => shape
            .always_listed(catalog)
            .map(|e| e.definition.clone())
            .collect(),
        false => catalog.definitions().cloned().collect(),
    };
    // Pipelines are few and chosen by the user: listed in every mode.
    tools.extend(pipelines);
    tools.push(execute_plan_tool(catalog, confirm, compact));
    if compact {
        tools.push(search_tools_tool(catalog.servers().len()));
    }
    if confirm != Confirm::None {
        tools.push(approve_plan_tool());
    }
    tools
}

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

/// A plan over tools the catalog has, to show the format: a first tool that reads, and
/// a second (on the same server when it can) fed by the first's output. Values are made
/// up from the schemas; `None` when the catalog has no tool fit to show.
pub fn example(catalog: &Catalog) -> Option<String> {
    let entries = catalog.entries();
    let simple = |e: &&Entry| made_up_args(&e.definition.input_schema, None).is_some();
    let reads = || {
        entries
            .iter()
            .filter(simple)
            .filter(|e| e.tier == Tier::Read)
    };
    let first = reads()
        .find(|e| output_path(e).is_some())
        .or_else(|| reads().next())
        .or_else(|| entries.iter().find(simple))?;
    let reference = match output_path(first) {
        Some(path) => format!("$ref:a.{path}"),
        None => "$ref:a".to_owned(),
    };
    let fed = |e: &&Entry| {
        !std::ptr::eq(*e, first)
            && fed_param(&e.definition.input_schema)
                .is_some_and(|p| made_up_args(&e.definition.input_schema, Some(p)).is_some())
    };
    let second = entries
        .iter()
        .filter(fed)
        .find(|e| e.server == first.server)
        .or_else(|| entries.iter().find(fed));
    let first_args = made_up_args(&first.definition.input_schema, None)?;
    let mut text =
        String::from("Example (tools of this catalog, made-up values):\n{\"steps\": [\n");
    let step = |id: &str, tool: &str, args: &Value| {
        json!({"id": id, "tool": tool, "args": args}).to_string()
    };
    text.push_str(&format!(
        "  {}",
        step("a", first.exported.as_str(), &first_args)
    ));
    let outputs = match second {
        Some(second) => {
            let schema = &second.definition.input_schema;
            let param = fed_param(schema)?;
            let mut args = made_up_args(schema, Some(param))?;
            args[param] = Value::String(reference);
            text.push_str(&format!(
                ",\n  {}",
                step("b", second.exported.as_str(), &args)
            ));
            "b"
        }
        None => "a",
    };
    text.push_str(&format!("],\n \"outputs\": [\"{outputs}\"]}}"));
    Some(text)
}

/// A path into a tool's declared output worth showing: a property, or the first string
/// field of the first item of an array property.
fn output_path(entry: &Entry) -> Option<String> {
    let properties = entry.definition.output_schema.as_ref()?.get("properties")?;
    let (name, property) = properties.as_object()?.iter().next()?;
    if !is_plain_name(name) {
        return None;
    }
    let inner = property
        .get("items")
        .and_then(|items| items.get("properties"))
        .and_then(Value::as_object)
        .and_then(|p| {
            p.iter()
                .find(|(k, v)| is_plain_name(k) && v.get("type") == Some(&json!("string")))
        });
    Some(match inner {
        Some((field, _)) => format!("{name}[0].{field}"),
        None => name.clone(),
    })
}

fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The parameter a reference feeds: the first required string one, else the first
/// required, else the first.
fn fed_param(schema: &Map<String, Value>) -> Option<&str> {
    let properties = schema.get("properties")?.as_object()?;
    let required: Vec<&str> = required(schema);
    let is_string = |name: &str| properties[name].get("type") == Some(&json!("string"));
    required
        .iter()
        .copied()
        .filter(|r| properties.contains_key(*r))
        .find(|r| is_string(r))
        .or_else(|| {
            required
                .iter()
                .copied()
                .find(|r| properties.contains_key(*r))
        })
        .or_else(|| properties.keys().next().map(String::as_str))
        .filter(|name| is_plain_name(name))
}

fn required(schema: &Map<String, Value>) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Made-up values for a schema's required parameters (all but `skip`), or `None` when one
/// is not a plain type, enum or const.
fn made_up_args(schema: &Map<String, Value>, skip: Option<&str>) -> Option<Value> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let mut args = Map::new();
    for name in required(schema) {
        if Some(name) == skip {
            continue;
        }
        let property = properties?.get(name)?;
        args.insert(name.to_owned(), made_up(property)?);
    }
    Some(Value::Object(args))
}

fn made_up(property: &Value) -> Option<Value> {
    if let Some(value) = property.get("const") {
        return Some(value.clone());
    }
    if let Some(first) = property
        .get("enum")
        .and_then(|e| e.as_array()?.first().cloned())
    {
        return Some(first);
    }
    Some(match property.get("type")?.as_str()? {
        "string" => json!("…"),
        "integer" | "number" => json!(
            property
                .get("minimum")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                .max(1)
        ),
        "boolean" => json!(true),
        "array" => json!([]),
        "object" => json!({}),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Pins, ServerTools};
    use crate::demo::{DemoKind, DemoServer};
    use crate::policy::{Policy, TierRules};

    use crate::demo::demo_catalog;

    fn shape(toml: &str) -> Shape {
        let config = crate::config::Config::parse(
            &format!("[proxy]\n{toml}"),
            "test.toml",
            std::path::Path::new("."),
            &|_| None,
        )
        .expect("a valid config");
        Shape::new(&config.proxy)
    }

    fn client(name: &str) -> Implementation {
        Implementation::new(name, "1")
    }

    #[test]
    fn hosts_are_known_by_their_client_names() {
        let cases = [
            ("claude-ai", "Claude Desktop / claude.ai"),
            ("claude-code", "Claude Code"),
            ("cursor-vscode", "Cursor"),
            ("Visual Studio Code", "VS Code"),
            ("visual-studio-code", "VS Code"),
            ("windsurf-client", "Windsurf"),
            ("my-agent", "other host"),
        ];
        for (name, host) in cases {
            assert_eq!(profile(Some(&client(name))).host, host, "{name}");
        }
        assert_eq!(profile(None), &OTHER_HOST);
        assert!(!profile(Some(&client("claude-ai"))).list_changed);
    }

    #[test]
    fn auto_is_full_while_the_catalog_fits_the_hosts_budget() {
        let catalog = demo_catalog();
        let tools = catalog.entries().len();
        let cursor = profile(Some(&client("cursor-vscode")));
        assert!(
            !shape("").decide(cursor, &catalog, 2).compact,
            "{tools} tools fit 40"
        );
        let tight = shape(&format!("tool_budget = {}", tools + 1));
        let decision = tight.decide(cursor, &catalog, 2);
        assert!(decision.compact, "{tools} + 2 exceed {}", tools + 1);
        assert!(decision.why.contains("tool_budget"), "{}", decision.why);
        assert!(
            !shape("surface = \"full\"")
                .decide(cursor, &catalog, 2)
                .compact
        );
        assert!(
            shape("surface = \"compact\"")
                .decide(cursor, &catalog, 2)
                .compact
        );
        // A host that drops long names gets the compact surface.
        let short = HostProfile {
            name_budget: 10,
            ..*cursor
        };
        let decision = shape("").decide(&short, &catalog, 2);
        assert!(decision.compact && decision.why.contains("longer than 10"));
    }

    #[test]
    fn compact_lists_the_meta_tools_and_always_list() {
        let catalog = demo_catalog();
        let names = |tools: Vec<Tool>| -> Vec<String> {
            tools.into_iter().map(|t| t.name.into_owned()).collect()
        };
        let shape = shape("always_list = [\"weather__get_*\"]");
        let compact = names(listed(&catalog, &shape, Confirm::Write, true, Vec::new()));
        assert_eq!(
            compact,
            [
                "weather__get_weather",
                "weather__get_history",
                "execute_plan",
                "search_tools",
                "approve_plan",
            ]
        );
        let compact = names(listed(&catalog, &shape, Confirm::None, true, Vec::new()));
        assert!(!compact.contains(&"approve_plan".to_owned()));
        let full = names(listed(&catalog, &shape, Confirm::Write, false, Vec::new()));
        assert_eq!(full.len(), catalog.entries().len() + 2);
        assert!(!full.contains(&"search_tools".to_owned()));
        for tool in listed(&catalog, &shape, Confirm::Write, true, Vec::new())
            .iter()
            .skip(2)
        {
            let meta = tool.meta.as_ref().map(|m| &m.0);
            assert_eq!(
                meta.and_then(|m| m.get("anthropic/alwaysLoad")),
                Some(&Value::Bool(true)),
                "{}",
                tool.name
            );
        }
    }

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
