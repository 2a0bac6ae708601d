//! The protocol era a server's connection speaks. planmux opens every connection with
//! `server/discover` (2026-07-28) and falls back to `initialize` (2025-11-25) when the
//! server does not know it, so each server is spoken to in the newest era it has. A 2026-07-28 server sends nothing unasked: its list changes and
//! resource updates come on a `subscriptions/listen` stream, which [`listen`] keeps open
//! for as long as the connection lives.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::model::{
    ClientConfig, ClientJsonRpcMessage, ClientRequest, ClientResult, DiscoverRequest,
    DiscoverRequestParams, ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage,
    ServerNotification, ServerRequest, ServerResult, SubscriptionFilter,
};
use rmcp::service::{ClientInitializeError, ClientLifecycleMode};
use rmcp::transport::Transport;
use rmcp::{Peer, RoleClient};
use tokio_util::sync::CancellationToken;

use super::changes::{Changed, Changes};
use super::host_link::HostLink;

/// The id of planmux's own `server/discover` on a line connection: rmcp numbers its
/// requests, so this one is never confused with them.
const PROBE_ID: &str = "planmux-discover";

/// How an HTTP connection is opened: rmcp probes with `server/discover` and falls back
/// to `initialize` (a remote server answers at once, whichever era it speaks); at once
/// with `initialize` when it spoke 2025-11-25 before.
pub fn http_lifecycle(known: Era) -> ClientLifecycleMode {
    match known {
        Era::Legacy | Era::Guessed => ClientLifecycleMode::Initialize,
        _ => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        },
    }
}

/// Whether a handshake failed because the server answered `server/discover` with
/// something that is not a discovery result: it does not know the method, and says so
/// wrongly (some servers answer every method they do not know with `{}`). Opening the
/// connection again with `initialize` works.
pub fn undiscovered(error: &ClientInitializeError) -> bool {
    matches!(
        error,
        ClientInitializeError::ExpectedInitResult(Some(answer))
            if !matches!(answer, ServerResult::DiscoverResult(_) | ServerResult::InitializeResult(_))
    )
}

/// How a line connection (a child, a built-in server) is opened, found by asking the
/// server `server/discover` on `transport` and waiting for its answer, however long it
/// takes to start (`npx` downloading a package): the caller bounds the start. A
/// discovery result that offers 2026-07-28 means discovery; an error, or any other
/// answer (some hand-written servers answer every method they do not know with `{}`),
/// means `initialize`. A server that spoke 2025-11-25 before (`era`) is not asked, nor,
/// the next time, one that closed the connection instead of answering.
/// rmcp's own probe falls back after 10 s, and then reads the late answer as a wrong
/// answer to `initialize`.
pub async fn line_lifecycle<T: Transport<RoleClient>>(
    transport: &mut T,
    era: &EraCell,
    info: &ClientConfig,
) -> Result<ClientLifecycleMode, String> {
    let legacy = ClientLifecycleMode::Initialize;
    if matches!(era.get(), Era::Legacy | Era::Guessed) {
        return Ok(legacy);
    }
    let mut discover = DiscoverRequest::new(DiscoverRequestParams {});
    discover
        .extensions
        .insert(RequestMetaObject::with_client_context(
            ProtocolVersion::V_2026_07_28,
            info.client_info.clone(),
            info.capabilities.clone(),
        ));
    let id = RequestId::String(PROBE_ID.into());
    let request =
        ClientJsonRpcMessage::request(ClientRequest::DiscoverRequest(discover), id.clone());
    transport
        .send(request)
        .await
        .map_err(|e| format!("cannot send server/discover: {e}"))?;
    loop {
        let Some(message) = transport.receive().await else {
            // A server of the earlier era may exit on a method it does not know: the
            // next start speaks `initialize` to it at once.
            era.set(Era::Guessed);
            return Err("the connection closed before the server answered server/discover".into());
        };
        match message {
            ServerJsonRpcMessage::Response(response) if response.id == id => {
                let modern = matches!(
                    &response.result,
                    ServerResult::DiscoverResult(found)
                        if found.supported_versions.contains(&ProtocolVersion::V_2026_07_28)
                );
                return Ok(if modern {
                    ClientLifecycleMode::Discover {
                        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                    }
                } else {
                    legacy
                });
            }
            ServerJsonRpcMessage::Error(error) if error.id.as_ref().is_none_or(|e| *e == id) => {
                return Ok(legacy);
            }
            ServerJsonRpcMessage::Request(request)
                if matches!(request.request, ServerRequest::PingRequest(_)) =>
            {
                let pong = ClientJsonRpcMessage::response(ClientResult::empty(()), request.id);
                transport
                    .send(pong)
                    .await
                    .map_err(|e| format!("cannot answer a ping: {e}"))?;
            }
            // Log lines and the like before the handshake: not for anyone yet.
            _ => {}
        }
    }
}

