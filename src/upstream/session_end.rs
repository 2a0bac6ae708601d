//! What a host session leaves behind when it closes ([`SessionEnd`]): its resource
//! subscriptions, given back to the count.

use std::sync::Arc;

use rmcp::model::UnsubscribeRequestParams;
use tokio_util::sync::CancellationToken;

use crate::downstream::{Downstreams, HostLink, Session};

/// What a session leaves behind when it closes: its resource subscriptions, given back
/// to the count (the server hears of the last one going).
pub(super) struct SessionEnd {
    pub(super) session: Arc<Session>,
    pub(super) host: Arc<HostLink>,
    pub(super) downstreams: Arc<Downstreams>,
    pub(super) shutdown: CancellationToken,
}

impl Drop for SessionEnd {
    fn drop(&mut self) {
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
