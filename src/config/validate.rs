//! Checking what servers.toml's sections hold (`wire.rs`) and making the parts of the
//! validated [`Config`](super::Config) of them: `${VAR}` and a leading `~` expanded,
//! relative paths resolved, globs compiled, defaults filled in.
//!
//! Every problem is collected (`Cx`), each naming the file, the section and the key. A
//! section is checked in stages, each only when the one before passed: its name, its keys
//! (`read.rs`), its values; what a later stage would say of a section that does not hold
//! what was meant is noise. A value that fails a check leaves a stand-in behind, and the
//! config is discarded (`Cx::finish`), so a stand-in is never used.
//!
//! A `${VAR}` that is not set is no problem of the file's in a server's section: the
//! server is kept, noting the variable and the key (`ServerConfig::unset`), and fails
//! alone when it is started. Elsewhere (`[http] tokens`, `[proxy] audit_log`) it is.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use globset::{Glob, GlobMatcher, GlobSet, GlobSetBuilder};
use toml::Table;

use super::read::{Refused, Section, keys, read};
use super::values::{Choice, Count, Ordered, Text, Texts};
use super::wire::{self, ServersToml};
use super::{
    ConfigError, HttpConfig, PolicyConfig, ProxySettings, ServerConfig, Transport, UnsetVar,
    is_name_char,
};
use crate::policy::{Tier, TierRules};

/// The most `[http] max_requests` and `max_connections` may be.
const MAX_AT_ONCE: usize = 1_000_000;

/// Checking context: the file name for errors, the folder for paths, the environment, and
/// the problems found so far.
pub(super) struct Cx<'a> {
    pub(super) file: &'a str,
    pub(super) base: &'a Path,
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
    errors: RefCell<Vec<ConfigError>>,
    /// While a server's section is checked, the variables its keys name that are not set:
    /// the server is kept, unable to start, instead of the file refused (one server's
    /// missing token must not cost the host every other server). `None` elsewhere: there,
    /// an unset variable is a config error (an `[http]` token must fail closed).
    unset: RefCell<Option<Vec<UnsetVar>>>,
}

impl<'a> Cx<'a> {
    pub(super) fn new(
        file: &'a str,
        base: &'a Path,
        env: &'a dyn Fn(&str) -> Option<String>,
    ) -> Self {
        Cx {
            file,
            base,
            env,
            errors: RefCell::default(),
            unset: RefCell::default(),
        }
    }

    /// `value` when nothing was wrong; else the one problem, or all of them.
    pub(super) fn finish<T>(self, value: T) -> Result<T, ConfigError> {
        let mut errors = self.errors.into_inner();
        match errors.len() {
            0 => Ok(value),
            1 => Err(errors.remove(0)),
            _ => Err(ConfigError::Several(errors)),
        }
    }

    pub(super) fn key_error(&self, section: &str, key: &str, message: impl Into<String>) {
        self.errors.borrow_mut().push(ConfigError::Key {
            file: self.file.into(),
            section: section.into(),
            key: key.into(),
            message: message.into(),
        });
    }

    pub(super) fn section_error(&self, section: &str, message: impl Into<String>) {
        self.errors.borrow_mut().push(ConfigError::Section {
            file: self.file.into(),
            section: section.into(),
            message: message.into(),
        });
    }

    /// The file's sections, once what its top level refused is reported: an unknown
    /// section, or `servers` that is not a table.
    pub(super) fn top(&self, table: Table) -> ServersToml {
        let (wire, refused) = read::<ServersToml>(table);
        if !refused.is_empty() {
            let sections = keys::<ServersToml>();
            for Refused { key, message } in refused {
                match key {
                    Some(key) if sections.contains(&key) => {
                        self.key_error(&format!("[{key}]"), &key, message);
                    }
                    Some(key) => self.key_error("top level", &key, message),
                    None => self.section_error("top level", message),
                }
            }
        }
        wire.unwrap_or_default()
    }

