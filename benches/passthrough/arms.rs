//! What the passthrough bench measures: the servers, the routes a client takes to them
//! (direct, planmux, the peers), and an arm (a route started, with its one client session).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

use crate::peers::{self, Process};

/// The bench's own binary: planmux, and the chaos demo.
pub const BIN: &str = env!("CARGO_BIN_EXE_planmux");
/// The longest stdio message the client accepts. rmcp's default (16 MiB) is below the
/// 20 MB answer of the large-answer table; this is planmux's own default limit.
const MAX_LINE: usize = 64 * 1024 * 1024;
/// One call's limit, so a wedged peer fails its row instead of hanging the bench.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// A downstream server that every arm of a table reaches.
#[derive(Clone, Copy)]
pub enum Server {
    /// The reference server nobody here wrote: npm `@modelcontextprotocol/server-everything`.
    Everything,
    /// planmux's chaos demo: answers at once, so planmux's share of the time shows; and
    /// its `bytes` tool makes the large answers.
    Chaos,
}

impl Server {
    /// Its name in servers.toml (so planmux's prefix) and in file names.
    fn key(self) -> &'static str {
        match self {
            Server::Everything => "everything",
            Server::Chaos => "chaos",
        }
    }

    /// Its stdio command line.
    fn command(self, setup: &Setup) -> (PathBuf, Vec<String>) {
        match self {
            Server::Everything => (setup.node.clone(), vec![path_arg(&setup.everything)]),
            Server::Chaos => (BIN.into(), vec!["demo".into(), "chaos".into()]),
        }
    }
}

/// What the arms start from: a scratch folder with a planmux config and a fastmcp config
/// per server, and where the installed servers are. The folder goes when this is dropped.
pub struct Setup {
    /// The scratch folder, under the system's temp folder.
    dir: PathBuf,
    /// The Node that tests/interop pins, or `node` on PATH when it is not installed.
    node: PathBuf,
    /// server-everything's entry point; it may be absent (not installed).
    pub everything: PathBuf,
}

impl Setup {
    /// Writes `<server>.toml` and `fastmcp-<server>.json` for every server.
    pub fn new() -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("planmux-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let interop = peers::interop_dir();
        let node = interop.join("node_modules/.bin/node");
        let setup = Setup {
            dir,
            node: if node.is_file() { node } else { "node".into() },
            everything: interop
                .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        };
        for server in [Server::Everything, Server::Chaos] {
            let (program, args) = server.command(&setup);
            let (command, args) = (json!(path_arg(&program)), json!(args));
            let toml = format!(
                "[servers.{}]\ncommand = {command}\nargs = {args}\n",
                server.key()
            );
            std::fs::write(setup.config(server), toml)?;
            let mcp = json!({"mcpServers": {server.key(): {"command": command, "args": args}}});
            std::fs::write(setup.fastmcp_config(server), mcp.to_string())?;
        }
        Ok(setup)
    }

    /// planmux's servers.toml with only `server` in it.
    fn config(&self, server: Server) -> PathBuf {
        self.dir.join(format!("{}.toml", server.key()))
    }

    /// fastmcp's MCPConfig with only `server` in it: with one server it passes the tool
    /// names through unprefixed.
    fn fastmcp_config(&self, server: Server) -> PathBuf {
        self.dir.join(format!("fastmcp-{}.json", server.key()))
    }
}

