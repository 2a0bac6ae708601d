//! `planmux login` against authorization servers that lie or misbehave: each fails with a
//! reason, within bounded time, storing nothing.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use super::login::{Options, login_into};
use super::store::Store;
use crate::config::Config;

/// What the fake authorization server does wrong.
#[derive(Clone, Copy, Debug)]
enum Lie {
    /// Its metadata names another issuer.
    WrongIssuer,
    /// Its metadata is 10 MB.
    HugeMetadata,
    /// It does not support PKCE (S256).
    NoPkce,
    /// Its metadata redirects to another host.
    RedirectAway,
    /// Its metadata redirects to itself, forever.
    EndlessRedirects,
    /// The resource's metadata names another resource.
    OtherResource,
}

/// One server at `base` playing both the MCP server and its authorization server.
async fn answer(lie: Lie, base: Arc<String>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let json = |value: serde_json::Value| {
        let mut response = Response::new(Full::new(Bytes::from(value.to_string())));
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    };
    let redirect = |to: String| {
        let mut response = Response::new(Full::new(Bytes::new()));
        *response.status_mut() = StatusCode::FOUND;
        if let Ok(to) = http::HeaderValue::try_from(to) {
            response.headers_mut().insert(http::header::LOCATION, to);
        }
        response
    };
    match path.as_str() {
        "/mcp" => {
            let mut response = Response::new(Full::new(Bytes::new()));
            *response.status_mut() = StatusCode::UNAUTHORIZED;
            let challenge = format!(
                "Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""
            );
            if let Ok(value) = http::HeaderValue::try_from(challenge) {
                response
                    .headers_mut()
                    .insert(http::header::WWW_AUTHENTICATE, value);
            }
            response
        }
        "/.well-known/oauth-protected-resource/mcp" => {
            let resource = match lie {
                Lie::OtherResource => "https://evil.example.com/mcp".to_owned(),
                _ => format!("{base}/mcp"),
            };
            json(serde_json::json!({"resource": resource, "authorization_servers": [*base]}))
        }
        p if p.starts_with("/.well-known/") => match lie {
            Lie::HugeMetadata => {
                let padding = "x".repeat(10 << 20);
                json(serde_json::json!({"issuer": *base, "padding": padding}))
            }
            Lie::RedirectAway => redirect("http://evil.invalid/.well-known/x".into()),
            Lie::EndlessRedirects => redirect(format!("{base}{p}")),
            _ => {
                let issuer = match lie {
                    Lie::WrongIssuer => "https://attacker.example.com".to_owned(),
                    _ => (*base).clone(),
                };
                let methods = match lie {
                    Lie::NoPkce => serde_json::json!(["plain"]),
                    _ => serde_json::json!(["S256"]),
                };
                json(serde_json::json!({
                    "issuer": issuer,
                    "authorization_endpoint": format!("{base}/authorize"),
                    "token_endpoint": format!("{base}/token"),
                    "registration_endpoint": format!("{base}/register"),
                    "response_types_supported": ["code"],
                    "code_challenge_methods_supported": methods,
                }))
            }
        },
        "/register" => json(serde_json::json!({"client_id": "c", "redirect_uris": []})),
        _ => {
            let mut response = Response::new(Full::new(Bytes::new()));
            *response.status_mut() = StatusCode::NOT_FOUND;
            response
        }
    }
}

/// Serves `lie` on a loopback port; its base URL.
async fn lying(lie: Lie) -> String {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    let base = Arc::new(format!("http://127.0.0.1:{port}"));
    let served = base.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let base = served.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let base = base.clone();
                    async move { Ok::<_, Infallible>(answer(lie, base, request).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (*base).clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_authorization_server_is_refused_and_nothing_is_stored() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cases = [
        (Lie::WrongIssuer, "issuer"),
        (Lie::HugeMetadata, "exceeds"),
        (Lie::NoPkce, "PKCE"),
        (Lie::RedirectAway, "redirect"),
        (Lie::EndlessRedirects, "redirect"),
        (Lie::OtherResource, "resource"),
    ];
    for (lie, says) in cases {
        let base = lying(lie).await;
        let text = format!("[servers.remote]\nurl = \"{base}/mcp\"\n");
        let config = Config::parse(&text, "servers.toml", std::path::Path::new("/"), &|_| None)
            .unwrap_or_else(|e| panic!("{e}"));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let options = Options {
            open_browser: false,
            timeout: Duration::from_secs(5),
        };
        let started = Instant::now();
        let mut said = Vec::new();
        let outcome = login_into(
            &config.servers[0],
            Some(dir.path()),
            &options,
            &mut |line| said.push(line.to_owned()),
        )
        .await;
        let error = match outcome {
            Ok(_) => panic!("{lie:?}: signed in"),
            Err(error) => error,
        };
        assert!(error.contains(says), "{lie:?}: {error}");
        assert!(
            said.is_empty(),
            "{lie:?}: offered a sign-in URL: {said:?} ({error})"
        );
        assert!(started.elapsed() < Duration::from_secs(40), "{lie:?}");
        let store = Store::in_folder(dir.path(), "remote", &format!("{base}/mcp"));
        let kept = store.read().unwrap_or_else(|e| panic!("{e}"));
        assert!(kept.credentials.is_none(), "{lie:?}: stored credentials");
        eprintln!("{lie:?}: {error}");
    }
}
