//! `when` conditions: whether a step runs, decided from finished steps' outputs when the
//! step is ready.
//!
//! A condition is a reference (truthy unless false, null, 0, "", [] or {}); or
//! `{"$ref": REF, OP: VALUE}` with OP one of [`OPERATORS`]; or `{"all": [...]}`,
//! `{"any": [...]}`, `{"not": COND}`; or a literal `true` / `false`.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::issue::excerpt;
use super::names::closest;
use super::refs::RawRef;
use super::resolve::Reader;
use super::template::{REF_OBJECT_KEYS, Ref, RefSource, Template};
use super::text_form::compile_pattern;

/// The comparison operators, as written.
pub const OPERATORS: [&str; 10] = [
    "eq", "ne", "gt", "gte", "lt", "lte", "in", "contains", "matches", "exists",
];
/// Deepest nesting of `all` / `any` / `not`: conditions are written by hand, and a
/// deeper one is a hostile input, not a plan.
const MAX_DEPTH: usize = 16;

/// A parsed condition. `R` is [`RawRef`] after parsing and [`Ref`] after validation.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition<R = Ref> {
    /// A literal `true` or `false`.
    Constant(bool),
    /// Holds when the referenced value is truthy.
    Truthy(R),
    /// Holds when the referenced value compares to `operand` as `op` says.
    Compare {
        /// What is tested.
        subject: R,
        /// How.
        op: Op,
        /// Against what: a literal, or references (`"gt": "$ref:input.threshold"`).
        operand: Template<R>,
    },
    /// Holds when every one holds (and when there are none).
    All(Vec<Condition<R>>),
    /// Holds when at least one holds.
    Any(Vec<Condition<R>>),
    /// Holds when the inner one does not.
    Not(Box<Condition<R>>),
}

/// A comparison operator.
#[derive(Debug, Clone)]
pub enum Op {
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
    /// The subject is an element of the operand (an array), or a substring of it.
    In,
    /// The operand is an element of the subject (an array), a substring of it, or one of
    /// its keys.
    Contains,
    /// The subject is a string that the operand, a regular expression, matches.
    Matches(regex::Regex),
    /// The subject is present and not null (operand `true`), or absent or null (`false`).
    Exists,
}

impl Op {
    /// The operator as written.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Eq => "eq",
            Op::Ne => "ne",
            Op::Gt => "gt",
            Op::Gte => "gte",
            Op::Lt => "lt",
            Op::Lte => "lte",
            Op::In => "in",
            Op::Contains => "contains",
            Op::Matches(_) => "matches",
            Op::Exists => "exists",
        }
    }
}

impl PartialEq for Op {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Op::Matches(a), Op::Matches(b)) => a.as_str() == b.as_str(),
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

/// A condition that could not be parsed: where (below the condition) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionProblem {
    /// Location below `when`, such as `.all[1]`.
    pub at: String,
    /// What is wrong.
    pub message: String,
}

const SHAPE: &str = "a condition is a reference such as \"$ref:check.ok\", {\"$ref\": \"cpu.current\", \"gt\": 80}, {\"all\": [...]}, {\"any\": [...]} or {\"not\": ...}";

impl Condition<RawRef> {
    /// Parses a `when` value, reporting every problem found.
    pub fn parse(value: &Value, problems: &mut Vec<ConditionProblem>) -> Option<Self> {
        parse_at(value, "", 0, problems)
    }
}

