//! Reference syntax: the path grammar, the string forms, and reading a path or a
//! JSONPath query out of a value.
//!
//! Grammar (see docs/plan-language.md):
//!
//! ```text
//! reference := root segment*
//! root      := "steps[" digits "]" | "input" | "inputs" | "item" | "index" | key
//! segment   := "." key | "[" integer "]" | "[" quoted "]"
//! key       := one or more characters other than . [ ] { } < > | " ' , whitespace
//! quoted    := '"' text '"' | "'" text "'"      (\" \' \\ escape inside)
//! ```
//!
//! A leading `result` segment after a step root means the whole output and is dropped.

use std::fmt;

use jsonpath_rust::parser::model::{
    Comparable, Filter, FilterAtom, FnArg, JpQuery, Segment, Selector, Test, TestFunction,
};
use serde_json::Value;

/// One step of a path: an object key or an array index (negative counts from the end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSeg {
    /// An object key (also accepted as an index when it is all digits and the value is an array).
    Key(String),
    /// An array index; `-1` is the last element.
    Index(i64),
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

/// A compiled RFC 9535 JSONPath query together with the text it came from.
#[derive(Debug, Clone)]
pub struct JsonQuery {
    text: String,
    query: JpQuery,
    singular: bool,
}

impl PartialEq for JsonQuery {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl JsonQuery {
    /// Compiles a query once; the error text is the parser's own. Refuses what could not
    /// be evaluated in bounded time: queries over [`MAX_QUERY_BYTES`], or with more than
    /// [`MAX_DESCENDANTS`] descendant segments.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.len() > MAX_QUERY_BYTES {
            return Err(format!(
                "the query is {} bytes long; at most {MAX_QUERY_BYTES} are allowed",
                text.len()
            ));
        }
        let query =
            jsonpath_rust::parser::parse_json_path(text).map_err(|e| one_line(&e.to_string()))?;
        let descendants = count_descendants(&query.segments);
        if descendants > MAX_DESCENDANTS {
            return Err(format!(
                "it has {descendants} descendant segments (`..`); at most {MAX_DESCENDANTS} is allowed, \
                 because each one multiplies the work by the size of the value"
            ));
        }
        let singular = query.segments.iter().all(|segment| {
            matches!(
                segment,
                Segment::Selector(Selector::Name(_) | Selector::Index(_))
            )
        });
        Ok(Self {
            text: text.to_owned(),
            query,
            singular,
        })
    }

    /// The query as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the query selects at most one node (only names and indices), in which
    /// case its value is that node rather than a list.
    pub fn is_singular(&self) -> bool {
        self.singular
    }

    /// Runs the query: a singular query yields its node (`Ok(None)` when there is none),
    /// any other query an array of every match (possibly empty). What it selects is
    /// copied, at most [`MAX_SELECTED_NODES`] JSON nodes in all: past that, an error that
    /// says so (`$..*` over a large deep value selects each subtree, nested in the next).
    pub fn eval(&self, value: &Value) -> Result<Option<Value>, String> {
        let Ok(found) = jsonpath_rust::query::js_path_process(&self.query, value) else {
            return Ok(None);
        };
        let mut left = MAX_SELECTED_NODES;
        let too_many = || {
            format!(
                "JSONPath `{}` selects more than {MAX_SELECTED_NODES} values; narrow it",
                preview(&self.text)
            )
        };
        if self.singular {
            return match found.first() {
                None => Ok(None),
                Some(hit) => copy_within(hit.val, &mut left)
                    .map(Some)
                    .ok_or_else(too_many),
            };
        }
        let mut all = Vec::with_capacity(found.len().min(MAX_SELECTED_NODES));
        for hit in found {
            all.push(copy_within(hit.val, &mut left).ok_or_else(too_many)?);
        }
        Ok(Some(Value::Array(all)))
    }
}

/// Longest JSONPath query accepted: far beyond any useful one, and it keeps the parser's
/// recursion shallow.
pub const MAX_QUERY_BYTES: usize = 1_024;
/// Descendant segments (`..`) allowed in one query, filters included: one is linear in
/// the value's size, each further one multiplies by it.
pub const MAX_DESCENDANTS: usize = 1;
/// JSON nodes one query may copy out of a value.
pub const MAX_SELECTED_NODES: usize = 1_000_000;

