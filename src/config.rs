//! `servers.toml`: the validated [`Config`], where it is found, and the defaults.
//!
//! The file is read in two steps: serde reads it into wire structs (`wire.rs`, which also
//! give its JSON Schema), then `validate.rs` and `pipelines.rs` check them into a `Config`.
//! Both collect every problem, each naming the file, the section and the key, and report
//! them together.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::{Glob, GlobSet};
use toml::Table;

pub use pipelines::{PipelineConfig, called_tools};
use validate::Cx;
pub use validate::{Expanded, expand_vars};
pub use wire::config_schema;

use crate::demo::DemoKind;

/// Per downstream call, unless a server sets `call_timeout_ms`: long enough for a slow web
/// tool, short enough that a wedged server does not hold a model's turn for ever.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 60_000;
/// A whole plan: five minutes covers every realistic multi-step plan.
pub const DEFAULT_PLAN_TIMEOUT_MS: u64 = 300_000;
/// Concurrent downstream calls per plan: enough for wide fan-outs, not a fork bomb.
pub const DEFAULT_MAX_CONCURRENCY: usize = 16;
/// Plans longer than this are almost certainly a model looping, not a real plan.
pub const DEFAULT_MAX_PLAN_STEPS: usize = crate::plan::DEFAULT_MAX_PLAN_STEPS;
/// Per output value returned to the model: about 2,000 tokens.
pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 8_000;
/// Connecting and listing tools: `npx -y` may download a package on first use.
pub const DEFAULT_LIST_GRACE_MS: u64 = 3_000;
/// The longest a 2026-07-28 host may treat planmux's merged lists as fresh (`ttlMs`): they
/// also change by a reload, a quarantine or a server's restart, which a host on a listen
/// stream hears of at once and one without does not.
pub const LIST_TTL_MS: u64 = 60_000;
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 30_000;
/// Run records kept for `planmux://runs/{run_id}`: enough to look back over a session.
pub const DEFAULT_KEPT_RUNS: usize = 32;
/// How much the kept run records may weigh together (their JSON size): a few runs over
/// large outputs must not pin hundreds of megabytes. The newest record is always kept.
pub const DEFAULT_KEPT_RUN_BYTES: usize = 64 * 1024 * 1024;

/// The config planmux uses when no file is found: the built-in demo servers, so that a
/// fresh machine has something real to talk to.
pub const DEFAULT_CONFIG: &str = include_str!("../servers.toml");

/// A problem with the configuration, always naming where it is.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: cannot read: {error}")]
    Read { file: String, error: std::io::Error },
    /// The file is not valid TOML.
    #[error("{file}: not valid TOML: {message}")]
    Syntax { file: String, message: String },
    /// A key is unknown, has the wrong type, or has a bad value.
    #[error("{file}: {section}: key '{key}': {message}")]
    Key {
        file: String,
        section: String,
        key: String,
        message: String,
    },
    /// A section as a whole is wrong (no transport, two transports, bad name).
    #[error("{file}: {section}: {message}")]
    Section {
        file: String,
        section: String,
        message: String,
    },
    /// Every problem of a file with more than one, so that one reading fixes them all.
    #[error("{}", lines(.0))]
    Several(Vec<ConfigError>),
}

/// Problems one to a line.
fn lines(errors: &[ConfigError]) -> String {
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    lines.join("\n")
}

