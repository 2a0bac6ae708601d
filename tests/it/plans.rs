//! execute_plan end to end: the binary as a child, driven by rmcp's client, with the
//! downstreams as real child processes.

use std::process::Command;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, ClientRequest, NumberOrString, ProgressToken, ReadResourceRequestParams,
    RequestMetaObject, ResourceContents, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use crate::common::{self, call, demo_server, start, text};

type R = anyhow::Result<()>;

fn config(proxy: &str) -> String {
    format!(
        "[proxy]\n{proxy}\n{}{}[servers.metrics]\nbuiltin = \"metrics\"\n",
        demo_server("chaos", "chaos", ""),
        demo_server("weather", "weather", "")
    )
}

fn cpu_plan() -> Value {
    json!({
        "goal": "Check if CPU usage exceeds 80%",
        "steps": [
            {"id": "list", "tool": "metrics__list_metrics", "args": {"category": "compute"}},
            {"id": "cpu", "tool": "metrics__query_metric", "args": {"name": "$ref:list.metrics[0].name"}},
            {"id": "check", "tool": "metrics__check_threshold",
             "args": {"metric": "${cpu.name}", "value": "$ref:cpu.current", "threshold": 80, "op": "gt"}}
        ],
        "outputs": ["check"]
    })
}

#[tokio::test]
async fn a_plan_returns_only_what_it_asked_for() -> R {
    let proxy = start(&config("")).await?;
    let result = proxy
        .client
        .call_tool(call("execute_plan", cpu_plan()))
        .await?;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let structured = result.structured_content.clone().unwrap_or_default();
    assert_eq!(structured["status"], "succeeded");
    assert_eq!(
        structured["outputs"],
        json!({"check": {"metric": "cpu_usage", "value": 72.5, "threshold": 80.0, "op": "gt", "exceeded": false}})
    );
    assert_eq!(structured["stats"]["succeeded"], 3);
    assert!(
        structured["steps"]["list"].get("output").is_none(),
        "intermediate values stay out"
    );
    let text = text(&result);
    assert!(
        text.starts_with("plan succeeded: 3/3 steps succeeded"),
        "{text}"
    );
    assert!(
        !text.contains("memory_usage"),
        "intermediate values stay out of the text too"
    );

    // The same plan as a JSON string.
    let as_string = proxy
        .client
        .call_tool(call(
            "execute_plan",
            json!({"plan": cpu_plan().to_string()}),
        ))
        .await?;
    assert_eq!(
        as_string.structured_content.map(|s| s["outputs"].clone()),
        Some(structured["outputs"].clone())
    );
    Ok(())
}

#[tokio::test]
async fn an_invalid_plan_lists_every_problem_and_runs_nothing() -> R {
    let proxy = start(&config("")).await?;
    let plan = json!({"steps": [
        {"id": "a", "tool": "chaos__count"},
        {"id": "a", "tool": "metrics__query_metrics", "args": {"name": "${missing.x}"}}
    ]});
    let result = proxy.client.call_tool(call("execute_plan", plan)).await?;
    assert_eq!(result.is_error, Some(true));
    let message = text(&result);
    assert!(
        message.contains("duplicate")
            && message.contains("metrics__query_metric")
            && message.contains("missing"),
        "{message}"
    );
    let count = proxy
        .client
        .call_tool(call("chaos__count", json!({})))
        .await?;
    assert_eq!(
        count.structured_content.map(|c| c["calls"].clone()),
        Some(json!(1)),
        "nothing ran"
    );
    Ok(())
}

