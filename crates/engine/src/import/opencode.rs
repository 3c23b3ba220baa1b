//! opencode's data directory (`$XDG_DATA_HOME/opencode`): the SQLite `opencode.db` of current
//! builds (tables `project`, `session`, `message`, `part`; opened read-only) and the JSON
//! storage of older ones, `storage/` with `project/<project>.json`,
//! `session/<project>/<session>.json`, `message/<session>/<message>.json` and
//! `part/<message>/<part>.json` (ids sort in creation order). Both can be there; they share
//! ids, so a part is imported once.
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

use rusqlite::Connection;
use serde_json::{Value, json};

use super::local_memory::{has_table, open_with_tables};
use super::{Sink, chunk, find_files, parse_line, project_of, relative};
use memdir_api::error::{Error, Result};

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
fn json_files(dir: &Path, sink: &mut Sink<'_>) -> Vec<PathBuf> {
    if !dir.is_dir() {
        return Vec::new();
    }
    find_files(dir, &mut sink.report, |p| {
        p.extension().is_some_and(|e| e == "json")
    })
}

/// An id from a record, else from its file name.
fn id_of(v: &Value, file: &Path) -> String {
    str_of(v, "id").map(String::from).unwrap_or_else(|| {
        file.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    })
}

/// Where the records come from: the JSON tree of older builds, or the SQLite database of
/// current ones (its `data` columns hold the JSON of the files without their id fields, and
/// the ids agree, so importing both adds each part once).
enum Source {
    Files(PathBuf),
    Db { conn: Connection, name: String },
}

