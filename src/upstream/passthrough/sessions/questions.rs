//! What a server asks a session's host during a call on the passthrough (sampling,
//! elicitation, roots: a legacy server's requests, a 2026-07-28 server's
//! `input_required`), put to the host on the call's own stream as a request under an id
//! of planmux's, and the host's answer, which comes as a POST of its own, given back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rmcp::model::ErrorData;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::oneshot;

use super::super::read::id_text;
use crate::downstream::Asked;

/// Where each question's answer goes, by the id planmux gave its request (as JSON text).
#[derive(Default)]
pub(super) struct Questions {
    asked: Mutex<HashMap<String, oneshot::Sender<Result<Value, ErrorData>>>>,
}

/// A host's message, read as far as telling whether it answers a question.
#[derive(Deserialize)]
struct Reply<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    method: Option<serde::de::IgnoredAny>,
    result: Option<Value>,
    error: Option<Value>,
}

impl Questions {
    fn asked(&self) -> MutexGuard<'_, HashMap<String, oneshot::Sender<Result<Value, ErrorData>>>> {
        self.asked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `body` is the host's answer to a request this path put to it, given to
    /// the server's question that asked it.
    pub(super) fn answered(&self, body: &[u8]) -> bool {
        if self.asked().is_empty() {
            return false;
        }
        let Ok(reply) = serde_json::from_slice::<Reply>(body) else {
            return false;
        };
        if reply.method.is_some() {
            return false;
        }
        let Some(key) = reply.id.and_then(|id| id_text(id.get())) else {
            return false;
        };
        let Some(asked) = self.asked().remove(key.as_ref()) else {
            return false;
        };
        let answer = match (reply.result, reply.error) {
            (Some(result), None) => Ok(result),
            (_, Some(error)) => Err(serde_json::from_value(error).unwrap_or_else(|e| {
                ErrorData::invalid_request(format!("the host's error answer: {e}"), None)
            })),
            (None, None) => Err(ErrorData::invalid_request(
                "the host's answer has neither a result nor an error",
                None,
            )),
        };
        let _ = asked.send(answer);
        true
    }

    /// A server's question during a call, put to the host as its request under an id of
    /// planmux's; `None` when it cannot be written (the question is answered so).
    pub(super) fn put(&self, asked: Asked) -> Option<Vec<u8>> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = format!("planmux-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let mut request = match serde_json::to_value(&asked.question) {
            Ok(Value::Object(request)) => request,
            _ => {
                let why = "planmux could not write the server's request for the host";
                let _ = asked.answer.send(Err(ErrorData::internal_error(why, None)));
                return None;
            }
        };
        request.insert("jsonrpc".into(), "2.0".into());
        request.insert("id".into(), id.clone().into());
        let bytes = serde_json::to_vec(&request).ok()?;
        let mut asked_now = self.asked();
        // Questions their servers gave up on are not waited for any more.
        asked_now.retain(|_, answer| !answer.is_closed());
        asked_now.insert(format!("\"{id}\""), asked.answer);
        Some(bytes)
    }
}
