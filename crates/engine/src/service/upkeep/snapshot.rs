//! Snapshots: a verified copy of the truth files, and the way back from one.
//!
//! `snapshot DEST` copies memdir's files (categories, history, sessions, conflict records, the
//! format file, `.gitignore`, `.gitattributes`; not `.memdir/`, not a `.git/` that sync uses,
//! not other files a user keeps beside them) while it holds the store's write lock, so no
//! write lands halfway through the copy: the copy is one state the store was in. The copy is
//! built in a hidden sibling of DEST, described by `memdir-snapshot.json` (every file's path,
//! size and blake3 hash), read back and checked against it, made durable, and only then
//! renamed to DEST. Derived state (ledger, index, replica id) is not copied: it is rebuilt.
//!
//! A link or a special file in memdir's places is neither followed nor copied: the snapshot
//! goes on without it and names it (`skipped`).
//!
//! `restore-snapshot SRC` checks SRC against its manifest first (every file listed, present,
//! of its size and hash, and nothing else anywhere in SRC: no unlisted file, link, special file
//! or directory, `.memdir/` included) and refuses it otherwise, changing nothing. It then
//! copies SRC beside the store, checks the copy again, and under the store's lock renames the
//! current store aside to `<dir>.before-restore-<time>` (kept, never deleted: the response
//! names it) and the copy into its place.
use crate::service::Upkeep;

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use memdir_api::error::{Error, ErrorKind, IoContext, Result};
use memdir_api::{
    RestoreSnapshotRequest, RestoreSnapshotResponse, SnapshotRequest, SnapshotResponse,
};
use memdir_store::clock;
use memdir_store::model::content_hash;
use memdir_store::{fsx, txn};

/// The manifest's file name inside a snapshot.
pub const MANIFEST: &str = "memdir-snapshot.json";

/// The snapshot format this memdir writes and reads.
const SNAPSHOT_FORMAT: u64 = 1;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    snapshot_format: u64,
    store_format: u64,
    created: String,
    files: Vec<ManifestFile>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    path: String,
    size: u64,
    blake3: String,
}

/// A path inside a store that a snapshot may hold: relative, plain components, and in one of
/// the places memdir keeps its truth.
fn allowed(rel: &str) -> bool {
    let p = Path::new(rel);
    let plain = !rel.is_empty()
        && !rel.contains('\\')
        && p.components().all(|c| matches!(c, Component::Normal(_)));
    let top = rel.split('/').next().unwrap_or("");
    plain
        && (matches!(
            top,
            "categories" | "history" | "sessions" | "conflicts" | "notes" | "note-history"
        ) && rel.contains('/')
            || matches!(rel, "memdir.json" | ".gitignore" | ".gitattributes"))
}

/// The truth files under a store's root, and what is skipped there.
#[derive(Debug, Default, PartialEq)]
struct Truth {
    /// Regular files, relative to the root, sorted.
    files: Vec<String>,
    /// Links and special files in memdir's places, relative to the root, sorted: never
    /// followed, never copied.
    skipped: Vec<String>,
}

/// The truth files under `root`. What lies outside memdir's places (`.memdir/`, a `.git/` that
/// sync uses, a file the user keeps beside the memory) is not memory and is not copied; a link
/// or special file in memdir's places (a linked `sessions/`, a FIFO named like a segment) is
/// skipped and named, so one such entry does not stop the copy of every other file.
fn truth_files(root: &Path) -> Result<Truth> {
    let mut out = Truth::default();
    for e in walkdir::WalkDir::new(root)
        .min_depth(1)
        .follow_links(false)
        .into_iter()
        .filter_entry(|e| {
            !(e.depth() == 1 && (e.file_name() == ".memdir" || e.file_name() == ".git"))
        })
    {
        let e = e.map_err(|e| {
            Error::new(
                ErrorKind::Unavailable,
                format!("cannot list {}: {e}", root.display()),
            )
        })?;
        let t = e.file_type();
        let rel = relative(root, e.path());
        if t.is_dir() || rel == MANIFEST {
            continue;
        }
        let place = matches!(
            rel.as_str(),
            "categories" | "history" | "sessions" | "conflicts" | "notes" | "note-history"
        );
        if !t.is_file() && (allowed(&rel) || place) {
            out.skipped.push(rel);
        } else if t.is_file() && allowed(&rel) {
            out.files.push(rel);
        }
    }
    out.files.sort();
    out.skipped.sort();
    Ok(out)
}

