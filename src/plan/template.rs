//! Argument templates: a step's arguments as a JSON tree whose reference nodes are
//! parsed once, before anything runs, and resolved against finished outputs later.

use serde_json::{Map, Value};

use super::ids::StepId;
use super::issue::excerpt;
use super::query::JsonQuery;
use super::refs::{self, PathSeg, RawRef, ScannedPiece};
use super::text_form::{FORM_KEYS, TextForm};

/// The keys a reference object may hold: `$ref`, and what to do with what it reads.
pub const REF_OBJECT_KEYS: [&str; 6] = ["$ref", "jsonpath", "parse", "split", "match", "default"];

/// What a validated reference reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RefSource {
    /// A step's output value (it must have succeeded, or `on_error` be `continue`).
    Output(StepId),
    /// A step's caught error (seed-004 `_outputPath: "†state.ok || †state.error"`);
    /// present only when that step failed.
    Error(StepId),
    /// The plan's `inputs` object.
    Input,
    /// The current item of a `foreach` step.
    Item,
    /// The current item's 0-based position.
    Index,
}

impl RefSource {
    /// The step this source depends on, if any.
    pub fn step(&self) -> Option<&StepId> {
        match self {
            RefSource::Output(id) | RefSource::Error(id) => Some(id),
            RefSource::Input | RefSource::Item | RefSource::Index => None,
        }
    }
}

/// A reference tied to a step (or to the inputs) by validation.
#[derive(Debug, Clone, PartialEq)]
pub struct Ref {
    /// The reference as the model wrote it, for warnings.
    pub text: String,
    /// What it reads.
    pub source: RefSource,
    /// The path inside that value.
    pub path: Vec<PathSeg>,
    /// An optional JSONPath query applied after `path` (and after `form`).
    pub query: Option<JsonQuery>,
    /// A text form applied to what `path` selected.
    pub form: Option<TextForm>,
    /// What to use when the reference finds nothing; without one, the reading step fails.
    pub default: Option<Box<Value>>,
}

impl Ref {
    /// Whether reading it may cost in proportion to the value it reads (a JSONPath query,
    /// a text form), so the executor resolves it off the I/O thread.
    pub fn costly(&self) -> bool {
        self.query.is_some() || self.form.is_some()
    }

    /// Whether reading it for each item of a loop may cost in proportion to what it
    /// reads: [`Self::costly`], or a path into something other than the item, which
    /// may go on into text each item parses anew.
    pub fn costly_per_item(&self) -> bool {
        self.costly()
            || (!self.path.is_empty() && !matches!(self.source, RefSource::Item | RefSource::Index))
    }
}

impl std::fmt::Display for Ref {
    /// What the reference reads, canonically: `cpu.current`, `input.cities`, `item.name`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = refs::format_path(&self.path);
        match &self.source {
            RefSource::Output(id) => write!(f, "{id}{path}")?,
            RefSource::Error(id) => write!(f, "{id}{path} (its error)")?,
            RefSource::Input => write!(f, "input{path}")?,
            RefSource::Item => write!(f, "item{path}")?,
            RefSource::Index => write!(f, "index{path}")?,
        }
        if let Some(form) = &self.form {
            write!(f, " ({form})")?;
        }
        if let Some(query) = &self.query {
            write!(f, " | {}", query.as_str())?;
        }
        match &self.default {
            Some(default) => write!(f, " (default {default})"),
            None => Ok(()),
        }
    }
}

impl Template {
    /// The template as JSON for a person to read: literals as they are, a whole
    /// reference as `"$ref:…"`, one inside text as `${…}` (what each reads, canonically).
    pub fn written(&self) -> Value {
        self.to_json(&Writer {
            literal: &Value::clone,
            text: &str::to_owned,
            whole: &|r| Value::String(format!("$ref:{r}")),
            spliced: &|r| format!("${{{r}}}"),
        })
    }
}

/// How [`Template::to_json`] writes each part of a template.
pub(super) struct Writer<'a, R> {
    /// A subtree with no references.
    pub literal: &'a dyn Fn(&Value) -> Value,
    /// Literal text inside a string with references.
    pub text: &'a dyn Fn(&str) -> String,
    /// A whole value that is a reference.
    pub whole: &'a dyn Fn(&R) -> Value,
    /// A reference inside a string.
    pub spliced: &'a dyn Fn(&R) -> String,
}

