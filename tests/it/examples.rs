//! Every plan in examples/plans runs against the built-in demo servers (the repository's
//! default servers.toml), through `planmux run`, with the outcome it documents. Plans
//! that write need approval: without a terminal or `--yes` they exit 5 and nothing runs.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// (file, expected status, exit code, whether it writes and so needs `--yes`). Every file
/// in the folder must be listed.
const EXPECTED: &[(&str, &str, i32, bool)] = &[
    ("chained-report.json", "succeeded", 0, true),
    ("conditional-alert.json", "succeeded", 0, true),
    ("cpu-check-declarative.json", "succeeded", 0, false),
    ("cpu-check.json", "succeeded", 0, false),
    ("diamond.json", "succeeded", 0, false),
    ("fail-forward.json", "partial", 2, false),
    ("fan-out.json", "succeeded", 0, false),
    ("foreach-cities.json", "succeeded", 0, false),
    ("hot-hours.json", "succeeded", 0, false),
    ("lazy-plan.json", "planned", 0, false),
    ("race.json", "succeeded", 0, false),
    ("state-slots.json", "succeeded", 0, true),
    ("weather-compare.json", "succeeded", 0, false),
    ("weather-to-file.json", "succeeded", 0, true),
];

#[test]
fn every_example_plan_runs_as_documented() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<String> = std::fs::read_dir(root.join("examples/plans"))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".json"))
        .collect();
    files.sort();
    let listed: Vec<&str> = EXPECTED.iter().map(|(f, _, _, _)| *f).collect();
    assert_eq!(
        files, listed,
        "list every example here with its expected outcome"
    );
    let sandbox = tempfile::tempdir()?;
    let config = sandbox.path().join("servers.toml");
    std::fs::copy(root.join("servers.toml"), &config)?;
    let run = |file: &str, yes: bool| -> anyhow::Result<(Value, Option<i32>)> {
        let mut command = Command::new(env!("CARGO_BIN_EXE_planmux"));
        command.args(["run", "--quiet", "--config"]).arg(&config);
        if yes {
            command.arg("--yes");
        }
        // stdin is no terminal: planmux cannot ask, and exits 5 unless --yes.
        let out = command
            .arg(root.join("examples/plans").join(file))
            .stdin(std::process::Stdio::null())
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let result: Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| anyhow::anyhow!("{file}: stdout is not JSON ({e}); stderr: {stderr}"))?;
        Ok((result, out.status.code()))
    };
    let written = sandbox.path().join("sandbox/documents/weather.txt");
    for (file, status, code, writes) in EXPECTED {
        if *writes {
            let (result, exit) = run(file, false)?;
            assert_eq!(result["status"], "needs_approval", "{file}: {result:#}");
            assert_eq!(exit, Some(5), "{file}");
            let steps = result["steps"].as_array().map_or(0, Vec::len);
            assert!(steps > 0, "{file}: no step listed for approval: {result:#}");
            assert!(!written.exists(), "{file}: something ran without approval");
        }
        let (result, exit) = run(file, *writes)?;
        assert_eq!(result["status"], *status, "{file}: {result:#}");
        assert_eq!(exit, Some(*code), "{file}");
    }
    assert!(
        written.is_file(),
        "weather-to-file wrote nothing with --yes"
    );
    // The hot-hours example returned its two selections, not the week of readings.
    let out = Command::new(env!("CARGO_BIN_EXE_planmux"))
        .args(["run", "--quiet", "--config"])
        .arg(&config)
        .arg(root.join("examples/plans/hot-hours.json"))
        .output()?;
    let result: Value = serde_json::from_slice(&out.stdout)?;
    let names: Vec<&String> = result["outputs"]
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    assert_eq!(names, ["hot_hours", "hours_read"]);
    assert!(
        result["outputs"]["hot_hours"]
            .as_array()
            .is_some_and(|h| h.iter().all(Value::is_string))
    );
    assert!(
        out.stdout.len() < 4000,
        "the readings stayed out: {} bytes",
        out.stdout.len()
    );
    // The conditional alert wrote the disk alert only: CPU is under 80 %.
    assert!(sandbox.path().join("sandbox/alerts/disk.txt").is_file());
    assert!(!sandbox.path().join("sandbox/alerts/cpu.txt").exists());
    // The lazy plan wrote nothing, and named the step that would need approval.
    assert!(!sandbox.path().join("sandbox/lisbon.json").exists());
    let (lazy, _) = run("lazy-plan.json", false)?;
    assert_eq!(lazy["needs_approval"][0]["id"], "save", "{lazy:#}");
    assert_eq!(
        lazy["schedule"]["levels"],
        serde_json::json!([["weather"], ["save"]])
    );
    // The loop's lines came back in city order.
    let (cities, _) = run("foreach-cities.json", false)?;
    let lines = cities["outputs"]["lines"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(lines.len(), 4, "{cities:#}");
    assert!(
        lines[3].as_str().is_some_and(|l| l.starts_with("Lima: ")),
        "{cities:#}"
    );
    // The state-slots example took the error path and wrote its file into the sandbox.
    assert!(sandbox.path().join("sandbox/state/lisbon.json").is_file());
    Ok(())
}

