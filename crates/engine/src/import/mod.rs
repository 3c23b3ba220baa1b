//! Importers: other tools' histories read into session memory.
//!
//! Each importer reads its source (never writing to it), turns every record worth keeping
//! into a [`NewChunk`] with an idempotency key (`source_id`, e.g. `cc:<record uuid>`), and
//! hands the chunks to a [`Sink`], which saves them through the engine's batch ingest in
//! bounded batches. The key makes a second run add nothing: the engine skips a chunk whose key
//! is already in its session. Nothing here writes a file of the store directly.
//!
//! The on-disk formats and what to keep are described in the design note on importers
//! (fields quoted as the writers spell them); this module follows its defaults: messages
//! and compaction summaries are kept; tool calls and results, thinking, harness-injected text
//! and subagent transcripts are left out and counted.

pub mod claude;
pub mod codex;
pub mod hook;
pub mod jsonl;
pub mod local_memory;
pub mod mcp_jsonl;
pub mod mcp_rs;
pub mod notes;
pub mod opencode;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{Value, json};

use crate::service::{Cx, Progress};
use memdir_api::error::{Error, Result};
use memdir_api::{ImportRequest, ImportResponse, NewChunk};

/// Chunks per ingest batch (each batch is saved all or nothing).
pub const BATCH_CHUNKS: usize = 1_000;
/// Content bytes after which a batch is saved early.
pub const BATCH_BYTES: usize = 8 * 1024 * 1024;
/// Longest content kept; a longer message is cut with a marker.
pub const MAX_CONTENT_BYTES: usize = 256 * 1024 - 64;
/// Malformed lines named in the report (all are counted).
const BAD_LINES_LISTED: usize = 100;
/// Longest line read from a foreign file.
const MAX_LINE_BYTES: u64 = 64 * 1024 * 1024;

/// The formats `import` reads.
pub const FORMATS: &[&str] = &[
    "jsonl",
    "claude-code",
    "codex",
    "opencode",
    "local-memory",
    "mcp-memory-rs",
    "mcp-memory-jsonl",
    "claude-memory",
    "codex-memories",
    "cursor-rules",
];

/// The formats that write categories rather than sessions (access control asks more of them).
pub use memdir_api::CATEGORY_IMPORT_FORMATS as CATEGORY_FORMATS;

/// The environment variable that names each format's data, where it has one.
const DEFAULT_VARS: &[(&str, &str)] = &[
    ("claude-code", "CLAUDE_CONFIG_DIR"),
    ("claude-memory", "CLAUDE_CONFIG_DIR"),
    ("codex", "CODEX_HOME"),
    ("codex-memories", "CODEX_HOME"),
    ("local-memory", "MEMORY_DB_PATH"),
    ("mcp-memory-rs", "MCP_MEMORY_DIR"),
    ("mcp-memory-jsonl", "MEMORY_FILE_PATH"),
];

