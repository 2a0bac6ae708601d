//! Plans on the data real servers return (DESIGN §17), against servers nobody here wrote:
//! server-filesystem and server-everything from npm, and the time, git and SQLite
//! reference servers from PyPI (tests/interop/.venv-servers, .venv-sqlite). Each plan is
//! one the issue that asked for this found failing: a JSON file read as text and branched
//! on, a loop over `directory_tree`'s JSON text, two loops paired by `index`, SQLite's
//! Python repr parsed, a misspelled output field, an argument the tool does not take,
//! another system's template syntax, and a misspelled tool name.

use std::path::Path;

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use super::support::{EVERYTHING, FILESYSTEM, entry, node, stdio_server};
use crate::common::{self, Proxy, call, text};

/// A program of one of the venvs with real servers, checked to be there.
fn venv_program(venv: &str, program: &str) -> String {
    let path = common::interop_dir().join(venv).join("bin").join(program);
    assert!(
        path.is_file(),
        "{} is missing: run scripts/install-interop (scripts/test does)",
        path.display()
    );
    path.to_string_lossy().into_owned()
}

/// A folder with a JSON file and two text files, a git repository with three commits,
/// and a SQLite database with a table of two rows.
fn fixtures(dir: &Path) -> anyhow::Result<()> {
    let data = dir.join("data");
    std::fs::create_dir_all(&data)?;
    std::fs::write(
        data.join("cfg.json"),
        "{\"threshold\": 3, \"name\": \"cfg\"}\n",
    )?;
    std::fs::write(data.join("a.txt"), "alpha\n")?;
    std::fs::write(data.join("b.txt"), "beta\n")?;
    let repo = dir.join("repo");
    let git = |args: &[&str]| -> anyhow::Result<()> {
        let status = std::process::Command::new("git")
            .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
            .args(args)
            .current_dir(&repo)
            .status()?;
        anyhow::ensure!(status.success(), "git {args:?}: {status}");
        Ok(())
    };
    std::fs::create_dir_all(&repo)?;
    git(&["init", "-q"])?;
    for message in ["one", "two", "three"] {
        git(&["commit", "-q", "--allow-empty", "-m", message])?;
    }
    let python = venv_program(".venv-sqlite", "python");
    let status = std::process::Command::new(python)
        .arg("-c")
        .arg(
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); \
             c.execute('create table t (id integer, name text, ok boolean)'); \
             c.execute(\"insert into t values (1, 'a', 1), (2, 'b', 0)\"); c.commit()",
        )
        .arg(dir.join("db.sqlite"))
        .status()?;
    anyhow::ensure!(status.success(), "creating the database: {status}");
    Ok(())
}

/// planmux in front of the five real servers, on the fixtures in `dir`.
async fn proxy(dir: &Path) -> anyhow::Result<Proxy> {
    let data = dir.join("data").to_string_lossy().into_owned();
    let db = dir.join("db.sqlite").to_string_lossy().into_owned();
    let config = [
        // SQLite's tools say nothing of what they change: every plan would need approval.
        "[policy]\nconfirm = \"none\"\n".to_owned(),
        stdio_server("fs", node(), &[&entry(FILESYSTEM), &data], ""),
        stdio_server("everything", node(), &[&entry(EVERYTHING)], ""),
        stdio_server(
            "time",
            &venv_program(".venv-servers", "mcp-server-time"),
            &[],
            "",
        ),
        stdio_server(
            "git",
            &venv_program(".venv-servers", "mcp-server-git"),
            &[],
            "",
        ),
        stdio_server(
            "sqlite",
            &venv_program(".venv-sqlite", "mcp-server-sqlite"),
            &["--db-path", &db],
            "",
        ),
    ]
    .join("\n");
    common::start(&config).await
}

/// Runs `plan` through `execute_plan`: the result, its structured content, its text.
async fn run(proxy: &Proxy, plan: Value) -> anyhow::Result<(CallToolResult, Value, String)> {
    let result = proxy.client.call_tool(call("execute_plan", plan)).await?;
    let structured = result.structured_content.clone().unwrap_or_default();
    let text = text(&result);
    Ok((result, structured, text))
}

