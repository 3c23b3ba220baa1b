//! memdir's own chunk lines: what `ingest --jsonl` takes (`{session_id, content, project,
//! metadata, ts, source_id}`) or what a segment holds (`{session_id, replica, seq, hlc, ts,
//! project, metadata, content}`), from a file, a directory of `*.jsonl` files, or stdin.
//!
//! Unlike `ingest --jsonl`, an import is tolerant: a malformed line is counted and named, and
//! the rest goes on. Every chunk gets a key, so a second run adds nothing: its own
//! `source_id` (or `metadata.source_id`); else, for a segment line, `memdir:<replica>:<seq>`;
//! else `jsonl:` and a hash of session, time and content.

use std::path::Path;

use serde_json::{Value, json};

use super::{Sink, cap, each_line, find_files, parse_line, relative};
use memdir_api::NewChunk;
use memdir_api::error::Result;

/// Imports every `*.jsonl` file under `root` (or `root` itself, or stdin for `-`).
pub fn import(root: &Path, sink: &mut Sink<'_>) -> Result<()> {
    let files = if root.as_os_str() == "-" {
        vec![root.to_path_buf()]
    } else {
        find_files(root, &mut sink.report, |p| {
            p.extension().is_some_and(|e| e == "jsonl")
        })
    };
    for file in files {
        let rel = relative(root, &file);
        each_line(&file, sink, |sink, n, text| {
            match parse_line(text).and_then(to_chunk) {
                Some(Ok(c)) => sink.push(c),
                Some(Err(why)) => {
                    sink.report.skip(why);
                    Ok(())
                }
                None => {
                    sink.report.bad_line(&rel, n);
                    Ok(())
                }
            }
        })?;
    }
    Ok(())
}

/// A line as a chunk; `None` when it is not a chunk at all, `Err(reason)` when it is left out.
fn to_chunk(v: Value) -> Option<std::result::Result<NewChunk, &'static str>> {
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    let session_id = s("session_id")?.to_string();
    let mut content = s("content")?.to_string();
    if content.trim().is_empty() {
        return Some(Err("empty"));
    }
    let mut metadata = match v.get("metadata") {
        None | Some(Value::Null) => json!({}),
        Some(m @ Value::Object(_)) => m.clone(),
        Some(_) => return None,
    };
    let ts = s("ts").map(str::to_string);
    let key = s("source_id")
        .or_else(|| metadata.get("source_id").and_then(Value::as_str))
        .map(str::to_string)
        .or_else(
            || match (s("replica"), v.get("seq").and_then(Value::as_u64)) {
                (Some(r), Some(seq)) => Some(format!("memdir:{r}:{seq}")),
                _ => None,
            },
        )
        .unwrap_or_else(|| {
            let mut h = blake3::Hasher::new();
            for part in [
                session_id.as_str(),
                ts.as_deref().unwrap_or(""),
                content.as_str(),
            ] {
                h.update(part.as_bytes());
                h.update(b"\0");
            }
            format!("jsonl:{}", &h.finalize().to_hex()[..32])
        });
    if let Some(from) = cap(&mut content) {
        metadata["truncated_from"] = json!(from);
    }
    // The key is kept where the engine keeps it; a different one in metadata would conflict.
    // A correction link names chunk ids of the store the lines came from, which this store
    // does not hold: an import brings the facts, not the links.
    if let Some(o) = metadata.as_object_mut() {
        o.remove("source_id");
        o.remove(crate::service::SUPERSEDES_KEY);
    }
    Some(Ok(NewChunk {
        session_id,
        content,
        project: s("project").filter(|p| !p.is_empty()).map(str::to_string),
        metadata: Some(metadata),
        ts,
        source_id: Some(key),
        supersedes: None,
    }))
}
