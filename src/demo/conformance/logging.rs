//! The conformance fixture's log messages: sent with its own `logger` name, and only at
//! or above the level a client asked for with `logging/setLevel`.

use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::{Peer, RoleServer};
use serde_json::Value;

/// The `logger` named in the log messages this server sends.
const LOGGER: &str = "planmux-demo-conformance";

/// The level a client asked for, shared by every session of one fixture.
#[derive(Default)]
pub(super) struct Logging {
    /// The least severe level a client asked for with `logging/setLevel`, as a `rank`;
    /// 0 (debug) until then, so that a client that never sets a level still sees everything.
    min_level: AtomicU8,
}

impl Logging {
    /// `logging/setLevel`: messages less severe than `level` are no longer sent.
    pub(super) fn set(&self, level: LoggingLevel) {
        self.min_level.store(rank(level), Ordering::SeqCst);
    }

    /// Sends a log message unless the client asked for less.
    pub(super) async fn log(
        &self,
        peer: &Peer<RoleServer>,
        level: LoggingLevel,
        message: impl Into<String>,
    ) {
        if rank(level) < self.min_level.load(Ordering::SeqCst) {
            return;
        }
        let param = LoggingMessageNotificationParam::new(level, Value::String(message.into()))
            .with_logger(LOGGER);
        let _ = peer.notify_logging_message(param).await;
    }
}

/// A level's severity, least severe first, so `logging/setLevel` can filter with `<`.
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}
