//! Other systems' template syntax in a plan's text: `{{t.x}}` (Handlebars, Jinja),
//! `$t.x` (shells, n8n) and `{t.x}` (Python's format) are plain text to planmux, so a
//! model that writes them gets the braces back instead of the value. Each is reported
//! with the form that works, but only when its head is a step id of the plan (or
//! `steps[N]`, or `input`): `"costs $5"`, `"$HOME"`, `"{a}"` without a step `a`, and JSON
//! inside a string pass untouched.

use serde_json::Value;

use super::super::condition::Condition;
use super::super::issue::{IssueKind, PlanIssue};
use super::super::parse::Step;
use super::super::refs::{PathSeg, RawRef};
use super::super::template::{Piece, Template};

/// Every foreign reference in the text step `i` holds (its arguments or value, its
/// condition's operands, its items), naming a step of `ids`.
pub(super) fn foreign_templates(i: usize, step: &Step, ids: &[&str]) -> Vec<PlanIssue> {
    let mut found = Vec::new();
    let mut scan = |text: &str, at: &str| {
        for (written, reference) in scan_text(text, ids) {
            let kind = IssueKind::ForeignTemplate { written, reference };
            found.push(PlanIssue::new(at, kind));
        }
    };
    let (template, field) = match &step.value {
        Some(value) => (value, "value"),
        None => (&step.args, "args"),
    };
    visit_text(template, &format!("steps[{i}].{field}"), &mut scan);
    if let Some(items) = &step.foreach {
        visit_text(items, &format!("steps[{i}].foreach"), &mut scan);
    }
    if let Some(when) = &step.when {
        visit_condition(when, &format!("steps[{i}].when"), &mut scan);
    }
    found
}

/// Calls `f` on every piece of literal text in `template`, with where it is.
fn visit_text(template: &Template<RawRef>, at: &str, f: &mut dyn FnMut(&str, &str)) {
    match template {
        Template::Literal(value) => visit_value(value, at, f),
        Template::Ref(_) => {}
        Template::Text(pieces) => {
            for piece in pieces {
                if let Piece::Text(text) = piece {
                    f(text, at);
                }
            }
        }
        Template::Array(items) => {
            for (k, item) in items.iter().enumerate() {
                visit_text(item, &format!("{at}[{k}]"), f);
            }
        }
        Template::Object(fields) => {
            for (key, item) in fields {
                visit_text(item, &format!("{at}{}", PathSeg::Key(key.clone())), f);
            }
        }
    }
}

fn visit_value(value: &Value, at: &str, f: &mut dyn FnMut(&str, &str)) {
    match value {
        Value::String(text) => f(text, at),
        Value::Array(items) => {
            for (k, item) in items.iter().enumerate() {
                visit_value(item, &format!("{at}[{k}]"), f);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                visit_value(item, &format!("{at}{}", PathSeg::Key(key.clone())), f);
            }
        }
        _ => {}
    }
}

fn visit_condition(when: &Condition<RawRef>, at: &str, f: &mut dyn FnMut(&str, &str)) {
    match when {
        Condition::Constant(_) | Condition::Truthy(_) => {}
        Condition::Compare { operand, .. } => visit_text(operand, at, f),
        Condition::All(parts) | Condition::Any(parts) => {
            for part in parts {
                visit_condition(part, at, f);
            }
        }
        Condition::Not(inner) => visit_condition(inner, at, f),
    }
}

/// The foreign references in `text` whose head is in `ids` (or is `input` or
/// `steps[N]`): each as written, and what it reads (`t.x`).
pub(super) fn scan_text(text: &str, ids: &[&str]) -> Vec<(String, String)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest = &text[at..];
        let before = at.checked_sub(1).map(|b| bytes[b]);
        let hit = match bytes[at] {
            b'{' if rest.starts_with("{{") => double_braces(rest),
            b'{' if before != Some(b'$') && before != Some(b'{') => single_braces(rest),
            b'$' if before != Some(b'$') => dollar(rest),
            _ => None,
        };
        match hit {
            Some((len, reference)) if names_a_step(&reference, ids) => {
                found.push((rest[..len].to_owned(), reference));
                at += len;
            }
            // Past the whole opener, so `{{x}}` is not read again as `{x}`.
            _ if rest.starts_with("{{") => at += 2,
            _ => at += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    found
}

