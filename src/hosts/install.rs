//! `planmux install` / `uninstall`: a host's servers handed to planmux, and given back.
//!
//! Install replaces, in the host's file, the servers that servers.toml runs and planmux
//! can run now with one `planmux` entry: this binary by its absolute path, an absolute
//! `--config`, and the installing shell's PATH so that `npx` and `uvx` resolve under a
//! GUI app's. A server planmux cannot run yet stays with the host, which can: one
//! servers.toml turns off (an SSE server, as import writes it), one the command's
//! [`Readiness`] finds waiting for a sign-in or out of planmux's reach. Only the servers
//! object changes: every other byte of the file, comments included, stays. The original
//! is kept beside it (`FILE.planmux-backup`) and the write is atomic, refused if the file
//! changed since it was read. Uninstall puts the backup back, byte for byte, unless the
//! file changed since install (then it says so, and `--force` restores anyway).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::remote_server;
use super::{Host, HostError, HostFile, sanitize};
use crate::config::{ServerConfig, Transport};

/// The name of planmux's entry in a host's servers.
pub const ENTRY: &str = "planmux";

/// Whether planmux can run an HTTP server now: install asks before it takes one from
/// the host, which may be running it already.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// It moves to planmux.
    Ready,
    /// It asks for OAuth sign-in and the user has not signed in: it stays until
    /// `planmux login`.
    NeedsSignIn,
    /// planmux cannot run it yet, for this reason (a sentence to show).
    Unsupported(String),
}

/// What servers.toml runs, and how install learns whether planmux can run each HTTP
/// server now (the command decides: it may ask the server, or the token store).
pub struct Runs<'a> {
    pub servers: &'a [ServerConfig],
    /// Asked for each enabled HTTP server the host's file has, never for another kind.
    pub readiness: &'a dyn Fn(&ServerConfig) -> Readiness,
}

/// A host's server left in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// Its name in the host's file.
    pub name: String,
    /// Its name in servers.toml (or the one it would have).
    pub planmux: String,
    pub why: Why,
}

/// Why a host's server stays in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// servers.toml has no such server: the host keeps running it.
    NotInConfig,
    /// servers.toml turns it off (`enabled = false`) while the host runs it: moving it
    /// would stop it.
    Off,
    /// An SSE server, off in servers.toml: planmux speaks only streamable HTTP.
    Sse,
    /// It asks for OAuth sign-in, not done yet ([`Readiness::NeedsSignIn`]).
    NeedsSignIn,
    /// planmux cannot run it yet ([`Readiness::Unsupported`]).
    Unsupported(String),
}

/// What install or uninstall did (or, with `dry_run`, would do).
#[derive(Debug)]
pub struct Installed {
    /// The change as a unified diff.
    pub diff: String,
    /// The original file's copy.
    pub backup: PathBuf,
    /// Host servers now run by planmux (taken out of the host's file).
    pub moved: Vec<String>,
    /// Host servers left in the host's file, each with the reason, in file order.
    pub kept: Vec<Kept>,
    /// Whether the file was written.
    pub written: bool,
}

fn backup_of(file: &Path) -> PathBuf {
    suffixed(file, ".planmux-backup")
}

/// Where install notes the digest of what it wrote, for uninstall to compare.
fn stamp_of(file: &Path) -> PathBuf {
    suffixed(file, ".planmux-installed")
}