    /// A section's values, or `None` once each key it refused is reported. A value that is
    /// no table at all is named as `key` of `parent`.
    pub(super) fn accept<T>(
        &self,
        section: Section<T>,
        s: &str,
        parent: &str,
        key: &str,
    ) -> Option<T> {
        let refused = match section.0 {
            Ok(value) => return Some(value),
            Err(refused) => refused,
        };
        for Refused { key: own, message } in refused {
            match own {
                Some(own) => self.key_error(s, &own, message),
                None => self.key_error(parent, key, message),
            }
        }
        None
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

    /// `[proxy]` over the defaults; `None` when it refused a key.
    pub(super) fn proxy(&self, section: Section<wire::Proxy>) -> Option<ProxySettings> {
        let s = "[proxy]";
        let w = self.accept(section, s, s, "proxy")?;
        let d = ProxySettings::default();
        let count = |value: Option<Count>, default: usize| value.map_or(default, |n| n.0);
        let millis = |value: Option<Count>, default: Duration| value.map_or(default, Count::millis);
        let separator = w.separator.map_or(d.separator, |sep| sep.0);
        if separator.is_empty() || !separator.chars().all(is_name_char) {
            let message = "must be non-empty and use only A-Z a-z 0-9 _ -";
            self.key_error(s, "separator", message);
        }
        let audit_log = w
            .audit_log
            .and_then(|path| self.expanded(s, "audit_log", &path.0));
        Some(ProxySettings {
            separator,
            call_timeout: millis(w.call_timeout_ms, d.call_timeout),
            plan_timeout: millis(w.plan_timeout_ms, d.plan_timeout),
            max_concurrency: count(w.max_concurrency, d.max_concurrency),
            max_plan_steps: count(w.max_plan_steps, d.max_plan_steps),
            max_foreach_items: count(w.max_foreach_items, d.max_foreach_items),
            max_output_chars: count(w.max_output_chars, d.max_output_chars),
            startup_timeout: millis(w.startup_timeout_ms, d.startup_timeout),
            list_grace: millis(w.list_grace_ms, d.list_grace),
            wire: crate::wire::Limits {
                max_message_bytes: count(w.max_message_bytes, d.wire.max_message_bytes),
                max_nesting: count(w.max_nesting, d.wire.max_nesting),
            },
            audit_log: audit_log.map(|path| self.base.join(self.home(path))),
            surface: w.surface.map_or(d.surface, |Choice(surface)| surface),
            always_list: self.globs(s, "always_list", w.always_list.as_ref()),
            tool_budget: w.tool_budget.map(|n| n.0),
            kept_runs: count(w.kept_runs, d.kept_runs),
            kept_run_bytes: count(w.kept_run_bytes, d.kept_run_bytes),
            env_inherit: self.glob_list(s, "env_inherit", w.env_inherit.as_ref()),
        })
    }

    /// One `[servers.NAME]`; `separator` is `None` when `[proxy]` refused a key, and then a
    /// name is not checked against it.
    pub(super) fn server(
        &self,
        name: &str,
        section: Section<wire::Server>,
        proxy: &ProxySettings,
        separator: Option<&str>,
    ) -> Option<ServerConfig> {
        let s = &format!("[servers.{name}]");
        if name.is_empty() || !name.chars().all(is_name_char) {
            self.section_error(s, "a server name may use only A-Z a-z 0-9 _ -");
            return None;
        }
        if let Some(separator) = separator.filter(|sep| name.contains(sep)) {
            let message = format!("a server name must not contain the separator '{separator}'");
            self.section_error(s, message);
            return None;
        }
        let w = self.accept(section, s, "[servers]", name)?;
        self.unset.replace(Some(Vec::new()));
        let transport = self.transport(s, &w, proxy);
        let include = self.globs(s, "include", w.include.as_ref());
        let exclude = self.globs(s, "exclude", w.exclude.as_ref());
        let unset = self.unset.replace(None).unwrap_or_default();
        Some(ServerConfig {
            name: name.into(),
            include,
            exclude,
            namespace: w.namespace.is_none_or(|flag| flag.0),
            enabled: w.enabled.is_none_or(|flag| flag.0),
            call_timeout: w.call_timeout_ms.map_or(proxy.call_timeout, Count::millis),
            startup_timeout: w
                .startup_timeout_ms
                .map_or(proxy.startup_timeout, Count::millis),
            max_concurrency: w.max_concurrency.map(|n| n.0),
            wire: proxy.wire,
            tiers: TierRules {
                rules: self.tiers(s, w.tiers.as_ref()),
                trust_annotations: w.trust_annotations.is_none_or(|flag| flag.0),
            },
            unset,
            transport: transport?,
        })
    }

    /// How a server is reached: exactly one of `command`, `url` and `builtin`, with only
    /// the keys that kind of server uses. A child inherits what `[proxy] env_inherit` and
    /// its own `env_inherit` match.
    fn transport(&self, s: &str, w: &wire::Server, proxy: &ProxySettings) -> Option<Transport> {
        let cwd = w.cwd.as_ref().map(|dir| {
            let dir = self.expanded(s, "cwd", &dir.0).unwrap_or_default();
            self.base.join(self.home(dir))
        });
        let transport = match (&w.command, &w.url, w.builtin) {
            (Some(command), None, None) => {
                let command = self.expanded(s, "command", &command.0);
                let args = self.strings(s, "args", w.args.as_ref());
                Transport::Stdio {
                    args: args.into_iter().map(|arg| self.home(arg)).collect(),
                    env: self.map(s, "env", w.env.as_ref()),
                    env_inherit: self.inherit(s, proxy, w.env_inherit.as_ref()),
                    cwd,
                    command: self.home(command?),
                }
            }
            (None, Some(url), None) => {
                let headers = self.map(s, "headers", w.headers.as_ref());
                let (url, complete) = self.expand(s, "url", &url.0)?;
                // An unset variable left a hole: the url is checked once it is whole.
                if complete {
                    self.check_url(s, &url, &headers);
                }
                let sign_in = self.sign_in(s, w, &headers);
                Transport::Http {
                    url,
                    headers,
                    sign_in,
                }
            }
            (None, None, Some(Choice(kind))) => Transport::Builtin { kind, root: cwd },
            (None, None, None) => {
                self.section_error(s, "needs one of 'command', 'url' or 'builtin'");
                return None;
            }
            _ => {
                let message = "'command', 'url' and 'builtin' exclude each other: set only one";
                self.section_error(s, message);
                return None;
            }
        };
        let set = [
            ("args", w.args.is_some()),
            ("env", w.env.is_some()),
            ("env_inherit", w.env_inherit.is_some()),
            ("cwd", w.cwd.is_some()),
            ("headers", w.headers.is_some()),
            ("scopes", w.scopes.is_some()),
            ("client_id", w.client_id.is_some()),
            ("client_secret", w.client_secret.is_some()),
            ("client_metadata_url", w.client_metadata_url.is_some()),
            ("oauth", w.oauth.is_some()),
        ];
        const SIGN_IN: [&str; 5] = [
            "scopes",
            "client_id",
            "client_secret",
            "client_metadata_url",
            "oauth",
        ];
        let wrong: Vec<&str> = match transport {
            Transport::Stdio { .. } => [&["headers"][..], &SIGN_IN].concat(),
            Transport::Http { .. } => vec!["args", "env", "env_inherit", "cwd"],
            Transport::Builtin { .. } => {
                [&["args", "env", "env_inherit", "headers"][..], &SIGN_IN].concat()
            }
        };
        for (key, _) in set.iter().filter(|(key, set)| *set && wrong.contains(key)) {
            self.key_error(s, key, "does not apply to this kind of server");
        }
        Some(transport)
    }

    /// An HTTP server's url: a web address, with no user info when a header already says
    /// who is calling.
    fn check_url(&self, s: &str, url: &str, headers: &BTreeMap<String, String>) {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            self.key_error(s, "url", "must start with http:// or https://");
            return;
        }
        // User info in the URL becomes Basic auth, which would replace the configured
        // header: the server would not get what the config says.
        let authority = url.split("://").nth(1).unwrap_or_default();
        let authority = authority.split(['/', '?', '#']).next().unwrap_or_default();
        let both = authority.contains('@')
            && headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("authorization"));
        if both {
            self.key_error(
                s,
                "headers",
                "sets Authorization while the url has user info (user:password@), which would replace it: keep one",
            );
        }
    }

    /// `[policy]`: what no path may call; `None` when it refused a key.
    pub(super) fn policy(&self, section: Section<wire::Policy>) -> Option<PolicyConfig> {
        let s = "[policy]";
        let w = self.accept(section, s, s, "policy")?;
        Some(PolicyConfig {
            deny: self.globs(s, "deny", w.deny.as_ref()),
            confirm: w.confirm.map(|Choice(confirm)| confirm).unwrap_or_default(),
        })
    }

    /// `[http]` over the defaults; `None` when it refused a key.
    pub(super) fn http(&self, section: Section<wire::Http>) -> Option<HttpConfig> {
        let s = "[http]";
        let w = self.accept(section, s, s, "http")?;
        let tokens = self.strings(s, "tokens", w.tokens.as_ref());
        if tokens.iter().any(|t| t.len() < 16) {
            let message = "each token needs at least 16 characters (a short one is guessed)";
            self.key_error(s, "tokens", message);
        }
        // Requests and connections at once: each is a semaphore's permits, which have a
        // ceiling far above any real need.
        let at_once = |key: &str, value: Option<Count>, default: usize| {
            let n = value.map_or(default, |n| n.0);
            if n > MAX_AT_ONCE {
                self.key_error(s, key, format!("must be at most {MAX_AT_ONCE}"));
            }
            n
        };
        Some(HttpConfig {
            tokens,
            origins: self.strings(s, "origins", w.origins.as_ref()),
            max_body_bytes: w
                .max_body_bytes
                .map_or(super::DEFAULT_MAX_BODY_BYTES, |n| n.0),
            max_requests: at_once("max_requests", w.max_requests, super::DEFAULT_MAX_REQUESTS),
            max_connections: at_once(
                "max_connections",
                w.max_connections,
                super::DEFAULT_MAX_CONNECTIONS,
            ),
            header_timeout: w.header_timeout_ms.map_or(
                Duration::from_millis(super::DEFAULT_HEADER_TIMEOUT_MS),
                Count::millis,
            ),
            rate_limit: w.rate_limit.as_ref().and_then(|rate| {
                super::RateLimit::parse(&rate.0)
                    .map_err(|why| self.key_error(s, "rate_limit", why))
                    .ok()
            }),
            auth: w.auth.as_ref().and_then(|auth| self.http_auth(auth)),
        })
    }

    /// `[http.auth]`, its URLs checked; `None` once a problem is reported.
    fn http_auth(&self, w: &wire::HttpAuth) -> Option<super::HttpAuth> {
        let s = "[http.auth]";
        let url = |key: &str, text: &Text| {
            let value = self.expanded(s, key, &text.0)?;
            match url::Url::parse(&value) {
                Ok(url) if url.scheme() == "https" => Some(value),
                Ok(url) if url.scheme() == "http" && is_loopback(&url) => Some(value),
                Ok(_) => {
                    let why = "must be an https URL (http only on a loopback address)";
                    self.key_error(s, key, why);
                    None
                }
                Err(e) => {
                    self.key_error(s, key, format!("is not a URL: {e}"));
                    None
                }
            }
        };
        let issuer = url("issuer", &w.issuer);
        let audience = url("audience", &w.audience);
        Some(super::HttpAuth {
            issuer: issuer?,
            audience: audience?,
            groups_claim: w
                .groups_claim
                .as_ref()
                .map_or_else(|| "groups".to_owned(), |claim| claim.0.clone()),
        })
    }

    /// A server's `tiers`: tool-name globs to tiers, in file order.
    fn tiers(&self, s: &str, tiers: Option<&Ordered<Choice<Tier>>>) -> Vec<(GlobMatcher, Tier)> {
        let tiers = tiers.map_or(&[][..], |tiers| &tiers.0);
        tiers
            .iter()
            .filter_map(|(pattern, Choice(tier))| match Glob::new(pattern) {
                Ok(glob) => Some((glob.compile_matcher(), *tier)),
                Err(e) => {
                    let key = format!("tiers.{pattern}");
                    self.key_error(s, &key, format!("bad glob: {}", e.kind()));
                    None
                }
            })
            .collect()
    }

    /// `raw` with `${VAR}` expanded, or `None` once the problem is reported.
    pub(super) fn expanded(&self, s: &str, key: &str, raw: &str) -> Option<String> {
        self.expand(s, key, raw).map(|(text, _)| text)
    }

    /// `raw` with `${VAR}` expanded and whether every variable was set, or `None` once the
    /// problem is reported. In a server's section an unset variable is noted with its key
    /// (`env.NAME` as `env`), outside one it is the problem.
    fn expand(&self, s: &str, key: &str, raw: &str) -> Option<(String, bool)> {
        let Expanded { text, unset } = expand_vars(raw, self.env)
            .map_err(|e| self.key_error(s, key, e))
            .ok()?;
        let complete = unset.is_empty();
        if let Some(noted) = self.unset.borrow_mut().as_mut() {
            let key = key.split('.').next().unwrap_or(key);
            noted.extend(unset.into_iter().map(|name| UnsetVar {
                name,
                key: key.to_owned(),
            }));
        } else if let Some(name) = unset.first() {
            let message =
                format!("environment variable '{name}' is not set (write $$ for a literal $)");
            self.key_error(s, key, message);
            return None;
        }
        Some((text, complete))
    }

    /// The strings that expand.
    pub(super) fn strings(&self, s: &str, key: &str, items: Option<&Texts>) -> Vec<String> {
        let items = items.map_or(&[][..], |items| &items.0);
        items
            .iter()
            .filter_map(|item| self.expanded(s, key, item))
            .collect()
    }

    /// The entries whose values expand; each is named `key.NAME`.
    fn map(&self, s: &str, key: &str, table: Option<&Ordered<Text>>) -> BTreeMap<String, String> {
        let entries = table.map_or(&[][..], |table| &table.0);
        entries
            .iter()
            .filter_map(|(name, value)| {
                let value = self.expanded(s, &format!("{key}.{name}"), &value.0)?;
                Some((name.clone(), value))
            })
            .collect()
    }

    /// The set of `patterns`; `None` when the key is absent.
    pub(super) fn globs(&self, s: &str, key: &str, patterns: Option<&Texts>) -> Option<GlobSet> {
        let patterns = patterns?;
        self.glob_set(s, key, self.glob_list(s, key, Some(patterns)))
    }

    /// The globs that compile; each other one is reported.
    fn glob_list(&self, s: &str, key: &str, patterns: Option<&Texts>) -> Vec<Glob> {
        (self.strings(s, key, patterns).into_iter())
            .filter_map(|pattern| {
                Glob::new(&pattern)
                    .map_err(|e| {
                        self.key_error(s, key, format!("bad glob '{pattern}': {}", e.kind()))
                    })
                    .ok()
            })
            .collect()
    }

    fn glob_set(&self, s: &str, key: &str, globs: Vec<Glob>) -> Option<GlobSet> {
        let mut builder = GlobSetBuilder::new();
        for glob in globs {
            builder.add(glob);
        }
        builder
            .build()
            .map_err(|e| self.key_error(s, key, e.to_string()))
            .ok()
    }

    /// What a stdio server's child inherits beyond the defaults: `[proxy] env_inherit`
    /// and its own `env_inherit`; `None` when neither names anything.
    fn inherit(&self, s: &str, proxy: &ProxySettings, own: Option<&Texts>) -> Option<GlobSet> {
        let globs: Vec<Glob> = (proxy.env_inherit.iter().cloned())
            .chain(self.glob_list(s, "env_inherit", own))
            .collect();
        if globs.is_empty() {
            return None;
        }
        self.glob_set(s, "env_inherit", globs)
    }
}

/// `raw` with `${VAR}` expanded: what [`expand_vars`] made of it.
#[derive(Debug, PartialEq, Eq)]
pub struct Expanded {
    /// The text, each unset variable replaced by nothing.
    pub text: String,
    /// The variables it names that are not set, in order, each once.
    pub unset: Vec<String>,
}

/// Replaces `${VAR}` with the variable's value; `$$` is a literal `$`. Any other `$` stays.
/// An unset variable is noted, not refused: what it means depends on the key that holds
/// it. A `${` unclosed or around a bad name is refused.
pub fn expand_vars(raw: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Expanded, String> {
    let mut out = String::with_capacity(raw.len());
    let mut unset: Vec<String> = Vec::new();
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
            match env(name) {
                Some(value) => out.push_str(&value),
                None if unset.iter().any(|n| n == name) => {}
                None => unset.push(name.to_owned()),
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(Expanded { text: out, unset })
}

/// Whether `url` names this machine (`localhost`, 127.0.0.0/8, ::1).
fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}
