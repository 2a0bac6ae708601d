//! Tasks (SEP-2663, the extension `io.modelcontextprotocol/tasks` of 2026-07-28) for
//! callers that cannot hold one: a legacy host and a plan's steps. The built-in
//! `conformance` server speaks 2026-07-28 and has tools that run only as tasks; planmux
//! declares the extension for them, follows the task and answers with its result. (A
//! 2026-07-28 host holds its own tasks: the conformance suite's tasks scenarios run
//! through planmux in `interop.rs`.)

use std::process::Stdio;

use rmcp::ServiceExt;
use serde_json::{Value, json};

use crate::common::{self, Elicit, Recorder, call, text};

type R = anyhow::Result<()>;

const CONFORMANCE: &str = "[servers.conformance]\nbuiltin = \"conformance\"\n";

/// What the task-only tools answer a host that accepts every question with
/// `{"name": "Ada", "confirm": true}`: (tool, arguments, text, whether it is an error).
fn task_only_calls() -> Vec<(&'static str, serde_json::Value, &'static str, bool)> {
    vec![
        // Asks the name first (input_required), then greets as a task.
        (
            "conformance__test_tool_with_task",
            json!({}),
            "Hello, Ada!",
            false,
        ),
        // Asks within the task (its input requests), one and two at once.
        (
            "conformance__confirm_delete",
            json!({"filename": "a.txt"}),
            "Deleted a.txt.",
            false,
        ),
        (
            "conformance__multi_input",
            json!({}),
            "name: Ada; confirmed: true",
            false,
        ),
        // A tool's own error stays the tool's (a completed task with isError).
        (
            "conformance__failing_job",
            json!({}),
            "failing_job failed",
            true,
        ),
    ]
}

/// A legacy stdio host, on each of the two ways its calls go (`PLANMUX_ROUTE`: the raw
/// passthrough's line connection, or rmcp's typed path), calls tools that run only as
/// tasks and gets their results; so does a plan's step.
#[tokio::test]
async fn a_legacy_host_and_a_plan_get_the_results_of_tools_that_run_only_as_tasks() -> R {
    for route in ["in-place", "rmcp"] {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("servers.toml");
        std::fs::write(
            &path,
            format!("{CONFORMANCE}\n[policy]\nconfirm = \"none\"\n"),
        )?;
        let mut cmd = tokio::process::Command::new(common::bin());
        cmd.arg("serve").arg("--config").arg(&path);
        cmd.env("PLANMUX_ROUTE", route);
        cmd.env("PLANMUX_CACHE_DIR", dir.path().join("cache"));
        let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
            .stderr(Stdio::null())
            .spawn()?;
        let host = Recorder {
            capable: true,
            ..Default::default()
        };
        let client = host.serve(transport).await?;
        for (tool, args, want, is_error) in task_only_calls() {
            let result = client.call_tool(call(tool, args)).await?;
            let said = text(&result);
            assert!(said.contains(want), "{route} {tool}: {said}");
            assert_eq!(result.is_error, Some(is_error), "{route} {tool}: {said}");
        }
        let plan = json!({"steps": [
            {"id": "greet", "tool": "conformance__test_tool_with_task", "args": {}},
            {"id": "delete", "tool": "conformance__confirm_delete",
             "args": {"filename": "${greet}"}}
        ]});
        let ran = client.call_tool(call("execute_plan", plan)).await?;
        let said = text(&ran);
        assert!(said.contains("Deleted Hello, Ada!."), "{route}: {said}");
        client.cancel().await?;
    }
    Ok(())
}

/// A task planmux follows ends with the call: a host that never answers the task's
/// question leaves the call to its time limit, and the server is told to cancel the task.
#[tokio::test]
async fn a_followed_task_is_cancelled_when_its_call_runs_out_of_time() -> R {
    let config = format!("{CONFORMANCE}call_timeout_ms = 1500\n");
    let host = Recorder {
        capable: true,
        elicit: Elicit::Hang,
        ..Default::default()
    };
    let proxy = common::start_logged_with(&config, host).await?;
    let args = json!({"filename": "kept.txt"});
    let result = proxy
        .client
        .call_tool(call("conformance__confirm_delete", args))
        .await?;
    let said = text(&result);
    assert_eq!(result.is_error, Some(true), "{said}");
    assert!(said.contains("did not answer"), "{said}");
    assert!(
        proxy.logged("tasks/cancel").await,
        "the task was not cancelled"
    );
    proxy.client.cancel().await?;
    Ok(())
}

