//! The client side of each downstream connection: relays what a downstream server sends
//! (log messages, list changes, and its requests for sampling, elicitation and roots) to
//! the host that is connected upstream ([`super::HostLink`] says where). Progress goes
//! through [`super::tap`].

// Sampling, roots and logging are deprecated by SEP-2577 but hosts and servers still use them.
#![allow(deprecated)]

use super::changes::{Changed, Changes};
use super::host_link::HostLink;
pub use super::sessions::{Asked, Asks, Caller, InputTo, LogLevel, Session, identity_of};
use super::tap::{LogFor, LogRouter};
use std::sync::Arc;

use rmcp::model::{
    CancelledNotificationParam, ClientCapabilities, ClientConfig, ClientResult,
    CreateMessageRequest, CreateMessageRequestParams, CreateMessageResult, ElicitRequest,
    ElicitRequestParams, ElicitResult, ErrorCode, GetExtensions, Implementation, InputRequest,
    ListRootsRequest, ListRootsResult, LoggingMessageNotificationParam, ProtocolVersion, RequestId,
    ResourceUpdatedNotificationParam, ServerRequest,
};
use rmcp::service::{
    NotificationContext, OriginatingRequestId, PeerRequestOptions, RequestContext,
};
use rmcp::{ClientHandler, ErrorData, Peer, RoleClient, RoleServer};
use tokio_util::sync::CancellationToken;

/// The `ClientHandler` of one downstream connection, and what puts its server's
/// questions to the host.
#[derive(Clone)]
pub(crate) struct Relay {
    pub(crate) server: String,
    pub(crate) host: Arc<HostLink>,
    pub(crate) changes: Arc<Changes>,
}

impl Relay {
    /// With many sessions, what decides whom this server's log messages are for, as they
    /// are read.
    pub(crate) fn log_router(&self) -> Option<LogRouter> {
        let (host, server) = (self.host.clone(), self.server.clone());
        let router: LogRouter = Arc::new(move || host.caller_of(&server));
        self.host.has_sessions().then_some(router)
    }
}

fn unsupported(what: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("the host connected to planmux does not support {what}"),
        None,
    )
}

/// Why a 2026-07-28 host is not asked: it takes no requests from servers.
fn takes_no_requests(what: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "the host speaks MCP 2026-07-28, which takes no {what} request from a server: only its own call of the tool can answer (call the tool directly)"
        ),
        None,
    )
}

fn relay_error(what: &str, error: rmcp::service::ServiceError) -> ErrorData {
    match error {
        rmcp::service::ServiceError::McpError(e) => e,
        other => {
            ErrorData::internal_error(format!("relaying {what} to the host failed: {other}"), None)
        }
    }
}

impl Relay {
    /// Where this server's request goes: the host (one host), or the session `caller`
    /// names or whose call is in flight on it (many), with its capabilities and, for the
    /// latter, the session's request the server's request belongs to.
    async fn target(
        &self,
        what: &str,
        caller: Option<&Caller>,
    ) -> Result<(Peer<RoleServer>, ClientCapabilities, Option<RequestId>), ErrorData> {
        if !self.host.has_sessions() {
            let Some((peer, caps)) = self.host.capabilities().await else {
                // A host connected without `initialize` (2026-07-28) has no capabilities
                // to send requests by.
                let modern = self.host.get().is_some_and(|p| p.peer_info().is_none());
                return Err(if modern {
                    takes_no_requests(what)
                } else {
                    unsupported(what)
                });
            };
            return Ok((peer, caps, None));
        }
        let caller = match caller {
            Some(caller) => caller.clone(),
            None => self.host.caller_of(&self.server).map_err(|why| {
                ErrorData::internal_error(format!("planmux did not relay {what}: {why}"), None)
            })?,
        };
        // A 2026-07-28 request has no session to take requests from a server.
        let caps = caller
            .peer
            .peer_info()
            .map(|info| info.capabilities.clone())
            .ok_or_else(|| takes_no_requests(what))?;
        Ok((caller.peer, caps, caller.request))
    }

