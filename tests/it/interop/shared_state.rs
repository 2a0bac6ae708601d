//! Several planmux instances on one Redis (`[state] store`, DESIGN §15): a real
//! `redis-server` (Debian's, started here on a free port), the real identity provider of
//! `front_auth` (oidc-provider issuing alice's and bob's JWTs for one audience, as behind
//! a load balancer), and three `planmux serve --http --stateless` instances sharing it.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::front_auth::{Provider, Session, client, serve_for, session_runs};
use super::support::{free_port, toml_str};

type R = anyhow::Result<()>;

/// The URL every instance is known by (tokens name it in `aud`), as behind one balancer.
const AUDIENCE: &str = "https://planmux.example.com/mcp";

/// A `redis-server` on `port`, with nothing written to disk; killed on drop.
struct Redis {
    port: u16,
    child: Option<tokio::process::Child>,
}

impl Redis {
    async fn start(port: u16) -> anyhow::Result<Self> {
        let mut redis = Self { port, child: None };
        redis.restart().await?;
        Ok(redis)
    }

    /// Starts it (again), and waits until it answers.
    async fn restart(&mut self) -> R {
        let child = tokio::process::Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                anyhow::anyhow!("redis-server (scripts/install-interop installs it): {e}")
            })?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .is_err()
        {
            anyhow::ensure!(Instant::now() < deadline, "redis-server did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    async fn kill(&mut self) -> R {
        if let Some(mut child) = self.child.take() {
            child.kill().await?;
        }
        Ok(())
    }
}

/// Writes a note after listing the sandbox: the write needs approval.
fn writing_plan(name: &str) -> Value {
    json!({"name": "execute_plan", "arguments": {"goal": "save a note", "steps": [
        {"id": "list", "tool": "files__list_files"},
        {"id": "save", "tool": "files__write_file",
         "args": {"path": name, "content": "files: ${list}"}}]}})
}

/// The approval a `needs_approval` answer carries, as `approve_plan` takes it back.
fn approval_of(answer: &Value) -> Value {
    let approval = &answer["structuredContent"]["approval"];
    json!({"name": "approve_plan", "arguments":
        {"token": approval["token"], "steps": approval["steps"]}})
}

/// The text of a tool result (or error) as the model reads it.
fn said(answer: &Value) -> String {
    answer.to_string()
}

/// A POST of `initialize` with `token` to `url`: its status and body.
async fn knock(url: &str, token: &str) -> anyhow::Result<(u16, String)> {
    let response = client()
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await?;
    let status = response.status().as_u16();
    Ok((status, response.text().await.unwrap_or_default()))
}

