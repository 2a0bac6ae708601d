//! What telemetry and access rules cost, in one run. Four `planmux serve --http`
//! processes of this build, each in front of the chaos demo, reached by one rmcp
//! streamable-HTTP session each, in interleaved rounds:
//!
//! - **plain**: no `[telemetry]`, no `[[access]]`;
//! - **metrics**: `[telemetry] metrics = true`;
//! - **metrics + traces**: `[telemetry] metrics = true` and `otlp_endpoint` set to a sink
//!   in this bench that takes every export (200), so spans are made and sent (a
//!   session's calls then take rmcp's typed path, which makes their spans, not the
//!   passthrough);
//! - **access rules**: 32 `[[access]]` rules, the caller matched by the last (`"*"`).
//!
//! Each round makes `calls` direct calls of `chaos__echo` and `plans` three-step plans on
//! each server; the table gives each server's median latency and its ratio to plain.
//! Then the cost of the recording points with telemetry off (as in this process, where
//! it is never turned on): nanoseconds per call, beside a plain call's median; and what
//! the console keeps while nobody looks at it (each decision's line, each plan listed as
//! running), beside a call's and a plan's medians.
//! `cargo bench --features bench --bench telemetry` runs it in full; under `cargo test`
//! (and with `-- --quick`) it runs fewer calls.
#![allow(clippy::print_stdout)]

#[path = "common/peers.rs"]
mod peers;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use peers::{Process, free_port, ready};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;

/// The bench's own binary.
const BIN: &str = env!("CARGO_BIN_EXE_planmux");

/// A server under test: its name and what its servers.toml adds to the chaos demo.
struct Arm {
    name: &'static str,
    config: String,
}

/// An OTLP/HTTP collector stand-in that takes every request and answers 200, empty.
fn sink() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || take_all(stream));
        }
    });
    Ok(port)
}

/// Reads each request on `stream` (headers, then the body its length says) and answers it.
fn take_all(stream: std::net::TcpStream) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(value) = lower.strip_prefix("content-length:") {
                length = value.trim().parse().unwrap_or(0);
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let answer =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(answer).is_err() {
            return;
        }
    }
}

/// Starts `arm`'s server; the process (dropped: stopped) and its address.
fn start(arm: &Arm, dir: &std::path::Path) -> anyhow::Result<(Process, SocketAddr)> {
    let port = free_port()?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let config = dir.join(format!("{}.toml", arm.name.replace(' ', "-")));
    std::fs::write(
        &config,
        format!("{}\n[servers.chaos]\nbuiltin = \"chaos\"\n", arm.config),
    )?;
    let mut command = std::process::Command::new(BIN);
    command
        .args(["serve", "--http", &addr.to_string(), "--config"])
        .arg(&config)
        .env_remove("PLANMUX_CONFIG");
    let mut process = Process::spawn(
        command,
        &format!("telemetry-{}", arm.name.replace(' ', "-")),
    )?;
    process.wait_for_port(addr)?;
    Ok((process, addr))
}

