//! The indexer: keeps every derived index caught up with the files.
//!
//! Who writes an index, and when: nobody on the write path. A write records a change in the
//! ledger's change feed and returns. Before answering, a search compares the feed's newest
//! change of each index's kinds with the generation that index recorded at its last commit;
//! if one is behind, that process catches it up: it takes the index's writer (one writer at a
//! time across processes, waiting with a deadline), reads the feed's changes together with
//! the generation they reach and the touched segments' lengths under the store lock (a few
//! `stat`s), reads the new bytes without the store lock, applies them, and commits with the
//! new generation as payload. A process that finds the writer taken waits, then re-checks:
//! usually the other process has done the work.
//!
//! Every derived index implements [`DerivedIndex`]: the kinds of change it consumes, its last
//! payload, a writer that applies changes or rebuilds from the files, and document counts for
//! verify-store. The pipeline here knows nothing else about it, so another index (vectors, say)
//! plugs in beside the chunk and category indexes by implementing the trait and being listed
//! in [`derived`].
use crate::service::Indexing;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use serde_json::{Value, json};
use tantivy::IndexWriter;
use tantivy::collector::Count;
use tantivy::query::TermQuery;
use tantivy::schema::IndexRecordOption;

use crate::ledger::{ChangeKind, Ledger};
use crate::service::{Inner, Memdir, Sync};
use memdir_api::ReindexResponse;
use memdir_api::error::{Error, Result};
use memdir_index::index::{
    INDEX_SCHEMA_VERSION, Payload, SearchIndex, category_term, seg_term, session_term,
};
use memdir_index::search;
use memdir_store::model::{CategoryName, ChunkRecord};
use memdir_store::note::NotePath;
use memdir_store::{self as store, Layout, segment};

/// A progress callback: (done, total).
pub type Progress<'a> = &'a dyn Fn(u64, u64);

/// One entry of the change feed: (generation, kind, key).
pub(crate) type Change = (i64, ChangeKind, String);

/// The files as of one generation of the feed.
pub(crate) struct Snapshot {
    pub(crate) epoch: String,
    pub(crate) generation: i64,
    /// Length of each touched (or, for a rebuild, every) segment file at `generation`.
    pub(crate) lens: BTreeMap<String, u64>,
}

/// What one catch-up pass gives an index to work from.
pub(crate) struct Pass<'a> {
    pub(crate) memdir: &'a Memdir,
    pub(crate) inner: &'a Inner,
    pub(crate) snap: &'a Snapshot,
}

/// What verify-store learns from one index: its documents, and where they differ from the
/// files.
pub(crate) struct Counts {
    pub(crate) docs: u64,
    pub(crate) mismatches: Vec<Value>,
}

/// A derived index: kept current from the change feed, rebuildable from the files.
pub(crate) trait DerivedIndex {
    /// Its name in status and verify-store.
    fn name(&self) -> &'static str;
    /// The kinds of change it consumes.
    fn kinds(&self) -> &'static [ChangeKind];
    /// The payload of its newest commit (by any process).
    fn payload(&self) -> Result<Option<Payload>>;
    /// Takes its writer, waiting (bounded) for another process's; `full` gives a rebuild more
    /// threads and memory.
    fn writer(&self, full: bool) -> Result<Box<dyn IndexWrite + '_>>;
    /// Its documents compared with the files, for verify-store.
    fn counts(&self, memdir: &Memdir) -> Result<Counts>;
    /// Whether its next commit must be durable (fsynced), or may be lazy (see `index::LazyDir`).
    fn due_durable(&self) -> bool;
    /// The fingerprint of what its newest commit was built from: the files, the analyzer and
    /// the schema (equal fingerprints, equal search results).
    fn fingerprint(&self) -> Result<Option<String>> {
        Ok(self.payload()?.as_ref().map(index_fingerprint))
    }
}

/// An update in progress, holding the index's writer.
pub(crate) trait IndexWrite {
    /// Applies the changes of its kinds newer than `absorbed`.
    fn apply(&mut self, pass: &Pass<'_>, changes: &[Change], absorbed: i64) -> Result<()>;
    /// Replaces every document with what the files hold.
    fn rebuild(&mut self, pass: &Pass<'_>, progress: Option<Progress<'_>>) -> Result<()>;
    /// Whether [`IndexWrite::rebuild`] can run on it (else the caller takes a rebuild's
    /// writer instead).
    fn can_rebuild(&self) -> bool {
        true
    }
    /// Commits the update with `payload`, fsynced when `durable`. `false`: nothing was
    /// committed, because another process committed first (the caller starts again).
    fn commit(self: Box<Self>, payload: &Payload, durable: bool) -> Result<bool>;
}

/// The derived indexes of a search index, in the order they are caught up.
/// The derived indexes over `idx`; their writers wait at most `lock_timeout` for the index
/// lock.
pub(crate) fn derived(
    idx: &SearchIndex,
    lock_timeout: std::time::Duration,
) -> Vec<Box<dyn DerivedIndex + '_>> {
    vec![
        Box::new(ChunkIndex { idx, lock_timeout }),
        Box::new(CategoryIndex { idx, lock_timeout }),
    ]
}

fn index_err(e: tantivy::TantivyError) -> Error {
    Error::internal(format!("index: {e}"))
}

fn count(s: &tantivy::Searcher, term: tantivy::Term) -> Result<u64> {
    s.search(&TermQuery::new(term, IndexRecordOption::Basic), &Count)
        .map(|n| n as u64)
        .map_err(|e| Error::internal(e.to_string()))
}

// ---------------------------------------------------------------------------------------------
// Session chunks
// ---------------------------------------------------------------------------------------------

/// The chunk index: one document per chunk, numbered by its position in its session.
struct ChunkIndex<'a> {
    idx: &'a SearchIndex,
    lock_timeout: std::time::Duration,
}