/// Approval tokens, run records and rates are one team's across instances: a token
/// handed out by one is redeemed on another, once (a replay is refused on both, another
/// caller cannot use it), and listed and approved on another's console; a run made on
/// one is read on another by its owner only; a
/// caller's rate counts its requests on both. Redis killed: the requests that need it
/// are refused saying so, the instances keep serving and nothing runs; Redis back: they
/// work again, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_share_approvals_runs_and_rates_through_redis() -> R {
    let mut redis = Redis::start(free_port()).await?;
    let provider = Provider::start(&[AUDIENCE]).await?;
    let store = format!(
        "[state]\nstore = {}\n\n[servers.files]\nbuiltin = \"files\"\ncwd = \"sandbox\"\n",
        toml_str(&format!("redis://127.0.0.1:{}", redis.port))
    );
    let limited = format!("[http]\nrate_limit = \"40/min\"\n{store}");
    let ports = [free_port(), free_port(), free_port()];
    let url = |i: usize| format!("http://127.0.0.1:{}/mcp", ports[i]);
    let stateless = ["--stateless"];
    // a and b count rates; c does not, to show what a store outage does past the rate.
    let a = serve_for(ports[0], AUDIENCE, &provider, &limited, &stateless).await?;
    let b = serve_for(ports[1], AUDIENCE, &provider, &limited, &stateless).await?;
    let c = serve_for(ports[2], AUDIENCE, &provider, &store, &stateless).await?;
    let alice_token = provider.token(0, AUDIENCE).await?;
    let bob_token = provider.token(1, AUDIENCE).await?;
    let alice = async |i: usize| Session::open(&url(i), &alice_token).await;
    let bob = async |i: usize| Session::open(&url(i), &bob_token).await;

    // An approval asked on a, given on b: the plan runs there, once.
    let asked = alice(0)
        .await?
        .ask("tools/call", writing_plan("a.txt"))
        .await?;
    assert_eq!(
        asked["structuredContent"]["status"], "needs_approval",
        "{asked}"
    );
    let approval = approval_of(&asked);
    let stolen = bob(1).await?.ask("tools/call", approval.clone()).await?;
    assert!(
        said(&stolen).contains("unknown approval token"),
        "bob used alice's token: {stolen}"
    );
    let ran = alice(1).await?.ask("tools/call", approval.clone()).await?;
    assert_eq!(ran["structuredContent"]["status"], "succeeded", "{ran}");
    assert!(
        b.1.path().join("sandbox/a.txt").is_file(),
        "b ran the write"
    );
    for i in [0, 1] {
        let replay = alice(i).await?.ask("tools/call", approval.clone()).await?;
        assert!(said(&replay).contains("already used"), "{replay}");
    }
    assert!(!a.1.path().join("sandbox/a.txt").exists(), "a ran it too");

    // The run made on b is alice's on a: listed to her, read by her, not by bob.
    let run_id = ran["structuredContent"]["run_id"]
        .as_str()
        .unwrap_or_default();
    let uri = format!("planmux://runs/{run_id}");
    let hers = session_runs(&url(0), &alice_token).await?;
    assert_eq!(hers, std::slice::from_ref(&uri), "alice's runs on a");
    assert!(session_runs(&url(0), &bob_token).await?.is_empty());
    let read = |session: Session| {
        let uri = uri.clone();
        async move { session.ask("resources/read", json!({"uri": uri})).await }
    };
    let record = read(alice(0).await?).await?;
    assert!(said(&record).contains("files__write_file"), "{record}");
    let refused = read(bob(0).await?).await?;
    assert!(said(&refused).contains("no run record"), "{refused}");

    // Every instance's console lists an approval asked on one (the store's list of
    // them); approved on b's console, the plan runs there, once, and the token then says
    // so on a.
    let asked = alice(0)
        .await?
        .ask("tools/call", writing_plan("console.txt"))
        .await?;
    let token = asked["structuredContent"]["approval"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let console = |i: usize| format!("http://127.0.0.1:{}/console", ports[i]);
    let approvals = async |i: usize| -> anyhow::Result<String> {
        let page = client()
            .get(format!("{}/approvals", console(i)))
            .bearer_auth(&alice_token)
            .send()
            .await?;
        Ok(page.text().await?)
    };
    let page = approvals(1).await?;
    assert!(page.contains(&format!(r#"data-token="{token}""#)), "{page}");
    let csrf = super::console::csrf_of(&page);
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let approved = no_redirects
        .post(format!("{}/approvals/approve", console(1)))
        .bearer_auth(&alice_token)
        .header("origin", format!("http://127.0.0.1:{}", ports[1]))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}&csrf={csrf}"))
        .send()
        .await?;
    assert_eq!(approved.status(), 303, "{}", approved.text().await?);
    assert!(b.1.path().join("sandbox/console.txt").is_file(), "b ran it");
    let page = approvals(0).await?;
    assert!(!page.contains(&token), "still listed on a: {page}");
    let again = alice(0)
        .await?
        .ask("tools/call", approval_of(&asked))
        .await?;
    assert!(said(&again).contains("approved on the console"), "{again}");
    assert!(!a.1.path().join("sandbox/console.txt").exists());

    // Bob's rate counts on both: 40 a minute in all, not 40 on each.
    let (mut admitted, mut limited_on) = (0, [false; 2]);
    for n in 0..90 {
        let (status, _) = knock(&url(n % 2), &bob_token).await?;
        match status {
            200 => admitted += 1,
            429 => limited_on[n % 2] = true,
            other => anyhow::bail!("status {other}"),
        }
    }
    assert!(
        admitted <= 44 && limited_on == [true, true],
        "{admitted} admitted, limited on {limited_on:?}"
    );

    // Redis gone: each request that needs it is refused, naming the store; nothing runs.
    redis.kill().await?;
    let named = format!("the state store (redis://127.0.0.1:{}/0)", redis.port);
    let (status, body) = knock(&url(0), &alice_token).await?;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains(&named) && body.contains("rate_limit"),
        "{body}"
    );
    let on_c = alice(2).await?;
    let asked = on_c.ask("tools/call", writing_plan("c.txt")).await?;
    assert!(
        said(&asked).contains(&named) && said(&asked).contains("nothing ran"),
        "{asked}"
    );
    let refused = on_c.ask("tools/call", approval.clone()).await?;
    assert!(said(&refused).contains(&named), "{refused}");
    let unread = read(alice(2).await?).await?;
    assert!(said(&unread).contains(&named), "{unread}");
    assert!(!c.1.path().join("sandbox/c.txt").exists());
    let health = client()
        .get(format!("http://127.0.0.1:{}/health", ports[0]))
        .send()
        .await?;
    assert!(health.status().is_success(), "a stopped serving");

    // Redis back (empty): the instances use it again, without a restart.
    redis.restart().await?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while knock(&url(0), &alice_token).await?.0 != 200 {
        anyhow::ensure!(Instant::now() < deadline, "a never used Redis again");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let asked = alice(2)
        .await?
        .ask("tools/call", writing_plan("c.txt"))
        .await?;
    let ran = alice(0)
        .await?
        .ask("tools/call", approval_of(&asked))
        .await?;
    assert_eq!(ran["structuredContent"]["status"], "succeeded", "{ran}");
    assert!(a.1.path().join("sandbox/c.txt").is_file());
    for (_, dir) in [&a, &b, &c] {
        let log = std::fs::read_to_string(dir.path().join("stderr.log"))?;
        assert!(!log.contains("panicked"), "{log}");
    }
    Ok(())
}

/// A 2026-07-28 tools/call of `params` to `url` (no session), its `_meta` added: the
/// JSON-RPC answer's `result` or `error`.
async fn call_2026(url: &str, mut params: Value) -> anyhow::Result<Value> {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}
    });
    let name = params["name"].as_str().unwrap_or_default().to_owned();
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params});
    let text = client()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", name)
        .body(body.to_string())
        .send()
        .await?
        .text()
        .await?;
    let line = (text.lines())
        .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
        .find(|l| l.contains("\"id\":5"))
        .unwrap_or(text.trim());
    let answer: Value = serde_json::from_str(line).map_err(|e| anyhow::anyhow!("{e}: {text}"))?;
    Ok(answer
        .get("result")
        .or(answer.get("error"))
        .cloned()
        .unwrap_or(answer))
}

