//! Import, install and uninstall over real-shaped config files of every host
//! (tests/fixtures/hosts).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::*;
use crate::config::{Config, ServerConfig};

const FIXTURES: &[(Host, &str)] = &[
    (Host::ClaudeDesktop, "claude_desktop_config.json"),
    (Host::ClaudeCode, "claude.json"),
    (Host::ClaudeCode, "claude-code.mcp.json"),
    (Host::Cursor, "cursor-mcp.json"),
    (Host::VsCode, "vscode-mcp.json"),
    (Host::Windsurf, "windsurf-mcp_config.json"),
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hosts")
        .join(name)
}

fn env(name: &str) -> Option<String> {
    Some(format!("<{name}>"))
}

/// The servers of a servers.toml text.
fn servers(toml: &str) -> Vec<ServerConfig> {
    Config::parse(toml, "servers.toml", Path::new("/cfg"), &env)
        .unwrap_or_else(|e| panic!("{e}\n{toml}"))
        .servers
}

fn ready(_: &ServerConfig) -> Readiness {
    Readiness::Ready
}

/// Runs with every server ready.
fn all_ready(servers: &[ServerConfig]) -> Runs<'_> {
    Runs {
        servers,
        readiness: &ready,
    }
}

fn names(kept: &[Kept]) -> Vec<&str> {
    kept.iter().map(|k| k.name.as_str()).collect()
}

#[test]
fn every_fixture_imports_into_a_valid_config_and_loses_no_server() {
    for (host, name) in FIXTURES {
        let file = HostFile::read(&fixture(name), host.servers_key()).expect(name);
        let imported = import(&file, host.servers_key(), name, &|_| None);
        let config = Config::parse(&imported.toml, name, Path::new("/cfg"), &env)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", imported.toml));
        let listed = file.servers(host.servers_key()).len();
        let dropped = imported
            .notes
            .iter()
            .filter(|n| n.contains("was not imported"))
            .count();
        assert_eq!(
            config.servers.len() + dropped,
            listed,
            "{name}: {:?}",
            imported.notes
        );
        assert_eq!(imported.servers.len(), config.servers.len());
        assert!(listed >= 3, "{name}");
    }
}

#[test]
fn what_cannot_be_mapped_is_said() {
    let file = HostFile::read(&fixture("vscode-mcp.json"), "servers").expect("vscode");
    let imported = import(&file, "servers", "vscode", &|_| None);
    let notes = imported.notes.join("\n");
    for part in [
        "\"my everything\" is named my_everything",
        "${input:api-key} (a value VS Code asks for) is read from planmux's environment variable API_KEY",
        "${workspaceFolder} means nothing to planmux",
        "its \"envFile\" has no planmux equivalent",
    ] {
        assert!(notes.contains(part), "{part}\n{notes}");
    }
    assert!(
        imported
            .toml
            .contains("GITHUB_PERSONAL_ACCESS_TOKEN = \"${API_KEY}\"")
    );
    assert!(imported.toml.contains("LOG_LEVEL = \"${MCP_LOG_LEVEL}\""));
    assert!(
        imported
            .toml
            .contains("url = \"https://mcp.example.com/mcp\"")
    );

    let file = HostFile::read(&fixture("windsurf-mcp_config.json"), "mcpServers").expect("ws");
    let toml = import(&file, "mcpServers", "windsurf", &|_| None).toml;
    assert!(toml.contains("enabled = false"), "{toml}");
    assert!(
        toml.contains("exclude = [\"longRunningOperation\"]"),
        "{toml}"
    );

    let file = HostFile::read(&fixture("claude.json"), "mcpServers").expect("claude.json");
    let notes = import(&file, "mcpServers", "claude-code", &|_| None)
        .notes
        .join("\n");
    assert!(
        notes.contains("of the project /home/me/projects/webapp"),
        "{notes}"
    );
}

