//! Harness for the interop tests (tests/it/interop.rs): where the real servers are installed,
//! a direct client that offers the same capabilities planmux offers its downstreams, the
//! streamable-HTTP server-everything, and small helpers.
//!
//! The npm packages and the Python venv are installed by `scripts/test`. When they are
//! missing the tests fail (never skip) and say so.

// Sampling and roots are deprecated by SEP-2577; planmux still offers them downstream.
#![allow(deprecated)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ErrorCode, Implementation, ListRootsResult,
    ProgressNotificationParam, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::Value;

use crate::common;

/// The npm packages `tests/interop/package.json` pins.
pub const EVERYTHING: &str = "@modelcontextprotocol/server-everything";
pub const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem";
pub const MEMORY: &str = "@modelcontextprotocol/server-memory";

const HOW_TO_INSTALL: &str = "run `scripts/test` (it runs `npm ci --prefix tests/interop` and creates \
     tests/interop/.venv with `pip install -r tests/interop/requirements.txt`), then rerun the tests";

/// Fails the test, saying how to install what is missing.
fn missing(what: &str, path: &Path) -> ! {
    panic!(
        "interop test prerequisite missing: {what} ({} does not exist): {HOW_TO_INSTALL}",
        path.display()
    )
}

/// `node`, checked to be runnable.
pub fn node() -> &'static str {
    static CHECKED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let checked = CHECKED.get_or_init(|| {
        match std::process::Command::new("node")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
        {
            Ok(status) if status.success() => Ok(()),
            Ok(status) => Err(format!("`node --version` exited with {status}")),
            Err(e) => Err(format!("cannot run `node`: {e}")),
        }
    });
    if let Err(e) = checked {
        panic!("interop tests need Node.js: {e}; install it, then {HOW_TO_INSTALL}");
    }
    "node"
}

/// The entry point of an installed npm package (its `bin`, `dist/index.js`).
pub fn entry(package: &str) -> String {
    let dir = common::interop_dir().join("node_modules").join(package);
    let manifest = dir.join("package.json");
    let Ok(text) = std::fs::read_to_string(&manifest) else {
        missing(&format!("npm package {package}"), &manifest)
    };
    let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let bin = match &parsed["bin"] {
        Value::String(s) => s.clone(),
        Value::Object(map) => map
            .values()
            .find_map(Value::as_str)
            .unwrap_or("dist/index.js")
            .to_string(),
        _ => "dist/index.js".to_string(),
    };
    let path = dir.join(bin);
    if !path.is_file() {
        missing(&format!("entry point of {package}"), &path);
    }
    path.to_string_lossy().into_owned()
}

/// The Python of `tests/interop/.venv`, with the MCP SDK importable.
pub fn python() -> PathBuf {
    let python = common::interop_dir().join(".venv/bin/python");
    if !python.exists() {
        missing("the Python venv with the MCP SDK", &python);
    }
    let sdk = common::interop_dir().join(".venv/lib");
    let has_sdk = std::fs::read_dir(&sdk)
        .map(|dirs| {
            dirs.flatten().any(|d| {
                d.path()
                    .join("site-packages/mcp/client/client.py")
                    .is_file()
            })
        })
        .unwrap_or(false);
    if !has_sdk {
        missing(
            "the `mcp` Python package in the venv",
            &sdk.join("python3.*/site-packages/mcp"),
        );
    }
    python
}

/// A string as a TOML basic string (JSON escapes are valid TOML escapes).
pub fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// A stdio server entry for servers.toml.
pub fn stdio_server(name: &str, command: &str, args: &[&str], extra: &str) -> String {
    let args: Vec<String> = args.iter().map(|a| toml_str(a)).collect();
    format!(
        "[servers.{name}]\ncommand = {}\nargs = [{}]\n{extra}\n",
        toml_str(command),
        args.join(", ")
    )
}

/// A client standing where planmux stands in front of a downstream: it offers the same
/// capabilities planmux's relay offers (roots, sampling, elicitation) and, like planmux
/// with a host that has none of them, refuses those requests. server-everything registers
/// some tools only for clients with these capabilities, so a plain client would see a
/// different tool list than planmux does.
#[derive(Clone, Default)]
pub struct MirrorHost {
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

fn refused(what: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("this test client does not support {what}"),
        None,
    )
}

