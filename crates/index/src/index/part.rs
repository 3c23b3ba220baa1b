//! One tantivy index ([`Part`]) and how it changes: opening (and discarding what a crash or a
//! schema change left unusable), commits through an `IndexWriter` or of a small segment written
//! without one, the catch-up merge policy, and landing the commits kept in memory. How commits
//! reach the disk is [`LazyDir`]'s part.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;
use tantivy::directory::error::LockError;
use tantivy::directory::{Directory, DirectoryLock, MmapDirectory};
use tantivy::schema::Schema;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, TantivyError};

use super::analyzer::AnalyzerConfig;
#[cfg(doc)]
use super::lazy_dir::Overlay;
use super::lazy_dir::{DURABLE_EVERY, Keep, LazyDir, META, OVERLAY_MAX, boot_id, write_durable};
use super::schema::Payload;
use memdir_api::error::{Error, ErrorKind, IoContext, Result};

/// One tantivy index with its reader.
pub struct Part {
    pub index: Index,
    pub reader: IndexReader,
    pub dir: PathBuf,
    /// The commit opstamp the reader was last reloaded at.
    loaded: std::sync::atomic::AtomicU64,
    /// Its directory (see [`LazyDir`]); `None` for an index in memory.
    lazy: Option<LazyDir>,
    /// Whether commits between durable ones stay in this process's memory (see [`Overlay`]).
    tail_in_memory: bool,
    /// The payload of the last commit read, with the stamp of the `meta.json` it came from.
    seen: std::sync::Mutex<Option<(MetaStamp, Option<Payload>)>>,
}

/// What identifies one version of `meta.json`: every commit (by any process) writes it to a
/// new file and renames that into place, so the inode changes with each commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MetaStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
    /// The mtime was [`SETTLED`] old when the stamp was taken: any later commit gets a later
    /// mtime, so the stamp cannot recur.
    settled: bool,
}

/// How old `meta.json` must be before its stamp stands for its content (several ticks of the
/// coarse clock file times come from).
const SETTLED: Duration = Duration::from_millis(50);

/// A file beside the part in `dir`: `<part>.<ext>`.
fn part_sidecar(dir: &Path, ext: &str) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(ext);
    dir.with_file_name(name)
}

/// The marker of a window of lazy commits of the part in `dir`.
fn lazy_marker(dir: &Path) -> PathBuf {
    part_sidecar(dir, "lazy")
}

/// Whether the index in `dir` survived a crash of the machine inside a window of lazy commits
/// intact: every file's checksum, and every segment opens.
fn intact(index: &Index) -> bool {
    let damaged = match index.validate_checksum() {
        Ok(d) => d,
        Err(_) => return false,
    };
    damaged.is_empty()
        && index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .is_ok_and(|r: IndexReader| r.searcher().segment_readers().len() < usize::MAX)
}

fn tantivy_err(what: &str, e: TantivyError) -> Error {
    Error::new(
        ErrorKind::Unavailable,
        format!("search index ({what}): {e}"),
    )
    .hint("the index is derived state: {op:reindex} rebuilds it from the files")
}

/// Creates an index directory (and its parents) only its owner may list.
fn create_private_dir(dir: &Path) -> Result<()> {
    memdir_store::fsx::private_dir()
        .recursive(true)
        .create(dir)
        .at("create directory", dir)?;
    memdir_store::fsx::make_private(dir)?;
    Ok(())
}

