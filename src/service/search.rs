//! Search over the derived index, and keeping that index caught up with the files.
//!
//! Who writes the index, and when: nobody on the write path. A write records a change in the
//! ledger's change feed and returns. Before answering, a search compares the feed's generation
//! with the generation each index recorded at its last commit; if the index is behind, that
//! process catches it up: it takes the index's writer lock (tantivy's, one writer at a time,
//! waiting with a deadline), snapshots the generation and segment lengths under the store lock
//! (a few `stat`s), reads the new bytes without the store lock, indexes them, and commits with
//! the new generation as payload. A process that finds the writer lock taken waits, then
//! re-checks: usually the other process has done the work.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tantivy::IndexWriter;
use tantivy::collector::Count;
use tantivy::query::TermQuery;
use tantivy::schema::IndexRecordOption;

use super::{Inner, Memdir, Sync, check_limit};
use crate::api::*;
use crate::clock;
use crate::error::{Error, Result};
use crate::index::{
    AnalyzerConfig, INDEX_SCHEMA_VERSION, Payload, SearchIndex, category_term, seg_term,
    session_term,
};
use crate::model::{CategoryName, ChunkRecord};
use crate::search::{self, Filters, Kind, Mode};
use crate::store::{self, Layout, segment};

/// The search plan of a request.
trait Plan {
    fn plan(&self) -> Result<search::Request>;
}

impl Plan for SearchRequest {
    fn plan(&self) -> Result<search::Request> {
        check_limit("limit", self.limit)?;
        let context = self.context.unwrap_or(search::DEFAULT_CONTEXT);
        if context > search::MAX_CONTEXT {
            return Err(Error::invalid(
                "context",
                format!(
                    "context must be between 0 and {}; got {context}",
                    search::MAX_CONTEXT
                ),
            ));
        }
        let time = |field: &str, v: &Option<String>| -> Result<Option<i64>> {
            match v.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
                None => Ok(None),
                Some(s) => clock::parse_time(s).map(Some).ok_or_else(|| {
                    Error::invalid(field, format!("{field} {s:?} is not a time: use RFC 3339 (2026-11-29T10:00:00Z), a date (2026-11-29) or epoch milliseconds"))
                }),
            }
        };
        let nonempty = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
        let mut until = time("until", &self.until)?;
        if let (Some(u), Some(s)) = (until, self.until.as_deref())
            && s.trim().len() == 10
        {
            // A bare date as upper bound means the whole of that day.
            until = Some(u + 86_400_000 - 1);
        }
        Ok(search::Request {
            query: self.query.clone(),
            mode: match self.mode.as_deref() {
                None | Some("") => Mode::Auto,
                Some(m) => Mode::parse(m)?,
            },
            limit: self.limit,
            filters: Filters {
                project: nonempty(&self.project),
                session_id: nonempty(&self.session_id),
                category: nonempty(&self.category),
                kind: nonempty(&self.kind).map(|k| Kind::parse(&k)).transpose()?,
                since: time("since", &self.since)?,
                until,
            },
            context,
            max_chars: if self.full {
                None
            } else {
                Some(search::DEFAULT_MAX_CHARS)
            },
            context_weight: self.context_weight.unwrap_or(search::CONTEXT_WEIGHT),
        })
    }
}

