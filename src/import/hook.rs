//! Hook capture: an agent's hook hands memdir the transcript it is writing, and memdir saves
//! the turns it has not saved yet.
//!
//! Claude Code runs `memdir hook claude-code` on `Stop`, `PreCompact` and `SessionEnd` with a
//! JSON event on stdin (`session_id`, `transcript_path`, `cwd`, `hook_event_name`). The
//! transcript is read by the Claude Code importer itself ([`super::claude::import_from`]), so
//! a capture gives the chunks, keys and metadata a full `import claude-code` gives, and either
//! one run after the other adds nothing.
//!
//! A capture reads from a saved [`Cursor`] (bytes and lines consumed, the project, whether
//! the first chunk was read) kept per transcript in the ledger's `import_cursor` table, and
//! saves the new cursor only after the batch it read is acknowledged. A capture killed at any
//! point leaves the old cursor, and the next one reads those lines again; the `source_id` of
//! every chunk makes that re-read add nothing. Only complete lines are read: an agent still
//! writing its last line has it read next time. The cursor also holds a hash of the bytes
//! just before its offset, so a transcript replaced by another file is read from its start.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Sink;
use super::claude::{self, Cursor};
use crate::error::{Error, Result};
use crate::service::Memdir;

/// Largest hook event read from stdin.
pub const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// Bytes before the cursor's offset whose hash tells a grown transcript from a replaced one.
const TAIL_BYTES: u64 = 256;

/// What a capture did.
#[derive(Debug, Default, Serialize)]
pub struct Capture {
    /// The hook event's name (`Stop`, `PreCompact`, `SessionEnd`, ...).
    pub event: String,
    pub transcript: String,
    /// Chunks saved by this capture.
    pub chunks: usize,
    /// Chunks read again that were already saved (after a killed capture, or an import).
    pub existing: usize,
    /// Byte offsets read: from where the cursor stood to where it stands now.
    pub from: u64,
    pub to: u64,
    /// Whether the read stopped at its deadline before the end of the transcript.
    pub stopped_early: bool,
}

/// The saved state of one transcript: the importer's cursor and the tail hash.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct State {
    #[serde(flatten)]
    cursor: Cursor,
    /// BLAKE3 (hex) of the up to [`TAIL_BYTES`] bytes before the offset.
    #[serde(default)]
    tail: String,
}

/// The fields of a Claude Code hook event memdir reads.
#[derive(Debug)]
pub struct Event {
    pub name: String,
    pub transcript: PathBuf,
}

