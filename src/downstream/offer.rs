//! What a server offers ([`Offer`]): its tools, prompts, resources and templates, each
//! list followed page by page (at most [`MAX_TOOL_PAGES`]), and its instructions. Tools
//! must list; a server whose prompts or resources fail to list still serves its tools.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};

use rmcp::model::{PaginatedRequestParams, Prompt, Resource, ResourceTemplate, Tool};
use rmcp::service::ServiceError;
use rmcp::{Peer, RoleClient};

use super::fields::ToolFields;
use super::remembered::Remembered;

/// Most pages of `tools/list` followed: a server that hands out cursors for ever is cut
/// off here (at rmcp's usual page sizes, far more tools than any host can show).
pub const MAX_TOOL_PAGES: usize = 100;

/// One page of a list: its items, the next cursor, and how long it may be cached
/// (`ttlMs`, 2026-07-28), if the server said.
type Page<T> = (Vec<T>, Option<String>, Option<u64>);

/// Follows `nextCursor` for at most [`MAX_TOOL_PAGES`] pages of one list; its items, and
/// the shortest time a page may be cached, if the server said.
async fn paged<T, F, Fut>(what: &str, mut page: F) -> Result<(Vec<T>, Option<u64>), String>
where
    F: FnMut(PaginatedRequestParams) -> Fut,
    Fut: Future<Output = Result<Page<T>, ServiceError>>,
{
    let mut items = Vec::new();
    let mut cursor = None;
    let mut fresh: Option<u64> = None;
    for _ in 0..MAX_TOOL_PAGES {
        let (more, next, ttl) = page(PaginatedRequestParams::default().with_cursor(cursor))
            .await
            .map_err(|e| format!("{what} failed: {e}"))?;
        items.extend(more);
        fresh = shortest(fresh, ttl);
        cursor = next;
        if cursor.is_none() {
            return Ok((items, fresh));
        }
    }
    Err(format!(
        "{what} still had more after {MAX_TOOL_PAGES} pages ({} items); gave up",
        items.len()
    ))
}

/// What a server offers, as last listed: its tools (after include/exclude), prompts,
/// resources and resource templates, and its instructions.
#[derive(Debug, Clone, Default)]
pub struct Offer {
    pub tools: Vec<Tool>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
    /// The server's `instructions`, as it gave them.
    pub instructions: Option<String>,
    /// Whether it takes `resources/subscribe`.
    pub subscribe: bool,
    /// How long its lists may be cached, the shortest `ttlMs` it gave (2026-07-28), if any.
    pub ttl_ms: Option<u64>,
}

/// The shorter of two cache times, either of which may be unsaid.
pub(super) fn shortest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What a server offers now: as it last listed it, or, before it first lists, as it
/// listed when it last started ([`Remembered`]).
pub(super) struct Offered {
    current: RwLock<Offer>,
    memory: Option<Remembered>,
    /// Whether `current` is still the remembered offer.
    recalled: AtomicBool,
}

impl Offered {
    /// What `memory` remembers (its tools those `keeps` keeps, their unmodelled fields
    /// into `fields`), or nothing.
    pub fn new(
        memory: Option<Remembered>,
        keeps: impl Fn(&str) -> bool,
        fields: &ToolFields,
    ) -> Self {
        let mut offer = Offer::default();
        let recalled = memory.as_ref().and_then(Remembered::recall);
        if let Some(recalled) = &recalled {
            fields.keep(&recalled.raw);
            offer.tools = recalled.tools.clone();
            offer.tools.retain(|t| keeps(&t.name));
            offer.instructions = recalled.instructions.clone();
        }
        Offered {
            current: RwLock::new(offer),
            memory,
            recalled: recalled.is_some().into(),
        }
    }

    /// The offer as it is now.
    pub fn get(&self) -> Offer {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Takes what `server` just listed (with its tools' unmodelled `fields`), and
    /// remembers it for the next start.
    pub async fn keep(&self, server: &str, offer: Offer, fields: &ToolFields) {
        if let Some(memory) = &self.memory {
            memory
                .keep(server, &offer.tools, offer.instructions.as_deref(), fields)
                .await;
        }
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = offer;
        self.recalled.store(false, Ordering::Relaxed);
    }

    /// How long its lists may be cached, as it last said (2026-07-28 `ttlMs`).
    pub fn ttl_ms(&self) -> Option<u64> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .ttl_ms
    }

    /// Whether the offer is still the remembered one.
    pub fn is_recalled(&self) -> bool {
        self.recalled.load(Ordering::Relaxed)
    }

    /// Drops the remembered offer once a start failed: a server that failed to start
    /// offers nothing.
    pub fn forget_recalled(&self) {
        if self.recalled.swap(false, Ordering::Relaxed) {
            *self.current.write().unwrap_or_else(PoisonError::into_inner) = Offer::default();
        }
    }
}

/// A list that failed is left out, saying why.
fn lenient<T>(
    server: &str,
    listed: Result<(Vec<T>, Option<u64>), String>,
) -> (Vec<T>, Option<u64>) {
    listed.unwrap_or_else(|error| {
        tracing::warn!(server, %error, "left out");
        (Vec::new(), None)
    })
}

/// Lists everything `peer` offers. Tools must list; a server whose prompts or resources
/// fail to list still serves its tools (the failure is logged).
pub(super) async fn list_offer(peer: &Peer<RoleClient>, server: &str) -> Result<Offer, String> {
    let (tools, ttl_ms) = paged("tools/list", |p| async move {
        peer.list_tools(Some(p))
            .await
            .map(|r| (r.tools, r.next_cursor, r.ttl_ms))
    })
    .await?;
    let info = peer.peer_info();
    let capabilities = info
        .as_ref()
        .map(|i| i.capabilities.clone())
        .unwrap_or_default();
    let mut offer = Offer {
        tools,
        ttl_ms,
        instructions: info.as_ref().and_then(|i| i.instructions.clone()),
        ..Offer::default()
    };
    if capabilities.prompts.is_some() {
        let listed = paged("prompts/list", |p| async move {
            peer.list_prompts(Some(p))
                .await
                .map(|r| (r.prompts, r.next_cursor, r.ttl_ms))
        })
        .await;
        let ttl;
        (offer.prompts, ttl) = lenient(server, listed);
        offer.ttl_ms = shortest(offer.ttl_ms, ttl);
    }
    if let Some(resources) = &capabilities.resources {
        offer.subscribe = resources.subscribe == Some(true);
        let listed = paged("resources/list", |p| async move {
            peer.list_resources(Some(p))
                .await
                .map(|r| (r.resources, r.next_cursor, r.ttl_ms))
        })
        .await;
        let ttl;
        (offer.resources, ttl) = lenient(server, listed);
        offer.ttl_ms = shortest(offer.ttl_ms, ttl);
        let listed = paged("resources/templates/list", |p| async move {
            peer.list_resource_templates(Some(p))
                .await
                .map(|r| (r.resource_templates, r.next_cursor, r.ttl_ms))
        })
        .await;
        let ttl;
        (offer.templates, ttl) = lenient(server, listed);
        offer.ttl_ms = shortest(offer.ttl_ms, ttl);
    }
    Ok(offer)
}
