//! The same scenarios behind a large catalog: the demo servers plus the recorded
//! catalogs of 19 real servers (benches/catalogs). Two arms: one call per turn over the
//! full surface, and the compact surface (search_tools round-trips, then the plan).
//!
//! The compact arm's searches are real: `search_tools` runs over the whole catalog with
//! the user's request as the query; each tool of the plan not among those results costs
//! one more search, by the words of its name (the model knows what to look for from the
//! server index in execute_plan's description). A third arm sends the first search as
//! the request plus three phrasings of it (benches/economics/phrasings.json, written blind
//! like benches/search/phrasings.json: see benches/search/README.md), as search_tools'
//! description asks.

use std::path::Path;

use anyhow::Context;
use planmux::catalog::{Catalog, Pins, ServerTools};
use planmux::config::Config;
use planmux::policy::{Confirm, Policy, TierRules};
use planmux::upstream::surface::{Shape, listed, search_tools};
use rmcp::model::Tool;
use serde_json::{Value, json};

use crate::meter::{self, ArmFigures, Base, Tokenizer};
use crate::replay::Replay;
use crate::scenarios::Scenario;

/// Results each search asks for.
const LIMIT: usize = 5;

/// The two arms' sums over every scenario, and the searches made.
pub struct Large {
    pub tools: usize,
    pub full_tokens: usize,
    pub compact_tokens: usize,
    pub searches: usize,
    pub one_per_turn: ArmFigures,
    pub compact: ArmFigures,
    /// The compact arm with the first search phrased, and the searches it made.
    pub phrased_searches: usize,
    pub phrased: ArmFigures,
}

impl Large {
    pub fn ratio(&self) -> f64 {
        self.one_per_turn.input_tokens as f64 / self.compact.input_tokens as f64
    }

    pub fn print(&self) {
        println!(
            "\nBehind a large catalog ({} tools: the demos and 19 recorded real servers)",
            self.tools
        );
        println!("| arm | tool definitions per request | round-trips | input tokens |");
        println!("| --- | --- | --- | --- |");
        println!(
            "| one call per turn, full surface | {} | {} | {} |",
            self.full_tokens, self.one_per_turn.round_trips, self.one_per_turn.input_tokens
        );
        println!(
            "| compact: search_tools ({} searches) + execute_plan | {} | {} | {} |",
            self.searches, self.compact_tokens, self.compact.round_trips, self.compact.input_tokens
        );
        println!(
            "| compact, first search phrased ({} searches) + execute_plan | {} | {} | {} |",
            self.phrased_searches,
            self.compact_tokens,
            self.phrased.round_trips,
            self.phrased.input_tokens
        );
        let ratio = self.ratio();
        let met = if ratio >= 4.0 { "met" } else { "MISSED" };
        println!("Input tokens, one per turn over compact: {ratio:.1}x (target ≥ 4x: {met})");
        println!(
            "Input tokens, one per turn over compact with phrasings: {:.1}x",
            self.one_per_turn.input_tokens as f64 / self.phrased.input_tokens as f64
        );
    }

    pub fn to_json(&self) -> Value {
        json!({
            "tools": self.tools, "full_tokens": self.full_tokens,
            "compact_tokens": self.compact_tokens, "searches": self.searches,
            "one_per_turn": self.one_per_turn, "compact": self.compact, "ratio": self.ratio(),
            "phrased_searches": self.phrased_searches, "phrased": self.phrased,
        })
    }
}

