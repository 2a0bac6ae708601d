//! The HTTP front under load, in one run: 1, 10 and 100 concurrent sessions (each an rmcp
//! streamable-HTTP client) calling the chaos demo's `echo`,
//!
//! - **direct**: the chaos demo served over HTTP by rmcp itself, the floor;
//! - **planmux, current-thread**: `planmux::http::serve_http` in front of the same demo
//!   (in-process), on a one-thread runtime (what `planmux serve` uses);
//! - **planmux, multi-thread**: the same on a two-worker runtime;
//! - **peers**: two stdio→streamable-HTTP gateways from npm in front of the same demo, run
//!   as this bench's binary over stdio (`planmux demo chaos`): supergateway (one child per
//!   session) and mcp-proxy (one shared child, as planmux). They are pinned in
//!   tests/interop/package.json and installed by scripts/install-interop; when one is not
//!   installed, or does not start, its rows say it was skipped and the rest still run.
//!
//! Each in-process server runs on its own OS thread and runtime, each peer in its own
//! process; the clients run on another thread. Prints calls per second (for the in-process
//! servers, the median of three interleaved rounds) and the median and 90th percentile
//! latency per call; then direct and planmux (one thread) at a fixed rate
//! over 32 sessions (agentgateway's method), their p50 and p99 counted from when each call
//! was due. Writes target/bench/http.json (a peer's output
//! goes to target/bench/http-<peer>.log). `cargo bench --features bench --bench http` runs
//! it in full; under `cargo test` (and with `-- --quick`) it runs fewer calls; `-- --no-peers`
//! leaves the peers out.
#![allow(clippy::print_stdout)]

#[path = "common/peers.rs"]
mod peers;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use peers::{Process, free_port, interop_dir, out_dir, ready};
use planmux::config::Config;
use planmux::demo::{DemoKind, DemoServer};
use planmux::http::{HttpOptions, serve_http};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

/// The bench's own binary: the peers serve its chaos demo over stdio.
const BIN: &str = env!("CARGO_BIN_EXE_planmux");

/// One server under test; a row of the table per arm and session count.
#[derive(Clone, Copy, PartialEq)]
enum Arm {
    Direct,
    CurrentThread,
    MultiThread,
    Peer(Peer),
}

impl Arm {
    /// The server column of the table and of http.json.
    fn name(self) -> &'static str {
        match self {
            Arm::Direct => "direct (rmcp serving the demo)",
            Arm::CurrentThread => "planmux, current-thread",
            Arm::MultiThread => "planmux, multi-thread",
            Arm::Peer(Peer::Supergateway) => "supergateway (a child per session)",
            Arm::Peer(Peer::McpProxy) => "mcp-proxy (one shared child)",
        }
    }

    /// The same tool: named by the demo itself (direct, and the peers, which pass names
    /// through), or as planmux exports it.
    fn tool(self) -> &'static str {
        match self {
            Arm::CurrentThread | Arm::MultiThread => "chaos__echo",
            Arm::Direct | Arm::Peer(_) => "echo",
        }
    }
}

/// A peer stdio→streamable-HTTP gateway from npm: the best-known and the most used of those
/// that install here and serve streamable HTTP to the rmcp client (1MCP is not in the
/// registry here; mcp-hub serves legacy SSE only).
#[derive(Clone, Copy, PartialEq)]
enum Peer {
    /// supergateway: with `--stateful` it spawns **one child per MCP session** (100
    /// planmux processes at 100 sessions), so it is not a shared-downstream proxy;
    /// stateless, it would spawn a child per request.
    Supergateway,
    /// mcp-proxy (punkpeye): one stdio client to one shared child, many HTTP sessions over
    /// it, like planmux's HTTP front.
    McpProxy,
}

impl Peer {
    /// In the order their rows appear.
    const ALL: [Peer; 2] = [Peer::Supergateway, Peer::McpProxy];

    /// The npm package, which is also the name of its binary.
    fn package(self) -> &'static str {
        match self {
            Peer::Supergateway => "supergateway",
            Peer::McpProxy => "mcp-proxy",
        }
    }

    /// Its binary, as npm links it.
    fn bin(self) -> PathBuf {
        interop_dir().join("node_modules/.bin").join(self.package())
    }

    /// The installed version, from its package.json; `None` when it is not installed.
    fn version(self) -> Option<String> {
        let manifest = interop_dir()
            .join("node_modules")
            .join(self.package())
            .join("package.json");
        let text = std::fs::read_to_string(manifest).ok()?;
        let json: serde_json::Value = serde_json::from_str(&text).ok()?;
        json.get("version")?.as_str().map(str::to_string)
    }

    /// Its command line: serve `BIN demo chaos` (stdio) over streamable HTTP at
    /// `http://127.0.0.1:port/mcp`, quietly.
    fn args(self, port: u16) -> Vec<String> {
        let port = port.to_string();
        let child = format!("'{}' demo chaos", BIN.replace('\'', r"'\''"));
        let words = match self {
            // `--stdio` takes one string, run through a shell. There is no `--host`: it
            // listens on every interface.
            Peer::Supergateway => vec![
                "--stdio",
                child.as_str(),
                "--outputTransport",
                "streamableHttp",
                "--port",
                port.as_str(),
                "--stateful",
                "--logLevel",
                "none",
            ],
            // `--server stream` drops the legacy /sse endpoint; `--no-eventStore` drops the
            // resumability buffer (on by default), which costs time per message and which
            // no client here uses.
            Peer::McpProxy => vec![
                "--host",
                "127.0.0.1",
                "--port",
                port.as_str(),
                "--server",
                "stream",
                "--no-eventStore",
                "--",
                BIN,
                "demo",
                "chaos",
            ],
        };
        words.into_iter().map(String::from).collect()
    }
}

