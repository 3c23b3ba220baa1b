//! mcp-memory-rs: a base directory (`$MCP_MEMORY_DIR`, default `~/.memory`) of curated
//! categories, `categories/<name>.json`, with backups `backups/<name>.<UTC
//! yyyy-mm-ddTHH-MM-SS>.json` and its SQLite `memory.db` (version rows: `category_version`).
//!
//! Each category becomes the memdir category of the same name: its backups first, oldest
//! first, as earlier versions, then the current file as the head. A version's reason names the
//! import and, when a `category_version` row has the sha256 of its bytes, that row's reason
//! and actor. A log (`"_kind": "log"`) stays a log: each entry keeps its `ts` and `data`, its
//! numeric id is kept as `source_id` and its memdir id is made from its time. Every version goes
//! through the engine's import of a version (redaction, history); a version whose content is
//! already anywhere in the category's history is not added again, so a second run adds nothing.
//! Left out and reported: files that do not parse (a torn write; that category is not written
//! at all), names memdir refuses, delete tombstones (`.deleted.json`, not restored). The base
//! directory and its database are only read.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::local_memory::{has_table, open_read_only};
use super::{Sink, find_files, relative};
use memdir_api::error::{Error, Result};
use memdir_store::clock::{Hlc, parse_time};
use memdir_store::model::CategoryName;

/// A version row of the source database: why and by whom.
struct Row {
    reason: Option<String>,
    actor: Option<String>,
}

/// `category_version` rows by content hash; none when the database is missing or unreadable.
fn version_rows(base: &Path, sink: &mut Sink<'_>) -> HashMap<String, Row> {
    let mut out = HashMap::new();
    let file = base.join("memory.db");
    if !file.is_file() {
        return out;
    }
    let Ok(conn) = open_read_only(&file, "mcp-memory-rs database") else {
        sink.report.bad_file("unreadable_database", "memory.db");
        return out;
    };
    if !has_table(&conn, "category_version") {
        return out;
    }
    let Ok(mut stmt) =
        conn.prepare("SELECT content_hash, reason, actor FROM category_version ORDER BY id")
    else {
        sink.report.bad_file("unreadable_database", "memory.db");
        return out;
    };
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, Option<String>>(0)?,
            r.get::<_, Option<String>>(1)?,
            r.get::<_, Option<String>>(2)?,
        ))
    });
    match rows {
        Ok(rows) => {
            for (hash, reason, actor) in rows.flatten() {
                if let Some(h) = hash {
                    out.insert(h.to_ascii_lowercase(), Row { reason, actor });
                }
            }
        }
        Err(_) => sink.report.bad_file("unreadable_database", "memory.db"),
    }
    out
}

/// A category file's content: a JSON object, or why not.
fn parse(bytes: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(bytes);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    serde_json::from_str::<Value>(text)
        .ok()
        .filter(Value::is_object)
}

/// A log of mcp-memory-rs as a memdir log: ids made from entry times (so they sort as memdir's
/// do), the numeric id kept as `source_id`; entries without a readable time or data are dropped.
fn to_memdir(content: Value, sink: &mut Sink<'_>) -> Value {
    if content.get("_kind").and_then(Value::as_str) != Some("log") {
        return content;
    }
    let mut out = content;
    let entries = out
        .get("entries")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut kept: BTreeMap<String, Value> = BTreeMap::new();
    for (i, e) in entries.into_iter().enumerate() {
        let ts = e.get("ts").and_then(Value::as_str);
        let (Some(ts), Some(data)) = (ts, e.get("data")) else {
            sink.report.skip("log_entry_incomplete");
            continue;
        };
        let Some(ms) = parse_time(ts) else {
            sink.report.skip("log_entry_incomplete");
            continue;
        };
        let source = e.get("id").cloned().unwrap_or(json!(i));
        let n = source.as_u64().unwrap_or(i as u64);
        let id = format!("{}-mcp{n}", Hlc { ms, counter: 0 });
        kept.insert(
            id.clone(),
            json!({"id": id, "ts": ts, "data": data, "source_id": source}),
        );
    }
    out["entries"] = Value::Array(kept.into_values().collect());
    if out.get("_retention").is_none_or(|r| !r.is_object()) {
        out["_retention"] = json!({"max_entries": null, "max_age_days": null});
    }
    out
}

