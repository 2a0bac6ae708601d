//! End to end: the built binary as a child process, driven by rmcp's client, with the
//! downstream servers as real child processes (`planmux demo chaos`).

use std::process::{Command, Stdio};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, ClientRequest, NumberOrString, ProgressToken, RequestMetaObject, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use crate::common::{
    self, alive, call, demo_server, descendants, direct, eventually, json, start, text,
};

type R = anyhow::Result<()>;

fn chaos_config(extra: &str) -> String {
    demo_server("chaos", "chaos", extra)
}

#[tokio::test]
async fn passthrough_is_faithful() -> R {
    let proxy = start(&chaos_config("")).await?;
    let downstream = direct(common::bin(), &["demo", "chaos"]).await?;

    // tools/list: the same definitions, renamed.
    let mut proxied = proxy.client.list_all_tools().await?;
    let original = downstream.list_all_tools().await?;
    let own: Vec<String> = proxied
        .split_off(original.len())
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(
        own,
        ["execute_plan", "approve_plan"],
        "planmux's own tools are listed last"
    );
    assert_eq!(proxied.len(), original.len());
    for tool in &original {
        let mut expected = tool.clone();
        expected.name = format!("chaos__{}", tool.name).into();
        assert!(
            proxied.contains(&expected),
            "{} missing or changed",
            expected.name
        );
    }

    // tools/call: content, structuredContent, isError and _meta unchanged.
    let args = json!({"text": "héllo", "n": 1.5, "nested": {"list": [1, null, true]}});
    for (tool, args) in [
        ("echo", args.clone()),
        ("fail", json!({"message": "boom"})),
        ("bytes", json!({"n": 5})),
    ] {
        let via = proxy
            .client
            .call_tool(call(&format!("chaos__{tool}"), args.clone()))
            .await?;
        let direct_result = downstream.call_tool(call(tool, args)).await?;
        assert_eq!(json(&via), json(&direct_result), "{tool}");
    }
    let echoed = proxy
        .client
        .call_tool(call("chaos__echo", args.clone()))
        .await?;
    assert_eq!(echoed.structured_content, Some(args.clone()));
    assert_eq!(json(&echoed)["_meta"]["planmux-demo/echo"], args);
    let failed = proxy
        .client
        .call_tool(call("chaos__fail", json!({"message": "boom"})))
        .await?;
    assert_eq!(
        (failed.is_error, text(&failed)),
        (Some(true), "boom".to_string())
    );
    downstream.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn unknown_tool_is_a_protocol_error_with_suggestions() -> R {
    let proxy = start(&chaos_config("")).await?;
    let err = proxy
        .client
        .call_tool(call("chaos__ech", json!({})))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("unknown tool 'chaos__ech'"), "{err}");
    assert!(err.contains("did you mean 'chaos__echo'"), "{err}");
    // ...and the proxy keeps serving.
    assert_eq!(
        proxy
            .client
            .call_tool(call("chaos__echo", json!({"a": 1})))
            .await?
            .is_error,
        Some(false)
    );
    Ok(())
}

#[tokio::test]
async fn progress_is_forwarded_with_the_hosts_token() -> R {
    let proxy = start(&chaos_config("")).await?;
    let token = ProgressToken(NumberOrString::String("host-token-7".into()));
    let mut params = call("chaos__sleep", json!({"ms": 150, "steps": 3}));
    params.meta = Some(RequestMetaObject::with_progress_token(token.clone()));
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let options = PeerRequestOptions::with_timeout(Duration::from_secs(10))
        .with_meta(RequestMetaObject::with_progress_token(token.clone()));
    let handle = proxy
        .client
        .send_cancellable_request(request, options)
        .await?;
    let sent_token = handle.progress_token.clone();
    let response = handle.await_response().await?;
    assert!(matches!(response, ServerResult::CallToolResult(_)));
    let seen = eventually(Duration::from_secs(2), || {
        proxy
            .recorder
            .seen
            .lock()
            .map(|s| s.progress.len() >= 3)
            .unwrap_or(false)
    })
    .await;
    assert!(seen, "expected 3 progress notifications");
    let progress = proxy.recorder.progress();
    assert!(
        progress.iter().all(|p| p.progress_token == sent_token),
        "tokens: {progress:?}"
    );
    let steps: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    assert_eq!(steps, vec![1.0, 2.0, 3.0]);
    assert_eq!(progress[2].total, Some(3.0));
    Ok(())
}

#[tokio::test]
async fn host_cancellation_reaches_the_downstream() -> R {
    let proxy = start(&chaos_config("")).await?;
    proxy
        .call_then_cancel("chaos__sleep", json!({"ms": 20000}), "test")
        .await?;
    // The downstream counted the cancellation (its sleep stopped early).
    let counted = common::wait_for_cancelled(&proxy, "chaos__count", 1).await?;
    assert!(counted, "downstream never saw the cancellation");
    Ok(())
}

#[tokio::test]
async fn downstream_timeout_is_a_tool_error_naming_the_server() -> R {
    let proxy = start(&chaos_config("call_timeout_ms = 300")).await?;
    let result = proxy
        .client
        .call_tool(call("chaos__sleep", json!({"ms": 5000})))
        .await?;
    assert_eq!(result.is_error, Some(true));
    assert_eq!(
        text(&result),
        "server 'chaos' did not answer sleep within 300 ms"
    );
    assert_eq!(
        proxy
            .client
            .call_tool(call("chaos__echo", json!({})))
            .await?
            .is_error,
        Some(false)
    );
    Ok(())
}

