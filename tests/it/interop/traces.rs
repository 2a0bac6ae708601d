//! `[telemetry] otlp_endpoint` (DESIGN §15): the spans planmux exports over OTLP/HTTP,
//! received by a collector stand-in that decodes them with the official protobuf
//! definitions (tests/interop/otlp_receiver.py, opentelemetry-proto from PyPI).

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::front_auth::Session;
use super::support::{Listening, free_port, python};
use crate::common;

type R = anyhow::Result<()>;

/// The host's trace, as its `traceparent` names it.
const HOST_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const HOST_SPAN: &str = "00f067aa0ba902b7";

/// The collector stand-in on a free port, writing the spans it decodes to `out`; killed
/// on drop.
fn receiver(out: &std::path::Path) -> anyhow::Result<(u16, tokio::process::Child)> {
    let port = free_port();
    let child = tokio::process::Command::new(python())
        .arg(common::interop_dir().join("otlp_receiver.py"))
        .arg(port.to_string())
        .arg(out)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    Ok((port, child))
}

/// The spans received so far, once `enough` holds of them (within 30 s).
async fn received(
    path: &std::path::Path,
    enough: impl Fn(&[Value]) -> bool,
) -> anyhow::Result<Vec<Value>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let spans: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if enough(&spans) {
            return Ok(spans);
        }
        anyhow::ensure!(Instant::now() < deadline, "spans received: {spans:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A host's plan is one trace continuing the host's: the host's request, the plan inside
/// it, each step (each item of a loop) inside the plan, each step's call to its server
/// inside the step, with tools, servers, statuses and attempts; a direct call's server is
/// sent that call's span as `traceparent` in `_meta` (over HTTP, as the header too); a
/// failing step's span says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_is_one_trace_of_its_steps_and_calls() -> R {
    let dir = tempfile::tempdir()?;
    let out = dir.path().join("spans.jsonl");
    let (port, _receiver) = receiver(&out)?;
    let remote = Listening::start(&["demo", "chaos", "--http"], &[]).await?;
    let config = dir.path().join("servers.toml");
    std::fs::write(
        &config,
        format!(
            "[telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}\"\n\n\
             [servers.chaos]\nbuiltin = \"chaos\"\n\n[servers.weather]\nbuiltin = \"weather\"\n\n\
             [servers.remote]\nurl = \"{}\"\n",
            remote.url()
        ),
    )?;
    let config = config.to_string_lossy().into_owned();
    let planmux = Listening::start(&["serve", "--http"], &["--config", &config]).await?;
    let session = Session::open(&planmux.url(), "no-token-needed-on-loopback").await?;
    let traceparent = format!("00-{HOST_TRACE}-{HOST_SPAN}-01");
    let meta = json!({"traceparent": traceparent});

    let plan = json!({"name": "execute_plan", "_meta": meta, "arguments": {"steps": [
        {"id": "w", "tool": "weather__get_weather", "args": {"location": "Oslo"}},
        {"id": "each", "tool": "chaos__echo", "foreach": [1, 2], "args": {"n": "$item", "after": "$ref:w"}},
        {"id": "bad", "tool": "chaos__fail", "args": {}}]}});
    let ran = session.ask("tools/call", plan).await?;
    assert_eq!(ran["structuredContent"]["status"], "partial", "{ran}");
    let echoed = session
        .ask(
            "tools/call",
            json!({"name": "chaos__echo", "_meta": meta, "arguments": {"x": 1}}),
        )
        .await?;
    let sent = echoed["_meta"]["planmux-demo/traceparent"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(sent.starts_with(&format!("00-{HOST_TRACE}-")), "{echoed}");
    // A server over HTTP gets it in `_meta` and as the `traceparent` header.
    let remote_echo = json!({"name": "remote__echo", "_meta": meta, "arguments": {"y": 2}});
    let echoed = session.ask("tools/call", remote_echo).await?;
    let in_meta = echoed["_meta"]["planmux-demo/traceparent"].as_str();
    let in_header = echoed["_meta"]["planmux-demo/traceparent-header"].as_str();
    assert!(in_meta.is_some() && in_meta == in_header, "{echoed}");
    let remote_sent = in_meta.unwrap_or_default().to_owned();

    let spans = received(&out, |spans| {
        spans
            .iter()
            .filter(|s| {
                s["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("tools/call"))
            })
            .count()
            >= 3
    })
    .await?;
    let named = |name: &'static str| spans.iter().filter(move |s| s["name"] == name);
    let one = |name: &'static str| -> anyhow::Result<&Value> {
        named(name)
            .next()
            .ok_or_else(|| anyhow::anyhow!("no span '{name}': {spans:#?}"))
    };
    for span in &spans {
        assert_eq!(span["trace_id"], HOST_TRACE, "{span}");
        assert_eq!(span["service"], "planmux");
    }
    let by_id: HashMap<&str, &Value> = spans
        .iter()
        .filter_map(|s| Some((s["span_id"].as_str()?, s)))
        .collect();
    let parent_name = |span: &Value| {
        by_id
            .get(span["parent_span_id"].as_str().unwrap_or_default())
            .and_then(|p| p["name"].as_str())
            .unwrap_or("none")
            .to_owned()
    };

    let host = one("tools/call execute_plan")?;
    assert_eq!(
        host["parent_span_id"], HOST_SPAN,
        "the host's span is its parent"
    );
    assert_eq!(host["kind"], 2, "server");
    let plan = one("execute_plan")?;
    assert_eq!(parent_name(plan), "tools/call execute_plan");
    assert_eq!(plan["attributes"]["planmux.status"], "partial");
    assert_eq!(plan["status"], 2, "a partial plan is an error");
    let step = one("step w")?;
    assert_eq!(parent_name(step), "execute_plan");
    assert_eq!(step["attributes"]["planmux.tool"], "weather__get_weather");
    assert_eq!(step["attributes"]["planmux.server"], "weather");
    assert_eq!(step["attributes"]["planmux.status"], "succeeded");
    assert_eq!(step["attributes"]["planmux.attempts"], 1);
    let call = one("call weather/get_weather")?;
    assert_eq!(parent_name(call), "step w");
    assert_eq!(call["kind"], 3, "client");
    for item in ["step each[0]", "step each[1]"] {
        let span = one(item)?;
        assert_eq!(parent_name(span), "execute_plan");
        let calls: Vec<_> = named("call chaos/echo")
            .filter(|c| c["parent_span_id"] == span["span_id"])
            .collect();
        assert_eq!(calls.len(), 1, "{item}'s call");
    }
    let bad = one("step bad")?;
    assert_eq!(
        (
            bad["attributes"]["planmux.status"].as_str(),
            bad["status"].as_i64()
        ),
        (Some("failed"), Some(2))
    );
    // The direct call: its server was sent the span of planmux's call to it.
    let direct = one("tools/call chaos__echo")?;
    assert_eq!(direct["parent_span_id"], HOST_SPAN);
    let sent_span = sent.split('-').nth(2).unwrap_or_default();
    let called = by_id
        .get(sent_span)
        .ok_or_else(|| anyhow::anyhow!("no span {sent_span}"))?;
    assert_eq!(called["name"], "call chaos/echo");
    assert_eq!(parent_name(called), "tools/call chaos__echo");
    let remote_span = remote_sent.split('-').nth(2).unwrap_or_default();
    let called = by_id
        .get(remote_span)
        .ok_or_else(|| anyhow::anyhow!("no span {remote_span}"))?;
    assert_eq!(called["name"], "call remote/echo");
    // Every span ended after it started.
    assert!(
        spans
            .iter()
            .all(|s| s["end"].as_u64() >= s["start"].as_u64())
    );
    let picture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/trace");
    std::fs::create_dir_all(&picture)?;
    std::fs::write(picture.join("plan-trace.svg"), waterfall(&spans, host))?;
    Ok(())
}

/// A stdio host's plain call, on the passthrough, is traced as on rmcp's path: the host's
/// request continuing the host's trace, the call to the server inside it, the server sent
/// that call's span. planmux flushes the spans as it exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_hosts_call_on_the_passthrough_is_traced() -> R {
    let dir = tempfile::tempdir()?;
    let out = dir.path().join("spans.jsonl");
    let (port, _receiver) = receiver(&out)?;
    let config = format!(
        "[telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}\"\n\n[servers.chaos]\nbuiltin = \"chaos\"\n"
    );
    let mut host = common::RawProxy::start(&config)?;
    host.list_tools()?;
    let traceparent = format!("00-{HOST_TRACE}-{HOST_SPAN}-01");
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "chaos__echo", "arguments": {"x": 1}, "_meta": {"traceparent": traceparent}}});
    let echoed = host.answer(&call.to_string())?;
    let sent = echoed["result"]["_meta"]["planmux-demo/traceparent"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(sent.starts_with(&format!("00-{HOST_TRACE}-")), "{echoed}");
    host.finish()?;
    let spans = received(&out, |spans| spans.len() >= 2).await?;
    let by_id: HashMap<&str, &Value> = spans
        .iter()
        .filter_map(|s| Some((s["span_id"].as_str()?, s)))
        .collect();
    let called = by_id
        .get(sent.split('-').nth(2).unwrap_or_default())
        .ok_or_else(|| anyhow::anyhow!("the span the server was sent: {spans:#?}"))?;
    assert_eq!(called["name"], "call chaos/echo");
    assert_eq!(called["attributes"]["planmux.server"], "chaos");
    let host_span = by_id
        .get(called["parent_span_id"].as_str().unwrap_or_default())
        .ok_or_else(|| anyhow::anyhow!("no parent: {spans:#?}"))?;
    assert_eq!(host_span["name"], "tools/call chaos__echo");
    assert_eq!(host_span["parent_span_id"], HOST_SPAN);
    assert_eq!(host_span["trace_id"], HOST_TRACE);
    Ok(())
}

