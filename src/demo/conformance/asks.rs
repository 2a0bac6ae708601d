//! The tools that ask the client something on the call's own stream: sampling (the
//! client's model) and elicitation (its user, in the plain form and the SEP-1034 and
//! SEP-1330 forms), each answered as the scenarios expect, and failing when the client
//! cannot or will not answer.

use rmcp::RoleServer;
use rmcp::model::{CallToolResult, CreateMessageRequest, ElicitRequest, JsonObject, ServerRequest};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use crate::demo::{failure, str_arg};

/// `test_sampling`: asks the client's model the prompt, and returns its text.
pub(super) async fn sampling(
    args: &JsonObject,
    ctx: &RequestContext<RoleServer>,
) -> Result<String, CallToolResult> {
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
    Ok(format!("LLM response: {reply}"))
}

/// `test_elicitation`: asks the user for a username and an email, with the given message.
pub(super) async fn elicitation(
    args: &JsonObject,
    ctx: &RequestContext<RoleServer>,
) -> Result<String, CallToolResult> {
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
    Ok(format!("User response: {}", describe(&answer)))
}

/// Sends a form elicitation and reports the answer as the SEP scenarios expect.
pub(super) async fn elicit(
    ctx: &RequestContext<RoleServer>,
    message: &str,
    schema: Value,
) -> Result<String, CallToolResult> {
    let answer = elicit_raw(ctx, message, schema).await?;
    Ok(format!("Elicitation completed: {}", describe(&answer)))
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
pub(super) fn sep1034_schema() -> Value {
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
pub(super) fn sep1330_schema() -> Value {
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
