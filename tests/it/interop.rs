//! Interop: planmux between real clients and real servers.
//!
//! - The official MCP Python SDK (tests/interop/python_client.py, mcp==2.3.0) as the host,
//!   in its default connect mode (`server/discover` at 2026-07-28, falling back to
//!   `initialize`) and in its legacy mode (`initialize`).
//! - The reference servers from npm (server-everything over stdio and streamable HTTP,
//!   server-filesystem, server-memory) as downstreams, compared with direct connections.
//! - The Python SDK (tests/interop/python_http.py) and the TypeScript SDK
//!   (tests/interop/ts_http.mjs, @modelcontextprotocol/sdk) as remote hosts of
//!   `planmux serve --http`, and the official conformance suite against it.
//! - A real identity provider (oidc-provider) in front of the team front (`front_auth`),
//!   and a real `redis-server` shared by several instances (`shared_state`).
//!
//! Prerequisites are installed by `scripts/test` (npm ci --prefix tests/interop, and a
//! venv in tests/interop/.venv). When one is missing every test here fails and says so.

mod apps;
mod console;
mod front_auth;
mod metrics;
mod mrtr;
mod oauth;
mod oauth_keychain;
mod oauth_link;
mod real_data;
mod shared_state;
pub(crate) mod support;
mod tasks;
mod traces;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, ClientRequest, NumberOrString, ProgressToken, RequestMetaObject, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use crate::common::{self, call, eventually, json, start, text};
use support::{
    EVERYTHING, FILESYSTEM, HttpEverything, Listening, MEMORY, Timer, direct_mirror, entry, node,
    stdio_server, toml_str, without_name,
};

type R = anyhow::Result<()>;

/// planmux's own tool, listed beside the re-exported ones (DESIGN.md §3).
const PLAN_TOOL: &str = "execute_plan";
/// planmux's own tools, listed after the downstream ones.
const OWN_TOOLS: [&str; 2] = [PLAN_TOOL, "approve_plan"];

// ---------------------------------------------------------------------------------------
// The Python SDK as the host
// ---------------------------------------------------------------------------------------

/// Runs python_client.py against planmux serving the built-in demos plus a stdio
/// `planmux demo chaos` child, and returns its JSON summary.
async fn python_client(mode: &str, expect_protocol: &str) -> anyhow::Result<Value> {
    let python = support::python();
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("servers.toml");
    let stdio_child = stdio_server("chaos2", common::bin(), &["demo", "chaos"], "");
    let everything = everything_config("");
    // Every tool listed: what is checked is each one's definition on the wire.
    std::fs::write(
        &config,
        format!(
            "[proxy]\nsurface = \"full\"\n\n[servers.metrics]\nbuiltin = \"metrics\"\n\n[servers.weather]\nbuiltin = \"weather\"\n\n\
             [servers.chaos]\nbuiltin = \"chaos\"\n\n\
             [servers.files]\nbuiltin = \"files\"\ncwd = \"sandbox\"\n\n{stdio_child}\n{everything}"
        ),
    )?;
    let compact = dir.path().join("compact.toml");
    std::fs::write(
        &compact,
        format!(
            "[proxy]\nsurface = \"compact\"\n\n[servers.weather]\nbuiltin = \"weather\"\n\n\
             [servers.chaos]\nbuiltin = \"chaos\"\n\n{everything}"
        ),
    )?;
    let wire = dir.path().join(format!("wire-{mode}.log"));
    let script = common::interop_dir().join("python_client.py");
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .args([
            "--planmux",
            common::bin(),
            "--mode",
            mode,
            "--stdio-chaos",
            "chaos2",
        ])
        .arg("--config")
        .arg(&config)
        .arg("--sandbox")
        .arg(dir.path().join("sandbox"))
        .arg("--everything")
        .arg("--compact-config")
        .arg(&compact)
        .args(["--expect-protocol", expect_protocol])
        .arg("--wire-log")
        .arg(&wire)
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .map_err(|_| {
            anyhow::anyhow!("python_client.py --mode {mode} did not finish within 120 s")
        })??;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let wire_log = std::fs::read_to_string(&wire).unwrap_or_default();
        panic!(
            "python_client.py --mode {mode} failed ({}):\n--- stderr ---\n{stderr}\n--- stdout ---\n{stdout}\n--- wire log ---\n{wire_log}",
            out.status
        );
    }
    let summary: Value = serde_json::from_str(&stdout).map_err(|e| {
        anyhow::anyhow!("python_client.py printed no JSON summary ({e}):\n{stdout}\n{stderr}")
    })?;
    Ok(summary)
}

fn check_python_summary(summary: &Value, mode: &str, protocol: &str) {
    assert_eq!(summary["ok"], json!(true), "{mode}: {summary:#}");
    assert_eq!(
        summary["protocol_version"],
        json!(protocol),
        "{mode}: {summary:#}"
    );
    let calls = &summary["calls"];
    assert_eq!(calls["chaos__fail"]["isError"], json!(true), "{mode}");
    assert_eq!(
        calls["weather__get_weather"]["structuredContent"]["location"],
        json!("Tokyo"),
        "{mode}"
    );
    assert_eq!(
        calls["chaos2__echo"]["structuredContent"],
        json!({"via": "chaos2"}),
        "{mode}"
    );
    // Prompts, resources and completions of a real server, in this mode.
    let front = &summary["front_door"];
    assert_eq!(
        front["completion"],
        json!(["Engineering"]),
        "{mode}: {front:#}"
    );
    // Compact: a tool found with search_tools runs in a plan, and by name.
    let compact = &summary["compact"];
    assert_eq!(
        compact["found"][0],
        json!("weather__get_weather"),
        "{mode}: {compact:#}"
    );
    assert_eq!(
        compact["plan"]["where"],
        json!("Oslo"),
        "{mode}: {compact:#}"
    );
    // Plan approval: accepted, declined, and the token path, all in this mode.
    let approval = &summary["approval"];
    for case in ["accept", "decline", "needs_approval", "approve_plan"] {
        assert!(
            approval[case].is_object(),
            "{mode}: no approval case {case}"
        );
    }
    let asked_with = if protocol == "2026-07-28" {
        json!(["input_required"])
    } else {
        json!(["elicitation/create"])
    };
    assert_eq!(approval["asked_with"], asked_with, "{mode}: {approval:#}");
    // What each era requires of a tool result on the wire.
    let result_type = calls["chaos__echo"].get("resultType").cloned();
    if protocol == "2026-07-28" {
        assert_eq!(
            result_type,
            Some(json!("complete")),
            "{mode}: a 2026-07-28 CallToolResult needs resultType"
        );
    }
}

#[tokio::test]
async fn python_sdk_default_mode_discovers_2026_07_28() -> R {
    let _t = Timer::start("python_sdk_default_mode_discovers_2026_07_28");
    let summary = python_client("default", "2026-07-28").await?;
    check_python_summary(&summary, "default", "2026-07-28");
    let handshake = summary["handshake"][0].as_str().unwrap_or_default();
    assert!(
        handshake.contains("\"server/discover\""),
        "the default mode should probe with server/discover: {handshake}"
    );
    Ok(())
}

