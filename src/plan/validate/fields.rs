//! Paths a step's tool cannot return: a reference that reads a step whose tool has an
//! `outputSchema` is checked against it before anything runs, so `${t.date_time}` on a
//! tool whose output has `datetime` is a validation issue with "did you mean", not a
//! `null` at run time.
//!
//! Conservative: a path is reported only where the schema says what is there. An object
//! schema that lists `properties` reports a name it does not list when it forbids others
//! (`additionalProperties: false`), or, when it lets others through, only a name so close
//! to a listed one that it is surely a typo of it. Checking stops (the path may be right)
//! at a property whose schema is a string (its text may hold JSON, read at run time), at
//! anything the schema does not describe, and past a small budget of schema nodes.
//! `anyOf`/`oneOf` allow a name that any branch allows; `allOf` adds its branches'
//! properties; local `$ref`s are followed; `items` describes `[N]`.

use serde_json::{Map, Value};

use super::Validator;
use super::bind::Read;
use crate::plan::issue::{IssueKind, MissingField};
use crate::plan::names::closest;
use crate::plan::refs::{PathSeg, format_path};
use crate::plan::template::{Ref, RefSource, Template};
use crate::plan::tools::ToolSpec;

/// Schema nodes one reference's path may visit; real output schemas need a handful.
const MAX_NODES: usize = 2_000;
/// How deep `$ref`s and alternatives are followed.
const MAX_DEPTH: usize = 48;

/// What the schema says about a path.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// It may be there (or the schema does not say).
    Possible,
    /// The value there cannot have fields at all (a number, a boolean, null): no field
    /// list to offer, so nothing is reported for it.
    Scalar,
    /// The segment at `pos` names a field the object there cannot have; `fields` are
    /// those it lists.
    Missing { pos: usize, fields: Vec<String> },
}

impl Validator<'_> {
    /// Reports each reference of step `i` whose path its source step's tool cannot
    /// return. `specs` are the steps' tools, in plan order.
    pub(super) fn fields(&mut self, i: usize, read: &Read, specs: &[Option<&ToolSpec>]) {
        let field = match self.plan.steps[i].value {
            Some(_) => "value",
            None => "args",
        };
        let mut found = Vec::new();
        let mut check = |r: &Ref, at: String| found.push((r.clone(), at));
        visit(&read.args, &format!("steps[{i}].{field}"), &mut check);
        if let Some(when) = &read.when {
            when.visit_refs(&mut |r| check(r, format!("steps[{i}].when")));
        }
        if let Some(foreach) = &read.foreach {
            visit(&foreach.items, &format!("steps[{i}].foreach"), &mut check);
        }
        for (r, at) in found {
            self.field(&r, &at, specs);
        }
    }

    fn field(&mut self, r: &Ref, at: &str, specs: &[Option<&ToolSpec>]) {
        let RefSource::Output(id) = &r.source else {
            return;
        };
        let Some(&target) = self.first_index.get(id.as_str()) else {
            return;
        };
        let step = &self.plan.steps[target];
        let (Some(spec), None) = (specs[target], &step.value) else {
            return;
        };
        let Some(schema) = &spec.output_schema else {
            return;
        };
        // A loop's output is the array of its items' outputs.
        let path = &r.path[..];
        let start = match (&step.foreach, path.first()) {
            (None, _) => 0,
            (Some(_), Some(PathSeg::Index(_))) => 1,
            (Some(_), _) => return,
        };
        let mut walk = Walk {
            root: schema,
            left: MAX_NODES,
        };
        let Verdict::Missing { pos, fields } = walk.walk(schema, path, start, 0) else {
            return;
        };
        let Some(PathSeg::Key(name)) = path.get(pos) else {
            return;
        };
        let kind = IssueKind::NoSuchField(Box::new(MissingField {
            step: id.to_string(),
            tool: spec.exported.clone(),
            field: name.clone(),
            at: format_path(&path[..pos]).trim_start_matches('.').to_owned(),
            closest: closest(name, fields.iter().map(String::as_str)),
            fields,
        }));
        self.issue(at, kind);
    }
}

/// Calls `f` on every reference in `template` with where it is.
fn visit(template: &Template, at: &str, f: &mut dyn FnMut(&Ref, String)) {
    template.visit_refs(&mut |r: &Ref, below: &str| f(r, format!("{at}{below}")));
}

/// One path's walk through a schema, within a budget of nodes.
struct Walk<'s> {
    root: &'s Value,
    left: usize,
}