/// The `_meta` every request to a 2026-07-28 server carries: the protocol version,
/// and planmux's client info and capabilities as `info` (its handshake's) has them.
pub fn request_meta(info: &ClientConfig) -> serde_json::Map<String, serde_json::Value> {
    let meta = RequestMetaObject::with_client_context(
        ProtocolVersion::V_2026_07_28,
        info.client_info.clone(),
        info.capabilities.clone(),
    );
    match serde_json::to_value(meta) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    }
}

/// Which era a server spoke when it last connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// Not connected yet.
    Unknown,
    /// `initialize` and a session (2025-11-25 and before).
    Legacy,
    /// `server/discover`, per-request `_meta`, no session (2026-07-28).
    Modern,
    /// Taken for `Legacy` once: it closed the connection when asked `server/discover` (a
    /// server of the earlier era may exit on a method it does not know). Its next start
    /// speaks `initialize`; if that fails too, the era is unknown again.
    Guessed,
}

impl Era {
    /// The era `peer`'s handshake settled on.
    pub fn of(peer: &Peer<RoleClient>) -> Self {
        match peer.peer_info() {
            Some(info) if !info.protocol_version.has_initialize() => Self::Modern,
            Some(_) => Self::Legacy,
            None => Self::Unknown,
        }
    }
}

/// A server's [`Era`], kept across its restarts.
#[derive(Debug, Default)]
pub struct EraCell(AtomicU8);

impl EraCell {
    pub fn get(&self) -> Era {
        match self.0.load(Ordering::Acquire) {
            1 => Era::Legacy,
            2 => Era::Modern,
            3 => Era::Guessed,
            _ => Era::Unknown,
        }
    }

    /// A connection opened as `tried` said failed: a guess is dropped (`initialize` did
    /// not work either), so the next start asks `server/discover` again.
    pub fn failed(&self, tried: Era) {
        if tried == Era::Guessed {
            self.set(Era::Unknown);
        }
    }

    pub fn set(&self, era: Era) {
        let value = match era {
            Era::Unknown => 0,
            Era::Legacy => 1,
            Era::Modern => 2,
            Era::Guessed => 3,
        };
        self.0.store(value, Ordering::Release);
    }
}

/// What a 2026-07-28 server is asked to send on its listen stream: the list changes it
/// says it has.
fn wanted(peer: &Peer<RoleClient>) -> Option<SubscriptionFilter> {
    let caps = peer.peer_info()?.capabilities.clone();
    let mut filter = SubscriptionFilter::new();
    let says = |flag: Option<bool>| flag.unwrap_or(false).then_some(true);
    filter.tools_list_changed = caps.tools.as_ref().and_then(|t| says(t.list_changed));
    filter.prompts_list_changed = caps.prompts.as_ref().and_then(|p| says(p.list_changed));
    filter.resources_list_changed = caps.resources.as_ref().and_then(|r| says(r.list_changed));
    let any = [
        filter.tools_list_changed,
        filter.prompts_list_changed,
        filter.resources_list_changed,
    ]
    .iter()
    .any(Option::is_some);
    any.then_some(filter)
}

