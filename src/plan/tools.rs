//! The catalog as validation sees it, and how a step's tool name is resolved in it.
//!
//! Resolution order (docs/plan-language.md, "Naming tools"):
//! 1. an exact exported name (`metrics__query_metric`);
//! 2. `server` (or `serverId`) beside a bare tool name, or `server:tool` in one string;
//!    a server id also matches after dropping a `-server`/`_server` suffix, so the
//!    seed's `weather-server` finds the server `weather`; a server id that names no
//!    server at all is ignored when the bare tool name is unique (the seed's
//!    `filesystem-server` + `write_file`);
//! 3. a bare tool name that exactly one server has;
//! 4. any of these ignoring case and `-` versus `_`, when that matches one tool only.
//!
//! Anything else is unknown (with up to three close names) or ambiguous (with every
//! candidate). A host's direct `tools/call` goes through [`resolve_called`]: the same
//! rule without the server forms (1, 3, 4), and the same hints.

use serde_json::Value;

use crate::policy::Tier;

use super::names::{closest, fold_tool_name, reset_hint_budget};

/// A plan step `{"resource": URI}` calls this pseudo-tool with `{"uri": URI}`: it reads a
/// resource. No exported name can take it (`/` is not allowed in them).
pub const RESOURCE_TOOL: &str = "resources/read";

/// The resource step's pseudo-tool: a read, safe to retry.
pub fn resource_spec() -> &'static ToolSpec {
    static SPEC: std::sync::LazyLock<ToolSpec> = std::sync::LazyLock::new(|| ToolSpec {
        exported: RESOURCE_TOOL.to_owned(),
        server: String::new(),
        tool: RESOURCE_TOOL.to_owned(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {"uri": {"type": "string"}},
            "required": ["uri"]
        }),
        output_schema: None,
        read_only: true,
        idempotent: true,
        tier: Tier::Read,
    });
    &SPEC
}

/// One tool of the catalog, as the proxy exports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The exported name, `<server><separator><tool>`.
    pub exported: String,
    /// The downstream server's name.
    pub server: String,
    /// The tool's name on that server.
    pub tool: String,
    /// The tool's `inputSchema`, used to check literal arguments.
    pub input_schema: Value,
    /// The tool's `outputSchema`, if it has one: the shape of its `structuredContent`,
    /// which is the step's output, used to check the paths references read in it.
    pub output_schema: Option<Value>,
    /// `annotations.readOnlyHint`: retries are safe.
    pub read_only: bool,
    /// `annotations.idempotentHint`: retries are safe.
    pub idempotent: bool,
    /// What the tool can change (its server's `tiers`, else its annotations).
    pub tier: Tier,
}

impl ToolSpec {
    /// Whether a failed call may be repeated without the plan saying `retry_unsafe`.
    pub fn retry_safe(&self) -> bool {
        self.read_only || self.idempotent
    }
}

/// The outcome of looking a name up.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolMatch<'a> {
    /// Exactly one tool.
    Found(&'a ToolSpec),
    /// No tool; up to three exported names that look alike.
    Unknown(Vec<String>),
    /// Several tools; their exported names.
    Ambiguous(Vec<String>),
}

/// Whether the server id a plan wrote names `actual`.
fn server_matches(actual: &str, given: &str) -> bool {
    if actual == given {
        return true;
    }
    let folded = fold_tool_name(given);
    let trimmed = folded
        .strip_suffix("_server")
        .filter(|t| !t.is_empty())
        .unwrap_or(&folded);
    let actual = fold_tool_name(actual);
    actual == folded || actual == trimmed
}

/// Picks the single tool among `hits`, or reports them as ambiguous.
fn one_of<'a>(hits: Vec<&'a ToolSpec>) -> Option<ToolMatch<'a>> {
    match hits.as_slice() {
        [] => None,
        [one] => Some(ToolMatch::Found(one)),
        many => {
            let mut names: Vec<String> = many.iter().map(|t| t.exported.clone()).collect();
            names.sort();
            names.dedup();
            Some(ToolMatch::Ambiguous(names))
        }
    }
}

