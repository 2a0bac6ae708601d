//! Every route a stdio host's `tools/call` can take answers alike. The same calls go to
//! a scripted server (tests/fixtures/servers/scripted.py) through planmux three times,
//! each time with `PLANMUX_ROUTE` forcing one route: sent at once where the host's line
//! is read (`in-place`), sent after an admission wait on a task (`admission`), or left
//! to rmcp's typed path (`rmcp`).
//!
//! The two raw routes must give the host the same bytes, case by case: results with
//! fields no SDK models and numbers as written, JSON-RPC errors, `isError` results,
//! progress and log messages before the answer, the host's cancellation (no answer, the host's reason
//! reaching the server), a time limit, a server that dies mid-call, an answer over
//! 16 MiB. rmcp's route must give the same kind of answer to every call (same ids, same
//! results or errors); its bytes differ where rmcp decodes and encodes again, which is
//! why the raw routes exist: it drops the fields it does not model and replaces the
//! host's cancel reason.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// How long one answer may take (a server's restart included).
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);
/// Past rmcp's 16 MiB line limit.
pub(crate) const BIG: usize = 17 * 1024 * 1024;

/// A servers.toml (in the returned folder) with the scripted server as `s`, its calls'
/// time limit `limit_ms`, and `extra`.
pub(crate) fn scripted(
    limit_ms: u64,
    extra: &str,
) -> anyhow::Result<(tempfile::TempDir, std::path::PathBuf)> {
    let server =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/servers/scripted.py");
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("servers.toml");
    let text = format!(
        "[servers.s]\ncommand = \"python3\"\nargs = [\"{}\"]\ncall_timeout_ms = {limit_ms}\n{extra}",
        server.display()
    );
    std::fs::write(&config, text)?;
    Ok((dir, config))
}

/// planmux serving the scripted server as `s`, on a forced route, driven over raw lines.
struct Host {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Vec<u8>>,
    _dir: tempfile::TempDir,
}

impl Host {
    fn start(route: &str) -> anyhow::Result<Self> {
        let (dir, config) = scripted(1500, "")?;
        let mut child = Command::new(env!("CARGO_BIN_EXE_planmux"))
            .args(["serve", "--config"])
            .arg(&config)
            .env("PLANMUX_ROUTE", route)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("stdout"))?;
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match stdout.read_until(b'\n', &mut line) {
                    Ok(n) if n > 0 && tx.send(line).is_ok() => {}
                    _ => return,
                }
            }
        });
        let mut host = Self {
            child,
            stdin,
            lines,
            _dir: dir,
        };
        host.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "routes", "version": "0"}}}),
        )?;
        host.answer(1)?;
        host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        host.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))?;
        host.answer(2)?;
        Ok(host)
    }

    fn send(&mut self, message: &Value) -> R {
        writeln!(self.stdin, "{message}")?;
        Ok(())
    }

    /// A `tools/call` of the scripted server's `tool`.
    fn call(&mut self, id: u64, tool: &str, arguments: Value, progress: bool) -> R {
        let mut params = json!({"name": format!("s__{tool}"), "arguments": arguments});
        if progress {
            params["_meta"] = json!({"progressToken": format!("p-{id}")});
        }
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
    }

    /// The lines up to the answer to request `id`: progress, log messages and the answer
    /// itself (other notifications, such as a list change after a restart, left out). An answer to
    /// any other request is an error: nothing else is outstanding.
    fn answer(&mut self, id: u64) -> anyhow::Result<Vec<Vec<u8>>> {
        self.until(|message| message["id"] == id)
    }

    /// The lines up to the first progress notification with token `token`.
    fn progress(&mut self, token: &str) -> anyhow::Result<Vec<u8>> {
        let mut lines = self.until(|message| message["params"]["progressToken"] == token)?;
        lines.pop().ok_or_else(|| anyhow::anyhow!("no progress"))
    }

    fn until(&mut self, last: impl Fn(&Value) -> bool) -> anyhow::Result<Vec<Vec<u8>>> {
        let mut kept = Vec::new();
        loop {
            let line = self.lines.recv_timeout(PATIENCE)?;
            let message: Value = serde_json::from_slice(&line)?;
            let done = last(&message);
            let relayed = ["notifications/progress", "notifications/message"];
            if done || relayed.iter().any(|method| message["method"] == *method) {
                kept.push(line);
            } else if message.get("method").is_none() {
                anyhow::bail!("an answer nobody waits for: {message}");
            }
            if done {
                return Ok(kept);
            }
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lines the host read for one case, by the case's name.
type Case = (&'static str, Vec<Vec<u8>>);

/// What the host read for each case, on `route`.
fn transcript(route: &str) -> anyhow::Result<Vec<Case>> {
    let mut host = Host::start(route)?;
    let mut cases = Vec::new();
    host.call(10, "result", json!({}), true)?;
    cases.push(("result with progress", host.answer(10)?));
    host.call(20, "log", json!({}), false)?;
    cases.push(("a log message before the answer", host.answer(20)?));
    host.call(11, "rpc_error", json!({}), false)?;
    cases.push(("a JSON-RPC error", host.answer(11)?));
    host.call(12, "is_error", json!({}), false)?;
    cases.push(("an isError result", host.answer(12)?));
    // The host cancels a call the server is running (its progress says so): no answer.
    host.call(13, "slow", json!({"ms": 20000}), true)?;
    cases.push(("a running call's progress", vec![host.progress("p-13")?]));
    host.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 13, "reason": "the user pressed stop"}}),
    )?;
    host.call(15, "slow", json!({"ms": 5000}), false)?;
    cases.push(("past the time limit", host.answer(15)?));
    // The cancellation reached the server with the host's reason, and the time limit's
    // with planmux's; the cancelled call was never answered.
    host.call(19, "cancels", json!({}), false)?;
    cases.push(("the server's cancellations", host.answer(19)?));
    host.call(16, "big", json!({"n": BIG}), false)?;
    cases.push(("an answer over 16 MiB", host.answer(16)?));
    host.call(17, "die", json!({}), false)?;
    cases.push(("a server that dies mid-call", host.answer(17)?));
    host.call(18, "result", json!({}), false)?;
    cases.push(("the server restarted", host.answer(18)?));
    Ok(cases)
}

