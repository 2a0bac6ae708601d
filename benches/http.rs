//! The HTTP front under load, in one run: 1, 10 and 100 concurrent sessions (each an rmcp
//! streamable-HTTP client) calling the chaos demo's `echo`,
//!
//! - **direct**: the chaos demo served over HTTP by rmcp itself, the floor;
//! - **planmux, current-thread**: `planmux::http::serve_http` in front of the same demo
//!   (in-process), on a one-thread runtime (what `planmux serve` uses);
//! - **planmux, multi-thread**: the same on a two-worker runtime.
//!
//! Each server runs on its own OS thread and runtime; the clients run on another. Prints
//! calls per second and the median and 90th percentile latency per call, and writes
//! target/bench/http.json. `cargo bench --bench http` runs it in full; under `cargo test`
//! (and with `-- --quick`) it runs fewer calls.
#![allow(clippy::print_stdout)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use planmux::config::Config;
use planmux::demo::{DemoKind, DemoServer};
use planmux::http::{HttpOptions, serve_http};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

#[derive(Clone, Copy, PartialEq)]
enum Arm {
    Direct,
    CurrentThread,
    MultiThread,
}

impl Arm {
    fn name(self) -> &'static str {
        match self {
            Arm::Direct => "direct (rmcp serving the demo)",
            Arm::CurrentThread => "planmux, current-thread",
            Arm::MultiThread => "planmux, multi-thread",
        }
    }
}

/// Starts the arm's server on its own thread; its address and the switch that stops it.
fn start(arm: Arm) -> anyhow::Result<(SocketAddr, tokio::sync::oneshot::Sender<()>)> {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let runtime = match arm {
            Arm::MultiThread => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build(),
            _ => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build(),
        };
        let Ok(runtime) = runtime else { return };
        runtime.block_on(async move {
            if arm == Arm::Direct {
                let factory = || {
                    Arc::into_inner(DemoServer::new(DemoKind::Chaos, None))
                        .ok_or_else(|| std::io::Error::other("the demo server is shared"))
                };
                let service = StreamableHttpService::new(
                    factory,
                    Arc::new(LocalSessionManager::default()),
                    StreamableHttpServerConfig::default(),
                );
                let Ok(listener) = tokio::net::TcpListener::bind("127.0.0.1:0").await else {
                    return;
                };
                let _ = addr_tx.send(listener.local_addr().ok());
                let serving = async {
                    loop {
                        let Ok((stream, _)) = listener.accept().await else {
                            continue;
                        };
                        let _ = stream.set_nodelay(true);
                        let service = service.clone();
                        tokio::spawn(async move {
                            let service = hyper_util::service::TowerToHyperService::new(service);
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                                .await;
                        });
                    }
                };
                tokio::select! {
                    () = serving => {}
                    _ = stop_rx => {}
                }
            } else {
                let dir = std::env::temp_dir();
                let Ok(config) = Config::parse(
                    "[servers.chaos]\nbuiltin = \"chaos\"\n",
                    "bench",
                    &dir,
                    &|_| None,
                ) else {
                    return;
                };
                let options = HttpOptions {
                    addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                    stateless: false,
                };
                let ready = |addr| {
                    let _ = addr_tx.send(Some(addr));
                };
                let _ = serve_http(&config, options, ready, async {
                    let _ = stop_rx.await;
                })
                .await;
            }
        });
    });
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(30))
        .ok()
        .flatten()
        .context("the server did not start")?;
    Ok((addr, stop_tx))
}

/// `clients` sessions, each making `calls` echo calls one after another: calls per
/// second over all of them, and every call's latency.
async fn load(
    addr: SocketAddr,
    tool: &'static str,
    clients: usize,
    calls: usize,
) -> anyhow::Result<(f64, Vec<f64>)> {
    let url = format!("http://{addr}/mcp");
    let mut sessions = Vec::new();
    for _ in 0..clients {
        let transport = StreamableHttpClientTransport::from_uri(url.clone());
        sessions.push(().serve(transport).await?);
    }
    // Each session's tools are listed once, as a host does before calling.
    for session in &sessions {
        session.list_all_tools().await?;
    }
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for session in sessions {
        tasks.spawn(async move {
            let mut latencies = Vec::with_capacity(calls);
            for i in 0..calls {
                let mut params = CallToolRequestParams::new(tool);
                params.arguments = json!({"i": i}).as_object().cloned();
                let t = Instant::now();
                session.call_tool(params).await?;
                latencies.push(t.elapsed().as_secs_f64() * 1e3);
            }
            let _ = session.cancel().await;
            anyhow::Ok(latencies)
        });
    }
    let mut latencies = Vec::new();
    while let Some(done) = tasks.join_next().await {
        latencies.extend(done??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok((latencies.len() as f64 / elapsed, latencies))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick") || !args.iter().any(|a| a == "--bench");
    let total = if quick { 200 } else { 3_000 };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    println!("HTTP front under load: chaos__echo, {total} calls per row\n");
    println!("| server | sessions | calls/s | median ms | p90 ms |");
    println!("| --- | --- | --- | --- | --- |");
    let mut rows = Vec::new();
    let mut direct = std::collections::HashMap::new();
    for clients in [1, 10, 100] {
        for arm in [Arm::Direct, Arm::CurrentThread, Arm::MultiThread] {
            let (addr, stop) = start(arm)?;
            // The same tool: named by the demo itself, or as planmux exports it.
            let tool = if arm == Arm::Direct {
                "echo"
            } else {
                "chaos__echo"
            };
            let (rate, mut latencies) =
                runtime.block_on(load(addr, tool, clients, (total / clients).max(1)))?;
            let _ = stop.send(());
            latencies.sort_by(f64::total_cmp);
            let (p50, p90) = (percentile(&latencies, 0.5), percentile(&latencies, 0.9));
            if arm == Arm::Direct {
                direct.insert(clients, rate);
            }
            let vs = direct
                .get(&clients)
                .filter(|_| arm != Arm::Direct)
                .map(|d| format!(" ({:.2}× direct)", rate / d))
                .unwrap_or_default();
            println!(
                "| {} | {clients} | {rate:.0}{vs} | {p50:.2} | {p90:.2} |",
                arm.name()
            );
            rows.push(
                json!({"server": arm.name(), "sessions": clients, "calls_per_s": rate,
                              "median_ms": p50, "p90_ms": p90}),
            );
        }
    }
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("http.json"), serde_json::to_string_pretty(&rows)?)?;
    Ok(())
}
