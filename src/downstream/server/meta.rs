//! The `_meta` planmux adds to a request to a server.

use rmcp::model::{ClientCapabilities, RequestMetaObject};

use crate::traces;

/// The `_meta` a request to a server carries beyond rmcp's own: the client capabilities
/// `declared` for this call, and the current span's `traceparent` (SEP-414).
pub(super) fn request_meta(declared: Option<&ClientCapabilities>) -> Option<RequestMetaObject> {
    let traceparent = traces::traceparent();
    if declared.is_none() && traceparent.is_none() {
        return None;
    }
    let mut meta = RequestMetaObject::new();
    if let Some(caps) = declared {
        meta.set_client_capabilities(caps.clone());
    }
    if let Some(traceparent) = traceparent {
        meta.set_traceparent(traceparent);
    }
    Some(meta)
}
