//! The invariants the compiler does not hold, held by reading the source (as
//! rust-analyzer's `tidy.rs` does): every file says what it is (`//!`), stays readable
//! in one sitting, spawns background work only where an owner keeps it, builds MCP
//! errors only at the boundaries that answer peers, and starts processes only in the
//! transport. The checkpoint's own scan is in `safety.rs`.

use std::path::Path;

use crate::common;

/// Most lines a source file may have: one concept, read in one sitting.
const LINE_BUDGET: usize = 600;

/// Files still over the budget, each with its length: none may grow, and each comes off
/// this list when it is split.
const OVER_BUDGET: &[(&str, usize)] = &[];

/// Where background work is spawned, and who owns it. A spawn anywhere else (or a new
/// one here) fails: give it an owner (a `TaskTracker`, a `JoinSet`, a kept handle) and
/// add it with its reason.
const SPAWNS: &[(&str, &str)] = &[
    // Owned by the downstreams' tracker, which shutdown closes and waits for.
    ("downstream/calls.rs", "self.tracker.spawn(async move {"),
    (
        "downstream/calls.rs",
        ".spawn(sweep(Arc::downgrade(table), table.ended.clone()));",
    ),
    (
        "downstream/mod.rs",
        "tracker.spawn(refresh::refresh_changed(",
    ),
    ("downstream/mod.rs", "self.tracker.spawn(work);"),
    ("downstream/server.rs", "self.tracker.spawn(async move {"),
    // A 2026-07-28 server's listen stream (list changes), its resource watches, and the
    // rounds of its questions: on the downstreams' tracker, each ending with its
    // connection (or its call).
    (
        "downstream/server.rs",
        "self.tracker.spawn(super::era::listen(",
    ),
    (
        "downstream/server/watches.rs",
        "self.tracker.spawn(async move {",
    ),
    (
        "downstream/server/inputs.rs",
        "tracker.spawn(async move { server.answer_turn(turn).await });",
    ),
    // The `tasks/cancel` of a task planmux followed and stopped following: bounded by
    // `SETTLE`.
    (
        "downstream/server/tasks.rs",
        "self.server.tracker.spawn(async move {",
    ),
    // A 2025-11-25 host's task message answered: on the passthrough's tracker, which
    // shutdown waits for.
    (
        "upstream/passthrough/tasks.rs",
        "self.tasks.spawn(self.clone().answer_task(message));",
    ),
    // A task planmux runs itself (a plan as a task, a fixture's job): held by its rmcp
    // `TaskManager`, shut down when its `TaskSet` evicts or drops it.
    ("task_set.rs", "let task = manager.spawn(options, work);"),
    ("downstream/sign_ins.rs", "self.tracker.spawn(async move {"),
    ("downstream/transport.rs", "tracker.spawn(async move {"),
    (
        "downstream/transport.rs",
        "tracker.spawn(crate::demo::serve_on(*kind, root.clone(), served));",
    ),
    // A child process, held by its process-group guard.
    (
        "downstream/transport.rs",
        "let mut child = wrap.spawn().map_err(|e| match cwd {",
    ),
    // The progress queue's task, held and aborted by its `Forwarding`.
    (
        "downstream/tap.rs",
        "self.task = Some(tokio::spawn(async move {",
    ),
    // Awaited at once: the request leaves rmcp's scope for the server's request.
    (
        "downstream/relay.rs",
        "let handle = tokio::spawn(async move {",
    ),
    // The passthrough's admission waits and shutdown watcher: its tracker, waited for by
    // `serve`.
    (
        "upstream/passthrough/mod.rs",
        "path.tasks.spawn(async move {",
    ),
    (
        "upstream/passthrough/mod.rs",
        ".spawn(self.clone().admit(admission, proof, cancel));",
    ),
    // A plan's progress relay: its handle kept and awaited by the run.
    ("upstream/plans.rs", "let task = tokio::spawn(async move {"),
    // Blocking work awaited at once.
    (
        "exec/step.rs",
        "let resolving = tokio::task::spawn_blocking(resolve);",
    ),
    (
        "runner.rs",
        "let checking = tokio::task::spawn_blocking(move || {",
    ),
    (
        "runner.rs",
        "let built = tokio::task::spawn_blocking(move || {",
    ),
    (
        "cli/terminal.rs",
        "let asked = tokio::task::spawn_blocking(move || -> anyhow::Result<bool> {",
    ),
    // Start-up and reload watchers, and the keeper of the shared store's sealing key:
    // handles kept and aborted when serving ends.
    (
        "serve.rs",
        ".map(|store| tokio::spawn(crate::upstream::share_sealing_key(store)));",
    ),
    (
        "http.rs",
        ".map(|store| tokio::spawn(crate::upstream::share_sealing_key(store)));",
    ),
    ("serve.rs", "let starting = tokio::spawn({"),
    (
        "serve.rs",
        "let reloading = tokio::spawn(crate::reload::watch(",
    ),
    ("http.rs", "let starting = tokio::spawn({"),
    (
        "http.rs",
        "let reloading = tokio::spawn(crate::reload::watch(",
    ),
    // Each HTTP connection: a `JoinSet` the accept loop owns.
    ("http.rs", "connections.spawn(async move {"),
    ("demo/mod.rs", "connections.spawn(async move {"),
    // A pipe's reader thread ends when its pipe closes (its transport dropped); a
    // stream's reader task is aborted with its transport.
    ("wire/reader.rs", ".spawn(move || runtime.block_on(run));"),
    (
        "wire/reader.rs",
        "Some(AbortOnDropHandle::new(tokio::spawn(run)))",
    ),
    // A sign-in's loopback listener: its connections are a tracker the listener closes
    // and waits for (2 s) once the redirect came.
    ("oauth/callback.rs", "connections.spawn(async move {"),
    // The user's browser opener: kept, waited for after the sign-in, killed on drop.
    ("oauth/login.rs", ".spawn()"),
    // Blocking file work of the sign-in store, awaited where it is spawned.
    ("oauth/store.rs", "tokio::task::spawn_blocking(work)"),
    // A transport's writer task ends when its transport is dropped (its queue closes).
    (
        "wire/writer.rs",
        "tokio::spawn(write_frames(gate.clone(), queue));",
    ),
];

