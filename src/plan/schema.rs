//! Checks a step's literal arguments against the tool's `inputSchema` before anything runs.
//!
//! Why hand-written rather than a JSON Schema crate: the arguments are a template, not
//! a value, so every node that holds a reference must be skipped (its value is only
//! known at run time) and a spliced string is known to be a string but not which one.
//! Crates validate whole values and would need placeholder values plus filtering of
//! their errors by location; their messages are also written for people reading a
//! schema, not for a model fixing a plan. The candidates were heavy for what this
//! needs: `jsonschema` (even without default features) brings fancy-regex, fraction,
//! num-*, referencing and more; `boon` brings url/idna, fluent-uri, ahash and
//! regex-syntax. The downstream server validates fully anyway, so this checker covers
//! what catches most model mistakes: `type` (with `integer`), `required`, `properties`,
//! `additionalProperties` (false or a schema), `enum`, `const`, `items`, local `$ref`,
//! `allOf`, `anyOf` and `oneOf`. Other keywords are ignored (accepted). The work per step is
//! bounded by [`MAX_SCHEMA_NODES`].

use std::cell::Cell;

use serde_json::{Map, Value};

use super::issue::{IssueKind, PlanIssue, describe_value};
use super::names::closest;
use super::refs::PathSeg;
use super::template::{Piece, Template};

/// How deep schemas (through `$ref`) and arguments are followed.
const MAX_DEPTH: usize = 48;
/// Schema nodes checked per step at most. A schema that refers to itself several times
/// at each level (`{"allOf": [{"$ref": "#"}, {"$ref": "#"}]}`) grows exponentially with
/// depth; past this budget the rest is left to the downstream, which validates anyway.
/// Real tool schemas need a few hundred.
pub const MAX_SCHEMA_NODES: usize = 10_000;

/// Checks `args` against `schema`, returning one issue per problem. `implied` names
/// arguments that the executor adds at run time (the `chained` pipe), so they count as
/// present. `at` is the location of the arguments, e.g. `steps[2].args`.
pub fn check_args<R>(
    schema: &Value,
    args: &Template<R>,
    at: &str,
    implied: &[String],
) -> Vec<PlanIssue> {
    check_within(schema, args, at, implied, MAX_SCHEMA_NODES).0
}

/// The arguments of `args` that `schema` does not list where it lets others through (no
/// `additionalProperties: false`, which [`check_args`] reports as issues): one warning
/// each, with the arguments it lists and the closest. Only the top level, and only where
/// the schema says what its arguments are: `properties` (with those of `allOf` and local
/// `$ref`s), no `patternProperties`, no `additionalProperties` schema, no `anyOf`/`oneOf`.
pub fn unlisted_arguments<R>(
    schema: &Value,
    args: &Template<R>,
    at: &str,
    tool: &str,
    implied: &[String],
) -> Vec<PlanIssue> {
    let Some(allowed) = listed_arguments(schema, schema, 0).filter(|a| !a.is_empty()) else {
        return Vec::new();
    };
    let keys: Vec<&str> = match args {
        Template::Object(fields) => fields.iter().map(|(k, _)| k.as_str()).collect(),
        Template::Literal(Value::Object(map)) => map.keys().map(String::as_str).collect(),
        _ => Vec::new(),
    };
    keys.into_iter()
        .filter(|key| !allowed.iter().any(|a| a == key) && !implied.iter().any(|i| i == key))
        .map(|key| {
            let kind = IssueKind::UnlistedArgument {
                name: key.to_owned(),
                tool: tool.to_owned(),
                closest: closest(key, allowed.iter().map(String::as_str)),
                allowed: allowed.clone(),
            };
            PlanIssue::new(format!("{at}{}", PathSeg::Key(key.to_owned())), kind)
        })
        .collect()
}