#[test]
fn validate_prints_the_schedule_and_rejects_bad_plans() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let planmux = env!("CARGO_BIN_EXE_planmux");
    let config = root.join("servers.toml");
    let ok = Command::new(planmux)
        .arg("validate")
        .arg("--config")
        .arg(&config)
        .arg(root.join("examples/plans/diamond.json"))
        .output()?;
    let text = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{text}");
    assert!(text.contains("5 steps, 4 levels"), "{text}");
    // Every example (one per seed dialect among them) validates against the demo catalog.
    for (file, _, _, _) in EXPECTED {
        let out = Command::new(planmux)
            .arg("validate")
            .arg("--config")
            .arg(&config)
            .arg(root.join("examples/plans").join(file))
            .output()?;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{file}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let mermaid = Command::new(planmux)
        .args(["validate", "--mermaid", "--config"])
        .arg(&config)
        .arg(root.join("examples/plans/diamond.json"))
        .output()?;
    let graph = String::from_utf8_lossy(&mermaid.stdout);
    assert!(graph.starts_with("flowchart"), "{graph}");
    assert!(
        graph.contains("s0 -->|after| s1") && graph.contains("a<br/>chaos__sleep"),
        "{graph}"
    );

    let dir = tempfile::tempdir()?;
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"steps": [{"id": "x", "tool": "metrics__query_metrics", "args": {"name": "${y.name}"}}]}"#,
    )?;
    let out = Command::new(planmux)
        .arg("validate")
        .arg("--config")
        .arg(&config)
        .arg(&bad)
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4));
    assert!(
        stderr.contains("metrics__query_metric"),
        "suggests the closest tool: {stderr}"
    );
    let result: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(result["status"], "invalid");
    assert!(
        result["issues"].as_array().is_some_and(|i| i.len() >= 2),
        "{result}"
    );

    // A step that needs approval but could not be shown to the user within bounds makes
    // the plan invalid, like any other problem of the plan: exit 4, the issue located.
    let mut args: serde_json::Map<String, Value> = (0..30)
        .map(|i| (format!("k{i}"), Value::String("x".repeat(150))))
        .collect();
    args.insert("path".into(), "wide.txt".into());
    args.insert("content".into(), "x".into());
    let wide = dir.path().join("wide.json");
    let plan =
        serde_json::json!({"steps": [{"id": "w", "tool": "files__write_file", "args": args}]});
    std::fs::write(&wide, plan.to_string())?;
    let out = Command::new(planmux)
        .arg("validate")
        .arg("--config")
        .arg(&config)
        .arg(&wide)
        .output()?;
    assert_eq!(out.status.code(), Some(4));
    let result: Value = serde_json::from_slice(&out.stdout)?;
    let issue = &result["issues"][0];
    assert_eq!(issue["location"], "steps[0].args", "{result}");
    assert!(
        issue.to_string().contains("cannot be shown for approval"),
        "{result}"
    );
    Ok(())
}

#[test]
fn run_writes_the_record_and_draws_the_timeline() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir()?;
    let record = dir.path().join("record.json");
    let plan = std::fs::read_to_string(root.join("examples/plans/cpu-check.json"))?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_planmux"))
        .args(["run", "-", "--timeline", "--record"])
        .arg(&record)
        .arg("--config")
        .arg(root.join("servers.toml"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    use std::io::Write;
    child
        .stdin
        .take()
        .ok_or_else(|| anyhow::anyhow!("stdin"))?
        .write_all(plan.as_bytes())?;
    let out = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("succeeded  cpu") && stderr.contains("timeline ("),
        "{stderr}"
    );
    let full: Value = serde_json::from_str(&std::fs::read_to_string(&record)?)?;
    assert_eq!(
        full["steps"][1]["args"],
        serde_json::json!({"name": "cpu_usage"})
    );
    assert_eq!(
        full["steps"][0]["output"]["metrics"][0]["name"],
        "cpu_usage"
    );
    Ok(())
}

