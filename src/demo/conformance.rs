//! The fixture server of the official MCP conformance suite: the tools, resources and prompts
//! its server scenarios call (`test_simple_text`, `test://static-text`, `test_simple_prompt`, …),
//! with the names, texts and shapes they check. `@modelcontextprotocol/conformance` 0.1.16
//! ships none, so this was written from the scenarios' expectations, mirroring the suite's own
//! reference `everything-server.ts`. Tests run the suite against it directly over streamable
//! HTTP, and through planmux with `namespace = false`, so every name reaches the suite
//! unchanged and any difference is planmux's.

// Sampling, elicitation relaying, logging and resources/subscribe are deprecated by SEP-2577
// (or legacy-only); the suite still tests them on 2025-06-18 and 2025-11-25 sessions.
#![allow(deprecated)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    CompletionInfo, ContentBlock, CreateMessageRequest, ElicitRequest, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ResourceContents,
    ResourceTemplate, ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig,
    ServerRequest, SetLevelRequestParams, SubscribeRequestParams, Tool, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::{failure, str_arg, tool};
use offers::{completions, contents, prompt_messages, prompts, resources};

mod offers;

/// A 1x1 red PNG, base64: the image the image scenarios and the binary resource expect.
const TEST_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file, base64: `tools-call-audio` checks for `audio/wav` data.
const TEST_WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
/// The delay between log messages and between progress steps: the scenarios ask for ~50 ms,
/// so that a client has to handle several notifications while the call is still running.
const STEP: Duration = Duration::from_millis(50);
/// The `logger` named in the log messages this server sends.
const LOGGER: &str = "planmux-demo-conformance";

/// The static text resource read by `resources-read-text`.
const STATIC_TEXT: &str = "test://static-text";
/// The static binary resource read by `resources-read-binary`.
const STATIC_BINARY: &str = "test://static-binary";
/// The resource `resources-subscribe` and `resources-unsubscribe` watch.
const WATCHED: &str = "test://watched-resource";
/// The template `resources-templates-read` reads as `test://template/123/data`.
const TEMPLATE: &str = "test://template/{id}/data";
/// The `$schema` that `json-schema-2020-12` expects to find preserved in `tools/list`.
const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// The conformance fixture. One instance may serve several sessions: its state is only what
/// the scenarios can observe (subscriptions, the log level), and sharing it is harmless.
pub struct ConformanceServer {
    /// URIs a client subscribed to: `notifications/resources/updated` goes only to these.
    subscriptions: Mutex<HashSet<String>>,
    /// The least severe level a client asked for with `logging/setLevel`, as a `rank`;
    /// 0 (debug) until then, so that a client that never sets a level still sees everything.
    min_level: AtomicU8,
}

impl ConformanceServer {
    /// A fixture with no subscriptions and every log level enabled.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            subscriptions: Mutex::new(HashSet::new()),
            min_level: AtomicU8::new(0),
        })
    }

    /// The subscribed URIs. A poisoned lock still holds a valid set (inserts and removes do
    /// not panic half-way), so it is used as is.
    fn subscriptions(&self) -> MutexGuard<'_, HashSet<String>> {
        self.subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends a log message unless the client asked for less.
    async fn log(&self, peer: &Peer<RoleServer>, level: LoggingLevel, message: impl Into<String>) {
        if rank(level) < self.min_level.load(Ordering::SeqCst) {
            return;
        }
        let param = LoggingMessageNotificationParam::new(level, Value::String(message.into()))
            .with_logger(LOGGER);
        let _ = peer.notify_logging_message(param).await;
    }

    /// Runs one tool; `call_tool` has already checked that the name is listed.
    async fn call(
        &self,
        name: &str,
        args: &JsonObject,
        ctx: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let done = |result: Result<CallToolResult, CallToolResult>| result.unwrap_or_else(|f| f);
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
            "test_tool_with_logging" => self.with_logging(ctx).await,
            "test_tool_with_progress" => with_progress(ctx).await,
            "test_error_handling" => {
                failure("This tool intentionally returns an error for testing")
            }
            "test_reconnection" => reconnection(ctx).await,
            "test_sampling" => done(sampling(args, ctx).await),
            "test_elicitation" => done(elicitation(args, ctx).await),
            "test_elicitation_sep1034_defaults" => {
                let message = "Please review and update the form fields with defaults";
                done(elicit(ctx, message, sep1034_schema()).await)
            }
            "test_elicitation_sep1330_enums" => done(
                elicit(
                    ctx,
                    "Please select options from the enum fields",
                    sep1330_schema(),
                )
                .await,
            ),
            "json_schema_2020_12_tool" => text(format!(
                "JSON Schema 2020-12 tool called with: {}",
                Value::Object(args.clone())
            )),
            other => failure(format!("unknown tool '{other}'")),
        }
    }

    /// `test_tool_with_logging`: three info messages ~50 ms apart, while the call runs.
    async fn with_logging(&self, ctx: &RequestContext<RoleServer>) -> CallToolResult {
        let messages = [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ];
        for (i, message) in messages.into_iter().enumerate() {
            if i > 0 {
                pause(ctx).await;
            }
            self.log(&ctx.peer, LoggingLevel::Info, message).await;
        }
        text("Tool with logging executed successfully")
    }
}

