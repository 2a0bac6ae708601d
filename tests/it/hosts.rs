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
