//! The truth on disk: the layout of a memory directory, its codecs, the commit protocol,
//! recovery and the read side of every file kind.
//!
//! Architecture Invariant: this module knows nothing of SQLite, tantivy or tokio. Everything
//! it reads it reads from the files under the memory directory.

#![forbid(unsafe_code)]

pub mod clock;
pub mod codec;
pub mod env;
pub mod failpoint;
pub mod format;
pub mod fsx;
pub mod history;
pub mod lock;
pub mod model;
pub mod note;
pub mod recovery;
pub mod segment;
pub mod treehash;
pub mod txn;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::model::{CategoryName, HistoryEntry, SessionId, content_hash, decode_component};
use memdir_api::error::{IoContext, IoError};

/// The paths of one memory directory.
#[derive(Clone, Debug)]
pub struct Layout {
    pub root: PathBuf,
}

/// Contents of the `.gitignore` written by `init`.
pub const GITIGNORE: &str = "# memdir: local, derived state; never commit it.\n.memdir/\n";
/// Contents of the `.gitattributes` written by `init`.
pub const GITATTRIBUTES: &str = "# memdir: plain text with LF line endings on every platform.\n*.json text eol=lf\n*.jsonl text eol=lf\n";

impl Layout {
    /// The layout of the memory directory at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Layout { root: root.into() }
    }

    pub fn meta_dir(&self) -> PathBuf {
        self.root.join(".memdir")
    }
    pub fn staging(&self) -> PathBuf {
        self.meta_dir().join("staging")
    }
    pub fn index_dir(&self) -> PathBuf {
        self.meta_dir().join("index")
    }
    pub fn ledger_path(&self) -> PathBuf {
        self.meta_dir().join("ledger.db")
    }
    pub fn lock_path(&self) -> PathBuf {
        self.meta_dir().join("lock")
    }
    pub fn replica_path(&self) -> PathBuf {
        self.meta_dir().join("replica")
    }
    pub fn categories_dir(&self) -> PathBuf {
        self.root.join("categories")
    }
    pub fn history_root(&self) -> PathBuf {
        self.root.join("history")
    }
    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// `categories/<name>.json`, relative to the root.
    pub fn category_rel(name: &CategoryName) -> PathBuf {
        PathBuf::from("categories").join(format!("{}.json", name.file_stem()))
    }
    /// `history/<name>`, relative to the root.
    pub fn history_rel(name: &CategoryName) -> PathBuf {
        PathBuf::from("history").join(name.file_stem())
    }
    /// `sessions/<id>`, relative to the root.
    pub fn session_rel(id: &SessionId) -> PathBuf {
        PathBuf::from("sessions").join(id.dir_name())
    }
    /// `sessions/<id>/<replica>.jsonl`, relative to the root.
    pub fn segment_rel(id: &SessionId, replica: &str) -> PathBuf {
        Self::session_rel(id).join(format!("{replica}.jsonl"))
    }

    /// Whether the memory directory exists.
    pub fn exists(&self) -> bool {
        self.root.is_dir()
    }

    /// Whether the directory holds a store (or memdir state): an existing but empty directory
    /// is answered as empty without writing anything into it.
    pub fn holds_store(&self) -> bool {
        [
            self.meta_dir(),
            self.categories_dir(),
            self.history_root(),
            self.sessions_dir(),
            self.root.join(note::NOTES_DIR),
        ]
        .iter()
        .any(|d| d.is_dir())
    }

    /// Creates the directory skeleton; keeps whatever exists. Returns whether anything was new.
    pub fn init(&self) -> Result<bool, IoError> {
        let existed = self.root.join(".gitignore").exists() && self.staging().is_dir();
        for d in [
            self.categories_dir(),
            self.history_root(),
            self.sessions_dir(),
            self.staging(),
        ] {
            if !d.starts_with(self.meta_dir()) {
                fsx::check_no_links(&self.root, &d)?;
            }
            fsx::create_dir_durable(&d)?;
        }
        format::ensure(self)?;
        for (name, text) in [(".gitignore", GITIGNORE), (".gitattributes", GITATTRIBUTES)] {
            let p = self.root.join(name);
            // Whatever is there already (a file, or a link, even a dangling one) is the
            // user's: it is neither replaced nor written through.
            if fs::symlink_metadata(&p).is_err() {
                use std::io::Write;
                let mut f = match fsx::create_new(&p) {
                    Ok(f) => f,
                    // Another process creating the store at the same moment wrote it.
                    Err(e) if e.source.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(e),
                };
                f.write_all(text.as_bytes()).at("write", &p)?;
                // DURABILITY: the file and its directory entry, like every other write.
                f.sync_all().at("fsync", &p)?;
                fsx::sync_dir(&self.root)?;
            }
        }
        Ok(!existed)
    }
}

