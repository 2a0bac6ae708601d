//! Asking a remote server, without credentials, whether it wants a sign-in, in the era it
//! speaks: `server/discover` (2026-07-28), or, when it does not know that, `initialize`;
//! and, when that is let through, the `tools/list` a client sends next (some servers
//! challenge only there, with the scope they want). `planmux login` takes the challenge
//! from it; `install` decides whether planmux can run the server yet.

use std::collections::BTreeMap;
use std::time::Duration;

use http::StatusCode;

/// What the server answered.
#[derive(Debug, PartialEq, Eq)]
pub enum Probe {
    /// 401: it wants a sign-in; its `WWW-Authenticate` challenge, if it gave one.
    SignInAsked(Option<String>),
    /// It let a client without credentials in.
    LetIn,
    /// It answered `initialize` with another HTTP status.
    Status(u16),
    /// It could not be reached, or said nothing within the limit.
    NoAnswer(String),
}

/// The protocol version the probe speaks to a server that has no `server/discover`.
const VERSION: &str = "2025-11-25";
/// The protocol version it asks for first.
const MODERN: &str = "2026-07-28";

/// Asks the server at `url`, sending `headers` (none of them `Authorization`), each
/// request within `limit`.
pub async fn probe(url: &str, headers: &BTreeMap<String, String>, limit: Duration) -> Probe {
    // The process's TLS provider, as for every HTTP server (downstream/transport.rs).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match reqwest::Client::builder()
        .timeout(limit)
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(client) => client,
        Err(e) => return Probe::NoAnswer(super::reason(&e)),
    };
    let post = |message: serde_json::Value, session: Option<&http::HeaderValue>| {
        let mut request = client
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .json(&message);
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session.clone())
                .header("mcp-protocol-version", VERSION);
        }
        request.send()
    };
    // 2026-07-28: self-contained requests, each with its method in a header as well.
    let modern = |method: &str, id: u32| {
        let message = serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": method,
            "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientInfo":
                    {"name": "planmux", "version": env!("CARGO_PKG_VERSION")},
                "io.modelcontextprotocol/clientCapabilities": {}
            }}
        });
        let mut request = client
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", method)
            .json(&message);
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        request.send()
    };
    let discover = match modern("server/discover", 1).await {
        Ok(response) => response,
        Err(e) => return Probe::NoAnswer(super::reason(&e)),
    };
    if discover.status() == StatusCode::UNAUTHORIZED {
        return Probe::SignInAsked(challenge(&discover));
    }
    if discover.status().is_success() && discovered(discover).await {
        return match modern("tools/list", 2).await {
            Ok(response) if response.status() == StatusCode::UNAUTHORIZED => {
                Probe::SignInAsked(challenge(&response))
            }
            _ => Probe::LetIn,
        };
    }
    // A server of an earlier era: ask as one of its clients.
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": VERSION, "capabilities": {},
                   "clientInfo": {"name": "planmux", "version": env!("CARGO_PKG_VERSION")}}
    });
    let response = match post(initialize, None).await {
        Ok(response) => response,
        Err(e) => return Probe::NoAnswer(super::reason(&e)),
    };
    match response.status() {
        StatusCode::UNAUTHORIZED => return Probe::SignInAsked(challenge(&response)),
        status if !status.is_success() => return Probe::Status(status.as_u16()),
        _ => {}
    }
    // Let in: go on as a client would, in the session it gave, if any.
    let session = response.headers().get("mcp-session-id").cloned();
    drop(response);
    let initialized = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let _ = post(initialized, session.as_ref()).await;
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let listed = post(list, session.as_ref()).await;
    if let Some(session) = &session {
        // The session the probe opened is closed, as a client that is done does.
        let mut closing = client.delete(url).header("mcp-session-id", session.clone());
        for (name, value) in headers {
            closing = closing.header(name.as_str(), value.as_str());
        }
        let _ = closing.send().await;
    }
    match listed {
        Ok(response) if response.status() == StatusCode::UNAUTHORIZED => {
            Probe::SignInAsked(challenge(&response))
        }
        _ => Probe::LetIn,
    }
}

/// Whether a 2xx answer to `server/discover` is a discovery result (a server of an
/// earlier era may answer a method it does not know with an error, or with `{}`).
async fn discovered(response: reqwest::Response) -> bool {
    let Ok(body) = response.text().await else {
        return false;
    };
    // As JSON, or as the data of an event stream's first event.
    let json = body
        .lines()
        .find_map(|line| line.strip_prefix("data:"))
        .unwrap_or(&body);
    serde_json::from_str::<serde_json::Value>(json.trim())
        .is_ok_and(|message| message["result"]["supportedVersions"].is_array())
}

fn challenge(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}
