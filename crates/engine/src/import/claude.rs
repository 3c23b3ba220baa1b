//! Claude Code transcripts: `<config>/projects/<slug>/<session>.jsonl`, one session a file.
//!
//! One chunk per user prompt, assistant text record and compaction summary, keyed
//! `cc:<record uuid>`, in session `cc-<file stem>`, project = basename of the first `cwd`.
//! Left out (counted): tool calls and results, thinking, harness text (`isMeta`, slash-command
//! envelopes, interrupt markers), API-error records, sidechain records, subagent transcripts,
//! and every other record type. Images become `attachments` metadata, never content.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{
    Flow, Position, Sink, chunk, each_line_from, find_files, parse_line, project_of, relative,
};
use memdir_api::error::Result;

/// User text that is a harness envelope, not something the user typed.
const ENVELOPES: &[&str] = &[
    "<command-name>",
    "<command-message>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
];

/// Blocks injected into user text by the harness, dropped from kept text.
const INJECTED: &[&str] = &[
    "system-reminder",
    "user-prompt-submit-hook",
    "task-notification",
];

/// Whether a file is a subagent transcript (or a subagent's bookkeeping).
pub(crate) fn is_subagent(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.starts_with("agent-") || path.components().any(|c| c.as_os_str() == "subagents")
}

/// The transcripts under a root: `<root>/projects/*/*.jsonl`, or a project directory, or one file.
pub fn transcripts(root: &Path, report: &mut super::Report) -> (PathBuf, Vec<PathBuf>) {
    let base = if root.join("projects").is_dir() {
        root.join("projects")
    } else {
        root.to_path_buf()
    };
    let files = find_files(&base, report, |p| {
        p.extension().is_some_and(|e| e == "jsonl")
    });
    (base, files)
}

/// Imports every main transcript under `root`.
pub fn import(root: &Path, sink: &mut Sink<'_>) -> Result<()> {
    let (base, files) = transcripts(root, &mut sink.report);
    for file in files {
        if is_subagent(&file) {
            sink.report.skip("subagent_transcript");
            continue;
        }
        import_file(&base, &file, sink)?;
    }
    Ok(())
}

/// What a first pass over a file finds: record ids, titles, the first working directory.
#[derive(Default)]
struct Scan {
    uuids: HashSet<String>,
    summaries: HashMap<String, String>,
    custom_title: Option<String>,
    ai_title: Option<String>,
    cwd: Option<String>,
}

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// Imports one transcript.
pub fn import_file(base: &Path, file: &Path, sink: &mut Sink<'_>) -> Result<()> {
    import_from(base, file, &Cursor::default(), None, sink).map(|_| ())
}

/// How far the chunks of one transcript have been read, and what a read from there needs to
/// know of the part before it: hook capture keeps one per transcript and hands it back on the
/// next event, so an incremental read gives the chunks a whole-file import gives.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Cursor {
    /// Bytes and lines consumed: the end of the last complete line read.
    #[serde(flatten)]
    pub at: Position,
    /// The project (basename of the first `cwd`), once a read has found one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Whether a chunk was read: only the first chunk carries the session's title.
    #[serde(default)]
    pub started: bool,
}

