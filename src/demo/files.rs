//! A file sandbox: paths are relative to one root folder and may not leave it.

use std::path::{Component, Path, PathBuf};

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use super::{done, failure, str_arg, tool};

pub(super) fn tools() -> Vec<Tool> {
    vec![
        tool(
            "write_file",
            "Write text to a file in the sandbox (folders are created). Non-string content is written as JSON.",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {}}, "required": ["path", "content"]}),
        )
        .with_annotations(ToolAnnotations::new().destructive(true).idempotent(true)),
        tool(
            "read_file",
            "Read a text file from the sandbox.",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        tool(
            "list_files",
            "List the files in the sandbox (recursively).",
            json!({"type": "object", "properties": {}}),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
    ]
}

pub(super) fn call(
    root: &Path,
    name: &str,
    args: &JsonObject,
) -> Result<CallToolResult, rmcp::ErrorData> {
    done(match name {
        "write_file" => write(root, args),
        "read_file" => str_arg(args, "path").and_then(|p| read(root, p)),
        "list_files" => Ok(list(root)),
        other => Err(failure(format!("unknown tool '{other}'"))),
    })
}

/// Resolves a sandbox-relative path, refusing anything that could leave the root.
fn inside(root: &Path, path: &str) -> Result<PathBuf, CallToolResult> {
    let relative = Path::new(path.trim_start_matches('/'));
    if path.is_empty()
        || relative
            .components()
            .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err(failure(format!(
            "path '{path}' must be relative and stay inside the sandbox"
        )));
    }
    Ok(root.join(relative))
}

fn write(root: &Path, args: &JsonObject) -> Result<CallToolResult, CallToolResult> {
    let path = str_arg(args, "path")?;
    let content = match args.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => serde_json::to_string_pretty(other).unwrap_or_default(),
        None => return Err(failure("missing required argument 'content'")),
    };
    let full = inside(root, path)?;
    let io = |e: std::io::Error| failure(format!("cannot write '{path}': {e}"));
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    std::fs::write(&full, &content).map_err(io)?;
    Ok(CallToolResult::success(vec![ContentBlock::text(format!(
        "Successfully wrote {} bytes to {path}",
        content.len()
    ))]))
}

fn read(root: &Path, path: &str) -> Result<CallToolResult, CallToolResult> {
    let full = inside(root, path)?;
    let text = std::fs::read_to_string(&full)
        .map_err(|e| failure(format!("cannot read '{path}': {e}")))?;
    Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
}

fn list(root: &Path) -> CallToolResult {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(rel) = path.strip_prefix(root) {
                files.push(rel.display().to_string());
            }
        }
    }
    files.sort();
    CallToolResult::structured(json!({ "files": files }))
}
