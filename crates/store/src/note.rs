//! Notes on disk: the text files under `notes/` and their versions under `note-history/`.
//!
//! A note is a plain text file (Markdown by default) at `notes/<folder>/<name>`, its path
//! kept as written so that people and their tools find `notes/MEMORY.md` where they expect it.
//! Its versions are write-once history entries (the shape of a category's, with the text as a
//! JSON string in `content`) in one flat directory per note,
//! `note-history/<the path encoded as one component>/<hlc>_<replica>.json`.
//!
//! Names are checked so that a path is the same file on every platform: no traversal, no
//! hidden components, no characters Windows refuses, no names it reserves. Two paths that
//! differ only in case are refused at creation ([`case_twin`]), since they would share a file
//! on a case-insensitive file system.

use std::fs;
use std::path::{Path, PathBuf};

use crate::model::{HistoryEntry, content_hash, decode_component, encode_component};
use crate::{HistoryFile, Layout, fsx};
use memdir_api::error::{Error, IoContext, IoError};

/// The directory of the notes, relative to the root.
pub const NOTES_DIR: &str = "notes";
/// The directory of the notes' versions, relative to the root.
pub const HISTORY_DIR: &str = "note-history";
/// Most components of a note's path (folders and the file).
pub const MAX_DEPTH: usize = 8;
/// Longest component, in characters.
pub const MAX_COMPONENT_CHARS: usize = 128;
/// Longest path, in bytes.
pub const MAX_PATH_BYTES: usize = 512;
/// Largest note memdir writes (a larger file placed by hand is still read and adopted, up to
/// [`MAX_READ`]).
pub const MAX_NOTE_BYTES: usize = 256 * 1024;
/// Largest note file memdir reads.
pub const MAX_READ: u64 = 16 * 1024 * 1024;

/// The path of a note below `notes/`: 1 to [`MAX_DEPTH`] components joined by `/`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct NotePath(String);

const FORBIDDEN: &[char] = &['\\', ':', '*', '?', '"', '<', '>', '|'];

fn component_error(path: &str, part: &str, why: &str) -> Error {
    Error::invalid(
        "path",
        format!("note path {path:?}: the component {part:?} {why}"),
    )
    .hint("use paths such as MEMORY.md or projects/orbital.md")
}

fn check_component(path: &str, part: &str) -> Result<(), Error> {
    if part.is_empty() {
        return Err(Error::invalid(
            "path",
            format!(
                "note path {path:?} has an empty component (a leading, trailing or double '/')"
            ),
        )
        .hint("use paths such as MEMORY.md or projects/orbital.md"));
    }
    let chars = part.chars().count();
    if chars > MAX_COMPONENT_CHARS {
        return Err(component_error(
            path,
            part,
            &format!("is {chars} characters long; the limit is {MAX_COMPONENT_CHARS}"),
        ));
    }
    if part.starts_with('.') {
        return Err(component_error(
            path,
            part,
            "starts with '.' (no '..', no hidden files)",
        ));
    }
    if let Some(c) = part
        .chars()
        .find(|c| c.is_control() || FORBIDDEN.contains(c))
    {
        return Err(component_error(
            path,
            part,
            &format!("contains {c:?}, which not every file system allows"),
        ));
    }
    if part.ends_with('.') || part.ends_with(' ') || part.starts_with(' ') {
        return Err(component_error(
            path,
            part,
            "starts with a space or ends with a space or '.'",
        ));
    }
    let stem = part.split('.').next().unwrap_or("").to_ascii_lowercase();
    let reserved = matches!(stem.as_str(), "con" | "prn" | "aux" | "nul")
        || ((stem.starts_with("com") || stem.starts_with("lpt"))
            && stem.len() == 4
            && stem.as_bytes()[3].is_ascii_digit());
    if reserved {
        return Err(component_error(path, part, "is a name Windows reserves"));
    }
    Ok(())
}

impl NotePath {
    /// Validates `path` (`projects/orbital.md`; a leading `/` is not part of it).
    pub fn new(path: &str) -> Result<Self, Error> {
        if path.len() > MAX_PATH_BYTES {
            return Err(Error::invalid(
                "path",
                format!(
                    "note path is {} bytes long; the limit is {MAX_PATH_BYTES}",
                    path.len()
                ),
            ));
        }
        let parts: Vec<&str> = path.split('/').collect();
        if parts.len() > MAX_DEPTH {
            return Err(Error::invalid(
                "path",
                format!(
                    "note path {path:?} has {} components; the limit is {MAX_DEPTH}",
                    parts.len()
                ),
            ));
        }
        for part in &parts {
            check_component(path, part)?;
        }
        let encoded = encode_component(path).len();
        if encoded > 255 {
            return Err(Error::invalid(
                "path",
                format!(
                    "note path {path:?} is {encoded} bytes once encoded as its history directory's name; the limit is 255 (upper-case and non-ASCII characters take 3 bytes per byte)"
                ),
            )
            .hint("use a shorter path"));
        }
        Ok(NotePath(path.to_string()))
    }

