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
use crate::service::Cx;
use memdir_api::error::{Error, Result};

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

/// An agent's event (`what` names it in errors) as a JSON object, and the string under
/// `name_key` (empty when absent).
fn event_object(
    input: &[u8],
    what: &str,
    name_key: &str,
) -> Result<(serde_json::Map<String, Value>, String)> {
    let v: Value = serde_json::from_slice(input)
        .map_err(|e| Error::invalid("event", format!("{what} is not JSON: {e}")))?;
    let Value::Object(obj) = v else {
        return Err(Error::invalid(
            "event",
            format!("{what} is not a JSON object"),
        ));
    };
    let name = obj
        .get(name_key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok((obj, name))
}

/// An id an agent hands over: 1–100 letters, digits and `extra` bytes, never a path. Errors
/// name `field` and say `missing`, or that the value is not `kind`.
fn checked_id(
    id: Option<&str>,
    field: &str,
    missing: &str,
    kind: &str,
    extra: &[u8],
) -> Result<String> {
    let Some(id) = id else {
        return Err(Error::invalid(field, missing));
    };
    if id.is_empty()
        || id.len() > 100
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || extra.contains(&b))
    {
        return Err(Error::invalid(field, format!("{id:?} is not {kind}")));
    }
    Ok(id.to_string())
}

/// Parses a Claude Code hook event: a JSON object with a string `transcript_path`.
pub fn parse_event(input: &[u8]) -> Result<Event> {
    let (obj, name) = event_object(input, "the hook event on stdin", "hook_event_name")?;
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
pub fn claude_code(memdir: Cx<'_>, event: &Event, deadline: Instant) -> Result<Capture> {
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
    let saved = memdir.sessions().import_cursor(&key)?;
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
        memdir
            .sessions()
            .save_import_cursor(&key, saved.as_deref(), &text)?;
    }
    Ok(out)
}

/// A Codex notification: Codex runs its `notify` program with one JSON argument after each
/// turn (`{"type": "agent-turn-complete", "thread-id": ..., "cwd": ..., ...}`).
#[derive(Debug)]
pub struct CodexEvent {
    /// The notification's `type`.
    pub name: String,
    /// The thread id, which names the rollout file (`rollout-<time>-<thread id>.jsonl`).
    pub thread: String,
}

/// Parses a Codex notification. Its thread id must be an id (letters, digits, `-`), never a
/// path.
pub fn parse_codex_event(input: &[u8]) -> Result<CodexEvent> {
    let (obj, name) = event_object(input, "the Codex notification", "type")?;
    let thread = checked_id(
        obj.get("thread-id").and_then(Value::as_str),
        "thread-id",
        "the Codex notification has no thread-id",
        "a Codex thread id",
        b"-",
    )?;
    Ok(CodexEvent { name, thread })
}

/// The rollout of `thread` under `<codex home>/sessions/YYYY/MM/DD/`, newest day first.
fn find_rollout(home: &Path, thread: &str) -> Option<PathBuf> {
    let suffix = format!("-{thread}.jsonl");
    let newest_first = |dir: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.sort();
        v.reverse();
        v
    };
    for year in newest_first(&home.join("sessions")) {
        for month in newest_first(&year) {
            for day in newest_first(&month) {
                for f in newest_first(&day) {
                    let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    if name.starts_with("rollout-") && name.ends_with(&suffix) && f.is_file() {
                        return Some(f);
                    }
                }
            }
        }
    }
    None
}

/// What a Codex capture remembers of a rollout: where the file is, its length when read, and
/// the hash of its last bytes then.
#[derive(Debug, Default, Serialize, Deserialize)]
struct CodexState {
    path: String,
    len: u64,
    tail: String,
}

