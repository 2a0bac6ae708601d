//! Text forms: what a `{"$ref": REF, …}` object may ask be done with the text its path
//! selected before anything else reads it (docs/plan-language.md, "Text forms"):
//! `"parse": "json"` (JSON, else JSON5 or a Python repr), `"split": SEP` (the non-empty
//! pieces, trimmed) or `"match": REGEX` (every match). One per reference; it runs after
//! the path and before a `jsonpath`.

use std::fmt;

use serde_json::{Map, Value};

use super::issue::describe_value;
use super::lenient;

/// The keys that name a text form in a reference object.
pub const FORM_KEYS: [&str; 3] = ["parse", "split", "match"];
/// Longest regular expression a plan may write (`match`, a condition's `matches`), and
/// the most memory its compiled form may take: the `regex` crate runs in time linear in
/// the text, and these bound what compiling costs.
const MAX_PATTERN_CHARS: usize = 1_000;
const MAX_PATTERN_BYTES: usize = 1 << 20;

/// A text form, checked when the plan is.
#[derive(Debug, Clone)]
pub enum TextForm {
    /// `"parse": "json"`.
    Json,
    /// `"split": SEP`.
    Split(String),
    /// `"match": REGEX`.
    Match(regex::Regex),
}

impl PartialEq for TextForm {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (TextForm::Json, TextForm::Json) => true,
            (TextForm::Split(a), TextForm::Split(b)) => a == b,
            (TextForm::Match(a), TextForm::Match(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }
}

impl TextForm {
    /// The form a reference object asks for (`None` when it asks for none), or why it
    /// cannot be used.
    pub fn from_object(map: &Map<String, Value>) -> Result<Option<Self>, String> {
        let asked: Vec<(&str, &Value)> = FORM_KEYS
            .iter()
            .filter_map(|key| Some((*key, map.get(*key)?)))
            .collect();
        let (key, value) = match asked.as_slice() {
            [] => return Ok(None),
            [one] => *one,
            [first, second, ..] => {
                return Err(format!(
                    "a reference takes one text form; \"{}\" and \"{}\" are both given (read the text in two steps)",
                    first.0, second.0
                ));
            }
        };
        let Value::String(text) = value else {
            return Err(format!(
                "\"{key}\" takes a string, not {}",
                describe_value(value)
            ));
        };
        match key {
            "parse" if text == "json" => Ok(Some(TextForm::Json)),
            "parse" => Err(format!(
                "\"parse\" knows only \"json\" (which also reads JSON5 and Python reprs), not \"{text}\""
            )),
            "split" if text.is_empty() => {
                Err("\"split\" takes a separator such as \"\\n\" or \",\", not \"\"".into())
            }
            "split" => Ok(Some(TextForm::Split(text.clone()))),
            _ => compile_pattern(text, "match").map(|re| Some(TextForm::Match(re))),
        }
    }

    /// The form applied to `value`, which must be text; the error says what it was
    /// instead, or why the text could not be read, and reads after the name of the value
    /// (`` `t.rows` is a number (3), and "split" reads text ``).
    pub fn apply(&self, value: &Value) -> Result<Value, String> {
        let Value::String(text) = value else {
            let key = match self {
                TextForm::Json => "parse",
                TextForm::Split(_) => "split",
                TextForm::Match(_) => "match",
            };
            return Err(format!(
                "is {}, and \"{key}\" reads text",
                describe_value(value)
            ));
        };
        match self {
            TextForm::Json => lenient::lenient(text).map_err(|why| {
                format!(
                    "is text that is neither JSON nor JSON5 ({}: {why})",
                    lenient::excerpt(text)
                )
            }),
            TextForm::Split(separator) => Ok(Value::Array(
                text.split(separator.as_str())
                    .map(str::trim)
                    .filter(|piece| !piece.is_empty())
                    .map(|piece| Value::String(piece.to_owned()))
                    .collect(),
            )),
            TextForm::Match(re) => Ok(Value::Array(matches(re, text))),
        }
    }
}

/// Every match of `re` in `text`: with named groups, an object of the group names per
/// match (a group that took no part is `null`); else the whole matches.
fn matches(re: &regex::Regex, text: &str) -> Vec<Value> {
    let names: Vec<&str> = re.capture_names().flatten().collect();
    if names.is_empty() {
        return re
            .find_iter(text)
            .map(|m| Value::String(m.as_str().to_owned()))
            .collect();
    }
    re.captures_iter(text)
        .map(|caps| {
            let fields: Map<String, Value> = names
                .iter()
                .map(|name| {
                    let found = caps
                        .name(name)
                        .map_or(Value::Null, |m| Value::String(m.as_str().to_owned()));
                    ((*name).to_owned(), found)
                })
                .collect();
            Value::Object(fields)
        })
        .collect()
}

impl fmt::Display for TextForm {
    /// The form as a reference's description shows it: `parse json`, `split ","`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TextForm::Json => write!(f, "parse json"),
            TextForm::Split(sep) => write!(f, "split {}", Value::String(sep.clone())),
            TextForm::Match(re) => write!(f, "match {}", Value::String(re.as_str().to_owned())),
        }
    }
}

/// A regular expression written in the plan under `key`, compiled within the bounds.
pub fn compile_pattern(text: &str, key: &str) -> Result<regex::Regex, String> {
    if text.chars().count() > MAX_PATTERN_CHARS {
        return Err(format!(
            "the \"{key}\" pattern is longer than {MAX_PATTERN_CHARS} characters"
        ));
    }
    regex::RegexBuilder::new(text)
        .size_limit(MAX_PATTERN_BYTES)
        .build()
        .map_err(|e| format!("bad \"{key}\" pattern: {}", one_line(&e.to_string())))
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
