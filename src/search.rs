//! Query planning and execution over the [`SearchIndex`]: auto, BM25 and exact modes, filters,
//! a chunk's previous turn as weighted context, context windows and result shaping.
//!
//! Architecture Invariant: every engine and every fallback applies the same [`Filters`], as
//! zero-scoring required clauses, so a filter never changes a score.

use std::ops::Bound;

use serde::Deserialize;
use tantivy::collector::TopDocs;
use tantivy::collector::sort_key::{SortBySimilarityScore, SortByStaticFastValue};
use tantivy::query::{
    BooleanQuery, BoostQuery, ConstScoreQuery, EmptyQuery, Occur, PhraseQuery, Query, RangeQuery,
    TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption, Value as _};
use tantivy::tokenizer::TokenStream;
use tantivy::{DocAddress, Order, Score, Searcher, TantivyDocument, Term};

use crate::api::{ContextChunk, SearchHit};
use crate::error::{Error, Result};
use crate::index::SearchIndex;

/// Longest query, in characters; longer ones are an `invalid` error.
pub const MAX_QUERY_CHARS: usize = 10_000;
/// Default number of neighbours per side in a context window.
pub const DEFAULT_CONTEXT: usize = 3;
/// Most neighbours per side.
pub const MAX_CONTEXT: usize = 20;
/// Default characters of content per row before truncation.
pub const DEFAULT_MAX_CHARS: usize = 500;

/// Which engine to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Identifier-like or quoted queries go to exact first, then BM25.
    #[default]
    Auto,
    Bm25,
    Exact,
    /// By meaning alone: the nearest vectors (needs an embeddings provider).
    Semantic,
    /// BM25 and vectors fused (see [`fuse`]).
    Hybrid,
}

impl Mode {
    pub fn parse(s: &str) -> Result<Mode> {
        match s {
            "auto" => Ok(Mode::Auto),
            "bm25" | "fts" | "keyword" => Ok(Mode::Bm25),
            "exact" => Ok(Mode::Exact),
            "semantic" | "dense" | "vector" => Ok(Mode::Semantic),
            "hybrid" => Ok(Mode::Hybrid),
            _ => Err(Error::invalid(
                "mode",
                format!("mode must be auto, bm25, exact, semantic or hybrid; got {s:?}"),
            )),
        }
    }

    /// Whether this mode sends natural-language queries to `hybrid` when embeddings are
    /// configured: `auto` with a query that is neither quoted nor identifier-like.
    pub fn wants_hybrid(self, query: &str) -> bool {
        let q = query.trim();
        let quoted = q.len() >= 2 && q.starts_with('"') && q.ends_with('"');
        self == Mode::Auto && !quoted && !is_identifier_like(q)
    }
}

/// Which kinds of memory to search.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Chunk,
    Category,
}

impl Kind {
    pub fn parse(s: &str) -> Result<Kind> {
        match s {
            "chunk" | "chunks" | "session" => Ok(Kind::Chunk),
            "category" | "categories" => Ok(Kind::Category),
            _ => Err(Error::invalid(
                "kind",
                format!("kind must be chunk or category; got {s:?}"),
            )),
        }
    }
}

/// Filters every engine honours.
#[derive(Clone, Debug, Default)]
pub struct Filters {
    pub project: Option<String>,
    pub session_id: Option<String>,
    pub category: Option<String>,
    pub kind: Option<Kind>,
    /// Inclusive lower bound, ms since the epoch.
    pub since: Option<i64>,
    /// Inclusive upper bound, ms since the epoch.
    pub until: Option<i64>,
    /// Categories left out (those the caller may not read).
    pub hidden_categories: Vec<String>,
}

impl Filters {
    pub fn wants_chunks(&self) -> bool {
        self.kind != Some(Kind::Category) && self.category.is_none()
    }
    pub fn wants_categories(&self) -> bool {
        self.kind != Some(Kind::Chunk) && self.project.is_none() && self.session_id.is_none()
    }
}

/// A planned search.
#[derive(Clone, Debug)]
pub struct Request {
    pub query: String,
    pub mode: Mode,
    pub limit: usize,
    pub filters: Filters,
    pub context: usize,
    /// Characters of content per row; `None` for full text.
    pub max_chars: Option<usize>,
    /// Weight of a match in the previous turn (0 disables it).
    pub context_weight: f32,
}

