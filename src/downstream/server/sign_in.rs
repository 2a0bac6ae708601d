//! A server that signs in with OAuth, as its lifecycle sees it: signed out when its
//! connection found that the user must sign in (the connection stopped, calls refused at
//! once), waiting until its sign-in record changes (`planmux login`), one host offered
//! the sign-in at a time.

use std::sync::{Arc, PoisonError};
use std::time::Instant;

use super::{Live, Server, State};
use crate::config::{SignIn, Transport};
use crate::oauth::store::Store;

impl Server {
    /// Whether it waits for the user to sign in, with no sign-in made since it asked.
    pub fn waits_for_sign_in(&self) -> bool {
        match self.state() {
            State::SignedOut { stamp, .. } => stamp == self.sign_in_stamp(),
            _ => false,
        }
    }

    /// The turn to offer a host its sign-in: one at a time.
    pub async fn sign_in_turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.sign_in_turn.lock().await
    }

    /// Whether it waits for a sign-in that has since been made (its store changed): if
    /// so it is marked for a restart at once, so that only one caller reconnects it.
    pub(crate) fn signed_in_since(&self) -> bool {
        let stamp = self.sign_in_stamp();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match &*state {
            State::SignedOut { stamp: seen, .. } if *seen != stamp => {
                *state = State::Failed {
                    error: "signing in again".into(),
                    failures: 0,
                    retry_at: Instant::now(),
                };
                true
            }
            _ => false,
        }
    }

    /// When its sign-in record last changed (`None`: no OAuth sign-in, or none kept).
    pub(super) fn sign_in_stamp(&self) -> Option<std::time::SystemTime> {
        let store = self
            .sign_in_store
            .get_or_init(|| match &self.config.transport {
                Transport::Http {
                    url,
                    sign_in: SignIn::Browser(_),
                    ..
                } => Store::new(&self.config.name, url).ok(),
                _ => None,
            });
        store.as_ref()?.stamp()
    }

    /// When the connection `live` found that the server needs the user to sign in: the
    /// server is marked signed out and the connection stopped (it does not end by itself:
    /// the server refuses each request), so that no call goes to it until a sign-in.
    pub(super) fn sign_out(&self, live: &Live) -> Option<crate::oauth::SignedOut> {
        let signed_out = self.standing.signed_out()?;
        let stamp = self.sign_in_stamp();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let State::Ready(current) = &*state
            && std::ptr::eq(Arc::as_ptr(current), live)
        {
            tracing::warn!(server = %self.config.name, reason = %signed_out.why, "the sign-in stopped working: planmux login {}", self.config.name);
            current.stop.cancel();
            *state = State::SignedOut {
                signed_out: signed_out.clone(),
                stamp,
            };
        }
        Some(signed_out)
    }
}
