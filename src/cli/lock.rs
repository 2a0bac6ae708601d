//! `planmux lock`: pins every tool definition in `servers.lock` beside the config. It
//! refuses when a server failed to start, which would leave that server's tools unpinned.

use anyhow::Context as _;
use rmcp::model::Tool;

use super::Report;
use super::servers::{Start, with_servers};
use crate::config::Config;

/// `planmux lock`.
pub async fn lock(config: &Config) -> Report {
    let mut report = Report::new();
    let ended = write_lock(config, &mut report).await;
    report.ended(ended)
}

async fn write_lock(config: &Config, report: &mut Report) -> anyhow::Result<i32> {
    let Some(path) = config.lock_path.clone() else {
        anyhow::bail!(
            "planmux lock writes servers.lock beside a config file, and the built-in config has none (use --config)"
        );
    };
    let (failed, tools) = with_servers(config, Start::All, |downstreams| async move {
        let failed: Vec<String> = downstreams
            .statuses()
            .into_iter()
            .filter(|s| !s.ready)
            .map(|s| format!("{} ({})", s.name, s.error.unwrap_or_default()))
            .collect();
        let tools: Vec<(String, Vec<Tool>)> = downstreams
            .servers()
            .iter()
            .map(|s| (s.config.name.clone(), s.tools()))
            .collect();
        (failed, tools)
    })
    .await;
    refused(&failed)?;
    let lock = crate::lock::Lock::of(tools.iter().map(|(s, t)| (s.as_str(), t.as_slice())));
    lock.save(&path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    let count: usize = tools.iter().map(|(_, t)| t.len()).sum();
    report.out(format_args!(
        "locked {count} tools of {} servers in {}",
        tools.len(),
        path.display()
    ));
    Ok(0)
}

/// Locking without a server would leave its tools unpinned: refused while any failed to
/// start (`failed` names each, with its error).
fn refused(failed: &[String]) -> anyhow::Result<()> {
    if failed.is_empty() {
        Ok(())
    } else {
        anyhow::bail!(
            "not locked: these servers failed to start: {}",
            failed.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_while_a_server_failed() {
        assert!(refused(&[]).is_ok());
        let report = Report::new()
            .ended(refused(&["a (exited)".into(), "b (timed out)".into()]).map(|()| 0));
        assert_eq!(
            report.stderr(),
            "planmux: not locked: these servers failed to start: a (exited), b (timed out)\n"
        );
        assert_eq!(report.code(), 1);
    }

    #[tokio::test]
    async fn the_built_in_config_has_nowhere_to_lock() {
        let config =
            Config::parse("", "test", std::path::Path::new("."), &|_| None).expect("empty config");
        let report = lock(&config).await;
        assert_eq!(report.code(), 1);
        assert!(
            report
                .stderr()
                .starts_with("planmux: planmux lock writes servers.lock beside a config file"),
            "{}",
            report.stderr()
        );
    }
}
