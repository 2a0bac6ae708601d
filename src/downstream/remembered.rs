//! What a server listed when it last started, kept on disk: a fresh planmux lists every
//! server's tools at once, from here, while the servers start (DESIGN §17), and a call
//! waits only for its own server. The live list replaces the remembered one as soon as
//! the server is up (the host hears `list_changed` if they differ); a server whose first
//! start fails drops it, so a failed server's tools are absent as before.
//!
//! One file per server, named by a hash of what identifies it: the config file's path,
//! the server's name, and its command, arguments, folder and the *names* of its
//! variables (stdio), or its URL without userinfo and query and the names of its headers
//! (HTTP). Values of variables and headers never reach the key or the file. Files are
//! written whole and renamed into place, only when what the server listed changed;
//! each is bounded ([`MAX_FILE_BYTES`]) and so is their number ([`MAX_FILES`]). Built-in
//! servers start at once and are not remembered.
//!
//! The folder is `$PLANMUX_CACHE_DIR` (empty: remember nothing), else
//! `$XDG_CACHE_HOME/planmux/catalogs`, else `~/.cache/planmux/catalogs`.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::fields::ToolFields;
use crate::config::{ServerConfig, Transport};

/// The file format; a file of another is ignored (and replaced at the next start).
const FORMAT: u32 = 1;
/// Largest file read or written: a list bigger than this is simply not remembered.
pub const MAX_FILE_BYTES: usize = 4 << 20;
/// Most files kept in the folder; past it the least recently written go.
pub const MAX_FILES: usize = 256;
/// How the names of the files start: only those are ever removed from the folder, which
/// `$PLANMUX_CACHE_DIR` may make one that other programs use too.
const FILE_PREFIX: &str = "catalog-";

/// What a file holds.
#[derive(Serialize, Deserialize)]
struct Stored {
    format: u32,
    /// The server's name in the config, for a reader of the folder.
    server: String,
    /// Its tools as it listed them (after include/exclude), fields rmcp does not model
    /// included.
    tools: Vec<Value>,
    #[serde(default)]
    instructions: Option<String>,
}

/// One server's remembered list: where it lives, and what was last read or written there.
pub struct Remembered {
    path: PathBuf,
    /// The bytes in the file as this process last saw them, so an unchanged list is not
    /// written again.
    last: Mutex<Option<Vec<u8>>>,
}

/// What a remembered file gave back.
pub struct Recalled {
    pub tools: Vec<Tool>,
    pub instructions: Option<String>,
    /// Each tool's definition as stored, for its unmodelled fields.
    pub raw: Vec<Value>,
}

impl Remembered {
    /// Where `server` of the config read from `source` (its [`canonical`] path) is remembered; `None` for a
    /// built-in server, one that cannot start, or when there is no folder to remember in.
    pub fn place(source: &str, server: &ServerConfig) -> Option<Remembered> {
        // A server that cannot start (an unset variable) would only list what it lacks.
        if server.cannot_start().is_some() {
            return None;
        }
        let identity = identity(source, server)?;
        let folder = folder()?;
        Some(Self::at(
            folder.join(format!("{FILE_PREFIX}{}.json", key(&identity))),
        ))
    }

    /// A remembered list kept in the file `path`.
    pub fn at(path: PathBuf) -> Remembered {
        Remembered {
            path,
            last: Mutex::new(None),
        }
    }

    /// What the file holds, if it is there, whole and of this format.
    pub fn recall(&self) -> Option<Recalled> {
        let size = std::fs::metadata(&self.path).ok()?.len();
        if size > MAX_FILE_BYTES as u64 {
            return None;
        }
        let bytes = std::fs::read(&self.path).ok()?;
        let stored: Stored = serde_json::from_slice(&bytes).ok()?;
        if stored.format != FORMAT {
            return None;
        }
        let tools = stored
            .tools
            .iter()
            .filter_map(|t| serde_json::from_value::<Tool>(t.clone()).ok())
            .collect();
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(bytes);
        Some(Recalled {
            tools,
            instructions: stored.instructions,
            raw: stored.tools,
        })
    }

