//! Plan approval, end to end through the real binary (DESIGN.md §5): a plan that calls a
//! write or destructive tool runs only after the user said yes, asked through elicitation
//! when the host can show it, otherwise through `needs_approval` and `approve_plan`; and
//! nothing runs when the answer is no, late, or for another plan.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{Elicit, Recorder, call, json, start_with, text};

type R = anyhow::Result<()>;

/// The files demo in a sandbox beside the config, and chaos.
const CONFIG: &str = "[proxy]\nplan_timeout_ms = 3000\naudit_log = \"audit.jsonl\"\n\
    [servers.files]\nbuiltin = \"files\"\ncwd = \"sandbox\"\n\
    [servers.chaos]\nbuiltin = \"chaos\"\n";

/// Reads a listing, then writes a note whose content is a reference: the write needs
/// approval, the listing does not.
fn writing_plan() -> Value {
    json!({
        "goal": "save a note",
        "steps": [
            {"id": "list", "tool": "files__list_files"},
            {"id": "save", "tool": "files__write_file",
             "args": {"path": "note.txt", "content": "files: ${list}"}},
            {"id": "echo", "tool": "chaos__echo", "args": {"after": "$ref:save"}}
        ]
    })
}

fn note(dir: &Path) -> std::path::PathBuf {
    dir.join("sandbox/note.txt")
}

fn host(elicit: Elicit) -> Recorder {
    Recorder {
        capable: true,
        elicit,
        ..Default::default()
    }
}

/// A host without elicitation: `needs_approval` with a token and the steps as written;
/// nothing ran. `approve_plan` with the steps repeated runs it once; a changed step, a
/// reused or unknown token are refused with nothing run.
#[tokio::test]
async fn without_elicitation_the_model_relays_a_token_through_approve_plan() -> R {
    let proxy = start_with(CONFIG, Recorder::default()).await?;
    let tools = proxy.client.list_all_tools().await?;
    let approve = tools.iter().find(|t| t.name == "approve_plan");
    let hints = approve
        .and_then(|t| t.annotations.clone())
        .unwrap_or_default();
    assert_eq!(
        hints.destructive_hint,
        Some(true),
        "approve_plan: {approve:?}"
    );
    let plan_tool = tools.iter().find(|t| t.name == "execute_plan");
    let plan_hints = plan_tool
        .and_then(|t| t.annotations.clone())
        .unwrap_or_default();
    assert_eq!(
        (plan_hints.read_only_hint, plan_hints.destructive_hint),
        (Some(false), Some(true)),
        "execute_plan can reach a destructive tool"
    );

    let asked = proxy
        .client
        .call_tool(call("execute_plan", writing_plan()))
        .await?;
    let result = json(&asked)["structuredContent"].clone();
    assert_eq!(asked.is_error, Some(false), "{result:#}");
    assert_eq!(result["status"], "needs_approval", "{result:#}");
    let approval = result["approval"].clone();
    assert_eq!(approval["expires_in_s"], 600);
    assert_eq!(
        approval["steps"],
        json!([{"id": "save", "tool": "files__write_file", "tier": "destructive",
                "args": {"path": "note.txt", "content": "files: ${list}"}}]),
        "only the write, its arguments as written"
    );
    assert!(text(&asked).contains("approve_plan"), "{}", text(&asked));
    assert!(
        !note(proxy.dir.path()).exists(),
        "the write ran before approval"
    );

    let token = approval["token"].as_str().unwrap_or_default();
    let mut changed = approval["steps"].clone();
    changed[0]["args"]["path"] = json!("other.txt");
    let refused = proxy
        .client
        .call_tool(call(
            "approve_plan",
            json!({"token": token, "steps": changed}),
        ))
        .await?;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("differs in 'args'"),
        "{}",
        text(&refused)
    );
    let unknown = proxy
        .client
        .call_tool(call(
            "approve_plan",
            json!({"token": "pa_0", "steps": approval["steps"]}),
        ))
        .await?;
    assert!(
        text(&unknown).contains("unknown approval token"),
        "{}",
        text(&unknown)
    );
    assert!(!note(proxy.dir.path()).exists());

    let ran = proxy
        .client
        .call_tool(call("approve_plan", approval.clone()))
        .await?;
    let result = json(&ran)["structuredContent"].clone();
    assert_eq!(result["status"], "succeeded", "{result:#}");
    assert!(note(proxy.dir.path()).is_file());
    let again = proxy
        .client
        .call_tool(call("approve_plan", approval))
        .await?;
    assert_eq!(again.is_error, Some(true));
    assert!(text(&again).contains("already used"), "{}", text(&again));

    // A plan of reads alone runs at once.
    let reads = json!({"steps": [{"tool": "files__read_file", "args": {"path": "note.txt"}}]});
    let read = proxy.client.call_tool(call("execute_plan", reads)).await?;
    assert_eq!(json(&read)["structuredContent"]["status"], "succeeded");
    Ok(())
}