impl Part {
    pub(super) fn open(
        dir: &Path,
        schema: Schema,
        cfg: &AnalyzerConfig,
        tail_in_memory: bool,
    ) -> Result<Part> {
        create_private_dir(dir)?;
        let mut lazy = None;
        let mut open = |schema: Schema| -> std::result::Result<Index, TantivyError> {
            let d =
                MmapDirectory::open(dir).map_err(|e| TantivyError::SystemError(e.to_string()))?;
            let d = LazyDir::new(d, dir);
            lazy = Some(d.clone());
            Index::open_or_create(d, schema)
        };
        // Opening creates the index when it is missing and discards one that is stale or
        // torn; two processes doing that at once would see each other's half-made index as
        // damaged and remove it under the other. One opener at a time, across processes.
        let gate_path = part_sidecar(dir, "open");
        let gate = memdir_store::fsx::private_file(
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true),
        )
        .open(&gate_path)
        .at("open index gate", &gate_path)?;
        gate.lock().at("lock index gate", &gate_path)?;
        // The machine went down inside a window of lazy commits: what survived may be torn.
        let marker = lazy_marker(dir);
        let crashed = match std::fs::read_to_string(&marker) {
            Ok(boot) => Some(boot.trim().to_string()) != boot_id(),
            Err(_) => false,
        };
        let index = match open(schema.clone()) {
            Ok(i) if !crashed || intact(&i) => i,
            _ => {
                // A different schema, a damaged index, or one torn by a crash: it is derived,
                // so start it afresh.
                std::fs::remove_dir_all(dir).at("remove stale index", dir)?;
                create_private_dir(dir)?;
                open(schema).map_err(|e| tantivy_err("create", e))?
            }
        };
        if crashed {
            // Whatever is on disk now survived the crash.
            std::fs::remove_file(&marker).at("remove index marker", &marker)?;
        }
        let mut part = Self::with_index(index, dir, cfg)?;
        part.lazy = lazy;
        part.tail_in_memory = tail_in_memory;
        Ok(part)
    }

    /// An index in memory, for a store memdir may only read.
    pub(crate) fn open_ram(schema: Schema, cfg: &AnalyzerConfig) -> Result<Part> {
        let index = Index::create_in_ram(schema);
        Self::with_index(index, Path::new(""), cfg)
    }

    fn with_index(index: Index, dir: &Path, cfg: &AnalyzerConfig) -> Result<Part> {
        index
            .tokenizers()
            .register(&cfg.tokenizer_name(), cfg.build_remembering()?);
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| tantivy_err("reader", e))?;
        Ok(Part {
            index,
            reader,
            dir: dir.to_path_buf(),
            loaded: std::sync::atomic::AtomicU64::new(u64::MAX),
            lazy: None,
            tail_in_memory: false,
            seen: std::sync::Mutex::new(None),
        })
    }

    /// The payload of the last commit.
    pub fn payload(&self) -> Option<Payload> {
        let metas = self.index.load_metas().ok()?;
        serde_json::from_str(metas.payload.as_deref()?).ok()
    }

    /// Reloads the reader if another commit (by any process) happened since it last loaded;
    /// returns the payload of the newest commit.
    ///
    /// Every search asks this first, and most find nothing new: when `meta.json` is the very
    /// file read last time (same inode, length and mtime), the reader is current and the
    /// payload is the one read then, so one `stat` replaces reading and parsing the metas.
    /// A stamp is remembered only once its mtime is [`SETTLED`] old: file times come from a
    /// coarse clock, and a freed inode may be reused, so two commits in one tick could
    /// otherwise leave a stamp equal to an older one.
    pub fn refresh(&self) -> Result<Option<Payload>> {
        use std::sync::atomic::Ordering;
        // Taken before the metas are read: a commit in between leaves an older stamp, so the
        // next call reads again.
        let stamp = self.meta_stamp();
        if let Some(stamp) = stamp
            && let Ok(seen) = self.seen.lock()
            && let Some((s, payload)) = seen.as_ref()
            && *s == stamp
        {
            return Ok(payload.clone());
        }
        let metas = self
            .index
            .load_metas()
            .map_err(|e| tantivy_err("metas", e))?;
        let key = segments_key(metas.segments.iter().map(|m| (m.id(), m.delete_opstamp())));
        if self.loaded.load(Ordering::Acquire) != key {
            self.reload()?;
        }
        let payload: Option<Payload> = metas
            .payload
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok());
        if let Ok(mut seen) = self.seen.lock() {
            *seen = stamp.filter(|s| s.settled).map(|s| (s, payload.clone()));
        }
        Ok(payload)
    }

    /// Reloads the reader, and remembers which segments it holds.
    fn reload(&self) -> Result<()> {
        self.reader.reload().map_err(|e| tantivy_err("reload", e))?;
        let s = self.reader.searcher();
        let key = segments_key(
            s.segment_readers()
                .iter()
                .map(|r| (r.segment_id(), r.delete_opstamp())),
        );
        self.loaded.store(key, Ordering::Release);
        Ok(())
    }

    /// The stamp of `meta.json` on disk; `None` in memory or when it cannot be read.
    fn meta_stamp(&self) -> Option<MetaStamp> {
        self.lazy.as_ref()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as i128)
                .unwrap_or(0);
            let m = std::fs::symlink_metadata(self.dir.join("meta.json")).ok()?;
            let mtime_ns = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
            Some(MetaStamp {
                dev: m.dev(),
                ino: m.ino(),
                len: m.len(),
                mtime_ns,
                settled: now - mtime_ns >= SETTLED.as_nanos() as i128,
            })
        }
        #[cfg(not(unix))]
        {
            None
        }
    }

    /// A writer, waiting (bounded) while another process holds the index's writer lock.
    pub fn writer(&self, threads: usize, budget: usize, timeout: Duration) -> Result<IndexWriter> {
        let w = until_free(timeout, || {
            match self
                .index
                .writer_with_num_threads::<TantivyDocument>(threads, budget)
            {
                Ok(w) => Ok(Some(w)),
                Err(TantivyError::LockFailure(LockError::LockBusy, _)) => Ok(None),
                Err(e) => Err(tantivy_err("writer", e)),
            }
        })?;
        w.set_merge_policy(Box::new(catch_up_merge_policy()));
        Ok(w)
    }

    /// Whether the next commit should be durable: always in memory or where lazy commits
    /// cannot be told from a crash, else once a window of lazy commits is [`DURABLE_EVERY`]
    /// old; where commits stay in memory, also once the overlay is that old.
    pub fn commit_due_durable(&self) -> bool {
        let Some(dir) = &self.lazy else {
            return true;
        };
        if self.tail_in_memory && dir.overlay_due() {
            return true;
        }
        if boot_id().is_none() {
            // Commits in memory need no boot id: nothing of them is on disk.
            return !self.tail_in_memory;
        }
        match std::fs::metadata(lazy_marker(&self.dir)).and_then(|m| m.modified()) {
            Ok(t) => t.elapsed().map_or(true, |age| age >= DURABLE_EVERY),
            Err(_) => false,
        }
    }

    /// Commits with `payload` (fsynced when `durable`, see [`LazyDir`]), merges segments
    /// holding deletions when that is cheap, and reloads the reader.
    pub fn commit(
        &self,
        writer: IndexWriter,
        payload: &Payload,
        merge_deletes_up_to: u32,
        durable: bool,
    ) -> Result<()> {
        self.committing(durable, || {
            self.commit_with(writer, payload, merge_deletes_up_to)
        })
    }

    /// Only the writer lock of this part (what an [`IndexWriter`] takes), waiting (bounded)
    /// while another process holds it: enough for [`Part::append_segment`].
    pub fn lock_writer(&self, timeout: Duration) -> Result<DirectoryLock> {
        until_free(timeout, || {
            match self
                .index
                .directory()
                .acquire_lock(&tantivy::directory::INDEX_WRITER_LOCK)
            {
                Ok(l) => Ok(Some(l)),
                Err(LockError::LockBusy) => Ok(None),
                Err(e) => Err(Error::internal(format!("index lock: {e}"))),
            }
        })
    }

    /// Whether the part lives on disk (not an index in memory for a read-only store).
    pub fn on_disk(&self) -> bool {
        self.lazy.is_some()
    }

    /// The size of the segment files this process holds in memory (see [`Overlay`]), when
    /// it holds any commit there.
    pub fn in_memory(&self) -> Option<usize> {
        self.lazy.as_ref()?.overlay_size()
    }

    /// How many segments of at most [`SMALL_SEGMENT`] documents the reader sees.
    pub fn small_segments(&self) -> usize {
        self.reader
            .searcher()
            .segment_readers()
            .iter()
            .filter(|r| r.max_doc() <= SMALL_SEGMENT)
            .count()
    }

    /// Commits `docs` as one new segment with `payload`, under the writer `lock` (released
    /// afterwards), without an [`IndexWriter`]: the commit of a few appended chunks.
    ///
    /// An `IndexWriter` gives every segment a 2^19-slot term table (zeroed, then scanned
    /// whole to serialise: the size tantivy derives from any memory budget it accepts) and
    /// starts six threads; a segment written here gets a table sized for a few documents
    /// (it grows if needed). Nothing is deleted and nothing merged: the caller takes an
    /// `IndexWriter` for deletions, and folds small segments once too many wait
    /// ([`Part::fold_small_segments`]).
    pub fn append_segment(
        &self,
        lock: DirectoryLock,
        docs: Vec<TantivyDocument>,
        payload: &Payload,
        durable: bool,
    ) -> Result<()> {
        let r = self.committing(durable, || {
            let err = |e: TantivyError| tantivy_err("append", e);
            let metas = self.index.load_metas().map_err(err)?;
            let mut next = metas.clone();
            let mut opstamp = metas.opstamp;
            if !docs.is_empty() {
                let segment = self.index.new_segment();
                let mut sw = tantivy::indexer::SegmentWriter::for_segment(
                    APPEND_TABLE_BUDGET,
                    segment.clone(),
                )
                .map_err(err)?;
                for document in docs {
                    opstamp += 1;
                    sw.add_document(tantivy::indexer::AddOperation { opstamp, document })
                        .map_err(err)?;
                }
                let max_doc = sw.max_doc();
                sw.finalize().map_err(err)?;
                let meta = segment.with_max_doc(max_doc).meta().clone();
                meta.untrack_temp_docstore();
                next.segments.push(meta);
            }
            next.opstamp = opstamp + 1;
            next.payload =
                Some(serde_json::to_string(payload).expect("invariant: payload serializes"));
            let mut bytes =
                serde_json::to_vec_pretty(&next).expect("invariant: index metas serialize");
            bytes.push(b'\n');
            self.write_metas(&bytes)
        });
        drop(lock);
        r
    }

    /// Commits `bytes` as `meta.json` the way an `IndexWriter` does (the files it names
    /// first, fsynced when durable, see [`LazyDir`]; then `meta.json`, atomically) and
    /// reloads the reader.
    fn write_metas(&self, bytes: &[u8]) -> Result<()> {
        let dir = self.index.directory();
        dir.sync_directory()
            .map_err(|e| Error::internal(format!("index sync: {e}")))?;
        dir.atomic_write(Path::new(META), bytes)
            .map_err(|e| Error::internal(format!("index metas: {e}")))?;
        self.reload()
    }

    /// Merges the small segments catch-ups leave (see [`Part::append_segment`]) into one once
    /// more than [`MAX_SMALL_SEGMENTS`] wait, fsynced when `durable`, and reloads the reader.
    ///
    /// The merge goes through an `IndexWriter` that indexes nothing, so it never allocates a
    /// segment writer (a 2^19-slot term table to zero and scan) for the few documents of a
    /// catch-up: those went into a segment of their own first. When another process holds the
    /// writer lock, nothing is merged now (`Ok(false)`); a later catch-up folds them.
    pub fn fold_small_segments(&self, durable: bool) -> Result<bool> {
        if self.small_segments() <= MAX_SMALL_SEGMENTS {
            return Ok(false);
        }
        let writer = match self.writer(1, 32_000_000, Duration::ZERO) {
            Ok(w) => w,
            Err(e) if e.kind == ErrorKind::Busy => return Ok(false),
            Err(e) => return Err(e),
        };
        self.committing(durable, || {
            // The segments as committed now, under the writer lock: the reader may be older.
            let ids: Vec<_> = self
                .index
                .searchable_segment_metas()
                .map_err(|e| tantivy_err("segments", e))?
                .iter()
                .filter(|m| m.max_doc() <= SMALL_SEGMENT)
                .map(|m| m.id())
                .collect();
            self.merge_then_reload(writer, if ids.len() > 1 { &ids } else { &[] })
        })?;
        Ok(true)
    }

    /// Merges the segments `ids` (none: nothing), waits for every merge the writer's policy
    /// started, lets the writer go and reloads the reader.
    fn merge_then_reload(
        &self,
        mut writer: IndexWriter,
        ids: &[tantivy::index::SegmentId],
    ) -> Result<()> {
        if !ids.is_empty() {
            writer
                .merge(ids)
                .wait()
                .map_err(|e| tantivy_err("merge", e))?;
        }
        writer
            .wait_merging_threads()
            .map_err(|e| tantivy_err("merge", e))?;
        self.reload()
    }

    /// Runs a commit `f`, fsynced when `durable`, else in this process's memory where the
    /// part keeps its tail there (see [`Overlay`]), else inside a window of lazy commits (see
    /// [`LazyDir`]).
    fn committing(&self, durable: bool, f: impl FnOnce() -> Result<()>) -> Result<()> {
        let Some(dir) = &self.lazy else {
            return f();
        };
        let marker = lazy_marker(&self.dir);
        let memory = !durable && self.tail_in_memory;
        let durable = durable || (!memory && boot_id().is_none());
        if !durable && !memory && !marker.exists() {
            // The window opens: a crash of the machine from here on is detected on open.
            let boot = boot_id().unwrap_or_default();
            write_durable(&marker, boot.as_bytes()).at("write index marker", &marker)?;
        }
        dir.set_keep(if durable {
            Keep::Durable
        } else if memory {
            Keep::Memory
        } else {
            Keep::Lazy
        });
        let r = f();
        dir.set_keep(Keep::Durable);
        // A commit in memory leaves `meta.json` on disk as it was: its stamp no longer tells
        // the payload.
        if let Ok(mut seen) = self.seen.lock() {
            *seen = None;
        }
        r?;
        if durable {
            match std::fs::remove_file(&marker) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => Err::<(), _>(e).at("remove index marker", &marker)?,
            }
        } else {
            memdir_store::failpoint::hit("index.after_lazy_commit");
        }
        Ok(())
    }

    fn commit_with(
        &self,
        mut writer: IndexWriter,
        payload: &Payload,
        merge_deletes_up_to: u32,
    ) -> Result<()> {
        let mut prepared = writer
            .prepare_commit()
            .map_err(|e| tantivy_err("commit", e))?;
        prepared
            .set_payload(&serde_json::to_string(payload).expect("invariant: payload serializes"));
        prepared.commit().map_err(|e| tantivy_err("commit", e))?;
        let metas = self
            .index
            .searchable_segment_metas()
            .map_err(|e| tantivy_err("segments", e))?;
        let with_deletes: Vec<_> = metas
            .iter()
            .filter(|m| m.num_deleted_docs() > 0)
            .map(|m| (m.id(), m.max_doc()))
            .collect();
        let docs: u32 = with_deletes.iter().map(|(_, n)| n).sum();
        // BM25 statistics count deleted documents until a merge drops them; merging keeps
        // scores identical to those of a clean rebuild.
        let ids: Vec<_> = if docs <= merge_deletes_up_to {
            with_deletes.iter().map(|(id, _)| *id).collect()
        } else {
            Vec::new()
        };
        self.merge_then_reload(writer, &ids)
    }
}

