//! Issues as a model or a person reads them: capped, in reading order, numbered with
//! their hints; and the short description of a JSON value messages quote.

use std::fmt;

use serde_json::Value;

use super::{IssueKind, MAX_ISSUES, PlanIssue};

/// At most [`MAX_ISSUES`] issues, then one that counts the rest.
pub fn cap_issues(mut issues: Vec<PlanIssue>) -> Vec<PlanIssue> {
    if issues.len() > MAX_ISSUES {
        let count = issues.len() - MAX_ISSUES;
        issues.truncate(MAX_ISSUES);
        issues.push(PlanIssue::new("plan", IssueKind::MoreIssues { count }));
    }
    issues
}

/// Puts issues in reading order: plan fields, then each step in turn, then `outputs`.
/// The sort is stable, so one step's issues keep the order they were found in.
pub fn sort_issues(issues: &mut [PlanIssue]) {
    let key = |issue: &PlanIssue| -> (u8, usize) {
        let location = issue.location.as_str();
        if let Some(rest) = location.strip_prefix("steps[") {
            let index = rest
                .split(']')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            (1, index)
        } else if location.starts_with("outputs") {
            (2, 0)
        } else {
            (0, 0)
        }
    };
    issues.sort_by_key(key);
}

/// A short description of a JSON value's type for messages (`a string "abc"`).
pub fn describe_value(value: &Value) -> String {
    let preview = |text: String| -> String {
        if text.chars().count() > 40 {
            format!("{}…", text.chars().take(40).collect::<String>())
        } else {
            text
        }
    };
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("a boolean ({b})"),
        Value::Number(n) => format!("a number ({n})"),
        Value::String(s) => format!(
            "a string ({})",
            preview(Value::String(s.clone()).to_string())
        ),
        Value::Array(items) if items.len() == 1 => "an array of 1 item".into(),
        Value::Array(items) => format!("an array of {} items", items.len()),
        Value::Object(_) => "an object".into(),
    }
}

/// The text of the `isError: true` tool result for an invalid plan: every issue,
/// numbered, each with its location and hint.
pub fn render_issues(issues: &[PlanIssue]) -> String {
    let total: usize = issues
        .iter()
        .map(|i| match i.kind {
            IssueKind::MoreIssues { count } => count,
            _ => 1,
        })
        .sum();
    let mut out = match total {
        0 => return "The plan has no problems.".into(),
        1 => "The plan was not run: 1 problem. Fix it and send the plan again.\n".to_owned(),
        n => format!("The plan was not run: {n} problems. Fix them all and send the plan again.\n"),
    };
    for (i, issue) in issues.iter().enumerate() {
        if let IssueKind::MoreIssues { .. } = issue.kind {
            out.push_str(&format!("… {}\n", issue.message()));
            continue;
        }
        out.push_str(&format!("{}. {issue}\n", i + 1));
        if let Some(hint) = issue.hint() {
            out.push_str(&format!("   hint: {hint}\n"));
        }
    }
    out
}

/// Issues rendered one per line without hints, for logs and warnings.
pub struct IssueList<'a>(pub &'a [PlanIssue]);

impl fmt::Display for IssueList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for issue in self.0 {
            writeln!(f, "{issue}")?;
        }
        Ok(())
    }
}