/// Calls in flight together each end at their own deadline, and a call between them is
/// answered meanwhile.
#[test]
fn overlapping_calls_each_time_out_and_others_are_answered() -> R {
    let mut raw = common::RawProxy::start(&chaos_config("call_timeout_ms = 400"))?;
    raw.list_tools()?;
    let sleep = |id| common::call_line(id, "chaos__sleep", json!({"ms": 5000}));
    raw.send(&sleep(10))?;
    std::thread::sleep(Duration::from_millis(250));
    raw.send(&sleep(11))?;
    raw.send(&common::call_line(12, "chaos__echo", json!({"n": 12})))?;
    let mut answers = Vec::new();
    while answers.len() < 3 {
        let message = raw.read()?;
        if message.get("id").is_some() {
            answers.push(message);
        }
    }
    assert_eq!(answers[0]["id"], 12, "{answers:?}");
    assert_eq!(answers[0]["result"]["structuredContent"], json!({"n": 12}));
    let mut timed_out: Vec<i64> = answers[1..]
        .iter()
        .map(|answer| {
            assert_eq!(
                answer["result"]["content"][0]["text"],
                "server 'chaos' did not answer sleep within 400 ms",
                "{answer}"
            );
            answer["id"].as_i64().unwrap_or_default()
        })
        .collect();
    timed_out.sort_unstable();
    assert_eq!(timed_out, [10, 11]);
    Ok(())
}