/// Installs into a copy of each fixture, checks that only the servers object changed,
/// and that uninstall gives the original back byte for byte.
#[test]
fn install_changes_only_the_servers_and_uninstall_restores_every_byte() {
    let exe = Path::new("/opt/planmux/bin/planmux");
    let config = Path::new("/home/me/.config/planmux/servers.toml");
    for (host, name) in FIXTURES {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join(name);
        std::fs::copy(fixture(name), &file).expect("copy");
        let original = std::fs::read_to_string(&file).expect("read");
        let key = host.servers_key();
        let read = HostFile::read(&file, key).expect("read");
        let imported = import(&read, key, name, &|_| None);
        let servers = servers(&imported.toml);
        let runs = all_ready(&servers);
        let done = install(
            *host,
            &file,
            exe,
            config,
            &runs,
            Some("/usr/bin:/bin"),
            false,
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let after = std::fs::read_to_string(&file).expect("read");
        assert!(done.diff.contains("+"), "{name}: {}", done.diff);
        assert!(done.kept.is_empty(), "{name}: {:?}", done.kept);
        // The same file around the servers object.
        let span = read.span.clone().expect("servers");
        assert!(after.starts_with(&original[..span.start]), "{name}");
        assert!(after.ends_with(&original[span.end..]), "{name}");
        let reread = HostFile::read(&file, key).expect("valid after install");
        let servers = reread.servers(key);
        assert_eq!(servers.len(), 1, "{name}: {after}");
        let entry = servers[0].1;
        assert_eq!(entry["command"], "/opt/planmux/bin/planmux");
        assert_eq!(
            entry["args"],
            serde_json::json!(["serve", "--config", "/home/me/.config/planmux/servers.toml"])
        );
        assert_eq!(entry["env"]["PATH"], "/usr/bin:/bin");
        let other_keys = |v: &Value| {
            let mut v = v.clone();
            if let Value::Object(m) = &mut v {
                m.remove(key);
            }
            v
        };
        assert_eq!(other_keys(&reread.value), other_keys(&read.value), "{name}");
        assert_eq!(
            std::fs::read_to_string(done.backup).expect("backup"),
            original
        );
        // Installing again keeps the first backup; uninstall restores every byte.
        install(*host, &file, exe, config, &runs, None, false).expect("again");
        uninstall(&file, false, false).expect("uninstall");
        assert_eq!(
            std::fs::read_to_string(&file).expect("read"),
            original,
            "{name}"
        );
    }
}

#[test]
fn a_server_planmux_does_not_run_stays_and_changes_since_install_are_not_undone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("claude_desktop_config.json");
    std::fs::copy(fixture("claude_desktop_config.json"), &file).expect("copy");
    let exe = Path::new("/x/planmux");
    let servers = servers("[servers.memory]\ncommand = \"npx\"\n");
    let done = install(
        Host::ClaudeDesktop,
        &file,
        exe,
        Path::new("/x/servers.toml"),
        &all_ready(&servers),
        None,
        false,
    )
    .expect("install");
    assert_eq!(done.moved, ["memory"]);
    assert_eq!(
        names(&done.kept),
        ["my files", "everything"],
        "in file order"
    );
    assert!(done.kept.iter().all(|k| k.why == Why::NotInConfig));
    let text = std::fs::read_to_string(&file).expect("read");
    std::fs::write(&file, text.replace("Alt+Ctrl+Space", "Alt+Space")).expect("edit");
    let refused = uninstall(&file, false, false);
    assert!(refused.is_err_and(|e| e.to_string().contains("changed since `planmux install`")),);
    uninstall(&file, true, false).expect("forced");
    assert!(
        std::fs::read_to_string(&file)
            .expect("read")
            .contains("Alt+Ctrl+Space")
    );
    let again = uninstall(&file, false, false);
    assert!(again.is_err_and(|e| e.to_string().contains("no backup")));
}

