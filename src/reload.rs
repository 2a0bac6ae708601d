//! Hot reload: SIGHUP, or a change of servers.toml or servers.lock on disk, re-reads the
//! config and the lock and applies them (`Downstreams::reload`): only changed servers
//! restart, tools the lock now pins leave quarantine, a changed `[policy]` is in force
//! for the next decision, and hosts get `list_changed`. An invalid file is refused with
//! its error logged, and the running config stays. The other sections (`[proxy]`,
//! `[http]`, `[state]`, `[telemetry]`, pipelines) need a restart, which the log says; only a server restarted by
//! the reload that takes its limits from `[proxy]` starts with the new ones. The same poll
//! notices a sign-in made since a server asked for one (`planmux login`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::downstream::Downstreams;

/// How often the file is looked at.
const POLL: Duration = Duration::from_secs(1);

/// Watches `config`'s file and its lock (when it came from a file) until `stop`,
/// reloading on SIGHUP or when either changes.
pub async fn watch(config: Config, downstreams: Arc<Downstreams>, stop: CancellationToken) {
    let Some(lock) = config.lock_path.clone() else {
        // The built-in config: no file to watch.
        return;
    };
    let path = PathBuf::from(&config.source);
    // Both files' stamps: a change of either is a change.
    let stamp = || (modified(&path), modified(&lock));
    let mut seen = stamp();
    let mut running = config;
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    loop {
        let signalled = async {
            match hangup.as_mut() {
                Some(signal) => {
                    signal.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        let why = tokio::select! {
            () = stop.cancelled() => return,
            () = signalled => "SIGHUP",
            () = tokio::time::sleep(POLL) => {
                // A sign-in made meanwhile (`planmux login`) is looked for on the same poll.
                downstreams.reconnect_signed_in();
                let now = stamp();
                if now == seen {
                    continue;
                }
                // An editor may be writing it: wait until it holds still for a poll.
                tokio::time::sleep(POLL).await;
                if stamp() != now {
                    continue;
                }
                seen = now;
                "a file changed"
            }
        };
        // A file saved in place is empty for a moment; an empty config would stop every
        // server.
        if std::fs::read_to_string(&path).is_ok_and(|text| text.trim().is_empty()) {
            tracing::warn!(
                "config not reloaded: the file is empty (half-written?); the running config stays"
            );
            continue;
        }
        let next = match Config::load(&path) {
            Ok(next) => next,
            Err(error) => {
                tracing::warn!(%error, "config not reloaded: the running config stays");
                continue;
            }
        };
        let unchanged = |c: &Config| format!("{:?}{:?}{:?}", c.proxy, c.pipelines, c.http);
        if unchanged(&next) != unchanged(&running)
            || next.state != running.state
            || next.telemetry != running.telemetry
        {
            tracing::warn!(
                "[proxy], [http], [state], [telemetry] or pipelines changed: restart planmux to apply them; servers and [policy] are reloaded now (servers that take [proxy] defaults restart with the new ones)"
            );
        }
        let done = downstreams.reload(&next).await;
        tracing::info!(trigger = why, added = ?done.added, removed = ?done.removed, restarted = ?done.restarted, policy = done.policy, "config reloaded");
        running = next;
    }
}

/// When the file was last written, and its size: together they tell a change.
fn modified(path: &std::path::Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}
