//! The front's side of the passthrough for HTTP sessions (`upstream::passthrough::sessions`):
//! which POSTs may be offered to it, and the event stream a call it takes is answered on.
//!
//! Offered: a POST in a session (`Mcp-Session-Id`) whose host accepts an event stream and
//! sent JSON, without SEP-2243's `Mcp-Method`/`Mcp-Name` headers (rmcp checks those
//! against the body) and without an `Origin` (a browser's, which rmcp checks against
//! `[http] origins`), naming a loopback `Host` when the front is on a loopback address
//! (as rmcp requires there). Anything else is rmcp's to answer or refuse. The call's stream is what rmcp's would be: `text/event-stream`,
//! each message one `data:` event (progress, a server's request, the answer, in order),
//! a comment every 15 s while nothing else is said, ended after the answer. It carries no
//! event ids: a host whose connection drops mid-call cannot resume it.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;

use super::Body;
use super::gate::names_loopback;
use crate::identity::Identity;
use crate::upstream::passthrough::sessions::{Headers, Lanes, Messages, Taken};

/// How often a call's stream says something while its call runs silently: proxies and
/// hosts that give up on a quiet response keep it.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The answer to POST `parts` + `body` from `caller`, if the passthrough takes it; the
/// front is on a loopback address when `loopback`.
pub(super) async fn take(
    lanes: &Lanes,
    parts: &http::request::Parts,
    body: &[u8],
    caller: &Identity,
    loopback: bool,
) -> Option<Response<Body>> {
    let headers = &parts.headers;
    let foreign = headers.contains_key(header::ORIGIN) || (loopback && !names_loopback(headers));
    let session = headers.get("mcp-session-id")?.to_str().ok()?;
    let accepts = |media: &str| {
        headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .any(|value| value.contains(media))
    };
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    let standard = headers.contains_key("mcp-method") || headers.contains_key("mcp-name");
    if foreign || !json || standard || !accepts("text/event-stream") || !accepts("application/json")
    {
        return None;
    }
    let read = Headers {
        version: headers
            .get("mcp-protocol-version")
            .map(HeaderValue::as_bytes),
        traceparent: (headers.get("traceparent")).and_then(|value| value.to_str().ok()),
    };
    match lanes.take(session, read, body, caller).await {
        Taken::Left => None,
        Taken::Answered => {
            let mut response = Response::new(Body::default());
            *response.status_mut() = StatusCode::ACCEPTED;
            Some(response)
        }
        Taken::Call(messages) => Some(stream(messages)),
    }
}

/// A call's messages as an event stream.
fn stream(messages: Messages) -> Response<Body> {
    let frames = futures::stream::unfold(Some(messages), |messages| async move {
        let mut messages = messages?;
        let message = tokio::select! {
            message = messages.next() => message,
            () = tokio::time::sleep(KEEP_ALIVE) => {
                return Some((Ok(Frame::data(Bytes::from_static(b":\n\n"))), Some(messages)));
            }
        };
        let message = message?;
        let mut event = Vec::with_capacity(message.len() + 8);
        event.extend_from_slice(b"data: ");
        event.extend_from_slice(&message);
        event.extend_from_slice(b"\n\n");
        let frame: Result<_, Infallible> = Ok(Frame::data(Bytes::from(event)));
        Some((frame, (!messages.is_done()).then_some(messages)))
    });
    let mut response = Response::new(StreamBody::new(frames).boxed());
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
