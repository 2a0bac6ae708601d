//! Resolution: filling a template's references from finished steps at run time
//! (docs/plan-language.md, "Reading a reference" and "Missing values").
//!
//! A reference reads its source, then walks its path, going on into the JSON a string
//! holds when the path continues past one (`cfg.content.threshold`), then applies its
//! text form and then its JSONPath. When it finds nothing it is its `default`, or the
//! step that reads it fails with a [`Missing`] that says what it looked for and what is
//! there. A [`Reader`] parses each string at most once however many references read
//! into it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

use serde_json::Value;

use super::issue::describe_value;
use super::lenient::{self, MAX_PARSED_DEPTH};
use super::refs::{PathSeg, child, format_path};
use super::template::{Piece, Ref, RefSource, Template};

/// Fields of an object named when a path finds no such key.
const NAMED_FIELDS: usize = 20;

/// A reference that found nothing: the step that reads it fails with this (a named
/// output selection is left out, and the result says why).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Missing {
    /// Where in the plan (`args.name`, `when`, `outputs.total`).
    pub location: String,
    /// The reference as written.
    pub reference: String,
    /// What it looked for and what is there.
    pub message: String,
    /// How to give it a fallback: the `{"$ref": …}` object to write, or what to add to
    /// the one written.
    pub fallback: String,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} found nothing: {}. Fix the reference, or {}",
            self.location, self.reference, self.message, self.fallback
        )
    }
}

/// What a string parsed to, or why it holds no JSON.
type Parsed = Result<Rc<Value>, String>;

/// Looks up what a source holds: a finished step's output, its caught error, the
/// plan's inputs, the current item and its position; `None` when it holds nothing.
pub type Lookup<'l, 'v> = &'l dyn Fn(&RefSource) -> Option<&'v Value>;

/// Reads references for one resolution (a step's condition, items and arguments; one
/// selection), remembering what each string it read into parsed to.
pub struct Reader<'l, 'v> {
    lookup: Lookup<'l, 'v>,
    /// Each string parsed, by its address and length: the values looked up live as long
    /// as the reader, and so do the parsed ones (held here), so no address is reused.
    parsed: RefCell<HashMap<(usize, usize), Parsed>>,
}

impl<'l, 'v> Reader<'l, 'v> {
    /// A reader over what `lookup` returns.
    pub fn new(lookup: Lookup<'l, 'v>) -> Self {
        Self {
            lookup,
            parsed: RefCell::new(HashMap::new()),
        }
    }

    /// What `source` holds.
    pub fn source(&self, source: &RefSource) -> Option<&'v Value> {
        (self.lookup)(source)
    }

    /// The template with every reference filled in; `at` is where it is in the plan
    /// (`args`), for the message when a reference finds nothing.
    pub fn template(&self, template: &Template<Ref>, at: &str) -> Result<Value, Missing> {
        Ok(match template {
            Template::Literal(value) => value.clone(),
            Template::Ref(r) => self.read(r, at)?,
            Template::Text(pieces) => {
                let mut out = String::new();
                for piece in pieces {
                    match piece {
                        Piece::Text(text) => out.push_str(text),
                        Piece::Ref(r) => match self.read(r, at)? {
                            Value::String(text) => out.push_str(&text),
                            other => {
                                out.push_str(&serde_json::to_string(&other).unwrap_or_default())
                            }
                        },
                    }
                }
                Value::String(out)
            }
            Template::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.template(item, &format!("{at}[{i}]")))
                    .collect::<Result<_, _>>()?,
            ),
            Template::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(key, item)| {
                        let child = format!("{at}{}", PathSeg::Key(key.clone()));
                        Ok((key.clone(), self.template(item, &child)?))
                    })
                    .collect::<Result<_, _>>()?,
            ),
        })
    }

    /// What one reference reads, its `default` when it finds nothing, or why it found
    /// nothing.
    pub fn read(&self, r: &Ref, at: &str) -> Result<Value, Missing> {
        match (self.find(r), &r.default) {
            (Ok(value), _) => Ok(value),
            (Err(_), Some(default)) => Ok(Value::clone(default)),
            (Err(message), None) => Err(Missing {
                location: at.to_owned(),
                reference: r.text.clone(),
                message,
                fallback: fallback(r),
            }),
        }
    }

    /// What one reference reads (its default aside), or what it found instead.
    pub fn find(&self, r: &Ref) -> Result<Value, String> {
        let mut name = root_name(&r.source);
        let Some(base) = (self.lookup)(&r.source) else {
            return Err(no_source(&r.source));
        };
        let path = self.concrete(&r.path)?;
        let mut value = self.walk(base, &path, &mut name, 0)?;
        if let Some(form) = &r.form {
            value = form
                .apply(&value)
                .map_err(|why| format!("`{name}` {why}"))?;
        }
        let Some(query) = &r.query else {
            return Ok(value);
        };
        // `value` is this call's own: its text is parsed here, not remembered by address
        // (a later value could be given the same address).
        if let Value::String(text) = &value
            && let Ok(parsed) = lenient::strict(text)
        {
            value = parsed;
        }
        match query.eval(&value) {
            Ok(Some(found)) => Ok(found),
            Ok(None) => Err(format!(
                "JSONPath `{}` matched nothing in `{name}`, which is {}",
                query.as_str(),
                what_is(&value)
            )),
            Err(too_much) => Err(too_much),
        }
    }

    /// The path with `[index]` replaced by the current item's position.
    fn concrete(&self, path: &[PathSeg]) -> Result<Vec<PathSeg>, String> {
        path.iter()
            .map(|seg| match seg {
                PathSeg::ItemIndex => (self.lookup)(&RefSource::Index)
                    .and_then(Value::as_i64)
                    .map(PathSeg::Index)
                    .ok_or_else(|| "[index] is read outside a foreach".to_owned()),
                other => Ok(other.clone()),
            })
            .collect()
    }

    /// `path` read out of `value`, going on into the JSON a string holds when the path
    /// continues past it. `name` grows with the path read so far, for messages.
    fn walk(
        &self,
        value: &Value,
        path: &[PathSeg],
        name: &mut String,
        parses: usize,
    ) -> Result<Value, String> {
        let mut current = value;
        for (n, seg) in path.iter().enumerate() {
            if let Value::String(text) = current {
                let parsed = self.parse(text).map_err(|why| {
                    format!(
                        "`{name}` is text that is not JSON ({}: {why}), so it has no {}; \
                         {{\"$ref\": …}} with \"parse\", \"split\" or \"match\" reads other text",
                        lenient::excerpt(text),
                        seg_name(seg)
                    )
                })?;
                if parses >= MAX_PARSED_DEPTH {
                    return Err(format!(
                        "`{name}` is JSON text nested in text more than {MAX_PARSED_DEPTH} times"
                    ));
                }
                return self.walk(&parsed, &path[n..], name, parses + 1);
            }
            current = child(current, seg).ok_or_else(|| absent(name, seg, current))?;
            name.push_str(&seg.to_string());
        }
        Ok(current.clone())
    }

    /// The JSON `text` holds, parsed once per reader. Only for text that lives as long as
    /// the reader (in a looked-up value, or in a value parsed and held here): it is
    /// remembered by its address.
    fn parse(&self, text: &str) -> Result<Rc<Value>, String> {
        let key = (text.as_ptr() as usize, text.len());
        if let Some(done) = self.parsed.borrow().get(&key) {
            return done.clone();
        }
        let parsed = lenient::strict(text).map(Rc::new);
        self.parsed.borrow_mut().insert(key, parsed.clone());
        parsed
    }
}

