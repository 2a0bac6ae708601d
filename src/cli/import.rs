//! `planmux import`: turns a host's MCP servers (Claude Desktop, Claude Code, Cursor, VS
//! Code, Windsurf, or a JSON file of theirs) into servers.toml, printed or written with
//! `-o` (readable only by its owner: it may hold secrets) beside its JSON Schema.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use super::Report;
use super::install::host_file;
use crate::hosts::{Host, HostFile, import as import_servers};

/// `planmux import [--from HOST|FILE] [-o servers.toml] [--force]`.
pub fn import(from: Option<&str>, output: Option<&Path>, force: bool) -> Report {
    let mut report = Report::new();
    let ended = import_into(from, output, force, &mut report);
    report.ended(ended)
}

fn import_into(
    from: Option<&str>,
    output: Option<&Path>,
    force: bool,
    report: &mut Report,
) -> Result<i32> {
    let from = match from {
        Some(from) => from.to_owned(),
        None => found_host(report)?,
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
    let imported = import_servers(&file, key, &source, &|name| std::env::var(name).ok());
    for note in &imported.notes {
        report.err(format_args!("note: {note}"));
    }
    let Some(output) = output else {
        report.out_raw(&imported.toml);
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
        serde_json::to_string_pretty(&crate::config::config_schema())?,
    )
    .with_context(|| schema.display().to_string())?;
    let config = std::path::absolute(output).unwrap_or_else(|_| output.to_path_buf());
    report.err(format_args!(
        "imported {} of {} server(s) from {} into {} ({} value(s) of env and headers copied; the file is readable only by you)",
        imported.servers.len(),
        file.servers(key).len(),
        path.display(),
        output.display(),
        imported.secrets
    ));
    report.err(format_args!(
        "next: planmux check --config {}",
        config.display()
    ));
    if let Some(host) = Host::parse(from) {
        report.err(format_args!(
            "then: planmux install --host {} --config {}",
            host.name(),
            config.display()
        ));
    }
    Ok(0)
}

/// The first host with a config file here, for `import` without `--from`.
fn found_host(report: &mut Report) -> Result<String> {
    for (host, name) in Host::ALL {
        if host_file(host, None)?.is_file() {
            report.err(format_args!(
                "importing from {name} ({})",
                host_file(host, None)?.display()
            ));
            return Ok(name.to_owned());
        }
    }
    let names: Vec<&str> = Host::ALL.iter().map(|(_, n)| *n).collect();
    bail!(
        "no host config found (looked for {}): pass --from HOST or --from FILE",
        names.join(", ")
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_file_is_private_even_when_it_existed() {
        use std::os::unix::fs::PermissionsExt as _;
        let folder = tempfile::tempdir().expect("a temp folder");
        let path = folder.path().join("servers.toml");
        std::fs::write(&path, "old").expect("written");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        write_private(&path, "new").expect("written again");
        let mode = std::fs::metadata(&path)
            .expect("there")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "new");
    }

    #[test]
    fn an_existing_output_is_kept_without_force() {
        let folder = tempfile::tempdir().expect("a temp folder");
        let from = folder.path().join("mcp.json");
        std::fs::write(&from, r#"{"mcpServers": {"a": {"command": "true"}}}"#).expect("written");
        let output = folder.path().join("servers.toml");
        std::fs::write(&output, "mine").expect("written");
        let report = import(from.to_str(), Some(&output), false);
        assert_eq!(report.code(), 1);
        assert!(
            report
                .stderr()
                .ends_with("exists: pass --force to replace it\n")
        );
        assert_eq!(std::fs::read_to_string(&output).expect("read"), "mine");
    }
}
