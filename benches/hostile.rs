//! Hostile input, before and after: each case that once froze, hung or silently dropped
//! something, sent to a fresh `planmux serve` over raw pipes. Prints how long the answer
//! took (up to a cap), planmux's peak RSS (`VmHWM`) and what came back, plus a
//! large-output row: 20 MB through planmux against the same server directly.
//!
//! `cargo bench --features bench --bench hostile` measures this build. With
//! `PLANMUX_BEFORE=/path/to/an/older/planmux` the same cases run against that binary too,
//! in the same run (the downstream demos always come from this build: older ones lack
//! `hostile`). `-- --quick` (and `cargo test`) runs a few small cases against this build
//! only.
#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_planmux");
/// How long a case may take before it counts as "no answer".
const CAP: Duration = Duration::from_secs(15);

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// One planmux process over raw pipes, its replies read on a thread.
struct Raw {
    child: Child,
    stdin: ChildStdin,
    replies: mpsc::Receiver<(usize, Value)>,
}

impl Raw {
    fn start(bin: &str) -> anyhow::Result<(Self, tempfile::TempDir)> {
        let dir = tempfile::tempdir()?;
        let config = format!(
            "[proxy]\ncall_timeout_ms = 20000\n\
             [servers.hostile]\ncommand = \"{BIN}\"\nargs = [\"demo\", \"hostile\"]\n\
             [servers.chaos]\ncommand = \"{BIN}\"\nargs = [\"demo\", \"chaos\"]\n"
        );
        let path = dir.path().join("servers.toml");
        std::fs::write(&path, config)?;
        let mut child = Command::new(bin)
            .args(["serve", "--config"])
            .arg(&path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let (tx, replies) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout);
            let mut line = String::new();
            while lines.read_line(&mut line).unwrap_or(0) > 0 {
                let mut parser = serde_json::Deserializer::from_str(&line);
                parser.disable_recursion_limit();
                let value = Value::deserialize(&mut parser).unwrap_or(Value::Null);
                if tx.send((line.len(), value)).is_err() {
                    break;
                }
                line.clear();
            }
        });
        Ok((
            Self {
                child,
                stdin,
                replies,
            },
            dir,
        ))
    }

    fn send(&mut self, line: &str) -> bool {
        writeln!(self.stdin, "{line}").is_ok() && self.stdin.flush().is_ok()
    }

    /// The reply with `id`, its size in bytes, or `None` past the deadline.
    fn reply(&self, id: u64, until: Instant) -> Option<(usize, Value)> {
        loop {
            let left = until.checked_duration_since(Instant::now())?;
            match self.replies.recv_timeout(left) {
                Ok((size, value)) if value["id"] == id => return Some((size, value)),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    /// Peak resident memory in MiB.
    fn peak_rss(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb / 1024.0)
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One case: the lines to send after the handshake (the last is a request with id 2).
struct Case {
    name: &'static str,
    early: bool,
    lines: Vec<String>,
}

fn call(name: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
    .to_string()
}

fn plan(plan: Value) -> String {
    call("execute_plan", plan)
}

fn nested(depth: usize, leaf: Value) -> Value {
    (0..depth).fold(leaf, |inner, _| json!({ "a": inner }))
}

fn cases(quick: bool) -> Vec<Case> {
    let scale = |full: usize, small: usize| if quick { small } else { full };
    let mut cases = vec![
        Case {
            name: "schema bomb: allOf of three $ref \"#\"",
            early: false,
            lines: vec![plan(
                json!({"steps": [{"tool": "hostile__bomb", "args": {"a": 1, "b": [1, 2]}}]}),
            )],
        },
        Case {
            name: "host line nested 129 deep",
            early: false,
            lines: vec![call("chaos__echo", json!({"v": nested(129, json!(7))}))],
        },
        Case {
            name: "notification before initialize",
            early: true,
            lines: vec![call("chaos__echo", json!({"ok": true}))],
        },
        Case {
            name: "dangling references, 4,000 steps",
            early: false,
            lines: vec![plan(json!({"steps": (0..scale(4_000, 500)).map(|i| json!(
                {"id": format!("s{i}"), "tool": "chaos__echo", "args": {"v": format!("$ref:nope{i}")}}
            )).collect::<Vec<_>>()}))],
        },
        Case {
            name: "400 kB string of `$<`",
            early: false,
            lines: vec![plan(
                json!({"steps": [{"tool": "chaos__echo", "args": {"v": "$<".repeat(scale(200_000, 20_000))}}]}),
            )],
        },
    ];
    if quick {
        return cases;
    }
    let all_read_all: Vec<Value> = (0..256)
        .map(|i| {
            let reads: serde_json::Map<String, Value> = (0..256)
                .filter(|j| *j != i)
                .map(|j| (format!("r{j}"), json!(format!("$ref:s{j}"))))
                .collect();
            json!({"id": format!("s{i}"), "tool": "chaos__echo", "args": reads})
        })
        .collect();
    let chain: Vec<Value> = (0..125)
        .map(|i| {
            let v = if i == 0 {
                json!(0)
            } else {
                json!(format!("$ref:s{}", i - 1))
            };
            json!({"id": format!("s{i}"), "tool": "chaos__echo", "args": {"v": v}})
        })
        .collect();
    cases.extend([
        Case {
            name: "JSONPath `$..*..*..*..*[?@ == 7]` over input 70 deep, timeout_ms 500",
            early: false,
            lines: vec![plan(json!({
                "inputs": {"x": nested(70, json!(7))},
                "timeout_ms": 500,
                "steps": [{"tool": "chaos__echo", "args": {"v": {"$ref": "input.x", "jsonpath": "$..*..*..*..*[?@ == 7]"}}}]
            }))],
        },
        Case {
            name: "5 MB tool name",
            early: false,
            lines: vec![plan(json!({"steps": [{"tool": "x".repeat(5_000_000)}]}))],
        },
        Case {
            name: "256 steps, each reading every other (cycles)",
            early: false,
            lines: vec![plan(json!({ "steps": all_read_all }))],
        },
        Case {
            name: "answer of 16 MiB (chaos__bytes)",
            early: false,
            lines: vec![call("chaos__bytes", json!({"n": 16_777_216}))],
        },
        Case {
            name: "125-step echo chain",
            early: false,
            lines: vec![plan(json!({"steps": chain, "outputs": ["s124"]}))],
        },
    ]);
    cases
}

/// What one case did against one binary.
struct Outcome {
    took: Option<Duration>,
    rss: Option<f64>,
    answer: String,
}

fn run_case(bin: &str, case: &Case) -> anyhow::Result<Outcome> {
    let (mut raw, _dir) = Raw::start(bin)?;
    if case.early {
        raw.send(INITIALIZED);
    }
    raw.send(INIT);
    let deadline = Instant::now() + CAP;
    if raw.reply(1, deadline).is_none() {
        let exited = raw.child.try_wait()?.is_some();
        let answer = if exited {
            "planmux exited"
        } else {
            "no answer to initialize"
        };
        return Ok(Outcome {
            took: None,
            rss: raw.peak_rss(),
            answer: answer.into(),
        });
    }
    raw.send(INITIALIZED);
    // Let the servers start, so the case measures only itself.
    raw.send(&call("chaos__echo", json!({})).replace("\"id\":2", "\"id\":99"));
    raw.reply(99, Instant::now() + CAP);
    let started = Instant::now();
    for line in &case.lines {
        raw.send(line);
    }
    let reply = raw.reply(2, started + CAP);
    let took = reply.as_ref().map(|_| started.elapsed());
    let answer = match &reply {
        None if raw.child.try_wait()?.is_some() => "planmux exited".into(),
        None => format!("no answer in {} s", CAP.as_secs()),
        Some((size, value)) => describe(*size, value),
    };
    Ok(Outcome {
        took,
        rss: raw.peak_rss(),
        answer,
    })
}

/// A short account of a reply: its kind, status and size.
fn describe(size: usize, value: &Value) -> String {
    let kind = if let Some(error) = value.get("error") {
        format!("JSON-RPC error {}", error["code"])
    } else if let Some(status) = value["result"]["structuredContent"]["status"].as_str() {
        format!("plan {status}")
    } else if value["result"]["isError"] == true {
        "tool error".into()
    } else {
        "result".into()
    };
    format!("{kind}, {}", size_text(size))
}

fn size_text(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

fn cell(outcome: &Outcome) -> String {
    let took = outcome.took.map_or_else(
        || format!("> {} s", CAP.as_secs()),
        |d| format!("{:.1} ms", d.as_secs_f64() * 1e3),
    );
    let rss = outcome.rss.map_or("?".into(), |m| format!("{m:.1} MiB"));
    format!("{took} | {rss} | {}", outcome.answer)
}

/// 20 MB through planmux and straight from the same server, one after the other.
fn large_output() -> anyhow::Result<(Duration, Duration, Option<f64>)> {
    let n = 20_000_000;
    let (mut proxied, _dir) = Raw::start(BIN)?;
    proxied.send(INIT);
    proxied.reply(1, Instant::now() + CAP);
    proxied.send(INITIALIZED);
    let started = Instant::now();
    proxied.send(&call("chaos__bytes", json!({"n": n})));
    let through = proxied.reply(2, started + CAP).map(|_| started.elapsed());
    let rss = proxied.peak_rss();

    let mut child = Command::new(BIN)
        .args(["demo", "chaos"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdin"))?;
    let mut stdout = BufReader::new(
        child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?,
    );
    let mut line = String::new();
    writeln!(stdin, "{INIT}")?;
    stdout.read_line(&mut line)?;
    writeln!(stdin, "{INITIALIZED}")?;
    line.clear();
    let started = Instant::now();
    writeln!(stdin, "{}", call("bytes", json!({"n": n})))?;
    stdout.read_line(&mut line)?;
    let direct = started.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    anyhow::ensure!(
        line.len() > n,
        "the direct answer is short: {} bytes",
        line.len()
    );
    Ok((through.unwrap_or(CAP), direct, rss))
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes --bench; `cargo test` does not, and gets the quick run.
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick") || !args.iter().any(|a| a == "--bench");
    let before = std::env::var("PLANMUX_BEFORE").ok().filter(|_| !quick);
    let mut rows = Vec::new();
    let header = match &before {
        Some(_) => {
            "| case | before: time | RSS | answer | after: time | RSS | answer |\n| --- | --- | --- | --- | --- | --- | --- |"
        }
        None => "| case | time | RSS | answer |\n| --- | --- | --- | --- |",
    };
    println!(
        "hostile input (time to the answer, capped at {} s; planmux's peak RSS)\n\n{header}",
        CAP.as_secs()
    );
    for case in cases(quick) {
        let after = run_case(BIN, &case)?;
        let mut row = json!({"case": case.name,
            "after": {"ms": after.took.map(|d| d.as_secs_f64() * 1e3), "rss_mib": after.rss, "answer": after.answer}});
        let line = match &before {
            Some(old) => {
                let was = run_case(old, &case)?;
                row["before"] = json!({"ms": was.took.map(|d| d.as_secs_f64() * 1e3), "rss_mib": was.rss, "answer": was.answer});
                format!("| {} | {} | {} |", case.name, cell(&was), cell(&after))
            }
            None => format!("| {} | {} |", case.name, cell(&after)),
        };
        println!("{line}");
        // In quick mode, a case that gets no answer is a broken build, not a figure.
        anyhow::ensure!(
            !quick || after.took.is_some(),
            "{}: {}",
            case.name,
            after.answer
        );
        rows.push(row);
    }
    if !quick {
        let (through, direct, rss) = large_output()?;
        println!(
            "\nlarge output, 20 MB (chaos__bytes): through planmux {:.0} ms (peak RSS {}), direct {:.0} ms, ratio {:.2}",
            through.as_secs_f64() * 1e3,
            rss.map_or("?".into(), |m| format!("{m:.1} MiB")),
            direct.as_secs_f64() * 1e3,
            through.as_secs_f64() / direct.as_secs_f64()
        );
        rows.push(
            json!({"case": "large output 20 MB", "through_ms": through.as_secs_f64() * 1e3,
            "direct_ms": direct.as_secs_f64() * 1e3, "rss_mib": rss}),
        );
        let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
        std::fs::create_dir_all(&out)?;
        std::fs::write(
            out.join("hostile.json"),
            serde_json::to_string_pretty(&rows)?,
        )?;
    }
    Ok(())
}
