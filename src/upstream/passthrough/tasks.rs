//! A 2025-11-25 stdio host's tasks, taken off its line before rmcp reads them and
//! answered by `upstream/legacy_tasks.rs`; planmux offers them in its `initialize`
//! answer ([`offered_in`]).

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{JsonRpcMessage, ServerResult};
use rmcp::service::TxJsonRpcMessage;
use serde_json::{Map, Value, json};

use super::Passthrough;
use crate::upstream::legacy_tasks;

/// planmux's `initialize` answer with the `tasks` capability a 2025-11-25 stdio host is
/// offered; `None` for any other message.
pub fn offered_in(message: &TxJsonRpcMessage<RoleServer>) -> Option<Vec<u8>> {
    let JsonRpcMessage::Response(response) = message else {
        return None;
    };
    let ServerResult::InitializeResult(_) = &response.result else {
        return None;
    };
    let mut value = serde_json::to_value(message).ok()?;
    legacy_tasks::offer(value.get_mut("result")?).then_some(())?;
    serde_json::to_vec(&value).ok()
}

/// One of the host's task messages, read.
struct Message {
    /// The request's id, as JSON text.
    id: String,
    method: String,
    params: Map<String, Value>,
}

impl Passthrough {
    /// Takes the host's line when it is a 2025-11-25 task message planmux answers: a
    /// `tools/call` of a downstream tool with a `task`, or `tasks/*`. Whether it took it.
    pub(super) fn claim_task(self: &Arc<Self>, line: &[u8]) -> bool {
        if !crate::text::contains!(line, b"\"task") || !self.host_fits() {
            return false;
        }
        let Some(message) = read(line) else {
            return false;
        };
        let ours = self
            .upstream
            .is_legacy_task(&message.method, &message.params);
        if ours {
            self.tasks.spawn(self.clone().answer_task(message));
        }
        ours
    }

    /// Answers one task message.
    async fn answer_task(self: Arc<Self>, message: Message) {
        let answer = self
            .upstream
            .answer_legacy_task(&message.method, message.params, None)
            .await;
        let (key, body) = match answer {
            Ok(result) => ("result", result),
            Err(error) => ("error", json!(error)),
        };
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{},"{key}":{}}}"#,
            message.id, body
        );
        let _ = self.writer.send(line.into_bytes()).await;
    }
}

/// The host's line as a request: its id (as JSON text), method and params.
fn read(line: &[u8]) -> Option<Message> {
    let mut message: Map<String, Value> = crate::wire::decode_checked(line).ok()?;
    let id = serde_json::to_string(message.get("id")?).ok()?;
    let method = message.get("method")?.as_str()?.to_owned();
    let params = match message.remove("params") {
        Some(Value::Object(params)) => params,
        _ => Map::new(),
    };
    Some(Message { id, method, params })
}