fn parse_at(
    value: &Value,
    at: &str,
    depth: usize,
    problems: &mut Vec<ConditionProblem>,
) -> Option<Condition<RawRef>> {
    let fail = |problems: &mut Vec<ConditionProblem>, message: String| {
        problems.push(ConditionProblem {
            at: at.to_owned(),
            message,
        });
        None
    };
    if depth > MAX_DEPTH {
        return fail(
            problems,
            format!("conditions nest at most {MAX_DEPTH} deep"),
        );
    }
    let map = match value {
        Value::Bool(b) => return Some(Condition::Constant(*b)),
        Value::String(_) => return reference(value, problems, at).map(Condition::Truthy),
        Value::Object(map) => map,
        other => {
            let found = super::describe_value(other);
            return fail(problems, format!("{SHAPE}; found {found}"));
        }
    };
    for (key, group) in [("all", true), ("any", false)] {
        if let Some(items) = map.get(key) {
            let Value::Array(items) = items else {
                return fail(problems, format!("\"{key}\" takes an array of conditions"));
            };
            if map.len() > 1 {
                return fail(problems, format!("\"{key}\" stands alone in its object"));
            }
            let parts: Vec<_> = items
                .iter()
                .enumerate()
                .map(|(i, c)| parse_at(c, &format!("{at}.{key}[{i}]"), depth + 1, problems))
                .collect();
            let parts: Vec<_> = parts.into_iter().collect::<Option<_>>()?;
            return Some(if group {
                Condition::All(parts)
            } else {
                Condition::Any(parts)
            });
        }
    }
    if let Some(inner) = map.get("not") {
        if map.len() > 1 {
            return fail(problems, "\"not\" stands alone in its object".into());
        }
        let inner = parse_at(inner, &format!("{at}.not"), depth + 1, problems)?;
        return Some(Condition::Not(Box::new(inner)));
    }
    if !map.contains_key("$ref") {
        return fail(problems, SHAPE.into());
    }
    compare(map, at, problems)
}

/// `{"$ref": REF, OP: VALUE}` (with what else a reference object may hold beside `$ref`:
/// `jsonpath`, a text form, `default`), or `{"$ref": REF}` alone.
fn compare(
    map: &Map<String, Value>,
    at: &str,
    problems: &mut Vec<ConditionProblem>,
) -> Option<Condition<RawRef>> {
    let mut reference_part = Map::new();
    let mut ops = Vec::new();
    for (key, value) in map {
        match key.as_str() {
            key if REF_OBJECT_KEYS.contains(&key) => {
                reference_part.insert(key.to_owned(), value.clone());
            }
            op => ops.push((op, value)),
        }
    }
    let subject = reference(&Value::Object(reference_part), problems, at)?;
    let mut fail = |message: String| {
        problems.push(ConditionProblem {
            at: at.to_owned(),
            message,
        });
        None
    };
    let (op, operand) = match ops.as_slice() {
        [] => return Some(Condition::Truthy(subject)),
        [one] => *one,
        [_, second, ..] => {
            return fail(format!(
                "one operator per comparison; put \"{}\" in another condition inside \"all\"",
                second.0
            ));
        }
    };
    let mut found = Vec::new();
    let template = Template::from_value(operand, &mut found);
    if let Some(problem) = found.into_iter().next() {
        return fail(format!("`{}`: {}", problem.text, problem.message));
    }
    let op = match op {
        "eq" => Op::Eq,
        "ne" => Op::Ne,
        "gt" => Op::Gt,
        "gte" => Op::Gte,
        "lt" => Op::Lt,
        "lte" => Op::Lte,
        "in" => Op::In,
        "contains" => Op::Contains,
        "exists" if operand.is_boolean() => Op::Exists,
        "exists" => return fail("\"exists\" takes true or false".into()),
        "matches" if !matches!(template, Template::Literal(_)) => {
            return fail("\"matches\" takes a pattern written in the plan, not a reference".into());
        }
        "matches" => match pattern(operand) {
            Ok(re) => Op::Matches(re),
            Err(message) => return fail(message),
        },
        unknown => {
            let near = closest(unknown, OPERATORS);
            let did_you_mean = near
                .first()
                .map(|n| format!("; did you mean \"{n}\"?"))
                .unwrap_or_default();
            return fail(format!(
                "unknown condition operator \"{unknown}\"{did_you_mean} (operators: {})",
                OPERATORS.join(", ")
            ));
        }
    };
    Some(Condition::Compare {
        subject,
        op,
        operand: template,
    })
}

