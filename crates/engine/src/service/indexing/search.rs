//! The query side: plans a search request and answers it from the derived index, after
//! bringing that index up to date (adoption of hand edits, then the indexer's catch-up).
use crate::service::Indexing;

use std::sync::MutexGuard;
use std::time::Instant;

use crate::service::check_limit;
use memdir_api::error::{Error, Result};
use memdir_api::*;
use memdir_index::index::SearchIndex;
use memdir_index::search::{self, Filters, Kind, Mode};
use memdir_store::clock;

/// The search plan of a request.
trait Plan {
    fn plan(&self) -> Result<search::Request>;
}

impl Plan for SearchRequest {
    fn plan(&self) -> Result<search::Request> {
        check_limit("limit", self.limit)?;
        memdir_index::budget::check(self.max_tokens)?;
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
        let now = clock::now_ms();
        let time = |field: &str, v: &Option<String>| -> Result<Option<(i64, bool)>> {
            match v.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
                None => Ok(None),
                Some(s) => clock::parse_when(s, now).map(Some).ok_or_else(|| {
                    Error::invalid(field, format!("{field} {s:?} is not a time: use RFC 3339 (2026-11-29T10:00:00Z), a date (2026-11-29), epoch milliseconds, a time ago (30m, 12h, 7d, 2w), today or yesterday"))
                }),
            }
        };
        let nonempty = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
        // A day as upper bound (a date, today, yesterday) means the whole of that day.
        let until = time("until", &self.until)?
            .map(|(u, whole_day)| if whole_day { u + 86_400_000 - 1 } else { u });
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
                since: time("since", &self.since)?.map(|(t, _)| t),
                until,
                hidden_categories: Vec::new(),
                as_of: crate::service::as_of_ms(self.as_of.as_deref())?,
            },
            context,
            max_chars: if self.full {
                None
            } else {
                Some(search::DEFAULT_MAX_CHARS)
            },
            context_weight: self.context_weight.unwrap_or(search::CONTEXT_WEIGHT),
            neighbour_share: search::NEIGHBOUR_SHARE,
            session_share: search::SESSION_SHARE,
            explain: self.explain,
            all_words: false,
            include_superseded: self.include_superseded,
        })
    }
}

