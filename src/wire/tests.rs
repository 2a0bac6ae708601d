//! The line transport: limits, refusals answered by id, diverted messages, ordered writes.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use rmcp::model::{ClientRequest, ErrorCode, JsonRpcMessage, NumberOrString};
use rmcp::transport::Transport;
use rmcp::{RoleClient, RoleServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};

use super::{Envelope, HEAD_BYTES, Kind, Limits, LineTransport, SPARE_MAX, Spare, nesting};

fn number(n: i64) -> Option<NumberOrString> {
    Some(NumberOrString::Number(n))
}

#[test]
fn nesting_counts_brackets_outside_strings() {
    let check = |text: &str, expect: usize| assert_eq!(nesting(text.as_bytes()), expect, "{text}");
    check("1", 0);
    check("[]", 1);
    check(r#"{"a":[{"b":[]}]}"#, 4);
    check(r#"{"a":"[[[[\"]]]"}"#, 1);
    check(r#"[[], [[]], []]"#, 3);
    check(r#"["a\\", [["\\\"["]]]"#, 3);
    check(r#"{"unterminated": "[[["#, 1);
    check(r#"["ends in an escape \"#, 1);
}

#[test]
fn the_envelope_is_read_without_parsing_the_rest() {
    let check = |text: &str, id: Option<NumberOrString>, kind: Kind| {
        assert_eq!(
            Envelope::scan(text.as_bytes()),
            Envelope { id, kind },
            "{text}"
        );
    };
    let request = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"x":1e400}}"#;
    check(request, number(5), Kind::Request);
    check(
        r#"{"method":"a","id":"k"}"#,
        Some(NumberOrString::String("k".into())),
        Kind::Request,
    );
    check(
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"te"#,
        number(7),
        Kind::Response,
    );
    check(
        r#"{"result":{"a":[1,{"id":9}]},"id":3}"#,
        number(3),
        Kind::Response,
    );
    check(
        r#"{"jsonrpc":"2.0","method":"notifications/x"}"#,
        None,
        Kind::Notification,
    );
    check(
        r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
        None,
        Kind::BadId,
    );
    check(r#"{"jsonrpc":"2.0","id":103}"#, number(103), Kind::Bare);
    check(
        r#"{"params":{"id":4},"method":"x"}"#,
        None,
        Kind::Notification,
    );
    check("garbage", None, Kind::Notification);
}

async fn line<R: tokio::io::AsyncRead + Unpin>(reader: &mut BufReader<R>) -> Value {
    let mut text = String::new();
    reader.read_line(&mut text).await.unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

fn small() -> Limits {
    Limits {
        max_message_bytes: 4096,
        max_nesting: 200,
    }
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

fn call(id: i64, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"t","arguments":{{"v":{arguments}}}}}}}"#
    )
}

/// planmux serving a host over an in-memory pipe, `lines` already sent by the host: the
/// transport, and the host's ends (what it is answered, and its input, kept open).
async fn serving(
    limits: Limits,
    lines: &[impl AsRef<str>],
) -> (
    LineTransport<RoleServer, ReadHalf<DuplexStream>>,
    BufReader<ReadHalf<DuplexStream>>,
    WriteHalf<DuplexStream>,
) {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(ours);
    let transport = LineTransport::new(read, write, limits, "the host").serving();
    let (host_read, mut host_write) = tokio::io::split(theirs);
    for l in lines {
        host_write
            .write_all(format!("{}\n", l.as_ref()).as_bytes())
            .await
            .unwrap_or_default();
    }
    (transport, BufReader::new(host_read), host_write)
}

#[tokio::test]
async fn every_request_with_a_readable_id_gets_an_answer() {
    let deep = format!("{}1{}", "[".repeat(129), "]".repeat(129));
    let too_deep = format!("{}1{}", "[".repeat(300), "]".repeat(300));
    let huge = format!("\"{}\"", "x".repeat(8000));
    let lines = [
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
        INIT.to_string(),
        call(1, &deep),
        call(2, &"9".repeat(400)),
        call(3, "1e400"),
        call(4, r#""\ud800""#),
        call(5, &too_deep),
        call(6, &huge),
        call(7, "1"),
    ];
    let (mut transport, mut replies, _input) = serving(small(), &lines).await;
    // The early notification is dropped; initialize and the deep call come through.
    let mut delivered = Vec::new();
    for _ in 0..3 {
        match transport.receive().await {
            Some(JsonRpcMessage::Request(r)) => delivered.push((r.id, r.request)),
            other => panic!("expected a request, got {other:?}"),
        }
    }
    assert!(matches!(
        delivered[0].1,
        ClientRequest::InitializeRequest(_)
    ));
    assert_eq!(delivered[1].0, NumberOrString::Number(1));
    assert_eq!(delivered[2].0, NumberOrString::Number(7));
    for (id, code, words) in [
        (2, ErrorCode::PARSE_ERROR, "number out of range"),
        (3, ErrorCode::PARSE_ERROR, "number out of range"),
        (4, ErrorCode::PARSE_ERROR, "escape"),
        (
            5,
            ErrorCode::INVALID_REQUEST,
            "nested too deeply (303 levels; max_nesting is 200)",
        ),
        (6, ErrorCode::INVALID_REQUEST, "exceeds max_message_bytes"),
    ] {
        let reply = line(&mut replies).await;
        assert_eq!(reply["id"], json!(id), "{reply}");
        assert_eq!(reply["error"]["code"], json!(code.0), "{reply}");
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(words), "{id}: {message}");
    }
}

/// A bare id, a batch and a request whose id is no MCP id are answered too: the first two
/// under their ids, the last under `null` (JSON-RPC's id for an unreadable one).
#[tokio::test]
async fn odd_requests_are_answered_not_dropped() {
    let lines = [
        INIT,
        r#"{"jsonrpc":"2.0","id":103}"#,
        r#"[{"jsonrpc":"2.0","id":113,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":"b","method":"ping"}]"#,
        r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#,
    ];
    let (mut transport, mut replies, _input) = serving(small(), &lines).await;
    for id in [0, 9] {
        match transport.receive().await {
            Some(JsonRpcMessage::Request(r)) => assert_eq!(r.id, NumberOrString::Number(id)),
            other => panic!("expected request {id}, got {other:?}"),
        }
    }
    let mut answered = Vec::new();
    for _ in 0..4 {
        let reply = line(&mut replies).await;
        assert_eq!(
            reply["error"]["code"],
            json!(ErrorCode::INVALID_REQUEST.0),
            "{reply}"
        );
        answered.push((reply["id"].clone(), reply["error"]["message"].clone()));
    }
    assert_eq!(answered[0].0, json!(103));
    assert_eq!((&answered[1].0, &answered[2].0), (&json!(113), &json!("b")));
    assert!(
        answered[1].1.as_str().is_some_and(|m| m.contains("batch")),
        "{answered:?}"
    );
    assert_eq!(answered[3].0, Value::Null);
}

/// A batch is answered request by request up to a bound, then once for the rest: a
/// batch of millions costs no million answers. An escaped string id is an id.
#[tokio::test]
async fn a_large_batch_is_answered_within_a_bound() {
    let pings: Vec<String> = (0..70)
        .map(|i| format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"ping"}}"#))
        .collect();
    let lines = [
        INIT.to_string(),
        format!("[{}]", pings.join(",")),
        r#"{"jsonrpc":"2.0","id":"a\"b","method":"tools/call","params":{"v":1e400}}"#.to_string(),
    ];
    let limits = Limits {
        max_message_bytes: 1 << 20,
        max_nesting: 200,
    };
    let (mut transport, mut replies, _input) = serving(limits, &lines).await;
    // The transport writes its answers as it goes on reading.
    let receiving = tokio::spawn(async move { while transport.receive().await.is_some() {} });
    let mut ids = Vec::new();
    for k in 0..66 {
        let reply = line(&mut replies).await;
        if k < 65 {
            let code = json!(ErrorCode::INVALID_REQUEST.0);
            assert_eq!(reply["error"]["code"], code, "{reply}");
        }
        ids.push(reply["id"].clone());
    }
    let expected: Vec<Value> = (0..64).map(|i| json!(i)).collect();
    assert_eq!(ids[..64], expected[..]);
    assert_eq!(ids[64], Value::Null);
    assert_eq!(ids[65], json!("a\"b"), "the escaped id is read as written");
    receiving.abort();
}

#[tokio::test]
async fn an_unreadable_answer_fails_its_call_at_once() {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(ours);
    let mut transport: LineTransport<RoleClient, _> =
        LineTransport::new(read, write, small(), "server 'big'");
    let (_server_read, mut server_write) = tokio::io::split(theirs);
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "x".repeat(10_000)
    );
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":4,"result":{{"structuredContent":{}1{}}}}}"#,
        "[".repeat(250),
        "]".repeat(250)
    );
    for l in [big, deep] {
        server_write
            .write_all(format!("{l}\n").as_bytes())
            .await
            .unwrap_or_default();
    }
    for (id, words) in [
        (
            3,
            "a message of 9.8 KiB from server 'big' exceeds max_message_bytes (4.0 KiB)",
        ),
        (4, "nested too deeply"),
    ] {
        match transport.receive().await {
            Some(JsonRpcMessage::Error(e)) => {
                assert_eq!(e.id, number(id));
                assert!(e.error.message.contains(words), "{}", e.error.message);
            }
            other => panic!("expected an error response, got {other:?}"),
        }
    }
}

