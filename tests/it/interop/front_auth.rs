//! The HTTP front as an OAuth 2.1 resource server (`[http.auth]`, DESIGN §15), against a
//! real identity provider: panva's oidc-provider (tests/interop/oauth/as.mjs) issuing
//! RS256 JWT access tokens by client credentials to two users in different groups, and
//! the official Python SDK as the host (tests/interop/python_http.py).

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::support::{free_port, python, summary_of, toml_str};
use crate::common;

type R = anyhow::Result<()>;

/// Each user: (client id, secret, groups).
const USERS: [(&str, &str, &str); 2] = [
    ("alice", "alice-secret-0123", "platform+ops"),
    ("bob", "bob-secret-0123456", "dev"),
];
/// Access tokens' lifetime at the provider, in seconds.
const TOKEN_TTL: u64 = 3;

/// One oidc-provider on a free port, issuing tokens for `resources`; killed on drop.
pub(super) struct Provider {
    issuer: String,
    _child: tokio::process::Child,
}

impl Provider {
    pub(super) async fn start(resources: &[&str]) -> anyhow::Result<Self> {
        let port = free_port();
        let users: Vec<String> = USERS
            .iter()
            .map(|(id, secret, groups)| format!("{id}:{secret}:{groups}"))
            .collect();
        let child =
            tokio::process::Command::new(common::interop_dir().join("node_modules/.bin/node"))
                .arg(common::interop_dir().join("oauth/as.mjs"))
                .env("AS_PORT", port.to_string())
                .env("MCP_RESOURCE", resources.join(","))
                .env("AT_TTL", TOKEN_TTL.to_string())
                .env("CC_CLIENTS", users.join(","))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()?;
        let issuer = format!("http://127.0.0.1:{port}");
        wait_for(&format!("{issuer}/.well-known/openid-configuration")).await?;
        Ok(Self {
            issuer,
            _child: child,
        })
    }

    /// A token of `user` for `resource`.
    pub(super) async fn token(&self, user: usize, resource: &str) -> anyhow::Result<String> {
        let (id, secret, _) = USERS[user];
        let answer: Value = client()
            .post(format!("{}/token", self.issuer))
            .basic_auth(id, Some(secret))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!(
                "grant_type=client_credentials&scope=mcp%3Atools&resource={}",
                url::form_urlencoded::byte_serialize(resource.as_bytes()).collect::<String>()
            ))
            .send()
            .await?
            .json()
            .await?;
        answer["access_token"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| anyhow::anyhow!("no token: {answer}"))
    }
}

pub(super) fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// Waits (up to 30 s) until `url` answers.
pub(super) async fn wait_for(url: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if client()
            .get(url)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("{url} did not answer within 30 s")
}

/// A POST to planmux's /mcp with `token`: the status and the `WWW-Authenticate` and body.
async fn post(url: &str, token: Option<&str>) -> anyhow::Result<(u16, String, String)> {
    let mut request = client()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await?;
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.text().await.unwrap_or_default();
    Ok((status, challenge, body))
}

/// `planmux serve --http` on `port` with the weather and chaos demos, taking `provider`'s
/// tokens for its URL, its config starting with `extra`; killed on drop (with its folder).
async fn serve(
    port: u16,
    provider: &Provider,
    extra: &str,
) -> anyhow::Result<(tokio::process::Child, tempfile::TempDir)> {
    let audience = format!("http://127.0.0.1:{port}/mcp");
    serve_for(port, &audience, provider, extra, &[]).await
}

/// `planmux serve --http` on `port` (with `flags`) with the weather and chaos demos,
/// taking `provider`'s tokens for `audience`, its config starting with `extra`; killed on
/// drop (with its folder).
pub(super) async fn serve_for(
    port: u16,
    audience: &str,
    provider: &Provider,
    extra: &str,
    flags: &[&str],
) -> anyhow::Result<(tokio::process::Child, tempfile::TempDir)> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("servers.toml");
    std::fs::write(
        &config,
        format!(
            "{extra}\n[http.auth]\nissuer = {}\naudience = {}\n\n\
             [servers.weather]\nbuiltin = \"weather\"\n\n[servers.chaos]\nbuiltin = \"chaos\"\n",
            toml_str(&provider.issuer),
            toml_str(audience)
        ),
    )?;
    // Its log, for a test to read (`stderr.log` in its folder).
    let log = std::fs::File::create(dir.path().join("stderr.log"))?;
    let planmux = tokio::process::Command::new(common::bin())
        .args(["serve", "--http", &format!("127.0.0.1:{port}")])
        .args(flags)
        .arg("--config")
        .arg(&config)
        .env_remove("PLANMUX_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()?;
    wait_for(&format!("http://127.0.0.1:{port}/health")).await?;
    Ok((planmux, dir))
}

