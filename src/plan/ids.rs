//! Step identifiers: the [`StepId`] newtype every stage of a plan names steps by, and the
//! rules an id must follow (what validation reports as unusable).

use std::fmt;

use serde::Serialize;

/// Longest step id: ids are names to read and write references with, and they are
/// quoted in every message about their step.
pub const MAX_ID_CHARS: usize = 64;
/// Words that cannot be step ids because references use them as roots.
const RESERVED_IDS: &[&str] = &["input", "inputs", "steps", "item", "index"];

/// The identifier of a step inside one plan (`cpu`, or `s2` when the model gave none).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct StepId(String);

impl StepId {
    /// Wraps an identifier; validation checks that it is well formed and unique.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The default id of the step at 0-based `index`: `s1`, `s2`, ….
    pub fn positional(index: usize) -> Self {
        Self(format!("s{}", index + 1))
    }

    /// The identifier as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StepId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for StepId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Why `id` cannot name a step, or `None` when it can: ids are ASCII letters, digits,
/// `_` and `-`, at most [`MAX_ID_CHARS`] long, and not a word references use as a root.
pub fn unusable(id: &str) -> Option<String> {
    let bad_char = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'));
    if id.is_empty() {
        Some("it is empty".to_owned())
    } else if id.chars().count() > MAX_ID_CHARS {
        Some(format!("it is longer than {MAX_ID_CHARS} characters"))
    } else if let Some(c) = bad_char {
        Some(format!("it contains {c:?}"))
    } else if RESERVED_IDS.contains(&id) {
        Some("references use this word for something else".to_owned())
    } else {
        None
    }
}