/// Captures the turns of a Codex thread not saved yet. The rollout is found by its thread id
/// (once; its path is kept with the cursor) and read by the Codex importer, so a capture gives
/// what `import codex` gives; keys make a re-read add nothing. A rollout unchanged since the
/// last capture is not read.
pub fn codex(memdir: Cx<'_>, home: &Path, event: &CodexEvent) -> Result<Capture> {
    let mut out = Capture {
        event: event.name.clone(),
        ..Capture::default()
    };
    if event.name != "agent-turn-complete" {
        // Other notifications carry no turn.
        return Ok(out);
    }
    let key = format!("codex-thread:{}", event.thread);
    let saved = memdir.sessions().import_cursor(&key)?;
    let state: CodexState = saved
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default();
    let known = Some(PathBuf::from(&state.path)).filter(|p| !state.path.is_empty() && p.is_file());
    let Some(file) = known.or_else(|| find_rollout(home, &event.thread)) else {
        return Err(Error::invalid(
            "thread-id",
            format!(
                "no rollout of thread {} under {}",
                event.thread,
                home.join("sessions").display()
            ),
        ));
    };
    out.transcript = file.display().to_string();
    let len = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    out.to = len;
    if state.path == out.transcript
        && state.len == len
        && tail_hash(&file, len).as_deref() == Some(state.tail.as_str())
    {
        out.from = len;
        return Ok(out);
    }
    let mut sink = Sink::new(memdir, false, None);
    let root = if file.starts_with(home) {
        home
    } else {
        file.parent().unwrap_or(home)
    };
    super::codex::import_file(root, &file, &mut sink)?;
    sink.flush()?;
    out.chunks = sink.report.chunks;
    out.existing = sink.report.existing;
    let next = CodexState {
        path: out.transcript.clone(),
        len,
        tail: tail_hash(&file, len).unwrap_or_default(),
    };
    let text =
        serde_json::to_string(&next).map_err(|e| Error::internal(format!("hook cursor: {e}")))?;
    memdir
        .sessions()
        .save_import_cursor(&key, saved.as_deref(), &text)?;
    Ok(out)
}

/// An opencode event as memdir's opencode plugin hands it over: `{"type": "session.idle",
/// "properties": {"sessionID": ...}}`.
#[derive(Debug)]
pub struct OpencodeEvent {
    pub name: String,
    pub session: String,
}

/// Parses an opencode event. Its session id must be an id (letters, digits, `_`, `-`).
pub fn parse_opencode_event(input: &[u8]) -> Result<OpencodeEvent> {
    let (obj, name) = event_object(input, "the opencode event", "type")?;
    let session = checked_id(
        obj.get("properties")
            .and_then(|p| p.get("sessionID"))
            .and_then(Value::as_str),
        "sessionID",
        "the opencode event has no properties.sessionID",
        "an opencode session id",
        b"_-",
    )?;
    Ok(OpencodeEvent { name, session })
}

/// Captures an opencode session when it goes idle (the end of a turn): the session is read by
/// the opencode importer from opencode's data directory `root`, so a capture gives what
/// `import opencode` gives, and keys make a re-read add only new turns. Other events carry no
/// turn and do nothing.
pub fn opencode(memdir: Cx<'_>, root: &Path, event: &OpencodeEvent) -> Result<Capture> {
    let mut out = Capture {
        event: event.name.clone(),
        transcript: root.display().to_string(),
        ..Capture::default()
    };
    if event.name != "session.idle" {
        return Ok(out);
    }
    let mut sink = Sink::new(memdir, false, None);
    let found = super::opencode::import_only(root, Some(&event.session), &mut sink)?;
    sink.flush()?;
    if found == 0 {
        return Err(Error::invalid(
            "sessionID",
            format!(
                "no opencode session {} under {}",
                event.session,
                root.display()
            ),
        ));
    }
    out.chunks = sink.report.chunks;
    out.existing = sink.report.existing;
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
    fn codex_notifications_need_a_thread_id_that_is_no_path() {
        let e = parse_codex_event(
            br#"{"type":"agent-turn-complete","thread-id":"019c8a2e-5f10-7b3d-a8c4-1e2f3a4b5c6d","cwd":"/w"}"#,
        )
        .unwrap();
        assert_eq!(e.name, "agent-turn-complete");
        assert_eq!(e.thread, "019c8a2e-5f10-7b3d-a8c4-1e2f3a4b5c6d");
        for bad in [
            &b"not json"[..],
            b"[1]",
            br#"{"type":"agent-turn-complete"}"#,
            br#"{"thread-id":"../../etc/passwd"}"#,
            br#"{"thread-id":"a/b"}"#,
            br#"{"thread-id":""}"#,
            br#"{"thread-id":7}"#,
        ] {
            assert!(
                parse_codex_event(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_rollout_is_found_by_its_thread_id_newest_day_first() {
        let home = tempfile::tempdir().unwrap();
        let thread = "019c8a2e-5f10-7b3d-a8c4-1e2f3a4b5c6d";
        for day in ["2026/03/01", "2026/03/02"] {
            let d = home.path().join("sessions").join(day);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join(format!("rollout-2026-03-02T09-05-11-{thread}.jsonl")),
                b"",
            )
            .unwrap();
            std::fs::write(d.join("rollout-2026-03-02T09-05-11-other.jsonl"), b"").unwrap();
        }
        let found = find_rollout(home.path(), thread).unwrap();
        assert!(
            found.starts_with(home.path().join("sessions/2026/03/02")),
            "{found:?}"
        );
        assert_eq!(find_rollout(home.path(), "0000"), None);
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