/// Where MCP errors (`ErrorData::`) may be built: the upstream server (the host's
/// answers), `wire` (what cannot be read at all), the relay (answers to a server's own
/// requests), the demo servers (servers themselves) and planmux's own tasks.
const ERRORS: &[&str] = &[
    "upstream",
    "wire/",
    "downstream/relay.rs",
    "demo/",
    "task_set.rs",
];

/// Where processes are started: the transport, which puts each server in its own group;
/// and `planmux login`, which starts the user's browser opener (`$BROWSER`, `xdg-open`):
/// no server, and the browser it opens must outlive it.
const COMMANDS: &[&str] = &["downstream/transport.rs", "oauth/login.rs"];

#[test]
fn every_file_says_what_it_is() -> anyhow::Result<()> {
    let silent: Vec<String> = common::sources()?
        .into_iter()
        .filter(|(_, text)| !text.starts_with("//!"))
        .map(|(name, _)| name)
        .collect();
    assert!(silent.is_empty(), "no `//!` doc first: {silent:?}");
    Ok(())
}

#[test]
fn every_file_is_read_in_one_sitting() -> anyhow::Result<()> {
    let mut over = Vec::new();
    for (name, text) in common::sources()? {
        let lines = text.lines().count();
        let allowed = OVER_BUDGET
            .iter()
            .find(|(file, _)| *file == name)
            .map_or(LINE_BUDGET, |(_, lines)| *lines);
        if lines > allowed {
            over.push(format!("{name}: {lines} lines (at most {allowed})"));
        }
    }
    assert!(over.is_empty(), "over the line budget: {over:#?}");
    for (file, _) in OVER_BUDGET {
        let text =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(file))
                .unwrap_or_default();
        assert!(
            text.lines().count() > LINE_BUDGET,
            "{file} is within the budget now: take it off OVER_BUDGET"
        );
    }
    Ok(())
}

#[test]
fn background_work_is_spawned_only_where_an_owner_keeps_it() -> anyhow::Result<()> {
    let mut found = Vec::new();
    for (name, text) in common::sources()? {
        for line in common::code(&name, &text).lines() {
            let line = line.trim();
            let spawns = [
                "tokio::spawn(",
                "thread::spawn(",
                "spawn_blocking(",
                ".spawn(",
            ]
            .iter()
            .any(|spawn| line.contains(spawn));
            if spawns && !line.starts_with("//") {
                found.push((name.clone(), line.to_owned()));
            }
        }
    }
    let unknown: Vec<_> = found
        .iter()
        .filter(|(file, line)| !SPAWNS.contains(&(file.as_str(), line.as_str())))
        .collect();
    assert!(
        unknown.is_empty(),
        "spawns with no owner on record: {unknown:#?}"
    );
    let gone: Vec<_> = SPAWNS
        .iter()
        .filter(|(file, line)| !found.iter().any(|(f, l)| f == file && l == line))
        .collect();
    assert!(
        gone.is_empty(),
        "listed spawns no longer in the code: {gone:#?}"
    );
    Ok(())
}

#[test]
fn mcp_errors_are_built_only_at_the_boundaries() -> anyhow::Result<()> {
    let built: Vec<String> = common::sources()?
        .into_iter()
        .filter(|(name, text)| common::code(name, text).contains("ErrorData::"))
        .map(|(name, _)| name)
        .filter(|name| !ERRORS.iter().any(|place| name.starts_with(place)))
        .collect();
    assert!(
        built.is_empty(),
        "ErrorData built outside the boundaries: {built:?}"
    );
    Ok(())
}

#[test]
fn processes_are_started_only_by_the_transport() -> anyhow::Result<()> {
    let starting: Vec<String> = common::sources()?
        .into_iter()
        .filter(|(name, text)| common::code(name, text).contains("Command::new"))
        .map(|(name, _)| name)
        .filter(|name| !COMMANDS.contains(&name.as_str()))
        .collect();
    assert!(
        starting.is_empty(),
        "processes started outside the transport: {starting:?}"
    );
    Ok(())
}