/// Meters both arms over every replayed scenario.
pub fn measure(
    tokens: &Tokenizer,
    prefix: usize,
    demos: &Catalog,
    replays: &[(Scenario, Replay)],
) -> anyhow::Result<Large> {
    let catalog = large_catalog(demos)?;
    let shape = Shape::new(&Config::parse("", "bench", Path::new("."), &|_| None)?.proxy);
    let definitions = |tools: Vec<Tool>| -> usize {
        tools
            .iter()
            .map(|t| {
                let entry = json!({"name": t.name, "description": t.description.as_deref().unwrap_or_default(),
                                   "input_schema": &*t.input_schema});
                tokens.count(&entry.to_string())
            })
            .sum()
    };
    let full_tokens = definitions(listed(&catalog, &shape, Confirm::None, false, Vec::new()));
    let compact_tokens = definitions(listed(&catalog, &shape, Confirm::None, true, Vec::new()));
    let mut large = Large {
        tools: catalog.entries().len(),
        full_tokens,
        compact_tokens,
        searches: 0,
        one_per_turn: ArmFigures::default(),
        compact: ArmFigures::default(),
        phrased_searches: 0,
        phrased: ArmFigures::default(),
    };
    let phrasings: Vec<Phrased> = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/economics/phrasings.json"),
        )
        .context("benches/economics/phrasings.json")?,
    )?;
    for (scenario, replay) in replays {
        let request = tokens.message(scenario.request);
        let full = Base {
            prefix,
            tools: full_tokens,
            request,
        };
        let compact = Base {
            tools: compact_tokens,
            ..full
        };
        let plain = searches(&catalog, scenario, replay, &[]);
        large.searches += plain.len();
        let phrased: Vec<&str> = phrasings
            .iter()
            .find(|p| p.request == scenario.request)
            .with_context(|| format!("no phrasings for {:?}", scenario.request))?
            .phrasings
            .iter()
            .map(String::as_str)
            .collect();
        let phrased_searches = searches(&catalog, scenario, replay, &phrased);
        large.phrased_searches += phrased_searches.len();
        large.phrased.add(&meter::search_then_plan(
            tokens,
            compact,
            replay,
            &phrased_searches,
        ));
        large
            .one_per_turn
            .add(&meter::one_per_turn(tokens, full, replay));
        large
            .compact
            .add(&meter::search_then_plan(tokens, compact, replay, &plain));
    }
    Ok(large)
}

/// A scenario's request and its phrasings, written blind.
#[derive(serde::Deserialize)]
struct Phrased {
    request: String,
    phrasings: Vec<String>,
}

/// The searches a model makes to find the plan's tools: its request (with `phrasings`
/// beside it, when there are some), then each tool still not found by the words of its
/// name. Each with its result text.
fn searches(
    catalog: &Catalog,
    scenario: &Scenario,
    replay: &Replay,
    phrasings: &[&str],
) -> Vec<(Value, String)> {
    let search = |query: Value| -> (Value, Vec<String>, String) {
        let arguments = json!({"query": query, "limit": LIMIT});
        let result = search_tools(catalog, &[], arguments.as_object());
        let found = result
            .structured_content
            .as_ref()
            .and_then(|s| s["tools"].as_array().cloned());
        let names = found
            .unwrap_or_default()
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        let text = result
            .content
            .first()
            .and_then(|c| c.as_text())
            .map(|t| t.text.clone());
        (arguments, names, text.unwrap_or_default())
    };
    let mut wanted: Vec<String> = replay.plan["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["tool"].as_str().map(str::to_owned))
        .collect();
    wanted.dedup();
    let first = match phrasings {
        [] => json!(scenario.request),
        _ => json!([&[scenario.request], phrasings].concat()),
    };
    let (arguments, mut found, text) = search(first);
    let mut searches = vec![(arguments, text)];
    for tool in wanted {
        if found.contains(&tool) {
            continue;
        }
        let words = catalog
            .get(&tool)
            .map_or(tool.clone(), |e| e.tool.replace(['_', '-'], " "));
        let (arguments, more, text) = search(json!(words));
        found.extend(more);
        searches.push((arguments, text));
    }
    searches
}

/// The demo servers' tools and the recorded catalogs, as one catalog.
fn large_catalog(demos: &Catalog) -> anyhow::Result<Catalog> {
    let mut servers: Vec<ServerTools> = Vec::new();
    for entry in demos.entries() {
        let mut tool = entry.definition.clone();
        tool.name = entry.tool.clone().into();
        match servers.last_mut() {
            Some(last) if last.server == entry.server => last.tools.push(tool),
            _ => servers.push(ServerTools {
                server: entry.server.clone(),
                namespace: true,
                tools: vec![tool],
                tiers: TierRules::default(),
            }),
        }
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/catalogs");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .with_context(|| dir.display().to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    for path in files {
        let recorded: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        servers.push(ServerTools {
            server: recorded["server"].as_str().context("no server")?.to_owned(),
            namespace: true,
            tools: serde_json::from_value(recorded["tools"].clone())?,
            tiers: TierRules::default(),
        });
    }
    Ok(Catalog::build(
        "__",
        &servers,
        &Policy::default(),
        &Pins::Unpinned,
    ))
}
