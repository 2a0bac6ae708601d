//! How long a 2026-07-28 host may keep planmux's merged lists: `ttlMs` the shortest a
//! server gave, never longer than `config::LIST_TTL_MS`; `cacheScope: "private"`, since
//! what a list holds depends on planmux's state (quarantine, reloads, sign-ins). A host
//! of an earlier era gets neither (rmcp would pass them on).

use rmcp::RoleServer;
use rmcp::model::ProtocolVersion;
use rmcp::service::RequestContext;

use super::Upstream;

impl Upstream {
    /// The lists' `ttlMs` for the host of `context`: `None` before 2026-07-28.
    pub(super) fn list_ttl(&self, context: &RequestContext<RoleServer>) -> Option<u64> {
        let modern = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        modern.then(|| self.downstreams.list_ttl_ms())
    }
}

/// `$result` (a list result) with the lists' cache hints, when `$ttl` (milliseconds) is
/// some.
macro_rules! cached {
    ($result:expr, $ttl:expr) => {{
        let mut result = $result;
        if let Some(ttl) = $ttl {
            result.ttl_ms = Some(ttl);
            result.cache_scope = Some(rmcp::model::CacheScope::Private);
        }
        result
    }};
}

pub(super) use cached;
