//! The vector side of search: which documents have vectors, embedding the rest, and the
//! nearest documents to a query under the request's filters.
//!
//! The vectors follow the chunk and category indexes, which follow the change feed: a
//! tantivy segment never changes once written, so the documents of each segment are read once
//! (their text hashed, their filter fields kept) and looked up in the [`VectorCache`] by text
//! hash. What is not embedded yet is embedded in bounded steps: up to `max_per_search` texts
//! by each search, and in a server's background thread a batch at a time. A write is never
//! delayed by embedding. Until every indexed document has its vector, semantic and hybrid
//! searches answer by keywords and say how far embedding has come (`coverage`).
use crate::service::Indexing;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tantivy::index::SegmentId;
use tantivy::schema::Value as _;
use tantivy::{DocAddress, Searcher, TantivyDocument};

use memdir_api::error::{Error, Result};
use memdir_index::embed::{Embedder, Spec};
use memdir_index::index::SearchIndex;
use memdir_index::search::{Dense, FUSION_DEPTH, Filters, View};
use memdir_index::vector::{self, Hash, VectorCache, quantize};

const NO_ROW: u32 = u32::MAX;
/// How long one search spends embedding pending texts (checked between provider calls),
/// besides the `max_per_search` bound: a slow local model never holds a search for long.
const SEARCH_EMBED_BUDGET: Duration = Duration::from_millis(250);
/// How long a failed provider is left alone before it is tried again.
const BACKOFF: Duration = Duration::from_secs(30);

/// One indexed document as dense search sees it.
struct DocMeta {
    hash: Hash,
    /// The session of a chunk, the name of a category.
    group: Arc<str>,
    project: Arc<str>,
    ts: i64,
    row: u32,
}

#[derive(Default)]
struct Segments {
    segs: HashMap<SegmentId, Vec<DocMeta>>,
    /// Each segment's vector rows alone (`NO_ROW`: none yet), in document order: what a search
    /// without filters reads, 4 bytes a document instead of the whole `DocMeta`.
    rows: HashMap<SegmentId, Vec<u32>>,
}

/// The dense state of one process: its embedder, the vectors, the documents of the index.
pub(crate) struct DenseState {
    spec: Spec,
    embedder: Arc<dyn Embedder>,
    cache: VectorCache,
    chunks: Segments,
    categories: Segments,
    /// Texts without a vector, in hash order (a batch is the first entries: no sort).
    pending: BTreeMap<Hash, String>,
    /// At least how many documents have no vector yet (never fewer than there are): zero
    /// lets a search skip the passes over every document that look for them.
    unresolved: usize,
    /// The last failure of the provider, and when.
    failed: Option<(Instant, String)>,
    /// The cache's generation the rows above were taken in.
    generation: u64,
}

/// How far embedding has come: documents with a vector, documents indexed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Coverage {
    pub embedded: u64,
    pub total: u64,
}

impl Coverage {
    pub fn label(self) -> String {
        format!("{}/{}", self.embedded, self.total)
    }
}

/// Why a dense search could not be answered, with the coverage known then.
pub(crate) struct Fallback {
    pub reason: String,
    pub coverage: Option<Coverage>,
}

fn text_of(d: &TantivyDocument, f: tantivy::schema::Field) -> String {
    d.get_first(f)
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_string()
}

fn i64_of(d: &TantivyDocument, f: tantivy::schema::Field) -> i64 {
    d.get_first(f).and_then(|v| v.as_i64()).unwrap_or(0)
}

impl DenseState {
    fn open(meta_dir: &std::path::Path, spec: &Spec) -> std::result::Result<DenseState, String> {
        let embedder: Arc<dyn Embedder> = Arc::from(spec.open().map_err(|e| e.0)?);
        let dir = VectorCache::dir_for(&meta_dir.join("vectors"), &spec.model_id());
        let cache = VectorCache::open(&dir, &spec.model_id()).map_err(|e| e.0)?;
        Ok(DenseState {
            spec: spec.clone(),
            embedder,
            cache,
            chunks: Segments::default(),
            categories: Segments::default(),
            pending: BTreeMap::new(),
            unresolved: 0,
            failed: None,
            generation: 0,
        })
    }

