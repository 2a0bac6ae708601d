//! A 2026-07-28 server's resource subscriptions. `resources/subscribe` is gone from that
//! era: each subscribed URI is a `subscriptions/listen` stream of its own, held on a task
//! until the host unsubscribes or the connection ends; its updates reach the host as a
//! legacy server's `notifications/resources/updated` would.

use std::sync::{Arc, PoisonError};

use rmcp::model::{EmptyResult, ServerNotification, ServerResult, SubscriptionFilter};
use tokio_util::sync::CancellationToken;

use super::Server;
use crate::downstream::DownstreamError;

impl Server {
    /// Subscribes to `uri` on its listen stream, once the server has acknowledged it.
    pub(crate) async fn watch(
        self: &Arc<Self>,
        uri: &str,
        cancel: &CancellationToken,
    ) -> Result<ServerResult, DownstreamError> {
        let name = &self.config.name;
        let live = tokio::select! {
            live = self.live() => live?,
            () = cancel.cancelled() => return Err(DownstreamError::Cancelled {
                server: name.clone(),
                tool: format!("resources/subscribe '{uri}'"),
            }),
        };
        let mut filter = SubscriptionFilter::new();
        filter.resource_subscriptions = Some(vec![uri.to_owned()]);
        let refused = |message: String| DownstreamError::Protocol {
            server: name.clone(),
            message,
        };
        let opened = tokio::time::timeout(self.config.call_timeout, live.peer.listen(filter));
        let mut subscription = match opened.await {
            Ok(Ok(subscription)) => subscription,
            Ok(Err(e)) => return Err(refused(format!("refused to watch '{uri}': {e}"))),
            Err(_) => return Err(refused(format!("did not acknowledge watching '{uri}'"))),
        };
        let accepted = subscription.acknowledged().resource_subscriptions.as_ref();
        if !accepted.is_some_and(|uris| uris.iter().any(|u| u == uri)) {
            let _ = subscription.cancel().await;
            return Err(refused(format!("does not offer updates of '{uri}'")));
        }
        let stop = CancellationToken::new();
        let replaced = self
            .watches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uri.to_owned(), stop.clone());
        if let Some(replaced) = replaced {
            replaced.cancel();
        }
        let (host, ended) = (self.host.clone(), live.ended.clone());
        self.tracker.spawn(async move {
            loop {
                tokio::select! {
                    next = subscription.next() => match next {
                        Ok(Some(ServerNotification::ResourceUpdatedNotification(updated))) => {
                            host.notify_resource_updated(updated.params).await;
                        }
                        Ok(Some(_)) => {}
                        Ok(None) | Err(_) => return,
                    },
                    () = stop.cancelled() => break,
                    () = ended.cancelled() => return,
                }
            }
            let limit = std::time::Duration::from_secs(1);
            let _ = tokio::time::timeout(limit, subscription.cancel()).await;
        });
        Ok(ServerResult::EmptyResult(EmptyResult {}))
    }

    /// Ends the subscription to `uri`, if there is one.
    pub(crate) fn unwatch(&self, uri: &str) -> ServerResult {
        let watch = self
            .watches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uri);
        if let Some(stop) = watch {
            stop.cancel();
        }
        ServerResult::EmptyResult(EmptyResult {})
    }
}