/// One hit before shaping.
#[derive(Clone, Debug)]
enum Hit {
    Chunk {
        addr: Option<DocAddress>,
        session: String,
        position: u64,
        score: f32,
        order: u64,
    },
    Category {
        addr: DocAddress,
        score: f32,
        order: u64,
    },
}

impl Hit {
    fn score(&self) -> f32 {
        match self {
            Hit::Chunk { score, .. } | Hit::Category { score, .. } => *score,
        }
    }
    fn order(&self) -> u64 {
        match self {
            Hit::Chunk { order, .. } | Hit::Category { order, .. } => *order,
        }
    }
}

fn sort_hits(hits: &mut [Hit]) {
    hits.sort_by(|a, b| {
        b.score()
            .total_cmp(&a.score())
            .then(a.order().cmp(&b.order()))
    });
}

/// Query words with their positions, as the index analyzed them.
fn analyze(idx: &SearchIndex, text: &str) -> Result<Vec<(usize, String)>> {
    let mut a = idx.analyzer()?;
    let mut ts = a.token_stream(text);
    let mut out = Vec::new();
    while let Some(t) = ts.next() {
        out.push((t.position, t.text.clone()));
    }
    Ok(out)
}

/// Whether a query looks like an identifier, path, error code or code fragment.
pub fn is_identifier_like(q: &str) -> bool {
    let q = q.trim();
    if q.len() >= 2 && q.starts_with('"') && q.ends_with('"') {
        return true;
    }
    q.split_whitespace().any(|w| {
        let inner = w.trim_matches(|c: char| matches!(c, ',' | '?' | '!' | '.' | ';' | '(' | ')'));
        let has_sym = inner.chars().any(|c| {
            matches!(
                c,
                '_' | '='
                    | ':'
                    | '/'
                    | '\\'
                    | '.'
                    | '@'
                    | '#'
                    | '$'
                    | '%'
                    | '<'
                    | '>'
                    | '{'
                    | '}'
                    | '['
                    | ']'
                    | '|'
                    | '&'
                    | '*'
                    | '~'
                    | '`'
            )
        });
        let has_digit = inner.chars().any(|c| c.is_ascii_digit());
        let has_alpha = inner.chars().any(|c| c.is_alphabetic());
        let camel = inner.chars().skip(1).any(|c| c.is_uppercase())
            && inner.chars().any(|c| c.is_lowercase());
        let shout = inner.len() >= 4
            && inner
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            && has_alpha;
        (has_sym && inner.len() > 1) || (has_digit && has_alpha) || camel || shout
    })
}

fn filter_clauses(
    f: &Filters,
    session: Option<Field>,
    project: Option<Field>,
    category: Option<Field>,
    ts: Field,
) -> Vec<(Occur, Box<dyn Query>)> {
    let mut out: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    let mut push = |q: Box<dyn Query>| {
        out.push((
            Occur::Must,
            Box::new(ConstScoreQuery::new(q, 0.0)) as Box<dyn Query>,
        ))
    };
    if let (Some(s), Some(field)) = (&f.session_id, session) {
        push(Box::new(TermQuery::new(
            Term::from_field_text(field, s),
            IndexRecordOption::Basic,
        )));
    }
    if let (Some(p), Some(field)) = (&f.project, project) {
        push(Box::new(TermQuery::new(
            Term::from_field_text(field, p),
            IndexRecordOption::Basic,
        )));
    }
    if let (Some(c), Some(field)) = (&f.category, category) {
        push(Box::new(TermQuery::new(
            Term::from_field_text(field, c),
            IndexRecordOption::Basic,
        )));
    }
    if f.since.is_some() || f.until.is_some() {
        let lo = f
            .since
            .map(|v| Bound::Included(Term::from_field_i64(ts, v)))
            .unwrap_or(Bound::Unbounded);
        let hi = f
            .until
            .map(|v| Bound::Included(Term::from_field_i64(ts, v)))
            .unwrap_or(Bound::Unbounded);
        push(Box::new(RangeQuery::new(lo, hi)));
    }
    if let Some(field) = category {
        for c in &f.hidden_categories {
            out.push((
                Occur::MustNot,
                Box::new(TermQuery::new(
                    Term::from_field_text(field, c),
                    IndexRecordOption::Basic,
                )),
            ));
        }
    }
    out
}

