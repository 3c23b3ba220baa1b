//! The commit protocol: per-transaction staging, fsync, manifest, atomic rename.
//!
//! A transaction replaces or creates whole files. Its steps:
//!
//! 1. Create `.memdir/staging/<txid>/` and write each new file there as `<i>.data`; fsync each.
//! 2. Write `manifest.json` (targets, hashes, lengths) and fsync it, then fsync the staging
//!    directory. **This is the commit point**: from here on, recovery rolls forward.
//! 3. Rename each staged file onto its target (an atomic replace within one file system) and
//!    fsync every target directory.
//! 4. Remove the staging directory.
//!
//! Recovery (on open, under the write lock) rolls a transaction forward when its manifest is
//! intact and every staged file still matches its recorded hash (or its target already does),
//! and discards it otherwise. Every step is idempotent, so a crash during recovery is recovered
//! by the next open.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{IoContext, IoError};
use crate::model::content_hash;
use crate::store::failpoint;

/// One file a transaction writes, relative to the store root.
pub struct FileWrite {
    pub rel: PathBuf,
    /// The new content, or `None` to remove the file.
    pub bytes: Option<Vec<u8>>,
    /// The content's hash when the caller has it already ([`content_hash`] of `bytes`);
    /// otherwise the commit computes it.
    pub hash: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct Manifest {
    txid: String,
    files: Vec<ManifestFile>,
}

#[derive(Serialize, Deserialize)]
struct ManifestFile {
    rel: String,
    /// Hash of the new content; `None` removes the target.
    hash: Option<String>,
}

/// fsyncs a directory so that entries created or renamed in it are durable.
pub fn sync_dir(dir: &Path) -> Result<(), IoError> {
    // DURABILITY: on Linux a rename or create is only durable once its directory is fsynced.
    File::open(dir)
        .and_then(|f| f.sync_all())
        .at("fsync directory", dir)
}

/// Creates `dir` and any missing parents, fsyncing each parent that gained an entry.
pub fn create_dir_durable(dir: &Path) -> Result<(), IoError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dir_durable(parent)?;
    }
    let mut b = fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        // Memories are private: other local users may not list or read them.
        b.mode(0o700);
    }
    match b.create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => {
            return Err(IoError {
                op: "create directory",
                path: dir.to_path_buf(),
                source: e,
            });
        }
    }
    if let Some(parent) = dir.parent() {
        // DURABILITY: the new directory entry lives in the parent.
        sync_dir(parent)?;
    }
    Ok(())
}

/// Writes `bytes` to a new file at `path` and fsyncs it. A link at `path` is not followed.
pub fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    let mut o = OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NOFOLLOW).mode(0o600);
    }
    let mut f = o.open(path).at("create", path)?;
    failpoint::io("stage.write").at("write", path)?;
    f.write_all(bytes).at("write", path)?;
    // DURABILITY: content must reach the disk before the manifest names it.
    f.sync_all().at("fsync", path)?;
    Ok(())
}

/// Commits `files` atomically under `root`. The caller holds the write lock.
pub fn commit(root: &Path, staging: &Path, txid: &str, files: &[FileWrite]) -> Result<(), IoError> {
    let dir = staging.join(txid);
    create_dir_durable(&dir)?;
    let result = commit_in(root, &dir, txid, files);
    if result.is_err() {
        // Best effort: a failed transaction leaves nothing behind; recovery would also discard
        // a staging directory without an intact manifest.
        let manifest_written = dir.join("manifest.json").exists();
        if !manifest_written {
            let _ = fs::remove_dir_all(&dir);
        }
    }
    result
}

fn commit_in(root: &Path, dir: &Path, txid: &str, files: &[FileWrite]) -> Result<(), IoError> {
    let mut manifest = Manifest {
        txid: txid.to_string(),
        files: Vec::with_capacity(files.len()),
    };
    for (i, f) in files.iter().enumerate() {
        if let Some(bytes) = &f.bytes {
            write_synced(&dir.join(format!("{i}.data")), bytes)?;
        }
        manifest.files.push(ManifestFile {
            rel: f.rel.to_string_lossy().into_owned(),
            hash: f.bytes.as_deref().map(|b| match &f.hash {
                Some(h) => {
                    debug_assert_eq!(h, &content_hash(b), "a FileWrite's hash must be its bytes'");
                    h.clone()
                }
                None => content_hash(b),
            }),
        });
    }
    failpoint::hit("txn.after_stage");
    let manifest_bytes = serde_json::to_vec(&manifest).expect("invariant: manifest serializes");
    write_synced(&dir.join("manifest.json"), &manifest_bytes)?;
    // DURABILITY: the manifest's directory entry makes the commit point durable.
    sync_dir(dir)?;
    failpoint::hit("txn.after_manifest");
    publish(root, dir, &manifest)?;
    failpoint::hit("txn.after_publish");
    fs::remove_dir_all(dir).at("remove staging", dir)?;
    Ok(())
}