struct ChunkWrite<'a> {
    idx: &'a SearchIndex,
    sink: ChunkSink,
    lock_timeout: std::time::Duration,
}

/// Where a chunk catch-up's operations go.
enum ChunkSink {
    /// A tantivy writer: rebuilds, and every catch-up of an index held in memory.
    Writer(IndexWriter),
    /// Only the index's writer lock, with the operations kept in order: when they turn out
    /// to be a few additions (appended chunks, the usual catch-up) they are written as one
    /// segment directly (`index::Part::append_segment`, about half the cost); otherwise they
    /// go to a writer at commit.
    Direct {
        lock: tantivy::directory::DirectoryLock,
        /// The payload when the lock was taken: a writer taken at commit (after the lock
        /// was let go) must find it unchanged, or another process has committed meanwhile.
        base: Option<Payload>,
        ops: Vec<ChunkOp>,
    },
}

enum ChunkOp {
    Add(tantivy::TantivyDocument),
    Delete(tantivy::Term),
}

/// At most this many documents are written as one segment without a writer.
const DIRECT_MAX_DOCS: usize = 1_000;

/// Documents of a session handed to one indexing thread at a time. Small: tantivy queues up
/// to 10,000 of these runs while its threads index, so each document more per run lets a
/// rebuild hold that many more in memory (at 256, 1M chunks took 930 MB instead of 480).
const BATCH_DOCS: usize = 8;

impl ChunkSink {
    fn add_document(&mut self, d: tantivy::TantivyDocument) -> Result<()> {
        match self {
            ChunkSink::Writer(w) => w.add_document(d).map(|_| ()).map_err(index_err),
            ChunkSink::Direct { ops, .. } => {
                ops.push(ChunkOp::Add(d));
                Ok(())
            }
        }
    }

    /// Adds `docs` in order, handed to one indexing thread as a whole: a chunk and the next
    /// one, which repeats its text as the previous turn, are then analysed on the same thread,
    /// which remembers the terms (see the index's analyzer).
    fn add_documents(&mut self, docs: Vec<tantivy::TantivyDocument>) -> Result<()> {
        match self {
            ChunkSink::Writer(w) => w
                .run(docs.into_iter().map(tantivy::indexer::UserOperation::Add))
                .map(|_| ())
                .map_err(index_err),
            ChunkSink::Direct { ops, .. } => {
                ops.extend(docs.into_iter().map(ChunkOp::Add));
                Ok(())
            }
        }
    }

    fn delete_term(&mut self, t: tantivy::Term) {
        match self {
            ChunkSink::Writer(w) => {
                w.delete_term(t);
            }
            ChunkSink::Direct { ops, .. } => ops.push(ChunkOp::Delete(t)),
        }
    }
}

impl DerivedIndex for ChunkIndex<'_> {
    fn name(&self) -> &'static str {
        "chunks"
    }
    fn kinds(&self) -> &'static [ChangeKind] {
        &[ChangeKind::Append, ChangeKind::Segment]
    }
    fn payload(&self) -> Result<Option<Payload>> {
        self.idx.chunks.refresh()
    }
    fn due_durable(&self) -> bool {
        self.idx.chunks.commit_due_durable()
    }
    fn writer(&self, full: bool) -> Result<Box<dyn IndexWrite + '_>> {
        // A rebuild writes few, large segments: each segment costs every later search its
        // own term lookups and scorers. At 512 MB per thread 1M chunks make two segments
        // (nine at 256 MB), for a peak of about 480 MB while rebuilding and no longer rebuild.
        let part = &self.idx.chunks;
        let sink = if full {
            ChunkSink::Writer(part.writer(2, 512_000_000, self.lock_timeout)?)
        } else if part.on_disk() {
            let lock = part.lock_writer(self.lock_timeout)?;
            ChunkSink::Direct {
                lock,
                base: part.refresh()?,
                ops: Vec::new(),
            }
        } else {
            ChunkSink::Writer(part.writer(1, 32_000_000, self.lock_timeout)?)
        };
        Ok(Box::new(ChunkWrite {
            idx: self.idx,
            sink,
            lock_timeout: self.lock_timeout,
        }))
    }
    fn counts(&self, memdir: &Memdir) -> Result<Counts> {
        let layout = memdir.layout();
        let s = self.idx.chunks.reader.searcher();
        let mut mismatches = Vec::new();
        let mut chunks = 0u64;
        for (_, dir) in store::list_session_dirs(layout)? {
            for f in store::list_segments(layout, &dir)? {
                let rel = f.rel.to_string_lossy().into_owned();
                let n = segment::read(&layout.root.join(&f.rel))
                    .map(|s| s.chunks.len() as u64)
                    .unwrap_or(0);
                chunks += n;
                let indexed = count(&s, seg_term(self.idx, &rel))?;
                if indexed != n {
                    mismatches.push(json!({"path": rel, "files": n, "index": indexed}));
                }
            }
        }
        let docs = s.num_docs();
        if docs != chunks {
            mismatches.push(json!({"path": "sessions/", "files": chunks, "index": docs}));
        }
        Ok(Counts { docs, mismatches })
    }
}