    /// The path as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its components.
    pub fn parts(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }

    /// The folder holding it (`""` at the top).
    pub fn folder(&self) -> &str {
        self.0.rsplit_once('/').map_or("", |(f, _)| f)
    }

    /// The file name.
    pub fn file_name(&self) -> &str {
        self.0.rsplit_once('/').map_or(self.0.as_str(), |(_, n)| n)
    }

    /// `notes/<path>`, relative to the root.
    pub fn rel(&self) -> PathBuf {
        let mut p = PathBuf::from(NOTES_DIR);
        for part in self.parts() {
            p.push(part);
        }
        p
    }

    /// `note-history/<encoded path>`, relative to the root.
    pub fn history_rel(&self) -> PathBuf {
        PathBuf::from(HISTORY_DIR).join(encode_component(&self.0))
    }
}

impl std::fmt::Display for NotePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A note file as found on disk.
#[derive(Clone, Debug)]
pub struct NoteFile {
    pub bytes: Vec<u8>,
    pub hash: String,
    /// Its text, or why it is not a readable note (not UTF-8, a link, a directory, too large).
    pub text: Result<String, String>,
}

/// Reads `notes/<path>`; `None` when absent.
pub fn read(layout: &Layout, path: &NotePath) -> Result<Option<NoteFile>, IoError> {
    let full = layout.root.join(path.rel());
    match fsx::check_no_links(&layout.root, &full) {
        Ok(()) => {}
        // A file where a folder of the path would be: no note there.
        Err(e) if e.source.kind() == std::io::ErrorKind::NotADirectory => return Ok(None),
        Err(e) => {
            return Ok(Some(NoteFile {
                bytes: Vec::new(),
                hash: content_hash(b""),
                text: Err(format!("cannot be read: {}", e.source)),
            }));
        }
    }
    match fsx::read(&full, MAX_READ) {
        Ok(Some(bytes)) => {
            let hash = content_hash(&bytes);
            let text =
                String::from_utf8(bytes.clone()).map_err(|e| format!("is not UTF-8 text: {e}"));
            Ok(Some(NoteFile { bytes, hash, text }))
        }
        Ok(None) => Ok(None),
        Err(e)
            if matches!(
                e.source.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(None)
        }
        Err(e) => Ok(Some(NoteFile {
            bytes: Vec::new(),
            hash: content_hash(b""),
            text: Err(format!("cannot be read: {}", e.source)),
        })),
    }
}

/// A file or folder found under `notes/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// Its path below `notes/` (a folder's without a trailing `/`).
    pub path: String,
    pub dir: bool,
    pub len: u64,
    /// Its change stamp (`crate::mtime_ns`: the later of modification and status change).
    pub mtime_ns: i64,
}

/// Every note file, sorted by path, with entries whose names are not valid note paths (or
/// links and special files) returned separately. Hidden entries (a leading `.`) are skipped.
pub fn list(layout: &Layout) -> Result<(Vec<Listed>, Vec<PathBuf>), IoError> {
    let mut found = Vec::new();
    let mut strays = Vec::new();
    walk(
        &layout.root.join(NOTES_DIR),
        "",
        &mut found,
        &mut strays,
        usize::MAX,
        true,
    )?;
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((found, strays))
}

/// The entries of one folder (`""`: the top), `depth` levels deep, folders included, sorted.
pub fn list_folder(layout: &Layout, folder: &str, depth: usize) -> Result<Vec<Listed>, IoError> {
    let mut dir = layout.root.join(NOTES_DIR);
    if !folder.is_empty() {
        for part in folder.split('/') {
            dir.push(part);
        }
    }
    let mut found = Vec::new();
    let mut strays = Vec::new();
    walk(&dir, folder, &mut found, &mut strays, depth, false)?;
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

/// The entries under `dir` (named `prefix/...`), `depth` levels deep; with `files_only`
/// folders are walked but not listed.
fn walk(
    dir: &Path,
    prefix: &str,
    found: &mut Vec<Listed>,
    strays: &mut Vec<PathBuf>,
    depth: usize,
    files_only: bool,
) -> Result<(), IoError> {
    if depth == 0 || !fsx::is_real_dir(dir) {
        return Ok(());
    }
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).at("list", dir),
    };
    for entry in rd {
        let entry = entry.at("list", dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let kind = fsx::entry_kind(&entry);
        if NotePath::new(&path).is_err() || kind == fsx::EntryKind::Other {
            strays.push(entry.path());
            continue;
        }
        let meta = entry.metadata().at("stat", &entry.path())?;
        let dir_entry = kind == fsx::EntryKind::Dir;
        if !dir_entry || !files_only {
            found.push(Listed {
                path: path.clone(),
                dir: dir_entry,
                len: if dir_entry { 0 } else { meta.len() },
                mtime_ns: crate::mtime_ns(&meta),
            });
        }
        if dir_entry {
            walk(
                &entry.path(),
                &path,
                found,
                strays,
                depth.saturating_sub(1),
                files_only,
            )?;
        }
    }
    Ok(())
}

