//! The front door, before and after remembering (DESIGN §17): how long a host waits for
//! `initialize` and its first `tools/list` from a fresh `planmux serve`, with nothing
//! remembered (`PLANMUX_CACHE_DIR` empty: as before the lists were kept) and with what
//! each server listed when it last started; and `planmux run` of a one-step plan, which
//! starts only the server it names, against `planmux check`, which starts them all.
//! Every figure comes from the same run, so the ratios hold on a noisy machine.
//!
//! `cargo bench --features bench --bench startup` runs it against the real servers that
//! scripts/install-interop installs (server-filesystem and server-everything from npm,
//! the time, git and SQLite servers from PyPI), 5 rounds each. `-- --quick` (and
//! `cargo test`) runs one round against two of this build's demos, started one and two
//! seconds late by `sh`.
#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_planmux");

/// A config of the real servers, or `None` when they are not installed.
fn real_servers(dir: &Path) -> Option<String> {
    let interop = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop");
    let program = |venv: &str, name: &str| interop.join(venv).join("bin").join(name);
    let npm = |package: &str| {
        interop
            .join("node_modules")
            .join(package)
            .join("dist/index.js")
    };
    let needed = [
        program(".venv-servers", "mcp-server-time"),
        program(".venv-servers", "mcp-server-git"),
        program(".venv-sqlite", "mcp-server-sqlite"),
        npm("@modelcontextprotocol/server-filesystem"),
        npm("@modelcontextprotocol/server-everything"),
    ];
    if let Some(missing) = needed.iter().find(|p| !p.exists()) {
        println!(
            "{} is missing: run scripts/install-interop",
            missing.display()
        );
        return None;
    }
    let [time, git, sqlite, fs, everything] = needed.map(|p| p.display().to_string());
    let dir = dir.display();
    Some(format!(
        "[proxy]\nsurface = \"full\"\n\
         [servers.time]\ncommand = \"{time}\"\n\
         [servers.git]\ncommand = \"{git}\"\n\
         [servers.sqlite]\ncommand = \"{sqlite}\"\nargs = [\"--db-path\", \"{dir}/db.sqlite\"]\n\
         [servers.fs]\ncommand = \"node\"\nargs = [\"{fs}\", \"{dir}\"]\n\
         [servers.everything]\ncommand = \"node\"\nargs = [\"{everything}\"]\n"
    ))
}

/// Two of this build's demos, started one and two seconds late.
fn late_demos() -> String {
    let late = |name: &str, demo: &str, seconds: u32| {
        format!(
            "[servers.{name}]\ncommand = \"sh\"\nargs = [\"-c\", \"sleep {seconds}; exec '{BIN}' demo {demo}\"]\n"
        )
    };
    format!(
        "[proxy]\nsurface = \"full\"\n{}{}",
        late("time", "weather", 1),
        late("metrics", "metrics", 2)
    )
}

/// A fresh `planmux serve`: how long until `initialize` was answered, and until the first
/// `tools/list` was, and how many tools that list had.
fn front(config: &Path, cache: &str) -> anyhow::Result<(Duration, Duration, usize)> {
    let began = Instant::now();
    let mut child = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(config)
        .env("PLANMUX_CACHE_DIR", cache)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdin"))?;
    let mut stdout = BufReader::new(
        child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?,
    );
    let mut answer = |id: u64| -> anyhow::Result<Value> {
        let mut line = String::new();
        loop {
            line.clear();
            anyhow::ensure!(stdout.read_line(&mut line)? > 0, "planmux hung up");
            let message: Value = serde_json::from_str(&line)?;
            if message["id"] == id {
                return Ok(message);
            }
        }
    };
    // Claude Desktop reads the list once: it is the host that waits longest.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "claude-ai", "version": "1"}}});
    writeln!(stdin, "{init}")?;
    answer(1)?;
    let initialized = began.elapsed();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )?;
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    )?;
    let tools = answer(2)?["result"]["tools"].as_array().map_or(0, Vec::len);
    let listed = began.elapsed();
    drop(stdin);
    child.wait()?;
    Ok((initialized, listed, tools))
}

/// How long a planmux command on `config` took.
fn command(args: &[&str], config: &Path, cache: &str) -> anyhow::Result<Duration> {
    let began = Instant::now();
    let out = Command::new(BIN)
        .args(args)
        .arg("--config")
        .arg(config)
        .env("PLANMUX_CACHE_DIR", cache)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(began.elapsed())
}

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes --bench; `cargo test` does not, and gets the quick run.
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick") || !args.iter().any(|a| a == "--bench");
    let dir = tempfile::tempdir()?;
    let config_text = if quick {
        late_demos()
    } else {
        real_servers(dir.path()).unwrap_or_else(late_demos)
    };
    let config = dir.path().join("servers.toml");
    std::fs::write(&config, config_text)?;
    let cache = dir.path().join("cache").display().to_string();
    let rounds = if quick { 1 } else { 5 };

    front(&config, &cache)?; // the first start: what the servers list is remembered
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    let mut tools = (0, 0);
    for _ in 0..rounds {
        let (i, l, n) = front(&config, "")?;
        cold.push((i, l));
        tools.0 = n;
        let (i, l, n) = front(&config, &cache)?;
        warm.push((i, l));
        tools.1 = n;
    }
    let pick = |runs: &[(Duration, Duration)], second: bool| {
        median(
            runs.iter()
                .map(|r| if second { r.1 } else { r.0 })
                .collect(),
        )
    };
    println!(
        "| a fresh planmux serve ({} rounds, median) | initialize | first tools/list | tools listed |",
        rounds
    );
    println!("| --- | --- | --- | --- |");
    println!(
        "| nothing remembered | {} | {} | {} |",
        ms(pick(&cold, false)),
        ms(pick(&cold, true)),
        tools.0
    );
    println!(
        "| remembered from the last start | {} | {} | {} |",
        ms(pick(&warm, false)),
        ms(pick(&warm, true)),
        tools.1
    );
    let ratio = pick(&warm, true).as_secs_f64() / pick(&cold, true).as_secs_f64();
    println!("\nfirst tools/list, remembered / nothing remembered: **{ratio:.3}**");

    let tool = if quick {
        "time__get_weather"
    } else {
        "time__get_current_time"
    };
    let args = if quick {
        json!({"location": "Lima"})
    } else {
        json!({"timezone": "UTC"})
    };
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        json!({"steps": [{"id": "t", "tool": tool, "args": args}]}).to_string(),
    )?;
    let plan_arg = plan.display().to_string();
    let mut run = Vec::new();
    let mut check = Vec::new();
    for _ in 0..rounds {
        run.push(command(&["run", "--quiet", &plan_arg], &config, &cache)?);
        check.push(command(&["check"], &config, &cache)?);
    }
    let (run, check) = (median(run), median(check));
    println!("\n| command ({rounds} rounds, median) | took |\n| --- | --- |");
    println!(
        "| planmux run of a one-step plan (starts its one server) | {} |",
        ms(run)
    );
    println!("| planmux check (starts every server) | {} |", ms(check));
    println!(
        "\nrun / check: **{:.3}**",
        run.as_secs_f64() / check.as_secs_f64()
    );
    Ok(())
}
