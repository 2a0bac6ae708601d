//! Reference syntax: the path grammar, the string forms, and reading a path out of a
//! value (a JSONPath query after the path is `query`'s).
//!
//! Grammar (see docs/plan-language.md):
//!
//! ```text
//! reference := root segment*
//! root      := "steps[" digits "]" | "input" | "inputs" | "item" | "index" | key
//! segment   := "." key | "[" integer "]" | "[" quoted "]" | "[index]"
//! key       := one or more characters other than . [ ] { } < > | " ' , whitespace
//! quoted    := '"' text '"' | "'" text "'"      (\" \' \\ escape inside)
//! ```
//!
//! A leading `result` segment after a step root means the whole output and is dropped.

use std::fmt;

use serde_json::Value;

use super::issue::excerpt;
use super::query::{JsonQuery, preview};
use super::text_form::TextForm;

/// One step of a path: an object key or an array index (negative counts from the end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSeg {
    /// An object key (also accepted as an index when it is all digits and the value is an array).
    Key(String),
    /// An array index; `-1` is the last element.
    Index(i64),
    /// `[index]`: the current item's position, inside a `foreach` step (pairing loops:
    /// `read[index].content` reads the output of step `read` for the same item).
    ItemIndex,
}

/// What a reference names before validation ties it to a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawRoot {
    /// A step by id (`cpu`), or a word that validation will report if no step has it.
    Step(String),
    /// A step by 0-based position (`steps[0]`).
    Index(usize),
    /// The plan's `inputs` object.
    Input,
    /// A seed-004 state slot (`†state.language`).
    State(String),
    /// The current item of a `foreach` step (`item`, `item.name`).
    Item,
    /// The current item's 0-based position in a `foreach` step (`index`).
    ItemIndex,
}

/// A reference as written in a plan, parsed but not yet tied to a step.
#[derive(Debug, Clone, PartialEq)]
pub struct RawRef {
    /// The reference exactly as the model wrote it, for messages.
    pub text: String,
    /// What it reads.
    pub root: RawRoot,
    /// The path inside the value (a leading `result` already dropped).
    pub path: Vec<PathSeg>,
    /// An optional JSONPath applied after `path` (and after `form`).
    pub query: Option<JsonQuery>,
    /// A text form applied to what `path` selected (`{"$ref": …, "split": "\n"}`).
    pub form: Option<TextForm>,
    /// The value used when the reference finds nothing (`{"$ref": …, "default": 0}`).
    pub default: Option<Box<Value>>,
}

/// Characters that end a dot key; anything else may be part of one.
fn is_key_char(c: char) -> bool {
    !(c.is_whitespace() || c.is_control() || ".[]{}<>|\"',".contains(c))
}

/// A small cursor over a reference's text.
struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn eat(&mut self, prefix: &str) -> bool {
        if self.rest().starts_with(prefix) {
            self.pos += prefix.len();
            true
        } else {
            false
        }
    }

    fn skip_spaces(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn key(&mut self) -> Option<String> {
        let rest = self.rest();
        let len = rest.find(|c: char| !is_key_char(c)).unwrap_or(rest.len());
        if len == 0 {
            return None;
        }
        self.pos += len;
        Some(rest[..len].to_owned())
    }

    fn integer(&mut self) -> Option<i64> {
        let rest = self.rest();
        let sign = usize::from(rest.starts_with('-'));
        let digits = rest[sign..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len() - sign);
        if digits == 0 {
            return None;
        }
        let number = rest[..sign + digits].parse().ok()?;
        self.pos += sign + digits;
        Some(number)
    }

    fn quoted(&mut self) -> Result<Option<String>, String> {
        let Some(quote) = self
            .rest()
            .chars()
            .next()
            .filter(|c| *c == '"' || *c == '\'')
        else {
            return Ok(None);
        };
        self.pos += 1;
        let mut out = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, escaped)) => out.push(escaped),
                    None => break,
                },
                c if c == quote => {
                    self.pos += at + 1;
                    return Ok(Some(out));
                }
                c => out.push(c),
            }
        }
        Err(format!(
            "the quoted key starting with {quote} is not closed"
        ))
    }
}

