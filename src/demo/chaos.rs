//! Behaviour on demand, for tests and benchmarks: sleep (with progress, honouring
//! cancellation), fail, echo (content, structuredContent and `_meta`), a payload of N bytes,
//! a call counter, the process id (so a test can kill it), and a tool that appears and
//! disappears (to exercise `tools/list_changed`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, MetaObject, ProgressNotificationParam, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use super::{Counters, OutputSchemaExt, failure, num_arg, tool};

/// Longest sleep a caller may ask for: ten minutes is "forever" for any test.
const MAX_SLEEP_MS: f64 = 600_000.0;
/// Largest payload `bytes` returns: big enough for truncation tests, small enough to be safe.
const MAX_BYTES: f64 = 16.0 * 1024.0 * 1024.0;

pub(super) fn tools(extra: bool) -> Vec<Tool> {
    let mut tools = vec![
        tool(
            "sleep",
            "Sleep for 'ms' milliseconds, sending 'steps' progress notifications when asked for progress; stops early when cancelled.",
            json!({"type": "object", "properties": {"ms": {"type": "number"}, "steps": {"type": "integer"}}, "required": ["ms"]}),
        )
        .with_output_schema_value(json!({"type": "object", "properties": {"slept_ms": {"type": "number"}}, "required": ["slept_ms"]}))
        .with_annotations(ToolAnnotations::new().read_only(true).idempotent(true)),
        tool(
            "fail",
            "Fail with the given message (a tool result with isError: true).",
            json!({"type": "object", "properties": {"message": {"type": "string"}}}),
        ),
        tool(
            "echo",
            "Return the arguments as they came: as text, as structuredContent and in _meta.",
            json!({"type": "object"}),
        )
        .with_annotations(ToolAnnotations::new().read_only(true).idempotent(true)),
        tool(
            "bytes",
            "Return a text of 'n' bytes.",
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        )
        .with_annotations(ToolAnnotations::new().read_only(true).idempotent(true)),
        tool(
            "count",
            "How many calls this server instance has had (this one included), and how many were cancelled.",
            json!({"type": "object", "properties": {}}),
        )
        .with_output_schema_value(json!({"type": "object", "properties": {"calls": {"type": "integer"}, "cancelled": {"type": "integer"}}, "required": ["calls", "cancelled"]})),
        tool("pid", "This server's process id.", json!({"type": "object", "properties": {}}))
            .with_output_schema_value(json!({"type": "object", "properties": {"pid": {"type": "integer"}}, "required": ["pid"]})),
        tool(
            "toggle_extra",
            "Add or remove the tool 'extra' and send notifications/tools/list_changed.",
            json!({"type": "object", "properties": {}}),
        ),
    ];
    if extra {
        tools.push(tool(
            "extra",
            "Exists only after toggle_extra.",
            json!({"type": "object", "properties": {}}),
        ));
    }
    tools
}

pub(super) async fn call(
    name: &str,
    args: &JsonObject,
    ctx: &RequestContext<RoleServer>,
    state: &Counters,
) -> Result<CallToolResult, ErrorData> {
    Ok(match name {
        "sleep" => sleep(args, ctx, state).await.unwrap_or_else(|f| f),
        "fail" => {
            let message = args
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("failed on purpose");
            failure(message)
        }
        "echo" => {
            let value = Value::Object(args.clone());
            let mut result = CallToolResult::structured(value.clone());
            let mut meta = MetaObject::new();
            meta.0.insert("planmux-demo/echo".into(), value);
            result.meta = Some(meta);
            result
        }
        "bytes" => match num_arg(args, "n") {
            Ok(Some(n)) if (0.0..=MAX_BYTES).contains(&n) => {
                CallToolResult::success(vec![ContentBlock::text("x".repeat(n as usize))])
            }
            Ok(_) => failure(format!("'n' must be between 0 and {MAX_BYTES}")),
            Err(f) => f,
        },
        "count" => CallToolResult::structured(json!({
            "calls": state.calls.load(Ordering::SeqCst),
            "cancelled": state.cancelled.load(Ordering::SeqCst),
        })),
        "pid" => CallToolResult::structured(json!({ "pid": std::process::id() })),
        "toggle_extra" => {
            let now = !state.extra.fetch_xor(true, Ordering::SeqCst);
            let _ = ctx.peer.notify_tool_list_changed().await;
            CallToolResult::structured(json!({ "extra": now }))
        }
        "extra" => CallToolResult::structured(json!({ "extra": true })),
        other => failure(format!("unknown tool '{other}'")),
    })
}

async fn sleep(
    args: &JsonObject,
    ctx: &RequestContext<RoleServer>,
    state: &Counters,
) -> Result<CallToolResult, CallToolResult> {
    let ms = num_arg(args, "ms")?.unwrap_or(0.0).clamp(0.0, MAX_SLEEP_MS);
    let steps = num_arg(args, "steps")?.unwrap_or(1.0).clamp(1.0, 1000.0) as u32;
    let token = ctx.meta.get_progress_token();
    let slice = Duration::from_secs_f64(ms / 1000.0 / f64::from(steps));
    for step in 1..=steps {
        tokio::select! {
            _ = tokio::time::sleep(slice) => {}
            _ = ctx.ct.cancelled() => {
                state.cancelled.fetch_add(1, Ordering::SeqCst);
                return Err(failure("cancelled"));
            }
        }
        if let Some(token) = &token {
            let param = ProgressNotificationParam::new(token.clone(), f64::from(step))
                .with_total(f64::from(steps))
                .with_message(format!("slept {step}/{steps}"));
            let _ = ctx.peer.notify_progress(param).await;
        }
    }
    Ok(CallToolResult::structured(json!({ "slept_ms": ms })))
}