/// The peers that are installed, saying why each other one is skipped: the bench still
/// runs without them.
fn installed_peers() -> Vec<Peer> {
    Peer::ALL
        .into_iter()
        .filter(|peer| match peer.version().filter(|_| peer.bin().is_file()) {
            Some(version) => {
                println!("peer: {} {version} ({})", peer.package(), peer.bin().display());
                true
            }
            None => {
                println!(
                    "peer {}: skipped, not installed ({} is missing; scripts/install-interop installs it)",
                    peer.package(),
                    peer.bin().display()
                );
                false
            }
        })
        .collect()
}

/// Starts an in-process arm's server on its own thread; its address and the switch that
/// stops it (sending on it, or dropping it).
fn start(arm: Arm) -> anyhow::Result<(SocketAddr, tokio::sync::oneshot::Sender<()>)> {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // Named, so a profile tells the servers' threads apart from the clients'.
    let name = match arm {
        Arm::Direct => "direct",
        _ => "planmux",
    };
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
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
                                let service =
                                    hyper_util::service::TowerToHyperService::new(service);
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
    spawned.context("the server's thread did not start")?;
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(30))
        .ok()
        .flatten()
        .context("the server did not start")?;
    Ok((addr, stop_tx))
}

/// A server under test, stopped when dropped.
enum Running {
    /// In this process, on its own thread.
    InProcess {
        addr: SocketAddr,
        /// Dropping it stops the server.
        _stop: tokio::sync::oneshot::Sender<()>,
    },
    /// A peer gateway, and where it listens.
    Peer {
        /// Dropping it stops the gateway and its children.
        _process: Process,
        addr: SocketAddr,
    },
}

impl Running {
    /// Starts the arm's server and returns once it completes an MCP session.
    fn start(runtime: &tokio::runtime::Runtime, arm: Arm) -> anyhow::Result<Self> {
        match arm {
            Arm::Peer(peer) => {
                let port = free_port()?;
                let mut command = std::process::Command::new(peer.bin());
                command.args(peer.args(port));
                let log = format!("http-{}", peer.package());
                let mut gateway = Process::spawn(command, &log)?;
                let addr = SocketAddr::from(([127, 0, 0, 1], port));
                // On an error the gateway is dropped here, which stops it.
                gateway.wait_for_port(addr)?;
                runtime.block_on(ready(addr))?;
                Ok(Running::Peer {
                    _process: gateway,
                    addr,
                })
            }
            _ => {
                let (addr, stop) = start(arm)?;
                Ok(Running::InProcess { addr, _stop: stop })
            }
        }
    }

