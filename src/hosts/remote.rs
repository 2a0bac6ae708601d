//! A host's remote server, whichever way its entry reaches it: a `url` (Windsurf:
//! `serverUrl`) with `headers`, or a stdio `mcp-remote` bridge (`mcp_remote.rs`).
//! Import writes it as a `url` server; install asks whether it is SSE, which planmux
//! does not speak.

use serde_json::{Map, Value};

/// A remote server as a host's entry describes it, its values as written there (import
/// translates the host's `${…}` when it writes them).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Remote {
    pub url: String,
    /// In the entry's order.
    pub headers: Vec<(String, String)>,
    /// Served only over SSE (HTTP+SSE, MCP's transport before streamable HTTP).
    pub sse: bool,
    /// How to sign in, when the entry says (mcp-remote's flags).
    pub oauth: OAuth,
    /// Tool names the entry hides (mcp-remote's `--ignore-tool`).
    pub exclude: Vec<String>,
    /// What did not map, one line each.
    pub notes: Vec<String>,
}

/// OAuth settings of a remote entry, as servers.toml's keys (DESIGN §13).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct OAuth {
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub scopes: Vec<String>,
    pub client_metadata_url: Option<String>,
    /// Machine to machine: `oauth = { client_credentials = … }`.
    pub client_credentials: bool,
}

impl OAuth {
    pub fn is_empty(&self) -> bool {
        *self == OAuth::default()
    }
}

/// What a host's `"type"` says of a remote entry's transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Declared {
    Sse,
    StreamableHttp,
    /// Nothing: the URL decides ([`is_sse`]).
    Unsaid,
}

/// The remote server an entry with a `url` (or `serverUrl`) reaches; `None` without one.
pub(super) fn from_url(entry: &Map<String, Value>) -> Result<Option<Remote>, String> {
    let text = |key: &str| entry.get(key).and_then(Value::as_str);
    let Some(url) = text("url").or_else(|| text("serverUrl")) else {
        return Ok(None);
    };
    let mut notes = Vec::new();
    let declared = match text("type") {
        None => Declared::Unsaid,
        Some("sse") => Declared::Sse,
        Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => {
            Declared::StreamableHttp
        }
        Some(other) => {
            notes.push(format!(
                "its \"type\" {other:?} is not a remote transport planmux knows: it is imported as streamable HTTP"
            ));
            Declared::StreamableHttp
        }
    };
    let headers = match entry.get("headers") {
        None => Vec::new(),
        Some(Value::Object(map)) => texts(map, "headers")?,
        Some(_) => return Err("its headers is not an object".into()),
    };
    Ok(Some(Remote {
        url: url.to_owned(),
        headers,
        sse: is_sse(declared, url),
        notes,
        ..Remote::default()
    }))
}

/// Whether a remote server is SSE-only: its host says so, or says nothing and its URL's
/// path ends in `/sse`, the address SSE endpoints have by convention (Linear, Notion,
/// Sentry and Atlassian serve SSE at `…/sse` and streamable HTTP at `…/mcp`). A host
/// that declares streamable HTTP is taken at its word, whatever the path.
pub(super) fn is_sse(declared: Declared, url: &str) -> bool {
    match declared {
        Declared::Sse => true,
        Declared::StreamableHttp => false,
        Declared::Unsaid => {
            let path = url.split(['?', '#']).next().unwrap_or_default();
            path.trim_end_matches('/').ends_with("/sse")
        }
    }
}

/// The streamable HTTP address an SSE server is likely to have beside its `…/sse` one.
pub(super) fn streamable_sibling(url: &str) -> Option<String> {
    let path = url.split(['?', '#']).next().unwrap_or_default();
    let base = path.trim_end_matches('/').strip_suffix("/sse")?;
    Some(format!("{base}/mcp"))
}

/// Whether `headers` set `Authorization` (then planmux never signs in with OAuth).
pub(super) fn has_authorization<'a>(mut names: impl Iterator<Item = &'a str>) -> bool {
    names.any(|name| name.eq_ignore_ascii_case("authorization"))
}

/// An object of strings (numbers and booleans are what the host would pass as text).
pub(super) fn texts(map: &Map<String, Value>, key: &str) -> Result<Vec<(String, String)>, String> {
    map.iter()
        .map(|(name, value)| match value {
            Value::String(text) => Ok((name.clone(), text.clone())),
            Value::Number(_) | Value::Bool(_) => Ok((name.clone(), value.to_string())),
            _ => Err(format!("its {key} value {name} is not a string")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_by_type_or_path() {
        for (declared, url, sse) in [
            (Declared::Sse, "https://mcp.sentry.dev/mcp", true),
            (Declared::Unsaid, "https://mcp.sentry.dev/sse", true),
            (Declared::Unsaid, "https://mcp.atlassian.com/v1/sse/", true),
            (Declared::Unsaid, "https://x.dev/sse?team=1", true),
            (Declared::Unsaid, "https://mcp.linear.app/mcp", false),
            (Declared::Unsaid, "https://x.dev/sse-tools", false),
            (Declared::StreamableHttp, "https://x.dev/sse", false),
        ] {
            assert_eq!(is_sse(declared, url), sse, "{url}");
        }
        assert_eq!(
            streamable_sibling("https://mcp.sentry.dev/sse").as_deref(),
            Some("https://mcp.sentry.dev/mcp")
        );
        assert_eq!(streamable_sibling("https://x.dev/events"), None);
    }
}
