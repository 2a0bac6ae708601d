//! Hostile input from outside, end to end: lines a host should never send, answers a
//! server should never give, listings that never end, and planmux being SIGKILLed. Each
//! case once froze, hung or silently dropped something.

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{self, alive, call, descendants, eventually, start};

type R = anyhow::Result<()>;

const RAW_INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

fn echo_call(id: u64, value: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"chaos__echo","arguments":{{"v":{value}}}}}}}"#
    )
}

/// Every host line with a readable id gets an answer: values serde refuses, nesting past
/// serde's default, a line over the limit; and a notification before `initialize` is
/// ignored rather than ending the session.
#[test]
fn hostile_host_lines_are_answered() -> R {
    let config = "[proxy]\nmax_message_bytes = 65536\n[servers.chaos]\nbuiltin = \"chaos\"\n";
    let mut raw = common::RawProxy::start(config)?;
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
    let init = raw.exchange(RAW_INIT)?;
    assert_eq!(init["id"], 1, "{init}");
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
    // Nested 129 deep: past serde's default limit, within planmux's.
    let deep = format!("{}7{}", "[".repeat(129), "]".repeat(129));
    let reply = raw.exchange(&echo_call(2, &deep))?;
    assert_eq!(reply["id"], 2, "{reply}");
    let mut inner = &reply["result"]["structuredContent"]["v"];
    for _ in 0..129 {
        inner = &inner[0];
    }
    assert_eq!(*inner, json!(7));
    let refused = [
        (3, "9".repeat(400), "number out of range"),
        (4, "1e400".to_string(), "number out of range"),
        (
            5,
            r#""\ud800""#.to_string(),
            "must be half of a surrogate pair",
        ),
        (
            6,
            format!("\"{}\"", "x".repeat(100_000)),
            "exceeds max_message_bytes (64.0 KiB)",
        ),
        (
            7,
            format!("{}1{}", "[".repeat(600), "]".repeat(600)),
            "nested too deeply",
        ),
    ];
    for (id, value, words) in refused {
        let reply = raw.exchange(&echo_call(id, &value))?;
        assert_eq!(reply["id"], id, "{reply}");
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(words), "{id}: {reply}");
    }
    let reply = raw.exchange(&echo_call(8, "true"))?;
    assert_eq!(reply["result"]["structuredContent"], json!({"v": true}));
    let status = raw.finish()?;
    assert!(status.success(), "{status}");
    Ok(())
}

/// A request for an MCP method whose params do not fit it is told what does not fit
/// (invalid params), whichever tool it names, not that the method is unknown.
#[test]
fn params_that_do_not_fit_their_method_are_named() -> R {
    let mut raw = common::RawProxy::start("[servers.chaos]\nbuiltin = \"chaos\"\n")?;
    raw.answer(RAW_INIT)?;
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
    let misfits = [
        (
            2,
            r#""tools/call","params":{"name":"execute_plan","arguments":[{"id":"a","tool":"chaos__echo"}]}"#,
            "invalid type: sequence, expected a map",
        ),
        (
            3,
            r#""tools/call","params":{"name":"chaos__echo","arguments":"x"}"#,
            "invalid type: string \"x\", expected a map",
        ),
        (4, r#""resources/read","params":{}"#, "missing field `uri`"),
    ];
    for (id, rest, words) in misfits {
        let reply = raw.answer(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{rest}}}"#))?;
        assert_eq!(reply["id"], id, "{reply}");
        assert_eq!(reply["error"]["code"], -32602, "{reply}");
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("params do not fit") && message.contains(words),
            "{id}: {reply}"
        );
    }
    let unknown = raw.answer(r#"{"jsonrpc":"2.0","id":5,"method":"tools/frobnicate"}"#)?;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let reply = raw.answer(&echo_call(6, "true"))?;
    assert_eq!(reply["result"]["structuredContent"], json!({"v": true}));
    assert!(raw.finish()?.success());
    Ok(())
}

