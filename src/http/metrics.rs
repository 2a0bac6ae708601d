//! `GET /metrics` (`[telemetry] metrics = true`): the process's metrics for a Prometheus,
//! with the gauges read now (servers up, sessions open). It asks for the same bearer
//! token as `/mcp` (Prometheus sends one with `authorization`, or gets a JWT with its
//! `oauth2` client credentials), since the names of servers and tools are the team's.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

use super::{Body, Front, plain};
use crate::metrics::{Now, render};

/// What a Prometheus reads OpenMetrics text as.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

impl Front {
    /// The metrics, for a caller the front lets in.
    pub(super) async fn metrics(&self, request: &Request<Incoming>) -> Response<Body> {
        if let Err(refused) = self.gate.caller(request).await {
            return refused;
        }
        let statuses = self.downstreams.statuses();
        let now = Now {
            servers: statuses
                .iter()
                .map(|s| (s.name.as_str(), s.ready))
                .collect(),
            sessions: self.sessions.sessions.read().await.len(),
        };
        let Some(text) = render(&now) else {
            return plain(StatusCode::NOT_FOUND, "planmux serves MCP at /mcp");
        };
        let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(OPENMETRICS),
        );
        response
    }
}
