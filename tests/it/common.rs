//! Shared harness for the end-to-end and interop tests: the real `planmux` binary as a
//! child process, driven by rmcp's client, with real downstream processes.
#![allow(deprecated)] // sampling, roots and logging are deprecated by SEP-2577

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    Implementation, JsonObject, ListRootsResult, LoggingMessageNotificationParam,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_planmux")
}

/// A stdio server entry running a built-in demo as a real child process.
pub fn demo_server(name: &str, demo: &str, extra: &str) -> String {
    format!(
        "[servers.{name}]\ncommand = \"{}\"\nargs = [\"demo\", \"{demo}\"]\n{extra}\n",
        bin()
    )
}

/// What the client saw besides responses.
#[derive(Default)]
pub struct Seen {
    pub progress: Vec<ProgressNotificationParam>,
    pub list_changed: usize,
    pub logs: Vec<Value>,
    /// The message of each elicitation request.
    pub elicitations: Vec<String>,
    /// The URI of each `notifications/resources/updated`.
    pub updated: Vec<String>,
}

/// How a capable [`Recorder`] answers elicitation.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub enum Elicit {
    /// Accept, with `{"name": "Ada", "confirm": true}`.
    #[default]
    Accept,
    Decline,
    Cancel,
    /// Never answer.
    Hang,
}

/// A client handler that records notifications. With `capable`, it also declares and
/// answers sampling, elicitation and roots with canned answers.
#[derive(Clone, Default)]
pub struct Recorder {
    pub seen: Arc<Mutex<Seen>>,
    pub capable: bool,
    pub elicit: Elicit,
    /// The host's roots as URIs (`file:///work` when empty).
    pub roots: Arc<Mutex<Vec<String>>>,
    /// The `clientInfo.name` it connects with (`planmux-tests` when `None`).
    pub name: Option<&'static str>,
    /// With `capable`, declare both elicitation modes (form and URL).
    pub url_elicitation: bool,
    /// Declare the tasks extension (SEP-2663): it holds the tasks of its calls.
    pub tasks: bool,
}

impl Recorder {
    /// The messages of the form elicitations asked so far, in order.
    pub fn elicitations(&self) -> Vec<String> {
        self.seen
            .lock()
            .map(|s| s.elicitations.clone())
            .unwrap_or_default()
    }

    /// The progress notifications heard so far, in order.
    #[allow(dead_code)]
    pub fn progress(&self) -> Vec<ProgressNotificationParam> {
        self.seen
            .lock()
            .map(|s| s.progress.clone())
            .unwrap_or_default()
    }
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.capable {
            let mut caps = ClientCapabilities::builder()
                .enable_roots()
                .enable_sampling()
                .enable_elicitation()
                .build();
            if self.url_elicitation {
                let mut modes = rmcp::model::ElicitationCapability::default();
                modes.form = Some(rmcp::model::FormElicitationCapability::default());
                modes.url = Some(rmcp::model::UrlElicitationCapability::default());
                caps.elicitation = Some(modes);
            }
            caps
        } else {
            ClientCapabilities::default()
        };
        let capabilities = if self.tasks {
            let mut caps = capabilities;
            caps.extensions.get_or_insert_default().insert(
                rmcp::model::TASKS_EXTENSION_ID.to_owned(),
                rmcp::model::JsonObject::new(),
            );
            caps
        } else {
            capabilities
        };
        let name = self.name.unwrap_or("planmux-tests");
        ClientConfig::new(capabilities, Implementation::new(name, "0"))
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        serde_json::from_value(serde_json::json!({
            "model": "canned-model", "role": "assistant",
            "content": {"type": "text", "text": "hi from the host"}
        }))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let (Ok(mut seen), ElicitRequestParams::FormElicitationParams { message, .. }) =
            (self.seen.lock(), &params)
        {
            seen.elicitations.push(message.clone());
        }
        let answer = match self.elicit {
            Elicit::Accept => {
                serde_json::json!({"action": "accept", "content": {"name": "Ada", "confirm": true}})
            }
            Elicit::Decline => serde_json::json!({"action": "decline"}),
            Elicit::Cancel => serde_json::json!({"action": "cancel"}),
            Elicit::Hang => std::future::pending().await,
        };
        serde_json::from_value(answer).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn list_roots(
        &self,
        _: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let mut uris = self.roots.lock().map(|r| r.clone()).unwrap_or_default();
        if uris.is_empty() {
            uris.push("file:///work".into());
        }
        let roots: Vec<Value> = uris
            .iter()
            .map(|uri| serde_json::json!({"uri": uri, "name": "root"}))
            .collect();
        serde_json::from_value(serde_json::json!({ "roots": roots }))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.logs
                .push(serde_json::to_value(&params).unwrap_or_default());
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.progress.push(params);
        }
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.list_changed += 1;
        }
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.updated.push(params.uri);
        }
    }
}

/// planmux running as a child process, with a connected client.
pub struct Proxy {
    pub client: RunningService<RoleClient, Recorder>,
    pub recorder: Recorder,
    pub pid: u32,
    pub dir: tempfile::TempDir,
}

