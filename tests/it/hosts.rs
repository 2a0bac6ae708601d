//! From a host's config to planmux in that host, as the README's quick start does it:
//! for each host's real-shaped config (tests/fixtures/hosts), `planmux import`, then
//! `planmux install`, then the host's new entry launched exactly as the host would (its
//! command, args and env, with a GUI app's minimal PATH), listing the servers' tools
//! through planmux; then `planmux uninstall` gives the original file back, byte for byte.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::Value;

use crate::common;

/// (host, fixture, where the host keeps it under HOME, or `None` for a project file
/// passed with --file).
const HOSTS: &[(&str, &str, Option<&str>)] = &[
    (
        "claude-desktop",
        "claude_desktop_config.json",
        Some(".config/Claude/claude_desktop_config.json"),
    ),
    ("claude-code", "claude.json", Some(".claude.json")),
    ("claude-code", "claude-code.mcp.json", None),
    ("cursor", "cursor-mcp.json", Some(".cursor/mcp.json")),
    (
        "vscode",
        "vscode-mcp.json",
        Some(".config/Code/User/mcp.json"),
    ),
    (
        "windsurf",
        "windsurf-mcp_config.json",
        Some(".codeium/windsurf/mcp_config.json"),
    ),
];

/// What the fixtures' servers read from the environment (the import notes say to set
/// them where planmux runs).
const VARIABLES: &[(&str, &str)] = &[
    ("API_KEY", "fake"),
    ("DOCS_MCP_TOKEN", "fake"),
    ("GITHUB_PERSONAL_ACCESS_TOKEN", "fake"),
    ("MCP_LOG_LEVEL", "info"),
];

fn planmux(home: &Path) -> Command {
    let mut command = Command::new(common::bin());
    command
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("PLANMUX_CONFIG");
    command
}

fn ok(command: &mut Command) -> anyhow::Result<String> {
    let out = command.output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(out.status.success(), "{command:?} failed: {stderr}");
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_install_launch_and_uninstall_for_every_host() -> anyhow::Result<()> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts");
    for (host, fixture, location) in HOSTS {
        let home = tempfile::tempdir()?;
        let file: PathBuf = match location {
            Some(location) => home.path().join(location),
            None => home.path().join("project/.mcp.json"),
        };
        std::fs::create_dir_all(file.parent().unwrap_or(home.path()))?;
        std::fs::copy(fixtures.join(fixture), &file)?;
        let original = std::fs::read(&file)?;
        let config = home.path().join(".config/planmux/servers.toml");
        let source = match location {
            Some(_) => (*host).to_owned(),
            None => file.display().to_string(),
        };

        ok(planmux(home.path())
            .args(["import", "--from", &source, "-o"])
            .arg(&config))?;
        let mut install = planmux(home.path());
        install
            .args(["install", "--host", host, "--config"])
            .arg(&config)
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        if location.is_none() {
            install.arg("--file").arg(&file);
        }
        let diff = ok(&mut install)?;
        assert!(
            diff.contains("+    \"planmux\"") || diff.contains("+\t\t\"planmux\""),
            "{fixture}: {diff}"
        );

        // The host's new entry, launched as the host would.
        let key = if *host == "vscode" {
            "servers"
        } else {
            "mcpServers"
        };
        let parsed = planmux::hosts::HostFile::read(&file, key)?.value;
        let entry = &parsed[key]["planmux"];
        let command = entry["command"].as_str().unwrap_or_default();
        assert!(Path::new(command).is_absolute(), "{fixture}: {entry}");
        let args: Vec<&str> = entry["args"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut launch = tokio::process::Command::new(command);
        launch
            .args(&args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", home.path())
            .envs(VARIABLES.iter().copied());
        if let Some(env) = entry["env"].as_object() {
            for (name, value) in env {
                launch.env(name, value.as_str().unwrap_or_default());
            }
        }
        let (transport, _) = TokioChildProcess::builder(launch)
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let client = ().serve(transport).await?;
        // The npm servers start through npx (a download on a first run): wait for one.
        let mut names = Vec::new();
        for _ in 0..180 {
            names = client
                .list_all_tools()
                .await?
                .into_iter()
                .map(|t| t.name.to_string())
                .collect();
            if names
                .iter()
                .any(|n| n.ends_with("__echo") || n.ends_with("__read_graph"))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        assert!(
            names.contains(&"execute_plan".to_owned()),
            "{fixture}: {names:?}"
        );
        assert!(
            names
                .iter()
                .any(|n| n.ends_with("__echo") || n.ends_with("__read_graph")),
            "{fixture}: no npm server's tools through planmux: {names:?}"
        );
        client.cancel().await?;

        let mut uninstall = planmux(home.path());
        uninstall.args(["uninstall", "--host", host]);
        if location.is_none() {
            uninstall.arg("--file").arg(&file);
        }
        ok(&mut uninstall)?;
        assert_eq!(
            std::fs::read(&file)?,
            original,
            "{fixture}: not restored byte for byte"
        );
    }
    Ok(())
}

/// `install` refuses a servers.toml planmux would refuse to start on (the host would
/// start a planmux that exits at once), naming the problem, and leaves the host's file
/// alone; a variable unset here (set only where the host runs) does not stop it.
#[test]
fn install_refuses_a_config_planmux_would_not_start_on() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let file = home.path().join("project/.mcp.json");
    std::fs::create_dir_all(home.path().join("project"))?;
    let original = r#"{"mcpServers": {"cc": {"command": "echo"}}}"#;
    std::fs::write(&file, original)?;
    let config = home.path().join("servers.toml");
    std::fs::write(
        &config,
        "[proxy]\nbogus = 1\n[servers.cc]\ncommand = \"echo\"\n",
    )?;
    let install = |config: &Path| {
        planmux(home.path())
            .args(["install", "--host", "claude-code", "--file"])
            .arg(&file)
            .arg("--config")
            .arg(config)
            .output()
    };
    let out = install(&config)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("bogus") && stderr.contains("would not start"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&file)?, original);

    std::fs::write(
        &config,
        "[servers.cc]\ncommand = \"echo\"\nenv = { KEY = \"${PLANMUX_TEST_UNSET_HERE}\" }\n",
    )?;
    let out = install(&config)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("PLANMUX_TEST_UNSET_HERE"), "{stderr}");
    Ok(())
}