impl Ref {
    /// `raw` bound to what validation found it reads.
    pub fn bind(raw: &RawRef, source: RefSource) -> Self {
        Ref {
            text: raw.text.clone(),
            source,
            path: raw.path.clone(),
            query: raw.query.clone(),
            form: raw.form.clone(),
            default: raw.default.clone(),
        }
    }
}

/// A JSON tree with reference nodes. `R` is [`RawRef`] after parsing and [`Ref`] after
/// validation.
#[derive(Debug, Clone, PartialEq)]
pub enum Template<R = Ref> {
    /// A subtree with no references, used as it is.
    Literal(Value),
    /// A whole value that is a reference: replaced by the referenced value, typed.
    Ref(R),
    /// A string with references inside: each spliced in as text.
    Text(Vec<Piece<R>>),
    /// An array with references somewhere inside.
    Array(Vec<Template<R>>),
    /// An object with references somewhere inside; keys keep the order written.
    Object(Vec<(String, Template<R>)>),
}

/// Part of a spliced string.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece<R = Ref> {
    /// Literal text.
    Text(String),
    /// A reference rendered as text (strings raw, anything else as compact JSON).
    Ref(R),
}

impl<R> Default for Template<R> {
    fn default() -> Self {
        Template::Literal(Value::Object(Map::new()))
    }
}

/// A reference that could not be parsed, with where it was.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxProblem {
    /// Location below the template root, such as `.message` or `.items[2]`.
    pub at: String,
    /// The text that was wrong.
    pub text: String,
    /// What is wrong with it.
    pub message: String,
}

impl Template<RawRef> {
    /// Builds a template from a JSON value, parsing every reference form. Problems are
    /// collected (their nodes become literals) so that every one can be reported.
    pub fn from_value(value: &Value, problems: &mut Vec<SyntaxProblem>) -> Self {
        build(value, "", problems)
    }
}

impl Template<RawRef> {
    /// Turns the references for which `is_text` holds back into the text they were
    /// written as. Used for `$<word>` where `word` names no step: that is prose, not a
    /// reference (only `${word}` insists on being one).
    pub fn literalize(&self, is_text: &dyn Fn(&RawRef) -> bool) -> Self {
        match self {
            Template::Literal(value) => Template::Literal(value.clone()),
            Template::Ref(r) if is_text(r) => Template::Literal(Value::String(r.text.clone())),
            Template::Ref(r) => Template::Ref(r.clone()),
            Template::Text(pieces) => {
                let mut out: Vec<Piece<RawRef>> = Vec::new();
                for piece in pieces {
                    let piece = match piece {
                        Piece::Ref(r) if is_text(r) => Piece::Text(r.text.clone()),
                        other => other.clone(),
                    };
                    match (out.last_mut(), piece) {
                        (Some(Piece::Text(before)), Piece::Text(more)) => before.push_str(&more),
                        (_, piece) => out.push(piece),
                    }
                }
                match out.as_slice() {
                    [Piece::Text(text)] => Template::Literal(Value::String(text.clone())),
                    _ => Template::Text(out),
                }
            }
            Template::Array(items) => {
                collapse_array(items.iter().map(|t| t.literalize(is_text)).collect())
            }
            Template::Object(fields) => collapse_object(
                fields
                    .iter()
                    .map(|(k, t)| (k.clone(), t.literalize(is_text)))
                    .collect(),
            ),
        }
    }
}

fn build(value: &Value, at: &str, problems: &mut Vec<SyntaxProblem>) -> Template<RawRef> {
    match value {
        Value::String(text) => build_string(text, at, problems),
        Value::Array(items) => {
            let parts: Vec<_> = items
                .iter()
                .enumerate()
                .map(|(i, item)| build(item, &format!("{at}[{i}]"), problems))
                .collect();
            collapse_array(parts)
        }
        Value::Object(map) => {
            if let Some(found) = reference_object(map) {
                return match found {
                    Ok(parsed) => Template::Ref(parsed),
                    Err(message) => {
                        problems.push(SyntaxProblem {
                            at: at.to_owned(),
                            text: compact(value),
                            message,
                        });
                        Template::Literal(value.clone())
                    }
                };
            }
            let parts: Vec<_> = map
                .iter()
                .map(|(key, item)| {
                    let child = format!("{at}{}", PathSeg::Key(key.clone()));
                    (key.clone(), build(item, &child, problems))
                })
                .collect();
            collapse_object(parts)
        }
        other => Template::Literal(other.clone()),
    }
}