/// A downstream answer over the limit fails its call at once, saying why, instead of
/// waiting for the call timeout; one under the (generous) default gets through.
#[test]
fn an_oversized_downstream_answer_fails_at_once() -> R {
    let config = "[proxy]\nmax_message_bytes = 1048576\ncall_timeout_ms = 600000\n[servers.chaos]\nbuiltin = \"chaos\"\n";
    let mut raw = common::RawProxy::start(config)?;
    raw.exchange(RAW_INIT)?;
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"chaos__bytes","arguments":{"n":2000000}}}"#;
    let reply = raw.exchange(call)?;
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("from server 'chaos' exceeds max_message_bytes (1.0 MiB)"),
        "{message}"
    );
    // In a plan, the step says planmux refused the answer, not that the server sent an
    // error.
    let plan = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_plan","arguments":{"steps":[{"id":"big","tool":"chaos__bytes","args":{"n":2000000}}]}}}"#;
    let reply = raw.exchange(plan)?;
    let error = reply["result"]["structuredContent"]["steps"]["big"]["error"].to_string();
    assert!(
        error.contains("planmux could not take the answer of server 'chaos'")
            && !error.contains("answered with an error"),
        "{reply}"
    );
    raw.finish()?;

    let mut raw = common::RawProxy::start("[servers.chaos]\nbuiltin = \"chaos\"\n")?;
    raw.exchange(RAW_INIT)?;
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"chaos__bytes","arguments":{"n":16777216}}}"#;
    let reply = raw.exchange(call)?;
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(text.len(), 16_777_216);
    raw.finish()?;
    Ok(())
}

/// A downstream answer nested deeper than max_nesting fails its call at once.
#[test]
fn a_too_deep_downstream_answer_fails_at_once() -> R {
    let config = "[proxy]\ncall_timeout_ms = 600000\n[servers.hostile]\nbuiltin = \"hostile\"\n";
    let mut raw = common::RawProxy::start(config)?;
    raw.exchange(RAW_INIT)?;
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
    let reply = raw.exchange(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hostile__nest","arguments":{"depth":1000}}}"#,
    )?;
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("nested too deeply"), "{message}");
    raw.finish()?;
    Ok(())
}

/// A 130-step chain where each step echoes the previous output nests its values past
/// serde's default 128 levels: it must run, not time out, and its answer must stay
/// parseable by hosts (serde_json's 128 levels): the output is cut below 64 levels, saying
/// so, as a size cut would.
#[test]
fn a_long_echo_chain_runs_past_serdes_nesting_limit() -> R {
    let config = "[servers.chaos]\nbuiltin = \"chaos\"\n";
    let mut raw = common::RawProxy::start(config)?;
    raw.exchange(RAW_INIT)?;
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
    let mut steps = vec![json!({"id": "s0", "tool": "chaos__echo", "args": {"v": 0}})];
    for i in 1..130 {
        steps.push(json!({"id": format!("s{i}"), "tool": "chaos__echo", "args": {"v": format!("$ref:s{}", i - 1)}}));
    }
    let plan = json!({"steps": steps, "outputs": ["s129"]});
    let request = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "execute_plan", "arguments": plan}});
    let reply = raw.exchange(&request.to_string())?;
    let result = &reply["result"]["structuredContent"];
    assert_eq!(result["status"], "succeeded", "{}", result["steps"]["s129"]);
    let mut inner = &result["outputs"]["s129"];
    let mut depth = 0;
    while let Some(next) = inner.get("v") {
        inner = next;
        depth += 1;
    }
    let cut = inner.as_str().unwrap_or_default();
    assert!(
        depth <= 64 && cut.starts_with("…[nested deeper than 64 levels"),
        "{depth}: {inner}"
    );
    assert_eq!(result["truncated"]["s129"]["max_depth"], 64, "{result}");
    raw.finish()?;
    Ok(())
}

fn hostile_and_chaos() -> String {
    "[proxy]\ncall_timeout_ms = 60000\n[servers.hostile]\nbuiltin = \"hostile\"\n[servers.chaos]\nbuiltin = \"chaos\"\n".into()
}

