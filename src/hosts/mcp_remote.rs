//! `mcp-remote` (npm), the stdio bridge through which a host that only starts local
//! servers reaches a remote one, signing in with OAuth itself: an entry that runs it
//! (`npx -y mcp-remote URL …`, `npx mcp-remote@0.1.29 URL …`, `mcp-remote URL …`, or
//! Windows' `cmd /c npx …`) is that URL's server, which planmux reaches directly. Its
//! arguments are read as mcp-remote 0.15 reads them (`--header` anywhere, then the URL,
//! then an optional callback port, then flags); what servers.toml has a key for maps
//! to it, the rest is noted.

use serde_json::{Map, Value};

use super::remote::{Declared, Remote, is_sse};

/// The remote server an entry that runs mcp-remote reaches, or `None` when the entry
/// does not run it (or names no URL, and then stays a stdio server).
pub(super) fn parse(entry: &Map<String, Value>) -> Option<Remote> {
    let args = bridge_args(entry)?;
    let env = entry.get("env").and_then(Value::as_object);
    let mut read = Reading {
        env,
        used: Vec::new(),
        remote: Remote::default(),
    };
    let mut args: Vec<String> = args.into_iter().map(str::to_owned).collect();
    read.headers(&mut args);
    let url = args.first().filter(|url| !url.starts_with('-'))?.clone();
    let mut rest = &args[1..];
    let port = rest.first().filter(|p| p.parse::<u16>().is_ok()).cloned();
    if let Some(port) = &port {
        read.note(format!(
            "its mcp-remote OAuth callback port {port} was left out: `planmux login` receives the sign-in on its own address"
        ));
        rest = &rest[1..];
    }
    let mut declared = Declared::Unsaid;
    while let Some((flag, tail)) = rest.split_first() {
        let value = tail.first().map(String::as_str);
        let took = read.flag(flag, value, &mut declared);
        rest = &tail[usize::from(took && value.is_some())..];
    }
    if let (Some(port), Some(_)) = (&port, &read.remote.oauth.client_id) {
        read.note(format!(
            "its pre-registered client may accept only mcp-remote's sign-in address (port {port}): if signing in fails, register `planmux login`'s with the authorization server too"
        ));
    }
    let mut remote = read.remote;
    remote.sse = is_sse(declared, &url);
    remote.notes.insert(
        0,
        format!(
            "it ran mcp-remote, a stdio bridge, to reach {url}: planmux reaches that server itself"
        ),
    );
    remote.url = url;
    let unused: Vec<&str> = env
        .into_iter()
        .flat_map(Map::keys)
        .map(String::as_str)
        .filter(|name| !read.used.iter().any(|used| used == name))
        .collect();
    if !unused.is_empty() {
        remote.notes.push(format!(
            "its env {} set mcp-remote's environment and was left out (planmux reads certificate and proxy variables from its own)",
            unused.join(", ")
        ));
    }
    Some(remote)
}

/// mcp-remote's own arguments, when `entry` runs it.
fn bridge_args(entry: &Map<String, Value>) -> Option<Vec<&str>> {
    let command = entry.get("command")?.as_str()?;
    let args: Vec<&str> = match entry.get("args") {
        None => Vec::new(),
        Some(Value::Array(args)) => args.iter().map(Value::as_str).collect::<Option<_>>()?,
        Some(_) => return None,
    };
    let (mut program, mut args) = (program_name(command), args.as_slice());
    // Windows hosts run npx through the shell: `cmd /c npx -y mcp-remote …`.
    if program == "cmd" && args.first().is_some_and(|a| a.eq_ignore_ascii_case("/c")) {
        program = args.get(1).map(|a| program_name(a))?;
        args = &args[2..];
    }
    match program.as_str() {
        "mcp-remote" => Some(args.to_vec()),
        "npx" | "bunx" | "pnpx" => {
            // npx's own options come before the package: `-y`, `--yes`, `-p PKG`.
            let mut rest = args;
            while let Some((first, tail)) = rest.split_first() {
                if *first == "-p" || *first == "--package" {
                    rest = tail.get(1..)?;
                } else if first.starts_with('-') {
                    rest = tail;
                } else {
                    break;
                }
            }
            let (package, tail) = rest.split_first()?;
            let bare = package.split('@').next().unwrap_or_default();
            (bare == "mcp-remote").then(|| tail.to_vec())
        }
        _ => None,
    }
}

/// A command's program, without its folder or Windows suffix.
fn program_name(path: &str) -> String {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let name = name.strip_suffix(".cmd").unwrap_or(name);
    name.strip_suffix(".exe")
        .unwrap_or(name)
        .to_ascii_lowercase()
}

