//! `planmux import`: a host's servers as servers.toml. Every server is imported or
//! reported with the reason; nothing is dropped silently.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::HostFile;
use super::remote::{Remote, has_authorization, texts};
use super::remote_server;
use super::variables::translate;

/// What `import` made of a host's servers.
#[derive(Debug, Default)]
pub struct Imported {
    /// The servers.toml text.
    pub toml: String,
    /// Each server imported: its name in the host's file, and in servers.toml.
    pub servers: Vec<(String, String)>,
    /// What was renamed, changed or left out, and why: one line each.
    pub notes: Vec<String>,
    /// Values of `env` and `headers` copied into the file (they often hold secrets).
    pub secrets: usize,
}

/// Keys of a server entry that planmux maps.
const KNOWN: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "serverUrl",
    "headers",
    "type",
    "disabled",
    "disabledTools",
];

/// A name planmux accepts for `name`: characters outside `A-Z a-z 0-9 _ -` become `_`,
/// and runs of `_` one (`__` separates server and tool in exported names).
pub fn sanitize(name: &str) -> String {
    let mut out = String::new();
    for c in name.trim().chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' {
            c
        } else {
            '_'
        };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    let out = out.trim_matches('_').to_owned();
    if out.is_empty() { "server".into() } else { out }
}