/// What the fake remote server was asked: `METHOD /path`, in order.
type Asked = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// A remote MCP server on loopback standing for several: `/mcp` wants OAuth and nobody
/// has signed in (401 with an RFC 9728 challenge), `/open` answers `initialize`,
/// `/legacy` serves no streamable HTTP (405, as an SSE-only server answers a POST).
async fn fake_remote(listener: tokio::net::TcpListener, asked: Asked) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let Ok(address) = listener.local_addr() else {
        return;
    };
    while let Ok((mut stream, _)) = listener.accept().await {
        let asked = asked.clone();
        tokio::spawn(async move {
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            let (head, body_len) = loop {
                let Ok(read) = stream.read(&mut buffer).await else {
                    return;
                };
                if read == 0 {
                    return;
                }
                request.extend_from_slice(&buffer[..read]);
                let text = String::from_utf8_lossy(&request).into_owned();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    break (text[..end].to_owned(), end + 4 + length);
                }
            };
            while request.len() < body_len {
                match stream.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(read) => request.extend_from_slice(&buffer[..read]),
                }
            }
            let line: Vec<&str> = head.lines().next().unwrap_or_default().split(' ').collect();
            let (method, path) = (
                line.first().copied().unwrap_or(""),
                line.get(1).copied().unwrap_or(""),
            );
            asked
                .lock()
                .map(|mut a| a.push(format!("{method} {path}")))
                .ok();
            let initialized = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"fake","version":"0"}}}"#;
            let response = match (method, path) {
                ("POST", "/mcp") => format!(
                    "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer resource_metadata=\"http://{address}/.well-known/oauth-protected-resource/mcp\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                ),
                ("POST", "/open") => format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: s1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{initialized}",
                    initialized.len()
                ),
                ("DELETE", "/open") => "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned(),
                ("POST", "/legacy") => "HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain\r\nContent-Length: 18\r\nConnection: close\r\n\r\nMethod Not Allowed".to_owned(),
                _ => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned(),
            };
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

