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

/// A query's phrasings, written blind (benches/search/README.md).
#[derive(Deserialize)]
struct Phrased {
    query: String,
    phrasings: Vec<String>,
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
    let phrasings: Vec<Phrased> = serde_json::from_str(
        &std::fs::read_to_string(root.join("benches/search/phrasings.json"))
            .context("benches/search/phrasings.json")?,
    )?;
    ensure!(
        phrasings.len() == queries.len()
            && phrasings
                .iter()
                .zip(&queries)
                .all(|(p, q)| p.query == q.query),
        "benches/search/phrasings.json does not follow queries.json"
    );
    for query in &queries {
        for label in &query.tools {
            ensure!(
                catalog.get(label).is_some(),
                "'{}' labels an unknown tool {label}",
                query.query
            );
        }
    }
    println!(
        "\nSearch quality over {} queries and {} tools (held out: every third query)\n",
        queries.len(),
        catalog.entries().len()
    );
    println!("| query sent | recall@1 | recall@5 | recall@10 | held-out recall@5 |");
    println!("| --- | --- | --- | --- | --- |");
    let mut search = Vec::new();
    let mut missed = Vec::new();
    for extra in [0, 1, 2, 3] {
        let recall = recall(&catalog, &queries, &phrasings, extra, &mut missed);
        let label = match extra {
            0 => "the user's words alone".to_owned(),
            n => format!(
                "the user's words + {n} phrasing{}, fused",
                if n == 1 { "" } else { "s" }
            ),
        };
        println!(
            "| {label} | {:.3} | {:.3} | {:.3} | {:.3} |",
            recall.at1, recall.at5, recall.at10, recall.held_out5
        );
        search.push(
            json!({"phrasings": extra, "recall_at_1": recall.at1, "recall_at_5": recall.at5,
                           "recall_at_10": recall.at10, "recall_at_20": recall.at20,
                           "held_out_recall_at_5": recall.held_out5}),
        );
    }
    // What a search answer costs the model: the text of search_tools' result at its
    // default limit (5), for each query sent with its three phrasings.
    let mut answer_tokens: Vec<usize> = queries
        .iter()
        .zip(&phrasings)
        .map(|(query, phrased)| {
            let mut sent = vec![query.query.clone()];
            sent.extend(phrased.phrasings.iter().cloned());
            let arguments = json!({"query": sent});
            let result =
                planmux::upstream::surface::search_tools(&catalog, &[], arguments.as_object());
            let text = result
                .content
                .first()
                .and_then(|c| c.as_text())
                .map(|t| t.text.clone());
            tokens.encode_ordinary(&text.unwrap_or_default()).len()
        })
        .collect();
    answer_tokens.sort_unstable();
    let median_answer = answer_tokens[answer_tokens.len() / 2];
    let largest_answer = answer_tokens.last().copied().unwrap_or(0);
    println!(
        "\nA search answer at limit 5 (the text the model reads): median {median_answer} tokens, largest {largest_answer}"
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
        "search": {"queries": queries.len(), "tools": catalog.entries().len(), "by_phrasings": search,
                   "answer_tokens_at_5": {"median": median_answer, "largest": largest_answer}},
    });
    std::fs::write(
        out.join("surface.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    Ok(())
}

/// Recall over `queries`, each sent with its first `extra` phrasings (rankings fused).
fn recall(
    catalog: &Catalog,
    queries: &[Query],
    phrasings: &[Phrased],
    extra: usize,
    missed: &mut Vec<String>,
) -> Recall {
    let (mut at1, mut at5, mut at10, mut at20, mut held, mut held5) = (0, 0, 0, 0, 0, 0);
    for (i, (query, phrased)) in queries.iter().zip(phrasings).enumerate() {
        let mut sent = vec![query.query.as_str()];
        sent.extend(phrased.phrasings.iter().take(extra).map(String::as_str));
        let found: Vec<&str> = catalog
            .search_phrasings(&sent, None)
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
        at1 += usize::from(hit(1));
        at5 += usize::from(hit(5));
        at10 += usize::from(hit(10));
        at20 += usize::from(hit(20));
        if i % 3 == 0 {
            held += 1;
            held5 += usize::from(hit(5));
        }
        if !hit(5) && extra == 3 {
            missed.push(format!(
                "{sent:?} → {:?} (wanted {:?})",
                &found[..found.len().min(5)],
                query.tools
            ));
        }
    }
    let n = queries.len().max(1) as f64;
    Recall {
        at1: at1 as f64 / n,
        at5: at5 as f64 / n,
        at10: at10 as f64 / n,
        at20: at20 as f64 / n,
        held_out5: held5 as f64 / held.max(1) as f64,
    }
}

/// One row of the search table.
struct Recall {
    at1: f64,
    at5: f64,
    at10: f64,
    at20: f64,
    held_out5: f64,
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
