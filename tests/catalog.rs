//! The merged catalog of the built-in demo servers, through the library.

use std::path::Path;
use std::sync::Arc;

use planmux::config::{Config, DEFAULT_CONFIG};
use planmux::downstream::Downstreams;

fn parse(text: &str) -> anyhow::Result<Config> {
    Ok(Config::parse(
        text,
        "servers.toml",
        Path::new("/tmp"),
        &|_| None,
    )?)
}

/// The exported names of the catalog `text` builds, in order.
async fn exported_names(text: &str) -> anyhow::Result<Vec<String>> {
    let downstreams = Downstreams::start(&parse(text)?, Arc::default()).await;
    let names = downstreams
        .catalog()
        .entries()
        .iter()
        .map(|e| e.exported.to_string())
        .collect();
    downstreams.shutdown().await;
    Ok(names)
}

/// What a host sees in tools/list with the default config: every name, description,
/// schema and annotation, reviewed once and then held still.
#[tokio::test]
async fn default_tools_list_snapshot() -> anyhow::Result<()> {
    let downstreams = Downstreams::start(&parse(DEFAULT_CONFIG)?, Arc::default()).await;
    let tools: Vec<_> = downstreams.catalog().definitions().cloned().collect();
    downstreams.shutdown().await;
    insta::assert_json_snapshot!(tools);
    Ok(())
}

#[tokio::test]
async fn include_and_exclude_filter_downstream_tool_names() -> anyhow::Result<()> {
    let names = exported_names("[servers.c]\nbuiltin = \"chaos\"\ninclude = [\"s*\", \"e*\", \"fail\"]\nexclude = [\"echo\"]\n").await?;
    assert_eq!(names, ["c__sleep", "c__fail"]);
    Ok(())
}

#[tokio::test]
async fn a_custom_separator_is_used_in_exported_names() -> anyhow::Result<()> {
    let names =
        exported_names("[proxy]\nseparator = \"-\"\n[servers.m]\nbuiltin = \"metrics\"\n").await?;
    assert_eq!(
        names,
        ["m-list_metrics", "m-query_metric", "m-check_threshold"]
    );
    Ok(())
}