/// A copy of `value`, or `None` when it has more nodes than `left` allows (counted down).
fn copy_within(value: &Value, left: &mut usize) -> Option<Value> {
    *left = left.checked_sub(1)?;
    Some(match value {
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| copy_within(item, left))
                .collect::<Option<_>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Some((k.clone(), copy_within(v, left)?)))
                .collect::<Option<_>>()?,
        ),
        other => other.clone(),
    })
}

/// Descendant segments anywhere in a query, inside filters and function arguments too.
fn count_descendants(segments: &[Segment]) -> usize {
    fn segment(s: &Segment) -> usize {
        match s {
            Segment::Descendant(inner) => 1 + segment(inner),
            Segment::Selector(sel) => selector(sel),
            Segment::Selectors(sels) => sels.iter().map(selector).sum(),
        }
    }
    fn selector(s: &Selector) -> usize {
        match s {
            Selector::Filter(f) => filter(f),
            _ => 0,
        }
    }
    fn filter(f: &Filter) -> usize {
        match f {
            Filter::Or(all) | Filter::And(all) => all.iter().map(filter).sum(),
            Filter::Atom(FilterAtom::Filter { expr, .. }) => filter(expr),
            Filter::Atom(FilterAtom::Test { expr, .. }) => test(expr),
            Filter::Atom(FilterAtom::Comparison(c)) => {
                let (left, right) = c.vals();
                comparable(left) + comparable(right)
            }
        }
    }
    fn test(t: &Test) -> usize {
        match t {
            Test::RelQuery(segments) => count_descendants(segments),
            Test::AbsQuery(query) => count_descendants(&query.segments),
            Test::Function(f) => function(f),
        }
    }
    fn comparable(c: &Comparable) -> usize {
        match c {
            Comparable::Function(f) => function(f),
            _ => 0,
        }
    }
    fn function(f: &TestFunction) -> usize {
        match f {
            TestFunction::Custom(_, args) => args.iter().map(arg).sum(),
            TestFunction::Length(a) => arg(a),
            TestFunction::Value(a) | TestFunction::Count(a) => arg(a),
            TestFunction::Search(a, b) | TestFunction::Match(a, b) => arg(a) + arg(b),
        }
    }
    fn arg(a: &FnArg) -> usize {
        match a {
            FnArg::Literal(_) => 0,
            FnArg::Test(t) => test(t),
            FnArg::Filter(f) => filter(f),
        }
    }
    segments.iter().map(segment).sum()
}

/// Condenses the parser's multi-line message (`--> 1:4`, `= expected atom_expr`) to
/// one line: `at column 4: expected atom_expr`.
fn one_line(message: &str) -> String {
    let column = message
        .split("-->")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|pos| pos.split(':').nth(1));
    let expected = message.lines().find_map(|l| l.trim().strip_prefix("= "));
    match (column, expected) {
        (Some(column), Some(expected)) => format!("at column {column}: {expected}"),
        _ => message.split_whitespace().collect::<Vec<_>>().join(" "),
    }
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
    /// An optional JSONPath applied after `path`.
    pub query: Option<JsonQuery>,
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
            } else if let Some(index) = cur.integer() {
                path.push(PathSeg::Index(index));
            } else {
                return Err(
                    "`[` must hold an index such as [0] or a quoted key such as [\"a.b\"]".into(),
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

/// Parses a whole reference such as `cpu.metrics[0].name`, optionally followed by
/// `| $.jsonpath` when `allow_query` is set.
pub fn parse_reference(text: &str, allow_query: bool) -> Result<RawRef, String> {
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
                .map_err(|e| format!("`${{{}}}`: {e}", &inner[..end]))?;
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
        },
        end + 1,
    ))
}

fn flush(pieces: &mut Vec<ScannedPiece>, literal: &mut String) {
    if !literal.is_empty() {
        pieces.push(ScannedPiece::Text(std::mem::take(literal)));
    }
}

fn preview(text: &str) -> String {
    text.chars().take(24).collect()
}

/// Reads `path` out of `value`; `None` when a key or index is missing.
pub fn select<'a>(value: &'a Value, path: &[PathSeg]) -> Option<&'a Value> {
    path.iter()
        .try_fold(value, |current, seg| match (seg, current) {
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
        })
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
        }
    }
}