/// A host with elicitation is asked once, with the goal and each step; accepting runs
/// the plan, declining or cancelling runs nothing and says so.
#[tokio::test]
async fn a_host_with_elicitation_asks_its_user_once() -> R {
    for (answer, ran) in [
        (Elicit::Accept, true),
        (Elicit::Decline, false),
        (Elicit::Cancel, false),
    ] {
        let recorder = host(answer);
        let proxy = start_with(CONFIG, recorder.clone()).await?;
        let result = proxy
            .client
            .call_tool(call("execute_plan", writing_plan()))
            .await?;
        let asked = recorder.elicitations();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert!(asked[0].contains("goal: \"save a note\""), "{}", asked[0]);
        assert!(
            asked[0].contains("save → files__write_file (destructive)")
                && asked[0].contains("${list}"),
            "{}",
            asked[0]
        );
        assert_eq!(note(proxy.dir.path()).is_file(), ran);
        // The answer is in the audit trail, for the step that needed it.
        let audit = std::fs::read_to_string(proxy.dir.path().join("audit.jsonl"))?;
        let decision = if ran { "approved" } else { "declined" };
        assert!(
            audit.lines().any(|l| l.contains("\"path\":\"approval\"")
                && l.contains(&format!("\"decision\":\"{decision}\""))
                && l.contains("\"step\":\"save\"")
                && l.contains("\"approved_by\":\"host\"")),
            "{audit}"
        );
        if ran {
            assert_eq!(json(&result)["structuredContent"]["status"], "succeeded");
        } else {
            assert_eq!(result.is_error, Some(true));
            let said = text(&result);
            assert!(
                said.contains("the user") && said.contains("nothing ran"),
                "{said}"
            );
        }
        proxy.client.cancel().await?;
    }
    Ok(())
}

/// A host that never answers: the plan ends after its time limit, with nothing run, and
/// planmux keeps serving.
#[tokio::test]
async fn an_unanswered_approval_ends_the_plan_with_nothing_run() -> R {
    let proxy = start_with(CONFIG, host(Elicit::Hang)).await?;
    let result = proxy
        .client
        .call_tool(call("execute_plan", writing_plan()))
        .await?;
    assert_eq!(result.is_error, Some(true));
    assert!(
        text(&result).contains("did not answer the approval request within 3000 ms"),
        "{}",
        text(&result)
    );
    assert!(!note(proxy.dir.path()).exists());
    let echo = proxy
        .client
        .call_tool(call("chaos__echo", json!({"still": "serving"})))
        .await?;
    assert_eq!(echo.is_error, Some(false));
    Ok(())
}

