//! A step's output value, read from an MCP `CallToolResult` given as JSON.
//!
//! The value is `structuredContent` when present; otherwise the text content, parsed as
//! JSON when it is JSON, else the text itself; content with anything but text stays as
//! MCP content objects. `isError: true` makes the step fail.

use serde_json::Value;

/// What one tool call produced, as far as the plan is concerned.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// The call succeeded with this value.
    Success(Value),
    /// The tool reported an error (`isError: true`).
    Failure {
        /// The error text (the result's text content, or a generic message).
        message: String,
        /// The value the result would have had, for `on_error: continue` and records.
        value: Value,
    },
}

/// Reads a `CallToolResult` (as JSON) into an outcome.
pub fn tool_outcome(result: &Value) -> ToolOutcome {
    let value = output_value(result);
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let text = content_text(result);
        let message = if text.trim().is_empty() {
            "the tool reported an error without a message".to_owned()
        } else {
            text
        };
        ToolOutcome::Failure { message, value }
    } else {
        ToolOutcome::Success(value)
    }
}

/// The output value of a `CallToolResult`, whatever its `isError`.
pub fn output_value(result: &Value) -> Value {
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        return structured.clone();
    }
    let Some(Value::Array(content)) = result.get("content") else {
        return Value::Null;
    };
    if content.is_empty() {
        return Value::Null;
    }
    let all_text = content.iter().all(|item| {
        item.get("type").and_then(Value::as_str) == Some("text")
            && item.get("text").is_some_and(Value::is_string)
    });
    if !all_text {
        return Value::Array(content.clone());
    }
    let text = content_text(result);
    parse_text(&text)
}

/// Text content parsed as JSON when the whole of it is JSON, else the text itself.
pub fn parse_text(text: &str) -> Value {
    match serde_json::from_str::<Value>(text.trim()) {
        Ok(value) if !text.trim().is_empty() => value,
        _ => Value::String(text.to_owned()),
    }
}

/// The text items of a result's content, joined by newlines.
fn content_text(result: &Value) -> String {
    let Some(Value::Array(content)) = result.get("content") else {
        return String::new();
    };
    let texts: Vec<&str> = content
        .iter()
        .filter_map(|item| item.get("text").and_then(Value::as_str))
        .collect();
    texts.join("\n")
}
