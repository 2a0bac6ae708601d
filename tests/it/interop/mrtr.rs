//! The official Python SDK on both sides of planmux, with a multi-round-trip request
//! (MRTR, SEP-2322) between them: a modern server (tests/interop/mrtr_server.py) whose
//! `greet` answers its first call with `input_required` (one `elicitation/create` and a
//! `requestState` it seals itself), behind `planmux serve` over stdio, and a host
//! (tests/interop/mrtr_host.py) that answers the question with "Ada".
//!
//! A legacy host (`initialize`) is asked by planmux with an `elicitation/create` request,
//! and planmux retries the server; a modern host (`server/discover`) gets the
//! `input_required` result with planmux's sealed `requestState` and retries itself. Either
//! way the server sees its own state come back unchanged and its arguments unchanged (its
//! seal is bound to both); had planmux connected with `initialize`, it would answer an error.

use std::time::Duration;

use serde_json::{Value, json};

use super::support::{self, Timer, stdio_server};
use crate::common;

type R = anyhow::Result<()>;

/// Runs mrtr_host.py in `mode` against planmux serving mrtr_server.py as `py`, and returns
/// its JSON summary.
async fn python_host(mode: &str) -> anyhow::Result<Value> {
    let python = support::python();
    let python = python.to_string_lossy();
    let interop = common::interop_dir();
    let server = interop.join("mrtr_server.py");
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("servers.toml");
    std::fs::write(
        &config,
        stdio_server("py", &python, &[&server.to_string_lossy()], ""),
    )?;
    let run = tokio::process::Command::new(&*python)
        .arg(interop.join("mrtr_host.py"))
        .args(["--planmux", common::bin(), "--mode", mode, "--config"])
        .arg(&config)
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .map_err(|_| anyhow::anyhow!("mrtr_host.py --mode {mode} did not finish within 60 s"))??;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    anyhow::ensure!(
        out.status.success(),
        "mrtr_host.py --mode {mode} failed ({}):\n--- stderr ---\n{stderr}\n--- stdout ---\n{stdout}",
        out.status
    );
    serde_json::from_str(&stdout).map_err(|e| {
        anyhow::anyhow!("mrtr_host.py printed no JSON summary ({e}):\n{stdout}\n{stderr}")
    })
}

/// The server's answer reached the host, which was asked once, in the era it speaks.
fn check_answered(summary: &Value, protocol: &str) {
    assert_eq!(summary["protocol"], json!(protocol), "{summary:#}");
    assert_eq!(summary["text"], json!("Hello, Ada!"), "{summary:#}");
    assert_eq!(summary["is_error"], json!(false), "{summary:#}");
    assert_eq!(
        summary["elicitations"],
        json!(["Who is there?"]),
        "{summary:#}"
    );
}

#[tokio::test]
async fn a_legacy_python_host_is_asked_a_modern_python_servers_question_by_elicitation() -> R {
    let _t = Timer::start("mrtr_legacy_host");
    let summary = python_host("legacy").await?;
    check_answered(&summary, "2025-11-25");
    Ok(())
}

#[tokio::test]
async fn a_modern_python_host_answers_input_required_and_a_forged_state_is_refused() -> R {
    let _t = Timer::start("mrtr_modern_host");
    let summary = python_host("auto").await?;
    check_answered(&summary, "2026-07-28");
    // A retry whose requestState was changed by one character: invalid params, naming
    // requestState and the exported tool (the server knows only `greet`, and its own
    // refusal says "Invalid or expired requestState"): planmux refused it itself.
    let tampered = &summary["tampered"];
    assert_eq!(tampered["code"], json!(-32602), "{tampered:#}");
    let message = tampered["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("requestState") && message.contains("py__greet"),
        "{tampered:#}"
    );
    Ok(())
}