/// A call the host cancelled gets no answer, even when the server's comes later, and its
/// id can be used again at once.
#[test]
fn a_cancelled_calls_id_is_free_again_and_its_late_answer_never_comes() -> R {
    let mut raw = common::RawProxy::start(&chaos_config(""))?;
    raw.list_tools()?;
    let echo = |id| common::call_line(id, "chaos__echo", json!({ "n": id }));
    raw.send(&common::call_line(20, "chaos__sleep", json!({"ms": 300})))?;
    let sent = std::time::Instant::now();
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":20}}"#)?;
    let again = raw.answer(&echo(20))?;
    assert_eq!(
        again["result"]["structuredContent"],
        json!({"n": 20}),
        "{again}"
    );
    // The server is done with the call once it counted the cancellation (or, were that
    // late, once the sleep's 300 ms are over). Whatever it answered came before the
    // count's answer: had planmux let it through, it would be read here first.
    for id in 30.. {
        let count = raw.answer(&common::call_line(id, "chaos__count", json!({})))?;
        assert_eq!(count["id"], id, "{count}");
        let counted = count["result"]["structuredContent"]["cancelled"] == 1;
        if counted || sent.elapsed() > Duration::from_millis(600) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The next answer is the next call's.
    let next = raw.answer(&echo(21))?;
    assert_eq!(next["id"], 21, "{next}");
    Ok(())
}

#[tokio::test]
async fn a_killed_downstream_fails_in_flight_calls_then_recovers() -> R {
    let proxy = start(&chaos_config("")).await?;
    let pid = proxy.chaos_pid().await?;
    assert!(pid > 0);
    let client = proxy.client.peer().clone();
    let in_flight = tokio::spawn(async move {
        client
            .call_tool(call("chaos__sleep", json!({"ms": 30000})))
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()?;
    let result = tokio::time::timeout(Duration::from_secs(5), in_flight).await???;
    assert_eq!(result.is_error, Some(true));
    let message = text(&result);
    assert!(
        message.starts_with("server 'chaos' went away during the call"),
        "{message}"
    );
    // The next call restarts it.
    let again = proxy
        .client
        .call_tool(call("chaos__pid", json!({})))
        .await?;
    assert_eq!(again.is_error, Some(false), "{}", text(&again));
    let new_pid = again
        .structured_content
        .and_then(|v| v["pid"].as_i64())
        .unwrap_or(0);
    assert!(new_pid > 0 && new_pid != pid);
    // A reconnected server may list other tools: the host is told to list them again,
    // though these are the same.
    let notified = heard_list_changed(&proxy).await;
    assert!(
        notified,
        "no notifications/tools/list_changed after the reconnect"
    );
    Ok(())
}

#[tokio::test]
async fn list_changed_refreshes_the_catalog_and_notifies_the_host() -> R {
    let proxy = start(&chaos_config("")).await?;
    assert!(
        !proxy
            .client
            .list_all_tools()
            .await?
            .iter()
            .any(|t| t.name == "chaos__extra")
    );
    proxy
        .client
        .call_tool(call("chaos__toggle_extra", json!({})))
        .await?;
    let notified = heard_list_changed(&proxy).await;
    assert!(notified, "no notifications/tools/list_changed");
    assert!(
        proxy
            .client
            .list_all_tools()
            .await?
            .iter()
            .any(|t| t.name == "chaos__extra")
    );
    let extra = proxy
        .client
        .call_tool(call("chaos__extra", json!({})))
        .await?;
    assert_eq!(extra.is_error, Some(false));
    Ok(())
}

#[tokio::test]
async fn a_broken_server_does_not_stop_the_others() -> R {
    let config = format!(
        "{}\n[servers.missing]\ncommand = \"/nonexistent/server\"\n\n[servers.crashy]\ncommand = \"sh\"\nargs = [\"-c\", \"echo boom-on-stderr >&2; exit 3\"]\n",
        chaos_config("")
    );
    let proxy = start(&config).await?;
    let tools = proxy.client.list_all_tools().await?;
    assert!(tools.iter().any(|t| t.name == "chaos__echo"));
    assert!(tools.iter().all(|t| t.name.starts_with("chaos__")
        || t.name == "execute_plan"
        || t.name == "approve_plan"));

    // `planmux check` reports each failure and exits non-zero.
    let out = proxy.command("check").output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("missing") && stdout.contains("cannot start '/nonexistent/server'"),
        "{stdout}"
    );
    assert!(
        stdout.contains("crashy") && stdout.contains("boom-on-stderr"),
        "{stdout}"
    );
    assert!(stdout.contains("2 of 3 servers failed"), "{stdout}");

    // A tool of a server that never started is named as such, not as unknown: called
    // directly, and in a plan.
    let called = proxy
        .client
        .call_tool(call("missing__read_file", json!({})))
        .await?;
    assert_eq!(called.is_error, Some(true));
    let said = common::text(&called);
    assert!(
        said.contains("server 'missing' is configured but failed to start"),
        "{said}"
    );
    let plan = json!({"steps": [{"tool": "crashy__anything"}, {"tool": "crashy:other"}]});
    let invalid = proxy.client.call_tool(call("execute_plan", plan)).await?;
    let said = common::text(&invalid);
    assert_eq!(
        said.matches("belongs to server 'crashy', which is configured but failed to start")
            .count(),
        2,
        "{said}"
    );

    // `planmux tools` says how many servers its tools come from, and fails like `check`.
    let out = proxy.command("tools").output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("tools from 1 of 3 servers"), "{stdout}");
    assert!(
        stderr.contains("server 'missing' failed to start"),
        "{stderr}"
    );
    Ok(())
}

#[tokio::test]
async fn no_descendant_is_left_after_stdin_eof() -> R {
    // `sh -c '…; true'` keeps sh as the parent, like npx → node.
    let config = format!(
        "{}\n[servers.wrapped]\ncommand = \"sh\"\nargs = [\"-c\", \"{} demo chaos; true\"]\n",
        chaos_config(""),
        common::bin()
    );
    let proxy = start(&config).await?;
    proxy
        .client
        .call_tool(call("wrapped__echo", json!({})))
        .await?;
    // A call in flight must not delay the shutdown.
    let client = proxy.client.peer().clone();
    tokio::spawn(async move {
        client
            .call_tool(call("chaos__sleep", json!({"ms": 60000})))
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let family = descendants(proxy.pid);
    assert!(
        family.len() >= 3,
        "expected chaos, sh and its child: {family:?}"
    );
    let pid = proxy.pid;
    proxy.client.cancel().await?; // closes planmux's stdin
    let gone = eventually(Duration::from_secs(10), || {
        !alive(pid) && family.iter().all(|p| !alive(*p))
    })
    .await;
    let left: Vec<_> = family.iter().filter(|p| alive(**p)).collect();
    assert!(
        gone,
        "left running: planmux {} descendants {left:?}",
        alive(pid)
    );
    Ok(())
}

#[tokio::test]
async fn no_descendant_is_left_after_sigterm() -> R {
    let proxy = start(&chaos_config("")).await?;
    proxy
        .client
        .call_tool(call("chaos__echo", json!({})))
        .await?;
    let family = descendants(proxy.pid);
    assert!(!family.is_empty());
    Command::new("kill")
        .args(["-TERM", &proxy.pid.to_string()])
        .status()?;
    let pid = proxy.pid;
    let gone = eventually(Duration::from_secs(10), || {
        !alive(pid) && family.iter().all(|p| !alive(*p))
    })
    .await;
    assert!(gone, "processes left after SIGTERM");
    Ok(())
}

/// Raw JSON-RPC lines, to send what no well-behaved client would.
#[test]
fn garbage_on_stdin_does_not_stop_serving() -> R {
    let mut raw = common::RawProxy::start("[servers.chaos]\nbuiltin = \"chaos\"\n")?;
    let init = raw.exchange(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#)?;
    assert_eq!(init["id"], 1);
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
    raw.send("this is not json")?;
    let reply = raw.exchange(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"chaos__echo","arguments":{"ok":true}}}"#)?;
    assert_eq!(reply["id"], 2, "{reply}");
    assert_eq!(reply["result"]["structuredContent"], json!({"ok": true}));
    let reply = raw.exchange(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#)?;
    assert_eq!(reply["id"], 3);
    assert!(
        reply["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
    let status = raw.finish()?;
    assert!(status.success(), "{status}");
    Ok(())
}

/// The newer connect style: `server/discover` instead of `initialize` (protocol 2026-07-28),
/// as the official Python SDK 2.3 does by default. Results must carry `resultType`.
#[test]
fn discover_probe_and_stateless_calls_work() -> R {
    let mut raw = common::RawProxy::start(&common::demo_server("chaos", "chaos", ""))?;
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"0"}}"#;
    let discovered = raw.exchange(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{{meta}}}}}"#
    ))?;
    let versions = discovered["result"]["supportedVersions"].to_string();
    assert!(versions.contains("2026-07-28"), "{discovered}");
    let listed = raw.exchange(&format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{{{meta}}}}}"#
    ))?;
    assert!(
        listed["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "chaos__echo")),
        "{listed}"
    );
    let called = raw.exchange(&format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"chaos__echo","arguments":{{"a":1}},{meta}}}}}"#
    ))?;
    assert_eq!(called["result"]["resultType"], "complete", "{called}");
    assert_eq!(called["result"]["structuredContent"], json!({"a": 1}));

    // Over stdio there is one host, handshake or not: its runs are listed to it.
    let ran = raw.exchange(&format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"execute_plan","arguments":{{"steps":[{{"id":"e","tool":"chaos__echo","args":{{"a":2}}}}]}},{meta}}}}}"#
    ))?;
    let run_id = ran["result"]["structuredContent"]["run_id"].clone();
    let resources = raw.exchange(&format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"resources/list","params":{{{meta}}}}}"#
    ))?;
    let uri = format!("planmux://runs/{}", run_id.as_str().unwrap_or("?"));
    assert!(
        resources["result"]["resources"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["uri"] == uri.as_str())),
        "{uri} not in {resources}"
    );

    // List changes reach a 2026-07-28 host on its subscriptions/listen stream.
    let acknowledged = raw.exchange(&format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{meta}}}}}"#
    ))?;
    assert_eq!(
        acknowledged["method"], "notifications/subscriptions/acknowledged",
        "{acknowledged}"
    );
    raw.send(&format!(r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"chaos__toggle_extra","arguments":{{}},{meta}}}}}"#))?;
    let mut seen: Vec<Value> = Vec::new();
    while !(seen
        .iter()
        .any(|m| m["method"] == "notifications/tools/list_changed")
        && seen.iter().any(|m| m["id"] == 5))
    {
        seen.push(raw.read()?);
    }
    let changed = seen
        .iter()
        .find(|m| m["method"] == "notifications/tools/list_changed");
    assert!(
        changed.is_some_and(|m| m["params"]["_meta"].to_string().contains('4')),
        "{seen:?}"
    );
    raw.finish()?;
    Ok(())
}