#[tokio::test]
async fn python_sdk_legacy_mode_initializes() -> R {
    let _t = Timer::start("python_sdk_legacy_mode_initializes");
    let summary = python_client("legacy", "2025-11-25").await?;
    check_python_summary(&summary, "legacy", "2025-11-25");
    let handshake = summary["handshake"][0].as_str().unwrap_or_default();
    assert!(
        handshake.contains("\"initialize\""),
        "the legacy mode should send initialize: {handshake}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// server-everything over stdio
// ---------------------------------------------------------------------------------------

fn everything_config(extra: &str) -> String {
    stdio_server("everything", node(), &[&entry(EVERYTHING)], extra)
}

/// Both tool lists as name → definition-without-name, planmux's with the prefix removed.
async fn tool_maps(
    proxy: &common::Proxy,
    direct: &rmcp::service::RunningService<rmcp::RoleClient, support::MirrorHost>,
    prefix: &str,
) -> anyhow::Result<(
    BTreeMap<String, Value>,
    BTreeMap<String, Value>,
    Vec<String>,
)> {
    let mut via = BTreeMap::new();
    let mut others = Vec::new();
    for tool in proxy.client.list_all_tools().await? {
        match tool.name.strip_prefix(prefix) {
            Some(bare) => {
                via.insert(bare.to_string(), without_name(&tool));
            }
            // planmux's own tools are listed beside the re-exported ones.
            None if OWN_TOOLS.contains(&&*tool.name) => {}
            None => others.push(tool.name.to_string()),
        }
    }
    let orig = direct
        .list_all_tools()
        .await?
        .iter()
        .map(|t| (t.name.to_string(), without_name(t)))
        .collect();
    Ok((via, orig, others))
}

/// A readable difference between two tool maps.
fn describe_difference(via: &BTreeMap<String, Value>, orig: &BTreeMap<String, Value>) -> String {
    let mut lines = Vec::new();
    for (name, tool) in orig {
        match via.get(name) {
            None => lines.push(format!("missing through planmux: {name}")),
            Some(v) if v != tool => lines.push(format!(
                "{name} differs:\n  direct:  {tool}\n  planmux: {v}"
            )),
            Some(_) => {}
        }
    }
    for name in via.keys().filter(|n| !orig.contains_key(*n)) {
        lines.push(format!("only through planmux: {name}"));
    }
    lines.join("\n")
}

#[tokio::test]
async fn everything_tools_list_is_the_direct_list_prefixed() -> R {
    let _t = Timer::start("everything_tools_list_is_the_direct_list_prefixed");
    // A host with the direct client's capabilities (roots, sampling, elicitation): planmux
    // offers the server what its host supports, so the server lists the same tools.
    let capable = common::Recorder {
        capable: true,
        ..Default::default()
    };
    let proxy = common::start_with(&everything_config(""), capable).await?;
    let direct = direct_mirror(node(), &[&entry(EVERYTHING)], &[]).await?;
    // server-everything registers its capability-dependent tools after `initialized` and
    // announces them with list_changed: let both sides settle.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (via, orig, others) = loop {
        let maps = tool_maps(&proxy, &direct, "everything__").await?;
        if maps.0 == maps.1 || Instant::now() > deadline {
            break maps;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        others.is_empty(),
        "tools without the everything__ prefix: {others:?}"
    );
    assert!(
        orig.len() >= 10,
        "server-everything listed only {} tools: {:?}",
        orig.len(),
        orig.keys()
    );
    for name in [
        "echo",
        "get-structured-content",
        "trigger-long-running-operation",
        "get-tiny-image",
    ] {
        assert!(
            orig.contains_key(name),
            "server-everything has no {name}: {:?}",
            orig.keys()
        );
    }
    assert!(orig["get-structured-content"].get("outputSchema").is_some());
    assert!(orig["echo"].get("annotations").is_some());
    assert!(
        via == orig,
        "tools/list through planmux differs from the direct list:\n{}",
        describe_difference(&via, &orig)
    );
    drop(direct);

    // A host without those capabilities: the server is not offered them, so it hides
    // the tools that would need them, as it would for that host directly.
    let plain = start(&everything_config("")).await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let names = loop {
        let names = plain.tool_names().await?;
        if names.iter().any(|n| n == "everything__echo") || Instant::now() > deadline {
            break names;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for needs in [
        "get-roots-list",
        "trigger-elicitation-request",
        "trigger-sampling-request",
    ] {
        assert!(via.contains_key(needs), "a capable host lacks {needs}");
        assert!(
            !names.contains(&format!("everything__{needs}")),
            "{needs} offered to a host that cannot serve it: {names:?}"
        );
    }
    assert!(!via.contains_key("trigger-url-elicitation"));
    // A host that takes URL elicitation too gets the server's URL-elicitation tool.
    let url_host = common::Recorder {
        capable: true,
        url_elicitation: true,
        ..Default::default()
    };
    let with_url = common::start_with(&everything_config(""), url_host).await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let tools = with_url.client.list_all_tools().await?;
        if tools
            .iter()
            .any(|t| t.name == "everything__trigger-url-elicitation")
        {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "no URL-elicitation tool for a host that supports it"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

#[tokio::test]
async fn everything_calls_give_the_direct_results() -> R {
    let _t = Timer::start("everything_calls_give_the_direct_results");
    let proxy = start(&everything_config("")).await?;
    let direct = direct_mirror(node(), &[&entry(EVERYTHING)], &[]).await?;
    let cases = [
        ("echo", json!({"message": "héllo planmux"})),
        ("get-structured-content", json!({"location": "Chicago"})),
        ("get-sum", json!({"a": 2, "b": 3.5})),
        (
            "get-annotated-message",
            json!({"messageType": "error", "includeImage": true}),
        ),
        ("get-tiny-image", json!({})),
        ("get-resource-links", json!({"count": 2})),
        (
            "get-resource-reference",
            json!({"resourceType": "Text", "resourceId": 2}),
        ),
        // Invalid arguments: whatever the server answers (a tool error), planmux passes on.
        ("get-sum", json!({"a": "two"})),
    ];
    for (tool, args) in cases {
        let via = proxy
            .client
            .call_tool(call(&format!("everything__{tool}"), args.clone()))
            .await;
        let orig = direct.call_tool(call(tool, args.clone())).await;
        match (via, orig) {
            (Ok(via), Ok(orig)) => {
                assert_eq!(timeless(json(&via)), timeless(json(&orig)), "{tool} {args}")
            }
            (Err(via), Err(orig)) => assert_eq!(via.to_string(), orig.to_string(), "{tool} {args}"),
            (via, orig) => panic!("{tool} {args}: through planmux {via:?}, direct {orig:?}"),
        }
    }
    let echoed = proxy
        .client
        .call_tool(call("everything__echo", json!({"message": "hi"})))
        .await?;
    assert_eq!(text(&echoed), "Echo: hi");
    let structured = proxy
        .client
        .call_tool(call(
            "everything__get-structured-content",
            json!({"location": "Chicago"}),
        ))
        .await?;
    assert_eq!(
        structured.structured_content,
        Some(json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}))
    );
    drop(direct);
    Ok(())
}

/// Tool definition fields planmux does not interpret (server-everything's `execution`)
/// reach the host as the server sent them, on the wire.
#[test]
fn tool_fields_planmux_does_not_model_pass_through() -> R {
    let _t = Timer::start("tool_fields_planmux_does_not_model_pass_through");
    let mut raw = common::RawProxy::start(&everything_config(""))?;
    let listed = raw.list_tools()?;
    let tools = listed["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let echo = tools
        .iter()
        .find(|t| t["name"] == "everything__echo")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        echo["execution"],
        json!({"taskSupport": "forbidden"}),
        "{echo:#}"
    );
    let plan = tools.iter().find(|t| t["name"] == "execute_plan");
    assert!(plan.is_some_and(|p| p.get("execution").is_none()));
    Ok(())
}

/// Prompts, resources, templates and completions of server-everything pass through:
/// prompts renamed `everything__…` and otherwise identical, resources and templates under
/// their own URIs, reads (listed, by template, and linked from a tool result), completions
/// and subscriptions answered as the server answers them directly.
#[tokio::test]
async fn everything_prompts_resources_and_completions_pass_through() -> R {
    use rmcp::model::{
        ArgumentInfo, CompleteRequestParams, GetPromptRequestParams, ReadResourceRequestParams,
        Reference, SubscribeRequestParams,
    };
    let _t = Timer::start("everything_prompts_resources_and_completions_pass_through");
    let proxy = start(&everything_config("")).await?;
    let direct = direct_mirror(node(), &[&entry(EVERYTHING)], &[]).await?;
    let via = &proxy.client;

    // The server's instructions reach the host, under its name, within planmux's own.
    let own = direct
        .peer_info()
        .and_then(|i| i.instructions.clone())
        .unwrap_or_default();
    let merged = via
        .peer_info()
        .and_then(|i| i.instructions.clone())
        .unwrap_or_default();
    assert!(
        own.len() > 200,
        "server-everything gave no instructions: {own:?}"
    );
    let expected = format!("## everything\n{}", own.trim());
    assert!(
        merged.starts_with("planmux fronts")
            && merged.contains(&expected[..expected.len().min(1500)]),
        "{merged}"
    );

    let strip = |mut value: Value| {
        if let Value::Object(map) = &mut value {
            map.remove("name");
        }
        value
    };
    let direct_prompts = direct.list_all_prompts().await?;
    let via_prompts = via.list_all_prompts().await?;
    assert!(direct_prompts.len() >= 3, "{direct_prompts:?}");
    assert_eq!(via_prompts.len(), direct_prompts.len());
    for (orig, got) in direct_prompts.iter().zip(&via_prompts) {
        assert_eq!(got.name, format!("everything__{}", orig.name));
        assert_eq!(
            strip(serde_json::to_value(got)?),
            strip(serde_json::to_value(orig)?)
        );
    }
    let args = |pairs: &[(&str, &str)]| {
        let map: serde_json::Map<String, Value> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect();
        map
    };
    let city = args(&[("city", "Paris"), ("state", "Île-de-France")]);
    let got = via
        .get_prompt(
            GetPromptRequestParams::new("everything__args-prompt").with_arguments(city.clone()),
        )
        .await?;
    let orig = direct
        .get_prompt(GetPromptRequestParams::new("args-prompt").with_arguments(city))
        .await?;
    assert_eq!(serde_json::to_value(&got)?, serde_json::to_value(&orig)?);
    let unknown = via
        .get_prompt(GetPromptRequestParams::new("everything__no-such-prompt"))
        .await;
    assert!(
        unknown
            .as_ref()
            .err()
            .is_some_and(|e| e.to_string().contains("unknown prompt")),
        "{unknown:?}"
    );

    let direct_resources = direct.list_all_resources().await?;
    let via_resources = via.list_all_resources().await?;
    assert!(!direct_resources.is_empty());
    for resource in &direct_resources {
        assert!(via_resources.contains(resource), "{} missing", resource.uri);
    }
    let direct_templates = direct.list_all_resource_templates().await?;
    let via_templates = via.list_all_resource_templates().await?;
    for template in &direct_templates {
        assert!(
            via_templates.contains(template),
            "{} missing",
            template.uri_template
        );
    }
    let mut uris: Vec<String> = direct_resources.iter().map(|r| r.uri.clone()).collect();
    uris.push("demo://resource/dynamic/text/3".into());
    // A dynamic resource says when it was made ("created at 4:27:59 PM"): the two reads
    // may fall in different seconds.
    let created = regex::Regex::new(r"created at [0-9:]+ ?[AP]?M?")?;
    for uri in &uris {
        let got = via
            .read_resource(ReadResourceRequestParams::new(uri.clone()))
            .await?;
        let orig = direct
            .read_resource(ReadResourceRequestParams::new(uri.clone()))
            .await?;
        let untimed = |v: &Value| {
            created
                .replace_all(&v.to_string(), "created at T")
                .into_owned()
        };
        assert_eq!(
            untimed(&serde_json::to_value(&got)?),
            untimed(&serde_json::to_value(&orig)?),
            "{uri}"
        );
    }
    // A link in a tool result is readable through planmux.
    let links = via
        .call_tool(call("everything__get-resource-links", json!({"count": 2})))
        .await?;
    let linked: Vec<String> = json(&links)["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["uri"].as_str().map(str::to_owned))
        .collect();
    assert!(!linked.is_empty(), "{:#}", json(&links));
    for uri in linked {
        let read = via
            .read_resource(ReadResourceRequestParams::new(uri.clone()))
            .await;
        assert!(read.is_ok(), "{uri}: {read:?}");
    }
    let missing = via
        .read_resource(ReadResourceRequestParams::new("nowhere://at/all"))
        .await;
    assert!(missing.is_err(), "{missing:?}");

    let complete = |name: &str| {
        CompleteRequestParams::new(
            Reference::for_prompt(name),
            ArgumentInfo::new("department", "E"),
        )
    };
    let got = via
        .complete(complete("everything__completable-prompt"))
        .await?;
    let orig = direct.complete(complete("completable-prompt")).await?;
    assert_eq!(serde_json::to_value(&got)?, serde_json::to_value(&orig)?);
    assert!(!got.completion.values.is_empty());

    #[allow(deprecated)] // resources/subscribe: the 2025-11-25 way, which this session uses
    via.subscribe(SubscribeRequestParams::new(uris[0].clone()))
        .await?;
    drop(direct);
    Ok(())
}

/// A plan step can read a resource (`{"resource": URI}`, references allowed in the URI):
/// its text comes back as the step's output, like a tool's, and feeds later steps.
#[tokio::test]
async fn plans_read_resources_as_steps() -> R {
    use rmcp::model::ReadResourceRequestParams;
    let _t = Timer::start("plans_read_resources_as_steps");
    let proxy = start(&everything_config("")).await?;
    let direct = direct_mirror(node(), &[&entry(EVERYTHING)], &[]).await?;
    let plan = json!({
        "inputs": {"id": 2},
        "steps": [
            {"id": "doc", "resource": "demo://resource/dynamic/text/${input.id}"},
            {"id": "echo", "tool": "everything__echo", "args": {"message": "read: ${doc}"}},
            {"id": "nothing", "resource": "nowhere://at/all"}
        ],
        "outputs": ["doc", "echo"]
    });
    let ran = proxy.client.call_tool(call(PLAN_TOOL, plan)).await?;
    let result = ran.structured_content.clone().unwrap_or_default();
    let orig = direct
        .read_resource(ReadResourceRequestParams::new(
            "demo://resource/dynamic/text/2",
        ))
        .await?;
    let text = serde_json::to_value(&orig.contents)?[0]["text"].clone();
    // The resource says when it was made ("created at 4:27:59 PM"): the two reads may
    // fall in different seconds, so the time is left out of the comparison.
    let untimed = |v: &Value| {
        let text = v.as_str().unwrap_or_default();
        text.split(" created at ").next().unwrap_or(text).to_owned()
    };
    assert_eq!(
        untimed(&result["outputs"]["doc"]),
        untimed(&text),
        "{result:#}"
    );
    let echoed = result["outputs"]["echo"].as_str().unwrap_or_default();
    assert!(
        echoed.contains(&format!("read: {}", untimed(&text))),
        "{result:#}"
    );
    assert_eq!(result["steps"]["nothing"]["status"], "failed", "{result:#}");
    assert_eq!(result["status"], "partial", "{result:#}");
    drop(direct);
    Ok(())
}

fn long_running(
    duration_s: f64,
    steps: u32,
    token: &str,
) -> (ClientRequest, PeerRequestOptions, ProgressToken) {
    let token = ProgressToken(NumberOrString::String(token.to_string().into()));
    let mut params = call(
        "everything__trigger-long-running-operation",
        json!({"duration": duration_s, "steps": steps}),
    );
    params.meta = Some(RequestMetaObject::with_progress_token(token.clone()));
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let options = PeerRequestOptions::with_timeout(Duration::from_secs(30))
        .with_meta(RequestMetaObject::with_progress_token(token.clone()));
    (request, options, token)
}

#[tokio::test]
async fn everything_long_running_operation_reports_progress() -> R {
    let _t = Timer::start("everything_long_running_operation_reports_progress");
    let proxy = start(&everything_config("")).await?;
    let (request, options, _) = long_running(1.0, 4, "interop-progress");
    let handle = proxy
        .client
        .send_cancellable_request(request, options)
        .await?;
    let token = handle.progress_token.clone();
    let response = handle.await_response().await?;
    let ServerResult::CallToolResult(result) = response else {
        panic!("not a tool result: {response:?}")
    };
    assert_eq!(
        text(&result),
        "Long running operation completed. Duration: 1 seconds, Steps: 4."
    );
    let all = eventually(Duration::from_secs(2), || {
        proxy.progress_for(&token).len() >= 4
    })
    .await;
    let progress = proxy.progress_for(&token);
    assert!(
        all,
        "expected 4 progress notifications with the request's token {token:?}, got {progress:?}"
    );
    let steps: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    assert_eq!(steps, vec![1.0, 2.0, 3.0, 4.0]);
    assert!(
        progress.iter().all(|p| p.total == Some(4.0)),
        "{progress:?}"
    );
    Ok(())
}

/// server-everything sends each progress notification before its response (the wire shows
/// all of them ahead of the result), so every one must reach the host, not only most.
/// Many short calls make a lost last notification show up reliably.
#[tokio::test]
async fn everything_progress_sent_before_the_response_is_never_dropped() -> R {
    let _t = Timer::start("everything_progress_sent_before_the_response_is_never_dropped");
    let proxy = start(&everything_config("")).await?;
    let calls = 20;
    let mut tokens = Vec::new();
    for i in 0..calls {
        let (request, options, _) = long_running(0.04, 4, &format!("interop-burst-{i}"));
        let handle = proxy
            .client
            .send_cancellable_request(request, options)
            .await?;
        tokens.push(handle.progress_token.clone());
        let response = handle.await_response().await?;
        assert!(
            matches!(response, ServerResult::CallToolResult(_)),
            "{response:?}"
        );
    }
    let counts = || {
        proxy
            .recorder
            .seen
            .lock()
            .map(|s| {
                tokens
                    .iter()
                    .map(|t| s.progress.iter().filter(|p| &p.progress_token == t).count())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    // Delivery after the response is tolerated (the client handles notifications on tasks);
    // a notification that never arrives is not.
    eventually(Duration::from_secs(3), || counts().iter().all(|&n| n == 4)).await;
    let counts = counts();
    let short: Vec<(usize, usize)> = counts
        .iter()
        .copied()
        .enumerate()
        .filter(|&(_, n)| n != 4)
        .collect();
    assert!(
        short.is_empty(),
        "planmux dropped progress notifications that the downstream sent before its response: \
         (call, progress received of 4) = {short:?}"
    );
    Ok(())
}

#[tokio::test]
async fn everything_long_running_operation_cancels_promptly() -> R {
    let _t = Timer::start("everything_long_running_operation_cancels_promptly");
    // What planmux sends server-everything is recorded by a `tee` in front of its stdin.
    let dir = tempfile::tempdir()?;
    let tap = dir.path().join("to-everything.jsonl");
    let script = format!(
        "tee -a '{}' | exec {} '{}'",
        tap.display(),
        node(),
        entry(EVERYTHING)
    );
    let proxy = start(&stdio_server("everything", "sh", &["-c", &script], "")).await?;
    let sent_downstream = || -> Vec<Value> {
        std::fs::read_to_string(&tap)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    // The downstream ids of the long-running calls, and the ids planmux cancelled.
    let long_calls = || -> Vec<Value> {
        sent_downstream()
            .into_iter()
            .filter(|m| {
                m["method"] == "tools/call"
                    && m["params"]["name"] == "trigger-long-running-operation"
            })
            .map(|m| m["id"].clone())
            .collect()
    };
    let cancelled = || -> Vec<Value> {
        sent_downstream()
            .into_iter()
            .filter(|m| m["method"] == "notifications/cancelled")
            .map(|m| m["params"]["requestId"].clone())
            .collect()
    };

    // 1. An explicit notifications/cancelled (RequestHandle::cancel) after the first progress.
    let (request, options, _) = long_running(20.0, 40, "interop-cancel");
    let handle = proxy
        .client
        .send_cancellable_request(request, options)
        .await?;
    let token = handle.progress_token.clone();
    let count = |proxy: &common::Proxy| proxy.progress_for(&token).len();
    assert!(
        eventually(Duration::from_secs(5), || count(&proxy) >= 1).await,
        "no progress before cancelling"
    );
    let cancelled_at = Instant::now();
    handle.cancel(Some("interop test".into())).await?;
    let cancel_took = cancelled_at.elapsed();
    assert!(
        cancel_took < Duration::from_secs(1),
        "cancel took {cancel_took:?}"
    );
    // planmux answers at once while the operation would still run for ~19 s...
    let asked = Instant::now();
    let echoed = proxy
        .client
        .call_tool(call("everything__echo", json!({"message": "still here"})))
        .await?;
    assert_eq!(text(&echoed), "Echo: still here");
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "a call after the cancel took {:?}",
        asked.elapsed()
    );
    // ...it told server-everything...
    let told = eventually(Duration::from_secs(2), || {
        let ids = long_calls();
        ids.len() == 1 && cancelled().contains(&ids[0])
    })
    .await;
    assert!(
        told,
        "planmux did not send notifications/cancelled for the call downstream: calls {:?}, cancelled {:?}",
        long_calls(),
        cancelled()
    );
    // ...and forwards no more progress for the cancelled call (one may already be in flight).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let settled = count(&proxy);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        count(&proxy),
        settled,
        "progress for a cancelled call kept arriving (a step is 0.5 s)"
    );

    // 2. A call future dropped by the client (rmcp sends notifications/cancelled for it).
    let started = Instant::now();
    let dropped = tokio::time::timeout(
        Duration::from_millis(700),
        proxy.client.call_tool(call(
            "everything__trigger-long-running-operation",
            json!({"duration": 20, "steps": 2}),
        )),
    )
    .await;
    assert!(
        dropped.is_err(),
        "the 20 s operation answered early: {dropped:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    let echoed = proxy
        .client
        .call_tool(call("everything__echo", json!({"message": "after drop"})))
        .await?;
    assert_eq!(text(&echoed), "Echo: after drop");
    let told = eventually(Duration::from_secs(2), || {
        let ids = long_calls();
        ids.len() == 2 && cancelled().contains(&ids[1])
    })
    .await;
    assert!(
        told,
        "a dropped call was not cancelled downstream: calls {:?}, cancelled {:?}",
        long_calls(),
        cancelled()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// server-everything over streamable HTTP
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn everything_over_streamable_http_round_trips() -> R {
    let _t = Timer::start("everything_over_streamable_http_round_trips");
    let server = HttpEverything::start().await?;
    let proxy = start(&format!(
        "[servers.remote]\nurl = {}\n",
        toml_str(&server.url)
    ))
    .await?;
    let tools = proxy.client.list_all_tools().await?;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(
        names.contains(&"remote__echo"),
        "tools from {} (pid {:?}): {names:?}",
        server.url,
        server.pid()
    );
    let echoed = proxy
        .client
        .call_tool(call("remote__echo", json!({"message": "over http"})))
        .await?;
    assert_ne!(echoed.is_error, Some(true), "{}", json(&echoed));
    assert_eq!(text(&echoed), "Echo: over http", "{}", json(&echoed));
    let structured = proxy
        .client
        .call_tool(call(
            "remote__get-structured-content",
            json!({"location": "Los Angeles"}),
        ))
        .await?;
    assert_eq!(
        structured.structured_content,
        Some(json!({"temperature": 73, "conditions": "Sunny / Clear", "humidity": 48}))
    );

    // Progress comes back over the HTTP response stream and through planmux.
    let token = ProgressToken(NumberOrString::String("interop-http".into()));
    let mut params = call(
        "remote__trigger-long-running-operation",
        json!({"duration": 0.6, "steps": 3}),
    );
    params.meta = Some(RequestMetaObject::with_progress_token(token.clone()));
    let options = PeerRequestOptions::with_timeout(Duration::from_secs(30))
        .with_meta(RequestMetaObject::with_progress_token(token));
    let handle = proxy
        .client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            options,
        )
        .await?;
    let sent = handle.progress_token.clone();
    let response = handle.await_response().await?;
    assert!(
        matches!(response, ServerResult::CallToolResult(_)),
        "{response:?}"
    );
    let count = || proxy.progress_for(&sent).len();
    assert!(
        eventually(Duration::from_secs(2), || count() >= 3).await,
        "progress over HTTP: {} of 3",
        count()
    );
    drop(proxy);
    drop(server);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// server-filesystem and server-memory
// ---------------------------------------------------------------------------------------

/// server-filesystem started without folders takes the host's roots, asked for while
/// the host may still be connecting (planmux waits for it), and follows the host's
/// `roots/list_changed`.
#[tokio::test]
async fn filesystem_takes_the_hosts_roots_and_their_changes() -> R {
    let _t = Timer::start("filesystem_takes_the_hosts_roots_and_their_changes");
    let (a, b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let a = std::fs::canonicalize(a.path())?;
    let b = std::fs::canonicalize(b.path())?;
    let uri = |p: &std::path::Path| format!("file://{}", p.display());
    let host = common::Recorder {
        capable: true,
        ..Default::default()
    };
    if let Ok(mut roots) = host.roots.lock() {
        roots.push(uri(&a));
    }
    let proxy = common::start_with(
        &stdio_server("fs", node(), &[&entry(FILESYSTEM)], ""),
        host.clone(),
    )
    .await?;
    let allowed = || async {
        let listed = proxy
            .client
            .call_tool(call("fs__list_allowed_directories", json!({})))
            .await;
        listed.map(|r| text(&r)).unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = allowed().await;
    while !seen.contains(&a.display().to_string()) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen = allowed().await;
    }
    assert!(seen.contains(&a.display().to_string()), "{seen}");

    if let Ok(mut roots) = host.roots.lock() {
        *roots = vec![uri(&b)];
    }
    proxy.client.notify_roots_list_changed().await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = allowed().await;
    while !seen.contains(&b.display().to_string()) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen = allowed().await;
    }
    assert!(
        seen.contains(&b.display().to_string()) && !seen.contains(&a.display().to_string()),
        "{seen}"
    );
    Ok(())
}

/// A host that finishes its handshake after server-filesystem asked for roots: planmux
/// holds the server's request until the host is there, and the server gets the host's
/// folder instead of an error (after which it would have none).
#[test]
fn filesystem_asking_for_roots_before_the_host_is_connected_gets_them() -> R {
    let _t = Timer::start("filesystem_asking_for_roots_before_the_host_is_connected_gets_them");
    let dir = tempfile::tempdir()?;
    let root = std::fs::canonicalize(dir.path())?;
    let mut raw = common::RawProxy::start(&stdio_server("fs", node(), &[&entry(FILESYSTEM)], ""))?;
    // Long enough for the server to start and ask; within planmux's wait for the host.
    std::thread::sleep(Duration::from_millis(1500));
    raw.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"late-host","version":"0"}}}"#)?;
    let ask = |id| common::call_line(id, "fs__list_allowed_directories", serde_json::json!({}));
    // Every answer is followed by the next question, so a read never waits for nothing.
    let (mut asked, mut said) = (false, String::new());
    for _ in 0..100 {
        let message = raw.read()?;
        if message["method"] == "roots/list" {
            let reply = json!({"jsonrpc": "2.0", "id": message["id"],
                "result": {"roots": [{"uri": format!("file://{}", root.display()), "name": "work"}]}});
            raw.send(&reply.to_string())?;
            asked = true;
        } else if message["id"] == 1 {
            raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
            raw.send(&ask(2))?;
        } else if let Some(id) = message["id"].as_u64().filter(|id| *id >= 2) {
            said = message["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if said.contains(&root.display().to_string()) {
                return Ok(());
            }
            // The server applies the roots it got a moment after answering: ask again.
            std::thread::sleep(Duration::from_millis(100));
            raw.send(&ask(id + 1))?;
        }
    }
    anyhow::ensure!(
        asked,
        "server-filesystem never asked for roots through planmux"
    );
    anyhow::bail!("the server never allowed the host's folder: {said}")
}

#[tokio::test]
async fn filesystem_write_then_read_matches_direct() -> R {
    let _t = Timer::start("filesystem_write_then_read_matches_direct");
    let root = tempfile::tempdir()?;
    // The server reports canonical paths: resolve symlinks (e.g. /tmp) up front.
    let root_path = std::fs::canonicalize(root.path())?;
    let root_str = root_path.to_string_lossy().into_owned();
    let script = entry(FILESYSTEM);
    let proxy = start(&stdio_server("fs", node(), &[&script, &root_str], "")).await?;
    let direct = direct_mirror(node(), &[&script, &root_str], &[]).await?;

    let file = root_path.join("notes.txt");
    let file_str = file.to_string_lossy().into_owned();
    let content = "first line\nsecond line: ünïcödé\n";
    let written = proxy
        .client
        .call_tool(call(
            "fs__write_file",
            json!({"path": file_str, "content": content}),
        ))
        .await?;
    assert_ne!(written.is_error, Some(true), "{}", json(&written));
    assert_eq!(
        std::fs::read_to_string(&file)?,
        content,
        "write_file through planmux wrote something else"
    );

    // Writing the same again directly answers the same as through planmux.
    let written_direct = direct
        .call_tool(call(
            "write_file",
            json!({"path": file_str, "content": content}),
        ))
        .await?;
    assert_eq!(json(&written), json(&written_direct));

    for (tool, args) in [
        ("read_text_file", json!({"path": file_str})),
        ("read_file", json!({"path": file_str})),
        ("read_text_file", json!({"path": file_str, "head": 1})),
        ("list_directory", json!({"path": root_str})),
        // planmux offers roots to its downstreams; without a host that has roots, the
        // server keeps the folder from its command line, as it does directly.
        ("list_allowed_directories", json!({})),
    ] {
        let via = proxy
            .client
            .call_tool(call(&format!("fs__{tool}"), args.clone()))
            .await?;
        let orig = direct.call_tool(call(tool, args.clone())).await?;
        assert_eq!(json(&via), json(&orig), "{tool} {args}");
    }
    let read = proxy
        .client
        .call_tool(call("fs__read_text_file", json!({"path": file_str})))
        .await?;
    assert_eq!(read.structured_content, Some(json!({"content": content})));

    // Outside the allowed folder: the server's own refusal comes back unchanged.
    let outside = json!({"path": "/etc/hostname"});
    let via = proxy
        .client
        .call_tool(call("fs__read_text_file", outside.clone()))
        .await?;
    let orig = direct.call_tool(call("read_text_file", outside)).await?;
    assert_eq!(via.is_error, Some(true), "{}", json(&via));
    assert_eq!(json(&via), json(&orig));
    drop(direct);
    Ok(())
}

#[tokio::test]
async fn memory_create_entities_then_read_graph() -> R {
    let _t = Timer::start("memory_create_entities_then_read_graph");
    let dir = tempfile::tempdir()?;
    let store = dir.path().join("memory.jsonl");
    let store_str = store.to_string_lossy().into_owned();
    let script = entry(MEMORY);
    let extra = format!("env = {{ MEMORY_FILE_PATH = {} }}", toml_str(&store_str));
    let proxy = start(&stdio_server("memory", node(), &[&script], &extra)).await?;

    let entities = json!({"entities": [
        {"name": "planmux", "entityType": "project", "observations": ["proxies MCP servers", "written in Rust"]},
        {"name": "server-memory", "entityType": "server", "observations": ["stores a knowledge graph"]},
    ]});
    let created = proxy
        .client
        .call_tool(call("memory__create_entities", entities))
        .await?;
    assert_ne!(created.is_error, Some(true), "{}", json(&created));
    let related = proxy
        .client
        .call_tool(call("memory__create_relations", json!({"relations": [{"from": "planmux", "to": "server-memory", "relationType": "proxies"}]})))
        .await?;
    assert_ne!(related.is_error, Some(true), "{}", json(&related));

    let graph = proxy
        .client
        .call_tool(call("memory__read_graph", json!({})))
        .await?;
    assert_ne!(graph.is_error, Some(true), "{}", json(&graph));
    let structured = graph
        .structured_content
        .clone()
        .unwrap_or_else(|| serde_json::from_str(&text(&graph)).unwrap_or(Value::Null));
    let names: Vec<&str> = structured["entities"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, vec!["planmux", "server-memory"], "{structured:#}");
    assert_eq!(
        structured["entities"][0]["observations"],
        json!(["proxies MCP servers", "written in Rust"])
    );
    assert_eq!(
        structured["relations"][0]["relationType"],
        json!("proxies"),
        "{structured:#}"
    );
    assert!(
        store.is_file(),
        "server-memory did not write its store where MEMORY_FILE_PATH (set through planmux's env) said"
    );

    // A direct server on the same store reads the same graph.
    let direct = direct_mirror(node(), &[&script], &[("MEMORY_FILE_PATH", &store_str)]).await?;
    let direct_graph = direct.call_tool(call("read_graph", json!({}))).await?;
    assert_eq!(json(&graph), json(&direct_graph));
    let found = proxy
        .client
        .call_tool(call("memory__search_nodes", json!({"query": "Rust"})))
        .await?;
    assert!(
        text(&found).contains("planmux")
            || found
                .structured_content
                .as_ref()
                .is_some_and(|v| v.to_string().contains("planmux")),
        "{}",
        json(&found)
    );
    // Its knowledge-graph resource passes through, and reads as it does directly.
    let graph_uri = "memory://knowledge-graph";
    let listed = proxy.client.list_all_resources().await?;
    assert!(listed.iter().any(|r| r.uri == graph_uri), "{listed:?}");
    let params = rmcp::model::ReadResourceRequestParams::new(graph_uri);
    let via = proxy.client.read_resource(params.clone()).await?;
    let orig = direct.read_resource(params).await?;
    assert_eq!(serde_json::to_value(&via)?, serde_json::to_value(&orig)?);
    drop(direct);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// include / exclude on a real server
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn include_and_exclude_filter_a_real_servers_tools() -> R {
    let _t = Timer::start("include_and_exclude_filter_a_real_servers_tools");
    let include = ["get-*", "echo", "trigger-long-*"];
    let exclude = ["get-env", "*-image", "*-roots-*"];
    let list = |globs: &[&str]| {
        globs
            .iter()
            .map(|g| toml_str(g))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let filters = format!(
        "include = [{}]\nexclude = [{}]",
        list(&include),
        list(&exclude)
    );
    let script = entry(EVERYTHING);
    let proxy = start(&format!(
        "{}{}",
        stdio_server("filtered", node(), &[&script], &filters),
        stdio_server("excluded_only", node(), &[&script], "exclude = [\"*\"]")
    ))
    .await?;
    let direct = direct_mirror(node(), &[&script], &[]).await?;

    let expected_of = |all: &[String]| {
        let mut names: Vec<String> = all
            .iter()
            .filter(|n| {
                include.iter().any(|g| support::glob_match(g, n))
                    && !exclude.iter().any(|g| support::glob_match(g, n))
            })
            .map(|n| format!("filtered__{n}"))
            .collect();
        names.sort();
        names
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let (got, expected) = loop {
        let all: Vec<String> = direct
            .list_all_tools()
            .await?
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        let expected = expected_of(&all);
        let mut got: Vec<String> = proxy.tool_names().await?;
        got.retain(|name| !OWN_TOOLS.contains(&name.as_str()));
        got.sort();
        if got == expected || Instant::now() > deadline {
            break (got, expected);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        expected.len() >= 5,
        "the filters should keep several tools: {expected:?}"
    );
    assert!(
        expected.contains(&"filtered__echo".to_string())
            && !expected
                .iter()
                .any(|n| n.contains("get-env") || n.contains("image"))
    );
    assert_eq!(got, expected, "include {include:?} / exclude {exclude:?}");

    // A kept tool works; an excluded one is unknown to planmux.
    let echoed = proxy
        .client
        .call_tool(call("filtered__echo", json!({"message": "kept"})))
        .await?;
    assert_eq!(text(&echoed), "Echo: kept");
    let err = proxy
        .client
        .call_tool(call("filtered__get-env", json!({})))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("unknown tool"),
        "an excluded tool was callable: {err}"
    );
    drop(direct);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Plans across a real server
// ---------------------------------------------------------------------------------------

/// The executor's plan shapes against server-everything, whose long-running operation
/// really sleeps: a fan-out whose branches overlap, a dependent step fed by references,
/// and a race whose loser is cancelled downstream.
#[tokio::test]
async fn plans_run_across_server_everything() -> R {
    let _t = Timer::start("plans_run_across_server_everything");
    let proxy = start(&everything_config("")).await?;
    let sleep = |s: f64| json!({"tool": "everything__trigger-long-running-operation", "args": {"duration": s, "steps": 2}});
    let mut a = sleep(0.6);
    a["id"] = json!("a");
    let mut b = sleep(0.6);
    b["id"] = json!("b");
    let mut c = sleep(0.6);
    c["id"] = json!("c");
    let plan = json!({"steps": [a, b, c,
        {"id": "join", "tool": "everything__echo", "args": {"message": "a said: ${a}; c said: ${c}"}, "depends_on": ["b"]}
    ], "outputs": ["join"]});
    let result = proxy.client.call_tool(call(PLAN_TOOL, plan)).await?;
    let s = result.structured_content.clone().unwrap_or_default();
    assert_eq!(s["status"], "succeeded", "{s:#}");
    let echoed = s["outputs"]["join"].as_str().unwrap_or_default();
    assert!(
        echoed.contains("a said: Long running operation completed"),
        "{echoed}"
    );

    // The three sleeps overlapped: each started before any of the others finished.
    let run_id = s["run_id"].as_str().unwrap_or_default();
    let record = proxy
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(format!(
            "planmux://runs/{run_id}"
        )))
        .await?;
    let Some(rmcp::model::ResourceContents::TextResourceContents { text: record, .. }) =
        record.contents.first()
    else {
        anyhow::bail!("no record");
    };
    let record: Value = serde_json::from_str(record)?;
    let span = |i: usize| {
        let step = &record["steps"][i];
        let start = step["started_ms"].as_f64().unwrap_or_default();
        (
            start,
            start + step["duration_ms"].as_f64().unwrap_or_default(),
        )
    };
    let spans = [span(0), span(1), span(2)];
    let first_end = spans.iter().map(|s| s.1).fold(f64::MAX, f64::min);
    assert!(
        spans.iter().all(|s| s.0 < first_end),
        "fan-out did not overlap: {spans:?}"
    );
    assert!(span(3).0 >= span(1).1, "join waited for b");

    // A race: the quick echo wins, the long operation is cancelled.
    let race = json!({"strategy": "competitive", "steps": [
        {"id": "slow", "tool": "everything__trigger-long-running-operation", "args": {"duration": 20, "steps": 2}},
        {"id": "quick", "tool": "everything__echo", "args": {"message": "first"}}
    ]});
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        proxy.client.call_tool(call(PLAN_TOOL, race)),
    )
    .await??;
    let s = result.structured_content.unwrap_or_default();
    assert_eq!(
        (s["winner"].clone(), s["steps"]["slow"]["status"].clone()),
        (json!("quick"), json!("cancelled")),
        "{s:#}"
    );
    Ok(())
}

/// A 9 MB file comes back from server-filesystem twice (text and structuredContent), an
/// answer past rmcp's 16 MiB line limit: it must arrive whole, not time out.
#[test]
fn filesystem_reads_a_9_mb_file_through_planmux() -> R {
    let _t = Timer::start("filesystem_reads_a_9_mb_file_through_planmux");
    let root = tempfile::tempdir()?;
    let root_path = std::fs::canonicalize(root.path())?;
    let root_str = root_path.to_string_lossy().into_owned();
    let file = root_path.join("big.txt");
    let line = "0123456789abcdef".repeat(8) + "\n";
    std::fs::write(&file, line.repeat(9_000_000 / line.len()))?;
    let script = entry(FILESYSTEM);
    let config = stdio_server("fs", node(), &[&script, &root_str], "");
    let mut raw = common::RawProxy::start(&config)?;
    raw.exchange(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#)?;
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
    let request = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "fs__read_text_file", "arguments": {"path": file.to_string_lossy()}}});
    let reply = raw.exchange(&request.to_string())?;
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        text.len(),
        std::fs::metadata(&file)?.len() as usize,
        "{}",
        &reply.to_string()[..300.min(reply.to_string().len())]
    );
    raw.finish()?;
    Ok(())
}

/// The official Python SDK (in its default, 2026-07-28, and legacy session modes) and
/// the TypeScript SDK as remote hosts of `planmux serve --http`, with a bearer token; a
/// wrong or missing token is refused.
#[tokio::test]
async fn the_python_and_typescript_sdks_use_the_http_front_with_a_token() -> anyhow::Result<()> {
    let python = support::python();
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("servers.toml");
    // server-everything too: its tools carry a field rmcp does not model (`execution`).
    std::fs::write(
        &config,
        format!(
            "[http]\ntokens = [\"${{PLANMUX_TEST_TOKEN}}\"]\n\n[servers.weather]\nbuiltin = \"weather\"\n\n[servers.chaos]\nbuiltin = \"chaos\"\n\n{}",
            everything_config("")
        ),
    )?;
    let token = "interop-token-0123456789";
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut server = tokio::process::Command::new(common::bin())
        .args(["serve", "--http", &format!("127.0.0.1:{port}"), "--config"])
        .arg(&config)
        .env("PLANMUX_TEST_TOKEN", token)
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let health = format!("127.0.0.1:{port}");
    let mut up = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(&health).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    anyhow::ensure!(up, "planmux serve --http did not listen on {health}");
    let script = common::interop_dir().join("python_http.py");
    for mode in ["auto", "legacy"] {
        let out = tokio::process::Command::new(&python)
            .arg(&script)
            .args([
                "--url",
                &format!("http://127.0.0.1:{port}/mcp"),
                "--token",
                token,
            ])
            .args(["--mode", mode])
            .output()
            .await?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let summary: Value = serde_json::from_str(stdout.trim()).map_err(|e| {
            anyhow::anyhow!(
                "{mode}: {e}: {stdout} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        assert!(out.status.success(), "{mode}: {summary}");
        let tools = summary["tools"].as_array().cloned().unwrap_or_default();
        assert!(
            tools.iter().any(|t| t == "execute_plan"),
            "{mode}: {summary}"
        );
        assert_eq!(
            summary["plan"]["outputs"]["names"],
            serde_json::json!(["Oslo", "Lima"]),
            "{mode}: {summary}"
        );
        assert!(
            summary["echo"].to_string().contains("over http"),
            "{mode}: {summary}"
        );
    }
    // The TypeScript SDK too (tests/interop/ts_http.mjs).
    let url = format!("http://127.0.0.1:{port}/mcp");
    for (token, works) in [(token, true), ("not-the-token-0123456789", false)] {
        let out = tokio::process::Command::new("node")
            .arg(common::interop_dir().join("ts_http.mjs"))
            .args([&url, token])
            .current_dir(common::interop_dir())
            .output()
            .await?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let summary: Value = serde_json::from_str(stdout.trim()).map_err(|e| {
            anyhow::anyhow!("ts: {e}: {stdout} {}", String::from_utf8_lossy(&out.stderr))
        })?;
        assert_eq!(out.status.success(), works, "ts: {summary}");
        if works {
            assert_eq!(
                summary["plan"]["outputs"]["names"],
                serde_json::json!(["Oslo", "Lima"]),
                "ts: {summary}"
            );
            assert!(
                summary["echo"].to_string().contains("over http"),
                "ts: {summary}"
            );
            assert_eq!(
                summary["execution"],
                serde_json::json!({"taskSupport": "forbidden"}),
                "the tool fields rmcp does not model reach HTTP hosts too: {summary}"
            );
        }
    }
    // Without the token, the SDK is refused.
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .args([
            "--url",
            &format!("http://127.0.0.1:{port}/mcp"),
            "--mode",
            "legacy",
        ])
        .output()
        .await?;
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    server.kill().await?;
    Ok(())
}

/// The specification revisions whose frozen requirement sets the suite runs.
const REVISIONS: [&str; 2] = ["2025-11-25", "2026-07-28"];

/// The official conformance suite's server scenarios (its 0.2 line, the npm alias
/// `conformance-next`, on the Node 22 the npm package `node` provides), each revision's
/// requirement set (and, unscored, the tasks extension's and the pending ones), run against
/// its fixture server (planmux's built-in `conformance` demo, written from the scenarios)
/// directly over HTTP, and behind `planmux serve --http` with the fixture as planmux's
/// server in both eras' ways: a built-in (a line connection: raw calls) and over HTTP
/// (rmcp's typed path). Every scenario that passes directly passes through planmux in
/// both; each revision's required scenarios all pass directly but the README's listed
/// few (server-stateless: two diagnostic tools the fixture does not have).
#[tokio::test]
async fn the_conformance_server_scenarios_pass_through_planmux_as_directly() -> R {
    let suite = ConformanceSuite::next()?;
    let dir = tempfile::tempdir()?;
    let fixture = Listening::start(&["demo", "conformance", "--http"], &[]).await?;
    let line = dir.path().join("line.toml");
    let http = dir.path().join("http.toml");
    std::fs::write(
        &line,
        "[servers.conformance]\nbuiltin = \"conformance\"\nnamespace = false\n",
    )?;
    std::fs::write(
        &http,
        format!(
            "[servers.conformance]\nurl = \"{}\"\nnamespace = false\n",
            fixture.url()
        ),
    )?;
    let mut through = Vec::new();
    for config in [&line, &http] {
        let config = config.to_string_lossy().into_owned();
        through.push(Listening::start(&["serve", "--http"], &["--config", &config]).await?);
    }
    let mut differences = Vec::new();
    for revision in REVISIONS {
        let direct = suite.requirements(&fixture.url(), revision).await?;
        assert!(direct.len() >= 30, "{revision}: {direct:?}");
        let failing: Vec<&String> = direct
            .iter()
            .filter(|(scenario, passed)| !passed && !fails_directly(scenario))
            .map(|(scenario, _)| scenario)
            .collect();
        assert!(
            failing.is_empty(),
            "{revision}: fail against the fixture directly: {failing:?}"
        );
        for (planmux, way) in through.iter().zip(["a built-in", "an HTTP server"]) {
            let proxied = suite.requirements(&planmux.url(), revision).await?;
            for (scenario, passed) in &direct {
                let there = proxied.iter().find(|(s, _)| s == scenario);
                let through = there.is_some_and(|(_, p)| *p);
                if *passed && !through {
                    differences.push(format!("{revision} {scenario} with {way}"));
                }
            }
        }
    }
    assert!(
        differences.is_empty(),
        "pass directly, not through planmux: {differences:#?}"
    );
    Ok(())
}

/// Whether the fixture may fail `scenario` directly: `server-stateless` asks for two
/// diagnostic tools it does not have (`test_streaming_elicitation`, `test_logging_tool`);
/// the pending scenarios (run, never scored) check drafts.
fn fails_directly(scenario: &str) -> bool {
    const PENDING: [&str; 3] = [
        "json-schema-2020-12",
        "http-header-validation",
        "http-custom-header-server-validation",
    ];
    scenario == "server-stateless" || PENDING.contains(&scenario)
}

/// The suite's client scenarios of each revision against planmux's downstream side: its
/// test server is planmux's one server, and a host (tests/interop/conformance_client.py,
/// the Python SDK) drives planmux, once speaking 2025-11-25 and once 2026-07-28 (so both
/// eras meet on each side): every one passes, a 2025-11-25 test server's requests during a
/// call reaching the 2026-07-28 host as its call's `input_required`. The auth scenarios
/// are the next test's.
#[tokio::test]
async fn the_conformance_client_scenarios_pass_against_planmux_downstream_side() -> R {
    use futures::StreamExt as _;
    let suite = ConformanceSuite::next()?;
    let mut runs = Vec::new();
    for revision in REVISIONS {
        let listed = suite
            .run(&["list", "--requirements", revision])
            .await?
            .report;
        let scenarios: Vec<String> = listed
            .lines()
            .skip_while(|line| !line.starts_with("Client scenarios"))
            .skip(1)
            .take_while(|line| line.starts_with("  - "))
            .filter_map(|line| line.trim_start_matches("  - ").split_whitespace().next())
            .filter(|scenario| !scenario.starts_with("auth/"))
            .map(str::to_owned)
            .collect();
        assert!(scenarios.len() >= 4, "{revision}: {listed}");
        for scenario in scenarios {
            for host in ["legacy", "auto"] {
                runs.push((revision, scenario.clone(), host));
            }
        }
    }
    let client = conformance_client();
    let verdicts: Vec<_> = futures::stream::iter(runs)
        .map(|(revision, scenario, host)| {
            let (suite, client) = (&suite, &client);
            async move {
                let args = [
                    "client",
                    "--command",
                    client,
                    "--scenario",
                    &scenario,
                    "--spec-version",
                    revision,
                    "--force",
                ];
                let verdict = suite.run_with(&args, &[("PLANMUX_HOST_MODE", host)]).await;
                verdict.map(|v| (revision, scenario.clone(), host, v))
            }
        })
        .buffer_unordered(3)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<_>>()?;
    let mut wrong = Vec::new();
    for (revision, scenario, host, verdict) in &verdicts {
        let passed = verdict.exited_ok && verdict.report.contains("OVERALL: PASSED");
        if !passed {
            wrong.push(format!(
                "{scenario} at {revision}, host {host}:\n{}",
                verdict.report
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    Ok(())
}

/// What the suite's `--spec-version` is for an extension scenario: none (extensions are not
/// on the specification's timeline; the suite runs them at the 2025-11-25 wire).
const EXTENSION: &str = "extension";

/// Auth scenarios planmux fails on purpose, each with why, as (scenario, wire): the test
/// checks that each still fails, so that the list stays true.
const AUTH_EXPECTED_FAILURES: &[(&str, &str, &str)] = &[
    (
        "auth/dpop",
        EXTENSION,
        "DPoP-bound tokens (SEP-1932): not in scope (rmcp has no DPoP)",
    ),
    (
        "auth/dpop-nonce",
        EXTENSION,
        "DPoP nonces (SEP-1932): not in scope (rmcp has no DPoP)",
    ),
    (
        "auth/wif-jwt-bearer",
        EXTENSION,
        "a workload identity's JWT-bearer grant: not in scope",
    ),
    (
        "auth/client-credentials-jwt",
        EXTENSION,
        "client credentials by private_key_jwt: not in scope (client_secret only)",
    ),
    (
        "auth/enterprise-managed-authorization",
        EXTENSION,
        "enterprise-managed authorization (ID-JAG token exchange): not in scope",
    ),
];

/// Why planmux is expected to fail `scenario` at `wire`, if it is.
fn auth_expected_failure(scenario: &str, wire: &str) -> Option<&'static str> {
    AUTH_EXPECTED_FAILURES
        .iter()
        .find(|(s, w, _)| *s == scenario && *w == wire)
        .map(|(_, _, why)| *why)
}

/// The suite's auth scenarios (its 0.2 line, the npm alias `conformance-next`) against
/// planmux as the OAuth client of its server: tests/interop/conformance_client.py writes
/// the sign-in keys the scenario is about, runs `planmux login` with a headless browser
/// (tests/interop/headless_browser.py; the suite's authorization server approves at once)
/// before serving and again when a call says the server needs a sign-in, and calls the
/// server's tools through `planmux serve`. Every scenario on the specification's timeline
/// runs at the 2025-11-25 wire and at the 2026-07-28 wire (`--force`: those introduced in
/// 2026-07-28 also run at 2025-11-25, where planmux can finish them), the 2025-03-26
/// ones at theirs, the extensions once. Every one passes but the expected failures
/// above, and each of those still fails.
#[tokio::test]
async fn the_conformance_auth_scenarios_pass_against_planmux_downstream_side() -> R {
    use futures::StreamExt as _;
    let suite = ConformanceSuite::next()?;
    let listed = suite.run(&["list", "--client"]).await?.report;
    // "  - auth/NAME [2025-11-25,2026-07-28]": the scenario and the versions it is in.
    let mut runs = Vec::new();
    for line in listed.lines() {
        let Some((scenario, versions)) = line
            .trim_start_matches("  - ")
            .split_once(" [")
            .filter(|(s, _)| s.starts_with("auth/"))
        else {
            continue;
        };
        let wires: &[&str] = match versions.trim_end_matches(']') {
            EXTENSION => &[EXTENSION],
            "2025-03-26" => &["2025-03-26"],
            _ => &["2025-11-25", "2026-07-28"],
        };
        runs.extend(wires.iter().map(|wire| (scenario.to_owned(), *wire)));
    }
    assert!(runs.len() >= 56, "{listed}");
    for (scenario, wire, _) in AUTH_EXPECTED_FAILURES {
        assert!(
            runs.iter().any(|(s, w)| s == scenario && w == wire),
            "{scenario} is no longer in the suite"
        );
    }
    let client = conformance_client();
    let verdicts: Vec<(String, &str, Verdict)> = futures::stream::iter(runs)
        .map(|(scenario, wire)| {
            let (suite, client) = (&suite, &client);
            async move {
                let mut args = vec!["client", "--command", client, "--scenario", &scenario];
                if wire != EXTENSION {
                    args.extend(["--spec-version", wire, "--force"]);
                }
                let verdict = suite.run(&args).await;
                verdict.map(|v| (scenario.clone(), wire, v))
            }
        })
        .buffer_unordered(3)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<_>>()?;
    let mut wrong = Vec::new();
    for (scenario, wire, verdict) in &verdicts {
        let passed = verdict.exited_ok && verdict.report.contains("OVERALL: PASSED");
        let skipped = verdict.report.lines().any(|l| l.starts_with("SKIPPED"));
        match auth_expected_failure(scenario, wire) {
            _ if skipped => wrong.push(format!(
                "{scenario} at {wire} was skipped:\n{}",
                verdict.report
            )),
            None if !passed => {
                wrong.push(format!("{scenario} at {wire} fails:\n{}", verdict.report))
            }
            Some(why) if passed => wrong.push(format!(
                "{scenario} at {wire} passes: take it off the expected failures ({why})"
            )),
            _ => {}
        }
    }
    let passed = verdicts
        .iter()
        .filter(|(s, w, _)| auth_expected_failure(s, w).is_none())
        .count();
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    eprintln!(
        "conformance auth runs: {passed} pass, and the {} expected failures still fail",
        verdicts.len() - passed
    );
    Ok(())
}

/// The command the suite runs as its client under test: the Python SDK host of
/// tests/interop/conformance_client.py driving planmux.
fn conformance_client() -> String {
    format!(
        "{} {} {}",
        support::python().display(),
        common::interop_dir()
            .join("conformance_client.py")
            .display(),
        common::bin()
    )
}

/// The installed conformance suite.
struct ConformanceSuite {
    node: std::path::PathBuf,
    script: std::path::PathBuf,
}

/// One scenario's verdict and the suite's whole report.
struct Verdict {
    /// The suite exited 0: nothing failed, warned, timed out, or was skipped.
    exited_ok: bool,
    report: String,
}

impl ConformanceSuite {
    /// The suite's 0.2 line (npm alias `conformance-next`, tests/interop/package.json),
    /// which has both revisions' requirement sets.
    fn next() -> anyhow::Result<Self> {
        Self::installed("conformance-next")
    }

    fn installed(package: &str) -> anyhow::Result<Self> {
        let interop = common::interop_dir();
        let suite = Self {
            node: interop.join("node_modules/.bin/node"),
            script: interop
                .join("node_modules")
                .join(package)
                .join("dist/index.js"),
        };
        anyhow::ensure!(
            suite.node.exists() && suite.script.exists(),
            "the conformance suite is not installed: run scripts/test (npm ci --prefix tests/interop)"
        );
        Ok(suite)
    }

    /// Each scenario of `revision`'s requirement set (and the unscored ones it runs) against
    /// the server at `url`, and whether it passed.
    async fn requirements(&self, url: &str, revision: &str) -> anyhow::Result<Vec<(String, bool)>> {
        let report = self
            .run(&["server", "--url", url, "--requirements", revision])
            .await?
            .report;
        let mut seen = Vec::new();
        for line in report.lines() {
            let (passed, rest) = match line.trim_start().split_at_checked(4) {
                Some(("✓ ", rest)) => (true, rest),
                Some(("✗ ", rest)) => (false, rest),
                _ => continue,
            };
            let scenario = rest.split([':', ' ']).next().unwrap_or_default().to_owned();
            if !seen.iter().any(|(s, _): &(String, bool)| *s == scenario) {
                seen.push((scenario, passed));
            }
        }
        Ok(seen)
    }

    /// Runs the suite; passed when its summary says nothing failed.
    async fn run(&self, args: &[&str]) -> anyhow::Result<Verdict> {
        self.run_with(args, &[]).await
    }

    /// [`Self::run`] with more environment for the client under test.
    async fn run_with(&self, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<Verdict> {
        let run = tokio::process::Command::new(&self.node)
            .arg(&self.script)
            .args(args)
            .envs(env.iter().copied())
            // The suite sets it for the scenarios that have one; one of ours must not leak.
            .env_remove("MCP_CONFORMANCE_CONTEXT")
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(std::time::Duration::from_secs(120), run).await??;
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(Verdict {
            exited_ok: out.status.success(),
            report,
        })
    }
}

/// planmux listening on a free loopback port (`ARGS ADDR MORE`), stopped when dropped.
/// A secret in an HTTP server's URL (its query) stays out of what the host and the model
/// read when the server goes away mid-session: libraries quote the URL they failed on.
#[tokio::test]
async fn a_url_secret_stays_out_of_the_error_when_an_http_server_goes_away() -> R {
    let fixture = Listening::start(&["demo", "metrics", "--http"], &[]).await?;
    let config = format!(
        "[servers.m]\nurl = \"{}?api_key=QSECRET222\"\n",
        fixture.url()
    );
    let proxy = start(&config).await?;
    let first = proxy
        .client
        .call_tool(call("m__list_metrics", json!({})))
        .await?;
    assert_ne!(first.is_error, Some(true), "{}", text(&first));
    drop(fixture);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let plan = json!({"steps": [{"id": "a", "tool": "m__list_metrics"}]});
        for answer in [
            proxy
                .client
                .call_tool(call("m__list_metrics", json!({})))
                .await,
            proxy.client.call_tool(call("execute_plan", plan)).await,
        ] {
            let shown = match answer {
                Ok(result) => serde_json::to_string(&result)?,
                Err(error) => error.to_string(),
            };
            assert!(!shown.contains("QSECRET222"), "{shown}");
            seen.push(shown);
        }
    }
    assert!(
        seen.iter().any(|s| s.contains("'m'")),
        "the failure names the server: {seen:?}"
    );
    Ok(())
}

/// `value` without the clock times server-everything writes into its dynamic resources
/// ("… created at 10:01:27 PM"): two calls that straddle a second differ there.
fn timeless(value: Value) -> Value {
    match value {
        Value::String(mut text) => {
            if let Some(at) = text.find(" created at ") {
                text.truncate(at + " created at".len());
            }
            Value::String(text)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(timeless).collect()),
        Value::Object(fields) => fields
            .into_iter()
            .map(|(key, field)| (key, timeless(field)))
            .collect(),
        other => other,
    }
}

/// `planmux schema plan` and `planmux schema config` accept what planmux accepts: every
/// example plan, the seed dialects (a bare array, a plan as JSON text, `PARALLEL`), the
/// repository's configs; checked by the Python `jsonschema` package (the MCP SDK's).
#[tokio::test]
async fn the_printed_schemas_accept_every_example() -> R {
    let python = support::python();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir()?;
    let schema = |what: &str| -> anyhow::Result<std::path::PathBuf> {
        let out = std::process::Command::new(common::bin())
            .args(["schema", what])
            .output()?;
        anyhow::ensure!(out.status.success(), "planmux schema {what} failed");
        let path = dir.path().join(format!("{what}.json"));
        std::fs::write(&path, &out.stdout)?;
        Ok(path)
    };
    let mut plans: Vec<std::path::PathBuf> = std::fs::read_dir(root.join("examples/plans"))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    let dialects = [
        json!([{"_tool": "chaos__echo", "message": "hi", "_outputPath": "†state.said"}]),
        json!({"plan": "{\"steps\": [{\"tool\": \"chaos__echo\"}]}", "inputs": {"a": 1}}),
        json!({"planType": "PARALLEL", "steps": [{"id": "a", "serverId": "chaos", "toolName": "echo", "parameters": {}, "dependencies": []}]}),
        json!({"strategy": "CONDITIONAL", "on_error": "fail-fast", "steps": [{"tool": "chaos__echo"}]}),
        json!({"mode": "EAGER", "outputs": "a", "steps": [{"id": "a", "tool": "chaos__echo"}]}),
    ];
    for (i, plan) in dialects.iter().enumerate() {
        let path = dir.path().join(format!("dialect-{i}.json"));
        std::fs::write(&path, plan.to_string())?;
        plans.push(path);
    }
    let check = r#"
import json, sys, tomllib
from jsonschema import Draft202012Validator
schema = json.load(open(sys.argv[1]))
Draft202012Validator.check_schema(schema)
validator = Draft202012Validator(schema)
bad = []
for path in sys.argv[2:]:
    doc = tomllib.load(open(path, "rb")) if path.endswith(".toml") else json.load(open(path))
    errors = [e.message for e in validator.iter_errors(doc)]
    if errors:
        bad.append(f"{path}: {errors[:3]}")
print("\n".join(bad))
sys.exit(1 if bad else 0)
"#;
    let mut configs = vec![root.join("servers.toml")];
    for entry in std::fs::read_dir(root.join("examples"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            configs.push(path);
        }
    }
    for (what, docs) in [("plan", plans), ("config", configs)] {
        let out = std::process::Command::new(&python)
            .args(["-c", check])
            .arg(schema(what)?)
            .args(&docs)
            .output()?;
        assert!(
            out.status.success(),
            "planmux schema {what} refuses: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
