//! `planmux import`: a host's servers as servers.toml. Every server is imported or
//! reported with the reason; nothing is dropped silently.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::HostFile;

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
    let url = text("url").or_else(|| text("serverUrl"));
    let stray: &[&str] = match (text("command"), url) {
        (Some(_), _) => &["url", "serverUrl", "headers"],
        (None, Some(_)) => &["args", "env", "cwd"],
        (None, None) => &[],
    };
    for key in stray.iter().filter(|k| entry.contains_key(**k)) {
        notes.push(format!(
            "its \"{key}\" does not apply to this kind of server and was left out"
        ));
    }
    match (text("command"), url) {
        (Some(command), _) => {
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
            if let Some(table) = strings(entry, "env", env, &mut notes, imported)? {
                line(&mut out, "env", &table);
            }
            if let Some(cwd) = text("cwd") {
                line(&mut out, "cwd", &quoted(&translate(cwd, env, &mut notes)));
            }
        }
        (None, Some(url)) => {
            if text("type") == Some("sse") {
                notes.push(
                    "it is an SSE server: planmux speaks streamable HTTP to it, which SSE-only servers do not serve"
                        .to_owned(),
                );
            }
            line(&mut out, "url", &quoted(&translate(url, env, &mut notes)));
            if let Some(headers) = strings(entry, "headers", env, &mut notes, imported)? {
                line(&mut out, "headers", &headers);
            }
        }
        (None, None) => return Err("it has neither \"command\" nor \"url\"".into()),
    }
    match entry.get("disabled") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => line(&mut out, "enabled", "false"),
        Some(other) => notes.push(format!(
            "its \"disabled\" is {other}, not true or false, and was left out"
        )),
    }
    if entry
        .get("disabledTools")
        .and_then(Value::as_array)
        .is_some_and(|tools| !tools.iter().all(Value::is_string))
    {
        notes.push("some of its \"disabledTools\" are not names and were left out".into());
    }
    // Windsurf's per-server tool switch is planmux's `exclude`.
    let off: Vec<String> = entry
        .get("disabledTools")
        .and_then(Value::as_array)
        .map(|tools| tools.iter().filter_map(Value::as_str).map(quoted).collect())
        .unwrap_or_default();
    if !off.is_empty() {
        line(&mut out, "exclude", &format!("[{}]", off.join(", ")));
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
    Ok(out)
}

fn line(out: &mut String, key: &str, value: &str) {
    let _ = writeln!(out, "{key} = {value}");
}

/// A TOML string literal.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// `env` or `headers` as an inline table of strings, each value translated.
fn strings(
    entry: &Map<String, Value>,
    key: &str,
    env: &dyn Fn(&str) -> Option<String>,
    notes: &mut Vec<String>,
    imported: &mut Imported,
) -> Result<Option<String>, String> {
    let Some(map) = entry.get(key) else {
        return Ok(None);
    };
    let Some(map) = map.as_object() else {
        return Err(format!("its {key} is not an object"));
    };
    let mut pairs = Vec::new();
    for (name, value) in map {
        // Numbers and booleans are what the host would pass as text.
        let value = match value {
            Value::String(text) => text.clone(),
            Value::Number(_) | Value::Bool(_) => value.to_string(),
            _ => return Err(format!("its {key} value {name} is not a string")),
        };
        let value = value.as_str();
        imported.secrets += 1;
        let bare = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let name = if bare { name.clone() } else { quoted(name) };
        pairs.push(format!(
            "{name} = {}",
            quoted(&translate(value, env, notes))
        ));
    }
    Ok(Some(format!("{{ {} }}", pairs.join(", "))))
}

/// Variables VS Code and Cursor fill in themselves (`${workspaceFolder}`): no planmux
/// equivalent.
const EDITOR_VARIABLES: &[&str] = &[
    "workspaceFolder",
    "workspaceFolderBasename",
    "workspaceRoot",
    "file",
    "fileDirname",
    "fileBasename",
    "relativeFile",
    "cwd",
    "execPath",
    "pathSeparator",
    "/",
];

