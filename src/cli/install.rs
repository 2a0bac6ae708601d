//! `planmux install` and `planmux uninstall`: put planmux in a host's config in place of
//! the servers it will run (with a backup, printing the diff), and put the config back as
//! it was. Also where a host keeps its config, for `import` too. Install first asks each
//! remote server the host has whether planmux can run it now ([`super::readiness`]):
//! one that waits for sign-in, or speaks only SSE, stays with the host, and install says
//! what to do about it.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use super::Report;
use super::readiness;
use crate::config::{Config, ServerConfig, Transport};
use crate::hosts::{
    Host, HostFile, Kept, Readiness, Runs, Why, install as install_planmux, sanitize,
    uninstall as restore,
};

/// The host named on the command line, or a list of the names.
pub fn host(name: &str) -> std::result::Result<Host, String> {
    Host::parse(name).ok_or_else(|| {
        let names: Vec<&str> = Host::ALL.iter().map(|(_, n)| *n).collect();
        format!("unknown host '{name}' (one of: {})", names.join(", "))
    })
}

fn home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set: pass the host's config file with --file")
}

/// The host's file: `--file`, or where the host keeps it for this user.
pub(super) fn host_file(host: Host, file: Option<&Path>) -> Result<PathBuf> {
    match file {
        Some(file) => Ok(file.to_path_buf()),
        None => {
            let config_home = std::env::var_os("XDG_CONFIG_HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from);
            Ok(Host::user_file(host, &home()?, config_home.as_deref()))
        }
    }
}

/// `planmux install --host HOST [--file F] [--dry-run]`, with the global `--config`.
pub async fn install(
    host: Host,
    file: Option<&Path>,
    config: Option<&Path>,
    dry_run: bool,
) -> Report {
    let mut report = Report::new();
    let ended = install_into(host, file, config, dry_run, &mut report).await;
    report.ended(ended)
}

async fn install_into(
    host: Host,
    file: Option<&Path>,
    config: Option<&Path>,
    dry_run: bool,
    report: &mut Report,
) -> Result<i32> {
    let file = host_file(host, file)?;
    let Some(config) = config else {
        bail!(
            "install needs the servers.toml planmux will run: pass --config (make one with `planmux import --from {} -o servers.toml`)",
            host.name()
        );
    };
    let config = std::path::absolute(config).unwrap_or_else(|_| config.to_path_buf());
    let text = std::fs::read_to_string(&config).with_context(|| config.display().to_string())?;
    let servers = checked(&config, &text, report)?;
    // Only the host's own remote servers are asked: the others are not install's to move.
    let in_host: Vec<String> = HostFile::read(&file, host.servers_key())
        .map(|read| {
            let servers = read.servers(host.servers_key());
            servers.iter().map(|(name, _)| sanitize(name)).collect()
        })
        .unwrap_or_default();
    let asked: Vec<&ServerConfig> = (servers.iter())
        .filter(|s| s.enabled && matches!(s.transport, Transport::Http { .. }))
        .filter(|s| in_host.contains(&s.name))
        .collect();
    let decided = readiness::decide(&asked).await;
    let readiness = |server: &ServerConfig| {
        (decided.readiness.get(&server.name))
            .cloned()
            .unwrap_or(Readiness::Ready)
    };
    let runs = Runs {
        servers: &servers,
        readiness: &readiness,
    };
    let exe = std::env::current_exe().context("where this planmux binary is")?;
    let path = std::env::var("PATH").ok();
    let done = install_planmux(host, &file, &exe, &config, &runs, path.as_deref(), dry_run)?;
    report.out_raw(&done.diff);
    for note in &decided.notes {
        report.err(format_args!("note: {note}"));
    }
    let login = |name: &str| format!("planmux login {name} --config {}", config.display());
    let again = format!(
        "planmux install --host {} --config {}",
        host.name(),
        config.display()
    );
    for line in kept(&done.kept, &config, &login, &again) {
        report.err(line);
    }
    if dry_run {
        report.err(format_args!("dry run: {} was not changed", file.display()));
        return Ok(0);
    }
    report.err(format_args!(
        "installed: {} now starts planmux, which runs {} server(s) in its place; the original is {}",
        file.display(),
        done.moved.len(),
        done.backup.display()
    ));
    for line in next(host, &done.kept, &login, &again) {
        report.err(line);
    }
    Ok(0)
}

/// For each server left in the host's file, why, and what to do about it.
fn kept(kept: &[Kept], config: &Path, login: &dyn Fn(&str) -> String, again: &str) -> Vec<String> {
    let config = config.display();
    kept.iter()
        .map(|Kept { name, planmux, why }| {
            let why = match why {
                Why::NotInConfig => {
                    format!("it is not in {config}: it stays in the host's file, run by the host")
                }
                Why::Off => format!(
                    "{config} turns it off (`enabled = false`) while the host runs it: it stays in the host's file; to move it, remove `enabled = false` from [servers.{planmux}], then run `{again}`"
                ),
                Why::Sse => format!(
                    "it is an SSE server, which planmux cannot run yet (it speaks streamable HTTP): it stays in the host's file; if the server also serves streamable HTTP, set that url in [servers.{planmux}], remove `enabled = false`, then run `{again}`"
                ),
                Why::NeedsSignIn => format!(
                    "it asks for sign-in (OAuth), which planmux has not done yet: it stays in the host's file; run `{}`, then `{again}`",
                    login(planmux)
                ),
                Why::Unsupported(reason) => {
                    format!("{reason}; it stays in the host's file, run by the host")
                }
            };
            format!("note: \"{name}\": {why}")
        })
        .collect()
}

/// What to do now that planmux is in the host's file: sign in where a server waits for
/// it, restart the host, and how to undo.
fn next(host: Host, kept: &[Kept], login: &dyn Fn(&str) -> String, again: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let waiting: Vec<&str> = (kept.iter())
        .filter(|k| k.why == Why::NeedsSignIn)
        .map(|k| k.planmux.as_str())
        .collect();
    if !waiting.is_empty() {
        lines.push(
            "next: sign in to the server(s) that stayed until you do, then install again to move them:"
                .to_owned(),
        );
        lines.extend(waiting.iter().map(|name| format!("  {}", login(name))));
        lines.push(format!("  {again}"));
    }
    lines.push(format!(
        "restart {} to use it; its logs: {}. Undo: planmux uninstall --host {}",
        host.name(),
        host.logs(),
        host.name()
    ));
    lines
}

/// Refuses a config planmux would refuse to start on, so the host is not left starting a
/// planmux that exits at once. A variable the servers read may be set only where the host
/// starts planmux, not here: with one unset, what its value decides is not checked.
/// Answers the servers as planmux will run them (a server that needs a variable unset
/// here says so in its `unset`).
fn checked(config: &Path, text: &str, report: &mut Report) -> Result<Vec<ServerConfig>> {
    let unset = std::cell::RefCell::new(Vec::new());
    let env = |name: &str| {
        std::env::var(name).ok().or_else(|| {
            unset.borrow_mut().push(name.to_owned());
            Some(String::new())
        })
    };
    let parsed = Config::parse_file(config, text, &env);
    let unset = unset.into_inner().join(", ");
    match &parsed {
        Err(error) if unset.is_empty() => {
            bail!("{error}\nplanmux would not start on this config: fix it, then install")
        }
        Err(error) => report.err(format_args!(
            "note: not fully checked: {unset} not set here ({error}); set it where the host starts planmux"
        )),
        Ok(_) if !unset.is_empty() => report.err(format_args!(
            "note: {unset} not set here: set it where the host starts planmux"
        )),
        Ok(_) => {}
    }
    match Config::parse_file(config, text, &|name| std::env::var(name).ok()) {
        Ok(here) => Ok(here.servers),
        Err(_) => match parsed {
            Ok(checked) => Ok(checked.servers),
            Err(error) => bail!(
                "{error}\ninstall needs servers.toml to load here to learn which servers planmux runs: set {unset} here too, then install"
            ),
        },
    }
}

/// `planmux uninstall --host HOST [--file F] [--force] [--dry-run]`.
pub fn uninstall(host: Host, file: Option<&Path>, force: bool, dry_run: bool) -> Report {
    let mut report = Report::new();
    let ended = uninstall_into(host, file, force, dry_run, &mut report);
    report.ended(ended)
}

fn uninstall_into(
    host: Host,
    file: Option<&Path>,
    force: bool,
    dry_run: bool,
    report: &mut Report,
) -> Result<i32> {
    let file = host_file(host, file)?;
    let done = restore(&file, force, dry_run)?;
    report.out_raw(&done.diff);
    if dry_run {
        report.err(format_args!("dry run: {} was not changed", file.display()));
    } else {
        report.err(format_args!(
            "restored {} as it was before planmux install; restart {}",
            file.display(),
            host.name()
        ));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_host_lists_the_known_ones() {
        let Err(error) = host("emacs") else {
            panic!("emacs is not a host")
        };
        assert!(
            error.starts_with("unknown host 'emacs' (one of: "),
            "{error}"
        );
        assert!(error.contains("claude-desktop"), "{error}");
        assert!(host("cursor").is_ok());
    }

    #[tokio::test]
    async fn install_needs_a_config() {
        let report = install(
            host("cursor").expect("a host"),
            Some(Path::new("/nonexistent/mcp.json")),
            None,
            true,
        )
        .await;
        assert_eq!(report.code(), 1);
        assert_eq!(report.stdout(), "");
        assert!(
            report
                .stderr()
                .starts_with("planmux: install needs the servers.toml planmux will run"),
            "{}",
            report.stderr()
        );
    }

    /// What install says of each server it leaves with the host, and what comes next.
    #[test]
    fn what_install_says_of_the_servers_that_stay() {
        let kept = |name: &str, why: Why| Kept {
            name: name.to_owned(),
            planmux: sanitize(name),
            why,
        };
        let kept = [
            kept("my notes", Why::NotInConfig),
            kept("paused", Why::Off),
            kept("sentry", Why::Sse),
            kept("linear", Why::NeedsSignIn),
            kept("Notion", Why::NeedsSignIn),
            kept(
                "legacy",
                Why::Unsupported("it answers HTTP 405 to a streamable HTTP request: it may serve only SSE, which planmux does not speak yet".into()),
            ),
        ];
        let config = Path::new("/home/me/.config/planmux/servers.toml");
        let login = |name: &str| format!("planmux login {name} --config {}", config.display());
        let again =
            "planmux install --host claude-desktop --config /home/me/.config/planmux/servers.toml";
        let mut lines = super::kept(&kept, config, &login, again);
        lines.extend(next(Host::ClaudeDesktop, &kept, &login, again));
        insta::assert_snapshot!("install_kept_and_next", lines.join("\n"));
    }
}
