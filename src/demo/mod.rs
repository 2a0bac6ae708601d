//! Built-in demo servers: real MCP servers, run in-process (`builtin = "metrics"`), over
//! stdio (`planmux demo metrics`) or over HTTP (`planmux demo metrics --http ADDR`), so planmux works on a fresh machine with nothing else
//! installed, and so tests have downstreams whose behaviour they control.

// The argument helpers return a tool's failure result as their error, so `?` builds the
// answer; the size of that error does not matter on this path.
#![allow(clippy::result_large_err)]

mod chaos;
mod conformance;
mod files;
mod hostile;
mod metrics;
mod weather;

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use crate::wire::{Limits, LineTransport};

pub use conformance::ConformanceServer;

/// Which demo server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DemoKind {
    /// list_metrics, query_metric, check_threshold: the CPU scenario of seed 001.
    Metrics,
    /// get_weather, get-forecast, get_history, compare_data.
    Weather,
    /// write_file, read_file, list_files inside a sandbox folder.
    Files,
    /// sleep, fail, echo, bytes, count, pid, toggle_extra: behaviour on demand, for tests.
    Chaos,
    /// bomb, nest, stall_listing, endless_listing: hostile behaviour, for tests.
    Hostile,
    /// The official conformance suite's fixture: `test_simple_text`, `test://static-text`,
    /// `test_simple_prompt`, … (tools, resources, prompts, completions, logging).
    Conformance,
}

impl DemoKind {
    /// Every demo.
    pub const ALL: [DemoKind; 6] = [
        Self::Metrics,
        Self::Weather,
        Self::Files,
        Self::Chaos,
        Self::Hostile,
        Self::Conformance,
    ];

    /// The name used in `builtin = "…"` and `planmux demo …`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Metrics => "metrics",
            Self::Weather => "weather",
            Self::Files => "files",
            Self::Chaos => "chaos",
            Self::Hostile => "hostile",
            Self::Conformance => "conformance",
        }
    }
}

impl FromStr for DemoKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown built-in server '{s}' (one of: {})",
                    names.join(", ")
                )
            })
    }
}

/// One demo server instance. State (call counts, the extra tool) is per instance, so a
/// restarted server starts fresh, as a real one would.
pub struct DemoServer {
    kind: DemoKind,
    /// Speaks only 2025-11-25: `server/discover` is a method it does not know.
    legacy: bool,
    /// The `files` sandbox.
    root: PathBuf,
    state: Counters,
}

/// What the chaos demo counts and toggles.
#[derive(Default)]
struct Counters {
    calls: AtomicU64,
    /// Calls that stopped early because the client cancelled them.
    cancelled: AtomicU64,
    /// Whether chaos currently lists its `extra` tool (flipped by `toggle_extra`).
    extra: AtomicBool,
    /// How hostile answers `tools/list`.
    listing: hostile::Listing,
}

impl DemoServer {
    /// A demo server; `root` is the sandbox of `files` (a temp folder when `None`).
    pub fn new(kind: DemoKind, root: Option<PathBuf>) -> Arc<Self> {
        let root = root.unwrap_or_else(|| std::env::temp_dir().join("planmux-files"));
        Arc::new(Self {
            kind,
            legacy: false,
            root,
            state: Counters::default(),
        })
    }

    /// A demo server of the earlier era, as most servers still are: it asks its client
    /// with requests and knows no `server/discover`.
    pub fn legacy(kind: DemoKind, root: Option<PathBuf>) -> Arc<Self> {
        let mut server = Self::new(kind, root);
        if let Some(server) = Arc::get_mut(&mut server) {
            server.legacy = true;
        }
        server
    }

    /// The tools it lists now.
    pub(crate) fn tools(&self) -> Vec<Tool> {
        match self.kind {
            DemoKind::Conformance => conformance::tools(),
            DemoKind::Metrics => metrics::tools(),
            DemoKind::Weather => weather::tools(),
            DemoKind::Files => files::tools(),
            DemoKind::Chaos => chaos::tools(self.state.extra.load(Ordering::SeqCst)),
            DemoKind::Hostile => hostile::tools(),
        }
    }

