//! OAuth end to end: a real OAuth-protected MCP server behind a real authorization server,
//! both local (tests/interop/oauth): panva's oidc-provider (as.mjs, on the Node 22 of
//! tests/interop) with dynamic registration, PKCE, RFC 8707 JWT access tokens and rotating
//! refresh tokens, and a FastMCP server (mcp_server.py, in tests/interop/.venv-peers) that
//! verifies them. A headless browser (browser.py) logs in as `alice` and consents.
//!
//! One test walks a user's whole story, in order, on one set of servers: a denied consent
//! and a hanging token endpoint fail `planmux login` cleanly; `planmux login` signs in;
//! `planmux serve` lists the remote tools and runs a plan across them and a local server;
//! the access token renews itself; a revoked sign-in makes calls say "sign in again";
//! a new `planmux login` makes the same serve work again; an outage after that is not
//! taken for a sign-in problem; two serve processes renew the same rotating refresh token
//! without killing it; and no token or code shows up in what planmux prints or logs, at
//! `RUST_LOG=trace`.
//!
//! `PLANMUX_TEST_KEEP=1` keeps the test's folder (every process's log, the sign-in store).

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rmcp::model::CallToolResult;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::support::{Timer, free_port, toml_str};
use crate::common::{self, Recorder, call, text};

type R = anyhow::Result<()>;

/// The access tokens' lifetime. rmcp renews a token 30 s before it runs out, so every
/// call made more than 2 s after the last renewal renews it: "expiry" comes within
/// seconds, and an access token the server would still take never hides a revocation
/// for long.
const AT_TTL: u64 = 32;
/// rmcp renews a token when fewer than this many seconds of it are left.
const RENEWAL_BUFFER: u64 = 30;
/// What a call to the signed-out server answers (src/oauth.rs, `sign_in_message`).
const SIGN_IN_AGAIN: &str = "server 'remote' needs you to sign in again";

fn oauth_dir() -> PathBuf {
    common::interop_dir().join("oauth")
}

/// A prerequisite of this test, or a failure that says how to install it.
fn installed(path: PathBuf, what: &str) -> PathBuf {
    assert!(
        path.exists(),
        "OAuth interop test prerequisite missing: {what} ({} does not exist): run \
         scripts/install-interop (npm ci --prefix tests/interop and tests/interop/oauth, \
         and the venv tests/interop/.venv-peers), then rerun the tests",
        path.display()
    );
    path
}

/// The authorization server and the MCP server on free loopback ports, and a folder with
/// servers.toml (the remote server, its tools read-only so that plans run without an
/// approval, and a built-in demo), planmux's data folder (`XDG_DATA_HOME`) and the logs.
/// Both servers are killed when it is dropped.
pub(super) struct Fixture {
    dir: tempfile::TempDir,
    as_port: u16,
    mcp_url: String,
    python: PathBuf,
    authorization_server: tokio::process::Child,
    mcp_server: tokio::process::Child,
}

impl Fixture {
    pub(super) async fn start() -> anyhow::Result<Self> {
        let node = installed(
            common::interop_dir().join("node_modules/.bin/node"),
            "Node 22 (npm package `node`)",
        );
        installed(
            oauth_dir().join("node_modules/oidc-provider/package.json"),
            "npm package oidc-provider",
        );
        let python = installed(
            common::interop_dir().join(".venv-peers/bin/python"),
            "the venv with fastmcp",
        );
        let mut dir = tempfile::tempdir()?;
        // PLANMUX_TEST_KEEP=1 keeps the folder: every process's log (serve's at trace
        // level) and the sign-in store, to read after a failure.
        if std::env::var_os("PLANMUX_TEST_KEEP").is_some() {
            dir.disable_cleanup(true);
            eprintln!("oauth e2e: keeping {}", dir.path().display());
        }
        let (as_port, mcp_port) = (free_port(), free_port());
        let mcp_url = format!("http://127.0.0.1:{mcp_port}/mcp");
        let log = |name: &str| -> anyhow::Result<Stdio> {
            Ok(std::fs::File::create(dir.path().join(name))?.into())
        };
        let authorization_server = tokio::process::Command::new(node)
            .arg(oauth_dir().join("as.mjs"))
            .env("AS_PORT", as_port.to_string())
            .env("MCP_RESOURCE", &mcp_url)
            .env("AT_TTL", AT_TTL.to_string())
            .stdin(Stdio::null())
            .stdout(log("as.log")?)
            .stderr(log("as.err")?)
            .kill_on_drop(true)
            .spawn()?;
        let mcp_server = spawn_mcp_server(&python, dir.path(), as_port, mcp_port)?;
        std::fs::write(
            dir.path().join("servers.toml"),
            format!(
                "[servers.remote]\nurl = {}\ntiers = {{ \"*\" = \"read\" }}\n\n\
                 [servers.metrics]\nbuiltin = \"metrics\"\n",
                toml_str(&mcp_url)
            ),
        )?;
        let mut fixture = Self {
            dir,
            as_port,
            mcp_url,
            python,
            authorization_server,
            mcp_server,
        };
        fixture.wait_until_up().await?;
        Ok(fixture)
    }