/// A column's bytes, whether SQLite holds text or a blob there.
fn bytes(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<Vec<u8>>> {
    use rusqlite::types::ValueRef;
    Ok(match r.get_ref(i)? {
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(b.to_vec()),
        _ => None,
    })
}

/// A row's JSON `data`, with the id fields the files carry.
fn row_json(
    name: &str,
    what: &str,
    id: &str,
    data: Option<Vec<u8>>,
    sink: &mut Sink<'_>,
) -> Option<Value> {
    let text = String::from_utf8_lossy(data.as_deref().unwrap_or(b""));
    match parse_line(&text) {
        Some(mut v) if v.is_object() => {
            v["id"] = json!(id);
            Some(v)
        }
        _ => {
            sink.report
                .bad_file("malformed_row", &format!("{name}:{what}/{id}"));
            None
        }
    }
}

impl Source {
    fn sql_err(&self, e: rusqlite::Error) -> Error {
        let name = match self {
            Source::Db { name, .. } => name.as_str(),
            Source::Files(_) => "",
        };
        Error::invalid("path", format!("reading opencode database {name}: {e}"))
    }

    /// Project id → worktree.
    fn projects(&self, sink: &mut Sink<'_>) -> Result<HashMap<String, String>> {
        let mut out = HashMap::new();
        match self {
            Source::Files(base) => {
                for file in json_files(&base.join("project"), sink) {
                    if let Some(p) = read_json(base, &file, sink)
                        && let Some(w) = str_of(&p, "worktree")
                    {
                        out.insert(id_of(&p, &file), w.to_string());
                    }
                }
            }
            Source::Db { conn, .. } => {
                if !has_table(conn, "project") {
                    return Ok(out);
                }
                let mut st = conn
                    .prepare("SELECT id, worktree FROM project")
                    .map_err(|e| self.sql_err(e))?;
                let rows = st
                    .query_map([], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
                    })
                    .map_err(|e| self.sql_err(e))?;
                for (id, w) in rows.flatten() {
                    if let Some(w) = w {
                        out.insert(id, w);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Every session, by id.
    fn sessions(&self, sink: &mut Sink<'_>) -> Result<Vec<(String, Value)>> {
        let mut out = Vec::new();
        match self {
            Source::Files(base) => {
                for file in json_files(&base.join("session"), sink) {
                    if let Some(s) = read_json(base, &file, sink) {
                        out.push((id_of(&s, &file), s));
                    }
                }
            }
            Source::Db { conn, .. } => {
                sink.report.files += 1;
                let mut st = conn
                    .prepare(
                        "SELECT id, project_id, parent_id, directory, title, version FROM session",
                    )
                    .map_err(|e| self.sql_err(e))?;
                let rows = st
                    .query_map([], |r| {
                        let t = |i: usize| r.get::<_, Option<String>>(i);
                        Ok(json!({"id": t(0)?, "projectID": t(1)?, "parentID": t(2)?,
                                  "directory": t(3)?, "title": t(4)?, "version": t(5)?}))
                    })
                    .map_err(|e| self.sql_err(e))?;
                for v in rows {
                    let v = v.map_err(|e| self.sql_err(e))?;
                    if let Some(id) = str_of(&v, "id").map(String::from) {
                        out.push((id, v));
                    }
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// A session's messages: (created ms, id, record), by time then id.
    fn messages(&self, session: &str, sink: &mut Sink<'_>) -> Result<Vec<(i64, String, Value)>> {
        let mut out = Vec::new();
        let created = |m: &Value| {
            m.get("time")
                .and_then(|t| t.get("created"))
                .and_then(Value::as_i64)
        };
        match self {
            Source::Files(base) => {
                for file in json_files(&base.join("message").join(session), sink) {
                    if let Some(m) = read_json(base, &file, sink) {
                        out.push((created(&m).unwrap_or(0), id_of(&m, &file), m));
                    }
                }
            }
            Source::Db { conn, name } => {
                let mut st = conn
                    .prepare("SELECT id, data, time_created FROM message WHERE session_id = ?1")
                    .map_err(|e| self.sql_err(e))?;
                let rows: Vec<(String, Option<Vec<u8>>, Option<i64>)> = st
                    .query_map([session], |r| Ok((r.get(0)?, bytes(r, 1)?, r.get(2)?)))
                    .map_err(|e| self.sql_err(e))?
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|e| self.sql_err(e))?;
                for (id, data, t) in rows {
                    if let Some(mut m) = row_json(name, "message", &id, data, sink) {
                        m["sessionID"] = json!(session);
                        let c = created(&m).or(t).unwrap_or(0);
                        out.push((c, id, m));
                    }
                }
            }
        }
        out.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        Ok(out)
    }

    /// A message's parts: (id, where it was read, record), by id.
    fn parts(&self, message: &str, sink: &mut Sink<'_>) -> Result<Vec<(String, String, Value)>> {
        let mut out = Vec::new();
        match self {
            Source::Files(base) => {
                for file in json_files(&base.join("part").join(message), sink) {
                    if let Some(p) = read_json(base, &file, sink) {
                        out.push((id_of(&p, &file), relative(base, &file), p));
                    }
                }
            }
            Source::Db { conn, name } => {
                let mut st = conn
                    .prepare("SELECT id, data FROM part WHERE message_id = ?1")
                    .map_err(|e| self.sql_err(e))?;
                let rows: Vec<(String, Option<Vec<u8>>)> = st
                    .query_map([message], |r| Ok((r.get(0)?, bytes(r, 1)?)))
                    .map_err(|e| self.sql_err(e))?
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|e| self.sql_err(e))?;
                for (id, data) in rows {
                    if let Some(mut p) = row_json(name, "part", &id, data, sink) {
                        p["messageID"] = json!(message);
                        out.push((id.clone(), format!("{name}:part/{id}"), p));
                    }
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

/// The databases of current builds in a data directory: `opencode.db` and the channel
/// builds' `opencode-<channel>.db`.
fn databases(root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = [root.to_path_buf(), root.join("opencode")]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("opencode") && n.ends_with(".db"))
        })
        .collect();
    out.sort();
    out
}

fn open_db(file: &Path) -> Result<Source> {
    let conn = open_with_tables(file, "opencode", &["session", "message", "part"])?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Source::Db { conn, name })
}

/// Imports every session under `root`: its database(s) and its JSON storage, whichever exist
/// (or the one database file `root` names).
pub fn import(root: &Path, sink: &mut Sink<'_>) -> Result<()> {
    import_only(root, None, sink).map(|_| ())
}

/// [`import`], limited to the opencode session `only` when given (hook capture); returns how
/// many sessions it found (a session without text yet is found, and adds nothing).
pub fn import_only(root: &Path, only: Option<&str>, sink: &mut Sink<'_>) -> Result<usize> {
    let mut found = 0;
    let mut sources = Vec::new();
    if root.is_file() {
        sources.push(open_db(root)?);
    } else {
        for db in databases(root) {
            sources.push(open_db(&db)?);
        }
        if let Some(base) = storage_dir(root) {
            sources.push(Source::Files(base));
        }
    }
    if sources.is_empty() {
        return Err(Error::invalid(
            "path",
            format!(
                "{} is no opencode data directory: no opencode.db and no storage/session under it",
                root.display()
            ),
        )
        .detail("path", Value::from(root.display().to_string()))
        .hint(
            "give opencode's data directory (~/.local/share/opencode), its storage/ directory or its opencode.db",
        ));
    }
    for src in &sources {
        let worktrees = src.projects(sink)?;
        let sessions = src.sessions(sink)?;
        sink.add_total(sessions.len() as u64);
        for (id, s) in sessions {
            sink.advance(1);
            if only.is_some_and(|o| o != id) {
                continue;
            }
            found += 1;
            if s.get("parentID").is_some_and(|p| !p.is_null()) {
                sink.report.skip("subagent_session");
                continue;
            }
            import_session(src, &id, &s, &worktrees, sink)?;
        }
    }
    Ok(found)
}

fn import_session(
    src: &Source,
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
    for (created, mid, m) in src.messages(id, sink)? {
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
        let (texts, mut attachments) = message_parts(src, &mid, sink)?;
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
            let ts = (ms > 0).then(|| memdir_store::clock::rfc3339(ms));
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

/// A text part to import: (part id, where it was read, start ms, text).
type TextPart = (String, String, Option<i64>, String);

/// A message's parts: its `text` parts, and its `file` parts as attachment metadata. Every
/// other part, and text that is synthetic, ignored or empty, is counted in the report.
fn message_parts(
    src: &Source,
    message: &str,
    sink: &mut Sink<'_>,
) -> Result<(Vec<TextPart>, Vec<Value>)> {
    let mut texts: Vec<TextPart> = Vec::new();
    let mut attachments = Vec::new();
    for (pid, rel, p) in src.parts(message, sink)? {
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
                texts.push((pid, rel, start, text));
            }
            "file" => attachments.push(attachment(&p)),
            "reasoning" => sink.report.skip("thinking"),
            "tool" => sink.report.skip("tool_call"),
            "step-start" | "step-finish" => sink.report.skip("step"),
            "" => sink.report.skip("part:untyped"),
            t => sink.report.skip(&format!("part:{t}")),
        }
    }
    Ok((texts, attachments))
}

/// A `file` part as attachment metadata: its kind, media type, name and size, never its bytes.
fn attachment(p: &Value) -> Value {
    let mime = str_of(p, "mime").unwrap_or("");
    let mut a = json!({
        "type": if mime.starts_with("image/") { "image" } else { "file" },
    });
    if !mime.is_empty() {
        a["media_type"] = json!(mime);
    }
    if let Some(f) = str_of(p, "filename") {
        a["filename"] = json!(f);
    }
    if let Some(b64) = str_of(p, "url")
        .and_then(|u| u.strip_prefix("data:"))
        .and_then(|u| u.split_once(";base64,"))
        .map(|(_, d)| d)
    {
        a["bytes"] = json!(b64.len() / 4 * 3);
    }
    a
}