fn suffixed(file: &Path, suffix: &str) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Installs planmux into `host`'s `file`: the servers of `runs` that planmux can run
/// now (matched by their servers.toml name) give way to one entry launching `exe` with
/// `config`.
pub fn install(
    host: Host,
    file: &Path,
    exe: &Path,
    config: &Path,
    runs: &Runs,
    path_env: Option<&str>,
    dry_run: bool,
) -> Result<Installed, HostError> {
    let key = host.servers_key();
    // A symlinked config (dotfiles) is edited where it lives, and stays a link.
    let file = &std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    let read = HostFile::read(file, key)?;
    let backup = backup_of(file);
    if backup.exists() && !installed_unchanged(file, &read.text) {
        return Err(HostError::Shape {
            path: file.display().to_string(),
            message: format!(
                "it changed since an earlier `planmux install` (its original is {}): run `planmux uninstall` first",
                backup.display()
            ),
        });
    }
    let mut servers = Map::new();
    let (mut moved, mut kept) = (Vec::new(), Vec::new());
    for (name, entry) in read.servers(key) {
        if name == ENTRY {
            continue;
        }
        let planmux = sanitize(name);
        let why = match runs.servers.iter().find(|s| s.name == planmux) {
            None => Some(Why::NotInConfig),
            Some(server) => stays(server, entry, runs),
        };
        match why {
            None => moved.push(name.clone()),
            Some(why) => {
                kept.push(Kept {
                    name: name.clone(),
                    planmux,
                    why,
                });
                servers.insert(name.clone(), entry.clone());
            }
        }
    }
    let mut entry = json!({
        "command": exe.display().to_string(),
        "args": ["serve", "--config", config.display().to_string()],
    });
    if matches!(host, Host::VsCode | Host::ClaudeCode) {
        entry["type"] = json!("stdio");
    }
    if let Some(path) = path_env {
        entry["env"] = json!({"PATH": path});
    }
    servers.insert(ENTRY.to_owned(), entry);
    let new = replaced(&read, key, &Value::Object(servers));
    let diff = unified(file, &read.text, &new);
    if !dry_run {
        // A backup from an earlier install is the original: keep it.
        if !backup.exists() {
            write_file(&backup, &read.text, file, None)?;
        }
        write_atomically(file, &read.text, &new)?;
        write_file(&stamp_of(file), &digest(&new), file, None)?;
    }
    Ok(Installed {
        diff,
        backup,
        moved,
        kept,
        written: !dry_run,
    })
}

/// Why the host keeps `entry`, which servers.toml has as `server`; `None`: it moves.
fn stays(server: &ServerConfig, entry: &Value, runs: &Runs) -> Option<Why> {
    if !server.enabled {
        // Off in both: moving it loses nothing.
        if entry.get("disabled") == Some(&Value::Bool(true)) {
            return None;
        }
        let sse = (entry.as_object())
            .and_then(|entry| remote_server(entry).ok().flatten())
            .is_some_and(|remote| remote.sse);
        return Some(if sse { Why::Sse } else { Why::Off });
    }
    if !matches!(server.transport, Transport::Http { .. }) {
        return None;
    }
    match (runs.readiness)(server) {
        Readiness::Ready => None,
        Readiness::NeedsSignIn => Some(Why::NeedsSignIn),
        Readiness::Unsupported(reason) => Some(Why::Unsupported(reason)),
    }
}

/// Puts back the file `install` backed up. Refused when the file changed since install,
/// unless `force`.
pub fn uninstall(file: &Path, force: bool, dry_run: bool) -> Result<Installed, HostError> {
    let file = &std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    let backup = backup_of(file);
    let shown = |p: &Path| p.display().to_string();
    let original = std::fs::read_to_string(&backup).map_err(|_| HostError::Shape {
        path: shown(file),
        message: format!(
            "no backup at {}: `planmux install` did not change this file",
            shown(&backup)
        ),
    })?;
    let current = std::fs::read_to_string(file).map_err(|error| HostError::Read {
        path: shown(file),
        error,
    })?;
    if !installed_unchanged(file, &current) && !force {
        return Err(HostError::Shape {
            path: shown(file),
            message: format!(
                "it changed since `planmux install` wrote it (the host or you edited it), and putting the backup back would undo that: \
                 compare it with {} and restore by hand, or run uninstall with --force",
                shown(&backup)
            ),
        });
    }
    let diff = unified(file, &current, &original);
    if !dry_run {
        write_atomically(file, &current, &original)?;
        let _ = std::fs::remove_file(stamp_of(file));
        let _ = std::fs::remove_file(&backup);
    }
    Ok(Installed {
        diff,
        backup,
        moved: Vec::new(),
        kept: Vec::new(),
        written: !dry_run,
    })
}

