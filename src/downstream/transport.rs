//! Opening a connection to one downstream server: a child process in its own process
//! group, a streamable-HTTP endpoint, or a built-in demo over an in-memory pipe. This is
//! the only place planmux spawns processes.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use globset::GlobSet;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::ClientHandler;
use rmcp::RoleClient;
use rmcp::service::RunningService;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::AsyncBufReadExt;
use tokio_util::task::TaskTracker;

use super::calls::CallTable;
use super::era::{self, EraCell};
use super::fields::ToolFields;
use super::relay::Relay;
use super::tap::{ProgressRoutes, ProgressTap};
use crate::config::{ServerConfig, SignIn, Transport};
use crate::wire::LineTransport;
use noting::Noting;

/// How many of a child's last stderr lines are kept to explain why it failed.
const STDERR_TAIL_LINES: usize = 8;
/// Longest stderr line kept (the rest is cut): the tail ends up in messages to the model.
const STDERR_LINE_CHARS: usize = 240;
/// After closing a child's stdin, how long it may take to exit by itself.
pub const CLOSE_GRACE: Duration = Duration::from_millis(500);
/// After SIGTERM, how long before SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_millis(500);

/// A live client connection to one downstream.
pub(crate) struct Connected {
    pub(crate) service: RunningService<RoleClient, Relay>,
    /// The child process, for stdio servers; dropping it kills the child.
    pub(crate) child: Option<Box<dyn ChildWrapper>>,
    /// The child's process group, for stdio servers.
    pub(crate) group: Option<ProcessGroupGuard>,
    /// The last lines the child wrote to stderr.
    pub(crate) stderr: StderrTail,
    /// The calls forwarded as raw JSON, on line connections (stdio and built-in).
    pub(crate) table: Option<Arc<CallTable>>,
}

/// The last few lines of a child's stderr, shared with the task that reads it.
#[derive(Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == STDERR_TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(crate::text::clip(&line, STDERR_LINE_CHARS).into_owned());
    }

    /// " (stderr: …)" with the last lines, or nothing when there were none; then how to
    /// fix a certificate failure when they show one.
    pub(crate) fn describe(&self) -> String {
        let lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.is_empty() {
            return String::new();
        }
        let joined: Vec<&str> = lines.iter().map(String::as_str).collect();
        let hint = if lines.iter().any(|line| shows_tls_failure(line)) {
            TLS_HINT
        } else {
            ""
        };
        format!(" (stderr: {}){hint}", joined.join(" | "))
    }
}

/// What a child's stderr says when it does not trust a server's certificate: rustls,
/// OpenSSL (Python, curl), Node.
const TLS_FAILURES: &[&str] = &[
    "unknownissuer",
    "certificate_verify_failed",
    "certificate verify failed",
    "unable to get local issuer certificate",
    "self_signed_cert_in_chain",
    "unable_to_verify_leaf_signature",
    "unable to verify the first certificate",
    "self signed certificate in certificate chain",
    "self-signed certificate in certificate chain",
    "invalid peer certificate",
];

/// Behind a company's TLS-inspecting proxy, every server that calls out fails this way:
/// the fix is where planmux runs, not in the server.
const TLS_HINT: &str = " (this looks like a TLS certificate problem: if your network uses its own certificate authority, set SSL_CERT_FILE / NODE_EXTRA_CA_CERTS / REQUESTS_CA_BUNDLE where planmux runs — children inherit them — or list the variable in `env_inherit`)";

/// Whether a line of stderr shows a certificate the child did not trust.
fn shows_tls_failure(line: &str) -> bool {
    let line = line.to_ascii_lowercase();
    TLS_FAILURES.iter().any(|failure| line.contains(failure))
}

/// A child's process group. Dropping it kills the whole group, so no path (an error, a
/// timeout, a panic unwinding) leaves `npx → node` grandchildren behind.
pub(crate) struct ProcessGroupGuard {
    pgid: Pid,
}

impl ProcessGroupGuard {
    fn signal(&self, signal: Signal) {
        let _ = killpg(self.pgid, signal);
    }

    /// Whether any process of the group is still there.
    fn alive(&self) -> bool {
        killpg(self.pgid, None).is_ok()
    }