/// `planmux serve` over the chaos demo, driven by `host` connecting in `mode`; the
/// config's folder, kept as long as the client runs.
async fn chaos_with_lifecycle(
    host: common::Recorder,
    mode: rmcp::service::ClientLifecycleMode,
) -> anyhow::Result<(
    rmcp::service::RunningService<rmcp::RoleClient, common::Recorder>,
    tempfile::TempDir,
)> {
    serve_with_lifecycle("[servers.chaos]\nbuiltin = \"chaos\"\n", host, mode).await
}

/// `planmux serve` over `config`, driven by `host` connecting in `mode`; the config's
/// folder, kept as long as the client runs.
async fn serve_with_lifecycle(
    config: &str,
    host: common::Recorder,
    mode: rmcp::service::ClientLifecycleMode,
) -> anyhow::Result<(
    rmcp::service::RunningService<rmcp::RoleClient, common::Recorder>,
    tempfile::TempDir,
)> {
    use rmcp::service::ClientServiceExt;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("servers.toml");
    std::fs::write(&path, config)?;
    let mut cmd = tokio::process::Command::new(common::bin());
    cmd.arg("serve").arg("--config").arg(&path);
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()?;
    Ok((host.serve_with_lifecycle(transport, mode).await?, dir))
}

/// rmcp's own client in its auto mode (probe, then fall back) works as well.
#[tokio::test]
async fn auto_lifecycle_client_works() -> R {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::ClientLifecycleMode;
    let mode = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    };
    let (client, _dir) = chaos_with_lifecycle(common::Recorder::default(), mode).await?;
    assert!(
        client
            .list_all_tools()
            .await?
            .iter()
            .any(|t| t.name == "chaos__echo")
    );
    let result = client
        .call_tool(call("chaos__echo", json!({"b": 2})))
        .await?;
    assert_eq!(result.structured_content, Some(json!({"b": 2})));
    client.cancel().await?;
    Ok(())
}

/// A 2026-07-28 host (rmcp's client, which answers `input_required` itself): a server's
/// question reaches its own call as `input_required` and its retry is answered; a plan's
/// step whose server asks cannot put the question to such a host, and fails saying so.
#[tokio::test]
async fn a_2026_host_answers_its_own_calls_questions_and_a_plan_step_says_it_cannot() -> R {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::ClientLifecycleMode;
    let mode = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let host = common::Recorder {
        capable: true,
        ..Default::default()
    };
    let (client, _dir) = chaos_with_lifecycle(host, mode).await?;
    let asked = client
        .call_tool(call("chaos__ask_host", json!({"kind": "elicitation"})))
        .await?;
    assert_eq!(asked.is_error, Some(false), "{}", text(&asked));
    assert_eq!(
        asked
            .structured_content
            .as_ref()
            .and_then(|v| v.pointer("/answer/content/name")),
        Some(&json!("Ada")),
        "{}",
        text(&asked)
    );
    let plan = json!({"steps": [{"id": "ask", "tool": "chaos__ask_host", "args": {"kind": "elicitation"}}]});
    let ran = client.call_tool(call("execute_plan", plan)).await?;
    let said = text(&ran);
    assert!(
        said.contains("2026-07-28") && said.contains("directly"),
        "{said}"
    );
    client.cancel().await?;
    Ok(())
}

