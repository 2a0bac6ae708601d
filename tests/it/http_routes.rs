//! Both routes an HTTP session's `tools/call` can take answer alike. The scripted server
//! (tests/fixtures/servers/scripted.py) behind `planmux serve --http`, called over raw
//! HTTP/1.1 twice: on the passthrough for sessions (the default: the call read off its
//! POST, the server's answer made in place) and with `PLANMUX_ROUTE=rmcp` (every call on
//! rmcp's typed path). Each call's own event stream must carry the same kinds of
//! messages, case by case: progress before the answer, results, JSON-RPC errors,
//! `isError` results, the host's cancellation (no answer; the host's reason reaching the
//! server), a time limit, an answer over 16 MiB, a server that dies mid-call and its
//! restart; and a checkpoint's refusal. What the passthrough keeps that rmcp's route does
//! not (fields no SDK models, numbers as written, the host's cancel reason) is checked
//! on its transcript. On both, a POST from another site's page (its `Origin`) or to a name
//! rebound to the loopback front (its `Host`) is refused.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::interop::support::free_port;
use crate::routes::{BIG, PATIENCE, scripted, shape};

type R = anyhow::Result<()>;

/// The calls' time limit: rmcp's route decodes and encodes a 17 MiB answer, which takes
/// more than a second and a half on a busy machine.
const LIMIT_MS: u64 = 5000;

/// `planmux serve --http` in front of the scripted server as `s`, on a forced route,
/// with one session.
struct Front {
    child: Child,
    port: u16,
    session: String,
    _dir: tempfile::TempDir,
}

impl Front {
    fn start(route: &str) -> anyhow::Result<Self> {
        let (dir, config) = scripted(LIMIT_MS, "[policy]\ndeny = [\"s__is_*\"]\n")?;
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_planmux"))
            .args(["serve", "--http", &format!("127.0.0.1:{port}"), "--config"])
            .arg(&config)
            .env("PLANMUX_ROUTE", route)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut front = Self {
            child,
            port,
            session: String::new(),
            _dir: dir,
        };
        let deadline = Instant::now() + PATIENCE;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            anyhow::ensure!(Instant::now() < deadline, "planmux did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut init = front.post(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}}}))?;
        init.answer(1)?;
        front.session = init
            .head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| value.trim().to_owned())
            })
            .ok_or_else(|| anyhow::anyhow!("no session id: {}", init.head))?;
        let mut initialized =
            front.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        initialized.read_head()?;
        anyhow::ensure!(
            initialized.head.starts_with("HTTP/1.1 202"),
            "{}",
            initialized.head
        );
        // The server's tools are listed once it started.
        let deadline = Instant::now() + PATIENCE;
        loop {
            let mut listed =
                front.post(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))?;
            let listed = listed.answer(2)?;
            if String::from_utf8_lossy(listed.last().map_or(&[][..], Vec::as_slice))
                .contains("s__slow")
            {
                return Ok(front);
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the scripted server did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A POST of `message` in the session; its answer, to read.
    fn post(&self, message: &Value) -> anyhow::Result<Answer> {
        self.post_as(message, "127.0.0.1", "")
    }

    /// [`Self::post`] naming `host` in its `Host` header, with `more` headers.
    fn post_as(&self, message: &Value, host: &str, more: &str) -> anyhow::Result<Answer> {
        let body = message.to_string();
        let session = match self.session.as_str() {
            "" => String::new(),
            id => format!("Mcp-Session-Id: {id}\r\n"),
        };
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_millis(200)))?;
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\n{more}{session}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )?;
        Ok(Answer {
            stream,
            buffer: Vec::new(),
            head: String::new(),
            ended: false,
        })
    }

    /// A `tools/call` of the scripted server's `tool`.
    fn call(
        &self,
        id: u64,
        tool: &str,
        arguments: Value,
        progress: bool,
    ) -> anyhow::Result<Answer> {
        let mut params = json!({"name": format!("s__{tool}"), "arguments": arguments});
        if progress {
            params["_meta"] = json!({"progressToken": format!("p-{id}")});
        }
        self.post(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A POST's answer: its head, then the messages of its event stream.
struct Answer {
    stream: TcpStream,
    buffer: Vec<u8>,
    head: String,
    ended: bool,
}

impl Answer {
    /// Reads more (at most the read timeout's wait): whether anything came.
    fn fill(&mut self) -> anyhow::Result<bool> {
        let mut chunk = vec![0u8; 1 << 20];
        match self.stream.read(&mut chunk) {
            Ok(0) => {
                self.ended = true;
                Ok(false)
            }
            Ok(n) => {
                self.buffer.extend_from_slice(&chunk[..n]);
                Ok(true)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn read_head(&mut self) -> R {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(end) = self.buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                self.head = String::from_utf8_lossy(&self.buffer[..end]).into_owned();
                self.buffer.drain(..end + 4);
                return Ok(());
            }
            anyhow::ensure!(!self.ended && Instant::now() < deadline, "no head");
            self.fill()?;
        }
    }

    /// The next message on the stream (a `data:` line's JSON), within `patience`; `None`
    /// when the stream ended or said nothing more by then.
    fn message(&mut self, patience: Duration) -> anyhow::Result<Option<Vec<u8>>> {
        if self.head.is_empty() {
            self.read_head()?;
        }
        let deadline = Instant::now() + patience;
        loop {
            // Chunk sizes and keep-alive comments are lines of their own; an event's data
            // is one line.
            while let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                if let Some(data) = line.strip_prefix(b"data: ".as_slice()) {
                    let data = data.strip_suffix(b"\n").unwrap_or(data);
                    let data = data.strip_suffix(b"\r").unwrap_or(data);
                    if !data.is_empty() {
                        return Ok(Some(data.to_vec()));
                    }
                }
            }
            if self.ended || Instant::now() >= deadline {
                return Ok(None);
            }
            self.fill()?;
        }
    }

    /// The messages up to the answer to request `id`.
    fn answer(&mut self, id: u64) -> anyhow::Result<Vec<Vec<u8>>> {
        let mut kept = Vec::new();
        loop {
            let message = self
                .message(PATIENCE)?
                .ok_or_else(|| anyhow::anyhow!("no answer to {id}; read {kept:?}"))?;
            let done = serde_json::from_slice::<Value>(&message)?["id"] == id;
            kept.push(message);
            if done {
                return Ok(kept);
            }
        }
    }
}

/// The messages each case's stream carried, by the case's name.
type Case = (&'static str, Vec<Vec<u8>>);

/// What the host read for each case, on `route`.
fn transcript(route: &str) -> anyhow::Result<Vec<Case>> {
    let front = Front::start(route)?;
    // A page of another site, or a name rebound to this loopback front, is refused on
    // either route (rmcp's Origin and Host checks: the passthrough leaves such POSTs to it).
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "s__result", "arguments": {}}});
    for (host, more) in [
        ("127.0.0.1", "Origin: http://evil.example\r\n"),
        ("evil.example", ""),
    ] {
        let mut refused = front.post_as(&call, host, more)?;
        refused.read_head()?;
        anyhow::ensure!(
            refused.head.starts_with("HTTP/1.1 403"),
            "{route}: {host} {more}: {}",
            refused.head
        );
    }
    let mut cases = Vec::new();
    cases.push((
        "result with progress",
        front.call(10, "result", json!({}), true)?.answer(10)?,
    ));
    cases.push((
        "a JSON-RPC error",
        front.call(11, "rpc_error", json!({}), false)?.answer(11)?,
    ));
    cases.push((
        "a denied tool",
        front.call(12, "is_error", json!({}), false)?.answer(12)?,
    ));
    // The host cancels a call the server is running (its progress says so): its stream
    // carries no answer.
    let mut slow = front.call(13, "slow", json!({"ms": 20000}), true)?;
    let progress = slow
        .message(PATIENCE)?
        .ok_or_else(|| anyhow::anyhow!("no progress"))?;
    let mut cancel = front.post(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 13, "reason": "the user pressed stop"}}),
    )?;
    cancel.read_head()?;
    anyhow::ensure!(cancel.head.starts_with("HTTP/1.1 202"), "{}", cancel.head);
    let after = slow.message(Duration::from_secs(2))?;
    cases.push((
        "a cancelled call",
        [Some(progress), after].into_iter().flatten().collect(),
    ));
    cases.push((
        "past the time limit",
        front
            .call(15, "slow", json!({"ms": 3 * LIMIT_MS}), false)?
            .answer(15)?,
    ));
    cases.push((
        "the server's cancellations",
        front.call(19, "cancels", json!({}), false)?.answer(19)?,
    ));
    cases.push((
        "an answer over 16 MiB",
        front
            .call(16, "big", json!({"n": BIG}), false)?
            .answer(16)?,
    ));
    cases.push((
        "a server that dies mid-call",
        front.call(17, "die", json!({}), false)?.answer(17)?,
    ));
    cases.push((
        "the server restarted",
        front.call(18, "result", json!({}), false)?.answer(18)?,
    ));
    Ok(cases)
}