/// A 2026-07-28 host that declares the tasks extension, connected to planmux over stdio
/// with `config`, and the folder of its files (`sandbox/` inside).
async fn task_host(
    config: &str,
) -> anyhow::Result<(
    rmcp::service::RunningService<rmcp::RoleClient, Recorder>,
    tempfile::TempDir,
)> {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join("sandbox"))?;
    let path = dir.path().join("servers.toml");
    std::fs::write(&path, config)?;
    let mut cmd = tokio::process::Command::new(common::bin());
    cmd.arg("serve").arg("--config").arg(&path);
    cmd.env("PLANMUX_CACHE_DIR", dir.path().join("cache"));
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()?;
    let host = Recorder {
        capable: true,
        tasks: true,
        ..Default::default()
    };
    let mode = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    Ok((host.serve_with_lifecycle(transport, mode).await?, dir))
}

/// The host's `request`, answered.
async fn ask(
    client: &rmcp::service::RunningService<rmcp::RoleClient, Recorder>,
    request: rmcp::model::ClientRequest,
) -> anyhow::Result<rmcp::model::ServerResult> {
    Ok(client.send_request(request).await?)
}

/// `execute_plan` with `plan`: the task it answers with.
async fn plan_task(
    client: &rmcp::service::RunningService<rmcp::RoleClient, Recorder>,
    plan: serde_json::Value,
) -> anyhow::Result<rmcp::model::Task> {
    use rmcp::model::{CallToolRequest, ClientRequest, ServerResult};
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(call("execute_plan", plan)));
    match ask(client, request).await? {
        ServerResult::CreateTaskResult(created) => Ok(created.task),
        other => anyhow::bail!("not a task: {other:?}"),
    }
}