impl Proxy {
    /// The names `tools/list` gives, in order.
    pub async fn tool_names(&self) -> anyhow::Result<Vec<String>> {
        let tools = self.client.list_all_tools().await?;
        Ok(tools.into_iter().map(|t| t.name.to_string()).collect())
    }

    /// `planmux COMMAND --config` on this proxy's servers.toml, to run beside it.
    pub fn command(&self, command: &str) -> std::process::Command {
        let mut cmd = std::process::Command::new(bin());
        cmd.arg(command)
            .arg("--config")
            .arg(self.dir.path().join("servers.toml"));
        cmd
    }

    /// The process id the `chaos__pid` tool of a chaos demo child reports (0 if none).
    pub async fn chaos_pid(&self) -> anyhow::Result<i64> {
        let result = self
            .client
            .call_tool(call("chaos__pid", serde_json::json!({})))
            .await?;
        Ok(result
            .structured_content
            .and_then(|v| v["pid"].as_i64())
            .unwrap_or(0))
    }

    /// Waits until planmux, started by [`start_logged`], has logged `text`.
    pub async fn logged(&self, text: &str) -> bool {
        logged(&self.dir.path().join(LOG), text).await
    }
}

/// Where [`start_logged`] keeps planmux's stderr, in the proxy's folder.
pub const LOG: &str = "planmux.log";

/// Waits (up to 20 s) until the log at `path` holds `text`. What a test proves by a
/// thing *not* changing (a refused reload, a lock that stays in force) it proves after
/// planmux said it looked, not after a guess at how long looking takes.
pub async fn logged(path: &Path, text: &str) -> bool {
    eventually(Duration::from_secs(20), || {
        std::fs::read_to_string(path).is_ok_and(|log| log.contains(text))
    })
    .await
}

/// [`start_logged`] with a given client handler.
pub async fn start_logged_with(config: &str, recorder: Recorder) -> anyhow::Result<Proxy> {
    spawn(config, recorder, true).await
}

/// Writes `config` to a temp folder and starts `planmux serve --config` on it.
pub async fn start(config: &str) -> anyhow::Result<Proxy> {
    start_with(config, Recorder::default()).await
}

/// [`start`] with a given client handler.
pub async fn start_with(config: &str, recorder: Recorder) -> anyhow::Result<Proxy> {
    spawn(config, recorder, false).await
}

/// [`start`] with planmux's stderr kept in [`LOG`], for [`Proxy::logged`].
pub async fn start_logged(config: &str) -> anyhow::Result<Proxy> {
    spawn(config, Recorder::default(), true).await
}

async fn spawn(config: &str, recorder: Recorder, keep_log: bool) -> anyhow::Result<Proxy> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("servers.toml");
    std::fs::write(&path, config)?;
    let stderr = if keep_log {
        std::fs::File::create(dir.path().join(LOG))?.into()
    } else {
        std::process::Stdio::inherit()
    };
    let mut cmd = tokio::process::Command::new(bin());
    cmd.arg("serve").arg("--config").arg(&path);
    // What servers list is remembered in the test's own folder, not the user's cache.
    cmd.env("PLANMUX_CACHE_DIR", dir.path().join("cache"));
    let (transport, _) = TokioChildProcess::builder(cmd).stderr(stderr).spawn()?;
    let pid = transport.id().ok_or_else(|| anyhow::anyhow!("no pid"))?;
    let client = recorder.clone().serve(transport).await?;
    Ok(Proxy {
        client,
        recorder,
        pid,
        dir,
    })
}

/// Connects straight to a downstream server, for comparisons with the proxied path.
pub async fn direct(
    command: &str,
    args: &[&str],
) -> anyhow::Result<RunningService<RoleClient, Recorder>> {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()?;
    Ok(Recorder::default().serve(transport).await?)
}

/// A host's `tools/call` of `tool` with `args` under `id`, as one JSON-RPC line.
pub fn call_line(id: u64, tool: &str, args: Value) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": args}})
    .to_string()
}

/// `tools/call` parameters from a name and a JSON object literal.
pub fn call(name: &str, args: Value) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(name.to_string());
    params.arguments = match args {
        Value::Object(map) => Some(map),
        _ => Some(JsonObject::new()),
    };
    params
}

/// The result as JSON, for whole-value comparisons.
pub fn json(result: &CallToolResult) -> Value {
    serde_json::to_value(result).unwrap_or(Value::Null)
}

/// The text of the first text content block.
pub fn text(result: &CallToolResult) -> String {
    json(result)["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Every descendant of `pid` (children, grandchildren, …) that exists now.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(ppid) = stat_field(child, 1).and_then(|s| s.parse().ok()) {
                parents.push((child, ppid));
            }
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// Field `n` (0 = state, 1 = ppid) after the command name of /proc/PID/stat.
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    after.split_whitespace().nth(n).map(str::to_string)
}

/// Whether a process exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    stat_field(pid, 0).is_some_and(|state| state != "Z" && state != "X")
}

/// Waits until `check` holds, up to `limit`.
pub async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}

