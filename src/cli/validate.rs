//! `planmux validate`: checks a plan against the catalog and shows its schedule (as text,
//! JSON, Mermaid or DOT) without calling any tool; an invalid plan is exit code 4. Also
//! what `run` shares with it: reading the plan and reporting its issues.

use anyhow::Context as _;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::servers::{Start, with_servers};
use super::{EXIT_INVALID, Report};
use crate::config::Config;
use crate::plan::{PlanIssue, dot, mermaid, render_issues};
use crate::runner::{PlanRunner, Unchecked};

/// How `planmux validate` shows a valid plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Picture {
    /// The schedule as text.
    Text,
    /// What a lazy plan answers: the schedule and what would need approval.
    Json,
    /// The dependency graph as a Mermaid flowchart.
    Mermaid,
    /// The dependency graph as Graphviz DOT.
    Dot,
}

impl Picture {
    /// The picture the flags ask for (clap lets at most one of them be set).
    pub fn from_flags(mermaid: bool, dot: bool, json: bool) -> Picture {
        if mermaid {
            Picture::Mermaid
        } else if dot {
            Picture::Dot
        } else if json {
            Picture::Json
        } else {
            Picture::Text
        }
    }
}

/// `planmux validate PLAN`: `source` is a file, or `-` for stdin.
pub async fn validate(config: &Config, source: &str, picture: Picture) -> Report {
    let mut report = Report::new();
    let ended = show(config, source, picture, &mut report).await;
    report.ended(ended)
}

async fn show(
    config: &Config,
    source: &str,
    picture: Picture,
    report: &mut Report,
) -> anyhow::Result<i32> {
    let plan = read_plan(source)?;
    let outcome = with_servers(config, Start::AsNeeded, |downstreams| async move {
        let grant = downstreams.grant(None);
        let runner = PlanRunner::new(downstreams, config);
        let cancel = CancellationToken::new();
        runner.check(plan, None, &grant, &cancel).await
    })
    .await;
    let checked = match outcome {
        Ok(checked) => checked,
        Err(Unchecked::Invalid(issues)) => {
            invalid(report, &issues);
            return Ok(EXIT_INVALID);
        }
        Err(Unchecked::Unfinished(why)) => return Err(anyhow::anyhow!(why)),
    };
    match picture {
        Picture::Mermaid => report.out_raw(mermaid(&checked.plan)),
        Picture::Dot => report.out_raw(dot(&checked.plan)),
        Picture::Json => report.out(checked.planned()),
        Picture::Text => report.out_raw(checked.planned_text()),
    }
    Ok(0)
}

/// The plan text from a file, or stdin for `-`.
pub(super) fn read_plan(source: &str) -> anyhow::Result<Value> {
    let text = if source == "-" {
        std::io::read_to_string(std::io::stdin()).context("cannot read the plan from stdin")?
    } else {
        std::fs::read_to_string(source).with_context(|| format!("cannot read {source}"))?
    };
    // The plan language parses the text itself, to report bad JSON with its position.
    Ok(Value::String(text))
}

/// A plan's issues: for a person on stderr, as JSON on stdout.
pub(super) fn invalid(report: &mut Report, issues: &[PlanIssue]) {
    report.err(render_issues(issues));
    let issues: Vec<Value> = issues
        .iter()
        .map(|i| json!({"location": i.location, "message": i.message(), "hint": i.hint()}))
        .collect();
    report.out(json!({"status": "invalid", "issues": issues}));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_flag_picks_the_picture() {
        let cases = [
            ((false, false, false), Picture::Text),
            ((true, false, false), Picture::Mermaid),
            ((false, true, false), Picture::Dot),
            ((false, false, true), Picture::Json),
        ];
        for ((mermaid, dot, json), picture) in cases {
            assert_eq!(Picture::from_flags(mermaid, dot, json), picture);
        }
    }

    #[test]
    fn an_unreadable_plan_is_an_error() {
        let report = Report::new().ended(read_plan("/nonexistent/plan.json").map(|_| 0));
        assert_eq!(report.code(), 1);
        assert!(
            report
                .stderr()
                .starts_with("planmux: cannot read /nonexistent/plan.json: "),
            "{}",
            report.stderr()
        );
    }
}