/// A 2026-07-28 host in front of a 2025-11-25 server (chaos `--legacy`), which asks
/// during a call by request: each request reaches the host as its own call's
/// `input_required` (the host takes no requests), the call held meanwhile, and the answer
/// its retry brings reaches the server, whose result is the call's.
#[tokio::test]
async fn a_legacy_servers_requests_reach_a_2026_host_as_its_calls_questions() -> R {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::ClientLifecycleMode;
    let mode = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let host = common::Recorder {
        capable: true,
        ..Default::default()
    };
    let config = format!(
        "[servers.old]\ncommand = \"{}\"\nargs = [\"demo\", \"chaos\", \"--legacy\"]\n",
        common::bin()
    );
    let (client, _dir) = serve_with_lifecycle(&config, host, mode).await?;
    for (kind, path, expected) in [
        ("elicitation", "/answer/content/name", json!("Ada")),
        (
            "sampling",
            "/answer/content/text",
            json!("hi from the host"),
        ),
        ("roots", "/answer/roots/0/uri", json!("file:///work")),
    ] {
        let asked = client
            .call_tool(call("old__ask_host", json!({"kind": kind})))
            .await?;
        let said = text(&asked);
        assert_eq!(asked.is_error, Some(false), "{kind}: {said}");
        let answer = asked
            .structured_content
            .as_ref()
            .and_then(|v| v.pointer(path));
        assert_eq!(answer, Some(&expected), "{kind}: {said}");
    }
    client.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn server_requests_and_log_messages_are_relayed_to_the_host() -> R {
    let host = common::Recorder {
        capable: true,
        ..Default::default()
    };
    let proxy = common::start_with(&chaos_config(""), host).await?;
    for (kind, path, want) in [
        (
            "sampling",
            "/answer/content/text",
            json!("hi from the host"),
        ),
        ("elicitation", "/answer/content/name", json!("Ada")),
        ("roots", "/answer/roots/0/uri", json!("file:///work")),
    ] {
        let result = proxy
            .client
            .call_tool(call("chaos__ask_host", json!({"kind": kind})))
            .await?;
        assert_eq!(result.is_error, Some(false), "{kind}: {}", text(&result));
        let answer = result.structured_content.unwrap_or_default();
        assert_eq!(answer.pointer(path), Some(&want), "{kind}: {answer}");
    }
    proxy
        .client
        .call_tool(call("chaos__log", json!({"message": "hello log"})))
        .await?;
    let logged = eventually(Duration::from_secs(3), || {
        proxy
            .recorder
            .seen
            .lock()
            .map(|s| !s.logs.is_empty())
            .unwrap_or(false)
    })
    .await;
    assert!(logged, "no log message relayed");
    let log = proxy
        .recorder
        .seen
        .lock()
        .map(|s| s.logs[0].clone())
        .unwrap_or_default();
    assert_eq!(
        (log["logger"].clone(), log["data"].clone()),
        (json!("chaos/chaos"), json!("hello log"))
    );
    Ok(())
}

#[tokio::test]
async fn a_host_without_sampling_gets_a_clear_refusal() -> R {
    let proxy = start(&chaos_config("")).await?;
    let result = proxy
        .client
        .call_tool(call("chaos__ask_host", json!({"kind": "sampling"})))
        .await?;
    assert_eq!(result.is_error, Some(true));
    assert!(
        text(&result).contains("the host connected to planmux does not support sampling"),
        "{}",
        text(&result)
    );
    Ok(())
}

/// chaos, and a chaos server `slow` that starts only once `flag` exists, with a list
/// grace of `grace_ms`.
fn with_slow_server(flag: &std::path::Path, grace_ms: u64) -> String {
    format!(
        "[proxy]\nlist_grace_ms = {grace_ms}\n{}\n[servers.slow]\ncommand = \"sh\"\nargs = [\"-c\", \"while [ ! -e {} ]; do sleep 0.02; done; exec {} demo chaos\"]\n",
        chaos_config(""),
        flag.display(),
        common::bin()
    )
}

/// The handshake does not wait for slow servers beyond the list grace: the tools that
/// are ready are listed, a late server is announced with `list_changed`, and a call waits
/// only for the server it goes to.
#[tokio::test]
async fn the_handshake_is_answered_while_servers_start() -> R {
    let dir = tempfile::tempdir()?;
    let flag = dir.path().join("go");
    let config = with_slow_server(&flag, 300);
    // Connecting completes although `slow` cannot have started yet, and the tools that
    // are ready are listed after the grace.
    let proxy = tokio::time::timeout(Duration::from_secs(20), start(&config)).await??;
    let tools =
        tokio::time::timeout(Duration::from_secs(5), proxy.client.list_all_tools()).await??;
    assert!(tools.iter().any(|t| t.name == "chaos__echo"));
    assert!(!tools.iter().any(|t| t.name == "slow__echo"));
    // A call goes through at once; a call to the slow server waits for that server only.
    let quick = proxy
        .client
        .call_tool(call("chaos__echo", json!({"quick": true})))
        .await?;
    assert_eq!(quick.is_error, Some(false));
    let flag_later = flag.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let _ = std::fs::write(flag_later, "");
    });
    let slow = proxy
        .client
        .call_tool(call("slow__echo", json!({"waited": true})))
        .await?;
    assert_eq!(slow.structured_content, Some(json!({"waited": true})));
    // The late server is announced with list_changed.
    let seen = proxy.recorder.seen.clone();
    let announced = common::eventually(Duration::from_secs(20), || {
        seen.lock().map(|s| s.list_changed > 0).unwrap_or(false)
    })
    .await;
    assert!(announced, "no list_changed for the late server");
    let tools = proxy.client.list_all_tools().await?;
    assert!(tools.iter().any(|t| t.name == "slow__echo"));
    Ok(())
}