/// The arguments an open object schema lists, in its order; `None` when it is closed (its
/// own check reports extras) or may take arguments it does not name.
fn listed_arguments(root: &Value, schema: &Value, depth: usize) -> Option<Vec<String>> {
    let schema = schema.as_object()?;
    let open_ended = ["patternProperties", "anyOf", "oneOf"]
        .iter()
        .any(|k| schema.contains_key(*k));
    let closed_or_mapped = matches!(
        schema.get("additionalProperties"),
        Some(Value::Bool(false) | Value::Object(_))
    );
    if depth > MAX_DEPTH || open_ended || closed_or_mapped {
        return None;
    }
    let mut names: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    let target = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| root.pointer(r.strip_prefix('#')?));
    let all = schema.get("allOf").and_then(Value::as_array);
    for part in target.into_iter().chain(all.into_iter().flatten()) {
        for name in listed_arguments(root, part, depth + 1)? {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    Some(names)
}

/// [`check_args`] within a budget of schema nodes; also returns how many were checked.
pub(crate) fn check_within<R>(
    schema: &Value,
    args: &Template<R>,
    at: &str,
    implied: &[String],
    budget: usize,
) -> (Vec<PlanIssue>, usize) {
    let left = Cell::new(budget);
    let mut checker = Checker {
        root: schema,
        issues: Vec::new(),
        implied,
        left: &left,
    };
    checker.check(schema, node_of(args), at, 0);
    (checker.issues, budget - left.get())
}

/// What is known about an argument before run time.
enum Node<'a, R> {
    /// Only known at run time (a whole-value reference).
    Unknown,
    /// A string with references spliced in: a string, content unknown.
    Spliced,
    /// A literal value.
    Value(&'a Value),
    /// An array with references inside.
    Array(&'a [Template<R>]),
    /// An object with references inside.
    Object(&'a [(String, Template<R>)]),
}

fn node_of<R>(template: &Template<R>) -> Node<'_, R> {
    match template {
        Template::Literal(value) => Node::Value(value),
        Template::Ref(_) => Node::Unknown,
        Template::Text(pieces) if pieces.iter().all(|p| matches!(p, Piece::Text(_))) => {
            Node::Spliced
        }
        Template::Text(_) => Node::Spliced,
        Template::Array(items) => Node::Array(items),
        Template::Object(fields) => Node::Object(fields),
    }
}

impl<R> Node<'_, R> {
    fn type_name(&self) -> Option<&'static str> {
        Some(match self {
            Node::Unknown => return None,
            Node::Spliced => "string",
            Node::Array(_) => "array",
            Node::Object(_) => "object",
            Node::Value(value) => match value {
                Value::Null => "null",
                Value::Bool(_) => "boolean",
                Value::Number(_) => "number",
                Value::String(_) => "string",
                Value::Array(_) => "array",
                Value::Object(_) => "object",
            },
        })
    }

    fn is_integer(&self) -> bool {
        match self {
            Node::Value(Value::Number(n)) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        }
    }

    fn describe(&self) -> String {
        match self {
            Node::Value(value) => describe_value(value),
            Node::Spliced => "a string".into(),
            Node::Array(items) if items.len() == 1 => "an array of 1 item".into(),
            Node::Array(items) => format!("an array of {} items", items.len()),
            Node::Object(_) => "an object".into(),
            Node::Unknown => "a reference".into(),
        }
    }
}

struct Checker<'s, 'i> {
    root: &'s Value,
    issues: Vec<PlanIssue>,
    implied: &'i [String],
    /// Schema nodes this step may still check, shared with the checkers of alternatives.
    left: &'i Cell<usize>,
}

