//! What the CLI writes for a person: output that survives a closed pipe, colour on a
//! terminal (unless `NO_COLOR`), the question `planmux run` asks before a plan that needs
//! approval, and its per-step lines and timeline. These are written as they happen; the
//! rest of a command's output is its [`Report`](super::Report), printed at the end.

use crate::exec::{Observer, RunRecord, StepRecord, StepStatus};
use crate::plan::PlannedStep;

/// A line on stderr, which may be closed too (`2>&1 >/dev/null | head -1`).
macro_rules! err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Text on stderr, without a newline; see [`err!`].
macro_rules! err_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

/// One line per step on stderr as it starts and ends (none when `quiet`).
pub struct Lines {
    /// When the run started: each line says how long after.
    pub started: std::time::Instant,
    /// No lines at all.
    pub quiet: bool,
}

impl Observer for Lines {
    fn step_started(&self, step: &PlannedStep) {
        if !self.quiet {
            err!(
                "{:>8.1} ms  started    {}  {}",
                self.started.elapsed().as_secs_f64() * 1e3,
                step.id,
                step.exported
            );
        }
    }

    fn step_finished(&self, record: &StepRecord, finished: usize, total: usize) {
        if self.quiet {
            return;
        }
        let detail = record
            .error
            .as_deref()
            .or(record.reason.as_deref())
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        let took = record
            .duration_ms
            .map(|d| format!(" ({d} ms)"))
            .unwrap_or_default();
        err!(
            "{:>8.1} ms  {} {}{took}{detail}  [{finished}/{total}]",
            self.started.elapsed().as_secs_f64() * 1e3,
            status_word(record.status),
            record.id,
        );
    }
}

/// A per-step timeline: one bar per step, scaled to the run's duration.
pub fn draw_timeline(record: &RunRecord) -> String {
    const WIDTH: f64 = 50.0;
    let total = record.duration_ms.max(0.001);
    let id_width = record.steps.iter().map(|s| s.id.len()).max().unwrap_or(2);
    let mut out = format!(
        "timeline ({} ms, one column = {} ms)\n",
        short(total),
        short(total / WIDTH)
    );
    for step in &record.steps {
        let (bar, took) = match (step.started_ms, step.duration_ms) {
            (Some(start), Some(took)) => {
                let from = (start / total * WIDTH).round() as usize;
                let len = ((took / total * WIDTH).round() as usize).max(1);
                (
                    format!("{}{}", " ".repeat(from), "█".repeat(len)),
                    format!("{took} ms"),
                )
            }
            _ => (String::new(), String::new()),
        };
        out.push_str(&format!(
            "{:<id_width$} |{:<width$}| {:<10} {took}\n",
            step.id,
            bar,
            step.status.as_str(),
            width = WIDTH as usize
        ));
    }
    out
}

/// Milliseconds with two significant digits at most past the point: 1234, 12.3, 0.042.
fn short(ms: f64) -> String {
    let digits = if ms >= 100.0 {
        0
    } else if ms >= 1.0 {
        1
    } else {
        ((-ms.log10().floor()) as usize + 1).min(6)
    };
    format!("{ms:.digits$}")
}

/// ANSI colours for [`paint`].
pub const GREEN: &str = "32";
pub const RED: &str = "31";
const YELLOW: &str = "33";

/// Where a text goes: colour only what a terminal shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// stdout.
    Out,
    /// stderr.
    Err,
}

/// `text` in an ANSI colour when `stream` is a terminal and `NO_COLOR` is not set
/// (no-color.org).
pub fn paint(text: &str, colour: &str, stream: Stream) -> String {
    use std::io::IsTerminal as _;
    let terminal = match stream {
        Stream::Out => std::io::stdout().is_terminal(),
        Stream::Err => std::io::stderr().is_terminal(),
    };
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    if terminal && !no_color {
        format!("\x1b[{colour}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// A step's status for the per-step lines on stderr, padded, coloured on a terminal.
fn status_word(status: StepStatus) -> String {
    let colour = match status {
        StepStatus::Succeeded => GREEN,
        StepStatus::Failed | StepStatus::TimedOut => RED,
        StepStatus::Skipped | StepStatus::Cancelled => YELLOW,
    };
    paint(&format!("{:<10}", status.as_str()), colour, Stream::Err)
}

/// Asks y/N on stderr and reads the answer from stdin, when stdin is a terminal (`Err`
/// when it is not: a pipe, a file, or the plan itself).
pub async fn ask(message: String, plan_on_stdin: bool) -> anyhow::Result<bool> {
    use anyhow::Context as _;
    use std::io::{BufRead as _, IsTerminal as _};
    // The plan may take stdin (`planmux run -`): then the answer comes from the terminal
    // itself, when the user sees the question there (stderr is a terminal).
    let answers: Box<dyn std::io::BufRead + Send> = if std::io::stdin().is_terminal() {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else if plan_on_stdin && std::io::stderr().is_terminal() {
        let tty = std::fs::File::open("/dev/tty")
            .context("stdin is not a terminal, and /dev/tty cannot be opened")?;
        Box::new(std::io::BufReader::new(tty))
    } else {
        anyhow::bail!("stdin is not a terminal");
    };
    let asked = tokio::task::spawn_blocking(move || -> anyhow::Result<bool> {
        let mut answers = answers;
        err_raw!("{message}\nRun it? [y/N] ");
        let mut line = String::new();
        answers.read_line(&mut line)?;
        Ok(matches!(
            line.trim().to_ascii_lowercase().as_str(),
            "y" | "yes"
        ))
    });
    asked.await?
}
