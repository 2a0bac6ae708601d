//! Notifications taken off a downstream connection in wire order.
//!
//! rmcp hands each notification to its handler on a task of its own, so the last progress
//! notification of a call can lose the race against the call's response, and the route
//! for it is gone by the time it runs. The tap sits between the transport and rmcp: it
//! moves each routed progress notification into its call's queue before rmcp even sees the
//! next message, so when a response arrives, every progress notification sent before it
//! is already queued, and the call forwards them all before it replies.
//!
//! A log message has the same race over HTTP, where it goes to the session whose call is
//! in flight on its server: by the time its handler runs, that call may have ended and
//! another session's begun. So the tap decides whom it is for as it is read ([`LogFor`]).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{JsonRpcMessage, ProgressNotificationParam, ProgressToken, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{Peer, RoleClient, RoleServer};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::Caller;

/// Progress that arrived before its call registered a route (the request is on the wire
/// before rmcp tells the caller its token) is kept this long, then dropped oldest first.
const UNCLAIMED: usize = 64;

/// Downstream progress token → the queue of the call in flight that owns it. One per
/// connection: rmcp numbers tokens per connection, so a restart starts over.
#[derive(Default)]
pub(crate) struct ProgressRoutes(Mutex<Routes>);

#[derive(Default)]
struct Routes {
    queues: HashMap<ProgressToken, mpsc::UnboundedSender<ProgressNotificationParam>>,
    unclaimed: VecDeque<ProgressNotificationParam>,
}

impl ProgressRoutes {
    /// Queues `token`'s notifications (those already here first) on the returned receiver
    /// until the guard is dropped.
    pub(crate) fn route(
        self: &Arc<Self>,
        token: ProgressToken,
    ) -> (
        RouteGuard,
        mpsc::UnboundedReceiver<ProgressNotificationParam>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut routes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (early, rest): (Vec<_>, Vec<_>) = routes
            .unclaimed
            .drain(..)
            .partition(|p| p.progress_token == token);
        routes.unclaimed = rest.into();
        for param in early {
            let _ = tx.send(param);
        }
        routes.queues.insert(token.clone(), tx);
        (
            RouteGuard {
                routes: self.clone(),
                token,
            },
            rx,
        )
    }

    /// Queues a notification for its call, or keeps it a while for a call about to claim it.
    fn deliver(&self, param: ProgressNotificationParam) {
        let mut routes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match routes.queues.get(&param.progress_token) {
            Some(queue) => {
                let _ = queue.send(param);
            }
            None => {
                if routes.unclaimed.len() == UNCLAIMED {
                    routes.unclaimed.pop_front();
                }
                routes.unclaimed.push_back(param);
            }
        }
    }
}

/// Ends a route (and so closes its queue once drained) when the call ends.
pub(crate) struct RouteGuard {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        let mut routes = self.routes.0.lock().unwrap_or_else(PoisonError::into_inner);
        routes.queues.remove(&self.token);
    }
}

/// One call's progress on its way to the host, under the host's token. Most calls send
/// none, so a task to forward them starts only with the first; at the end, everything
/// queued before the answer is forwarded before the answer goes.
pub(crate) struct Forwarding {
    route: RouteGuard,
    /// Until the task starts.
    queue: Option<mpsc::UnboundedReceiver<ProgressNotificationParam>>,
    to: Peer<RoleServer>,
    token: ProgressToken,
    task: Option<JoinHandle<()>>,
}

impl Forwarding {
    /// Forwards `route`'s notifications (arriving on `queue`) to `to` as `token`'s.
    pub(crate) fn new(
        (route, queue): (
            RouteGuard,
            mpsc::UnboundedReceiver<ProgressNotificationParam>,
        ),
        to: Peer<RoleServer>,
        token: ProgressToken,
    ) -> Self {
        Self {
            route,
            queue: Some(queue),
            to,
            token,
            task: None,
        }
    }

    /// Resolves when the first notification arrives, having started the task that forwards
    /// it and the rest; never resolves again. Cancel-safe.
    pub(crate) async fn started(&mut self) {
        let Some(queue) = self.queue.as_mut() else {
            return std::future::pending().await;
        };
        let Some(first) = queue.recv().await else {
            return std::future::pending().await;
        };
        let Some(mut queue) = self.queue.take() else {
            return;
        };
        let (to, token) = (self.to.clone(), self.token.clone());
        self.task = Some(tokio::spawn(async move {
            forward(&to, &token, first).await;
            while let Some(param) = queue.recv().await {
                forward(&to, &token, param).await;
            }
        }));
    }

