//! The HTTP client of a streamable-HTTP server, with each event of its answers' streams
//! shown to planmux before rmcp parses it: what rmcp's types leave out of a `tools/list`
//! answer (a tool's `execution`, say) is kept, as line connections keep it from their raw
//! lines ([`ToolFields`]). An answer sent as one JSON body reaches planmux parsed by rmcp
//! already, so a server that answers that way keeps only what rmcp models.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Error as SseError, Sse};

use crate::downstream::fields::ToolFields;

/// How many same-origin redirects a request follows (rmcp's own client follows ten).
const MAX_REDIRECTS: usize = 10;

/// `inner`, with the events of its answers' streams noted in `fields`.
#[derive(Clone)]
pub(crate) struct Noting<C> {
    pub(crate) inner: C,
    pub(crate) fields: Arc<ToolFields>,
}

/// The plain client: as rmcp's default, no idle connections kept (a reused one can stall
/// on delayed ACKs), and only same-origin 307 and 308 redirects followed (they keep the
/// body; another origin would get the session and headers).
pub(crate) fn plain_client() -> reqwest::Client {
    let redirect = reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(redirect)
        .build()
        .unwrap_or_default()
}

type HttpResult<T, E> = Result<T, StreamableHttpError<E>>;

impl<C: StreamableHttpClient + Sync> Noting<C> {
    /// The answer, its events noted as they pass.
    fn noted(&self, response: StreamableHttpPostResponse) -> StreamableHttpPostResponse {
        match response {
            StreamableHttpPostResponse::Sse(events, session) => {
                StreamableHttpPostResponse::Sse(self.noting(events), session)
            }
            other => other,
        }
    }

    fn noting(
        &self,
        events: BoxStream<'static, Result<Sse, SseError>>,
    ) -> BoxStream<'static, Result<Sse, SseError>> {
        let fields = self.fields.clone();
        events
            .inspect(move |event| {
                if let Ok(Sse {
                    data: Some(data), ..
                }) = event
                {
                    fields.note(data.as_bytes());
                }
            })
            .boxed()
    }
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for Noting<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        mut custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse, Self::Error> {
        traceparent_header(&message, &mut custom_headers);
        let response = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await?;
        Ok(self.noted(response))
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        mut custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<StreamableHttpPostResponse, Self::Error> {
        traceparent_header(&message, &mut custom_headers);
        let response = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(self.noted(response))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<(), Self::Error> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>, Self::Error> {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>, Self::Error> {
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

/// A request's `traceparent` (planmux's calling span, which it puts in the request's
/// `_meta`: SEP-414) also as the W3C `traceparent` header, for servers and proxies that
/// trace by headers.
fn traceparent_header(
    message: &ClientJsonRpcMessage,
    headers: &mut HashMap<HeaderName, HeaderValue>,
) {
    use rmcp::model::GetMeta as _;
    let ClientJsonRpcMessage::Request(request) = message else {
        return;
    };
    let traceparent = request.request.get_meta().get_traceparent();
    if let Some(value) = traceparent.and_then(|t| HeaderValue::from_str(t).ok()) {
        headers.insert(HeaderName::from_static("traceparent"), value);
    }
}