/// Imports every category of the base directory `base`.
pub fn import(base: &Path, sink: &mut Sink<'_>) -> Result<()> {
    let cats = base.join("categories");
    if !cats.is_dir() {
        return Err(Error::invalid(
            "path",
            format!(
                "{} is no mcp-memory-rs base directory: it has no categories/ directory",
                base.display()
            ),
        )
        .detail("path", Value::from(base.display().to_string())));
    }
    let rows = version_rows(base, sink);
    // Backups by category name, oldest first (the stamp sorts as time does).
    let mut backups: BTreeMap<String, Vec<(String, std::path::PathBuf)>> = BTreeMap::new();
    let bdir = base.join("backups");
    if bdir.is_dir() {
        for file in find_files(&bdir, &mut sink.report, |p| {
            p.extension().is_some_and(|e| e == "json")
        }) {
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if name.ends_with(".deleted.json") {
                sink.report.skip("tombstone_not_restored");
                continue;
            }
            let stem = name.strip_suffix(".json").unwrap_or(&name);
            match stem.rsplit_once('.') {
                Some((cat, stamp))
                    if stamp.len() >= 19 && stamp.starts_with(|c: char| c.is_ascii_digit()) =>
                {
                    backups
                        .entry(cat.to_string())
                        .or_default()
                        .push((stamp.to_string(), file.clone()));
                }
                _ => sink
                    .report
                    .bad_file("unknown_backup_name", &relative(base, &file)),
            }
        }
    }
    for list in backups.values_mut() {
        list.sort();
    }
    let files = find_files(&cats, &mut sink.report, |p| {
        p.extension().is_some_and(|e| e == "json")
    });
    sink.add_total(files.len() as u64);
    for file in files {
        sink.advance(1);
        let rel = relative(base, &file);
        let Some(name) = file.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        if CategoryName::new(&name).is_err() {
            sink.report.bad_file("invalid_category_name", &rel);
            continue;
        }
        let Ok(bytes) = std::fs::read(&file) else {
            sink.report.skip("vanished_file");
            continue;
        };
        sink.report.files += 1;
        let Some(current) = parse(&bytes) else {
            sink.report.bad_file("unreadable_category", &rel);
            continue;
        };
        let mut versions: Vec<(Vec<u8>, Value, String)> = Vec::new();
        for (_, b) in backups.remove(&name).unwrap_or_default() {
            let brel = relative(base, &b);
            let Ok(bb) = std::fs::read(&b) else {
                sink.report.skip("vanished_file");
                continue;
            };
            sink.report.files += 1;
            match parse(&bb) {
                Some(v) => versions.push((bb, v, brel)),
                None => sink.report.bad_file("unreadable_backup", &brel),
            }
        }
        versions.push((bytes, current, rel));
        let mut last: Option<Value> = None;
        for (bytes, content, _rel) in versions {
            if last.as_ref() == Some(&content) {
                continue;
            }
            last = Some(content.clone());
            let hash: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let mut reason = "imported from mcp-memory-rs".to_string();
            if let Some(row) = rows.get(&hash) {
                if let Some(r) = row.reason.as_deref().filter(|r| !r.trim().is_empty()) {
                    reason.push_str(": ");
                    reason.push_str(r);
                }
                if let Some(a) = row.actor.as_deref().filter(|a| !a.trim().is_empty()) {
                    reason.push_str(&format!(" (by {a})"));
                }
            }
            let reason: String = reason.chars().take(500).collect();
            let content = to_memdir(content, sink);
            sink.category(&name, &content, &reason)?;
        }
    }
    // Backups of a category that has no current file: deleted in the source, not restored.
    for _ in backups.values().flatten() {
        sink.report.skip("backup_without_category");
    }
    Ok(())
}