impl Drop for Setup {
    /// Removes the scratch folder.
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A path as a command-line argument.
fn path_arg(path: &Path) -> String {
    path.display().to_string()
}

/// How the client reaches the server: one row of each table.
#[derive(Clone, Copy, PartialEq)]
pub enum Route {
    /// The server itself: every ratio divides by it.
    Direct,
    /// The floor of any stdio proxy here: an extra process that copies bytes both ways and
    /// reads none of them ([`copy_both_ways`]), so its cost is the process and the pipes.
    Copier,
    /// `planmux serve` over stdio, as a desktop host runs it.
    Planmux,
    /// `planmux serve --http`, as a remote host reaches it.
    PlanmuxHttp,
    /// fastmcp's proxy (`fastmcp run <MCPConfig>`): one shared child, started at the first
    /// session.
    Fastmcp,
    /// supergateway `--stateful`: one child per session.
    Supergateway,
    /// mcp-proxy (punkpeye): one shared child, many HTTP sessions, as planmux's HTTP front.
    McpProxy,
}

impl Route {
    /// Every route, in the order of the rows; direct first.
    pub const ALL: [Route; 7] = [
        Route::Direct,
        Route::Copier,
        Route::Planmux,
        Route::PlanmuxHttp,
        Route::Fastmcp,
        Route::Supergateway,
        Route::McpProxy,
    ];

    /// Its row's name, with the transport the client speaks.
    pub fn label(self) -> &'static str {
        match self {
            Route::Direct => "direct (stdio)",
            Route::Copier => "byte copier (stdio, the floor)",
            Route::Planmux => "planmux (stdio)",
            Route::PlanmuxHttp => "planmux (streamable HTTP)",
            Route::Fastmcp => "fastmcp proxy (stdio)",
            Route::Supergateway => "supergateway (streamable HTTP)",
            Route::McpProxy => "mcp-proxy (streamable HTTP)",
        }
    }

    /// For file names.
    fn slug(self) -> &'static str {
        match self {
            Route::Direct => "direct",
            Route::Copier => "copier",
            Route::Planmux => "planmux",
            Route::PlanmuxHttp => "planmux-http",
            Route::Fastmcp => "fastmcp",
            Route::Supergateway => "supergateway",
            Route::McpProxy => "mcp-proxy",
        }
    }

    /// Whether the client speaks streamable HTTP to it (at /mcp) rather than stdio.
    fn is_http(self) -> bool {
        matches!(
            self,
            Route::PlanmuxHttp | Route::Supergateway | Route::McpProxy
        )
    }

    /// A peer's program, where scripts/install-interop installs it; `None` for the routes
    /// that are not peers. A peer is software nobody here wrote: when it is missing or
    /// fails, its row says so and the bench goes on.
    fn peer_program(self) -> Option<PathBuf> {
        let interop = peers::interop_dir();
        match self {
            Route::Direct | Route::Copier | Route::Planmux | Route::PlanmuxHttp => None,
            Route::Fastmcp => Some(interop.join(".venv-peers/bin/fastmcp")),
            Route::Supergateway => Some(interop.join("node_modules/.bin/supergateway")),
            Route::McpProxy => Some(interop.join("node_modules/.bin/mcp-proxy")),
        }
    }

    /// What precedes a tool's name: planmux namespaces tools by server, the others pass
    /// the names through (fastmcp too, with a single server).
    fn prefix(self, server: Server) -> String {
        match self {
            Route::Planmux | Route::PlanmuxHttp => format!("{}__", server.key()),
            _ => String::new(),
        }
    }

    /// Its command line in front of `server`; an HTTP route listens on 127.0.0.1:`port`.
    fn command(self, server: Server, setup: &Setup, port: u16) -> std::process::Command {
        let (program, args) = server.command(setup);
        let (port, config) = (port.to_string(), path_arg(&setup.config(server)));
        let addr = format!("127.0.0.1:{port}");
        let mut command = std::process::Command::new(match self {
            Route::Direct => program.clone(),
            Route::Copier => std::env::current_exe().unwrap_or_default(),
            Route::Planmux | Route::PlanmuxHttp => BIN.into(),
            Route::Fastmcp | Route::Supergateway | Route::McpProxy => self.program(),
        });
        match self {
            Route::Direct => command.args(&args),
            Route::Copier => command.env(COPIER, "1").arg(&program).args(&args),
            Route::Planmux => command.args(["serve", "--config", config.as_str()]),
            Route::PlanmuxHttp => command
                .args(["serve", "--http", addr.as_str()])
                .args(["--config", config.as_str()]),
            Route::Fastmcp => command
                .arg("run")
                .arg(setup.fastmcp_config(server))
                .args(["--transport", "stdio", "--no-banner"])
                .args(["--log-level", "WARNING"]),
            // `--stdio` takes one string, run through a shell. There is no `--host`: it
            // listens on every interface.
            Route::Supergateway => command
                .arg("--stdio")
                .arg(shell_line(&program, &args))
                .args(["--outputTransport", "streamableHttp"])
                .args(["--port", port.as_str()])
                .args(["--stateful", "--logLevel", "none"]),
            // `--server stream` drops the legacy /sse endpoint; `--no-eventStore` the
            // resumability buffer, which no client here uses and which costs per message.
            Route::McpProxy => command
                .args(["--host", "127.0.0.1", "--port", port.as_str()])
                .args(["--server", "stream", "--no-eventStore", "--"])
                .arg(&program)
                .args(&args),
        };
        command
    }

    /// A peer's installed program; `BIN` for the others.
    fn program(self) -> PathBuf {
        self.peer_program().unwrap_or_else(|| BIN.into())
    }

    /// Whether it is software nobody here wrote (see `peer_program`).
    pub fn is_peer(self) -> bool {
        self.peer_program().is_some()
    }

    /// Starts it in front of `server` and opens the session the client uses: ready, and
    /// its tools listed once, as a host does before calling.
    pub async fn start(self, server: Server, setup: &Setup) -> anyhow::Result<Arm> {
        let log = format!("passthrough-{}-{}", server.key(), self.slug());
        let (session, process) = if self.is_http() {
            let port = peers::free_port()?;
            http_session(self.command(server, setup, port), port, &log).await?
        } else {
            stdio_session(self.command(server, setup, 0), &log).await?
        };
        let arm = Arm {
            route: self,
            prefix: self.prefix(server),
            session,
            _process: process,
        };
        arm.expect_tool("echo").await?;
        Ok(arm)
    }
}