/// How to give `r` a fallback, as a message ends.
fn fallback(r: &Ref) -> String {
    if r.text.starts_with('{') {
        return "add \"default\": VALUE to the reference object to use VALUE instead".into();
    }
    let path = format!("{}{}", root_name(&r.source), format_path(&r.path));
    format!(
        "write {{\"$ref\": {}, \"default\": VALUE}} to use VALUE instead",
        Value::String(path)
    )
}

/// A source's name as a path starts it.
fn root_name(source: &RefSource) -> String {
    match source {
        RefSource::Output(id) | RefSource::Error(id) => id.to_string(),
        RefSource::Input => "input".into(),
        RefSource::Item => "item".into(),
        RefSource::Index => "index".into(),
    }
}

fn no_source(source: &RefSource) -> String {
    match source {
        RefSource::Output(id) => format!("step `{id}` has no output"),
        RefSource::Error(id) => format!("step `{id}` did not fail, so it has no error to read"),
        RefSource::Input => "the plan was given no inputs".into(),
        RefSource::Item | RefSource::Index => "there is no current item outside a foreach".into(),
    }
}

/// A path segment as a message names it: `` `date_time` `` or `[5]`.
fn seg_name(seg: &PathSeg) -> String {
    match seg {
        PathSeg::Key(key) => format!("`{key}`"),
        PathSeg::Index(i) => format!("[{i}]"),
        PathSeg::ItemIndex => "[index]".into(),
    }
}

/// Why `seg` finds nothing in `value` (reached as `name`), and what is there instead.
fn absent(name: &str, seg: &PathSeg, value: &Value) -> String {
    let wanted = seg_name(seg);
    match (seg, value) {
        (_, Value::Object(map)) if map.is_empty() => {
            format!("`{name}` is an empty object, so it has no {wanted}")
        }
        (PathSeg::Key(_), Value::Object(map)) => {
            format!("`{name}` has no {wanted}; its fields: {}", fields(map))
        }
        (_, Value::Object(map)) => format!(
            "`{name}` is an object, so it has no {wanted}; its fields: {}",
            fields(map)
        ),
        (PathSeg::Key(_), Value::Array(_)) => format!(
            "`{name}` is {}, so it has no {wanted}; read an item first (`{name}[0]{seg}`)",
            describe_value(value)
        ),
        (_, Value::Array(items)) if items.is_empty() => {
            format!("`{name}` is an empty array, so it has no {wanted}")
        }
        (_, Value::Array(items)) => {
            format!("`{name}` has no {wanted}; it has {} items", items.len())
        }
        (_, other) => format!(
            "`{name}` is {}, so it has no {wanted}",
            describe_value(other)
        ),
    }
}

/// An object's first keys, then how many more.
fn fields(map: &serde_json::Map<String, Value>) -> String {
    let names: Vec<&str> = map.keys().take(NAMED_FIELDS).map(String::as_str).collect();
    let more = map.len().saturating_sub(NAMED_FIELDS);
    let more = (more > 0).then(|| format!(" and {more} more"));
    format!("{}{}", names.join(", "), more.unwrap_or_default())
}

/// A value as a message describes it, an object with its fields.
fn what_is(value: &Value) -> String {
    match value {
        Value::Object(map) if !map.is_empty() => {
            format!("an object with the fields {}", fields(map))
        }
        other => describe_value(other),
    }
}

impl Template<Ref> {
    /// Resolves every reference with `lookup` (which returns the value a source holds,
    /// or `None` when it has none): the arguments, or why a reference found nothing.
    pub fn resolve<'v>(
        &self,
        lookup: &dyn Fn(&RefSource) -> Option<&'v Value>,
    ) -> Result<Value, Missing> {
        Reader::new(lookup).template(self, "args")
    }
}