impl Part {
    /// Merges away every deleted document now, whatever the segments' sizes, and removes the
    /// files no longer used: after a forget, no index file keeps the forgotten text.
    pub fn purge_deleted(&self, timeout: Duration) -> Result<()> {
        // What this process keeps in memory lands first (deleting the disk files its merges
        // replaced); the merge below then works on the disk alone.
        self.land_kept(timeout)?;
        let mut writer = self.writer(1, 32_000_000, timeout)?;
        let ids: Vec<_> = self
            .index
            .searchable_segment_metas()
            .map_err(|e| tantivy_err("segments", e))?
            .iter()
            .filter(|m| m.num_deleted_docs() > 0)
            .map(|m| m.id())
            .collect();
        if !ids.is_empty() {
            writer
                .merge(&ids)
                .wait()
                .map_err(|e| tantivy_err("merge", e))?;
        }
        writer
            .garbage_collect_files()
            .wait()
            .map_err(|e| tantivy_err("garbage collection", e))?;
        writer
            .wait_merging_threads()
            .map_err(|e| tantivy_err("merge", e))?;
        self.reload()
    }

    /// [`Part::land_kept`] once the commits kept in memory are [`OVERLAY_MAX`] large (a
    /// catch-up that merged or re-read much), so that memory stays bounded.
    pub fn land_if_large(&self, timeout: Duration) -> Result<()> {
        self.land_beyond(OVERLAY_MAX, timeout)
    }

