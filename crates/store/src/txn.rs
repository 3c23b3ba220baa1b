//! The commit protocol: per-transaction staging, fsync, manifest, atomic rename.
//!
//! A transaction replaces or creates whole files. Its steps:
//!
//! 1. Create `.memdir/staging/<txid>/` and write each new file there as `<i>.data`; fsync each.
//! 2. Write `manifest.json` (targets, hashes, lengths) and fsync it, then fsync the staging
//!    directory. **This is the commit point**: from here on, recovery rolls forward.
//! 3. Rename each staged file onto its target (an atomic replace within one file system) and
//!    fsync every target directory.
//! 4. Move the staging directory to `.memdir/trash/`, where a background thread removes it. A
//!    large file a rename replaced is linked there first: freeing its blocks (with their
//!    discards) costs about 0.2 ms per 760 KB on the reference disk, and removing the staging
//!    directory's own entries a little more for every write, work the acknowledged write need
//!    not wait for. Whatever a process left in the trash when it exited is removed by the next
//!    startup ([`sweep_trash`]).
//!
//! Recovery (on open, under the write lock) rolls a transaction forward when its manifest is
//! intact and every staged file still matches its recorded hash (or its target already does),
//! and discards it otherwise. Every step is idempotent, so a crash during recovery is recovered
//! by the next open.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::failpoint;
use crate::fsx::{create_dir_durable, private_dir, sync_dir, write_synced};
use crate::model::content_hash;
use memdir_api::error::{IoContext, IoError};

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

/// What becomes of a file of [`REAP_FROM`] bytes or more that a commit's rename replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replaced {
    /// Freed by the rename, before the commit returns: its bytes are in no file of the store
    /// afterwards (what a forget promises).
    FreeNow,
    /// Kept linked in the finished staging directory and freed by the reaper: the commit does
    /// not wait for its blocks (a category write).
    FreeLater,
}

/// Commits `files` atomically under `root`; a replaced file is freed before it returns
/// ([`Replaced::FreeNow`]). The caller holds the write lock.
pub fn commit(root: &Path, staging: &Path, txid: &str, files: &[FileWrite]) -> Result<(), IoError> {
    commit_replacing(root, staging, txid, files, Replaced::FreeNow)
}