#[test]
fn a_file_without_servers_gets_them_and_bad_files_are_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("mcp.json");
    for (before, key) in [("{}\n", "mcpServers"), ("{\n  \"a\": 1\n}\n", "servers")] {
        std::fs::write(&file, before).expect("write");
        let host = if key == "servers" {
            Host::VsCode
        } else {
            Host::Cursor
        };
        install(
            host,
            &file,
            Path::new("/p"),
            Path::new("/c"),
            &all_ready(&[]),
            None,
            false,
        )
        .expect("install");
        let read = HostFile::read(&file, key).expect("valid JSON");
        assert_eq!(read.servers(key).len(), 1);
        uninstall(&file, false, false).expect("uninstall");
        assert_eq!(std::fs::read_to_string(&file).expect("read"), before);
    }
    std::fs::write(&file, "{\"mcpServers\": [1]}").expect("write");
    let bad = HostFile::read(&file, "mcpServers");
    assert!(bad.is_err_and(|e| e.to_string().contains("is not an object of servers")));
    std::fs::write(&file, "{\"mcpServers\": {").expect("write");
    let bad = HostFile::read(&file, "mcpServers");
    assert!(bad.is_err_and(|e| e.to_string().contains("not valid JSON")));
}

#[test]
fn awkward_files_are_edited_safely_or_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("mcp.json");
    let (exe, config) = (Path::new("/p"), Path::new("/c"));
    let none = all_ready(&[]);
    // A `{` in a comment before the root object, and no servers key.
    let commented = "// see {docs}\n{\n  \"a\": 1\n}\n";
    std::fs::write(&file, commented).expect("write");
    install(Host::VsCode, &file, exe, config, &none, None, false).expect("install");
    let read = HostFile::read(&file, "servers").expect("still valid JSONC");
    assert_eq!(read.servers("servers").len(), 1);
    assert!(read.text.starts_with("// see {docs}\n{"), "{}", read.text);
    uninstall(&file, false, false).expect("uninstall");
    assert_eq!(std::fs::read_to_string(&file).expect("read"), commented);
    // CRLF line endings stay CRLF.
    let crlf = "{\r\n  \"mcpServers\": {\r\n    \"a\": {\"command\": \"x\"}\r\n  }\r\n}\r\n";
    std::fs::write(&file, crlf).expect("write");
    install(Host::Cursor, &file, exe, config, &none, None, false).expect("install");
    let text = std::fs::read_to_string(&file).expect("read");
    assert!(!text.replace("\r\n", "").contains('\n'), "{text:?}");
    // Changed since install: a second install is refused (its edits would be lost).
    std::fs::write(&file, text.replace("\"x\"", "\"y\"")).expect("edit");
    let again = install(Host::Cursor, &file, exe, config, &none, None, false);
    assert!(again.is_err_and(|e| e.to_string().contains("run `planmux uninstall` first")));
    uninstall(&file, true, false).expect("forced");
    assert_eq!(std::fs::read_to_string(&file).expect("read"), crlf);
    // A servers key given twice: refused.
    std::fs::write(&file, "{\"mcpServers\": {}, \"mcpServers\": {}}").expect("write");
    let twice = HostFile::read(&file, "mcpServers");
    assert!(twice.is_err_and(|e| e.to_string().contains("appears more than once")));
}

#[test]
fn import_skips_planmux_itself_and_notes_what_does_not_apply() {
    let text = r#"{"mcpServers": {
        "planmux": {"command": "/usr/bin/planmux", "args": ["serve", "--config", "/c"]},
        "mine": {"command": "/opt/bin/planmux", "args": ["serve"]},
        "srv": {"command": "npx", "url": "http://x", "env": {"PORT": 8080, "DEBUG": true}},
        "web": {"url": "https://x/mcp", "args": ["a"], "disabled": "yes"}
    }}"#;
    let file = HostFile::parse(Path::new("h.json"), text.to_owned(), "mcpServers").expect("parse");
    let imported = import(&file, "mcpServers", "h.json", &|_| None);
    let names: Vec<&str> = imported.servers.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["srv", "web"]);
    assert!(
        imported
            .toml
            .contains("env = { PORT = \"8080\", DEBUG = \"true\" }"),
        "{}",
        imported.toml
    );
    let notes = imported.notes.join("\n");
    for part in [
        "\"planmux\" is planmux itself",
        "\"mine\" is planmux itself",
        "\"srv\": its \"url\" does not apply",
        "\"web\": its \"args\" does not apply",
        "\"web\": its \"disabled\" is \"yes\"",
    ] {
        assert!(notes.contains(part), "{part}\n{notes}");
    }
}