#[test]
fn tools_and_check_report_the_default_catalog() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let planmux = env!("CARGO_BIN_EXE_planmux");
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("servers.toml");
    std::fs::copy(root.join("servers.toml"), &config)?;
    let tools = Command::new(planmux)
        .arg("tools")
        .arg("--config")
        .arg(&config)
        .output()?;
    let table = String::from_utf8_lossy(&tools.stdout);
    assert_eq!(tools.status.code(), Some(0), "{table}");
    assert!(table.starts_with("TOOL"), "{table}");
    assert!(
        table.contains("metrics__check_threshold") && table.contains("weather__get-forecast"),
        "{table}"
    );
    // Beside the servers' tools: the pipeline, with its highest step's tier, and
    // planmux's own tools.
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_default()
    };
    assert!(
        row("cpu_alert").contains("destructive  pipeline:"),
        "{table}"
    );
    assert!(row("execute_plan").contains("planmux:"), "{table}");
    assert!(row("approve_plan").contains("planmux:"), "{table}");
    assert!(
        table
            .trim_end()
            .ends_with("tools from 4 of 4 servers, 1 pipeline"),
        "{table}"
    );
    let check = Command::new(planmux)
        .arg("check")
        .arg("--config")
        .arg(&config)
        .output()?;
    let report = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{report}");
    assert!(report.contains("0 of 4 servers failed"), "{report}");
    Ok(())
}

/// What hosts launch: `planmux --config PATH`, no subcommand, serves MCP on stdio.
#[test]
fn no_subcommand_means_serve() -> anyhow::Result<()> {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("servers.toml");
    std::fs::write(&config, "[servers.m]\nbuiltin = \"metrics\"\n")?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_planmux"))
        .arg("--config")
        .arg(&config)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#
    )?;
    let mut line = String::new();
    BufReader::new(
        child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("stdout"))?,
    )
    .read_line(&mut line)?;
    let reply: Value = serde_json::from_str(&line)?;
    assert_eq!(reply["result"]["serverInfo"]["name"], "planmux", "{reply}");
    drop(stdin);
    assert!(child.wait()?.success());
    Ok(())
}

/// A broken config is one line on stderr naming the file, the section and the key, and
/// exit code 1, whatever RUST_BACKTRACE says.
#[test]
fn a_broken_config_is_one_clear_line() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("servers.toml");
    std::fs::write(&config, "[servers.x]\ncomand = \"y\"\n")?;
    for command in ["serve", "check", "tools"] {
        let out = Command::new(env!("CARGO_BIN_EXE_planmux"))
            .arg(command)
            .arg("--config")
            .arg(&config)
            .env("RUST_BACKTRACE", "1")
            .stdin(std::process::Stdio::null())
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}");
        assert_eq!(
            stderr.trim(),
            format!(
                "planmux: {}: [servers.x]: key 'comand': unknown key (did you mean 'command'?)",
                config.display()
            ),
            "{command}"
        );
        assert!(out.stdout.is_empty(), "{command}: nothing on stdout");
    }
    Ok(())
}

/// `planmux run` on a terminal lists the steps and asks; `y` runs the plan, anything else
/// exits 5 with nothing run. A plan read from stdin (`-`) is asked about on the terminal. The terminal is a pseudo-terminal from util-linux's `script`
/// (on every Debian install; this test is Linux-only, as CI is).
#[test]
fn run_asks_on_a_terminal() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sandbox = tempfile::tempdir()?;
    let config = sandbox.path().join("servers.toml");
    std::fs::copy(root.join("servers.toml"), &config)?;
    let plan = root.join("examples/plans/weather-to-file.json");
    let written = sandbox.path().join("sandbox/documents/weather.txt");
    // The plan as a file, then on stdin (the answer then comes from the terminal itself).
    for (answer, code, piped) in [
        ("n", 5, false),
        ("y", 0, false),
        ("n", 5, true),
        ("y", 0, true),
    ] {
        let _ = std::fs::remove_file(&written);
        let command = if piped {
            format!(
                "cat {} | {} run --quiet --config {} -; echo \"exit=$?\"",
                plan.display(),
                env!("CARGO_BIN_EXE_planmux"),
                config.display(),
            )
        } else {
            format!(
                "{} run --quiet --config {} {}; echo \"exit=$?\"",
                env!("CARGO_BIN_EXE_planmux"),
                config.display(),
                plan.display()
            )
        };
        let mut child = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()?;
        if let Some(stdin) = child.stdin.as_mut() {
            use std::io::Write as _;
            stdin.write_all(format!("{answer}\n").as_bytes())?;
        }
        let out = child.wait_with_output()?;
        let seen = String::from_utf8_lossy(&out.stdout);
        assert!(seen.contains("Run it? [y/N]"), "{seen}");
        assert!(
            seen.contains("step2 → files__write_file (destructive)"),
            "{seen}"
        );
        assert!(
            seen.contains(&format!("exit={code}")),
            "{answer} {piped}: {seen}"
        );
        assert_eq!(written.is_file(), answer == "y", "{answer} {piped}: {seen}");
    }
    Ok(())
}