/// Resolves a step's tool (and optional server) against the catalog.
pub fn resolve_tool<'a>(tools: &'a [ToolSpec], server: Option<&str>, name: &str) -> ToolMatch<'a> {
    let name = name.trim();
    match server {
        Some(server) => on_server(tools, server, name),
        None => {
            if let Some((server, tool)) = name.split_once(':')
                && let found @ ToolMatch::Found(_) = on_server(tools, server, tool)
            {
                return found;
            }
            bare(tools, name)
        }
    }
}

/// Looks `name` up among the tools of `server`; a server id that names no server falls
/// back to the bare name, without splitting it again (one lookup however many `:`).
fn on_server<'a>(tools: &'a [ToolSpec], server: &str, name: &str) -> ToolMatch<'a> {
    let on_server: Vec<&ToolSpec> = tools
        .iter()
        .filter(|t| server_matches(&t.server, server))
        .collect();
    if on_server.is_empty() {
        // A server id that names no server: the bare tool name may still be unique.
        return match bare(tools, name) {
            found @ ToolMatch::Found(_) => found,
            _ => ToolMatch::Unknown(near_names(&tools.iter().collect::<Vec<_>>(), name)),
        };
    }
    if let Some(found) = on_server
        .iter()
        .find(|t| t.tool == name || t.exported == name)
    {
        return ToolMatch::Found(found);
    }
    let folded = fold_tool_name(name);
    let loose = on_server
        .iter()
        .copied()
        .filter(|t| fold_tool_name(&t.tool) == folded)
        .collect();
    if let Some(found) = one_of(loose) {
        return found;
    }
    ToolMatch::Unknown(near_names(&on_server, name))
}

/// Resolves the name of a host's direct `tools/call` among `tools` (the catalog's callable
/// tools: denied and quarantined ones are not there, so they never resolve): an exact
/// exported name, a bare tool name one server has, then either ignoring case and `-`
/// versus `_`. A miss has the hints a plan's step gets for the same name.
pub fn resolve_called<'a>(tools: &'a [ToolSpec], name: &str) -> ToolMatch<'a> {
    // A host's call is no validation: its hints get a whole budget of their own.
    reset_hint_budget();
    bare(tools, name)
}

/// [`resolve_called`] without the hints a miss costs: the one tool `name` means, if any
/// (for the host's read path, where an unknown name must stay cheap).
pub fn find_called<'a>(tools: &'a [ToolSpec], name: &str) -> Option<&'a ToolSpec> {
    match lookup(tools, name) {
        Some(ToolMatch::Found(spec)) => Some(spec),
        _ => None,
    }
}

/// Looks a name up across every server: exact exported name, unique bare tool name, then
/// loosely.
fn bare<'a>(tools: &'a [ToolSpec], name: &str) -> ToolMatch<'a> {
    lookup(tools, name)
        .unwrap_or_else(|| ToolMatch::Unknown(near_names(&tools.iter().collect::<Vec<_>>(), name)))
}

/// [`bare`] without the hints: `None` when nothing matches.
fn lookup<'a>(tools: &'a [ToolSpec], name: &str) -> Option<ToolMatch<'a>> {
    if let Some(found) = tools.iter().find(|t| t.exported == name) {
        return Some(ToolMatch::Found(found));
    }
    if let Some(found) = one_of(tools.iter().filter(|t| t.tool == name).collect()) {
        return Some(found);
    }
    let folded = fold_tool_name(name);
    one_of(
        tools
            .iter()
            .filter(|t| fold_tool_name(&t.tool) == folded || fold_tool_name(&t.exported) == folded)
            .collect(),
    )
}

/// Up to three exported names close to `name`, comparing with both the exported and
/// the bare tool name.
fn near_names(pool: &[&ToolSpec], name: &str) -> Vec<String> {
    let by_exported = closest(name, pool.iter().map(|t| t.exported.as_str()));
    let by_tool = closest(name, pool.iter().map(|t| t.tool.as_str()));
    let mut names = by_exported;
    for tool in by_tool {
        for spec in pool.iter().filter(|t| t.tool == tool) {
            if !names.contains(&spec.exported) {
                names.push(spec.exported.clone());
            }
        }
    }
    names.truncate(3);
    names
}