impl ChunkWrite<'_> {
    /// Indexes what was appended to a session of several segments without re-indexing the
    /// session, when every new chunk sorts after every chunk already indexed (a local append
    /// always does: its HLC is the newest): their ranks are then the next positions and no
    /// other chunk moves. Returns false, having done nothing, when that does not hold (a
    /// synced segment whose chunks interleave), and the caller re-indexes the session.
    fn append_to_session(
        &mut self,
        pass: &Pass<'_>,
        dir: &std::path::Path,
        appends: &BTreeMap<String, u64>,
    ) -> Result<bool> {
        fn key(c: &ChunkRecord) -> (&str, &str, u64) {
            (&c.hlc, &c.replica, c.seq)
        }
        let (mut old, mut new) = (Vec::new(), Vec::new());
        for f in &store::list_segments(pass.memdir.layout(), dir)? {
            let rel = f.rel.to_string_lossy().into_owned();
            let path = pass.memdir.layout().root.join(&f.rel);
            let end = pass.snap.lens.get(&rel).copied().or(Some(f.len));
            let from = appends.get(&rel).copied();
            let indexed = read_prefix(&path, 0, from.or(end))?;
            old.extend(indexed.chunks);
            if let Some(from) = from {
                let added = read_prefix(&path, from, end)?;
                new.extend(added.chunks.into_iter().map(|c| (rel.clone(), c)));
            }
        }
        let last = old.iter().max_by_key(|c| key(c));
        let Some(first_new) = new.iter().map(|(_, c)| key(c)).min() else {
            return Ok(false);
        };
        if last.is_some_and(|l| key(l) >= first_new) {
            return Ok(false);
        }
        let idx = self.idx;
        let session = &new[0].1.session_id;
        let before = count(&idx.chunks.reader.searcher(), session_term(idx, session))?;
        if before != old.len() as u64 {
            return Ok(false);
        }
        new.sort_by(|(_, a), (_, b)| key(a).cmp(&key(b)));
        let mut prev = last.map(|c| c.content.clone());
        for (i, (rel, c)) in new.into_iter().enumerate() {
            self.sink
                .add_document(idx.chunk_doc(&rel, &c, before + i as u64, prev.as_deref()))?;
            prev = Some(c.content);
        }
        Ok(true)
    }

    /// Re-reads a whole session directory (every segment, numbered by rank over all).
    fn index_session(&mut self, pass: &Pass<'_>, dir: &std::path::Path) -> Result<u64> {
        let idx = self.idx;
        let mut all = Vec::new();
        let mut session_id = None;
        let segs = store::list_segments(pass.memdir.layout(), dir)?;
        for f in &segs {
            let rel = f.rel.to_string_lossy().into_owned();
            let seg = read_prefix(
                &pass.memdir.layout().root.join(&f.rel),
                0,
                pass.snap.lens.get(&rel).copied().or(Some(f.len)),
            )?;
            for c in seg.chunks {
                session_id.get_or_insert_with(|| c.session_id.clone());
                all.push((rel.clone(), c));
            }
        }
        if let Some(id) = &session_id {
            self.sink.delete_term(session_term(idx, id));
        }
        for f in &segs {
            self.sink
                .delete_term(seg_term(idx, &f.rel.to_string_lossy()));
        }
        all.sort_by(|(_, a), (_, b)| (&a.hlc, &a.replica, a.seq).cmp(&(&b.hlc, &b.replica, b.seq)));
        let n = all.len() as u64;
        for from in (0..all.len()).step_by(BATCH_DOCS) {
            let docs = (from..all.len().min(from + BATCH_DOCS))
                .map(|i| {
                    let prev = i.checked_sub(1).map(|p| all[p].1.content.as_str());
                    idx.chunk_doc(&all[i].0, &all[i].1, i as u64, prev)
                })
                .collect();
            self.sink.add_documents(docs)?;
        }
        Ok(n)
    }
}

