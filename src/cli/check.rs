//! `planmux check`: starts every server and reports each one's status, tool count and
//! start-up time, then what would keep a host from the whole catalog: tools `servers.lock`
//! holds back, name clashes, pipelines that cannot run. Any of those, or a server that
//! failed, is exit code 1.

use std::time::{Duration, Instant};

use super::Report;
use super::servers::{Start, with_servers};
use super::terminal::{GREEN, RED, Stream, paint};
use crate::catalog::Quarantined;
use crate::config::Config;
use crate::downstream::ServerStatus;
use crate::pipelines::PipelineState;
use crate::runner::PlanRunner;

/// `planmux check`.
pub async fn check(config: &Config) -> Report {
    let started = Instant::now();
    let found = with_servers(config, Start::All, |downstreams| async move {
        let ready_after = started.elapsed();
        let catalog = downstreams.catalog();
        let runner = PlanRunner::new(downstreams.clone(), config);
        Found {
            statuses: downstreams.statuses(),
            ready_after,
            tools: catalog.entries().len(),
            quarantined: catalog.quarantined().to_vec(),
            clashes: catalog
                .clashes()
                .iter()
                .chain(catalog.resources().clashes())
                .cloned()
                .collect(),
            pipelines: runner.pipelines(),
        }
    })
    .await;
    found.report(config)
}

/// What `check` found once every server had started (or failed to).
struct Found {
    /// The enabled servers', in config order.
    statuses: Vec<ServerStatus>,
    /// How long until every server had started or failed.
    ready_after: Duration,
    /// Tools in the catalog.
    tools: usize,
    /// Tools held back by `servers.lock`.
    quarantined: Vec<Quarantined>,
    /// Names two tools or resources share (one of each left out).
    clashes: Vec<String>,
    /// Every pipeline, against the catalog.
    pipelines: Vec<PipelineState>,
}

impl Found {
    /// Servers that failed to start.
    fn failed(&self) -> usize {
        self.statuses.iter().filter(|s| !s.ready).count()
    }

    /// 1 when a host would not get the whole catalog: a server failed, a tool is held back,
    /// a name clashes, or a pipeline cannot run.
    fn exit_code(&self) -> i32 {
        let broken = self.pipelines.iter().any(|p| p.ready.is_err());
        if self.failed() > 0 || !self.quarantined.is_empty() || !self.clashes.is_empty() || broken {
            1
        } else {
            0
        }
    }

    /// The table of servers (disabled ones too), then what keeps tools back.
    fn report(&self, config: &Config) -> Report {
        let mut report = Report::new();
        // Disabled servers are listed too: the column fits their names as well.
        let width = config
            .servers
            .iter()
            .map(|s| s.name.len())
            .max()
            .unwrap_or(6)
            .max(6);
        report.out(format_args!(
            "{:<width$}  {:<6}  {:>5}  {:>9}  ERROR",
            "SERVER", "STATUS", "TOOLS", "START(ms)"
        ));
        for s in &self.statuses {
            let startup = s.startup.map_or_else(
                || "-".to_string(),
                |d| format!("{:.1}", d.as_secs_f64() * 1000.0),
            );
            let status = if s.ready {
                paint(&format!("{:<6}", "ok"), GREEN, Stream::Out)
            } else {
                paint(&format!("{:<6}", "FAILED"), RED, Stream::Out)
            };
            report.out(format_args!(
                "{:<width$}  {status}  {:>5}  {startup:>9}  {}",
                s.name,
                s.tools,
                s.error.as_deref().unwrap_or("")
            ));
        }
        for server in config.servers.iter().filter(|s| !s.enabled) {
            report.out(format_args!(
                "{:<width$}  {:<6}  {:>5}  {:>9}",
                server.name, "off", "-", "-"
            ));
        }
        report.out(format_args!(
            "catalog ready in {:.1} ms: {} tools, {} of {} servers failed",
            self.ready_after.as_secs_f64() * 1000.0,
            self.tools,
            self.failed(),
            self.statuses.len()
        ));
        let sign_ins: Vec<String> = config
            .enabled_servers()
            .filter_map(|s| sign_in_line(&s.name, &s.transport))
            .collect();
        if !sign_ins.is_empty() {
            report.out("\nsign-in (OAuth):");
            for line in sign_ins {
                report.out(format_args!("  {line}"));
            }
        }
        if !self.quarantined.is_empty() {
            report.out(
                "\nquarantined by servers.lock (not listed, not callable; `planmux lock` accepts them):",
            );
            for q in &self.quarantined {
                report.out(format_args!("  {}  {}", q.exported, q.change));
            }
        }
        if !self.clashes.is_empty() {
            report.out("\nname clashes (one of each left out):");
            for clash in &self.clashes {
                report.out(format_args!("  {clash}"));
            }
        }
        if !self.pipelines.is_empty() {
            report.out("\npipelines:");
        }
        for state in &self.pipelines {
            match &state.ready {
                Ok(ready) => report.out(format_args!(
                    "  {}  {}  {}, tier {}",
                    state.name,
                    paint("ok", GREEN, Stream::Out),
                    crate::text::count(ready.steps, "step"),
                    ready.spec.tier
                )),
                Err(why) => report.out(format_args!(
                    "  {}  {}  {}",
                    state.name,
                    paint("CANNOT RUN", RED, Stream::Out),
                    why.replace('\n', "\n    ")
                )),
            }
        }
        report.exit(self.exit_code())
    }
}

