//! The conformance fixture's tools: their definitions, as the suite's reference server
//! has them, and what each call does (content of every kind, logging and progress while
//! the call runs, an error result, a late answer for the reconnection scenario).

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, LoggingLevel, ProgressNotificationParam,
    ResourceContents, Tool,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use super::logging::Logging;
use super::offers::TEST_PNG;
use crate::demo::{failure, tool};

/// A minimal WAV file, base64: `tools-call-audio` checks for `audio/wav` data.
const TEST_WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
/// The delay between log messages and between progress steps: the scenarios ask for ~50 ms,
/// so that a client has to handle several notifications while the call is still running.
const STEP: Duration = Duration::from_millis(50);
/// The `$schema` that `json-schema-2020-12` expects to find preserved in `tools/list`.
const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// Runs one tool; `call_tool` has already checked that the name is listed.
pub(super) async fn call(
    name: &str,
    args: &JsonObject,
    ctx: &RequestContext<RoleServer>,
    logging: &Logging,
) -> CallToolResult {
    match name {
        "test_simple_text" => text("This is a simple text response for testing."),
        "test_image_content" => {
            CallToolResult::success(vec![ContentBlock::image(TEST_PNG, "image/png")])
        }
        "test_audio_content" => {
            CallToolResult::success(vec![ContentBlock::audio(TEST_WAV, "audio/wav")])
        }
        "test_embedded_resource" => CallToolResult::success(vec![ContentBlock::resource(
            ResourceContents::text(
                "This is an embedded resource content.",
                "test://embedded-resource",
            )
            .with_mime_type("text/plain"),
        )]),
        "test_multiple_content_types" => mixed_content(),
        "test_tool_with_logging" => with_logging(logging, ctx).await,
        "test_tool_with_progress" => with_progress(ctx).await,
        "test_error_handling" => failure("This tool intentionally returns an error for testing"),
        "test_reconnection" => reconnection(ctx).await,
        "json_schema_2020_12_tool" => text(format!(
            "JSON Schema 2020-12 tool called with: {}",
            Value::Object(args.clone())
        )),
        other => failure(format!("unknown tool '{other}'")),
    }
}

/// `test_tool_with_logging`: three info messages ~50 ms apart, while the call runs.
async fn with_logging(logging: &Logging, ctx: &RequestContext<RoleServer>) -> CallToolResult {
    let messages = [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ];
    for (i, message) in messages.into_iter().enumerate() {
        if i > 0 {
            pause(ctx).await;
        }
        logging.log(&ctx.peer, LoggingLevel::Info, message).await;
    }
    text("Tool with logging executed successfully")
}

/// The tools that take no arguments: name and description, as the reference server has them.
const PLAIN_TOOLS: [(&str, &str); 11] = [
    ("test_simple_text", "Tests simple text content response"),
    ("test_image_content", "Tests image content response"),
    ("test_audio_content", "Tests audio content response"),
    (
        "test_embedded_resource",
        "Tests embedded resource content response",
    ),
    (
        "test_multiple_content_types",
        "Tests response with multiple content types (text, image, resource)",
    ),
    (
        "test_tool_with_logging",
        "Tests tool that emits log messages during execution",
    ),
    (
        "test_tool_with_progress",
        "Tests tool that reports progress notifications",
    ),
    ("test_error_handling", "Tests error response handling"),
    (
        "test_reconnection",
        "Tests SSE stream reconnection (SEP-1699); this server answers on the open stream",
    ),
    (
        "test_elicitation_sep1034_defaults",
        "Tests elicitation with default values per SEP-1034",
    ),
    (
        "test_elicitation_sep1330_enums",
        "Tests elicitation with enum schema improvements per SEP-1330",
    ),
];

/// Every tool the scenarios call, plus `test_reconnection` (server-sse-polling); the
/// input-required ones are `mrtr`'s, the tasks extension's `tasks`'.
pub(in crate::demo) fn tools() -> Vec<Tool> {
    let string_arg = |name: &str, description: &str| {
        json!({
            "type": "object",
            "properties": {name: {"type": "string", "description": description}},
            "required": [name]
        })
    };
    let mut tools: Vec<Tool> = PLAIN_TOOLS
        .iter()
        .map(|&(name, description)| {
            tool(
                name,
                description,
                json!({"type": "object", "properties": {}}),
            )
        })
        .collect();
    tools.extend([
        tool(
            "test_sampling",
            "Tests server-initiated sampling (LLM completion request)",
            string_arg("prompt", "The prompt to send to the LLM"),
        ),
        tool(
            "test_elicitation",
            "Tests server-initiated elicitation (user input request)",
            string_arg("message", "The message to show the user"),
        ),
        tool(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
            json_schema_2020_12(),
        ),
    ]);
    tools.extend(super::mrtr::tools());
    tools.extend(super::tasks::tools());
    tools
}

/// A result of one text block.
fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

/// Waits one step, or less if the client cancels the call.
async fn pause(ctx: &RequestContext<RoleServer>) {
    tokio::select! {
        _ = tokio::time::sleep(STEP) => {}
        _ = ctx.ct.cancelled() => {}
    }
}

/// `test_multiple_content_types`: text, image and an embedded JSON resource.
fn mixed_content() -> CallToolResult {
    let json = json!({"test": "data", "value": 123}).to_string();
    CallToolResult::success(vec![
        ContentBlock::text("Multiple content types test:"),
        ContentBlock::image(TEST_PNG, "image/png"),
        ContentBlock::resource(
            ResourceContents::text(json, "test://mixed-content-resource")
                .with_mime_type("application/json"),
        ),
    ])
}

/// `test_tool_with_progress`: 0, 50 and 100 of 100, ~50 ms apart, when the call carries a
/// progress token; answers with the token, so a proxy test can see which one arrived.
async fn with_progress(ctx: &RequestContext<RoleServer>) -> CallToolResult {
    let token = ctx.meta.get_progress_token();
    for (i, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if i > 0 {
            pause(ctx).await;
        }
        if let Some(token) = &token {
            let param = ProgressNotificationParam::new(token.clone(), progress)
                .with_total(100.0)
                .with_message(format!("Completed step {progress} of 100"));
            let _ = ctx.peer.notify_progress(param).await;
        }
    }
    text(token.map_or_else(|| "no progress token".to_owned(), |t| t.0.to_string()))
}

/// `test_reconnection`: the reference server closes the POST stream mid-call and answers
/// after the client reconnects; an rmcp handler cannot reach its HTTP stream, so this one
/// answers on the open stream after the same delay (the suite reports that as INFO).
async fn reconnection(ctx: &RequestContext<RoleServer>) -> CallToolResult {
    pause(ctx).await;
    pause(ctx).await;
    text("Reconnection test completed successfully (the stream was not closed mid-call).")
}

/// SEP-1613: `$schema`, `$defs` with a `$ref`, and `additionalProperties: false`, which a
/// proxy that rebuilds schemas would strip.
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": DRAFT_2020_12,
        "type": "object",
        "$defs": {"address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
        }},
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "additionalProperties": false
    })
}