/// Whether `text` is what the last install wrote to `file`.
fn installed_unchanged(file: &Path, text: &str) -> bool {
    std::fs::read_to_string(stamp_of(file)).is_ok_and(|stamp| stamp.trim() == digest(text))
}

/// Writes a file beside `like` through a temporary file, synced, and a rename, with
/// `like`'s permissions (a host file may hold secrets, and so may its copies). With
/// `unchanged`, the rename happens only while the file still holds that text.
fn write_file(
    path: &Path,
    text: &str,
    like: &Path,
    unchanged: Option<&str>,
) -> Result<(), HostError> {
    use std::io::Write as _;
    let temp = suffixed(path, ".planmux-tmp");
    let mut out = std::fs::File::create(&temp).map_err(|e| write_error(&temp, &e))?;
    if let Ok(meta) = std::fs::metadata(like) {
        let _ = std::fs::set_permissions(&temp, meta.permissions());
    }
    out.write_all(text.as_bytes())
        .and_then(|()| out.sync_all())
        .map_err(|e| write_error(&temp, &e))?;
    if let Some(read) = unchanged {
        let now = std::fs::read_to_string(path).map_err(|error| HostError::Read {
            path: path.display().to_string(),
            error,
        })?;
        if now != read {
            let _ = std::fs::remove_file(&temp);
            return Err(HostError::Write {
                path: path.display().to_string(),
                message: "it changed while planmux was editing it; nothing was written, run the command again".into(),
            });
        }
    }
    std::fs::rename(&temp, path).map_err(|e| write_error(path, &e))
}

/// The file's text with its servers object replaced by `servers` (or added, when it
/// had none), indented the way the file is.
fn replaced(read: &HostFile, key: &str, servers: &Value) -> String {
    let text = &read.text;
    // The file's own line ending.
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let unit = indent_unit(text);
    match &read.span {
        Some(span) => {
            let line_start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
            let prefix: String = text[line_start..span.start]
                .chars()
                .take_while(|c| c.is_whitespace())
                .collect();
            let rendered = render(servers, &unit, &prefix, newline);
            format!("{}{rendered}{}", &text[..span.start], &text[span.end..])
        }
        None => {
            // A new first key of the root object.
            let (open, empty) = read.root;
            let rendered = render(servers, &unit, &unit, newline);
            let comma = if empty { "" } else { "," };
            let tail = if empty { newline } else { "" };
            format!(
                "{}{newline}{unit}{}: {rendered}{comma}{tail}{}",
                &text[..=open],
                serde_json::to_string(key).unwrap_or_default(),
                &text[open + 1..]
            )
        }
    }
}

/// The file's indentation: a tab, or the spaces of its first indented line (2 if none).
fn indent_unit(text: &str) -> String {
    text.lines()
        .find_map(|line| {
            let lead: String = line
                .chars()
                .take_while(|c| *c == ' ' || *c == '\t')
                .collect();
            (!lead.is_empty() && line.len() > lead.len()).then_some(lead)
        })
        .map_or_else(
            || "  ".into(),
            |lead| {
                if lead.starts_with('\t') {
                    "\t".into()
                } else {
                    lead
                }
            },
        )
}

/// `value` as pretty JSON with `unit` per level and the file's `newline`, every line
/// after the first led by `prefix` (the indentation of the line it starts on).
fn render(value: &Value, unit: &str, prefix: &str, newline: &str) -> String {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    let _ = serde::Serialize::serialize(value, &mut serializer);
    let text = String::from_utf8(out).unwrap_or_default();
    text.replace('\n', &format!("{newline}{prefix}"))
}

fn unified(file: &Path, old: &str, new: &str) -> String {
    let name = file.display().to_string();
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&name, &name)
        .to_string()
}

fn write_error(path: &Path, error: &std::io::Error) -> HostError {
    HostError::Write {
        path: path.display().to_string(),
        message: error.to_string(),
    }
}

/// Writes `new` over `file` through a temporary file and a rename, so the host never
/// reads half a file; refused when the file no longer holds `read` (someone changed it
/// since). The file keeps its permissions.
fn write_atomically(file: &Path, read: &str, new: &str) -> Result<(), HostError> {
    write_file(file, new, file, Some(read))
}