    /// [`Part::land_kept`] once the commits kept in memory hold `bytes` or more.
    fn land_beyond(&self, bytes: usize, timeout: Duration) -> Result<()> {
        if self.in_memory().is_some_and(|b| b >= bytes) {
            self.land_kept(timeout)?;
        }
        Ok(())
    }

    /// Writes what this process keeps in memory (see [`Overlay`]) to disk in a durable
    /// commit of the same state: afterwards `meta.json` on disk names no segment that a
    /// merge in memory replaced, and those segments' files are gone.
    pub fn land_kept(&self, timeout: Duration) -> Result<()> {
        if self.in_memory().is_none() {
            return Ok(());
        }
        let lock = self.lock_writer(timeout)?;
        let r = self.committing(true, || {
            // The metas as this process sees them now (the disk's, if another process has
            // committed meanwhile: then nothing of this process's is left to land).
            let bytes = self
                .index
                .directory()
                .atomic_read(Path::new(META))
                .map_err(|e| Error::internal(format!("index metas: {e}")))?;
            self.write_metas(&bytes)
        });
        drop(lock);
        r
    }
}

/// What identifies the documents a reader sees: its segments and their deletions.
fn segments_key(segments: impl Iterator<Item = (tantivy::index::SegmentId, Option<u64>)>) -> u64 {
    let mut h = blake3::Hasher::new();
    for (id, deletes) in segments {
        h.update(id.uuid_string().as_bytes());
        h.update(&deletes.map_or(u64::MAX, |d| d).to_le_bytes());
    }
    u64::from_le_bytes(
        h.finalize().as_bytes()[..8]
            .try_into()
            .expect("invariant: a blake3 hash has 32 bytes"),
    )
}

/// Calls `take` until it gets an index's writer lock (`Some`), backing off while another
/// process holds it (`None`), for at most `timeout`.
fn until_free<T>(timeout: Duration, mut take: impl FnMut() -> Result<Option<T>>) -> Result<T> {
    let start = Instant::now();
    let mut wait = 1u64;
    loop {
        if let Some(t) = take()? {
            return Ok(t);
        }
        if start.elapsed() > timeout {
            return Err(Error::new(
                ErrorKind::Busy,
                "search index busy: another memdir process is updating it",
            )
            .hint("retry in a moment")
            .detail("retry_after_ms", Value::from(250)));
        }
        std::thread::sleep(Duration::from_millis(wait));
        wait = (wait * 2).min(20);
    }
}

/// A segment this small is one a catch-up made (see [`Part::append_segment`]).
pub const SMALL_SEGMENT: u32 = 256;

/// Small segments a catch-up may leave; one more, and the catch-up folds them into one
/// ([`Part::fold_small_segments`]).
pub const MAX_SMALL_SEGMENTS: usize = 7;

/// The memory budget a directly written segment's term table is sized from: 2^13 slots.
const APPEND_TABLE_BUDGET: usize = 300_000;