/// The spans under `root` as a waterfall (README's picture of a plan's trace): a row per
/// span in start order, indented by depth, its bar where it ran, failures in red.
fn waterfall(spans: &[Value], root: &Value) -> String {
    fn walk<'a>(
        spans: &'a [Value],
        span: &'a Value,
        depth: usize,
        rows: &mut Vec<(&'a Value, usize)>,
    ) {
        rows.push((span, depth));
        let mut children: Vec<&Value> = spans
            .iter()
            .filter(|s| s["parent_span_id"] == span["span_id"])
            .collect();
        children.sort_by_key(|s| s["start"].as_u64());
        for child in children {
            walk(spans, child, depth + 1, rows);
        }
    }
    let mut rows = Vec::new();
    walk(spans, root, 0, &mut rows);
    let at = |span: &Value, key: &str| span[key].as_u64().unwrap_or_default() as f64;
    let t0 = at(root, "start");
    let total = (at(root, "end") - t0).max(1.0);
    let (label_w, bar_w, row_h) = (330.0, 520.0, 24.0);
    let height = row_h * rows.len() as f64 + 20.0;
    let width = label_w + bar_w + 90.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"monospace\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    for (i, (span, depth)) in rows.iter().enumerate() {
        let y = 10.0 + row_h * i as f64;
        let start = at(span, "start") - t0;
        let took = at(span, "end") - t0 - start;
        let x = label_w + bar_w * start / total;
        let w = (bar_w * took / total).max(1.0);
        let color = if span["status"] == 2 {
            "#d9534f"
        } else {
            "#4a90d9"
        };
        let name = span["name"].as_str().unwrap_or_default();
        let indent = 8.0 + 14.0 * *depth as f64;
        let (text_y, bar_y, bar_h) = (y + 15.0, y + 3.0, row_h - 6.0);
        let (ms, ms_x) = (took / 1e6, x + w + 4.0);
        svg += &format!(
            "<text x=\"{indent}\" y=\"{text_y}\">{name}</text>\n\
             <rect x=\"{x:.1}\" y=\"{bar_y}\" width=\"{w:.1}\" height=\"{bar_h}\" fill=\"{color}\"/>\n\
             <text x=\"{ms_x:.1}\" y=\"{text_y}\">{ms:.2} ms</text>\n"
        );
    }
    svg + "</svg>\n"
}