/// `path` relative to `root`, as text.
fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// Every entry of a snapshot directory that is not the manifest, a file it lists or a
/// directory holding one: the first few, sorted.
fn unlisted(dir: &Path, listed: &std::collections::BTreeSet<String>) -> Result<Vec<String>> {
    let parents: std::collections::BTreeSet<&Path> = listed
        .iter()
        .flat_map(|f| Path::new(f).ancestors().skip(1))
        .collect();
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir)
        .min_depth(1)
        .follow_links(false)
        .sort_by_file_name()
    {
        let e = e.map_err(|e| {
            Error::new(
                ErrorKind::Unavailable,
                format!("cannot list {}: {e}", dir.display()),
            )
        })?;
        let rel = relative(dir, e.path());
        let expected = if e.file_type().is_dir() {
            parents.contains(Path::new(&rel))
        } else {
            e.file_type().is_file() && (rel == MANIFEST || listed.contains(&rel))
        };
        if !expected {
            out.push(rel);
            if out.len() == 10 {
                break;
            }
        }
    }
    Ok(out)
}

/// Reads a snapshot's manifest and checks every file against it; returns the manifest.
fn check_snapshot(dir: &Path) -> Result<Manifest> {
    let bad = |why: String| {
        Error::new(
            ErrorKind::Corrupt,
            format!(
                "{} is not an intact memdir snapshot: {why}; nothing was changed",
                dir.display()
            ),
        )
        .detail("snapshot", Value::from(dir.display().to_string()))
    };
    if !dir.is_dir() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("{} is not a directory", dir.display()),
        )
        .field("src"));
    }
    let path = dir.join(MANIFEST);
    let bytes =
        fsx::read(&path, 64 * 1024 * 1024)?.ok_or_else(|| bad(format!("it has no {MANIFEST}")))?;
    let m: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| bad(format!("{MANIFEST} does not parse: {e}")))?;
    if m.snapshot_format != SNAPSHOT_FORMAT {
        return Err(bad(format!(
            "snapshot format {} (this memdir reads {SNAPSHOT_FORMAT})",
            m.snapshot_format
        )));
    }
    if m.store_format > memdir_store::format::FORMAT {
        return Err(bad(format!(
            "it holds a store of format {}, newer than this memdir reads",
            m.store_format
        )));
    }
    let mut listed = std::collections::BTreeSet::new();
    for f in &m.files {
        if !allowed(&f.path) {
            return Err(bad(format!(
                "the manifest lists {:?}, which is no place in a store",
                f.path
            )));
        }
        if !listed.insert(f.path.clone()) {
            return Err(bad(format!("the manifest lists {:?} twice", f.path)));
        }
        let bytes = fsx::read(&dir.join(&f.path), fsx::MAX_SEGMENT_FILE)?
            .ok_or_else(|| bad(format!("{} is missing", f.path)))?;
        if bytes.len() as u64 != f.size || content_hash(&bytes) != f.blake3 {
            return Err(bad(format!(
                "{} differs from the manifest (size or hash)",
                f.path
            )));
        }
    }
    let extra = unlisted(dir, &listed)?;
    if !extra.is_empty() {
        return Err(bad(format!(
            "it holds what its manifest does not list: {}",
            extra.join(", ")
        ))
        .detail("unlisted", Value::from(extra)));
    }
    Ok(m)
}