/// `confirm = "none"` asks nothing and lists no approve_plan; `confirm = "destructive"`
/// lets a write tool through and still asks for a destructive one.
#[tokio::test]
async fn confirm_sets_which_tiers_are_asked_about() -> R {
    let relaxed = format!("[policy]\nconfirm = \"none\"\n{CONFIG}");
    let proxy = start_with(&relaxed, Recorder::default()).await?;
    let tools = proxy.client.list_all_tools().await?;
    assert!(!tools.iter().any(|t| t.name == "approve_plan"));
    let ran = proxy
        .client
        .call_tool(call("execute_plan", writing_plan()))
        .await?;
    assert_eq!(json(&ran)["structuredContent"]["status"], "succeeded");
    proxy.client.cancel().await?;

    let config = format!("[policy]\nconfirm = \"destructive\"\n{CONFIG}");
    let proxy = start_with(&config, Recorder::default()).await?;
    let toggle = json!({"steps": [{"tool": "chaos__toggle_extra"}]});
    let ran = proxy.client.call_tool(call("execute_plan", toggle)).await?;
    assert_eq!(json(&ran)["structuredContent"]["status"], "succeeded");
    let asked = proxy
        .client
        .call_tool(call("execute_plan", writing_plan()))
        .await?;
    assert_eq!(
        json(&asked)["structuredContent"]["status"],
        "needs_approval"
    );
    Ok(())
}

/// Fail closed: a run that was never approved is refused at the checkpoint, step by step,
/// even when the caller skips asking. Reads still run; the write does not.
#[tokio::test]
async fn the_checkpoint_refuses_an_unapproved_write_whoever_runs_the_plan() -> R {
    use std::sync::Arc;

    use planmux::config::Config;
    use planmux::downstream::Downstreams;
    use planmux::exec::{Quiet, StepStatus};
    use planmux::policy::Approver;
    use planmux::runner::PlanRunner;
    use tokio_util::sync::CancellationToken;

    let dir = tempfile::tempdir()?;
    let config = Config::parse(CONFIG, "servers.toml", dir.path(), &|_| None)?;
    let downstreams = Downstreams::start(&config, Arc::default()).await;
    let runner = PlanRunner::new(downstreams.clone(), &config);
    let cancel = CancellationToken::new();
    let checked = match runner
        .check(
            writing_plan(),
            None,
            &planmux::policy::Grant::all(),
            &cancel,
        )
        .await
    {
        Ok(checked) => checked,
        Err(_) => anyhow::bail!("the plan did not validate"),
    };
    let asked = checked.approval.clone();
    assert_eq!(asked.as_ref().map(|a| a.steps.len()), Some(1));

    let record = runner
        .run(&checked.plan, None, None, &Quiet, cancel.clone())
        .await;
    let status = |id: &str| {
        record
            .steps
            .iter()
            .find(|s| s.id == id)
            .map(|s| (s.status, s.error.clone().unwrap_or_default()))
    };
    assert_eq!(status("list").map(|s| s.0), Some(StepStatus::Succeeded));
    let (save, error) = status("save").unwrap_or((StepStatus::Succeeded, String::new()));
    assert_eq!(save, StepStatus::Failed);
    assert!(error.contains("needs the user's approval"), "{error}");
    assert!(!note(dir.path()).exists());

    // The same plan with the approval the user gave runs the write.
    let approval = asked.map(|a| runner.approve(&a, Approver::Flag, None));
    let record = runner
        .run(&checked.plan, approval, None, &Quiet, cancel)
        .await;
    assert!(
        record
            .steps
            .iter()
            .all(|s| s.status == StepStatus::Succeeded),
        "{:?}",
        record.steps
    );
    assert!(note(dir.path()).is_file());
    downstreams.shutdown().await;
    Ok(())
}

