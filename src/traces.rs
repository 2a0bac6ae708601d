//! `[telemetry] otlp_endpoint`: OpenTelemetry traces over OTLP/HTTP. A host's
//! `tools/call` is a span (continuing the host's trace when it sends a `traceparent`:
//! in `_meta`, or as an HTTP header); a plan run inside it is a child span, each of its
//! steps a child of the plan, each downstream call a child of what made it, and every
//! server is sent the call's `traceparent` in `_meta` (SEP-414; an HTTP server also as
//! the header).
//!
//! Spans are made only when an endpoint is set ([`on`]: one atomic load otherwise). They
//! are exported in batches from the SDK's own thread, so a call never waits for the
//! collector; a collector that is down costs the SDK's log line per batch, nothing else. The
//! process has one exporter, started by [`start`] and flushed when its [`Exporting`] is
//! dropped (bounded).

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

pub use opentelemetry::trace::FutureExt;

/// How long one export may take, and the flush at the end.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The process's tracer, once started.
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// The exporter while it runs; dropping it flushes what is left (at most
/// [`EXPORT_TIMEOUT`]) and stops its thread.
pub struct Exporting(SdkTracerProvider);

impl Drop for Exporting {
    fn drop(&mut self) {
        if let Err(error) = self.0.shutdown_with_timeout(EXPORT_TIMEOUT) {
            tracing::warn!(%error, "traces not all exported at shutdown");
        }
    }
}

/// Starts exporting to the collector at `endpoint` (its base URL: spans go to
/// `/v1/traces` under it). `None` when it was started before (one exporter a process).
pub fn start(endpoint: &str) -> Result<Option<Exporting>, String> {
    if TRACER.get().is_some() {
        return Ok(None);
    }
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    // TLS is rustls with ring, the process's provider, installed before the first client
    // is built (as for remote servers: `downstream/transport.rs`). A second install is a
    // no-op.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot export traces to {endpoint}: {e}"))?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("planmux")
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let _ = TRACER.set(provider.tracer("planmux"));
    Ok(Some(Exporting(provider)))
}

/// [`start`] when `endpoint` is set (`[telemetry] otlp_endpoint`), saying so in the log.
pub fn start_for(endpoint: Option<&str>) -> Option<Exporting> {
    match start(endpoint?) {
        Ok(exporting) => {
            tracing::info!(endpoint, "exporting traces (OTLP/HTTP)");
            exporting
        }
        Err(why) => {
            tracing::warn!(%why, "traces are not exported");
            None
        }
    }
}

/// Whether traces are exported.
pub fn on() -> bool {
    TRACER.get().is_some()
}

/// A span named `name` of `kind` with `attributes`, a child of `parent`: the context to
/// run its work in. `None` when traces are off.
fn span(
    name: String,
    kind: SpanKind,
    attributes: Vec<KeyValue>,
    parent: &Context,
) -> Option<Context> {
    let tracer = TRACER.get()?;
    let span = tracer
        .span_builder(name)
        .with_kind(kind)
        .with_attributes(attributes)
        .start_with_context(tracer, parent);
    Some(parent.with_span(span))
}

/// A host's request `name` (e.g. `tools/call weather__get_weather`), continuing the
/// host's trace when `traceparent` names one.
pub fn host_request(
    name: String,
    traceparent: Option<&str>,
    attributes: Vec<KeyValue>,
) -> Option<Context> {
    if !on() {
        return None;
    }
    let parent = match traceparent {
        Some(traceparent) => {
            let carrier = HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
            TraceContextPropagator::new().extract(&carrier)
        }
        None => Context::new(),
    };
    span(name, SpanKind::Server, attributes, &parent)
}

/// Work of planmux's inside the current span (a plan, a step).
pub fn inner(name: String, attributes: Vec<KeyValue>) -> Option<Context> {
    on().then(|| span(name, SpanKind::Internal, attributes, &Context::current()))?
}

/// A call to a server from inside the current span.
pub fn outgoing(name: String, attributes: Vec<KeyValue>) -> Option<Context> {
    on().then(|| span(name, SpanKind::Client, attributes, &Context::current()))?
}

/// The `traceparent` of the current span, to send a server: `None` outside any.
pub fn traceparent() -> Option<String> {
    if !on() {
        return None;
    }
    traceparent_of(&Context::current())
}

/// The `traceparent` of the span of `cx`.
pub fn traceparent_of(cx: &Context) -> Option<String> {
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut carrier);
    carrier.remove("traceparent")
}

/// Ends the span of `cx`, with `attributes` and an error status when `error` says why.
pub fn end(cx: &Context, attributes: Vec<KeyValue>, error: Option<String>) {
    let span = cx.span();
    span.set_attributes(attributes);
    if let Some(why) = error {
        span.set_status(Status::error(why));
    }
    span.end();
}

/// An event on the span of `cx` (a loop's item, an attempt).
pub fn event(cx: &Context, name: &'static str, attributes: Vec<KeyValue>) {
    cx.span().add_event(name, attributes);
}

/// The key-value pair for a span attribute.
pub fn attribute(key: &'static str, value: impl Into<opentelemetry::Value>) -> KeyValue {
    KeyValue::new(key, value)
}
