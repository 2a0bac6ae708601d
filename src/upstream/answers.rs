//! What a host reads when a request it sent fails: one mapping per kind of request. A
//! `tools/call` ([`host_answer`]) gets a server's JSON-RPC error as it is, an unknown
//! tool as invalid params, anything a model should read as a tool result with `isError`;
//! any other routed request ([`routed_error`]) gets a JSON-RPC error.

use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResult, ContentBlock, ReadResourceResponse, ReadResourceResult, ResultType,
};
use rmcp::service::RequestContext;
use tokio_util::sync::CancellationToken;

use crate::downstream::DownstreamError;

/// Longest error text a tool result carries: room for every plan issue reported, a cap
/// for anything quoted from outside.
const MAX_ERROR_CHARS: usize = 16_000;

/// A resource's contents as the host gets them: `resultType: "complete"`, which a
/// 2026-07-28 host requires (rmcp strips it for older hosts).
pub(super) fn complete_read(mut result: ReadResourceResult) -> ReadResourceResponse {
    result.result_type = Some(ResultType::COMPLETE);
    result.into()
}

/// Runs a routed request until it ends or the host cancels it (then the downstream is
/// told, and the request ends with that).
pub(super) async fn cancellable<T>(
    request: impl Future<Output = Result<T, DownstreamError>>,
    cancel: &CancellationToken,
    context: &RequestContext<RoleServer>,
) -> Result<T, DownstreamError> {
    tokio::pin!(request);
    tokio::select! {
        result = &mut request => result,
        () = context.ct.cancelled() => {
            cancel.cancel();
            request.await
        }
    }
}

/// A routed request's failure as the host's error: a server's own error as it is, an
/// unknown name as invalid params, an unknown resource as not found, anything else
/// (timeouts, a dead server) as an internal error naming the server.
pub(super) fn routed_error(error: DownstreamError) -> ErrorData {
    match error {
        DownstreamError::Rpc { error, .. } => *error,
        e @ DownstreamError::UnknownResource { .. } => {
            ErrorData::resource_not_found(e.to_string(), None)
        }
        e @ (DownstreamError::UnknownPrompt { .. }
        | DownstreamError::UnknownTool { .. }
        | DownstreamError::AmbiguousTool { .. }) => ErrorData::invalid_params(e.to_string(), None),
        e => ErrorData::internal_error(e.to_string(), None),
    }
}

/// A failed downstream tool call as the host's answer, whichever route the call took: a
/// server's own JSON-RPC error as it is, an unknown tool as invalid params (a protocol
/// error: the host named nothing callable), anything a model should read and can act on
/// (a timeout, a dead server, a cancelled call) as a tool result with `isError: true`.
pub(crate) fn host_answer(error: DownstreamError) -> Result<CallToolResult, ErrorData> {
    match error {
        DownstreamError::Rpc { error, .. } => Err(*error),
        e @ (DownstreamError::UnknownTool { .. } | DownstreamError::AmbiguousTool { .. }) => {
            Err(ErrorData::invalid_params(e.to_string(), None))
        }
        e => Ok(tool_error(e.to_string())),
    }
}

/// A failure a model should read, as a tool result with `isError: true`.
pub(super) fn tool_error(message: String) -> CallToolResult {
    let message = crate::text::clip(&message, MAX_ERROR_CHARS).into_owned();
    CallToolResult::error(vec![ContentBlock::text(message)])
}
