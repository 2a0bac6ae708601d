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
struct Provider {
    issuer: String,
    _child: tokio::process::Child,
}

impl Provider {
    async fn start(resources: &[&str]) -> anyhow::Result<Self> {
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
    async fn token(&self, user: usize, resource: &str) -> anyhow::Result<String> {
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

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// Waits (up to 30 s) until `url` answers.
async fn wait_for(url: &str) -> anyhow::Result<()> {
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

/// The run records a new session of `token`'s holder lists (`planmux://runs/…`).
async fn session_runs(url: &str, token: &str) -> anyhow::Result<Vec<String>> {
    let send = |session: Option<&str>, body: &str| {
        let mut request = client()
            .post(url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(body.to_owned());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let opened = send(None, init).await?;
    let session = opened
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    opened.text().await?;
    send(
        Some(&session),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await?
    .text()
    .await?;
    let listed = send(
        Some(&session),
        r#"{"jsonrpc":"2.0","id":2,"method":"resources/list"}"#,
    )
    .await?
    .text()
    .await?;
    Ok(listed
        .split('"')
        .filter(|part| part.starts_with("planmux://runs/"))
        .map(str::to_owned)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
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
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("servers.toml");
    std::fs::write(
        &config,
        format!(
            "[http]\nrate_limit = \"40/min\"\n\n[http.auth]\nissuer = {}\naudience = {}\n\n\
             [servers.weather]\nbuiltin = \"weather\"\n\n[servers.chaos]\nbuiltin = \"chaos\"\n",
            toml_str(&provider.issuer),
            toml_str(&url)
        ),
    )?;
    let _planmux = tokio::process::Command::new(common::bin())
        .args(["serve", "--http", &format!("127.0.0.1:{port}"), "--config"])
        .arg(&config)
        .env_remove("PLANMUX_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    wait_for(&format!("http://127.0.0.1:{port}/health")).await?;

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