    /// SIGTERM the group, wait up to `grace` for it to go, then SIGKILL what is left.
    pub(crate) async fn terminate(&self, grace: Duration) {
        if !self.alive() {
            return;
        }
        self.signal(Signal::SIGTERM);
        let deadline = tokio::time::Instant::now() + grace;
        while self.alive() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if self.alive() {
            self.signal(Signal::SIGKILL);
        }
    }
}

impl Drop for ProcessGroupGuard {
    fn drop(&mut self) {
        self.signal(Signal::SIGKILL);
    }
}

/// Opens the connection and completes the MCP handshake in the newest era the server
/// speaks ([`super::era`]): at once with `initialize` when `era` says it spoke
/// 2025-11-25 before.
pub(crate) async fn connect(
    config: &ServerConfig,
    relay: Relay,
    routes: Arc<ProgressRoutes>,
    fields: Arc<ToolFields>,
    standing: &Arc<crate::oauth::Standing>,
    tracker: &TaskTracker,
    era: &EraCell,
) -> Result<Connected, String> {
    if let Some(reason) = config.cannot_start() {
        return Err(reason);
    }
    let noted = fields.clone();
    let noting: crate::wire::Inbound = Arc::new(move |text| noted.note(text));
    let router = relay.log_router();
    match &config.transport {
        Transport::Stdio {
            command,
            args,
            env,
            env_inherit,
            cwd,
        } => {
            let mut cmd = child_command(
                command,
                args,
                cwd.as_deref(),
                env,
                env_inherit.as_ref(),
                std::env::vars_os(),
            );
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            die_with_parent(&mut cmd);
            let mut wrap = CommandWrap::from(cmd);
            wrap.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
            let mut child = wrap.spawn().map_err(|e| match cwd {
                // The OS says only "not found": name the folder when it is the folder.
                Some(dir) if !dir.is_dir() => {
                    format!(
                        "cannot start '{command}': its cwd {} is not a folder",
                        dir.display()
                    )
                }
                _ => format!("cannot start '{command}': {e}"),
            })?;
            let group =
                child
                    .id()
                    .and_then(|id| i32::try_from(id).ok())
                    .map(|id| ProcessGroupGuard {
                        pgid: Pid::from_raw(id),
                    });
            let pipes = (
                child.inner_mut().stdout().take(),
                child.inner_mut().stdin().take(),
            );
            let (Some(stdout), Some(stdin)) = pipes else {
                return Err(format!("cannot start '{command}': its pipes are missing"));
            };
            crate::pipes::widen_pipe(&stdout);
            crate::pipes::widen_pipe(&stdin);
            let tail = StderrTail::default();
            if let Some(stderr) = child.inner_mut().stderr().take() {
                let tail = tail.clone();
                let server = config.name.clone();
                tracker.spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::debug!(server = %server, "stderr: {line}");
                        tail.push(line);
                    }
                });
            }
            // Read with blocking calls on a thread of its own (`wire::Blocking`).
            let stdout = stdout
                .into_owned_fd()
                .map_err(|e| format!("cannot start '{command}': {e}"))?;
            let transport =
                LineTransport::blocking(stdout.into(), stdin, config.wire, peer_name(config))
                    .with_inbound(noting);
            let (transport, table) = with_table(transport, config, tracker, &fields);
            let mut tap = ProgressTap::new(transport, routes, router.clone());
            let handshake = async {
                let lifecycle = era::line_lifecycle(&mut tap, era, &relay.get_info()).await?;
                relay
                    .serve_with_lifecycle(tap, lifecycle)
                    .await
                    .map_err(|e| e.to_string())
            };
            match handshake.await {
                Ok(service) => Ok(Connected {
                    service,
                    child: Some(child),
                    group,
                    stderr: tail,
                    table: Some(table),
                }),
                Err(e) => {
                    // Give the stderr reader a moment: the reason is usually there.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Err(format!("handshake failed: {e}{}", tail.describe()))
                }
            }
        }
        Transport::Http {
            url,
            headers,
            sign_in,
        } => {
            let shown = crate::text::redact_url(url);
            let mut map = HashMap::new();
            for (name, value) in headers {
                let name = http::HeaderName::try_from(name.as_str())
                    .map_err(|e| format!("bad header name '{name}': {e}"))?;
                let value = http::HeaderValue::try_from(value.as_str())
                    .map_err(|e| format!("bad value for header '{name}': {e}"))?;
                map.insert(name, value);
            }
            // TLS is rustls with ring (Cargo.toml: rmcp's `reqwest-tls-no-provider`): the
            // process's provider, installed before the first client is built (reqwest
            // builds its TLS setup even for http://). A second install is a no-op.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let transport_config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(map);
            let open = |lifecycle| {
                let (relay, routes, router) = (relay.clone(), routes.clone(), router.clone());
                let (transport_config, fields) = (transport_config.clone(), fields.clone());
                async move {
                    // OAuth: the client carries the sign-in, and notes in `standing` when
                    // the server asks for one the user must give.
                    let client = match sign_in {
                        SignIn::Header => None,
                        _ => Some(
                            crate::oauth::client(&config.name, url, sign_in, standing.clone())
                                .await?,
                        ),
                    };
                    let served = match client {
                        None => {
                            let client = Noting {
                                inner: noting::plain_client(),
                                fields,
                            };
                            let transport =
                                rmcp::transport::StreamableHttpClientTransport::with_client(
                                    client,
                                    transport_config,
                                );
                            let tap = ProgressTap::new(transport, routes, router);
                            relay.serve_with_lifecycle(tap, lifecycle).await
                        }
                        Some(client) => {
                            let client = Noting {
                                inner: client,
                                fields,
                            };
                            let transport =
                                rmcp::transport::StreamableHttpClientTransport::with_client(
                                    client,
                                    transport_config,
                                );
                            let tap = ProgressTap::new(transport, routes, router);
                            relay.serve_with_lifecycle(tap, lifecycle).await
                        }
                    };
                    Ok::<_, String>(served)
                }
            };
            let mut served = open(era::http_lifecycle(era.get())).await?;
            if served.as_ref().is_err_and(era::undiscovered) {
                // It answered server/discover with something else: it does not know it.
                served = open(ClientLifecycleMode::Initialize).await?;
            }
            let service = served.map_err(|e| {
                // rmcp's errors may quote the URL: never its credentials.
                let detail = crate::text::redact_urls(&e.to_string());
                format!("cannot connect to {shown}: {detail}")
            })?;
            Ok(Connected {
                service,
                child: None,
                group: None,
                stderr: StderrTail::default(),
                table: None,
            })
        }
        Transport::Builtin { kind, root } => {
            let (client_io, server_io) = tokio::io::duplex(64 * 1024);
            let (read, write) = tokio::io::split(server_io);
            let served = LineTransport::new(read, write, config.wire, "planmux").serving();
            tracker.spawn(crate::demo::serve_on(*kind, root.clone(), served));
            let (read, write) = tokio::io::split(client_io);
            let transport = LineTransport::new(read, write, config.wire, peer_name(config))
                .with_inbound(noting);
            let (transport, table) = with_table(transport, config, tracker, &fields);
            let mut tap = ProgressTap::new(transport, routes, router.clone());
            let lifecycle = era::line_lifecycle(&mut tap, era, &relay.get_info())
                .await
                .map_err(|e| format!("handshake failed: {e}"))?;
            let service = relay
                .serve_with_lifecycle(tap, lifecycle)
                .await
                .map_err(|e| format!("handshake failed: {e}"))?;
            Ok(Connected {
                service,
                child: None,
                group: None,
                stderr: StderrTail::default(),
                table: Some(table),
            })
        }
    }
}

