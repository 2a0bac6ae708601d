//! MCP Apps behind planmux (DESIGN §14): an app's server on the official TypeScript SDK
//! (tests/interop/app_server.mjs) with a tool whose `_meta.ui.resourceUri` names its view,
//! the `ui://` resource holding that view, and a tool the view calls by its own name.
//! Through planmux the tool's `_meta` and the resource arrive unchanged, and a call by the
//! server's own tool name is routed when exactly one server has it; an ambiguous one is an
//! error naming the candidates.

use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::json;

use super::support::{node, stdio_server};
use crate::common::{self, call, text};

/// servers.toml with the app's server as each of `names`, and the chaos demo.
fn config(names: &[&str]) -> String {
    let script = common::interop_dir().join("app_server.mjs");
    let script = script.to_string_lossy();
    let mut config = String::from("[servers.chaos]\nbuiltin = \"chaos\"\n\n");
    for name in names {
        config.push_str(&stdio_server(name, node(), &[&script], ""));
    }
    config
}

#[tokio::test]
async fn an_apps_ui_metadata_resource_and_own_name_calls_pass_through() -> anyhow::Result<()> {
    let proxy = common::start(&config(&["app"])).await?;
    let tools = proxy.client.list_all_tools().await?;
    let show = tools
        .iter()
        .find(|t| t.name == "app__show_forecast")
        .ok_or_else(|| anyhow::anyhow!("no app__show_forecast in {tools:?}"))?;
    let meta = serde_json::to_value(&show.meta)?;
    assert_eq!(
        meta,
        json!({
            "ui": {"resourceUri": "ui://weather-app/forecast.html", "visibility": ["model", "app"]},
            "ui/resourceUri": "ui://weather-app/forecast.html"
        }),
        "the tool's _meta as the server wrote it"
    );
    // The view, read by its ui:// URI (unchanged: resources are not renamed).
    let read = proxy
        .client
        .read_resource(ReadResourceRequestParams::new(
            "ui://weather-app/forecast.html",
        ))
        .await?;
    let [
        ResourceContents::TextResourceContents {
            mime_type,
            text: view,
            ..
        },
    ] = read.contents.as_slice()
    else {
        panic!("not one text contents: {read:?}");
    };
    assert_eq!(mime_type.as_deref(), Some("text/html;profile=mcp-app"));
    assert!(view.contains("<title>Forecast</title>"), "{view}");
    // The host calls the tool by its exported name; the view calls its sibling by the
    // server's own name.
    let shown = proxy
        .client
        .call_tool(call("app__show_forecast", json!({"city": "Oslo"})))
        .await?;
    assert_eq!(text(&shown), "Forecast for Oslo: sunny");
    let refreshed = proxy
        .client
        .call_tool(call("refresh_forecast", json!({"city": "Oslo"})))
        .await?;
    assert_eq!(text(&refreshed), "Refreshed Oslo: cloudy");
    Ok(())
}

#[tokio::test]
async fn an_own_name_two_servers_have_is_an_error_naming_both() -> anyhow::Result<()> {
    let proxy = common::start(&config(&["app", "app2"])).await?;
    let refused = proxy
        .client
        .call_tool(call("refresh_forecast", json!({"city": "Oslo"})))
        .await;
    let message = match refused {
        Err(error) => error.to_string(),
        Ok(result) => text(&result),
    };
    assert!(
        message.contains("app__refresh_forecast") && message.contains("app2__refresh_forecast"),
        "{message}"
    );
    let exact = proxy
        .client
        .call_tool(call("app2__refresh_forecast", json!({"city": "Lima"})))
        .await?;
    assert_eq!(text(&exact), "Refreshed Lima: cloudy");
    Ok(())
}
