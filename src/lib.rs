//! planmux: an MCP proxy that fronts the MCP servers of `servers.toml`, re-exports their
//! tools as `<server>__<tool>`, and runs whole multi-step tool plans across them.
//!
//! See `ARCHITECTURE.md` for the code map and the invariants.

// planmux stops a downstream server by killing its process group and relies on Unix
// signals; Windows would need job objects instead. Say so at build time, not at run time.
#[cfg(not(unix))]
compile_error!(
    "planmux runs on Linux and macOS only: on Windows it has no process groups (job objects) \
     or signals yet. Use it under WSL."
);

pub(crate) mod approval;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod console;
pub mod demo;
mod dirs;
pub mod downstream;
pub mod exec;
mod fnv;
pub mod hosts;
pub mod http;
pub mod identity;
pub(crate) mod lock;
pub mod metrics;
pub mod oauth;
pub(crate) mod pipelines;
pub(crate) mod pipes;
pub mod plan;
pub mod policy;
pub(crate) mod rate_limit;
pub(crate) mod reload;
pub mod runner;
pub mod serve;
pub mod state;
pub(crate) mod task_set;
pub mod telemetry;
pub(crate) mod text;
pub mod traces;
pub mod upstream;
pub mod wire;
