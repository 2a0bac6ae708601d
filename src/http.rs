//! `planmux serve --http`: the streamable-HTTP front, for hosts that connect to remote MCP
//! servers and for a team's shared gateway.
//!
//! One set of downstreams and one plan runner serve every session; each session gets its
//! own upstream handler from rmcp's `StreamableHttpService` (`/mcp`), so the progress,
//! cancellation and approval of a call travel with that call's session. What a downstream
//! server asks or says during a call (sampling, elicitation, roots, log messages) goes to
//! the session whose call is in flight on it, on that call's stream; while no session or
//! several have calls in flight there, to none (`HostLink::for_sessions`). Resource
//! updates go to the sessions that subscribed; list changes to all.
//!
//! servers.toml is reloaded on SIGHUP or when it changes (`crate::reload`).
//!
//! Guards, in order: the request limit (`[http] max_requests` at once), `GET /health`
//! and the protected resource metadata, the bearer token (one of `[http] tokens`,
//! compared in constant time, or a JWT `[http.auth]` accepts: `gate.rs`; one of them is
//! required on any address but loopback), the caller's rate (`[http] rate_limit`, per
//! caller: 429 with `Retry-After` past it), then rmcp's own `Host` and `Origin` checks
//! (loopback origins and `[http] origins` only) and body limit (`[http] max_body_bytes`).
//! The caller's [`Identity`] goes to rmcp's handler in the request's extensions.
//! `/console` has a door of its own (`http/console.rs`: the same tokens, or a browser
//! signed in with one), and `/metrics` asks for the same token as `/mcp`.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub mod auth;
mod console;
mod gate;
mod lane;
mod metrics;

use crate::rate_limit::{Limiter, OverRate};
use crate::state::Shared;
use auth::{Identity, Verifier};
use bytes::Bytes;
use gate::Gate;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::downstream::{Downstreams, HostLink, fields};
use crate::runner::PlanRunner;
use crate::upstream::passthrough::RouteChoice;
use crate::upstream::passthrough::sessions::Lanes;
use crate::upstream::{Upstream, legacy_tasks};

/// The protocol revision whose tasks (SEP-1686) planmux answers itself.
const LEGACY_TASKS_ERA: &str = "2025-11-25";
/// The default address: loopback only.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8787";
/// How long connections may finish after a shutdown begins.
const DRAIN: Duration = Duration::from_secs(5);
/// How long a call cancelled by a shutdown has to send its answer before the sessions
/// close.
const ANSWER_GRACE: Duration = Duration::from_millis(500);

/// How to serve.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub addr: SocketAddr,
    /// No sessions: every request stands alone (for load-balanced deployments).
    pub stateless: bool,
}

/// Why the HTTP front did not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "{addr} is not a loopback address, and neither [http] tokens nor [http.auth] is set: anyone who can reach it could use every server. Set [http] tokens = [\"${{PLANMUX_TOKEN}}\"] (16+ characters) or [http.auth], or serve on 127.0.0.1"
    )]
    Unprotected { addr: SocketAddr },
    #[error(transparent)]
    Store(#[from] crate::state::StoreError),
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
}

type Body = BoxBody<Bytes, Infallible>;

