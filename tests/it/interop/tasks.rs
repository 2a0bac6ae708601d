//! 2025-11-25 tasks (SEP-1686) on both sides of planmux, over stdio and streamable HTTP,
//! against server-everything (its `simulate-research-query` runs only as a task) and the
//! TypeScript SDK's task client (tests/interop/ts_tasks.mjs).

use serde_json::json;

use super::support::{
    EVERYTHING, HttpEverything, Listening, Timer, entry, node, stdio_server, summary_of, toml_str,
};
use crate::common::{self, call, text};

type R = anyhow::Result<()>;

const TOOL: &str = "remote__simulate-research-query";

/// servers.toml with server-everything over HTTP as `remote`.
fn config(server: &HttpEverything) -> String {
    format!("[servers.remote]\nurl = {}\n", toml_str(&server.url))
}

/// A legacy host's (`proxy`'s) plain calls of `tool`, server-everything's research tool,
/// and a plan's step get the report; the question the task asks on the way (an ambiguous
/// topic) reaches the host during the call.
async fn research_answers(proxy: common::Proxy, tool: &str) -> R {
    let plain = proxy
        .client
        .call_tool(call(tool, json!({"topic": "rust"})))
        .await?;
    let said = text(&plain);
    assert_ne!(plain.is_error, Some(true), "{said}");
    assert!(
        said.contains("Research Report") && said.contains("rust"),
        "{said}"
    );
    let asked = proxy
        .client
        .call_tool(call(tool, json!({"topic": "python", "ambiguous": true})))
        .await?;
    assert_ne!(asked.is_error, Some(true), "{}", text(&asked));
    let questions = proxy.recorder.elicitations();
    assert!(
        questions
            .iter()
            .any(|q| q.contains("multiple interpretations")),
        "{questions:?}"
    );
    let plan = json!({"steps": [{"id": "r", "tool": tool, "args": {"topic": "tasks"}}]});
    let ran = proxy.client.call_tool(call("execute_plan", plan)).await?;
    let said = text(&ran);
    assert!(
        said.contains("succeeded") && said.contains("Research Report"),
        "{said}"
    );
    proxy.client.cancel().await?;
    Ok(())
}

/// A host that answers elicitations.
fn answering() -> common::Recorder {
    common::Recorder {
        capable: true,
        ..Default::default()
    }
}

/// Over stdio: planmux sends the call as a task and follows it on the raw path
/// (`tasks/result` under the call's id), for the passthrough and a plan's step alike. A
/// 2025-11-25 host that holds tasks itself gets a task of planmux's, whose result is the
/// report.
#[tokio::test]
async fn a_task_only_tool_of_a_2025_server_answers_with_its_tasks_result() -> R {
    let _t = Timer::start("a_task_only_tool_of_a_2025_server_answers_with_its_tasks_result");
    let config = stdio_server("everything", node(), &[&entry(EVERYTHING)], "");
    let proxy = common::start_with(&config, answering()).await?;
    research_answers(proxy, "everything__simulate-research-query").await?;

    let mut raw = common::RawProxy::start(&config)?;
    raw.list_tools()?;
    let call = r#"{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"everything__simulate-research-query","arguments":{"topic":"rust"},"task":{"ttl":60000}}}"#;
    let created = raw.answer(call)?;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_default();
    assert!(!id.is_empty(), "{created}");
    let result = raw.answer(&format!(
        r#"{{"jsonrpc":"2.0","id":51,"method":"tasks/result","params":{{"taskId":"{id}"}}}}"#
    ))?;
    assert!(
        result["result"]["content"]
            .to_string()
            .contains("Research Report"),
        "{result}"
    );
    Ok(())
}

/// Over HTTP: planmux sends the call as a task and asks for its `tasks/result` (rmcp's
/// custom requests: it models no such task); the tool is known to run only as a task from
/// the server's streamed tool list.
#[tokio::test]
async fn a_task_only_tool_of_a_2025_http_server_answers_with_its_tasks_result() -> R {
    let _t = Timer::start("a_task_only_tool_of_a_2025_http_server_answers_with_its_tasks_result");
    let server = HttpEverything::start().await?;
    let proxy = common::start_with(&config(&server), answering()).await?;
    research_answers(proxy, TOOL).await
}

/// The TypeScript SDK's task client as a 2025-11-25 host of `planmux serve --http`, with
/// server-everything over HTTP behind it (tests/interop/ts_tasks.mjs): planmux offers
/// tasks; the research tool's `execution` reaches the host; a task of planmux's follows
/// the server's own task to the report, the question it asks reaching the host on the way
/// and the answer reaching the report; any downstream tool runs as a task; tasks are
/// listed and cancelled, each one's end told; planmux's own tools answer at once; a task planmux never gave is
/// unknown (-32602).
#[tokio::test]
async fn the_typescript_sdks_task_client_holds_tasks_through_the_http_front() -> R {
    let _t = Timer::start("the_typescript_sdks_task_client_holds_tasks_through_the_http_front");
    let server = HttpEverything::start().await?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("servers.toml");
    std::fs::write(&path, config(&server))?;
    let path = path.to_string_lossy();
    let front = Listening::start(&["serve", "--http"], &["--config", &path]).await?;
    let out = tokio::process::Command::new(node())
        .arg(common::interop_dir().join("ts_tasks.mjs"))
        .arg(front.url())
        .current_dir(common::interop_dir())
        .output()
        .await?;
    let summary = summary_of(&out)?;
    assert_eq!(summary["protocol"], "2025-11-25", "{summary}");
    assert_eq!(
        summary["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "{summary}"
    );
    assert_eq!(summary["execution"], json!({"taskSupport": "required"}));
    let seen = |name: &str| summary[name]["seen"].to_string();
    for name in ["plain", "clarified", "echo"] {
        assert!(
            seen(name).starts_with(r#"["taskCreated""#) && seen(name).ends_with(r#""result"]"#),
            "{name}: {summary}"
        );
    }
    let text = |name: &str| {
        summary[name]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(text("plain").contains("Research Report: rust"), "{summary}");
    assert!(
        summary["asked"]
            .to_string()
            .contains("multiple interpretations"),
        "{summary}"
    );
    assert!(
        text("clarified").contains("**Clarification**: programming"),
        "the host's answer reached the server's task: {summary}"
    );
    assert_eq!(text("echo"), "Echo: as a task", "{summary}");
    let listed = summary["listed"].to_string();
    for name in ["plain", "clarified", "echo"] {
        let id = summary[name]["taskId"].as_str().unwrap_or("none");
        assert!(
            listed.contains(id),
            "{name}'s task is not listed: {summary}"
        );
    }
    assert_eq!(summary["cancelled"], "cancelled", "{summary}");
    // Each task's end is told (`notifications/tasks/status`).
    let told = summary["told"].to_string();
    for (name, status) in [("plain", "completed"), ("echo", "completed")] {
        let id = summary[name]["taskId"].as_str().unwrap_or("none");
        assert!(
            told.contains(&format!(r#"["{id}","{status}"]"#)),
            "{name}: {summary}"
        );
    }
    let cancelled = summary["cancelledId"].as_str().unwrap_or("none");
    assert!(
        told.contains(&format!(r#"["{cancelled}","cancelled"]"#)),
        "{summary}"
    );
    assert_eq!(summary["plan"]["status"], "succeeded", "{summary}");
    assert!(
        summary["plan"].to_string().contains("Echo: in a plan"),
        "{summary}"
    );
    assert!(
        summary["unknown"].to_string().contains("-32602"),
        "{summary}"
    );
    Ok(())
}
