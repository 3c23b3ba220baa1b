//! Export: the store in a form people read (markdown) or other tools load (jsonl).
//!
//! jsonl is one chunk object per line, `{session_id, content, project, metadata, ts}`, in
//! session and position order: exactly what `ingest --jsonl` takes, so an export loads into
//! another store with the original times. Forgotten chunks are left out. Categories have no
//! line form there; markdown carries them (as JSON blocks), with every session as a
//! transcript.
use crate::service::Upkeep;

use std::fmt::Write as _;
use std::io::Write as _;

use serde_json::{Map, Value};

use crate::service::PositionedChunk;
use memdir_api::error::{Error, ErrorKind, IoContext, Result};
use memdir_api::{ExportRequest, ExportResponse};
use memdir_store::clock;
use memdir_store::model::ChunkRecord;
use memdir_store::{self as store, codec};

impl Upkeep<'_> {
    /// Exports sessions (and, in markdown, categories) as text, or into a new file.
    pub fn export(&self, req: &ExportRequest) -> Result<ExportResponse> {
        let markdown = match req.format.as_str() {
            "jsonl" => false,
            "markdown" | "md" => true,
            other => {
                return Err(Error::invalid(
                    "format",
                    format!("format must be jsonl or markdown; got {other:?}"),
                ));
            }
        };
        let since = parse_since(req.since.as_deref())?;
        let output = req.output.as_deref().map(std::path::PathBuf::from);
        if let Some(p) = &output
            && std::fs::symlink_metadata(p).is_ok()
        {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("{} exists: export writes only a new file", p.display()),
            )
            .field("output"));
        }
        let layout = self.layout();
        let keep = |c: &PositionedChunk| {
            !c.chunk.is_tombstone()
                && req
                    .project
                    .as_deref()
                    .is_none_or(|p| p.is_empty() || c.chunk.project == p)
                && since.is_none_or(|t| clock::parse_time(&c.chunk.ts).is_some_and(|ts| ts >= t))
        };
        let mut text = String::new();
        let (mut n_sessions, mut n_chunks, mut n_categories) = (0, 0, 0);
        if markdown {
            let _ = writeln!(
                text,
                "# memdir export\n\nExported {} from `{}`.\n",
                clock::rfc3339(clock::now_ms()),
                layout.root.display()
            );
        }
        let mut sessions = Vec::new();
        if layout.exists() {
            for (id, dir) in store::list_session_dirs(layout)? {
                let chunks: Vec<PositionedChunk> = self
                    .sessions()
                    .session_chunks_at(&dir)?
                    .into_iter()
                    .filter(|c| keep(c))
                    .collect();
                if !chunks.is_empty() {
                    sessions.push((id, chunks));
                }
            }
        }
        sessions.sort_by(|a, b| a.0.cmp(&b.0));
        if markdown && !sessions.is_empty() {
            text.push_str("## Sessions\n\n");
        }
        for (id, chunks) in &sessions {
            n_sessions += 1;
            if markdown {
                write_session_heading(&mut text, id, chunks);
            }
            for c in chunks {
                n_chunks += 1;
                if markdown {
                    write_chunk_markdown(&mut text, c);
                } else {
                    write_chunk_jsonl(&mut text, &c.chunk);
                }
            }
        }
        if markdown && req.project.as_deref().is_none_or(str::is_empty) && layout.exists() {
            n_categories = self.write_categories(&mut text, since)?;
        }
        let mut resp = ExportResponse {
            format: if markdown { "markdown" } else { "jsonl" }.to_string(),
            sessions: n_sessions,
            chunks: n_chunks,
            categories: n_categories,
            output: None,
            text: None,
        };
        match output {
            Some(p) => {
                write_new_file(&p, &text)?;
                resp.output = Some(p.display().to_string());
            }
            None => resp.text = Some(text),
        }
        Ok(resp)
    }

    /// Appends the markdown section of the categories (those updated at or after `since`,
    /// when given) to `text`. Returns how many it wrote.
    fn write_categories(&self, text: &mut String, since: Option<i64>) -> Result<usize> {
        let layout = self.layout();
        let mut n_categories = 0;
        let mut first = true;
        for name in store::list_category_files(layout)?.0 {
            let Some(file) = store::read_category(layout, &name)? else {
                continue;
            };
            let Ok(content) = &file.content else {
                continue;
            };
            if let Some(t) = since {
                let updated = self
                    .inner()?
                    .as_ref()
                    .and_then(|i| i.ledger.category(name.as_str()).ok().flatten())
                    .and_then(|r| clock::parse_time(&r.updated_at));
                if updated.is_some_and(|u| u < t) {
                    continue;
                }
            }
            if first {
                text.push_str("## Categories\n\n");
                first = false;
            }
            n_categories += 1;
            let body = String::from_utf8_lossy(&codec::to_pretty(content)).into_owned();
            let _ = writeln!(text, "### {}\n\n```json\n{}```\n", name.as_str(), body);
        }
        Ok(n_categories)
    }
}