/// Set in the environment of this bench's own binary when it runs as the copier.
pub const COPIER: &str = "PLANMUX_BENCH_COPIER";

/// The copier's whole job, when the bench's binary is started with [`COPIER`] set: run the
/// command its arguments name and copy bytes from stdin to the command's stdin and from
/// its stdout to stdout, with a blocking thread each way, reading none of them. Returns
/// when the command's stdout closes.
pub fn copy_both_ways() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let program = args.next().context("the copier needs a command")?;
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let (mut to_child, mut from_child) = (child.stdin.take(), child.stdout.take());
    std::thread::spawn(move || {
        if let Some(to_child) = &mut to_child {
            let _ = std::io::copy(&mut std::io::stdin().lock(), to_child);
        }
    });
    if let Some(from_child) = &mut from_child {
        std::io::copy(from_child, &mut std::io::stdout().lock())?;
    }
    child.kill().ok();
    child.wait()?;
    Ok(())
}

/// A command line for `sh -c`: every word single-quoted.
fn shell_line(program: &Path, args: &[String]) -> String {
    let quote = |w: &str| format!("'{}'", w.replace('\'', r"'\''"));
    let words = std::iter::once(path_arg(program)).chain(args.iter().cloned());
    words.map(|w| quote(&w)).collect::<Vec<_>>().join(" ")
}

/// An rmcp client session over `command`'s stdin and stdout, accepting messages up to
/// `MAX_LINE`.
pub async fn stdio_session(
    command: std::process::Command,
    log: &str,
) -> anyhow::Result<(RunningService<RoleClient, ()>, Process)> {
    let (process, stdout, stdin) = Process::spawn_stdio(command, log)?;
    let transport = AsyncRwTransport::<RoleClient, _, _>::new_client(stdout, stdin)
        .with_max_line_length(MAX_LINE);
    let session = ().serve(transport).await;
    let session =
        session.with_context(|| format!("no MCP session; see {}", process.log().display()))?;
    Ok((session, process))
}