#[test]
fn the_default_nesting_limit_parses_on_a_small_stack() {
    // Tests run on 2 MiB threads, smaller than planmux's main thread: a message nested as
    // deep as the default limit allows must parse (and drop) without overflowing.
    let depth = super::DEFAULT_MAX_NESTING - 3;
    let text = call(1, &format!("{}1{}", "[".repeat(depth), "]".repeat(depth)));
    assert_eq!(nesting(text.as_bytes()), super::DEFAULT_MAX_NESTING);
    let parsed = super::parse::<RoleServer>(text.as_bytes());
    assert!(
        matches!(parsed, Ok(JsonRpcMessage::Request(_))),
        "{parsed:?}"
    );
}

#[test]
fn a_large_buffer_is_kept_for_the_next_large_line() {
    let spare = Spare::new();
    assert!(spare.take().is_none());
    // Small buffers are not worth keeping; a large one is, emptied.
    spare.keep(Vec::with_capacity(1024));
    assert!(spare.take().is_none());
    let mut large = Vec::with_capacity(HEAD_BYTES * 8);
    large.extend_from_slice(b"{\"result\":{}}");
    spare.keep(large);
    let kept = spare.take().expect("kept");
    assert!(kept.is_empty() && kept.capacity() >= HEAD_BYTES * 8);
    // Taken means gone; the roomier of two is kept; none beyond the cap.
    assert!(spare.take().is_none());
    spare.keep(Vec::with_capacity(HEAD_BYTES * 16));
    spare.keep(Vec::with_capacity(HEAD_BYTES * 8));
    assert!(
        spare
            .take()
            .is_some_and(|b| b.capacity() >= HEAD_BYTES * 16)
    );
    spare.keep(Vec::with_capacity(SPARE_MAX + 1));
    assert!(spare.take().is_none());
}

