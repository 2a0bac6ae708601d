//! Tasks driven without a transport: how each tool's task ends (a tool's failure completes
//! it, a protocol error fails it, a cancel cancels it), the questions a task asks and how
//! `tasks/update` resumes it, `test_tool_with_task`'s first round, and that the store keeps
//! only the newest tasks.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CancelTaskParams, GetTaskParams, InputResponses, UpdateTaskParams,
};
use serde_json::{Value, json};

use super::{MAX_TASKS, Named, Tasks, Work, ask_name};

fn start(tasks: &Tasks, work: Work) -> String {
    tasks.start(move |cx| Box::pin(work.run(cx))).task_id
}

/// A task as one line: its status, and its result's text, its error's code or the keys it
/// asks; or the error `tasks/get` answers.
fn seen(tasks: &Tasks, id: &str) -> String {
    let got = match tasks.get(GetTaskParams::new(id)) {
        Ok(got) => serde_json::to_value(got).expect("serializes"),
        Err(e) => return format!("error {}", e.code.0),
    };
    let status = got["status"].as_str().unwrap_or("?");
    match status {
        "completed" if got["result"]["isError"] == true => {
            format!("completed isError: {}", got["result"]["content"][0]["text"])
        }
        "completed" => format!("completed: {}", got["result"]["content"][0]["text"]),
        "failed" => format!("failed: {}", got["error"]["code"]),
        "input_required" => {
            let keys = got["inputRequests"].as_object().map(|r| {
                let keys: Vec<&str> = r.keys().map(String::as_str).collect();
                keys.join(", ")
            });
            format!("input_required: {}", keys.unwrap_or_default())
        }
        other => other.to_owned(),
    }
}

/// Polls until the task is no longer `working` (paused time: the polls cost nothing).
async fn settled(tasks: &Tasks, id: &str) -> String {
    for _ in 0..10_000 {
        let seen = seen(tasks, id);
        if seen != "working" {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("task {id} stayed working")
}

fn answer(tasks: &Tasks, id: &str, key: &str, content: Value) {
    let responses = InputResponses::from([(
        key.to_owned(),
        json!({"action": "accept", "content": content}),
    )]);
    let update = UpdateTaskParams::new(id, responses);
    tasks.update(update).expect("tasks/update of a known task");
}

#[tokio::test(start_paused = true)]
async fn each_task_ends_as_the_scenarios_check() {
    async fn check(work: Work, expect: &str) {
        let tasks = Tasks::default();
        let id = start(&tasks, work.clone());
        assert_eq!(settled(&tasks, &id).await, expect, "{work:?}");
    }
    let greet = |name: &str| Work::Greet { name: name.into() };
    let compute = |seconds| Work::Compute {
        seconds,
        label: "x".into(),
    };
    check(greet("Alice"), r#"completed: "Hello, Alice!""#).await;
    check(compute(1.0), r#"completed: "Computed 'x' in 1 s.""#).await;
    check(compute(0.0), r#"completed: "Computed 'x' in 0 s.""#).await;
    check(
        Work::Fail,
        r#"completed isError: "failing_job failed, as it always does""#,
    )
    .await;
    check(Work::Crash, "failed: -32603").await;
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_task_settles_cancelled_and_a_second_cancel_is_acked() {
    let tasks = Tasks::default();
    let id = start(
        &tasks,
        Work::Compute {
            seconds: 60.0,
            label: "x".into(),
        },
    );
    tasks.cancel(CancelTaskParams::new(&id)).expect("cancel");
    assert_eq!(settled(&tasks, &id).await, "cancelled");
    tasks
        .cancel(CancelTaskParams::new(&id))
        .expect("cancel again");
    assert_eq!(seen(&tasks, &id), "cancelled");
}

#[tokio::test(start_paused = true)]
async fn a_task_asks_until_every_question_is_answered() {
    let tasks = Tasks::default();
    let id = start(
        &tasks,
        Work::ConfirmDelete {
            filename: "a.txt".into(),
        },
    );
    assert_eq!(settled(&tasks, &id).await, "input_required: confirm");
    answer(&tasks, &id, "unknown-key", json!({}));
    assert_eq!(seen(&tasks, &id), "input_required: confirm");
    answer(&tasks, &id, "confirm", json!({"confirm": true}));
    assert_eq!(settled(&tasks, &id).await, r#"completed: "Deleted a.txt.""#);

    let id = start(&tasks, Work::MultiInput);
    assert_eq!(settled(&tasks, &id).await, "input_required: confirm, name");
    answer(&tasks, &id, "name", json!({"name": "Bob", "confirm": true}));
    assert_eq!(settled(&tasks, &id).await, "input_required: confirm");
    answer(
        &tasks,
        &id,
        "confirm",
        json!({"name": "Bob", "confirm": true}),
    );
    let done = r#"completed: "name: Bob; confirmed: true""#;
    assert_eq!(settled(&tasks, &id).await, done);

    let id = start(&tasks, Work::MultiInput);
    settled(&tasks, &id).await;
    tasks.cancel(CancelTaskParams::new(&id)).expect("cancel");
    assert_eq!(settled(&tasks, &id).await, "cancelled");
}

#[test]
fn the_first_round_of_test_tool_with_task_asks_a_name() {
    fn check(responses: Value, expect: &str) {
        let mut request = CallToolRequestParams::new("test_tool_with_task");
        request.input_responses = serde_json::from_value(responses.clone()).expect("responses");
        let seen =
            match ask_name(&request) {
                Ok(Named::Asking(asking)) => {
                    serde_json::to_value(asking).expect("serializes")["inputRequests"]["user_name"]
                        ["method"]
                        .to_string()
                }
                Ok(Named::Refused(why)) => format!("refused: {why}"),
                Ok(Named::Given(name)) => format!("given: {name}"),
                Err(e) => format!("error {}", e.code.0),
            };
        assert_eq!(seen, expect, "{responses}");
    }
    let accepted = json!({"user_name": {"action": "accept", "content": {"name": "Alice"}}});
    check(Value::Null, r#""elicitation/create""#);
    check(json!({"other": {}}), r#""elicitation/create""#);
    check(accepted, "given: Alice");
    check(
        json!({"user_name": {"action": "decline"}}),
        "refused: the user did not accept 'user_name'",
    );
    check(json!({"user_name": 12345}), "error -32602");
}

#[tokio::test(start_paused = true)]
async fn only_the_newest_tasks_are_kept_and_an_unknown_one_is_invalid_params() {
    let tasks = Tasks::default();
    let greet = || Work::Greet { name: "x".into() };
    let first = start(&tasks, greet());
    let mut last = first.clone();
    for _ in 0..MAX_TASKS {
        last = start(&tasks, greet());
    }
    assert_eq!(seen(&tasks, &first), "error -32602");
    assert_eq!(settled(&tasks, &last).await, r#"completed: "Hello, x!""#);
    assert_eq!(tasks.0.len(), MAX_TASKS);
    let unknown = "no-such-task";
    let update = UpdateTaskParams::new(unknown, InputResponses::new());
    let codes = [
        tasks.update(update).map_err(|e| e.code.0),
        tasks
            .cancel(CancelTaskParams::new(unknown))
            .map_err(|e| e.code.0),
    ];
    assert_eq!(codes, [Err(-32602), Err(-32602)]);
}
