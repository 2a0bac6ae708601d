//! A call on the passthrough as a trace's spans, when traces are on: the host's request
//! (continuing the host's trace: its `_meta.traceparent`, else an HTTP session's
//! `traceparent` header) and the call to the server inside it, whose `traceparent` the
//! server is sent in `_meta`, named and marked as on rmcp's typed path
//! (`upstream/traced.rs`, `LineRoute::call`).

use opentelemetry::Context;

use crate::downstream::LineRoute;
use crate::traces::{self, attribute};

/// A call's two spans.
pub(super) struct Spans {
    host: Context,
    call: Context,
    server: String,
    tool: String,
}

impl Spans {
    /// The spans of a host's call of `name` going to `route`, when traces are on.
    pub(super) fn start(name: &str, traceparent: Option<&str>, route: &LineRoute) -> Option<Self> {
        let attributes = vec![attribute("mcp.tool", name.to_owned())];
        let host = traces::host_request(format!("tools/call {name}"), traceparent, attributes)?;
        let (server, tool) = (route.server().to_owned(), route.tool().to_owned());
        let call = {
            let _inside = host.clone().attach();
            traces::outgoing(format!("call {server}/{tool}"), Vec::new())?
        };
        Some(Self {
            host,
            call,
            server,
            tool,
        })
    }

    /// The `traceparent` the server is sent: its call's span.
    pub(super) fn traceparent(&self) -> Option<String> {
        traces::traceparent_of(&self.call)
    }

    /// Ends the spans of a call, if it has any, failed when `error` says why.
    pub(super) fn end_all(spans: Option<Self>, error: Option<String>) {
        if let Some(spans) = spans {
            spans.end(error);
        }
    }

    /// Ends both spans, failed when `error` says why.
    pub(super) fn end(self, error: Option<String>) {
        let attributes = vec![
            attribute("planmux.server", self.server),
            attribute("planmux.tool", self.tool),
        ];
        traces::end(&self.call, attributes, error.clone());
        traces::end(&self.host, Vec::new(), error);
    }
}