/// Starts `command`, waits until it answers MCP on 127.0.0.1:`port`/mcp, and opens an rmcp
/// streamable-HTTP client session there.
async fn http_session(
    command: std::process::Command,
    port: u16,
    log: &str,
) -> anyhow::Result<(RunningService<RoleClient, ()>, Process)> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut process = Process::spawn(command, log)?;
    process.wait_for_port(addr)?;
    peers::ready(addr).await?;
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
    Ok((().serve(transport).await?, process))
}

/// A route started: the client's one session and the processes behind it.
pub struct Arm {
    /// Which route, for its row's label and whether its failure may skip it.
    pub route: Route,
    /// What precedes a tool's name on this route.
    prefix: String,
    /// The one session every call of this arm goes over, as a host keeps one.
    session: RunningService<RoleClient, ()>,
    /// Stopped, with everything it started, when the arm is dropped (after the session:
    /// fields drop in order).
    _process: Process,
}

impl Arm {
    /// Fails unless the route lists `tool` under the name the calls will use.
    async fn expect_tool(&self, tool: &str) -> anyhow::Result<()> {
        let name = format!("{}{tool}", self.prefix);
        let tools = self.session.list_all_tools().await?;
        anyhow::ensure!(
            tools.iter().any(|t| t.name == name.as_str()),
            "it lists no tool {name} ({} tools)",
            tools.len()
        );
        Ok(())
    }

    /// A call of `tool` with `args`, under this route's name for it.
    pub fn params(&self, tool: &str, args: &JsonObject) -> CallToolRequestParams {
        let mut params = CallToolRequestParams::new(format!("{}{tool}", self.prefix));
        params.arguments = Some(args.clone());
        params
    }

    /// Sends a call and waits for its result, which must not be an error.
    pub async fn send(&self, params: CallToolRequestParams) -> anyhow::Result<CallToolResult> {
        let calling = self.session.call_tool(params);
        let result = tokio::time::timeout(CALL_TIMEOUT, calling)
            .await
            .with_context(|| format!("no answer within {CALL_TIMEOUT:?}"))??;
        anyhow::ensure!(result.is_error != Some(true), "an error: {}", text(&result));
        Ok(result)
    }

    /// One call's time as the client sees it: from sending to a decoded result.
    pub async fn timed(
        &self,
        tool: &str,
        args: &JsonObject,
    ) -> anyhow::Result<(Duration, CallToolResult)> {
        let params = self.params(tool, args);
        let started = Instant::now();
        let result = self.send(params).await?;
        Ok((started.elapsed(), result))
    }

    /// Closes the session, then stops the processes.
    pub async fn close(self) {
        let _ = self.session.cancel().await;
    }
}

/// A result's first text block, or "".
pub fn text(result: &CallToolResult) -> &str {
    let first = result.content.first().and_then(|block| block.as_text());
    first.map_or("", |t| t.text.as_str())
}

/// The same arguments for every echo: server-everything's `echo` requires `message`.
pub fn echo_args() -> JsonObject {
    let mut args = JsonObject::new();
    args.insert("message".into(), json!("hello from the benchmark"));
    args
}

/// Starts `routes` in front of `server`, in order. A peer that is not installed or does
/// not start is skipped with a line saying why; anything else failing ends the bench.
pub async fn start_arms(
    routes: &[Route],
    server: Server,
    setup: &Setup,
) -> anyhow::Result<Vec<Arm>> {
    let mut arms = Vec::new();
    for &route in routes {
        let missing = route.peer_program().filter(|program| !program.is_file());
        if let Some(program) = missing {
            let why = format!(
                "not installed ({} is missing; scripts/install-interop installs it)",
                program.display()
            );
            println!("{}: skipped: {why}", route.label());
            continue;
        }
        match route.start(server, setup).await {
            Ok(arm) => arms.push(arm),
            Err(e) if route.is_peer() => {
                println!("{}: skipped: {e:#}", route.label())
            }
            Err(e) => return Err(e.context(route.label())),
        }
    }
    Ok(arms)
}
