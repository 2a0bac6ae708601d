//! Tool definition fields that rmcp's `Tool` type does not model (a newer protocol's
//! `execution`, a vendor's extension): kept from a server's raw `tools/list` answers, so
//! planmux can put them back into its own `tools/list` and lose nothing it does not
//! interpret. Seen on line transports (stdio and built-in servers) and in HTTP servers'
//! streamed answers (`transport/noting.rs`); put back on both fronts (stdio and HTTP).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use rmcp::RoleServer;
use rmcp::model::{JsonObject, JsonRpcMessage, ServerResult};
use rmcp::service::TxJsonRpcMessage;
use serde_json::Value;

/// The fields rmcp's `Tool` keeps.
const MODELLED: [&str; 8] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    "icons",
    "_meta",
];

/// One server's tools' unmodelled fields, by the tool's own name.
#[derive(Default)]
pub struct ToolFields {
    by_tool: Mutex<HashMap<String, JsonObject>>,
    /// Whether any tool runs only as a task: read on every raw call's path, where most
    /// servers have none.
    task_only: AtomicBool,
}

impl ToolFields {
    /// Looks at one message from the server: when it is a `tools/list` answer, keeps each
    /// tool's fields that rmcp's type leaves out.
    pub fn note(&self, text: &[u8]) {
        if !may_list_tools(text) {
            return;
        }
        let Ok(message) = serde_json::from_slice::<Value>(text) else {
            return;
        };
        let Some(Value::Array(tools)) = message.get("result").and_then(|r| r.get("tools")) else {
            return;
        };
        self.keep(tools);
    }

    /// Keeps each of `tools`' (definitions as a server sent them) fields that rmcp's type
    /// leaves out.
    pub fn keep(&self, tools: &[Value]) {
        let mut by_tool = self.by_tool.lock().unwrap_or_else(PoisonError::into_inner);
        for tool in tools {
            let (Some(name), Some(fields)) =
                (tool.get("name").and_then(Value::as_str), tool.as_object())
            else {
                continue;
            };
            let extra: JsonObject = fields
                .iter()
                .filter(|(key, _)| !MODELLED.contains(&key.as_str()))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            if extra.is_empty() {
                by_tool.remove(name);
            } else {
                by_tool.insert(name.to_owned(), extra);
            }
        }
        let any = by_tool.values().any(only_as_task);
        self.task_only.store(any, Ordering::Release);
    }

    /// Whether any of the server's tools runs only as a task.
    pub fn any_task_only(&self) -> bool {
        self.task_only.load(Ordering::Acquire)
    }

    /// Whether the server's tool `tool` runs only as a task (`execution.taskSupport:
    /// "required"`).
    pub fn runs_only_as_task(&self, tool: &str) -> bool {
        if !self.any_task_only() {
            return false;
        }
        let by_tool = self.by_tool.lock().unwrap_or_else(PoisonError::into_inner);
        by_tool.get(tool).is_some_and(only_as_task)
    }

    /// The unmodelled fields of the server's tool `tool`, if it had any.
    pub fn of(&self, tool: &str) -> Option<JsonObject> {
        self.by_tool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tool)
            .cloned()
    }
}

/// Whether a tool with these unmodelled fields runs only as a task.
fn only_as_task(fields: &JsonObject) -> bool {
    let support = fields.get("execution").and_then(|e| e.get("taskSupport"));
    support.and_then(Value::as_str) == Some("required")
}

/// Encodes a `tools/list` answer to the host with each tool's unmodelled fields put
/// back (`fields` finds them by exported name); `None` for any other message, or when no
/// tool has any.
pub fn restore(
    message: &TxJsonRpcMessage<RoleServer>,
    fields: impl Fn(&str) -> Option<JsonObject>,
) -> Option<Vec<u8>> {
    let JsonRpcMessage::Response(response) = message else {
        return None;
    };
    let ServerResult::ListToolsResult(list) = &response.result else {
        return None;
    };
    if !list.tools.iter().any(|tool| fields(&tool.name).is_some()) {
        return None;
    }
    let mut value = serde_json::to_value(message).ok()?;
    restore_value(&mut value, fields);
    serde_json::to_vec(&value).ok()
}

/// [`restore`] on a message already encoded (the HTTP front sees rmcp's output only so):
/// puts the unmodelled fields back into a `tools/list` answer; whether any were.
pub fn restore_value(message: &mut Value, fields: impl Fn(&str) -> Option<JsonObject>) -> bool {
    let Some(Value::Array(tools)) = message.get_mut("result").and_then(|r| r.get_mut("tools"))
    else {
        return false;
    };
    let mut restored = false;
    for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
        let Some(extra) = tool.get("name").and_then(Value::as_str).and_then(&fields) else {
            continue;
        };
        for (key, field) in extra {
            tool.entry(key).or_insert(field);
        }
        restored = true;
    }
    restored
}

/// Whether an encoded message may be a tool list: it names `tools` near its start (after
/// `jsonrpc` and `id` at most), so nothing else is parsed twice, nor scanned whole.
pub fn may_list_tools(text: &[u8]) -> bool {
    let head = &text[..text.len().min(256)];
    head.windows(8).any(|w| w == b"\"tools\":")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unmodelled_fields_are_kept_and_put_back() {
        let fields = ToolFields::default();
        let answer = json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": [
            {"name": "a", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
            {"name": "b", "inputSchema": {"type": "object"}}
        ]}});
        fields.note(answer.to_string().as_bytes());
        assert_eq!(
            fields.of("a"),
            json!({"execution": {"taskSupport": "optional"}})
                .as_object()
                .cloned()
        );
        assert_eq!(fields.of("b"), None);

        let tool = |name: &str| {
            rmcp::model::Tool::new(name.to_owned(), "", std::sync::Arc::new(JsonObject::new()))
        };
        let list = rmcp::model::ListToolsResult::with_all_items(vec![tool("s__a"), tool("s__b")]);
        let message: TxJsonRpcMessage<RoleServer> = JsonRpcMessage::response(
            ServerResult::ListToolsResult(list),
            rmcp::model::NumberOrString::Number(7),
        );
        let bytes = restore(&message, |name| fields.of(name.strip_prefix("s__")?));
        let sent: Value = serde_json::from_slice(&bytes.unwrap_or_default()).unwrap_or_default();
        assert_eq!(
            sent["result"]["tools"][0]["execution"],
            json!({"taskSupport": "optional"}),
            "{sent}"
        );
        assert!(sent["result"]["tools"][1].get("execution").is_none());
    }
}