fn pattern(operand: &Value) -> Result<regex::Regex, String> {
    let Value::String(text) = operand else {
        return Err("\"matches\" takes a regular expression, as a string".into());
    };
    compile_pattern(text, "matches")
}

/// The one reference a string or `{"$ref": …}` object holds; its syntax problems are
/// reported, and anything that is not a lone reference is `None`.
fn reference(value: &Value, problems: &mut Vec<ConditionProblem>, at: &str) -> Option<RawRef> {
    let mut found = Vec::new();
    let template = Template::from_value(value, &mut found);
    let broken = !found.is_empty();
    problems.extend(found.into_iter().map(|p| ConditionProblem {
        at: format!("{at}{}", p.at),
        message: format!("`{}`: {}", excerpt(&p.text), p.message),
    }));
    match template {
        Template::Ref(r) => Some(r),
        _ if broken => None,
        _ => {
            problems.push(ConditionProblem {
                at: at.to_owned(),
                message: format!("{SHAPE}; found {value}"),
            });
            None
        }
    }
}

impl<R> Condition<R> {
    /// Calls `f` on every reference.
    pub fn visit_refs(&self, f: &mut dyn FnMut(&R)) {
        match self {
            Condition::Constant(_) => {}
            Condition::Truthy(r) => f(r),
            Condition::Compare {
                subject, operand, ..
            } => {
                f(subject);
                operand.visit_refs(&mut |r, _| f(r));
            }
            Condition::All(parts) | Condition::Any(parts) => {
                parts.iter().for_each(|p| p.visit_refs(f));
            }
            Condition::Not(inner) => inner.visit_refs(f),
        }
    }

    /// Rebuilds the condition with every reference mapped by `f`; `None` if `f` refused
    /// any (every reference is still visited, so all problems get reported).
    pub fn map_refs<S>(&self, f: &mut dyn FnMut(&R) -> Option<S>) -> Option<Condition<S>> {
        Some(match self {
            Condition::Constant(b) => Condition::Constant(*b),
            Condition::Truthy(r) => Condition::Truthy(f(r)?),
            Condition::Compare {
                subject,
                op,
                operand,
            } => {
                let subject = f(subject);
                let operand = operand.map_refs(&mut |r, _| f(r));
                Condition::Compare {
                    subject: subject?,
                    op: op.clone(),
                    operand: operand?,
                }
            }
            Condition::All(parts) | Condition::Any(parts) => {
                let mapped: Vec<Option<Condition<S>>> =
                    parts.iter().map(|p| p.map_refs(f)).collect();
                let mapped = mapped.into_iter().collect::<Option<Vec<_>>>()?;
                if matches!(self, Condition::All(_)) {
                    Condition::All(mapped)
                } else {
                    Condition::Any(mapped)
                }
            }
            Condition::Not(inner) => Condition::Not(Box::new(inner.map_refs(f)?)),
        })
    }
}

impl std::fmt::Display for Condition<Ref> {
    /// The condition in one line, its references as written: `cpu.current gt 80`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |parts: &[Condition<Ref>]| {
            parts
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Condition::Constant(b) => write!(f, "{b}"),
            Condition::Truthy(r) => write!(f, "{r}"),
            Condition::Compare {
                subject,
                op,
                operand,
            } => match operand {
                Template::Literal(value) => write!(f, "{subject} {} {value}", op.name()),
                Template::Ref(r) => write!(f, "{subject} {} {r}", op.name()),
                _ => write!(f, "{subject} {} (a value with references)", op.name()),
            },
            Condition::All(parts) => write!(f, "all({})", list(parts)),
            Condition::Any(parts) => write!(f, "any({})", list(parts)),
            Condition::Not(inner) => write!(f, "not({inner})"),
        }
    }
}