#[tokio::test]
async fn progress_comes_once_per_finished_step() -> R {
    let proxy = start(&config("")).await?;
    let token = ProgressToken(NumberOrString::String("plan-1".into()));
    let meta = RequestMetaObject::with_progress_token(token);
    let request =
        ClientRequest::CallToolRequest(CallToolRequest::new(call("execute_plan", cpu_plan())));
    let handle = proxy
        .client
        .send_cancellable_request(request, PeerRequestOptions::no_options().with_meta(meta))
        .await?;
    let sent = handle.progress_token.clone();
    assert!(matches!(
        handle.await_response().await?,
        ServerResult::CallToolResult(_)
    ));
    let progress = proxy.recorder.progress();
    assert!(progress.iter().all(|p| p.progress_token == sent));
    let steps: Vec<(f64, Option<f64>)> = progress.iter().map(|p| (p.progress, p.total)).collect();
    assert_eq!(
        steps,
        vec![(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))],
        "all before the response, in order"
    );
    let message = progress[1].message.clone().unwrap_or_default();
    assert!(
        message.starts_with("cpu succeeded: metrics__query_metric, "),
        "{message}"
    );
    assert!(message.ends_with(" ms"), "{message}");

    // A value step calls no tool: its line says so.
    let token = ProgressToken(NumberOrString::String("plan-2".into()));
    let meta = RequestMetaObject::with_progress_token(token);
    let plan = json!({"steps": [{"id": "v", "value": {"a": 1}}]});
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(call("execute_plan", plan)));
    let handle = proxy
        .client
        .send_cancellable_request(request, PeerRequestOptions::no_options().with_meta(meta))
        .await?;
    handle.await_response().await?;
    let progress = proxy.recorder.progress();
    let message = progress
        .last()
        .and_then(|p| p.message.clone())
        .unwrap_or_default();
    assert!(message.starts_with("v succeeded: value, "), "{message}");
    Ok(())
}

#[tokio::test]
async fn cancelling_a_plan_cancels_its_steps_downstream() -> R {
    let proxy = start(&config("")).await?;
    let plan = json!({"steps": [{"id": "long", "tool": "chaos__sleep", "args": {"ms": 30000}}]});
    proxy
        .call_then_cancel("execute_plan", plan, "changed my mind")
        .await?;
    let cancelled = common::wait_for_cancelled(&proxy, "chaos__count", 1).await?;
    assert!(cancelled, "the downstream sleep was not cancelled");
    Ok(())
}

#[tokio::test]
async fn the_run_record_is_a_resource() -> R {
    let proxy = start(&config("")).await?;
    let result = proxy
        .client
        .call_tool(call("execute_plan", cpu_plan()))
        .await?;
    let run_id = result
        .structured_content
        .and_then(|s| s["run_id"].as_str().map(String::from))
        .unwrap_or_default();
    let uri = format!("planmux://runs/{run_id}");
    let listed = proxy.client.list_all_resources().await?;
    assert!(listed.iter().any(|r| r.uri == uri), "{listed:?}");
    let read = proxy
        .client
        .read_resource(ReadResourceRequestParams::new(uri.clone()))
        .await?;
    let Some(ResourceContents::TextResourceContents { text, .. }) = read.contents.first() else {
        anyhow::bail!("no text contents");
    };
    let record: Value = serde_json::from_str(text)?;
    assert_eq!(record["run_id"], run_id.as_str());
    assert_eq!(
        record["steps"][1]["args"],
        json!({"name": "cpu_usage"}),
        "resolved arguments are kept"
    );
    assert_eq!(
        record["steps"][0]["output"]["metrics"][1]["name"], "memory_usage",
        "every output is kept"
    );
    let missing = proxy
        .client
        .read_resource(ReadResourceRequestParams::new("planmux://runs/nope"))
        .await;
    assert!(missing.is_err());
    Ok(())
}

