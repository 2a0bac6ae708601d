//! Why a call to a downstream did not produce a tool result ([`DownstreamError`]), each
//! variant naming the server and what it knows. What a host or a plan step makes of it is
//! decided where they are answered (`upstream::host_answer`, the runner's `invoke_error`).

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{ErrorCode, TASKS_EXTENSION_ID};

use crate::plan::ToolMatch;

/// Why a call to a downstream did not produce a tool result.
#[derive(Debug, thiserror::Error)]
pub enum DownstreamError {
    /// No exported tool has this name.
    #[error("unknown tool '{name}'{}", hint(.closest))]
    UnknownTool { name: String, closest: Vec<String> },
    /// A bare tool name that several servers have.
    #[error("tool name '{name}' is ambiguous: {}; call one of them by its exported name", .candidates.join(", "))]
    AmbiguousTool {
        name: String,
        candidates: Vec<String>,
    },
    /// No exported prompt has this name.
    #[error("unknown prompt '{name}'")]
    UnknownPrompt { name: String },
    /// No server listed this URI, matches it with a template, or linked it, and none of
    /// the servers with resources could read it.
    #[error("no server has the resource '{uri}'")]
    UnknownResource { uri: String },
    /// The server could not be started just now.
    #[error("server '{server}' failed to start: {reason}")]
    StartFailed { server: String, reason: String },
    /// A tool of a server that never started: its tools are unknown, not missing.
    #[error("server '{server}' is configured but failed to start: {reason}")]
    NeverStarted { server: String, reason: String },
    /// The server is down and backing off before the next restart.
    #[error("server '{server}' is unavailable: {reason} (next restart attempt in {} ms)", .retry_in.as_millis())]
    Down {
        server: String,
        reason: String,
        retry_in: Duration,
    },
    /// The connection broke while the call was in flight.
    #[error("server '{server}' went away during the call: {detail}")]
    Exited { server: String, detail: String },
    /// The call took longer than the server's `call_timeout_ms`.
    #[error("server '{server}' did not answer {tool} within {} ms", .after.as_millis())]
    Timeout {
        server: String,
        tool: String,
        after: Duration,
    },
    /// The caller cancelled the call.
    #[error("call to {tool} on server '{server}' was cancelled")]
    Cancelled { server: String, tool: String },
    /// The server answered with a JSON-RPC error; it is passed on as it is. (Or planmux
    /// refused its answer, and says so.)
    #[error("{}", rpc_error(server, error))]
    Rpc {
        server: String,
        error: Box<ErrorData>,
    },
    /// The server asked for input (2026-07-28 `input_required`) that no one gave.
    #[error("server '{server}' asked for input to {tool} that it did not get: {why}")]
    Unanswered {
        server: String,
        tool: String,
        why: String,
    },
    /// The server cancelled the task a call made, before it ended.
    #[error("server '{server}' cancelled its task for {tool}")]
    TaskCancelled { server: String, tool: String },
    /// The server answered with something that is not valid here.
    #[error("server '{server}' broke the protocol: {message}")]
    Protocol { server: String, message: String },
    /// The server needs the user to sign in (OAuth) before it answers.
    #[error("{}", crate::oauth::sign_in_message(server, signed_out))]
    NeedsSignIn {
        server: String,
        signed_out: crate::oauth::SignedOut,
    },
    /// planmux is shutting down.
    #[error("server '{server}' is shut down")]
    Closed { server: String },
    /// The call's proof of authorization is for another tool.
    #[error("the call to '{tool}' was not authorized")]
    Unauthorized { tool: String },
}

impl DownstreamError {
    /// Whether this is the server saying the call runs only as a task.
    pub(crate) fn needs_tasks(&self) -> bool {
        matches!(self, DownstreamError::Rpc { error, .. } if wants_tasks(error))
    }

    /// Why a host's call of `name` goes nowhere, from how it resolved: unknown with the
    /// hints a plan step gets for the same name, or ambiguous with every candidate.
    pub(crate) fn unresolved(name: &str, resolved: ToolMatch<'_>) -> Self {
        let name = name.to_owned();
        match resolved {
            ToolMatch::Ambiguous(candidates) => DownstreamError::AmbiguousTool { name, candidates },
            ToolMatch::Unknown(closest) => DownstreamError::UnknownTool { name, closest },
            // Resolves, but not as the exported name the caller was routed by: say which.
            ToolMatch::Found(spec) => DownstreamError::UnknownTool {
                name,
                closest: vec![spec.exported.clone()],
            },
        }
    }
}

/// Whether `error` says a call needs the client to declare the tasks extension
/// (`-32021`, Missing Required Client Capability, naming it).
pub(crate) fn wants_tasks(error: &ErrorData) -> bool {
    let required = error
        .data
        .as_ref()
        .and_then(|d| d.get("requiredCapabilities"));
    error.code == ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        && required.is_some_and(|r| r["extensions"].get(TASKS_EXTENSION_ID).is_some())
}

/// A server's JSON-RPC error as a message, or planmux's refusal of its answer (which the
/// server did not send).
fn rpc_error(server: &str, error: &ErrorData) -> String {
    let refused = error
        .data
        .as_ref()
        .is_some_and(|data| data.get(crate::wire::REFUSED).is_some());
    if refused {
        format!(
            "planmux could not take the answer of server '{server}': {}",
            error.message
        )
    } else {
        format!(
            "server '{server}' answered with an error: {}",
            error.message
        )
    }
}

fn hint(closest: &[String]) -> String {
    if closest.is_empty() {
        String::new()
    } else {
        format!(
            " (did you mean {}?)",
            closest
                .iter()
                .map(|n| format!("'{n}'"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::DownstreamError;
    use crate::plan::{ToolSpec, resolve_called};

    /// What a host reads when its direct call names no tool, or several.
    #[test]
    fn a_direct_call_that_resolves_to_no_tool_says_what_to_call() {
        let spec = |server: &str, tool: &str| ToolSpec {
            exported: format!("{server}__{tool}"),
            server: server.into(),
            tool: tool.into(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            read_only: true,
            idempotent: true,
            tier: crate::policy::Tier::Read,
        };
        let tools = [
            spec("git", "git_log"),
            spec("files", "status"),
            spec("chaos", "status"),
        ];
        let text: String = ["git__gitlog", "status", "zzz"]
            .iter()
            .map(|name| {
                let error = DownstreamError::unresolved(name, resolve_called(&tools, name));
                format!("{name}: {error}\n")
            })
            .collect();
        insta::assert_snapshot!("direct_call_unresolved", text);
    }
}