/// One OAuth server's sign-in as kept, for a person: signed in (until when, with which
/// scopes, from which issuer), not signed in, or signed out and why; `None` for a server
/// without OAuth. No token is shown.
fn sign_in_line(name: &str, transport: &crate::config::Transport) -> Option<String> {
    use crate::oauth::Status;
    let status = match crate::oauth::status(name, transport) {
        Ok(status) => status?,
        Err(e) => return Some(format!("{name}  cannot read its sign-in: {e}")),
    };
    let line = match status {
        Status::Header => return None,
        Status::ClientCredentials => "client credentials (signs in by itself)".to_owned(),
        Status::NotSignedIn => format!("not signed in: if it asks, run `planmux login {name}`"),
        Status::SignedOut { why } => {
            format!("NEEDS LOGIN: {why}: run `planmux login {name}`")
        }
        Status::SignedIn {
            expires_in,
            renewable,
            scopes,
            issuer,
        } => {
            let lasting = match expires_in {
                Some(left) if left.is_zero() => "access token expired".to_owned(),
                Some(left) => format!("access token for {} min more", left.as_secs().div_ceil(60)),
                None => "access token without an expiry".to_owned(),
            };
            let renews = if renewable { ", renews itself" } else { "" };
            let scopes = if scopes.is_empty() {
                String::new()
            } else {
                format!("; scopes {}", scopes.join(" "))
            };
            let issuer = issuer.map(|i| format!("; issuer {i}")).unwrap_or_default();
            format!("signed in ({lasting}{renews}{scopes}{issuer})")
        }
    };
    Some(format!("{name}  {line}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(name: &str, ready: bool) -> ServerStatus {
        ServerStatus {
            name: name.into(),
            state: if ready { "connected" } else { "failed" },
            ready,
            tools: if ready { 3 } else { 0 },
            startup: ready.then(|| Duration::from_micros(12_345)),
            error: (!ready).then(|| "exited at once".into()),
        }
    }

    fn found(ready: &[bool], quarantined: usize, clashes: usize, broken: usize) -> Found {
        Found {
            statuses: (0..ready.len())
                .map(|i| status(&format!("s{i}"), ready[i]))
                .collect(),
            ready_after: Duration::from_millis(20),
            tools: 3,
            quarantined: (0..quarantined)
                .map(|i| Quarantined {
                    exported: format!("s0__t{i}"),
                    server: "s0".into(),
                    tool: format!("t{i}"),
                    change: "new tool".into(),
                })
                .collect(),
            clashes: (0..clashes).map(|i| format!("clash{i}")).collect(),
            pipelines: (0..broken)
                .map(|i| PipelineState {
                    name: format!("p{i}"),
                    ready: Err("calls a tool that is not there".into()),
                })
                .collect(),
        }
    }

    /// `text` without colours (the test's stdout may be a terminal).
    fn plain(text: &str) -> String {
        regex::Regex::new("\x1b\\[[0-9]+m")
            .expect("a valid pattern")
            .replace_all(text, "")
            .into_owned()
    }

    #[test]
    fn exit_code_is_1_when_a_host_would_miss_part_of_the_catalog() {
        // (servers ready, quarantined, clashes, broken pipelines) -> exit code
        let cases: &[(&[bool], usize, usize, usize, i32)] = &[
            (&[], 0, 0, 0, 0),
            (&[true, true], 0, 0, 0, 0),
            (&[true, false], 0, 0, 0, 1),
            (&[false], 0, 0, 0, 1),
            (&[true], 1, 0, 0, 1),
            (&[true], 0, 2, 0, 1),
            (&[true], 0, 0, 1, 1),
            (&[false], 3, 1, 1, 1),
        ];
        for &(ready, held, clashes, broken, code) in cases {
            let found = found(ready, held, clashes, broken);
            assert_eq!(
                found.exit_code(),
                code,
                "ready {ready:?}, {held} held, {clashes} clashes, {broken} broken"
            );
        }
    }

    #[test]
    fn the_report_lists_servers_and_what_is_held_back() {
        let config =
            Config::parse("", "test", std::path::Path::new("."), &|_| None).expect("empty config");
        let report = found(&[true, false], 1, 1, 1).report(&config);
        assert_eq!(report.code(), 1);
        assert_eq!(report.stderr(), "");
        assert_eq!(
            plain(&report.stdout()),
            "SERVER  STATUS  TOOLS  START(ms)  ERROR\n\
             s0      ok          3       12.3  \n\
             s1      FAILED      0          -  exited at once\n\
             catalog ready in 20.0 ms: 3 tools, 1 of 2 servers failed\n\
             \n\
             quarantined by servers.lock (not listed, not callable; `planmux lock` accepts them):\n  \
             s0__t0  new tool\n\
             \n\
             name clashes (one of each left out):\n  \
             clash0\n\
             \n\
             pipelines:\n  \
             p0  CANNOT RUN  calls a tool that is not there\n"
        );
    }
}
