//! The full/compact decision: `[proxy] surface`, `tool_budget` and `always_list` against
//! the host's profile and the live catalog, and the decision logged when it changes.

use std::sync::Mutex;

use globset::GlobSet;
use rmcp::model::Implementation;

use super::profile::HostProfile;
use crate::catalog::{Catalog, Entry};
use crate::config::{ProxySettings, Surface};

/// `[proxy]`'s surface settings, and the last decision logged.
#[derive(Debug)]
pub struct Shape {
    mode: Surface,
    always_list: Option<GlobSet>,
    tool_budget: Option<usize>,
    logged: Mutex<String>,
}

/// How `tools/list` is shaped for one host and catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the host gets the compact list (planmux's tools and `always_list`).
    pub compact: bool,
    /// Why, for the log.
    pub why: String,
    /// What the host will lose anyway (names too long for it, in full).
    pub warning: Option<String>,
}

impl Shape {
    /// The shape `[proxy]` asks for; nothing logged yet.
    pub fn new(proxy: &ProxySettings) -> Self {
        Self {
            mode: proxy.surface,
            always_list: proxy.always_list.clone(),
            tool_budget: proxy.tool_budget,
            logged: Mutex::default(),
        }
    }

    /// Full or compact for this host and catalog; `own` counts planmux's tools listed
    /// beside the catalog's in full.
    pub fn decide(&self, host: &HostProfile, catalog: &Catalog, own: usize) -> Decision {
        let tools = catalog.entries().len();
        let budget = self.tool_budget.unwrap_or(host.tool_budget);
        let long = catalog
            .entries()
            .iter()
            .filter(|e| e.exported.as_str().len() > host.name_budget)
            .count();
        let (compact, why) = match self.mode {
            Surface::Full => (false, "surface = \"full\"".to_owned()),
            Surface::Compact => (true, "surface = \"compact\"".to_owned()),
            Surface::Auto if tools + own > budget => (
                true,
                format!(
                    "auto: {} tools exceed the budget of {budget}{}",
                    tools + own,
                    match self.tool_budget {
                        Some(_) => " (tool_budget)".to_owned(),
                        None => format!(" for {}", host.host),
                    }
                ),
            ),
            Surface::Auto if long > 0 => (
                true,
                format!(
                    "auto: {long} tool names are longer than {} characters, which {} drops",
                    host.name_budget, host.host
                ),
            ),
            Surface::Auto => (
                false,
                format!("auto: {} tools fit the budget of {budget}", tools + own),
            ),
        };
        let warning = (!compact && long > 0).then(|| {
            format!(
                "{long} tool names are longer than {} characters, which {} drops; \
                 set [proxy] surface = \"compact\" to reach them through search_tools",
                host.name_budget, host.host
            )
        });
        Decision {
            compact,
            why,
            warning,
        }
    }

    /// Logs `decision` (and its warning) when it differs from the last one logged.
    pub fn log(&self, client: Option<&Implementation>, decision: &Decision) {
        let line = format!(
            "{} ({})",
            if decision.compact { "compact" } else { "full" },
            decision.why
        );
        let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        if *logged != line {
            let client = client.map_or("unknown", |c| c.name.as_str());
            tracing::info!(host = client, "tool surface: {line}");
            if let Some(warning) = &decision.warning {
                tracing::warn!(host = client, "{warning}");
            }
            *logged = line;
        }
    }

    /// The catalog's tools that a compact list shows: those `always_list` names.
    pub fn always_listed<'a>(&self, catalog: &'a Catalog) -> impl Iterator<Item = &'a Entry> {
        let always = self.always_list.clone();
        catalog.entries().iter().filter(move |e| {
            always
                .as_ref()
                .is_some_and(|set| set.is_match(e.exported.as_str()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::demo_catalog;
    use crate::upstream::surface::fixtures::{client, shape};
    use crate::upstream::surface::profile::profile;

    #[test]
    fn auto_is_full_while_the_catalog_fits_the_hosts_budget() {
        let catalog = demo_catalog();
        let tools = catalog.entries().len();
        let cursor = profile(Some(&client("cursor-vscode")));
        assert!(
            !shape("").decide(cursor, &catalog, 2).compact,
            "{tools} tools fit 40"
        );
        let tight = shape(&format!("tool_budget = {}", tools + 1));
        let decision = tight.decide(cursor, &catalog, 2);
        assert!(decision.compact, "{tools} + 2 exceed {}", tools + 1);
        assert!(decision.why.contains("tool_budget"), "{}", decision.why);
        assert!(
            !shape("surface = \"full\"")
                .decide(cursor, &catalog, 2)
                .compact
        );
        assert!(
            shape("surface = \"compact\"")
                .decide(cursor, &catalog, 2)
                .compact
        );
        // A host that drops long names gets the compact surface.
        let short = HostProfile {
            name_budget: 10,
            ..*cursor
        };
        let decision = shape("").decide(&short, &catalog, 2);
        assert!(decision.compact && decision.why.contains("longer than 10"));
    }
}