/// A legacy MCP session on planmux's front, opened with a bearer token: raw JSON-RPC.
pub(super) struct Session {
    url: String,
    token: String,
    id: String,
}

impl Session {
    pub(super) async fn open(url: &str, token: &str) -> anyhow::Result<Self> {
        let mut session = Self {
            url: url.to_owned(),
            token: token.to_owned(),
            id: String::new(),
        };
        let init = serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}});
        let opened = session.send(Some(1), "initialize", init).await?;
        session.id = opened
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        opened.text().await?;
        let said = session.send(None, "notifications/initialized", Value::Null);
        said.await?.text().await?;
        Ok(session)
    }

    fn send(
        &self,
        id: Option<u32>,
        method: &str,
        params: Value,
    ) -> impl std::future::Future<Output = reqwest::Result<reqwest::Response>> {
        let mut message = serde_json::json!({"jsonrpc": "2.0", "method": method});
        if let Some(id) = id {
            message["id"] = id.into();
        }
        if !params.is_null() {
            message["params"] = params;
        }
        let mut request = client()
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(message.to_string());
        if !self.id.is_empty() {
            request = request.header("mcp-session-id", &self.id);
        }
        request.send()
    }

    /// The answer (its `result` or `error`) to `method` with `params`.
    pub(super) async fn ask(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let text = self.send(Some(2), method, params).await?.text().await?;
        let line = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|l| l.contains("\"id\":2"))
            .unwrap_or(text.trim());
        let answer: Value =
            serde_json::from_str(line).map_err(|e| anyhow::anyhow!("{method}: {e}: {text}"))?;
        Ok(answer
            .get("result")
            .or(answer.get("error"))
            .cloned()
            .unwrap_or(answer))
    }

    /// The names in `tools/list`.
    async fn tools(&self) -> anyhow::Result<Vec<String>> {
        let listed = self.ask("tools/list", Value::Null).await?;
        Ok(listed["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect())
    }
}

/// The run records a new session of `token`'s holder lists (`planmux://runs/…`).
pub(super) async fn session_runs(url: &str, token: &str) -> anyhow::Result<Vec<String>> {
    let session = Session::open(url, token).await?;
    let listed = session.ask("resources/list", Value::Null).await?;
    Ok(listed["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uri"].as_str())
        .filter(|uri| uri.starts_with("planmux://runs/"))
        .map(str::to_owned)
        .collect())
}