/// deploy/ (README "Running planmux for a team"): the compose file and the Kubernetes
/// manifests each run at least two `--stateless` instances reading deploy/servers.toml,
/// on the Redis they define, behind one balancer; and that file is a valid config with the
/// environment they give it: the team front, its rate and the shared store.
#[test]
fn the_team_deployment_runs_stateless_instances_on_its_redis() -> anyhow::Result<()> {
    use planmux::config::{Config, StateStore};
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    // YAML read by PyYAML (scripts/install-interop installs python3-yaml).
    let files = [
        "compose.yaml",
        "kubernetes/planmux.yaml",
        "kubernetes/redis.yaml",
    ];
    let out = Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps([list(yaml.safe_load_all(open(f))) for f in sys.argv[1:]]))",
        ])
        .args(files.map(|f| deploy.join(f)))
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Value = serde_json::from_slice(&out.stdout)?;
    let stateless = |args: &Value| {
        let args: Vec<&str> = args
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        args.starts_with(&["serve", "--http", "0.0.0.0:8765", "--stateless"])
            && args.ends_with(&["--config", "/config/servers.toml"])
    };

    let compose = &docs[0][0]["services"];
    let instances: Vec<&str> = ["planmux-1", "planmux-2"]
        .into_iter()
        .filter(|name| stateless(&compose[name]["command"]))
        .collect();
    assert_eq!(instances.len(), 2, "{compose}");
    assert_eq!(
        compose["planmux-1"]["environment"]["PLANMUX_STATE_STORE"],
        "redis://redis:6379"
    );
    assert!(
        compose["redis"]["command"]
            .to_string()
            .contains("appendonly")
    );
    let nginx = std::fs::read_to_string(deploy.join("nginx.conf"))?;
    for name in instances {
        assert!(nginx.contains(&format!("server {name}:8765;")), "{nginx}");
    }

    let kinds = |doc: usize| -> Vec<Value> { docs[doc].as_array().cloned().unwrap_or_default() };
    let of_kind = |doc: usize, kind: &str| kinds(doc).into_iter().find(|d| d["kind"] == kind);
    let deployment = of_kind(1, "Deployment").unwrap_or_default();
    assert!(
        deployment["spec"]["replicas"].as_u64() >= Some(2),
        "{deployment}"
    );
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert!(stateless(&container["args"]), "{container}");
    let redis = of_kind(2, "Service").unwrap_or_default();
    assert_eq!(
        (
            redis["metadata"]["name"].as_str(),
            redis["spec"]["ports"][0]["port"].as_u64()
        ),
        (Some("redis"), Some(6379))
    );
    let kustomization = std::fs::read_to_string(deploy.join("kustomization.yaml"))?;
    assert!(
        kustomization.contains("name: planmux-config") && kustomization.contains("- servers.toml")
    );

    // The config, with the Deployment's environment.
    let env: std::collections::HashMap<String, String> =
        (container["env"].as_array().into_iter().flatten())
            .filter_map(|e| {
                Some((
                    e["name"].as_str()?.to_owned(),
                    e["value"].as_str()?.to_owned(),
                ))
            })
            .collect();
    let text = std::fs::read_to_string(deploy.join("servers.toml"))?;
    let config = Config::parse(&text, "deploy/servers.toml", &deploy, &|name| {
        env.get(name).cloned()
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    assert_eq!(
        config.state,
        StateStore::Redis {
            url: planmux::config::Secret("redis://redis:6379".into()),
            label: "redis://redis:6379/0".into()
        }
    );
    assert!(
        config.http.auth.is_some() && config.http.rate_limit.is_some() && !config.access.is_empty()
    );
    Ok(())
}