/// Reads one transcript from `cursor` up to its length when opened (only complete lines),
/// pushing its chunks into `sink`; stops early, after a whole line, once `deadline` has
/// passed. Returns the cursor after the last line read. The first pass (title, project) reads
/// from the start of the file while the cursor has not learned them yet; a read from 0 is a
/// whole-file import.
pub fn import_from(
    base: &Path,
    file: &Path,
    cursor: &Cursor,
    deadline: Option<std::time::Instant>,
    sink: &mut Sink<'_>,
) -> Result<Cursor> {
    let rel = relative(base, file);
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("session")
        .to_string();
    let session = format!("cc-{stem}");
    // Both passes read the same bytes, however the file grows meanwhile.
    let end = match std::fs::metadata(file) {
        Ok(md) => md.len(),
        Err(_) => {
            sink.report.skip("vanished_file");
            return Ok(cursor.clone());
        }
    };
    let mut title = None;
    let mut project = cursor.project.clone();
    if !cursor.started || project.is_none() {
        // First pass: titles can come before the records they name, and a summary counts only
        // when its leaf is a record of this file.
        let scan = scan_transcript(file, end, sink)?;
        title = scan.title();
        if project.is_none() {
            project = scan.cwd.as_deref().map(project_of);
        }
    }
    let project_name = project.clone().unwrap_or_default();
    let mut first = !cursor.started;
    let at = each_line_from(file, cursor.at, Some(end), sink, |sink, n, text| {
        let go_on = || {
            if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                Flow::Stop
            } else {
                Flow::Continue
            }
        };
        let Some(v) = parse_line(text) else {
            sink.report.bad_line(&rel, n);
            return Ok(go_on());
        };
        let kind = str_of(&v, "type").unwrap_or("");
        let Some((role, kind, content, mut meta)) = record(&v, kind, sink) else {
            return Ok(go_on());
        };
        let Some(uuid) = str_of(&v, "uuid") else {
            sink.report.skip("no_uuid");
            return Ok(go_on());
        };
        meta["role"] = json!(role);
        meta["kind"] = json!(kind);
        meta["uuid"] = json!(uuid);
        for (from, to) in [
            ("parentUuid", "parent_uuid"),
            ("cwd", "cwd"),
            ("gitBranch", "git_branch"),
        ] {
            if let Some(s) = str_of(&v, from).filter(|s| !s.is_empty()) {
                meta[to] = json!(s);
            }
        }
        if let Some(s) = str_of(&v, "sessionId").filter(|s| *s != stem) {
            meta["source_session_id"] = json!(s);
        }
        if first && let Some(t) = &title {
            meta["title"] = json!(t);
        }
        first = false;
        let mut import = json!({"source": "claude-code", "path": rel, "line": n});
        if let Some(ver) = str_of(&v, "version") {
            import["agent_version"] = json!(ver);
        }
        sink.push(chunk(
            session.clone(),
            &project_name,
            str_of(&v, "timestamp"),
            content,
            format!("cc:{uuid}"),
            meta,
            import,
        ))?;
        Ok(go_on())
    })?;
    Ok(Cursor {
        at,
        project,
        started: !first,
    })
}

/// The first pass over a transcript's first `end` bytes: its record ids, titles, summaries
/// and first working directory. It counts nothing in `sink`'s report: the second pass does.
fn scan_transcript(file: &Path, end: u64, sink: &Sink<'_>) -> Result<Scan> {
    let mut scan = Scan::default();
    let mut probe = Sink::new(sink.memdir, true, None);
    each_line_from(
        file,
        Position::default(),
        Some(end),
        &mut probe,
        |_, _, text| {
            let Some(v) = parse_line(text) else {
                return Ok(Flow::Continue);
            };
            if let Some(u) = str_of(&v, "uuid") {
                scan.uuids.insert(u.to_string());
            }
            if scan.cwd.is_none()
                && let Some(c) = str_of(&v, "cwd").filter(|c| !c.is_empty())
            {
                scan.cwd = Some(c.to_string());
            }
            match str_of(&v, "type") {
                Some("summary") => {
                    if let (Some(s), Some(l)) = (str_of(&v, "summary"), str_of(&v, "leafUuid")) {
                        scan.summaries.insert(l.to_string(), s.to_string());
                    }
                }
                Some("custom-title") => {
                    scan.custom_title = str_of(&v, "customTitle").map(String::from)
                }
                Some("ai-title") => scan.ai_title = str_of(&v, "aiTitle").map(String::from),
                _ => {}
            }
            Ok(Flow::Continue)
        },
    )?;
    Ok(scan)
}

impl Scan {
    /// The session's title: the user's, else the generated one, else of the summaries whose
    /// leaf is a record of this file the least by text, so that the choice is the same on
    /// every read.
    fn title(&self) -> Option<String> {
        self.custom_title
            .clone()
            .or(self.ai_title.clone())
            .or_else(|| {
                self.summaries
                    .iter()
                    .filter(|(leaf, _)| self.uuids.contains(*leaf))
                    .map(|(_, s)| s.clone())
                    .min()
            })
    }
}