/// Every token `[http.auth]` must refuse is refused with 401 saying why, a good one lets
/// the Python SDK list, plan and call, the front publishes its resource metadata, and each
/// user (the token's `sub`) has a rate and run records of its own.
#[tokio::test]
async fn the_front_takes_only_its_issuers_tokens_for_it() -> R {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let elsewhere = "http://127.0.0.1:9/mcp";
    let provider = Provider::start(&[&url, elsewhere]).await?;
    let stranger = Provider::start(&[&url]).await?;
    let (_planmux, _dir) = serve(port, &provider, "[http]\nrate_limit = \"40/min\"\n").await?;

    // RFC 9728: the metadata, and where a 401 points to it.
    let metadata_url = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");
    let metadata: Value = client().get(&metadata_url).send().await?.json().await?;
    assert_eq!(metadata["resource"], url.as_str(), "{metadata}");
    assert_eq!(
        metadata["authorization_servers"][0],
        provider.issuer.as_str()
    );
    let (status, challenge, _) = post(&url, None).await?;
    assert_eq!(status, 401);
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{metadata_url}\"")
    );

    // A good token: the official Python SDK lists, runs a plan and calls a tool.
    let token = provider.token(0, &url).await?;
    let out = tokio::process::Command::new(python())
        .arg(common::interop_dir().join("python_http.py"))
        .args(["--url", &url, "--token", &token, "--mode", "legacy"])
        .output()
        .await?;
    let summary = summary_of(&out)?;
    assert_eq!(
        summary["plan"]["outputs"]["names"],
        serde_json::json!(["Oslo", "Lima"])
    );

    // The run is alice's, whichever session she opens next; bob's sessions do not list it.
    let runs = |user: usize| {
        let (provider, url) = (&provider, &url);
        async move {
            let token = provider.token(user, url).await?;
            session_runs(url, &token).await
        }
    };
    let alices = runs(0).await?;
    assert_eq!(alices.len(), 1, "{alices:?}");
    assert!(runs(1).await?.is_empty());

    // Tokens to refuse, and why.
    let other_audience = provider.token(0, elsewhere).await?;
    let other_issuer = stranger.token(0, &url).await?;
    let good = provider.token(1, &url).await?;
    let (head, rest) = good.split_once('.').unwrap_or_default();
    let (claims, signature) = rest.split_once('.').unwrap_or_default();
    // One character of the signature changed.
    let mut forged: Vec<char> = signature.chars().collect();
    forged[10] = if forged[10] == 'A' { 'B' } else { 'A' };
    let tampered = format!("{head}.{claims}.{}", forged.into_iter().collect::<String>());
    let unsigned = format!("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.{claims}.");
    for (token, why) in [
        (other_audience.as_str(), "another audience"),
        (
            other_issuer.as_str(),
            "signing key the issuer does not publish",
        ),
        (tampered.as_str(), "signature"),
        (unsigned.as_str(), "not a JWT planmux accepts"),
        ("not-a-token-at-all-0123456789", "not a JWT"),
    ] {
        let (status, challenge, body) = post(&url, Some(token)).await?;
        assert_eq!(status, 401, "{why}: {body}");
        assert!(body.contains(why), "{why}: {body}");
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    }

    // Each user's rate is its own: bob runs out, alice does not.
    let bob = provider.token(1, &url).await?;
    let mut limited = false;
    for _ in 0..41 {
        let (status, _, _) = post(&url, Some(&bob)).await?;
        limited |= status == 429;
    }
    assert!(limited, "bob was never limited");
    let alice = provider.token(0, &url).await?;
    assert_eq!(post(&url, Some(&alice)).await?.0, 200);

    // An expired token (the provider's lifetime, and planmux's 5 s leeway, past).
    tokio::time::sleep(Duration::from_secs(TOKEN_TTL + 6)).await;
    let (status, _, body) = post(&url, Some(&alice)).await?;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("expired"), "{body}");
    Ok(())
}