impl IndexWrite for ChunkWrite<'_> {
    fn apply(&mut self, pass: &Pass<'_>, changes: &[Change], absorbed: i64) -> Result<()> {
        let idx = self.idx;
        let layout = pass.memdir.layout();
        let mut full_segments = BTreeSet::new();
        let mut appends: BTreeMap<String, u64> = BTreeMap::new();
        for (g, kind, key) in changes {
            if *g <= absorbed {
                continue;
            }
            match kind {
                ChangeKind::Segment => {
                    full_segments.insert(key.clone());
                }
                ChangeKind::Append => {
                    let (rel, from) = key.split_once('\n').unwrap_or((key, "0"));
                    let from: u64 = from.parse().unwrap_or(0);
                    let e = appends.entry(rel.to_string()).or_insert(from);
                    *e = (*e).min(from);
                }
                ChangeKind::Category | ChangeKind::Note => {}
            }
        }
        // Sessions with more than one segment are numbered by rank over all segments, so any
        // change to one of them re-reads the whole session.
        let mut sessions_full = BTreeSet::new();
        for rel in full_segments.iter().chain(appends.keys()) {
            let dir = std::path::Path::new(rel)
                .parent()
                .map(|p| p.to_path_buf())
                .unwrap_or_default();
            if store::list_segments(layout, &dir)?.len() > 1 {
                sessions_full.insert(dir);
            }
        }
        for dir in &sessions_full {
            let rewritten = full_segments
                .iter()
                .any(|rel| std::path::Path::new(rel).parent() == Some(dir.as_path()));
            if rewritten || !self.append_to_session(pass, dir, &appends)? {
                self.index_session(pass, dir)?;
            }
        }
        let in_full = |rel: &str| {
            sessions_full
                .iter()
                .any(|d| std::path::Path::new(rel).parent() == Some(d.as_path()))
        };
        for rel in &full_segments {
            if in_full(rel) {
                continue;
            }
            self.sink.delete_term(seg_term(idx, rel));
            let seg = read_prefix(&layout.root.join(rel), 0, pass.snap.lens.get(rel).copied())?;
            let mut prev: Option<String> = None;
            for (i, c) in order_segment(seg.chunks).into_iter().enumerate() {
                self.sink
                    .add_document(idx.chunk_doc(rel, &c, i as u64, prev.as_deref()))?;
                prev = Some(c.content);
            }
        }
        for (rel, from) in &appends {
            if in_full(rel) || full_segments.contains(rel) {
                continue;
            }
            let seg = read_prefix(
                &layout.root.join(rel),
                *from,
                pass.snap.lens.get(rel).copied(),
            )?;
            if seg.chunks.is_empty() {
                continue;
            }
            let before = count(&idx.chunks.reader.searcher(), seg_term(idx, rel))?;
            let mut prev = match (before, seg.chunks.first()) {
                (0, _) | (_, None) => None,
                (b, Some(c)) => {
                    search::stored_content_at(&search::View::of(idx), &c.session_id, b - 1)?
                }
            };
            for (i, c) in order_segment(seg.chunks).into_iter().enumerate() {
                self.sink.add_document(idx.chunk_doc(
                    rel,
                    &c,
                    before + i as u64,
                    prev.as_deref(),
                ))?;
                prev = Some(c.content);
            }
        }
        Ok(())
    }

    fn can_rebuild(&self) -> bool {
        matches!(self.sink, ChunkSink::Writer(_))
    }

    fn rebuild(&mut self, pass: &Pass<'_>, progress: Option<Progress<'_>>) -> Result<()> {
        let ChunkSink::Writer(w) = &self.sink else {
            return Err(Error::internal("invariant: a rebuild has a writer"));
        };
        w.delete_all_documents().map_err(index_err)?;
        let layout = pass.memdir.layout();
        let total: u64 = pass.snap.lens.values().sum();
        let mut done = 0u64;
        for (_, dir) in store::list_session_dirs(layout)? {
            self.index_session(pass, &dir)?;
            for f in store::list_segments(layout, &dir)? {
                done += pass
                    .snap
                    .lens
                    .get(&*f.rel.to_string_lossy())
                    .copied()
                    .unwrap_or(0);
            }
            if let Some(p) = progress {
                p(done, total);
            }
        }
        Ok(())
    }

    fn commit(self: Box<Self>, payload: &Payload, durable: bool) -> Result<bool> {
        let part = &self.idx.chunks;
        let (lock, base, ops) = match self.sink {
            ChunkSink::Writer(w) => {
                part.commit(w, payload, 200_000, durable)?;
                return Ok(true);
            }
            ChunkSink::Direct { lock, base, ops } => (lock, base, ops),
        };
        if ops.len() <= DIRECT_MAX_DOCS && ops.iter().all(|o| matches!(o, ChunkOp::Add(_))) {
            let docs = ops
                .into_iter()
                .filter_map(|o| match o {
                    ChunkOp::Add(d) => Some(d),
                    ChunkOp::Delete(_) => None,
                })
                .collect();
            part.append_segment(lock, docs, payload, durable)?;
            part.fold_small_segments(durable)?;
            return Ok(true);
        }
        // Deletions (a session re-read, a segment changed by hand) or many documents: a
        // writer, which takes the lock itself. Another process may commit in the moment
        // between; then the operations may be stale, and the catch-up starts again.
        drop(lock);
        let w = part.writer(1, 32_000_000, self.lock_timeout)?;
        if part.refresh()? != base {
            return Ok(false);
        }
        for op in ops {
            match op {
                ChunkOp::Add(d) => {
                    w.add_document(d).map_err(index_err)?;
                }
                ChunkOp::Delete(t) => {
                    w.delete_term(t);
                }
            }
        }
        part.commit(w, payload, 200_000, durable)?;
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------
// Categories
// ---------------------------------------------------------------------------------------------

/// The category index: one document per leaf of each category.
struct CategoryIndex<'a> {
    idx: &'a SearchIndex,
    lock_timeout: std::time::Duration,
}

struct CategoryWrite<'a> {
    idx: &'a SearchIndex,
    writer: IndexWriter,
}

impl DerivedIndex for CategoryIndex<'_> {
    fn name(&self) -> &'static str {
        "categories"
    }
    fn kinds(&self) -> &'static [ChangeKind] {
        &[ChangeKind::Category, ChangeKind::Note]
    }
    fn payload(&self) -> Result<Option<Payload>> {
        self.idx.categories.refresh()
    }
    fn due_durable(&self) -> bool {
        self.idx.categories.commit_due_durable()
    }
    fn writer(&self, _full: bool) -> Result<Box<dyn IndexWrite + '_>> {
        let writer = self
            .idx
            .categories
            .writer(1, 16_000_000, self.lock_timeout)?;
        Ok(Box::new(CategoryWrite {
            idx: self.idx,
            writer,
        }))
    }
    fn counts(&self, memdir: &Memdir) -> Result<Counts> {
        let layout = memdir.layout();
        let s = self.idx.categories.reader.searcher();
        let mut mismatches = Vec::new();
        for name in store::list_category_files(layout)?.0 {
            if let Some(f) = store::read_category(layout, &name)?
                && let Ok(c) = &f.content
            {
                let want = self
                    .idx
                    .category_docs(name.as_str(), c, &f.hash, "", "")
                    .len() as u64;
                let got = count(&s, category_term(self.idx, name.as_str()))?;
                if want != got {
                    mismatches.push(json!({"path": Layout::category_rel(&name).display().to_string(), "files": want, "index": got}));
                }
            }
        }
        for l in memdir_store::note::list(layout)?.0 {
            let Ok(p) = NotePath::new(&l.path) else {
                continue;
            };
            if let Some(f) = memdir_store::note::read(layout, &p)?
                && let Ok(t) = &f.text
            {
                let want = self.idx.note_docs(p.as_str(), t, &f.hash, "", "").len() as u64;
                let key = memdir_index::index::note_key(p.as_str());
                let got = count(&s, category_term(self.idx, &key))?;
                if want != got {
                    mismatches.push(
                        json!({"path": p.rel().display().to_string(), "files": want, "index": got}),
                    );
                }
            }
        }
        Ok(Counts {
            docs: s.num_docs(),
            mismatches,
        })
    }
}