/// Waits until the catalog lists `name`.
async fn listed(proxy: &common::Proxy, name: &str) -> anyhow::Result<bool> {
    for _ in 0..100 {
        let tools = proxy.client.list_all_tools().await?;
        if tools.iter().any(|t| t.name == name) {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(false)
}

/// One server whose tools/list never answers, or never ends, does not stop the others'
/// list changes from reaching the catalog, and planmux keeps serving.
#[tokio::test]
async fn a_stuck_listing_does_not_hold_up_other_servers() -> R {
    for stuck in ["hostile__stall_listing", "hostile__endless_listing"] {
        let proxy = start(&hostile_and_chaos()).await?;
        proxy.client.call_tool(call(stuck, json!({}))).await?;
        proxy
            .client
            .call_tool(call("chaos__toggle_extra", json!({})))
            .await?;
        assert!(
            listed(&proxy, "chaos__extra").await?,
            "{stuck}: chaos's change was held up"
        );
        // The stuck server's tools stay as last listed, and callable.
        let nested = proxy
            .client
            .call_tool(call("hostile__nest", json!({"depth": 3})))
            .await?;
        assert_eq!(
            common::json(&nested)["structuredContent"],
            json!({"nested": [[[]]]}),
            "{stuck}"
        );
        proxy.client.cancel().await?;
    }
    Ok(())
}

/// A tool whose input schema explodes when followed does not freeze validation.
#[tokio::test]
async fn a_schema_bomb_does_not_freeze_validation() -> R {
    let proxy = start(&hostile_and_chaos()).await?;
    let plan = json!({"steps": [{"id": "b", "tool": "hostile__bomb", "args": {"a": 1, "b": [1, 2, {"c": 3}]}}]});
    let result = proxy.client.call_tool(call("execute_plan", plan)).await?;
    assert_eq!(
        common::json(&result)["structuredContent"]["status"],
        "succeeded",
        "{}",
        common::text(&result)
    );
    proxy.client.cancel().await?;
    Ok(())
}

/// Linux: a child that ignores the end of its stdin still dies with planmux, even when
/// planmux is SIGKILLed and cannot close anything (the parent-death signal).
#[cfg(target_os = "linux")]
#[tokio::test]
async fn no_child_outlives_a_sigkilled_planmux() -> R {
    // Once the demo exits, sh turns into `sleep` (same pid): a child deaf to stdin EOF.
    let config = format!(
        "[servers.deaf]\ncommand = \"sh\"\nargs = [\"-c\", \"{} demo chaos; exec sleep 600\"]\n",
        common::bin()
    );
    let proxy = start(&config).await?;
    proxy
        .client
        .call_tool(call("deaf__echo", json!({})))
        .await?;
    let family = descendants(proxy.pid);
    assert!(family.len() >= 2, "expected sh and the demo: {family:?}");
    Command::new("kill")
        .args(["-KILL", &proxy.pid.to_string()])
        .status()?;
    let gone = eventually(Duration::from_secs(10), || {
        family.iter().all(|p| !alive(*p))
    })
    .await;
    let left: Vec<_> = family.iter().filter(|p| alive(**p)).collect();
    assert!(gone, "left running after SIGKILL: {left:?}");
    Ok(())
}

/// Random mutations of the example plans, sent to one planmux serving in-process: every
/// plan gets an answer (a result or an error) within its bound, and planmux still serves
/// afterwards. `PROPTEST_CASES=5000 cargo test --test it hostile::mutated` runs more by hand.
#[test]
fn mutated_plans_always_get_an_answer_and_planmux_keeps_serving() -> R {
    use proptest::prelude::*;
    use proptest::test_runner::{Config as RunnerConfig, TestRunner};
    use rmcp::ServiceExt;

    let sandbox = tempfile::tempdir()?;
    let text = "[proxy]\nplan_timeout_ms = 2000\ncall_timeout_ms = 2000\n\
        [servers.metrics]\nbuiltin = \"metrics\"\n[servers.weather]\nbuiltin = \"weather\"\n\
        [servers.files]\nbuiltin = \"files\"\ncwd = \"sandbox\"\n[servers.chaos]\nbuiltin = \"chaos\"\n";
    let config = planmux::config::Config::parse(text, "test", sandbox.path(), &|_| None)?;
    let plans: Vec<Value> =
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/plans"))?
            .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path()).ok())
            .filter_map(|text| serde_json::from_str(&text).ok())
            .collect();
    anyhow::ensure!(plans.len() >= 5, "the example plans are missing");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(ours);
    let server = runtime.spawn(async move {
        let transport =
            planmux::wire::LineTransport::new(read, write, config.proxy.wire, "the host");
        planmux::serve::serve(&config, None, transport, std::future::pending()).await
    });
    // The client reads with planmux's own transport: rmcp's drops answers nested deeper
    // than 128, and mutated plans make such answers.
    let client = runtime.block_on(async {
        let (read, write) = tokio::io::split(theirs);
        let transport: planmux::wire::LineTransport<rmcp::RoleClient, _> =
            planmux::wire::LineTransport::new(read, write, Default::default(), "planmux");
        ().serve(transport).await
    })?;

    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256);
    let mut runner = TestRunner::new(RunnerConfig {
        cases,
        ..RunnerConfig::default()
    });
    let mutation = (any::<prop::sample::Index>(), 0u8..8, any::<u32>());
    let strategy = (0..plans.len(), prop::collection::vec(mutation, 1..6));
    runner
        .run(&strategy, |(base, edits)| {
            let mut plan = plans[base].clone();
            for (at, op, n) in edits {
                mutate(&mut plan, at, op, n);
            }
            let answered = runtime.block_on(async {
                tokio::time::timeout(
                    Duration::from_secs(10),
                    client.call_tool(call("execute_plan", plan.clone())),
                )
                .await
            });
            prop_assert!(answered.is_ok(), "no answer within 10 s to {}", clip(&plan));
            Ok(())
        })
        .map_err(|e| anyhow::anyhow!("{e}"))?;

    // Still serving.
    let echoed = runtime.block_on(client.call_tool(call("chaos__echo", json!({"still": true}))))?;
    assert_eq!(
        common::json(&echoed)["structuredContent"],
        json!({"still": true})
    );
    runtime.block_on(client.cancel())?;
    let served = runtime.block_on(server)?;
    assert!(served.is_ok(), "{served:?}");
    Ok(())
}