/// `[[access]]`: alice (group platform) may use everything; bob (his `sub`) only the
/// weather tools and execute_plan. Bob's list holds only those; his direct call, his plan
/// (validated against what he may use: no look-alike of another's) and his search of
/// anything else answer as for an unknown tool; the prompts and resources of servers he
/// cannot reach are not his (listed, read, subscribed to or completed); the official
/// Python SDK as each of them finds the same; the audit log names each caller.
#[tokio::test]
async fn each_caller_sees_and_calls_only_what_its_rule_allows() -> R {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let provider = Provider::start(&[&url]).await?;
    let audit = tempfile::tempdir()?;
    let audit_log = audit.path().join("audit.jsonl");
    let rules = format!(
        "[proxy]\nsurface = \"full\"\naudit_log = {}\n\n[[access]]\nwho = [\"group:platform\"]\ntools = [\"*\"]\n\n\
         [[access]]\nwho = [\"sub:bob\"]\ntools = [\"weather__*\", \"execute_plan\"]\n\n\
         [servers.conformance]\nbuiltin = \"conformance\"\n",
        toml_str(&audit_log.to_string_lossy())
    );
    let (_planmux, _dir) = serve(port, &provider, &rules).await?;
    let alice = Session::open(&url, &provider.token(0, &url).await?).await?;
    let bob = Session::open(&url, &provider.token(1, &url).await?).await?;

    let alices = alice.tools().await?;
    assert!(alices.iter().any(|t| t == "chaos__echo"), "{alices:?}");
    let bobs = bob.tools().await?;
    assert!(!bobs.is_empty(), "{bobs:?}");
    assert!(
        bobs.iter()
            .all(|t| t.starts_with("weather__") || t == "execute_plan"),
        "{bobs:?}"
    );
    let call = |name: &str| serde_json::json!({"name": name, "arguments": {"said": "hi"}});
    for name in ["chaos__echo", "search_tools"] {
        let refused = bob.ask("tools/call", call(name)).await?;
        assert_eq!(
            refused["message"],
            format!("unknown tool '{name}'"),
            "{refused}"
        );
    }
    let echoed = alice.ask("tools/call", call("chaos__echo")).await?;
    assert!(echoed.to_string().contains("hi"), "{echoed}");
    // In a plan: the step he may not call fails as an unknown tool would; his own run.
    let plan = |tool: &str| {
        serde_json::json!({"name": "execute_plan", "arguments": {"steps": [
            {"id": "s", "tool": tool, "args": {"location": "Oslo"}}]}})
    };
    let ran = bob.ask("tools/call", plan("weather__get_weather")).await?;
    assert_eq!(ran["structuredContent"]["status"], "succeeded", "{ran}");
    let stopped = bob
        .ask("tools/call", plan("chaos__echo"))
        .await?
        .to_string();
    assert!(
        stopped.contains("unknown tool") && stopped.contains("chaos__echo"),
        "{stopped}"
    );
    // The look-alike names a plan's error offers are only his own.
    let typo = bob.ask("tools/call", plan("chaos__ech")).await?.to_string();
    assert!(
        typo.contains("unknown tool") && !typo.contains("chaos__echo"),
        "{typo}"
    );
    let alices_typo = alice
        .ask("tools/call", plan("chaos__ech"))
        .await?
        .to_string();
    assert!(alices_typo.contains("chaos__echo"), "{alices_typo}");
    // No prompts or resources of a server he cannot reach (conformance has some).
    let prompts = |s: Value| s["prompts"].as_array().map_or(0, Vec::len);
    assert!(prompts(alice.ask("prompts/list", Value::Null).await?) > 0);
    assert_eq!(prompts(bob.ask("prompts/list", Value::Null).await?), 0);
    let resources = bob.ask("resources/list", Value::Null).await?;
    assert!(!resources.to_string().contains("test://"), "{resources}");
    let read = serde_json::json!({"uri": "test://static-text"});
    assert!(
        alice
            .ask("resources/read", read.clone())
            .await?
            .to_string()
            .contains("contents")
    );
    let refused = bob.ask("resources/read", read).await?;
    assert!(
        refused["message"].to_string().contains("no server has"),
        "{refused}"
    );
    let uri = serde_json::json!({"uri": "test://static-text"});
    let refused = bob.ask("resources/subscribe", uri).await?;
    assert!(
        refused["message"].to_string().contains("no server has"),
        "{refused}"
    );
    let complete = serde_json::json!({
        "ref": {"type": "ref/prompt", "name": "conformance__test_prompt_with_arguments"},
        "argument": {"name": "arg1", "value": "a"}});
    let completed = alice.ask("completion/complete", complete.clone()).await?;
    assert!(completed.get("completion").is_some(), "{completed}");
    let refused = bob.ask("completion/complete", complete).await?;
    assert!(
        refused["message"].to_string().contains("unknown prompt"),
        "{refused}"
    );

    // The official Python SDK as each of them: the same, in direct calls and plans.
    let sdk = |user: usize| {
        let (provider, url) = (&provider, &url);
        async move {
            let token = provider.token(user, url).await?;
            let out = tokio::process::Command::new(python())
                .arg(common::interop_dir().join("python_access.py"))
                .args(["--url", url, "--token", &token])
                .args(["--call", "weather__get_weather", "--call", "chaos__echo"])
                .output()
                .await?;
            summary_of(&out)
        }
    };
    let (alice_sdk, bob_sdk) = (sdk(0).await?, sdk(1).await?);
    let listed = |s: &Value, name: &str| s["tools"].to_string().contains(&format!("\"{name}\""));
    assert!(listed(&alice_sdk, "chaos__echo") && !listed(&bob_sdk, "chaos__echo"));
    assert!(listed(&bob_sdk, "weather__get_weather"), "{bob_sdk}");
    for way in ["direct", "plan"] {
        let call = |s: &Value, tool: &str| s["calls"][tool][way].clone();
        assert_eq!(
            call(&alice_sdk, "chaos__echo")["error"],
            false,
            "{alice_sdk}"
        );
        assert_eq!(
            call(&bob_sdk, "weather__get_weather")["error"],
            false,
            "{bob_sdk}"
        );
        let refused = call(&bob_sdk, "chaos__echo");
        assert!(
            refused["text"].to_string().contains("unknown tool"),
            "{way}: {bob_sdk}"
        );
    }

    let audited = std::fs::read_to_string(&audit_log)?;
    let denied = audited.lines().any(|l| {
        l.contains("\"caller\":\"bob\"") && l.contains("chaos__echo") && l.contains("\"deny\"")
    });
    assert!(denied, "{audited}");
    assert!(audited.contains("\"caller\":\"alice\""), "{audited}");
    Ok(())
}