/// `[proxy]`: settings for planmux itself.
#[derive(Debug, Clone)]
pub struct ProxySettings {
    /// Between server and tool in exported names.
    pub separator: String,
    pub call_timeout: Duration,
    pub plan_timeout: Duration,
    pub max_concurrency: usize,
    pub max_plan_steps: usize,
    /// Most items one `foreach` step may loop over.
    pub max_foreach_items: usize,
    pub max_output_chars: usize,
    pub startup_timeout: Duration,
    /// How long the host's handshake and lists wait for slow servers before answering
    /// with those that are ready (`list_grace_ms`); late ones are announced with
    /// `list_changed`.
    pub list_grace: Duration,
    /// Largest and deepest message accepted from the host or a downstream
    /// (`max_message_bytes`, `max_nesting`).
    pub wire: crate::wire::Limits,
    /// Where every authorization decision is also appended as a JSON line.
    pub audit_log: Option<PathBuf>,
    /// Which tools `tools/list` shows (`surface`).
    pub surface: Surface,
    /// Exported-name globs listed even when the surface is compact (`always_list`).
    pub always_list: Option<GlobSet>,
    /// The most tools `auto` lists in full, whatever the host's profile says
    /// (`tool_budget`).
    pub tool_budget: Option<usize>,
    /// How many run records are kept for `planmux://runs/…` (`kept_runs`), and how much
    /// they may weigh together as JSON (`kept_run_bytes`).
    pub kept_runs: usize,
    pub kept_run_bytes: usize,
    /// Globs of planmux's variables every stdio child also sees (`env_inherit`), added
    /// to each server's own.
    pub env_inherit: Vec<Glob>,
}

/// `[proxy] surface`: which tools `tools/list` shows the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Surface {
    /// Full when the catalog fits the host's tool budget (and name budget), else compact.
    #[default]
    Auto,
    /// Every tool.
    Full,
    /// planmux's own tools and `always_list`; the rest are found with `search_tools`.
    Compact,
}

impl Surface {
    pub const ALL: [(Surface, &'static str); 3] = [
        (Surface::Auto, "auto"),
        (Surface::Full, "full"),
        (Surface::Compact, "compact"),
    ];
}

impl std::str::FromStr for Surface {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        Surface::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(surface, _)| *surface)
            .ok_or_else(|| format!("'{name}' is not one of \"auto\", \"full\", \"compact\""))
    }
}

impl Default for ProxySettings {
    fn default() -> Self {
        Self {
            separator: "__".into(),
            call_timeout: Duration::from_millis(DEFAULT_CALL_TIMEOUT_MS),
            plan_timeout: Duration::from_millis(DEFAULT_PLAN_TIMEOUT_MS),
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            max_plan_steps: DEFAULT_MAX_PLAN_STEPS,
            max_foreach_items: crate::plan::DEFAULT_MAX_FOREACH_ITEMS,
            max_output_chars: DEFAULT_MAX_OUTPUT_CHARS,
            startup_timeout: Duration::from_millis(DEFAULT_STARTUP_TIMEOUT_MS),
            list_grace: Duration::from_millis(DEFAULT_LIST_GRACE_MS),
            wire: crate::wire::Limits::default(),
            audit_log: None,
            surface: Surface::default(),
            always_list: None,
            kept_runs: DEFAULT_KEPT_RUNS,
            kept_run_bytes: DEFAULT_KEPT_RUN_BYTES,
            tool_budget: None,
            env_inherit: Vec::new(),
        }
    }
}

/// How planmux reaches one downstream server.
#[derive(Debug, Clone)]
pub enum Transport {
    /// A child process speaking MCP over stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Set in the child's environment, on top of the minimal one.
        env: BTreeMap<String, String>,
        /// planmux's own variables the child may also see: its `env_inherit` globs and
        /// `[proxy] env_inherit`'s.
        env_inherit: Option<GlobSet>,
        cwd: Option<PathBuf>,
    },
    /// A streamable-HTTP endpoint.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
        /// How planmux signs in to it (DESIGN §13).
        sign_in: SignIn,
    },
    /// A demo server run in-process; `root` is the sandbox of the `files` demo.
    Builtin {
        kind: DemoKind,
        root: Option<PathBuf>,
    },
}

/// How planmux signs in to an HTTP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignIn {
    /// Its `headers` set `Authorization`: sent as they are, never OAuth.
    Header,
    /// OAuth authorization code with PKCE when the server asks for it (a 401): the user
    /// signs in with `planmux login`.
    Browser(BrowserClient),
    /// OAuth client credentials: planmux gets its own tokens, no user involved.
    ClientCredentials {
        client_id: String,
        client_secret: Secret,
        scopes: Vec<String>,
    },
}

