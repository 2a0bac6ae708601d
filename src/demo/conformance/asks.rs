//! The tools that ask the client something during the call: sampling (the client's
//! model) and elicitation (its user, in the plain form and the SEP-1034 and SEP-1330
//! forms), each answered as the scenarios expect, and failing when the client cannot or
//! will not answer. A 2025-11-25 client is asked with a request on the call's own
//! stream; a 2026-07-28 client, which takes no requests, with an `input_required` result
//! whose one question is keyed [`ANSWER`], answered in its retry.

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CreateMessageRequest, ElicitRequest,
    InputRequest, InputRequests, InputRequiredResult, JsonObject, ProtocolVersion, ServerRequest,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use crate::demo::{failure, str_arg};

/// The key of the one question in a 2026-07-28 client's `input_required`.
const ANSWER: &str = "answer";

/// What one of these tools asks, and how it reads the answer.
pub(super) struct Question {
    kind: &'static str,
    request: InputRequest,
    reply: fn(&Value) -> String,
}

/// The question of tool `name` with `args`, if it is one of these tools (`Err`: its
/// arguments are wrong).
pub(super) fn question(name: &str, args: &JsonObject) -> Option<Result<Question, CallToolResult>> {
    Some(match name {
        "test_sampling" => sampling(args),
        "test_elicitation" => elicitation(args),
        "test_elicitation_sep1034_defaults" => elicit(
            "Please review and update the form fields with defaults",
            sep1034_schema(),
        ),
        "test_elicitation_sep1330_enums" => elicit(
            "Please select options from the enum fields",
            sep1330_schema(),
        ),
        _ => return None,
    })
}

/// Asks `question` in the client's era and answers the call with what it said.
pub(super) async fn ask(
    question: Question,
    request: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> CallToolResponse {
    let modern = ctx
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
    let answer = if modern {
        let answered = request
            .input_responses
            .as_ref()
            .and_then(|responses| responses.get(ANSWER));
        match answered {
            Some(answer) => answer.clone(),
            None => {
                let questions = InputRequests::from([(ANSWER.to_owned(), question.request)]);
                return InputRequiredResult::new(Some(questions), None).into();
            }
        }
    } else {
        let sent = match question.request {
            InputRequest::CreateMessage(r) => ServerRequest::CreateMessageRequest(r),
            InputRequest::Elicitation(r) => ServerRequest::ElicitRequest(r),
            InputRequest::ListRoots(r) => ServerRequest::ListRootsRequest(r),
            _ => return failure("a question this fixture does not ask").into(),
        };
        match ctx.peer.send_request(sent).await {
            Ok(answer) => serde_json::to_value(&answer).unwrap_or_default(),
            Err(e) => {
                let kind = question.kind;
                return failure(format!(
                    "{kind} not supported or refused by the client: {e}"
                ))
                .into();
            }
        }
    };
    CallToolResult::success(vec![rmcp::model::ContentBlock::text((question.reply)(
        &answer,
    ))])
    .into()
}

/// `test_sampling`: asks the client's model the prompt, and returns its text.
fn sampling(args: &JsonObject) -> Result<Question, CallToolResult> {
    let prompt = str_arg(args, "prompt")?;
    let params = serde_json::from_value(json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": 100
    }))
    .map_err(|e| failure(e.to_string()))?;
    Ok(Question {
        kind: "sampling",
        request: InputRequest::CreateMessage(CreateMessageRequest::new(params)),
        reply: |answer| {
            let reply = ["/content/text", "/content/0/text"]
                .into_iter()
                .find_map(|pointer| answer.pointer(pointer).and_then(Value::as_str))
                .unwrap_or("No response");
            format!("LLM response: {reply}")
        },
    })
}

/// `test_elicitation`: asks the user for a username and an email, with the given message.
fn elicitation(args: &JsonObject) -> Result<Question, CallToolResult> {
    let message = str_arg(args, "message")?;
    let schema = json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}
        },
        "required": ["username", "email"]
    });
    let mut question = elicit(message, schema)?;
    question.reply = |answer| format!("User response: {}", describe(answer));
    Ok(question)
}

/// A form elicitation, its answer reported as the SEP scenarios expect.
fn elicit(message: &str, schema: Value) -> Result<Question, CallToolResult> {
    let params = serde_json::from_value(json!({
        "mode": "form",
        "message": message,
        "requestedSchema": schema
    }))
    .map_err(|e| failure(format!("bad elicitation schema: {e}")))?;
    Ok(Question {
        kind: "elicitation",
        request: InputRequest::Elicitation(ElicitRequest::new(params)),
        reply: |answer| format!("Elicitation completed: {}", describe(answer)),
    })
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