/// A transport whose peer reads through a pipe of `room` bytes: its sender, and the
/// peer's reading end.
fn writing_through(
    room: usize,
) -> (
    LineTransport<RoleServer, DuplexStream>,
    super::RawSender,
    BufReader<DuplexStream>,
) {
    let (ours, theirs) = tokio::io::duplex(room);
    let (input, _) = tokio::io::duplex(1);
    let transport = LineTransport::new(input, ours, small(), "the peer");
    let sender = transport.sender();
    (transport, sender, BufReader::new(theirs))
}

#[tokio::test]
async fn a_message_sent_while_nothing_is_queued_is_written_at_once() {
    let (_transport, sender, mut peer) = writing_through(1 << 16);
    assert!(sender.try_send(br#"{"n":1}"#.to_vec()).is_ok());
    // Nothing else ran meanwhile (one thread, no await): the sender wrote it itself.
    let mut text = String::new();
    let read = tokio::time::timeout(Duration::ZERO, peer.read_line(&mut text)).await;
    assert!(read.is_ok(), "not written yet");
    assert_eq!(text, "{\"n\":1}\n");
}

#[tokio::test]
async fn messages_keep_their_order_whether_written_at_once_or_queued() {
    // A pipe of 16 bytes: most messages are written in part at once, the rest queued.
    let (_transport, sender, peer) = writing_through(16);
    let expected: Vec<String> = (0..60)
        .map(|i| format!(r#"{{"n":{i},"pad":"{}"}}"#, "x".repeat(i % 7 * 5)))
        .collect();
    let count = expected.len();
    let reader = tokio::spawn(async move {
        let mut lines = peer.lines();
        let mut got = Vec::new();
        while got.len() < count
            && let Ok(Some(line)) = lines.next_line().await
        {
            got.push(line);
        }
        got
    });
    for (i, message) in expected.iter().enumerate() {
        // Both ways of sending; `try_send` gives back what the queue has no room for.
        let bytes = message.clone().into_bytes();
        let sent = match i % 2 {
            0 => match sender.try_send(bytes) {
                Err(bytes) => sender.send(bytes).await,
                Ok(()) => Ok(()),
            },
            _ => sender.send(bytes).await,
        };
        assert!(sent.is_ok(), "{i}");
        if i % 2 == 1 {
            tokio::task::yield_now().await;
        }
    }
    let got = reader.await.unwrap_or_default();
    assert_eq!(got, expected);
}

/// A pipe read with blocking calls: its reader runs on a thread of its own, the divert
/// hook there too; what the hook leaves reaches rmcp, and the pipe's end ends the
/// transport.
#[tokio::test]
async fn a_blocking_pipe_is_read_on_a_thread_of_its_own() {
    let (read, mut write) = std::io::pipe().unwrap_or_else(|e| panic!("{e}"));
    let (ours, _theirs) = tokio::io::duplex(1 << 16);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook: super::Divert = {
        let seen = seen.clone();
        Arc::new(move |line: &mut Vec<u8>| {
            seen.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(thread::current().id());
            match line.starts_with(br#"{"take""#) {
                true => super::Diverted::Taken,
                false => super::Diverted::Left,
            }
        })
    };
    let file = std::fs::File::from(std::os::fd::OwnedFd::from(read));
    let mut transport =
        LineTransport::<RoleServer, _>::blocking(file, ours, small(), "the host").with_divert(hook);
    let eof = transport.eof();
    let taken = r#"{"take":1,"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let left = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    writeln!(write, "{taken}\n{left}").unwrap_or_else(|e| panic!("{e}"));
    match transport.receive().await {
        Some(JsonRpcMessage::Request(request)) => assert_eq!(Some(request.id), number(1)),
        other => panic!("expected the ping, got {other:?}"),
    }
    let threads = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(threads.len(), 2);
    assert!(threads.iter().all(|id| *id != thread::current().id()));
    drop(write);
    assert!(
        transport.receive().await.is_none(),
        "the pipe's end ends it"
    );
    assert!(eof.is_cancelled());
}

/// The reader decodes a message only once rmcp has asked for the next one: what rmcp
/// does with a message (a log line routed to the call in flight) happens before the
/// hook takes the next (that call's answer), though the reader runs on another thread.
#[tokio::test]
async fn the_next_message_waits_until_rmcp_is_done_with_the_last() {
    let (read, mut write) = std::io::pipe().unwrap_or_else(|e| panic!("{e}"));
    let (ours, _theirs) = tokio::io::duplex(1 << 16);
    let handled = Arc::new(AtomicUsize::new(0));
    let seen_at_take = Arc::new(AtomicUsize::new(usize::MAX));
    let hook: super::Divert = {
        let (handled, seen) = (handled.clone(), seen_at_take.clone());
        Arc::new(
            move |line: &mut Vec<u8>| match line.starts_with(br#"{"take""#) {
                true => {
                    seen.store(handled.load(Ordering::SeqCst), Ordering::SeqCst);
                    super::Diverted::Taken
                }
                false => super::Diverted::Left,
            },
        )
    };
    let file = std::fs::File::from(std::os::fd::OwnedFd::from(read));
    let mut transport =
        LineTransport::<RoleServer, _>::blocking(file, ours, small(), "the host").with_divert(hook);
    let left = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let taken = r#"{"take":1,"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let last = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    writeln!(write, "{left}\n{taken}\n{last}").unwrap_or_else(|e| panic!("{e}"));
    assert!(transport.receive().await.is_some());
    // rmcp takes its time with the first message; the reader must not go on meanwhile.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        seen_at_take.load(Ordering::SeqCst),
        usize::MAX,
        "taken too early"
    );
    handled.store(1, Ordering::SeqCst);
    assert!(transport.receive().await.is_some());
    assert_eq!(seen_at_take.load(Ordering::SeqCst), 1);
}
