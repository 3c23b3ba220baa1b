//! opencode's JSON storage: `<data>/opencode/storage/` with `project/<project>.json`,
//! `session/<project>/<session>.json`, `message/<session>/<message>.json` and
//! `part/<message>/<part>.json` (ids sort in creation order).
//!
//! One memdir session per opencode session, `opencode-<session id>`, titled by the session's
//! `title`; project = basename of the project's `worktree` (else the session's `directory`).
//! One chunk per `text` part of a user or assistant message that is not `synthetic` or
//! `ignored`, key `oc:<part id>`, ts = the part's `time.start`, else the message's
//! `time.created` (milliseconds). Messages come by `time.created` then id, parts by id.
//! `file` parts become `attachments` metadata of the message's first chunk (never content).
//! Left out (counted): reasoning, tool, step and other parts, child sessions (subagents, with
//! `parentID`), and assistant messages still being written (no `time.completed`), which a later
//! run imports.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{Sink, chunk, find_files, parse_line, project_of, relative};
use crate::error::{Error, Result};

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// The storage directory under `root`: `root/storage`, `root/opencode/storage`, or `root`.
fn storage_dir(root: &Path) -> Option<PathBuf> {
    [
        root.join("storage"),
        root.join("opencode/storage"),
        root.to_path_buf(),
    ]
    .into_iter()
    .find(|d| d.join("session").is_dir())
}

/// A JSON file of the storage; a file that does not parse is counted and named.
fn read_json(base: &Path, file: &Path, sink: &mut Sink<'_>) -> Option<Value> {
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(_) => {
            sink.report.skip("vanished_file");
            return None;
        }
    };
    sink.report.files += 1;
    let text = String::from_utf8_lossy(&bytes);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    match parse_line(text) {
        Some(v) if v.is_object() => Some(v),
        _ => {
            sink.report
                .bad_file("malformed_file", &relative(base, file));
            None
        }
    }
}

/// The JSON files directly in `dir`, sorted by name.
fn json_files(dir: &Path) -> Vec<PathBuf> {
    if !dir.is_dir() {
        return Vec::new();
    }
    find_files(dir, |p| p.extension().is_some_and(|e| e == "json"))
}

/// An id from a record, else from its file name.
fn id_of(v: &Value, file: &Path) -> String {
    str_of(v, "id").map(String::from).unwrap_or_else(|| {
        file.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    })
}

/// Imports every session of the storage under `root`.
pub fn import(root: &Path, sink: &mut Sink<'_>) -> Result<()> {
    let Some(base) = storage_dir(root) else {
        return Err(Error::invalid(
            "path",
            format!(
                "{} is no opencode storage directory: no storage/session under it",
                root.display()
            ),
        )
        .detail("path", Value::from(root.display().to_string()))
        .hint(
            "give opencode's data directory (~/.local/share/opencode) or its storage/ directory",
        ));
    };
    let mut worktrees: HashMap<String, String> = HashMap::new();
    for file in json_files(&base.join("project")) {
        if let Some(p) = read_json(&base, &file, sink)
            && let Some(w) = str_of(&p, "worktree")
        {
            worktrees.insert(id_of(&p, &file), w.to_string());
        }
    }
    let mut sessions: Vec<(String, Value)> = Vec::new();
    for file in json_files(&base.join("session")) {
        if let Some(s) = read_json(&base, &file, sink) {
            sessions.push((id_of(&s, &file), s));
        }
    }
    sessions.sort_by(|a, b| a.0.cmp(&b.0));
    sink.expect(sessions.len() as u64);
    for (id, s) in sessions {
        sink.advance(1);
        if s.get("parentID").is_some_and(|p| !p.is_null()) {
            sink.report.skip("subagent_session");
            continue;
        }
        import_session(&base, &id, &s, &worktrees, sink)?;
    }
    Ok(())
}

