//! What the CLI writes for a person: output that survives a closed pipe, colour on a
//! terminal (unless `NO_COLOR`), the per-step lines of `planmux run` and its timeline.

use planmux::exec::{Observer, RunRecord, StepRecord, StepStatus};
use planmux::plan::PlannedStep;

/// A line on stdout. Unlike `println!`, it does not panic when the reader has gone
/// (`planmux tools | head -1`).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// Text on stdout, without a newline; see [`out!`].
macro_rules! out_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

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

/// One line per step on stderr as it starts and ends.
pub(crate) struct Lines {
    pub(crate) started: std::time::Instant,
    pub(crate) quiet: bool,
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
pub(crate) fn draw_timeline(record: &RunRecord) -> String {
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

pub(crate) const GREEN: &str = "32";
pub(crate) const RED: &str = "31";
const YELLOW: &str = "33";

/// Where a text goes: colour only what a terminal shows.
#[derive(Clone, Copy)]
pub(crate) enum Stream {
    Out,
    Err,
}

/// `text` in an ANSI colour when `stream` is a terminal and `NO_COLOR` is not set
/// (no-color.org).
pub(crate) fn paint(text: &str, colour: &str, stream: Stream) -> String {
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
