//! JSONPath queries (RFC 9535) a reference may end in (`cpu | $.items[?@.size > 10]`):
//! compiled once at validation, refused when they could not be evaluated in bounded
//! time, and run with a cap on what they copy out.

use jsonpath_rust::parser::model::{
    Comparable, Filter, FilterAtom, FnArg, JpQuery, Segment, Selector, Test, TestFunction,
};
use serde_json::Value;

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

/// The first characters of `text`, to quote a long one in a message.
pub(super) fn preview(text: &str) -> String {
    text.chars().take(24).collect()
}