/// A host known to ignore `list_changed` (Claude Desktop, `claude-ai`) gets lists only
/// once every server has started, however long past the grace that takes.
#[tokio::test]
async fn a_host_that_ignores_list_changed_waits_for_every_server() -> R {
    let dir = tempfile::tempdir()?;
    let flag = dir.path().join("go");
    let config = with_slow_server(&flag, 100);
    let flag_later = flag.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let _ = std::fs::write(flag_later, "");
    });
    let host = common::Recorder {
        name: Some("claude-ai"),
        ..Default::default()
    };
    let proxy = common::start_with(&config, host).await?;
    let tools = proxy.client.list_all_tools().await?;
    assert!(tools.iter().any(|t| t.name == "slow__echo"));
    Ok(())
}

/// `logging/setLevel` on planmux filters the log messages relayed from downstreams.
#[tokio::test]
#[allow(deprecated)] // logging is deprecated by SEP-2577
async fn the_hosts_log_level_filters_relayed_messages() -> R {
    use rmcp::model::{LoggingLevel, SetLevelRequestParams};
    let proxy = start(&chaos_config("")).await?;
    proxy
        .client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Warning))
        .await?;
    proxy
        .client
        .call_tool(call(
            "chaos__log",
            json!({"message": "chatter", "level": "info"}),
        ))
        .await?;
    proxy
        .client
        .call_tool(call(
            "chaos__log",
            json!({"message": "disk full", "level": "error"}),
        ))
        .await?;
    let heard = eventually(Duration::from_secs(3), || {
        proxy
            .recorder
            .seen
            .lock()
            .map(|s| !s.logs.is_empty())
            .unwrap_or(false)
    })
    .await;
    assert!(heard);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let logs = proxy
        .recorder
        .seen
        .lock()
        .map(|s| s.logs.clone())
        .unwrap_or_default();
    let data: Vec<&Value> = logs.iter().map(|l| &l["data"]).collect();
    assert_eq!(
        data,
        [&json!("disk full")],
        "the info message below `warning` was dropped"
    );
    Ok(())
}

/// An HTTP server's `headers` (with `${VAR}` from planmux's environment) are sent with
/// its requests: a listener here records the first request planmux makes.
#[test]
fn http_servers_get_their_configured_headers() -> R {
    use std::io::{Read, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let seen = std::thread::spawn(move || -> std::io::Result<String> {
        let (mut socket, _) = listener.accept()?;
        socket.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf)?;
            if n == 0 {
                break;
            }
            request.extend_from_slice(&buf[..n]);
        }
        socket.write_all(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        )?;
        Ok(String::from_utf8_lossy(&request).to_string())
    });
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("servers.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.remote]\nurl = \"http://127.0.0.1:{port}/mcp\"\nheaders = {{ Authorization = \"Bearer ${{PLANMUX_TEST_TOKEN}}\", X-Team = \"ops\" }}\nstartup_timeout_ms = 5000\n"
        ),
    )?;
    let out = Command::new(common::bin())
        .args(["check", "--config"])
        .arg(&config)
        .env("PLANMUX_TEST_TOKEN", "s3cret")
        .output()?;
    let request = seen
        .join()
        .map_err(|_| anyhow::anyhow!("listener panicked"))??
        .to_lowercase();
    assert!(request.starts_with("post /mcp"), "{request}");
    assert!(
        request.contains("authorization: bearer s3cret"),
        "{request}"
    );
    assert!(request.contains("x-team: ops"), "{request}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "the fake server refused, so check reports it"
    );
    Ok(())
}

/// A stdio server runs in its `cwd` (relative to the config's folder) with planmux's
/// environment plus its `env`: the server below starts only if both hold.
#[test]
fn stdio_servers_get_their_cwd_and_env() -> R {
    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join("work"))?;
    let expected = dir.path().join("work").canonicalize()?;
    let config = dir.path().join("servers.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.picky]\ncommand = \"sh\"\nargs = [\"-c\", \"[ \\\"$(pwd -P)\\\" = '{}' ] && [ \\\"$FOO\\\" = bar-s3cret ] && [ -n \\\"$PATH\\\" ] && exec {} demo chaos\"]\ncwd = \"work\"\nenv = {{ FOO = \"bar-${{PLANMUX_TEST_TOKEN}}\" }}\n",
            expected.display(),
            common::bin()
        ),
    )?;
    let out = Command::new(common::bin())
        .args(["check", "--config"])
        .arg(&config)
        .env("PLANMUX_TEST_TOKEN", "s3cret")
        .output()?;
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(report.contains("0 of 1 servers failed"), "{report}");
    Ok(())
}

