//! Resolution: filling a template's references from finished steps at run time.

use serde_json::Value;

use super::refs::{self, PathSeg};
use super::template::{Piece, Ref, RefSource, Template};

/// A problem met while resolving a template at run time; the value became `null`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ResolveWarning {
    /// Where in the arguments (`args.name`).
    pub location: String,
    /// The reference as written.
    pub reference: String,
    /// What was missing.
    pub message: String,
}

impl std::fmt::Display for ResolveWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} {}", self.location, self.reference, self.message)
    }
}

impl Template<Ref> {
    /// Resolves every reference with `lookup` (which returns the value a source holds,
    /// or `None` when it has none). A missing value or path yields `null` and a warning.
    pub fn resolve<'v>(
        &self,
        lookup: &dyn Fn(&RefSource) -> Option<&'v Value>,
        warnings: &mut Vec<ResolveWarning>,
    ) -> Value {
        self.resolve_at("args", lookup, warnings)
    }

    /// [`Self::resolve`], with `at` (a field of the plan) for where warnings are.
    pub(super) fn resolve_at<'v>(
        &self,
        at: &str,
        lookup: &dyn Fn(&RefSource) -> Option<&'v Value>,
        warnings: &mut Vec<ResolveWarning>,
    ) -> Value {
        match self {
            Template::Literal(value) => value.clone(),
            Template::Ref(r) => read(r, at, lookup, warnings),
            Template::Text(pieces) => {
                let mut out = String::new();
                for piece in pieces {
                    match piece {
                        Piece::Text(text) => out.push_str(text),
                        Piece::Ref(r) => match read(r, at, lookup, warnings) {
                            Value::String(text) => out.push_str(&text),
                            other => out.push_str(&compact(&other)),
                        },
                    }
                }
                Value::String(out)
            }
            Template::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| item.resolve_at(&format!("{at}[{i}]"), lookup, warnings))
                    .collect(),
            ),
            Template::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(key, item)| {
                        let child = format!("{at}{}", PathSeg::Key(key.clone()));
                        (key.clone(), item.resolve_at(&child, lookup, warnings))
                    })
                    .collect(),
            ),
        }
    }
}

/// Reads one reference, turning every miss into `null` plus a warning at `at`.
pub(super) fn read<'v>(
    r: &Ref,
    at: &str,
    lookup: &dyn Fn(&RefSource) -> Option<&'v Value>,
    warnings: &mut Vec<ResolveWarning>,
) -> Value {
    let mut warn = |message: String| {
        warnings.push(ResolveWarning {
            location: at.to_owned(),
            reference: r.text.clone(),
            message,
        });
        Value::Null
    };
    let Some(base) = lookup(&r.source) else {
        return match &r.source {
            RefSource::Output(id) => warn(format!("read step '{id}', which has no output")),
            RefSource::Error(id) => {
                warn(format!("read the error of step '{id}', which did not fail"))
            }
            RefSource::Input => warn("read the plan's inputs, which were not given".into()),
            RefSource::Item | RefSource::Index => {
                warn("read the current item outside a foreach".into())
            }
        };
    };
    let Some(found) = refs::select(base, &r.path) else {
        return warn(format!(
            "found nothing at `{}`; used null",
            refs::format_path(&r.path)
        ));
    };
    match &r.query {
        None => found.clone(),
        Some(query) => match query.eval(found) {
            Ok(Some(value)) => value,
            Ok(None) => warn(format!(
                "JSONPath `{}` matched nothing; used null",
                query.as_str()
            )),
            Err(too_much) => warn(format!("{too_much}; used null")),
        },
    }
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
