//! The JSON Schema of servers.toml (`planmux schema config`), for editors: Taplo and Even
//! Better TOML read it through a `#:schema` line and complete and check the file. The
//! structs here exist only to describe the file; parsing stays key by key (`parse.rs`),
//! and a test keeps both to the same keys.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde_json::Value;

/// planmux's configuration: the MCP servers it fronts, and how.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct ServersToml {
    /// Settings for planmux itself; every key is optional.
    proxy: Option<Proxy>,
    /// What plans need approved, and what is never callable.
    policy: Option<Policy>,
    /// The downstream servers, by name (A-Z a-z 0-9 _ -).
    servers: Option<BTreeMap<String, Server>>,
    /// Saved plans listed as tools, by name.
    pipelines: Option<BTreeMap<String, Pipeline>>,
    /// The HTTP front (`planmux serve --http`).
    http: Option<Http>,
}

#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct Http {
    /// Bearer tokens (`${VAR}` expanded, 16 characters or more); required on any
    /// address other than loopback.
    tokens: Option<Vec<String>>,
    /// Browser origins allowed to call, with scheme (e.g. "https://app.example.com:443").
    origins: Option<Vec<String>>,
    /// Largest request body, in bytes (default 4 MiB).
    max_body_bytes: Option<u64>,
    /// Requests handled at once (default 64).
    max_requests: Option<u64>,
    /// Connections open at once (default 512).
    max_connections: Option<u64>,
    /// How long a client may take to send a request's headers, in ms (default 10000).
    header_timeout_ms: Option<u64>,
}

#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct Proxy {
    /// Between server and tool in exported names (default "__").
    separator: Option<String>,
    /// Per downstream call, in ms (default 60000).
    call_timeout_ms: Option<u64>,
    /// A whole plan, in ms (default 300000).
    plan_timeout_ms: Option<u64>,
    /// Concurrent downstream calls per plan (default 16).
    max_concurrency: Option<u64>,
    /// Steps per plan (default 256).
    max_plan_steps: Option<u64>,
    /// Items of one foreach step (default 1000).
    max_foreach_items: Option<u64>,
    /// Per output value returned to the model (default 8000).
    max_output_chars: Option<u64>,
    /// Connect and list tools, in ms (default 30000).
    startup_timeout_ms: Option<u64>,
    /// How long the handshake and lists wait for slow servers, in ms (default 3000).
    list_grace_ms: Option<u64>,
    /// Longest JSON-RPC message, in bytes (default 64 MiB).
    max_message_bytes: Option<u64>,
    /// Deepest nesting of arrays and objects in one message (default 512).
    max_nesting: Option<u64>,
    /// Also append every authorization decision to this file (JSON lines).
    audit_log: Option<String>,
    /// auto | full | compact: list every tool, or search_tools and execute_plan.
    surface: Option<Surface>,
    /// Exported-name globs listed even when the surface is compact.
    always_list: Option<Vec<String>>,
    /// Auto lists every tool up to this many (default: the host's profile).
    tool_budget: Option<u64>,
    /// Run records kept for planmux://runs/… (default 32).
    kept_runs: Option<u64>,
    /// How much the kept run records may weigh together as JSON, in bytes (default 64 MiB).
    kept_run_bytes: Option<u64>,
}

#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
enum Surface {
    Auto,
    Full,
    Compact,
}

#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct Policy {
    /// Tiers a plan needs the user's approval for: write (default), destructive, none.
    confirm: Option<Confirm>,
    /// Exported-name globs: never listed, never callable, directly or in plans.
    deny: Option<Vec<String>>,
}

#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
enum Confirm {
    Write,
    Destructive,
    None,
}

#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
enum Tier {
    Read,
    Write,
    Destructive,
}

#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
enum Builtin {
    Metrics,
    Weather,
    Files,
    Chaos,
    Hostile,
    Conformance,
}

/// One downstream server: `command` (stdio), `url` (streamable HTTP) or `builtin`.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct Server {
    /// The program of a stdio server (`${VAR}` and a leading `~` expand).
    command: Option<String>,
    /// Its arguments.
    args: Option<Vec<String>>,
    /// Set in the child's environment (`${VAR}` reads planmux's).
    env: Option<BTreeMap<String, String>>,
    /// Globs of planmux's variables the child may also see.
    env_inherit: Option<Vec<String>>,
    /// The child's working folder, relative to this file.
    cwd: Option<String>,
    /// A streamable-HTTP server's URL.
    url: Option<String>,
    /// Headers sent to an HTTP server.
    headers: Option<BTreeMap<String, String>>,
    /// A demo server built into planmux.
    builtin: Option<Builtin>,
    /// Globs on the server's tool names: only these are exported.
    include: Option<Vec<String>>,
    /// Globs on the server's tool names, applied after include.
    exclude: Option<Vec<String>>,
    /// false: not started, not listed.
    enabled: Option<bool>,
    /// Overrides [proxy] call_timeout_ms.
    call_timeout_ms: Option<u64>,
    /// Overrides [proxy] startup_timeout_ms.
    startup_timeout_ms: Option<u64>,
    /// Concurrent calls to this server from one plan.
    max_concurrency: Option<u64>,
    /// Tool-name globs → tier; the first match wins.
    tiers: Option<BTreeMap<String, Tier>>,
    /// false: a tool no glob matches is destructive, whatever it says.
    trust_annotations: Option<bool>,
    /// false: export its tools and prompts under their own names.
    namespace: Option<bool>,
}

/// A saved plan listed as the tool named after it.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct Pipeline {
    /// The tool's description.
    description: Option<String>,
    /// A plan file (any dialect), relative to this file, or the plan inline.
    plan: PlanSource,
    /// The tool's input schema (default: derived from the plan's input.* references).
    input_schema: Option<BTreeMap<String, Value>>,
}

#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum PlanSource {
    File(String),
    Inline(BTreeMap<String, Value>),
}

/// The JSON Schema of servers.toml.
pub fn config_schema() -> Value {
    let schema = schemars::schema_for!(ServersToml);
    serde_json::to_value(schema).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::super::parse::{HTTP_KEYS, POLICY_KEYS, PROXY_KEYS, SERVER_KEYS};
    use super::super::pipelines::PIPELINE_KEYS;
    use super::*;

    /// The schema describes exactly the keys the parser takes.
    #[test]
    fn the_schema_has_every_key_the_parser_takes() {
        let schema = config_schema();
        let keys = |def: &str| -> Vec<String> {
            let mut keys: Vec<String> = schema["$defs"][def]["properties"]
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            keys.sort();
            keys
        };
        for (def, parsed) in [
            ("Proxy", PROXY_KEYS),
            ("Policy", POLICY_KEYS),
            ("Server", SERVER_KEYS),
            ("Pipeline", PIPELINE_KEYS),
            ("Http", HTTP_KEYS),
        ] {
            let mut parsed: Vec<String> = parsed.iter().map(|k| (*k).to_owned()).collect();
            parsed.sort();
            assert_eq!(keys(def), parsed, "{def}");
        }
        let builtins = &schema["$defs"]["Builtin"]["enum"];
        let demos: Vec<&str> = crate::demo::DemoKind::ALL
            .iter()
            .map(|k| k.name())
            .collect();
        assert_eq!(*builtins, serde_json::json!(demos), "the built-in servers");
    }
}
