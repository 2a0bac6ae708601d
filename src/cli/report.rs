//! What a command answers: the text it prints on stdout and stderr, in order, and the exit
//! code. A command builds a [`Report`]; the binary prints it when the command is done.

use std::fmt::{Display, Write as _};
use std::io::Write as _;

use super::terminal::Stream;

/// A command's output and exit code. Text is kept in the order it was written, stdout's
/// and stderr's interleaved as a terminal would show them.
#[derive(Debug, Default)]
#[must_use]
pub struct Report {
    /// Runs of text, each for one stream; two runs in a row are never for the same one.
    pieces: Vec<(Stream, String)>,
    /// The process's exit code.
    code: i32,
}

impl Report {
    /// Nothing printed, exit code 0.
    pub fn new() -> Report {
        Report::default()
    }

    /// Only the error, on one line of stderr (its chain, no backtrace), exit code 1.
    pub fn failed(error: &anyhow::Error) -> Report {
        let mut report = Report::new();
        report.fail(error);
        report
    }

    /// A line on stdout.
    pub fn out(&mut self, line: impl Display) {
        self.write(Stream::Out, format_args!("{line}\n"));
    }

    /// Text on stdout, without a newline.
    pub fn out_raw(&mut self, text: impl Display) {
        self.write(Stream::Out, text);
    }

    /// A line on stderr.
    pub fn err(&mut self, line: impl Display) {
        self.write(Stream::Err, format_args!("{line}\n"));
    }

    /// Text on stderr, without a newline.
    pub fn err_raw(&mut self, text: impl Display) {
        self.write(Stream::Err, text);
    }

    fn write(&mut self, stream: Stream, text: impl Display) {
        match self.pieces.last_mut() {
            Some((last, run)) if *last == stream => {
                let _ = write!(run, "{text}");
            }
            _ => self.pieces.push((stream, text.to_string())),
        }
    }

    /// Ends the report with `error` on stderr, exit code 1 (what the command printed
    /// before it failed stays).
    pub fn fail(&mut self, error: &anyhow::Error) {
        self.err(format_args!("planmux: {error:#}"));
        self.code = 1;
    }

    /// The report with this exit code.
    pub fn exit(mut self, code: i32) -> Report {
        self.code = code;
        self
    }

    /// The report of a command written into `self` that ended with `ended`: its exit code,
    /// or its error (see [`Report::fail`]).
    pub fn ended(mut self, ended: anyhow::Result<i32>) -> Report {
        match ended {
            Ok(code) => self.code = code,
            Err(error) => self.fail(&error),
        }
        self
    }

    /// The exit code.
    pub fn code(&self) -> i32 {
        self.code
    }

    /// All that goes to stdout.
    pub fn stdout(&self) -> String {
        self.text(Stream::Out)
    }

    /// All that goes to stderr.
    pub fn stderr(&self) -> String {
        self.text(Stream::Err)
    }

    fn text(&self, stream: Stream) -> String {
        self.pieces
            .iter()
            .filter(|(s, _)| *s == stream)
            .map(|(_, text)| text.as_str())
            .collect()
    }

    /// Writes the report out and returns its exit code. A stream that is closed (`planmux
    /// tools | head -1`) is not an error: what it would have shown is dropped.
    pub fn print(&self) -> i32 {
        for (stream, text) in &self.pieces {
            match stream {
                Stream::Out => {
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(text.as_bytes());
                    let _ = out.flush();
                }
                Stream::Err => {
                    let _ = std::io::stderr().write_all(text.as_bytes());
                }
            }
        }
        self.code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_order_and_the_streams_apart() {
        let mut report = Report::new();
        report.out("a");
        report.out_raw("b");
        report.err("c");
        report.out(1);
        assert_eq!(report.stdout(), "a\nb1\n");
        assert_eq!(report.stderr(), "c\n");
        assert_eq!(report.pieces.len(), 3);
        assert_eq!(report.code(), 0);
    }

    #[test]
    fn an_error_ends_it_on_stderr_with_exit_code_1() {
        let mut report = Report::new();
        report.out("done so far");
        let report = report.ended(Err(anyhow::anyhow!("inner").context("outer")));
        assert_eq!(report.stdout(), "done so far\n");
        assert_eq!(report.stderr(), "planmux: outer: inner\n");
        assert_eq!(report.code(), 1);
        assert_eq!(Report::new().ended(Ok(4)).code(), 4);
        assert_eq!(Report::new().exit(5).code(), 5);
    }
}
