//! What `tools/list` shows a host (DESIGN §7): every tool (full), or planmux's own tools
//! and `always_list` (compact), chosen by `[proxy] surface` and, for `auto`, by the
//! host's profile; and `execute_plan`'s description, built from the live catalog.
//!
//! The parts: `profile` (hosts by `clientInfo.name`), `shape` (the full/compact decision),
//! `definitions` (`execute_plan` and `approve_plan`) and `example` (the plan the
//! description shows); here, the list they make.

mod definitions;
mod example;
mod profile;
mod shape;

use rmcp::model::Tool;

pub use super::search::{SEARCH_TOOLS_TOOL, search_tools, search_tools_tool};
use crate::catalog::Catalog;
use crate::policy::Confirm;
pub use definitions::{approve_plan_tool, execute_plan_tool, kept_loaded, server_index};
pub use example::example;
pub use profile::{HostProfile, OTHER_HOST, PROFILES, profile};
pub use shape::{Decision, Shape};

/// The tools `tools/list` shows: in full, every catalog tool, the pipelines, then
/// `execute_plan` and `approve_plan` (unless `confirm` is "none"); compact, only the
/// `always_list` tools of the catalog, the pipelines, and `search_tools` beside
/// planmux's own.
pub fn listed(
    catalog: &Catalog,
    shape: &Shape,
    confirm: Confirm,
    compact: bool,
    pipelines: Vec<Tool>,
) -> Vec<Tool> {
    let mut tools: Vec<Tool> = match compact {
        true => shape
            .always_listed(catalog)
            .map(|e| e.definition.clone())
            .collect(),
        false => catalog.definitions().cloned().collect(),
    };
    // Pipelines are few and chosen by the user: listed in every mode.
    tools.extend(pipelines);
    tools.push(execute_plan_tool(catalog, confirm, compact));
    if compact {
        tools.push(search_tools_tool(catalog.servers().len()));
    }
    if confirm != Confirm::None {
        tools.push(approve_plan_tool());
    }
    tools
}

/// What the tests of each part build their shapes and clients from.
#[cfg(test)]
mod fixtures {
    use rmcp::model::Implementation;

    use super::Shape;

    /// The shape `[proxy]` with `toml` makes.
    pub(super) fn shape(toml: &str) -> Shape {
        let config = crate::config::Config::parse(
            &format!("[proxy]\n{toml}"),
            "test.toml",
            std::path::Path::new("."),
            &|_| None,
        )
        .expect("a valid config");
        Shape::new(&config.proxy)
    }

    /// A host that announces itself as `name`.
    pub(super) fn client(name: &str) -> Implementation {
        Implementation::new(name, "1")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::fixtures::shape;
    use super::*;
    use crate::demo::demo_catalog;

    #[test]
    fn compact_lists_the_meta_tools_and_always_list() {
        let catalog = demo_catalog();
        let names = |tools: Vec<Tool>| -> Vec<String> {
            tools.into_iter().map(|t| t.name.into_owned()).collect()
        };
        let shape = shape("always_list = [\"weather__get_*\"]");
        let compact = names(listed(&catalog, &shape, Confirm::Write, true, Vec::new()));
        assert_eq!(
            compact,
            [
                "weather__get_weather",
                "weather__get_history",
                "execute_plan",
                "search_tools",
                "approve_plan",
            ]
        );
        let compact = names(listed(&catalog, &shape, Confirm::None, true, Vec::new()));
        assert!(!compact.contains(&"approve_plan".to_owned()));
        let full = names(listed(&catalog, &shape, Confirm::Write, false, Vec::new()));
        assert_eq!(full.len(), catalog.entries().len() + 2);
        assert!(!full.contains(&"search_tools".to_owned()));
        for tool in listed(&catalog, &shape, Confirm::Write, true, Vec::new())
            .iter()
            .skip(2)
        {
            let meta = tool.meta.as_ref().map(|m| &m.0);
            assert_eq!(
                meta.and_then(|m| m.get("anthropic/alwaysLoad")),
                Some(&Value::Bool(true)),
                "{}",
                tool.name
            );
        }
    }
}
