//! The merged catalog: every downstream tool under its exported name `<server>__<tool>`,
//! and the way back from an exported name to (server, downstream tool); and, in
//! [`resources`], the merged prompts, resources and templates.

mod fusion;
pub mod resources;
pub mod search;

use std::collections::HashMap;
use std::fmt;

use rmcp::model::Tool;
use serde_json::Value;

use crate::config::is_name_char;
use crate::lock::Lock;
use crate::plan::{ToolMatch, ToolSpec};
use crate::policy::{Policy, Tier, TierRules};

pub use resources::{PromptEntry, Resources, ServerResources};

/// Which tool definitions are trusted: none pinned, those of `servers.lock`, or none at
/// all when the lock file cannot be read (failing closed).
#[derive(Debug, Default)]
pub enum Pins {
    #[default]
    Unpinned,
    Locked(Lock),
    /// The lock file is broken: every tool is held back, saying why.
    Broken(String),
}

impl Pins {
    /// Why a tool must be held back, if it must.
    pub fn check(&self, server: &str, tool: &Tool) -> Option<String> {
        match self {
            Pins::Unpinned => None,
            Pins::Locked(lock) => lock.check(server, tool).map(|c| c.to_string()),
            Pins::Broken(why) => Some(why.clone()),
        }
    }
}

/// planmux's own tools: a downstream tool whose exported name would be one of these (with
/// `separator = "_"`, server `approve` and tool `plan`) gets a hash suffix instead.
const RESERVED: [&str; 3] = [
    crate::plan::EXECUTE_PLAN_TOOL,
    crate::approval::APPROVE_PLAN_TOOL,
    "search_tools",
];

/// Hosts reject longer tool names (the Anthropic and OpenAI APIs cap them at 64).
pub const MAX_NAME_LEN: usize = 64;

/// A tool name as the host sees it: `[A-Za-z0-9_-]{1,64}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExportedName(String);

impl ExportedName {
    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ExportedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One exported tool.
#[derive(Debug, Clone)]
pub struct Entry {
    pub exported: ExportedName,
    /// The server that has it (its `[servers.NAME]`).
    pub server: String,
    /// Its name on that server, as the server spells it.
    pub tool: String,
    /// The downstream definition with `name` replaced by the exported name; everything
    /// else (description, schemas, annotations, `_meta`) is as the server sent it.
    pub definition: Tool,
    /// What it can change.
    pub tier: Tier,
}

/// One server's tools, after its include/exclude filters.
#[derive(Debug, Clone)]
pub struct ServerTools {
    pub server: String,
    /// Whether its names carry the server's prefix (`namespace`, true by default).
    pub namespace: bool,
    pub tools: Vec<Tool>,
    /// How its tools get their tiers.
    pub tiers: TierRules,
}

/// A tool held back by `servers.lock`: its definition changed, or it is new.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    pub exported: String,
    pub server: String,
    pub tool: String,
    /// What changed since `planmux lock`.
    pub change: String,
}

/// The merged catalog. Immutable: a refresh builds a new one.
#[derive(Debug, Default)]
pub struct Catalog {
    entries: Vec<Entry>,
    /// Tools held back by the lock: not listed, not callable.
    quarantined: Vec<Quarantined>,
    by_name: HashMap<String, usize>,
    /// The same tools as the plan validator sees them, built once per catalog.
    specs: Vec<ToolSpec>,
    /// Prompts, resources and templates.
    resources: Resources,
    /// Names two tools would both export (one is left out), as messages.
    clashes: Vec<String>,
    /// `search_tools`' index, built on the first search.
    index: std::sync::OnceLock<search::Index>,
}

