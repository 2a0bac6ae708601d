//! `planmux serve` (the default command): MCP over stdio for a host that launched
//! planmux, or streamable HTTP with `--http`, until the host hangs up or a signal comes.
//! Serving starts and stops the downstream servers itself.

use anyhow::Context as _;

use super::{Report, Signal};
use crate::config::Config;
use crate::http::HttpOptions;
use crate::state::Shared;
use crate::wire::LineTransport;

/// `planmux serve`: over stdio, the only thing on stdout is the MCP wire.
pub async fn stdio(config: &Config, signal: Signal) -> Report {
    Report::new().ended(serve_stdio(config, signal).await.map(|()| 0))
}

async fn serve_stdio(config: &Config, signal: Signal) -> anyhow::Result<()> {
    let (read, write) = crate::pipes::host_stdio().context("cannot open stdin")?;
    let transport = LineTransport::blocking(read, write, config.proxy.wire, "the host");
    let store = Shared::open(&config.state)?;
    crate::serve::serve(config, store, transport, signal())
        .await
        .context("MCP handshake with the host failed")
}

/// `planmux console [ADDR]`: the HTTP front, saying where its console is.
pub async fn console(config: &Config, addr: std::net::SocketAddr, signal: Signal) -> Report {
    let options = HttpOptions {
        addr,
        stateless: false,
    };
    let ready = |bound: std::net::SocketAddr| {
        eprintln!("planmux: the console is at http://{bound}/console (MCP at http://{bound}/mcp)");
    };
    let served = crate::http::serve_http(config, options, ready, signal()).await;
    Report::new().ended(served.map(|()| 0).map_err(anyhow::Error::from))
}

/// `planmux serve --http [ADDR] [--stateless]`.
pub async fn http(config: &Config, options: HttpOptions, signal: Signal) -> Report {
    let served = crate::http::serve_http(config, options, |_| {}, signal()).await;
    Report::new().ended(served.map(|()| 0).map_err(anyhow::Error::from))
}