/// Serves `config` over HTTP until `shutdown` resolves; then stops accepting, lets calls
/// in flight finish (at most [`DRAIN`]) and closes every downstream. `ready` hears the
/// address actually bound (port 0 picks one).
pub async fn serve_http(
    config: &Config,
    options: HttpOptions,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()>,
) -> Result<(), HttpError> {
    let addr = options.addr;
    let loopback = addr.ip().is_loopback();
    if !loopback && config.http.tokens.is_empty() && config.http.auth.is_none() {
        return Err(HttpError::Unprotected { addr });
    }
    let store = Shared::open(&config.state)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|error| HttpError::Bind { addr, error })?;
    let bound = listener.local_addr().unwrap_or(addr);
    let host = Arc::new(HostLink::for_sessions());
    // Two stops: `calls` ends what the sessions are doing (each call answers, cancelled),
    // then `stop` ends the sessions and connections themselves.
    let calls = CancellationToken::new();
    let stop = CancellationToken::new();
    let downstreams = Downstreams::new(config, host.clone());
    let starting = tokio::spawn({
        let downstreams = downstreams.clone();
        async move { downstreams.start_all().await }
    });
    let reloading = tokio::spawn(crate::reload::watch(
        config.clone(),
        downstreams.clone(),
        stop.clone(),
    ));
    // With a shared store, what is sealed for hosts uses its key: read once it answers.
    let sealing = store
        .clone()
        .map(|store| tokio::spawn(crate::upstream::share_sealing_key(store)));
    let runner = Arc::new(PlanRunner::new(downstreams.clone(), config).with_store(store.clone()));
    let proxy = config.proxy.clone();
    let console = crate::console::Console::new(downstreams.clone(), runner.clone(), stop.clone());
    // Sessions' plain calls of line servers' tools skip rmcp's typed path (`lane.rs`).
    let lanes = (!options.stateless && RouteChoice::from_env() != RouteChoice::Rmcp)
        .then(|| Arc::new(Lanes::default()));
    let factory = {
        let (downstreams, calls, lanes) = (downstreams.clone(), calls.clone(), lanes.clone());
        move || {
            let upstream = Upstream::new(
                downstreams.clone(),
                runner.clone(),
                host.clone(),
                calls.child_token(),
                &proxy,
            );
            Ok(match &lanes {
                Some(lanes) => upstream.joining(Arc::new(lanes.clone())),
                None => upstream,
            })
        }
    };
    let mut origins: Vec<String> = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    origins.extend(config.http.origins.iter().cloned());
    let mut rmcp_config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(!options.stateless)
        .with_allowed_origins(origins)
        .enforce_origin_validation();
    rmcp_config.cancellation_token = stop.child_token();
    rmcp_config.max_request_body_bytes = config.http.max_body_bytes;
    if !loopback {
        // Reached by name from elsewhere: the token guards it, not the Host header.
        rmcp_config = rmcp_config.disable_allowed_hosts();
    }
    let sessions = Arc::new(LocalSessionManager::default());
    let mcp = StreamableHttpService::new(factory, sessions.clone(), rmcp_config);
    if config.telemetry.metrics {
        crate::metrics::enable();
    }
    let _traces = crate::traces::start_for(config.telemetry.otlp_endpoint.as_deref());
    let verifier = config
        .http
        .auth
        .clone()
        .map(|auth| Arc::new(Verifier::new(auth)));
    if let Some(verifier) = &verifier
        && let Err(why) = verifier.prepare().await
    {
        tracing::warn!(%why, "[http.auth]: tokens cannot be checked until the issuer's keys are fetched");
    }
    let gate = Arc::new(Gate {
        tokens: config.http.tokens.clone(),
        verifier,
    });
    let console = console::Door::new(console, gate.clone());
    let front = Arc::new(Front {
        mcp,
        gate,
        console,
        limit: Semaphore::new(config.http.max_requests),
        rate: (config.http.rate_limit).map(|rate| Limiter::new(rate).kept_in(store.clone())),
        downstreams: downstreams.clone(),
        sessions,
        holds_tasks: !options.stateless,
        max_body: config.http.max_body_bytes,
        lanes,
        loopback,
    });
    tracing::info!(addr = %bound, stateless = options.stateless, "serving MCP over HTTP at /mcp");
    ready(bound);
    let mut connections = JoinSet::new();
    // Each connection holds a socket: a flood of idle ones cannot exhaust the process's
    // file descriptors (`[http] max_connections`).
    let open = Arc::new(Semaphore::new(config.http.max_connections));
    let header_timeout = config.http.header_timeout;
    tokio::pin!(shutdown);
    loop {
        // Finished connections are reaped as we go.
        while connections.try_join_next().is_some() {}
        let slot = tokio::select! {
            slot = open.clone().acquire_owned() => slot,
            () = &mut shutdown => break,
        };
        let Ok(slot) = slot else { break };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, _) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors, say: pause rather than spin.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Small JSON-RPC messages: without it a call waits ~40 ms on Nagle's algorithm.
        let _ = stream.set_nodelay(true);
        let front = front.clone();
        let stop = stop.clone();
        connections.spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |request| {
                let front = front.clone();
                async move { Ok::<_, Infallible>(front.handle(request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = &mut connection => {}
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(DRAIN, connection).await;
                }
            }
        });
    }
    tracing::info!("HTTP front stopping: ending calls in flight");
    drop(listener);
    calls.cancel();
    // Time for the cancelled calls' answers to reach their sessions' streams.
    tokio::time::sleep(ANSWER_GRACE).await;
    stop.cancel();
    let _ = tokio::time::timeout(DRAIN, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    connections.abort_all();
    starting.abort();
    reloading.abort();
    if let Some(sealing) = sealing {
        sealing.abort();
    }
    downstreams.shutdown().await;
    tracing::info!("shut down");
    Ok(())
}