/// Real-shaped configs with remote servers (tests/fixtures/hosts/remote): streamable
/// HTTP with and without `Authorization`, SSE, and mcp-remote bridges.
const REMOTE: &[(Host, &str)] = &[
    (Host::ClaudeDesktop, "remote/claude_desktop_config.json"),
    (Host::ClaudeCode, "remote/claude-code.mcp.json"),
    (Host::Cursor, "remote/cursor-mcp.json"),
    (Host::VsCode, "remote/vscode-mcp.json"),
];

/// What import writes for each remote fixture and what it says, as the user reads them.
#[test]
fn remote_servers_import_as_url_servers() {
    for (host, name) in REMOTE {
        let key = host.servers_key();
        let file = HostFile::read(&fixture(name), key).expect(name);
        let set = |var: &str| (var == "GITHUB_PAT").then(|| "set".to_owned());
        let imported = import(&file, key, name, &set);
        let config = servers(&imported.toml);
        assert_eq!(config.len(), file.servers(key).len(), "{name}");
        let shown = format!(
            "{}\n--- notes\n{}\n",
            imported.toml,
            imported.notes.join("\n")
        );
        let snapshot = format!(
            "remote_{}",
            name.trim_start_matches("remote/").trim_end_matches(".json")
        );
        insta::assert_snapshot!(snapshot, shown);
    }
}

/// mcp-remote's OAuth flags as servers.toml's OAuth keys (DESIGN §13).
#[test]
fn mcp_remote_sign_in_flags_become_oauth_keys() {
    let text = r#"{"mcpServers": {
        "ci": {"command": "npx", "args": ["-y", "mcp-remote", "https://ci.example.com/mcp",
            "--client-credentials",
            "--static-oauth-client-info", "{\"client_id\": \"${CI_ID}\", \"client_secret\": \"${CI_SECRET}\"}"]},
        "corp": {"command": "npx", "args": ["mcp-remote", "https://mcp.corp.example/mcp", "3334",
            "--static-oauth-client-info", "{\"client_id\": \"planmux-desktop\"}",
            "--static-oauth-client-metadata", "{\"scope\": \"read write\"}",
            "--ignore-tool", "delete*"]},
        "cimd": {"command": "npx", "args": ["mcp-remote", "https://mcp.example.org/mcp",
            "--client-metadata-url", "https://client.example.com/.well-known/oauth-client-metadata"]},
        "both": {"command": "npx", "args": ["mcp-remote", "https://mcp.example.net/mcp",
            "--header", "Authorization: Bearer ${TOKEN}",
            "--static-oauth-client-info", "{\"client_id\": \"unused\"}"],
            "env": {"TOKEN": "fake-token"}},
        "old-sse": {"command": "npx", "args": ["-y", "mcp-remote", "https://mcp.example.org/v1/events", "--transport", "sse-only"]}
    }}"#;
    let file = HostFile::parse(Path::new("h.json"), text.to_owned(), "mcpServers").expect("parse");
    let imported = import(&file, "mcpServers", "h.json", &|_| None);
    let shown = format!(
        "{}\n--- notes\n{}\n",
        imported.toml,
        imported.notes.join("\n")
    );
    insta::assert_snapshot!("mcp_remote_oauth_flags", shown);
    // What import wrote is a config planmux loads, with the sign-in each entry asked for.
    let env = |_: &str| None;
    let config = crate::config::Config::parse(
        &imported.toml,
        "servers.toml",
        std::path::Path::new("/"),
        &env,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let sign_in = |name: &str| {
        let server = config.servers.iter().find(|s| s.name == name);
        match server.map(|s| &s.transport) {
            Some(crate::config::Transport::Http { sign_in, .. }) => sign_in.clone(),
            other => panic!("{name}: {other:?}"),
        }
    };
    assert!(matches!(
        sign_in("ci"),
        crate::config::SignIn::ClientCredentials { .. }
    ));
    assert!(
        matches!(sign_in("corp"), crate::config::SignIn::Browser(c) if c.client_id.as_deref() == Some("planmux-desktop"))
    );
    assert!(
        matches!(sign_in("cimd"), crate::config::SignIn::Browser(c) if c.client_metadata_url.is_some())
    );
    assert_eq!(sign_in("both"), crate::config::SignIn::Header);
}

