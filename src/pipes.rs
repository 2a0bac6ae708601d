//! The pipes planmux talks over: widened for large messages, and the host's stdio polled
//! by the runtime itself.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use tokio::io::AsyncWrite;
use tokio::net::unix::pipe;

/// The pipe buffer asked for on the pipes planmux reads and writes: the kernel's default
/// (64 KiB) makes a 20 MB answer cross in ~300 hand-offs between processes per pipe;
/// 1 MiB (Linux's default limit for an unprivileged process) in ~20.
const PIPE_BUFFER: i32 = 1024 * 1024;

/// Widens the pipe behind `fd` to [`PIPE_BUFFER`], if it is a pipe and the system allows
/// it; anything else (a file, a terminal, a socket, a lower limit) is left as it is.
pub fn widen_pipe(fd: impl AsFd) {
    let _ = fcntl(fd, FcntlArg::F_SETPIPE_SZ(PIPE_BUFFER));
}

/// The host's stdout, as a stream for the runtime.
pub type HostWriter = Box<dyn AsyncWrite + Send + Unpin>;

/// The host's stdin and stdout, widened.
///
/// Stdin is a copy of its descriptor, read with blocking calls on a thread of its own
/// (`wire::Blocking`). Stdout, when it is a pipe or a socket (how hosts launch a server),
/// is made non-blocking and polled by the runtime like a child's pipes, where tokio's own
/// stdio hands every write to a blocking thread and back (BENCHMARKS.md §1 measured no
/// difference in latency; nothing blocks this way); anything else (a terminal, a file)
/// goes through tokio's stdio. Must be called within the runtime.
pub fn host_stdio() -> io::Result<(File, HostWriter)> {
    widen_pipe(io::stdin());
    widen_pipe(io::stdout());
    let stdin = File::from(io::stdin().as_fd().try_clone_to_owned()?);
    let stdout = polled(io::stdout()).map(pipe::Sender::from_owned_fd_unchecked);
    let writer: HostWriter = match stdout {
        Some(Ok(stdout)) => Box::new(stdout),
        _ => Box::new(tokio::io::stdout()),
    };
    Ok((stdin, writer))
}

/// A copy of `fd`, made non-blocking, if it is a pipe or a socket (what the runtime can
/// poll).
fn polled(fd: impl AsFd) -> Option<OwnedFd> {
    let file = File::from(fd.as_fd().try_clone_to_owned().ok()?);
    let kind = file.metadata().ok()?.file_type();
    if !kind.is_fifo() && !kind.is_socket() {
        return None;
    }
    let flags = OFlag::from_bits_retain(fcntl(&file, FcntlArg::F_GETFL).ok()?);
    fcntl(&file, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).ok()?;
    Some(file.into())
}