/// What every request meets before rmcp.
struct Front {
    mcp: StreamableHttpService<Upstream, LocalSessionManager>,
    /// Who a request comes from.
    gate: Arc<Gate>,
    /// `/console`.
    console: console::Door,
    limit: Semaphore,
    /// Requests per caller, when limited.
    rate: Option<Limiter>,
    downstreams: Arc<Downstreams>,
    /// The sessions open (what `/metrics` counts).
    sessions: Arc<LocalSessionManager>,
    /// Whether sessions hold a 2025-11-25 host's tasks (not when stateless: each request
    /// stands alone).
    holds_tasks: bool,
    /// `[http] max_body_bytes`.
    max_body: usize,
    /// The passthrough for sessions' calls (not when stateless).
    lanes: Option<Arc<Lanes>>,
    /// Whether it listens on a loopback address (then rmcp answers loopback names only).
    loopback: bool,
}

impl Front {
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        let Ok(_permit) = self.limit.acquire().await else {
            return plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
        };
        match request.uri().path() {
            "/health" => self.health(),
            "/metrics" if crate::metrics::on() => self.metrics(&request).await,
            path if path == "/console" || path.starts_with("/console/") => {
                self.console.handle(request, &self.downstreams).await
            }
            "/mcp" => {
                let caller = match self.gate.caller(&request).await {
                    Ok(caller) => caller,
                    Err(refused) => return refused,
                };
                if let Some(refused) = self.over_rate(&caller).await {
                    return refused;
                }
                if request.method() != http::Method::POST {
                    let mut request = request;
                    request.extensions_mut().insert(caller);
                    return self.restored(self.mcp.handle(request).await);
                }
                let (mut parts, body) = match self.read(request).await {
                    Ok(read) => read,
                    Err(refused) => return refused,
                };
                if let Some(lanes) = &self.lanes
                    && let Some(answer) =
                        lane::take(lanes, &parts, &body, &caller, self.loopback).await
                {
                    return answer;
                }
                parts.extensions.insert(caller);
                let request = self.renamed(parts, body);
                self.restored(self.mcp.handle(request).await)
            }
            path if path.starts_with("/.well-known/oauth-protected-resource") => {
                self.resource_metadata()
            }
            _ => plain(StatusCode::NOT_FOUND, "planmux serves MCP at /mcp"),
        }
    }

    /// rmcp's answer, with the tool-definition fields rmcp does not model put back into
    /// any `tools/list` answer it carries (each frame is one SSE event, or the JSON body),
    /// as the stdio front does; and, with sessions, tasks offered to a 2025-11-25 host.
    fn restored(&self, response: Response<Body>) -> Response<Body> {
        let downstreams = self.downstreams.clone();
        let tasks = self.holds_tasks;
        response.map(move |body| {
            body.map_frame(move |frame| frame.map_data(|data| restore(data, &downstreams, tasks)))
                .boxed()
        })
    }

    /// A POST, read whole (within `[http] max_body_bytes`).
    async fn read(
        &self,
        request: Request<Incoming>,
    ) -> Result<(http::request::Parts, Bytes), Response<Body>> {
        let (parts, body) = request.into_parts();
        match http_body_util::Limited::new(body, self.max_body)
            .collect()
            .await
        {
            Ok(body) => Ok((parts, body.to_bytes())),
            Err(_) => Err(plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the request body is larger than [http] max_body_bytes, or was cut off",
            )),
        }
    }

    /// A POST for rmcp: a 2025-11-25 host's task message planmux answers
    /// (`upstream::legacy_tasks`; rmcp models none) renamed and marked, anything else as
    /// it came.
    fn renamed(&self, mut parts: http::request::Parts, mut body: Bytes) -> Request<Full<Bytes>> {
        if self.holds_tasks
            && is_legacy_post(&parts)
            && let Some(named) = rename_task_message(&body)
        {
            parts.extensions.insert(legacy_tasks::Renamed);
            body = Bytes::from(named);
        }
        Request::from_parts(parts, Full::new(body))
    }

    /// Ready (200) once every server's first start has ended, 503 before: which are up,
    /// and how many tools.
    fn health(&self) -> Response<Body> {
        let statuses = self.downstreams.statuses();
        let ready = statuses.iter().filter(|s| s.ready).count();
        let started = self.downstreams.is_started();
        let body = serde_json::json!({
            "status": if started { "ok" } else { "starting" },
            "servers": statuses.len(),
            "ready": ready,
            "tools": self.downstreams.catalog().entries().len(),
        });
        let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
        if !started {
            *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        }
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    }

    /// The protected resource metadata (RFC 9728), with `[http.auth]`.
    fn resource_metadata(&self) -> Response<Body> {
        let Some(verifier) = &self.gate.verifier else {
            return plain(
                StatusCode::NOT_FOUND,
                "planmux takes no OAuth tokens here ([http.auth] is not set)",
            );
        };
        let body = auth::resource_metadata(verifier.auth()).to_string();
        let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    }

    /// The 429 a caller past its rate gets (`None`: it may go on), saying when to retry.
    async fn over_rate(&self, caller: &Identity) -> Option<Response<Body>> {
        let rate = self.rate.as_ref()?;
        let wait = match rate.take(&caller.sub).await {
            Ok(()) => return None,
            Err(OverRate::Wait(wait)) => wait,
            Err(OverRate::Store(error)) => {
                let text = format!(
                    "the request cannot be counted against [http] rate_limit: {error}; retry shortly"
                );
                return Some(plain(StatusCode::SERVICE_UNAVAILABLE, text));
            }
        };
        let limit = rate.rate();
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let text = format!(
            "rate limit reached: at most {} requests per {} s for this caller ([http] rate_limit); retry in {seconds} s",
            limit.requests,
            limit.per.as_secs()
        );
        let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        if let Ok(value) = http::HeaderValue::from_str(&seconds.to_string()) {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, value);
        }
        Some(response)
    }
}