/// Turns the servers under `key` in `file` into servers.toml; `source` names where they
/// came from, for the file's first line; `env` is the environment import runs in (a
/// `${VAR:-default}` keeps `VAR` when it is set there, else takes the default).
pub fn import(
    file: &HostFile,
    key: &str,
    source: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Imported {
    let mut imported = Imported::default();
    let mut body = String::new();
    let mut taken: Vec<String> = Vec::new();
    let servers = file.servers(key);
    if servers.is_empty() {
        imported
            .notes
            .push(format!("no servers under \"{key}\" in {source}"));
    }
    for (name, entry) in servers {
        // planmux's own entry (an earlier `install`): importing it would make planmux
        // start itself.
        let launches_planmux = entry
            .get("args")
            .and_then(Value::as_array)
            .is_some_and(|args| args.first().and_then(Value::as_str) == Some("serve"))
            && entry
                .get("command")
                .and_then(Value::as_str)
                .is_some_and(|c| c.ends_with("planmux"));
        if name == "planmux" || launches_planmux {
            imported.notes.push(format!(
                "\"{name}\" is planmux itself (from `planmux install`) and was not imported"
            ));
            continue;
        }
        let mut planmux = sanitize(name);
        let base = planmux.clone();
        let mut n = 2;
        while taken.contains(&planmux) {
            planmux = format!("{base}-{n}");
            n += 1;
        }
        if planmux != *name {
            imported.notes.push(format!(
                "\"{name}\" is named {planmux} (names use A-Z a-z 0-9 _ -, no \"__\")"
            ));
        }
        match section(&planmux, name, entry, env, &mut imported) {
            Ok(text) => {
                taken.push(planmux.clone());
                body.push_str(&text);
                imported.servers.push((name.clone(), planmux));
            }
            Err(why) => imported
                .notes
                .push(format!("\"{name}\" was not imported: {why}")),
        }
    }
    if let Some(projects) = file.value.get("projects").and_then(Value::as_object) {
        for (path, project) in projects {
            let count = project
                .get("mcpServers")
                .and_then(Value::as_object)
                .map_or(0, Map::len);
            if count > 0 {
                imported.notes.push(format!(
                    "{count} server(s) of the project {path} (its local scope) were not imported; import them with --from and a file holding them"
                ));
            }
        }
    }
    let mut toml = format!(
        "# servers.toml for planmux, imported from {source} by `planmux import`.\n\
         # Reference: the README's \"servers.toml reference\". Check it with `planmux check`.\n\n\
         [proxy]\n\
         startup_timeout_ms = 120000   # npx and uvx may download a package on first use\n"
    );
    if imported.secrets > 0 {
        toml.insert_str(
            0,
            "# This file holds the env and headers values of the imported servers, secrets\n\
             # among them: keep it private (planmux wrote it readable only by you).\n",
        );
    }
    toml.push_str(&body);
    imported.toml = toml;
    imported
}

/// One server's `[servers.NAME]` section, or why it cannot be one.
fn section(
    planmux: &str,
    name: &str,
    entry: &Value,
    env: &dyn Fn(&str) -> Option<String>,
    imported: &mut Imported,
) -> Result<String, String> {
    let Value::Object(entry) = entry else {
        return Err("its entry is not an object".into());
    };
    let mut notes = Vec::new();
    let mut out = format!("\n[servers.{planmux}]\n");
    let text = |key: &str| entry.get(key).and_then(Value::as_str);
    let remote = remote_server(entry)?;
    let stray: &[&str] = match (&remote, text("command")) {
        // mcp-remote: its args and env are read, the rest is for a process no more.
        (Some(_), Some(_)) => &["url", "serverUrl", "headers", "cwd"],
        (_, Some(_)) => &["url", "serverUrl", "headers"],
        (Some(_), None) => &["args", "env", "cwd"],
        (None, None) => &[],
    };
    for key in stray.iter().filter(|k| entry.contains_key(**k)) {
        notes.push(format!(
            "its \"{key}\" does not apply to this kind of server and was left out"
        ));
    }
    let mut exclude = Vec::new();
    let (mut off, mut sign_in) = (false, false);
    match (text("command"), remote) {
        (_, Some(remote)) => {
            exclude.clone_from(&remote.exclude);
            off = remote.sse;
            sign_in = remote_section(&mut out, &remote, env, &mut notes, imported);
        }
        (Some(command), None) => {
            line(
                &mut out,
                "command",
                &quoted(&translate(command, env, &mut notes)),
            );
            if let Some(args) = entry.get("args") {
                let Some(args) = args.as_array().filter(|a| a.iter().all(Value::is_string)) else {
                    return Err("its args are not a list of strings".into());
                };
                let args: Vec<String> = args
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|a| quoted(&translate(a, env, &mut notes)))
                    .collect();
                line(&mut out, "args", &format!("[{}]", args.join(", ")));
            }
            if let Some(map) = entry.get("env") {
                let Some(map) = map.as_object() else {
                    return Err("its env is not an object".into());
                };
                let pairs = texts(map, "env")?;
                line(&mut out, "env", &table(&pairs, env, &mut notes, imported));
            }
            if let Some(cwd) = text("cwd") {
                line(&mut out, "cwd", &quoted(&translate(cwd, env, &mut notes)));
            }
        }
        (None, None) => return Err("it has neither \"command\" nor \"url\"".into()),
    }
    match entry.get("disabled") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => off = true,
        Some(other) => notes.push(format!(
            "its \"disabled\" is {other}, not true or false, and was left out"
        )),
    }
    if off {
        line(&mut out, "enabled", "false");
    }
    if entry
        .get("disabledTools")
        .and_then(Value::as_array)
        .is_some_and(|tools| !tools.iter().all(Value::is_string))
    {
        notes.push("some of its \"disabledTools\" are not names and were left out".into());
    }
    // Windsurf's per-server tool switch is planmux's `exclude`.
    exclude.extend(
        entry
            .get("disabledTools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned),
    );
    if !exclude.is_empty() {
        let globs: Vec<String> = exclude.iter().map(|glob| quoted(glob)).collect();
        line(&mut out, "exclude", &format!("[{}]", globs.join(", ")));
    }
    for key in entry.keys().filter(|k| !KNOWN.contains(&k.as_str())) {
        notes.push(format!(
            "its \"{key}\" has no planmux equivalent and was left out"
        ));
    }
    notes.sort();
    notes.dedup();
    for note in notes {
        imported.notes.push(format!("\"{name}\": {note}"));
    }
    if sign_in {
        imported.notes.push(format!(
            "`{planmux}` is a remote server without an Authorization header: if it asks for sign-in (OAuth), run `planmux login {planmux}`"
        ));
    }
    Ok(out)
}