/// `tasks/get` of `id`, until its status is `until` or it ended (at most 20 s).
async fn task_state(
    client: &rmcp::service::RunningService<rmcp::RoleClient, Recorder>,
    id: &str,
    until: rmcp::model::TaskStatus,
) -> anyhow::Result<rmcp::model::DetailedTask> {
    use rmcp::model::{ClientRequest, GetTaskParams, GetTaskRequest, ServerResult};
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let get = ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(id)));
        let ServerResult::GetTaskResult(got) = ask(client, get).await? else {
            anyhow::bail!("tasks/get answered something else");
        };
        anyhow::ensure!(got.task.task.task_id == id, "another id: {got:?}");
        if got.task.status() == until || got.task.status().is_terminal() {
            return Ok(got.task);
        }
        anyhow::ensure!(tokio::time::Instant::now() < deadline, "still {got:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A host that holds tasks sends a plan with `"as_task": true`: it gets a task at once;
/// `tasks/get` shows the steps done and, once it ends, the plan's result; the approval a
/// write needs is the task's question, answered by `tasks/update`; `tasks/cancel` stops
/// the plan (its server hears of it); an id planmux did not give out is unknown. Without
/// the flag the plan answers in the call.
#[tokio::test]
async fn a_plan_runs_as_a_task_for_a_host_that_holds_tasks() -> R {
    use rmcp::model::{
        CancelTaskParams, CancelTaskRequest, ClientRequest, ErrorCode, GetTaskParams,
        GetTaskRequest, TaskPayload, TaskStatus, UpdateTaskParams, UpdateTaskRequest,
    };
    let config = "[servers.chaos]\nbuiltin = \"chaos\"\n\n\
                  [servers.files]\nbuiltin = \"files\"\ncwd = \"sandbox\"\n";
    let (client, dir) = task_host(config).await?;

    // A plan of two steps, as a task.
    let plan = json!({"as_task": true, "steps": [
        {"id": "nap", "tool": "chaos__sleep", "args": {"ms": 300}},
        {"id": "say", "tool": "chaos__echo", "args": {"slept": "${nap.slept_ms}"}}
    ]});
    let task = plan_task(&client, plan).await?;
    assert_eq!(task.status, TaskStatus::Working, "{task:?}");
    let ended = task_state(&client, &task.task_id, TaskStatus::Completed).await?;
    assert_eq!(ended.status(), TaskStatus::Completed, "{ended:?}");
    let said = ended.task.status_message.clone().unwrap_or_default();
    assert!(said.contains("2/2 done"), "{said}");
    let TaskPayload::Completed { result } = &ended.payload else {
        anyhow::bail!("{ended:?}");
    };
    let said = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(said.contains("succeeded") && said.contains("300"), "{said}");

    // A write needs the user's approval: asked within the task.
    let plan = json!({"as_task": true, "steps": [
        {"id": "w", "tool": "files__write_file", "args": {"path": "note.txt", "content": "hi"}}
    ]});
    let task = plan_task(&client, plan).await?;
    let asking = task_state(&client, &task.task_id, TaskStatus::InputRequired).await?;
    let TaskPayload::InputRequired { input_requests } = &asking.payload else {
        anyhow::bail!("{asking:?}");
    };
    let keys: Vec<&String> = input_requests.keys().collect();
    assert_eq!(keys, ["planmux_approval"], "{asking:?}");
    assert!(
        !dir.path().join("sandbox/note.txt").exists(),
        "ran before approval"
    );
    let yes = [("planmux_approval".to_owned(), json!({"action": "accept"}))].into();
    let update = UpdateTaskParams::new(&task.task_id, yes);
    ask(
        &client,
        ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(update)),
    )
    .await?;
    let ended = task_state(&client, &task.task_id, TaskStatus::Completed).await?;
    assert_eq!(ended.status(), TaskStatus::Completed, "{ended:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("sandbox/note.txt"))?,
        "hi"
    );

    // Cancelled: the step in flight is cancelled at its server.
    let plan = json!({"as_task": true, "steps": [
        {"id": "long", "tool": "chaos__sleep", "args": {"ms": 20000}}
    ]});
    let task = plan_task(&client, plan).await?;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let cancel = CancelTaskParams::new(&task.task_id);
    ask(
        &client,
        ClientRequest::CancelTaskRequest(CancelTaskRequest::new(cancel)),
    )
    .await?;
    let ended = task_state(&client, &task.task_id, TaskStatus::Cancelled).await?;
    assert_eq!(ended.status(), TaskStatus::Cancelled, "{ended:?}");
    let counted = client.call_tool(call("chaos__count", json!({}))).await?;
    assert!(
        text_of(&counted).contains("\"cancelled\":1"),
        "{}",
        text_of(&counted)
    );

    // An id planmux did not give out names no task.
    let get = ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new("t-1")));
    let refused = client.send_request(get).await;
    let code = match refused {
        Err(rmcp::service::ServiceError::McpError(e)) => e.code,
        other => anyhow::bail!("{other:?}"),
    };
    assert_eq!(code, ErrorCode::INVALID_PARAMS);

    // A plan allowed more than a minute is a task too.
    let plan = json!({"timeout_ms": 120000, "steps": [
        {"id": "say", "tool": "chaos__echo", "args": {"a": 1}}
    ]});
    let task = plan_task(&client, plan).await?;
    let ended = task_state(&client, &task.task_id, TaskStatus::Completed).await?;
    assert_eq!(ended.status(), TaskStatus::Completed, "{ended:?}");

    // Without the flag, the plan answers in the call.
    let plan = json!({"steps": [{"id": "say", "tool": "chaos__echo", "args": {"a": 1}}]});
    let ran = client.call_tool(call("execute_plan", plan)).await?;
    assert!(text(&ran).contains("succeeded"), "{}", text(&ran));
    client.cancel().await?;
    Ok(())
}

/// A tool result's whole JSON, as text.
fn text_of(result: &rmcp::model::CallToolResult) -> String {
    serde_json::to_string(result).unwrap_or_default()
}

/// A server whose task keeps showing a question after it was answered (it lags), and one
/// whose task says `input_required` but asks nothing: planmux asks the user once, and
/// waits at the server's interval instead of asking again (or spinning).
#[tokio::test]
async fn a_question_a_lagging_task_still_shows_is_not_asked_again() -> R {
    let server = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/servers/lagging_tasks.py");
    let config = format!(
        "[servers.lag]\ncommand = \"python3\"\nargs = [\"{}\"]\n",
        server.display()
    );
    let host = Recorder {
        capable: true,
        ..Default::default()
    };
    let proxy = common::start_with(&config, host).await?;
    let asked = proxy.client.call_tool(call("lag__ask", json!({}))).await?;
    assert_eq!(text(&asked), "Hello, Ada!", "{asked:?}");
    let questions = proxy.recorder.elicitations();
    assert_eq!(questions, ["What is your name?"]);
    let empty = proxy
        .client
        .call_tool(call("lag__empty", json!({})))
        .await?;
    assert_eq!(text(&empty), "asked nothing", "{empty:?}");
    proxy.client.cancel().await?;
    Ok(())
}