/// Copies `files` from `from` to `to` (which exists), each made durable, reporting `(copied,
/// total)` files to `progress`.
fn copy_files(
    from: &Path,
    to: &Path,
    files: &[String],
    progress: Option<&dyn Fn(u64, u64)>,
) -> Result<Vec<ManifestFile>> {
    let mut out = Vec::with_capacity(files.len());
    for (i, rel) in files.iter().enumerate() {
        if let Some(p) = progress {
            p(i as u64, files.len() as u64);
        }
        let src = from.join(rel);
        let dst = to.join(rel);
        let bytes = fsx::read(&src, fsx::MAX_SEGMENT_FILE)?.ok_or_else(|| {
            Error::new(
                ErrorKind::Unavailable,
                format!("{} vanished during the copy", src.display()),
            )
        })?;
        if let Some(parent) = dst.parent() {
            fsx::create_dir_durable(parent)?;
        }
        fsx::write_synced(&dst, &bytes)?;
        out.push(ManifestFile {
            path: rel.clone(),
            size: bytes.len() as u64,
            blake3: content_hash(&bytes),
        });
    }
    // DURABILITY: every directory that gained entries is synced before the copy is named done.
    let mut dirs: Vec<PathBuf> = files
        .iter()
        .filter_map(|r| to.join(r).parent().map(Path::to_path_buf))
        .collect();
    dirs.sort();
    dirs.dedup();
    for d in dirs {
        fsx::sync_dir(&d)?;
    }
    Ok(out)
}

/// A hidden sibling of `target` for building a copy, on the same file system.
fn sibling(target: &Path, what: &str) -> Result<PathBuf> {
    let parent = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .ok_or_else(|| Error::invalid("dest", format!("{} has no file name", target.display())))?
        .to_string_lossy();
    Ok(parent.join(format!(
        ".{name}.{what}-{}-{}",
        std::process::id(),
        clock::now_ms()
    )))
}

fn absolute(p: &Path, field: &str) -> Result<PathBuf> {
    std::path::absolute(p)
        .map_err(|e| Error::invalid(field, format!("cannot make {} absolute: {e}", p.display())))
}