fn clip(value: &Value) -> String {
    value.to_string().chars().take(400).collect()
}

/// Applies one mutation to the node that `at` picks (in depth-first order).
fn mutate(plan: &mut Value, at: proptest::sample::Index, op: u8, n: u32) {
    let mut count = 0;
    count_nodes(plan, &mut count);
    let target = at.index(count.max(1));
    let mut seen = 0;
    if let Some(node) = nth_node(plan, target, &mut seen) {
        let nasty = [
            json!("${"),
            json!("$<a.b"),
            json!("$ref:"),
            json!("${nope.x} and $<s1.a.b>"),
            json!({"$ref": "input", "jsonpath": "$..*..*[?@ == 7]"}),
            json!("$<".repeat(20_000)),
            json!("x".repeat(200_000)),
            json!(-1),
        ];
        *node = match op {
            0 => nasty[n as usize % nasty.len()].clone(),
            1 => (0..(n % 200)).fold(json!(1), |inner, _| json!([inner])),
            2 => json!(n),
            3 => json!(null),
            4 => {
                json!({"retries": n, "timeout_ms": n % 100_000, "tool": "chaos__sleep", "args": {"ms": n % 5_000}})
            }
            5 => Value::String(format!("$ref:s{}", n % 300)),
            6 => json!([node.clone(), node.clone()]),
            _ => json!({}),
        };
    }
}

fn count_nodes(value: &Value, count: &mut usize) {
    *count += 1;
    match value {
        Value::Array(items) => items.iter().for_each(|v| count_nodes(v, count)),
        Value::Object(map) => map.values().for_each(|v| count_nodes(v, count)),
        _ => {}
    }
}

fn nth_node<'a>(value: &'a mut Value, target: usize, seen: &mut usize) -> Option<&'a mut Value> {
    if *seen == target {
        return Some(value);
    }
    *seen += 1;
    match value {
        Value::Array(items) => items.iter_mut().find_map(|v| nth_node(v, target, seen)),
        Value::Object(map) => map.values_mut().find_map(|v| nth_node(v, target, seen)),
        _ => None,
    }
}