/// Past the tool budget, the host sees planmux's tools and `always_list`; every other tool
/// is found with search_tools and stays callable by name, directly and in plans.
#[tokio::test]
async fn a_catalog_over_the_budget_is_searched_not_listed() -> R {
    let proxy = start(
        "[proxy]\ntool_budget = 5\nalways_list = [\"metrics__list_*\"]\n\n\
         [servers.metrics]\nbuiltin = \"metrics\"\n\n[servers.weather]\nbuiltin = \"weather\"\n",
    )
    .await?;
    assert_eq!(
        proxy.tool_names().await?,
        [
            "metrics__list_metrics",
            "execute_plan",
            "search_tools",
            "approve_plan"
        ]
    );
    let found = proxy
        .client
        .call_tool(call(
            "search_tools",
            json!({"query": "hourly readings of past days"}),
        ))
        .await?;
    let found = found.structured_content.unwrap_or_default();
    assert_eq!(
        found["tools"][0]["name"], "weather__get_history",
        "{found:#}"
    );
    assert_eq!(found["tools"][0]["tier"], "read");
    // Unlisted, yet callable by its name: directly and in a plan.
    let direct = proxy
        .client
        .call_tool(call("weather__get_weather", json!({"location": "Oslo"})))
        .await?;
    assert_eq!(direct.is_error, Some(false));
    let plan = json!({"steps": [{"id": "h", "tool": "weather__get_history", "args": {"location": "Oslo", "days": 1}}],
                      "outputs": {"days": "$ref:h.days"}});
    let ran = proxy.client.call_tool(call("execute_plan", plan)).await?;
    assert_eq!(
        ran.structured_content.unwrap_or_default()["outputs"]["days"],
        1
    );
    Ok(())
}

