//! A server's answer to a raw call as it came ([`RawReply`]), and what metrics read of it.

use std::ops::Range;

use rmcp::model::ErrorData;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::downstream::DownstreamError;

/// A server's response line to a raw call, and where its result or error is in it: read
/// once, never decoded, so the host's answer is spliced from it.
#[derive(Debug, PartialEq)]
pub struct RawReply {
    pub line: Vec<u8>,
    /// The bytes of `result` (or of `error`, when `is_error`); `None` when it has neither.
    pub body: Option<Range<usize>>,
    pub is_error: bool,
}

impl RawReply {
    /// The result's or error's JSON text, if the response has one.
    pub fn body(&self) -> Option<&[u8]> {
        self.body.clone().map(|range| &self.line[range])
    }

    /// The result's JSON text, when the response is a result.
    pub fn result(&self) -> Option<&[u8]> {
        self.body().filter(|_| !self.is_error)
    }

    /// Why the call failed, as a trace's span says it: a JSON-RPC error, or a result
    /// marked `isError`; `None` for a result.
    pub fn failure(&self) -> Option<&'static str> {
        if self.is_error {
            return Some("a JSON-RPC error");
        }
        (self.result())
            .filter(|result| crate::text::contains!(result, br#""isError":true"#))
            .map(|_| "the tool's result is an error")
    }

    /// The answer of `server` to a `tools/call`, decoded only into JSON: its result, or
    /// its JSON-RPC error as such.
    pub(crate) fn tool_result(&self, server: &str) -> Result<Value, DownstreamError> {
        let protocol = |message: String| DownstreamError::Protocol {
            server: server.to_owned(),
            message,
        };
        let not_a_result =
            || protocol("answered tools/call with something that is not a tool result".into());
        let body = self.body().ok_or_else(not_a_result)?;
        if self.is_error {
            let error = crate::wire::decode_checked::<ErrorData>(body).map_err(|e| {
                protocol(format!("answered tools/call with an unreadable error: {e}"))
            })?;
            return Err(DownstreamError::Rpc {
                server: server.to_owned(),
                error: Box::new(error),
            });
        }
        // Read off the wire, so nested no deeper than `max_nesting`.
        match crate::wire::decode_checked::<Value>(body) {
            Ok(result @ Value::Object(_)) => Ok(result),
            _ => Err(not_a_result()),
        }
    }
}

/// Whether a tool result says it is an error (`"isError": true`), read without decoding it.
pub(super) fn marked_error(result: Option<&RawValue>) -> bool {
    #[derive(serde::Deserialize)]
    struct Marked {
        #[serde(rename = "isError", default)]
        is_error: bool,
    }
    result.is_some_and(|result| {
        crate::text::contains!(result.get().as_bytes(), b"\"isError\"")
            && serde_json::from_str::<Marked>(result.get()).is_ok_and(|m| m.is_error)
    })
}