/// A line connection's call table, whose answers `transport` hands it before rmcp sees
/// them.
fn with_table<In: tokio::io::AsyncRead + Send + Unpin + 'static>(
    transport: LineTransport<RoleClient, In>,
    config: &ServerConfig,
    tracker: &TaskTracker,
    fields: &Arc<ToolFields>,
) -> (LineTransport<RoleClient, In>, Arc<CallTable>) {
    let table = CallTable::new(
        transport.sender(),
        &config.name,
        config.call_timeout,
        tracker,
        fields.clone(),
    );
    (transport.with_divert(table.divert()), table)
}

/// A stdio server's child, not started yet: its program, arguments and folder, and an
/// environment of its own. It sees only what it needs and what the config sends it, for
/// planmux's environment (`parent`) may hold other servers' secrets: the variables every
/// child gets, what `env_inherit` matches, then its `env`.
fn child_command(
    command: &str,
    args: &[String],
    cwd: Option<&Path>,
    env: &BTreeMap<String, String>,
    env_inherit: Option<&GlobSet>,
    parent: impl IntoIterator<Item = (OsString, OsString)>,
) -> tokio::process::Command {
    let inherits = |name: &OsString| {
        name.to_str().is_some_and(|name| {
            passes_through(name) || env_inherit.is_some_and(|set| set.is_match(name))
        })
    };
    let mut cmd = tokio::process::Command::new(command);
    cmd.env_clear()
        .envs(parent.into_iter().filter(|(name, _)| inherits(name)))
        .args(args)
        .envs(env);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    cmd
}

