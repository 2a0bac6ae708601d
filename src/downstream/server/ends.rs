//! How the end of a server's connection is recorded (died: restarted at the next call;
//! needs a sign-in: signed out) and what a call that met it is told.

use std::sync::{Arc, PoisonError};
use std::time::Instant;

use rmcp::service::ServiceError;

use super::super::DownstreamError;
use super::super::calls::SETTLE;
use super::{Live, Server, State};

impl Server {
    /// Records that the current connection died.
    pub(crate) fn mark_dead(&self, live: &Arc<Live>, reason: String) {
        let reason = crate::text::redact_urls(&reason);
        if self.sign_out(live).is_some() {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let State::Ready(current) = &*state
            && Arc::ptr_eq(current, live)
        {
            tracing::warn!(server = %self.config.name, reason = %reason, "downstream exited; it restarts at the next call");
            *state = State::Failed {
                error: reason,
                failures: 0,
                retry_at: Instant::now(),
            };
        }
    }

    /// Waits (briefly) until the watcher has noticed that `live` ended.
    pub(in crate::downstream) async fn settle(&self, live: &Live) {
        let _ = tokio::time::timeout(SETTLE, live.ended.cancelled()).await;
    }

    /// The error for a call whose connection broke, naming the server and, when known, why.
    pub(in crate::downstream) async fn exited(
        &self,
        live: &Live,
        error: ServiceError,
    ) -> DownstreamError {
        if let Some(signed_out) = self.sign_out(live) {
            return DownstreamError::NeedsSignIn {
                server: self.config.name.clone(),
                signed_out,
            };
        }
        self.settle(live).await;
        self.exit_error(&error)
    }

    /// The error for a call whose connection ended, once the watcher recorded why.
    pub(super) fn exit_error(&self, error: &ServiceError) -> DownstreamError {
        // Libraries quote the URL they failed on: what reaches the host and the model
        // has its user info and query hidden, as the log has.
        let detail = match self.state() {
            State::Failed { error, .. } => error,
            _ => crate::text::redact_urls(&error.to_string()),
        };
        DownstreamError::Exited {
            server: self.config.name.clone(),
            detail,
        }
    }
}