impl CategoryWrite<'_> {
    /// Replaces a note's documents with what its file holds now.
    fn index_note(&self, pass: &Pass<'_>, path: &str) -> Result<()> {
        let (idx, gw) = (self.idx, &self.writer);
        let key = memdir_index::index::note_key(path);
        gw.delete_term(category_term(idx, &key));
        let Ok(p) = NotePath::new(path) else {
            return Ok(());
        };
        let layout = pass.memdir.layout();
        if let Some(f) = memdir_store::note::read(layout, &p)?
            && let Ok(text) = &f.text
        {
            let head = memdir_store::note::head(layout, &p)?
                .filter(|h| h.hash.as_deref() == Some(f.hash.as_str()));
            let (at, by) = match &head {
                Some(h) => (h.ts.clone(), h.actor.clone()),
                None => (String::new(), "external".to_string()),
            };
            for d in idx.note_docs(path, text, &f.hash, &at, &by) {
                gw.add_document(d).map_err(index_err)?;
            }
        }
        Ok(())
    }

    /// Replaces a category's documents with what its file holds now.
    fn index_category(&self, pass: &Pass<'_>, name: &str) -> Result<()> {
        let (idx, gw) = (self.idx, &self.writer);
        gw.delete_term(category_term(idx, name));
        let Ok(cname) = CategoryName::new(name) else {
            return Ok(());
        };
        if let Some(f) = store::read_category(pass.memdir.layout(), &cname)?
            && let Ok(content) = &f.content
        {
            let row = pass.inner.ledger.category(name)?.unwrap_or_default();
            for d in idx.category_docs(name, content, &f.hash, &row.updated_at, &row.updated_by) {
                gw.add_document(d).map_err(index_err)?;
            }
        }
        Ok(())
    }
}