    /// After the cache was read afresh (a forget rewrote it), every row taken before is
    /// stale: the documents are read again by the next [`DenseState::sync`].
    fn follow_cache(&mut self) {
        if self.cache.generation() != self.generation {
            self.generation = self.cache.generation();
            self.chunks = Segments::default();
            self.categories = Segments::default();
            self.pending.clear();
            self.unresolved = 0;
        }
    }

    /// Reads the documents of segments not seen yet and forgets those merged away.
    fn sync(&mut self, idx: &View<'_>) -> Result<()> {
        self.cache.reload().map_err(|e| Error::internal(e.0))?;
        self.follow_cache();
        let (cs, gs) = (&idx.cs, &idx.gs);
        let mut interned: HashMap<String, Arc<str>> = HashMap::new();
        let mut intern = |s: String| -> Arc<str> {
            interned
                .entry(s)
                .or_insert_with_key(|k| Arc::from(k.as_str()))
                .clone()
        };
        for (cat, searcher) in [(false, cs), (true, gs)] {
            let segs = if cat {
                &mut self.categories
            } else {
                &mut self.chunks
            };
            let live: HashSet<SegmentId> = searcher
                .segment_readers()
                .iter()
                .map(|r| r.segment_id())
                .collect();
            segs.segs.retain(|id, _| live.contains(id));
            segs.rows.retain(|id, _| live.contains(id));
            for reader in searcher.segment_readers() {
                if segs.segs.contains_key(&reader.segment_id()) {
                    continue;
                }
                let mut docs = Vec::with_capacity(reader.max_doc() as usize);
                // One pass over the document store, block by block (deleted documents
                // included, so the position in `docs` is the document id).
                let store = reader
                    .get_store_reader(1)
                    .map_err(|e| Error::internal(format!("document store: {e}")))?;
                let alive = reader.alive_bitset();
                let mut last = LastTurn::default();
                for (i, d) in store.iter::<TantivyDocument>(None).enumerate() {
                    let d = d.map_err(|e| Error::internal(format!("stored document: {e}")))?;
                    let live = alive.is_none_or(|a| a.is_alive(i as u32));
                    let text = dense_text(idx, cat, &d, live, &mut last)?;
                    let (group, project, ts) = if cat {
                        let gf = &idx.category_fields;
                        (text_of(&d, gf.category), String::new(), i64_of(&d, gf.ts))
                    } else {
                        let cf = &idx.chunk_fields;
                        (
                            text_of(&d, cf.session),
                            text_of(&d, cf.project),
                            i64_of(&d, cf.ts),
                        )
                    };
                    let hash = vector::hash(&text);
                    let row = self.cache.row(&hash).unwrap_or(NO_ROW);
                    if row == NO_ROW {
                        self.pending.entry(hash).or_insert(text);
                        self.unresolved += 1;
                    }
                    docs.push(DocMeta {
                        hash,
                        group: intern(group),
                        project: intern(project),
                        ts,
                        row,
                    });
                }
                segs.rows
                    .insert(reader.segment_id(), docs.iter().map(|d| d.row).collect());
                segs.segs.insert(reader.segment_id(), docs);
            }
        }
        self.resolve_rows();
        Ok(())
    }

    /// Points documents at vectors stored since they were read.
    fn resolve_rows(&mut self) {
        if self.unresolved == 0 {
            return;
        }
        let cache = &self.cache;
        let mut left = 0;
        for segs in [&mut self.chunks, &mut self.categories] {
            let Segments { segs, rows } = segs;
            for (id, docs) in segs.iter_mut() {
                let mut rs = rows.get_mut(id);
                for (i, d) in docs.iter_mut().enumerate().filter(|(_, d)| d.row == NO_ROW) {
                    match cache.row(&d.hash) {
                        Some(r) => {
                            d.row = r;
                            if let Some(slot) = rs.as_mut().and_then(|v| v.get_mut(i)) {
                                *slot = r;
                            }
                        }
                        None => left += 1,
                    }
                }
            }
        }
        self.unresolved = left;
        self.pending.retain(|h, _| cache.row(h).is_none());
    }