/// The median of `values` (sorted in place).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick") || !args.iter().any(|a| a == "--bench");
    let (rounds, calls, plans) = if quick { (3, 30, 5) } else { (10, 300, 50) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let sink = sink()?;
    let rules: String = (0..31)
        .map(|n| format!("[[access]]\nwho = [\"sub:someone-{n}\"]\ntools = [\"chaos__count\"]\n"))
        .chain(std::iter::once(
            "[[access]]\nwho = [\"*\"]\ntools = [\"*\"]\n".to_owned(),
        ))
        .collect();
    let arms = [
        Arm {
            name: "plain",
            config: String::new(),
        },
        Arm {
            name: "metrics",
            config: "[telemetry]\nmetrics = true\n".to_owned(),
        },
        Arm {
            name: "metrics + traces",
            config: format!(
                "[telemetry]\nmetrics = true\notlp_endpoint = \"http://127.0.0.1:{sink}\"\n"
            ),
        },
        Arm {
            name: "access rules (32)",
            config: rules,
        },
    ];
    let dir = tempfile::tempdir()?;
    let mut running = Vec::new();
    for arm in &arms {
        let (process, addr) = start(arm, dir.path())?;
        runtime.block_on(ready(addr))?;
        running.push((process, addr));
    }
    let sessions = runtime.block_on(async {
        let mut sessions = Vec::new();
        for (_, addr) in &running {
            let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
            let session = ().serve(transport).await?;
            session.list_all_tools().await?;
            sessions.push(session);
        }
        anyhow::Ok(sessions)
    })?;
    let plan = json!({"steps": [
        {"id": "a", "tool": "chaos__echo", "args": {"n": 1}},
        {"id": "b", "tool": "chaos__echo", "args": {"after": "$ref:a"}},
        {"id": "c", "tool": "chaos__echo", "args": {"after": "$ref:b"}}]});
    let mut direct = vec![Vec::new(); arms.len()];
    let mut planned = vec![Vec::new(); arms.len()];
    runtime.block_on(async {
        for _ in 0..rounds {
            for (i, session) in sessions.iter().enumerate() {
                for n in 0..calls {
                    let mut params = CallToolRequestParams::new("chaos__echo");
                    params.arguments = json!({"n": n}).as_object().cloned();
                    let started = Instant::now();
                    session.call_tool(params).await?;
                    direct[i].push(started.elapsed().as_secs_f64() * 1e3);
                }
                for _ in 0..plans {
                    let mut params = CallToolRequestParams::new("execute_plan");
                    params.arguments = plan.as_object().cloned();
                    let started = Instant::now();
                    session.call_tool(params).await?;
                    planned[i].push(started.elapsed().as_secs_f64() * 1e3);
                }
            }
        }
        anyhow::Ok(())
    })?;
    println!(
        "Telemetry and access rules: {rounds} interleaved rounds of {calls} calls and {plans} three-step plans per server\n"
    );
    println!("| server | call median ms | vs plain | plan median ms | vs plain |");
    println!("| --- | --- | --- | --- | --- |");
    let plain = (
        median(&mut direct[0].clone()),
        median(&mut planned[0].clone()),
    );
    for (i, arm) in arms.iter().enumerate() {
        let (call, plan) = (median(&mut direct[i]), median(&mut planned[i]));
        println!(
            "| {} | {call:.3} | {:.3}× | {plan:.3} | {:.3}× |",
            arm.name,
            call / plain.0,
            plan / plain.1
        );
    }
    // The recording points with telemetry off, as every call and plan step passes them.
    let times = if quick { 1_000_000 } else { 20_000_000 };
    let started = Instant::now();
    for n in 0..times {
        planmux::metrics::call_ended("chaos", "echo", Duration::from_nanos(n), false);
        std::hint::black_box(planmux::traces::outgoing(String::new(), Vec::new()));
    }
    let per_call_ns = started.elapsed().as_secs_f64() * 1e9 / times as f64;
    println!(
        "\nWith telemetry off, a call's recording points (metrics and a span) cost {per_call_ns:.1} ns: {:.6}× a plain call's median",
        per_call_ns / (plain.0 * 1e6)
    );
    console_bookkeeping(&runtime, times, plain)?;
    runtime.block_on(async {
        for session in sessions {
            let _ = session.cancel().await;
        }
    });
    drop(running);
    Ok(())
}

/// What the console keeps while nobody looks at it, measured in this process: each
/// checkpoint decision (its line kept in memory for the audit page, with everything else
/// a decision does), and each plan listed as running (its steps noted as they start),
/// beside a plain call's and plan's medians (`plain`, ms).
fn console_bookkeeping(
    runtime: &tokio::runtime::Runtime,
    times: u64,
    plain: (f64, f64),
) -> anyhow::Result<()> {
    use planmux::policy::{Grant, Policy, Route, Tier};
    let policy = Policy::default();
    let grant = Grant::all();
    let started = Instant::now();
    for _ in 0..times {
        let proof = policy.authorize(
            "chaos__echo",
            Some(Tier::Read),
            None,
            &Route::Direct,
            &grant,
        );
        std::hint::black_box(proof.is_ok());
    }
    let per_decision_ns = started.elapsed().as_secs_f64() * 1e9 / times as f64;
    println!(
        "A checkpoint decision, its line kept for the console's audit page included, costs {per_decision_ns:.1} ns: {:.6}× a plain call's median",
        per_decision_ns / (plain.0 * 1e6)
    );
    let config = planmux::config::Config::parse(
        "[servers.chaos]\nbuiltin = \"chaos\"\n",
        "bench",
        &std::env::temp_dir(),
        &|_| None,
    )?;
    let plan = json!({"steps": [
        {"id": "a", "tool": "chaos__echo", "args": {"n": 1}},
        {"id": "b", "tool": "chaos__echo", "args": {"n": 2}},
        {"id": "c", "tool": "chaos__echo", "args": {"a": "${a.n}", "b": "${b.n}"}},
    ]});
    let (downstreams, validated) = runtime.block_on(async {
        let downstreams =
            planmux::downstream::Downstreams::start(&config, std::sync::Arc::default()).await;
        let runner = planmux::runner::PlanRunner::new(downstreams.clone(), &config);
        let validated = runner.validate(&plan);
        (downstreams, validated.map(|v| (runner, v)))
    });
    let Ok((runner, validated)) = validated else {
        anyhow::bail!("the bench's plan did not validate");
    };
    let plans = times / 10;
    let started = Instant::now();
    for _ in 0..plans {
        let watching = runner.live.watch(&validated, &planmux::exec::Quiet);
        for step in validated.steps() {
            planmux::exec::Observer::step_started(&watching, step);
        }
        std::hint::black_box(&watching);
    }
    let per_plan_ns = started.elapsed().as_secs_f64() * 1e9 / plans as f64;
    println!(
        "A three-step plan listed as running for the console's runs page costs {per_plan_ns:.1} ns: {:.6}× a plain plan's median",
        per_plan_ns / (plain.1 * 1e6)
    );
    runtime.block_on(downstreams.shutdown());
    Ok(())
}