    /// Where its clients connect (at /mcp).
    fn addr(&self) -> SocketAddr {
        match self {
            Running::InProcess { addr, .. } => *addr,
            Running::Peer { addr, .. } => *addr,
        }
    }
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

/// Calls at a fixed rate (`qps` in all, for `seconds`) spread over `connections` sessions,
/// as agentgateway measures: each call's latency counted from when it was due, so a
/// server that falls behind is charged for the wait. The sorted latencies, in ms.
async fn at_rate(
    addr: SocketAddr,
    tool: &'static str,
    connections: usize,
    qps: u32,
    seconds: u32,
) -> anyhow::Result<Vec<f64>> {
    let url = format!("http://{addr}/mcp");
    let mut sessions = Vec::new();
    for _ in 0..connections {
        let transport = StreamableHttpClientTransport::from_uri(url.clone());
        let session = ().serve(transport).await?;
        session.list_all_tools().await?;
        sessions.push(Arc::new(session));
    }
    let period = Duration::from_secs(1) / qps;
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..(qps * seconds) as usize {
        let due = ticks.tick().await;
        let session = sessions[i % connections].clone();
        calls.spawn(async move {
            let mut params = CallToolRequestParams::new(tool);
            params.arguments = json!({"i": i}).as_object().cloned();
            session.call_tool(params).await?;
            anyhow::Ok(due.elapsed().as_secs_f64() * 1e3)
        });
    }
    let mut latencies = Vec::new();
    while let Some(done) = calls.join_next().await {
        latencies.push(done??);
    }
    for session in sessions {
        if let Some(session) = Arc::into_inner(session) {
            let _ = session.cancel().await;
        }
    }
    latencies.sort_by(f64::total_cmp);
    Ok(latencies)
}

/// The `p` quantile of sorted latencies, by nearest rank.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

/// One row: starts the arm's server, runs `clients` sessions of `calls` calls each
/// against it, stops it. Calls per second and the sorted latencies.
fn measure(
    runtime: &tokio::runtime::Runtime,
    arm: Arm,
    clients: usize,
    calls: usize,
) -> anyhow::Result<(f64, Vec<f64>)> {
    let server = Running::start(runtime, arm)?;
    let loading = load(server.addr(), arm.tool(), clients, calls);
    let (rate, mut latencies) = runtime.block_on(loading)?;
    // Stopped before the next row starts, so no row shares the machine with another server.
    drop(server);
    latencies.sort_by(f64::total_cmp);
    Ok((rate, latencies))
}

/// Runs the rows, interleaved by session count (direct, planmux, then the installed peers
/// for 1 session, then for 10, …; the in-process servers in three rounds), prints the
/// table and writes http.json. The quick mode (`cargo test`, `-- --quick`) runs every row
/// once with fewer calls, the peers' included.
fn main() -> anyhow::Result<()> {
    // rmcp's reqwest client needs a TLS provider, as the binary's (src/main.rs).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick") || !args.iter().any(|a| a == "--bench");
    let total = if quick { 200 } else { 10_000 };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    println!("HTTP front under load: the chaos demo's echo, {total} calls per row\n");
    // `-- --no-peers`: planmux and direct only (the peers take most of the run).
    let peers = match args.iter().any(|a| a == "--no-peers") {
        true => Vec::new(),
        false => installed_peers(),
    };
    let peers = peers.into_iter().map(Arm::Peer);
    let arms: Vec<Arm> = [Arm::Direct, Arm::CurrentThread, Arm::MultiThread]
        .into_iter()
        .chain(peers)
        .collect();
    println!("\n| server | sessions | calls/s | median ms | p90 ms |");
    println!("| --- | --- | --- | --- | --- |");
    let mut rows = Vec::new();
    let mut direct = std::collections::HashMap::new();
    // The in-process arms run `rounds` times, interleaved (direct, planmux, … then again),
    // and each row gives the median round's calls per second: one round of a row lasts
    // about a second, shorter than this machine's swings. The peers run once.
    let rounds = if quick { 1 } else { 3 };
    for clients in [1, 10, 100] {
        let calls = (total / clients).max(1);
        let mut measured: Vec<(Arm, Vec<f64>, Vec<f64>)> = arms
            .iter()
            .map(|&arm| (arm, Vec::new(), Vec::new()))
            .collect();
        for round in 0..rounds {
            for (arm, rates, latencies) in &mut measured {
                let peer = matches!(arm, Arm::Peer(_));
                if peer && round > 0 {
                    continue;
                }
                match measure(&runtime, *arm, clients, calls) {
                    Ok((rate, mut more)) => {
                        rates.push(rate);
                        latencies.append(&mut more);
                    }
                    // A peer is software nobody here wrote: its failure skips its row only.
                    Err(e) if peer => {
                        println!("| {} | {clients} | skipped: {e:#} | – | – |", arm.name());
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        for (arm, mut rates, mut latencies) in measured {
            if rates.is_empty() {
                continue;
            }
            rates.sort_by(f64::total_cmp);
            let rate = rates[rates.len() / 2];
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
            let all: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
            rows.push(
                json!({"server": arm.name(), "sessions": clients, "calls_per_s": rate,
                       "rounds_calls_per_s": all, "median_ms": p50, "p90_ms": p90}),
            );
        }
    }
    // p50 and p99 at a fixed rate over 32 connections, planmux beside direct.
    let (qps, seconds) = if quick { (200, 1) } else { (1_000, 10) };
    println!("\nAt a fixed rate: {qps} calls/s over 32 sessions for {seconds} s\n");
    println!("| server | p50 ms | p99 ms |");
    println!("| --- | --- | --- |");
    let mut direct_at_rate = None;
    for arm in [Arm::Direct, Arm::CurrentThread] {
        let server = Running::start(&runtime, arm)?;
        let latencies = runtime.block_on(at_rate(server.addr(), arm.tool(), 32, qps, seconds))?;
        drop(server);
        let (p50, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
        let vs = direct_at_rate
            .map(|(d50, d99): (f64, f64)| {
                format!(" ({:.2}×) | {p99:.2} ({:.2}×)", p50 / d50, p99 / d99)
            })
            .unwrap_or_else(|| format!(" | {p99:.2}"));
        println!("| {} | {p50:.2}{vs} |", arm.name());
        if arm == Arm::Direct {
            direct_at_rate = Some((p50, p99));
        }
        rows.push(
            json!({"server": arm.name(), "sessions": 32, "fixed_qps": qps,
                         "p50_ms": p50, "p99_ms": p99}),
        );
    }
    std::fs::create_dir_all(out_dir())?;
    std::fs::write(
        out_dir().join("http.json"),
        serde_json::to_string_pretty(&rows)?,
    )?;
    Ok(())
}