fn with_filters(text: Box<dyn Query>, filters: Vec<(Occur, Box<dyn Query>)>) -> Box<dyn Query> {
    if filters.is_empty() {
        return text;
    }
    let mut clauses = vec![(Occur::Must, text)];
    clauses.extend(filters);
    Box::new(BooleanQuery::new(clauses))
}

/// Weight of a match in the previous turn's text (the `context` field) relative to a match in
/// the chunk itself.
pub const CONTEXT_WEIGHT: f32 = 0.5;

fn bm25_text_query(
    field: Field,
    context: Option<(Field, f32)>,
    words: &[(usize, String)],
) -> Box<dyn Query> {
    let mut seen = Vec::new();
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for (_, w) in words {
        if seen.contains(w) {
            continue;
        }
        seen.push(w.clone());
        clauses.push((
            Occur::Should,
            Box::new(TermQuery::new(
                Term::from_field_text(field, w),
                IndexRecordOption::WithFreqs,
            )),
        ));
        if let Some((cf, weight)) = context
            && weight > 0.0
        {
            let q = TermQuery::new(Term::from_field_text(cf, w), IndexRecordOption::WithFreqs);
            clauses.push((
                Occur::Should,
                Box::new(BoostQuery::new(Box::new(q), weight)),
            ));
        }
    }
    if clauses.is_empty() {
        return Box::new(EmptyQuery);
    }
    Box::new(BooleanQuery::new(clauses))
}

fn phrase_query(field: Field, words: &[(usize, String)]) -> Box<dyn Query> {
    match words.len() {
        0 => Box::new(EmptyQuery),
        1 => Box::new(TermQuery::new(
            Term::from_field_text(field, &words[0].1),
            IndexRecordOption::WithFreqs,
        )),
        _ => {
            let base = words[0].0;
            Box::new(PhraseQuery::new_with_offset(
                words
                    .iter()
                    .map(|(p, w)| (p - base, Term::from_field_text(field, w)))
                    .collect(),
            ))
        }
    }
}

/// The best `limit` hits after `offset`, by score, ties broken by the `order` fast field so the
/// result does not depend on how the index is split into segments.
///
/// Fast path: the plain score-ordered collector (which can skip blocks of documents that
/// cannot make the cut) fetches a few extra hits; when the last score needed is strictly above
/// the last score fetched, every tie at the cut is inside the fetched set and sorting it gives
/// the exact answer. Otherwise the full sort-key collector decides.
fn top(
    searcher: &Searcher,
    q: &dyn Query,
    limit: usize,
    offset: usize,
) -> Result<Vec<(f32, u64, DocAddress)>> {
    const SLACK: usize = 16;
    let want = offset + limit;
    let fast = TopDocs::with_limit(want + SLACK).order_by_score();
    let hits: Vec<(Score, DocAddress)> = searcher
        .search(q, &fast)
        .map_err(|e| Error::internal(format!("search: {e}")))?;
    let exhausted = hits.len() < want + SLACK;
    let decisive = exhausted
        || hits
            .get(want.saturating_sub(1))
            .zip(hits.last())
            .is_some_and(|(a, b)| a.0 > b.0 + a.0.abs() * 1e-4 + 1e-6);
    if decisive {
        // Block-skipping sums a document's term scores in an order that depends on how the index
        // is split into segments, so the last bits of a score can differ between two indexes of
        // the same files. Hits that can make the cut are re-scored in clause order, which is what
        // the exhaustive collector computes, so scores and ties are the same whatever the layout.
        let cut = hits
            .get(want.saturating_sub(1))
            .map(|h| h.0)
            .unwrap_or(f32::MIN);
        let margin = cut.abs() * 1e-4 + 1e-6;
        let mut candidates: Vec<(f32, DocAddress)> = hits
            .into_iter()
            .filter(|(raw, _)| *raw >= cut - margin)
            .collect();
        candidates.sort_by_key(|(_, a)| (a.segment_ord, a.doc_id));
        let weight = q
            .weight(tantivy::query::EnableScoring::enabled_from_searcher(
                searcher,
            ))
            .map_err(|e| Error::internal(format!("search: {e}")))?;
        let mut keyed: Vec<(f32, u64, DocAddress)> = Vec::with_capacity(candidates.len());
        let mut current: Option<(u32, Box<dyn tantivy::query::Scorer>)> = None;
        for (raw, addr) in candidates {
            let reader = searcher.segment_reader(addr.segment_ord);
            if current
                .as_ref()
                .is_none_or(|(ord, _)| *ord != addr.segment_ord)
            {
                let scorer = weight
                    .scorer(reader, 1.0)
                    .map_err(|e| Error::internal(format!("search: {e}")))?;
                current = Some((addr.segment_ord, scorer));
            }
            let (_, scorer) = current.as_mut().expect("invariant: set just above");
            // Documents are visited in ascending order within a segment, so one scorer seeks
            // forward through them.
            let score = if scorer.doc() <= addr.doc_id && scorer.seek(addr.doc_id) == addr.doc_id {
                scorer.score()
            } else {
                raw
            };
            let order = reader
                .fast_fields()
                .u64("order")
                .ok()
                .and_then(|col| col.first(addr.doc_id))
                .unwrap_or(u64::MAX);
            keyed.push((score, order, addr));
        }
        keyed.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        return Ok(keyed.into_iter().skip(offset).take(limit).collect());
    }
    let collector = TopDocs::with_limit(limit).and_offset(offset).order_by((
        (SortBySimilarityScore, Order::Desc),
        (SortByStaticFastValue::<u64>::for_field("order"), Order::Asc),
    ));
    let hits: Vec<((Score, Option<u64>), DocAddress)> = searcher
        .search(q, &collector)
        .map_err(|e| Error::internal(format!("search: {e}")))?;
    Ok(hits
        .into_iter()
        .map(|((s, o), a)| (s, o.unwrap_or(u64::MAX), a))
        .collect())
}