/// What kind of answer each line is: its id, result or error, `isError`.
pub(crate) fn shape(line: &[u8]) -> Value {
    let message: Value = serde_json::from_slice(line).unwrap_or_default();
    json!({
        "id": message["id"],
        "method": message["method"],
        "error": message["error"]["code"],
        "isError": message["result"]["isError"],
    })
}

#[test]
fn every_route_answers_alike() -> R {
    let in_place = transcript("in-place")?;
    let admission = transcript("admission")?;
    let rmcp = transcript("rmcp")?;
    for ((case, a), (_, b)) in in_place.iter().zip(&admission) {
        let text = |lines: &[Vec<u8>]| {
            lines
                .iter()
                .map(|line| match line.len() > 4096 {
                    true => format!("{} bytes: {:?}…", line.len(), &line[..64]),
                    false => String::from_utf8_lossy(line).into_owned(),
                })
                .collect::<Vec<_>>()
        };
        assert!(
            a == b,
            "{case}: in place {:?}\nadmission {:?}",
            text(a),
            text(b)
        );
    }
    for ((case, a), (_, c)) in in_place.iter().zip(&rmcp) {
        // rmcp relays a log message on a task of its own: it may come after the answer.
        let shapes = |lines: &[Vec<u8>]| {
            lines
                .iter()
                .map(|l| shape(l))
                .filter(|shape| shape["method"] != "notifications/message")
                .collect::<Vec<_>>()
        };
        assert_eq!(shapes(a), shapes(c), "{case}: in place vs rmcp");
    }
    // What the raw routes keep that rmcp's does not, as the host reads it.
    let result: Value = serde_json::from_slice(&in_place[0].1[2])?;
    assert_eq!(
        result["result"]["x-vendor"],
        json!({"kept": true}),
        "{result}"
    );
    let text = std::str::from_utf8(&in_place[0].1[2])?;
    let logged: Value = serde_json::from_slice(&in_place[1].1[0])?;
    assert_eq!(
        logged["params"]["logger"], "s/scripted",
        "in wire order: {logged}"
    );
    assert!(
        text.contains(r#""float": 1.0"#),
        "numbers as written: {text}"
    );
    let big: Value = serde_json::from_slice(&in_place[7].1[0])?;
    let length = big["result"]["content"][0]["text"].as_str().map(str::len);
    assert_eq!(length, Some(BIG));
    let timed_out: Value = serde_json::from_slice(&in_place[5].1[0])?;
    assert_eq!(timed_out["result"]["isError"], true, "{timed_out}");
    let died: Value = serde_json::from_slice(&in_place[8].1[0])?;
    let died = died["result"]["content"][0]["text"].to_string();
    assert!(died.contains("exited"), "{died}");
    let reasons: Value = serde_json::from_slice(&in_place[6].1[0])?;
    assert_eq!(
        reasons["result"]["structuredContent"]["reasons"],
        json!(["the user pressed stop", "timed out in planmux"]),
        "{reasons}"
    );
    Ok(())
}
