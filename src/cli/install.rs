//! `planmux install` and `planmux uninstall`: put planmux in a host's config in place of
//! the servers it will run (with a backup, printing the diff), and put the config back as
//! it was. Also where a host keeps its config, for `import` too.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use super::Report;
use crate::hosts::{Host, install as install_planmux, uninstall as restore};

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
pub fn install(host: Host, file: Option<&Path>, config: Option<&Path>, dry_run: bool) -> Report {
    let mut report = Report::new();
    let ended = install_into(host, file, config, dry_run, &mut report);
    report.ended(ended)
}

fn install_into(
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
    checked(&config, &text, report)?;
    let table: toml::Table = text
        .parse()
        .with_context(|| format!("{}: not valid TOML", config.display()))?;
    let names: Vec<String> = table
        .get("servers")
        .and_then(toml::Value::as_table)
        .map(|servers| servers.keys().cloned().collect())
        .unwrap_or_default();
    let exe = std::env::current_exe().context("where this planmux binary is")?;
    let path = std::env::var("PATH").ok();
    let done = install_planmux(host, &file, &exe, &config, &names, path.as_deref(), dry_run)?;
    report.out_raw(&done.diff);
    for name in &done.kept {
        report.err(format_args!(
            "note: \"{name}\" is not in {}: it stays in the host's file, run by the host",
            config.display()
        ));
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
    report.err(format_args!(
        "restart {} to use it; its logs: {}. Undo: planmux uninstall --host {}",
        host.name(),
        host.logs(),
        host.name()
    ));
    Ok(0)
}

/// Refuses a config planmux would refuse to start on, so the host is not left starting a
/// planmux that exits at once. A variable the servers read may be set only where the host
/// starts planmux, not here: with one unset, what its value decides is not checked.
fn checked(config: &Path, text: &str, report: &mut Report) -> Result<()> {
    let unset = std::cell::RefCell::new(Vec::new());
    let env = |name: &str| {
        std::env::var(name).ok().or_else(|| {
            unset.borrow_mut().push(name.to_owned());
            Some(String::new())
        })
    };
    let parsed = crate::config::Config::parse_file(config, text, &env);
    let unset = unset.into_inner().join(", ");
    match parsed {
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
    Ok(())
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

    #[test]
    fn install_needs_a_config() {
        let report = install(
            host("cursor").expect("a host"),
            Some(Path::new("/nonexistent/mcp.json")),
            None,
            true,
        );
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
}
