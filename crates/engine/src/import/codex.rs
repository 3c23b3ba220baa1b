//! Codex rollouts: `<codex home>/sessions/YYYY/MM/DD/rollout-*.jsonl` (and
//! `archived_sessions/`), one thread a file.
//!
//! The text source is chosen per file: the `event_msg` `user_message`/`agent_message` records
//! when the file has any (what was typed and shown), else the `response_item` messages (older
//! files), dropping developer/system roles and injected context. Compaction summaries are
//! kept. Session `codex-<thread id>`, key `codex:<thread>:<line>` (0-based physical line),
//! project = basename of `session_meta.cwd`, model from the latest `turn_context`.

use std::path::Path;

use serde_json::{Value, json};

use super::{Sink, chunk, each_line, find_files, parse_line, project_of, relative};
use memdir_api::error::Result;

/// User text that is context injected by the harness, not typed by the user.
const INJECTED: &[&str] = &[
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "# AGENTS.md",
    "<collaboration_mode>",
];

/// Imports every rollout under `root` (or `root` itself).
pub fn import(root: &Path, sink: &mut Sink<'_>) -> Result<()> {
    let files = find_files(root, &mut sink.report, |p| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        name.ends_with(".jsonl") && (name.starts_with("rollout-") || p == root)
    });
    for file in files {
        import_file(root, &file, sink)?;
    }
    Ok(())
}

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// The thread id in a rollout's file name: its last 36 characters.
fn thread_of_name(file: &Path) -> Option<String> {
    let stem = file.file_stem()?.to_str()?;
    let stem = stem.strip_prefix("rollout-").unwrap_or(stem);
    (stem.len() >= 36).then(|| stem[stem.len() - 36..].to_string())
}

/// What a first pass finds: the thread, its working directory and branch, the text source.
#[derive(Default)]
struct Scan {
    thread: Option<String>,
    cwd: Option<String>,
    branch: Option<String>,
    header_ts: Option<String>,
    meta: Value,
    events: bool,
}

/// Imports one rollout.
pub fn import_file(root: &Path, file: &Path, sink: &mut Sink<'_>) -> Result<()> {
    let rel = relative(root, file);
    let scan = scan_rollout(file, sink)?;
    let Some(thread) = scan.thread.clone().or_else(|| thread_of_name(file)) else {
        sink.report.skip("no_thread_id");
        return Ok(());
    };
    let session = format!("codex-{thread}");
    let mut cwd = scan.cwd.clone();
    let mut model: Option<String> = None;
    each_line(file, sink, |sink, n, text| {
        let Some(v) = parse_line(text) else {
            sink.report.bad_line(&rel, n);
            return Ok(());
        };
        let (ty, p) = match (str_of(&v, "type"), v.get("payload")) {
            (Some(t), Some(p)) => (t, p),
            // Bare era: the record is the payload itself.
            (Some("message"), None) => ("response_item", &v),
            _ => {
                if n > 0 || v.get("id").is_none() {
                    sink.report.skip("record:untyped");
                }
                return Ok(());
            }
        };
        if ty == "turn_context" {
            model = str_of(p, "model").map(String::from).or(model.take());
            if scan.cwd.is_none() {
                cwd = str_of(p, "cwd").map(String::from).or(cwd.take());
            }
            return Ok(());
        }
        let mut attachments = Vec::new();
        let Some((role, kind, content)) = message_of(ty, p, &scan, sink, &mut attachments) else {
            return Ok(());
        };
        if role == "user" && INJECTED.iter().any(|m| content.trim_start().starts_with(m)) {
            sink.report.skip("harness_text");
            return Ok(());
        }
        if content.trim().is_empty() {
            sink.report.skip("empty");
            return Ok(());
        }
        let mut meta = scan.meta.clone();
        meta["role"] = json!(role);
        meta["kind"] = json!(kind);
        if role == "assistant"
            && let Some(m) = &model
        {
            meta["model"] = json!(m);
        }
        if let Some(c) = &cwd {
            meta["cwd"] = json!(c);
        }
        if let Some(b) = &scan.branch {
            meta["git_branch"] = json!(b);
        }
        if !attachments.is_empty() {
            meta["attachments"] = Value::Array(attachments);
        }
        let mut ts = str_of(&v, "timestamp").map(String::from);
        if ts.is_none() {
            ts = scan.header_ts.clone();
            if ts.is_some() {
                meta["ts_estimated"] = json!(true);
            }
        }
        let project = scan
            .cwd
            .as_deref()
            .or(cwd.as_deref())
            .map(project_of)
            .unwrap_or_default();
        sink.push(chunk(
            session.clone(),
            &project,
            ts.as_deref(),
            content,
            format!("codex:{thread}:{n}"),
            meta,
            json!({"source": "codex", "path": rel, "line": n}),
        ))
    })
}