impl Catalog {
    /// Builds the catalog from each server's tools, in the given order, leaving out what
    /// `policy` denies.
    ///
    /// Names are made deterministic: the same servers and tools always give the same
    /// exported names, whatever order the servers answered in.
    pub fn build(
        separator: &str,
        servers: &[ServerTools],
        policy: &Policy,
        pins: &Pins,
    ) -> Catalog {
        let mut candidates: Vec<(String, &ServerTools, &Tool)> = servers
            .iter()
            .flat_map(|s| s.tools.iter().map(move |t| (s, t)))
            .map(|(server, tool)| {
                (
                    exported(&server.server, server.namespace, separator, &tool.name),
                    server,
                    tool,
                )
            })
            .collect();
        // Two tools whose names sanitise to the same string: every one of them whose raw
        // name differs from its sanitised one gets a hash suffix, which is unique.
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (name, _, _) in &candidates {
            *seen.entry(name.as_str()).or_default() += 1;
        }
        let clashing: Vec<String> = seen
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(name, _)| name.to_string())
            .collect();
        for (name, server, tool) in &mut candidates {
            let raw = match server.namespace {
                true => format!("{}{separator}{}", server.server, tool.name),
                false => tool.name.to_string(),
            };
            if clashing.contains(name) && *name != raw || RESERVED.contains(&name.as_str()) {
                *name = with_hash(&raw, &raw);
            }
        }
        let mut catalog = Catalog::default();
        for (name, tools, tool) in candidates {
            let server = tools.server.as_str();
            if let Some(&first) = catalog.by_name.get(&name) {
                let clash = format!(
                    "tool '{}' of server '{server}' exports as '{name}', which server '{}' has already; it is left out (set namespace = true on one of them)",
                    tool.name, catalog.entries[first].server
                );
                tracing::error!("{clash}");
                catalog.clashes.push(clash);
                continue;
            }
            if policy.denies(&name) {
                continue;
            }
            if let Some(change) = pins.check(server, tool) {
                catalog.quarantined.push(Quarantined {
                    exported: name,
                    server: server.to_owned(),
                    tool: tool.name.to_string(),
                    change,
                });
                continue;
            }
            let tier = tools.tiers.tier(tool);
            let mut definition = tool.clone();
            definition.name = name.clone().into();
            catalog.by_name.insert(name.clone(), catalog.entries.len());
            let annotations = tool.annotations.as_ref();
            catalog.specs.push(ToolSpec {
                exported: name.clone(),
                server: server.to_string(),
                tool: tool.name.to_string(),
                input_schema: Value::Object((*tool.input_schema).clone()),
                output_schema: tool
                    .output_schema
                    .as_ref()
                    .map(|schema| Value::Object((**schema).clone())),
                read_only: annotations.is_some_and(|a| a.read_only_hint == Some(true)),
                idempotent: annotations.is_some_and(|a| a.idempotent_hint == Some(true)),
                tier,
            });
            catalog.entries.push(Entry {
                exported: ExportedName(name),
                server: server.to_string(),
                tool: tool.name.to_string(),
                definition,
                tier,
            });
        }
        catalog
    }

    /// The catalog as a caller whose `[[access]]` rule allows the exported tools `allows`
    /// says sees it: only those tools, and the prompts, resources and templates of the
    /// servers they are of. Nothing of the rest shows (not even a name clash).
    pub fn visible(&self, allows: impl Fn(&str) -> bool) -> Catalog {
        let mut catalog = Catalog::default();
        for (entry, spec) in self.entries.iter().zip(&self.specs) {
            if !allows(entry.exported.as_str()) {
                continue;
            }
            let at = catalog.entries.len();
            catalog.by_name.insert(entry.exported.to_string(), at);
            catalog.entries.push(entry.clone());
            catalog.specs.push(spec.clone());
        }
        catalog.quarantined = (self.quarantined.iter())
            .filter(|q| allows(&q.exported))
            .cloned()
            .collect();
        let reachable: std::collections::HashSet<&str> =
            catalog.entries.iter().map(|e| e.server.as_str()).collect();
        catalog.resources = self.resources.visible(|server| reachable.contains(server));
        catalog
    }

    /// The catalog with these prompts, resources and templates.
    pub fn with_resources(mut self, resources: Resources) -> Self {
        self.resources = resources;
        self
    }

    /// Prompts, resources and templates.
    pub fn resources(&self) -> &Resources {
        &self.resources
    }

    /// Names two tools would both export, as messages (one of each was left out).
    pub fn clashes(&self) -> &[String] {
        &self.clashes
    }

    /// Tools held back by `servers.lock`.
    pub fn quarantined(&self) -> &[Quarantined] {
        &self.quarantined
    }

    /// The tools as the plan validator needs them.
    pub fn tool_specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// The entry for an exported name.
    pub fn get(&self, exported: &str) -> Option<&Entry> {
        self.by_name.get(exported).map(|&i| &self.entries[i])
    }

    /// The entry a host's direct call of `name` means (docs/plan-language.md, "Naming
    /// tools"): the exact exported name first (a map lookup), then a bare tool name or
    /// either ignoring case and `-` versus `_`. Denied and quarantined tools never resolve.
    /// No hints: cheap enough for the host's read path.
    pub fn find_called(&self, name: &str) -> Option<&Entry> {
        self.get(name).or_else(|| {
            let spec = crate::plan::find_called(&self.specs, name)?;
            self.get(&spec.exported)
        })
    }

    /// [`Self::find_called`] with what a miss tells the host: up to three look-alike
    /// names (the hints a plan's step gets for the same name), or every tool a bare name
    /// could mean.
    pub fn resolve_called(&self, name: &str) -> ToolMatch<'_> {
        match self.by_name.get(name).and_then(|&i| self.specs.get(i)) {
            Some(spec) => ToolMatch::Found(spec),
            None => crate::plan::resolve_called(&self.specs, name),
        }
    }

    /// Every entry, servers in config order, tools in the order their server listed them.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The exported definitions, for `tools/list`.
    pub fn definitions(&self) -> impl Iterator<Item = &Tool> {
        self.entries.iter().map(|e| &e.definition)
    }

    /// The tools that match `query`, best first; only those of `server` when one is
    /// given (its name, case and `-`/`_` ignored).
    pub fn search(&self, query: &str, server: Option<&str>) -> Vec<&Entry> {
        self.search_phrasings(&[query], server)
    }

    /// The tools that match any of `phrasings` (of one need: the user's words, and the
    /// same in the words tools use), best first. Each phrasing ranks the tools, and the
    /// rankings are fused by reciprocal rank: a tool scores the sum of `1 / (RRF_K +
    /// rank)` over the rankings it is in, so one near the top of several comes first,
    /// whichever phrasing found it. One phrasing is its own ranking.
    pub fn search_phrasings(&self, phrasings: &[&str], server: Option<&str>) -> Vec<&Entry> {
        let index = self
            .index
            .get_or_init(|| search::Index::build(&self.entries));
        let server = server.map(crate::plan::fold_name);
        let keep = |i: usize| {
            server
                .as_ref()
                .is_none_or(|s| crate::plan::fold_name(&self.entries[i].server) == *s)
        };
        let rankings: Vec<Vec<usize>> = phrasings.iter().map(|q| index.search(q, keep)).collect();
        let fused = match rankings.as_slice() {
            [one] => one.clone(),
            _ => fusion::fuse(&rankings),
        };
        fused.into_iter().map(|i| &self.entries[i]).collect()
    }

    /// The tools of `server` (its name, case and `-`/`_` ignored), in catalog order.
    pub fn server_tools(&self, server: &str) -> Vec<&Entry> {
        let folded = crate::plan::fold_name(server);
        self.entries
            .iter()
            .filter(|e| crate::plan::fold_name(&e.server) == folded)
            .collect()
    }

    /// Each server with tools, in config order, with how many it has.
    pub fn servers(&self) -> Vec<(&str, usize)> {
        let mut servers: Vec<(&str, usize)> = Vec::new();
        for entry in &self.entries {
            match servers.last_mut() {
                Some((name, count)) if *name == entry.server => *count += 1,
                _ => servers.push((&entry.server, 1)),
            }
        }
        servers
    }
}