#[tokio::test]
async fn plans_run_on_what_real_servers_return() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    fixtures(dir.path())?;
    let proxy = proxy(dir.path()).await?;
    let data = dir.path().join("data");
    let file = |name: &str| data.join(name).to_string_lossy().into_owned();
    let repo = dir.path().join("repo").to_string_lossy().into_owned();

    // A JSON file read through server-filesystem ({"content": "<text>"}), branched on.
    let (_, s, text) = run(
        &proxy,
        json!({"steps": [
            {"id": "cfg", "tool": "fs__read_text_file", "args": {"path": file("cfg.json")}},
            {"id": "alert", "tool": "everything__echo", "when": {"$ref": "cfg.content.threshold", "gt": 2},
             "args": {"message": "threshold ${cfg.content.threshold}"}}],
         "outputs": ["alert"]}),
    )
    .await?;
    assert_eq!(s["status"], "succeeded", "{text}");
    assert!(
        s["outputs"]["alert"].to_string().contains("threshold 3"),
        "{s:#}"
    );

    // A loop over directory_tree's JSON text.
    let (_, s, text) = run(
        &proxy,
        json!({"steps": [
            {"id": "tree", "tool": "fs__directory_tree", "args": {"path": data}},
            {"id": "names", "foreach": "$ref:tree.content", "value": "${item.name}"}],
         "outputs": ["names"]}),
    )
    .await?;
    assert_eq!(s["status"], "succeeded", "{text}");
    let mut names: Vec<String> = serde_json::from_value(s["outputs"]["names"].clone())?;
    names.sort();
    assert_eq!(names, ["a.txt", "b.txt", "cfg.json"], "{s:#}");

    // Two loops over the same items, paired by `index`.
    let (_, s, text) = run(
        &proxy,
        json!({"steps": [
            {"id": "files", "value": ["a.txt", "b.txt"]},
            {"id": "read", "foreach": "$ref:files", "tool": "fs__read_text_file",
             "args": {"path": format!("{}/${{item}}", data.display())}},
            {"id": "pair", "foreach": "$ref:files",
             "value": {"file": "$ref:item", "text": "$ref:read[index].content"}}],
         "outputs": ["pair"]}),
    )
    .await?;
    assert_eq!(s["status"], "succeeded", "{text}");
    assert_eq!(
        s["outputs"]["pair"],
        json!([{"file": "a.txt", "text": "alpha\n"}, {"file": "b.txt", "text": "beta\n"}]),
        "{s:#}"
    );

    // SQLite answers with a Python repr: parsed (JSON5) and looped over.
    let (_, s, text) = run(
        &proxy,
        json!({"steps": [
            {"id": "q", "tool": "sqlite__read_query", "args": {"query": "select * from t order by id"}},
            {"id": "names", "foreach": {"$ref": "q", "parse": "json"}, "value": "${item.name}"}],
         "outputs": ["names"]}),
    )
    .await?;
    assert_eq!(s["status"], "succeeded", "{text}");
    assert_eq!(s["outputs"]["names"], json!(["a", "b"]), "{s:#}");

    // A misspelled field of a tool with an outputSchema: not a success with null.
    let (result, _, text) = run(
        &proxy,
        json!({"steps": [
            {"id": "t", "tool": "time__get_current_time", "args": {"timezone": "UTC"}},
            {"id": "e", "tool": "everything__echo", "args": {"message": "Now: ${t.date_time}"}}]}),
    )
    .await?;
    assert_eq!(result.is_error, Some(true), "{text}");
    assert!(
        text.contains("date_time") && text.contains("datetime"),
        "{text}"
    );
    assert!(!text.contains("Now: null"), "{text}");

    // An argument git_log does not take: the run says so in the text the model reads.
    let (_, s, text) = run(
        &proxy,
        json!({"steps": [{"id": "log", "tool": "git__git_log", "args": {"repo_path": repo, "limit": 1}}]}),
    )
    .await?;
    assert_ne!(s["status"], "failed", "{text}");
    assert!(
        text.contains("limit") && text.contains("max_count"),
        "{text}"
    );

    // Another system's template syntax pointing at a step.
    let (result, _, text) = run(
        &proxy,
        json!({"steps": [
            {"id": "t", "tool": "time__get_current_time", "args": {"timezone": "UTC"}},
            {"id": "e", "tool": "everything__echo", "args": {"message": "Now: {{t.datetime}}"}}]}),
    )
    .await?;
    assert_eq!(result.is_error, Some(true), "{text}");
    assert!(text.contains("${t.datetime}"), "{text}");

    // A misspelled tool name: refused alike in a plan and in a direct call, naming it.
    let (result, _, text) = run(
        &proxy,
        json!({"steps": [{"id": "log", "tool": "git__gitlog", "args": {"repo_path": repo}}]}),
    )
    .await?;
    assert_eq!(result.is_error, Some(true), "{text}");
    assert!(text.contains("git__git_log"), "{text}");
    let direct = proxy
        .client
        .call_tool(call("git__gitlog", json!({"repo_path": repo})))
        .await;
    let said = match direct {
        Ok(result) => crate::common::text(&result),
        Err(error) => error.to_string(),
    };
    assert!(said.contains("git__git_log"), "{said}");
    Ok(())
}