impl ServerHandler for ConformanceServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_tools()
            .build();
        ServerConfig::new(capabilities).with_server_info(Implementation::new(
            "planmux-demo-conformance",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.get_tool(&request.name).is_none() {
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{}'", request.name),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        Ok(self.call(&request.name, &args, &context).await.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(resources()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let template = ResourceTemplate::new(TEMPLATE, "template")
            .with_title("Resource Template")
            .with_description("A resource template with parameter substitution")
            .with_mime_type("application/json");
        Ok(ListResourceTemplatesResult::with_all_items(vec![template]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        match contents(&request.uri) {
            Some(contents) => Ok(ReadResourceResult::new(vec![contents]).into()),
            None => Err(ErrorData::resource_not_found(
                format!("no resource '{}'", request.uri),
                None,
            )),
        }
    }

    /// Records the subscription, then reports the resource updated once, so that a test can
    /// see `notifications/resources/updated` relayed without waiting for a timer.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let uri = request.uri;
        self.subscriptions().insert(uri.clone());
        self.log(
            &context.peer,
            LoggingLevel::Info,
            format!("Subscribed to resource: {uri}"),
        )
        .await;
        // A separate statement, so the lock is released before the next await.
        let subscribed = self.subscriptions().contains(&uri);
        if subscribed && contents(&uri).is_some() {
            let _ = context
                .peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await;
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions().remove(&request.uri);
        let message = format!("Unsubscribed from resource: {}", request.uri);
        self.log(&context.peer, LoggingLevel::Info, message).await;
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(prompts()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let messages = prompt_messages(&request.name, &args)?;
        Ok(GetPromptResult::new(messages).into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let values = completions(&request.r#ref, &request.argument);
        let info = CompletionInfo::with_all_values(values).unwrap_or_default();
        Ok(CompleteResult::new(info))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.min_level.store(rank(request.level), Ordering::SeqCst);
        let message = format!("Log level set to: {:?}", request.level).to_lowercase();
        self.log(&context.peer, LoggingLevel::Info, message).await;
        Ok(())
    }
}

// ---- tools ----

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

/// Every tool the scenarios call, plus `test_reconnection` (server-sse-polling).
pub(super) fn tools() -> Vec<Tool> {
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

/// `test_sampling`: asks the client's model the prompt, and returns its text.
async fn sampling(
    args: &JsonObject,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResult, CallToolResult> {
    let prompt = str_arg(args, "prompt")?;
    let params = serde_json::from_value(json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": 100
    }))
    .map_err(|e| failure(e.to_string()))?;
    let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
    let answer = ask(ctx, request, "sampling").await?;
    let reply = ["/content/text", "/content/0/text"]
        .into_iter()
        .find_map(|pointer| answer.pointer(pointer).and_then(Value::as_str))
        .unwrap_or("No response");
    Ok(text(format!("LLM response: {reply}")))
}

/// `test_elicitation`: asks the user for a username and an email, with the given message.
async fn elicitation(
    args: &JsonObject,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResult, CallToolResult> {
    let message = str_arg(args, "message")?;
    let schema = json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}
        },
        "required": ["username", "email"]
    });
    let answer = elicit_raw(ctx, message, schema).await?;
    Ok(text(format!("User response: {}", describe(&answer))))
}

/// Sends a form elicitation and reports the answer as the SEP scenarios expect.
async fn elicit(
    ctx: &RequestContext<RoleServer>,
    message: &str,
    schema: Value,
) -> Result<CallToolResult, CallToolResult> {
    let answer = elicit_raw(ctx, message, schema).await?;
    Ok(text(format!(
        "Elicitation completed: {}",
        describe(&answer)
    )))
}

/// Sends `elicitation/create` in form mode and returns the client's answer as JSON.
async fn elicit_raw(
    ctx: &RequestContext<RoleServer>,
    message: &str,
    schema: Value,
) -> Result<Value, CallToolResult> {
    let params = serde_json::from_value(json!({
        "mode": "form",
        "message": message,
        "requestedSchema": schema
    }))
    .map_err(|e| failure(format!("bad elicitation schema: {e}")))?;
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
    ask(ctx, request, "elicitation").await
}

/// `action=…, content=…` from an elicitation answer.
fn describe(answer: &Value) -> String {
    let action = answer
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let content = answer.get("content").cloned().unwrap_or_else(|| json!({}));
    format!("action={action}, content={content}")
}

/// Sends the client a request on the call's own stream and returns its answer as JSON; a
/// client without the capability (or one that refuses) makes the tool fail, as the
/// scenarios ask.
async fn ask(
    ctx: &RequestContext<RoleServer>,
    request: ServerRequest,
    kind: &str,
) -> Result<Value, CallToolResult> {
    let answer = ctx.peer.send_request(request).await.map_err(|e| {
        failure(format!(
            "{kind} not supported or refused by the client: {e}"
        ))
    })?;
    serde_json::to_value(&answer).map_err(|e| failure(e.to_string()))
}

/// SEP-1034: a default for every primitive type, checked by value and type.
fn sep1034_schema() -> Value {
    json!({"type": "object", "required": [], "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status",
            "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": true}
    }})
}

/// SEP-1330: the five enum shapes, each checked for the keywords it must and must not have.
fn sep1330_schema() -> Value {
    let titled = |word: &str| {
        json!([
            {"const": "value1", "title": format!("First {word}")},
            {"const": "value2", "title": format!("Second {word}")},
            {"const": "value3", "title": format!("Third {word}")}
        ])
    };
    let options = json!(["option1", "option2", "option3"]);
    json!({"type": "object", "required": [], "properties": {
        "untitledSingle": {"type": "string", "description": "Select one option", "enum": options},
        "titledSingle": {"type": "string", "description": "Select one option with titles",
            "oneOf": titled("Option")},
        "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "description": "Select multiple options",
            "minItems": 1, "maxItems": 3, "items": {"type": "string", "enum": options}},
        "titledMulti": {"type": "array", "description": "Select multiple options with titles",
            "minItems": 1, "maxItems": 3, "items": {"anyOf": titled("Choice")}}
    }})
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

/// A level's severity, least severe first, so `logging/setLevel` can filter with `<`.
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}
