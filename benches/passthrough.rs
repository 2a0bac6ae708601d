//! Passthrough overhead: the same `tools/call` straight to a downstream server and through
//! planmux, interleaved in one run so machine noise hits both alike. Prints medians, p90s
//! and the ratio planmux/direct. Also the start-up time of the default config.
//!
//! `cargo bench --bench passthrough` (`-- --quick` for a short run; `cargo test` runs it
//! quick, to check it still works).
#![allow(clippy::print_stdout)]

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_planmux");

async fn connect(command: &str, args: &[&str]) -> anyhow::Result<RunningService<RoleClient, ()>> {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()?;
    Ok(().serve(transport).await?)
}

fn echo(name: &str) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(name.to_string());
    let mut args = JsonObject::new();
    args.insert("message".into(), json!("hello from the benchmark"));
    params.arguments = Some(args);
    params
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Interleaves `calls` direct and proxied calls; prints and returns (direct, proxied) medians.
async fn compare(
    label: &str,
    direct: &RunningService<RoleClient, ()>,
    direct_tool: &str,
    proxied: &RunningService<RoleClient, ()>,
    proxied_tool: &str,
    calls: usize,
) -> anyhow::Result<()> {
    for _ in 0..calls / 5 {
        direct.call_tool(echo(direct_tool)).await?;
        proxied.call_tool(echo(proxied_tool)).await?;
    }
    let (mut d, mut p) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    for i in 0..calls {
        // Alternate which goes first, so neither always runs on a warmer machine.
        let order = if i % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for is_direct in order {
            let started = Instant::now();
            if is_direct {
                direct.call_tool(echo(direct_tool)).await?;
                d.push(started.elapsed());
            } else {
                proxied.call_tool(echo(proxied_tool)).await?;
                p.push(started.elapsed());
            }
        }
    }
    d.sort();
    p.sort();
    let (dm, pm) = (percentile(&d, 0.5), percentile(&p, 0.5));
    println!(
        "{label:<28} calls={calls:<5} direct median {:>7.1} µs p90 {:>7.1} µs | planmux median {:>7.1} µs p90 {:>7.1} µs | ratio {:.2} (+{:.0} µs)",
        micros(dm),
        micros(percentile(&d, 0.9)),
        micros(pm),
        micros(percentile(&p, 0.9)),
        pm.as_secs_f64() / dm.as_secs_f64(),
        micros(pm) - micros(dm),
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // `cargo bench` passes --bench; under `cargo test` (CI) this only checks it still runs.
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick") || !args.iter().any(|a| a == "--bench");
    let calls = if quick { 20 } else { 400 };
    let dir = std::env::temp_dir().join(format!("planmux-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("servers.toml");
    let mut toml = format!("[servers.chaos]\ncommand = \"{BIN}\"\nargs = [\"demo\", \"chaos\"]\n");
    let everything = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if everything.is_file() {
        toml += &format!(
            "[servers.everything]\ncommand = \"node\"\nargs = [\"{}\"]\n",
            everything.display()
        );
    }
    std::fs::write(&config, toml)?;

    let config_arg = config.display().to_string();
    let proxy = connect(BIN, &["serve", "--config", &config_arg]).await?;
    let chaos = connect(BIN, &["demo", "chaos"]).await?;
    compare(
        "chaos echo (stdio)",
        &chaos,
        "echo",
        &proxy,
        "chaos__echo",
        calls,
    )
    .await?;
    if everything.is_file() {
        let node = connect("node", &[&everything.display().to_string()]).await?;
        compare(
            "server-everything echo",
            &node,
            "echo",
            &proxy,
            "everything__echo",
            calls,
        )
        .await?;
        node.cancel().await?;
    } else {
        println!("server-everything: not installed (run scripts/test once to install it)");
    }
    chaos.cancel().await?;
    proxy.cancel().await?;

    // Start-up of the built-in default config: spawn to a listed catalog.
    let runs = if quick { 2 } else { 10 };
    let mut times = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        let client = connect(
            BIN,
            &[
                "serve",
                "--config",
                concat!(env!("CARGO_MANIFEST_DIR"), "/servers.toml"),
            ],
        )
        .await?;
        let tools = client.list_all_tools().await?;
        times.push(started.elapsed());
        assert!(!tools.is_empty());
        client.cancel().await?;
    }
    times.sort();
    println!(
        "default config start-up (spawn → initialize → tools/list): median {:.1} ms over {runs} runs",
        percentile(&times, 0.5).as_secs_f64() * 1000.0
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