/// `planmux import` then `planmux install` over a Claude Code project file with stdio and
/// remote servers: what planmux cannot run yet stays in the host's file, each with why
/// and what to do (a server that asks for sign-in nobody has done, an SSE server, one
/// without streamable HTTP); the stdio servers, a remote one that answers and one with
/// an `Authorization` header (never asked) move. Uninstall restores every byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_leaves_what_planmux_cannot_run_yet_with_the_host() -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let at = format!("http://{}", listener.local_addr()?);
    let asked = Asked::default();
    let server = tokio::spawn(fake_remote(listener, asked.clone()));
    let home = tempfile::tempdir()?;
    let file = home.path().join("project/.mcp.json");
    std::fs::create_dir_all(home.path().join("project"))?;
    let original = format!(
        r#"{{
  "mcpServers": {{
    "memory": {{"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}},
    "linear": {{"type": "http", "url": "{at}/mcp"}},
    "open": {{"type": "http", "url": "{at}/open"}},
    "legacy": {{"type": "http", "url": "{at}/legacy"}},
    "events": {{"type": "sse", "url": "{at}/sse"}},
    "github": {{"type": "http", "url": "{at}/github", "headers": {{"Authorization": "Bearer fake-token"}}}}
  }}
}}
"#
    );
    std::fs::write(&file, &original)?;
    let config = home.path().join("servers.toml");
    let run = |args: &[&str]| {
        let mut command = tokio::process::Command::from(planmux(home.path()));
        command
            .args(args)
            .env_remove("HTTP_PROXY")
            .env_remove("HTTPS_PROXY")
            .env_remove("ALL_PROXY")
            .env_remove("http_proxy")
            .env_remove("https_proxy")
            .env_remove("all_proxy");
        command.output()
    };
    let (file_arg, config_arg) = (file.display().to_string(), config.display().to_string());
    let imported = run(&["import", "--from", &file_arg, "-o", &config_arg]).await?;
    let said = String::from_utf8_lossy(&imported.stderr);
    assert!(imported.status.success(), "{said}");
    assert!(
        said.contains("`linear` is a remote server without an Authorization header: if it asks for sign-in (OAuth), run `planmux login linear`"),
        "{said}"
    );
    let install = [
        "install",
        "--host",
        "claude-code",
        "--file",
        &file_arg,
        "--config",
        &config_arg,
    ];
    let installed = run(&install).await?;
    let said = String::from_utf8_lossy(&installed.stderr);
    assert!(installed.status.success(), "{said}");
    let login = format!("planmux login linear --config {config_arg}");
    for part in [
        format!(
            "\"linear\": it asks for sign-in (OAuth), which planmux has not done yet: it stays in the host's file; run `{login}`, then `planmux install --host claude-code --config {config_arg}`"
        ),
        "\"events\": it is an SSE server, which planmux cannot run yet".to_owned(),
        "\"legacy\": it answers HTTP 405 to a streamable HTTP request".to_owned(),
        "runs 3 server(s) in its place".to_owned(),
        format!(
            "next: sign in to the server(s) that stayed until you do, then install again to move them:\n  {login}\n"
        ),
    ] {
        assert!(said.contains(&part), "{part}\n---\n{said}");
    }
    let read = planmux::hosts::HostFile::read(&file, "mcpServers")?;
    let left: Vec<&str> = (read.servers("mcpServers").iter())
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(left, ["linear", "legacy", "events", "planmux"]);
    let asked = asked.lock().map(|a| a.clone()).unwrap_or_default();
    assert!(
        !asked
            .iter()
            .any(|a| a.ends_with("/sse") || a.ends_with("/github")),
        "neither the SSE server nor one with Authorization is asked: {asked:?}"
    );
    assert!(asked.contains(&"POST /mcp".to_owned()), "{asked:?}");
    assert!(
        asked.contains(&"DELETE /open".to_owned()),
        "the probe's session is closed: {asked:?}"
    );

    let uninstalled = run(&["uninstall", "--host", "claude-code", "--file", &file_arg]).await?;
    assert!(uninstalled.status.success());
    assert_eq!(std::fs::read_to_string(&file)?, original);
    server.abort();
    Ok(())
}
