//! The command line: what `planmux` accepts, as clap parses it. The doc comments are the
//! help text.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use super::schema::Schema;
use crate::demo::DemoKind;
use crate::hosts::Host;

/// planmux: one MCP server in front of many, with whole-plan execution.
#[derive(Parser)]
#[command(version, about)]
pub struct Cli {
    /// servers.toml to use (default: $PLANMUX_CONFIG, then ./servers.toml, then the
    /// built-in demo config)
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

// The commands. (No doc comment here or on `command` above: clap would show it.) Their
// doc comments are help text, not rustdoc: `[policy]` is a section of servers.toml.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Subcommand)]
pub enum Command {
    /// Serve MCP over stdio (the default; this is what hosts launch).
    Serve {
        /// Serve streamable HTTP at ADDR (default 127.0.0.1:8787), endpoint /mcp, instead
        /// of stdio.
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = crate::http::DEFAULT_ADDR)]
        http: Option<std::net::SocketAddr>,
        /// With --http: no sessions; every request stands alone (load-balanced deployments).
        #[arg(long, requires = "http")]
        stateless: bool,
    },
    /// Serve the console (web pages of the servers, runs, approvals and audit trail) at
    /// http://ADDR/console, with MCP at /mcp: the HTTP front of `serve --http`.
    ///
    /// ADDR defaults to 127.0.0.1:8787; any other than a loopback address needs [http]
    /// tokens or [http.auth].
    Console {
        #[arg(value_name = "ADDR", default_value = crate::http::DEFAULT_ADDR)]
        addr: std::net::SocketAddr,
    },
    /// Execute a plan (a file, or - for stdin) and print its result JSON.
    ///
    /// A plan with steps that [policy] confirm covers (write and destructive tools, by
    /// default) asks on the terminal first.
    ///
    /// Exit codes: 0 succeeded, 2 partial, 3 failed, 4 invalid plan, 5 needs approval
    /// (declined, or no terminal to ask on and no --yes), 64 a usage error, 1 other
    /// errors.
    Run {
        /// The plan: a JSON file, or - to read stdin.
        plan: String,
        /// Approve the steps that need it without asking.
        #[arg(long, short = 'y')]
        yes: bool,
        /// Also write the full run record (arguments, outputs, timings) to this file.
        #[arg(long)]
        record: Option<PathBuf>,
        /// Draw a per-step timeline on stderr after the run.
        #[arg(long)]
        timeline: bool,
        /// No per-step lines on stderr.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Check a plan and print its schedule without calling any tool (exit 4 if invalid).
    Validate {
        /// The plan: a JSON file, or - to read stdin.
        plan: String,
        /// Print the dependency graph as a Mermaid flowchart.
        #[arg(long, conflicts_with = "dot")]
        mermaid: bool,
        /// Print the dependency graph as Graphviz DOT.
        #[arg(long, conflicts_with = "json")]
        dot: bool,
        /// Print what a lazy plan answers: the schedule and what would need approval, as JSON.
        #[arg(long, conflicts_with = "mermaid")]
        json: bool,
    },
    /// Print the merged tool catalog.
    Tools,
    /// Start every server and report status, tool count and start-up time, the tools
    /// servers.lock holds back, name clashes and pipelines that cannot run (exit 1 if any
    /// of those).
    Check,
    /// Pin every tool definition: write servers.lock beside the config. From then on a
    /// tool whose definition changes (or a new tool of a locked server) is quarantined
    /// until the next `planmux lock`.
    Lock,
    /// Sign in to a remote server (OAuth) in the browser; the tokens are kept for
    /// `planmux serve` and renew themselves.
    Login {
        /// The server's name in servers.toml.
        server: String,
        /// Print the URL to open instead of opening the browser.
        #[arg(long)]
        no_browser: bool,
        /// How long to wait for the browser, in seconds.
        #[arg(long, default_value_t = crate::oauth::login::DEFAULT_TIMEOUT.as_secs())]
        timeout: u64,
    },
    /// Forget the sign-in to a remote server (its tokens).
    Logout {
        /// The server's name in servers.toml.
        server: String,
    },
    /// Turn a host's MCP servers into servers.toml (printed, or written with -o).
    Import {
        /// claude-desktop, claude-code, cursor, vscode, windsurf, or a JSON file with
        /// "mcpServers" or "servers" (default: the first of those hosts with a config file)
        #[arg(long)]
        from: Option<String>,
        /// Write servers.toml here (readable only by you), and servers.schema.json beside it.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Replace the output file if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Put planmux in a host's config in place of the servers --config runs (with a
    /// backup, printing the diff).
    Install {
        /// claude-desktop, claude-code, cursor, vscode or windsurf
        #[arg(long, value_parser = super::install::host)]
        host: Host,
        /// The host's config file (default: where the host keeps it), e.g. a project's .mcp.json.
        #[arg(long)]
        file: Option<PathBuf>,
        /// Print the diff, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Put back the host's config as it was before `planmux install`.
    Uninstall {
        /// claude-desktop, claude-code, cursor, vscode or windsurf
        #[arg(long, value_parser = super::install::host)]
        host: Host,
        /// The host's config file (default: where the host keeps it).
        #[arg(long)]
        file: Option<PathBuf>,
        /// Restore the backup even if the file changed since install.
        #[arg(long)]
        force: bool,
        /// Print the diff, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Print the JSON Schema of servers.toml (config) or of a plan (plan).
    Schema {
        /// config or plan
        what: Schema,
    },
    /// Serve one built-in demo server over stdio (or streamable HTTP).
    Demo {
        /// metrics, weather, files, chaos, hostile or conformance
        name: DemoKind,
        /// Sandbox folder of the files demo.
        #[arg(long)]
        root: Option<PathBuf>,
        /// Serve over streamable HTTP at this address (endpoint /mcp) instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// Speak only protocol 2025-11-25 over stdio (no server/discover; ask the client
        /// with requests), as a server of the earlier era.
        #[arg(long, conflicts_with = "http")]
        legacy: bool,
    },
}

impl Cli {
    /// Whether the command serves (MCP, or a demo server): a server logs what it does
    /// (`telemetry::SERVE_FILTER`), the other commands only what went wrong.
    pub fn serving(&self) -> bool {
        matches!(
            self.command,
            None | Some(Command::Serve { .. } | Command::Console { .. } | Command::Demo { .. })
        )
    }
}
