//! The directory tantivy reads and writes an index through ([`LazyDir`]): commits written
//! without fsync between durable ones, and, in a long-lived process, commits kept in its
//! memory ([`Overlay`]) until the next durable commit lands them. The two sections below say
//! why each exists and why neither can lose what the files hold.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    AntiCallToken, Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, TerminatingWrite,
    WatchCallback, WatchHandle, WritePtr,
};

// ---------------------------------------------------------------------------------------------
// Commits without fsync
// ---------------------------------------------------------------------------------------------
//
// A catch-up commits the index so that the next search sees a write; fsyncing every commit
// (each segment file, meta.json, the directory) cost 50-125 ms per search after a write. The
// index is derived, so most commits are *lazy*: written to the page cache, not fsynced. Only
// a crash of the machine (power loss, kernel panic) can lose page-cache data; a killed process
// cannot. So:
//
// - Before the first lazy commit of a window, a marker `<part>.lazy` holding the boot id is
//   written durably. A *durable* commit (every [`DURABLE_EVERY`] of lazy commits, and every
//   rebuild) fsyncs every file of the part first, then meta.json and the directory, and removes
//   the marker.
// - Opening a part whose marker names another boot id (the machine went down inside a lazy
//   window) checks every file's checksum and opens every segment; anything torn or missing
//   discards the part, which is then rebuilt from the files.
// - The ledger's change feed is pruned only up to what durable commits absorbed (the indexer
//   records that mark after each durable commit), so a part that came back older than its last
//   lazy commit still finds every change it lacks in the feed.
//
// Where the boot id cannot be read (not Linux), every commit is durable.

/// How long a window of lazy commits lasts before a commit is made durable.
pub const DURABLE_EVERY: Duration = Duration::from_secs(10);

/// The id of this boot of the machine, where the system tells it.
pub(super) fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// An `MmapDirectory` whose writes skip fsync while `durable` is false, and which, when it is
/// true, fsyncs every file of the directory before the new meta.json is written.
///
/// While lazy it also holds back tantivy's list of the files it manages (`.managed.json`,
/// rewritten whole for every file a segment adds: six per segment) and writes only the
/// newest list, just before the next `meta.json`. Nothing is lost by that: a file is named
/// by `meta.json` only after it is in a list written before it, and a list on disk that is
/// behind only names files since deleted (garbage collection forgets those) or lacks files no
/// `meta.json` names yet (left on disk, never read).
///
/// While `memory` is set, what a commit writes stays in this process (see [`Overlay`]).
#[derive(Clone)]
pub(super) struct LazyDir {
    inner: MmapDirectory,
    root: PathBuf,
    /// How the files written now are kept ([`Keep`], as a `u8`).
    keep: Arc<AtomicU8>,
    managed: Arc<std::sync::Mutex<Option<Vec<u8>>>>,
    overlay: Arc<std::sync::Mutex<Option<Overlay>>>,
    /// Document stores are read with `pread`, not through the map (see [`super::store_file`]).
    stores: super::store_file::StoreFiles,
}

impl std::fmt::Debug for LazyDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyDir").field("root", &self.root).finish()
    }
}

/// How a commit's files are kept (see [`LazyDir`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Keep {
    /// fsynced before the `meta.json` that names them.
    Durable,
    /// In the page cache, inside a window of lazy commits.
    Lazy,
    /// In this process's memory ([`Overlay`]).
    Memory,
}

/// tantivy's list of the files it manages (see [`LazyDir`]).
pub(super) const MANAGED_LIST: &str = ".managed.json";

/// tantivy's commit point.
pub(super) const META: &str = "meta.json";