/// Keeps a 2026-07-28 server's listen stream open until `ended`, marking each list change
/// as its `notifications/…/list_changed` would be on a legacy connection; a stream the
/// server ends is opened again (at most once a second). Returns at once when the server
/// has no list changes to tell.
pub async fn listen(
    peer: Peer<RoleClient>,
    server: String,
    changes: Arc<Changes>,
    host: Arc<HostLink>,
    ended: CancellationToken,
) {
    let Some(filter) = wanted(&peer) else {
        return;
    };
    loop {
        let opened = tokio::select! {
            opened = peer.listen(filter.clone()) => opened,
            () = ended.cancelled() => return,
        };
        let mut subscription = match opened {
            Ok(subscription) => subscription,
            Err(error) => {
                // Most servers have none: their list changes come as plain notifications
                // on a line connection, and not at all over HTTP.
                tracing::debug!(server = %server, %error, "the server's listen stream did not open");
                return;
            }
        };
        loop {
            let next = tokio::select! {
                next = subscription.next() => next,
                () = ended.cancelled() => {
                    let _ = tokio::time::timeout(
                        std::time::Duration::from_secs(1),
                        subscription.cancel(),
                    )
                    .await;
                    return;
                }
            };
            match next {
                Ok(Some(notification)) => said(&server, &changes, &host, notification).await,
                Ok(None) => break,
                Err(error) => {
                    tracing::info!(server = %server, %error, "the server's listen stream broke");
                    break;
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
            () = ended.cancelled() => return,
        }
    }
}

/// One notification from a listen stream, handled as the connection's handler handles it.
async fn said(server: &str, changes: &Changes, host: &HostLink, notification: ServerNotification) {
    let changed = match notification {
        ServerNotification::ToolListChangedNotification(_) => Changed::TOOLS,
        ServerNotification::PromptListChangedNotification(_) => Changed {
            prompts: true,
            ..Changed::default()
        },
        ServerNotification::ResourceListChangedNotification(_) => Changed {
            resources: true,
            ..Changed::default()
        },
        ServerNotification::ResourceUpdatedNotification(updated) => {
            host.notify_resource_updated(updated.params).await;
            return;
        }
        _ => return,
    };
    changes.mark(server, changed);
}

impl super::Downstreams {
    /// Whether the tool exported as `name` is a server's that speaks an era before
    /// 2026-07-28 (it asks during a call by request).
    pub fn is_legacy_tool(&self, name: &str) -> bool {
        let catalog = self.catalog();
        let server = catalog
            .find_called(name)
            .and_then(|entry| self.server(&entry.server));
        server.is_some_and(|server| server.era() == Era::Legacy)
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientCapabilities, Implementation};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::*;
    use crate::wire::{Limits, LineTransport};

    /// What the probe decides when the server answers its first message with `answer`
    /// (`{id}` in it stands for the probe's id), after a ping when `ping` is set; and
    /// the lines the server read.
    async fn probed(
        answer: &str,
        ping: bool,
    ) -> (Result<ClientLifecycleMode, String>, Vec<String>) {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let (read, write) = tokio::io::split(ours);
        let mut transport: LineTransport<RoleClient, _> =
            LineTransport::new(read, write, Limits::default(), "test");
        let answer = answer.to_owned();
        let server = tokio::spawn(async move {
            let (read, mut write) = tokio::io::split(theirs);
            let mut lines = BufReader::new(read).lines();
            let mut seen = Vec::new();
            let first = lines.next_line().await.ok().flatten().unwrap_or_default();
            seen.push(first);
            if ping {
                let ping = r#"{"jsonrpc":"2.0","id":"p1","method":"ping"}"#;
                write.write_all(format!("{ping}\n").as_bytes()).await.ok();
                seen.push(lines.next_line().await.ok().flatten().unwrap_or_default());
            }
            let line = answer.replace("{id}", "\"planmux-discover\"");
            write.write_all(format!("{line}\n").as_bytes()).await.ok();
            seen
        });
        let info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("planmux", "0"),
        );
        let decided = line_lifecycle(&mut transport, &EraCell::default(), &info).await;
        (decided, server.await.unwrap_or_default())
    }

    fn is_discover(mode: &ClientLifecycleMode) -> bool {
        matches!(mode, ClientLifecycleMode::Discover { .. })
    }

    #[tokio::test]
    async fn a_discovery_result_offering_2026_07_28_means_discovery() {
        let result = r#"{"jsonrpc":"2.0","id":{id},"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"ttlMs":0,"cacheScope":"private"}}"#;
        let (decided, seen) = probed(result, true).await;
        assert!(decided.as_ref().is_ok_and(is_discover), "{decided:?}");
        assert!(
            seen[0].contains("server/discover") && seen[0].contains("2026-07-28"),
            "{seen:?}"
        );
        assert!(
            seen[1].contains(r#""id":"p1""#),
            "the ping was answered: {seen:?}"
        );
    }

    #[tokio::test]
    async fn an_error_or_anything_else_means_initialize() {
        for answer in [
            r#"{"jsonrpc":"2.0","id":{id},"error":{"code":-32601,"message":"Method not found"}}"#,
            r#"{"jsonrpc":"2.0","id":{id},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":{id},"result":{"resultType":"complete","supportedVersions":["2099-01-01"],"capabilities":{},"ttlMs":0,"cacheScope":"private"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}"#,
        ] {
            let (decided, _) = probed(answer, false).await;
            assert!(
                matches!(decided, Ok(ClientLifecycleMode::Initialize)),
                "{answer}: {decided:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_server_that_closes_instead_of_answering_is_spoken_to_with_initialize_next() {
        let (ours, theirs) = tokio::io::duplex(1024);
        // It reads the question, and exits.
        let server = tokio::spawn(async move {
            let mut lines = BufReader::new(theirs).lines();
            let _ = lines.next_line().await;
        });
        let (read, write) = tokio::io::split(ours);
        let mut transport: LineTransport<RoleClient, _> =
            LineTransport::new(read, write, Limits::default(), "test");
        let info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("planmux", "0"),
        );
        let era = EraCell::default();
        let decided = line_lifecycle(&mut transport, &era, &info).await;
        let _ = server.await;
        assert!(decided.is_err(), "{decided:?}");
        assert_eq!(era.get(), Era::Guessed, "the next start speaks initialize");
        let again = line_lifecycle(&mut transport, &era, &info).await;
        assert!(
            matches!(again, Ok(ClientLifecycleMode::Initialize)),
            "not asked again"
        );
    }
}