/// A note (or folder) other than `path` whose path differs from it only in case, if any: two
/// such files would be one on a case-insensitive file system.
pub fn case_twin(layout: &Layout, path: &NotePath) -> Result<Option<String>, IoError> {
    let mut dir = layout.root.join(NOTES_DIR);
    let mut so_far = String::new();
    for part in path.parts() {
        let rd = match fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Ok(None),
            Err(e) => return Err(e).at("list", &dir),
        };
        let lower = part.to_lowercase();
        for entry in rd {
            let entry = entry.at("list", &dir)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name != part && name.to_lowercase() == lower {
                let twin = if so_far.is_empty() {
                    name
                } else {
                    format!("{so_far}/{name}")
                };
                return Ok(Some(twin));
            }
        }
        if !so_far.is_empty() {
            so_far.push('/');
        }
        so_far.push_str(part);
        dir.push(part);
    }
    Ok(None)
}

/// The paths with a history directory (current and deleted notes), sorted; undecodable
/// directory names are skipped (`verify-store` reports them).
pub fn history_paths(layout: &Layout) -> Result<Vec<NotePath>, IoError> {
    let dir = layout.root.join(HISTORY_DIR);
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).at("list", &dir),
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.at("list", &dir)?;
        if fsx::entry_kind(&entry) != fsx::EntryKind::Dir {
            continue;
        }
        if let Some(p) = decode_component(&entry.file_name().to_string_lossy())
            .and_then(|p| NotePath::new(&p).ok())
        {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// The ids of a note's history files, oldest first.
pub fn history_ids(layout: &Layout, path: &NotePath) -> Result<Vec<String>, IoError> {
    crate::history_ids_in(&layout.root.join(path.history_rel()))
}

/// Every history file of a note, oldest first (a malformed one carries its error).
pub fn history(layout: &Layout, path: &NotePath) -> Result<Vec<HistoryFile>, IoError> {
    let dir = layout.root.join(path.history_rel());
    history_ids(layout, path)?
        .iter()
        .map(|id| crate::read_history_in(&dir, id))
        .collect()
}

/// The text of a version (`None` for a tombstone or a forgotten version).
pub fn entry_text(e: &HistoryEntry) -> Option<&str> {
    e.content.as_str()
}

/// The newest readable version of a note.
pub fn head(layout: &Layout, path: &NotePath) -> Result<Option<HistoryEntry>, IoError> {
    let dir = layout.root.join(path.history_rel());
    for id in history_ids(layout, path)?.iter().rev() {
        if let Ok(e) = crate::read_history_in(&dir, id)?.entry {
            return Ok(Some(e));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_pass_and_keep_their_spelling() {
        for p in [
            "MEMORY.md",
            "projects/orbital.md",
            "a/b/c/d/e/f/g/h.md",
            "Über uns.md",
        ] {
            let n = NotePath::new(p).unwrap();
            assert_eq!(n.as_str(), p);
        }
        let n = NotePath::new("projects/orbital.md").unwrap();
        assert_eq!(n.rel(), PathBuf::from("notes/projects/orbital.md"));
        assert_eq!(n.folder(), "projects");
        assert_eq!(n.file_name(), "orbital.md");
        assert_eq!(
            n.history_rel(),
            PathBuf::from("note-history/projects~2Forbital.md")
        );
    }

    #[test]
    fn hostile_paths_are_refused() {
        for p in [
            "",
            "/abs.md",
            "a//b.md",
            "a/",
            "../x.md",
            "a/../b.md",
            "./a.md",
            ".hidden.md",
            "a\\b.md",
            "c:x.md",
            "a\u{0}b",
            "a\nb.md",
            "con.md",
            "a/nul",
            "trailing.",
            " lead.md",
            "a/b/c/d/e/f/g/h/i.md",
        ] {
            assert!(NotePath::new(p).is_err(), "{p:?} passed");
        }
        assert!(NotePath::new(&"x".repeat(129)).is_err());
        assert!(NotePath::new(&format!("{}y.md", "x/".repeat(7))).is_ok());
    }
}
