//! `servers.toml`: the wire format, `${VAR}` substitution, and the validated [`Config`].
//!
//! Parsing goes key by key rather than through one `#[derive(Deserialize)]`, so that every
//! error can name the file, the server and the key it is about.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use toml::{Table, Value};

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
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 30_000;

/// The config planmux uses when no file is found: the built-in demo servers, so that a
/// fresh machine has something real to talk to.
pub const DEFAULT_CONFIG: &str = include_str!("../servers.toml");

/// A problem with the configuration, always naming where it is.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
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
    pub max_output_chars: usize,
    pub startup_timeout: Duration,
}

impl Default for ProxySettings {
    fn default() -> Self {
        Self {
            separator: "__".into(),
            call_timeout: Duration::from_millis(DEFAULT_CALL_TIMEOUT_MS),
            plan_timeout: Duration::from_millis(DEFAULT_PLAN_TIMEOUT_MS),
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            max_plan_steps: DEFAULT_MAX_PLAN_STEPS,
            max_output_chars: DEFAULT_MAX_OUTPUT_CHARS,
            startup_timeout: Duration::from_millis(DEFAULT_STARTUP_TIMEOUT_MS),
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
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// A streamable-HTTP endpoint.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// A demo server run in-process; `root` is the sandbox of the `files` demo.
    Builtin {
        kind: DemoKind,
        root: Option<PathBuf>,
    },
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
    pub enabled: bool,
    pub call_timeout: Duration,
    pub startup_timeout: Duration,
    /// Concurrent calls a plan may make to this server (`None`: only the plan's limit).
    pub max_concurrency: Option<usize>,
}

impl ServerConfig {
    /// Whether a downstream tool passes this server's include/exclude filters.
    pub fn keeps(&self, tool: &str) -> bool {
        self.include.as_ref().is_none_or(|set| set.is_match(tool))
            && !self.exclude.as_ref().is_some_and(|set| set.is_match(tool))
    }
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it came from: a path, or `<built-in default>`.
    pub source: String,
    pub proxy: ProxySettings,
    /// In file order.
    pub servers: Vec<ServerConfig>,
}

const PROXY_KEYS: &[&str] = &[
    "separator",
    "call_timeout_ms",
    "plan_timeout_ms",
    "max_concurrency",
    "max_plan_steps",
    "max_output_chars",
    "startup_timeout_ms",
];
const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "builtin",
    "include",
    "exclude",
    "enabled",
    "call_timeout_ms",
    "startup_timeout_ms",
    "max_concurrency",
];

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
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            file: file.clone(),
            source,
        })?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let base = std::path::absolute(&base).unwrap_or(base);
        Self::parse(&text, &file, &base, &|name| std::env::var(name).ok())
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
        let cx = Cx { file, base, env };
        let mut proxy = ProxySettings::default();
        let mut servers = Vec::new();
        for (key, value) in &table {
            match key.as_str() {
                "proxy" => proxy = cx.proxy(cx.table(value, "[proxy]", "proxy")?)?,
                "servers" => {
                    for (name, server) in cx.table(value, "[servers]", "servers")? {
                        let section = format!("[servers.{name}]");
                        let server = cx.table(server, "[servers]", name)?;
                        servers.push(cx.server(name, &section, server, &proxy)?);
                    }
                }
                other => {
                    return Err(cx.key_error(
                        "top level",
                        other,
                        unknown(other, &["proxy", "servers"]),
                    ));
                }
            }
        }
        // `[proxy]` may come after `[servers]`: apply its defaults to servers that did not
        // set their own timeouts.
        if let Some(Value::Table(servers_table)) = table.get("servers") {
            for server in &mut servers {
                if let Some(Value::Table(t)) = servers_table.get(&server.name) {
                    if !t.contains_key("call_timeout_ms") {
                        server.call_timeout = proxy.call_timeout;
                    }
                    if !t.contains_key("startup_timeout_ms") {
                        server.startup_timeout = proxy.startup_timeout;
                    }
                }
            }
        }
        Ok(Config {
            source: file.into(),
            proxy,
            servers,
        })
    }

    /// The enabled servers.
    pub fn enabled_servers(&self) -> impl Iterator<Item = &ServerConfig> {
        self.servers.iter().filter(|s| s.enabled)
    }
}