    fn coverage(&self, idx: &View<'_>) -> Coverage {
        if self.unresolved == 0 {
            // Every document read has a vector: the live documents of the segments read are
            // the total, as the full count below gives it, without a pass over each document.
            let mut total = 0u64;
            for (segs, searcher) in [(&self.chunks, &idx.cs), (&self.categories, &idx.gs)] {
                for reader in searcher.segment_readers() {
                    if segs.segs.contains_key(&reader.segment_id()) {
                        total += u64::from(reader.num_docs());
                    }
                }
            }
            return Coverage {
                embedded: total,
                total,
            };
        }
        let mut c = Coverage {
            embedded: 0,
            total: 0,
        };
        for (segs, searcher) in [(&self.chunks, &idx.cs), (&self.categories, &idx.gs)] {
            for reader in searcher.segment_readers() {
                let Some(docs) = segs.segs.get(&reader.segment_id()) else {
                    continue;
                };
                let alive = reader.alive_bitset();
                for (i, d) in docs.iter().enumerate() {
                    if alive.is_none_or(|a| a.is_alive(i as u32)) {
                        c.total += 1;
                        c.embedded += (d.row != NO_ROW) as u64;
                    }
                }
            }
        }
        c
    }

    /// Whether the provider failed recently (then it is not asked again yet).
    fn resting(&self) -> Option<String> {
        self.failed
            .as_ref()
            .filter(|(at, _)| at.elapsed() < BACKOFF)
            .map(|(_, why)| why.clone())
    }
}

/// A turn of fewer words than this ("A border collie mix!", "Yes, next Tuesday.") is embedded
/// after the turn before it, which says what it is about. Measured on the dev set
/// (bench/devset, hybrid with all-MiniLM-L6-v2): R@5 / R@10 / evidence shown 0.469 / 0.556 /
/// 0.630 with each turn alone, 0.490 / 0.605 / 0.653 with this; every turn with its previous
/// one gave 0.468 / 0.585 / 0.663 but fell on the old fixture (R@5 0.560 -> 0.485, here 0.537).
const SHORT_TURN_WORDS: usize = 8;

/// The last live chunk read in document order: the previous turn of the next one without a
/// lookup when both are in one segment, as a session's turns usually are.
#[derive(Default)]
struct LastTurn {
    session: String,
    position: u64,
    content: String,
}

/// The text a document is embedded as: a chunk's content, after the turn before it when the
/// chunk is short ([`SHORT_TURN_WORDS`]); a category value with its category's name and key
/// path. Its BLAKE3 keys the vector cache. `last` is the previous live chunk read (`alive`
/// says whether `d` is live; a deleted one is never shown and is embedded as itself).
fn dense_text(
    idx: &View<'_>,
    cat: bool,
    d: &TantivyDocument,
    alive: bool,
    last: &mut LastTurn,
) -> Result<String> {
    if cat {
        let gf = &idx.category_fields;
        return Ok(format!(
            "{} {}: {}",
            text_of(d, gf.category),
            text_of(d, gf.key_path),
            text_of(d, gf.text)
        ));
    }
    let cf = &idx.chunk_fields;
    let content = text_of(d, cf.content);
    if !alive {
        return Ok(content);
    }
    let session = text_of(d, cf.session);
    let position = d
        .get_first(cf.position)
        .and_then(|v| v.as_u64())
        .unwrap_or(0);
    let short = position > 0 && content.split_whitespace().count() < SHORT_TURN_WORDS;
    // The live chunk at a place is unique: the one just read, or the one the index holds.
    let prev = if !short {
        None
    } else if last.session == session && last.position + 1 == position {
        Some(last.content.clone())
    } else {
        memdir_index::search::stored_content_at(idx, &session, position - 1)?
    };
    let text = match prev {
        Some(p) => format!("{p}\n{content}"),
        None => content.clone(),
    };
    *last = LastTurn {
        session,
        position,
        content,
    };
    Ok(text)
}

/// The hashes of the texts every live document of the index is embedded as.
fn live_hashes(idx: &View<'_>) -> Result<HashSet<Hash>> {
    let mut out = HashSet::new();
    for (cat, searcher) in [(false, &idx.cs), (true, &idx.gs)] {
        for reader in searcher.segment_readers() {
            let store = reader
                .get_store_reader(1)
                .map_err(|e| Error::internal(format!("document store: {e}")))?;
            let mut last = LastTurn::default();
            for d in store.iter::<TantivyDocument>(reader.alive_bitset()) {
                let d = d.map_err(|e| Error::internal(format!("stored document: {e}")))?;
                out.insert(vector::hash(&dense_text(idx, cat, &d, true, &mut last)?));
            }
        }
    }
    Ok(out)
}