// ---------------------------------------------------------------------------------------------
// Segments in memory
// ---------------------------------------------------------------------------------------------
//
// A long-lived process (a server) catches the index up for nearly every search that follows a
// write. Written to disk, even lazily, each such commit creates a segment's files and renames a
// new `meta.json` into place: under 8 REST clients about a third of the server's time, most of
// it creating inodes. In a server the commits between two durable ones therefore stay in its
// memory: their segment files and their `meta.json` live in an [`Overlay`] on top of the
// `meta.json` on disk, and this process's reader reads through it. The next durable commit
// (every [`DURABLE_EVERY`], or once the overlay holds [`OVERLAY_MAX`] bytes) writes the files
// the overlay holds, fsynced, before the `meta.json` that names them: a `meta.json` on disk
// never names a file that is not on disk.
//
// Other processes see only the disk: one that needs the newer changes indexes them itself
// (from the feed, which keeps every change after the last durable commit), and its commit
// changes `meta.json` on disk. This process notices when it next reads the metas (the disk no
// longer holds the overlay's base) and drops the overlay: its reader then reads the disk's
// state, and its own catch-up goes on from that. Commits are made under the index's writer
// lock, so no other process commits between reading the metas and writing them. A killed
// server loses only its overlay; the disk and the feed still hold everything.

/// The commits of this process not yet on disk, on top of one `meta.json` on disk.
pub(super) struct Overlay {
    /// The `meta.json` on disk these commits build on.
    base: Vec<u8>,
    /// The newest `meta.json` of this process (`None`: only files written yet).
    meta: Option<Vec<u8>>,
    /// Files written by those commits and not deleted since.
    files: std::collections::HashMap<PathBuf, tantivy::directory::OwnedBytes>,
    /// Files on disk that this process's commits no longer use; deleted once a `meta.json`
    /// on disk stops naming them (the overlay lands), forgotten if it is dropped.
    doomed: Vec<PathBuf>,
    /// The size of `files`.
    bytes: usize,
    /// When the overlay began.
    pub(super) since: Instant,
}

/// The overlay's size beyond which a catch-up lands it at once
/// ([`Part::land_if_large`](super::Part::land_if_large)).
pub const OVERLAY_MAX: usize = 16 << 20;

/// The segments a `meta.json` names, as their files are named (the uuid without dashes).
fn named_segments(meta: &[u8]) -> std::io::Result<std::collections::HashSet<String>> {
    let v: Value = serde_json::from_slice(meta).map_err(std::io::Error::other)?;
    Ok(v.get("segments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("segment_id").and_then(Value::as_str))
        .map(|id| id.replace('-', ""))
        .collect())
}

/// A file written into the overlay.
struct MemFile {
    path: PathBuf,
    data: Vec<u8>,
    dir: LazyDir,
}

impl std::io::Write for MemFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.data.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl TerminatingWrite for MemFile {
    fn terminate_ref(&mut self, _: AntiCallToken) -> std::io::Result<()> {
        let data = std::mem::take(&mut self.data);
        let mut g = self.dir.overlay()?;
        let o = self.dir.overlay_in(&mut g)?;
        o.bytes += data.len();
        o.files
            .insert(self.path.clone(), tantivy::directory::OwnedBytes::new(data));
        Ok(())
    }
}

/// A file written to disk: synced when it is finished if the directory is durable, left to
/// the page cache otherwise.
struct LazyFile {
    file: std::fs::File,
    durable: bool,
}

impl std::io::Write for LazyFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl TerminatingWrite for LazyFile {
    fn terminate_ref(&mut self, _: AntiCallToken) -> std::io::Result<()> {
        std::io::Write::flush(&mut self.file)?;
        if self.durable {
            // DURABILITY: a segment file reaches the disk before a meta.json names it.
            self.file.sync_data()?;
        }
        Ok(())
    }
}

/// Creates (or truncates) a file only its owner may read: the index holds the memories' text.
fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    memdir_store::fsx::private_file(
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true),
    )
    .open(path)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Writes a small file and its directory entry durably.
