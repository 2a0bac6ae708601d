//! Calls routed in place: the passthrough's lean path. The host's request line is
//! rewritten and queued for the server where it is read; the server's answer (and its
//! progress before it) is handed to a [`RouteSink`] where it is read, which makes the
//! host's message of it there. No task, channel or timer per call: one task per
//! connection watches the time limits (all a server's calls have the same one, so the
//! earliest deadline is the oldest call's), and the connection's watcher ends the calls
//! of a connection that ends. Cancellation comes from the host's side
//! ([`RoutedCall::cancel`]).
//!
//! What such a call meets is what a call through [`super::Server`] meets: the checkpoint
//! (a call takes its proof), the server's `call_timeout_ms` (the server is told), the
//! host's cancellation (the server is told), progress in wire order before the answer,
//! and the same errors when the server goes away. A call that cannot be routed so (the
//! server is starting or restarting, or its queue is full) takes the general path.

use std::ops::Range;
use std::sync::{Arc, Weak};

use serde_json::json;
use tokio::time::Instant;

use super::DownstreamError;
use super::raw::{RawCalls, RawReply, Waiter};
use super::server::SETTLE;
use crate::policy::Authorized;
use crate::wire::{Diverted, Forward};

/// Where routed calls' messages go: the host's side. Called where the server's messages
/// are read, in wire order; what it returns is written before the next one is read.
/// `key` is what the call was routed with, `id` its raw id (a key reused after a call
/// ended is told apart by it).
pub trait RouteSink: Send + Sync {
    /// The server answered the call, as `reply` (from server `server`).
    fn answered(&self, key: &str, id: &str, server: &str, reply: RawReply) -> Option<Forward>;
    /// The server sent progress for the call: its line, the token's bytes at `token`.
    fn progress(&self, key: &str, id: &str, line: Vec<u8>, token: Range<usize>) -> Option<Forward>;
    /// The call ended without an answer.
    fn failed(&self, key: &str, id: &str, error: DownstreamError) -> Option<Forward>;
}

/// A routed call waiting for its answer.
#[derive(Clone)]
pub(super) struct Routed {
    key: String,
    sink: Arc<dyn RouteSink>,
    /// The tool's name on its server, for errors.
    tool: String,
    deadline: Instant,
}

impl Routed {
    pub(super) fn answered(&self, id: &str, server: &str, reply: RawReply) -> Diverted {
        diverted(self.sink.answered(&self.key, id, server, reply))
    }

    pub(super) fn progress(&self, id: &str, line: Vec<u8>, token: Range<usize>) -> Diverted {
        diverted(self.sink.progress(&self.key, id, line, token))
    }

    /// Ends it without an answer: its sink's message for the host is written.
    async fn fail(&self, id: &str, error: DownstreamError) {
        if let Some(forward) = self.sink.failed(&self.key, id, error) {
            let _ = forward.send().await;
        }
    }
}

fn diverted(forward: Option<Forward>) -> Diverted {
    forward.map_or(Diverted::Taken, Diverted::Forward)
}

/// Where an exported tool can be called in place: its server's line connection, up now.
pub struct RawRoute {
    pub(super) exported: String,
    /// The tool's name on its server.
    pub(super) tool: String,
    pub(super) calls: Arc<RawCalls>,
}