/// Where the interop npm packages are installed (by `scripts/test`).
pub fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

/// Calls `tool` on `proxy` (a chaos server's `count`) until its `cancelled` count reaches
/// `n`, for up to 2.5 s: a downstream's cancellation is asynchronous.
pub async fn wait_for_cancelled(proxy: &Proxy, tool: &str, n: u64) -> anyhow::Result<bool> {
    for _ in 0..50 {
        let count = proxy
            .client
            .call_tool(call(tool, Value::Object(JsonObject::new())))
            .await?;
        if count
            .structured_content
            .is_some_and(|c| c["cancelled"] == n)
        {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(false)
}

/// `planmux serve` on `config` with raw pipes, to send what no well-behaved client would.
pub struct RawProxy {
    pub child: std::process::Child,
    pub stdin: std::process::ChildStdin,
    pub stdout: std::io::BufReader<std::process::ChildStdout>,
    /// The notifications [`Self::answer`] passed over, in order.
    pub notified: Vec<Value>,
    _dir: tempfile::TempDir,
}

impl RawProxy {
    pub fn start(config: &str) -> anyhow::Result<Self> {
        use std::process::{Command, Stdio};
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("servers.toml");
        std::fs::write(&path, config)?;
        let mut child = Command::new(bin())
            .args(["serve", "--config"])
            .arg(&path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdin"))?;
        let stdout = std::io::BufReader::new(
            child
                .stdout
                .take()
                .ok_or_else(|| anyhow::anyhow!("no stdout"))?,
        );
        Ok(Self {
            child,
            stdin,
            stdout,
            notified: Vec::new(),
            _dir: dir,
        })
    }

    /// Writes one line.
    /// The `initialize` handshake (protocol 2025-11-25), then `tools/list` (id 2), whose
    /// answer it returns: by then the servers are up.
    pub fn list_tools(&mut self) -> anyhow::Result<Value> {
        self.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#)?;
        for _ in 0..50 {
            let message = self.read()?;
            if message["id"] == 1 {
                self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
                self.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#)?;
            } else if message["id"] == 2 {
                return Ok(message);
            }
        }
        anyhow::bail!("no tools/list answer")
    }

    pub fn send(&mut self, line: &str) -> anyhow::Result<()> {
        use std::io::Write;
        writeln!(self.stdin, "{line}")?;
        Ok(())
    }

    /// Reads one JSON-RPC message (nested as deeply as planmux lets through).
    pub fn read(&mut self) -> anyhow::Result<Value> {
        use serde::Deserialize;
        use std::io::BufRead;
        let mut line = String::new();
        anyhow::ensure!(
            self.stdout.read_line(&mut line)? > 0,
            "planmux closed stdout"
        );
        let mut parser = serde_json::Deserializer::from_str(&line);
        parser.disable_recursion_limit();
        Ok(Value::deserialize(&mut parser)?)
    }

    /// Sends a request line and reads the next message.
    pub fn exchange(&mut self, line: &str) -> anyhow::Result<Value> {
        self.send(line)?;
        self.read()
    }

    /// Sends a request line and reads the next message that is not a notification (a
    /// `list_changed` may come at any time).
    pub fn answer(&mut self, line: &str) -> anyhow::Result<Value> {
        self.send(line)?;
        loop {
            let message = self.read()?;
            if message.get("id").is_some() || message.get("method").is_none() {
                return Ok(message);
            }
            self.notified.push(message);
        }
    }

    /// Closes stdin and waits for planmux to exit.
    pub fn finish(self) -> anyhow::Result<std::process::ExitStatus> {
        let Self {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        Ok(child.wait()?)
    }
}

impl Proxy {
    /// The progress notifications seen so far for one token, in arrival order.
    pub fn progress_for(
        &self,
        token: &rmcp::model::ProgressToken,
    ) -> Vec<ProgressNotificationParam> {
        self.recorder
            .seen
            .lock()
            .map(|s| {
                s.progress
                    .iter()
                    .filter(|p| &p.progress_token == token)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Sends `tools/call` for `name`, lets it run 300 ms, then cancels it (a
    /// `notifications/cancelled` from the client).
    pub async fn call_then_cancel(
        &self,
        name: &str,
        args: Value,
        reason: &str,
    ) -> anyhow::Result<()> {
        use rmcp::model::{CallToolRequest, ClientRequest};
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(call(name, args)));
        let handle = self
            .client
            .send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options())
            .await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        handle.cancel(Some(reason.into())).await?;
        Ok(())
    }
}

/// The library's files, with their paths under `src/` and their text.
pub fn sources() -> anyhow::Result<Vec<(String, String)>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut folders: Vec<PathBuf> = vec![root.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(folder)? {
            let path = entry?.path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = path.strip_prefix(&root)?.display().to_string();
                files.push((name, std::fs::read_to_string(&path)?));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// A file's code outside its unit tests (a test file is all tests).
pub fn code<'a>(name: &str, text: &'a str) -> &'a str {
    if name.ends_with("tests.rs") || name.contains("tests/") {
        return "";
    }
    text.split("#[cfg(test)]").next().unwrap_or_default()
}