/// The texts of up to `max` pending documents, to embed outside the lock.
fn take_batch(state: &DenseState, max: usize) -> Vec<(Hash, String)> {
    // A stable order (by hash), so that processes working at once tend to embed the same
    // texts; the map keeps it, so a batch costs its own size, not the backlog's.
    state
        .pending
        .iter()
        .take(max)
        .map(|(h, t)| (*h, t.clone()))
        .collect()
}

/// Embeds `batch` in provider-sized calls and stores the vectors, telling `stored` how many
/// after each call. Returns how many were stored, or the provider's failure.
fn embed_batch(
    state: &Mutex<Option<DenseState>>,
    embedder: &Arc<dyn Embedder>,
    batch_size: usize,
    batch: Vec<(Hash, String)>,
    deadline: Option<Instant>,
    stored: Option<&dyn Fn(usize)>,
) -> std::result::Result<usize, String> {
    let mut done = 0;
    for part in batch.chunks(batch_size.max(1)) {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let texts: Vec<String> = part.iter().map(|(_, t)| t.clone()).collect();
        let vecs = embedder.embed(&texts, false).map_err(|e| e.0);
        let mut g = state
            .lock()
            .map_err(|_| "the vector state is poisoned".to_string())?;
        let Some(s) = g.as_mut() else {
            return Ok(done);
        };
        let vecs = match vecs {
            Ok(v) => v,
            Err(why) => {
                s.failed = Some((Instant::now(), why.clone()));
                return Err(why);
            }
        };
        if let Some(d) = s.cache.dims()
            && let Some(v) = vecs.iter().find(|v| v.len() != d)
        {
            let why = format!(
                "the provider returned vectors of {} dimensions where {d} are stored for this model",
                v.len()
            );
            s.failed = Some((Instant::now(), why.clone()));
            return Err(why);
        }
        let items: Vec<(Hash, Vec<f32>)> = part.iter().map(|(h, _)| *h).zip(vecs).collect();
        s.cache.insert(&items).map_err(|e| e.0)?;
        s.follow_cache();
        for (h, _) in &items {
            s.pending.remove(h);
        }
        done += items.len();
        drop(g);
        if let Some(f) = stored {
            f(items.len());
        }
    }
    // Documents point at their new vectors: one pass over every document per batch (not per
    // provider call, which made embedding a large backlog quadratic).
    if done > 0
        && let Ok(mut g) = state.lock()
        && let Some(s) = g.as_mut()
    {
        s.resolve_rows();
    }
    Ok(done)
}

fn passes(f: &Filters, cat: bool, d: &DocMeta) -> bool {
    if cat {
        if !f.wants_categories()
            || f.category.as_deref().is_some_and(|c| c != &*d.group)
            || f.hidden_categories.iter().any(|h| h == &*d.group)
        {
            return false;
        }
    } else if !f.wants_chunks()
        || f.session_id.as_deref().is_some_and(|s| s != &*d.group)
        || f.project.as_deref().is_some_and(|p| p != &*d.project)
    {
        return false;
    }
    f.since.is_none_or(|s| d.ts >= s) && f.until.is_none_or(|u| d.ts <= u)
}

/// How many documents per index the coarse pass (sign bits) keeps for the exact int8 pass.
const RESCORE: usize = 2_000;

/// The best `k` documents of one index by cosine with `q`, under the filters: the documents
/// that pass are ranked by the Hamming distance of their sign bits (`ham`, by row), the best
/// [`RESCORE`] are scored by int8 dot product, and the best `k` of those returned. Below
/// [`RESCORE`] documents every one is scored exactly.
/// A query vector and its coarse distances to every row of the cache.
struct Probe<'a> {
    cache: &'a VectorCache,
    q: vector::Quantized,
    ham: Vec<u16>,
}