impl<'s> Checker<'s, '_> {
    fn push(&mut self, at: &str, kind: IssueKind) {
        self.issues.push(PlanIssue::new(at, kind));
    }

    /// Resolves a local `$ref` (`#/$defs/x`, `#/definitions/x`, `#`).
    fn pointer(&self, reference: &str) -> Option<&'s Value> {
        let pointer = reference.strip_prefix('#')?;
        self.root.pointer(pointer)
    }

    fn check<R>(&mut self, schema: &'s Value, node: Node<'_, R>, at: &str, depth: usize) {
        let Value::Object(schema) = schema else {
            return;
        };
        if depth > MAX_DEPTH || matches!(node, Node::Unknown) || self.left.get() == 0 {
            return;
        }
        self.left.set(self.left.get() - 1);
        if let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.pointer(r))
        {
            self.check(target, reborrow(&node), at, depth + 1);
        }
        if let Some(Value::Array(all)) = schema.get("allOf") {
            for branch in all {
                self.check(branch, reborrow(&node), at, depth + 1);
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = schema.get(key) {
                self.alternatives(branches, &node, at, depth);
            }
        }
        if !self.type_ok(schema, &node, at) {
            return;
        }
        if let Node::Value(value) = node {
            self.allowed_values(schema, value, at);
        }
        match node {
            Node::Object(fields) => {
                let fields: Vec<(&str, Node<'_, R>)> = fields
                    .iter()
                    .map(|(k, t)| (k.as_str(), node_of(t)))
                    .collect();
                self.object(schema, fields, at, depth);
            }
            Node::Value(Value::Object(map)) => {
                let fields: Vec<(&str, Node<'_, R>)> = map
                    .iter()
                    .map(|(k, v)| (k.as_str(), Node::Value(v)))
                    .collect();
                self.object(schema, fields, at, depth);
            }
            Node::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.items(schema, node_of(item), &format!("{at}[{i}]"), depth);
                }
            }
            Node::Value(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    self.items(schema, Node::<R>::Value(item), &format!("{at}[{i}]"), depth);
                }
            }
            _ => {}
        }
    }

    fn alternatives<R>(
        &mut self,
        branches: &'s [Value],
        node: &Node<'_, R>,
        at: &str,
        depth: usize,
    ) {
        let mut failures = Vec::new();
        for branch in branches {
            let mut inner = Checker {
                root: self.root,
                issues: Vec::new(),
                implied: &[],
                left: self.left,
            };
            inner.check(branch, reborrow(node), at, depth + 1);
            if inner.issues.is_empty() {
                return;
            }
            failures.push(inner.issues);
        }
        // When one branch has the right type, its own problems say most.
        let typed: Vec<Vec<PlanIssue>> = failures
            .into_iter()
            .filter(|issues| {
                !issues
                    .iter()
                    .any(|i| i.location == at && matches!(i.kind, IssueKind::WrongType { .. }))
            })
            .collect();
        match <[_; 1]>::try_from(typed) {
            Ok([issues]) => self.issues.extend(issues),
            Err(_) => {
                let found = match node {
                    Node::Value(value) => serde_json::to_string(value).unwrap_or_default(),
                    other => other.describe(),
                };
                self.push(at, IssueKind::NoAlternative { found });
            }
        }
    }

    /// Checks `type`; false when it does not match (nothing below is worth checking).
    fn type_ok<R>(&mut self, schema: &Map<String, Value>, node: &Node<'_, R>, at: &str) -> bool {
        let wanted: Vec<&str> = match schema.get("type") {
            Some(Value::String(one)) => vec![one.as_str()],
            Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
            _ => return true,
        };
        let Some(actual) = node.type_name() else {
            return true;
        };
        let ok = wanted
            .iter()
            .any(|w| *w == actual || (*w == "integer" && node.is_integer()));
        if !ok {
            let expected = match wanted.as_slice() {
                [one] => article(one),
                many => format!("one of {}", many.join(", ")),
            };
            self.push(
                at,
                IssueKind::WrongType {
                    expected,
                    found: node.describe(),
                },
            );
        }
        ok
    }

    fn allowed_values(&mut self, schema: &Map<String, Value>, value: &Value, at: &str) {
        let allowed: Vec<&Value> = match (schema.get("enum"), schema.get("const")) {
            (Some(Value::Array(options)), _) => options.iter().collect(),
            (_, Some(constant)) => vec![constant],
            _ => return,
        };
        if !allowed.contains(&value) {
            let show = |v: &Value| serde_json::to_string(v).unwrap_or_default();
            let kind = IssueKind::NotAllowed {
                found: show(value),
                allowed: allowed.into_iter().map(show).collect(),
            };
            self.push(at, kind);
        }
    }

    fn object<R>(
        &mut self,
        schema: &'s Map<String, Value>,
        mut fields: Vec<(&str, Node<'_, R>)>,
        at: &str,
        depth: usize,
    ) {
        // Sorted, so messages do not depend on serde_json's map order.
        fields.sort_by(|a, b| a.0.cmp(b.0));
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(required)) = schema.get("required") {
            let top = depth == 0;
            for name in required.iter().filter_map(Value::as_str) {
                let present = fields.iter().any(|(k, _)| *k == name)
                    || (top && self.implied.iter().any(|i| i == name));
                if !present {
                    self.push(
                        at,
                        IssueKind::MissingArgument {
                            name: name.to_owned(),
                        },
                    );
                }
            }
        }
        let extra = schema.get("additionalProperties");
        let open = schema.contains_key("patternProperties");
        for (key, node) in fields {
            // Every field costs, so an object of a million keys cannot outrun the budget.
            match self.left.get() {
                0 => return,
                left => self.left.set(left - 1),
            }
            let child = format!("{at}{}", PathSeg::Key(key.to_owned()));
            match (properties.and_then(|p| p.get(key)), extra) {
                (Some(sub), _) => self.check(sub, node, &child, depth + 1),
                (None, Some(Value::Bool(false))) if !open => {
                    let mut allowed: Vec<String> = properties
                        .map(|p| p.keys().cloned().collect())
                        .unwrap_or_default();
                    allowed.sort();
                    let near = closest(key, allowed.iter().map(String::as_str));
                    self.push(
                        &child,
                        IssueKind::UnknownArgument {
                            name: key.to_owned(),
                            closest: near,
                            allowed,
                        },
                    );
                }
                (None, Some(sub @ Value::Object(_))) => self.check(sub, node, &child, depth + 1),
                _ => {}
            }
        }
    }

    fn items<R>(
        &mut self,
        schema: &'s Map<String, Value>,
        node: Node<'_, R>,
        at: &str,
        depth: usize,
    ) {
        if let Some(items @ Value::Object(_)) = schema.get("items") {
            self.check(items, node, at, depth + 1);
        }
    }
}