impl ClientHandler for MirrorHost {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder()
            .enable_roots()
            .enable_sampling()
            .enable_elicitation()
            .build();
        ClientConfig::new(
            capabilities,
            Implementation::new("planmux-interop-direct", "0"),
        )
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        Err(refused("sampling"))
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Err(refused("roots"))
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Err(refused("elicitation"))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        if let Ok(mut seen) = self.progress.lock() {
            seen.push(params);
        }
    }
}

/// A direct connection to a downstream server, with [`MirrorHost`]'s capabilities. The
/// child is killed when the connection is dropped: some servers (server-everything) do not
/// exit on stdin EOF, and rmcp's graceful close waits 3 s for them.
pub async fn direct_mirror(
    command: &str,
    args: &[&str],
    envs: &[(&str, &str)],
) -> anyhow::Result<RunningService<RoleClient, MirrorHost>> {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args).envs(envs.iter().copied()).kill_on_drop(true);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()?;
    Ok(MirrorHost::default().serve(transport).await?)
}

/// A tool definition as JSON without its name, for comparing re-exported definitions.
pub fn without_name(tool: &Tool) -> Value {
    let mut value = serde_json::to_value(tool).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.remove("name");
    }
    value
}

/// A free TCP port on 127.0.0.1 (free when asked; the caller binds it soon after).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port on 127.0.0.1")
}

/// server-everything serving streamable HTTP on a free loopback port; killed on drop.
pub struct HttpEverything {
    pub url: String,
    child: tokio::process::Child,
}

impl HttpEverything {
    /// Starts it and waits (up to 20 s) until it accepts connections.
    pub async fn start() -> anyhow::Result<Self> {
        let script = entry(EVERYTHING);
        let mut last_error = String::new();
        // A port can be taken between picking and binding it: try a few.
        for _ in 0..3 {
            let port = free_port();
            let mut child = tokio::process::Command::new(node())
                .arg(&script)
                .arg("streamableHttp")
                .env("PORT", port.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()?;
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if let Some(status) = child.try_wait()? {
                    last_error = format!(
                        "server-everything streamableHttp on port {port} exited with {status}"
                    );
                    break;
                }
                if tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .is_ok()
                {
                    return Ok(Self {
                        url: format!("http://127.0.0.1:{port}/mcp"),
                        child,
                    });
                }
                if Instant::now() > deadline {
                    let _ = child.kill().await;
                    anyhow::bail!(
                        "server-everything streamableHttp did not listen on port {port} within 20 s"
                    );
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        anyhow::bail!("{last_error}")
    }

    /// The process id, for diagnostics.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }
}

/// Whether `name` matches a glob with `*` (any run) and `?` (one character).
pub fn glob_match(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some('*'), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some('?'), Some(_)) => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    go(&p, &n)
}

/// Prints how long a test took (visible with `--nocapture`, and in failures).
pub struct Timer {
    name: &'static str,
    started: Instant,
}

impl Timer {
    pub fn start(name: &'static str) -> Self {
        Self {
            name,
            started: Instant::now(),
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        eprintln!(
            "interop timing: {} took {:.2} s",
            self.name,
            self.started.elapsed().as_secs_f64()
        );
    }
}

/// A planmux (`args` ADDR `more`) listening on a free loopback port; killed on drop.
pub struct Listening {
    port: u16,
    _child: tokio::process::Child,
}

impl Listening {
    pub async fn start(args: &[&str], more: &[&str]) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = tokio::process::Command::new(crate::common::bin())
            .args(args)
            .arg(format!("127.0.0.1:{port}"))
            .args(more)
            .env_remove("PLANMUX_CONFIG")
            .current_dir(std::env::temp_dir())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(Self {
                    port,
                    _child: child,
                });
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        anyhow::bail!("planmux {args:?} did not listen on port {port}")
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// The JSON summary a client script printed, once it exited well (its output otherwise).
pub fn summary_of(out: &std::process::Output) -> anyhow::Result<serde_json::Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary: serde_json::Value = serde_json::from_str(stdout.trim())
        .map_err(|e| anyhow::anyhow!("{e}: {stdout} {stderr}"))?;
    anyhow::ensure!(out.status.success(), "{summary} {stderr}");
    Ok(summary)
}
