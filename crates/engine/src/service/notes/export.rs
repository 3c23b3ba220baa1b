//! `memdir notes export DIR`: notes written out as plain files, for a client that reads its
//! memory from a directory of its own.
//!
//! A file is written only when it is missing, already holds the note's text, or still holds
//! what the last export wrote there (its hash is remembered in `.memdir/exports.json`, by
//! directory): a file the client changed since is never overwritten but reported as a
//! conflict. Files are written whole (a temporary file renamed over the target), and no link
//! under the directory is followed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use memdir_api::error::{Error, IoContext, Result};
use memdir_api::{ExportConflict, NotesExportRequest, NotesExportResponse};
use memdir_store::model::content_hash;
use memdir_store::note::{self, NotePath};
use memdir_store::{codec, fsx};

use super::folder_of;
use crate::service::Notes;

/// What each export directory was last given: file (relative) → hash.
type Exports = BTreeMap<String, BTreeMap<String, String>>;

fn exports_path(meta: &Path) -> PathBuf {
    meta.join("exports.json")
}

fn write_whole(root: &Path, target: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(parent) = target.parent() {
        fsx::check_no_links(root, parent)?;
        std::fs::create_dir_all(parent).at("create", parent)?;
    }
    fsx::check_no_links(root, target)?;
    let tmp = target.with_file_name(format!(
        ".{}.memdir-tmp",
        target
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    fsx::write_synced(&tmp, bytes)?;
    std::fs::rename(&tmp, target).at("rename", target)?;
    Ok(())
}

/// `p` with `.` and `..` components resolved by their names (no link is followed).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `p` with its longest existing ancestor resolved through links (where it really is).
fn nearest_real(p: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut cur = p.to_path_buf();
    loop {
        if let Ok(real) = std::fs::canonicalize(&cur) {
            return rest.iter().rev().fold(real, |acc: PathBuf, c| acc.join(c));
        }
        match (cur.file_name().map(|n| n.to_os_string()), cur.parent()) {
            (Some(n), Some(parent)) => {
                rest.push(n);
                cur = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}

impl Notes<'_> {
    /// Writes the notes (of a folder) into `dir`, never over a file changed there since.
    pub fn export(&self, req: &NotesExportRequest) -> Result<NotesExportResponse> {
        let folder = folder_of(req.folder.as_deref().unwrap_or(""))?;
        if req.directory.trim().is_empty() {
            return Err(Error::invalid(
                "directory",
                "give the directory to export into",
            ));
        }
        let dir =
            lexical(&std::path::absolute(&req.directory).at("resolve", Path::new(&req.directory))?);
        let layout = self.layout();
        let root = std::fs::canonicalize(&layout.root).unwrap_or_else(|_| layout.root.clone());
        let real = nearest_real(&dir);
        if dir.starts_with(lexical(&layout.root)) || real.starts_with(&root) {
            return Err(Error::invalid(
                "dir",
                "export into a directory outside the memory directory",
            ));
        }
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| !m.is_dir()) {
            return Err(Error::invalid(
                "directory",
                format!("{} is not a directory", dir.display()),
            ));
        }
        let key = dir.display().to_string();
        let mut exports: Exports = std::fs::read(exports_path(&layout.meta_dir()))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let last = exports.remove(&key).unwrap_or_default();
        let mut now = BTreeMap::new();
        let mut out = NotesExportResponse {
            dir: key.clone(),
            written: Vec::new(),
            unchanged: 0,
            conflicts: Vec::new(),
            dry_run: req.dry_run,
        };
        for l in note::list(layout)?.0 {
            let rel = match folder.as_str() {
                "" => l.path.clone(),
                f => match l.path.strip_prefix(&format!("{f}/")) {
                    Some(r) => r.to_string(),
                    None => continue,
                },
            };
            let Ok(p) = NotePath::new(&l.path) else {
                continue;
            };
            let conflict = |reason: &str| ExportConflict {
                path: l.path.clone(),
                reason: reason.to_string(),
            };
            let Some(Ok(text)) = note::read(layout, &p)?.map(|f| f.text) else {
                out.conflicts
                    .push(conflict("the note cannot be read in the store"));
                continue;
            };
            let hash = content_hash(text.as_bytes());
            let target = rel.split('/').fold(dir.clone(), |d, c| d.join(c));
            let there = match std::fs::symlink_metadata(&target) {
                Err(_) => None,
                Ok(m) if m.is_file() => {
                    Some(content_hash(&std::fs::read(&target).at("read", &target)?))
                }
                Ok(_) => {
                    out.conflicts
                        .push(conflict("a link, folder or special file stands there"));
                    continue;
                }
            };
            match there {
                Some(h) if h == hash => {
                    out.unchanged += 1;
                    now.insert(rel, hash);
                }
                Some(h) if last.get(&rel) != Some(&h) => {
                    out.conflicts.push(conflict(if last.contains_key(&rel) {
                        "the file changed there since the last export"
                    } else {
                        "a file no export wrote stands there"
                    }));
                    if let Some(prev) = last.get(&rel) {
                        now.insert(rel, prev.clone());
                    }
                }
                _ => {
                    if !req.dry_run {
                        write_whole(&dir, &target, text.as_bytes())?;
                    }
                    out.written.push(l.path.clone());
                    now.insert(rel, hash);
                }
            }
        }
        if !req.dry_run {
            std::fs::create_dir_all(&dir).at("create", &dir)?;
            exports.insert(key, now);
            let tmp = layout.meta_dir().join("exports.json.tmp");
            fsx::write_synced(
                &tmp,
                &codec::to_pretty(&serde_json::to_value(&exports).unwrap_or_default()),
            )?;
            std::fs::rename(&tmp, exports_path(&layout.meta_dir())).at("rename", &tmp)?;
        }
        Ok(out)
    }
}
