//! The hosts' variable syntax in planmux's: `${env:X}`, `${X}`, `${userHome}`,
//! `${X:-default}` and VS Code's `${input:id}` become planmux's `${X}`; what planmux has no
//! equivalent for (`${workspaceFolder}`) is kept as text, with a note.

use std::fmt::Write as _;

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
pub(super) fn translate(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
    notes: &mut Vec<String>,
) -> String {
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
    fn variables() {
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
