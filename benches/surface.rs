//! The tool surface against catalog size, and search quality, over the recorded catalogs
//! of real MCP servers (benches/catalogs, recorded by scripts/record-catalogs):
//!
//! 1. tokens of what `tools/list` shows the model, full against compact, as the catalog
//!    grows from 4 servers to 10 to all of them;
//! 2. `search_tools`' ranking over the labelled queries of benches/search/queries.json
//!    (written before the ranker was tuned): recall@1 and recall@5.
//!
//! The recorded `tools/list` answers go through `Catalog::build`, the code that builds the
//! catalog from live servers' answers, in-process. Tokens are counted with tiktoken's
//! o200k_base over each definition as a host sends it to the model (name, description,
//! input schema). `cargo bench --features bench --bench surface` prints the tables and
//! writes target/bench/surface.json; `-- --misses` also prints every query whose tools are
//! not in the top five (of the tuning queries only, not the held-out third). Under
//! `cargo test` it runs the same way.
#![allow(clippy::print_stdout)]

use std::path::Path;

use anyhow::{Context, ensure};
use planmux::catalog::{Catalog, Pins, ServerTools};
use planmux::config::Config;
use planmux::policy::{Confirm, Policy, TierRules};
use planmux::upstream::surface::{Shape, listed};
use rmcp::model::Tool;
use serde::Deserialize;
use serde_json::json;
use tiktoken_rs::CoreBPE;

/// The servers of the first two sizes, in order; the last size is every catalog.
const FIRST_FOUR: [&str; 4] = ["everything", "filesystem", "memory", "time"];
const NEXT_SIX: [&str; 6] = ["git", "github", "fetch", "playwright", "slack", "sqlite"];

#[derive(Deserialize)]
struct Recorded {
    server: String,
    tools: Vec<Tool>,
}

#[derive(Deserialize)]
struct Query {
    query: String,
    tools: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let misses = std::env::args().any(|a| a == "--misses");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let recorded = load(&root.join("benches/catalogs"))?;
    let tokens = tiktoken_rs::o200k_base()?;
    let sizes = sizes(&recorded);
    let shape = Shape::new(&Config::parse("", "bench", root, &|_| None)?.proxy);

    println!("Tool surface (o200k tokens of the definitions tools/list shows)\n");
    println!("| servers | tools | full | compact |");
    println!("| --- | --- | --- | --- |");
    let mut surface = Vec::new();
    for servers in &sizes {
        let catalog = catalog(servers);
        let full = count(
            &tokens,
            &listed(&catalog, &shape, Confirm::Write, false, Vec::new()),
        );
        let compact = count(
            &tokens,
            &listed(&catalog, &shape, Confirm::Write, true, Vec::new()),
        );
        let tools = catalog.entries().len();
        println!("| {} | {tools} | {full} | {compact} |", servers.len());
        surface.push(
            json!({"servers": servers.len(), "tools": tools, "full": full, "compact": compact}),
        );
    }

    let catalog = catalog(sizes.last().context("no catalogs")?);
    let queries: Vec<Query> = serde_json::from_str(
        &std::fs::read_to_string(root.join("benches/search/queries.json"))
            .context("benches/search/queries.json")?,
    )?;
    let (mut top1, mut top5) = (0, 0);
    // How deep the answers of the others are: what a reranker could still reach.
    let (mut top10, mut top20) = (0, 0);
    // Every third query is held out: the ranker's synonyms and weights were tuned
    // looking only at the misses of the others, so the held-out figure shows what tuning
    // did not see.
    let (mut held, mut held5) = (0, 0);
    let mut missed = Vec::new();
    for (i, query) in queries.iter().enumerate() {
        for label in &query.tools {
            ensure!(
                catalog.get(label).is_some(),
                "'{}' labels an unknown tool {label}",
                query.query
            );
        }
        let found: Vec<&str> = catalog
            .search(&query.query, None)
            .into_iter()
            .take(20)
            .map(|e| e.exported.as_str())
            .collect();
        let hit = |n: usize| {
            found
                .iter()
                .take(n)
                .any(|f| query.tools.iter().any(|t| t == f))
        };
        top10 += usize::from(hit(10));
        top20 += usize::from(hit(20));
        top1 += usize::from(hit(1));
        top5 += usize::from(hit(5));
        if i % 3 == 0 {
            held += 1;
            held5 += usize::from(hit(5));
        } else if !hit(5) {
            missed.push(format!(
                "{:?} → {:?} (wanted {:?})",
                query.query,
                &found[..found.len().min(5)],
                query.tools
            ));
        }
    }
    let n = queries.len() as f64;
    let (recall1, recall5) = (top1 as f64 / n, top5 as f64 / n);
    let held_out = held5 as f64 / held.max(1) as f64;
    println!(
        "\nSearch quality over {} queries and {} tools: recall@1 {recall1:.3}, recall@5 {recall5:.3} (target ≥ 0.9); held-out third ({held} queries): recall@5 {held_out:.3}; recall@10 {:.3}, recall@20 {:.3}",
        queries.len(),
        catalog.entries().len(),
        top10 as f64 / n,
        top20 as f64 / n
    );
    if misses {
        for miss in &missed {
            println!("  miss: {miss}");
        }
    }
    let out = root.join("target/bench");
    std::fs::create_dir_all(&out)?;
    let report = json!({
        "surface": surface,
        "search": {"queries": queries.len(), "tools": catalog.entries().len(),
                   "recall_at_1": recall1, "recall_at_5": recall5,
                   "recall_at_10": top10 as f64 / n, "recall_at_20": top20 as f64 / n,
                   "held_out": {"queries": held, "recall_at_5": held_out}},
    });
    std::fs::write(
        out.join("surface.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    Ok(())
}

/// Every recorded catalog, by server name.
fn load(dir: &Path) -> anyhow::Result<Vec<Recorded>> {
    let mut recorded = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path)?;
            let catalog: Recorded =
                serde_json::from_str(&text).with_context(|| path.display().to_string())?;
            recorded.push(catalog);
        }
    }
    recorded.sort_by(|a, b| a.server.cmp(&b.server));
    ensure!(
        recorded.len() >= 10,
        "only {} recorded catalogs",
        recorded.len()
    );
    Ok(recorded)
}

/// 4 servers, 10, then all of them.
fn sizes(recorded: &[Recorded]) -> Vec<Vec<&Recorded>> {
    let pick = |names: &[&str]| -> Vec<&Recorded> {
        names
            .iter()
            .filter_map(|n| recorded.iter().find(|r| r.server == *n))
            .collect()
    };
    let four = pick(&FIRST_FOUR);
    let ten = pick(&[&FIRST_FOUR[..], &NEXT_SIX[..]].concat());
    vec![four, ten, recorded.iter().collect()]
}

/// The catalog planmux builds from these servers' answers.
fn catalog(servers: &[&Recorded]) -> Catalog {
    let servers: Vec<ServerTools> = servers
        .iter()
        .map(|r| ServerTools {
            server: r.server.clone(),
            namespace: true,
            tools: r.tools.clone(),
            tiers: TierRules::default(),
        })
        .collect();
    Catalog::build("__", &servers, &Policy::default(), &Pins::Unpinned)
}

/// Tokens of tool definitions as a host sends them to the model.
fn count(tokens: &CoreBPE, tools: &[Tool]) -> usize {
    tools
        .iter()
        .map(|t| {
            let entry = json!({
                "name": t.name,
                "description": t.description.as_deref().unwrap_or_default(),
                "input_schema": &*t.input_schema,
            });
            tokens.encode_ordinary(&entry.to_string()).len()
        })
        .sum()
}
