//! Logging: everything goes to stderr through `tracing`, filtered by `RUST_LOG`.

use tracing_subscriber::EnvFilter;

/// Default filter when serving: planmux at info, rmcp quiet (it logs every notification at
/// info).
pub const SERVE_FILTER: &str = "planmux=info,rmcp=warn";
/// Default filter for the one-shot commands, whose own output says what happened.
pub const COMMAND_FILTER: &str = "planmux=warn,rmcp=warn";

/// Installs the stderr subscriber with `default` unless `RUST_LOG` is set. Safe to call
/// more than once (later calls do nothing).
pub fn init(default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .try_init();
}