/// A host's variable syntax in planmux's: `${env:X}` and `${X}` are `${X}` (planmux's
/// environment), `${userHome}` is `${HOME}`, `${X:-default}` is `${X}` when X is set in
/// `env` and the default otherwise, and a VS Code `${input:id}` becomes the variable
/// `ID`. Anything else is kept as text (`$${…}`), with a note; so is every other `$`.
fn translate(text: &str, env: &dyn Fn(&str) -> Option<String>, notes: &mut Vec<String>) -> String {
    static VARIABLE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\$\{([^}]*)\}").unwrap_or_else(|_| unreachable!("a valid pattern"))
    });
    let mut out = String::new();
    let mut last = 0;
    for found in VARIABLE.captures_iter(text) {
        let (Some(whole), Some(inner)) = (found.get(0), found.get(1)) else {
            continue;
        };
        out.push_str(&text[last..whole.start()].replace('$', "$$"));
        last = whole.end();
        let inner = inner.as_str();
        let name =
            |n: &str| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !n.is_empty();
        let mapped = if let Some(var) = inner.strip_prefix("env:").filter(|v| name(v)) {
            Some(var.to_owned())
        } else if inner == "userHome" {
            Some("HOME".to_owned())
        } else if let Some(id) = inner.strip_prefix("input:") {
            let var: String = id
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_uppercase()
                    } else {
                        '_'
                    }
                })
                .collect();
            notes.push(format!(
                "${{input:{id}}} (a value VS Code asks for) is read from planmux's environment variable {var}: set it where planmux runs"
            ));
            Some(var)
        } else if let Some((var, default)) = inner.split_once(":-").filter(|(v, _)| name(v)) {
            if env(var).is_some() {
                notes.push(format!(
                    "${{{inner}}}: planmux has no default values; {var} is read from its environment, so keep it set"
                ));
                Some(var.to_owned())
            } else {
                notes.push(format!(
                    "${{{inner}}}: {var} is not set here, so its default was written in"
                ));
                out.push_str(&default.replace('$', "$$"));
                continue;
            }
        } else if name(inner) && !EDITOR_VARIABLES.contains(&inner) {
            Some(inner.to_owned())
        } else {
            None
        };
        match mapped {
            Some(var) => {
                if env(&var).is_none() {
                    notes.push(format!(
                        "{var} is not set here, and planmux reads it from its environment: set it where the host starts planmux, or write its value into servers.toml"
                    ));
                }
                let _ = write!(out, "${{{var}}}");
            }
            None => {
                notes.push(format!(
                    "${{{inner}}} means nothing to planmux and was kept as text; replace it with a path or value"
                ));
                let _ = write!(out, "$${{{inner}}}");
            }
        }
    }
    out.push_str(&text[last..].replace('$', "$$"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_variables() {
        for (name, want) in [
            ("my files", "my_files"),
            ("my.files", "my_files"),
            ("a__b", "a_b"),
            ("  ", "server"),
            ("ok-name_1", "ok-name_1"),
        ] {
            assert_eq!(sanitize(name), want);
        }
        let mut notes = Vec::new();
        let env = |name: &str| (name == "SET").then(|| "1".to_owned());
        for (text, want) in [
            ("${env:TOKEN}", "${TOKEN}"),
            ("Bearer ${API_KEY}", "Bearer ${API_KEY}"),
            ("${userHome}/x", "${HOME}/x"),
            ("${input:api-key}", "${API_KEY}"),
            ("${PORT:-8080}", "8080"),
            ("${SET:-8080}", "${SET}"),
            ("${workspaceFolder}/src", "$${workspaceFolder}/src"),
            ("costs $5", "costs $$5"),
        ] {
            assert_eq!(translate(text, &env, &mut notes), want);
        }
        assert_eq!(notes.len(), 8, "{notes:?}");
    }
}
