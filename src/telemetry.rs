//! Logging: everything goes to stderr through `tracing`, filtered by `RUST_LOG`, with the
//! credentials of every URL in it redacted (libraries quote the URL they failed on).

use std::io::Write;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Default filter when serving: planmux at info, rmcp quiet (it logs every notification at
/// info), and the OpenTelemetry SDK's warnings and errors (an export that failed: the one
/// line a collector that is down costs, per batch).
pub const SERVE_FILTER: &str = "planmux=info,rmcp=warn,opentelemetry_sdk=warn";
/// Default filter for the one-shot commands, whose own output says what happened. rmcp
/// only at error: it warns of every request planmux answers with an error, such as a
/// server asking for roots when no host is there to give them.
pub const COMMAND_FILTER: &str = "planmux=warn,rmcp=error";

/// Installs the stderr subscriber with `default` unless `RUST_LOG` is set. Safe to call
/// more than once (later calls do nothing).
pub fn init(default: &str) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Redacting)
        .with_ansi(false)
        .with_target(false)
        .finish()
        .with(tracing_subscriber::filter::filter_fn(|meta| {
            !secret_bearing(meta)
        }));
    let _ = subscriber.try_init();
}

/// Events no `RUST_LOG` may show: rmcp's OAuth code logs the authorization code and
/// token responses at debug, and the OAuth library its requests at trace. Their info,
/// warnings and errors say what happened without them.
fn secret_bearing(meta: &tracing::Metadata<'_>) -> bool {
    let target = meta.target();
    let oauth = target.starts_with("rmcp::transport::auth")
        || target.starts_with("rmcp::transport::common::auth")
        || target.starts_with("oauth2");
    oauth && *meta.level() > tracing::Level::INFO
}

/// Makes a [`Line`] per log event.
struct Redacting;

impl<'a> MakeWriter<'a> for Redacting {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line(Vec::new())
    }
}

/// One event's text, written to stderr with its URLs redacted when the event ends.
struct Line(Vec<u8>);

impl Write for Line {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        let _ = std::io::stderr().write_all(crate::text::redact_urls(&text).as_bytes());
    }
}
