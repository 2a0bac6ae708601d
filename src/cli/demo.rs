//! `planmux demo NAME`: serves one built-in demo server over stdio (or streamable HTTP),
//! for servers.toml to run as a downstream. It needs no config.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::Report;
use crate::demo::DemoKind;

/// `planmux demo NAME [--root DIR] [--http ADDR | --legacy]`.
pub async fn demo(
    name: DemoKind,
    root: Option<PathBuf>,
    http: Option<SocketAddr>,
    legacy: bool,
) -> Report {
    let served = match http {
        Some(addr) => crate::demo::serve_http(name, root, addr).await,
        None => crate::demo::serve_stdio(name, root, legacy).await,
    };
    Report::new().ended(served.map(|()| 0))
}
