//! Tiers: how much a tool can change (`read`, `write`, `destructive`), and how one server's
//! tools get theirs (its `tiers` globs, then the tool's own hints, else `destructive`).

use std::fmt;
use std::str::FromStr;

use globset::GlobMatcher;
use rmcp::model::Tool;
use serde::{Deserialize, Serialize};

/// How much a tool can change: what a host's user would want to be asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Reads, changes nothing.
    Read,
    /// Changes something, not destructively (creates, appends).
    Write,
    /// May destroy or overwrite: the default for a tool that says nothing.
    Destructive,
}

impl Tier {
    /// The tier as the config and the output spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Read => "read",
            Tier::Write => "write",
            Tier::Destructive => "destructive",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Tier {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "read" => Ok(Tier::Read),
            "write" => Ok(Tier::Write),
            "destructive" => Ok(Tier::Destructive),
            other => Err(format!(
                "unknown tier '{other}' (one of: read, write, destructive)"
            )),
        }
    }
}

/// How one server's tools get their tiers: its `tiers` globs first (first match wins),
/// then, when `trust_annotations`, the tool's own hints, else `destructive`.
#[derive(Debug, Clone)]
pub struct TierRules {
    /// Tool-name globs with their tier, in file order.
    pub rules: Vec<(GlobMatcher, Tier)>,
    /// Whether the server's `readOnlyHint` / `destructiveHint` are believed.
    pub trust_annotations: bool,
}

impl Default for TierRules {
    fn default() -> Self {
        Self {
            rules: Vec::new(),
            trust_annotations: true,
        }
    }
}

impl TierRules {
    /// The tier of one of the server's tools.
    pub fn tier(&self, tool: &Tool) -> Tier {
        if let Some((_, tier)) = self
            .rules
            .iter()
            .find(|(glob, _)| glob.is_match(&*tool.name))
        {
            return *tier;
        }
        let hints = tool.annotations.as_ref().filter(|_| self.trust_annotations);
        match hints {
            // The spec's defaults: a tool is not read-only, and is destructive, unless it
            // says otherwise.
            Some(a) if a.read_only_hint == Some(true) => Tier::Read,
            Some(a) if a.destructive_hint == Some(false) => Tier::Write,
            _ => Tier::Destructive,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use globset::Glob;
    use rmcp::model::ToolAnnotations;

    use super::*;

    fn tool(name: &str, hints: Option<ToolAnnotations>) -> Tool {
        let tool = Tool::new(name.to_owned(), "", Arc::new(Default::default()));
        match hints {
            Some(hints) => tool.with_annotations(hints),
            None => tool,
        }
    }

    fn rules(globs: &[(&str, Tier)], trust: bool) -> TierRules {
        TierRules {
            rules: globs
                .iter()
                .filter_map(|(g, t)| Some((Glob::new(g).ok()?.compile_matcher(), *t)))
                .collect(),
            trust_annotations: trust,
        }
    }

    #[test]
    fn tiers_come_from_globs_then_trusted_hints_then_default_to_destructive() {
        let read_only = || Some(ToolAnnotations::new().read_only(true));
        let gentle = || Some(ToolAnnotations::new().destructive(false));
        let check = |rules: &TierRules, tool: Tool, expect: Tier| {
            assert_eq!(rules.tier(&tool), expect, "{}", tool.name);
        };
        let none = rules(&[], true);
        check(&none, tool("get", read_only()), Tier::Read);
        check(&none, tool("append", gentle()), Tier::Write);
        check(&none, tool("anything", None), Tier::Destructive);
        check(
            &none,
            tool("empty_hints", Some(ToolAnnotations::new())),
            Tier::Destructive,
        );
        let globs = rules(
            &[
                ("read_*", Tier::Read),
                ("*", Tier::Write),
                ("rm", Tier::Read),
            ],
            true,
        );
        check(&globs, tool("read_file", None), Tier::Read);
        check(&globs, tool("rm", read_only()), Tier::Write);
        let distrust = rules(&[], false);
        check(&distrust, tool("get", read_only()), Tier::Destructive);
    }
}