/// Where a format's data lives by default; `env` looks up an environment variable.
pub fn default_path(format: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let home = env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    match format {
        "claude-code" | "claude-memory" => env("CLAUDE_CONFIG_DIR")
            .and_then(|d| {
                d.split(',')
                    .map(str::trim)
                    .find(|s| !s.is_empty())
                    .map(PathBuf::from)
            })
            .or_else(|| home.map(|h| h.join(".claude"))),
        "codex" | "codex-memories" => env("CODEX_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(".codex"))),
        "opencode" => memdir_store::env::data_home(env).map(|d| d.join("opencode")),
        // A project's rules: the directory the command runs in.
        "cursor-rules" => std::env::current_dir().ok(),
        "local-memory" => env("MEMORY_DB_PATH")
            .filter(|d| !d.is_empty())
            .map(|d| expand_home(&d, home.as_deref()))
            .or_else(|| home.map(|h| h.join(".local/share/local-memory/memory.db"))),
        "mcp-memory-rs" => env("MCP_MEMORY_DIR")
            .filter(|d| !d.is_empty())
            .map(|d| expand_home(&d, home.as_deref()))
            .or_else(|| home.map(|h| h.join(".memory"))),
        // The server keeps its file in its package directory unless told: only the variable
        // names a place worth looking.
        "mcp-memory-jsonl" => env("MEMORY_FILE_PATH")
            .filter(|d| !d.is_empty())
            .map(|d| expand_home(&d, home.as_deref())),
        _ => None,
    }
}

/// A path from an environment variable, with a leading `~` read as the home directory.
fn expand_home(p: &str, home: Option<&Path>) -> PathBuf {
    match (p.strip_prefix("~/"), home) {
        (Some(rest), Some(h)) => h.join(rest),
        _ if p == "~" && home.is_some() => home.map(Path::to_path_buf).unwrap_or_default(),
        _ => PathBuf::from(p),
    }
}

/// What a run counts.
#[derive(Default)]
pub struct Report {
    pub files: usize,
    pub sessions: BTreeSet<String>,
    pub chunks: usize,
    pub existing: usize,
    pub categories: usize,
    pub notes: usize,
    pub skipped: BTreeMap<String, u64>,
    pub flagged: BTreeMap<String, u64>,
    pub bad_lines: Vec<String>,
    /// Categories that existed before this run, by whether the run gave them a new head.
    pub replaced: BTreeMap<String, bool>,
}

impl Report {
    /// Counts a record left out, by reason.
    pub fn skip(&mut self, why: &str) {
        *self.skipped.entry(why.to_string()).or_default() += 1;
    }

    /// Counts a record kept but marked, by reason.
    pub fn flag(&mut self, why: &str) {
        *self.flagged.entry(why.to_string()).or_default() += 1;
    }

    /// Counts a malformed line (`line` 0-based) and names the first ones.
    pub fn bad_line(&mut self, file: &str, line: usize) {
        self.skip("malformed_line");
        if self.bad_lines.len() < BAD_LINES_LISTED {
            self.bad_lines.push(format!("{file}:{}", line + 1));
        }
    }

    /// Counts a file that cannot be read as what it should be (`why`) and names it.
    pub fn bad_file(&mut self, why: &str, file: &str) {
        self.skip(why);
        if self.bad_lines.len() < BAD_LINES_LISTED {
            self.bad_lines.push(file.to_string());
        }
    }
}

/// Where imported chunks go: batches through the engine's ingest, or (dry run) only counted.
pub struct Sink<'a> {
    memdir: Cx<'a>,
    dry_run: bool,
    batch: Vec<NewChunk>,
    bytes: usize,
    /// Keys seen in this dry run (a real run asks the engine).
    seen: HashSet<(String, String)>,
    pub report: Report,
    progress: Option<Progress<'a>>,
    done: u64,
    total: u64,
}