#[tokio::test]
async fn a_downstream_killed_mid_plan_fails_its_steps_and_the_rest_finish() -> R {
    let proxy = start(&config("")).await?;
    let pid = proxy.chaos_pid().await?;
    let plan = json!({"steps": [
        {"id": "doomed", "tool": "chaos__sleep", "args": {"ms": 20000}},
        {"id": "after", "tool": "chaos__echo", "args": {"x": "$ref:doomed"}},
        {"id": "fine", "tool": "weather__get_weather", "args": {"location": "Rome"}},
        {"id": "slow_fine", "tool": "weather__get_weather", "args": {"location": "$ref:fine.location"}}
    ]});
    let client = proxy.client.peer().clone();
    let running = tokio::spawn(async move { client.call_tool(call("execute_plan", plan)).await });
    tokio::time::sleep(Duration::from_millis(400)).await;
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()?;
    let result = tokio::time::timeout(Duration::from_secs(10), running).await???;
    let s = result.structured_content.unwrap_or_default();
    assert_eq!(s["status"], "partial", "{s:#}");
    assert_eq!(s["steps"]["doomed"]["status"], "failed");
    assert!(
        s["steps"]["doomed"]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("server 'chaos' went away")),
        "{s:#}"
    );
    assert_eq!(s["steps"]["after"]["reason"], "dependency 'doomed' failed");
    assert_eq!(s["steps"]["slow_fine"]["status"], "succeeded");
    Ok(())
}

#[tokio::test]
async fn long_outputs_are_truncated_and_say_so() -> R {
    let proxy = start(&config("max_output_chars = 100")).await?;
    let plan = json!({"steps": [{"id": "big", "tool": "chaos__bytes", "args": {"n": 5000}}]});
    let result = proxy.client.call_tool(call("execute_plan", plan)).await?;
    let s = result.structured_content.unwrap_or_default();
    let value = s["outputs"]["big"].as_str().unwrap_or_default();
    assert!(
        value.len() < 200 && value.ends_with("more chars]"),
        "{value}"
    );
    assert_eq!(s["truncated"]["big"]["original_chars"], 5002);
    Ok(())
}

#[tokio::test]
async fn fail_fast_and_continue_through_the_binary() -> R {
    let proxy = start(&config("")).await?;
    let fast = json!({"on_error": "fail_fast", "steps": [
        {"id": "bad", "tool": "chaos__fail", "args": {"message": "nope"}},
        {"id": "long", "tool": "chaos__sleep", "args": {"ms": 20000}}
    ]});
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        proxy.client.call_tool(call("execute_plan", fast)),
    )
    .await??;
    let s = result.structured_content.unwrap_or_default();
    assert_eq!(
        (s["status"].clone(), s["steps"]["long"]["status"].clone()),
        (json!("failed"), json!("cancelled"))
    );
    assert_eq!(result.is_error, Some(true), "nothing asked for succeeded");
    let cont = json!({"on_error": "continue", "steps": [
        {"id": "bad", "tool": "chaos__fail", "args": {"message": "quota exceeded"}},
        {"id": "report", "tool": "chaos__echo", "args": {"why": "$ref:bad"}}
    ], "outputs": ["report"]});
    let result = proxy.client.call_tool(call("execute_plan", cont)).await?;
    let s = result.structured_content.unwrap_or_default();
    assert_eq!(s["outputs"]["report"], json!({"why": "quota exceeded"}));
    assert_eq!(s["status"], "partial");
    assert_eq!(result.is_error, Some(false));
    Ok(())
}

