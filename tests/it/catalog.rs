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

/// `namespace = false` exports a server's tools under their own names; a clash with
/// another server's name leaves the later tool out and is reported by `planmux check`.
#[tokio::test]
async fn servers_without_namespace_export_bare_names_and_clashes_are_reported() -> anyhow::Result<()>
{
    let names = exported_names(
        "[servers.metrics]\nbuiltin = \"metrics\"\nnamespace = false\n\n\
         [servers.weather]\nbuiltin = \"weather\"\n",
    )
    .await?;
    assert!(names.contains(&"check_threshold".to_string()), "{names:?}");
    assert!(
        names.contains(&"weather__get_weather".to_string()),
        "{names:?}"
    );

    let clash = "[servers.a]\nbuiltin = \"chaos\"\nnamespace = false\n\n\
                 [servers.b]\nbuiltin = \"chaos\"\nnamespace = false\n";
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("servers.toml");
    std::fs::write(&path, clash)?;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_planmux"))
        .args(["check", "--config"])
        .arg(&path)
        .output()?;
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report
            .contains("tool 'echo' of server 'b' exports as 'echo', which server 'a' has already"),
        "{report}"
    );
    Ok(())
}

/// A host's direct `tools/call` names a tool as a plan step does (docs/plan-language.md,
/// "Naming tools"): case and `-` versus `_` ignored, a bare tool name one server has; a
/// misspelled name gets the hints the plan gets.
#[tokio::test]
async fn a_direct_call_resolves_a_tool_name_as_a_plan_does() -> anyhow::Result<()> {
    use serde_json::json;

    use crate::common::{call, start, text};

    let proxy = start("[servers.metrics]\nbuiltin = \"metrics\"\n").await?;
    for name in [
        "METRICS__LIST-METRICS",
        "list-metrics",
        "metrics__list_metrics",
    ] {
        let listed = proxy.client.call_tool(call(name, json!({}))).await?;
        assert_eq!(listed.is_error, Some(false), "{name}: {}", text(&listed));
    }
    let err = proxy
        .client
        .call_tool(call("metrics__listmetrics", json!({})))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("unknown tool 'metrics__listmetrics'")
            && err.contains("did you mean 'metrics__list_metrics'"),
        "{err}"
    );
    let plan = json!({"steps": [{"id": "l", "tool": "metrics__listmetrics", "args": {}}]});
    let invalid = proxy.client.call_tool(call("execute_plan", plan)).await?;
    let said = text(&invalid);
    assert!(
        said.contains(
            "unknown tool \"metrics__listmetrics\"; did you mean \"metrics__list_metrics\""
        ),
        "{said}"
    );
    Ok(())
}