/// Variables every child gets from planmux's environment: what programs need to run
/// (find commands, a home, a locale, a terminal, a temp folder, a time zone).
const MINIMAL_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "TMPDIR", "TZ",
];

/// Variables that say how to reach the network, which every child gets too: the
/// certificate authorities a company's network adds, and its proxies. Without them a
/// server that calls out fails behind that network (DESIGN §17); they hold no secret of
/// another server's (a proxy's credentials are the network's, shared by every program).
const NETWORK_ENV: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
];

/// Whether a child inherits the variable `name` without being told to.
fn passes_through(name: &str) -> bool {
    MINIMAL_ENV.contains(&name) || NETWORK_ENV.contains(&name) || name.starts_with("LC_")
}

/// How a server is named in messages about its connection.
fn peer_name(config: &ServerConfig) -> String {
    format!("server '{}'", config.name)
}

/// On Linux, the child is killed when planmux dies, even by SIGKILL, so a server that
/// ignores the end of its stdin cannot outlive it. The kernel sends the signal when the
/// *thread* that spawned the child exits, not the process: planmux spawns children only
/// from its runtime's threads, which live as long as it does. Elsewhere (macOS) there is
/// no such signal: a child sees its stdin close when planmux dies and is expected to exit.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut tokio::process::Command) {
    use nix::sys::prctl::set_pdeathsig;
    use nix::unistd::getppid;
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed. It makes two system calls (prctl, getppid),
    // allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            set_pdeathsig(Signal::SIGKILL)?;
            // planmux died between fork and prctl: the signal will never come.
            if getppid() != parent {
                return Err(std::io::Error::other("planmux exited"));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut tokio::process::Command) {}

/// Runs until the connection ends. Returns why when it ended by itself (the server
/// exited or hung up); `None` when `stop` asked it to close. Either way, when this returns
/// the connection is closed and, for a child process, its whole process group is gone.
pub(crate) async fn watch(
    connected: Connected,
    stop: tokio_util::sync::CancellationToken,
) -> Option<String> {
    let Connected {
        service,
        child: _child,
        group,
        stderr,
        ..
    } = connected;
    let cancel = service.cancellation_token();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    let died = tokio::select! {
        _ = &mut waiting => true,
        () = stop.cancelled() => false,
    };
    let mut finished = died;
    if !died {
        // Closing the service closes the child's stdin: a well-behaved server exits.
        cancel.cancel();
        finished = tokio::time::timeout(CLOSE_GRACE, &mut waiting)
            .await
            .is_ok();
    }
    if let Some(group) = &group {
        // Grandchildren (npx → node) may outlive the leader: finish the whole group.
        group.terminate(TERM_GRACE).await;
    }
    if !died {
        if !finished {
            let _ = tokio::time::timeout(TERM_GRACE, &mut waiting).await;
        }
        return None;
    }
    // Let the stderr reader catch the last lines: they usually say why.
    tokio::time::sleep(Duration::from_millis(20)).await;
    Some(format!("the server exited{}", stderr.describe()))
}

mod noting;
#[cfg(test)]
mod tests;