    /// Waits (up to 30 s) for the authorization server's metadata and the MCP server's
    /// protected-resource metadata.
    async fn wait_until_up(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mcp_port = self.mcp_port();
        loop {
            let exited = match (
                self.authorization_server.try_wait()?,
                self.mcp_server.try_wait()?,
            ) {
                (Some(status), _) => Some(("as.mjs", status)),
                (_, Some(status)) => Some(("mcp_server.py", status)),
                _ => None,
            };
            if let Some((name, status)) = exited {
                anyhow::bail!("{name} exited with {status}:\n{}", self.logs());
            }
            let metadata = http(
                self.as_port,
                "GET",
                "/.well-known/oauth-authorization-server",
            )
            .await
            .ok();
            let resource = http(mcp_port, "GET", "/.well-known/oauth-protected-resource/mcp")
                .await
                .ok();
            if metadata.is_some_and(|(status, _)| status == 200)
                && resource.is_some_and(|(status, _)| status == 200)
            {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the OAuth servers were not up within 30 s:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops the MCP server.
    async fn stop_mcp_server(&mut self) -> anyhow::Result<()> {
        self.mcp_server.kill().await?;
        Ok(())
    }

    /// Starts the MCP server again on its port: a new process that knows none of
    /// planmux's sessions.
    async fn start_mcp_server(&mut self) -> anyhow::Result<()> {
        self.mcp_server =
            spawn_mcp_server(&self.python, self.dir.path(), self.as_port, self.mcp_port())?;
        self.wait_until_up().await
    }

    fn mcp_port(&self) -> u16 {
        self.mcp_url
            .trim_start_matches("http://127.0.0.1:")
            .trim_end_matches("/mcp")
            .parse()
            .unwrap_or_default()
    }

    /// Both servers' output, for a failure.
    pub(super) fn logs(&self) -> String {
        ["as.log", "as.err", "mcp.log", "mcp.err"]
            .iter()
            .map(|name| {
                let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(30).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                format!("--- {name} ---\n{}", tail.join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A test-only route of the authorization server (as.mjs), as JSON.
    pub(super) async fn admin(&self, method: &str, path: &str) -> anyhow::Result<Value> {
        let (status, body) = http(self.as_port, method, path).await?;
        anyhow::ensure!(status == 200, "{method} {path}: HTTP {status}: {body}");
        Ok(serde_json::from_str(&body)?)
    }

    /// What the authorization server issued and refused so far (GET /admin/seen).
    async fn seen(&self) -> anyhow::Result<Value> {
        self.admin("GET", "/admin/seen").await
    }

    /// How many refresh-token requests the authorization server granted.
    async fn refreshes(&self) -> anyhow::Result<u64> {
        Ok(self.seen().await?["grants"]["refresh_token"]
            .as_u64()
            .unwrap_or(0))
    }

    /// How many refresh-token requests the authorization server refused with invalid_grant.
    pub(super) async fn refused_refreshes(&self) -> anyhow::Result<u64> {
        Ok(self.seen().await?["refused"]["refresh_token:invalid_grant"]
            .as_u64()
            .unwrap_or(0))
    }

    /// planmux's data folder, shared by every planmux process of the test.
    pub(super) fn data_home(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The sign-in folder and the remote server's record in it, if there is one.
    fn store_folder(&self) -> PathBuf {
        self.data_home().join("planmux/oauth")
    }

    fn store_file(&self) -> Option<PathBuf> {
        std::fs::read_dir(self.store_folder())
            .ok()?
            .flatten()
            .map(|entry| entry.path())
            .find(|path| {
                let name = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default();
                name.starts_with("remote-") && name.ends_with(".json")
            })
    }

    /// The remote server's record, as JSON (`null` when there is none).
    fn record(&self) -> Value {
        self.store_file()
            .and_then(|path| std::fs::read_to_string(path).ok())
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or(Value::Null)
    }

    /// The browser command: browser.py with `flags`, on the venv's Python.
    pub(super) fn browser(&self, flags: &str) -> String {
        format!(
            "{} {} {flags}",
            self.python.display(),
            oauth_dir().join("browser.py").display()
        )
    }

    /// `planmux ARGS --config servers.toml` with this fixture's data folder, cache and
    /// browser; `RUST_LOG` as given.
    pub(super) fn planmux(
        &self,
        args: &[&str],
        browser: &str,
        rust_log: &str,
    ) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(common::bin());
        command
            .arg("--config")
            .arg(self.dir.path().join("servers.toml"))
            .args(args)
            .env("XDG_DATA_HOME", self.data_home())
            .env("PLANMUX_CACHE_DIR", self.dir.path().join("cache"))
            .env("BROWSER", browser)
            .env("RUST_LOG", rust_log)
            .env("NO_COLOR", "1")
            // Never the desktop's keychain (oauth_keychain.rs starts a keychain of its own).
            .env("PLANMUX_KEYCHAIN", "off")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .env_remove("PLANMUX_CONFIG")
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    /// Runs a planmux command to its end (within 60 s).
    async fn run(&self, args: &[&str], browser: &str, rust_log: &str) -> anyhow::Result<Output> {
        let run = self.planmux(args, browser, rust_log).output();
        tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .map_err(|_| anyhow::anyhow!("planmux {args:?} did not finish within 60 s"))?
            .map_err(Into::into)
    }

    /// `planmux login remote` with the headless browser (`flags` for it).
    pub(super) async fn login(
        &self,
        extra: &[&str],
        flags: &str,
        rust_log: &str,
    ) -> anyhow::Result<Output> {
        let mut args = vec!["login", "remote"];
        args.extend_from_slice(extra);
        self.run(&args, &self.browser(flags), rust_log).await
    }

    /// `planmux serve` with an MCP client; its stderr goes to `serve-NAME.log`.
    async fn serve(&self, name: &str, rust_log: &str) -> anyhow::Result<Serve> {
        let log = self.dir.path().join(format!("serve-{name}.log"));
        let mut command = self.planmux(&["serve"], "false", rust_log);
        command.stdin(Stdio::piped());
        let (transport, _) = TokioChildProcess::builder(command)
            .stderr(std::fs::File::create(&log)?)
            .spawn()?;
        let client = Recorder::default().serve(transport).await?;
        Ok(Serve { client, log })
    }
}

/// mcp_server.py on `mcp_port`, trusting the authorization server on `as_port`; its output
/// appended to `mcp.log` and `mcp.err` in `dir`.
fn spawn_mcp_server(
    python: &Path,
    dir: &Path,
    as_port: u16,
    mcp_port: u16,
) -> anyhow::Result<tokio::process::Child> {
    let log = |name: &str| -> anyhow::Result<Stdio> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(name))?;
        Ok(file.into())
    };
    Ok(tokio::process::Command::new(python)
        .arg(oauth_dir().join("mcp_server.py"))
        .args(["--port", &mcp_port.to_string()])
        .args(["--as-url", &format!("http://127.0.0.1:{as_port}")])
        .stdin(Stdio::null())
        .stdout(log("mcp.log")?)
        .stderr(log("mcp.err")?)
        .kill_on_drop(true)
        .spawn()?)
}

/// `planmux serve` with a connected client.
struct Serve {
    client: RunningService<RoleClient, Recorder>,
    log: PathBuf,
}

impl Serve {
    async fn call(&self, tool: &str, args: Value) -> anyhow::Result<CallToolResult> {
        let answer = self.client.call_tool(call(tool, args));
        Ok(tokio::time::timeout(Duration::from_secs(40), answer)
            .await
            .map_err(|_| anyhow::anyhow!("{tool} did not answer within 40 s"))??)
    }

    /// `remote__add` of 2 and 3: the answer, checked to be 5 unless it is an error.
    async fn add(&self) -> anyhow::Result<CallToolResult> {
        let result = self.call("remote__add", json!({"a": 2, "b": 3})).await?;
        if result.is_error != Some(true) {
            anyhow::ensure!(
                result.structured_content == Some(json!({"result": 5})),
                "remote__add answered {}",
                common::json(&result)
            );
        }
        Ok(result)
    }

    async fn tool_names(&self) -> anyhow::Result<Vec<String>> {
        let tools = self.client.list_all_tools().await?;
        Ok(tools.into_iter().map(|t| t.name.to_string()).collect())
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// How many `tools/list_changed` the host heard from `serve`.
fn list_changed(serve: &Serve) -> usize {
    serve
        .client
        .service()
        .seen
        .lock()
        .map(|seen| seen.list_changed)
        .unwrap_or(0)
}

/// One HTTP/1.1 request with an empty body to 127.0.0.1:`port`: the status and the body.
async fn http(port: u16, method: &str, path: &str) -> anyhow::Result<(u16, String)> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        anyhow::Ok(String::from_utf8_lossy(&answer).into_owned())
    };
    let answer = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| anyhow::anyhow!("{method} {path} on port {port}: no answer in 10 s"))??;
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

fn out(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn err(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn both(output: &Output) -> String {
    format!(
        "exit {}\n--- stdout ---\n{}--- stderr ---\n{}",
        output.status,
        out(output),
        err(output)
    )
}

/// Waits until the kept token is old enough that the next call renews it: rmcp counts
/// whole seconds since `token_received_at` and renews once fewer than
/// [`RENEWAL_BUFFER`] of [`AT_TTL`] are left.
pub(super) async fn until_renewal_due(fixture: &Fixture) {
    let received = fixture.record()["credentials"]["token_received_at"]
        .as_u64()
        .unwrap_or(0);
    let due = UNIX_EPOCH
        + Duration::from_secs(received + AT_TTL - RENEWAL_BUFFER + 1)
        + Duration::from_millis(100);
    if let Ok(wait) = due.duration_since(SystemTime::now()) {
        tokio::time::sleep(wait).await;
    }
}

/// The texts, none of which may hold any of `secrets`; the name of the first that does.
fn leaked<'a>(texts: &[(&'a str, &str)], secrets: &[String]) -> Option<(&'a str, String)> {
    texts.iter().find_map(|(name, text)| {
        secrets
            .iter()
            .find(|secret| text.contains(secret.as_str()))
            .map(|secret| (*name, format!("{}…", &secret[..secret.len().min(12)])))
    })
}

#[tokio::test]
async fn oauth_login_serve_refresh_revoke_and_two_processes_against_a_real_authorization_server()
-> R {
    let _t = Timer::start("oauth_end_to_end");
    let started = Instant::now();
    let mut fixture = Fixture::start().await?;
    let step = |what: &str| {
        eprintln!(
            "oauth e2e: {:>5.1} s  {what}",
            started.elapsed().as_secs_f64()
        )
    };
    step("authorization server and MCP server up");

    // 1. The user presses Cancel on the consent page: login fails, says so, keeps no token.
    let denied = fixture
        .login(&["--timeout", "30"], "--deny", "info")
        .await?;
    assert!(!denied.status.success(), "{}", both(&denied));
    assert!(
        err(&denied).contains("access_denied"),
        "the refusal is named: {}",
        both(&denied)
    );
    let record = fixture.record();
    assert!(
        record.get("credentials").is_none() && !record.to_string().contains("access_token"),
        "a refused sign-in keeps no token: {record:#}"
    );
    step(&format!(
        "denied consent: login failed: {}",
        err(&denied).lines().last().unwrap_or_default()
    ));

    // 2. The token endpoint hangs: login fails within its --timeout, keeps no token.
    fixture.admin("POST", "/admin/hang-token?on=1").await?;
    let asked = Instant::now();
    let hung = fixture.login(&["--timeout", "3"], "", "info").await?;
    let took = asked.elapsed();
    fixture.admin("POST", "/admin/hang-token?on=0").await?;
    assert!(!hung.status.success(), "{}", both(&hung));
    assert!(
        took < Duration::from_secs(12),
        "login with --timeout 3 took {took:?}: {}",
        both(&hung)
    );
    assert!(
        err(&hung).contains("did not answer the token request")
            && err(&hung).contains("planmux login remote"),
        "the failure says what hung and what to do: {}",
        both(&hung)
    );
    assert!(
        fixture.record().get("credentials").is_none(),
        "a sign-in whose token request hung keeps no token: {:#}",
        fixture.record()
    );
    step(&format!(
        "hanging token endpoint: login failed after {took:.1?}: {}",
        err(&hung).lines().last().unwrap_or_default()
    ));

    // 3. planmux login, headless: signed in, the record readable only by the user.
    let login = fixture.login(&[], "", "trace").await?;
    assert!(login.status.success(), "{}", both(&login));
    assert!(
        out(&login).contains("signed in to 'remote'"),
        "{}",
        both(&login)
    );
    let store = fixture.store_file().ok_or_else(|| {
        anyhow::anyhow!("no sign-in record in {}", fixture.store_folder().display())
    })?;
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |path: &Path| {
        std::fs::metadata(path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0)
    };
    assert_eq!(mode(&store), 0o600, "{}", store.display());
    assert_eq!(mode(&fixture.store_folder()), 0o700);
    let record = fixture.record();
    assert_eq!(record["resource"], json!(fixture.mcp_url), "{record:#}");
    let first_token = record["credentials"]["token_response"]["access_token"].clone();
    assert!(first_token.is_string(), "{record:#}");
    assert_eq!(
        fixture.seen().await?["grants"]["authorization_code"],
        json!(1)
    );
    step("signed in");

    // 4. check and tools: the sign-in is shown, no token is.
    let check = fixture.run(&["check"], "false", "warn").await?;
    assert!(
        out(&check).contains("sign-in (OAuth):") && out(&check).contains("remote  signed in"),
        "{}",
        both(&check)
    );
    let tools = fixture.run(&["tools"], "false", "warn").await?;
    assert!(
        out(&tools).contains("remote__whoami") && out(&tools).contains("metrics__query_metric"),
        "{}",
        both(&tools)
    );
    step("check and tools");

    // 5. serve (at RUST_LOG=trace, for step 10): the remote tools beside the local ones,
    // called directly and in one plan with a local tool.
    let first = fixture.serve("first", "trace").await?;
    let names = first.tool_names().await?;
    for tool in [
        "remote__whoami",
        "remote__add",
        "metrics__query_metric",
        "execute_plan",
    ] {
        assert!(names.iter().any(|n| n == tool), "no {tool} in {names:?}");
    }
    let whoami = first.call("remote__whoami", json!({})).await?;
    assert_ne!(whoami.is_error, Some(true), "{}", text(&whoami));
    let claims = whoami.structured_content.clone().unwrap_or_default();
    assert_eq!(claims["sub"], json!("alice"), "{claims:#}");
    assert_eq!(claims["aud"], json!(fixture.mcp_url), "{claims:#}");
    // FastMCP wraps an int answer as {"result": 42}; `sum.result` is the whole output.
    let plan = json!({
        "steps": [
            {"id": "sum", "tool": "remote__add", "args": {"a": 40, "b": 2}},
            {"id": "cpu", "tool": "metrics__query_metric", "args": {"name": "cpu_usage"}},
            {"id": "check", "tool": "metrics__check_threshold",
             "args": {"value": "$ref:sum.result.result", "threshold": "$ref:cpu.current", "op": "lt"}}
        ],
        "outputs": ["sum", "check"]
    });
    let planned = first.call("execute_plan", plan).await?;
    let result = planned.structured_content.clone().unwrap_or_default();
    assert_eq!(result["status"], json!("succeeded"), "{}", text(&planned));
    assert_eq!(
        result["outputs"]["sum"],
        json!({"result": 42}),
        "{result:#}"
    );
    assert_eq!(
        result["outputs"]["check"]["exceeded"],
        json!(true),
        "42 < 72.5: {result:#}"
    );
    step("serve: tools listed, plan across remote and local ran");

    // 6. The access token renews itself: calls keep working and the authorization server
    // sees refresh grants.
    let refreshed_before = fixture.refreshes().await?;
    until_renewal_due(&fixture).await;
    let added = first.add().await?;
    assert_ne!(added.is_error, Some(true), "{}", text(&added));
    let refreshed = fixture.refreshes().await?;
    assert!(
        refreshed > refreshed_before,
        "no refresh grant after the token aged (refreshes: {refreshed_before} → {refreshed}):\n{}",
        fixture.logs()
    );
    let renewed = fixture.record()["credentials"]["token_response"]["access_token"].clone();
    assert_ne!(renewed, first_token, "the kept access token was renewed");
    step(&format!(
        "silent refresh ({refreshed} refresh grants so far)"
    ));

    // 7. The user's grant is revoked at the authorization server: once the access token
    // is due for renewal the renewal is refused, and calls say to sign in again.
    let revoked = fixture.admin("POST", "/admin/revoke?sub=alice").await?;
    assert!(revoked["revoked"].as_u64().unwrap_or(0) > 0, "{revoked}");
    let refused_before = fixture.refused_refreshes().await?;
    until_renewal_due(&fixture).await;
    let refused = first.add().await?;
    assert_eq!(refused.is_error, Some(true), "{}", common::json(&refused));
    let message = text(&refused);
    assert!(
        message.contains(SIGN_IN_AGAIN) && message.contains("`planmux login remote`"),
        "{message}"
    );
    assert_eq!(fixture.refused_refreshes().await?, refused_before + 1);
    // No retries meanwhile: the next calls answer the same without asking the server.
    let again = first.call("remote__whoami", json!({})).await?;
    assert_eq!(again.is_error, Some(true), "{}", common::json(&again));
    assert!(text(&again).contains(SIGN_IN_AGAIN), "{}", text(&again));
    assert_eq!(
        fixture.refused_refreshes().await?,
        refused_before + 1,
        "a signed-out server is not asked again until the user signs in"
    );
    let names = first.tool_names().await?;
    assert!(
        names.iter().any(|n| n == "remote__add"),
        "a signed-out server's tools stay listed: {names:?}"
    );
    let check = fixture.run(&["check"], "false", "warn").await?;
    assert!(
        out(&check).contains("NEEDS LOGIN") && out(&check).contains("planmux login remote"),
        "{}",
        both(&check)
    );
    step("revoked: calls say to sign in again, check says NEEDS LOGIN");

    // 8. A new login in another process: the same serve picks it up by itself (it
    // reconnects the server and tells the host its tools changed), and its next call works.
    let changed_before = list_changed(&first);
    let relogin = fixture.login(&[], "", "info").await?;
    assert!(relogin.status.success(), "{}", both(&relogin));
    let noticed = common::eventually(Duration::from_secs(10), || {
        list_changed(&first) > changed_before
    })
    .await;
    assert!(
        noticed,
        "serve did not reconnect the server within 10 s of the new sign-in (no tools/list_changed)"
    );
    let answer = first.add().await?;
    assert_ne!(answer.is_error, Some(true), "{}", text(&answer));
    step("signed in again: the same serve's calls work");

    // 8b. The server goes away for a while, then comes back: an outage, not a sign-in
    // problem (the earlier sign-out must not colour it), and once the server is back the
    // calls work again without a new login.
    fixture.stop_mcp_server().await?;
    let down = first.add().await?;
    assert_eq!(down.is_error, Some(true), "{}", common::json(&down));
    assert!(
        !text(&down).contains("sign in"),
        "a server that is down is not a sign-in problem: {}",
        text(&down)
    );
    fixture.start_mcp_server().await?;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = first.add().await?;
        if answer.is_error != Some(true) {
            break;
        }
        assert!(
            !text(&answer).contains("sign in"),
            "a restarted server is not a sign-in problem: {}",
            text(&answer)
        );
        assert!(
            Instant::now() < deadline,
            "no working call within 20 s of the server's restart: {}",
            text(&answer)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    step(&format!(
        "the server was down ({}), then back: calls work",
        text(&down)
    ));

    // 9. Two serve processes share the sign-in. The refresh tokens rotate, and a refresh
    // token presented twice makes the authorization server revoke the whole grant: two
    // processes renewing at once with the same refresh token would sign the user out.
    // The token endpoint answers slowly here, so both processes' renewals overlap; the
    // store's refresh lock makes the second wait and renew with the first one's new
    // refresh token. Two calls in each process at once, a few rounds; all work.
    let second = fixture.serve("second", "warn").await?;
    let answer = second.add().await?;
    assert_ne!(answer.is_error, Some(true), "{}", text(&answer));
    let refused_before = fixture.refused_refreshes().await?;
    fixture.admin("POST", "/admin/token-delay?ms=500").await?;
    // A round overlaps when both processes renewed (a process that starts its renewal
    // only after the other's is kept finds a fresh token): two such rounds are wanted,
    // in at most four (a loaded machine may keep one process from the race).
    let mut overlapped = 0;
    for round in 0..4 {
        until_renewal_due(&fixture).await;
        let refreshed_before = fixture.refreshes().await?;
        let (a, b, c, d) = tokio::join!(first.add(), second.add(), first.add(), second.add());
        for (who, answer) in [("first", a), ("second", b), ("first", c), ("second", d)] {
            let answer = answer?;
            assert_ne!(
                answer.is_error,
                Some(true),
                "round {round}, {who}: {}\n{}",
                text(&answer),
                fixture.logs()
            );
        }
        let refreshed = fixture.refreshes().await?;
        assert!(refreshed > refreshed_before, "round {round}: no renewal");
        if refreshed >= refreshed_before + 2 {
            overlapped += 1;
            if overlapped == 2 {
                break;
            }
        }
    }
    assert!(
        overlapped > 0,
        "the two processes never renewed at once in four rounds"
    );
    fixture.admin("POST", "/admin/token-delay?ms=0").await?;
    assert_eq!(
        fixture.refused_refreshes().await?,
        refused_before,
        "no refresh was refused:\n{}",
        fixture.logs()
    );
    let check = fixture.run(&["check"], "false", "warn").await?;
    assert!(
        out(&check).contains("remote  signed in") && !out(&check).contains("NEEDS LOGIN"),
        "{}",
        both(&check)
    );
    step(&format!(
        "two serve processes renewed the same sign-in at once ({overlapped} rounds overlapped)"
    ));

    // 10. No secret anywhere planmux writes: every code, access token and refresh token
    // the authorization server issued (and the ones kept now), against the trace log of
    // the first serve and of the first login, and the output of check and tools.
    let seen = fixture.seen().await?;
    let record = fixture.record();
    let mut secrets: Vec<String> = ["codes", "access_tokens", "refresh_tokens"]
        .iter()
        .flat_map(|kind| seen[kind].as_array().cloned().unwrap_or_default())
        .chain([
            record["credentials"]["token_response"]["access_token"].clone(),
            record["credentials"]["token_response"]["refresh_token"].clone(),
        ])
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    secrets.sort();
    secrets.dedup();
    assert!(
        seen["codes"].as_array().map_or(0, Vec::len) >= 2 && secrets.len() >= 8,
        "the authorization server's record of what it issued: {seen:#}"
    );
    let first_log = first.stderr();
    assert!(
        first_log.contains("TRACE"),
        "serve logged at trace level: {} bytes",
        first_log.len()
    );
    let tools_again = fixture.run(&["tools"], "false", "warn").await?;
    let texts = [
        ("serve's stderr at RUST_LOG=trace", first_log.as_str()),
        ("the second serve's stderr", &second.stderr()),
        ("login's stderr at RUST_LOG=trace", &err(&login)),
        ("login's stdout", &out(&login)),
        ("the second login", &both(&relogin)),
        ("the refused login", &both(&denied)),
        ("the login that timed out", &both(&hung)),
        ("check", &both(&check)),
        ("tools", &both(&tools)),
        ("tools after the renewals", &both(&tools_again)),
    ];
    if let Some((where_, secret)) = leaked(&texts, &secrets) {
        panic!("a token or code ({secret}) shows in {where_}");
    }
    step("no token or code in logs or output");

    first.client.cancel().await?;
    second.client.cancel().await?;
    Ok(())
}