/// Longest `{{ … }}` looked at: a path with spaces around it, far longer than any
/// step id and path a plan writes.
const MAX_TEMPLATE_BYTES: usize = 256;

/// `{{ X.path }}`: its length and `X.path`.
fn double_braces(text: &str) -> Option<(usize, String)> {
    let inner = &text[2..];
    // A reference is short: the closing braces are looked for only as far as the longest
    // one could reach, so text full of `{{` costs in proportion to its length.
    let mut window = inner.len().min(MAX_TEMPLATE_BYTES);
    while !inner.is_char_boundary(window) {
        window -= 1;
    }
    let close = inner[..window].find("}}")?;
    let reference = inner[..close].trim();
    is_path(reference).then(|| (close + 4, reference.to_owned()))
}

/// `{X.path}` (no spaces): its length and `X.path`.
fn single_braces(text: &str) -> Option<(usize, String)> {
    let inner = &text[1..];
    let len = path_len(inner);
    let reference = &inner[..len];
    (inner[len..].starts_with('}') && is_path(reference)).then(|| (len + 2, reference.to_owned()))
}

/// `$X.path` (a word right after the dollar; not `${`, `$<`, `$ref:` or `$$`): its
/// length and `X.path`, without a sentence's last dot.
fn dollar(text: &str) -> Option<(usize, String)> {
    let inner = &text[1..];
    if inner.starts_with("ref:") {
        return None;
    }
    let reference = inner[..path_len(inner)].trim_end_matches(['.', '-']);
    is_path(reference).then(|| (reference.len() + 1, reference.to_owned()))
}

/// How long the run of path characters at the start of `text` is.
fn path_len(text: &str) -> usize {
    text.find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '[' | ']')))
        .unwrap_or(text.len())
}

/// A word, then `.word` and `[N]` parts.
fn is_path(text: &str) -> bool {
    let starts_with_word = text
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    starts_with_word && path_len(text) == text.len() && !text.contains("..")
}

/// Whether the head of `reference` is a step id of the plan, `input` or `steps[N]`.
fn names_a_step(reference: &str, ids: &[&str]) -> bool {
    let head = reference.split(['.', '[']).next().unwrap_or(reference);
    let indexed = head == "steps" && reference[head.len()..].starts_with('[');
    indexed || head == "input" && reference.len() > head.len() || ids.contains(&head)
}

#[cfg(test)]
mod tests {
    use super::scan_text;

    #[test]
    fn only_heads_that_name_a_step_are_found() {
        let ids = ["t", "list"];
        let cases: &[(&str, &[&str])] = &[
            ("{{t.datetime}}", &["{{t.datetime}}"]),
            ("at {{ t.datetime }} now", &["{{ t.datetime }}"]),
            ("$t.datetime.", &["$t.datetime"]),
            ("{t.datetime} and {list}", &["{t.datetime}", "{list}"]),
            (
                "{{steps[0].x}} $input.city",
                &["{{steps[0].x}}", "$input.city"],
            ),
            ("$list[0].name", &["$list[0].name"]),
            // Text to leave alone.
            ("costs $5", &[]),
            ("$HOME/bin", &[]),
            ("{a} {{b.c}} $d", &[]),
            ("{\"t\": 1}", &[]),
            ("$${t.x} $$t.x $ref:t.x", &[]),
            ("{{}} {} $ { t }", &[]),
            ("$input alone", &[]),
            ("naïve {t.é}", &[]),
        ];
        for (text, want) in cases {
            let got: Vec<String> = scan_text(text, &ids).into_iter().map(|(w, _)| w).collect();
            assert_eq!(got, *want, "{text}");
        }
    }
}
