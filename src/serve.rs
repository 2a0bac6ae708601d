//! The whole server in the library: `planmux serve` over any byte stream, from the
//! downstreams' start to their shutdown, so that serving, end of input and shutdown can
//! be tested in-process. `main.rs` only parses the command line and calls [`serve`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::service::ServerInitializeError;
use rmcp::{RoleServer, ServiceExt};
use tokio::io::AsyncRead;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::downstream::{Downstreams, HostLink, restore_tool_fields};
use crate::runner::PlanRunner;
use crate::state::Shared;
use crate::upstream::Upstream;
use crate::upstream::passthrough::{Passthrough, RouteChoice};
use crate::wire::LineTransport;

/// How long calls in flight may take to wind down once the host has hung up.
const DRAIN: Duration = Duration::from_secs(1);
/// How long the calls stopped by a shutdown have to send their answers before the
/// host's stream closes.
const ANSWER_GRACE: Duration = Duration::from_millis(500);

/// How long the downstreams wait for the host's first message before starting, so that
/// they are offered what the host supports (hosts speak at once when they launch planmux).
const HOST_ARRIVAL: Duration = Duration::from_secs(1);

/// Serves MCP to the host at the other end of `transport` (its limits should be
/// `proxy.wire`'s) until the host hangs up or `shutdown` resolves; then stops the calls
/// in flight and closes every downstream (their processes gone) before returning. The
/// downstreams start once the host has introduced itself; its handshake is answered when
/// every server has listed or is remembered from its last start (then at once), or after
/// `list_grace_ms`.
pub async fn serve<In>(
    config: &Config,
    store: Option<Shared>,
    transport: LineTransport<RoleServer, In>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerInitializeError>
where
    In: AsyncRead + Send + Unpin + 'static,
{
    let host = Arc::new(HostLink::expecting_host());
    let stop = CancellationToken::new();
    let downstreams = Downstreams::new(config, host.clone());
    let runner = Arc::new(PlanRunner::new(downstreams.clone(), config).with_store(store.clone()));
    let starting = tokio::spawn({
        let (downstreams, host, runner) = (downstreams.clone(), host.clone(), runner.clone());
        async move {
            // Servers are offered what the host supports: let it introduce itself first.
            host.arrival(HOST_ARRIVAL).await;
            downstreams.start_all().await;
            // Each pipeline against the catalog the servers gave.
            for state in runner.pipelines() {
                match state.ready {
                    Ok(ready) => {
                        tracing::info!(pipeline = %state.name, tier = %ready.spec.tier, steps = ready.steps, "pipeline ready");
                    }
                    Err(why) => tracing::warn!(pipeline = %state.name, %why, "pipeline cannot run"),
                }
            }
        }
    });
    let _traces = crate::traces::start_for(config.telemetry.otlp_endpoint.as_deref());
    // With a shared store, what is sealed for hosts uses its key: read once it answers.
    let sealing = store
        .clone()
        .map(|store| tokio::spawn(crate::upstream::share_sealing_key(store)));
    let reloading = tokio::spawn(crate::reload::watch(
        config.clone(),
        downstreams.clone(),
        stop.clone(),
    ));
    // Tool definition fields rmcp's types leave out go back into tools/list; a
    // 2025-11-25 host is offered tasks (`upstream::passthrough`'s).
    let fields = downstreams.clone();
    let transport = transport.serving().with_outbound(Arc::new(move |message| {
        restore_tool_fields(message, |name| fields.unmodelled_fields(name))
            .or_else(|| crate::upstream::passthrough::offer_tasks(message))
    }));
    // The host hanging up is noticed even while rmcp is still draining requests.
    let eof = transport.eof();
    let upstream = Upstream::new(
        downstreams.clone(),
        runner,
        host,
        stop.clone(),
        &config.proxy,
    );
    // Plain calls of downstream tools skip rmcp's decoding (`upstream::passthrough`).
    let passthrough = Passthrough::new(
        upstream.clone(),
        transport.sender(),
        RouteChoice::from_env(),
    );
    let transport = transport.with_divert(passthrough.divert());
    let session = async {
        let service = upstream.serve(transport).await?;
        let waiting = service.waiting();
        tokio::pin!(waiting);
        tokio::select! {
            _ = &mut waiting => {}
            () = eof.cancelled() => {
                // The host hung up: stop the calls in flight rather than drain them.
                stop.cancel();
                let _ = tokio::time::timeout(DRAIN, &mut waiting).await;
            }
        }
        Ok(())
    };
    // On shutdown the calls in flight are stopped first, so each is answered (cancelled)
    // before the session is dropped, which closes it (rmcp cancels a dropped service).
    tokio::pin!(session);
    let result = tokio::select! {
        result = &mut session => result,
        () = shutdown => {
            stop.cancel();
            tokio::time::timeout(ANSWER_GRACE, &mut session).await.unwrap_or(Ok(()))
        }
    };
    stop.cancel();
    passthrough.finish(ANSWER_GRACE).await;
    starting.abort();
    reloading.abort();
    if let Some(sealing) = sealing {
        sealing.abort();
    }
    downstreams.shutdown().await;
    tracing::info!("shut down");
    result
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use rmcp::model::CallToolRequestParams;
    use serde_json::json;

    use super::*;

    fn config() -> Config {
        let text = "[servers.chaos]\nbuiltin = \"chaos\"\n";
        Config::parse(text, "test", Path::new("."), &|_| None).unwrap_or_else(|e| panic!("{e}"))
    }

    fn sleep_call() -> CallToolRequestParams {
        let mut params = CallToolRequestParams::new("chaos__sleep");
        params.arguments = json!({"ms": 600_000}).as_object().cloned();
        params
    }

    /// Serves on an in-memory pipe, starts a long call, then ends the session (the host
    /// hangs up, or planmux is shut down); `serve` must return promptly although the
    /// call never finishes. What the call got, if anything.
    async fn ends_promptly(hang_up: bool) -> Option<String> {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(ours);
        let shutdown = CancellationToken::new();
        let config = config();
        let transport = LineTransport::new(read, write, config.proxy.wire, "the host");
        let server = serve(&config, None, transport, shutdown.clone().cancelled_owned());
        let client = async {
            let client = ().serve(theirs).await.unwrap_or_else(|e| panic!("{e}"));
            let peer = client.peer().clone();
            let call = tokio::spawn(async move { peer.call_tool(sleep_call()).await });
            tokio::time::sleep(Duration::from_millis(200)).await;
            if hang_up {
                drop(client);
                None
            } else {
                shutdown.cancel();
                let answer = tokio::time::timeout(Duration::from_secs(5), call).await;
                drop(client);
                Some(format!("{answer:?}"))
            }
        };
        let started = std::time::Instant::now();
        let (served, answer) = tokio::join!(server, client);
        assert!(served.is_ok(), "{served:?}");
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(5),
            "serve took {took:?} to return"
        );
        answer
    }

    #[tokio::test]
    async fn the_host_hanging_up_ends_serving_with_a_call_in_flight() {
        ends_promptly(true).await;
    }

    /// The call in flight is answered (cancelled) before the host's stream closes.
    #[tokio::test]
    async fn shutdown_ends_serving_with_a_call_in_flight() {
        let answer = ends_promptly(false).await.unwrap_or_default();
        assert!(
            answer.contains("was cancelled") && answer.contains("is_error: Some(true)"),
            "{answer}"
        );
    }
}
