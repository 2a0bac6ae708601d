//! A raw request's `params`, edited in place: the 2026-07-28 `_meta`, a retry's answers,
//! a 2025-11-25 call's `task`.

use serde_json::{Map, Value};

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
