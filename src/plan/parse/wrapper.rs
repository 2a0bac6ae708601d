//! Plans that come wrapped: as JSON text (with `//` notes, as the seeds' articles write
//! them), or inside `{"plan": …}` with fields of its own beside it.

use serde_json::{Map, Value};

use crate::plan::issue::IssueKind;

/// How deep `{"plan": "<json string>"}` may nest before we stop unwrapping.
pub const MAX_UNWRAP: usize = 4;

/// Reads a JSON string as JSON, reporting where it breaks.
pub(super) fn parse_json_text(text: &str) -> Result<Value, IssueKind> {
    serde_json::from_str(text).or_else(|e| {
        // Plans written as in the seeds' articles may carry `//` notes (`"content":
        // "${weather.result}"  // Magic happens here`): without them, the plan may be
        // fine. A plan that is still not JSON gets the error of the text as sent.
        without_comments(text)
            .and_then(|bare| serde_json::from_str(&bare).ok())
            .ok_or_else(|| IssueKind::MalformedJson {
                line: e.line(),
                column: e.column(),
                message: strip_position(&e.to_string()),
            })
    })
}

/// `text` without its `//` and `/* */` comments (outside strings; a line comment's
/// newline stays, so positions keep their lines), or `None` when it has none.
fn without_comments(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let (mut in_string, mut found) = (false, false);
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => out.extend(chars.next()),
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                found = true;
                while chars.next_if(|&c| c != '\n').is_some() {}
            }
            ('/', Some('*')) => {
                found = true;
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    if c == '\n' {
                        out.push(c);
                    }
                    last = c;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    found.then_some(out)
}

/// Why a `{"plan": …}` wrapper could not be opened.
pub enum Unopened {
    /// Its plan is JSON text that does not parse.
    Text(IssueKind),
    /// Its plan is neither an object, steps nor their text: this.
    Shape(Value),
}

/// One `{"plan": …}` wrapper (`outer`, at wrapping `depth`) opened: its plan (an object,
/// steps, or their JSON text, text nested up to [`MAX_UNWRAP`] deep) as a plan object,
/// the wrapper's other fields (such as `inputs`) filling in what it lacks.
pub fn open_wrapper(
    outer: &Map<String, Value>,
    depth: usize,
) -> Result<Map<String, Value>, Unopened> {
    let mut inner = outer.get("plan").cloned().unwrap_or(Value::Null);
    for _ in depth..MAX_UNWRAP {
        let Value::String(text) = &inner else { break };
        inner = parse_json_text(text).map_err(Unopened::Text)?;
    }
    let mut merged = match inner {
        Value::Object(map) => map,
        Value::Array(steps) => Map::from_iter([("steps".to_owned(), Value::Array(steps))]),
        other => return Err(Unopened::Shape(other)),
    };
    for (key, item) in outer {
        if key != "plan" && !merged.contains_key(key) {
            merged.insert(key.clone(), item.clone());
        }
    }
    Ok(merged)
}

/// serde_json appends " at line L column C"; the issue says that itself.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}