fn publish(root: &Path, dir: &Path, manifest: &Manifest) -> Result<(), IoError> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for (i, f) in manifest.files.iter().enumerate() {
        let target = root.join(&f.rel);
        let parent = target
            .parent()
            .expect("invariant: targets live below the root")
            .to_path_buf();
        // A rename or removal replaces a link at the target itself, but must never reach
        // through a linked directory to a place outside the store.
        crate::store::fsx::check_no_links(root, &parent)?;
        create_dir_durable(&parent)?;
        let staged = dir.join(format!("{i}.data"));
        if f.hash.is_none() {
            match fs::remove_file(&target) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(IoError {
                        op: "remove",
                        path: target,
                        source: e,
                    });
                }
            }
        } else if staged.exists() {
            fs::rename(&staged, &target).at("rename into place", &target)?;
        }
        if i == 0 {
            failpoint::hit("txn.after_first_rename");
        }
        if !dirs.contains(&parent) {
            dirs.push(parent);
        }
    }
    for d in dirs {
        // DURABILITY: the renames are acknowledged only once their directories are synced.
        sync_dir(&d)?;
    }
    Ok(())
}

/// What recovery did with one staged transaction.
#[derive(Debug, PartialEq, Eq)]
pub enum Recovered {
    /// Rolled forward: its files are now in place.
    RolledForward(Vec<String>),
    /// Discarded: it had not reached its commit point.
    Discarded,
}

/// Lists staged transactions (for status and verify-store).
pub fn pending(staging: &Path) -> Vec<String> {
    let mut out: Vec<String> = fs::read_dir(staging)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Recovers every staged transaction. The caller holds the write lock.
pub fn recover(root: &Path, staging: &Path) -> Result<Vec<(String, Recovered)>, IoError> {
    let mut out = Vec::new();
    for name in pending(staging) {
        let dir = staging.join(&name);
        if !dir.is_dir() {
            if name.ends_with(".append") {
                crate::store::segment::undo_intent(root, &dir)?;
                out.push((name, Recovered::Discarded));
            } else {
                fs::remove_file(&dir).at("remove stray staging file", &dir)?;
            }
            continue;
        }
        let outcome = recover_one(root, &dir)?;
        fs::remove_dir_all(&dir).at("remove staging", &dir)?;
        out.push((name, outcome));
    }
    if !out.is_empty() {
        sync_dir(staging)?;
    }
    Ok(out)
}

fn recover_one(root: &Path, dir: &Path) -> Result<Recovered, IoError> {
    let Ok(bytes) = fs::read(dir.join("manifest.json")) else {
        return Ok(Recovered::Discarded);
    };
    let Ok(manifest) = serde_json::from_slice::<Manifest>(&bytes) else {
        return Ok(Recovered::Discarded);
    };
    // Every file must be either staged intact or already in place with the recorded hash.
    for (i, f) in manifest.files.iter().enumerate() {
        if let Some(hash) = &f.hash {
            let staged_ok =
                fs::read(dir.join(format!("{i}.data"))).is_ok_and(|b| &content_hash(&b) == hash);
            let target_ok = fs::read(root.join(&f.rel)).is_ok_and(|b| &content_hash(&b) == hash);
            if !staged_ok && !target_ok {
                return Ok(Recovered::Discarded);
            }
        }
        if f.rel.split('/').any(|c| c == ".." || c.is_empty()) || Path::new(&f.rel).is_absolute() {
            return Ok(Recovered::Discarded);
        }
    }
    publish(root, dir, &manifest)?;
    Ok(Recovered::RolledForward(
        manifest.files.iter().map(|f| f.rel.clone()).collect(),
    ))
}
