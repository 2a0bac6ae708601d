//! Whether planmux can run each remote server now, for `install`, which leaves with the
//! host what planmux cannot run yet. A server whose headers set `Authorization` never
//! signs in with OAuth: it is ready. One without is asked to `initialize`, once, without
//! credentials, for at most [`PROBE_TIMEOUT`]: a 401 means it wants OAuth sign-in (which
//! the host may have done for itself, so it stays there until `planmux login`), a 404 or
//! 405 that it does not serve streamable HTTP (an SSE-only server: mcp-remote falls back
//! to SSE on a 404). Anything else, even no answer, is planmux's to try: the host could
//! not do better, and `planmux check` shows how it went.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse,
};

use crate::config::{ServerConfig, SignIn, Transport};
use crate::hosts::Readiness;

/// How long the probe waits for a server's answer: a sign-in check, not a start-up.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What install learned of the servers it asked about.
#[derive(Debug, Default)]
pub(super) struct Decided {
    /// By servers.toml name; a server not here is ready.
    pub readiness: HashMap<String, Readiness>,
    /// What it could not tell, one line each.
    pub notes: Vec<String>,
}

/// Decides, all at once, for each of `servers`.
pub(super) async fn decide(servers: &[&ServerConfig]) -> Decided {
    let decisions = futures::future::join_all(servers.iter().map(|s| readiness(s))).await;
    let mut decided = Decided::default();
    for (server, (readiness, note)) in servers.iter().zip(decisions) {
        decided.readiness.insert(server.name.clone(), readiness);
        decided.notes.extend(note);
    }
    decided
}

/// Whether planmux can run `server` now, and a note when it could not tell.
async fn readiness(server: &ServerConfig) -> (Readiness, Option<String>) {
    let name = &server.name;
    // With client credentials planmux gets its own tokens: nobody signs in.
    let Transport::Http {
        url,
        headers,
        sign_in: SignIn::Browser(_),
    } = &server.transport
    else {
        return (Readiness::Ready, None);
    };
    if headers
        .keys()
        .any(|k| k.eq_ignore_ascii_case("authorization"))
    {
        return (Readiness::Ready, None);
    }
    if !server.unset.is_empty() {
        let note = format!(
            "\"{name}\" was not asked whether it needs sign-in ({}); if it does, run `planmux login {name}`",
            server.cannot_start().unwrap_or_default()
        );
        return (Readiness::Ready, Some(note));
    }
    match probe(url, headers).await {
        Probe::SignInAsked if signed_in(server) => (Readiness::Ready, None),
        Probe::SignInAsked => (Readiness::NeedsSignIn, None),
        Probe::NotStreamableHttp(status) => (
            Readiness::Unsupported(format!(
                "it answers HTTP {status} to a streamable HTTP request: it may serve only SSE, which planmux does not speak yet"
            )),
            None,
        ),
        Probe::Answered => (Readiness::Ready, None),
        Probe::NoAnswer(why) => (
            Readiness::Ready,
            Some(format!(
                "\"{name}\" could not be asked whether it needs sign-in ({why}); if it does, run `planmux login {name}`"
            )),
        ),
    }
}

/// Whether the user has signed in to `server` with `planmux login` and the sign-in still
/// works as far as planmux knows (a token it holds or can renew; not refused since).
pub(super) fn signed_in(server: &ServerConfig) -> bool {
    matches!(
        crate::oauth::status(&server.name, &server.transport),
        Ok(Some(crate::oauth::Status::SignedIn { .. }))
    )
}

/// What a server answered an `initialize` without credentials.
#[derive(Debug, PartialEq, Eq)]
enum Probe {
    /// 401: it wants a token.
    SignInAsked,
    /// 404 or 405: no streamable HTTP endpoint at this URL.
    NotStreamableHttp(u16),
    /// Anything else it said.
    Answered,
    /// It could not be reached, or said nothing in time.
    NoAnswer(String),
}

/// Posts an MCP `initialize` to `url` with `headers` (none sets `Authorization`).
async fn probe(url: &str, headers: &BTreeMap<String, String>) -> Probe {
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) else {
            return Probe::NoAnswer(format!("its header {name} is not a valid header"));
        };
        custom.insert(name, value);
    }
    let Some(message) = initialize() else {
        return Probe::NoAnswer("planmux could not build the request".into());
    };
    // The process's TLS provider, as for every HTTP server (downstream/transport.rs).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = client_of(StreamableHttpClientTransport::from_config);
    let posted = client.post_message(url.into(), message, None, None, custom.clone());
    let answer = match tokio::time::timeout(PROBE_TIMEOUT, posted).await {
        Err(_) => return Probe::NoAnswer(format!("no answer in {} s", PROBE_TIMEOUT.as_secs())),
        Ok(answer) => answer,
    };
    match answer {
        Ok(response) => {
            let session = match &response {
                StreamableHttpPostResponse::Json(_, session)
                | StreamableHttpPostResponse::Sse(_, session) => session.clone(),
                _ => None,
            };
            drop(response);
            // The session the probe opened is closed, as a client that is done does.
            if let Some(session) = session {
                let closing = client.delete_session(url.into(), session.into(), None, custom);
                let _ = tokio::time::timeout(PROBE_TIMEOUT, closing).await;
            }
            Probe::Answered
        }
        Err(StreamableHttpError::AuthRequired(_)) => Probe::SignInAsked,
        // rmcp's words for a refusal without a challenge: "HTTP 404 Not Found: …".
        Err(StreamableHttpError::UnexpectedServerResponse(text)) => {
            match text.strip_prefix("HTTP ").and_then(|t| t.get(..3)) {
                Some("401") => Probe::SignInAsked,
                Some(status @ ("404" | "405")) => {
                    Probe::NotStreamableHttp(status.parse().unwrap_or_default())
                }
                _ => Probe::Answered,
            }
        }
        Err(StreamableHttpError::Client(error)) => Probe::NoAnswer(chain(&error)),
        Err(_) => Probe::Answered,
    }
}

/// An error with its causes, on one line, URLs redacted ("error sending request: …:
/// Connection refused").
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    crate::text::redact_urls(&text)
}

/// The HTTP client rmcp's streamable HTTP transport is made with (reqwest's, which
/// planmux reaches only through rmcp): the probe asks as planmux's connections will.
fn client_of<C: StreamableHttpClient + Default>(
    _made_with: fn(StreamableHttpClientTransportConfig) -> StreamableHttpClientTransport<C>,
) -> C {
    C::default()
}

/// An MCP `initialize` request from planmux.
fn initialize() -> Option<ClientJsonRpcMessage> {
    let mut params = serde_json::to_value(rmcp::model::ClientConfig::default()).ok()?;
    params["clientInfo"] = serde_json::json!({
        "name": "planmux",
        "version": env!("CARGO_PKG_VERSION"),
    });
    serde_json::from_value(serde_json::json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": params,
    }))
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_is_an_initialize() {
        let message = initialize().expect("an initialize request");
        let json = serde_json::to_value(&message).expect("serializes");
        assert_eq!(json["method"], "initialize");
        assert_eq!(json["params"]["clientInfo"]["name"], "planmux");
    }
}
