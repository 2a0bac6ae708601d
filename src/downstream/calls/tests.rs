//! The call table: answers taken or left, ends reaching the right sinks.

use rmcp::RoleClient;
use tokio::io::{DuplexStream, ReadHalf};

use serde_json::Value;

use super::*;
use crate::wire::{Limits, LineTransport};

/// A table on a connection that goes nowhere, and the transport that keeps its writer
/// open.
fn table() -> (
    LineTransport<RoleClient, ReadHalf<DuplexStream>>,
    Arc<CallTable>,
) {
    let (ours, _theirs) = tokio::io::duplex(64);
    let (read, write) = tokio::io::split(ours);
    let transport = LineTransport::new(read, write, Limits::default(), "test");
    let tracker = TaskTracker::new();
    let table = CallTable::new(
        transport.sender(),
        "test",
        Duration::from_secs(60),
        &tracker,
        Arc::default(),
    );
    (transport, table)
}

/// An awaiting call registered (not written), and where its answer arrives.
fn awaiting(
    table: &Arc<CallTable>,
) -> (
    LineCall,
    oneshot::Receiver<Result<RawReply, DownstreamError>>,
) {
    let (sink, answer) = Sink::awaiting();
    let (call, _request) = table.start("t", sink, |_, _| Vec::new());
    (call, answer)
}

fn result_of(answer: &mut oneshot::Receiver<Result<RawReply, DownstreamError>>) -> Option<Vec<u8>> {
    let reply = answer.try_recv().ok()?.ok()?;
    reply.result().map(<[u8]>::to_vec)
}