/// What the user is shown is what runs: the plan's inputs are shown and must be repeated
/// to approve_plan; arguments too large to show are refused, with nothing run.
#[tokio::test]
async fn inputs_are_shown_and_what_cannot_be_shown_does_not_run() -> R {
    let proxy = start_with(CONFIG, Recorder::default()).await?;
    let plan = json!({
        "inputs": {"name": "from-input.txt"},
        "steps": [{"id": "save", "tool": "files__write_file",
                   "args": {"path": "${input.name}", "content": "hi"}}]
    });
    let asked = proxy.client.call_tool(call("execute_plan", plan)).await?;
    let approval = json(&asked)["structuredContent"]["approval"].clone();
    assert_eq!(
        approval["inputs"],
        json!({"name": "from-input.txt"}),
        "{approval:#}"
    );
    let without = json!({"token": approval["token"], "steps": approval["steps"]});
    let refused = proxy
        .client
        .call_tool(call("approve_plan", without))
        .await?;
    assert!(
        text(&refused).contains("'inputs' differs"),
        "{}",
        text(&refused)
    );
    let ran = proxy
        .client
        .call_tool(call("approve_plan", approval))
        .await?;
    assert_eq!(json(&ran)["structuredContent"]["status"], "succeeded");
    assert!(proxy.dir.path().join("sandbox/from-input.txt").is_file());

    let keys: serde_json::Map<String, Value> =
        (0..400).map(|i| (format!("key{i}"), json!(i))).collect();
    let mut args = json!({"path": "wide.txt", "content": "x"});
    if let Some(object) = args.as_object_mut() {
        object.extend(keys);
    }
    let wide = json!({"steps": [{"id": "wide", "tool": "files__write_file", "args": args}]});
    let refused = proxy.client.call_tool(call("execute_plan", wide)).await?;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("cannot be shown for approval"),
        "{}",
        text(&refused)
    );
    assert!(!proxy.dir.path().join("sandbox/wide.txt").exists());
    Ok(())
}

/// What is shown is what runs: the items a plan lists for a loop, the values its value
/// steps make (which the approved steps read), and every key of the arguments in full,
/// even two that start alike for 200 characters.
#[tokio::test]
async fn approval_shows_loop_items_values_and_every_key_in_full() -> R {
    let proxy = start_with(CONFIG, Recorder::default()).await?;
    let prefix = "k".repeat(200);
    let plan = json!({"steps": [
        {"id": "v", "value": {"t": "VALUE-PAYLOAD"}},
        {"id": "w", "tool": "files__write_file", "foreach": ["ITEM-1", "ITEM-2"],
         "args": {"path": "${item}.txt", "content": "${item} ${v.t}",
                  format!("{prefix}_a"): 1, format!("{prefix}_b"): 2}}
    ]});
    let asked = proxy.client.call_tool(call("execute_plan", plan)).await?;
    let result = json(&asked)["structuredContent"].clone();
    assert_eq!(result["status"], "needs_approval", "{result:#}");
    let approval = &result["approval"];
    let step = &approval["steps"][0];
    assert_eq!(step["items"], json!(["ITEM-1", "ITEM-2"]), "{approval:#}");
    assert_eq!(
        approval["values"],
        json!([{"id": "v", "value": {"t": "VALUE-PAYLOAD"}}])
    );
    let keys = step["args"].as_object().map(|a| a.len());
    assert_eq!(keys, Some(4), "{approval:#}");
    let text = text(&asked);
    assert!(
        text.contains("once per item of [\"ITEM-1\",\"ITEM-2\"]") && text.contains("VALUE-PAYLOAD"),
        "{text}"
    );
    // The model repeats the steps, items included, and the plan runs.
    let ran = proxy
        .client
        .call_tool(call(
            "approve_plan",
            json!({"token": approval["token"], "steps": approval["steps"]}),
        ))
        .await?;
    assert_eq!(
        json(&ran)["structuredContent"]["status"],
        "succeeded",
        "{:#}",
        json(&ran)
    );
    let written = std::fs::read_to_string(proxy.dir.path().join("sandbox/ITEM-2.txt"))?;
    assert_eq!(written, "ITEM-2 VALUE-PAYLOAD");
    Ok(())
}