/// [`commit`], saying what becomes of the large files it replaces.
pub fn commit_replacing(
    root: &Path,
    staging: &Path,
    txid: &str,
    files: &[FileWrite],
    replaced: Replaced,
) -> Result<(), IoError> {
    let dir = staging.join(txid);
    create_dir_durable(&dir)?;
    let result = commit_in(root, &dir, txid, files, replaced);
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

fn commit_in(
    root: &Path,
    dir: &Path,
    txid: &str,
    files: &[FileWrite],
    replaced: Replaced,
) -> Result<(), IoError> {
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
    publish(root, dir, &manifest, replaced)?;
    failpoint::hit("txn.after_publish");
    // Nothing in the directory is needed any more (recovery would only find its targets in
    // place): moved aside in one rename, its files are freed off the write path.
    let staging = dir
        .parent()
        .expect("invariant: a transaction dir lives in staging");
    let trash = trash_beside(staging);
    // Never through a link: the reaper removes whatever it is handed. One stat on the usual
    // path; the directory is made the first time.
    let ready = match fs::symlink_metadata(&trash) {
        Ok(m) => m.is_dir(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => private_dir().create(&trash).is_ok(),
        Err(_) => false,
    };
    if ready {
        let to = trash.join(
            dir.file_name()
                .expect("invariant: a staging dir has a name"),
        );
        if fs::rename(dir, &to).is_ok() {
            failpoint::hit("txn.after_trash");
            reap(to);
            return Ok(());
        }
    }
    fs::remove_dir_all(dir).at("remove staging", dir)?;
    Ok(())
}

/// Files at least this large that a rename replaces are freed in the background.
const REAP_FROM: u64 = 64 * 1024;

/// The name a replaced target is kept under in its transaction's staging directory.
fn replaced_name(i: usize) -> String {
    format!("{i}.replaced")
}

/// `.memdir/trash/`, beside the staging directory.
fn trash_beside(staging: &Path) -> PathBuf {
    staging.with_file_name("trash")
}

/// Directories handed to the reaper and not yet removed, with the signal of each removal.
static REAPING: (std::sync::Mutex<usize>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// Removes `path` (a directory moved to the trash) on a background thread, or here when no
/// thread can be started. Best effort: what is left is swept by the next startup.
fn reap(path: PathBuf) {
    use std::sync::mpsc::{Sender, channel};
    use std::sync::{Mutex, OnceLock};
    static REAPER: OnceLock<Option<Mutex<Sender<PathBuf>>>> = OnceLock::new();
    let reaper = REAPER.get_or_init(|| {
        let (tx, rx) = channel::<PathBuf>();
        std::thread::Builder::new()
            .name("memdir-reaper".into())
            .spawn(move || {
                for p in rx {
                    let _ = fs::remove_dir_all(&p);
                    reaped();
                }
            })
            .ok()
            .map(|_| Mutex::new(tx))
    });
    if let Ok(mut n) = REAPING.0.lock() {
        *n += 1;
    }
    let sent = reaper
        .as_ref()
        .and_then(|tx| tx.lock().ok())
        .map(|tx| tx.send(path.clone()));
    if !matches!(sent, Some(Ok(()))) {
        let _ = fs::remove_dir_all(&path);
        reaped();
    }
}

/// Counts one directory handed to the reaper as removed, waking whoever waits for it.
fn reaped() {
    if let Ok(mut n) = REAPING.0.lock() {
        *n = n.saturating_sub(1);
    }
    REAPING.1.notify_all();
}

/// Waits, at most `timeout`, until the reaper has removed everything handed to it: a process
/// about to exit (the CLI) leaves nothing in the trash for the next one to sweep.
pub fn finish_reaping(timeout: std::time::Duration) {
    let Ok(n) = REAPING.0.lock() else { return };
    let _ = REAPING.1.wait_timeout_while(n, timeout, |n| *n > 0);
}

/// Hands whatever a process left in `.memdir/trash/` (beside `staging`) to the reaper.
/// Nothing there is ever read: it needs no lock.
pub fn sweep_trash(staging: &Path) {
    let trash = trash_beside(staging);
    if !crate::fsx::is_real_dir(&trash) {
        return;
    }
    if let Ok(rd) = fs::read_dir(&trash) {
        for e in rd.filter_map(|e| e.ok()) {
            reap(e.path());
        }
    }
}

/// Puts a committed transaction's files in place.
fn publish(
    root: &Path,
    dir: &Path,
    manifest: &Manifest,
    replaced: Replaced,
) -> Result<(), IoError> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for (i, f) in manifest.files.iter().enumerate() {
        let target = root.join(&f.rel);
        let parent = target
            .parent()
            .expect("invariant: targets live below the root")
            .to_path_buf();
        // A rename or removal replaces a link at the target itself, but must never reach
        // through a linked directory to a place outside the store.
        crate::fsx::check_no_links(root, &parent)?;
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
            // A large file being replaced stays linked in the staging directory, so the
            // rename does not free its blocks (see `commit_in`). Best effort: without the
            // link the rename frees them itself.
            if replaced == Replaced::FreeLater
                && fs::symlink_metadata(&target).is_ok_and(|m| m.is_file() && m.len() >= REAP_FROM)
            {
                let _ = fs::hard_link(&target, dir.join(replaced_name(i)));
            }
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

pub fn recover_one(root: &Path, dir: &Path) -> Result<Recovered, IoError> {
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
    publish(root, dir, &manifest, Replaced::FreeNow)?;
    Ok(Recovered::RolledForward(
        manifest.files.iter().map(|f| f.rel.clone()).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::pending;

    fn write(rel: &str, bytes: Vec<u8>) -> FileWrite {
        FileWrite {
            rel: PathBuf::from(rel),
            bytes: Some(bytes),
            hash: None,
        }
    }

    /// Waits (bounded) until `dir` holds nothing: the reaper works on its own thread.
    fn empties(dir: &Path) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if fs::read_dir(dir).map_or(true, |mut rd| rd.next().is_none()) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn a_large_replaced_file_is_kept_linked_until_the_rename_is_done() {
        let t = tempfile::tempdir().unwrap();
        let (root, dir) = (t.path(), t.path().join("staging/tx"));
        fs::create_dir_all(&dir).unwrap();
        let large = vec![b'a'; REAP_FROM as usize];
        fs::write(root.join("large.json"), &large).unwrap();
        fs::write(root.join("small.json"), b"old").unwrap();
        fs::write(dir.join("0.data"), b"new large").unwrap();
        fs::write(dir.join("1.data"), b"new small").unwrap();
        let manifest = Manifest {
            txid: "tx".into(),
            files: ["large.json", "small.json"]
                .iter()
                .map(|rel| ManifestFile {
                    rel: rel.to_string(),
                    hash: Some(String::new()),
                })
                .collect(),
        };
        publish(root, &dir, &manifest, Replaced::FreeLater).unwrap();
        assert_eq!(fs::read(root.join("large.json")).unwrap(), b"new large");
        assert_eq!(fs::read(root.join("small.json")).unwrap(), b"new small");
        assert_eq!(fs::read(dir.join("0.replaced")).unwrap(), large);
        assert!(
            !dir.join("1.replaced").exists(),
            "a small file is freed at once"
        );
    }

    #[test]
    fn a_commit_over_a_large_file_leaves_neither_staging_nor_trash() {
        let t = tempfile::tempdir().unwrap();
        let (root, staging) = (t.path(), t.path().join(".memdir/staging"));
        for (i, size) in [200_000usize, 300_000, 10].into_iter().enumerate() {
            let bytes = vec![b'0' + i as u8; size];
            commit(
                root,
                &staging,
                &format!("tx{i}"),
                &[write("c.json", bytes.clone())],
            )
            .unwrap();
            assert_eq!(fs::read(root.join("c.json")).unwrap(), bytes);
            assert!(pending(&staging).is_empty());
        }
        assert!(
            empties(&root.join(".memdir/trash")),
            "the reaper empties the trash"
        );
    }

    #[test]
    fn sweep_trash_removes_what_an_exited_process_left() {
        let t = tempfile::tempdir().unwrap();
        let staging = t.path().join(".memdir/staging");
        let left = t.path().join(".memdir/trash/tx/sub");
        fs::create_dir_all(&left).unwrap();
        fs::write(left.join("0.replaced"), b"old").unwrap();
        sweep_trash(&staging);
        assert!(empties(&t.path().join(".memdir/trash")));
        // No trash at all: nothing to do, no error.
        sweep_trash(&t.path().join("absent/staging"));
    }
}