    /// Keeps what `server` just listed (its tools with their unmodelled `fields`, its
    /// instructions), unless the file already holds exactly that. A failure to write is
    /// logged, never fatal.
    pub async fn keep(
        &self,
        server: &str,
        tools: &[Tool],
        instructions: Option<&str>,
        fields: &ToolFields,
    ) {
        let tools = tools
            .iter()
            .filter_map(|tool| {
                let mut value = serde_json::to_value(tool).ok()?;
                if let (Some(object), Some(extra)) = (value.as_object_mut(), fields.of(&tool.name))
                {
                    for (key, field) in extra {
                        object.entry(key).or_insert(field);
                    }
                }
                Some(value)
            })
            .collect();
        let stored = Stored {
            format: FORMAT,
            server: server.to_owned(),
            tools,
            instructions: instructions.map(str::to_owned),
        };
        let Ok(bytes) = serde_json::to_vec(&stored) else {
            return;
        };
        if bytes.len() > MAX_FILE_BYTES {
            tracing::debug!(
                server,
                bytes = bytes.len(),
                "tool list too large to remember"
            );
            return;
        }
        if self
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_deref()
            == Some(&bytes)
        {
            return;
        }
        match write_whole(&self.path, &bytes).await {
            Ok(()) => {
                *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(bytes);
                if let Some(folder) = self.path.parent() {
                    prune(folder).await;
                }
            }
            Err(error) => {
                tracing::debug!(server, path = %self.path.display(), %error, "cannot remember the tool list");
            }
        }
    }
}

/// Writes `bytes` to a file beside `path`, readable by the user only, then renames it
/// into place: a reader sees the old file or the new one, never half of one.
async fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(folder) = path.parent() {
        tokio::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(folder)
            .await?;
    }
    let partial = path.with_extension(format!("{}.partial", std::process::id()));
    let written = async {
        let mut file = tokio::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&partial)
            .await?;
        tokio::io::AsyncWriteExt::write_all(&mut file, bytes).await?;
        file.sync_all().await?;
        tokio::fs::rename(&partial, path).await
    };
    let result = written.await;
    if result.is_err() {
        let _ = tokio::fs::remove_file(&partial).await;
    }
    result
}

/// Removes the least recently written files past [`MAX_FILES`].
async fn prune(folder: &Path) {
    let Ok(mut entries) = tokio::fs::read_dir(folder).await else {
        return;
    };
    let mut files = Vec::new();
    while let Ok(Some(entry)) = entries.next_entry().await {
        let path = entry.path();
        let ours = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(FILE_PREFIX) && n.ends_with(".json"));
        if ours && let Ok(meta) = entry.metadata().await {
            files.push((meta.modified().ok(), path));
        }
        if files.len() > MAX_FILES * 4 {
            return; // far more than planmux writes: leave the folder as it is
        }
    }
    if files.len() <= MAX_FILES {
        return;
    }
    files.sort();
    for (_, path) in files.iter().take(files.len() - MAX_FILES) {
        let _ = tokio::fs::remove_file(path).await;
    }
}

/// The folder remembered lists go in (see the module's documentation).
fn folder() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PLANMUX_CACHE_DIR") {
        return (!dir.is_empty()).then(|| PathBuf::from(dir));
    }
    let base = crate::dirs::base("XDG_CACHE_HOME", ".cache")?;
    Some(base.join("planmux").join("catalogs"))
}

/// The config file `source` names, as its canonical path (as written when it has none):
/// the same file, however it was named, keeps the same lists. Found once per config, not
/// per server.
pub fn canonical(source: &str) -> String {
    std::fs::canonicalize(source)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| source.to_owned())
}

/// What identifies a server's list (see the module's documentation), or `None` for a
/// built-in server. No secret value goes in.
fn identity(source: &str, server: &ServerConfig) -> Option<String> {
    let how = match &server.transport {
        Transport::Builtin { .. } => return None,
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
            ..
        } => serde_json::json!({
            "command": command,
            "args": args,
            "cwd": cwd,
            "env": env.keys().collect::<Vec<_>>(),
        }),
        Transport::Http { url, headers, .. } => serde_json::json!({
            "url": crate::text::redact_urls(url),
            "headers": headers.keys().collect::<Vec<_>>(),
        }),
    };
    Some(serde_json::json!([source, server.name, how]).to_string())
}