/// How often a long-running process re-scans the files for changes made behind its back.
fn scan_interval() -> Duration {
    Duration::from_millis(
        std::env::var("MEMDIR_SCAN_INTERVAL_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000),
    )
}

/// A progress callback: (done, total).
pub type Progress<'a> = &'a dyn Fn(u64, u64);

type Change = (i64, String, String);

struct Snapshot {
    epoch: String,
    generation: i64,
    /// Length of each segment file at `generation`.
    lens: BTreeMap<String, u64>,
}

impl Memdir {
    fn index_guard(&self) -> Result<MutexGuard<'_, Option<SearchIndex>>> {
        let mut g = self
            .index
            .lock()
            .map_err(|_| Error::internal("a previous search panicked"))?;
        let cfg = AnalyzerConfig::from_env()?;
        let stale = g.as_ref().is_some_and(|i| !i.present() || i.cfg != cfg);
        if g.is_none() || stale {
            *g = None;
            *g = Some(if self.read_only().is_some() {
                SearchIndex::open_ram(cfg)?
            } else {
                SearchIndex::open(&self.layout().index_dir(), cfg)?
            });
        }
        Ok(g)
    }

    /// Searches session chunks and categories.
    pub fn search(&self, req: &SearchRequest) -> Result<SearchResponse> {
        let plan = req.plan()?;
        let mode = plan.mode;
        if !self.layout().exists() || plan.query.trim().is_empty() {
            if plan.query.chars().count() > search::MAX_QUERY_CHARS {
                return Err(Error::too_large(
                    "query",
                    plan.query.chars().count(),
                    search::MAX_QUERY_CHARS,
                    "characters",
                ));
            }
            return Ok(SearchResponse {
                results: Vec::new(),
                engine: "empty".into(),
                count: 0,
                query: plan.query,
                mode: None,
                notes: None,
                note: None,
            });
        }
        match self.refresh_index() {
            // The index cannot be written here (permissions, a full disk): serve from the
            // files with an index in memory.
            Err(e) if e.write_denied() && self.read_only().is_none() => {
                self.enter_read_only(&e)?;
                self.refresh_index()?;
            }
            r => r?,
        }
        let g = self.index_guard()?;
        let idx = g.as_ref().expect("invariant: index_guard opens the index");
        let outcome = search::run(idx, &plan)?;
        Ok(SearchResponse {
            count: outcome.results.len(),
            results: outcome.results,
            engine: outcome.engine.into(),
            query: plan.query,
            mode: Some(format!("{mode:?}").to_lowercase()),
            notes: (!outcome.notes.is_empty()).then_some(outcome.notes),
            note: None,
        })
    }

    /// Searches by meaning. Until an embeddings provider is configured, BM25 answers, and the
    /// response says so (engine `keyword-fallback`).
    pub fn search_semantic(&self, req: &SemanticSearchRequest) -> Result<SearchResponse> {
        let mut r = SearchRequest::new(&req.query);
        r.limit = req.limit;
        r.mode = Some("bm25".into());
        let mut v = self.search(&r)?;
        if v.engine != "empty" {
            v.engine = "keyword-fallback".into();
            v.note = Some(
                "no embeddings provider is configured: answered by BM25 keyword search".into(),
            );
        }
        Ok(v)
    }

    /// Brings the index up to date with the files: adopts external changes (throttled), then
    /// catches up from the change feed.
    pub fn refresh_index(&self) -> Result<()> {
        {
            let mut guard = self.inner()?;
            let Some(inner) = guard.as_mut() else {
                return Ok(());
            };
            let due = {
                let last = self
                    .last_scan
                    .lock()
                    .map_err(|_| Error::internal("scan clock poisoned"))?;
                last.is_none_or(|t| t.elapsed() >= scan_interval())
            };
            if due {
                self.scan(inner)?;
                *self
                    .last_scan
                    .lock()
                    .map_err(|_| Error::internal("scan clock poisoned"))? = Some(Instant::now());
            }
        }
        for _ in 0..3 {
            if self.catch_up(false, None)? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Marks the time of a full scan done by `open`.
    pub(crate) fn note_scanned(&self) {
        if let Ok(mut l) = self.last_scan.lock() {
            *l = Some(Instant::now());
        }
    }

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
                    if kind == "append" || kind == "segment" {
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

    /// Catches the index up (or rebuilds it when `full` or when it cannot catch up). Returns
    /// whether the index is current afterwards.
    pub(crate) fn catch_up(&self, full: bool, progress: Option<Progress<'_>>) -> Result<bool> {
        // Each index only needs the changes of its own kinds: a category write does not make
        // the chunk index commit, and an ingest does not touch the category index.
        let (epoch, need_chunks, need_categories) = {
            let guard = self.inner()?;
            let Some(shared) = guard.as_ref() else {
                return Ok(true);
            };
            (
                shared.ledger.meta("epoch")?.unwrap_or_default(),
                shared.ledger.last_change_of(&["append", "segment"])?,
                shared.ledger.last_change_of(&["category"])?,
            )
        };
        let g = self.index_guard()?;
        let idx = g.as_ref().expect("invariant: index_guard opens the index");
        let analyzer = idx.cfg.tokenizer_name();
        // Another process may have committed since this reader last looked: the reader must see
        // at least the commit whose payload is judged below.
        let pc = idx.chunks.refresh()?;
        let pg = idx.categories.refresh()?;
        let valid = |p: &Option<Payload>| {
            p.as_ref().is_some_and(|p| {
                p.epoch == epoch && p.schema == INDEX_SCHEMA_VERSION && p.analyzer == analyzer
            })
        };
        let behind = |p: &Option<Payload>, need: i64| {
            !valid(p) || p.as_ref().is_some_and(|p| p.generation < need)
        };
        if !full && !behind(&pc, need_chunks) && !behind(&pg, need_categories) {
            return Ok(true);
        }
        // Work to do: with a connection of its own, so that writes of this process (which go
        // through the shared connection's mutex) do not wait while it indexes.
        // A store served read-only has only the in-memory ledger, shared with this process.
        let shared_guard;
        let own;
        let inner = if self.read_only().is_some() {
            shared_guard = self.inner()?;
            shared_guard
                .as_ref()
                .ok_or_else(|| Error::internal("invariant: a read-only store has a ledger"))?
        } else {
            own = Inner {
                ledger: crate::ledger::Ledger::open(&self.layout().ledger_path())?.0,
            };
            &own
        };
        let timeout = crate::store::lock::lock_timeout();
        let (threads, budget) = if full {
            (2, 256_000_000)
        } else {
            (1, 32_000_000)
        };
        let rebuild = full || !valid(&pc) || !valid(&pg);
        let cw = if rebuild || behind(&pc, need_chunks) {
            Some(idx.chunks.writer(threads, budget, timeout)?)
        } else {
            None
        };
        let gw = if rebuild || behind(&pg, need_categories) {
            Some(idx.categories.writer(1, 16_000_000, timeout)?)
        } else {
            None
        };
        // Another process may have caught up while we waited for the writer locks.
        let (pc, pg) = (idx.chunks.refresh()?, idx.categories.refresh()?);
        let rebuild = full || !valid(&pc) || !valid(&pg);
        if !rebuild && !behind(&pc, need_chunks) && !behind(&pg, need_categories) {
            return Ok(true);
        }
        let (cw, gw) = match (cw, gw) {
            (Some(c), Some(g)) => (Some(c), Some(g)),
            (c, g) if !rebuild => (c, g),
            // A rebuild found necessary only now needs both writers.
            (c, g) => (
                Some(match c {
                    Some(c) => c,
                    None => idx.chunks.writer(threads, budget, timeout)?,
                }),
                Some(match g {
                    Some(g) => g,
                    None => idx.categories.writer(1, 16_000_000, timeout)?,
                }),
            ),
        };
        let chunk_gen = pc.as_ref().map(|p| p.generation).unwrap_or(0);
        let cat_gen = pg.as_ref().map(|p| p.generation).unwrap_or(0);
        let from = if cw.is_some() && gw.is_some() {
            chunk_gen.min(cat_gen)
        } else if cw.is_some() {
            chunk_gen
        } else {
            cat_gen
        };
        crate::store::failpoint::pause("catchup.before_snapshot");
        let (snap, changes) = self.snapshot(inner, (!rebuild).then_some(from))?;
        let fingerprint = if rebuild {
            super::files_fingerprint(self.layout())?
        } else {
            pc.as_ref()
                .or(pg.as_ref())
                .map(|p| p.fingerprint.clone())
                .unwrap_or_default()
        };
        if rebuild {
            let (Some(c), Some(g)) = (&cw, &gw) else {
                return Err(Error::internal(
                    "invariant: a rebuild holds both index writers",
                ));
            };
            self.rebuild_into(inner, idx, c, g, &snap, progress)?;
        } else {
            self.apply_changes(
                inner,
                idx,
                cw.as_ref(),
                gw.as_ref(),
                &changes,
                &snap,
                chunk_gen,
                cat_gen,
            )?;
        }
        let payload = Payload {
            schema: INDEX_SCHEMA_VERSION,
            analyzer,
            epoch: snap.epoch.clone(),
            generation: snap.generation,
            fingerprint,
        };
        if let Some(c) = cw {
            idx.chunks.commit(c, &payload, 200_000)?;
        }
        if let Some(g) = gw {
            idx.categories.commit(g, &payload, u32::MAX)?;
        }
        // Changes both indexes have absorbed are needed by nobody (a lost index is rebuilt from
        // the files, not from the feed).
        let absorbed = match (idx.chunks.payload(), idx.categories.payload()) {
            (Some(c), Some(g)) if c.epoch == snap.epoch && g.epoch == snap.epoch => {
                c.generation.min(g.generation)
            }
            _ => 0,
        };
        inner.ledger.prune_changes(absorbed)?;
        Ok(snap.generation >= inner.ledger.generation()?)
    }

    fn index_category(
        &self,
        inner: &Inner,
        idx: &SearchIndex,
        gw: &IndexWriter,
        name: &str,
    ) -> Result<()> {
        gw.delete_term(category_term(idx, name));
        let Ok(cname) = CategoryName::new(name) else {
            return Ok(());
        };
        if let Some(f) = store::read_category(self.layout(), &cname)?
            && let Ok(content) = &f.content
        {
            let row = inner.ledger.category(name)?.unwrap_or_default();
            for d in idx.category_docs(name, content, &f.hash, &row.updated_at, &row.updated_by) {
                gw.add_document(d)
                    .map_err(|e| Error::internal(format!("index: {e}")))?;
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_changes(
        &self,
        inner: &Inner,
        idx: &SearchIndex,
        cw: Option<&IndexWriter>,
        gw: Option<&IndexWriter>,
        changes: &[(i64, String, String)],
        snap: &Snapshot,
        chunk_gen: i64,
        cat_gen: i64,
    ) -> Result<()> {
        let mut categories = BTreeSet::new();
        let mut full_segments = BTreeSet::new();
        let mut appends: BTreeMap<String, u64> = BTreeMap::new();
        for (g, kind, key) in changes {
            match kind.as_str() {
                "category" if *g > cat_gen => {
                    categories.insert(key.clone());
                }
                "segment" if *g > chunk_gen => {
                    full_segments.insert(key.clone());
                }
                "append" if *g > chunk_gen => {
                    let (rel, from) = key.split_once('\n').unwrap_or((key, "0"));
                    let from: u64 = from.parse().unwrap_or(0);
                    let e = appends.entry(rel.to_string()).or_insert(from);
                    *e = (*e).min(from);
                }
                _ => {}
            }
        }
        if let Some(gw) = gw {
            for name in &categories {
                self.index_category(inner, idx, gw, name)?;
            }
        }
        let Some(cw) = cw else { return Ok(()) };
        // Sessions with more than one segment are numbered by rank over all segments, so any
        // change to one of them re-reads the whole session.
        let mut sessions_full = BTreeSet::new();
        for rel in full_segments.iter().chain(appends.keys()) {
            let dir = std::path::Path::new(rel)
                .parent()
                .map(|p| p.to_path_buf())
                .unwrap_or_default();
            if store::list_segments(self.layout(), &dir)?.len() > 1 {
                sessions_full.insert(dir);
            }
        }
        for dir in &sessions_full {
            self.index_session(idx, cw, dir, snap)?;
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
            cw.delete_term(seg_term(idx, rel));
            let seg = read_prefix(
                &self.layout().root.join(rel),
                0,
                snap.lens.get(rel).copied(),
            )?;
            let mut prev: Option<String> = None;
            for (i, c) in order_segment(seg.chunks).into_iter().enumerate() {
                cw.add_document(idx.chunk_doc(rel, &c, i as u64, prev.as_deref()))
                    .map_err(|e| Error::internal(format!("index: {e}")))?;
                prev = Some(c.content);
            }
        }
        for (rel, from) in &appends {
            if in_full(rel) || full_segments.contains(rel) {
                continue;
            }
            let seg = read_prefix(
                &self.layout().root.join(rel),
                *from,
                snap.lens.get(rel).copied(),
            )?;
            if seg.chunks.is_empty() {
                continue;
            }
            let before =
                idx.chunks
                    .reader
                    .searcher()
                    .search(
                        &TermQuery::new(seg_term(idx, rel), IndexRecordOption::Basic),
                        &Count,
                    )
                    .map_err(|e| Error::internal(format!("count: {e}")))? as u64;
            let mut prev = match (before, seg.chunks.first()) {
                (0, _) | (_, None) => None,
                (b, Some(c)) => search::stored_content_at(idx, &c.session_id, b - 1)?,
            };
            for (i, c) in order_segment(seg.chunks).into_iter().enumerate() {
                cw.add_document(idx.chunk_doc(rel, &c, before + i as u64, prev.as_deref()))
                    .map_err(|e| Error::internal(format!("index: {e}")))?;
                prev = Some(c.content);
            }
        }
        Ok(())
    }

    fn index_session(
        &self,
        idx: &SearchIndex,
        cw: &IndexWriter,
        dir: &std::path::Path,
        snap: &Snapshot,
    ) -> Result<u64> {
        let mut all = Vec::new();
        let mut session_id = None;
        let segs = store::list_segments(self.layout(), dir)?;
        for f in &segs {
            let rel = f.rel.to_string_lossy().into_owned();
            let seg = read_prefix(
                &self.layout().root.join(&f.rel),
                0,
                snap.lens.get(&rel).copied().or(Some(f.len)),
            )?;
            for c in seg.chunks {
                session_id.get_or_insert_with(|| c.session_id.clone());
                all.push((rel.clone(), c));
            }
        }
        if let Some(id) = &session_id {
            cw.delete_term(session_term(idx, id));
        }
        for f in &segs {
            cw.delete_term(seg_term(idx, &f.rel.to_string_lossy()));
        }
        all.sort_by(|(_, a), (_, b)| (&a.hlc, &a.replica, a.seq).cmp(&(&b.hlc, &b.replica, b.seq)));
        let n = all.len() as u64;
        for (i, (rel, c)) in all.iter().enumerate() {
            let prev = i.checked_sub(1).map(|p| all[p].1.content.as_str());
            cw.add_document(idx.chunk_doc(rel, c, i as u64, prev))
                .map_err(|e| Error::internal(format!("index: {e}")))?;
        }
        Ok(n)
    }

    fn rebuild_into(
        &self,
        inner: &Inner,
        idx: &SearchIndex,
        cw: &IndexWriter,
        gw: &IndexWriter,
        snap: &Snapshot,
        progress: Option<Progress<'_>>,
    ) -> Result<()> {
        cw.delete_all_documents()
            .map_err(|e| Error::internal(format!("index: {e}")))?;
        gw.delete_all_documents()
            .map_err(|e| Error::internal(format!("index: {e}")))?;
        let total: u64 = snap.lens.values().sum();
        let mut done = 0u64;
        for (_, dir) in store::list_session_dirs(self.layout())? {
            self.index_session(idx, cw, &dir, snap)?;
            for f in store::list_segments(self.layout(), &dir)? {
                done += snap
                    .lens
                    .get(&*f.rel.to_string_lossy())
                    .copied()
                    .unwrap_or(0);
            }
            if let Some(p) = progress {
                p(done, total);
            }
        }
        for name in store::list_category_files(self.layout())?.0 {
            self.sync_category(inner, &name, None, Sync::Fast)?;
            self.index_category(inner, idx, gw, name.as_str())?;
        }
        Ok(())
    }

    /// `memdir reindex`: rebuilds the index from the files. Returns the fingerprint and counts.
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
        // A rebuild into the index as it is; when that index cannot even be read (a damaged
        // file), the index is derived, so it is thrown away and built from nothing.
        let rebuilt_from_nothing = match self.catch_up(true, progress) {
            Ok(_) => false,
            Err(e) if e.kind == crate::error::ErrorKind::Busy => return Err(e),
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
            fingerprint: p.as_ref().map(index_fingerprint),
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
            .index
            .lock()
            .map_err(|_| Error::internal("a previous search panicked"))?;
        *g = None;
        let dir = self.layout().index_dir();
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(crate::error::IoError {
                op: "remove damaged index",
                path: dir,
                source: e,
            }
            .into()),
        }
    }

    /// Adds the index's state to a verify-store report (read-only: no catch-up).
    pub(crate) fn verify_index(&self, report: &mut Value) -> Result<()> {
        let layout = self.layout();
        if !layout.index_dir().join("chunks").join("meta.json").exists() {
            report["index"] =
                json!({"state": "missing", "note": "built on the next search or by a reindex"});
            return Ok(());
        }
        let idx = SearchIndex::open(&layout.index_dir(), AnalyzerConfig::from_env()?)?;
        let (ledger, _) = crate::ledger::Ledger::open(&layout.ledger_path())?;
        let generation = ledger.last_change_of(&["append", "segment"])?;
        let cat_generation = ledger.last_change_of(&["category"])?;
        let epoch = ledger.meta("epoch")?.unwrap_or_default();
        let pc = idx.chunks.payload();
        let pg = idx.categories.payload();
        let analyzer = idx.cfg.tokenizer_name();
        let current = pc.as_ref().is_some_and(|p| {
            p.generation >= generation && p.epoch == epoch && p.analyzer == analyzer
        }) && pg.as_ref().is_some_and(|p| {
            p.generation >= cat_generation && p.epoch == epoch && p.analyzer == analyzer
        });
        if !current {
            report["index"] = json!({
                "state": "behind",
                "generation": pc.as_ref().map(|p| p.generation), "ledger_generation": generation,
                "note": "the next search catches it up",
            });
            return Ok(());
        }
        // Current: every segment and category must have exactly its documents.
        let s = idx.chunks.reader.searcher();
        let mut mismatches = Vec::new();
        let mut chunks = 0u64;
        for (_, dir) in store::list_session_dirs(layout)? {
            for f in store::list_segments(layout, &dir)? {
                let rel = f.rel.to_string_lossy().into_owned();
                let n = segment::read(&layout.root.join(&f.rel))
                    .map(|s| s.chunks.len() as u64)
                    .unwrap_or(0);
                chunks += n;
                let indexed =
                    s.search(
                        &TermQuery::new(seg_term(&idx, &rel), IndexRecordOption::Basic),
                        &Count,
                    )
                    .map_err(|e| Error::internal(e.to_string()))? as u64;
                if indexed != n {
                    mismatches.push(json!({"path": rel, "files": n, "index": indexed}));
                }
            }
        }
        let gs = idx.categories.reader.searcher();
        for name in store::list_category_files(layout)?.0 {
            if let Some(f) = store::read_category(layout, &name)?
                && let Ok(c) = &f.content
            {
                let want = idx.category_docs(name.as_str(), c, &f.hash, "", "").len() as u64;
                let got = gs
                    .search(
                        &TermQuery::new(
                            category_term(&idx, name.as_str()),
                            IndexRecordOption::Basic,
                        ),
                        &Count,
                    )
                    .map_err(|e| Error::internal(e.to_string()))? as u64;
                if want != got {
                    mismatches.push(json!({"path": Layout::category_rel(&name).display().to_string(), "files": want, "index": got}));
                }
            }
        }
        let total = s.num_docs();
        if total != chunks {
            mismatches.push(json!({"path": "sessions/", "files": chunks, "index": total}));
        }
        let ok = mismatches.is_empty();
        report["index"] = json!({
            "state": if ok { "current" } else { "mismatch" },
            "fingerprint": pc.as_ref().map(index_fingerprint),
            "chunks": total, "mismatches": mismatches,
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

/// The index fingerprint: files, analyzer and schema version.
pub fn index_fingerprint(p: &Payload) -> String {
    let s = format!("{}\0{}\0{}", p.fingerprint, p.analyzer, p.schema);
    crate::model::content_hash(s.as_bytes())[..32].to_string()
}

/// Orders a segment's chunks as positions count them.
fn order_segment(mut chunks: Vec<ChunkRecord>) -> Vec<ChunkRecord> {
    chunks.sort_by(|a, b| (&a.hlc, &a.replica, a.seq).cmp(&(&b.hlc, &b.replica, b.seq)));
    chunks
}

/// Parses the committed lines of a segment between byte `from` and `to` (or its end).
/// Bytes `from..to` of a segment, parsed. A segment that cannot be read (a link, a special
/// file, no permission) indexes as empty: it is broken on its own, verify-store reports it,
/// and every other segment is still indexed.
fn read_prefix(path: &std::path::Path, from: u64, to: Option<u64>) -> Result<segment::Segment> {
    match store::fsx::read_range(path, from, to, store::fsx::MAX_SEGMENT_FILE) {
        Ok(Some(bytes)) => Ok(segment::parse(&bytes)),
        Ok(None) | Err(_) => Ok(segment::Segment::default()),
    }
}