#[tokio::test]
async fn answers_to_the_tables_calls_are_taken_and_others_left() {
    let (_transport, table) = table();
    let divert = table.divert();
    let (call, mut answer) = awaiting(&table);
    assert!(
        !divert(&mut br#"{"jsonrpc":"2.0","id":3,"result":{}}"#.to_vec()).taken(),
        "rmcp's own"
    );
    let request = format!(
        r#"{{"jsonrpc":"2.0","id":"{}","method":"ping"}}"#,
        call.id()
    );
    assert!(
        !divert(&mut request.into_bytes()).taken(),
        "a request that reuses the id"
    );
    let mut line = format!(
        r#"{{"result":{{"content":[]}},"jsonrpc":"2.0","id":"{}"}}"#,
        call.id()
    )
    .into_bytes();
    assert!(divert(&mut line).taken());
    assert!(line.is_empty(), "the line is moved to the call");
    assert_eq!(
        result_of(&mut answer).as_deref(),
        Some(&br#"{"content":[]}"#[..])
    );
    // An answer to a call that already gave up is dropped, not passed to rmcp.
    let (late, _answer) = awaiting(&table);
    assert!(late.cancel(Some("test")));
    let line = format!(r#"{{"jsonrpc":"2.0","id":"{}","result":{{}}}}"#, late.id());
    assert!(divert(&mut line.into_bytes()).taken());
}

/// The id is looked for at a message's end first: a large answer is taken whichever
/// end its id is at, and one that is not the table's is left whatever its size.
#[tokio::test]
async fn a_large_answer_is_taken_whichever_end_its_id_is_at() {
    let (_transport, table) = table();
    let divert = table.divert();
    let text = "x".repeat(4096);
    let result = format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#);
    let ((last, mut last_answer), (first, mut first_answer)) = (awaiting(&table), awaiting(&table));
    let id_last = format!(
        r#"{{"result":{result},"jsonrpc":"2.0","id":"{}"}}"#,
        last.id()
    );
    let id_first = format!(
        r#"{{"jsonrpc":"2.0","id":"{}","result":{result}}}"#,
        first.id()
    );
    let not_ours = format!(r#"{{"result":{result},"jsonrpc":"2.0","id":7}}"#);
    assert!(divert(&mut id_last.into_bytes()).taken());
    assert!(divert(&mut id_first.into_bytes()).taken());
    assert!(!divert(&mut not_ours.into_bytes()).taken());
    for answer in [&mut last_answer, &mut first_answer] {
        assert_eq!(result_of(answer).as_deref(), Some(result.as_bytes()));
    }
}

/// A connection's end reaches every written call's sink, and leaves an unwritten one
/// to its sender, which learns it when it marks the call sent.
#[tokio::test]
async fn the_end_of_the_connection_reaches_written_calls_and_their_senders() {
    let (_transport, table) = table();
    let (written, mut written_answer) = awaiting(&table);
    assert!(written.sent().is_ok());
    let (unwritten, mut unwritten_answer) = awaiting(&table);
    table
        .end(|| DownstreamError::Closed {
            server: "test".into(),
        })
        .await;
    assert!(matches!(
        written_answer.try_recv(),
        Ok(Err(DownstreamError::Closed { .. }))
    ));
    assert!(
        unwritten_answer.try_recv().is_err(),
        "not told: its sender is"
    );
    assert!(matches!(unwritten.sent(), Err(Sink::Await(_))));
}

/// A written call past its time limit is ended by the sweeper, as a timeout; an
/// unwritten one is its sender's to end.
#[tokio::test(start_paused = true)]
async fn the_sweeper_times_out_written_calls() {
    let (_transport, table) = table();
    let (written, mut answer) = awaiting(&table);
    assert!(written.sent().is_ok());
    let (_unwritten, mut unwritten_answer) = awaiting(&table);
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert!(matches!(
        answer.try_recv(),
        Ok(Err(DownstreamError::Timeout { .. }))
    ));
    assert!(unwritten_answer.try_recv().is_err());
}

/// A table on a 2025-11-25 server whose tool `slow` runs only as a task, and the
/// server's end of the connection.
struct LegacyServer {
    _transport: LineTransport<RoleClient, ReadHalf<DuplexStream>>,
    table: Arc<CallTable>,
    lines: tokio::io::Lines<tokio::io::BufReader<DuplexStream>>,
}

impl LegacyServer {
    fn start() -> Self {
        use tokio::io::AsyncBufReadExt;
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(ours);
        let transport = LineTransport::new(read, write, Limits::default(), "test");
        let fields = Arc::new(ToolFields::default());
        fields.keep(&[json!({"name": "slow", "execution": {"taskSupport": "required"}})]);
        let timeout = Duration::from_secs(60);
        let tracker = TaskTracker::new();
        let table = CallTable::new(transport.sender(), "test", timeout, &tracker, fields);
        Self {
            _transport: transport,
            table,
            lines: tokio::io::BufReader::new(theirs).lines(),
        }
    }

    /// What the server reads next (null when nothing comes within 5 s).
    async fn read(&mut self) -> Value {
        let next = tokio::time::timeout(Duration::from_secs(5), self.lines.next_line()).await;
        let line = next.ok().and_then(Result::ok).flatten().unwrap_or_default();
        serde_json::from_str(&line).unwrap_or_default()
    }

    /// A call of `tool` (its name as JSON text) under raw id `id` (as JSON text).
    fn request(id: &str, tool: &str) -> Vec<u8> {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":{tool}}}}}"#)
            .into_bytes()
    }

    /// The server's answer to call `id`: its task `task`.
    fn task(id: &str, task: &str) -> Vec<u8> {
        format!(
            r#"{{"jsonrpc":"2.0","id":"{id}","result":{{"task":{{"taskId":"{task}","status":"working"}}}}}}"#
        )
        .into_bytes()
    }
}

/// A 2025-11-25 server's tool that runs only as a task: the call goes as one, the answer
/// that is the task asks for its result under the call's id, and that result is the
/// call's answer; a call that ends before its task cancels the task.
#[tokio::test]
async fn a_legacy_servers_task_only_call_follows_its_task() {
    let mut server = LegacyServer::start();
    let (table, divert) = (server.table.clone(), server.table.divert());
    let (request, task) = (LegacyServer::request, LegacyServer::task);
    let (sink, mut answer) = Sink::awaiting();
    let (call, bytes) = table.start("slow", sink, request);
    table.write(bytes).await.expect("written");
    assert!(call.sent().is_ok());
    let sent = server.read().await;
    assert_eq!(sent["params"]["task"], json!({}), "{sent}");
    assert!(divert(&mut task(call.id(), "t1")).taken());
    assert!(
        answer.try_recv().is_err(),
        "the task is not the call's answer"
    );
    let asked = server.read().await;
    assert_eq!(
        (&asked["id"], &asked["method"], &asked["params"]),
        (
            &json!(call.id()),
            &json!("tasks/result"),
            &json!({"taskId": "t1"})
        ),
    );
    let done = format!(
        r#"{{"jsonrpc":"2.0","id":"{}","result":{{"content":[{{"type":"text","text":"done"}}]}}}}"#,
        call.id()
    );
    assert!(divert(&mut done.into_bytes()).taken());
    let result = result_of(&mut answer).expect("the task's result");
    assert!(String::from_utf8_lossy(&result).contains("done"));

    // Another tool runs as it is called.
    let (sink, _answer) = Sink::awaiting();
    let (_plain, bytes) = table.start("quick", sink, request);
    assert!(!String::from_utf8_lossy(&bytes).contains("\"task\""));

    // A call cancelled while its task runs cancels the task.
    let (sink, _answer) = Sink::awaiting();
    let (call, bytes) = table.start("slow", sink, request);
    table.write(bytes).await.expect("written");
    assert!(call.sent().is_ok());
    server.read().await;
    assert!(divert(&mut task(call.id(), "t2")).taken());
    server.read().await;
    assert!(call.cancel(Some("test")));
    let (first, second) = (server.read().await, server.read().await);
    let methods = [&first["method"], &second["method"]];
    assert!(
        methods.contains(&&json!("notifications/cancelled")),
        "{first} {second}"
    );
    let cancel = if first["method"] == "tasks/cancel" {
        first
    } else {
        second
    };
    assert_eq!(cancel["method"], "tasks/cancel", "{cancel}");
    assert_eq!(cancel["params"], json!({"taskId": "t2"}));
}

/// A task that comes for a call that already ended is cancelled, not left running.
#[tokio::test]
async fn a_task_whose_call_ended_first_is_cancelled() {
    let mut server = LegacyServer::start();
    let (table, divert) = (server.table.clone(), server.table.divert());
    let (sink, _answer) = Sink::awaiting();
    let request = LegacyServer::request;
    let (call, bytes) = table.start("slow", sink, request);
    table.write(bytes).await.expect("written");
    assert!(call.sent().is_ok());
    assert!(call.cancel(Some("test")));
    let mut late = LegacyServer::task(call.id(), "t9");
    assert!(divert(&mut late).taken(), "dropped, not rmcp's");
    let mut methods = Vec::new();
    for _ in 0..3 {
        let message = server.read().await;
        if message["method"] == "tasks/cancel" {
            assert_eq!(message["params"], json!({"taskId": "t9"}));
            return;
        }
        methods.push(message["method"].clone());
    }
    panic!("no tasks/cancel: {methods:?}");
}