/// A file name for `identity`: the first 128 bits of its SHA-256, in hex.
fn key(identity: &str) -> String {
    Sha256::digest(identity.as_bytes())[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::JsonObject;
    use serde_json::json;

    use super::*;
    use crate::config::Config;

    fn server(text: &str) -> ServerConfig {
        let config = Config::parse(text, "test", Path::new("."), &|name| {
            (name == "TOKEN").then(|| "s3cret-value".to_owned())
        })
        .unwrap_or_else(|e| panic!("{e}"));
        config.servers[0].clone()
    }

    #[test]
    fn the_key_names_the_server_and_holds_no_secret() {
        let stdio =
            "[servers.a]\ncommand = \"node\"\nargs = [\"x.js\"]\nenv = { KEY = \"${TOKEN}\" }";
        let id = identity("servers.toml", &server(stdio)).unwrap_or_default();
        assert!(id.contains("node") && id.contains("KEY"), "{id}");
        assert!(!id.contains("s3cret"), "{id}");
        let http = "[servers.a]\nurl = \"https://example.com/mcp?key=s3cret\"\nheaders = { Authorization = \"Bearer ${TOKEN}\" }";
        let id = identity("servers.toml", &server(http)).unwrap_or_default();
        assert!(
            id.contains("example.com") && id.contains("Authorization"),
            "{id}"
        );
        assert!(!id.contains("s3cret"), "{id}");
        let userinfo = "[servers.a]\nurl = \"https://u:pass@example.com/mcp\"";
        let id = identity("servers.toml", &server(userinfo)).unwrap_or_default();
        assert!(!id.contains("pass"), "{id}");
        assert!(
            identity(
                "servers.toml",
                &server("[servers.a]\nbuiltin = \"metrics\"")
            )
            .is_none()
        );
        // Another config file, another server name: another key.
        let other = identity("elsewhere.toml", &server(stdio)).unwrap_or_default();
        assert_ne!(
            key(&other),
            key(&identity("servers.toml", &server(stdio)).unwrap_or_default())
        );
        assert_eq!(key("x").len(), 32);
    }

    #[tokio::test]
    async fn a_list_is_kept_whole_with_its_unmodelled_fields_and_read_back() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("deep/er/a.json");
        let memory = Remembered::at(path.clone());
        assert!(memory.recall().is_none());
        let schema = Arc::new(JsonObject::new());
        let tools = [Tool::new("read", "Reads", schema)];
        let fields = ToolFields::default();
        fields.keep(&[json!({"name": "read", "execution": {"taskSupport": "optional"}})]);
        memory.keep("files", &tools, Some("Be kind"), &fields).await;
        let recalled = Remembered::at(path.clone())
            .recall()
            .unwrap_or_else(|| panic!("kept"));
        assert_eq!(recalled.tools.len(), 1);
        assert_eq!(recalled.tools[0].name, "read");
        assert_eq!(recalled.instructions.as_deref(), Some("Be kind"));
        assert_eq!(
            recalled.raw[0]["execution"],
            json!({"taskSupport": "optional"})
        );
        // Only the user may read it; nothing half-written is left beside it.
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode.ok(), Some(0o600));
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap_or(dir.path()))
            .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert_eq!(left.len(), 1, "{left:?}");
        // A file of another format, or not JSON, is ignored.
        std::fs::write(&path, r#"{"format": 99, "server": "x", "tools": []}"#).ok();
        assert!(Remembered::at(path.clone()).recall().is_none());
        std::fs::write(&path, "garbage").ok();
        assert!(Remembered::at(path).recall().is_none());
    }

    #[tokio::test]
    async fn the_folder_keeps_at_most_its_bound() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for i in 0..MAX_FILES + 3 {
            std::fs::write(dir.path().join(format!("{FILE_PREFIX}{i:04}.json")), "{}").ok();
        }
        // Files not named as planmux names them are someone else's: left alone.
        for i in 0..5 {
            std::fs::write(dir.path().join(format!("{i}.json")), "{}").ok();
        }
        prune(dir.path()).await;
        let count = std::fs::read_dir(dir.path())
            .map(Iterator::count)
            .unwrap_or(0);
        assert_eq!(count, MAX_FILES + 5);
    }
}