impl<'a> Indexing<'a> {
    pub(crate) fn index_guard(
        &self,
    ) -> Result<MutexGuard<'a, Option<std::sync::Arc<SearchIndex>>>> {
        let mut g = self
            .engine()
            .indexing
            .index
            .lock()
            .map_err(|_| Error::internal("a previous search panicked"))?;
        let cfg = self.settings.analyzer.clone();
        let stale = g.as_ref().is_some_and(|i| !i.present() || i.cfg != cfg);
        if g.is_none() || stale {
            *g = None;
            *g = Some(std::sync::Arc::new(if self.read_only().is_some() {
                SearchIndex::open_ram(cfg)?
            } else {
                SearchIndex::open_with(
                    &self.layout().index_dir(),
                    cfg,
                    self.settings.index_tail_in_memory,
                )?
            }));
        }
        Ok(g)
    }

    /// Writes what a server's index keeps in memory (`index::Overlay`) to disk, best effort
    /// (a server stopping: the next process then need not index it again; if it cannot, that
    /// process does, from the feed).
    pub fn land_index(&self) {
        if let Ok(g) = self.indexing.index.lock()
            && let Some(idx) = g.as_deref()
        {
            let _ = idx.land_kept(self.settings.lock_timeout);
        }
    }

    /// The index caught up with the files, as one search's view: `f` runs on it.
    fn with_view<T>(&self, f: impl FnOnce(&search::View<'_>) -> Result<T>) -> Result<T> {
        self.with_view_then(None, f)
    }

    /// [`Indexing::with_view`], as the memory stood at `at` (ms) when it is given.
    fn with_view_then<T>(
        &self,
        at: Option<i64>,
        f: impl FnOnce(&search::View<'_>) -> Result<T>,
    ) -> Result<T> {
        match self.refresh_index() {
            // The index cannot be written here (permissions, a full disk): serve from the
            // files with an index in memory.
            Err(e) if e.write_denied() && self.read_only().is_none() => {
                self.enter_read_only(&e)?;
                self.refresh_index()?;
            }
            r => r?,
        }
        // The index mutex is held only to take the handle: the query runs beside catch-ups
        // (other searches' commits), on searchers taken once (`search::View`).
        let idx = self
            .index_guard()?
            .as_ref()
            .expect("invariant: index_guard opens the index")
            .clone();
        let view = search::View::of(&idx);
        match at {
            None => f(&view),
            Some(at) => f(&view.then(at, self.categories_then(&idx, at)?)),
        }
    }

    /// A searcher over every category as it stood at `at` (`Categories::all_at`), reused from
    /// the last search as of the same time while no category changed since it was built.
    fn categories_then(&self, idx: &SearchIndex, at: i64) -> Result<tantivy::Searcher> {
        // Any transaction may change what stood then (a forgotten or compacted version changes
        // history, not the files); an adopted hand edit is a change of the feed.
        let generation = {
            let guard = self.inner()?;
            match guard.as_ref() {
                Some(inner) => (
                    inner.ledger.txn_mark()?,
                    inner
                        .ledger
                        .last_change_of(&[crate::ledger::ChangeKind::Category])?,
                ),
                None => (0, 0),
            }
        };
        let cache = &self.indexing.then;
        if let Ok(g) = cache.lock()
            && let Some((t, gen_, s)) = g.as_ref()
            && *t == at
            && *gen_ == generation
        {
            return Ok(s.clone());
        }
        let docs = self
            .categories()
            .all_at(at)?
            .iter()
            .flat_map(|c| idx.category_docs(&c.name, &c.content, &c.hash, &c.ts, &c.actor))
            .collect();
        let searcher = idx.categories_then(docs)?;
        if let Ok(mut g) = cache.lock() {
            *g = Some((at, generation, searcher.clone()));
        }
        Ok(searcher)
    }

    /// For each place (session, position), the URIs of the live chunks that correct it
    /// (`supersedes`), as the index knows them now: a reader takes no lock and waits for no
    /// catch-up (the next search brings the index up to date), and an index it cannot read
    /// marks nothing rather than failing the read.
    pub(crate) fn corrections(&self, places: &[(String, u64)]) -> search::supersede::Superseded {
        if places.is_empty() || !self.layout().exists() || !self.layout().index_dir().exists() {
            return Default::default();
        }
        let Ok(guard) = self.index_guard() else {
            return Default::default();
        };
        let Some(idx) = guard.as_ref().cloned() else {
            return Default::default();
        };
        drop(guard);
        search::supersede::correcting_all(&search::View::of(&idx), places).unwrap_or_default()
    }

    /// For each list of references, the chunk URIs they name, in one look at the index: a
    /// reference is a chunk URI, a chunk id (in whichever session holds it; several is
    /// ambiguous), or else a source_id (`by_source`: its chunks' (session, chunk id) pairs).
    /// A list with a reference that names no live chunk is an `invalid` error of its own.
    pub(crate) fn locate_chunks(
        &self,
        lists: &[&[String]],
        by_source: &std::collections::HashMap<String, Vec<(String, String)>>,
    ) -> Result<Vec<Result<Vec<String>>>> {
        let missing = |r: &str| {
            Error::invalid(
                "supersedes",
                format!("supersedes names {r:?}, which is no chunk of this store: give a chunk's uri or chunk_id (as search and fetch show them) or a source_id"),
            )
            .hint("{op:search} shows each hit's uri and chunk_id")
        };
        if !self.layout().exists() {
            return Ok(lists
                .iter()
                .map(|l| Err(missing(l.first().map_or("", |r| r.as_str()))))
                .collect());
        }
        let one = |v: &search::View<'_>, r: &str| -> Result<Vec<(String, u64)>> {
            if let Some(memdir_api::uri::Resource::Chunk {
                session_id,
                position,
            }) = memdir_api::uri::parse(r)
            {
                return Ok(
                    if search::supersede::place_exists(v, &session_id, position)? {
                        vec![(session_id, position)]
                    } else {
                        Vec::new()
                    },
                );
            }
            let by_id = search::supersede::places_of_id(v, r, 2)?;
            if by_id.len() > 1 {
                return Err(Error::invalid(
                    "supersedes",
                    format!(
                        "chunk id {r:?} is in {} sessions: give the chunk's uri (memdir://sessions/SESSION/POSITION)",
                        by_id.len()
                    ),
                ));
            }
            if !by_id.is_empty() {
                return Ok(by_id);
            }
            let mut found = Vec::new();
            for (session, id) in by_source.get(r).into_iter().flatten() {
                found.extend(search::supersede::place_in_session(v, session, id)?);
            }
            Ok(found)
        };
        self.with_view(|v| {
            Ok(lists
                .iter()
                .map(|refs| {
                    let mut out: Vec<String> = Vec::new();
                    for r in refs.iter() {
                        let places = one(v, r)?;
                        if places.is_empty() {
                            return Err(missing(r));
                        }
                        for (session, position) in places {
                            let uri = memdir_api::uri::chunk(&session, position);
                            if !out.contains(&uri) {
                                out.push(uri);
                            }
                        }
                    }
                    Ok(out)
                })
                .collect())
        })
    }

    /// Searches session chunks and categories.
    pub fn search(&self, req: &SearchRequest) -> Result<SearchResponse> {
        self.search_hiding(req, Vec::new())
    }

    /// Searches, leaving out the categories named in `hidden` (those a caller may not read):
    /// they are filtered inside the query, so they take no place among the hits.
    pub fn search_hiding(
        &self,
        req: &SearchRequest,
        hidden: Vec<String>,
    ) -> Result<SearchResponse> {
        self.search_tuned(req, |plan| plan.filters.hidden_categories = hidden)
    }

    /// Searches with the plan adjusted by `tune` (the benchmark measures ranking levers so).
    pub fn search_tuned(
        &self,
        req: &SearchRequest,
        tune: impl FnOnce(&mut search::Request),
    ) -> Result<SearchResponse> {
        let mut plan = req.plan()?;
        tune(&mut plan);
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
                omitted: None,
                coverage: None,
            });
        }
        let (outcome, note, coverage) =
            self.with_view_then(plan.filters.as_of, |view| self.dispatch(view, &plan))?;
        let mut resp = SearchResponse {
            count: outcome.results.len(),
            results: outcome.results,
            engine: outcome.engine.into(),
            query: plan.query,
            mode: Some(format!("{mode:?}").to_lowercase()),
            notes: (!outcome.notes.is_empty()).then_some(outcome.notes),
            note,
            coverage,
            omitted: None,
        };
        self.categories().mark_reviewed(&mut resp.results);
        if let Some(max) = req.max_tokens {
            memdir_index::budget::fit_search(&mut resp, max);
        }
        Ok(resp)
    }

    /// Chooses the engine: `semantic` and `hybrid` (and `auto` for a natural-language query
    /// when embeddings are configured) go to the vectors; when they cannot answer, keywords
    /// do, with the reason and the coverage.
    fn dispatch(
        &self,
        idx: &search::View<'_>,
        plan: &search::Request,
    ) -> Result<(search::Outcome, Option<String>, Option<String>)> {
        let configured = self.settings.embeddings.is_some();
        let hybrid = match plan.mode {
            Mode::Semantic => false,
            Mode::Hybrid => true,
            // Every word must be in the text: nearness of meaning cannot say so.
            Mode::Auto if configured && !plan.all_words && plan.mode.wants_hybrid(&plan.query) => {
                true
            }
            _ => return Ok((search::run(idx, plan)?, None, None)),
        };
        match self.dense_hits(&idx.now(), plan.query.trim(), &plan.filters) {
            Ok((dense, cov)) => Ok((
                search::run_dense(idx, plan, &dense, hybrid)?,
                None,
                Some(cov.label()),
            )),
            Err(fb) => {
                let mut keyword = plan.clone();
                if keyword.mode != Mode::Auto {
                    keyword.mode = Mode::Bm25;
                }
                let mut outcome = search::run(idx, &keyword)?;
                outcome.engine = "keyword-fallback";
                Ok((outcome, Some(fb.reason), fb.coverage.map(|c| c.label())))
            }
        }
    }

    /// Searches by meaning: the nearest vectors. Without an embeddings provider, or while it
    /// fails or has not embedded everything, BM25 answers and the response says why (engine
    /// `keyword-fallback`, `note`, `coverage`).
    pub fn search_semantic(
        &self,
        req: &SemanticSearchRequest,
        hidden: Vec<String>,
    ) -> Result<SearchResponse> {
        let mut r = SearchRequest::new(&req.query);
        r.limit = req.limit;
        r.mode = Some("semantic".into());
        self.search_hiding(&r, hidden)
    }

    /// Brings the index up to date with the files: adopts external changes (throttled), then
    /// catches up from the change feed.
    pub fn refresh_index(&self) -> Result<()> {
        // A purge a crashed sync owes; a search does not fail for it (the next one retries).
        let _ = crate::service::upkeep::forget::purge_if_pending(self);
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
                last.is_none_or(|t| t.elapsed() >= self.settings.scan_interval)
            };
            if due {
                // Throttled here already: every note is checked, so a hand edit is seen within
                // one interval of this process's own clock.
                self.scan(inner, std::time::Duration::ZERO)?;
                *self
                    .last_scan
                    .lock()
                    .map_err(|_| Error::internal("scan clock poisoned"))? = Some(Instant::now());
            }
        }
        // What this search must see: every write acknowledged before it arrived. Writes
        // acknowledged while it waits for another search's catch-up are not waited for.
        let marks = self.change_marks()?;
        for _ in 0..3 {
            if self.catch_up_to(false, None, marks.as_ref())? {
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
}

/// After a write a server acknowledged, the index catches up in a background thread, so the
/// client's next search finds it ready instead of doing the catch-up itself (the freshness
/// guarantee does not rest on this: a search still catches up to every write acknowledged
/// before it). Writes in a burst share one thread: a write during a round asks for one more.
/// A store without an index is left for its first search to index, as [`warm_up`] leaves it.
pub fn catch_up_soon(memdir: &std::sync::Arc<crate::service::Memdir>) {
    use std::sync::atomic::Ordering::AcqRel;
    const IDLE: u8 = 0;
    const RUNNING: u8 = 1;
    const AGAIN: u8 = 2;
    if memdir.indexing.soon.swap(AGAIN, AcqRel) != IDLE {
        return;
    }
    let meta = memdir.layout().index_dir().join("chunks").join("meta.json");
    let m = memdir.clone();
    let spawned = std::thread::Builder::new()
        .name("memdir-catch-up".into())
        .spawn(move || {
            let soon = &m.indexing.soon;
            // A round that panics leaves the state idle, so later writes start a round again.
            struct Unstuck<'a>(&'a std::sync::atomic::AtomicU8);
            impl Drop for Unstuck<'_> {
                fn drop(&mut self) {
                    if std::thread::panicking() {
                        self.0.store(IDLE, std::sync::atomic::Ordering::Release);
                    }
                }
            }
            let _unstuck = Unstuck(soon);
            loop {
                soon.store(RUNNING, std::sync::atomic::Ordering::Release);
                if meta.exists() {
                    // A failure is the next search's to meet and report.
                    let _ = m.indexing().refresh_index();
                }
                if soon
                    .compare_exchange(RUNNING, IDLE, AcqRel, std::sync::atomic::Ordering::Acquire)
                    .is_ok()
                {
                    break;
                }
            }
        });
    if spawned.is_err() {
        memdir
            .indexing
            .soon
            .store(IDLE, std::sync::atomic::Ordering::Release);
    }
}