impl<'a> Sink<'a> {
    pub(crate) fn new(memdir: Cx<'a>, dry_run: bool, progress: Option<Progress<'a>>) -> Sink<'a> {
        Sink {
            memdir,
            dry_run,
            batch: Vec::new(),
            bytes: 0,
            seen: HashSet::new(),
            report: Report::default(),
            progress,
            done: 0,
            total: 0,
        }
    }

    /// Adds a chunk; a full batch is saved.
    pub fn push(&mut self, chunk: NewChunk) -> Result<()> {
        self.report.sessions.insert(chunk.session_id.clone());
        self.bytes += chunk.content.len();
        self.batch.push(chunk);
        if self.batch.len() >= BATCH_CHUNKS || self.bytes >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Saves (or, in a dry run, counts) the pending batch.
    pub fn flush(&mut self) -> Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        self.bytes = 0;
        if self.dry_run {
            let pairs: Vec<(String, String)> = batch
                .iter()
                .map(|c| {
                    (
                        c.session_id.clone(),
                        c.source_id.clone().unwrap_or_default(),
                    )
                })
                .collect();
            let known = self.memdir.sessions().source_ids_known(&pairs)?;
            for (pair, known) in pairs.into_iter().zip(known) {
                if known || !self.seen.insert(pair) {
                    self.report.existing += 1;
                } else {
                    self.report.chunks += 1;
                }
            }
            return Ok(());
        }
        let out = self.memdir.sessions().ingest(&batch)?;
        self.report.chunks += out.count;
        self.report.existing += out.skipped;
        Ok(())
    }

    /// Imports one version of a category (see [`Categories::import_version`]): counted in
    /// `categories` when it is (or, in a dry run, would be) written, else as a version already
    /// imported.
    pub fn category(&mut self, name: &str, content: &Value, reason: &str) -> Result<bool> {
        if !self.report.replaced.contains_key(name) {
            // Checked once, before this run's first version of it: a category the user
            // already had is named in the report when the import replaces its head.
            let layout = self.memdir.layout();
            let existed = layout.exists()
                && memdir_store::read_category(
                    layout,
                    &memdir_store::model::CategoryName::new(name)?,
                )?
                .is_some();
            if existed {
                self.report.replaced.insert(name.to_string(), false);
            }
        }
        let written =
            self.memdir
                .categories()
                .import_version(name, content, reason, self.dry_run)?;
        if written {
            self.report.categories += 1;
            if let Some(r) = self.report.replaced.get_mut(name) {
                *r = true;
            }
        } else {
            self.report.skip("version_already_imported");
        }
        Ok(written)
    }

    /// Saves `text` as the note at `path` (with `ts`, the source file's time, as its version's
    /// time) unless the note holds it already; counts it in `notes` when it is (or, in a dry
    /// run, would be) written.
    pub fn note(
        &mut self,
        path: &memdir_store::note::NotePath,
        text: &str,
        ts: &str,
        reason: &str,
    ) -> Result<bool> {
        let written = self
            .memdir
            .notes()
            .import_text(path, text, ts, reason, self.dry_run)?;
        if written {
            self.report.notes += 1;
        } else {
            self.report.skip("note_already_imported");
        }
        Ok(written)
    }

    /// Adds to the size of the whole source, in the unit `advance` counts.
    pub fn add_total(&mut self, total: u64) {
        self.total += total;
    }

    /// Moves the progress bar: `bytes` more of the source read.
    pub fn advance(&mut self, bytes: u64) {
        self.done += bytes;
        if let Some(p) = self.progress {
            p(self.done.min(self.total), self.total);
        }
    }
}