fn doc(searcher: &Searcher, addr: DocAddress) -> Result<TantivyDocument> {
    searcher
        .doc(addr)
        .map_err(|e| Error::internal(format!("stored document: {e}")))
}

fn get_str(d: &TantivyDocument, f: Field) -> String {
    d.get_first(f)
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_string()
}

fn get_u64(d: &TantivyDocument, f: Field) -> u64 {
    d.get_first(f).and_then(|v| v.as_u64()).unwrap_or(0)
}

fn get_i64(d: &TantivyDocument, f: Field) -> i64 {
    d.get_first(f).and_then(|v| v.as_i64()).unwrap_or(0)
}

/// Results of one search, shaped.
pub struct Outcome {
    pub engine: &'static str,
    pub results: Vec<SearchHit>,
    pub notes: Vec<String>,
}

fn truncate(s: &str, max: Option<usize>) -> (String, bool) {
    match max {
        Some(m) if s.chars().count() > m => (s.chars().take(m).collect(), true),
        _ => (s.to_string(), false),
    }
}

/// Runs a search.
pub fn run(idx: &SearchIndex, req: &Request) -> Result<Outcome> {
    let q = req.query.trim();
    if q.chars().count() > MAX_QUERY_CHARS {
        return Err(Error::too_large(
            "query",
            q.chars().count(),
            MAX_QUERY_CHARS,
            "characters",
        ));
    }
    if q.is_empty() {
        return Ok(Outcome {
            engine: "empty",
            results: Vec::new(),
            notes: Vec::new(),
        });
    }
    let mut notes = Vec::new();
    let quoted = q.len() >= 2 && q.starts_with('"') && q.ends_with('"');
    let literal = if quoted { &q[1..q.len() - 1] } else { q };
    let (hits, engine) = match req.mode {
        Mode::Exact => (exact(idx, literal, req, &mut notes)?, "exact"),
        Mode::Bm25 => (bm25(idx, q, req)?, "bm25"),
        Mode::Auto => {
            if quoted || is_identifier_like(q) {
                let hits = exact(idx, literal, req, &mut notes)?;
                if hits.is_empty() {
                    notes.push("no exact match; answered by BM25".to_string());
                    (bm25(idx, literal, req)?, "bm25")
                } else {
                    (hits, "exact")
                }
            } else {
                (bm25(idx, q, req)?, "bm25")
            }
        }
        // Without vectors (the service answers these modes with `run_dense` when it has them).
        Mode::Semantic | Mode::Hybrid => (bm25(idx, q, req)?, "keyword-fallback"),
    };
    let results = shape(idx, &hits, req)?;
    Ok(Outcome {
        engine,
        results,
        notes,
    })
}

