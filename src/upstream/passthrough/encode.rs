//! The host's answer to a call the passthrough took, made without decoding the server's:
//! a server's result or error is spliced in place into the host's response, under the
//! host's id, with `resultType` blanked for hosts before 2026-07-28.

use std::borrow::Cow;
use std::ops::Range;

use rmcp::model::{CallToolResult, ErrorData};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::downstream::RawReply;

/// What the host gets for a passthrough call.
pub(super) enum Answer {
    /// The server's response: its result or error, as they are.
    Reply(RawReply),
    /// A tool result planmux makes (a timeout, an exited server, …).
    Result(CallToolResult),
    /// A JSON-RPC error planmux makes (a refused or unknown tool).
    Error(ErrorData),
}

impl From<Result<CallToolResult, ErrorData>> for Answer {
    /// [`crate::upstream::host_answer`]'s answer.
    fn from(answer: Result<CallToolResult, ErrorData>) -> Self {
        answer.map_or_else(Self::Error, Self::Result)
    }
}

/// The host's response to request `id` (JSON text), and where it starts in the buffer. A server's
/// result or error is not copied: the response is made in place in the server's line,
/// as `{"result":…,"jsonrpc":"2.0","id":…}` (JSON-RPC does not order members; Node servers
/// write theirs in this order too). `{"result":` fits before the result in any line that
/// has one.
pub(super) fn encode(id: &str, answer: Answer) -> (Vec<u8>, usize) {
    const RESULT: &str = r#"{"result":"#;
    const ERROR: &str = r#"{"error":"#;
    let (head, body) = match answer {
        Answer::Reply(reply) => match (reply.body.clone(), reply.is_error) {
            (Some(body), true) => (ERROR, Body::Within(reply.line, body)),
            (Some(body), false) => {
                let mut line = reply.line;
                if blank_result_type(&mut line[body.clone()]) {
                    (RESULT, Body::Within(line, body))
                } else {
                    (RESULT, Body::Own(legacy(&line[body]).into_owned()))
                }
            }
            (None, _) => {
                let error = ErrorData::internal_error(
                    "the server answered tools/call with something that is not a tool result",
                    None,
                );
                (
                    ERROR,
                    Body::Own(serde_json::to_vec(&error).unwrap_or_default()),
                )
            }
        },
        Answer::Result(result) => {
            let mut result = serde_json::to_vec(&result).unwrap_or_default();
            if !blank_result_type(&mut result) {
                result = legacy(&result).into_owned();
            }
            (RESULT, Body::Own(result))
        }
        Answer::Error(error) => (
            ERROR,
            Body::Own(serde_json::to_vec(&error).unwrap_or_default()),
        ),
    };
    // Not `format!`: this is on every routed call's path (see `CallTable::start`).
    let tail = [r#","jsonrpc":"2.0","id":"#, id, "}"].concat();
    match body {
        Body::Within(mut line, body) if body.start >= head.len() => {
            let from = body.start - head.len();
            line[from..body.start].copy_from_slice(head.as_bytes());
            line.truncate(body.end);
            // Room for the tail and the writer's newline.
            line.reserve(tail.len() + 1);
            line.extend_from_slice(tail.as_bytes());
            (line, from)
        }
        Body::Within(line, body) => (joined(head, &line[body], &tail), 0),
        Body::Own(body) => (joined(head, &body, &tail), 0),
    }
}

/// What goes between a response's head and tail.
enum Body {
    /// A range of the server's line.
    Within(Vec<u8>, std::ops::Range<usize>),
    Own(Vec<u8>),
}

/// `head`, `body` and `tail` in one buffer, with room for the writer's newline.
fn joined(head: &str, body: &[u8], tail: &str) -> Vec<u8> {
    let mut joined = Vec::with_capacity(head.len() + body.len() + tail.len() + 1);
    joined.extend_from_slice(head.as_bytes());
    joined.extend_from_slice(body);
    joined.extend_from_slice(tail.as_bytes());
    joined
}

/// Makes `result` what a host before 2026-07-28 gets, without `resultType` (which rmcp
/// removes for such hosts too), in place: the member is blanked with spaces (JSON allows
/// whitespace between tokens), so a large result is neither decoded nor copied. False
/// when it cannot (the key written with escapes): [`legacy`] rewrites the result then.
fn blank_result_type(result: &mut [u8]) -> bool {
    const KEY: &[u8] = b"\"resultType\"";
    if !crate::text::contains!(result, KEY) {
        return true;
    }
    let start = result.as_ptr() as usize;
    let values: Vec<Range<usize>> = match serde_json::from_slice::<ResultTypes>(result) {
        Ok(found) => found
            .0
            .iter()
            .map(|raw| {
                let from = raw.get().as_ptr() as usize - start;
                from..from + raw.get().len()
            })
            .collect(),
        // Not an object: nothing to remove.
        Err(_) => return true,
    };
    let space = |b: &u8| b.is_ascii_whitespace();
    let mut blanks = Vec::new();
    for value in values {
        // Back from the value over `"resultType" :`.
        let before = &result[..value.start];
        let before = before.trim_ascii_end();
        let Some(before) = before.strip_suffix(b":") else {
            return false;
        };
        let before = before.trim_ascii_end();
        if !before.ends_with(KEY) {
            return false;
        }
        let mut from = before.len() - KEY.len();
        let mut to = value.end;
        // With the comma that joins it to the next member, or else to the previous one.
        let next = result[to..]
            .iter()
            .position(|b| !space(b))
            .map(|at| to + at);
        match next {
            Some(at) if result[at] == b',' => to = at + 1,
            _ => {
                if let Some(at) = result[..from].iter().rposition(|b| !space(b))
                    && result[at] == b','
                {
                    from = at;
                }
            }
        }
        blanks.push(from..to);
    }
    for blank in blanks {
        result[blank].fill(b' ');
    }
    true
}

/// The values of an object's top-level `resultType` members, read without decoding the
/// rest.
struct ResultTypes<'a>(Vec<&'a RawValue>);