/// A 2025-11-25 stdio host that sends a `task` with its call (SEP-1686; raw lines: no SDK
/// here speaks them): planmux offers tasks in its `initialize` answer, answers the call
/// with a task at once, and `tasks/get`, `tasks/list`, `tasks/result` (the call's result,
/// once the task ended) and `tasks/cancel` (the call's server told to stop) answer for
/// it; an unknown task is invalid params. A call without a `task` answers in the call.
#[test]
fn a_2025_host_holds_the_tasks_of_its_calls() -> R {
    let mut raw = common::RawProxy::start("[servers.chaos]\nbuiltin = \"chaos\"\n")?;
    raw.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#)?;
    let introduced = raw.read()?;
    assert_eq!(
        introduced["result"]["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "{introduced}"
    );
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
    raw.answer(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#)?;

    let created = raw.answer(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"chaos__sleep","arguments":{"ms":300},"task":{"ttl":60000}}}"#)?;
    let task = &created["result"]["task"];
    let id = task["taskId"].as_str().unwrap_or_default().to_owned();
    assert!(!id.is_empty() && task["status"] == "working", "{created}");
    assert!(
        task.get("ttl").is_some() && task.get("createdAt").is_some(),
        "{created}"
    );
    let get = |n: u32| {
        format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"tasks/get","params":{{"taskId":"{id}"}}}}"#)
    };
    let got = raw.answer(&get(4))?;
    assert_eq!(got["result"]["taskId"], json!(id), "{got}");
    let listed = raw.answer(r#"{"jsonrpc":"2.0","id":5,"method":"tasks/list"}"#)?;
    let ids: Vec<&Value> = listed["result"]["tasks"]
        .as_array()
        .map(|tasks| tasks.iter().map(|t| &t["taskId"]).collect())
        .unwrap_or_default();
    assert_eq!(ids, [&json!(id)], "{listed}");
    let result = raw.answer(&format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"tasks/result","params":{{"taskId":"{id}"}}}}"#
    ))?;
    let slept = result["result"]["structuredContent"]["slept_ms"].as_f64();
    assert_eq!(slept, Some(300.0), "{result}");
    assert!(result["result"].get("resultType").is_none(), "{result}");
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        json!(id)
    );
    let done = raw.answer(&get(7))?;
    assert_eq!(done["result"]["status"], "completed", "{done}");

    // Cancelled: the server hears of it.
    let created = raw.answer(r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"chaos__sleep","arguments":{"ms":20000},"task":{}}}"#)?;
    let long = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let cancelled = raw.answer(&format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tasks/cancel","params":{{"taskId":"{long}"}}}}"#
    ))?;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let mut count = Value::Null;
    for n in 0..50 {
        count = raw.answer(&common::call_line(100 + n, "chaos__count", json!({})))?;
        if count["result"]["structuredContent"]["cancelled"] == 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        count["result"]["structuredContent"]["cancelled"], 1,
        "{count}"
    );

    let unknown =
        raw.answer(r#"{"jsonrpc":"2.0","id":10,"method":"tasks/get","params":{"taskId":"nope"}}"#)?;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let plain = raw.answer(&common::call_line(11, "chaos__echo", json!({"a": 1})))?;
    assert!(plain["result"].get("task").is_none(), "{plain}");
    // Each task's end was told (`notifications/tasks/status`, optional in 2025-11-25).
    let told: Vec<(Value, Value)> = raw
        .notified
        .iter()
        .filter(|n| n["method"] == "notifications/tasks/status")
        .map(|n| (n["params"]["taskId"].clone(), n["params"]["status"].clone()))
        .collect();
    assert_eq!(
        told,
        [
            (json!(id), json!("completed")),
            (json!(long), json!("cancelled"))
        ],
        "{:?}",
        raw.notified
    );
    Ok(())
}
