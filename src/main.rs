//! The `planmux` binary: parses the command line, sets up logging, the runtime and the
//! signals, runs the command (`planmux::cli`) and prints its report. What each command
//! does is the library's.

use anyhow::Result;
use clap::Parser as _;
use futures::future::BoxFuture;
use planmux::cli::{self, Cli, Report};

fn main() {
    let code = match start() {
        Ok(code) => code,
        // The error chain in one line; no backtrace, whatever RUST_BACKTRACE says.
        Err(error) => Report::failed(&error).print(),
    };
    std::process::exit(code);
}

/// Puts allocations up to 32 MiB on the heap and keeps up to 64 MiB of freed heap, from
/// the start (glibc). By default glibc maps each allocation over 128 KiB afresh and unmaps
/// it when freed, raising both bars only as large blocks are freed: whether a 20 MB
/// message's buffers cost some 5,000 page faults and as many cleared pages, every time,
/// then hung on what the process had allocated before (a read buffer's size turned a demo
/// server's 20 MB answer from 57 into 80 ms, BENCHMARKS.md §1). These are the values glibc
/// settles on after the first large message, set before it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn keep_large_allocations() {
    // SAFETY: `mallopt` only sets two of the allocator's parameters, which it reads under
    // its own lock; nothing else is running yet.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_large_allocations() {}

/// Everything `main` does; its error is reported on one line.
fn start() -> Result<i32> {
    keep_large_allocations();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // `--help` and `--version` are answers; anything else is a usage error, with
        // its own exit code (2 is a partial run's).
        Err(error) => {
            let _ = error.print();
            return Ok(if error.use_stderr() {
                cli::EXIT_USAGE
            } else {
                0
            });
        }
    };
    planmux::telemetry::init(if cli.serving() {
        planmux::telemetry::SERVE_FILTER
    } else {
        planmux::telemetry::COMMAND_FILTER
    });
    // One thread: planmux waits on pipes almost all the time, and a call that hops between
    // worker threads pays for the hand-offs. Measured: the proxy's added latency per call
    // fell from ~185 µs to ~125 µs (BENCHMARKS.md, passthrough).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(cli::execute(cli, terminated));
    let code = report.print();
    // Blocking work still running is not waited for long (the pipes' reader threads are
    // not the runtime's, and end with the process): all that matters is closed.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    Ok(code)
}

/// Resolves on SIGTERM or SIGINT. Made only when a command waits for one (`serve`, `run`),
/// so that until then the signals keep their default effect: Ctrl-C ends `check` at once.
fn terminated() -> BoxFuture<'static, ()> {
    Box::pin(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    })
}