/// Parsing context: the file name for errors, the folder for paths, the environment.
struct Cx<'a> {
    file: &'a str,
    base: &'a Path,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Cx<'_> {
    fn key_error(&self, section: &str, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Key {
            file: self.file.into(),
            section: section.into(),
            key: key.into(),
            message: message.into(),
        }
    }

    fn section_error(&self, section: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Section {
            file: self.file.into(),
            section: section.into(),
            message: message.into(),
        }
    }

    fn table<'v>(
        &self,
        value: &'v Value,
        section: &str,
        key: &str,
    ) -> Result<&'v Table, ConfigError> {
        value.as_table().ok_or_else(|| {
            self.key_error(
                section,
                key,
                format!("expected a table, found {}", value.type_str()),
            )
        })
    }

    fn proxy(&self, table: &Table) -> Result<ProxySettings, ConfigError> {
        let s = "[proxy]";
        let mut p = ProxySettings::default();
        for (key, value) in table {
            match key.as_str() {
                "separator" => {
                    let sep = self.string(s, key, value)?;
                    if sep.is_empty() || !sep.chars().all(is_name_char) {
                        return Err(self.key_error(
                            s,
                            key,
                            "must be non-empty and use only A-Z a-z 0-9 _ -",
                        ));
                    }
                    p.separator = sep;
                }
                "call_timeout_ms" => p.call_timeout = self.millis(s, key, value)?,
                "plan_timeout_ms" => p.plan_timeout = self.millis(s, key, value)?,
                "startup_timeout_ms" => p.startup_timeout = self.millis(s, key, value)?,
                "max_concurrency" => p.max_concurrency = self.positive(s, key, value)?,
                "max_plan_steps" => p.max_plan_steps = self.positive(s, key, value)?,
                "max_output_chars" => p.max_output_chars = self.positive(s, key, value)?,
                other => return Err(self.key_error(s, other, unknown(other, PROXY_KEYS))),
            }
        }
        Ok(p)
    }

    fn server(
        &self,
        name: &str,
        s: &str,
        table: &Table,
        proxy: &ProxySettings,
    ) -> Result<ServerConfig, ConfigError> {
        if name.is_empty() || !name.chars().all(is_name_char) {
            return Err(self.section_error(s, "a server name may use only A-Z a-z 0-9 _ -"));
        }
        if name.contains(proxy.separator.as_str()) {
            return Err(self.section_error(
                s,
                format!(
                    "a server name must not contain the separator '{}'",
                    proxy.separator
                ),
            ));
        }
        for key in table.keys() {
            if !SERVER_KEYS.contains(&key.as_str()) {
                return Err(self.key_error(s, key, unknown(key, SERVER_KEYS)));
            }
        }
        let get = |key: &str| table.get(key);
        let string = |key: &str| get(key).map(|v| self.expanded(s, key, v)).transpose();
        let command = string("command")?;
        let url = string("url")?;
        let builtin = get("builtin")
            .map(|v| self.string(s, "builtin", v))
            .transpose()?;
        let cwd = string("cwd")?.map(|dir| self.base.join(dir));
        let transport = match (command, url, builtin) {
            (Some(command), None, None) => Transport::Stdio {
                command,
                args: self.strings(s, "args", get("args"))?,
                env: self.map(s, "env", get("env"))?,
                cwd,
            },
            (None, Some(url), None) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(self.key_error(s, "url", "must start with http:// or https://"));
                }
                Transport::Http {
                    url,
                    headers: self.map(s, "headers", get("headers"))?,
                }
            }
            (None, None, Some(kind)) => Transport::Builtin {
                kind: kind
                    .parse()
                    .map_err(|e: String| self.key_error(s, "builtin", e))?,
                root: cwd,
            },
            (None, None, None) => {
                return Err(self.section_error(s, "needs one of 'command', 'url' or 'builtin'"));
            }
            _ => {
                return Err(self.section_error(
                    s,
                    "'command', 'url' and 'builtin' exclude each other: set only one",
                ));
            }
        };
        let wrong_keys: &[&str] = match transport {
            Transport::Stdio { .. } => &["headers"],
            Transport::Http { .. } => &["args", "env", "cwd"],
            Transport::Builtin { .. } => &["args", "env", "headers"],
        };
        if let Some(key) = wrong_keys.iter().find(|k| table.contains_key(**k)) {
            return Err(self.key_error(s, key, "does not apply to this kind of server"));
        }
        Ok(ServerConfig {
            name: name.into(),
            transport,
            include: self.globs(s, "include", get("include"))?,
            exclude: self.globs(s, "exclude", get("exclude"))?,
            enabled: match get("enabled") {
                Some(v) => v
                    .as_bool()
                    .ok_or_else(|| self.key_error(s, "enabled", "expected true or false"))?,
                None => true,
            },
            call_timeout: match get("call_timeout_ms") {
                Some(v) => self.millis(s, "call_timeout_ms", v)?,
                None => proxy.call_timeout,
            },
            startup_timeout: match get("startup_timeout_ms") {
                Some(v) => self.millis(s, "startup_timeout_ms", v)?,
                None => proxy.startup_timeout,
            },
            max_concurrency: get("max_concurrency")
                .map(|v| self.positive(s, "max_concurrency", v))
                .transpose()?,
        })
    }

    fn string(&self, s: &str, key: &str, value: &Value) -> Result<String, ConfigError> {
        value.as_str().map(str::to_string).ok_or_else(|| {
            self.key_error(
                s,
                key,
                format!("expected a string, found {}", value.type_str()),
            )
        })
    }

    fn expanded(&self, s: &str, key: &str, value: &Value) -> Result<String, ConfigError> {
        let raw = self.string(s, key, value)?;
        expand_vars(&raw, self.env).map_err(|e| self.key_error(s, key, e))
    }

    fn strings(
        &self,
        s: &str,
        key: &str,
        value: Option<&Value>,
    ) -> Result<Vec<String>, ConfigError> {
        let Some(value) = value else {
            return Ok(Vec::new());
        };
        let items = value.as_array().ok_or_else(|| {
            self.key_error(
                s,
                key,
                format!("expected an array of strings, found {}", value.type_str()),
            )
        })?;
        items
            .iter()
            .map(|item| self.expanded(s, key, item))
            .collect()
    }

    fn map(
        &self,
        s: &str,
        key: &str,
        value: Option<&Value>,
    ) -> Result<BTreeMap<String, String>, ConfigError> {
        let Some(value) = value else {
            return Ok(BTreeMap::new());
        };
        let table = self.table(value, s, key)?;
        table
            .iter()
            .map(|(k, v)| Ok((k.clone(), self.expanded(s, &format!("{key}.{k}"), v)?)))
            .collect()
    }

    fn globs(
        &self,
        s: &str,
        key: &str,
        value: Option<&Value>,
    ) -> Result<Option<GlobSet>, ConfigError> {
        let Some(value) = value else { return Ok(None) };
        let mut builder = GlobSetBuilder::new();
        for pattern in self.strings(s, key, Some(value))? {
            let glob = Glob::new(&pattern).map_err(|e| {
                self.key_error(s, key, format!("bad glob '{pattern}': {}", e.kind()))
            })?;
            builder.add(glob);
        }
        builder
            .build()
            .map(Some)
            .map_err(|e| self.key_error(s, key, e.to_string()))
    }

    fn millis(&self, s: &str, key: &str, value: &Value) -> Result<Duration, ConfigError> {
        Ok(Duration::from_millis(self.positive(s, key, value)? as u64))
    }

    fn positive(&self, s: &str, key: &str, value: &Value) -> Result<usize, ConfigError> {
        match value.as_integer() {
            Some(n) if n > 0 => usize::try_from(n).map_err(|_| self.key_error(s, key, "too large")),
            _ => Err(self.key_error(
                s,
                key,
                format!("expected a positive integer, found {value}"),
            )),
        }
    }
}

/// Characters allowed in server names and the separator (and so in exported names).
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn unknown(key: &str, known: &[&str]) -> String {
    let closest = known
        .iter()
        .map(|k| (strsim::levenshtein(key, k), *k))
        .filter(|(d, _)| *d <= 3)
        .min();
    match closest {
        Some((_, k)) => format!("unknown key (did you mean '{k}'?)"),
        None => format!("unknown key (known keys: {})", known.join(", ")),
    }
}

/// Replaces `${VAR}` with the variable's value; `$$` is a literal `$`. Any other `$` stays.
pub fn expand_vars(raw: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$$") {
            out.push('$');
            rest = after;
        } else if let Some(body) = tail.strip_prefix("${") {
            let end = body
                .find('}')
                .ok_or_else(|| format!("unclosed '${{' in \"{raw}\""))?;
            let name = &body[..end];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!("'${{{name}}}' is not a valid variable name"));
            }
            let value = env(name).ok_or_else(|| {
                format!("environment variable '{name}' is not set (write $$ for a literal $)")
            })?;
            out.push_str(&value);
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests;