/// Conditions, a loop and a value step through a real client; and a lazy plan answers
/// the schedule `planmux validate --json` prints for it, with nothing run.
#[tokio::test]
async fn conditions_loops_values_and_lazy_plans_through_a_client() -> R {
    let proxy = start(&config("")).await?;
    let plan = json!({
        "inputs": {"cities": ["Oslo", "Lima", "Pune"]},
        "steps": [
            {"id": "weather", "foreach": "$ref:input.cities", "concurrency": 2,
             "tool": "weather__get_weather", "args": {"location": "$ref:item"}},
            {"id": "names", "foreach": "$ref:weather", "value": "$ref:item.location"},
            {"id": "cpu", "tool": "metrics__query_metric", "args": {"name": "cpu_usage"}},
            {"id": "hot", "when": {"$ref": "cpu.current", "gt": 80},
             "tool": "chaos__echo", "args": {"alert": "${cpu.current}"}}
        ],
        "outputs": ["names", "hot"]
    });
    let result = proxy
        .client
        .call_tool(call("execute_plan", plan.clone()))
        .await?;
    let structured = result.structured_content.clone().unwrap_or_default();
    assert_eq!(structured["status"], "succeeded", "{structured:#}");
    assert_eq!(
        structured["outputs"]["names"],
        json!(["Oslo", "Lima", "Pune"])
    );
    assert_eq!(structured["steps"]["hot"]["status"], "skipped");
    assert_eq!(structured["steps"]["hot"]["reason"], "condition false");
    assert_eq!(
        structured["steps"]["weather"]["items"],
        json!({"total": 3, "succeeded": 3})
    );

    let mut lazy = plan.clone();
    lazy["mode"] = json!("lazy");
    let result = proxy.client.call_tool(call("execute_plan", lazy)).await?;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let planned = result.structured_content.clone().unwrap_or_default();
    assert_eq!(planned["status"], "planned", "{planned:#}");
    assert!(text(&result).starts_with("Nothing ran (lazy plan)"));
    let runs_before = structured["run_id"].clone();
    assert!(planned.get("run_id").is_none(), "a lazy plan makes no run");
    assert!(!runs_before.is_null());

    let file = proxy.dir.path().join("plan.json");
    std::fs::write(&file, plan.to_string())?;
    let out = Command::new(common::bin())
        .args(["validate", "--json", "--config"])
        .arg(proxy.dir.path().join("servers.toml"))
        .arg(&file)
        .output()?;
    let validated: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(validated["schedule"], planned["schedule"]);
    assert_eq!(
        planned["schedule"]["steps"]["hot"]["when"],
        "cpu.current gt 80"
    );
    assert_eq!(
        planned["schedule"]["steps"]["weather"]["foreach"],
        "input.cities, 2 at a time"
    );
    Ok(())
}

/// examples/pipelines.toml with its plan paths made absolute, less the servers named in
/// `without`.
fn pipelines_config(without: &[&str]) -> anyhow::Result<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let text = std::fs::read_to_string(root.join("pipelines.toml"))?;
    let mut text = text.replace(
        "plan = \"pipelines/",
        &format!("plan = \"{}/pipelines/", root.display()),
    );
    for server in without {
        text = text.replace(&format!("[servers.{server}]\nbuiltin = \"{server}\"\n"), "");
    }
    Ok(text)
}

/// Pipelines are listed as tools with their schema and tier, run as plans (nested too),
/// and one whose tool is gone says which.
#[tokio::test]
async fn pipelines_are_tools_that_run_their_plans() -> R {
    let proxy = start(&pipelines_config(&[])?).await?;
    let tools = proxy.client.list_all_tools().await?;
    let city = tools
        .iter()
        .find(|t| t.name == "city_weather")
        .ok_or_else(|| anyhow::anyhow!("city_weather is not listed"))?;
    assert_eq!(city.input_schema["required"], json!(["cities"]));
    assert_eq!(
        city.annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(true)
    );
    let result = proxy
        .client
        .call_tool(call("city_weather", json!({"cities": ["Oslo", "Lima"]})))
        .await?;
    let structured = result.structured_content.clone().unwrap_or_default();
    assert_eq!(structured["status"], "succeeded", "{structured:#}");
    let lines = structured["outputs"]["lines"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].as_str().is_some_and(|l| l.starts_with("Oslo: ")));

    // morning_report calls city_weather as a step.
    let result = proxy
        .client
        .call_tool(call("morning_report", json!({})))
        .await?;
    let structured = result.structured_content.clone().unwrap_or_default();
    assert_eq!(structured["status"], "succeeded", "{structured:#}");
    let report = &structured["outputs"]["report"];
    assert_eq!(report["cpu"], "72.5%");
    assert_eq!(
        report["weather"].as_array().map(Vec::len),
        Some(3),
        "{report:#}"
    );
    // And a plan may call a pipeline like any tool.
    let result = proxy
        .client
        .call_tool(call(
            "execute_plan",
            json!({"steps": [{"id": "w", "tool": "city_weather", "args": {"cities": ["Rome"]}}],
                   "outputs": {"line": "$ref:w.outputs.lines[0]"}}),
        ))
        .await?;
    let structured = result.structured_content.clone().unwrap_or_default();
    assert!(
        structured["outputs"]["line"]
            .as_str()
            .is_some_and(|l| l.starts_with("Rome: ")),
        "{structured:#}"
    );

    // Without the metrics server, morning_report cannot run, and says why.
    let proxy = start(&pipelines_config(&["metrics"])?).await?;
    let names = proxy.tool_names().await?;
    assert!(names.contains(&"city_weather".to_string()), "{names:?}");
    assert!(!names.contains(&"morning_report".to_string()), "{names:?}");
    let result = proxy
        .client
        .call_tool(call("morning_report", json!({})))
        .await?;
    assert_eq!(result.is_error, Some(true));
    let text = text(&result);
    assert!(
        text.contains("pipeline 'morning_report' cannot run")
            && text.contains("metrics__query_metric"),
        "{text}"
    );
    Ok(())
}