impl IndexWrite for CategoryWrite<'_> {
    fn apply(&mut self, pass: &Pass<'_>, changes: &[Change], absorbed: i64) -> Result<()> {
        let names: BTreeSet<&String> = changes
            .iter()
            .filter(|(g, k, _)| *g > absorbed && *k == ChangeKind::Category)
            .map(|(_, _, key)| key)
            .collect();
        for name in names {
            self.index_category(pass, name)?;
        }
        let notes: BTreeSet<&String> = changes
            .iter()
            .filter(|(g, k, _)| *g > absorbed && *k == ChangeKind::Note)
            .map(|(_, _, key)| key)
            .collect();
        for path in notes {
            self.index_note(pass, path)?;
        }
        Ok(())
    }

    fn rebuild(&mut self, pass: &Pass<'_>, _progress: Option<Progress<'_>>) -> Result<()> {
        self.writer.delete_all_documents().map_err(index_err)?;
        for name in store::list_category_files(pass.memdir.layout())?.0 {
            pass.memdir
                .categories()
                .sync_category(pass.inner, &name, None, Sync::Fast)?;
            self.index_category(pass, name.as_str())?;
        }
        for l in memdir_store::note::list(pass.memdir.layout())?.0 {
            self.index_note(pass, &l.path)?;
        }
        Ok(())
    }

    fn commit(self: Box<Self>, payload: &Payload, durable: bool) -> Result<bool> {
        // Deletions are merged away at once, so BM25 statistics never count deleted
        // documents.
        self.idx
            .categories
            .commit(self.writer, payload, u32::MAX, durable)?;
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------
// The pipeline
// ---------------------------------------------------------------------------------------------

impl Indexing<'_> {
    /// Reads the feed from `from` and the state it describes under the store lock, so that the
    /// generation recorded as absorbed covers exactly the changes read: a change committed
    /// after the read is newer than the recorded generation and is applied by the next
    /// catch-up, never counted as applied without being applied. `from` is `None` for a rebuild
    /// (every segment is measured, no change is read).
    fn snapshot(&self, inner: &Inner, from: Option<i64>) -> Result<(Snapshot, Vec<Change>)> {
        // A store served read-only has no writer in this process to wait for, and may not
        // take the lock.
        let _lock = match self.read_only() {
            Some(_) => None,
            None => Some(self.lock()?),
        };
        let epoch = inner.ledger.meta("epoch")?.unwrap_or_default();
        let generation = inner.ledger.generation()?;
        let mut lens = BTreeMap::new();
        let mut changes = Vec::new();
        match from {
            None => {
                for (_, dir) in store::list_session_dirs(self.layout())? {
                    for f in store::list_segments(self.layout(), &dir)? {
                        lens.insert(f.rel.to_string_lossy().into_owned(), f.len);
                    }
                }
            }
            Some(from) => {
                changes = inner.ledger.changes_since(from)?;
                changes.retain(|(g, _, _)| *g <= generation);
                let mut touched = BTreeSet::new();
                for (_, kind, key) in &changes {
                    if matches!(kind, ChangeKind::Append | ChangeKind::Segment) {
                        touched.insert(key.split('\n').next().unwrap_or("").to_string());
                    }
                }
                for rel in touched {
                    if let Some((len, _)) = store::stat(&self.layout().root.join(&rel))? {
                        lens.insert(rel, len);
                    }
                }
            }
        }
        Ok((
            Snapshot {
                epoch,
                generation,
                lens,
            },
            changes,
        ))
    }

    /// Catches every derived index up (or rebuilds them when `full`, or when one cannot catch
    /// up). Returns whether the indexes are current afterwards.
    pub(crate) fn catch_up(&self, full: bool, progress: Option<Progress<'_>>) -> Result<bool> {
        self.catch_up_to(full, progress, None)
    }

    /// Whether the open index lacks a change the ledger recorded (what the next search would
    /// catch up), judged without catching up.
    #[cfg(test)]
    pub(crate) fn behind(&self) -> Result<bool> {
        let g = self.index_guard()?;
        let idx = g.as_ref().expect("invariant: index_guard opens the index");
        let indexes = derived(idx, self.settings.lock_timeout);
        let needs = {
            let guard = self.inner()?;
            let shared = guard.as_ref().expect("a test's store exists");
            needs_of(&shared.ledger, &indexes, None)?
        };
        let payloads = payloads_of(&indexes)?;
        Ok(payloads
            .iter()
            .zip(&needs)
            .any(|(p, n)| p.as_ref().is_none_or(|p| p.generation < *n)))
    }

    /// The newest change of each kind now: what a search arriving now must see.
    pub(crate) fn change_marks(&self) -> Result<Option<ChangeMarks>> {
        let guard = self.inner()?;
        let Some(shared) = guard.as_ref() else {
            return Ok(None);
        };
        let mut marks = Vec::new();
        for k in [
            ChangeKind::Append,
            ChangeKind::Segment,
            ChangeKind::Category,
            ChangeKind::Note,
        ] {
            marks.push((k, shared.ledger.last_change_of(&[k])?));
        }
        Ok(Some(ChangeMarks(marks)))
    }

    /// [`Self::catch_up`], satisfied once the indexes hold every change up to `marks` (taken
    /// when a search arrived) when given: a search that waited for another search's catch-up
    /// does not commit again for writes acknowledged after it arrived. Returns whether the
    /// indexes hold everything asked for afterwards.
    pub(crate) fn catch_up_to(
        &self,
        full: bool,
        progress: Option<Progress<'_>>,
        marks: Option<&ChangeMarks>,
    ) -> Result<bool> {
        let g = self.index_guard()?;
        let idx = g.as_ref().expect("invariant: index_guard opens the index");
        let indexes = derived(idx, self.settings.lock_timeout);
        // Each index only needs the changes of its own kinds: a category write does not make
        // the chunk index commit, and an ingest does not touch the category index.
        let (epoch, needs) = {
            let guard = self.inner()?;
            let Some(shared) = guard.as_ref() else {
                return Ok(true);
            };
            let epoch = shared.ledger.meta("epoch")?.unwrap_or_default();
            (epoch, needs_of(&shared.ledger, &indexes, marks)?)
        };
        let analyzer = idx.cfg.tokenizer_name();
        let valid = |p: &Option<Payload>| {
            p.as_ref().is_some_and(|p| {
                p.epoch == epoch && p.schema == INDEX_SCHEMA_VERSION && p.analyzer == analyzer
            })
        };
        let behind = |p: &Option<Payload>, need: i64| {
            !valid(p) || p.as_ref().is_some_and(|p| p.generation < need)
        };
        // Another process may have committed since this reader last looked: the reader must
        // see at least the commit whose payload is judged here.
        let payloads = payloads_of(&indexes)?;
        if !full && payloads.iter().zip(&needs).all(|(p, n)| !behind(p, *n)) {
            return Ok(true);
        }
        // Work to do: with a ledger connection of its own, so that writes of this process
        // (which go through the shared connection's mutex) do not wait while it indexes. A
        // store served read-only has only the in-memory ledger, shared with this process.
        let shared_guard;
        let own;
        let inner = if self.read_only().is_some() {
            shared_guard = self.inner()?;
            shared_guard
                .as_ref()
                .ok_or_else(|| Error::internal("invariant: a read-only store has a ledger"))?
        } else {
            own = Inner {
                ledger: Ledger::open(&self.layout().ledger_path(), self.settings.lock_timeout)?.0,
            };
            &own
        };
        let rebuild = full || !payloads.iter().all(valid);
        let mut writers: Vec<Option<Box<dyn IndexWrite + '_>>> = Vec::new();
        for ((i, p), n) in indexes.iter().zip(&payloads).zip(&needs) {
            writers.push(if rebuild || behind(p, *n) {
                Some(i.writer(full)?)
            } else {
                None
            });
        }
        // Another process may have caught up while this one waited for the writers.
        let payloads = payloads_of(&indexes)?;
        let rebuild = full || !payloads.iter().all(valid);
        if !rebuild && payloads.iter().zip(&needs).all(|(p, n)| !behind(p, *n)) {
            return Ok(true);
        }
        if rebuild
            && writers
                .iter()
                .any(|w| w.as_ref().is_none_or(|w| !w.can_rebuild()))
        {
            // A rebuild found necessary only now needs every writer, and a writer of its own
            // kind (the snapshot below is taken once all are held).
            retake_for_rebuild(&mut writers, &indexes)?;
        }
        let gens: Vec<i64> = payloads
            .iter()
            .map(|p| p.as_ref().map_or(0, |p| p.generation))
            .collect();
        let from = oldest_absorbed(&writers, &gens);
        memdir_store::failpoint::pause("catchup.before_snapshot");
        let (snap, changes) = self.snapshot(inner, (!rebuild).then_some(from))?;
        let fingerprint = if rebuild {
            crate::service::files_fingerprint(self.layout())?
        } else {
            first_fingerprint(&payloads)
        };
        let pass = Pass {
            memdir: self,
            inner,
            snap: &snap,
        };
        run_pass(&mut writers, &gens, &pass, &changes, rebuild, progress)?;
        let payload = Payload {
            schema: INDEX_SCHEMA_VERSION,
            analyzer,
            epoch: snap.epoch.clone(),
            generation: snap.generation,
            fingerprint,
        };
        // (The index in memory of a read-only store writes no file.)
        if self.read_only().is_none() {
            commit_fault(self.layout())?;
        }
        if !commit_all(writers, &indexes, &payload, rebuild, &inner.ledger, &snap)? {
            return Ok(false);
        }
        // A server keeps its commits in memory only up to a bound (`index::Overlay`). The
        // catch-up has succeeded either way: a landing that fails now is tried again after
        // the next one, and the overlay keeps serving meanwhile.
        let _ = idx.land_if_large(self.settings.lock_timeout);
        prune_absorbed(&inner.ledger, &indexes, &snap.epoch)?;
        Ok(snap.generation >= target_generation(&inner.ledger, marks)?)
    }

    /// `memdir reindex`: rebuilds every derived index from the files.
    pub fn reindex(&self, progress: Option<Progress<'_>>) -> Result<ReindexResponse> {
        let start = Instant::now();
        if !self.layout().exists() {
            return Ok(ReindexResponse {
                chunks: 0,
                category_docs: 0,
                fingerprint: None,
                files_fingerprint: None,
                analyzer: None,
                generation: None,
                seconds: None,
                rebuilt_from_nothing: false,
            });
        }
        // The ledger's index of idempotency keys is derived from the files too.
        self.sessions().rebuild_source_keys()?;
        // A rebuild into the index as it is; when that index cannot even be read (a damaged
        // file), the index is derived, so it is thrown away and built from nothing.
        let rebuilt_from_nothing = match self.catch_up(true, progress) {
            Ok(_) => false,
            Err(e) if e.kind == memdir_api::error::ErrorKind::Busy => return Err(e),
            Err(_) => {
                self.discard_index()?;
                self.catch_up(true, progress)?;
                true
            }
        };
        let g = self.index_guard()?;
        let idx = g.as_ref().expect("invariant: index_guard opens the index");
        let p = idx.chunks.payload();
        Ok(ReindexResponse {
            chunks: idx.chunks.reader.searcher().num_docs(),
            category_docs: idx.categories.reader.searcher().num_docs(),
            fingerprint: derived(idx, self.settings.lock_timeout)[0].fingerprint()?,
            files_fingerprint: p.as_ref().map(|p| p.fingerprint.clone()),
            analyzer: Some(idx.cfg.tokenizer_name()),
            generation: p.as_ref().map(|p| p.generation),
            seconds: Some(start.elapsed().as_secs_f64()),
            rebuilt_from_nothing,
        })
    }

    /// Drops this process's handle on the index and removes the index directory.
    fn discard_index(&self) -> Result<()> {
        let mut g = self
            .indexing
            .index
            .lock()
            .map_err(|_| Error::internal("a previous search panicked"))?;
        *g = None;
        let dir = self.layout().index_dir();
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(memdir_api::error::IoError {
                op: "remove damaged index",
                path: dir,
                source: e,
            }
            .into()),
        }
    }

    /// verify-store's part on the index: missing, behind, current, or not matching the files.
    pub(crate) fn verify_index(&self, report: &mut Value) -> Result<()> {
        let layout = self.layout();
        // A server's own catch-ups kept in memory land first: the index on disk is checked.
        // (Under the index mutex, as every commit of this process.) When they cannot land (a
        // full disk, a busy index), the disk is checked as it is: behind, and whole.
        self.land_index();
        if !layout.index_dir().join("chunks").join("meta.json").exists() {
            report["index"] =
                json!({"state": "missing", "note": "built on the next search or by a reindex"});
            return Ok(());
        }
        let idx = SearchIndex::open(&layout.index_dir(), self.settings.analyzer.clone())?;
        let indexes = derived(&idx, self.settings.lock_timeout);
        let (ledger, _) =
            crate::ledger::Ledger::open(&layout.ledger_path(), self.settings.lock_timeout)?;
        let epoch = ledger.meta("epoch")?.unwrap_or_default();
        let analyzer = idx.cfg.tokenizer_name();
        for i in &indexes {
            let need = ledger.last_change_of(i.kinds())?;
            let p = i.payload()?;
            let current = p.as_ref().is_some_and(|p| {
                p.generation >= need && p.epoch == epoch && p.analyzer == analyzer
            });
            if !current {
                report["index"] = json!({
                    "state": "behind",
                    "index": i.name(),
                    "generation": p.as_ref().map(|p| p.generation), "ledger_generation": need,
                    "note": "the next search catches it up",
                });
                return Ok(());
            }
        }
        // Current: every file must have exactly its documents in every index.
        let mut mismatches = Vec::new();
        let mut docs = BTreeMap::new();
        for i in &indexes {
            let c = i.counts(self)?;
            docs.insert(i.name(), c.docs);
            mismatches.extend(c.mismatches);
        }
        let ok = mismatches.is_empty();
        report["index"] = json!({
            "state": if ok { "current" } else { "mismatch" },
            "fingerprint": indexes[0].fingerprint()?,
            "chunks": docs.get("chunks").copied().unwrap_or(0),
            "documents": docs,
            "mismatches": mismatches,
        });
        if !ok {
            report["ok"] = json!(false);
            if let Some(p) = report["problems"].as_array_mut() {
                p.push(json!({"kind": "index", "path": ".memdir/index", "message": "the index does not match the files: a reindex rebuilds it"}));
            }
        }
        Ok(())
    }
}

