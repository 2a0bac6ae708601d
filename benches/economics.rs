//! The economics of `execute_plan`: model round-trips and input tokens for the seeds'
//! scenarios, replayed by a scripted model in three arms against the built-in demo
//! servers, in-process:
//!
//! 1. one tool call per round-trip;
//! 2. native parallel tool calls (one round-trip per dependency level);
//! 3. `execute_plan` (one round-trip sends the plan, one reads its lean result).
//!
//! Every arm ends with the model's answer. Tokens are counted with tiktoken's o200k_base
//! over what the host re-sends each round-trip: a realistic conversation prefix, the real
//! tool definitions, and the real tool calls and results of the growing history.
//!
//! `cargo bench --features bench --bench economics` prints the table, writes
//! target/bench/economics.json and the chart docs/bench/economics.svg. Under `cargo test`
//! it runs every scenario and arm the same way but skips the chart.
#![allow(clippy::print_stdout)]

#[path = "economics/chart.rs"]
mod chart;
#[path = "economics/large.rs"]
mod large;
#[path = "economics/meter.rs"]
mod meter;
#[path = "economics/prefix.rs"]
mod prefix;
#[path = "economics/replay.rs"]
mod replay;
#[path = "economics/report.rs"]
mod report;
#[path = "economics/scenarios.rs"]
mod scenarios;

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, ensure};
use planmux::config::{Config, DEFAULT_CONFIG};
use planmux::downstream::Downstreams;
use planmux::policy::Confirm;
use planmux::runner::PlanRunner;
use planmux::upstream::surface;
use rmcp::model::Tool;
use serde_json::json;

use meter::{Base, Tokenizer};
use prefix::PREFIX;
use replay::Replay;
use report::{Line, Report};
use scenarios::Scenario;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let full = std::env::args().any(|a| a == "--bench");
    let sandbox = tempfile::tempdir()?;
    let config = Config::parse(
        DEFAULT_CONFIG,
        "<built-in default>",
        sandbox.path(),
        &|_| None,
    )?;
    let downstreams = Downstreams::start(&config, Arc::default()).await;
    let report = measure(&config, downstreams.clone()).await;
    downstreams.shutdown().await;
    let report = report?;
    report.print();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = root.join("target/bench");
    std::fs::create_dir_all(&out)?;
    std::fs::write(
        out.join("economics.json"),
        serde_json::to_string_pretty(&report.to_json())?,
    )?;
    if full {
        let docs = root.join("docs/bench");
        std::fs::create_dir_all(&docs)?;
        chart::draw(&report, &docs.join("economics.svg"))?;
        println!("\nwrote target/bench/economics.json and docs/bench/economics.svg");
    }
    Ok(())
}

/// Replays every scenario and meters the three arms.
async fn measure(config: &Config, downstreams: Arc<Downstreams>) -> anyhow::Result<Report> {
    for status in downstreams.statuses() {
        ensure!(
            status.ready,
            "demo server '{}' did not start: {:?}",
            status.name,
            status.error
        );
    }
    let tokens = Tokenizer::new()?;
    let runner = PlanRunner::new(downstreams.clone(), config);
    let catalog: Vec<Tool> = downstreams.catalog().definitions().cloned().collect();
    // What the host lists beside the catalog: execute_plan as built from it.
    let execute_plan = surface::execute_plan_tool(&downstreams.catalog(), Confirm::None, false);
    let description = execute_plan.description.as_deref().unwrap_or_default();
    let fixed = Fixed {
        prefix: PREFIX.iter().map(|(_, text)| tokens.message(text)).sum(),
        tools: catalog
            .iter()
            .map(|t| {
                let description = t.description.as_deref().unwrap_or_default();
                definition_tokens(&tokens, &t.name, description, &t.input_schema)
            })
            .sum(),
        execute_plan: definition_tokens(
            &tokens,
            &execute_plan.name,
            description,
            &execute_plan.input_schema,
        ),
    };
    let mut scenarios = Vec::new();
    let mut replays = Vec::new();
    for scenario in scenarios::all() {
        let replay = replay::replay(&scenario, &runner, &downstreams)
            .await
            .with_context(|| format!("scenario '{}'", scenario.name))?;
        scenarios.push(line(&tokens, &fixed, &scenario, &replay));
        replays.push((scenario, replay));
    }
    let large = large::measure(&tokens, fixed.prefix, &downstreams.catalog(), &replays)?;
    Ok(Report {
        scenarios,
        prefix_tokens: fixed.prefix,
        prefix_messages: PREFIX.len(),
        tool_count: catalog.len(),
        tool_tokens: fixed.tools,
        execute_plan_tokens: fixed.execute_plan,
        description_tokens: tokens.count(description),
        large,
    })
}

/// Tokens every request carries, whatever the scenario.
struct Fixed {
    /// The conversation prefix.
    prefix: usize,
    /// The downstream tools' definitions.
    tools: usize,
    /// execute_plan's definition, which only the plan arm lists.
    execute_plan: usize,
}

/// Meters the three arms of one replayed scenario.
fn line(tokens: &Tokenizer, fixed: &Fixed, scenario: &Scenario, replay: &Replay) -> Line {
    let direct = Base {
        prefix: fixed.prefix,
        tools: fixed.tools,
        request: tokens.message(scenario.request),
    };
    let plan = Base {
        tools: fixed.tools + fixed.execute_plan,
        ..direct
    };
    let calls = || replay.levels.iter().flatten();
    Line {
        name: scenario.name,
        scenarios: 1,
        calls: calls().count(),
        plan_steps: scenario.plan["steps"].as_array().map_or(0, Vec::len),
        execute_plan_tokens: fixed.execute_plan,
        raw_bytes: calls().map(|c| c.result_text.len()).sum(),
        plan_structured_bytes: replay.plan_result_structured_bytes,
        arms: [
            meter::one_per_turn(tokens, direct, replay),
            meter::parallel(tokens, direct, replay),
            meter::execute_plan(tokens, plan, replay),
        ],
    }
}

/// Tokens of one tool definition as a host sends it to the model: name, description and
/// input schema (an entry of the Anthropic Messages API's `tools`; output schemas and
/// annotations stay with the host).
fn definition_tokens(
    tokens: &Tokenizer,
    name: &str,
    description: &str,
    input_schema: &impl serde::Serialize,
) -> usize {
    let entry = json!({"name": name, "description": description, "input_schema": input_schema});
    tokens.count(&entry.to_string())
}
