//! Whether planmux can run each remote server now, for `install`, which leaves with the
//! host what planmux cannot run yet. A server whose headers set `Authorization` never
//! signs in with OAuth: it is ready. One without is asked, without credentials, for at most
//! [`PROBE_TIMEOUT`] a request (`oauth::probe`: `initialize`, then `tools/list` when that
//! is let through): a 401 means it wants OAuth sign-in (which
//! the host may have done for itself, so it stays there until `planmux login`), a 404 or
//! 405 that it does not serve streamable HTTP (an SSE-only server: mcp-remote falls back
//! to SSE on a 404). Anything else, even no answer, is planmux's to try: the host could
//! not do better, and `planmux check` shows how it went.

use std::collections::HashMap;
use std::time::Duration;

use crate::config::{ServerConfig, SignIn, Transport};
use crate::hosts::Readiness;
use crate::oauth::probe::{Probe, probe};

/// How long the probe waits for a server's answer: a sign-in check, not a start-up.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What install learned of the servers it asked about.
#[derive(Debug, Default)]
pub(super) struct Decided {
    /// By servers.toml name; a server not here is ready.
    pub readiness: HashMap<String, Readiness>,
    /// What it could not tell, one line each.
    pub notes: Vec<String>,
}

/// Decides, all at once, for each of `servers`.
pub(super) async fn decide(servers: &[&ServerConfig]) -> Decided {
    let decisions = futures::future::join_all(servers.iter().map(|s| readiness(s))).await;
    let mut decided = Decided::default();
    for (server, (readiness, note)) in servers.iter().zip(decisions) {
        decided.readiness.insert(server.name.clone(), readiness);
        decided.notes.extend(note);
    }
    decided
}

/// Whether planmux can run `server` now, and a note when it could not tell.
async fn readiness(server: &ServerConfig) -> (Readiness, Option<String>) {
    let name = &server.name;
    // With client credentials planmux gets its own tokens: nobody signs in.
    let Transport::Http {
        url,
        headers,
        sign_in: SignIn::Browser(_),
    } = &server.transport
    else {
        return (Readiness::Ready, None);
    };
    if !server.unset.is_empty() {
        let note = format!(
            "\"{name}\" was not asked whether it needs sign-in ({}); if it does, run `planmux login {name}`",
            server.cannot_start().unwrap_or_default()
        );
        return (Readiness::Ready, Some(note));
    }
    match probe(url, headers, PROBE_TIMEOUT).await {
        Probe::SignInAsked(_) if signed_in(server) => (Readiness::Ready, None),
        Probe::SignInAsked(_) => (Readiness::NeedsSignIn, None),
        // mcp-remote falls back to SSE on a 404 too.
        Probe::Status(status @ (404 | 405)) => (
            Readiness::Unsupported(format!(
                "it answers HTTP {status} to a streamable HTTP request: it may serve only SSE, which planmux does not speak yet"
            )),
            None,
        ),
        Probe::Status(_) | Probe::LetIn => (Readiness::Ready, None),
        Probe::NoAnswer(why) => (
            Readiness::Ready,
            Some(format!(
                "\"{name}\" could not be asked whether it needs sign-in ({why}); if it does, run `planmux login {name}`"
            )),
        ),
    }
}

/// Whether the user has signed in to `server` with `planmux login` and the sign-in still
/// works as far as planmux knows (a token it holds or can renew; not refused since).
pub(super) fn signed_in(server: &ServerConfig) -> bool {
    matches!(
        crate::oauth::status(&server.name, &server.transport),
        Ok(Some(crate::oauth::Status::SignedIn { .. }))
    )
}