impl RawRoute {
    /// Queues the call for the server, if its queue has room: `request(id, tool)` is the
    /// request's line with raw id `id` and the tool's name on its server (both as JSON
    /// strings). Its answer, progress and end go to `sink` under `key`. `None`: nothing
    /// was sent (a proof for another tool, a full queue, a closed connection).
    pub fn send(
        &self,
        proof: &Authorized,
        key: &str,
        sink: Arc<dyn RouteSink>,
        request: impl FnOnce(&str, &str) -> Vec<u8>,
    ) -> Option<RoutedCall> {
        if proof.tool() != self.exported {
            return None;
        }
        let calls = &self.calls;
        let id = calls.next_id();
        // Raw ids need no escaping.
        let tool = serde_json::to_string(&self.tool).unwrap_or_default();
        let bytes = request(&["\"", id.as_str(), "\""].concat(), &tool);
        let routed = Routed {
            key: key.to_owned(),
            sink,
            tool: self.tool.clone(),
            deadline: Instant::now() + calls.timeout,
        };
        // Waiting before it is sent: the answer may come at once.
        calls
            .table()
            .waiting
            .insert(id.clone(), Waiter::Routed(routed));
        if calls.writer.try_send(bytes).is_err() {
            calls.table().waiting.remove(&id);
            return None;
        }
        let start_sweeping = {
            let mut table = calls.table();
            !std::mem::replace(&mut table.sweeping, true)
        };
        if start_sweeping {
            tokio::spawn(sweep(Arc::downgrade(calls)));
        }
        Some(RoutedCall {
            calls: calls.clone(),
            id,
            tool: self.tool.clone(),
        })
    }
}

/// A call routed in place, until its answer or end reaches its sink.
pub struct RoutedCall {
    calls: Arc<RawCalls>,
    id: String,
    /// The tool's name on its server.
    tool: String,
}

impl RoutedCall {
    /// Its raw id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The error for the call, cancelled.
    pub fn cancelled(&self) -> DownstreamError {
        DownstreamError::Cancelled {
            server: self.calls.server.clone(),
            tool: self.tool.clone(),
        }
    }

    /// Stops waiting for the answer (it is dropped when it comes) and tells the server,
    /// if the call was still waiting (bounded: the server may have stopped reading).
    /// Whether it was.
    pub fn cancel(&self, reason: &str) -> bool {
        let waiting = self.calls.table().waiting.remove(&self.id).is_some();
        if waiting {
            let notice = cancelled(&self.id, reason);
            if let Err(notice) = self.calls.writer.try_send(notice) {
                let writer = self.calls.writer.clone();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(SETTLE, writer.send(notice)).await;
                });
            }
        }
        waiting
    }
}

/// The server's `notifications/cancelled` for raw id `id`.
fn cancelled(id: &str, reason: &str) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": reason}})
    .to_string()
    .into_bytes()
}

/// Ends the routed calls that outlive their deadline, until none is left.
async fn sweep(calls: Weak<RawCalls>) {
    loop {
        let next = {
            let Some(calls) = calls.upgrade() else {
                return;
            };
            let mut table = calls.table();
            let next = table.waiting.values().filter_map(|w| match w {
                Waiter::Routed(routed) => Some(routed.deadline),
                Waiter::Call(_) => None,
            });
            match next.min() {
                Some(next) => next,
                None => {
                    table.sweeping = false;
                    return;
                }
            }
        };
        tokio::time::sleep_until(next).await;
        let Some(calls) = calls.upgrade() else {
            return;
        };
        let now = Instant::now();
        let expired = calls.take_routed(|routed| routed.deadline <= now);
        for (id, routed) in expired {
            // As the general path does: the server is told, then the host.
            let _ = tokio::time::timeout(
                SETTLE,
                calls.writer.send(cancelled(&id, "timed out in planmux")),
            )
            .await;
            let error = DownstreamError::Timeout {
                server: calls.server.clone(),
                tool: routed.tool.clone(),
                after: calls.timeout,
            };
            routed.fail(&id, error).await;
        }
    }
}

impl RawCalls {
    /// Takes the routed calls `which` picks out of the table.
    fn take_routed(&self, which: impl Fn(&Routed) -> bool) -> Vec<(String, Routed)> {
        self.table()
            .waiting
            .extract_if(|_, waiter| matches!(waiter, Waiter::Routed(routed) if which(routed)))
            .filter_map(|(id, waiter)| match waiter {
                Waiter::Routed(routed) => Some((id, routed)),
                Waiter::Call(_) => None,
            })
            .collect()
    }

    /// The connection ended: its routed calls end with `error`.
    pub(crate) async fn end(&self, error: impl Fn() -> DownstreamError) {
        for (id, routed) in self.take_routed(|_| true) {
            routed.fail(&id, error()).await;
        }
    }
}