fn import_session(
    base: &Path,
    id: &str,
    s: &Value,
    worktrees: &HashMap<String, String>,
    sink: &mut Sink<'_>,
) -> Result<()> {
    let session = format!("opencode-{id}");
    let directory = str_of(s, "directory").unwrap_or("");
    let project = str_of(s, "projectID")
        .and_then(|p| worktrees.get(p))
        .map(|w| project_of(w))
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| project_of(directory));
    let title = str_of(s, "title").filter(|t| !t.trim().is_empty());
    let mut messages: Vec<(i64, String, PathBuf, Value)> = Vec::new();
    for file in json_files(&base.join("message").join(id)) {
        if let Some(m) = read_json(base, &file, sink) {
            let created = m
                .get("time")
                .and_then(|t| t.get("created"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            messages.push((created, id_of(&m, &file), file, m));
        }
    }
    messages.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    for (created, mid, _file, m) in messages {
        let role = match str_of(&m, "role") {
            Some(r @ ("user" | "assistant")) => r,
            Some(r) => {
                sink.report.skip(&format!("role:{r}"));
                continue;
            }
            None => {
                sink.report.skip("role:none");
                continue;
            }
        };
        let time = m.get("time").unwrap_or(&Value::Null);
        if role == "assistant" && time.get("completed").is_none_or(Value::is_null) {
            sink.report.skip("in_flight_message");
            continue;
        }
        let summary = m.get("summary").and_then(Value::as_bool) == Some(true);
        let (role, kind) = if role == "assistant" && summary {
            ("system", "compact_summary")
        } else {
            (role, "message")
        };
        let model = match (str_of(&m, "providerID"), str_of(&m, "modelID")) {
            (Some(p), Some(mo)) => Some(format!("{p}/{mo}")),
            (None, Some(mo)) => Some(mo.to_string()),
            _ => None,
        };
        let mut texts: Vec<(String, String, Option<i64>, String)> = Vec::new();
        let mut attachments = Vec::new();
        let mut parts: Vec<(String, PathBuf, Value)> = Vec::new();
        for file in json_files(&base.join("part").join(&mid)) {
            if let Some(p) = read_json(base, &file, sink) {
                parts.push((id_of(&p, &file), file, p));
            }
        }
        parts.sort_by(|a, b| a.0.cmp(&b.0));
        for (pid, file, p) in parts {
            match str_of(&p, "type").unwrap_or("") {
                "text" => {
                    if p.get("synthetic").and_then(Value::as_bool) == Some(true)
                        || p.get("ignored").and_then(Value::as_bool) == Some(true)
                    {
                        sink.report.skip("synthetic");
                        continue;
                    }
                    let text = str_of(&p, "text").unwrap_or("").to_string();
                    if text.trim().is_empty() {
                        sink.report.skip("empty");
                        continue;
                    }
                    let start = p
                        .get("time")
                        .and_then(|t| t.get("start"))
                        .and_then(Value::as_i64);
                    texts.push((pid, relative(base, &file), start, text));
                }
                "file" => {
                    let mime = str_of(&p, "mime").unwrap_or("");
                    let mut a = json!({
                        "type": if mime.starts_with("image/") { "image" } else { "file" },
                    });
                    if !mime.is_empty() {
                        a["media_type"] = json!(mime);
                    }
                    if let Some(f) = str_of(&p, "filename") {
                        a["filename"] = json!(f);
                    }
                    if let Some(b64) = str_of(&p, "url")
                        .and_then(|u| u.strip_prefix("data:"))
                        .and_then(|u| u.split_once(";base64,"))
                        .map(|(_, d)| d)
                    {
                        a["bytes"] = json!(b64.len() / 4 * 3);
                    }
                    attachments.push(a);
                }
                "reasoning" => sink.report.skip("thinking"),
                "tool" => sink.report.skip("tool_call"),
                "step-start" | "step-finish" => sink.report.skip("step"),
                "" => sink.report.skip("part:untyped"),
                t => sink.report.skip(&format!("part:{t}")),
            }
        }
        for (i, (pid, rel, start, text)) in texts.into_iter().enumerate() {
            let mut meta = json!({"role": role, "kind": kind, "message_id": mid});
            if let Some(t) = title {
                meta["title"] = json!(t);
            }
            if role != "user"
                && let Some(mo) = &model
            {
                meta["model"] = json!(mo);
            }
            if let Some(a) = str_of(&m, "agent") {
                meta["agent"] = json!(a);
            }
            if !directory.is_empty() {
                meta["cwd"] = json!(directory);
            }
            if i == 0 && !attachments.is_empty() {
                meta["attachments"] = Value::Array(std::mem::take(&mut attachments));
            }
            let ms = start.unwrap_or(created);
            let ts = (ms > 0).then(|| crate::clock::rfc3339(ms));
            sink.push(chunk(
                session.clone(),
                &project,
                ts.as_deref(),
                text,
                format!("oc:{pid}"),
                meta,
                json!({"source": "opencode", "path": rel, "part": pid}),
            ))?;
        }
        if !attachments.is_empty() {
            sink.report.skip("attachment_without_text");
        }
    }
    Ok(())
}
