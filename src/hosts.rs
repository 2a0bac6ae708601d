//! The MCP hosts planmux moves in front of: where each keeps its servers, in what shape,
//! and reading those files (JSON, or JSONC for VS Code) with the byte span of their
//! servers. `import` turns a host's servers into servers.toml (a remote one, reached
//! directly or through the `mcp-remote` bridge, a `url` server); `install` puts planmux
//! in place of those it can run and `uninstall` puts them back.

use std::path::{Path, PathBuf};

use jsonc_parser::common::Ranged as _;
use serde_json::Value;

mod import;
mod install;
mod mcp_remote;
mod remote;
mod variables;

pub use import::{Imported, import, sanitize};
pub use install::{Installed, Kept, Readiness, Runs, Why, install, uninstall};

/// A host whose config file planmux knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    ClaudeDesktop,
    /// Claude Code's user scope: the top-level `mcpServers` of `~/.claude.json`.
    ClaudeCode,
    Cursor,
    VsCode,
    Windsurf,
}

impl Host {
    /// Every host with its name on the command line.
    pub const ALL: [(Host, &'static str); 5] = [
        (Host::ClaudeDesktop, "claude-desktop"),
        (Host::ClaudeCode, "claude-code"),
        (Host::Cursor, "cursor"),
        (Host::VsCode, "vscode"),
        (Host::Windsurf, "windsurf"),
    ];

    /// The host called `name` (as [`Host::ALL`] spells it).
    pub fn parse(name: &str) -> Option<Host> {
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(h, _)| *h)
    }

    /// The host's name on the command line.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(h, _)| *h == self)
            .map_or("host", |(_, n)| n)
    }

    /// The key of the servers object in the host's file.
    pub fn servers_key(self) -> &'static str {
        match self {
            Host::VsCode => "servers",
            _ => "mcpServers",
        }
    }

    /// Where the host keeps its servers for this user, on this system: `home` is the
    /// home folder, `config_home` `$XDG_CONFIG_HOME` when set.
    pub fn user_file(self, home: &Path, config_home: Option<&Path>) -> PathBuf {
        let mac = cfg!(target_os = "macos");
        let app_support = home.join("Library/Application Support");
        let xdg = config_home.map_or_else(|| home.join(".config"), Path::to_path_buf);
        match self {
            Host::ClaudeDesktop if mac => app_support.join("Claude/claude_desktop_config.json"),
            Host::ClaudeDesktop => xdg.join("Claude/claude_desktop_config.json"),
            Host::ClaudeCode => home.join(".claude.json"),
            Host::Cursor => home.join(".cursor/mcp.json"),
            Host::VsCode if mac => app_support.join("Code/User/mcp.json"),
            Host::VsCode => xdg.join("Code/User/mcp.json"),
            Host::Windsurf => home.join(".codeium/windsurf/mcp_config.json"),
        }
    }

    /// Where to find the host's logs, for the README's troubleshooting and `install`'s
    /// last words.
    pub fn logs(self) -> &'static str {
        match self {
            Host::ClaudeDesktop => {
                "~/Library/Logs/Claude/mcp-server-planmux.log (macOS); the app's Developer settings"
            }
            Host::ClaudeCode => "`claude --debug`, or /mcp inside a session",
            Host::Cursor => "Output panel → \"MCP Logs\"",
            Host::VsCode => "Command Palette → \"MCP: List Servers\" → planmux → Show Output",
            Host::Windsurf => "Cascade → MCP servers → planmux",
        }
    }
}

/// A host's config file, read: its text, what it holds, and where its servers are.
#[derive(Debug)]
pub struct HostFile {
    pub path: PathBuf,
    pub text: String,
    /// The whole file, comments and trailing commas dropped.
    pub value: Value,
    /// The byte span of the servers object's value, when the file has one.
    pub span: Option<std::ops::Range<usize>>,
    /// Where the root object's `{` is, and whether the root has no key at all.
    pub root: (usize, bool),
}

/// Why a host's file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{path}: cannot read: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("{path}: not valid JSON: {message}")]
    Syntax { path: String, message: String },
    #[error("{path}: {message}")]
    Shape { path: String, message: String },
    #[error("{path}: {message}")]
    Write { path: String, message: String },
}

impl HostFile {
    /// Reads `path`, whose servers sit under `key` at the top level.
    pub fn read(path: &Path, key: &str) -> Result<HostFile, HostError> {
        let text = std::fs::read_to_string(path).map_err(|error| HostError::Read {
            path: path.display().to_string(),
            error,
        })?;
        Self::parse(path, text, key)
    }

    /// Parses `text` (the contents of `path`).
    pub fn parse(path: &Path, text: String, key: &str) -> Result<HostFile, HostError> {
        let shown = || path.display().to_string();
        let options = jsonc_parser::ParseOptions::default();
        let syntax = |e: jsonc_parser::errors::ParseError| HostError::Syntax {
            path: shown(),
            message: e.to_string(),
        };
        let ast =
            jsonc_parser::parse_to_ast(&text, &Default::default(), &options).map_err(syntax)?;
        let value = jsonc_parser::parse_to_serde_value(&text, &options)
            .map_err(syntax)?
            .unwrap_or(Value::Object(Default::default()));
        let Some(jsonc_parser::ast::Value::Object(root)) = &ast.value else {
            return Err(HostError::Shape {
                path: shown(),
                message: "the file does not hold a JSON object".into(),
            });
        };
        if root
            .properties
            .iter()
            .filter(|p| p.name.as_str() == key)
            .count()
            > 1
        {
            return Err(HostError::Shape {
                path: shown(),
                message: format!(
                    "\"{key}\" appears more than once; hosts read only the last: merge them first"
                ),
            });
        }
        let span = match root.get(key) {
            None => None,
            Some(prop) if matches!(prop.value, jsonc_parser::ast::Value::Object(_)) => {
                Some(prop.value.start()..prop.value.end())
            }
            Some(_) => {
                return Err(HostError::Shape {
                    path: shown(),
                    message: format!("\"{key}\" is not an object of servers"),
                });
            }
        };
        let root_at = (root.start(), root.properties.is_empty());
        Ok(HostFile {
            path: path.to_path_buf(),
            text,
            value,
            span,
            root: root_at,
        })
    }

    /// The servers, by name, in file order.
    pub fn servers(&self, key: &str) -> Vec<(&String, &Value)> {
        self.value
            .get(key)
            .and_then(Value::as_object)
            .map(|m| m.iter().collect())
            .unwrap_or_default()
    }
}

/// The remote server a host's `entry` reaches, or `None` for a local one (or no server at
/// all): its `url`, or the URL of the `mcp-remote` bridge it runs.
fn remote_server(entry: &serde_json::Map<String, Value>) -> Result<Option<remote::Remote>, String> {
    if entry.get("command").and_then(Value::as_str).is_some() {
        return Ok(mcp_remote::parse(entry));
    }
    remote::from_url(entry)
}

#[cfg(test)]
mod tests;