/// The name a server's tool or prompt is exported under: `<server><separator><name>`, or
/// its own name when the server is not namespaced, made safe either way.
pub fn exported(server: &str, namespace: bool, separator: &str, name: &str) -> String {
    if namespace {
        return export_name(server, separator, name);
    }
    let clean: String = name
        .chars()
        .map(|c| if is_name_char(c) { c } else { '_' })
        .collect();
    if clean.is_empty() || clean.len() > MAX_NAME_LEN {
        return with_hash(if clean.is_empty() { "_" } else { &clean }, name);
    }
    clean
}

/// `<server><separator><tool>` with every character outside `[A-Za-z0-9_-]` replaced by
/// `_`, shortened with a hash suffix when longer than [`MAX_NAME_LEN`].
pub fn export_name(server: &str, separator: &str, tool: &str) -> String {
    let raw = format!("{server}{separator}{tool}");
    let clean: String = raw
        .chars()
        .map(|c| if is_name_char(c) { c } else { '_' })
        .collect();
    if clean.is_empty() {
        return with_hash("_", &raw);
    }
    if clean.len() > MAX_NAME_LEN {
        return with_hash(&clean, &raw);
    }
    clean
}

/// `prefix` cut to fit, then `_` and 8 hex digits of a hash of `raw`.
fn with_hash(prefix: &str, raw: &str) -> String {
    let clean: String = prefix
        .chars()
        .map(|c| if is_name_char(c) { c } else { '_' })
        .collect();
    let keep = MAX_NAME_LEN - 9;
    let cut: String = clean.chars().take(keep).collect();
    format!("{cut}_{:08x}", crate::fnv::fnv1a(raw) as u32)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::ToolAnnotations;

    use super::*;

    fn tool(name: &str) -> Tool {
        Tool::new(
            name.to_string(),
            format!("does {name}"),
            Arc::new(Default::default()),
        )
    }

    /// The catalog of one server, `server`, with `tools`.
    fn one_server(separator: &str, server: &str, tools: Vec<Tool>) -> Catalog {
        let tools = ServerTools {
            tiers: TierRules::default(),
            namespace: true,
            server: server.into(),
            tools,
        };
        Catalog::build(separator, &[tools], &Policy::default(), &Pins::Unpinned)
    }

    fn names(catalog: &Catalog) -> Vec<&str> {
        catalog
            .entries()
            .iter()
            .map(|e| e.exported.as_str())
            .collect()
    }

    #[test]
    fn export_name_cases() {
        let long_tool = "t".repeat(80);
        let cases: &[(&str, &str, &str)] = &[
            ("files", "read_file", "files__read_file"),
            ("weather", "get-forecast", "weather__get-forecast"),
            ("srv", "a.b/c d", "srv__a_b_c_d"),
            ("srv", "naïve", "srv__na_ve"),
            ("s", "", "s__"),
        ];
        for (server, tool, want) in cases {
            assert_eq!(export_name(server, "__", tool), *want);
        }
        let long = export_name("srv", "__", &long_tool);
        assert_eq!(long.len(), MAX_NAME_LEN);
        assert!(long.starts_with("srv__ttt"));
        assert_eq!(long, export_name("srv", "__", &long_tool), "deterministic");
        assert_ne!(long, export_name("srv", "__", &"t".repeat(81)), "distinct");
        assert!(long.chars().all(is_name_char));
    }

    #[test]
    fn a_question_favours_the_tools_that_only_read() {
        // Two tools alike but for their names and tiers; the one that changes something
        // comes first in the catalog, so it wins a tie.
        let writes = Tool::new("first", "The saved notes", Arc::new(Default::default()));
        let mut reads = Tool::new("second", "The saved notes", Arc::new(Default::default()));
        reads.annotations = Some(ToolAnnotations::new().read_only(true));
        let catalog = one_server("__", "s", vec![writes, reads]);
        let first = |query: &str| catalog.search(query, None)[0].exported.to_string();
        assert_eq!(first("which notes are saved?"), "s__second");
        assert_eq!(first("saved notes"), "s__first");
    }

    #[test]
    fn sanitising_collisions_get_hash_suffixes() {
        let catalog = one_server("__", "s", vec![tool("a.b"), tool("a_b"), tool("a b")]);
        let got = names(&catalog);
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[1], "s__a_b",
            "the tool whose name is already clean keeps it"
        );
        assert!(got[0].starts_with("s__a_b_") && got[2].starts_with("s__a_b_"));
        assert_ne!(got[0], got[2]);
        assert_eq!(catalog.get("s__a_b").map(|e| e.tool.as_str()), Some("a_b"));
        assert_eq!(catalog.get(got[0]).map(|e| e.tool.as_str()), Some("a.b"));
    }

    #[test]
    fn definitions_keep_everything_but_the_name() {
        let mut original = tool("read");
        original.title = Some("Read".into());
        let catalog = one_server("__", "fs", vec![original.clone()]);
        let entry = catalog.get("fs__read").map(|e| e.definition.clone());
        let mut expected = original;
        expected.name = "fs__read".into();
        assert_eq!(entry, Some(expected));
    }

    #[test]
    fn a_downstream_tool_never_takes_planmuxs_own_names() {
        let catalog = one_server("_", "approve", vec![tool("plan")]);
        let got = names(&catalog);
        assert!(
            got[0].starts_with("approve_plan_") && got[0].len() == 21,
            "{got:?}"
        );
    }

    #[test]
    fn a_direct_call_resolves_as_a_plan_step_does() {
        let catalog = one_server(
            "__",
            "git",
            vec![tool("git_log"), tool("git_status"), tool("blocked")],
        );
        let mut deny = globset::GlobSetBuilder::new();
        deny.add(globset::Glob::new("git__blocked").unwrap_or_else(|e| panic!("{e}")));
        let policy = Policy::new(deny.build().ok(), Default::default(), None);
        let tools = ServerTools {
            tiers: TierRules::default(),
            namespace: true,
            server: "git".into(),
            tools: vec![tool("git_log"), tool("blocked")],
        };
        let denied = Catalog::build("__", &[tools], &policy, &Pins::Unpinned);
        let found = |catalog: &Catalog, name: &str| {
            catalog.find_called(name).map(|e| e.exported.to_string())
        };
        assert_eq!(
            found(&catalog, "git__git_log").as_deref(),
            Some("git__git_log")
        );
        assert_eq!(
            found(&catalog, "GIT__GIT-LOG").as_deref(),
            Some("git__git_log")
        );
        assert_eq!(
            found(&catalog, "git_status").as_deref(),
            Some("git__git_status")
        );
        assert_eq!(found(&catalog, "git__gitlog"), None);
        assert_eq!(
            found(&denied, "BLOCKED"),
            None,
            "a denied tool never resolves"
        );
        match catalog.resolve_called("git__gitlog") {
            ToolMatch::Unknown(near) => assert_eq!(near[0], "git__git_log"),
            other => panic!("{other:?}"),
        }
    }
}
