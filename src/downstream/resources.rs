//! Prompts, resources, completions and roots, routed to the server they belong to: a
//! prompt by its exported name, a resource by the server that listed its URI, matches it
//! with a template, or linked it in a tool result (else each server with resources in
//! turn), a completion by its prompt or template.

// resources/subscribe is legacy-only in 2026-07-28, but servers on older protocols use it.
#![allow(deprecated)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    CallToolResult, ClientRequest, CompleteRequest, CompleteRequestParams, CompleteResult,
    ContentBlock, GetPromptRequest, GetPromptRequestParams, GetPromptResponse, ReadResourceRequest,
    ReadResourceRequestParams, ReadResourceResult, Reference, ResourceContents, ServerResult,
    SubscribeRequest, SubscribeRequestParams, UnsubscribeRequest, UnsubscribeRequestParams,
};
use tokio_util::sync::CancellationToken;

use super::era::Era;
use super::relay::{Caller, InputTo};
use super::server::MAX_ROUNDS;
use super::{DownstreamError, Downstreams, Server};

/// URIs remembered from tool results, so that a `resource_link` stays readable.
const MAX_LINKS: usize = 4096;
/// Longest URI remembered (a longer one is not a link anyone reads back).
const MAX_LINK_BYTES: usize = 2048;

/// Which server linked which URI in a tool result, the newest [`MAX_LINKS`].
#[derive(Default)]
pub(crate) struct Links {
    servers: Mutex<(HashMap<String, String>, VecDeque<String>)>,
}

impl Links {
    /// Remembers the URIs that `server`'s result links or embeds.
    pub(crate) fn note(&self, server: &str, result: &CallToolResult) {
        let uris = result.content.iter().filter_map(|block| match block {
            ContentBlock::ResourceLink(link) => Some(link.uri.as_str()),
            ContentBlock::Resource(embedded) => match &embedded.resource {
                ResourceContents::TextResourceContents { uri, .. }
                | ResourceContents::BlobResourceContents { uri, .. } => Some(uri.as_str()),
                _ => None,
            },
            _ => None,
        });
        let mut guard = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        let (by_uri, order) = &mut *guard;
        for uri in uris.filter(|u| u.len() <= MAX_LINK_BYTES) {
            if by_uri.insert(uri.to_owned(), server.to_owned()).is_none() {
                order.push_back(uri.to_owned());
            }
            while order.len() > MAX_LINKS {
                if let Some(oldest) = order.pop_front() {
                    by_uri.remove(&oldest);
                }
            }
        }
    }

    fn server_of(&self, uri: &str) -> Option<String> {
        let guard = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        guard.0.get(uri).cloned()
    }
}

/// What a resource request does, for errors and routing.
enum ResourceRequest {
    Read(ReadResourceRequestParams),
    Subscribe(SubscribeRequestParams),
    Unsubscribe(UnsubscribeRequestParams),
}

impl ResourceRequest {
    fn uri(&self) -> &str {
        match self {
            Self::Read(p) => &p.uri,
            Self::Subscribe(p) => &p.uri,
            Self::Unsubscribe(p) => &p.uri,
        }
    }

    fn label(&self) -> String {
        let method = match self {
            Self::Read(_) => "resources/read",
            Self::Subscribe(_) => "resources/subscribe",
            Self::Unsubscribe(_) => "resources/unsubscribe",
        };
        format!("{method} '{}'", crate::text::clip(self.uri(), 200))
    }

    fn request(&self) -> ClientRequest {
        match self {
            Self::Read(p) => {
                ClientRequest::ReadResourceRequest(ReadResourceRequest::new(p.clone()))
            }
            Self::Subscribe(p) => ClientRequest::SubscribeRequest(SubscribeRequest::new(p.clone())),
            Self::Unsubscribe(p) => {
                ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(p.clone()))
            }
        }
    }
}

impl Downstreams {
    pub(super) fn server(&self, name: &str) -> Option<Arc<Server>> {
        self.servers()
            .iter()
            .find(|s| s.config.name == name)
            .cloned()
    }