fn nearest(
    segs: &Segments,
    searcher: &Searcher,
    probe: &Probe<'_>,
    filters: &Filters,
    cat: bool,
    k: usize,
) -> Vec<(f32, DocAddress)> {
    let (cache, q, ham) = (probe.cache, &probe.q, &probe.ham);
    // The documents that pass, in (segment, document) order, with their coarse distance.
    // Without filters on this index, only the rows are read.
    let plain = if cat {
        filters.wants_categories()
            && filters.category.is_none()
            && filters.hidden_categories.is_empty()
    } else {
        filters.wants_chunks() && filters.session_id.is_none() && filters.project.is_none()
    } && filters.since.is_none()
        && filters.until.is_none();
    let each = |f: &mut Visit<'_>| {
        for (ord, reader) in searcher.segment_readers().iter().enumerate() {
            let alive = reader.alive_bitset();
            if plain && let Some(rows) = segs.rows.get(&reader.segment_id()) {
                for (i, &row) in rows.iter().enumerate() {
                    if row == NO_ROW || alive.is_some_and(|a| !a.is_alive(i as u32)) {
                        continue;
                    }
                    f(
                        ham[row as usize],
                        row,
                        DocAddress::new(ord as u32, i as u32),
                    );
                }
                continue;
            }
            let Some(docs) = segs.segs.get(&reader.segment_id()) else {
                continue;
            };
            for (i, d) in docs.iter().enumerate() {
                if d.row == NO_ROW
                    || alive.is_some_and(|a| !a.is_alive(i as u32))
                    || !passes(filters, cat, d)
                {
                    continue;
                }
                f(
                    ham[d.row as usize],
                    d.row,
                    DocAddress::new(ord as u32, i as u32),
                );
            }
        }
    };
    let pool = coarse_best(&each, RESCORE);
    let mut scored: Vec<(f32, DocAddress)> = pool
        .into_iter()
        .map(|(row, addr)| (cache.score(q, row), addr))
        .collect();
    let by = |a: &(f32, DocAddress), b: &(f32, DocAddress)| {
        b.0.total_cmp(&a.0)
            .then((a.1.segment_ord, a.1.doc_id).cmp(&(b.1.segment_ord, b.1.doc_id)))
    };
    if scored.len() > k {
        scored.select_nth_unstable_by(k, by);
        scored.truncate(k);
    }
    scored.sort_by(by);
    scored
}

/// What a pass over the documents calls for each one that passes: its coarse distance, its
/// vector row and its address.
type Visit<'a> = dyn FnMut(u16, u32, DocAddress) + 'a;