    /// Relays `request` to the host [`Self::target`] chose, if it `supported` it, and
    /// waits for the answer; a server that gives up on its request (`cancel`) has the
    /// host's copy cancelled too (its dialog closes).
    pub(super) async fn ask(
        &self,
        what: &str,
        mut request: ServerRequest,
        supported: impl Fn(&ClientCapabilities) -> bool,
        caller: Option<&Caller>,
        cancel: &CancellationToken,
    ) -> Result<ClientResult, ErrorData> {
        // A 2026-07-28 host's own call takes the question as `input_required`.
        let asking = caller
            .cloned()
            .or_else(|| self.host.caller_of(&self.server).ok());
        if let Some(caller) = asking.filter(|c| c.asks.is_some()) {
            return ask_in_round(what, request, supported, &caller, cancel).await;
        }
        // A 2026-07-28 host has no session info to ask by: `target` says so.
        let (peer, caps, origin) = self.target(what, caller).await?;
        if !supported(&caps) {
            return Err(unsupported(what));
        }
        if let Some(origin) = origin {
            // Over HTTP, on the stream of the session's call, as a direct server's would.
            request
                .extensions_mut()
                .insert(OriginatingRequestId(origin));
        }
        // Sent from a task of its own: this handler runs in rmcp's scope for the server's
        // request, and rmcp would mark the host's copy with that request's id (the
        // server's own numbering), in place of the host's call above, so it went on the
        // session's standalone stream instead of the call's.
        let sender = peer.clone();
        let handle = tokio::spawn(async move {
            sender
                .send_cancellable_request(request, PeerRequestOptions::no_options())
                .await
        })
        .await
        .map_err(|e| ErrorData::internal_error(format!("{what} relay failed: {e}"), None))?
        .map_err(|e| relay_error(what, e))?;
        let id = handle.id.clone();
        tokio::select! {
            answer = handle.await_response() => answer.map_err(|e| relay_error(what, e)),
            () = cancel.cancelled() => {
                let why = format!("the server cancelled its {what} request");
                let param = CancelledNotificationParam::new(Some(id), Some(why.clone()));
                let limit = std::time::Duration::from_secs(1);
                let _ = tokio::time::timeout(limit, peer.notify_cancelled(param)).await;
                Err(ErrorData::internal_error(why, None))
            }
        }
    }

    /// Puts one of a 2026-07-28 server's questions (`input_required`) to the host as the
    /// request a legacy server would have sent, and gives back the host's answer.
    pub(super) async fn answer(
        &self,
        question: InputRequest,
        caller: Option<&Caller>,
        cancel: &CancellationToken,
    ) -> Result<ClientResult, ErrorData> {
        match question {
            InputRequest::CreateMessage(request) => {
                let request = ServerRequest::CreateMessageRequest(request);
                let supported = |caps: &ClientCapabilities| caps.sampling.is_some();
                self.ask("sampling", request, supported, caller, cancel)
                    .await
            }
            InputRequest::Elicitation(request) => {
                let url = matches!(
                    request.params,
                    ElicitRequestParams::UrlElicitationParams { .. }
                );
                let supported = move |caps: &ClientCapabilities| takes_elicitation(caps, url);
                let request = ServerRequest::ElicitRequest(request);
                self.ask("elicitation", request, supported, caller, cancel)
                    .await
            }
            InputRequest::ListRoots(request) => {
                let request = ServerRequest::ListRootsRequest(request);
                let supported = |caps: &ClientCapabilities| caps.roots.is_some();
                self.ask("roots", request, supported, caller, cancel).await
            }
            // A kind of question newer than planmux.
            _ => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "the server asked a kind of question planmux cannot relay",
                None,
            )),
        }
    }
}

impl ClientHandler for Relay {
    fn get_info(&self) -> ClientConfig {
        let capabilities = self.host.offer();
        let mut config = ClientConfig::new(
            capabilities,
            Implementation::new("planmux", env!("CARGO_PKG_VERSION")),
        );
        // planmux connects with `initialize`, which 2026-07-28 (rmcp's LATEST) does not
        // have: name the newest version that does (servers answer with theirs).
        config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        config
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        let supported = |caps: &ClientCapabilities| caps.sampling.is_some();
        match self
            .ask("sampling", request, supported, None, &context.ct)
            .await?
        {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            _ => Err(ErrorData::internal_error(
                "the host answered sampling with something else",
                None,
            )),
        }
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let request = ServerRequest::ListRootsRequest(ListRootsRequest::default());
        let supported = |caps: &ClientCapabilities| caps.roots.is_some();
        match self
            .ask("roots", request, supported, None, &context.ct)
            .await?
        {
            ClientResult::ListRootsResult(result) => Ok(result),
            _ => Err(ErrorData::internal_error(
                "the host answered roots/list with something else",
                None,
            )),
        }
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let url = matches!(params, ElicitRequestParams::UrlElicitationParams { .. });
        let supported = move |caps: &ClientCapabilities| takes_elicitation(caps, url);
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        match self
            .ask("elicitation", request, supported, None, &context.ct)
            .await?
        {
            ClientResult::ElicitResult(result) => Ok(result),
            _ => Err(ErrorData::internal_error(
                "the host answered elicitation with something else",
                None,
            )),
        }
    }