/// Whether `request` is a POST of a 2025-11-25 host (its `MCP-Protocol-Version`).
fn is_legacy_post(request: &http::request::Parts) -> bool {
    request.method == http::Method::POST
        && request
            .headers
            .get("mcp-protocol-version")
            .is_some_and(|v| v.as_bytes() == LEGACY_TASKS_ERA.as_bytes())
}

/// A task message `body` under the name rmcp hands planmux (`legacy_tasks::RENAMED`);
/// `None` for anything else.
fn rename_task_message(body: &[u8]) -> Option<Vec<u8>> {
    memchr::memmem::find(body, b"\"task")?;
    let mut message: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(body).ok()?;
    let method = message.get("method")?.as_str()?;
    let with_task = || message.get("params")?.get("task")?.as_object();
    let ours = match method {
        "tools/call" => with_task().is_some(),
        _ => legacy_tasks::METHODS.contains(&method),
    };
    if !ours {
        return None;
    }
    let renamed = format!("{}{method}", legacy_tasks::RENAMED);
    message.insert("method".into(), renamed.into());
    serde_json::to_vec(&message).ok()
}

/// One SSE event (`data: MESSAGE` among its lines) or JSON body, with a tool list's
/// unmodelled fields put back and, when `tasks`, tasks offered in an `initialize` answer
/// to a 2025-11-25 host; anything else as it was.
fn restore(data: Bytes, downstreams: &Downstreams, tasks: bool) -> Bytes {
    let fields = |name: &str| downstreams.unmodelled_fields(name);
    let restore = |json: &[u8]| {
        // An `initialize` answer may say `"tools":` too (its capabilities).
        if fields::may_list_tools(json) {
            let mut message: serde_json::Value = serde_json::from_slice(json).ok()?;
            if fields::restore_value(&mut message, fields) {
                return Some(message.to_string());
            }
        }
        let version = format!(r#""protocolVersion":"{LEGACY_TASKS_ERA}""#);
        if !tasks || memchr::memmem::find(json, version.as_bytes()).is_none() {
            return None;
        }
        let mut message: serde_json::Value = serde_json::from_slice(json).ok()?;
        let result = message
            .get_mut("result")
            .filter(|r| r.get("serverInfo").is_some())?;
        legacy_tasks::offer(result).then(|| message.to_string())
    };
    if data.starts_with(b"{") {
        return restore(&data).map_or(data, Bytes::from);
    }
    let mut changed = false;
    let lines: Vec<std::borrow::Cow<'_, [u8]>> = data
        .split(|b| *b == b'\n')
        .map(|line| {
            let Some(json) = line.strip_prefix(b"data:") else {
                return line.into();
            };
            match restore(json.trim_ascii_start()) {
                Some(text) => {
                    changed = true;
                    format!("data: {text}").into_bytes().into()
                }
                None => line.into(),
            }
        })
        .collect();
    if !changed {
        return data;
    }
    Bytes::from(lines.join(&b'\n'))
}

fn plain(status: StatusCode, text: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(Full::new(text.into()).boxed());
    *response.status_mut() = status;
    response
}
