//! The `planmux` command line.
#![allow(clippy::print_stdout)] // the CLI's output is its job; `serve` never prints

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};
use planmux::approval::APPROVE_PLAN_TOOL;
use planmux::config::Config;
use planmux::demo::DemoKind;
use planmux::downstream::Downstreams;
use planmux::exec::RunStatus;
use planmux::hosts::Host;
use planmux::plan::EXECUTE_PLAN_TOOL;
use planmux::plan::{PlanIssue, dot, mermaid, render_issues};
use planmux::policy::{Approver, Confirm};
use planmux::runner::{PlanRunner, Unchecked};
use planmux::upstream::surface::SEARCH_TOOLS_TOOL;
use planmux::wire::LineTransport;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

#[macro_use]
mod terminal;

use terminal::{GREEN, Lines, RED, Stream, draw_timeline, paint};

mod setup;

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
    Serve {
        /// Serve streamable HTTP at ADDR (default 127.0.0.1:8787), endpoint /mcp, instead
        /// of stdio.
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = planmux::http::DEFAULT_ADDR)]
        http: Option<std::net::SocketAddr>,
        /// With --http: no sessions; every request stands alone (load-balanced deployments).
        #[arg(long, requires = "http")]
        stateless: bool,
    },
    /// Execute a plan (a file, or - for stdin) and print its result JSON.
    ///
    /// A plan with steps that [policy] confirm covers (write and destructive tools, by
    /// default) asks on the terminal first.
    ///
    /// Exit codes: 0 succeeded, 2 partial, 3 failed, 4 invalid plan, 5 needs approval
    /// (declined, or no terminal to ask on and no --yes), 64 a usage error, 1 other
    /// errors.
    Run {
        /// The plan: a JSON file, or - to read stdin.
        plan: String,
        /// Approve the steps that need it without asking.
        #[arg(long, short = 'y')]
        yes: bool,
        /// Also write the full run record (arguments, outputs, timings) to this file.
        #[arg(long)]
        record: Option<PathBuf>,
        /// Draw a per-step timeline on stderr after the run.
        #[arg(long)]
        timeline: bool,
        /// No per-step lines on stderr.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Check a plan and print its schedule without calling any tool (exit 4 if invalid).
    Validate {
        /// The plan: a JSON file, or - to read stdin.
        plan: String,
        /// Print the dependency graph as a Mermaid flowchart.
        #[arg(long, conflicts_with = "dot")]
        mermaid: bool,
        /// Print the dependency graph as Graphviz DOT.
        #[arg(long, conflicts_with = "json")]
        dot: bool,
        /// Print what a lazy plan answers: the schedule and what would need approval, as JSON.
        #[arg(long, conflicts_with = "mermaid")]
        json: bool,
    },
    /// Print the merged tool catalog.
    Tools,
    /// Start every server and report status, tool count and start-up time, the tools
    /// servers.lock holds back, name clashes and pipelines that cannot run (exit 1 if any
    /// of those).
    Check,
    /// Pin every tool definition: write servers.lock beside the config. From then on a
    /// tool whose definition changes (or a new tool of a locked server) is quarantined
    /// until the next `planmux lock`.
    Lock,
    /// Turn a host's MCP servers into servers.toml (printed, or written with -o).
    Import {
        /// claude-desktop, claude-code, cursor, vscode, windsurf, or a JSON file with
        /// "mcpServers" or "servers" (default: the first of those hosts with a config file)
        #[arg(long)]
        from: Option<String>,
        /// Write servers.toml here (readable only by you), and servers.schema.json beside it.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Replace the output file if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Put planmux in a host's config in place of the servers --config runs (with a
    /// backup, printing the diff).
    Install {
        /// claude-desktop, claude-code, cursor, vscode or windsurf
        #[arg(long, value_parser = setup::host)]
        host: Host,
        /// The host's config file (default: where the host keeps it), e.g. a project's .mcp.json.
        #[arg(long)]
        file: Option<PathBuf>,
        /// Print the diff, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Put back the host's config as it was before `planmux install`.
    Uninstall {
        /// claude-desktop, claude-code, cursor, vscode or windsurf
        #[arg(long, value_parser = setup::host)]
        host: Host,
        /// The host's config file (default: where the host keeps it).
        #[arg(long)]
        file: Option<PathBuf>,
        /// Restore the backup even if the file changed since install.
        #[arg(long)]
        force: bool,
        /// Print the diff, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Print the JSON Schema of servers.toml (config) or of a plan (plan).
    Schema {
        /// config or plan
        what: setup::Schema,
    },
    /// Serve one built-in demo server over stdio (or streamable HTTP).
    Demo {
        /// metrics, weather, files, chaos, hostile or conformance
        name: DemoKind,
        /// Sandbox folder of the files demo.
        #[arg(long)]
        root: Option<PathBuf>,
        /// Serve over streamable HTTP at this address (endpoint /mcp) instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
    },
}

fn main() {
    let code = match start() {
        Ok(code) => code,
        Err(error) => {
            // The error chain in one line; no backtrace, whatever RUST_BACKTRACE says.
            err!("planmux: {error:#}");
            1
        }
    };
    std::process::exit(code);
}

/// Puts allocations up to 32 MiB on the heap and keeps up to 64 MiB of freed heap, from
/// the start (glibc). By default glibc maps each allocation over 128 KiB afresh and unmaps
/// it when freed, raising both bars only as large blocks are freed: whether a 20 MB
/// message's buffers cost some 5,000 page faults and as many cleared pages, every time,
/// then hung on what the process had allocated before (a read buffer's size turned a demo
/// server's 20 MB answer from 57 into 80 ms, BENCHMARKS.md §1). These are the values glibc
/// settles on after the first large message, set before it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn keep_large_allocations() {
    // SAFETY: `mallopt` only sets two of the allocator's parameters, which it reads under
    // its own lock; nothing else is running yet.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_large_allocations() {}

/// Everything `main` does; its error is reported on one line.
fn start() -> Result<i32> {
    keep_large_allocations();
    // TLS to remote servers: rustls with ring (Cargo.toml, rmcp's `reqwest-tls-no-provider`).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // `--help` and `--version` are answers; anything else is a usage error, with
        // its own exit code (2 is a partial run's).
        Err(error) => {
            let _ = error.print();
            return Ok(if error.use_stderr() { EXIT_USAGE } else { 0 });
        }
    };
    let serving = matches!(
        cli.command,
        None | Some(Command::Serve { .. } | Command::Demo { .. })
    );
    planmux::telemetry::init(if serving {
        planmux::telemetry::SERVE_FILTER
    } else {
        planmux::telemetry::COMMAND_FILTER
    });
    // One thread: planmux waits on pipes almost all the time, and a call that hops between
    // worker threads pays for the hand-offs. Measured: the proxy's added latency per call
    // fell from ~185 µs to ~125 µs (BENCHMARKS.md, passthrough).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let code = runtime.block_on(run(cli));
    // Blocking work still running is not waited for long (the pipes' reader threads are
    // not the runtime's, and end with the process): all that matters is closed.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    code
}

async fn run(cli: Cli) -> Result<i32> {
    match &cli.command {
        Some(Command::Demo { name, root, http }) => {
            match http {
                Some(addr) => planmux::demo::serve_http(*name, root.clone(), *addr).await?,
                None => planmux::demo::serve_stdio(*name, root.clone()).await?,
            }
            return Ok(0);
        }
        Some(Command::Import {
            from,
            output,
            force,
        }) => return setup::run_import(from.as_deref(), output.as_deref(), *force),
        Some(Command::Install {
            host,
            file,
            dry_run,
        }) => return setup::run_install(*host, file.as_deref(), cli.config.as_deref(), *dry_run),
        Some(Command::Uninstall {
            host,
            file,
            force,
            dry_run,
        }) => return setup::run_uninstall(*host, file.as_deref(), *force, *dry_run),
        Some(Command::Schema { what }) => return setup::run_schema(*what),
        _ => {}
    }
    let config = Config::locate(cli.config.as_deref())?;
    tracing::info!(config = %config.source, servers = config.enabled_servers().count(), "configuration loaded");
    if config.enabled_servers().next().is_none() {
        tracing::warn!(config = %config.source, "no server is enabled: planmux has no tools to offer; add [servers.NAME] sections (see `planmux import`)");
    }
    let stdio = Command::Serve {
        http: None,
        stateless: false,
    };
    match cli.command.unwrap_or(stdio) {
        Command::Serve {
            http: Some(addr),
            stateless,
        } => {
            let options = planmux::http::HttpOptions { addr, stateless };
            planmux::http::serve_http(&config, options, |_| {}, terminated()).await?;
            Ok(0)
        }
        Command::Serve { http: None, .. } => serve(config).await.map(|()| 0),
        Command::Run {
            plan,
            yes,
            record,
            timeline,
            quiet,
        } => {
            let output = Output {
                record,
                timeline,
                quiet,
            };
            run_plan(config, &plan, yes, output).await
        }
        Command::Validate {
            plan,
            mermaid,
            dot,
            json,
        } => {
            let picture = if mermaid {
                Picture::Mermaid
            } else if dot {
                Picture::Dot
            } else if json {
                Picture::Json
            } else {
                Picture::Text
            };
            validate(config, &plan, picture).await
        }
        Command::Tools => tools(config).await,
        Command::Check => check(config).await,
        Command::Lock => lock(config).await,
        Command::Demo { .. }
        | Command::Import { .. }
        | Command::Install { .. }
        | Command::Uninstall { .. }
        | Command::Schema { .. } => Ok(0),
    }
}

async fn serve(config: Config) -> Result<()> {
    let (read, write) = planmux::pipes::host_stdio().context("cannot open stdin")?;
    let transport = LineTransport::blocking(read, write, config.proxy.wire, "the host");
    planmux::serve::serve(&config, transport, terminated())
        .await
        .context("MCP handshake with the host failed")
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
    out!("{:<width$}  {:<11}  DESCRIPTION", "TOOL", "TIER");
    for entry in catalog.entries() {
        let description = entry.definition.description.as_deref().unwrap_or("");
        let first_line = description.lines().next().unwrap_or("");
        let short: String = first_line.chars().take(80).collect();
        out!(
            "{:<width$}  {:<11}  {short}",
            entry.exported.as_str(),
            entry.tier.as_str()
        );
    }
    let failed: Vec<String> = downstreams
        .statuses()
        .into_iter()
        .filter(|s| !s.ready)
        .map(|s| {
            let error = s.error.unwrap_or_default();
            format!("server '{}' failed to start: {error}", s.name)
        })
        .collect();
    // Beside the servers' tools, what planmux lists itself: the pipelines that can run,
    // and its own tools (search_tools only on the compact surface).
    let runner = PlanRunner::new(downstreams.clone(), &config);
    let policy = downstreams.policy();
    let pipelines: Vec<(String, String, String)> = runner
        .listed_pipelines()
        .into_iter()
        .map(|ready| {
            let description = ready.tool.description.as_deref().unwrap_or("").to_owned();
            (
                ready.spec.exported,
                ready.spec.tier.as_str().to_owned(),
                description,
            )
        })
        .collect();
    // Their tier is that of what they run: `-` here.
    let mut own = vec![(EXECUTE_PLAN_TOOL, "run a plan of tool calls")];
    if policy.confirm != Confirm::None {
        own.push((APPROVE_PLAN_TOOL, "run a plan the user approved"));
    }
    own.push((
        SEARCH_TOOLS_TOOL,
        "find tools (listed on the compact surface)",
    ));
    for (name, tier, description) in &pipelines {
        let short: String = description
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(80)
            .collect();
        out!("{name:<width$}  {tier:<11}  pipeline: {short}");
    }
    for (name, description) in own {
        out!("{name:<width$}  {:<11}  planmux: {description}", "-");
    }
    let servers = downstreams.servers().len();
    out!(
        "{} tools from {} of {servers} servers, {} pipeline{}",
        catalog.entries().len(),
        servers - failed.len(),
        pipelines.len(),
        if pipelines.len() == 1 { "" } else { "s" }
    );
    for line in &failed {
        err!("planmux: {line}");
    }
    downstreams.shutdown().await;
    // Like `check`: a catalog missing a server's tools is not a success.
    Ok(if failed.is_empty() { 0 } else { 1 })
}

async fn check(config: Config) -> Result<i32> {
    let started = std::time::Instant::now();
    let downstreams = Downstreams::start(&config, Arc::default()).await;
    let ready_after = started.elapsed();
    let statuses = downstreams.statuses();
    // Disabled servers are listed too: the column fits their names as well.
    let width = config
        .servers
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    out!(
        "{:<width$}  {:<6}  {:>5}  {:>9}  ERROR",
        "SERVER",
        "STATUS",
        "TOOLS",
        "START(ms)"
    );
    for s in &statuses {
        let startup = s.startup.map_or_else(
            || "-".to_string(),
            |d| format!("{:.1}", d.as_secs_f64() * 1000.0),
        );
        let status = if s.ready {
            paint(&format!("{:<6}", "ok"), GREEN, Stream::Out)
        } else {
            paint(&format!("{:<6}", "FAILED"), RED, Stream::Out)
        };
        out!(
            "{:<width$}  {status}  {:>5}  {startup:>9}  {}",
            s.name,
            s.tools,
            s.error.as_deref().unwrap_or("")
        );
    }
    for server in config.servers.iter().filter(|s| !s.enabled) {
        out!(
            "{:<width$}  {:<6}  {:>5}  {:>9}",
            server.name,
            "off",
            "-",
            "-"
        );
    }
    let failed = statuses.iter().filter(|s| !s.ready).count();
    let catalog = downstreams.catalog();
    out!(
        "catalog ready in {:.1} ms: {} tools, {} of {} servers failed",
        ready_after.as_secs_f64() * 1000.0,
        catalog.entries().len(),
        failed,
        statuses.len()
    );
    let held = catalog.quarantined();
    if !held.is_empty() {
        out!(
            "\nquarantined by servers.lock (not listed, not callable; `planmux lock` accepts them):"
        );
        for q in held {
            out!("  {}  {}", q.exported, q.change);
        }
    }
    let clashes: Vec<&String> = catalog
        .clashes()
        .iter()
        .chain(catalog.resources().clashes())
        .collect();
    if !clashes.is_empty() {
        out!("\nname clashes (one of each left out):");
        for clash in &clashes {
            out!("  {clash}");
        }
    }
    let runner = PlanRunner::new(downstreams.clone(), &config);
    let pipelines = runner.pipelines();
    if !pipelines.is_empty() {
        out!("\npipelines:");
    }
    for state in &pipelines {
        match &state.ready {
            Ok(ready) => out!(
                "  {}  {}  {}, tier {}",
                state.name,
                paint("ok", GREEN, Stream::Out),
                planmux::text::count(ready.steps, "step"),
                ready.spec.tier
            ),
            Err(why) => out!(
                "  {}  {}  {}",
                state.name,
                paint("CANNOT RUN", RED, Stream::Out),
                why.replace('\n', "\n    ")
            ),
        }
    }
    let broken = pipelines.iter().any(|p| p.ready.is_err());
    downstreams.shutdown().await;
    Ok(
        if failed > 0 || !held.is_empty() || !clashes.is_empty() || broken {
            1
        } else {
            0
        },
    )
}

async fn lock(config: Config) -> Result<i32> {
    let Some(path) = config.lock_path.clone() else {
        anyhow::bail!(
            "planmux lock writes servers.lock beside a config file, and the built-in config has none (use --config)"
        );
    };
    let downstreams = Downstreams::start(&config, Arc::default()).await;
    let failed: Vec<String> = downstreams
        .statuses()
        .into_iter()
        .filter(|s| !s.ready)
        .map(|s| format!("{} ({})", s.name, s.error.unwrap_or_default()))
        .collect();
    let tools: Vec<(String, Vec<rmcp::model::Tool>)> = downstreams
        .servers()
        .iter()
        .map(|s| (s.config.name.clone(), s.tools()))
        .collect();
    downstreams.shutdown().await;
    // Locking without a server would leave its tools unpinned: refuse.
    if !failed.is_empty() {
        anyhow::bail!(
            "not locked: these servers failed to start: {}",
            failed.join(", ")
        );
    }
    let lock = planmux::lock::Lock::of(tools.iter().map(|(s, t)| (s.as_str(), t.as_slice())));
    lock.save(&path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    let count: usize = tools.iter().map(|(_, t)| t.len()).sum();
    out!(
        "locked {count} tools of {} servers in {}",
        tools.len(),
        path.display()
    );
    Ok(0)
}

/// Exit codes of `planmux run` and `planmux validate`.
const EXIT_PARTIAL: i32 = 2;
const EXIT_FAILED: i32 = 3;
const EXIT_INVALID: i32 = 4;
const EXIT_NEEDS_APPROVAL: i32 = 5;
/// A command line clap cannot parse (sysexits' EX_USAGE).
const EXIT_USAGE: i32 = 64;

/// The plan text from a file, or stdin for `-`.
fn read_plan(source: &str) -> Result<Value> {
    let text = if source == "-" {
        std::io::read_to_string(std::io::stdin()).context("cannot read the plan from stdin")?
    } else {
        std::fs::read_to_string(source).with_context(|| format!("cannot read {source}"))?
    };
    // The plan language parses the text itself, to report bad JSON with its position.
    Ok(Value::String(text))
}

fn print_issues(issues: &[PlanIssue]) {
    err!("{}", render_issues(issues));
    let issues: Vec<Value> = issues
        .iter()
        .map(|i| json!({"location": i.location, "message": i.message(), "hint": i.hint()}))
        .collect();
    out!("{}", json!({"status": "invalid", "issues": issues}));
}

/// How `planmux validate` shows a valid plan.
enum Picture {
    Text,
    Json,
    Mermaid,
    Dot,
}

async fn validate(config: Config, source: &str, picture: Picture) -> Result<i32> {
    let plan = read_plan(source)?;
    let downstreams = Downstreams::start(&config, Arc::default()).await;
    let runner = PlanRunner::new(downstreams.clone(), &config);
    let outcome = runner.check(plan, None, &CancellationToken::new()).await;
    downstreams.shutdown().await;
    let checked = match outcome {
        Ok(checked) => checked,
        Err(Unchecked::Invalid(issues)) => {
            print_issues(&issues);
            return Ok(EXIT_INVALID);
        }
        Err(Unchecked::Unfinished(why)) => {
            return Err(anyhow::anyhow!(why));
        }
    };
    match picture {
        Picture::Mermaid => out_raw!("{}", mermaid(&checked.plan)),
        Picture::Dot => out_raw!("{}", dot(&checked.plan)),
        Picture::Json => out!("{}", checked.planned()),
        Picture::Text => out_raw!("{}", checked.planned_text()),
    }
    Ok(0)
}

/// What `planmux run` prints besides the result.
struct Output {
    /// Where to write the full run record.
    record: Option<PathBuf>,
    /// Draw a timeline on stderr.
    timeline: bool,
    /// No per-step lines.
    quiet: bool,
}

async fn run_plan(config: Config, source: &str, yes: bool, output: Output) -> Result<i32> {
    let plan = read_plan(source)?;
    let downstreams = Downstreams::start(&config, Arc::default()).await;
    let runner = PlanRunner::new(downstreams.clone(), &config);
    let cancel = CancellationToken::new();
    let checked = match runner.check(plan, None, &cancel).await {
        Ok(checked) => checked,
        Err(outcome) => {
            downstreams.shutdown().await;
            return match outcome {
                Unchecked::Invalid(issues) => {
                    print_issues(&issues);
                    Ok(EXIT_INVALID)
                }
                Unchecked::Unfinished(why) => Err(anyhow::anyhow!(why)),
            };
        }
    };
    if checked.plan.lazy() {
        downstreams.shutdown().await;
        err_raw!("{}", checked.planned_text());
        err!("nothing ran: the plan is lazy (mode lazy / dry_run)");
        out!("{}", checked.planned());
        return Ok(0);
    }
    let approval = match &checked.approval {
        None => None,
        Some(_) if yes => checked
            .approval
            .as_ref()
            .map(|asked| runner.approve(asked, Approver::Flag)),
        Some(asked) => {
            let answer = tokio::select! {
                answer = ask_terminal(asked.message(), source == "-") => answer,
                () = terminated() => Ok(false),
            };
            match answer {
                Ok(true) => Some(runner.approve(asked, Approver::Terminal)),
                refused => {
                    runner.decline(asked, Approver::Terminal);
                    downstreams.shutdown().await;
                    let why = match refused {
                        Err(no_terminal) => format!(
                            "{}\nplanmux: this plan needs approval, and there is no terminal to ask on ({no_terminal}): run it again with --yes to approve it",
                            asked.message()
                        ),
                        Ok(_) => "planmux: not approved; nothing ran".into(),
                    };
                    err!("{why}");
                    out!(
                        "{}",
                        serde_json::to_string_pretty(
                            &json!({"status": "needs_approval", "steps": asked.steps})
                        )?
                    );
                    return Ok(EXIT_NEEDS_APPROVAL);
                }
            }
        }
    };
    let observer = Lines {
        started: std::time::Instant::now(),
        quiet: output.quiet,
    };
    let record = {
        let run = runner.run(&checked.plan, approval, None, &observer, cancel.clone());
        tokio::pin!(run);
        tokio::select! {
            record = &mut run => record,
            () = terminated() => {
                cancel.cancel();
                run.await
            }
        }
    };
    downstreams.shutdown().await;
    let result = runner.result(&record);
    out!("{}", serde_json::to_string_pretty(&result)?);
    if let Some(path) = output.record {
        std::fs::write(&path, serde_json::to_string_pretty(&*record)?)
            .with_context(|| format!("cannot write the record to {}", path.display()))?;
    }
    if output.timeline {
        err_raw!("{}", draw_timeline(&record));
    }
    Ok(match record.status {
        RunStatus::Succeeded => 0,
        RunStatus::Partial => EXIT_PARTIAL,
        RunStatus::Failed => EXIT_FAILED,
    })
}

/// Asks y/N on stderr and reads the answer from stdin, when stdin is a terminal (`Err`
/// when it is not: a pipe, a file, or the plan itself).
async fn ask_terminal(message: String, plan_on_stdin: bool) -> Result<bool> {
    use std::io::{BufRead as _, IsTerminal as _};
    // The plan may take stdin (`planmux run -`): then the answer comes from the terminal
    // itself, when the user sees the question there (stderr is a terminal).
    let answers: Box<dyn std::io::BufRead + Send> = if std::io::stdin().is_terminal() {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else if plan_on_stdin && std::io::stderr().is_terminal() {
        let tty = std::fs::File::open("/dev/tty")
            .context("stdin is not a terminal, and /dev/tty cannot be opened")?;
        Box::new(std::io::BufReader::new(tty))
    } else {
        anyhow::bail!("stdin is not a terminal");
    };
    let asked = tokio::task::spawn_blocking(move || -> Result<bool> {
        let mut answers = answers;
        err_raw!("{message}\nRun it? [y/N] ");
        let mut line = String::new();
        answers.read_line(&mut line)?;
        Ok(matches!(
            line.trim().to_ascii_lowercase().as_str(),
            "y" | "yes"
        ))
    });
    asked.await?
}