/// The first pass over a rollout: its thread, working directory, branch and metadata, and
/// whether it has `event_msg` messages (which then are the text source). It counts nothing
/// in `sink`'s report: the second pass does.
fn scan_rollout(file: &Path, sink: &Sink<'_>) -> Result<Scan> {
    let mut scan = Scan::default();
    let mut probe = Sink::new(sink.memdir, true, None);
    each_line(file, &mut probe, |_, n, text| {
        let Some(v) = parse_line(text) else {
            return Ok(());
        };
        let ty = str_of(&v, "type").unwrap_or("");
        let p = v.get("payload").unwrap_or(&Value::Null);
        match ty {
            "session_meta" if scan.thread.is_none() => {
                scan.thread = str_of(p, "id").map(String::from);
                scan.cwd = str_of(p, "cwd").map(String::from);
                scan.branch = p
                    .get("git")
                    .and_then(|g| str_of(g, "branch"))
                    .map(String::from);
                let mut meta = json!({});
                for k in ["originator", "cli_version", "model_provider"] {
                    if let Some(s) = str_of(p, k) {
                        meta[k] = json!(s);
                    }
                }
                if let Some(s) = p.get("source").filter(|s| !s.is_null()) {
                    meta["source"] = s.clone();
                }
                scan.meta = meta;
            }
            "event_msg" => {
                if matches!(str_of(p, "type"), Some("user_message" | "agent_message")) {
                    scan.events = true;
                }
            }
            // The bare era: a header line without a type, then bare response items.
            "" if n == 0 && scan.thread.is_none() => {
                scan.thread = str_of(&v, "id").map(String::from);
                scan.header_ts = str_of(&v, "timestamp").map(String::from);
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(scan)
}

/// The message a record of type `ty` with payload `p` holds, as (role, kind, text), its
/// images added to `attachments`; `None` for a record that is not imported, counted in the
/// report by why.
fn message_of(
    ty: &str,
    p: &Value,
    scan: &Scan,
    sink: &mut Sink<'_>,
    attachments: &mut Vec<Value>,
) -> Option<(&'static str, &'static str, String)> {
    let sub = str_of(p, "type").unwrap_or("");
    let message = match (ty, sub) {
        ("event_msg", "user_message") if scan.events => {
            for img in p
                .get("images")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                attachments.push(image(img.as_str().unwrap_or("")));
            }
            (
                "user",
                "message",
                str_of(p, "message").unwrap_or("").to_string(),
            )
        }
        ("event_msg", "agent_message") if scan.events => (
            "assistant",
            "message",
            str_of(p, "message").unwrap_or("").to_string(),
        ),
        ("compacted", _) => (
            "system",
            "compact_summary",
            str_of(p, "message").unwrap_or("").to_string(),
        ),
        ("response_item", "message") if !scan.events => {
            let role = match str_of(p, "role") {
                Some("user") => "user",
                Some("assistant") => "assistant",
                _ => {
                    sink.report.skip("harness_text");
                    return None;
                }
            };
            let mut texts = Vec::new();
            for item in p
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                match str_of(item, "type") {
                    Some("input_text" | "output_text" | "text") => {
                        texts.extend(str_of(item, "text").map(String::from));
                    }
                    Some("input_image") => {
                        attachments.push(image(str_of(item, "image_url").unwrap_or("")));
                    }
                    _ => {}
                }
            }
            (role, "message", texts.join("\n\n"))
        }
        ("response_item", "message") => {
            sink.report.skip("mirror");
            return None;
        }
        (
            "response_item",
            "function_call" | "custom_tool_call" | "local_shell_call" | "web_search_call",
        ) => {
            sink.report.skip("tool_call");
            return None;
        }
        ("response_item", "function_call_output" | "custom_tool_call_output") => {
            sink.report.skip("tool_result");
            return None;
        }
        ("response_item", "reasoning") | ("event_msg", "agent_reasoning") => {
            sink.report.skip("thinking");
            return None;
        }
        ("session_meta", _) => return None,
        (t, "") => {
            sink.report.skip(&format!("record:{t}"));
            return None;
        }
        (t, s) => {
            sink.report.skip(&format!("record:{t}.{s}"));
            return None;
        }
    };
    Some(message)
}

/// An image as attachment metadata: its media type and size, never its bytes.
fn image(url: &str) -> Value {
    let mut a = json!({"type": "image"});
    if let Some(rest) = url.strip_prefix("data:") {
        if let Some((mime, data)) = rest.split_once(';') {
            a["media_type"] = json!(mime);
            if let Some(b64) = data.strip_prefix("base64,") {
                a["bytes"] = json!(b64.len() / 4 * 3);
            }
        }
    } else if !url.is_empty() {
        a["url"] = json!(url);
    }
    a
}
