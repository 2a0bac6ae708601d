//! Reading a host's `tools/call` off its line without decoding it: what routes it (its
//! id, the tool's name, the progress token) and where in the line each stands, so the
//! request for the server is the host's bytes with those three replaced.

use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::downstream::with_traceparent;

/// A host's `tools/call` as read on its line, nothing decoded but what routes it.
#[derive(Deserialize)]
struct HostCall<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<CallParams<'a>>,
}

#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
    task: Option<serde::de::IgnoredAny>,
    #[serde(borrow, rename = "_meta")]
    meta: Option<CallMeta<'a>>,
}

#[derive(Deserialize)]
struct CallMeta<'a> {
    #[serde(borrow, rename = "progressToken")]
    progress_token: Option<&'a RawValue>,
    #[serde(borrow)]
    traceparent: Option<&'a RawValue>,
}

/// A call this path takes, and where in its line the parts it rewrites are.
pub(super) struct Plain {
    /// Its id as JSON text: the call's key among those in flight, and the id of the
    /// host's answer.
    pub(super) key: String,
    pub(super) name: String,
    /// The progress token as JSON text, when it is one (a string or an integer).
    pub(super) progress: Option<String>,
    /// The host's `traceparent` in `_meta` (SEP-414), if it sent one.
    pub(super) traceparent: Option<String>,
    id_at: Range<usize>,
    name_at: Range<usize>,
    token_at: Option<Range<usize>>,
    trace_at: Option<Range<usize>>,
}

impl Plain {
    /// The call in `line`, if it is a plain `tools/call`: an id that is a string or an
    /// integer (anything else goes to rmcp, which refuses it), a tool name, and arguments
    /// that are an object if any (rmcp's path refuses others, saying so). A
    /// task-augmented call (SEP-1686) goes there too: planmux offers no tasks, so the call
    /// runs as a plain one rather than hand the host a task it cannot read back.
    pub(super) fn read(line: &[u8]) -> Option<Self> {
        let call = serde_json::from_slice::<HostCall>(line).ok()?;
        let params = call
            .params
            .filter(|_| call.method.as_deref() == Some("tools/call"))?;
        let plain =
            params.arguments.is_none_or(|a| a.get().starts_with('{')) && params.task.is_none();
        let raw_id = call.id.filter(|_| plain)?;
        let key = id_text(raw_id.get())?.into_owned();
        let raw_name = params.name?;
        let name = match plain_string(raw_name.get()) {
            Some(name) => name.to_owned(),
            None => serde_json::from_str(raw_name.get()).ok()?,
        };
        let raw_trace = params.meta.as_ref().and_then(|meta| meta.traceparent);
        let traceparent = match raw_trace {
            Some(raw) => Some(serde_json::from_str::<String>(raw.get()).ok()?),
            None => None,
        };
        let token = params.meta.and_then(|meta| meta.progress_token);
        let progress = token.and_then(|t| id_text(t.get())).map(Cow::into_owned);
        let start = line.as_ptr() as usize;
        let at = |raw: &RawValue| {
            let from = raw.get().as_ptr() as usize - start;
            from..from + raw.get().len()
        };
        Some(Self {
            key,
            name,
            progress,
            traceparent,
            id_at: at(raw_id),
            name_at: at(raw_name),
            token_at: token.map(at),
            trace_at: raw_trace.map(at),
        })
    }

    /// The request for the server: `line` with the id (and the progress token, if any)
    /// replaced by `id` and the name by `tool` (both JSON text), and `_meta.traceparent`
    /// by `traceparent` when the call is traced; the rest as the host wrote it.
    pub(super) fn forwarded(
        &self,
        line: &[u8],
        id: &str,
        tool: &str,
        traceparent: Option<&str>,
    ) -> Vec<u8> {
        // A traceparent is hex digits and dashes: its JSON text needs no escapes.
        let quoted = traceparent.map(|traceparent| format!("\"{traceparent}\""));
        let mut edits = [
            Some((self.id_at.clone(), id)),
            Some((self.name_at.clone(), tool)),
            self.token_at.clone().map(|at| (at, id)),
            self.trace_at.clone().zip(quoted.as_deref()),
        ];
        let line = replaced(line, &mut edits);
        match traceparent {
            // The host sent none: planmux's goes into its `_meta`.
            Some(traceparent) if self.trace_at.is_none() => with_traceparent(line, traceparent),
            _ => line,
        }
    }
}