/// Who planmux is to the authorization server when a user signs in, in the order the
/// MCP specification gives: a pre-registered client, else a client metadata document
/// (where the server accepts one), else dynamic registration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrowserClient {
    /// The scopes to ask for; empty: the server's challenge or metadata decides.
    pub scopes: Vec<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<Secret>,
    pub client_metadata_url: Option<String>,
}

/// A value that must not be shown: `Debug` prints `[secret]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[secret]")
    }
}

/// One `[servers.NAME]` section, validated.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    /// Downstream tool names to keep; `None` keeps all.
    pub include: Option<GlobSet>,
    /// Downstream tool names to drop, applied after `include`.
    pub exclude: Option<GlobSet>,
    /// Whether its tools and prompts are exported as `<server>__<name>` (the default) or
    /// under their own names.
    pub namespace: bool,
    pub enabled: bool,
    pub call_timeout: Duration,
    pub startup_timeout: Duration,
    /// Concurrent calls a plan may make to this server (`None`: only the plan's limit).
    pub max_concurrency: Option<usize>,
    /// Message limits on this server's connection (from `[proxy]`).
    pub wire: crate::wire::Limits,
    /// How its tools get their tiers (`tiers`, `trust_annotations`).
    pub tiers: crate::policy::TierRules,
    /// The variables its keys name that are not set where planmux runs: it is kept, but
    /// cannot start ([`ServerConfig::cannot_start`]).
    pub unset: Vec<UnsetVar>,
}

/// A `${VAR}` a server's key names that is not set where planmux runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsetVar {
    /// The variable.
    pub name: String,
    /// The key that names it (`env`, `args`, `url`, …).
    pub key: String,
}

/// `[http]`: the HTTP front (`planmux serve --http`).
#[derive(Clone)]
pub struct HttpConfig {
    /// Bearer tokens a request must carry one of (`${VAR}` expanded); required on any
    /// address other than loopback.
    pub tokens: Vec<String>,
    /// Browser origins allowed to call (`Origin` header); a request from any other origin
    /// is refused. Empty: only requests without `Origin` or from loopback origins.
    pub origins: Vec<String>,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Requests handled at once; more wait.
    pub max_requests: usize,
    /// Connections open at once; more wait to be accepted.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers (slowloris).
    pub header_timeout: Duration,
    /// At most this many requests per caller (`"120/min"`); `None`: no limit.
    pub rate_limit: Option<RateLimit>,
    /// `[http.auth]`: bearer tokens may be JWTs of an issuer.
    pub auth: Option<HttpAuth>,
}

/// `[http.auth]`: the front as an OAuth 2.1 resource server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAuth {
    /// The issuer, as tokens name it in `iss` (its metadata names its keys).
    pub issuer: String,
    /// planmux's URL, as tokens name it in `aud`.
    pub audience: String,
    /// The claim listing a caller's groups.
    pub groups_claim: String,
}

/// `[http] rate_limit`: at most `requests` per `per`, for each caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub requests: u32,
    pub per: Duration,
}

impl RateLimit {
    /// `"N/s"`, `"N/min"` or `"N/h"` (N at least 1), or why not.
    pub fn parse(text: &str) -> Result<Self, String> {
        let wrong = || {
            format!(
                "'{}' is not a rate: write N/s, N/min or N/h (N at least 1), e.g. \"120/min\"",
                crate::text::clip(text, 40)
            )
        };
        let (count, unit) = text.split_once('/').ok_or_else(wrong)?;
        let requests: u32 = count.trim().parse().map_err(|_| wrong())?;
        let per = match unit.trim() {
            "s" | "sec" | "second" => Duration::from_secs(1),
            "min" | "minute" => Duration::from_secs(60),
            "h" | "hour" => Duration::from_secs(3600),
            _ => return Err(wrong()),
        };
        if requests == 0 {
            return Err(wrong());
        }
        Ok(Self { requests, per })
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            tokens: Vec::new(),
            origins: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_requests: DEFAULT_MAX_REQUESTS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: Duration::from_millis(DEFAULT_HEADER_TIMEOUT_MS),
            rate_limit: None,
            auth: None,
        }
    }
}