impl<'de> Deserialize<'de> for ResultTypes<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = ResultTypes<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a tool result")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut found = Vec::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "resultType" {
                        found.push(map.next_value::<&'de RawValue>()?);
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(ResultTypes(found))
            }
        }
        deserializer.deserialize_map(Members)
    }
}

/// [`blank_result_type`]'s fallback: the result decoded, `resultType` removed, encoded
/// again.
fn legacy(result: &[u8]) -> Cow<'_, [u8]> {
    if !crate::text::contains!(result, b"\"resultType\"") {
        return result.into();
    }
    match serde_json::from_slice::<Value>(result) {
        Ok(Value::Object(mut fields)) => {
            fields.remove("resultType");
            serde_json::to_vec(&fields).map_or(result.into(), Into::into)
        }
        _ => result.into(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::upstream::tool_error;

    /// The reply the divert hook makes of `line`.
    fn served(line: &[u8], key: &str) -> Answer {
        let text = std::str::from_utf8(line).unwrap_or_default();
        let value: Value = serde_json::from_slice(line).unwrap_or_default();
        let body = value[key].to_string();
        let from = text.find(&body).unwrap_or_default();
        Answer::Reply(RawReply {
            line: line.to_vec(),
            body: Some(from..from + body.len()),
            is_error: key == "error",
        })
    }

    /// The host's response, parsed.
    fn sent((buffer, from): (Vec<u8>, usize)) -> Value {
        serde_json::from_slice(&buffer[from..]).unwrap_or_default()
    }

    #[test]
    fn answers_keep_the_servers_bytes_and_the_hosts_id() {
        let line = br#"{"result":{"content":[{"type":"text","text":"a  b"}],"resultType":"complete"},"jsonrpc":"2.0","id":"planmux-raw-1"}"#;
        let reply = sent(encode(r#""host-7""#, served(line, "result")));
        assert_eq!(
            reply,
            json!({"jsonrpc": "2.0", "id": "host-7", "result": {"content": [{"type": "text", "text": "a  b"}]}})
        );
        let error = br#"{"jsonrpc":"2.0","id":"planmux-raw-2","error":{"code":-32602,"message":"no","data":{"x":1}}}"#;
        let reply = sent(encode("3", served(error, "error")));
        assert_eq!(reply["id"], 3);
        assert_eq!(
            reply["error"],
            json!({"code": -32602, "message": "no", "data": {"x": 1}})
        );
        let made = sent(encode("4", Answer::Result(tool_error("timed out".into()))));
        assert_eq!(made["result"]["isError"], true);
        // Like a server's, planmux's own result reaches a host before 2026-07-28
        // without `resultType`.
        assert!(made["result"].get("resultType").is_none(), "{made}");
    }

    #[test]
    fn result_type_is_blanked_in_place_wherever_it_stands() {
        let cases = [
            r#"{"resultType":"complete","content":[]}"#,
            r#"{"content":[] , "resultType" : "complete" }"#,
            r#"{"content":[],"resultType":"complete","isError":false}"#,
            r#"{"resultType":"complete"}"#,
        ];
        for case in cases {
            let mut bytes = case.as_bytes().to_vec();
            assert!(blank_result_type(&mut bytes), "{case}");
            assert_eq!(bytes.len(), case.len(), "in place: {case}");
            let mut expected: Value = serde_json::from_str(case).unwrap_or_default();
            expected.as_object_mut().map(|o| o.remove("resultType"));
            let blanked: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            assert_eq!(blanked, expected, "{}", String::from_utf8_lossy(&bytes));
        }
        // Only the top-level member goes.
        let nested = r#"{"structuredContent":{"resultType":"x"},"content":[{"type":"text","text":"\"resultType\""}]}"#;
        let mut bytes = nested.as_bytes().to_vec();
        assert!(blank_result_type(&mut bytes));
        assert_eq!(bytes, nested.as_bytes());
        // A key written with escapes is left to the decoding fallback.
        let escaped = r#"{"result\u0054ype":"complete","content":[],"note":"resultType"}"#;
        assert!(!blank_result_type(&mut escaped.as_bytes().to_vec()));
        let rewritten: Value =
            serde_json::from_slice(&legacy(escaped.as_bytes())).unwrap_or_default();
        assert_eq!(rewritten, json!({"content": [], "note": "resultType"}));
    }

    #[test]
    fn a_servers_result_becomes_the_hosts_answer_in_place() {
        // The id first (rmcp's order) and last (Node's), a host id longer than the room
        // the server's id leaves, and a result whose text holds what the head looks like.
        let text = r#"{\"result\":1,\"id\":2}"#;
        let result = format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#);
        let lines = [
            format!(r#"{{"jsonrpc":"2.0","id":"planmux-raw-9","result":{result}}}"#),
            format!(r#"{{"result":{result},"jsonrpc":"2.0","id":"planmux-raw-9"}}"#),
        ];
        let id = json!("a-host-id-longer-than-the-servers-own-one-by-far");
        for line in lines {
            let Answer::Reply(mut reply) = served(line.as_bytes(), "result") else {
                unreachable!("served makes replies");
            };
            // As the transport's buffer has, room to spare.
            reply.line.reserve(4096);
            let (start, from_body) = (reply.line.as_ptr(), reply.body.clone());
            let (buffer, from) = encode(&id.to_string(), Answer::Reply(reply));
            assert_eq!(
                buffer.as_ptr(),
                start,
                "the server's line is reused: {line}"
            );
            assert_eq!(
                Some(from + r#"{"result":"#.len()),
                from_body.map(|b| b.start)
            );
            let reply = sent((buffer, from));
            assert_eq!(reply["id"], id);
            assert_eq!(reply["jsonrpc"], "2.0");
            assert_eq!(
                reply["result"]["content"][0]["text"],
                r#"{"result":1,"id":2}"#
            );
        }
    }
}