impl Condition<Ref> {
    /// Decides the condition: `lookup` returns what a source holds. An error says why it
    /// cannot be decided: a reference found nothing (only `exists` reads a missing path,
    /// as absent), or two values cannot be compared.
    pub fn holds<'v>(
        &self,
        lookup: &dyn Fn(&RefSource) -> Option<&'v Value>,
    ) -> Result<bool, String> {
        self.decide(&Reader::new(lookup))
    }

    /// [`Self::holds`], reading with `reader`.
    pub(super) fn decide(&self, reader: &Reader<'_, '_>) -> Result<bool, String> {
        let read = |r: &Ref| {
            reader
                .read(r, "when")
                .map_err(|missing| missing.to_string())
        };
        Ok(match self {
            Condition::Constant(b) => *b,
            Condition::Truthy(r) => truthy(&read(r)?),
            Condition::Compare {
                subject,
                op,
                operand,
            } => {
                let value = match op {
                    // `exists` asks whether the path finds anything: a missing one is absent.
                    Op::Exists => reader.read(subject, "when").unwrap_or(Value::Null),
                    _ => read(subject)?,
                };
                let operand = reader
                    .template(operand, "when")
                    .map_err(|missing| missing.to_string())?;
                compare_values(&value, op, &operand)
                    .map_err(|why| format!("`{}`: {why}", subject.text))?
            }
            Condition::All(parts) => {
                for part in parts {
                    if !part.decide(reader)? {
                        return Ok(false);
                    }
                }
                true
            }
            Condition::Any(parts) => {
                for part in parts {
                    if part.decide(reader)? {
                        return Ok(true);
                    }
                }
                false
            }
            Condition::Not(inner) => !inner.decide(reader)?,
        })
    }
}

/// Whether a value counts as true: anything but false, null, 0, "", [] and {}.
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    }
}

fn compare_values(subject: &Value, op: &Op, operand: &Value) -> Result<bool, String> {
    Ok(match op {
        Op::Eq => same(subject, operand),
        Op::Ne => !same(subject, operand),
        Op::Gt | Op::Gte | Op::Lt | Op::Lte => {
            let order = order(subject, operand)?;
            match op {
                Op::Gt => order == Ordering::Greater,
                Op::Gte => order != Ordering::Less,
                Op::Lt => order == Ordering::Less,
                _ => order != Ordering::Greater,
            }
        }
        Op::In => contains(operand, subject)?,
        Op::Contains => contains(subject, operand)?,
        Op::Matches(re) => match subject {
            Value::String(text) => re.is_match(text),
            Value::Null => false,
            other => re.is_match(&other.to_string()),
        },
        Op::Exists => subject.is_null() != operand.as_bool().unwrap_or(true),
    })
}

/// JSON equality, with numbers compared by value (`1` equals `1.0`) and a number equal
/// to a string that spells it (tools often answer numbers as text).
fn same(a: &Value, b: &Value) -> bool {
    match (number(a), number(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// A number, or a string that spells one.
fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
        _ => None,
    }
}

fn order(a: &Value, b: &Value) -> Result<Ordering, String> {
    if let (Some(x), Some(y)) = (number(a), number(b)) {
        return x.partial_cmp(&y).ok_or_else(|| "not comparable".to_owned());
    }
    match (a, b) {
        (Value::String(x), Value::String(y)) => Ok(x.cmp(y)),
        _ => Err(format!(
            "cannot order {} against {}",
            super::describe_value(a),
            super::describe_value(b)
        )),
    }
}

/// Whether `whole` holds `part`: an element of an array, a substring of a string, a key
/// of an object.
fn contains(whole: &Value, part: &Value) -> Result<bool, String> {
    match (whole, part) {
        (Value::Array(items), _) => Ok(items.iter().any(|item| same(item, part))),
        (Value::String(text), Value::String(piece)) => Ok(text.contains(piece.as_str())),
        (Value::Object(map), Value::String(key)) => Ok(map.contains_key(key)),
        (Value::Null, _) => Ok(false),
        _ => Err(format!(
            "{} cannot contain {}",
            super::describe_value(whole),
            super::describe_value(part)
        )),
    }
}

#[cfg(test)]
mod tests;
