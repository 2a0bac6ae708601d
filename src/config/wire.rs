//! servers.toml as written: the one description of the file. Serde reads it into these
//! structs (`read.rs` finds every key they refuse), `validate.rs` and `pipelines.rs` make
//! the validated [`Config`](super::Config) of them, and their JSON Schema is
//! `planmux schema config`, which Taplo and Even Better TOML read through a `#:schema`
//! line to complete and check the file. The doc comments are what an editor shows.

use schemars::JsonSchema;
use serde::Deserialize;

use super::Surface;
use super::read::Section;
use super::values::{Choice, Count, Flag, JsonTable, Ordered, PlanSource, Text, Texts};
use crate::demo::DemoKind;
use crate::policy::{Confirm, Tier};

/// planmux's configuration: the MCP servers it fronts, and how.
#[derive(Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ServersToml {
    /// Settings for planmux itself; every key is optional.
    pub(super) proxy: Option<Section<Proxy>>,
    /// What plans need approved, and what is never callable.
    pub(super) policy: Option<Section<Policy>>,
    /// The downstream servers, by name (A-Z a-z 0-9 _ -).
    pub(super) servers: Option<Ordered<Section<Server>>>,
    /// Saved plans listed as tools, by name.
    pub(super) pipelines: Option<Ordered<Section<Pipeline>>>,
    /// The HTTP front (`planmux serve --http`).
    pub(super) http: Option<Section<Http>>,
    /// What each caller may see and call: the first rule whose `who` matches applies;
    /// a caller no rule matches gets nothing.
    pub(super) access: Option<Vec<Section<Access>>>,
    /// Where approval tokens, run records and rate counts live.
    pub(super) state: Option<Section<State>>,
    /// What planmux tells monitoring.
    pub(super) telemetry: Option<Section<Telemetry>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Telemetry {
    /// `GET /metrics` on the HTTP front, in Prometheus's text format (default false).
    pub(super) metrics: Option<Flag>,
    /// An OpenTelemetry collector's OTLP/HTTP base URL (traces go to `/v1/traces` under
    /// it), e.g. "http://collector:4318" (default: no traces).
    pub(super) otlp_endpoint: Option<Text>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct State {
    /// "memory" (the default: this process only) or a Redis URL ("redis://host:6379",
    /// "rediss://…" over TLS, `${VAR}` expanded) that several instances share.
    pub(super) store: Option<Text>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Access {
    /// The callers it is for: "sub:ID", "group:NAME", "email:ADDR", or "*" (everyone).
    pub(super) who: Texts,
    /// The exported tools they may see and call (globs; planmux's own tools too, e.g.
    /// "execute_plan").
    pub(super) tools: Texts,
    /// Their own `[policy] confirm`.
    pub(super) confirm: Option<Choice<Confirm>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Http {
    /// Bearer tokens (`${VAR}` expanded, 16 characters or more); required on any
    /// address other than loopback.
    pub(super) tokens: Option<Texts>,
    /// Browser origins allowed to call, with scheme (e.g. "https://app.example.com:443").
    pub(super) origins: Option<Texts>,
    /// Largest request body, in bytes (default 4 MiB).
    pub(super) max_body_bytes: Option<Count>,
    /// Requests handled at once (default 64).
    pub(super) max_requests: Option<Count>,
    /// Connections open at once (default 512).
    pub(super) max_connections: Option<Count>,
    /// How long a client may take to send a request's headers, in ms (default 10000).
    pub(super) header_timeout_ms: Option<Count>,
    /// Requests per caller (per bearer token; all of them when there is none), as
    /// "N/s", "N/min" or "N/h" (default: no limit). More are answered 429.
    pub(super) rate_limit: Option<Text>,
    /// The front as an OAuth 2.1 resource server: bearer tokens are JWTs of this issuer.
    pub(super) auth: Option<HttpAuth>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct HttpAuth {
    /// The issuer (its metadata names its signing keys), e.g. "https://idp.example.com".
    pub(super) issuer: Text,
    /// planmux's own URL, as tokens name it in `aud`, e.g. "https://planmux.example.com/mcp".
    pub(super) audience: Text,
    /// The claim that lists the caller's groups (default "groups").
    pub(super) groups_claim: Option<Text>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Proxy {
    /// Between server and tool in exported names (default "__").
    pub(super) separator: Option<Text>,
    /// Per downstream call, in ms (default 60000).
    pub(super) call_timeout_ms: Option<Count>,
    /// A whole plan, in ms (default 300000).
    pub(super) plan_timeout_ms: Option<Count>,
    /// Concurrent downstream calls per plan (default 16).
    pub(super) max_concurrency: Option<Count>,
    /// Steps per plan (default 256).
    pub(super) max_plan_steps: Option<Count>,
    /// Items of one foreach step (default 1000).
    pub(super) max_foreach_items: Option<Count>,
    /// Per output value returned to the model (default 8000).
    pub(super) max_output_chars: Option<Count>,
    /// Connect and list tools, in ms (default 30000).
    pub(super) startup_timeout_ms: Option<Count>,
    /// How long the handshake and lists wait for slow servers, in ms (default 3000).
    pub(super) list_grace_ms: Option<Count>,
    /// Longest JSON-RPC message, in bytes (default 64 MiB).
    pub(super) max_message_bytes: Option<Count>,
    /// Deepest nesting of arrays and objects in one message (default 512).
    pub(super) max_nesting: Option<Count>,
    /// Also append every authorization decision to this file (JSON lines).
    pub(super) audit_log: Option<Text>,
    /// auto | full | compact: list every tool, or search_tools and execute_plan.
    pub(super) surface: Option<Choice<Surface>>,
    /// Exported-name globs listed even when the surface is compact.
    pub(super) always_list: Option<Texts>,
    /// Auto lists every tool up to this many (default: the host's profile).
    pub(super) tool_budget: Option<Count>,
    /// Run records kept for planmux://runs/… (default 32).
    pub(super) kept_runs: Option<Count>,
    /// How much the kept run records may weigh together as JSON, in bytes (default 64 MiB).
    pub(super) kept_run_bytes: Option<Count>,
    /// Globs of planmux's variables every stdio server's child may also see.
    pub(super) env_inherit: Option<Texts>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Policy {
    /// Tiers a plan needs the user's approval for: write (default), destructive, none.
    pub(super) confirm: Option<Choice<Confirm>>,
    /// Exported-name globs: never listed, never callable, directly or in plans.
    pub(super) deny: Option<Texts>,
}

/// One downstream server: `command` (stdio), `url` (streamable HTTP) or `builtin`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Server {
    /// The program of a stdio server (`${VAR}` and a leading `~` expand).
    pub(super) command: Option<Text>,
    /// Its arguments.
    pub(super) args: Option<Texts>,
    /// Set in the child's environment (`${VAR}` reads planmux's).
    pub(super) env: Option<Ordered<Text>>,
    /// Globs of planmux's variables the child may also see.
    pub(super) env_inherit: Option<Texts>,
    /// The child's working folder, relative to this file.
    pub(super) cwd: Option<Text>,
    /// A streamable-HTTP server's URL.
    pub(super) url: Option<Text>,
    /// Headers sent to an HTTP server. With an `Authorization` header planmux never
    /// signs in with OAuth.
    pub(super) headers: Option<Ordered<Text>>,
    /// OAuth: the scopes to ask for when signing in (else the server's challenge or its
    /// metadata says).
    pub(super) scopes: Option<Texts>,
    /// OAuth: a client registered with the server's authorization server beforehand
    /// (else its client metadata document, else dynamic registration).
    pub(super) client_id: Option<Text>,
    /// OAuth: the pre-registered client's secret, for a confidential client (`${VAR}`).
    pub(super) client_secret: Option<Text>,
    /// OAuth: the HTTPS URL of this client's metadata document (CIMD), its client id
    /// where the authorization server accepts one.
    pub(super) client_metadata_url: Option<Text>,
    /// OAuth without a browser: `{ client_credentials = { client_id, client_secret } }`.
    pub(super) oauth: Option<OAuth>,
    /// A demo server built into planmux.
    pub(super) builtin: Option<Choice<DemoKind>>,
    /// Globs on the server's tool names: only these are exported.
    pub(super) include: Option<Texts>,
    /// Globs on the server's tool names, applied after include.
    pub(super) exclude: Option<Texts>,
    /// false: not started, not listed.
    pub(super) enabled: Option<Flag>,
    /// Overrides [proxy] call_timeout_ms.
    pub(super) call_timeout_ms: Option<Count>,
    /// Overrides [proxy] startup_timeout_ms.
    pub(super) startup_timeout_ms: Option<Count>,
    /// Concurrent calls to this server from one plan.
    pub(super) max_concurrency: Option<Count>,
    /// Tool-name globs → tier; the first match wins.
    pub(super) tiers: Option<Ordered<Choice<Tier>>>,
    /// false: a tool no glob matches is destructive, whatever it says.
    pub(super) trust_annotations: Option<Flag>,
    /// false: export its tools and prompts under their own names.
    pub(super) namespace: Option<Flag>,
}

/// `oauth = { … }` of an HTTP server.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct OAuth {
    /// Machine to machine (OAuth client credentials): planmux gets its own tokens, with no
    /// browser and no `planmux login`.
    pub(super) client_credentials: ClientCredentials,
}

/// A client of the authorization server with its own secret.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ClientCredentials {
    /// The client's id (`${VAR}` expands).
    pub(super) client_id: Text,
    /// The client's secret (`${VAR}`: keep it out of the file).
    pub(super) client_secret: Text,
}

/// A saved plan listed as the tool named after it.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Pipeline {
    /// The tool's description.
    pub(super) description: Option<Text>,
    /// A plan file (any dialect), relative to this file, or the plan inline.
    // Optional to serde, which reads each key alone when it refuses one (`read.rs`); a
    // missing plan is reported when the section is checked.
    #[schemars(required)]
    pub(super) plan: Option<PlanSource>,
    /// The tool's input schema (default: derived from the plan's input.* references).
    pub(super) input_schema: Option<JsonTable>,
}

/// The JSON Schema of servers.toml.
pub fn config_schema() -> serde_json::Value {
    let schema = schemars::schema_for!(ServersToml);
    serde_json::to_value(schema).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    /// What an editor reads, kept as it is unless a change means it.
    #[test]
    fn the_schema() {
        insta::assert_json_snapshot!("config_schema", super::config_schema());
    }
}
