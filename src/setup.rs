//! The commands that move a user's servers behind planmux: `import`, `install`,
//! `uninstall`, `schema`. A module of the binary: it prints, the library decides.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use planmux::hosts::{Host, HostFile, import, install, uninstall};

/// The host named on the command line, or a list of the names.
pub fn host(name: &str) -> std::result::Result<Host, String> {
    Host::parse(name).ok_or_else(|| {
        let names: Vec<&str> = Host::ALL.iter().map(|(_, n)| *n).collect();
        format!("unknown host '{name}' (one of: {})", names.join(", "))
    })
}

/// What `planmux schema` prints the JSON Schema of.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Schema {
    /// servers.toml
    Config,
    /// a plan
    Plan,
}

fn home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set: pass the host's config file with --file")
}

/// The host's file: `--file`, or where the host keeps it for this user.
fn host_file(host: Host, file: Option<&Path>) -> Result<PathBuf> {
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

/// The first host with a config file here, for `import` without `--from`.
fn found_host() -> Result<String> {
    for (host, name) in Host::ALL {
        if host_file(host, None)?.is_file() {
            err!(
                "importing from {name} ({})",
                host_file(host, None)?.display()
            );
            return Ok(name.to_owned());
        }
    }
    let names: Vec<&str> = Host::ALL.iter().map(|(_, n)| *n).collect();
    bail!(
        "no host config found (looked for {}): pass --from HOST or --from FILE",
        names.join(", ")
    )
}

/// `planmux import [--from HOST|FILE] [-o servers.toml]`.
pub fn run_import(from: Option<&str>, output: Option<&Path>, force: bool) -> Result<i32> {
    let from = match from {
        Some(from) => from.to_owned(),
        None => found_host()?,
    };
    let from = from.as_str();
    let (path, key, source) = match Host::parse(from) {
        Some(host) => (
            host_file(host, None)?,
            host.servers_key(),
            host.name().to_owned(),
        ),
        None => {
            let path = PathBuf::from(from);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("{from}: neither a host nor a readable file"))?;
            let key = if text.contains("\"mcpServers\"") {
                "mcpServers"
            } else {
                "servers"
            };
            (path, key, from.to_owned())
        }
    };
    let file = HostFile::read(&path, key)?;
    let imported = import(&file, key, &source, &|name| std::env::var(name).ok());
    for note in &imported.notes {
        err!("note: {note}");
    }
    let Some(output) = output else {
        out_raw!("{}", imported.toml);
        return Ok(0);
    };
    if output.exists() && !force {
        bail!("{} exists: pass --force to replace it", output.display());
    }
    if let Some(folder) = output.parent().filter(|f| !f.as_os_str().is_empty()) {
        std::fs::create_dir_all(folder).with_context(|| folder.display().to_string())?;
    }
    let schema = output.with_file_name("servers.schema.json");
    let text = format!("#:schema ./servers.schema.json\n{}", imported.toml);
    write_private(output, &text)?;
    std::fs::write(
        &schema,
        serde_json::to_string_pretty(&planmux::config::config_schema())?,
    )
    .with_context(|| schema.display().to_string())?;
    let config = std::path::absolute(output).unwrap_or_else(|_| output.to_path_buf());
    err!(
        "imported {} of {} server(s) from {} into {} ({} value(s) of env and headers copied; the file is readable only by you)",
        imported.servers.len(),
        file.servers(key).len(),
        path.display(),
        output.display(),
        imported.secrets
    );
    err!("next: planmux check --config {}", config.display());
    if let Some(host) = Host::parse(from) {
        err!(
            "then: planmux install --host {} --config {}",
            host.name(),
            config.display()
        );
    }
    Ok(0)
}

/// Writes a file only its owner can read: it may hold secrets.
fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write as _;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options
        .open(path)
        .with_context(|| path.display().to_string())?;
    // An existing file keeps its mode through open: make it private too.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| path.display().to_string())?;
    }
    file.write_all(text.as_bytes())
        .with_context(|| path.display().to_string())
}

/// `planmux install --host HOST [--file F] [--dry-run]`, with the global `--config`.
pub fn run_install(
    host: Host,
    file: Option<&Path>,
    config: Option<&Path>,
    dry_run: bool,
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
    checked(&config, &text)?;
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
    let done = install(host, &file, &exe, &config, &names, path.as_deref(), dry_run)?;
    out_raw!("{}", done.diff);
    for name in &done.kept {
        err!(
            "note: \"{name}\" is not in {}: it stays in the host's file, run by the host",
            config.display()
        );
    }
    if dry_run {
        err!("dry run: {} was not changed", file.display());
        return Ok(0);
    }
    err!(
        "installed: {} now starts planmux, which runs {} server(s) in its place; the original is {}",
        file.display(),
        done.moved.len(),
        done.backup.display()
    );
    err!(
        "restart {} to use it; its logs: {}. Undo: planmux uninstall --host {}",
        host.name(),
        host.logs(),
        host.name()
    );
    Ok(0)
}

/// Refuses a config planmux would refuse to start on, so the host is not left starting a
/// planmux that exits at once. A variable the servers read may be set only where the host
/// starts planmux, not here: with one unset, what its value decides is not checked.
fn checked(config: &Path, text: &str) -> Result<()> {
    let unset = std::cell::RefCell::new(Vec::new());
    let env = |name: &str| {
        std::env::var(name).ok().or_else(|| {
            unset.borrow_mut().push(name.to_owned());
            Some(String::new())
        })
    };
    let parsed = planmux::config::Config::parse_file(config, text, &env);
    let unset = unset.into_inner().join(", ");
    match parsed {
        Err(error) if unset.is_empty() => {
            bail!("{error}\nplanmux would not start on this config: fix it, then install")
        }
        Err(error) => err!(
            "note: not fully checked: {unset} not set here ({error}); set it where the host starts planmux"
        ),
        Ok(_) if !unset.is_empty() => {
            err!("note: {unset} not set here: set it where the host starts planmux")
        }
        Ok(_) => {}
    }
    Ok(())
}

/// `planmux uninstall --host HOST [--file F] [--force] [--dry-run]`.
pub fn run_uninstall(host: Host, file: Option<&Path>, force: bool, dry_run: bool) -> Result<i32> {
    let file = host_file(host, file)?;
    let done = uninstall(&file, force, dry_run)?;
    out_raw!("{}", done.diff);
    if dry_run {
        err!("dry run: {} was not changed", file.display());
    } else {
        err!(
            "restored {} as it was before planmux install; restart {}",
            file.display(),
            host.name()
        );
    }
    Ok(0)
}

/// `planmux schema config|plan`.
pub fn run_schema(what: Schema) -> Result<i32> {
    let schema = match what {
        Schema::Config => planmux::config::config_schema(),
        Schema::Plan => planmux::plan::plan_schema(),
    };
    out!("{}", serde_json::to_string_pretty(&schema)?);
    Ok(0)
}
