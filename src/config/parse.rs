//! Parsing `servers.toml` key by key, so that every error names the file, the section and
//! the key; `${VAR}` expansion.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use toml::{Table, Value};

use super::{
    ConfigError, PolicyConfig, ProxySettings, ServerConfig, Surface, Transport, is_name_char,
};
use crate::policy::{Tier, TierRules};

pub(super) const PROXY_KEYS: &[&str] = &[
    "separator",
    "call_timeout_ms",
    "plan_timeout_ms",
    "max_concurrency",
    "max_plan_steps",
    "max_foreach_items",
    "max_output_chars",
    "startup_timeout_ms",
    "list_grace_ms",
    "max_message_bytes",
    "max_nesting",
    "audit_log",
    "surface",
    "always_list",
    "tool_budget",
    "kept_runs",
    "kept_run_bytes",
];
pub(super) const POLICY_KEYS: &[&str] = &["confirm", "deny"];
/// The most `[http] max_requests` and `max_connections` may be.
const MAX_AT_ONCE: usize = 1_000_000;
pub(super) const HTTP_KEYS: &[&str] = &[
    "tokens",
    "origins",
    "max_body_bytes",
    "max_requests",
    "max_connections",
    "header_timeout_ms",
];
pub(super) const SERVER_KEYS: &[&str] = &[
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
    "env_inherit",
    "tiers",
    "trust_annotations",
    "namespace",
];

/// Parsing context: the file name for errors, the folder for paths, the environment.
pub(super) struct Cx<'a> {
    pub(super) file: &'a str,
    pub(super) base: &'a Path,
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
}

