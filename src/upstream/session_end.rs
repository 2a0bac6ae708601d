//! What a host session leaves behind when it closes ([`SessionEnd`]): its resource
//! subscriptions, given back to the count; its place among the HTTP sessions that take
//! the passthrough ([`Joins`]).

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::UnsubscribeRequestParams;
use rmcp::service::NotificationContext;
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::downstream::{Downstreams, HostLink, Session};
use crate::runner::PlanRunner;

/// What runs when a session ends ([`Joins::join`]).
pub type Leave = Box<dyn FnOnce() + Send + Sync>;

/// Where an HTTP session's upstream joins the passthrough for HTTP sessions
/// (`passthrough::sessions`) once its host introduced itself.
pub trait Joins: Send + Sync {
    /// Session `id` (rmcp's) joins, with what its calls need; the returned function runs
    /// when the session ends.
    fn join(&self, id: &str, joining: Joining) -> Option<Leave>;
}

/// What an HTTP session's calls on the passthrough need: its upstream's parts, and its
/// host.
pub struct Joining {
    pub downstreams: Arc<Downstreams>,
    pub runner: Arc<PlanRunner>,
    pub host: Arc<HostLink>,
    pub session: Arc<Session>,
    pub shutdown: CancellationToken,
    pub peer: Peer<RoleServer>,
}

/// What a session leaves behind when it closes: its resource subscriptions, given back
/// to the count (the server hears of the last one going).
pub(super) struct SessionEnd {
    pub(super) session: Arc<Session>,
    pub(super) host: Arc<HostLink>,
    pub(super) downstreams: Arc<Downstreams>,
    pub(super) shutdown: CancellationToken,
    pub(super) runner: Arc<PlanRunner>,
    /// What runs when it ends (it leaves the HTTP passthrough).
    pub(super) leave: Mutex<Option<Leave>>,
}

impl SessionEnd {
    /// The session joins `joins` under the id its host's `notifications/initialized`
    /// POST carried (`context`), and leaves it when it ends.
    pub(super) fn join(&self, joins: &dyn Joins, context: &NotificationContext<RoleServer>) {
        let joining = Joining {
            downstreams: self.downstreams.clone(),
            runner: self.runner.clone(),
            host: self.host.clone(),
            session: self.session.clone(),
            shutdown: self.shutdown.clone(),
            peer: context.peer.clone(),
        };
        let parts = context.extensions.get::<http::request::Parts>();
        let id = parts.and_then(|parts| parts.headers.get("mcp-session-id")?.to_str().ok());
        if let Some(leave) = id.and_then(|id| joins.join(id, joining)) {
            *self.leave.lock().unwrap_or_else(PoisonError::into_inner) = Some(leave);
        }
    }
}

impl Drop for SessionEnd {
    fn drop(&mut self) {
        let leave = self.leave.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(leave) = leave.take() {
            leave();
        }
        let uris = self.session.unsubscribe_all();
        if uris.is_empty() || self.shutdown.is_cancelled() {
            return;
        }
        let (host, downstreams) = (self.host.clone(), self.downstreams.clone());
        let cancel = self.shutdown.child_token();
        self.downstreams.track(async move {
            for uri in uris {
                let params = UnsubscribeRequestParams::new(uri.clone());
                let unsubscribe = downstreams.unsubscribe(params, &cancel);
                if let Err(e) = host.release(&uri, unsubscribe).await {
                    tracing::debug!(uri = %uri, error = %e, "could not unsubscribe from a resource");
                }
            }
        });
    }
}