/// The newest change generation of each kind at one moment ([`Indexing::change_marks`]).
pub(crate) struct ChangeMarks(Vec<(ChangeKind, i64)>);

impl ChangeMarks {
    /// The newest of these kinds.
    fn of(&self, kinds: &[ChangeKind]) -> i64 {
        self.0
            .iter()
            .filter(|(k, _)| kinds.contains(k))
            .map(|(_, g)| *g)
            .max()
            .unwrap_or(0)
    }
}

/// The generation each index needs to reach: the newest change of its kinds, as of `marks`
/// when given, else now.
fn needs_of(
    ledger: &Ledger,
    indexes: &[Box<dyn DerivedIndex + '_>],
    marks: Option<&ChangeMarks>,
) -> Result<Vec<i64>> {
    indexes
        .iter()
        .map(|i| match marks {
            Some(m) => Ok(m.of(i.kinds())),
            None => ledger.last_change_of(i.kinds()),
        })
        .collect()
}

/// The payload of each index's newest commit, by any process.
fn payloads_of(indexes: &[Box<dyn DerivedIndex + '_>]) -> Result<Vec<Option<Payload>>> {
    indexes.iter().map(|i| i.payload()).collect()
}

/// Lets go of the writers held and takes a rebuild's writer of every index, in the order of
/// `derived`.
fn retake_for_rebuild<'a>(
    writers: &mut Vec<Option<Box<dyn IndexWrite + 'a>>>,
    indexes: &'a [Box<dyn DerivedIndex + '_>],
) -> Result<()> {
    // Every process takes the writers in the order of `derived`: the ones held are let go
    // first, or this process could hold a later index's lock while it waits for an earlier
    // one's that another process holds while it waits for this one's (each then waits out
    // the lock timeout and answers `busy`).
    writers.clear();
    for i in indexes {
        writers.push(Some(i.writer(true)?));
    }
    Ok(())
}