/// The reading of one entry's mcp-remote arguments.
struct Reading<'a> {
    /// The entry's `env`: mcp-remote's environment, from which it fills in `${VAR}`.
    env: Option<&'a Map<String, Value>>,
    /// The variables of `env` a value used.
    used: Vec<String>,
    remote: Remote,
}

impl Reading<'_> {
    fn note(&mut self, note: String) {
        self.remote.notes.push(note);
    }

    /// Takes every `--header` and `--header-file` out of `args`, wherever they stand (as
    /// mcp-remote does before it reads the rest).
    fn headers(&mut self, args: &mut Vec<String>) {
        let mut i = 0;
        while i + 1 < args.len() {
            let flag = args[i].as_str();
            if flag != "--header" && flag != "--header-file" {
                i += 1;
                continue;
            }
            let value = args.remove(i + 1);
            if args.remove(i) == "--header-file" {
                self.note(format!(
                    "its mcp-remote --header-file {value} was not read: copy its headers into `headers`"
                ));
                continue;
            }
            match header_line(&value) {
                Some((name, value)) => {
                    let value = self.filled(value);
                    self.remote.headers.push((name.to_owned(), value));
                }
                None => self.note(
                    "one of its mcp-remote --header values is not `Name: value` (mcp-remote ignores it too) and was left out".to_owned(),
                ),
            }
        }
    }

    /// mcp-remote's `${VAR}`: a variable the entry's `env` sets is put in (mcp-remote
    /// read it from there); any other stays, for planmux's environment.
    fn filled(&mut self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            let Some(len) = rest[start..].find('}') else {
                break;
            };
            let name = &rest[start + 2..start + len];
            out.push_str(&rest[..start]);
            match self.env.and_then(|env| env.get(name)) {
                Some(value) => {
                    self.used.push(name.to_owned());
                    match value {
                        Value::String(text) => out.push_str(text),
                        other => out.push_str(&other.to_string()),
                    }
                }
                None => out.push_str(&rest[start..=start + len]),
            }
            rest = &rest[start + len + 1..];
        }
        out.push_str(rest);
        out
    }

    /// Reads one flag and, when it takes one, its `value`; says whether it took it.
    fn flag(&mut self, flag: &str, value: Option<&str>, declared: &mut Declared) -> bool {
        let shown = value.unwrap_or_default();
        match flag {
            "--transport" => match shown {
                "sse-only" => *declared = Declared::Sse,
                "http-only" => *declared = Declared::StreamableHttp,
                "http-first" => {}
                _ => self.note(format!(
                    "its mcp-remote --transport {shown} is not one planmux knows: planmux speaks streamable HTTP only"
                )),
            },
            "--static-oauth-client-info" => self.client_info(shown),
            "--static-oauth-client-metadata" => self.client_metadata(shown),
            "--client-metadata-url" => {
                let url = self.filled(shown);
                self.remote.oauth.client_metadata_url = Some(url);
            }
            "--ignore-tool" => self.remote.exclude.push(shown.to_owned()),
            "--client-credentials" => {
                self.remote.oauth.client_credentials = true;
                return false;
            }
            _ => {
                let Some((_, takes_value, why)) = LEFT_OUT.iter().find(|(f, ..)| *f == flag)
                else {
                    self.note(format!(
                        "its mcp-remote argument {flag} is not one planmux knows and was left out"
                    ));
                    return false;
                };
                let flag = if *takes_value {
                    format!("{flag} {shown}")
                } else {
                    flag.to_owned()
                };
                self.note(format!("its mcp-remote {flag} {why}"));
                return *takes_value;
            }
        }
        true
    }

    /// `--static-oauth-client-info '{"client_id": …, "client_secret": …}'`: a client
    /// registered beforehand. mcp-remote fills in `${VAR}` before it reads the JSON.
    fn client_info(&mut self, value: &str) {
        let wanted = "client_id and client_secret";
        let Some(info) = self.json(value, "--static-oauth-client-info", wanted) else {
            return;
        };
        let text = |key: &str| info.get(key).and_then(Value::as_str).map(str::to_owned);
        self.remote.oauth.client_id = text("client_id");
        self.remote.oauth.client_secret = text("client_secret");
        let others: Vec<&str> = info
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "client_id" && *k != "client_secret")
            .collect();
        if !others.is_empty() {
            self.note(format!(
                "its mcp-remote --static-oauth-client-info also has {}, which servers.toml has no key for",
                others.join(", ")
            ));
        }
        if self.remote.oauth.client_id.is_none() {
            self.note(
                "its mcp-remote --static-oauth-client-info has no client_id: set client_id by hand"
                    .to_owned(),
            );
        }
    }

    /// `--static-oauth-client-metadata '{"scope": "a b", …}'`: its scope is `scopes`.
    fn client_metadata(&mut self, value: &str) {
        let Some(metadata) = self.json(value, "--static-oauth-client-metadata", "scopes") else {
            return;
        };
        if let Some(scope) = metadata.get("scope").and_then(Value::as_str) {
            self.remote.oauth.scopes = scope.split_whitespace().map(str::to_owned).collect();
        }
        let others: Vec<&str> = metadata
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "scope")
            .collect();
        if !others.is_empty() {
            self.note(format!(
                "its mcp-remote --static-oauth-client-metadata also sets {}, which servers.toml has no key for (planmux describes itself when it registers)",
                others.join(", ")
            ));
        }
    }

    /// A flag's JSON object, `${VAR}` filled in from the entry's env; `None`, noted, when
    /// it is a file (`@path`) or not an object.
    fn json(&mut self, value: &str, flag: &str, wanted: &str) -> Option<Map<String, Value>> {
        if let Some(path) = value.strip_prefix('@') {
            self.note(format!(
                "its mcp-remote {flag} reads {path}, which import does not: set {wanted} from it by hand"
            ));
            return None;
        }
        let filled = self.filled(value);
        match serde_json::from_str(&filled) {
            Ok(Value::Object(map)) => Some(map),
            _ => {
                self.note(format!(
                    "its mcp-remote {flag} is not a JSON object and was left out: set {wanted} by hand"
                ));
                None
            }
        }
    }
}