/// Install leaves with the host what planmux cannot run yet: an SSE server (off in
/// servers.toml), one that waits for sign-in, one readiness finds unsupported; the stdio
/// servers and the ready remote ones move. Uninstall restores every byte.
#[test]
fn install_leaves_what_planmux_cannot_run_yet_with_the_host() {
    for (host, name, moved, kept) in [
        (
            Host::ClaudeDesktop,
            "remote/claude_desktop_config.json",
            &["memory", "internal-docs"][..],
            &[
                ("linear", Why::NeedsSignIn),
                ("sentry", Why::Unsupported("it answers HTTP 405".into())),
                ("atlassian_tenant1", Why::Sse),
            ][..],
        ),
        (
            Host::ClaudeCode,
            "remote/claude-code.mcp.json",
            &["filesystem", "github"],
            &[("notion", Why::NeedsSignIn), ("sentry", Why::Sse)],
        ),
        (
            Host::Cursor,
            "remote/cursor-mcp.json",
            &["filesystem", "github"],
            &[
                ("Linear", Why::NeedsSignIn),
                ("Notion", Why::NeedsSignIn),
                ("Sentry", Why::Sse),
            ],
        ),
        (
            Host::VsCode,
            "remote/vscode-mcp.json",
            &["memory", "github"],
            &[
                ("sentry", Why::Unsupported("it answers HTTP 405".into())),
                ("atlassian", Why::Sse),
            ],
        ),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("mcp.json");
        std::fs::copy(fixture(name), &file).expect("copy");
        let original = std::fs::read_to_string(&file).expect("read");
        let key = host.servers_key();
        let imported = import(&HostFile::read(&file, key).expect(name), key, name, &|_| {
            None
        });
        let servers = servers(&imported.toml);
        let asked = std::cell::RefCell::new(Vec::new());
        // A stand-in for the probe: Linear and Notion ask for sign-in, Sentry's
        // streamable endpoint is taken for missing; asked only of enabled HTTP servers.
        let readiness = |server: &ServerConfig| {
            asked.borrow_mut().push(server.name.clone());
            match server.name.to_lowercase().as_str() {
                "linear" | "notion" => Readiness::NeedsSignIn,
                "sentry" => Readiness::Unsupported("it answers HTTP 405".into()),
                _ => Readiness::Ready,
            }
        };
        let runs = Runs {
            servers: &servers,
            readiness: &readiness,
        };
        let (exe, config) = (Path::new("/p"), Path::new("/c"));
        let done = install(host, &file, exe, config, &runs, None, false).expect(name);
        assert_eq!(done.moved, moved, "{name}");
        let got: Vec<(&str, &Why)> = done
            .kept
            .iter()
            .map(|k| (k.name.as_str(), &k.why))
            .collect();
        let want: Vec<(&str, &Why)> = kept.iter().map(|(n, w)| (*n, w)).collect();
        assert_eq!(got, want, "{name}");
        // Never asked: a stdio server (the first moved), an SSE one (off).
        let asked = asked.into_inner();
        let sse = kept.iter().filter(|(_, why)| *why == Why::Sse);
        for never in sse.map(|(n, _)| *n).chain([moved[0]]) {
            assert!(!asked.contains(&sanitize(never)), "{name}: {asked:?}");
        }
        let after = HostFile::read(&file, key).expect("valid");
        let left: Vec<&str> = after.servers(key).iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(left.len(), kept.len() + 1, "{name}: {left:?}");
        uninstall(&file, false, false).expect("uninstall");
        assert_eq!(std::fs::read_to_string(&file).expect("read"), original);
    }
}