    async fn call(
        &self,
        name: &str,
        args: JsonObject,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.state.calls.fetch_add(1, Ordering::SeqCst);
        match self.kind {
            DemoKind::Metrics => metrics::call(name, &args),
            DemoKind::Weather => weather::call(name, &args),
            DemoKind::Files => files::call(&self.root, name, &args),
            DemoKind::Chaos => chaos::call(name, &args, ctx, &self.state).await,
            DemoKind::Hostile => Ok(hostile::call(name, &args, ctx, &self.state.listing).await),
            // Served by its own handler ([`serve_on`]); never reached.
            DemoKind::Conformance => Ok(failure("the conformance demo has its own handler")),
        }
    }
}

impl ServerHandler for DemoServer {
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::DiscoverResult, ErrorData> {
        if self.legacy {
            return Err(ErrorData::method_not_found::<
                rmcp::model::DiscoverRequestMethod,
            >());
        }
        Ok(rmcp::model::DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(capabilities).with_server_info(Implementation::new(
            format!("planmux-demo-{}", self.kind.name()),
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if self.kind == DemoKind::Hostile {
            let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
            return hostile::list(&self.state.listing, cursor, &context).await;
        }
        let mut listed = ListToolsResult::with_all_items(self.tools());
        // How long a 2026-07-28 client may keep the list: the metrics and weather demos
        // never change theirs (the others may, or say nothing: rmcp then sends 0).
        let modern = context
            .protocol_version()
            .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28);
        listed.ttl_ms = match self.kind {
            DemoKind::Metrics if modern => Some(30_000),
            DemoKind::Weather if modern => Some(300_000),
            _ => None,
        };
        Ok(listed)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.tools().iter().any(|t| t.name == request.name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{}'", request.name),
                None,
            ));
        }
        if self.kind == DemoKind::Chaos && request.name == "ask_host" {
            self.state.calls.fetch_add(1, Ordering::SeqCst);
            return chaos::ask_host(&request, &context).await;
        }
        let args = request.arguments.unwrap_or_default();
        self.call(&request.name, args, &context)
            .await
            .map(Into::into)
    }
}

/// Serves one demo over `transport` until the client disconnects.
pub(crate) async fn serve_on<In>(
    kind: DemoKind,
    root: Option<PathBuf>,
    transport: LineTransport<RoleServer, In>,
) -> anyhow::Result<()>
where
    In: tokio::io::AsyncRead + Send + Unpin + 'static,
{
    use rmcp::ServiceExt;
    if kind == DemoKind::Conformance {
        ConformanceServer::new()
            .serve(transport)
            .await?
            .waiting()
            .await?;
    } else {
        DemoServer::new(kind, root)
            .serve(transport)
            .await?
            .waiting()
            .await?;
    }
    Ok(())
}

/// Serves one demo over this process's stdin/stdout until the client disconnects; one
/// of the earlier era only when `legacy`.
pub async fn serve_stdio(
    kind: DemoKind,
    root: Option<PathBuf>,
    legacy: bool,
) -> anyhow::Result<()> {
    if legacy && kind == DemoKind::Conformance {
        anyhow::bail!("the conformance demo speaks both eras: --legacy is for the others");
    }
    let (read, write) = crate::pipes::host_stdio()?;
    let transport = LineTransport::blocking(read, write, Limits::default(), "the client").serving();
    if legacy {
        use rmcp::ServiceExt;
        DemoServer::legacy(kind, root)
            .serve(transport)
            .await?
            .waiting()
            .await?;
        return Ok(());
    }
    serve_on(kind, root, transport).await
}

