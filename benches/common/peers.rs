//! Running software nobody here wrote next to planmux in a benchmark: where
//! scripts/install-interop puts it, starting it as a process group of its own (a gateway on
//! a loopback port, or a stdio server behind pipes), knowing when it answers MCP, and
//! stopping it with every process it started.
//!
//! Included by the benches that compare planmux with peers, as
//! `#[path = "common/peers.rs"] mod peers;` (a file directly in benches/ would be taken
//! for a bench target of its own). Each bench uses only part of it, hence the
//! `allow(dead_code)`.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use tokio::process::{ChildStdin, ChildStdout};

/// How long a gateway may take to open its port: Node starts in about a second here,
/// Python (fastmcp) in about two, more when the machine is busy.
pub const PEER_START: Duration = Duration::from_secs(10);
/// How long after its port opens a gateway may take to complete a first MCP session.
pub const PEER_READY: Duration = Duration::from_secs(10);
/// After SIGTERM, how long a process and its children get before SIGKILL.
pub const PEER_TERM_GRACE: Duration = Duration::from_secs(2);

/// Where scripts/install-interop installs the npm packages and the Python venvs.
pub fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

/// Where the figures and the processes' logs go.
pub fn out_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench")
}

/// PATH with tests/interop/node_modules/.bin first, so a gateway's `#!/usr/bin/env node`
/// finds the Node 22 that package.json pins (mcp-proxy's dependencies need it), not
/// whichever node is on PATH.
pub fn node_first_path() -> anyhow::Result<std::ffi::OsString> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let bin = interop_dir().join("node_modules/.bin");
    let dirs = std::iter::once(bin).chain(std::env::split_paths(&path));
    Ok(std::env::join_paths(dirs)?)
}

/// A loopback port nothing listens on now: the gateways cannot report a port they chose.
pub fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// A server's process, the leader of a process group of its own, with its output in a log
/// under target/bench. Dropping it stops the process and every process under it.
pub struct Process {
    child: std::process::Child,
    /// Its stderr (and stdout, unless that is the MCP wire), named when it fails.
    log: PathBuf,
}

impl Process {
    /// Starts `command` with stdin closed and its output in target/bench/`log`.log: a
    /// gateway, which speaks MCP on a port.
    pub fn spawn(mut command: std::process::Command, log: &str) -> anyhow::Result<Self> {
        let path = Self::log_path(log)?;
        let out = std::fs::File::create(&path)?;
        command
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        Self::start(command, path)
    }

    /// Starts `command` with piped stdin and stdout, the MCP wire of a stdio server, and
    /// its stderr in target/bench/`log`.log. Needs a tokio runtime (the pipes join it).
    pub fn spawn_stdio(
        mut command: std::process::Command,
        log: &str,
    ) -> anyhow::Result<(Self, ChildStdout, ChildStdin)> {
        let path = Self::log_path(log)?;
        let err = std::fs::File::create(&path)?;
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err);
        let mut process = Self::start(command, path)?;
        let stdout = process.child.stdout.take().context("no stdout pipe")?;
        let stdin = process.child.stdin.take().context("no stdin pipe")?;
        Ok((
            process,
            ChildStdout::from_std(stdout)?,
            ChildStdin::from_std(stdin)?,
        ))
    }

    /// target/bench/`log`.log, its folder created.
    fn log_path(log: &str) -> anyhow::Result<PathBuf> {
        std::fs::create_dir_all(out_dir())?;
        Ok(out_dir().join(format!("{log}.log")))
    }

    /// Spawns in a new process group, with the pinned Node first on PATH.
    fn start(mut command: std::process::Command, log: PathBuf) -> anyhow::Result<Self> {
        let program = command.get_program().to_string_lossy().into_owned();
        let child = command
            .env("PATH", node_first_path()?)
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot run {program}"))?;
        Ok(Process { child, log })
    }

    /// Polls `addr` until the process listens there; fails early if it exits.
    pub fn wait_for_port(&mut self, addr: SocketAddr) -> anyhow::Result<()> {
        let deadline = Instant::now() + PEER_START;
        loop {
            let poll = Duration::from_millis(200);
            if std::net::TcpStream::connect_timeout(&addr, poll).is_ok() {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!("it exited ({status}); see {}", self.log.display());
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "port {} not open after {PEER_START:?}; see {}",
                    addr.port(),
                    self.log.display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its log, for messages about it.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// SIGTERMs the group and waits up to `PEER_TERM_GRACE` for the process and `tree` to
    /// go; whether the process exited (and was reaped).
    fn terminate(&mut self, group: Pid, tree: &[u32]) -> bool {
        let _ = killpg(group, Signal::SIGTERM);
        let deadline = Instant::now() + PEER_TERM_GRACE;
        loop {
            let exited = matches!(self.child.try_wait(), Ok(Some(_)));
            let gone = exited && !tree.iter().any(|&pid| alive(pid));
            if gone || Instant::now() > deadline {
                return exited;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Process {
    /// SIGTERM first, so the process closes its children itself; then SIGKILL for what is
    /// left. The group alone is not enough: supergateway starts each session's child in a
    /// process group of its own, so those are found (before signalling, while their parent
    /// still is the gateway) and killed one by one.
    fn drop(&mut self) {
        let Ok(pid) = i32::try_from(self.child.id()) else {
            return;
        };
        let tree = descendants(self.child.id());
        let group = Pid::from_raw(pid);
        if !self.terminate(group, &tree) {
            let _ = killpg(group, Signal::SIGKILL);
        }
        for &pid in tree.iter().filter(|&&pid| alive(pid)) {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
        let _ = self.child.wait();
    }
}

/// Every process below `pid` now (children, grandchildren, …), from /proc.
fn descendants(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: Vec<(u32, u32)> = entries
        .flatten()
        .filter_map(|entry| {
            let child: u32 = entry.file_name().to_str()?.parse().ok()?;
            Some((child, stat_field(child, 1)?.parse::<u32>().ok()?))
        })
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        let children = parents.iter().filter(|(_, p)| *p == parent);
        found.extend(children.map(|(c, _)| *c));
        i += 1;
    }
    found.split_off(1)
}

/// Field `n` (0 = state, 1 = ppid) after the command name of /proc/PID/stat.
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.get(stat.rfind(')')? + 2..)?;
    after.split_whitespace().nth(n).map(str::to_string)
}

/// Whether a process exists and is not a zombie.
fn alive(pid: u32) -> bool {
    stat_field(pid, 0).is_some_and(|state| state != "Z" && state != "X")
}

/// Retries a whole session (initialize, tools/list, close) until one succeeds: an open
/// port does not mean the gateway answers MCP yet (supergateway first spawns the
/// session's child).
pub async fn ready(addr: SocketAddr) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + PEER_READY;
    loop {
        let error = match tokio::time::timeout_at(deadline, probe(addr)).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => e,
            Err(_) => anyhow::anyhow!("a session hung"),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(error.context(format!("no MCP session within {PEER_READY:?}")));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One short session: initialize, tools/list, close.
async fn probe(addr: SocketAddr) -> anyhow::Result<()> {
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
    let session = ().serve(transport).await?;
    session.list_all_tools().await?;
    let _ = session.cancel().await;
    Ok(())
}