/// A changed servers.toml is reloaded while the host stays connected: a server added
/// starts, one removed stops, the unchanged one keeps running (same process), the host
/// hears list_changed, and an empty or invalid file changes nothing.
#[tokio::test]
async fn a_changed_config_is_reloaded_while_the_host_is_connected() -> anyhow::Result<()> {
    let chaos = common::demo_server("chaos", "chaos", "");
    let weather = common::demo_server("weather", "weather", "");
    let proxy = common::start_logged(&chaos).await?;
    let pid = |proxy: &common::Proxy| {
        let proxy = proxy.client.clone();
        async move {
            let result = proxy
                .call_tool(common::call("chaos__pid", serde_json::json!({})))
                .await?;
            anyhow::Ok(common::text(&result))
        }
    };
    let before = pid(&proxy).await?;
    let path = proxy.dir.path().join("servers.toml");
    let listed = |names: Vec<String>, tool: &str| names.iter().any(|n| n == tool);
    let wait_for = |want: bool| {
        let proxy = &proxy;
        async move {
            for _ in 0..100 {
                let names = proxy.tool_names().await?;
                if listed(names, "weather__get_weather") == want {
                    return anyhow::Ok(true);
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            anyhow::Ok(false)
        }
    };
    std::fs::write(&path, format!("{chaos}\n{weather}"))?;
    assert!(
        wait_for(true).await?,
        "the added server's tools were not listed"
    );
    // The list may be read before the notice sent after it arrives.
    let notified = heard_list_changed(&proxy).await;
    assert!(notified, "no list_changed");
    assert_eq!(
        pid(&proxy).await?,
        before,
        "the unchanged server was restarted"
    );
    // An empty file (an editor saving in place) is not a config to apply.
    std::fs::write(&path, "")?;
    let looked = proxy.logged("config not reloaded: the file is empty").await;
    assert!(looked, "planmux never looked at the emptied file");
    assert!(listed(proxy.tool_names().await?, "weather__get_weather"));
    // An invalid file: refused, the running config stays.
    std::fs::write(&path, "[servers.broken]\ncomand = \"x\"\n")?;
    let looked = proxy
        .logged("config not reloaded: the running config stays")
        .await;
    assert!(looked, "planmux never looked at the invalid file");
    assert!(listed(proxy.tool_names().await?, "weather__get_weather"));
    std::fs::write(&path, &chaos)?;
    assert!(wait_for(false).await?, "the removed server's tools stayed");
    assert_eq!(pid(&proxy).await?, before);
    Ok(())
}

/// A `[policy]` changed on disk is in force without a restart: a tool denied now leaves
/// the list (the host is told) and is refused, directly and in a plan.
#[tokio::test]
async fn a_reloaded_policy_is_in_force_at_once() -> anyhow::Result<()> {
    let chaos = common::demo_server("chaos", "chaos", "");
    let proxy = common::start(&chaos).await?;
    let echo = || common::call("chaos__echo", serde_json::json!({"message": "hi"}));
    let allowed = proxy.client.call_tool(echo()).await?;
    assert_eq!(allowed.is_error, Some(false), "{}", common::text(&allowed));
    let path = proxy.dir.path().join("servers.toml");
    std::fs::write(
        &path,
        format!("[policy]\ndeny = [\"chaos__echo\"]\n{chaos}"),
    )?;
    let mut gone = false;
    for _ in 0..100 {
        if !proxy.tool_names().await?.iter().any(|n| n == "chaos__echo") {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(gone, "the denied tool is still listed");
    let told = heard_list_changed(&proxy).await;
    assert!(told, "no list_changed");
    let refused = proxy.client.call_tool(echo()).await;
    let message = format!("{refused:?}");
    assert!(message.contains("denied"), "{message}");
    let plan = serde_json::json!({"steps": [{"id": "e", "tool": "chaos__echo", "args": {"message": "hi"}}]});
    let planned = proxy
        .client
        .call_tool(common::call("execute_plan", plan))
        .await?;
    assert_eq!(planned.is_error, Some(true), "{}", common::text(&planned));
    Ok(())
}

/// A plain call takes the passthrough path: the server's result reaches the host as the
/// server wrote it, fields no SDK models included (a vendor field on the result and on a
/// content block), under the host's own id.
#[test]
fn a_tool_result_reaches_the_host_as_the_server_wrote_it() -> R {
    let server = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/servers/odd_fields.py");
    let config = format!(
        "[servers.odd]\ncommand = \"python3\"\nargs = [\"{}\"]\n",
        server.display()
    );
    let mut raw = common::RawProxy::start(&config)?;
    raw.list_tools()?;
    raw.send(r#"{"jsonrpc":"2.0","id":"call-2","method":"tools/call","params":{"name":"odd__odd","arguments":{}}}"#)?;
    let answer = raw.read()?;
    assert_eq!(
        answer["result"],
        json!({"content": [{"type": "text", "text": "odd", "x-block": 1}], "x-vendor": {"kept": true}}),
        "{answer}"
    );
    Ok(())
}

/// A tools/call whose id is no MCP id (a fraction) is refused under `null`, not run.
#[test]
fn a_call_with_a_fractional_id_is_refused_not_run() -> R {
    let mut raw = common::RawProxy::start(&common::demo_server("chaos", "chaos", ""))?;
    raw.list_tools()?;
    raw.send(r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"chaos__echo","arguments":{"message":"hi"}}}"#)?;
    let answer = raw.read()?;
    assert_eq!(answer["id"], Value::Null, "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    Ok(())
}

/// SIGTERM with a call in flight: the call is answered (cancelled) before planmux exits,
/// with a stdio child server as with a built-in one.
#[test]
fn a_terminated_planmux_answers_the_calls_in_flight() -> R {
    let config = format!(
        "{}[servers.child]\ncommand = \"{}\"\nargs = [\"demo\", \"chaos\"]\n",
        common::demo_server("chaos", "chaos", ""),
        common::bin()
    );
    let mut raw = common::RawProxy::start(&config)?;
    raw.list_tools()?;
    for (id, tool) in [(7, "chaos__sleep"), (8, "child__sleep")] {
        raw.send(&common::call_line(id, tool, json!({"ms": 60000})))?;
    }
    std::thread::sleep(Duration::from_millis(500));
    Command::new("kill")
        .args(["-TERM", &raw.child.id().to_string()])
        .status()?;
    let mut answered = Vec::new();
    for _ in 0..2 {
        let answer = raw.read()?;
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains("was cancelled"), "{answer}");
        answered.push(answer["id"].clone());
    }
    answered.sort_by_key(|id| id.as_i64());
    assert_eq!(answered, [json!(7), json!(8)]);
    Ok(())
}

/// Whether the host hears `notifications/tools/list_changed` within 5 s.
async fn heard_list_changed(proxy: &common::Proxy) -> bool {
    eventually(Duration::from_secs(5), || {
        proxy
            .recorder
            .seen
            .lock()
            .map(|s| s.list_changed > 0)
            .unwrap_or(false)
    })
    .await
}

/// A command line planmux cannot use exits 64 (sysexits' EX_USAGE) before doing anything,
/// naming what is wrong, whichever command it is for.
#[test]
fn command_lines_it_cannot_use_exit_64() -> R {
    let cases: [&[&str]; 4] = [
        &["schema", "foo"],
        &["install", "--host", "nohost"],
        &["uninstall", "--host", "nohost"],
        &["demo", "nosuch"],
    ];
    for args in cases {
        let out = Command::new(common::bin()).args(args).output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(stderr.contains("invalid value"), "{args:?}: {stderr}");
    }
    let out = Command::new(common::bin())
        .args(["install", "--host", "nohost"])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("one of: claude-desktop"), "{stderr}");
    Ok(())
}

/// A stdio server whose `cwd` is not a folder fails to start saying so, not that its
/// command was not found (what the OS reports).
#[test]
fn a_missing_cwd_is_named() -> R {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("servers.toml");
    std::fs::write(
        &config,
        "[servers.lost]\ncommand = \"sh\"\nargs = [\"-c\", \"true\"]\ncwd = \"no-such-folder\"\n",
    )?;
    let out = Command::new(common::bin())
        .args(["check", "--config"])
        .arg(&config)
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("no-such-folder is not a folder"),
        "{stdout}"
    );
    Ok(())
}