/// Parses `root segment*` from the start of `text`, returning the root, the path and
/// how many bytes were read. Stops at the first character that cannot continue it.
fn parse_path_prefix(text: &str) -> Result<(RawRoot, Vec<PathSeg>, usize), String> {
    let mut cur = Cursor { text, pos: 0 };
    let root = if cur.eat("steps[") {
        let index = cur
            .integer()
            .filter(|n| *n >= 0)
            .ok_or("`steps[` must be followed by a step position such as steps[0]")?;
        if !cur.eat("]") {
            return Err("`steps[N` is missing its closing `]`".to_owned());
        }
        RawRoot::Index(usize::try_from(index).map_err(|e| e.to_string())?)
    } else {
        match cur.key() {
            Some(word) if word == "input" || word == "inputs" => RawRoot::Input,
            Some(word) if word == "item" => RawRoot::Item,
            Some(word) if word == "index" => RawRoot::ItemIndex,
            Some(word) => RawRoot::Step(word),
            None => return Err("a reference must start with a step id, steps[N] or input".into()),
        }
    };
    let mut path = Vec::new();
    loop {
        if cur.eat(".") {
            let key = cur.key().ok_or("expected a key after `.`")?;
            path.push(PathSeg::Key(key));
        } else if cur.eat("[") {
            cur.skip_spaces();
            if let Some(key) = cur.quoted()? {
                path.push(PathSeg::Key(key));
            } else if cur.eat("index") {
                path.push(PathSeg::ItemIndex);
            } else if let Some(index) = cur.integer() {
                path.push(PathSeg::Index(index));
            } else {
                return Err(
                    "`[` must hold an index such as [0], [index] in a foreach, or a quoted key such as [\"a.b\"]"
                        .into(),
                );
            }
            cur.skip_spaces();
            if !cur.eat("]") {
                return Err("a `[` is missing its closing `]`".into());
            }
        } else {
            break;
        }
    }
    if matches!(root, RawRoot::Step(_) | RawRoot::Index(_))
        && path.first() == Some(&PathSeg::Key("result".into()))
    {
        path.remove(0);
    }
    Ok((root, path, cur.pos))
}

/// Longest reference accepted, as written after `$ref:`, inside `${…}` or in `{"$ref": …}`
/// (a `| $.jsonpath` query included): a path worth writing is a few dozen bytes, and a
/// reference's path is parsed into segments and copied as the plan is checked, work a
/// megabyte-long one would make take seconds before anything runs.
pub const MAX_REFERENCE_BYTES: usize = 4_096;

/// Parses a whole reference such as `cpu.metrics[0].name`, optionally followed by
/// `| $.jsonpath` when `allow_query` is set. One longer than [`MAX_REFERENCE_BYTES`] is
/// refused before it is read.
pub fn parse_reference(text: &str, allow_query: bool) -> Result<RawRef, String> {
    if text.len() > MAX_REFERENCE_BYTES {
        return Err(format!(
            "the reference is {} bytes long; at most {MAX_REFERENCE_BYTES} are allowed",
            text.len()
        ));
    }
    let trimmed = text.trim();
    let (root, path, used) = parse_path_prefix(trimmed)?;
    let rest = trimmed[used..].trim_start();
    let query = if rest.is_empty() {
        None
    } else if let Some(query) = rest.strip_prefix('|').filter(|_| allow_query) {
        Some(JsonQuery::parse(query).map_err(|e| format!("bad JSONPath `{}`: {e}", query.trim()))?)
    } else {
        return Err(format!(
            "unexpected `{rest}` after the path; keys with unusual characters are written a[\"x.y\"]"
        ));
    };
    Ok(RawRef {
        text: text.to_owned(),
        root,
        path,
        query,
        form: None,
        default: None,
    })
}

/// Parses a seed-004 reference (`†state.slot.path` or `†input.path`); `None` when the
/// string is not one (it is then literal text).
pub fn parse_dagger(text: &str) -> Option<Result<RawRef, String>> {
    let body = text.strip_prefix('†')?;
    let (slot_based, rest) = if let Some(rest) = body.strip_prefix("state.") {
        (true, rest)
    } else if body == "input" || body.starts_with("input.") {
        (false, body)
    } else {
        return None;
    };
    Some(parse_reference(rest, false).map(|mut parsed| {
        parsed.text = text.to_owned();
        if slot_based {
            // The first word names the slot, whatever parse_path_prefix took it for.
            parsed.root = match parsed.root {
                RawRoot::Step(slot) => RawRoot::State(slot),
                RawRoot::Input => RawRoot::State("input".into()),
                other => other,
            };
        }
        parsed
    }))
}

/// Parses the `_outputPath` of a seed-004 call: `†state.a` or `†state.a || †state.b`.
pub fn parse_output_path(text: &str) -> Result<(String, Option<String>), String> {
    let slot = |part: &str| -> Result<String, String> {
        let part = part.trim();
        let name = part
            .strip_prefix("†state.")
            .ok_or_else(|| format!("`{part}` is not a state slot such as †state.name"))?;
        if name.is_empty() || !name.chars().all(is_key_char) {
            return Err(format!("`{part}` is not a plain slot name"));
        }
        Ok(name.to_owned())
    };
    match text.split_once("||") {
        Some((success, error)) => Ok((slot(success)?, Some(slot(error)?))),
        None => Ok((slot(text)?, None)),
    }
}

/// One piece of a string after reference scanning.
#[derive(Debug, Clone, PartialEq)]
pub enum ScannedPiece {
    /// Literal text, escapes already removed.
    Text(String),
    /// A reference to splice in (or, when it is the only piece, to use typed).
    Ref(RawRef),
}