#[test]
fn both_routes_of_an_http_session_answer_alike() -> R {
    let lane = transcript("in-place")?;
    let rmcp = transcript("rmcp")?;
    for ((case, a), (_, b)) in lane.iter().zip(&rmcp) {
        let shapes = |messages: &[Vec<u8>]| messages.iter().map(|m| shape(m)).collect::<Vec<_>>();
        assert_eq!(shapes(a), shapes(b), "{case}: the passthrough vs rmcp");
    }
    let message = |case: usize, at: usize| -> anyhow::Result<Value> {
        Ok(serde_json::from_slice(&lane[case].1[at])?)
    };
    // Progress in order before the answer, under the host's token.
    assert_eq!(message(0, 0)?["params"]["progressToken"], "p-10");
    assert_eq!(message(0, 1)?["params"]["progress"], 2);
    // What only the passthrough keeps.
    assert_eq!(message(0, 2)?["result"]["x-vendor"], json!({"kept": true}));
    let text = std::str::from_utf8(&lane[0].1[2])?;
    assert!(
        text.contains(r#""float": 1.0"#),
        "numbers as written: {text}"
    );
    let denied = message(2, 0)?;
    assert!(
        denied["error"]["message"].to_string().contains("deny"),
        "the checkpoint refused it: {denied}"
    );
    assert_eq!(lane[3].1.len(), 1, "no answer after the cancellation");
    assert_eq!(message(4, 0)?["result"]["isError"], true);
    assert_eq!(
        message(5, 0)?["result"]["structuredContent"]["reasons"],
        json!(["the user pressed stop", "timed out in planmux"])
    );
    let big = message(6, 0)?;
    let length = big["result"]["content"][0]["text"].as_str().map(str::len);
    assert_eq!(length, Some(BIG));
    let died = message(7, 0)?["result"]["content"][0]["text"].to_string();
    assert!(died.contains("exited"), "{died}");
    assert_eq!(message(8, 0)?["result"]["content"][0]["text"], "ok");
    Ok(())
}