impl std::fmt::Debug for HttpConfig {
    /// Without the tokens: they are secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("tokens", &self.tokens.len())
            .field("origins", &self.origins)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_requests", &self.max_requests)
            .field("max_connections", &self.max_connections)
            .field("header_timeout", &self.header_timeout)
            .field("rate_limit", &self.rate_limit)
            .field("auth", &self.auth)
            .finish()
    }
}

/// Largest HTTP request body by default: 4 MiB holds any plan a model writes.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 << 20;
/// HTTP requests handled at once by default: enough for a team's hosts, not a flood.
pub const DEFAULT_MAX_REQUESTS: usize = 64;
/// HTTP connections open at once by default: well within the process's file descriptors.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// How long an HTTP client may take to send a request's headers by default.
pub const DEFAULT_HEADER_TIMEOUT_MS: u64 = 10_000;

/// `[policy]`, validated.
#[derive(Debug, Clone, Default)]
pub struct PolicyConfig {
    /// Exported-name globs: never listed, never callable, directly or in plans.
    pub deny: Option<GlobSet>,
    /// The tiers a plan needs the user's approval for.
    pub confirm: crate::policy::Confirm,
}

impl ServerConfig {
    /// Whether a downstream tool passes this server's include/exclude filters.
    pub fn keeps(&self, tool: &str) -> bool {
        self.include.as_ref().is_none_or(|set| set.is_match(tool))
            && !self.exclude.as_ref().is_some_and(|set| set.is_match(tool))
    }

    /// Why it cannot start, when its keys name variables that are not set: each variable
    /// with the keys that name it (never a value: there is none).
    pub fn cannot_start(&self) -> Option<String> {
        let mut vars: Vec<(&str, Vec<String>)> = Vec::new();
        for UnsetVar { name, key } in &self.unset {
            let key = format!("`{key}`");
            match vars.iter_mut().find(|(n, _)| n == name) {
                Some((_, keys)) if keys.contains(&key) => {}
                Some((_, keys)) => keys.push(key),
                None => vars.push((name, vec![key])),
            }
        }
        let named: Vec<String> = (vars.iter())
            .map(|(name, keys)| format!("{name} (in {})", keys.join(", ")))
            .collect();
        let (last, rest) = named.split_last()?;
        let (list, noun, verb, them) = if rest.is_empty() {
            (last.clone(), "variable", "is", "it")
        } else {
            (
                format!("{} and {last}", rest.join(", ")),
                "variables",
                "are",
                "them",
            )
        };
        Some(format!(
            "it needs the environment {noun} {list}, which {verb} not set where planmux runs: set {them} in planmux's environment (the `env` of its entry in the host's config), then restart planmux"
        ))
    }
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it came from: a path, or `<built-in default>`.
    pub source: String,
    pub proxy: ProxySettings,
    pub policy: PolicyConfig,
    /// In file order.
    pub servers: Vec<ServerConfig>,
    /// `servers.lock` beside the config file (`None` for the built-in config).
    pub lock_path: Option<PathBuf>,
    /// Saved plans listed as tools, in file order.
    pub pipelines: Vec<PipelineConfig>,
    /// The HTTP front's settings.
    pub http: HttpConfig,
    /// `[[access]]`, in file order (none: every caller may use everything).
    pub access: Vec<std::sync::Arc<crate::policy::Rule>>,
    /// `[state] store`.
    pub state: StateStore,
    /// `[telemetry]`.
    pub telemetry: Telemetry,
}

/// `[telemetry]`: what planmux tells monitoring.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Telemetry {
    /// `GET /metrics` on the HTTP front.
    pub metrics: bool,
    /// Where traces go (OTLP/HTTP), if anywhere.
    pub otlp_endpoint: Option<String>,
}

/// `[state] store`: where what several instances must share lives.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum StateStore {
    /// In this process (the default).
    #[default]
    Memory,
    /// In Redis at `url` (credentials and all); `label` is its address without them.
    Redis { url: Secret, label: String },
}