/// The best `n` of the items `each` yields by (distance, segment, document), without a list of
/// every item: a histogram of the distances gives the cut `t` (every item nearer, then the
/// first items at `t` in the order `each` yields them, which is document order), and a second
/// pass collects them. At a million documents this is a few milliseconds where a list of all of
/// them and a selection over it cost tens.
fn coarse_best(each: &dyn Fn(&mut Visit<'_>), n: usize) -> Vec<(u32, DocAddress)> {
    let mut hist = vec![0usize; u16::MAX as usize + 1];
    each(&mut |h, _, _| hist[h as usize] += 1);
    let (mut t, mut below) = (u16::MAX as usize, 0usize);
    for (d, c) in hist.iter().enumerate() {
        if below + c >= n {
            t = d;
            break;
        }
        below += c;
    }
    let mut ties = n.saturating_sub(below);
    let mut pool: Vec<(u32, DocAddress)> = Vec::with_capacity(n.min(below + ties));
    each(&mut |h, row, addr| {
        if (h as usize) < t {
            pool.push((row, addr));
        } else if h as usize == t && ties > 0 {
            ties -= 1;
            pool.push((row, addr));
        }
    });
    pool
}

impl Indexing<'_> {
    /// After a forget: every model's vector cache keeps only the vectors of texts the index
    /// still holds, so no file keeps a forgotten text's hash (which would confirm a guess of
    /// it) or its vector. The index must be caught up first. Costs one pass over the stored
    /// documents, and nothing when no vectors were ever stored.
    pub(in crate::service) fn purge_vectors(&self) -> Result<()> {
        let dir = self.layout().meta_dir().join("vectors");
        if !VectorCache::any_in(&dir) {
            return Ok(());
        }
        let live = {
            let g = self.index_guard()?;
            let Some(idx) = g.as_ref() else {
                return Ok(());
            };
            live_hashes(&View::of(idx))?
        };
        VectorCache::retain_all(&dir, &|h| live.contains(h)).map_err(|e| Error::internal(e.0))?;
        Ok(())
    }

    /// The dense state, opened on first use; `Err` says why there is none.
    fn dense_state(&self) -> std::result::Result<Arc<Mutex<Option<DenseState>>>, String> {
        let Some(spec) = &self.settings.embeddings else {
            return Err(
                "no embeddings provider is configured ([embeddings] in the config file)".into(),
            );
        };
        let mut g = self
            .indexing
            .dense
            .lock()
            .map_err(|_| "the vector state is poisoned".to_string())?;
        if g.is_none() {
            *g = Some(DenseState::open(&self.layout().meta_dir(), spec)?);
        }
        Ok(self.indexing.dense.clone())
    }

    /// The nearest chunks and categories to `query` under `filters`, after embedding up to
    /// `max_per_search` pending texts; a [`Fallback`] when the provider fails or not every
    /// document has its vector yet.
    pub(crate) fn dense_hits(
        &self,
        idx: &View<'_>,
        query: &str,
        filters: &Filters,
    ) -> std::result::Result<(Dense, Coverage), Fallback> {
        let fb = |reason: String, coverage: Option<Coverage>| Fallback { reason, coverage };
        let shared = self.dense_state().map_err(|r| fb(r, None))?;
        let (embedder, batch, batch_size, resting) = {
            let mut g = shared
                .lock()
                .map_err(|_| fb("the vector state is poisoned".into(), None))?;
            let s = g
                .as_mut()
                .expect("invariant: the state is set while shared");
            s.sync(idx).map_err(|e| fb(e.message.clone(), None))?;
            let resting = s.resting();
            let max = s.spec.max_per_search;
            (
                s.embedder.clone(),
                if resting.is_none() {
                    take_batch(s, max)
                } else {
                    Vec::new()
                },
                s.spec.batch_size,
                resting,
            )
        };
        if let Some(why) = resting {
            let cov = shared
                .lock()
                .ok()
                .and_then(|g| g.as_ref().map(|s| s.coverage(idx)));
            return Err(fb(why, cov));
        }
        let deadline = Instant::now() + SEARCH_EMBED_BUDGET;
        let embedded = embed_batch(&shared, &embedder, batch_size, batch, Some(deadline), None);
        let g = shared
            .lock()
            .map_err(|_| fb("the vector state is poisoned".into(), None))?;
        let s = g
            .as_ref()
            .expect("invariant: the state is set while shared");
        let cov = s.coverage(idx);
        if let Err(why) = embedded {
            return Err(fb(why, Some(cov)));
        }
        if cov.embedded < cov.total {
            return Err(fb(
                format!(
                    "embedding is in progress: {} of {} documents have vectors (each search embeds up to {}; the embed operation does the rest at once)",
                    cov.embedded, cov.total, s.spec.max_per_search
                ),
                Some(cov),
            ));
        }
        let embedder = s.embedder.clone();
        drop(g);
        let qv = match embedder.embed(&[query.to_string()], true) {
            Ok(mut v) if v.len() == 1 => v.remove(0),
            Ok(_) => {
                return Err(fb(
                    "the provider returned no vector for the query".into(),
                    Some(cov),
                ));
            }
            Err(e) => {
                if let Ok(mut g) = shared.lock()
                    && let Some(s) = g.as_mut()
                {
                    s.failed = Some((Instant::now(), e.0.clone()));
                }
                return Err(fb(e.0, Some(cov)));
            }
        };
        let g = shared
            .lock()
            .map_err(|_| fb("the vector state is poisoned".into(), None))?;
        let s = g
            .as_ref()
            .expect("invariant: the state is set while shared");
        if let Some(d) = s.cache.dims()
            && d != qv.len()
        {
            return Err(fb(
                format!(
                    "the provider returned a query vector of {} dimensions where {d} are stored for this model",
                    qv.len()
                ),
                Some(cov),
            ));
        }
        let q = quantize(&qv);
        let probe = Probe {
            cache: &s.cache,
            ham: s.cache.hamming_all(&q),
            q,
        };
        let (cs, gs) = (&idx.cs, &idx.gs);
        let near =
            |segs, searcher, cat| nearest(segs, searcher, &probe, filters, cat, FUSION_DEPTH);
        let dense = Dense {
            chunks: near(&s.chunks, cs, false),
            categories: near(&s.categories, gs, true),
        };
        Ok((dense, cov))
    }

    /// Embeds every indexed text that has no vector yet (`memdir embed`): brings the index up
    /// to date, then embeds in provider-sized batches. Returns (embedded now, coverage, seconds).
    /// Embeds every pending text, reporting `(done, total)` to `progress` as it goes.
    pub(crate) fn embed_all(
        &self,
        progress: Option<&dyn Fn(u64, u64)>,
    ) -> Result<(usize, Coverage, f64)> {
        self.refresh_index()?;
        let shared = self
            .dense_state()
            .map_err(|r| Error::new(memdir_api::error::ErrorKind::Unavailable, r))?;
        let g = self.index_guard()?;
        let idx = &View::of(g.as_ref().expect("invariant: index_guard opens the index"));
        let start = Instant::now();
        let mut done = 0;
        let mut total = 0u64;
        let counted = std::cell::Cell::new(0u64);
        loop {
            let (embedder, batch, batch_size) = {
                let mut st = shared
                    .lock()
                    .map_err(|_| Error::internal("vector state poisoned"))?;
                let s = st
                    .as_mut()
                    .expect("invariant: the state is set while shared");
                s.sync(idx)?;
                s.failed = None;
                total = total.max(counted.get() + s.pending.len() as u64);
                (s.embedder.clone(), take_batch(s, 4096), s.spec.batch_size)
            };
            if batch.is_empty() {
                break;
            }
            let stored = |n: usize| {
                counted.set(counted.get() + n as u64);
                if let Some(p) = progress {
                    p(counted.get(), total);
                }
            };
            done += embed_batch(&shared, &embedder, batch_size, batch, None, Some(&stored))
                .map_err(|why| Error::new(memdir_api::error::ErrorKind::Unavailable, why))?;
        }
        let st = shared
            .lock()
            .map_err(|_| Error::internal("vector state poisoned"))?;
        let cov = st.as_ref().expect("invariant: set").coverage(idx);
        Ok((done, cov, start.elapsed().as_secs_f64()))
    }

    /// In a server: embeds what the index holds without vectors, a batch at a time, on a
    /// thread of its own, until this `Memdir` is dropped. It reads the server's own index
    /// once a search has opened it (that holds the commits the server keeps in memory), else
    /// a reader of its own, and never catches the index up itself (searches do).
    pub(crate) fn start_background_embedding(&self) {
        let Some(spec) = self.settings.embeddings.clone() else {
            return;
        };
        let weak = Arc::downgrade(&self.indexing.dense);
        let served = Arc::downgrade(&self.indexing.index);
        let dir = self.layout().index_dir();
        let meta = self.layout().meta_dir();
        let cfg = self.settings.analyzer.clone();
        let _ = std::thread::Builder::new()
            .name("memdir-embed".into())
            .spawn(move || {
                let mut idx: Option<SearchIndex> = None;
                loop {
                    std::thread::sleep(Duration::from_millis(500));
                    let Some(shared) = weak.upgrade() else {
                        return;
                    };
                    // Not waiting for a catch-up that holds it: the next round looks again.
                    let served = match served.upgrade().map(|m| match m.try_lock() {
                        Ok(g) => Ok(g.clone()),
                        Err(std::sync::TryLockError::WouldBlock) => Err(true),
                        Err(std::sync::TryLockError::Poisoned(_)) => Err(false),
                    }) {
                        Some(Ok(s)) => s,
                        Some(Err(true)) => continue,
                        // Gone, or a search panicked holding it (searches fail from then on).
                        Some(Err(false)) | None => return,
                    };
                    if served.is_none() && idx.is_none() && dir.join("chunks").exists() {
                        idx = SearchIndex::open(&dir, cfg.clone()).ok();
                    }
                    let i: &SearchIndex = match (&served, &idx) {
                        (Some(s), _) => {
                            // The server's index is open: a reader of its own is not needed.
                            idx = None;
                            s
                        }
                        (None, Some(i)) => {
                            let _ = i.chunks.refresh();
                            let _ = i.categories.refresh();
                            i
                        }
                        (None, None) => continue,
                    };
                    let work = {
                        let Ok(mut g) = shared.lock() else { return };
                        if g.is_none() {
                            match DenseState::open(&meta, &spec) {
                                Ok(s) => *g = Some(s),
                                Err(_) => return,
                            }
                        }
                        let Some(s) = g.as_mut() else { return };
                        if s.sync(&View::of(i)).is_err() || s.resting().is_some() {
                            None
                        } else {
                            let n = s.spec.batch_size.max(1);
                            Some((s.embedder.clone(), take_batch(s, n), n))
                        }
                    };
                    if let Some((e, batch, n)) = work
                        && !batch.is_empty()
                    {
                        let _ = embed_batch(&shared, &e, n, batch, None, None);
                    }
                }
            });
    }
}