/// Parses a Claude Code hook event: a JSON object with a string `transcript_path`.
pub fn parse_event(input: &[u8]) -> Result<Event> {
    let v: Value = serde_json::from_slice(input).map_err(|e| {
        Error::invalid("event", format!("the hook event on stdin is not JSON: {e}"))
    })?;
    let Some(obj) = v.as_object() else {
        return Err(Error::invalid(
            "event",
            "the hook event on stdin is not a JSON object",
        ));
    };
    let name = obj
        .get("hook_event_name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let Some(path) = obj
        .get("transcript_path")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
    else {
        return Err(Error::invalid(
            "transcript_path",
            "the hook event has no transcript_path",
        ));
    };
    let transcript = PathBuf::from(path);
    if !transcript.is_absolute() {
        return Err(Error::invalid(
            "transcript_path",
            format!("transcript_path {path:?} is not an absolute path"),
        ));
    }
    Ok(Event { name, transcript })
}

/// The root `relative` measures `import.path` from, as a whole import from the Claude Code
/// directory sees it: `<slug>/<session>.jsonl` under `projects/`.
fn base_of(file: &Path) -> PathBuf {
    let parent = file.parent().unwrap_or(Path::new("/"));
    match parent.parent() {
        Some(gp) if gp.file_name().is_some_and(|n| n == "projects") => gp.to_path_buf(),
        _ => parent.to_path_buf(),
    }
}

/// BLAKE3 of the bytes `[offset - TAIL_BYTES, offset)` of `file`.
fn tail_hash(file: &Path, offset: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(file).ok()?;
    let from = offset.saturating_sub(TAIL_BYTES);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut buf = Vec::with_capacity((offset - from) as usize);
    f.take(offset - from).read_to_end(&mut buf).ok()?;
    (buf.len() as u64 == offset - from).then(|| blake3::hash(&buf).to_hex().to_string())
}

/// Captures the turns of a Claude Code transcript not saved yet. Reading stops after the
/// line during which `deadline` passes; the rest is read by the next event.
pub fn claude_code(memdir: &Memdir, event: &Event, deadline: Instant) -> Result<Capture> {
    let file = &event.transcript;
    let md = std::fs::metadata(file).map_err(|e| {
        Error::invalid(
            "transcript_path",
            format!("cannot read the transcript {}: {e}", file.display()),
        )
    })?;
    if !md.is_file() {
        return Err(Error::invalid(
            "transcript_path",
            format!("{} is not a file", file.display()),
        ));
    }
    let key = format!(
        "claude-code:{}",
        std::fs::canonicalize(file)
            .unwrap_or_else(|_| file.clone())
            .display()
    );
    let saved = memdir.import_cursor(&key)?;
    let state: State = saved
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default();
    let offset = state.cursor.at.offset;
    // A transcript shorter than what was read, or with other bytes before the offset, is not
    // the file the cursor was saved for: read it from the start (keys skip what is saved).
    let cursor = if offset > md.len()
        || (offset > 0 && tail_hash(file, offset).as_deref() != Some(state.tail.as_str()))
    {
        Cursor::default()
    } else {
        state.cursor.clone()
    };
    let mut out = Capture {
        event: event.name.clone(),
        transcript: file.display().to_string(),
        from: cursor.at.offset,
        to: cursor.at.offset,
        ..Capture::default()
    };
    if cursor.at.offset == md.len() {
        // Nothing new: no lock, no write.
        return Ok(out);
    }
    let mut sink = Sink::new(memdir, false, None);
    let next = if claude::is_subagent(file) {
        sink.report.skip("subagent_transcript");
        cursor.clone()
    } else {
        claude::import_from(&base_of(file), file, &cursor, Some(deadline), &mut sink)?
    };
    sink.flush()?;
    out.chunks = sink.report.chunks;
    out.existing = sink.report.existing;
    out.to = next.at.offset;
    out.stopped_early = !sink.report.skipped.contains_key("unterminated_tail")
        && next.at.offset < std::fs::metadata(file).map(|m| m.len()).unwrap_or(0)
        && Instant::now() >= deadline;
    if next != state.cursor {
        let tail = tail_hash(file, next.at.offset).unwrap_or_default();
        let text = serde_json::to_string(&State { cursor: next, tail })
            .map_err(|e| Error::internal(format!("hook cursor: {e}")))?;
        memdir.save_import_cursor(&key, saved.as_deref(), &text)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_need_an_absolute_transcript_path() {
        let e =
            parse_event(br#"{"hook_event_name":"Stop","transcript_path":"/a/b.jsonl"}"#).unwrap();
        assert_eq!(e.name, "Stop");
        assert_eq!(e.transcript, PathBuf::from("/a/b.jsonl"));
        for bad in [
            &b"not json"[..],
            b"[1]",
            br#"{"hook_event_name":"Stop"}"#,
            br#"{"transcript_path":"rel/x.jsonl"}"#,
            br#"{"transcript_path":7}"#,
        ] {
            assert!(
                parse_event(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn the_base_is_the_projects_directory() {
        assert_eq!(
            base_of(Path::new("/h/.claude/projects/-w-app/s.jsonl")),
            PathBuf::from("/h/.claude/projects")
        );
        assert_eq!(base_of(Path::new("/t/s.jsonl")), PathBuf::from("/t"));
    }
}