/// A collector that is down costs a call nothing: calls answer as ever, and the failed
/// export is a line in planmux's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_costs_only_a_log_line() -> R {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("servers.toml");
    // Nothing listens there.
    let nowhere = free_port();
    std::fs::write(
        &config,
        format!(
            "[telemetry]\notlp_endpoint = \"http://127.0.0.1:{nowhere}\"\n\n\
             [servers.chaos]\nbuiltin = \"chaos\"\n"
        ),
    )?;
    let port = free_port();
    let log = dir.path().join("stderr.log");
    let _planmux = tokio::process::Command::new(common::bin())
        .args(["serve", "--http", &format!("127.0.0.1:{port}"), "--config"])
        .arg(&config)
        .env_remove("PLANMUX_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .kill_on_drop(true)
        .spawn()?;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let deadline = Instant::now() + Duration::from_secs(30);
    let session = loop {
        match Session::open(&url, "no-token-needed-on-loopback").await {
            Ok(session) => break session,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e),
        }
    };
    for n in 0..5 {
        let call = json!({"name": "chaos__echo", "arguments": {"n": n}});
        let echoed = session.ask("tools/call", call).await?;
        assert_eq!(echoed["structuredContent"]["n"], n, "{echoed}");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(&log)?;
        if text.contains("BatchSpanProcessor.ExportError") {
            assert!(!text.contains("panicked"), "{text}");
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "no export error logged: {text}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
