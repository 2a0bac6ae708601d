//! Logging: everything goes to stderr through `tracing`, filtered by `RUST_LOG`.

use tracing_subscriber::EnvFilter;

/// Default filter: planmux at info, rmcp quiet (it logs every notification at info).
pub const DEFAULT_FILTER: &str = "planmux=info,rmcp=warn";

/// Installs the stderr subscriber. Safe to call more than once (later calls do nothing).
pub fn init() {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .try_init();
}