/// A category file as found on disk.
#[derive(Clone, Debug)]
pub struct CategoryFile {
    pub bytes: Vec<u8>,
    pub hash: String,
    /// The parsed content, or why it does not parse as a JSON object.
    pub content: Result<Value, String>,
    /// Whether `bytes` are known to be [`codec::to_pretty`] of the content (memdir wrote
    /// them); `false` when unknown (a file parsed from disk may be a hand edit in any layout).
    pub canonical: bool,
    /// The chaining values of the bytes' leaves when known ([`treehash`]): the next version's
    /// hash reuses those before its first changed byte.
    pub leaves: Option<treehash::Leaves>,
}

/// Reads `categories/<name>.json`; `None` when absent.
pub fn read_category(
    layout: &Layout,
    name: &CategoryName,
) -> Result<Option<CategoryFile>, IoError> {
    let path = layout.root.join(Layout::category_rel(name));
    match fsx::read(&path, fsx::MAX_JSON_FILE) {
        Ok(Some(bytes)) => Ok(Some(parse_category(bytes))),
        Ok(None) => Ok(None),
        // A link, a directory, a FIFO, an unreadable or oversized file: broken on its own,
        // reported as corrupt and never written over.
        Err(e) => Ok(Some(CategoryFile {
            hash: content_hash(b""),
            bytes: Vec::new(),
            content: Err(format!("cannot be read: {}", e.source)),
            canonical: false,
            leaves: None,
        })),
    }
}

/// Parses category bytes.
pub fn parse_category(bytes: Vec<u8>) -> CategoryFile {
    let hash = content_hash(&bytes);
    parse_category_hashed(bytes, hash)
}

fn parse_category_hashed(bytes: Vec<u8>, hash: String) -> CategoryFile {
    let content = match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) if codec::depth(&v) > codec::MAX_DEPTH => Err(format!(
            "nested deeper than {} levels, the most memdir keeps (its history entry could not be read back)",
            codec::MAX_DEPTH
        )),
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("the top level is not a JSON object".to_string()),
        Err(e) => Err(format!("not valid JSON: {e}")),
    };
    CategoryFile {
        bytes,
        hash,
        content,
        canonical: false,
        leaves: None,
    }
}

/// Names of the categories with a current file, sorted; files whose names are not canonical
/// encodings are returned separately.
pub fn list_category_files(layout: &Layout) -> Result<(Vec<CategoryName>, Vec<PathBuf>), IoError> {
    let dir = layout.categories_dir();
    let mut names = Vec::new();
    let mut strays = Vec::new();
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((names, strays)),
        Err(e) => {
            return Err(IoError {
                op: "list",
                path: dir,
                source: e,
            });
        }
    };
    for entry in rd {
        let entry = entry.at("list", &dir)?;
        let file = entry.file_name().to_string_lossy().into_owned();
        let name = file
            .strip_suffix(".json")
            .and_then(decode_component)
            .and_then(|n| CategoryName::new(&n).ok());
        // A link or special file under a category's name is that category, broken: reading
        // it reports it corrupt. A directory is a stray.
        match name {
            Some(n) if fsx::entry_kind(&entry) != fsx::EntryKind::Dir => names.push(n),
            _ => strays.push(entry.path()),
        }
    }
    names.sort();
    Ok((names, strays))
}