/// How segments are merged as commits add them.
///
/// Each catch-up commit adds a segment of a few documents, and the commit waits for the
/// merges it starts. tantivy's default lumps every segment under 10,000 documents into one
/// level, so every eighth commit merged the tiny segments together with whatever mid-sized
/// segment sat below that size (37 ms for one of 5,000 documents, at every eighth search
/// after a write). Here levels span a factor of eight from 32 documents up, and eight
/// segments of a level merge into one of the next: a merge costs in proportion to its level
/// and comes as often as the level fills (the bottom one about 4 ms every eighth commit).
/// Segments of 100,000 documents or more (what a rebuild makes) are left alone.
fn catch_up_merge_policy() -> tantivy::indexer::LogMergePolicy {
    let mut p = tantivy::indexer::LogMergePolicy::default();
    p.set_min_layer_size(32);
    p.set_level_log_size(3.0);
    p.set_min_num_segments(8);
    p.set_max_docs_before_merge(100_000);
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::lazy_dir::MANAGED_LIST;
    use crate::index::{INDEX_SCHEMA_VERSION, SearchIndex};
    use tantivy::Term;
    use tantivy::schema::IndexRecordOption;
    /// Commits `n` documents to the chunk part as one segment, the way a catch-up does.
    fn commit_docs(idx: &SearchIndex, from: u64, n: u64) {
        let w = idx
            .chunks
            .writer(1, 32_000_000, Duration::from_secs(5))
            .unwrap();
        for i in from..from + n {
            w.add_document(doc_of(idx, i, &format!("turn {i}")))
                .unwrap();
        }
        let payload = payload_at(idx, (from + n) as i64);
        idx.chunks.commit(w, &payload, 0, false).unwrap();
    }

    fn segment_sizes(idx: &SearchIndex) -> Vec<(tantivy::index::SegmentId, u32)> {
        idx.chunks
            .index
            .searchable_segment_metas()
            .unwrap()
            .iter()
            .map(|m| (m.id(), m.max_doc()))
            .collect()
    }

    fn payload_at(idx: &SearchIndex, generation: i64) -> Payload {
        Payload {
            schema: INDEX_SCHEMA_VERSION,
            analyzer: idx.cfg.tokenizer_name(),
            epoch: "e".into(),
            generation,
            fingerprint: String::new(),
        }
    }

    fn doc_of(idx: &SearchIndex, i: u64, text: &str) -> TantivyDocument {
        let c = memdir_store::model::ChunkRecord {
            session_id: "s".into(),
            replica: "r".into(),
            seq: i,
            hlc: String::new(),
            ts: String::new(),
            project: String::new(),
            metadata: serde_json::json!({}),
            content: text.into(),
        };
        idx.chunk_doc("sessions/s/r.jsonl", &c, i, None)
    }

    fn hits(idx: &SearchIndex, word: &str) -> usize {
        let q = tantivy::query::TermQuery::new(
            Term::from_field_text(idx.chunk_fields.content, word),
            IndexRecordOption::Basic,
        );
        idx.chunks
            .reader
            .searcher()
            .search(&q, &tantivy::collector::Count)
            .unwrap()
    }

    #[test]
    fn small_segments_are_folded_into_one_once_too_many_wait_and_stay_searchable() {
        let dir = tempfile::tempdir().unwrap();
        let idx = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        let t = Duration::from_secs(5);
        let append = |i: u64| {
            let lock = idx.chunks.lock_writer(t).unwrap();
            idx.chunks
                .append_segment(
                    lock,
                    vec![doc_of(&idx, i, &format!("turn {i} apple"))],
                    &payload_at(&idx, i as i64 + 1),
                    false,
                )
                .unwrap();
        };
        for i in 0..MAX_SMALL_SEGMENTS as u64 {
            append(i);
            assert!(!idx.chunks.fold_small_segments(false).unwrap());
        }
        assert_eq!(idx.chunks.small_segments(), MAX_SMALL_SEGMENTS);
        append(MAX_SMALL_SEGMENTS as u64);
        // While another holder has the writer lock, nothing is folded and nothing fails.
        let lock = idx.chunks.lock_writer(t).unwrap();
        assert!(!idx.chunks.fold_small_segments(false).unwrap());
        drop(lock);
        assert_eq!(idx.chunks.small_segments(), MAX_SMALL_SEGMENTS + 1);
        assert!(idx.chunks.fold_small_segments(true).unwrap());
        assert_eq!(segment_sizes(&idx).len(), 1, "{:?}", segment_sizes(&idx));
        assert_eq!(hits(&idx, "appl"), MAX_SMALL_SEGMENTS + 1);
        // The payload of the last commit survives the merge, on disk too.
        let reopened = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert_eq!(
            reopened.chunks.refresh().unwrap().map(|p| p.generation),
            Some(MAX_SMALL_SEGMENTS as i64 + 1)
        );
        assert_eq!(hits(&reopened, "appl"), MAX_SMALL_SEGMENTS + 1);
    }

    /// Resident kilobytes of the maps of files under `dir` whose name ends in `suffix`.
    #[cfg(target_os = "linux")]
    fn resident_kib(dir: &Path, suffix: &str) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let dir = dir.to_string_lossy();
        let mut ours = false;
        let mut kib = 0;
        for line in smaps.lines() {
            let head = line.split_whitespace().next().unwrap_or("");
            if head.contains('-') && !head.ends_with(':') {
                let path = line.split_whitespace().nth(5).unwrap_or("");
                ours = path.contains(dir.as_ref()) && path.ends_with(suffix);
            } else if ours && let Some(v) = line.strip_prefix("Rss:") {
                kib += v
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap();
            }
        }
        kib
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn stored_documents_are_read_without_mapping_the_store_into_memory() {
        let dir = tempfile::tempdir().unwrap();
        let idx = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        let lock = idx.chunks.lock_writer(Duration::from_secs(5)).unwrap();
        // About 2 MiB of text that compresses poorly: a store of hundreds of blocks.
        let text = |i: u64| {
            (0..150)
                .map(|w| format!("w{:x}", (i * 7919 + w * 104_729) % 1_000_003))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let docs = (0..2_000).map(|i| doc_of(&idx, i, &text(i))).collect();
        idx.chunks
            .append_segment(lock, docs, &payload_at(&idx, 1), false)
            .unwrap();
        idx.chunks.refresh().unwrap();
        let s = idx.chunks.reader.searcher();
        let content = idx.chunk_fields.content;
        for i in (0..2_000u32).step_by(7) {
            let d: TantivyDocument = s.doc(tantivy::DocAddress::new(0, i)).unwrap();
            let got = d
                .get_first(content)
                .and_then(|v| tantivy::schema::Value::as_str(&v))
                .unwrap();
            assert_eq!(got, text(i as u64));
        }
        // Every block was read, and none of the store's pages are resident in this process
        // (through a map, each read would have mapped its neighbours as well).
        assert_eq!(resident_kib(dir.path(), ".store"), 0);
        // The postings, read through their map, are: the check can see resident pages.
        assert!(hits(&idx, text(3).split(' ').next().unwrap()) >= 1);
        assert!(resident_kib(dir.path(), ".idx") > 0);
    }

    #[test]
    fn segments_written_without_a_writer_are_searchable_and_reopen_with_their_payload() {
        let dir = tempfile::tempdir().unwrap();
        let idx = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        let t = Duration::from_secs(5);
        let lock = idx.chunks.lock_writer(t).unwrap();
        // While the lock is held, no writer (of this process or another) can be taken.
        let busy = idx.chunks.writer(1, 32_000_000, Duration::from_millis(50));
        assert_eq!(busy.err().map(|e| e.kind), Some(ErrorKind::Busy));
        let docs = vec![doc_of(&idx, 0, "apple pie"), doc_of(&idx, 1, "apple tart")];
        idx.chunks
            .append_segment(lock, docs, &payload_at(&idx, 1), false)
            .unwrap();
        assert_eq!(hits(&idx, "appl"), 2);
        let lock = idx.chunks.lock_writer(t).unwrap();
        idx.chunks
            .append_segment(
                lock,
                vec![doc_of(&idx, 2, "pear")],
                &payload_at(&idx, 2),
                true,
            )
            .unwrap();
        // Nothing to add still records the payload.
        let lock = idx.chunks.lock_writer(t).unwrap();
        idx.chunks
            .append_segment(lock, Vec::new(), &payload_at(&idx, 3), false)
            .unwrap();
        assert_eq!(idx.chunks.small_segments(), 2);
        // A writer afterwards sees them, and deletes among them.
        let w = idx.chunks.writer(1, 32_000_000, t).unwrap();
        w.delete_term(Term::from_field_text(idx.chunk_fields.content, "pear"));
        w.add_document(doc_of(&idx, 3, "plum")).unwrap();
        idx.chunks
            .commit(w, &payload_at(&idx, 4), 0, false)
            .unwrap();
        assert_eq!(hits(&idx, "pear"), 0);
        assert_eq!(hits(&idx, "plum"), 1);
        // The list of managed files (held back while lazy) names every file meta.json needs.
        let part = dir.path().join("chunks");
        let managed: Vec<String> =
            serde_json::from_slice(&std::fs::read(part.join(MANAGED_LIST)).unwrap()).unwrap();
        let metas = idx.chunks.index.load_metas().unwrap();
        assert!(!metas.segments.is_empty());
        for f in metas.list_segment_files() {
            let f = f.to_string_lossy().into_owned();
            // Candidates: a segment without deletions has no `.del` file.
            if part.join(&f).exists() {
                assert!(managed.contains(&f), "{f} not in {managed:?}");
            } else {
                assert!(f.ends_with(".del") || f.ends_with(".temp"), "{f} missing");
            }
        }
        drop(idx);
        let idx = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert_eq!(idx.chunks.payload(), Some(payload_at(&idx, 4)));
        assert_eq!(idx.chunks.reader.searcher().num_docs(), 3);
        assert_eq!(hits(&idx, "appl"), 2);
    }

    /// The files of a part on disk, without tantivy's lock files.
    fn files_of(dir: &Path) -> std::collections::BTreeSet<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.ends_with(".lock"))
            .collect()
    }

    fn append(idx: &SearchIndex, docs: Vec<TantivyDocument>, generation: i64, durable: bool) {
        let lock = idx.chunks.lock_writer(Duration::from_secs(5)).unwrap();
        idx.chunks
            .append_segment(lock, docs, &payload_at(idx, generation), durable)
            .unwrap();
    }

    /// A part keeping its commits in memory, with "wallabysecret" and "pear" committed to
    /// disk as one segment.
    fn secret_on_disk() -> (tempfile::TempDir, PathBuf, SearchIndex) {
        let dir = tempfile::tempdir().unwrap();
        let part = dir.path().join("chunks");
        let idx = SearchIndex::open_with(dir.path(), AnalyzerConfig::default(), true).unwrap();
        let docs = vec![doc_of(&idx, 0, "wallabysecret"), doc_of(&idx, 1, "pear")];
        append(&idx, docs, 1, true);
        (dir, part, idx)
    }

    /// Deletes the documents holding `word` and commits (not durably), merging the deletion
    /// away, as a catch-up does.
    fn delete_word(idx: &SearchIndex, word: &str, generation: i64) {
        let t = Duration::from_secs(5);
        let w = idx.chunks.writer(1, 32_000_000, t).unwrap();
        w.delete_term(Term::from_field_text(idx.chunk_fields.content, word));
        let payload = payload_at(idx, generation);
        idx.chunks.commit(w, &payload, 200_000, false).unwrap();
    }

    #[test]
    fn commits_kept_in_memory_write_no_file_and_land_whole_with_the_next_durable_one() {
        let dir = tempfile::tempdir().unwrap();
        let part = dir.path().join("chunks");
        let idx = SearchIndex::open_with(dir.path(), AnalyzerConfig::default(), true).unwrap();
        append(
            &idx,
            vec![doc_of(&idx, 0, "apple"), doc_of(&idx, 1, "apple")],
            1,
            true,
        );
        let on_disk = files_of(&part);
        let meta = std::fs::read(part.join(META)).unwrap();
        // Commits in memory: searchable here, nothing written, not even a lazy marker.
        append(&idx, vec![doc_of(&idx, 2, "pear")], 2, false);
        append(&idx, vec![doc_of(&idx, 3, "plum")], 3, false);
        assert_eq!(files_of(&part), on_disk);
        assert_eq!(std::fs::read(part.join(META)).unwrap(), meta);
        assert!(!lazy_marker(&part).exists());
        assert_eq!((hits(&idx, "pear"), hits(&idx, "plum")), (1, 1));
        assert_eq!(idx.chunks.refresh().unwrap(), Some(payload_at(&idx, 3)));
        assert!(idx.chunks.in_memory().is_some_and(|b| b > 0));
        // Another process sees the disk.
        let other = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert_eq!(other.chunks.refresh().unwrap(), Some(payload_at(&other, 1)));
        assert_eq!((hits(&other, "appl"), hits(&other, "pear")), (2, 0));
        // Folding in memory takes the small segment on disk in too; the disk keeps it, named
        // by its `meta.json`, until a durable commit lands the fold.
        for i in 0..MAX_SMALL_SEGMENTS as u64 {
            append(
                &idx,
                vec![doc_of(&idx, 4 + i, "quince")],
                4 + i as i64,
                false,
            );
        }
        assert!(idx.chunks.fold_small_segments(false).unwrap());
        assert_eq!(segment_sizes(&idx).len(), 1);
        assert_eq!(files_of(&part), on_disk);
        let other = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert!(intact(&other.chunks.index));
        assert_eq!(hits(&other, "appl"), 2);
        // Old or large enough, the overlay makes the next commit durable.
        assert!(!idx.chunks.commit_due_durable());
        if let Some(o) = idx
            .chunks
            .lazy
            .as_ref()
            .unwrap()
            .overlay()
            .unwrap()
            .as_mut()
        {
            o.since -= DURABLE_EVERY;
        }
        assert!(idx.chunks.commit_due_durable());
        let g = 4 + MAX_SMALL_SEGMENTS as i64;
        append(&idx, vec![doc_of(&idx, 99, "fig")], g, true);
        assert_eq!(idx.chunks.in_memory(), None);
        assert!(!idx.chunks.commit_due_durable());
        // Landed: only the files the new `meta.json` names, the folded-away segment gone.
        let metas = idx.chunks.index.load_metas().unwrap();
        let named: std::collections::BTreeSet<String> = metas
            .list_segment_files()
            .into_iter()
            .map(|f| f.to_string_lossy().into_owned())
            .filter(|f| part.join(f).exists())
            .collect();
        let segment_files: std::collections::BTreeSet<String> = files_of(&part)
            .into_iter()
            .filter(|f| !f.starts_with('.') && f != META)
            .collect();
        assert_eq!(segment_files, named);
        drop(idx);
        let reopened = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert!(intact(&reopened.chunks.index));
        assert_eq!(
            reopened.chunks.refresh().unwrap(),
            Some(payload_at(&reopened, g))
        );
        assert_eq!(reopened.chunks.reader.searcher().num_docs(), 12);
        for (w, n) in [
            ("appl", 2),
            ("pear", 1),
            ("plum", 1),
            ("quinc", 7),
            ("fig", 1),
        ] {
            assert_eq!(hits(&reopened, w), n, "{w}");
        }
    }

    #[test]
    fn a_commit_by_another_process_replaces_the_commits_kept_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let idx = SearchIndex::open_with(dir.path(), AnalyzerConfig::default(), true).unwrap();
        append(&idx, vec![doc_of(&idx, 0, "apple")], 1, true);
        append(&idx, vec![doc_of(&idx, 1, "pear")], 2, false);
        // Another process indexes the same change itself, lazily.
        let other = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert_eq!(other.chunks.refresh().unwrap(), Some(payload_at(&other, 1)));
        append(&other, vec![doc_of(&other, 1, "pear")], 2, false);
        // This process now reads the disk: the change once, not twice.
        assert_eq!(idx.chunks.refresh().unwrap(), Some(payload_at(&idx, 2)));
        assert_eq!(idx.chunks.in_memory(), None);
        assert_eq!(hits(&idx, "pear"), 1);
        assert_eq!(idx.chunks.reader.searcher().num_docs(), 2);
        // And goes on in memory from there; a durable commit gives it to everyone.
        append(&idx, vec![doc_of(&idx, 2, "plum")], 3, false);
        assert_eq!(other.chunks.refresh().unwrap(), Some(payload_at(&other, 2)));
        assert_eq!(hits(&other, "plum"), 0);
        append(&idx, Vec::new(), 4, true);
        assert_eq!(other.chunks.refresh().unwrap(), Some(payload_at(&other, 4)));
        assert_eq!(hits(&other, "plum"), 1);
        assert_eq!(other.chunks.reader.searcher().num_docs(), 3);
    }

    #[test]
    fn a_purge_lands_what_is_kept_in_memory_and_removes_a_document_merged_away_there() {
        let (dir, part, idx) = secret_on_disk();
        let holding = |word: &str| {
            files_of(&part)
                .into_iter()
                .filter(|f| {
                    std::fs::read(part.join(f))
                        .unwrap()
                        .windows(word.len())
                        .any(|w| w == word.as_bytes())
                })
                .count()
        };
        assert!(holding("wallabysecret") > 0);
        // A forget's catch-up in memory deletes the document and merges its segment there.
        delete_word(&idx, "wallabysecret", 2);
        assert_eq!((hits(&idx, "wallabysecret"), hits(&idx, "pear")), (0, 1));
        // The disk still names the old segment until the merge lands.
        assert!(holding("wallabysecret") > 0);
        idx.chunks.purge_deleted(Duration::from_secs(5)).unwrap();
        assert_eq!(holding("wallabysecret"), 0);
        assert_eq!(idx.chunks.in_memory(), None);
        let reopened = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert_eq!(
            reopened.chunks.refresh().unwrap(),
            Some(payload_at(&reopened, 2))
        );
        assert_eq!(
            (hits(&reopened, "wallabysecret"), hits(&reopened, "pear")),
            (0, 1)
        );
    }

    #[test]
    fn a_landing_that_fails_before_its_meta_json_leaves_every_file_kept_in_memory_readable() {
        let dir = tempfile::tempdir().unwrap();
        let idx = SearchIndex::open_with(dir.path(), AnalyzerConfig::default(), true).unwrap();
        append(&idx, vec![doc_of(&idx, 0, "apple")], 1, true);
        append(&idx, vec![doc_of(&idx, 1, "pear")], 2, false);
        append(&idx, vec![doc_of(&idx, 2, "plum")], 3, false);
        let lazy = idx.chunks.lazy.as_ref().unwrap();
        // A durable commit whose `meta.json` no longer names the last segment (its documents
        // deleted, say) writes the files it names, then fails to write that `meta.json`.
        let mut meta: Value =
            serde_json::from_slice(&lazy.atomic_read(Path::new(META)).unwrap()).unwrap();
        meta["segments"].as_array_mut().unwrap().pop();
        lazy.land(&serde_json::to_vec(&meta).unwrap()).unwrap();
        // The overlay still names that segment, and still holds its files.
        idx.chunks.reload().unwrap();
        assert_eq!((hits(&idx, "pear"), hits(&idx, "plum")), (1, 1));
        // The segment that did reach the disk is merged away in memory next: its disk copy
        // (named by no `meta.json` on disk) goes with it, not left behind for good.
        delete_word(&idx, "pear", 4);
        delete_word(&idx, "nothing", 5);
        append(&idx, vec![doc_of(&idx, 3, "fig")], 6, true);
        let metas = idx.chunks.index.load_metas().unwrap();
        let named: std::collections::BTreeSet<String> = metas
            .list_segment_files()
            .into_iter()
            .map(|f| f.to_string_lossy().into_owned())
            .collect();
        let part = dir.path().join("chunks");
        for f in files_of(&part) {
            assert!(
                f.starts_with('.') || f == META || named.contains(&f),
                "{f} left"
            );
        }
        let reopened = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert!(intact(&reopened.chunks.index));
        assert_eq!(reopened.chunks.reader.searcher().num_docs(), 3);
        assert_eq!((hits(&reopened, "pear"), hits(&reopened, "plum")), (0, 1));
    }

    #[test]
    fn a_disk_file_replaced_in_memory_stays_managed_when_the_overlay_is_dropped() {
        let (dir, part, idx) = secret_on_disk();
        let old = files_of(&part);
        // In memory, the document is deleted and its segment merged away: the disk files are
        // kept while `meta.json` on disk names them.
        delete_word(&idx, "wallabysecret", 2);
        // The next commit's garbage collection (the reader no longer holds that segment)
        // finds those files unused.
        let w = idx
            .chunks
            .writer(1, 32_000_000, Duration::from_secs(5))
            .unwrap();
        w.add_document(doc_of(&idx, 2, "fig")).unwrap();
        idx.chunks
            .commit(w, &payload_at(&idx, 3), 200_000, false)
            .unwrap();
        assert!(old.is_subset(&files_of(&part)));
        // ... and stay in tantivy's list of managed files, so that whichever garbage
        // collection runs once nothing names them deletes them.
        let lazy = idx.chunks.lazy.as_ref().unwrap();
        let managed: Vec<String> =
            serde_json::from_slice(&lazy.atomic_read(Path::new(MANAGED_LIST)).unwrap()).unwrap();
        for f in old.iter().filter(|f| !f.starts_with('.') && *f != META) {
            assert!(managed.contains(f), "{f} not in {managed:?}");
        }
        // Another process applies the same change on disk before this one lands anything.
        let other = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        delete_word(&other, "wallabysecret", 2);
        // This process drops its overlay; the old files are still its to delete.
        assert_eq!(idx.chunks.refresh().unwrap(), Some(payload_at(&idx, 2)));
        assert_eq!(idx.chunks.in_memory(), None);
        idx.chunks.purge_deleted(Duration::from_secs(5)).unwrap();
        let left: Vec<String> = old
            .iter()
            .filter(|f| !f.starts_with('.') && *f != META)
            .filter(|f| part.join(f).exists())
            .cloned()
            .collect();
        assert_eq!(left, Vec::<String>::new());
        assert_eq!((hits(&idx, "wallabysecret"), hits(&idx, "pear")), (0, 1));
    }

    #[test]
    fn commits_kept_in_memory_land_once_they_are_large() {
        let dir = tempfile::tempdir().unwrap();
        let idx = SearchIndex::open_with(dir.path(), AnalyzerConfig::default(), true).unwrap();
        let t = Duration::from_secs(5);
        append(&idx, vec![doc_of(&idx, 0, "apple")], 1, true);
        append(&idx, vec![doc_of(&idx, 1, "pear")], 2, false);
        let held = idx.chunks.in_memory().unwrap();
        assert!(held > 0);
        // Below the bound nothing lands; at it, everything does.
        idx.chunks.land_beyond(held + 1, t).unwrap();
        assert_eq!(idx.chunks.in_memory(), Some(held));
        assert!(OVERLAY_MAX > held);
        idx.chunks.land_if_large(t).unwrap();
        assert_eq!(idx.chunks.in_memory(), Some(held));
        idx.chunks.land_beyond(held, t).unwrap();
        assert_eq!(idx.chunks.in_memory(), None);
        let other = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert_eq!(other.chunks.refresh().unwrap(), Some(payload_at(&other, 2)));
        assert_eq!(hits(&other, "pear"), 1);
    }

    #[test]
    fn small_commits_merge_among_themselves_not_into_a_mid_sized_segment() {
        let dir = tempfile::tempdir().unwrap();
        let idx = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        commit_docs(&idx, 0, 5_000);
        let mid = segment_sizes(&idx)[0].0;
        for i in 0..40 {
            commit_docs(&idx, 5_000 + i, 1);
        }
        let sizes = segment_sizes(&idx);
        // tantivy's default policy merged the 5,000-document segment with every seventh small
        // one (all under 10,000 documents shared one level).
        assert!(
            sizes.contains(&(mid, 5_000)),
            "the mid-sized segment was merged: {sizes:?}"
        );
        // The small ones did merge: 40 commits, far fewer segments.
        assert!(sizes.len() <= 10, "{sizes:?}");
        let total: u32 = sizes.iter().map(|s| s.1).sum();
        assert_eq!(total, 5_040);
        assert_eq!(idx.chunks.reader.searcher().num_docs(), 5_040);
    }
}
