//! The `planmux` commands, for the binary (`src/main.rs`) to call: each command is a
//! function that does its work and answers a [`Report`], the text to print and the exit
//! code. The binary parses the command line ([`Cli`]), sets up logging and the runtime,
//! and prints the report; it owns the signals, which it lends as a [`Signal`].
//!
//! A command that needs the downstream servers (and is not `serve`, which runs them
//! itself) gets them from [`with_servers`], which shuts them down however the command
//! ends. A command's output is its report, printed when it is done; only what a person
//! must see while it runs (`run`'s question and per-step lines) is written at once, by
//! [`terminal`].

use std::path::Path;

use futures::future::BoxFuture;

#[macro_use]
pub mod terminal;

mod args;
pub mod check;
pub mod demo;
pub mod import;
pub mod install;
pub mod lock;
pub mod login;
mod readiness;
mod report;
pub mod run;
pub mod schema;
pub mod serve;
mod servers;
pub mod tools;
pub mod validate;

pub use args::{Cli, Command};
pub use report::Report;
pub use servers::{Start, with_servers};

use crate::config::Config;

/// Exit code of `planmux run`: some steps failed or were skipped.
pub const EXIT_PARTIAL: i32 = 2;
/// Exit code of `planmux run`: the plan failed.
pub const EXIT_FAILED: i32 = 3;
/// Exit code of `planmux run` and `planmux validate`: the plan is invalid.
pub const EXIT_INVALID: i32 = 4;
/// Exit code of `planmux run`: the plan needs approval, and did not get it.
pub const EXIT_NEEDS_APPROVAL: i32 = 5;
/// A command line clap cannot parse (sysexits' EX_USAGE; 2 is a partial run's).
pub const EXIT_USAGE: i32 = 64;

/// Makes a future that resolves when the process is asked to stop (SIGTERM, SIGINT). A
/// command calls it only while it waits for one, so until then the signals keep their
/// default effect.
pub type Signal = fn() -> BoxFuture<'static, ()>;

/// Runs the command `cli` names (`serve` when it names none) and answers its report.
pub async fn execute(cli: Cli, signal: Signal) -> Report {
    let stdio = Command::Serve {
        http: None,
        stateless: false,
    };
    // Those that need no config first: a broken servers.toml must not keep them from
    // running (`import` makes one).
    match cli.command.unwrap_or(stdio) {
        Command::Demo {
            name,
            root,
            http,
            legacy,
        } => demo::demo(name, root, http, legacy).await,
        Command::Import {
            from,
            output,
            force,
        } => import::import(from.as_deref(), output.as_deref(), force),
        Command::Install {
            host,
            file,
            dry_run,
        } => install::install(host, file.as_deref(), cli.config.as_deref(), dry_run).await,
        Command::Uninstall {
            host,
            file,
            force,
            dry_run,
        } => install::uninstall(host, file.as_deref(), force, dry_run),
        Command::Schema { what } => schema::schema(what),
        command => match configured(cli.config.as_deref()) {
            Ok(config) => with_config(&config, command, signal).await,
            Err(error) => Report::failed(&error),
        },
    }
}

/// The config `--config` names, or the one found (`Config::locate`); logged.
fn configured(path: Option<&Path>) -> anyhow::Result<Config> {
    let config = Config::locate(path)?;
    tracing::info!(config = %config.source, servers = config.enabled_servers().count(), "configuration loaded");
    if config.enabled_servers().next().is_none() {
        tracing::warn!(config = %config.source, "no server is enabled: planmux has no tools to offer; add [servers.NAME] sections (see `planmux import`)");
    }
    Ok(config)
}

/// The commands that run on a config.
async fn with_config(config: &Config, command: Command, signal: Signal) -> Report {
    match command {
        Command::Serve {
            http: Some(addr),
            stateless,
        } => {
            let options = crate::http::HttpOptions { addr, stateless };
            serve::http(config, options, signal).await
        }
        Command::Serve { http: None, .. } => serve::stdio(config, signal).await,
        Command::Console { addr } => serve::console(config, addr, signal).await,
        Command::Run {
            plan,
            yes,
            record,
            timeline,
            quiet,
        } => {
            let options = run::Options {
                yes,
                record,
                timeline,
                quiet,
            };
            run::run(config, &plan, options, signal).await
        }
        Command::Validate {
            plan,
            mermaid,
            dot,
            json,
        } => {
            let picture = validate::Picture::from_flags(mermaid, dot, json);
            validate::validate(config, &plan, picture).await
        }
        Command::Tools => tools::tools(config).await,
        Command::Check => check::check(config).await,
        Command::Lock => lock::lock(config).await,
        Command::Login {
            server,
            no_browser,
            timeout,
        } => {
            let options = crate::oauth::login::Options {
                open_browser: !no_browser,
                timeout: std::time::Duration::from_secs(timeout),
            };
            login::login(config, &server, &options).await
        }
        Command::Logout { server } => login::logout(config, &server),
        // Run above, before the config.
        Command::Demo { .. }
        | Command::Import { .. }
        | Command::Install { .. }
        | Command::Uninstall { .. }
        | Command::Schema { .. } => Report::new(),
    }
}