/// A pipeline's tier is its highest step's: the default config's cpu_alert writes a file,
/// so calling it needs the user's approval like any plan that writes.
#[tokio::test]
async fn a_pipeline_that_writes_needs_approval() -> R {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = std::fs::read_to_string(root.join("servers.toml"))?;
    let proxy = start(&config).await?;
    // Arguments that do not fit its input schema are refused before anything is asked.
    for wrong in [json!({}), json!({"threshold": "high"})] {
        let refused = proxy.client.call_tool(call("cpu_alert", wrong)).await?;
        assert_eq!(refused.is_error, Some(true), "{}", text(&refused));
        assert!(
            text(&refused).contains("arguments do not fit its input schema")
                && text(&refused).contains("threshold"),
            "{}",
            text(&refused)
        );
    }
    let result = proxy
        .client
        .call_tool(call("cpu_alert", json!({"threshold": 50})))
        .await?;
    let structured = result.structured_content.clone().unwrap_or_default();
    assert_eq!(structured["status"], "needs_approval", "{structured:#}");
    assert_eq!(structured["approval"]["steps"][0]["id"], "alert");
    assert!(!proxy.dir.path().join("sandbox/alerts/cpu.txt").exists());
    let approval = &structured["approval"];
    let result = proxy
        .client
        .call_tool(call(
            "approve_plan",
            json!({"token": approval["token"], "steps": approval["steps"], "inputs": approval["inputs"]}),
        ))
        .await?;
    let structured = result.structured_content.clone().unwrap_or_default();
    assert_eq!(structured["status"], "succeeded", "{structured:#}");
    assert!(proxy.dir.path().join("sandbox/alerts/cpu.txt").is_file());
    Ok(())
}

/// A tool that takes a pipeline's name stays callable, and the pipeline says it cannot
/// run.
#[tokio::test]
async fn a_tool_that_takes_a_pipeline_name_stays_callable() -> R {
    let config = format!(
        "{}[[pipelines.echo.plan.steps]]\nvalue = 1\n",
        demo_server("chaos", "chaos", "namespace = false")
    );
    let proxy = start(&config).await?;
    let result = proxy
        .client
        .call_tool(call("echo", json!({"said": "hi"})))
        .await?;
    assert_ne!(result.is_error, Some(true), "{}", text(&result));
    assert!(text(&result).contains("hi"), "{}", text(&result));
    let names = proxy.tool_names().await?;
    assert_eq!(
        names.iter().filter(|n| *n == "echo").count(),
        1,
        "{names:?}"
    );
    let out = Command::new(common::bin())
        .args(["check", "--config"])
        .arg(proxy.dir.path().join("servers.toml"))
        .output()?;
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("echo  CANNOT RUN  its name is taken by the tool 'echo' of server 'chaos'"),
        "{report}"
    );
    assert_eq!(out.status.code(), Some(1));
    Ok(())
}

