//! A raw request's `params`, edited in place: the 2026-07-28 `_meta`, a retry's answers,
//! a 2025-11-25 call's `task`, a call's `traceparent`.

use serde::Deserialize;
use serde_json::value::RawValue;
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
    let key = "traceparent".to_owned();
    let member = format!(r#""traceparent":"{traceparent}""#);
    if let Some(spliced) = spliced_meta(&request, &member, [&key]) {
        return spliced;
    }
    edited(request, |params| {
        let meta = params.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("traceparent".into(), traceparent.into());
        }
    })
}

/// `request` with `members` (an object's members as JSON text, without its braces) first
/// in its `params._meta`, spliced into its text without decoding it; `None` when it cannot
/// be done so, for [`edited`]: no `params` object, or a `_meta` that is not an object, is
/// written with escapes, or may hold one of `keys` already (which must give way).
pub(super) fn spliced_meta<'k>(
    request: &[u8],
    members: &str,
    keys: impl IntoIterator<Item = &'k String>,
) -> Option<Vec<u8>> {
    #[derive(Deserialize)]
    struct Request<'a> {
        #[serde(borrow)]
        params: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct Params<'a> {
        #[serde(borrow, rename = "_meta")]
        meta: Option<&'a RawValue>,
    }
    if members.is_empty() {
        return None;
    }
    let params = serde_json::from_slice::<Request>(request).ok()?.params?;
    let start = request.as_ptr() as usize;
    let at = |raw: &RawValue| raw.get().as_ptr() as usize - start;
    let (object, head) = match serde_json::from_str::<Params>(params.get()).ok()?.meta {
        None => (params, r#""_meta":{"#),
        Some(meta) => {
            let text = meta.get();
            let taken = keys
                .into_iter()
                .any(|key| memchr::memmem::find(text.as_bytes(), key.as_bytes()).is_some());
            if taken || text.contains('\\') {
                return None;
            }
            (meta, "")
        }
    };
    let text = object.get();
    if !text.starts_with('{') {
        return None;
    }
    let empty = text[1..].trim_start().starts_with('}');
    let tail = match (head.is_empty(), empty) {
        (true, true) => "",
        (true, false) => ",",
        (false, true) => "}",
        (false, false) => "},",
    };
    let split = at(object) + 1;
    let mut out = Vec::with_capacity(request.len() + head.len() + members.len() + 2);
    out.extend_from_slice(&request[..split]);
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(members.as_bytes());
    out.extend_from_slice(tail.as_bytes());
    out.extend_from_slice(&request[split..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The members go first in `params._meta`, which is made when there is none; what the
    /// caller sent stays; a `_meta` that already has one of the keys is left to `edited`.
    #[test]
    fn the_protocols_meta_is_spliced_in_as_text() {
        let keys = ["io.modelcontextprotocol/v".to_owned()];
        let members = r#""io.modelcontextprotocol/v":"x""#;
        let spliced = |request: &str| {
            spliced_meta(request.as_bytes(), members, &keys)
                .map(|out| String::from_utf8_lossy(&out).into_owned())
        };
        let cases = [
            (
                r#"{"id":1,"params":{"name":"t"}}"#,
                Some(r#"{"id":1,"params":{"_meta":{"io.modelcontextprotocol/v":"x"},"name":"t"}}"#),
            ),
            (
                r#"{"id":1,"params":{ }}"#,
                Some(r#"{"id":1,"params":{"_meta":{"io.modelcontextprotocol/v":"x"} }}"#),
            ),
            (
                r#"{"id":1,"params":{"name":"t","_meta":{"progressToken":3}}}"#,
                Some(
                    r#"{"id":1,"params":{"name":"t","_meta":{"io.modelcontextprotocol/v":"x","progressToken":3}}}"#,
                ),
            ),
            (
                r#"{"id":1,"params":{"_meta":{}}}"#,
                Some(r#"{"id":1,"params":{"_meta":{"io.modelcontextprotocol/v":"x"}}}"#),
            ),
            (
                r#"{"id":1,"params":{"_meta":{"io.modelcontextprotocol/v":"mine"}}}"#,
                None,
            ),
            (r#"{"id":1,"params":{"_meta":{"a\/b":1}}}"#, None),
            (r#"{"id":1,"params":{"_meta":[]}}"#, None),
            (r#"{"id":1,"params":[1]}"#, None),
            (r#"{"id":1}"#, None),
        ];
        for (request, expected) in cases {
            let out = spliced(request);
            assert_eq!(out.as_deref(), expected, "{request}");
            if let Some(out) = out {
                let value: Value = serde_json::from_str(&out).unwrap_or_default();
                assert_eq!(
                    value["params"]["_meta"]["io.modelcontextprotocol/v"], "x",
                    "{out}"
                );
            }
        }
    }
}