    async fn on_logging_message(
        &self,
        mut params: LoggingMessageNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        tracing::debug!(server = %self.server, level = ?params.level, "downstream log message");
        let peer = if self.host.has_sessions() {
            // Over HTTP, only to the session whose call was in flight when the message
            // was read (`tap::LogFor`), at its own level.
            let caller = match context.extensions.get::<LogFor>() {
                Some(LogFor(caller)) => caller.clone(),
                None => self.host.caller_of(&self.server),
            };
            match caller {
                Ok(caller) if caller.session.log_level.wants(params.level) => caller.peer,
                Ok(_) => return,
                Err(why) => {
                    tracing::debug!(server = %self.server, %why, "log message not relayed");
                    return;
                }
            }
        } else {
            match self.host.log_peer(params.level) {
                Some(peer) => peer,
                None => return,
            }
        };
        let logger = params.logger.take();
        params.logger = Some(match logger {
            Some(name) => format!("{}/{name}", self.server),
            None => self.server.clone(),
        });
        let _ = peer.notify_logging_message(params).await;
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changes.mark(&self.server, Changed::TOOLS);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let said = Changed {
            prompts: true,
            ..Changed::default()
        };
        self.changes.mark(&self.server, said);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let said = Changed {
            resources: true,
            ..Changed::default()
        };
        self.changes.mark(&self.server, said);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.host.notify_resource_updated(params).await;
    }
}

/// A legacy server's `request` during a 2026-07-28 host's own call (`caller`): put to the
/// host as a question of that call's `input_required`, if it declared it can answer it,
/// and answered with what its retry brings.
async fn ask_in_round(
    what: &str,
    request: ServerRequest,
    supported: impl Fn(&ClientCapabilities) -> bool,
    caller: &Caller,
    cancel: &CancellationToken,
) -> Result<ClientResult, ErrorData> {
    let (Some(asks), Some(caps)) = (&caller.asks, &caller.capabilities) else {
        return Err(takes_no_requests(what));
    };
    if !supported(caps) {
        return Err(unsupported(what));
    }
    type Read = fn(serde_json::Value) -> serde_json::Result<ClientResult>;
    let (question, read): (InputRequest, Read) = match request {
        ServerRequest::CreateMessageRequest(request) => {
            (InputRequest::CreateMessage(request), |answer| {
                serde_json::from_value(answer)
                    .map(|r| ClientResult::CreateMessageResult(Box::new(r)))
            })
        }
        ServerRequest::ElicitRequest(request) => (InputRequest::Elicitation(request), |answer| {
            serde_json::from_value(answer).map(ClientResult::ElicitResult)
        }),
        ServerRequest::ListRootsRequest(request) => (InputRequest::ListRoots(request), |answer| {
            serde_json::from_value(answer).map(ClientResult::ListRootsResult)
        }),
        _ => return Err(unsupported(what)),
    };
    let (answer, answered) = tokio::sync::oneshot::channel();
    let gone = || ErrorData::internal_error("the host's call ended before it answered", None);
    asks.0
        .send(Asked { question, answer })
        .map_err(|_| gone())?;
    let answer = tokio::select! {
        answered = answered => answered.map_err(|_| gone())??,
        () = cancel.cancelled() => {
            return Err(ErrorData::internal_error("the server gave up on its question", None));
        }
    };
    read(answer)
        .map_err(|e| ErrorData::invalid_params(format!("the host's answer to {what}: {e}"), None))
}

/// Whether a host takes an elicitation in URL mode (`url`) or form mode: a mode it did not
/// declare is refused, not relayed; declaring no mode means form (hosts older than modes).
fn takes_elicitation(caps: &ClientCapabilities, url: bool) -> bool {
    caps.elicitation.as_ref().is_some_and(|modes| {
        let form_only = modes.form.is_none() && modes.url.is_none();
        if url {
            modes.url.is_some()
        } else {
            modes.form.is_some() || form_only
        }
    })
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ElicitationCapability, UrlElicitationCapability};

    use super::*;

    /// Over HTTP (many sessions) servers are offered elicitation in both modes; each
    /// request then reaches a session only in a mode that session declared.
    #[test]
    fn elicitation_is_offered_in_both_modes_and_relayed_in_the_hosts() {
        let offer = HostLink::for_sessions().offer();
        assert!(takes_elicitation(&offer, true) && takes_elicitation(&offer, false));
        let form = ClientCapabilities::builder().enable_elicitation().build();
        let with = |modes: ElicitationCapability| {
            let mut caps = ClientCapabilities::default();
            caps.elicitation = Some(modes);
            caps
        };
        let legacy = with(ElicitationCapability::new());
        let url_only =
            with(ElicitationCapability::new().with_url(UrlElicitationCapability::default()));
        assert!(takes_elicitation(&legacy, false) && !takes_elicitation(&legacy, true));
        assert!(takes_elicitation(&url_only, true) && !takes_elicitation(&url_only, false));
        assert!(!takes_elicitation(&ClientCapabilities::default(), false));
        assert!(takes_elicitation(&form, false));
    }
}