/// Names that have a history directory (current or deleted categories), sorted.
pub fn list_history_names(layout: &Layout) -> Result<Vec<CategoryName>, IoError> {
    let dir = layout.history_root();
    let mut names = Vec::new();
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(names),
        Err(e) => {
            return Err(IoError {
                op: "list",
                path: dir,
                source: e,
            });
        }
    };
    for entry in rd {
        let entry = entry.at("list", &dir)?;
        // Links are not followed (verify-store reports them).
        if fsx::entry_kind(&entry) != fsx::EntryKind::Dir {
            continue;
        }
        if let Some(n) = decode_component(&entry.file_name().to_string_lossy())
            .and_then(|n| CategoryName::new(&n).ok())
        {
            names.push(n);
        }
    }
    names.sort();
    Ok(names)
}

/// A history file as found on disk.
#[derive(Debug)]
pub struct HistoryFile {
    /// The id from the file name, `<hlc>_<replica>`.
    pub id: String,
    pub path: PathBuf,
    pub entry: Result<HistoryEntry, String>,
    /// Whether the file holds a patch that [`history::read_all`] resolved.
    pub patched: bool,
}

/// History file ids of a category, oldest first (ids sort as time).
pub fn list_history_ids(layout: &Layout, name: &CategoryName) -> Result<Vec<String>, IoError> {
    history_ids_in(&layout.root.join(Layout::history_rel(name)))
}

/// The ids of the history files in `dir` (a category's or a note's), oldest first; none when
/// it does not exist.
pub fn history_ids_in(dir: &Path) -> Result<Vec<String>, IoError> {
    let mut ids = Vec::new();
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ids),
        Err(e) => return Err(e).at("list", dir),
    };
    for entry in rd {
        let entry = entry.at("list", dir)?;
        if let Some(id) = entry.file_name().to_string_lossy().strip_suffix(".json") {
            ids.push(id.to_string());
        }
    }
    ids.sort();
    Ok(ids)
}

/// Reads one history entry by id.
pub fn read_history(
    layout: &Layout,
    name: &CategoryName,
    id: &str,
) -> Result<HistoryFile, IoError> {
    read_history_in(&layout.root.join(Layout::history_rel(name)), id)
}

/// Reads one history entry by id from a category's history directory `dir`.
pub fn read_history_in(dir: &Path, id: &str) -> Result<HistoryFile, IoError> {
    let path = dir.join(format!("{id}.json"));
    let entry = match fsx::read(&path, fsx::MAX_JSON_FILE) {
        Ok(Some(bytes)) => read_history_bytes(&bytes),
        Ok(None) => {
            return Err(IoError {
                op: "read",
                path,
                source: std::io::ErrorKind::NotFound.into(),
            });
        }
        Err(e) => Err(format!("cannot be read: {}", e.source)),
    };
    let entry = entry.and_then(|e| {
        if e.id == id {
            Ok(e)
        } else {
            Err(format!("id {:?} does not match the file name", e.id))
        }
    });
    Ok(HistoryFile {
        id: id.to_string(),
        path,
        entry,
        patched: false,
    })
}

/// Parses a history entry.
pub fn read_history_bytes(bytes: &[u8]) -> Result<HistoryEntry, String> {
    serde_json::from_slice::<HistoryEntry>(bytes).map_err(|e| e.to_string())
}

