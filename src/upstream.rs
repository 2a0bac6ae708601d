//! The MCP server the host talks to: the merged catalog in `tools/list`, each `tools/call`
//! forwarded to its downstream. This is the one place that builds MCP errors.

// Logging is deprecated by SEP-2577, but hosts still show relayed log messages.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ResultType, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;

use crate::downstream::{DownstreamError, Downstreams, HostLink, ProgressSink};

/// The upstream MCP server.
#[derive(Clone)]
pub struct Upstream {
    downstreams: Arc<Downstreams>,
    host: Arc<HostLink>,
    /// Cancelled when planmux shuts down: every call in flight stops.
    shutdown: CancellationToken,
}

impl Upstream {
    /// A server over started downstreams; `host` is the link the downstreams relay to.
    pub fn new(
        downstreams: Arc<Downstreams>,
        host: Arc<HostLink>,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            downstreams,
            host,
            shutdown,
        }
    }
}

/// A failure a model should read, as a tool result with `isError: true`.
fn tool_error(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

impl ServerHandler for Upstream {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("planmux", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "planmux fronts several MCP servers: their tools are listed as <server>__<tool>.",
            )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.host.set(context.peer);
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tracing::debug!(level = ?request.level, "host set the log level");
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let catalog = self.downstreams.catalog();
        Ok(ListToolsResult::with_all_items(
            catalog.definitions().cloned().collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.downstreams
            .catalog()
            .get(name)
            .map(|e| e.definition.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.host.get().is_none() {
            self.host.set(context.peer.clone());
        }
        let progress = context.meta.get_progress_token().map(|token| ProgressSink {
            peer: context.peer.clone(),
            token,
        });
        let cancel = self.shutdown.child_token();
        let call = self.downstreams.call_tool(request, progress, &cancel);
        tokio::pin!(call);
        let result = tokio::select! {
            result = &mut call => result,
            () = context.ct.cancelled() => {
                // Let the call tell its downstream, then finish.
                cancel.cancel();
                call.await
            }
        };
        match result {
            Ok(CallToolResponse::Complete(mut result)) => {
                // A 2026-07-28 host requires resultType; rmcp strips it for older hosts.
                result.result_type = Some(ResultType::COMPLETE);
                Ok(CallToolResponse::Complete(result))
            }
            Ok(other) => Ok(other),
            Err(DownstreamError::Rpc { error, .. }) => Err(error),
            Err(e @ DownstreamError::UnknownTool { .. }) => {
                Err(ErrorData::invalid_params(e.to_string(), None))
            }
            Err(e) => Ok(tool_error(e.to_string()).into()),
        }
    }
}