    /// Ends the route and forwards what is still queued, within `limit` (the host may
    /// have stopped reading).
    pub(crate) async fn finish(self, limit: Duration) {
        let Self {
            route,
            queue,
            to,
            token,
            task,
        } = self;
        drop(route);
        let rest = async move {
            if let Some(task) = task {
                let _ = task.await;
            } else if let Some(mut queue) = queue {
                while let Some(param) = queue.recv().await {
                    forward(&to, &token, param).await;
                }
            }
        };
        let _ = tokio::time::timeout(limit, rest).await;
    }
}

/// Sends one notification to the host under its own token.
async fn forward(
    to: &Peer<RoleServer>,
    token: &ProgressToken,
    mut param: ProgressNotificationParam,
) {
    param.progress_token = token.clone();
    let _ = to.notify_progress(param).await;
}

/// Whom a log message is for, decided when it was read: the caller of the call in
/// flight on its server, or why there is none to tell (carried to the handler in the
/// notification's extensions).
#[derive(Clone)]
pub(crate) struct LogFor(pub(crate) Result<Caller, String>);

/// Decides whom a log message read now is for.
pub(crate) type LogRouter = Arc<dyn Fn() -> Result<Caller, String> + Send + Sync>;

/// A transport that takes progress notifications off the wire in order, and marks each
/// log message with whom it is for when there is a `router` (many sessions).
pub(crate) struct ProgressTap<T> {
    inner: T,
    routes: Arc<ProgressRoutes>,
    router: Option<LogRouter>,
}

impl<T> ProgressTap<T> {
    pub(crate) fn new(inner: T, routes: Arc<ProgressRoutes>, router: Option<LogRouter>) -> Self {
        Self {
            inner,
            routes,
            router,
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for ProgressTap<T> {
    type Error = T::Error;

    /// Shown in rmcp's errors: a short name rather than this wrapper's type path.
    fn name() -> std::borrow::Cow<'static, str> {
        "downstream connection".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let mut message = self.inner.receive().await?;
            if let JsonRpcMessage::Notification(n) = &mut message {
                match &mut n.notification {
                    ServerNotification::ProgressNotification(progress) => {
                        // Nothing is awaited between reading and queueing, so dropping
                        // this future (rmcp selects over it) cannot lose a notification.
                        self.routes.deliver(progress.params.clone());
                        continue;
                    }
                    ServerNotification::LoggingMessageNotification(log) => {
                        if let Some(router) = &self.router {
                            log.extensions.insert(LogFor(router()));
                        }
                    }
                    _ => {}
                }
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
#[allow(deprecated)] // logging: deprecated by SEP-2577, still what servers send
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rmcp::model::{
        GetExtensions, LoggingLevel, LoggingMessageNotificationParam, ServerJsonRpcMessage,
    };
    use serde_json::json;

    use super::*;

    /// A transport that hands over the messages it was given, then ends.
    struct Given(VecDeque<RxJsonRpcMessage<RoleClient>>);

    impl Transport<RoleClient> for Given {
        type Error = std::io::Error;

        fn send(
            &mut self,
            _item: TxJsonRpcMessage<RoleClient>,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            std::future::ready(Ok(()))
        }

        async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
            self.0.pop_front()
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    /// Whom a log message is for is decided as it is read, not when its handler runs:
    /// what changes after (the call it came during ending) does not change it.
    #[tokio::test]
    async fn a_log_message_is_routed_as_it_is_read() {
        let log = ServerNotification::LoggingMessageNotification(rmcp::model::Notification::new(
            LoggingMessageNotificationParam::new(LoggingLevel::Info, json!("working")),
        ));
        let message = ServerJsonRpcMessage::notification(log);
        let given = Given(VecDeque::from([message.clone(), message]));
        let state = Arc::new(AtomicUsize::new(0));
        let router: LogRouter = {
            let state = state.clone();
            Arc::new(move || Err(format!("read at state {}", state.load(Ordering::SeqCst))))
        };
        let mut tap = ProgressTap::new(given, Arc::default(), Some(router));
        let routed = |message: Option<RxJsonRpcMessage<RoleClient>>| match message {
            Some(JsonRpcMessage::Notification(mut n)) => n
                .notification
                .extensions_mut()
                .get::<LogFor>()
                .map(|LogFor(found)| found.clone().err().unwrap_or_default()),
            _ => None,
        };
        let first = tap.receive().await;
        state.store(1, Ordering::SeqCst);
        let second = tap.receive().await;
        assert_eq!(routed(first).as_deref(), Some("read at state 0"));
        assert_eq!(routed(second).as_deref(), Some("read at state 1"));
    }
}