impl Upkeep<'_> {
    /// Writes a verified copy of the store's truth files to `dest`.
    pub fn take_snapshot(&self, req: &SnapshotRequest) -> Result<SnapshotResponse> {
        self.take_snapshot_with(req, None)
    }

    /// [`Self::take_snapshot`], reporting `(copied, total)` files to `progress`.
    pub fn take_snapshot_with(
        &self,
        req: &SnapshotRequest,
        progress: Option<&dyn Fn(u64, u64)>,
    ) -> Result<SnapshotResponse> {
        let dest = absolute(Path::new(&req.dest), "dest")?;
        let root = absolute(&self.layout().root, "dir")?;
        if !self.layout().exists() || !self.layout().holds_store() {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("there is no store at {} to snapshot", root.display()),
            ));
        }
        if dest.starts_with(&root) {
            return Err(Error::invalid(
                "dest",
                format!(
                    "{} is inside the store: put the snapshot elsewhere",
                    dest.display()
                ),
            ));
        }
        match std::fs::symlink_metadata(&dest) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Ok(m) if m.is_dir() && std::fs::read_dir(&dest).at("list", &dest)?.next().is_none() => {
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "{} exists and is not an empty directory: nothing was written",
                        dest.display()
                    ),
                )
                .field("dest")
                .hint("name a new or empty directory"));
            }
        }
        let work = sibling(&dest, "snapshot")?;
        let result = (|| -> Result<SnapshotResponse> {
            fsx::create_dir_durable(&work)?;
            let (files, skipped) = {
                // Writers wait while the copy is taken: it is one state of the store.
                let _lock = self.lock_and_recover()?;
                let truth = truth_files(&root)?;
                let files = copy_files(&root, &work, &truth.files, progress)?;
                (files, truth.skipped)
            };
            let manifest = Manifest {
                snapshot_format: SNAPSHOT_FORMAT,
                store_format: match memdir_store::format::read(self.layout()) {
                    memdir_store::format::Found::Format(n) => n,
                    _ => memdir_store::format::CREATED,
                },
                created: clock::rfc3339(clock::now_ms()),
                files,
            };
            let bytes = memdir_store::codec::to_pretty(
                &serde_json::to_value(&manifest).expect("invariant: a manifest serializes"),
            );
            fsx::write_synced(&work.join(MANIFEST), &bytes)?;
            fsx::sync_dir(&work)?;
            // Read back and checked before it is named done.
            let checked = check_snapshot(&work)?;
            if dest.is_dir() {
                std::fs::remove_dir(&dest).at("replace empty directory", &dest)?;
            }
            std::fs::rename(&work, &dest).at("rename", &dest)?;
            if let Some(parent) = dest.parent() {
                // DURABILITY: the snapshot's name must survive a crash once reported.
                fsx::sync_dir(parent)?;
            }
            Ok(SnapshotResponse {
                dest: dest.display().to_string(),
                files: checked.files.len(),
                bytes: checked.files.iter().map(|f| f.size).sum(),
                created: checked.created,
                verified: true,
                skipped,
            })
        })();
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&work);
        }
        result
    }

    /// Replaces the store by a verified snapshot, parking the current store beside it.
    pub fn restore_snapshot(
        &self,
        req: &RestoreSnapshotRequest,
    ) -> Result<RestoreSnapshotResponse> {
        let src = absolute(Path::new(&req.src), "src")?;
        let root = absolute(&self.layout().root, "dir")?;
        if src.starts_with(&root) || root.starts_with(&src) {
            return Err(Error::invalid(
                "src",
                format!("{} overlaps the store at {}", src.display(), root.display()),
            ));
        }
        let manifest = check_snapshot(&src).map_err(|e| e.field("src"))?;
        let work = sibling(&root, "restore")?;
        let files: Vec<String> = manifest.files.iter().map(|f| f.path.clone()).collect();
        let staged = (|| -> Result<()> {
            fsx::create_dir_durable(&work)?;
            // The copy is checked against the manifest too: SRC may change while it is read.
            let copied = copy_files(&src, &work, &files, None)?;
            for (c, m) in copied.iter().zip(&manifest.files) {
                if c.size != m.size || c.blake3 != m.blake3 {
                    return Err(Error::new(
                        ErrorKind::Corrupt,
                        format!(
                            "{} changed while it was copied; nothing was changed",
                            c.path
                        ),
                    ));
                }
            }
            fsx::sync_dir(&work)?;
            Ok(())
        })();
        if let Err(e) = staged {
            let _ = std::fs::remove_dir_all(&work);
            return Err(e);
        }
        let stamp = clock::rfc3339(clock::now_ms()).replace([':', '.'], "");
        let parked = root.with_file_name(format!(
            "{}.before-restore-{stamp}",
            root.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default()
        ));
        let swapped = (|| -> Result<Option<PathBuf>> {
            let lock = if self.layout().exists() && self.layout().holds_store() {
                Some(self.lock()?)
            } else {
                None
            };
            // Files this process replaced are freed first, not parked with the old store (nor
            // held open in it while it moves).
            txn::finish_reaping(std::time::Duration::from_secs(5));
            let parked = if self.layout().exists() {
                std::fs::rename(&root, &parked).at("park", &root)?;
                Some(parked.clone())
            } else {
                None
            };
            std::fs::rename(&work, &root).at("rename", &root)?;
            if let Some(parent) = root.parent() {
                // DURABILITY: both renames must survive a crash once reported.
                fsx::sync_dir(parent)?;
            }
            drop(lock);
            Ok(parked)
        })();
        let parked = match swapped {
            Ok(p) => p,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&work);
                return Err(e);
            }
        };
        // This process's ledger connection and index belong to the parked store now.
        self.forget_open_state();
        Ok(RestoreSnapshotResponse {
            dir: root.display().to_string(),
            restored_from: src.display().to_string(),
            snapshot_created: manifest.created,
            files: files.len(),
            parked: parked.map(|p| p.display().to_string()),
        })
    }

    /// Drops the open ledger, index and caches, so the next call opens the store afresh.
    fn forget_open_state(&self) {
        if let Ok(mut g) = self.inner.lock() {
            *g = None;
        }
        self.indexing.close();
        if let Ok(mut g) = self.last_scan.lock() {
            *g = None;
        }
        if let Ok(mut g) = self.format_ok.lock() {
            *g = None;
        }
        self.categories.forget();
    }
}

#[cfg(test)]
mod tests {
    use super::allowed;

    #[test]
    fn only_places_of_a_store_may_be_restored() {
        for ok in [
            "categories/a.json",
            "history/a/x.json",
            "sessions/s/r.jsonl",
            "memdir.json",
            ".gitignore",
        ] {
            assert!(allowed(ok), "{ok}");
        }
        for bad in [
            "../x",
            "/etc/passwd",
            "categories",
            ".memdir/ledger.db",
            "other/x",
            "sessions/../x",
            "a\\b",
            "",
        ] {
            assert!(!allowed(bad), "{bad}");
        }
    }
}
