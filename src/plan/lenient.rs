//! Reading text that holds JSON: strictly where a reference path continues into a string,
//! and leniently for `"parse": "json"`, which also reads JSON5's relaxations (single-quoted
//! strings, trailing commas, unquoted keys, comments) and Python reprs (`True`, `False`,
//! `None`, tuples), as servers such as mcp-server-sqlite print them.
//!
//! Both are bounded: text longer than [`MAX_PARSED_TEXT_BYTES`] is not read, and a value
//! nested deeper than [`MAX_PARSED_DEPTH`] is refused (the lenient parser recurses, so the
//! brackets its text opens are counted before it runs, [`MAX_OPEN_BRACKETS`]).

use serde_json::Value;

/// Longest text read as JSON. A reference may be resolved for each item of a loop (and on
/// the I/O thread), each time parsing what it reads afresh: 4 MiB keeps one parse to a
/// few milliseconds, and is far beyond a configuration file or a query's rows.
pub const MAX_PARSED_TEXT_BYTES: usize = 4 * 1024 * 1024;

/// Deepest nesting a value read out of text may have: as deep as a run's result keeps
/// (`exec::truncate::MAX_OUTPUT_DEPTH`), so reading text never builds a value the answer
/// could not carry.
pub const MAX_PARSED_DEPTH: usize = 64;

/// The JSON `text` holds (after trimming whitespace), or why it holds none.
pub fn strict(text: &str) -> Result<Value, String> {
    let text = bounded(text)?;
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if depth(&value) > MAX_PARSED_DEPTH {
        return Err(too_deep());
    }
    Ok(value)
}

/// The value `text` holds as JSON, or failing that as JSON5 or a Python repr (`True`,
/// `False` and `None` read as `true`, `false` and `null`; tuples as arrays).
pub fn lenient(text: &str) -> Result<Value, String> {
    let strict_error = match strict(text) {
        Ok(value) => return Ok(value),
        Err(e) => e,
    };
    let text = bounded(text)?;
    // The lenient parser recurses once per bracket it opens, wherever the bracket is (a
    // string or a comment the scan below misreads included): no text it reads opens more
    // than this many at once, so no text can exhaust the stack.
    if open_brackets(text) > MAX_OPEN_BRACKETS {
        return Err(too_deep());
    }
    let json = from_python(text);
    match jsonc_parser::parse_to_serde_value(&json, &jsonc_parser::ParseOptions::default()) {
        Ok(Some(value)) if depth(&value) > MAX_PARSED_DEPTH => Err(too_deep()),
        Ok(Some(value)) => Ok(value),
        Ok(None) => Err("it holds no value".into()),
        Err(_) => Err(strict_error),
    }
}

/// Most brackets open at once, counted without regard to strings or comments, in text
/// the lenient parser reads: well above [`MAX_PARSED_DEPTH`] (brackets inside strings
/// count too), far below what would exhaust a thread's stack.
const MAX_OPEN_BRACKETS: usize = 4 * MAX_PARSED_DEPTH;

/// The most brackets (`[`, `{`, `(`) open at once in `text`, counting every one.
fn open_brackets(text: &str) -> usize {
    let (mut open, mut most) = (0usize, 0usize);
    for byte in text.bytes() {
        match byte {
            b'[' | b'{' | b'(' => {
                open += 1;
                most = most.max(open);
            }
            b']' | b'}' | b')' => open = open.saturating_sub(1),
            _ => {}
        }
    }
    most
}

/// The start of `text` as a JSON string, to show what text a message is about.
pub fn excerpt(text: &str) -> String {
    const SHOWN: usize = 40;
    let mut shown: String = text.chars().take(SHOWN).collect();
    if text.chars().nth(SHOWN).is_some() {
        shown.push('…');
    }
    Value::String(shown).to_string()
}

fn bounded(text: &str) -> Result<&str, String> {
    if text.len() > MAX_PARSED_TEXT_BYTES {
        return Err(format!(
            "it is {} bytes long; at most {MAX_PARSED_TEXT_BYTES} are read as JSON",
            text.len()
        ));
    }
    Ok(text.trim())
}

fn too_deep() -> String {
    format!("it nests deeper than {MAX_PARSED_DEPTH} levels")
}

/// `text` with Python's words and tuples outside strings written as JSON.
fn from_python(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(match word.as_str() {
            "True" => "true",
            "False" => "false",
            "None" => "null",
            other => other,
        });
        word.clear();
    };
    for c in text.chars() {
        if let Some(open) = quote {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                c if c == open => quote = None,
                _ => {}
            }
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        flush(&mut word, &mut out);
        if c == '"' || c == '\'' {
            quote = Some(c);
        }
        out.push(match c {
            '(' => '[',
            ')' => ']',
            other => other,
        });
    }
    flush(&mut word, &mut out);
    out
}

/// How deeply `value` nests: 1 for a scalar, one more per array or object around it.
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((value, level)) = stack.pop() {
        deepest = deepest.max(level);
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, level + 1))),
            Value::Object(map) => stack.extend(map.values().map(|v| (v, level + 1))),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text that opens more brackets than the lenient parser may recurse into is refused
    /// before it parses, wherever the brackets are: after a quote in a comment, which the
    /// Python scan would take for a string, as in plain text.
    #[test]
    fn deep_text_is_refused_before_it_parses() {
        let deep = "[".repeat(200_000);
        for text in [
            format!("/*'*/{deep}"),
            format!("//\"\n{deep}"),
            deep.clone(),
        ] {
            assert_eq!(lenient(&text), Err(too_deep()));
        }
        // Nesting a value may have, in any notation, still reads.
        let fine = format!(
            "{}1{}",
            "(".repeat(MAX_PARSED_DEPTH - 1),
            ")".repeat(MAX_PARSED_DEPTH - 1)
        );
        assert!(lenient(&fine).is_ok(), "{:?}", lenient(&fine));
        let over = format!(
            "{}1{}",
            "[".repeat(MAX_PARSED_DEPTH + 1),
            "]".repeat(MAX_PARSED_DEPTH + 1)
        );
        assert_eq!(lenient(&over), Err(too_deep()));
    }
}