impl Cx<'_> {
    pub(super) fn key_error(
        &self,
        section: &str,
        key: &str,
        message: impl Into<String>,
    ) -> ConfigError {
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

    /// A leading `~` or `~/` is the home folder (`$HOME`), as a shell would have it:
    /// host configs write `~/projects`, and no shell expands it for planmux.
    pub(super) fn home(&self, path: String) -> String {
        let home = || (self.env)("HOME").filter(|h| !h.is_empty());
        match path.strip_prefix('~') {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => match home() {
                Some(home) => format!("{}{rest}", home.trim_end_matches('/')),
                None => path,
            },
            _ => path,
        }
    }

    pub(super) fn table<'v>(
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

    pub(super) fn proxy(&self, table: &Table) -> Result<ProxySettings, ConfigError> {
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
                "list_grace_ms" => p.list_grace = self.millis(s, key, value)?,
                "max_concurrency" => p.max_concurrency = self.positive(s, key, value)?,
                "max_plan_steps" => p.max_plan_steps = self.positive(s, key, value)?,
                "max_foreach_items" => p.max_foreach_items = self.positive(s, key, value)?,
                "max_output_chars" => p.max_output_chars = self.positive(s, key, value)?,
                "max_message_bytes" => p.wire.max_message_bytes = self.positive(s, key, value)?,
                "max_nesting" => p.wire.max_nesting = self.positive(s, key, value)?,
                "audit_log" => {
                    let path = self.home(self.expanded(s, key, value)?);
                    p.audit_log = Some(self.base.join(path));
                }
                "surface" => {
                    let name = self.string(s, key, value)?;
                    p.surface = Surface::ALL
                        .iter()
                        .find(|(_, n)| *n == name)
                        .map(|(surface, _)| *surface)
                        .ok_or_else(|| {
                            self.key_error(
                                s,
                                key,
                                format!("'{name}' is not one of \"auto\", \"full\", \"compact\""),
                            )
                        })?;
                }
                "always_list" => p.always_list = self.globs(s, key, Some(value))?,
                "tool_budget" => p.tool_budget = Some(self.positive(s, key, value)?),
                "kept_runs" => p.kept_runs = self.positive(s, key, value)?,
                "kept_run_bytes" => p.kept_run_bytes = self.positive(s, key, value)?,
                other => return Err(self.key_error(s, other, unknown(other, PROXY_KEYS))),
            }
        }
        Ok(p)
    }

    pub(super) fn server(
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
        let command = string("command")?.map(|c| self.home(c));
        let url = string("url")?;
        let builtin = get("builtin")
            .map(|v| self.string(s, "builtin", v))
            .transpose()?;
        let cwd = string("cwd")?.map(|dir| self.base.join(self.home(dir)));
        let transport = match (command, url, builtin) {
            (Some(command), None, None) => Transport::Stdio {
                command,
                args: self
                    .strings(s, "args", get("args"))?
                    .into_iter()
                    .map(|arg| self.home(arg))
                    .collect(),
                env: self.map(s, "env", get("env"))?,
                env_inherit: self.globs(s, "env_inherit", get("env_inherit"))?,
                cwd,
            },
            (None, Some(url), None) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(self.key_error(s, "url", "must start with http:// or https://"));
                }
                let headers = self.map(s, "headers", get("headers"))?;
                // User info in the URL becomes Basic auth, which would replace the
                // configured header: the server would not get what the config says.
                let authority = url.split("://").nth(1).unwrap_or_default();
                let authority = authority.split(['/', '?', '#']).next().unwrap_or_default();
                let both = authority.contains('@')
                    && headers
                        .keys()
                        .any(|k| k.eq_ignore_ascii_case("authorization"));
                if both {
                    return Err(self.key_error(
                        s,
                        "headers",
                        "sets Authorization while the url has user info (user:password@), which would replace it: keep one",
                    ));
                }
                Transport::Http { url, headers }
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
            Transport::Http { .. } => &["args", "env", "env_inherit", "cwd"],
            Transport::Builtin { .. } => &["args", "env", "env_inherit", "headers"],
        };
        if let Some(key) = wrong_keys.iter().find(|k| table.contains_key(**k)) {
            return Err(self.key_error(s, key, "does not apply to this kind of server"));
        }
        Ok(ServerConfig {
            name: name.into(),
            transport,
            include: self.globs(s, "include", get("include"))?,
            exclude: self.globs(s, "exclude", get("exclude"))?,
            namespace: match get("namespace") {
                Some(v) => v
                    .as_bool()
                    .ok_or_else(|| self.key_error(s, "namespace", "expected true or false"))?,
                None => true,
            },
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
            wire: proxy.wire,
            tiers: TierRules {
                rules: self.tiers(s, get("tiers"))?,
                trust_annotations: match get("trust_annotations") {
                    Some(v) => v.as_bool().ok_or_else(|| {
                        self.key_error(s, "trust_annotations", "expected true or false")
                    })?,
                    None => true,
                },
            },
        })
    }

    /// `[policy]`: what no path may call.
    pub(super) fn policy(&self, table: &Table) -> Result<PolicyConfig, ConfigError> {
        let s = "[policy]";
        for key in table.keys() {
            if !POLICY_KEYS.contains(&key.as_str()) {
                return Err(self.key_error(s, key, unknown(key, POLICY_KEYS)));
            }
        }
        Ok(PolicyConfig {
            deny: self.globs(s, "deny", table.get("deny"))?,
            confirm: match table.get("confirm") {
                Some(value) => self
                    .string(s, "confirm", value)?
                    .parse()
                    .map_err(|e| self.key_error(s, "confirm", e))?,
                None => crate::policy::Confirm::default(),
            },
        })
    }

    pub(super) fn http(&self, table: &Table) -> Result<super::HttpConfig, ConfigError> {
        let s = "[http]";
        for key in table.keys() {
            if !HTTP_KEYS.contains(&key.as_str()) {
                return Err(self.key_error(s, key, unknown(key, HTTP_KEYS)));
            }
        }
        let tokens = self.strings(s, "tokens", table.get("tokens"))?;
        if tokens.iter().any(|t| t.len() < 16) {
            return Err(self.key_error(
                s,
                "tokens",
                "each token needs at least 16 characters (a short one is guessed)",
            ));
        }
        let number = |key: &str, default: usize| match table.get(key) {
            Some(value) => self.positive(s, key, value),
            None => Ok(default),
        };
        // Requests and connections at once: each is a semaphore's permits, which have
        // a ceiling far above any real need.
        let count = |key: &str, default: usize| {
            let n = number(key, default)?;
            if n > MAX_AT_ONCE {
                return Err(self.key_error(s, key, format!("must be at most {MAX_AT_ONCE}")));
            }
            Ok(n)
        };
        Ok(super::HttpConfig {
            tokens,
            origins: self.strings(s, "origins", table.get("origins"))?,
            max_body_bytes: number("max_body_bytes", super::DEFAULT_MAX_BODY_BYTES)?,
            max_requests: count("max_requests", super::DEFAULT_MAX_REQUESTS)?,
            max_connections: count("max_connections", super::DEFAULT_MAX_CONNECTIONS)?,
            header_timeout: match table.get("header_timeout_ms") {
                Some(value) => self.millis(s, "header_timeout_ms", value)?,
                None => std::time::Duration::from_millis(super::DEFAULT_HEADER_TIMEOUT_MS),
            },
        })
    }

    /// A server's `tiers`: tool-name globs to tiers, in file order.
    fn tiers(
        &self,
        s: &str,
        value: Option<&Value>,
    ) -> Result<Vec<(globset::GlobMatcher, Tier)>, ConfigError> {
        let Some(value) = value else {
            return Ok(Vec::new());
        };
        self.table(value, s, "tiers")?
            .iter()
            .map(|(pattern, tier)| {
                let key = format!("tiers.{pattern}");
                let glob = Glob::new(pattern)
                    .map_err(|e| self.key_error(s, &key, format!("bad glob: {}", e.kind())))?;
                let tier = self
                    .string(s, &key, tier)?
                    .parse::<Tier>()
                    .map_err(|e| self.key_error(s, &key, e))?;
                Ok((glob.compile_matcher(), tier))
            })
            .collect()
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

pub(super) fn unknown(key: &str, known: &[&str]) -> String {
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
