//! The console (DESIGN §16) in a real browser: Debian's Chromium, headless, driven over the
//! DevTools protocol by tests/interop/console_browser.mjs beside an MCP host (the official
//! TypeScript SDK) on the same `planmux console`: signing in, a quarantined tool accepted
//! and then callable, a plan watched step by step on the runs page while it runs, then
//! with its graph and timeline, a lazy plan's graph and schedule,
//! a plan approved on the page (it runs) and one declined (nothing runs), the audit trail;
//! no token, another origin and a stale CSRF token refused. The screenshots go to a
//! temporary folder, or to docs/ with `PLANMUX_SCREENSHOTS=docs` (what the README shows).

use std::path::PathBuf;

use serde_json::Value;

use super::support::{Listening, summary_of};
use crate::common::interop_dir;

type R = anyhow::Result<()>;

const TOKEN: &str = "console-test-token-0123456789";
/// The tool `servers.lock` is made to hold back (new since the lock).
const HELD: &str = "chaos__count";

/// The CSRF token a console page's forms carry.
pub(super) fn csrf_of(page: &str) -> String {
    page.split(r#"name="csrf" value=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
        .to_owned()
}

/// Debian's Chromium (or `$CHROMIUM`), checked to be there.
fn chromium() -> String {
    let path = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&path).is_file(),
        "the console test needs Chromium at {path} (Debian: apt-get install chromium; scripts/install-interop installs it)"
    );
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_works_in_a_real_browser() -> R {
    let chromium = chromium();
    let node = interop_dir().join("node_modules/node/bin/node");
    anyhow::ensure!(
        node.is_file(),
        "Node 22 is not installed at {}",
        node.display()
    );
    let dir = tempfile::tempdir()?;
    let sandbox = dir.path().join("sandbox");
    std::fs::create_dir_all(&sandbox)?;
    let config = dir.path().join("servers.toml");
    std::fs::write(
        &config,
        format!(
            "[http]\ntokens = [\"{TOKEN}\"]\n\n[servers.chaos]\nbuiltin = \"chaos\"\n\n\
             [servers.fs]\nbuiltin = \"files\"\ncwd = \"{}\"\n",
            sandbox.display()
        ),
    )?;
    let config = config.to_string_lossy().into_owned();
    // Pin every tool, then forget one: it is new since the lock, so it is held back.
    let locked = std::process::Command::new(crate::common::bin())
        .args(["lock", "--config", &config])
        .output()?;
    anyhow::ensure!(locked.status.success(), "planmux lock: {locked:?}");
    let lock_path = dir.path().join("servers.lock");
    let mut lock: Value = serde_json::from_str(&std::fs::read_to_string(&lock_path)?)?;
    let forgotten = lock["servers"]["chaos"]
        .as_object_mut()
        .map(|t| t.remove("count"));
    anyhow::ensure!(
        forgotten.flatten().is_some(),
        "the lock has no chaos count: {lock}"
    );
    // And one pinned as it was before: its description changed since.
    let log = &mut lock["servers"]["chaos"]["log"];
    log["description"] = Value::String("0".repeat(64));
    let mut pinned: Value = serde_json::from_str(log["pinned"].as_str().unwrap_or("{}"))?;
    pinned["description"] = Value::String("An older description.".into());
    log["pinned"] = Value::String(pinned.to_string());
    std::fs::write(&lock_path, serde_json::to_string_pretty(&lock)?)?;

    let planmux = Listening::start(&["console"], &["--config", &config]).await?;
    let base = planmux.url().trim_end_matches("/mcp").to_owned();
    let shots = match std::env::var("PLANMUX_SCREENSHOTS").as_deref() {
        Ok("docs") => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs"),
        _ => dir.path().to_owned(),
    };
    let out = tokio::process::Command::new(&node)
        .arg(interop_dir().join("console_browser.mjs"))
        .current_dir(interop_dir())
        .env("CONSOLE", &base)
        .env("TOKEN", TOKEN)
        .env("CHROMIUM", &chromium)
        .env("SHOTS", &shots)
        .env("QUARANTINED", HELD)
        .env("SANDBOX", &sandbox)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), out).await??;
    let s = summary_of(&out)?;

    // Refused: no token (the sign-in page), another origin, a stale CSRF token.
    assert_eq!(s["unsigned"], 401, "{s}");
    assert_eq!(s["other_origin"], 403, "{s}");
    assert_eq!(s["bad_csrf"], 403, "{s}");
    assert_eq!(s["sign_in_page"], true, "{s}");
    assert_eq!(
        s["servers"],
        serde_json::json!(["chaos:connected", "fs:connected"]),
        "{s}"
    );
    // Quarantined: on the page, not for the host; accepted: listed and callable.
    assert_eq!(s["quarantined_shown"], true, "{s}");
    assert_eq!(s["quarantined_listed_before"], false, "{s}");
    assert_eq!(s["quarantined_listed_after"], true, "{s}");
    assert_eq!(s["accepted_call_ok"], true, "{s}");
    // A changed one: what changed, as a diff against what the lock pinned.
    assert_eq!(s["changed_shown"], true, "{s}");
    let removed = serde_json::json!([r#"-   "description": "An older description.""#]);
    assert_eq!(s["diff_removed"], removed, "{s}");
    assert_eq!(s["diff_added"].as_array().map(Vec::len), Some(1), "{s}");
    let lock: Value = serde_json::from_str(&std::fs::read_to_string(&lock_path)?)?;
    assert!(
        lock["servers"]["chaos"]["count"].is_object(),
        "not pinned: {lock}"
    );
    // The plan, live on the runs page, as a graph of 3 steps (c waits for a and b).
    assert_eq!(s["seen_running"], true, "{s}");
    assert_eq!(s["plan_status"], "succeeded", "{s}");
    assert_eq!(s["live_without_reload"], true, "{s}");
    assert_eq!(s["graph_nodes"], 3, "{s}");
    assert_eq!(s["graph_edges"], 2, "{s}");
    assert_eq!(s["timeline_bars"], 3, "{s}");
    assert_eq!(s["steps_succeeded"], 3, "{s}");
    // A lazy plan: what would run, and what would need approval; nothing ran.
    assert_eq!(s["lazy_status"], "planned", "{s}");
    assert_eq!(s["lazy_nodes"], 2, "{s}");
    assert_eq!(s["lazy_edges"], 1, "{s}");
    assert_eq!(s["lazy_schedule_names_approval"], true, "{s}");
    assert_eq!(s["lazy_wrote"], false, "{s}");
    // Approved on the page: it ran, once; the token then says so.
    assert_eq!(s["asked_status"], "needs_approval", "{s}");
    assert_eq!(s["approval_shows_step"], true, "{s}");
    assert_eq!(s["approved_step_status"], "succeeded", "{s}");
    assert_eq!(s["approved_file"], true, "{s}");
    assert!(
        std::fs::read_to_string(sandbox.join("approved.txt"))? == "from the console test",
        "{s}"
    );
    let told = s["token_after_console"].as_str().unwrap_or_default();
    assert!(told.contains("approved on the console"), "{s}");
    // Declined on the page: nothing ran.
    assert_eq!(s["declined_file"], false, "{s}");
    assert!(!sandbox.join("declined.txt").exists());
    // The audit trail has both answers and the approved call, by the console.
    let audit: Vec<&str> = s["audit_decisions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for wanted in ["approved/console", "declined/console", "allow/console"] {
        assert!(audit.contains(&wanted), "{wanted} not in {audit:?}");
    }
    // The answers name the console's user (its token's holder), and the approved plan's
    // call was made as it.
    for wanted in ["approved/token:1", "declined/token:1", "allow/token:1"] {
        assert!(
            s["audit_callers"]
                .as_array()
                .is_some_and(|rows| rows.iter().any(|r| r == wanted)),
            "{wanted}: {s}"
        );
    }
    // And the tool accepted on the page, by whom: the token's holder.
    let accepted = &s["audit_accepted"];
    assert!(
        accepted
            .as_array()
            .is_some_and(|rows| rows.iter().any(|r| r == "accepted/token:1/console")),
        "{s}"
    );
    Ok(())
}

/// A server that needs a sign-in (OAuth, against oidc-provider) shows the console's Sign
/// in button; pressing it sends the browser to the authorization server (oauth/browser.py
/// logs in as alice and consents), whose redirect comes back to planmux, and the server
/// connects: its tools are on the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_signs_in_from_the_console() -> R {
    let fixture = super::oauth::Fixture::start().await?;
    let port = super::support::free_port();
    let log = std::fs::File::create(fixture.data_home().with_file_name("console.log"))?;
    let _console = fixture
        .planmux(&["console", &format!("127.0.0.1:{port}")], "false", "info")
        .stderr(log)
        .spawn()?;
    let base = format!("http://127.0.0.1:{port}");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    // The page, once it says what `probe` does: (its text, whether `probe` is in it).
    let page_until = |probe: &'static str| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            loop {
                let text = match http.get(format!("{base}/console")).send().await {
                    Ok(answer) => answer.text().await.unwrap_or_default(),
                    Err(_) => String::new(),
                };
                if text.contains(probe) || std::time::Instant::now() > deadline {
                    let found = text.contains(probe);
                    return (text, found);
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    };
    let (page, found) = page_until("/console/servers/sign-in").await;
    assert!(found, "no Sign in button: {page}\n{}", fixture.logs());
    assert!(page.contains("needs sign-in"), "{page}");
    let csrf = csrf_of(&page);
    let pressed = http
        .post(format!("{base}/console/servers/sign-in"))
        .header("origin", &base)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("server=remote&csrf={csrf}"))
        .send()
        .await?;
    assert_eq!(pressed.status(), 303, "{}", pressed.text().await?);
    let to = pressed
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(to.contains("/auth?"), "not the authorization server: {to}");
    let browser = fixture.browser("");
    let mut words = browser.split_whitespace();
    let program = words.next().unwrap_or_default();
    let signed = tokio::process::Command::new(program)
        .args(words)
        .arg(&to)
        .output()
        .await?;
    assert!(signed.status.success(), "{signed:?}");
    let (page, connected) = page_until(r#"data-tool="remote__"#).await;
    assert!(
        connected,
        "not connected after the sign-in: {page}\n{}",
        fixture.logs()
    );
    assert!(!page.contains("/console/servers/sign-in"), "{page}");
    Ok(())
}
