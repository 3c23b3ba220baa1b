//! local-memory: the SQLite database of the Python session memory (`memory.db`, tables
//! `sessions`, `chunks`, `session_summaries`), opened read-only.
//!
//! Its sessions keep their ids (users and agents already cite them); chunks come in
//! `position` order and are numbered again from 0 by memdir (the source has gaps), the
//! original position kept as `import.position`. Key `lm:<session_id>:<position>`, project =
//! `sessions.project`, ts = `sessions.start_time` (chunks have no time of their own, so
//! `ts_estimated` is set). `metadata` text: a JSON object is merged, other JSON is kept as
//! `{"value": …}`, anything else as `{"raw": …}`; `reasoning`, `tool_calls` and
//! `tool_call_results` are kept in metadata. The database is never written: local-memory's own
//! schema code is not run (it deletes chunks with duplicate positions when its index is missing).

use std::path::{Path, PathBuf};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde_json::{Value, json};

use super::{Sink, chunk};
use memdir_api::error::{Error, Result};

/// The database file: `path` itself, or `memory.db` in it when it is a directory.
fn db_file(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("memory.db")
    } else {
        path.to_path_buf()
    }
}

/// Opens a foreign SQLite file read-only; an error names the file and what it should be.
pub fn open_read_only(file: &Path, what: &str) -> Result<Connection> {
    let bad = |e: rusqlite::Error| {
        Error::invalid(
            "path",
            format!("{} is not a readable {what}: {e}", file.display()),
        )
        .detail("path", Value::from(file.display().to_string()))
    };
    if !file.is_file() {
        return Err(Error::invalid(
            "path",
            format!("{} does not exist or is not a file", file.display()),
        )
        .detail("path", Value::from(file.display().to_string())));
    }
    let conn = Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(bad)?;
    // Opening is lazy: reading the schema is what finds a file that is no database.
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })
    .map_err(bad)?;
    Ok(conn)
}

/// Opens `file` read-only as a `kind` database, refusing it unless it has every one of
/// `tables`.
pub fn open_with_tables(file: &Path, kind: &str, tables: &[&str]) -> Result<Connection> {
    let conn = open_read_only(file, &format!("{kind} database"))?;
    if let Some(t) = tables.iter().find(|t| !has_table(&conn, t)) {
        return Err(Error::invalid(
            "path",
            format!(
                "{} is not {} {kind} database: it has no {t} table",
                file.display(),
                if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                }
            ),
        )
        .detail("path", Value::from(file.display().to_string())));
    }
    Ok(conn)
}

/// Whether the database has a table of this name.
pub fn has_table(conn: &Connection, name: &str) -> bool {
    conn.query_row(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |_| Ok(()),
    )
    .is_ok()
}

/// Text of a column, whatever SQLite holds there; bytes that are not UTF-8 become U+FFFD.
fn text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
    }
}

/// A column of JSON text as a value: parsed when it parses, else the text itself.
fn json_or_text(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|_| Value::from(s))
}

/// A local-memory time (`YYYY-MM-DDTHH:MM:SS`, UTC without a zone) as RFC 3339.
fn utc(t: &str) -> Option<String> {
    let t = t.trim();
    if t.is_empty() {
        return None;
    }
    let offset = t.len() > 19 && t.get(t.len() - 6..).is_some_and(|z| z.contains(['+', '-']));
    let zoned = t.ends_with(['Z', 'z']) || offset;
    let s = if zoned {
        t.to_string()
    } else {
        format!("{t}Z")
    };
    memdir_store::clock::parse_time(&s).map(|_| s)
}

/// One row of `chunks`, joined with its session.
struct Row {
    id: i64,
    session: String,
    position: Option<i64>,
    content: Option<String>,
    reasoning: Option<String>,
    tool_calls: Option<String>,
    tool_call_results: Option<String>,
    metadata: Option<String>,
    project: Option<String>,
    start: Option<String>,
    title: Option<String>,
}