fn build_string(text: &str, at: &str, problems: &mut Vec<SyntaxProblem>) -> Template<RawRef> {
    let mut fail = |message: String| {
        let repeated = format!("`{}`: ", excerpt(text));
        let message = message
            .strip_prefix(&repeated)
            .map(str::to_owned)
            .unwrap_or(message);
        problems.push(SyntaxProblem {
            at: at.to_owned(),
            text: text.to_owned(),
            message,
        });
        Template::Literal(Value::String(text.to_owned()))
    };
    if let Some(body) = text.strip_prefix("$ref:") {
        return match refs::parse_reference(body, true) {
            Ok(parsed) => Template::Ref(RawRef {
                text: text.to_owned(),
                ..parsed
            }),
            Err(message) => fail(message),
        };
    }
    if let Some(escaped) = text.strip_prefix("$$ref:") {
        return Template::Literal(Value::String(format!("$ref:{escaped}")));
    }
    if let Some(found) = refs::parse_dagger(text) {
        return match found {
            Ok(parsed) => Template::Ref(parsed),
            Err(message) => fail(message),
        };
    }
    match refs::scan_string(text) {
        Err(message) => fail(message),
        Ok(mut pieces) => match (pieces.len(), pieces.first()) {
            (0, _) => Template::Literal(Value::String(String::new())),
            (1, Some(ScannedPiece::Text(_))) | (1, Some(ScannedPiece::Ref(_))) => {
                match pieces.remove(0) {
                    ScannedPiece::Text(plain) => Template::Literal(Value::String(plain)),
                    ScannedPiece::Ref(parsed) => Template::Ref(parsed),
                }
            }
            _ => Template::Text(
                pieces
                    .into_iter()
                    .map(|piece| match piece {
                        ScannedPiece::Text(plain) => Piece::Text(plain),
                        ScannedPiece::Ref(parsed) => Piece::Ref(parsed),
                    })
                    .collect(),
            ),
        },
    }
}