/// Why a note calls a flag left out.
const RESOURCE: &str = "(the RFC 8707 resource indicator mcp-remote signs in for, and a token store of its own) has no servers.toml equivalent: planmux signs in for the server's own URL, as MCP's authorization has it";
const CALLBACK: &str = "(where and how long mcp-remote's browser sign-in waits) was left out: `planmux login` runs its own";
const SIGN_IN: &str = "(a way of signing in) has no servers.toml equivalent and was left out";
const CONNECTION: &str = "(a connection setting) has no servers.toml equivalent and was left out";
const LOGGING: &str =
    "(mcp-remote's logging) was left out: planmux logs to stderr, more with RUST_LOG=planmux=debug";

/// mcp-remote 0.15's flags that servers.toml has no key for: whether each takes a value,
/// and what the note says of it.
const LEFT_OUT: &[(&str, bool, &str)] = &[
    ("--resource", true, RESOURCE),
    ("--host", true, CALLBACK),
    ("--callback-path", true, CALLBACK),
    ("--auth-success-url", true, CALLBACK),
    ("--auth-timeout", true, CALLBACK),
    ("--authorize-param", true, SIGN_IN),
    ("--token-endpoint", true, SIGN_IN),
    ("--device-code", false, SIGN_IN),
    ("--use-id-token", false, SIGN_IN),
    ("--disable-resource-parameter", false, SIGN_IN),
    ("--protocol", true, CONNECTION),
    ("--connect-timeout", true, CONNECTION),
    ("--headers-timeout", true, CONNECTION),
    ("--body-timeout", true, CONNECTION),
    ("--ping-interval", true, CONNECTION),
    ("--keep-alive", false, CONNECTION),
    ("--ipv4", false, CONNECTION),
    ("--disable-cookies", false, CONNECTION),
    ("--enable-proxy", false, CONNECTION),
    ("--debug", false, LOGGING),
    ("--silent", false, LOGGING),
    (
        "--allow-http",
        false,
        "was left out: planmux connects to http:// URLs without it",
    ),
];

/// `Name: value`, as mcp-remote reads a header (`^([A-Za-z0-9_-]+):\s*(.*)$`).
fn header_line(line: &str) -> Option<(&str, &str)> {
    let (name, value) = line.split_once(':')?;
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    ok.then(|| (name, value.trim_start()))
}

#[cfg(test)]
mod tests {
    use super::super::remote::OAuth;
    use super::*;

    fn read(entry: Value) -> Option<Remote> {
        parse(entry.as_object().expect("an object"))
    }