/// The newest readable history entry of a category: well-formed, and for a patch, with a
/// chain that resolves. A patch that cannot be resolved here (its base forgotten or missing)
/// is passed over like a malformed file, so its hash is never taken for the file's: the file
/// would otherwise look changed by hand and be adopted over that version.
pub fn history_head(layout: &Layout, name: &CategoryName) -> Result<Option<HistoryEntry>, IoError> {
    let dir = layout.root.join(Layout::history_rel(name));
    for id in list_history_ids(layout, name)?.iter().rev() {
        if let Ok(e) = read_history(layout, name, id)?.entry
            && (e.patch.is_none() || history::chain_intact(&dir, id))
        {
            return Ok(Some(e));
        }
    }
    Ok(None)
}

/// One segment file of a session.
#[derive(Clone, Debug)]
pub struct SegmentFile {
    /// Path relative to the root.
    pub rel: PathBuf,
    pub replica: String,
    pub len: u64,
    pub mtime_ns: i64,
}

/// Session directories: (session id decoded from the directory name, relative path).
pub fn list_session_dirs(layout: &Layout) -> Result<Vec<(String, PathBuf)>, IoError> {
    let dir = layout.sessions_dir();
    let mut out = Vec::new();
    // A `sessions/` that is a link is not followed (verify-store reports it); it breaks only
    // the session memory it stands for, not every listing of the store.
    if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Ok(out);
    }
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => {
            return Err(IoError {
                op: "list",
                path: dir,
                source: e,
            });
        }
    };
    for entry in rd {
        let entry = entry.at("list", &dir)?;
        // Links are not followed (verify-store reports them).
        if fsx::entry_kind(&entry) != fsx::EntryKind::Dir {
            continue;
        }
        let file = entry.file_name().to_string_lossy().into_owned();
        if let Some(id) = decode_component(&file) {
            out.push((id, PathBuf::from("sessions").join(file)));
        }
    }
    out.sort();
    Ok(out)
}

/// Segment files of one session directory: `<replica>.jsonl` and rolled-over
/// `<replica>.<n>.jsonl`, sorted by name.
pub fn list_segments(layout: &Layout, session_rel: &Path) -> Result<Vec<SegmentFile>, IoError> {
    let dir = layout.root.join(session_rel);
    // A session directory that is a link is never read through (see `fsx::read_under`).
    fsx::check_dir_under(&layout.root, &dir)?;
    let mut out = Vec::new();
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => {
            return Err(IoError {
                op: "list",
                path: dir,
                source: e,
            });
        }
    };
    for entry in rd {
        let entry = entry.at("list", &dir)?;
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = file.strip_suffix(".jsonl") else {
            continue;
        };
        // Only regular files are segments: a directory, FIFO, device or link under a
        // segment's name is skipped here and reported by verify-store.
        if fsx::entry_kind(&entry) != fsx::EntryKind::File {
            continue;
        }
        let replica = match stem.rsplit_once('.') {
            Some((r, n)) if n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty() => r,
            _ => stem,
        };
        let meta = entry.metadata().at("stat", &entry.path())?;
        out.push(SegmentFile {
            rel: session_rel.join(&file),
            replica: replica.to_string(),
            len: meta.len(),
            mtime_ns: mtime_ns(&meta),
        });
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

/// The modification time in nanoseconds (0 where the platform has none).
pub fn modified_ns(meta: &fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// A change stamp in nanoseconds: the later of the modification and the status-change time.
/// Tools can set a file's mtime back after an edit, but not its ctime, so a cache keyed by
/// size and this stamp notices every edit.
pub fn mtime_ns(meta: &fs::Metadata) -> i64 {
    let mtime = modified_ns(meta);
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let ctime = meta
            .ctime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.ctime_nsec());
        mtime.max(ctime)
    }
    #[cfg(not(unix))]
    mtime
}

/// Size and mtime of a file, `None` when absent.
pub fn stat(path: &Path) -> Result<Option<(u64, i64)>, IoError> {
    match fs::metadata(path) {
        Ok(m) => Ok(Some((m.len(), mtime_ns(&m)))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(IoError {
            op: "stat",
            path: path.to_path_buf(),
            source: e,
        }),
    }
}