/// The time `since` names, in epoch milliseconds; `None` when absent or blank.
fn parse_since(since: Option<&str>) -> Result<Option<i64>> {
    match since.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => Ok(Some(clock::parse_when(s, clock::now_ms()).map(|(t, _)| t).ok_or_else(|| {
            Error::invalid(
                "since",
                format!("since {s:?} is not a time: use RFC 3339, a date (YYYY-MM-DD), epoch milliseconds, a time ago (30m, 12h, 7d, 2w), today or yesterday"),
            )
        })?)),
    }
}

/// Appends the markdown heading of session `id` (with its project, when a chunk names one).
fn write_session_heading(text: &mut String, id: &str, chunks: &[PositionedChunk]) {
    let project = chunks
        .iter()
        .map(|c| c.chunk.project.as_str())
        .find(|p| !p.is_empty());
    let _ = writeln!(text, "### Session `{id}`\n");
    if let Some(p) = project {
        let _ = writeln!(text, "Project: {p}\n");
    }
}

/// Appends one chunk as a markdown paragraph: its role, time and position, then its text.
fn write_chunk_markdown(text: &mut String, c: &PositionedChunk) {
    let ch = &c.chunk;
    let role = ch
        .metadata
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("chunk");
    let _ = writeln!(text, "**{role}** · {} · #{}\n", ch.ts, c.position);
    let _ = writeln!(text, "{}\n", ch.content.trim_end());
}

/// Appends one chunk as a jsonl line in the form `ingest --jsonl` takes.
fn write_chunk_jsonl(text: &mut String, ch: &ChunkRecord) {
    let mut line = Map::new();
    line.insert("session_id".into(), Value::from(ch.session_id.clone()));
    line.insert("content".into(), Value::from(ch.content.clone()));
    if !ch.project.is_empty() {
        line.insert("project".into(), Value::from(ch.project.clone()));
    }
    if ch.metadata.as_object().is_some_and(|m| !m.is_empty()) {
        line.insert("metadata".into(), ch.metadata.clone());
    }
    line.insert("ts".into(), Value::from(ch.ts.clone()));
    // A key that makes loading the export twice add nothing: the chunk's own
    // source_id, else its chunk id.
    let key = ch
        .metadata
        .get("source_id")
        .and_then(Value::as_str)
        .map_or_else(|| format!("memdir:{}", ch.chunk_id()), str::to_string);
    line.insert("source_id".into(), Value::from(key));
    text.push_str(&codec::to_compact(&Value::Object(line)));
    text.push('\n');
}

/// Writes `text` into the new file `p`, durably; an existing file is an error.
fn write_new_file(p: &std::path::Path, text: &str) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(p)
        .at("create", p)?;
    f.write_all(text.as_bytes()).at("write", p)?;
    // DURABILITY: an export reported as written is on disk.
    f.sync_all().at("fsync", p)?;
    Ok(())
}