fn reborrow<'a, R>(node: &Node<'a, R>) -> Node<'a, R> {
    match node {
        Node::Unknown => Node::Unknown,
        Node::Spliced => Node::Spliced,
        Node::Value(v) => Node::Value(v),
        Node::Array(items) => Node::Array(items),
        Node::Object(fields) => Node::Object(fields),
    }
}

fn article(type_name: &str) -> String {
    match type_name {
        "integer" | "array" | "object" => format!("an {type_name}"),
        "null" => "null".into(),
        other => format!("a {other}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{MAX_SCHEMA_NODES, check_within};
    use crate::plan::template::Template;

    /// A schema whose every level refers to the root `branches` times.
    fn bomb(branches: usize) -> serde_json::Value {
        json!({"type": "object", "allOf": vec![json!({"$ref": "#"}); branches]})
    }

    #[test]
    fn a_self_referencing_schema_is_checked_within_the_budget() {
        let args: Template<()> = Template::Literal(json!({"a": 1, "b": [1, 2, {"c": 3}]}));
        for branches in [2, 3, 10] {
            let (issues, used) =
                check_within(&bomb(branches), &args, "args", &[], MAX_SCHEMA_NODES);
            assert!(issues.is_empty(), "{issues:?}");
            assert!(
                used <= MAX_SCHEMA_NODES,
                "{branches} branches: {used} nodes"
            );
        }
        // A real schema stays far below it, and still finds problems.
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let (issues, used) = check_within(&schema, &args, "args", &[], MAX_SCHEMA_NODES);
        assert_eq!((issues.len(), used), (1, 3), "the root and its two fields");
    }
}