    #[test]
    fn what_runs_mcp_remote() {
        for (command, args, url) in [
            (
                "npx",
                &["-y", "mcp-remote", "https://mcp.linear.app/mcp"][..],
                Some("https://mcp.linear.app/mcp"),
            ),
            (
                "npx",
                &["mcp-remote@0.1.29", "https://x.dev/mcp"],
                Some("https://x.dev/mcp"),
            ),
            (
                "npx",
                &[
                    "-y",
                    "-p",
                    "mcp-remote@latest",
                    "mcp-remote",
                    "https://x.dev/mcp",
                ],
                Some("https://x.dev/mcp"),
            ),
            (
                "/usr/local/bin/npx",
                &["--yes", "mcp-remote@latest", "https://x.dev/mcp"],
                Some("https://x.dev/mcp"),
            ),
            (
                "mcp-remote",
                &["https://x.dev/mcp"],
                Some("https://x.dev/mcp"),
            ),
            (
                "cmd",
                &["/c", "npx", "-y", "mcp-remote", "https://x.dev/mcp"],
                Some("https://x.dev/mcp"),
            ),
            ("npx", &["-y", "@modelcontextprotocol/server-memory"], None),
            (
                "npx",
                &["-y", "@acme/mcp-remote", "https://x.dev/mcp"],
                None,
            ),
            ("npx", &["-y", "mcp-remote"], None),
            ("npx", &["-y", "mcp-remote", "--debug"], None),
            ("node", &["mcp-remote", "https://x.dev/mcp"], None),
        ] {
            let found = read(serde_json::json!({"command": command, "args": args}));
            assert_eq!(found.map(|r| r.url).as_deref(), url, "{command} {args:?}");
        }
    }

    /// Each flag of mcp-remote 0.15's README: mapped, or one note.
    #[test]
    fn flags_map_or_are_noted() {
        let remote = read(serde_json::json!({
            "command": "npx",
            "args": [
                "-y", "mcp-remote", "https://mcp.atlassian.com/v1/sse", "9696",
                "--header", "Authorization:${AUTH_HEADER}",
                "--header", "X-Team: ${TEAM}",
                "--header", "not a header",
                "--header-file", "/home/me/headers.txt",
                "--transport", "sse-only", "--resource", "https://tenant1.atlassian.net/",
                "--host", "127.0.0.1", "--allow-http", "--debug", "--silent",
                "--ignore-tool", "delete*", "--enable-proxy", "--auth-timeout", "60",
                "--authorize-param", "prompt=consent", "--frobnicate"
            ],
            "env": {"AUTH_HEADER": "Bearer fake-token", "NODE_EXTRA_CA_CERTS": "/etc/ca.pem"}
        }))
        .expect("an mcp-remote entry");
        assert_eq!(remote.url, "https://mcp.atlassian.com/v1/sse");
        assert!(remote.sse);
        assert_eq!(
            remote.headers,
            [
                ("Authorization".to_owned(), "Bearer fake-token".to_owned()),
                ("X-Team".to_owned(), "${TEAM}".to_owned())
            ]
        );
        assert_eq!(remote.exclude, ["delete*"]);
        let notes = remote.notes.join("\n");
        for part in [
            "it ran mcp-remote, a stdio bridge, to reach https://mcp.atlassian.com/v1/sse",
            "OAuth callback port 9696",
            "--header-file /home/me/headers.txt was not read",
            "is not `Name: value`",
            "--resource https://tenant1.atlassian.net/ (the RFC 8707 resource indicator mcp-remote",
            "--host 127.0.0.1",
            "--allow-http was left out",
            "--debug (mcp-remote's logging)",
            "--silent (mcp-remote's logging)",
            "--enable-proxy (a connection setting)",
            "--auth-timeout 60",
            "--authorize-param prompt=consent (a way of signing in)",
            "argument --frobnicate is not one planmux knows",
            "its env NODE_EXTRA_CA_CERTS set mcp-remote's environment",
        ] {
            assert!(notes.contains(part), "{part}\n{notes}");
        }
        assert_eq!(remote.notes.len(), 14, "{notes}");
    }

    #[test]
    fn oauth_flags_are_servers_toml_keys() {
        let remote = read(serde_json::json!({
            "command": "npx",
            "args": [
                "mcp-remote", "https://ci.example.com/mcp", "--client-credentials",
                "--static-oauth-client-info", "{\"client_id\": \"ci-bot\", \"client_secret\": \"${CI_SECRET}\"}",
                "--static-oauth-client-metadata", "{\"scope\": \"read write\", \"client_name\": \"CI\"}",
                "--client-metadata-url", "https://planmux.dev/client.json",
                "--transport", "http-only"
            ]
        }))
        .expect("an mcp-remote entry");
        assert!(!remote.sse);
        assert_eq!(
            remote.oauth,
            OAuth {
                client_id: Some("ci-bot".into()),
                client_secret: Some("${CI_SECRET}".into()),
                scopes: vec!["read".into(), "write".into()],
                client_metadata_url: Some("https://planmux.dev/client.json".into()),
                client_credentials: true,
            }
        );
        assert!(remote.notes.join("\n").contains("also sets client_name"));
        let file = read(serde_json::json!({
            "command": "npx",
            "args": ["mcp-remote", "https://x.dev/mcp", "--static-oauth-client-info", "@/home/me/client.json"]
        }))
        .expect("an mcp-remote entry");
        assert!(file.oauth.is_empty());
        assert!(file.notes.join("\n").contains("reads /home/me/client.json"));
    }
}
