//! The servers that sign in with OAuth, as the set sees them: whether a host's call may
//! wait for a sign-in, which server a host may be offered, and the reconnect of those a
//! sign-in made elsewhere (`planmux login`) has let in again.

use std::sync::Arc;

use super::{Downstreams, Server};
use crate::config::{SignIn, Transport};

impl Downstreams {
    /// Reconnects, in the background, each server that waited for a sign-in made since
    /// (`planmux login` in another process): the host gets its tools without a call first.
    pub fn reconnect_signed_in(&self) {
        for server in self.servers().iter().filter(|s| s.signed_in_since()) {
            let server = server.clone();
            self.tracker.spawn(async move {
                let name = server.config.name.clone();
                match server.relist().await {
                    Ok(()) => tracing::info!(server = %name, "signed in: connected again"),
                    Err(error) => tracing::warn!(server = %name, %error, "signed in, but it failed to connect"),
                }
            });
        }
    }

    /// Whether any server signs in with OAuth in a browser (a host's call to it may wait
    /// for a sign-in and go again).
    pub fn any_browser_sign_in(&self) -> bool {
        self.servers().iter().any(|s| {
            matches!(
                s.config.transport,
                Transport::Http {
                    sign_in: SignIn::Browser(_),
                    ..
                }
            )
        })
    }

    /// The server `name` when it signs in with OAuth in a browser: a host that cannot
    /// reach it for want of a sign-in may be offered the link.
    pub fn signs_in_with_browser(&self, name: &str) -> Option<Arc<Server>> {
        let server = self.server(name)?;
        matches!(
            server.config.transport,
            Transport::Http {
                sign_in: SignIn::Browser(_),
                ..
            }
        )
        .then_some(server)
    }
}