pub(super) fn write_durable(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut f = create_private(path)?;
    std::io::Write::write_all(&mut f, data)?;
    f.sync_all()?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

impl LazyDir {
    pub(super) fn new(inner: MmapDirectory, root: &Path) -> LazyDir {
        LazyDir {
            inner,
            root: root.to_path_buf(),
            keep: Arc::new(AtomicU8::new(Keep::Durable as u8)),
            managed: Default::default(),
            overlay: Default::default(),
            stores: Default::default(),
        }
    }

    fn durable(&self) -> bool {
        self.keep.load(Ordering::Acquire) == Keep::Durable as u8
    }

    fn memory(&self) -> bool {
        self.keep.load(Ordering::Acquire) == Keep::Memory as u8
    }

    /// How the files written from now on are kept.
    pub(super) fn set_keep(&self, keep: Keep) {
        self.keep.store(keep as u8, Ordering::Release);
    }

    pub(super) fn overlay(&self) -> std::io::Result<std::sync::MutexGuard<'_, Option<Overlay>>> {
        self.overlay
            .lock()
            .map_err(|_| std::io::Error::other("index overlay poisoned"))
    }

    /// The overlay in `g`, begun on the `meta.json` on disk now if there is none.
    fn overlay_in<'a>(&self, g: &'a mut Option<Overlay>) -> std::io::Result<&'a mut Overlay> {
        if g.is_none() {
            let base = self.disk_meta()?;
            *g = Some(Overlay {
                base,
                meta: None,
                files: Default::default(),
                doomed: Vec::new(),
                bytes: 0,
                since: Instant::now(),
            });
        }
        Ok(g.as_mut().expect("invariant: the overlay was just begun"))
    }

    fn disk_meta(&self) -> std::io::Result<Vec<u8>> {
        self.inner
            .atomic_read(Path::new(META))
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    /// Whether the overlay is old enough that the next commit should land it.
    pub(super) fn overlay_due(&self) -> bool {
        self.overlay().is_ok_and(|g| {
            g.as_ref()
                .is_some_and(|o| o.since.elapsed() >= DURABLE_EVERY)
        })
    }

    /// The size of the overlay's files, and whether there is one.
    pub(super) fn overlay_size(&self) -> Option<usize> {
        self.overlay().ok()?.as_ref().map(|o| o.bytes)
    }

    /// Writes the overlay's files of the segments `meta` names to disk (fsynced when
    /// durable), before that `meta.json` is written; the files of other segments (merged
    /// away, or emptied by a forget) never reach the disk. The overlay keeps every file until
    /// that `meta.json` is in place ([`LazyDir::landed`]): if writing it fails, the overlay
    /// still holds what its own `meta.json` names.
    pub(super) fn land(&self, meta: &[u8]) -> std::io::Result<()> {
        let mut g = self.overlay()?;
        let Some(o) = g.as_mut() else {
            return Ok(());
        };
        if self.disk_meta()? != o.base {
            // Only possible if a commit were made without the writer lock: nothing lands on
            // a state this overlay was not built on.
            *g = None;
            return Err(std::io::Error::other(
                "the index on disk changed during a commit; the next search catches up again",
            ));
        }
        let named = named_segments(meta)?;
        let durable = self.durable();
        for (path, data) in &o.files {
            let stem = path
                .to_str()
                .and_then(|p| p.split('.').next())
                .unwrap_or_default();
            if named.contains(stem) {
                let mut f = create_private(&self.root.join(path))?;
                std::io::Write::write_all(&mut f, data.as_slice())?;
                if durable {
                    f.sync_data()?;
                }
            }
        }
        if durable {
            sync_dir(&self.root)?;
        }
        // Tests: the `meta.json` that would follow cannot be written (a full disk).
        memdir_store::failpoint::fault("index.land_meta")
    }

    /// A `meta.json` on disk was written: the overlay has landed, and the disk files it no
    /// longer used go, under the lock with which tantivy's readers (of any process) read the
    /// metas and open their segments. The commit has happened whatever follows: a file that
    /// cannot be deleted now stays in tantivy's list of managed files (see
    /// [`LazyDir::delete`]), and a later garbage collection removes it.
    fn landed(&self) {
        let gone = self.overlay().ok().and_then(|mut g| g.take());
        let doomed = gone.map(|o| o.doomed).unwrap_or_default();
        if doomed.is_empty() {
            return;
        }
        let Ok(_meta_lock) = self.inner.acquire_lock(&tantivy::directory::META_LOCK) else {
            return;
        };
        for p in doomed {
            let _ = self.inner.delete(&p);
        }
    }

    /// Writes `data` to `path` by a rename, without fsync.
    fn replace_lazily(&self, path: &Path, data: &[u8]) -> std::io::Result<()> {
        // A name of this writer's own: meta.json is written without tantivy's writer lock
        // when an index is created, so two processes may write it at once.
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let tmp = self.root.join(
            format!(
                ".{}.{}.{}.tmp",
                path.display(),
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            )
            .replace('/', "_"),
        );
        std::io::Write::write_all(&mut create_private(&tmp)?, data)?;
        std::fs::rename(&tmp, self.root.join(path))
    }

    /// Writes the file list held back, if any (durably when the directory is).
    fn flush_managed(&self) -> std::io::Result<()> {
        let mut held = self
            .managed
            .lock()
            .map_err(|_| std::io::Error::other("managed file list poisoned"))?;
        if let Some(data) = held.take() {
            let r = if self.durable() {
                self.inner.atomic_write(Path::new(MANAGED_LIST), &data)
            } else {
                self.replace_lazily(Path::new(MANAGED_LIST), &data)
            };
            if r.is_err() {
                *held = Some(data);
            }
            r?;
        }
        Ok(())
    }
}