/// The nearest documents by vector, each list best first, already filtered (the caller
/// applies [`Filters`] to its vectors the way the query clauses apply them to the index).
#[derive(Clone, Debug, Default)]
pub struct Dense {
    pub chunks: Vec<(f32, DocAddress)>,
    pub categories: Vec<(f32, DocAddress)>,
}

/// How many hits of each list enter a hybrid fusion.
pub const FUSION_DEPTH: usize = 50;
/// Weight of the dense score in a hybrid fusion (BM25 gets the rest).
pub const DENSE_WEIGHT: f32 = 0.4;

/// Weighted fusion of two ranked lists: each list's scores are min-max normalised to 0..=1
/// (a list of one scores 1), a key missing from a list scores 0 there, and the fused score is
/// `dense_weight × dense + (1 - dense_weight) × bm25`. Returns `(key, fused)` best first, ties
/// in key order. On chat recall this beat reciprocal rank fusion, which let weak dense hits
/// push good BM25 hits out (see bench/README.md).
pub fn fuse<K: Ord + Clone>(
    bm25: &[(K, f32)],
    dense: &[(K, f32)],
    dense_weight: f32,
) -> Vec<(K, f32)> {
    fn norm<K: Ord + Clone>(l: &[(K, f32)]) -> std::collections::BTreeMap<K, f32> {
        let lo = l.iter().map(|x| x.1).fold(f32::INFINITY, f32::min);
        let hi = l.iter().map(|x| x.1).fold(f32::NEG_INFINITY, f32::max);
        l.iter()
            .map(|(k, s)| {
                let n = if hi > lo { (s - lo) / (hi - lo) } else { 1.0 };
                (k.clone(), n)
            })
            .collect()
    }
    let (b, d) = (norm(bm25), norm(dense));
    let mut keys: Vec<K> = b.keys().chain(d.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    let mut out: Vec<(K, f32)> = keys
        .into_iter()
        .map(|k| {
            let s = dense_weight * d.get(&k).copied().unwrap_or(0.0)
                + (1.0 - dense_weight) * b.get(&k).copied().unwrap_or(0.0);
            (k, s)
        })
        .collect();
    out.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    out
}

fn chunk_hit(idx: &SearchIndex, s: &Searcher, addr: DocAddress, score: f32) -> Result<Hit> {
    let f = &idx.chunk_fields;
    let d = doc(s, addr)?;
    Ok(Hit::Chunk {
        addr: Some(addr),
        session: get_str(&d, f.session),
        position: get_u64(&d, f.position),
        score,
        order: fast_order(s, addr),
    })
}

fn fast_order(s: &Searcher, addr: DocAddress) -> u64 {
    s.segment_reader(addr.segment_ord)
        .fast_fields()
        .u64("order")
        .ok()
        .and_then(|col| col.first(addr.doc_id))
        .unwrap_or(u64::MAX)
}

/// Runs a `semantic` or `hybrid` search with the nearest vectors in `dense`. Hybrid fuses the
/// best [`FUSION_DEPTH`] BM25 hits of the filtered query with the dense lists ([`fuse`]);
/// chunks and categories are fused as one pool, so the engines' scales never meet.
pub fn run_dense(idx: &SearchIndex, req: &Request, dense: &Dense, hybrid: bool) -> Result<Outcome> {
    let q = req.query.trim();
    if q.chars().count() > MAX_QUERY_CHARS {
        return Err(Error::too_large(
            "query",
            q.chars().count(),
            MAX_QUERY_CHARS,
            "characters",
        ));
    }
    let cs = idx.chunks.reader.searcher();
    let gs = idx.categories.reader.searcher();
    // Keys: (0 chunk | 1 category, segment, doc).
    let key = |cat: bool, a: &DocAddress| (cat as u8, a.segment_ord, a.doc_id);
    let mut dense_list: Vec<((u8, u32, u32), f32)> = Vec::new();
    for (s, a) in dense.chunks.iter().take(FUSION_DEPTH) {
        dense_list.push((key(false, a), *s));
    }
    for (s, a) in dense.categories.iter().take(FUSION_DEPTH) {
        dense_list.push((key(true, a), *s));
    }
    let fused = if hybrid {
        let mut bm25_list = Vec::new();
        for (cat, score, addr) in bm25_pool(idx, q, req, FUSION_DEPTH)? {
            bm25_list.push((key(cat, &addr), score));
        }
        fuse(&bm25_list, &dense_list, DENSE_WEIGHT)
    } else {
        dense_list
    };
    // Order by score, then the identity order every engine breaks ties with; only the hits
    // kept are read from the document store.
    let mut ranked: Vec<(f32, u64, (u8, u32, u32))> = fused
        .into_iter()
        .map(|(k, score)| {
            let s = if k.0 == 1 { &gs } else { &cs };
            (score, fast_order(s, DocAddress::new(k.1, k.2)), k)
        })
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    ranked.truncate(req.limit);
    let mut hits = Vec::new();
    for (score, order, (cat, seg, doc_id)) in ranked {
        let addr = DocAddress::new(seg, doc_id);
        hits.push(if cat == 1 {
            Hit::Category { addr, score, order }
        } else {
            chunk_hit(idx, &cs, addr, score)?
        });
    }
    let results = shape(idx, &hits, req)?;
    Ok(Outcome {
        engine: if hybrid { "hybrid" } else { "semantic" },
        results,
        notes: Vec::new(),
    })
}

/// The best `depth` BM25 hits of each index under the filters, without reading documents:
/// `(is_category, score, address)`.
fn bm25_pool(
    idx: &SearchIndex,
    text: &str,
    req: &Request,
    depth: usize,
) -> Result<Vec<(bool, f32, DocAddress)>> {
    let words = analyze(idx, text)?;
    let mut out = Vec::new();
    if words.is_empty() {
        return Ok(out);
    }
    if req.filters.wants_chunks() {
        let f = &idx.chunk_fields;
        let s = idx.chunks.reader.searcher();
        let query = with_filters(
            bm25_text_query(f.content, Some((f.context, req.context_weight)), &words),
            filter_clauses(&req.filters, Some(f.session), Some(f.project), None, f.ts),
        );
        for (score, _, addr) in top(&s, query.as_ref(), depth, 0)? {
            out.push((false, score, addr));
        }
    }
    if req.filters.wants_categories() {
        let f = &idx.category_fields;
        let s = idx.categories.reader.searcher();
        let query = with_filters(
            bm25_text_query(f.content, None, &words),
            filter_clauses(&req.filters, None, None, Some(f.category), f.ts),
        );
        for (score, _, addr) in top(&s, query.as_ref(), depth, 0)? {
            out.push((true, score, addr));
        }
    }
    Ok(out)
}

fn bm25(idx: &SearchIndex, text: &str, req: &Request) -> Result<Vec<Hit>> {
    let words = analyze(idx, text)?;
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let mut hits = Vec::new();
    if req.filters.wants_chunks() {
        let f = &idx.chunk_fields;
        let s = idx.chunks.reader.searcher();
        let query = with_filters(
            bm25_text_query(f.content, Some((f.context, req.context_weight)), &words),
            filter_clauses(&req.filters, Some(f.session), Some(f.project), None, f.ts),
        );
        for (score, order, addr) in top(&s, query.as_ref(), req.limit, 0)? {
            let d = doc(&s, addr)?;
            hits.push(Hit::Chunk {
                addr: Some(addr),
                session: get_str(&d, f.session),
                position: get_u64(&d, f.position),
                score,
                order,
            });
        }
    }
    if req.filters.wants_categories() {
        let f = &idx.category_fields;
        let s = idx.categories.reader.searcher();
        let query = with_filters(
            bm25_text_query(f.content, None, &words),
            filter_clauses(&req.filters, None, None, Some(f.category), f.ts),
        );
        for (score, order, addr) in top(&s, query.as_ref(), req.limit, 0)? {
            hits.push(Hit::Category { addr, score, order });
        }
    }
    sort_hits(&mut hits);
    hits.truncate(req.limit);
    Ok(hits)
}

/// Chunks of `session` at positions `lo..=hi`.
fn session_range(f: &crate::index::ChunkFields, session: &str, lo: u64, hi: u64) -> Box<dyn Query> {
    // A disjunction of exact term lookups: a term-set query would walk the whole dictionary.
    let clauses: Vec<(Occur, Box<dyn Query>)> = (lo..=hi)
        .map(|p| {
            let t = Term::from_field_text(f.place, &crate::index::place_key(session, p));
            (
                Occur::Should,
                Box::new(TermQuery::new(t, IndexRecordOption::Basic)) as Box<dyn Query>,
            )
        })
        .collect();
    Box::new(BooleanQuery::new(clauses))
}

fn chunk_at(
    idx: &SearchIndex,
    s: &Searcher,
    session: &str,
    position: u64,
    filters: &Filters,
) -> Result<Option<(DocAddress, TantivyDocument)>> {
    let f = &idx.chunk_fields;
    let q = with_filters(
        session_range(f, session, position, position),
        filter_clauses(filters, Some(f.session), Some(f.project), None, f.ts),
    );
    match top(s, q.as_ref(), 1, 0)?.into_iter().next() {
        Some((_, _, addr)) => Ok(Some((addr, doc(s, addr)?))),
        None => Ok(None),
    }
}

/// The stored content of the chunk at `position` in `session`, if indexed.
pub fn stored_content_at(
    idx: &SearchIndex,
    session: &str,
    position: u64,
) -> Result<Option<String>> {
    let s = idx.chunks.reader.searcher();
    Ok(chunk_at(idx, &s, session, position, &Filters::default())?
        .map(|(_, d)| get_str(&d, idx.chunk_fields.content)))
}

/// Exact: the index narrows candidates by the phrase of the query's words; the stored text
/// verifies the literal, byte for byte. No false positives.
fn exact(
    idx: &SearchIndex,
    literal: &str,
    req: &Request,
    notes: &mut Vec<String>,
) -> Result<Vec<Hit>> {
    let words = analyze(idx, literal)?;
    if words.is_empty() || literal.is_empty() {
        notes.push("the query has no indexable words for exact search".to_string());
        return Ok(Vec::new());
    }
    const PAGE: usize = 256;
    const MAX_CANDIDATES: usize = 20_000;
    let mut hits = Vec::new();
    if req.filters.wants_chunks() {
        let f = &idx.chunk_fields;
        let s = idx.chunks.reader.searcher();
        let q = with_filters(
            phrase_query(f.content, &words),
            filter_clauses(&req.filters, Some(f.session), Some(f.project), None, f.ts),
        );
        let mut offset = 0;
        let mut found = 0;
        loop {
            let page = top(&s, q.as_ref(), PAGE, offset)?;
            for (score, order, addr) in &page {
                let d = doc(&s, *addr)?;
                if get_str(&d, f.content).contains(literal) {
                    hits.push(Hit::Chunk {
                        addr: Some(*addr),
                        session: get_str(&d, f.session),
                        position: get_u64(&d, f.position),
                        score: *score,
                        order: *order,
                    });
                    found += 1;
                }
            }
            offset += page.len();
            if page.len() < PAGE || found >= req.limit {
                break;
            }
            if offset >= MAX_CANDIDATES {
                notes.push(format!(
                    "exact search verified the best {MAX_CANDIDATES} candidates only"
                ));
                break;
            }
        }
    }
    if req.filters.wants_categories() {
        let f = &idx.category_fields;
        let s = idx.categories.reader.searcher();
        let q = with_filters(
            phrase_query(f.content, &words),
            filter_clauses(&req.filters, None, None, Some(f.category), f.ts),
        );
        for (score, order, addr) in top(&s, q.as_ref(), MAX_CANDIDATES, 0)? {
            let d = doc(&s, addr)?;
            if get_str(&d, f.text).contains(literal) {
                hits.push(Hit::Category { addr, score, order });
                if hits.len() >= req.limit * 2 {
                    break;
                }
            }
        }
    }
    sort_hits(&mut hits);
    hits.truncate(req.limit);
    Ok(hits)
}

/// The context window of a chunk: up to `n` neighbours per side from its own session.
pub fn window(
    idx: &SearchIndex,
    s: &Searcher,
    session: &str,
    position: u64,
    n: usize,
    max_chars: Option<usize>,
) -> Result<Vec<ContextChunk>> {
    let f = &idx.chunk_fields;
    let lo = position.saturating_sub(n as u64);
    let hi = position + n as u64;
    let q = session_range(f, session, lo, hi);
    let mut rows: Vec<ContextChunk> = Vec::new();
    for (_, _, addr) in top(s, q.as_ref(), 2 * n + 1, 0)? {
        let d = doc(s, addr)?;
        let p = get_u64(&d, f.position);
        let (content, truncated) = truncate(&get_str(&d, f.content), max_chars);
        rows.push(ContextChunk {
            position: p,
            content,
            chunk_id: get_str(&d, f.chunk_id),
            hit: (p == position).then_some(true),
            truncated: truncated.then_some(true),
        });
    }
    rows.sort_by_key(|r| r.position);
    Ok(rows)
}

fn shape(idx: &SearchIndex, hits: &[Hit], req: &Request) -> Result<Vec<SearchHit>> {
    let cs = idx.chunks.reader.searcher();
    let gs = idx.categories.reader.searcher();
    let mut out = Vec::with_capacity(hits.len());
    for h in hits {
        match h {
            Hit::Chunk {
                addr,
                session,
                position,
                score,
                ..
            } => {
                let f = &idx.chunk_fields;
                let d = match addr {
                    Some(a) => doc(&cs, *a)?,
                    None => continue,
                };
                let (content, truncated) = truncate(&get_str(&d, f.content), req.max_chars);
                let context = if req.context > 0 {
                    window(idx, &cs, session, *position, req.context, req.max_chars)?
                } else {
                    Vec::new()
                };
                out.push(SearchHit::Chunk {
                    session_id: session.clone(),
                    position: *position,
                    chunk_id: get_str(&d, f.chunk_id),
                    project: get_str(&d, f.project),
                    ts: crate::clock::rfc3339(get_i64(&d, f.ts)),
                    content,
                    score: *score,
                    context,
                    truncated: truncated.then_some(true),
                });
            }
            Hit::Category { addr, score, .. } => {
                let f = &idx.category_fields;
                let d = doc(&gs, *addr)?;
                let (text, truncated) = truncate(&get_str(&d, f.text), req.max_chars);
                out.push(SearchHit::Category {
                    category: get_str(&d, f.category),
                    key_path: get_str(&d, f.key_path),
                    content: text,
                    score: *score,
                    hash: get_str(&d, f.hash),
                    updated_at: crate::clock::rfc3339(get_i64(&d, f.ts)),
                    updated_by: get_str(&d, f.updated_by),
                    truncated: truncated.then_some(true),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifier_like_queries_route_to_exact() {
        for q in [
            "ECONNREFUSED 127.0.0.1:5432",
            "max_size=10",
            "src/main.rs",
            "\"exact phrase\"",
            "getUserById",
            "E0382",
            "HTTP 503",
        ] {
            assert!(is_identifier_like(q), "{q}");
        }
        for q in [
            "what did we decide about the database",
            "postgres pool timeout",
            "Why?",
        ] {
            assert!(!is_identifier_like(q), "{q}");
        }
    }

    #[test]
    fn fusion_normalises_each_list_and_weighs_dense_at_four_tenths() {
        let bm25 = [("a", 10.0), ("b", 5.0), ("c", 0.0)];
        let dense = [("c", 0.9), ("d", 0.5), ("b", 0.1)];
        let f = fuse(&bm25, &dense, 0.4);
        let get = |k| f.iter().find(|x| x.0 == k).unwrap().1;
        assert!((get("a") - 0.6).abs() < 1e-6);
        assert!((get("b") - 0.3).abs() < 1e-6); // 0.6 × 0.5 + 0.4 × 0
        assert!((get("c") - 0.4).abs() < 1e-6);
        assert!((get("d") - 0.2).abs() < 1e-6); // 0.4 × 0.5
        assert_eq!(
            f.iter().map(|x| x.0).collect::<Vec<_>>(),
            ["a", "c", "b", "d"]
        );
        // One list empty: the other alone decides, normalised.
        assert_eq!(fuse(&bm25, &[], 0.4)[0], ("a", 0.6));
        // A list of one scores 1.
        assert_eq!(fuse::<&str>(&[], &[("x", 0.2)], 0.4), vec![("x", 0.4)]);
    }
}