/// Serves one demo over streamable HTTP at `addr` (`/mcp`, a fresh instance per
/// session, loopback hosts and origins only) until the process ends: to compare a server
/// directly with the same server behind planmux.
pub async fn serve_http(
    kind: DemoKind,
    root: Option<PathBuf>,
    addr: std::net::SocketAddr,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(addr = %listener.local_addr()?, demo = kind.name(), "serving over HTTP at /mcp");
    if kind == DemoKind::Conformance {
        let fixture = ConformanceServer::factory();
        accept(listener, move || Ok(fixture())).await
    } else {
        accept(listener, move || Ok(DemoServer::new(kind, root.clone()))).await
    }
}

/// Answers every connection on `listener` with rmcp's streamable-HTTP service.
async fn accept<S: ServerHandler + Send + 'static>(
    listener: tokio::net::TcpListener,
    factory: impl Fn() -> Result<S, std::io::Error> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let config = StreamableHttpServerConfig::default()
        .with_allowed_origins(["http://localhost:*", "http://127.0.0.1:*"])
        .enforce_origin_validation();
    let mcp = StreamableHttpService::new(factory, Arc::new(LocalSessionManager::default()), config);
    // Each connection on a task the loop owns: they end with it.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let (stream, _) = listener.accept().await?;
        while connections.try_join_next().is_some() {}
        let _ = stream.set_nodelay(true);
        let mcp = mcp.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let mcp = mcp.clone();
                async move { Ok::<_, std::convert::Infallible>(mcp.handle(request).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

// ---- helpers shared by the demos ----

/// A tool from a name, a description and a JSON Schema literal.
fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    Tool::new(name, description, Arc::new(as_object(schema)))
}

fn as_object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// A tool-level failure the model can read.
fn failure(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// A string argument, or a failure naming it.
fn str_arg<'a>(args: &'a JsonObject, key: &str) -> Result<&'a str, CallToolResult> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(failure(format!("'{key}' must be a string, got {other}"))),
        None => Err(failure(format!("missing required argument '{key}'"))),
    }
}

/// A number argument; numeric strings ("80") are accepted, as models often send them.
fn num_arg(args: &JsonObject, key: &str) -> Result<Option<f64>, CallToolResult> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(Value::String(s)) => s
            .trim()
            .trim_end_matches('%')
            .parse()
            .map(Some)
            .map_err(|_| failure(format!("'{key}' must be a number, got \"{s}\""))),
        Some(other) => Err(failure(format!("'{key}' must be a number, got {other}"))),
    }
}

/// Unwraps a `Result<CallToolResult, CallToolResult>` built with `?` on the helpers above.
fn done(result: Result<CallToolResult, CallToolResult>) -> Result<CallToolResult, ErrorData> {
    Ok(result.unwrap_or_else(|failure| failure))
}

/// `Tool::with_raw_output_schema` from a JSON literal.
trait OutputSchemaExt {
    fn with_output_schema_value(self, schema: Value) -> Self;
}

impl OutputSchemaExt for Tool {
    fn with_output_schema_value(self, schema: Value) -> Self {
        self.with_raw_output_schema(std::sync::Arc::new(as_object(schema)))
    }
}

/// The demo servers' catalog (metrics, weather, files, chaos) as the default config
/// exports it, for tests of what is built from a catalog.
#[cfg(test)]
pub(crate) fn demo_catalog() -> crate::catalog::Catalog {
    use crate::catalog::{Catalog, Pins, ServerTools};
    let servers: Vec<ServerTools> = [
        DemoKind::Metrics,
        DemoKind::Weather,
        DemoKind::Files,
        DemoKind::Chaos,
    ]
    .into_iter()
    .map(|kind| ServerTools {
        server: kind.name().into(),
        namespace: true,
        tools: DemoServer::new(kind, None).tools(),
        tiers: crate::policy::TierRules::default(),
    })
    .collect();
    Catalog::build(
        "__",
        &servers,
        &crate::policy::Policy::default(),
        &Pins::Unpinned,
    )
}
