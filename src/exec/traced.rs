//! A plan's steps as spans of its trace (`traces.rs`), when traces are on: each step, or
//! each item of a `foreach` step, is a child of the plan's span, named by the step's id,
//! with its tool, server and tier, and when it ends its status and attempts. What it
//! calls runs inside it, so the server is sent the step's `traceparent`.

use std::future::Future;

use super::step::{Attempted, Ending};
use crate::plan::PlannedStep;
use crate::traces::{self, FutureExt as _, attribute};

/// `attempt`, in a span of `step` (item `item`) when traces are on.
pub(super) fn traced(
    attempt: impl Future<Output = Attempted> + Send + 'static,
    step: &PlannedStep,
    item: Option<usize>,
) -> impl Future<Output = Attempted> + Send + 'static {
    let span = traces::on().then(|| {
        let name = match item {
            Some(k) => format!("step {}[{k}]", step.id),
            None => format!("step {}", step.id),
        };
        let mut attributes = vec![
            attribute("planmux.step", step.id.to_string()),
            attribute("planmux.tool", step.exported.clone()),
            attribute("planmux.server", step.server.clone()),
            attribute("planmux.tier", step.tier.to_string()),
        ];
        if let Some(k) = item {
            attributes.push(attribute(
                "planmux.item",
                i64::try_from(k).unwrap_or(i64::MAX),
            ));
        }
        traces::inner(name, attributes)
    });
    async move {
        let Some(cx) = span.flatten() else {
            return attempt.await;
        };
        let done = attempt.with_context(cx.clone()).await;
        let (status, error) = match &done.ending {
            Ending::Succeeded(_) | Ending::Expand(_) => ("succeeded", None),
            Ending::Skipped(_) => ("skipped", None),
            Ending::Failed { message, .. } => ("failed", Some(message.clone())),
            Ending::TimedOut(why) => ("timed_out", Some(why.clone())),
            Ending::Cancelled => ("cancelled", Some("cancelled".to_owned())),
        };
        let attributes = vec![
            attribute("planmux.status", status),
            attribute("planmux.attempts", i64::from(done.attempts)),
        ];
        traces::end(&cx, attributes, error);
        done
    }
}
