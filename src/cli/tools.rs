//! `planmux tools`: the merged catalog as a host would list it, one tool a line with its
//! tier and the first line of its description, then the pipelines that can run and
//! planmux's own tools. A server that failed to start is exit code 1, as in `check`.

use super::Report;
use super::servers::{Start, with_servers};
use crate::approval::APPROVE_PLAN_TOOL;
use crate::config::Config;
use crate::plan::EXECUTE_PLAN_TOOL;
use crate::policy::Confirm;
use crate::runner::PlanRunner;
use crate::upstream::surface::SEARCH_TOOLS_TOOL;

/// `planmux tools`.
pub async fn tools(config: &Config) -> Report {
    with_servers(config, Start::All, |downstreams| async move {
        let catalog = downstreams.catalog();
        let tools = catalog
            .entries()
            .iter()
            .map(|entry| Row {
                name: entry.exported.as_str().to_owned(),
                tier: entry.tier.as_str().to_owned(),
                description: entry.definition.description.as_deref().unwrap_or("").into(),
            })
            .collect();
        let statuses = downstreams.statuses();
        let failed = statuses
            .into_iter()
            .filter(|s| !s.ready)
            .map(|s| {
                let error = s.error.unwrap_or_default();
                format!("server '{}' failed to start: {error}", s.name)
            })
            .collect();
        // Beside the servers' tools, what planmux lists itself: the pipelines that can
        // run, and its own tools (search_tools only on the compact surface).
        let runner = PlanRunner::new(downstreams.clone(), config);
        let pipelines = runner
            .listed_pipelines()
            .into_iter()
            .map(|ready| Row {
                description: ready.tool.description.as_deref().unwrap_or("").to_owned(),
                name: ready.spec.exported,
                tier: ready.spec.tier.as_str().to_owned(),
            })
            .collect();
        Listing {
            tools,
            pipelines,
            approvals: downstreams.policy().confirm != Confirm::None,
            servers: downstreams.servers().len(),
            failed,
        }
        .report()
    })
    .await
}

/// A line of the listing.
struct Row {
    name: String,
    tier: String,
    /// All of it: the listing shows the start of its first line.
    description: String,
}

/// What `tools` lists.
struct Listing {
    /// The catalog's tools.
    tools: Vec<Row>,
    /// The pipelines that can run and are not denied.
    pipelines: Vec<Row>,
    /// Whether `[policy] confirm` asks for approvals (planmux then lists `approve_plan`).
    approvals: bool,
    /// Enabled servers.
    servers: usize,
    /// A line for each server that failed to start.
    failed: Vec<String>,
}

/// The first line of `description`, cut at 80 characters.
fn short(description: &str) -> String {
    description
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(80)
        .collect()
}

impl Listing {
    fn report(&self) -> Report {
        let mut report = Report::new();
        let width = self
            .tools
            .iter()
            .map(|t| t.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        report.out(format_args!(
            "{:<width$}  {:<11}  DESCRIPTION",
            "TOOL", "TIER"
        ));
        for tool in &self.tools {
            report.out(format_args!(
                "{:<width$}  {:<11}  {}",
                tool.name,
                tool.tier,
                short(&tool.description)
            ));
        }
        // Their tier is that of what they run: `-` here.
        let mut own = vec![(EXECUTE_PLAN_TOOL, "run a plan of tool calls")];
        if self.approvals {
            own.push((APPROVE_PLAN_TOOL, "run a plan the user approved"));
        }
        own.push((
            SEARCH_TOOLS_TOOL,
            "find tools (listed on the compact surface)",
        ));
        for pipeline in &self.pipelines {
            report.out(format_args!(
                "{:<width$}  {:<11}  pipeline: {}",
                pipeline.name,
                pipeline.tier,
                short(&pipeline.description)
            ));
        }
        for (name, description) in own {
            report.out(format_args!(
                "{name:<width$}  {:<11}  planmux: {description}",
                "-"
            ));
        }
        let pipelines = self.pipelines.len();
        report.out(format_args!(
            "{} tools from {} of {} servers, {pipelines} pipeline{}",
            self.tools.len(),
            self.servers - self.failed.len(),
            self.servers,
            if pipelines == 1 { "" } else { "s" }
        ));
        for line in &self.failed {
            report.err(format_args!("planmux: {line}"));
        }
        // Like `check`: a catalog missing a server's tools is not a success.
        report.exit(if self.failed.is_empty() { 0 } else { 1 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, tier: &str, description: &str) -> Row {
        Row {
            name: name.into(),
            tier: tier.into(),
            description: description.into(),
        }
    }

    #[test]
    fn lists_tools_pipelines_and_planmux_s_own() {
        let listing = Listing {
            tools: vec![row(
                "metrics__query",
                "read",
                &format!("{}\nsecond line", "x".repeat(90)),
            )],
            pipelines: vec![row("daily", "write", "one pipeline")],
            approvals: true,
            servers: 2,
            failed: vec!["server 'b' failed to start: gone".into()],
        };
        let report = listing.report();
        let x80 = "x".repeat(80);
        assert_eq!(
            report.stdout(),
            format!(
                "TOOL            TIER         DESCRIPTION\n\
                 metrics__query  read         {x80}\n\
                 daily           write        pipeline: one pipeline\n\
                 execute_plan    -            planmux: run a plan of tool calls\n\
                 approve_plan    -            planmux: run a plan the user approved\n\
                 search_tools    -            planmux: find tools (listed on the compact surface)\n\
                 1 tools from 1 of 2 servers, 1 pipeline\n"
            )
        );
        assert_eq!(
            report.stderr(),
            "planmux: server 'b' failed to start: gone\n"
        );
        assert_eq!(report.code(), 1);
    }

    #[test]
    fn without_failures_it_succeeds() {
        let listing = Listing {
            tools: Vec::new(),
            pipelines: Vec::new(),
            approvals: false,
            servers: 0,
            failed: Vec::new(),
        };
        let report = listing.report();
        assert_eq!(report.code(), 0);
        assert!(
            report
                .stdout()
                .ends_with("0 tools from 0 of 0 servers, 0 pipelines\n")
        );
        assert!(!report.stdout().contains(APPROVE_PLAN_TOOL));
    }
}
