//! A server that misbehaves on purpose, for tests and the hostile-input benchmark: a tool
//! whose input schema explodes when followed, answers nested as deep as asked, and, on
//! request, a `tools/list` that never answers or hands out next-page cursors for ever.

use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::model::{CallToolResult, JsonObject, ListToolsResult, Tool, ToolAnnotations};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::json;

use super::{failure, num_arg, tool};

/// Deepest answer `nest` builds: past planmux's default limit (512), to test it, and
/// shallow enough to build, send and drop on an ordinary stack.
const MAX_DEPTH: f64 = 2_000.0;

/// How `tools/list` behaves: normally (0, the default), or as below.
#[derive(Default)]
pub(super) struct Listing(AtomicU8);

/// Never answers (until cancelled).
const STALL: u8 = 1;
/// Answers every page with another cursor.
const ENDLESS: u8 = 2;

pub(super) fn tools() -> Vec<Tool> {
    vec![
        tool(
            "bomb",
            "Returns {\"ok\": true}. Its input schema refers to itself three times at every level.",
            json!({"type": "object", "allOf": [{"$ref": "#"}, {"$ref": "#"}, {"$ref": "#"}]}),
        )
        .with_annotations(ToolAnnotations::new().read_only(true).idempotent(true)),
        tool(
            "nest",
            "Returns structured content nested 'depth' levels deep.",
            json!({"type": "object", "properties": {"depth": {"type": "integer"}}, "required": ["depth"]}),
        )
        .with_annotations(ToolAnnotations::new().read_only(true).idempotent(true)),
        tool(
            "stall_listing",
            "From now on, tools/list never answers; sends tools/list_changed.",
            json!({"type": "object", "properties": {}}),
        ),
        tool(
            "endless_listing",
            "From now on, every tools/list page has a next page; sends tools/list_changed.",
            json!({"type": "object", "properties": {}}),
        ),
    ]
}

/// `tools/list`, as the current mode has it.
pub(super) async fn list(
    listing: &Listing,
    cursor: Option<&str>,
    ctx: &RequestContext<RoleServer>,
) -> Result<ListToolsResult, ErrorData> {
    match listing.0.load(Ordering::SeqCst) {
        STALL => {
            ctx.ct.cancelled().await;
            Err(ErrorData::internal_error("cancelled", None))
        }
        ENDLESS => {
            let page = cursor.and_then(|c| c.parse::<u64>().ok()).unwrap_or(0);
            let mut result = ListToolsResult::with_all_items(tools());
            result.next_cursor = Some((page + 1).to_string());
            Ok(result)
        }
        _ => Ok(ListToolsResult::with_all_items(tools())),
    }
}

pub(super) async fn call(
    name: &str,
    args: &JsonObject,
    ctx: &RequestContext<RoleServer>,
    listing: &Listing,
) -> CallToolResult {
    match name {
        "bomb" => CallToolResult::structured(json!({"ok": true})),
        "nest" => match num_arg(args, "depth") {
            Ok(Some(depth)) if (0.0..=MAX_DEPTH).contains(&depth) => {
                let mut value = json!([]);
                for _ in 1..(depth as usize).max(1) {
                    value = json!([value]);
                }
                CallToolResult::structured(json!({ "nested": value }))
            }
            Ok(_) => failure(format!("'depth' must be between 0 and {MAX_DEPTH}")),
            Err(f) => f,
        },
        "stall_listing" | "endless_listing" => {
            let mode = if name == "stall_listing" {
                STALL
            } else {
                ENDLESS
            };
            listing.0.store(mode, Ordering::SeqCst);
            let _ = ctx.peer.notify_tool_list_changed().await;
            CallToolResult::structured(json!({"listing": name}))
        }
        other => failure(format!("unknown tool '{other}'")),
    }
}