impl Directory for LazyDir {
    fn get_file_handle(
        &self,
        path: &Path,
    ) -> std::result::Result<Arc<dyn FileHandle>, OpenReadError> {
        if let Ok(g) = self.overlay()
            && let Some(b) = g.as_ref().and_then(|o| o.files.get(path))
        {
            return Ok(Arc::new(b.clone()));
        }
        let mapped = self.inner.get_file_handle(path)?;
        if super::store_file::is_store(path) {
            return Ok(self.stores.handle(&self.root.join(path), mapped));
        }
        Ok(mapped)
    }
    fn delete(&self, path: &Path) -> std::result::Result<(), DeleteError> {
        let io = |e: std::io::Error| DeleteError::IoError {
            io_error: Arc::new(e),
            filepath: path.to_path_buf(),
        };
        let mut g = self.overlay().map_err(io)?;
        if let Some(o) = g.as_mut() {
            if let Some(b) = o.files.remove(path) {
                o.bytes -= b.len();
                // A landing that failed before its `meta.json` may have written it to disk
                // (never named there: the disk still holds the overlay's base).
                return match self.inner.delete(path) {
                    Ok(()) | Err(DeleteError::FileDoesNotExist(_)) => Ok(()),
                    Err(e) => Err(e),
                };
            }
            // The `meta.json` on disk may still name it: it goes once the overlay lands. Until
            // then tantivy is told it could not be deleted, so the file stays in its list of
            // managed files (and in `.managed.json` for other processes): if the overlay is
            // dropped instead of landing, a later garbage collection still removes it.
            if self.root.join(path).exists() {
                if !o.doomed.iter().any(|d| d == path) {
                    o.doomed.push(path.to_path_buf());
                }
                return Err(io(std::io::Error::other(
                    "still named by meta.json on disk; deleted once this process's commits land",
                )));
            }
        }
        drop(g);
        self.inner.delete(path)
    }
    fn exists(&self, path: &Path) -> std::result::Result<bool, OpenReadError> {
        if let Ok(g) = self.overlay()
            && g.as_ref().is_some_and(|o| o.files.contains_key(path))
        {
            return Ok(true);
        }
        self.inner.exists(path)
    }
    fn open_write(&self, path: &Path) -> std::result::Result<WritePtr, OpenWriteError> {
        if self.memory() {
            let taken = self
                .overlay()
                .map_err(|e| OpenWriteError::wrap_io_error(e, path.to_path_buf()))?
                .as_ref()
                .is_some_and(|o| o.files.contains_key(path));
            if taken {
                return Err(OpenWriteError::FileAlreadyExists(path.to_path_buf()));
            }
            return Ok(std::io::BufWriter::new(Box::new(MemFile {
                path: path.to_path_buf(),
                data: Vec::new(),
                dir: self.clone(),
            })));
        }
        let durable = self.durable();
        let file = memdir_store::fsx::private_file(
            std::fs::OpenOptions::new().write(true).create_new(true),
        )
        .open(self.root.join(path))
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                OpenWriteError::FileAlreadyExists(path.to_path_buf())
            } else {
                OpenWriteError::wrap_io_error(e, path.to_path_buf())
            }
        })?;
        Ok(std::io::BufWriter::new(Box::new(LazyFile {
            file,
            durable,
        })))
    }
    fn atomic_read(&self, path: &Path) -> std::result::Result<Vec<u8>, OpenReadError> {
        if path == Path::new(META) {
            let io = |e: std::io::Error| OpenReadError::wrap_io_error(e, path.to_path_buf());
            let mut g = self.overlay().map_err(io)?;
            if let Some(o) = g.as_ref() {
                let disk = self.inner.atomic_read(path)?;
                if disk == o.base {
                    return Ok(o.meta.clone().unwrap_or(disk));
                }
                // Another process committed: its state replaces this process's own.
                *g = None;
                return Ok(disk);
            }
        }
        if path == Path::new(MANAGED_LIST)
            && let Ok(held) = self.managed.lock()
            && let Some(data) = held.as_ref()
        {
            return Ok(data.clone());
        }
        self.inner.atomic_read(path)
    }
    fn atomic_write(&self, path: &Path, data: &[u8]) -> std::io::Result<()> {
        if path == Path::new(MANAGED_LIST) {
            let mut held = self
                .managed
                .lock()
                .map_err(|_| std::io::Error::other("managed file list poisoned"))?;
            if !self.durable() {
                *held = Some(data.to_vec());
                return Ok(());
            }
            // Written durably below, superseding any list held back.
            *held = None;
        } else if path == Path::new(META) && self.memory() {
            let mut g = self.overlay()?;
            self.overlay_in(&mut g)?.meta = Some(data.to_vec());
            return Ok(());
        } else {
            if path == Path::new(META) {
                self.land(data)?;
            }
            self.flush_managed()?;
        }
        if self.durable() {
            self.inner.atomic_write(path, data)?;
            sync_dir(&self.root)?;
        } else {
            self.replace_lazily(path, data)?;
        }
        if path == Path::new(META) {
            self.landed();
        }
        Ok(())
    }
    fn sync_directory(&self) -> std::io::Result<()> {
        if !self.durable() {
            return Ok(());
        }
        self.flush_managed()?;
        // Files written by earlier lazy commits (of any process) become durable before the
        // meta.json that is about to name them.
        for e in std::fs::read_dir(&self.root)? {
            let e = e?;
            if e.file_type()?.is_file() {
                std::fs::File::open(e.path())?.sync_data()?;
            }
        }
        sync_dir(&self.root)
    }
    fn acquire_lock(&self, lock: &Lock) -> std::result::Result<DirectoryLock, LockError> {
        // The lock file is created here first, private, for the inner directory to lock.
        let _ = memdir_store::fsx::private_file(
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false),
        )
        .open(self.root.join(&lock.filepath));
        self.inner.acquire_lock(lock)
    }
    fn watch(&self, cb: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.inner.watch(cb)
    }
}
