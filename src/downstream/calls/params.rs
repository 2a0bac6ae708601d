//! A raw request's `params`, edited in place: the 2026-07-28 `_meta`, a retry's answers,
//! a 2025-11-25 call's `task`, a call's `traceparent`.

use serde_json::{Map, Value, json};

/// `request` with its `params` edited by `edit`; as it was when it has none, or when it
/// cannot be read (for the server to refuse). Its nesting was checked where it was read
/// (the host's line) or made (a plan's arguments), so it is read beyond serde's default
/// depth.
pub(super) fn edited(request: Vec<u8>, edit: impl FnOnce(&mut Map<String, Value>)) -> Vec<u8> {
    let Ok(mut message) = crate::wire::decode_checked::<Value>(&request) else {
        return request;
    };
    let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
        return request;
    };
    edit(params);
    serde_json::to_vec(&message).unwrap_or(request)
}

/// `request` carrying `traceparent` in its `params._meta` (SEP-414), in place of any the
/// caller sent: the span of planmux's call is the server's parent.
pub fn with_traceparent(request: Vec<u8>, traceparent: &str) -> Vec<u8> {
    edited(request, |params| {
        let meta = params.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("traceparent".into(), traceparent.into());
        }
    })
}