/// Runs the store's startup (recovery, the scan for hand edits) and brings the index up to
/// date in the background (a server starting: the client is still connecting), so the first
/// request finds both done instead of doing them first. The startup's scan is the one the
/// catch-up would otherwise repeat. A request that arrives meanwhile waits for the startup
/// ([`Memdir::ensure_started`]), so no request is served before recovery. A failure is left
/// for the first request to meet and report. Only an index that exists is warmed: a store
/// without one is indexed by its first search, as before, so a server's first answers
/// (status, verify-store) see the store as any other surface does.
///
/// [`Memdir::ensure_started`]: crate::service::Memdir::ensure_started
pub fn warm_up(memdir: &std::sync::Arc<crate::service::Memdir>) {
    let meta = memdir.layout().index_dir().join("chunks").join("meta.json");
    if !meta.exists() {
        return;
    }
    let m = memdir.clone();
    let _ = std::thread::Builder::new()
        .name("memdir-warm-up".into())
        .spawn(move || {
            if m.ensure_started().is_ok() {
                let _ = m.indexing().refresh_index();
            }
        });
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use memdir_api::{NewChunk, SearchRequest};

    use crate::service::Memdir;

    fn chunk(text: &str) -> NewChunk {
        serde_json::from_value(serde_json::json!({"session_id": "s", "content": text}))
            .expect("a chunk")
    }

    /// A store of one turn, indexed.
    fn indexed_store(path: &std::path::Path) -> Memdir {
        let m = Memdir::open(path).expect("open");
        m.sessions()
            .ingest_one(chunk("the first turn"))
            .expect("ingest");
        m.indexing()
            .search(&SearchRequest::new("first"))
            .expect("search");
        m
    }

    /// A write a server acknowledged is indexed in the background: the index is current
    /// again before any search asks (and a burst of writes is caught up by one thread).
    #[test]
    fn a_servers_write_is_indexed_before_the_next_search_asks() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let m = Arc::new(indexed_store(tmp.path()));
        assert!(!m.indexing().behind().expect("behind"));
        for i in 0..5 {
            m.sessions()
                .ingest_one(chunk(&format!("a later turn about kumquats {i}")))
                .expect("ingest");
            super::catch_up_soon(&m);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while m.indexing.soon.load(Ordering::Acquire) != 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the catch-up never ended"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            !m.indexing().behind().expect("behind"),
            "the writes are not indexed"
        );
        // Without it the index would wait for the search.
        m.sessions().ingest_one(chunk("one more")).expect("ingest");
        assert!(m.indexing().behind().expect("behind"));
    }

    /// A server's warm-up runs the store's startup (recovery, the scan for hand edits) and
    /// the catch-up, so the first request finds both done; a hand edit made before the server
    /// started is adopted by that startup.
    #[test]
    fn the_warm_up_runs_the_startup_and_the_catch_up_before_any_request() {
        let tmp = tempfile::tempdir().expect("tempdir");
        drop(indexed_store(tmp.path()));
        // Written by hand while no process runs: only a startup's scan adopts it.
        let file = std::fs::read_dir(tmp.path().join("sessions").join("s"))
            .expect("session dir")
            .next()
            .expect("a file")
            .expect("entry")
            .path();
        let mut text = std::fs::read_to_string(&file).expect("read");
        let line: serde_json::Value =
            serde_json::from_str(text.lines().next().expect("a line")).expect("json");
        let mut edited = line.clone();
        edited["content"] = serde_json::json!("a second turn about quinces");
        edited["seq"] = serde_json::json!(line["seq"].as_u64().expect("seq") + 1);
        text.push_str(&serde_json::to_string(&edited).expect("json"));
        text.push('\n');
        std::fs::write(&file, text).expect("write");

        let m = Arc::new(Memdir::open_lazy(tmp.path()));
        assert!(!*m.started.lock().expect("started"));
        super::warm_up(&m);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let started = *m.started.lock().expect("started");
            if started && !m.indexing().behind().expect("behind") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the warm-up never ended"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let got = m
            .indexing()
            .search(&SearchRequest::new("quinces"))
            .expect("search");
        assert_eq!(got.results.len(), 1, "{got:?}");
    }
}