/// A remote server's keys: its `url` and `headers`; without an `Authorization` header,
/// its OAuth settings (planmux signs in when the server asks). Says whether the user may
/// have to sign in (`planmux login`) once planmux runs it.
fn remote_section(
    out: &mut String,
    remote: &Remote,
    env: &dyn Fn(&str) -> Option<String>,
    notes: &mut Vec<String>,
    imported: &mut Imported,
) -> bool {
    notes.extend(remote.notes.iter().cloned());
    if remote.sse {
        out.push_str(
            "# SSE only: planmux speaks streamable HTTP, so this server is off here and `planmux install` leaves it with the host.\n",
        );
        let sibling = super::remote::streamable_sibling(&remote.url)
            .map(|url| format!(" (many serve it at …/mcp: try {url})"))
            .unwrap_or_default();
        notes.push(format!(
            "it is an SSE server, which planmux cannot run yet (it speaks streamable HTTP): it is written with `enabled = false` and `planmux install` leaves it in the host's file; if the server also serves streamable HTTP{sibling}, set that url and remove `enabled = false`"
        ));
    }
    line(out, "url", &quoted(&translate(&remote.url, env, notes)));
    if !remote.headers.is_empty() {
        line(
            out,
            "headers",
            &table(&remote.headers, env, notes, imported),
        );
    }
    let names = remote.headers.iter().map(|(name, _)| name.as_str());
    if has_authorization(names) {
        if !remote.oauth.is_empty() {
            notes.push(
                "its OAuth settings were left out: planmux does not sign in while headers set Authorization".into(),
            );
        }
        return false;
    }
    let oauth = &remote.oauth;
    let mut value = |text: &str| quoted(&translate(text, env, notes));
    match (&oauth.client_id, &oauth.client_secret) {
        (Some(id), Some(secret)) if oauth.client_credentials => {
            imported.secrets += 1;
            let (id, secret) = (value(id), value(secret));
            line(
                out,
                "oauth",
                &format!(
                    "{{ client_credentials = {{ client_id = {id}, client_secret = {secret} }} }}"
                ),
            );
        }
        (id, secret) => {
            if let Some(id) = id {
                line(out, "client_id", &value(id));
            }
            if let Some(secret) = secret {
                imported.secrets += 1;
                line(out, "client_secret", &value(secret));
            }
            if oauth.client_credentials {
                notes.push(
                    "it signed in as a client of its own (mcp-remote --client-credentials) without a client id and secret planmux could read: add `oauth = { client_credentials = { client_id = …, client_secret = … } }` by hand".into(),
                );
            }
        }
    }
    let mut value = |text: &str| quoted(&translate(text, env, notes));
    if !oauth.scopes.is_empty() {
        let scopes: Vec<String> = oauth.scopes.iter().map(|s| value(s)).collect();
        line(out, "scopes", &format!("[{}]", scopes.join(", ")));
    }
    if let Some(url) = &oauth.client_metadata_url {
        line(out, "client_metadata_url", &value(url));
    }
    !remote.sse && !oauth.client_credentials
}

fn line(out: &mut String, key: &str, value: &str) {
    let _ = writeln!(out, "{key} = {value}");
}

/// A TOML string literal.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// `env` or `headers` as an inline table of strings, each value translated and counted
/// as a secret.
fn table(
    pairs: &[(String, String)],
    env: &dyn Fn(&str) -> Option<String>,
    notes: &mut Vec<String>,
    imported: &mut Imported,
) -> String {
    let pairs: Vec<String> = pairs
        .iter()
        .map(|(name, value)| {
            imported.secrets += 1;
            let bare = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            let name = if bare { name.clone() } else { quoted(name) };
            format!("{name} = {}", quoted(&translate(value, env, notes)))
        })
        .collect();
    format!("{{ {} }}", pairs.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for (name, want) in [
            ("my files", "my_files"),
            ("my.files", "my_files"),
            ("a__b", "a_b"),
            ("  ", "server"),
            ("ok-name_1", "ok-name_1"),
        ] {
            assert_eq!(sanitize(name), want);
        }
    }
}