/// A record worth a chunk: (role, kind, content, metadata); anything else is counted.
fn record(
    v: &Value,
    kind: &str,
    sink: &mut Sink<'_>,
) -> Option<(&'static str, &'static str, String, Value)> {
    if kind != "user" && kind != "assistant" {
        sink.report.skip(&format!(
            "record:{}",
            if kind.is_empty() { "untyped" } else { kind }
        ));
        return None;
    }
    if v.get("isSidechain").and_then(Value::as_bool) == Some(true) {
        sink.report.skip("sidechain");
        return None;
    }
    let message = v.get("message").unwrap_or(&Value::Null);
    let mut meta = json!({});
    if kind == "assistant" {
        if v.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true) {
            sink.report.skip("api_error");
            return None;
        }
        let mut texts = Vec::new();
        match message.get("content") {
            Some(Value::String(s)) => texts.push(s.clone()),
            Some(Value::Array(blocks)) => {
                for b in blocks {
                    match str_of(b, "type") {
                        Some("text") => texts.extend(str_of(b, "text").map(String::from)),
                        Some("thinking" | "redacted_thinking") => sink.report.skip("thinking"),
                        Some("tool_use" | "server_tool_use") => sink.report.skip("tool_call"),
                        other => sink.report.skip(&format!("block:{}", other.unwrap_or("?"))),
                    }
                }
            }
            _ => {}
        }
        let content = texts.join("\n\n");
        if content.trim().is_empty() {
            return None;
        }
        for (from, to) in [("model", "model"), ("id", "message_id")] {
            if let Some(s) = str_of(message, from) {
                meta[to] = json!(s);
            }
        }
        if let Some(s) = str_of(v, "requestId") {
            meta["request_id"] = json!(s);
        }
        return Some(("assistant", "message", content, meta));
    }
    let summary = v.get("isCompactSummary").and_then(Value::as_bool) == Some(true);
    if !summary && v.get("isMeta").and_then(Value::as_bool) == Some(true) {
        sink.report.skip("harness_text");
        return None;
    }
    let mut texts = Vec::new();
    let mut attachments = Vec::new();
    let mut tool_results = 0;
    match message.get("content") {
        Some(Value::String(s)) => texts.push(s.clone()),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                match str_of(b, "type") {
                    Some("text") => texts.extend(str_of(b, "text").map(String::from)),
                    Some("tool_result") => tool_results += 1,
                    Some(t @ ("image" | "document")) => {
                        let src = b.get("source").unwrap_or(&Value::Null);
                        let mut a = json!({"type": t});
                        if let Some(m) = str_of(src, "media_type") {
                            a["media_type"] = json!(m);
                        }
                        if let Some(d) = str_of(src, "data") {
                            a["bytes"] = json!(d.len() / 4 * 3);
                        }
                        attachments.push(a);
                    }
                    other => sink.report.skip(&format!("block:{}", other.unwrap_or("?"))),
                }
            }
        }
        _ => {}
    }
    if texts.is_empty() && tool_results > 0 {
        sink.report.skip("tool_result");
        return None;
    }
    let raw = texts.join("\n\n");
    let trimmed = raw.trim_start();
    if !summary && ENVELOPES.iter().any(|e| trimmed.starts_with(e)) {
        sink.report.skip("harness_text");
        return None;
    }
    if !summary
        && matches!(
            raw.trim(),
            "[Request interrupted by user]" | "[Request interrupted by user for tool use]"
        )
    {
        sink.report.skip("interrupt");
        return None;
    }
    let content = strip_injected(&raw);
    if content.trim().is_empty() {
        sink.report.skip("empty");
        return None;
    }
    if !attachments.is_empty() {
        meta["attachments"] = Value::Array(attachments);
    }
    if summary {
        Some(("system", "compact_summary", content, meta))
    } else {
        Some(("user", "message", content, meta))
    }
}

/// Drops `<system-reminder>…</system-reminder>` (and the like) blocks from user text.
fn strip_injected(text: &str) -> String {
    let mut out = text.to_string();
    for tag in INJECTED {
        let open = format!("<{tag}>");
        let close = format!("</{tag}>");
        while let Some(a) = out.find(&open) {
            let Some(b) = out[a..].find(&close) else {
                break;
            };
            out.replace_range(a..a + b + close.len(), "");
        }
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injected_blocks_are_dropped() {
        assert_eq!(
            strip_injected("fix it\n<system-reminder>be nice</system-reminder>\n"),
            "fix it"
        );
        assert_eq!(
            strip_injected("<system-reminder>open"),
            "<system-reminder>open"
        );
    }

    #[test]
    fn subagent_files_are_recognised() {
        assert!(is_subagent(Path::new("p/agent-a1.jsonl")));
        assert!(is_subagent(Path::new("p/s/subagents/journal.jsonl")));
        assert!(!is_subagent(Path::new("p/5b2f.jsonl")));
    }
}