impl Indexing<'_> {
    /// `embed`: embeds every indexed text without a vector.
    pub fn embed(&self) -> Result<memdir_api::EmbedResponse> {
        self.embed_with(None)
    }

    /// [`Self::embed`], reporting `(done, total)` to `progress` after each provider call.
    pub fn embed_with(
        &self,
        progress: Option<&dyn Fn(u64, u64)>,
    ) -> Result<memdir_api::EmbedResponse> {
        let Some(spec) = &self.settings.embeddings else {
            return Err(Error::invalid(
                "embeddings",
                "no embeddings provider is configured: add an [embeddings] section to the config file",
            ));
        };
        let (embedded, cov, seconds) = self.embed_all(progress)?;
        Ok(memdir_api::EmbedResponse {
            model_id: spec.model_id(),
            embedded,
            coverage: cov.label(),
            seconds,
            per_second: if seconds > 0.0 {
                embedded as f64 / seconds
            } else {
                0.0
            },
        })
    }

    /// `models`: the configured model and the model cache; with `fetch`, downloads a model.
    pub fn models(&self, req: &memdir_api::ModelsRequest) -> Result<memdir_api::ModelsResponse> {
        use memdir_index::embed::{Provider, fetch, missing_files};
        let cache = self.settings.model_cache.clone();
        let mut fetched = None;
        if let Some(repo) = &req.fetch {
            if !fetch::valid_repo(repo) {
                return Err(Error::invalid(
                    "fetch",
                    format!(
                        "{repo:?} is not a model name like sentence-transformers/all-MiniLM-L6-v2"
                    ),
                ));
            }
            let cache = cache.as_ref().ok_or_else(|| {
                Error::invalid(
                    "fetch",
                    "no model cache: neither XDG_CACHE_HOME nor HOME is set",
                )
            })?;
            let dir = fetch::fetch("https://huggingface.co", repo, cache)
                .map_err(|e| Error::new(memdir_api::error::ErrorKind::Unavailable, e.0))?;
            fetched = Some(dir.display().to_string());
        }
        let mut cached = Vec::new();
        if let Some(c) = &cache
            && let Ok(rd) = std::fs::read_dir(c)
        {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') || !e.path().is_dir() {
                    continue;
                }
                cached.push(memdir_api::CachedModel {
                    name: name.replacen("--", "/", 1),
                    dir: e.path().display().to_string(),
                    missing: missing_files(&e.path())
                        .iter()
                        .map(|s| s.to_string())
                        .collect(),
                });
            }
        }
        cached.sort_by(|a, b| a.name.cmp(&b.name));
        let spec = self.settings.embeddings.as_ref();
        let ready = spec.is_some_and(|s| match &s.provider {
            Provider::OpenAi(_) => true,
            Provider::Local(l) => {
                cfg!(feature = "local-embeddings") && missing_files(&l.dir).is_empty()
            }
        });
        Ok(memdir_api::ModelsResponse {
            configured: spec.map(memdir_index::embed::Spec::shown),
            ready,
            local_provider_built: cfg!(feature = "local-embeddings"),
            cache_dir: cache.map(|c| c.display().to_string()),
            cached,
            fetched,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The histogram selection keeps exactly the items a full sort by (distance, segment,
    /// document) would keep, ties included, and everything when there are fewer.
    #[test]
    fn the_coarse_pass_keeps_what_a_full_sort_keeps() {
        let mut seed = 7u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for (len, spread) in [(10_000usize, 20u64), (5_000, 400), (150, 3), (0, 1)] {
            let items: Vec<(u16, u32, DocAddress)> = (0..len)
                .map(|i| {
                    let h = if next() % 50 == 0 {
                        u16::MAX
                    } else {
                        (next() % spread) as u16
                    };
                    (
                        h,
                        i as u32,
                        DocAddress::new((i / 1000) as u32, (i % 1000) as u32),
                    )
                })
                .collect();
            let each = |f: &mut Visit<'_>| {
                for &(h, r, a) in &items {
                    f(h, r, a);
                }
            };
            for n in [1usize, 200, 2_000] {
                let mut got: Vec<u32> = coarse_best(&each, n).into_iter().map(|(r, _)| r).collect();
                let mut want = items.clone();
                want.sort_by_key(|&(h, _, a)| (h, a.segment_ord, a.doc_id));
                let mut want: Vec<u32> = want.into_iter().take(n).map(|(_, r, _)| r).collect();
                got.sort_unstable();
                want.sort_unstable();
                assert_eq!(got, want, "len {len}, spread {spread}, n {n}");
            }
        }
    }
}