/// Seed 004's replanning: a run's state slots stay on the session's whiteboard, so the
/// next plan reads `†state.error` that no call of its own writes; a slot nobody wrote
/// is still an error, and a plan's own write wins over the board.
#[tokio::test]
async fn the_next_plan_reads_the_slots_the_last_one_wrote() -> R {
    let proxy = start(&config("")).await?;
    let optimistic = json!([
        {"_tool": "chaos__fail", "message": "card declined", "_outputPath": "†state.receipt || †state.error"},
        {"_tool": "chaos__echo", "receipt": "†state.receipt"}
    ]);
    let first = proxy
        .client
        .call_tool(call("execute_plan", json!({ "plan": optimistic })))
        .await?;
    assert_eq!(first.is_error, Some(false), "{}", text(&first));
    let replanned = json!({"calls": [{"_tool": "chaos__echo", "message": "†state.error"}],
                           "output": {"status": "Failed"}});
    let second = proxy
        .client
        .call_tool(call("execute_plan", replanned))
        .await?;
    assert_eq!(second.is_error, Some(false), "{}", text(&second));
    assert!(text(&second).contains("card declined"), "{}", text(&second));
    let unknown = json!({"calls": [{"_tool": "chaos__echo", "message": "†state.nobody"}]});
    let refused = proxy
        .client
        .call_tool(call("execute_plan", unknown))
        .await?;
    assert!(
        text(&refused).contains("no earlier step writes state slot \"nobody\""),
        "{}",
        text(&refused)
    );
    // The payment goes through on a later try: the stale error leaves the board.
    let succeeded = json!([
        {"_tool": "chaos__echo", "message": "paid", "_outputPath": "†state.receipt || †state.error"}
    ]);
    proxy
        .client
        .call_tool(call("execute_plan", json!({ "plan": succeeded })))
        .await?;
    let stale = json!({"calls": [{"_tool": "chaos__echo", "message": "†state.error"}]});
    let refused = proxy.client.call_tool(call("execute_plan", stale)).await?;
    assert!(
        text(&refused).contains("no earlier step writes state slot \"error\""),
        "{}",
        text(&refused)
    );
    Ok(())
}

/// A plan that reads the board and needs approval shows what it reads; when the board
/// changes before `approve_plan`, nothing runs.
#[tokio::test]
async fn approval_covers_what_a_plan_reads_from_the_board() -> R {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let proxy = start(&std::fs::read_to_string(root.join("servers.toml"))?).await?;
    let fail = |message: &str| {
        json!({"plan": [{"_tool": "chaos__fail", "message": message,
                         "_outputPath": "†state.receipt || †state.error"}]})
    };
    proxy
        .client
        .call_tool(call("execute_plan", fail("first")))
        .await?;
    let save = json!({"plan": [{"_tool": "files__write_file", "path": "error.txt", "content": "†state.error"}]});
    let asked = proxy.client.call_tool(call("execute_plan", save)).await?;
    let structured = asked.structured_content.clone().unwrap_or_default();
    assert_eq!(structured["status"], "needs_approval", "{structured:#}");
    let approval = structured["approval"].clone();
    assert!(
        approval["inputs"]["†state"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("first")),
        "{approval:#}"
    );
    assert_eq!(
        approval["inputs"]["†state"].as_object().map(|o| o.len()),
        Some(1),
        "only what the plan reads: {approval:#}"
    );
    proxy
        .client
        .call_tool(call("execute_plan", fail("second")))
        .await?;
    let refused = proxy
        .client
        .call_tool(call(
            "approve_plan",
            json!({"token": approval["token"], "steps": approval["steps"], "inputs": approval["inputs"]}),
        ))
        .await?;
    assert_eq!(refused.is_error, Some(true), "{}", text(&refused));
    assert!(text(&refused).contains("changed"), "{}", text(&refused));
    assert!(!proxy.dir.path().join("sandbox/error.txt").exists());
    Ok(())
}