/// Imports every chunk of the database at `path` (or `path/memory.db`).
pub fn import(path: &Path, sink: &mut Sink<'_>) -> Result<()> {
    let file = db_file(path);
    let conn = open_with_tables(&file, "local-memory", &["sessions", "chunks"])?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    sink.report.files += 1;
    let sql_err = |e: rusqlite::Error| {
        Error::invalid("path", format!("reading {}: {e}", file.display()))
            .detail("path", Value::from(file.display().to_string()))
    };
    let total: i64 = conn
        .query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))
        .map_err(sql_err)?;
    sink.add_total(total.max(0) as u64);
    let summaries = has_table(&conn, "session_summaries");
    let sql = format!(
        "SELECT c.id, c.session_id, c.position, c.content, c.reasoning, c.tool_calls, \
         c.tool_call_results, c.metadata, s.project, s.start_time, {} \
         FROM chunks c LEFT JOIN sessions s ON s.id = c.session_id {} \
         ORDER BY c.session_id, c.position, c.id",
        if summaries { "m.title" } else { "NULL" },
        if summaries {
            "LEFT JOIN session_summaries m ON m.session_id = c.session_id"
        } else {
            ""
        }
    );
    let mut stmt = conn.prepare(&sql).map_err(sql_err)?;
    let mut rows = stmt.query([]).map_err(sql_err)?;
    while let Some(r) = rows.next().map_err(sql_err)? {
        let get = |i: usize| r.get_ref(i).ok().and_then(text);
        let row = Row {
            id: r.get_ref(0).ok().and_then(|v| v.as_i64().ok()).unwrap_or(0),
            session: get(1).unwrap_or_default(),
            position: r.get_ref(2).ok().and_then(|v| v.as_i64().ok()),
            content: get(3),
            reasoning: get(4),
            tool_calls: get(5),
            tool_call_results: get(6),
            metadata: get(7),
            project: get(8),
            start: get(9),
            title: get(10),
        };
        sink.advance(1);
        add(&name, row, sink)?;
    }
    Ok(())
}

/// One chunk row as a memdir chunk (or a counted skip).
fn add(file: &str, row: Row, sink: &mut Sink<'_>) -> Result<()> {
    if row.session.trim().is_empty() {
        sink.report.skip("no_session");
        return Ok(());
    }
    let Some(position) = row.position else {
        sink.report.skip("no_position");
        return Ok(());
    };
    let content = row.content.unwrap_or_default();
    if content.trim().is_empty() {
        sink.report.skip("empty");
        return Ok(());
    }
    let mut meta = match row.metadata.as_deref().map(str::trim) {
        None | Some("") => json!({}),
        Some(m) => match serde_json::from_str::<Value>(m) {
            Ok(Value::Object(o)) => Value::Object(o),
            Ok(v) => json!({"value": v}),
            Err(_) => json!({"raw": m}),
        },
    };
    // The key is kept where the engine keeps it; the source's own would conflict.
    if let Some(o) = meta.as_object_mut()
        && let Some(id) = o.remove("source_id")
    {
        o.insert("original_source_id".into(), id);
    }
    for (k, v) in [
        ("reasoning", &row.reasoning),
        ("tool_calls", &row.tool_calls),
        ("tool_call_results", &row.tool_call_results),
    ] {
        if let Some(v) = v {
            meta[k] = json_or_text(v);
        }
    }
    if meta.get("role").and_then(Value::as_str).is_none() {
        // The Python memory writes turns as "User: …" / "Assistant: …".
        if content.starts_with("User:") {
            meta["role"] = json!("user");
        } else if content.starts_with("Assistant:") {
            meta["role"] = json!("assistant");
        }
    }
    if meta.get("kind").is_none() {
        meta["kind"] = json!("message");
    }
    if let Some(t) = row
        .title
        .filter(|t| !t.trim().is_empty() && *t != row.session)
    {
        meta["title"] = json!(t);
    }
    let ts = row.start.as_deref().and_then(utc);
    if ts.is_some() {
        meta["ts_estimated"] = json!(true);
    }
    sink.push(chunk(
        row.session.clone(),
        row.project.as_deref().unwrap_or(""),
        ts.as_deref(),
        content,
        format!("lm:{}:{position}", row.session),
        meta,
        json!({"source": "local-memory", "path": file, "position": position, "id": row.id}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_without_a_zone_are_utc() {
        assert_eq!(
            utc("2026-03-02T09:14:05").as_deref(),
            Some("2026-03-02T09:14:05Z")
        );
        assert_eq!(
            utc("2026-03-02T09:14:05+01:00").as_deref(),
            Some("2026-03-02T09:14:05+01:00")
        );
        assert_eq!(utc("yesterday"), None);
        assert_eq!(utc(""), None);
    }
}
