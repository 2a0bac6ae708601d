//! Where a tool is called on a line connection, and the one send every such call takes.
//!
//! A call is sent either at once, where the host's request is read (the passthrough's
//! lean case: the checkpoint decided without waiting, the server is up and its queue has
//! room), or after an admission wait (the checkpoint had to wait, the server is starting
//! or restarting, its queue is full, or the caller is a plan step that awaits): then it
//! waits for the server within its start-up timeout, and is written within the call's
//! time limit, once more on a new connection when the old one broke before the request
//! left. Either way it lands in the connection's [`CallTable`], which ends it exactly
//! once, and meets the checkpoint first: both sends take its proof.

use std::sync::Arc;

use rmcp::model::JsonObject;
use rmcp::service::ServiceError;
use tokio_util::sync::CancellationToken;

use super::DownstreamError;
use super::calls::{CallTable, LineCall, RawReply, Sink};
use super::relay::Caller;
use super::server::{Server, State};
use crate::policy::Authorized;
use crate::traces;

/// Where an exported tool is called: its server, on a line connection (a stdio child or a
/// built-in server), whether it is up now or not.
pub struct LineRoute {
    pub(super) exported: String,
    /// The tool's name on its server.
    pub(super) tool: String,
    pub(super) server: Arc<Server>,
}

/// Why an admitted call was not sent, and its sink back for its caller to tell (`None`
/// when the table told it already).
pub type NotSent = (DownstreamError, Option<Sink>);

impl LineRoute {
    /// The exported name the call resolved to: what the checkpoint authorizes.
    pub fn exported(&self) -> &str {
        &self.exported
    }

    /// Its server's name.
    pub fn server(&self) -> &str {
        &self.server.config.name
    }

    /// The tool's name on its server.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The error for a call of it, cancelled before it was sent.
    pub fn cancelled(&self) -> DownstreamError {
        DownstreamError::Cancelled {
            server: self.server.config.name.clone(),
            tool: self.tool.clone(),
        }
    }

    /// The table of the server's connection, if it is up now.
    fn table_now(&self) -> Option<Arc<CallTable>> {
        match self.server.state() {
            State::Ready(live) => live.table.clone(),
            _ => None,
        }
    }

    /// Sends the call at once, if the server is up and its queue has room: `request(id,
    /// tool)` is its line with raw id `id` and the tool's name on its server (both JSON
    /// strings). Its end goes to `sink`. `Err` gives the sink back: nothing was sent (a
    /// proof for another tool, a server not up, a full queue).
    pub fn send_now(
        &self,
        proof: &Authorized,
        sink: Sink,
        request: impl FnOnce(&str, &str) -> Vec<u8>,
    ) -> Result<LineCall, Sink> {
        if proof.tool() != self.exported {
            return Err(sink);
        }
        let Some(table) = self.table_now() else {
            return Err(sink);
        };
        let (call, bytes) = table.start(&self.tool, sink, request);
        if !table.try_write(bytes) {
            // Its request never left, so nothing else can have ended it.
            return call.forget().map_or(Ok(call), Err);
        }
        call.sent()?;
        Ok(call)
    }