impl<'s> Walk<'s> {
    fn walk(&mut self, schema: &'s Value, path: &[PathSeg], pos: usize, depth: usize) -> Verdict {
        let (Some(seg), Value::Object(node)) = (path.get(pos), schema) else {
            return Verdict::Possible;
        };
        if depth > MAX_DEPTH || self.left == 0 {
            return Verdict::Possible;
        }
        self.left -= 1;
        if let Some(target) = self.target(node) {
            return self.walk(target, path, pos, depth + 1);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = node.get(key) {
                return self.alternatives(branches, path, pos, depth);
            }
        }
        let types: Vec<&str> = match node.get("type") {
            Some(Value::String(one)) => vec![one.as_str()],
            Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let scalar = |t: &&str| matches!(*t, "null" | "boolean" | "number" | "integer");
        if !types.is_empty() && types.iter().all(scalar) {
            return Verdict::Scalar;
        }
        match seg {
            PathSeg::Index(_) | PathSeg::ItemIndex => match node.get("items") {
                Some(items @ Value::Object(_)) => self.walk(items, path, pos + 1, depth + 1),
                _ => Verdict::Possible,
            },
            PathSeg::Key(name) => self.key(node, name, path, pos, depth),
        }
    }

    /// The schema a local `$ref` points at.
    fn target(&self, node: &Map<String, Value>) -> Option<&'s Value> {
        let reference = node.get("$ref")?.as_str()?;
        self.root.pointer(reference.strip_prefix('#')?)
    }

    fn key(
        &mut self,
        node: &'s Map<String, Value>,
        name: &str,
        path: &[PathSeg],
        pos: usize,
        depth: usize,
    ) -> Verdict {
        let mut fields: Vec<(&'s String, &'s Value)> = Vec::new();
        let parts = node.get("allOf").and_then(Value::as_array);
        let own = std::iter::once(node);
        let branches = parts
            .into_iter()
            .flatten()
            .filter_map(|b| self.target_or(b).as_object());
        for part in own.chain(branches) {
            if let Some(Value::Object(properties)) = part.get("properties") {
                for (key, sub) in properties {
                    if !fields.iter().any(|(k, _)| *k == key) {
                        fields.push((key, sub));
                    }
                }
            }
        }
        if let Some((_, sub)) = fields.iter().find(|(k, _)| *k == name) {
            return self.walk(sub, path, pos + 1, depth + 1);
        }
        if fields.is_empty() || node.contains_key("patternProperties") {
            return Verdict::Possible;
        }
        let names: Vec<String> = fields.iter().map(|(k, _)| (*k).clone()).collect();
        let missing = Verdict::Missing {
            pos,
            fields: names.clone(),
        };
        match node.get("additionalProperties") {
            Some(Value::Bool(false)) => missing,
            Some(extra @ Value::Object(_)) => self.walk(extra, path, pos + 1, depth + 1),
            // Others may be there: only a near miss of a listed name is a typo.
            _ if !closest(name, names.iter().map(String::as_str)).is_empty() => missing,
            _ => Verdict::Possible,
        }
    }

    /// `value`, or what its `$ref` points at.
    fn target_or(&self, value: &'s Value) -> &'s Value {
        value
            .as_object()
            .and_then(|node| self.target(node))
            .unwrap_or(value)
    }

    /// A name any branch allows is possible; branches that cannot hold fields say
    /// nothing; when every other branch misses the same segment, their fields together.
    fn alternatives(
        &mut self,
        branches: &'s [Value],
        path: &[PathSeg],
        pos: usize,
        depth: usize,
    ) -> Verdict {
        let mut missing: Option<(usize, Vec<String>)> = None;
        for branch in branches {
            match self.walk(branch, path, pos, depth + 1) {
                Verdict::Possible => return Verdict::Possible,
                Verdict::Scalar => {}
                Verdict::Missing { pos, fields } => match &mut missing {
                    None => missing = Some((pos, fields)),
                    Some((at, all)) if *at == pos => {
                        for field in fields {
                            if !all.contains(&field) {
                                all.push(field);
                            }
                        }
                    }
                    // They disagree on where the path goes wrong: say nothing.
                    Some(_) => return Verdict::Possible,
                },
            }
        }
        match missing {
            Some((pos, fields)) => Verdict::Missing { pos, fields },
            None => Verdict::Scalar,
        }
    }
}
