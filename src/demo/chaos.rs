//! Behaviour on demand, for tests and benchmarks: sleep (with progress, honouring
//! cancellation), fail, echo (content, structuredContent and `_meta`), a payload of N bytes,
//! a call counter, the process id (so a test can kill it), and a tool that appears and
//! disappears (to exercise `tools/list_changed`), and requests and log messages sent to the
//! client (to exercise relaying them).

// Sampling, roots and logging are deprecated by SEP-2577; chaos exercises them anyway.
#![allow(deprecated)]

use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CreateMessageRequest,
    ElicitRequest, InputRequest, InputRequests, InputRequiredResult, JsonObject, ListRootsRequest,
    LoggingMessageNotificationParam, MetaObject, ProgressNotificationParam, ProtocolVersion,
    ServerRequest, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use super::{Counters, OutputSchemaExt, failure, num_arg, tool};

/// Longest sleep a caller may ask for: ten minutes is "forever" for any test.
const MAX_SLEEP_MS: f64 = 600_000.0;
/// Largest payload `bytes` returns: past rmcp's 16 MiB line limit (the large-output
/// benchmark sends 20 MB), within planmux's default 64 MiB.
const MAX_BYTES: f64 = 32.0 * 1024.0 * 1024.0;

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
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
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
        .with_output_schema_value(json!({"type": "object", "properties": {"calls": {"type": "integer"}, "cancelled": {"type": "integer"}}, "required": ["calls", "cancelled"]}))
        .with_annotations(ToolAnnotations::new().read_only(true)),
        tool("pid", "This server's process id.", json!({"type": "object", "properties": {}}))
            .with_output_schema_value(json!({"type": "object", "properties": {"pid": {"type": "integer"}}, "required": ["pid"]}))
            .with_annotations(ToolAnnotations::new().read_only(true).idempotent(true)),
        tool(
            "toggle_extra",
            "Add or remove the tool 'extra' and send notifications/tools/list_changed.",
            json!({"type": "object", "properties": {}}),
        )
        .with_annotations(ToolAnnotations::new().destructive(false)),
    ];
    tools.push(tool(
        "ask_host",
        "Send the client a request and return its answer: kind = sampling, elicitation or roots.",
        json!({"type": "object", "properties": {"kind": {"type": "string", "enum": ["sampling", "elicitation", "roots"]}}, "required": ["kind"]}),
    ).with_annotations(ToolAnnotations::new().read_only(true)));
    tools.push(tool(
        "log",
        "Send the client a notifications/message log message with the given text (level: debug … emergency, default info).",
        json!({"type": "object", "properties": {"message": {"type": "string"}, "level": {"type": "string"}}, "required": ["message"]}),
    ).with_annotations(ToolAnnotations::new().read_only(true)));
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
            // The trace it was called in, when the caller said (SEP-414).
            if let Some(traceparent) = ctx.meta.get_traceparent() {
                meta.0
                    .insert("planmux-demo/traceparent".into(), traceparent.into());
            }
            // Served over HTTP, the header too.
            let header = (ctx.extensions.get::<http::request::Parts>())
                .and_then(|parts| parts.headers.get("traceparent")?.to_str().ok());
            if let Some(traceparent) = header {
                meta.0
                    .insert("planmux-demo/traceparent-header".into(), traceparent.into());
            }
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
        "log" => {
            let message = args.get("message").cloned().unwrap_or(Value::Null);
            let level = args.get("level").cloned().unwrap_or_else(|| json!("info"));
            let param = serde_json::from_value::<LoggingMessageNotificationParam>(json!({
                "level": level, "logger": "chaos", "data": message
            }));
            match param {
                Ok(param) => {
                    let _ = ctx.peer.notify_logging_message(param).await;
                    CallToolResult::structured(json!({ "logged": true }))
                }
                Err(e) => failure(e.to_string()),
            }
        }
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

/// Asks the client for sampling, elicitation or roots and returns its answer: with a
/// request during the call (2025-11-25), or, to a 2026-07-28 client, with an
/// `input_required` result keyed `answer` whose `requestState` must come back unchanged.
pub(super) async fn ask_host(
    request: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let args = request.arguments.clone().unwrap_or_default();
    let kind = args.get("kind").and_then(Value::as_str).unwrap_or_default();
    let bad = |e: serde_json::Error| failure(e.to_string());
    let question = match question(kind).map_err(bad) {
        Ok(Some(question)) => question,
        Ok(None) => return Ok(failure(format!("unknown kind '{kind}'")).into()),
        Err(failed) => return Ok(failed.into()),
    };
    let modern = ctx
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
    let state = format!("chaos-asked-{kind}");
    let answer = if modern {
        let answered = request
            .input_responses
            .as_ref()
            .and_then(|responses| responses.get("answer"));
        let Some(answer) = answered else {
            let questions = InputRequests::from([("answer".to_owned(), question)]);
            return Ok(InputRequiredResult::new(Some(questions), Some(state)).into());
        };
        if request.request_state.as_deref() != Some(state.as_str()) {
            let came = request.request_state.as_deref().unwrap_or("none");
            return Ok(failure(format!("the requestState came back changed: {came}")).into());
        }
        answer.clone()
    } else {
        let request = match question {
            InputRequest::CreateMessage(r) => ServerRequest::CreateMessageRequest(r),
            InputRequest::Elicitation(r) => ServerRequest::ElicitRequest(r),
            InputRequest::ListRoots(r) => ServerRequest::ListRootsRequest(r),
            _ => return Ok(failure("a question chaos does not ask").into()),
        };
        match ctx.peer.send_request(request).await {
            Ok(answer) => serde_json::to_value(&answer).unwrap_or_default(),
            Err(e) => return Ok(failure(format!("the client refused {kind}: {e}")).into()),
        }
    };
    Ok(CallToolResult::structured(json!({ "kind": kind, "answer": answer })).into())
}

/// The question `ask_host` asks for `kind`, if it knows it.
fn question(kind: &str) -> Result<Option<InputRequest>, serde_json::Error> {
    Ok(Some(match kind {
        "sampling" => {
            InputRequest::CreateMessage(CreateMessageRequest::new(serde_json::from_value(json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
                "maxTokens": 20
            }))?))
        }
        "elicitation" => {
            InputRequest::Elicitation(ElicitRequest::new(serde_json::from_value(json!({
                "mode": "form",
                "message": "Your name?",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
            }))?))
        }
        "roots" => InputRequest::ListRoots(ListRootsRequest::default()),
        _ => return Ok(None),
    }))
}