    /// `prompts/get` by exported name.
    pub async fn get_prompt(
        &self,
        mut params: GetPromptRequestParams,
        caller: &Caller,
        cancel: &CancellationToken,
    ) -> Result<GetPromptResponse, DownstreamError> {
        self.settled(false).await;
        let catalog = self.catalog();
        let entry = catalog.resources().prompt(&params.name).ok_or_else(|| {
            DownstreamError::UnknownPrompt {
                name: params.name.clone(),
            }
        })?;
        let server = self
            .server(&entry.server)
            .ok_or_else(|| DownstreamError::Closed {
                server: entry.server.clone(),
            })?;
        let label = format!("prompts/get '{}'", entry.prompt);
        params.name = entry.prompt.clone();
        // What a 2026-07-28 server asks first (MRTR) is answered as for a tool call.
        for _ in 0..=MAX_ROUNDS {
            let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(params.clone()));
            let asked = match server.request(request, &label, cancel).await? {
                ServerResult::GetPromptResult(result) => {
                    return Ok(GetPromptResponse::Complete(result));
                }
                ServerResult::InputRequiredResult(asked) => asked,
                _ => return Err(unexpected(&server, &label)),
            };
            if caller.input == InputTo::Caller {
                return Ok(GetPromptResponse::InputRequired(asked));
            }
            let (responses, state) = server.answers(asked, &label, Some(caller), cancel).await?;
            params.input_responses = responses;
            params.request_state = state;
        }
        Err(server.too_many_rounds(&label))
    }

    /// `resources/read`, routed by URI (the URI is passed on unchanged).
    pub async fn read_resource(
        &self,
        params: ReadResourceRequestParams,
        cancel: &CancellationToken,
    ) -> Result<ReadResourceResult, DownstreamError> {
        match self
            .resource_request(ResourceRequest::Read(params), cancel)
            .await?
        {
            (ServerResult::ReadResourceResult(result), _) => Ok(result),
            (_, server) => Err(DownstreamError::Protocol {
                server,
                message: "answered resources/read with something that is not its contents".into(),
            }),
        }
    }

    /// `resources/subscribe`, routed by URI like a read.
    pub async fn subscribe(
        &self,
        params: SubscribeRequestParams,
        cancel: &CancellationToken,
    ) -> Result<(), DownstreamError> {
        self.resource_request(ResourceRequest::Subscribe(params), cancel)
            .await
            .map(|_| ())
    }

    /// `resources/unsubscribe`, routed by URI like a read.
    pub async fn unsubscribe(
        &self,
        params: UnsubscribeRequestParams,
        cancel: &CancellationToken,
    ) -> Result<(), DownstreamError> {
        self.resource_request(ResourceRequest::Unsubscribe(params), cancel)
            .await
            .map(|_| ())
    }

    /// Sends a resource request to the server that answers for its URI; failing that, to
    /// each server with resources in config order until one answers. The answer and the
    /// server that gave it.
    async fn resource_request(
        &self,
        request: ResourceRequest,
        cancel: &CancellationToken,
    ) -> Result<(ServerResult, String), DownstreamError> {
        self.settled(false).await;
        let uri = request.uri().to_owned();
        let label = request.label();
        let catalog = self.catalog();
        let known = catalog
            .resources()
            .server_of(&uri)
            .map(str::to_owned)
            .or_else(|| self.links.server_of(&uri));
        let subscribing = !matches!(request, ResourceRequest::Read(_));
        let candidates: Vec<String> = match known {
            Some(server) => vec![server],
            None => catalog
                .resources()
                .resource_servers()
                .filter(|s| !subscribing || catalog.resources().subscribes(s))
                .map(str::to_owned)
                .collect(),
        };
        let mut last = None;
        for name in candidates {
            let Some(server) = self.server(&name) else {
                continue;
            };
            // A 2026-07-28 server has no resources/subscribe: a listen stream per URI.
            let answer = match (&request, server.era()) {
                (ResourceRequest::Subscribe(_), Era::Modern) => server.watch(&uri, cancel).await,
                (ResourceRequest::Unsubscribe(_), Era::Modern) => Ok(server.unwatch(&uri)),
                _ => server.request(request.request(), &label, cancel).await,
            };
            match answer {
                Ok(answer) => return Ok((answer, name)),
                Err(e @ DownstreamError::Cancelled { .. }) => return Err(e),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(DownstreamError::UnknownResource { uri }))
    }

    /// `completion/complete`, routed by the prompt's exported name or the template's
    /// server.
    pub async fn complete(
        &self,
        mut params: CompleteRequestParams,
        cancel: &CancellationToken,
    ) -> Result<CompleteResult, DownstreamError> {
        self.settled(false).await;
        let catalog = self.catalog();
        let resources = catalog.resources();
        let server = match &mut params.r#ref {
            Reference::Prompt(prompt) => {
                let entry = resources.prompt(&prompt.name).ok_or_else(|| {
                    DownstreamError::UnknownPrompt {
                        name: prompt.name.clone(),
                    }
                })?;
                prompt.name = entry.prompt.clone();
                entry.server.clone()
            }
            Reference::Resource(template) => resources
                .server_of_template(&template.uri)
                .or_else(|| resources.server_of(&template.uri))
                .map(str::to_owned)
                .ok_or_else(|| DownstreamError::UnknownResource {
                    uri: template.uri.clone(),
                })?,
            _ => {
                return Err(DownstreamError::UnknownPrompt {
                    name: "(a completion reference of an unknown kind)".into(),
                });
            }
        };
        let server = self
            .server(&server)
            .ok_or(DownstreamError::Closed { server })?;
        let label = "completion/complete";
        let request = ClientRequest::CompleteRequest(CompleteRequest::new(params));
        match server.request(request, label, cancel).await? {
            ServerResult::CompleteResult(result) => Ok(result),
            _ => Err(unexpected(&server, label)),
        }
    }

    /// The host's roots changed: every running server is told (bounded, concurrently).
    pub async fn roots_changed(&self) {
        let servers = self.servers();
        futures::future::join_all(servers.iter().map(|s| s.notify_roots_changed())).await;
    }
}

fn unexpected(server: &Server, label: &str) -> DownstreamError {
    DownstreamError::Protocol {
        server: server.config.name.clone(),
        message: format!("answered {label} with something else"),
    }
}