/// What planmux hands a host sealed is sealed with the store's key: a 2026-07-28 host's
/// input round started on one instance (the server's `requestState` sealed by it) ends on
/// another, both in front of one HTTP server (the conformance fixture, which keeps its
/// calls' state between rounds); an instance with a key of its own refuses that state.
/// The instances start before Redis does: until they have read the key they seal
/// nothing, and say why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_round_started_on_one_instance_ends_on_another() -> R {
    use super::support::Listening;
    let mut redis = Redis {
        port: free_port(),
        child: None,
    };
    let fixture = Listening::start(&["demo", "conformance", "--http"], &[]).await?;
    let dir = tempfile::tempdir()?;
    let server = format!(
        "[servers.conformance]\nurl = {}\nnamespace = false\n",
        toml_str(&fixture.url())
    );
    let shared = dir.path().join("shared.toml");
    let own = dir.path().join("own.toml");
    let store = format!("redis://127.0.0.1:{}", redis.port);
    std::fs::write(
        &shared,
        format!("[state]\nstore = {}\n{server}", toml_str(&store)),
    )?;
    std::fs::write(&own, &server)?;
    let start = |config: &std::path::Path| {
        let config = config.to_string_lossy().into_owned();
        async move {
            Listening::start(&["serve", "--http"], &["--stateless", "--config", &config]).await
        }
    };
    let (a, b, apart) = (
        start(&shared).await?,
        start(&shared).await?,
        start(&own).await?,
    );

    let call = json!({"name": "test_input_required_result_request_state", "arguments": {}});
    let early = call_2026(&a.url(), call.clone()).await?;
    assert!(
        said(&early).contains("its key is in the state store, which planmux has not reached yet"),
        "{early}"
    );
    redis.restart().await?;
    // The instances read the shared key within a second of Redis answering.
    let deadline = Instant::now() + Duration::from_secs(20);
    let asked = loop {
        let asked = call_2026(&a.url(), call.clone()).await?;
        if asked["resultType"] == "input_required" || Instant::now() > deadline {
            break asked;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let state = asked["requestState"].clone();
    assert!(state.is_string(), "{asked}");
    let mut retry = call.clone();
    retry["inputResponses"] = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    retry["requestState"] = state;
    let refused = call_2026(&apart.url(), retry.clone()).await?;
    assert!(said(&refused).contains("requestState refused"), "{refused}");
    // b may read the key a moment after a: a retry it cannot check yet is refused, and
    // nothing reached the server.
    let answered = loop {
        let answered = call_2026(&b.url(), retry.clone()).await?;
        if !said(&answered).contains("not reached yet") || Instant::now() > deadline {
            break answered;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(said(&answered).contains("state-ok"), "{answered}");
    Ok(())
}