/// The oldest generation that an index with a writer has absorbed: where the feed is read
/// from.
fn oldest_absorbed(writers: &[Option<Box<dyn IndexWrite + '_>>], gens: &[i64]) -> i64 {
    writers
        .iter()
        .zip(gens)
        .filter(|(w, _)| w.is_some())
        .map(|(_, g)| *g)
        .min()
        .unwrap_or(0)
}

/// The files fingerprint of the first index that has a commit: what an update (not a
/// rebuild) carries on.
fn first_fingerprint(payloads: &[Option<Payload>]) -> String {
    payloads
        .iter()
        .flatten()
        .next()
        .map(|p| p.fingerprint.clone())
        .unwrap_or_default()
}

/// Runs one pass with every writer held: rebuilds its index from the files, or applies the
/// changes newer than the generation it absorbed (`gens`, in the order of the writers).
fn run_pass(
    writers: &mut [Option<Box<dyn IndexWrite + '_>>],
    gens: &[i64],
    pass: &Pass<'_>,
    changes: &[Change],
    rebuild: bool,
    progress: Option<Progress<'_>>,
) -> Result<()> {
    for (w, absorbed) in writers.iter_mut().zip(gens) {
        if let Some(w) = w {
            if rebuild {
                w.rebuild(pass, progress)?;
            } else {
                w.apply(pass, changes, *absorbed)?;
            }
        }
    }
    Ok(())
}

/// Commits every writer with `payload`, and records in the ledger the generation of each
/// durable commit. `false` when another process committed first (see [`IndexWrite::commit`]);
/// the writers after it are let go uncommitted.
fn commit_all(
    writers: Vec<Option<Box<dyn IndexWrite + '_>>>,
    indexes: &[Box<dyn DerivedIndex + '_>],
    payload: &Payload,
    rebuild: bool,
    ledger: &Ledger,
    snap: &Snapshot,
) -> Result<bool> {
    for (w, i) in writers.into_iter().zip(indexes) {
        if let Some(w) = w {
            // A commit is fsynced only now and then (see `index::LazyDir`); the feed keeps
            // every change after the last durable one.
            let durable = rebuild || i.due_durable();
            if !w.commit(payload, durable)? {
                return Ok(false);
            }
            if durable {
                ledger.set_meta(
                    &durable_key(i.name()),
                    &format!("{}\n{}", snap.epoch, snap.generation),
                )?;
            }
        }
    }
    Ok(true)
}

/// The generation a catch-up must reach: the newest change of any kind as of `marks` when
/// given, else now.
fn target_generation(ledger: &Ledger, marks: Option<&ChangeMarks>) -> Result<i64> {
    Ok(match marks {
        Some(m) => m.of(&[
            ChangeKind::Append,
            ChangeKind::Segment,
            ChangeKind::Category,
            ChangeKind::Note,
        ]),
        None => ledger.generation()?,
    })
}

/// The failure a test injects at the `index.commit` failpoint, as a failed commit of the
/// index directory.
fn commit_fault(layout: &Layout) -> Result<()> {
    memdir_store::failpoint::fault("index.commit").map_err(|e| {
        Error::from(memdir_api::error::IoError {
            op: "commit index",
            path: layout.index_dir(),
            source: e,
        })
    })
}

/// Drops from the feed the changes every index has absorbed in a durable commit of `epoch`.
fn prune_absorbed(
    ledger: &Ledger,
    indexes: &[Box<dyn DerivedIndex + '_>],
    epoch: &str,
) -> Result<()> {
    // Changes every index has absorbed in a durable commit are needed by nobody (a lost
    // index is rebuilt from the files, not from the feed). Changes absorbed only by lazy
    // commits stay: after a crash of the machine the index may come back without them.
    let mut absorbed = i64::MAX;
    for i in indexes {
        let mark = ledger.meta(&durable_key(i.name()))?;
        absorbed = match mark.as_deref().and_then(|m| m.split_once('\n')) {
            Some((e, g)) if e == epoch => absorbed.min(g.parse().unwrap_or(0)),
            _ => 0,
        };
    }
    ledger.prune_changes(absorbed)?;
    Ok(())
}

/// The ledger's meta key under which the generation of an index's last durable commit is kept.
fn durable_key(index: &str) -> String {
    format!("index_durable.{index}")
}

/// The fingerprint of an index commit: the files it was built from, the analyzer and the
/// schema.
pub fn index_fingerprint(p: &Payload) -> String {
    let s = format!("{}\0{}\0{}", p.fingerprint, p.analyzer, p.schema);
    memdir_store::model::content_hash(s.as_bytes())[..32].to_string()
}

fn order_segment(mut chunks: Vec<ChunkRecord>) -> Vec<ChunkRecord> {
    chunks.sort_by(|a, b| (&a.hlc, &a.replica, a.seq).cmp(&(&b.hlc, &b.replica, b.seq)));
    chunks
}

/// Bytes `from..to` of a segment, parsed. A segment that cannot be read (a link, a special
/// file, no permission) indexes as empty: it is broken on its own, verify-store reports it,
/// and every other segment is still indexed.
fn read_prefix(path: &std::path::Path, from: u64, to: Option<u64>) -> Result<segment::Segment> {
    match store::fsx::read_range(path, from, to, store::fsx::MAX_SEGMENT_FILE) {
        Ok(Some(bytes)) => Ok(segment::parse(&bytes)),
        Ok(None) | Err(_) => Ok(segment::Segment::default()),
    }
}