impl Config {
    /// Finds the config the way the CLI documents: `--config`, then `$PLANMUX_CONFIG`, then
    /// `./servers.toml`, then the built-in default.
    pub fn locate(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        if let Some(path) = explicit {
            return Self::load(path);
        }
        if let Some(path) = std::env::var_os("PLANMUX_CONFIG").filter(|p| !p.is_empty()) {
            return Self::load(Path::new(&path));
        }
        let local = Path::new("servers.toml");
        if local.is_file() {
            return Self::load(local);
        }
        // Relative paths of the built-in config (the files demo's sandbox) go under the
        // temp folder, not wherever the host happened to start planmux.
        let base = std::env::temp_dir().join("planmux");
        Self::parse(DEFAULT_CONFIG, "<built-in default>", &base, &|name| {
            std::env::var(name).ok()
        })
    }

    /// Reads and validates one file; relative paths in it resolve against its folder.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            file: path.display().to_string(),
            error,
        })?;
        Self::parse_file(path, &text, &|name| std::env::var(name).ok())
    }

    /// Validates `text`, read from the file at `path` (relative paths in it resolve
    /// against its folder); `env` looks up `${VAR}`.
    pub fn parse_file(
        path: &Path,
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let base = std::path::absolute(&base).unwrap_or(base);
        let mut config = Self::parse(text, &file, &base, env)?;
        config.lock_path = Some(base.join(crate::lock::LOCK_FILE));
        Ok(config)
    }

    /// Parses config text. `env` looks up `${VAR}`; `base` anchors relative paths.
    pub fn parse(
        text: &str,
        file: &str,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let table: Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Syntax {
                file: file.into(),
                message: e.to_string().trim().to_string(),
            })?;
        let cx = Cx::new(file, base, env);
        let wire = cx.top(table);
        // `[proxy]` first, wherever it stands: its defaults apply to every server. When it
        // refused a key, its separator is unknown, and names are not checked against it.
        let read_proxy = match wire.proxy {
            Some(section) => cx.proxy(section),
            None => Some(ProxySettings::default()),
        };
        let separator = read_proxy.as_ref().map(|p| p.separator.clone());
        let separator = separator.as_deref();
        let proxy = read_proxy.unwrap_or_default();
        let policy = wire.policy.and_then(|section| cx.policy(section));
        let servers = wire.servers.map_or_else(Vec::new, |servers| servers.0);
        let servers = (servers.into_iter())
            .filter_map(|(name, section)| cx.server(&name, section, &proxy, separator))
            .collect();
        let pipelines = wire
            .pipelines
            .map_or_else(Vec::new, |pipelines| pipelines.0);
        let pipelines: Vec<PipelineConfig> = (pipelines.into_iter())
            .filter_map(|(name, section)| cx.pipeline(&name, section, separator))
            .collect();
        cx.pipeline_cycles(&pipelines);
        let http = wire.http.and_then(|section| cx.http(section));
        let access = (wire.access.unwrap_or_default().into_iter().enumerate())
            .filter_map(|(i, section)| cx.access(i + 1, section))
            .collect();
        let state = wire.state.and_then(|section| cx.state(section));
        let telemetry = wire.telemetry.and_then(|section| cx.telemetry(section));
        cx.finish(Config {
            source: file.into(),
            proxy,
            policy: policy.unwrap_or_default(),
            servers,
            lock_path: None,
            pipelines,
            http: http.unwrap_or_default(),
            access,
            state: state.unwrap_or_default(),
            telemetry: telemetry.unwrap_or_default(),
        })
    }

    /// The enabled servers.
    pub fn enabled_servers(&self) -> impl Iterator<Item = &ServerConfig> {
        self.servers.iter().filter(|s| s.enabled)
    }
}

/// Characters allowed in server names and the separator (and so in exported names).
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

mod access;
mod oauth;
mod pipelines;
mod read;
mod state;
#[cfg(test)]
mod tests;
mod validate;
mod values;
mod wire;
