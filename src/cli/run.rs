//! `planmux run`: validates a plan, asks on the terminal when `[policy] confirm` covers
//! some of its steps (unless `--yes`), runs it with a line per step on stderr, and prints
//! its result. The exit code says how it went ([`exit_code`]); a plan that is invalid is
//! 4, one that needed approval and did not get it 5.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::servers::{Start, with_servers};
use super::terminal::{self, Lines, draw_timeline};
use super::validate::{invalid, read_plan};
use super::{EXIT_FAILED, EXIT_INVALID, EXIT_NEEDS_APPROVAL, EXIT_PARTIAL, Report, Signal};
use crate::config::Config;
use crate::exec::{RunRecord, RunStatus};
use crate::policy::Approver;
use crate::runner::{Checked, PlanRunner, Unchecked};

/// What `planmux run` does besides running the plan.
#[derive(Debug, Default)]
pub struct Options {
    /// Approve the steps that need it without asking.
    pub yes: bool,
    /// Where to write the full run record.
    pub record: Option<PathBuf>,
    /// Draw a timeline on stderr.
    pub timeline: bool,
    /// No per-step lines.
    pub quiet: bool,
}

/// `planmux run PLAN`: `source` is a file, or `-` for stdin. `signal` stops the question
/// (as a no) and the run (its steps cancelled, its result printed).
pub async fn run(config: &Config, source: &str, options: Options, signal: Signal) -> Report {
    let mut report = Report::new();
    let ended = run_plan(config, source, options, signal, &mut report).await;
    report.ended(ended)
}

/// How far a plan got while the servers were up.
enum Ran {
    /// It did not validate, or its validation did not finish.
    Unchecked(Unchecked),
    /// It is lazy: nothing runs.
    Lazy(Box<Checked>),
    /// The user said no, or could not be asked.
    Declined {
        /// Why, for stderr.
        why: String,
        /// The steps that needed approval.
        steps: Value,
    },
    /// It ran.
    Done {
        runner: Box<PlanRunner>,
        record: Arc<RunRecord>,
    },
}

async fn run_plan(
    config: &Config,
    source: &str,
    options: Options,
    signal: Signal,
    report: &mut Report,
) -> anyhow::Result<i32> {
    let plan = read_plan(source)?;
    let quiet = options.quiet;
    let yes = options.yes;
    let ran = with_servers(config, Start::AsNeeded, |downstreams| async move {
        // The person at the terminal has no identity: `[[access]]` rules for "*" apply.
        let grant = downstreams.grant(None);
        let runner = PlanRunner::new(downstreams, config);
        let cancel = CancellationToken::new();
        let checked = match runner.check(plan, None, &grant, &cancel).await {
            Ok(checked) => checked,
            Err(unchecked) => return Ran::Unchecked(unchecked),
        };
        if checked.plan.lazy() {
            return Ran::Lazy(Box::new(checked));
        }
        let approval = match &checked.approval {
            None => None,
            Some(asked) if yes => Some(runner.approve(asked, Approver::Flag, None)),
            Some(asked) => {
                let answer = tokio::select! {
                    answer = terminal::ask(asked.message(), source == "-") => answer,
                    () = signal() => Ok(false),
                };
                match answer {
                    Ok(true) => Some(runner.approve(asked, Approver::Terminal, None)),
                    refused => {
                        runner.decline(asked, Approver::Terminal, None);
                        return Ran::Declined {
                            why: declined(&asked.message(), refused),
                            steps: json!(asked.steps),
                        };
                    }
                }
            }
        };
        let observer = Lines {
            started: std::time::Instant::now(),
            quiet,
        };
        let record = {
            let run = runner.run(&checked.plan, approval, None, &observer, cancel.clone());
            tokio::pin!(run);
            tokio::select! {
                record = &mut run => record,
                () = signal() => {
                    cancel.cancel();
                    run.await
                }
            }
        };
        Ran::Done {
            runner: Box::new(runner),
            record,
        }
    })
    .await;
    match ran {
        Ran::Unchecked(Unchecked::Invalid(issues)) => {
            invalid(report, &issues);
            Ok(EXIT_INVALID)
        }
        Ran::Unchecked(Unchecked::Unfinished(why)) => Err(anyhow::anyhow!(why)),
        Ran::Lazy(checked) => {
            report.err_raw(checked.planned_text());
            report.err("nothing ran: the plan is lazy (mode lazy / dry_run)");
            report.out(checked.planned());
            Ok(0)
        }
        Ran::Declined { why, steps } => {
            report.err(why);
            report.out(serde_json::to_string_pretty(
                &json!({"status": "needs_approval", "steps": steps}),
            )?);
            Ok(EXIT_NEEDS_APPROVAL)
        }
        Ran::Done { runner, record } => {
            let result = runner.result(&record);
            report.out(serde_json::to_string_pretty(&result)?);
            if let Some(path) = options.record {
                std::fs::write(&path, serde_json::to_string_pretty(&*record)?)
                    .with_context(|| format!("cannot write the record to {}", path.display()))?;
            }
            if options.timeline {
                report.err_raw(draw_timeline(&record));
            }
            Ok(exit_code(record.status))
        }
    }
}

/// Why a plan that needed approval did not run: `refused` is the answer, or why there was
/// no terminal to ask on.
fn declined(message: &str, refused: anyhow::Result<bool>) -> String {
    match refused {
        Err(no_terminal) => format!(
            "{message}\nplanmux: this plan needs approval, and there is no terminal to ask on ({no_terminal}): run it again with --yes to approve it"
        ),
        Ok(_) => "planmux: not approved; nothing ran".into(),
    }
}

/// The exit code of a run that ended this way.
pub fn exit_code(status: RunStatus) -> i32 {
    match status {
        RunStatus::Succeeded => 0,
        RunStatus::Partial => EXIT_PARTIAL,
        RunStatus::Failed => EXIT_FAILED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_code_says_how_the_run_went() {
        let cases = [
            (RunStatus::Succeeded, 0),
            (RunStatus::Partial, 2),
            (RunStatus::Failed, 3),
        ];
        for (status, code) in cases {
            assert_eq!(exit_code(status), code, "{status:?}");
        }
    }

    #[test]
    fn a_refusal_says_why_nothing_ran() {
        assert_eq!(
            declined("asked", Ok(false)),
            "planmux: not approved; nothing ran"
        );
        assert_eq!(
            declined(
                "Plan X needs approval",
                Err(anyhow::anyhow!("stdin is not a terminal"))
            ),
            "Plan X needs approval\nplanmux: this plan needs approval, and there is no terminal to ask on (stdin is not a terminal): run it again with --yes to approve it"
        );
    }
}