/// `line` with each of `edits` (where, and the text put there) made.
fn replaced(line: &[u8], edits: &mut [Option<(Range<usize>, &str)>]) -> Vec<u8> {
    edits.sort_by_key(|edit| edit.as_ref().map(|(at, _)| at.start));
    let added: usize = edits.iter().flatten().map(|(_, text)| text.len()).sum();
    let mut out = Vec::with_capacity(line.len() + added);
    let mut from = 0;
    for (at, text) in edits.iter().flatten() {
        out.extend_from_slice(&line[from..at.start]);
        out.extend_from_slice(text.as_bytes());
        from = at.end;
    }
    out.extend_from_slice(&line[from..]);
    out
}

/// The JSON text an id or a progress token is known by (what the host's later messages
/// about it are matched with), if it is a string or an integer; `None` for anything else.
/// A string without escapes or an integer written plainly is its own text (the usual
/// case, read without decoding); anything else is decoded and written again.
pub(super) fn id_text(raw: &str) -> Option<Cow<'_, str>> {
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    let plain_integer = match digits.as_bytes() {
        [b'0'] => raw == "0",
        [b'1'..=b'9', rest @ ..] => {
            rest.iter().all(u8::is_ascii_digit) && raw.parse::<i64>().is_ok()
        }
        _ => false,
    };
    if plain_integer || plain_string(raw).is_some() {
        return Some(Cow::Borrowed(raw));
    }
    let id: Value = serde_json::from_str(raw).ok()?;
    if !(id.is_string() || id.is_i64()) {
        return None;
    }
    serde_json::to_string(&id).ok().map(Cow::Owned)
}

/// The text of a JSON string without escapes (`raw` is a whole JSON value).
fn plain_string(raw: &str) -> Option<&str> {
    raw.strip_prefix('"')?
        .strip_suffix('"')
        .filter(|text| !text.contains('\\'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An id or a token is known by the text decoding and writing it again gives,
    /// whether it was read plainly or decoded; anything but a string or an integer is
    /// none.
    #[test]
    fn ids_are_known_by_one_text_however_written() {
        for raw in [
            "7",
            "0",
            "-12",
            "9223372036854775807",
            r#""abc""#,
            r#""""#,
            r#""a\"b""#,
            r#""\u0041""#,
            "-0",
            "9223372036854775808",
            "1.5",
            "1e3",
            "null",
            "[1]",
            r#"{"a":1}"#,
        ] {
            let decoded: Value = serde_json::from_str(raw).unwrap_or_default();
            let expected = (decoded.is_string() || decoded.is_i64())
                .then(|| serde_json::to_string(&decoded).unwrap_or_default());
            assert_eq!(id_text(raw).map(Cow::into_owned), expected, "{raw}");
        }
        assert!(
            matches!(id_text("42"), Some(Cow::Borrowed(_))),
            "read plainly"
        );
        assert!(matches!(id_text(r#""k-1""#), Some(Cow::Borrowed(_))));
    }

    /// The server's request is the host's bytes with planmux's id, the tool's own name and
    /// planmux's token; traced, its `_meta.traceparent` is planmux's call's (the host's
    /// own, read for the host request's span, replaced in place), the rest kept.
    #[test]
    fn a_forwarded_call_keeps_the_hosts_bytes_but_what_routes_it() -> Result<(), String> {
        let line = br#"{"jsonrpc":"2.0","id":"h-1","method":"tools/call","params":{"name":"s__echo","arguments":{"n":1.0},"_meta":{"progressToken":"p","traceparent":"00-aa-bb-01","x":1}}}"#;
        let call = Plain::read(line).ok_or("not read")?;
        assert_eq!(call.key, r#""h-1""#);
        assert_eq!(call.traceparent.as_deref(), Some("00-aa-bb-01"));
        let plain = call.forwarded(line, "7", r#""echo""#, None);
        let expected = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"n":1.0},"_meta":{"progressToken":7,"traceparent":"00-aa-bb-01","x":1}}}"#;
        assert_eq!(String::from_utf8_lossy(&plain), expected);
        let traced = call.forwarded(line, "7", r#""echo""#, Some("00-cc-dd-01"));
        let expected = expected.replace("00-aa-bb-01", "00-cc-dd-01");
        assert_eq!(String::from_utf8_lossy(&traced), expected);
        // Without the host's own, planmux's goes first into `_meta`, the rest as it was.
        let line = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"s__echo","arguments":{"n":1.0}}}"#;
        let call = Plain::read(line).ok_or("not read")?;
        let traced = call.forwarded(line, "7", r#""echo""#, Some("00-cc-dd-01"));
        let expected = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"traceparent":"00-cc-dd-01"},"name":"echo","arguments":{"n":1.0}}}"#;
        assert_eq!(String::from_utf8_lossy(&traced), expected);
        Ok(())
    }
}
