//! `[telemetry] metrics = true`: what `GET /metrics` on the HTTP front shows a Prometheus
//! (OpenMetrics text, by the Prometheus project's own client): every downstream tool call
//! (count, errors, latency, by server and tool), plans and their steps by status,
//! approvals by decision, sign-in token refreshes, and, read when scraped, the servers
//! that are up and the sessions open.
//!
//! Off by default, and then nothing is recorded: each recording point asks [`on`] (one
//! atomic load) before it does anything else. The one set of metrics is the process's,
//! made by [`enable`] when serving starts with the setting on.

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::exec::{RunRecord, RunStatus};

/// The process's metrics, once [`enable`]d.
static METRICS: OnceLock<Metrics> = OnceLock::new();

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Call {
    server: String,
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Status {
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Decision {
    decision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Server {
    server: String,
}

/// How an approval asked for ended up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approval {
    Asked,
    Granted,
    Declined,
}

struct Metrics {
    calls: Family<Call, Counter>,
    errors: Family<Call, Counter>,
    latency: Family<Call, Histogram>,
    plans: Family<Status, Counter>,
    steps: Family<Status, Counter>,
    approvals: Family<Decision, Counter>,
    refreshes: Family<Server, Counter>,
}

/// Turns metrics on for this process (`[telemetry] metrics = true`).
pub fn enable() {
    METRICS.get_or_init(|| Metrics {
        calls: Family::default(),
        errors: Family::default(),
        // 1 ms to about 33 s, doubling.
        latency: Family::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 16))
        }),
        plans: Family::default(),
        steps: Family::default(),
        approvals: Family::default(),
        refreshes: Family::default(),
    });
}

/// Whether metrics are on.
pub fn on() -> bool {
    METRICS.get().is_some()
}

/// A call of `tool` on `server` ended after `took`: with an error (a JSON-RPC error, a
/// tool result marked `isError`, a timeout, a cancellation, a broken connection) or not.
pub fn call_ended(server: &str, tool: &str, took: Duration, failed: bool) {
    let Some(metrics) = METRICS.get() else {
        return;
    };
    let labels = Call {
        server: server.to_owned(),
        tool: tool.to_owned(),
    };
    metrics.calls.get_or_create(&labels).inc();
    if failed {
        metrics.errors.get_or_create(&labels).inc();
    }
    metrics
        .latency
        .get_or_create(&labels)
        .observe(took.as_secs_f64());
}

/// A plan ran: its status, and each of its steps'.
pub fn plan_ended(record: &RunRecord) {
    let Some(metrics) = METRICS.get() else {
        return;
    };
    let status = match record.status {
        RunStatus::Succeeded => "succeeded",
        RunStatus::Partial => "partial",
        RunStatus::Failed => "failed",
    };
    metrics.plans.get_or_create(&Status { status }).inc();
    for step in &record.steps {
        let status = step.status.as_str();
        metrics.steps.get_or_create(&Status { status }).inc();
    }
}

/// An approval was asked for, granted or declined.
pub fn approval(what: Approval) {
    let Some(metrics) = METRICS.get() else {
        return;
    };
    let decision = match what {
        Approval::Asked => "asked",
        Approval::Granted => "granted",
        Approval::Declined => "declined",
    };
    metrics
        .approvals
        .get_or_create(&Decision { decision })
        .inc();
}

/// A remote server's access token was fetched again (refreshed, or client credentials).
pub fn token_refreshed(server: &str) {
    if let Some(metrics) = METRICS.get() {
        let labels = Server {
            server: server.to_owned(),
        };
        metrics.refreshes.get_or_create(&labels).inc();
    }
}

/// What is read when scraped.
pub struct Now<'a> {
    /// Each configured server and whether it is up.
    pub servers: Vec<(&'a str, bool)>,
    /// HTTP sessions open.
    pub sessions: usize,
}

/// The metrics as OpenMetrics text, with `now`'s gauges; `None` when they are off.
pub fn render(now: &Now<'_>) -> Option<String> {
    let metrics = METRICS.get()?;
    let mut registry = Registry::with_prefix("planmux");
    registry.register(
        "tool_calls",
        "Downstream tool calls, by server and tool",
        metrics.calls.clone(),
    );
    registry.register(
        "tool_call_errors",
        "Downstream tool calls that ended in an error (JSON-RPC error, isError, timeout, cancellation, lost connection)",
        metrics.errors.clone(),
    );
    registry.register_with_unit(
        "tool_call_duration",
        "How long downstream tool calls took, from sending to their end",
        Unit::Seconds,
        metrics.latency.clone(),
    );
    registry.register("plans", "Plans run, by status", metrics.plans.clone());
    registry.register(
        "plan_steps",
        "Plan steps, by how they ended",
        metrics.steps.clone(),
    );
    registry.register(
        "approvals",
        "Approvals asked for, granted and declined",
        metrics.approvals.clone(),
    );
    registry.register(
        "token_refreshes",
        "Access tokens of remote servers fetched again",
        metrics.refreshes.clone(),
    );
    let up = Family::<Server, Gauge>::default();
    for (server, is_up) in &now.servers {
        let labels = Server {
            server: (*server).to_owned(),
        };
        up.get_or_create(&labels).set(i64::from(*is_up));
    }
    registry.register("server_up", "Whether each configured server is up", up);
    let sessions = Gauge::<i64>::default();
    sessions.set(i64::try_from(now.sessions).unwrap_or(i64::MAX));
    registry.register("sessions", "HTTP sessions open", sessions);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).ok()?;
    Some(text)
}