/// Scans a string for `${…}` and `$<…>` references and the `$${` / `$$<` escapes.
///
/// `$` followed by anything else is literal, so "costs $5" and "$HOME" stay as they are.
/// A `${` that does not hold a well-formed reference is an error: it is almost always a
/// mistake, and the escape `$${` writes a literal `${`.
pub fn scan_string(text: &str) -> Result<Vec<ScannedPiece>, String> {
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        literal.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail
            .strip_prefix("$${")
            .or_else(|| tail.strip_prefix("$$<"))
        {
            literal.push_str(&tail[1..3]);
            rest = after;
        } else if let Some(inner) = tail.strip_prefix("${") {
            let end = inner.find('}').ok_or_else(|| {
                format!(
                    "`${{` starting `{}` is not closed by `}}`; write $${{ for a literal ${{",
                    preview(tail)
                )
            })?;
            let parsed = parse_reference(&inner[..end], false)
                .map_err(|e| format!("`{}`: {e}", excerpt(&tail[..end + 3])))?;
            flush(&mut pieces, &mut literal);
            pieces.push(ScannedPiece::Ref(RawRef {
                text: format!("${{{}}}", &inner[..end]),
                ..parsed
            }));
            rest = &inner[end + 1..];
        } else if let Some(found) = tail.strip_prefix("$<").and_then(angle_reference) {
            let (parsed, used) = found;
            flush(&mut pieces, &mut literal);
            pieces.push(ScannedPiece::Ref(parsed));
            rest = &tail[2 + used..];
        } else {
            literal.push('$');
            rest = &tail[1..];
        }
    }
    literal.push_str(rest);
    flush(&mut pieces, &mut literal);
    Ok(pieces)
}

/// Longest `$<…>` reference: the path is read from the `$<` on, and a string of many
/// `$<` must not make each one read to the end of the string.
pub const MAX_ANGLE_REFERENCE: usize = 512;

/// `$<path>`: a reference only when a well-formed path, read from right after `$<` (at
/// most [`MAX_ANGLE_REFERENCE`] bytes), is closed by `>`; otherwise the text is literal
/// (so "x $< y" is left alone). Reading stops where the path does, so scanning a string
/// stays linear however many `$<` it holds.
fn angle_reference(inner: &str) -> Option<(RawRef, usize)> {
    let mut cut = inner.len().min(MAX_ANGLE_REFERENCE);
    while !inner.is_char_boundary(cut) {
        cut -= 1;
    }
    let window = &inner[..cut];
    let start = window.len() - window.trim_start().len();
    let (root, path, used) = parse_path_prefix(&window[start..]).ok()?;
    let after = &window[start + used..];
    let spaces = after.len() - after.trim_start().len();
    if !after[spaces..].starts_with('>') {
        return None;
    }
    let end = start + used + spaces;
    Some((
        RawRef {
            text: format!("$<{}>", &inner[..end]),
            root,
            path,
            query: None,
            form: None,
            default: None,
        },
        end + 1,
    ))
}

fn flush(pieces: &mut Vec<ScannedPiece>, literal: &mut String) {
    if !literal.is_empty() {
        pieces.push(ScannedPiece::Text(std::mem::take(literal)));
    }
}

/// Reads `path` out of `value`; `None` when a key or index is missing, and at `[index]`
/// (which only a loop's item can fill). Resolution reads more (into text, `[index]`):
/// `resolve`'s `Reader`.
pub fn select<'a>(value: &'a Value, path: &[PathSeg]) -> Option<&'a Value> {
    path.iter().try_fold(value, child)
}

/// One step of a path: an object's key (or an array's, when all digits), an index.
pub(super) fn child<'a>(value: &'a Value, seg: &PathSeg) -> Option<&'a Value> {
    match (seg, value) {
        (PathSeg::Key(key), Value::Object(map)) => map.get(key),
        (PathSeg::Key(key), Value::Array(items)) => {
            key.parse::<usize>().ok().and_then(|i| items.get(i))
        }
        (PathSeg::Index(index), Value::Array(items)) => {
            let len = i64::try_from(items.len()).ok()?;
            let at = if *index < 0 { len + index } else { *index };
            usize::try_from(at).ok().and_then(|i| items.get(i))
        }
        _ => None,
    }
}

/// Writes a path the way the grammar reads it (`.a[0]["x.y"]`), for locations and messages.
pub fn format_path(path: &[PathSeg]) -> String {
    path.iter().map(ToString::to_string).collect()
}

impl fmt::Display for PathSeg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathSeg::Key(key) if !key.is_empty() && key.chars().all(is_key_char) => {
                write!(f, ".{key}")
            }
            PathSeg::Key(key) => write!(f, "[{}]", Value::String(key.clone())),
            PathSeg::Index(index) => write!(f, "[{index}]"),
            PathSeg::ItemIndex => write!(f, "[index]"),
        }
    }
}
