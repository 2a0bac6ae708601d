//! The `planmux` command line.
#![allow(clippy::print_stdout)] // the CLI's output is its job; `serve` never prints

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};
use planmux::config::Config;
use planmux::demo::DemoKind;
use planmux::downstream::{Downstreams, HostLink};
use planmux::upstream::Upstream;
use rmcp::ServiceExt;
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

/// planmux: one MCP server in front of many, with whole-plan execution.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// servers.toml to use (default: $PLANMUX_CONFIG, then ./servers.toml, then the
    /// built-in demo config)
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over stdio (the default; this is what hosts launch).
    Serve,
    /// Print the merged tool catalog.
    Tools,
    /// Start every server and report status, tool count and start-up time.
    Check,
    /// Serve one built-in demo server over stdio.
    Demo {
        /// metrics, weather, files or chaos
        name: DemoKind,
        /// Sandbox folder of the files demo.
        #[arg(long)]
        root: Option<PathBuf>,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    planmux::telemetry::init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let code = runtime.block_on(run(cli))?;
    // Do not wait for blocked stdin readers: everything that matters is closed by now.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    std::process::exit(code);
}

async fn run(cli: Cli) -> Result<i32> {
    if let Some(Command::Demo { name, root }) = cli.command {
        planmux::demo::serve_stdio(name, root).await?;
        return Ok(0);
    }
    let config = Config::locate(cli.config.as_deref())?;
    tracing::info!(config = %config.source, servers = config.enabled_servers().count(), "configuration loaded");
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(config).await.map(|()| 0),
        Command::Tools => tools(config).await,
        Command::Check => check(config).await,
        Command::Demo { .. } => Ok(0),
    }
}

async fn serve(config: Config) -> Result<()> {
    let host = Arc::new(HostLink::default());
    let shutdown = CancellationToken::new();
    let downstreams = Downstreams::start(&config, host.clone()).await;
    let (reader, writer) = rmcp::transport::io::stdio_pipes();
    let eof = CancellationToken::new();
    let reader = EofSignal {
        inner: reader,
        eof: eof.clone(),
    };
    let upstream = Upstream::new(downstreams.clone(), host, shutdown.clone());
    let outcome = async {
        let service = upstream
            .serve((reader, writer))
            .await
            .context("MCP handshake with the host failed")?;
        let stop = service.cancellation_token();
        let waiting = service.waiting();
        tokio::pin!(waiting);
        tokio::select! {
            _ = &mut waiting => {}
            () = eof.cancelled() => {
                // The host hung up: stop the calls in flight rather than drain them.
                shutdown.cancel();
                let _ = tokio::time::timeout(std::time::Duration::from_secs(1), &mut waiting).await;
            }
            () = terminated() => {
                shutdown.cancel();
                stop.cancel();
            }
        }
        anyhow::Ok(())
    };
    let result = tokio::select! {
        result = outcome => result,
        () = terminated() => Ok(()),
    };
    shutdown.cancel();
    downstreams.shutdown().await;
    tracing::info!("shut down");
    result
}

/// Resolves on SIGTERM or SIGINT.
async fn terminated() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Passes reads through and cancels `eof` when the reader reaches end of file, so planmux
/// notices the host hanging up even while rmcp is still draining requests.
struct EofSignal<R> {
    inner: R,
    eof: CancellationToken,
}

impl<R: AsyncRead + Unpin> AsyncRead for EofSignal<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(poll, Poll::Ready(Ok(())))
            && buf.filled().len() == before
            && buf.remaining() > 0
        {
            self.eof.cancel();
        }
        poll
    }
}

async fn tools(config: Config) -> Result<i32> {
    let downstreams = Downstreams::start(&config, Arc::default()).await;
    let catalog = downstreams.catalog();
    let width = catalog
        .entries()
        .iter()
        .map(|e| e.exported.as_str().len())
        .max()
        .unwrap_or(4)
        .max(4);
    println!("{:<width$}  DESCRIPTION", "TOOL");
    for entry in catalog.entries() {
        let description = entry.definition.description.as_deref().unwrap_or("");
        let first_line = description.lines().next().unwrap_or("");
        let short: String = first_line.chars().take(80).collect();
        println!("{:<width$}  {short}", entry.exported.as_str());
    }
    println!(
        "{} tools from {} servers",
        catalog.entries().len(),
        downstreams.servers().len()
    );
    downstreams.shutdown().await;
    Ok(0)
}

async fn check(config: Config) -> Result<i32> {
    let started = std::time::Instant::now();
    let downstreams = Downstreams::start(&config, Arc::default()).await;
    let ready_after = started.elapsed();
    let statuses = downstreams.statuses();
    let width = statuses
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    println!(
        "{:<width$}  {:<6}  {:>5}  {:>9}  ERROR",
        "SERVER", "STATUS", "TOOLS", "START(ms)"
    );
    for s in &statuses {
        let startup = s.startup.map_or_else(
            || "-".to_string(),
            |d| format!("{:.1}", d.as_secs_f64() * 1000.0),
        );
        let status = if s.ready { "ok" } else { "FAILED" };
        println!(
            "{:<width$}  {status:<6}  {:>5}  {startup:>9}  {}",
            s.name,
            s.tools,
            s.error.as_deref().unwrap_or("")
        );
    }
    for server in config.servers.iter().filter(|s| !s.enabled) {
        println!(
            "{:<width$}  {:<6}  {:>5}  {:>9}",
            server.name, "off", "-", "-"
        );
    }
    let failed = statuses.iter().filter(|s| !s.ready).count();
    println!(
        "catalog ready in {:.1} ms: {} tools, {} of {} servers failed",
        ready_after.as_secs_f64() * 1000.0,
        downstreams.catalog().entries().len(),
        failed,
        statuses.len()
    );
    downstreams.shutdown().await;
    Ok(if failed > 0 { 1 } else { 0 })
}