/// Runs an import.
pub fn run(
    memdir: Cx<'_>,
    req: &ImportRequest,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ImportResponse> {
    let progress = memdir.progress();
    let start = Instant::now();
    let format = req.format.as_str();
    if !FORMATS.contains(&format) {
        return Err(Error::invalid(
            "format",
            format!(
                "unknown import format {format:?}; one of: {}",
                FORMATS.join(", ")
            ),
        ));
    }
    let given = req.path.as_deref().filter(|p| !p.is_empty());
    let path = match given {
        Some(p) => PathBuf::from(p),
        None => default_path(format, env).ok_or_else(|| {
            Error::invalid(
                "path",
                format!("{format}: give the path of the file or directory to import"),
            )
        })?,
    };
    let stdin = path.as_os_str() == "-";
    if !stdin && !path.exists() {
        let mut e = Error::invalid("path", format!("{} does not exist", path.display()))
            .detail("path", Value::from(path.display().to_string()));
        if given.is_none() {
            // The default place was looked at: say which and how to name another.
            e.message = format!("{format}: nothing at its default place {}", path.display());
            e = e.hint(format!(
                "give the path as an argument (memdir import {format} PATH){}",
                DEFAULT_VARS
                    .iter()
                    .find(|(f, _)| *f == format)
                    .map(|(_, v)| format!(" or set {v}"))
                    .unwrap_or_default()
            ));
        }
        return Err(e);
    }
    if stdin && format != "jsonl" {
        return Err(Error::invalid(
            "path",
            format!("{format} reads files: give a path, not stdin"),
        ));
    }
    let mut sink = Sink::new(memdir, req.dry_run, progress);
    match format {
        "jsonl" => jsonl::import(&path, &mut sink)?,
        "claude-code" => claude::import(&path, &mut sink)?,
        "codex" => codex::import(&path, &mut sink)?,
        "opencode" => opencode::import(&path, &mut sink)?,
        "local-memory" => local_memory::import(&path, &mut sink)?,
        "mcp-memory-rs" => mcp_rs::import(&path, &mut sink)?,
        "mcp-memory-jsonl" => mcp_jsonl::import(&path, &mut sink)?,
        f if notes::FORMATS.contains(&f) => notes::import(f, &path, &mut sink)?,
        _ => unreachable!("checked above"),
    }
    sink.flush()?;
    let r = sink.report;
    Ok(ImportResponse {
        ok: true,
        format: format.to_string(),
        path: path.display().to_string(),
        dry_run: req.dry_run,
        files: r.files,
        sessions: r.sessions.len(),
        chunks: r.chunks,
        existing: r.existing,
        categories: r.categories,
        notes: r.notes,
        skipped: r.skipped,
        flagged: r.flagged,
        bad_lines: r.bad_lines,
        replaced: r
            .replaced
            .into_iter()
            .filter(|(_, new_head)| *new_head)
            .map(|(name, _)| name)
            .collect(),
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Regular files under `root` (or `root` itself, when a file) whose name `keep` accepts,
/// sorted. Links are not followed: a link or a special file (FIFO, socket, device) under a name
/// `keep` accepts is left out and counted in `report` (`link`, `special_file`), so a run says
/// what it did not read.
pub fn find_files(root: &Path, report: &mut Report, keep: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    if root.is_file() {
        return vec![root.to_path_buf()];
    }
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .flatten()
    {
        let t = e.file_type();
        if t.is_dir() || !keep(e.path()) {
            continue;
        }
        if t.is_file() {
            out.push(e.into_path());
        } else if t.is_symlink() {
            report.skip("link");
        } else {
            report.skip("special_file");
        }
    }
    out.sort();
    out
}

/// A path relative to the source root, for metadata (never the home directory).
pub fn relative(root: &Path, file: &Path) -> String {
    let rel = if root.is_file() {
        file.file_name().map(Path::new).unwrap_or(file)
    } else {
        file.strip_prefix(root).unwrap_or(file)
    };
    rel.to_string_lossy().into_owned()
}

/// Where a read of a foreign file stands: the bytes consumed (the end of the last complete
/// line read) and the physical lines before that point (0-based numbers go on from there).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Position {
    pub offset: u64,
    pub line: usize,
}

/// Whether a line reader goes on after a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// Stop after this line (a deadline passed): it counts as consumed.
    Stop,
}

/// Reads a JSONL file written by someone else, calling `f(line number (0-based), text)` for
/// each complete line. A last line without its newline is being written: it is left for the
/// next run. Invalid UTF-8 becomes U+FFFD; a BOM and a trailing CR are dropped. A file that
/// has disappeared is skipped.
pub fn each_line(
    file: &Path,
    sink: &mut Sink<'_>,
    f: impl FnMut(&mut Sink<'_>, usize, &str) -> Result<()>,
) -> Result<()> {
    read_lines(file, sink, false, f)
}

/// Like [`each_line`], for a file its writer replaces whole rather than appends to: a last
/// line without its newline is read too.
pub fn each_line_whole(
    file: &Path,
    sink: &mut Sink<'_>,
    f: impl FnMut(&mut Sink<'_>, usize, &str) -> Result<()>,
) -> Result<()> {
    read_lines(file, sink, true, f)
}

fn read_lines(
    file: &Path,
    sink: &mut Sink<'_>,
    whole: bool,
    mut f: impl FnMut(&mut Sink<'_>, usize, &str) -> Result<()>,
) -> Result<()> {
    read_from(file, Position::default(), None, whole, sink, |s, n, t| {
        f(s, n, t).map(|_| Flow::Continue)
    })
    .map(|_| ())
}

/// [`each_line`] from `start` (a [`Position`] an earlier read returned) up to `end` bytes
/// (default: the file's length when it is opened, so a file that grows meanwhile is read to a
/// fixed point). Returns where it stopped: after the last complete line it handed to `f`, or
/// after the line for which `f` said [`Flow::Stop`]. Blank and oversized lines are consumed
/// without a call.
pub fn each_line_from(
    file: &Path,
    start: Position,
    end: Option<u64>,
    sink: &mut Sink<'_>,
    f: impl FnMut(&mut Sink<'_>, usize, &str) -> Result<Flow>,
) -> Result<Position> {
    read_from(file, start, end, false, sink, f)
}

/// [`each_line_from`]; with `whole`, a last line without its newline is read too.
fn read_from(
    file: &Path,
    start: Position,
    end: Option<u64>,
    whole: bool,
    sink: &mut Sink<'_>,
    mut f: impl FnMut(&mut Sink<'_>, usize, &str) -> Result<Flow>,
) -> Result<Position> {
    use std::io::Seek;
    let mut pos = start;
    let reader: Box<dyn Read> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        match std::fs::File::open(file) {
            Ok(mut fh) => {
                let len = fh.metadata().map(|md| md.len()).unwrap_or(0);
                let end = end.unwrap_or(len).min(len);
                if start.offset > 0 {
                    fh.seek(std::io::SeekFrom::Start(start.offset))
                        .map_err(|e| {
                            Error::invalid("path", format!("reading {}: {e}", file.display()))
                        })?;
                }
                sink.total += end.saturating_sub(start.offset);
                Box::new(fh.take(end.saturating_sub(start.offset)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                sink.report.skip("vanished_file");
                return Ok(pos);
            }
            Err(e) => {
                return Err(Error::invalid(
                    "path",
                    format!("cannot read {}: {e}", file.display()),
                ));
            }
        }
    };
    sink.report.files += 1;
    let mut r = std::io::BufReader::with_capacity(1 << 16, reader);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let got = r
            .by_ref()
            .take(MAX_LINE_BYTES)
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::invalid("path", format!("reading {}: {e}", file.display())))?;
        if got == 0 {
            return Ok(pos);
        }
        sink.advance(got as u64);
        if buf.last() != Some(&b'\n') {
            if got as u64 >= MAX_LINE_BYTES {
                // Longer than any line memdir reads: skip to its end.
                let mut rest = Vec::new();
                let more = r.read_until(b'\n', &mut rest).unwrap_or(0);
                if rest.last() != Some(&b'\n') {
                    // Its end is not written yet: the next run looks again.
                    sink.report.skip("unterminated_tail");
                    return Ok(pos);
                }
                sink.report.skip("oversized_line");
                pos.offset += (got + more) as u64;
                pos.line += 1;
                continue;
            }
            if !whole {
                sink.report.skip("unterminated_tail");
                return Ok(pos);
            }
            buf.push(b'\n');
        }
        let n = pos.line;
        pos.offset += got as u64;
        pos.line += 1;
        let mut line: &[u8] = &buf[..buf.len() - 1];
        if n == 0 {
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        line = line.strip_suffix(b"\r").unwrap_or(line);
        let text = String::from_utf8_lossy(line);
        if !text.trim().is_empty() && f(sink, n, &text)? == Flow::Stop {
            return Ok(pos);
        }
    }
}

/// Parses a line of JSON; a line cut inside a surrogate pair (a lone `\uD83D`, which
/// JavaScript writers can leave) is parsed again with the lone half replaced by U+FFFD.
pub fn parse_line(text: &str) -> Option<Value> {
    match serde_json::from_str(text) {
        Ok(v) => Some(v),
        Err(_) if text.contains("\\u") => serde_json::from_str(&fix_surrogates(text)).ok(),
        Err(_) => None,
    }
}

/// Replaces `\uXXXX` escapes of unpaired UTF-16 surrogates with `\uFFFD`.
fn fix_surrogates(text: &str) -> String {
    let b = text.as_bytes();
    let hex = |i: usize| -> Option<u32> {
        let s = text.get(i + 2..i + 6)?;
        u32::from_str_radix(s, 16).ok()
    };
    let is_esc = |i: usize| b.get(i) == Some(&b'\\') && b.get(i + 1) == Some(&b'u');
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'\\') {
            out.push_str("\\\\");
            i += 2;
            continue;
        }
        if is_esc(i)
            && let Some(u) = hex(i)
        {
            if (0xD800..0xDC00).contains(&u)
                && is_esc(i + 6)
                && hex(i + 6).is_some_and(|l| (0xDC00..0xE000).contains(&l))
            {
                out.push_str(&text[i..i + 12]);
                i += 12;
                continue;
            }
            if (0xD800..0xE000).contains(&u) {
                out.push_str("\\uFFFD");
                i += 6;
                continue;
            }
        }
        let c = text[i..]
            .chars()
            .next()
            .expect("invariant: i is a char boundary");
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// The last component of a working directory: the project name.
pub fn project_of(cwd: &str) -> String {
    let t = cwd.trim_end_matches(['/', '\\']);
    t.rsplit(['/', '\\']).next().unwrap_or("").to_string()
}

/// Content cut to the largest size memdir keeps, with a marker; `None` when it fits.
pub fn cap(content: &mut String) -> Option<usize> {
    if content.len() <= MAX_CONTENT_BYTES {
        return None;
    }
    let from = content.len();
    let mut end = MAX_CONTENT_BYTES;
    while !content.is_char_boundary(end) {
        end -= 1;
    }
    content.truncate(end);
    content.push_str("\n[… cut by memdir import]");
    Some(from)
}

/// A chunk of an import: content capped, metadata with its import record.
#[allow(clippy::too_many_arguments)]
pub fn chunk(
    session_id: String,
    project: &str,
    ts: Option<&str>,
    mut content: String,
    key: String,
    mut metadata: Value,
    import: Value,
) -> NewChunk {
    if let Some(from) = cap(&mut content) {
        metadata["truncated_from"] = json!(from);
    }
    metadata["import"] = import;
    NewChunk {
        session_id,
        content,
        project: (!project.is_empty()).then(|| project.to_string()),
        metadata: Some(metadata),
        ts: ts
            .filter(|t| memdir_store::clock::parse_time(t).is_some())
            .map(str::to_string),
        source_id: Some(key),
        supersedes: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let line = r#"{"a": "cut \ud83d", "b": "ok \ud83d\ude00", "c": "\\ud83d"}"#;
        assert!(serde_json::from_str::<Value>(line).is_err());
        let v = parse_line(line).unwrap();
        assert_eq!(v["a"], "cut \u{FFFD}");
        assert_eq!(v["b"], "ok 😀");
        assert_eq!(v["c"], "\\ud83d");
    }

    #[test]
    fn content_is_capped_on_a_char_boundary() {
        let mut s = "é".repeat(MAX_CONTENT_BYTES);
        let from = cap(&mut s).unwrap();
        assert_eq!(from, MAX_CONTENT_BYTES * 2);
        assert!(s.len() < MAX_CONTENT_BYTES + 64);
        let mut short = "x".to_string();
        assert_eq!(cap(&mut short), None);
    }

    #[test]
    fn projects_are_basenames() {
        assert_eq!(project_of("/home/dev/acme-widgets"), "acme-widgets");
        assert_eq!(project_of("/home/dev/acme-widgets/"), "acme-widgets");
        assert_eq!(project_of("C:\\src\\app"), "app");
    }
}