/// `{"$ref": "step.path", "jsonpath": "$…"}`, with a text form (`"parse"`, `"split"`,
/// `"match"`) and a `"default"` if it likes. `None` when the object is not a reference:
/// no `$ref` string, or one that starts with `#` or holds `/` (a JSON Schema or JSON
/// Pointer reference, passed through as data).
fn reference_object(map: &Map<String, Value>) -> Option<Result<RawRef, String>> {
    let Value::String(target) = map.get("$ref")? else {
        return None;
    };
    if target.starts_with('#') || target.contains('/') {
        return None;
    }
    if let Some(extra) = map.keys().find(|k| !REF_OBJECT_KEYS.contains(&k.as_str())) {
        return Some(Err(format!(
            "a reference object holds \"$ref\" and optionally \"jsonpath\", one of {}, and \"default\"; not \"{extra}\"",
            FORM_KEYS.map(|k| format!("\"{k}\"")).join(" / ")
        )));
    }
    let body = target.strip_prefix("$ref:").unwrap_or(target);
    let body = body
        .strip_prefix("${")
        .and_then(|b| b.strip_suffix('}'))
        .unwrap_or(body);
    let parsed = refs::parse_reference(body, false);
    let query = match map.get("jsonpath") {
        None => None,
        Some(Value::String(query)) => match JsonQuery::parse(query) {
            Ok(query) => Some(query),
            Err(e) => return Some(Err(format!("bad JSONPath `{query}`: {e}"))),
        },
        Some(_) => {
            return Some(Err(
                "\"jsonpath\" must be a string such as \"$.items[0]\"".into()
            ));
        }
    };
    let form = match TextForm::from_object(map) {
        Ok(form) => form,
        Err(e) => return Some(Err(e)),
    };
    Some(parsed.map(|parsed| RawRef {
        text: compact(&Value::Object(map.clone())),
        query,
        form,
        default: map.get("default").cloned().map(Box::new),
        ..parsed
    }))
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn collapse_array<R>(parts: Vec<Template<R>>) -> Template<R> {
    if parts.iter().all(|p| matches!(p, Template::Literal(_))) {
        Template::Literal(Value::Array(
            parts
                .into_iter()
                .filter_map(Template::into_literal)
                .collect(),
        ))
    } else {
        Template::Array(parts)
    }
}

fn collapse_object<R>(parts: Vec<(String, Template<R>)>) -> Template<R> {
    if parts.iter().all(|(_, p)| matches!(p, Template::Literal(_))) {
        let map = parts
            .into_iter()
            .filter_map(|(k, p)| p.into_literal().map(|v| (k, v)))
            .collect();
        Template::Literal(Value::Object(map))
    } else {
        Template::Object(parts)
    }
}

impl<R> Template<R> {
    /// The template as JSON, each part written by `write`.
    pub(super) fn to_json(&self, write: &Writer<'_, R>) -> Value {
        match self {
            Template::Literal(value) => (write.literal)(value),
            Template::Ref(r) => (write.whole)(r),
            Template::Text(pieces) => Value::String(
                pieces
                    .iter()
                    .map(|piece| match piece {
                        Piece::Text(text) => (write.text)(text),
                        Piece::Ref(r) => (write.spliced)(r),
                    })
                    .collect(),
            ),
            Template::Array(items) => {
                Value::Array(items.iter().map(|item| item.to_json(write)).collect())
            }
            Template::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, t)| (k.clone(), t.to_json(write)))
                    .collect(),
            ),
        }
    }

    fn into_literal(self) -> Option<Value> {
        match self {
            Template::Literal(value) => Some(value),
            _ => None,
        }
    }

    /// Calls `f` on every reference with its location below the root (`.a[1]`).
    pub fn visit_refs(&self, f: &mut dyn FnMut(&R, &str)) {
        self.visit_at("", f);
    }

    fn visit_at(&self, at: &str, f: &mut dyn FnMut(&R, &str)) {
        match self {
            Template::Literal(_) => {}
            Template::Ref(r) => f(r, at),
            Template::Text(pieces) => pieces.iter().for_each(|piece| {
                if let Piece::Ref(r) = piece {
                    f(r, at);
                }
            }),
            Template::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    item.visit_at(&format!("{at}[{i}]"), f);
                }
            }
            Template::Object(fields) => {
                for (key, item) in fields {
                    item.visit_at(&format!("{at}{}", PathSeg::Key(key.clone())), f);
                }
            }
        }
    }

    /// Rebuilds the tree with every reference mapped by `f`; `None` if `f` refused any
    /// (every reference is still visited, so all problems get reported).
    pub fn map_refs<S>(&self, f: &mut dyn FnMut(&R, &str) -> Option<S>) -> Option<Template<S>> {
        self.map_at("", f)
    }

    fn map_at<S>(&self, at: &str, f: &mut dyn FnMut(&R, &str) -> Option<S>) -> Option<Template<S>> {
        match self {
            Template::Literal(value) => Some(Template::Literal(value.clone())),
            Template::Ref(r) => f(r, at).map(Template::Ref),
            Template::Text(pieces) => {
                let mapped: Vec<Option<Piece<S>>> = pieces
                    .iter()
                    .map(|piece| match piece {
                        Piece::Text(text) => Some(Piece::Text(text.clone())),
                        Piece::Ref(r) => f(r, at).map(Piece::Ref),
                    })
                    .collect();
                mapped
                    .into_iter()
                    .collect::<Option<Vec<_>>>()
                    .map(Template::Text)
            }
            Template::Array(items) => {
                let mapped: Vec<_> = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| item.map_at(&format!("{at}[{i}]"), f))
                    .collect();
                mapped
                    .into_iter()
                    .collect::<Option<Vec<_>>>()
                    .map(Template::Array)
            }
            Template::Object(fields) => {
                let mapped: Vec<_> = fields
                    .iter()
                    .map(|(key, item)| {
                        let child = format!("{at}{}", PathSeg::Key(key.clone()));
                        item.map_at(&child, f).map(|t| (key.clone(), t))
                    })
                    .collect();
                mapped
                    .into_iter()
                    .collect::<Option<Vec<_>>>()
                    .map(Template::Object)
            }
        }
    }

    /// The top-level keys this template sets when it is an object.
    pub fn object_keys(&self) -> Vec<&str> {
        match self {
            Template::Object(fields) => fields.iter().map(|(k, _)| k.as_str()).collect(),
            Template::Literal(Value::Object(map)) => map.keys().map(String::as_str).collect(),
            _ => Vec::new(),
        }
    }
}
