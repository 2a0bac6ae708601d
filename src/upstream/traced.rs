//! A host's `tools/call` as a trace's span (`traces.rs`), when traces are on: it continues
//! the host's trace (`traceparent` in the request's `_meta`, else the HTTP request's
//! header), and what the call does (a plan, a downstream call) runs inside it.

use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::Upstream;
use crate::traces::{self, FutureExt as _, attribute};

impl Upstream {
    /// [`Upstream::call_tool_here`], in a span of its own when traces are on.
    pub(super) async fn traced_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !traces::on() {
            return self.call_tool_here(request, context).await;
        }
        let traceparent = traceparent_of(&request, &context);
        let tool = request.name.to_string();
        let name = format!("tools/call {tool}");
        let Some(cx) = traces::host_request(
            name,
            traceparent.as_deref(),
            vec![attribute("mcp.tool", tool)],
        ) else {
            return self.call_tool_here(request, context).await;
        };
        let answer = self
            .call_tool_here(request, context)
            .with_context(cx.clone())
            .await;
        let error = match &answer {
            Err(error) => Some(error.message.to_string()),
            Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => {
                Some("the tool's result is an error".to_owned())
            }
            Ok(_) => None,
        };
        traces::end(&cx, Vec::new(), error);
        answer
    }
}

/// The host's `traceparent`: in the request's `_meta` (SEP-414), else its HTTP header.
fn traceparent_of(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Option<String> {
    let in_meta = (request.meta.as_ref())
        .and_then(|meta| meta.get_traceparent())
        .or_else(|| context.meta.get_traceparent());
    if let Some(traceparent) = in_meta {
        return Some(traceparent.to_owned());
    }
    let parts = context.extensions.get::<http::request::Parts>()?;
    let header = parts.headers.get("traceparent")?;
    header.to_str().ok().map(str::to_owned)
}