    /// Sends the call after waiting for its server (within its start-up timeout) and for
    /// room in its queue (within the call's time limit); `Err` says why it was not sent,
    /// with the sink back. Cancelling `cancel` stops the wait.
    pub async fn send(
        &self,
        proof: &Authorized,
        mut sink: Sink,
        request: impl Fn(&str, &str) -> Vec<u8>,
        cancel: &CancellationToken,
    ) -> Result<LineCall, NotSent> {
        let server = &self.server;
        let name = &server.config.name;
        if proof.tool() != self.exported {
            let error = DownstreamError::Unauthorized {
                tool: self.exported.clone(),
            };
            return Err((error, Some(sink)));
        }
        let cancelled = || self.cancelled();
        let mut retried = false;
        loop {
            // A server that is (re)starting may take its whole start-up timeout: a
            // cancelled call does not wait for it.
            let live = tokio::select! {
                live = server.live() => live,
                () = cancel.cancelled() => Err(cancelled()),
            };
            let live = match live {
                Ok(live) => live,
                Err(error) => return Err((error, Some(sink))),
            };
            let Some(table) = live.table.clone() else {
                let error = DownstreamError::Protocol {
                    server: name.clone(),
                    message: "is not on a line connection any more".into(),
                };
                return Err((error, Some(sink)));
            };
            let (call, bytes) = table.start(&self.tool, sink, &request);
            // The call's time limit covers sending too: a server that stops reading its
            // input must not hold the call.
            let deadline = tokio::time::Instant::now() + table.timeout;
            let written = tokio::select! {
                written = tokio::time::timeout_at(deadline, table.write(bytes)) => written,
                () = cancel.cancelled() => return Err((cancelled(), call.forget())),
            };
            let forgotten = match written {
                Ok(Ok(())) => match call.sent() {
                    Ok(()) => return Ok(call),
                    Err(sink) => Some(sink),
                },
                Ok(Err(_)) => call.forget(),
                Err(_) => {
                    let error = DownstreamError::Timeout {
                        server: name.clone(),
                        tool: self.tool.clone(),
                        after: table.timeout,
                    };
                    return Err((error, call.forget()));
                }
            };
            // Its request never left, so nothing else can have ended it; if something
            // did, its sink was told.
            let Some(back) = forgotten else {
                return Ok(call);
            };
            sink = back;
            // The connection broke before the request left, so it is safe to send it
            // again, once: wait until the watcher has recorded the death, then restart.
            if retried {
                let error = server.exited(&live, ServiceError::TransportClosed).await;
                return Err((error, Some(sink)));
            }
            retried = true;
            server.settle(&live).await;
        }
    }

    /// Calls the tool for a caller that awaits (a plan step) with `arguments`: the
    /// server's response as it came, so no field of the result is lost. While it is in
    /// flight, what the server asks or says is for `caller`.
    pub(crate) async fn call(
        &self,
        proof: &Authorized,
        arguments: Option<&JsonObject>,
        caller: Option<&Caller>,
        cancel: &CancellationToken,
    ) -> Result<RawReply, DownstreamError> {
        let server = &self.server;
        let mut calling = server.host().calling(&server.config.name, caller);
        let arguments = match arguments {
            Some(arguments) => {
                serde_json::to_string(arguments).map_err(|e| DownstreamError::Protocol {
                    server: server.config.name.clone(),
                    message: format!("cannot encode the arguments: {e}"),
                })?
            }
            None => "{}".to_owned(),
        };
        // The call's own span, whose `traceparent` the server is sent (SEP-414).
        let name = &server.config.name;
        let span = traces::outgoing(format!("call {name}/{}", self.tool), Vec::new());
        let meta = (span.as_ref().and_then(traces::traceparent_of))
            .map(|parent| format!(r#","_meta":{{"traceparent":"{parent}"}}"#))
            .unwrap_or_default();
        let request = |id: &str, tool: &str| {
            [
                r#"{"jsonrpc":"2.0","id":"#,
                id,
                r#","method":"tools/call","params":{"name":"#,
                tool,
                r#","arguments":"#,
                &arguments,
                &meta,
                "}}",
            ]
            .concat()
            .into_bytes()
        };
        let (sink, answer) = Sink::awaiting();
        let call = self
            .send(proof, sink, request, cancel)
            .await
            .map_err(|(error, _)| error)?;
        let reply = call.answer(answer, cancel).await;
        if let Some(cx) = span {
            let error = match &reply {
                Ok(reply) => reply.failure().map(str::to_owned),
                Err(error) => Some(error.to_string()),
            };
            let attributes = vec![
                traces::attribute("planmux.server", name.clone()),
                traces::attribute("planmux.tool", self.tool.clone()),
            ];
            traces::end(&cx, attributes, error);
        }
        if let (Some(calling), Ok(_) | Err(DownstreamError::Rpc { .. })) =
            (calling.as_mut(), &reply)
        {
            calling.answered();
        }
        reply
    }
}
